/*
 * The monitor engine (see engine.h): scheduling, the state machine and the state file.
 */
#include "health/engine.h"

#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/file.h"
#include "base/log.h"

/* s: how long state changes gather before the state file is written once for all. */
#define HEALTH_SAVE_DELAY 0.1

typedef struct check check_t;

struct check {
	health_engine_t *engine;
	health_check_def_t def; /* strings owned */
	health_check_status_t st;
	health_probe_t *inflight;
	ev_timer next;        /* next probe start */
	ev_timer ramp_timer;  /* slow-start steps */
	uint64_t ok_since_ms; /* monotonic ms of the first success of the current run */
	uint64_t up_at_ms;    /* monotonic ms of the last DOWN -> UP, for slow start */
	time_t changes[HEALTH_FLAP_COUNT]; /* wall clock of the last state changes, ring */
	unsigned n_changes;
	/* metrics checks */
	metrics_expr_t *exprs[HEALTH_METRIC_KINDS]; /* compiled def.spec.metric_expr, owned */
	double prev_raw[HEALTH_METRIC_KINDS];       /* the last scrape's raw numbers, for rates */
	uint64_t prev_raw_ms[HEALTH_METRIC_KINDS];
	uint8_t prev_have;
	uint64_t value_ms[HEALTH_METRIC_KINDS]; /* monotonic ms each value was read */
	uint8_t fresh_told;   /* the fresh mask as of the last change callback (or scrape) */
	ev_timer stale_timer; /* when the next fresh value goes stale */
};

struct health_engine {
	struct ev_loop *loop;
	health_probe_ctx_t *probes;
	char *state_file;
	health_change_cb cb;
	void *arg;
	check_t **checks;
	size_t n_checks;
	uint64_t rng;
	ev_timer save_timer; /* coalesces state-file writes: one per burst of changes */
};

/* ---- small helpers ---- */

static uint64_t now_ms(const health_engine_t *e)
{
	return (uint64_t)(ev_now(e->loop) * 1000.0);
}

static uint64_t rng_next(health_engine_t *e)
{
	e->rng ^= e->rng << 13;
	e->rng ^= e->rng >> 7;
	e->rng ^= e->rng << 17;
	return e->rng;
}

static char **argv_dup(char *const *argv)
{
	if (!argv)
		return NULL;
	size_t n = 0;
	while (argv[n])
		n++;
	char **copy = xcalloc(n + 1, sizeof(*copy));
	for (size_t i = 0; i < n; i++)
		copy[i] = xstrdup(argv[i]);
	return copy;
}

static void argv_free(char *const *argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free((void *)argv);
}

static void def_copy(health_check_def_t *dst, const health_check_def_t *src)
{
	*dst = *src;
	dst->key = xstrdup(src->key);
	dst->monitor = xstrdup(src->monitor);
	dst->spec.path = xstrdup(src->spec.path);
	dst->spec.host = xstrdup(src->spec.host);
	dst->spec.body = xstrdup(src->spec.body);
	dst->spec.qname = xstrdup(src->spec.qname);
	dst->spec.answer = xstrdup(src->spec.answer);
	dst->spec.argv = argv_dup(src->spec.argv);
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++) {
		dst->spec.metric_expr[k] = xstrdup(src->spec.metric_expr[k]);
		dst->spec.metric_compiled[k] = NULL; /* the check compiles its own */
	}
}

static void def_free(health_check_def_t *d)
{
	free((char *)d->key);
	free((char *)d->monitor);
	free((char *)d->spec.path);
	free((char *)d->spec.host);
	free((char *)d->spec.body);
	free((char *)d->spec.qname);
	free((char *)d->spec.answer);
	argv_free(d->spec.argv);
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++)
		free((char *)d->spec.metric_expr[k]);
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static bool argv_eq(char *const *a, char *const *b)
{
	if (!a || !b)
		return a == b;
	size_t i = 0;
	for (; a[i] && b[i]; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return a[i] == b[i];
}

static bool metrics_eq(const health_probe_spec_t *a, const health_probe_spec_t *b)
{
	if (a->tls != b->tls || a->format != b->format)
		return false;
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++)
		if (!str_eq(a->metric_expr[k], b->metric_expr[k]))
			return false;
	return true;
}

static bool spec_eq(const health_probe_spec_t *a, const health_probe_spec_t *b)
{
	return a->type == b->type && str_eq(a->path, b->path) && str_eq(a->host, b->host) &&
	       str_eq(a->body, b->body) && a->tls_verify == b->tls_verify &&
	       a->n_status == b->n_status &&
	       memcmp(a->status, b->status, sizeof(a->status[0]) * a->n_status) == 0 &&
	       str_eq(a->qname, b->qname) && a->qtype == b->qtype && a->rcode == b->rcode &&
	       str_eq(a->answer, b->answer) && argv_eq(a->argv, b->argv) && metrics_eq(a, b);
}

/* Same check: the same key and nothing that changes what a result means. */
static bool def_eq(const health_check_def_t *a, const health_check_def_t *b)
{
	return strcmp(a->key, b->key) == 0 && str_eq(a->monitor, b->monitor) &&
	       spec_eq(&a->spec, &b->spec) && memcmp(&a->addr, &b->addr, sizeof(a->addr)) == 0 &&
	       memcmp(&a->source, &b->source, sizeof(a->source)) == 0 &&
	       a->is_static == b->is_static && a->static_down == b->static_down &&
	       a->interval_ms == b->interval_ms && a->timeout_ms == b->timeout_ms &&
	       a->jitter_pct == b->jitter_pct && a->fall == b->fall && a->rise == b->rise &&
	       a->hold_down_ms == b->hold_down_ms && a->slow_start_ms == b->slow_start_ms &&
	       a->ttl_floor == b->ttl_floor && a->stale_after_ms == b->stale_after_ms &&
	       a->metric_const_mask == b->metric_const_mask &&
	       memcmp(a->metric_const, b->metric_const, sizeof(a->metric_const)) == 0;
}

const char *health_check_state_str(const health_check_status_t *st)
{
	if (!st->known)
		return "unknown";
	if (st->is_metrics)
		return "metrics";
	if (st->restored)
		return st->down ? "DOWN (restored)" : "UP (restored)";
	return st->down ? "DOWN" : "UP";
}

/* ---- state file: "KEY UP|DOWN SINCE" per line ---- */

typedef struct {
	char *key;
	bool down;
	time_t since;
} saved_t;

static void saved_free(saved_t *saved, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(saved[i].key);
	free(saved);
}

/* Keys are what we wrote: printable, no blanks (a check key is "monitor@address"). */
static bool key_clean(const char *key)
{
	for (; *key; key++)
		if ((unsigned char)*key <= ' ' || *key == 0x7f)
			return false;
	return true;
}

/* Read @p path; a missing or unreadable file is no saved state (logged, not fatal: the
 * monitors will find the truth within one round). */
static saved_t *state_file_read(const char *path, size_t *n_out)
{
	*n_out = 0;
	if (!path)
		return NULL;
	FILE *f = fopen(path, "r");
	if (!f) {
		if (errno != ENOENT)
			log_warn("health state file %s: %s", path, strerror(errno));
		return NULL;
	}
	saved_t *saved = NULL;
	size_t n = 0, cap = 0, lineno = 0;
	char *line = NULL;
	size_t linecap = 0;
	while (getline(&line, &linecap, f) >= 0) {
		lineno++;
		char key[1024], state[8];
		long long since;
		char first = line[strspn(line, " \t\r\n")];
		if (first == '#' || first == '\0')
			continue;
		if (sscanf(line, "%1023s %7s %lld", key, state, &since) != 3 || !key_clean(key) ||
		    (strcmp(state, "UP") && strcmp(state, "DOWN"))) {
			log_warn("health state file %s:%zu: ignored malformed line", path, lineno);
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			saved = xrealloc(saved, cap * sizeof(*saved));
		}
		saved[n++] = (saved_t){xstrdup(key), strcmp(state, "DOWN") == 0, (time_t)since};
	}
	free(line);
	fclose(f);
	*n_out = n;
	return saved;
}

static int write_states(FILE *f, void *ctx)
{
	const health_engine_t *e = ctx;
	fprintf(f, "# steer monitor states: KEY UP|DOWN SINCE (UNIX time); written by steerd\n");
	for (size_t i = 0; i < e->n_checks; i++) {
		const health_check_status_t *st = &e->checks[i]->st;
		if (st->known && !st->is_static && !st->is_metrics)
			fprintf(f, "%s %s %lld\n", st->key, st->down ? "DOWN" : "UP",
			        (long long)st->since);
	}
	return 0;
}

/* Atomic replace: a crash leaves the old file or the new one. A failure is logged only: the
 * states stay in memory and the next change tries again. */
static void state_file_write(health_engine_t *e)
{
	if (!e->state_file)
		return;
	int ret = steer_file_replace(e->state_file, 0644, write_states, e);
	if (ret)
		log_warn("health state file %s: %s", e->state_file, steer_strerror(ret));
}

/* ---- the state machine ---- */

static void notify(health_engine_t *e)
{
	if (e->cb)
		e->cb(e->arg);
}

static bool is_flapping(const check_t *c, time_t now)
{
	if (c->n_changes < HEALTH_FLAP_COUNT)
		return false;
	for (unsigned i = 0; i < HEALTH_FLAP_COUNT; i++)
		if (now - c->changes[i] > HEALTH_FLAP_WINDOW)
			return false;
	return true;
}

static uint32_t ceil_s(uint64_t ms)
{
	return (uint32_t)((ms + 999) / 1000);
}

static uint32_t ttl_cap(const check_t *c, uint64_t now)
{
	const health_check_def_t *d = &c->def;
	const health_check_status_t *st = &c->st;
	uint32_t cap = 0;
	if (st->is_static || !st->known)
		return 0;
	if (st->flapping) {
		cap = d->ttl_floor;
	} else if (!st->down && st->fail_run > 0) {
		uint32_t left = d->fall > st->fail_run ? d->fall - st->fail_run : 1;
		cap = ceil_s((uint64_t)left * d->interval_ms);
	} else if (st->down) {
		uint32_t left = d->rise > st->ok_run ? d->rise - st->ok_run : 1;
		uint64_t ms = (uint64_t)left * d->interval_ms + d->hold_down_ms;
		if (st->ok_run >= d->rise && now >= c->ok_since_ms)
			ms = d->interval_ms + (now - c->ok_since_ms < d->hold_down_ms
			                           ? d->hold_down_ms - (now - c->ok_since_ms)
			                           : 0);
		cap = ceil_s(ms);
	} else {
		return 0; /* steady UP: the service TTL stands */
	}
	if (cap < d->ttl_floor)
		cap = d->ttl_floor;
	return cap ? cap : 1; /* 0 would mean "no cap" */
}

static unsigned ramp_percent(const check_t *c, uint64_t now)
{
	const health_check_def_t *d = &c->def;
	if (c->st.down || !d->slow_start_ms || !c->up_at_ms ||
	    now >= c->up_at_ms + d->slow_start_ms)
		return 0;
	unsigned pct = (unsigned)((now - c->up_at_ms) * 100 / d->slow_start_ms);
	return pct < 1 ? 1 : pct;
}

static void ramp_step(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	check_t *c = w->data;
	health_engine_t *e = c->engine;
	c->st.ramp = ramp_percent(c, now_ms(e));
	if (!c->st.ramp)
		ev_timer_stop(e->loop, &c->ramp_timer);
	notify(e);
}

static void set_state(check_t *c, bool down, const char *why)
{
	health_engine_t *e = c->engine;
	time_t now = time(NULL);
	bool was_known = c->st.known && !c->st.restored;
	bool changed = !c->st.known || c->st.down != down;
	c->st.known = true;
	c->st.restored = false;
	if (!changed)
		return;
	c->st.down = down;
	c->st.since = now;
	if (was_known) {
		c->st.flaps++;
		c->changes[c->n_changes++ % HEALTH_FLAP_COUNT] = now;
	}
	char addr[STEER_SOCKADDR_STRLEN];
	steer_sockaddr_str(&c->def.addr, addr, sizeof(addr));
	if (down)
		log_warn("%s %s DOWN: %s", c->def.monitor, addr, why);
	else
		log_notice("%s %s UP: %s", c->def.monitor, addr, why);
	ev_timer_stop(e->loop, &c->ramp_timer);
	c->up_at_ms = 0;
	if (!down && was_known && c->def.slow_start_ms) {
		c->up_at_ms = now_ms(e);
		double step = c->def.slow_start_ms / 1000.0 / 20.0; /* 5% steps */
		ev_timer_set(&c->ramp_timer, step, step);
		ev_timer_start(e->loop, &c->ramp_timer);
	}
	c->st.ramp = ramp_percent(c, now_ms(e));
	/* A link failure flips many checks within one interval; a first round flips them all. */
	if (e->state_file && !ev_is_active(&e->save_timer))
		ev_timer_start(e->loop, &e->save_timer);
}

/* Apply one result; returns true when something the answers see changed. */
static bool apply_result(check_t *c, bool ok, const char *detail)
{
	health_check_status_t *st = &c->st;
	const health_check_def_t *d = &c->def;
	uint64_t now = now_ms(c->engine);
	bool was_down = st->down, was_known = st->known && !st->restored;
	uint32_t old_cap = st->ttl_cap;
	unsigned old_ramp = st->ramp;
	char why[HEALTH_PROBE_DETAIL + 64];
	if (ok) {
		if (st->ok_run++ == 0)
			c->ok_since_ms = now;
		st->fail_run = 0;
	} else {
		st->fail_run++;
		st->ok_run = 0;
	}
	if (!was_known) {
		snprintf(why, sizeof(why), "%s (first probe)", detail);
		set_state(c, !ok, why);
	} else if (!st->down && st->fail_run >= d->fall) {
		snprintf(why, sizeof(why), "%s after %u failure%s", detail, st->fail_run,
		         st->fail_run == 1 ? "" : "s");
		set_state(c, true, why);
	} else if (st->down && st->ok_run >= d->rise && now - c->ok_since_ms >= d->hold_down_ms) {
		if (d->hold_down_ms)
			snprintf(why, sizeof(why), "%s after %u successes and %u ms hold-down",
			         detail, st->ok_run, d->hold_down_ms);
		else
			snprintf(why, sizeof(why), "%s after %u success%s", detail, st->ok_run,
			         st->ok_run == 1 ? "" : "es");
		set_state(c, false, why);
	}
	st->flapping = is_flapping(c, time(NULL));
	st->ttl_cap = ttl_cap(c, now);
	st->ramp = ramp_percent(c, now);
	return !was_known || st->down != was_down || st->ttl_cap != old_cap || st->ramp != old_ramp;
}

static void schedule_next(check_t *c)
{
	health_engine_t *e = c->engine;
	double interval = c->def.interval_ms / 1000.0;
	double spread = interval * c->def.jitter_pct / 100.0;
	double jitter = spread ? ((double)(rng_next(e) % 2001) / 1000.0 - 1.0) * spread : 0.0;
	ev_timer_set(&c->next, interval + jitter, 0.);
	ev_timer_start(e->loop, &c->next);
}

/* ---- metrics checks ---- */

/* Values that are fresh at @p now: read at most stale_after_ms ago, or configured. */
static uint8_t fresh_mask(const check_t *c, uint64_t now)
{
	uint8_t fresh = c->def.metric_const_mask;
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++) {
		uint8_t bit = (uint8_t)(1u << k);
		/* now < value_ms: the loop's clock stepped back (stale_arm() rebases it) */
		if ((c->st.have & bit) && !(fresh & bit) &&
		    (now < c->value_ms[k] || now - c->value_ms[k] <= c->def.stale_after_ms))
			fresh |= bit;
	}
	return fresh;
}

/* Wake up when the next fresh value goes stale, so the table drops it then. */
static void stale_arm(check_t *c, uint64_t now)
{
	health_engine_t *e = c->engine;
	uint64_t next = 0;
	uint8_t fresh = fresh_mask(c, now) & (uint8_t)~c->def.metric_const_mask;
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++) {
		/* The loop's clock stepped back past a read: age the value from now, or it would
		 * stay fresh for as long as the step. */
		if (c->value_ms[k] > now)
			c->value_ms[k] = now;
		uint64_t at = c->value_ms[k] + c->def.stale_after_ms;
		if ((fresh & (1u << k)) && (next == 0 || at < next))
			next = at;
	}
	ev_timer_stop(e->loop, &c->stale_timer);
	if (next == 0)
		return;
	/* a few ms late, so the value is past stale_after_ms when the status is read */
	ev_timer_set(&c->stale_timer, (double)(next - now) / 1000.0 + 0.005, 0.);
	ev_timer_start(e->loop, &c->stale_timer);
}

static void on_stale(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	check_t *c = w->data;
	uint64_t now = now_ms(c->engine);
	uint8_t fresh = fresh_mask(c, now);
	stale_arm(c, now);
	if (fresh != c->fresh_told) {
		c->fresh_told = fresh;
		notify(c->engine);
	}
}

/* Take the numbers of one scrape; true when the fresh values changed. */
static bool apply_metrics(check_t *c, const health_probe_result_t *res)
{
	health_check_status_t *st = &c->st;
	uint64_t now = now_ms(c->engine);
	double before[HEALTH_METRIC_KINDS];
	memcpy(before, st->values, sizeof(before));
	bool first = !st->known;
	st->known = true;
	st->down = false;
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++) {
		uint8_t bit = (uint8_t)(1u << k);
		if (!c->exprs[k] || !(res->metric_have & bit))
			continue;
		double prev = c->prev_raw[k];
		bool has_prev = (c->prev_have & bit) != 0;
		double dt = (double)(now - c->prev_raw_ms[k]) / 1000.0;
		c->prev_raw[k] = res->metric_raw[k];
		c->prev_raw_ms[k] = now;
		c->prev_have |= bit;
		double v;
		if (!metrics_expr_finish(c->exprs[k], res->metric_raw[k], has_prev ? &prev : NULL,
		                         dt, &v))
			continue; /* a first scrape or a counter reset: no rate this round */
		st->values[k] = v;
		st->have |= bit;
		c->value_ms[k] = now;
		st->values_at = time(NULL);
	}
	/* Against what was last told, not the mask just before this scrape: a value may have gone
	 * stale since, in the same loop iteration as its (now cancelled) stale timer. */
	uint8_t fresh = fresh_mask(c, now);
	bool changed = first || fresh != c->fresh_told;
	c->fresh_told = fresh;
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS && !changed; k++)
		changed = (fresh & (1u << k)) && before[k] != st->values[k];
	stale_arm(c, now);
	return changed;
}

static void metrics_init(check_t *c)
{
	health_check_status_t *st = &c->st;
	st->is_metrics = true;
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++) {
		if (c->def.metric_const_mask & (1u << k)) {
			st->values[k] = c->def.metric_const[k];
			st->have |= (uint8_t)(1u << k);
			c->fresh_told |= (uint8_t)(1u << k);
		}
		const char *text = c->def.spec.metric_expr[k];
		if (!text)
			continue;
		char err[128];
		/* The planner compiled the same text to validate the configuration. */
		if (metrics_expr_parse(c->def.spec.format, text, &c->exprs[k], err, sizeof(err)))
			log_err("%s: %s '%s': %s", c->def.key, health_metric_name(k), text, err);
		c->def.spec.metric_compiled[k] = c->exprs[k];
	}
}

static void on_result(const health_probe_result_t *res, void *arg)
{
	check_t *c = arg;
	c->inflight = NULL;
	c->st.probes++;
	c->st.last_ok = res->ok;
	c->st.last_rtt_us = res->rtt_us;
	c->st.last_at = time(NULL);
	snprintf(c->st.last_detail, sizeof(c->st.last_detail), "%s", res->detail);
	bool changed =
	    c->st.is_metrics ? apply_metrics(c, res) : apply_result(c, res->ok, res->detail);
	if (changed)
		notify(c->engine);
}

static void probe_now(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	check_t *c = w->data;
	schedule_next(c);
	if (c->inflight)
		return; /* still waiting: timeouts are shorter than intervals, jitter can overlap */
	health_probe_req_t req = {.spec = &c->def.spec,
	                          .dst = c->def.addr,
	                          .source = c->def.source,
	                          .target_name = c->def.key,
	                          .timeout_ms = c->def.timeout_ms,
	                          .cb = on_result,
	                          .arg = c};
	char err[HEALTH_PROBE_DETAIL - 16];
	if (health_probe_start(c->engine->probes, &req, &c->inflight, err, sizeof(err)) != 0) {
		c->inflight = NULL;
		health_probe_result_t res = {.ok = false};
		snprintf(res.detail, sizeof(res.detail), "cannot probe: %s", err);
		on_result(&res, c);
	}
}

/* ---- checks ---- */

static check_t *check_new(health_engine_t *e, const health_check_def_t *def, const saved_t *saved,
                          size_t n_saved)
{
	check_t *c = xcalloc(1, sizeof(*c));
	c->engine = e;
	def_copy(&c->def, def);
	health_check_status_t *st = &c->st;
	st->key = c->def.key;
	st->monitor = c->def.monitor;
	st->addr = c->def.addr;
	st->type = c->def.spec.type;
	st->is_static = def->is_static;
	st->since = time(NULL);
	ev_timer_init(&c->next, probe_now, 0., 0.);
	c->next.data = c;
	ev_init(&c->ramp_timer, ramp_step);
	c->ramp_timer.data = c;
	ev_init(&c->stale_timer, on_stale);
	c->stale_timer.data = c;
	if (def->spec.type == HEALTH_PROBE_METRICS && !def->is_static) {
		metrics_init(c);
		ev_timer_start(e->loop, &c->next);
		return c; /* nothing to restore: values are not saved */
	}
	if (def->is_static) {
		st->known = true;
		st->down = def->static_down;
		return c;
	}
	for (size_t i = 0; i < n_saved; i++) {
		if (strcmp(saved[i].key, def->key) == 0) {
			st->known = st->restored = true;
			st->down = saved[i].down;
			st->since = saved[i].since;
		}
	}
	ev_timer_start(e->loop, &c->next); /* probe at once */
	return c;
}

static void check_free(check_t *c)
{
	if (!c)
		return;
	if (c->inflight)
		health_probe_cancel(c->inflight);
	ev_timer_stop(c->engine->loop, &c->next);
	ev_timer_stop(c->engine->loop, &c->ramp_timer);
	ev_timer_stop(c->engine->loop, &c->stale_timer);
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++)
		metrics_expr_free(c->exprs[k]);
	def_free(&c->def);
	free(c);
}

static void save_now(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	state_file_write(w->data);
}

int health_engine_new(struct ev_loop *loop, const char *state_file, health_change_cb cb, void *arg,
                      health_engine_t **out, char *err, size_t errlen)
{
	health_engine_t *e = xcalloc(1, sizeof(*e));
	e->loop = loop;
	e->cb = cb;
	e->arg = arg;
	e->state_file = xstrdup(state_file);
	ev_timer_init(&e->save_timer, save_now, HEALTH_SAVE_DELAY, 0.);
	e->save_timer.data = e;
	if (getrandom(&e->rng, sizeof(e->rng), 0) != sizeof(e->rng) || e->rng == 0)
		e->rng = (uint64_t)time(NULL) | 1;
	int ret = health_probe_ctx_new(loop, &e->probes, err, errlen);
	if (ret != 0) {
		free(e->state_file);
		free(e);
		return ret;
	}
	*out = e;
	return 0;
}

void health_engine_free(health_engine_t *e)
{
	if (!e)
		return;
	if (ev_is_active(&e->save_timer)) {
		ev_timer_stop(e->loop, &e->save_timer);
		state_file_write(e);
	}
	for (size_t i = 0; i < e->n_checks; i++)
		check_free(e->checks[i]);
	free(e->checks);
	health_probe_ctx_free(e->probes);
	free(e->state_file);
	free(e);
}

void health_engine_set_checks(health_engine_t *e, const health_check_def_t *defs, size_t n,
                              const char *state_file)
{
	if (!str_eq(e->state_file, state_file)) {
		if (ev_is_active(&e->save_timer)) { /* the old file gets the last states */
			ev_timer_stop(e->loop, &e->save_timer);
			state_file_write(e);
		}
		free(e->state_file);
		e->state_file = xstrdup(state_file);
	}
	size_t n_saved;
	saved_t *saved = state_file_read(e->state_file, &n_saved);
	check_t **next = xcalloc(n ? n : 1, sizeof(*next));
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < e->n_checks; j++) {
			if (e->checks[j] && def_eq(&e->checks[j]->def, &defs[i])) {
				next[i] = e->checks[j];
				e->checks[j] = NULL;
				break;
			}
		}
		if (!next[i])
			next[i] = check_new(e, &defs[i], saved, n_saved);
	}
	for (size_t j = 0; j < e->n_checks; j++)
		check_free(e->checks[j]);
	free(e->checks);
	e->checks = next;
	e->n_checks = n;
	saved_free(saved, n_saved);
}

size_t health_engine_count(const health_engine_t *e)
{
	return e->n_checks;
}

void health_engine_status(const health_engine_t *e, size_t i, health_check_status_t *out)
{
	STEER_ASSERT(i < e->n_checks);
	const check_t *c = e->checks[i];
	*out = c->st;
	if (!c->st.is_metrics)
		return;
	uint64_t now = now_ms(e);
	out->fresh = fresh_mask(c, now);
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++) {
		bool read = (c->st.have & (1u << k)) && !(c->def.metric_const_mask & (1u << k));
		uint64_t age = read && now > c->value_ms[k] ? now - c->value_ms[k] : 0;
		out->age_ms[k] = age > UINT32_MAX ? UINT32_MAX : (uint32_t)age;
	}
}

bool health_engine_first_round_done(const health_engine_t *e)
{
	for (size_t i = 0; i < e->n_checks; i++)
		if (!e->checks[i]->st.known || e->checks[i]->st.restored)
			return false;
	return true;
}

uint32_t health_engine_max_timeout(const health_engine_t *e)
{
	uint32_t max = 0;
	for (size_t i = 0; i < e->n_checks; i++)
		if (!e->checks[i]->def.is_static && e->checks[i]->def.timeout_ms > max)
			max = e->checks[i]->def.timeout_ms;
	return max;
}
