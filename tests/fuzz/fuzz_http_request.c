/*
 * Fuzz target: the HTTP API's request parser (ctl_http_parse_call()) and path check. The
 * input is "METHOD\nPATH\nCONTENT-TYPE\nQUERY\nBODY": the first four lines (an empty content
 * type is none), the query split at '&' and the first '=' the way MHD hands it over, the rest
 * the body. Besides sanitizer findings (leaks included) it checks that an accepted call names
 * a command row with its arguments as strings, that a mutating one came as a POST, that a
 * refusal is one of the documented statuses with a message and leaves nothing behind, and
 * that no path with a ".." segment is accepted.
 */
#include <stdlib.h>
#include <string.h>

#include "ctl/http.h"
#include "fuzz.h"

#define QUERY_MAX 32

/* The next '\n'-terminated field of [*p, end) as a fresh string. */
static char *field(const char **p, const char *end)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	const char *stop = nl ? nl : end;
	char *s = strndup(*p, (size_t)(stop - *p));
	*p = nl ? nl + 1 : end;
	return s;
}

static size_t split_query(char *q, ctl_http_query_t *out)
{
	size_t n = 0;
	for (char *save = NULL, *kv = strtok_r(q, "&", &save); kv && n < QUERY_MAX;
	     kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		if (eq)
			*eq = '\0';
		out[n++] = (ctl_http_query_t){kv, eq ? eq + 1 : NULL};
	}
	return n;
}

static void check_call(const ctl_http_request_t *req, const ctl_http_call_t *call)
{
	FUZZ_CHECK(call->cmd && call->row && strcmp(call->row->name, call->cmd) == 0);
	FUZZ_CHECK(json_is_array(call->args));
	for (size_t i = 0; i < json_array_size(call->args); i++)
		FUZZ_CHECK(json_is_string(json_array_get(call->args, i)));
	FUZZ_CHECK(!call->row->mutates || strcmp(req->method, "POST") == 0);
	FUZZ_CHECK(ctl_http_path_safe(req->path));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	char *method = field(&p, end), *path = field(&p, end), *type = field(&p, end);
	char *query = field(&p, end);
	ctl_http_query_t q[QUERY_MAX];
	ctl_http_request_t req = {
	    .method = method,
	    .path = path,
	    .query = q,
	    .n_query = split_query(query, q),
	    .content_type = type[0] ? type : NULL,
	    .body = p,
	    .body_len = (size_t)(end - p),
	};
	bool safe = path[0] ? ctl_http_path_safe(path) : false;
	FUZZ_CHECK(!safe || (strstr(path, "/../") == NULL && strstr(path, "/./") == NULL));
	ctl_http_call_t call;
	const char *allow = NULL;
	char err[512] = "";
	unsigned st = ctl_http_parse_call(&req, &call, &allow, err, sizeof(err));
	if (st == 0) {
		check_call(&req, &call);
		ctl_http_call_clear(&call);
	} else {
		FUZZ_CHECK(st == 400 || st == 404 || st == 405 || st == 413 || st == 415);
		FUZZ_CHECK(err[0] != '\0' && call.cmd == NULL && call.args == NULL);
		FUZZ_CHECK((st == 405) == (allow != NULL));
	}
	free(method);
	free(path);
	free(type);
	free(query);
	return 0;
}
