/*
 * steerd's control commands. The reply shapes are documented at the top of tools/steerctl.c,
 * which is the contract; members may be added, never renamed. Control thread only.
 */
#include "daemon/commands.h"

#include <ctype.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/err.h"
#include "daemon/server.h"
#include "dns/const.h"

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

static json_t *cmd_status(const server_t *s)
{
	json_t *listen = json_array();
	char text[STEER_SOCKADDR_STRLEN];
	for (size_t i = 0; i < net_listen_count(s->net); i++)
		json_array_append_new(listen, json_string(steer_sockaddr_str(
		                                  net_listen_at(s->net, i), text, sizeof(text))));
	const char *config = s->opts.config_path;
	return json_pack(
	    "{s:s, s:I, s:I, s:I, s:I, s:o, s:I, s:o, s:o, s:o}", "version", STEER_VERSION, "pid",
	    (json_int_t)getpid(), "uptime_s", (json_int_t)(time(NULL) - s->started_at), "workers",
	    (json_int_t)net_workers(s->net), "tcp_workers", (json_int_t)net_tcp_workers(s->net),
	    "listen", listen, "zones", (json_int_t)zone_set_count(s->view->zones), "config",
	    config ? json_string(config) : json_null(), "last_reload", last_reload_json(s), "gslb",
	    gslb_counts_json(s));
}

static json_t *cmd_zones(const server_t *s)
{
	json_t *list = json_array();
	const zone_set_t *set = s->view->zones;
	for (size_t i = 0; i < zone_set_count(set); i++) {
		const zone_t *z = zone_set_at(set, i)->zone;
		json_array_append_new(list, json_pack("{s:o, s:I, s:I, s:I, s:s, s:I}", "name",
		                                      zone_name_json(z->name), "serial",
		                                      (json_int_t)z->serial, "records",
		                                      (json_int_t)z->n_records, "nodes",
		                                      (json_int_t)z->n_nodes, "file", z->file,
		                                      "loaded_at", (json_int_t)z->loaded_at));
	}
	return list;
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

/* reload's arguments: none, or {"force": true} (the string "--force" is accepted too). */
static int reload_args(json_t *args, bool *force, char *err, size_t errlen)
{
	*force = false;
	size_t n = json_array_size(args);
	const json_t *a = n == 1 ? json_array_get(args, 0) : NULL;
	if (n == 0)
		return 0;
	if (json_is_object(a) && json_object_size(a) == 1 &&
	    json_is_boolean(json_object_get(a, "force"))) {
		*force = json_is_true(json_object_get(a, "force"));
		return 0;
	}
	if (json_is_string(a) && strcmp(json_string_value(a), "--force") == 0) {
		*force = true;
		return 0;
	}
	snprintf(err, errlen, "usage: reload [--force] (arguments: none or {\"force\": true})");
	return STEER_EINVAL;
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

static int cmd_reload(server_t *s, json_t *args, json_t **data, char *err, size_t errlen)
{
	bool force;
	int ret = reload_args(args, &force, err, errlen);
	if (ret != 0)
		return ret;
	server_report_t report = {0};
	ret = server_reload(s, force, &report, err, errlen);
	if (ret != 0)
		return ret;
	*data = reload_json(&report);
	server_report_clear(&report);
	return 0;
}

/* maps: every map of @p view with its nets entries (counts, load time), databases, guards. */
static json_t *maps_json(const gslb_view_t *view)
{
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
	return list;
}

static const char *const rcode_names[STATS_RCODE_SLOTS] = {
    [0] = "NOERROR",  [1] = "FORMERR",    [2] = "SERVFAIL", [3] = "NXDOMAIN", [4] = "NOTIMP",
    [5] = "REFUSED",  [6] = "YXDOMAIN",   [7] = "YXRRSET",  [8] = "NXRRSET",  [9] = "NOTAUTH",
    [10] = "NOTZONE", [11] = "DSOTYPENI", [16] = "BADVERS",
};

static const char *const qtype_names[STATS_QTYPE_SLOTS] = {
    [DNS_TYPE_A] = "A",
    [DNS_TYPE_NS] = "NS",
    [DNS_TYPE_CNAME] = "CNAME",
    [DNS_TYPE_SOA] = "SOA",
    [DNS_TYPE_NULL] = "NULL",
    [DNS_TYPE_PTR] = "PTR",
    [DNS_TYPE_HINFO] = "HINFO",
    [DNS_TYPE_MX] = "MX",
    [DNS_TYPE_TXT] = "TXT",
    [DNS_TYPE_AAAA] = "AAAA",
    [DNS_TYPE_SRV] = "SRV",
    [DNS_TYPE_NAPTR] = "NAPTR",
    [DNS_TYPE_DNAME] = "DNAME",
    [DNS_TYPE_OPT] = "OPT",
    [DNS_TYPE_DS] = "DS",
    [DNS_TYPE_RRSIG] = "RRSIG",
    [DNS_TYPE_NSEC] = "NSEC",
    [DNS_TYPE_DNSKEY] = "DNSKEY",
    [DNS_TYPE_NSEC3] = "NSEC3",
    [DNS_TYPE_NSEC3PARAM] = "NSEC3PARAM",
    [DNS_TYPE_TLSA] = "TLSA",
    [DNS_TYPE_SVCB] = "SVCB",
    [DNS_TYPE_HTTPS] = "HTTPS",
    [DNS_TYPE_TKEY] = "TKEY",
    [DNS_TYPE_TSIG] = "TSIG",
    [DNS_TYPE_IXFR] = "IXFR",
    [DNS_TYPE_AXFR] = "AXFR",
    [DNS_TYPE_ANY] = "ANY",
    /* Slot 0 counts every type above 255 (CAA, ...) and type 0. */
    [0] = "OTHER",
};

/* Non-zero counters of @p counters as {"NAME": n}, unnamed slots as PREFIX<number>. */
static json_t *counter_map(const _Atomic uint64_t *counters, size_t n, const char *const *names,
                           const char *prefix)
{
	json_t *map = json_object();
	for (size_t i = 0; i < n; i++) {
		uint64_t v = atomic_load_explicit(&counters[i], memory_order_relaxed);
		if (v == 0)
			continue;
		char key[32];
		if (names[i] != NULL)
			snprintf(key, sizeof(key), "%s", names[i]);
		else
			snprintf(key, sizeof(key), "%s%zu", prefix, i);
		json_object_set_new(map, key, json_integer((json_int_t)v));
	}
	return map;
}

#define COUNTER(st, field) ((json_int_t)atomic_load_explicit(&(st)->field, memory_order_relaxed))

static json_t *cmd_stats(const server_t *s)
{
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
		char addr[INET6_ADDRSTRLEN] = "?";
		const steer_sockaddr_t *a = &top[i].addr;
		if (a->sa.sa_family == AF_INET)
			inet_ntop(AF_INET, &a->sin.sin_addr, addr, sizeof(addr));
		else
			inet_ntop(AF_INET6, &a->sin6.sin6_addr, addr, sizeof(addr));
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
	return json_pack(
	    "{s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "queries", queries, "rcode",
	    counter_map(st->rcode, STATS_RCODE_SLOTS, rcode_names, "RCODE"), "qtype",
	    counter_map(st->qtype, STATS_QTYPE_SLOTS, qtype_names, "TYPE"), "edns",
	    COUNTER(st, edns), "edns_do", COUNTER(st, edns_do), "truncated", COUNTER(st, truncated),
	    "dropped", COUNTER(nc, dropped) + COUNTER(st, dropped), "axfr", COUNTER(st, axfr),
	    "axfr_refused", COUNTER(st, axfr_refused), "ecs", ecs, "gslb", gslb);
}

/* explain NAME CLIENT-IP [ECS-SUBNET]: the decision the current GSLB view makes. */
static int cmd_explain(const server_t *s, json_t *args, json_t **data, char *err, size_t errlen)
{
	size_t n = json_array_size(args);
	const char *argv[3] = {NULL, NULL, NULL};
	for (size_t i = 0; i < n && i < 3; i++)
		argv[i] = json_string_value(json_array_get(args, i));
	if (n < 2 || n > 3 || argv[0] == NULL || argv[1] == NULL || (n == 3 && argv[2] == NULL)) {
		snprintf(err, errlen, "usage: explain NAME CLIENT-IP [ECS-SUBNET]");
		return STEER_EINVAL;
	}
	char *text = malloc(EXPLAIN_MAX);
	if (text == NULL) {
		snprintf(err, errlen, "out of memory");
		return STEER_ENOMEM;
	}
	int ret = gslb_view_explain(s->gslb, argv[0], argv[1], argv[2], text, EXPLAIN_MAX);
	if (ret != 0) {
		snprintf(err, errlen, "%s", text);
		free(text);
		return ret;
	}
	*data = json_pack("{s:s, s:s, s:o, s:s}", "name", argv[0], "client", argv[1], "ecs",
	                  argv[2] ? json_string(argv[2]) : json_null(), "text", text);
	free(text);
	return 0;
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
	return row;
}

/* monitors: every check with its state machine and last result. */
static json_t *cmd_monitors(const server_t *s)
{
	json_t *list = json_array();
	for (size_t i = 0; s->engine && i < health_engine_count(s->engine); i++) {
		health_check_status_t st;
		health_engine_status(s->engine, i, &st);
		json_array_append_new(list, check_json(&st));
	}
	return list;
}

typedef struct {
	const server_t *s;
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
	if (!gslb_sttl_down(e->monitor) || !s->plan || len >= cap)
		return;
	size_t n = 0;
	const uint32_t *idx = monitor_plan_target_checks(s->plan, e->id, &n);
	for (size_t i = 0; i < n; i++) {
		if (idx[i] >= health_engine_count(s->engine))
			continue;
		health_check_status_t st;
		health_engine_status(s->engine, idx[i], &st);
		if (st.known && st.down) {
			snprintf(reason + len, cap - len, " (%s: %s)", st.key,
			         st.last_at ? st.last_detail : health_check_state_str(&st));
			return;
		}
	}
}

static int health_row(const gslb_health_entry_t *e, void *arg)
{
	health_ctx_t *ctx = arg;
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
	json_array_append_new(ctx->list, row);
	return 0;
}

/* health: every GSLB target with its effective state and why. */
static json_t *cmd_health(const server_t *s)
{
	health_ctx_t ctx = {s, json_array()};
	(void)gslb_health_list(gslb_view_health(s->gslb), health_row, &ctx);
	return ctx.list;
}

/* How many targets of the current view @p pattern matches. */
static uint32_t pattern_targets(const server_t *s, const char *pattern)
{
	gslb_overrides_t one;
	char err[256];
	uint32_t n = 0;
	gslb_overrides_init(&one);
	if (gslb_overrides_set(&one, pattern, true, 0, err, sizeof(err)) == 0) {
		const gslb_health_t *h = gslb_view_health(s->gslb);
		gslb_health_t *tmp = gslb_health_dup(h, h->count);
		gslb_health_apply_overrides(tmp, &one, &n);
		gslb_health_free(tmp);
	}
	gslb_overrides_deinit(&one);
	return n;
}

static json_t *override_row(const server_t *s, const gslb_override_t *r, const char *source)
{
	json_t *row = json_pack("{s:s, s:s, s:o, s:I}", "pattern", r->pattern, "source", source,
	                        "line", r->line ? json_integer(r->line) : json_null(), "targets",
	                        (json_int_t)pattern_targets(s, r->pattern));
	if (r->kind == GSLB_OVERRIDE_WEIGHT)
		json_object_set_new(row, "weight", json_integer(r->weight));
	else
		json_object_set_new(row, "state", json_string(r->down ? "DOWN" : "UP"));
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
	for (size_t i = 0; i < s->api_overrides.count; i++)
		json_array_append_new(list, override_row(s, &s->api_overrides.rules[i], "admin"));
	return json_pack("{s:o, s:o}", "state_file",
	                 conf->state_file ? json_string(conf->state_file) : json_null(),
	                 "overrides", list);
}

#define OVERRIDE_USAGE                                                                             \
	"usage: override set PATTERN up|down | override clear PATTERN | "                          \
	"override weight PATTERN N|default | override list"

/* The rule "override set PATTERN up|down" or "override weight PATTERN N|default" asks for;
 * *set is false for "weight PATTERN default" (back to the configured weight). */
static int override_rule_parse(const char *sub, const char *pattern, const char *value,
                               gslb_override_t *rule, bool *set, char *err, size_t errlen)
{
	*rule = (gslb_override_t){.pattern = (char *)pattern};
	*set = true;
	if (strcmp(sub, "set") == 0) {
		rule->down = strcasecmp(value, "down") == 0;
		if (!rule->down && strcasecmp(value, "up") != 0) {
			snprintf(err, errlen,
			         "override set: state must be 'up' or 'down', not '%s'", value);
			return STEER_EINVAL;
		}
		return 0;
	}
	rule->kind = GSLB_OVERRIDE_WEIGHT;
	if (strcmp(value, "default") == 0) {
		*set = false;
		return 0;
	}
	char *end = NULL;
	unsigned long w = strtoul(value, &end, 10);
	if (!*value || *end || !isdigit((unsigned char)*value) || w > UINT16_MAX) {
		snprintf(err, errlen, "override weight: want 0..65535 or 'default', not '%s'",
		         value);
		return STEER_EINVAL;
	}
	rule->weight = (uint16_t)w;
	return 0;
}

/* override set PATTERN up|down, override clear PATTERN, override weight PATTERN N|default,
 * override list. */
static int cmd_override(server_t *s, json_t *args, json_t **data, char *err, size_t errlen)
{
	size_t n = json_array_size(args);
	const char *argv[3] = {NULL, NULL, NULL};
	for (size_t i = 0; i < n && i < 3; i++)
		argv[i] = json_string_value(json_array_get(args, i));
	const char *sub = n > 0 ? argv[0] : NULL;
	if (sub != NULL && strcmp(sub, "list") == 0 && n == 1) {
		*data = override_list(s);
		return 0;
	}
	bool with_value = sub != NULL && (strcmp(sub, "set") == 0 || strcmp(sub, "weight") == 0) &&
	                  n == 3 && argv[1] && argv[2];
	bool clear = sub != NULL && strcmp(sub, "clear") == 0 && n == 2 && argv[1];
	if (!with_value && !clear) {
		snprintf(err, errlen, OVERRIDE_USAGE);
		return STEER_EINVAL;
	}
	gslb_override_t rule = {.pattern = (char *)argv[1]};
	bool set = false;
	if (with_value) {
		int ret = override_rule_parse(sub, argv[1], argv[2], &rule, &set, err, errlen);
		if (ret != 0)
			return ret;
	}
	uint32_t matched = 0;
	int ret = server_override(s, set, &rule, &matched, err, errlen);
	if (ret != 0)
		return ret;
	json_t *list = override_list(s);
	json_t *state = set && rule.kind == GSLB_OVERRIDE_STATE
	                    ? json_string(rule.down ? "DOWN" : "UP")
	                    : json_null();
	json_t *weight =
	    set && rule.kind == GSLB_OVERRIDE_WEIGHT ? json_integer(rule.weight) : json_null();
	*data = json_pack(
	    "{s:s, s:s, s:s, s:o, s:o, s:I, s:O, s:O}", "action", set ? "set" : "clear", "kind",
	    rule.kind == GSLB_OVERRIDE_WEIGHT ? "weight" : "state", "pattern", argv[1], "state",
	    state, "weight", weight, "targets", (json_int_t)matched, "state_file",
	    json_object_get(list, "state_file"), "overrides", json_object_get(list, "overrides"));
	json_decref(list);
	return 0;
}

int commands_handle(const char *cmd, json_t *args, json_t **data, char *err, size_t errlen,
                    void *ctx)
{
	server_t *s = ctx;
	server_health_flush(s); /* report nothing the query threads do not see yet */
	if (strcmp(cmd, "explain") == 0)
		return cmd_explain(s, args, data, err, errlen);
	if (strcmp(cmd, "override") == 0)
		return cmd_override(s, args, data, err, errlen);
	if (strcmp(cmd, "reload") == 0)
		return cmd_reload(s, args, data, err, errlen);
	if (json_array_size(args) != 0) {
		snprintf(err, errlen, "'%s' takes no arguments", cmd);
		return STEER_EINVAL;
	}
	if (strcmp(cmd, "status") == 0)
		*data = cmd_status(s);
	else if (strcmp(cmd, "zones") == 0)
		*data = cmd_zones(s);
	else if (strcmp(cmd, "stats") == 0)
		*data = cmd_stats(s);
	else if (strcmp(cmd, "health") == 0)
		*data = cmd_health(s);
	else if (strcmp(cmd, "monitors") == 0)
		*data = cmd_monitors(s);
	else if (strcmp(cmd, "maps") == 0)
		*data = maps_json(s->gslb);
	else {
		snprintf(err, errlen,
		         "unknown command '%s' (try status, reload, zones, stats, explain, health, "
		         "monitors, override, maps)",
		         cmd);
		return STEER_EINVAL;
	}
	return 0;
}
