/*
 * Shared between alerts.c (queues, retries, counters, exec hooks) and alerts_webhook.c (the
 * POSTs, on health/curl_loop.h). Control thread only.
 */
#pragma once

#include <curl/curl.h>
#include <sys/types.h>

#include "health/curl_loop.h"
#include "ops/alerts.h"

/* One queued event, as both kinds of destination need it. */
typedef struct {
	char *json; /* the webhook body; owned */
	char **env; /* STEER_EVENT_*=... entries, NULL-terminated; owned */
	uint64_t seq;
	char subject[96]; /* for log lines */
} alert_item_t;

typedef struct alert_dest alert_dest_t;

/* The webhooks' transfers: one libcurl multi handle on the loop (alerts_webhook.c). */
typedef struct {
	curl_loop_t *cl;
	CURLM *multi; /* cl's */
} alert_http_t;

struct alert_dest {
	alerts_t *owner;
	bool is_exec;
	char *target; /* URL or command line; owned */
	char **argv;  /* exec: the command split at blanks; owned */
	unsigned timeout_ms, retries;
	alert_item_t *queue[ALERTS_QUEUE_MAX]; /* queue[(head + i) % MAX], owned */
	size_t head, count;
	unsigned attempts; /* made for the head item */
	bool busy;         /* an attempt is in flight */
	ev_timer backoff_w;
	/* webhook attempt */
	CURL *easy;
	struct curl_slist *headers;
	char errbuf[CURL_ERROR_SIZE];
	/* exec attempt */
	pid_t pid;
	bool timed_out;
	ev_child child_w;
	ev_timer kill_w;
	/* counters */
	uint64_t sent, failures, given_up, dropped;
};

struct alerts {
	struct ev_loop *loop;
	char *node;
	alert_dest_t *dests;
	size_t n_dests;
	alert_http_t *http; /* NULL without webhooks */
};

/** An attempt of @p d ended: @p ok, else @p detail says why (logged). */
void alert_attempt_done(alert_dest_t *d, bool ok, const char *detail) STEER_NONNULL(1, 3);

/** The multi handle on @p loop. Returns 0 or -EIO with @p err. */
int alert_http_new(struct ev_loop *loop, alert_http_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/** Free @p http after every transfer was removed. NULL is fine. */
void alert_http_free(alert_http_t *http);

/** POST the head item of @p d; the result comes through alert_attempt_done(). */
void alert_webhook_start(alert_dest_t *d) STEER_NONNULL(1);

/** Abort @p d's transfer, if any, without a result. */
void alert_webhook_cancel(alert_dest_t *d) STEER_NONNULL(1);
