/*
 * UDP workers: each one is a thread serving one SO_REUSEPORT socket of one listen address
 * with blocking batched receive and send. The receive strategy sits behind udp_api_t so that
 * another one (AF_XDP) can be added without touching the answering loop.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "auth/stats.h"
#include "base/compiler.h"
#include "base/sockaddr.h"
#include "net/net_int.h"

/* Datagrams received and answered per system call pair. */
#define UDP_BATCH 32

/* One datagram of a batch: the query as received and the room for its reply. */
typedef struct {
	const uint8_t *rx;
	size_t rx_len;
	const steer_sockaddr_t *remote;
	uint8_t *tx;
	size_t tx_cap;
	size_t tx_len; /* set by the worker; 0 = no reply */
	/* The datagram's header with its control messages (IP_PKTINFO) when the socket is a
	 * wildcard bind, else NULL: the forwarder's reply must leave from the same address. */
	const struct msghdr *hdr;
} udp_pkt_t;

/*
 * A receive strategy. @c recv blocks until at least one datagram arrived or its timeout
 * (UDP_RCVTIMEO_MS) expired, and returns the number of usable packets filled into its own
 * array (0 on timeout or when every datagram was unusable, counting those into @p counters).
 * @c send transmits the replies (tx_len > 0) of the last batch.
 */
typedef struct {
	const char *name;
	int (*recv)(void *io, udp_pkt_t **pkts, net_counters_t *counters);
	void (*send)(void *io, udp_pkt_t *pkts, int n, net_counters_t *counters);
} udp_api_t;

/* How often an idle worker wakes to check for stop and to record its heartbeat: bounds the
 * shutdown delay, and how soon a stalled worker can be told from an idle one. */
#define UDP_RCVTIMEO_MS 100

/**
 * A worker for listen address @p addr_idx of @p net. Its socket is bound at once.
 * Returns 0 and the worker in @p out, or a negative steer_err with a message in @p err.
 */
int udp_worker_new(net_t *net, size_t addr_idx, unsigned worker_idx, udp_worker_t **out, char *err,
                   size_t errlen) STEER_NONNULL(1, 4, 5) STEER_WUR;

/** Start the worker's thread. Returns 0 or a negative errno. */
int udp_worker_start(udp_worker_t *w) STEER_NONNULL(1) STEER_WUR;

/** Log this worker's messages through @p tap (before udp_worker_start()). */
void udp_worker_set_tap(udp_worker_t *w, tap_thread_t *tap) STEER_NONNULL(1, 2);

/** Wait for the thread to exit (after net->stopping was set); no-op if never started. */
void udp_worker_join(udp_worker_t *w) STEER_NONNULL(1);

/**
 * The worker's query context: the control thread configures it before udp_worker_start()
 * and reads its answer and GSLB counters afterwards.
 */
auth_qctx_t *udp_worker_qctx(const udp_worker_t *w) STEER_NONNULL(1);

/** Add the worker's counters (its own and its query context's) into @p sum. Control thread. */
void udp_worker_stats(const udp_worker_t *w, net_stats_t *sum) STEER_NONNULL(1, 2);

/**
 * Milliseconds since the worker last made progress (a batch, or a receive timeout), 0 when
 * it is not running. Any thread.
 */
uint64_t udp_worker_silence_ms(const udp_worker_t *w, uint64_t now_ms) STEER_NONNULL(1);

/** The worker's thread name ("steer-udp0.1"), for reports. */
void udp_worker_name(const udp_worker_t *w, char *buf, size_t size) STEER_NONNULL(1, 2);

/** Close the socket and free. NULL is ignored. */
void udp_worker_free(udp_worker_t *w);
