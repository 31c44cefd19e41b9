/*
 * steerd's side of the control commands: the ctl_backend_t that ctl/commands.c dispatches to,
 * turning the server's state into reply data. The reply shapes are documented at the top of
 * tools/steerctl.c, which is the contract; members may be added, never renamed. Argument
 * checking and the command table live in ctl/; nothing here knows a transport. Control
 * thread only.
 */
#include "daemon/commands.h"

#include <arpa/inet.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "daemon/alerting.h"
#include "daemon/server.h"
#include "daemon/xfr.h"
#include "daemon/decisions.h"
#include "daemon/paths.h"
#include "daemon/tap.h"
#include "dns/dname.h"
#include "dns/names.h"

#ifndef STEER_VERSION
#define STEER_VERSION "unknown"
#endif

/* Room for one explanation: a few dozen lines even for a service with many datacenters. */
#define EXPLAIN_MAX 16384
/* Resolvers listed in the ECS section of stats. */
#define STATS_ECS_TOP 10

/* Zone names as users write them: no trailing dot, except the root zone. */
static json_t *zone_name_json(const char *name)
{
	size_t len = strlen(name);
	if (len > 1 && name[len - 1] == '.')
		len--;
	return json_stringn(name, len);
}

static json_t *last_reload_json(const server_t *s)
{
	const server_reload_status_t *r = &s->last_reload;
	if (r->at == 0)
		return json_null();
	return json_pack("{s:I, s:b, s:o}", "at", (json_int_t)r->at, "ok", r->ok, "error",
	                 r->ok ? json_null() : json_string(r->error));
}

static json_t *gslb_counts_json(const server_t *s)
{
	size_t services, maps, whoami;
	gslb_view_counts(s->gslb, &services, &maps, &whoami);
	return json_pack("{s:I, s:I, s:I}", "services", (json_int_t)services, "maps",
	                 (json_int_t)maps, "whoami", (json_int_t)whoami);
}

static int be_status(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	const server_t *s = ctx;
	json_t *listen = json_array();
	char text[STEER_SOCKADDR_STRLEN];
	for (size_t i = 0; i < net_listen_count(s->net); i++)
		json_array_append_new(listen, json_string(steer_sockaddr_str(
		                                  net_listen_at(s->net, i), text, sizeof(text))));
	const char *config = s->opts.config_path;
	*data = json_pack(
	    "{s:s, s:I, s:I, s:I, s:I, s:o, s:I, s:o, s:o, s:o}", "version", STEER_VERSION, "pid",
	    (json_int_t)getpid(), "uptime_s", (json_int_t)(time(NULL) - s->started_at), "workers",
	    (json_int_t)net_workers(s->net), "tcp_workers", (json_int_t)net_tcp_workers(s->net),
	    "listen", listen, "zones", (json_int_t)zone_set_count(s->view->auth.zones), "config",
	    config ? json_string(config) : json_null(), "last_reload", last_reload_json(s), "gslb",
	    gslb_counts_json(s));
	/* Tell front ends (the status page) which optional sections have anything to show, so
	 * they need not ask and be refused. */
	char host[256] = "";
	if (gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	json_object_set_new(*data, "hostname", json_string(host));
	json_object_set_new(*data, "forwarding", json_boolean(s->fwd != NULL));
	json_object_set_new(*data, "cluster", json_boolean(s->node.cluster != NULL));
	return 0;
}

static int be_zone_refresh(void *ctx, const char *zone, bool axfr, json_t **data, char *err,
                           size_t errlen)
{
	(void)ctx;
	uint8_t apex[DNS_DNAME_MAXLEN];
	xfr_t *x = daemon_xfr_get();
	if (dname_from_str(zone, apex) < 0) {
		snprintf(err, errlen, "'%s' is not a domain name", zone);
		return STEER_EINVAL;
	}
	dname_lower(apex);
	if (x == NULL || xfr_refresh(x, apex, axfr) != 0) {
		snprintf(err, errlen, "%s is not a secondary zone", zone);
		return STEER_ENOENT;
	}
	*data = json_pack("{s:s, s:b}", "zone", zone, "axfr", axfr);
	return 0;
}

/* The refresh state of a secondary zone, for `steerctl zones`. */
static json_t *secondary_json(const uint8_t *apex)
{
	xfr_zone_status_t st;
	xfr_t *x = daemon_xfr_get();
	if (x == NULL || !xfr_zone_status(x, apex, &st))
		return json_null();
	time_t now = time(NULL);
	json_t *o = json_pack(
	    "{s:I, s:I, s:I, s:s, s:s, s:I, s:I}", "last_refresh", (json_int_t)st.last_refresh,
	    "next_refresh", (json_int_t)st.next_refresh, "expires_in",
	    (json_int_t)(st.expire_at > now ? st.expire_at - now : 0), "primary", st.primary,
	    "last_error", st.last_error, "transfers_ok", (json_int_t)st.transfers_ok,
	    "transfers_failed", (json_int_t)st.transfers_failed);
	json_object_set_new(o, "serial", st.has_zone ? json_integer(st.serial) : json_null());
	json_object_set_new(o, "ixfr_ok", json_integer((json_int_t)st.ixfr_ok));
	return o;
}

/* The configured file of the zone @p apex, for a pending zone's row; NULL when unknown. */
static const char *conf_zone_file(const conf_t *conf, const uint8_t *apex)
{
	for (size_t i = 0; i < conf->n_zones; i++) {
		uint8_t a[DNS_DNAME_MAXLEN];
		if (dname_from_str(conf->zones[i].domain, a) > 0 && dname_equal(a, apex))
			return conf->zones[i].file;
	}
	return NULL;
}

/* "pending: no transfer yet", with the last refresh error when there is one. */
static json_t *pending_state(const json_t *secondary)
{
	const char *e = json_string_value(json_object_get(secondary, "last_error"));
	if (e == NULL || e[0] == '\0')
		return json_string("pending: no transfer yet");
	return json_sprintf("pending: no transfer yet: %s", e);
}

/* Secondary zones with no version yet: listed with their state, nothing served. */
static void secondaries_pending(const server_t *s, json_t *list)
{
	const zone_set_t *set = s->view->auth.zones;
	for (size_t i = 0; i < zone_set_pending_count(set); i++) {
		const zone_set_pending_t *p = zone_set_pending_at(set, i);
		const char *file = conf_zone_file(s->conf, p->apex);
		json_t *sec = secondary_json(p->apex);
		json_array_append_new(
		    list, json_pack("{s:o, s:n, s:o, s:o, s:o}", "name", zone_name_json(p->name),
		                    "serial", "file", file ? json_string(file) : json_null(),
		                    "state", pending_state(sec), "secondary", sec));
	}
}

/* "serving", or "expired" for a secondary zone past its expiry (answered SERVFAIL). */
static const char *served_state(const zone_set_entry_t *e)
{
	int64_t at = e->expire_at ? atomic_load_explicit(e->expire_at, memory_order_relaxed) : 0;
	return at != 0 && at <= (int64_t)time(NULL) ? "expired" : "serving";
}

static int be_zones(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	const server_t *s = ctx;
	json_t *list = json_array();
	const zone_set_t *set = s->view->auth.zones;
	for (size_t i = 0; i < zone_set_count(set); i++) {
		const zone_t *z = zone_set_at(set, i)->zone;
		json_t *o = json_pack(
		    "{s:o, s:I, s:I, s:I, s:s, s:I}", "name", zone_name_json(z->name), "serial",
		    (json_int_t)z->serial, "records", (json_int_t)z->n_records, "nodes",
		    (json_int_t)z->n_nodes, "file", z->file, "loaded_at", (json_int_t)z->loaded_at);
		json_object_set_new(o, "state", json_string(served_state(zone_set_at(set, i))));
		if (zone_set_at(set, i)->secondary)
			json_object_set_new(o, "secondary", secondary_json(z->apex));
		json_array_append_new(list, o);
	}
	secondaries_pending(s, list);
	*data = list;
	return 0;
}

/* Splits "listen,workers" into ["listen", "workers"]. */
static json_t *split_list(const char *text)
{
	json_t *list = json_array();
	while (*text != '\0') {
		size_t len = strcspn(text, ",");
		if (len > 0)
			json_array_append_new(list, json_stringn(text, len));
		text += len + (text[len] == ',');
	}
	return list;
}

static json_t *warnings_json(const steer_warnings_t *w)
{
	json_t *list = json_array();
	for (size_t i = 0; i < w->n; i++)
		json_array_append_new(list, json_string(w->msg[i]));
	return list;
}

/* The reload reply from what the reload did. */
static json_t *reload_json(const server_report_t *report)
{
	json_t *loaded = json_array();
	for (size_t i = 0; i < report->n_loaded; i++)
		json_array_append_new(loaded, zone_name_json(report->loaded[i]));
	return json_pack("{s:o, s:I, s:o, s:o}", "zones_reloaded", loaded, "zones_unchanged",
	                 (json_int_t)report->n_unchanged, "restart_needed",
	                 split_list(report->restart), "warnings", warnings_json(&report->warnings));
}

static int be_reload(void *ctx, bool force, json_t **data, char *err, size_t errlen)
{
	server_t *s = ctx;
	server_report_t report = {0};
	int ret = server_reload(s, force, &report, err, errlen);
	if (ret != 0) {
		server_report_clear(&report);
		return ret;
	}
	*data = reload_json(&report);
	server_report_clear(&report);
	return 0;
}

/* maps: every map with its nets entries (counts, load time), databases, guards. */
static int be_maps(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	const gslb_view_t *view = ((const server_t *)ctx)->gslb;
	json_t *list = json_array();
	gslb_view_map_info_t info;
	for (size_t i = 0; gslb_view_map_info(view, i, &info) == 0; i++) {
		json_t *nets = json_array();
		const gslb_nets_source_t *src;
		size_t n = gslb_nets_set_sources(info.nets, &src);
		for (size_t j = 0; j < n; j++)
			json_array_append_new(
			    nets, json_pack("{s:o, s:I, s:I, s:I, s:I, s:b, s:b}", "file",
			                    src[j].path ? json_string(src[j].path) : json_null(),
			                    "line", (json_int_t)src[j].conf_line, "ipv4",
			                    (json_int_t)src[j].n4, "ipv6", (json_int_t)src[j].n6,
			                    "loaded_at", (json_int_t)src[j].loaded_at,
			                    "allow_short_prefixes", src[j].allow_short_prefixes,
			                    "allow_shrink", src[j].allow_shrink));
		json_t *geoip = json_array();
		if (info.geoip_database)
			json_array_append_new(geoip, json_string(info.geoip_database));
		if (info.geoip_asn_database)
			json_array_append_new(geoip, json_string(info.geoip_asn_database));
		json_array_append_new(
		    list, json_pack("{s:s, s:o, s:o, s:[I, I], s:I}", "name", info.name, "nets",
		                    nets, "geoip", geoip, "min_prefix_length",
		                    (json_int_t)info.min_prefix4, (json_int_t)info.min_prefix6,
		                    "max_shrink_percent", (json_int_t)info.max_shrink));
	}
	*data = list;
	return 0;
}

/* Slot 0 of the qtype counters counts every type above 255 (CAA, ...) and type 0. */
static const char *qtype_slot_name(size_t slot)
{
	return slot == 0 ? "OTHER" : dns_type_name((uint16_t)slot);
}

static const char *rcode_slot_name(size_t slot)
{
	return dns_rcode_name((unsigned)slot);
}

/* Non-zero counters of @p counters as {"NAME": n}, unnamed slots as PREFIX<number>. */
static json_t *counter_map(const _Atomic uint64_t *counters, size_t n,
                           const char *(*name_of)(size_t slot), const char *prefix)
{
	json_t *map = json_object();
	for (size_t i = 0; i < n; i++) {
		uint64_t v = atomic_load_explicit(&counters[i], memory_order_relaxed);
		if (v == 0)
			continue;
		char key[32];
		const char *name = name_of(i);
		if (name != NULL)
			snprintf(key, sizeof(key), "%s", name);
		else
			snprintf(key, sizeof(key), "%s%zu", prefix, i);
		json_object_set_new(map, key, json_integer((json_int_t)v));
	}
	return map;
}

#define COUNTER(st, field) ((json_int_t)atomic_load_explicit(&(st)->field, memory_order_relaxed))

/* The query log's numbers: whether it is on, messages written and dropped (never waited). */
static json_t *dnstap_json(const server_t *s)
{
	tap_counters_t tc;
	server_tap_stats(s, &tc);
	return json_pack("{s:b, s:I, s:I}", "enabled", s->tap != NULL, "logged",
	                 COUNTER(&tc, logged), "dropped", COUNTER(&tc, dropped));
}

static int be_stats(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	const server_t *s = ctx;
	net_stats_t sum;
	net_stats(s->net, &sum);
	const net_counters_t *nc = &sum.net;
	const auth_stats_t *st = &sum.auth;
	const gslb_stats_t *gs = &sum.gslb;
	json_t *queries = json_pack("{s:I, s:I, s:I}", "udp", COUNTER(nc, udp_queries), "tcp",
	                            COUNTER(nc, tcp_queries), "ipv6", COUNTER(nc, ipv6_queries));
	auth_stats_resolver_t top[STATS_ECS_TOP];
	size_t n_top = auth_stats_top_resolvers(st, top, STATS_ECS_TOP);
	json_t *resolvers = json_array();
	for (size_t i = 0; i < n_top; i++) {
		char addr[INET6_ADDRSTRLEN];
		steer_sockaddr_ip_str(&top[i].addr, addr, sizeof(addr));
		json_array_append_new(resolvers, json_pack("{s:s, s:I}", "address", addr, "queries",
		                                           (json_int_t)top[i].queries));
	}
	json_t *ecs = json_pack("{s:I, s:I, s:I, s:o}", "ipv4", COUNTER(st, ecs_v4), "ipv6",
	                        COUNTER(st, ecs_v6), "ignored", COUNTER(gs, ecs_ignored),
	                        "resolvers", resolvers);
	json_t *gslb = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "services", COUNTER(gs, services),
	    "addresses", COUNTER(gs, addresses), "cname", COUNTER(gs, cname), "nodata",
	    COUNTER(gs, nodata), "servfail", COUNTER(gs, servfail), "all_down",
	    COUNTER(gs, all_down), "ecs_used", COUNTER(gs, ecs_used), "ecs_ignored",
	    COUNTER(gs, ecs_ignored), "whoami", COUNTER(gs, whoami));
	const fwd_serve_counters_t *fc = &sum.fwd;
	json_t *forward = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "recursion_refused", COUNTER(fc, refused),
	    "cache_hits", COUNTER(fc, cache.hits), "cache_misses", COUNTER(fc, cache.misses),
	    "forwarded", COUNTER(fc, forwarded), "norec_misses", COUNTER(fc, norec_miss),
	    "overload", COUNTER(fc, overload), "prefetches", COUNTER(fc, cache.prefetches));
	*data = json_pack(
	    "{s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "queries", queries,
	    "rcode", counter_map(st->rcode, STATS_RCODE_SLOTS, rcode_slot_name, "RCODE"), "qtype",
	    counter_map(st->qtype, STATS_QTYPE_SLOTS, qtype_slot_name, "TYPE"), "edns",
	    COUNTER(st, edns), "edns_do", COUNTER(st, edns_do), "truncated", COUNTER(st, truncated),
	    "dropped", COUNTER(nc, dropped) + COUNTER(st, dropped), "axfr", COUNTER(st, axfr),
	    "axfr_refused", COUNTER(st, axfr_refused), "ixfr", COUNTER(st, ixfr), "ecs", ecs,
	    "gslb", gslb, "forward", forward);
	/* {"<service>": {"<datacenter>": n}}, for the status page's charts */
	json_object_set_new(*data, "answers", metrics_answers_json(s));
	json_object_set_new(*data, "alerts", alerting_stats_json(s));
	json_object_set_new(*data, "dnstap", dnstap_json(s));
	json_object_set_new(*data, "tsig",
	                    json_pack("{s:I, s:I, s:I, s:I}", "ok", COUNTER(st, tsig_ok), "badkey",
	                              COUNTER(st, tsig_badkey), "badsig", COUNTER(st, tsig_badsig),
	                              "badtime", COUNTER(st, tsig_badtime)));
	uint64_t dl_written, dl_dropped;
	decisions_stats(s, &dl_written, &dl_dropped);
	json_object_set_new(*data, "decision_log",
	                    json_pack("{s:b, s:I, s:I}", "enabled", s->decisions != NULL, "written",
	                              (json_int_t)dl_written, "dropped", (json_int_t)dl_dropped));
	json_object_set_new(*data, "rrl",
	                    json_pack("{s:I, s:I, s:I}", "dropped", COUNTER(st, rrl_dropped),
	                              "slipped", COUNTER(st, rrl_slipped), "logged",
	                              COUNTER(st, rrl_logged)));
	json_object_set_new(
	    *data, "cookies",
	    json_pack("{s:I, s:I, s:I, s:I}", "queries", COUNTER(st, cookie_queries), "valid",
	              COUNTER(st, cookie_valid), "invalid", COUNTER(st, cookie_invalid),
	              "badcookie", COUNTER(st, cookie_badcookie)));
	return 0;
}

/* explain NAME CLIENT-IP [ECS-SUBNET]: the decision the current GSLB view makes. */
static int be_explain(void *ctx, const char *name, const char *client, const char *ecs,
                      json_t **data, char *err, size_t errlen)
{
	const server_t *s = ctx;
	char *text = malloc(EXPLAIN_MAX);
	if (text == NULL) {
		snprintf(err, errlen, "out of memory");
		return STEER_ENOMEM;
	}
	int ret = gslb_view_explain(s->gslb, name, client, ecs, text, EXPLAIN_MAX);
	if (ret != 0) {
		snprintf(err, errlen, "%s", text);
		free(text);
		return ret;
	}
	*data = json_pack("{s:s, s:s, s:o, s:s}", "name", name, "client", client, "ecs",
	                  ecs ? json_string(ecs) : json_null(), "text", text);
	free(text);
	return 0;
}

/* A metrics check's values: {"connections": {"value", "age_ms", "fresh"}, ...}. */
static json_t *check_values_json(const health_check_status_t *st)
{
	json_t *values = json_object();
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++) {
		if (!(st->have & (1u << k)))
			continue;
		json_object_set_new(values, health_metric_name(k),
		                    json_pack("{s:f, s:I, s:b}", "value", st->values[k], "age_ms",
		                              (json_int_t)st->age_ms[k], "fresh",
		                              (st->fresh & (1u << k)) != 0));
	}
	return values;
}

/* One check as JSON (steerctl monitors, and inside health rows). */
static json_t *check_json(const health_check_status_t *st)
{
	char addr[STEER_SOCKADDR_STRLEN];
	steer_sockaddr_str(&st->addr, addr, sizeof(addr));
	json_t *row = json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I}", "key",
	                        st->key, "monitor", st->monitor, "type",
	                        st->is_static ? "static" : health_probe_type_name(st->type),
	                        "address", addr, "state", health_check_state_str(st), "flapping",
	                        st->flapping, "since", (json_int_t)st->since, "ok_run",
	                        (json_int_t)st->ok_run, "fail_run", (json_int_t)st->fail_run,
	                        "flaps", (json_int_t)st->flaps, "probes", (json_int_t)st->probes);
	if (st->last_at) {
		json_object_set_new(row, "last",
		                    json_pack("{s:b, s:I, s:s, s:I}", "ok", st->last_ok, "rtt_us",
		                              (json_int_t)st->last_rtt_us, "detail",
		                              st->last_detail, "at", (json_int_t)st->last_at));
	}
	json_object_set_new(row, "ttl_cap", json_integer(st->ttl_cap));
	if (st->ramp)
		json_object_set_new(row, "ramp_percent", json_integer(st->ramp));
	if (st->is_metrics) {
		json_object_set_new(row, "values", check_values_json(st));
		json_object_set_new(row, "values_at", json_integer((json_int_t)st->values_at));
	}
	return row;
}

/* The load values the policies see for a target (fresh ones only), null when none. */
static json_t *target_load_json(const gslb_health_t *h, uint32_t id)
{
	const gslb_load_t *load = gslb_health_load(h, id);
	if (!load)
		return json_null();
	json_t *values = json_object();
	for (unsigned k = 0; k < GSLB_LOAD_KINDS; k++)
		if (load->have & (1u << k))
			json_object_set_new(values, health_metric_name(k), json_real(load->v[k]));
	return json_pack("{s:o, s:I, s:I}", "values", values, "age_ms", (json_int_t)load->age_ms,
	                 "round", (json_int_t)load->round);
}

/* True when there is no filter or glob @p pattern matches @p name (case-insensitive). */
static bool glob_match(const char *pattern, const char *name)
{
	return pattern == NULL || (name != NULL && fnmatch(pattern, name, FNM_CASEFOLD) == 0);
}

/* monitors [PATTERN]: every check (whose key or monitor matches) with its state and result. */
static int be_monitors(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	const server_t *s = ctx;
	json_t *list = json_array();
	for (size_t i = 0; s->engine && i < health_engine_count(s->engine); i++) {
		health_check_status_t st;
		health_engine_status(s->engine, i, &st);
		if (glob_match(pattern, st.key) || glob_match(pattern, st.monitor))
			json_array_append_new(list, check_json(&st));
	}
	*data = list;
	return 0;
}

typedef struct {
	const server_t *s;
	const char *pattern; /* NULL = every target */
	json_t *list;
} health_ctx_t;

/* The checks target @p id depends on, with their states, as a JSON list. */
static json_t *target_checks(const server_t *s, uint32_t id)
{
	json_t *list = json_array();
	size_t n = 0;
	const uint32_t *idx = s->plan ? monitor_plan_target_checks(s->plan, id, &n) : NULL;
	for (size_t i = 0; i < n; i++) {
		if (idx[i] >= health_engine_count(s->engine))
			continue;
		health_check_status_t st;
		health_engine_status(s->engine, idx[i], &st);
		json_t *row =
		    json_pack("{s:s, s:s}", "key", st.key, "state", health_check_state_str(&st));
		if (st.last_at)
			json_object_set_new(row, "last", json_string(st.last_detail));
		json_array_append_new(list, row);
	}
	return list;
}

/* Name the first DOWN check behind a monitor DOWN, e.g. " (web@192.0.2.1:80: HTTP 503)". */
static void append_down_check(const server_t *s, const gslb_health_entry_t *e, char *reason,
                              size_t len, size_t cap)
{
	if (!gslb_sttl_down(e->monitor) || !s->plan || !s->engine || len >= cap)
		return;
	health_check_status_t st;
	if (monitor_plan_target_check(s->plan, s->engine, e->id, true, &st))
		snprintf(reason + len, cap - len, " (%s: %s)", st.key,
		         st.last_at ? st.last_detail : health_check_state_str(&st));
}

static int health_row(const gslb_health_entry_t *e, void *arg)
{
	health_ctx_t *ctx = arg;
	if (!glob_match(ctx->pattern, e->name))
		return 0;
	char reason[1280];
	int n = gslb_health_reason(e, reason, sizeof(reason));
	append_down_check(ctx->s, e, reason, n < 0 ? sizeof(reason) : (size_t)n, sizeof(reason));
	json_t *row = json_pack("{s:I, s:o, s:s, s:b, s:s, s:I}", "id", (json_int_t)e->id, "name",
	                        e->name ? json_string(e->name) : json_null(), "state",
	                        gslb_sttl_down(e->eff) ? "DOWN" : "UP", "forced", e->forced,
	                        "reason", reason, "ttl_cap", (json_int_t)gslb_sttl_ttl(e->eff));
	if (e->weight >= 0)
		json_object_set_new(row, "weight_override", json_integer(e->weight));
	if (e->ramp)
		json_object_set_new(row, "ramp_percent", json_integer(e->ramp));
	json_object_set_new(row, "monitors", target_checks(ctx->s, e->id));
	json_object_set_new(row, "load", target_load_json(gslb_view_health(ctx->s->gslb), e->id));
	json_array_append_new(ctx->list, row);
	return 0;
}

/* health [PATTERN]: every GSLB target (whose name matches) with its effective state and why. */
static int be_health(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	const server_t *s = ctx;
	health_ctx_t hc = {s, pattern, json_array()};
	(void)gslb_health_list(gslb_view_health(s->gslb), health_row, &hc);
	*data = hc.list;
	return 0;
}

/* "expires" (seconds since the epoch, ms precision) and "expires_in_ms", null when never. */
static void expiry_fields(json_t *row, int64_t expires_ms)
{
	if (expires_ms <= 0) {
		json_object_set_new(row, "expires", json_null());
		json_object_set_new(row, "expires_in_ms", json_null());
		return;
	}
	int64_t left = expires_ms - server_wall_ms();
	json_object_set_new(row, "expires", json_real((double)expires_ms / 1000.0));
	json_object_set_new(row, "expires_in_ms", json_integer(left > 0 ? left : 0));
}

static json_t *override_row(const server_t *s, const gslb_override_t *r, const char *source)
{
	json_t *row = json_pack("{s:s, s:s, s:o, s:I}", "pattern", r->pattern, "source", source,
	                        "line", r->line ? json_integer(r->line) : json_null(), "targets",
	                        (json_int_t)gslb_admin_pattern_targets(s->gslb, r->pattern));
	if (r->kind == GSLB_OVERRIDE_WEIGHT)
		json_object_set_new(row, "weight", json_integer(r->weight));
	else
		json_object_set_new(row, "state", json_string(r->down ? "DOWN" : "UP"));
	expiry_fields(row, r->expires_ms);
	return row;
}

/* The override list: the config's rules, then the admin's (later rules win). */
static json_t *override_list(const server_t *s)
{
	json_t *list = json_array();
	const conf_t *conf = s->conf;
	for (size_t i = 0; i < conf->n_overrides; i++) {
		const conf_override_t *co = &conf->overrides[i];
		gslb_override_t r = {.pattern = co->pattern, .down = !co->up, .line = co->line};
		json_array_append_new(list, override_row(s, &r, "config"));
	}
	for (size_t i = 0; i < s->admin.rules.count; i++)
		json_array_append_new(list, override_row(s, &s->admin.rules.rules[i], "admin"));
	return json_pack("{s:o, s:o}", "state_file",
	                 conf->state_file ? json_string(conf->state_file) : json_null(),
	                 "overrides", list);
}

static int be_override_list(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	*data = override_list(ctx);
	return 0;
}

/* override set|clear|weight: the change, then the list as it is now. */
static int be_override(void *ctx, const ctl_override_req_t *req, json_t **data, char *err,
                       size_t errlen)
{
	server_t *s = ctx;
	gslb_admin_req_t ar = {
	    .action = req->action == CTL_OVERRIDE_SET ? GSLB_ADMIN_SET : GSLB_ADMIN_CLEAR,
	    .rule = {.pattern = (char *)req->pattern,
	             .kind = req->kind == CTL_OVERRIDE_WEIGHT ? GSLB_OVERRIDE_WEIGHT
	                                                      : GSLB_OVERRIDE_STATE,
	             .down = req->down,
	             .weight = req->weight,
	             .expires_ms = req->for_ms ? server_wall_ms() + req->for_ms : 0},
	    .any_kind = req->kind == CTL_OVERRIDE_ANY};
	gslb_admin_result_t res;
	int ret = server_override(s, &ar, &res, err, errlen);
	if (ret != 0)
		return ret;
	bool set = ar.action == GSLB_ADMIN_SET;
	bool weight = set ? ar.rule.kind == GSLB_OVERRIDE_WEIGHT : !res.cleared_state;
	json_t *cleared = json_array();
	if (res.cleared_state)
		json_array_append_new(cleared, json_string("state"));
	if (res.cleared_weight)
		json_array_append_new(cleared, json_string("weight"));
	json_t *list = override_list(s);
	*data = json_pack(
	    "{s:s, s:s, s:s, s:o, s:o, s:I, s:O, s:O}", "action", set ? "set" : "clear", "kind",
	    weight ? "weight" : "state", "pattern", req->pattern, "state",
	    set && !weight ? json_string(ar.rule.down ? "DOWN" : "UP") : json_null(), "weight",
	    set && weight ? json_integer(ar.rule.weight) : json_null(), "targets",
	    (json_int_t)res.targets, "state_file", json_object_get(list, "state_file"), "overrides",
	    json_object_get(list, "overrides"));
	if (!set)
		json_object_set_new(*data, "cleared", cleared);
	else
		json_decref(cleared);
	if (set)
		expiry_fields(*data, ar.rule.expires_ms);
	json_decref(list);
	return 0;
}

/* ---- the caching forwarder ------------------------------------------------------------- */

static int no_forwarding(char *err, size_t errlen)
{
	snprintf(err, errlen, "forwarding is not configured (no forward groups)");
	return STEER_ENOENT;
}

/* The engine's clock (upstream.h's now_ms): CLOCK_MONOTONIC in milliseconds. */
static uint64_t monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* "up" rather than fwd_fault_str()'s "none": what an operator reads in a state column. */
static const char *upstream_state(fwd_fault_t fault)
{
	return fault == FWD_FAULT_NONE ? "up" : fwd_fault_str(fault);
}

/* Milliseconds with a fraction, or null before the first sample. */
static json_t *rtt_json(uint32_t us)
{
	return us ? json_real((double)us / 1000.0) : json_null();
}

/* An address without its port (a source is only an address), or null when unset. */
static json_t *host_json(const steer_sockaddr_t *a)
{
	char text[INET6_ADDRSTRLEN];
	if (a->sa.sa_family == AF_INET)
		inet_ntop(AF_INET, &a->sin.sin_addr, text, sizeof(text));
	else if (a->sa.sa_family == AF_INET6)
		inet_ntop(AF_INET6, &a->sin6.sin6_addr, text, sizeof(text));
	else
		return json_null();
	return json_string(text);
}

/*
 * Which members of a group take its traffic now, as upstream.c picks them: the up ones
 * before the degraded ones (those only when none is up), then by policy: ordered the first
 * in list order, fastest the lowest smoothed RTT (no sample yet counts as fastest, so it gets
 * one; upstream.c also lets an idle member's RTT decay, which the copied stats do not show,
 * so this is the choice as of the last samples), round-robin all of them in turn. Marks
 * @p active[i] for the stats rows of @p group.
 */
static void group_active(const fwd_upstream_stats_t *st, size_t n, uint32_t group,
                         fwd_policy_t policy, bool *active)
{
	fwd_fault_t tier = FWD_FAULT_NONE;
	bool any = false;
	for (size_t i = 0; i < n; i++)
		any |= st[i].group == group && st[i].fault == FWD_FAULT_NONE;
	if (!any)
		tier = FWD_FAULT_UPSTREAM_DEGRADED;
	long best = -1;
	for (size_t i = 0; i < n; i++) {
		if (st[i].group != group || st[i].fault != tier)
			continue;
		if (policy == FWD_POLICY_ROUND_ROBIN)
			active[i] = true;
		else if (best < 0 ||
		         (policy == FWD_POLICY_FASTEST && st[i].srtt_us < st[best].srtt_us) ||
		         (policy == FWD_POLICY_ORDERED && st[i].member < st[best].member))
			best = (long)i;
	}
	if (best >= 0)
		active[best] = true;
}

static fwd_policy_t policy_of(const char *name)
{
	if (name && strcmp(name, "round-robin") == 0)
		return FWD_POLICY_ROUND_ROBIN;
	if (name && strcmp(name, "fastest") == 0)
		return FWD_POLICY_FASTEST;
	return FWD_POLICY_ORDERED;
}

static json_t *upstream_json(const fwd_engine_t *e, const fwd_upstream_stats_t *u, bool active,
                             uint64_t now_ms, time_t now)
{
	char addr[STEER_SOCKADDR_STRLEN];
	uint64_t age_ms = now_ms > u->since_ms ? now_ms - u->since_ms : 0;
	json_t *row =
	    json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:s, s:b, s:b, s:b, s:I, s:I, s:s}", "name",
	              u->name, "group", fwd_engine_group_domain(e, u->group), "policy",
	              fwd_engine_group_policy(e, u->group), "address",
	              steer_sockaddr_str(&u->address, addr, sizeof(addr)), "source",
	              host_json(&u->source), "link", u->link ? json_string(u->link) : json_null(),
	              "state", upstream_state(u->fault), "suspect", u->suspect, "usable", u->usable,
	              "active", active, "since", (json_int_t)(now - (time_t)(age_ms / 1000)),
	              "since_s", (json_int_t)(age_ms / 1000), "reason", u->reason);
	json_t *counters =
	    json_pack("{s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:I, s:I, s:I}", "queries",
	              (json_int_t)u->queries, "answers", (json_int_t)u->answers, "timeouts",
	              (json_int_t)u->timeouts, "servfails", (json_int_t)u->servfails, "srtt_ms",
	              rtt_json(u->srtt_us), "last_rtt_ms", rtt_json(u->last_rtt_us), "probe_rtt_ms",
	              rtt_json(u->probe_rtt_us), "probes", (json_int_t)u->probes, "probe_failures",
	              (json_int_t)u->probe_failures, "hold_down_ms", (json_int_t)u->hold_down_ms);
	json_object_update(row, counters);
	json_decref(counters);
	return row;
}

/* upstreams [PATTERN]: every group with the upstreams in use, and each (matching) upstream. */
static int be_upstreams(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen)
{
	server_t *s = ctx;
	fwd_engine_t *e = s->fwd;
	if (!e)
		return no_forwarding(err, errlen);
	size_t n = fwd_engine_upstream_count(e), n_groups = fwd_engine_group_count(e);
	fwd_upstream_stats_t *st = calloc(n ? n : 1, sizeof(*st));
	bool *active = calloc(n ? n : 1, sizeof(*active));
	int ret = 0;
	if (!st || !active) {
		snprintf(err, errlen, "out of memory");
		ret = STEER_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		ret = fwd_engine_upstream(e, (uint32_t)i, &st[i]);
		if (ret != 0) {
			snprintf(err, errlen, "upstream %zu: %s", i, steer_strerror(ret));
			goto out;
		}
	}
	/* one moment for every row, so "since" values compare */
	uint64_t now_ms = monotonic_ms();
	time_t now = time(NULL);
	json_t *groups = json_array(), *rows = json_array();
	for (uint32_t g = 0; g < n_groups; g++) {
		const char *policy = fwd_engine_group_policy(e, g);
		group_active(st, n, g, policy_of(policy), active);
		json_t *members = json_array(), *using = json_array();
		bool shown = false;
		for (size_t i = 0; i < n; i++) {
			if (st[i].group != g)
				continue;
			json_array_append_new(members, json_string(st[i].name));
			if (active[i])
				json_array_append_new(using, json_string(st[i].name));
			if (glob_match(pattern, st[i].name)) {
				json_array_append_new(
				    rows, upstream_json(e, &st[i], active[i], now_ms, now));
				shown = true;
			}
		}
		if (shown)
			json_array_append_new(groups, json_pack("{s:s, s:s, s:o, s:o}", "domain",
			                                        fwd_engine_group_domain(e, g),
			                                        "policy", policy, "active", using,
			                                        "upstreams", members));
		else {
			json_decref(members);
			json_decref(using);
		}
	}
	*data = json_pack("{s:o, s:o}", "groups", groups, "upstreams", rows);
out:
	free(st);
	free(active);
	return ret;
}

/* The engine's dropped and accepted upstream replies by verdict name ("forged-id": 3). */
static json_t *verdicts_json(const fwd_wire_counters_t *w)
{
	json_t *map = json_object();
	for (size_t v = 0; v < FWD_WIRE_VERDICT_MAX; v++)
		json_object_set_new(map, fwd_wire_verdict_name((fwd_wire_verdict_t)v),
		                    json_integer((json_int_t)w->drop[v]));
	return map;
}

/* cache: the cache's size and counters (query threads' and the writer's) and the engine's. */
static int be_cache(void *ctx, json_t **data, char *err, size_t errlen)
{
	server_t *s = ctx;
	fwd_engine_t *e = s->fwd;
	if (!e)
		return no_forwarding(err, errlen);
	fwd_cache_stats_t cs;
	fwd_cache_stats(fwd_engine_cache(e), &cs);
	fwd_engine_stats_t es;
	fwd_engine_stats(e, &es);
	net_stats_t sum;
	net_stats(s->net, &sum);
	const fwd_cache_counters_t *hc = &sum.fwd.cache;
	json_t *cache = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "entries",
	    (json_int_t)cs.entries, "bytes", (json_int_t)cs.bytes, "max_bytes",
	    (json_int_t)cs.max_bytes, "hits", COUNTER(hc, hits), "misses", COUNTER(hc, misses),
	    "stale_answers", COUNTER(hc, stale_answers), "prefetches", COUNTER(hc, prefetches),
	    "truncated", COUNTER(hc, truncated), "evictions", (json_int_t)cs.evictions, "expired",
	    (json_int_t)cs.expired, "inserts", (json_int_t)cs.inserts, "replaced",
	    (json_int_t)cs.replaced, "refused", (json_int_t)cs.refused);
	json_t *engine = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
	    "requests", (json_int_t)es.requests, "answered", (json_int_t)es.answered,
	    "answered_stale", (json_int_t)es.answered_stale, "servfail", (json_int_t)es.servfail,
	    "refused_full", (json_int_t)es.refused_full, "prefetches", (json_int_t)es.prefetches,
	    "upstream_queries", (json_int_t)es.upstream_queries, "retries", (json_int_t)es.retries,
	    "tcp_queries", (json_int_t)es.tcp_queries, "late_replies", (json_int_t)es.late_replies,
	    "socket_errors", (json_int_t)es.socket_errors, "probes", (json_int_t)es.probes,
	    "cache_stores", (json_int_t)es.cache_stores, "pending", (json_int_t)es.pending,
	    "replies", verdicts_json(&es.wire));
	*data = json_pack("{s:o, s:o}", "cache", cache, "engine", engine);
	return 0;
}

/* cache flush [NAME]: queued to the engine thread, done within one of its loop iterations. */
static int be_cache_flush(void *ctx, const char *name, json_t **data, char *err, size_t errlen)
{
	server_t *s = ctx;
	if (!s->fwd)
		return no_forwarding(err, errlen);
	fwd_cache_stats_t before;
	fwd_cache_stats(fwd_engine_cache(s->fwd), &before);
	int ret = fwd_engine_flush(s->fwd, name, true);
	if (ret == STEER_EINVAL) {
		snprintf(err, errlen, "invalid domain name '%s'", name ? name : "");
		return ret;
	}
	if (ret != 0) {
		snprintf(err, errlen, "cache flush: %s", steer_strerror(ret));
		return ret;
	}
	*data = json_pack("{s:o, s:b, s:I}", "name", name ? json_string(name) : json_null(),
	                  "subtree", 1, "entries_before", (json_int_t)before.entries);
	return 0;
}

/* events [N] [since=SEQ]: the ring's newest events, oldest first, and the newest number. */
static int be_events(void *ctx, uint64_t since, size_t max, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	const server_t *s = ctx;
	*data = json_pack("{s:I, s:I, s:o}", "last_seq", (json_int_t)s->events.last_seq, "kept",
	                  (json_int_t)EVENTS_RING, "events", events_json(&s->events, since, max));
	return 0;
}

/* paths [PREFIX|ADDRESS]: the agents, the merged table, and a prefix's row and demand. */
static int be_paths(void *ctx, const char *prefix, json_t **data, char *err, size_t errlen)
{
	return paths_json(ctx, prefix, data, err, errlen);
}

static void be_prepare(void *ctx)
{
	server_health_flush(ctx); /* report nothing the query threads do not see yet */
}

const ctl_backend_t *commands_backend(server_t *s)
{
	s->backend = (ctl_backend_t){
	    .ctx = s,
	    .prepare = be_prepare,
	    .status = be_status,
	    .zones = be_zones,
	    .zone_refresh = be_zone_refresh,
	    .reload = be_reload,
	    .stats = be_stats,
	    .explain = be_explain,
	    .health = be_health,
	    .monitors = be_monitors,
	    .override_list = be_override_list,
	    .override = be_override,
	    .maps = be_maps,
	    .upstreams = be_upstreams,
	    .cache = be_cache,
	    .cache_flush = be_cache_flush,
	    .events = be_events,
	    .paths = be_paths,
	};
	commands_cluster_fill(&s->backend);
	return &s->backend;
}
