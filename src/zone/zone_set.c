/*
 * The zones of one configuration snapshot. Entries stay in insertion order so their indices
 * are stable for the apex index; a separate array keeps them sorted by name for listing.
 * zone_set_find() tries the suffixes of the query name from the longest, skipping label counts
 * no apex has, so the usual query costs one or two hash lookups. Built on the control thread,
 * then read-only. Pending secondary zones (no version yet) are a short array of their own: there
 * are few of them and only for a while, and keeping them out of the entries keeps every
 * entry's zone non-NULL.
 */
#include "zone/zone_set.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "dns/dname.h"
#include "zone/zone_int.h"

/* Label counts up to this are tracked one bit each; deeper apexes share the last bit. */
#define LABEL_BITS 63

struct zone_set {
	zone_set_entry_t *entries; /* insertion order */
	size_t n, cap;
	uint32_t *sorted; /* entry indices, sorted by zone name */
	uint64_t *index;  /* apex hash tag << 32 | (entry index + 1); 0 = free */
	unsigned index_bits;
	uint64_t label_mask; /* bit L set when some apex has L labels (LABEL_BITS and up share) */
	zone_set_pending_t *pending; /* owned, n_pending of them */
	size_t n_pending;
};

zone_set_t *zone_set_new(void)
{
	zone_set_t *set = xcalloc(1, sizeof(*set));
	return set;
}

static unsigned label_bit(unsigned labels)
{
	return labels < LABEL_BITS ? labels : LABEL_BITS;
}

static unsigned count_labels(const uint8_t *name)
{
	unsigned n = 0;
	for (size_t off = 0; name[off] != 0 && off < DNS_DNAME_MAXLEN; off += (size_t)name[off] + 1)
		n++;
	return n;
}

static const zone_set_entry_t *lookup(const zone_set_t *set, const uint8_t *apex, size_t len)
{
	if (set->index == NULL)
		return NULL;
	uint64_t hash = zone_name_hash(apex, len);
	uint32_t tag = (uint32_t)(hash >> 32);
	size_t mask = ((size_t)1 << set->index_bits) - 1;
	for (size_t slot = tag >> (32 - set->index_bits);; slot = (slot + 1) & mask) {
		uint64_t e = set->index[slot];
		if (e == 0)
			return NULL;
		if ((uint32_t)(e >> 32) != tag)
			continue;
		const zone_set_entry_t *entry = &set->entries[(uint32_t)e - 1];
		if (entry->zone->apex_len == len && memcmp(entry->zone->apex, apex, len) == 0)
			return entry;
	}
}

/* Up to this many zones a straight compare beats hashing each candidate suffix. */
#define LINEAR_SCAN_MAX 8

static const zone_set_entry_t *find_apex(const zone_set_t *set, const uint8_t *apex, size_t len)
{
	if (set->n > LINEAR_SCAN_MAX)
		return lookup(set, apex, len);
	for (size_t i = 0; i < set->n; i++) {
		const zone_t *zone = set->entries[i].zone;
		if (zone->apex_len == len && memcmp(zone->apex, apex, len) == 0)
			return &set->entries[i];
	}
	return NULL;
}

/* Rebuilt at half full: a set holds at most a few thousand zones, rebuilding is cheap. */
static void index_add(zone_set_t *set, size_t idx)
{
	if (set->index == NULL || (set->n + 1) * 2 > ((size_t)1 << set->index_bits)) {
		unsigned bits = set->index_bits ? set->index_bits + 1 : 4;
		uint64_t *tab = xcalloc((size_t)1 << bits, sizeof(*tab));
		for (size_t i = 0; i < set->n; i++) {
			const zone_t *z = set->entries[i].zone;
			uint64_t h = zone_name_hash(z->apex, z->apex_len);
			zone_index_put(tab, bits, (h & 0xffffffff00000000ULL) | (i + 1));
		}
		free(set->index);
		set->index = tab;
		set->index_bits = bits;
	}
	const zone_t *z = set->entries[idx].zone;
	uint64_t h = zone_name_hash(z->apex, z->apex_len);
	zone_index_put(set->index, set->index_bits, (h & 0xffffffff00000000ULL) | (idx + 1));
}

static dns_acl_entry_t *acl_copy(const dns_acl_entry_t *acl, size_t n)
{
	return n > 0 ? xmemdup(acl, n * sizeof(*acl)) : NULL;
}

int zone_set_add(zone_set_t *set, zone_t *zone, const zone_set_entry_t *tmpl)
{
	if (lookup(set, zone->apex, zone->apex_len) != NULL ||
	    zone_set_get_pending(set, zone->apex) != NULL)
		return STEER_EEXIST;
	if (set->n == set->cap) {
		set->cap = set->cap ? set->cap * 2 : 8;
		set->entries = xrealloc(set->entries, set->cap * sizeof(*set->entries));
		set->sorted = xrealloc(set->sorted, set->cap * sizeof(*set->sorted));
	}
	size_t idx = set->n;
	zone_set_entry_t *e = &set->entries[idx];
	*e = *tmpl;
	e->zone = zone;
	e->xfr_allow = acl_copy(tmpl->xfr_allow, tmpl->n_xfr_allow);
	e->notify_allow = acl_copy(tmpl->notify_allow, tmpl->n_notify_allow);
	e->journal = zone_journal_ref(tmpl->journal);
	index_add(set, idx);
	size_t pos = 0;
	while (pos < set->n && strcmp(set->entries[set->sorted[pos]].zone->name, zone->name) < 0)
		pos++;
	memmove(&set->sorted[pos + 1], &set->sorted[pos], (set->n - pos) * sizeof(*set->sorted));
	set->sorted[pos] = (uint32_t)idx;
	set->label_mask |= 1ULL << label_bit(count_labels(zone->apex));
	set->n++;
	return 0;
}

const zone_set_entry_t *zone_set_find(const zone_set_t *set, const uint8_t *qname)
{
	/* Label start offsets of qname; a valid name has at most 127 labels. */
	uint8_t offs[128];
	unsigned labels = 0;
	size_t off = 0;
	while (qname[off] != 0 && labels < STEER_ARRAY_LEN(offs) && off < DNS_DNAME_MAXLEN) {
		offs[labels++] = (uint8_t)off;
		off += (size_t)qname[off] + 1;
	}
	if (off >= DNS_DNAME_MAXLEN)
		return NULL;
	size_t len = off + 1;
	for (unsigned i = 0; i <= labels; i++) {
		unsigned suffix_labels = labels - i;
		if (!(set->label_mask & (1ULL << label_bit(suffix_labels))))
			continue;
		size_t start = i < labels ? offs[i] : off;
		const zone_set_entry_t *e = find_apex(set, qname + start, len - start);
		if (e != NULL)
			return e;
	}
	return NULL;
}

const zone_set_entry_t *zone_set_get(const zone_set_t *set, const uint8_t *apex)
{
	return lookup(set, apex, zone_wire_len(apex));
}

size_t zone_set_count(const zone_set_t *set)
{
	return set->n;
}

const zone_set_entry_t *zone_set_at(const zone_set_t *set, size_t i)
{
	if (i >= set->n)
		return NULL;
	return &set->entries[set->sorted[i]];
}

int zone_set_add_pending(zone_set_t *set, const uint8_t *apex, const zone_set_entry_t *tmpl)
{
	size_t len = zone_wire_len(apex);
	char name[DNAME_STR_MAXLEN];
	if (len == 0 || len > DNS_DNAME_MAXLEN || dname_to_str(apex, name, sizeof(name)) == NULL)
		return STEER_EINVAL;
	if (lookup(set, apex, len) != NULL || zone_set_get_pending(set, apex) != NULL)
		return STEER_EEXIST;
	set->pending = xrealloc(set->pending, (set->n_pending + 1) * sizeof(*set->pending));
	zone_set_pending_t *p = &set->pending[set->n_pending++];
	*p = (zone_set_pending_t){.apex_len = (uint8_t)len, .name = xstrdup(name)};
	memcpy(p->apex, apex, len);
	p->notify_allow = acl_copy(tmpl->notify_allow, tmpl->n_notify_allow);
	p->n_notify_allow = tmpl->n_notify_allow;
	return 0;
}

const zone_set_pending_t *zone_set_find_pending(const zone_set_t *set, const uint8_t *qname,
                                                const zone_set_entry_t *served)
{
	if (STEER_LIKELY(set->n_pending == 0))
		return NULL;
	/* Both apexes are suffixes of qname, so the longer wire form is the more specific. */
	size_t best = served != NULL ? served->zone->apex_len : 0;
	const zone_set_pending_t *found = NULL;
	for (size_t i = 0; i < set->n_pending; i++) {
		const zone_set_pending_t *p = &set->pending[i];
		if (p->apex_len > best && dname_is_subdomain(qname, p->apex)) {
			best = p->apex_len;
			found = p;
		}
	}
	return found;
}

const zone_set_pending_t *zone_set_get_pending(const zone_set_t *set, const uint8_t *apex)
{
	for (size_t i = 0; i < set->n_pending; i++) {
		if (dname_equal(set->pending[i].apex, apex))
			return &set->pending[i];
	}
	return NULL;
}

size_t zone_set_pending_count(const zone_set_t *set)
{
	return set->n_pending;
}

const zone_set_pending_t *zone_set_pending_at(const zone_set_t *set, size_t i)
{
	return i < set->n_pending ? &set->pending[i] : NULL;
}

void zone_set_free(zone_set_t *set)
{
	if (set == NULL)
		return;
	for (size_t i = 0; i < set->n_pending; i++) {
		free(set->pending[i].name);
		free(set->pending[i].notify_allow);
	}
	free(set->pending);
	for (size_t i = 0; i < set->n; i++) {
		zone_unref(set->entries[i].zone);
		free(set->entries[i].xfr_allow);
		free(set->entries[i].notify_allow);
		zone_journal_unref(set->entries[i].journal);
	}
	free(set->entries);
	free(set->sorted);
	free(set->index);
	free(set);
}
