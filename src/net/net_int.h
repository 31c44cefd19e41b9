/*
 * Internal to src/net: the net_t shared by the UDP and TCP threads and the socket helpers.
 * Fields are written by the control thread before the threads start, except @c view (RCU)
 * and the atomics.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "auth/auth.h"
#include "base/sockaddr.h"
#include "net/net.h"

typedef struct udp_worker udp_worker_t;
typedef struct tcp_worker tcp_worker_t;

struct net {
	/* The published view: read with rcu_dereference() inside a read-side section, replaced
	 * by net_publish(). Borrowed from the control thread. */
	auth_view_t *view;
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

	udp_worker_t **udp; /* n_workers * n_listen, worker-major */
	size_t n_udp;
	tcp_worker_t **tcp; /* n_tcp_workers */
	size_t n_tcp;

	bool bound;
	bool started;
};

/**
 * A socket of @p type (SOCK_DGRAM or SOCK_STREAM) bound to @p addr, with SO_REUSEADDR for TCP,
 * with SO_REUSEPORT when @p reuseport, with IPV6_V6ONLY for IPv6, close-on-exec. Returns the
 * descriptor, or a negative steer_err with "cannot bind ..." in @p err.
 */
int net_socket_bind(const steer_sockaddr_t *addr, int type, bool reuseport, char *err,
                    size_t errlen) STEER_NONNULL(1, 4) STEER_WUR;

/** True for 0.0.0.0 and ::, where the reply source must be taken from IP(V6)_PKTINFO. */
bool net_addr_is_wildcard(const steer_sockaddr_t *addr) STEER_NONNULL(1);
