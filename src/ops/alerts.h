/*
 * Alert delivery: every state change handed to alerts_send() goes to each destination, a
 * webhook (an HTTP POST of the event as JSON, libcurl's multi interface on the loop) or a
 * command (run without a shell, the event in its environment, stdin /dev/null, killed after
 * the timeout, reaped with ev_child). A failed attempt (a transport error, a non-2xx status,
 * a non-zero exit, the timeout) is retried after 1 s, 2 s, 4 s ... up to the destination's
 * retries, then given up. Each destination delivers its events one at a time, in order, from
 * a bounded queue that drops the oldest waiting event when full. Failures and drops are
 * logged and counted (alerts_stats_json()).
 *
 * Threads: the control thread, whose loop must be libev's default loop (ev_child works only
 * there). Nothing here runs on, or blocks, the query threads. Exec probes' children are not
 * disturbed: they are reaped through pidfds and never raise SIGCHLD (health/probe_exec.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>
#include <jansson.h>

#include "base/compiler.h"

/* Events a destination holds while it is busy or backing off; older ones are dropped first. */
#define ALERTS_QUEUE_MAX 64

/* One event to deliver. Strings are borrowed for the call. */
typedef struct {
	uint64_t seq; /* increasing per process */
	double time;  /* seconds since the epoch */
	const char *kind, *subject, *from, *to, *reason;
} alert_event_t;

/* One destination: exactly one of @c webhook and @c exec. Strings are copied. */
typedef struct {
	const char *webhook; /* http:// or https:// URL */
	const char *exec;    /* an absolute path, then arguments separated by blanks (no shell,
	                      * no quoting) */
	unsigned timeout_ms; /* per attempt */
	unsigned retries;    /* attempts after the first failed one */
} alert_dest_def_t;

typedef struct alerts alerts_t;

/**
 * Destinations @p defs (@p n of them, n > 0) on @p loop (the default loop), naming this node
 * @p node in what they send. Returns 0, or a negative steer_err with the reason in @p err
 * (a bad definition, libcurl failing to start).
 */
int alerts_new(struct ev_loop *loop, const alert_dest_def_t *defs, size_t n, const char *node,
               alerts_t **out, char *err, size_t errlen) STEER_NONNULL(1, 2, 4, 5, 6) STEER_WUR;

/** Queue @p ev for every destination and start what can start. Never blocks. */
void alerts_send(alerts_t *a, const alert_event_t *ev) STEER_NONNULL(1, 2);

/**
 * The event as its webhook receives it: {"seq", "time" (epoch seconds), "timestamp" (ISO
 * 8601 UTC, milliseconds), "kind", "subject", "from", "to", "reason", "node"}. Caller owns it.
 */
json_t *alerts_event_json(const alert_event_t *ev, const char *node) STEER_NONNULL(1, 2);

/**
 * The counters: {"sent", "failures" (failed attempts), "given_up" (events that failed every
 * attempt), "dropped" (pushed out of a full queue), "queued", "destinations": [{"type":
 * "webhook" | "exec", "target": URL or command, and the same counters}]}. Caller owns it.
 */
json_t *alerts_stats_json(const alerts_t *a) STEER_NONNULL(1);

/**
 * Stop every delivery (a running command is killed, its exit reaped by the loop), drop what is
 * queued (logged with the count) and free @p a. NULL is fine.
 */
void alerts_free(alerts_t *a);
