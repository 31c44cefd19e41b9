/*
 * Tests for src/ctl/http.c: the pure request parser (table-driven: paths, percent-encoding,
 * query and body arguments, methods, limits, the command table's 404/400/405), the path check,
 * the token file rules and the constant-time compare, the error-to-status map; then a real
 * server on a libev loop in a thread with a recording backend and registered pages, driven by
 * raw HTTP/1.1 clients: routing, token rules, status codes and headers, ETag/304, HEAD, body
 * limits, page precedence, reconfiguration.
 */
#include "ctl/http.h"

#include <arpa/inet.h>
#include <ev.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "unit.h"

/* ---- the parser ------------------------------------------------------------------------ */

static void test_parse(void)
{
	static const struct {
		const char *method, *path;
		const char *qk[3], *qv[3]; /* query keys and values, NULL-terminated keys */
		const char *type, *body;
		unsigned status;
		const char *want; /* success: "cmd ARGS-JSON"; error: a piece of the message */
		const char *allow;
	} rows[] = {
	    {"GET", "/api/v1/status", {0}, {0}, NULL, NULL, 0, "status []", NULL},
	    {"HEAD", "/api/v1/status", {0}, {0}, NULL, NULL, 0, "status []", NULL},
	    {"POST", "/api/v1/status", {0}, {0}, NULL, NULL, 0, "status []", NULL},
	    {"GET", "/api/v1/status/", {0}, {0}, NULL, NULL, 0, "status []", NULL},
	    {"GET",
	     "/api/v1/explain/www.example.test/192.0.2.1",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     0,
	     "explain [\"www.example.test\",\"192.0.2.1\"]",
	     NULL},
	    {"POST",
	     "/api/v1/override/set/service%2Fwww%2F*/down",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     0,
	     "override [\"set\",\"service/www/*\",\"down\"]",
	     NULL},
	    {"POST",
	     "/api/v1/override/set/a%2fb/down/30m",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     0,
	     "override [\"set\",\"a/b\",\"down\",\"30m\"]",
	     NULL},
	    {"GET",
	     "/api/v1/health",
	     {"arg"},
	     {"service%2F*"},
	     NULL,
	     NULL,
	     0,
	     "health [\"service/*\"]",
	     NULL},
	    {"GET",
	     "/api/v1/explain/w",
	     {"arg", "arg"},
	     {"192.0.2.1", "198.51.100.0%2F24"},
	     NULL,
	     NULL,
	     0,
	     "explain [\"w\",\"192.0.2.1\",\"198.51.100.0/24\"]",
	     NULL},
	    {"POST",
	     "/api/v1/override",
	     {0},
	     {0},
	     "application/json",
	     "{\"args\": [\"set\", \"a b/*\", \"up\"]}",
	     0,
	     "override [\"set\",\"a b/*\",\"up\"]",
	     NULL},
	    {"POST",
	     "/api/v1/override/set",
	     {"arg"},
	     {"p"},
	     "application/json; charset=utf-8",
	     "{\"args\": [\"down\"]}",
	     0,
	     "override [\"set\",\"p\",\"down\"]",
	     NULL},
	    {"POST",
	     "/api/v1/reload",
	     {0},
	     {0},
	     NULL,
	     "{\"args\": [\"--force\"]}",
	     0,
	     "reload [\"--force\"]",
	     NULL},
	    {"POST", "/api/v1/reload", {0}, {0}, NULL, "{}", 0, "reload []", NULL},
	    {"POST",
	     "/api/v1/reload/--force",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     0,
	     "reload [\"--force\"]",
	     NULL},
	    {"POST",
	     "/api/v1/reload/--now",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     400,
	     "reload: the only option is --force, not '--now'",
	     NULL},
	    {"GET",
	     "/api/v1/health/%E2%9C%93",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     0,
	     "health [\"\u2713\"]",
	     NULL},
	    /* errors */
	    {"GET", "/api/v1", {0}, {0}, NULL, NULL, 404, "no command", NULL},
	    {"GET", "/api/v", {0}, {0}, NULL, NULL, 404, "not an API path", NULL},
	    {"GET", "/api/v10/status", {0}, {0}, NULL, NULL, 404, "not an API path", NULL},
	    {"GET", "/metrics", {0}, {0}, NULL, NULL, 404, "not an API path", NULL},
	    {"GET", "/api/v1/", {0}, {0}, NULL, NULL, 404, "no command", NULL},
	    {"GET",
	     "/api/v1/frobnicate",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     404,
	     "unknown command 'frobnicate'",
	     NULL},
	    {"GET", "/api/v1/status/x", {0}, {0}, NULL, NULL, 400, "takes no arguments", NULL},
	    {"POST",
	     "/api/v1/override/set/p",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     400,
	     "usage: override set PATTERN up|down [FOR]",
	     NULL},
	    {"GET",
	     "/api/v1/reload",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     405,
	     "'reload' changes the server: "
	     "use POST",
	     "POST"},
	    {"GET",
	     "/api/v1/override/set/p/down",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     405,
	     "'override set' changes",
	     "POST"},
	    {"HEAD", "/api/v1/cache/flush", {0}, {0}, NULL, NULL, 405, "use POST", "POST"},
	    {"PUT", "/api/v1/status", {0}, {0}, NULL, NULL, 405, "method PUT", "GET, HEAD, POST"},
	    {"DELETE",
	     "/api/v1/reload",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     405,
	     "method DELETE",
	     "GET, HEAD, POST"},
	    {"GET", "/api/v1/health/%zz", {0}, {0}, NULL, NULL, 400, "bad path", NULL},
	    {"GET", "/api/v1/health/%4", {0}, {0}, NULL, NULL, 400, "bad path", NULL},
	    {"GET", "/api/v1/health/%", {0}, {0}, NULL, NULL, 400, "bad path", NULL},
	    {"GET", "/api/v1/health/a%00b", {0}, {0}, NULL, NULL, 400, "bad path", NULL},
	    {"GET", "/api/v1/health/%FF", {0}, {0}, NULL, NULL, 400, "not UTF-8", NULL},
	    {"GET", "/api/v1/../status", {0}, {0}, NULL, NULL, 400, "bad path", NULL},
	    {"GET", "/api/v1/health/..", {0}, {0}, NULL, NULL, 400, "bad path", NULL},
	    {"GET", "/api/v1/health/%2e%2E", {0}, {0}, NULL, NULL, 400, "bad path", NULL},
	    {"GET", "/api/v1/health/.", {0}, {0}, NULL, NULL, 400, "bad path", NULL},
	    {"GET",
	     "/api/v1/explain//192.0.2.1",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     400,
	     "empty path segment",
	     NULL},
	    {"GET",
	     "/api/v1/health",
	     {"pattern"},
	     {"x"},
	     NULL,
	     NULL,
	     400,
	     "unknown query parameter 'pattern'",
	     NULL},
	    {"GET", "/api/v1/health", {"arg"}, {NULL}, NULL, NULL, 400, "needs a value", NULL},
	    {"GET",
	     "/api/v1/health",
	     {"arg"},
	     {"%g0"},
	     NULL,
	     NULL,
	     400,
	     "arg=: bad percent-encoding",
	     NULL},
	    {"GET",
	     "/api/v1/status",
	     {0},
	     {0},
	     "application/json",
	     "{}",
	     400,
	     "only a POST has a body",
	     NULL},
	    {"POST",
	     "/api/v1/reload",
	     {0},
	     {0},
	     "text/plain",
	     "--force",
	     415,
	     "must be application/json",
	     NULL},
	    {"POST",
	     "/api/v1/reload",
	     {0},
	     {0},
	     "application/x-www-form-urlencoded",
	     "a=b",
	     415,
	     "not 'application/x-www-form-urlencoded'",
	     NULL},
	    {"POST", "/api/v1/reload", {0}, {0}, "application/jsonx", "{}", 415, "must be", NULL},
	    {"POST",
	     "/api/v1/reload",
	     {0},
	     {0},
	     "application/json",
	     "{\"args\": [",
	     415,
	     "body: not JSON at line 1",
	     NULL},
	    {"POST",
	     "/api/v1/reload",
	     {0},
	     {0},
	     NULL,
	     "[\"--force\"]",
	     400,
	     "body must be {\"args\"",
	     NULL},
	    {"POST",
	     "/api/v1/reload",
	     {0},
	     {0},
	     NULL,
	     "{\"args\": \"--force\"}",
	     400,
	     "body must be",
	     NULL},
	    {"POST",
	     "/api/v1/reload",
	     {0},
	     {0},
	     NULL,
	     "{\"args\": [], \"cmd\": \"x\"}",
	     400,
	     "body must be",
	     NULL},
	    {"POST",
	     "/api/v1/reload",
	     {0},
	     {0},
	     NULL,
	     "{\"args\": [1]}",
	     400,
	     "args[0] is not a string",
	     NULL},
	    {"POST",
	     "/api/v1/reload",
	     {0},
	     {0},
	     NULL,
	     "{\"args\": [], \"args\": []}",
	     400,
	     "duplicate object key",
	     NULL},
	    {"POST",
	     "/api/v1/override",
	     {0},
	     {0},
	     NULL,
	     "{\"args\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\","
	     "\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
	     400,
	     "too many arguments",
	     NULL},
	    {"GET",
	     "/api/v1/health/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17",
	     {0},
	     {0},
	     NULL,
	     NULL,
	     400,
	     "too many arguments",
	     NULL},
	    {"POST",
	     "/api/v1/override/set/p",
	     {0},
	     {0},
	     NULL,
	     "{\"args\": [\"down\", \"x\", "
	     "\"y\"]}",
	     400,
	     "usage: override set",
	     NULL},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		ctl_http_query_t q[3];
		size_t nq = 0;
		for (; nq < 3 && rows[i].qk[nq]; nq++)
			q[nq] = (ctl_http_query_t){rows[i].qk[nq], rows[i].qv[nq]};
		ctl_http_request_t req = {
		    .method = rows[i].method,
		    .path = rows[i].path,
		    .query = q,
		    .n_query = nq,
		    .content_type = rows[i].type,
		    .body = rows[i].body,
		    .body_len = rows[i].body ? strlen(rows[i].body) : 0,
		};
		ctl_http_call_t call;
		const char *allow = "unset";
		char err[512] = "";
		unsigned st = ctl_http_parse_call(&req, &call, &allow, err, sizeof(err));
		CHECK(st == rows[i].status, "row %zu %s %s: status %u, want %u (%s)", i,
		      rows[i].method, rows[i].path, st, rows[i].status, err);
		if (st == 0) {
			char *args = json_dumps(call.args, JSON_COMPACT);
			char got[512];
			snprintf(got, sizeof(got), "%s %s", call.cmd, args);
			free(args);
			CHECK(strcmp(got, rows[i].want) == 0 && call.row != NULL,
			      "row %zu: got '%s', want '%s'", i, got, rows[i].want);
			ctl_http_call_clear(&call);
		} else {
			CHECK(strstr(err, rows[i].want) != NULL, "row %zu: error '%s' lacks '%s'",
			      i, err, rows[i].want);
			CHECK(call.cmd == NULL && call.args == NULL, "row %zu: call left empty", i);
			CHECK((rows[i].allow == NULL && allow == NULL) ||
			          (rows[i].allow && allow && strcmp(allow, rows[i].allow) == 0),
			      "row %zu: Allow '%s', want '%s'", i, allow ? allow : "(none)",
			      rows[i].allow ? rows[i].allow : "(none)");
		}
	}

	/* A body over the limit is refused by size, whatever it holds. */
	char *big = malloc(CTL_HTTP_BODY_MAX + 2);
	memset(big, ' ', CTL_HTTP_BODY_MAX + 1);
	big[CTL_HTTP_BODY_MAX + 1] = '\0';
	ctl_http_request_t req = {.method = "POST",
	                          .path = "/api/v1/reload",
	                          .body = big,
	                          .body_len = CTL_HTTP_BODY_MAX + 1};
	ctl_http_call_t call;
	const char *allow;
	char err[256];
	CHECK(ctl_http_parse_call(&req, &call, &allow, err, sizeof(err)) == 413, "big body");
	req.body_len = CTL_HTTP_BODY_MAX; /* exactly the limit: parsed (all spaces: not JSON) */
	CHECK(ctl_http_parse_call(&req, &call, &allow, err, sizeof(err)) == 415, "limit body");
	free(big);
}

static void test_path_safe(void)
{
	static const struct {
		const char *path;
		bool safe;
	} rows[] = {
	    {"/", true},        {"/metrics", true},     {"/a/b/", true},   {"/a%2Fb", true},
	    {"/a..b", true},    {"/.well-known", true}, {"", false},       {"metrics", false},
	    {"/..", false},     {"/a/../b", false},     {"/a/./b", false}, {"/a/%2e%2e/b", false},
	    {"/a/.%2E", false}, {"/%00", false},        {"/%", false},     {"/%a", false},
	    {"/%ag", false},    {"/a/..", false},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++)
		CHECK(ctl_http_path_safe(rows[i].path) == rows[i].safe, "'%s': want %s",
		      rows[i].path, rows[i].safe ? "safe" : "refused");
}

static void test_status_of(void)
{
	CHECK(ctl_http_status_of(STEER_EINVAL) == 400, "EINVAL");
	CHECK(ctl_http_status_of(STEER_ERANGE) == 400, "ERANGE");
	CHECK(ctl_http_status_of(STEER_ENOENT) == 404, "ENOENT");
	CHECK(ctl_http_status_of(STEER_EACCES) == 403, "EACCES");
	CHECK(ctl_http_status_of(STEER_ECONF) == 500, "ECONF: a reload's error");
	CHECK(ctl_http_status_of(STEER_EZONE) == 500, "EZONE");
	CHECK(ctl_http_status_of(STEER_ENOMEM) == 500, "ENOMEM");
	CHECK(ctl_http_status_of(-EIO) == 500, "EIO");
}

/* ---- the token ------------------------------------------------------------------------- */

static void test_token_equal(void)
{
	CHECK(ctl_http_token_equal("s3cret", "s3cret", 6), "same");
	CHECK(!ctl_http_token_equal("s3cret", "s3creT", 6), "last byte differs");
	CHECK(!ctl_http_token_equal("s3cret", "x3cret", 6), "first byte differs");
	CHECK(!ctl_http_token_equal("s3cret", "s3cre", 5), "prefix");
	CHECK(!ctl_http_token_equal("s3cret", "s3cretX", 7), "longer");
	CHECK(!ctl_http_token_equal("s3cret", "s3cret\0", 7), "NUL appended");
	CHECK(!ctl_http_token_equal("s3cret", "", 0), "empty");
	CHECK(ctl_http_token_equal("s3cret", "s3cretXYZ", 6), "length bounds the compare");
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd >= 0) {
		if (write(fd, text, strlen(text)) < 0)
			perror("write");
		fchmod(fd, mode);
		close(fd);
	}
}

static void test_token_read(void)
{
	char dir[] = "/tmp/steer-test-token-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char long_token[CTL_HTTP_TOKEN_MAX + 3];
	memset(long_token, 'a', CTL_HTTP_TOKEN_MAX + 1);
	long_token[CTL_HTTP_TOKEN_MAX + 1] = '\n';
	long_token[CTL_HTTP_TOKEN_MAX + 2] = '\0';
	static const struct {
		const char *name, *text;
		mode_t mode;
		int ret;
		const char *want; /* the token, or a piece of the error */
	} rows[] = {
	    {"good", "s3cret-token-0123\n", 0600, 0, "s3cret-token-0123"},
	    {"group", "s3cret-token-0123\n", 0640, 0, "s3cret-token-0123"},
	    {"nonl", "s3cret-token-0123", 0400, 0, "s3cret-token-0123"},
	    {"crlf", "s3cret-token-0123\r\nsecond line\n", 0600, 0, "s3cret-token-0123"},
	    {"trailing", "s3cret-token-0123  \t\n", 0600, 0, "s3cret-token-0123"},
	    {"inner", "two words and more\n", 0600, 0, "two words and more"},
	    {"sixteen", "0123456789abcdef\n", 0600, 0, "0123456789abcdef"},
	    {"world", "s3cret-token-0123\n", 0644, STEER_EACCES,
	     "readable or writable by everyone (mode 0644)"},
	    {"worldw", "s3cret-token-0123\n", 0602, STEER_EACCES, "by everyone"},
	    {"empty", "", 0600, STEER_EINVAL, "the first line must hold a token of 16..1024"},
	    {"blank", "\nsecond line of the file\n", 0600, STEER_EINVAL,
	     "the first line must hold a token"},
	    {"short", "0123456789abcde\n", 0600, STEER_EINVAL, "not 15"},
	    {"ctrl",
	     "s3cret-tok\x01"
	     "en-0123\n",
	     0600, STEER_EINVAL, "control character"},
	    {"long", NULL, 0600, STEER_EINVAL, "not 1025"},
	};
	char path[256], token[CTL_HTTP_TOKEN_MAX + 1], err[512];
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, rows[i].name);
		write_file(path, rows[i].text ? rows[i].text : long_token, rows[i].mode);
		err[0] = token[0] = '\0';
		int ret = ctl_http_token_read(path, token, sizeof(token), err, sizeof(err));
		CHECK(ret == rows[i].ret, "%s: ret %d, want %d (%s)", rows[i].name, ret,
		      rows[i].ret, err);
		if (rows[i].ret == 0)
			CHECK(strcmp(token, rows[i].want) == 0, "%s: token '%s'", rows[i].name,
			      token);
		else
			CHECK(strstr(err, rows[i].want) && strstr(err, path), "%s: error '%s'",
			      rows[i].name, err);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/missing", dir);
	CHECK(ctl_http_token_read(path, token, sizeof(token), err, sizeof(err)) == STEER_ENOENT &&
	          strstr(err, "missing"),
	      "missing file: %s", err);
	CHECK(ctl_http_token_read(dir, token, sizeof(token), err, sizeof(err)) != 0 &&
	          strstr(err, "not a regular file"),
	      "a folder: %s", err);
	if (geteuid() != 0) {
		snprintf(path, sizeof(path), "%s/unreadable", dir);
		write_file(path, "s3cret-token-0123\n", 0200);
		CHECK(ctl_http_token_read(path, token, sizeof(token), err, sizeof(err)) ==
		          STEER_EACCES,
		      "unreadable: %s", err);
		unlink(path);
	}
	rmdir(dir);
}

/* ---- a real server --------------------------------------------------------------------- */

typedef struct {
	char did[256];
} rec_t;

static rec_t rec;

static int be_status(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	(void)err;
	(void)errlen;
	*data = json_pack("{s:s}", "version", "test");
	return 0;
}

static int be_reload(void *ctx, bool force, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	(void)data;
	snprintf(rec.did, sizeof(rec.did), "reload%s", force ? " force" : "");
	if (force) {
		snprintf(err, errlen, "nets/isp.nets: No such file or directory");
		return STEER_ENOENT;
	}
	snprintf(err, errlen, "steer.yaml:3: unknown key 'lisen'");
	return STEER_ECONF;
}

static int be_override(void *ctx, const ctl_override_req_t *req, json_t **data, char *err,
                       size_t errlen)
{
	(void)ctx;
	(void)err;
	(void)errlen;
	snprintf(rec.did, sizeof(rec.did), "override %s %s %u", req->pattern,
	         req->down ? "down" : "up", req->for_ms);
	*data = json_pack("{s:s}", "pattern", req->pattern);
	return 0;
}

static int be_health(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	if (pattern && strcmp(pattern, "missing") == 0) {
		snprintf(err, errlen, "no target matches 'missing'");
		return STEER_ENOENT;
	}
	*data = json_pack("[s?]", pattern);
	return 0;
}

static const ctl_backend_t backend = {
    .status = be_status, .reload = be_reload, .override = be_override, .health = be_health};

static const char metrics_text[] = "steer_up 1\n";

static int page_metrics(const char *path, ctl_http_page_t *page, char *err, size_t errlen,
                        void *ctx)
{
	(void)path;
	(void)err;
	(void)errlen;
	(void)ctx;
	page->content_type = "text/plain; version=0.0.4; charset=utf-8";
	page->body = metrics_text;
	page->len = sizeof(metrics_text) - 1;
	page->etag = "\"m1\"";
	return 0;
}

static int page_root(const char *path, ctl_http_page_t *page, char *err, size_t errlen, void *ctx)
{
	(void)err;
	(void)errlen;
	(void)ctx;
	char *body = malloc(256);
	snprintf(body, 256, "<p>root page for %s</p>", path);
	page->content_type = "text/html; charset=utf-8";
	page->body = body;
	page->len = strlen(body);
	page->free_body = free;
	page->cache_control = "max-age=60";
	page->csp = "default-src 'self'";
	if (strcmp(path, "/nope") == 0)
		page->status = 404;
	return 0;
}

static int page_fail(const char *path, ctl_http_page_t *page, char *err, size_t errlen, void *ctx)
{
	(void)path;
	(void)page;
	(void)ctx;
	snprintf(err, errlen, "the page broke");
	return STEER_ENOMEM;
}

/* A body far larger than a socket buffer: MHD must keep writing it across loop turns. */
#define BIG_PAGE_LEN (3u << 20)

static int page_big(const char *path, ctl_http_page_t *page, char *err, size_t errlen, void *ctx)
{
	(void)path;
	(void)err;
	(void)errlen;
	(void)ctx;
	char *body = malloc(BIG_PAGE_LEN);
	for (size_t i = 0; i < BIG_PAGE_LEN; i++)
		body[i] = (char)('a' + i % 26);
	page->content_type = "text/plain";
	page->body = body;
	page->len = BIG_PAGE_LEN;
	page->free_body = free;
	return 0;
}

/* GET @p path and count the body's bytes, checking the pattern page_big() wrote. */
static size_t get_big(uint16_t port, const char *path)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct timeval tv = {.tv_sec = 5};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		close(fd);
		return 0;
	}
	char req[256];
	int n = snprintf(req, sizeof(req),
	                 "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", path);
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		close(fd);
		return 0;
	}
	char buf[65536];
	size_t body = 0, head_seen = 0;
	bool in_body = false, pattern_ok = true;
	ssize_t got;
	while ((got = recv(fd, buf, sizeof(buf), 0)) > 0) {
		for (ssize_t i = 0; i < got; i++) {
			if (in_body) {
				pattern_ok &= buf[i] == (char)('a' + body % 26);
				body++;
			} else {
				/* the end of the head: "\r\n\r\n" */
				head_seen = (buf[i] == (head_seen % 2 ? '\n' : '\r'))
				                ? head_seen + 1
				                : buf[i] == '\r';
				in_body = head_seen == 4;
			}
		}
	}
	close(fd);
	return pattern_ok ? body : 0;
}

typedef struct {
	struct ev_loop *loop;
	ev_async stop_w;
	pthread_t thread;
} loop_thread_t;

static void on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

static void *loop_main(void *arg)
{
	loop_thread_t *lt = arg;
	ev_run(lt->loop, 0);
	return NULL;
}

static void loop_start(loop_thread_t *lt)
{
	pthread_create(&lt->thread, NULL, loop_main, lt);
}

static void loop_stop(loop_thread_t *lt)
{
	ev_async_send(lt->loop, &lt->stop_w);
	pthread_join(lt->thread, NULL);
}

typedef struct {
	unsigned status;
	char head[4096];
	char body[4096];
} reply_t;

/* Send @p request raw to 127.0.0.1:@p port and read the reply until the server closes. */
static int http_raw(uint16_t port, const char *request, size_t len, reply_t *r)
{
	memset(r, 0, sizeof(*r));
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct timeval tv = {.tv_sec = 5};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		close(fd);
		return -1;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = send(fd, request + off, len - off, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	shutdown(fd, SHUT_WR);
	static char buf[65536];
	size_t used = 0;
	ssize_t n;
	while (used < sizeof(buf) - 1 && (n = recv(fd, buf + used, sizeof(buf) - 1 - used, 0)) > 0)
		used += (size_t)n;
	buf[used] = '\0';
	close(fd);
	char *end = strstr(buf, "\r\n\r\n");
	if (end == NULL || sscanf(buf, "HTTP/1.%*d %u", &r->status) != 1)
		return -1;
	snprintf(r->head, sizeof(r->head), "%.*s", (int)(end - buf), buf);
	snprintf(r->body, sizeof(r->body), "%s", end + 4);
	return 0;
}

static int http(uint16_t port, const char *method, const char *target, const char *headers,
                const char *body, reply_t *r)
{
	size_t size =
	    256 + strlen(target) + (headers ? strlen(headers) : 0) + (body ? strlen(body) : 0);
	char *req = malloc(size);
	int n = snprintf(req, size,
	                 "%s %s HTTP/1.1\r\nHost: test\r\nConnection: close\r\n%s"
	                 "Content-Length: %zu\r\n\r\n%s",
	                 method, target, headers ? headers : "", body ? strlen(body) : 0,
	                 body ? body : "");
	int ret = n > 0 && (size_t)n < size ? http_raw(port, req, (size_t)n, r) : -1;
	free(req);
	return ret;
}

static bool has_header(const reply_t *r, const char *line)
{
	return strcasestr(r->head, line) != NULL;
}

#define AUTH "Authorization: Bearer t0ken-of-16-bytes\r\n"

static void check_api(uint16_t port)
{
	reply_t r;
	CHECK(http(port, "GET", "/api/v1/status", NULL, NULL, &r) == 0 && r.status == 200 &&
	          strcmp(r.body, "{\"ok\":true,\"data\":{\"version\":\"test\"}}\n") == 0,
	      "status: %u %s", r.status, r.body);
	CHECK(has_header(&r, "Content-Type: application/json") &&
	          has_header(&r, "X-Content-Type-Options: nosniff") &&
	          has_header(&r, "Cache-Control: no-store") &&
	          has_header(&r, "Content-Security-Policy: default-src 'none'"),
	      "API headers: %s", r.head);
	CHECK(http(port, "GET", "/api/v1/health?arg=svc%2F*", NULL, NULL, &r) == 0 &&
	          r.status == 200 && strstr(r.body, "[\"svc/*\"]"),
	      "query arg: %u %s", r.status, r.body);
	CHECK(http(port, "GET", "/api/v1/health?arg=\xff", NULL, NULL, &r) == 0 &&
	          r.status == 400 && strstr(r.body, "not UTF-8"),
	      "raw byte in a query value: %u %s", r.status, r.body);
	CHECK(http(port, "GET", "/api/v1/health?\xff=1", NULL, NULL, &r) == 0 && r.status == 400,
	      "raw byte in a query key: %u %s", r.status, r.body);
	CHECK(http(port, "GET", "/api/v1/health/a+b?arg=c+d", NULL, NULL, &r) == 0 &&
	          r.status == 400 && strstr(r.body, "usage: health"),
	      "two arguments: %u %s", r.status, r.body);
	CHECK(http(port, "GET", "/api/v1/health?arg=c+d", NULL, NULL, &r) == 0 && r.status == 200 &&
	          strstr(r.body, "[\"c d\"]"),
	      "'+' in a query value is a space: %u %s", r.status, r.body);
	CHECK(http(port, "GET", "/api/v1/health/missing", NULL, NULL, &r) == 0 && r.status == 404 &&
	          strstr(r.body, "\"ok\":false") && strstr(r.body, "no target matches"),
	      "backend ENOENT: %u %s", r.status, r.body);
	CHECK(http(port, "GET", "/api/v1/bogus", NULL, NULL, &r) == 0 && r.status == 404 &&
	          strstr(r.body, "unknown command 'bogus'"),
	      "unknown command: %u %s", r.status, r.body);
	/* mutating: method, then the token */
	CHECK(http(port, "GET", "/api/v1/override/set/a%2Fb/down", AUTH, NULL, &r) == 0 &&
	          r.status == 405 && has_header(&r, "Allow: POST"),
	      "GET of a mutating command: %u %s", r.status, r.head);
	CHECK(http(port, "POST", "/api/v1/override/set/a%2Fb/down", NULL, NULL, &r) == 0 &&
	          r.status == 401 && has_header(&r, "WWW-Authenticate: Bearer realm=\"steer\""),
	      "no token: %u %s", r.status, r.head);
	CHECK(http(port, "POST", "/api/v1/override/set/a%2Fb/down",
	           "Authorization: Bearer t0ken-of-16-bytez\r\n", NULL, &r) == 0 &&
	          r.status == 401 && has_header(&r, "error=\"invalid_token\""),
	      "wrong token of equal length: %u %s", r.status, r.head);
	CHECK(http(port, "POST", "/api/v1/override/set/a%2Fb/down",
	           "Authorization: Basic dDB rZW4=\r\n", NULL, &r) == 0 &&
	          r.status == 401,
	      "another scheme: %u", r.status);
	rec.did[0] = '\0';
	CHECK(http(port, "POST", "/api/v1/override/set/a%2Fb/down/2s", AUTH, NULL, &r) == 0 &&
	          r.status == 200 && strcmp(rec.did, "override a/b down 2000") == 0,
	      "authorised override: %u %s, did '%s'", r.status, r.body, rec.did);
	CHECK(http(port, "POST", "/api/v1/override", AUTH "Content-Type: application/json\r\n",
	           "{\"args\": [\"set\", \"c/*\", \"up\"]}", &r) == 0 &&
	          r.status == 200 && strcmp(rec.did, "override c/* up 0") == 0,
	      "args in the body: %u %s, did '%s'", r.status, r.body, rec.did);
	CHECK(http(port, "POST", "/api/v1/reload", AUTH, NULL, &r) == 0 && r.status == 500 &&
	          strstr(r.body, "steer.yaml:3: unknown key 'lisen'"),
	      "reload error: %u %s", r.status, r.body);
	CHECK(http(port, "POST", "/api/v1/reload/--force", AUTH, NULL, &r) == 0 &&
	          r.status == 500 && strstr(r.body, "nets/isp.nets"),
	      "a reload's missing file is the server's failure, not a 404: %u %s", r.status,
	      r.body);
	CHECK(http(port, "POST", "/api/v1/reload/--now", AUTH, NULL, &r) == 0 && r.status == 400,
	      "a bad reload option is the client's: %u %s", r.status, r.body);
	CHECK(http(port, "POST", "/api/v1/reload", AUTH "Content-Type: text/plain\r\n", "x", &r) ==
	              0 &&
	          r.status == 415,
	      "text body: %u", r.status);
	CHECK(http(port, "POST", "/api/v1/reload", AUTH "Content-Type: application/json\r\n",
	           "{bad", &r) == 0 &&
	          r.status == 415 && strstr(r.body, "not JSON"),
	      "bad JSON: %u %s", r.status, r.body);
	CHECK(http(port, "GET", "/api/v1/../status", NULL, NULL, &r) == 0 && r.status == 400,
	      "dot-dot: %u", r.status);
	CHECK(http(port, "PATCH", "/api/v1/status", NULL, NULL, &r) == 0 && r.status == 405 &&
	          has_header(&r, "Allow: GET, HEAD, POST"),
	      "PATCH: %u %s", r.status, r.head);
	/* An announced body over the limit is refused before it is read. */
	const char big_head[] = "POST /api/v1/reload HTTP/1.1\r\nHost: t\r\nContent-Length: "
	                        "1000000\r\nConnection: close\r\n\r\n";
	CHECK(http_raw(port, big_head, sizeof(big_head) - 1, &r) == 0 && r.status == 413,
	      "announced big body: %u", r.status);
	/* A chunked body over the limit: read and dropped, then refused. */
	size_t chunk = 16384, n_chunks = 6;
	char *req = malloc(256 + n_chunks * (chunk + 16));
	size_t used =
	    (size_t)sprintf(req, "POST /api/v1/reload HTTP/1.1\r\nHost: t\r\n"
	                         "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
	for (size_t i = 0; i < n_chunks; i++) {
		used += (size_t)sprintf(req + used, "%zx\r\n", chunk);
		memset(req + used, ' ', chunk);
		used += chunk;
		used += (size_t)sprintf(req + used, "\r\n");
	}
	used += (size_t)sprintf(req + used, "0\r\n\r\n");
	CHECK(http_raw(port, req, used, &r) == 0 && r.status == 413, "chunked big body: %u",
	      r.status);
	free(req);
	/* Headers beyond the connection's memory: MHD refuses them (431 or 414). */
	char *huge = malloc(40000);
	memset(huge, 'x', 39990);
	memcpy(huge, "X-Big: ", 7);
	memcpy(huge + 39990, "\r\n", 3);
	CHECK(http(port, "GET", "/api/v1/status", huge, NULL, &r) != 0 ||
	          (r.status >= 400 && r.status < 500),
	      "huge header: %u", r.status);
	free(huge);
}

static void check_pages(uint16_t port)
{
	reply_t r;
	CHECK(http(port, "GET", "/metrics", NULL, NULL, &r) == 0 && r.status == 200 &&
	          strcmp(r.body, metrics_text) == 0 &&
	          has_header(&r, "Content-Type: text/plain; version=0.0.4") &&
	          has_header(&r, "ETag: \"m1\"") && has_header(&r, "nosniff"),
	      "metrics: %u %s", r.status, r.head);
	CHECK(http(port, "GET", "/metrics", "If-None-Match: \"m0\", \"m1\"\r\n", NULL, &r) == 0 &&
	          r.status == 304 && r.body[0] == '\0',
	      "If-None-Match: %u", r.status);
	CHECK(http(port, "GET", "/metrics", "If-None-Match: \"m2\"\r\n", NULL, &r) == 0 &&
	          r.status == 200,
	      "other ETag: %u", r.status);
	CHECK(http(port, "HEAD", "/metrics", NULL, NULL, &r) == 0 && r.status == 200 &&
	          r.body[0] == '\0' && has_header(&r, "Content-Length: 11"),
	      "HEAD: %u %s", r.status, r.head);
	CHECK(http(port, "POST", "/metrics", NULL, NULL, &r) == 0 && r.status == 405 &&
	          has_header(&r, "Allow: GET, HEAD"),
	      "POST to a page: %u", r.status);
	CHECK(http(port, "GET", "/metrics/x", NULL, NULL, &r) == 0 &&
	          strstr(r.body, "root page for /metrics/x"),
	      "exact page does not cover below it: %u %s", r.status, r.body);
	CHECK(http(port, "GET", "/?refresh=1", NULL, NULL, &r) == 0 && r.status == 200 &&
	          strcmp(r.body, "<p>root page for /</p>") == 0 &&
	          has_header(&r, "Cache-Control: max-age=60") &&
	          has_header(&r, "Content-Security-Policy: default-src 'self'"),
	      "root: %u %s %s", r.status, r.head, r.body);
	CHECK(http(port, "GET", "/nope", NULL, NULL, &r) == 0 && r.status == 404 &&
	          strstr(r.body, "root page"),
	      "page's own 404: %u", r.status);
	CHECK(http(port, "GET", "/fail/x", NULL, NULL, &r) == 0 && r.status == 500 &&
	          strstr(r.body, "the page broke"),
	      "failing page: %u %s", r.status, r.body);
	CHECK(http(port, "GET", "/static/../metrics", NULL, NULL, &r) == 0 && r.status == 400,
	      "dot-dot page: %u", r.status);
	CHECK(get_big(port, "/big") == BIG_PAGE_LEN, "a 3 MiB page arrives whole");
	CHECK(http(port, "GET", "/api/v2/x", NULL, NULL, &r) == 0 && r.status == 200 &&
	          strstr(r.body, "root page"),
	      "only /api/v1 is the API: %u", r.status);
}

static void check_closed(uint16_t port)
{
	reply_t r;
	/* read-only-open false: reads need the token too, pages included */
	CHECK(http(port, "GET", "/api/v1/status", NULL, NULL, &r) == 0 && r.status == 401,
	      "closed status: %u", r.status);
	CHECK(http(port, "GET", "/metrics", NULL, NULL, &r) == 0 && r.status == 401,
	      "closed page: %u", r.status);
	CHECK(http(port, "GET", "/api/v1/status", AUTH, NULL, &r) == 0 && r.status == 200,
	      "closed status with token: %u", r.status);
}

static void check_no_token(uint16_t port)
{
	reply_t r;
	CHECK(http(port, "POST", "/api/v1/reload", AUTH, NULL, &r) == 0 && r.status == 403 &&
	          strstr(r.body, "no http token-file configured"),
	      "no token configured: %u %s", r.status, r.body);
	CHECK(http(port, "GET", "/api/v1/status", NULL, NULL, &r) == 0 && r.status == 200,
	      "reads still open: %u", r.status);
}

static void test_server(void)
{
	loop_thread_t lt = {.loop = ev_loop_new(EVFLAG_AUTO)};
	ev_async_init(&lt.stop_w, on_stop);
	ev_async_start(lt.loop, &lt.stop_w);
	steer_sockaddr_t addr;
	CHECK(steer_sockaddr_parse("127.0.0.1:0", 0, &addr) == 0, "addr");
	ctl_http_opts_t opts = {
	    .listen = &addr, .n_listen = 1, .token = "t0ken-of-16-bytes", .read_only_open = true};
	ctl_http_t *http_srv = NULL;
	char err[256] = "";
	CHECK(ctl_http_start(&http_srv, lt.loop, &opts, &backend, err, sizeof(err)) == 0,
	      "start: %s", err);
	if (http_srv == NULL)
		return;
	uint16_t port = ctl_http_port(http_srv, 0);
	CHECK(port != 0 && ctl_http_port(http_srv, 1) == 0, "bound port %u", port);
	CHECK(ctl_http_add_page(http_srv, "/metrics", page_metrics, NULL) == 0, "add /metrics");
	CHECK(ctl_http_add_page(http_srv, "/", page_root, NULL) == 0, "add /");
	CHECK(ctl_http_add_page(http_srv, "/fail/", page_fail, NULL) == 0, "add /fail/");
	CHECK(ctl_http_add_page(http_srv, "/big", page_big, NULL) == 0, "add /big");
	CHECK(ctl_http_add_page(http_srv, "/metrics", page_metrics, NULL) == STEER_EEXIST,
	      "duplicate page");
	CHECK(ctl_http_add_page(http_srv, "/api/v1/x", page_metrics, NULL) == STEER_EINVAL,
	      "page under /api/");
	CHECK(ctl_http_add_page(http_srv, "metrics", page_metrics, NULL) == STEER_EINVAL,
	      "relative page");
	CHECK(ctl_http_add_page(NULL, "/x", page_metrics, NULL) == 0, "no server: ignored");

	/* The same port twice: the second start fails and says where. */
	steer_sockaddr_t same = addr;
	same.sin.sin_port = htons(port);
	ctl_http_opts_t dup = {.listen = &same, .n_listen = 1};
	ctl_http_t *second = NULL;
	CHECK(ctl_http_start(&second, lt.loop, &dup, &backend, err, sizeof(err)) != 0 &&
	          second == NULL && strstr(err, "cannot listen on 127.0.0.1:"),
	      "port in use: %s", err);

	loop_start(&lt);
	check_api(port);
	check_pages(port);
	loop_stop(&lt);

	ctl_http_reconfigure(http_srv, &(ctl_http_opts_t){.token = "t0ken-of-16-bytes"});
	loop_start(&lt);
	check_closed(port);
	loop_stop(&lt);

	ctl_http_reconfigure(http_srv, &(ctl_http_opts_t){.token = NULL, .read_only_open = true});
	loop_start(&lt);
	check_no_token(port);
	loop_stop(&lt);

	ctl_http_stop(http_srv);
	reply_t r;
	CHECK(http(port, "GET", "/api/v1/status", NULL, NULL, &r) != 0, "stopped: nothing listens");
	ev_loop_destroy(lt.loop);
}

int main(void)
{
	log_setup(LOG_TARGET_STDERR, LOG_LEVEL_WARNING);
	test_parse();
	test_path_safe();
	test_status_of();
	test_token_equal();
	test_token_read();
	test_server();
	return unit_finish("test_ctl_http");
}
