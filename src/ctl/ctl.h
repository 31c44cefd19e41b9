/*
 * Control socket server: a UNIX stream socket (mode 0660, root and the daemon's group) served
 * by the control thread's event loop. Protocol: the client sends one JSON object on one line,
 * {"cmd": "status", "args": [...]}; the server answers one JSON object on one line,
 * {"ok": true, "data": ...} or {"ok": false, "error": "..."}, and closes. Later issues add
 * commands, not framing.
 */
#pragma once

#include <jansson.h>

#include "base/compiler.h"

struct ev_loop;
typedef struct ctl_server ctl_server_t;

/**
 * Handle one command. @p args is a JSON array (never NULL). Return the reply's "data" (the
 * server takes the reference) and 0, or a negative steer_err with a message in @p err.
 * Runs on the control thread.
 */
typedef int (*ctl_handler_cb)(const char *cmd, json_t *args, json_t **data, char *err,
                              size_t errlen, void *ctx);

/**
 * Create the socket at @p path (replacing a stale one), and serve it on @p loop.
 * Returns 0 or a negative steer_err (logged).
 */
int ctl_server_start(ctl_server_t **out, struct ev_loop *loop, const char *path,
                     ctl_handler_cb handler, void *ctx) STEER_NONNULL(1, 2, 3, 4) STEER_WUR;

/** Stop serving, close clients and unlink the socket. NULL is ignored. */
void ctl_server_stop(ctl_server_t *server);

/**
 * Client side (used by steerctl and tests): send @p cmd with @p args (may be NULL) to the
 * socket at @p path and return the parsed reply object in @p reply (caller owns it).
 * Waits at most @p timeout_ms. Returns 0 or a negative steer_err with a message in @p err.
 */
int ctl_client_call(const char *path, const char *cmd, json_t *args, int timeout_ms, json_t **reply,
                    char *err, size_t errlen) STEER_NONNULL(1, 2, 5, 6) STEER_WUR;
