/*
 * The keeper: a small process, forked from steerd at start-up before any thread exists, that
 * holds the announcement. steerd's cluster thread sends it the wanted state every heartbeat;
 * the keeper applies changes (announce.h) and withdraws on its own when steerd goes quiet
 * for longer than the liveness timeout (stopped, hung) or its socket closes (killed, exited).
 * So a dead or frozen steerd is withdrawn by a process that is neither. The keeper keeps the
 * privileges the methods need when steerd drops its own; it withdraws and exits on SIGTERM,
 * SIGINT, or when steerd is gone.
 *
 * The two sides talk over a SOCK_SEQPACKET socketpair, one fixed-size message each way.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/compiler.h"
#include "conf/conf.h"

typedef struct cluster_keeper cluster_keeper_t;

/* What the keeper reports after each change it applied or failed to apply. */
typedef struct {
	bool announced;     /* the state now in force */
	bool self_withdraw; /* the keeper withdrew on its own: no heartbeat within the timeout */
	int error;          /* 0, or the negative steer_err of the failed apply */
	char message[200];  /* the error, or what was done ("withdrawn: no heartbeat for 312 ms") */
} cluster_keeper_report_t;

/**
 * Fork the keeper for @p cc and wait (at most 5 s) until it has set up the method (holder
 * interface, addresses) and applied the withdrawn state. Must be called while the process has
 * a single thread. Returns 0 with the handle in @p out, or a negative steer_err with the
 * keeper's reason in @p err (the keeper has then exited).
 */
int cluster_keeper_spawn(const conf_cluster_t *cc, cluster_keeper_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/** The socket to watch for reports (readable: call cluster_keeper_recv()). */
int cluster_keeper_fd(const cluster_keeper_t *k) STEER_NONNULL(1);

/** The keeper's process id. */
pid_t cluster_keeper_pid(const cluster_keeper_t *k) STEER_NONNULL(1);

/**
 * Send the wanted state (announce or withdraw) with its @p reason (may be NULL); every call
 * is also a heartbeat. Never blocks. Returns 0, STEER_EAGAIN when the socket is full, or
 * another negative steer_err when the keeper is gone. Any one thread at a time.
 */
int cluster_keeper_send(cluster_keeper_t *k, bool announce, const char *reason) STEER_NONNULL(1);

/**
 * Take one report without blocking. Returns 0 with @p out filled, STEER_EAGAIN when there is
 * none, or another negative steer_err when the keeper is gone (it then withdrew and exited).
 */
int cluster_keeper_recv(cluster_keeper_t *k, cluster_keeper_report_t *out) STEER_NONNULL(1, 2);

/**
 * Ask the keeper to withdraw and exit, wait for it (at most 2 s, then SIGKILL) and free the
 * handle. NULL is ignored.
 */
void cluster_keeper_shutdown(cluster_keeper_t *k);
