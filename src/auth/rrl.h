/*
 * Response Rate Limiting for UDP answers, as BIND, Knot and NSD do it: a token bucket per
 * (client prefix, kind of response, name) in a fixed table of 64-bit words that every query
 * thread updates with compare-and-swap: no lock, no allocation. A bucket earns `rate` tokens
 * a second, holds at most one second's worth (a burst of `rate`) and goes at most `window`
 * seconds' worth into debt, so a flood must pause that long before its answers resume.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/stats.h"
#include "base/compiler.h"
#include "base/sockaddr.h"

/* What kind of response a bucket counts (response classes of BIND and Knot). */
typedef enum {
	AUTH_RRL_NONE,     /* not rate-limited (forwarded answers, transfers) */
	AUTH_RRL_POSITIVE, /* answer data: per name and type */
	AUTH_RRL_NODATA,   /* NOERROR without answers: per name */
	AUTH_RRL_NXDOMAIN, /* per zone, so random names share one bucket */
	AUTH_RRL_REFERRAL, /* per delegation */
	AUTH_RRL_ERROR,    /* REFUSED, FORMERR, SERVFAIL, ...: per prefix */
} auth_rrl_class_t;

typedef enum {
	AUTH_RRL_PASS, /* send the answer */
	AUTH_RRL_DROP, /* send nothing */
	AUTH_RRL_SLIP, /* send it truncated: header and question, TC=1 */
} auth_rrl_verdict_t;

/* The limits of one configuration. */
typedef struct {
	unsigned rate, nxdomain_rate, error_rate; /* per second; the latter two nonzero */
	unsigned slip;                            /* every Nth limited answer slips; 0 = none */
	unsigned window;                          /* seconds of debt allowed, >= 1 */
	uint8_t ipv4_prefix, ipv6_prefix;
	const steer_prefix_t *exempt; /* borrowed from the configuration */
	size_t n_exempt;
	bool exempt_cookies;
	bool log_only;
} auth_rrl_conf_t;

/* The bucket table; survives reloads (the daemon owns it). */
typedef struct auth_rrl_table auth_rrl_table_t;

/* What auth_view_t carries: @c table NULL = rate limiting off. */
typedef struct {
	auth_rrl_conf_t conf;
	auth_rrl_table_t *table; /* borrowed */
} auth_rrl_t;

/* What the answering code learnt about one response, for auth_rrl_apply(). */
typedef struct {
	uint8_t cls;           /* auth_rrl_class_t */
	bool cookie_ok;        /* the query had a valid server cookie */
	bool exempt;           /* set by auth_rrl_classify(): never limited */
	uint16_t question_end; /* offset after the response's question (the slip length) */
	uint32_t slot;         /* set by auth_rrl_classify(): the bucket */
	uint8_t prefix[17];    /* set by auth_rrl_classify(): masked address, family (4/6) last */
} auth_rrl_info_t;

/**
 * A table of @p size buckets with a random hash key, all empty. Control thread; aborts on
 * OOM.
 */
auth_rrl_table_t *auth_rrl_table_new(size_t size) STEER_WUR;

/** Free @p t (NULL ignored) once no query thread can use it. */
void auth_rrl_table_free(auth_rrl_table_t *t);

/** The number of buckets of @p t. */
size_t auth_rrl_table_size(const auth_rrl_table_t *t) STEER_NONNULL(1);

/**
 * Pick the bucket of the answer described by @p info (its cls and cookie_ok set) to
 * @p remote, for the class's name @p name (wire form, lowercase; NULL = none) and @p qtype:
 * one keyed hash of client prefix, class, type and name into @p info->slot; sets
 * @p info->exempt for exempt prefixes, valid cookies (with exempt-cookies) and addresses of
 * other families. @p rrl->table must be set. Any query thread.
 */
void auth_rrl_classify(const auth_rrl_t *rrl, const steer_sockaddr_t *remote, const uint8_t *name,
                       uint16_t qtype, auth_rrl_info_t *info) STEER_NONNULL(1, 2, 5);

/**
 * Account one answer classified by auth_rrl_classify() at @p now_s (a monotonic second
 * count) and say what to do with it. Exempt answers and AUTH_RRL_NONE always pass; with
 * log-only a limited answer passes too but is counted. Counts drops, slips and log-only
 * decisions in @p stats (the calling thread's). Any query thread; lock-free.
 */
auth_rrl_verdict_t auth_rrl_check(const auth_rrl_t *rrl, const auth_rrl_info_t *info,
                                  uint32_t now_s, auth_stats_t *stats) STEER_NONNULL(1, 2, 4);

/**
 * Apply auth_rrl_check() to the UDP response @p resp (@p len bytes): returns @p len to send
 * it, 0 to drop it, or the length of the truncated form written in place (header and
 * question, no records, TC=1). Uses the monotonic clock. When a flow starts being limited
 * (its bucket has just run dry), logs one notice naming the client prefix, the response
 * class, the question's name and what is done (dropping, slipping, or nothing with
 * log-only); those notices are themselves rate-limited. Any query thread.
 */
size_t auth_rrl_apply(const auth_rrl_t *rrl, const auth_rrl_info_t *info, uint8_t *resp, size_t len,
                      auth_stats_t *stats) STEER_NONNULL(1, 2, 3, 5);
