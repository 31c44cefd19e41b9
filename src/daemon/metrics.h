/*
 * GET /metrics: everything an operator graphs or alerts on, in the Prometheus text format
 * (ops/prom.h), collected from each subsystem's own counters and states when a scrape asks.
 * docs/metrics.md lists every metric.
 *
 * Threads: everything here runs on the control thread. A scrape reads the query threads'
 * counter blocks (relaxed loads; they only ever write their own) and copies of the other
 * threads' state (forwarder, cluster) that those subsystems hand out; it never waits for a
 * query thread.
 *
 * It also keeps the answers per service and datacenter across reloads: a rebuilt GSLB view
 * numbers its (service, datacenter) pairs anew, so before the replaced view's bank is cleared
 * its totals are carried over by name (metrics_gslb_replaced()).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "gslb/view.h"

typedef struct server server_t;
struct net;

/* What the metrics keep between scrapes. Caller-owned storage (inside server_t). */
typedef struct {
	json_t *carried; /* {"<service>": {"<datacenter>": answers}} of replaced views; owned */
	uint64_t carried_untracked;
	double last_render_s; /* how long the last scrape's rendering took */
} metrics_t;

/** Start empty state in @p m. */
void metrics_init(metrics_t *m) STEER_NONNULL(1);

/** Free what @p m holds. */
void metrics_deinit(metrics_t *m) STEER_NONNULL(1);

/**
 * @p old was replaced by @p now in the published view and the grace period has passed. When
 * @p now counts into the other bank (a rebuild, not a health change), add @p old's answer
 * counts to the carried totals by name and clear its bank in every query thread of @p net,
 * ready for the next rebuild. Control thread.
 */
void metrics_gslb_replaced(metrics_t *m, struct net *net, const gslb_view_t *old,
                           const gslb_view_t *now) STEER_NONNULL(1, 2, 3, 4);

/**
 * The answers per service and datacenter so far, carried totals included:
 * {"<service>": {"<datacenter>": n, ...}, ...} with the service names without the trailing
 * dot and datacenter names or "none", "fallback", "all-down" (gslb/view.h). Control thread.
 */
json_t *metrics_answers_json(const server_t *s) STEER_NONNULL(1) STEER_WUR;

/**
 * Render the whole exposition for @p s into a malloc'ed text (free() it) and its length.
 * Returns 0, or a negative steer_err with the reason in @p err (a renderer bug: a family
 * twice, a bad name). Control thread.
 */
int metrics_render(const server_t *s, char **text, size_t *len, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3, 4) STEER_WUR;

/**
 * Serve GET /metrics on @p s->http (nothing when there is no HTTP front end). Call once after
 * server_http_start(). Returns 0 or a negative steer_err (logged).
 */
int metrics_http_register(server_t *s) STEER_NONNULL(1) STEER_WUR;
