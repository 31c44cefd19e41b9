/*
 * Unit tests of src/gslb/policy: every datacenter-level and in-datacenter policy, all-down
 * policies, address families, TTL capping, and the statistics of the random and hashed ones.
 * Random draws use fixed seeds, so every run sees the same numbers; the bounds are chosen so a
 * correct implementation passes with probability >= 99.9 % for any seed.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "dns/dname.h"
#include "gslb/health.h"
#include "gslb/policy.h"
#include "unit.h"

/* ---- fixture: vpn.example.test with telecom (v4+v6), unicom (v4), edu (2x v4) ---- */

static gslb_policy_addr_t mk_addr(const char *text, uint16_t weight, uint32_t target)
{
	gslb_policy_addr_t a = {.weight = weight, .target = target};
	if (inet_pton(AF_INET, text, a.addr) == 1)
		a.family = AF_INET;
	else if (inet_pton(AF_INET6, text, a.addr) == 1)
		a.family = AF_INET6;
	return a;
}

typedef struct {
	gslb_policy_addr_t telecom[2], unicom[1], edu[2], fallback[2];
	gslb_policy_dc_t dcs[3];
	gslb_policy_svc_t svc;
	uint8_t cname[DNS_DNAME_MAXLEN];
} fix_t;

#define FIX_TARGETS 5

static void fix_init(fix_t *f, gslb_policy_kind_t policy, gslb_alldown_t all_down)
{
	memset(f, 0, sizeof(*f));
	f->telecom[0] = mk_addr("198.51.100.10", 1, 0);
	f->telecom[1] = mk_addr("2001:db8:1::10", 1, 1);
	f->unicom[0] = mk_addr("203.0.113.10", 1, 2);
	f->edu[0] = mk_addr("192.0.2.10", 1, 3);
	f->edu[1] = mk_addr("192.0.2.11", 1, 4);
	f->fallback[0] = mk_addr("192.0.2.99", 1, 99);
	f->dcs[0] = (gslb_policy_dc_t){.name = "telecom", .addrs = f->telecom, .addr_count = 2};
	f->dcs[1] = (gslb_policy_dc_t){.name = "unicom", .addrs = f->unicom, .addr_count = 1};
	f->dcs[2] = (gslb_policy_dc_t){.name = "edu", .addrs = f->edu, .addr_count = 2};
	for (int i = 0; i < 3; i++) {
		f->dcs[i].policy = GSLB_POLICY_ALL;
		f->dcs[i].weight = 1;
	}
	f->svc = (gslb_policy_svc_t){.name = "vpn.example.test",
	                             .dcs = f->dcs,
	                             .dc_count = 3,
	                             .policy = policy,
	                             .all_down = all_down,
	                             .ttl = 30};
	CHECK(dname_from_str("down.example.test", f->cname) > 0, "cname");
}

static void fix_prepare(fix_t *f)
{
	char err[256] = "";
	CHECK(gslb_policy_svc_prepare(&f->svc, err, sizeof(err)) == 0, "prepare: %s", err);
}

/* The fixture's health table: names, monitor DOWN set and TTL caps, then override rules. */
static gslb_health_t *fix_health(const fix_t *f, const char *const *rules, uint32_t mon_down,
                                 const uint32_t *caps)
{
	gslb_health_t *h = gslb_health_new(FIX_TARGETS);
	for (unsigned d = 0; d < f->svc.dc_count; d++) {
		const gslb_policy_dc_t *dc = &f->svc.dcs[d];
		for (unsigned i = 0; i < dc->addr_count; i++) {
			char text[INET6_ADDRSTRLEN], name[256];
			inet_ntop(dc->addrs[i].family, dc->addrs[i].addr, text, sizeof(text));
			snprintf(name, sizeof(name), "service/%s/%s/%s", f->svc.name, dc->name,
			         text);
			CHECK(gslb_health_set_name(h, dc->addrs[i].target, name) == 0, "%s", name);
		}
	}
	for (uint32_t t = 0; t < FIX_TARGETS; t++) {
		gslb_sttl_t s = gslb_sttl_make(mon_down & (1u << t), caps ? caps[t] : 0);
		CHECK(gslb_health_set_monitor(h, t, s) == 0, "monitor %u", t);
	}
	gslb_overrides_t ov;
	gslb_overrides_init(&ov);
	for (size_t i = 0; rules && rules[i]; i++) {
		char pat[128], state[16], err[256];
		CHECK(sscanf(rules[i], "%127s %15s", pat, state) == 2, "rule");
		CHECK(gslb_overrides_set(&ov, pat, !strcmp(state, "DOWN"), 0, err, sizeof(err)) ==
		          0,
		      "rule %s: %s", pat, err);
	}
	gslb_health_apply_overrides(h, &ov, NULL);
	gslb_overrides_deinit(&ov);
	return h;
}

/* The answer's addresses as text, space-separated. */
static void answer_str(const gslb_policy_svc_t *svc, const gslb_policy_answer_t *ans, char *out,
                       size_t len)
{
	out[0] = '\0';
	if (ans->kind != GSLB_ANSWER_ADDRS)
		return;
	for (unsigned i = 0; i < ans->count; i++) {
		const gslb_policy_addr_t *a = gslb_policy_answer_addr(svc, ans, i);
		char text[INET6_ADDRSTRLEN];
		inet_ntop(a->family, a->addr, text, sizeof(text));
		size_t used = strlen(out);
		snprintf(out + used, len - used, "%s%s", i ? " " : "", text);
	}
}

/* Trace statuses, one letter per considered datacenter. */
static void trace_str(const gslb_policy_trace_t *t, char *out)
{
	static const char letters[] = {
	    [GSLB_DC_UNSEEN] = 'U',    [GSLB_DC_CHOSEN] = 'C', [GSLB_DC_CANDIDATE] = 'c',
	    [GSLB_DC_NO_FAMILY] = 'F', [GSLB_DC_DOWN] = 'D',   [GSLB_DC_FORCED_DOWN] = 'X',
	};
	for (unsigned i = 0; i < t->n; i++)
		out[i] = letters[t->dcs[i].status];
	out[t->n] = '\0';
}

static const char *kind_str(gslb_answer_kind_t k)
{
	switch (k) {
	case GSLB_ANSWER_ADDRS:
		return "addrs";
	case GSLB_ANSWER_CNAME:
		return "cname";
	case GSLB_ANSWER_NODATA:
		return "nodata";
	case GSLB_ANSWER_SERVFAIL:
		return "servfail";
	case GSLB_ANSWER_TXT:
		return "txt";
	}
	return "?";
}

/* ---- failover, geo, families, all-down ---- */

#define TELECOM_DOWN "*/*/telecom/* DOWN"
#define UNICOM_DOWN  "*/*/unicom/* DOWN"
#define EDU_DOWN     "*/*/edu/* DOWN"

typedef struct {
	const char *what;
	gslb_policy_kind_t policy;
	gslb_alldown_t all_down;
	bool fb_cname; /* fallback is the CNAME, else 192.0.2.99 */
	const char *rules[4];
	uint32_t mon_down; /* bit per target */
	int family;        /* 4 or 6 */
	int order[5];      /* geo order, -1 terminated; {0} alone means "none given" */
	int order_len;
	const char *kind;
	const char *dc; /* chosen/answered datacenter, NULL for none */
	bool all_down_used;
	const char *addrs;
	const char *trace;
} sel_row_t;

static const sel_row_t sel_rows[] = {
    /* failover */
    {"all up, A",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {NULL},
     0,
     4,
     {0},
     0,
     "addrs",
     "telecom",
     false,
     "198.51.100.10",
     "CUU"},
    {"all up, AAAA",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {NULL},
     0,
     6,
     {0},
     0,
     "addrs",
     "telecom",
     false,
     "2001:db8:1::10",
     "CUU"},
    {"telecom forced down",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {TELECOM_DOWN},
     0,
     4,
     {0},
     0,
     "addrs",
     "unicom",
     false,
     "203.0.113.10",
     "XCU"},
    {"telecom monitor down",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {NULL},
     1u << 0,
     4,
     {0},
     0,
     "addrs",
     "unicom",
     false,
     "203.0.113.10",
     "DCU"},
    {"monitor down, forced up",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {"*/*/telecom/198.51.100.10 UP"},
     1u << 0,
     4,
     {0},
     0,
     "addrs",
     "telecom",
     false,
     "198.51.100.10",
     "CUU"},
    {"telecom v4 down, AAAA still there",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {"*/*/*/198.51.100.10 DOWN"},
     0,
     6,
     {0},
     0,
     "addrs",
     "telecom",
     false,
     "2001:db8:1::10",
     "CUU"},
    {"telecom+unicom down",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {TELECOM_DOWN, UNICOM_DOWN},
     0,
     4,
     {0},
     0,
     "addrs",
     "edu",
     false,
     "192.0.2.10 192.0.2.11",
     "XXC"},
    {"one edu address down",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {TELECOM_DOWN, UNICOM_DOWN, "*/192.0.2.10 DOWN"},
     0,
     4,
     {0},
     0,
     "addrs",
     "edu",
     false,
     "192.0.2.11",
     "XXC"},
    {"mixed forced and monitor down",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {TELECOM_DOWN, UNICOM_DOWN, "*/192.0.2.10 DOWN"},
     1u << 4,
     4,
     {0},
     0,
     "addrs",
     "telecom",
     true,
     "198.51.100.10",
     "XXD"},
    {"telecom v6 down: AAAA skips v4-only DCs, then all-down",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {TELECOM_DOWN},
     0,
     6,
     {0},
     0,
     "addrs",
     "telecom",
     true,
     "2001:db8:1::10",
     "XFF"},
    /* all-down policies */
    {"all down: first-datacenter",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {"* DOWN"},
     0,
     4,
     {0},
     0,
     "addrs",
     "telecom",
     true,
     "198.51.100.10",
     "XXX"},
    {"all down: fallback address",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FALLBACK,
     false,
     {"* DOWN"},
     0,
     4,
     {0},
     0,
     "addrs",
     NULL,
     true,
     "192.0.2.99",
     "XXX"},
    {"all down: fallback has no IPv6",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FALLBACK,
     false,
     {"* DOWN"},
     0,
     6,
     {0},
     0,
     "nodata",
     NULL,
     true,
     "",
     "XFF"},
    {"all down: fallback CNAME",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FALLBACK,
     true,
     {"* DOWN"},
     0,
     4,
     {0},
     0,
     "cname",
     NULL,
     true,
     "",
     "XXX"},
    {"all down: fallback CNAME, AAAA",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_FALLBACK,
     true,
     {"* DOWN"},
     0,
     6,
     {0},
     0,
     "cname",
     NULL,
     true,
     "",
     "XFF"},
    {"all down: nodata",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_NODATA,
     false,
     {"* DOWN"},
     0,
     4,
     {0},
     0,
     "nodata",
     NULL,
     true,
     "",
     "XXX"},
    {"all down: servfail",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_SERVFAIL,
     false,
     {"* DOWN"},
     0,
     4,
     {0},
     0,
     "servfail",
     NULL,
     true,
     "",
     "XXX"},
    {"monitor all down: servfail",
     GSLB_POLICY_FAILOVER,
     GSLB_ALLDOWN_SERVFAIL,
     false,
     {NULL},
     0x1f,
     4,
     {0},
     0,
     "servfail",
     NULL,
     true,
     "",
     "DDD"},
    /* geo */
    {"geo edu first",
     GSLB_POLICY_GEO,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {NULL},
     0,
     4,
     {2, 0},
     2,
     "addrs",
     "edu",
     false,
     "192.0.2.10 192.0.2.11",
     "CU"},
    {"geo edu down",
     GSLB_POLICY_GEO,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {EDU_DOWN},
     0,
     4,
     {2, 0},
     2,
     "addrs",
     "telecom",
     false,
     "198.51.100.10",
     "XC"},
    {"geo bad and repeated entries dropped",
     GSLB_POLICY_GEO,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {NULL},
     0,
     4,
     {9, 1, 1, 0},
     4,
     "addrs",
     "unicom",
     false,
     "203.0.113.10",
     "CU"},
    {"geo empty order: configured order",
     GSLB_POLICY_GEO,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {NULL},
     0,
     4,
     {-1},
     0,
     "addrs",
     "telecom",
     false,
     "198.51.100.10",
     "CUU"},
    {"geo only invalid entries: configured order",
     GSLB_POLICY_GEO,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {NULL},
     0,
     4,
     {7, 200},
     2,
     "addrs",
     "telecom",
     false,
     "198.51.100.10",
     "CUU"},
    {"geo unlisted DCs are not candidates",
     GSLB_POLICY_GEO,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {UNICOM_DOWN},
     0,
     4,
     {1},
     1,
     "addrs",
     "unicom",
     true,
     "203.0.113.10",
     "X"},
    {"geo AAAA: no listed DC has IPv6",
     GSLB_POLICY_GEO,
     GSLB_ALLDOWN_SERVFAIL,
     false,
     {NULL},
     0,
     6,
     {1, 2},
     2,
     "nodata",
     NULL,
     false,
     "",
     "FF"},
    {"geo AAAA skips to the DC with IPv6",
     GSLB_POLICY_GEO,
     GSLB_ALLDOWN_SERVFAIL,
     false,
     {NULL},
     0,
     6,
     {2, 1, 0},
     3,
     "addrs",
     "telecom",
     false,
     "2001:db8:1::10",
     "FFC"},
    {"geo all down: first listed DC with the family",
     GSLB_POLICY_GEO,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {"* DOWN"},
     0,
     4,
     {2, 1, 0},
     3,
     "addrs",
     "edu",
     true,
     "192.0.2.10 192.0.2.11",
     "XXX"},
    {"geo all down AAAA: first listed DC with IPv6",
     GSLB_POLICY_GEO,
     GSLB_ALLDOWN_FIRST_DC,
     false,
     {"* DOWN"},
     0,
     6,
     {2, 1, 0},
     3,
     "addrs",
     "telecom",
     true,
     "2001:db8:1::10",
     "FFX"},
};

static void check_sel_row(const sel_row_t *r)
{
	fix_t f;
	fix_init(&f, r->policy, r->all_down);
	if (r->all_down == GSLB_ALLDOWN_FALLBACK) {
		if (r->fb_cname) {
			f.svc.fallback_cname = f.cname;
		} else {
			f.svc.fallback = f.fallback;
			f.svc.fallback_count = 1;
		}
	}
	fix_prepare(&f);
	gslb_health_t *h = fix_health(&f, r->rules, r->mon_down, NULL);
	uint8_t order[5];
	for (int i = 0; i < r->order_len; i++)
		order[i] = (uint8_t)r->order[i];
	gslb_policy_query_t q = {.family = r->family == 4 ? AF_INET : AF_INET6,
	                         .order = r->order_len ? order : NULL,
	                         .order_len = (uint8_t)r->order_len};
	if (r->order[0] == -1)
		q.order = order; /* given but empty */
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 1);
	gslb_policy_answer_t ans;
	gslb_policy_trace_t trace;
	gslb_policy_select(&f.svc, h, &q, &rng, &ans, &trace);
	char addrs[512], tr[GSLB_POLICY_DC_MAX + 1];
	answer_str(&f.svc, &ans, addrs, sizeof(addrs));
	trace_str(&trace, tr);
	CHECK(!strcmp(kind_str(ans.kind), r->kind), "%s: kind %s, want %s", r->what,
	      kind_str(ans.kind), r->kind);
	const char *dc = ans.dc == GSLB_POLICY_DC_NONE ? NULL : f.svc.dcs[ans.dc].name;
	CHECK((dc == NULL) == (r->dc == NULL) && (!dc || !strcmp(dc, r->dc)), "%s: dc %s, want %s",
	      r->what, dc ? dc : "none", r->dc ? r->dc : "none");
	CHECK(ans.all_down == r->all_down_used, "%s: all_down %d", r->what, ans.all_down);
	CHECK(!strcmp(addrs, r->addrs), "%s: addrs '%s', want '%s'", r->what, addrs, r->addrs);
	CHECK(!strcmp(tr, r->trace), "%s: trace %s, want %s", r->what, tr, r->trace);
	CHECK(ans.ttl == 30, "%s: ttl %u", r->what, ans.ttl);
	if (ans.kind == GSLB_ANSWER_CNAME)
		CHECK(ans.cname == f.cname, "%s: cname", r->what);
	CHECK(ans.fallback == (r->all_down == GSLB_ALLDOWN_FALLBACK && !r->fb_cname &&
	                       ans.kind == GSLB_ANSWER_ADDRS),
	      "%s: fallback flag", r->what);

	/* The query path passes no trace: same answer. */
	gslb_policy_answer_t again;
	gslb_policy_select(&f.svc, h, &q, &rng, &again, NULL);
	CHECK(again.kind == ans.kind && again.dc == ans.dc && again.count == ans.count &&
	          !memcmp(again.idx, ans.idx, ans.count),
	      "%s: same answer without a trace", r->what);
	gslb_health_free(h);
}

static void test_select_rows(void)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(sel_rows); i++)
		check_sel_row(&sel_rows[i]);
}

static void test_no_health_and_v4_only(void)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_FAILOVER, GSLB_ALLDOWN_SERVFAIL);
	f.dcs[0].addr_count = 1; /* drop telecom's IPv6: the service is IPv4-only */
	fix_prepare(&f);
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 2);
	gslb_policy_answer_t ans;
	gslb_policy_query_t q = {.family = AF_INET6};
	gslb_policy_select(&f.svc, NULL, &q, &rng, &ans, NULL);
	CHECK(ans.kind == GSLB_ANSWER_NODATA && !ans.all_down && ans.ttl == 30,
	      "IPv4-only service: AAAA is NODATA, not the all-down SERVFAIL");
	q.family = AF_INET;
	gslb_policy_select(&f.svc, NULL, &q, &rng, &ans, NULL);
	CHECK(ans.kind == GSLB_ANSWER_ADDRS && ans.dc == 0 && ans.count == 1,
	      "no health table: everything UP");
}

/* ---- TTL ---- */

static void test_ttl(void)
{
	static const struct {
		const char *what;
		gslb_policy_kind_t policy;
		uint32_t caps[FIX_TARGETS];
		uint32_t mon_down;
		const char *rules[2];
		uint32_t want;
	} rows[] = {
	    {"no caps", GSLB_POLICY_FAILOVER, {0}, 0, {NULL}, 30},
	    {"chosen address capped", GSLB_POLICY_FAILOVER, {10}, 0, {NULL}, 10},
	    {"cap above the service TTL", GSLB_POLICY_FAILOVER, {100}, 0, {NULL}, 30},
	    {"other family's cap not read", GSLB_POLICY_FAILOVER, {0, 4}, 0, {NULL}, 30},
	    {"skipped DC caps", GSLB_POLICY_FAILOVER, {5, 0, 20}, 1, {NULL}, 5},
	    {"forced down keeps the monitor cap", GSLB_POLICY_FAILOVER, {6}, 0, {TELECOM_DOWN}, 6},
	    {"unseen DC not read", GSLB_POLICY_FAILOVER, {0, 0, 0, 3, 3}, 0, {NULL}, 30},
	    {"weighted reads every DC", GSLB_POLICY_WEIGHTED, {0, 0, 0, 0, 3}, 0, {NULL}, 3},
	    {"all down: lowest cap", GSLB_POLICY_FAILOVER, {9, 1, 8, 7, 0}, 0x1f, {NULL}, 7},
	};
	for (size_t r = 0; r < STEER_ARRAY_LEN(rows); r++) {
		fix_t f;
		fix_init(&f, rows[r].policy, GSLB_ALLDOWN_FIRST_DC);
		fix_prepare(&f);
		gslb_health_t *h = fix_health(&f, rows[r].rules, rows[r].mon_down, rows[r].caps);
		gslb_policy_rng_t rng;
		gslb_policy_rng_init(&rng, 3);
		gslb_policy_query_t q = {.family = AF_INET};
		gslb_policy_answer_t ans;
		gslb_policy_trace_t trace;
		gslb_policy_select(&f.svc, h, &q, &rng, &ans, &trace);
		CHECK(ans.ttl == rows[r].want, "%s: ttl %u, want %u", rows[r].what, ans.ttl,
		      rows[r].want);
		CHECK(trace.ttl_cap == (rows[r].want < 30 ? rows[r].want : trace.ttl_cap),
		      "%s: trace cap %u", rows[r].what, trace.ttl_cap);
		gslb_health_free(h);
	}
}

/* ---- statistics helpers ---- */

/* Chi-square critical values at p = 0.001 for 1..7 degrees of freedom. */
static const double chi2_crit[] = {0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322};

/* Pearson's statistic of @p obs against @p expect (both @p k long). */
static double chi2(const unsigned *obs, const double *expect, unsigned k)
{
	double x = 0;
	for (unsigned i = 0; i < k; i++) {
		double d = obs[i] - expect[i];
		x += d * d / expect[i];
	}
	return x;
}

/* A datacenter "pool" with 4 IPv4 addresses of weights 1..4, a DOWN one of weight 100 and an
 * IPv6 one of weight 50; targets 0..5. */
typedef struct {
	gslb_policy_addr_t addrs[6];
	gslb_policy_dc_t dc;
	gslb_policy_svc_t svc;
	gslb_health_t *health;
} pool_t;

static void pool_init(pool_t *p, gslb_policy_kind_t policy, uint8_t multi)
{
	memset(p, 0, sizeof(*p));
	p->addrs[0] = mk_addr("10.0.0.1", 1, 0);
	p->addrs[1] = mk_addr("10.0.0.2", 2, 1);
	p->addrs[2] = mk_addr("10.0.0.3", 3, 2);
	p->addrs[3] = mk_addr("10.0.0.4", 4, 3);
	p->addrs[4] = mk_addr("10.0.0.5", 100, 4);
	p->addrs[5] = mk_addr("2001:db8::6", 50, 5);
	p->dc = (gslb_policy_dc_t){.name = "pool",
	                           .addrs = p->addrs,
	                           .addr_count = 6,
	                           .policy = policy,
	                           .multi = multi,
	                           .weight = 1};
	p->svc = (gslb_policy_svc_t){.name = "pool.example.test",
	                             .dcs = &p->dc,
	                             .dc_count = 1,
	                             .policy = GSLB_POLICY_FAILOVER,
	                             .all_down = GSLB_ALLDOWN_SERVFAIL,
	                             .ttl = 60};
	char err[256] = "";
	CHECK(gslb_policy_svc_prepare(&p->svc, err, sizeof(err)) == 0, "pool: %s", err);
	p->health = gslb_health_new(6);
	CHECK(gslb_health_set_monitor(p->health, 4, GSLB_STTL_DOWN) == 0, "pool: 5th down");
}

static unsigned pool_pick(pool_t *p, gslb_policy_rng_t *rng, uint64_t key)
{
	gslb_policy_query_t q = {.family = AF_INET, .client_key = key};
	gslb_policy_answer_t ans;
	gslb_policy_select(&p->svc, p->health, &q, rng, &ans, NULL);
	return ans.count == 1 ? ans.idx[0] : 99;
}

#define DRAWS 100000

static void test_in_dc_weighted(void)
{
	pool_t p;
	pool_init(&p, GSLB_POLICY_WEIGHTED, 0);
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 42);
	unsigned obs[6] = {0};
	for (unsigned i = 0; i < DRAWS; i++) {
		unsigned k = pool_pick(&p, &rng, 0);
		obs[k < 6 ? k : 5]++;
	}
	CHECK(obs[4] == 0, "DOWN address never answered (%u)", obs[4]);
	CHECK(obs[5] == 0, "IPv6 address never in an A answer (%u)", obs[5]);
	double expect[4];
	for (unsigned i = 0; i < 4; i++)
		expect[i] = DRAWS * (i + 1) / 10.0;
	double x = chi2(obs, expect, 4);
	CHECK(x < chi2_crit[3], "weighted 1:2:3:4 chi2 %.2f (counts %u %u %u %u)", x, obs[0],
	      obs[1], obs[2], obs[3]);
	/* The statistic must reject a uniform draw, or the check above proves nothing. */
	double uniform[4] = {DRAWS / 4.0, DRAWS / 4.0, DRAWS / 4.0, DRAWS / 4.0};
	CHECK(chi2(obs, uniform, 4) > 1000, "weighted is not uniform");
	gslb_health_free(p.health);
}

/* Weights from the health table (admin overrides, slow start) replace the configured ones. */
static void test_in_dc_weight_overrides(void)
{
	static const char *const names[] = {"p/a1", "p/a2", "p/a3", "p/a4", "p/a5", "p/a6"};
	pool_t p;
	pool_init(&p, GSLB_POLICY_WEIGHTED, 0);
	for (uint32_t i = 0; i < 6; i++)
		CHECK(gslb_health_set_name(p.health, i, names[i]) == 0, "name");
	gslb_overrides_t ov;
	gslb_overrides_init(&ov);
	char err[256];
	/* 1:2:3:4 becomes 4:0:3:1: a2 drained, a1 and a4 swapped. */
	CHECK(gslb_overrides_set_weight(&ov, "p/a1", 4, 0, err, sizeof(err)) == 0 &&
	          gslb_overrides_set_weight(&ov, "p/a2", 0, 0, err, sizeof(err)) == 0 &&
	          gslb_overrides_set_weight(&ov, "p/a4", 1, 0, err, sizeof(err)) == 0,
	      "weight rules");
	gslb_health_apply_overrides(p.health, &ov, NULL);
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 7);
	unsigned obs[6] = {0};
	for (unsigned i = 0; i < DRAWS; i++) {
		unsigned k = pool_pick(&p, &rng, 0);
		obs[k < 6 ? k : 5]++;
	}
	CHECK(obs[1] == 0, "weight 0 drains the address (%u)", obs[1]);
	unsigned got[3] = {obs[0], obs[2], obs[3]};
	double expect[3] = {DRAWS * 4 / 8.0, DRAWS * 3 / 8.0, DRAWS * 1 / 8.0};
	double x = chi2(got, expect, 3);
	CHECK(x < chi2_crit[2], "weights 4:3:1 from the API: chi2 %.2f (%u %u %u)", x, got[0],
	      got[1], got[2]);

	/* Persist and multi read the same weights; every weight 0 means equals, not silence. */
	CHECK(gslb_overrides_set_weight(&ov, "p/*", 0, 0, err, sizeof(err)) == 0, "drain all");
	gslb_health_apply_overrides(p.health, &ov, NULL);
	memset(obs, 0, sizeof(obs));
	for (unsigned i = 0; i < 4000; i++)
		obs[pool_pick(&p, &rng, 0) % 6]++;
	CHECK(obs[0] > 800 && obs[1] > 800 && obs[2] > 800 && obs[3] > 800 && obs[4] == 0,
	      "all drained: UP addresses answered as equals (%u %u %u %u %u)", obs[0], obs[1],
	      obs[2], obs[3], obs[4]);

	/* Slow start: a3 at 10% of 3 rounds up to 1, so a1:a3 = 4:1 once the rest is drained. */
	gslb_overrides_deinit(&ov);
	gslb_overrides_init(&ov);
	CHECK(gslb_overrides_set_weight(&ov, "p/a[24]", 0, 0, err, sizeof(err)) == 0 &&
	          gslb_overrides_set_weight(&ov, "p/a1", 4, 0, err, sizeof(err)) == 0,
	      "rules");
	gslb_health_apply_overrides(p.health, &ov, NULL);
	CHECK(gslb_health_set_ramp(p.health, 2, 10) == 0, "ramp a3");
	memset(obs, 0, sizeof(obs));
	for (unsigned i = 0; i < DRAWS; i++)
		obs[pool_pick(&p, &rng, 0) % 6]++;
	unsigned two[2] = {obs[0], obs[2]};
	double e2[2] = {DRAWS * 0.8, DRAWS * 0.2};
	x = chi2(two, e2, 2);
	CHECK(x < chi2_crit[1], "ramp 10%%: chi2 %.2f (%u %u)", x, two[0], two[1]);
	gslb_overrides_deinit(&ov);
	gslb_health_free(p.health);
}

static void test_in_dc_round_robin(void)
{
	pool_t p;
	pool_init(&p, GSLB_POLICY_ROUND_ROBIN, 0);
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 7);
	unsigned obs[6] = {0}, period_ok = 1;
	unsigned first[4];
	for (unsigned i = 0; i < DRAWS; i++) {
		unsigned k = pool_pick(&p, &rng, 0);
		obs[k < 6 ? k : 5]++;
		if (i < 4)
			first[i] = k;
		else if (k != first[i % 4])
			period_ok = 0;
	}
	CHECK(period_ok, "round-robin cycles with period 4 on one thread");
	for (unsigned i = 0; i < 4; i++)
		CHECK(obs[i] == DRAWS / 4, "round-robin address %u: %u of %u", i, obs[i], DRAWS);
	CHECK(obs[4] == 0 && obs[5] == 0, "round-robin skips DOWN and other-family addresses");

	/* One more DOWN: the rotation covers the 3 left, exactly evenly. */
	CHECK(gslb_health_set_monitor(p.health, 1, GSLB_STTL_DOWN) == 0, "down 1");
	memset(obs, 0, sizeof(obs));
	for (unsigned i = 0; i < 3 * 1000; i++)
		obs[pool_pick(&p, &rng, 0) % 6]++;
	CHECK(obs[0] == 1000 && obs[1] == 0 && obs[2] == 1000 && obs[3] == 1000,
	      "round-robin over 3: %u %u %u %u", obs[0], obs[1], obs[2], obs[3]);

	/* Threads start at seeded points, so a restart does not send every thread's first
	 * answer to the same address. */
	unsigned starts = 0;
	for (uint64_t seed = 0; seed < 64; seed++) {
		gslb_policy_rng_t t;
		gslb_policy_rng_init(&t, seed);
		starts |= 1u << pool_pick(&p, &t, 0);
	}
	CHECK(starts == 0xd, "64 threads start on all 3 UP addresses (mask %x)", starts);
	gslb_health_free(p.health);
}

/*
 * Exact inclusion probabilities of successive weighted sampling without replacement of @p n
 * items from @p mask: P(i) = sum over the first draw j of w_j/W * [j == i or i drawn later].
 */
static void incl_prob(const double *w, unsigned mask, unsigned n, double *out)
{
	for (unsigned i = 0; i < 8; i++)
		out[i] = 0;
	if (n == 0 || mask == 0)
		return;
	double total = 0;
	for (unsigned j = 0; j < 8; j++)
		if (mask & (1u << j))
			total += w[j];
	for (unsigned j = 0; j < 8; j++) {
		if (!(mask & (1u << j)))
			continue;
		double pj = w[j] / total, rest[8];
		incl_prob(w, mask & ~(1u << j), n - 1, rest);
		for (unsigned i = 0; i < 8; i++)
			out[i] += pj * (i == j ? 1.0 : rest[i]);
	}
}

static void test_in_dc_multi(void)
{
	pool_t p;
	pool_init(&p, GSLB_POLICY_MULTI, 2);
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 99);
	unsigned incl[6] = {0}, dups = 0, wrong_count = 0, first_heavier = 0;
	gslb_policy_query_t q = {.family = AF_INET};
	for (unsigned i = 0; i < DRAWS; i++) {
		gslb_policy_answer_t ans;
		gslb_policy_select(&p.svc, p.health, &q, &rng, &ans, NULL);
		if (ans.count != 2) {
			wrong_count++;
			continue;
		}
		dups += ans.idx[0] == ans.idx[1];
		first_heavier += ans.idx[0] > ans.idx[1];
		incl[ans.idx[0] % 6]++;
		incl[ans.idx[1] % 6]++;
	}
	CHECK(wrong_count == 0 && dups == 0, "multi 2: always 2 distinct (%u bad, %u dups)",
	      wrong_count, dups);
	CHECK(incl[4] == 0 && incl[5] == 0, "multi never includes DOWN or IPv6 addresses");
	double w[8] = {1, 2, 3, 4}, pr[8];
	incl_prob(w, 0xf, 2, pr);
	for (unsigned i = 0; i < 4; i++) {
		double mean = DRAWS * pr[i], var = DRAWS * pr[i] * (1 - pr[i]);
		double d = incl[i] - mean;
		/* within 4 binomial standard deviations (compared squared: no libm); 4 such checks
		 * together pass with p > 99.9 % */
		CHECK(d * d < 16 * var, "multi inclusion of weight %u: %u, expect %.0f", i + 1,
		      incl[i], mean);
		if (i)
			CHECK(incl[i] > incl[i - 1], "inclusion grows with weight");
	}
	/* Answer order is draw order, so heavier addresses come first more often. */
	CHECK(first_heavier > DRAWS / 2, "draw order favours weight (%u)", first_heavier);

	/* N above the UP count: every UP address once. */
	pool_t big;
	pool_init(&big, GSLB_POLICY_MULTI, 10);
	gslb_policy_answer_t ans;
	gslb_policy_select(&big.svc, big.health, &q, &rng, &ans, NULL);
	unsigned seen = 0;
	for (unsigned i = 0; i < ans.count; i++)
		seen |= 1u << ans.idx[i];
	CHECK(ans.count == 4 && seen == 0xf, "multi 10 of 4 UP: all 4 (count %u)", ans.count);
	gslb_health_free(big.health);
	gslb_health_free(p.health);
}

static void test_in_dc_all_and_failover(void)
{
	pool_t p;
	pool_init(&p, GSLB_POLICY_ALL, 0);
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 5);
	gslb_policy_query_t q = {.family = AF_INET};
	gslb_policy_answer_t ans;
	gslb_policy_select(&p.svc, p.health, &q, &rng, &ans, NULL);
	CHECK(ans.count == 4 && ans.idx[0] == 0 && ans.idx[3] == 3, "all: every UP v4, in order");
	q.family = AF_INET6;
	gslb_policy_select(&p.svc, p.health, &q, &rng, &ans, NULL);
	CHECK(ans.count == 1 && ans.idx[0] == 5, "all, AAAA: the IPv6 one");
	gslb_health_free(p.health);

	pool_init(&p, GSLB_POLICY_FAILOVER, 0);
	q.family = AF_INET;
	gslb_policy_select(&p.svc, p.health, &q, &rng, &ans, NULL);
	CHECK(ans.count == 1 && ans.idx[0] == 0, "in-dc failover: first UP");
	CHECK(gslb_health_set_monitor(p.health, 0, GSLB_STTL_DOWN) == 0, "down 0");
	gslb_policy_select(&p.svc, p.health, &q, &rng, &ans, NULL);
	CHECK(ans.count == 1 && ans.idx[0] == 1, "in-dc failover: next UP");
	gslb_health_free(p.health);
}

/* ---- persist ---- */

#define CLIENTS 10000

static uint64_t client_of(unsigned i)
{
	uint8_t a[16] = {10, (uint8_t)(i >> 8), (uint8_t)i, 77};
	return gslb_policy_client_key(AF_INET, a, 24);
}

static void test_in_dc_persist(void)
{
	pool_t p;
	pool_init(&p, GSLB_POLICY_PERSIST, 0);
	gslb_policy_rng_t rng, rng2;
	gslb_policy_rng_init(&rng, 11);
	gslb_policy_rng_init(&rng2, 12345);
	static uint8_t before[CLIENTS];
	unsigned obs[6] = {0}, unstable = 0;
	for (unsigned c = 0; c < CLIENTS; c++) {
		before[c] = (uint8_t)pool_pick(&p, &rng, client_of(c));
		unstable += pool_pick(&p, &rng2, client_of(c)) != before[c];
		obs[before[c] % 6]++;
	}
	CHECK(unstable == 0, "persist: same choice on every call and thread (%u differ)", unstable);
	/* Pinned choices: a change here moves clients between releases (and between nodes of a
	 * cluster running different versions), so it must be deliberate. */
	char pinned[17];
	for (unsigned c = 0; c < 16; c++)
		pinned[c] = (char)('0' + before[c]);
	pinned[16] = '\0';
	CHECK(!strcmp(pinned, "3330230021122121"), "pinned persist choices: %s", pinned);
	CHECK(obs[4] == 0 && obs[5] == 0, "persist: only UP IPv4 candidates");
	double expect[4];
	for (unsigned i = 0; i < 4; i++)
		expect[i] = CLIENTS * (i + 1) / 10.0;
	double x = chi2(obs, expect, 4);
	CHECK(x < chi2_crit[3], "persist 1:2:3:4 over clients chi2 %.2f (%u %u %u %u)", x, obs[0],
	      obs[1], obs[2], obs[3]);

	/* Address 2 goes DOWN: exactly its clients move, the others keep their address. */
	CHECK(gslb_health_set_monitor(p.health, 2, GSLB_STTL_DOWN) == 0, "down 2");
	unsigned moved = 0, wrongly_moved = 0, still_on_down = 0, moved_to[6] = {0};
	for (unsigned c = 0; c < CLIENTS; c++) {
		unsigned now = pool_pick(&p, &rng, client_of(c));
		if (before[c] == 2) {
			moved++;
			still_on_down += now == 2;
			moved_to[now % 6]++;
		} else {
			wrongly_moved += now != before[c];
		}
	}
	CHECK(moved == obs[2] && still_on_down == 0, "clients of the DOWN address move (%u)",
	      moved);
	CHECK(wrongly_moved == 0, "no other client moves (%u did)", wrongly_moved);
	/* They spread over the rest by weight 1:2:4. */
	unsigned mv[3] = {moved_to[0], moved_to[1], moved_to[3]};
	double mexp[3] = {moved / 7.0, moved * 2 / 7.0, moved * 4 / 7.0};
	x = chi2(mv, mexp, 3);
	CHECK(x < chi2_crit[2], "moved clients spread by weight: chi2 %.2f", x);

	/* Back UP: everyone returns. */
	CHECK(gslb_health_set_monitor(p.health, 2, 0) == 0, "up 2");
	unsigned not_back = 0;
	for (unsigned c = 0; c < CLIENTS; c++)
		not_back += pool_pick(&p, &rng, client_of(c)) != before[c];
	CHECK(not_back == 0, "all clients back on their address (%u not)", not_back);
	gslb_health_free(p.health);
}

/* ---- datacenter-level weighted, round-robin, persist ---- */

/* Three datacenters of weights 1, 3 and 6; the third is DOWN unless @p all_up. */
static void dcs_init(fix_t *f, gslb_policy_kind_t policy)
{
	fix_init(f, policy, GSLB_ALLDOWN_SERVFAIL);
	f->dcs[0].weight = 1;
	f->dcs[1].weight = 3;
	f->dcs[2].weight = 6;
	fix_prepare(f);
}

static unsigned dc_pick(const fix_t *f, const gslb_health_t *h, gslb_policy_rng_t *rng,
                        uint64_t key, gslb_policy_trace_t *trace)
{
	gslb_policy_query_t q = {.family = AF_INET, .client_key = key};
	gslb_policy_answer_t ans;
	gslb_policy_select(&f->svc, h, &q, rng, &ans, trace);
	return ans.dc;
}

static void test_dc_weighted(void)
{
	fix_t f;
	dcs_init(&f, GSLB_POLICY_WEIGHTED);
	gslb_health_t *h = fix_health(&f, NULL, 0, NULL);
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 2024);
	unsigned obs[3] = {0};
	for (unsigned i = 0; i < DRAWS; i++)
		obs[dc_pick(&f, h, &rng, 0, NULL) % 3]++;
	double expect[3] = {DRAWS * 0.1, DRAWS * 0.3, DRAWS * 0.6};
	double x = chi2(obs, expect, 3);
	CHECK(x < chi2_crit[2], "DC weighted 1:3:6 chi2 %.2f (%u %u %u)", x, obs[0], obs[1],
	      obs[2]);
	gslb_policy_trace_t trace;
	char tr[8];
	unsigned dc = dc_pick(&f, h, &rng, 0, &trace);
	trace_str(&trace, tr);
	CHECK(strlen(tr) == 3 && tr[dc] == 'C' && !strchr(tr, 'U'),
	      "weighted trace: chosen + candidates (%s)", tr);
	gslb_health_free(h);

	/* edu forced down: weights 1:3 among the rest, edu never answered. */
	const char *rules[] = {EDU_DOWN, NULL};
	h = fix_health(&f, rules, 0, NULL);
	memset(obs, 0, sizeof(obs));
	for (unsigned i = 0; i < DRAWS; i++)
		obs[dc_pick(&f, h, &rng, 0, NULL) % 3]++;
	double e2[2] = {DRAWS * 0.25, DRAWS * 0.75};
	x = chi2(obs, e2, 2);
	CHECK(obs[2] == 0 && x < chi2_crit[1], "DC weighted without edu: chi2 %.2f, edu %u", x,
	      obs[2]);
	dc_pick(&f, h, &rng, 0, &trace);
	trace_str(&trace, tr);
	CHECK(tr[2] == 'X', "weighted trace marks edu forced down (%s)", tr);
	gslb_health_free(h);
}

static void test_dc_round_robin(void)
{
	fix_t f;
	dcs_init(&f, GSLB_POLICY_ROUND_ROBIN);
	const char *rules[] = {"*/*/unicom/* DOWN", NULL};
	gslb_health_t *h = fix_health(&f, rules, 0, NULL);
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 77);
	unsigned obs[3] = {0}, prev = dc_pick(&f, h, &rng, 0, NULL), repeats = 0;
	for (unsigned i = 0; i < DRAWS; i++) {
		unsigned dc = dc_pick(&f, h, &rng, 0, NULL);
		obs[dc % 3]++;
		repeats += dc == prev;
		prev = dc;
	}
	CHECK(obs[0] == DRAWS / 2 && obs[1] == 0 && obs[2] == DRAWS / 2 && repeats == 0,
	      "DC round-robin alternates the two UP (%u %u %u, %u repeats)", obs[0], obs[1], obs[2],
	      repeats);
	gslb_health_free(h);
}

static void test_dc_persist(void)
{
	fix_t f;
	dcs_init(&f, GSLB_POLICY_PERSIST);
	gslb_health_t *h = fix_health(&f, NULL, 0, NULL);
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 5);
	static uint8_t before[CLIENTS];
	unsigned obs[3] = {0};
	for (unsigned c = 0; c < CLIENTS; c++) {
		before[c] = (uint8_t)dc_pick(&f, h, &rng, client_of(c), NULL);
		obs[before[c] % 3]++;
	}
	double expect[3] = {CLIENTS * 0.1, CLIENTS * 0.3, CLIENTS * 0.6};
	double x = chi2(obs, expect, 3);
	CHECK(x < chi2_crit[2], "DC persist 1:3:6 chi2 %.2f (%u %u %u)", x, obs[0], obs[1], obs[2]);
	gslb_health_free(h);

	const char *rules[] = {"*/*/unicom/* DOWN", NULL};
	h = fix_health(&f, rules, 0, NULL);
	unsigned wrong = 0, moved = 0;
	for (unsigned c = 0; c < CLIENTS; c++) {
		unsigned now = dc_pick(&f, h, &rng, client_of(c), NULL);
		if (before[c] == 1)
			moved += now != 1;
		else
			wrong += now != before[c];
	}
	CHECK(moved == obs[1] && wrong == 0, "DC persist: only unicom's %u clients move (%u, %u)",
	      obs[1], moved, wrong);
	gslb_health_free(h);

	h = fix_health(&f, NULL, 0, NULL);
	unsigned not_back = 0;
	for (unsigned c = 0; c < CLIENTS; c++)
		not_back += dc_pick(&f, h, &rng, client_of(c), NULL) != before[c];
	CHECK(not_back == 0, "DC persist: clients return (%u not)", not_back);
	gslb_health_free(h);
}

/* geo picks the datacenter, weighted inside it: the composition users ask for most. */
static void test_geo_weighted_composition(void)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_GEO, GSLB_ALLDOWN_SERVFAIL);
	f.edu[0].weight = 1;
	f.edu[1].weight = 9;
	f.dcs[2].policy = GSLB_POLICY_WEIGHTED;
	fix_prepare(&f);
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 31);
	uint8_t order[] = {2, 0};
	gslb_policy_query_t q = {.family = AF_INET, .order = order, .order_len = 2};
	unsigned obs[2] = {0}, other = 0;
	for (unsigned i = 0; i < DRAWS; i++) {
		gslb_policy_answer_t ans;
		gslb_policy_select(&f.svc, NULL, &q, &rng, &ans, NULL);
		if (ans.dc != 2 || ans.count != 1)
			other++;
		else
			obs[ans.idx[0] & 1]++;
	}
	double expect[2] = {DRAWS * 0.1, DRAWS * 0.9};
	double x = chi2(obs, expect, 2);
	CHECK(other == 0 && x < chi2_crit[1], "geo + weighted 1:9 in edu: chi2 %.2f (%u %u)", x,
	      obs[0], obs[1]);
}

/* ---- client keys, names, prepare errors, explain ---- */

static void test_client_key(void)
{
	uint8_t a[16] = {192, 0, 2, 1}, b[16] = {192, 0, 2, 200}, c[16] = {192, 0, 3, 1};
	uint8_t v6a[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0x11, 9, 9};
	uint8_t v6b[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0x1f, 7, 7};
	CHECK(gslb_policy_client_key(AF_INET, a, 24) == gslb_policy_client_key(AF_INET, b, 24),
	      "same /24, same key");
	CHECK(gslb_policy_client_key(AF_INET, a, 24) != gslb_policy_client_key(AF_INET, c, 24),
	      "other /24, other key");
	CHECK(gslb_policy_client_key(AF_INET, a, 23) == gslb_policy_client_key(AF_INET, c, 23) &&
	          gslb_policy_client_key(AF_INET, a, 23) != gslb_policy_client_key(AF_INET, a, 24),
	      "prefix length is part of the key");
	CHECK(gslb_policy_client_key(AF_INET, a, 32) != gslb_policy_client_key(AF_INET, b, 32),
	      "host keys differ");
	CHECK(gslb_policy_client_key(AF_INET, a, 99) == gslb_policy_client_key(AF_INET, a, 32),
	      "prefix clamped to the family");
	CHECK(gslb_policy_client_key(AF_INET6, v6a, 56) ==
	          gslb_policy_client_key(AF_INET6, v6b, 56),
	      "same /56");
	CHECK(gslb_policy_client_key(AF_INET6, v6a, 64) !=
	          gslb_policy_client_key(AF_INET6, v6b, 64),
	      "different /64");
	CHECK(gslb_policy_client_key(AF_INET6, a, 32) != gslb_policy_client_key(AF_INET, a, 32),
	      "family is part of the key");
	/* Pinned value: persist choices must not change between versions or platforms, or every
	 * client would move on upgrade. */
	CHECK(gslb_policy_client_key(AF_INET, a, 24) == UINT64_C(0x79651933f5a1ca43),
	      "pinned key: 0x%016llx", (unsigned long long)gslb_policy_client_key(AF_INET, a, 24));
}

static void test_names(void)
{
	for (int k = GSLB_POLICY_FAILOVER; k <= GSLB_POLICY_ALL; k++) {
		gslb_policy_kind_t back;
		const char *name = gslb_policy_kind_name((gslb_policy_kind_t)k);
		CHECK(gslb_policy_kind_parse(name, &back) == 0 && back == (gslb_policy_kind_t)k,
		      "policy %s round trip", name);
	}
	for (int a = GSLB_ALLDOWN_FIRST_DC; a <= GSLB_ALLDOWN_SERVFAIL; a++) {
		gslb_alldown_t back;
		const char *name = gslb_alldown_name((gslb_alldown_t)a);
		CHECK(gslb_alldown_parse(name, &back) == 0 && back == (gslb_alldown_t)a,
		      "all-down %s round trip", name);
	}
	gslb_policy_kind_t k;
	gslb_alldown_t a;
	CHECK(gslb_policy_kind_parse("Round-Robin", &k) == 0 && k == GSLB_POLICY_ROUND_ROBIN,
	      "case-insensitive");
	CHECK(gslb_policy_kind_parse("random", &k) == STEER_EINVAL, "unknown policy");
	CHECK(gslb_alldown_parse("first", &a) == STEER_EINVAL, "unknown all-down");
	CHECK(gslb_policy_kind_dc_level(GSLB_POLICY_GEO) &&
	          !gslb_policy_kind_in_dc(GSLB_POLICY_GEO),
	      "geo is datacenter-level only");
	CHECK(!gslb_policy_kind_dc_level(GSLB_POLICY_MULTI) &&
	          gslb_policy_kind_in_dc(GSLB_POLICY_MULTI),
	      "multi is in-datacenter only");
}

static void mut_no_dcs(fix_t *f)
{
	f->svc.dc_count = 0;
}
static void mut_dc_policy(fix_t *f)
{
	f->svc.policy = GSLB_POLICY_MULTI;
}
static void mut_in_dc_policy(fix_t *f)
{
	f->dcs[1].policy = GSLB_POLICY_GEO;
}
static void mut_multi_zero(fix_t *f)
{
	f->dcs[2].policy = GSLB_POLICY_MULTI;
}
static void mut_weight_zero(fix_t *f)
{
	f->edu[1].weight = 0;
}
static void mut_dc_weight_zero(fix_t *f)
{
	f->dcs[0].weight = 0;
}
static void mut_family(fix_t *f)
{
	f->unicom[0].family = AF_UNIX;
}
static void mut_dup_addr(fix_t *f)
{
	f->edu[1] = f->edu[0];
	f->edu[1].target = 4;
}
static void mut_dup_dc(fix_t *f)
{
	f->dcs[2].name = "TELECOM";
}
static void mut_empty_dc(fix_t *f)
{
	f->dcs[1].addr_count = 0;
}
static void mut_fallback_missing(fix_t *f)
{
	f->svc.all_down = GSLB_ALLDOWN_FALLBACK;
}
static void mut_fallback_both(fix_t *f)
{
	f->svc.all_down = GSLB_ALLDOWN_FALLBACK;
	f->svc.fallback = f->fallback;
	f->svc.fallback_count = 1;
	f->svc.fallback_cname = f->cname;
}
static void mut_fallback_unused(fix_t *f)
{
	f->svc.fallback = f->fallback;
	f->svc.fallback_count = 1;
}
static void mut_fallback_bad_addr(fix_t *f)
{
	f->svc.all_down = GSLB_ALLDOWN_FALLBACK;
	f->fallback[1] = mk_addr("192.0.2.99", 1, 98);
	f->svc.fallback = f->fallback;
	f->svc.fallback_count = 2;
}
static void mut_bad_cname(fix_t *f)
{
	f->svc.all_down = GSLB_ALLDOWN_FALLBACK;
	f->cname[0] = 0xc0; /* a compression pointer is no uncompressed name */
	f->svc.fallback_cname = f->cname;
}
static void mut_ttl(fix_t *f)
{
	f->svc.ttl = UINT32_C(0x80000000);
}
static void mut_no_name(fix_t *f)
{
	f->dcs[0].name = NULL;
}

static void test_prepare_errors(void)
{
	static const struct {
		void (*mutate)(fix_t *);
		const char *err;
	} rows[] = {
	    {mut_no_dcs, "service vpn.example.test: needs 1..64 datacenters"},
	    {mut_dc_policy, "service vpn.example.test: policy multi cannot pick datacenters"},
	    {mut_in_dc_policy,
	     "service vpn.example.test, datacenter unicom: policy geo cannot pick "
	     "addresses inside a datacenter"},
	    {mut_multi_zero,
	     "service vpn.example.test, datacenter edu: multi needs a count of 1..64"},
	    {mut_weight_zero,
	     "service vpn.example.test, datacenter edu: address 192.0.2.11: weight "
	     "must be 1..65535"},
	    {mut_dc_weight_zero, "service vpn.example.test, datacenter telecom: weight must be "
	                         "1..65535"},
	    {mut_family, "service vpn.example.test, datacenter unicom: address 0 has no IPv4/IPv6 "
	                 "family"},
	    {mut_dup_addr, "service vpn.example.test, datacenter edu: address 192.0.2.10 listed "
	                   "twice"},
	    {mut_dup_dc, "service vpn.example.test, datacenter TELECOM: datacenter listed twice"},
	    {mut_empty_dc,
	     "service vpn.example.test, datacenter unicom: needs 1..64 addresses, has "
	     "0"},
	    {mut_fallback_missing, "service vpn.example.test: all-down fallback needs either "
	                           "addresses or a CNAME target"},
	    {mut_fallback_both,
	     "service vpn.example.test: all-down fallback needs either addresses "
	     "or a CNAME target"},
	    {mut_fallback_unused, "service vpn.example.test: fallback given but all-down policy is "
	                          "first-datacenter"},
	    {mut_fallback_bad_addr, "service vpn.example.test, fallback: address 192.0.2.99 listed "
	                            "twice"},
	    {mut_bad_cname, "service vpn.example.test: invalid fallback CNAME target"},
	    {mut_ttl, "service vpn.example.test: ttl above 2147483647"},
	    {mut_no_name, "service vpn.example.test: datacenter 0 has no name"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		fix_t f;
		fix_init(&f, GSLB_POLICY_FAILOVER, GSLB_ALLDOWN_FIRST_DC);
		rows[i].mutate(&f);
		char err[256] = "";
		int ret = gslb_policy_svc_prepare(&f.svc, err, sizeof(err));
		CHECK(ret == STEER_ECONF && !strcmp(err, rows[i].err), "prepare row %zu: %d '%s'",
		      i, ret, err);
	}
}

static void test_explain(void)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_FAILOVER, GSLB_ALLDOWN_FIRST_DC);
	fix_prepare(&f);
	const char *rules[] = {TELECOM_DOWN, NULL};
	uint32_t caps[FIX_TARGETS] = {0, 0, 12};
	gslb_health_t *h = fix_health(&f, rules, 0, caps);
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 1);
	gslb_policy_query_t q = {.family = AF_INET};
	gslb_policy_answer_t ans;
	gslb_policy_trace_t trace;
	gslb_policy_select(&f.svc, h, &q, &rng, &ans, &trace);
	char buf[1024];
	int n = gslb_policy_explain(&f.svc, &q, &ans, &trace, buf, sizeof(buf));
	const char *want = "service vpn.example.test: policy failover, IPv4 query, all-down "
	                   "first-datacenter\n"
	                   "  1. telecom: all forced DOWN (0/1 up, 1 forced down)\n"
	                   "  2. unicom: chosen (1/1 up), in-datacenter all\n"
	                   "  3. edu: not examined\n"
	                   "answer: 203.0.113.10 (datacenter unicom)\n"
	                   "ttl: 12 (service 30, capped by health)\n";
	CHECK(!strcmp(buf, want) && n == (int)strlen(want), "explain:\n%s", buf);
	char small[20];
	n = gslb_policy_explain(&f.svc, &q, &ans, &trace, small, sizeof(small));
	CHECK(n == (int)strlen(want) && strlen(small) == sizeof(small) - 1 &&
	          !strncmp(small, want, sizeof(small) - 1),
	      "explain truncates and reports the full length");
	gslb_health_free(h);

	/* AAAA with everything down and a CNAME fallback. */
	fix_init(&f, GSLB_POLICY_GEO, GSLB_ALLDOWN_FALLBACK);
	f.svc.fallback_cname = f.cname;
	fix_prepare(&f);
	const char *all[] = {"* DOWN", NULL};
	h = fix_health(&f, all, 0, NULL);
	uint8_t order[] = {1, 0};
	q = (gslb_policy_query_t){.family = AF_INET6, .order = order, .order_len = 2};
	gslb_policy_select(&f.svc, h, &q, &rng, &ans, &trace);
	gslb_policy_explain(&f.svc, &q, &ans, &trace, buf, sizeof(buf));
	want = "service vpn.example.test: policy geo, IPv6 query, all-down fallback\n"
	       "  1. unicom: no IPv6 addresses\n"
	       "  2. telecom: all forced DOWN (0/1 up, 1 forced down)\n"
	       "all datacenters down: all-down policy fallback\n"
	       "answer: CNAME down.example.test.\n"
	       "ttl: 30\n";
	CHECK(!strcmp(buf, want), "explain all-down:\n%s", buf);
	gslb_health_free(h);
}

/* A health table built for an older config (fewer targets) must not break selection. */
static void test_short_health_table(void)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_FAILOVER, GSLB_ALLDOWN_SERVFAIL);
	fix_prepare(&f);
	gslb_health_t *h = gslb_health_new(1);
	CHECK(gslb_health_set_monitor(h, 0, GSLB_STTL_DOWN) == 0, "down 0");
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 1);
	gslb_policy_query_t q = {.family = AF_INET};
	gslb_policy_answer_t ans;
	gslb_policy_select(&f.svc, h, &q, &rng, &ans, NULL);
	CHECK(ans.kind == GSLB_ANSWER_ADDRS && ans.dc == 1, "targets beyond the table are UP");
	gslb_health_free(h);
}

int main(void)
{
	test_select_rows();
	test_no_health_and_v4_only();
	test_ttl();
	test_in_dc_weighted();
	test_in_dc_weight_overrides();
	test_in_dc_round_robin();
	test_in_dc_multi();
	test_in_dc_all_and_failover();
	test_in_dc_persist();
	test_dc_weighted();
	test_dc_round_robin();
	test_dc_persist();
	test_geo_weighted_composition();
	test_client_key();
	test_names();
	test_prepare_errors();
	test_explain();
	test_short_health_table();
	return unit_finish("test_policy");
}
