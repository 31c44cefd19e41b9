/*
 * Probes: one check of one target by one monitor type, run on the monitor thread's event loop.
 *
 * A probe is started with a request (what to check, where, how long to wait) and reports its
 * result exactly once through the request's callback, from the event loop, unless it is
 * cancelled first. The engine (health/engine.h) decides when to probe and what a run of
 * results means (fall/rise); a probe knows nothing about state.
 *
 * Types:
 *   tcp     connect(2) to the target address and port; success when the handshake completes.
 *   http    an HTTP/1.1 GET through libcurl's multi interface driven by the event loop;
 *   https   success when the status is in the expected set (default 200..399 when the set is
 *           empty) and, if configured, the first HEALTH_HTTP_BODY_MAX bytes of the body
 *           contain a substring. The request goes to the target address (no name lookup),
 *           with the configured Host header / TLS server name.
 *   dns     a query (name, type, RD clear) over UDP to the target; success when the response
 *           matches the query (id, question) and has the expected rcode and, if configured,
 *           an answer record whose text form (for A/AAAA the address) equals the expected one.
 *   metrics an HTTP(S) GET like http (2xx expected) whose body (at most
 *           HEALTH_METRICS_BODY_MAX bytes) is parsed in the spec's format and every configured
 *           expression read from it: the result carries the raw numbers (metric_raw, and a bit
 *           in metric_have per number read); ok when all of them were. It is no up/down check:
 *           the engine only keeps its values.
 *   exec    an external command (argv, no shell), with STEER_TARGET_ADDR, STEER_TARGET_PORT,
 *           STEER_TARGET_NAME and STEER_SOURCE (the source address, empty when the kernel
 *           chooses) in its environment; success on exit status 0. A command still running at
 *           the timeout is killed with its process group (SIGKILL).
 *
 * With a source address of the target's family, tcp, http/https and dns bind their socket to
 * it before connecting, so the probe takes the path (and the source-based routing) of that
 * address; a source that is not local fails the probe ("bind ...").
 *
 * Threads: everything runs on the one thread that runs the loop given to health_probe_ctx_new.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "health/metrics_parse.h"

struct ev_loop;

#define HEALTH_HTTP_BODY_MAX    5120 /* bytes searched for the body substring (Route 53's number) */
#define HEALTH_HTTP_STATUS_MAX  8    /* expected status codes per monitor */
#define HEALTH_PROBE_DETAIL     160  /* bytes of the human result text, with the terminator */
#define HEALTH_METRICS_BODY_MAX (4u << 20) /* bytes of a metrics body; a longer one fails */

/* The load values a metrics probe reads, in this order (the daemon maps them to conf's and the
 * GSLB health table's, which use the same order). */
enum {
	HEALTH_METRIC_CONNECTIONS,
	HEALTH_METRIC_CAPACITY,
	HEALTH_METRIC_PACKET_RATE,
	HEALTH_METRIC_KBPS,
	HEALTH_METRIC_CPU,
	HEALTH_METRIC_LINK_CAPACITY,
	HEALTH_METRIC_KINDS
};

typedef enum {
	HEALTH_PROBE_TCP,
	HEALTH_PROBE_HTTP,
	HEALTH_PROBE_HTTPS,
	HEALTH_PROBE_DNS,
	HEALTH_PROBE_EXEC,
	HEALTH_PROBE_METRICS,
} health_probe_type_t;

/* What a monitor checks, beyond the target address. Borrowed strings live as long as the
 * monitor configuration (the engine keeps them until every probe using them has ended). */
typedef struct {
	health_probe_type_t type;
	/* http / https */
	const char *path; /* request path with query, default "/" */
	const char *host; /* Host header and TLS SNI; NULL = the target address */
	const char *body; /* substring expected in the body, NULL = any */
	bool tls_verify;  /* https: verify the certificate chain and the host name */
	uint16_t status[HEALTH_HTTP_STATUS_MAX]; /* expected codes; none = 200..399 */
	uint8_t n_status;
	/* dns */
	const char *qname;  /* query name, presentation form, e.g. "example.test." */
	uint16_t qtype;     /* query type, e.g. 1 (A) */
	uint8_t rcode;      /* expected rcode, usually 0 (NOERROR) */
	const char *answer; /* expected answer rdata text (e.g. "192.0.2.1"), NULL = any */
	/* exec */
	char *const *argv; /* NULL-terminated, argv[0] is the program (PATH is searched) */
	/* metrics (also path, host, tls_verify) */
	bool tls; /* https */
	metrics_format_t format;
	const char *metric_expr[HEALTH_METRIC_KINDS]; /* expression texts, NULL = not read */
	const metrics_expr_t *metric_compiled[HEALTH_METRIC_KINDS]; /* the same, compiled
	                                                             * (the owner of the spec
	                                                             * compiles them) */
} health_probe_spec_t;

typedef struct {
	bool ok;
	uint32_t rtt_us;                  /* from start to result, also for failures */
	char detail[HEALTH_PROBE_DETAIL]; /* "HTTP 503", "connect: Connection refused", "timeout
	                                     after 1000 ms", "exit status 2", "ok" ... */
	/* metrics: the raw numbers read (before rate and scaling), a bit per HEALTH_METRIC_* */
	double metric_raw[HEALTH_METRIC_KINDS];
	uint8_t metric_have;
} health_probe_result_t;

typedef void (*health_probe_cb)(const health_probe_result_t *res, void *arg);

typedef struct {
	const health_probe_spec_t *spec; /* borrowed until the callback or the cancel */
	steer_sockaddr_t dst;            /* where to probe: address and port (port 0 is invalid
	                                    except for exec) */
	steer_sockaddr_t source;         /* the probe leaves from this address (port 0) when it is
	                                    of dst's family; family 0 = the kernel's choice */
	const char *target_name;         /* for logs and the exec environment; borrowed */
	uint32_t timeout_ms;             /* > 0 */
	health_probe_cb cb;
	void *arg;
} health_probe_req_t;

/* Per-loop shared state of all probe types (the loop, libcurl's multi handle...). */
typedef struct health_probe_ctx health_probe_ctx_t;

/* An in-flight probe. Every type's private struct starts with this header. */
typedef struct health_probe health_probe_t;
struct health_probe {
	void (*cancel)(health_probe_t *self);
};

/**
 * Create the probe context for @p loop (which the caller keeps running). Returns 0 or a
 * negative code (STEER_ENOMEM, -EIO when libcurl cannot be initialised) with a message
 * in @p err. Monitor thread.
 */
int health_probe_ctx_new(struct ev_loop *loop, health_probe_ctx_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/** Free @p ctx (NULL is fine). Cancel every probe started with it first. Monitor thread. */
void health_probe_ctx_free(health_probe_ctx_t *ctx);

/**
 * Start a probe of @p req->spec->type. On success returns 0 and *@p out: the callback runs
 * exactly once later from the loop (never from inside this call) unless
 * health_probe_cancel() comes first; the probe frees itself after the callback returns. On
 * failure (bad request, out of sockets or processes) returns a negative code with a message
 * in @p err, no callback will run, and the caller should count it as a failed probe.
 * Monitor thread.
 */
int health_probe_start(health_probe_ctx_t *ctx, const health_probe_req_t *req, health_probe_t **out,
                       char *err, size_t errlen) STEER_NONNULL(1, 2, 3, 4) STEER_WUR;

/** Stop @p p and free it; its callback will not run. Only before the callback. */
static inline void health_probe_cancel(health_probe_t *p)
{
	p->cancel(p);
}

/** Name of a HEALTH_METRIC_* value as configured ("connections", "packet-rate", ...). */
const char *health_metric_name(unsigned kind);

/** Name of a probe type ("tcp", "http", ...). */
const char *health_probe_type_name(health_probe_type_t type);

/** Parse a probe type name. Returns 0 or STEER_EINVAL. */
int health_probe_type_parse(const char *name, health_probe_type_t *out)
    STEER_NONNULL(1, 2) STEER_WUR;
