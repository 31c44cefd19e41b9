/*
 * GSLB decision counters, one block per query thread (inside its gslb_qstate_t), written only
 * by that thread through gslb_view_answer() (base/counter.h) and summed by the control thread.
 */
#pragma once

#include "base/compiler.h"
#include "base/counter.h"

typedef struct {
	steer_counter_t services;    /* A/AAAA/ANY decisions at a service */
	steer_counter_t addresses;   /* ... answered with addresses */
	steer_counter_t cname;       /* ... answered with the fallback CNAME */
	steer_counter_t nodata;      /* ... with no address of the family */
	steer_counter_t servfail;    /* ... answered SERVFAIL by the all-down policy */
	steer_counter_t all_down;    /* ... decided by the all-down policy (any answer) */
	steer_counter_t ecs_used;    /* ... made on the query's ECS subnet */
	steer_counter_t ecs_ignored; /* ... that had ECS but used the resolver's address */
	steer_counter_t whoami;      /* whoami answers */
} gslb_stats_t;

/** Add every counter of @p src (its owner may be writing) into @p dst (the caller's). */
void gslb_stats_sum(gslb_stats_t *dst, const gslb_stats_t *src) STEER_NONNULL(1, 2);
