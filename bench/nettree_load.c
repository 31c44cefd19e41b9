/*
 * nettree_load: load time, peak RSS and lookup rate of a big nets map (src/gslb/nettree and
 * nets_file), the number gdnsd is weak at (2.2 s and 265 MiB for 500,000 CIDRs).
 *
 *   nettree_load [-n CIDRS] [-s SEED] [-f FILE] [-o FILE] [-u]
 *
 * Without -f it writes a nets file of CIDRS lines (default 500,000) with a deterministic seed
 * to a temporary file (-o keeps it at FILE), shaped like operators' per-ISP lists: prefixes
 * clustered in allocation blocks, /8../24 IPv4 weighted towards /24 as in BGP tables, ~10%
 * IPv6 /32../48, and each prefix's value (one of 10 datacenter lists) decided by its block
 * with some noise. -u spreads IPv4 prefixes uniformly instead (a worst case for node count).
 * The timed part is what a reload does: read and parse the file, apply the entries
 * (gslb_nettree_set_nets), build. Then random lookups are timed. Prints one line.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "gslb/nets_file.h"
#include "gslb/nettree.h"

#define LISTS     10
#define LOOKUPS   (4u << 20)
#define DEFAULT_N 500000u

static uint64_t rng_state;

/* splitmix64: deterministic across platforms, so runs are comparable. */
static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t hash32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	return x ^ (x >> 16);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long peak_rss_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* BGP-table-like length mix: mostly /24, then /22-/23, /16-/21, a few /8-/15. */
static unsigned v4_len(void)
{
	unsigned r = (unsigned)(rng() % 100);
	if (r < 55)
		return 24;
	if (r < 75)
		return 22 + (unsigned)(rng() % 2);
	if (r < 95)
		return 16 + (unsigned)(rng() % 6);
	return 8 + (unsigned)(rng() % 8);
}

static void write_v4(FILE *f, bool uniform, uint32_t block)
{
	unsigned len = v4_len();
	uint32_t a = uniform ? (uint32_t)rng() : block | ((uint32_t)rng() & 0x000fffffu);
	a &= ~0u << (32 - len);
	fprintf(f, "%u.%u.%u.%u/%u\n", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255, len);
}

static void write_v6(FILE *f)
{
	static const unsigned tops[] = {0x2001, 0x2400, 0x2401, 0x2402, 0x2403, 0x2404, 0x2405,
	                                0x2406, 0x2407, 0x240e, 0x2a00, 0x2a01, 0x2a02, 0x2600};
	unsigned len = 32 + (unsigned)(rng() % 17);
	unsigned top = tops[rng() % (sizeof(tops) / sizeof(tops[0]))];
	unsigned g2 = (unsigned)(rng() % 4096), g3 = (unsigned)rng() & 0xffff;
	if (len < 48)
		g3 &= 0xffffu << (48 - len);
	fprintf(f, "%x:%x:%x::/%u\n", top, g2, g3, len);
}

static int generate(const char *path, unsigned n, bool uniform)
{
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		perror(path);
		return -1;
	}
	fprintf(f, "# nettree_load: %u generated CIDRs\n", n);
	uint32_t block = 0;
	for (unsigned i = 0; i < n; i++) {
		/* A new /12 allocation block every ~100 lines, in public-looking space. */
		if (i % 100 == 0)
			block =
			    ((uint32_t)(1 + rng() % 222) << 24) | (((uint32_t)rng() & 0xf0) << 16);
		if (rng() % 10 == 0)
			write_v6(f);
		else
			write_v4(f, uniform, block);
	}
	return fclose(f) == 0 ? 0 : -1;
}

typedef struct {
	gslb_nettree_entry_t *e;
	size_t n, cap;
} entries_t;

/* The list a prefix belongs to: its /12 block's, with 10% noise, like per-ISP files. */
static uint32_t value_of(const steer_prefix_t *p)
{
	uint32_t top, whole;
	memcpy(&top, p->addr, 4);
	memcpy(&whole, p->addr + (p->family == AF_INET ? 0 : 4), 4);
	top = ntohl(top) >> 20;
	if (hash32(ntohl(whole) ^ p->len) % 10 == 0)
		return hash32(ntohl(whole)) % LISTS;
	return hash32(top) % LISTS;
}

static int entry_cb(void *ctx, const steer_prefix_t *prefix, unsigned line)
{
	(void)line;
	entries_t *c = ctx;
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 65536;
		gslb_nettree_entry_t *grown = realloc(c->e, c->cap * sizeof(*c->e));
		if (grown == NULL)
			return STEER_ENOMEM;
		c->e = grown;
	}
	c->e[c->n].prefix = *prefix;
	c->e[c->n].value = value_of(prefix);
	c->n++;
	return 0;
}

static double lookup_rate(const gslb_nettree_t *t, int family, uint64_t *sink)
{
	uint8_t(*addrs)[16] = malloc(LOOKUPS * sizeof(*addrs));
	if (addrs == NULL)
		return 0;
	for (unsigned i = 0; i < LOOKUPS; i++) {
		uint64_t r1 = rng(), r2 = rng();
		memcpy(addrs[i], &r1, 8);
		memcpy(addrs[i] + 8, &r2, 8);
		if (family == AF_INET6) /* where the IPv6 prefixes are */
			addrs[i][0] = (i & 1) ? 0x24 : 0x2a;
	}
	double t0 = now();
	uint64_t sum = 0;
	for (unsigned i = 0; i < LOOKUPS; i++) {
		uint8_t scope;
		sum += gslb_nettree_lookup(t, family, addrs[i], &scope) + scope;
	}
	double dt = now() - t0;
	*sink += sum;
	free(addrs);
	return LOOKUPS / dt;
}

int main(int argc, char **argv)
{
	unsigned n = DEFAULT_N;
	uint64_t seed = 1;
	const char *file = NULL, *out = NULL;
	bool uniform = false;
	int opt;
	while ((opt = getopt(argc, argv, "n:s:f:o:u")) != -1) {
		switch (opt) {
		case 'n':
			n = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 10);
			break;
		case 'f':
			file = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'u':
			uniform = true;
			break;
		default:
			fprintf(stderr, "usage: %s [-n CIDRS] [-s SEED] [-f FILE] [-o FILE] [-u]\n",
			        argv[0]);
			return 2;
		}
	}
	char tmp[] = "/tmp/nettree_load_XXXXXX";
	if (file == NULL) {
		rng_state = seed;
		if (out == NULL) {
			int fd = mkstemp(tmp);
			if (fd < 0) {
				perror("mkstemp");
				return 1;
			}
			close(fd);
			out = tmp;
		}
		if (generate(out, n, uniform) != 0)
			return 1;
		file = out;
	}
	long rss0 = peak_rss_kib();

	double t0 = now();
	entries_t c = {0};
	gslb_nets_stats_t st;
	char err[256];
	int ret = gslb_nets_file_read(file, entry_cb, &c, &st, err, sizeof(err));
	if (ret != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	double t1 = now();
	gslb_nettree_builder_t *b = gslb_nettree_builder_new(0);
	size_t bad = 0;
	if (gslb_nettree_set_nets(b, c.e, c.n, &bad) != 0) {
		fprintf(stderr, "entry %zu rejected\n", bad);
		return 1;
	}
	double t2 = now();
	gslb_nettree_t *t = gslb_nettree_build(b);
	double t3 = now();
	long rss1 = peak_rss_kib();
	free(c.e);
	if (out == tmp)
		unlink(tmp);

	uint64_t sink = 0;
	rng_state = seed + 1;
	double v4 = lookup_rate(t, AF_INET, &sink), v6 = lookup_rate(t, AF_INET6, &sink);
	printf("nettree_load: cidrs=%zu load=%.3fs (parse %.3f set %.3f "
	       "build %.3f) peak_rss=%.1fMiB (before load %.1fMiB) nodes=%zu tree=%.1fMiB "
	       "lookups v4=%.1fM/s v6=%.1fM/s (%llu)\n",
	       c.n, t3 - t0, t1 - t0, t2 - t1, t3 - t2, rss1 / 1024.0, rss0 / 1024.0,
	       gslb_nettree_nodes(t), gslb_nettree_memory(t) / 1048576.0, v4 / 1e6, v6 / 1e6,
	       (unsigned long long)(sink & 0xff));
	gslb_nettree_free(t);
	return 0;
}
