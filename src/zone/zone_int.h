/*
 * Internals shared by the zone module's files: the storage of a loaded zone (arena chunks, the
 * node array and the name index), the name hash, and the page-mapped vectors used while
 * loading. Nothing here is used outside src/zone/.
 *
 * Large blocks are mapped with mmap() rather than malloc() so that a large zone costs no
 * per-record allocation and returns every page to the kernel when it is freed (glibc would
 * raise its mmap threshold after the first big free and keep later big blocks on its heap).
 * Small blocks come from malloc so that a tiny zone does not cost whole pages.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "zone/zone.h"

/* Bump allocator over chunks; nothing is freed before the whole arena. */
typedef struct zone_chunk zone_chunk_t;
typedef struct {
	zone_chunk_t *head;
	uint8_t *pos;
	uint8_t *end;     /* usable end: ZONE_ARENA_SLACK bytes before the chunk's real end */
	size_t next_size; /* size of the next regular chunk, doubles up to a cap */
} zone_arena_t;

/*
 * Bytes kept readable after the usable end of each chunk, so comparing a stored name with
 * memcmp() over the length of another valid name never reads outside a mapping.
 */
#define ZONE_ARENA_SLACK DNS_DNAME_MAXLEN

/* A growable array: malloc while small, then mapped (mremap keeps growth copy-free). */
typedef struct {
	uint8_t *data;
	size_t used; /* bytes */
	size_t cap;  /* bytes allocated; decides malloc or mapping, see zone.c */
} zone_vec_t;

/* A file the zone was read from (the main file first, then $INCLUDEd ones). */
typedef struct {
	char *name;
	struct stat st;
} zone_src_t;

struct zone_priv {
	zone_arena_t arena; /* owner names, rrset arrays, rdata */
	zone_vec_t nodes;   /* zone_node_t[n_nodes], apex first, parents before children */
	/*
	 * Open-addressing name index with linear probing. An entry is the upper 32 bits of the
	 * name hash (the tag) above the node index + 1; 0 marks a free slot. The slot of a
	 * hash is the top index_bits bits of its tag, so the table can be rebuilt from entries
	 * alone when it grows.
	 */
	zone_vec_t index;
	unsigned index_bits;
	size_t index_used;
	zone_src_t *srcs; /* owned, n_srcs entries */
	size_t n_srcs;
};

/**
 * Hash of a wire name of @p len bytes (lowercase expected; case is not folded here). Fast on
 * short inputs: whole 8-byte words, then a final mix.
 */
static inline uint64_t zone_name_hash(const uint8_t *name, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ (len * 0xff51afd7ed558ccdULL);
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, name, 8);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
		h ^= h >> 31;
		name += 8;
		len -= 8;
	}
	uint64_t w = 0;
	memcpy(&w, name, len);
	h = (h ^ w) * 0x94d049bb133111ebULL;
	/* murmur3 fmix64: spreads every input bit into the top bits that pick the slot */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/** Length of the valid uncompressed wire name @p name, at most DNS_DNAME_MAXLEN. */
static inline size_t zone_wire_len(const uint8_t *name)
{
	size_t len = 0;
	while (name[len] != 0 && len < DNS_DNAME_MAXLEN)
		len += (size_t)name[len] + 1;
	return len + 1;
}

/** Map @p size bytes of zeroed anonymous memory; aborts on failure (control path). */
void *zone_map(size_t size);
/** Unmap what zone_map() mapped. NULL is ignored. */
void zone_unmap(void *ptr, size_t size);

/**
 * Ensure room for @p extra more bytes; aborts on failure. Returns the vector's data, which
 * may have moved. A vector's first allocation is zeroed, later growth is not.
 */
void *zone_vec_reserve(zone_vec_t *vec, size_t extra);
/** Give back the pages of a large vector beyond @c used (the data does not move). */
void zone_vec_shrink(zone_vec_t *vec);
/** Free and reset. */
void zone_vec_free(zone_vec_t *vec);

/** @p size bytes aligned to @p align (a power of two <= 16) from @p arena; aborts on OOM. */
void *zone_arena_alloc(zone_arena_t *arena, size_t size, size_t align);
/** Unmap every chunk of @p arena. */
void zone_arena_free(zone_arena_t *arena);

/**
 * Put @p entry (hash tag in the upper 32 bits, 1-based position in the lower) into the
 * open-addressing table @p tab of 2^@p bits slots, which must have a free slot. Shared by the
 * node index and the zone set's apex index.
 */
static inline void zone_index_put(uint64_t *tab, unsigned bits, uint64_t entry)
{
	size_t mask = ((size_t)1 << bits) - 1;
	size_t slot = (uint32_t)(entry >> 32) >> (32 - bits);
	while (tab[slot] != 0)
		slot = (slot + 1) & mask;
	tab[slot] = entry;
}

/** Index node @p idx under @p hash, growing the table as needed. The name must be new. */
void zone_index_insert(struct zone_priv *priv, uint64_t hash, uint32_t idx);

/**
 * Node with the name @p name (@p len bytes, hash @p hash), or NULL. Tags are compared first, so
 * a full name compare almost only happens on the match itself.
 */
static inline zone_node_t *zone_index_find(const struct zone_priv *priv, const uint8_t *name,
                                           size_t len, uint64_t hash)
{
	const uint64_t *tab = (const uint64_t *)priv->index.data;
	zone_node_t *nodes = (zone_node_t *)priv->nodes.data;
	uint32_t tag = (uint32_t)(hash >> 32);
	size_t mask = ((size_t)1 << priv->index_bits) - 1;
	for (size_t slot = tag >> (32 - priv->index_bits);; slot = (slot + 1) & mask) {
		uint64_t e = tab[slot];
		if (e == 0)
			return NULL;
		if ((uint32_t)(e >> 32) != tag)
			continue;
		zone_node_t *node = &nodes[(uint32_t)e - 1];
		/* Safe over-read: arena chunks keep ZONE_ARENA_SLACK readable bytes. */
		if (memcmp(node->owner, name, len) == 0)
			return node;
	}
}

/** Free a zone whose reference count dropped to zero (or that failed to load). */
void zone_free(zone_t *zone);
