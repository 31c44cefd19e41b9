/*
 * HTTP and HTTPS probes, and the transfer part of the metrics probe (probe_metrics.c hands the
 * body to its parsers through a reply callback): one libcurl easy handle per probe, all of them
 * in one multi handle per probe context, driven by the context's event loop through libcurl's
 * "multi socket" interface (CURLMOPT_SOCKETFUNCTION -> ev_io, CURLMOPT_TIMERFUNCTION ->
 * ev_timer). Only the thread that runs the loop touches any of it.
 *
 * Every probe opens a new connection and closes it afterwards (CURLOPT_FRESH_CONNECT +
 * CURLOPT_FORBID_REUSE), and TLS sessions are never resumed. A health check answers "would a
 * new client be served?": a kept-alive connection can outlive the listener (a server being
 * shut down gracefully, a crashed acceptor, a firewall change) and keep reporting up, and
 * reusing one races with the server's keep-alive timeout, which shows up as spurious
 * failures. A resumed TLS session skips the certificate check, so an expired or replaced
 * certificate would go unnoticed. One handshake per interval per target is cheap.
 *
 * Callbacks: a result is only delivered from check_done(), which runs from our ev watchers
 * after curl_multi_socket_action() has returned, so user callbacks may start and cancel
 * probes (which call curl_multi_add_handle / curl_multi_remove_handle) freely. Adding a
 * handle only arms the timer, so nothing runs inside health_probe_http_start().
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <ev.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "health/curl_loop.h"
#include "health/probe_int.h"

/* Extra time libcurl gets past the probe's own timeout before the guard timer reports the
 * failure itself: curl's CURLOPT_TIMEOUT_MS normally ends the transfer first, the guard only
 * makes "exactly one callback" hold even if libcurl loses track of a transfer. */
#define HTTP_GUARD_EXTRA_S 1.0

/* Longest URL we build; the path is the only unbounded part and comes from configuration. */
#define HTTP_URL_MAX 2048

/* Bytes of the expected body substring quoted in a failure detail. */
#define HTTP_DETAIL_BODY_MAX 40

struct health_http {
	struct ev_loop *loop;
	curl_loop_t *cl;
	CURLM *multi; /* cl's */
};

typedef struct {
	health_probe_t base;
	health_http_t *http;
	CURL *easy;
	struct curl_slist *connect_to; /* owned, libcurl does not copy lists */
	const health_probe_spec_t *spec;
	health_probe_cb cb;
	void *arg;
	uint32_t timeout_ms;
	struct timespec start;
	ev_timer guard;
	bool
	    stopped; /* the write callback ended the transfer: CURLE_WRITE_ERROR is not a failure */
	bool tls;
	health_http_reply_cb reply; /* NULL: the http probe's status and substring check */
	size_t body_max;            /* with @c reply: the whole body up to this, in @c big */
	bool truncated;             /* the body was longer than body_max */
	char *big;                  /* owned */
	size_t big_len, big_cap;
	size_t body_len;
	char interface[INET6_ADDRSTRLEN + 8]; /* CURLOPT_INTERFACE "host!ADDR", "" = none */
	char errbuf[CURL_ERROR_SIZE];
	char body[HEALTH_HTTP_BODY_MAX];
} http_probe_t;

/* ---------------------------------------------------------------------------------------- */
/* The multi handle on the event loop */

static void check_done(void *ctx);

int health_http_init(health_probe_ctx_t *ctx, char *err, size_t errlen)
{
	health_http_t *http = xcalloc(1, sizeof(*http));
	http->loop = ctx->loop;
	int ret = curl_loop_new(ctx->loop, check_done, http, &http->cl, err, errlen);
	if (ret != 0) {
		free(http);
		return ret;
	}
	http->multi = curl_loop_multi(http->cl);
	ctx->http = http;
	return 0;
}

void health_http_fini(health_http_t *http)
{
	if (!http)
		return;
	curl_loop_free(http->cl);
	free(http);
}

/* ---------------------------------------------------------------------------------------- */
/* One probe */

static void probe_free(http_probe_t *p)
{
	ev_timer_stop(p->http->loop, &p->guard);
	/* Also drops a CURLMSG_DONE still queued for this handle, so a probe cancelled from
	 * another probe's callback during check_done() is never reported. */
	curl_multi_remove_handle(p->http->multi, p->easy);
	curl_easy_cleanup(p->easy);
	curl_slist_free_all(p->connect_to);
	free(p->big);
	free(p);
}

static void probe_cancel(health_probe_t *self)
{
	probe_free((http_probe_t *)self);
}

static void probe_finish(http_probe_t *p, const health_probe_result_t *res)
{
	health_probe_report(&p->base, res, p->cb, p->arg);
}

static bool body_found(const http_probe_t *p)
{
	const char *want = p->spec->body;
	return memmem(p->body, p->body_len, want, strlen(want)) != NULL;
}

/* The whole body for a reply callback, growing up to body_max. */
static size_t on_whole_body(http_probe_t *p, const char *data, size_t len)
{
	if (len > p->body_max - p->big_len) {
		p->truncated = p->stopped = true;
		return len == 0 ? 1 : 0;
	}
	if (p->big_len + len > p->big_cap) {
		size_t cap = p->big_cap ? p->big_cap : 16384;
		while (cap < p->big_len + len)
			cap *= 2;
		p->big_cap = cap < p->body_max ? cap : p->body_max;
		p->big = xrealloc(p->big, p->big_cap);
	}
	memcpy(p->big + p->big_len, data, len);
	p->big_len += len;
	return len;
}

/* Keeps the first HEALTH_HTTP_BODY_MAX bytes and stops the transfer as soon as nothing more
 * can change the result: the status is known before the first body byte arrives. (A reply
 * callback gets the whole body instead.) */
static size_t on_body(char *data, size_t size, size_t nmemb, void *userp)
{
	http_probe_t *p = userp;
	size_t len = size * nmemb;
	if (p->reply)
		return on_whole_body(p, data, len);
	size_t take = sizeof(p->body) - p->body_len;
	if (take > len)
		take = len;
	memcpy(p->body + p->body_len, data, take);
	p->body_len += take;
	if (p->spec->body && p->body_len < sizeof(p->body) && !body_found(p))
		return len;
	p->stopped = true;
	return len == 0 ? 1 : 0; /* any value but len aborts with CURLE_WRITE_ERROR */
}

static bool status_expected(const health_probe_spec_t *spec, long status)
{
	if (spec->n_status == 0)
		return status >= 200 && status <= 399;
	for (unsigned i = 0; i < spec->n_status && i < HEALTH_HTTP_STATUS_MAX; i++) {
		if (spec->status[i] == status)
			return true;
	}
	return false;
}

static void status_list_text(const health_probe_spec_t *spec, char *buf, size_t size)
{
	if (spec->n_status == 0) {
		snprintf(buf, size, "200-399");
		return;
	}
	size_t off = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < spec->n_status && i < HEALTH_HTTP_STATUS_MAX && off < size; i++) {
		int n = snprintf(buf + off, size - off, "%s%u", i ? ", " : "", spec->status[i]);
		if (n < 0)
			break;
		off += (size_t)n;
	}
}

/* The expected body text as it may appear in a one-line log: short, no control bytes. */
static void body_text(const char *body, char buf[static HTTP_DETAIL_BODY_MAX + 4])
{
	size_t n = 0;
	for (; body[n] && n < HTTP_DETAIL_BODY_MAX; n++) {
		unsigned char c = (unsigned char)body[n];
		buf[n] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	strcpy(buf + n, body[n] ? "..." : "");
}

static bool is_tls_error(CURLcode rc)
{
	switch ((int)rc) {
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_SHUTDOWN_FAILED:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
		return true;
	default:
		return false;
	}
}

/* Which step a timed-out transfer was in. libcurl 7.88 records CONNECT_TIME only once every
 * connection filter is up (TLS included), but knows the local port as soon as TCP is. */
static const char *timeout_phase(const http_probe_t *p)
{
	curl_off_t connect_us = 0, tls_us = 0;
	long local_port = 0;
	curl_easy_getinfo(p->easy, CURLINFO_CONNECT_TIME_T, &connect_us);
	curl_easy_getinfo(p->easy, CURLINFO_LOCAL_PORT, &local_port);
	if (connect_us == 0 && local_port == 0)
		return "connect: ";
	if (!p->tls)
		return "";
	curl_easy_getinfo(p->easy, CURLINFO_APPCONNECT_TIME_T, &tls_us);
	return tls_us == 0 ? "TLS handshake: " : "";
}

static void error_result(http_probe_t *p, CURLcode rc, health_probe_result_t *res)
{
	size_t n = strlen(p->errbuf);
	while (n > 0 && (p->errbuf[n - 1] == '\n' || p->errbuf[n - 1] == ' '))
		p->errbuf[--n] = '\0';
	const char *text = n ? p->errbuf : curl_easy_strerror(rc);
	long oserr = 0;
	if (rc == CURLE_OPERATION_TIMEDOUT) {
		health_probe_result_set(res, false, p->start, "%stimeout after %u ms",
		                        timeout_phase(p), p->timeout_ms);
	} else if (rc == CURLE_COULDNT_CONNECT) {
		curl_easy_getinfo(p->easy, CURLINFO_OS_ERRNO, &oserr);
		health_probe_result_set(res, false, p->start, "connect: %s",
		                        oserr > 0 ? strerror((int)oserr) : text);
	} else if (is_tls_error(rc)) {
		health_probe_result_set(res, false, p->start, "TLS: %s", text);
	} else {
		health_probe_result_set(res, false, p->start, "%s", text);
	}
}

static void transfer_result(http_probe_t *p, CURLcode rc, health_probe_result_t *res)
{
	if (rc == CURLE_WRITE_ERROR && p->stopped)
		rc = CURLE_OK;
	if (rc != CURLE_OK) {
		error_result(p, rc, res);
		return;
	}
	long status = 0;
	curl_easy_getinfo(p->easy, CURLINFO_RESPONSE_CODE, &status);
	if (p->reply) {
		if (p->truncated)
			health_probe_result_set(res, false, p->start,
			                        "HTTP %ld but the body is larger than %zu bytes",
			                        status, p->body_max);
		else
			p->reply(p->spec, status, p->big ? p->big : "", p->big_len, p->start, res);
		return;
	}
	if (!status_expected(p->spec, status)) {
		char want[HEALTH_HTTP_STATUS_MAX * 7];
		status_list_text(p->spec, want, sizeof(want));
		health_probe_result_set(res, false, p->start, "HTTP %ld (expected %s)", status,
		                        want);
	} else if (p->spec->body && !body_found(p)) {
		char want[HTTP_DETAIL_BODY_MAX + 4];
		body_text(p->spec->body, want);
		health_probe_result_set(res, false, p->start, "HTTP %ld but body lacks \"%s\"",
		                        status, want);
	} else {
		health_probe_result_set(res, true, p->start, "HTTP %ld", status);
	}
}

/* Results leave only from here, after curl_multi_socket_action() has returned; the msg
 * pointer dies with curl_multi_remove_handle(), so take what is needed first. */
static void check_done(void *ctx)
{
	health_http_t *http = ctx;
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(http->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		CURLcode rc = msg->data.result;
		char *priv = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
		http_probe_t *p = (http_probe_t *)priv;
		health_probe_result_t res = {0};
		transfer_result(p, rc, &res);
		probe_finish(p, &res);
	}
}

static void on_guard(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	http_probe_t *p = w->data;
	health_probe_result_t res = {0};
	health_probe_result_set(&res, false, p->start, "timeout after %u ms (libcurl stalled)",
	                        p->timeout_ms);
	probe_finish(p, &res);
}

/* ---------------------------------------------------------------------------------------- */
/* Starting */

/* A host name or an IPv6/IPv4 literal: what may go between "://" and ":port" unescaped. */
static bool host_valid(const char *host, bool *ipv6)
{
	unsigned char buf[sizeof(struct in6_addr)];
	*ipv6 = inet_pton(AF_INET6, host, buf) == 1;
	if (*ipv6)
		return true;
	if (host[0] == '\0')
		return false;
	for (const char *c = host; *c; c++) {
		if (!(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') &&
		    !(*c >= '0' && *c <= '9') && *c != '-' && *c != '.' && *c != '_')
			return false;
	}
	return true;
}

/* Visible ASCII only: a space or control byte would be rejected by libcurl at transfer time,
 * and a configuration error belongs at start. */
static bool path_valid(const char *path)
{
	if (path[0] != '/')
		return false;
	for (const char *c = path; *c; c++) {
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return false;
	}
	return true;
}

/* The target address for a URL or CURLOPT_CONNECT_TO: IPv6 in brackets, with its zone. */
static void addr_text(const steer_sockaddr_t *dst, const char *zone_sep, char *buf, size_t size)
{
	char ip[INET6_ADDRSTRLEN];
	if (dst->sa.sa_family == AF_INET) {
		inet_ntop(AF_INET, &dst->sin.sin_addr, ip, sizeof(ip));
		snprintf(buf, size, "%s", ip);
		return;
	}
	inet_ntop(AF_INET6, &dst->sin6.sin6_addr, ip, sizeof(ip));
	char zone[IF_NAMESIZE + 1] = "";
	uint32_t scope = dst->sin6.sin6_scope_id;
	if (scope != 0 && !if_indextoname(scope, zone))
		snprintf(zone, sizeof(zone), "%u", scope);
	snprintf(buf, size, "[%s%s%s]", ip, zone[0] ? zone_sep : "", zone);
}

/* The URL, and when a Host is configured the CURLOPT_CONNECT_TO entry that sends the
 * connection to the target address: the URL's host then only names Host and TLS SNI and
 * verification, and nothing is looked up. CONNECT_TO is per handle, unlike CURLOPT_RESOLVE,
 * which fills the multi handle's shared DNS cache where two targets with the same Host would
 * overwrite each other. */
static int build_target(http_probe_t *p, const health_probe_req_t *req, char *url, char *err,
                        size_t errlen)
{
	const health_probe_spec_t *spec = req->spec;
	const char *scheme = p->tls ? "https" : "http";
	const char *path = spec->path ? spec->path : "/";
	unsigned port = steer_sockaddr_port(&req->dst);
	if (!path_valid(path)) {
		snprintf(err, errlen, "http probe path must start with / and be visible ASCII");
		return STEER_EINVAL;
	}
	char addr[STEER_SOCKADDR_STRLEN + IF_NAMESIZE];
	int n;
	if (spec->host) {
		bool ipv6;
		if (!host_valid(spec->host, &ipv6)) {
			snprintf(err, errlen, "http probe host is not a host name or address");
			return STEER_EINVAL;
		}
		n = snprintf(url, HTTP_URL_MAX, "%s://%s%s%s:%u%s", scheme, ipv6 ? "[" : "",
		             spec->host, ipv6 ? "]" : "", port, path);
		char connect_to[STEER_SOCKADDR_STRLEN + IF_NAMESIZE + 16];
		addr_text(&req->dst, "%", addr, sizeof(addr));
		snprintf(connect_to, sizeof(connect_to), "::%s:%u", addr, port);
		p->connect_to = curl_slist_append(NULL, connect_to);
		if (!p->connect_to) {
			snprintf(err, errlen, "out of memory");
			return STEER_ENOMEM;
		}
	} else {
		addr_text(&req->dst, "%25", addr, sizeof(addr));
		n = snprintf(url, HTTP_URL_MAX, "%s://%s:%u%s", scheme, addr, port, path);
	}
	if (n < 0 || n >= HTTP_URL_MAX) {
		snprintf(err, errlen, "http probe path too long");
		return STEER_EINVAL;
	}
	return 0;
}

static CURLcode set_options(http_probe_t *p, const char *url)
{
	CURL *e = p->easy;
	long verify = p->spec->tls_verify ? 1L : 0L;
	CURLcode rc = CURLE_OK;
#define SET(opt, val)                                                                              \
	do {                                                                                       \
		if (rc == CURLE_OK)                                                                \
			rc = curl_easy_setopt(e, opt, val);                                        \
	} while (0)
	SET(CURLOPT_URL, url);
	SET(CURLOPT_PRIVATE, (void *)p);
	SET(CURLOPT_ERRORBUFFER, p->errbuf);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, (void *)p);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_TIMEOUT_MS, (long)p->timeout_ms);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_USERAGENT, "steer-health/1");
	SET(CURLOPT_NOPROXY, "*");
	SET(CURLOPT_FRESH_CONNECT, 1L);
	SET(CURLOPT_FORBID_REUSE, 1L);
	SET(CURLOPT_SSL_SESSIONID_CACHE, 0L);
	SET(CURLOPT_SSL_VERIFYPEER, verify);
	SET(CURLOPT_SSL_VERIFYHOST, verify ? 2L : 0L);
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
#if LIBCURL_VERSION_NUM >= 0x075500
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
#endif
	if (p->connect_to)
		SET(CURLOPT_CONNECT_TO, p->connect_to);
	/* "host!": an address to bind, never taken for a device name */
	if (p->interface[0])
		SET(CURLOPT_INTERFACE, p->interface);
#undef SET
	return rc;
}

int health_probe_http_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                            health_probe_t **out, char *err, size_t errlen)
{
	return health_http_transfer_start(ctx, req, NULL, 0, out, err, errlen);
}

int health_http_transfer_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                               health_http_reply_cb reply, size_t body_max, health_probe_t **out,
                               char *err, size_t errlen)
{
	http_probe_t *p = xcalloc(1, sizeof(*p));
	p->reply = reply;
	p->body_max = body_max;
	p->tls = req->spec->type == HEALTH_PROBE_HTTPS ||
	         (req->spec->type == HEALTH_PROBE_METRICS && req->spec->tls);
	p->base.cancel = probe_cancel;
	p->http = ctx->http;
	p->spec = req->spec;
	p->cb = req->cb;
	p->arg = req->arg;
	p->timeout_ms = req->timeout_ms;
	p->start = health_probe_now();
	ev_timer_init(&p->guard, on_guard, req->timeout_ms / 1000.0 + HTTP_GUARD_EXTRA_S, 0.);
	p->guard.data = p;

	char source[INET6_ADDRSTRLEN];
	if (health_probe_source_text(req, source, sizeof(source))[0])
		snprintf(p->interface, sizeof(p->interface), "host!%s", source);
	char url[HTTP_URL_MAX];
	int ret = build_target(p, req, url, err, errlen);
	if (ret != 0)
		goto fail;
	p->easy = curl_easy_init();
	if (!p->easy) {
		snprintf(err, errlen, "libcurl: cannot create a handle");
		ret = STEER_ENOMEM;
		goto fail;
	}
	CURLcode rc = set_options(p, url);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "libcurl: %s", curl_easy_strerror(rc));
		ret = -EIO;
		goto fail;
	}
	CURLMcode mc = curl_multi_add_handle(p->http->multi, p->easy);
	if (mc != CURLM_OK) {
		snprintf(err, errlen, "libcurl: %s", curl_multi_strerror(mc));
		ret = -EIO;
		goto fail;
	}
	ev_timer_start(p->http->loop, &p->guard);
	*out = &p->base;
	return 0;
fail:
	curl_easy_cleanup(p->easy);
	curl_slist_free_all(p->connect_to);
	free(p->big);
	free(p);
	return ret;
}
