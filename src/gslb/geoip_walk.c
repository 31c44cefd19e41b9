/*
 * Compiling GeoIP databases into prefixes: the whole-tree walk of one database (one callback
 * per leaf, each record decoded once) and the joint walk of a location and an ASN database.
 * Control thread, when maps are (re)built.
 */
#include "gslb/geoip.h"

#include <arpa/inet.h>
#include <maxminddb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "gslb/geoip_int.h"

/* =========================================================================================
 * Walking the search tree
 */

/* Records decoded so far, indexed by a hash of their data offset: a full GeoLite2-City has
 * millions of leaves but a few hundred thousand records, so each is decoded once. */
typedef struct {
	gslb_geoip_record_t *recs; /* recs[i].id == i */
	uint32_t n, cap;
	uint32_t *slots; /* record index + 1, 0 = free; open addressing */
	uint32_t mask;
} rec_cache_t;

static uint32_t hash_offset(uint32_t offset)
{
	return offset * 0x9E3779B1u; /* Fibonacci hashing: offsets are multiples of small sizes */
}

static void cache_grow_slots(rec_cache_t *c)
{
	uint32_t size = c->mask ? (c->mask + 1) * 2 : 1024;
	uint32_t *slots = xcalloc(size, sizeof(*slots));
	for (uint32_t i = 0; i < c->n; i++) {
		uint32_t s = hash_offset(c->recs[i].data_offset) & (size - 1);
		while (slots[s])
			s = (s + 1) & (size - 1);
		slots[s] = i + 1;
	}
	free(c->slots);
	c->slots = slots;
	c->mask = size - 1;
}

/* The record at @p offset, decoded on first use. NULL with STEER_EMALF in *ret. */
static const gslb_geoip_record_t *cache_get(rec_cache_t *c, const MMDB_s *mmdb, uint32_t offset,
                                            int *ret)
{
	uint32_t s = hash_offset(offset) & c->mask;
	for (; c->slots[s]; s = (s + 1) & c->mask) {
		const gslb_geoip_record_t *r = &c->recs[c->slots[s] - 1];
		if (r->data_offset == offset)
			return r;
	}
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 256;
		c->recs = xrealloc(c->recs, (size_t)c->cap * sizeof(*c->recs));
	}
	gslb_geoip_record_t *r = &c->recs[c->n];
	*ret = geoip_decode_record(mmdb, offset, r);
	if (*ret != 0)
		return NULL;
	r->id = c->n++;
	c->slots[s] = r->id + 1;
	if (c->n * 2 > c->mask + 1) /* keep load under 1/2 for short probes */
		cache_grow_slots(c);
	return r;
}

typedef struct {
	const gslb_geoip_db_t *db;
	gslb_geoip_leaf_cb cb;
	void *ctx;
	rec_cache_t cache;
	gslb_geoip_walk_stats_t stats;
	uint8_t path[16]; /* bits taken from the root so far */
	char *err;
	size_t errlen;
} walk_t;

static void path_set(walk_t *w, unsigned bit, bool one)
{
	uint8_t mask = (uint8_t)(0x80u >> (bit & 7));
	if (one)
		w->path[bit >> 3] |= mask;
	else
		w->path[bit >> 3] &= (uint8_t)~mask;
}

/* True when the first @p bits of the path are all zero. */
static bool path_zero(const walk_t *w, unsigned bits)
{
	for (unsigned i = 0; i < bits / 8; i++)
		if (w->path[i])
			return false;
	return bits % 8 == 0 || (w->path[bits / 8] & (uint8_t)(0xFF00u >> (bits % 8))) == 0;
}

static int emit(walk_t *w, int family, unsigned len, const uint8_t *addr,
                const gslb_geoip_record_t *rec)
{
	steer_prefix_t prefix;
	memset(&prefix, 0, sizeof(prefix));
	prefix.family = (sa_family_t)family;
	prefix.len = (uint8_t)len;
	size_t bytes = (len + 7) / 8;
	memcpy(prefix.addr, addr, bytes);
	if (len % 8)
		prefix.addr[bytes - 1] &= (uint8_t)(0xFFu << (8 - len % 8));
	w->stats.leaves++;
	return w->cb(&prefix, rec, w->ctx);
}

/* A data leaf at ::/depth with depth < 96 holds all of IPv4 and some IPv6: report it as
 * 0.0.0.0/0 plus, for each level below, the IPv6 sibling of the zero path, narrowest (lowest
 * address) first to keep the walk in address order. */
static int emit_split_v4(walk_t *w, unsigned depth, const gslb_geoip_record_t *rec)
{
	static const uint8_t zero[16];
	int ret = emit(w, AF_INET, 0, zero, rec);
	for (unsigned k = 96; k > depth && ret == 0; k--) {
		uint8_t addr[16] = {0};
		addr[(k - 1) >> 3] = (uint8_t)(0x80u >> ((k - 1) & 7));
		ret = emit(w, AF_INET6, k, addr, rec);
	}
	return ret;
}

/* MaxMind's writer links these to the IPv4 tree at ::/96 (alias_ipv6_to_ipv4). */
static bool at_alias_location(const uint8_t *path, unsigned depth)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t teredo[4] = {0x20, 0x01, 0, 0};
	static const uint8_t six_to_four[2] = {0x20, 0x02};
	return (depth == 96 && memcmp(path, mapped, sizeof(mapped)) == 0) ||
	       (depth == 32 && memcmp(path, teredo, sizeof(teredo)) == 0) ||
	       (depth == 16 && memcmp(path, six_to_four, sizeof(six_to_four)) == 0);
}

/* True when the record reached at @p depth is a link back to the IPv4 data. */
static bool is_alias(const walk_t *w, uint64_t record, uint8_t type, unsigned depth)
{
	const gslb_geoip_db_t *db = w->db;
	if (db->depth != 128 || db->v4_depth == 0 || record != db->v4_record)
		return false;
	if (depth == db->v4_depth && path_zero(w, depth))
		return false; /* the original */
	/* Every node has one parent in a tree, so a second link to the IPv4 root node is an
	 * alias wherever it is. A data record, though, is legitimately shared by many leaves:
	 * only the writer's alias locations count then. */
	if (type == MMDB_RECORD_TYPE_SEARCH_NODE)
		return true;
	return at_alias_location(w->path, depth);
}

static int walk_data(walk_t *w, uint32_t offset, unsigned depth)
{
	int ret = 0;
	const gslb_geoip_record_t *rec = cache_get(&w->cache, &w->db->mmdb, offset, &ret);
	if (!rec) {
		snprintf(w->err, w->errlen, "%s: corrupt data record at offset %u", w->db->path,
		         offset);
		return ret;
	}
	if (w->db->depth == 32)
		return emit(w, AF_INET, depth, w->path, rec);
	if (depth >= 96 && path_zero(w, 96))
		return emit(w, AF_INET, depth - 96, w->path + 12, rec);
	if (path_zero(w, depth))
		return emit_split_v4(w, depth, rec);
	return emit(w, AF_INET6, depth, w->path, rec);
}

static int walk_node(walk_t *w, uint32_t node, unsigned depth);

/* Follow one record found at @p depth bits (the path holds its bits). */
static int walk_record(walk_t *w, uint64_t record, uint8_t type, const MMDB_entry_s *entry,
                       unsigned depth)
{
	if ((type == MMDB_RECORD_TYPE_SEARCH_NODE || type == MMDB_RECORD_TYPE_DATA) &&
	    is_alias(w, record, type, depth)) {
		w->stats.aliases++;
		return 0;
	}
	switch (type) {
	case MMDB_RECORD_TYPE_SEARCH_NODE:
		return walk_node(w, (uint32_t)record, depth);
	case MMDB_RECORD_TYPE_EMPTY:
		return 0;
	case MMDB_RECORD_TYPE_DATA:
		return walk_data(w, entry->offset, depth);
	default:
		snprintf(w->err, w->errlen, "%s: corrupt search tree (record %llu at depth %u)",
		         w->db->path, (unsigned long long)record, depth);
		return STEER_EMALF;
	}
}

static int walk_node(walk_t *w, uint32_t node, unsigned depth)
{
	/* A valid tree reaches each node once (aliases are skipped) and ends by the address
	 * length; anything else is a corrupt file that could otherwise loop for ever. */
	if (w->stats.nodes >= w->db->mmdb.metadata.node_count || depth >= w->db->depth) {
		snprintf(w->err, w->errlen,
		         "%s: corrupt search tree (node %u reached again or "
		         "below %u bits)",
		         w->db->path, node, w->db->depth);
		return STEER_EMALF;
	}
	w->stats.nodes++;
	MMDB_search_node_s sn;
	if (MMDB_read_node(&w->db->mmdb, node, &sn) != MMDB_SUCCESS) {
		snprintf(w->err, w->errlen, "%s: corrupt search tree (bad node %u)", w->db->path,
		         node);
		return STEER_EMALF;
	}
	path_set(w, depth, false);
	int ret =
	    walk_record(w, sn.left_record, sn.left_record_type, &sn.left_record_entry, depth + 1);
	if (ret == 0) {
		path_set(w, depth, true);
		ret = walk_record(w, sn.right_record, sn.right_record_type, &sn.right_record_entry,
		                  depth + 1);
	}
	path_set(w, depth, false);
	return ret;
}

int gslb_geoip_walk(const gslb_geoip_db_t *db, gslb_geoip_leaf_cb cb, void *ctx,
                    gslb_geoip_walk_stats_t *stats, char *err, size_t errlen)
{
	walk_t w = {.db = db, .cb = cb, .ctx = ctx, .err = err, .errlen = errlen};
	cache_grow_slots(&w.cache);
	int ret = 0;
	if (db->mmdb.metadata.node_count > 0)
		ret = walk_node(&w, 0, 0);
	w.stats.records = w.cache.n;
	w.stats.cache_bytes = (size_t)w.cache.cap * sizeof(*w.cache.recs) +
	                      ((size_t)w.cache.mask + 1) * sizeof(*w.cache.slots);
	if (stats)
		*stats = w.stats;
	free(w.cache.recs);
	free(w.cache.slots);
	return ret;
}

/* =========================================================================================
 * Walking a location database and an ASN database as one
 */

void gslb_geoip_record_merge(const gslb_geoip_record_t *loc, const gslb_geoip_record_t *asn,
                             gslb_geoip_record_t *out)
{
	if (loc) {
		*out = *loc;
	} else {
		memset(out, 0, sizeof(*out));
	}
	out->id = GSLB_GEOIP_NO_ID;
	if (asn && (asn->flags & GSLB_GEOIP_REC_ASN)) {
		out->asn = asn->asn;
		out->flags |= GSLB_GEOIP_REC_ASN;
	}
}

/* One leaf of the ASN database, kept between the two walks. */
typedef struct {
	steer_prefix_t prefix;
	uint32_t rec; /* index into pair_t.recs (the walk's record id) */
} pair_leaf_t;

typedef struct {
	/* the ASN database, walked first: leaves in walk order, records by id */
	pair_leaf_t *leaves;
	size_t n_leaves, cap_leaves;
	gslb_geoip_record_t *recs;
	uint32_t n_recs, cap_recs;
	/* the merge */
	size_t next;     /* first ASN leaf not handled yet */
	size_t last_asn; /* the ASN leaf handled last, SIZE_MAX before the first */
	bool have_loc;
	steer_prefix_t last_loc_prefix; /* the location leaf handled last */
	gslb_geoip_record_t last_loc;   /* its record (city points into the mapping: stays valid) */
	/* dense ids for (location record id, ASN record id) pairs; open addressing */
	uint64_t *keys; /* pair + 1, 0 = free */
	uint32_t *ids;
	uint32_t mask, n_pairs;
	gslb_geoip_leaf_cb cb;
	void *ctx;
	uint64_t leaves_out;
} pair_t;

static int pair_collect(const steer_prefix_t *prefix, const gslb_geoip_record_t *rec, void *ctx)
{
	pair_t *p = ctx;
	if (p->n_leaves == p->cap_leaves) {
		p->cap_leaves = p->cap_leaves ? p->cap_leaves * 2 : 1024;
		p->leaves = xrealloc(p->leaves, p->cap_leaves * sizeof(*p->leaves));
	}
	p->leaves[p->n_leaves++] = (pair_leaf_t){.prefix = *prefix, .rec = rec->id};
	if (rec->id >= p->n_recs) { /* ids are dense, in first-seen order */
		while (rec->id >= p->cap_recs)
			p->cap_recs = p->cap_recs ? p->cap_recs * 2 : 256;
		p->recs = xrealloc(p->recs, (size_t)p->cap_recs * sizeof(*p->recs));
		p->n_recs = rec->id + 1;
	}
	p->recs[rec->id] = *rec;
	return 0;
}

static void pair_grow(pair_t *p)
{
	uint32_t size = p->mask ? (p->mask + 1) * 2 : 1024;
	uint64_t *keys = xcalloc(size, sizeof(*keys));
	uint32_t *ids = xcalloc(size, sizeof(*ids));
	for (uint32_t i = 0; p->mask && i <= p->mask; i++) {
		if (!p->keys[i])
			continue;
		uint32_t s = hash_offset((uint32_t)(p->keys[i] ^ (p->keys[i] >> 29))) & (size - 1);
		while (keys[s])
			s = (s + 1) & (size - 1);
		keys[s] = p->keys[i];
		ids[s] = p->ids[i];
	}
	free(p->keys);
	free(p->ids);
	p->keys = keys;
	p->ids = ids;
	p->mask = size - 1;
}

/* The dense id of the pair (@p loc_id, @p asn_id); GSLB_GEOIP_NO_ID stands for "no record". */
static uint32_t pair_id(pair_t *p, uint32_t loc_id, uint32_t asn_id)
{
	/* never 0: at least one side is a real record, so not both are GSLB_GEOIP_NO_ID */
	uint64_t key = (((uint64_t)loc_id << 32) | asn_id) + 1;
	uint32_t s = hash_offset((uint32_t)(key ^ (key >> 29))) & p->mask;
	for (; p->keys[s]; s = (s + 1) & p->mask)
		if (p->keys[s] == key)
			return p->ids[s];
	p->keys[s] = key;
	p->ids[s] = p->n_pairs++;
	if (p->n_pairs * 2 > p->mask + 1)
		pair_grow(p);
	return p->n_pairs - 1;
}

/* True when @p outer contains @p inner (or equals it). */
static bool prefix_contains(const steer_prefix_t *outer, const steer_prefix_t *inner)
{
	if (outer->family != inner->family || outer->len > inner->len)
		return false;
	unsigned bytes = outer->len / 8u, rest = outer->len % 8u;
	if (memcmp(outer->addr, inner->addr, bytes) != 0)
		return false;
	return rest == 0 ||
	       ((outer->addr[bytes] ^ inner->addr[bytes]) & (uint8_t)(0xFF00u >> rest)) == 0;
}

/* Walk order: IPv4 before IPv6, then by start address, then wider first. */
static int prefix_order(const steer_prefix_t *a, const steer_prefix_t *b)
{
	if (a->family != b->family)
		return a->family == AF_INET ? -1 : 1;
	int c = memcmp(a->addr, b->addr, sizeof(a->addr));
	if (c != 0)
		return c;
	return (a->len > b->len) - (a->len < b->len);
}

static int pair_emit(pair_t *p, const steer_prefix_t *prefix, const gslb_geoip_record_t *loc,
                     const gslb_geoip_record_t *asn)
{
	gslb_geoip_record_t rec;
	gslb_geoip_record_merge(loc, asn, &rec);
	rec.id = pair_id(p, loc ? loc->id : GSLB_GEOIP_NO_ID, asn ? asn->id : GSLB_GEOIP_NO_ID);
	p->leaves_out++;
	return p->cb(prefix, &rec, p->ctx);
}

/* An ASN leaf: inside the location leaf handled last, or alone. Both streams consist of
 * disjoint blocks in walk order, so the only block of the other stream that can contain a
 * block is the one handled just before it. */
static int pair_asn_leaf(pair_t *p, size_t i)
{
	const pair_leaf_t *l = &p->leaves[i];
	bool inside = p->have_loc && prefix_contains(&p->last_loc_prefix, &l->prefix);
	p->last_asn = i;
	return pair_emit(p, &l->prefix, inside ? &p->last_loc : NULL, &p->recs[l->rec]);
}

static int pair_loc_leaf(const steer_prefix_t *prefix, const gslb_geoip_record_t *rec, void *ctx)
{
	pair_t *p = ctx;
	int ret = 0;
	while (ret == 0 && p->next < p->n_leaves &&
	       prefix_order(&p->leaves[p->next].prefix, prefix) < 0)
		ret = pair_asn_leaf(p, p->next++);
	if (ret != 0)
		return ret;
	const gslb_geoip_record_t *asn = NULL;
	if (p->next < p->n_leaves && prefix_order(&p->leaves[p->next].prefix, prefix) == 0) {
		/* the same block in both: one leaf */
		p->last_asn = p->next++;
		asn = &p->recs[p->leaves[p->last_asn].rec];
	} else if (p->last_asn != SIZE_MAX &&
	           prefix_contains(&p->leaves[p->last_asn].prefix, prefix)) {
		asn = &p->recs[p->leaves[p->last_asn].rec];
	}
	p->have_loc = true;
	p->last_loc_prefix = *prefix;
	p->last_loc = *rec;
	return pair_emit(p, prefix, rec, asn);
}

int gslb_geoip_walk_pair(const gslb_geoip_db_t *loc, const gslb_geoip_db_t *asn,
                         gslb_geoip_leaf_cb cb, void *ctx, gslb_geoip_walk_stats_t *stats,
                         char *err, size_t errlen)
{
	pair_t p = {.cb = cb, .ctx = ctx, .last_asn = SIZE_MAX};
	gslb_geoip_walk_stats_t sa = {0}, sl = {0};
	pair_grow(&p);
	int ret = gslb_geoip_walk(asn, pair_collect, &p, &sa, err, errlen);
	size_t held = p.cap_leaves * sizeof(*p.leaves) + (size_t)p.cap_recs * sizeof(*p.recs);
	if (ret == 0)
		ret = gslb_geoip_walk(loc, pair_loc_leaf, &p, &sl, err, errlen);
	while (ret == 0 && p.next < p.n_leaves)
		ret = pair_asn_leaf(&p, p.next++);
	if (stats) {
		size_t pairs = ((size_t)p.mask + 1) * (sizeof(*p.keys) + sizeof(*p.ids));
		/* the ASN leaves are held through both walks */
		size_t peak =
		    held + (sa.cache_bytes > sl.cache_bytes ? sa.cache_bytes : sl.cache_bytes);
		*stats = (gslb_geoip_walk_stats_t){
		    .leaves = p.leaves_out,
		    .records = p.n_pairs,
		    .nodes = sa.nodes + sl.nodes,
		    .aliases = sa.aliases + sl.aliases,
		    .cache_bytes = peak + pairs,
		};
	}
	free(p.leaves);
	free(p.recs);
	free(p.keys);
	free(p.ids);
	return ret;
}
