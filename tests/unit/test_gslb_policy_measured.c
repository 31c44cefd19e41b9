/*
 * Unit tests of the measured policies in src/gslb/policy: failover over the measured order,
 * health and all-down on top of it, the remainder in the fallback policy's order, the fallback
 * policy deciding without a measurement, the TTL cap, the trace and the names.
 */
#include <arpa/inet.h>
#include <string.h>

#include "base/err.h"
#include "gslb/health.h"
#include "gslb/policy.h"
#include "unit.h"

/* ---- fixture: three datacenters a, b, c with one IPv4 address each (targets 0, 1, 2) ---- */

typedef struct {
	gslb_policy_addr_t addrs[3];
	gslb_policy_dc_t dcs[3];
	gslb_policy_svc_t svc;
} fix_t;

static void fix_init(fix_t *f, gslb_policy_kind_t policy, gslb_policy_kind_t fallback)
{
	static const char *const names[3] = {"a", "b", "c"};
	memset(f, 0, sizeof(*f));
	for (unsigned i = 0; i < 3; i++) {
		char text[32];
		snprintf(text, sizeof(text), "192.0.2.%u", 10 + i);
		f->addrs[i] = (gslb_policy_addr_t){.family = AF_INET, .weight = 1, .target = i};
		inet_pton(AF_INET, text, f->addrs[i].addr);
		f->dcs[i] = (gslb_policy_dc_t){.name = names[i],
		                               .addrs = &f->addrs[i],
		                               .addr_count = 1,
		                               .policy = GSLB_POLICY_ALL,
		                               .weight = 1};
	}
	f->svc = (gslb_policy_svc_t){.name = "www.example.test",
	                             .dcs = f->dcs,
	                             .dc_count = 3,
	                             .policy = policy,
	                             .fallback_policy = fallback,
	                             .all_down = GSLB_ALLDOWN_NODATA,
	                             .ttl = 30};
	char err[256] = "";
	CHECK(gslb_policy_svc_prepare(&f->svc, err, sizeof(err)) == 0, "prepare: %s", err);
}

/* Health: bit i of @p down = target i DOWN by a monitor; @p cap the TTL cap of every target. */
static gslb_health_t *health(uint32_t down, uint32_t cap)
{
	gslb_health_t *h = gslb_health_new(3);
	for (uint32_t t = 0; t < 3; t++)
		CHECK(gslb_health_set_monitor(h, t, gslb_sttl_make(down & (1u << t), cap)) == 0,
		      "monitor %u", t);
	return h;
}

/* The considered order as datacenter names, e.g. "cab". */
static void order_str(const fix_t *f, const gslb_policy_trace_t *t, char *out)
{
	for (unsigned i = 0; i < t->n; i++)
		out[i] = f->dcs[t->dcs[i].dc].name[0];
	out[t->n] = '\0';
}

typedef struct {
	const char *what;
	gslb_policy_kind_t fallback;
	const char *measured; /* datacenter indices as digits, "" = no measurement */
	const char *map;      /* geo order as digits, NULL = none */
	uint32_t down;
	int dc;            /* answered datacenter, -1 = none */
	const char *order; /* considered order */
	unsigned n_measured;
	gslb_policy_kind_t decided;
} row_t;

static void digits(const char *text, uint8_t *out, uint8_t *n)
{
	*n = 0;
	for (const char *p = text; p && *p; p++)
		out[(*n)++] = (uint8_t)(*p - '0');
}

static void test_rows(void)
{
	const gslb_policy_kind_t FO = GSLB_POLICY_FAILOVER, GEO = GSLB_POLICY_GEO,
	                         RTT = GSLB_POLICY_RTT;
	const row_t rows[] = {
	    {"measured order decides", FO, "20", NULL, 0, 2, "cab", 2, RTT},
	    {"measured best DOWN: next measured", FO, "20", NULL, 1u << 2, 0, "cab", 2, RTT},
	    {"measured all DOWN: remainder", FO, "20", NULL, 5, 1, "cab", 2, RTT},
	    {"everything DOWN: all-down", FO, "20", NULL, 7, -1, "cab", 2, RTT},
	    {"no measurement: fallback failover", FO, "", NULL, 0, 0, "abc", 0, FO},
	    {"no measurement: fallback geo by the map", GEO, "", "12", 0, 1, "bc", 0, GEO},
	    {"no measurement, geo without a map list", GEO, "", NULL, 0, 0, "abc", 0, GEO},
	    {"remainder in the map's order", GEO, "2", "10", 1u << 2, 1, "cba", 1, RTT},
	    {"remainder only what the map lists", GEO, "2", "1", 1u << 2, 1, "cb", 1, RTT},
	    {"measured and listed by the map: once", GEO, "12", "21", 0, 1, "bc", 2, RTT},
	    {"invalid and repeated entries dropped", FO, "9112", NULL, 0, 1, "bca", 2, RTT},
	};
	for (size_t r = 0; r < STEER_ARRAY_LEN(rows); r++) {
		const row_t *row = &rows[r];
		fix_t f;
		fix_init(&f, GSLB_POLICY_RTT, row->fallback);
		uint8_t measured[8], map[8];
		uint8_t n_measured, n_map;
		digits(row->measured, measured, &n_measured);
		digits(row->map, map, &n_map);
		gslb_policy_query_t q = {.family = AF_INET,
		                         .measured = measured,
		                         .measured_len = n_measured,
		                         .order = row->map ? map : NULL,
		                         .order_len = n_map};
		gslb_health_t *h = health(row->down, 0);
		gslb_policy_rng_t rng;
		gslb_policy_rng_init(&rng, 7);
		gslb_policy_answer_t ans;
		gslb_policy_trace_t t;
		gslb_policy_select(&f.svc, h, &q, &rng, &ans, &t);
		char order[8];
		order_str(&f, &t, order);
		int dc = ans.kind == GSLB_ANSWER_ADDRS ? ans.dc : -1;
		CHECK(dc == row->dc, "%s: answered %d, want %d", row->what, dc, row->dc);
		CHECK(strcmp(order, row->order) == 0, "%s: order %s, want %s", row->what, order,
		      row->order);
		CHECK(t.n_measured == row->n_measured, "%s: %u measured, want %u", row->what,
		      t.n_measured, row->n_measured);
		CHECK(t.policy == row->decided, "%s: decided by %s", row->what,
		      gslb_policy_kind_name(t.policy));
		if (row->dc < 0)
			CHECK(ans.all_down && ans.kind == GSLB_ANSWER_NODATA, "%s: all-down nodata",
			      row->what);
		gslb_health_free(h);
	}
}

/* Failover over the measured order reads only up to the first available datacenter: the TTL
 * is capped by those, not by the ones after it. */
static void test_ttl_cap(void)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_LEAST_CONNECTIONS, GSLB_POLICY_FAILOVER);
	uint8_t measured[] = {1, 2};
	gslb_policy_query_t q = {.family = AF_INET, .measured = measured, .measured_len = 2};
	gslb_health_t *h = gslb_health_new(3);
	CHECK(gslb_health_set_monitor(h, 1, gslb_sttl_make(true, 5)) == 0, "b down, cap 5");
	CHECK(gslb_health_set_monitor(h, 0, gslb_sttl_make(false, 2)) == 0, "a cap 2");
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 1);
	gslb_policy_answer_t ans;
	gslb_policy_select(&f.svc, h, &q, &rng, &ans, NULL);
	CHECK(ans.dc == 2 && ans.ttl == 5, "c answers with the cap of b: dc %u ttl %u", ans.dc,
	      ans.ttl);
	gslb_health_free(h);
}

/* The fallback policy runs as if it were the service's: weighted spreads by weight. */
static void test_fallback_weighted(void)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_RTT, GSLB_POLICY_WEIGHTED);
	gslb_policy_query_t q = {.family = AF_INET};
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 3);
	unsigned hits[3] = {0};
	for (int i = 0; i < 3000; i++) {
		gslb_policy_answer_t ans;
		gslb_policy_select(&f.svc, NULL, &q, &rng, &ans, NULL);
		hits[ans.dc]++;
	}
	for (int d = 0; d < 3; d++)
		CHECK(hits[d] > 850 && hits[d] < 1150, "weighted fallback: dc %d got %u of 3000", d,
		      hits[d]);
}

static void test_prepare(void)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_RTT, GSLB_POLICY_GEO);
	char err[256] = "";
	f.svc.fallback_policy = GSLB_POLICY_KBPS;
	CHECK(gslb_policy_svc_prepare(&f.svc, err, sizeof(err)) == STEER_ECONF &&
	          strstr(err, "fallback policy kbps cannot decide without measurements"),
	      "a measured fallback is refused: %s", err);
	f.svc.fallback_policy = GSLB_POLICY_ALL;
	CHECK(gslb_policy_svc_prepare(&f.svc, err, sizeof(err)) == STEER_ECONF,
	      "an in-datacenter fallback is refused");
	f.svc.fallback_policy = GSLB_POLICY_PERSIST;
	CHECK(gslb_policy_svc_prepare(&f.svc, err, sizeof(err)) == 0, "persist fallback: %s", err);
	f.dcs[0].policy = GSLB_POLICY_RTT;
	CHECK(gslb_policy_svc_prepare(&f.svc, err, sizeof(err)) == STEER_ECONF &&
	          strstr(err, "cannot pick addresses"),
	      "rtt inside a datacenter is refused: %s", err);
}

static void test_names(void)
{
	static const struct {
		const char *name;
		gslb_policy_kind_t kind;
		bool by_path;
	} rows[] = {
	    {"rtt", GSLB_POLICY_RTT, true},
	    {"completion-rate", GSLB_POLICY_COMPLETION_RATE, true},
	    {"hops", GSLB_POLICY_HOPS, true},
	    {"qos", GSLB_POLICY_QOS, true},
	    {"least-connections", GSLB_POLICY_LEAST_CONNECTIONS, false},
	    {"capacity", GSLB_POLICY_CAPACITY, false},
	    {"packet-rate", GSLB_POLICY_PACKET_RATE, false},
	    {"kbps", GSLB_POLICY_KBPS, false},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		gslb_policy_kind_t k;
		CHECK(gslb_policy_kind_parse(rows[i].name, &k) == 0 && k == rows[i].kind,
		      "parse %s", rows[i].name);
		CHECK(strcmp(gslb_policy_kind_name(k), rows[i].name) == 0, "name %s", rows[i].name);
		CHECK(gslb_policy_kind_measured(k) && gslb_policy_kind_dc_level(k) &&
		          !gslb_policy_kind_in_dc(k),
		      "%s: measured, datacenter level only", rows[i].name);
		CHECK(gslb_policy_kind_by_path(k) == rows[i].by_path, "%s: by path", rows[i].name);
	}
	CHECK(!gslb_policy_kind_measured(GSLB_POLICY_GEO), "geo is not measured");
}

static void test_explain(void)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_RTT, GSLB_POLICY_FAILOVER);
	gslb_policy_query_t q = {.family = AF_INET};
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 1);
	gslb_policy_answer_t ans;
	gslb_policy_trace_t t;
	char buf[2048];
	gslb_policy_select(&f.svc, NULL, &q, &rng, &ans, &t);
	gslb_policy_explain(&f.svc, &q, &ans, &t, buf, sizeof(buf));
	CHECK(strstr(buf, "no measurement for this client: fallback policy failover decides"),
	      "fallback named: %s", buf);
	uint8_t measured[] = {2};
	q.measured = measured;
	q.measured_len = 1;
	gslb_policy_select(&f.svc, NULL, &q, &rng, &ans, &t);
	gslb_policy_explain(&f.svc, &q, &ans, &t, buf, sizeof(buf));
	CHECK(strstr(buf, "from 2. on: no measurement, in the configured order") &&
	          strstr(buf, "1. c: chosen"),
	      "measured order explained: %s", buf);
}

int main(void)
{
	test_rows();
	test_ttl_cap();
	test_fallback_weighted();
	test_prepare();
	test_names();
	test_explain();
	return unit_finish("test_gslb_policy_measured");
}
