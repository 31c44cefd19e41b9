/*
 * GeoIP maps: MaxMind DB (mmdb) files compiled into (prefix, datacenter list) pairs.
 *
 * Like gdnsd, Steer never consults the mmdb on the query path. When a map is built, the whole
 * search tree is walked once (gslb_geoip_walk); each data record is decoded once into a
 * gslb_geoip_record_t and classified (gslb_geoip_classify) into an ordered datacenter list,
 * which the map builder overlays into its own prefix tree (gslb/nettree) below the `nets`
 * entries. gslb_geoip_lookup() answers single addresses for `steerctl explain`. A map may
 * also pair a location database with an ASN database (gslb_geoip_walk_pair below).
 *
 * Accepted databases: MaxMind GeoIP2/GeoLite2 City, Country, ASN, ISP and Enterprise, and the
 * same layouts from other vendors (DB-IP "DBIP-City-Lite"...); metadata.database_type must
 * name one of City, Country, ASN, ISP or Enterprise. Fields read from each record:
 *   continent.code, country.iso_code (else registered_country.iso_code),
 *   subdivisions[0].iso_code, city.names.en, city.geoname_id,
 *   location.latitude/longitude, autonomous_system_number (else traits.autonomous_system_number).
 * A field that is missing, has an unexpected type or an impossible value is treated as absent.
 *
 * Threads: an open database is read-only; lookups and walks may run concurrently from any
 * threads. The file is mmap()ed: replace it atomically (rename, as geoipupdate does), never
 * rewrite it in place while it is open. Rules are immutable once built and may be shared.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "gslb/geo_distance.h"

/* -------------------------------------------------------------------------------------------
 * Databases
 */

typedef struct gslb_geoip_db gslb_geoip_db_t;

/* What a database can tell, from its metadata.database_type. */
enum gslb_geoip_kind {
	GSLB_GEOIP_KIND_LOCATION = 1 << 0, /* continent, country, ... (City, Country, Enterprise) */
	GSLB_GEOIP_KIND_ASN = 1 << 1,      /* autonomous system numbers (ASN, ISP, Enterprise) */
};

typedef struct {
	const char *path;     /* as given to open; owned by the db */
	const char *type;     /* metadata.database_type, e.g. "GeoLite2-City"; owned by the db */
	unsigned ip_version;  /* 4 or 6 */
	unsigned record_size; /* bits: 24, 28 or 32 */
	uint32_t node_count;  /* search tree nodes */
	uint64_t build_epoch; /* seconds since 1970 */
	unsigned kinds;       /* enum gslb_geoip_kind */
} gslb_geoip_db_info_t;

/**
 * Open the MaxMind DB file @p path. On failure writes a one-line reason naming the file to
 * @p err and returns STEER_ENOENT (no such file), STEER_EACCES, STEER_EMALF (not a MaxMind DB
 * or corrupt metadata), STEER_ECONF (a database type without location or ASN data, e.g.
 * GeoIP2-Anonymous-IP), STEER_ENOMEM or another negative errno. The caller owns *@p out and
 * frees it with gslb_geoip_close(). Start-up/reload path only.
 */
int gslb_geoip_open(const char *path, gslb_geoip_db_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/** Close and free @p db (NULL is a no-op). Records handed out by it become invalid. */
void gslb_geoip_close(gslb_geoip_db_t *db);

/** Describe @p db (for logs and `explain`). Pointers in @p info live as long as @p db. */
void gslb_geoip_info(const gslb_geoip_db_t *db, gslb_geoip_db_info_t *info) STEER_NONNULL(1, 2);

/* -------------------------------------------------------------------------------------------
 * Records
 */

enum gslb_geoip_rec_flag {
	GSLB_GEOIP_REC_LOCATION = 1 << 0,   /* lat and lon are valid */
	GSLB_GEOIP_REC_ASN = 1 << 1,        /* asn is valid */
	GSLB_GEOIP_REC_REGISTERED = 1 << 2, /* country is the registered, not the physical, one */
};

/* Value of gslb_geoip_record_t.id for records that do not come from a walk. */
#define GSLB_GEOIP_NO_ID UINT32_MAX

/* One decoded data record. Codes are uppercase ASCII, NUL-terminated, "" when absent. */
typedef struct {
	/* English city name, NOT NUL-terminated (city_len bytes; print with "%.*s"), pointing into
	 * the database mapping: valid while the db is open. NULL when absent. */
	const char *city;
	uint32_t id;              /* walk: dense 0..records-1 in first-seen order, same for every
	                           * leaf sharing the data record; lookups: GSLB_GEOIP_NO_ID */
	uint32_t data_offset;     /* offset of the record in the data section: identifies it */
	uint32_t city_geoname_id; /* 0 when absent */
	uint32_t asn;             /* valid with GSLB_GEOIP_REC_ASN */
	float lat, lon;           /* degrees, valid with GSLB_GEOIP_REC_LOCATION; float is ~2 m */
	uint16_t city_len;
	char continent[3];   /* "AS", "EU", ... */
	char country[3];     /* ISO 3166-1 alpha-2, "CN" */
	char subdivision[4]; /* ISO 3166-2 part after the dash, 1-3 characters: "31", "ENG" */
	uint8_t flags;       /* enum gslb_geoip_rec_flag */
} gslb_geoip_record_t;

/**
 * Look up one address: @p family AF_INET (@p addr 4 bytes) or AF_INET6 (16 bytes, network
 * order). IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are looked up as IPv4. Fills @p rec and
 * the length of the database block holding the address in *@p prefix_len, counted in bits of
 * the address family looked up (an IPv4 /24 is 24, also in an IPv6 database).
 * Returns 0, STEER_ENOENT when the database has no data for the address (also for IPv6 in an
 * IPv4-only database), STEER_EINVAL for a bad family, STEER_EMALF for a corrupt database.
 * Thread-safe, allocates nothing.
 */
int gslb_geoip_lookup(const gslb_geoip_db_t *db, int family, const void *addr,
                      gslb_geoip_record_t *rec, unsigned *prefix_len)
    STEER_NONNULL(1, 3, 4, 5) STEER_WUR;

/* -------------------------------------------------------------------------------------------
 * Walking the whole database
 */

/**
 * Called once per data leaf of the search tree with the leaf's prefix and its record. Both are
 * valid only during the call (copy what you keep; memoize per rec->id). Return 0 to go on or a
 * negative code to stop the walk, which then returns that code.
 */
typedef int (*gslb_geoip_leaf_cb)(const steer_prefix_t *prefix, const gslb_geoip_record_t *rec,
                                  void *ctx);

typedef struct {
	uint64_t leaves;    /* callbacks made */
	uint32_t records;   /* distinct data records decoded */
	uint32_t nodes;     /* search nodes read */
	uint32_t aliases;   /* alias subtrees skipped */
	size_t cache_bytes; /* record cache size at the end (its peak) */
} gslb_geoip_walk_stats_t;

/**
 * Visit every data leaf of @p db in ascending address order, calling @p cb for each.
 *
 * - IPv4 data is reported as AF_INET prefixes: in an IPv6 database that is everything under
 *   ::/96; a leaf wider than ::/96 is split into 0.0.0.0/0 plus the IPv6 rest. The aliases of
 *   the IPv4 tree that MaxMind's writer adds (::ffff:0:0/96, 2001::/32, 2002::/16) are skipped,
 *   so each block is reported once. The walk therefore reports IPv4 first, then IPv6.
 * - Empty records (no data) are not reported: the map's default applies there.
 * - Each distinct data record is decoded once; leaves sharing it get the same rec->id.
 *
 * Memory: 48 bytes per distinct record (array grown by doubling) plus 8-16 bytes of hash per
 * record, freed on return; the recursion is at most 128 frames deep. Returns 0, the callback's
 * negative code, or STEER_EMALF (with a reason in @p err) when the search tree or a record is
 * corrupt. @p stats may be NULL. Safe to run concurrently with lookups and other walks on the same
 * db.
 */
int gslb_geoip_walk(const gslb_geoip_db_t *db, gslb_geoip_leaf_cb cb, void *ctx,
                    gslb_geoip_walk_stats_t *stats, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 5) STEER_WUR;

/* -------------------------------------------------------------------------------------------
 * Two databases as one: a location database (City, Country) plus an ASN database
 *
 * Operators pair GeoLite2-City with GeoLite2-ASN: the City database does not carry ASNs. The
 * pair answers like one database whose blocks are the intersection refinement of both trees
 * (City 1.0.0.0/16 and ASN 1.0.0.0/24 give 1.0.0.0/24 with both records' facts, the rest of
 * the /16 with the City facts alone) and whose records are merged by
 * gslb_geoip_record_merge().
 * ------------------------------------------------------------------------------------------- */

/**
 * Merge the records two databases hold for the same address into @p out: the location facts
 * (continent, country, subdivision, city, coordinates, the REGISTERED flag) come from @p loc,
 * the ASN from @p asn when it has one, else from @p loc (an Enterprise database carries both).
 * Either record may be NULL (that database has no data there); with both NULL, @p out is an
 * empty record. out->data_offset is @p loc's (0 without it) and out->id is
 * GSLB_GEOIP_NO_ID: the pair walk sets its own. @p out may not alias an input.
 */
void gslb_geoip_record_merge(const gslb_geoip_record_t *loc, const gslb_geoip_record_t *asn,
                             gslb_geoip_record_t *out) STEER_NONNULL(3);

/**
 * Walk @p loc and @p asn as one database: every address with data in either gets the merged
 * record of both (gslb_geoip_record_merge). Leaves come in overlay order rather than as
 * disjoint blocks: ascending start address (IPv4 first), a wider block before the narrower
 * ones inside it, and a narrower block overrides the wider one on its addresses, so feeding
 * the leaves to gslb_nettree_set() in order yields the refinement. A caller must therefore set
 * every leaf, a leaf no rule matches to its default value, rather than skip it. rec->id is dense
 * over the distinct (location record, ASN record) pairs, so callers memoize per id as for one
 * database.
 *
 * How: @p asn is walked first into a sorted array (24 bytes per leaf and 48 per distinct
 * record, freed on return), then @p loc is walked once and merged with it like two sorted
 * lists: O(leaves of both), no search per leaf. Only @p asn is held in memory, which suits the
 * usual sizes (GeoLite2-ASN has a few hundred thousand blocks, GeoLite2-City millions). @p stats
 * sums both walks (records: distinct pairs; cache_bytes: the peak of the temporary memory). Returns
 * 0, the callback's negative code, or STEER_EMALF with a reason naming the file in @p err.
 */
int gslb_geoip_walk_pair(const gslb_geoip_db_t *loc, const gslb_geoip_db_t *asn,
                         gslb_geoip_leaf_cb cb, void *ctx, gslb_geoip_walk_stats_t *stats,
                         char *err, size_t errlen) STEER_NONNULL(1, 2, 3, 6) STEER_WUR;

/* -------------------------------------------------------------------------------------------
 * Rules: record -> ordered datacenter list
 *
 * Precedence, first that applies wins:
 *   1. an ASN rule listing the record's ASN. An ASN names the network the client sits in,
 *      which is what ISP-link steering is about (China telecom/unicom/edu), and it cuts
 *      across geography, so it beats every location rule;
 *   2. the deepest location rule matching the record: continent/country/subdivision/city
 *      beats continent/country/subdivision beats continent/country beats continent (F5
 *      topology's longest match, gdnsd's map hierarchy). At city depth a rule naming the
 *      geoname_id beats one naming the city;
 *   3. with auto_distance, every datacenter that has coordinates, nearest to the record's
 *      location first (ties in configuration order), when the record has a location;
 *   4. no match: the caller uses the map's default list.
 * ------------------------------------------------------------------------------------------- */

/* Datacenter lists hold indices into the map's datacenter table (configuration order). */
#define GSLB_GEOIP_MAX_DC 65535

/* One configured rule. Exactly one of @c match and @c asns is set. */
typedef struct {
	/* Location path "continent[/country[/subdivision[/city]]]": continent one of AF AN AS EU
	 * NA OC SA, country ISO 3166-1 alpha-2, subdivision the 1-3 character ISO 3166-2 suffix
	 * ("31" for CN-31), city an English name (ASCII case-insensitive) or a geoname_id (all
	 * digits). An empty subdivision ("AS/SG//Singapore") matches cities in records that have
	 * no subdivision. Codes are case-insensitive. */
	const char *match;
	const uint32_t *asns; /* n_asns autonomous system numbers, each 1..2^32-1 */
	size_t n_asns;
	const uint16_t *dcs; /* ordered datacenter indices, each < n_dc, no repeats, at least 1 */
	size_t n_dcs;
} gslb_geoip_rule_def_t;

typedef struct {
	bool auto_distance;  /* order by distance when no rule matches (gdnsd auto_dc_coords) */
	uint16_t auto_limit; /* at most this many datacenters from distance ordering; 0: all */
} gslb_geoip_opts_t;

typedef struct gslb_geoip_rules gslb_geoip_rules_t;

/**
 * Build immutable rules from @p n_defs definitions for a map with @p n_dc datacenters
 * (at most GSLB_GEOIP_MAX_DC). Inputs are copied. On error returns STEER_ESYNTAX (bad path),
 * STEER_ERANGE (datacenter index or ASN out of range), STEER_EEXIST (a path or ASN given
 * twice, or a datacenter repeated in a list) or STEER_EINVAL (neither or both of match/asns,
 * empty list), stores the index of the offending definition in *@p bad_rule (may be NULL)
 * and a reason in @p err, so the config layer can prefix file:line. Build path only.
 */
int gslb_geoip_rules_new(const gslb_geoip_rule_def_t *defs, size_t n_defs, size_t n_dc,
                         const gslb_geoip_opts_t *opts, gslb_geoip_rules_t **out, size_t *bad_rule,
                         char *err, size_t errlen) STEER_NONNULL(4, 5, 7) STEER_WUR;

/** Free @p rules (NULL is a no-op). */
void gslb_geoip_rules_free(gslb_geoip_rules_t *rules);

/** True when some rule needs ASN data (ASN rules on a City-only database are refused). */
bool gslb_geoip_rules_use_asn(const gslb_geoip_rules_t *rules) STEER_NONNULL(1);

/** True when some rule needs location data or auto_distance is on. */
bool gslb_geoip_rules_use_location(const gslb_geoip_rules_t *rules) STEER_NONNULL(1);

typedef enum {
	GSLB_GEOIP_NO_MATCH = 0, /* use the map default */
	GSLB_GEOIP_BY_ASN,       /* an ASN rule */
	GSLB_GEOIP_BY_LOCATION,  /* a location rule */
	GSLB_GEOIP_BY_DISTANCE,  /* auto_distance */
} gslb_geoip_how_t;

/* How a record was classified, for `explain`. */
typedef struct {
	gslb_geoip_how_t how;
	size_t rule;    /* index of the definition that matched (ASN, LOCATION) */
	unsigned depth; /* LOCATION: components matched, 1 (continent) .. 4 (city) */
} gslb_geoip_match_t;

/** Printable name of @p how: "none", "asn", "location", "distance". */
const char *gslb_geoip_how_str(gslb_geoip_how_t how);

/**
 * Classify @p rec by @p rules (precedence above). @p dc_coords has @p n_dc entries, which
 * must equal the n_dc the rules were built with. *@p out_len is the room in @p out on entry
 * (n_dc entries always suffice) and the list length on return: 0 with how ==
 * GSLB_GEOIP_NO_MATCH. @p match may be NULL. Returns 0, STEER_ESPACE when @p out is too small,
 * STEER_EINVAL when @p n_dc differs from the rules'. Thread-safe (rules are read-only);
 * allocates only when n_dc > GSLB_GEO_STACK_DCS and distance ordering runs.
 */
int gslb_geoip_classify(const gslb_geoip_rules_t *rules, const gslb_geoip_record_t *rec,
                        const gslb_geo_coords_t *dc_coords, size_t n_dc, uint16_t *out,
                        size_t *out_len, gslb_geoip_match_t *match)
    STEER_NONNULL(1, 2, 6) STEER_WUR;
