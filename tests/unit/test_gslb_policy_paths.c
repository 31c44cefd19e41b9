/*
 * The measured policies through the GSLB view with a real merged path table (gslb/paths.c) and
 * real health tables: rtt, completion-rate, hops and qos per client prefix (ECS first, else
 * the resolver), the fallback for unknown prefixes and its ECS scope, a DOWN datacenter
 * skipped in the measured order, the demand report, the table surviving derived views, the
 * load policies from the health table's load values, and explain.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/const.h"
#include "dns/dname.h"
#include "gslb/demand.h"
#include "gslb/paths.h"
#include "gslb/view.h"
#include "unit.h"

/* ---- configuration: dc1..dc3, one IPv4 and one IPv6 address each, agents for all ---- */

enum { SVC_RTT, SVC_CR, SVC_HOPS, SVC_QOS, SVC_QOS_CR, SVC_LC, SVC_N };

static conf_datacenter_t dcs[3] = {{.name = "dc1"}, {.name = "dc2"}, {.name = "dc3"}};
static conf_address_t addrs[3][2];
static conf_service_dc_t sdcs[SVC_N][3];
static conf_service_t services[SVC_N];
static conf_path_agent_t agents[3];

static const char *const svc_names[SVC_N] = {"rtt.example.test.",   "cr.example.test.",
                                             "hops.example.test.",  "qos.example.test.",
                                             "qoscr.example.test.", "lc.example.test."};
static const char *const svc_policies[SVC_N] = {"rtt", "completion-rate",  "hops", "qos",
                                                "qos", "least-connections"};

static void init_conf(conf_t *c)
{
	memset(c, 0, sizeof(*c));
	c->path = "paths.yaml";
	c->datacenters = dcs;
	c->n_datacenters = 3;
	for (unsigned d = 0; d < 3; d++) {
		char text[64];
		snprintf(text, sizeof(text), "192.0.2.%u", d + 1);
		addrs[d][0] = (conf_address_t){.family = AF_INET, .weight = 1};
		inet_pton(AF_INET, text, addrs[d][0].addr);
		snprintf(text, sizeof(text), "2001:db8::%u", d + 1);
		addrs[d][1] = (conf_address_t){.family = AF_INET6, .weight = 1};
		inet_pton(AF_INET6, text, addrs[d][1].addr);
		agents[d] = (conf_path_agent_t){.datacenter = d, .url = "http://127.0.0.1:1/"};
	}
	for (unsigned s = 0; s < SVC_N; s++) {
		for (unsigned d = 0; d < 3; d++)
			sdcs[s][d] = (conf_service_dc_t){.datacenter = d,
			                                 .addresses = addrs[d],
			                                 .n_addresses = 2,
			                                 .monitor = CONF_MONITOR_NONE,
			                                 .metrics = CONF_MONITOR_NONE};
		services[s] = (conf_service_t){.name = (char *)svc_names[s],
		                               .policy = (char *)svc_policies[s],
		                               .fallback_policy = "failover",
		                               .map = SIZE_MAX,
		                               .ttl = 30,
		                               .dcs = sdcs[s],
		                               .n_dcs = 3,
		                               .monitor = CONF_MONITOR_NONE,
		                               .metrics = CONF_MONITOR_NONE,
		                               .qos = {[CONF_QOS_PACKET_RATE] = 1,
		                                       [CONF_QOS_RTT] = 50,
		                                       [CONF_QOS_COMPLETION_RATE] = 5,
		                                       [CONF_QOS_LINK_CAPACITY] = 30,
		                                       [CONF_QOS_KBPS] = 3},
		                               .line = 10 + s};
	}
	/* qoscr: only the completion rate counts */
	services[SVC_QOS_CR].qos[CONF_QOS_RTT] = 0;
	services[SVC_QOS_CR].qos[CONF_QOS_COMPLETION_RATE] = 100;
	c->services = services;
	c->n_services = SVC_N;
	c->paths = (conf_paths_t){.enabled = true,
	                          .agents = agents,
	                          .n_agents = 3,
	                          .path_ttl = 2400,
	                          .ipv4_prefix = 24,
	                          .ipv6_prefix = 48,
	                          .max_prefixes = 1000,
	                          .demand_sample = 1,
	                          .hyst_margin = 20,
	                          .hyst_min_difference = 10,
	                          .hyst_rounds = 2};
}

/* ---- the path table: two IPv4 prefixes and one IPv6 prefix ---- */

typedef struct {
	uint16_t rtt;
	uint8_t loss, hops;
} cell_t;

/* 198.51.100.0/24: dc1 60 ms no loss 3 hops, dc2 20 ms 10 % unknown hops, dc3 5 ms 30 % 9 hops.
 * 203.0.113.0/24: only dc1 measured. 2001:db8:aa::/48: dc2 best. */
static const cell_t row_a[3] = {{600, 0, 3}, {200, 10, 0}, {50, 30, 9}};
static const cell_t row_v6[3] = {{300, 0, 4}, {100, 0, 4}, {900, 0, 4}};

static gslb_paths_t *make_paths(const gslb_paths_t *prev, uint64_t now_ms, uint16_t dc2_rtt)
{
	gslb_path_row_t rows4[3][2], rows6[3][1];
	gslb_path_table_t tables[3];
	gslb_paths_site_t sites[3];
	uint8_t a[4], b[4], c6[16] = {0};
	inet_pton(AF_INET, "198.51.100.0", a);
	inet_pton(AF_INET, "203.0.113.0", b);
	inet_pton(AF_INET6, "2001:db8:aa::", c6);
	for (unsigned d = 0; d < 3; d++) {
		size_t n4 = 0;
		rows4[d][n4++] = (gslb_path_row_t){.prefix = gslb_pathfmt_key(AF_INET, a, 24),
		                                   .plen = 24,
		                                   .rtt = d == 1 ? dc2_rtt : row_a[d].rtt,
		                                   .loss = row_a[d].loss,
		                                   .hops = row_a[d].hops,
		                                   .answered = 3,
		                                   .age_s = 12};
		if (d == 0)
			rows4[d][n4++] =
			    (gslb_path_row_t){.prefix = gslb_pathfmt_key(AF_INET, b, 24),
			                      .plen = 24,
			                      .rtt = 400,
			                      .answered = 3,
			                      .age_s = 5};
		rows6[d][0] = (gslb_path_row_t){.prefix = gslb_pathfmt_key(AF_INET6, c6, 48),
		                                .plen = 48,
		                                .rtt = row_v6[d].rtt,
		                                .loss = row_v6[d].loss,
		                                .hops = row_v6[d].hops,
		                                .answered = 3,
		                                .age_s = 7};
		tables[d] = (gslb_path_table_t){.generated_ms = now_ms,
		                                .rows4 = rows4[d],
		                                .n4 = n4,
		                                .rows6 = rows6[d],
		                                .n6 = 1};
		snprintf(tables[d].name, sizeof(tables[d].name), "%s", dcs[d].name);
		sites[d] =
		    (gslb_paths_site_t){.table = &tables[d], .fetched_ms = now_ms, .changed = true};
	}
	static const size_t column_dc[3] = {0, 1, 2};
	gslb_paths_opts_t o = {.ipv4_prefix = 24,
	                       .ipv6_prefix = 48,
	                       .path_ttl_s = 2400,
	                       .max_rows = 1000,
	                       .margin_pct = 20,
	                       .min_difference_100us = 100,
	                       .rounds = 2,
	                       .column_dc = column_dc,
	                       .n_columns = 3,
	                       .n_datacenters = 3};
	char err[256] = "";
	gslb_paths_t *p = gslb_paths_build(prev, sites, &o, now_ms, err, sizeof(err));
	CHECK(p != NULL, "paths build: %s", err);
	if (!p)
		exit(unit_finish("gslb_policy_paths"));
	return p;
}

/* ---- asking ---- */

static gslb_qstate_t qs;

typedef struct {
	int dc; /* 0-based datacenter of the answer, -1 = none */
	uint8_t scope;
} ans_t;

/* Ask @p svc for @p qtype from resolver @p resolver with ECS @p ecs ("a/len" or NULL). */
static ans_t ask(const gslb_view_t *v, unsigned svc, uint16_t qtype, const char *resolver,
                 const char *ecs)
{
	uint8_t wire[DNS_DNAME_MAXLEN];
	if (dname_from_str(svc_names[svc], wire) < 0)
		abort();
	const gslb_name_t *n = gslb_view_find(v, wire);
	CHECK(n != NULL, "%s found", svc_names[svc]);
	steer_sockaddr_t res = {0};
	if (inet_pton(AF_INET, resolver, &res.sin.sin_addr) == 1)
		res.sin.sin_family = AF_INET;
	else if (inet_pton(AF_INET6, resolver, &res.sin6.sin6_addr) == 1)
		res.sin6.sin6_family = AF_INET6;
	dns_ecs_t e = {0};
	if (ecs) {
		char a[64];
		unsigned len;
		CHECK(sscanf(ecs, "%63[^/]/%u", a, &len) == 2, "ecs %s", ecs);
		if (inet_pton(AF_INET, a, e.addr) == 1)
			e.family = DNS_ECS_FAMILY_IPV4;
		else if (inet_pton(AF_INET6, a, e.addr) == 1)
			e.family = DNS_ECS_FAMILY_IPV6;
		e.source_len = (uint8_t)len;
	}
	gslb_client_t client = {.resolver = &res, .ecs = ecs ? &e : NULL};
	gslb_result_t r;
	gslb_view_answer(v, n, qtype, &client, &qs, &r);
	ans_t out = {.dc = -1, .scope = r.ecs_scope};
	if (r.ans.kind == GSLB_ANSWER_ADDRS && !r.ans.fallback && r.ans.count == 1) {
		const uint8_t *a = gslb_result_addr(&r, 0);
		out.dc = (qtype == DNS_TYPE_AAAA ? a[15] : a[3]) - 1;
	}
	return out;
}

static gslb_view_t *build(const conf_t *c)
{
	gslb_view_t *v = NULL;
	char err[512] = "";
	int ret = gslb_view_build(c, NULL, &v, NULL, err, sizeof(err));
	CHECK(ret == 0, "build: %s", err);
	if (ret != 0)
		exit(unit_finish("gslb_policy_paths"));
	return v;
}

/* A view whose health has target @p down (an address id) DOWN, or none for UINT32_MAX. */
static gslb_view_t *with_down(const gslb_view_t *v, uint32_t down)
{
	gslb_health_t *h = gslb_health_dup(gslb_view_health(v), gslb_view_health(v)->count);
	if (down != UINT32_MAX)
		CHECK(gslb_health_set_monitor(h, down, gslb_sttl_make(true, 0)) == 0, "down");
	return gslb_view_with_health(v, h);
}

/* The target id of service @p svc, datacenter @p dc, address @p a (0 = IPv4, 1 = IPv6). */
static uint32_t target(const gslb_view_t *v, unsigned svc, unsigned dc, unsigned a)
{
	size_t n;
	const gslb_target_t *t = gslb_view_targets(v, &n);
	for (size_t i = 0; i < n; i++)
		if (t[i].service == svc && t[i].service_dc == dc && t[i].address == a)
			return t[i].id;
	CHECK(false, "target %u/%u/%u", svc, dc, a);
	return 0;
}

/* ---- tests ---- */

typedef struct {
	const char *what;
	unsigned svc;
	uint16_t qtype;
	const char *resolver, *ecs;
	int dc;
	uint8_t scope;
} row_t;

static void test_answers(const gslb_view_t *v)
{
	const uint16_t A = DNS_TYPE_A, AAAA = DNS_TYPE_AAAA;
	const row_t rows[] = {
	    {"rtt: lowest RTT by ECS", SVC_RTT, A, "192.0.2.200", "198.51.100.0/24", 2, 24},
	    {"rtt: AAAA for the same client", SVC_RTT, AAAA, "192.0.2.200", "198.51.100.0/24", 2,
	     24},
	    {"rtt: ECS /32 inside the row", SVC_RTT, A, "192.0.2.200", "198.51.100.77/32", 2, 24},
	    {"rtt: by the resolver without ECS", SVC_RTT, A, "198.51.100.53", NULL, 2, 0},
	    {"rtt: one measured datacenter", SVC_RTT, A, "192.0.2.200", "203.0.113.0/24", 0, 24},
	    {"rtt: IPv6 ECS row", SVC_RTT, A, "192.0.2.200", "2001:db8:aa::/48", 1, 48},
	    {"rtt: unknown prefix, fallback at once", SVC_RTT, A, "192.0.2.200", "192.0.2.0/24", 0,
	     24},
	    {"rtt: ECS shorter than the rows", SVC_RTT, A, "192.0.2.200", "198.51.0.0/16", 0, 0},
	    {"completion-rate: least loss", SVC_CR, A, "192.0.2.200", "198.51.100.0/24", 0, 24},
	    {"hops: fewest", SVC_HOPS, A, "192.0.2.200", "198.51.100.0/24", 0, 24},
	    {"qos: default coefficients favour RTT", SVC_QOS, A, "192.0.2.200", "198.51.100.0/24",
	     2, 24},
	    {"qos: completion rate only", SVC_QOS_CR, A, "192.0.2.200", "198.51.100.0/24", 0, 24},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		const row_t *r = &rows[i];
		ans_t a = ask(v, r->svc, r->qtype, r->resolver, r->ecs);
		CHECK(a.dc == r->dc && a.scope == r->scope, "%s: dc%d scope %u, want dc%d scope %u",
		      r->what, a.dc + 1, a.scope, r->dc + 1, r->scope);
	}
}

/* Failover along the measured order: rtt skips a DOWN best, hops puts unknown hops last. */
static void test_down(const gslb_view_t *v)
{
	gslb_view_t *d = with_down(v, target(v, SVC_RTT, 2, 0));
	ans_t a = ask(d, SVC_RTT, DNS_TYPE_A, "192.0.2.200", "198.51.100.0/24");
	CHECK(a.dc == 1, "rtt with dc3 DOWN: dc2 (next RTT), got dc%d", a.dc + 1);
	gslb_view_free(d);
	gslb_health_t *h = gslb_health_dup(gslb_view_health(v), gslb_view_health(v)->count);
	CHECK(gslb_health_set_monitor(h, target(v, SVC_HOPS, 0, 0), gslb_sttl_make(true, 0)) == 0,
	      "hops dc1 down");
	d = gslb_view_with_health(v, h);
	a = ask(d, SVC_HOPS, DNS_TYPE_A, "192.0.2.200", "198.51.100.0/24");
	CHECK(a.dc == 2, "hops with dc1 DOWN: dc3 (9 hops) before dc2 (unknown), got dc%d",
	      a.dc + 1);
	gslb_view_free(d);
}

/* Decisions are reported: the unknown prefix as urgent, the measured one as volume. */
static void test_demand(const gslb_view_t *v)
{
	qs.demand = gslb_demand_ring_new(1);
	gslb_demand_map_t *m = gslb_demand_map_new(100);
	ask(v, SVC_RTT, DNS_TYPE_A, "192.0.2.200", "192.0.2.0/24");
	ask(v, SVC_RTT, DNS_TYPE_A, "198.51.100.53", NULL);
	ask(v, SVC_LC, DNS_TYPE_A, "198.51.100.53", NULL); /* load policy: nothing to report */
	/* the ring hands a prefix's sum over about once a second: wait for it to */
	size_t taken = 0;
	for (int i = 0; i < 30 && taken < 2; i++) {
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
		ask(v, SVC_RTT, DNS_TYPE_A, "192.0.2.200", "192.0.2.0/24");
		ask(v, SVC_RTT, DNS_TYPE_A, "198.51.100.53", NULL);
		taken += gslb_demand_drain(m, qs.demand, (uint64_t)i * 100);
	}
	size_t len = 0;
	uint8_t *body = gslb_demand_encode(m, 3000, 0, &len);
	gslb_demand_t dec;
	char err[256] = "";
	CHECK(body && gslb_pathfmt_decode_demand(body, len, 100, &dec, err, sizeof(err)) == 0,
	      "demand decodes: %s", err);
	bool urgent = false, volume = false;
	for (size_t i = 0; body && i < dec.n; i++) {
		const gslb_demand_row_t *r = &dec.rows[i];
		char a[64];
		inet_ntop(r->family == 4 ? AF_INET : AF_INET6, r->prefix, a, sizeof(a));
		if (!strcmp(a, "192.0.2.0") && r->plen == 24 && (r->flags & GSLB_DEMAND_URGENT) &&
		    (r->flags & GSLB_DEMAND_ECS))
			urgent = true;
		if (!strcmp(a, "198.51.100.0") && r->plen == 24 && !(r->flags & GSLB_DEMAND_URGENT))
			volume = true;
	}
	CHECK(urgent, "the unknown ECS prefix is reported as urgent");
	CHECK(volume, "the measured resolver prefix is reported as volume");
	if (body)
		gslb_pathfmt_demand_free(&dec);
	free(body);
	gslb_demand_map_free(m);
	gslb_demand_ring_free(qs.demand);
	qs.demand = NULL;
}

/* least-connections from the health table's load values, through with_health. */
static void test_load(const gslb_view_t *v)
{
	ans_t a = ask(v, SVC_LC, DNS_TYPE_A, "198.51.100.53", NULL);
	CHECK(a.dc == 0 && a.scope == 0, "no load values: fallback failover, got dc%d", a.dc + 1);
	gslb_health_t *h = gslb_health_dup(gslb_view_health(v), gslb_view_health(v)->count);
	static const float conns[3] = {500, 80, 300};
	for (unsigned d = 0; d < 3; d++) {
		gslb_load_t l = {.have = 1u << GSLB_LOAD_CONNECTIONS, .round = 1, .age_ms = 500};
		l.v[GSLB_LOAD_CONNECTIONS] = conns[d];
		CHECK(gslb_health_set_load(h, target(v, SVC_LC, d, 0), &l) == 0, "load");
	}
	gslb_view_t *d = gslb_view_with_health(v, h);
	a = ask(d, SVC_LC, DNS_TYPE_A, "198.51.100.53", NULL);
	CHECK(a.dc == 1, "least connections: dc2, got dc%d", a.dc + 1);
	a = ask(d, SVC_LC, DNS_TYPE_AAAA, "198.51.100.53", NULL);
	CHECK(a.dc == 0, "no IPv6 load values: fallback failover, got dc%d", a.dc + 1);
	char buf[8192];
	CHECK(gslb_view_explain(d, "lc.example.test", "198.51.100.53", NULL, buf, sizeof(buf)) == 0,
	      "explain lc");
	CHECK(strstr(buf, "load (least-connections), per datacenter over its UP IPv4 addresses") &&
	          strstr(buf, "  dc2: connections 80.0, age 0.5 s\n") &&
	          strstr(buf, "no datacenter reports the least-connections values: fallback "
	                      "failover") &&
	          strstr(buf, "sticky best: dc2"),
	      "explain lc: %s", buf);
	gslb_view_free(d);
}

/* qos counts the load terms: spare link capacity moves a completion-rate-only score. */
static void test_qos_load(const gslb_view_t *v)
{
	gslb_health_t *h = gslb_health_dup(gslb_view_health(v), gslb_view_health(v)->count);
	static const float link[3] = {10, 1000, 10};
	for (unsigned d = 0; d < 3; d++) {
		gslb_load_t l = {.have = 1u << GSLB_LOAD_LINK_CAPACITY, .round = 1, .age_ms = 100};
		l.v[GSLB_LOAD_LINK_CAPACITY] = link[d];
		CHECK(gslb_health_set_load(h, target(v, SVC_QOS_CR, d, 0), &l) == 0, "load");
	}
	gslb_view_t *d = gslb_view_with_health(v, h);
	/* dc1 100 + 0.3, dc2 90 + 30, dc3 (70 + 0.3) x 1.2 */
	ans_t a = ask(d, SVC_QOS_CR, DNS_TYPE_A, "192.0.2.200", "198.51.100.0/24");
	CHECK(a.dc == 1, "qos with link capacity: dc2, got dc%d", a.dc + 1);
	char buf[8192];
	CHECK(gslb_view_explain(d, "qoscr.example.test", "192.0.2.200", "198.51.100.0/24", buf,
	                        sizeof(buf)) == 0,
	      "explain qos load");
	CHECK(strstr(buf, "link-capacity 1000.0, age 0.1 s; score 120.0") &&
	          strstr(buf, "score 100.3"),
	      "explain qos load: %s", buf);
	gslb_view_free(d);
}

static void test_explain(const gslb_view_t *v)
{
	char buf[8192];
	CHECK(gslb_view_explain(v, "rtt.example.test", "192.0.2.200", "198.51.100.0/24", buf,
	                        sizeof(buf)) == 0,
	      "explain rtt");
	CHECK(strstr(buf, "paths: row 198.51.100.0/24 from ECS") &&
	          strstr(buf, "  dc1: rtt 60.0 ms, loss 0 %, hops 3, age 12 s") &&
	          strstr(buf, "  dc2: rtt 20.0 ms, loss 10 %, hops unknown, age 12 s") &&
	          strstr(buf, "sticky best: dc3, first") && strstr(buf, "1. dc3: chosen") &&
	          strstr(buf, "scope: 24"),
	      "explain rtt: %s", buf);
	CHECK(gslb_view_explain(v, "rtt.example.test", "192.0.2.200", "192.0.2.0/24", buf,
	                        sizeof(buf)) == 0,
	      "explain unknown");
	CHECK(strstr(buf, "paths: no measurement for 192.0.2.0/24 from ECS: fallback failover") &&
	          strstr(buf, "no measurement for this client: fallback policy failover decides"),
	      "explain unknown: %s", buf);
	CHECK(gslb_view_explain(v, "qos.example.test", "192.0.2.200", "198.51.100.0/24", buf,
	                        sizeof(buf)) == 0,
	      "explain qos");
	/* dc3: 50 x 1 + 5 x 0.7 = 53.5, x 1.2 as the sticky best */
	CHECK(strstr(buf, "score 64.2") && strstr(buf, "its score counts 20 % more"),
	      "explain qos: %s", buf);
}

/* Eleven datacenters (beyond the sorting network's eight): the whole RTT order is right. */
static void test_many_datacenters(void)
{
	enum { N = 11 };
	static conf_datacenter_t mdcs[N];
	static char names[N][8];
	static conf_address_t maddrs[N];
	static conf_service_dc_t msdcs[N];
	static conf_path_agent_t magents[N];
	static const uint16_t rtts[N] = {700, 300, 1100, 50, 900, 200, 650, 400, 1000, 120, 800};
	conf_t c;
	memset(&c, 0, sizeof(c));
	for (unsigned d = 0; d < N; d++) {
		snprintf(names[d], sizeof(names[d]), "m%u", d);
		mdcs[d] = (conf_datacenter_t){.name = names[d]};
		maddrs[d] = (conf_address_t){.family = AF_INET, .weight = 1};
		char text[32];
		snprintf(text, sizeof(text), "192.0.2.%u", d + 1);
		inet_pton(AF_INET, text, maddrs[d].addr);
		msdcs[d] = (conf_service_dc_t){.datacenter = d,
		                               .addresses = &maddrs[d],
		                               .n_addresses = 1,
		                               .monitor = CONF_MONITOR_NONE,
		                               .metrics = CONF_MONITOR_NONE};
		magents[d] = (conf_path_agent_t){.datacenter = d, .url = "http://127.0.0.1:1/"};
	}
	conf_service_t svc = {.name = "many.example.test.",
	                      .policy = "rtt",
	                      .map = SIZE_MAX,
	                      .ttl = 30,
	                      .dcs = msdcs,
	                      .n_dcs = N,
	                      .monitor = CONF_MONITOR_NONE,
	                      .metrics = CONF_MONITOR_NONE,
	                      .line = 1};
	c.path = "many.yaml";
	c.datacenters = mdcs;
	c.n_datacenters = N;
	c.services = &svc;
	c.n_services = 1;
	c.paths = (conf_paths_t){.enabled = true,
	                         .agents = magents,
	                         .n_agents = N,
	                         .ipv4_prefix = 24,
	                         .ipv6_prefix = 48,
	                         .hyst_margin = 20,
	                         .hyst_rounds = 2};
	gslb_view_t *v0 = build(&c);
	gslb_path_row_t rows[N];
	gslb_path_table_t tables[N];
	gslb_paths_site_t sites[N];
	size_t column_dc[N];
	uint8_t a[4];
	inet_pton(AF_INET, "198.51.100.0", a);
	for (unsigned d = 0; d < N; d++) {
		rows[d] = (gslb_path_row_t){.prefix = gslb_pathfmt_key(AF_INET, a, 24),
		                            .plen = 24,
		                            .rtt = rtts[d],
		                            .answered = 3};
		tables[d] = (gslb_path_table_t){
		    .generated_ms = 1700000000000ull, .rows4 = &rows[d], .n4 = 1};
		snprintf(tables[d].name, sizeof(tables[d].name), "%s", names[d]);
		sites[d] = (gslb_paths_site_t){
		    .table = &tables[d], .fetched_ms = 1700000000000ull, .changed = true};
		column_dc[d] = d;
	}
	gslb_paths_opts_t o = {.ipv4_prefix = 24,
	                       .ipv6_prefix = 48,
	                       .path_ttl_s = 2400,
	                       .max_rows = 10,
	                       .margin_pct = 20,
	                       .min_difference_100us = 100,
	                       .rounds = 2,
	                       .column_dc = column_dc,
	                       .n_columns = N,
	                       .n_datacenters = N};
	char err[256] = "";
	gslb_paths_t *p = gslb_paths_build(NULL, sites, &o, 1700000000000ull, err, sizeof(err));
	CHECK(p != NULL, "many: paths build: %s", err);
	if (!p)
		return;
	gslb_view_t *v = gslb_view_with_paths(v0, p);
	gslb_paths_unref(p);
	gslb_view_free(v0);
	/* every datacenter DOWN but the slowest: the explain lists the whole order */
	gslb_health_t *h = gslb_health_dup(gslb_view_health(v), gslb_view_health(v)->count);
	for (uint32_t t = 0; t < N; t++)
		if (t != 2)
			CHECK(gslb_health_set_monitor(h, t, gslb_sttl_make(true, 0)) == 0, "down");
	gslb_view_t *d = gslb_view_with_health(v, h);
	char buf[16384];
	CHECK(gslb_view_explain(d, "many.example.test", "192.0.2.200", "198.51.100.0/24", buf,
	                        sizeof(buf)) == 0,
	      "explain many");
	static const unsigned want[N] = {3, 9, 5, 1, 7, 6, 0, 10, 4, 8, 2};
	const char *at = buf;
	for (unsigned i = 0; i < N && at; i++) {
		char line[64];
		snprintf(line, sizeof(line), "  %u. m%u: %s", i + 1, want[i],
		         i + 1 < N ? "all DOWN" : "chosen");
		at = strstr(at, line);
		CHECK(at != NULL, "many: position %u is m%u: %s", i + 1, want[i], buf);
	}
	gslb_view_free(d);
	gslb_view_free(v);
}

/* A new table where dc2 is a little faster than the sticky dc3: the answer stays, and explain
 * says hysteresis holds it. */
static void test_rtt_held(const gslb_view_t *v)
{
	gslb_paths_t *p = make_paths(gslb_view_paths(v), 1700000002000ull, 45);
	gslb_view_t *n = gslb_view_with_paths(v, p);
	gslb_paths_unref(p);
	ans_t a = ask(n, SVC_RTT, DNS_TYPE_A, "192.0.2.200", "198.51.100.0/24");
	CHECK(a.dc == 2, "dc2 4.5 ms against the sticky dc3 5 ms: dc3 held, got dc%d", a.dc + 1);
	char buf[8192];
	CHECK(gslb_view_explain(n, "rtt.example.test", "192.0.2.200", "198.51.100.0/24", buf,
	                        sizeof(buf)) == 0,
	      "explain held");
	CHECK(strstr(buf, "sticky best: dc3, first, held by hysteresis: dc2 is faster (4.5 ms) but "
	                  "not yet 20 % and 10 ms faster for 2 rounds"),
	      "explain held: %s", buf);
	gslb_view_free(n);
}

int main(void)
{
	conf_t c;
	init_conf(&c);
	gslb_view_t *v0 = build(&c);
	ans_t a = ask(v0, SVC_RTT, DNS_TYPE_A, "192.0.2.200", "198.51.100.0/24");
	CHECK(a.dc == 0 && a.scope == 24, "no table yet: fallback, scope of the rows: dc%d /%u",
	      a.dc + 1, a.scope);
	gslb_paths_t *p = make_paths(NULL, 1700000000000ull, row_a[1].rtt);
	gslb_view_t *v = gslb_view_with_paths(v0, p);
	gslb_paths_unref(p); /* the view holds its own reference */
	gslb_view_free(v0);
	test_answers(v);
	test_down(v);
	test_demand(v);
	test_load(v);
	test_explain(v);
	test_qos_load(v);
	test_rtt_held(v);
	/* a view derived for health keeps the table after the one it came from is gone */
	gslb_view_t *d = with_down(v, UINT32_MAX);
	gslb_view_free(v);
	a = ask(d, SVC_RTT, DNS_TYPE_A, "192.0.2.200", "198.51.100.0/24");
	CHECK(a.dc == 2, "derived view keeps the table: dc%d", a.dc + 1);
	gslb_view_t *none = gslb_view_with_paths(d, NULL);
	a = ask(none, SVC_RTT, DNS_TYPE_A, "192.0.2.200", "198.51.100.0/24");
	CHECK(a.dc == 0, "table removed: fallback, dc%d", a.dc + 1);
	gslb_view_free(none);
	gslb_view_free(d);
	test_many_datacenters();
	return unit_finish("gslb_policy_paths");
}
