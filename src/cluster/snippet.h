/*
 * Routing daemon configurations for this node, printed by `steerctl cluster bird-config` and
 * `frr-config`: the node speaker's side of the cluster (BGP or OSPF towards the routers,
 * BFD 100 ms x 3, graceful restart off) announcing the service addresses the way the
 * configured announce method expects (docs/cluster.md explains each part). Pure text
 * generation from the cluster configuration and a few options; no I/O besides looking up
 * which interface holds the unicast address.
 */
#pragma once

#include <stddef.h>

#include "base/compiler.h"
#include "conf/conf.h"

/**
 * Write the configuration for @p daemon ("bird" or "frr") into a new string in @p out
 * (caller frees). @p opts are the command's arguments: an optional "bgp" (default) or
 * "ospf", then OPTION=VALUE pairs: peer=ADDR (repeatable; BGP needs one), local-as=N
 * (default 65053), peer-as=N (default 65000), area=ID (OSPF, default 0.0.0.0),
 * uplink=IFNAME (OSPF: the interface towards the routers, default the one holding the
 * unicast address), bfd-interval=MS (default 100), bfd-multiplier=N (default 3). Returns 0,
 * or STEER_EINVAL with the reason in @p err (unknown option, bad value, no peer for BGP).
 */
int cluster_snippet(const conf_cluster_t *cc, const char *daemon, const char *const *opts,
                    size_t n_opts, char **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 5, 6) STEER_WUR;
