/*
 * The monitor engine: runs checks (one monitor applied to one probe address) on an event loop
 * and turns their results into UP/DOWN states with fall/rise hysteresis, hold-down, slow start,
 * flap detection and a TTL cap, for the daemon to publish into the GSLB health table.
 *
 * One check per (monitor, probe address) however many answers depend on it: the caller
 * deduplicates by key. Checks survive a reload when a check with the same key and the same
 * definition is given again; new checks probe at once.
 *
 * State machine, per check:
 *   unknown   no result yet. A state restored from the state file stands in until the first
 *             result; without one, the check reads as UP (the caller can wait for the first
 *             round, see health_engine_first_round_done()).
 *   first     the first result after start (or after a restored state) decides directly, so
 *             a dead backend is never answered at start-up for fall x interval seconds.
 *   UP        goes DOWN after `fall` consecutive failures.
 *   DOWN      goes UP after `rise` consecutive successes, and then only once the successes
 *             have lasted `hold_down` ms (checked at each result, so hold-down resolves to the
 *             interval). With `slow_start`, its weight then ramps linearly to 100%.
 *
 * TTL cap (gdnsd's "monitored TTL", made explicit): how long an answer built on this state may
 * be cached. UP and steady: no cap. UP with failures: the time until it could go DOWN
 * (fall - failures) x interval. DOWN: the time until it could come back, (rise - successes) x
 * interval + what remains of the hold-down. Flapping (3 or more state changes in the last 5
 * minutes): the floor. Every cap is at least the monitor's ttl_floor.
 *
 * Metrics checks (spec type HEALTH_PROBE_METRICS) are another kind of check: no state
 * machine, they never go DOWN (they read as UP and take no part in fall/rise, TTL caps or the
 * state file). They keep the load values of their last scrapes: a value read is kept until a
 * later scrape reads it again, so a failed or garbled scrape leaves the previous values, which
 * stop being fresh `stale_after_ms` after they were read. A rate(...) is computed from the
 * previous scrape's raw number. The change callback runs when a fresh value changed, a value
 * appeared, or one went stale, not on every scrape.
 *
 * Threads: everything runs on the thread of the loop given to health_engine_new(), including
 * the change callback. The engine never blocks that loop except to write the state file
 * (at most once per 100 ms burst of state changes).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "health/probe.h"

struct ev_loop;

#define HEALTH_FLAP_WINDOW 300 /* s: state changes counted for flapping */
#define HEALTH_FLAP_COUNT  3   /* changes in the window that make a check flapping */

/* What to run. Strings are copied by the engine. */
typedef struct {
	const char *key;     /* unique: "<monitor>@<address>[:port]", the state-file key */
	const char *monitor; /* monitor name, for logs */
	health_probe_spec_t spec;
	steer_sockaddr_t addr;   /* probe address and port */
	steer_sockaddr_t source; /* probes leave from here (see health_probe_req_t); family 0 =
	                          * the kernel's choice */
	bool is_static;          /* never probed: always static_down */
	bool static_down;
	uint32_t interval_ms, timeout_ms;
	uint32_t jitter_pct; /* 0..50 */
	uint32_t fall, rise;
	uint32_t hold_down_ms, slow_start_ms;
	uint32_t ttl_floor; /* s */
	/* metrics checks: */
	uint32_t stale_after_ms;                  /* values older than this are not fresh */
	double metric_const[HEALTH_METRIC_KINDS]; /* configured numbers, for the bits in ... */
	uint8_t metric_const_mask;                /* ... this mask (always fresh) */
} health_check_def_t;

/* A check's state and statistics (steerctl monitors, metrics). */
typedef struct {
	const char *key;     /* borrowed from the engine until the next set_checks */
	const char *monitor; /* likewise */
	steer_sockaddr_t addr;
	health_probe_type_t type;
	bool is_static;
	bool known;    /* a result (or a restored state) decided the state */
	bool restored; /* the state comes from the state file, no result yet */
	bool down;
	bool flapping;
	time_t since;      /* wall clock of the last state change (or start) */
	uint32_t ok_run;   /* consecutive successes */
	uint32_t fail_run; /* consecutive failures */
	uint32_t flaps;    /* state changes since the check was created */
	uint64_t probes;   /* results so far */
	bool last_ok;
	uint32_t last_rtt_us;
	time_t last_at; /* wall clock of the last result, 0 = none */
	char last_detail[HEALTH_PROBE_DETAIL];
	uint32_t ttl_cap; /* s, 0 = none */
	unsigned ramp;    /* slow-start percent 1..99, 0 = full weight */
	/* metrics checks (type HEALTH_PROBE_METRICS), per HEALTH_METRIC_*: */
	bool is_metrics;
	double values[HEALTH_METRIC_KINDS];
	uint8_t have;                         /* bit per value ever read (or configured) */
	uint8_t fresh;                        /* of those, not older than stale_after_ms now */
	uint32_t age_ms[HEALTH_METRIC_KINDS]; /* of each value, when the status was taken */
	time_t values_at;                     /* wall clock of the newest value read, 0 = none */
} health_check_status_t;

typedef struct health_engine health_engine_t;

/* Called (on the loop's thread) when a state, TTL cap or ramp changed: publish then. */
typedef void (*health_change_cb)(void *arg);

/**
 * A new engine on @p loop, without checks. @p state_file (copied; NULL = none) is where
 * states are saved on every change and read for new checks. Returns 0 or a negative code
 * with @p err. Loop thread.
 */
int health_engine_new(struct ev_loop *loop, const char *state_file, health_change_cb cb, void *arg,
                      health_engine_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 5, 6) STEER_WUR;

/** Stop every check and free the engine (NULL is fine). Loop thread. */
void health_engine_free(health_engine_t *e);

/**
 * Replace the checks with @p defs (@p n of them; keys unique). A check whose key and
 * definition are unchanged keeps its state, counters and schedule; the others start fresh
 * (state restored from the state file when it has the key) and probe at once. Index i of the
 * status functions is defs[i] afterwards. Also changes the state file to @p state_file.
 * Loop thread.
 */
void health_engine_set_checks(health_engine_t *e, const health_check_def_t *defs, size_t n,
                              const char *state_file) STEER_NONNULL(1);

/** Number of checks. */
size_t health_engine_count(const health_engine_t *e) STEER_NONNULL(1);

/** Status of check @p i (< count) into @p out. */
void health_engine_status(const health_engine_t *e, size_t i, health_check_status_t *out)
    STEER_NONNULL(1, 3);

/** True once every check has a state (a result, a restored state, or static). */
bool health_engine_first_round_done(const health_engine_t *e) STEER_NONNULL(1);

/** The longest timeout of the checks, ms (how long a first round can take). */
uint32_t health_engine_max_timeout(const health_engine_t *e) STEER_NONNULL(1);

/** "UP", "DOWN", "UP (restored)", "unknown", "metrics" (a metrics check)... for listings. */
const char *health_check_state_str(const health_check_status_t *st) STEER_NONNULL(1);
