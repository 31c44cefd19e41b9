/*
 * The status page on the HTTP front end: "/" is the page, "/assets/<file>" its script, style
 * sheet and icon, all built into the binary (ops/assets.h). The page reads everything it shows
 * from /api/v1/, so it is served without a token even when read-only-open is false: it holds
 * no data, and asks the operator for the token its API calls then carry. Control thread only.
 */
#pragma once

#include "base/compiler.h"

struct server;

/**
 * Register the page's paths with @p server's HTTP front end (none configured: nothing to do).
 * Returns 0, or a negative steer_err after logging why (a path already taken).
 */
int status_page_register(struct server *server) STEER_NONNULL(1) STEER_WUR;
