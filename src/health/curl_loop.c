/*
 * libcurl's multi interface on a libev loop (see curl_loop.h): the sockets libcurl asks us to
 * watch, in a list so they can all be stopped at the end, and its one timeout.
 */
#include "health/curl_loop.h"

#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/err.h"

typedef struct curl_sock curl_sock_t;

struct curl_loop {
	struct ev_loop *loop;
	CURLM *multi;
	ev_timer timer;     /* libcurl's single timeout (CURLMOPT_TIMERFUNCTION) */
	curl_sock_t *socks; /* every socket libcurl asked us to watch, owned */
	curl_loop_done_cb done;
	void *ctx;
};

/* One socket libcurl watches, attached to it with curl_multi_assign(). */
struct curl_sock {
	ev_io io;
	curl_loop_t *cl;
	curl_socket_t fd;
	curl_sock_t *prev, *next;
};

static void sock_free(curl_loop_t *cl, curl_sock_t *s)
{
	ev_io_stop(cl->loop, &s->io);
	if (s->prev)
		s->prev->next = s->next;
	else
		cl->socks = s->next;
	if (s->next)
		s->next->prev = s->prev;
	free(s);
}

static void on_sock_event(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	curl_sock_t *s = w->data;
	curl_loop_t *cl = s->cl;
	int flags = 0;
	if (revents & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (revents & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	if (revents & EV_ERROR)
		flags |= CURL_CSELECT_ERR;
	int running;
	/* May free s (CURL_POLL_REMOVE). An error here leaves a transfer to its owner's timeout. */
	(void)curl_multi_socket_action(cl->multi, s->fd, flags, &running);
	cl->done(cl->ctx);
}

static curl_sock_t *sock_new(curl_loop_t *cl, curl_socket_t fd)
{
	curl_sock_t *s = xcalloc(1, sizeof(*s));
	s->cl = cl;
	s->fd = fd;
	s->io.data = s;
	ev_init(&s->io, on_sock_event);
	s->next = cl->socks;
	if (cl->socks)
		cl->socks->prev = s;
	cl->socks = s;
	curl_multi_assign(cl->multi, fd, s);
	return s;
}

static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	(void)easy;
	curl_loop_t *cl = userp;
	curl_sock_t *s = socketp;
	if (what == CURL_POLL_REMOVE) {
		if (s)
			sock_free(cl, s);
		return 0;
	}
	if (!s)
		s = sock_new(cl, fd);
	ev_io_stop(cl->loop, &s->io);
	int events =
	    ((what & CURL_POLL_IN) ? EV_READ : 0) | ((what & CURL_POLL_OUT) ? EV_WRITE : 0);
	if (events) {
		ev_io_set(&s->io, fd, events);
		ev_io_start(cl->loop, &s->io);
	}
	return 0;
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	curl_loop_t *cl = w->data;
	int running;
	(void)curl_multi_socket_action(cl->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	cl->done(cl->ctx);
}

/* libcurl must not be re-entered from here: only arm the timer. A 0 timeout fires on the
 * next loop iteration, which is what keeps the first socket action out of the caller. */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
	(void)multi;
	curl_loop_t *cl = userp;
	ev_timer_stop(cl->loop, &cl->timer);
	if (timeout_ms >= 0) {
		ev_timer_set(&cl->timer, (double)timeout_ms / 1000.0, 0.);
		ev_timer_start(cl->loop, &cl->timer);
	}
	return 0;
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int curl_loop_new(struct ev_loop *loop, curl_loop_done_cb done, void *ctx, curl_loop_t **out,
                  char *err, size_t errlen)
{
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK) {
		snprintf(err, errlen, "libcurl: %s", curl_easy_strerror(global_rc));
		return -EIO;
	}
	curl_loop_t *cl = xcalloc(1, sizeof(*cl));
	cl->loop = loop;
	cl->done = done;
	cl->ctx = ctx;
	cl->multi = curl_multi_init();
	if (!cl->multi) {
		snprintf(err, errlen, "libcurl: cannot create a multi handle");
		free(cl);
		return -EIO;
	}
	ev_timer_init(&cl->timer, on_timer, 0., 0.);
	cl->timer.data = cl;
	CURLMcode mc = curl_multi_setopt(cl->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
	if (mc == CURLM_OK)
		mc = curl_multi_setopt(cl->multi, CURLMOPT_SOCKETDATA, cl);
	if (mc == CURLM_OK)
		mc = curl_multi_setopt(cl->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	if (mc == CURLM_OK)
		mc = curl_multi_setopt(cl->multi, CURLMOPT_TIMERDATA, cl);
	if (mc != CURLM_OK) {
		snprintf(err, errlen, "libcurl: %s", curl_multi_strerror(mc));
		curl_loop_free(cl);
		return -EIO;
	}
	*out = cl;
	return 0;
}

CURLM *curl_loop_multi(const curl_loop_t *cl)
{
	return cl->multi;
}

void curl_loop_free(curl_loop_t *cl)
{
	if (!cl)
		return;
	/* May still report sockets through on_curl_socket, so cl stays valid until after. */
	curl_multi_cleanup(cl->multi);
	ev_timer_stop(cl->loop, &cl->timer);
	while (cl->socks)
		sock_free(cl, cl->socks);
	free(cl);
}
