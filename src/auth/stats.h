/*
 * Per-thread query counters. Each worker owns one block and is its only writer (relaxed
 * load+store, no locked instruction on the packet path); the control thread sums all blocks
 * on demand and may read a counter while it is being written (it sees the old or new value).
 */
#pragma once

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"

/* Query types counted individually; everything else goes to "other". */
#define STATS_QTYPE_SLOTS   256
#define STATS_RCODE_SLOTS   24 /* up to BADVERS (16) and a little room */
#define STATS_ECS_RESOLVERS 64 /* entries in steer_stats_t.ecs_top */
#define STATS_ECS_WAYS      4  /* a resolver may sit in one of this many entries */

typedef struct {
	_Atomic uint64_t udp_queries;
	_Atomic uint64_t tcp_queries;
	_Atomic uint64_t ipv6_queries; /* subset of UDP+TCP that arrived over IPv6 */
	_Atomic uint64_t edns;         /* queries with an OPT record */
	_Atomic uint64_t edns_do;      /* ... and the DO bit */
	_Atomic uint64_t truncated;    /* responses sent with TC=1 */
	_Atomic uint64_t dropped;      /* malformed beyond answering, or QR=1 */
	_Atomic uint64_t axfr;         /* zone transfers started */
	_Atomic uint64_t axfr_refused;
	_Atomic uint64_t ecs_v4;      /* queries with a valid IPv4 ECS option (RFC 7871) */
	_Atomic uint64_t ecs_v6;      /* ... IPv6 ECS option */
	_Atomic uint64_t ecs_ignored; /* GSLB decisions that had ECS but used the resolver */
	_Atomic uint64_t rcode[STATS_RCODE_SLOTS];
	_Atomic uint64_t qtype[STATS_QTYPE_SLOTS]; /* index 0 counts types >= 256 */
	/* Not a counter: must stay last (steer_stats_sum() walks the counters as an array). */
	struct stats_ecs_top {
		/*
		 * The resolvers sending ECS: STATS_ECS_WAYS-way sets chosen by a hash of the
		 * address; a new resolver replaces the entry with the fewest queries of its set
		 * and starts from 1, so the heavy senders stay. Entries are guarded by a sequence
		 * number (odd while the owner rewrites the address) for the summing thread.
		 */
		struct stats_ecs_resolver {
			_Atomic uint32_t seq;
			_Atomic uint64_t addr[2]; /* IPv6 address, IPv4 as IPv4-mapped */
			_Atomic uint64_t queries; /* 0 = empty entry */
		} e[STATS_ECS_RESOLVERS];
	} ecs_top;
} steer_stats_t;

/* One resolver of steer_stats_top_resolvers(). */
typedef struct {
	steer_sockaddr_t addr; /* port 0 */
	uint64_t queries;
} steer_stats_resolver_t;

/* Owner-only increment: no read-modify-write instruction, because only one thread writes. */
#define STATS_ADD(counter, n)                                                                      \
	atomic_store_explicit(&(counter),                                                          \
	                      atomic_load_explicit(&(counter), memory_order_relaxed) + (n),        \
	                      memory_order_relaxed)
#define STATS_INC(counter) STATS_ADD(counter, 1)

/**
 * Add every counter of @p src into @p dst and merge its ECS resolver table into dst's (the
 * same resolver seen by several threads adds up; when dst's set is full, an entry with fewer
 * queries makes room). @p dst must be private to the caller (control thread); @p src may be
 * written concurrently by its owner.
 */
void steer_stats_sum(steer_stats_t *dst, const steer_stats_t *src);

/**
 * Count one ECS query from resolver @p remote (the query's source address) in @p stats's
 * resolver table. Owner thread only; no allocation, no locked instruction. Other address
 * families are ignored.
 */
void steer_stats_ecs_resolver(steer_stats_t *stats, const steer_sockaddr_t *remote)
    STEER_NONNULL(1, 2);

/**
 * The @p max resolvers of @p stats (a summed block) with the most ECS queries, most first,
 * into @p out. Returns how many were written.
 */
size_t steer_stats_top_resolvers(const steer_stats_t *stats, steer_stats_resolver_t *out,
                                 size_t max) STEER_NONNULL(1, 2);
