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

/* Decimal digits of @p v into @p out (room for 20); returns how many. */
static size_t format_u64(char *out, uint64_t v)
{
	char digits[20];
	size_t n = 0;
	do {
		digits[sizeof(digits) - 1 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	memcpy(out, digits + sizeof(digits) - n, n);
	return n;
}

static void put_u64(prom_t *p, uint64_t v)
{
	char digits[20];
	put(p, digits, format_u64(digits, v));
}

/* Room for any double format_double() writes: sign, 17 digits, point, exponent. */
#define PROM_DOUBLE_MAX 32

/* @p micros millionths as a decimal without trailing zeros ("0.000123", "-2.5"). */
static size_t format_fixed6(char out[PROM_DOUBLE_MAX], int64_t micros)
{
	size_t n = 0;
	if (micros < 0) {
		out[n++] = '-';
		micros = -micros;
	}
	uint64_t whole = (uint64_t)micros / 1000000, frac = (uint64_t)micros % 1000000;
	n += format_u64(out + n, whole);
	if (frac) {
		char digits[6];
		for (int i = 5; i >= 0; i--, frac /= 10)
			digits[i] = (char)('0' + frac % 10);
		size_t len = 6;
		while (digits[len - 1] == '0')
			len--;
		out[n++] = '.';
		memcpy(out + n, digits, len);
		n += len;
	}
	out[n] = '\0';
	return n;
}

/*
 * Shortest text that reads back as the same double: integers (state, unix times, counts) take
 * the exact integer path, fractions the fewest digits of 15..17 that round-trip. NaN and the
 * infinities as Prometheus spells them. Returns the length written to @p out (NUL-terminated).
 */
static size_t format_double(char out[PROM_DOUBLE_MAX], double v)
{
	if (isnan(v))
		return (size_t)snprintf(out, PROM_DOUBLE_MAX, "NaN");
	if (isinf(v))
		return (size_t)snprintf(out, PROM_DOUBLE_MAX, "%s", v > 0 ? "+Inf" : "-Inf");
	/* 2^53: every integer below it is exact in a double. */
	if (fabs(v) < 9007199254740992.0 && (double)(int64_t)v == v) {
		size_t n = 0;
		if (v < 0)
			out[n++] = '-';
		n += format_u64(out + n, (uint64_t)fabs(v));
		out[n] = '\0';
		return n;
	}
	/* Microsecond values (RTTs, latencies) are the common fractions: when v is the double
	 * nearest to an integer count of millionths, that count's decimal form reads back as v,
	 * and costs no printf. */
	if (fabs(v) < 1e9) {
		int64_t micros = (int64_t)(v * 1e6 + (v < 0 ? -0.5 : 0.5));
		if ((double)micros / 1e6 == v)
			return format_fixed6(out, micros);
	}
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

/*
 * Escapes for label values (\\, \", \n) and, without the quote, for HELP text. Values are
 * mostly plain (addresses, names), so runs without a special character are found with
 * strcspn() and copied at once.
 */
static void put_escaped(prom_t *p, const char *s, bool quote)
{
	const char *special = quote ? "\\\"\n" : "\\\n";
	for (;;) {
		size_t run = strcspn(s, special);
		put(p, s, run);
		s += run;
		if (*s == '\0')
			return;
		puts_(p, *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : "\\\"");
		s++;
	}
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
	p->family_len = strlen(p->family);
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

/* Label names must be valid, not reserved (__*), distinct, and have a value. */
static bool labels_ok(prom_t *p, const prom_label_t *labels, size_t nlabels)
{
	const char *where = p->family ? p->family : "labels";
	for (size_t i = 0; i < nlabels; i++) {
		if (!labels[i].name || !valid_name(labels[i].name, false) || !labels[i].value ||
		    strncmp(labels[i].name, "__", 2) == 0) {
			fail(p, STEER_EINVAL, "%s: invalid label name \"%s\"", where,
			     labels[i].name ? labels[i].name : "(null)");
			return false;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(labels[i].name, labels[j].name) == 0) {
				fail(p, STEER_EINVAL, "%s: label %s given twice", where,
				     labels[i].name);
				return false;
			}
	}
	return true;
}

/* A sample must follow a family of its type. */
static bool family_ok(prom_t *p, prom_type_t type)
{
	if (p->err)
		return false;
	if (!p->family || p->type != type) {
		fail(p, STEER_EINVAL, "%s sample outside a %s family", type_name(type),
		     type_name(type));
		return false;
	}
	return true;
}

static bool sample_ok(prom_t *p, prom_type_t type, const prom_label_t *labels, size_t nlabels)
{
	return family_ok(p, type) && labels_ok(p, labels, nlabels);
}

/* `name{a="x",b="y"` plus an optional extra label (the histogram's le), then `} `. */
static void put_series(prom_t *p, const char *suffix, const prom_label_t *labels, size_t nlabels,
                       const char *le)
{
	put(p, p->family, p->family_len);
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

char *prom_labels_text(prom_t *p, const prom_label_t *labels, size_t nlabels)
{
	if (p->err || !labels_ok(p, labels, nlabels))
		return NULL;
	/* Rendered by the writer's own code past the end of its text, then cut off again: one
	 * escaping routine, and no buffer of its own. */
	size_t start = p->len;
	const char *family = p->family;
	size_t family_len = p->family_len;
	p->family = "";
	p->family_len = 0;
	put_series(p, "", labels, nlabels, NULL);
	p->family = family;
	p->family_len = family_len;
	size_t len = p->len - start - 1; /* put_series() ends with the space before the value */
	char *out = xmalloc(len + 1);
	memcpy(out, p->buf + start, len);
	out[len] = '\0';
	p->len = start;
	p->buf[start] = '\0';
	return out;
}

static void put_with(prom_t *p, const char *labels)
{
	put(p, p->family, p->family_len);
	puts_(p, labels);
	putc_(p, ' ');
}

void prom_counter_with(prom_t *p, const char *labels, uint64_t value)
{
	if (!family_ok(p, PROM_COUNTER))
		return;
	if (!labels) {
		fail(p, STEER_EINVAL, "%s: sample without its label text", p->family);
		return;
	}
	put_with(p, labels);
	put_u64(p, value);
	putc_(p, '\n');
}

void prom_gauge_with(prom_t *p, const char *labels, double value)
{
	if (!family_ok(p, PROM_GAUGE))
		return;
	if (!labels) {
		fail(p, STEER_EINVAL, "%s: sample without its label text", p->family);
		return;
	}
	put_with(p, labels);
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
