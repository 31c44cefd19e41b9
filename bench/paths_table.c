/*
 * paths_table: cost of the measured-path table on a DNS node (src/gslb/pathfmt, paths): decode
 * of the agents' bodies, the merge into the served table, the rebuild that carries the
 * hysteresis from the previous table (what a node does every fetch round), the same with the
 * unchanged sites' columns reused from the previous table (a node that frees each decoded
 * table once built), lookups per second, and memory.
 *
 *   paths_table [-n PREFIXES] [-s SITES] [-6 PERCENT] [-r SEED]
 *
 * Defaults: 1,000,000 prefixes (10 % IPv6 /48, the rest IPv4 /24 spread like client
 * resolvers: clustered in blocks), 8 sites, every site measuring every prefix (the worst
 * case: all cells full). Each site's table is encoded as the agent would serve it; the timed
 * parts are what the node does with the bodies. Prints one line per stage with VmRSS and
 * VmHWM from /proc/self/status, then a summary line.
 */
#include <arpa/inet.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "gslb/pathfmt.h"
#include "gslb/paths.h"

#define LOOKUPS (4u << 20)

static uint64_t rng_state;

/* splitmix64: deterministic across platforms, so runs are comparable. */
static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of the process: on a shared machine the wall clock also counts other programs. */
static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_mark;

/* VmRSS and VmHWM in KiB. */
static void rss(long *cur, long *peak)
{
	*cur = *peak = -1;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return;
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "VmRSS:", 6) == 0)
			*cur = atol(line + 6);
		else if (strncmp(line, "VmHWM:", 6) == 0)
			*peak = atol(line + 6);
	}
	fclose(f);
}

/* One stage's line: wall ms (@p ms), CPU ms since the last stage, memory. The heap is trimmed
 * first, so VmRSS is what is live rather than what free() kept for later. */
static void stage(const char *what, double ms)
{
	malloc_trim(0);
	long cur, peak;
	rss(&cur, &peak);
	double cpu = cpu_s();
	printf("%-32s wall %7.1f ms  cpu %7.1f ms  VmRSS %6.1f MiB  VmHWM %6.1f MiB\n", what, ms,
	       (cpu - cpu_mark) * 1e3, cur / 1024.0, peak / 1024.0);
	cpu_mark = cpu;
}

static int cmp_key(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Keys from @p from on: IPv4 /24s in runs of up to 64 (ISP blocks) or IPv6 /48s. */
static void more_keys(uint64_t *keys, size_t from, size_t n, bool v6)
{
	size_t i = from;
	while (i < n) {
		uint64_t base = rng();
		size_t run = 1 + rng() % 64;
		for (size_t j = 0; j < run && i < n; j++, i++) {
			if (v6)
				keys[i] =
				    (0x2000000000000000ull | (base >> 3)) + ((uint64_t)j << 16);
			else
				keys[i] = ((base & 0xffffff00ull) + ((uint64_t)j << 8)) << 32;
			keys[i] &= v6 ? ~0xffffull : 0xffffff0000000000ull;
		}
	}
}

/* @p n sorted unique keys (fewer only when the space is too small). */
static size_t make_keys(uint64_t *keys, size_t n, bool v6)
{
	size_t have = 0;
	for (int tries = 0; have < n && tries < 20; tries++) {
		more_keys(keys, have, n, v6);
		qsort(keys, n, sizeof(*keys), cmp_key);
		have = 0;
		for (size_t i = 0; i < n; i++) {
			if (have == 0 || keys[have - 1] != keys[i])
				keys[have++] = keys[i];
		}
	}
	return have;
}

static void fill_rows(gslb_path_row_t *rows, const uint64_t *keys, size_t n, bool v6, unsigned site)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rng();
		rows[i] = (gslb_path_row_t){.prefix = keys[i],
		                            .plen = v6 ? 48 : 24,
		                            .loss = (uint8_t)(r % 4),
		                            .rtt = (uint16_t)(50 + site * 40 + (r >> 8) % 800),
		                            .hops = (uint8_t)(8 + (r >> 20) % 12),
		                            .answered = 3,
		                            .age_s = (uint16_t)((r >> 32) % 600)};
	}
}

/*
 * ns per lookup of a client address plus reading its sticky best's cell, what an rtt decision
 * costs. @p hot 0: uniform over all IPv4 rows, half the addresses outside any row; else the
 * addresses fall in @p hot rows (a busy node's resolvers), all hits.
 */
static double lookups(const gslb_paths_t *p, const gslb_path_table_t *t, size_t hot, size_t sites)
{
	uint8_t(*addrs)[4] = xmalloc(LOOKUPS * sizeof(*addrs));
	size_t span = hot && hot < t->n4 ? hot : t->n4;
	size_t stride = span && hot ? t->n4 / span : 1;
	for (size_t i = 0; i < LOOKUPS; i++) {
		uint32_t a = (uint32_t)rng();
		if ((hot || i % 2) && span) {
			size_t row = (size_t)(rng() % span) * stride;
			a = (uint32_t)(t->rows4[row].prefix >> 32) | (a & 0xff);
		}
		uint32_t be = htonl(a);
		memcpy(addrs[i], &be, 4);
	}
	volatile uint64_t sink = 0;
	double t0 = now_s();
	for (size_t i = 0; i < LOOKUPS; i++) {
		uint32_t row;
		if (gslb_paths_lookup(p, AF_INET, addrs[i], &row))
			sink += gslb_paths_cell(p, row, gslb_paths_row_best(p, row) % sites).rtt;
	}
	double ns = (now_s() - t0) * 1e9 / LOOKUPS;
	free(addrs);
	(void)sink;
	return ns;
}

int main(int argc, char **argv)
{
	size_t n = 1000000, sites = 8;
	unsigned v6_pct = 10;
	rng_state = 1;
	int opt;
	while ((opt = getopt(argc, argv, "n:s:6:r:")) != -1) {
		switch (opt) {
		case 'n':
			n = strtoul(optarg, NULL, 10);
			break;
		case 's':
			sites = strtoul(optarg, NULL, 10);
			break;
		case '6':
			v6_pct = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'r':
			rng_state = strtoull(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr, "usage: paths_table [-n PREFIXES] [-s SITES] [-6 PERCENT] "
			                "[-r SEED]\n");
			return 2;
		}
	}
	if (sites == 0 || sites > GSLB_PATHS_COLUMNS_MAX || v6_pct > 100) {
		fprintf(stderr, "paths_table: 1..%d sites, IPv6 share 0..100\n",
		        GSLB_PATHS_COLUMNS_MAX);
		return 2;
	}
	stage("start", 0);
	size_t want6 = n * v6_pct / 100, want4 = n - want6;
	uint64_t *k4 = xmalloc((want4 + 1) * sizeof(*k4)), *k6 = xmalloc((want6 + 1) * sizeof(*k6));
	size_t n4 = make_keys(k4, want4, false), n6 = make_keys(k6, want6, true);

	/* The agents' side: one encoded body per site, as the node receives them. */
	uint8_t **bodies = xcalloc(sites, sizeof(*bodies));
	size_t *lens = xcalloc(sites, sizeof(*lens));
	gslb_path_row_t *r4 = xmalloc((n4 + 1) * sizeof(*r4)),
	                *r6 = xmalloc((n6 + 1) * sizeof(*r6));
	const uint64_t generated_ms = 1764660000000ull;
	for (unsigned s = 0; s < sites; s++) {
		fill_rows(r4, k4, n4, false, s);
		fill_rows(r6, k6, n6, true, s);
		gslb_path_table_t t = {
		    .generated_ms = generated_ms, .rows4 = r4, .n4 = n4, .rows6 = r6, .n6 = n6};
		snprintf(t.name, sizeof(t.name), "dc%u", s + 1);
		double t0 = now_s();
		size_t size = gslb_pathfmt_table_size(&t);
		bodies[s] = xmalloc(size);
		lens[s] = gslb_pathfmt_encode_table(&t, bodies[s], size);
		if (lens[s] != size) {
			fprintf(stderr, "paths_table: encoder refused site %u\n", s);
			return 1;
		}
		if (s == 0)
			printf("encode one site (%zu rows, %.1f MiB)  %9.1f ms\n", n4 + n6,
			       size / 1048576.0, (now_s() - t0) * 1e3);
	}
	free(r4);
	free(r6);
	free(k4);
	free(k6);
	stage("bodies encoded (agents' side)", 0);
	cpu_mark = cpu_s();

	gslb_path_table_t *tables = xcalloc(sites, sizeof(*tables));
	char err[256];
	double t0 = now_s();
	for (unsigned s = 0; s < sites; s++) {
		if (gslb_pathfmt_decode_table(bodies[s], lens[s], n + 1, &tables[s], err,
		                              sizeof(err)) != 0) {
			fprintf(stderr, "paths_table: decode: %s\n", err);
			return 1;
		}
	}
	double decode_ms = (now_s() - t0) * 1e3;
	stage("decode all sites", decode_ms);
	for (unsigned s = 0; s < sites; s++)
		free(bodies[s]);
	stage("bodies freed", 0);
	cpu_mark = cpu_s();

	size_t column_dc[GSLB_PATHS_COLUMNS_MAX];
	gslb_paths_site_t in[GSLB_PATHS_COLUMNS_MAX];
	for (unsigned s = 0; s < sites; s++) {
		column_dc[s] = s;
		in[s] = (gslb_paths_site_t){
		    .table = &tables[s], .fetched_ms = generated_ms, .changed = true};
	}
	gslb_paths_opts_t o = {.ipv4_prefix = 24,
	                       .ipv6_prefix = 48,
	                       .path_ttl_s = 2400,
	                       .max_rows = (unsigned)n,
	                       .margin_pct = 20,
	                       .min_difference_100us = 100,
	                       .rounds = 2,
	                       .column_dc = column_dc,
	                       .n_columns = sites,
	                       .n_datacenters = sites};
	uint64_t now_ms = generated_ms + 1500;
	t0 = now_s();
	gslb_paths_t *p = gslb_paths_build(NULL, in, &o, now_ms, err, sizeof(err));
	double build_ms = (now_s() - t0) * 1e3;
	if (!p) {
		fprintf(stderr, "paths_table: build: %s\n", err);
		return 1;
	}
	stage("build (no previous table)", build_ms);

	/* The next round: one site's RTTs moved; the rest unchanged. */
	for (size_t i = 0; i < tables[0].n4; i++)
		tables[0].rows4[i].rtt = (uint16_t)(tables[0].rows4[i].rtt / 2);
	for (unsigned s = 1; s < sites; s++)
		in[s].changed = false;
	t0 = now_s();
	gslb_paths_t *next = gslb_paths_build(p, in, &o, now_ms + 2000, err, sizeof(err));
	double rebuild_ms = (now_s() - t0) * 1e3;
	stage("rebuild with prev (both held)", rebuild_ms);
	gslb_paths_unref(p);
	p = next;
	stage("previous table dropped", 0);

	/* A node that keeps no decoded tables: the unchanged sites' columns come from prev. */
	for (unsigned s = 1; s < sites; s++) {
		gslb_pathfmt_table_free(&tables[s]);
		in[s] = (gslb_paths_site_t){.reuse = true};
	}
	stage("decoded tables of sites 2.. freed", 0);
	t0 = now_s();
	next = gslb_paths_build(p, in, &o, now_ms + 4000, err, sizeof(err));
	double reuse_ms = (now_s() - t0) * 1e3;
	stage("rebuild reusing 7 columns", reuse_ms);
	gslb_paths_unref(p);
	p = next;
	stage("previous table dropped", 0);

	double uniform_ns = lookups(p, &tables[0], 0, sites);
	double hot_ns = lookups(p, &tables[0], 1000, sites);

	gslb_paths_info_t info;
	gslb_paths_info(p, &info);
	printf("rows %zu (IPv4 %zu, IPv6 %zu) x %zu sites, cells %zu, table %.1f MiB, "
	       "build_us %u, sticky held %zu\n",
	       info.rows4 + info.rows6, info.rows4, info.rows6, sites, info.cells,
	       info.bytes / 1048576.0, info.build_us, info.sticky_held);
	printf("lookup + best + its cell: %.1f ns uniform over all rows (half miss), %.1f ns over "
	       "1,000 hot rows\n",
	       uniform_ns, hot_ns);
	long cur, peak;
	rss(&cur, &peak);
	printf("summary: decode %.0f ms, build %.0f ms, rebuild %.0f ms (reusing %.0f ms), "
	       "table %.1f MiB, "
	       "lookup %.1f / %.1f ns (uniform / hot), VmHWM %.1f MiB\n",
	       decode_ms, build_ms, rebuild_ms, reuse_ms, info.bytes / 1048576.0, uniform_ns,
	       hot_ns, peak / 1024.0);
	gslb_paths_unref(p);
	for (unsigned s = 0; s < sites; s++)
		gslb_pathfmt_table_free(&tables[s]);
	free(tables);
	free(bodies);
	free(lens);
	return 0;
}
