/*
 * The cluster node's announce/withdraw decision on a fake clock: scripted scenarios (one
 * table row per step, each checked), then every sequence of good and failed rounds up to a
 * length against a small independent model of fall, rise and the hold-down.
 */
#include "cluster/selfcheck.h"

#include <string.h>

#include "unit.h"

#define STEPS_MAX 64
#define ANY       (-1)

typedef struct {
	uint64_t t;         /* ms */
	char op;            /* o good round, f failed round, b good round with client queries,
	                     * F failed round with client queries, k keeper withdrew, d drain,
	                     * u undrain */
	unsigned arg;       /* d: timeout ms */
	bool ret;           /* what the call returns */
	cluster_state_t st; /* the state after it */
	const char *reason; /* a substring of the reason after it, NULL = not checked */
	long hold;          /* hold-down left after it, ANY = not checked */
} step_t;

typedef struct {
	const char *name;
	cluster_selfcheck_conf_t conf;
	step_t steps[STEPS_MAX];
} scenario_t;

/* fall 3, rise 5, hold-down 2 s, drain quiet 0.5 s, drain timeout 3 s */
#define CONF                                                                                       \
	{                                                                                          \
		3, 5, 2000, 500, 3000                                                              \
	}
#define S  CLUSTER_STARTING
#define A  CLUSTER_ANNOUNCED
#define W  CLUSTER_WITHDRAWN
#define D  CLUSTER_DRAINING
#define DD CLUSTER_DRAINED

/* Five good rounds from t=0 announce; the prefix of most scenarios. */
#define BOOT                                                                                       \
	{0, 'o', 0, false, S, "starting", 0}, {100, 'o', 0, false, S, NULL, 0},                    \
	    {200, 'o', 0, false, S, NULL, 0}, {300, 'o', 0, false, S, NULL, 0},                    \
	{                                                                                          \
		400, 'o', 0, true, A, "self-check good for 5 rounds", 0                            \
	}

static const scenario_t scenarios[] = {
    {"start: rise good rounds announce, no hold-down",
     CONF,
     {BOOT, {500, 'o', 0, false, A, NULL, 0}}},
    {"start: a failure restarts the count",
     CONF,
     {{0, 'o', 0, false, S, NULL, 0},
      {100, 'o', 0, false, S, NULL, 0},
      {200, 'o', 0, false, S, NULL, 0},
      {300, 'o', 0, false, S, NULL, 0},
      {400, 'f', 0, false, S, "starting", 0},
      {500, 'o', 0, false, S, NULL, 0},
      {600, 'o', 0, false, S, NULL, 0},
      {700, 'o', 0, false, S, NULL, 0},
      {800, 'o', 0, false, S, NULL, 0},
      {900, 'o', 0, true, A, "good for 5 rounds", 0}}},
    {"start: failures alone never withdraw what was never announced",
     CONF,
     {{0, 'f', 0, false, S, NULL, 0},
      {100, 'f', 0, false, S, NULL, 0},
      {200, 'f', 0, false, S, NULL, 0},
      {300, 'f', 0, false, S, NULL, 0},
      {400, 'o', 0, false, S, NULL, 0}}},
    {"fall: fall-1 failures keep the announcement, a good round resets",
     CONF,
     {BOOT,
      {500, 'f', 0, false, A, NULL, 0},
      {600, 'f', 0, false, A, NULL, 0},
      {700, 'o', 0, false, A, NULL, 0},
      {800, 'f', 0, false, A, NULL, 0},
      {900, 'f', 0, false, A, NULL, 0},
      {1000, 'f', 0, true, W, "answer: 192.0.2.53: timeout after 80 ms", 2000}}},
    {"hold-down: rise good rounds inside the hold-down do not announce",
     CONF,
     {BOOT,
      {500, 'f', 0, false, A, NULL, 0},
      {600, 'f', 0, false, A, NULL, 0},
      {700, 'f', 0, true, W, "timeout", 2000},
      {800, 'o', 0, false, W, NULL, 1900},
      {900, 'o', 0, false, W, NULL, 1800},
      {1000, 'o', 0, false, W, NULL, 1700},
      {1100, 'o', 0, false, W, NULL, 1600},
      {1200, 'o', 0, false, W, NULL, 1500},
      {2600, 'o', 0, false, W, NULL, 100},
      {2700, 'o', 0, true, A, "hold-down of 2000 ms over", 0}}},
    {"hold-down: over, but rise needs its good rounds in a row",
     CONF,
     {BOOT,
      {500, 'f', 0, false, A, NULL, 0},
      {600, 'f', 0, false, A, NULL, 0},
      {700, 'f', 0, true, W, NULL, 2000},
      {3000, 'o', 0, false, W, NULL, 0},
      {3100, 'o', 0, false, W, NULL, 0},
      {3200, 'f', 0, false, W, NULL, 0},
      {3300, 'o', 0, false, W, NULL, 0},
      {3400, 'o', 0, false, W, NULL, 0},
      {3500, 'o', 0, false, W, NULL, 0},
      {3600, 'o', 0, false, W, NULL, 0},
      {3700, 'o', 0, true, A, "good for 5 rounds", 0}}},
    {"hold-down: a new fall while withdrawn restarts it",
     CONF,
     {BOOT,
      {500, 'f', 0, false, A, NULL, 0},
      {600, 'f', 0, false, A, NULL, 0},
      {700, 'f', 0, true, W, NULL, 2000},
      {800, 'o', 0, false, W, NULL, ANY},
      {900, 'o', 0, false, W, NULL, ANY},
      {1000, 'o', 0, false, W, NULL, ANY},
      {1100, 'o', 0, false, W, NULL, ANY},
      {1200, 'o', 0, false, W, NULL, 1500},
      {1300, 'f', 0, false, W, NULL, 1400},
      {1400, 'f', 0, false, W, NULL, 1300},
      {1500, 'f', 0, false, W, NULL, 2000},
      {2800, 'o', 0, false, W, NULL, 700},
      {2900, 'o', 0, false, W, NULL, ANY},
      {3000, 'o', 0, false, W, NULL, ANY},
      {3100, 'o', 0, false, W, NULL, ANY},
      {3200, 'o', 0, false, W, NULL, 300},
      {3400, 'o', 0, false, W, NULL, 100},
      {3500, 'o', 0, true, A, "over", 0}}},
    {"keeper: a self-withdraw withdraws with hold-down and needs rise again",
     CONF,
     {BOOT,
      {500, 'o', 0, false, A, NULL, 0},
      {800, 'k', 0, true, W, "keeper: withdrawn: no heartbeat for 312 ms", 2000},
      {900, 'o', 0, false, W, NULL, 1900},
      {2900, 'o', 0, false, W, NULL, 0},
      {3000, 'o', 0, false, W, NULL, 0},
      {3100, 'o', 0, false, W, NULL, 0},
      {3200, 'o', 0, true, A, "hold-down of 2000 ms over", 0}}},
    {"keeper: a self-withdraw while starting",
     CONF,
     {{0, 'o', 0, false, S, NULL, 0},
      {100, 'k', 0, true, W, "keeper:", 2000},
      {200, 'o', 0, false, W, NULL, 1900}}},
    {"drain: withdraws at once, drained after the quiet time",
     CONF,
     {BOOT,
      {450, 'd', 0, true, D, "drain requested", 0},
      {500, 'b', 0, false, D, NULL, 0},
      {600, 'b', 0, false, D, NULL, 0},
      {700, 'o', 0, false, D, NULL, 0},
      {1000, 'o', 0, false, D, NULL, 0},
      {1100, 'o', 0, true, DD, "no client query for 500 ms", 0},
      {1200, 'f', 0, false, DD, "no client query", 0},
      {1300, 'b', 0, false, DD, "no client query", 0}}},
    {"drain: timeout when the queries never stop",
     CONF,
     {BOOT,
      {500, 'd', 0, true, D, NULL, 0},
      {600, 'b', 0, false, D, NULL, 0},
      {3400, 'b', 0, false, D, NULL, 0},
      {3500, 'b', 0, true, DD, "timeout after 3000 ms: client queries still", 0}}},
    {"drain: the caller's timeout wins over the configured one",
     CONF,
     {BOOT,
      {500, 'd', 200, true, D, NULL, 0},
      {600, 'b', 0, false, D, NULL, 0},
      {700, 'b', 0, true, DD, "timeout after 200 ms", 0}}},
    {"drain: draining again restarts the wait",
     CONF,
     {BOOT,
      {500, 'd', 0, true, D, NULL, 0},
      {900, 'o', 0, false, D, NULL, 0},
      {950, 'd', 0, false, D, NULL, 0},
      {1000, 'o', 0, false, D, NULL, 0},
      {1400, 'o', 0, false, D, NULL, 0},
      {1450, 'o', 0, true, DD, "500 ms", 0},
      {1500, 'd', 0, true, D, "drain requested", 0}}},
    {"drain: works from the start, before any announce",
     CONF,
     {{0, 'd', 0, true, D, "drain requested", 0},
      {100, 'o', 0, false, D, NULL, 0},
      {500, 'o', 0, true, DD, NULL, 0}}},
    {"undrain: not draining is refused and changes nothing",
     CONF,
     {BOOT, {500, 'u', 0, false, A, "good for 5 rounds", 0}}},
    {"undrain: announced at once when the self-check is good",
     CONF,
     {BOOT,
      {500, 'd', 0, true, D, NULL, 0},
      {600, 'o', 0, false, D, NULL, 0},
      {650, 'u', 0, true, A, "undrain: self-check good", 0}}},
    {"undrain: from drained, and without hold-down after failures that recovered",
     CONF,
     {BOOT,
      {500, 'd', 0, true, D, NULL, 0},
      {600, 'f', 0, false, D, NULL, 0},
      {700, 'f', 0, false, D, NULL, 0},
      {800, 'f', 0, false, D, NULL, 0},
      {1000, 'o', 0, true, DD, NULL, 0},
      {1100, 'o', 0, false, DD, NULL, 0},
      {1200, 'o', 0, false, DD, NULL, 0},
      {1300, 'o', 0, false, DD, NULL, 0},
      {1400, 'o', 0, false, DD, NULL, 0},
      {1450, 'u', 0, true, A, "undrain: self-check good", 0}}},
    {"undrain: failing self-check stays withdrawn with the hold-down of its failures",
     CONF,
     {BOOT,
      {500, 'd', 0, true, D, NULL, 0},
      {600, 'f', 0, false, D, NULL, 0},
      {700, 'f', 0, false, D, NULL, 0},
      {800, 'f', 0, false, D, NULL, 0},
      {900, 'u', 0, true, W, "undrain: waiting for the self-check (0 of 5", 1900},
      {1000, 'o', 0, false, W, NULL, ANY},
      {1100, 'o', 0, false, W, NULL, ANY},
      {1200, 'o', 0, false, W, NULL, ANY},
      {1300, 'o', 0, false, W, NULL, ANY},
      {1400, 'o', 0, false, W, NULL, 1400},
      {2800, 'o', 0, true, A, "hold-down", 0}}},
    {"undrain: drained before the first announce waits for rise, no hold-down",
     CONF,
     {{0, 'o', 0, false, S, NULL, 0},
      {50, 'd', 0, true, D, NULL, 0},
      {100, 'o', 0, false, D, NULL, 0},
      {150, 'u', 0, true, W, "(2 of 5", 0},
      {200, 'o', 0, false, W, NULL, 0},
      {300, 'o', 0, false, W, NULL, 0},
      {400, 'o', 0, true, A, "good for 5 rounds", 0}}},
    {"keeper: a self-withdraw while draining needs rise rounds at undrain",
     CONF,
     {BOOT,
      {500, 'd', 0, true, D, NULL, 0},
      {600, 'k', 0, false, D, "drain requested", 0},
      {700, 'o', 0, false, D, NULL, 0},
      {750, 'u', 0, true, W, "(1 of 5", ANY},
      {800, 'o', 0, false, W, NULL, ANY},
      {900, 'o', 0, false, W, NULL, ANY},
      {1000, 'o', 0, false, W, NULL, ANY},
      {1100, 'o', 0, false, W, NULL, ANY},
      {2600, 'o', 0, true, A, NULL, 0}}},
    {"fall 1, rise 1, no hold-down",
     {1, 1, 0, 500, 3000},
     {{0, 'o', 0, true, A, NULL, 0},
      {100, 'f', 0, true, W, "timeout", 0},
      {200, 'o', 0, true, A, "good for 1 rounds", 0},
      {300, 'f', 0, true, W, NULL, 0},
      {400, 'f', 0, false, W, NULL, 0}}},
};

static bool run_step(cluster_selfcheck_t *sc, const step_t *s)
{
	switch (s->op) {
	case 'o':
		return cluster_selfcheck_round(sc, s->t, true, NULL, true);
	case 'b':
		return cluster_selfcheck_round(sc, s->t, true, NULL, false);
	case 'f':
		return cluster_selfcheck_round(sc, s->t, false,
		                               "answer: 192.0.2.53: timeout after 80 ms", true);
	case 'F':
		return cluster_selfcheck_round(sc, s->t, false, "threads: worker 2 stuck", false);
	case 'k':
		return cluster_selfcheck_keeper_withdrew(sc, s->t,
		                                         "withdrawn: no heartbeat for 312 ms");
	case 'd':
		return cluster_selfcheck_drain(sc, s->t, s->arg);
	case 'u':
		return cluster_selfcheck_undrain(sc, s->t);
	}
	return false;
}

static void test_scenarios(void)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(scenarios); i++) {
		const scenario_t *sc_def = &scenarios[i];
		cluster_selfcheck_t sc;
		cluster_selfcheck_init(&sc, &sc_def->conf);
		uint64_t transitions = 0;
		bool announced = false;
		for (size_t j = 0; j < STEPS_MAX && sc_def->steps[j].op; j++) {
			const step_t *s = &sc_def->steps[j];
			bool ret = run_step(&sc, s);
			CHECK(ret == s->ret, "%s: step %zu (%c at %llu): returned %d, want %d",
			      sc_def->name, j, s->op, (unsigned long long)s->t, ret, s->ret);
			CHECK(sc.state == s->st, "%s: step %zu (%c at %llu): state %s, want %s",
			      sc_def->name, j, s->op, (unsigned long long)s->t,
			      cluster_state_name(sc.state), cluster_state_name(s->st));
			CHECK(!s->reason || strstr(sc.reason, s->reason),
			      "%s: step %zu: reason '%s' lacks '%s'", sc_def->name, j, sc.reason,
			      s->reason);
			long hold = (long)cluster_selfcheck_hold_left(&sc, s->t);
			CHECK(s->hold == ANY || hold == s->hold,
			      "%s: step %zu: hold-down left %ld, want %ld", sc_def->name, j, hold,
			      s->hold);
			bool now_announced = cluster_selfcheck_announce(&sc);
			CHECK(now_announced == (s->st == A),
			      "%s: step %zu: announce %d in state %s", sc_def->name, j,
			      now_announced, cluster_state_name(sc.state));
			if (now_announced != announced)
				transitions++;
			announced = now_announced;
			CHECK(sc.transitions == transitions,
			      "%s: step %zu: %llu transitions counted, want %llu", sc_def->name, j,
			      (unsigned long long)sc.transitions, (unsigned long long)transitions);
		}
	}
}

/* The drain's end state says how it ended. */
static void test_drain_flags(void)
{
	cluster_selfcheck_conf_t conf = CONF;
	cluster_selfcheck_t sc;
	cluster_selfcheck_init(&sc, &conf);
	cluster_selfcheck_drain(&sc, 1000, 300);
	CHECK(sc.drain_start_ms == 1000 && sc.drain_deadline_ms == 1300, "drain window %llu..%llu",
	      (unsigned long long)sc.drain_start_ms, (unsigned long long)sc.drain_deadline_ms);
	cluster_selfcheck_round(&sc, 1300, true, NULL, false);
	CHECK(sc.state == DD && sc.drain_timed_out, "timed-out drain: %s timed_out %d",
	      cluster_state_name(sc.state), sc.drain_timed_out);
	cluster_selfcheck_drain(&sc, 2000, 0);
	CHECK(!sc.drain_timed_out && sc.drain_deadline_ms == 5000,
	      "a new drain clears the flag, deadline %llu",
	      (unsigned long long)sc.drain_deadline_ms);
	cluster_selfcheck_round(&sc, 2500, true, NULL, true);
	CHECK(sc.state == DD && !sc.drain_timed_out, "quiet drain: %s timed_out %d",
	      cluster_state_name(sc.state), sc.drain_timed_out);
	CHECK(cluster_selfcheck_undrain(&sc, 2600) && sc.state == W && !sc.drain_timed_out,
	      "undrain before any good verdict: %s", cluster_state_name(sc.state));
}

/*
 * Reference: from ANNOUNCED (after a boot), walk a sequence of rounds 100 ms apart; the node
 * withdraws at the first run of fall failures, and announces again at the first round that
 * ends a run of rise good rounds at least hold-down after the round that withdrew (or that
 * last turned the verdict bad).
 */
static void model(const bool *rounds, size_t n, unsigned fall, unsigned rise, unsigned hold,
                  bool *want)
{
	bool announced = true, healthy = true;
	unsigned good = rise, bad = 0;
	uint64_t hold_until = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t t = 1000 + 100 * i;
		if (rounds[i]) {
			bad = 0;
			good++;
			if (good >= rise)
				healthy = true;
		} else {
			good = 0;
			bad++;
			if (healthy && bad >= fall) {
				healthy = false;
				hold_until = t + hold;
			}
		}
		if (announced && !healthy)
			announced = false;
		else if (!announced && healthy && t >= hold_until)
			announced = true;
		want[i] = announced;
	}
}

#define SEQ_LEN 12

static void test_all_sequences(void)
{
	static const unsigned holds[] = {0, 100, 350, 1000};
	for (unsigned fall = 1; fall <= 3; fall++) {
		for (unsigned rise = 1; rise <= 3; rise++) {
			for (size_t h = 0; h < STEER_ARRAY_LEN(holds); h++) {
				cluster_selfcheck_conf_t conf = {fall, rise, holds[h], 500, 3000};
				for (unsigned bits = 0; bits < (1u << SEQ_LEN); bits++) {
					bool rounds[SEQ_LEN], want[SEQ_LEN];
					for (unsigned i = 0; i < SEQ_LEN; i++)
						rounds[i] = !(bits >> i & 1);
					model(rounds, SEQ_LEN, fall, rise, holds[h], want);
					cluster_selfcheck_t sc;
					cluster_selfcheck_init(&sc, &conf);
					for (unsigned i = 0; i < rise; i++)
						cluster_selfcheck_round(&sc, 100 * i, true, NULL,
						                        true);
					bool ok = cluster_selfcheck_announce(&sc);
					for (unsigned i = 0; ok && i < SEQ_LEN; i++) {
						cluster_selfcheck_round(&sc, 1000 + 100 * i,
						                        rounds[i], "f", true);
						ok = cluster_selfcheck_announce(&sc) == want[i];
					}
					CHECK(ok, "fall %u rise %u hold %u: sequence %03x differs",
					      fall, rise, holds[h], bits);
				}
			}
		}
	}
}

int main(void)
{
	test_scenarios();
	test_drain_flags();
	test_all_sequences();
	return unit_finish("cluster_selfcheck");
}
