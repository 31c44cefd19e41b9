/*
 * Alert delivery (ops/alerts.c) against real receivers on loopback: a small HTTP server on
 * the same libev loop answering each POST with a scripted status (500, 500, then 200: the
 * third attempt is the one delivered, after the 1 s and 2 s backoffs), a receiver that never
 * answers (the timeout), a closed port (the queue fills while the destination backs off and
 * drops the oldest), and exec hooks: a script writing its environment to a file, one failing,
 * one sleeping past its timeout (killed).
 */
#include "ops/alerts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "unit.h"

/* ---- a scripted HTTP receiver on the loop ---- */

#define MAX_REQS 8

typedef struct {
	struct ev_loop *loop;
	int fd;
	uint16_t port;
	ev_io accept_w;
	int statuses[MAX_REQS]; /* answer of request i; 0 = never answer */
	int n_reqs;
	char bodies[MAX_REQS][1024];
	double at[MAX_REQS];
} receiver_t;

typedef struct {
	receiver_t *r;
	ev_io io;
	char buf[4096];
	size_t len;
	bool answered;
} conn_t;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A whole request: the headers and Content-Length bytes of body. */
static bool request_complete(conn_t *c, const char **body)
{
	c->buf[c->len] = '\0';
	char *end = strstr(c->buf, "\r\n\r\n");
	if (end == NULL)
		return false;
	const char *cl = strcasestr(c->buf, "Content-Length:");
	size_t want = cl ? strtoul(cl + 15, NULL, 10) : 0;
	*body = end + 4;
	return c->len - (size_t)(end + 4 - c->buf) >= want;
}

static void conn_close(struct ev_loop *loop, conn_t *c)
{
	ev_io_stop(loop, &c->io);
	close(c->io.fd);
	free(c);
}

static void on_conn(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)revents;
	conn_t *c = w->data;
	ssize_t n = read(w->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
	if (n <= 0) {
		conn_close(loop, c);
		return;
	}
	c->len += (size_t)n;
	const char *body;
	if (c->answered || !request_complete(c, &body))
		return;
	receiver_t *r = c->r;
	int i = r->n_reqs < MAX_REQS ? r->n_reqs : MAX_REQS - 1;
	snprintf(r->bodies[i], sizeof(r->bodies[i]), "%s", body);
	r->at[i] = now_s();
	r->n_reqs++;
	c->answered = true;
	if (r->statuses[i] == 0)
		return; /* hang: the sender's timeout must end it */
	char resp[128];
	int len = snprintf(resp, sizeof(resp),
	                   "HTTP/1.1 %d X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
	                   r->statuses[i]);
	ssize_t ignored = write(w->fd, resp, (size_t)len);
	(void)ignored;
	conn_close(loop, c);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)revents;
	receiver_t *r = w->data;
	int fd = accept4(r->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	conn_t *c = calloc(1, sizeof(*c));
	c->r = r;
	ev_io_init(&c->io, on_conn, fd, EV_READ);
	c->io.data = c;
	ev_io_start(loop, &c->io);
}

static void receiver_start(receiver_t *r, struct ev_loop *loop)
{
	r->loop = loop;
	r->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t slen = sizeof(sin);
	CHECK(bind(r->fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 && listen(r->fd, 16) == 0 &&
	          getsockname(r->fd, (struct sockaddr *)&sin, &slen) == 0,
	      "receiver listens: %s", strerror(errno));
	r->port = ntohs(sin.sin_port);
	ev_io_init(&r->accept_w, on_accept, r->fd, EV_READ);
	r->accept_w.data = r;
	ev_io_start(loop, &r->accept_w);
}

static void receiver_stop(receiver_t *r)
{
	ev_io_stop(r->loop, &r->accept_w);
	close(r->fd);
}

/* ---- helpers ---- */

static const alert_event_t EVENT = {.seq = 7,
                                    .time = 1700000000.25,
                                    .kind = "target",
                                    .subject = "service/www.example.test/dc1/192.0.2.10",
                                    .from = "up",
                                    .to = "down",
                                    .reason = "web@192.0.2.10:80: HTTP 503 \"x\""};

static int64_t stat_of(const alerts_t *a, const char *key)
{
	json_t *j = alerts_stats_json(a);
	int64_t v = json_integer_value(json_object_get(j, key));
	json_decref(j);
	return v;
}

static void tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/* Run the loop until @p done says so or @p timeout_s passes. */
static void run_until(struct ev_loop *loop, bool (*done)(void *), void *arg, double timeout_s)
{
	double end = now_s() + timeout_s;
	while (!done(arg) && now_s() < end) {
		ev_timer t;
		ev_timer_init(&t, tick, 0.02, 0.);
		ev_timer_start(loop, &t);
		ev_run(loop, EVRUN_ONCE);
		ev_timer_stop(loop, &t);
	}
}

typedef struct {
	const alerts_t *a;
	int64_t want;
	const char *key;
} stat_wait_t;

static bool stat_reached(void *arg)
{
	stat_wait_t *w = arg;
	return stat_of(w->a, w->key) >= w->want;
}

static void wait_stat(struct ev_loop *loop, const alerts_t *a, const char *key, int64_t want,
                      double timeout_s)
{
	stat_wait_t w = {a, want, key};
	run_until(loop, stat_reached, &w, timeout_s);
}

/* ---- tests ---- */

static void test_event_json(void)
{
	json_t *j = alerts_event_json(&EVENT, "n1");
	CHECK(json_integer_value(json_object_get(j, "seq")) == 7, "seq");
	CHECK(json_real_value(json_object_get(j, "time")) == 1700000000.25, "time");
	CHECK(strcmp(json_string_value(json_object_get(j, "timestamp")),
	             "2023-11-14T22:13:20.250Z") == 0,
	      "timestamp %s", json_string_value(json_object_get(j, "timestamp")));
	CHECK(strcmp(json_string_value(json_object_get(j, "reason")), EVENT.reason) == 0, "reason");
	CHECK(strcmp(json_string_value(json_object_get(j, "node")), "n1") == 0, "node");
	json_decref(j);
}

static void test_bad_definitions(struct ev_loop *loop)
{
	static const struct {
		alert_dest_def_t def;
		const char *want;
	} rows[] = {
	    {{.webhook = "ftp://x/"}, "want an http:// or https:// URL"},
	    {{.exec = "relative/hook"}, "want an absolute path"},
	    {{.exec = ""}, "want an absolute path"},
	    {{0}, "exactly one of webhook and exec"},
	    {{.webhook = "http://x/", .exec = "/bin/true"}, "exactly one of webhook and exec"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		alerts_t *a = NULL;
		char err[256] = "";
		int ret = alerts_new(loop, &rows[i].def, 1, "n1", &a, err, sizeof(err));
		CHECK(ret == STEER_EINVAL && a == NULL && strstr(err, rows[i].want),
		      "row %zu: %d '%s'", i, ret, err);
	}
}

static void test_webhook_retries(struct ev_loop *loop)
{
	receiver_t r = {.statuses = {500, 500, 200}};
	receiver_start(&r, loop);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/hook", r.port);
	alert_dest_def_t def = {.webhook = url, .timeout_ms = 2000, .retries = 2};
	alerts_t *a = NULL;
	char err[256];
	CHECK(alerts_new(loop, &def, 1, "n1", &a, err, sizeof(err)) == 0, "new: %s", err);
	double t0 = now_s();
	alerts_send(a, &EVENT);
	wait_stat(loop, a, "sent", 1, 10);
	CHECK(r.n_reqs == 3, "three attempts: %d", r.n_reqs);
	CHECK(stat_of(a, "sent") == 1 && stat_of(a, "failures") == 2 &&
	          stat_of(a, "given_up") == 0 && stat_of(a, "queued") == 0,
	      "counters after 500, 500, 200");
	CHECK(r.at[0] - t0 < 0.5, "first attempt at once: %.3f", r.at[0] - t0);
	CHECK(r.at[1] - r.at[0] >= 0.95 && r.at[1] - r.at[0] < 1.5, "1 s backoff: %.3f",
	      r.at[1] - r.at[0]);
	CHECK(r.at[2] - r.at[1] >= 1.95 && r.at[2] - r.at[1] < 2.5, "2 s backoff: %.3f",
	      r.at[2] - r.at[1]);
	json_error_t jerr;
	json_t *body = json_loads(r.bodies[2], 0, &jerr);
	CHECK(body != NULL, "body is JSON: %s", r.bodies[2]);
	CHECK(body &&
	          strcmp(json_string_value(json_object_get(body, "subject")), EVENT.subject) == 0 &&
	          strcmp(json_string_value(json_object_get(body, "to")), "down") == 0,
	      "body: %s", r.bodies[2]);
	json_decref(body);
	alerts_free(a);
	receiver_stop(&r);
}

static void test_webhook_gives_up_and_times_out(struct ev_loop *loop)
{
	receiver_t r = {.statuses = {0, 404}};
	receiver_start(&r, loop);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/hook", r.port);
	alert_dest_def_t def = {.webhook = url, .timeout_ms = 300, .retries = 1};
	alerts_t *a = NULL;
	char err[256];
	CHECK(alerts_new(loop, &def, 1, "n1", &a, err, sizeof(err)) == 0, "new: %s", err);
	alerts_send(a, &EVENT);
	wait_stat(loop, a, "given_up", 1, 5);
	CHECK(r.n_reqs == 2 && stat_of(a, "given_up") == 1 && stat_of(a, "failures") == 2 &&
	          stat_of(a, "sent") == 0,
	      "a hang (timeout) then a 404: given up after 2 attempts (%d)", r.n_reqs);
	alerts_free(a);
	receiver_stop(&r);
}

static void test_queue_drops_oldest(struct ev_loop *loop)
{
	/* a port nobody listens on: the first attempt fails at once, then the backoff holds */
	receiver_t r = {0};
	receiver_start(&r, loop);
	uint16_t port = r.port;
	receiver_stop(&r);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/hook", port);
	alert_dest_def_t def = {.webhook = url, .timeout_ms = 300, .retries = 3};
	alerts_t *a = NULL;
	char err[256];
	CHECK(alerts_new(loop, &def, 1, "n1", &a, err, sizeof(err)) == 0, "new: %s", err);
	alerts_send(a, &EVENT);
	wait_stat(loop, a, "failures", 1, 3);
	for (int i = 0; i < ALERTS_QUEUE_MAX + 6; i++)
		alerts_send(a, &EVENT);
	CHECK(stat_of(a, "queued") == ALERTS_QUEUE_MAX && stat_of(a, "dropped") == 7,
	      "full queue: %lld queued, %lld dropped", (long long)stat_of(a, "queued"),
	      (long long)stat_of(a, "dropped"));
	json_t *j = alerts_stats_json(a);
	json_t *row = json_array_get(json_object_get(j, "destinations"), 0);
	CHECK(strcmp(json_string_value(json_object_get(row, "type")), "webhook") == 0 &&
	          strcmp(json_string_value(json_object_get(row, "target")), url) == 0 &&
	          json_integer_value(json_object_get(row, "dropped")) == 7,
	      "per destination row");
	json_decref(j);
	alerts_free(a);
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *buf = calloc(1, 8192);
	size_t n = fread(buf, 1, 8191, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void write_script(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	chmod(path, 0755);
}

static void test_exec(struct ev_loop *loop, const char *dir)
{
	char hook[512], out[512], cmd[1100];
	snprintf(hook, sizeof(hook), "%s/hook.sh", dir);
	snprintf(out, sizeof(out), "%s/env.txt", dir);
	write_script(hook, "#!/bin/sh\n"
	                   "out=\"$(dirname \"$0\")/env.txt\"\n"
	                   "read line && echo \"stdin not empty\" >> \"$out\"\n"
	                   "env | grep '^STEER_EVENT_' | sort >> \"$out\"\n"
	                   "echo \"args=$#\" >> \"$out\"\n");
	snprintf(cmd, sizeof(cmd), "%s", hook);
	setenv("STEER_EVENT_KIND", "inherited, must be replaced", 1);
	alert_dest_def_t def = {.exec = cmd, .timeout_ms = 2000, .retries = 0};
	alerts_t *a = NULL;
	char err[256];
	CHECK(alerts_new(loop, &def, 1, "n1", &a, err, sizeof(err)) == 0, "new: %s", err);
	alerts_send(a, &EVENT);
	wait_stat(loop, a, "sent", 1, 5);
	CHECK(stat_of(a, "sent") == 1, "exec delivered");
	char *text = read_file(out);
	const char *want = "STEER_EVENT_FROM=up\n"
	                   "STEER_EVENT_KIND=target\n"
	                   "STEER_EVENT_NODE=n1\n"
	                   "STEER_EVENT_REASON=web@192.0.2.10:80: HTTP 503 \"x\"\n"
	                   "STEER_EVENT_SEQ=7\n"
	                   "STEER_EVENT_SUBJECT=service/www.example.test/dc1/192.0.2.10\n"
	                   "STEER_EVENT_TIME=2023-11-14T22:13:20.250Z\n"
	                   "STEER_EVENT_TO=down\n"
	                   "args=0\n";
	CHECK(text && strcmp(text, want) == 0, "environment:\n%s", text ? text : "(none)");
	free(text);
	alerts_free(a);
	unsetenv("STEER_EVENT_KIND");

	/* a failing hook is retried; a hook past its timeout is killed */
	char fail[512], slow[512];
	snprintf(fail, sizeof(fail), "%s/fail.sh", dir);
	snprintf(slow, sizeof(slow), "%s/slow.sh", dir);
	write_script(fail, "#!/bin/sh\nexit 3\n");
	write_script(slow, "#!/bin/sh\nsleep 30\n");
	alert_dest_def_t defs[] = {
	    {.exec = fail, .timeout_ms = 2000, .retries = 1},
	    {.exec = slow, .timeout_ms = 200, .retries = 0},
	    {.exec = "/nonexistent/hook", .timeout_ms = 200, .retries = 0},
	};
	CHECK(alerts_new(loop, defs, 3, "n1", &a, err, sizeof(err)) == 0, "new: %s", err);
	double t0 = now_s();
	alerts_send(a, &EVENT);
	wait_stat(loop, a, "given_up", 3, 5);
	json_t *j = alerts_stats_json(a);
	json_t *rows = json_object_get(j, "destinations");
	CHECK(json_integer_value(json_object_get(json_array_get(rows, 0), "failures")) == 2,
	      "exit 3, retried once");
	CHECK(json_integer_value(json_object_get(json_array_get(rows, 1), "given_up")) == 1,
	      "slow hook killed");
	CHECK(json_integer_value(json_object_get(json_array_get(rows, 2), "given_up")) == 1,
	      "missing hook");
	CHECK(now_s() - t0 < 2.5, "given up in %.2f s (1 s backoff for the retry)", now_s() - t0);
	json_decref(j);
	alerts_free(a);
}

int main(void)
{
	log_setup(LOG_TARGET_STDERR, LOG_LEVEL_ERR);
	struct ev_loop *loop = ev_default_loop(0);
	char dir[] = "/tmp/steer-test-alerts-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "temporary folder");
	test_event_json();
	test_bad_definitions(loop);
	test_webhook_retries(loop);
	test_webhook_gives_up_and_times_out(loop);
	test_queue_drops_oldest(loop);
	test_exec(loop, dir);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0, "cleanup");
	return unit_finish("alerts");
}
