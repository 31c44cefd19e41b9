/*
 * The loaded zone: lookups by name and type, reference counting, change detection and the
 * storage primitives (mapped arena, vectors, name index) the loader fills in. Lookups run on
 * any thread without locks because a zone is never modified after zone_load() returns; the
 * reference count is the only shared mutable field.
 */
#include "zone/zone.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "zone/zone_int.h"

/* First arena chunk: small, so the many tiny zones of a large deployment stay cheap. */
#define ARENA_FIRST_CHUNK (4 * 1024)
/* Cap of the doubling: big enough that a million-record zone needs only ~100 mappings. */
#define ARENA_MAX_CHUNK (4 * 1024 * 1024)
/* Smallest index: 2^4 slots, so the slot shift (32 - bits) stays well defined. */
#define INDEX_MIN_BITS 4
/* First capacity of a vector, in bytes. */
#define VEC_FIRST_CAP 256
/*
 * Blocks this big or bigger are mapped, smaller ones come from malloc: a tiny zone then costs
 * a few hundred bytes instead of whole pages, and big ones go back to the kernel when freed.
 * A multiple of the page size, so a mapped block never shrinks below it.
 */
#define MAP_MIN (64 * 1024)

static size_t page_round(size_t size)
{
	/* sysconf() reads the aux vector, no system call; no cached static to race on. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return (size + page - 1) & ~(page - 1);
}

void *zone_map(size_t size)
{
	void *p = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	               -1, 0);
	if (p == MAP_FAILED)
		abort();
	return p;
}

void zone_unmap(void *ptr, size_t size)
{
	if (ptr != NULL)
		munmap(ptr, page_round(size));
}

/* Zeroed block of @p size bytes: mapped from MAP_MIN on, from malloc below. */
static void *block_alloc(size_t size)
{
	return size >= MAP_MIN ? zone_map(size) : xcalloc(1, size);
}

static void block_free(void *ptr, size_t size)
{
	if (size >= MAP_MIN)
		zone_unmap(ptr, size);
	else
		free(ptr);
}

void *zone_vec_reserve(zone_vec_t *vec, size_t extra)
{
	if (vec->cap - vec->used >= extra)
		return vec->data;
	size_t cap = vec->cap ? vec->cap * 2 : VEC_FIRST_CAP;
	while (cap - vec->used < extra)
		cap *= 2;
	if (cap >= MAP_MIN)
		cap = page_round(cap);
	if (vec->data == NULL) {
		vec->data = block_alloc(cap);
	} else if (vec->cap >= MAP_MIN) {
		void *p = mremap(vec->data, page_round(vec->cap), cap, MREMAP_MAYMOVE);
		if (p == MAP_FAILED)
			abort();
		vec->data = p;
	} else if (cap < MAP_MIN) {
		vec->data = xrealloc(vec->data, cap);
	} else {
		uint8_t *p = zone_map(cap);
		memcpy(p, vec->data, vec->used);
		free(vec->data);
		vec->data = p;
	}
	vec->cap = cap;
	return vec->data;
}

void zone_vec_shrink(zone_vec_t *vec)
{
	size_t keep = page_round(vec->used);
	if (keep < MAP_MIN)
		keep = MAP_MIN;
	if (vec->data == NULL || vec->cap < MAP_MIN || keep >= vec->cap)
		return;
	munmap(vec->data + keep, vec->cap - keep);
	vec->cap = keep;
}

void zone_vec_free(zone_vec_t *vec)
{
	if (vec->data != NULL)
		block_free(vec->data, vec->cap);
	vec->data = NULL;
	vec->used = vec->cap = 0;
}

struct zone_chunk {
	zone_chunk_t *next;
	size_t size; /* bytes allocated, this header included */
};

void *zone_arena_alloc(zone_arena_t *arena, size_t size, size_t align)
{
	uintptr_t pos = ((uintptr_t)arena->pos + align - 1) & ~(uintptr_t)(align - 1);
	if (arena->pos != NULL && pos + size <= (uintptr_t)arena->end) {
		arena->pos = (uint8_t *)pos + size;
		return (void *)pos;
	}
	if (arena->next_size == 0)
		arena->next_size = ARENA_FIRST_CHUNK;
	size_t need = sizeof(zone_chunk_t) + 16 + size + ZONE_ARENA_SLACK;
	/* A large block gets its own chunk so the current one's free tail is not wasted. */
	bool own = need > arena->next_size / 4;
	size_t csize = own ? need : arena->next_size;
	if (csize >= MAP_MIN)
		csize = page_round(csize);
	zone_chunk_t *chunk = block_alloc(csize);
	chunk->size = csize;
	chunk->next = arena->head;
	arena->head = chunk;
	uint8_t *start = (uint8_t *)(((uintptr_t)(chunk + 1) + 15) & ~(uintptr_t)15);
	if (!own || arena->pos == NULL) {
		arena->pos = start + size;
		arena->end = (uint8_t *)chunk + csize - ZONE_ARENA_SLACK;
		if (arena->next_size < ARENA_MAX_CHUNK)
			arena->next_size *= 2;
	}
	return start;
}

void zone_arena_free(zone_arena_t *arena)
{
	zone_chunk_t *chunk = arena->head;
	while (chunk != NULL) {
		zone_chunk_t *next = chunk->next;
		block_free(chunk, chunk->size);
		chunk = next;
	}
	arena->head = NULL;
	arena->pos = arena->end = NULL;
}

static void index_grow(struct zone_priv *priv)
{
	unsigned bits = priv->index_bits ? priv->index_bits + 1 : INDEX_MIN_BITS;
	zone_vec_t grown = {0};
	zone_vec_reserve(&grown, sizeof(uint64_t) << bits);
	grown.used = sizeof(uint64_t) << bits;
	const uint64_t *old = (const uint64_t *)priv->index.data;
	for (size_t i = 0; priv->index_bits && i < ((size_t)1 << priv->index_bits); i++) {
		if (old[i] != 0)
			zone_index_put((uint64_t *)grown.data, bits, old[i]);
	}
	zone_vec_free(&priv->index);
	priv->index = grown;
	priv->index_bits = bits;
}

void zone_index_insert(struct zone_priv *priv, uint64_t hash, uint32_t idx)
{
	/* Grow past 2/3 full: linear probing stays short, also for names that are absent. */
	if (priv->index_bits == 0 || (priv->index_used + 1) * 3 > ((size_t)2 << priv->index_bits))
		index_grow(priv);
	zone_index_put((uint64_t *)priv->index.data, priv->index_bits,
	               (hash & 0xffffffff00000000ULL) | ((uint64_t)idx + 1));
	priv->index_used++;
}

void zone_free(zone_t *zone)
{
	if (zone == NULL)
		return;
	struct zone_priv *priv = zone->priv;
	if (priv != NULL) {
		zone_arena_free(&priv->arena);
		zone_vec_free(&priv->nodes);
		zone_vec_free(&priv->index);
		for (size_t i = 0; i < priv->n_srcs; i++)
			free(priv->srcs[i].name);
		free(priv->srcs);
		free(priv);
	}
	free(zone->name);
	free(zone->file);
	free(zone);
}

void zone_ref(zone_t *zone)
{
	__atomic_fetch_add(&zone->refcount, 1, __ATOMIC_RELAXED);
}

void zone_unref(zone_t *zone)
{
	if (zone == NULL)
		return;
	/* acq_rel: every user's reads happen before the last one frees. */
	int left = __atomic_sub_fetch(&zone->refcount, 1, __ATOMIC_ACQ_REL);
	STEER_ASSERT(left >= 0);
	if (left == 0)
		zone_free(zone);
}

const zone_node_t *zone_find_node(const zone_t *zone, const uint8_t *name, size_t len)
{
	return zone_index_find(zone->priv, name, len, zone_name_hash(name, len));
}

const zone_rrset_t *zone_node_rrset(const zone_node_t *node, uint16_t type)
{
	const zone_rrset_t *rr = node->rrsets;
	size_t lo = 0, hi = node->n_rrsets;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (rr[mid].type == type)
			return &rr[mid];
		if (rr[mid].type < type)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static bool stat_differs(const struct stat *a, const struct stat *b)
{
	return a->st_dev != b->st_dev || a->st_ino != b->st_ino || a->st_size != b->st_size ||
	       a->st_mtim.tv_sec != b->st_mtim.tv_sec || a->st_mtim.tv_nsec != b->st_mtim.tv_nsec;
}

bool zone_file_changed(const zone_t *zone)
{
	struct stat st;
	if (stat(zone->file, &st) != 0 || stat_differs(&st, &zone->file_stat))
		return true;
	const struct zone_priv *priv = zone->priv;
	for (size_t i = 0; i < priv->n_srcs; i++) {
		if (stat(priv->srcs[i].name, &st) != 0 || stat_differs(&st, &priv->srcs[i].st))
			return true;
	}
	return false;
}

const zone_node_t *zone_nodes(const zone_t *zone, size_t *count)
{
	*count = zone->n_nodes;
	return (const zone_node_t *)zone->priv->nodes.data;
}
