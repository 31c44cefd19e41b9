/*
 * The announcement methods behind one interface: what withdraws and announces this node's
 * service addresses (conf_announce_t). Runs in the keeper process, which has the privileges
 * the methods need; nothing here is called by steerd's own threads.
 *
 *   interface   the holder interface admin up (announced) or down (withdrawn); the addresses
 *               stay on it, so in-flight queries are still answered after a withdraw
 *   bird        `enable`/`disable` of a named protocol over BIRD's control socket
 *   frr         kernel host routes to the service addresses through lo (main table, or
 *               frr.table), added or removed; FRR's zebra redistributes them. The holder
 *               stays down: zebra would prefer its connected routes and hide the kernel ones
 *   keepalived  the track file holds 0 (healthy) or 1 (fault), written atomically
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/compiler.h"
#include "conf/conf.h"

typedef struct announcer announcer_t;

/**
 * Prepare the method of @p cc (copied; @p cc is not kept): create the holder interface and
 * its addresses when one is configured, then put the node in the withdrawn state. Returns 0
 * with the announcer in @p out, or a negative steer_err with the reason in @p err.
 */
int announcer_new(const conf_cluster_t *cc, announcer_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Announce (@p announce) or withdraw. Idempotent: doing it again is not an error. Returns 0
 * or a negative steer_err with the reason in @p err (the state is then unknown; the caller
 * retries).
 */
int announcer_apply(announcer_t *a, bool announce, char *err, size_t errlen)
    STEER_NONNULL(1, 3) STEER_WUR;

/**
 * Re-assert the state @p announce that should be in force and repair it when something else
 * changed it: BIRD restarted (its protocol back to its configured state), the holder set up or
 * down by hand, the track file rewritten, an address or route removed. @p drifted tells
 * whether the method had drifted (as far as the method can tell: addresses and routes are
 * restored without a word). Returns 0 or a negative steer_err with @p err.
 */
int announcer_verify(announcer_t *a, bool announce, bool *drifted, char *err, size_t errlen)
    STEER_NONNULL(1, 3, 4) STEER_WUR;

/** The method's name ("interface", "bird", ...). */
const char *announcer_method_name(conf_announce_t method);

/** Free @p a without changing the announcement. NULL is ignored. */
void announcer_free(announcer_t *a);
