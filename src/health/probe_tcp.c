/*
 * TCP connect probe: a non-blocking connect(2), finished when the socket becomes writable.
 * Nothing is sent: the connection is closed as soon as the handshake completes.
 */
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "health/probe_int.h"

typedef struct {
	health_probe_t base;
	health_probe_ctx_t *ctx;
	health_probe_cb cb;
	void *arg;
	uint32_t timeout_ms;
	struct timespec start;
	int fd;
	ev_io io;
	ev_timer timer;
	health_probe_result_t res; /* filled early when connect() fails at once */
} tcp_probe_t;

static void tcp_probe_free(tcp_probe_t *p)
{
	ev_io_stop(p->ctx->loop, &p->io);
	ev_timer_stop(p->ctx->loop, &p->timer);
	if (p->fd >= 0)
		close(p->fd);
	free(p);
}

static void tcp_probe_cancel(health_probe_t *self)
{
	tcp_probe_free((tcp_probe_t *)self);
}

static void tcp_probe_finish(tcp_probe_t *p)
{
	health_probe_report(&p->base, &p->res, p->cb, p->arg);
}

static void tcp_on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	tcp_probe_t *p = w->data;
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
		soerr = errno;
	if (soerr == 0)
		health_probe_result_set(&p->res, true, p->start, "connected");
	else
		health_probe_result_set(&p->res, false, p->start, "connect: %s", strerror(soerr));
	tcp_probe_finish(p);
}

static void tcp_on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	tcp_probe_t *p = w->data;
	if (p->res.detail[0] == '\0')
		health_probe_result_set(&p->res, false, p->start, "connect: timeout after %u ms",
		                        p->timeout_ms);
	tcp_probe_finish(p);
}

int health_probe_tcp_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                           health_probe_t **out, char *err, size_t errlen)
{
	int fd = socket(req->dst.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -errno;
	}
	int bound = health_probe_bind_source(fd, req, err, errlen);
	if (bound != 0) {
		close(fd);
		return bound;
	}
	tcp_probe_t *p = xcalloc(1, sizeof(*p));
	*p = (tcp_probe_t){.base.cancel = tcp_probe_cancel,
	                   .ctx = ctx,
	                   .cb = req->cb,
	                   .arg = req->arg,
	                   .timeout_ms = req->timeout_ms,
	                   .start = health_probe_now(),
	                   .fd = fd};
	ev_io_init(&p->io, tcp_on_writable, fd, EV_WRITE);
	p->io.data = p;
	ev_timer_init(&p->timer, tcp_on_timer, req->timeout_ms / 1000.0, 0.);
	p->timer.data = p;

	if (connect(fd, &req->dst.sa, steer_sockaddr_len(&req->dst)) == 0) {
		health_probe_result_set(&p->res, true, p->start, "connected");
		ev_timer_set(&p->timer, 0., 0.); /* report from the loop, never from here */
	} else if (errno == EINPROGRESS) {
		ev_io_start(ctx->loop, &p->io);
	} else {
		health_probe_result_set(&p->res, false, p->start, "connect: %s", strerror(errno));
		ev_timer_set(&p->timer, 0., 0.);
	}
	ev_timer_start(ctx->loop, &p->timer);
	*out = &p->base;
	return 0;
}
