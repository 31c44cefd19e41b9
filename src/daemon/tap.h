/*
 * The dnstap query log of the daemon: created from the `dnstap:` settings at start, with one
 * queue per query thread and one for the forwarder's engine, and flushed at exit. Its
 * settings take effect on restart only (reload reports them so).
 */
#pragma once

#include <stddef.h>

#include "base/compiler.h"
#include "tap/tap.h"

struct server;

/**
 * Start the log when `dnstap:` is configured: after net_bind() and the forwarder's engine
 * exist, before any query thread or the engine runs. Identity: the configured one
 * (conf_identity()), else the host name; version "steerd <version>". Sets server->tap (NULL
 * when off). Returns 0 or a negative steer_err with a message in @p err. Control thread.
 */
int server_tap_start(struct server *server, char *err, size_t errlen) STEER_NONNULL(1, 2) STEER_WUR;

/** The log's counters summed over every thread; zeros when off. Control thread. */
void server_tap_stats(const struct server *server, tap_counters_t *out) STEER_NONNULL(1, 2);

/**
 * Flush what is queued and close the log, once no query thread and no engine thread runs.
 * Safe when off, and twice. Control thread.
 */
void server_tap_stop(struct server *server) STEER_NONNULL(1);
