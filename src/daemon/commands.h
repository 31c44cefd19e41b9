/*
 * steerd's implementation of the control backend (ctl/commands.h): status, zones, reload,
 * stats, explain, health [PATTERN], monitors [PATTERN], maps, override list and override
 * set/clear/weight, the forwarder's upstreams [PATTERN], cache and cache flush [NAME], and
 * the cluster node's cluster, cluster health/bird-config/frr-config/notify, drain and
 * undrain (commands_cluster.c), each turning the server's state into the reply data documented in
 * tools/steerctl.c. The command table, argument checks and transports are in ctl/. Control thread
 * only.
 */
#pragma once

#include "ctl/commands.h"

typedef struct server server_t;

/**
 * The backend serving @p server (stored in it, so valid as long as the server). Give it to
 * ctl_dispatch(), or as the ctx of ctl_dispatch_cb() to a transport.
 */
const ctl_backend_t *commands_backend(server_t *server) STEER_NONNULL(1) STEER_WUR;

/** Fill the cluster node's functions of @p b (commands_cluster.c); @p b->ctx is the server. */
void commands_cluster_fill(ctl_backend_t *b) STEER_NONNULL(1);
