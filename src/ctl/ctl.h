/*
 * Control socket transport: a UNIX stream socket (mode 0660, root and the daemon's group)
 * served by the control thread's event loop. Protocol: the client sends one JSON object on one
 * line, {"cmd": "status", "args": [...]}; the server answers one JSON object on one line,
 * {"ok": true, "data": ...} or {"ok": false, "error": "..."}, and closes. What the commands
 * are and do is not this file's business: the server hands each request to a ctl_handler_cb,
 * which for steerd is ctl_dispatch_cb() over the command table of ctl/commands.h.
 */
#pragma once

#include <jansson.h>

#include "base/compiler.h"

/* Room for a socket path: sizeof(sockaddr_un.sun_path). */
#define CTL_SOCKET_PATH_MAX 108

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

/**
 * The server's handling of one request line (@p len bytes of @p text, no newline): parse the
 * JSON, check its shape, call @p handler and build the reply object, {"ok": true, "data": ...}
 * or {"ok": false, "error": "..."} for any input, never NULL but when out of memory. The caller
 * owns the reply. Exported so the fuzz target runs exactly what the socket serves; any thread
 * the handler allows.
 */
json_t *ctl_request_reply(const char *text, size_t len, ctl_handler_cb handler, void *ctx)
    STEER_NONNULL(3);

/** Stop serving, close clients and unlink the socket. NULL is ignored. */
void ctl_server_stop(ctl_server_t *server);

/**
 * Client side (used by steerctl and tests): send @p cmd with @p args (may be NULL) to the
 * socket at @p path and return the parsed reply object in @p reply (caller owns it).
 * Waits at most @p timeout_ms. Returns 0 or a negative steer_err with a message in @p err.
 */
int ctl_client_call(const char *path, const char *cmd, json_t *args, int timeout_ms, json_t **reply,
                    char *err, size_t errlen) STEER_NONNULL(1, 2, 5, 6) STEER_WUR;

/**
 * The control socket steerd's quick mode creates and steerctl talks to when none is given:
 * /run/steer/steerd.sock for root, or for another user with $XDG_RUNTIME_DIR set (an absolute
 * path short enough) $XDG_RUNTIME_DIR/steerd.sock, which that user can create. Written to
 * @p buf (@p size bytes, CTL_SOCKET_PATH_MAX is enough); returns @p buf. Any thread.
 */
const char *ctl_default_socket(char *buf, size_t size) STEER_NONNULL(1);
