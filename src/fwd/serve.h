/*
 * The query threads' side of the forwarder: who may recurse, the cache hit answered inside
 * the worker, and the hand-off of a miss to the engine. Runs on every UDP and TCP query
 * thread inside the RCU read-side section that keeps the serving view alive: no lock, no
 * allocation on the hit path (a miss allocates one request in fwd_engine_submit()).
 *
 * The caller has already decided that the name is not ours (authoritative and GSLB names are
 * answered first, to everyone, without recursion).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/counter.h"
#include "base/sockaddr.h"
#include "dns/pkt.h"
#include "fwd/cache.h"
#include "fwd/engine.h"

/* The forwarding part of a serving view; immutable once published. */
typedef struct {
	fwd_engine_t *engine;        /* NULL: forwarding is off, every name outside our zones is
	                              * REFUSED */
	const fwd_cache_t *cache;    /* the engine's */
	const steer_prefix_t *allow; /* allow-recursion; owned by whoever built the view */
	size_t n_allow;
	uint16_t udp_max_payload; /* our EDNS payload ceiling towards clients */
} fwd_view_t;

/* One query thread's counters, written by it only. */
typedef struct {
	fwd_cache_counters_t cache;
	steer_counter_t refused;    /* recursion asked by a client outside allow-recursion */
	steer_counter_t forwarded;  /* misses handed to the engine */
	steer_counter_t norec_miss; /* RD=0 queries the cache could not answer */
	steer_counter_t overload;   /* misses the engine refused (max in flight): SERVFAIL */
} fwd_serve_counters_t;

typedef enum {
	FWD_SERVE_REFUSED,  /* not for the forwarder (off, client not allowed, a meta type):
	                     * the caller answers as an authoritative-only server (REFUSED) */
	FWD_SERVE_ANSWERED, /* a reply was written (cache hit, or an error answer) */
	FWD_SERVE_QUEUED,   /* the engine answers later: send nothing now */
} fwd_serve_result_t;

/**
 * Describe the client of the query being served into @p out, for a hand-off to the engine:
 * the transport's callback, called only when a query (or a prefetch) goes to the engine, so
 * cache hits never pay for it.
 */
typedef void (*fwd_client_fill_cb)(void *arg, fwd_client_t *out);

/**
 * True when queries of @p qtype may be forwarded: data types and ANY, not the meta types
 * (AXFR, IXFR, MAILA, MAILB, TSIG, TKEY, OPT).
 */
bool fwd_serve_type_ok(uint16_t qtype);

/* The client of a query being served, as a query thread knows it. */
typedef struct {
	const steer_sockaddr_t *remote; /* the client */
	bool tcp;                       /* over TCP: no UDP size limit */
	fwd_client_fill_cb fill;        /* the rest, for a hand-off */
	void *fill_arg;
	/* The COOKIE option for every answer to this query (cookie_len bytes, 0 = none): the
	 * transport made it with the view's secrets, the forwarder only copies it. */
	const uint8_t *cookie;
	uint8_t cookie_len;
} fwd_serve_client_t;

/**
 * Serve the parsed client query @p q (DNS_QUERY_OK, @p pkt / @p len the packet it borrows)
 * from @p remote (over TCP when @p tcp), for a name outside our zones, at monotonic time
 * @p now_ms; @p fill describes the client when the engine must answer. REFUSED unless
 * the client is in allow-recursion; else the cache (fresh; popular entries near expiry are
 * also handed to the engine for prefetch), else for RD=1 a hand-off to the engine (with the
 * stale entry, if any, as its fallback), for RD=0 SERVFAIL (answered from cache only). A
 * written reply's length goes to @p *resp_len (@p resp_cap bytes at @p resp, at least 512).
 * Every answer, now or from the engine, carries @p client's COOKIE option when it has one
 * (room kept for it within the client's UDP size: an answer too big with it goes TC=1).
 * Inside an RCU read-side section. @p ctr: the calling thread's counters.
 */
fwd_serve_result_t fwd_serve(const fwd_view_t *v, const dns_query_t *q, const uint8_t *pkt,
                             size_t len, const fwd_serve_client_t *client, uint64_t now_ms,
                             uint8_t *resp, size_t resp_cap, size_t *resp_len,
                             fwd_serve_counters_t *ctr) STEER_NONNULL(1, 2, 3, 5, 7, 9, 10);

/**
 * Write an answer with @p rcode and no records to @p q into @p resp (@p cap bytes, at least
 * 512): the client's ID, RD, CD and question, RA set, an OPT (payload @p payload) when @p q
 * had one. Returns the length, 0 when even the header does not fit. Any thread.
 */
size_t fwd_serve_error(const dns_query_t *q, uint8_t rcode, uint16_t payload, uint8_t *resp,
                       size_t cap) STEER_NONNULL(1, 4);
