/*
 * Internal to gslb/geoip: the open database shared by its parts, geoip_db.c (open, decode,
 * single lookups) and geoip_walk.c (the whole-tree walks that compile a database into
 * prefixes). The rules (geoip_rules.c) work on decoded records only and need none of this.
 */
#pragma once

#include <maxminddb.h>
#include <stdint.h>

#include "base/compiler.h"
#include "gslb/geoip.h"

struct gslb_geoip_db {
	MMDB_s mmdb;
	char *path; /* owned */
	unsigned kinds;
	unsigned depth; /* address bits in the tree: 32 or 128 */
	/* Where the ::/96 path of an IPv6 tree ends: the record found after following zero
	 * bits from the root (a search node at depth 96 when the tree has IPv4 data below).
	 * The writer's aliases are links to this same record. */
	uint64_t v4_record;
	unsigned v4_depth;
};

/**
 * Decode the data record at @p offset of @p mmdb into @p rec (strings borrowed from the
 * database's memory map). Returns 0 or STEER_EMALF. Allocates nothing.
 */
int geoip_decode_record(const MMDB_s *mmdb, uint32_t offset, gslb_geoip_record_t *rec)
    STEER_NONNULL(1, 3) STEER_WUR;
