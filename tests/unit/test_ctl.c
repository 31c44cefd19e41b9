/*
 * Tests for src/ctl: a real server on a libev loop in a thread, real clients. Covers the
 * request/reply framing, handler errors, malformed and oversized requests, silent clients being
 * dropped while others are served, many clients at once, stale-socket removal, refusal to
 * replace a live socket or a regular file, socket mode, and unlink on stop. Then the command
 * table and its dispatcher (ctl/commands.h) over a backend that records what each command
 * asked of it, and the same dispatcher behind the real socket.
 * "test_ctl serve PATH" runs a server with sample data for trying steerctl by hand.
 */
#include "ctl/ctl.h"

#include "ctl/commands.h"

#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "unit.h"

static int handler(const char *cmd, json_t *args, json_t **data, char *err, size_t errlen,
                   void *ctx)
{
	(void)ctx;
	if (strcmp(cmd, "echo") == 0) {
		*data = json_incref(args);
		return 0;
	}
	if (strcmp(cmd, "fail") == 0) {
		snprintf(err, errlen, "zones/example.test.zone:12: bad record");
		return STEER_EZONE;
	}
	if (strcmp(cmd, "fail-latin1") == 0) {
		snprintf(err, errlen, "zones/caf\xe9.zone:1: bad");
		return STEER_EZONE;
	}
	if (strcmp(cmd, "fail-silent") == 0)
		return STEER_ENOENT;
	if (strcmp(cmd, "status") == 0) {
		*data = json_pack("{s:s, s:i, s:i, s:i, s:i, s:[s,s], s:i, s:s, s:{s:i, s:b, s:n}}",
		                  "version", "0.1.0", "pid", 4242, "uptime_s", 93784, "workers", 2,
		                  "tcp_workers", 1, "listen", "127.0.0.1:5353", "[::1]:5353",
		                  "zones", 2, "config", "/etc/steer/steer.yaml", "last_reload",
		                  "at", 1700000000, "ok", 1, "error");
		return 0;
	}
	if (strcmp(cmd, "reload") == 0 && getenv("STEER_TEST_FAIL_RELOAD")) {
		snprintf(err, errlen, "zones/example.test.zone:12: invalid IPv4 address");
		return STEER_EZONE;
	}
	if (strcmp(cmd, "reload") == 0) {
		*data = json_pack("{s:[s], s:i, s:[s,s]}", "zones_reloaded", "example.test",
		                  "zones_unchanged", 3, "restart_needed", "listen", "workers");
		return 0;
	}
	if (strcmp(cmd, "zones") == 0) {
		*data = json_pack(
		    "[{s:s, s:I, s:i, s:i, s:s, s:i}, {s:s, s:I, s:i, s:i, s:s, s:i}]", "name",
		    "example.test", "serial", (json_int_t)2024010101, "records", 120, "nodes", 40,
		    "file", "zones/example.test.zone", "loaded_at", 1700000000, "name",
		    "a-much-longer-name.example", "serial", (json_int_t)1, "records", 5, "nodes", 3,
		    "file", "/var/lib/steer/long.zone", "loaded_at", 1700000500);
		return 0;
	}
	if (strcmp(cmd, "stats") == 0) {
		*data =
		    json_pack("{s:{s:i, s:i, s:i}, s:{s:i, s:i}, s:{s:i, s:i}, s:i, s:i, s:i, "
		              "s:i, s:i, s:i}",
		              "queries", "udp", 100, "tcp", 3, "udp6", 7, "rcode", "NOERROR", 90,
		              "NXDOMAIN", 20, "qtype", "A", 80, "AAAA", 30, "edns", 50, "edns_do",
		              2, "truncated", 1, "dropped", 0, "axfr", 1, "axfr_refused", 4);
		return 0;
	}
	if (strcmp(cmd, "upstreams") == 0) {
		*data = json_loads(
		    "{\"groups\": [{\"domain\": \".\", \"policy\": \"ordered\", \"active\": "
		    "[\"link2\"],"
		    " \"upstreams\": [\"link1\", \"link2\"]}],"
		    " \"upstreams\": [{\"name\": \"link1\", \"group\": \".\", \"policy\": "
		    "\"ordered\","
		    " \"address\": \"10.53.1.53:53\", \"source\": \"10.1.1.1\", \"link\": "
		    "\"veth1\","
		    " \"state\": \"link-down\", \"suspect\": false, \"usable\": false, \"active\": "
		    "false,"
		    " \"since\": 1700000000, \"since_s\": 12, \"reason\": \"device veth1 down\","
		    " \"queries\": 120, \"answers\": 100, \"timeouts\": 20, \"servfails\": 0,"
		    " \"srtt_ms\": 1.25, \"last_rtt_ms\": 1.5, \"probe_rtt_ms\": 2.5, \"probes\": "
		    "40,"
		    " \"probe_failures\": 3, \"hold_down_ms\": 10000},"
		    " {\"name\": \"link2\", \"group\": \".\", \"policy\": \"ordered\","
		    " \"address\": \"10.53.2.53:53\", \"source\": null, \"link\": null,"
		    " \"state\": \"up\", \"suspect\": true, \"usable\": true, \"active\": true,"
		    " \"since\": 1700000000, \"since_s\": 3600, \"reason\": \"probe answered\","
		    " \"queries\": 7, \"answers\": 7, \"timeouts\": 0, \"servfails\": 0,"
		    " \"srtt_ms\": null, \"last_rtt_ms\": null, \"probe_rtt_ms\": null, "
		    "\"probes\": 41,"
		    " \"probe_failures\": 0, \"hold_down_ms\": 5000}]}",
		    0, NULL);
		return 0;
	}
	if (strcmp(cmd, "cache") == 0 && json_array_size(args) > 0) {
		const char *name = json_string_value(json_array_get(args, 1));
		*data = json_pack("{s:o, s:b, s:i}", "name", name ? json_string(name) : json_null(),
		                  "subtree", 1, "entries_before", 1500);
		return 0;
	}
	if (strcmp(cmd, "cache") == 0) {
		*data = json_loads(
		    "{\"cache\": {\"entries\": 1500, \"bytes\": 3145728, \"max_bytes\": 268435456,"
		    " \"hits\": 900, \"misses\": 100, \"stale_answers\": 2, \"prefetches\": 5,"
		    " \"truncated\": 0, \"evictions\": 0, \"expired\": 10, \"inserts\": 1510,"
		    " \"replaced\": 3, \"refused\": 4},"
		    " \"engine\": {\"requests\": 105, \"answered\": 98, \"answered_stale\": 2,"
		    " \"servfail\": 1, \"refused_full\": 0, \"prefetches\": 5, "
		    "\"upstream_queries\": 110,"
		    " \"retries\": 6, \"tcp_queries\": 1, \"late_replies\": 2, \"socket_errors\": "
		    "0,"
		    " \"probes\": 81, \"cache_stores\": 1510, \"pending\": 0,"
		    " \"replies\": {\"accept\": 190, \"wrong-id\": 3}}}",
		    0, NULL);
		return 0;
	}
	snprintf(err, errlen, "unknown command '%s'", cmd);
	return STEER_EINVAL;
}

typedef struct {
	struct ev_loop *loop;
	ev_async stop;
	ctl_server_t *server;
	pthread_t thread;
} srv_t;

static void stop_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

static void *srv_main(void *arg)
{
	srv_t *s = arg;
	ev_run(s->loop, 0);
	return NULL;
}

static int srv_start_with(srv_t *s, const char *path, ctl_handler_cb cb, void *ctx)
{
	memset(s, 0, sizeof(*s));
	s->loop = ev_loop_new(EVFLAG_AUTO);
	ev_async_init(&s->stop, stop_cb);
	ev_async_start(s->loop, &s->stop);
	int ret = ctl_server_start(&s->server, s->loop, path, cb, ctx);
	if (ret != 0) {
		ev_loop_destroy(s->loop);
		return ret;
	}
	pthread_create(&s->thread, NULL, srv_main, s);
	return 0;
}

static int srv_start(srv_t *s, const char *path)
{
	return srv_start_with(s, path, handler, NULL);
}

static void srv_stop(srv_t *s)
{
	ev_async_send(s->loop, &s->stop);
	pthread_join(s->thread, NULL);
	ctl_server_stop(s->server);
	ev_loop_destroy(s->loop);
}

static int raw_connect(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Send raw bytes, read the reply line (up to EOF). */
static char *raw_call(const char *path, const char *data, size_t len)
{
	static char buf[4096];
	int fd = raw_connect(path);
	if (fd < 0)
		return NULL;
	size_t off = 0;
	while (off < len) {
		ssize_t n = send(fd, data + off, len - off, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	size_t got = 0;
	ssize_t n;
	while (got < sizeof(buf) - 1 && (n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	return buf;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_calls(const char *path)
{
	char err[512] = "";
	json_t *reply = NULL;
	json_t *args = json_pack("[s, i]", "a", 1);
	int ret = ctl_client_call(path, "echo", args, 2000, &reply, err, sizeof(err));
	CHECK(ret == 0 && json_is_true(json_object_get(reply, "ok")) &&
	          json_equal(json_object_get(reply, "data"), args),
	      "echo round trip (%s)", err);
	CHECK(args->refcount == 1, "the caller keeps its args reference");
	json_decref(reply);
	json_decref(args);

	ret = ctl_client_call(path, "echo", NULL, 2000, &reply, err, sizeof(err));
	CHECK(ret == 0 && json_is_array(json_object_get(reply, "data")) &&
	          json_array_size(json_object_get(reply, "data")) == 0,
	      "NULL args arrive as []");
	json_decref(reply);

	ret = ctl_client_call(path, "fail", NULL, 2000, &reply, err, sizeof(err));
	CHECK(ret == 0 && json_is_false(json_object_get(reply, "ok")) &&
	          strcmp(json_string_value(json_object_get(reply, "error")),
	                 "zones/example.test.zone:12: bad record") == 0,
	      "handler error text is returned");
	json_decref(reply);

	ret = ctl_client_call(path, "fail-latin1", NULL, 2000, &reply, err, sizeof(err));
	CHECK(ret == 0 && strcmp(json_string_value(json_object_get(reply, "error")),
	                         "zones/caf?.zone:1: bad") == 0,
	      "non-UTF-8 error text is made printable");
	json_decref(reply);

	ret = ctl_client_call(path, "fail-silent", NULL, 2000, &reply, err, sizeof(err));
	CHECK(ret == 0 && strcmp(json_string_value(json_object_get(reply, "error")),
	                         "No such file or directory") == 0,
	      "handler error without text uses steer_strerror");
	json_decref(reply);

	ret = ctl_client_call("/nonexistent/steer.sock", "status", NULL, 500, &reply, err,
	                      sizeof(err));
	CHECK(ret == STEER_ENOENT && !reply &&
	          strcmp(err, "cannot connect to /nonexistent/steer.sock: No such file or "
	                      "directory") == 0,
	      "missing socket: %d %s", ret, err);
}

static void test_malformed(const char *path)
{
	static const struct {
		const char *req, *reply;
	} rows[] = {
	    {"not json\n", "{\"ok\":false,\"error\":\"invalid JSON request: "},
	    {"[1,2]\n", "{\"ok\":false,\"error\":\"the request must be an object with a string "
	                "\\\"cmd\\\"\"}\n"},
	    {"{\"cmd\":5}\n", "{\"ok\":false,\"error\":\"the request must be an object"},
	    {"{\"cmd\":\"echo\",\"args\":{}}\n",
	     "{\"ok\":false,\"error\":\"\\\"args\\\" must be an array\"}\n"},
	    {"{\"cmd\":\"echo\",\"args\":null}\n", "{\"ok\":true,\"data\":[]}\n"},
	    {"{\"cmd\":\"echo\",\"args\":[\"x\"]}", "{\"ok\":true,\"data\":[\"x\"]}\n"},
	    {"{\"cmd\":\"nope\"}\n", "{\"ok\":false,\"error\":\"unknown command 'nope'\"}\n"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int fd = -1;
		const char *got;
		if (i == 5) {
			/* No newline: the request ends at EOF (shutdown of the write side). */
			fd = raw_connect(path);
			send(fd, rows[i].req, strlen(rows[i].req), 0);
			shutdown(fd, SHUT_WR);
			static char buf[512];
			ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_WAITALL);
			buf[n > 0 ? n : 0] = '\0';
			close(fd);
			got = buf;
		} else {
			got = raw_call(path, rows[i].req, strlen(rows[i].req));
		}
		CHECK(got && strncmp(got, rows[i].reply, strlen(rows[i].reply)) == 0,
		      "request %zu -> %s", i, got ? got : "(no connection)");
	}

	size_t big = 200 * 1024;
	char *huge = malloc(big);
	memset(huge, ' ', big);
	const char *got = raw_call(path, huge, big);
	CHECK(got && strcmp(got, "{\"ok\":false,\"error\":\"request too large (limit 65536 "
	                         "bytes)\"}\n") == 0,
	      "oversized request refused: %s", got ? got : "(none)");
	free(huge);
}

static void test_silent_and_many(const char *path)
{
	enum { N = 100 };
	int fds[N];
	char err[256];
	json_t *reply = NULL;
	/* A few silent clients must not stop others from being served. */
	for (int i = 0; i < 5; i++)
		fds[i] = raw_connect(path);
	double t0 = now_s();
	int ret = ctl_client_call(path, "status", NULL, 2000, &reply, err, sizeof(err));
	CHECK(ret == 0 && now_s() - t0 < 1.0, "served while 5 clients stay silent (%.3f s)",
	      now_s() - t0);
	json_decref(reply);
	char c;
	t0 = now_s();
	ssize_t n = recv(fds[0], &c, 1, 0);
	double waited = now_s() - t0;
	CHECK(n == 0 && waited > 3.0 && waited < 8.0, "silent client dropped after %.1f s", waited);
	for (int i = 0; i < 5; i++)
		close(fds[i]);

	/* More clients than the server serves at once: the rest wait in the backlog. */
	for (int i = 0; i < N; i++) {
		fds[i] = raw_connect(path);
		const char *req = "{\"cmd\":\"echo\",\"args\":[1]}\n";
		send(fds[i], req, strlen(req), MSG_NOSIGNAL);
	}
	int good = 0;
	for (int i = 0; i < N; i++) {
		char buf[128];
		ssize_t got = recv(fds[i], buf, sizeof(buf) - 1, MSG_WAITALL);
		buf[got > 0 ? got : 0] = '\0';
		good += strcmp(buf, "{\"ok\":true,\"data\":[1]}\n") == 0;
		close(fds[i]);
	}
	CHECK(good == N, "%d of %d concurrent clients answered", good, N);
}

static void test_socket_file(const char *dir)
{
	char path[100], file[100];
	srv_t a, b;
	struct stat st;
	snprintf(path, sizeof(path), "%s/life.sock", dir);

	/* A socket left by a crashed daemon: bound, never unlinked, nobody listening. */
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0, "stale socket created");
	close(fd);
	CHECK(srv_start(&a, path) == 0, "stale socket replaced");
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0660, "socket mode is 0%o",
	      st.st_mode & 0777);
	CHECK(srv_start(&b, path) == STEER_EEXIST, "a live socket is not replaced");
	json_t *reply = NULL;
	char err[256];
	CHECK(ctl_client_call(path, "status", NULL, 2000, &reply, err, sizeof(err)) == 0,
	      "the first server still answers");
	json_decref(reply);
	srv_stop(&a);
	CHECK(access(path, F_OK) != 0, "stop removes the socket");

	snprintf(file, sizeof(file), "%s/regular", dir);
	FILE *f = fopen(file, "w");
	fclose(f);
	CHECK(srv_start(&b, file) == STEER_EEXIST && access(file, F_OK) == 0,
	      "a regular file is never replaced");
	unlink(file);
	char longp[200];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	longp[0] = '/';
	CHECK(srv_start(&b, longp) == STEER_EINVAL, "an over-long path is refused");
}

static volatile sig_atomic_t quit;
static void on_signal(int sig)
{
	(void)sig;
	quit = 1;
}

/* ---- command table and dispatcher ------------------------------------------------------------ */

/* A backend that writes what it was asked into its buffer and answers {"did": ...}. */
typedef struct {
	char did[256];
	int prepared;
} rec_t;

static int rec_reply(rec_t *r, json_t **data)
{
	*data = json_pack("{s:s}", "did", r->did);
	return 0;
}

#define REC_SIMPLE(op)                                                                             \
	static int rec_##op(void *ctx, json_t **data, char *err, size_t errlen)                    \
	{                                                                                          \
		(void)err;                                                                         \
		(void)errlen;                                                                      \
		snprintf(((rec_t *)ctx)->did, sizeof(((rec_t *)ctx)->did), #op);                   \
		return rec_reply(ctx, data);                                                       \
	}
REC_SIMPLE(status)
REC_SIMPLE(zones)
REC_SIMPLE(stats)
REC_SIMPLE(override_list)
REC_SIMPLE(maps)

/* A plain reload fails (an error must reach the caller); a forced one succeeds. */
static int rec_reload(void *ctx, bool force, json_t **data, char *err, size_t errlen)
{
	if (force) {
		snprintf(((rec_t *)ctx)->did, sizeof(((rec_t *)ctx)->did), "reload force");
		return rec_reply(ctx, data);
	}
	snprintf(err, errlen, "zones/x.zone:3: bad record");
	return STEER_EZONE;
}

static int rec_explain(void *ctx, const char *name, const char *client, const char *ecs,
                       json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	rec_t *r = ctx;
	snprintf(r->did, sizeof(r->did), "explain %s %s %s", name, client, ecs ? ecs : "-");
	return rec_reply(r, data);
}

static int rec_filter(rec_t *r, const char *what, const char *pattern, json_t **data)
{
	snprintf(r->did, sizeof(r->did), "%s %s", what, pattern ? pattern : "-");
	return rec_reply(r, data);
}

static int rec_health(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return rec_filter(ctx, "health", pattern, data);
}

static int rec_monitors(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return rec_filter(ctx, "monitors", pattern, data);
}

static int rec_upstreams(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return rec_filter(ctx, "upstreams", pattern, data);
}

static int rec_cache(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	snprintf(((rec_t *)ctx)->did, sizeof(((rec_t *)ctx)->did), "cache");
	return rec_reply(ctx, data);
}

static int rec_cache_flush(void *ctx, const char *name, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return rec_filter(ctx, "cache flush", name, data);
}

static int rec_plain(void *ctx, const char *what, json_t **data)
{
	rec_t *r = ctx;
	snprintf(r->did, sizeof(r->did), "%s", what);
	return rec_reply(r, data);
}

static int rec_cluster(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return rec_plain(ctx, "cluster", data);
}

static int rec_cluster_health(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return rec_plain(ctx, "cluster health", data);
}

static int rec_cluster_config(void *ctx, const char *daemon, const char *const *opts, size_t n_opts,
                              json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	rec_t *r = ctx;
	int len = snprintf(r->did, sizeof(r->did), "config %s", daemon);
	for (size_t i = 0; i < n_opts && len > 0 && (size_t)len < sizeof(r->did); i++)
		len += snprintf(r->did + len, sizeof(r->did) - (size_t)len, " %s", opts[i]);
	return rec_reply(r, data);
}

static int rec_cluster_notify(void *ctx, const char *state, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return rec_filter(ctx, "notify", state, data);
}

static int rec_drain(void *ctx, unsigned timeout_ms, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	rec_t *r = ctx;
	snprintf(r->did, sizeof(r->did), "drain %u", timeout_ms);
	return rec_reply(r, data);
}

static int rec_undrain(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return rec_plain(ctx, "undrain", data);
}

static int rec_events(void *ctx, uint64_t since, size_t max, json_t **data, char *err,
                      size_t errlen)
{
	(void)err;
	(void)errlen;
	rec_t *r = ctx;
	snprintf(r->did, sizeof(r->did), "events since %llu max %zu", (unsigned long long)since,
	         max);
	return rec_reply(r, data);
}

static int rec_override(void *ctx, const ctl_override_req_t *req, json_t **data, char *err,
                        size_t errlen)
{
	(void)err;
	(void)errlen;
	static const char *const kinds[] = {"state", "weight", "any"};
	rec_t *r = ctx;
	int n = snprintf(r->did, sizeof(r->did), "override %s %s %s %s %u",
	                 req->action == CTL_OVERRIDE_SET ? "set" : "clear", kinds[req->kind],
	                 req->pattern, req->down ? "down" : "up", req->weight);
	if (req->for_ms && n > 0 && (size_t)n < sizeof(r->did))
		snprintf(r->did + n, sizeof(r->did) - (size_t)n, " for %ums", req->for_ms);
	return rec_reply(r, data);
}

static void rec_prepare(void *ctx)
{
	((rec_t *)ctx)->prepared++;
}

static ctl_backend_t rec_backend(rec_t *r)
{
	memset(r, 0, sizeof(*r));
	return (ctl_backend_t){.ctx = r,
	                       .prepare = rec_prepare,
	                       .status = rec_status,
	                       .zones = rec_zones,
	                       .reload = rec_reload,
	                       .stats = rec_stats,
	                       .explain = rec_explain,
	                       .health = rec_health,
	                       .monitors = rec_monitors,
	                       .override_list = rec_override_list,
	                       .override = rec_override,
	                       .maps = rec_maps,
	                       .upstreams = rec_upstreams,
	                       .cache = rec_cache,
	                       .cache_flush = rec_cache_flush,
	                       .cluster = rec_cluster,
	                       .cluster_health = rec_cluster_health,
	                       .cluster_config = rec_cluster_config,
	                       .cluster_notify = rec_cluster_notify,
	                       .drain = rec_drain,
	                       .undrain = rec_undrain,
	                       .events = rec_events};
}

static void test_dispatch(void)
{
	static const struct {
		const char *cmd;
		const char *args[5]; /* NULL-terminated */
		unsigned flags;
		int ret;
		const char *want; /* the backend call on success, a piece of the error otherwise */
	} rows[] = {
	    {"status", {NULL}, 0, 0, "status"},
	    {"zones", {NULL}, 0, 0, "zones"},
	    {"stats", {NULL}, 0, 0, "stats"},
	    {"status", {"x", NULL}, 0, STEER_EINVAL, "'status' takes no arguments"},
	    {"reload", {NULL}, 0, STEER_EZONE, "zones/x.zone:3: bad record"},
	    {"reload", {"--force", NULL}, 0, 0, "reload force"},
	    {"reload",
	     {"--now", NULL},
	     0,
	     STEER_EINVAL,
	     "reload: the only option is --force, not '--now'"},
	    {"maps", {NULL}, 0, 0, "maps"},
	    {"maps", {"x", NULL}, 0, STEER_EINVAL, "'maps' takes no arguments"},
	    {"explain",
	     {"www.example.test", "192.0.2.1", NULL},
	     0,
	     0,
	     "explain www.example.test 192.0.2.1 -"},
	    {"explain",
	     {"w", "192.0.2.1", "198.51.100.0/24", NULL},
	     0,
	     0,
	     "explain w 192.0.2.1 198.51.100.0/24"},
	    {"explain", {"w", NULL}, 0, STEER_EINVAL, "usage: explain NAME CLIENT-IP [ECS-SUBNET]"},
	    {"explain", {"a", "b", "c", "d", NULL}, 0, STEER_EINVAL, "usage: explain"},
	    {"health", {NULL}, 0, 0, "health -"},
	    {"health", {"service/*/dc1/*", NULL}, 0, 0, "health service/*/dc1/*"},
	    {"health", {"a", "b", NULL}, 0, STEER_EINVAL, "usage: health [PATTERN]"},
	    {"monitors", {"web@*", NULL}, 0, 0, "monitors web@*"},
	    {"override",
	     {"set", "service/x/*", "DOWN", NULL},
	     0,
	     0,
	     "override set state service/x/* down 0"},
	    {"override", {"set", "p", "up", NULL}, 0, 0, "override set state p up 0"},
	    {"override", {"set", "p", "sideways", NULL}, 0, STEER_EINVAL, "'up' or 'down'"},
	    {"override",
	     {"set", "p", NULL},
	     0,
	     STEER_EINVAL,
	     "usage: override set PATTERN up|down [FOR] | override clear PATTERN | override weight "
	     "PATTERN N|default [FOR] | override list"},
	    {"override",
	     {"set", "p", "down", "30m", NULL},
	     0,
	     0,
	     "override set state p down 0 for 1800000ms"},
	    {"override",
	     {"set", "p", "up", "1500ms", NULL},
	     0,
	     0,
	     "override set state p up 0 for 1500ms"},
	    {"override",
	     {"set", "p", "down", "2h", NULL},
	     0,
	     0,
	     "override set state p down 0 for 7200000ms"},
	    {"override",
	     {"set", "p", "down", "1d", NULL},
	     0,
	     0,
	     "override set state p down 0 for 86400000ms"},
	    {"override",
	     {"set", "p", "down", "30", NULL},
	     0,
	     STEER_EINVAL,
	     "override set: FOR must be a duration like 90s, 30m, 2h or 1d"},
	    {"override", {"set", "p", "down", "0s", NULL}, 0, STEER_EINVAL, "FOR must be"},
	    {"override", {"set", "p", "down", "50d", NULL}, 0, STEER_EINVAL, "at most 49 days"},
	    {"override", {"set", "p", "down", "-1m", NULL}, 0, STEER_EINVAL, "FOR must be"},
	    {"override",
	     {"weight", "p", "3", "10s", NULL},
	     0,
	     0,
	     "override set weight p up 3 for 10000ms"},
	    {"override",
	     {"weight", "p", "3", "soon", NULL},
	     0,
	     STEER_EINVAL,
	     "override weight: FOR must be"},
	    {"override",
	     {"weight", "p", "default", "10s", NULL},
	     0,
	     STEER_EINVAL,
	     "FOR makes no sense"},
	    {"override", {"clear", "p", "10s", NULL}, 0, STEER_EINVAL, "usage: override set"},
	    {"override", {"clear", "p", NULL}, 0, 0, "override clear any p up 0"},
	    {"override", {"weight", "p", "7", NULL}, 0, 0, "override set weight p up 7"},
	    {"override", {"weight", "p", "65535", NULL}, 0, 0, "override set weight p up 65535"},
	    {"override", {"weight", "p", "default", NULL}, 0, 0, "override clear weight p up 0"},
	    {"override", {"weight", "p", "65536", NULL}, 0, STEER_EINVAL, "0..65535"},
	    {"override", {"weight", "p", "-1", NULL}, 0, STEER_EINVAL, "0..65535"},
	    {"override", {"weight", "p", "", NULL}, 0, STEER_EINVAL, "0..65535"},
	    {"override", {"list", NULL}, 0, 0, "override_list"},
	    {"override", {NULL}, 0, STEER_EINVAL, "usage: override set"},
	    {"override", {"bogus", "p", NULL}, 0, STEER_EINVAL, "usage: override set"},
	    {"frobnicate",
	     {NULL},
	     0,
	     STEER_EINVAL,
	     "unknown command 'frobnicate' (try status, reload, zones, zone-refresh, "
	     "zone-retransfer, stats, explain, health, "
	     "monitors, maps, override, upstreams, cache, cluster, drain, undrain, paths, events)"},
	    {"upstreams", {NULL}, 0, 0, "upstreams -"},
	    {"upstreams", {"link*", NULL}, 0, 0, "upstreams link*"},
	    {"upstreams", {"a", "b", NULL}, 0, STEER_EINVAL, "usage: upstreams [PATTERN]"},
	    {"upstreams", {NULL}, CTL_DISPATCH_READ_ONLY, 0, "upstreams -"},
	    {"cache", {NULL}, 0, 0, "cache"},
	    {"cache", {NULL}, CTL_DISPATCH_READ_ONLY, 0, "cache"},
	    /* a row without a sub-command does not hide the one with ("cache flush") */
	    {"cache", {"flush", NULL}, 0, 0, "cache flush -"},
	    {"cache", {"flush", "Example.COM", NULL}, 0, 0, "cache flush Example.COM"},
	    {"cache", {"flush", "", NULL}, 0, STEER_EINVAL, "the name must not be empty"},
	    {"cache",
	     {"flush", "a", "b", NULL},
	     0,
	     STEER_EINVAL,
	     "usage: cache | cache flush [NAME]"},
	    {"cache", {"clear", NULL}, 0, STEER_EINVAL, "usage: cache | cache flush [NAME]"},
	    {"cache",
	     {"flush", NULL},
	     CTL_DISPATCH_READ_ONLY,
	     STEER_EACCES,
	     "'cache flush' changes the server"},
	    /* A front end without authorisation gets the read-only commands only. */
	    {"reload", {NULL}, CTL_DISPATCH_READ_ONLY, STEER_EACCES, "'reload' changes the server"},
	    {"override",
	     {"set", "p", "down", NULL},
	     CTL_DISPATCH_READ_ONLY,
	     STEER_EACCES,
	     "'override set' changes the server"},
	    {"override", {"clear", "p", NULL}, CTL_DISPATCH_READ_ONLY, STEER_EACCES, "changes"},
	    {"override",
	     {"weight", "p", "1", NULL},
	     CTL_DISPATCH_READ_ONLY,
	     STEER_EACCES,
	     "changes"},
	    {"override", {"list", NULL}, CTL_DISPATCH_READ_ONLY, 0, "override_list"},
	    {"health", {NULL}, CTL_DISPATCH_READ_ONLY, 0, "health -"},
	    {"cluster", {NULL}, CTL_DISPATCH_READ_ONLY, 0, "cluster"},
	    {"cluster", {"health", NULL}, CTL_DISPATCH_READ_ONLY, 0, "cluster health"},
	    {"cluster", {"bird-config", NULL}, 0, 0, "config bird"},
	    {"cluster",
	     {"frr-config", "ospf", "area=1", NULL},
	     CTL_DISPATCH_READ_ONLY,
	     0,
	     "config frr ospf area=1"},
	    {"cluster", {"notify", "MASTER", NULL}, 0, 0, "notify master"},
	    {"cluster",
	     {"notify", "primary", NULL},
	     0,
	     STEER_EINVAL,
	     "master, backup, fault or stop"},
	    {"cluster",
	     {"notify", "master", NULL},
	     CTL_DISPATCH_READ_ONLY,
	     STEER_EACCES,
	     "'cluster notify' changes the server"},
	    {"cluster", {"frob", NULL}, 0, STEER_EINVAL, "usage: cluster |"},
	    {"drain", {NULL}, 0, 0, "drain 0"},
	    {"drain", {"2s", NULL}, 0, 0, "drain 2000"},
	    {"drain", {"1500ms", NULL}, 0, 0, "drain 1500"},
	    {"drain", {"2m", NULL}, 0, 0, "drain 120000"},
	    {"drain", {"30", NULL}, 0, STEER_EINVAL, "a duration like 500ms"},
	    {"drain", {"0s", NULL}, 0, STEER_EINVAL, "a duration like 500ms"},
	    {"drain", {"-1s", NULL}, 0, STEER_EINVAL, "a duration like 500ms"},
	    {"drain", {NULL}, CTL_DISPATCH_READ_ONLY, STEER_EACCES, "'drain' changes the server"},
	    {"undrain", {NULL}, 0, 0, "undrain"},
	    {"undrain", {"x", NULL}, 0, STEER_EINVAL, "'undrain' takes no arguments"},
	    {"events", {NULL}, CTL_DISPATCH_READ_ONLY, 0, "events since 0 max 0"},
	    {"events", {"20", NULL}, 0, 0, "events since 0 max 20"},
	    {"events", {"since=17", NULL}, 0, 0, "events since 17 max 0"},
	    {"events", {"since=0", "5", NULL}, 0, 0, "events since 0 max 5"},
	    {"events",
	     {"5", "since=18446744073709551615", NULL},
	     0,
	     0,
	     "events since 18446744073709551615 max 5"},
	    {"events",
	     {"0", NULL},
	     0,
	     STEER_EINVAL,
	     "want [N] [since=SEQ] with N above 0, not '0'"},
	    {"events", {"-3", NULL}, 0, STEER_EINVAL, "not '-3'"},
	    {"events", {"7x", NULL}, 0, STEER_EINVAL, "not '7x'"},
	    {"events", {"5", "6", NULL}, 0, STEER_EINVAL, "not '6'"},
	    {"events", {"since=", NULL}, 0, STEER_EINVAL, "since= wants a sequence number"},
	    {"events", {"since=18446744073709551616", NULL}, 0, STEER_EINVAL, "since= wants"},
	    {"events", {"since=1", "since=2", NULL}, 0, STEER_EINVAL, "not 'since=2'"},
	    {"events", {"1", "2", "3", NULL}, 0, STEER_EINVAL, "usage: events [N] [since=SEQ]"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		rec_t rec;
		ctl_backend_t b = rec_backend(&rec);
		json_t *args = json_array();
		for (size_t k = 0; rows[i].args[k]; k++)
			json_array_append_new(args, json_string(rows[i].args[k]));
		json_t *data = NULL;
		char err[512] = "";
		int ret =
		    ctl_dispatch(&b, rows[i].cmd, args, rows[i].flags, &data, err, sizeof(err));
		CHECK(ret == rows[i].ret, "row %zu %s: ret %d, want %d (%s)", i, rows[i].cmd, ret,
		      rows[i].ret, err);
		if (rows[i].ret == 0) {
			const char *did = json_string_value(json_object_get(data, "did"));
			CHECK(did && strcmp(did, rows[i].want) == 0,
			      "row %zu %s: did '%s', want '%s'", i, rows[i].cmd,
			      did ? did : "(none)", rows[i].want);
		} else {
			CHECK(strstr(err, rows[i].want) != NULL,
			      "row %zu %s: error '%s' lacks '%s'", i, rows[i].cmd, err,
			      rows[i].want);
		}
		/* prepare runs for every command a row accepts, never for a refused one */
		const char *w = rows[i].want;
		bool refused = rows[i].ret == STEER_EACCES || strncmp(w, "usage:", 6) == 0 ||
		               strstr(w, "takes no") || strncmp(w, "unknown command", 15) == 0;
		CHECK(rec.prepared == (refused ? 0 : 1), "row %zu %s: prepared %d times", i,
		      rows[i].cmd, rec.prepared);
		json_decref(data);
		json_decref(args);
	}

	/* Arguments are strings; anything else is refused before the backend sees it. */
	rec_t rec;
	ctl_backend_t b = rec_backend(&rec);
	json_t *args = json_pack("[i]", 3);
	json_t *data = NULL;
	char err[256] = "";
	CHECK(ctl_dispatch(&b, "health", args, 0, &data, err, sizeof(err)) == STEER_EINVAL &&
	          strstr(err, "argument 1 is not a string") && rec.prepared == 0,
	      "non-string argument refused: %s", err);
	json_decref(args);
	CHECK(ctl_dispatch(&b, "status", NULL, 0, &data, err, sizeof(err)) == 0, "NULL args");
	json_decref(data);
}

/* The table is what front ends and help texts read: check its invariants. */
static void test_table(void)
{
	size_t n;
	const ctl_command_t *t = ctl_command_table(&n);
	static const char *const mutating[] = {"reload",          "override set", "override clear",
	                                       "override weight", "cache flush",  "cluster notify",
	                                       "drain",           "undrain",      "zone-refresh",
	                                       "zone-retransfer"};
	size_t n_mutating = 0;
	for (size_t i = 0; i < n; i++) {
		CHECK(t[i].handler && t[i].summary && t[i].args, "row %zu complete", i);
		CHECK(t[i].min_args <= t[i].max_args, "row %zu %s: argument bounds", i, t[i].name);
		for (size_t k = 0; k + 1 < i; k++)
			CHECK(strcmp(t[k].name, t[i].name) != 0 ||
			          strcmp(t[k + 1].name, t[i].name) == 0,
			      "rows of '%s' are adjacent", t[i].name);
		char full[64];
		snprintf(full, sizeof(full), "%s%s%s", t[i].name, t[i].sub ? " " : "",
		         t[i].sub ? t[i].sub : "");
		bool want = false;
		for (size_t k = 0; k < STEER_ARRAY_LEN(mutating); k++)
			want |= strcmp(full, mutating[k]) == 0;
		CHECK(t[i].mutates == want, "'%s' mutates: %d", full, t[i].mutates);
		n_mutating += t[i].mutates;
	}
	CHECK(n_mutating == STEER_ARRAY_LEN(mutating), "%zu mutating rows", n_mutating);
	char err[256];
	const char *argv[] = {"set", "p", "down"};
	const ctl_command_t *c = ctl_command_match("override", argv, 3, err, sizeof(err));
	CHECK(c && strcmp(c->sub, "set") == 0 && c->mutates, "match override set");
}

/* Root's default socket is the system one whatever the environment says. */
static void test_default_socket(void)
{
	char buf[CTL_SOCKET_PATH_MAX];
	const char *old = getenv("XDG_RUNTIME_DIR");
	char *saved = old ? strdup(old) : NULL;
	setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
	const char *got = ctl_default_socket(buf, sizeof(buf));
	if (geteuid() == 0)
		CHECK(strcmp(got, "/run/steer/steerd.sock") == 0, "root: %s", got);
	else
		CHECK(strcmp(got, "/run/user/1000/steerd.sock") == 0, "user: %s", got);
	setenv("XDG_RUNTIME_DIR", "relative/dir", 1);
	got = ctl_default_socket(buf, sizeof(buf));
	CHECK(strcmp(got, "/run/steer/steerd.sock") == 0, "a relative runtime dir is ignored: %s",
	      got);
	char longdir[200];
	memset(longdir, 'x', sizeof(longdir) - 1);
	longdir[0] = '/';
	longdir[sizeof(longdir) - 1] = '\0';
	setenv("XDG_RUNTIME_DIR", longdir, 1);
	got = ctl_default_socket(buf, sizeof(buf));
	CHECK(strcmp(got, "/run/steer/steerd.sock") == 0, "a path too long for a socket: %s", got);
	if (saved) {
		setenv("XDG_RUNTIME_DIR", saved, 1);
		free(saved);
	} else {
		unsetenv("XDG_RUNTIME_DIR");
	}
}

/* The dispatcher behind the real socket: what steerd serves. */
static void test_dispatch_over_socket(const char *dir)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/dispatch.sock", dir);
	rec_t rec;
	ctl_backend_t b = rec_backend(&rec);
	srv_t s;
	int ret = srv_start_with(&s, path, ctl_dispatch_cb, &b);
	CHECK(ret == 0, "dispatch server starts");
	if (ret != 0)
		return;
	json_t *reply = NULL;
	char err[256];
	json_t *args = json_pack("[s, s]", "clear", "service/*");
	ret = ctl_client_call(path, "override", args, 5000, &reply, err, sizeof(err));
	json_decref(args);
	const char *did = json_string_value(json_object_get(json_object_get(reply, "data"), "did"));
	CHECK(ret == 0 && did && strcmp(did, "override clear any service/* up 0") == 0,
	      "override clear over the socket: %s", did ? did : err);
	json_decref(reply);
	args = json_pack("[s]", "x");
	ret = ctl_client_call(path, "status", args, 5000, &reply, err, sizeof(err));
	json_decref(args);
	const char *e = json_string_value(json_object_get(reply, "error"));
	CHECK(ret == 0 && json_is_false(json_object_get(reply, "ok")) && e &&
	          strcmp(e, "'status' takes no arguments") == 0,
	      "usage error over the socket: %s", e ? e : err);
	json_decref(reply);
	srv_stop(&s);
}

int main(int argc, char **argv)
{
	log_setup(LOG_TARGET_STDERR, LOG_LEVEL_DEBUG);
	if (argc == 3 && strcmp(argv[1], "serve") == 0) {
		srv_t s;
		if (srv_start(&s, argv[2]) != 0)
			return 1;
		signal(SIGTERM, on_signal);
		signal(SIGINT, on_signal);
		while (!quit)
			pause();
		srv_stop(&s);
		return 0;
	}
	char dir[] = "/tmp/steer-ctl-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char path[256];
	snprintf(path, sizeof(path), "%s/steerd.sock", dir);
	srv_t s;
	int ret = srv_start(&s, path);
	CHECK(ret == 0, "server starts on %s", path);
	if (ret == 0) {
		test_calls(path);
		test_malformed(path);
		test_silent_and_many(path);
		srv_stop(&s);
	}
	test_socket_file(dir);
	test_dispatch();
	test_table();
	test_dispatch_over_socket(dir);
	test_default_socket();
	rmdir(dir);
	return unit_finish("test_ctl");
}
