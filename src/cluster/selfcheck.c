/*
 * The announce/withdraw decision (see selfcheck.h). Only the cluster thread calls it, under
 * the cluster's lock.
 */
#include "cluster/selfcheck.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void cluster_selfcheck_init(cluster_selfcheck_t *sc, const cluster_selfcheck_conf_t *conf)
{
	memset(sc, 0, sizeof(*sc));
	sc->conf = *conf;
	if (sc->conf.fall == 0)
		sc->conf.fall = 1;
	if (sc->conf.rise == 0)
		sc->conf.rise = 1;
	sc->state = CLUSTER_STARTING;
	snprintf(sc->reason, sizeof(sc->reason), "starting: waiting for %u good rounds",
	         sc->conf.rise);
}

bool cluster_selfcheck_announce(const cluster_selfcheck_t *sc)
{
	return sc->state == CLUSTER_ANNOUNCED;
}

uint64_t cluster_selfcheck_hold_left(const cluster_selfcheck_t *sc, uint64_t now_ms)
{
	if (sc->state != CLUSTER_WITHDRAWN || sc->hold_until_ms <= now_ms)
		return 0;
	return sc->hold_until_ms - now_ms;
}

static bool set_state(cluster_selfcheck_t *sc, cluster_state_t state, const char *fmt, ...)
    STEER_PRINTF(3, 4);

static bool set_state(cluster_selfcheck_t *sc, cluster_state_t state, const char *fmt, ...)
{
	bool was = cluster_selfcheck_announce(sc);
	sc->state = state;
	if (was != cluster_selfcheck_announce(sc))
		sc->transitions++;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sc->reason, sizeof(sc->reason), fmt, ap);
	va_end(ap);
	return true;
}

/* The verdict turned bad: announcing waits for rise good rounds and the hold-down. */
static void verdict_bad(cluster_selfcheck_t *sc, uint64_t now_ms)
{
	sc->healthy = false;
	sc->good_rounds = 0;
	sc->hold_until_ms = now_ms + sc->conf.hold_down_ms;
}

static void count_round(cluster_selfcheck_t *sc, uint64_t now_ms, bool ok)
{
	if (ok) {
		sc->bad_rounds = 0;
		if (sc->good_rounds < UINT32_MAX)
			sc->good_rounds++;
		if (!sc->healthy && sc->good_rounds >= sc->conf.rise)
			sc->healthy = true;
		return;
	}
	sc->good_rounds = 0;
	if (sc->bad_rounds < UINT32_MAX)
		sc->bad_rounds++;
	if (sc->healthy && sc->bad_rounds >= sc->conf.fall)
		verdict_bad(sc, now_ms);
}

static bool drain_round(cluster_selfcheck_t *sc, uint64_t now_ms, bool quiet)
{
	if (sc->state != CLUSTER_DRAINING)
		return false;
	if (!quiet)
		sc->quiet_since_ms = now_ms;
	if (now_ms - sc->quiet_since_ms >= sc->conf.drain_quiet_ms)
		return set_state(sc, CLUSTER_DRAINED, "no client query for %llu ms",
		                 (unsigned long long)(now_ms - sc->quiet_since_ms));
	if (now_ms >= sc->drain_deadline_ms) {
		sc->drain_timed_out = true;
		return set_state(sc, CLUSTER_DRAINED,
		                 "timeout after %llu ms: client queries still arriving",
		                 (unsigned long long)(now_ms - sc->drain_start_ms));
	}
	return false;
}

bool cluster_selfcheck_round(cluster_selfcheck_t *sc, uint64_t now_ms, bool ok, const char *why,
                             bool quiet)
{
	count_round(sc, now_ms, ok);
	switch (sc->state) {
	case CLUSTER_STARTING:
		if (sc->healthy)
			return set_state(sc, CLUSTER_ANNOUNCED, "self-check good for %u rounds",
			                 sc->good_rounds);
		return false;
	case CLUSTER_ANNOUNCED:
		if (!sc->healthy)
			return set_state(sc, CLUSTER_WITHDRAWN, "%s",
			                 why ? why : "self-check failed");
		return false;
	case CLUSTER_WITHDRAWN:
		if (!sc->healthy || now_ms < sc->hold_until_ms)
			return false;
		if (sc->hold_until_ms && sc->conf.hold_down_ms)
			return set_state(sc, CLUSTER_ANNOUNCED,
			                 "self-check good for %u rounds, hold-down of %u ms over",
			                 sc->good_rounds, sc->conf.hold_down_ms);
		return set_state(sc, CLUSTER_ANNOUNCED, "self-check good for %u rounds",
		                 sc->good_rounds);
	case CLUSTER_DRAINING:
		return drain_round(sc, now_ms, quiet);
	case CLUSTER_DRAINED:
		return false;
	}
	return false;
}

bool cluster_selfcheck_keeper_withdrew(cluster_selfcheck_t *sc, uint64_t now_ms, const char *msg)
{
	verdict_bad(sc, now_ms);
	sc->bad_rounds = 0;
	if (sc->state == CLUSTER_DRAINING || sc->state == CLUSTER_DRAINED)
		return false;
	if (sc->state == CLUSTER_WITHDRAWN)
		return false;
	return set_state(sc, CLUSTER_WITHDRAWN, "keeper: %s", msg);
}

bool cluster_selfcheck_drain(cluster_selfcheck_t *sc, uint64_t now_ms, unsigned timeout_ms)
{
	bool again = sc->state == CLUSTER_DRAINING;
	sc->drain_start_ms = now_ms;
	sc->quiet_since_ms = now_ms;
	sc->drain_deadline_ms = now_ms + (timeout_ms ? timeout_ms : sc->conf.drain_timeout_ms);
	sc->drain_timed_out = false;
	if (again)
		return false;
	return set_state(sc, CLUSTER_DRAINING, "drain requested");
}

bool cluster_selfcheck_undrain(cluster_selfcheck_t *sc, uint64_t now_ms)
{
	(void)now_ms;
	if (sc->state != CLUSTER_DRAINING && sc->state != CLUSTER_DRAINED)
		return false;
	sc->drain_timed_out = false;
	if (sc->healthy) {
		sc->hold_until_ms = 0;
		return set_state(sc, CLUSTER_ANNOUNCED, "undrain: self-check good");
	}
	return set_state(sc, CLUSTER_WITHDRAWN,
	                 "undrain: waiting for the self-check (%u of %u good rounds)",
	                 sc->good_rounds, sc->conf.rise);
}

/* Declared in cluster.h; it lives here with the states it names, so the decision and its
 * tests need nothing else of the cluster library. */
const char *cluster_state_name(cluster_state_t state)
{
	switch (state) {
	case CLUSTER_STARTING:
		return "starting";
	case CLUSTER_ANNOUNCED:
		return "announced";
	case CLUSTER_WITHDRAWN:
		return "withdrawn";
	case CLUSTER_DRAINING:
		return "draining";
	case CLUSTER_DRAINED:
		return "drained";
	}
	return "unknown";
}
