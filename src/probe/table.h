/*
 * The agent's prefix table and probe scheduler: every client prefix the DNS nodes asked for
 * (family, prefix, length), the address to probe for it, its demand volume, the result of its
 * measurements (smoothed RTT, loss, hops) and when it is due next.
 *
 * Scheduling: a min-heap of rows ordered by (urgent first, then due time); a token bucket of
 * `rate` probes per second pays for each measurement (`samples` probes) before it starts, so
 * the agent never sends more than the budget whatever the demand. Urgent rows (a node had no
 * usable measurement) come first; the hot rows (the top hot-share of the rows by volume) are
 * due every hot-interval, the others every interval, oldest first.
 *
 * Pure data and arithmetic on a clock the caller passes in (milliseconds, any origin), so the
 * scheduler is tested with a fake clock. One thread (the agent's loop).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "gslb/pathfmt.h"

/* The number of probe methods a row may remember (conf_paths_t.methods). */
#define PROBE_METHODS_MAX 3

/* What the scheduler and the measurements need from paths.probe (all in ms or units). */
typedef struct {
	unsigned rate;         /* probes per second, > 0 */
	unsigned samples;      /* probes per measurement, > 0 */
	unsigned interval;     /* ms between measurements of a row */
	unsigned hot_interval; /* ms between measurements of a hot row */
	unsigned hot_share;    /* percent of the rows (by volume) that are hot */
	unsigned smoothing;    /* percent weight of a new measurement */
	unsigned n_methods;    /* 1..PROBE_METHODS_MAX */
	unsigned max_rows;     /* rows the table may hold */
	uint64_t forget_after; /* ms: a row no node reported for this long is dropped */
	uint64_t urgent_stale; /* ms: an urgent row measured longer ago than this is re-probed */
} probe_table_opts_t;

/* One client prefix. */
typedef struct {
	uint8_t family; /* 4 or 6 */
	uint8_t plen;
	uint64_t key;      /* gslb_pathfmt_key() of the prefix */
	uint8_t probe[16]; /* the address probed (network order, 4 bytes used for IPv4) */
	uint32_t volume;   /* summed over the nodes in the last merge */
	bool urgent;       /* some node had no usable measurement for it */
	bool first;        /* urgent and not freshly measured: goes before every other row */
	bool ecs;          /* a client prefix from ECS (the probe address is inside it) */
	bool hot;
	bool in_flight;       /* a measurement is running */
	bool measured;        /* at least one measurement finished */
	int8_t method;        /* the method index that answered last, -1 = none known yet */
	uint8_t trying;       /* the method index the next measurement uses */
	uint64_t reported_ms; /* the last time a node reported it */
	uint64_t measured_ms; /* when the last measurement finished */
	uint64_t due_ms;
	/* the published result */
	uint16_t rtt; /* 0.1 ms, smoothed; GSLB_PATHFMT_RTT_NONE = never answered */
	uint8_t loss; /* percent, smoothed */
	uint8_t hops; /* 0 = unknown */
	uint8_t answered;
	/* the heap */
	uint32_t heap_pos; /* UINT32_MAX = not in the heap (in flight) */
} probe_row_t;

typedef struct probe_table probe_table_t;

/** A new empty table with @p opts (copied). The token bucket starts empty at @p now_ms. */
probe_table_t *probe_table_new(const probe_table_opts_t *opts, uint64_t now_ms) STEER_NONNULL(1);

/** Free the table. NULL is ignored. */
void probe_table_free(probe_table_t *t);

/** Number of rows. */
size_t probe_table_rows(const probe_table_t *t) STEER_NONNULL(1);

/**
 * Row @p i (0 .. probe_table_rows() - 1), or NULL. Row pointers and indices stay valid only
 * until the next merge: hold (family, plen, key) across a measurement and probe_table_find().
 */
probe_row_t *probe_table_row(probe_table_t *t, size_t i) STEER_NONNULL(1);

/** The row of prefix (@p family 4|6, @p plen, @p key), or NULL. */
probe_row_t *probe_table_find(probe_table_t *t, uint8_t family, uint8_t plen, uint64_t key)
    STEER_NONNULL(1);

/* ---- demand: what the nodes asked for ----------------------------------------------------- */

/**
 * Start a merge round: every row's volume and urgent flag are recomputed by the adds. @p expect
 * is how many rows the round may bring (the nodes' rows added up; 0 = unknown): room for them
 * is made once, instead of growing the table row by row.
 */
void probe_table_merge_begin(probe_table_t *t, size_t expect) STEER_NONNULL(1);

/**
 * Add one node's demand row @p r as reported at @p reported_ms: volume summed across the
 * nodes, urgent if any node says so, the probe address of the latest report kept. A new
 * prefix is due at once. Returns 0, STEER_EINVAL when the probe address lies outside the
 * prefix (the agent probes nothing the nodes did not ask for), or STEER_ESPACE when the
 * table is full (the row is not added).
 */
int probe_table_merge_add(probe_table_t *t, const gslb_demand_row_t *r, uint64_t reported_ms)
    STEER_NONNULL(1, 2) STEER_WUR;

/**
 * End a merge round at @p now_ms: drop the rows no node reported for forget-after (unless in
 * flight), recompute which rows are hot and their due times. Returns the rows dropped.
 */
size_t probe_table_merge_end(probe_table_t *t, uint64_t now_ms) STEER_NONNULL(1);

/* ---- scheduling --------------------------------------------------------------------------- */

/**
 * The next row to measure at @p now_ms, its measurement paid for from the budget and the row
 * marked in flight, or NULL when nothing is due or the budget is spent for now.
 */
probe_row_t *probe_table_next(probe_table_t *t, uint64_t now_ms) STEER_NONNULL(1);

/** Milliseconds from @p now_ms until probe_table_next() may return a row (0 = now). */
uint64_t probe_table_wait(const probe_table_t *t, uint64_t now_ms) STEER_NONNULL(1);

/* The outcome of one measurement (`samples` probes by one method). */
typedef struct {
	unsigned sent;
	unsigned answered;
	uint32_t min_rtt_us; /* of the answered samples */
	uint8_t ttl;         /* the reply's TTL / hop limit, 0 = the method gives none */
} probe_result_t;

/**
 * Finish @p row's measurement at @p now_ms. When nothing answered and a later method is left,
 * the row is retried at once with that method (returns false: no new measurement); otherwise
 * the result is folded in (min RTT, EWMA, loss, hops), the row rescheduled, and true returned.
 */
bool probe_table_done(probe_table_t *t, probe_row_t *row, const probe_result_t *res,
                      uint64_t now_ms) STEER_NONNULL(1, 2, 3);

/**
 * Put @p row back unmeasured, due at @p retry_ms: its probes could not leave this host (out of
 * sockets or buffers), which says nothing about the path, so nothing is folded in.
 */
void probe_table_abort(probe_table_t *t, probe_row_t *row, uint64_t retry_ms) STEER_NONNULL(1, 2);

/** Rows due more than a second ago and not yet measured: what the budget is behind by. */
size_t probe_table_backlog(const probe_table_t *t, uint64_t now_ms) STEER_NONNULL(1);

/** Probes per second the current rows need (hot and cold rows at their intervals). */
double probe_table_needed_rate(const probe_table_t *t) STEER_NONNULL(1);

/* ---- measurement arithmetic (pure) -------------------------------------------------------- */

/** Hops from a reply's @p ttl: the initial TTL guessed as the next of 64, 128, 255, minus the
 *  TTL, plus one (a neighbour is one hop away); 0 for an unknown TTL (0). */
uint8_t probe_hops_from_ttl(uint8_t ttl);

/** Exponential smoothing: @p weight percent of @p sample, the rest of @p old. */
uint32_t probe_ewma(uint32_t old, uint32_t sample, unsigned weight);

/* ---- publishing --------------------------------------------------------------------------- */

/**
 * The measured rows as a site table named @p name generated at @p now_unix_ms (@p age_ref_ms
 * is the same instant on the table's clock): rows allocated into @p out (free with
 * gslb_pathfmt_table_free()), sorted as the format wants. Clears the dirty flag.
 */
void probe_table_snapshot(probe_table_t *t, const char *name, uint64_t now_unix_ms,
                          uint64_t age_ref_ms, gslb_path_table_t *out) STEER_NONNULL(1, 2, 5);

/** Whether a measurement finished or the rows changed since the last snapshot. */
bool probe_table_dirty(const probe_table_t *t) STEER_NONNULL(1);
