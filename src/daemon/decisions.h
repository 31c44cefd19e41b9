/*
 * The sampled GSLB decision log. Each query thread records every Nth decision into its own
 * single-producer ring (no lock, no allocation; a full ring drops the record and counts it);
 * the control thread drains the rings every DECISIONS_DRAIN_MS and writes one JSON line per
 * decision with its reasons, taken from the explain machinery (gslb_view_explain(): the map
 * block and the nets file:line that decided it, the candidates with their health, the policy,
 * the answer), off the query path.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

#define DECISIONS_DRAIN_MS 200

struct server;

/**
 * Start the log when `decision-log: { file }` is configured: open the file (appending), give
 * every query thread its ring and sampler, start the drain timer on the control loop. After
 * net_bind(), before the query threads start. Returns 0 or a negative steer_err with a
 * message in @p err. Control thread.
 */
int decisions_start(struct server *server, char *err, size_t errlen) STEER_NONNULL(1, 2) STEER_WUR;

/** Lines written and records dropped (rings full, or the file failed) so far. Control thread. */
void decisions_stats(const struct server *server, uint64_t *written, uint64_t *dropped)
    STEER_NONNULL(1, 2, 3);

/**
 * Write what the rings still hold and close the file, once no query thread runs. Safe when
 * off, and twice. Control thread.
 */
void decisions_stop(struct server *server) STEER_NONNULL(1);
