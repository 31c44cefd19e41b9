/*
 * The served GSLB view's run-time layers: the admin's override rules (steerctl override; kept
 * in gslb.state-file when one is configured), the configuration's rules under them, and the
 * monitor states under both. The compiled view (gslb_view_build()) carries none of them; the
 * functions here derive the view to serve from it, sharing its maps and services and
 * replacing only the health table. Monitor states come in through a gslb_health_fill_cb, so
 * this module knows nothing of the probes that produce them.
 *
 * Threads: control thread only; results are unpublished views the caller publishes.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "conf/conf.h"
#include "gslb/health.h"
#include "gslb/view.h"

/* The admin's override rules; caller-owned storage (gslb_admin_init/deinit). */
typedef struct {
	gslb_overrides_t rules; /* in the order set; later rules win */
} gslb_admin_t;

typedef enum {
	GSLB_ADMIN_SET,   /* add or replace the rule */
	GSLB_ADMIN_CLEAR, /* drop the rule of the pattern (of the kind, or every kind) */
} gslb_admin_action_t;

/* One change the admin asks for. */
typedef struct {
	gslb_admin_action_t action;
	gslb_override_t rule; /* pattern (borrowed), kind, value and expiry (SET); CLEAR reads
	                       * pattern and kind */
	bool any_kind;        /* CLEAR: drop the state and the weight rule of the pattern */
} gslb_admin_req_t;

/* What a change did. */
typedef struct {
	uint32_t targets;    /* targets the pattern matches now */
	bool cleared_state;  /* CLEAR: a state rule was dropped */
	bool cleared_weight; /* CLEAR: a weight rule was dropped */
} gslb_admin_result_t;

/** Fill the monitor state of every target of @p h (unpublished); see gslb_admin_monitored(). */
typedef void (*gslb_health_fill_cb)(void *ctx, gslb_health_t *h);

/** An empty rule list. */
void gslb_admin_init(gslb_admin_t *admin) STEER_NONNULL(1);

/** Free the rules and leave the list empty. */
void gslb_admin_deinit(gslb_admin_t *admin) STEER_NONNULL(1);

/**
 * Read the admin's rules from the state file of @p conf into @p admin (replacing them). No
 * state file configured, or none written yet, keeps the rules in memory; in the latter case
 * they are saved to it at once. Returns 0 or a negative steer_err with "path:line: message".
 */
int gslb_admin_load(gslb_admin_t *admin, const conf_t *conf, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * A view sharing @p gslb's maps and services whose health table has the rules of @p conf,
 * then those of @p admin, applied (later rules win; the monitor states are kept). @p matches,
 * if not NULL, receives per effective rule (config rules first) its target count (caller
 * frees). Returns 0 or STEER_EINVAL (a config rule the override list refuses).
 */
int gslb_admin_apply(const gslb_admin_t *admin, const conf_t *conf, const gslb_view_t *gslb,
                     gslb_view_t **out, uint32_t **matches, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3, 4, 6) STEER_WUR;

/**
 * For a reload to @p conf: re-read the admin's rules from its state file (kept from memory
 * without one) and replace *@p gslb (the newly compiled view, taken over) with the view
 * gslb_admin_apply() derives. On error @p admin is unchanged and *@p gslb is freed and NULL.
 */
int gslb_admin_reload(gslb_admin_t *admin, const conf_t *conf, gslb_view_t **gslb, char *err,
                      size_t errlen) STEER_NONNULL(1, 2, 3, 4) STEER_WUR;

/**
 * Apply @p req to the admin's rules on top of @p conf and the served view @p gslb: the view to
 * serve next goes to @p out (the caller publishes it) and the rules are saved to the state
 * file. Refused, with nothing changed and the reason in @p err: a bad pattern, clearing a rule
 * the admin never set (or one from the configuration), a weight rule on a target whose
 * datacenter's policy ignores address weights, a state file that cannot be written. Returns 0
 * or a negative steer_err.
 */
int gslb_admin_change(gslb_admin_t *admin, const conf_t *conf, const gslb_view_t *gslb,
                      const gslb_admin_req_t *req, gslb_view_t **out, gslb_admin_result_t *res,
                      char *err, size_t errlen) STEER_NONNULL(1, 2, 3, 4, 5, 6, 7) STEER_WUR;

/** The earliest expiry of the admin's rules, ms since the epoch; 0 when none expires. */
int64_t gslb_admin_next_expiry(const gslb_admin_t *admin) STEER_NONNULL(1);

/**
 * Drop the admin's rules whose expiry is at or before @p now_ms (wall clock, ms since the
 * epoch), logging each, and save the rest to the state file (a failed save is logged: the
 * lapsed rules go anyway, and a load skips them). *@p out is the view to serve next, derived
 * from @p gslb like gslb_admin_change() does, or NULL when no rule lapsed. Returns how many
 * rules were dropped.
 */
size_t gslb_admin_expire(gslb_admin_t *admin, const conf_t *conf, const gslb_view_t *gslb,
                         int64_t now_ms, gslb_view_t **out) STEER_NONNULL(1, 2, 3, 5);

/** How many targets of @p gslb the glob @p pattern matches (0 for a pattern the list refuses). */
uint32_t gslb_admin_pattern_targets(const gslb_view_t *gslb, const char *pattern)
    STEER_NONNULL(1, 2);

/**
 * A view like @p gslb whose health table got its monitor states from @p fill (called once with
 * a copy of @p gslb's table; overrides stay in effect). Aborts on OOM.
 */
gslb_view_t *gslb_admin_monitored(const gslb_view_t *gslb, gslb_health_fill_cb fill, void *ctx)
    STEER_NONNULL(1, 2) STEER_WUR;

/**
 * Log each service of @p conf whose targets all went DOWN between @p before (the table served
 * so far, NULL at start: everything UP) and @p after, with the all-down action it now takes
 * ("service www.example.test: all datacenters down, answering fallback 192.0.2.99"), and each
 * one that has an UP target again. Called once per publish, so a service is logged once per
 * transition, however many probes or publishes keep it there.
 */
void gslb_admin_log_all_down(const conf_t *conf, const gslb_health_t *before,
                             const gslb_health_t *after) STEER_NONNULL(1, 3);
