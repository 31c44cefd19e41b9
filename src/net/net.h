/*
 * Query transports: UDP worker threads (blocking recvmmsg/sendmmsg, one SO_REUSEPORT socket
 * per worker and listen address) and TCP event-loop threads (RFC 7766). Every query thread
 * reads the published auth_view_t through an RCU pointer; the control thread owns the net_t,
 * publishes new views and sums the per-thread counters.
 *
 * Life cycle, all on the control thread:
 *   net_new() -> net_bind() (as root if needed) -> drop privileges -> net_start()
 *   -> net_publish() / net_stats() any number of times -> net_stop() -> net_free().
 */
#pragma once

#include <stddef.h>

#include "auth/auth.h"
#include "auth/stats.h"
#include "base/compiler.h"
#include "base/counter.h"
#include "base/sockaddr.h"
#include "conf/conf.h"
#include "fwd/serve.h"
#include "tap/tap.h"

typedef struct net net_t;

/*
 * What the query threads serve, published as one immutable snapshot: names inside our zones
 * (authoritative and GSLB) are answered from @c auth to everyone; every other name goes to
 * the forwarder (@c fwd), which answers allowed clients from its cache or hands the query to
 * its engine, and leaves the rest to @c auth (REFUSED).
 */
typedef struct {
	auth_view_t auth;
	fwd_view_t fwd; /* fwd.engine NULL: no forwarding */
} net_view_t;

/*
 * Query latency, receive to send, in buckets log-spaced (1, 2.5, 5 per decade) from 50 us to
 * 1 s: below 50 us a reply is a cache or zone hit on an idle worker, above 1 s the client has
 * long retried. net_latency_bounds_ns[] holds the upper bounds; bucket[NET_LATENCY_BOUNDS]
 * counts the replies slower than the last.
 */
#define NET_LATENCY_BOUNDS 14
extern const uint64_t net_latency_bounds_ns[NET_LATENCY_BOUNDS];

/* One latency histogram: per-bucket counts (not cumulative) and the sum of latencies. */
typedef struct {
	steer_counter_t bucket[NET_LATENCY_BOUNDS + 1];
	steer_counter_t sum_ns;
} net_latency_t;

/** Count @p n replies that took @p ns each into @p h. Owner thread only; no locked instruction. */
static inline void net_latency_observe_n(net_latency_t *h, uint64_t ns, uint64_t n)
{
	size_t b = 0;
	while (b < NET_LATENCY_BOUNDS && ns > net_latency_bounds_ns[b])
		b++;
	STEER_COUNTER_ADD(h->bucket[b], n);
	STEER_COUNTER_ADD(h->sum_ns, ns * n);
}

/** Count one reply that took @p ns into @p h. Owner thread only. */
static inline void net_latency_observe(net_latency_t *h, uint64_t ns)
{
	net_latency_observe_n(h, ns, 1);
}

/* The transport's per-thread counters: one block per query thread, written by it only. */
typedef struct {
	steer_counter_t udp_queries;
	steer_counter_t tcp_queries;
	steer_counter_t ipv6_queries; /* subset of UDP+TCP that arrived over IPv6 */
	steer_counter_t dropped;      /* datagrams unusable before parsing, replies not sent */
	/* The same queries by transport and family, each counted on its own so that every one
	 * only grows (a difference of two counters read apart could step back). */
	steer_counter_t udp_ipv4_queries;
	steer_counter_t udp_ipv6_queries;
	steer_counter_t tcp_ipv4_queries;
	steer_counter_t tcp_ipv6_queries;
	/* Replies sent, by transport; forwarded ones included (net_stats() adds the engine
	 * thread's UDP deliveries, TCP ones are counted by the connection's thread). */
	net_latency_t udp_latency;
	net_latency_t tcp_latency;
	/* TCP connections closed at accept: over the client address's or its /24 | /56's
	 * share, or the pool full with nothing evictable; and idle ones evicted for newcomers. */
	steer_counter_t tcp_refused_address;
	steer_counter_t tcp_refused_prefix;
	steer_counter_t tcp_refused_full;
	steer_counter_t tcp_evicted;
} net_counters_t;

/* Every query thread's counters summed by net_stats(), one part per layer. */
typedef struct {
	net_counters_t net;
	auth_stats_t auth;
	gslb_stats_t gslb;
	fwd_serve_counters_t fwd; /* the forwarder's side of the query threads (cache included) */
} net_stats_t;

/**
 * A transport set configured from @p conf (listen addresses, thread counts, TCP limits are
 * copied; @p conf is not kept). @p view is the first published view: the net borrows it until
 * it is replaced by net_publish() or the net is freed; the caller frees it afterwards.
 * Aborts on out-of-memory (start-up path).
 */
net_t *net_new(const conf_t *conf, const net_view_t *view) STEER_NONNULL(1, 2) STEER_WUR;

/**
 * Create and bind every socket (UDP and TCP, each worker's own SO_REUSEPORT socket per listen
 * address) without starting threads, so that privileged ports can be bound before privileges
 * are dropped. Each address is first bound once without SO_REUSEPORT, so that a port already
 * held by another process (e.g. a second steerd) is an error rather than silently shared; that
 * probe also resolves a listen port of 0, and all sockets of that address then use it.
 * Returns 0, or a negative steer_err with "cannot bind ..." in @p err.
 */
int net_bind(net_t *net, char *err, size_t errlen) STEER_NONNULL(1, 2) STEER_WUR;

/**
 * Start the UDP and TCP threads on the bound sockets. Signals are blocked in the new threads
 * so they are delivered to the control thread. Returns 0 or a negative steer_err (logged).
 */
int net_start(net_t *net) STEER_NONNULL(1) STEER_WUR;

/**
 * Publish @p view to every query thread and wait for an RCU grace period, after which no
 * thread can still see the previous view. Returns the previous view, which the caller may now
 * free. The net borrows @p view until the next publish or net_free(). Control thread only.
 */
const net_view_t *net_publish(net_t *net, const net_view_t *view) STEER_NONNULL(1, 2);

/**
 * Apply the settings that take effect on reload (TCP client cap and timeouts) from @p conf;
 * the others (listen addresses, thread counts) only on restart. Control thread only.
 */
void net_reconfigure(net_t *net, const conf_t *conf) STEER_NONNULL(1, 2);

/** The currently published view (control thread only). */
const net_view_t *net_view(const net_t *net) STEER_NONNULL(1);

/**
 * Overwrite @p out with the sum of every query thread's counters: the transport's own and,
 * through auth_qctx_sum(), the answering and GSLB ones of each thread's query context. The
 * control thread may call this while the threads run; each counter is read atomically, the
 * set is not a snapshot.
 */
void net_stats(const net_t *net, net_stats_t *out) STEER_NONNULL(1, 2);

/**
 * Add the GSLB answer counters of bank @p bank (0 or 1, gslb_view_answer_bank()) of every
 * query thread into @p out (@p n slots, at most GSLB_ANSWER_SLOTS, and the untracked count
 * into @p untracked). Control thread; the threads may be writing.
 */
void net_gslb_answers(const net_t *net, unsigned bank, uint64_t *out, size_t n, uint64_t *untracked)
    STEER_NONNULL(1, 3, 5);

/**
 * Zero bank @p bank of every query thread's GSLB answer counters. Only when no published view
 * counts into that bank any more (after net_publish() replaced the last one that did), so no
 * query thread writes it. Control thread.
 */
void net_gslb_answers_clear(net_t *net, unsigned bank) STEER_NONNULL(1);

/**
 * Whether every running query thread (UDP workers and TCP threads) made progress within the
 * last @p max_age_ms; when not, false with the first stalled thread and for how long in
 * @p why ("steer-udp1.0 silent for 612 ms"). An idle UDP worker wakes every UDP_RCVTIMEO_MS
 * and a TCP thread every TCP_HEARTBEAT_MS, so @p max_age_ms should be well above both.
 * Any thread, while the net exists.
 */
bool net_threads_ok(const net_t *net, unsigned max_age_ms, char *why, size_t whylen)
    STEER_NONNULL(1, 3);

/** Number of listen addresses and the i-th one, with port 0 already resolved by net_bind(). */
size_t net_listen_count(const net_t *net) STEER_NONNULL(1);
const steer_sockaddr_t *net_listen_at(const net_t *net, size_t i) STEER_NONNULL(1);

/** Effective number of UDP workers and TCP threads (0 in the config resolved to a count). */
unsigned net_workers(const net_t *net) STEER_NONNULL(1);
unsigned net_tcp_workers(const net_t *net) STEER_NONNULL(1);

/** TCP connections open now across all TCP threads (a relaxed read; any thread). */
unsigned net_tcp_clients(const net_t *net) STEER_NONNULL(1);

/**
 * The source ports of the listen addresses (for the forwarder, which must never pick them
 * for an upstream query): @p out gets up to @p max distinct ports; returns how many. Valid
 * after net_bind().
 */
size_t net_listen_ports(const net_t *net, uint16_t *out, size_t max) STEER_NONNULL(1, 2);

/**
 * The number of query threads: one per UDP worker socket, then one per TCP thread, numbered in
 * that order by net_set_tap() and net_set_decision_log(). Valid after net_bind().
 */
unsigned net_query_threads(const net_t *net) STEER_NONNULL(1);

/**
 * Log the query threads' messages through @p tap: the i-th UDP worker socket writes to
 * tap_thread(@p tap, i), TCP thread t to tap_thread(@p tap, udp + t) (net_query_threads()
 * in all). Which messages and how many (sampling) is @p tap's configuration. After net_bind(),
 * before net_start(); @p tap must outlive the threads. Control thread.
 */
void net_set_tap(net_t *net, tap_t *tap) STEER_NONNULL(1, 2);

/**
 * Hand every @p sample th GSLB decision of each query thread i to @p record with @p args[i]
 * (net_query_threads() of them), on that thread (see gslb/decision.h). After net_bind(),
 * before net_start(). Control thread.
 */
void net_set_decision_log(net_t *net, gslb_decision_cb record, void *const *args, unsigned sample)
    STEER_NONNULL(1, 2, 3);

/**
 * Give query thread i the demand ring @p rings[i] (net_query_threads() of them) that measured
 * policies report client prefixes into (gslb/demand.h). After net_bind(), before net_start().
 * Control thread.
 */
void net_set_demand(net_t *net, gslb_demand_ring_t *const *rings) STEER_NONNULL(1, 2);

/**
 * Stop every thread (UDP workers notice within their receive timeout, TCP loops are woken at
 * once), close the TCP connections (ending running transfers) and join. Counters stay
 * readable. Safe to call when the threads never started, and twice.
 */
void net_stop(net_t *net) STEER_NONNULL(1);

/** Stop if needed, close the sockets and free the net (not the views). NULL is ignored. */
void net_free(net_t *net);
