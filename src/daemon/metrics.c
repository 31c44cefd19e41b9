/*
 * The /metrics exposition (metrics.h). One function per subsystem turns its counters and
 * states into metric families; metrics_render() calls them in order into one prom_t. Control
 * thread only: the query threads' blocks are read with relaxed loads (net_stats(),
 * net_gslb_answers()), the forwarder's and the cluster's state through the copies their
 * status functions make.
 */
#include "daemon/metrics.h"

#include <arpa/inet.h>
#include <math.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "ctl/http.h"
#include "daemon/alerting.h"
#include "daemon/decisions.h"
#include "daemon/paths.h"
#include "daemon/server.h"
#include "daemon/xfr.h"
#include "daemon/tap.h"
#include "dns/names.h"
#include "health/probe.h"
#include "ops/prom.h"

/* Room for "<service>\t<datacenter>": a domain name and a datacenter name. */
#define METRICS_KEY_MAX 600

/* The resolvers listed by steer_ecs_resolver_queries, as `steerctl stats` lists them. */
#define METRICS_ECS_TOP 10

#define LOAD(counter) atomic_load_explicit(&(counter), memory_order_relaxed)

void metrics_init(metrics_t *m)
{
	*m = (metrics_t){.carried = json_object()};
}

void metrics_deinit(metrics_t *m)
{
	json_decref(m->carried);
	m->carried = NULL;
}

/* "web.example.com." -> "web.example.com": the service as target names spell it. */
static void service_label(const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s", name);
	size_t n = strlen(buf);
	if (n > 1 && buf[n - 1] == '.')
		buf[n - 1] = '\0';
}

/* Add @p n to totals[service][datacenter]. */
static void add_to(json_t *totals, const char *service, const char *dc, uint64_t n)
{
	json_t *per_dc = json_object_get(totals, service);
	if (per_dc == NULL) {
		per_dc = json_object();
		json_object_set_new(totals, service, per_dc);
	}
	json_t *old = json_object_get(per_dc, dc);
	uint64_t sum = n + (old ? (uint64_t)json_integer_value(old) : 0);
	json_object_set_new(per_dc, dc, json_integer((json_int_t)sum));
}

/* Add the answer counts of @p v's slots (its bank, every query thread) into @p totals. */
static uint64_t add_view_answers(const gslb_view_t *v, const net_t *net, json_t *totals)
{
	size_t n = gslb_view_answer_slots(v);
	size_t tracked = n < GSLB_ANSWER_SLOTS ? n : GSLB_ANSWER_SLOTS;
	uint64_t *counts = xcalloc(tracked + 1, sizeof(*counts));
	uint64_t untracked = 0;
	net_gslb_answers(net, gslb_view_answer_bank(v), counts, tracked, &untracked);
	for (size_t i = 0; i < tracked; i++) {
		const char *service, *dc;
		gslb_view_answer_slot(v, i, &service, &dc);
		char plain[METRICS_KEY_MAX];
		service_label(service, plain, sizeof(plain));
		add_to(totals, plain, dc, counts[i]);
	}
	free(counts);
	return untracked;
}

void metrics_gslb_replaced(metrics_t *m, net_t *net, const gslb_view_t *old, const gslb_view_t *now)
{
	unsigned bank = gslb_view_answer_bank(old);
	if (bank == gslb_view_answer_bank(now))
		return; /* a health change: same build, same slots, same bank */
	m->carried_untracked += add_view_answers(old, net, m->carried);
	net_gslb_answers_clear(net, bank);
}

/* Carried totals plus the running view's counts: {"<service>": {"<datacenter>": n}}. */
static json_t *answer_totals(const server_t *s, uint64_t *untracked)
{
	json_t *totals = json_deep_copy(s->metrics.carried);
	*untracked = s->metrics.carried_untracked;
	if (s->gslb != NULL && s->net != NULL)
		*untracked += add_view_answers(s->gslb, s->net, totals);
	return totals;
}

json_t *metrics_answers_json(const server_t *s)
{
	uint64_t untracked;
	return answer_totals(s, &untracked);
}

/* ---- families ------------------------------------------------------------------------ */

static void counter1(prom_t *p, const char *name, const char *help, uint64_t v)
{
	prom_family(p, name, help, PROM_COUNTER);
	prom_counter(p, NULL, 0, v);
}

static void gauge1(prom_t *p, const char *name, const char *help, double v)
{
	prom_family(p, name, help, PROM_GAUGE);
	prom_gauge(p, NULL, 0, v);
}

static void render_process(prom_t *p, const server_t *s)
{
	prom_family(p, "steer_build_info", "Always 1; the labels say which steerd this is.",
	            PROM_GAUGE);
	prom_label_t version = {"version", STEER_VERSION};
	prom_gauge(p, &version, 1, 1);
	gauge1(p, "steer_process_start_time_seconds", "When steerd started, in unix time.",
	       (double)s->started_at);
}

static void render_transport(prom_t *p, const net_stats_t *sum)
{
	const net_counters_t *nc = &sum->net;
	prom_family(p, "steer_queries_total", "Queries received, by transport and address family.",
	            PROM_COUNTER);
	static const char *const transport[] = {"udp", "udp", "tcp", "tcp"};
	static const char *const family[] = {"ipv4", "ipv6", "ipv4", "ipv6"};
	const uint64_t v[] = {LOAD(nc->udp_ipv4_queries), LOAD(nc->udp_ipv6_queries),
	                      LOAD(nc->tcp_ipv4_queries), LOAD(nc->tcp_ipv6_queries)};
	for (size_t i = 0; i < 4; i++) {
		prom_label_t l[] = {{"transport", transport[i]}, {"family", family[i]}};
		prom_counter(p, l, 2, v[i]);
	}
	prom_family(p, "steer_dropped_total",
	            "Queries dropped without an answer: unusable datagrams and failed sends "
	            "(transport), malformed or QR=1 messages (parse).",
	            PROM_COUNTER);
	prom_label_t transport_l = {"stage", "transport"}, parse_l = {"stage", "parse"};
	prom_counter(p, &transport_l, 1, LOAD(nc->dropped));
	prom_counter(p, &parse_l, 1, LOAD(sum->auth.dropped));
}

static void render_tcp(prom_t *p, const server_t *s, const net_stats_t *sum)
{
	const net_counters_t *nc = &sum->net;
	gauge1(p, "steer_tcp_connections", "TCP connections open now.",
	       s->net != NULL ? (double)net_tcp_clients(s->net) : 0.);
	prom_family(
	    p, "steer_tcp_refused_total",
	    "TCP connections closed at accept: over the client address's or its /24 or /56's "
	    "share (address, prefix), or the pool full with none to evict (total).",
	    PROM_COUNTER);
	static const char *const reason[] = {"address", "prefix", "total"};
	const uint64_t v[] = {LOAD(nc->tcp_refused_address), LOAD(nc->tcp_refused_prefix),
	                      LOAD(nc->tcp_refused_full)};
	for (size_t i = 0; i < 3; i++) {
		prom_label_t l = {"reason", reason[i]};
		prom_counter(p, &l, 1, v[i]);
	}
	counter1(p, "steer_tcp_evicted_total",
	         "TCP connections closed to make room for a new one while the pool was full.",
	         LOAD(nc->tcp_evicted));
}

static void render_latency(prom_t *p, const net_stats_t *sum)
{
	prom_family(p, "steer_query_duration_seconds",
	            "Time from receiving a query to sending its reply, forwarded answers included.",
	            PROM_HISTOGRAM);
	double bounds[NET_LATENCY_BOUNDS];
	for (size_t i = 0; i < NET_LATENCY_BOUNDS; i++)
		bounds[i] = (double)net_latency_bounds_ns[i] / 1e9;
	const net_latency_t *h[] = {&sum->net.udp_latency, &sum->net.tcp_latency};
	static const char *const transport[] = {"udp", "tcp"};
	for (size_t t = 0; t < 2; t++) {
		uint64_t counts[NET_LATENCY_BOUNDS + 1];
		for (size_t i = 0; i <= NET_LATENCY_BOUNDS; i++)
			counts[i] = LOAD(h[t]->bucket[i]);
		prom_label_t l = {"transport", transport[t]};
		prom_histogram(p, &l, 1, bounds, NET_LATENCY_BOUNDS, counts,
		               (double)LOAD(h[t]->sum_ns) / 1e9);
	}
}

/* Slot 0 of the qtype counters counts every type above 255 and type 0. */
static void render_answering(prom_t *p, const auth_stats_t *st)
{
	prom_family(p, "steer_queries_by_qtype_total",
	            "Authoritative queries by query type (OTHER: types above 255).", PROM_COUNTER);
	for (size_t i = 0; i < STATS_QTYPE_SLOTS; i++) {
		uint64_t v = LOAD(st->qtype[i]);
		if (v == 0)
			continue;
		char unknown[16];
		const char *name = i == 0 ? "OTHER" : dns_type_name((uint16_t)i);
		if (name == NULL) {
			snprintf(unknown, sizeof(unknown), "TYPE%zu", i);
			name = unknown;
		}
		prom_label_t l = {"qtype", name};
		prom_counter(p, &l, 1, v);
	}
	prom_family(p, "steer_responses_by_rcode_total", "Authoritative responses by rcode.",
	            PROM_COUNTER);
	for (size_t i = 0; i < STATS_RCODE_SLOTS; i++) {
		uint64_t v = LOAD(st->rcode[i]);
		if (v == 0 && i != 0)
			continue;
		char unknown[16];
		const char *name = dns_rcode_name((unsigned)i);
		if (name == NULL) {
			snprintf(unknown, sizeof(unknown), "RCODE%zu", i);
			name = unknown;
		}
		prom_label_t l = {"rcode", name};
		prom_counter(p, &l, 1, v);
	}
	counter1(p, "steer_truncated_responses_total", "Responses sent with TC=1.",
	         LOAD(st->truncated));
	counter1(p, "steer_edns_queries_total", "Queries with an EDNS OPT record.", LOAD(st->edns));
	counter1(p, "steer_edns_do_queries_total", "EDNS queries with the DO bit.",
	         LOAD(st->edns_do));
	prom_family(p, "steer_ecs_queries_total",
	            "Queries with a valid EDNS Client Subnet option, by the option's family.",
	            PROM_COUNTER);
	prom_label_t v4 = {"family", "ipv4"}, v6 = {"family", "ipv6"};
	prom_counter(p, &v4, 1, LOAD(st->ecs_v4));
	prom_counter(p, &v6, 1, LOAD(st->ecs_v6));
	counter1(p, "steer_axfr_total",
	         "Full zone transfers started (AXFR, or an IXFR answered with the whole zone).",
	         LOAD(st->axfr));
	counter1(p, "steer_ixfr_total", "Incremental zone transfers started (from the journal).",
	         LOAD(st->ixfr));
	counter1(p, "steer_axfr_refused_total", "Zone transfers refused.", LOAD(st->axfr_refused));
	prom_family(p, "steer_tsig_requests_total",
	            "Signed requests by TSIG result: ok, or the RFC 8945 error answered.",
	            PROM_COUNTER);
	prom_label_t t_ok = {"result", "ok"}, t_key = {"result", "badkey"},
	             t_sig = {"result", "badsig"}, t_time = {"result", "badtime"};
	prom_counter(p, &t_ok, 1, LOAD(st->tsig_ok));
	prom_counter(p, &t_key, 1, LOAD(st->tsig_badkey));
	prom_counter(p, &t_sig, 1, LOAD(st->tsig_badsig));
	prom_counter(p, &t_time, 1, LOAD(st->tsig_badtime));
	counter1(p, "steer_rrl_dropped_total", "UDP answers dropped by response rate limiting.",
	         LOAD(st->rrl_dropped));
	counter1(p, "steer_rrl_slipped_total",
	         "UDP answers response rate limiting sent truncated (TC=1) instead.",
	         LOAD(st->rrl_slipped));
	counter1(p, "steer_rrl_logged_total",
	         "UDP answers response rate limiting would have limited (rrl.log-only).",
	         LOAD(st->rrl_logged));
	counter1(p, "steer_cookies_queries_total", "Queries with a DNS COOKIE option.",
	         LOAD(st->cookie_queries));
	counter1(p, "steer_cookies_valid_total", "Queries with a valid server cookie of ours.",
	         LOAD(st->cookie_valid));
	counter1(p, "steer_cookies_invalid_total",
	         "Queries with a server cookie that is not ours or has expired.",
	         LOAD(st->cookie_invalid));
	counter1(p, "steer_cookies_badcookie_total",
	         "BADCOOKIE answers (cookies.require, UDP without a valid server cookie).",
	         LOAD(st->cookie_badcookie));
}

/* The resolvers sending the most ECS queries: a gauge, since an entry can be replaced. */
static void render_ecs_resolvers(prom_t *p, const auth_stats_t *st)
{
	prom_family(p, "steer_ecs_resolver_queries",
	            "ECS queries of the resolvers sending the most (the top of a bounded table).",
	            PROM_GAUGE);
	auth_stats_resolver_t top[METRICS_ECS_TOP];
	size_t n = auth_stats_top_resolvers(st, top, METRICS_ECS_TOP);
	for (size_t i = 0; i < n; i++) {
		char addr[INET6_ADDRSTRLEN];
		steer_sockaddr_ip_str(&top[i].addr, addr, sizeof(addr));
		prom_label_t l = {"resolver", addr};
		prom_gauge(p, &l, 1, (double)top[i].queries);
	}
}

static void render_gslb(prom_t *p, const gslb_stats_t *gs)
{
	prom_family(p, "steer_gslb_decisions_total",
	            "GSLB service decisions (A, AAAA, ANY) by what they answered.", PROM_COUNTER);
	static const char *const result[] = {"addresses", "cname", "nodata", "servfail"};
	const uint64_t v[] = {LOAD(gs->addresses), LOAD(gs->cname), LOAD(gs->nodata),
	                      LOAD(gs->servfail)};
	for (size_t i = 0; i < 4; i++) {
		prom_label_t l = {"result", result[i]};
		prom_counter(p, &l, 1, v[i]);
	}
	counter1(p, "steer_gslb_all_down_total", "GSLB decisions made by the all-down policy.",
	         LOAD(gs->all_down));
	prom_family(p, "steer_gslb_ecs_total",
	            "GSLB decisions on queries with ECS: made on the ECS subnet (used) or on the "
	            "resolver's address (ignored).",
	            PROM_COUNTER);
	prom_label_t used = {"ecs", "used"}, ignored = {"ecs", "ignored"};
	prom_counter(p, &used, 1, LOAD(gs->ecs_used));
	prom_counter(p, &ignored, 1, LOAD(gs->ecs_ignored));
	counter1(p, "steer_gslb_whoami_total", "whoami answers.", LOAD(gs->whoami));
}

static void render_answers(prom_t *p, const server_t *s)
{
	uint64_t untracked;
	json_t *totals = answer_totals(s, &untracked);
	prom_family(p, "steer_gslb_answers_total",
	            "GSLB decisions per service and datacenter answered from (none: no "
	            "datacenter had an address of the family; fallback, all-down: the all-down "
	            "policy's answers).",
	            PROM_COUNTER);
	const char *service, *dc;
	json_t *per_dc, *value;
	json_object_foreach(totals, service, per_dc)
	{
		json_object_foreach(per_dc, dc, value)
		{
			prom_label_t l[] = {{"service", service}, {"datacenter", dc}};
			prom_counter(p, l, 2, (uint64_t)json_integer_value(value));
		}
	}
	json_decref(totals);
	counter1(p, "steer_gslb_answers_untracked_total",
	         "GSLB decisions of services beyond the per-thread answer table, not in "
	         "steer_gslb_answers_total.",
	         untracked);
}

/* ---- health checks and GSLB targets ----------------------------------------------------- */

typedef struct {
	char *labels; /* check, monitor and type, rendered once for the six families; owned */
	bool down, flapping;
	double since, rtt;
	uint64_t flaps, probes;
} check_row_t;

static check_row_t *check_rows(prom_t *p, const server_t *s, size_t *n)
{
	*n = s->engine ? health_engine_count(s->engine) : 0;
	check_row_t *rows = xcalloc(*n + 1, sizeof(*rows));
	health_check_status_t st;
	for (size_t i = 0; i < *n; i++) {
		health_engine_status(s->engine, i, &st);
		const char *type = st.is_static ? "static" : health_probe_type_name(st.type);
		prom_label_t l[] = {{"check", st.key}, {"monitor", st.monitor}, {"type", type}};
		rows[i] = (check_row_t){
		    .labels = prom_labels_text(p, l, 3),
		    .down = st.down,
		    .flapping = st.flapping,
		    .since = (double)st.since,
		    .rtt = st.last_at ? (double)st.last_rtt_us / 1e6 : NAN,
		    .flaps = st.flaps,
		    .probes = st.probes,
		};
	}
	return rows;
}

static void render_checks(prom_t *p, const server_t *s)
{
	size_t n;
	check_row_t *rows = check_rows(p, s, &n);
	static const struct {
		const char *name, *help;
		prom_type_t type;
	} fam[] = {
	    {"steer_check_up", "Health check state: 1 up, 0 down (checks not yet decided: up).",
	     PROM_GAUGE},
	    {"steer_check_last_change_timestamp_seconds",
	     "When the check's state last changed (or the check started), in unix time.",
	     PROM_GAUGE},
	    {"steer_check_flaps_total", "State changes since the check was created.", PROM_COUNTER},
	    {"steer_check_flapping", "1 while the check is flapping (state held down).",
	     PROM_GAUGE},
	    {"steer_check_probe_rtt_seconds", "Round-trip time of the last probe (NaN before one).",
	     PROM_GAUGE},
	    {"steer_check_probes_total", "Probe results so far.", PROM_COUNTER},
	};
	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		prom_family(p, fam[f].name, fam[f].help, fam[f].type);
		for (size_t i = 0; i < n; i++) {
			const check_row_t *r = &rows[i];
			switch (f) {
			case 0:
				prom_gauge_with(p, r->labels, r->down ? 0 : 1);
				break;
			case 1:
				prom_gauge_with(p, r->labels, r->since);
				break;
			case 2:
				prom_counter_with(p, r->labels, r->flaps);
				break;
			case 3:
				prom_gauge_with(p, r->labels, r->flapping);
				break;
			case 4:
				prom_gauge_with(p, r->labels, r->rtt);
				break;
			default:
				prom_counter_with(p, r->labels, r->probes);
				break;
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		free(rows[i].labels);
	free(rows);
}

/* The kind of rows render_target_rows() writes for each target. */
typedef enum { TARGET_UP, TARGET_LOAD, TARGET_LOAD_AGE } target_rows_t;

static void target_row(prom_t *p, const gslb_health_t *h, uint32_t id, const prom_label_t *l,
                       target_rows_t kind)
{
	if (kind == TARGET_UP) {
		prom_gauge(p, l, 3, gslb_sttl_down(gslb_health_sttl(h, id)) ? 0 : 1);
		return;
	}
	const gslb_load_t *load = gslb_health_load(h, id);
	if (!load)
		return;
	if (kind == TARGET_LOAD_AGE) {
		prom_gauge(p, l, 3, load->age_ms / 1000.0);
		return;
	}
	for (unsigned k = 0; k < GSLB_LOAD_KINDS; k++) {
		if (!(load->have & (1u << k)))
			continue;
		prom_label_t lm[] = {l[0], l[1], l[2], {"metric", health_metric_name(k)}};
		prom_gauge(p, lm, 4, load->v[k]);
	}
}

/* One family's rows: every target with its service, datacenter and address labels. */
static void render_target_rows(prom_t *p, const server_t *s, target_rows_t kind)
{
	size_t n;
	const gslb_target_t *t = gslb_view_targets(s->gslb, &n);
	const gslb_health_t *h = gslb_view_health(s->gslb);
	const conf_t *conf = s->conf;
	char service[METRICS_KEY_MAX], addr[INET6_ADDRSTRLEN];
	size_t last_service = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		if (t[i].service >= conf->n_services)
			continue;
		const conf_service_t *cs = &conf->services[t[i].service];
		if (t[i].service_dc >= cs->n_dcs)
			continue;
		if (t[i].service != last_service) {
			service_label(cs->name, service, sizeof(service));
			last_service = t[i].service;
		}
		const char *dc = conf->datacenters[cs->dcs[t[i].service_dc].datacenter].name;
		if (!inet_ntop(t[i].family, t[i].addr, addr, sizeof(addr)))
			snprintf(addr, sizeof(addr), "?");
		prom_label_t l[] = {{"service", service}, {"datacenter", dc}, {"address", addr}};
		target_row(p, h, t[i].id, l, kind);
	}
}

static void render_targets(prom_t *p, const server_t *s)
{
	prom_family(p, "steer_target_up",
	            "Effective state of each GSLB target (monitors and overrides): 1 up, 0 down.",
	            PROM_GAUGE);
	if (s->gslb)
		render_target_rows(p, s, TARGET_UP);
	prom_family(p, "steer_target_load",
	            "Fresh load values of each GSLB target, as its metrics monitor read them (the "
	            "values the load policies use).",
	            PROM_GAUGE);
	if (s->gslb)
		render_target_rows(p, s, TARGET_LOAD);
	prom_family(p, "steer_target_load_age_seconds",
	            "Age of the oldest fresh load value of each GSLB target when the health table "
	            "was last published.",
	            PROM_GAUGE);
	if (s->gslb)
		render_target_rows(p, s, TARGET_LOAD_AGE);
}

/* ---- the forwarder ---------------------------------------------------------------------- */

static void render_cache(prom_t *p, const server_t *s, const fwd_cache_counters_t *hc)
{
	fwd_cache_stats_t cs;
	fwd_cache_stats(fwd_engine_cache(s->fwd), &cs);
	counter1(p, "steer_cache_hits_total", "Forwarder cache hits (fresh answers).",
	         LOAD(hc->hits));
	counter1(p, "steer_cache_misses_total", "Forwarder cache misses.", LOAD(hc->misses));
	counter1(p, "steer_cache_stale_answers_total",
	         "Answers from stale cache entries (no upstream answered in time).",
	         LOAD(hc->stale_answers));
	counter1(p, "steer_cache_prefetches_total", "Popular entries refreshed before expiry.",
	         LOAD(hc->prefetches));
	counter1(p, "steer_cache_evictions_total", "Entries dropped for room while still usable.",
	         cs.evictions);
	counter1(p, "steer_cache_expired_total", "Entries dropped past their TTL and stale time.",
	         cs.expired);
	gauge1(p, "steer_cache_entries", "Entries in the forwarder cache.", (double)cs.entries);
	gauge1(p, "steer_cache_bytes", "Bytes the forwarder cache uses.", (double)cs.bytes);
	gauge1(p, "steer_cache_max_bytes", "The forwarder cache's size limit.",
	       (double)cs.max_bytes);
}

static void render_engine(prom_t *p, const server_t *s, const fwd_serve_counters_t *fc)
{
	fwd_engine_stats_t es;
	fwd_engine_stats(s->fwd, &es);
	counter1(p, "steer_forwarder_requests_total", "Cache misses handed to the forwarder.",
	         LOAD(fc->forwarded));
	counter1(p, "steer_forwarder_overload_total",
	         "Misses refused because too many were in flight (answered SERVFAIL).",
	         LOAD(fc->overload));
	counter1(p, "steer_forwarder_recursion_refused_total",
	         "Queries for other names from clients outside allow-recursion.",
	         LOAD(fc->refused));
	counter1(p, "steer_forwarder_servfail_total",
	         "Clients answered SERVFAIL by the forwarder (no upstream, nothing stale).",
	         es.servfail);
	gauge1(p, "steer_forwarder_pending", "Requests waiting for an upstream now.",
	       (double)es.pending);
}

typedef struct {
	fwd_upstream_stats_t st;
	char address[STEER_SOCKADDR_STRLEN];
} upstream_row_t;

/* Every upstream's state copy; *@p n set to how many were copied. */
static upstream_row_t *upstream_rows(const server_t *s, size_t *n)
{
	size_t count = fwd_engine_upstream_count(s->fwd);
	upstream_row_t *rows = xcalloc(count + 1, sizeof(*rows));
	*n = 0;
	for (size_t i = 0; i < count; i++) {
		upstream_row_t *r = &rows[*n];
		if (fwd_engine_upstream(s->fwd, (uint32_t)i, &r->st) != 0)
			continue;
		steer_sockaddr_str(&r->st.address, r->address, sizeof(r->address));
		(*n)++;
	}
	return rows;
}

/* One gauge per upstream and state, 1 for the current one: alerting by state name. */
static void render_upstream_states(prom_t *p, const server_t *s, const upstream_row_t *rows,
                                   size_t n)
{
	prom_family(p, "steer_upstream_state",
	            "1 for the upstream's current state (up, link-down, upstream-down, "
	            "degraded), 0 for the others.",
	            PROM_GAUGE);
	static const fwd_fault_t faults[] = {FWD_FAULT_NONE, FWD_FAULT_LINK_DOWN,
	                                     FWD_FAULT_UPSTREAM_DOWN, FWD_FAULT_UPSTREAM_DEGRADED};
	for (size_t i = 0; i < n; i++) {
		const fwd_upstream_stats_t *u = &rows[i].st;
		for (size_t k = 0; k < sizeof(faults) / sizeof(faults[0]); k++) {
			const char *state =
			    faults[k] == FWD_FAULT_NONE ? "up" : fwd_fault_str(faults[k]);
			prom_label_t l[] = {{"upstream", u->name},
			                    {"group", fwd_engine_group_domain(s->fwd, u->group)},
			                    {"address", rows[i].address},
			                    {"state", state}};
			prom_gauge(p, l, 4, u->fault == faults[k]);
		}
	}
}

static void render_upstreams(prom_t *p, const server_t *s)
{
	size_t n;
	upstream_row_t *rows = upstream_rows(s, &n);
	static const struct {
		const char *name, *help;
		prom_type_t type;
	} fam[] = {
	    {"steer_upstream_up", "Upstream state: 1 up, 0 degraded or down.", PROM_GAUGE},
	    {"steer_upstream_srtt_seconds", "Smoothed round-trip time (NaN before a sample).",
	     PROM_GAUGE},
	    {"steer_upstream_queries_total", "Queries sent to the upstream.", PROM_COUNTER},
	    {"steer_upstream_timeouts_total", "Queries the upstream did not answer in time.",
	     PROM_COUNTER},
	    {"steer_upstream_failures_total", "SERVFAIL replies from the upstream.", PROM_COUNTER},
	};
	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		prom_family(p, fam[f].name, fam[f].help, fam[f].type);
		for (size_t i = 0; i < n; i++) {
			const fwd_upstream_stats_t *u = &rows[i].st;
			prom_label_t l[] = {{"upstream", u->name},
			                    {"group", fwd_engine_group_domain(s->fwd, u->group)},
			                    {"address", rows[i].address}};
			if (f == 0)
				prom_gauge(p, l, 3, u->fault == FWD_FAULT_NONE);
			else if (f == 1)
				prom_gauge(p, l, 3, u->srtt_us ? (double)u->srtt_us / 1e6 : NAN);
			else
				prom_counter(p, l, 3,
				             f == 2   ? u->queries
				             : f == 3 ? u->timeouts
				                      : u->servfails);
		}
	}
	render_upstream_states(p, s, rows, n);
	free(rows);
}

/* ---- reload, cluster ------------------------------------------------------------------- */

static void render_reload(prom_t *p, const server_t *s)
{
	const server_reload_status_t *r = &s->last_reload;
	counter1(p, "steer_reloads_total", "Reloads attempted (SIGHUP, steerctl reload).",
	         r->count);
	counter1(p, "steer_reload_failures_total",
	         "Reloads that failed (the old state kept serving).", r->failures);
	gauge1(p, "steer_last_reload_success", "1 if the last reload succeeded (or none happened).",
	       r->at == 0 || r->ok);
	gauge1(p, "steer_last_reload_timestamp_seconds",
	       "When the last reload was attempted, in unix time (0: never).", (double)r->at);
}

static void render_xfr(prom_t *p)
{
	xfr_t *x = daemon_xfr_get();
	if (x == NULL)
		return;
	xfr_counters_t c;
	xfr_counters(x, &c);
	prom_family(p, "steer_xfr_transfers_total",
	            "Zone transfers of secondary zones, by result (ok: applied; failed: aborted or "
	            "refused, the old version kept serving).",
	            PROM_COUNTER);
	prom_label_t ok = {"result", "ok"}, failed = {"result", "failed"};
	prom_counter(p, &ok, 1, c.transfers_ok);
	prom_counter(p, &failed, 1, c.transfers_failed);
	counter1(p, "steer_xfr_notify_received_total",
	         "NOTIFY messages accepted for secondary zones.", c.notify_received);
	prom_family(p, "steer_xfr_notify_sent_total",
	            "NOTIFY messages sent for primary zones, by result (answered or not).",
	            PROM_COUNTER);
	prom_counter(p, &ok, 1, c.notify_sent);
	prom_counter(p, &failed, 1, c.notify_failed);
}

/*
 * Per served secondary zone: the seconds until it expires and whether it has. An expired
 * zone answers SERVFAIL, and the cluster's answer check skips it (a primary out of reach is
 * not this node's own fault), so these are where a node that alone lost its primaries shows.
 */
static void render_xfr_zones(prom_t *p, const server_t *s)
{
	if (daemon_xfr_get() == NULL)
		return; /* no secondary zone was ever configured */
	const zone_set_t *set = s->view != NULL ? s->view->auth.zones : NULL;
	size_t n = set != NULL ? zone_set_count(set) : 0;
	int64_t now = (int64_t)time(NULL);
	static const char *const fam[][2] = {
	    {"steer_xfr_zone_expire_seconds",
	     "Seconds until a secondary zone expires without a good refresh (0: expired)."},
	    {"steer_xfr_zone_expired",
	     "1 while a secondary zone is expired: answered SERVFAIL until a transfer succeeds."},
	};
	for (size_t f = 0; f < 2; f++) {
		prom_family(p, fam[f][0], fam[f][1], PROM_GAUGE);
		for (size_t i = 0; i < n; i++) {
			const zone_set_entry_t *e = zone_set_at(set, i);
			int64_t at = e->expire_at != NULL
			                 ? atomic_load_explicit(e->expire_at, memory_order_relaxed)
			                 : 0;
			if (at == 0)
				continue; /* a primary zone, or a secondary that never expires */
			int64_t left = at > now ? at - now : 0;
			prom_label_t l = {"zone", e->zone->name};
			prom_gauge(p, &l, 1, f == 0 ? (double)left : (double)(left == 0));
		}
	}
}

static void render_cluster(prom_t *p, const server_t *s)
{
	cluster_t *c = s->node.cluster;
	if (c == NULL)
		return;
	cluster_status_t st;
	cluster_status(c, &st);
	gauge1(p, "steer_cluster_announced",
	       "1 while the service addresses are announced (as the keeper last reported).",
	       st.announced);
	gauge1(p, "steer_cluster_healthy", "The self-check's verdict: 1 healthy.", st.healthy);
	gauge1(p, "steer_cluster_draining", "1 while drained or draining (steerctl drain).",
	       st.state == CLUSTER_DRAINING || st.state == CLUSTER_DRAINED);
	counter1(p, "steer_cluster_transitions_total", "Announce and withdraw changes.",
	         st.transitions);
}

static void render_query_logs(prom_t *p, const server_t *s)
{
	tap_counters_t tap;
	server_tap_stats(s, &tap);
	counter1(p, "steer_dnstap_messages_total", "dnstap messages handed to the writer thread.",
	         LOAD(tap.logged));
	counter1(p, "steer_dnstap_dropped_total",
	         "dnstap messages dropped (queue full, no reader): the log never waits.",
	         LOAD(tap.dropped));
	uint64_t written = 0, dropped = 0;
	decisions_stats(s, &written, &dropped);
	counter1(p, "steer_decision_log_records_total", "GSLB decision log lines written.",
	         written);
	counter1(p, "steer_decision_log_dropped_total",
	         "GSLB decision log records dropped (rings full, or the file failed).", dropped);
}

/* One alert counter family from the stats JSON of every destination. */
static void alert_family(prom_t *p, const json_t *dests, const char *name, const char *help,
                         const char *key)
{
	prom_family(p, name, help, strcmp(key, "queued") == 0 ? PROM_GAUGE : PROM_COUNTER);
	size_t i;
	const json_t *d;
	json_array_foreach(dests, i, d)
	{
		prom_label_t l[] = {{"type", json_string_value(json_object_get(d, "type"))},
		                    {"target", json_string_value(json_object_get(d, "target"))}};
		uint64_t v = (uint64_t)json_integer_value(json_object_get(d, key));
		if (strcmp(key, "queued") == 0)
			prom_gauge(p, l, 2, (double)v);
		else
			prom_counter(p, l, 2, v);
	}
}

static void render_events(prom_t *p, const server_t *s)
{
	counter1(p, "steer_state_changes_total",
	         "State changes seen (targets, services, upstreams, links, cluster, reloads): "
	         "each is logged, kept for steerctl events and sent to the alerts.",
	         s->events.last_seq);
	json_t *stats = alerting_stats_json(s);
	const json_t *dests = json_object_get(stats, "destinations");
	if (json_array_size(dests) > 0) {
		alert_family(p, dests, "steer_alerts_sent_total", "Events delivered.", "sent");
		alert_family(p, dests, "steer_alerts_failures_total",
		             "Failed delivery attempts (each retried until retries run out).",
		             "failures");
		alert_family(p, dests, "steer_alerts_given_up_total",
		             "Events that failed every attempt.", "given_up");
		alert_family(p, dests, "steer_alerts_dropped_total",
		             "Events pushed out of a full queue before delivery.", "dropped");
		alert_family(p, dests, "steer_alerts_queued", "Events waiting for delivery.",
		             "queued");
	}
	json_decref(stats);
}

int metrics_render(const server_t *s, char **text, size_t *len, char *err, size_t errlen)
{
	prom_t p;
	prom_init(&p);
	net_stats_t *sum = xcalloc(1, sizeof(*sum));
	if (s->net != NULL)
		net_stats(s->net, sum);
	render_process(&p, s);
	render_transport(&p, sum);
	render_tcp(&p, s, sum);
	render_latency(&p, sum);
	render_answering(&p, &sum->auth);
	render_ecs_resolvers(&p, &sum->auth);
	render_gslb(&p, &sum->gslb);
	render_answers(&p, s);
	render_checks(&p, s);
	render_targets(&p, s);
	if (s->fwd != NULL) {
		render_cache(&p, s, &sum->fwd.cache);
		render_engine(&p, s, &sum->fwd);
		render_upstreams(&p, s);
	}
	render_reload(&p, s);
	render_xfr(&p);
	render_xfr_zones(&p, s);
	render_cluster(&p, s);
	render_query_logs(&p, s);
	render_events(&p, s);
	paths_metrics(s, &p);
	gauge1(&p, "steer_metrics_render_seconds",
	       "How long rendering the previous scrape of /metrics took on the control thread.",
	       s->metrics.last_render_s);
	free(sum);
	int ret = prom_error(&p);
	if (ret != 0)
		snprintf(err, errlen, "metrics: %s", prom_errmsg(&p));
	else
		*text = prom_take(&p, len);
	prom_deinit(&p);
	return ret;
}

/* Prometheus' text exposition format, version 0.0.4. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static int metrics_page(const char *path, ctl_http_page_t *page, char *err, size_t errlen,
                        void *ctx)
{
	(void)path;
	server_t *s = ctx;
	char *text;
	size_t len;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int ret = metrics_render(s, &text, &len, err, errlen);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s->metrics.last_render_s =
	    (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (ret != 0)
		return ret;
	page->status = 200;
	page->content_type = METRICS_CONTENT_TYPE;
	page->body = text;
	page->len = len;
	page->free_body = free;
	return 0;
}

int metrics_http_register(server_t *s)
{
	int ret = ctl_http_add_page(s->http, "/metrics", metrics_page, s);
	if (ret != 0)
		log_err("http: cannot serve /metrics: %s", steer_strerror(ret));
	return ret;
}
