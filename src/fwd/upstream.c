/*
 * Upstream health and selection (see upstream.h for the model and its hysteresis). Owns the
 * group table, per-upstream state, counters and the event queue; one thread (the forwarder's)
 * calls everything here.
 */
#include "fwd/upstream.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "dns/dname.h"

/* An idle upstream's SRTT halves every this long, so `fastest` asks it again now and then
 * instead of trusting a measurement from long ago (BIND decays unselected servers too). */
#define SRTT_DECAY_MS 10000

typedef enum { ROUND_GOOD, ROUND_DEGRADED, ROUND_DEAD } round_t;

typedef struct {
	uint64_t at_ms;
	bool bad;
	bool used;
} passive_t;

typedef struct {
	char *name; /* owned */
	char *link; /* owned, NULL = untracked */
	steer_sockaddr_t address, source;
	uint32_t group, member;

	fwd_fault_t fault;
	bool proven;             /* a probe round has decided at least once */
	bool suspect;            /* fast probing until decided */
	uint64_t quiet_until_ms; /* probes cleared a suspicion: passive signals wait till then */
	uint64_t since_ms;
	char reason[FWD_REASON_LEN];

	uint64_t next_due_ms;
	uint32_t seq; /* last probe handed out */

	/* Consecutive probe rounds of each kind and when the current streak began. */
	uint32_t good, alive, bad, dead;
	uint64_t good_since_ms, alive_since_ms;

	uint32_t flaps; /* hold-down doublings */
	bool returned;  /* last_return_ms is valid */
	uint64_t last_return_ms;

	passive_t win[FWD_PASSIVE_WINDOW];
	unsigned win_pos;

	uint32_t srtt_us, last_rtt_us, probe_rtt_us;
	uint64_t rtt_at_ms;
	uint64_t queries, answers, timeouts, servfails, probes, probe_failures;
} up_t;

typedef struct {
	uint8_t domain[DNS_DNAME_MAXLEN]; /* lowercase wire form */
	fwd_policy_t policy;
	uint32_t first, n;     /* ids first .. first + n - 1 */
	fwd_probe_def_t probe; /* defaults filled in */
	uint32_t retry_ms;
	bool retry_fixed;
	uint32_t budget_ms;
	uint32_t rr; /* round-robin cursor */
} group_t;

struct fwd_upstreams {
	group_t *groups;
	size_t n_groups;
	up_t *ups;
	size_t n_ups;
	uint64_t seed, nonces;
	fwd_upstream_event_t ev[FWD_EVENTS_MAX];
	size_t ev_head, ev_count;
	uint64_t ev_lost;
};

const char *fwd_fault_str(fwd_fault_t fault)
{
	switch (fault) {
	case FWD_FAULT_NONE:
		return "none";
	case FWD_FAULT_LINK_DOWN:
		return "link-down";
	case FWD_FAULT_UPSTREAM_DOWN:
		return "upstream-down";
	case FWD_FAULT_UPSTREAM_DEGRADED:
		return "degraded";
	}
	return "?";
}

static bool usable(const up_t *u)
{
	return u->fault == FWD_FAULT_NONE || u->fault == FWD_FAULT_UPSTREAM_DEGRADED;
}

static uint32_t or_default(uint32_t v, uint32_t def)
{
	return v ? v : def;
}

/* splitmix64: a well-mixed sequence from a counter, so probe names cannot be guessed from
 * earlier ones without the seed. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint32_t hold_down(const fwd_upstreams_t *set, const up_t *u)
{
	return set->groups[u->group].probe.hold_down_ms << u->flaps;
}

static void push_event(fwd_upstreams_t *set, const fwd_upstream_event_t *e)
{
	if (set->ev_count == FWD_EVENTS_MAX) {
		set->ev_head = (set->ev_head + 1) % FWD_EVENTS_MAX;
		set->ev_count--;
		set->ev_lost++;
	}
	set->ev[(set->ev_head + set->ev_count) % FWD_EVENTS_MAX] = *e;
	set->ev_count++;
}

STEER_PRINTF(5, 6)
static void set_fault(fwd_upstreams_t *set, up_t *u, fwd_fault_t to, uint64_t now_ms,
                      const char *fmt, ...)
{
	if (u->fault == to)
		return;
	if (u->fault == FWD_FAULT_NONE) {
		/* Leaving up soon after coming back is a flap: lengthen the next hold-down. */
		if (u->returned && now_ms - u->last_return_ms < FWD_FLAP_WINDOW_MS) {
			if (u->flaps < FWD_FLAP_MAX)
				u->flaps++;
		} else {
			u->flaps = 0;
		}
	}
	if (to == FWD_FAULT_NONE) {
		u->returned = true;
		u->last_return_ms = now_ms;
	}
	fwd_upstream_event_t e = {
	    .upstream = (uint32_t)(u - set->ups), .from = u->fault, .to = to, .at_ms = now_ms};
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e.reason, sizeof(e.reason), fmt, ap);
	va_end(ap);
	memcpy(u->reason, e.reason, sizeof(u->reason));
	u->fault = to;
	u->since_ms = now_ms;
	u->suspect = false;
	push_event(set, &e);
}

static int group_init(group_t *g, const fwd_group_def_t *d, uint32_t first)
{
	if (!d->domain || !d->upstreams)
		return STEER_EINVAL;
	if (d->n_upstreams == 0 || d->n_upstreams > FWD_GROUP_MAX_UPSTREAMS)
		return STEER_ERANGE;
	if (d->policy != FWD_POLICY_ORDERED && d->policy != FWD_POLICY_ROUND_ROBIN &&
	    d->policy != FWD_POLICY_FASTEST)
		return STEER_EINVAL;
	if (dname_from_str(d->domain, g->domain) < 0)
		return STEER_EINVAL;
	dname_lower(g->domain);
	g->policy = d->policy;
	g->first = first;
	g->n = (uint32_t)d->n_upstreams;
	g->probe.interval_ms = or_default(d->probe.interval_ms, FWD_PROBE_INTERVAL_MS);
	g->probe.timeout_ms = or_default(d->probe.timeout_ms, FWD_PROBE_TIMEOUT_MS);
	g->probe.fall = or_default(d->probe.fall, FWD_PROBE_FALL);
	g->probe.rise = or_default(d->probe.rise, FWD_PROBE_RISE);
	g->probe.hold_down_ms = or_default(d->probe.hold_down_ms, FWD_PROBE_HOLD_DOWN_MS);
	g->probe.fast_interval_ms = or_default(d->probe.fast_interval_ms, FWD_PROBE_FAST_MS);
	if (g->probe.fast_interval_ms > g->probe.interval_ms)
		g->probe.fast_interval_ms = g->probe.interval_ms;
	/* The hold-down is shifted by up to FWD_FLAP_MAX; keep that within 32 bits. */
	if (g->probe.hold_down_ms > (UINT32_MAX >> FWD_FLAP_MAX))
		return STEER_ERANGE;
	g->retry_ms = or_default(d->retry_timeout_ms, FWD_RETRY_TIMEOUT_MS);
	g->retry_fixed = d->retry_fixed;
	g->budget_ms = or_default(d->budget_ms, FWD_BUDGET_MS);
	g->rr = 0;
	return 0;
}

static void up_init(up_t *u, const fwd_upstream_def_t *d, uint32_t group, uint32_t member,
                    uint64_t now_ms)
{
	memset(u, 0, sizeof(*u));
	u->name = xstrdup(d->name);
	u->link = xstrdup(d->link);
	u->address = d->address;
	u->source = d->source;
	u->group = group;
	u->member = member;
	u->fault = FWD_FAULT_NONE;
	u->since_ms = now_ms;
	snprintf(u->reason, sizeof(u->reason), "not probed yet");
	u->next_due_ms = now_ms;
}

int fwd_upstreams_new(const fwd_group_def_t *defs, size_t n, uint64_t seed, uint64_t now_ms,
                      fwd_upstreams_t **out)
{
	int ret = 0;
	fwd_upstreams_t *set = NULL;
	*out = NULL;
	if (n == 0 || !defs)
		return STEER_ERANGE;
	set = xcalloc(1, sizeof(*set));
	set->groups = xcalloc(n, sizeof(*set->groups));
	set->n_groups = n;
	set->seed = seed;
	for (size_t i = 0; i < n; i++) {
		ret = group_init(&set->groups[i], &defs[i], (uint32_t)set->n_ups);
		if (ret < 0)
			goto out;
		for (size_t j = 0; j < i; j++) {
			if (dname_equal(set->groups[j].domain, set->groups[i].domain)) {
				ret = STEER_EEXIST;
				goto out;
			}
		}
		for (size_t j = 0; j < defs[i].n_upstreams; j++) {
			if (!defs[i].upstreams[j].name) {
				ret = STEER_EINVAL;
				goto out;
			}
		}
		set->n_ups += defs[i].n_upstreams;
	}
	set->ups = xcalloc(set->n_ups, sizeof(*set->ups));
	for (size_t i = 0; i < n; i++) {
		const group_t *g = &set->groups[i];
		for (uint32_t j = 0; j < g->n; j++)
			up_init(&set->ups[g->first + j], &defs[i].upstreams[j], (uint32_t)i, j,
			        now_ms);
	}
	*out = set;
	set = NULL;
out:
	fwd_upstreams_free(set);
	return ret;
}

void fwd_upstreams_free(fwd_upstreams_t *set)
{
	if (!set)
		return;
	for (size_t i = 0; set->ups && i < set->n_ups; i++) {
		free(set->ups[i].name);
		free(set->ups[i].link);
	}
	free(set->ups);
	free(set->groups);
	free(set);
}

size_t fwd_upstreams_count(const fwd_upstreams_t *set)
{
	return set->n_ups;
}

int fwd_group_find(const fwd_upstreams_t *set, const uint8_t *qname)
{
	/* From the full name towards the root, so the first match is the longest suffix. */
	for (const uint8_t *name = qname; name; name = dname_parent(name)) {
		for (size_t i = 0; i < set->n_groups; i++) {
			if (dname_equal(name, set->groups[i].domain))
				return (int)i;
		}
	}
	return STEER_ENOENT;
}

void fwd_try_init(fwd_try_t *t, uint32_t group, uint64_t now_ms)
{
	*t = (fwd_try_t){.start_ms = now_ms, .group = group};
}

static uint32_t retry_timeout(const group_t *g, const up_t *u)
{
	if (g->retry_fixed || u->srtt_us == 0)
		return g->retry_ms;
	uint64_t ms = (3ULL * u->srtt_us + 999) / 1000;
	if (ms < FWD_RETRY_MIN_MS)
		ms = FWD_RETRY_MIN_MS;
	return ms < g->retry_ms ? (uint32_t)ms : g->retry_ms;
}

static uint64_t decayed_srtt(const up_t *u, uint64_t now_ms)
{
	uint64_t halvings = (now_ms - u->rtt_at_ms) / SRTT_DECAY_MS;
	return halvings >= 32 ? 0 : u->srtt_us >> halvings;
}

/* The member to ask among the untried ones with fault @p tier, or -1. */
static int choose(fwd_upstreams_t *set, group_t *g, const fwd_try_t *t, fwd_fault_t tier,
                  uint64_t now_ms)
{
	int best = -1;
	uint64_t best_rtt = UINT64_MAX;
	for (uint32_t k = 0; k < g->n; k++) {
		uint32_t m = g->policy == FWD_POLICY_ROUND_ROBIN ? (g->rr + k) % g->n : k;
		const up_t *u = &set->ups[g->first + m];
		if (u->fault != tier || (t->tried >> m & 1))
			continue;
		if (g->policy != FWD_POLICY_FASTEST)
			return (int)m;
		uint64_t rtt = decayed_srtt(u, now_ms);
		if (rtt < best_rtt) {
			best_rtt = rtt;
			best = (int)m;
		}
	}
	return best;
}

/* For a caller with nothing stale: the first member, in list order, not behind a down link. */
static int last_resort(const fwd_upstreams_t *set, const group_t *g, const fwd_try_t *t)
{
	for (uint32_t m = 0; m < g->n; m++) {
		const up_t *u = &set->ups[g->first + m];
		if (u->fault != FWD_FAULT_LINK_DOWN && !(t->tried >> m & 1))
			return (int)m;
	}
	return -1;
}

int fwd_upstream_pick(fwd_upstreams_t *set, fwd_try_t *t, uint64_t now_ms, uint32_t *id,
                      uint32_t *timeout_ms)
{
	*id = FWD_UPSTREAM_NONE;
	*timeout_ms = 0;
	if (t->group >= set->n_groups)
		return STEER_EINVAL;
	group_t *g = &set->groups[t->group];
	uint64_t elapsed = now_ms - t->start_ms;
	if (elapsed >= g->budget_ms)
		return -ETIMEDOUT;
	uint32_t remaining = (uint32_t)(g->budget_ms - elapsed);

	int m = choose(set, g, t, FWD_FAULT_NONE, now_ms);
	if (m < 0)
		m = choose(set, g, t, FWD_FAULT_UPSTREAM_DEGRADED, now_ms);
	if (m >= 0) {
		up_t *u = &set->ups[g->first + (uint32_t)m];
		if (g->policy == FWD_POLICY_ROUND_ROBIN && t->attempts == 0)
			g->rr = ((uint32_t)m + 1) % g->n;
		t->tried |= 1ULL << m;
		t->attempts++;
		u->queries++;
		uint32_t rt = retry_timeout(g, u);
		*id = g->first + (uint32_t)m;
		*timeout_ms = rt < remaining ? rt : remaining;
		return 0;
	}
	for (uint32_t k = 0; k < g->n; k++) {
		if (usable(&set->ups[g->first + k])) {
			*timeout_ms = remaining;
			return STEER_EAGAIN;
		}
	}
	m = last_resort(set, g, t);
	if (m >= 0) {
		t->tried |= 1ULL << m;
		*id = g->first + (uint32_t)m;
		*timeout_ms = g->retry_ms < remaining ? g->retry_ms : remaining;
	}
	return STEER_ENOENT;
}

static void rtt_sample(up_t *u, uint32_t rtt_us, uint64_t now_ms)
{
	if (rtt_us == 0)
		rtt_us = 1;
	if (u->srtt_us == 0) {
		u->srtt_us = rtt_us;
	} else {
		/* TCP's smoothing (RFC 6298, alpha 1/8). */
		int64_t diff = (int64_t)rtt_us - (int64_t)u->srtt_us;
		u->srtt_us = (uint32_t)((int64_t)u->srtt_us + diff / 8);
		if (u->srtt_us == 0)
			u->srtt_us = 1;
	}
	u->rtt_at_ms = now_ms;
}

/*
 * Remember a real query's outcome; enough bad ones in a short time make the upstream suspect
 * and bring its next probe forward. A degraded upstream SERVFAILs by definition, so for it
 * only timeouts (it may be dying altogether) count as bad.
 */
static void passive_push(up_t *u, fwd_result_t result, uint64_t now_ms)
{
	bool bad = result == FWD_RESULT_TIMEOUT ||
	           (result == FWD_RESULT_SERVFAIL && u->fault == FWD_FAULT_NONE);
	u->win[u->win_pos] = (passive_t){.at_ms = now_ms, .bad = bad, .used = true};
	u->win_pos = (u->win_pos + 1) % FWD_PASSIVE_WINDOW;
	if (!bad || u->suspect || !usable(u) || now_ms < u->quiet_until_ms)
		return;
	unsigned n = 0;
	for (unsigned i = 0; i < FWD_PASSIVE_WINDOW; i++) {
		const passive_t *p = &u->win[i];
		if (p->used && p->bad && now_ms - p->at_ms <= FWD_PASSIVE_SPAN_MS)
			n++;
	}
	if (n < FWD_PASSIVE_BAD)
		return;
	u->suspect = true;
	if (u->next_due_ms > now_ms)
		u->next_due_ms = now_ms;
}

int fwd_upstream_query_result(fwd_upstreams_t *set, uint32_t id, fwd_result_t result,
                              uint32_t rtt_us, uint64_t now_ms)
{
	if (id >= set->n_ups)
		return STEER_EINVAL;
	up_t *u = &set->ups[id];
	switch (result) {
	case FWD_RESULT_ANSWER:
		u->answers++;
		u->last_rtt_us = rtt_us;
		rtt_sample(u, rtt_us, now_ms);
		passive_push(u, result, now_ms);
		return 0;
	case FWD_RESULT_SERVFAIL:
		u->servfails++;
		u->last_rtt_us = rtt_us;
		rtt_sample(u, rtt_us, now_ms);
		passive_push(u, result, now_ms);
		return 0;
	case FWD_RESULT_TIMEOUT:
		u->timeouts++;
		/* A timeout is a sample at the cap, so `fastest` and the adaptive timeout back
		 * off a slow upstream rather than keep trusting its old SRTT. */
		rtt_sample(u, set->groups[u->group].retry_ms * 1000U, now_ms);
		passive_push(u, result, now_ms);
		return 0;
	}
	return STEER_EINVAL;
}

int fwd_upstream_next_probe(fwd_upstreams_t *set, uint64_t now_ms, fwd_probe_t *out,
                            uint64_t *due_ms)
{
	up_t *next = NULL;
	for (size_t i = 0; i < set->n_ups; i++) {
		up_t *u = &set->ups[i];
		if (u->fault == FWD_FAULT_LINK_DOWN)
			continue;
		if (!next || u->next_due_ms < next->next_due_ms)
			next = u;
	}
	if (!next) {
		*due_ms = UINT64_MAX;
		return STEER_ENOENT;
	}
	*due_ms = next->next_due_ms;
	if (next->next_due_ms > now_ms)
		return STEER_EAGAIN;
	const fwd_probe_def_t *p = &set->groups[next->group].probe;
	next->seq++;
	next->probes++;
	/* From now, not from the due time: a late loop must not send a burst to catch up. */
	next->next_due_ms = now_ms + (next->suspect ? p->fast_interval_ms : p->interval_ms);
	*out = (fwd_probe_t){.upstream = (uint32_t)(next - set->ups),
	                     .seq = next->seq,
	                     .nonce = mix64(set->seed ^ mix64(++set->nonces)),
	                     .timeout_ms = p->timeout_ms};
	return 0;
}

static const char *outcome_text(fwd_probe_outcome_t o)
{
	switch (o) {
	case FWD_PROBE_OK:
		return "answered";
	case FWD_PROBE_SERVFAIL:
		return "alive but cannot resolve (SERVFAIL)";
	case FWD_PROBE_ALIVE_ONLY:
		return "alive but the recursive probe timed out";
	case FWD_PROBE_TIMEOUT:
		return "no reply";
	}
	return "?";
}

static round_t count_round(up_t *u, fwd_probe_outcome_t o, uint64_t now_ms)
{
	round_t r = o == FWD_PROBE_OK        ? ROUND_GOOD
	            : o == FWD_PROBE_TIMEOUT ? ROUND_DEAD
	                                     : ROUND_DEGRADED;
	if (r == ROUND_GOOD) {
		if (u->good++ == 0)
			u->good_since_ms = now_ms;
		u->bad = u->dead = 0;
	} else {
		u->good = 0;
		u->bad++;
		u->probe_failures++;
	}
	if (r == ROUND_DEAD) {
		u->alive = 0;
		u->dead++;
	} else {
		if (u->alive++ == 0)
			u->alive_since_ms = now_ms;
		u->dead = 0;
	}
	return r;
}

/*
 * Probes overruled the passive signal. Real queries can keep timing out on a healthy upstream
 * (slow authoritative servers behind it, or a degraded one that hangs), so stay deaf to them
 * for a while rather than fast-probe for ever; a real death is then still found by the
 * normal interval.
 */
static void clear_suspect(up_t *u, uint64_t now_ms)
{
	u->suspect = false;
	u->quiet_until_ms = now_ms + FWD_SUSPECT_QUIET_MS;
}

/* Apply the probe counters to the state (the rules in upstream.h). */
static void decide(fwd_upstreams_t *set, up_t *u, fwd_probe_outcome_t o, uint64_t now_ms)
{
	const fwd_probe_def_t *p = &set->groups[u->group].probe;
	uint64_t hd = hold_down(set, u);
	switch (u->fault) {
	case FWD_FAULT_NONE:
		if (u->bad >= p->fall) {
			fwd_fault_t to = u->dead >= p->fall ? FWD_FAULT_UPSTREAM_DOWN
			                                    : FWD_FAULT_UPSTREAM_DEGRADED;
			set_fault(set, u, to, now_ms, "%u probes failed, last: %s", u->bad,
			          outcome_text(o));
		} else if (u->suspect && u->good >= p->rise) {
			clear_suspect(u, now_ms);
		}
		return;
	case FWD_FAULT_UPSTREAM_DEGRADED:
		if (u->dead >= p->fall)
			set_fault(set, u, FWD_FAULT_UPSTREAM_DOWN, now_ms, "%u probes got no reply",
			          u->dead);
		else if (u->good >= p->rise && now_ms - u->good_since_ms >= hd)
			set_fault(set, u, FWD_FAULT_NONE, now_ms, "%u good probes in %llu ms",
			          u->good, (unsigned long long)(now_ms - u->good_since_ms));
		else if (u->suspect && u->alive >= p->rise)
			clear_suspect(u, now_ms); /* still degraded, but not dying */
		return;
	case FWD_FAULT_UPSTREAM_DOWN:
		if (u->good >= p->rise && now_ms - u->good_since_ms >= hd)
			set_fault(set, u, FWD_FAULT_NONE, now_ms, "%u good probes in %llu ms",
			          u->good, (unsigned long long)(now_ms - u->good_since_ms));
		else if (u->alive >= p->rise && now_ms - u->alive_since_ms >= hd)
			set_fault(set, u, FWD_FAULT_UPSTREAM_DEGRADED, now_ms,
			          "alive for %u probes, last: %s", u->alive, outcome_text(o));
		return;
	case FWD_FAULT_LINK_DOWN:
		return;
	}
}

/*
 * A recovering upstream returns at the first good round at least hold-down after its first
 * good one; probe right then rather than at the next interval, so failback takes hold-down
 * plus the time to see the recovery, not up to one interval more.
 */
static void probe_at_hold_down_end(const fwd_upstreams_t *set, up_t *u, uint64_t now_ms)
{
	if (u->fault == FWD_FAULT_NONE || u->good == 0)
		return;
	uint64_t ready = u->good_since_ms + hold_down(set, u);
	if (ready > now_ms && ready < u->next_due_ms &&
	    u->good + 1 >= set->groups[u->group].probe.rise)
		u->next_due_ms = ready;
}

int fwd_upstream_probe_result(fwd_upstreams_t *set, uint32_t id, uint32_t seq,
                              fwd_probe_outcome_t outcome, uint32_t rtt_us, uint64_t now_ms)
{
	if (id >= set->n_ups || seq == 0 || seq > set->ups[id].seq)
		return STEER_EINVAL;
	if (outcome != FWD_PROBE_OK && outcome != FWD_PROBE_SERVFAIL &&
	    outcome != FWD_PROBE_ALIVE_ONLY && outcome != FWD_PROBE_TIMEOUT)
		return STEER_EINVAL;
	up_t *u = &set->ups[id];
	if (u->fault == FWD_FAULT_LINK_DOWN)
		return 0;
	round_t r = count_round(u, outcome, now_ms);
	if (r == ROUND_GOOD)
		u->probe_rtt_us = rtt_us;
	if (!u->proven) {
		/* The first round decides, as in the health monitors: a dead upstream at
		 * start-up is out after one probe timeout, not fall of them. */
		u->proven = true;
		if (r != ROUND_GOOD)
			set_fault(set, u,
			          r == ROUND_DEAD ? FWD_FAULT_UPSTREAM_DOWN
			                          : FWD_FAULT_UPSTREAM_DEGRADED,
			          now_ms, "first probe: %s", outcome_text(outcome));
		return 0;
	}
	decide(set, u, outcome, now_ms);
	probe_at_hold_down_end(set, u, now_ms);
	return 0;
}

int fwd_upstream_link_state(fwd_upstreams_t *set, const char *link, bool up, uint64_t now_ms)
{
	int changed = 0;
	for (size_t i = 0; i < set->n_ups; i++) {
		up_t *u = &set->ups[i];
		if (!u->link || strcmp(u->link, link) != 0)
			continue;
		if (!up && u->fault != FWD_FAULT_LINK_DOWN) {
			set_fault(set, u, FWD_FAULT_LINK_DOWN, now_ms, "link %s down", link);
			changed++;
		} else if (up && u->fault == FWD_FAULT_LINK_DOWN) {
			u->good = u->alive = u->bad = u->dead = 0;
			u->proven = true;
			u->next_due_ms = now_ms;
			set_fault(set, u, FWD_FAULT_UPSTREAM_DOWN, now_ms,
			          "link %s up, upstream not yet proven", link);
			/* Probe at the fast interval until proven: the routes over a link that
			 * just came back may lag its carrier, and a first probe lost to that must
			 * not cost a whole interval of the failback. */
			u->suspect = true;
			changed++;
		}
	}
	return changed;
}

size_t fwd_upstream_events(fwd_upstreams_t *set, fwd_upstream_event_t *out, size_t max,
                           uint64_t *lost)
{
	size_t n = 0;
	while (n < max && set->ev_count > 0) {
		out[n++] = set->ev[set->ev_head];
		set->ev_head = (set->ev_head + 1) % FWD_EVENTS_MAX;
		set->ev_count--;
	}
	if (lost) {
		*lost = set->ev_lost;
		set->ev_lost = 0;
	}
	return n;
}

int fwd_upstream_stats(const fwd_upstreams_t *set, uint32_t id, fwd_upstream_stats_t *out)
{
	if (id >= set->n_ups)
		return STEER_EINVAL;
	const up_t *u = &set->ups[id];
	*out = (fwd_upstream_stats_t){.name = u->name,
	                              .link = u->link,
	                              .address = u->address,
	                              .source = u->source,
	                              .group = u->group,
	                              .member = u->member,
	                              .fault = u->fault,
	                              .usable = usable(u),
	                              .suspect = u->suspect,
	                              .since_ms = u->since_ms,
	                              .queries = u->queries,
	                              .answers = u->answers,
	                              .timeouts = u->timeouts,
	                              .servfails = u->servfails,
	                              .probes = u->probes,
	                              .probe_failures = u->probe_failures,
	                              .srtt_us = u->srtt_us,
	                              .last_rtt_us = u->last_rtt_us,
	                              .probe_rtt_us = u->probe_rtt_us,
	                              .hold_down_ms = hold_down(set, u)};
	memcpy(out->reason, u->reason, sizeof(out->reason));
	return 0;
}
