/*
 * The query context: everything one query thread owns for answering, created by the
 * transport layer once per thread through this API and passed to every auth_answer() call of
 * that thread. It holds the thread's answer counters and its GSLB state (policy random state,
 * round-robin counters, decision counters), so the transport owns no answering state.
 */
#pragma once

#include <stdint.h>

#include "auth/rrl.h"
#include "auth/stats.h"
#include "base/compiler.h"
#include "gslb/stats.h"
#include "gslb/view.h"

typedef struct {
	auth_stats_t stats; /* written by the owner thread only */
	gslb_qstate_t gslb; /* written by the owner thread only (through gslb_view_answer()) */
	/* What the last auth answer was, for the UDP layer's auth_rrl_apply(); the transport
	 * sets cls to AUTH_RRL_NONE before each query (a forwarded answer leaves it so). */
	auth_rrl_info_t rrl;
} auth_qctx_t;

/**
 * A new context for one query thread, its random state seeded from getrandom() mixed with
 * @p thread (distinct per thread, so threads never share a sequence even without
 * getrandom()). Control thread, before the query thread starts. Aborts on OOM.
 */
auth_qctx_t *auth_qctx_new(uint64_t thread) STEER_WUR;

/**
 * Initialise caller-owned @p ctx with a fixed @p seed: repeatable answers for tests and
 * tools. Counters start at 0.
 */
void auth_qctx_init(auth_qctx_t *ctx, uint64_t seed) STEER_NONNULL(1);

/** Free a context (after its thread stopped). NULL is ignored. */
void auth_qctx_free(auth_qctx_t *ctx);

/**
 * Add @p ctx's counters into @p auth and @p gslb (the caller's own). The owner thread may be
 * running: each counter is read atomically, the set is not a snapshot. Control thread.
 */
void auth_qctx_sum(const auth_qctx_t *ctx, auth_stats_t *auth, gslb_stats_t *gslb)
    STEER_NONNULL(1, 2, 3);
