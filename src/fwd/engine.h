/*
 * The forwarder's I/O engine: one thread with its own libev loop that takes the cache misses
 * the query threads hand it, asks the upstream resolvers, retries inside the request, falls
 * back to TCP on TC=1 and to stale answers when no upstream answers, stores good replies in
 * the cache, runs the active probes, follows link state over rtnetlink, and hands every reply
 * to the transport that owns the client (UDP: the listening socket, TCP: the connection).
 *
 * Hand-off. fwd_engine_submit() is called by query threads: it copies the query into a
 * request, pushes it on a wait-free queue (liburcu wfcqueue) and wakes the loop with
 * ev_async_send(); it never blocks and never waits for the engine. A full engine (max_pending
 * requests in flight) refuses at once, and the caller answers SERVFAIL.
 *
 * Upstream queries. Each one leaves from its own UDP socket bound to the upstream's source
 * address (the link) and a fresh random port from the wide range, minus the service ports,
 * connected to the upstream (the kernel then drops datagrams from any other address or port),
 * with a fresh random ID and optional 0x20; a reply is believed only when
 * fwd_wire_reply_check() accepts it. A TC=1 reply is asked again over TCP from the same
 * source.
 *
 * Threads: the engine thread is RCU-registered (it writes the cache). The control thread
 * creates, starts, stops and frees the engine and reads its counters and upstream states
 * (copies taken under a mutex that only the engine thread and the control thread take;
 * query threads never touch it).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "dns/cookie.h"
#include "fwd/cache.h"
#include "fwd/upstream.h"
#include "fwd/wire.h"
#include "tap/tap.h"

/* Requests in flight (client queries and prefetches) by default. */
#define FWD_ENGINE_MAX_PENDING 10000
/* RFC 8767 5 "client response timer": a client with a stale entry available gets it after
 * this long without an upstream answer. */
#define FWD_ENGINE_STALE_AFTER_MS 1800
/* Largest client query accepted for forwarding (a query is a header, one question, an OPT). */
#define FWD_ENGINE_QUERY_MAX 512

typedef struct fwd_engine fwd_engine_t;
typedef struct fwd_client fwd_client_t;

/**
 * Deliver @p reply (@p len bytes, a complete DNS message) to @p client. Called on the engine
 * thread; must not block (UDP: one non-blocking sendmsg; TCP: queue it to the connection's
 * thread). @p client is the copy the request kept; it is valid during the call only.
 */
typedef void (*fwd_reply_fn)(const fwd_client_t *client, const uint8_t *reply, size_t len);

/* Who asked, as the transport needs it to answer. Copied into the request by submit. */
struct fwd_client {
	fwd_reply_fn reply;      /* how to answer; NULL only for prefetches */
	void *transport;         /* the transport's context (owner of the socket / connection) */
	uint64_t token;          /* the transport's id of the connection (TCP), or 0 */
	int fd;                  /* UDP: the socket the query arrived on; -1 for TCP */
	bool tcp;                /* arrived over TCP: no UDP size limit on the reply */
	steer_sockaddr_t remote; /* the client */
	steer_sockaddr_t local;  /* the query's destination = the reply's source; family 0 =
	                          * the socket's own address */
	uint32_t ifindex;        /* arrival interface (link-local IPv6 replies), 0 = any */
	bool tapped;             /* the query was sampled for the dnstap log: log its upstream
	                          * legs and the answer too */
	uint64_t rx_ns;          /* the transport's receive time, for its latency histogram;
	                          * the engine only carries it */
	/* The COOKIE option every answer to this client carries (RFC 7873 5.2), made by the
	 * query thread that knew the secrets; cookie_len 0 = none. Its bytes count against the
	 * client's UDP size, as on the authoritative path. */
	uint8_t cookie[DNS_COOKIE_OPTION_LEN];
	uint8_t cookie_len;
};

/* Flags of fwd_engine_submit(). */
enum {
	FWD_SUBMIT_STALE_OK = 1u << 0, /* the cache holds a stale entry: answer it when no
	                                * upstream answers in time (FWD_CACHE_STALE_AVAILABLE) */
	FWD_SUBMIT_PREFETCH = 1u << 1, /* refresh the cache only: no client to answer */
};

typedef struct {
	const fwd_group_def_t *groups; /* copied */
	size_t n_groups;
	/* Per group, the probe name in wire form (the recursive probe asks <nonce>.<name>);
	 * NULL or a NULL entry: the root, i.e. <nonce>. */
	const uint8_t *const *probe_names;
	fwd_cache_opts_t cache; /* the cache the engine creates and owns */
	bool use_0x20;          /* randomise qname case upstream and check it in replies */
	const uint16_t (*port_exclude)[2]; /* source ports never used (the service ports) */
	size_t n_port_exclude;
	uint32_t max_pending;    /* 0 = FWD_ENGINE_MAX_PENDING */
	uint32_t stale_after_ms; /* 0 = FWD_ENGINE_STALE_AFTER_MS */
	uint64_t seed;           /* 0 = from getrandom() (tests pass their own) */
} fwd_engine_opts_t;

/* Engine counters (cumulative) and gauges; a copy, see fwd_engine_stats(). */
typedef struct {
	uint64_t requests;         /* accepted by fwd_engine_submit() (prefetches included) */
	uint64_t refused_full;     /* refused by submit: max_pending in flight */
	uint64_t prefetches;       /* prefetch requests accepted */
	uint64_t answered;         /* clients answered from an upstream reply */
	uint64_t answered_stale;   /* clients answered from a stale cache entry */
	uint64_t servfail;         /* clients answered SERVFAIL (no upstream, nothing stale) */
	uint64_t upstream_queries; /* UDP queries sent upstream (retries and probes excluded) */
	uint64_t retries;          /* of those, in-request retries to another upstream */
	uint64_t tcp_queries;      /* TCP queries after TC=1 */
	uint64_t late_replies;     /* accepted replies that arrived after their request ended */
	uint64_t socket_errors;    /* upstream sockets that could not be opened or sent on */
	uint64_t probes;           /* probe rounds sent */
	uint64_t cache_stores;     /* replies stored in the cache */
	uint64_t pending;          /* gauge: requests in flight now */
	fwd_wire_counters_t wire;  /* replies by verdict (forged, malformed, ...) */
} fwd_engine_stats_t;

/**
 * Create an engine (and its cache) from @p opts, not yet running: sockets for netlink are
 * opened, each upstream's link device is found (the interface holding its source address
 * when the definition names none). Returns 0 and *out, or a negative steer_err with a
 * message in @p err (bad group definitions, cache options, netlink).
 */
int fwd_engine_new(const fwd_engine_opts_t *opts, fwd_engine_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/** Start the engine thread (signals blocked in it). Returns 0 or a negative steer_err. */
int fwd_engine_start(fwd_engine_t *e) STEER_NONNULL(1) STEER_WUR;

/**
 * Stop the thread and join it; requests still in flight are dropped without a reply (their
 * clients retry). Safe when never started, and twice.
 */
void fwd_engine_stop(fwd_engine_t *e) STEER_NONNULL(1);

/** Stop if needed and free the engine, its cache and every request. NULL is ignored. */
void fwd_engine_free(fwd_engine_t *e);

/** The engine's cache, for the query threads' lookups. Valid while the engine lives. */
fwd_cache_t *fwd_engine_cache(fwd_engine_t *e) STEER_NONNULL(1);

/**
 * Query-thread side: hand the client query @p pkt (@p len bytes, already parsed as a
 * DNS_QUERY_OK QUERY by the caller) from @p client to the engine; @p flags are FWD_SUBMIT_*.
 * Never blocks. Returns 0 (the engine now owns the answer: the caller sends nothing),
 * STEER_EAGAIN (max_pending requests in flight: answer SERVFAIL), STEER_EINVAL (longer than
 * FWD_ENGINE_QUERY_MAX) or STEER_ENOMEM. Any thread.
 */
int fwd_engine_submit(fwd_engine_t *e, const uint8_t *pkt, size_t len, const fwd_client_t *client,
                      unsigned flags) STEER_NONNULL(1, 2, 4) STEER_WUR;

/**
 * Drop cached answers: the name @p name (presentation form, case-insensitive) and, with
 * @p subtree, every name below it; NULL = the whole cache. The engine thread does the work
 * (the cache's writer side) within one loop iteration. Returns 0 (queued), STEER_EINVAL (a
 * bad name) or STEER_ENOMEM. Control thread.
 */
int fwd_engine_flush(fwd_engine_t *e, const char *name, bool subtree) STEER_NONNULL(1);

/**
 * What the NSID option (RFC 5001) of the engine's answers carries for clients that ask for
 * it: @p identity (copied; at most 255 bytes), NULL = none. Control thread, any time.
 */
void fwd_engine_set_identity(fwd_engine_t *e, const char *identity) STEER_NONNULL(1);

/**
 * Log the engine's messages (forwarder queries and responses of sampled requests, the answers
 * delivered to their clients) through @p tap, the engine thread's dnstap queue; NULL = none.
 * Before fwd_engine_start(); @p tap must outlive the engine thread. Control thread.
 */
void fwd_engine_set_tap(fwd_engine_t *e, tap_thread_t *tap) STEER_NONNULL(1);

/** Copy the engine's counters into @p out. Control thread (any thread but the engine's). */
void fwd_engine_stats(fwd_engine_t *e, fwd_engine_stats_t *out) STEER_NONNULL(1, 2);

/** Number of upstreams (ids 0..n-1, see fwd_upstream_stats()). */
size_t fwd_engine_upstream_count(const fwd_engine_t *e) STEER_NONNULL(1);

/**
 * Copy the state of upstream @p id into @p out (its name stays valid while the engine lives).
 * Returns 0 or STEER_EINVAL. Control thread.
 */
int fwd_engine_upstream(fwd_engine_t *e, uint32_t id, fwd_upstream_stats_t *out)
    STEER_NONNULL(1, 3);

/** Number of groups (indices 0..n-1, fwd_upstream_stats_t.group). */
size_t fwd_engine_group_count(const fwd_engine_t *e) STEER_NONNULL(1);

/** The domain of group @p group ("." or "corp.example."), NULL when out of range. */
const char *fwd_engine_group_domain(const fwd_engine_t *e, uint32_t group) STEER_NONNULL(1);

/** The policy of group @p group ("ordered", "round-robin", "fastest"), NULL when out of range. */
const char *fwd_engine_group_policy(const fwd_engine_t *e, uint32_t group) STEER_NONNULL(1);
