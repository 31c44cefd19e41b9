/*
 * steer-probe, the path-measurement agent of one datacenter: it polls the DNS nodes' demand
 * (probe/nodes.h), measures the client prefixes within the probe budget (probe/table.h,
 * probe/sender.h) and serves what it measured as a site table (gslb/pathfmt.h) at
 * /paths/table, with /paths/status for operators, over the HTTP server of ctl/http.h.
 *
 * One thread and one libev loop; nothing here blocks. The settings come from the `paths:`
 * section of the same steer.yaml the nodes read, and the agent's own entry in paths.agents.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "conf/conf.h"

struct ev_loop;
typedef struct probe_agent probe_agent_t;

/* Where the agent's settings come from, resolved from the configuration. */
typedef struct {
	const conf_t *conf;     /* borrowed: must outlive the agent */
	const char *datacenter; /* the datacenter this agent measures from */
	const char *listen;     /* "ADDR:PORT" overriding the agent entry's URL; NULL = it */
	uint16_t probe_port;    /* 0 = PROBE_DNS_PORT (another only for tests) */
} probe_agent_opts_t;

/**
 * Check @p opts against the configuration without opening anything: `paths:` present, the
 * datacenter configured and with an agent entry, nodes configured, dns-name valid when dns is
 * a method, the listen address usable, the token file readable. Returns 0, or STEER_ECONF with
 * the reason in @p err (naming file:line where the configuration is at fault).
 */
int probe_agent_check(const probe_agent_opts_t *opts, char *err, size_t errlen)
    STEER_NONNULL(1, 2) STEER_WUR;

/**
 * Start the agent on @p loop: listen, schedule the demand polls and the publishing. Returns 0,
 * or a negative steer_err with the reason in @p err (nothing is left running).
 */
int probe_agent_start(struct ev_loop *loop, const probe_agent_opts_t *opts, probe_agent_t **out,
                      char *err, size_t errlen) STEER_NONNULL(1, 2, 3, 4) STEER_WUR;

/** The port the HTTP server is bound to (for a listen port of 0). */
uint16_t probe_agent_port(const probe_agent_t *a) STEER_NONNULL(1);

/** Stop everything and free. NULL is ignored. */
void probe_agent_stop(probe_agent_t *a);
