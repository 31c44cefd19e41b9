/*
 * Fetching the nodes' demand (probe/nodes.h). One easy handle per node at most; results are
 * read in fetches_done() after libcurl returned, so the callback may do anything. Agent loop
 * thread only.
 */
#include "probe/nodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "health/curl_loop.h"

#define ETAG_MAX 80

typedef struct {
	struct probe_nodes *owner;
	char *url;  /* <base>paths/demand */
	CURL *easy; /* NULL = no fetch running */
	struct curl_slist *headers;
	char errbuf[CURL_ERROR_SIZE];
	uint8_t *body;
	size_t len, cap;
	bool too_large;
	char etag[ETAG_MAX];     /* the validator of @c demand */
	char new_etag[ETAG_MAX]; /* the one the running fetch returned */
	gslb_demand_t demand;    /* the last good body; n = 0 before */
	bool have_demand;
	uint64_t ok_ms; /* last 200/304 */
	bool up, ever;  /* the state logged last */
	char last_error[256];
	uint64_t fetches, failures, not_modified;
} node_t;

struct probe_nodes {
	curl_loop_t *cl;
	CURLM *multi;
	node_t *nodes;
	size_t n;
	char *auth; /* "Authorization: Bearer ..." or NULL */
	unsigned timeout_ms;
	size_t max_rows;
	size_t max_body;
	probe_nodes_cb cb;
	void *ctx;
	uint64_t now_ms; /* of the last poll: the time results are stamped with */
};

static void fetch_cancel(probe_nodes_t *ns, node_t *nd)
{
	if (nd->easy == NULL)
		return;
	curl_multi_remove_handle(ns->multi, nd->easy);
	curl_easy_cleanup(nd->easy);
	curl_slist_free_all(nd->headers);
	nd->easy = NULL;
	nd->headers = NULL;
	free(nd->body);
	nd->body = NULL;
	nd->len = nd->cap = 0;
}

/* Log the node's state once per change: up, or down with the reason. */
static void node_state(node_t *nd, bool up, const char *why)
{
	if (!up)
		snprintf(nd->last_error, sizeof(nd->last_error), "%s", why);
	else
		nd->last_error[0] = '\0';
	if (nd->ever && nd->up == up)
		return;
	nd->ever = true;
	nd->up = up;
	if (up)
		log_notice("probe: node %s: demand fetched", nd->url);
	else
		log_warn("probe: node %s: %s%s", nd->url, why,
		         nd->have_demand ? " (keeping its last demand)" : "");
}

static void take_body(probe_nodes_t *ns, node_t *nd)
{
	char err[256] = "";
	gslb_demand_t d;
	if (nd->too_large) {
		char why[96];
		snprintf(why, sizeof(why), "demand body over %zu bytes", ns->max_body);
		nd->failures++;
		node_state(nd, false, why);
		return;
	}
	if (gslb_pathfmt_decode_demand(nd->body ? nd->body : (const uint8_t *)"", nd->len,
	                               ns->max_rows, &d, err, sizeof(err)) != 0) {
		char why[300];
		snprintf(why, sizeof(why), "bad demand body: %s", err);
		nd->failures++;
		node_state(nd, false, why);
		return;
	}
	if (nd->have_demand)
		gslb_pathfmt_demand_free(&nd->demand);
	nd->demand = d;
	nd->have_demand = true;
	snprintf(nd->etag, sizeof(nd->etag), "%s", nd->new_etag);
	nd->ok_ms = ns->now_ms;
	node_state(nd, true, NULL);
	ns->cb(ns->ctx);
}

static void fetch_finished(probe_nodes_t *ns, node_t *nd, CURLcode rc)
{
	long status = 0;
	(void)curl_easy_getinfo(nd->easy, CURLINFO_RESPONSE_CODE, &status);
	char why[CURL_ERROR_SIZE + 64];
	if (rc != CURLE_OK && !nd->too_large) {
		snprintf(why, sizeof(why), "%s",
		         nd->errbuf[0] ? nd->errbuf : curl_easy_strerror(rc));
		nd->failures++;
		node_state(nd, false, why);
	} else if (status == 304 && nd->have_demand) {
		nd->not_modified++;
		nd->ok_ms = ns->now_ms;
		node_state(nd, true, NULL);
		ns->cb(ns->ctx);
	} else if (status == 200 || nd->too_large) {
		take_body(ns, nd);
	} else {
		snprintf(why, sizeof(why), "HTTP %ld", status);
		nd->failures++;
		node_state(nd, false, why);
	}
}

static void fetches_done(void *ctx)
{
	probe_nodes_t *ns = ctx;
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(ns->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		node_t *nd = NULL;
		(void)curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&nd);
		CURLcode rc = msg->data.result;
		fetch_finished(ns, nd, rc);
		fetch_cancel(ns, nd);
	}
}

/* Keep the body up to the limit; beyond it, stop the transfer (an error we report as such). */
static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	node_t *nd = arg;
	size_t len = size * n;
	if (len > nd->owner->max_body - nd->len) {
		nd->too_large = true;
		return 0;
	}
	if (nd->len + len > nd->cap) {
		nd->cap = nd->cap ? nd->cap : 4096;
		while (nd->cap < nd->len + len)
			nd->cap *= 2;
		nd->body = xrealloc(nd->body, nd->cap);
	}
	memcpy(nd->body + nd->len, data, len);
	nd->len += len;
	return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	node_t *nd = arg;
	size_t len = size * n;
	static const char name[] = "etag:";
	if (len > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0) {
		const char *v = data + sizeof(name) - 1;
		size_t vlen = len - (sizeof(name) - 1);
		while (vlen > 0 && (*v == ' ' || *v == '\t'))
			v++, vlen--;
		while (vlen > 0 &&
		       (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
			vlen--;
		if (vlen < sizeof(nd->new_etag))
			snprintf(nd->new_etag, sizeof(nd->new_etag), "%.*s", (int)vlen, v);
	}
	return len;
}

#define SET(opt, val) (rc = rc == CURLE_OK ? curl_easy_setopt(nd->easy, opt, val) : rc)

static void fetch_start(probe_nodes_t *ns, node_t *nd)
{
	nd->easy = curl_easy_init();
	nd->errbuf[0] = nd->new_etag[0] = '\0';
	nd->too_large = false;
	nd->headers = ns->auth ? curl_slist_append(NULL, ns->auth) : NULL;
	if (nd->have_demand && nd->etag[0] != '\0') {
		char inm[ETAG_MAX + 32];
		snprintf(inm, sizeof(inm), "If-None-Match: %s", nd->etag);
		nd->headers = curl_slist_append(nd->headers, inm);
	}
	CURLcode rc = nd->easy ? CURLE_OK : CURLE_OUT_OF_MEMORY;
	SET(CURLOPT_URL, nd->url);
	SET(CURLOPT_PRIVATE, (void *)nd);
	SET(CURLOPT_ERRORBUFFER, nd->errbuf);
	SET(CURLOPT_HTTPHEADER, nd->headers);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_TIMEOUT_MS, (long)ns->timeout_ms);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_USERAGENT, "steer-probe/1");
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, (void *)nd);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, (void *)nd);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	CURLMcode mc = CURLM_OK;
	if (rc == CURLE_OK)
		mc = curl_multi_add_handle(ns->multi, nd->easy);
	if (rc != CURLE_OK || mc != CURLM_OK) {
		char why[160];
		snprintf(why, sizeof(why), "libcurl: %s",
		         rc != CURLE_OK ? curl_easy_strerror(rc) : curl_multi_strerror(mc));
		fetch_cancel(ns, nd);
		nd->failures++;
		node_state(nd, false, why);
		return;
	}
	nd->fetches++;
}

int probe_nodes_new(struct ev_loop *loop, const probe_nodes_opts_t *opts, probe_nodes_cb cb,
                    void *ctx, probe_nodes_t **out, char *err, size_t errlen)
{
	probe_nodes_t *ns = xcalloc(1, sizeof(*ns));
	int ret = curl_loop_new(loop, fetches_done, ns, &ns->cl, err, errlen);
	if (ret != 0) {
		free(ns);
		return ret;
	}
	ns->multi = curl_loop_multi(ns->cl);
	ns->cb = cb;
	ns->ctx = ctx;
	ns->timeout_ms = opts->timeout_ms;
	ns->max_rows = opts->max_rows;
	ns->max_body = GSLB_PATHFMT_DEMAND_HDR + opts->max_rows * GSLB_PATHFMT_DEMAND_ROW;
	if (opts->token != NULL) {
		size_t len = strlen(opts->token) + 32;
		ns->auth = xmalloc(len);
		snprintf(ns->auth, len, "Authorization: Bearer %s", opts->token);
	}
	ns->nodes = xcalloc(opts->n_urls ? opts->n_urls : 1, sizeof(*ns->nodes));
	ns->n = opts->n_urls;
	for (size_t i = 0; i < ns->n; i++) {
		size_t len = strlen(opts->urls[i]) + sizeof("paths/demand");
		ns->nodes[i].owner = ns;
		ns->nodes[i].url = xmalloc(len);
		snprintf(ns->nodes[i].url, len, "%spaths/demand", opts->urls[i]);
	}
	*out = ns;
	return 0;
}

void probe_nodes_poll(probe_nodes_t *ns, uint64_t now_ms)
{
	ns->now_ms = now_ms;
	for (size_t i = 0; i < ns->n; i++)
		if (ns->nodes[i].easy == NULL)
			fetch_start(ns, &ns->nodes[i]);
}

size_t probe_nodes_count(const probe_nodes_t *ns)
{
	return ns->n;
}

const gslb_demand_t *probe_nodes_demand(const probe_nodes_t *ns, size_t i, uint64_t *ok_ms)
{
	if (i >= ns->n || !ns->nodes[i].have_demand)
		return NULL;
	*ok_ms = ns->nodes[i].ok_ms;
	return &ns->nodes[i].demand;
}

json_t *probe_nodes_json(const probe_nodes_t *ns, uint64_t now_ms)
{
	json_t *list = json_array();
	for (size_t i = 0; i < ns->n; i++) {
		const node_t *nd = &ns->nodes[i];
		json_t *o = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I}", "url", nd->url, "up",
		                      nd->ever && nd->up, "rows",
		                      (json_int_t)(nd->have_demand ? nd->demand.n : 0), "fetches",
		                      (json_int_t)nd->fetches, "failures", (json_int_t)nd->failures,
		                      "not_modified", (json_int_t)nd->not_modified);
		if (nd->last_error[0] != '\0')
			json_object_set_new(o, "error", json_string(nd->last_error));
		if (nd->have_demand)
			json_object_set_new(o, "ok_age_ms",
			                    json_integer((json_int_t)(now_ms - nd->ok_ms)));
		json_array_append_new(list, o);
	}
	return list;
}

void probe_nodes_free(probe_nodes_t *ns)
{
	if (ns == NULL)
		return;
	for (size_t i = 0; i < ns->n; i++) {
		fetch_cancel(ns, &ns->nodes[i]);
		if (ns->nodes[i].have_demand)
			gslb_pathfmt_demand_free(&ns->nodes[i].demand);
		free(ns->nodes[i].url);
	}
	curl_loop_free(ns->cl);
	free(ns->nodes);
	free(ns->auth);
	free(ns);
}
