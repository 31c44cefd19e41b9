/*
 * Unit tests for gslb/paths.c: lookup of every row and of near misses against a brute-force
 * list, folding of finer agent rows, staleness of cells and whole tables, the max_rows cap,
 * column mapping, bad options, and the hysteresis of the sticky best (margin, minimum
 * difference, changed rounds only, resets, a sticky best that loses its data).
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/alloc.h"
#include "gslb/paths.h"
#include "unit.h"

#define NOW_MS 1764660000000ull
#define MAXR   64

/* A site table under construction. */
typedef struct {
	gslb_path_row_t r4[MAXR], r6[MAXR];
	gslb_path_table_t t;
} site_t;

static void site_init(site_t *s, const char *name, uint64_t generated_ms)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->t.name, sizeof(s->t.name), "%s", name);
	s->t.generated_ms = generated_ms;
	s->t.rows4 = s->r4;
	s->t.rows6 = s->r6;
}

/* Add "a.b.c.d/len" or "x::/len" (rows must be added in order). */
static void add(site_t *s, const char *cidr, uint16_t rtt, uint16_t age_s)
{
	char text[64];
	snprintf(text, sizeof(text), "%s", cidr);
	char *slash = strchr(text, '/');
	unsigned plen = (unsigned)atoi(slash + 1);
	*slash = '\0';
	uint8_t a[16];
	bool v6 = strchr(text, ':') != NULL;
	if (inet_pton(v6 ? AF_INET6 : AF_INET, text, a) != 1)
		abort();
	gslb_path_row_t r = {.prefix = gslb_pathfmt_key(v6 ? AF_INET6 : AF_INET, a, plen),
	                     .plen = (uint8_t)plen,
	                     .loss = 5,
	                     .rtt = rtt,
	                     .hops = 9,
	                     .answered = rtt == GSLB_PATHFMT_RTT_NONE ? 0 : 3,
	                     .age_s = age_s};
	if (v6)
		s->r6[s->t.n6++] = r;
	else
		s->r4[s->t.n4++] = r;
	char err[128];
	if (gslb_pathfmt_check_table(&s->t, err, sizeof(err)) != 0) {
		printf("bad test table: %s\n", err);
		abort();
	}
}

static const size_t dcs[4] = {3, 0, 5, 1}; /* column -> datacenter index */

static gslb_paths_opts_t opts(size_t n_columns)
{
	return (gslb_paths_opts_t){.ipv4_prefix = 24,
	                           .ipv6_prefix = 48,
	                           .path_ttl_s = 2400,
	                           .max_rows = 1000000,
	                           .margin_pct = 20,
	                           .min_difference_100us = 100,
	                           .rounds = 2,
	                           .column_dc = dcs,
	                           .n_columns = n_columns,
	                           .n_datacenters = 6};
}

static gslb_paths_t *build(const gslb_paths_t *prev, site_t **sites, const bool *changed,
                           const gslb_paths_opts_t *o, uint64_t now)
{
	gslb_paths_site_t in[4] = {{0}};
	for (size_t i = 0; i < o->n_columns; i++) {
		in[i].table = sites[i] ? &sites[i]->t : NULL;
		in[i].fetched_ms = now;
		in[i].changed = changed ? changed[i] : true;
	}
	char err[160] = "";
	gslb_paths_t *p = gslb_paths_build(prev, in, o, now, err, sizeof(err));
	if (!p) {
		printf("build failed: %s\n", err);
		abort();
	}
	return p;
}

static bool find(const gslb_paths_t *p, const char *addr, uint32_t *row)
{
	uint8_t a[16];
	bool v6 = strchr(addr, ':') != NULL;
	if (inet_pton(v6 ? AF_INET6 : AF_INET, addr, a) != 1)
		abort();
	return gslb_paths_lookup(p, v6 ? AF_INET6 : AF_INET, a, row);
}

static gslb_path_cell_t cell_of(const gslb_paths_t *p, const char *addr, unsigned column)
{
	uint32_t row;
	if (!find(p, addr, &row))
		return (gslb_path_cell_t){.rtt = 0, .empty = true};
	return gslb_paths_cell(p, row, column);
}

static unsigned best_of(const gslb_paths_t *p, const char *addr)
{
	uint32_t row;
	return find(p, addr, &row) ? gslb_paths_row_best(p, row) : 999;
}

/* ---- lookup ------------------------------------------------------------------------------ */

static uint64_t rng_state = 12345;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int cmp_row(const void *a, const void *b)
{
	const gslb_path_row_t *x = a, *y = b;
	return x->prefix < y->prefix ? -1 : x->prefix > y->prefix;
}

/* Random sorted unique rows at /24 (/48), clustered so buckets hold many keys. */
static size_t random_rows(gslb_path_row_t *rows, size_t n, bool v6)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t k = rng();
		if (!v6)
			k = (i % 3 ? 0x0a000000ull | (k & 0xffff00) : (k >> 32) & 0xffffff00u)
			    << 32;
		else
			k = (i % 2 ? 0x20010db800000000ull | (k & 0xffffff0000ull) : k) &
			    ~0xffffull;
		rows[i] = (gslb_path_row_t){
		    .prefix = k, .plen = v6 ? 48 : 24, .rtt = (uint16_t)(rng() % 5000), .age_s = 1};
		if (!v6 && rows[i].prefix >> 56 < 8)
			rows[i].prefix |= 0x08ull << 56;
	}
	qsort(rows, n, sizeof(*rows), cmp_row);
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		if (out == 0 || rows[out - 1].prefix != rows[i].prefix)
			rows[out++] = rows[i];
	}
	return out;
}

static void key_to_addr(uint64_t key, bool v6, uint8_t addr[16])
{
	memset(addr, 0, 16);
	for (unsigned i = 0; i < (v6 ? 8u : 4u); i++)
		addr[i] = (uint8_t)(key >> (56 - 8 * i));
}

static bool in_rows(const gslb_path_row_t *rows, size_t n, uint64_t key)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (rows[mid].prefix < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && rows[lo].prefix == key;
}

static void test_lookup(void)
{
	enum { N = 20000 };
	gslb_path_row_t *r4 = xmalloc(N * sizeof(*r4)), *r6 = xmalloc(N * sizeof(*r6));
	gslb_path_table_t t = {.name = "dc", .generated_ms = NOW_MS, .rows4 = r4, .rows6 = r6};
	t.n4 = random_rows(r4, N, false);
	t.n6 = random_rows(r6, N, true);
	char err[128] = "";
	CHECK(gslb_pathfmt_check_table(&t, err, sizeof(err)) == 0, "random table: %s", err);
	gslb_paths_site_t site = {.table = &t, .changed = true};
	gslb_paths_opts_t o = opts(1);
	gslb_paths_t *p = gslb_paths_build(NULL, &site, &o, NOW_MS, err, sizeof(err));
	CHECK(p != NULL, "build: %s", err);
	if (!p)
		return;
	gslb_paths_info_t info;
	gslb_paths_info(p, &info);
	CHECK(info.rows4 == t.n4 && info.rows6 == t.n6, "rows %zu/%zu of %zu/%zu", info.rows4,
	      info.rows6, t.n4, t.n6);
	CHECK(info.cells == t.n4 + t.n6, "cells %zu", info.cells);
	size_t wrong = 0, misses = 0;
	for (int v6 = 0; v6 < 2; v6++) {
		const gslb_path_row_t *rows = v6 ? r6 : r4;
		size_t n = v6 ? t.n6 : t.n4;
		uint64_t step = v6 ? 1ull << 16 : 1ull << 40;
		for (size_t i = 0; i < n; i++) {
			uint8_t a[16];
			uint32_t row;
			key_to_addr(rows[i].prefix | (v6 ? 0xabcd : 0x3full << 32), v6 != 0, a);
			if (!gslb_paths_lookup(p, v6 ? AF_INET6 : AF_INET, a, &row) ||
			    gslb_paths_cell(p, row, 0).rtt != rows[i].rtt) {
				wrong++;
				continue;
			}
			int fam;
			uint8_t back[16], want[16];
			unsigned plen;
			gslb_paths_row_prefix(p, row, &fam, back, &plen);
			key_to_addr(rows[i].prefix, v6 != 0, want);
			if (fam != (v6 ? AF_INET6 : AF_INET) || plen != (v6 ? 48u : 24u) ||
			    memcmp(back, want, 16) != 0)
				wrong++;
			/* The neighbours either side are rows only when the list says so. */
			for (int d = -1; d <= 1; d += 2) {
				uint64_t k = rows[i].prefix + (uint64_t)d * step;
				key_to_addr(k, v6 != 0, a);
				bool hit = gslb_paths_lookup(p, v6 ? AF_INET6 : AF_INET, a, &row);
				if (hit != in_rows(rows, n, k))
					misses++;
			}
		}
	}
	CHECK(wrong == 0, "%zu rows not found or wrong", wrong);
	CHECK(misses == 0, "%zu neighbours answered wrongly", misses);
	uint8_t a[16] = {0};
	uint32_t row;
	key_to_addr(r4[0].prefix, false, a);
	CHECK(gslb_paths_lookup(p, AF_INET6, a, &row) ==
	          in_rows(r6, t.n6, gslb_pathfmt_key(AF_INET6, a, 48)),
	      "an IPv4 address read as IPv6 is looked up as IPv6");
	CHECK(!gslb_paths_lookup(p, AF_UNIX, a, &row), "other family");
	uint8_t lo4[4] = {0, 0, 0, 1}, hi4[4] = {255, 255, 255, 255};
	CHECK(!gslb_paths_lookup(p, AF_INET, lo4, &row), "below the first row");
	CHECK(!gslb_paths_lookup(p, AF_INET, hi4, &row), "above the last row");
	gslb_paths_unref(p);

	/* One row, and no rows at all. */
	t.n4 = 1;
	t.n6 = 0;
	p = gslb_paths_build(NULL, &site, &o, NOW_MS, err, sizeof(err));
	key_to_addr(r4[0].prefix, false, a);
	CHECK(gslb_paths_lookup(p, AF_INET, a, &row) && row == 0, "single row");
	CHECK(!gslb_paths_lookup(p, AF_INET6, a, &row), "no IPv6 rows");
	gslb_paths_unref(p);
	site.table = NULL;
	p = gslb_paths_build(NULL, &site, &o, NOW_MS, err, sizeof(err));
	CHECK(p && !gslb_paths_lookup(p, AF_INET, a, &row), "empty table");
	gslb_paths_unref(p);
	free(r4);
	free(r6);
}

/* ---- folding, staleness, columns, max_rows ------------------------------------------------ */

static void test_fold(void)
{
	site_t a, b;
	site_init(&a, "a", NOW_MS);
	add(&a, "10.0.0.0/16", 1, 0); /* coarser than /24: skipped */
	add(&a, "10.0.0.0/25", 300, 5);
	add(&a, "10.0.0.128/26", 200, 9);
	add(&a, "10.0.0.192/26", 200, 4); /* same RTT, fresher: wins */
	add(&a, "10.0.1.0/24", GSLB_PATHFMT_RTT_NONE, 0);
	add(&a, "10.0.1.0/25", 700, 0);
	add(&a, "2001:db8::/56", 90, 0);
	add(&a, "2001:db8:0:100::/56", 80, 0);
	site_init(&b, "b", NOW_MS);
	add(&b, "10.0.0.0/24", 400, 1);
	add(&b, "10.0.2.0/24", GSLB_PATHFMT_RTT_NONE, 0);
	site_t *sites[2] = {&a, &b};
	gslb_paths_opts_t o = opts(2);
	gslb_paths_t *p = build(NULL, sites, NULL, &o, NOW_MS);
	gslb_paths_info_t info;
	gslb_paths_info(p, &info);
	CHECK(info.rows4 == 3 && info.rows6 == 1, "rows %zu + %zu", info.rows4, info.rows6);
	CHECK(info.coarse_skipped == 1, "coarse rows %zu", info.coarse_skipped);
	gslb_path_cell_t c = cell_of(p, "10.0.0.77", 0);
	CHECK(!c.empty && c.rtt == 200 && c.age_s == 4 && c.hops == 9 && c.loss == 5,
	      "folded /24: rtt %u age %u", c.rtt, c.age_s);
	c = cell_of(p, "10.0.0.1", 1);
	CHECK(!c.empty && c.rtt == 400, "column b: %u", c.rtt);
	c = cell_of(p, "10.0.1.9", 0);
	CHECK(!c.empty && c.rtt == 700, "a reply beats no reply: %u", c.rtt);
	c = cell_of(p, "10.0.1.9", 1);
	CHECK(c.empty, "b has no 10.0.1.0/24");
	c = cell_of(p, "10.0.2.3", 1);
	CHECK(!c.empty && c.rtt == GSLB_PATHFMT_RTT_NONE, "never answered is data, not empty");
	CHECK(best_of(p, "10.0.2.3") == GSLB_PATHS_NO_COLUMN, "no best without an RTT");
	CHECK(best_of(p, "10.0.0.3") == 0, "best is the lowest RTT");
	c = cell_of(p, "2001:db8::1", 0);
	CHECK(!c.empty && c.rtt == 80, "IPv6 /56 folded into /48: %u", c.rtt);
	CHECK(gslb_paths_cell(p, 0, 7).empty && gslb_paths_cell(p, 0, 255).empty,
	      "columns beyond the table are empty");
	CHECK(gslb_paths_columns(p) == 2 && gslb_paths_column_dc(p, 1) == 0, "column datacenters");
	CHECK(gslb_paths_column(p, 3) == 0 && gslb_paths_column(p, 0) == 1 &&
	          gslb_paths_column(p, 5) == GSLB_PATHS_NO_COLUMN &&
	          gslb_paths_column(p, 99) == GSLB_PATHS_NO_COLUMN,
	      "datacenter columns");
	CHECK(gslb_paths_prefix_len(p, AF_INET) == 24 && gslb_paths_prefix_len(p, AF_INET6) == 48,
	      "prefix lengths");
	gslb_paths_unref(p);

	/* /16 rows at a /16 granularity: the /24s fold into them. */
	o.ipv4_prefix = 16;
	p = build(NULL, sites, NULL, &o, NOW_MS);
	c = cell_of(p, "10.0.200.1", 0);
	CHECK(!c.empty && c.rtt == 1, "/16 row: %u", c.rtt);
	gslb_paths_info(p, &info);
	CHECK(info.rows4 == 1 && info.coarse_skipped == 0, "one /16 row");
	gslb_paths_unref(p);
}

static void test_stale(void)
{
	site_t a, b;
	site_init(&a, "a", NOW_MS - 100 * 1000);
	add(&a, "10.0.0.0/24", 100, 2300); /* 2400 s old at build: still fresh */
	add(&a, "10.0.1.0/24", 100, 2301); /* 2401 s: stale */
	add(&a, "10.0.2.0/24", 100, 0);
	add(&a, "10.0.3.0/24", 100, 900);
	site_init(&b, "b", NOW_MS - 2401 * 1000); /* the whole table is stale */
	add(&b, "10.0.0.0/24", 50, 0);
	add(&b, "10.0.9.0/24", 50, 0);
	site_t *sites[2] = {&a, &b};
	gslb_paths_opts_t o = opts(2);
	gslb_paths_t *p = build(NULL, sites, NULL, &o, NOW_MS);
	gslb_path_cell_t c = cell_of(p, "10.0.0.1", 0);
	CHECK(!c.empty && c.age_s >= 2400 && c.age_s <= 2400 + 2300 / 16, "age %u", c.age_s);
	c = cell_of(p, "10.0.2.1", 0);
	CHECK(!c.empty && c.age_s == 100, "age 100 is kept within 1/16: %u", c.age_s);
	c = cell_of(p, "10.0.3.1", 0);
	CHECK(c.age_s >= 1000 && c.age_s <= 1000 + 900 / 16, "age 1000 within 1/16: %u", c.age_s);
	uint32_t row;
	CHECK(!find(p, "10.0.1.1", &row), "a row with only stale cells is no row");
	CHECK(!find(p, "10.0.9.1", &row), "a stale table contributes nothing");
	CHECK(cell_of(p, "10.0.0.1", 1).empty, "stale table's cell is empty");
	gslb_paths_info_t info;
	gslb_paths_info(p, &info);
	CHECK(info.rows4 == 3 && info.cells == 3, "rows %zu cells %zu", info.rows4, info.cells);
	gslb_paths_unref(p);

	/* An agent clock ahead of ours: ages never go negative. */
	site_init(&a, "a", NOW_MS + 60000);
	add(&a, "10.0.0.0/24", 100, 3);
	sites[1] = NULL;
	p = build(NULL, sites, NULL, &o, NOW_MS);
	c = cell_of(p, "10.0.0.1", 0);
	CHECK(!c.empty && c.age_s == 3, "future table: age %u", c.age_s);
	gslb_paths_unref(p);
}

/* A column reused from the previous table equals the one built from the table itself. */
static void test_reuse(void)
{
	site_t a, b;
	site_init(&a, "a", NOW_MS - 10000);
	site_init(&b, "b", NOW_MS);
	add(&a, "10.0.0.0/24", 100, 0);
	add(&a, "10.0.1.0/24", 200, 900);
	add(&a, "10.0.3.0/24", 300, 2000);
	add(&a, "2001:db8::/48", 400, 5);
	add(&b, "10.0.1.0/24", 150, 1);
	add(&b, "10.0.2.0/24", 250, 1);
	site_t *sites[2] = {&a, &b};
	gslb_paths_opts_t o = opts(2);
	gslb_paths_t *first = build(NULL, sites, NULL, &o, NOW_MS);

	/* 300 s later: a's table again, or a's column reused from the first build. */
	uint64_t later = NOW_MS + 300000;
	gslb_paths_t *fresh = build(first, sites, NULL, &o, later);
	gslb_paths_site_t in[2] = {{.reuse = true}, {.table = &b.t, .changed = true}};
	char err[160];
	gslb_paths_t *reused = gslb_paths_build(first, in, &o, later, err, sizeof(err));
	gslb_paths_info_t fi, ri;
	gslb_paths_info(fresh, &fi);
	gslb_paths_info(reused, &ri);
	CHECK(ri.rows4 == fi.rows4 && ri.rows6 == fi.rows6 && ri.cells == fi.cells,
	      "reused: %zu+%zu rows %zu cells, fresh %zu+%zu %zu", ri.rows4, ri.rows6, ri.cells,
	      fi.rows4, fi.rows6, fi.cells);
	const char *addrs[] = {"10.0.0.1", "10.0.1.1", "10.0.2.1", "10.0.3.1", "2001:db8::1"};
	for (size_t i = 0; i < STEER_ARRAY_LEN(addrs); i++) {
		for (unsigned col = 0; col < 2; col++) {
			gslb_path_cell_t x = cell_of(fresh, addrs[i], col);
			gslb_path_cell_t y = cell_of(reused, addrs[i], col);
			CHECK(x.empty == y.empty && x.rtt == y.rtt && x.loss == y.loss &&
			          x.hops == y.hops && x.age_s == y.age_s,
			      "%s column %u: rtt %u/%u age %u/%u", addrs[i], col, x.rtt, y.rtt,
			      x.age_s, y.age_s);
		}
	}
	gslb_path_cell_t c = cell_of(reused, "10.0.0.1", 0);
	CHECK(!c.empty && c.age_s == 310, "reused cell ages with its table: %u", c.age_s);
	CHECK(best_of(reused, "10.0.1.1") == 1, "hysteresis state carried");

	/* A reused column goes stale like the table would: 10.0.3.0 (2000 s + 10 s) after 400 s;
	 * reusing the reuse keeps the ages counting from the agent's table. */
	gslb_paths_t *again = gslb_paths_build(reused, in, &o, NOW_MS + 400000, err, sizeof(err));
	uint32_t row;
	CHECK(find(again, "10.0.1.1", &row) && !find(again, "10.0.3.1", &row),
	      "the 2,410 s old row went stale");
	c = cell_of(again, "10.0.1.1", 0);
	CHECK(!c.empty && c.age_s >= 1310 && c.age_s <= 1310 + 900 / 16, "age %u", c.age_s);

	/* Nothing to reuse without a previous table, or with another granularity. */
	gslb_paths_t *none = gslb_paths_build(NULL, in, &o, later, err, sizeof(err));
	CHECK(cell_of(none, "10.0.1.1", 0).empty && !find(none, "10.0.0.1", &row),
	      "no previous table: the column is empty");
	o.ipv4_prefix = 23;
	gslb_paths_t *coarser = gslb_paths_build(first, in, &o, later, err, sizeof(err));
	CHECK(cell_of(coarser, "10.0.0.1", 0).empty && !cell_of(coarser, "10.0.0.1", 1).empty &&
	          !cell_of(coarser, "2001:db8::1", 0).empty,
	      "IPv4 granularity changed: IPv4 cells not reused, IPv6 ones are");
	gslb_paths_unref(coarser);
	gslb_paths_unref(none);
	gslb_paths_unref(again);
	gslb_paths_unref(reused);
	gslb_paths_unref(fresh);
	gslb_paths_unref(first);
}

static void test_max_rows(void)
{
	site_t a, b;
	site_init(&a, "a", NOW_MS);
	site_init(&b, "b", NOW_MS);
	char cidr[32];
	for (unsigned i = 0; i < 20; i++) {
		snprintf(cidr, sizeof(cidr), "10.0.%u.0/24", i);
		add(&a, cidr, 100, (uint16_t)(i * 10)); /* row i is 10 i seconds old */
	}
	for (unsigned i = 0; i < 10; i++) {
		snprintf(cidr, sizeof(cidr), "10.0.%u.0/24", 30 + i);
		add(&b, cidr, 100, (uint16_t)(i * 10 + 5));
	}
	add(&a, "2001:db8::/48", 100, 0);
	site_t *sites[2] = {&a, &b};
	gslb_paths_opts_t o = opts(2);
	o.max_rows = 7;
	gslb_paths_t *p = build(NULL, sites, NULL, &o, NOW_MS);
	gslb_paths_info_t info;
	gslb_paths_info(p, &info);
	CHECK(info.rows4 + info.rows6 == 7 && info.rows_dropped == 24, "kept %zu, dropped %zu",
	      info.rows4 + info.rows6, info.rows_dropped);
	uint32_t row;
	/* Ages 0, 0 (IPv6), 5, 10, 15, 20, 25 are the seven freshest. */
	const char *kept[] = {"10.0.0.1",  "2001:db8::1", "10.0.30.1", "10.0.1.1",
	                      "10.0.31.1", "10.0.2.1",    "10.0.32.1"};
	for (size_t i = 0; i < STEER_ARRAY_LEN(kept); i++)
		CHECK(find(p, kept[i], &row), "%s kept", kept[i]);
	CHECK(!find(p, "10.0.3.1", &row) && !find(p, "10.0.33.1", &row), "older rows dropped");
	gslb_paths_unref(p);

	/* Ties at the cut go to the lower prefixes, IPv4 first. */
	for (unsigned i = 0; i < 20; i++)
		a.r4[i].age_s = 0;
	o.max_rows = 3;
	sites[1] = NULL;
	p = build(NULL, sites, NULL, &o, NOW_MS);
	CHECK(find(p, "10.0.0.1", &row) && find(p, "10.0.2.1", &row) &&
	          !find(p, "10.0.3.1", &row) && !find(p, "2001:db8::1", &row),
	      "ties: lowest prefixes");
	gslb_paths_unref(p);
}

static void test_bad_opts(void)
{
	site_t a;
	site_init(&a, "a", NOW_MS);
	add(&a, "10.0.0.0/24", 100, 0);
	add(&a, "10.0.1.0/24", 100, 0);
	gslb_paths_site_t in[2] = {{.table = &a.t}, {.table = NULL}};
	struct {
		const char *what;
		gslb_paths_opts_t o;
		const char *reason;
	} rows[] = {
	    {"ipv4 /7", opts(1), "IPv4 must be 8..32"},
	    {"ipv6 /65", opts(1), "IPv6 16..64"},
	    {"columns", opts(1), "at most 64"},
	    {"max rows", opts(1), "max rows 0"},
	    {"margin", opts(1), "margin 101%"},
	    {"duplicate column", opts(2), "both datacenter"},
	    {"datacenter", opts(1), "datacenter 3 of 2"},
	};
	rows[0].o.ipv4_prefix = 7;
	rows[1].o.ipv6_prefix = 65;
	rows[2].o.n_columns = 65;
	rows[3].o.max_rows = 0;
	rows[4].o.margin_pct = 101;
	static const size_t same[2] = {1, 1};
	rows[5].o.column_dc = same;
	rows[6].o.n_datacenters = 2;
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		char err[160] = "";
		gslb_paths_t *p = gslb_paths_build(NULL, in, &rows[i].o, NOW_MS, err, sizeof(err));
		CHECK(!p && strstr(err, rows[i].reason), "%s: '%s'", rows[i].what, err);
		gslb_paths_unref(p);
	}
	gslb_path_row_t t = a.r4[0];
	a.r4[0] = a.r4[1];
	a.r4[1] = t;
	char err[160] = "";
	gslb_paths_opts_t o = opts(1);
	gslb_paths_t *p = gslb_paths_build(NULL, in, &o, NOW_MS, err, sizeof(err));
	CHECK(!p && strstr(err, "column 0: the site table is not sorted"), "unsorted: '%s'", err);
	gslb_paths_unref(NULL);
}

/* ---- hysteresis ---------------------------------------------------------------------------- */

#define ADDR "192.0.2.9"

typedef struct {
	site_t s[3];
	site_t *sites[3];
	gslb_paths_opts_t o;
	gslb_paths_t *p;
	uint64_t now;
} hyst_t;

static void hyst_init(hyst_t *h, uint16_t a, uint16_t b, uint16_t c)
{
	gslb_paths_unref(h->p);
	memset(h, 0, sizeof(*h));
	h->o = opts(3);
	h->now = NOW_MS;
	const uint16_t rtt[3] = {a, b, c};
	for (int i = 0; i < 3; i++) {
		site_init(&h->s[i], "s", h->now);
		add(&h->s[i], "192.0.2.0/24", rtt[i], 0);
		h->sites[i] = &h->s[i];
	}
	h->p = build(NULL, h->sites, NULL, &h->o, h->now);
}

/* One build ("round") with new RTTs (0 = column without a table); @p changed per column. */
static unsigned round_with(hyst_t *h, const uint16_t rtt[3], const bool changed[3])
{
	h->now += 2000;
	for (int i = 0; i < 3; i++) {
		h->sites[i] = rtt[i] ? &h->s[i] : NULL;
		h->s[i].r4[0].rtt = rtt[i];
		h->s[i].t.generated_ms = h->now;
	}
	gslb_paths_t *next = build(h->p, h->sites, changed, &h->o, h->now);
	gslb_paths_unref(h->p);
	h->p = next;
	return best_of(h->p, ADDR);
}

static unsigned round_all(hyst_t *h, uint16_t a, uint16_t b, uint16_t c)
{
	const uint16_t rtt[3] = {a, b, c};
	const bool changed[3] = {true, true, true};
	return round_with(h, rtt, changed);
}

static void test_hysteresis(void)
{
	hyst_t h = {0};
	hyst_init(&h, 1000, 2000, 3000);
	CHECK(best_of(h.p, ADDR) == 0, "first build: the lowest RTT");

	/* 15 % better never takes over, however many rounds. */
	unsigned moved = 0;
	for (int i = 0; i < 50; i++)
		moved += round_all(&h, 1000, 850, 3000) != 0;
	CHECK(moved == 0, "15 %% better took over in %u rounds", moved);
	gslb_paths_info_t info;
	gslb_paths_info(h.p, &info);
	CHECK(info.sticky_held == 1, "sticky held counted: %zu", info.sticky_held);
	uint32_t row;
	unsigned rounds;
	find(h.p, ADDR, &row);
	CHECK(gslb_paths_row_challenger(h.p, row, &rounds) == GSLB_PATHS_NO_COLUMN && rounds == 0,
	      "15 %% is no challenger");

	/* ±15 % jitter on both never moves it either. */
	for (int i = 0; i < 50; i++)
		moved += round_all(&h, i % 2 ? 1150 : 870, i % 2 ? 1000 : 1150, 3000) != 0;
	CHECK(moved == 0, "jitter moved the best %u times", moved);

	/* 25 % and >= 10 ms better: only after two changed rounds. */
	CHECK(round_all(&h, 1000, 750, 3000) == 0, "round 1 of 2: still the sticky best");
	find(h.p, ADDR, &row);
	CHECK(gslb_paths_row_challenger(h.p, row, &rounds) == 1 && rounds == 1,
	      "challenger 1 after one round (%u)", rounds);
	CHECK(round_all(&h, 1000, 750, 3000) == 1, "round 2 of 2: the challenger takes over");

	/* A round in which the challenger's table did not change does not count. */
	hyst_init(&h, 1000, 2000, 3000);
	const uint16_t beat[3] = {1000, 700, 3000};
	const bool b_same[3] = {true, false, true}, all[3] = {true, true, true};
	CHECK(round_with(&h, beat, all) == 0, "changed round 1");
	for (int i = 0; i < 5; i++)
		CHECK(round_with(&h, beat, b_same) == 0, "unchanged round %d does not count", i);
	CHECK(round_with(&h, beat, all) == 1, "changed round 2 switches");

	/* A challenger that falls back resets the count. */
	hyst_init(&h, 1000, 2000, 3000);
	CHECK(round_all(&h, 1000, 700, 3000) == 0, "beat 1");
	CHECK(round_all(&h, 1000, 900, 3000) == 0, "falls back");
	CHECK(round_all(&h, 1000, 700, 3000) == 0, "beat 1 again: the count started over");
	CHECK(round_all(&h, 1000, 700, 3000) == 1, "beat 2");

	/* A different challenger restarts the count. */
	hyst_init(&h, 1000, 2000, 3000);
	CHECK(round_all(&h, 1000, 700, 3000) == 0, "b beats once");
	CHECK(round_all(&h, 1000, 700, 600) == 0, "c is the challenger now");
	CHECK(round_all(&h, 1000, 700, 600) == 2, "c after two rounds");

	/* 40 % better but only 0.4 ms: min-difference holds it. */
	hyst_init(&h, 10, 2000, 3000);
	for (int i = 0; i < 5; i++)
		moved += round_all(&h, 10, 6, 3000) != 0;
	CHECK(moved == 0, "under min-difference moved %u times", moved);

	/* The sticky best that loses its data is replaced at once. */
	hyst_init(&h, 1000, 2000, 950);
	CHECK(round_all(&h, 0, 2000, 950) == 2, "no table for the sticky best: the best at once");
	hyst_init(&h, 1000, 2000, 950);
	CHECK(round_all(&h, GSLB_PATHFMT_RTT_NONE, 2000, 950) == 2, "sticky best stops answering");
	hyst_init(&h, 1000, 2000, 950);
	h.s[0].r4[0].age_s = 2401;
	CHECK(round_all(&h, 1000, 2000, 950) == 2, "sticky best's cell goes stale");

	/* rounds 1: the first beating round switches. */
	hyst_init(&h, 1000, 2000, 3000);
	h.o.rounds = 1;
	CHECK(round_all(&h, 1000, 700, 3000) == 1, "rounds 1");

	/* State follows the datacenter when the columns are reordered by a reload. */
	hyst_init(&h, 1000, 2000, 3000);
	CHECK(round_all(&h, 1000, 850, 3000) == 0, "sticky 0");
	static const size_t swapped[3] = {0, 3, 5}; /* column 0 was dc 3, now column 1 */
	h.o.column_dc = swapped;
	site_t keep = h.s[0];
	h.s[0] = h.s[1];
	h.s[1] = keep;
	h.sites[0] = &h.s[0];
	h.sites[1] = &h.s[1];
	CHECK(round_all(&h, 850, 1000, 3000) == 1, "sticky best followed its datacenter");
	gslb_paths_unref(h.p);
}

int main(void)
{
	test_lookup();
	test_fold();
	test_stale();
	test_max_rows();
	test_reuse();
	test_bad_opts();
	test_hysteresis();
	return unit_finish("gslb_paths");
}
