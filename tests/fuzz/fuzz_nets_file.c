/*
 * Fuzz target: nets list parsing (gslb_nets_parse) and the map built from it. Besides sanitizer
 * findings it checks what the parser promises (each prefix well-formed, no host bits set, an
 * error message naming the input and line), that the built tree answers every accepted
 * prefix's address like a brute-force longest match, and that the nets set (the same prefixes
 * as inline entries) refuses exactly the conflicting duplicates and names the right line for
 * each address in explain's lookup.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gslb/nets_file.h"
#include "gslb/nets_set.h"
#include "gslb/nettree.h"
#include "base/err.h"
#include "fuzz.h"

#define MAX_ENTRIES 256 /* keeps the brute-force check quadratic in something small */
#define DEFAULT     77

typedef struct {
	gslb_nettree_entry_t e[MAX_ENTRIES];
	size_t n;
	unsigned calls;
	unsigned last_line;
} fuzz_nets_t;

static bool host_bits_clear(const steer_prefix_t *p)
{
	unsigned bits = p->family == AF_INET ? 32 : 128;
	for (unsigned b = p->len; b < bits; b++) {
		if (p->addr[b / 8] & (0x80 >> (b % 8)))
			return false;
	}
	return true;
}

static int collect(void *ctx, const steer_prefix_t *p, unsigned line)
{
	fuzz_nets_t *f = ctx;
	FUZZ_CHECK(p->family == AF_INET || p->family == AF_INET6);
	FUZZ_CHECK(p->len <= (p->family == AF_INET ? 32 : 128));
	FUZZ_CHECK(host_bits_clear(p));
	FUZZ_CHECK(line > f->last_line);
	f->last_line = line;
	f->calls++;
	if (f->n < MAX_ENTRIES) {
		f->e[f->n].prefix = *p;
		f->e[f->n].value = line % 8;
		f->n++;
	}
	return 0;
}

/* IPv4 view of a prefix (IPv4-mapped IPv6 prefixes are IPv4 in the tree). */
static void normalize(const steer_prefix_t *in, steer_prefix_t *out)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	*out = *in;
	if (in->family == AF_INET6 && in->len >= 96 && memcmp(in->addr, mapped, 12) == 0) {
		out->family = AF_INET;
		out->len = (uint8_t)(in->len - 96);
		memset(out->addr, 0, sizeof(out->addr));
		memcpy(out->addr, in->addr + 12, 4);
	}
}

static bool contains(const steer_prefix_t *p, const steer_prefix_t *q)
{
	if (p->family != q->family || p->len > q->len)
		return false;
	for (unsigned b = 0; b < p->len; b++) {
		if ((p->addr[b / 8] ^ q->addr[b / 8]) & (0x80 >> (b % 8)))
			return false;
	}
	return true;
}

static void check_tree(const fuzz_nets_t *f)
{
	gslb_nettree_builder_t *b = gslb_nettree_builder_new(DEFAULT);
	FUZZ_CHECK(gslb_nettree_set_nets(b, f->e, f->n, NULL) == 0);
	gslb_nettree_t *t = gslb_nettree_build(b);
	for (size_t i = 0; i < f->n; i++) {
		steer_prefix_t q;
		normalize(&f->e[i].prefix, &q);
		q.len = q.family == AF_INET ? 32 : 128; /* the prefix's first address */
		/* Longest prefix containing it wins, the later one among equals. */
		uint32_t want = DEFAULT;
		int best = -1;
		for (size_t j = 0; j < f->n; j++) {
			steer_prefix_t p;
			normalize(&f->e[j].prefix, &p);
			if (contains(&p, &q) && (int)p.len >= best) {
				best = p.len;
				want = f->e[j].value;
			}
		}
		uint8_t scope, scope2;
		uint32_t v = gslb_nettree_lookup(t, q.family, q.addr, &scope);
		FUZZ_CHECK(v == want);
		FUZZ_CHECK(scope <= (q.family == AF_INET ? 32 : 128));
		/* The scope block is one block: asking for it as a source prefix agrees. */
		FUZZ_CHECK(gslb_nettree_lookup_prefix(t, q.family, q.addr, scope, &scope2) == v);
		FUZZ_CHECK(scope2 == scope);
	}
	gslb_nettree_free(t);
}

static bool same(const steer_prefix_t *p, const steer_prefix_t *q)
{
	return p->family == q->family && p->len == q->len && contains(p, q);
}

/* One inline nets entry per prefix (config line = file line), value line % 8. */
static void check_set(const fuzz_nets_t *f)
{
	static conf_nets_t nets[MAX_ENTRIES];
	static steer_prefix_t cidr[MAX_ENTRIES];
	static uint32_t values[MAX_ENTRIES];
	static steer_prefix_t norm[MAX_ENTRIES];
	bool conflict = false;
	for (size_t i = 0; i < f->n; i++) {
		cidr[i] = f->e[i].prefix;
		normalize(&cidr[i], &norm[i]);
		values[i] = f->e[i].value;
		nets[i] = (conf_nets_t){.cidr = &cidr[i], .n_cidr = 1, .line = (unsigned)i + 1};
		for (size_t j = 0; j < i; j++)
			conflict |= same(&norm[i], &norm[j]) && values[i] != values[j];
	}
	conf_map_t map = {.name = "fuzz", .nets = nets, .n_nets = f->n};
	gslb_nets_opts_t opts = {.map = "fuzz", .conf_path = "fuzz.yaml"};
	steer_warnings_t w = {0};
	gslb_nets_set_t *set = NULL;
	char err[256];
	int ret = gslb_nets_set_build(&map, values, &opts, &w, &set, err, sizeof(err));
	steer_warnings_clear(&w);
	FUZZ_CHECK((ret == STEER_ECONF) == conflict);
	FUZZ_CHECK((ret == 0) == (set != NULL));
	if (ret != 0) {
		FUZZ_CHECK(strncmp(err, "fuzz.yaml:", 10) == 0);
		return;
	}
	for (size_t i = 0; i < f->n; i++) {
		steer_prefix_t q = norm[i];
		q.len = q.family == AF_INET ? 32 : 128;
		size_t want = SIZE_MAX; /* longest containing prefix, the first among equals */
		for (size_t j = 0; j < f->n; j++)
			if (contains(&norm[j], &q) &&
			    (want == SIZE_MAX || norm[j].len > norm[want].len))
				want = j;
		const gslb_nets_item_t *it = gslb_nets_set_lookup(set, q.family, q.addr, q.len);
		FUZZ_CHECK(it != NULL && want != SIZE_MAX);
		FUZZ_CHECK(it->line == want + 1 && it->value == values[want]);
		FUZZ_CHECK(same(&it->prefix, &norm[want]));
	}
	gslb_nets_set_free(set);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static fuzz_nets_t f;
	char err[128];
	f.n = 0;
	f.calls = 0;
	f.last_line = 0;
	gslb_nets_stats_t st;
	int ret =
	    gslb_nets_parse("fuzz", (const char *)data, size, collect, &f, &st, err, sizeof(err));
	FUZZ_CHECK(st.prefixes == f.calls && st.prefixes <= st.lines);
	if (ret != 0) {
		FUZZ_CHECK(strncmp(err, "fuzz:", 5) == 0);
		return 0;
	}
	check_tree(&f);
	check_set(&f);
	return 0;
}
