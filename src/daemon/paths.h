/*
 * Measured paths on the DNS node (`paths:`): every fetch-interval a conditional GET of each
 * steer-probe agent's <url>paths/table (libcurl on the control loop, so a slow or dead agent
 * never blocks it), the decoded tables merged into one gslb_paths_t and published inside the
 * served GSLB view; the query threads' demand rings drained every PATHS_DRAIN_MS into the
 * demand map that /paths/demand serves to the agents.
 *
 * An agent that is down, slow or returns garbage keeps its last good table, which ages out
 * by path-ttl inside the merge; each agent's state change (up, down and why) is logged once.
 * Everything here runs on the control thread.
 */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "base/compiler.h"
#include "conf/conf.h"
#include "ctl/http.h"
#include "gslb/view.h"
#include "ops/prom.h"

#define PATHS_DRAIN_MS 200

struct server;
typedef struct paths paths_t;

/**
 * Give every query thread its demand ring (after net_bind(), before net_start()) and, with a
 * `paths:` section, read the token and start fetching at once. Returns 0 or a negative
 * steer_err with the reason in @p err. Control thread.
 */
int paths_start(struct server *s, char *err, size_t errlen) STEER_NONNULL(1, 2) STEER_WUR;

/** Serve /paths/demand on the HTTP server (after server_http_start()). Returns 0 or an error. */
int paths_http_register(struct server *s) STEER_NONNULL(1) STEER_WUR;

/**
 * Reload, the fallible part: read @p conf's token file into @p token (@p size bytes; empty
 * without one). Nothing changes. Returns 0 or a negative steer_err with a message in @p err.
 */
int paths_reload_token(const conf_t *conf, char *token, size_t size, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 4) STEER_WUR;

/**
 * Reload, the part that cannot fail: take @p conf's agents (those whose datacenter and URL
 * stay keep their last table and state), @p token, and replace *@p gslb (not yet published)
 * by a view carrying a table built for @p conf's datacenters. Control thread.
 */
void paths_reload(struct server *s, const conf_t *conf, const char *token, gslb_view_t **gslb)
    STEER_NONNULL(1, 2, 3, 4);

/**
 * `steerctl paths [PREFIX|ADDRESS]`: the agents' states and the table's counts, and with
 * @p prefix the row holding it (every column's RTT, loss, hops, age, the sticky best) and
 * its demand. Returns 0 or STEER_EINVAL (a bad prefix) with a message in @p err.
 */
int paths_json(const struct server *s, const char *prefix, json_t **data, char *err, size_t errlen)
    STEER_NONNULL(1, 3, 4);

/** Write the /metrics series of measured paths into @p p (daemon/metrics.c). */
void paths_metrics(const struct server *s, prom_t *p) STEER_NONNULL(1, 2);

/** Stop fetching, free every agent, the rings (once no query thread runs) and the map. */
void paths_stop(struct server *s) STEER_NONNULL(1);
