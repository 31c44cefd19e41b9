/*
 * Internal to src/net: the net_t shared by the UDP and TCP threads and the socket helpers.
 * Fields are written by the control thread before the threads start, except @c view (RCU)
 * and the atomics.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "auth/auth.h"
#include "base/sockaddr.h"
#include "net/net.h"

/* Counters of each client table (a power of two): 256 kB each, touched only at accept and
 * close. */
#define NET_TCP_SLOTS (1u << 16)

typedef struct udp_worker udp_worker_t;
typedef struct tcp_worker tcp_worker_t;

struct net {
	/* The published view: read with rcu_dereference() inside a read-side section, replaced
	 * by net_publish(). Borrowed from the control thread. */
	net_view_t *view;
	atomic_bool stopping;

	steer_sockaddr_t *listen; /* owned copy; port 0 resolved by net_bind() */
	size_t n_listen;
	unsigned n_workers;     /* UDP workers; each has one thread per listen address */
	unsigned n_tcp_workers; /* TCP threads; each has one listening socket per address */

	/* Reloadable TCP settings (net_reconfigure()), read by the TCP threads. */
	atomic_uint tcp_max_clients;
	atomic_uint tcp_idle_timeout; /* ms */
	atomic_uint tcp_io_timeout;   /* ms */
	atomic_uint tcp_clients;      /* open connections across all TCP threads */

	/* Each client's share of them (0 = no limit), also reloadable. */
	atomic_uint tcp_max_per_address;
	atomic_uint tcp_max_per_prefix;
	/* Open connections per client address and per /24 | /56, shared by the TCP threads
	 * without locks: NET_TCP_SLOTS counters each, indexed by a hash keyed with
	 * @c tcp_hash_key (random at start, so clients cannot choose whom they collide with).
	 * Clients that collide share one counter: their limits only get stricter. */
	atomic_uint *tcp_addr_conns;   /* owned */
	atomic_uint *tcp_prefix_conns; /* owned */
	uint64_t tcp_hash_key[2];

	/* Latency of the forwarded answers the engine thread sends over UDP: that thread is
	 * the only writer (TCP ones are counted by the connection's thread). */
	net_latency_t fwd_udp_latency;

	udp_worker_t **udp; /* n_workers * n_listen, worker-major */
	size_t n_udp;
	tcp_worker_t **tcp; /* n_tcp_workers */
	size_t n_tcp;

	bool bound;
	bool started;
};

/* The calling query thread's dnstap state for net_answer(). */
typedef struct {
	tap_thread_t *tap;             /* NULL: no dnstap log (then nothing else is read) */
	const steer_sockaddr_t *local; /* the address the query arrived at; NULL = unknown */
} net_tap_t;

/**
 * Answer the query @p pkt (@p len bytes) from @p client on a query thread, inside its RCU
 * read-side section on @p view: names inside our zones by auth_answer(), others by the
 * forwarder when it is on and the client may recurse (@p fill then describes the client for
 * a hand-off), else auth_answer()'s REFUSED. Returns the reply's length in @p resp, or 0 when
 * nothing is sent now: dropped, or (@p *deferred set) the forwarder's engine answers later
 * through the fwd_client_t that @p fill described. With @p tap->tap set, a sampled query
 * and its answer go to the dnstap log (auth-* for our names and for everything when
 * forwarding is off, client-* for the forwarder's clients; a deferred answer is logged by
 * the engine).
 */
size_t net_answer(const net_view_t *view, const auth_client_t *client, const uint8_t *pkt,
                  size_t len, uint8_t *resp, size_t resp_cap, auth_qctx_t *qctx, auth_axfr_t *axfr,
                  fwd_serve_counters_t *fwd_ctr, fwd_client_fill_cb fill, void *fill_arg,
                  const net_tap_t *tap, bool *deferred) STEER_NONNULL(1, 2, 3, 5, 7, 9, 10, 12, 13);

/** CLOCK_MONOTONIC in nanoseconds: the clock of the latency histograms. */
static inline uint64_t net_clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/** CLOCK_MONOTONIC in milliseconds: the clock of the query threads' heartbeats. */
uint64_t net_clock_ms(void);

/** Record that the calling query thread made progress (its own @p alive_ms). */
static inline void net_heartbeat(atomic_uint_least64_t *alive_ms)
{
	atomic_store_explicit(alive_ms, net_clock_ms(), memory_order_relaxed);
}

/**
 * A socket of @p type (SOCK_DGRAM or SOCK_STREAM) bound to @p addr, with SO_REUSEADDR for TCP,
 * with SO_REUSEPORT when @p reuseport, with IPV6_V6ONLY for IPv6, close-on-exec. Returns the
 * descriptor, or a negative steer_err with "cannot bind ..." in @p err.
 */
int net_socket_bind(const steer_sockaddr_t *addr, int type, bool reuseport, char *err,
                    size_t errlen) STEER_NONNULL(1, 4) STEER_WUR;

/** True for 0.0.0.0 and ::, where the reply source must be taken from IP(V6)_PKTINFO. */
bool net_addr_is_wildcard(const steer_sockaddr_t *addr) STEER_NONNULL(1);
