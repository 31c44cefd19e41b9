/*
 * The availability table that selection policies read: one packed state+TTL word per target.
 *
 * A target is one answer address of one datacenter of one service, named
 * "service/<service>/<datacenter>/<address>" (the integrator assigns dense ids 0..N-1 and the
 * names). Each target keeps two states: the monitor state (filled from the health monitors'
 * checks, UP for a target nothing monitors) and an optional admin-forced state from the
 * override list. The effective state, the only thing the query path reads, is the forced one
 * when set, else the monitor one.
 *
 * Threads: a gslb_health_t is built and mutated only by the control thread, then frozen and
 * published with rcu_assign_pointer(); query threads read it inside an RCU read-side section
 * through gslb_health_sttl() (one load, no lock). Never mutate a published table: make the
 * next one with gslb_health_dup(), change it, publish it, and free the old one after a grace
 * period (synchronize_rcu()).
 *
 * Overrides (gslb_overrides_t) are an ordered list of (glob pattern, UP|DOWN) and (glob
 * pattern, WEIGHT n) rules matched with fnmatch(3) against target names, ignoring case (DNS
 * names are case-insensitive); per kind, the last matching rule wins. A weight rule replaces
 * the configured weight of the addresses it matches (F5 "ratio" set from the API); weight 0
 * drains an address from weighted, multi and persist picks while another UP address of its
 * datacenter has a weight. '*' also matches '/', so a pattern ending in "/<star>" covers everything
 * below. They persist in a state file, one "PATTERN UP|DOWN" per line, '#' starts a comment;
 * see the example below (line comments, because the globs contain the C comment terminator).
 */
// Example state file:
//     # drain the telecom link of every service
//     */*/telecom/*                       DOWN
//     # take one service out entirely, but keep one address
//     service/vpn.example.test/*          DOWN
//     service/vpn.example.test/edu/192.0.2.10  UP
//     # send a quarter of the weighted traffic of one address elsewhere
//     service/www.example.test/dc1/192.0.2.20  WEIGHT 25
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

/*
 * State and TTL cap packed in one word so a reader gets both with one load (gdnsd's
 * gdnsd_sttl_t): bit 31 = DOWN, bit 30 = FORCED (admin override in effect), bits 0..27 =
 * TTL cap in seconds, 0 = no cap. The cap is how long an answer built on this state may be
 * cached: a monitor lowers it as a state change approaches.
 */
typedef uint32_t gslb_sttl_t;

#define GSLB_STTL_DOWN    UINT32_C(0x80000000)
#define GSLB_STTL_FORCED  UINT32_C(0x40000000)
#define GSLB_STTL_TTL_MAX UINT32_C(0x0FFFFFFF) /* mask, and the largest cap: ~8.5 years */

/** True when the packed word says DOWN. */
static inline bool gslb_sttl_down(gslb_sttl_t s)
{
	return (s & GSLB_STTL_DOWN) != 0;
}

/** True when an admin override decided the state. */
static inline bool gslb_sttl_forced(gslb_sttl_t s)
{
	return (s & GSLB_STTL_FORCED) != 0;
}

/** TTL cap in seconds, 0 = no cap. */
static inline uint32_t gslb_sttl_ttl(gslb_sttl_t s)
{
	return s & GSLB_STTL_TTL_MAX;
}

/** Pack a state; @p ttl_cap above GSLB_STTL_TTL_MAX is clamped to it. */
static inline gslb_sttl_t gslb_sttl_make(bool down, uint32_t ttl_cap)
{
	if (ttl_cap > GSLB_STTL_TTL_MAX)
		ttl_cap = GSLB_STTL_TTL_MAX;
	return (down ? GSLB_STTL_DOWN : 0) | ttl_cap;
}

typedef enum {
	GSLB_OVERRIDE_STATE,  /* force UP or DOWN */
	GSLB_OVERRIDE_WEIGHT, /* replace the configured weight */
} gslb_override_kind_t;

/* One admin override rule. */
typedef struct {
	char *pattern;      /* fnmatch(3) glob, owned */
	bool down;          /* GSLB_OVERRIDE_STATE: forced state */
	uint32_t line;      /* line in the state file it came from, 0 if added through the API */
	uint8_t kind;       /* gslb_override_kind_t */
	uint16_t weight;    /* GSLB_OVERRIDE_WEIGHT: 0..65535 */
	int64_t expires_ms; /* wall-clock time (ms since the epoch) the rule lapses at; 0 = never */
} gslb_override_t;

/* An ordered override list; the caller owns the storage (gslb_overrides_init/deinit). */
typedef struct {
	gslb_override_t *rules; /* owned */
	size_t count;
	size_t cap;
} gslb_overrides_t;

/*
 * The table. Fields are private: use the functions below. The struct is in the header only
 * so that gslb_health_sttl() inlines to a bounds check and one load.
 */
typedef struct {
	uint32_t count;
	gslb_sttl_t *eff;       /* effective state per target: what readers load */
	gslb_sttl_t *monitor;   /* monitor state per target (never has GSLB_STTL_FORCED) */
	int32_t *rule;          /* index into @c rules of the override that forced it, or -1 */
	int32_t *wrule;         /* index into @c rules of the weight override, or -1 */
	uint32_t *wx;           /* weight word: 0 = configured weight; see gslb_health_weight() */
	char **names;           /* per target, owned, NULL until named */
	gslb_override_t *rules; /* copy of the applied overrides, so reasons outlive the list */
	size_t n_rules;
	struct gslb_load_s
	    *load; /* per target, NULL until a value is set; see gslb_health_load() */
} gslb_health_t;

/**
 * The effective state of target @p id. An id beyond the table (a target added by a config
 * reload published before its health table) reads as UP with no cap, like every new target.
 * Any thread; @p h must be a published (frozen) table read under RCU. No allocation.
 */
static inline gslb_sttl_t gslb_health_sttl(const gslb_health_t *h, uint32_t id)
{
	return STEER_LIKELY(id < h->count) ? h->eff[id] : 0;
}

#define GSLB_HEALTH_WX_WEIGHT     UINT32_C(0x0001FFFF) /* override + 1, 0 = none */
#define GSLB_HEALTH_WX_RAMP_SHIFT 24                   /* high byte: slow-start percent, 0 = none */

/**
 * The weight to use for target @p id whose configured weight is @p configured: the admin
 * weight override if any, scaled by the slow-start ramp if the target is ramping up (rounded
 * up, so a positive weight stays positive). @p h may be NULL (no overrides). Any thread, like
 * gslb_health_sttl(); no allocation.
 */
static inline uint32_t gslb_health_weight(const gslb_health_t *h, uint32_t id, uint32_t configured)
{
	if (h == NULL || id >= h->count)
		return configured;
	uint32_t wx = h->wx[id];
	if (STEER_LIKELY(wx == 0))
		return configured;
	uint32_t w = (wx & GSLB_HEALTH_WX_WEIGHT) ? (wx & GSLB_HEALTH_WX_WEIGHT) - 1 : configured;
	uint32_t ramp = wx >> GSLB_HEALTH_WX_RAMP_SHIFT;
	return ramp ? (w * ramp + 99) / 100 : w;
}

/*
 * Load values of a target, as a `metrics` monitor read them (the same order as conf's
 * CONF_METRIC_*). Only values whose bit is in @c have are fresh; the others are unknown, and
 * load-based policies then count the target by its static weight (never as zero traffic).
 */
enum {
	GSLB_LOAD_CONNECTIONS,
	GSLB_LOAD_CAPACITY,
	GSLB_LOAD_PACKET_RATE,
	GSLB_LOAD_KBPS,
	GSLB_LOAD_CPU,
	GSLB_LOAD_LINK_CAPACITY,
	GSLB_LOAD_KINDS
};

typedef struct gslb_load_s {
	float v[GSLB_LOAD_KINDS];
	uint8_t have;    /* bit (1 << GSLB_LOAD_*) per fresh value */
	uint32_t age_ms; /* of the values when the table was filled */
	uint32_t round;  /* the metrics round that produced them (hysteresis counts rounds) */
} gslb_load_t;

/**
 * The load values of target @p id, NULL when it has none (no metrics monitor, or nothing
 * fresh). Any thread, like gslb_health_sttl(); no allocation.
 */
static inline const gslb_load_t *gslb_health_load(const gslb_health_t *h, uint32_t id)
{
	if (h == NULL || h->load == NULL || id >= h->count || h->load[id].have == 0)
		return NULL;
	return &h->load[id];
}

/**
 * Set the load values of target @p id (copied; @p load NULL or with no @c have bit clears
 * them). Returns 0 or STEER_ERANGE. Control thread, unpublished table only.
 */
int gslb_health_set_load(gslb_health_t *h, uint32_t id, const gslb_load_t *load)
    STEER_NONNULL(1) STEER_WUR;

/** A table of @p count targets, all UP with no TTL cap, unnamed, no overrides. Aborts on OOM. */
gslb_health_t *gslb_health_new(uint32_t count) STEER_WUR;

/**
 * A mutable copy of @p h (states, names, applied overrides) with room for @p count targets
 * (at least h->count; targets beyond h's are new: UP, unnamed). Control thread; aborts on
 * OOM. Use it to derive the next table to publish.
 */
gslb_health_t *gslb_health_dup(const gslb_health_t *h, uint32_t count) STEER_NONNULL(1) STEER_WUR;

/** Free @p h (NULL is fine). Only after no reader can see it (RCU grace period). */
void gslb_health_free(gslb_health_t *h);

/**
 * Name target @p id ("service/<service>/<datacenter>/<address>"); copied. Names are what
 * override globs match, so name targets before applying overrides. Returns 0, STEER_ERANGE
 * for a bad id, STEER_EINVAL for an empty name or one with whitespace or control characters
 * (it could not be written to a state file). Control thread, unpublished table only.
 */
int gslb_health_set_name(gslb_health_t *h, uint32_t id, const char *name)
    STEER_NONNULL(1, 3) STEER_WUR;

/**
 * Set the monitor state of target @p id (GSLB_STTL_FORCED in @p sttl is ignored). The
 * effective state follows unless an override forces the target. Returns 0 or STEER_ERANGE.
 * Control thread, unpublished table only.
 */
int gslb_health_set_monitor(gslb_health_t *h, uint32_t id, gslb_sttl_t sttl)
    STEER_NONNULL(1) STEER_WUR;

/**
 * Set the slow-start ramp of target @p id: its weight counts @p percent (1..99) percent, 0 or
 * 100 = full weight. Returns 0 or STEER_ERANGE. Control thread, unpublished table only.
 */
int gslb_health_set_ramp(gslb_health_t *h, uint32_t id, unsigned percent)
    STEER_NONNULL(1) STEER_WUR;

/**
 * Replace the overrides in effect with @p ov: every target whose name matches a state rule
 * takes the state of the last matching one (flagged FORCED, keeping the monitor's TTL cap);
 * the others go back to their monitor state. Likewise the last matching weight rule sets the
 * target's weight, and targets no weight rule matches go back to their configured weight. If @p
 * matches is not NULL it receives, per rule, how many targets it matched (ov->count entries), so
 * the caller can warn about rules that match nothing. Unnamed targets match nothing. Control
 * thread, unpublished table only.
 */
void gslb_health_apply_overrides(gslb_health_t *h, const gslb_overrides_t *ov, uint32_t *matches)
    STEER_NONNULL(1, 2);

/* One target's row for listings (steerctl states, metrics). Pointers borrow from the table. */
typedef struct {
	uint32_t id;
	const char *name;           /* NULL if unnamed */
	gslb_sttl_t eff;            /* effective state */
	gslb_sttl_t monitor;        /* what the monitor says, even when overridden */
	bool forced;                /* an override decides the effective state */
	const char *pattern;        /* the override rule that forced it, NULL if not forced */
	uint32_t rule_line;         /* that rule's state-file line, 0 if from the API */
	int32_t weight;             /* admin weight override, -1 = none (the configured weight) */
	const char *weight_pattern; /* the weight rule, NULL if none */
	unsigned ramp;              /* slow-start percent, 0 = not ramping */
} gslb_health_entry_t;

/** Fill @p out for target @p id. Returns 0 or STEER_ERANGE. Any thread (table is frozen). */
int gslb_health_entry(const gslb_health_t *h, uint32_t id, gslb_health_entry_t *out)
    STEER_NONNULL(1, 3) STEER_WUR;

/**
 * Write the human reason for the entry's state into @p buf (always terminated), e.g.
 * "forced DOWN by override 'service/x/telecom/<star>' (line 3); monitor: UP" or "monitor: UP".
 * Returns the length snprintf() would have written.
 */
int gslb_health_reason(const gslb_health_entry_t *e, char *buf, size_t len) STEER_NONNULL(1, 2);

typedef int (*gslb_health_list_cb)(const gslb_health_entry_t *e, void *ctx);

/**
 * Call @p cb for every target in id order; stops at and returns the first non-zero value @p cb
 * returns, else 0. Any thread (table is frozen).
 */
int gslb_health_list(const gslb_health_t *h, gslb_health_list_cb cb, void *ctx) STEER_NONNULL(1, 2);

/* ---- override list ---- */

/** An empty list in caller-owned storage. */
void gslb_overrides_init(gslb_overrides_t *ov) STEER_NONNULL(1);

/** Free the rules of @p ov and leave it empty. */
void gslb_overrides_deinit(gslb_overrides_t *ov) STEER_NONNULL(1);

/**
 * Force targets matching @p pattern UP or DOWN. A rule with the same pattern is removed first,
 * so the new rule is last and wins over older ones: the latest admin command takes effect.
 * @p line records the state-file line (0 from the API). Returns 0, or STEER_EINVAL with a
 * message in @p err for an empty pattern, one longer than 1024 bytes, one with whitespace,
 * control characters or '#' (the state file could not hold it), or an unclosed '['.
 */
int gslb_overrides_set(gslb_overrides_t *ov, const char *pattern, bool down, uint32_t line,
                       char *err, size_t errlen) STEER_NONNULL(1, 2, 5) STEER_WUR;

/** Append a copy of @p rule (any kind), as gslb_overrides_set() would. */
int gslb_overrides_add(gslb_overrides_t *ov, const gslb_override_t *rule, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Set the weight of targets matching @p pattern to @p weight (0..65535), replacing a weight
 * rule with the same pattern like gslb_overrides_set(). Returns 0 or STEER_EINVAL as
 * gslb_overrides_set() does.
 */
int gslb_overrides_set_weight(gslb_overrides_t *ov, const char *pattern, uint16_t weight,
                              uint32_t line, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 5) STEER_WUR;

/** Remove the rule of @p kind with exactly @p pattern. Returns 0 or STEER_ENOENT. */
int gslb_overrides_remove(gslb_overrides_t *ov, const char *pattern, gslb_override_kind_t kind)
    STEER_NONNULL(1, 2) STEER_WUR;

/**
 * Replace @p ov with the rules of state file @p path (lines "PATTERN UP", "PATTERN DOWN",
 * "PATTERN WEIGHT N", each optionally followed by "UNTIL SECONDS[.MMM]", the wall-clock time
 * since the epoch the rule lapses at). A rule whose time has passed (it lapsed while the daemon
 * was down) is skipped. On error @p ov is unchanged and @p err
 * says "path:line: message"; returns STEER_ESYNTAX for a bad line, or the negative errno of
 * the failed open/read. A missing file is STEER_ENOENT so the caller can treat it as "no
 * overrides yet". Control thread.
 */
int gslb_overrides_load(gslb_overrides_t *ov, const char *path, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Write @p ov to @p path atomically: a temporary file in the same folder, fsync, rename, so a
 * crash leaves either the old or the new file, never a torn one. Returns 0 or a negative errno
 * with "path: message" in @p err. Control thread.
 */
int gslb_overrides_save(const gslb_overrides_t *ov, const char *path, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;
