/*
 * Cluster wiring: see node.h.
 */
#include "daemon/node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "zone/zone.h"

int node_spawn(node_t *node, const conf_t *conf, char *err, size_t errlen)
{
	memset(node, 0, sizeof(*node));
	pthread_mutex_init(&node->lock, NULL);
	if (!conf->cluster.enabled)
		return 0;
	return cluster_keeper_spawn(&conf->cluster, &node->keeper, err, errlen);
}

static bool threads_ok(void *ctx, unsigned max_age_ms, char *why, size_t whylen)
{
	const node_t *node = ctx;
	return net_threads_ok(node->net, max_age_ms, why, whylen);
}

static bool reload_ok(void *ctx, char *why, size_t whylen)
{
	node_t *node = ctx;
	pthread_mutex_lock(&node->lock);
	bool ok = !node->reload_failed;
	if (!ok)
		snprintf(why, whylen, "%s", node->reload_error);
	pthread_mutex_unlock(&node->lock);
	return ok;
}

static bool forwarder_ok(void *ctx, char *why, size_t whylen)
{
	node_t *node = ctx;
	size_t n = fwd_engine_upstream_count(node->fwd);
	for (size_t i = 0; i < n; i++) {
		fwd_upstream_stats_t st;
		if (fwd_engine_upstream(node->fwd, (uint32_t)i, &st) == 0 && st.usable)
			return true;
	}
	snprintf(why, whylen, "none of the %zu upstreams is usable", n);
	return false;
}

static uint64_t queries(void *ctx)
{
	const node_t *node = ctx;
	net_stats_t st;
	net_stats(node->net, &st);
	return atomic_load_explicit(&st.net.udp_queries, memory_order_relaxed) +
	       atomic_load_explicit(&st.net.tcp_queries, memory_order_relaxed);
}

/*
 * The expiry cell of a secondary zone belongs to the transfer module's zone state, which
 * lives until the transfer module is freed (after node_stop(), see server_stop()), across
 * reloads and the zone's removal (its cell then reads 0, never expires): the cluster thread
 * may keep reading it until the next cluster_set_zones().
 */
static void zones_tell(node_t *node, const zone_set_t *zones)
{
	size_t n = zone_set_count(zones);
	cluster_zone_t *list = xcalloc(n + 1, sizeof(*list));
	for (size_t i = 0; i < n; i++) {
		const zone_set_entry_t *e = zone_set_at(zones, i);
		list[i] = (cluster_zone_t){.apex = e->zone->name, .expire_at = e->expire_at};
	}
	cluster_set_zones(node->cluster, list, n);
	free(list);
}

int node_start(node_t *node, const conf_t *conf, const net_t *net, fwd_engine_t *fwd,
               const zone_set_t *zones)
{
	if (node->keeper == NULL)
		return 0;
	node->net = net;
	node->fwd = fwd;
	cluster_inputs_t in = {
	    .ctx = node,
	    .threads_ok = threads_ok,
	    .reload_ok = reload_ok,
	    .forwarder_ok = fwd != NULL ? forwarder_ok : NULL,
	    .queries = queries,
	    .identity = conf_identity(conf),
	};
	node->cluster = cluster_new(&conf->cluster, node->keeper, &in);
	node->keeper = NULL;
	zones_tell(node, zones);
	return cluster_start(node->cluster);
}

void node_reloaded(node_t *node, bool ok, const zone_set_t *zones, const char *err)
{
	if (node->cluster == NULL)
		return;
	pthread_mutex_lock(&node->lock);
	node->reload_failed = !ok;
	snprintf(node->reload_error, sizeof(node->reload_error), "%s",
	         ok || err == NULL ? "" : err);
	/* One line is enough for a reason; the full list is in the log and steerctl reload. */
	char *nl = strchr(node->reload_error, '\n');
	if (nl != NULL)
		*nl = '\0';
	pthread_mutex_unlock(&node->lock);
	if (ok && zones != NULL)
		zones_tell(node, zones);
}

void node_zones_changed(node_t *node, const zone_set_t *zones)
{
	if (node->cluster != NULL)
		zones_tell(node, zones);
}

void node_stop(node_t *node)
{
	if (node->cluster != NULL) {
		cluster_stop(node->cluster);
		cluster_free(node->cluster);
		node->cluster = NULL;
	}
	cluster_keeper_shutdown(node->keeper);
	node->keeper = NULL;
}
