/*
 * IXFR history: the difference between two loaded versions of a zone, and journals of such
 * differences. Built on the control thread during a reload or when a secondary zone's new
 * version is published; read by query and TCP threads.
 *
 * The difference walks both zones node by node: a record of the old zone that the new one
 * does not have (same owner, type, TTL and rdata) is deleted, a record of the new zone the
 * old one does not have is added. RRsets share one TTL, so a TTL change deletes and re-adds
 * the whole RRset, which is what a secondary applying the difference needs.
 */
#include "zone/journal.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/siphash.h"
#include "dns/const.h"
#include "dns/dname.h"
#include "dns/wire.h"

/* A growable byte buffer for building a change. */
typedef struct {
	uint8_t *data;
	size_t len, cap;
} buf_t;

static void buf_put(buf_t *b, const void *src, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->len + n)
			cap *= 2;
		b->data = xrealloc(b->data, cap);
		b->cap = cap;
	}
	memcpy(b->data + b->len, src, n);
	b->len += n;
}

static void put_rr(buf_t *b, const uint8_t *owner, uint16_t type, uint32_t ttl,
                   const uint8_t *rdata, uint16_t rdlen)
{
	uint8_t fixed[8];
	wire_write_u16(fixed, type);
	wire_write_u32(fixed + 2, ttl);
	wire_write_u16(fixed + 6, rdlen);
	buf_put(b, owner, dname_len(owner));
	buf_put(b, fixed, sizeof(fixed));
	buf_put(b, rdata, rdlen);
}

static bool rrset_has(const zone_rrset_t *rrset, const uint8_t *rdata, uint16_t rdlen)
{
	zone_rdata_iter_t it = zone_rdata_iter(rrset);
	uint16_t len;
	const uint8_t *rd;
	while ((rd = zone_rdata_next(&it, &len)) != NULL) {
		if (len == rdlen && memcmp(rd, rdata, rdlen) == 0)
			return true;
	}
	return false;
}

/*
 * Appends to @p out every record of @p zone that @p other lacks; returns how many. @p bytes
 * (when not NULL) receives what all of @p zone's records take on the wire, uncompressed.
 */
static size_t records_missing(const zone_t *zone, const zone_t *other, buf_t *out, size_t *bytes)
{
	size_t n_nodes, count = 0, total = 0;
	const zone_node_t *nodes = zone_nodes(zone, &n_nodes);
	for (size_t i = 0; i < n_nodes; i++) {
		const zone_node_t *node = &nodes[i];
		size_t owner_len = dname_len(node->owner);
		const zone_node_t *peer = zone_find_node(other, node->owner, owner_len);
		for (uint16_t r = 0; r < node->n_rrsets; r++) {
			const zone_rrset_t *rrset = &node->rrsets[r];
			if (rrset->type == DNS_TYPE_SOA && (node->flags & ZONE_NODE_APEX))
				continue; /* the SOAs frame each part of the change */
			const zone_rrset_t *theirs =
			    peer ? zone_node_rrset(peer, rrset->type) : NULL;
			if (theirs && theirs->ttl != rrset->ttl)
				theirs = NULL;
			zone_rdata_iter_t it = zone_rdata_iter(rrset);
			uint16_t rdlen;
			const uint8_t *rdata;
			while ((rdata = zone_rdata_next(&it, &rdlen)) != NULL) {
				total += owner_len + 10 + rdlen;
				if (theirs && rrset_has(theirs, rdata, rdlen))
					continue;
				put_rr(out, node->owner, rrset->type, rrset->ttl, rdata, rdlen);
				count++;
			}
		}
	}
	if (bytes)
		*bytes = total;
	return count;
}

static void put_soa(buf_t *b, const zone_t *zone)
{
	const zone_rrset_t *soa = zone->soa;
	uint16_t rdlen = wire_read_u16(soa->rdata);
	put_rr(b, zone->apex, DNS_TYPE_SOA, soa->ttl, soa->rdata + 2, rdlen);
}

/* The change from @p from to @p to; @p zone_bytes receives @p to's size in a transfer. */
static zone_change_t *change_new(const zone_t *from, const zone_t *to, size_t *zone_bytes)
{
	buf_t del = {0}, add = {0};
	put_soa(&del, from);
	size_t n_del = 1 + records_missing(from, to, &del, NULL);
	put_soa(&add, to);
	size_t n_add = 1 + records_missing(to, from, &add, zone_bytes);
	buf_put(&del, add.data, add.len);
	free(add.data);
	zone_change_t *c = xcalloc(1, sizeof(*c));
	c->from = from->serial;
	c->to = to->serial;
	c->data = del.data;
	c->len = del.len;
	c->n_del = n_del;
	c->n_add = n_add;
	c->refcount = 1;
	return c;
}

static void change_unref(zone_change_t *c)
{
	if (__atomic_sub_fetch(&c->refcount, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	free(c->data);
	free(c);
}

/*
 * A history below this many bytes is kept whatever the zone's size: a small zone's changes
 * can outweigh the zone (a few records replaced), yet cost next to nothing.
 */
#define JOURNAL_MIN_BYTES (64 * 1024)

/*
 * A journal of the newest of @p old's @p n_old changes followed by @p last (NULL = none; the
 * journal takes over its reference), dropping the oldest while there are more than @p max or
 * they weigh more than @p limit bytes.
 */
static zone_journal_t *journal_build(zone_change_t *const *old, size_t n_old, zone_change_t *last,
                                     unsigned max, size_t limit)
{
	if (limit < JOURNAL_MIN_BYTES)
		limit = JOURNAL_MIN_BYTES;
	size_t total = n_old + (last != NULL);
	size_t keep = 0, bytes = 0;
	while (keep < total && keep < max) {
		size_t i = total - 1 - keep;
		const zone_change_t *c = i < n_old ? old[i] : last;
		if (bytes + c->len > limit)
			break;
		bytes += c->len;
		keep++;
	}
	if (keep == 0) {
		if (last)
			change_unref(last);
		return NULL;
	}
	zone_journal_t *j = xcalloc(1, sizeof(*j));
	j->changes = xcalloc(keep, sizeof(*j->changes));
	for (size_t k = 0; k < keep; k++) {
		size_t i = total - keep + k;
		zone_change_t *c = i < n_old ? old[i] : last;
		if (c != last)
			__atomic_fetch_add(&c->refcount, 1, __ATOMIC_RELAXED);
		j->changes[k] = c;
	}
	j->n = keep;
	j->bytes = bytes;
	j->refcount = 1;
	return j;
}

/* What a full transfer of @p zone takes, uncompressed: the bound on its history. */
static size_t zone_bytes(const zone_t *zone)
{
	buf_t none = {0};
	size_t bytes = 0;
	records_missing(zone, zone, &none, &bytes);
	free(none.data);
	return bytes;
}

zone_journal_t *zone_journal_next(const zone_journal_t *old, const zone_t *from, const zone_t *to,
                                  unsigned max_changes)
{
	if (max_changes == 0 || from == NULL)
		return NULL;
	if (from == to) {
		if (old == NULL)
			return NULL;
		if (old->n <= max_changes)
			return zone_journal_ref(old);
		return journal_build(old->changes, old->n, NULL, max_changes, zone_bytes(to));
	}
	if (!zone_serial_gt(to->serial, from->serial))
		return NULL;
	size_t limit = 0;
	zone_change_t *c = change_new(from, to, &limit);
	/* A history that does not end where this change starts cannot be chained to it. */
	bool chained = old && old->n > 0 && old->changes[old->n - 1]->to == from->serial;
	return journal_build(chained ? old->changes : NULL, chained ? old->n : 0, c, max_changes,
	                     limit);
}

/* Any fixed key: the digest detects edits, it does not stand up to someone forging them. */
#define DIGEST_K0 0x5374656572204a6eull
#define DIGEST_K1 0x6c20646967657374ull

uint64_t zone_digest(const zone_t *zone)
{
	size_t n_nodes;
	uint64_t sum = 0;
	const zone_node_t *nodes = zone_nodes(zone, &n_nodes);
	for (size_t i = 0; i < n_nodes; i++) {
		const zone_node_t *node = &nodes[i];
		uint64_t owner =
		    steer_siphash13(DIGEST_K0, DIGEST_K1, node->owner, dname_len(node->owner));
		for (uint16_t r = 0; r < node->n_rrsets; r++) {
			const zone_rrset_t *rrset = &node->rrsets[r];
			uint64_t k1 = DIGEST_K1 ^ ((uint64_t)rrset->type << 32 | rrset->ttl);
			zone_rdata_iter_t it = zone_rdata_iter(rrset);
			uint16_t rdlen;
			const uint8_t *rdata;
			/* a sum of per-record hashes: the same records in any order, the same
			 * digest */
			while ((rdata = zone_rdata_next(&it, &rdlen)) != NULL)
				sum += steer_siphash13(DIGEST_K0 ^ owner, k1, rdata, rdlen);
		}
	}
	return sum;
}

zone_journal_t *zone_journal_resume(const zone_journal_t *loaded, const zone_t *zone,
                                    unsigned max_changes)
{
	if (loaded == NULL || loaded->n == 0 || max_changes == 0 ||
	    loaded->changes[loaded->n - 1]->to != zone->serial)
		return NULL;
	return journal_build(loaded->changes, loaded->n, NULL, max_changes, zone_bytes(zone));
}

long zone_journal_find(const zone_journal_t *journal, uint32_t serial, uint32_t current)
{
	if (journal == NULL || journal->n == 0 || journal->changes[journal->n - 1]->to != current)
		return -1;
	for (size_t i = 0; i < journal->n; i++) {
		if (journal->changes[i]->from == serial)
			return (long)i;
	}
	return -1;
}

size_t zone_change_read(const zone_change_t *change, size_t pos, zone_change_rr_t *rr)
{
	const uint8_t *p = change->data + pos;
	rr->owner = p;
	p += dname_len(p);
	rr->type = wire_read_u16(p);
	rr->ttl = wire_read_u32(p + 2);
	rr->rdlen = wire_read_u16(p + 6);
	rr->rdata = p + 8;
	return (size_t)(rr->rdata + rr->rdlen - change->data);
}

zone_journal_t *zone_journal_ref(const zone_journal_t *journal)
{
	zone_journal_t *j = (zone_journal_t *)journal;
	if (j)
		__atomic_fetch_add(&j->refcount, 1, __ATOMIC_RELAXED);
	return j;
}

void zone_journal_unref(const zone_journal_t *journal)
{
	zone_journal_t *j = (zone_journal_t *)journal;
	if (j == NULL || __atomic_sub_fetch(&j->refcount, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	for (size_t i = 0; i < j->n; i++)
		change_unref(j->changes[i]);
	free(j->changes);
	free(j);
}
