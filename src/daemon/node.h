/*
 * The cluster node's wiring: the keeper process spawned at start-up while the daemon is still
 * single-threaded, the cluster thread started once the query threads run, and what its
 * self-check asks of the daemon (query threads alive, the last reload, the forwarder's
 * upstreams, the query counter, the zones to ask for). Control thread, except the self-check
 * callbacks, which run on the cluster thread and touch only atomics and the node's own lock.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "base/compiler.h"
#include "cluster/cluster.h"
#include "cluster/keeper.h"
#include "conf/conf.h"
#include "fwd/engine.h"
#include "net/net.h"
#include "zone/zone_set.h"

typedef struct {
	cluster_keeper_t *keeper; /* spawned, until the cluster takes it over */
	cluster_t *cluster;       /* NULL without a cluster section, or before node_start() */
	const net_t *net;         /* borrowed by the self-check callbacks */
	fwd_engine_t *fwd;        /* borrowed; NULL without a forwarder */
	pthread_mutex_t lock;     /* guards reload_error */
	bool reload_failed;
	char reload_error[512];
} node_t;

/**
 * Spawn the keeper for @p conf's cluster section (nothing without one). Call before any
 * thread is started. Returns 0, or a negative steer_err with the reason in @p err.
 */
int node_spawn(node_t *node, const conf_t *conf, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Start the cluster thread over @p net (and @p fwd, may be NULL) asking for the zones of
 * @p zones. Nothing without a keeper. Returns 0 or a negative steer_err (logged).
 */
int node_start(node_t *node, const conf_t *conf, const net_t *net, fwd_engine_t *fwd,
               const zone_set_t *zones) STEER_NONNULL(1, 2, 3, 5) STEER_WUR;

/**
 * Tell the self-check how a reload went: @p ok with the new @p zones, or the error @p err
 * (withdraws when cluster.self-check.reload is on, until a reload succeeds).
 */
void node_reloaded(node_t *node, bool ok, const zone_set_t *zones, const char *err)
    STEER_NONNULL(1);

/**
 * The served zones changed outside a reload (a secondary zone got a new version, or its
 * first one): the self-check asks for the zones of @p zones from its next round. Zones still
 * pending their first transfer are not asked for, expired ones are skipped while they are
 * (cluster_set_zones()). Control thread; nothing without a cluster.
 */
void node_zones_changed(node_t *node, const zone_set_t *zones) STEER_NONNULL(1, 2);

/** Withdraw, stop the cluster thread and the keeper. Safe when nothing was started, twice. */
void node_stop(node_t *node) STEER_NONNULL(1);
