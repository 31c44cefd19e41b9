/*
 * Unit tests of the load policies' state (src/gslb/steer.c): aggregation of the health table's
 * load values per datacenter and family (UP addresses only, missing values by weight share),
 * the order each load policy gives, and its hysteresis (margin, rounds, no count without a new
 * round, ±15 % jitter never flipping the answer).
 */
#include <arpa/inet.h>
#include <math.h>
#include <string.h>

#include "gslb/health.h"
#include "gslb/policy.h"
#include "gslb/steer.h"
#include "unit.h"

/* ---- fixture: datacenters a, b, c; a and b with two IPv4 addresses, c with one ---- */

#define TARGETS 5

typedef struct {
	gslb_policy_addr_t addrs[TARGETS];
	gslb_policy_dc_t dcs[3];
	gslb_policy_svc_t svc;
	const gslb_policy_svc_t *list[1];
} fix_t;

static void fix_init(fix_t *f, gslb_policy_kind_t policy)
{
	static const char *const names[3] = {"a", "b", "c"};
	static const uint8_t first[3] = {0, 2, 4}, count[3] = {2, 2, 1};
	memset(f, 0, sizeof(*f));
	for (unsigned t = 0; t < TARGETS; t++) {
		char text[32];
		snprintf(text, sizeof(text), "192.0.2.%u", 10 + t);
		f->addrs[t] = (gslb_policy_addr_t){.family = AF_INET, .weight = 1, .target = t};
		inet_pton(AF_INET, text, f->addrs[t].addr);
	}
	for (unsigned d = 0; d < 3; d++)
		f->dcs[d] = (gslb_policy_dc_t){.name = names[d],
		                               .addrs = &f->addrs[first[d]],
		                               .addr_count = count[d],
		                               .policy = GSLB_POLICY_ALL,
		                               .weight = 1};
	f->svc = (gslb_policy_svc_t){.name = "www.example.test",
	                             .dcs = f->dcs,
	                             .dc_count = 3,
	                             .policy = policy,
	                             .fallback_policy = GSLB_POLICY_FAILOVER,
	                             .all_down = GSLB_ALLDOWN_NODATA,
	                             .ttl = 30};
	char err[256] = "";
	CHECK(gslb_policy_svc_prepare(&f->svc, err, sizeof(err)) == 0, "prepare: %s", err);
	f->list[0] = &f->svc;
}

static void set_load(gslb_health_t *h, uint32_t t, unsigned kind, float v, uint32_t round)
{
	gslb_load_t l = {0};
	const gslb_load_t *old = gslb_health_load(h, t);
	if (old)
		l = *old;
	l.v[kind] = v;
	l.have |= (uint8_t)(1u << kind);
	l.round = round;
	l.age_ms = 1000;
	CHECK(gslb_health_set_load(h, t, &l) == 0, "set load %u", t);
}

static const gslb_steer_opts_t opts = {.margin_pct = 20, .rounds = 2};

/* The order as names, e.g. "ba". */
static void order_str(const fix_t *f, const gslb_steer_order_t *o, char *out)
{
	for (unsigned i = 0; i < o->n; i++)
		out[i] = f->dcs[o->order[i]].name[0];
	out[o->n] = '\0';
}

static void test_aggregate(void)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_LEAST_CONNECTIONS);
	gslb_health_t *h = gslb_health_new(TARGETS);
	set_load(h, 0, GSLB_LOAD_CONNECTIONS, 100, 1);
	/* target 1 (a's second) has no value: counts a's average by weight, 100 */
	set_load(h, 2, GSLB_LOAD_CONNECTIONS, 30, 1);
	set_load(h, 3, GSLB_LOAD_CONNECTIONS, 50, 1);
	CHECK(gslb_health_set_monitor(h, 3, gslb_sttl_make(true, 0)) == 0, "b's second DOWN");
	gslb_steer_t *st = gslb_steer_build(NULL, f.list, 1, h, &opts);
	const gslb_steer_dc_t *a = gslb_steer_dc(st, 0, AF_INET, 0);
	const gslb_steer_dc_t *b = gslb_steer_dc(st, 0, AF_INET, 1);
	const gslb_steer_dc_t *c = gslb_steer_dc(st, 0, AF_INET, 2);
	CHECK(fabsf(a->v[GSLB_LOAD_CONNECTIONS] - 200) < 0.01f && a->estimated == 1 && a->up == 2,
	      "a: 100 + 100 by weight share, got %.1f (%u estimated)",
	      (double)a->v[GSLB_LOAD_CONNECTIONS], a->estimated);
	CHECK(fabsf(b->v[GSLB_LOAD_CONNECTIONS] - 30) < 0.01f && b->up == 1,
	      "b: only its UP address counts, got %.1f", (double)b->v[GSLB_LOAD_CONNECTIONS]);
	CHECK(c->have == 0 && c->up == 1, "c: no values");
	const gslb_steer_order_t *o = gslb_steer_order(st, 0, AF_INET);
	char s[8];
	order_str(&f, o, s);
	CHECK(strcmp(s, "ba") == 0, "least connections: b then a, c has no data: %s", s);
	CHECK(gslb_steer_order(st, 0, AF_INET6)->n == 0, "no IPv6 addresses: no order");
	gslb_steer_free(st);
	gslb_health_free(h);
}

static void test_kinds(void)
{
	static const struct {
		gslb_policy_kind_t kind;
		const char *want;
	} rows[] = {
	    {GSLB_POLICY_LEAST_CONNECTIONS, "cab"},
	    {GSLB_POLICY_CAPACITY, "bac"},
	    {GSLB_POLICY_PACKET_RATE, "bca"},
	    {GSLB_POLICY_KBPS, "acb"},
	};
	/* per datacenter (one value on its first address): connections, capacity, pps, kbps */
	static const float vals[3][4] = {
	    {200, 1000, 900, 10}, /* a: spare 800 */
	    {300, 2000, 100, 90}, /* b: spare 1700 */
	    {100, 150, 500, 50},  /* c: spare 50 */
	};
	static const unsigned kinds[4] = {GSLB_LOAD_CONNECTIONS, GSLB_LOAD_CAPACITY,
	                                  GSLB_LOAD_PACKET_RATE, GSLB_LOAD_KBPS};
	static const uint32_t first[3] = {0, 2, 4};
	for (size_t r = 0; r < STEER_ARRAY_LEN(rows); r++) {
		fix_t f;
		fix_init(&f, rows[r].kind);
		gslb_health_t *h = gslb_health_new(TARGETS);
		for (unsigned d = 0; d < 3; d++) {
			for (unsigned k = 0; k < 4; k++)
				set_load(h, first[d], kinds[k], vals[d][k], 1);
			/* the second addresses: the same values, so the sums double evenly */
			if (d < 2)
				for (unsigned k = 0; k < 4; k++)
					set_load(h, first[d] + 1, kinds[k], vals[d][k], 1);
		}
		gslb_steer_t *st = gslb_steer_build(NULL, f.list, 1, h, &opts);
		char s[8];
		order_str(&f, gslb_steer_order(st, 0, AF_INET), s);
		/* c has one address: its sums are half of what two would give */
		CHECK(strcmp(s, rows[r].want) == 0, "%s: order %s, want %s",
		      gslb_policy_kind_name(rows[r].kind), s, rows[r].want);
		gslb_steer_free(st);
		gslb_health_free(h);
	}
}

/* One round: a's and b's connections (first addresses only; second ones DOWN). */
static gslb_steer_t *round_with(const fix_t *f, const gslb_steer_t *prev, float a, float b,
                                uint32_t round)
{
	gslb_health_t *h = gslb_health_new(TARGETS);
	CHECK(gslb_health_set_monitor(h, 1, gslb_sttl_make(true, 0)) == 0, "a2 down");
	CHECK(gslb_health_set_monitor(h, 3, gslb_sttl_make(true, 0)) == 0, "b2 down");
	CHECK(gslb_health_set_monitor(h, 4, gslb_sttl_make(true, 0)) == 0, "c down");
	set_load(h, 0, GSLB_LOAD_CONNECTIONS, a, round);
	set_load(h, 2, GSLB_LOAD_CONNECTIONS, b, round);
	gslb_steer_t *st = gslb_steer_build(prev, f->list, 1, h, &opts);
	gslb_health_free(h);
	return st;
}

static char first_dc(const fix_t *f, const gslb_steer_t *st)
{
	const gslb_steer_order_t *o = gslb_steer_order(st, 0, AF_INET);
	return o->n ? f->dcs[o->order[0]].name[0] : '-';
}

static void test_hysteresis(void)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_LEAST_CONNECTIONS);
	gslb_steer_t *st = round_with(&f, NULL, 100, 110, 1);
	CHECK(first_dc(&f, st) == 'a', "a starts best");
	/* b 10 % better: not enough */
	gslb_steer_t *n = round_with(&f, st, 100, 91, 2);
	gslb_steer_free(st);
	st = n;
	CHECK(first_dc(&f, st) == 'a', "a held: b only 9 %% lower");
	CHECK(gslb_steer_order(st, 0, AF_INET)->challenger == GSLB_POLICY_DC_NONE, "no challenger");
	/* b 50 % better, one round */
	n = round_with(&f, st, 100, 50, 3);
	gslb_steer_free(st);
	st = n;
	const gslb_steer_order_t *o = gslb_steer_order(st, 0, AF_INET);
	CHECK(first_dc(&f, st) == 'a' && o->challenger == 1 && o->streak == 1,
	      "a held after one round: challenger %u streak %u", o->challenger, o->streak);
	CHECK(gslb_steer_pending(st), "a challenger counting is pending");
	/* the same round again (an override rebuilt the view): no count */
	n = round_with(&f, st, 100, 50, 3);
	gslb_steer_free(st);
	st = n;
	o = gslb_steer_order(st, 0, AF_INET);
	CHECK(first_dc(&f, st) == 'a' && o->streak == 1, "no new round: streak stays %u",
	      o->streak);
	/* second round: b takes over */
	n = round_with(&f, st, 100, 50, 4);
	gslb_steer_free(st);
	st = n;
	CHECK(first_dc(&f, st) == 'b', "b after two rounds");
	CHECK(!gslb_steer_pending(st), "nothing pending after the switch");
	/* a back to better by a little: b stays */
	n = round_with(&f, st, 45, 50, 5);
	gslb_steer_free(st);
	st = n;
	CHECK(first_dc(&f, st) == 'b', "b held: a only 10 %% better");
	/* one beating round, then one not: the streak restarts */
	n = round_with(&f, st, 10, 50, 6);
	gslb_steer_free(st);
	st = n;
	n = round_with(&f, st, 48, 50, 7);
	gslb_steer_free(st);
	st = n;
	n = round_with(&f, st, 10, 50, 8);
	gslb_steer_free(st);
	st = n;
	CHECK(first_dc(&f, st) == 'b', "interrupted streak: b held");
	/* the health is republished on changes only: rounds between two builds count too */
	n = round_with(&f, st, 10, 50, 20);
	gslb_steer_free(st);
	st = n;
	CHECK(first_dc(&f, st) == 'a', "a back after rounds 8..20 all saw it 80 %% ahead");
	CHECK(gslb_steer_order(st, 0, AF_INET)->challenger == GSLB_POLICY_DC_NONE,
	      "no challenger left");
	gslb_steer_free(st);
}

/* Two datacenters 30 % apart with ±15 % jitter each round: the answer never flips back and
 * forth; with equal loads and the same jitter it stays where it started. */
static unsigned jitter_switches(float a, float b, unsigned rounds)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_LEAST_CONNECTIONS);
	uint64_t rng = 12345;
	gslb_steer_t *st = round_with(&f, NULL, a, b, 1);
	char start = first_dc(&f, st);
	unsigned flips = 0;
	char last = start;
	for (uint32_t r = 2; r < rounds; r++) {
		float j[2];
		for (int i = 0; i < 2; i++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			j[i] = 0.85f + 0.30f * (float)(rng >> 40) / (float)(1u << 24);
		}
		gslb_steer_t *n = round_with(&f, st, a * j[0], b * j[1], r);
		gslb_steer_free(st);
		st = n;
		char now = first_dc(&f, st);
		flips += now != last;
		last = now;
	}
	gslb_steer_free(st);
	return flips;
}

static void test_jitter(void)
{
	/* 30 % apart: jitter of ±15 % never lets the worse one look 20 % better */
	unsigned flips = jitter_switches(100, 130, 500);
	CHECK(flips == 0, "30 %% apart with ±15 %% jitter: %u switches in 500 rounds", flips);
	/* equal loads: a switch needs the challenger 20 % ahead twice in a row, which ±15 %
	 * jitter allows rarely; what must not happen is a flip every round or two */
	flips = jitter_switches(100, 100, 500);
	CHECK(flips <= 10, "equal loads with ±15 %% jitter: %u switches in 500 rounds", flips);
}

/* A reload keeps who is sticky (datacenters matched by name, in a new order) and counts the
 * new monitors' rounds afresh. */
static void test_reload(void)
{
	fix_t f;
	fix_init(&f, GSLB_POLICY_LEAST_CONNECTIONS);
	gslb_steer_t *st = round_with(&f, NULL, 100, 50, 1);
	CHECK(first_dc(&f, st) == 'b', "b sticky before the reload");
	/* the reloaded service lists c, a, b */
	fix_t g;
	fix_init(&g, GSLB_POLICY_LEAST_CONNECTIONS);
	gslb_policy_dc_t a = g.dcs[0], b = g.dcs[1], c = g.dcs[2];
	g.dcs[0] = c;
	g.dcs[1] = a;
	g.dcs[2] = b;
	size_t from[1] = {0};
	gslb_steer_t *carried = gslb_steer_remap(st, g.list, 1, f.list, from);
	CHECK(gslb_steer_order(carried, 0, AF_INET)->sticky == 2, "b is index 2 now");
	/* a (index 1) is far ahead, with round counters that restarted low */
	gslb_health_t *h = gslb_health_new(TARGETS);
	set_load(h, 0, GSLB_LOAD_CONNECTIONS, 10, 1);
	set_load(h, 1, GSLB_LOAD_CONNECTIONS, 10, 1);
	set_load(h, 2, GSLB_LOAD_CONNECTIONS, 50, 1);
	set_load(h, 3, GSLB_LOAD_CONNECTIONS, 50, 1);
	set_load(h, 4, GSLB_LOAD_CONNECTIONS, 90, 1);
	gslb_steer_t *n = gslb_steer_build(carried, g.list, 1, h, &opts);
	const gslb_steer_order_t *o = gslb_steer_order(n, 0, AF_INET);
	CHECK(o->order[0] == 2 && o->challenger == 1 && o->streak == 1,
	      "after the reload: b held, a counts one round (first %u, challenger %u, streak %u)",
	      o->order[0], o->challenger, o->streak);
	gslb_health_free(h);
	gslb_steer_free(n);
	gslb_steer_free(carried);
	gslb_steer_free(st);
}

int main(void)
{
	test_aggregate();
	test_kinds();
	test_hysteresis();
	test_jitter();
	test_reload();
	return unit_finish("test_gslb_policy_load");
}
