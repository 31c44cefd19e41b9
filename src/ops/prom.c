/*
 * The Prometheus text writer (prom.h). Owned by whichever thread renders; for steerd that is
 * the control thread, once per scrape. Every line is appended to one growing buffer, so a
 * scrape of tens of thousands of samples costs a few reallocations, not one per line.
 */
#include "ops/prom.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"

/* A scrape of a small server fits at once; a large one doubles a handful of times. */
#define PROM_INITIAL_CAP 16384

void prom_init(prom_t *p)
{
	memset(p, 0, sizeof(*p));
}

void prom_deinit(prom_t *p)
{
	free(p->buf);
	for (size_t i = 0; i < p->nfamilies; i++)
		free(p->families[i]);
	free(p->families);
	memset(p, 0, sizeof(*p));
}

STEER_PRINTF(3, 4) static void fail(prom_t *p, int err, const char *fmt, ...)
{
	if (p->err)
		return;
	p->err = err;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->errmsg, sizeof(p->errmsg), fmt, ap);
	va_end(ap);
}

int prom_error(const prom_t *p)
{
	return p->err;
}

const char *prom_errmsg(const prom_t *p)
{
	return p->errmsg;
}

static void reserve(prom_t *p, size_t more)
{
	if (p->len + more + 1 <= p->cap)
		return;
	size_t cap = p->cap ? p->cap : PROM_INITIAL_CAP;
	while (cap < p->len + more + 1)
		cap *= 2;
	p->buf = xrealloc(p->buf, cap);
	p->cap = cap;
}

static void put(prom_t *p, const char *s, size_t n)
{
	reserve(p, n);
	memcpy(p->buf + p->len, s, n);
	p->len += n;
	p->buf[p->len] = '\0';
}

static void puts_(prom_t *p, const char *s)
{
	put(p, s, strlen(s));
}

static void putc_(prom_t *p, char c)
{
	put(p, &c, 1);
}

static void put_u64(prom_t *p, uint64_t v)
{
	char digits[20];
	size_t n = 0;
	do {
		digits[sizeof(digits) - 1 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(p, digits + sizeof(digits) - n, n);
}

/* Room for any double format_double() writes: sign, 17 digits, point, exponent. */
#define PROM_DOUBLE_MAX 32

/*
 * Shortest text that reads back as the same double: integers (state, unix times, counts) take
 * the exact integer path, fractions the fewest digits of 15..17 that round-trip. NaN and the
 * infinities as Prometheus spells them. Returns the length written to @p out.
 */
static size_t format_double(char out[PROM_DOUBLE_MAX], double v)
{
	if (isnan(v))
		return (size_t)snprintf(out, PROM_DOUBLE_MAX, "NaN");
	if (isinf(v))
		return (size_t)snprintf(out, PROM_DOUBLE_MAX, "%s", v > 0 ? "+Inf" : "-Inf");
	/* 2^53: every integer below it is exact in a double. */
	if (v == floor(v) && fabs(v) < 9007199254740992.0)
		return (size_t)snprintf(out, PROM_DOUBLE_MAX, "%s%llu", v < 0 ? "-" : "",
		                        (unsigned long long)fabs(v));
	int n = 0;
	for (int digits = 15; digits <= 17; digits++) {
		n = snprintf(out, PROM_DOUBLE_MAX, "%.*g", digits, v);
		if (strtod(out, NULL) == v)
			break;
	}
	return (size_t)n;
}

static void put_double(prom_t *p, double v)
{
	char text[PROM_DOUBLE_MAX];
	put(p, text, format_double(text, v));
}

/* Escapes for label values (\\, \", \n) and, without the quote, for HELP text. */
static void put_escaped(prom_t *p, const char *s, bool quote)
{
	const char *run = s;
	for (; *s; s++) {
		const char *esc = NULL;
		if (*s == '\\')
			esc = "\\\\";
		else if (*s == '\n')
			esc = "\\n";
		else if (*s == '"' && quote)
			esc = "\\\"";
		if (!esc)
			continue;
		put(p, run, (size_t)(s - run));
		puts_(p, esc);
		run = s + 1;
	}
	put(p, run, (size_t)(s - run));
}

static bool name_char(char c, bool first, bool colon_ok)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
		return true;
	if (c == ':')
		return colon_ok;
	return !first && c >= '0' && c <= '9';
}

/* Metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names the same without ':'. */
static bool valid_name(const char *name, bool colon_ok)
{
	if (!*name)
		return false;
	for (const char *c = name; *c; c++)
		if (!name_char(*c, c == name, colon_ok))
			return false;
	return true;
}

static bool declared(const prom_t *p, const char *name)
{
	for (size_t i = 0; i < p->nfamilies; i++)
		if (strcmp(p->families[i], name) == 0)
			return true;
	return false;
}

static const char *type_name(prom_type_t type)
{
	switch (type) {
	case PROM_COUNTER:
		return "counter";
	case PROM_GAUGE:
		return "gauge";
	case PROM_HISTOGRAM:
		return "histogram";
	}
	return "untyped";
}

void prom_family(prom_t *p, const char *name, const char *help, prom_type_t type)
{
	if (p->err)
		return;
	if (!valid_name(name, true)) {
		fail(p, STEER_EINVAL, "invalid metric name \"%s\"", name);
		return;
	}
	if (declared(p, name)) {
		fail(p, STEER_EEXIST, "metric family %s declared twice", name);
		return;
	}
	p->families = xrealloc(p->families, (p->nfamilies + 1) * sizeof(*p->families));
	p->families[p->nfamilies++] = xstrdup(name);
	p->family = p->families[p->nfamilies - 1];
	p->type = type;

	puts_(p, "# HELP ");
	puts_(p, name);
	putc_(p, ' ');
	put_escaped(p, help, false);
	puts_(p, "\n# TYPE ");
	puts_(p, name);
	putc_(p, ' ');
	puts_(p, type_name(type));
	putc_(p, '\n');
}

/* A sample must follow a family of its type; labels must have valid, distinct names. */
static bool sample_ok(prom_t *p, prom_type_t type, const prom_label_t *labels, size_t nlabels)
{
	if (p->err)
		return false;
	if (!p->family || p->type != type) {
		fail(p, STEER_EINVAL, "%s sample outside a %s family", type_name(type),
		     type_name(type));
		return false;
	}
	for (size_t i = 0; i < nlabels; i++) {
		if (!labels[i].name || !valid_name(labels[i].name, false) || !labels[i].value ||
		    strncmp(labels[i].name, "__", 2) == 0) {
			fail(p, STEER_EINVAL, "%s: invalid label name \"%s\"", p->family,
			     labels[i].name ? labels[i].name : "(null)");
			return false;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(labels[i].name, labels[j].name) == 0) {
				fail(p, STEER_EINVAL, "%s: label %s given twice", p->family,
				     labels[i].name);
				return false;
			}
	}
	return true;
}

/* `name{a="x",b="y"` plus an optional extra label (the histogram's le), then `} `. */
static void put_series(prom_t *p, const char *suffix, const prom_label_t *labels, size_t nlabels,
                       const char *le)
{
	puts_(p, p->family);
	puts_(p, suffix);
	if (nlabels || le) {
		putc_(p, '{');
		for (size_t i = 0; i < nlabels; i++) {
			if (i)
				putc_(p, ',');
			puts_(p, labels[i].name);
			puts_(p, "=\"");
			put_escaped(p, labels[i].value, true);
			putc_(p, '"');
		}
		if (le) {
			puts_(p, nlabels ? ",le=\"" : "le=\"");
			puts_(p, le);
			putc_(p, '"');
		}
		putc_(p, '}');
	}
	putc_(p, ' ');
}

void prom_counter(prom_t *p, const prom_label_t *labels, size_t nlabels, uint64_t value)
{
	if (!sample_ok(p, PROM_COUNTER, labels, nlabels))
		return;
	put_series(p, "", labels, nlabels, NULL);
	put_u64(p, value);
	putc_(p, '\n');
}

void prom_gauge(prom_t *p, const prom_label_t *labels, size_t nlabels, double value)
{
	if (!sample_ok(p, PROM_GAUGE, labels, nlabels))
		return;
	put_series(p, "", labels, nlabels, NULL);
	put_double(p, value);
	putc_(p, '\n');
}

static bool bounds_ok(prom_t *p, const prom_label_t *labels, size_t nlabels, const double *bounds,
                      size_t nbounds)
{
	if (nbounds == 0) {
		fail(p, STEER_EINVAL, "%s: histogram without buckets", p->family);
		return false;
	}
	for (size_t i = 0; i < nbounds; i++)
		if (!isfinite(bounds[i]) || (i && bounds[i] <= bounds[i - 1])) {
			fail(p, STEER_EINVAL, "%s: bucket bounds must be finite and increasing",
			     p->family);
			return false;
		}
	for (size_t i = 0; i < nlabels; i++)
		if (strcmp(labels[i].name, "le") == 0) {
			fail(p, STEER_EINVAL, "%s: label le is the histogram's own", p->family);
			return false;
		}
	return true;
}

void prom_histogram(prom_t *p, const prom_label_t *labels, size_t nlabels, const double *bounds,
                    size_t nbounds, const uint64_t *counts, double sum)
{
	if (!sample_ok(p, PROM_HISTOGRAM, labels, nlabels) ||
	    !bounds_ok(p, labels, nlabels, bounds, nbounds))
		return;
	uint64_t cumulative = 0;
	for (size_t i = 0; i <= nbounds; i++) {
		cumulative += counts[i];
		char le[PROM_DOUBLE_MAX] = "+Inf";
		if (i < nbounds)
			format_double(le, bounds[i]);
		put_series(p, "_bucket", labels, nlabels, le);
		put_u64(p, cumulative);
		putc_(p, '\n');
	}
	put_series(p, "_sum", labels, nlabels, NULL);
	put_double(p, sum);
	putc_(p, '\n');
	put_series(p, "_count", labels, nlabels, NULL);
	put_u64(p, cumulative);
	putc_(p, '\n');
}

const char *prom_text(const prom_t *p, size_t *len)
{
	if (len)
		*len = p->len;
	return p->buf ? p->buf : "";
}

char *prom_take(prom_t *p, size_t *len)
{
	char *text = p->buf ? p->buf : xstrdup("");
	*len = p->len;
	p->buf = NULL;
	p->len = 0;
	p->cap = 0;
	return text;
}
