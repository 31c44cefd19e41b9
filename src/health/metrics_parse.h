/*
 * Load values read from a site's own monitoring endpoint: pure parsers of the three body
 * formats a `metrics` monitor reads, and the small expression language that picks one number
 * out of a body.
 *
 * Formats:
 *   prometheus         the text exposition format 0.0.4 (node_exporter, nginx and haproxy
 *                      exporters...): comments, HELP/TYPE lines, samples with labels (escaped
 *                      values), NaN and +/-Inf, optional timestamps.
 *   json               any JSON document (jansson).
 *   nginx-stub-status  the page of nginx's ngx_http_stub_status_module.
 *
 * Expressions (parsed once, at configuration load, then evaluated against every body):
 *   prometheus  NAME or NAME{label="value",...}: the sum of every sample of that name whose
 *               labels include all the given ones (NaN samples are skipped);
 *   json        a dotted path a.b.0.c to a number (a number component indexes an array);
 *   nginx       one of active, reading, writing, waiting, accepts, handled, requests;
 *   each optionally wrapped in rate(...) (the per-second rate between two scrapes of a
 *   counter) and followed by `* N` or `/ N`.
 *
 * Evaluation is split in two so the caller can keep the previous scrape: metrics_expr_sample()
 * reads the raw number (the sum, before rate and scaling) from a body, and metrics_expr_finish()
 * turns it into the value, using the previous raw number for a rate.
 *
 * Nothing here trusts its input: every error is a return code with a message naming the line
 * (bodies) or the position (expressions). Any thread; no global state.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

typedef enum {
	METRICS_PROMETHEUS,
	METRICS_JSON,
	METRICS_NGINX_STUB_STATUS,
} metrics_format_t;

/** Parse a format name ("prometheus", "json", "nginx-stub-status"). Returns 0 or STEER_EINVAL. */
int metrics_format_parse(const char *name, metrics_format_t *out) STEER_NONNULL(1, 2) STEER_WUR;

/** The name of @p format. */
const char *metrics_format_name(metrics_format_t format);

/* ---- expressions ---- */

typedef struct metrics_expr metrics_expr_t;

/**
 * Compile @p text as an expression over bodies of @p format into *@p out (freed with
 * metrics_expr_free()). Returns 0, or STEER_EINVAL with a message such as "at 12: expected
 * '\"' after '='" in @p err.
 */
int metrics_expr_parse(metrics_format_t format, const char *text, metrics_expr_t **out, char *err,
                       size_t errlen) STEER_NONNULL(2, 3, 4) STEER_WUR;

/** Free @p e (NULL is fine). */
void metrics_expr_free(metrics_expr_t *e);

/** True when @p e is a rate(...): its value needs two scrapes. */
bool metrics_expr_is_rate(const metrics_expr_t *e) STEER_NONNULL(1);

/* ---- bodies ---- */

/* A parsed body; what it holds depends on the format. */
typedef struct metrics_doc metrics_doc_t;

/**
 * Parse @p len bytes of @p body (need not be terminated) in @p format. Returns 0 and *@p out,
 * or STEER_EINVAL with "line 3: ..." (JSON: jansson's message with line and column) in @p err.
 * A prometheus body is checked whole here, so a garbage body is one error, not a missing
 * value per expression.
 */
int metrics_doc_parse(metrics_format_t format, const char *body, size_t len, metrics_doc_t **out,
                      char *err, size_t errlen) STEER_NONNULL(4, 5) STEER_WUR;

/** Free @p doc (NULL is fine). */
void metrics_doc_free(metrics_doc_t *doc);

/**
 * The raw number @p e reads from @p doc (the sum of the matching samples, the number at the
 * path, the stub_status field), before rate and scaling. Returns 0, or STEER_ENOENT ("no
 * sample of nginx_connections_active", "a.b: no such key"), STEER_EINVAL (not a number, not
 * finite, of another format) with the reason in @p err.
 */
int metrics_expr_sample(const metrics_expr_t *e, const metrics_doc_t *doc, double *raw, char *err,
                        size_t errlen) STEER_NONNULL(1, 2, 3, 4) STEER_WUR;

/**
 * The value of @p e from its raw number @p raw. A rate needs @p prev, the raw number of the
 * previous scrape @p dt_s seconds earlier (NULL = none): the result is false without one, when
 * @p dt_s is not positive, or when the counter went down (a reset: no value this round).
 * Scaling applies last. True and *@p out otherwise.
 */
bool metrics_expr_finish(const metrics_expr_t *e, double raw, const double *prev, double dt_s,
                         double *out) STEER_NONNULL(1, 5);

/* ---- the prometheus parser on its own (tests, the fuzz target) ---- */

#define METRICS_LABELS_MAX 64 /* labels per sample; more is a malformed body */

typedef struct {
	const char *name; /* terminated, borrowed from the label storage of the parse */
	const char *value;
} metrics_label_t;

typedef struct {
	const char *name;
	const metrics_label_t *labels;
	size_t n_labels;
	double value;
	bool has_timestamp;
	int64_t timestamp_ms;
} metrics_sample_t;

/* Called for every sample; a non-zero return stops the parse and is returned. */
typedef int (*metrics_sample_cb)(const metrics_sample_t *s, void *ctx);

/**
 * Parse a prometheus text body, calling @p cb for each sample in order. Returns 0, the first
 * non-zero value of @p cb, or STEER_EINVAL with "line N: reason" in @p err. The strings of a
 * sample live until @p cb returns.
 */
int metrics_prom_parse(const char *body, size_t len, metrics_sample_cb cb, void *ctx, char *err,
                       size_t errlen) STEER_NONNULL(3, 5);
