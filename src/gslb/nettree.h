/*
 * The compiled client-address map: client address -> a uint32 value (in Steer the id of an
 * ordered datacenter list) plus the ECS scope, the widest prefix around the address on which
 * the value is constant (RFC 7871 "decision-aware scope": gdnsd merges subnets into "the
 * largest possible supernets which contain identical responses").
 *
 * Life cycle: a builder collects overlays (off the query path, e.g. on the control thread
 * during a reload), gslb_nettree_build() freezes it into an immutable gslb_nettree_t that any
 * number of threads may read concurrently without locks; publish it with RCU and free it after
 * a grace period.
 *
 * Address spaces. IPv4 and IPv6 are separate trees that share one node array. The IPv4-mapped
 * range ::ffff:0:0/96 of the IPv6 tree is not a space of its own: it is a link to the IPv4
 * tree, so ::ffff:192.0.2.1 always gets exactly the answer of 192.0.2.1, and an IPv4 prefix
 * never affects IPv6 space outside that range. IPv6 prefixes inside ::ffff:0:0/96 given to
 * gslb_nettree_set() are treated as the IPv4 prefixes they denote; IPv6 prefixes that cover
 * the range (::/0, ::/8 ...) do not reach into it. Optionally (gslb_nettree_builder_fold())
 * the 6to4 range 2002::/16 (IPv4 address in bits 16..47) and the NAT64 well-known prefix
 * 64:ff9b::/96 (RFC 6052, bits 96..127) are linked the same way, as gdnsd does. Teredo
 * (2001::/32) is not folded: its client address is obfuscated and rarely the resolver's.
 *
 * Scopes are always in the bits of the family of the lookup: 0..32 for AF_INET, 0..128 for
 * AF_INET6. An IPv4-mapped IPv6 lookup therefore returns the IPv4 answer with the scope
 * expressed in IPv6 bits (96 + the IPv4 scope, or less when the whole mapped range is one
 * block): that is what an ECS option of family IPv6 must carry. Callers holding a resolver
 * address as a mapped sockaddr and wanting an IPv4 scope should pass the last four bytes with
 * AF_INET.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"

/* Values are stored in 24 bits so a frozen leaf can carry its depth next to the value in the
 * stride tables (see nettree.c): 16 million datacenter lists is far beyond any map. */
#define GSLB_NETTREE_VALUE_MAX 0xffffffu

/* Fold flags for gslb_nettree_builder_fold(). */
#define GSLB_NETTREE_FOLD_6TO4  0x1u /* 2002::/16 -> IPv4 (RFC 3056) */
#define GSLB_NETTREE_FOLD_NAT64 0x2u /* 64:ff9b::/96 -> IPv4 (RFC 6052 well-known prefix) */

typedef struct gslb_nettree_builder gslb_nettree_builder_t;
typedef struct gslb_nettree gslb_nettree_t;

/** One entry for gslb_nettree_set_nets(). */
typedef struct {
	steer_prefix_t prefix;
	uint32_t value;
} gslb_nettree_entry_t;

/**
 * New builder in which every address (IPv4 and IPv6) maps to @p default_value, which must be
 * at most GSLB_NETTREE_VALUE_MAX (checked by an assertion: it comes from code, not input).
 * Aborts on out-of-memory (start-up/reload path). Not thread-safe: one thread builds. Free it
 * with gslb_nettree_build() or gslb_nettree_builder_free().
 */
gslb_nettree_builder_t *gslb_nettree_builder_new(uint32_t default_value) STEER_WUR;

/**
 * Link the IPv6 ranges named by @p flags (GSLB_NETTREE_FOLD_*) to the IPv4 tree. Call it
 * before any gslb_nettree_set(): afterwards IPv6 prefixes inside a folded range are applied
 * as the IPv4 prefixes they embed (STEER_ERANGE from gslb_nettree_set() when they are longer
 * than the embedded IPv4 address), and IPv6 prefixes covering a folded range do not reach into
 * it. Returns 0, or STEER_EINVAL for unknown flags or when a prefix was already set.
 */
int gslb_nettree_builder_fold(gslb_nettree_builder_t *b, unsigned flags) STEER_NONNULL(1) STEER_WUR;

/**
 * Overlay: every address inside @p prefix now maps to @p value, overriding what earlier calls
 * set there (later calls win where they overlap). The caller orders calls: mmdb-derived entries
 * first, then nets entries by prefix length ascending (gslb_nettree_set_nets() does that), so
 * the longest nets prefix wins. Bits of @p prefix beyond its length are ignored.
 * Cost: O(prefix length), amortised; memory of overridden subtrees is reused.
 * Returns 0, STEER_ERANGE (value > GSLB_NETTREE_VALUE_MAX, or a prefix longer than the IPv4
 * address embedded in a folded range), or STEER_EINVAL (bad family or length).
 */
int gslb_nettree_set(gslb_nettree_builder_t *b, const steer_prefix_t *prefix, uint32_t value)
    STEER_NONNULL(1, 2) STEER_WUR;

/**
 * Apply @p n nets entries so that the longest prefix containing an address wins, and among
 * entries with the same prefix the later one wins; the entries override everything set before
 * (e.g. mmdb-derived data). All entries are validated first, so either all are applied or, on
 * error, none. Sorts an index internally (stable counting sort by length, O(n), 5 bytes per
 * entry of temporary memory); @p entries is not modified. Returns 0 or the error
 * gslb_nettree_set() would give for the first bad entry, whose index goes to *@p bad (if not
 * NULL).
 */
int gslb_nettree_set_nets(gslb_nettree_builder_t *b, const gslb_nettree_entry_t *entries, size_t n,
                          size_t *bad) STEER_NONNULL(1) STEER_WUR;

/** Discard a builder without building (error paths). NULL is a no-op. */
void gslb_nettree_builder_free(gslb_nettree_builder_t *b);

/**
 * Freeze: merge sibling blocks with identical values upward (so each leaf is the widest block
 * of constant value), pack the nodes into one compact array and add stride tables for the
 * first levels of big trees. Frees the builder in all cases. Aborts on out-of-memory; never
 * returns NULL. The result is immutable; free it with gslb_nettree_free().
 */
gslb_nettree_t *gslb_nettree_build(gslb_nettree_builder_t *b) STEER_NONNULL(1) STEER_WUR;

/**
 * Look up @p addr (4 bytes for AF_INET, 16 for AF_INET6, network order). Returns its value;
 * *@p scope receives the prefix length of the merged block containing it, in the family's own
 * bits. IPv4-mapped (and folded) IPv6 addresses get the IPv4 answer. An unknown family
 * yields the IPv6 default (the value of ::/0's block) with scope 0. Allocation-free and
 * lock-free: at most 128 tree steps, usually a handful after the stride table. Thread-safe.
 */
uint32_t gslb_nettree_lookup(const gslb_nettree_t *t, int family, const uint8_t *addr,
                             uint8_t *scope) STEER_NONNULL(1, 3, 4);

/**
 * Look up an ECS source prefix: the address @p addr truncated to @p source_len bits (bits
 * beyond it are taken as zero whatever @p addr holds; @p source_len is clamped to the family's
 * length). When the value is constant on the whole source block, *@p scope <= @p source_len;
 * when it is not, the answer is the value of the address with the remaining bits zero and
 * *@p scope > @p source_len (RFC 7871 7.2.1 allows a scope longer than the source: the answer
 * is valid only for the narrower block). Same guarantees as gslb_nettree_lookup().
 */
uint32_t gslb_nettree_lookup_prefix(const gslb_nettree_t *t, int family, const uint8_t *addr,
                                    uint8_t source_len, uint8_t *scope) STEER_NONNULL(1, 3, 5);

/** Number of internal nodes of the frozen tree (stats, benchmarks). */
size_t gslb_nettree_nodes(const gslb_nettree_t *t) STEER_NONNULL(1);

/** Bytes used by the frozen tree, stride tables included. */
size_t gslb_nettree_memory(const gslb_nettree_t *t) STEER_NONNULL(1);

/** Free a frozen tree. NULL is a no-op. Only after every reader is done (RCU grace period). */
void gslb_nettree_free(gslb_nettree_t *t);
