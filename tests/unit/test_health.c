/*
 * Unit tests of src/gslb/health (the packed state table, admin overrides and the state file)
 * and of src/gslb/admin (the served view's layers: admin rules over config rules over monitor
 * states, with the state file).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "conf/conf.h"
#include "gslb/admin.h"
#include "gslb/health.h"
#include "unit.h"

#define STEER_EISDIR_FOR_TEST (-EISDIR) /* no steer_err name: passed through as -errno */

static void test_sttl_packing(void)
{
	static const struct {
		bool down;
		uint32_t ttl;
		uint32_t want_ttl;
	} rows[] = {
	    {false, 0, 0},
	    {true, 0, 0},
	    {false, 30, 30},
	    {true, 86400, 86400},
	    {false, GSLB_STTL_TTL_MAX, GSLB_STTL_TTL_MAX},
	    {true, UINT32_MAX, GSLB_STTL_TTL_MAX}, /* clamped, must not bleed into the flags */
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		gslb_sttl_t s = gslb_sttl_make(rows[i].down, rows[i].ttl);
		CHECK(gslb_sttl_down(s) == rows[i].down, "row %zu: down", i);
		CHECK(!gslb_sttl_forced(s), "row %zu: not forced", i);
		CHECK(gslb_sttl_ttl(s) == rows[i].want_ttl, "row %zu: ttl %u", i, gslb_sttl_ttl(s));
	}
}

static const char *const names[] = {
    "service/vpn.example.test/telecom/198.51.100.10",  /* 0 */
    "service/vpn.example.test/telecom/2001:db8:1::10", /* 1 */
    "service/vpn.example.test/unicom/203.0.113.10",    /* 2 */
    "service/vpn.example.test/edu/192.0.2.10",         /* 3 */
    "service/www.example.test/telecom/198.51.100.20",  /* 4 */
    "service/www.example.test/unicom/2001:db8:2::10",  /* 5 */
    "service/www.example.test/edu/192.0.2.20",         /* 6 */
    "service/telecom/edu/192.0.2.30",                  /* 7: a service named like a DC */
};
#define N_TARGETS STEER_ARRAY_LEN(names)

static gslb_health_t *named_table(void)
{
	gslb_health_t *h = gslb_health_new(N_TARGETS);
	for (uint32_t i = 0; i < N_TARGETS; i++)
		CHECK(gslb_health_set_name(h, i, names[i]) == 0, "name %u", i);
	return h;
}

/* "D" for forced DOWN, "U" for forced UP, "-" for monitor state UP, per target. */
static void states_str(const gslb_health_t *h, char *out)
{
	for (uint32_t i = 0; i < h->count; i++) {
		gslb_sttl_t s = gslb_health_sttl(h, i);
		out[i] = gslb_sttl_forced(s) ? (gslb_sttl_down(s) ? 'D' : 'U')
		                             : (gslb_sttl_down(s) ? 'd' : '-');
	}
	out[h->count] = '\0';
}

static void test_table_basics(void)
{
	gslb_health_t *h = gslb_health_new(3);
	CHECK(h->count == 3, "count");
	for (uint32_t i = 0; i < 3; i++)
		CHECK(gslb_health_sttl(h, i) == 0, "target %u UP, no cap by default", i);
	CHECK(gslb_health_sttl(h, 3) == 0 && gslb_health_sttl(h, UINT32_MAX) == 0,
	      "ids beyond the table read as UP");
	CHECK(gslb_health_set_monitor(h, 3, GSLB_STTL_DOWN) == STEER_ERANGE, "set beyond");
	CHECK(gslb_health_set_name(h, 3, "x") == STEER_ERANGE, "name beyond");
	CHECK(gslb_health_set_name(h, 0, "") == STEER_EINVAL, "empty name");
	CHECK(gslb_health_set_name(h, 0, "a b") == STEER_EINVAL, "name with a blank");
	CHECK(gslb_health_set_name(h, 0, "a\nb") == STEER_EINVAL, "name with a newline");
	CHECK(gslb_health_set_monitor(h, 1, gslb_sttl_make(true, 20) | GSLB_STTL_FORCED) == 0,
	      "set monitor");
	gslb_sttl_t s = gslb_health_sttl(h, 1);
	CHECK(gslb_sttl_down(s) && !gslb_sttl_forced(s) && gslb_sttl_ttl(s) == 20,
	      "monitor state read back, FORCED bit not accepted from a monitor");
	gslb_health_entry_t e;
	CHECK(gslb_health_entry(h, 3, &e) == STEER_ERANGE, "entry beyond");

	gslb_health_t *d = gslb_health_dup(h, 5);
	CHECK(d->count == 5, "dup grows");
	CHECK(gslb_health_sttl(d, 1) == gslb_health_sttl(h, 1), "dup keeps states");
	CHECK(gslb_health_sttl(d, 4) == 0, "new target UP");
	CHECK(gslb_health_set_monitor(d, 1, 0) == 0 && gslb_health_sttl(h, 1) != 0,
	      "dup is independent of the original");
	gslb_health_t *same = gslb_health_dup(h, 1);
	CHECK(same->count == 3, "dup never shrinks");
	gslb_health_free(same);
	gslb_health_free(d);
	gslb_health_free(h);
	gslb_health_free(NULL);

	gslb_health_t *z = gslb_health_new(0);
	CHECK(z->count == 0 && gslb_health_sttl(z, 0) == 0, "empty table");
	gslb_health_free(z);
}

static void test_load_values(void)
{
	gslb_health_t *h = gslb_health_new(3);
	CHECK(gslb_health_load(h, 0) == NULL && gslb_health_load(NULL, 0) == NULL,
	      "no load values in a new table");
	gslb_load_t none = {.v = {1}};
	CHECK(gslb_health_set_load(h, 0, &none) == 0 && h->load == NULL,
	      "clearing values of a table without any allocates nothing");
	gslb_load_t l = {
	    .have = 1u << GSLB_LOAD_CONNECTIONS | 1u << GSLB_LOAD_KBPS, .age_ms = 1500, .round = 7};
	l.v[GSLB_LOAD_CONNECTIONS] = 42;
	l.v[GSLB_LOAD_KBPS] = 12.5f;
	CHECK(gslb_health_set_load(h, 3, &l) == STEER_ERANGE, "set beyond the table");
	CHECK(gslb_health_set_load(h, 1, &l) == 0, "set");
	const gslb_load_t *got = gslb_health_load(h, 1);
	CHECK(got && got->v[GSLB_LOAD_CONNECTIONS] == 42 && got->v[GSLB_LOAD_KBPS] == 12.5f &&
	          got->have == l.have && got->age_ms == 1500 && got->round == 7,
	      "values read back");
	CHECK(gslb_health_load(h, 0) == NULL && gslb_health_load(h, 2) == NULL &&
	          gslb_health_load(h, 99) == NULL,
	      "other targets and ids beyond have none");

	gslb_health_t *d = gslb_health_dup(h, 5);
	got = gslb_health_load(d, 1);
	CHECK(got && got->v[GSLB_LOAD_CONNECTIONS] == 42 && got->round == 7, "dup copies values");
	CHECK(gslb_health_load(d, 4) == NULL, "new target of a dup has none");
	CHECK(gslb_health_set_load(d, 4, &l) == 0 && gslb_health_load(d, 4) != NULL,
	      "set on a grown target");
	CHECK(gslb_health_set_load(d, 1, NULL) == 0 && gslb_health_load(d, 1) == NULL &&
	          gslb_health_load(h, 1) != NULL,
	      "clearing in the dup leaves the original alone");
	gslb_health_free(d);
	gslb_health_free(h);
}

static void test_override_globs(void)
{
	static const struct {
		const char *what;
		const char *rules[4]; /* "PATTERN STATE" */
		const char *want;     /* per target, see states_str() */
	} rows[] = {
	    {"no rules", {NULL}, "--------"},
	    {"datacenter everywhere", {"*/*/telecom/* DOWN"}, "DD--D---"},
	    {"whole service", {"service/vpn.example.test/* DOWN"}, "DDDD----"},
	    {"one address", {"service/www.example.test/edu/192.0.2.20 DOWN"}, "------D-"},
	    {"last rule wins", {"service/vpn.example.test/* DOWN", "*/*/edu/* UP"}, "DDDU--UU"},
	    {"order matters", {"*/*/edu/* UP", "service/vpn.example.test/* DOWN"}, "DDDD--UU"},
	    {"case-insensitive", {"SERVICE/WWW.Example.TEST/* DOWN"}, "----DDD-"},
	    {"character class", {"*/*/[tu]*/* DOWN"}, "DDD-DD--"},
	    {"negated class", {"*/*/[!e]*/* DOWN"}, "DDD-DD--"},
	    {"IPv6 only", {"*:* DOWN"}, "-D---D--"},
	    {"everything", {"* DOWN"}, "DDDDDDDD"},
	    {"service named telecom is not a DC", {"service/telecom/* DOWN"}, "-------D"},
	    {"matches nothing", {"service/nope/* DOWN"}, "--------"},
	    {"forced UP looks UP", {"* UP"}, "UUUUUUUU"},
	};
	for (size_t r = 0; r < STEER_ARRAY_LEN(rows); r++) {
		gslb_health_t *h = named_table();
		gslb_overrides_t ov;
		gslb_overrides_init(&ov);
		for (size_t i = 0; i < 4 && rows[r].rules[i]; i++) {
			char pat[128], state[16], err[256];
			CHECK(sscanf(rows[r].rules[i], "%127s %15s", pat, state) == 2, "row");
			int ret = gslb_overrides_set(&ov, pat, strcmp(state, "DOWN") == 0, 0, err,
			                             sizeof(err));
			CHECK(ret == 0, "%s: rule '%s': %s", rows[r].what, pat, err);
		}
		gslb_health_apply_overrides(h, &ov, NULL);
		char got[N_TARGETS + 1];
		states_str(h, got);
		CHECK(strcmp(got, rows[r].want) == 0, "%s: got %s, want %s", rows[r].what, got,
		      rows[r].want);
		gslb_overrides_deinit(&ov);
		gslb_health_free(h);
	}
}

static void test_override_semantics(void)
{
	gslb_health_t *h = named_table();
	gslb_overrides_t ov;
	gslb_overrides_init(&ov);
	char err[256];
	/* Monitor: target 0 DOWN with a 7 s cap, target 2 UP with a 9 s cap. */
	CHECK(gslb_health_set_monitor(h, 0, gslb_sttl_make(true, 7)) == 0, "mon 0");
	CHECK(gslb_health_set_monitor(h, 2, gslb_sttl_make(false, 9)) == 0, "mon 2");
	CHECK(gslb_overrides_set(&ov, "*/*/telecom/*", false, 3, err, sizeof(err)) == 0, "up");
	CHECK(gslb_overrides_set(&ov, "*/*/unicom/*", true, 0, err, sizeof(err)) == 0, "down");
	uint32_t matches[2];
	gslb_health_apply_overrides(h, &ov, matches);
	CHECK(matches[0] == 3 && matches[1] == 2, "match counts %u %u", matches[0], matches[1]);
	gslb_sttl_t s0 = gslb_health_sttl(h, 0), s2 = gslb_health_sttl(h, 2);
	CHECK(!gslb_sttl_down(s0) && gslb_sttl_forced(s0) && gslb_sttl_ttl(s0) == 7,
	      "forced UP wins over a DOWN monitor, keeps its TTL cap");
	CHECK(gslb_sttl_down(s2) && gslb_sttl_forced(s2) && gslb_sttl_ttl(s2) == 9,
	      "forced DOWN wins over an UP monitor, keeps its TTL cap");

	/* A monitor update under an override changes the monitor column only. */
	CHECK(gslb_health_set_monitor(h, 0, gslb_sttl_make(true, 4)) == 0, "mon 0 again");
	s0 = gslb_health_sttl(h, 0);
	CHECK(!gslb_sttl_down(s0) && gslb_sttl_ttl(s0) == 4, "still forced UP, new cap");

	gslb_health_entry_t e;
	char reason[256];
	CHECK(gslb_health_entry(h, 0, &e) == 0, "entry 0");
	CHECK(e.forced && e.rule_line == 3 && strcmp(e.pattern, "*/*/telecom/*") == 0 &&
	          gslb_sttl_down(e.monitor) && !gslb_sttl_down(e.eff),
	      "entry 0 fields");
	gslb_health_reason(&e, reason, sizeof(reason));
	CHECK(strcmp(reason, "forced UP by override '*/*/telecom/*' (line 3); monitor: DOWN") == 0,
	      "reason 0: %s", reason);
	CHECK(gslb_health_entry(h, 2, &e) == 0, "entry 2");
	gslb_health_reason(&e, reason, sizeof(reason));
	CHECK(strcmp(reason, "forced DOWN by override '*/*/unicom/*'; monitor: UP") == 0,
	      "reason 2: %s", reason);
	CHECK(gslb_health_entry(h, 3, &e) == 0 && !e.forced && !e.pattern, "entry 3");
	gslb_health_reason(&e, reason, sizeof(reason));
	CHECK(strcmp(reason, "monitor: UP") == 0, "reason 3: %s", reason);

	/* Reasons survive the list they came from: the table keeps its own copy. */
	gslb_overrides_t other;
	gslb_overrides_init(&other);
	gslb_health_t *next = gslb_health_dup(h, h->count);
	gslb_overrides_deinit(&ov);
	CHECK(gslb_health_entry(next, 0, &e) == 0 && e.pattern &&
	          strcmp(e.pattern, "*/*/telecom/*") == 0,
	      "dup keeps the rule text after the list is gone");

	/* Clearing the overrides returns every target to its monitor state. */
	gslb_health_apply_overrides(next, &other, NULL);
	s0 = gslb_health_sttl(next, 0);
	s2 = gslb_health_sttl(next, 2);
	CHECK(gslb_sttl_down(s0) && !gslb_sttl_forced(s0), "back to monitor DOWN");
	CHECK(!gslb_sttl_down(s2) && !gslb_sttl_forced(s2), "back to monitor UP");

	/* Unnamed targets match nothing, even "*". */
	gslb_health_t *grown = gslb_health_dup(next, next->count + 1);
	CHECK(gslb_overrides_set(&other, "*", true, 0, err, sizeof(err)) == 0, "star");
	gslb_health_apply_overrides(grown, &other, NULL);
	CHECK(gslb_sttl_down(gslb_health_sttl(grown, 1)), "named target forced");
	CHECK(!gslb_sttl_down(gslb_health_sttl(grown, N_TARGETS)), "unnamed target untouched");
	gslb_overrides_deinit(&other);
	gslb_health_free(grown);
	gslb_health_free(next);
	gslb_health_free(h);
}

static int count_cb(const gslb_health_entry_t *e, void *ctx)
{
	unsigned *n = ctx;
	if (e->id != *n)
		return -1; /* out of order */
	(*n)++;
	return *n == 5 ? 42 : 0;
}

static void test_list(void)
{
	gslb_health_t *h = named_table();
	unsigned n = 0;
	CHECK(gslb_health_list(h, count_cb, &n) == 42 && n == 5, "list stops at non-zero (%u)", n);
	gslb_health_free(h);
}

static void test_override_list(void)
{
	static const struct {
		const char *pattern;
		const char *err; /* substring, NULL if accepted */
	} rows[] = {
	    {"*/*/telecom/*", NULL},
	    {"service/[ab]*", NULL},
	    {"service/[]]*", NULL},
	    {"service/[!]]*", NULL},
	    {"service/\\[x", NULL},
	    {"", "empty"},
	    {"a b", "whitespace"},
	    {"a\tb", "whitespace"},
	    {"a#b", "'#'"},
	    {"service/*[telecom", "unclosed '['"},
	    {"service/[!", "unclosed '['"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		gslb_overrides_t ov;
		gslb_overrides_init(&ov);
		char err[256] = "";
		int ret = gslb_overrides_set(&ov, rows[i].pattern, true, 0, err, sizeof(err));
		if (!rows[i].err)
			CHECK(ret == 0 && ov.count == 1, "'%s' accepted (%s)", rows[i].pattern,
			      err);
		else
			CHECK(ret == STEER_EINVAL && ov.count == 0 && strstr(err, rows[i].err),
			      "'%s' rejected with '%s': %d '%s'", rows[i].pattern, rows[i].err, ret,
			      err);
		gslb_overrides_deinit(&ov);
	}
	char big[1100];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	gslb_overrides_t ov;
	gslb_overrides_init(&ov);
	char err[256];
	CHECK(gslb_overrides_set(&ov, big, true, 0, err, sizeof(err)) == STEER_EINVAL,
	      "over-long pattern");

	/* Setting a pattern again moves it last, so the newest command wins. */
	CHECK(gslb_overrides_set(&ov, "a/*", true, 0, err, sizeof(err)) == 0, "a");
	CHECK(gslb_overrides_set(&ov, "b/*", true, 0, err, sizeof(err)) == 0, "b");
	CHECK(gslb_overrides_set(&ov, "a/*", false, 0, err, sizeof(err)) == 0, "a again");
	CHECK(ov.count == 2 && strcmp(ov.rules[0].pattern, "b/*") == 0 &&
	          strcmp(ov.rules[1].pattern, "a/*") == 0 && !ov.rules[1].down,
	      "re-set moves the rule last with its new state");
	CHECK(gslb_overrides_remove(&ov, "b/*", GSLB_OVERRIDE_STATE) == 0 && ov.count == 1,
	      "remove");
	CHECK(gslb_overrides_remove(&ov, "b/*", GSLB_OVERRIDE_STATE) == STEER_ENOENT,
	      "remove twice");
	/* Many rules force the array to grow. */
	for (int i = 0; i < 100; i++) {
		char p[32];
		snprintf(p, sizeof(p), "p%d/*", i);
		CHECK(gslb_overrides_set(&ov, p, i % 2, 0, err, sizeof(err)) == 0, "%s", p);
	}
	CHECK(ov.count == 101, "101 rules");
	gslb_overrides_deinit(&ov);
	CHECK(ov.count == 0 && !ov.rules, "deinit empties");
}

static void test_state_file_load(void)
{
	static const struct {
		const char *file;
		int ret;
		const char *err; /* exact message */
	} rows[] = {
	    {"gslb/state/good.state", 0, NULL},
	    {"gslb/state/empty.state", 0, NULL},
	    {"gslb/state/crlf.state", 0, NULL},
	    {"gslb/state/bad_missing_state.state", STEER_ESYNTAX,
	     "gslb/state/bad_missing_state.state:2: missing state after "
	     "'service/vpn.example.test/*' (want UP, DOWN or WEIGHT n)"},
	    {"gslb/state/bad_state_word.state", STEER_ESYNTAX,
	     "gslb/state/bad_state_word.state:4: bad state 'SIDEWAYS' (want UP, DOWN or WEIGHT n)"},
	    {"gslb/state/bad_weight.state", STEER_ESYNTAX,
	     "gslb/state/bad_weight.state:2: bad weight '-3' (want 0..65535)"},
	    {"gslb/state/bad_weight_big.state", STEER_ESYNTAX,
	     "gslb/state/bad_weight_big.state:1: bad weight '65536' (want 0..65535)"},
	    {"gslb/state/bad_weight_missing.state", STEER_ESYNTAX,
	     "gslb/state/bad_weight_missing.state:1: bad weight '' (want 0..65535)"},
	    {"gslb/state/bad_weight_extra.state", STEER_ESYNTAX,
	     "gslb/state/bad_weight_extra.state:1: unexpected 'x' after the weight"},
	    {"gslb/state/bad_extra_word.state", STEER_ESYNTAX,
	     "gslb/state/bad_extra_word.state:1: unexpected 'now' after the state"},
	    {"gslb/state/bad_bracket.state", STEER_ESYNTAX,
	     "gslb/state/bad_bracket.state:3: unclosed '[' in pattern 'service/*[telecom/*'"},
	    {"gslb/state/bad_nul.state", STEER_ESYNTAX,
	     "gslb/state/bad_nul.state:2: NUL byte in line"},
	    {"gslb/state", STEER_EISDIR_FOR_TEST, "gslb/state: read error: Is a directory"},
	    {"gslb/state/missing.state", STEER_ENOENT,
	     "gslb/state/missing.state: No such file or directory"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		gslb_overrides_t ov;
		gslb_overrides_init(&ov);
		char err[512] = "";
		/* A rule loaded before must survive a failed load. */
		CHECK(gslb_overrides_set(&ov, "keep/*", true, 0, err, sizeof(err)) == 0, "keep");
		int ret = gslb_overrides_load(&ov, rows[i].file, err, sizeof(err));
		CHECK(ret == rows[i].ret, "%s: ret %d, want %d (%s)", rows[i].file, ret,
		      rows[i].ret, err);
		if (rows[i].err) {
			CHECK(strcmp(err, rows[i].err) == 0, "%s: error '%s'", rows[i].file, err);
			CHECK(ov.count == 1 && strcmp(ov.rules[0].pattern, "keep/*") == 0,
			      "%s: failed load leaves the list unchanged", rows[i].file);
		} else {
			CHECK(ov.count == 0 || strcmp(ov.rules[0].pattern, "keep/*") != 0,
			      "%s: load replaces the list", rows[i].file);
		}
		gslb_overrides_deinit(&ov);
	}

	gslb_overrides_t ov;
	gslb_overrides_init(&ov);
	char err[512];
	CHECK(gslb_overrides_load(&ov, "gslb/state/good.state", err, sizeof(err)) == 0, "good");
	static const struct {
		const char *pattern;
		bool down;
		uint32_t line;
	} want[] = {
	    {"*/*/telecom/*", true, 3},
	    {"service/vpn.example.test/*", true, 5},
	    {"service/vpn.example.test/edu/192.0.2.10", false, 6},
	    {"service/WWW.example.test/unicom/2001:db8:2::10", true, 8},
	    {"service/www.example.test/*", false, 9},
	};
	CHECK(ov.count == STEER_ARRAY_LEN(want), "good: %zu rules", ov.count);
	for (size_t i = 0; i < ov.count && i < STEER_ARRAY_LEN(want); i++)
		CHECK(strcmp(ov.rules[i].pattern, want[i].pattern) == 0 &&
		          ov.rules[i].down == want[i].down && ov.rules[i].line == want[i].line &&
		          ov.rules[i].kind ==
		              (i == 4 ? GSLB_OVERRIDE_WEIGHT : GSLB_OVERRIDE_STATE) &&
		          ov.rules[i].weight == (i == 4 ? 25 : 0),
		      "good rule %zu: '%s' %d line %u", i, ov.rules[i].pattern, ov.rules[i].down,
		      ov.rules[i].line);
	gslb_health_t *h = named_table();
	gslb_health_apply_overrides(h, &ov, NULL);
	char got[N_TARGETS + 1];
	states_str(h, got);
	CHECK(strcmp(got, "DDDUDD--") == 0, "good file applied: %s", got);
	gslb_health_free(h);
	gslb_overrides_deinit(&ov);

	CHECK(gslb_overrides_load(&ov, "gslb/state/crlf.state", err, sizeof(err)) == 0 &&
	          ov.count == 2 && strcmp(ov.rules[1].pattern, "b/*") == 0 && ov.rules[1].down,
	      "CRLF line ends");
	gslb_overrides_deinit(&ov);
}

/* Write @p text to a fresh file under @p dir and load it into @p ov. */
static int load_text(const char *dir, const char *text, gslb_overrides_t *ov, char *err,
                     size_t errlen)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/expiry.state", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return STEER_ENOENT;
	fputs(text, f);
	fclose(f);
	int ret = gslb_overrides_load(ov, path, err, errlen);
	unlink(path);
	return ret;
}

/* "UNTIL T" after a rule: kept to the millisecond, lapsed rules skipped, bad forms refused. */
static void test_state_file_expiry(void)
{
	char dir[] = "/tmp/steer-test-expiry-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	static const struct {
		const char *text;
		int ret;
		size_t count;       /* rules loaded */
		int64_t expires_ms; /* of the last rule */
		const char *err;    /* a piece of the message */
	} rows[] = {
	    {"a/* DOWN UNTIL 4102444800\n", 0, 1, 4102444800000, NULL},
	    {"a/* DOWN UNTIL 4102444800.25\n", 0, 1, 4102444800250, NULL},
	    {"a/* up until 4102444800.123 # 2100-01-01\n", 0, 1, 4102444800123, NULL},
	    {"a/* WEIGHT 4 UNTIL 4102444800.5\n", 0, 1, 4102444800500, NULL},
	    {"a/* DOWN\n", 0, 1, 0, NULL},
	    /* lapsed while the daemon was down: skipped, the others stay */
	    {"a/* DOWN UNTIL 1000000000\nb/* UP\n", 0, 1, 0, NULL},
	    {"a/* WEIGHT 4 UNTIL 1000000000.5\n", 0, 0, 0, NULL},
	    {"a/* DOWN UNTIL\n", STEER_ESYNTAX, 0, 0, "bad time after UNTIL ''"},
	    {"a/* DOWN UNTIL soon\n", STEER_ESYNTAX, 0, 0, "bad time after UNTIL 'soon'"},
	    {"a/* DOWN UNTIL 12.\n", STEER_ESYNTAX, 0, 0, "bad time"},
	    {"a/* DOWN UNTIL 12.1234\n", STEER_ESYNTAX, 0, 0, "bad time"},
	    {"a/* DOWN UNTIL -5\n", STEER_ESYNTAX, 0, 0, "bad time"},
	    {"a/* DOWN UNTIL 0\n", STEER_ESYNTAX, 0, 0, "bad time"},
	    {"a/* DOWN UNTIL 99999999999999\n", STEER_ESYNTAX, 0, 0, "bad time"},
	    {"a/* DOWN UNTIL 4102444800 x\n", STEER_ESYNTAX, 0, 0, "unexpected words after UNTIL"},
	    {"a/* DOWN LATER 4102444800\n", STEER_ESYNTAX, 0, 0,
	     "unexpected 'LATER' after the state"},
	    {"a/* WEIGHT 4 x\n", STEER_ESYNTAX, 0, 0, "unexpected 'x' after the weight"},
	    {"a/* SIDEWAYS UNTIL 4102444800\n", STEER_ESYNTAX, 0, 0, "bad state 'SIDEWAYS'"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		gslb_overrides_t ov;
		gslb_overrides_init(&ov);
		char err[512] = "";
		int ret = load_text(dir, rows[i].text, &ov, err, sizeof(err));
		CHECK(ret == rows[i].ret, "row %zu: ret %d, want %d (%s)", i, ret, rows[i].ret,
		      err);
		if (rows[i].err)
			CHECK(strstr(err, rows[i].err) != NULL, "row %zu: error '%s'", i, err);
		else
			CHECK(ov.count == rows[i].count &&
			          (ov.count == 0 ||
			           ov.rules[ov.count - 1].expires_ms == rows[i].expires_ms),
			      "row %zu: %zu rules, expires %lld", i, ov.count,
			      ov.count ? (long long)ov.rules[ov.count - 1].expires_ms : 0LL);
		gslb_overrides_deinit(&ov);
	}

	/* Saved and read back to the millisecond; the file says when in UTC too. */
	gslb_overrides_t ov, back;
	gslb_overrides_init(&ov);
	gslb_overrides_init(&back);
	char path[128], err[512];
	snprintf(path, sizeof(path), "%s/saved.state", dir);
	gslb_override_t timed = {.pattern = "t/*", .down = true, .expires_ms = 4102444800042};
	gslb_override_t weight = {.pattern = "w/*",
	                          .kind = GSLB_OVERRIDE_WEIGHT,
	                          .weight = 9,
	                          .expires_ms = 4102444801999};
	CHECK(gslb_overrides_add(&ov, &timed, err, sizeof(err)) == 0, "add timed");
	CHECK(gslb_overrides_add(&ov, &weight, err, sizeof(err)) == 0, "add weight");
	CHECK(gslb_overrides_set(&ov, "p/*", false, 0, err, sizeof(err)) == 0, "add permanent");
	CHECK(gslb_overrides_save(&ov, path, err, sizeof(err)) == 0, "save: %s", err);
	CHECK(gslb_overrides_load(&back, path, err, sizeof(err)) == 0, "load back: %s", err);
	CHECK(back.count == 3 && back.rules[0].expires_ms == 4102444800042 &&
	          back.rules[1].expires_ms == 4102444801999 && back.rules[1].weight == 9 &&
	          back.rules[2].expires_ms == 0,
	      "round trip keeps the expiries");
	FILE *f = fopen(path, "r");
	char text[1024] = "";
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	text[n] = '\0';
	if (f)
		fclose(f);
	CHECK(strstr(text, "t/* DOWN UNTIL 4102444800.042 # 2100-01-01T00:00:00Z\n") != NULL,
	      "saved text: %s", text);
	gslb_overrides_deinit(&ov);
	gslb_overrides_deinit(&back);
	unlink(path);
	rmdir(dir);
}

static bool dir_has_only(const char *dir, const char *name)
{
	DIR *d = opendir(dir);
	if (!d)
		return false;
	struct dirent *de;
	bool ok = true;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, name))
			ok = false;
	closedir(d);
	return ok;
}

static void test_state_file_save(void)
{
	char dir[] = "/tmp/steer-test-health-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char path[128], err[512];
	snprintf(path, sizeof(path), "%s/overrides.state", dir);

	gslb_overrides_t ov, back;
	gslb_overrides_init(&ov);
	gslb_overrides_init(&back);
	CHECK(gslb_overrides_load(&ov, "gslb/state/good.state", err, sizeof(err)) == 0, "load");
	CHECK(gslb_overrides_set(&ov, "service/x/[ab]*/*", false, 0, err, sizeof(err)) == 0,
	      "add one through the API");
	CHECK(gslb_overrides_save(&ov, path, err, sizeof(err)) == 0, "save: %s", err);
	CHECK(gslb_overrides_load(&back, path, err, sizeof(err)) == 0, "reload: %s", err);
	CHECK(back.count == ov.count, "round trip keeps %zu rules", back.count);
	for (size_t i = 0; i < back.count && i < ov.count; i++)
		CHECK(strcmp(back.rules[i].pattern, ov.rules[i].pattern) == 0 &&
		          back.rules[i].down == ov.rules[i].down &&
		          back.rules[i].kind == ov.rules[i].kind &&
		          back.rules[i].weight == ov.rules[i].weight,
		      "round trip rule %zu", i);
	struct stat st;
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644, "mode 0644");
	CHECK(dir_has_only(dir, "overrides.state"), "no temporary file left behind");

	/* Saving again replaces the file in place. */
	CHECK(gslb_overrides_remove(&ov, "*/*/telecom/*", GSLB_OVERRIDE_STATE) == 0, "remove");
	CHECK(gslb_overrides_save(&ov, path, err, sizeof(err)) == 0, "save again");
	CHECK(gslb_overrides_load(&back, path, err, sizeof(err)) == 0 && back.count == ov.count,
	      "reload again");
	CHECK(dir_has_only(dir, "overrides.state"), "still one file");

	char bad[160];
	snprintf(bad, sizeof(bad), "%s/no/such/dir/x.state", dir);
	int ret = gslb_overrides_save(&ov, bad, err, sizeof(err));
	CHECK(ret == STEER_ENOENT && strstr(err, bad) && strstr(err, "No such file"),
	      "save into a missing folder: %d %s", ret, err);

	gslb_overrides_deinit(&ov);
	gslb_overrides_deinit(&back);
	unlink(path);
	rmdir(dir);
}

/* Weight rules: per kind the last match wins, state rules are independent, ramps scale. */
static void test_weights(void)
{
	gslb_health_t *h = named_table();
	for (uint32_t i = 0; i < N_TARGETS; i++)
		CHECK(gslb_health_weight(h, i, 7) == 7, "configured weight by default (%u)", i);
	CHECK(gslb_health_weight(NULL, 0, 9) == 9, "no table: configured weight");

	gslb_overrides_t ov;
	gslb_overrides_init(&ov);
	char err[256];
	CHECK(gslb_overrides_set_weight(&ov, "service/vpn.example.test/*", 50, 0, err,
	                                sizeof(err)) == 0,
	      "weight rule");
	CHECK(gslb_overrides_set(&ov, "service/vpn.example.test/*", true, 0, err, sizeof(err)) == 0,
	      "state rule with the same pattern is a second rule");
	CHECK(ov.count == 2, "two kinds, two rules");
	CHECK(gslb_overrides_set_weight(&ov, "*/edu/*", 0, 0, err, sizeof(err)) == 0, "drain edu");
	uint32_t matches[3];
	gslb_health_apply_overrides(h, &ov, matches);
	CHECK(matches[0] == 4 && matches[1] == 4 && matches[2] == 3, "matches %u %u %u", matches[0],
	      matches[1], matches[2]);
	CHECK(gslb_health_weight(h, 0, 7) == 50, "vpn telecom: 50");
	CHECK(gslb_health_weight(h, 3, 7) == 0, "vpn edu: the later rule (0) wins");
	CHECK(gslb_health_weight(h, 4, 7) == 7, "www telecom: configured");
	CHECK(gslb_sttl_down(gslb_health_sttl(h, 0)) && !gslb_sttl_down(gslb_health_sttl(h, 4)),
	      "state rule applied independently");
	gslb_health_entry_t e;
	CHECK(gslb_health_entry(h, 0, &e) == 0 && e.weight == 50 && e.weight_pattern &&
	          strcmp(e.weight_pattern, "service/vpn.example.test/*") == 0,
	      "entry shows the weight rule");
	CHECK(gslb_health_entry(h, 4, &e) == 0 && e.weight == -1 && !e.weight_pattern,
	      "entry without weight rule");

	CHECK(gslb_health_set_ramp(h, 0, 10) == 0 && gslb_health_weight(h, 0, 7) == 5,
	      "ramp 10%% of 50 = 5");
	CHECK(gslb_health_set_ramp(h, 4, 10) == 0 && gslb_health_weight(h, 4, 7) == 1,
	      "ramp rounds up: 10%% of 7 = 1");
	CHECK(gslb_health_entry(h, 4, &e) == 0 && e.ramp == 10, "entry shows the ramp");
	CHECK(gslb_health_set_ramp(h, N_TARGETS, 10) == STEER_ERANGE, "ramp beyond");
	gslb_health_t *d = gslb_health_dup(h, N_TARGETS);
	CHECK(gslb_health_weight(d, 0, 7) == 5, "dup keeps weights and ramps");
	CHECK(gslb_overrides_remove(&ov, "service/vpn.example.test/*", GSLB_OVERRIDE_WEIGHT) == 0,
	      "remove the weight rule only");
	CHECK(ov.count == 2 && ov.rules[0].kind == GSLB_OVERRIDE_STATE, "state rule kept");
	gslb_health_apply_overrides(d, &ov, NULL);
	CHECK(gslb_health_weight(d, 0, 7) == 1, "ramp survives re-applying overrides: 10%% of 7");
	CHECK(gslb_health_set_ramp(d, 0, 100) == 0 && gslb_health_weight(d, 0, 7) == 7,
	      "ramp 100 = full");
	gslb_health_free(d);
	gslb_health_free(h);
	gslb_overrides_deinit(&ov);
}

/* ---- gslb/admin ------------------------------------------------------------------------------ */

static const char admin_yaml[] = "server:\n"
                                 "  listen: [127.0.0.1:5353]\n"
                                 "zones:\n"
                                 "  - domain: example.test\n"
                                 "    file: zones/unit/example.test.zone\n"
                                 "datacenters:\n"
                                 "  - { name: east }\n"
                                 "  - { name: west }\n"
                                 "gslb:\n"
                                 "  state-file: %s\n"
                                 "  overrides:\n"
                                 "    - { pattern: 'service/www.example.test/west/192.0.2.3', "
                                 "state: down }\n"
                                 "services:\n"
                                 "  - name: www.example.test\n"
                                 "    policy: failover\n"
                                 "    all-down: fallback\n"
                                 "    fallback: [192.0.2.99]\n"
                                 "    datacenters:\n"
                                 "      east: { addresses: [192.0.2.1] }\n"
                                 "      west: { addresses: [192.0.2.2, 192.0.2.3], policy: "
                                 "weighted }\n";

/* The state of target @p name in @p v: 'U', 'D', or '?' when unknown; @p weight its override. */
static char target_state(const gslb_view_t *v, const char *name, int32_t *weight)
{
	const gslb_health_t *h = gslb_view_health(v);
	for (uint32_t id = 0; id < h->count; id++) {
		gslb_health_entry_t e;
		if (gslb_health_entry(h, id, &e) == 0 && e.name && strcmp(e.name, name) == 0) {
			if (weight)
				*weight = e.weight;
			return gslb_sttl_down(e.eff) ? 'D' : 'U';
		}
	}
	return '?';
}

/* A fill callback standing for the planner: every target of datacenter east DOWN. */
static void east_down(void *ctx, gslb_health_t *h)
{
	(*(int *)ctx)++;
	for (uint32_t id = 0; id < h->count; id++) {
		gslb_health_entry_t e;
		if (gslb_health_entry(h, id, &e) == 0 && e.name && strstr(e.name, "/east/"))
			CHECK(gslb_health_set_monitor(h, id, gslb_sttl_make(true, 5)) == 0,
			      "set %u", id);
	}
}

static void test_admin(void)
{
	char dir[] = "/tmp/steer-admin-XXXXXX";
	if (!mkdtemp(dir))
		return;
	char conf_path[256], state[256], text[2048], err[512] = "";
	snprintf(conf_path, sizeof(conf_path), "%s/steer.yaml", dir);
	snprintf(state, sizeof(state), "%s/overrides", dir);
	snprintf(text, sizeof(text), admin_yaml, state);
	FILE *f = fopen(conf_path, "w");
	fputs(text, f);
	fclose(f);
	conf_t *conf = NULL;
	gslb_view_t *compiled = NULL, *v = NULL, *next = NULL;
	int ret = conf_load_file(conf_path, &conf, err, sizeof(err));
	if (ret == 0)
		ret = conf_validate(conf, err, sizeof(err));
	if (ret == 0)
		ret = gslb_view_build(conf, NULL, &compiled, NULL, err, sizeof(err));
	CHECK(ret == 0, "admin config builds: %s", err);
	if (ret != 0)
		goto out;
	gslb_admin_t admin;
	gslb_admin_init(&admin);
	CHECK(gslb_admin_load(&admin, conf, err, sizeof(err)) == 0 && admin.rules.count == 0,
	      "no state file yet: no rules (%s)", err);
	CHECK(gslb_admin_apply(&admin, conf, compiled, &v, NULL, err, sizeof(err)) == 0,
	      "apply: %s", err);
	const char *east = "service/www.example.test/east/192.0.2.1";
	const char *w2 = "service/www.example.test/west/192.0.2.2";
	const char *w3 = "service/www.example.test/west/192.0.2.3";
	CHECK(target_state(v, east, NULL) == 'U' && target_state(v, w3, NULL) == 'D',
	      "the config's rule applies");

	static const struct {
		gslb_admin_action_t action;
		uint8_t kind;
		bool any;
		const char *pattern;
		uint16_t weight;
		int ret;
		const char *err;   /* piece of the error, or NULL */
		uint32_t targets;  /* on success */
		const char *saved; /* the state file afterwards ("" = empty) */
	} rows[] = {
	    {GSLB_ADMIN_SET, GSLB_OVERRIDE_WEIGHT, false, "service/www.example.test/east/*", 5,
	     STEER_EINVAL,
	     "service/www.example.test/east/*: policy 'all' of datacenter east in service "
	     "www.example.test ignores weights; weights apply to 'weighted', 'multi' and "
	     "'persist'",
	     0, NULL},
	    {GSLB_ADMIN_SET, GSLB_OVERRIDE_WEIGHT, false, "service/*", 5, STEER_EINVAL,
	     "ignores weights", 0, NULL},
	    {GSLB_ADMIN_SET, GSLB_OVERRIDE_WEIGHT, false, "service/www.example.test/west/*", 7, 0,
	     NULL, 2, "service/www.example.test/west/* WEIGHT 7"},
	    {GSLB_ADMIN_SET, GSLB_OVERRIDE_STATE, false, "service/www.example.test/west/*", 0, 0,
	     NULL, 2, "service/www.example.test/west/* DOWN"},
	    {GSLB_ADMIN_CLEAR, GSLB_OVERRIDE_WEIGHT, false, "service/www.example.test/west/*", 0, 0,
	     NULL, 2, "service/www.example.test/west/* DOWN"},
	    {GSLB_ADMIN_SET, GSLB_OVERRIDE_WEIGHT, false, "service/www.example.test/west/*", 9, 0,
	     NULL, 2, "WEIGHT 9"},
	    {GSLB_ADMIN_CLEAR, GSLB_OVERRIDE_STATE, true, "service/www.example.test/west/*", 0, 0,
	     NULL, 2, ""},
	    {GSLB_ADMIN_CLEAR, GSLB_OVERRIDE_STATE, true, "service/www.example.test/west/*", 0,
	     STEER_ENOENT, "no admin override", 0, NULL},
	    {GSLB_ADMIN_CLEAR, GSLB_OVERRIDE_STATE, true, "service/www.example.test/west/192.0.2.3",
	     0, STEER_ENOENT, "comes from the configuration", 0, NULL},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		gslb_admin_req_t req = {.action = rows[i].action,
		                        .rule = {.pattern = (char *)rows[i].pattern,
		                                 .kind = rows[i].kind,
		                                 .down = true,
		                                 .weight = rows[i].weight},
		                        .any_kind = rows[i].any};
		gslb_admin_result_t res;
		err[0] = '\0';
		size_t before = admin.rules.count;
		ret = gslb_admin_change(&admin, conf, v, &req, &next, &res, err, sizeof(err));
		CHECK(ret == rows[i].ret, "row %zu: ret %d, want %d (%s)", i, ret, rows[i].ret,
		      err);
		if (ret != 0) {
			CHECK(strstr(err, rows[i].err) != NULL, "row %zu: '%s' lacks '%s'", i, err,
			      rows[i].err);
			CHECK(admin.rules.count == before, "row %zu: rules unchanged", i);
			continue;
		}
		CHECK(res.targets == rows[i].targets, "row %zu: %u targets", i, res.targets);
		char saved[512] = "";
		FILE *sf = fopen(state, "r");
		size_t n = sf ? fread(saved, 1, sizeof(saved) - 1, sf) : 0;
		saved[n] = '\0';
		if (sf)
			fclose(sf);
		CHECK(rows[i].saved[0] ? strstr(saved, rows[i].saved) != NULL
		                       : strstr(saved, "service/") == NULL,
		      "row %zu: state file '%s' vs '%s'", i, saved, rows[i].saved);
		gslb_view_free(v);
		v = next;
	}
	int32_t weight = -2;
	CHECK(target_state(v, w2, &weight) == 'U' && weight == -1,
	      "cleared: no state or weight rule left on west (%d)", weight);

	/* Monitor states come from the fill callback; overrides stay on top. */
	int calls = 0;
	next = gslb_admin_monitored(v, east_down, &calls);
	CHECK(calls == 1 && target_state(next, east, NULL) == 'D' &&
	          target_state(next, w2, NULL) == 'U' && target_state(next, w3, NULL) == 'D',
	      "monitored: east DOWN by monitor, w3 still forced DOWN");
	gslb_admin_log_all_down(conf, gslb_view_health(v), gslb_view_health(next));
	gslb_view_free(v);
	v = next;

	/* A reload reads the state file back: a rule written by another process is taken. */
	f = fopen(state, "w");
	fputs("service/www.example.test/west/192.0.2.2 DOWN\n", f);
	fclose(f);
	next = NULL;
	gslb_view_t *fresh = NULL;
	CHECK(gslb_view_build(conf, NULL, &fresh, NULL, err, sizeof(err)) == 0, "rebuild");
	CHECK(gslb_admin_reload(&admin, conf, &fresh, err, sizeof(err)) == 0 && fresh &&
	          admin.rules.count == 1 && target_state(fresh, w2, NULL) == 'D',
	      "reload takes the state file's rule: %s", err);
	gslb_view_free(fresh);
	/* The view builder reads the state file too: break it between the two. */
	CHECK(gslb_view_build(conf, NULL, &fresh, NULL, err, sizeof(err)) == 0, "rebuild");
	f = fopen(state, "w");
	fputs("service/www.example.test/west/192.0.2.2 SIDEWAYS\n", f);
	fclose(f);
	ret = gslb_admin_reload(&admin, conf, &fresh, err, sizeof(err));
	CHECK(ret != 0 && fresh == NULL && admin.rules.count == 1 && strstr(err, ":1:"),
	      "a bad state file fails the reload and keeps the rules: %d %s", ret, err);
	CHECK(gslb_admin_pattern_targets(v, "service/*/west/*") == 2 &&
	          gslb_admin_pattern_targets(v, "[bad") == 0,
	      "pattern target counts");

	/* Timed rules: the earliest expiry, nothing dropped before it, each dropped at it. */
	gslb_admin_req_t timed = {.action = GSLB_ADMIN_SET,
	                          .rule = {.pattern = (char *)east, .expires_ms = 5000}};
	gslb_admin_req_t timed_w = {.action = GSLB_ADMIN_SET,
	                            .rule = {.pattern = "service/www.example.test/west/*",
	                                     .kind = GSLB_OVERRIDE_WEIGHT,
	                                     .weight = 3,
	                                     .expires_ms = 9000}};
	gslb_admin_result_t res;
	CHECK(gslb_admin_next_expiry(&admin) == 0, "no timed rule yet");
	CHECK(gslb_admin_change(&admin, conf, v, &timed, &next, &res, err, sizeof(err)) == 0,
	      "timed set: %s", err);
	gslb_view_free(v);
	v = next;
	CHECK(gslb_admin_change(&admin, conf, v, &timed_w, &next, &res, err, sizeof(err)) == 0,
	      "timed weight: %s", err);
	gslb_view_free(v);
	v = next;
	CHECK(gslb_admin_next_expiry(&admin) == 5000 && target_state(v, east, NULL) == 'U',
	      "forced UP over the monitor's DOWN; earliest expiry %lld",
	      (long long)gslb_admin_next_expiry(&admin));
	CHECK(gslb_admin_expire(&admin, conf, v, 4999, &next) == 0 && next == NULL &&
	          admin.rules.count == 3,
	      "nothing lapses before its time");
	CHECK(gslb_admin_expire(&admin, conf, v, 5000, &next) == 1 && next != NULL &&
	          admin.rules.count == 2 && target_state(next, east, NULL) == 'D',
	      "the state rule lapses at its time: the monitor's DOWN again");
	gslb_view_free(v);
	v = next;
	char saved[512] = "";
	f = fopen(state, "r");
	size_t n = f ? fread(saved, 1, sizeof(saved) - 1, f) : 0;
	saved[n] = '\0';
	if (f)
		fclose(f);
	CHECK(strstr(saved, east) == NULL && strstr(saved, "west/* WEIGHT 3 UNTIL 9.000"),
	      "saved without the lapsed rule: %s", saved);
	CHECK(gslb_admin_next_expiry(&admin) == 9000, "next expiry");
	weight = -2;
	(void)target_state(v, w2, &weight);
	CHECK(weight == 3, "timed weight in effect: %d", weight);
	CHECK(gslb_admin_expire(&admin, conf, v, 20000, &next) == 1 && next != NULL &&
	          admin.rules.count == 1 && gslb_admin_next_expiry(&admin) == 0,
	      "the weight rule lapses");
	weight = -2;
	(void)target_state(next, w2, &weight);
	CHECK(weight == -1 && target_state(next, w2, NULL) == 'D',
	      "back to the configured weight, the permanent rule stays (%d)", weight);
	gslb_view_free(v);
	v = next;
	gslb_admin_deinit(&admin);
out:
	gslb_view_free(v);
	gslb_view_free(compiled);
	conf_free(conf);
	unlink(state);
	unlink(conf_path);
	rmdir(dir);
}

int main(void)
{
	test_sttl_packing();
	test_table_basics();
	test_load_values();
	test_override_globs();
	test_override_semantics();
	test_list();
	test_override_list();
	test_state_file_load();
	test_state_file_save();
	test_state_file_expiry();
	test_weights();
	test_admin();
	return unit_finish("test_health");
}
