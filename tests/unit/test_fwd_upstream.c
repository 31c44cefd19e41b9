/*
 * Upstream health and selection, driven like Unbound's replay tests: a scenario harness
 * (sim_*) plays a client load, scripted upstreams and the probe engine against a fake clock
 * in 1 ms steps, and the scenarios assert on state-change events, detection and failback
 * times, where attempt-0 traffic goes and what clients would have seen. Add a scenario by
 * scripting sim_upstream_t fields between sim_run() calls.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "dns/dname.h"
#include "fwd/upstream.h"
#include "unit.h"

/* ---- the harness ------------------------------------------------------------------------ */

/* What one scripted upstream (and the link in front of it) does with what it is sent. */
typedef struct {
	bool link_up;          /* the device; the scenario also calls sim_link() */
	bool alive;            /* answers at all */
	bool resolves;         /* recursion works; false: SERVFAIL (or hang, below) */
	bool cutoff_hangs;     /* !resolves: recursive queries time out instead of SERVFAIL */
	unsigned loss_pct;     /* chance an exchange is lost, per query or probe round */
	uint32_t rtt_ms;       /* reply time of a real query */
	uint32_t probe_rtt_ms; /* reply time of the recursive probe */
} sim_upstream_t;

enum { EV_REPLY, EV_TIMER, EV_PROBE };

typedef struct {
	uint64_t at;
	int kind;
	uint32_t req;
	uint64_t serial; /* of the request, so replies to finished requests are recognised */
	uint32_t gen;    /* of the request's timer */
	uint32_t up, seq;
	fwd_probe_outcome_t po;
	fwd_result_t res;
	uint64_t sent;
	int next;
} sim_ev_t;

typedef struct {
	bool active;
	fwd_try_t t;
	uint64_t serial;
	uint32_t gen;
	uint32_t cur; /* upstream of the latest attempt */
} sim_req_t;

#define SIM_WHEEL 8192 /* ms; more than any delay used (the budget is 3 s) */
#define SIM_EVS   65536
#define SIM_REQS  8192
#define SIM_UPS   8
#define SIM_EVLOG 512

typedef struct {
	fwd_upstreams_t *set;
	uint64_t now;
	uint64_t rng;
	sim_upstream_t up[SIM_UPS];
	unsigned qps; /* client queries per second into group `group`; 0 = none */
	uint32_t group;

	int wheel[SIM_WHEEL];
	sim_ev_t evs[SIM_EVS];
	int free_ev;
	sim_req_t req[SIM_REQS];
	uint64_t serials;

	/* What clients saw. */
	unsigned answered, failed, late, servfailed;
	/* Attempt-0 choices: the latest, how often it changed, and counts per upstream. */
	uint32_t first;
	unsigned first_changes;
	uint64_t first_at; /* when `first` last changed */
	unsigned first_count[SIM_UPS];
	fwd_upstream_event_t log[SIM_EVLOG];
	size_t n_log;
} sim_t;

static uint64_t sim_rand(sim_t *s)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return s->rng;
}

static bool sim_lost(sim_t *s, const sim_upstream_t *u)
{
	return u->loss_pct && sim_rand(s) % 100 < u->loss_pct;
}

static sim_ev_t *sim_at(sim_t *s, uint64_t at, int kind)
{
	int i = s->free_ev;
	if (i < 0) {
		printf("sim: event pool exhausted\n");
		abort();
	}
	sim_ev_t *e = &s->evs[i];
	s->free_ev = e->next;
	*e = (sim_ev_t){.at = at, .kind = kind};
	e->next = s->wheel[at % SIM_WHEEL];
	s->wheel[at % SIM_WHEEL] = i;
	return e;
}

static sim_t *sim_new(const fwd_group_def_t *defs, size_t n, uint64_t seed)
{
	sim_t *s = calloc(1, sizeof(*s));
	s->rng = seed * 2654435761ULL + 1;
	s->now = 0;
	s->first = FWD_UPSTREAM_NONE;
	for (int i = 0; i < SIM_WHEEL; i++)
		s->wheel[i] = -1;
	for (int i = 0; i < SIM_EVS; i++)
		s->evs[i].next = i + 1 < SIM_EVS ? i + 1 : -1;
	s->free_ev = 0;
	for (int i = 0; i < SIM_UPS; i++)
		s->up[i] = (sim_upstream_t){.link_up = true,
		                            .alive = true,
		                            .resolves = true,
		                            .rtt_ms = 1,
		                            .probe_rtt_ms = 5};
	s->qps = 500;
	int ret = fwd_upstreams_new(defs, n, seed, 0, &s->set);
	CHECK(ret == 0, "sim: fwd_upstreams_new: %d", ret);
	if (ret < 0)
		abort();
	return s;
}

static void sim_free(sim_t *s)
{
	fwd_upstreams_free(s->set);
	free(s);
}

static void sim_send_query(sim_t *s, uint32_t r, uint32_t id)
{
	const sim_upstream_t *u = &s->up[id];
	s->req[r].cur = id;
	if (!u->link_up || !u->alive || sim_lost(s, u))
		return;
	if (!u->resolves && u->cutoff_hangs)
		return;
	sim_ev_t *e = sim_at(s, s->now + u->rtt_ms, EV_REPLY);
	e->req = r;
	e->serial = s->req[r].serial;
	e->up = id;
	e->sent = s->now;
	e->res = u->resolves ? FWD_RESULT_ANSWER : FWD_RESULT_SERVFAIL;
}

static void sim_done(sim_t *s, uint32_t r, bool ok)
{
	if (ok && s->now - s->req[r].t.start_ms > 1000)
		s->late++;
	else if (ok)
		s->answered++;
	else
		s->failed++;
	s->req[r].active = false;
}

/* Ask the module for the next attempt of request @p r and act on the answer. */
static void sim_next_attempt(sim_t *s, uint32_t r)
{
	sim_req_t *q = &s->req[r];
	uint32_t id, timeout;
	int ret = fwd_upstream_pick(s->set, &q->t, s->now, &id, &timeout);
	if (ret == -ETIMEDOUT || (ret == STEER_ENOENT && id == FWD_UPSTREAM_NONE)) {
		sim_done(s, r, false);
		return;
	}
	if (id != FWD_UPSTREAM_NONE)
		sim_send_query(s, r, id);
	else
		q->cur = FWD_UPSTREAM_NONE;
	sim_ev_t *e = sim_at(s, s->now + timeout, EV_TIMER);
	e->req = r;
	e->serial = q->serial;
	e->gen = ++q->gen;
}

static void sim_client_query(sim_t *s)
{
	uint32_t r = 0;
	while (r < SIM_REQS && s->req[r].active)
		r++;
	if (r == SIM_REQS) {
		printf("sim: request pool exhausted\n");
		abort();
	}
	sim_req_t *q = &s->req[r];
	*q = (sim_req_t){.active = true, .serial = ++s->serials};
	fwd_try_init(&q->t, s->group, s->now);
	sim_next_attempt(s, r);
	if (q->t.attempts > 0 && q->cur < SIM_UPS) {
		s->first_count[q->cur]++;
		if (q->cur != s->first) {
			if (s->first != FWD_UPSTREAM_NONE)
				s->first_changes++;
			s->first = q->cur;
			s->first_at = s->now;
		}
	}
}

static void sim_send_probe(sim_t *s, const fwd_probe_t *p)
{
	const sim_upstream_t *u = &s->up[p->upstream];
	sim_ev_t *e;
	if (!u->link_up || !u->alive || sim_lost(s, u)) {
		e = sim_at(s, s->now + p->timeout_ms, EV_PROBE);
		e->po = FWD_PROBE_TIMEOUT;
	} else if (u->resolves) {
		e = sim_at(s, s->now + u->probe_rtt_ms, EV_PROBE);
		e->po = FWD_PROBE_OK;
	} else if (u->cutoff_hangs) {
		e = sim_at(s, s->now + p->timeout_ms, EV_PROBE);
		e->po = FWD_PROBE_ALIVE_ONLY;
	} else {
		e = sim_at(s, s->now + u->probe_rtt_ms, EV_PROBE);
		e->po = FWD_PROBE_SERVFAIL;
	}
	e->up = p->upstream;
	e->seq = p->seq;
	e->sent = s->now;
}

static void sim_event(sim_t *s, const sim_ev_t *e)
{
	sim_req_t *q = &s->req[e->req];
	bool live = q->active && q->serial == e->serial;
	switch (e->kind) {
	case EV_REPLY:
		CHECK(fwd_upstream_query_result(s->set, e->up, e->res,
		                                (uint32_t)(s->now - e->sent) * 1000, s->now) == 0,
		      "query_result");
		if (live && e->res == FWD_RESULT_SERVFAIL)
			s->servfailed++;
		if (live)
			sim_done(s, e->req, e->res == FWD_RESULT_ANSWER);
		break;
	case EV_TIMER:
		if (!live || q->gen != e->gen)
			break;
		if (q->cur != FWD_UPSTREAM_NONE)
			CHECK(fwd_upstream_query_result(s->set, q->cur, FWD_RESULT_TIMEOUT, 0,
			                                s->now) == 0,
			      "timeout result");
		sim_next_attempt(s, e->req);
		break;
	case EV_PROBE:
		CHECK(fwd_upstream_probe_result(s->set, e->up, e->seq, e->po,
		                                (uint32_t)(s->now - e->sent) * 1000, s->now) == 0,
		      "probe_result");
		break;
	}
}

static void sim_step(sim_t *s)
{
	/* Take the bucket first: handlers add events for later times only. */
	int i = s->wheel[s->now % SIM_WHEEL];
	s->wheel[s->now % SIM_WHEEL] = -1;
	int keep = -1;
	while (i >= 0) {
		sim_ev_t *e = &s->evs[i];
		int next = e->next;
		if (e->at == s->now) {
			sim_event(s, e);
			e->next = s->free_ev;
			s->free_ev = i;
		} else {
			e->next = keep;
			keep = i;
		}
		i = next;
	}
	while (keep >= 0) {
		int next = s->evs[keep].next;
		s->evs[keep].next = s->wheel[s->now % SIM_WHEEL];
		s->wheel[s->now % SIM_WHEEL] = keep;
		keep = next;
	}
	if (s->qps && s->now % 1000 * s->qps / 1000 != (s->now % 1000 + 1) * s->qps / 1000)
		sim_client_query(s);
	fwd_probe_t p;
	uint64_t due;
	while (fwd_upstream_next_probe(s->set, s->now, &p, &due) == 0)
		sim_send_probe(s, &p);
	s->n_log += fwd_upstream_events(s->set, s->log + s->n_log, SIM_EVLOG - s->n_log, NULL);
}

/* Run the scenario until @p until_ms (exclusive). */
static void sim_run(sim_t *s, uint64_t until_ms)
{
	for (; s->now < until_ms; s->now++)
		sim_step(s);
}

/* The device of upstream @p id changes state, seen by both the simulation and the module. */
static void sim_link(sim_t *s, uint32_t id, const char *dev, bool up)
{
	s->up[id].link_up = up;
	fwd_upstream_link_state(s->set, dev, up, s->now);
}

/* Index in the log of the first event for @p id into @p to at or after @p from, or -1. */
static int sim_find(const sim_t *s, uint32_t id, fwd_fault_t to, uint64_t from)
{
	for (size_t i = 0; i < s->n_log; i++)
		if (s->log[i].upstream == id && s->log[i].to == to && s->log[i].at_ms >= from)
			return (int)i;
	return -1;
}

static void sim_reset_counts(sim_t *s)
{
	s->answered = s->failed = s->late = s->servfailed = 0;
	s->first_changes = 0;
	memset(s->first_count, 0, sizeof(s->first_count));
}

static void sim_print_log(const sim_t *s)
{
	for (size_t i = 0; i < s->n_log; i++)
		printf("  %8llu ms  #%u %s -> %s: %s\n", (unsigned long long)s->log[i].at_ms,
		       s->log[i].upstream, fwd_fault_str(s->log[i].from),
		       fwd_fault_str(s->log[i].to), s->log[i].reason);
}

/* ---- definitions used by the scenarios ---------------------------------------------------- */

static fwd_upstream_def_t links[4] = {
    {.name = "link1", .link = "eth1"},
    {.name = "link2", .link = "eth2"},
    {.name = "link3", .link = "eth3"},
    {.name = "link4", .link = "eth4"},
};

static fwd_group_def_t group(const char *domain, fwd_policy_t policy, size_t n,
                             const fwd_upstream_def_t *ups)
{
	return (fwd_group_def_t){
	    .domain = domain, .policy = policy, .upstreams = ups, .n_upstreams = n};
}

/*
 * Detection bound with the defaults: real queries to a dead upstream time out after the
 * adaptive retry timeout (FWD_RETRY_MIN_MS at LAN RTTs), which makes it suspect; probes then
 * go out every FWD_PROBE_FAST_MS, and the fall-th one times out after FWD_PROBE_TIMEOUT_MS.
 * A little slack for the 2 ms between client queries at 500 q/s.
 */
#define DETECT_MS(retry)                                                                           \
	((retry) + (FWD_PROBE_FALL - 1) * FWD_PROBE_FAST_MS + FWD_PROBE_TIMEOUT_MS + 5)

/* ---- scenarios ---------------------------------------------------------------------------- */

static void test_groups(void)
{
	fwd_group_def_t defs[] = {group(".", FWD_POLICY_ORDERED, 2, links),
	                          group("Corp.Example.", FWD_POLICY_ORDERED, 1, links + 2)};
	fwd_upstreams_t *set;
	CHECK(fwd_upstreams_new(defs, 2, 1, 0, &set) == 0, "new");
	static const struct {
		const char *name;
		int group;
	} rows[] = {
	    {"www.corp.example", 1},
	    {"corp.example", 1},
	    {"WWW.CORP.EXAMPLE", 1},
	    {"example", 0},
	    {"xcorp.example", 0},
	    {"corp.example.net", 0},
	    {".", 0},
	    {"a.b.c.corp.example", 1},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		uint8_t wire[DNS_DNAME_MAXLEN];
		CHECK(dname_from_str(rows[i].name, wire) > 0, "%s parses", rows[i].name);
		int g = fwd_group_find(set, wire);
		CHECK(g == rows[i].group, "%s: group %d, want %d", rows[i].name, g, rows[i].group);
	}
	CHECK(fwd_upstreams_count(set) == 3, "3 upstreams");
	fwd_upstream_stats_t st;
	CHECK(fwd_upstream_stats(set, 2, &st) == 0 && st.group == 1 && st.member == 0 &&
	          strcmp(st.name, "link3") == 0,
	      "ids count across groups");
	fwd_upstreams_free(set);

	fwd_group_def_t only_corp = group("corp.example", FWD_POLICY_ORDERED, 1, links);
	CHECK(fwd_upstreams_new(&only_corp, 1, 1, 0, &set) == 0, "new corp only");
	uint8_t wire[DNS_DNAME_MAXLEN];
	CHECK(dname_from_str("www.example", wire) > 0, "parse");
	CHECK(fwd_group_find(set, wire) == STEER_ENOENT, "no group covers www.example");
	fwd_upstreams_free(set);

	fwd_group_def_t dup[] = {group(".", FWD_POLICY_ORDERED, 1, links),
	                         group(".", FWD_POLICY_ORDERED, 1, links)};
	CHECK(fwd_upstreams_new(dup, 2, 1, 0, &set) == STEER_EEXIST && !set, "duplicate domain");
	fwd_group_def_t none = group(".", FWD_POLICY_ORDERED, 0, links);
	CHECK(fwd_upstreams_new(&none, 1, 1, 0, &set) == STEER_ERANGE, "no upstreams");
	CHECK(fwd_upstreams_new(defs, 0, 1, 0, &set) == STEER_ERANGE, "no groups");
	fwd_group_def_t bad = group("a..b", FWD_POLICY_ORDERED, 1, links);
	CHECK(fwd_upstreams_new(&bad, 1, 1, 0, &set) == STEER_EINVAL, "bad domain");
	bad = group(".", (fwd_policy_t)7, 1, links);
	CHECK(fwd_upstreams_new(&bad, 1, 1, 0, &set) == STEER_EINVAL, "bad policy");
}

/* Retry sequence and timeouts of one request, driven directly. */
static void test_retry_sequence(void)
{
	fwd_group_def_t def = group(".", FWD_POLICY_ORDERED, 3, links);
	fwd_upstreams_t *set;
	CHECK(fwd_upstreams_new(&def, 1, 1, 0, &set) == 0, "new");
	fwd_try_t t;
	uint32_t id, to;
	fwd_try_init(&t, 0, 1000);
	CHECK(fwd_upstream_pick(set, &t, 1000, &id, &to) == 0 && id == 0 && to == 400,
	      "first: link1, no RTT yet: the configured 400 ms (got %u, %u)", id, to);
	CHECK(fwd_upstream_pick(set, &t, 1400, &id, &to) == 0 && id == 1 && to == 400,
	      "second: link2 (got %u)", id);
	CHECK(fwd_upstream_pick(set, &t, 1800, &id, &to) == 0 && id == 2 && to == 400,
	      "third: link3 (got %u)", id);
	int ret = fwd_upstream_pick(set, &t, 2200, &id, &to);
	CHECK(ret == STEER_EAGAIN && id == FWD_UPSTREAM_NONE && to == 1800,
	      "all asked: wait for the rest of the budget (%d, %u)", ret, to);
	CHECK(fwd_upstream_pick(set, &t, 4000, &id, &to) == -ETIMEDOUT, "budget spent");

	/* Adaptive: max(100 ms, 3 x SRTT) capped at 400 ms. */
	static const struct {
		uint32_t rtt_us, want_ms;
	} rows[] = {{1000, 100}, {40000, 120}, {100000, 300}, {300000, 400}};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		fwd_upstreams_free(set);
		CHECK(fwd_upstreams_new(&def, 1, 1, 0, &set) == 0, "new");
		CHECK(fwd_upstream_query_result(set, 0, FWD_RESULT_ANSWER, rows[i].rtt_us, 10) == 0,
		      "result");
		fwd_try_init(&t, 0, 10);
		CHECK(fwd_upstream_pick(set, &t, 10, &id, &to) == 0 && to == rows[i].want_ms,
		      "SRTT %u us: retry after %u ms, want %u", rows[i].rtt_us, to,
		      rows[i].want_ms);
	}
	/* Never beyond the budget. */
	fwd_try_init(&t, 0, 0);
	CHECK(fwd_upstream_pick(set, &t, 2950, &id, &to) == 0 && to == 50, "budget caps: %u", to);
	fwd_upstream_stats_t st;
	CHECK(fwd_upstream_stats(set, 0, &st) == 0 && st.queries == 2 && st.answers == 1,
	      "counters: queries %llu answers %llu", (unsigned long long)st.queries,
	      (unsigned long long)st.answers);

	/* Fixed retry timeout ignores the RTT. */
	fwd_upstreams_free(set);
	def.retry_fixed = true;
	def.retry_timeout_ms = 250;
	CHECK(fwd_upstreams_new(&def, 1, 1, 0, &set) == 0, "new");
	CHECK(fwd_upstream_query_result(set, 0, FWD_RESULT_ANSWER, 1000, 0) == 0, "result");
	fwd_try_init(&t, 0, 0);
	CHECK(fwd_upstream_pick(set, &t, 0, &id, &to) == 0 && to == 250, "fixed: %u", to);
	CHECK(fwd_upstream_pick(set, (fwd_try_t[]){{.group = 5}}, 0, &id, &to) == STEER_EINVAL,
	      "bad group");
	fwd_upstreams_free(set);
}

/* Probe schedule, nonces, seq checks, first result decides. */
static void test_probes(void)
{
	fwd_group_def_t def = group(".", FWD_POLICY_ORDERED, 2, links);
	fwd_upstreams_t *set;
	CHECK(fwd_upstreams_new(&def, 1, 42, 0, &set) == 0, "new");
	fwd_probe_t p[2];
	uint64_t due;
	CHECK(fwd_upstream_next_probe(set, 0, &p[0], &due) == 0 && p[0].upstream == 0 &&
	          p[0].seq == 1 && p[0].timeout_ms == 500,
	      "first probe due at once");
	CHECK(fwd_upstream_next_probe(set, 0, &p[1], &due) == 0 && p[1].upstream == 1, "second");
	CHECK(p[0].nonce != p[1].nonce, "fresh nonce per probe");
	CHECK(fwd_upstream_next_probe(set, 0, &p[1], &due) == STEER_EAGAIN && due == 1000,
	      "next due after the interval: %llu", (unsigned long long)due);
	CHECK(fwd_upstream_probe_result(set, 0, 2, FWD_PROBE_OK, 0, 5) == STEER_EINVAL,
	      "seq never handed out");
	CHECK(fwd_upstream_probe_result(set, 9, 1, FWD_PROBE_OK, 0, 5) == STEER_EINVAL, "bad id");
	CHECK(fwd_upstream_probe_result(set, 0, 1, FWD_PROBE_OK, 3000, 5) == 0, "ok");
	CHECK(fwd_upstream_probe_result(set, 1, 1, FWD_PROBE_TIMEOUT, 0, 500) == 0, "timeout");
	fwd_upstream_event_t ev[4];
	size_t n = fwd_upstream_events(set, ev, 4, NULL);
	CHECK(n == 1 && ev[0].upstream == 1 && ev[0].to == FWD_FAULT_UPSTREAM_DOWN &&
	          ev[0].at_ms == 500,
	      "first probe decides: link2 down at once (%zu events)", n);
	fwd_upstream_stats_t st;
	CHECK(fwd_upstream_stats(set, 0, &st) == 0 && st.probes == 1 && st.probe_rtt_us == 3000 &&
	          st.fault == FWD_FAULT_NONE,
	      "link1 up, probe RTT kept");

	/* Real answers from a down upstream do not bring it back: only probes do. */
	for (int i = 0; i < 50; i++)
		CHECK(fwd_upstream_query_result(set, 1, FWD_RESULT_ANSWER, 1000, 600) == 0,
		      "answer");
	CHECK(fwd_upstream_stats(set, 1, &st) == 0 && st.fault == FWD_FAULT_UPSTREAM_DOWN &&
	          st.answers == 50,
	      "answers counted, still down");
	CHECK(fwd_upstream_query_result(set, 1, (fwd_result_t)9, 0, 600) == STEER_EINVAL &&
	          fwd_upstream_query_result(set, 7, FWD_RESULT_ANSWER, 0, 600) == STEER_EINVAL,
	      "bad result or id");

	/* Nonces stay distinct over many probes. */
	uint64_t seen[200];
	bool distinct = true;
	for (int i = 0; i < 200; i++) {
		CHECK(fwd_upstream_next_probe(set, 1000 + (uint64_t)i * 1000, &p[0], &due) == 0,
		      "probe %d", i);
		seen[i] = p[0].nonce;
		for (int j = 0; j < i; j++)
			distinct = distinct && seen[j] != seen[i];
	}
	CHECK(distinct, "200 distinct nonces");
	fwd_upstreams_free(set);

	/* Event queue overflow is counted, not silent. */
	CHECK(fwd_upstreams_new(&def, 1, 42, 0, &set) == 0, "new");
	for (int i = 0; i < 40; i++) {
		fwd_upstream_link_state(set, "eth1", false, (uint64_t)i * 10);
		fwd_upstream_link_state(set, "eth1", true, (uint64_t)i * 10 + 5);
	}
	uint64_t lost;
	fwd_upstream_event_t many[FWD_EVENTS_MAX];
	n = fwd_upstream_events(set, many, FWD_EVENTS_MAX, &lost);
	CHECK(n == FWD_EVENTS_MAX && lost == 80 - FWD_EVENTS_MAX && many[n - 1].at_ms == 395,
	      "overflow: %zu kept, %llu lost, newest kept", n, (unsigned long long)lost);
	CHECK(fwd_upstream_link_state(set, "eth9", false, 500) == 0, "unknown device");
	fwd_upstreams_free(set);
}

/* The preferred upstream stops answering (killed, or packets silently dropped). */
static void scenario_preferred_dies(bool fixed_retry)
{
	fwd_group_def_t def = group(".", FWD_POLICY_ORDERED, 2, links);
	def.retry_fixed = fixed_retry;
	sim_t *s = sim_new(&def, 1, 7);
	sim_run(s, 10000);
	CHECK(s->n_log == 0 && s->first == 0 && s->failed == 0, "steady: link1, no events");
	fwd_upstream_stats_t idle;
	CHECK(fwd_upstream_stats(s->set, 1, &idle) == 0 && idle.probes >= 10 && idle.probes <= 11 &&
	          idle.queries == 0,
	      "the idle backup is probed every second (%llu probes)",
	      (unsigned long long)idle.probes);
	sim_reset_counts(s);

	s->up[0].alive = false;
	sim_run(s, 20000);
	uint32_t retry = fixed_retry ? FWD_RETRY_TIMEOUT_MS : FWD_RETRY_MIN_MS;
	int down = sim_find(s, 0, FWD_FAULT_UPSTREAM_DOWN, 10000);
	CHECK(down >= 0 && s->log[down].at_ms - 10000 <= DETECT_MS(retry),
	      "%s retry: link1 down within %u ms (took %lld)", fixed_retry ? "fixed" : "adaptive",
	      DETECT_MS(retry), down >= 0 ? (long long)(s->log[down].at_ms - 10000) : -1LL);
	CHECK(s->first == 1 && s->first_at - 10000 <= DETECT_MS(retry),
	      "all first attempts on link2 %llu ms after the failure",
	      (unsigned long long)(s->first_at - 10000));
	printf("%s retry: link1 down after %lld ms (bound %u)\n",
	       fixed_retry ? "fixed" : "adaptive",
	       down >= 0 ? (long long)(s->log[down].at_ms - 10000) : -1LL, DETECT_MS(retry));
	CHECK(s->failed == 0 && s->late == 0, "no client-visible failure: %u failed, %u late",
	      s->failed, s->late);
	fwd_upstream_stats_t st;
	CHECK(fwd_upstream_stats(s->set, 0, &st) == 0 && st.timeouts > 0 &&
	          st.fault == FWD_FAULT_UPSTREAM_DOWN && st.since_ms == s->log[down].at_ms,
	      "stats: timeouts counted, down since the event");

	/* Heals: back only after rise good probes spanning the hold-down, not before. */
	sim_reset_counts(s);
	s->up[0].alive = true;
	sim_run(s, 40000);
	int up = sim_find(s, 0, FWD_FAULT_NONE, 20000);
	uint64_t back = up >= 0 ? s->log[up].at_ms - 20000 : 0;
	CHECK(up >= 0 && back >= FWD_PROBE_HOLD_DOWN_MS &&
	          back <= FWD_PROBE_HOLD_DOWN_MS + FWD_PROBE_INTERVAL_MS + 5,
	      "back on link1 after hold-down + <= 1 interval (took %llu)",
	      (unsigned long long)back);
	CHECK(s->first == 0 && s->first_changes == 1 && s->first_at >= s->log[up].at_ms &&
	          s->first_at <= s->log[up].at_ms + 2,
	      "first attempts back on link1 when it is up, not before (%u changes)",
	      s->first_changes);
	CHECK(s->n_log == 2, "two state changes, each once (%zu)", s->n_log);
	CHECK(s->failed == 0 && s->late == 0, "no failure during failback");
	if (s->n_log != 2)
		sim_print_log(s);
	sim_free(s);
}

/* Link down (netlink) is immediate and classified as such; the upstream has to prove itself. */
static void scenario_link_down(void)
{
	fwd_group_def_t def = group(".", FWD_POLICY_ORDERED, 2, links);
	sim_t *s = sim_new(&def, 1, 8);
	sim_run(s, 10000);
	sim_link(s, 0, "eth1", false);
	sim_run(s, 20000);
	CHECK(s->n_log == 1 && s->log[0].to == FWD_FAULT_LINK_DOWN && s->log[0].at_ms == 10000 &&
	          strstr(s->log[0].reason, "eth1"),
	      "link-down at once, reason names the device");
	CHECK(s->first == 1 && s->first_at <= 10002, "traffic on link2 at once");
	CHECK(s->failed == 0 && s->late == 0, "no client failure (%u, %u)", s->failed, s->late);
	fwd_upstream_stats_t st;
	uint64_t probes_before;
	CHECK(fwd_upstream_stats(s->set, 0, &st) == 0, "stats");
	probes_before = st.probes;
	sim_run(s, 25000);
	CHECK(fwd_upstream_stats(s->set, 0, &st) == 0 && st.probes == probes_before,
	      "no probes out of a down link");

	sim_link(s, 0, "eth1", true);
	sim_run(s, 40000);
	int down = sim_find(s, 0, FWD_FAULT_UPSTREAM_DOWN, 25000);
	int up = sim_find(s, 0, FWD_FAULT_NONE, 25000);
	CHECK(down == 1 && s->log[down].at_ms == 25000, "link up: upstream-down until proven");
	/* Its first good probe is right at the link's return, so it is back right at the
	 * hold-down's end (the probe that proves it is brought forward to that moment). */
	CHECK(up == 2 && s->log[up].at_ms - 25000 >= FWD_PROBE_HOLD_DOWN_MS &&
	          s->log[up].at_ms - 25000 <= FWD_PROBE_HOLD_DOWN_MS + 50,
	      "back at the hold-down's end (took %llu)",
	      up >= 0 ? (unsigned long long)(s->log[up].at_ms - 25000) : 0ULL);
	CHECK(s->n_log == 3, "three changes (%zu)", s->n_log);
	sim_free(s);
}

/*
 * A hold-down that is not a whole number of probe intervals: the proving probe is sent when
 * the hold-down ends, not at the next interval after it.
 */
static void scenario_hold_down_end(void)
{
	fwd_group_def_t def = group(".", FWD_POLICY_ORDERED, 2, links);
	def.probe.hold_down_ms = 4500;
	sim_t *s = sim_new(&def, 1, 8);
	sim_run(s, 10000);
	sim_link(s, 0, "eth1", false);
	sim_run(s, 12000);
	sim_link(s, 0, "eth1", true);
	sim_run(s, 30000);
	int up = sim_find(s, 0, FWD_FAULT_NONE, 12000);
	uint64_t back = up >= 0 ? s->log[up].at_ms - 12000 : 0;
	CHECK(up >= 0 && back >= 4500 && back <= 4550,
	      "back 4.5 s after the link returned, not at the next interval (took %llu)",
	      (unsigned long long)back);
	sim_free(s);
}

/* The link is back but its path not yet: fast probes find the path soon after it is there. */
static void scenario_link_up_before_path(void)
{
	fwd_group_def_t def = group(".", FWD_POLICY_ORDERED, 2, links);
	sim_t *s = sim_new(&def, 1, 8);
	sim_run(s, 10000);
	sim_link(s, 0, "eth1", false);
	sim_run(s, 12000);
	s->up[0].alive = false;
	sim_link(s, 0, "eth1", true);
	sim_run(s, 12300);
	s->up[0].alive = true;
	sim_run(s, 30000);
	int up = sim_find(s, 0, FWD_FAULT_NONE, 12000);
	uint64_t back = up >= 0 ? s->log[up].at_ms - 12300 : 0;
	/* The probe lost to the missing path ends at its timeout; the next one goes out at
	 * the fast interval, not a whole interval later. */
	CHECK(up >= 0 && back >= FWD_PROBE_HOLD_DOWN_MS &&
	          back <= FWD_PROBE_HOLD_DOWN_MS + FWD_PROBE_TIMEOUT_MS + 50,
	      "back hold-down + one probe timeout after the path (took %llu)",
	      (unsigned long long)back);
	sim_free(s);
}

/* Alive but cut off from the hierarchy: degraded, a last resort only. */
static void scenario_degraded(bool hangs)
{
	fwd_group_def_t def = group(".", FWD_POLICY_ORDERED, 2, links);
	sim_t *s = sim_new(&def, 1, 9);
	sim_run(s, 10000);
	s->up[0].resolves = false;
	s->up[0].cutoff_hangs = hangs;
	sim_run(s, 20000);
	int d = sim_find(s, 0, FWD_FAULT_UPSTREAM_DEGRADED, 10000);
	CHECK(d >= 0 && s->log[d].at_ms - 10000 <= DETECT_MS(FWD_RETRY_MIN_MS) &&
	          s->log[d].from == FWD_FAULT_NONE,
	      "%s: link1 degraded, not down", hangs ? "recursion hangs" : "SERVFAIL");
	CHECK(s->n_log == 1, "one change (%zu)", s->n_log);
	CHECK(s->first == 1, "traffic prefers link2 over a degraded link1");
	fwd_upstream_stats_t st;
	CHECK(fwd_upstream_stats(s->set, 0, &st) == 0 && st.usable &&
	          st.fault == FWD_FAULT_UPSTREAM_DEGRADED,
	      "degraded stays usable");

	/* link2 dies too: the degraded one is the last resort. */
	s->up[1].alive = false;
	sim_run(s, 22000);
	CHECK(fwd_upstream_stats(s->set, 0, &st) == 0, "stats");
	uint64_t probes = st.probes;
	sim_run(s, 30000);
	CHECK(sim_find(s, 1, FWD_FAULT_UPSTREAM_DOWN, 20000) >= 0, "link2 down");
	CHECK(s->first == 0, "back to degraded link1 as the last resort");
	CHECK(fwd_upstream_stats(s->set, 0, &st) == 0 && st.probes - probes <= 12,
	      "its SERVFAILs do not keep it on fast probes (%llu probes in 8 s; 1 s interval, "
	      "bursts of 3 fast ones per 10 s)",
	      (unsigned long long)(st.probes - probes));

	/* link1 stops answering at all: degraded -> upstream-down. */
	s->up[0].alive = false;
	sim_run(s, 40000);
	CHECK(sim_find(s, 0, FWD_FAULT_UPSTREAM_DOWN, 30000) >= 0, "degraded -> down");
	sim_free(s);
}

/* 30 % random loss on the preferred link (seeded): the ordered choice does not flap. */
static void scenario_loss(uint64_t seed, uint64_t minutes, unsigned max_changes)
{
	fwd_group_def_t def = group(".", FWD_POLICY_ORDERED, 2, links);
	sim_t *s = sim_new(&def, 1, seed);
	sim_run(s, 5000);
	sim_reset_counts(s);
	s->up[0].loss_pct = 30;
	sim_run(s, 5000 + minutes * 60000);
	/* Without damping this lossy link returns every ~25 s and falls again within a second
	 * of fast probes; with it, the hold-down doubles on each quick fall. */
	CHECK(s->first_changes <= max_changes,
	      "seed %llu: %u changes of the first choice in %llu min", (unsigned long long)seed,
	      s->first_changes, (unsigned long long)minutes);
	CHECK(s->failed == 0 && s->late == 0, "seed %llu: no client failure (%u, %u)",
	      (unsigned long long)seed, s->failed, s->late);
	printf("loss seed %llu: %u first-choice changes, %zu events, %u answered\n",
	       (unsigned long long)seed, s->first_changes, s->n_log, s->answered);
	if (s->first_changes > max_changes || getenv("SIM_VERBOSE"))
		sim_print_log(s);

	/* The loss ends: a damped link comes back after its lengthened hold-down. */
	fwd_upstream_stats_t st;
	CHECK(fwd_upstream_stats(s->set, 0, &st) == 0, "stats");
	CHECK(s->first_changes < 3 || st.hold_down_ms >= 2 * FWD_PROBE_HOLD_DOWN_MS,
	      "seed %llu: a quick fall after a return doubled the hold-down (%u ms)",
	      (unsigned long long)seed, st.hold_down_ms);
	uint64_t healed = s->now;
	s->up[0].loss_pct = 0;
	sim_run(s, healed + 60000);
	int up = sim_find(s, 0, FWD_FAULT_NONE, healed);
	CHECK(st.fault == FWD_FAULT_NONE ||
	          (up >= 0 &&
	           s->log[up].at_ms - healed <= st.hold_down_ms + FWD_PROBE_INTERVAL_MS + 5),
	      "seed %llu: back within the damped hold-down %u ms + 1 interval",
	      (unsigned long long)seed, st.hold_down_ms);
	sim_free(s);
}

/* Round-robin spreads over the usable members and skips a down one. */
static void scenario_round_robin(void)
{
	fwd_group_def_t def = group(".", FWD_POLICY_ROUND_ROBIN, 3, links);
	sim_t *s = sim_new(&def, 1, 10);
	s->qps = 300;
	sim_run(s, 1000);
	sim_reset_counts(s);
	sim_run(s, 11000);
	for (int i = 0; i < 3; i++)
		CHECK(s->first_count[i] == 1000, "rr: link%d got %u of 3000", i + 1,
		      s->first_count[i]);
	s->up[1].alive = false;
	sim_run(s, 13000);
	sim_reset_counts(s);
	sim_run(s, 23000);
	CHECK(s->first_count[1] == 0 && s->first_count[0] == 1500 && s->first_count[2] == 1500,
	      "rr skips the down one: %u %u %u", s->first_count[0], s->first_count[1],
	      s->first_count[2]);
	CHECK(s->failed == 0, "rr: no failures");
	sim_free(s);
}

/* Fastest follows the smoothed RTT and skips down members. */
static void scenario_fastest(void)
{
	fwd_group_def_t def = group(".", FWD_POLICY_FASTEST, 3, links);
	sim_t *s = sim_new(&def, 1, 11);
	s->up[0].rtt_ms = 8;
	s->up[1].rtt_ms = 2;
	s->up[2].rtt_ms = 4;
	sim_run(s, 2000);
	sim_reset_counts(s);
	sim_run(s, 12000);
	CHECK(s->first_count[1] > 4900, "fastest: link2 (2 ms) gets nearly all: %u %u %u",
	      s->first_count[0], s->first_count[1], s->first_count[2]);
	s->up[1].rtt_ms = 12;
	sim_run(s, 14000);
	sim_reset_counts(s);
	sim_run(s, 24000);
	CHECK(s->first_count[2] > s->first_count[0] && s->first_count[2] > s->first_count[1],
	      "fastest follows the RTT change to link3: %u %u %u", s->first_count[0],
	      s->first_count[1], s->first_count[2]);
	s->up[2].alive = false;
	sim_run(s, 26000);
	sim_reset_counts(s);
	sim_run(s, 36000);
	CHECK(s->first_count[2] == 0 && s->first_count[0] > s->first_count[1],
	      "fastest skips the down one: %u %u %u", s->first_count[0], s->first_count[1],
	      s->first_count[2]);
	CHECK(s->failed == 0, "fastest: no failures");
	sim_free(s);
}

/* Suffix groups are independent: corp.example's resolver dying does not touch `.`. */
static void scenario_suffix_groups(void)
{
	fwd_group_def_t defs[] = {group(".", FWD_POLICY_ORDERED, 2, links),
	                          group("corp.example.", FWD_POLICY_ORDERED, 2, links + 2)};
	sim_t *s = sim_new(defs, 2, 12);
	s->group = 1;
	sim_run(s, 5000);
	CHECK(s->first == 2, "corp traffic on link3");
	s->up[2].alive = false;
	sim_run(s, 10000);
	CHECK(s->first == 3, "corp traffic on link4");
	CHECK(s->n_log == 1 && s->log[0].upstream == 2, "only link3 changed");
	s->group = 0;
	s->first = FWD_UPSTREAM_NONE;
	sim_reset_counts(s);
	sim_run(s, 12000);
	CHECK(s->first == 0 && s->first_changes == 0 && s->failed == 0, "`.` stays on link1");
	sim_free(s);
}

/* Everything down: "no usable upstream", a last-resort suggestion, nothing behind dead links. */
static void scenario_all_down(void)
{
	fwd_group_def_t def = group(".", FWD_POLICY_ORDERED, 2, links);
	sim_t *s = sim_new(&def, 1, 13);
	s->qps = 0;
	sim_run(s, 2000);
	s->up[0].alive = s->up[1].alive = false;
	sim_run(s, 6000);
	CHECK(s->n_log == 2, "both down (%zu)", s->n_log);
	fwd_try_t t;
	uint32_t id, to;
	fwd_try_init(&t, 0, s->now);
	CHECK(fwd_upstream_pick(s->set, &t, s->now, &id, &to) == STEER_ENOENT && id == 0 &&
	          to == 400,
	      "no usable upstream; link1 as the last resort");
	CHECK(fwd_upstream_pick(s->set, &t, s->now, &id, &to) == STEER_ENOENT && id == 1,
	      "then link2");
	CHECK(fwd_upstream_pick(s->set, &t, s->now, &id, &to) == STEER_ENOENT &&
	          id == FWD_UPSTREAM_NONE,
	      "then nothing");
	sim_link(s, 0, "eth1", false);
	sim_link(s, 1, "eth2", false);
	fwd_try_init(&t, 0, s->now);
	CHECK(fwd_upstream_pick(s->set, &t, s->now, &id, &to) == STEER_ENOENT &&
	          id == FWD_UPSTREAM_NONE,
	      "every link down: nothing to try");
	fwd_probe_t p;
	uint64_t due;
	CHECK(fwd_upstream_next_probe(s->set, s->now, &p, &due) == STEER_ENOENT &&
	          due == UINT64_MAX,
	      "nothing to probe");
	sim_free(s);
}

int main(void)
{
	test_groups();
	test_retry_sequence();
	test_probes();
	scenario_preferred_dies(false);
	scenario_preferred_dies(true);
	scenario_link_down();
	scenario_hold_down_end();
	scenario_link_up_before_path();
	scenario_degraded(false);
	scenario_degraded(true);
	for (uint64_t seed = 1; seed <= 5; seed++)
		scenario_loss(seed, 1, 4);
	for (uint64_t seed = 1; seed <= 3; seed++)
		scenario_loss(seed, 10, 6);
	scenario_round_robin();
	scenario_fastest();
	scenario_suffix_groups();
	scenario_all_down();
	return unit_finish("fwd_upstream");
}
