/*
 * The daemon's side of state changes: it feeds events.c from the publishes, reloads, the
 * forwarder and the cluster node, words the reasons from the monitors' checks, and hands
 * each event to alert delivery. Control thread only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/compiler.h"
#include "gslb/health.h"

struct server;

/** Empty events, no watch, no delivery: call before anything can change (server_start()). */
void alerting_init(struct server *s) STEER_NONNULL(1);

/**
 * Once the forwarder and the cluster node run: poll them for changes, start the alert
 * destinations and the statistics snapshots of the configuration. Returns 0, or a negative
 * steer_err with the reason in @p err (a snapshot file that cannot be opened).
 */
int alerting_start(struct server *s, char *err, size_t errlen) STEER_NONNULL(1, 2) STEER_WUR;

/** The served health table goes from @p before (NULL at start: no event) to @p after. */
void alerting_health(struct server *s, const gslb_health_t *before, const gslb_health_t *after)
    STEER_NONNULL(1, 3);

/** A reload finished: @p ok, or failed with @p err. */
void alerting_reload(struct server *s, bool ok, const char *err) STEER_NONNULL(1);

/** Stop polling and delivering (pending deliveries are dropped) and free it all. Safe twice. */
void alerting_stop(struct server *s) STEER_NONNULL(1);
