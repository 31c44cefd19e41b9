/*
 * A writer for the Prometheus text exposition format, version 0.0.4: metric families (HELP
 * and TYPE once, then every sample of the family together), escaped label values, counters,
 * gauges and histograms with cumulative buckets, into a buffer that grows as needed.
 *
 * Pure: no I/O, no globals; one writer belongs to one thread (the control thread renders a
 * scrape into it). Mistakes of the caller (a malformed metric or label name, a family declared
 * twice, a sample outside its family, a histogram without buckets) make the writer's error
 * sticky: later calls do nothing and prom_error() reports the first mistake, so a renderer
 * checks once at the end instead of after every line.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

typedef enum {
	PROM_COUNTER,
	PROM_GAUGE,
	PROM_HISTOGRAM,
} prom_type_t;

/** One label of a sample: both strings borrowed for the call. */
typedef struct {
	const char *name;
	const char *value;
} prom_label_t;

/** A writer. Fields are private; the buffer is owned until prom_take() or prom_deinit(). */
typedef struct {
	char *buf;
	size_t len;
	size_t cap;
	int err;
	char errmsg[160];
	char **families; /* names declared so far, owned */
	size_t nfamilies;
	prom_type_t type;   /* of the family samples now go to */
	const char *family; /* families[nfamilies - 1], NULL before the first */
	size_t family_len;
} prom_t;

/** Start an empty writer in caller-owned storage. */
void prom_init(prom_t *p) STEER_NONNULL(1);

/** Free the buffer (unless taken) and the family list. */
void prom_deinit(prom_t *p) STEER_NONNULL(1);

/**
 * Begin the family @p name: writes its HELP (@p help, escaped) and TYPE lines. Samples written
 * after this belong to it. Declaring a name twice, or an invalid name, is an error.
 */
void prom_family(prom_t *p, const char *name, const char *help, prom_type_t type)
    STEER_NONNULL(1, 2, 3);

/**
 * One sample of the current counter family: `name{labels} value`. @p labels may be NULL when
 * @p nlabels is 0. Counters are integers, so they are printed exactly.
 */
void prom_counter(prom_t *p, const prom_label_t *labels, size_t nlabels, uint64_t value)
    STEER_NONNULL(1);

/** One sample of the current gauge family. NaN and infinities are written as Prometheus spells
 * them. */
void prom_gauge(prom_t *p, const prom_label_t *labels, size_t nlabels, double value)
    STEER_NONNULL(1);

/**
 * One histogram of the current histogram family: @p nbounds upper bounds (strictly increasing,
 * finite), and @p counts with nbounds + 1 per-bucket (not cumulative) observation counts, the
 * last one those above every bound. Writes the cumulative `_bucket{le=...}` lines ending with
 * `le="+Inf"`, then `_sum` (@p sum) and `_count`. @p labels must not contain `le`.
 */
void prom_histogram(prom_t *p, const prom_label_t *labels, size_t nlabels, const double *bounds,
                    size_t nbounds, const uint64_t *counts, double sum) STEER_NONNULL(1, 4, 6);

/**
 * The label set @p labels rendered once as `{a="x",b="y"}` (escaped; "" for none), for
 * samples of several families with the same labels (a check's state, RTT, probes, ...):
 * prom_counter_with() and prom_gauge_with() then copy it instead of escaping it again.
 * Returns a malloc'ed string (free() it), or NULL after an error (bad or repeated label name;
 * the writer's error is set). Needs no current family.
 */
STEER_WUR char *prom_labels_text(prom_t *p, const prom_label_t *labels, size_t nlabels)
    STEER_NONNULL(1);

/** prom_counter() with labels from prom_labels_text(); NULL @p labels is an error. */
void prom_counter_with(prom_t *p, const char *labels, uint64_t value) STEER_NONNULL(1);

/** prom_gauge() with labels from prom_labels_text(); NULL @p labels is an error. */
void prom_gauge_with(prom_t *p, const char *labels, double value) STEER_NONNULL(1);

/** 0, or the first error's negative steer_err (STEER_EINVAL, STEER_EEXIST). */
int prom_error(const prom_t *p) STEER_NONNULL(1);

/** The first error's message, "" when there is none. Valid while @p p lives. */
const char *prom_errmsg(const prom_t *p) STEER_NONNULL(1);

/** The text written so far (NUL-terminated, @p len bytes without the NUL); still owned by @p p. */
const char *prom_text(const prom_t *p, size_t *len) STEER_NONNULL(1);

/**
 * Hand over the buffer: returns the NUL-terminated text (free() it) and its length in @p len;
 * the writer is left empty but keeps its family list and error.
 */
STEER_WUR char *prom_take(prom_t *p, size_t *len) STEER_NONNULL(1, 2);
