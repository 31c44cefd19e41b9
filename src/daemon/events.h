/*
 * State-change events: the one place where every change an operator must hear of becomes an
 * event (a GSLB target UP/DOWN, a service or a datacenter with every target down and its
 * recovery, a forwarder upstream or link up/down, the cluster announcement, a failed reload
 * and the next good one). Each event is logged as one structured line
 * (`event kind=target subject=service/www/dc1/192.0.2.10 from=up to=down reason="..."`),
 * kept in a ring of the last EVENTS_RING for `steerctl events` and the status page, and
 * handed to the sink (alert delivery).
 *
 * The health diff compares two GSLB health tables (before and after a publish); the
 * forwarder and cluster watchers poll their copies from a timer on the control loop, since
 * neither calls back. Control thread only: nothing here is touched by the query threads.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>
#include <jansson.h>

#include "base/compiler.h"
#include "cluster/cluster.h"
#include "fwd/engine.h"
#include "gslb/health.h"

/* Events kept for `steerctl events`: a few minutes of a bad hour, little memory (~200 KiB). */
#define EVENTS_RING 256

#define EVENT_SUBJECT_MAX 256
#define EVENT_STATE_MAX   24
#define EVENT_REASON_MAX  512

typedef enum {
	EVENT_TARGET,     /* service/<service>/<datacenter>/<address>: up, down */
	EVENT_SERVICE,    /* service/<service>: up, all-down */
	EVENT_DATACENTER, /* datacenter/<name>: up, all-down (every target of every service) */
	EVENT_UPSTREAM,   /* upstream/<name>: up, link-down, upstream-down, degraded */
	EVENT_LINK,       /* link/<device>: up, down */
	EVENT_CLUSTER,    /* node/<node-id>: announced, withdrawn, draining, ... */
	EVENT_RELOAD,     /* config/<path>: ok, failed */
} event_kind_t;

typedef struct {
	uint64_t seq; /* 1, 2, 3 ... for the life of the process: what a poller asks `since=` */
	double time;  /* seconds since the epoch */
	event_kind_t kind;
	char subject[EVENT_SUBJECT_MAX];
	char from[EVENT_STATE_MAX];
	char to[EVENT_STATE_MAX];
	char reason[EVENT_REASON_MAX];
} event_t;

/* Gets every event once, right after it is logged and stored. */
typedef void (*events_sink_cb)(const event_t *ev, void *ctx);

/*
 * The reason of target @p id's new state (@p down): the check's last detail, or why an
 * override forces it. Write at most @p len bytes, terminated.
 */
typedef void (*events_reason_cb)(void *ctx, const gslb_health_entry_t *e, char *buf, size_t len);

/* One upstream's last seen fault, for the poller. */
typedef struct {
	fwd_fault_t fault;
	bool seen;
} events_upstream_t;

/* The events of one process. Caller-owned storage: events_init() / events_deinit(). */
typedef struct {
	event_t ring[EVENTS_RING]; /* ring[(seq - 1) % EVENTS_RING] */
	uint64_t last_seq;         /* 0 = none yet */
	events_sink_cb sink;       /* NULL = none */
	void *sink_ctx;
	bool reload_failed; /* the last reload failed: the next good one is an event */
	/* forwarder and cluster watch (events_watch_start()) */
	struct ev_loop *loop;
	ev_timer watch_w;
	fwd_engine_t *fwd;      /* borrowed, NULL = none */
	events_upstream_t *ups; /* per upstream id; owned */
	size_t n_ups;
	char **links;    /* distinct link devices of the upstreams; owned */
	bool *link_down; /* per link: every upstream on it is link-down */
	size_t n_links;
	cluster_t *cluster; /* borrowed, NULL = none */
	char node[64];      /* the node's name in cluster subjects */
	cluster_state_t cluster_state;
	bool cluster_seen;
} events_t;

/** Empty events with no sink. */
void events_init(events_t *ev) STEER_NONNULL(1);

/** Stop the watch and free what @p ev owns. Safe twice. */
void events_deinit(events_t *ev) STEER_NONNULL(1);

/** Hand every later event to @p sink (NULL = none) with @p ctx. */
void events_set_sink(events_t *ev, events_sink_cb sink, void *ctx) STEER_NONNULL(1);

/** "target", "service", ... as in the log line and the JSON. */
const char *event_kind_name(event_kind_t kind);

/**
 * Record one event now: the next sequence number, the structured log line (warning when
 * @p to is a bad state: down, all-down, failed, withdrawn, link-down ...; notice otherwise),
 * the ring, the sink. Strings are copied (truncated to their fields). Returns the event's
 * sequence number.
 */
uint64_t events_emit(events_t *ev, event_kind_t kind, const char *subject, const char *from,
                     const char *to, const char *reason) STEER_NONNULL(1, 3, 4, 5, 6);

/**
 * The events of the ring newer than @p since (0 = all kept), at most the last @p max of them
 * (0 = no limit), oldest first, as a JSON array of {"seq", "time", "kind", "subject",
 * "from", "to", "reason"}. The caller owns the result.
 */
json_t *events_json(const events_t *ev, uint64_t since, size_t max) STEER_NONNULL(1);

/** One event as the JSON object events_json() lists. The caller owns the result. */
json_t *event_json(const event_t *e) STEER_NONNULL(1);

/**
 * Emit the changes between health tables @p before (NULL = none: nothing to compare, no
 * event) and @p after: every target whose effective state changed (matched by name, so
 * the ids of a reloaded view may differ; targets new in @p after are not events), then every
 * datacenter and service whose targets all went down or came back. @p reason_cb words the
 * targets' reasons.
 */
void events_health_diff(events_t *ev, const gslb_health_t *before, const gslb_health_t *after,
                        events_reason_cb reason_cb, void *ctx) STEER_NONNULL(1, 3, 4);

/**
 * A reload finished: failed (@p ok false, @p err its first line is the reason) is an event
 * each time; a good one only after a failed one. @p config names the subject.
 */
void events_reload(events_t *ev, bool ok, const char *config, const char *err) STEER_NONNULL(1);

/**
 * Compare upstream states with the last poll and emit the changes: upstreams (@p st, @p n
 * of them, indexed by id) and links (a link is down when every upstream on it is
 * link-down). The first poll records without emitting.
 */
void events_upstreams_diff(events_t *ev, const fwd_upstream_stats_t *st, size_t n) STEER_NONNULL(1);

/** Compare the cluster node's state with the last poll; the first poll records only. */
void events_cluster_diff(events_t *ev, const cluster_status_t *st) STEER_NONNULL(1, 2);

/**
 * Poll @p fwd (may be NULL) and @p cluster (may be NULL) every @p interval_ms on @p loop
 * and emit their changes; @p node names the cluster subject. Call once.
 */
void events_watch_start(events_t *ev, struct ev_loop *loop, fwd_engine_t *fwd, cluster_t *cluster,
                        const char *node, unsigned interval_ms) STEER_NONNULL(1, 2, 5);
