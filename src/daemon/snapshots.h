/*
 * Statistics snapshots: every interval, one JSON line {"time": epoch seconds, "node": name,
 * "stats": <the stats command's data>} appended to a file, for long-term graphs without a
 * metrics system. The file is opened for each line (O_APPEND, created 0640), so a rotated
 * file is followed at the next interval. Control thread only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <ev.h>
#include <jansson.h>

#include "base/compiler.h"

/* The stats to write now (the caller of the callback owns the result), NULL = skip. */
typedef json_t *(*snapshots_stats_cb)(void *ctx);

typedef struct {
	struct ev_loop *loop; /* NULL = not started */
	ev_timer timer_w;
	char *path; /* owned */
	char node[64];
	snapshots_stats_cb stats;
	void *ctx;
	bool failing;   /* the last write failed (logged once until one succeeds) */
	unsigned lines; /* written since start */
} snapshots_t;

/**
 * Append a snapshot to @p path every @p interval_ms on @p loop, the stats from @p stats.
 * The file is created (0640) or opened now, so a missing or unwritable folder is an error
 * here: returns 0, or a negative errno with "stats-snapshots: PATH: reason" in @p err.
 */
int snapshots_start(snapshots_t *sn, struct ev_loop *loop, const char *path, unsigned interval_ms,
                    const char *node, snapshots_stats_cb stats, void *ctx, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3, 5, 6, 8) STEER_WUR;

/**
 * One snapshot line of @p stats (borrowed) at @p time for @p node, without the newline; the
 * caller frees it. NULL when out of memory.
 */
char *snapshots_line(double time, const char *node, json_t *stats) STEER_NONNULL(2, 3);

/** Stop writing and free what @p sn owns. Safe when never started, and twice. */
void snapshots_stop(snapshots_t *sn) STEER_NONNULL(1);
