/*
 * The cluster node's control commands: see commands.h. The reply shapes are documented in
 * tools/steerctl.c. Control thread only; the cluster thread's state is read through
 * cluster_status(), which copies it under the cluster's lock.
 */
#include "daemon/commands.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "cluster/announce.h"
#include "cluster/snippet.h"
#include "daemon/server.h"

static int no_cluster(const server_t *s, char *err, size_t errlen)
{
	(void)s;
	snprintf(err, errlen, "this node is not in a cluster (no cluster: section)");
	return STEER_ENOENT;
}

static json_t *addresses_json(const steer_sockaddr_t *a, size_t n)
{
	json_t *list = json_array();
	char text[INET6_ADDRSTRLEN];
	for (size_t i = 0; i < n; i++) {
		/* The configuration's addresses have no port; neither does their display. */
		const void *raw = a[i].sa.sa_family == AF_INET ? (const void *)&a[i].sin.sin_addr
		                                               : (const void *)&a[i].sin6.sin6_addr;
		if (a[i].sa.sa_family != 0 &&
		    inet_ntop(a[i].sa.sa_family, raw, text, sizeof(text)) != NULL)
			json_array_append_new(list, json_string(text));
	}
	return list;
}

static json_t *checks_json(const cluster_status_t *st)
{
	json_t *list = json_array();
	for (size_t i = 0; i < st->n_checks; i++) {
		const cluster_check_status_t *c = &st->checks[i];
		json_array_append_new(list,
		                      json_pack("{s:s, s:b, s:b, s:I, s:s}", "name", c->name,
		                                "enabled", c->enabled, "ok", c->ok, "failures",
		                                (json_int_t)c->failures, "detail", c->detail));
	}
	return list;
}

static json_t *drain_json(const cluster_status_t *st)
{
	const char *state = st->state == CLUSTER_DRAINING  ? "draining"
	                    : st->state == CLUSTER_DRAINED ? "drained"
	                                                   : "none";
	return json_pack("{s:s, s:o, s:f, s:b}", "state", state, "started",
	                 st->drain_started > 0 ? json_real(st->drain_started) : json_null(),
	                 "quiet_for_s", st->drain_quiet_for, "timed_out", st->drain_timed_out);
}

/* The answer check's zones, in turn (served zones only, not pending ones) into @p sc:
 * "zones" every one, "zones_skipped" those it skips and why. */
static void check_zones_json(cluster_t *c, json_t *sc)
{
	size_t n = 0;
	cluster_zone_status_t *zones = cluster_zones(c, &n);
	json_t *list = json_array(), *skipped = json_object();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(list, json_string(zones[i].apex));
		if (zones[i].expired)
			json_object_set_new(skipped, zones[i].apex, json_string("expired"));
	}
	cluster_zones_free(zones, n);
	json_object_set_new(sc, "zones", list);
	json_object_set_new(sc, "zones_skipped", skipped);
}

static int be_cluster(void *ctx, json_t **data, char *err, size_t errlen)
{
	server_t *s = ctx;
	cluster_t *c = s->node.cluster;
	if (c == NULL)
		return no_cluster(s, err, errlen);
	const conf_cluster_t *cc = &s->boot_conf->cluster;
	cluster_status_t st;
	cluster_status(c, &st);
	steer_sockaddr_t unicast[2] = {cc->unicast4, cc->unicast6};
	json_t *self_check = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:o}", "interval_ms",
	    (json_int_t)cc->check_interval, "timeout_ms", (json_int_t)cc->check_timeout, "fall",
	    (json_int_t)cc->check_fall, "rise", (json_int_t)cc->check_rise, "hold_down_ms",
	    (json_int_t)cc->check_hold_down, "good_rounds", (json_int_t)st.good_rounds,
	    "hold_down_left_s", st.hold_down_left, "checks", checks_json(&st));
	check_zones_json(c, self_check);
	json_t *keeper = json_pack("{s:I, s:b, s:s}", "pid", (json_int_t)st.keeper_pid, "alive",
	                           st.keeper_alive, "message", st.keeper_message);
	*data = json_pack(
	    "{s:s, s:s, s:o, s:o, s:o, s:s, s:b, s:b, s:b, s:I, s:o, s:s, s:o, s:o, s:o, s:o}",
	    "node_id", cc->node_id, "method", announcer_method_name(cc->announce),
	    "service_addresses", addresses_json(cc->service, cc->n_service), "interface",
	    cc->interface != NULL ? json_string(cc->interface) : json_null(), "unicast",
	    addresses_json(unicast, 2), "state", cluster_state_name(st.state), "healthy",
	    st.healthy, "want_announce", st.want_announce, "announced", st.announced, "transitions",
	    (json_int_t)st.transitions, "last_transition",
	    st.last_transition > 0 ? json_real(st.last_transition) : json_null(), "reason",
	    st.reason, "self_check", self_check, "drain", drain_json(&st), "keeper", keeper,
	    "vrrp_state", st.vrrp_state[0] != '\0' ? json_string(st.vrrp_state) : json_null());
	return 0;
}

static int be_cluster_health(void *ctx, json_t **data, char *err, size_t errlen)
{
	server_t *s = ctx;
	if (s->node.cluster == NULL)
		return no_cluster(s, err, errlen);
	cluster_status_t st;
	cluster_status(s->node.cluster, &st);
	*data = json_pack("{s:b, s:b, s:s, s:s}", "healthy", st.want_announce, "announced",
	                  st.announced, "state", cluster_state_name(st.state), "reason", st.reason);
	return 0;
}

static int be_cluster_config(void *ctx, const char *daemon, const char *const *opts, size_t n_opts,
                             json_t **data, char *err, size_t errlen)
{
	server_t *s = ctx;
	if (s->node.cluster == NULL)
		return no_cluster(s, err, errlen);
	char *text = NULL;
	int ret = cluster_snippet(&s->boot_conf->cluster, daemon, opts, n_opts, &text, err, errlen);
	if (ret != 0)
		return ret;
	*data = json_pack("{s:s, s:s}", "daemon", daemon, "config", text);
	free(text);
	return 0;
}

static int be_cluster_notify(void *ctx, const char *state, json_t **data, char *err, size_t errlen)
{
	server_t *s = ctx;
	if (s->node.cluster == NULL)
		return no_cluster(s, err, errlen);
	char upper[16];
	size_t i = 0;
	for (; state[i] != '\0' && i + 1 < sizeof(upper); i++)
		upper[i] = (char)(state[i] >= 'a' && state[i] <= 'z' ? state[i] - 32 : state[i]);
	upper[i] = '\0';
	cluster_vrrp_notify(s->node.cluster, upper);
	*data = json_pack("{s:s}", "vrrp_state", upper);
	return 0;
}

static int be_drain(void *ctx, unsigned timeout_ms, json_t **data, char *err, size_t errlen)
{
	server_t *s = ctx;
	if (s->node.cluster == NULL)
		return no_cluster(s, err, errlen);
	cluster_drain(s->node.cluster, timeout_ms);
	unsigned t = timeout_ms != 0 ? timeout_ms : s->boot_conf->cluster.drain_timeout;
	*data = json_pack("{s:s, s:I, s:I}", "state", "draining", "timeout_ms", (json_int_t)t,
	                  "quiet_ms", (json_int_t)s->boot_conf->cluster.drain_quiet);
	return 0;
}

static int be_undrain(void *ctx, json_t **data, char *err, size_t errlen)
{
	server_t *s = ctx;
	if (s->node.cluster == NULL)
		return no_cluster(s, err, errlen);
	if (!cluster_undrain(s->node.cluster)) {
		snprintf(err, errlen, "this node is not draining");
		return STEER_EINVAL;
	}
	cluster_status_t st;
	cluster_status(s->node.cluster, &st);
	*data = json_pack("{s:s}", "state", cluster_state_name(st.state));
	return 0;
}

void commands_cluster_fill(ctl_backend_t *b)
{
	b->cluster = be_cluster;
	b->cluster_health = be_cluster_health;
	b->cluster_config = be_cluster_config;
	b->cluster_notify = be_cluster_notify;
	b->drain = be_drain;
	b->undrain = be_undrain;
}
