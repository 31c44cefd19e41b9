/*
 * The agent's prefix table (probe/table.h): rows in an array, an open-addressing index by
 * prefix, a min-heap of row indices for the schedule and a token bucket for the budget. Only
 * the agent's loop thread touches it.
 */
#include "probe/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/alloc.h"
#include "base/err.h"

#define NO_HEAP UINT32_MAX
#define NO_ROW  UINT32_MAX

/* The bucket holds at most a tenth of a second of budget (and at least one measurement), so
 * an idle agent never bursts more than that when demand arrives. */
#define BUCKET_SECONDS_DIV 10u

struct probe_table {
	probe_table_opts_t o;
	probe_row_t *rows;
	size_t n, cap;
	uint32_t *index; /* row index + 1 per slot, 0 = empty; size index_mask + 1 */
	size_t index_mask;
	uint32_t *heap;
	size_t heap_n;
	uint64_t tokens_milli; /* budget in thousandths of a probe */
	uint64_t bucket_ms;    /* when the bucket was last filled */
	bool dirty;
};

/* ---- the index ------------------------------------------------------------------------ */

/* splitmix64's finaliser: every key bit reaches the low bits the index uses (IPv4 keys
 * have their 32 low bits zero). */
static uint64_t row_hash(uint8_t family, uint8_t plen, uint64_t key)
{
	uint64_t h = key + ((uint64_t)family << 8 | plen) + 0x9e3779b97f4a7c15ull;
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

static size_t index_slot(const probe_table_t *t, uint8_t family, uint8_t plen, uint64_t key)
{
	size_t i = row_hash(family, plen, key) & t->index_mask;
	for (;;) {
		uint32_t v = t->index[i];
		if (v == 0)
			return i;
		const probe_row_t *r = &t->rows[v - 1];
		if (r->key == key && r->plen == plen && r->family == family)
			return i;
		i = (i + 1) & t->index_mask;
	}
}

/* Rebuild the index for @p rows rows (at least the current ones), at most half full. */
static void index_resize(probe_table_t *t, size_t rows)
{
	size_t size = 1024;
	while (size < 2 * ((rows > t->n ? rows : t->n) + 1))
		size *= 2;
	free(t->index);
	t->index = xcalloc(size, sizeof(*t->index));
	t->index_mask = size - 1;
	for (size_t i = 0; i < t->n; i++) {
		const probe_row_t *r = &t->rows[i];
		t->index[index_slot(t, r->family, r->plen, r->key)] = (uint32_t)i + 1;
	}
}

static void index_rebuild(probe_table_t *t)
{
	index_resize(t, t->n);
}

/* ---- the heap ------------------------------------------------------------------------- */

static bool before(const probe_table_t *t, uint32_t a, uint32_t b)
{
	const probe_row_t *ra = &t->rows[a], *rb = &t->rows[b];
	if (ra->first != rb->first)
		return ra->first;
	return ra->due_ms < rb->due_ms;
}

static void heap_set(probe_table_t *t, size_t pos, uint32_t row)
{
	t->heap[pos] = row;
	t->rows[row].heap_pos = (uint32_t)pos;
}

static void heap_up(probe_table_t *t, size_t pos)
{
	uint32_t row = t->heap[pos];
	while (pos > 0) {
		size_t parent = (pos - 1) / 2;
		if (!before(t, row, t->heap[parent]))
			break;
		heap_set(t, pos, t->heap[parent]);
		pos = parent;
	}
	heap_set(t, pos, row);
}

static void heap_down(probe_table_t *t, size_t pos)
{
	uint32_t row = t->heap[pos];
	for (;;) {
		size_t child = 2 * pos + 1;
		if (child >= t->heap_n)
			break;
		if (child + 1 < t->heap_n && before(t, t->heap[child + 1], t->heap[child]))
			child++;
		if (!before(t, t->heap[child], row))
			break;
		heap_set(t, pos, t->heap[child]);
		pos = child;
	}
	heap_set(t, pos, row);
}

static void heap_push(probe_table_t *t, uint32_t row)
{
	t->heap[t->heap_n] = row;
	heap_up(t, t->heap_n++);
}

static uint32_t heap_pop(probe_table_t *t)
{
	uint32_t top = t->heap[0];
	t->rows[top].heap_pos = NO_HEAP;
	if (--t->heap_n > 0) {
		t->heap[0] = t->heap[t->heap_n];
		heap_down(t, 0);
	}
	return top;
}

/* Every row not in flight, heapified. */
static void heap_rebuild(probe_table_t *t)
{
	free(t->heap);
	t->heap = xcalloc(t->cap ? t->cap : 1, sizeof(*t->heap));
	t->heap_n = 0;
	for (size_t i = 0; i < t->n; i++) {
		t->rows[i].heap_pos = NO_HEAP;
		if (!t->rows[i].in_flight)
			heap_set(t, t->heap_n++, (uint32_t)i);
	}
	for (size_t i = t->heap_n / 2; i-- > 0;)
		heap_down(t, i);
}

/* ---- the table ------------------------------------------------------------------------ */

probe_table_t *probe_table_new(const probe_table_opts_t *opts, uint64_t now_ms)
{
	probe_table_t *t = xcalloc(1, sizeof(*t));
	t->o = *opts;
	t->bucket_ms = now_ms;
	index_rebuild(t);
	t->heap = xcalloc(1, sizeof(*t->heap));
	return t;
}

void probe_table_free(probe_table_t *t)
{
	if (t == NULL)
		return;
	free(t->rows);
	free(t->index);
	free(t->heap);
	free(t);
}

size_t probe_table_rows(const probe_table_t *t)
{
	return t->n;
}

probe_row_t *probe_table_row(probe_table_t *t, size_t i)
{
	return i < t->n ? &t->rows[i] : NULL;
}

probe_row_t *probe_table_find(probe_table_t *t, uint8_t family, uint8_t plen, uint64_t key)
{
	uint32_t v = t->index[index_slot(t, family, plen, key)];
	return v ? &t->rows[v - 1] : NULL;
}

bool probe_table_dirty(const probe_table_t *t)
{
	return t->dirty;
}

/* ---- demand --------------------------------------------------------------------------- */

void probe_table_merge_begin(probe_table_t *t, size_t expect)
{
	if (expect > t->o.max_rows)
		expect = t->o.max_rows;
	if (expect > t->cap) {
		t->cap = expect;
		t->rows = xrealloc(t->rows, t->cap * sizeof(*t->rows));
	}
	if (2 * (expect + 1) > t->index_mask + 1)
		index_resize(t, expect);
	for (size_t i = 0; i < t->n; i++) {
		t->rows[i].volume = 0;
		t->rows[i].urgent = false;
	}
}

static probe_row_t *row_insert(probe_table_t *t, const gslb_demand_row_t *r, uint64_t key)
{
	if (t->n >= t->o.max_rows)
		return NULL;
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 1024;
		t->rows = xrealloc(t->rows, t->cap * sizeof(*t->rows));
	}
	probe_row_t *row = &t->rows[t->n];
	*row = (probe_row_t){.family = r->family,
	                     .plen = r->plen,
	                     .key = key,
	                     .method = -1,
	                     .rtt = GSLB_PATHFMT_RTT_NONE,
	                     .heap_pos = NO_HEAP};
	t->index[index_slot(t, r->family, r->plen, key)] = (uint32_t)++t->n;
	if (2 * (t->n + 1) > t->index_mask + 1)
		index_rebuild(t);
	t->dirty = true;
	return row;
}

/* Whether the first @p plen bits of @p a and @p b agree. */
static bool same_prefix(const uint8_t *a, const uint8_t *b, unsigned plen)
{
	unsigned bytes = plen / 8, bits = plen % 8;
	if (memcmp(a, b, bytes) != 0)
		return false;
	uint8_t mask = (uint8_t)(0xff00u >> bits);
	return bits == 0 || ((a[bytes] ^ b[bytes]) & mask) == 0;
}

int probe_table_merge_add(probe_table_t *t, const gslb_demand_row_t *r, uint64_t reported_ms)
{
	unsigned max_plen = r->family == 4 ? 32 : 128;
	if ((r->family != 4 && r->family != 6) || r->plen > max_plen ||
	    !same_prefix(r->prefix, r->probe, r->plen))
		return STEER_EINVAL;
	uint64_t key = gslb_pathfmt_key(r->family == 4 ? AF_INET : AF_INET6, r->prefix, r->plen);
	uint32_t v = t->index[index_slot(t, r->family, r->plen, key)];
	probe_row_t *row = v ? &t->rows[v - 1] : row_insert(t, r, key);
	if (row == NULL)
		return STEER_ESPACE;
	row->volume = row->volume > UINT32_MAX - r->volume ? UINT32_MAX : row->volume + r->volume;
	row->urgent |= (r->flags & GSLB_DEMAND_URGENT) != 0;
	if (reported_ms >= row->reported_ms) {
		memcpy(row->probe, r->probe, sizeof(row->probe));
		row->ecs = (r->flags & GSLB_DEMAND_ECS) != 0;
		row->reported_ms = reported_ms;
	}
	return 0;
}

/* Drop the rows no node reported for forget-after; in-flight rows stay until they finish. */
static size_t drop_forgotten(probe_table_t *t, uint64_t now_ms)
{
	size_t kept = 0;
	for (size_t i = 0; i < t->n; i++) {
		const probe_row_t *r = &t->rows[i];
		if (!r->in_flight && now_ms > r->reported_ms &&
		    now_ms - r->reported_ms > t->o.forget_after)
			continue;
		t->rows[kept++] = *r;
	}
	size_t dropped = t->n - kept;
	t->n = kept;
	if (dropped > 0) {
		index_rebuild(t);
		t->dirty = true;
	}
	return dropped;
}

/* The k-th largest value of @p v (0-based), reordering @p v (quickselect). */
static uint32_t kth_largest(uint32_t *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;
	while (lo < hi) {
		uint32_t pivot = v[lo + (hi - lo) / 2];
		size_t i = lo, j = hi;
		while (i <= j) {
			while (v[i] > pivot)
				i++;
			while (v[j] < pivot)
				j--;
			if (i <= j) {
				uint32_t tmp = v[i];
				v[i++] = v[j];
				v[j] = tmp;
				if (j == 0)
					break;
				j--;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return v[k];
	}
	return v[k];
}

/* Hot = among the (hot-share percent of the rows) busiest: every row above the volume of the
 * k-th busiest, then rows at that volume in table order until there are k; a row nobody
 * queries (volume 0) never is. */
static void mark_hot(probe_table_t *t)
{
	size_t k = t->n * t->o.hot_share / 100;
	uint32_t threshold = UINT32_MAX;
	size_t above = 0;
	if (k > 0) {
		uint32_t *v = xmalloc(t->n * sizeof(*v));
		for (size_t i = 0; i < t->n; i++)
			v[i] = t->rows[i].volume;
		threshold = kth_largest(v, t->n, k - 1);
		free(v);
		for (size_t i = 0; i < t->n; i++)
			above += t->rows[i].volume > threshold;
	}
	size_t ties = k - above;
	for (size_t i = 0; i < t->n; i++) {
		probe_row_t *r = &t->rows[i];
		bool tie = k > 0 && r->volume == threshold && ties > 0;
		r->hot = k > 0 && r->volume > 0 && (r->volume > threshold || tie);
		ties -= tie;
	}
}

static void reschedule(const probe_table_t *t, probe_row_t *r, uint64_t now_ms)
{
	r->first = r->urgent && (!r->measured || now_ms - r->measured_ms > t->o.urgent_stale);
	if (r->measured)
		r->due_ms = r->measured_ms + (r->hot ? t->o.hot_interval : t->o.interval);
	if (r->first)
		r->due_ms = now_ms < r->due_ms ? now_ms : r->due_ms;
}

size_t probe_table_merge_end(probe_table_t *t, uint64_t now_ms)
{
	size_t dropped = drop_forgotten(t, now_ms);
	mark_hot(t);
	for (size_t i = 0; i < t->n; i++)
		if (!t->rows[i].in_flight)
			reschedule(t, &t->rows[i], now_ms);
	heap_rebuild(t);
	return dropped;
}

/* ---- scheduling ----------------------------------------------------------------------- */

static uint64_t bucket_cap(const probe_table_t *t)
{
	uint64_t cap = t->o.rate / BUCKET_SECONDS_DIV;
	return 1000u * (cap > t->o.samples ? cap : t->o.samples);
}

static void bucket_fill(probe_table_t *t, uint64_t now_ms)
{
	if (now_ms <= t->bucket_ms)
		return;
	t->tokens_milli += (now_ms - t->bucket_ms) * t->o.rate;
	t->bucket_ms = now_ms;
	if (t->tokens_milli > bucket_cap(t))
		t->tokens_milli = bucket_cap(t);
}

probe_row_t *probe_table_next(probe_table_t *t, uint64_t now_ms)
{
	if (t->heap_n == 0)
		return NULL;
	probe_row_t *top = &t->rows[t->heap[0]];
	if (top->due_ms > now_ms)
		return NULL;
	bucket_fill(t, now_ms);
	uint64_t cost = 1000u * t->o.samples;
	if (t->tokens_milli < cost)
		return NULL;
	t->tokens_milli -= cost;
	probe_row_t *row = &t->rows[heap_pop(t)];
	row->in_flight = true;
	return row;
}

uint64_t probe_table_wait(const probe_table_t *t, uint64_t now_ms)
{
	if (t->heap_n == 0)
		return UINT64_MAX;
	const probe_row_t *top = &t->rows[t->heap[0]];
	uint64_t wait = top->due_ms > now_ms ? top->due_ms - now_ms : 0;
	uint64_t tokens = t->tokens_milli;
	if (now_ms > t->bucket_ms)
		tokens += (now_ms - t->bucket_ms) * t->o.rate;
	uint64_t cost = 1000u * t->o.samples;
	if (tokens < cost) {
		uint64_t fill = (cost - tokens + t->o.rate - 1) / t->o.rate;
		wait = fill > wait ? fill : wait;
	}
	return wait;
}

uint8_t probe_hops_from_ttl(uint8_t ttl)
{
	if (ttl == 0)
		return 0;
	unsigned initial = ttl <= 64 ? 64 : ttl <= 128 ? 128 : 255;
	return (uint8_t)(initial - ttl + 1);
}

uint32_t probe_ewma(uint32_t old, uint32_t sample, unsigned weight)
{
	uint64_t v = (uint64_t)sample * weight + (uint64_t)old * (100u - weight);
	return (uint32_t)((v + 50) / 100);
}

/* Fold a measurement with at least one answer into the row. */
static void fold_answered(const probe_table_t *t, probe_row_t *row, const probe_result_t *res)
{
	uint32_t rtt = (res->min_rtt_us + 50) / 100;
	if (rtt >= GSLB_PATHFMT_RTT_NONE)
		rtt = GSLB_PATHFMT_RTT_NONE - 1;
	uint32_t loss = (res->sent - res->answered) * 100u / res->sent;
	bool first = !row->measured || row->rtt == GSLB_PATHFMT_RTT_NONE;
	row->rtt = (uint16_t)(first ? rtt : probe_ewma(row->rtt, rtt, t->o.smoothing));
	row->loss = (uint8_t)(!row->measured ? loss : probe_ewma(row->loss, loss, t->o.smoothing));
	if (res->ttl != 0)
		row->hops = probe_hops_from_ttl(res->ttl);
	row->answered = (uint8_t)(res->answered > 255 ? 255 : res->answered);
	row->method = (int8_t)row->trying;
}

/* Every method was silent: full loss this round; a known RTT is kept (it is what the path
 * had, and the loss tells the node it no longer answers); the methods are tried afresh. */
static void fold_silent(const probe_table_t *t, probe_row_t *row)
{
	row->loss = (uint8_t)(!row->measured ? 100 : probe_ewma(row->loss, 100, t->o.smoothing));
	row->answered = 0;
	row->method = -1;
	row->trying = 0;
}

bool probe_table_done(probe_table_t *t, probe_row_t *row, const probe_result_t *res,
                      uint64_t now_ms)
{
	row->in_flight = false;
	bool measured = true;
	if (res->answered == 0 && row->trying + 1u < t->o.n_methods) {
		row->trying++; /* keeps its due time: it goes again at once, in its place */
		measured = false;
	} else {
		if (res->answered > 0 && res->sent > 0)
			fold_answered(t, row, res);
		else
			fold_silent(t, row);
		row->measured = true;
		row->measured_ms = now_ms;
		row->urgent = false;
		reschedule(t, row, now_ms);
		t->dirty = true;
	}
	heap_push(t, (uint32_t)(row - t->rows));
	return measured;
}

void probe_table_abort(probe_table_t *t, probe_row_t *row, uint64_t retry_ms)
{
	row->in_flight = false;
	row->due_ms = retry_ms;
	heap_push(t, (uint32_t)(row - t->rows));
}

size_t probe_table_backlog(const probe_table_t *t, uint64_t now_ms)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n; i++) {
		const probe_row_t *r = &t->rows[i];
		n += !r->in_flight && r->due_ms + 1000 < now_ms;
	}
	return n;
}

double probe_table_needed_rate(const probe_table_t *t)
{
	double need = 0;
	for (size_t i = 0; i < t->n; i++) {
		unsigned every = t->rows[i].hot ? t->o.hot_interval : t->o.interval;
		need += t->o.samples * 1000.0 / (every ? every : 1);
	}
	return need;
}

/* ---- publishing ----------------------------------------------------------------------- */

static int row_cmp(const void *a, const void *b)
{
	const gslb_path_row_t *x = a, *y = b;
	if (x->prefix != y->prefix)
		return x->prefix < y->prefix ? -1 : 1;
	return (int)x->plen - (int)y->plen;
}

static gslb_path_row_t published(const probe_row_t *r, uint64_t age_ref_ms)
{
	uint64_t age = age_ref_ms > r->measured_ms ? (age_ref_ms - r->measured_ms) / 1000 : 0;
	return (gslb_path_row_t){.prefix = r->key,
	                         .plen = r->plen,
	                         .loss = r->loss,
	                         .rtt = r->rtt,
	                         .hops = r->hops,
	                         .answered = r->answered,
	                         .age_s = (uint16_t)(age > UINT16_MAX ? UINT16_MAX : age)};
}

void probe_table_snapshot(probe_table_t *t, const char *name, uint64_t now_unix_ms,
                          uint64_t age_ref_ms, gslb_path_table_t *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", name);
	out->generated_ms = now_unix_ms;
	out->rows4 = xcalloc(t->n + 1, sizeof(*out->rows4));
	out->rows6 = xcalloc(t->n + 1, sizeof(*out->rows6));
	for (size_t i = 0; i < t->n; i++) {
		const probe_row_t *r = &t->rows[i];
		if (!r->measured)
			continue;
		if (r->family == 4)
			out->rows4[out->n4++] = published(r, age_ref_ms);
		else
			out->rows6[out->n6++] = published(r, age_ref_ms);
	}
	qsort(out->rows4, out->n4, sizeof(*out->rows4), row_cmp);
	qsort(out->rows6, out->n6, sizeof(*out->rows6), row_cmp);
	t->dirty = false;
}
