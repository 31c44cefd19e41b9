/*
 * The HTTP front end (libmicrohttpd + jansson): the control commands as a JSON API under
 * /api/v1/, plus pages other modules register (/metrics, the status page). It serves the same
 * command table through the same dispatcher and backend as the UNIX control socket, and runs
 * on the same thread: MHD has no threads of its own here, its epoll descriptors sit in libev
 * watchers of the control loop, so a command never races the control socket's.
 *
 *   GET|POST /api/v1/<command>[/<arg>...][?arg=A&arg=B]   body (POST): {"args": ["C", ...]}
 *
 * The path segments after /api/v1/ (each percent-decoded, so "%2F" is a '/' inside one
 * argument) are the command and its positional arguments, sub-command first; ?arg= values
 * follow, then the body's. The reply is the control socket's: {"ok": true, "data": ...} with
 * 200, or {"ok": false, "error": "..."} with 400 (bad arguments, bad request), 401 (token
 * missing or wrong), 403 (no token configured), 404 (unknown command or path), 405 (a mutating
 * command over GET), 413 (body over CTL_HTTP_BODY_MAX), 415 (body not JSON), 500 (the backend
 * failed, e.g. a reload's error). docs/http-api.md is the operator's reference.
 *
 * Threads: everything here runs on the thread that owns @c loop (the control thread).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "ctl/commands.h"

struct ev_loop;
typedef struct ctl_http ctl_http_t;

/* A request body larger than this is refused with 413: the largest command is a few hundred
 * bytes, so 64 KiB leaves room for any honest client and bounds what one request can cost. */
#define CTL_HTTP_BODY_MAX (64u * 1024u)
/* Token lengths the file may hold: below the minimum a token is guessable (16 random
 * characters are 64 bits and more), above the maximum it is not a token. */
#define CTL_HTTP_TOKEN_MIN 16u
#define CTL_HTTP_TOKEN_MAX 1024u

/* What a registered page answers. */
typedef struct {
	unsigned status;          /* HTTP status, 200 unless set */
	const char *content_type; /* e.g. "text/plain; version=0.0.4; charset=utf-8" */
	const void *body;         /* the body, @c len bytes */
	size_t len;
	void (*free_body)(void *body); /* called after sending; NULL: static data */
	const char *cache_control;     /* NULL = "no-store" */
	const char *etag;              /* NULL = none; with one, If-None-Match gives 304 */
	const char *csp;               /* Content-Security-Policy; NULL = "default-src 'none'" */
} ctl_http_page_t;

/*
 * Fill @p page for a GET (or HEAD) of @p path (the part after the host, without the query).
 * Return 0, or a negative steer_err (500 with the message in @p err). Control thread. The
 * strings of @p page (content type, cache control, etag, csp) are copied into the reply as
 * soon as the callback returns; the body is sent from where it is, so it must stay valid until
 * free_body is called (static data: as long as the server runs). On error free_body, if set,
 * is called on the body.
 */
typedef int (*ctl_http_page_cb)(const char *path, ctl_http_page_t *page, char *err, size_t errlen,
                                void *ctx);

/* How the server listens and authorises. Strings are copied. */
typedef struct {
	const steer_sockaddr_t *listen; /* at least one address */
	size_t n_listen;
	const char *token;   /* the bearer token; NULL = none: mutating calls get 403 */
	bool read_only_open; /* read-only commands and pages without a token */
} ctl_http_opts_t;

/**
 * Listen on every address of @p opts and serve requests on @p loop with the commands of
 * @p backend (borrowed, must outlive the server). A NULL @p backend serves the registered
 * pages only (a process without control commands, such as steer-probe): /api/v1/ is then 404.
 * Returns 0, or a negative steer_err with the address that failed in @p err (nothing is left
 * listening).
 */
int ctl_http_start(ctl_http_t **out, struct ev_loop *loop, const ctl_http_opts_t *opts,
                   const ctl_backend_t *backend, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3, 5) STEER_WUR;

/**
 * Replace the token and the read-only rule (a reload); @c listen of @p opts is ignored, the
 * addresses only change on restart. Takes effect for the next request.
 */
void ctl_http_reconfigure(ctl_http_t *http, const ctl_http_opts_t *opts) STEER_NONNULL(1, 2);

/** The port listen address @p i (in ctl_http_opts_t order) is bound to: for port 0. */
uint16_t ctl_http_port(const ctl_http_t *http, size_t i) STEER_NONNULL(1);

/** Stop listening, close every connection and free the server. NULL is ignored. */
void ctl_http_stop(ctl_http_t *http);

/**
 * Serve @p path (exact, or every path below it when it ends in '/') with @p cb. An exact path
 * wins over a prefix, a longer prefix over a shorter one, and /api/v1/ over any page, so "/"
 * serves whatever nothing else does (the callback may answer 404 itself). @p path is copied;
 * @p ctx is borrowed. A NULL @p http (no HTTP server configured) is ignored and returns 0, so
 * callers need not check. Returns 0, STEER_EEXIST for a path already registered, STEER_EINVAL
 * for a path not starting with '/' or under /api/.
 */
int ctl_http_add_page(ctl_http_t *http, const char *path, ctl_http_page_cb cb, void *ctx);

/**
 * ctl_http_add_page() for a page served without a token even when read-only-open is false:
 * one that holds no data itself, such as the status page's files, which must load before
 * they can ask the operator for the token. Only @p path itself is open: when it ends in '/',
 * the paths below it still need the token, so a closed server reveals no other page.
 */
int ctl_http_add_open_page(ctl_http_t *http, const char *path, ctl_http_page_cb cb, void *ctx);

/**
 * Read the bearer token: the first line of the file at @p path, without the line end. The
 * file must exist, be readable, not be readable or writable by others (a token everyone can
 * read authorises everyone) and its first line must hold CTL_HTTP_TOKEN_MIN..
 * CTL_HTTP_TOKEN_MAX printable characters. Returns 0 with the token in @p token (@p size bytes,
 * CTL_HTTP_TOKEN_MAX + 1 is enough), or a negative steer_err with a message naming the file in @p
 * err. Any thread.
 */
int ctl_http_token_read(const char *path, char *token, size_t size, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 4) STEER_WUR;

/** Whether the @p given_len bytes of @p given equal @p token, in time that depends only on
 *  the token's length (no early exit on the first difference). */
bool ctl_http_token_equal(const char *token, const char *given, size_t given_len)
    STEER_NONNULL(1, 2);

/* ---- the request parser: pure, so it is fuzzed and unit-tested without a socket ---- */

/* One query parameter as MHD hands it over: still percent-encoded ('+' already a space). */
typedef struct {
	const char *key;
	const char *value; /* NULL for a key without '=' */
} ctl_http_query_t;

/* The parser's input. */
typedef struct {
	const char *method; /* "GET", "HEAD", "POST", ... */
	const char *path;   /* the request target without the query, percent-encoded */
	const ctl_http_query_t *query;
	size_t n_query;
	const char *content_type; /* NULL = none */
	const char *body;         /* @c body_len bytes, need not be terminated; NULL when 0 */
	size_t body_len;
} ctl_http_request_t;

/* A command the parser accepted. */
typedef struct {
	char *cmd;                /* the command name; owned */
	json_t *args;             /* JSON array of strings, sub-command first; owned */
	const ctl_command_t *row; /* the table row it matched (static) */
} ctl_http_call_t;

/**
 * Turn an API request (@p req->path under /api/v1/) into a command call: decode the path
 * segments, add the ?arg= values and the POST body's "args", and match the command table.
 * Returns 0 with @p call filled (release with ctl_http_call_clear()), or the HTTP status to
 * answer (400, 404 also for a path not under /api/v1, 405, 413, 415) with the reason in
 * @p err; @p call is then empty. 405 comes
 * with the methods allowed in @p allow (a static string). Any thread; no I/O.
 */
unsigned ctl_http_parse_call(const ctl_http_request_t *req, ctl_http_call_t *call,
                             const char **allow, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3, 4) STEER_WUR;

/** Free what @p call owns and empty it. */
void ctl_http_call_clear(ctl_http_call_t *call) STEER_NONNULL(1);

/**
 * Whether @p path (percent-encoded, without the query) is one the server may look up: it
 * starts with '/', and no segment is "." or ".." (raw or decoded), holds a NUL or a bad
 * percent escape. Any thread.
 */
bool ctl_http_path_safe(const char *path) STEER_NONNULL(1);

/**
 * The HTTP status for a command's error @p ret (a negative steer_err): 400 for bad
 * arguments, 404 for something that does not exist, 403 for refused, 409 for a conflict, 500
 * for anything the backend failed at (no memory, I/O). A reload's errors are always 500 (what
 * fails is the server's configuration or files, not the request); the parser checks its
 * option.
 */
unsigned ctl_http_status_of(int ret);
