/*
 * Upstream health and selection for the caching forwarder: groups per domain suffix, per
 * upstream state with a fault class (link down, upstream down, upstream degraded), the active
 * probe schedule, passive detection from real queries, the policies (ordered, round-robin,
 * fastest) and the in-request retry sequence.
 *
 * Pure decision logic: no I/O, no clock, no globals. The forwarder's event loop feeds it
 * probe results, query outcomes and link state with the monotonic time (now_ms) and asks it
 * whom to ask next and when to probe. A set is owned by one thread (the forwarder thread) and
 * is not thread-safe; other threads read copies made with fwd_upstream_stats() on that thread.
 *
 * Hysteresis (why the ordered choice does not flap at 30 % loss): an upstream goes down after
 * `fall` consecutive bad probe rounds, and comes back only after at least `rise` consecutive
 * good rounds that also span the hold-down (the first good one at least hold-down ago), so
 * any single failure during that time restarts the count. Each fall within FWD_FLAP_WINDOW_MS
 * of its last return doubles that upstream's hold-down (up to FWD_FLAP_MAX doublings), so a
 * lossy upstream settles down instead of going back and forth; a fall after a longer time
 * up starts again from the configured hold-down. Real queries never change a state (a good
 * answer does not bring a down upstream back): they only make an upstream suspect.
 *
 * Detection bound: real queries to a dead upstream time out after the retry timeout, two of
 * them make it suspect, its probes then go out every fast interval, and the fall-th one times
 * out: down after retry + (fall - 1) x fast + probe timeout, 800 ms with the defaults at LAN
 * round trips (adaptive retry 100 ms), 1.1 s with a fixed 400 ms retry. Meanwhile the
 * in-request retry already sends each client query on to the next upstream. A link reported
 * down is down at once.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"

/* Defaults of the configuration contract (probe: interval 1s, timeout 500ms, fall 2, rise 3,
 * hold-down 5s; retry-timeout 400ms). */
#define FWD_PROBE_INTERVAL_MS  1000
#define FWD_PROBE_TIMEOUT_MS   500
#define FWD_PROBE_FALL         2
#define FWD_PROBE_RISE         3
#define FWD_PROBE_HOLD_DOWN_MS 5000
/* Probe interval while an upstream is suspect: a suspect is decided (fall probes) well
 * within a second instead of fall x interval. */
#define FWD_PROBE_FAST_MS    200
#define FWD_RETRY_TIMEOUT_MS 400
/* Adaptive retry timeout floor: below this, jitter of a loaded resolver on a LAN would cause
 * needless duplicate queries. */
#define FWD_RETRY_MIN_MS 100
/* Overall budget of one client request: stub resolvers wait 5 s (glibc) before their own
 * retry, so a late answer at 2-3 s still reaches the user; longer only ties up state. */
#define FWD_BUDGET_MS 3000
/* Passive detection: this many bad outcomes (timeout, SERVFAIL) among the last
 * FWD_PASSIVE_WINDOW real queries, within FWD_PASSIVE_SPAN_MS, make an upstream suspect. */
#define FWD_PASSIVE_WINDOW  5
#define FWD_PASSIVE_BAD     2
#define FWD_PASSIVE_SPAN_MS 1000
/* After probes clear a suspicion, passive signals are ignored this long (see upstream.c). */
#define FWD_SUSPECT_QUIET_MS 10000
/* Flap damping: a fall within this long after the last return doubles the hold-down. */
#define FWD_FLAP_WINDOW_MS 60000
#define FWD_FLAP_MAX       3
/* Members of one group: the retry sequence keeps the tried ones in a 64-bit mask. */
#define FWD_GROUP_MAX_UPSTREAMS 64
/* Queued state-change events; older ones are dropped (and counted) when the caller lags. */
#define FWD_EVENTS_MAX 64
#define FWD_REASON_LEN 96

/** Selection policy of a group. */
typedef enum {
	FWD_POLICY_ORDERED = 0, /* first usable in list order, fail back with hysteresis */
	FWD_POLICY_ROUND_ROBIN, /* rotate over the usable ones */
	FWD_POLICY_FASTEST,     /* lowest smoothed RTT among the usable ones */
} fwd_policy_t;

/**
 * Health of an upstream. NONE is up; DEGRADED answers but cannot resolve (used only when no
 * member of its group is up); LINK_DOWN and UPSTREAM_DOWN are not used.
 */
typedef enum {
	FWD_FAULT_NONE = 0,
	FWD_FAULT_LINK_DOWN,         /* the engine reported the link's device down */
	FWD_FAULT_UPSTREAM_DOWN,     /* nothing answers, not even the liveness query */
	FWD_FAULT_UPSTREAM_DEGRADED, /* alive, but the recursive probe SERVFAILs or times out */
} fwd_fault_t;

/** Outcome of one real forwarded query, as the engine saw it. */
typedef enum {
	FWD_RESULT_ANSWER = 0, /* a reply that passed the checks (any rcode but SERVFAIL) */
	FWD_RESULT_SERVFAIL,   /* a valid SERVFAIL reply: alive, maybe unable to resolve */
	FWD_RESULT_TIMEOUT,    /* no reply within the attempt's timeout (a late one may follow) */
} fwd_result_t;

/**
 * Outcome of one probe round. The engine sends the recursive cache-busting query (the nonce
 * makes the name new) and, to tell "down" from "degraded", a non-recursive liveness query.
 */
typedef enum {
	FWD_PROBE_OK = 0,     /* the recursive query was answered (NOERROR or NXDOMAIN) */
	FWD_PROBE_SERVFAIL,   /* the recursive query got SERVFAIL or REFUSED */
	FWD_PROBE_ALIVE_ONLY, /* the recursive query timed out, the liveness query answered */
	FWD_PROBE_TIMEOUT,    /* nothing answered within the probe timeout */
} fwd_probe_outcome_t;

/** One upstream of a group. Borrowed during fwd_upstreams_new(), which copies it. */
typedef struct {
	const char *name;         /* "link1": logs, events, steerctl */
	steer_sockaddr_t address; /* the recursive resolver */
	steer_sockaddr_t source;  /* where queries and probes leave from; family 0 = unset */
	const char *link;         /* device whose state the engine reports; NULL = untracked */
} fwd_upstream_def_t;

/** Probe settings of a group; a zero field takes its FWD_PROBE_* default. */
typedef struct {
	uint32_t interval_ms;
	uint32_t timeout_ms;
	uint32_t fall;
	uint32_t rise;
	uint32_t hold_down_ms;
	uint32_t fast_interval_ms; /* while suspect; capped at interval_ms */
} fwd_probe_def_t;

/** One group: a domain suffix and its upstreams in preference order. Copied by _new(). */
typedef struct {
	const char *domain; /* presentation form: "." or "corp.example." */
	fwd_policy_t policy;
	const fwd_upstream_def_t *upstreams;
	size_t n_upstreams; /* 1..FWD_GROUP_MAX_UPSTREAMS */
	fwd_probe_def_t probe;
	uint32_t retry_timeout_ms; /* 0 = FWD_RETRY_TIMEOUT_MS; the adaptive value's cap */
	bool retry_fixed;          /* true: always retry_timeout_ms; false: adaptive */
	uint32_t budget_ms;        /* 0 = FWD_BUDGET_MS */
} fwd_group_def_t;

/** A state change, reported once. */
typedef struct {
	uint32_t upstream; /* id, see fwd_upstream_stats() */
	fwd_fault_t from;
	fwd_fault_t to;
	uint64_t at_ms;
	char reason[FWD_REASON_LEN];
} fwd_upstream_event_t;

/** A probe to send now (see fwd_upstream_next_probe()). */
typedef struct {
	uint32_t upstream;   /* id */
	uint32_t seq;        /* hand back in fwd_upstream_probe_result() */
	uint64_t nonce;      /* fresh per probe, for the cache-busting label; not a secret */
	uint32_t timeout_ms; /* report FWD_PROBE_TIMEOUT / ALIVE_ONLY after this */
} fwd_probe_t;

/** Copy of one upstream's state and counters. */
typedef struct {
	const char *name;                 /* valid while the set lives */
	const char *link;                 /* NULL when untracked */
	steer_sockaddr_t address, source; /* as defined: where to send, where from */
	uint32_t group;                   /* group index */
	uint32_t member;                  /* position in the group's list */
	fwd_fault_t fault;                /* current state */
	bool usable;                      /* NONE or DEGRADED */
	bool suspect;                     /* fast probing after bad real-query outcomes */
	uint64_t since_ms; /* when the current fault began (creation time at first) */
	char reason[FWD_REASON_LEN];
	uint64_t queries, answers, timeouts, servfails;
	uint64_t probes, probe_failures;
	uint32_t srtt_us, last_rtt_us, probe_rtt_us; /* 0 = no sample yet */
	uint32_t hold_down_ms;                       /* current, flap damping included */
} fwd_upstream_stats_t;

/**
 * Where one client request stands in its retry sequence. Caller-owned, one per client query
 * (no allocation); initialise with fwd_try_init().
 */
typedef struct {
	uint64_t start_ms;
	uint64_t tried;    /* bit i: member i of the group was asked */
	uint32_t attempts; /* upstream queries sent for this request */
	uint32_t group;
} fwd_try_t;

typedef struct fwd_upstreams fwd_upstreams_t;

/** Marker for "no upstream" in ids. */
#define FWD_UPSTREAM_NONE UINT32_MAX

/**
 * Build a set from @p n group definitions (copied; the caller keeps its definitions). Ids of
 * upstreams count from 0 in definition order across groups. Every upstream starts usable and
 * unproven (its first probe round decides, so a dead one at start-up is known after one
 * probe timeout); every first probe is due at @p now_ms. @p seed feeds the probe nonces (pass
 * a random one so restarts do not repeat names; tests pass a constant). Nonces only need to
 * be new, so no upstream has the name cached: spoofing a probe reply still takes the random
 * ID and port the wire layer gives each query. Start-up path: allocates, aborts on out-of-memory.
 * Returns 0 and *out, STEER_EINVAL (bad domain or definition), STEER_EEXIST (two groups for
 * one domain) or STEER_ERANGE (no upstreams, too many, or zero groups).
 */
int fwd_upstreams_new(const fwd_group_def_t *defs, size_t n, uint64_t seed, uint64_t now_ms,
                      fwd_upstreams_t **out) STEER_NONNULL(5) STEER_WUR;

/** Free a set; NULL is fine. */
void fwd_upstreams_free(fwd_upstreams_t *set);

/** Number of upstreams (ids are 0..count-1). */
size_t fwd_upstreams_count(const fwd_upstreams_t *set) STEER_NONNULL(1);

/**
 * The group whose domain is the longest suffix of @p qname (uncompressed wire form; case does
 * not matter). Returns the group index, or STEER_ENOENT when no group covers the name.
 */
int fwd_group_find(const fwd_upstreams_t *set, const uint8_t *qname) STEER_NONNULL(1, 2);

/** Start the retry sequence of a client request for @p group, arrived at @p now_ms. */
void fwd_try_init(fwd_try_t *t, uint32_t group, uint64_t now_ms) STEER_NONNULL(1);

/**
 * The next upstream to ask for request @p t: on 0, send the query to *id and call again
 * when *timeout_ms pass without an answer (the earlier queries stay outstanding; any answer
 * ends the request). Usable members are tried once each, up ones before degraded ones, in the
 * group's policy order; the timeout is the retry timeout (adaptive: max(FWD_RETRY_MIN_MS,
 * 3 x SRTT) capped by the configured value; the configured value before any RTT sample),
 * never beyond the request's budget. Counts a query for *id.
 * Other returns:
 *  - STEER_EAGAIN: every usable member was asked; wait *timeout_ms (the rest of the budget)
 *    for the outstanding ones, *id = FWD_UPSTREAM_NONE.
 *  - STEER_ENOENT: no usable upstream at all ("no usable upstream": serve stale). *id is the
 *    best down member not behind a down link, which a caller with nothing stale may still
 *    try, with *timeout_ms (marked tried, not counted as a query; report its result as
 *    usual); FWD_UPSTREAM_NONE when every link is down.
 *  - -ETIMEDOUT: the request's budget is spent.
 */
int fwd_upstream_pick(fwd_upstreams_t *set, fwd_try_t *t, uint64_t now_ms, uint32_t *id,
                      uint32_t *timeout_ms) STEER_NONNULL(1, 2, 4, 5) STEER_WUR;

/**
 * Feed the outcome of a real query to upstream @p id (@p rtt_us: time to the reply, ignored
 * for timeouts). Updates counters and the SRTT; bad outcomes may make the upstream suspect,
 * which brings its next probe forward (fwd_upstream_next_probe() then says so). Real queries
 * never change the state on their own: probes decide. Returns 0 or STEER_EINVAL (bad id).
 */
int fwd_upstream_query_result(fwd_upstreams_t *set, uint32_t id, fwd_result_t result,
                              uint32_t rtt_us, uint64_t now_ms) STEER_NONNULL(1);

/**
 * The next probe: returns 0 and fills @p out when one is due at @p now_ms (it counts as sent;
 * call again, more may be due). Returns STEER_EAGAIN when none is due, with *due_ms the time
 * of the next one (arm a timer; any result or link change may bring it forward), or
 * STEER_ENOENT when there is nothing to probe (every link down), *due_ms = UINT64_MAX.
 * Upstreams behind a down link are not probed; idle and down ones are.
 */
int fwd_upstream_next_probe(fwd_upstreams_t *set, uint64_t now_ms, fwd_probe_t *out,
                            uint64_t *due_ms) STEER_NONNULL(1, 3, 4) STEER_WUR;

/**
 * Feed the outcome of probe @p seq of upstream @p id (@p rtt_us of the recursive query when
 * FWD_PROBE_OK). May change the state (see the file comment) and queue an event. Results for
 * an upstream behind a down link are ignored. Returns 0, or STEER_EINVAL for an id or seq
 * that was never handed out.
 */
int fwd_upstream_probe_result(fwd_upstreams_t *set, uint32_t id, uint32_t seq,
                              fwd_probe_outcome_t outcome, uint32_t rtt_us, uint64_t now_ms)
    STEER_NONNULL(1);

/**
 * The engine saw device @p link go down (carrier or oper state) or come back. Down: every
 * upstream on it is LINK_DOWN at once. Up: they become UPSTREAM_DOWN until probes prove
 * them (rise + hold-down), with a probe due now and fast probes (they are suspect) until
 * then. Returns how many upstreams changed.
 */
int fwd_upstream_link_state(fwd_upstreams_t *set, const char *link, bool up, uint64_t now_ms)
    STEER_NONNULL(1, 2);

/**
 * Move up to @p max queued state-change events, oldest first, into @p out; returns how many.
 * Each change is queued exactly once. *lost (may be NULL) receives the number dropped since
 * the last call because the queue was full.
 */
size_t fwd_upstream_events(fwd_upstreams_t *set, fwd_upstream_event_t *out, size_t max,
                           uint64_t *lost) STEER_NONNULL(1);

/** Copy the state and counters of upstream @p id. Returns 0 or STEER_EINVAL. */
int fwd_upstream_stats(const fwd_upstreams_t *set, uint32_t id, fwd_upstream_stats_t *out)
    STEER_NONNULL(1, 3);

/** Lower-case name of a fault class ("none", "link-down", "upstream-down", "degraded"). */
const char *fwd_fault_str(fwd_fault_t fault);
