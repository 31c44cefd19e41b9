/*
 * The zone model: an immutable, read-only-after-load database of one zone, built from an
 * RFC 1035 master file with libzscanner. Query threads read it without locks; it is shared
 * between configuration snapshots by reference count, so an unchanged zone file is not re-read
 * on reload.
 *
 * Names are stored lowercase in uncompressed wire form. Every name between the apex and an
 * owner exists as a node (empty non-terminals have no rrsets), so the closest encloser of any
 * name is found by exact lookups of its ancestors.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "base/compiler.h"
#include "dns/const.h"

/* All records of one type at one node. */
typedef struct {
	uint16_t type;
	uint16_t count; /* number of records */
	uint32_t ttl;   /* one TTL per RRset (RFC 2181 5.2): the lowest seen at load */
	/* @c count records back to back, each a 16-bit big-endian rdlength and the rdata in
	 * uncompressed wire form. Owned by the zone. */
	const uint8_t *rdata;
} zone_rrset_t;

/* Iterates over the records of an rrset. */
typedef struct {
	const uint8_t *next;
	uint16_t left;
} zone_rdata_iter_t;

static inline zone_rdata_iter_t zone_rdata_iter(const zone_rrset_t *rrset)
{
	zone_rdata_iter_t it = {rrset->rdata, rrset->count};
	return it;
}

/** Next record's rdata (and its length in @p len), or NULL when done. */
static inline const uint8_t *zone_rdata_next(zone_rdata_iter_t *it, uint16_t *len)
{
	if (it->left == 0)
		return NULL;
	*len = (uint16_t)(it->next[0] << 8 | it->next[1]);
	const uint8_t *rdata = it->next + 2;
	it->next = rdata + *len;
	it->left--;
	return rdata;
}

enum zone_node_flag {
	ZONE_NODE_APEX = 1 << 0,
	ZONE_NODE_DELEG = 1 << 1,          /* a zone cut: NS below the apex */
	ZONE_NODE_NONAUTH = 1 << 2,        /* strictly below a zone cut: glue or occluded data */
	ZONE_NODE_WILDCARD_CHILD = 1 << 3, /* "*.<this node>" exists */
};

typedef struct zone_node zone_node_t;
struct zone_node {
	const uint8_t *owner;       /* lowercase wire name, owned by the zone */
	const zone_node_t *parent;  /* NULL at the apex */
	const zone_node_t *cut;     /* nearest zone cut at or above this node, NULL when none */
	const zone_rrset_t *rrsets; /* sorted by type; NULL for an empty non-terminal */
	uint16_t n_rrsets;
	uint16_t flags; /* enum zone_node_flag */
};

typedef struct zone zone_t;
struct zone {
	uint8_t apex[DNS_DNAME_MAXLEN]; /* lowercase wire name */
	uint8_t apex_len;
	char *name;            /* presentation form, trailing dot */
	char *file;            /* the file it was loaded from */
	struct stat file_stat; /* of @c file at load time, to detect changes on reload */
	time_t loaded_at;
	uint32_t serial;
	size_t n_records;
	size_t n_nodes;
	const zone_node_t *apex_node;
	const zone_rrset_t *soa;
	struct zone_priv *priv; /* index and storage, private to zone.c */
	int refcount;           /* atomic; see zone_ref()/zone_unref() */
};

/**
 * Load the zone @p origin (presentation form) from the master file @p file.
 * Semantic checks: an SOA at the apex, NS at the apex, CNAME exclusivity (only RRSIG/NSEC may
 * share a CNAME's node), one SOA, glue present for in-zone delegation name servers. Records
 * outside the zone are ignored with a warning each (rate-limited per file). Errors are
 * returned in @p err as "file:line: message". Returns 0 and a zone with one reference in
 * @p out, or a negative steer_err. Runs on the control thread (or a loader thread), never on a
 * query thread.
 */
int zone_load(const char *origin, const char *file, zone_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3, 4) STEER_WUR;

/** Take a reference. Thread-safe. */
void zone_ref(zone_t *zone) STEER_NONNULL(1);

/** Drop a reference; the zone is freed with the last one. Thread-safe; NULL is ignored. */
void zone_unref(zone_t *zone);

/**
 * The node named exactly @p name (lowercase wire, @p len bytes), or NULL.
 * Lock-free, allocation-free; any thread.
 */
const zone_node_t *zone_find_node(const zone_t *zone, const uint8_t *name, size_t len)
    STEER_NONNULL(1, 2);

/** The rrset of @p type at @p node, or NULL. */
const zone_rrset_t *zone_node_rrset(const zone_node_t *node, uint16_t type) STEER_NONNULL(1);

/**
 * "file:line" of the first record of @p type at @p owner (lowercase wire) in the zone's
 * master file (or an $INCLUDEd one) into @p buf; just the file name when the record cannot
 * be found again (the file changed since). Re-reads the file: for error messages on the
 * control thread, never on a query thread.
 */
void zone_record_where(const zone_t *zone, const uint8_t *owner, uint16_t type, char *buf,
                       size_t len) STEER_NONNULL(1, 2, 4);

/** True when the file the zone came from changed (mtime, size, inode) or is gone. */
bool zone_file_changed(const zone_t *zone) STEER_NONNULL(1);

/**
 * All nodes of the zone, apex first, in an order where every parent precedes its children
 * (for AXFR). @p count receives the number of nodes.
 */
const zone_node_t *zone_nodes(const zone_t *zone, size_t *count) STEER_NONNULL(1, 2);
