/*
 * The daemon's HTTP front end: started from the configuration's `http` section after the
 * control socket (and, like it, before the privilege drop, so a port below 1024 works), fed
 * the backend the control socket serves. A reload re-reads the token file and read-only-open;
 * the listen addresses are restart-only (the reload reports them in restart_needed). Control
 * thread only.
 */
#pragma once

#include <stddef.h>

#include "base/compiler.h"
#include "conf/conf.h"
#include "ctl/http.h"

struct server;

/**
 * Start listening on @p server->boot_conf's http addresses (none: nothing to do, and
 * server->http stays NULL). Returns 0, or a negative steer_err after logging why.
 */
int server_http_start(struct server *server) STEER_NONNULL(1) STEER_WUR;

/**
 * Read the token file of @p conf into @p token (@p size bytes, CTL_HTTP_TOKEN_MAX + 1 is
 * enough; "" when the http section has no token-file or no listen address). The reload's
 * check before anything changes: a missing, empty, unreadable or world-readable file fails it.
 * Returns 0 or a negative steer_err with the reason in @p err.
 */
int server_http_token(const conf_t *conf, char *token, size_t size, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 4) STEER_WUR;

/** Apply @p conf's read-only-open and the @p token server_http_token() read (a reload). */
void server_http_reconfigure(struct server *server, const conf_t *conf, const char *token)
    STEER_NONNULL(1, 2, 3);

/** Stop the HTTP server (none: nothing to do). */
void server_http_stop(struct server *server) STEER_NONNULL(1);
