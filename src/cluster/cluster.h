/*
 * The cluster node inside steerd: one thread with its own event loop that runs the
 * self-check, decides whether this node should be announced (fall, rise, hold-down, drain),
 * tells the keeper process (keeper.h) every heartbeat and keeps the status that
 * `steerctl cluster` reports. It never blocks on the control thread, so a long reload does
 * not stop the heartbeat.
 *
 * The self-check, each interval:
 *   answer    a real DNS query from the unicast address to every local service address,
 *             answered within the timeout (a zone's SOA with AA, or id.server CH TXT with the
 *             node id when no zone is served or every one has expired)
 *   threads   every query thread made progress recently (cluster_inputs_t.threads_ok)
 *   routes    replies can leave: the return path (a default route per service family, or
 *             the configured destinations) is routable from the unicast address
 *   reload    the last reload succeeded (when check_reload)
 *   forwarder at least one upstream is usable (when check_forwarder)
 * A round fails when any check fails; check_fall failed rounds withdraw, check_rise good
 * rounds after the hold-down announce again. Every transition is logged once with its reason.
 *
 * Life cycle (control thread): cluster_keeper_spawn() first, while single-threaded; then
 * cluster_new() -> cluster_start() after the query threads run -> cluster_status(),
 * cluster_drain() ... any number of times -> cluster_stop() -> cluster_free().
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/compiler.h"
#include "cluster/keeper.h"
#include "conf/conf.h"

typedef struct cluster cluster_t;

/*
 * What the self-check asks the rest of the daemon. Every callback runs on the cluster thread
 * and must be safe there (atomics or a lock the query threads never take). NULL callbacks
 * are skipped (that check always passes).
 */
typedef struct {
	void *ctx;
	/* Every query thread made progress within @p max_age_ms; otherwise false and @p why
	 * says which thread and for how long. */
	bool (*threads_ok)(void *ctx, unsigned max_age_ms, char *why, size_t whylen);
	/* The last reload succeeded (or none happened); otherwise false and @p why is its error. */
	bool (*reload_ok)(void *ctx, char *why, size_t whylen);
	/* The forwarder has a usable upstream; NULL when there is no forwarder. */
	bool (*forwarder_ok)(void *ctx, char *why, size_t whylen);
	/* Client queries received so far over every transport (the self-check's own included). */
	uint64_t (*queries)(void *ctx);
	/* What id.server answers with (server.identity when it is set), copied by cluster_new();
	 * NULL = cluster.node-id. The answer check expects it when no zone is served. */
	const char *identity;
} cluster_inputs_t;

typedef enum {
	CLUSTER_STARTING,  /* not yet announced: waiting for check_rise good rounds */
	CLUSTER_ANNOUNCED, /* announced */
	CLUSTER_WITHDRAWN, /* withdrawn by the self-check (or the keeper); hold-down and rise next
	                    */
	CLUSTER_DRAINING,  /* withdrawn by steerctl drain; waiting for the queries to stop */
	CLUSTER_DRAINED,   /* drained: no query for drain_quiet (or drain_timeout passed) */
} cluster_state_t;

#define CLUSTER_CHECKS_MAX 5

typedef struct {
	const char *name; /* "answer", "threads", "routes", "reload", "forwarder" */
	bool enabled;
	bool ok;           /* the last round's result */
	unsigned failures; /* failed rounds in a row (0 when ok) */
	char detail[160];  /* why it failed, or what passed ("3 addresses in 1.2 ms") */
} cluster_check_status_t;

/* A copy of the node's state, for steerctl cluster. */
typedef struct {
	cluster_state_t state;
	bool healthy;       /* the self-check's verdict (rise/fall applied) */
	bool want_announce; /* what is asked of the keeper */
	bool announced;     /* what the keeper last reported in force */
	bool keeper_alive;
	pid_t keeper_pid;
	char keeper_message[200]; /* the keeper's last report */
	uint64_t transitions;     /* announce/withdraw changes since start */
	double last_transition;   /* seconds since the epoch, 0 = none */
	char reason[256];         /* why the last transition happened */
	unsigned good_rounds;     /* good rounds in a row */
	double hold_down_left;    /* seconds until the hold-down ends, 0 = none */
	cluster_check_status_t checks[CLUSTER_CHECKS_MAX];
	size_t n_checks;
	bool drain_timed_out;   /* the drain ended by drain_timeout, not by quiet */
	double drain_started;   /* seconds since the epoch, 0 = not draining */
	double drain_quiet_for; /* seconds without client queries so far */
	char vrrp_state[16];    /* the last keepalived notify ("MASTER", ...), "" = none */
} cluster_status_t;

/**
 * A cluster node for @p cc (copied) driving @p keeper (taken over) with the self-check
 * inputs @p in (copied). Does not start the thread. Aborts on out-of-memory.
 */
cluster_t *cluster_new(const conf_cluster_t *cc, cluster_keeper_t *keeper,
                       const cluster_inputs_t *in) STEER_NONNULL(1, 2, 3) STEER_WUR;

/*
 * A zone for the answer check. @c expire_at is a secondary zone's expiry (seconds since the
 * epoch, 0 = never; NULL for a zone that never expires): borrowed, read by the cluster
 * thread until the next cluster_set_zones() or cluster_stop() returns.
 */
typedef struct {
	const char *apex; /* presentation form */
	const _Atomic int64_t *expire_at;
} cluster_zone_t;

/**
 * The zones the answer check asks for (@p zones, the names copied): one per round, in turn,
 * except that a zone whose answer failed is asked again the next round (so check_fall
 * failures in a row count for any number of zones) and that an expired zone is skipped
 * (logged when it starts and stops being skipped): it answers SERVFAIL on every node that
 * cannot reach its primaries alike, not for a fault of this node. With no zone left to ask,
 * id.server is asked. Call at start, after every reload and whenever the served zones
 * change (a secondary zone's new version). Any thread.
 */
void cluster_set_zones(cluster_t *c, const cluster_zone_t *zones, size_t n) STEER_NONNULL(1);

/* A zone of the answer check's list, as cluster_zones() reports it. */
typedef struct {
	char *apex;   /* owned; presentation form, trailing dot */
	bool expired; /* skipped by the answer check since its last round: the zone expired */
} cluster_zone_status_t;

/**
 * A copy of the answer check's zones, in turn: a new array of @p n (NULL when none), freed
 * by the caller with cluster_zones_free(). Any thread.
 */
cluster_zone_status_t *cluster_zones(cluster_t *c, size_t *n) STEER_NONNULL(1, 2);

/** Free what cluster_zones() returned. */
void cluster_zones_free(cluster_zone_status_t *zones, size_t n);

/** Start the cluster thread. Returns 0 or a negative steer_err (logged). */
int cluster_start(cluster_t *c) STEER_NONNULL(1) STEER_WUR;

/**
 * Withdraw now and drain: the state becomes CLUSTER_DRAINING, then CLUSTER_DRAINED once no
 * client query arrived for drain_quiet or after @p timeout_ms (0 = drain_timeout). Draining
 * again restarts the wait. Any thread.
 */
void cluster_drain(cluster_t *c, unsigned timeout_ms) STEER_NONNULL(1);

/**
 * End a drain: the node is announced again as soon as the self-check is good (rise rounds,
 * no hold-down). Returns false when the node was not draining. Any thread.
 */
bool cluster_undrain(cluster_t *c) STEER_NONNULL(1);

/** Record keepalived's state from a notify hook ("MASTER", "BACKUP", "FAULT", "STOP"). */
void cluster_vrrp_notify(cluster_t *c, const char *state) STEER_NONNULL(1, 2);

/** Copy the current state into @p out. Any thread. */
void cluster_status(cluster_t *c, cluster_status_t *out) STEER_NONNULL(1, 2);

/** The name of a state ("announced", ...). */
const char *cluster_state_name(cluster_state_t state);

/**
 * Withdraw, stop the thread and shut the keeper down (it withdraws and exits). Safe when the
 * thread never started, and twice.
 */
void cluster_stop(cluster_t *c) STEER_NONNULL(1);

/** Stop if needed and free. NULL is ignored. */
void cluster_free(cluster_t *c);
