/*
 * Webhook delivery: libcurl's multi interface on the control loop (health/curl_loop.h), so a
 * slow receiver never blocks the loop. Results leave only from transfers_done(), after
 * curl_multi_socket_action() has returned, so alert_attempt_done() may start the next
 * transfer at once. Control thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "ops/alerts_int.h"

/* Take what is needed from a finished transfer before removing it (msg dies with it). */
static void transfers_done(void *ctx)
{
	alert_http_t *http = ctx;
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

int alert_http_new(struct ev_loop *loop, alert_http_t **out, char *err, size_t errlen)
{
	alert_http_t *http = xcalloc(1, sizeof(*http));
	int ret = curl_loop_new(loop, transfers_done, http, &http->cl, err, errlen);
	if (ret != 0) {
		free(http);
		return ret;
	}
	http->multi = curl_loop_multi(http->cl);
	*out = http;
	return 0;
}

void alert_http_free(alert_http_t *http)
{
	if (!http)
		return;
	curl_loop_free(http->cl);
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
