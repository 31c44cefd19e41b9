/*
 * systemd service notification (sd_notify(3)) for a `Type=notify` unit: READY once the first
 * health round is in and the sockets are bound, RELOADING and READY around a reload (STATUS
 * carries a failed reload's error), STOPPING at shutdown, and the watchdog ping. Without
 * NOTIFY_SOCKET in the environment every call is a no-op, so steerd runs the same outside
 * systemd. Control thread only: the state is file-scope, one control thread per process.
 */
#pragma once

#include <stdbool.h>

#include <ev.h>

#include "base/compiler.h"

/**
 * Start pinging the service manager's watchdog (WATCHDOG=1) from @p loop every half of
 * WATCHDOG_USEC, when sd_watchdog_enabled() says the watchdog is on for this process. The
 * pings come from a timer of the control loop, so a loop that hangs stops them and the
 * service manager restarts the daemon. Call once, when the loop exists.
 */
void notify_watchdog_start(struct ev_loop *loop) STEER_NONNULL(1);

/** Stop the watchdog timer (no-op when it does not run). */
void notify_watchdog_stop(struct ev_loop *loop) STEER_NONNULL(1);

/** Tell the service manager the daemon serves: READY=1 with @p status as STATUS=. */
void notify_ready(const char *status) STEER_NONNULL(1);

/**
 * A reload starts: RELOADING=1 with MONOTONIC_USEC= (CLOCK_MONOTONIC now, as systemd 253's
 * Type=notify-reload requires; older managers ignore the field).
 */
void notify_reloading(void);

/**
 * A reload ended: READY=1, with STATUS= @p status after a good reload or "reload failed: "
 * and the first line of @p error after a failed one (the old configuration keeps serving).
 */
void notify_reloaded(bool ok, const char *status, const char *error) STEER_NONNULL(2);

/** Shutdown begins: STOPPING=1. */
void notify_stopping(void);
