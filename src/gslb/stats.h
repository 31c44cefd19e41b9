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

/*
 * Answers per service and datacenter, one block per query thread beside gslb_stats_t. Each
 * build of a view numbers its (service, datacenter) pairs into slots and counts into one of
 * two banks, the other one than the view it replaces: after a reload's grace period the old
 * bank is final, so the control thread carries its totals over by name and zeroes it while
 * the threads count into the new one (gslb_view_answer_bank(), net_gslb_answers_clear()).
 * Slots beyond GSLB_ANSWER_SLOTS are counted in @c untracked only.
 */
#define GSLB_ANSWER_SLOTS 4096 /* 32 KiB per bank and thread: 1,000 services of 4 DCs */
typedef struct {
	steer_counter_t slot[2][GSLB_ANSWER_SLOTS];
	steer_counter_t untracked[2];
} gslb_answer_counters_t;

/** Add every counter of @p src (its owner may be writing) into @p dst (the caller's). */
void gslb_stats_sum(gslb_stats_t *dst, const gslb_stats_t *src) STEER_NONNULL(1, 2);
