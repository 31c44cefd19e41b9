/*
 * The cluster thread (see cluster.h): one libev loop of its own running the self-check
 * rounds, the keeper's heartbeat and its reports.
 *
 * Threads: the cluster thread owns the loop, the answer check and the keeper handle (only it
 * sends heartbeats); other threads call the command functions, which take the lock, change
 * the decision (selfcheck.h) and wake the loop with an ev_async so that the keeper hears of
 * a change at once. Everything under the lock is short: no I/O, no callback into the daemon.
 * The self-check's callbacks (cluster_inputs_t) run on the cluster thread, outside the lock.
 */
#include "cluster/cluster.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/sockaddr.h"
#include "cluster/nl.h"
#include "cluster/selfcheck.h"
#include "cluster/selfquery.h"
#include "dns/dname.h"

/* A query thread counts as stalled after this many intervals without a turn of its loop, and
 * never before CLUSTER_THREAD_AGE_MIN_MS: an idle UDP worker only wakes every 100 ms, and a
 * loaded machine can delay that wake-up, so a shorter bound would call idle threads stalled. */
#define CLUSTER_THREAD_AGE_INTERVALS 2
#define CLUSTER_THREAD_AGE_MIN_MS    300
/* The cluster thread's SCHED_RR priority: the lowest real-time one, above every normal thread. */
#define CLUSTER_RT_PRIORITY 1
/* The shortest heartbeat period: a lower liveness timeout is a misconfiguration the keeper
 * cannot honour anyway. */
#define CLUSTER_HEARTBEAT_MIN_MS 10

enum { CHECK_ANSWER, CHECK_THREADS, CHECK_ROUTES, CHECK_RELOAD, CHECK_FORWARDER, CHECK_N };

static const char *const check_names[CHECK_N] = {"answer", "threads", "routes", "reload",
                                                 "forwarder"};

_Static_assert(CHECK_N <= CLUSTER_CHECKS_MAX, "cluster_status_t has room for every check");

/* No zone asked this round: id.server, or the list changed since. */
#define ZONE_NONE SIZE_MAX

typedef struct {
	uint8_t wire[DNS_DNAME_MAXLEN];
	char text[DNAME_STR_MAXLEN];
	const _Atomic int64_t *expire_at; /* borrowed (cluster_zone_t), NULL = never expires */
	bool skipped;                     /* expired when the last round looked */
} zone_t;

struct cluster {
	conf_cluster_t cc; /* the fields the thread reads, owned */
	char *identity;    /* what id.server must answer, owned */
	cluster_keeper_t *keeper;
	pid_t keeper_pid;
	cluster_inputs_t in;
	struct ev_loop *loop;
	pthread_t thread;
	bool thread_started; /* control thread only */
	ev_timer round_timer;
	ev_timer heartbeat;
	ev_io keeper_io;
	ev_async wake;
	cluster_selfquery_t *sq;

	/* cluster thread only: */
	uint64_t queries_prev; /* inputs.queries() at the last round's start */
	unsigned sent_prev;    /* self-queries that round sent */
	bool have_prev;
	bool round_quiet;
	bool sync_ok[CHECK_N];
	char sync_detail[CHECK_N][160];
	bool keeper_lost;

	pthread_mutex_t lock; /* guards everything below */
	cluster_selfcheck_t sc;
	bool running, stopping, stopped;
	zone_t *zones;
	size_t n_zones;
	size_t zone_next;           /* where the next round starts looking for a zone to ask */
	size_t zone_asked;          /* the zone the round in progress asks, ZONE_NONE */
	bool announced;             /* the keeper's last report */
	bool keeper_self_withdrawn; /* ... said it withdrew on its own */
	bool keeper_alive;
	char keeper_message[200];
	double last_transition;
	double drain_wall;
	cluster_check_status_t checks[CHECK_N];
	char vrrp_state[16];
};

/* ---- clocks, config copy ---- */

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static steer_sockaddr_t *addrs_dup(const steer_sockaddr_t *a, size_t n)
{
	return n ? xmemdup(a, n * sizeof(*a)) : NULL;
}

/* Only what the cluster thread reads: a field added to conf_cluster_t later is never left
 * pointing into a configuration that a reload freed. */
static void conf_copy(conf_cluster_t *dst, const conf_cluster_t *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->enabled = src->enabled;
	dst->node_id = xstrdup(src->node_id);
	dst->service = addrs_dup(src->service, src->n_service);
	dst->n_service = src->n_service;
	dst->interface = xstrdup(src->interface);
	dst->unicast4 = src->unicast4;
	dst->unicast6 = src->unicast6;
	dst->announce = src->announce;
	dst->check_interval = src->check_interval ? src->check_interval : 100;
	dst->check_timeout = src->check_timeout ? src->check_timeout : dst->check_interval * 4 / 5;
	dst->check_fall = src->check_fall;
	dst->check_rise = src->check_rise;
	dst->check_hold_down = src->check_hold_down;
	dst->check_reload = src->check_reload;
	dst->check_forwarder = src->check_forwarder;
	dst->check_routes = src->check_routes;
	dst->return_path = addrs_dup(src->return_path, src->n_return_path);
	dst->n_return_path = src->n_return_path;
	dst->liveness_timeout = src->liveness_timeout;
	dst->drain_quiet = src->drain_quiet;
	dst->drain_timeout = src->drain_timeout;
	dst->line = src->line;
}

static void conf_release(conf_cluster_t *cc)
{
	free(cc->node_id);
	free(cc->service);
	free(cc->interface);
	free(cc->return_path);
}

/* ---- transitions and the keeper ---- */

/* Under the lock, after the decision changed from @p old. */
static void transition_noted(cluster_t *c, cluster_state_t old)
{
	c->last_transition = wall_now();
	if (c->sc.state == CLUSTER_DRAINING && old != CLUSTER_DRAINING)
		c->drain_wall = c->last_transition;
	const char *node = c->cc.node_id ? c->cc.node_id : "";
	if (c->sc.state == CLUSTER_WITHDRAWN)
		log_warn("cluster node %s: %s -> %s: %s", node, cluster_state_name(old),
		         cluster_state_name(c->sc.state), c->sc.reason);
	else
		log_notice("cluster node %s: %s -> %s: %s", node, cluster_state_name(old),
		           cluster_state_name(c->sc.state), c->sc.reason);
}

static void keeper_lost(cluster_t *c, int err, const char *when)
{
	if (c->keeper_lost)
		return;
	c->keeper_lost = true;
	ev_io_stop(c->loop, &c->keeper_io);
	ev_timer_stop(c->loop, &c->heartbeat);
	pthread_mutex_lock(&c->lock);
	c->keeper_alive = false;
	c->announced = false;
	snprintf(c->keeper_message, sizeof(c->keeper_message), "gone (%s: %s)", when,
	         steer_strerror(err));
	pthread_mutex_unlock(&c->lock);
	log_err("cluster: the keeper process %ld is gone (%s: %s): nothing holds this node's "
	        "announcement any more",
	        (long)c->keeper_pid, when, steer_strerror(err));
}

/* Cluster thread: tell the keeper what is wanted now (also the heartbeat). */
static void send_state(cluster_t *c)
{
	if (c->keeper_lost || !c->keeper)
		return;
	char reason[sizeof(c->sc.reason)];
	pthread_mutex_lock(&c->lock);
	bool want = !c->stopping && cluster_selfcheck_announce(&c->sc);
	snprintf(reason, sizeof(reason), "%s", c->stopping ? "steerd stopping" : c->sc.reason);
	pthread_mutex_unlock(&c->lock);
	int ret = cluster_keeper_send(c->keeper, want, reason);
	if (ret != 0 && ret != STEER_EAGAIN)
		keeper_lost(c, ret, "heartbeat");
}

static void on_heartbeat(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	send_state(w->data);
}

static void keeper_report(cluster_t *c, const cluster_keeper_report_t *r)
{
	bool changed = false;
	pthread_mutex_lock(&c->lock);
	bool want_before = cluster_selfcheck_announce(&c->sc);
	bool new_message = strcmp(c->keeper_message, r->message) != 0;
	c->announced = r->announced;
	snprintf(c->keeper_message, sizeof(c->keeper_message), "%s", r->message);
	/* Every report says so until the keeper hears from us again: act on the first. */
	bool first = r->self_withdraw && !c->keeper_self_withdrawn;
	c->keeper_self_withdrawn = r->self_withdraw;
	if (first) {
		cluster_state_t old = c->sc.state;
		changed = cluster_selfcheck_keeper_withdrew(&c->sc, mono_ms(), r->message);
		if (changed)
			transition_noted(c, old);
	}
	bool want_after = cluster_selfcheck_announce(&c->sc);
	pthread_mutex_unlock(&c->lock);
	if (r->error && new_message)
		log_warn("cluster: keeper: %s", r->message);
	else if (first && !changed && new_message)
		log_warn("cluster: keeper: %s", r->message);
	if (want_before != want_after)
		send_state(c);
}

static void on_keeper(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	cluster_t *c = w->data;
	for (;;) {
		cluster_keeper_report_t r;
		memset(&r, 0, sizeof(r));
		int ret = cluster_keeper_recv(c->keeper, &r);
		if (ret == STEER_EAGAIN)
			return;
		if (ret != 0) {
			keeper_lost(c, ret, "report");
			return;
		}
		r.message[sizeof(r.message) - 1] = '\0';
		keeper_report(c, &r);
	}
}

/* ---- the answer check's zones ---- */

/* A zone whose skipped flag a round changed, for the log line after the lock. */
typedef struct {
	char text[DNAME_STR_MAXLEN];
	bool skipped;
} zone_change_t;

/* The same expiry rule as the answer path's: SERVFAIL from the second expire_at is reached. */
static bool zone_expired(const zone_t *z, int64_t now)
{
	if (z->expire_at == NULL)
		return false;
	int64_t at = atomic_load_explicit(z->expire_at, memory_order_relaxed);
	return at != 0 && at <= now;
}

/* Under the lock: every zone's skipped flag as of @p now. The zones whose flag changed are
 * copied into a new *@p changed (their number returned), logged by zones_log(). */
static size_t zones_refresh(cluster_t *c, int64_t now, zone_change_t **changed)
{
	size_t n = 0;
	for (size_t i = 0; i < c->n_zones; i++)
		n += zone_expired(&c->zones[i], now) != c->zones[i].skipped;
	*changed = n ? xcalloc(n, sizeof(**changed)) : NULL;
	size_t k = 0;
	for (size_t i = 0; i < c->n_zones && k < n; i++) {
		zone_t *z = &c->zones[i];
		bool expired = zone_expired(z, now);
		if (expired == z->skipped)
			continue;
		z->skipped = expired;
		memcpy((*changed)[k].text, z->text, sizeof(z->text));
		(*changed)[k++].skipped = expired;
	}
	return k;
}

/* Outside the lock: one line per zone that left or rejoined the answer check; frees it. */
static void zones_log(zone_change_t *changed, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (changed[i].skipped)
			log_warn(
			    "cluster: self-check: zone %s has expired (it answers SERVFAIL): the "
			    "answer check skips it until a transfer succeeds",
			    changed[i].text);
		else
			log_notice("cluster: self-check: zone %s no longer expired: back in the "
			           "answer check",
			           changed[i].text);
	}
	free(changed);
}

/* Under the lock: the zone this round asks, ZONE_NONE for id.server. The first zone not
 * skipped from zone_next, which on_answer() leaves on a zone that failed. */
static size_t zone_pick(const cluster_t *c)
{
	for (size_t k = 0; k < c->n_zones; k++) {
		size_t i = (c->zone_next + k) % c->n_zones;
		if (!c->zones[i].skipped)
			return i;
	}
	return ZONE_NONE;
}

/*
 * Under the lock, when the round's answer came: the next round asks the same zone again
 * after a failure (fall counts the failures of one zone in a row), the next one in turn
 * otherwise. A zone that expired while it was asked answered SERVFAIL for that: it is
 * skipped from the next round like any expired zone, and *@p ok turns true with @p note as
 * the detail (returns true then) rather than holding one round against the node.
 */
static bool zone_answered(cluster_t *c, bool *ok, char *note, size_t size)
{
	size_t i = c->zone_asked;
	c->zone_asked = ZONE_NONE;
	if (i == ZONE_NONE)
		return false;
	c->zone_next = *ok ? i + 1 : i;
	if (*ok || !zone_expired(&c->zones[i], (int64_t)time(NULL)))
		return false;
	c->zone_next = i + 1;
	*ok = true;
	snprintf(note, size, "%.100s expired while asked: skipped from the next round",
	         c->zones[i].text);
	return true;
}

/* The index of @p wire in @p zones, ZONE_NONE when it is not there. */
static size_t zone_find(const zone_t *zones, size_t n, const uint8_t *wire)
{
	for (size_t i = 0; i < n; i++)
		if (dname_equal(zones[i].wire, wire))
			return i;
	return ZONE_NONE;
}

typedef const _Atomic int64_t *cell_t;

static int cell_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (const cell_t *)a, y = (uintptr_t) * (const cell_t *)b;
	return (x > y) - (x < y);
}

/* A zone skipped in the old list stays skipped in the new one @p zones, without a second log
 * line. Matched by expiry cell (one per secondary zone, only they can be skipped), sorted and
 * searched outside the lock: the cluster thread's heartbeat waits for that lock. */
static void zones_keep_skipped(cluster_t *c, zone_t *zones, size_t n)
{
	pthread_mutex_lock(&c->lock);
	size_t n_cells = 0;
	for (size_t i = 0; i < c->n_zones; i++)
		n_cells += c->zones[i].skipped;
	cell_t *cells = n_cells ? xcalloc(n_cells, sizeof(*cells)) : NULL;
	for (size_t i = 0, k = 0; i < c->n_zones && k < n_cells; i++)
		if (c->zones[i].skipped)
			cells[k++] = c->zones[i].expire_at;
	pthread_mutex_unlock(&c->lock);
	if (n_cells == 0)
		return;
	qsort(cells, n_cells, sizeof(*cells), cell_cmp);
	for (size_t i = 0; i < n; i++)
		zones[i].skipped =
		    zones[i].expire_at != NULL &&
		    bsearch(&zones[i].expire_at, cells, n_cells, sizeof(*cells), cell_cmp) != NULL;
	free(cells);
}

/* Under the lock, as the new list @p zones replaces the old one: the rotation goes on where it
 * was (a zone that failed is asked again) and the round in flight still moves it. */
static void zones_place(cluster_t *c, const zone_t *zones, size_t n)
{
	size_t next = ZONE_NONE, asked = ZONE_NONE;
	if (c->n_zones) {
		next = zone_find(zones, n, c->zones[c->zone_next % c->n_zones].wire);
		if (c->zone_asked != ZONE_NONE)
			asked = zone_find(zones, n, c->zones[c->zone_asked].wire);
	}
	c->zone_next = next == ZONE_NONE ? 0 : next;
	c->zone_asked = asked;
}

/* ---- the self-check round ---- */

static const steer_sockaddr_t *unicast_of(const conf_cluster_t *cc, int family)
{
	const steer_sockaddr_t *u = family == AF_INET ? &cc->unicast4 : &cc->unicast6;
	return u->sa.sa_family == family ? u : NULL;
}

static bool has_family(const conf_cluster_t *cc, int family)
{
	for (size_t i = 0; i < cc->n_service; i++)
		if (cc->service[i].sa.sa_family == family)
			return true;
	return false;
}

/* The routes check's verdict from nl_route_check()'s, whose @p why names what is missing. */
static bool route_ok(int ret, const char *why, char *detail, size_t size)
{
	if (ret == 1)
		return true;
	if (why[0])
		snprintf(detail, size, "%s", why);
	else
		snprintf(detail, size, "route lookup: %s",
		         steer_strerror(ret < 0 ? ret : STEER_ENOENT));
	return false;
}

static bool check_default_routes(const conf_cluster_t *cc, char *detail, size_t size)
{
	static const int families[] = {AF_INET, AF_INET6};
	static const steer_sockaddr_t any = {.sa.sa_family = 0};
	unsigned n = 0;
	for (size_t i = 0; i < STEER_ARRAY_LEN(families); i++) {
		if (!has_family(cc, families[i]))
			continue;
		char why[160] = "";
		int ret = nl_route_check(families[i], NULL, &any, why, sizeof(why));
		if (!route_ok(ret, why, detail, size))
			return false;
		n++;
	}
	snprintf(detail, size, "%s",
	         n == 2 ? "IPv4 and IPv6 default routes present" : "default route present");
	return true;
}

static bool check_return_paths(const conf_cluster_t *cc, char *detail, size_t size)
{
	static const steer_sockaddr_t any = {.sa.sa_family = 0};
	for (size_t i = 0; i < cc->n_return_path; i++) {
		const steer_sockaddr_t *dst = &cc->return_path[i];
		const steer_sockaddr_t *src = unicast_of(cc, dst->sa.sa_family);
		char why[160] = "";
		int ret =
		    nl_route_check(dst->sa.sa_family, dst, src ? src : &any, why, sizeof(why));
		if (!route_ok(ret, why, detail, size))
			return false;
	}
	snprintf(detail, size, "%zu return path%s routable", cc->n_return_path,
	         cc->n_return_path == 1 ? "" : "s");
	return true;
}

/* The checks that answer at once, at the round's start. */
static void sync_checks(cluster_t *c)
{
	const conf_cluster_t *cc = &c->cc;
	const cluster_inputs_t *in = &c->in;
	for (int i = 0; i < CHECK_N; i++) {
		c->sync_ok[i] = true;
		c->sync_detail[i][0] = '\0';
	}
	if (in->threads_ok) {
		unsigned age = cc->check_interval * CLUSTER_THREAD_AGE_INTERVALS;
		if (age < CLUSTER_THREAD_AGE_MIN_MS)
			age = CLUSTER_THREAD_AGE_MIN_MS;
		c->sync_ok[CHECK_THREADS] = in->threads_ok(
		    in->ctx, age, c->sync_detail[CHECK_THREADS], sizeof(c->sync_detail[0]));
		if (c->sync_ok[CHECK_THREADS])
			snprintf(c->sync_detail[CHECK_THREADS], sizeof(c->sync_detail[0]),
			         "every query thread alive within %u ms", age);
	}
	if (cc->check_routes) {
		char *d = c->sync_detail[CHECK_ROUTES];
		c->sync_ok[CHECK_ROUTES] =
		    cc->n_return_path ? check_return_paths(cc, d, sizeof(c->sync_detail[0]))
		                      : check_default_routes(cc, d, sizeof(c->sync_detail[0]));
	}
	if (cc->check_reload && in->reload_ok) {
		char *d = c->sync_detail[CHECK_RELOAD];
		c->sync_ok[CHECK_RELOAD] = in->reload_ok(in->ctx, d, sizeof(c->sync_detail[0]));
		if (c->sync_ok[CHECK_RELOAD])
			snprintf(d, sizeof(c->sync_detail[0]), "last reload good");
	}
	if (cc->check_forwarder && in->forwarder_ok) {
		char *d = c->sync_detail[CHECK_FORWARDER];
		c->sync_ok[CHECK_FORWARDER] =
		    in->forwarder_ok(in->ctx, d, sizeof(c->sync_detail[0]));
		if (c->sync_ok[CHECK_FORWARDER])
			snprintf(d, sizeof(c->sync_detail[0]), "an upstream is usable");
	}
}

static void check_set(cluster_check_status_t *st, bool ok, const char *detail)
{
	st->ok = ok;
	st->failures = ok ? 0 : st->failures + 1;
	snprintf(st->detail, sizeof(st->detail), "%s", detail);
}

/* The answer check reported: the round is complete. */
static void on_answer(void *arg, bool answer_ok, const char *answer_detail)
{
	cluster_t *c = arg;
	char why[256] = "", note[160];
	bool ok = true;
	pthread_mutex_lock(&c->lock);
	if (zone_answered(c, &answer_ok, note, sizeof(note)))
		answer_detail = note;
	for (int i = 0; i < CHECK_N; i++) {
		cluster_check_status_t *st = &c->checks[i];
		if (!st->enabled)
			continue;
		bool r = i == CHECK_ANSWER ? answer_ok : c->sync_ok[i];
		const char *d = i == CHECK_ANSWER ? answer_detail : c->sync_detail[i];
		check_set(st, r, d);
		if (!r && ok) {
			ok = false;
			snprintf(why, sizeof(why), "%s: %s", st->name, d);
		}
	}
	bool want_before = cluster_selfcheck_announce(&c->sc);
	cluster_state_t old = c->sc.state;
	if (cluster_selfcheck_round(&c->sc, mono_ms(), ok, why, c->round_quiet))
		transition_noted(c, old);
	bool want_after = cluster_selfcheck_announce(&c->sc);
	pthread_mutex_unlock(&c->lock);
	if (want_before != want_after)
		send_state(c);
}

static void on_round(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	cluster_t *c = w->data;
	if (cluster_selfquery_busy(c->sq))
		return; /* the last round's answers are still due: the loop lagged */
	uint64_t queries = c->in.queries ? c->in.queries(c->in.ctx) : 0;
	c->round_quiet = c->in.queries && c->have_prev && queries - c->queries_prev <= c->sent_prev;
	zone_t zone;
	zone_change_t *changed;
	pthread_mutex_lock(&c->lock);
	size_t n_changed = zones_refresh(c, (int64_t)time(NULL), &changed);
	c->zone_asked = zone_pick(c);
	bool have_zone = c->zone_asked != ZONE_NONE;
	if (have_zone)
		zone = c->zones[c->zone_asked];
	pthread_mutex_unlock(&c->lock);
	zones_log(changed, n_changed);
	bool holder_down = false;
	if (c->cc.announce == CONF_ANNOUNCE_INTERFACE && c->cc.interface) {
		char err[128];
		holder_down = nl_link_is_up(c->cc.interface, err, sizeof(err)) == 0;
	}
	sync_checks(c);
	c->sent_prev =
	    cluster_selfquery_start(c->sq, have_zone ? zone.wire : NULL,
	                            have_zone ? zone.text : NULL, holder_down, c->cc.check_timeout);
	c->queries_prev = queries;
	c->have_prev = true;
}

static void on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)revents;
	cluster_t *c = w->data;
	pthread_mutex_lock(&c->lock);
	bool stopping = c->stopping;
	pthread_mutex_unlock(&c->lock);
	send_state(c);
	if (stopping)
		ev_break(loop, EVBREAK_ALL);
}

static void *cluster_main(void *arg)
{
	cluster_t *c = arg;
	ev_run(c->loop, 0);
	return NULL;
}

/* ---- the public side ---- */

cluster_t *cluster_new(const conf_cluster_t *cc, cluster_keeper_t *keeper,
                       const cluster_inputs_t *in)
{
	cluster_t *c = xcalloc(1, sizeof(*c));
	conf_copy(&c->cc, cc);
	c->keeper = keeper;
	c->keeper_pid = cluster_keeper_pid(keeper);
	c->keeper_alive = true;
	c->in = *in;
	c->identity = xstrdup(in->identity ? in->identity : cc->node_id);
	c->in.identity = c->identity;
	c->zone_asked = ZONE_NONE;
	pthread_mutex_init(&c->lock, NULL);
	cluster_selfcheck_conf_t scc = {.fall = c->cc.check_fall,
	                                .rise = c->cc.check_rise,
	                                .hold_down_ms = c->cc.check_hold_down,
	                                .drain_quiet_ms = c->cc.drain_quiet,
	                                .drain_timeout_ms = c->cc.drain_timeout};
	cluster_selfcheck_init(&c->sc, &scc);
	const bool enabled[CHECK_N] = {
	    [CHECK_ANSWER] = true,
	    [CHECK_THREADS] = in->threads_ok != NULL,
	    [CHECK_ROUTES] = c->cc.check_routes,
	    [CHECK_RELOAD] = c->cc.check_reload && in->reload_ok,
	    [CHECK_FORWARDER] = c->cc.check_forwarder && in->forwarder_ok,
	};
	for (int i = 0; i < CHECK_N; i++) {
		c->checks[i].name = check_names[i];
		c->checks[i].enabled = enabled[i];
		snprintf(c->checks[i].detail, sizeof(c->checks[i].detail), "%s",
		         enabled[i] ? "not run yet" : "disabled");
	}
	c->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
	STEER_ASSERT(c->loop != NULL);
	c->sq = cluster_selfquery_new(c->loop, &c->cc, c->identity, on_answer, c);
	double interval = c->cc.check_interval / 1000.0;
	ev_timer_init(&c->round_timer, on_round, 0., interval);
	c->round_timer.data = c;
	unsigned hb = c->cc.check_interval;
	if (c->cc.liveness_timeout && c->cc.liveness_timeout / 3 < hb)
		hb = c->cc.liveness_timeout / 3;
	if (hb < CLUSTER_HEARTBEAT_MIN_MS)
		hb = CLUSTER_HEARTBEAT_MIN_MS;
	ev_timer_init(&c->heartbeat, on_heartbeat, 0., hb / 1000.0);
	c->heartbeat.data = c;
	ev_io_init(&c->keeper_io, on_keeper, cluster_keeper_fd(keeper), EV_READ);
	c->keeper_io.data = c;
	/* A report that the keeper withdrew on its own must be seen before a timer of the same
	 * wakeup sends "announce" again (after a SIGSTOP, both are pending at once). */
	ev_set_priority(&c->keeper_io, EV_MAXPRI);
	ev_async_init(&c->wake, on_wake);
	c->wake.data = c;
	ev_timer_start(c->loop, &c->round_timer);
	ev_timer_start(c->loop, &c->heartbeat);
	ev_io_start(c->loop, &c->keeper_io);
	ev_async_start(c->loop, &c->wake);
	return c;
}

void cluster_set_zones(cluster_t *c, const cluster_zone_t *zones, size_t n)
{
	zone_t *copy = n ? xcalloc(n, sizeof(*copy)) : NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (dname_from_str(zones[i].apex, copy[k].wire) <= 0) {
			log_warn("cluster: self-check: bad zone name '%s' ignored", zones[i].apex);
			continue;
		}
		dname_to_str(copy[k].wire, copy[k].text, sizeof(copy[k].text));
		copy[k].expire_at = zones[i].expire_at;
		k++;
	}
	zones_keep_skipped(c, copy, k);
	pthread_mutex_lock(&c->lock);
	zones_place(c, copy, k);
	zone_t *old = c->zones;
	c->zones = copy;
	c->n_zones = k;
	pthread_mutex_unlock(&c->lock);
	free(old);
}

cluster_zone_status_t *cluster_zones(cluster_t *c, size_t *n)
{
	pthread_mutex_lock(&c->lock);
	*n = c->n_zones;
	cluster_zone_status_t *out = c->n_zones ? xcalloc(c->n_zones, sizeof(*out)) : NULL;
	for (size_t i = 0; i < c->n_zones; i++) {
		out[i].apex = xstrdup(c->zones[i].text);
		out[i].expired = c->zones[i].skipped;
	}
	pthread_mutex_unlock(&c->lock);
	return out;
}

void cluster_zones_free(cluster_zone_status_t *zones, size_t n)
{
	for (size_t i = 0; i < n && zones != NULL; i++)
		free(zones[i].apex);
	free(zones);
}

int cluster_start(cluster_t *c)
{
	if (c->thread_started)
		return 0;
	/* The cluster thread takes no signal: they belong to the control thread's loop. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int ret = pthread_create(&c->thread, NULL, cluster_main, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret != 0) {
		log_err("cluster: cannot start the cluster thread: %s", strerror(ret));
		return -ret;
	}
	pthread_setname_np(c->thread, "steer-cluster");
	/*
	 * Above every query thread: on a node whose workers saturate the CPUs, a starved
	 * heartbeat would make the keeper withdraw a node that only is busy, and move its load
	 * onto the others. The thread sleeps between rounds and works for microseconds.
	 */
	struct sched_param rt = {.sched_priority = CLUSTER_RT_PRIORITY};
	int rt_ret = pthread_setschedparam(c->thread, SCHED_RR, &rt);
	if (rt_ret != 0)
		log_warn("cluster: the cluster thread runs without real-time priority (%s): a busy "
		         "node may miss heartbeats",
		         strerror(rt_ret));
	c->thread_started = true;
	pthread_mutex_lock(&c->lock);
	c->running = true;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* Under the lock: the loop hears of a command at once. */
static void wake_locked(cluster_t *c)
{
	if (c->running && !c->stopping)
		ev_async_send(c->loop, &c->wake);
}

void cluster_drain(cluster_t *c, unsigned timeout_ms)
{
	pthread_mutex_lock(&c->lock);
	cluster_state_t old = c->sc.state;
	if (cluster_selfcheck_drain(&c->sc, mono_ms(), timeout_ms))
		transition_noted(c, old);
	else
		log_notice("cluster node %s: drain restarted", c->cc.node_id ? c->cc.node_id : "");
	c->drain_wall = wall_now();
	wake_locked(c);
	pthread_mutex_unlock(&c->lock);
}

bool cluster_undrain(cluster_t *c)
{
	pthread_mutex_lock(&c->lock);
	cluster_state_t old = c->sc.state;
	bool was = cluster_selfcheck_undrain(&c->sc, mono_ms());
	if (was) {
		transition_noted(c, old);
		c->drain_wall = 0;
	}
	wake_locked(c);
	pthread_mutex_unlock(&c->lock);
	return was;
}

void cluster_vrrp_notify(cluster_t *c, const char *state)
{
	pthread_mutex_lock(&c->lock);
	bool changed = strcmp(c->vrrp_state, state) != 0;
	snprintf(c->vrrp_state, sizeof(c->vrrp_state), "%s", state);
	pthread_mutex_unlock(&c->lock);
	if (changed)
		log_notice("cluster: keepalived reports %s", state);
}

void cluster_status(cluster_t *c, cluster_status_t *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t now = mono_ms();
	pthread_mutex_lock(&c->lock);
	const cluster_selfcheck_t *sc = &c->sc;
	out->state = sc->state;
	out->healthy = sc->healthy;
	out->want_announce = !c->stopped && cluster_selfcheck_announce(sc);
	out->announced = c->announced;
	out->keeper_alive = c->keeper_alive;
	out->keeper_pid = c->keeper_pid;
	snprintf(out->keeper_message, sizeof(out->keeper_message), "%s", c->keeper_message);
	out->transitions = sc->transitions;
	out->last_transition = c->last_transition;
	snprintf(out->reason, sizeof(out->reason), "%s", sc->reason);
	out->good_rounds = sc->good_rounds;
	out->hold_down_left = (double)cluster_selfcheck_hold_left(sc, now) / 1000.0;
	memcpy(out->checks, c->checks, sizeof(c->checks));
	out->n_checks = CHECK_N;
	if (sc->state == CLUSTER_DRAINING || sc->state == CLUSTER_DRAINED) {
		out->drain_timed_out = sc->drain_timed_out;
		out->drain_started = c->drain_wall;
		out->drain_quiet_for = (double)(now - sc->quiet_since_ms) / 1000.0;
	}
	snprintf(out->vrrp_state, sizeof(out->vrrp_state), "%s", c->vrrp_state);
	pthread_mutex_unlock(&c->lock);
}

void cluster_stop(cluster_t *c)
{
	pthread_mutex_lock(&c->lock);
	bool running = c->running;
	c->stopping = true;
	c->stopped = true;
	if (running)
		ev_async_send(c->loop, &c->wake);
	pthread_mutex_unlock(&c->lock);
	if (running) {
		pthread_join(c->thread, NULL);
		pthread_mutex_lock(&c->lock);
		c->running = false;
		pthread_mutex_unlock(&c->lock);
	} else if (c->keeper && !c->keeper_lost) {
		int ret = cluster_keeper_send(c->keeper, false, "steerd stopping");
		(void)ret; /* the shutdown below withdraws as well */
	}
	if (c->keeper) {
		cluster_keeper_shutdown(c->keeper);
		c->keeper = NULL;
		pthread_mutex_lock(&c->lock);
		c->keeper_alive = false;
		c->announced = false;
		pthread_mutex_unlock(&c->lock);
	}
}

void cluster_free(cluster_t *c)
{
	if (!c)
		return;
	cluster_stop(c);
	cluster_selfquery_free(c->sq);
	ev_loop_destroy(c->loop);
	pthread_mutex_destroy(&c->lock);
	free(c->zones);
	conf_release(&c->cc);
	free(c->identity);
	free(c);
}
