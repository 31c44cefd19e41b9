/*
 * The merged path table (paths.h). Layout, chosen for the query path and for memory (a
 * million rows of eight columns in well under 48 MiB):
 *
 *   keys4[n4] (u32), keys6[n6] (u64)   sorted row keys; rows 0..n4-1 are IPv4, then IPv6
 *   index4/index6[65537]               first row of each bucket of 16 key bits
 *   rows[n4 + n6], 3 + 5 x columns     best | challenger | count (the hysteresis state) then
 *                                      per column rtt u16 | loss u8 (0xff = empty) | hops u8
 *                                      | age u8; one block per row, so a decision reads its
 *                                      row's sticky best and cells from one or two lines
 *
 * The 16 index bits are the first bits in which the family's keys differ (all keys inside
 * 10.0.0.0/8 index on bits 8..23), so a lookup is one index read and a binary search inside a
 * small, contiguous bucket. Ages are stored as an 8-bit minifloat (exact up to 31 s, then
 * within 1/16): a cell's exact age only decides staleness, and that is decided at build time.
 *
 * Built on the control thread by a k-way merge of the columns' site tables (each sorted by
 * the decoder), in two passes: the first counts the rows and how fresh they are, so memory is
 * allocated once at its final size and max_rows keeps the freshest; the second fills them.
 */
#include "gslb/paths.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

#include "base/alloc.h"
#include "base/err.h"

#define CELL_BYTES 5
#define ROW_STATE  3    /* best, challenger, count */
#define LOSS_EMPTY 0xff /* loss is 0..100, so this marks a cell without a measurement */
#define INDEX_BITS 16
#define INDEX_SIZE ((1u << INDEX_BITS) + 1)
#define AGE_CODES  256
#define COUNT_MAX  255 /* the challenger's rounds, u8 */
#define FRESH_NONE UINT32_MAX

struct gslb_paths {
	unsigned refs;
	unsigned plen4, plen6;
	size_t n4, n6;
	uint32_t *keys4;
	uint64_t *keys6;
	uint32_t *index4, *index6;
	unsigned lead4, lead6; /* key bits all keys share, skipped by the index */
	uint8_t *rows;
	size_t stride; /* bytes per row */
	size_t n_columns;
	size_t column_dc[GSLB_PATHS_COLUMNS_MAX];
	uint64_t column_gen_ms[GSLB_PATHS_COLUMNS_MAX];  /* the site table's generated_ms */
	bool column_fed[GSLB_PATHS_COLUMNS_MAX];         /* the column had a site table */
	uint32_t column_elapsed[GSLB_PATHS_COLUMNS_MAX]; /* its age at build time, seconds */
	uint8_t *dc_column;                              /* n_datacenters entries */
	size_t n_datacenters;
	gslb_paths_info_t info;
};

STEER_PRINTF(3, 4) static void fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static uint64_t monotonic_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

#define HUGE_PAGE (2u << 20)

/*
 * Memory for the big arrays (keys, rows): aligned to and advised for transparent huge pages
 * where the kernel offers them on request, because a lookup touches three random places of a
 * table of tens of MiB and with 4 KiB pages each is also a TLB miss, and a build takes
 * thousands fewer page faults. Adds the bytes taken to @p bytes. Free with free().
 */
static void *big_alloc(size_t size, size_t *bytes)
{
	void *p = NULL;
	size_t rounded = (size + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
	if (size < HUGE_PAGE || posix_memalign(&p, HUGE_PAGE, rounded) != 0) {
		*bytes += size;
		return xmalloc(size ? size : 1);
	}
	(void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: 4 KiB pages work too */
	*bytes += rounded;
	return p;
}

static uint64_t top_bits(uint64_t v, unsigned plen)
{
	return plen == 0 ? 0 : plen >= 64 ? v : v & ~(UINT64_MAX >> plen);
}

/* ---- ages as 8-bit minifloats: 4 exponent bits, 4 mantissa bits ---------------------------- */

static uint8_t age_code(uint32_t age)
{
	if (age > UINT16_MAX)
		age = UINT16_MAX;
	if (age < 16)
		return (uint8_t)age;
	unsigned high = 31u - (unsigned)__builtin_clz(age); /* 4..15 */
	unsigned exp = high - 3, mant = (age >> (exp - 1)) - 16;
	return (uint8_t)(exp << 4 | mant);
}

static uint32_t age_value(uint8_t code)
{
	unsigned exp = code >> 4, mant = code & 15u;
	return exp == 0 ? mant : (16u + mant) << (exp - 1);
}

/* Rounded up: a reused column's cells then go stale early rather than late. */
static uint8_t age_code_up(uint32_t age)
{
	uint8_t code = age_code(age);
	return age_value(code) < age && code < UINT8_MAX ? (uint8_t)(code + 1) : code;
}

/* ---- cells ------------------------------------------------------------------------------- */

/* keys as u64 with the family's bits at the top: IPv4 keys shifted by 32. */
static uint64_t key_at(const gslb_paths_t *p, bool v6, size_t i)
{
	return v6 ? p->keys6[i] : (uint64_t)p->keys4[i] << 32;
}

static uint8_t *row_at(const gslb_paths_t *p, size_t row)
{
	return p->rows + row * p->stride;
}

static uint8_t *cell_at(const gslb_paths_t *p, size_t row, unsigned column)
{
	return row_at(p, row) + ROW_STATE + column * CELL_BYTES;
}

enum { STATE_BEST, STATE_CHALLENGER, STATE_COUNT };

/* The cell of agent row @p r; its age is kept as the agent's (age_s, at generated_ms). */
static void cell_put(uint8_t *c, const gslb_path_row_t *r)
{
	memcpy(c, &r->rtt, 2);
	c[2] = r->loss;
	c[3] = r->hops;
	c[4] = age_code_up(r->age_s);
}

static uint16_t cell_rtt(const uint8_t *c)
{
	uint16_t rtt;
	memcpy(&rtt, c, 2);
	return rtt;
}

/* The RTT the hysteresis compares: none for empty cells and prefixes that never answered. */
static uint16_t usable_rtt(const gslb_paths_t *p, size_t row, unsigned column)
{
	const uint8_t *c = cell_at(p, row, column);
	return c[2] == LOSS_EMPTY ? GSLB_PATHFMT_RTT_NONE : cell_rtt(c);
}

/* A cell's age at build time: the agent's age plus the site table's, saturating. */
static uint32_t age_total(const gslb_paths_t *p, const uint8_t *c, unsigned column)
{
	uint32_t age = age_value(c[4]) + p->column_elapsed[column];
	return age > UINT16_MAX ? UINT16_MAX : age;
}

gslb_path_cell_t gslb_paths_cell(const gslb_paths_t *p, uint32_t row, unsigned column)
{
	gslb_path_cell_t out = {.rtt = GSLB_PATHFMT_RTT_NONE, .empty = true};
	STEER_ASSERT(row < p->n4 + p->n6);
	if (column >= p->n_columns)
		return out;
	const uint8_t *c = cell_at(p, row, column);
	if (c[2] == LOSS_EMPTY)
		return out;
	out = (gslb_path_cell_t){.rtt = cell_rtt(c),
	                         .loss = c[2],
	                         .hops = c[3],
	                         .age_s = (uint16_t)age_total(p, c, column),
	                         .empty = false};
	return out;
}

/* ---- the merge of the site tables ---------------------------------------------------------- */

/* One column's source: a site table's rows, or the previous table's column (reuse). */
typedef struct {
	const gslb_path_row_t *rows;
	size_t n, pos;
	uint64_t elapsed_s;       /* the source table's age at build time */
	const gslb_paths_t *prev; /* reuse: rows of @c prev from @c first on, its column pcol */
	size_t first;
	unsigned pcol;
} cursor_t;

typedef struct {
	cursor_t cur[GSLB_PATHS_COLUMNS_MAX];
	size_t n_columns;
	unsigned plen; /* the node's granularity for this family */
	bool v6;
	uint32_t ttl_s;
	size_t coarse; /* rows coarser than the granularity, skipped */
} merge_t;

static void skip_coarse(merge_t *m, cursor_t *c)
{
	if (c->prev) {
		while (c->pos < c->n &&
		       cell_at(c->prev, c->first + c->pos, c->pcol)[2] == LOSS_EMPTY)
			c->pos++;
		return;
	}
	while (c->pos < c->n && c->rows[c->pos].plen < m->plen) {
		c->pos++;
		m->coarse++;
	}
}

static uint64_t cursor_key(const merge_t *m, const cursor_t *c)
{
	if (c->prev)
		return key_at(c->prev, m->v6, c->pos);
	return top_bits(c->rows[c->pos].prefix, m->plen);
}

/* Set up column @p i to reuse @p prev's column of the same datacenter, when it has one. */
static void cursor_reuse(merge_t *m, cursor_t *c, const gslb_paths_t *prev, size_t dc,
                         uint64_t now_ms)
{
	unsigned pcol = prev ? gslb_paths_column(prev, dc) : GSLB_PATHS_NO_COLUMN;
	if (pcol == GSLB_PATHS_NO_COLUMN || !prev->column_fed[pcol] ||
	    (m->v6 ? prev->plen6 : prev->plen4) != m->plen)
		return;
	uint64_t gen = prev->column_gen_ms[pcol];
	c->elapsed_s = now_ms > gen ? (now_ms - gen) / 1000 : 0;
	if (c->elapsed_s > m->ttl_s)
		return;
	c->prev = prev;
	c->pcol = pcol;
	c->first = m->v6 ? prev->n4 : 0;
	c->n = m->v6 ? prev->n6 : prev->n4;
	skip_coarse(m, c);
}

static void merge_init(merge_t *m, const gslb_paths_t *prev, const gslb_paths_site_t *sites,
                       const gslb_paths_opts_t *o, bool v6, uint64_t now_ms)
{
	memset(m, 0, sizeof(*m));
	m->n_columns = o->n_columns;
	m->plen = v6 ? o->ipv6_prefix : o->ipv4_prefix;
	m->v6 = v6;
	m->ttl_s = o->path_ttl_s;
	for (size_t i = 0; i < o->n_columns; i++) {
		const gslb_path_table_t *t = sites[i].table;
		if (sites[i].reuse) {
			cursor_reuse(m, &m->cur[i], prev, o->column_dc[i], now_ms);
			continue;
		}
		if (!t)
			continue;
		uint64_t elapsed = now_ms > t->generated_ms ? (now_ms - t->generated_ms) / 1000 : 0;
		if (elapsed > o->path_ttl_s)
			continue; /* the whole table is stale: no row of it can be fresh */
		cursor_t *c = &m->cur[i];
		c->rows = v6 ? t->rows6 : t->rows4;
		c->n = v6 ? t->n6 : t->n4;
		c->elapsed_s = elapsed;
		skip_coarse(m, c);
	}
}

/* The smallest next row key over all columns; false when every column is done. */
static bool merge_next(const merge_t *m, uint64_t *key)
{
	bool any = false;
	for (size_t i = 0; i < m->n_columns; i++) {
		const cursor_t *c = &m->cur[i];
		if (c->pos >= c->n)
			continue;
		uint64_t k = cursor_key(m, c);
		if (!any || k < *key)
			*key = k;
		any = true;
	}
	return any;
}

/* merge_fold() for a reused column: the previous table's cell, unless it went stale since. */
static uint32_t fold_reused(merge_t *m, cursor_t *c, uint64_t key, uint8_t *cell)
{
	if (cell)
		cell[2] = LOSS_EMPTY;
	if (c->pos >= c->n || cursor_key(m, c) != key)
		return FRESH_NONE;
	const uint8_t *from = cell_at(c->prev, c->first + c->pos, c->pcol);
	c->pos++;
	skip_coarse(m, c);
	uint64_t age = age_value(from[4]) + c->elapsed_s;
	if (age > m->ttl_s)
		return FRESH_NONE;
	if (cell)
		memcpy(cell, from, CELL_BYTES);
	return (uint32_t)age;
}

/*
 * Consume every column's rows that fold into row @p key; when @p cells is given, write the
 * row's cells (the lowest RTT of the folded rows per column, then the freshest). Returns the
 * age of the freshest fresh cell, FRESH_NONE when none is fresh (the row is not kept).
 */
static uint32_t merge_fold(merge_t *m, uint64_t key, uint8_t *cells)
{
	uint32_t fresh = FRESH_NONE;
	for (size_t i = 0; i < m->n_columns; i++) {
		cursor_t *c = &m->cur[i];
		if (c->prev) {
			uint32_t age =
			    fold_reused(m, c, key, cells ? cells + i * CELL_BYTES : NULL);
			fresh = age < fresh ? age : fresh;
			continue;
		}
		const gslb_path_row_t *pick = NULL;
		uint32_t pick_age = 0;
		while (c->pos < c->n && top_bits(c->rows[c->pos].prefix, m->plen) == key) {
			const gslb_path_row_t *r = &c->rows[c->pos++];
			skip_coarse(m, c);
			uint64_t age = r->age_s + c->elapsed_s;
			if (age > m->ttl_s)
				continue;
			if (!pick || r->rtt < pick->rtt ||
			    (r->rtt == pick->rtt && age < pick_age)) {
				pick = r;
				pick_age = (uint32_t)age;
			}
		}
		if (cells)
			cells[i * CELL_BYTES + 2] = LOSS_EMPTY;
		if (!pick)
			continue;
		if (cells)
			cell_put(cells + i * CELL_BYTES, pick);
		if (pick_age < fresh)
			fresh = pick_age;
	}
	return fresh;
}

/* Pass one: how many rows of each freshness (age code) the family has. */
static void count_rows(merge_t *m, size_t hist[AGE_CODES])
{
	uint64_t key;
	while (merge_next(m, &key)) {
		uint32_t fresh = merge_fold(m, key, NULL);
		if (fresh != FRESH_NONE)
			hist[age_code(fresh)]++;
	}
}

/* Which rows max_rows keeps: every row fresher than @c code, and @c quota rows of that code. */
typedef struct {
	unsigned code;
	size_t quota;
} cut_t;

static size_t kept(const size_t hist[AGE_CODES], cut_t *cut)
{
	size_t n = 0;
	for (unsigned i = 0; i < cut->code && i < AGE_CODES; i++)
		n += hist[i];
	if (cut->code < AGE_CODES) {
		size_t take = hist[cut->code] < cut->quota ? hist[cut->code] : cut->quota;
		n += take;
		cut->quota -= take;
	}
	return n;
}

static cut_t find_cut(const size_t h4[AGE_CODES], const size_t h6[AGE_CODES], size_t max_rows)
{
	size_t total = 0;
	for (unsigned i = 0; i < AGE_CODES; i++) {
		if (total + h4[i] + h6[i] > max_rows)
			return (cut_t){.code = i, .quota = max_rows - total};
		total += h4[i] + h6[i];
	}
	return (cut_t){.code = AGE_CODES, .quota = 0};
}

/* Pass two: the rows themselves (@p n of them from row @p first_row on), within @p cut. */
static size_t fill_rows(gslb_paths_t *p, merge_t *m, size_t first_row, size_t n, cut_t *cut,
                        bool v6)
{
	size_t row = first_row, end = first_row + n;
	uint64_t key;
	while (row < end && merge_next(m, &key)) {
		uint8_t *cells = cell_at(p, row, 0);
		uint32_t fresh = merge_fold(m, key, cells);
		if (fresh == FRESH_NONE)
			continue;
		unsigned code = age_code(fresh);
		if (code > cut->code)
			continue;
		if (code == cut->code) {
			if (cut->quota == 0)
				continue;
			cut->quota--;
		}
		if (v6)
			p->keys6[row - first_row] = key;
		else
			p->keys4[row] = (uint32_t)(key >> 32);
		row++;
	}
	return row - first_row;
}

/* ---- the lookup index ---------------------------------------------------------------------- */

static unsigned shared_bits(uint64_t first, uint64_t last)
{
	return first == last ? 0 : (unsigned)__builtin_clzll(first ^ last);
}

static uint32_t bucket(uint64_t key, unsigned lead)
{
	return (uint32_t)((key << lead) >> (64 - INDEX_BITS));
}

static void index_build(gslb_paths_t *p, bool v6)
{
	size_t n = v6 ? p->n6 : p->n4;
	uint32_t *index = xmalloc(INDEX_SIZE * sizeof(*index));
	unsigned lead = n ? shared_bits(key_at(p, v6, 0), key_at(p, v6, n - 1)) : 0;
	size_t i = 0;
	for (uint32_t b = 0; b < INDEX_SIZE - 1; b++) {
		while (i < n && bucket(key_at(p, v6, i), lead) < b)
			i++;
		index[b] = (uint32_t)i;
	}
	index[INDEX_SIZE - 1] = (uint32_t)n;
	if (v6) {
		p->index6 = index;
		p->lead6 = lead;
	} else {
		p->index4 = index;
		p->lead4 = lead;
	}
}

/*
 * The position of @p key in the sorted @p keys[lo, hi), or hi when it is not there. Branchless
 * (the compiler emits conditional moves): the buckets are small, so mispredicted branches
 * would cost more than the comparisons.
 */
static uint32_t find4(const uint32_t *keys, uint32_t lo, uint32_t hi, uint32_t key)
{
	if (lo == hi)
		return hi;
	const uint32_t *base = keys + lo;
	for (uint32_t n = hi - lo; n > 1; n -= n / 2)
		base = base[n / 2] <= key ? base + n / 2 : base;
	return *base == key ? (uint32_t)(base - keys) : hi;
}

static uint32_t find6(const uint64_t *keys, uint32_t lo, uint32_t hi, uint64_t key)
{
	if (lo == hi)
		return hi;
	const uint64_t *base = keys + lo;
	for (uint32_t n = hi - lo; n > 1; n -= n / 2)
		base = base[n / 2] <= key ? base + n / 2 : base;
	return *base == key ? (uint32_t)(base - keys) : hi;
}

bool gslb_paths_lookup(const gslb_paths_t *p, int family, const uint8_t *addr, uint32_t *row)
{
	if (family == AF_INET && p->n4) {
		uint32_t key = (uint32_t)(gslb_pathfmt_key(AF_INET, addr, p->plen4) >> 32);
		if (key < p->keys4[0] || key > p->keys4[p->n4 - 1])
			return false;
		uint32_t b = bucket((uint64_t)key << 32, p->lead4);
		uint32_t hi = p->index4[b + 1], at = find4(p->keys4, p->index4[b], hi, key);
		*row = at;
		return at < hi;
	}
	if (family == AF_INET6 && p->n6) {
		uint64_t key = gslb_pathfmt_key(AF_INET6, addr, p->plen6);
		if (key < p->keys6[0] || key > p->keys6[p->n6 - 1])
			return false;
		uint32_t b = bucket(key, p->lead6);
		uint32_t hi = p->index6[b + 1], at = find6(p->keys6, p->index6[b], hi, key);
		*row = (uint32_t)p->n4 + at;
		return at < hi;
	}
	return false;
}

/* ---- hysteresis ---------------------------------------------------------------------------- */

/* A row's state in the previous table, its columns already mapped to this table's. */
typedef struct {
	unsigned best, challenger, count;
} sticky_t;

static bool beats(uint32_t challenger, uint32_t best, const gslb_paths_opts_t *o)
{
	if (challenger >= best)
		return false;
	uint32_t gain = best - challenger;
	return gain >= o->min_difference_100us &&
	       (uint64_t)gain * 100 >= (uint64_t)best * o->margin_pct;
}

/* The column with the lowest usable RTT, skipping @p skip; ties go to the lower column. */
static unsigned lowest_rtt(const gslb_paths_t *p, size_t row, unsigned skip)
{
	unsigned best = GSLB_PATHS_NO_COLUMN;
	uint16_t best_rtt = GSLB_PATHFMT_RTT_NONE;
	for (unsigned c = 0; c < p->n_columns; c++) {
		uint16_t rtt = usable_rtt(p, row, c);
		if (c != skip && rtt < best_rtt) {
			best = c;
			best_rtt = rtt;
		}
	}
	return best;
}

/* Decide row @p row's sticky best from @p prev (NULL: a new row). Returns whether the sticky
 * best was kept although another column had a lower RTT. */
static bool settle(gslb_paths_t *p, size_t row, const sticky_t *prev,
                   const gslb_paths_site_t *sites, const gslb_paths_opts_t *o)
{
	unsigned sticky = prev ? prev->best : GSLB_PATHS_NO_COLUMN;
	row_at(p, row)[STATE_CHALLENGER] = GSLB_PATHS_NO_COLUMN;
	row_at(p, row)[STATE_COUNT] = 0;
	if (sticky == GSLB_PATHS_NO_COLUMN || usable_rtt(p, row, sticky) == GSLB_PATHFMT_RTT_NONE) {
		/* No sticky best, or it lost its data: nothing to be sticky about. */
		row_at(p, row)[STATE_BEST] = (uint8_t)lowest_rtt(p, row, GSLB_PATHS_NO_COLUMN);
		return false;
	}
	row_at(p, row)[STATE_BEST] = (uint8_t)sticky;
	unsigned ch = lowest_rtt(p, row, sticky);
	if (ch == GSLB_PATHS_NO_COLUMN)
		return false;
	uint16_t ch_rtt = usable_rtt(p, row, ch), best_rtt = usable_rtt(p, row, sticky);
	if (!beats(ch_rtt, best_rtt, o))
		return ch_rtt < best_rtt;
	unsigned count = ch == prev->challenger ? prev->count : 0;
	if (sites[ch].changed && count < COUNT_MAX)
		count++;
	if (count >= (o->rounds ? o->rounds : 1)) {
		row_at(p, row)[STATE_BEST] = (uint8_t)ch;
		return false;
	}
	row_at(p, row)[STATE_CHALLENGER] = (uint8_t)ch;
	row_at(p, row)[STATE_COUNT] = (uint8_t)count;
	return true;
}

/* prev's column -> this table's column (GSLB_PATHS_NO_COLUMN when its datacenter has none). */
static void map_columns(const gslb_paths_t *p, const gslb_paths_t *prev,
                        uint8_t map[GSLB_PATHS_COLUMNS_MAX + 1])
{
	memset(map, GSLB_PATHS_NO_COLUMN, GSLB_PATHS_COLUMNS_MAX + 1);
	for (size_t c = 0; c < prev->n_columns; c++)
		map[c] = (uint8_t)gslb_paths_column(p, prev->column_dc[c]);
}

static unsigned mapped(const uint8_t map[GSLB_PATHS_COLUMNS_MAX + 1], uint8_t column)
{
	return column < GSLB_PATHS_COLUMNS_MAX ? map[column] : GSLB_PATHS_NO_COLUMN;
}

/* Carry the state of @p prev's rows to this family's rows: both key lists are sorted. */
static void settle_family(gslb_paths_t *p, const gslb_paths_t *prev, bool v6,
                          const gslb_paths_site_t *sites, const gslb_paths_opts_t *o)
{
	size_t first = v6 ? p->n4 : 0, n = v6 ? p->n6 : p->n4;
	size_t pfirst = 0, pn = 0, j = 0;
	uint8_t map[GSLB_PATHS_COLUMNS_MAX + 1];
	if (prev && (v6 ? prev->plen6 == p->plen6 : prev->plen4 == p->plen4)) {
		pfirst = v6 ? prev->n4 : 0;
		pn = v6 ? prev->n6 : prev->n4;
		map_columns(p, prev, map);
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t key = key_at(p, v6, i);
		while (j < pn && key_at(prev, v6, j) < key)
			j++;
		sticky_t s, *sp = NULL;
		if (j < pn && key_at(prev, v6, j) == key) {
			size_t pr = pfirst + j;
			const uint8_t *st = row_at(prev, pr);
			s = (sticky_t){.best = mapped(map, st[STATE_BEST]),
			               .challenger = mapped(map, st[STATE_CHALLENGER]),
			               .count = st[STATE_COUNT]};
			sp = &s;
		}
		if (settle(p, first + i, sp, sites, o))
			p->info.sticky_held++;
	}
}

/* ---- build ----------------------------------------------------------------------------------- */

/* The merge relies on it; decoded tables always are. */
static bool rows_sorted(const gslb_path_row_t *rows, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		const gslb_path_row_t *a = &rows[i - 1], *b = &rows[i];
		if (a->prefix > b->prefix || (a->prefix == b->prefix && a->plen >= b->plen))
			return false;
	}
	return true;
}

static bool opts_ok(const gslb_paths_site_t *sites, const gslb_paths_opts_t *o, char *err,
                    size_t errlen)
{
	if (o->ipv4_prefix < 8 || o->ipv4_prefix > 32 || o->ipv6_prefix < 16 ||
	    o->ipv6_prefix > 64) {
		fail(err, errlen, "prefix lengths /%u and /%u: IPv4 must be 8..32, IPv6 16..64",
		     o->ipv4_prefix, o->ipv6_prefix);
		return false;
	}
	if (o->n_columns > GSLB_PATHS_COLUMNS_MAX || (o->n_columns && !o->column_dc)) {
		fail(err, errlen, "%zu columns, at most %d", o->n_columns, GSLB_PATHS_COLUMNS_MAX);
		return false;
	}
	if (o->max_rows == 0 || o->max_rows > UINT32_MAX - 1 || o->margin_pct > 100 ||
	    o->rounds > COUNT_MAX) {
		fail(err, errlen, "max rows %u (1..%u), margin %u%% (0..100), rounds %u (0..%d)",
		     o->max_rows, UINT32_MAX - 1, o->margin_pct, o->rounds, COUNT_MAX);
		return false;
	}
	for (size_t i = 0; i < o->n_columns; i++) {
		for (size_t j = 0; j < i; j++) {
			if (o->column_dc[j] == o->column_dc[i]) {
				fail(err, errlen, "columns %zu and %zu are both datacenter %zu", j,
				     i, o->column_dc[i]);
				return false;
			}
		}
		if (o->column_dc[i] >= o->n_datacenters) {
			fail(err, errlen, "column %zu: datacenter %zu of %zu", i, o->column_dc[i],
			     o->n_datacenters);
			return false;
		}
		const gslb_path_table_t *t = sites[i].reuse ? NULL : sites[i].table;
		if (t && (!rows_sorted(t->rows4, t->n4) || !rows_sorted(t->rows6, t->n6))) {
			fail(err, errlen, "column %zu: the site table is not sorted", i);
			return false;
		}
	}
	return true;
}

/* Where each column's cells come from: the generated_ms their ages count from. */
static void columns_age(gslb_paths_t *p, const gslb_paths_t *prev, const gslb_paths_site_t *sites,
                        uint64_t now_ms)
{
	for (size_t i = 0; i < p->n_columns; i++) {
		uint64_t gen = 0;
		bool fed = false;
		if (sites[i].reuse) {
			unsigned pcol =
			    prev ? gslb_paths_column(prev, p->column_dc[i]) : GSLB_PATHS_NO_COLUMN;
			fed = pcol != GSLB_PATHS_NO_COLUMN && prev->column_fed[pcol];
			gen = fed ? prev->column_gen_ms[pcol] : 0;
		} else if (sites[i].table) {
			fed = true;
			gen = sites[i].table->generated_ms;
		}
		uint64_t elapsed = fed && now_ms > gen ? (now_ms - gen) / 1000 : 0;
		p->column_fed[i] = fed;
		p->column_gen_ms[i] = gen;
		p->column_elapsed[i] = elapsed > UINT32_MAX ? UINT32_MAX : (uint32_t)elapsed;
	}
}

static void columns_init(gslb_paths_t *p, const gslb_paths_opts_t *o)
{
	p->n_columns = o->n_columns;
	p->n_datacenters = o->n_datacenters;
	p->dc_column = xmalloc(o->n_datacenters ? o->n_datacenters : 1);
	memset(p->dc_column, GSLB_PATHS_NO_COLUMN, o->n_datacenters ? o->n_datacenters : 1);
	for (size_t i = 0; i < o->n_columns; i++) {
		p->column_dc[i] = o->column_dc[i];
		p->dc_column[o->column_dc[i]] = (uint8_t)i;
	}
}

static void count_info(gslb_paths_t *p)
{
	size_t rows = p->n4 + p->n6;
	for (size_t r = 0; r < rows; r++) {
		for (unsigned c = 0; c < p->n_columns; c++)
			p->info.cells += cell_at(p, r, c)[2] != LOSS_EMPTY;
	}
	p->info.rows4 = p->n4;
	p->info.rows6 = p->n6;
	/* keys and rows were counted as allocated (big_alloc) */
	p->info.bytes += sizeof(*p) + 2 * INDEX_SIZE * sizeof(*p->index4) +
	                 (p->n_datacenters ? p->n_datacenters : 1);
}

gslb_paths_t *gslb_paths_build(const gslb_paths_t *prev, const gslb_paths_site_t *sites,
                               const gslb_paths_opts_t *opts, uint64_t now_ms, char *err,
                               size_t errlen)
{
	uint64_t start = monotonic_us();
	if (!opts_ok(sites, opts, err, errlen))
		return NULL;
	gslb_paths_t *p = xcalloc(1, sizeof(*p));
	p->refs = 1;
	p->plen4 = opts->ipv4_prefix;
	p->plen6 = opts->ipv6_prefix;
	columns_init(p, opts);
	columns_age(p, prev, sites, now_ms);

	merge_t m;
	size_t h4[AGE_CODES] = {0}, h6[AGE_CODES] = {0};
	merge_init(&m, prev, sites, opts, false, now_ms);
	count_rows(&m, h4);
	p->info.coarse_skipped = m.coarse;
	merge_init(&m, prev, sites, opts, true, now_ms);
	count_rows(&m, h6);
	p->info.coarse_skipped += m.coarse;
	cut_t cut = find_cut(h4, h6, opts->max_rows);
	cut_t cut_count = cut;
	p->n4 = kept(h4, &cut_count);
	p->n6 = kept(h6, &cut_count);
	size_t rows = p->n4 + p->n6;
	p->keys4 = big_alloc(p->n4 * sizeof(*p->keys4), &p->info.bytes);
	p->keys6 = big_alloc(p->n6 * sizeof(*p->keys6), &p->info.bytes);
	p->stride = ROW_STATE + p->n_columns * CELL_BYTES;
	p->rows = big_alloc(rows * p->stride, &p->info.bytes);

	merge_init(&m, prev, sites, opts, false, now_ms);
	size_t got4 = fill_rows(p, &m, 0, p->n4, &cut, false);
	merge_init(&m, prev, sites, opts, true, now_ms);
	size_t got6 = fill_rows(p, &m, p->n4, p->n6, &cut, true);
	STEER_ASSERT(got4 == p->n4 && got6 == p->n6);
	index_build(p, false);
	index_build(p, true);
	settle_family(p, prev, false, sites, opts);
	settle_family(p, prev, true, sites, opts);
	count_info(p);
	size_t all = 0;
	for (unsigned i = 0; i < AGE_CODES; i++)
		all += h4[i] + h6[i];
	p->info.rows_dropped = all - rows;
	p->info.built_ms = now_ms;
	uint64_t took = monotonic_us() - start;
	p->info.build_us = took > UINT32_MAX ? UINT32_MAX : (uint32_t)took;
	return p;
}

gslb_paths_t *gslb_paths_ref(gslb_paths_t *p)
{
	STEER_ASSERT(p->refs > 0);
	p->refs++;
	return p;
}

void gslb_paths_unref(gslb_paths_t *p)
{
	if (!p)
		return;
	STEER_ASSERT(p->refs > 0);
	if (--p->refs > 0)
		return;
	free(p->keys4);
	free(p->keys6);
	free(p->index4);
	free(p->index6);
	free(p->rows);
	free(p->dc_column);
	free(p);
}

/* ---- accessors ----------------------------------------------------------------------------- */

unsigned gslb_paths_row_best(const gslb_paths_t *p, uint32_t row)
{
	STEER_ASSERT(row < p->n4 + p->n6);
	return row_at(p, row)[STATE_BEST];
}

unsigned gslb_paths_row_challenger(const gslb_paths_t *p, uint32_t row, unsigned *rounds)
{
	STEER_ASSERT(row < p->n4 + p->n6);
	const uint8_t *st = row_at(p, row);
	*rounds = st[STATE_COUNT];
	return st[STATE_CHALLENGER];
}

unsigned gslb_paths_column(const gslb_paths_t *p, size_t dc)
{
	return dc < p->n_datacenters ? p->dc_column[dc] : GSLB_PATHS_NO_COLUMN;
}

size_t gslb_paths_columns(const gslb_paths_t *p)
{
	return p->n_columns;
}

size_t gslb_paths_column_dc(const gslb_paths_t *p, unsigned c)
{
	STEER_ASSERT(c < p->n_columns);
	return p->column_dc[c];
}

unsigned gslb_paths_prefix_len(const gslb_paths_t *p, int family)
{
	return family == AF_INET6 ? p->plen6 : p->plen4;
}

void gslb_paths_row_prefix(const gslb_paths_t *p, uint32_t row, int *family, uint8_t addr[16],
                           unsigned *plen)
{
	STEER_ASSERT(row < p->n4 + p->n6);
	memset(addr, 0, 16);
	bool v6 = row >= p->n4;
	uint64_t key = v6 ? p->keys6[row - p->n4] : (uint64_t)p->keys4[row] << 32;
	for (unsigned i = 0; i < 8; i++)
		addr[i] = (uint8_t)(key >> (56 - 8 * i));
	*family = v6 ? AF_INET6 : AF_INET;
	*plen = v6 ? p->plen6 : p->plen4;
}

void gslb_paths_info(const gslb_paths_t *p, gslb_paths_info_t *out)
{
	*out = p->info;
}
