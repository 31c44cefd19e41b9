/*
 * The body parsers and the expression language of `metrics` monitors (see metrics_parse.h).
 *
 * The prometheus parser walks the body once with a cursor; strings (names, unescaped label
 * values) are copied into one buffer of the body's size, which is enough because every copied
 * string is at most as long as its source text plus a terminator that replaces a delimiter.
 * Parsing a body for expressions keeps the samples (a compact array) so that each expression
 * is a scan over them rather than another parse.
 */
#include "health/metrics_parse.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"

#define EXPR_PATH_MAX   32 /* json path components */
#define NUMBER_TEXT_MAX 64 /* longest number token we read */

static const char *const format_names[] = {
    [METRICS_PROMETHEUS] = "prometheus",
    [METRICS_JSON] = "json",
    [METRICS_NGINX_STUB_STATUS] = "nginx-stub-status",
};

/* The stub_status fields, in the order the page shows them. */
enum {
	STUB_ACTIVE,
	STUB_ACCEPTS,
	STUB_HANDLED,
	STUB_REQUESTS,
	STUB_READING,
	STUB_WRITING,
	STUB_WAITING,
	STUB_N
};

static const char *const stub_names[STUB_N] = {
    [STUB_ACTIVE] = "active",     [STUB_ACCEPTS] = "accepts", [STUB_HANDLED] = "handled",
    [STUB_REQUESTS] = "requests", [STUB_READING] = "reading", [STUB_WRITING] = "writing",
    [STUB_WAITING] = "waiting",
};

int metrics_format_parse(const char *name, metrics_format_t *out)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(format_names); i++) {
		if (strcmp(name, format_names[i]) == 0) {
			*out = (metrics_format_t)i;
			return 0;
		}
	}
	return STEER_EINVAL;
}

const char *metrics_format_name(metrics_format_t format)
{
	return (size_t)format < STEER_ARRAY_LEN(format_names) ? format_names[format] : "?";
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...) STEER_PRINTF(4, 5);

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

/* A number token (strtod's forms, NaN and Inf included) of @p len bytes. */
static bool number_parse(const char *text, size_t len, double *out)
{
	char buf[NUMBER_TEXT_MAX + 1];
	if (len == 0 || len > NUMBER_TEXT_MAX)
		return false;
	memcpy(buf, text, len);
	buf[len] = '\0';
	char *end = NULL;
	errno = 0;
	double v = strtod(buf, &end);
	if (end != buf + len)
		return false;
	/* Overflow gives +-HUGE_VAL (infinite, which a body may say anyway); underflow is 0. */
	*out = v;
	return true;
}

/* ---------------------------------------------------------------------------------------- */
/* Prometheus text format */

typedef struct {
	const char *p, *end;
	size_t line;
	char *out; /* next free byte of the string buffer */
	char *err;
	size_t errlen;
	int ret; /* sticky: the first error */
} prom_cursor_t;

static int prom_fail(prom_cursor_t *c, const char *fmt, ...) STEER_PRINTF(2, 3);

static int prom_fail(prom_cursor_t *c, const char *fmt, ...)
{
	if (c->ret)
		return c->ret;
	int n = snprintf(c->err, c->errlen, "line %zu: ", c->line);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < c->errlen)
		vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	c->ret = STEER_EINVAL;
	return c->ret;
}

static void skip_blanks(prom_cursor_t *c)
{
	while (c->p < c->end && is_blank(*c->p))
		c->p++;
}

static bool at_eol(const prom_cursor_t *c)
{
	return c->p >= c->end || *c->p == '\n' ||
	       (*c->p == '\r' && (c->p + 1 >= c->end || c->p[1] == '\n'));
}

static void skip_line(prom_cursor_t *c)
{
	while (c->p < c->end && *c->p != '\n')
		c->p++;
}

/* A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or, without @p colon, a label name; copied. */
static const char *read_name(prom_cursor_t *c, bool colon, const char *what)
{
	const char *start = c->p;
	if (c->p < c->end && (is_name_start(*c->p) || (colon && *c->p == ':')))
		c->p++;
	else {
		prom_fail(c, "expected a %s", what);
		return NULL;
	}
	while (c->p < c->end && (is_name_char(*c->p) || (colon && *c->p == ':')))
		c->p++;
	size_t len = (size_t)(c->p - start);
	char *s = c->out;
	memcpy(s, start, len);
	s[len] = '\0';
	c->out += len + 1;
	return s;
}

/* A quoted label value with the escapes \\ \" \n; copied unescaped. */
static const char *read_label_value(prom_cursor_t *c, const char *label)
{
	if (c->p >= c->end || *c->p != '"') {
		prom_fail(c, "label %s: expected '\"'", label);
		return NULL;
	}
	c->p++;
	char *s = c->out, *o = c->out;
	for (;;) {
		if (c->p >= c->end || *c->p == '\n') {
			prom_fail(c, "label %s: unterminated value", label);
			return NULL;
		}
		char ch = *c->p++;
		if (ch == '"')
			break;
		if (ch == '\0') {
			prom_fail(c, "label %s: NUL byte in value", label);
			return NULL;
		}
		if (ch == '\\') {
			char esc = c->p < c->end ? *c->p++ : '\0';
			if (esc == 'n')
				ch = '\n';
			else if (esc == '\\' || esc == '"')
				ch = esc;
			else {
				prom_fail(c,
				          "label %s: bad escape in value (only \\\\, \\\" and \\n)",
				          label);
				return NULL;
			}
		}
		*o++ = ch;
	}
	*o++ = '\0';
	c->out = o;
	return s;
}

/* "{name="value",...}" after the metric name; labels into @p labels (at most the max). */
static size_t read_labels(prom_cursor_t *c, metrics_label_t *labels)
{
	size_t n = 0;
	c->p++; /* '{' */
	for (;;) {
		skip_blanks(c);
		if (c->p < c->end && *c->p == '}') {
			c->p++;
			return n;
		}
		if (n == METRICS_LABELS_MAX) {
			prom_fail(c, "more than %d labels", METRICS_LABELS_MAX);
			return 0;
		}
		const char *name = read_name(c, false, "label name or '}'");
		if (!name)
			return 0;
		skip_blanks(c);
		if (c->p >= c->end || *c->p != '=') {
			prom_fail(c, "label %s: expected '='", name);
			return 0;
		}
		c->p++;
		skip_blanks(c);
		const char *value = read_label_value(c, name);
		if (!value)
			return 0;
		for (size_t i = 0; i < n; i++) {
			if (strcmp(labels[i].name, name) == 0) {
				prom_fail(c, "label %s given twice", name);
				return 0;
			}
		}
		labels[n++] = (metrics_label_t){name, value};
		skip_blanks(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			continue;
		}
		if (c->p < c->end && *c->p == '}') {
			c->p++;
			return n;
		}
		prom_fail(c, "expected ',' or '}' after label %s", name);
		return 0;
	}
}

/* The next blank-delimited token of the line. */
static size_t read_token(prom_cursor_t *c, const char **start)
{
	*start = c->p;
	while (c->p < c->end && !is_blank(*c->p) && *c->p != '\n' && *c->p != '\r')
		c->p++;
	return (size_t)(c->p - *start);
}

static bool timestamp_parse(const char *t, size_t len, int64_t *out)
{
	size_t i = 0;
	bool neg = false;
	if (len && (t[0] == '-' || t[0] == '+')) {
		neg = t[0] == '-';
		i++;
	}
	if (i == len || len - i > 18) /* 18 digits cannot overflow an int64 */
		return false;
	int64_t v = 0;
	for (; i < len; i++) {
		if (t[i] < '0' || t[i] > '9')
			return false;
		v = v * 10 + (t[i] - '0');
	}
	*out = neg ? -v : v;
	return true;
}

/* "# HELP name ..." and "# TYPE name type" are checked; other comments are free text. */
static void read_comment(prom_cursor_t *c)
{
	c->p++; /* '#' */
	skip_blanks(c);
	const char *word;
	size_t len = read_token(c, &word);
	bool help = len == 4 && memcmp(word, "HELP", 4) == 0;
	bool type = len == 4 && memcmp(word, "TYPE", 4) == 0;
	if (!help && !type) {
		skip_line(c);
		return;
	}
	skip_blanks(c);
	char *mark = c->out;
	if (!read_name(c, true, "metric name after # HELP/TYPE"))
		return;
	c->out = mark; /* the name is not kept */
	if (help) {
		skip_line(c);
		return;
	}
	skip_blanks(c);
	len = read_token(c, &word);
	static const char *const types[] = {"counter", "gauge", "histogram", "summary", "untyped"};
	bool known = false;
	for (size_t i = 0; i < STEER_ARRAY_LEN(types); i++)
		known |= len == strlen(types[i]) && memcmp(word, types[i], len) == 0;
	if (!known) {
		prom_fail(c, "unknown metric type '%.*s'", (int)(len > 32 ? 32 : len), word);
		return;
	}
	skip_blanks(c);
	if (!at_eol(c))
		prom_fail(c, "unexpected text after the metric type");
}

/* One sample line into @p s (strings in the cursor's buffer). */
static void read_sample(prom_cursor_t *c, metrics_sample_t *s, metrics_label_t *labels)
{
	*s = (metrics_sample_t){.labels = labels};
	s->name = read_name(c, true, "metric name");
	if (!s->name)
		return;
	skip_blanks(c);
	if (c->p < c->end && *c->p == '{') {
		s->n_labels = read_labels(c, labels);
		if (c->ret)
			return;
		skip_blanks(c);
	}
	const char *tok;
	size_t len = read_token(c, &tok);
	if (len == 0) {
		prom_fail(c, "%s: expected a value", s->name);
		return;
	}
	if (!number_parse(tok, len, &s->value)) {
		prom_fail(c, "%s: '%.*s' is not a number", s->name, (int)(len > 32 ? 32 : len),
		          tok);
		return;
	}
	skip_blanks(c);
	if (!at_eol(c)) {
		len = read_token(c, &tok);
		if (!timestamp_parse(tok, len, &s->timestamp_ms)) {
			prom_fail(c, "%s: '%.*s' is not a timestamp (integer milliseconds)",
			          s->name, (int)(len > 32 ? 32 : len), tok);
			return;
		}
		s->has_timestamp = true;
		skip_blanks(c);
		if (!at_eol(c))
			prom_fail(c, "%s: unexpected text after the timestamp", s->name);
	}
}

/* The parse with a caller-provided string buffer of at least len + 1 bytes. */
static int prom_walk(const char *body, size_t len, char *strings, metrics_sample_cb cb, void *ctx,
                     char *err, size_t errlen)
{
	prom_cursor_t c = {
	    .p = body, .end = body + len, .line = 1, .out = strings, .err = err, .errlen = errlen};
	metrics_label_t labels[METRICS_LABELS_MAX];
	while (c.p < c.end && !c.ret) {
		skip_blanks(&c);
		if (at_eol(&c)) {
			/* blank line */
		} else if (*c.p == '#') {
			read_comment(&c);
		} else {
			metrics_sample_t s;
			read_sample(&c, &s, labels);
			if (!c.ret) {
				int ret = cb(&s, ctx);
				if (ret)
					return ret;
			}
		}
		if (c.ret)
			break;
		if (c.p < c.end && *c.p == '\r')
			c.p++;
		if (c.p < c.end && *c.p == '\n')
			c.p++;
		c.line++;
	}
	return c.ret;
}

int metrics_prom_parse(const char *body, size_t len, metrics_sample_cb cb, void *ctx, char *err,
                       size_t errlen)
{
	char *strings = xmalloc(len + 1);
	int ret = prom_walk(body ? body : "", body ? len : 0, strings, cb, ctx, err, errlen);
	free(strings);
	return ret;
}

/* ---------------------------------------------------------------------------------------- */
/* Parsed bodies */

typedef struct {
	const char *name;
	size_t label0; /* index of the first label in the doc's array */
	size_t n_labels;
	double value;
} stored_sample_t;

struct metrics_doc {
	metrics_format_t format;
	/* prometheus */
	char *strings; /* owned: names and label values */
	stored_sample_t *samples;
	size_t n_samples, cap_samples;
	metrics_label_t *labels;
	size_t n_labels, cap_labels;
	/* json */
	json_t *json;
	/* nginx-stub-status */
	double stub[STUB_N];
};

static int keep_sample(const metrics_sample_t *s, void *ctx)
{
	metrics_doc_t *d = ctx;
	if (d->n_samples == d->cap_samples) {
		d->cap_samples = d->cap_samples ? d->cap_samples * 2 : 256;
		d->samples = xrealloc(d->samples, d->cap_samples * sizeof(*d->samples));
	}
	if (d->n_labels + s->n_labels > d->cap_labels) {
		while (d->n_labels + s->n_labels > d->cap_labels)
			d->cap_labels = d->cap_labels ? d->cap_labels * 2 : 512;
		d->labels = xrealloc(d->labels, d->cap_labels * sizeof(*d->labels));
	}
	if (s->n_labels) /* labels is NULL until the first labelled sample */
		memcpy(d->labels + d->n_labels, s->labels, s->n_labels * sizeof(*s->labels));
	d->samples[d->n_samples++] = (stored_sample_t){s->name, d->n_labels, s->n_labels, s->value};
	d->n_labels += s->n_labels;
	return 0;
}

/* Room for every sample (at most one a line) and label (each has an '='), so a big body is
 * not copied over and over by growing arrays. */
static void doc_presize(metrics_doc_t *d, const char *body, size_t len)
{
	size_t lines = 1, eqs = 0;
	for (const char *p = body, *end = body + len; (p = memchr(p, '\n', (size_t)(end - p))); p++)
		lines++;
	for (const char *p = body, *end = body + len; (p = memchr(p, '=', (size_t)(end - p))); p++)
		eqs++;
	d->cap_samples = lines;
	d->samples = xmalloc(lines * sizeof(*d->samples));
	d->cap_labels = eqs ? eqs : 1;
	d->labels = xmalloc(d->cap_labels * sizeof(*d->labels));
}

/* The stub_status page: fixed words with the numbers between them. */
static int stub_parse(metrics_doc_t *d, const char *body, size_t len, char *err, size_t errlen)
{
	static const char *const words[] = {
	    "Active", "connections:", "#", "server",   "accepts", "handled",  "requests", "#", "#",
	    "#",      "Reading:",     "#", "Writing:", "#",       "Waiting:", "#"};
	static const int slot[] = {
	    -1,           -1,           STUB_ACTIVE,   -1, -1,           -1, -1,
	    STUB_ACCEPTS, STUB_HANDLED, STUB_REQUESTS, -1, STUB_READING, -1, STUB_WRITING,
	    -1,           STUB_WAITING};
	const char *p = body, *end = body + len;
	for (size_t w = 0; w < STEER_ARRAY_LEN(words); w++) {
		while (p < end && (is_blank(*p) || *p == '\n' || *p == '\r'))
			p++;
		const char *tok = p;
		while (p < end && !is_blank(*p) && *p != '\n' && *p != '\r')
			p++;
		size_t n = (size_t)(p - tok);
		if (words[w][0] != '#') {
			if (n != strlen(words[w]) || memcmp(tok, words[w], n) != 0)
				return fail(err, errlen, STEER_EINVAL,
				            "not a stub_status page: expected '%s'", words[w]);
			continue;
		}
		double v = 0;
		bool digits = n > 0 && n <= 19;
		for (size_t i = 0; digits && i < n; i++) {
			digits = tok[i] >= '0' && tok[i] <= '9';
			v = v * 10 + (tok[i] - '0');
		}
		if (!digits)
			return fail(err, errlen, STEER_EINVAL,
			            "not a stub_status page: expected a number after '%s'",
			            words[w - 1]);
		d->stub[slot[w]] = v;
	}
	while (p < end && (is_blank(*p) || *p == '\n' || *p == '\r'))
		p++;
	if (p != end)
		return fail(err, errlen, STEER_EINVAL,
		            "not a stub_status page: text after 'Waiting:'");
	return 0;
}

int metrics_doc_parse(metrics_format_t format, const char *body, size_t len, metrics_doc_t **out,
                      char *err, size_t errlen)
{
	metrics_doc_t *d = xcalloc(1, sizeof(*d));
	d->format = format;
	if (!body)
		len = 0;
	int ret = 0;
	switch (format) {
	case METRICS_PROMETHEUS:
		doc_presize(d, body ? body : "", len);
		d->strings = xmalloc(len + 1);
		ret = prom_walk(body ? body : "", len, d->strings, keep_sample, d, err, errlen);
		break;
	case METRICS_JSON: {
		json_error_t jerr;
		d->json = json_loadb(body ? body : "", len, 0, &jerr);
		if (!d->json)
			ret = fail(err, errlen, STEER_EINVAL, "line %d column %d: %s", jerr.line,
			           jerr.column, jerr.text);
		break;
	}
	case METRICS_NGINX_STUB_STATUS:
		ret = stub_parse(d, body ? body : "", len, err, errlen);
		break;
	default:
		ret = fail(err, errlen, STEER_EINVAL, "unknown format %d", (int)format);
	}
	if (ret) {
		metrics_doc_free(d);
		return ret;
	}
	*out = d;
	return 0;
}

void metrics_doc_free(metrics_doc_t *d)
{
	if (!d)
		return;
	free(d->strings);
	free(d->samples);
	free(d->labels);
	json_decref(d->json);
	free(d);
}

/* ---------------------------------------------------------------------------------------- */
/* Expressions */

typedef enum { SCALE_NONE, SCALE_MUL, SCALE_DIV } scale_t;

struct metrics_expr {
	metrics_format_t format;
	bool rate;
	scale_t scale;
	double factor;
	char *text; /* the source, for messages */
	/* prometheus: the name and required labels (strings in @c strings) */
	char *strings;
	const char *name;
	metrics_label_t labels[METRICS_LABELS_MAX];
	size_t n_labels;
	/* json: the path components (in @c strings) */
	const char *path[EXPR_PATH_MAX];
	size_t n_path;
	/* nginx */
	int stub;
};

typedef struct {
	const char *text, *p;
	char *err;
	size_t errlen;
} expr_cursor_t;

static int expr_fail(expr_cursor_t *c, const char *fmt, ...) STEER_PRINTF(2, 3);

static int expr_fail(expr_cursor_t *c, const char *fmt, ...)
{
	int n = snprintf(c->err, c->errlen, "at %zu: ", (size_t)(c->p - c->text) + 1);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < c->errlen)
		vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return STEER_EINVAL;
}

static void expr_blanks(expr_cursor_t *c)
{
	while (is_blank(*c->p))
		c->p++;
}

/* NAME{label="value",...}: the body grammar, so the same cursor code reads it. */
static int expr_prom_selector(expr_cursor_t *ec, metrics_expr_t *e)
{
	size_t len = strlen(ec->p);
	e->strings = xmalloc(len + 1);
	prom_cursor_t c = {
	    .p = ec->p, .end = ec->p + len, .line = 1, .out = e->strings, .err = NULL, .errlen = 0};
	char msg[128] = "";
	c.err = msg;
	c.errlen = sizeof(msg);
	e->name = read_name(&c, true, "metric name");
	if (!c.ret) {
		skip_blanks(&c);
		if (c.p < c.end && *c.p == '{')
			e->n_labels = read_labels(&c, e->labels);
	}
	if (c.ret) {
		ec->p = c.p;
		/* "line 1: " is noise in a one-line expression */
		const char *why = strncmp(msg, "line 1: ", 8) == 0 ? msg + 8 : msg;
		return expr_fail(ec, "%s", why);
	}
	ec->p = c.p;
	return 0;
}

static bool is_path_char(char c)
{
	return c && !is_blank(c) && c != '.' && c != '(' && c != ')' && c != '*' && c != '/' &&
	       (unsigned char)c > 0x20 && c != 0x7f;
}

static int expr_json_path(expr_cursor_t *c, metrics_expr_t *e)
{
	size_t len = strlen(c->p);
	e->strings = xmalloc(len + 1);
	char *o = e->strings;
	for (;;) {
		const char *start = c->p;
		while (is_path_char(*c->p))
			c->p++;
		if (c->p == start)
			return expr_fail(c, "expected a path component (a.b.0.c)");
		if (e->n_path == EXPR_PATH_MAX)
			return expr_fail(c, "more than %d path components", EXPR_PATH_MAX);
		size_t n = (size_t)(c->p - start);
		memcpy(o, start, n);
		o[n] = '\0';
		e->path[e->n_path++] = o;
		o += n + 1;
		if (*c->p != '.')
			return 0;
		c->p++;
	}
}

static int expr_stub_name(expr_cursor_t *c, metrics_expr_t *e)
{
	const char *start = c->p;
	while (is_name_char(*c->p))
		c->p++;
	size_t n = (size_t)(c->p - start);
	for (int i = 0; i < STUB_N; i++) {
		if (n == strlen(stub_names[i]) && memcmp(start, stub_names[i], n) == 0) {
			e->stub = i;
			return 0;
		}
	}
	c->p = start;
	return expr_fail(c, "expected one of active, reading, writing, waiting, accepts, handled, "
	                    "requests");
}

static int expr_selector(expr_cursor_t *c, metrics_expr_t *e)
{
	switch (e->format) {
	case METRICS_PROMETHEUS:
		return expr_prom_selector(c, e);
	case METRICS_JSON:
		return expr_json_path(c, e);
	case METRICS_NGINX_STUB_STATUS:
		return expr_stub_name(c, e);
	}
	return expr_fail(c, "unknown format");
}

/* "rate" followed by '(' (a metric may well be called rate). */
static bool at_rate(const expr_cursor_t *c)
{
	if (strncmp(c->p, "rate", 4) != 0)
		return false;
	const char *q = c->p + 4;
	while (is_blank(*q))
		q++;
	return *q == '(';
}

static int expr_scale(expr_cursor_t *c, metrics_expr_t *e)
{
	if (*c->p != '*' && *c->p != '/')
		return 0;
	e->scale = *c->p == '*' ? SCALE_MUL : SCALE_DIV;
	c->p++;
	expr_blanks(c);
	const char *start = c->p;
	while (*c->p && !is_blank(*c->p))
		c->p++;
	if (!number_parse(start, (size_t)(c->p - start), &e->factor) || !isfinite(e->factor)) {
		c->p = start;
		return expr_fail(c, "expected a number after '%c'",
		                 e->scale == SCALE_MUL ? '*' : '/');
	}
	if (e->scale == SCALE_DIV && e->factor == 0) {
		c->p = start;
		return expr_fail(c, "division by zero");
	}
	return 0;
}

int metrics_expr_parse(metrics_format_t format, const char *text, metrics_expr_t **out, char *err,
                       size_t errlen)
{
	metrics_expr_t *e = xcalloc(1, sizeof(*e));
	e->format = format;
	e->text = xstrdup(text);
	expr_cursor_t c = {.text = e->text, .p = e->text, .err = err, .errlen = errlen};
	int ret = 0;
	expr_blanks(&c);
	if (at_rate(&c)) {
		e->rate = true;
		c.p = strchr(c.p, '(') + 1;
		expr_blanks(&c);
	}
	ret = expr_selector(&c, e);
	if (ret == 0 && e->rate) {
		expr_blanks(&c);
		if (*c.p == ')')
			c.p++;
		else
			ret = expr_fail(&c, "expected ')' to close rate(");
	}
	if (ret == 0) {
		expr_blanks(&c);
		ret = expr_scale(&c, e);
	}
	if (ret == 0) {
		expr_blanks(&c);
		if (*c.p)
			ret = expr_fail(&c, "unexpected '%c' (want `* N` or `/ N` at most)", *c.p);
	}
	if (ret) {
		metrics_expr_free(e);
		return ret;
	}
	*out = e;
	return 0;
}

void metrics_expr_free(metrics_expr_t *e)
{
	if (!e)
		return;
	free(e->strings);
	free(e->text);
	free(e);
}

bool metrics_expr_is_rate(const metrics_expr_t *e)
{
	return e->rate;
}

static bool labels_match(const metrics_expr_t *e, const metrics_doc_t *d, const stored_sample_t *s)
{
	for (size_t i = 0; i < e->n_labels; i++) {
		bool found = false;
		for (size_t j = 0; j < s->n_labels && !found; j++) {
			const metrics_label_t *l = &d->labels[s->label0 + j];
			found = strcmp(l->name, e->labels[i].name) == 0 &&
			        strcmp(l->value, e->labels[i].value) == 0;
		}
		if (!found)
			return false;
	}
	return true;
}

static int sample_prom(const metrics_expr_t *e, const metrics_doc_t *d, double *raw, char *err,
                       size_t errlen)
{
	double sum = 0;
	size_t matched = 0;
	for (size_t i = 0; i < d->n_samples; i++) {
		const stored_sample_t *s = &d->samples[i];
		if (strcmp(s->name, e->name) != 0 || !labels_match(e, d, s) || isnan(s->value))
			continue;
		sum += s->value;
		matched++;
	}
	if (matched == 0)
		return fail(err, errlen, STEER_ENOENT, "no sample matches %s", e->text);
	if (!isfinite(sum))
		return fail(err, errlen, STEER_EINVAL, "%s: not finite", e->text);
	*raw = sum;
	return 0;
}

/* A path component that indexes an array: digits only, no sign, in range. */
static bool array_index(const char *s, size_t *out)
{
	size_t v = 0;
	if (!*s || strlen(s) > 9)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (size_t)(*s - '0');
	}
	*out = v;
	return true;
}

static int sample_json(const metrics_expr_t *e, const metrics_doc_t *d, double *raw, char *err,
                       size_t errlen)
{
	const json_t *j = d->json;
	for (size_t i = 0; i < e->n_path; i++) {
		size_t idx;
		if (json_is_object(j))
			j = json_object_get(j, e->path[i]);
		else if (json_is_array(j) && array_index(e->path[i], &idx))
			j = json_array_get(j, idx);
		else
			j = NULL;
		if (!j)
			return fail(err, errlen, STEER_ENOENT, "%s: no '%s' at component %zu",
			            e->text, e->path[i], i + 1);
	}
	if (!json_is_number(j))
		return fail(err, errlen, STEER_EINVAL, "%s: not a number", e->text);
	*raw = json_number_value(j);
	if (!isfinite(*raw))
		return fail(err, errlen, STEER_EINVAL, "%s: not finite", e->text);
	return 0;
}

int metrics_expr_sample(const metrics_expr_t *e, const metrics_doc_t *d, double *raw, char *err,
                        size_t errlen)
{
	if (e->format != d->format)
		return fail(err, errlen, STEER_EINVAL, "%s: expression of format %s, body of %s",
		            e->text, metrics_format_name(e->format),
		            metrics_format_name(d->format));
	switch (e->format) {
	case METRICS_PROMETHEUS:
		return sample_prom(e, d, raw, err, errlen);
	case METRICS_JSON:
		return sample_json(e, d, raw, err, errlen);
	case METRICS_NGINX_STUB_STATUS:
		*raw = d->stub[e->stub];
		return 0;
	}
	return fail(err, errlen, STEER_EINVAL, "unknown format");
}

bool metrics_expr_finish(const metrics_expr_t *e, double raw, const double *prev, double dt_s,
                         double *out)
{
	double v = raw;
	if (e->rate) {
		if (!prev || !(dt_s > 0) || raw < *prev)
			return false;
		v = (raw - *prev) / dt_s;
	}
	if (e->scale == SCALE_MUL)
		v *= e->factor;
	else if (e->scale == SCALE_DIV)
		v /= e->factor;
	if (!isfinite(v))
		return false;
	*out = v;
	return true;
}
