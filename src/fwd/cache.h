/*
 * The forwarder's answer cache: upstream replies kept as response templates and answered from
 * the worker threads without a lock.
 *
 * An entry is the upstream's reply as wire bytes (OPT removed) plus the offset of every TTL
 * field, keyed by lowercase qname, qtype, qclass and the client's DO and CD bits. A hit is one
 * memcpy and a few patches: the client's ID and RD/CD, the question name as the client wrote
 * it (same length, so compression pointers stay valid), every TTL counted down, and an OPT
 * for EDNS clients. Positive and negative (RFC 2308) answers are cached; RFC 8767 stale
 * answers and prefetch of popular entries are offered to the caller, which decides.
 *
 * ECS is off (the default of the forwarder): a client's ECS option is neither part of the key
 * nor echoed, which RFC 7871 7.1.1 allows for a server that does not use it. When it is
 * turned on, the scope joins the key (the entry struct in cache.c marks the place) and stale and
 * prefetch need a second look (Unbound excludes them for ECS answers).
 *
 * Memory: max_bytes counts every entry (struct, TTL offsets, key, wire, malloc's own word) and
 * the hash table. Entries dropped by eviction are freed by liburcu after a grace period, so
 * for a moment the heap holds up to one grace period's worth more.
 *
 * Threads: readers (fwd_cache_answer) run inside the caller's RCU read-side section (liburcu,
 * memb flavor: <urcu.h>) and take no lock and allocate nothing. Writers (fwd_cache_store,
 * fwd_cache_sweep) run in RCU-registered threads (call_rcu needs that) and serialise per
 * shard on a mutex readers never touch. Time is always a parameter: monotonic milliseconds.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/counter.h"
#include "dns/pkt.h"

/* Default bound on the CNAME records one cached answer may carry. */
#define FWD_CACHE_MAX_CNAME 16

typedef struct fwd_cache fwd_cache_t;

typedef struct {
	size_t max_bytes;          /* memory cap: entries, their wire and the hash table */
	uint32_t min_ttl;          /* seconds; raises every TTL served (0: off) */
	uint32_t max_ttl;          /* seconds; caps every TTL served */
	uint32_t max_negative_ttl; /* seconds; caps NXDOMAIN/NODATA (RFC 2308: 3600) */
	uint32_t stale_answer_ttl; /* seconds; TTL of a stale answer (RFC 8767: 30), 0: no stale */
	uint32_t stale_keep;       /* seconds an expired entry is kept for stale answers */
	uint16_t edns_payload;     /* our UDP payload size advertised in the answers' OPT */
	uint8_t max_cname;         /* CNAME records per answer, more: not cached */
	bool prefetch;             /* report popular entries in their last 10 % of TTL */
} fwd_cache_opts_t;

/** The defaults: 256 MiB, TTLs 0..1 day, negative 3600 s, stale 30 s kept 1 day, prefetch on. */
void fwd_cache_opts_default(fwd_cache_opts_t *opts) STEER_NONNULL(1);

/**
 * Create an empty cache with a copy of @p opts into @p *out (the caller owns it, freed with
 * fwd_cache_free()). Returns 0, STEER_EINVAL (max_bytes below 256 KiB, max_ttl below min_ttl,
 * edns_payload below 512) or STEER_ENOMEM. Any thread.
 */
int fwd_cache_new(const fwd_cache_opts_t *opts, fwd_cache_t **out) STEER_NONNULL(1, 2) STEER_WUR;

/**
 * Free the cache and every entry. No reader or writer may use it any more, and the entries
 * already handed to call_rcu are freed by liburcu's thread later (they do not refer to the
 * cache). NULL is ignored.
 */
void fwd_cache_free(fwd_cache_t *c);

typedef enum {
	FWD_CACHE_MISS,            /* nothing usable: ask upstream; nothing written */
	FWD_CACHE_HIT,             /* fresh answer written */
	FWD_CACHE_HIT_PREFETCH,    /* fresh answer written, and the entry is popular and in its
	                            * last 10 % of TTL: refresh it in the background (reported
	                            * once per entry) */
	FWD_CACHE_STALE_AVAILABLE, /* only an expired entry within stale-keep: nothing written,
	                            * ask upstream and call again with want_stale if it fails */
	FWD_CACHE_STALE,           /* stale answer written (want_stale), TTLs stale_answer_ttl */
} fwd_cache_result_t;

/* Counters written by one reader thread (the owner), summed by others with
 * steer_counters_add(). */
typedef struct {
	steer_counter_t hits;            /* fresh answers, prefetch hits included */
	steer_counter_t misses;          /* FWD_CACHE_MISS */
	steer_counter_t stale_available; /* FWD_CACHE_STALE_AVAILABLE */
	steer_counter_t stale_answers;   /* FWD_CACHE_STALE */
	steer_counter_t prefetches;      /* FWD_CACHE_HIT_PREFETCH */
	steer_counter_t truncated;       /* answers sent with TC=1 (too big for the UDP limit) */
} fwd_cache_counters_t;

/**
 * Answer the parsed query @p q (DNS_QUERY_OK, its question still in the packet it borrows)
 * from the cache into @p resp (@p resp_cap bytes, at least 512) at time @p now_ms and set
 * @p *resp_len (0 when nothing was written).
 *
 * The response keeps the upstream's rcode, sections and AD (only for a client that set DO or
 * AD, RFC 6840 5.8), takes the client's ID, RD and CD and question bytes, sets QR and RA,
 * clears AA and TC, counts every TTL down by the entry's age (never below 0), and carries an
 * OPT (payload opts.edns_payload, DO echoed) exactly when @p q had one. @p udp_payload is the
 * largest response this client may get over UDP (512 without EDNS, else its payload bounded
 * by ours), or 0 over TCP (then only @p resp_cap limits): an answer above it is sent as the
 * question alone with TC=1, so the client retries over TCP.
 *
 * With @p want_stale an entry past its TTL but within stale-keep is answered with TTLs
 * stale_answer_ttl (RFC 8767; the caller asks when no upstream answered). RD=0 needs nothing
 * special here: the caller answers it from the cache only and never forwards its miss.
 *
 * Inside an RCU read-side section; no lock, no allocation. @p ctr (the calling thread's
 * counters, may be NULL) is incremented as the result says.
 */
fwd_cache_result_t fwd_cache_answer(const fwd_cache_t *c, const dns_query_t *q, uint64_t now_ms,
                                    bool want_stale, uint16_t udp_payload, uint8_t *resp,
                                    size_t resp_cap, size_t *resp_len, fwd_cache_counters_t *ctr)
    STEER_NONNULL(1, 2, 6, 8);

/**
 * Store the upstream reply @p reply (@p len bytes) to the question of @p q (the client's
 * parsed query; its DO and CD bits are part of the key, so the forwarder must have asked
 * upstream with them) at time @p now_ms, replacing an entry of the same key.
 *
 * Cached: NOERROR with data (TTL: the smallest of its records, each clamped to
 * [min_ttl, max_ttl]); NXDOMAIN and NODATA with an SOA in the authority section (TTL:
 * min(SOA TTL, SOA MINIMUM), capped at max_negative_ttl, RFC 2308 5). Not cached: other rcodes
 * (SERVFAIL, REFUSED, FORMERR, NOTIMP...), TC=1, negative answers without SOA (no TTL the
 * zone chose, and a referral or lame reply looks the same), a TTL of 0, more than max_cname
 * CNAMEs, an extended rcode, TSIG, an OPT that is not the last record.
 *
 * Returns 0 (stored), STEER_EINVAL (not a reply to this question: QR=0, opcode, qdcount,
 * name, type or class differ), STEER_EMALF (malformed), STEER_EACCES (valid but not
 * cacheable, see above), STEER_ERANGE (larger than a shard's share of max_bytes) or
 * STEER_ENOMEM. A refused reply leaves an existing entry alone (it may still serve stale).
 *
 * Writer side: RCU-registered thread, outside a read-side section or inside (it never waits
 * for a grace period); serialised with other writers per shard. Evicts (CLOCK,
 * second chance for entries hit since the hand last passed) to stay within max_bytes.
 */
int fwd_cache_store(fwd_cache_t *c, const dns_query_t *q, const uint8_t *reply, size_t len,
                    uint64_t now_ms) STEER_NONNULL(1, 2, 3);

/**
 * Drop the entries past TTL + stale-keep, visiting at most @p max_visit entries per shard
 * (0: all) from where the previous sweep stopped, so a forwarder loop can spread the work.
 * Returns the number of entries dropped. Writer side, like fwd_cache_store().
 */
size_t fwd_cache_sweep(fwd_cache_t *c, uint64_t now_ms, size_t max_visit) STEER_NONNULL(1);

/**
 * Drop the entries for the name @p name (uncompressed wire form, case-insensitive; every type,
 * class and key flag) and, with @p subtree, for every name below it; NULL @p name drops every
 * entry. Dropped entries count as neither evicted nor expired. Returns the number dropped.
 * Walks every entry of every shard (an operator command, not a query-path operation). Writer
 * side, like fwd_cache_store().
 */
size_t fwd_cache_flush(fwd_cache_t *c, const uint8_t *name, bool subtree) STEER_NONNULL(1);

/* Writer-side counters and gauges, summed over the shards. */
typedef struct {
	uint64_t inserts;   /* entries stored (replacements included) */
	uint64_t replaced;  /* stores that replaced an entry of the same key */
	uint64_t refused;   /* stores refused (any non-zero return) */
	uint64_t evictions; /* entries dropped for room while still fresh or stale-servable */
	uint64_t expired;   /* entries dropped past TTL + stale-keep (sweep or eviction) */
	uint64_t entries;   /* entries now */
	uint64_t bytes;     /* bytes now: entries and the hash table */
	uint64_t max_bytes; /* the cap */
} fwd_cache_stats_t;

/** Fill @p out (relaxed reads, each value exact, the set not a snapshot). Any thread. */
void fwd_cache_stats(const fwd_cache_t *c, fwd_cache_stats_t *out) STEER_NONNULL(1, 2);
