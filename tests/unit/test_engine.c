/*
 * The monitor engine's state machine against a real TCP listener on 127.0.0.1: first result
 * decides, fall/rise, TTL caps, flapping, the state file and check identity across
 * health_engine_set_checks(). Runs the engine on its own libev loop. Metrics checks scrape a
 * small HTTP responder on the same loop: values, rates, counter resets, values kept over a
 * failed scrape until they go stale, and a change callback only when a fresh value changed.
 */
#include <arpa/inet.h>
#include <ev.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "health/engine.h"
#include "unit.h"

static struct ev_loop *loop;
static int changes;

static void on_change(void *arg)
{
	(void)arg;
	changes++;
}

/* A listening socket on 127.0.0.1:@p port (0 = any); returns the fd, the port in *port. */
static int listener(uint16_t *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(*port)};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 && listen(fd, 64) == 0, "listen");
	socklen_t len = sizeof(sin);
	getsockname(fd, (struct sockaddr *)&sin, &len);
	*port = ntohs(sin.sin_port);
	return fd;
}

static health_check_def_t tcp_def(const char *key, uint16_t port, uint32_t fall, uint32_t rise)
{
	health_check_def_t d = {.key = key,
	                        .monitor = "t",
	                        .spec = {.type = HEALTH_PROBE_TCP},
	                        .interval_ms = 100,
	                        .timeout_ms = 80,
	                        .fall = fall,
	                        .rise = rise,
	                        .ttl_floor = 1};
	char text[32];
	snprintf(text, sizeof(text), "127.0.0.1:%u", port);
	CHECK(steer_sockaddr_parse(text, 0, &d.addr) == 0, "addr");
	return d;
}

static void timeout_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l;
	(void)revents;
	*(bool *)w->data = true;
}

/* Run the loop until check @p i reaches @p down with at least @p probes results, or 3 s. */
static bool run_until(health_engine_t *e, size_t i, bool down, uint64_t probes)
{
	bool late = false;
	ev_timer t;
	ev_timer_init(&t, timeout_cb, 3., 0.);
	t.data = &late;
	ev_timer_start(loop, &t);
	health_check_status_t st;
	for (;;) {
		health_engine_status(e, i, &st);
		if ((st.known && !st.restored && st.down == down && st.probes >= probes) || late)
			break;
		ev_run(loop, EVRUN_ONCE);
	}
	ev_timer_stop(loop, &t);
	return !late;
}

/* Run the loop for @p seconds. */
static void run_for(double seconds)
{
	bool done = false;
	ev_timer t;
	ev_timer_init(&t, timeout_cb, seconds, 0.);
	t.data = &done;
	ev_timer_start(loop, &t);
	while (!done)
		ev_run(loop, EVRUN_ONCE);
}

static void test_fall_rise_and_ttl(void)
{
	uint16_t port = 0;
	int fd = listener(&port);
	health_engine_t *e;
	char err[256];
	CHECK(health_engine_new(loop, NULL, on_change, NULL, &e, err, sizeof(err)) == 0, "new");
	health_check_def_t d = tcp_def("t@a", port, 5, 3);
	health_engine_set_checks(e, &d, 1, NULL);
	CHECK(!health_engine_first_round_done(e), "nothing known before the first result");
	CHECK(run_until(e, 0, false, 1), "first result: UP");
	CHECK(health_engine_first_round_done(e), "first round done");
	health_check_status_t st;
	health_engine_status(e, 0, &st);
	CHECK(st.ttl_cap == 0 && st.flaps == 0 && strcmp(health_check_state_str(&st), "UP") == 0,
	      "steady UP: no cap (%u)", st.ttl_cap);
	close(fd);
	CHECK(run_until(e, 0, false, st.probes + 1), "one failure");
	health_engine_status(e, 0, &st);
	/* UP with 1 of 5 failures: 4 x 100 ms left, rounded up to 1 s. */
	CHECK(st.fail_run == 1 && st.ttl_cap == 1, "UP with a failure: cap %u", st.ttl_cap);
	CHECK(run_until(e, 0, true, 0), "DOWN after fall");
	health_engine_status(e, 0, &st);
	CHECK(st.fail_run == 5 && st.flaps == 1, "fall 5: %u failures, %u flaps", st.fail_run,
	      st.flaps);
	CHECK(strstr(st.last_detail, "refused") != NULL, "detail: %s", st.last_detail);
	CHECK(st.ttl_cap == 1, "DOWN: (rise) x 100 ms -> 1 s (%u)", st.ttl_cap);
	fd = listener(&port);
	CHECK(run_until(e, 0, false, 0), "UP after rise");
	health_engine_status(e, 0, &st);
	CHECK(st.ok_run == 3 && st.flaps == 2 && !st.flapping, "rise 3: %u successes", st.ok_run);
	health_engine_free(e);
	close(fd);
}

static void test_flapping(void)
{
	uint16_t port = 0;
	int fd = listener(&port);
	health_engine_t *e;
	char err[256];
	CHECK(health_engine_new(loop, NULL, on_change, NULL, &e, err, sizeof(err)) == 0, "new");
	health_check_def_t d = tcp_def("t@f", port, 1, 1);
	d.ttl_floor = 7;
	health_engine_set_checks(e, &d, 1, NULL);
	CHECK(run_until(e, 0, false, 1), "UP");
	for (int i = 0; i < 2; i++) {
		close(fd);
		CHECK(run_until(e, 0, true, 0), "down %d", i);
		fd = listener(&port);
		CHECK(run_until(e, 0, false, 0), "up %d", i);
	}
	health_check_status_t st;
	health_engine_status(e, 0, &st);
	/* Four changes within the window: flapping, and even a steady UP gets the floor. */
	CHECK(st.flapping && st.flaps == 4 && st.ttl_cap == 7, "flapping: %d flaps %u cap %u",
	      st.flapping, st.flaps, st.ttl_cap);
	health_engine_free(e);
	close(fd);
}

static void test_state_file_and_identity(void)
{
	char dir[] = "/tmp/steer-test-engine-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char path[128];
	snprintf(path, sizeof(path), "%s/health.state", dir);
	uint16_t port = 0;
	int fd = listener(&port);
	close(fd); /* nothing listens: the check goes DOWN on its first result */
	health_engine_t *e;
	char err[256];
	CHECK(health_engine_new(loop, path, on_change, NULL, &e, err, sizeof(err)) == 0, "new");
	health_check_def_t d = tcp_def("t@s", port, 2, 2);
	health_engine_set_checks(e, &d, 1, path);
	CHECK(run_until(e, 0, true, 1), "first result decides: DOWN at once");
	run_for(0.3); /* the state file is written once per burst of changes, 100 ms later */
	FILE *f = fopen(path, "r");
	char line[256] = "", want[64];
	while (f && fgets(line, sizeof(line), f) && line[0] == '#')
		;
	if (f)
		fclose(f);
	snprintf(want, sizeof(want), "t@s DOWN ");
	CHECK(strncmp(line, want, strlen(want)) == 0, "state file line: %s", line);
	health_check_status_t st, st2;
	health_engine_status(e, 0, &st);

	/* The same definition again keeps the check; a changed one starts over, restored. */
	health_engine_set_checks(e, &d, 1, path);
	health_engine_status(e, 0, &st2);
	CHECK(st2.probes == st.probes && st2.since == st.since, "unchanged check kept");
	d.fall = 3;
	health_engine_set_checks(e, &d, 1, path);
	health_engine_status(e, 0, &st2);
	CHECK(st2.probes == 0 && st2.restored && st2.down &&
	          strcmp(health_check_state_str(&st2), "DOWN (restored)") == 0,
	      "changed check: new, state restored from the file");
	CHECK(!health_engine_first_round_done(e), "a restored state is not a result");
	health_engine_free(e);

	/* A new engine (a restart) restores it too. */
	CHECK(health_engine_new(loop, path, on_change, NULL, &e, err, sizeof(err)) == 0, "again");
	health_engine_set_checks(e, &d, 1, path);
	health_engine_status(e, 0, &st2);
	CHECK(st2.restored && st2.down && st2.since == st.since, "restored after restart");
	health_engine_free(e);
	unlink(path);
	rmdir(dir);
}

static void test_static_and_start_errors(void)
{
	health_engine_t *e;
	char err[256];
	CHECK(health_engine_new(loop, NULL, on_change, NULL, &e, err, sizeof(err)) == 0, "new");
	health_check_def_t defs[2] = {tcp_def("s@x", 1, 1, 1), tcp_def("t@noport", 0, 1, 1)};
	defs[0].is_static = true;
	defs[0].static_down = true;
	health_engine_set_checks(e, defs, 2, NULL);
	health_check_status_t st;
	health_engine_status(e, 0, &st);
	CHECK(st.known && st.down && st.is_static && st.probes == 0, "static: DOWN, never probed");
	CHECK(run_until(e, 1, true, 1), "a probe that cannot start counts as a failure");
	health_engine_status(e, 1, &st);
	CHECK(strstr(st.last_detail, "cannot probe") != NULL, "detail: %s", st.last_detail);
	CHECK(health_engine_max_timeout(e) == 80, "max timeout ignores static checks");
	health_engine_free(e);
}

/* ---- metrics checks against an HTTP responder on the loop ---- */

static const char *http_body; /* what the responder serves now */

typedef struct {
	ev_io w;
	char req[2048];
	size_t len;
} http_client_t;

static void on_client(struct ev_loop *l, ev_io *w, int revents)
{
	(void)revents;
	http_client_t *c = (http_client_t *)w;
	ssize_t n = read(w->fd, c->req + c->len, sizeof(c->req) - 1 - c->len);
	if (n > 0) {
		c->len += (size_t)n;
		c->req[c->len] = '\0';
		if (!strstr(c->req, "\r\n\r\n"))
			return;
		char head[128];
		int hl =
		    snprintf(head, sizeof(head),
		             "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		             strlen(http_body));
		CHECK(write(w->fd, head, (size_t)hl) == hl, "response head");
		CHECK(write(w->fd, http_body, strlen(http_body)) == (ssize_t)strlen(http_body),
		      "response body");
	}
	ev_io_stop(l, w);
	close(w->fd);
	free(c);
}

static void on_accept(struct ev_loop *l, ev_io *w, int revents)
{
	(void)revents;
	int fd = accept(w->fd, NULL, NULL);
	if (fd < 0)
		return;
	http_client_t *c = calloc(1, sizeof(*c));
	ev_io_init(&c->w, on_client, fd, EV_READ);
	ev_io_start(l, &c->w);
}

/* Run the loop until check @p i has @p probes results (or 3 s). */
static bool run_results(health_engine_t *e, size_t i, uint64_t probes)
{
	bool late = false;
	ev_timer t;
	ev_timer_init(&t, timeout_cb, 3., 0.);
	t.data = &late;
	ev_timer_start(loop, &t);
	health_check_status_t st;
	for (health_engine_status(e, i, &st); st.probes < probes && !late;
	     health_engine_status(e, i, &st))
		ev_run(loop, EVRUN_ONCE);
	ev_timer_stop(loop, &t);
	return !late;
}

enum { C = HEALTH_METRIC_CONNECTIONS, CAP = HEALTH_METRIC_CAPACITY, K = HEALTH_METRIC_KBPS };

static void test_metrics_check(void)
{
	uint16_t port = 0;
	int lfd = listener(&port);
	ev_io acc;
	ev_io_init(&acc, on_accept, lfd, EV_READ);
	ev_io_start(loop, &acc);
	health_engine_t *e;
	char err[256];
	CHECK(health_engine_new(loop, NULL, on_change, NULL, &e, err, sizeof(err)) == 0, "new");
	health_check_def_t d = tcp_def("load@127.0.0.1", port, 1, 1);
	d.spec.type = HEALTH_PROBE_METRICS;
	d.spec.format = METRICS_PROMETHEUS;
	d.spec.path = "/metrics";
	d.spec.metric_expr[C] = "conn{pool=\"a\"}";
	d.spec.metric_expr[K] = "rate(bytes_total) / 1000";
	d.metric_const[CAP] = 500;
	d.metric_const_mask = 1u << CAP;
	d.stale_after_ms = 400;
	d.interval_ms = 100;
	http_body = "conn{pool=\"a\"} 10\nconn{pool=\"b\"} 99\nbytes_total 1000\n";
	health_engine_set_checks(e, &d, 1, NULL);
	health_check_status_t st;
	health_engine_status(e, 0, &st);
	CHECK(st.is_metrics && st.have == 1u << CAP && st.fresh == 1u << CAP,
	      "before a scrape: only the configured number");

	int before = changes;
	CHECK(run_results(e, 0, 1), "first scrape");
	health_engine_status(e, 0, &st);
	CHECK(st.known && !st.down && st.last_ok && st.values[C] == 10 &&
	          st.fresh == (1u << C | 1u << CAP),
	      "first scrape: the gauge, no rate yet (fresh %x, %s)", st.fresh, st.last_detail);
	CHECK(strcmp(health_check_state_str(&st), "metrics") == 0, "state text");
	CHECK(changes == before + 1, "first values: one change (%d)", changes - before);

	http_body = "conn{pool=\"a\"} 10\nbytes_total 3000\n";
	CHECK(run_results(e, 0, 2), "second scrape");
	health_engine_status(e, 0, &st);
	CHECK((st.fresh & 1u << K) && st.values[K] > 2 && st.values[K] < 40,
	      "rate: 2000 bytes over about 100 ms, in KB/s: %g", st.values[K]);

	/* The same numbers: the rate becomes 0 once, then nothing changes, and no callback. */
	http_body = "conn{pool=\"a\"} 10\nbytes_total 3000\n";
	CHECK(run_results(e, 0, 3), "third scrape");
	before = changes;
	CHECK(run_results(e, 0, 6), "three more");
	health_engine_status(e, 0, &st);
	CHECK(st.values[K] == 0 && changes == before, "unchanged values: no callback (%d)",
	      changes - before);

	/* A counter reset: no rate this round, the last one stays. */
	http_body = "conn{pool=\"a\"} 12\nbytes_total 5\n";
	CHECK(run_results(e, 0, 7), "reset scrape");
	health_engine_status(e, 0, &st);
	CHECK(st.values[C] == 12 && st.values[K] == 0 && (st.fresh & 1u << K),
	      "after a reset the gauge moves and the rate is kept");

	/* Garbage: the scrape fails, the values stay until stale-after, then go (a callback). */
	http_body = "<html>oops</html>\n";
	CHECK(run_results(e, 0, 8), "garbage scrape");
	health_engine_status(e, 0, &st);
	CHECK(!st.last_ok && strncmp(st.last_detail, "prometheus body: line 1", 23) == 0 &&
	          (st.fresh & 1u << C) && st.values[C] == 12,
	      "failed scrape keeps the values: %s", st.last_detail);
	before = changes;
	run_for(0.6);
	health_engine_status(e, 0, &st);
	CHECK(st.fresh == 1u << CAP && (st.have & 1u << C) && st.age_ms[C] >= 400 && !st.down,
	      "stale after 400 ms (fresh %x, age %u)", st.fresh, st.age_ms[C]);
	CHECK(changes > before, "going stale calls back");
	health_engine_free(e);
	ev_io_stop(loop, &acc);
	close(lfd);
}

int main(void)
{
	loop = ev_loop_new(EVFLAG_AUTO);
	test_fall_rise_and_ttl();
	test_flapping();
	test_state_file_and_identity();
	test_static_and_start_errors();
	test_metrics_check();
	CHECK(changes > 0, "change callback called");
	ev_loop_destroy(loop);
	return unit_finish("test_engine");
}
