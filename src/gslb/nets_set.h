/*
 * All nets entries of one map (files and inline `cidr`), loaded with their provenance and
 * checked against the map's guard rails before any of them reaches the map's tree:
 *
 * - a prefix shorter than the map's min-prefix-length is an error (unless the entry sets
 *   allow-short-prefixes): "221.193.0.0/1" typed for "/16" must not capture half of IPv4;
 * - the same prefix twice with different datacenter lists is an error naming both places,
 *   with the same list a warning;
 * - on reload (a running set is given) a file that lost more than max-shrink of the prefixes
 *   it has in the running set, or became empty, is refused unless forced or the entry sets
 *   allow-shrink: a failed ISP-list download must not re-route that ISP. A file the running
 *   set lacks (all of them at start-up) is compared with the baseline of the last accepted
 *   load when there is one (gslb.nets-state-file, see nets_baseline.h); with neither, an
 *   empty file is a warning.
 *
 * The set keeps every prefix sorted by (family, address, length) with the place it was read
 * from, so explain can name the file:line that decided even where the tree merged blocks.
 * This index lives off the query path: 32 bytes per prefix (a 10 000-line ISP list: 320 KiB).
 * IPv4-mapped IPv6 prefixes are kept as the IPv4 prefixes they are (as the tree treats them).
 *
 * Built on the control thread, then immutable; safe to read from any thread once published.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "base/warnings.h"
#include "conf/conf.h"
#include "gslb/nets_baseline.h"
#include "gslb/nettree.h"

typedef struct gslb_nets_set gslb_nets_set_t;

/* One nets entry of the map, in config order. */
typedef struct {
	char *path;         /* owned: the nets file, NULL for an inline `cidr` entry */
	unsigned conf_line; /* line of the entry in the config file */
	uint32_t value;     /* the entry's datacenter list (the caller's id) */
	size_t n4, n6;      /* IPv4 and IPv6 prefixes it holds */
	time_t loaded_at;   /* when the file was read (the build time for inline entries) */
	bool allow_short_prefixes;
	bool allow_shrink;
} gslb_nets_source_t;

/* One prefix and where it was written. */
typedef struct {
	steer_prefix_t prefix; /* IPv4-mapped IPv6 stored as IPv4 */
	uint32_t value;        /* its source's value */
	uint32_t source;       /* index into the set's sources */
	unsigned line;         /* line in the file; the config line for inline prefixes */
} gslb_nets_item_t;

/* How to build a set. */
typedef struct {
	const char *map;                /* map name, for messages */
	const char *conf_path;          /* the config file, for messages about inline entries */
	unsigned min4, min6;            /* min-prefix-length */
	unsigned max_shrink;            /* max-shrink, percent */
	const gslb_nets_set_t *running; /* the same map in the running view; NULL at start-up */
	/* Counts as last accepted (gslb.nets-state-file), for files the running set lacks (at
	 * start-up: all); NULL = none. */
	const gslb_nets_baseline_t *baseline;
	bool force; /* steerctl reload --force: the shrink guard only warns */
} gslb_nets_opts_t;

/**
 * Read and check the nets entries of @p cm (files are read now), @p values[i] being the
 * datacenter list id of cm->nets[i]. Guard and duplicate findings that do not stop the build
 * go to @p warnings (may be NULL). On error writes "file:line: message" (a nets file's place,
 * or the config file's for inline entries and the shrink guard) to @p err and returns
 * STEER_ECONF (guards, duplicates, file syntax) or another negative steer_err (a file that
 * cannot be read, message set too); nothing is kept. Returns 0 with the new set in *@p out.
 * Control thread. Aborts on out-of-memory.
 */
int gslb_nets_set_build(const conf_map_t *cm, const uint32_t *values, const gslb_nets_opts_t *opts,
                        steer_warnings_t *warnings, gslb_nets_set_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 3, 5, 6) STEER_WUR;

/** Free a set. NULL is ignored. */
void gslb_nets_set_free(gslb_nets_set_t *set);

/**
 * Apply every prefix of @p set to the tree builder @p b (gslb_nettree_set_nets(): the longest
 * prefix wins). Returns 0 or gslb_nettree_set_nets()'s error, the item index in *@p bad.
 */
int gslb_nets_set_apply(const gslb_nets_set_t *set, gslb_nettree_builder_t *b, size_t *bad)
    STEER_NONNULL(1, 2) STEER_WUR;

/** The entries of the set, in config order; their count is returned. */
size_t gslb_nets_set_sources(const gslb_nets_set_t *set, const gslb_nets_source_t **out)
    STEER_NONNULL(1, 2);

/**
 * The longest prefix of @p set containing the first @p len bits of @p addr (4 or 16 bytes of
 * @p family; IPv4-mapped IPv6 is looked up as IPv4), or NULL. With duplicates, the one read
 * first. O(len log n); for explain, not the query path.
 */
const gslb_nets_item_t *gslb_nets_set_lookup(const gslb_nets_set_t *set, int family,
                                             const uint8_t *addr, unsigned len) STEER_NONNULL(1, 3);

/**
 * Describe where @p item was written: "nets/unicom.txt:4: 202.106.0.0/16" for a file,
 * "steer.yaml:12: inline cidr 202.106.0.0/16" for an inline entry. Truncates to @p len.
 */
void gslb_nets_set_describe(const gslb_nets_set_t *set, const gslb_nets_item_t *item, char *buf,
                            size_t len) STEER_NONNULL(1, 2, 3);
