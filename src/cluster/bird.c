/*
 * BIRD's control socket protocol (bird.h): one non-blocking connection per command, every
 * wait a poll() against one deadline for the whole exchange. Called by the keeper process
 * only, but holds no state, so any caller may use it.
 */
#include "cluster/bird.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"

/* BIRD's lines are short; a longer one is cut here (its rest is read and dropped). */
#define BIRD_LINE_MAX 512

typedef struct {
	int fd;
	int64_t deadline; /* ms, CLOCK_MONOTONIC */
	const char *path;
	const char *command;
	char buf[4096];
	size_t len;
} bird_conn_t;

/* Called for every reply line with its code (continuation lines carry the code before). */
typedef void (*bird_line_cb)(int code, const char *text, void *ctx);

static int64_t bird_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void bird_seterr(const bird_conn_t *c, char *err, size_t errlen, const char *fmt, ...)
    STEER_PRINTF(4, 5);
static void bird_seterr(const bird_conn_t *c, char *err, size_t errlen, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	if (!errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->command)
		snprintf(err, errlen, "BIRD at %s: %s: %s", c->path, c->command, msg);
	else
		snprintf(err, errlen, "BIRD at %s: %s", c->path, msg);
}

/* Wait for @p events until the deadline: 0, or -ETIMEDOUT. */
static int bird_wait(bird_conn_t *c, short events)
{
	for (;;) {
		int64_t left = c->deadline - bird_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = c->fd, .events = events};
		int n = poll(&pfd, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int bird_connect(bird_conn_t *c, char *err, size_t errlen)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	if (strlen(c->path) >= sizeof(sun.sun_path)) {
		bird_seterr(c, err, errlen, "socket path too long");
		return STEER_EINVAL;
	}
	strcpy(sun.sun_path, c->path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->fd < 0) {
		int ret = -errno;
		bird_seterr(c, err, errlen, "socket: %s", strerror(errno));
		return ret;
	}
	if (connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
		return 0;
	int ret = -errno;
	if (errno == EINPROGRESS) {
		ret = bird_wait(c, POLLOUT);
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (ret == 0 && getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr)
			ret = -soerr;
	}
	if (ret == 0)
		return 0;
	if (ret == -ENOENT || ret == -ECONNREFUSED)
		bird_seterr(c, err, errlen, "%s (is BIRD running?)", strerror(-ret));
	else if (ret == -EAGAIN)
		bird_seterr(c, err, errlen, "connection backlog full (BIRD busy)");
	else
		bird_seterr(c, err, errlen, "connect: %s", strerror(-ret));
	return ret;
}

/* One line without its newline into @p line; 0, or a negative errno with @p err. */
static int bird_read_line(bird_conn_t *c, char *line, size_t linelen, char *err, size_t errlen)
{
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		if (nl) {
			size_t n = (size_t)(nl - c->buf);
			snprintf(line, linelen, "%.*s", (int)n, c->buf);
			c->len -= n + 1;
			memmove(c->buf, nl + 1, c->len);
			return 0;
		}
		if (c->len == sizeof(c->buf))
			c->len = 0; /* a line longer than the buffer: drop what we have of it */
		int ret = bird_wait(c, POLLIN);
		if (ret < 0) {
			bird_seterr(c, err, errlen, "no complete answer within the timeout");
			return ret;
		}
		ssize_t got = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
		if (got == 0) {
			bird_seterr(c, err, errlen, "BIRD closed the connection");
			return -ECONNRESET;
		}
		if (got < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			ret = -errno;
			bird_seterr(c, err, errlen, "read: %s", strerror(errno));
			return ret;
		}
		c->len += (size_t)got;
	}
}

/*
 * Read one reply up to its last line. Returns its final code (0-9999) with @p last holding
 * that line's text, or a negative errno.
 */
static int bird_read_reply(bird_conn_t *c, bird_line_cb cb, void *ctx, char *last, size_t lastlen,
                           char *err, size_t errlen)
{
	int code = -1;
	for (;;) {
		char line[BIRD_LINE_MAX];
		int ret = bird_read_line(c, line, sizeof(line), err, errlen);
		if (ret < 0)
			return ret;
		if (line[0] == '+')
			continue; /* an asynchronous notice, not part of this reply */
		if (line[0] == ' ') {
			if (code < 0) {
				bird_seterr(c, err, errlen,
				            "reply starts with a continuation line");
				return STEER_EMALF;
			}
			if (cb)
				cb(code, line + 1, ctx);
			continue;
		}
		bool digits = true;
		for (int i = 0; i < 4; i++)
			digits = digits && line[i] >= '0' && line[i] <= '9';
		if (!digits || (line[4] != '-' && line[4] != ' ')) {
			bird_seterr(c, err, errlen, "not BIRD's protocol: \"%.60s\"", line);
			return STEER_EMALF;
		}
		code = (line[0] - '0') * 1000 + (line[1] - '0') * 100 + (line[2] - '0') * 10 +
		       (line[3] - '0');
		if (cb)
			cb(code, line + 5, ctx);
		if (line[4] == ' ') {
			snprintf(last, lastlen, "%s", line + 5);
			return code;
		}
	}
}

static int bird_send(bird_conn_t *c, const char *command, char *err, size_t errlen)
{
	char line[BIRD_LINE_MAX];
	int n = snprintf(line, sizeof(line), "%s\n", command);
	if (n < 0 || (size_t)n >= sizeof(line) || strchr(command, '\n')) {
		bird_seterr(c, err, errlen, "command too long or not one line");
		return STEER_EINVAL;
	}
	size_t off = 0;
	while (off < (size_t)n) {
		ssize_t w = send(c->fd, line + off, (size_t)n - off, MSG_NOSIGNAL);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			int ret = -errno;
			bird_seterr(c, err, errlen, "send: %s", strerror(errno));
			return ret;
		}
		int ret = bird_wait(c, POLLOUT);
		if (ret < 0) {
			bird_seterr(c, err, errlen, "BIRD does not read its socket");
			return ret;
		}
	}
	return 0;
}

/* BIRD's reply codes: 0xxx-2xxx success, 8xxx runtime errors, 9xxx parse errors. */
static int bird_code_err(int code)
{
	if (code < 3000)
		return 0;
	if (code == 8003)
		return STEER_ENOENT;
	if (code >= 8000 && code < 9000)
		return -EIO;
	if (code >= 9000)
		return STEER_EINVAL;
	return STEER_EMALF;
}

static int bird_run(const char *socket_path, const char *command, unsigned timeout_ms,
                    bird_line_cb cb, void *ctx, char *err, size_t errlen)
{
	bird_conn_t c = {.fd = -1, .path = socket_path};
	char last[BIRD_LINE_MAX];
	c.deadline = bird_now_ms() + (timeout_ms ? timeout_ms : BIRD_TIMEOUT_MS);
	int ret = bird_connect(&c, err, errlen);
	if (ret < 0)
		goto out;
	ret = bird_read_reply(&c, NULL, NULL, last, sizeof(last), err, errlen);
	if (ret < 0)
		goto out;
	if (ret != 1) {
		bird_seterr(&c, err, errlen, "refused the connection: %04d %s", ret, last);
		ret = bird_code_err(ret) ? bird_code_err(ret) : STEER_EMALF;
		goto out;
	}
	c.command = command;
	ret = bird_send(&c, command, err, errlen);
	if (ret < 0)
		goto out;
	ret = bird_read_reply(&c, cb, ctx, last, sizeof(last), err, errlen);
	if (ret < 0)
		goto out;
	int code = ret;
	ret = bird_code_err(code);
	if (ret < 0)
		bird_seterr(&c, err, errlen, "%s (%04d)", last, code);
out:
	if (c.fd >= 0)
		close(c.fd);
	return ret;
}

typedef struct {
	char *buf;
	size_t size, len;
} bird_text_t;

static void bird_collect_cb(int code, const char *text, void *ctx)
{
	(void)code;
	bird_text_t *t = ctx;
	if (!t->buf || !t->size || !*text)
		return;
	int n = snprintf(t->buf + t->len, t->size - t->len, "%s%s", t->len ? "\n" : "", text);
	if (n > 0)
		t->len = t->len + (size_t)n < t->size ? t->len + (size_t)n : t->size - 1;
}

int bird_command(const char *socket_path, const char *command, unsigned timeout_ms, char *reply,
                 size_t replylen, char *err, size_t errlen)
{
	bird_text_t t = {.buf = reply, .size = replylen};
	if (reply && replylen)
		reply[0] = '\0';
	return bird_run(socket_path, command, timeout_ms, bird_collect_cb, &t, err, errlen);
}

static bool bird_name_ok(const char *name)
{
	if (!*name || strlen(name) > 64)
		return false;
	for (const char *p = name; *p; p++) {
		char ch = *p;
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.'))
			return false;
	}
	return true;
}

/* "0009 disabled" and "0011 enabled" changed something; 0008/0010 "already" did not. */
static void bird_changed_cb(int code, const char *text, void *ctx)
{
	(void)text;
	if (code == 9 || code == 11)
		*(bool *)ctx = true;
}

int bird_protocol_set(const char *socket_path, const char *protocol, bool enable,
                      unsigned timeout_ms, bool *changed, char *err, size_t errlen)
{
	bool did = false;
	char cmd[96];
	if (!bird_name_ok(protocol)) {
		snprintf(err, errlen, "bad BIRD protocol name \"%.64s\"", protocol);
		return STEER_EINVAL;
	}
	/* Quoted, the name is a pattern: an unknown one gets "No protocols match" (8003). */
	snprintf(cmd, sizeof(cmd), "%s \"%s\"", enable ? "enable" : "disable", protocol);
	int ret = bird_run(socket_path, cmd, timeout_ms, bird_changed_cb, &did, err, errlen);
	if (changed)
		*changed = ret == 0 && did;
	return ret;
}

typedef struct {
	const char *name;
	char *state;
	size_t statelen;
	bool found;
} bird_state_t;

/* `show protocols` rows (1002): name, protocol, table, state, since, info. */
static void bird_state_cb(int code, const char *text, void *ctx)
{
	bird_state_t *st = ctx;
	char name[72], proto[32], table[64], state[32];
	if (code != 1002 || st->found)
		return;
	if (sscanf(text, "%71s %31s %63s %31s", name, proto, table, state) != 4 ||
	    strcmp(name, st->name))
		return;
	snprintf(st->state, st->statelen, "%s", state);
	st->found = true;
}

int bird_protocol_state(const char *socket_path, const char *protocol, unsigned timeout_ms,
                        char *state, size_t statelen, char *err, size_t errlen)
{
	char cmd[96];
	if (!bird_name_ok(protocol)) {
		snprintf(err, errlen, "bad BIRD protocol name \"%.64s\"", protocol);
		return STEER_EINVAL;
	}
	snprintf(cmd, sizeof(cmd), "show protocols \"%s\"", protocol);
	bird_state_t st = {.name = protocol, .state = state, .statelen = statelen};
	int ret = bird_run(socket_path, cmd, timeout_ms, bird_state_cb, &st, err, errlen);
	if (ret == 0 && !st.found) {
		snprintf(err, errlen, "BIRD at %s: %s: no row for protocol %s", socket_path, cmd,
		         protocol);
		ret = STEER_EMALF;
	}
	return ret;
}
