/*
 * Control socket: the server runs on the control thread's libev loop and never blocks it (all
 * sockets non-blocking, every client bounded in size and time); the client is a plain blocking
 * call with a deadline for steerctl and tests. One request line in, one reply line out, close.
 */
#include "ctl/ctl.h"

#include <errno.h>
#include <ev.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"

/* Requests are a command and a few arguments; anything near this size is garbage or abuse. */
#define CTL_MAX_REQUEST (64 * 1024)
/* Seconds a client gets to send its request, and again to read the reply. steerctl sends at
 * once; a client that connects and stays silent must not hold a slot for long. */
#define CTL_CLIENT_TIMEOUT 5.0
/* Clients served at once; more wait in the listen backlog instead of being dropped. */
#define CTL_MAX_CLIENTS 64
#define CTL_BACKLOG     64
/* Accept retry delay after running out of file descriptors (level-triggered io would spin). */
#define CTL_ACCEPT_RETRY 0.5
/* Client side: replies list zones and counters; this bounds memory against a bogus peer. */
#define CTL_MAX_REPLY (64 * 1024 * 1024)
#define CTL_MODE      0660

typedef struct ctl_client ctl_client_t;

struct ctl_client {
	ev_io io;
	ev_timer timer;
	ctl_server_t *server;
	ctl_client_t *prev, *next;
	char *buf; /* the request while reading, then the reply while writing */
	size_t len, cap, sent;
};

struct ctl_server {
	struct ev_loop *loop;
	ev_io accept_io;
	ev_timer retry; /* restarts accept_io after EMFILE */
	int fd;
	char *path;
	dev_t dev; /* identity of our socket file, so stop never unlinks a successor's */
	ino_t ino;
	ctl_handler_cb handler;
	void *ctx;
	ctl_client_t *clients;
	size_t n_clients;
};

/* ---- server: clients ---------------------------------------------------------------------- */

static void client_close(ctl_client_t *c)
{
	ctl_server_t *s = c->server;
	ev_io_stop(s->loop, &c->io);
	ev_timer_stop(s->loop, &c->timer);
	close(c->io.fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c->buf);
	free(c);
	/* A slot is free again: resume accepting if the limit had stopped us. */
	if (s->n_clients-- == CTL_MAX_CLIENTS && !ev_is_active(&s->retry))
		ev_io_start(s->loop, &s->accept_io);
}

static void client_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	ctl_client_t *c = w->data;
	log_debug("control: client timed out");
	client_close(c);
}

/* Returns true when the client is finished (closed). */
static bool client_flush(ctl_client_t *c)
{
	while (c->sent < c->len) {
		ssize_t n = send(c->io.fd, c->buf + c->sent, c->len - c->sent, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return false;
		if (n < 0) {
			log_debug("control: send failed: %s", strerror(errno));
			break;
		}
		c->sent += (size_t)n;
	}
	client_close(c);
	return true;
}

static void client_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	client_flush(w->data);
}

static void client_reply(ctl_client_t *c, json_t *reply)
{
	ctl_server_t *s = c->server;
	char *text = json_dumps(reply, JSON_COMPACT);
	json_decref(reply);
	if (!text) {
		log_err("control: cannot encode a reply");
		client_close(c);
		return;
	}
	size_t len = strlen(text);
	free(c->buf);
	c->buf = xmalloc(len + 1);
	memcpy(c->buf, text, len);
	c->buf[len] = '\n';
	free(text);
	c->len = len + 1;
	c->cap = len + 1;
	c->sent = 0;

	ev_io_stop(s->loop, &c->io);
	ev_io_init(&c->io, client_write_cb, c->io.fd, EV_WRITE);
	c->io.data = c;
	ev_timer_stop(s->loop, &c->timer);
	ev_timer_set(&c->timer, CTL_CLIENT_TIMEOUT, 0.);
	ev_timer_start(s->loop, &c->timer);
	if (!client_flush(c))
		ev_io_start(s->loop, &c->io);
}

/* Error texts quote file names, which need not be UTF-8; JSON strings must be. */
static json_t *error_reply(const char *msg)
{
	json_t *text = json_string(msg);
	if (!text) {
		char *copy = xstrdup(msg);
		for (char *p = copy; *p; p++) {
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		}
		text = json_string(copy);
		free(copy);
	}
	return json_pack("{s:b, s:o}", "ok", 0, "error", text);
}

json_t *ctl_request_reply(const char *text, size_t len, ctl_handler_cb handler, void *ctx)
{
	json_error_t jerr;
	char err[1024] = "";
	json_t *req = json_loadb(text, len, 0, &jerr);
	if (!req) {
		snprintf(err, sizeof(err), "invalid JSON request: %s", jerr.text);
		return error_reply(err);
	}
	json_t *cmd = json_object_get(req, "cmd");
	json_t *args = json_object_get(req, "args");
	json_t *reply = NULL;
	if (!json_is_object(req) || !json_is_string(cmd)) {
		reply = error_reply("the request must be an object with a string \"cmd\"");
		goto out;
	}
	if (args && !json_is_array(args) && !json_is_null(args)) {
		reply = error_reply("\"args\" must be an array");
		goto out;
	}
	args = json_is_array(args) ? json_incref(args) : json_array();

	json_t *data = NULL;
	int ret = handler(json_string_value(cmd), args, &data, err, sizeof(err), ctx);
	json_decref(args);
	if (ret == 0) {
		reply = json_pack("{s:b, s:o}", "ok", 1, "data", data ? data : json_null());
	} else {
		json_decref(data);
		reply = error_reply(err[0] ? err : steer_strerror(ret));
	}
out:
	json_decref(req);
	return reply;
}

/* Returns true once a whole request (a line, or everything before EOF) is buffered. */
static bool request_complete(ctl_client_t *c, size_t scanned, bool eof)
{
	char *nl = memchr(c->buf + scanned, '\n', c->len - scanned);
	if (nl) {
		c->len = (size_t)(nl - c->buf);
		return true;
	}
	return eof && c->len > 0;
}

static void client_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	ctl_client_t *c = w->data;
	for (;;) {
		if (c->len == c->cap) {
			if (c->cap >= CTL_MAX_REQUEST) {
				client_reply(c,
				             error_reply("request too large (limit 65536 bytes)"));
				return;
			}
			c->cap = c->cap ? c->cap * 2 : 1024;
			c->buf = xrealloc(c->buf, c->cap);
		}
		ssize_t n = recv(c->io.fd, c->buf + c->len, c->cap - c->len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0 || (n == 0 && c->len == 0)) {
			client_close(c);
			return;
		}
		size_t scanned = c->len;
		c->len += (size_t)n;
		if (request_complete(c, scanned, n == 0)) {
			client_reply(c, ctl_request_reply(c->buf, c->len, c->server->handler,
			                                  c->server->ctx));
			return;
		}
	}
}

static void client_new(ctl_server_t *s, int fd)
{
	ctl_client_t *c = xcalloc(1, sizeof(*c));
	c->server = s;
	ev_io_init(&c->io, client_read_cb, fd, EV_READ);
	c->io.data = c;
	ev_timer_init(&c->timer, client_timeout_cb, CTL_CLIENT_TIMEOUT, 0.);
	c->timer.data = c;
	c->next = s->clients;
	if (s->clients)
		s->clients->prev = c;
	s->clients = c;
	s->n_clients++;
	ev_io_start(s->loop, &c->io);
	ev_timer_start(s->loop, &c->timer);
}

static void accept_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	ctl_server_t *s = w->data;
	if (s->n_clients < CTL_MAX_CLIENTS)
		ev_io_start(loop, &s->accept_io);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	static log_ratelimit_t rl;
	(void)revents;
	ctl_server_t *s = w->data;
	while (s->n_clients < CTL_MAX_CLIENTS) {
		int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			client_new(s, fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			log_ratelimited(&rl, LOG_LEVEL_WARNING, "control: accept failed: %s",
			                strerror(errno));
			ev_io_stop(loop, &s->accept_io);
			ev_timer_set(&s->retry, CTL_ACCEPT_RETRY, 0.);
			ev_timer_start(loop, &s->retry);
		}
		return;
	}
	ev_io_stop(loop, &s->accept_io);
}

/* ---- server: socket setup ----------------------------------------------------------------- */

static int fill_addr(const char *path, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun->sun_path))
		return STEER_EINVAL;
	strcpy(sun->sun_path, path);
	return 0;
}

/*
 * Make room for our socket at @p path: nothing there is fine, a socket nobody answers on is a
 * leftover of a crash and is removed, anything else (a live daemon, a regular file) is refused.
 */
static int clear_stale(const char *path, const struct sockaddr_un *sun)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		log_err("control socket %s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISSOCK(st.st_mode)) {
		log_err("control socket %s: exists and is not a socket; refusing to replace it",
		        path);
		return STEER_EEXIST;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int ret = connect(fd, (const struct sockaddr *)sun, sizeof(*sun));
	int saved = errno;
	close(fd);
	/* EAGAIN: a full backlog, which means somebody is listening. */
	if (ret == 0 || saved == EAGAIN) {
		log_err(
		    "control socket %s: another daemon is serving it; is steerd already running?",
		    path);
		return STEER_EEXIST;
	}
	if (saved != ECONNREFUSED) {
		log_err("control socket %s: %s", path, strerror(saved));
		return -saved;
	}
	if (unlink(path) != 0 && errno != ENOENT) {
		log_err("control socket %s: cannot remove the stale socket: %s", path,
		        strerror(errno));
		return -errno;
	}
	log_info("control socket %s: removed a stale socket", path);
	return 0;
}

static int bind_listen(ctl_server_t *s, const struct sockaddr_un *sun)
{
	struct stat st;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* On Linux bind() creates the file with the socket inode's mode minus the umask, so the
	 * path is never reachable with looser permissions; chmod afterwards restores group bits
	 * a strict umask removed. */
	if (fchmod(fd, CTL_MODE) != 0 ||
	    bind(fd, (const struct sockaddr *)sun, sizeof(*sun)) != 0) {
		int ret = -errno;
		close(fd);
		return ret;
	}
	if (chmod(s->path, CTL_MODE) != 0 || listen(fd, CTL_BACKLOG) != 0 ||
	    stat(s->path, &st) != 0) {
		int ret = -errno;
		close(fd);
		unlink(s->path);
		return ret;
	}
	s->fd = fd;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	return 0;
}

int ctl_server_start(ctl_server_t **out, struct ev_loop *loop, const char *path,
                     ctl_handler_cb handler, void *ctx)
{
	struct sockaddr_un sun;
	*out = NULL;
	if (fill_addr(path, &sun) != 0) {
		log_err("control socket %s: path longer than %zu bytes", path,
		        sizeof(sun.sun_path) - 1);
		return STEER_EINVAL;
	}
	int ret = clear_stale(path, &sun);
	if (ret != 0)
		return ret;

	ctl_server_t *s = xcalloc(1, sizeof(*s));
	s->loop = loop;
	s->path = xstrdup(path);
	s->handler = handler;
	s->ctx = ctx;
	ret = bind_listen(s, &sun);
	if (ret != 0) {
		log_err("control socket %s: %s", path, steer_strerror(ret));
		free(s->path);
		free(s);
		return ret;
	}
	ev_io_init(&s->accept_io, accept_cb, s->fd, EV_READ);
	s->accept_io.data = s;
	ev_timer_init(&s->retry, accept_retry_cb, CTL_ACCEPT_RETRY, 0.);
	s->retry.data = s;
	ev_io_start(loop, &s->accept_io);
	*out = s;
	return 0;
}

void ctl_server_stop(ctl_server_t *s)
{
	struct stat st;
	if (!s)
		return;
	while (s->clients)
		client_close(s->clients);
	ev_io_stop(s->loop, &s->accept_io);
	ev_timer_stop(s->loop, &s->retry);
	close(s->fd);
	/* Only remove the file if it is still ours: a new daemon may have replaced it. */
	if (stat(s->path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino)
		unlink(s->path);
	free(s->path);
	free(s);
}

/* ---- client ------------------------------------------------------------------------------- */

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for @p events until @p deadline; returns 0, or -ETIMEDOUT / -errno. */
static int wait_fd(int fd, short events, long long deadline)
{
	for (;;) {
		long long left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = fd, .events = events};
		int n = poll(&pfd, 1, left > 60000 ? 60000 : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int client_connect(const char *path, long long deadline, int *out, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	if (fill_addr(path, &sun) != 0) {
		snprintf(err, errlen, "cannot connect to %s: path too long", path);
		return STEER_EINVAL;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -errno;
	}
	/* A non-blocking UNIX connect fails with EAGAIN while the backlog is full; retry. */
	while (connect(fd, (const struct sockaddr *)&sun, sizeof(sun)) != 0) {
		int saved = errno;
		if (saved == EINTR)
			continue;
		if (saved == EAGAIN && now_ms() < deadline) {
			usleep(10000);
			continue;
		}
		snprintf(err, errlen, "cannot connect to %s: %s", path,
		         saved == EAGAIN ? "server busy" : strerror(saved));
		close(fd);
		return saved == EAGAIN ? -ETIMEDOUT : -saved;
	}
	*out = fd;
	return 0;
}

static int client_send(int fd, const char *buf, size_t len, long long deadline)
{
	size_t sent = 0;
	while (sent < len) {
		ssize_t n = send(fd, buf + sent, len - sent, MSG_NOSIGNAL);
		if (n > 0) {
			sent += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int ret = wait_fd(fd, POLLOUT, deadline);
		if (ret != 0)
			return ret;
	}
	return 0;
}

/* Read one line (or up to EOF) into a malloc'ed buffer. */
static int client_recv(int fd, long long deadline, char **out, size_t *outlen)
{
	size_t len = 0, cap = 4096;
	char *buf = xmalloc(cap);
	int ret = 0;
	for (;;) {
		if (len == cap) {
			if (cap >= CTL_MAX_REPLY) {
				ret = STEER_ESPACE;
				break;
			}
			buf = xrealloc(buf, cap *= 2);
		}
		ssize_t n = recv(fd, buf + len, cap - len, 0);
		if (n > 0) {
			char *nl = memchr(buf + len, '\n', (size_t)n);
			len += (size_t)n;
			if (nl) {
				len = (size_t)(nl - buf);
				break;
			}
			continue;
		}
		if (n == 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			ret = -errno;
			break;
		}
		ret = wait_fd(fd, POLLIN, deadline);
		if (ret != 0)
			break;
	}
	if (ret != 0) {
		free(buf);
		return ret;
	}
	*out = buf;
	*outlen = len;
	return 0;
}

static int parse_reply(const char *path, const char *text, size_t len, json_t **reply, char *err,
                       size_t errlen)
{
	json_error_t jerr;
	if (len == 0) {
		snprintf(err, errlen, "%s closed the connection without a reply", path);
		return STEER_ETRUNC;
	}
	json_t *obj = json_loadb(text, len, 0, &jerr);
	if (!obj) {
		snprintf(err, errlen, "invalid reply from %s: %s", path, jerr.text);
		return STEER_EMALF;
	}
	if (!json_is_object(obj) || !json_is_boolean(json_object_get(obj, "ok"))) {
		snprintf(err, errlen, "invalid reply from %s: no \"ok\" member", path);
		json_decref(obj);
		return STEER_EMALF;
	}
	*reply = obj;
	return 0;
}

static char *encode_request(const char *cmd, json_t *args)
{
	json_t *req = args ? json_pack("{s:s, s:O}", "cmd", cmd, "args", args)
	                   : json_pack("{s:s, s:[]}", "cmd", cmd, "args");
	char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	return text;
}

int ctl_client_call(const char *path, const char *cmd, json_t *args, int timeout_ms, json_t **reply,
                    char *err, size_t errlen)
{
	long long deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 1);
	char *buf = NULL, *req = NULL;
	size_t len = 0;
	int fd = -1;

	*reply = NULL;
	int ret = client_connect(path, deadline, &fd, err, errlen);
	if (ret != 0)
		return ret;
	req = encode_request(cmd, args);
	if (!req) {
		snprintf(err, errlen, "cannot encode the request (invalid UTF-8 in arguments?)");
		ret = STEER_EINVAL;
		goto out;
	}
	size_t reqlen = strlen(req);
	ret = client_send(fd, req, reqlen, deadline);
	if (ret == 0)
		ret = client_send(fd, "\n", 1, deadline);
	if (ret == 0)
		ret = client_recv(fd, deadline, &buf, &len);
	if (ret == -ETIMEDOUT)
		snprintf(err, errlen, "no reply from %s within %d ms", path, timeout_ms);
	else if (ret == STEER_ESPACE)
		snprintf(err, errlen, "reply from %s is larger than %d bytes", path, CTL_MAX_REPLY);
	else if (ret != 0)
		snprintf(err, errlen, "talking to %s: %s", path, steer_strerror(ret));
	else
		ret = parse_reply(path, buf, len, reply, err, errlen);
out:
	free(buf);
	free(req);
	close(fd);
	return ret;
}

const char *ctl_default_socket(char *buf, size_t size)
{
	static const char system_path[] = "/run/steer/steerd.sock";
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n = -1;
	if (geteuid() != 0 && xdg != NULL && xdg[0] == '/')
		n = snprintf(buf, size, "%s/steerd.sock", xdg);
	if (n < 0 || (size_t)n >= size || (size_t)n >= CTL_SOCKET_PATH_MAX)
		snprintf(buf, size, "%s", system_path);
	return buf;
}
