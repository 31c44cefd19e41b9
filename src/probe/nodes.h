/*
 * The DNS nodes' demand, fetched by the agent: a conditional GET of <node>paths/demand on every
 * node (libcurl's multi interface on the agent's loop, health/curl_loop.h), the body limited
 * and decoded by gslb_pathfmt_decode_demand(). Each node's last good demand is kept while the
 * node is down, slow or returns garbage (a state change is logged once); the agent merges the
 * kept demand of every node into its table. Agent loop thread only.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "gslb/pathfmt.h"

struct ev_loop;
typedef struct probe_nodes probe_nodes_t;

/* Called when a fetch succeeded (200 with a good body, or 304): the demand may be merged. */
typedef void (*probe_nodes_cb)(void *ctx);

typedef struct {
	char *const *urls; /* base URLs, each ending in '/'; copied */
	size_t n_urls;
	const char *token;   /* bearer token sent to the nodes; NULL = none; copied */
	unsigned timeout_ms; /* per fetch */
	size_t max_rows;     /* a body with more rows is refused */
} probe_nodes_opts_t;

/** The nodes of @p opts on @p loop. Returns 0, or a negative steer_err with @p err. */
int probe_nodes_new(struct ev_loop *loop, const probe_nodes_opts_t *opts, probe_nodes_cb cb,
                    void *ctx, probe_nodes_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3, 5, 6) STEER_WUR;

/** Start a fetch on every node that has none running; @p now_ms (any clock, the caller's)
 *  stamps the results. */
void probe_nodes_poll(probe_nodes_t *n, uint64_t now_ms) STEER_NONNULL(1);

/** Number of nodes. */
size_t probe_nodes_count(const probe_nodes_t *n) STEER_NONNULL(1);

/** Node @p i's last good demand and when it was last confirmed (poll clock) in @p ok_ms, or NULL
 *  when it never answered. */
const gslb_demand_t *probe_nodes_demand(const probe_nodes_t *n, size_t i, uint64_t *ok_ms)
    STEER_NONNULL(1, 3);

/** The nodes' state for /paths/status at @p now_ms (the clock of probe_nodes_poll()): url, up,
 *  last error, fetches, rows, age of the last good fetch. New reference. */
json_t *probe_nodes_json(const probe_nodes_t *n, uint64_t now_ms) STEER_NONNULL(1);

/** Cancel running fetches and free. NULL is ignored. */
void probe_nodes_free(probe_nodes_t *n);
