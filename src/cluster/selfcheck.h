/*
 * The cluster node's decision: whether this node should be announced, from the results of
 * the self-check rounds, the keeper's reports and the operator's drain commands. Pure: no
 * I/O, no clock of its own (every call gets the monotonic time in ms), no allocation, no
 * locking, so a fake clock tests it completely. The caller (cluster.c) serialises the calls.
 *
 * The rules:
 *   - check_fall failed rounds in a row turn the verdict bad; check_rise good rounds in a row
 *     turn it good. Each time the verdict turns bad the hold-down starts again.
 *   - STARTING: announced once the verdict is good (no hold-down at start).
 *   - ANNOUNCED: withdrawn (WITHDRAWN) once the verdict is bad; the reason is the failing
 *     check and its detail.
 *   - WITHDRAWN: announced again once the verdict is good and the hold-down is over.
 *   - The keeper withdrawing on its own (no heartbeat) counts as a withdraw: the verdict turns
 *     bad at once, the hold-down starts, check_rise good rounds are needed again.
 *   - drain: withdrawn at once (DRAINING) whatever the verdict; DRAINED once no client query
 *     came for drain_quiet, or after the drain's timeout. Rounds keep running and keep the
 *     verdict current. Draining again restarts the wait.
 *   - undrain: announced at once when the verdict is good (no hold-down); otherwise WITHDRAWN
 *     and announced once it is good (and after a hold-down the drain's failures started).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "cluster/cluster.h"

typedef struct {
	unsigned fall;         /* failed rounds that turn the verdict bad, >= 1 */
	unsigned rise;         /* good rounds that turn it good, >= 1 */
	unsigned hold_down_ms; /* after the verdict turned bad, before announcing again */
	unsigned drain_quiet_ms;
	unsigned drain_timeout_ms;
} cluster_selfcheck_conf_t;

typedef struct {
	cluster_selfcheck_conf_t conf;
	cluster_state_t state;
	bool healthy;            /* the verdict, fall/rise applied */
	unsigned good_rounds;    /* in a row */
	unsigned bad_rounds;     /* in a row */
	uint64_t hold_until_ms;  /* no announce before this (0 = no hold-down) */
	uint64_t drain_start_ms; /* when the current drain began */
	uint64_t drain_deadline_ms;
	uint64_t quiet_since_ms; /* the last round that saw client queries, while draining */
	bool drain_timed_out;
	uint64_t transitions; /* changes of the announcement asked for */
	char reason[256];     /* why the state last changed */
} cluster_selfcheck_t;

/** Start in CLUSTER_STARTING with @p conf (copied). */
void cluster_selfcheck_init(cluster_selfcheck_t *sc, const cluster_selfcheck_conf_t *conf)
    STEER_NONNULL(1, 2);

/**
 * Apply one round at @p now_ms: @p ok its result, @p why the failing check and its detail
 * ("answer: 192.0.2.53: timeout after 80 ms"; may be NULL when @p ok), @p quiet whether no
 * client query (other than the self-check's own) arrived since the last round (only used
 * while draining). Returns true when the state changed (sc->reason says why).
 */
bool cluster_selfcheck_round(cluster_selfcheck_t *sc, uint64_t now_ms, bool ok, const char *why,
                             bool quiet) STEER_NONNULL(1);

/**
 * The keeper withdrew on its own at @p now_ms with the message @p msg ("withdrawn: no
 * heartbeat for 312 ms"). Returns true when the state changed.
 */
bool cluster_selfcheck_keeper_withdrew(cluster_selfcheck_t *sc, uint64_t now_ms, const char *msg)
    STEER_NONNULL(1, 3);

/**
 * Withdraw and drain at @p now_ms, waiting at most @p timeout_ms (0 = conf.drain_timeout_ms).
 * Returns true when the state changed (draining again only restarts the wait: false).
 */
bool cluster_selfcheck_drain(cluster_selfcheck_t *sc, uint64_t now_ms, unsigned timeout_ms)
    STEER_NONNULL(1);

/**
 * End a drain at @p now_ms. Returns false (nothing changed) when the node was not draining,
 * true otherwise (the state then changed).
 */
bool cluster_selfcheck_undrain(cluster_selfcheck_t *sc, uint64_t now_ms) STEER_NONNULL(1);

/** True when the node should be announced (CLUSTER_ANNOUNCED). */
bool cluster_selfcheck_announce(const cluster_selfcheck_t *sc) STEER_NONNULL(1);

/** Milliseconds of hold-down left at @p now_ms that would delay an announce, 0 = none. */
uint64_t cluster_selfcheck_hold_left(const cluster_selfcheck_t *sc, uint64_t now_ms)
    STEER_NONNULL(1);
