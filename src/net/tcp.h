/*
 * TCP threads (RFC 7766): each runs its own libev loop with one SO_REUSEPORT listening socket
 * per listen address. Connections carry 2-byte framed messages, may pipeline several queries
 * (answered in order), are closed after an idle or a partial-message timeout, and stop being
 * read while their output is backed up. AXFR replies are streamed as the socket drains.
 */
#pragma once

#include <stddef.h>

#include "auth/stats.h"
#include "base/compiler.h"
#include "net/net_int.h"

/**
 * A TCP thread for @p net with its listening sockets bound (net->listen must hold resolved
 * ports). Returns 0 and the worker in @p out, or a negative steer_err with a message in @p err.
 */
int tcp_worker_new(net_t *net, unsigned worker_idx, tcp_worker_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 3, 4) STEER_WUR;

/** Start the thread. Returns 0 or a negative errno. */
int tcp_worker_start(tcp_worker_t *w) STEER_NONNULL(1) STEER_WUR;

/**
 * Wake the loop so that it exits, closing its connections, and wait for the thread. Safe from
 * the control thread at any time; no-op if never started.
 */
void tcp_worker_stop(tcp_worker_t *w) STEER_NONNULL(1);

/**
 * The thread's query context: the control thread configures it before tcp_worker_start()
 * and reads its answer and GSLB counters afterwards.
 */
auth_qctx_t *tcp_worker_qctx(const tcp_worker_t *w) STEER_NONNULL(1);

/** The thread's counters, read by the control thread. */
void tcp_worker_stats(const tcp_worker_t *w, net_stats_t *sum) STEER_NONNULL(1, 2);

/**
 * Milliseconds since the thread's loop last turned (its heartbeat timer fires every
 * TCP_HEARTBEAT_MS), 0 when it is not running. Any thread.
 */
uint64_t tcp_worker_silence_ms(const tcp_worker_t *w, uint64_t now_ms) STEER_NONNULL(1);

/** The thread's name ("steer-tcp0"), for reports. */
void tcp_worker_name(const tcp_worker_t *w, char *buf, size_t size) STEER_NONNULL(1, 2);

/* Period of a TCP thread's heartbeat timer. */
#define TCP_HEARTBEAT_MS 100

/** Log this thread's messages through @p tap (before tcp_worker_start()). */
void tcp_worker_set_tap(tcp_worker_t *w, tap_thread_t *tap) STEER_NONNULL(1, 2);

/** Close the sockets and free (after tcp_worker_stop()). NULL is ignored. */
void tcp_worker_free(tcp_worker_t *w);
