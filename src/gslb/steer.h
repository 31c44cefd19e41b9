/*
 * Load steering state of a GSLB view: per service and address family, every datacenter's
 * load (the `metrics` monitors' values in the health table, summed over its UP addresses of
 * the family) and, for the load policies (least-connections, capacity, packet-rate, kbps),
 * the datacenter order the query path answers by, with hysteresis.
 *
 * Load values do not depend on the client, so the order is computed once per health table on
 * the control thread (when a view is derived with new health or paths) instead of per query;
 * the query path only reads it.
 *
 * Missing values: an UP address without a fresh value counts its static weight's share of
 * what the datacenter's other addresses report (so a datacenter whose monitor lost one of two
 * exporters is not suddenly half as loaded, and never zero). A datacenter none of whose
 * addresses reports the policy's value has no measurement: it goes after those that have one.
 *
 * Hysteresis (F5 switches on measured load; an answer that follows every scrape's jitter moves
 * clients back and forth for nothing): the order starts with a sticky best datacenter. Another
 * replaces it only when it beats the sticky one by @c margin percent (its value is lower by
 * that share of the sticky one's, or its spare capacity higher) in @c rounds consecutive
 * metric rounds. The service's round is the lowest gslb_load_t.round of its reporting targets
 * (the rounds all of them completed); the health table is republished when a value changes,
 * so the rounds between two builds all saw the values of the later one and each counts.
 * Rebuilding without a new round (an admin override) keeps the count as it is. While a
 * challenger is counting (gslb_steer_pending()), whoever publishes must rebuild now and then
 * even if no value changed, or a challenger that holds still would never win.
 *
 * Threads: gslb_steer_build() on the control thread; the result is immutable and read by query
 * threads inside the published view.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "gslb/health.h"
#include "gslb/policy.h"

typedef struct gslb_steer gslb_steer_t;

/* One datacenter's load for one service and family. */
typedef struct {
	float v[GSLB_LOAD_KINDS]; /* per GSLB_LOAD_*, summed over the UP addresses of the family */
	uint8_t have;      /* bit (1 << GSLB_LOAD_*) per value at least one address reports */
	uint8_t up;        /* UP addresses of the family */
	uint8_t estimated; /* of which counted by weight share (no fresh value) */
	uint32_t age_ms;   /* the oldest value used */
} gslb_steer_dc_t;

/* The answer order of one service and family, and why. */
typedef struct {
	uint8_t
	    order[GSLB_POLICY_DC_MAX]; /* datacenters (svc->dcs indices) with data, best first */
	uint8_t n;                     /* 0 = no data: the fallback policy decides */
	uint8_t sticky;                /* the sticky best, GSLB_POLICY_DC_NONE when none */
	uint8_t challenger; /* the datacenter beating it, GSLB_POLICY_DC_NONE when none */
	uint8_t streak;     /* consecutive rounds the challenger has beaten it */
	uint64_t round;     /* the service's metric round this state counted */
} gslb_steer_order_t;

/* Hysteresis parameters (paths.hysteresis). */
typedef struct {
	unsigned margin_pct;
	unsigned rounds; /* >= 1 */
} gslb_steer_opts_t;

/**
 * The steering state for services @p svcs (@p n_svcs of them, prepared, as the view numbers
 * them) under @p health, carrying the hysteresis of @p prev (NULL = none; it must have been
 * built for the same services). Aborts on OOM. Control thread.
 */
gslb_steer_t *gslb_steer_build(const gslb_steer_t *prev, const gslb_policy_svc_t *const *svcs,
                               size_t n_svcs, const gslb_health_t *health,
                               const gslb_steer_opts_t *opts) STEER_NONNULL(5) STEER_WUR;

/**
 * A state for @p svcs (as gslb_steer_build() takes them) carrying the hysteresis of @p prev,
 * built for @p old_svcs: service i takes that of old service @p from[i] (SIZE_MAX = none, a
 * new service), datacenters matched by name. For a reload, so it does not reset who is sticky.
 * Build the real state from it with gslb_steer_build(). Control thread; aborts on OOM.
 */
gslb_steer_t *gslb_steer_remap(const gslb_steer_t *prev, const gslb_policy_svc_t *const *svcs,
                               size_t n_svcs, const gslb_policy_svc_t *const *old_svcs,
                               const size_t *from) STEER_NONNULL(1, 4, 5) STEER_WUR;

/** True when some challenger is counting rounds against a sticky best. Control thread. */
bool gslb_steer_pending(const gslb_steer_t *st) STEER_NONNULL(1);

/** Free @p st (NULL is ignored), after the RCU grace period of the view holding it. */
void gslb_steer_free(gslb_steer_t *st);

/** The order of service @p svc for @p family (AF_INET / AF_INET6). Query threads. */
const gslb_steer_order_t *gslb_steer_order(const gslb_steer_t *st, size_t svc, int family)
    STEER_NONNULL(1);

/** The load of datacenter @p dc (svc->dcs index) of service @p svc for @p family. Any thread. */
const gslb_steer_dc_t *gslb_steer_dc(const gslb_steer_t *st, size_t svc, int family, unsigned dc)
    STEER_NONNULL(1);

/**
 * The value the load policy @p kind orders by, from @p l, into @p out (lower is better; for
 * capacity the negated spare capacity). False when @p l lacks it. Any thread.
 */
bool gslb_steer_value(gslb_policy_kind_t kind, const gslb_steer_dc_t *l, float *out)
    STEER_NONNULL(2, 3);
