/*
 * Fuzz target: the path table and demand decoders (gslb/pathfmt), and the merged table built
 * from what the table decoder accepts (gslb/paths). Besides sanitizer findings it checks what
 * the code promises: a rejection leaves nothing to free and says why; an accepted body is
 * canonical (it re-encodes to the same bytes), its rows are sorted with no host bits; and the
 * merged table finds a row for every accepted prefix at or finer than its granularity, and
 * a rebuild that reuses the column equals the first build.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "gslb/pathfmt.h"
#include "gslb/paths.h"
#include "fuzz.h"

#define MAX_ROWS 65536 /* keeps each input fast; the limit itself is tested too */

static void addr_of(uint64_t key, bool v6, uint8_t addr[16])
{
	memset(addr, 0, 16);
	for (unsigned i = 0; i < (v6 ? 8u : 4u); i++)
		addr[i] = (uint8_t)(key >> (56 - 8 * i));
}

/* A rebuild that reuses the column keeps its rows and cells; only a row whose rounded-up age
 * passes path-ttl may go. */
static void check_reuse(const gslb_paths_t *p, const gslb_paths_opts_t *o, uint64_t now_ms)
{
	gslb_paths_site_t reuse = {.reuse = true};
	char err[256];
	gslb_paths_t *again = gslb_paths_build(p, &reuse, o, now_ms, err, sizeof(err));
	FUZZ_CHECK(again != NULL);
	gslb_paths_info_t info, first;
	gslb_paths_info(p, &first);
	gslb_paths_info(again, &info);
	FUZZ_CHECK(info.rows4 <= first.rows4 && info.rows6 <= first.rows6);
	for (uint32_t r = 0; r < first.rows4 + first.rows6; r++) {
		int family;
		uint8_t addr[16];
		unsigned plen;
		uint32_t at;
		gslb_paths_row_prefix(p, r, &family, addr, &plen);
		gslb_path_cell_t x = gslb_paths_cell(p, r, 0);
		if (!gslb_paths_lookup(again, family, addr, &at)) {
			FUZZ_CHECK(x.age_s > o->path_ttl_s - o->path_ttl_s / 16);
			continue;
		}
		gslb_path_cell_t y = gslb_paths_cell(again, at, 0);
		FUZZ_CHECK(x.rtt == y.rtt && x.age_s == y.age_s && x.empty == y.empty);
		FUZZ_CHECK(gslb_paths_row_best(p, r) == gslb_paths_row_best(again, at));
	}
	gslb_paths_unref(again);
}

/* Every row of a fresh table at /24 (/48) or finer is found, with a cell in column 0. */
static void check_merged(const gslb_path_table_t *t)
{
	static const size_t column_dc[1] = {0};
	gslb_paths_site_t site = {.table = t, .fetched_ms = t->generated_ms, .changed = true};
	gslb_paths_opts_t o = {.ipv4_prefix = 24,
	                       .ipv6_prefix = 48,
	                       .path_ttl_s = 65535,
	                       .max_rows = MAX_ROWS,
	                       .margin_pct = 20,
	                       .min_difference_100us = 100,
	                       .rounds = 2,
	                       .column_dc = column_dc,
	                       .n_columns = 1,
	                       .n_datacenters = 1};
	char err[256];
	gslb_paths_t *p = gslb_paths_build(NULL, &site, &o, t->generated_ms, err, sizeof(err));
	FUZZ_CHECK(p != NULL);
	gslb_paths_info_t info;
	gslb_paths_info(p, &info);
	FUZZ_CHECK(info.rows4 <= t->n4 && info.rows6 <= t->n6);
	FUZZ_CHECK(info.cells == info.rows4 + info.rows6);
	for (int v6 = 0; v6 < 2; v6++) {
		const gslb_path_row_t *rows = v6 ? t->rows6 : t->rows4;
		size_t n = v6 ? t->n6 : t->n4;
		for (size_t i = 0; i < n; i++) {
			uint8_t addr[16];
			uint32_t row;
			addr_of(rows[i].prefix, v6, addr);
			if (rows[i].plen < (v6 ? 48 : 24))
				continue; /* coarser than the rows: not used */
			FUZZ_CHECK(gslb_paths_lookup(p, v6 ? AF_INET6 : AF_INET, addr, &row));
			gslb_path_cell_t c = gslb_paths_cell(p, row, 0);
			FUZZ_CHECK(!c.empty && c.rtt <= rows[i].rtt);
			unsigned best = gslb_paths_row_best(p, row);
			FUZZ_CHECK(best ==
			           (c.rtt == GSLB_PATHFMT_RTT_NONE ? GSLB_PATHS_NO_COLUMN : 0));
		}
	}
	check_reuse(p, &o, t->generated_ms);
	gslb_paths_unref(p);
}

static void check_rows(const gslb_path_row_t *rows, size_t n, bool v6)
{
	for (size_t i = 0; i < n; i++) {
		const gslb_path_row_t *r = &rows[i];
		FUZZ_CHECK(r->plen >= (v6 ? 16 : 8) && r->plen <= (v6 ? 64 : 32));
		FUZZ_CHECK(r->loss <= 100);
		FUZZ_CHECK(i == 0 || rows[i - 1].prefix < r->prefix ||
		           (rows[i - 1].prefix == r->prefix && rows[i - 1].plen < r->plen));
	}
}

static void fuzz_table(const uint8_t *data, size_t size)
{
	gslb_path_table_t t;
	char err[256] = "";
	if (gslb_pathfmt_decode_table(data, size, MAX_ROWS, &t, err, sizeof(err)) != 0) {
		FUZZ_CHECK(err[0] != '\0');
		FUZZ_CHECK(t.rows4 == NULL && t.rows6 == NULL && t.n4 == 0 && t.n6 == 0);
		return;
	}
	check_rows(t.rows4, t.n4, false);
	check_rows(t.rows6, t.n6, true);
	FUZZ_CHECK(gslb_pathfmt_table_size(&t) == size);
	uint8_t *again = malloc(size);
	FUZZ_CHECK(again != NULL);
	FUZZ_CHECK(gslb_pathfmt_encode_table(&t, again, size) == size);
	FUZZ_CHECK(memcmp(again, data, size) == 0);
	free(again);
	if (t.n4 + t.n6 > 0) {
		gslb_path_table_t small;
		FUZZ_CHECK(gslb_pathfmt_decode_table(data, size, t.n4 + t.n6 - 1, &small, err,
		                                     sizeof(err)) != 0);
	}
	check_merged(&t);
	gslb_pathfmt_table_free(&t);
}

static void fuzz_demand(const uint8_t *data, size_t size)
{
	gslb_demand_t d;
	char err[256] = "";
	if (gslb_pathfmt_decode_demand(data, size, MAX_ROWS, &d, err, sizeof(err)) != 0) {
		FUZZ_CHECK(err[0] != '\0');
		FUZZ_CHECK(d.rows == NULL && d.n == 0);
		return;
	}
	for (size_t i = 0; i < d.n; i++) {
		const gslb_demand_row_t *r = &d.rows[i];
		FUZZ_CHECK(r->family == 4 || r->family == 6);
		FUZZ_CHECK((r->flags & ~(GSLB_DEMAND_ECS | GSLB_DEMAND_URGENT)) == 0);
		int family = r->family == 4 ? AF_INET : AF_INET6;
		FUZZ_CHECK(gslb_pathfmt_key(family, r->prefix, r->plen) ==
		           gslb_pathfmt_key(family, r->probe, r->plen));
	}
	FUZZ_CHECK(gslb_pathfmt_demand_size(&d) == size);
	uint8_t *again = malloc(size);
	FUZZ_CHECK(again != NULL);
	FUZZ_CHECK(gslb_pathfmt_encode_demand(&d, again, size) == size);
	FUZZ_CHECK(memcmp(again, data, size) == 0);
	free(again);
	gslb_pathfmt_demand_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_table(data, size);
	fuzz_demand(data, size);
	return 0;
}
