/*
 * The demand report's two halves (see gslb/demand.h): each query thread's ring with its
 * dedupe cache (written by that thread only; the control thread only moves the ring's tail),
 * and the control thread's map, an open-addressing hash table with linear probing that grows
 * by doubling up to its row limit.
 */
#include "gslb/demand.h"

#include <assert.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/alloc.h"
#include "base/counter.h"
#include "base/err.h"

/* Prefixes a thread adds up before they reach the ring: the busy ones of one thread fit. */
#define CACHE_SLOTS 256
/* A prefix in the cache reaches the ring at most this often (plus once when first seen). */
#define REPORT_EVERY_S 1
#define MAP_MIN_SLOTS  1024

static_assert((GSLB_DEMAND_RING_SLOTS & (GSLB_DEMAND_RING_SLOTS - 1)) == 0, "power of two");
static_assert((CACHE_SLOTS & (CACHE_SLOTS - 1)) == 0, "power of two");

typedef struct {
	gslb_demand_row_t row; /* what the next report carries; volume since the last one */
	uint32_t since_s;      /* coarse monotonic second of the last report */
	bool used;
} cache_slot_t;

struct gslb_demand_ring {
	/* producer side */
	_Atomic unsigned sample; /* set by the control thread on reload, read relaxed */
	unsigned countdown;
	steer_counter_t dropped;
	_Atomic uint32_t head; /* reports written */
	cache_slot_t cache[CACHE_SLOTS];
	/* consumer side, on its own cache line so the producer's writes do not bounce it */
	_Alignas(64) _Atomic uint32_t tail; /* reports taken */
	gslb_demand_row_t slots[GSLB_DEMAND_RING_SLOTS];
};

/* ---- keys ------------------------------------------------------------------------------------ */

static unsigned addr_len(uint8_t family)
{
	return family == 6 ? 16 : 4;
}

/* @p addr cut to @p plen bits into @p out (16 bytes, zero-padded). */
static void cut_prefix(const uint8_t *addr, unsigned len, unsigned plen, uint8_t out[16])
{
	memset(out, 0, 16);
	if (plen > len * 8)
		plen = len * 8;
	memcpy(out, addr, (plen + 7) / 8);
	if (plen % 8)
		out[plen / 8] &= (uint8_t)(0xff00u >> (plen % 8));
}

static bool same_key(const gslb_demand_row_t *a, uint8_t family, uint8_t plen,
                     const uint8_t prefix[16])
{
	return a->family == family && a->plen == plen && memcmp(a->prefix, prefix, 16) == 0;
}

static uint64_t key_hash(uint8_t family, uint8_t plen, const uint8_t prefix[16])
{
	uint64_t a, b;
	memcpy(&a, prefix, 8);
	memcpy(&b, prefix + 8, 8);
	uint64_t h = a * UINT64_C(0x9e3779b97f4a7c15) ^ b * UINT64_C(0xc2b2ae3d27d4eb4f) ^
	             ((uint64_t)family << 8 | plen) * UINT64_C(0x165667b19e3779f9);
	h ^= h >> 29;
	h *= UINT64_C(0xbf58476d1ce4e5b9);
	return h ^ (h >> 32);
}

/* ---- the ring (query thread) ----------------------------------------------------------------- */

gslb_demand_ring_t *gslb_demand_ring_new(unsigned sample)
{
	/* sizeof is a multiple of the alignment: _Alignas pads the struct */
	gslb_demand_ring_t *r = aligned_alloc(64, sizeof(*r));
	STEER_ASSERT(r != NULL);
	memset(r, 0, sizeof(*r));
	atomic_init(&r->sample, sample ? sample : 1);
	r->countdown = sample ? sample : 1;
	return r;
}

void gslb_demand_ring_set_sample(gslb_demand_ring_t *r, unsigned sample)
{
	atomic_store_explicit(&r->sample, sample ? sample : 1, memory_order_relaxed);
}

void gslb_demand_ring_free(gslb_demand_ring_t *r)
{
	free(r);
}

uint64_t gslb_demand_ring_dropped(const gslb_demand_ring_t *r)
{
	return atomic_load_explicit(&r->dropped, memory_order_relaxed);
}

static void ring_push(gslb_demand_ring_t *r, const gslb_demand_row_t *row)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (head - tail >= GSLB_DEMAND_RING_SLOTS) {
		STEER_COUNTER_INC(r->dropped);
		return;
	}
	r->slots[head % GSLB_DEMAND_RING_SLOTS] = *row;
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
}

/* The coarse clock is a vDSO read of the last tick: no system call, a few nanoseconds. */
static uint32_t coarse_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint32_t)ts.tv_sec;
}

static bool inside(const uint8_t *addr, const uint8_t prefix[16], unsigned plen, unsigned len)
{
	uint8_t cut[16];
	cut_prefix(addr, len, plen, cut);
	return memcmp(cut, prefix, 16) == 0;
}

static void fill_probe(gslb_demand_row_t *row, const uint8_t *probe, unsigned len)
{
	if (row->flags & GSLB_DEMAND_ECS || !probe || !inside(probe, row->prefix, row->plen, len)) {
		/* an ECS prefix names clients, not a resolver: probe its first host */
		memcpy(row->probe, row->prefix, 16);
		if (row->plen < len * 8)
			row->probe[len - 1] |= 1;
	} else {
		memset(row->probe, 0, 16);
		memcpy(row->probe, probe, len);
	}
}

void gslb_demand_record(gslb_demand_ring_t *r, int family, const uint8_t *addr, unsigned plen,
                        const uint8_t *probe, uint8_t flags)
{
	if (!r || !addr || (family != AF_INET && family != AF_INET6))
		return;
	uint32_t weight = 0;
	if (r->countdown <= 1) {
		unsigned sample = atomic_load_explicit(&r->sample, memory_order_relaxed);
		r->countdown = sample;
		weight = sample;
	} else {
		r->countdown--;
	}
	if (weight == 0 && !(flags & GSLB_DEMAND_URGENT))
		return;
	uint8_t fam = family == AF_INET6 ? 6 : 4, prefix[16];
	unsigned len = addr_len(fam);
	/* what the demand format carries (gslb/pathfmt.h); the configuration keeps inside it */
	if (fam == 4 ? plen < 8 || plen > 32 : plen < 16 || plen > 64)
		return;
	flags &= GSLB_DEMAND_ECS | GSLB_DEMAND_URGENT;
	cut_prefix(addr, len, plen, prefix);
	cache_slot_t *c = &r->cache[key_hash(fam, (uint8_t)plen, prefix) & (CACHE_SLOTS - 1)];
	uint32_t now = coarse_seconds();
	if (c->used && same_key(&c->row, fam, (uint8_t)plen, prefix)) {
		c->row.volume =
		    c->row.volume > UINT32_MAX - weight ? UINT32_MAX : c->row.volume + weight;
		c->row.flags = flags;
		fill_probe(&c->row, probe, len);
		if (now - c->since_s >= REPORT_EVERY_S) {
			ring_push(r, &c->row);
			c->row.volume = 0;
			c->since_s = now;
		}
		return;
	}
	if (c->used && c->row.volume > 0)
		ring_push(r, &c->row); /* evicted: what it added up so far */
	c->used = true;
	c->since_s = now;
	c->row = (gslb_demand_row_t){
	    .family = fam, .plen = (uint8_t)plen, .flags = flags, .volume = weight};
	memcpy(c->row.prefix, prefix, 16);
	fill_probe(&c->row, probe, len);
	ring_push(r, &c->row);
	c->row.volume = 0;
}

/* ---- the map (control thread) ---------------------------------------------------------------- */

typedef struct {
	gslb_demand_row_t row; /* volume unused: see below */
	double volume;         /* decayed to vol_ms */
	uint64_t vol_ms;
	uint64_t seen_ms;
	bool used;
} entry_t;

struct gslb_demand_map {
	entry_t *slots;
	size_t cap; /* power of two, at least twice the rows */
	size_t n;
	size_t max_rows;
	bool changed;
};

static double decayed(const entry_t *e, uint64_t now_ms)
{
	if (now_ms <= e->vol_ms)
		return e->volume;
	return e->volume * exp2(-(double)(now_ms - e->vol_ms) / GSLB_DEMAND_HALF_LIFE_MS);
}

gslb_demand_map_t *gslb_demand_map_new(size_t max_rows)
{
	gslb_demand_map_t *m = xcalloc(1, sizeof(*m));
	m->max_rows = max_rows ? max_rows : 1;
	m->cap = MAP_MIN_SLOTS;
	m->slots = xcalloc(m->cap, sizeof(*m->slots));
	return m;
}

void gslb_demand_map_free(gslb_demand_map_t *m)
{
	if (!m)
		return;
	free(m->slots);
	free(m);
}

size_t gslb_demand_rows(const gslb_demand_map_t *m)
{
	return m->n;
}

bool gslb_demand_changed(const gslb_demand_map_t *m)
{
	return m->changed;
}

/* The slot holding the key, or the empty slot where it would go. */
static size_t find_slot(const gslb_demand_map_t *m, uint8_t family, uint8_t plen,
                        const uint8_t prefix[16])
{
	size_t mask = m->cap - 1, i = key_hash(family, plen, prefix) & mask;
	while (m->slots[i].used && !same_key(&m->slots[i].row, family, plen, prefix))
		i = (i + 1) & mask;
	return i;
}

/* Backward-shift deletion: later entries of the same probe run move up, no tombstones. */
static void remove_at(gslb_demand_map_t *m, size_t i)
{
	size_t mask = m->cap - 1, j = i;
	m->slots[i].used = false;
	for (;;) {
		j = (j + 1) & mask;
		if (!m->slots[j].used)
			break;
		const gslb_demand_row_t *r = &m->slots[j].row;
		size_t home = key_hash(r->family, r->plen, r->prefix) & mask;
		/* j's entry may fill the hole at i unless its home lies cyclically in (i, j] */
		bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (stays)
			continue;
		m->slots[i] = m->slots[j];
		m->slots[j].used = false;
		i = j;
	}
	m->n--;
}

static void grow(gslb_demand_map_t *m)
{
	entry_t *old = m->slots;
	size_t old_cap = m->cap;
	m->cap *= 2;
	m->slots = xcalloc(m->cap, sizeof(*m->slots));
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i].used)
			continue;
		const gslb_demand_row_t *r = &old[i].row;
		m->slots[find_slot(m, r->family, r->plen, r->prefix)] = old[i];
	}
	free(old);
}

typedef struct {
	double rank; /* urgent rows rank above every volume: they are what the agents need most */
	size_t slot;
} rank_t;

static int rank_cmp(const void *a, const void *b)
{
	double x = ((const rank_t *)a)->rank, y = ((const rank_t *)b)->rank;
	return x < y ? -1 : x > y;
}

/* Make room: drop the tenth of the rows with the least volume (urgent ones last). */
static void trim(gslb_demand_map_t *m, uint64_t now_ms)
{
	rank_t *ranks = xmalloc(m->n * sizeof(*ranks));
	size_t n = 0;
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->slots[i].used)
			continue;
		double v = decayed(&m->slots[i], now_ms);
		ranks[n++] = (rank_t){
		    .rank = (m->slots[i].row.flags & GSLB_DEMAND_URGENT) ? v + 1e18 : v, .slot = i};
	}
	qsort(ranks, n, sizeof(*ranks), rank_cmp);
	size_t drop = n / 10 ? n / 10 : 1;
	/* Keys first: removing shifts entries, so slots found above would go stale. */
	gslb_demand_row_t *keys = xmalloc(drop * sizeof(*keys));
	for (size_t i = 0; i < drop; i++)
		keys[i] = m->slots[ranks[i].slot].row;
	for (size_t i = 0; i < drop; i++) {
		size_t s = find_slot(m, keys[i].family, keys[i].plen, keys[i].prefix);
		if (m->slots[s].used)
			remove_at(m, s);
	}
	free(keys);
	free(ranks);
}

static void map_add(gslb_demand_map_t *m, const gslb_demand_row_t *row, uint64_t now_ms)
{
	size_t i = find_slot(m, row->family, row->plen, row->prefix);
	if (!m->slots[i].used) {
		if (m->n >= m->max_rows) {
			trim(m, now_ms);
		} else if ((m->n + 1) * 2 > m->cap) {
			grow(m);
		}
		i = find_slot(m, row->family, row->plen, row->prefix);
		m->slots[i] = (entry_t){.row = *row, .vol_ms = now_ms, .used = true};
		m->n++;
	}
	entry_t *e = &m->slots[i];
	e->volume = decayed(e, now_ms) + row->volume;
	e->vol_ms = now_ms;
	e->seen_ms = now_ms;
	e->row.flags = row->flags;
	memcpy(e->row.probe, row->probe, 16);
	m->changed = true;
}

size_t gslb_demand_drain(gslb_demand_map_t *m, gslb_demand_ring_t *r, uint64_t now_ms)
{
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);
	size_t taken = 0;
	for (; tail != head; tail++, taken++)
		map_add(m, &r->slots[tail % GSLB_DEMAND_RING_SLOTS], now_ms);
	atomic_store_explicit(&r->tail, tail, memory_order_release);
	return taken;
}

void gslb_demand_expire(gslb_demand_map_t *m, uint64_t now_ms)
{
	for (size_t i = 0; i < m->cap;) {
		entry_t *e = &m->slots[i];
		if (e->used && now_ms - e->seen_ms >= GSLB_DEMAND_IDLE_MS) {
			remove_at(m, i); /* a later entry may have moved into i: look again */
			m->changed = true;
			continue;
		}
		i++;
	}
}

static int row_cmp(const void *a, const void *b)
{
	const gslb_demand_row_t *x = a, *y = b;
	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	int c = memcmp(x->prefix, y->prefix, 16);
	if (c != 0)
		return c;
	return (x->plen > y->plen) - (x->plen < y->plen);
}

static uint32_t volume_u32(double v)
{
	if (v >= (double)UINT32_MAX)
		return UINT32_MAX;
	/* a prefix that is still listed was queried: never report it as zero */
	return v < 1.0 ? 1 : (uint32_t)(v + 0.5);
}

uint8_t *gslb_demand_encode(gslb_demand_map_t *m, uint64_t now_ms, uint64_t wall_ms, size_t *len)
{
	gslb_demand_t d = {.generated_ms = wall_ms, .n = 0};
	d.rows = xmalloc((m->n ? m->n : 1) * sizeof(*d.rows));
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->slots[i].used)
			continue;
		d.rows[d.n] = m->slots[i].row;
		d.rows[d.n++].volume = volume_u32(decayed(&m->slots[i], now_ms));
	}
	qsort(d.rows, d.n, sizeof(*d.rows), row_cmp);
	size_t size = gslb_pathfmt_demand_size(&d);
	uint8_t *buf = xmalloc(size);
	*len = gslb_pathfmt_encode_demand(&d, buf, size);
	/* the map only holds rows the format takes (families, lengths, cut prefixes) */
	STEER_ASSERT(*len == size);
	free(d.rows);
	m->changed = false;
	return buf;
}

bool gslb_demand_find(const gslb_demand_map_t *m, int family, const uint8_t *addr, unsigned plen,
                      uint64_t now_ms, gslb_demand_row_t *out)
{
	if (family != AF_INET && family != AF_INET6)
		return false;
	uint8_t fam = family == AF_INET6 ? 6 : 4, prefix[16];
	unsigned len = addr_len(fam);
	if (plen > len * 8)
		plen = len * 8;
	cut_prefix(addr, len, plen, prefix);
	size_t i = find_slot(m, fam, (uint8_t)plen, prefix);
	if (!m->slots[i].used)
		return false;
	*out = m->slots[i].row;
	out->volume = volume_u32(decayed(&m->slots[i], now_ms));
	return true;
}
