/*
 * libcurl's multi interface driven by a libev loop: CURLMOPT_SOCKETFUNCTION becomes one ev_io
 * per socket libcurl watches, CURLMOPT_TIMERFUNCTION one ev_timer. The HTTP probes run their
 * transfers through it, and so does every other HTTP client on the control loop (the alert
 * webhooks), so a slow server never blocks the loop.
 *
 * After every curl_multi_socket_action() the owner's @c done callback runs, once libcurl has
 * returned: that is where it reads curl_multi_info_read() and may add or remove handles
 * freely. Adding a handle only arms the timer, so no transfer starts inside the caller.
 * Only the thread that runs the loop touches a curl_loop_t.
 */
#pragma once

#include <curl/curl.h>
#include <stddef.h>

#include "base/compiler.h"

struct ev_loop;
typedef struct curl_loop curl_loop_t;

/* Called after libcurl acted on a socket or a timeout: collect the finished transfers. */
typedef void (*curl_loop_done_cb)(void *ctx);

/**
 * A multi handle on @p loop whose socket actions are followed by @p done(@p ctx). Calls
 * curl_global_init() once per process (never undone: curl_global_cleanup() is not
 * thread-safe, and the process ends soon enough). Returns 0, or a negative steer_err with the
 * reason in @p err.
 */
int curl_loop_new(struct ev_loop *loop, curl_loop_done_cb done, void *ctx, curl_loop_t **out,
                  char *err, size_t errlen) STEER_NONNULL(1, 2, 4, 5) STEER_WUR;

/** The multi handle, for curl_multi_add_handle(), _remove_handle() and _info_read(). */
CURLM *curl_loop_multi(const curl_loop_t *cl) STEER_NONNULL(1);

/**
 * Free the multi handle and every watcher. Remove the easy handles first. NULL is ignored.
 */
void curl_loop_free(curl_loop_t *cl);
