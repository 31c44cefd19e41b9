/*
 * The answering layer's per-thread counters (inside each query thread's auth_qctx_t): what was
 * asked and answered. Transport counters are net/'s, GSLB decisions gslb/'s. Each block has
 * one writer (base/counter.h); the control thread sums them on demand.
 */
#pragma once

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/counter.h"
#include "base/sockaddr.h"

/* Query types counted individually; everything else goes to "other". */
#define STATS_QTYPE_SLOTS   256
#define STATS_RCODE_SLOTS   24 /* up to BADVERS (16) and a little room */
#define STATS_ECS_RESOLVERS 64 /* entries in auth_stats_t.ecs_top */
#define STATS_ECS_WAYS      4  /* a resolver may sit in one of this many entries */

typedef struct {
	steer_counter_t edns;      /* queries with an OPT record */
	steer_counter_t edns_do;   /* ... and the DO bit */
	steer_counter_t truncated; /* responses sent with TC=1 */
	steer_counter_t dropped;   /* malformed beyond answering, or QR=1 */
	steer_counter_t axfr; /* full zone transfers started (AXFR, or IXFR answered in full) */
	steer_counter_t axfr_refused;
	steer_counter_t ixfr;         /* incremental transfers started (from the journal) */
	steer_counter_t tsig_ok;      /* signed requests whose TSIG verified */
	steer_counter_t tsig_badkey;  /* ... signed with a key we do not have (RFC 8945 BADKEY) */
	steer_counter_t tsig_badsig;  /* ... whose MAC did not verify */
	steer_counter_t tsig_badtime; /* ... good MAC, clock outside the fudge */
	steer_counter_t ecs_v4;       /* queries with a valid IPv4 ECS option (RFC 7871) */
	steer_counter_t ecs_v6;       /* ... IPv6 ECS option */

	steer_counter_t rrl_dropped;      /* UDP answers RRL dropped */
	steer_counter_t rrl_slipped;      /* ... sent truncated instead (slip) */
	steer_counter_t rrl_logged;       /* ... would have limited, with log-only */
	steer_counter_t cookie_queries;   /* queries with a COOKIE option (cookies on) */
	steer_counter_t cookie_valid;     /* ... with a valid server cookie of ours */
	steer_counter_t cookie_invalid;   /* ... with a server cookie that is not (or no longer) */
	steer_counter_t cookie_badcookie; /* BADCOOKIE answers (cookies.require) */
	steer_counter_t rcode[STATS_RCODE_SLOTS];
	steer_counter_t qtype[STATS_QTYPE_SLOTS]; /* index 0 counts types >= 256 */
	/* Not a counter: must stay last (auth_stats_sum() walks the counters as an array). */
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
} auth_stats_t;

/* One resolver of auth_stats_top_resolvers(). */
typedef struct {
	steer_sockaddr_t addr; /* port 0 */
	uint64_t queries;
} auth_stats_resolver_t;

/**
 * Add every counter of @p src into @p dst and merge its ECS resolver table into dst's (the
 * same resolver seen by several threads adds up; when dst's set is full, an entry with fewer
 * queries makes room). @p dst must be private to the caller (control thread); @p src may be
 * written concurrently by its owner.
 */
void auth_stats_sum(auth_stats_t *dst, const auth_stats_t *src) STEER_NONNULL(1, 2);

/**
 * Count one ECS query from resolver @p remote (the query's source address) in @p stats's
 * resolver table. Owner thread only; no allocation, no locked instruction. Other address
 * families are ignored.
 */
void auth_stats_ecs_resolver(auth_stats_t *stats, const steer_sockaddr_t *remote)
    STEER_NONNULL(1, 2);

/**
 * The @p max resolvers of @p stats (a summed block) with the most ECS queries, most first,
 * into @p out. Returns how many were written.
 */
size_t auth_stats_top_resolvers(const auth_stats_t *stats, auth_stats_resolver_t *out, size_t max)
    STEER_NONNULL(1, 2);
