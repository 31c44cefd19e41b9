/*
 * Webhook delivery: libcurl's multi interface on the control loop (CURLMOPT_SOCKETFUNCTION
 * -> ev_io, CURLMOPT_TIMERFUNCTION -> ev_timer), so a slow receiver never blocks the loop.
 * Results leave only from transfers_done(), after curl_multi_socket_action() has returned,
 * so alert_attempt_done() may start the next transfer at once. Control thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "ops/alerts_int.h"

/* One socket libcurl watches, attached to it with curl_multi_assign(). */
struct alert_sock {
	alert_http_t *http;
	curl_socket_t fd;
	ev_io io;
	alert_sock_t *prev, *next;
};

static void sock_free(alert_http_t *http, alert_sock_t *s)
{
	ev_io_stop(http->loop, &s->io);
	if (s->prev)
		s->prev->next = s->next;
	else
		http->socks = s->next;
	if (s->next)
		s->next->prev = s->prev;
	free(s);
}

/* Take what is needed from a finished transfer before removing it (msg dies with it). */
static void transfers_done(alert_http_t *http)
{
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(http->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		alert_dest_t *d = NULL;
		(void)curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&d);
		CURLcode rc = msg->data.result;
		long status = 0;
		(void)curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
		char detail[CURL_ERROR_SIZE + 64];
		if (rc != CURLE_OK)
			snprintf(detail, sizeof(detail), "%s",
			         d->errbuf[0] ? d->errbuf : curl_easy_strerror(rc));
		else
			snprintf(detail, sizeof(detail), "HTTP %ld", status);
		alert_webhook_cancel(d);
		alert_attempt_done(d, rc == CURLE_OK && status >= 200 && status < 300, detail);
	}
}

static void on_sock_event(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	alert_sock_t *s = w->data;
	alert_http_t *http = s->http;
	int flags = 0;
	if (revents & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (revents & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	if (revents & EV_ERROR)
		flags |= CURL_CSELECT_ERR;
	int running;
	/* may free s (CURL_POLL_REMOVE) */
	(void)curl_multi_socket_action(http->multi, s->fd, flags, &running);
	transfers_done(http);
}

static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	(void)easy;
	alert_http_t *http = userp;
	alert_sock_t *s = socketp;
	if (what == CURL_POLL_REMOVE) {
		if (s)
			sock_free(http, s);
		return 0;
	}
	if (!s) {
		s = xcalloc(1, sizeof(*s));
		s->http = http;
		s->fd = fd;
		s->io.data = s;
		ev_init(&s->io, on_sock_event);
		s->next = http->socks;
		if (http->socks)
			http->socks->prev = s;
		http->socks = s;
		curl_multi_assign(http->multi, fd, s);
	}
	ev_io_stop(http->loop, &s->io);
	int events = (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);
	ev_io_set(&s->io, fd, events);
	ev_io_start(http->loop, &s->io);
	return 0;
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	alert_http_t *http = w->data;
	int running;
	(void)curl_multi_socket_action(http->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	transfers_done(http);
}

/* libcurl must not be re-entered from here: only arm the timer (0 = next iteration). */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
	(void)multi;
	alert_http_t *http = userp;
	ev_timer_stop(http->loop, &http->timer);
	if (timeout_ms >= 0) {
		ev_timer_set(&http->timer, (double)timeout_ms / 1000.0, 0.);
		ev_timer_start(http->loop, &http->timer);
	}
	return 0;
}

int alert_http_new(struct ev_loop *loop, alert_http_t **out, char *err, size_t errlen)
{
	/* The daemon's probes call curl_global_init() too; it counts, and is never undone:
	 * curl_global_cleanup() is not thread-safe and the process ends soon enough. */
	CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "libcurl: %s", curl_easy_strerror(rc));
		return -EIO;
	}
	alert_http_t *http = xcalloc(1, sizeof(*http));
	http->loop = loop;
	http->multi = curl_multi_init();
	if (!http->multi) {
		snprintf(err, errlen, "libcurl: cannot create a multi handle");
		free(http);
		return -EIO;
	}
	ev_timer_init(&http->timer, on_timer, 0., 0.);
	http->timer.data = http;
	CURLMcode mc = curl_multi_setopt(http->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
	if (mc == CURLM_OK)
		mc = curl_multi_setopt(http->multi, CURLMOPT_SOCKETDATA, http);
	if (mc == CURLM_OK)
		mc = curl_multi_setopt(http->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	if (mc == CURLM_OK)
		mc = curl_multi_setopt(http->multi, CURLMOPT_TIMERDATA, http);
	if (mc != CURLM_OK) {
		snprintf(err, errlen, "libcurl: %s", curl_multi_strerror(mc));
		alert_http_free(http);
		return -EIO;
	}
	*out = http;
	return 0;
}

void alert_http_free(alert_http_t *http)
{
	if (!http)
		return;
	/* may still report sockets through on_curl_socket: http stays valid until after */
	curl_multi_cleanup(http->multi);
	ev_timer_stop(http->loop, &http->timer);
	while (http->socks)
		sock_free(http, http->socks);
	free(http);
}

void alert_webhook_cancel(alert_dest_t *d)
{
	if (!d->easy)
		return;
	curl_multi_remove_handle(d->owner->http->multi, d->easy);
	curl_easy_cleanup(d->easy);
	curl_slist_free_all(d->headers);
	d->easy = NULL;
	d->headers = NULL;
}

/* The receiver's answer body is not ours to keep. */
static size_t discard_body(char *data, size_t size, size_t n, void *arg)
{
	(void)data;
	(void)arg;
	return size * n;
}

#define SET(opt, val) (rc = rc == CURLE_OK ? curl_easy_setopt(d->easy, opt, val) : rc)

void alert_webhook_start(alert_dest_t *d)
{
	const alert_item_t *item = d->queue[d->head];
	d->errbuf[0] = '\0';
	d->easy = curl_easy_init();
	d->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (!d->easy || !d->headers) {
		alert_webhook_cancel(d);
		alert_attempt_done(d, false, "libcurl: cannot create a transfer");
		return;
	}
	CURLcode rc = CURLE_OK;
	SET(CURLOPT_URL, d->target);
	SET(CURLOPT_PRIVATE, (void *)d);
	SET(CURLOPT_ERRORBUFFER, d->errbuf);
	SET(CURLOPT_HTTPHEADER, d->headers);
	SET(CURLOPT_POSTFIELDS, item->json);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_TIMEOUT_MS, (long)d->timeout_ms);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_USERAGENT, "steer-alerts/1");
	SET(CURLOPT_WRITEFUNCTION, discard_body);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	CURLMcode mc = CURLM_OK;
	if (rc == CURLE_OK)
		mc = curl_multi_add_handle(d->owner->http->multi, d->easy);
	if (rc != CURLE_OK || mc != CURLM_OK) {
		char detail[160];
		snprintf(detail, sizeof(detail), "libcurl: %s",
		         rc != CURLE_OK ? curl_easy_strerror(rc) : curl_multi_strerror(mc));
		alert_webhook_cancel(d);
		alert_attempt_done(d, false, detail);
	}
}
