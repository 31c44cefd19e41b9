/*
 * The bridge between the configuration's monitors and the GSLB health table: which checks to
 * run (one per monitor and probe address, however many answers use it) and which checks
 * each GSLB target depends on (its own, its datacenter's link monitor, and the targets it
 * `requires`). Control thread only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "conf/conf.h"
#include "gslb/health.h"
#include "gslb/view.h"
#include "health/engine.h"

typedef struct monitor_plan monitor_plan_t;

/**
 * Build the plan of @p conf for the targets @p view exports (gslb_view_targets(); @p view
 * must have been built from @p conf). Errors ("file:line: message" in @p err): a `requires`
 * naming no target or datacenter link, a probe address of the wrong form. Returns 0 or
 * STEER_ECONF.
 */
int monitor_plan_build(const conf_t *conf, const gslb_view_t *view, monitor_plan_t **out, char *err,
                       size_t errlen) STEER_NONNULL(1, 2, 3, 4) STEER_WUR;

/** Free @p plan (NULL is fine). The engine copies what it keeps, so any time after set. */
void monitor_plan_free(monitor_plan_t *plan);

/** The checks to give health_engine_set_checks(), @p n of them. */
const health_check_def_t *monitor_plan_checks(const monitor_plan_t *plan, size_t *n)
    STEER_NONNULL(1, 2);

/**
 * The check indices target @p target depends on (@p n of them; its own monitor's first).
 * A target beyond the plan has none.
 */
const uint32_t *monitor_plan_target_checks(const monitor_plan_t *plan, uint32_t target, size_t *n)
    STEER_NONNULL(1, 3);

/**
 * The first check of target @p target whose state is known DOWN when @p down, else the
 * first that is not (UP or not yet known), with its status in @p st (its strings borrowed from
 * @p engine); false when there is none. For the reasons shown next to a target's state.
 */
bool monitor_plan_target_check(const monitor_plan_t *plan, const health_engine_t *engine,
                               uint32_t target, bool down, health_check_status_t *st)
    STEER_NONNULL(1, 2, 5);

/** The metrics check of target @p target (its load values), UINT32_MAX = none. */
uint32_t monitor_plan_target_metrics(const monitor_plan_t *plan, uint32_t target) STEER_NONNULL(1);

/**
 * Set every target's monitor state in @p h (unpublished) from the engine: DOWN when any check
 * it depends on is DOWN, the lowest TTL cap of those checks, the lowest slow-start ramp.
 * Checks without a state yet count as UP. Also sets every target's load values from its
 * metrics check: the values fresh now (read within the monitor's stale-after, or configured
 * numbers), `round` the check's result count; none clears them.
 */
void monitor_plan_apply(const monitor_plan_t *plan, const health_engine_t *engine, gslb_health_t *h)
    STEER_NONNULL(1, 2, 3);
