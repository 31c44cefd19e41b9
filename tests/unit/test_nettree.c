/*
 * Unit tests of src/gslb/nettree (address -> value + ECS scope) and src/gslb/nets_file (nets
 * list parser). Runs with tests/data as the working directory.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "gslb/nets_file.h"
#include "gslb/nettree.h"
#include "unit.h"

#define DEF 1000 /* default value of every test tree */

/* ---- helpers ---- */

static steer_prefix_t pfx(const char *text)
{
	steer_prefix_t p;
	if (steer_prefix_parse(text, &p) != 0) {
		printf("test bug: bad prefix %s\n", text);
		abort();
	}
	return p;
}

/* Look @p text up (IPv4 or IPv6 literal). */
static uint32_t look(const gslb_nettree_t *t, const char *text, uint8_t *scope)
{
	uint8_t a[16];
	if (inet_pton(AF_INET, text, a) == 1)
		return gslb_nettree_lookup(t, AF_INET, a, scope);
	if (inet_pton(AF_INET6, text, a) == 1)
		return gslb_nettree_lookup(t, AF_INET6, a, scope);
	printf("test bug: bad address %s\n", text);
	abort();
}

static uint32_t look_prefix(const gslb_nettree_t *t, const char *text, uint8_t src, uint8_t *scope)
{
	uint8_t a[16];
	if (inet_pton(AF_INET, text, a) == 1)
		return gslb_nettree_lookup_prefix(t, AF_INET, a, src, scope);
	if (inet_pton(AF_INET6, text, a) == 1)
		return gslb_nettree_lookup_prefix(t, AF_INET6, a, src, scope);
	printf("test bug: bad address %s\n", text);
	abort();
}

/* splitmix64: small, seedable, good enough for test data. */
static uint64_t rng_state;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- table-driven semantics ---- */

typedef struct {
	const char *prefix;
	uint32_t value;
} set_row_t;

typedef struct {
	const char *addr;
	uint32_t value;
	uint8_t scope;
} look_row_t;

typedef struct {
	const char *name;
	unsigned fold;
	set_row_t sets[8];
	look_row_t looks[12];
} case_t;

static const case_t cases[] = {
    {"empty tree",
     0,
     {{NULL, 0}},
     {{"1.2.3.4", DEF, 0},
      {"0.0.0.0", DEF, 0},
      {"2001:db8::1", DEF, 0},
      {"::ffff:1.2.3.4", DEF, 0},
      {"::", DEF, 0}}},
    {"siblings merge: two /9 with one value are one /8",
     0,
     {{"10.0.0.0/9", 1}, {"10.128.0.0/9", 1}},
     {{"10.1.2.3", 1, 8},
      {"10.200.0.1", 1, 8},
      {"11.0.0.0", DEF, 8},
      {"9.255.255.255", DEF, 7},
      {"12.0.0.0", DEF, 6},
      {"128.0.0.1", DEF, 1}}},
    {"siblings with different values stay apart",
     0,
     {{"10.0.0.0/9", 1}, {"10.128.0.0/9", 2}},
     {{"10.1.2.3", 1, 9}, {"10.200.0.1", 2, 9}, {"11.0.0.0", DEF, 8}}},
    {"a /24 hole in a /16: neighbours get the widest block without the hole",
     0,
     {{"10.0.0.0/16", 1}, {"10.0.5.0/24", 2}},
     {{"10.0.5.7", 2, 24},
      {"10.0.4.1", 1, 24},
      {"10.0.6.1", 1, 23},
      {"10.0.0.1", 1, 22},
      {"10.0.8.1", 1, 21},
      {"10.0.128.1", 1, 17},
      {"10.1.0.0", DEF, 16},
      {"::ffff:10.0.4.1", 1, 120},
      {"::ffff:10.0.128.1", 1, 113}}},
    {"later calls win where they overlap",
     0,
     {{"10.0.0.0/8", 1}, {"10.0.0.0/16", 2}, {"10.0.0.0/8", 3}},
     {{"10.0.0.1", 3, 8}, {"10.255.0.1", 3, 8}}},
    {"a shorter later prefix overrides nested longer ones",
     0,
     {{"10.1.1.0/24", 3}, {"10.1.0.0/16", 2}, {"10.0.0.0/8", 1}},
     {{"10.1.1.1", 1, 8}, {"10.1.2.1", 1, 8}}},
    {"nested prefixes, longest set last",
     0,
     {{"10.0.0.0/8", 1}, {"10.1.0.0/16", 2}, {"10.1.1.0/24", 3}},
     {{"10.1.1.1", 3, 24},
      {"10.1.0.1", 2, 24},
      {"10.1.2.1", 2, 23},
      {"10.2.0.1", 1, 15},
      {"10.0.0.1", 1, 16},
      {"10.128.0.0", 1, 9}}},
    {"setting the default value again is a hole-free no-op",
     0,
     {{"10.0.0.0/8", 1}, {"10.1.0.0/16", DEF}, {"10.1.0.0/16", 1}},
     {{"10.1.0.1", 1, 8}, {"11.0.0.0", DEF, 8}}},
    {"IPv4 /0 covers all IPv4 and nothing of IPv6",
     0,
     {{"0.0.0.0/0", 5}},
     {{"1.2.3.4", 5, 0},
      {"255.255.255.255", 5, 0},
      {"::ffff:1.2.3.4", 5, 96},
      {"2001:db8::", DEF, 3},
      {"::1", DEF, 81},
      {"::ffff:0:0:1", DEF, 65}}},
    {"IPv4 host routes",
     0,
     {{"192.0.2.1/32", 7}, {"0.0.0.0/32", 8}, {"255.255.255.255/32", 9}},
     {{"192.0.2.1", 7, 32},
      {"192.0.2.0", DEF, 32},
      {"192.0.2.2", DEF, 31},
      {"0.0.0.0", 8, 32},
      {"0.0.0.1", DEF, 32},
      {"255.255.255.255", 9, 32},
      {"255.255.255.254", DEF, 32},
      {"::ffff:192.0.2.1", 7, 128}}},
    {"IPv6 ::/0 does not reach IPv4 or the mapped range",
     0,
     {{"::/0", 4}},
     {{"2001:db8::1", 4, 3},
      {"1.2.3.4", DEF, 0},
      {"::ffff:1.2.3.4", DEF, 96},
      {"::1", 4, 81},
      {"::fffe:0:0", 4, 96}}},
    {"IPv6 host routes and /0 + /128",
     0,
     {{"::/0", 4}, {"2001:db8::1", 6}, {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 2}},
     {{"2001:db8::1", 6, 128},
      {"2001:db8::", 4, 128},
      {"2001:db8::2", 4, 127},
      {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 2, 128},
      {"8000::", 4, 2}}},
    {"IPv6 prefixes",
     0,
     {{"2001:db8::/32", 1}, {"2001:db8:8000::/33", 1}, {"2001:db8:1::/48", 2}},
     {{"2001:db8:1::5", 2, 48},
      {"2001:db8::1", 1, 48},
      {"2001:db8:ffff::1", 1, 33},
      {"2001:db9::", DEF, 32}}},
    {"IPv6 prefixes inside ::ffff:0:0/96 are the IPv4 prefixes they denote",
     0,
     {{"::ffff:10.0.0.0/104", 8}, {"::ffff:0:0/96", 3}, {"10.1.0.0/16", 9}},
     {{"10.2.3.4", 3, 15},
      {"11.2.3.4", 3, 8},
      {"128.0.0.1", 3, 1},
      {"10.1.0.1", 9, 16},
      {"::ffff:10.1.0.1", 9, 112}}},
    {"mapped range merges upward when IPv4 is uniform like its neighbours",
     0,
     {{"::/0", 4}, {"0.0.0.0/0", 4}},
     {{"::ffff:1.2.3.4", 4, 0}, {"1.2.3.4", 4, 0}, {"2001:db8::", 4, 0}}},
    {"6to4 and NAT64 folded to IPv4",
     GSLB_NETTREE_FOLD_6TO4 | GSLB_NETTREE_FOLD_NAT64,
     {{"10.0.0.0/8", 1}, {"2002:0b00::/24", 2}, {"64:ff9b::c000:200/120", 3}, {"2000::/3", 4}},
     {{"2002:0a01:0203::", 1, 24},
      {"2002:0a01:0203:4:5:6:7:8", 1, 24},
      {"11.1.1.1", 2, 8},
      {"2002:0b00::1", 2, 24},
      {"64:ff9b::10.9.9.9", 1, 104},
      {"64:ff9b::192.0.2.77", 3, 120},
      {"192.0.2.1", 3, 24},
      {"2001:db8::", 4, 15},
      {"2003::", 4, 16}}},
    {"without folding 6to4 is plain IPv6",
     0,
     {{"10.0.0.0/8", 1}, {"2002::/16", 2}},
     {{"2002:0a01:0203::", 2, 16}, {"64:ff9b::10.9.9.9", DEF, 10}}},
};

static void run_case(const case_t *c)
{
	gslb_nettree_builder_t *b = gslb_nettree_builder_new(DEF);
	CHECK(gslb_nettree_builder_fold(b, c->fold) == 0, "%s: fold", c->name);
	for (size_t i = 0; i < STEER_ARRAY_LEN(c->sets) && c->sets[i].prefix; i++) {
		steer_prefix_t p = pfx(c->sets[i].prefix);
		int ret = gslb_nettree_set(b, &p, c->sets[i].value);
		CHECK(ret == 0, "%s: set %s: %d", c->name, c->sets[i].prefix, ret);
	}
	gslb_nettree_t *t = gslb_nettree_build(b);
	for (size_t i = 0; i < STEER_ARRAY_LEN(c->looks) && c->looks[i].addr; i++) {
		const look_row_t *r = &c->looks[i];
		uint8_t scope = 255;
		uint32_t v = look(t, r->addr, &scope);
		CHECK(v == r->value && scope == r->scope, "%s: %s -> %u/%u, want %u/%u", c->name,
		      r->addr, v, scope, r->value, r->scope);
	}
	gslb_nettree_free(t);
}

static void test_cases(void)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(cases); i++)
		run_case(&cases[i]);
}

static void test_lookup_prefix(void)
{
	gslb_nettree_builder_t *b = gslb_nettree_builder_new(DEF);
	static const set_row_t sets[] = {{"10.0.0.0/16", 1},
	                                 {"10.0.5.0/24", 2},
	                                 {"2001:db8::/32", 3},
	                                 {"2001:db8:0:100::/56", 4}};
	for (size_t i = 0; i < STEER_ARRAY_LEN(sets); i++) {
		steer_prefix_t p = pfx(sets[i].prefix);
		CHECK(gslb_nettree_set(b, &p, sets[i].value) == 0, "set %s", sets[i].prefix);
	}
	gslb_nettree_t *t = gslb_nettree_build(b);
	static const struct {
		const char *addr;
		uint8_t src;
		uint32_t value;
		uint8_t scope;
	} rows[] = {
	    {"10.0.5.0", 24, 2, 24},
	    {"10.0.5.99", 24, 2, 24}, /* host bits ignored */
	    {"10.0.4.0", 24, 1, 24},
	    {"10.0.6.0", 24, 1, 23},
	    {"10.0.0.0", 16, 1, 22},
	    {"10.0.5.0", 16, 1, 22}, /* not constant below the source: zero-extended, longer */
	    {"10.0.0.0", 8, 1, 22},
	    {"10.1.0.0", 24, DEF, 16},
	    {"10.0.128.0", 17, 1, 17},
	    {"10.0.5.1", 32, 2, 24},
	    {"10.0.5.1", 40, 2, 24}, /* source clamped to 32 */
	    {"0.0.0.0", 0, DEF, 5},
	    {"10.0.0.0", 0, DEF, 5}, /* 0.0.0.0 sits in 0/5 */
	    {"2001:db8::", 56, 3, 56},
	    {"2001:db8:0:100::", 56, 4, 56},
	    {"2001:db8::", 32, 3, 56},
	    {"2001:db8:0:200::", 48, 3, 56},
	    {"2001:db8:0:200::", 56, 3, 55},
	    {"::ffff:10.0.5.0", 120, 2, 120},
	    {"::ffff:10.0.5.0", 112, 1, 118},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		uint8_t scope = 255;
		uint32_t v = look_prefix(t, rows[i].addr, rows[i].src, &scope);
		CHECK(v == rows[i].value && scope == rows[i].scope, "%s/%u -> %u/%u, want %u/%u",
		      rows[i].addr, rows[i].src, v, scope, rows[i].value, rows[i].scope);
	}
	uint8_t a[16] = {0}, scope = 255;
	CHECK(gslb_nettree_lookup(t, AF_UNIX, a, &scope) == DEF && scope == 0, "unknown family");
	gslb_nettree_free(t);
}

static void test_errors(void)
{
	gslb_nettree_builder_t *b = gslb_nettree_builder_new(DEF);
	steer_prefix_t p = pfx("10.0.0.0/8");
	CHECK(gslb_nettree_set(b, &p, GSLB_NETTREE_VALUE_MAX + 1) == STEER_ERANGE, "value too big");
	CHECK(gslb_nettree_set(b, &p, GSLB_NETTREE_VALUE_MAX) == 0, "max value");
	CHECK(gslb_nettree_builder_fold(b, GSLB_NETTREE_FOLD_6TO4) == STEER_EINVAL,
	      "fold too late");
	p.family = AF_UNIX;
	CHECK(gslb_nettree_set(b, &p, 1) == STEER_EINVAL, "bad family");
	p = pfx("10.0.0.0/8");
	p.len = 33;
	CHECK(gslb_nettree_set(b, &p, 1) == STEER_EINVAL, "v4 len 33");
	p = pfx("2001:db8::/32");
	p.len = 129;
	CHECK(gslb_nettree_set(b, &p, 1) == STEER_EINVAL, "v6 len 129");
	gslb_nettree_t *t = gslb_nettree_build(b);
	uint8_t scope;
	CHECK(look(t, "10.1.1.1", &scope) == GSLB_NETTREE_VALUE_MAX && scope == 8,
	      "max value kept");
	gslb_nettree_free(t);

	b = gslb_nettree_builder_new(DEF);
	CHECK(gslb_nettree_builder_fold(b, 0x80) == STEER_EINVAL, "unknown fold flag");
	CHECK(gslb_nettree_builder_fold(b, GSLB_NETTREE_FOLD_6TO4) == 0, "fold 6to4");
	p = pfx("2002:0a00::/24");
	CHECK(gslb_nettree_set(b, &p, 1) == 0, "6to4 /24 is an IPv4 /8");
	p = pfx("2002:0a00:0100::/48");
	CHECK(gslb_nettree_set(b, &p, 2) == 0, "6to4 /48 is an IPv4 host");
	p = pfx("2002:0a00:0100::/56");
	CHECK(gslb_nettree_set(b, &p, 1) == STEER_ERANGE, "6to4 /56 is finer than IPv4");
	gslb_nettree_builder_free(b);
	gslb_nettree_builder_free(NULL);
	gslb_nettree_free(NULL);
}

static void test_set_nets(void)
{
	gslb_nettree_builder_t *b = gslb_nettree_builder_new(DEF);
	steer_prefix_t p = pfx("10.0.0.0/8");
	CHECK(gslb_nettree_set(b, &p, 50) == 0, "mmdb-like base");
	/* Unsorted input: the longest prefix wins whatever the order; same prefix: later wins. */
	gslb_nettree_entry_t e[] = {
	    {pfx("10.1.1.0/24"), 3},   {pfx("10.1.0.0/16"), 2},         {pfx("10.1.1.128/25"), 4},
	    {pfx("10.1.0.0/16"), 5},   {pfx("::ffff:10.1.1.0/120"), 6}, {pfx("2001:db8::/32"), 7},
	    {pfx("2001:db8::/48"), 8},
	};
	size_t bad = 99;
	CHECK(gslb_nettree_set_nets(b, e, STEER_ARRAY_LEN(e), &bad) == 0, "set_nets");
	CHECK(bad == 99, "bad untouched on success");
	gslb_nettree_t *t = gslb_nettree_build(b);
	static const look_row_t rows[] = {
	    {"10.1.1.1", 6, 25},  {"10.1.1.200", 4, 25},  {"10.1.2.1", 5, 23},
	    {"10.2.0.0", 50, 15}, {"2001:db8::1", 8, 48}, {"2001:db8:1::", 7, 48},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		uint8_t scope = 255;
		uint32_t v = look(t, rows[i].addr, &scope);
		CHECK(v == rows[i].value && scope == rows[i].scope, "set_nets %s -> %u/%u",
		      rows[i].addr, v, scope);
	}
	gslb_nettree_free(t);

	b = gslb_nettree_builder_new(DEF);
	e[2].value = GSLB_NETTREE_VALUE_MAX + 1;
	CHECK(gslb_nettree_set_nets(b, e, STEER_ARRAY_LEN(e), &bad) == STEER_ERANGE && bad == 2,
	      "set_nets names the bad entry (%zu)", bad);
	CHECK(gslb_nettree_set_nets(b, e, 0, NULL) == 0, "empty set_nets");
	t = gslb_nettree_build(b);
	uint8_t scope;
	CHECK(look(t, "10.1.1.1", &scope) == DEF && scope == 0, "a failed set_nets sets nothing");
	gslb_nettree_free(t);
}

/* ---- randomized comparison with a brute-force reference ---- */

#define SPACE_BITS 16
#define SPACE_SIZE (1u << SPACE_BITS)
#define MIXED      UINT32_MAX

/*
 * A 2^SPACE_BITS-block space at @base/@base_len (family @bits = 32 or 128) filled with @n random
 * prefixes of lengths base_len..base_len+SPACE_BITS, painted in order into a reference array.
 * Every block of the space is looked up (at a random address inside it) and must give the
 * reference value, with the scope of the largest aligned uniform block around it: uniform in
 * the reference, and its parent is not.
 */
static void random_space(uint64_t seed, int family, const uint8_t *base, unsigned base_len,
                         unsigned n)
{
	unsigned bits = family == AF_INET ? 32 : 128;
	uint32_t *ref = xmalloc(SPACE_SIZE * sizeof(*ref));
	/* level[l][i]: value of aligned 2^l-block i if uniform, else MIXED. */
	uint32_t *level[SPACE_BITS + 1];
	rng_state = seed;
	for (uint32_t i = 0; i < SPACE_SIZE; i++)
		ref[i] = DEF;
	gslb_nettree_builder_t *b = gslb_nettree_builder_new(DEF);
	/* 6to4 reaches the IPv4 nodes through the IPv6 root, bypassing the IPv4 stride table:
	 * an independent path to compare with (IPv4 spaces only: it takes 2002::/16 away). */
	if (family == AF_INET)
		CHECK(gslb_nettree_builder_fold(b, GSLB_NETTREE_FOLD_6TO4) == 0, "fold");
	for (unsigned k = 0; k < n; k++) {
		/* Mostly long prefixes, sometimes wide ones, a few reset to the default. */
		unsigned r = (unsigned)(rng() % 100) < 10
		                 ? (unsigned)(rng() % 8)
		                 : 8 + (unsigned)(rng() % (SPACE_BITS - 7));
		uint32_t idx = (uint32_t)(rng() % SPACE_SIZE) & ~((1u << (SPACE_BITS - r)) - 1);
		uint32_t value = rng() % 16 == 0 ? DEF : (uint32_t)(rng() % 10);
		for (uint32_t i = 0; i < (1u << (SPACE_BITS - r)); i++)
			ref[idx + i] = value;
		steer_prefix_t p = {.family = (sa_family_t)family, .len = (uint8_t)(base_len + r)};
		memcpy(p.addr, base, bits / 8);
		for (unsigned bit = 0; bit < SPACE_BITS; bit++) {
			unsigned pos = base_len + bit;
			if (idx & (1u << (SPACE_BITS - 1 - bit)))
				p.addr[pos / 8] |= (uint8_t)(0x80 >> (pos % 8));
		}
		CHECK(gslb_nettree_set(b, &p, value) == 0, "random set");
	}
	gslb_nettree_t *t = gslb_nettree_build(b);

	level[0] = ref;
	for (unsigned l = 1; l <= SPACE_BITS; l++) {
		level[l] = xmalloc((SPACE_SIZE >> l) * sizeof(uint32_t));
		for (uint32_t i = 0; i < (SPACE_SIZE >> l); i++) {
			uint32_t a = level[l - 1][2 * i], c = level[l - 1][2 * i + 1];
			level[l][i] = a == c ? a : MIXED;
		}
	}
	unsigned bad = 0;
	for (uint32_t i = 0; i < SPACE_SIZE && bad < 10; i++) {
		unsigned l = 0;
		while (l < SPACE_BITS && level[l + 1][i >> (l + 1)] != MIXED)
			l++;
		/* Uniform up to the whole space: outside it everything is the default. */
		unsigned want = base_len + SPACE_BITS - l;
		if (l == SPACE_BITS)
			want = ref[i] == DEF ? 0 : base_len;
		uint8_t addr[16];
		memcpy(addr, base, bits / 8);
		for (unsigned bit = 0; bit < SPACE_BITS; bit++) {
			unsigned pos = base_len + bit;
			if (i & (1u << (SPACE_BITS - 1 - bit)))
				addr[pos / 8] |= (uint8_t)(0x80 >> (pos % 8));
		}
		for (unsigned pos = base_len + SPACE_BITS; pos < bits; pos++) {
			if (rng() & 1)
				addr[pos / 8] |= (uint8_t)(0x80 >> (pos % 8));
		}
		uint8_t scope = 255;
		uint32_t v = gslb_nettree_lookup(t, family, addr, &scope);
		if (v != ref[i] || scope != want) {
			bad++;
			CHECK(false, "seed %llu block %u: %u/%u, want %u/%u",
			      (unsigned long long)seed, i, v, scope, ref[i], want);
		}
		/* ECS lookups: the source block's answer is the one of its zero-extended address.
		 */
		uint8_t src = (uint8_t)(rng() % (bits + 1)), s1, s2;
		uint8_t masked[16] = {0};
		for (unsigned pos = 0; pos < src; pos++)
			masked[pos / 8] |= addr[pos / 8] & (uint8_t)(0x80 >> (pos % 8));
		uint32_t v1 = gslb_nettree_lookup_prefix(t, family, addr, src, &s1);
		uint32_t v2 = gslb_nettree_lookup(t, family, masked, &s2);
		if (v1 != v2 || s1 != s2) {
			bad++;
			CHECK(false, "seed %llu block %u src %u: %u/%u vs %u/%u",
			      (unsigned long long)seed, i, src, v1, s1, v2, s2);
		}
		if (family == AF_INET) {
			/* All of IPv4 one block: it merges into IPv6 space only if that has the
			 * same value (the default here). */
			bool all = l == SPACE_BITS && (base_len == 0 || ref[i] == DEF);
			uint8_t m[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
			memcpy(m + 12, addr, 4);
			v1 = gslb_nettree_lookup(t, AF_INET6, m, &s1);
			unsigned want6 = all ? (ref[i] == DEF ? 0 : 96) : want + 96;
			if (v1 != v || s1 != want6) {
				bad++;
				CHECK(false, "seed %llu block %u mapped: %u/%u",
				      (unsigned long long)seed, i, v1, s1);
			}
			uint8_t six[16] = {0x20, 0x02};
			memcpy(six + 2, addr, 4);
			v1 = gslb_nettree_lookup(t, AF_INET6, six, &s1);
			want6 = all ? (ref[i] == DEF ? 0 : 16) : want + 16;
			if (v1 != v || s1 != want6) {
				bad++;
				CHECK(false, "seed %llu block %u 6to4: %u/%u",
				      (unsigned long long)seed, i, v1, s1);
			}
		}
	}
	CHECK(bad == 0, "random space seed %llu: %u bad blocks", (unsigned long long)seed, bad);
	for (unsigned l = 1; l <= SPACE_BITS; l++)
		free(level[l]);
	free(ref);
	gslb_nettree_free(t);
}

static void test_random(void)
{
	static const uint8_t ten[4] = {10, 0, 0, 0};
	static const uint8_t v4_deep[4] = {10, 20, 0, 0};
	static const uint8_t v6_doc[16] = {0x20, 0x01, 0x0d, 0xb8};
	static const uint8_t v6_deep[16] = {0x20, 0x01, 0x0d, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	/* 10.0.0.0/8 down to /24, 10.20.0.0/16 down to /32 (host routes). */
	for (uint64_t seed = 1; seed <= 3; seed++) {
		random_space(seed, AF_INET, ten, 8, 2000);
		random_space(seed + 100, AF_INET, v4_deep, 16, 2000);
	}
	random_space(7, AF_INET, ten, 8, 20); /* small tree: no stride table */
	/* Spaces at the root, so stride table entries are leaves above the table depth. */
	static const uint8_t zero[16] = {0};
	static const uint8_t v6_global[16] = {0x20};
	random_space(11, AF_INET, zero, 0, 2000);
	random_space(12, AF_INET, zero, 0, 300);
	random_space(13, AF_INET6, v6_global, 3, 2000);
	random_space(8, AF_INET6, v6_doc, 32, 2000);
	random_space(9, AF_INET6, v6_deep, 112, 2000); /* down to /128 */
	random_space(10, AF_INET6, v6_deep, 112, 15);
}

/* The stride table answers like the plain walk: a big random tree, checked against itself
 * with prefixes that cross the table depth. */
static void test_stride_consistency(void)
{
	rng_state = 42;
	gslb_nettree_builder_t *b = gslb_nettree_builder_new(DEF);
	for (unsigned i = 0; i < 50000; i++) {
		steer_prefix_t p = {.family = AF_INET, .len = (uint8_t)(12 + rng() % 21)};
		uint32_t a = (uint32_t)rng();
		a &= p.len ? ~0u << (32 - p.len) : 0;
		a = htonl(a);
		memcpy(p.addr, &a, 4);
		CHECK(gslb_nettree_set(b, &p, (uint32_t)(rng() % 10)) == 0, "set");
	}
	gslb_nettree_t *t = gslb_nettree_build(b);
	CHECK(gslb_nettree_nodes(t) > 10000, "big tree (%zu nodes)", gslb_nettree_nodes(t));
	CHECK(gslb_nettree_memory(t) >= gslb_nettree_nodes(t) * 8, "memory %zu",
	      gslb_nettree_memory(t));
	unsigned bad = 0;
	for (unsigned i = 0; i < 200000; i++) {
		uint32_t a = (uint32_t)rng();
		uint8_t addr[4];
		memcpy(addr, &a, 4);
		uint8_t scope, s2;
		uint32_t v = gslb_nettree_lookup(t, AF_INET, addr, &scope);
		/* The scope block is uniform: its first and last address agree, with the same
		 * scope. */
		uint32_t h = ntohl(a), mask = scope ? ~0u << (32 - scope) : 0;
		uint32_t lo = htonl(h & mask), hi = htonl(h | ~mask);
		uint32_t v1 = gslb_nettree_lookup(t, AF_INET, (const uint8_t *)&lo, &s2);
		bad += v1 != v || s2 != scope;
		v1 = gslb_nettree_lookup(t, AF_INET, (const uint8_t *)&hi, &s2);
		bad += v1 != v || s2 != scope;
	}
	CHECK(bad == 0, "stride consistency: %u bad", bad);
	gslb_nettree_free(t);
}

/* ---- nets files ---- */

typedef struct {
	steer_prefix_t p[64];
	unsigned line[64];
	unsigned n;
	int fail_at; /* line at which the callback fails, 0 never */
} collect_t;

static int collect_cb(void *ctx, const steer_prefix_t *prefix, unsigned line)
{
	collect_t *c = ctx;
	if (c->fail_at && (int)line == c->fail_at)
		return STEER_EEXIST;
	if (c->n < 64) {
		c->p[c->n] = *prefix;
		c->line[c->n++] = line;
	}
	return 0;
}

static bool prefix_is(const steer_prefix_t *p, const char *text)
{
	steer_prefix_t want = pfx(text);
	return p->family == want.family && p->len == want.len &&
	       memcmp(p->addr, want.addr, p->family == AF_INET ? 4 : 16) == 0;
}

static void test_nets_good(void)
{
	static const char *want[] = {"1.0.1.0/24",   "1.0.2.0/23",      "14.0.0.0/21",
	                             "27.8.0.0/13",  "101.0.0.0/22",    "192.0.2.1/32",
	                             "240e::/20",    "2001:db8:1::/48", "2001:db8:2::1/128",
	                             "36.96.0.0/11", "2001:db8:3::/48"};
	static const unsigned lines[] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14};
	collect_t c = {.n = 0};
	gslb_nets_stats_t st;
	char err[256];
	int ret = gslb_nets_file_read("gslb/nets/good.txt", collect_cb, &c, &st, err, sizeof(err));
	CHECK(ret == 0, "good.txt: %d %s", ret, err);
	CHECK(c.n == STEER_ARRAY_LEN(want), "good.txt: %u prefixes", c.n);
	for (unsigned i = 0; i < c.n && i < STEER_ARRAY_LEN(want); i++) {
		CHECK(prefix_is(&c.p[i], want[i]), "good.txt #%u is %s", i, want[i]);
		CHECK(c.line[i] == lines[i], "good.txt #%u line %u", i, c.line[i]);
	}
	CHECK(st.lines == 14 && st.prefixes == 11, "stats lines %u prefixes %u", st.lines,
	      st.prefixes);

	c.n = 0;
	ret = gslb_nets_file_read("gslb/nets/crlf.txt", collect_cb, &c, &st, err, sizeof(err));
	CHECK(ret == 0 && c.n == 4, "crlf.txt: %d %u %s", ret, c.n, err);
	CHECK(c.n == 4 && prefix_is(&c.p[1], "172.16.0.0/12") && c.line[1] == 4 &&
	          prefix_is(&c.p[3], "192.168.0.0/16") && c.line[3] == 6,
	      "crlf.txt content");
	CHECK(st.lines == 6, "crlf lines %u (last without newline)", st.lines);

	static const char *empty[] = {"gslb/nets/empty.txt", "gslb/nets/comments.txt"};
	for (size_t i = 0; i < STEER_ARRAY_LEN(empty); i++) {
		c.n = 0;
		ret = gslb_nets_file_read(empty[i], collect_cb, &c, &st, err, sizeof(err));
		CHECK(ret == 0 && c.n == 0 && st.prefixes == 0, "%s: %d %u", empty[i], ret, c.n);
	}
}

static void test_nets_bad(void)
{
	static const struct {
		const char *path;
		int ret;
		const char *msg;
		unsigned before; /* prefixes passed before the error */
	} rows[] = {
	    {"gslb/nets/bad_len.txt", STEER_ESYNTAX,
	     "gslb/nets/bad_len.txt:3: bad prefix '1.2.3.0/33'", 2},
	    {"gslb/nets/bad_junk.txt", STEER_ESYNTAX,
	     "gslb/nets/bad_junk.txt:3: one prefix per line, junk after it: '10.1.0.0/16 "
	     "10.2.0.0/16'",
	     1},
	    {"gslb/nets/bad_name.txt", STEER_ESYNTAX,
	     "gslb/nets/bad_name.txt:2: bad prefix 'example.com'", 1},
	    {"gslb/nets/bad_v6.txt", STEER_ESYNTAX,
	     "gslb/nets/bad_v6.txt:2: bad prefix '2001:db8::/129'", 1},
	    {"gslb/nets/missing.txt", STEER_ENOENT, "gslb/nets/missing.txt: ", 0},
	    {"gslb/nets", STEER_EINVAL, "gslb/nets: not a regular file", 0},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		collect_t c = {.n = 0};
		char err[256] = "unset";
		int ret = gslb_nets_file_read(rows[i].path, collect_cb, &c, NULL, err, sizeof(err));
		CHECK(ret == rows[i].ret, "%s: ret %d want %d", rows[i].path, ret, rows[i].ret);
		CHECK(strncmp(err, rows[i].msg, strlen(rows[i].msg)) == 0, "%s: message '%s'",
		      rows[i].path, err);
		CHECK(c.n == rows[i].before, "%s: %u prefixes before the error", rows[i].path, c.n);
	}

#define T(s) s, sizeof(s) - 1
	static const struct {
		const char *text;
		size_t len;
		int ret;
		const char *msg;
	} inl[] = {
	    {T("1.2.3.0/24\n1.2.3.0/\n"), STEER_ESYNTAX, "t:2: bad prefix '1.2.3.0/'"},
	    {T("1.2.3.0/24x\n"), STEER_ESYNTAX, "t:1: bad prefix '1.2.3.0/24x'"},
	    {T("/24\n"), STEER_ESYNTAX, "t:1: bad prefix '/24'"},
	    {T("1.2.3.4/-1\n"), STEER_ESYNTAX, "t:1: bad prefix '1.2.3.4/-1'"},
	    {T("1.2.3.4/2222\n"), STEER_ESYNTAX, "t:1: bad prefix '1.2.3.4/2222'"},
	    {T("1.2.3\0.0/24\n"), STEER_ESYNTAX, "t:1: bad prefix '1.2.3\\x00.0/24'"},
	    {T("1.2.3.0/24 # a \0 in a comment is fine\n"), 0, ""},
	    {T("\xff\xfe\n"), STEER_ESYNTAX, "t:1: bad prefix '\\xff\\xfe'"},
	    {T("1.2.3.0/24\n1.2.3.4/24\n"), STEER_ESYNTAX,
	     "t:2: host bits set in '1.2.3.4/24': /24 of it is 1.2.3.0/24 (fix the address or the "
	     "length)"},
	    {T("221.193.0.0/1 # meant /16\n"), STEER_ESYNTAX,
	     "t:1: host bits set in '221.193.0.0/1': /1 of it is 128.0.0.0/1 (fix the address or "
	     "the length)"},
	    {T("::1/127\n"), STEER_ESYNTAX,
	     "t:1: host bits set in '::1/127': /127 of it is ::/127 (fix the address or the "
	     "length)"},
	    {T("::/127\n0.0.0.0/0\n"), 0, ""},
	    {T("\n\n\n10.0.0.0/8"), 0, ""},
	    {T("1111111111111111111111111111111111111111111111111111111111111111111111"),
	     STEER_ESYNTAX,
	     "t:1: bad prefix '111111111111111111111111111111111111111111111111...'"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(inl); i++) {
		collect_t c = {.n = 0};
		char err[256] = "unset";
		int ret = gslb_nets_parse("t", inl[i].text, inl[i].len, collect_cb, &c, NULL, err,
		                          sizeof(err));
		CHECK(ret == inl[i].ret && strcmp(err, inl[i].msg) == 0, "inline %zu: %d '%s'", i,
		      ret, err);
	}
#undef T

	/* The callback's error stops the parse and is reported at its line. */
	collect_t c = {.fail_at = 4};
	char err[64];
	int ret = gslb_nets_file_read("gslb/nets/good.txt", collect_cb, &c, NULL, err, sizeof(err));
	CHECK(ret == STEER_EEXIST && strncmp(err, "gslb/nets/good.txt:4: ", 22) == 0,
	      "callback error: %d '%s'", ret, err);
	/* Tiny or no error buffer: truncated, never overrun. */
	char tiny[8];
	ret =
	    gslb_nets_file_read("gslb/nets/bad_len.txt", collect_cb, &c, NULL, tiny, sizeof(tiny));
	CHECK(ret == STEER_ESYNTAX && strlen(tiny) == 7, "tiny err '%s'", tiny);
	ret = gslb_nets_file_read("gslb/nets/bad_len.txt", collect_cb, &c, NULL, NULL, 0);
	CHECK(ret == STEER_ESYNTAX, "no err buffer");
}

#define HUGE_LINES 200000

typedef struct {
	gslb_nettree_entry_t *e;
	size_t n;
} entries_t;

static int entries_cb(void *ctx, const steer_prefix_t *prefix, unsigned line)
{
	entries_t *c = ctx;
	if (c->n >= HUGE_LINES)
		return STEER_ERANGE;
	c->e[c->n].prefix = *prefix;
	c->e[c->n].value = line % 10;
	c->n++;
	return 0;
}

/* Longest (then latest) entry containing @p addr, brute force. */
static uint32_t brute_value(const entries_t *c, int family, const uint8_t *addr)
{
	uint32_t value = DEF;
	int best = -1;
	for (size_t i = 0; i < c->n; i++) {
		const steer_prefix_t *p = &c->e[i].prefix;
		if (p->family != family || (int)p->len < best)
			continue;
		unsigned full = p->len / 8, rest = p->len % 8;
		if (memcmp(p->addr, addr, full) != 0)
			continue;
		if (rest && ((p->addr[full] ^ addr[full]) & (uint8_t)(0xff << (8 - rest))))
			continue;
		best = p->len;
		value = c->e[i].value;
	}
	return value;
}

/* A 200,000-line file (comments, CRLF, IPv6) through the parser and into a tree. */
static void test_nets_huge(void)
{
	char path[] = "/tmp/test_nettree_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp");
	if (fd < 0)
		return;
	FILE *f = fdopen(fd, "w");
	rng_state = 5;
	for (unsigned i = 0; i < HUGE_LINES; i++) {
		uint32_t a = (uint32_t)rng();
		unsigned len = 8 + (unsigned)(rng() % 17);
		if (i % 10 == 9) {
			/* 2001:X:Y::/L with the bits beyond L cleared */
			unsigned l6 = 32 + len % 17, keep = l6 - 32;
			uint32_t y = (a & 0xffff) & (uint32_t)(0xffff0000u >> keep);
			fprintf(f, "2001:%x:%x::/%u\r\n", (unsigned)(a >> 16), (unsigned)y & 0xffff,
			        l6);
			continue;
		}
		a &= ~0u << (32 - len);
		fprintf(f, "%u.%u.%u.0/%u # n%u\n", a >> 24, (a >> 16) & 255, (a >> 8) & 255, len,
		        i);
	}
	fclose(f);
	entries_t c = {.e = xcalloc(HUGE_LINES, sizeof(gslb_nettree_entry_t))};
	gslb_nets_stats_t st;
	char err[256] = "";
	int ret = gslb_nets_file_read(path, entries_cb, &c, &st, err, sizeof(err));
	unlink(path);
	CHECK(ret == 0 && c.n == HUGE_LINES && st.lines == HUGE_LINES, "huge: %d %zu %s", ret, c.n,
	      err);
	gslb_nettree_builder_t *b = gslb_nettree_builder_new(DEF);
	CHECK(gslb_nettree_set_nets(b, c.e, c.n, NULL) == 0, "huge set_nets");
	gslb_nettree_t *t = gslb_nettree_build(b);
	/* Sampled entries' addresses (and random ones) answer like the brute-force longest match.
	 */
	unsigned bad = 0;
	for (size_t i = 0; i < c.n; i += c.n / 150) {
		uint8_t addr[16], scope;
		memcpy(addr, c.e[i].prefix.addr, 16);
		int family = c.e[i].prefix.family;
		for (unsigned k = 0; k < 2; k++) {
			uint32_t v = gslb_nettree_lookup(t, family, addr, &scope);
			bad += v != brute_value(&c, family, addr);
			uint32_t r = (uint32_t)rng();
			memcpy(addr, &r, 4);
		}
	}
	CHECK(bad == 0, "huge: %u lookups differ from brute force", bad);
	gslb_nettree_free(t);
	free(c.e);
}

int main(void)
{
	test_cases();
	test_lookup_prefix();
	test_errors();
	test_set_nets();
	test_random();
	test_stride_consistency();
	test_nets_good();
	test_nets_bad();
	test_nets_huge();
	return unit_finish("test_nettree");
}
