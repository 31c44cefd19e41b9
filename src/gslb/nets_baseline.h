/*
 * The prefix count of every nets file as last accepted, kept in a small state file
 * (gslb.nets-state-file) so the nets shrink guard also holds across a restart: without it, a
 * daemon restarted after a failed ISP-list download has no running view to compare with and
 * would load the emptied file. One line per file, "COUNT MAP PATH" (the path is the rest of
 * the line), '#' comments; written atomically after every successful start and reload.
 *
 * Control thread only; a baseline is immutable once loaded.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/compiler.h"

typedef struct gslb_nets_baseline gslb_nets_baseline_t;
typedef struct gslb_view gslb_view_t;

/**
 * Read the baseline file @p path into *@p out. A missing file is an empty baseline (0, and
 * *@p out is an empty baseline, not NULL). A line that is not "COUNT MAP PATH" is an error
 * "PATH:LINE: reason" in @p err (STEER_ESYNTAX): a damaged baseline must not silently disable
 * the guard. Returns 0 or a negative steer_err; the caller frees *@p out.
 */
int gslb_nets_baseline_load(const char *path, gslb_nets_baseline_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/** Free a baseline. NULL is ignored. */
void gslb_nets_baseline_free(gslb_nets_baseline_t *b);

/**
 * The count recorded for nets file @p file of map @p map: true with *@p count set, or false
 * when the baseline has none (or @p b is NULL).
 */
bool gslb_nets_baseline_find(const gslb_nets_baseline_t *b, const char *map, const char *file,
                             size_t *count) STEER_NONNULL(2, 3, 4);

/**
 * Write the counts of every nets file of @p view to @p path (atomically: temporary file and
 * rename). Files whose path cannot be written on one line are left out. Returns 0 or a
 * negative errno with a message in @p err.
 */
int gslb_nets_baseline_save(const gslb_view_t *view, const char *path, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;
