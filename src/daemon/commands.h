/*
 * steerd's implementation of the control backend (ctl/commands.h): status, zones, reload,
 * stats, explain, health [PATTERN], monitors [PATTERN], maps, override list and override
 * set/clear/weight, and the forwarder's upstreams [PATTERN], cache and cache flush [NAME],
 * each turning the server's state into the reply data documented in tools/steerctl.c. The command
 * table, argument checks and transports are in ctl/. Control thread only.
 */
#pragma once

#include "ctl/commands.h"

typedef struct server server_t;

/**
 * The backend serving @p server (stored in it, so valid as long as the server). Give it to
 * ctl_dispatch(), or as the ctx of ctl_dispatch_cb() to a transport.
 */
const ctl_backend_t *commands_backend(server_t *server) STEER_NONNULL(1) STEER_WUR;
