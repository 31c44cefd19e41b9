/*
 * The HTTP front end (see http.h): libmicrohttpd without threads of its own, one daemon per
 * listen address, each daemon's epoll descriptor in a libev io watcher and its timeout in a
 * libev timer of the control loop. Requests go through the pure parser below, the token
 * check, then ctl_dispatch() on the backend the UNIX socket serves, or to a registered page.
 * Only the control thread touches this state.
 */
#include "ctl/http.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ev.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"

#define API_PREFIX "/api/v1"
/* No command takes more than a few arguments; more is a client bug, not a call to match. */
#define CALL_ARGS_MAX 16
/*
 * Client limits, so that a few clients cannot starve the control thread or its descriptors:
 * connections in all (below the default RLIMIT_NOFILE of 1024, which the query sockets and
 * monitors share), per client address (a status page and a scraper need a handful), seconds a
 * connection may stay idle, and the memory of one connection's request line and headers (MHD
 * answers 414 or 431 beyond it; no honest request needs a tenth of it).
 */
#define CONN_MAX        256u
#define CONN_PER_IP_MAX 64u
#define CONN_IDLE_S     10u
#define CONN_MEMORY_MAX (16u * 1024u)
#define DEFAULT_CSP     "default-src 'none'; frame-ancestors 'none'"
#define DEFAULT_CACHE   "no-store"
#define API_ALLOW       "GET, HEAD, POST"
#define PAGE_ALLOW      "GET, HEAD"
#define ERR_TEXT_MAX    4096

typedef struct {
	char *path; /* owned */
	size_t len;
	bool prefix; /* @c path ends in '/': serves every path below it */
	ctl_http_page_cb cb;
	void *ctx;
	bool open; /* served without a token whatever read-only-open says */
} http_page_t;

typedef struct {
	struct MHD_Daemon *mhd;
	ev_io io;
	ev_timer timer;
	ctl_http_t *http;
} http_listener_t;

struct ctl_http {
	struct ev_loop *loop;
	const ctl_backend_t *backend;
	http_listener_t *listeners;
	size_t n_listeners;
	http_page_t *pages;
	size_t n_pages;
	char *token; /* owned; NULL = none */
	bool read_only_open;
};

/* One request in flight: its body, collected up to the limit. */
typedef struct {
	char *body;
	size_t len;
	bool too_large;
} http_conn_t;

/* ---- the request parser ---------------------------------------------------------------- */

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * Percent-decode the @p len bytes of @p text into @p out (at least @p len + 1 bytes).
 * Returns the decoded length, or -1 for a bad escape or a NUL (no argument may hold one).
 */
static long percent_decode(const char *text, size_t len, char *out)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (c == '%') {
			int hi = i + 2 < len ? hex_value(text[i + 1]) : -1;
			int lo = i + 2 < len ? hex_value(text[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return -1;
			c = (char)(hi << 4 | lo);
			i += 2;
		}
		if (c == '\0')
			return -1;
		out[n++] = c;
	}
	out[n] = '\0';
	return (long)n;
}

bool ctl_http_path_safe(const char *path)
{
	if (path[0] != '/')
		return false;
	const char *seg = path + 1;
	for (;;) {
		size_t len = strcspn(seg, "/");
		char *dec = xmalloc(len + 1);
		long n = percent_decode(seg, len, dec);
		bool bad = n < 0 || strcmp(dec, ".") == 0 || strcmp(dec, "..") == 0;
		free(dec);
		if (bad)
			return false;
		if (seg[len] == '\0')
			return true;
		seg += len + 1;
	}
}

/* Append the decoded @p len bytes of @p text to @p args as a string. */
static unsigned args_append(json_t *args, const char *what, const char *text, size_t len, char *err,
                            size_t errlen)
{
	if (json_array_size(args) >= CALL_ARGS_MAX) {
		snprintf(err, errlen, "too many arguments (at most %d)", CALL_ARGS_MAX);
		return 400;
	}
	char *dec = xmalloc(len + 1);
	long n = percent_decode(text, len, dec);
	json_t *s = n < 0 ? NULL : json_stringn(dec, (size_t)n);
	free(dec);
	if (n < 0) {
		snprintf(err, errlen, "%s: bad percent-encoding (want %%XX, no %%00)", what);
		return 400;
	}
	if (s == NULL) {
		snprintf(err, errlen, "%s: not UTF-8", what);
		return 400;
	}
	json_array_append_new(args, s);
	return 0;
}

/* The command and path arguments: the segments after "/api/v1/". */
static unsigned parse_path(const char *path, char **cmd, json_t *args, char *err, size_t errlen)
{
	const char *p = path + strlen(API_PREFIX);
	if (*p == '/')
		p++;
	size_t cmd_len = strcspn(p, "/");
	if (cmd_len == 0) {
		snprintf(err, errlen, "no command: use %s/<command>[/<argument>...]", API_PREFIX);
		return 404;
	}
	*cmd = xmalloc(cmd_len + 1);
	if (percent_decode(p, cmd_len, *cmd) < 0) {
		snprintf(err, errlen, "command: bad percent-encoding");
		return 400;
	}
	p += cmd_len;
	while (*p == '/') {
		p++;
		size_t len = strcspn(p, "/");
		if (len == 0 && p[len] == '\0')
			break; /* one trailing slash */
		if (len == 0) {
			snprintf(err, errlen,
			         "empty path segment (an empty argument is never valid)");
			return 400;
		}
		unsigned st = args_append(args, "path segment", p, len, err, errlen);
		if (st != 0)
			return st;
		p += len;
	}
	return 0;
}

static unsigned parse_query(const ctl_http_request_t *req, json_t *args, char *err, size_t errlen)
{
	for (size_t i = 0; i < req->n_query; i++) {
		const ctl_http_query_t *q = &req->query[i];
		if (strcmp(q->key, "arg") != 0) {
			snprintf(err, errlen,
			         "unknown query parameter '%.64s' (the only one is arg=)", q->key);
			return 400;
		}
		if (q->value == NULL) {
			snprintf(err, errlen, "query parameter arg needs a value (arg=VALUE)");
			return 400;
		}
		unsigned st = args_append(args, "arg=", q->value, strlen(q->value), err, errlen);
		if (st != 0)
			return st;
	}
	return 0;
}

static bool is_json_type(const char *type)
{
	static const char json_type[] = "application/json";
	size_t n = sizeof(json_type) - 1;
	if (strncasecmp(type, json_type, n) != 0)
		return false;
	return type[n] == '\0' || type[n] == ';' || type[n] == ' ';
}

/* {"args": ["...", ...]}: every element a string, no other key. */
static unsigned parse_body(const ctl_http_request_t *req, json_t *args, char *err, size_t errlen)
{
	if (req->body_len == 0)
		return 0;
	if (req->body_len > CTL_HTTP_BODY_MAX) {
		snprintf(err, errlen, "body over %u bytes", CTL_HTTP_BODY_MAX);
		return 413;
	}
	if (strcmp(req->method, "POST") != 0) {
		snprintf(err, errlen, "only a POST has a body");
		return 400;
	}
	if (req->content_type != NULL && !is_json_type(req->content_type)) {
		snprintf(err, errlen, "body must be application/json, not '%.64s'",
		         req->content_type);
		return 415;
	}
	json_error_t jerr;
	json_t *body = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
	if (body == NULL) {
		/* Not JSON at all is the media type's fault (415); a repeated key is JSON whose
		 * meaning would depend on the parser, refused like any other bad shape (400). */
		snprintf(err, errlen, "body: not JSON at line %d column %d: %s", jerr.line,
		         jerr.column, jerr.text);
		return json_error_code(&jerr) == json_error_duplicate_key ? 400 : 415;
	}
	unsigned st = 0;
	json_t *list = json_object_get(body, "args");
	if (!json_is_object(body) || json_object_size(body) != (list != NULL) ||
	    (list != NULL && !json_is_array(list))) {
		snprintf(err, errlen, "body must be {\"args\": [\"...\", ...]}");
		st = 400;
	}
	size_t i;
	json_t *v;
	json_array_foreach(st == 0 ? list : NULL, i, v)
	{
		if (!json_is_string(v)) {
			snprintf(err, errlen, "body: args[%zu] is not a string", i);
			st = 400;
			break;
		}
		if (json_array_size(args) >= CALL_ARGS_MAX) {
			snprintf(err, errlen, "too many arguments (at most %d)", CALL_ARGS_MAX);
			st = 400;
			break;
		}
		json_array_append(args, v);
	}
	json_decref(body);
	return st;
}

static bool command_known(const char *name)
{
	size_t n;
	const ctl_command_t *table = ctl_command_table(&n);
	for (size_t i = 0; i < n; i++)
		if (strcmp(table[i].name, name) == 0)
			return true;
	return false;
}

/* Match the command table: 404 for an unknown name, 400 for wrong arguments. */
static unsigned match_row(ctl_http_call_t *call, char *err, size_t errlen)
{
	const char *argv[CALL_ARGS_MAX];
	size_t argc = json_array_size(call->args);
	for (size_t i = 0; i < argc; i++)
		argv[i] = json_string_value(json_array_get(call->args, i));
	call->row = ctl_command_match(call->cmd, argv, argc, err, errlen);
	if (call->row != NULL)
		return 0;
	return command_known(call->cmd) ? 400 : 404;
}

/*
 * What a reload fails at is the server's own (its configuration, zone, nets and token files),
 * never the request's, so its errors are 500; its one option is checked here, so that a bad
 * one is still the client's 400.
 */
static bool is_reload(const ctl_command_t *row)
{
	return strcmp(row->name, "reload") == 0;
}

static unsigned check_reload(const ctl_http_call_t *call, char *err, size_t errlen)
{
	const char *opt = json_string_value(json_array_get(call->args, 0));
	if (!is_reload(call->row) || opt == NULL || strcmp(opt, "--force") == 0)
		return 0;
	snprintf(err, errlen, "reload: the only option is --force, not '%.64s'", opt);
	return 400;
}

/* "/api/v1" itself or anything below it. */
static bool is_api_path(const char *path)
{
	size_t n = strlen(API_PREFIX);
	return strncmp(path, API_PREFIX, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static unsigned parse_call(const ctl_http_request_t *req, ctl_http_call_t *call, const char **allow,
                           char *err, size_t errlen)
{
	bool post = strcmp(req->method, "POST") == 0;
	bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
	if (!post && !get) {
		snprintf(err, errlen, "method %.16s not allowed (use GET or POST)", req->method);
		*allow = API_ALLOW;
		return 405;
	}
	if (!ctl_http_path_safe(req->path)) {
		snprintf(err, errlen,
		         "bad path: a '.' or '..' segment, a NUL or bad percent-encoding");
		return 400;
	}
	if (!is_api_path(req->path)) {
		snprintf(err, errlen, "not an API path (the API is under %s/)", API_PREFIX);
		return 404;
	}
	call->args = json_array();
	unsigned st = parse_path(req->path, &call->cmd, call->args, err, errlen);
	if (st == 0)
		st = parse_query(req, call->args, err, errlen);
	if (st == 0)
		st = parse_body(req, call->args, err, errlen);
	if (st == 0)
		st = match_row(call, err, errlen);
	if (st == 0)
		st = check_reload(call, err, errlen);
	if (st == 0 && call->row->mutates && !post) {
		snprintf(err, errlen, "'%s%s%s' changes the server: use POST", call->cmd,
		         call->row->sub ? " " : "", call->row->sub ? call->row->sub : "");
		*allow = "POST";
		return 405;
	}
	return st;
}

unsigned ctl_http_parse_call(const ctl_http_request_t *req, ctl_http_call_t *call,
                             const char **allow, char *err, size_t errlen)
{
	memset(call, 0, sizeof(*call));
	*allow = NULL;
	unsigned st = parse_call(req, call, allow, err, errlen);
	if (st != 0)
		ctl_http_call_clear(call);
	return st;
}

void ctl_http_call_clear(ctl_http_call_t *call)
{
	free(call->cmd);
	json_decref(call->args);
	memset(call, 0, sizeof(*call));
}

unsigned ctl_http_status_of(int ret)
{
	switch (ret) {
	case STEER_EINVAL:
	case STEER_ERANGE:
	case STEER_ESYNTAX:
	case STEER_EMALF:
		return 400;
	case STEER_ENOENT:
		return 404;
	case STEER_EACCES:
		return 403;
	case STEER_EEXIST:
		return 409;
	default:
		return 500;
	}
}

/* ---- the token ------------------------------------------------------------------------- */

bool ctl_http_token_equal(const char *token, const char *given, size_t given_len)
{
	size_t len = strlen(token);
	/* Walk the token whatever @p given holds, so the time says nothing about where they
	 * differ; a length mismatch is folded in rather than returned early. */
	volatile unsigned char diff = len != given_len;
	for (size_t i = 0; i < len; i++)
		diff |= (unsigned char)token[i] ^ (unsigned char)(i < given_len ? given[i] : 0);
	return diff == 0;
}

static int token_check_file(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "http token-file %s: %s", path, steer_strerror(-errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "http token-file %s: not a regular file", path);
		return STEER_EINVAL;
	}
	if (st.st_mode & (S_IROTH | S_IWOTH)) {
		snprintf(err, errlen,
		         "http token-file %s: readable or writable by everyone (mode %04o): "
		         "chmod o-rw it",
		         path, (unsigned)(st.st_mode & 07777));
		return STEER_EACCES;
	}
	return 0;
}

int ctl_http_token_read(const char *path, char *token, size_t size, char *err, size_t errlen)
{
	char buf[CTL_HTTP_TOKEN_MAX + 2];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int ret = -errno;
		snprintf(err, errlen, "http token-file %s: %s", path, steer_strerror(ret));
		return ret;
	}
	int ret = token_check_file(fd, path, err, errlen);
	ssize_t n = ret == 0 ? read(fd, buf, sizeof(buf) - 1) : 0;
	if (n < 0) {
		ret = -errno;
		snprintf(err, errlen, "http token-file %s: %s", path, steer_strerror(ret));
	}
	close(fd);
	if (ret != 0)
		return ret;
	buf[n] = '\0';
	size_t len = strcspn(buf, "\r\n");
	while (len > 0 && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	buf[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if (!isgraph((unsigned char)buf[i]) && buf[i] != ' ') {
			snprintf(err, errlen,
			         "http token-file %s: the token has a control character", path);
			return STEER_EINVAL;
		}
	if (len < CTL_HTTP_TOKEN_MIN || len > CTL_HTTP_TOKEN_MAX || len >= size) {
		snprintf(err, errlen,
		         "http token-file %s: the first line must hold a token of %u..%u "
		         "characters (e.g. openssl rand -hex 32), not %zu",
		         path, CTL_HTTP_TOKEN_MIN, CTL_HTTP_TOKEN_MAX, len);
		return STEER_EINVAL;
	}
	memcpy(token, buf, len + 1);
	return 0;
}

/* ---- replies --------------------------------------------------------------------------- */

static void add_common_headers(struct MHD_Response *r, const char *csp, const char *cache)
{
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(r, "Content-Security-Policy", csp ? csp : DEFAULT_CSP);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, cache ? cache : DEFAULT_CACHE);
}

/* Queue @p reply (taken) as the JSON body with @p status, plus one extra header if given. */
static enum MHD_Result reply_json(struct MHD_Connection *conn, unsigned status, json_t *reply,
                                  const char *header, const char *value)
{
	char *text = json_dumps(reply, JSON_COMPACT);
	json_decref(reply);
	if (text == NULL)
		return MHD_NO;
	size_t len = strlen(text);
	text[len] = '\n';
	/* json_dumps' buffer holds the terminator, so the newline fits; MHD frees it. */
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(len + 1, text, MHD_RESPMEM_MUST_FREE);
	if (r == NULL) {
		free(text);
		return MHD_NO;
	}
	add_common_headers(r, NULL, NULL);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (header != NULL)
		MHD_add_response_header(r, header, value);
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_error(struct MHD_Connection *conn, unsigned status, const char *msg,
                                   const char *header, const char *value)
{
	json_t *reply = json_pack("{s:b, s:s}", "ok", 0, "error", msg);
	if (reply == NULL) /* not UTF-8: say so rather than nothing */
		reply = json_pack("{s:b, s:s}", "ok", 0, "error", "(error text not UTF-8)");
	return reply_json(conn, status, reply, header, value);
}

/* ---- authorisation --------------------------------------------------------------------- */

/*
 * 0 when the request may go on, else the status already queued (401 with a Bearer challenge,
 * 403 when no token is configured).
 */
static unsigned authorise(const ctl_http_t *http, struct MHD_Connection *conn, bool mutates,
                          enum MHD_Result *queued)
{
	if (!mutates && http->read_only_open)
		return 0;
	if (http->token == NULL) {
		*queued = reply_error(conn, 403,
		                      mutates ? "no http token-file configured: calls that change "
		                                "the server are refused over HTTP"
		                              : "no http token-file configured and read-only-open "
		                                "is false: nothing is served",
		                      NULL, NULL);
		return 403;
	}
	const char *auth =
	    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	static const char scheme[] = "Bearer ";
	if (auth == NULL || strncasecmp(auth, scheme, sizeof(scheme) - 1) != 0) {
		*queued = reply_error(conn, 401, "this call needs Authorization: Bearer <token>",
		                      MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"steer\"");
		return 401;
	}
	const char *given = auth + sizeof(scheme) - 1;
	if (!ctl_http_token_equal(http->token, given, strlen(given))) {
		*queued =
		    reply_error(conn, 401, "wrong bearer token", MHD_HTTP_HEADER_WWW_AUTHENTICATE,
		                "Bearer realm=\"steer\", error=\"invalid_token\"");
		return 401;
	}
	return 0;
}

/* ---- the API --------------------------------------------------------------------------- */

static void peer_str(struct MHD_Connection *conn, char *buf, size_t size)
{
	const union MHD_ConnectionInfo *info =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	snprintf(buf, size, "?");
	if (info != NULL && info->client_addr != NULL)
		(void)steer_sockaddr_str((const steer_sockaddr_t *)(const void *)info->client_addr,
		                         buf, size);
}

static void log_mutating(struct MHD_Connection *conn, const ctl_http_call_t *call, int ret,
                         const char *err)
{
	char peer[STEER_SOCKADDR_STRLEN];
	peer_str(conn, peer, sizeof(peer));
	char *args = json_dumps(call->args, JSON_COMPACT);
	if (ret == 0)
		log_notice("http: %s from %s: %s %s", call->cmd, peer, call->cmd, args ? args : "");
	else
		log_notice("http: %s from %s: %s %s failed: %s", call->cmd, peer, call->cmd,
		           args ? args : "", err);
	free(args);
}

static enum MHD_Result serve_call(ctl_http_t *http, struct MHD_Connection *conn,
                                  const ctl_http_call_t *call)
{
	enum MHD_Result queued = MHD_NO;
	if (authorise(http, conn, call->row->mutates, &queued) != 0)
		return queued;
	char err[ERR_TEXT_MAX] = "";
	json_t *data = NULL;
	int ret = ctl_dispatch(http->backend, call->cmd, call->args, 0, &data, err, sizeof(err));
	if (call->row->mutates)
		log_mutating(conn, call, ret, err);
	if (ret != 0) {
		json_decref(data);
		if (err[0] == '\0')
			snprintf(err, sizeof(err), "%s", steer_strerror(ret));
		unsigned status = is_reload(call->row) ? 500 : ctl_http_status_of(ret);
		return reply_error(conn, status, err, NULL, NULL);
	}
	json_t *reply = json_pack("{s:b, s:o}", "ok", 1, "data", data ? data : json_null());
	return reply_json(conn, 200, reply, NULL, NULL);
}

/* The query parameters as MHD keeps them (its memory, valid for the request). */
typedef struct {
	ctl_http_query_t *list;
	size_t n, cap;
} query_list_t;

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
	(void)kind;
	query_list_t *q = cls;
	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 8;
		q->list = xrealloc(q->list, q->cap * sizeof(*q->list));
	}
	q->list[q->n++] = (ctl_http_query_t){key, value};
	return MHD_YES;
}

static enum MHD_Result serve_api(ctl_http_t *http, struct MHD_Connection *conn, const char *url,
                                 const char *method, const http_conn_t *hc)
{
	query_list_t query = {0};
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_query, &query);
	ctl_http_request_t req = {
	    .method = method,
	    .path = url,
	    .query = query.list,
	    .n_query = query.n,
	    .content_type =
	        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
	    .body = hc->body,
	    .body_len = hc->too_large ? CTL_HTTP_BODY_MAX + 1u : hc->len,
	};
	ctl_http_call_t call;
	const char *allow = NULL;
	char err[ERR_TEXT_MAX];
	unsigned st = ctl_http_parse_call(&req, &call, &allow, err, sizeof(err));
	free(query.list);
	if (st != 0)
		return reply_error(conn, st, err, allow ? MHD_HTTP_HEADER_ALLOW : NULL, allow);
	enum MHD_Result ret = serve_call(http, conn, &call);
	ctl_http_call_clear(&call);
	return ret;
}

/* ---- pages ----------------------------------------------------------------------------- */

static const http_page_t *page_find(const ctl_http_t *http, const char *path)
{
	const http_page_t *best = NULL;
	for (size_t i = 0; i < http->n_pages; i++) {
		const http_page_t *p = &http->pages[i];
		if (!p->prefix && strcmp(p->path, path) == 0)
			return p;
		if (p->prefix && strncmp(p->path, path, p->len) == 0 &&
		    (best == NULL || p->len > best->len))
			best = p;
	}
	return best;
}

static int add_page(ctl_http_t *http, const char *path, ctl_http_page_cb cb, void *ctx, bool open)
{
	if (http == NULL)
		return 0;
	if (path[0] != '/' || strncmp(path, "/api/", 5) == 0 || strcmp(path, "/api") == 0)
		return STEER_EINVAL;
	for (size_t i = 0; i < http->n_pages; i++)
		if (strcmp(http->pages[i].path, path) == 0)
			return STEER_EEXIST;
	http->pages = xrealloc(http->pages, (http->n_pages + 1) * sizeof(*http->pages));
	size_t len = strlen(path);
	http->pages[http->n_pages++] = (http_page_t){.path = xstrdup(path),
	                                             .len = len,
	                                             .prefix = path[len - 1] == '/',
	                                             .cb = cb,
	                                             .ctx = ctx,
	                                             .open = open};
	return 0;
}

int ctl_http_add_page(ctl_http_t *http, const char *path, ctl_http_page_cb cb, void *ctx)
{
	return add_page(http, path, cb, ctx, false);
}

int ctl_http_add_open_page(ctl_http_t *http, const char *path, ctl_http_page_cb cb, void *ctx)
{
	return add_page(http, path, cb, ctx, true);
}

static bool etag_matches(struct MHD_Connection *conn, const char *etag)
{
	const char *inm =
	    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
	if (inm == NULL || etag == NULL)
		return false;
	if (strcmp(inm, "*") == 0)
		return true;
	/* A list of tags, maybe weak ("W/"): look for ours as one element. */
	size_t n = strlen(etag);
	for (const char *p = strstr(inm, etag); p != NULL; p = strstr(p + 1, etag)) {
		bool start = p == inm || p[-1] == ' ' || p[-1] == ',' || p[-1] == '/';
		bool end = p[n] == '\0' || p[n] == ',' || p[n] == ' ';
		if (start && end)
			return true;
	}
	return false;
}

static struct MHD_Response *page_response(struct MHD_Connection *conn, ctl_http_page_t *page,
                                          unsigned *status)
{
	struct MHD_Response *r;
	if (page->etag != NULL && *status == 200 && etag_matches(conn, page->etag)) {
		*status = 304;
		if (page->free_body != NULL)
			page->free_body((void *)page->body);
		r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	} else if (page->free_body != NULL) {
		r = MHD_create_response_from_buffer_with_free_callback(
		    page->len, (void *)page->body, page->free_body);
		if (r == NULL)
			page->free_body((void *)page->body);
	} else {
		r = MHD_create_response_from_buffer(page->len, (void *)page->body,
		                                    MHD_RESPMEM_PERSISTENT);
	}
	if (r == NULL)
		return NULL;
	add_common_headers(r, page->csp, page->cache_control);
	if (page->content_type != NULL && *status != 304)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, page->content_type);
	if (page->etag != NULL)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, page->etag);
	return r;
}

static enum MHD_Result serve_page(ctl_http_t *http, struct MHD_Connection *conn, const char *url,
                                  const char *method, const http_conn_t *hc)
{
	if (!ctl_http_path_safe(url))
		return reply_error(conn, 400,
		                   "bad path: a '.' or '..' segment, a NUL or bad "
		                   "percent-encoding",
		                   NULL, NULL);
	/* The token first: a closed server does not even say which pages exist. Only the
	 * exact path of an open page goes without (not the paths below an open prefix). */
	const http_page_t *p = page_find(http, url);
	bool open = p != NULL && p->open && strcmp(p->path, url) == 0;
	enum MHD_Result queued = MHD_NO;
	if (!open && authorise(http, conn, false, &queued) != 0)
		return queued;
	if (p == NULL)
		return reply_error(conn, 404, "no such page (the API is under " API_PREFIX "/)",
		                   NULL, NULL);
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply_error(conn, 405, "pages answer GET and HEAD only",
		                   MHD_HTTP_HEADER_ALLOW, PAGE_ALLOW);
	if (hc->len > 0 || hc->too_large)
		return reply_error(conn, 400, "a GET has no body", NULL, NULL);
	ctl_http_page_t page = {.status = 200};
	char err[ERR_TEXT_MAX] = "";
	int ret = p->cb(url, &page, err, sizeof(err), p->ctx);
	if (ret != 0) {
		if (page.free_body != NULL && page.body != NULL)
			page.free_body((void *)page.body);
		if (err[0] == '\0')
			snprintf(err, sizeof(err), "%s", steer_strerror(ret));
		return reply_error(conn, 500, err, NULL, NULL);
	}
	unsigned status = page.status ? page.status : 200;
	struct MHD_Response *r = page_response(conn, &page, &status);
	if (r == NULL)
		return MHD_NO;
	enum MHD_Result q = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return q;
}

/* ---- the MHD callbacks ----------------------------------------------------------------- */

/* The first call for a request: refuse an announced body over the limit before reading it. */
static enum MHD_Result request_begin(struct MHD_Connection *conn, void **con_cls)
{
	const char *length =
	    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (length != NULL && strtoull(length, NULL, 10) > CTL_HTTP_BODY_MAX) {
		char err[64];
		snprintf(err, sizeof(err), "body over %u bytes", CTL_HTTP_BODY_MAX);
		return reply_error(conn, 413, err, NULL, NULL);
	}
	*con_cls = xcalloc(1, sizeof(http_conn_t));
	return MHD_YES;
}

static void body_append(http_conn_t *hc, const char *data, size_t len)
{
	if (hc->too_large || len > CTL_HTTP_BODY_MAX - hc->len) {
		/* Chunked and too long: keep reading (MHD cannot answer mid-body), keep nothing. */
		hc->too_large = true;
		return;
	}
	if (hc->body == NULL)
		hc->body = xmalloc(CTL_HTTP_BODY_MAX);
	memcpy(hc->body + hc->len, data, len);
	hc->len += len;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
	(void)version;
	ctl_http_t *http = cls;
	http_conn_t *hc = *con_cls;
	if (hc == NULL)
		return request_begin(conn, con_cls);
	if (*upload_data_size > 0) {
		body_append(hc, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (is_api_path(url) && http->backend == NULL)
		return reply_error(conn, 404, "no API here: this server only serves pages", NULL,
		                   NULL);
	if (is_api_path(url))
		return serve_api(http, conn, url, method, hc);
	return serve_page(http, conn, url, method, hc);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode code)
{
	(void)cls;
	(void)conn;
	(void)code;
	http_conn_t *hc = *con_cls;
	if (hc != NULL) {
		free(hc->body);
		free(hc);
	}
	*con_cls = NULL;
}

/* Keep the path percent-encoded: "%2F" inside an argument must not become a separator. */
static size_t keep_escapes(void *cls, struct MHD_Connection *conn, char *s)
{
	(void)cls;
	(void)conn;
	return strlen(s);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char buf[512];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	log_debug("http: %s", buf);
}

/* ---- the event loop -------------------------------------------------------------------- */

/* Let MHD work, then sleep until its descriptor is ready or its next deadline. */
static void listener_run(http_listener_t *l)
{
	struct ev_loop *loop = l->http->loop;
	MHD_run(l->mhd);
	ev_timer_stop(loop, &l->timer);
	MHD_UNSIGNED_LONG_LONG ms;
	if (MHD_get_timeout(l->mhd, &ms) == MHD_YES) {
		ev_timer_set(&l->timer, (double)ms / 1000.0, 0.);
		ev_timer_start(loop, &l->timer);
	}
}

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	listener_run(w->data);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	listener_run(w->data);
}

static int listener_open(ctl_http_t *http, http_listener_t *l, const steer_sockaddr_t *addr,
                         char *err, size_t errlen)
{
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	if (addr->sa.sa_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	l->http = http;
	l->mhd = MHD_start_daemon(
	    flags, steer_sockaddr_port(addr), NULL, NULL, on_request, http, MHD_OPTION_SOCK_ADDR,
	    &addr->sa, MHD_OPTION_CONNECTION_LIMIT, CONN_MAX, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
	    CONN_PER_IP_MAX, MHD_OPTION_CONNECTION_TIMEOUT, CONN_IDLE_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY_MAX,
	    MHD_OPTION_UNESCAPE_CALLBACK, keep_escapes, NULL, MHD_OPTION_NOTIFY_COMPLETED,
	    on_completed, NULL, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_END);
	char text[STEER_SOCKADDR_STRLEN];
	steer_sockaddr_str(addr, text, sizeof(text));
	if (l->mhd == NULL) {
		int e = errno ? errno : EADDRNOTAVAIL;
		snprintf(err, errlen, "http: cannot listen on %s: %s", text, steer_strerror(-e));
		return -e;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	ev_io_init(&l->io, on_io, info->epoll_fd, EV_READ);
	l->io.data = l;
	ev_timer_init(&l->timer, on_timer, 0., 0.);
	l->timer.data = l;
	ev_io_start(http->loop, &l->io);
	listener_run(l);
	log_info("http: listening on %s", text);
	return 0;
}

static void token_set(ctl_http_t *http, const char *token)
{
	free(http->token);
	http->token = token != NULL && token[0] != '\0' ? xstrdup(token) : NULL;
}

int ctl_http_start(ctl_http_t **out, struct ev_loop *loop, const ctl_http_opts_t *opts,
                   const ctl_backend_t *backend, char *err, size_t errlen)
{
	ctl_http_t *http = xcalloc(1, sizeof(*http));
	http->loop = loop;
	http->backend = backend;
	http->read_only_open = opts->read_only_open;
	token_set(http, opts->token);
	http->listeners = xcalloc(opts->n_listen ? opts->n_listen : 1, sizeof(*http->listeners));
	for (size_t i = 0; i < opts->n_listen; i++) {
		int ret = listener_open(http, &http->listeners[i], &opts->listen[i], err, errlen);
		if (ret != 0) {
			ctl_http_stop(http);
			*out = NULL;
			return ret;
		}
		http->n_listeners++;
	}
	*out = http;
	return 0;
}

void ctl_http_reconfigure(ctl_http_t *http, const ctl_http_opts_t *opts)
{
	token_set(http, opts->token);
	http->read_only_open = opts->read_only_open;
}

uint16_t ctl_http_port(const ctl_http_t *http, size_t i)
{
	if (i >= http->n_listeners)
		return 0;
	const union MHD_DaemonInfo *info =
	    MHD_get_daemon_info(http->listeners[i].mhd, MHD_DAEMON_INFO_BIND_PORT);
	return info ? info->port : 0;
}

void ctl_http_stop(ctl_http_t *http)
{
	if (http == NULL)
		return;
	for (size_t i = 0; i < http->n_listeners; i++) {
		http_listener_t *l = &http->listeners[i];
		ev_io_stop(http->loop, &l->io);
		ev_timer_stop(http->loop, &l->timer);
		MHD_stop_daemon(l->mhd);
	}
	for (size_t i = 0; i < http->n_pages; i++)
		free(http->pages[i].path);
	free(http->pages);
	free(http->listeners);
	free(http->token);
	free(http);
}
