/*
 * The daemon's side of state changes: it feeds events.c from the publishes, reloads, the
 * forwarder and the cluster node, words the reasons from the monitors' checks, and hands
 * each event to alert delivery. Control thread only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "base/compiler.h"
#include "gslb/health.h"

struct server;

/** Empty events, no watch, no delivery: call before anything can change (server_start()). */
void alerting_init(struct server *s) STEER_NONNULL(1);

/**
 * Once the forwarder exists and the cluster node runs, after the privilege drop (the
 * snapshot file is created by the user that writes it), before queries are served: poll the
 * forwarder and the node for changes, start the alert destinations and the statistics
 * snapshots of the configuration. Returns 0, or a negative steer_err after logging why (a
 * snapshot file that cannot be opened).
 */
int alerting_start(struct server *s) STEER_NONNULL(1) STEER_WUR;

/** The served health table goes from @p before (NULL at start: no event) to @p after. */
void alerting_health(struct server *s, const gslb_health_t *before, const gslb_health_t *after)
    STEER_NONNULL(1, 3);

/** A reload finished: @p ok, or failed with @p err. */
void alerting_reload(struct server *s, bool ok, const char *err) STEER_NONNULL(1);

/** The alert counters for the stats command (zeros without alerts). Caller owns it. */
json_t *alerting_stats_json(const struct server *s) STEER_NONNULL(1);

/** Stop polling and delivering (pending deliveries are dropped) and free it all. Safe twice. */
void alerting_stop(struct server *s) STEER_NONNULL(1);
