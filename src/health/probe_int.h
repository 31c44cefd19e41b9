/*
 * Internals shared by the probe types: the context, the per-type start functions and small
 * helpers for timing and result text. Only src/health/probe*.c include this.
 */
#pragma once

#include <time.h>

#include "health/probe.h"

typedef struct health_http health_http_t;

struct health_probe_ctx {
	struct ev_loop *loop;
	health_http_t *http; /* libcurl multi state, owned (probe_http.c) */
};

/* Per-type start functions: the contract of health_probe_start(), the type already checked. */
int health_probe_tcp_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                           health_probe_t **out, char *err, size_t errlen);
int health_probe_http_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                            health_probe_t **out, char *err, size_t errlen);
int health_probe_dns_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                           health_probe_t **out, char *err, size_t errlen);
int health_probe_exec_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                            health_probe_t **out, char *err, size_t errlen);
int health_probe_metrics_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                               health_probe_t **out, char *err, size_t errlen);

/*
 * What a transfer's owner makes of a complete response (status @p status, the whole body):
 * fill @p res, timing it from @p start. Called from the loop, after libcurl returned.
 */
typedef void (*health_http_reply_cb)(const health_probe_spec_t *spec, long status, const char *body,
                                     size_t len, struct timespec start, health_probe_result_t *res);

/**
 * Start an HTTP(S) GET of @p req (https for the https type and for metrics with tls): the
 * transfer the http and metrics probes share (URL, Host, source address, TLS options, timeout,
 * the guard timer). With @p reply, the whole body up to @p body_max bytes is kept and handed
 * to @p reply (a longer body fails the probe); without, it is the http probe (status and
 * body substring check). The contract of health_probe_start().
 */
int health_http_transfer_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                               health_http_reply_cb reply, size_t body_max, health_probe_t **out,
                               char *err, size_t errlen);

/** Create the libcurl multi state for @p ctx. Returns 0 or -EIO with @p err. */
int health_http_init(health_probe_ctx_t *ctx, char *err, size_t errlen);

/** Free the libcurl multi state (no transfer may be running). NULL-safe. */
void health_http_fini(health_http_t *http);

/**
 * Bind @p fd to @p req->source when it is of @p req->dst's family (port 0: any). Returns 0
 * (also when there is nothing to bind) or a negative errno with "bind ADDR: reason" in @p err.
 */
int health_probe_bind_source(int fd, const health_probe_req_t *req, char *err, size_t errlen)
    STEER_NONNULL(2, 3);

/**
 * The address text of @p req->source ("10.0.0.1", "2001:db8::1") into @p buf, empty when it
 * is unset or of another family than @p req->dst. Returns @p buf.
 */
const char *health_probe_source_text(const health_probe_req_t *req, char *buf, size_t size)
    STEER_NONNULL(1, 2);

/** A monotonic timestamp for RTT measurement. */
static inline struct timespec health_probe_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

/** Microseconds since @p start (saturating at UINT32_MAX). */
uint32_t health_probe_elapsed_us(struct timespec start);

/**
 * Finish probe @p p: free it through its cancel function (which stops its watchers), then call
 * @p cb with a copy of @p res (which may live inside @p p). The callback runs after the probe is
 * gone, so it may start new probes or cancel others.
 */
void health_probe_report(health_probe_t *p, const health_probe_result_t *res, health_probe_cb cb,
                         void *arg);

/** Fill @p res: @p ok, the RTT since @p start and a printf-formatted detail. */
void health_probe_result_set(health_probe_result_t *res, bool ok, struct timespec start,
                             const char *fmt, ...) STEER_PRINTF(4, 5);
