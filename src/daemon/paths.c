/*
 * The node's side of measured paths (see paths.h): agent fetches through health/curl_loop.h,
 * the merge into gslb_paths_t and its publication, the demand rings and /paths/demand, and
 * what `steerctl paths` and /metrics show. Control thread only; the query threads only touch
 * their demand ring (gslb/demand.h) and the published table.
 */
#include "daemon/paths.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <ev.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "daemon/server.h"
#include "gslb/demand.h"
#include "gslb/pathfmt.h"
#include "gslb/paths.h"
#include "health/curl_loop.h"

#define PATHS_CONTENT_TYPE  "application/vnd.steer.paths"
#define DEMAND_CONTENT_TYPE "application/vnd.steer.demand"
#define ETAG_MAX            80
#define BODY_KEEP_MAX       (1u << 20)
#define ERROR_MAX           512
/* The demand map forgets idle prefixes; checking once a minute is plenty for an hour's idle. */
#define DEMAND_EXPIRE_MS 60000
/* Cells age inside the table: rebuild at least every path-ttl / 20 even when no agent sent
 * anything new, so a cell goes empty within 5 % of path-ttl of going stale. */
#define REBUILD_SHARE 20

typedef enum {
	FETCH_OK,           /* 200 with a valid table */
	FETCH_NOT_MODIFIED, /* 304 */
	FETCH_INVALID,      /* 200 with a body the decoder refused */
	FETCH_HTTP_ERROR,   /* any other status */
	FETCH_TIMEOUT,      /* no complete answer within fetch-timeout */
	FETCH_ERROR,        /* connection refused, reset, DNS, too large */
	FETCH_RESULTS
} fetch_result_t;

static const char *const result_names[FETCH_RESULTS] = {
    "ok", "not-modified", "invalid", "http-error", "timeout", "error",
};

typedef enum { AGENT_UNKNOWN, AGENT_UP, AGENT_DOWN } agent_state_t;

/* An agent's decoded table. A build on the worker thread reads it while the agent may already
 * have a newer one: both hold a reference (counted on the control thread only). */
struct site_table {
	gslb_path_table_t t;
	unsigned refs;
};

static void site_unref(struct site_table *st)
{
	if (!st || --st->refs > 0)
		return;
	gslb_pathfmt_table_free(&st->t);
	free(st);
}

typedef struct {
	struct paths *owner;
	char *datacenter; /* name, owned */
	size_t dc;        /* conf_t.datacenters index in the running configuration */
	char *url;        /* base URL, owned */
	char *table_url;  /* <url>paths/table, owned */
	/* the transfer in flight */
	CURL *easy;
	struct curl_slist *headers;
	uint8_t *body;
	size_t body_len, body_cap;
	bool too_big;
	char new_etag[ETAG_MAX];
	char errbuf[CURL_ERROR_SIZE];
	/* the last good table */
	struct site_table *site; /* a table no build has merged yet (NULL = none); shared with a
	                          * running build. Freed once merged: the merged table keeps the
	                          * column and the next builds reuse it (in_table). */
	bool in_table;           /* the served merged table holds this agent's last table */
	size_t rows;             /* of the last good table */
	uint64_t generated_ms;   /* ditto */
	bool changed;            /* a new table since the last build */
	char etag[ETAG_MAX];
	uint64_t table_wall_ms; /* when it arrived */
	/* state */
	agent_state_t state;
	char error[ERROR_MAX];
	uint64_t last_fetch_wall_ms, last_ok_wall_ms;
	uint64_t results[FETCH_RESULTS];
} agent_t;

struct paths {
	server_t *s;
	bool enabled;
	conf_paths_t cfg; /* scalar settings copied from the running conf (no owned pointers) */
	agent_t *agents;
	size_t n_agents;
	char token[CTL_HTTP_TOKEN_MAX + 1];
	curl_loop_t *curl;
	ev_timer fetch_w;
	ev_timer drain_w;
	size_t in_flight;
	bool dirty; /* an agent's table changed, or one was dropped */
	/* the merged table */
	gslb_paths_t *table;   /* our reference; the served view holds its own */
	struct build_job *job; /* the build running on its thread, NULL = none */
	uint64_t generation;   /* a reload discards the result of a build started before it */
	ev_async built_w;
	uint64_t built_mono_ms;
	double build_s;
	uint64_t builds, build_errors;
	/* demand */
	gslb_demand_ring_t **rings;
	unsigned n_rings;
	gslb_demand_map_t *demand;
	uint64_t demand_expired_mono_ms;
	uint8_t *demand_body;
	size_t demand_len;
	uint64_t demand_generated_ms;
	bool page_registered;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t wall_ms(void)
{
	return (uint64_t)server_wall_ms();
}

/* ---- agents -------------------------------------------------------------------------------- */

static void agent_cancel(agent_t *a)
{
	if (!a->easy)
		return;
	curl_multi_remove_handle(curl_loop_multi(a->owner->curl), a->easy);
	curl_easy_cleanup(a->easy);
	curl_slist_free_all(a->headers);
	a->easy = NULL;
	a->headers = NULL;
	a->owner->in_flight--;
}

static void agent_free(agent_t *a)
{
	agent_cancel(a);
	site_unref(a->site);
	free(a->body);
	free(a->datacenter);
	free(a->url);
	free(a->table_url);
}

static void agent_init(struct paths *p, agent_t *a, const conf_t *conf, const conf_path_agent_t *c)
{
	memset(a, 0, sizeof(*a));
	a->owner = p;
	a->dc = c->datacenter;
	a->datacenter = xstrdup(conf->datacenters[c->datacenter].name);
	a->url = xstrdup(c->url);
	a->table_url = xstrcat3(c->url, "paths/", "table");
}

/* The most a valid table of max-prefixes rows can take: header, name, IPv6-sized rows. */
static size_t body_limit(const struct paths *p)
{
	return GSLB_PATHFMT_TABLE_HDR + GSLB_PATHFMT_NAME_MAX +
	       (size_t)p->cfg.max_prefixes * GSLB_PATHFMT_ROW6;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	agent_t *a = arg;
	size_t len = size * n;
	if (a->body_len + len > body_limit(a->owner)) {
		a->too_big = true;
		return 0; /* libcurl ends the transfer with CURLE_WRITE_ERROR */
	}
	if (a->body_len + len > a->body_cap) {
		size_t cap = a->body_cap ? a->body_cap : 65536;
		while (cap < a->body_len + len)
			cap *= 2;
		a->body = xrealloc(a->body, cap);
		a->body_cap = cap;
	}
	memcpy(a->body + a->body_len, data, len);
	a->body_len += len;
	return len;
}

/* Keep the ETag of the answer (as received, quotes included) for the next If-None-Match. */
static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	agent_t *a = arg;
	size_t len = size * n;
	static const char name[] = "etag:";
	if (len > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0) {
		const char *v = data + sizeof(name) - 1, *end = data + len;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		while (end > v && isspace((unsigned char)end[-1]))
			end--;
		size_t vlen = (size_t)(end - v);
		/* a value that cannot be sent back as it is (too long, controls) is not kept */
		bool printable = vlen > 0 && vlen < ETAG_MAX;
		for (size_t i = 0; printable && i < vlen; i++)
			printable = v[i] > ' ' && v[i] < 0x7f;
		a->new_etag[0] = '\0';
		if (printable) {
			memcpy(a->new_etag, v, vlen);
			a->new_etag[vlen] = '\0';
		}
	}
	return len;
}

static void agent_fetch_start(struct paths *p, agent_t *a)
{
	if (a->easy)
		return; /* the previous fetch is still running: at most one per agent */
	a->body_len = 0;
	a->too_big = false;
	a->new_etag[0] = '\0';
	a->errbuf[0] = '\0';
	a->last_fetch_wall_ms = wall_ms();
	a->easy = curl_easy_init();
	char line[ETAG_MAX + CTL_HTTP_TOKEN_MAX + 64];
	struct curl_slist *h = curl_slist_append(NULL, "Accept: " PATHS_CONTENT_TYPE);
	if (h && (a->site || a->in_table) && a->etag[0]) {
		snprintf(line, sizeof(line), "If-None-Match: %s", a->etag);
		h = curl_slist_append(h, line);
	}
	if (h && p->token[0]) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s", p->token);
		h = curl_slist_append(h, line);
		explicit_bzero(line, sizeof(line));
	}
	a->headers = h;
	p->in_flight++;
	CURLcode rc = a->easy && h ? CURLE_OK : CURLE_OUT_OF_MEMORY;
#define SET(opt, val) (rc = rc == CURLE_OK ? curl_easy_setopt(a->easy, opt, val) : rc)
	SET(CURLOPT_URL, a->table_url);
	SET(CURLOPT_PRIVATE, (void *)a);
	SET(CURLOPT_ERRORBUFFER, a->errbuf);
	SET(CURLOPT_HTTPHEADER, a->headers);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, (void *)a);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, (void *)a);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_TIMEOUT_MS, (long)p->cfg.fetch_timeout);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_USERAGENT, "steer-paths/1");
	SET(CURLOPT_NOPROXY, "*");
#if LIBCURL_VERSION_NUM >= 0x075500
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
#endif
#undef SET
	CURLMcode mc = CURLM_OK;
	if (rc == CURLE_OK)
		mc = curl_multi_add_handle(curl_loop_multi(p->curl), a->easy);
	if (rc != CURLE_OK || mc != CURLM_OK) {
		log_err("paths: agent %s: libcurl: %s", a->datacenter,
		        rc != CURLE_OK ? curl_easy_strerror(rc) : curl_multi_strerror(mc));
		agent_cancel(a);
	}
}

/* One log line per state change, with the reason of a failure. */
static void agent_set_state(agent_t *a, agent_state_t state, const char *error)
{
	agent_state_t was = a->state;
	snprintf(a->error, sizeof(a->error), "%s", error ? error : "");
	a->state = state;
	if (was == state)
		return;
	if (state == AGENT_UP)
		log_info("paths: agent %s (%s) up: %zu rows", a->datacenter, a->url, a->rows);
	else
		log_warn("paths: agent %s (%s) down: %s%s", a->datacenter, a->url, a->error,
		         a->generated_ms ? " (keeping its last table until path-ttl)" : "");
}

/* A 200: decode, check it is this datacenter's table, keep it. */
static fetch_result_t agent_take_body(agent_t *a, char *why, size_t whylen)
{
	gslb_path_table_t t;
	char err[256];
	if (gslb_pathfmt_decode_table(a->body, a->body_len, a->owner->cfg.max_prefixes, &t, err,
	                              sizeof(err)) != 0) {
		snprintf(why, whylen, "invalid table (%zu bytes): %s", a->body_len, err);
		return FETCH_INVALID;
	}
	if (strcmp(t.name, a->datacenter) != 0) {
		snprintf(why, whylen, "the table is datacenter '%s''s, not '%s' (wrong url?)",
		         t.name, a->datacenter);
		gslb_pathfmt_table_free(&t);
		return FETCH_INVALID;
	}
	site_unref(a->site);
	a->site = xcalloc(1, sizeof(*a->site));
	a->site->t = t;
	a->site->refs = 1;
	a->rows = t.n4 + t.n6;
	a->generated_ms = t.generated_ms;
	a->changed = true;
	a->table_wall_ms = wall_ms();
	snprintf(a->etag, sizeof(a->etag), "%s", a->new_etag);
	a->owner->dirty = true;
	return FETCH_OK;
}

static void agent_done(agent_t *a, CURLcode rc)
{
	long status = 0;
	(void)curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &status);
	char why[ERROR_MAX] = "";
	fetch_result_t res;
	if (rc == CURLE_OPERATION_TIMEDOUT) {
		res = FETCH_TIMEOUT;
		snprintf(why, sizeof(why), "no answer within %ums", a->owner->cfg.fetch_timeout);
	} else if (rc != CURLE_OK) {
		res = FETCH_ERROR;
		if (a->too_big)
			snprintf(why, sizeof(why),
			         "the table is larger than max-prefixes allows "
			         "(more than %zu bytes)",
			         body_limit(a->owner));
		else
			snprintf(why, sizeof(why), "%s",
			         a->errbuf[0] ? a->errbuf : curl_easy_strerror(rc));
	} else if (status == 304) {
		res = FETCH_NOT_MODIFIED;
	} else if (status == 200) {
		res = agent_take_body(a, why, sizeof(why));
	} else {
		res = FETCH_HTTP_ERROR;
		snprintf(why, sizeof(why), "HTTP %ld", status);
	}
	agent_cancel(a);
	/* A large body is not kept between fetches: with 8 agents of a million rows each that
	 * would be 100 MB idle; a small one saves the next fetch its reallocations. */
	if (a->body_cap > BODY_KEEP_MAX) {
		free(a->body);
		a->body = NULL;
		a->body_cap = 0;
	}
	a->results[res]++;
	bool ok = res == FETCH_OK || res == FETCH_NOT_MODIFIED;
	if (ok)
		a->last_ok_wall_ms = wall_ms();
	agent_set_state(a, ok ? AGENT_UP : AGENT_DOWN, why);
}

/* ---- the merged table ------------------------------------------------------------------------ */

static void build_opts(const struct paths *p, size_t *column_dc, gslb_paths_opts_t *o,
                       size_t n_datacenters)
{
	for (size_t i = 0; i < p->n_agents; i++)
		column_dc[i] = p->agents[i].dc;
	*o = (gslb_paths_opts_t){
	    .ipv4_prefix = p->cfg.ipv4_prefix,
	    .ipv6_prefix = p->cfg.ipv6_prefix,
	    .path_ttl_s = p->cfg.path_ttl,
	    .max_rows = p->cfg.max_prefixes,
	    .margin_pct = p->cfg.hyst_margin,
	    .min_difference_100us = p->cfg.hyst_min_difference * 10,
	    .rounds = p->cfg.hyst_rounds,
	    .column_dc = column_dc,
	    .n_columns = p->n_agents,
	    .n_datacenters = n_datacenters,
	};
}

/*
 * One merge of the agents' tables. A million rows from eight agents take most of a second, so
 * merges after fetch rounds run on a thread of their own and the control loop keeps serving
 * probes and commands meanwhile; the job holds references to everything it reads.
 */
typedef struct build_job {
	struct paths *p;
	uint64_t generation;
	gslb_paths_t *prev; /* a reference; read only */
	struct site_table **sites_held;
	gslb_paths_site_t *sites;
	size_t *column_dc;
	size_t n;
	gslb_paths_opts_t opts;
	uint64_t now_ms;
	/* results */
	gslb_paths_t *result;
	char err[256];
	double secs;
	pthread_t thread;
} build_job_t;

/* Snapshot what a merge needs; the round's changes now belong to this build. */
static build_job_t *job_new(struct paths *p, gslb_paths_t *prev, size_t n_datacenters)
{
	build_job_t *j = xcalloc(1, sizeof(*j));
	j->p = p;
	j->generation = p->generation;
	j->prev = prev ? gslb_paths_ref(prev) : NULL;
	j->n = p->n_agents;
	j->sites_held = xcalloc(j->n + 1, sizeof(*j->sites_held));
	j->sites = xcalloc(j->n + 1, sizeof(*j->sites));
	j->column_dc = xcalloc(j->n + 1, sizeof(*j->column_dc));
	for (size_t i = 0; i < j->n; i++) {
		agent_t *a = &p->agents[i];
		if (a->site)
			a->site->refs++;
		j->sites_held[i] = a->site;
		j->sites[i] = (gslb_paths_site_t){.table = a->site ? &a->site->t : NULL,
		                                  .fetched_ms = a->table_wall_ms,
		                                  .changed = a->changed,
		                                  .reuse = !a->site && a->in_table && prev};
		a->changed = false;
	}
	build_opts(p, j->column_dc, &j->opts, n_datacenters);
	j->now_ms = wall_ms();
	p->dirty = false;
	return j;
}

/* Any thread: touches nothing but the job. */
static void job_run(build_job_t *j)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	j->result =
	    gslb_paths_build(j->prev, j->sites, &j->opts, j->now_ms, j->err, sizeof(j->err));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	j->secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
}

static void table_replace(struct paths *p, gslb_paths_t *t)
{
	gslb_paths_unref(p->table);
	p->table = t;
}

/*
 * Serve @p j's table from now on (the job is of the current generation, so its columns are
 * the agents in order). The decoded tables it merged are no longer needed: the table holds
 * their columns, and the next builds reuse them.
 */
static void job_install(struct paths *p, const build_job_t *j)
{
	table_replace(p, gslb_paths_ref(j->result));
	for (size_t i = 0; i < j->n && i < p->n_agents; i++) {
		agent_t *a = &p->agents[i];
		if (j->sites_held[i] && a->site == j->sites_held[i]) {
			site_unref(a->site);
			a->site = NULL;
		}
		a->in_table = j->sites_held[i] || j->sites[i].reuse;
	}
}

/* Control thread: drop the job's references; returns its table (NULL: failed, logged). */
static gslb_paths_t *job_finish(build_job_t *j)
{
	struct paths *p = j->p;
	gslb_paths_t *t = j->result;
	if (t) {
		p->builds++;
		p->build_s = j->secs;
		p->built_mono_ms = mono_ms();
	} else {
		p->build_errors++;
		log_err("paths: cannot merge the agents' tables: %s", j->err);
	}
	for (size_t i = 0; i < j->n; i++)
		site_unref(j->sites_held[i]);
	gslb_paths_unref(j->prev);
	free(j->sites_held);
	free(j->sites);
	free(j->column_dc);
	free(j);
	return t;
}

/*
 * Merge on the control thread (reload: the new view needs its table before it is served) and
 * serve the result from now on; false when the merge failed (logged, nothing changes).
 */
static bool table_build(struct paths *p, gslb_paths_t *prev, size_t n_datacenters)
{
	build_job_t *j = job_new(p, prev, n_datacenters);
	job_run(j);
	if (j->result)
		job_install(p, j);
	gslb_paths_t *t = job_finish(j);
	gslb_paths_unref(t); /* job_install() took the table's reference */
	return t != NULL;
}

static void *job_thread(void *arg)
{
	build_job_t *j = arg;
	job_run(j);
	ev_async_send(j->p->s->loop, &j->p->built_w);
	return NULL;
}

static void maybe_publish(struct paths *p);

/* The build thread is done: publish its table unless a reload came in between. */
static void on_built(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	struct paths *p = w->data;
	build_job_t *j = p->job;
	if (!j)
		return;
	pthread_join(j->thread, NULL);
	p->job = NULL;
	bool current = j->generation == p->generation && j->result;
	if (current)
		job_install(p, j);
	gslb_paths_unref(job_finish(j));
	if (current)
		server_publish_paths(p->s, p->table);
	if (p->dirty)
		maybe_publish(p); /* a table came in while this one was merged */
}

/* After a round of fetches: merge and publish when something changed or cells aged. */
static void maybe_publish(struct paths *p)
{
	uint64_t every = (uint64_t)p->cfg.path_ttl * 1000 / REBUILD_SHARE;
	if (every < p->cfg.fetch_interval)
		every = p->cfg.fetch_interval;
	if (p->job || (!p->dirty && p->table && mono_ms() - p->built_mono_ms < every))
		return; /* a running build: on_built() looks at dirty again */
	build_job_t *j = job_new(p, p->table, p->s->conf->n_datacenters);
	p->job = j;
	if (pthread_create(&j->thread, NULL, job_thread, j) != 0) {
		log_warn("paths: cannot start a build thread (%s): merging on the control thread",
		         strerror(errno));
		p->job = NULL;
		job_run(j);
		bool ok = j->result != NULL;
		if (ok)
			job_install(p, j);
		gslb_paths_unref(job_finish(j));
		if (ok)
			server_publish_paths(p->s, p->table);
	}
}

static void transfers_done(void *ctx)
{
	struct paths *p = ctx;
	CURLMsg *msg;
	int left;
	bool any = false;
	while ((msg = curl_multi_info_read(curl_loop_multi(p->curl), &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		agent_t *a = NULL;
		(void)curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&a);
		agent_done(a, msg->data.result);
		any = true;
	}
	if (any && p->in_flight == 0)
		maybe_publish(p);
}

static void on_fetch_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	struct paths *p = w->data;
	for (size_t i = 0; i < p->n_agents; i++)
		agent_fetch_start(p, &p->agents[i]);
	if (p->in_flight == 0)
		maybe_publish(p); /* every fetch failed to start: still age the table */
}

/* ---- demand ---------------------------------------------------------------------------------- */

static void on_drain_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	struct paths *p = w->data;
	uint64_t now = mono_ms();
	for (unsigned i = 0; i < p->n_rings; i++)
		gslb_demand_drain(p->demand, p->rings[i], now);
	if (now - p->demand_expired_mono_ms >= DEMAND_EXPIRE_MS) {
		gslb_demand_expire(p->demand, now);
		p->demand_expired_mono_ms = now;
	}
}

static int demand_page(const char *path, ctl_http_page_t *page, char *err, size_t errlen, void *ctx)
{
	(void)path;
	(void)err;
	(void)errlen;
	struct paths *p = ctx;
	if (!p->demand_body || gslb_demand_changed(p->demand)) {
		/* generated_ms is the ETag: it must grow with every new body */
		uint64_t gen = wall_ms();
		if (gen <= p->demand_generated_ms)
			gen = p->demand_generated_ms + 1;
		free(p->demand_body);
		p->demand_body = gslb_demand_encode(p->demand, mono_ms(), gen, &p->demand_len);
		p->demand_generated_ms = gen;
	}
	static char etag[32];
	snprintf(etag, sizeof(etag), "\"%" PRIu64 "\"", p->demand_generated_ms);
	page->status = 200;
	page->content_type = DEMAND_CONTENT_TYPE;
	page->body = xmemdup(p->demand_body, p->demand_len);
	page->len = p->demand_len;
	page->free_body = free;
	page->etag = etag;
	return 0;
}

int paths_http_register(server_t *s)
{
	struct paths *p = s->paths;
	if (!p || !p->enabled || p->page_registered)
		return 0;
	if (!s->http) {
		log_warn("paths: no http.listen: the agents cannot read this node's /paths/demand");
		return 0;
	}
	int ret = ctl_http_add_page(s->http, "/paths/demand", demand_page, p);
	if (ret != 0) {
		log_err("http: cannot serve /paths/demand: %s", steer_strerror(ret));
		return ret;
	}
	p->page_registered = true;
	return 0;
}

/* ---- start, reload, stop --------------------------------------------------------------------- */

int paths_reload_token(const conf_t *conf, char *token, size_t size, char *err, size_t errlen)
{
	token[0] = '\0';
	if (!conf->paths.enabled || !conf->paths.token_file)
		return 0;
	int ret = ctl_http_token_read(conf->paths.token_file, token, size, err, errlen);
	if (ret != 0) {
		/* the reader names the file as the HTTP API's: say whose it is */
		char msg[512];
		snprintf(msg, sizeof(msg), "paths.token-file: %s", err);
		snprintf(err, errlen, "%s", msg);
	}
	return ret;
}

/* The scalar settings of @p conf, without the pointers it owns. */
static conf_paths_t settings_of(const conf_t *conf)
{
	conf_paths_t c = conf->paths;
	c.agents = NULL;
	c.n_agents = 0;
	c.nodes = NULL;
	c.n_nodes = 0;
	c.token_file = NULL;
	c.dns_name = NULL;
	return c;
}

static void timers_arm(struct paths *p)
{
	struct ev_loop *loop = p->s->loop;
	ev_timer_stop(loop, &p->fetch_w);
	if (!p->enabled)
		return;
	/* first fetch at once: a fresh node should steer by measurements within a round trip */
	ev_timer_set(&p->fetch_w, 0., p->cfg.fetch_interval / 1000.0);
	ev_timer_start(loop, &p->fetch_w);
}

static int rings_start(server_t *s, struct paths *p)
{
	p->n_rings = net_query_threads(s->net);
	p->rings = xcalloc(p->n_rings ? p->n_rings : 1, sizeof(*p->rings));
	unsigned sample = s->conf->paths.enabled ? s->conf->paths.demand_sample : 16;
	for (unsigned i = 0; i < p->n_rings; i++)
		p->rings[i] = gslb_demand_ring_new(sample);
	net_set_demand(s->net, p->rings);
	p->demand =
	    gslb_demand_map_new(s->conf->paths.enabled ? s->conf->paths.max_prefixes : 1000000);
	ev_timer_init(&p->drain_w, on_drain_timer, PATHS_DRAIN_MS / 1000.0,
	              PATHS_DRAIN_MS / 1000.0);
	p->drain_w.data = p;
	ev_timer_start(s->loop, &p->drain_w);
	return 0;
}

int paths_start(server_t *s, char *err, size_t errlen)
{
	struct paths *p = xcalloc(1, sizeof(*p));
	p->s = s;
	s->paths = p;
	ev_timer_init(&p->fetch_w, on_fetch_timer, 0., 0.);
	p->fetch_w.data = p;
	ev_async_init(&p->built_w, on_built);
	p->built_w.data = p;
	ev_async_start(s->loop, &p->built_w);
	int ret = curl_loop_new(s->loop, transfers_done, p, &p->curl, err, errlen);
	if (ret == 0)
		ret = rings_start(s, p);
	if (ret == 0)
		ret = paths_reload_token(s->conf, p->token, sizeof(p->token), err, errlen);
	if (ret != 0)
		return ret;
	p->enabled = s->conf->paths.enabled;
	p->cfg = settings_of(s->conf);
	p->n_agents = s->conf->paths.n_agents;
	p->agents = xcalloc(p->n_agents + 1, sizeof(*p->agents));
	for (size_t i = 0; i < p->n_agents; i++)
		agent_init(p, &p->agents[i], s->conf, &s->conf->paths.agents[i]);
	if (p->enabled)
		log_info("paths: %zu agent(s), fetching every %ums", p->n_agents,
		         p->cfg.fetch_interval);
	timers_arm(p);
	return 0;
}

/* The agent of @p old with the same datacenter name and URL as @p c, or NULL. */
static agent_t *find_agent(agent_t *old, size_t n, const conf_t *conf, const conf_path_agent_t *c)
{
	for (size_t i = 0; i < n; i++) {
		if (old[i].datacenter &&
		    strcmp(old[i].datacenter, conf->datacenters[c->datacenter].name) == 0 &&
		    strcmp(old[i].url, c->url) == 0)
			return &old[i];
	}
	return NULL;
}

/*
 * The previous table's columns are known by conf_t.datacenters index: they still mean the
 * same datacenters when every old agent's index names its datacenter in @p conf. Then the
 * new table reuses the columns of the agents that stay and carries the hysteresis state.
 */
static bool same_columns(const conf_t *conf, const agent_t *old, size_t n_old)
{
	for (size_t i = 0; i < n_old; i++) {
		if (old[i].dc >= conf->n_datacenters ||
		    strcmp(conf->datacenters[old[i].dc].name, old[i].datacenter) != 0)
			return false;
	}
	return true;
}

/* The previous table cannot be reused: what only it held must be fetched again in full. */
static void forget_columns(struct paths *p)
{
	for (size_t i = 0; i < p->n_agents; i++) {
		agent_t *a = &p->agents[i];
		if (a->in_table && !a->site) {
			a->etag[0] =
			    '\0'; /* no If-None-Match: a 304 would leave the column empty */
			a->generated_ms = 0;
			a->rows = 0;
		}
		a->in_table = false;
	}
}

void paths_reload(server_t *s, const conf_t *conf, const char *token, gslb_view_t **gslb)
{
	struct paths *p = s->paths;
	agent_t *old = p->agents;
	size_t n_old = p->n_agents;
	/* before the agents move; a new granularity cannot reuse the old rows either */
	bool columns = same_columns(conf, old, n_old) &&
	               p->cfg.ipv4_prefix == conf->paths.ipv4_prefix &&
	               p->cfg.ipv6_prefix == conf->paths.ipv6_prefix;
	bool was_enabled = p->enabled;
	p->enabled = conf->paths.enabled;
	p->cfg = settings_of(conf);
	snprintf(p->token, sizeof(p->token), "%s", token);
	p->n_agents = conf->paths.n_agents;
	p->agents = xcalloc(p->n_agents + 1, sizeof(*p->agents));
	for (size_t i = 0; i < p->n_agents; i++) {
		const conf_path_agent_t *c = &conf->paths.agents[i];
		agent_t *keep = find_agent(old, n_old, conf, c);
		if (keep) {
			agent_cancel(keep); /* a fetch in flight points at the old slot */
			p->agents[i] = *keep;
			p->agents[i].dc = c->datacenter;
			memset(keep, 0, sizeof(*keep));
		} else {
			agent_init(p, &p->agents[i], conf, c);
		}
	}
	for (size_t i = 0; i < n_old; i++)
		agent_free(&old[i]);
	free(old);
	for (unsigned i = 0; i < p->n_rings; i++)
		gslb_demand_ring_set_sample(p->rings[i], p->enabled ? p->cfg.demand_sample : 16);
	p->generation++; /* a build still running merges the old agents: not served */
	if (!columns)
		forget_columns(p);
	/* a failed merge (logged) serves no table: measured policies fall back until the next */
	if (!p->enabled || !table_build(p, columns ? p->table : NULL, conf->n_datacenters))
		table_replace(p, NULL);
	gslb_view_t *next = gslb_view_with_paths(*gslb, p->table);
	gslb_view_free(*gslb);
	*gslb = next;
	if (p->enabled != was_enabled)
		log_info("paths: %s", p->enabled ? "on" : "off");
	timers_arm(p);
	if (paths_http_register(s) != 0)
		log_warn("paths: /paths/demand is not served");
}

void paths_stop(server_t *s)
{
	struct paths *p = s->paths;
	if (!p)
		return;
	if (s->loop) {
		ev_timer_stop(s->loop, &p->fetch_w);
		ev_timer_stop(s->loop, &p->drain_w);
		ev_async_stop(s->loop, &p->built_w);
	}
	if (p->job) {
		pthread_join(p->job->thread, NULL);
		gslb_paths_unref(job_finish(p->job));
		p->job = NULL;
	}
	for (size_t i = 0; i < p->n_agents; i++)
		agent_free(&p->agents[i]);
	free(p->agents);
	curl_loop_free(p->curl);
	for (unsigned i = 0; i < p->n_rings; i++)
		gslb_demand_ring_free(p->rings[i]);
	free(p->rings);
	gslb_demand_map_free(p->demand);
	free(p->demand_body);
	gslb_paths_unref(p->table);
	explicit_bzero(p->token, sizeof(p->token));
	free(p);
	s->paths = NULL;
}

/* ---- steerctl paths and /metrics ------------------------------------------------------------- */

static json_t *ms_or_null(uint64_t ms)
{
	return ms ? json_integer((json_int_t)ms) : json_null();
}

static const char *state_name(agent_state_t st)
{
	return st == AGENT_UP ? "up" : st == AGENT_DOWN ? "down" : "unknown";
}

static json_t *agent_json(const agent_t *a, uint64_t now)
{
	json_t *results = json_object();
	for (size_t r = 0; r < FETCH_RESULTS; r++)
		json_object_set_new(results, result_names[r],
		                    json_integer((json_int_t)a->results[r]));
	json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "datacenter", a->datacenter,
	                      "url", a->url, "state", state_name(a->state), "last_fetch_ms",
	                      ms_or_null(a->last_fetch_wall_ms), "last_ok_ms",
	                      ms_or_null(a->last_ok_wall_ms), "fetches", results, "error",
	                      a->error[0] ? json_string(a->error) : json_null());
	if (a->generated_ms) {
		json_object_set_new(o, "etag", a->etag[0] ? json_string(a->etag) : json_null());
		json_object_set_new(o, "rows", json_integer((json_int_t)a->rows));
		json_object_set_new(o, "generated_ms", json_integer((json_int_t)a->generated_ms));
		json_object_set_new(o, "table_age_s",
		                    json_integer(now > a->generated_ms
		                                     ? (json_int_t)((now - a->generated_ms) / 1000)
		                                     : 0));
	} else {
		json_object_set_new(o, "rows", json_null());
	}
	return o;
}

static json_t *table_json(const struct paths *p)
{
	if (!p->table)
		return json_null();
	gslb_paths_info_t info;
	gslb_paths_info(p->table, &info);
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I}", "rows4",
	                 (json_int_t)info.rows4, "rows6", (json_int_t)info.rows6, "cells",
	                 (json_int_t)info.cells, "sticky_held", (json_int_t)info.sticky_held,
	                 "built_ms", (json_int_t)info.built_ms, "build_s", info.build_us / 1e6,
	                 "bytes", (json_int_t)info.bytes, "ipv4_prefix",
	                 (json_int_t)gslb_paths_prefix_len(p->table, AF_INET), "ipv6_prefix",
	                 (json_int_t)gslb_paths_prefix_len(p->table, AF_INET6));
}

/* "192.0.2.0/24" or "192.0.2.7" (IPv6 alike) into family and address bytes. */
static int parse_prefix(const char *text, int *family, uint8_t addr[16], char *err, size_t errlen)
{
	char buf[INET6_ADDRSTRLEN + 8];
	snprintf(buf, sizeof(buf), "%s", text);
	char *slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, buf, addr) == 1)
		*family = AF_INET;
	else if (inet_pton(AF_INET6, buf, addr) == 1)
		*family = AF_INET6;
	else {
		snprintf(err, errlen,
		         "paths: '%s' is not an address or prefix (192.0.2.0/24, "
		         "2001:db8::/48)",
		         text);
		return STEER_EINVAL;
	}
	if (slash) {
		char *end;
		long len = strtol(slash + 1, &end, 10);
		if (*end || end == slash + 1 || len < 0 || len > (*family == AF_INET ? 32 : 128)) {
			snprintf(err, errlen, "paths: bad prefix length in '%s'", text);
			return STEER_EINVAL;
		}
	}
	return 0;
}

static const char *column_name(const server_t *s, const gslb_paths_t *t, unsigned c)
{
	if (c == GSLB_PATHS_NO_COLUMN || c >= gslb_paths_columns(t))
		return NULL;
	size_t dc = gslb_paths_column_dc(t, c);
	return dc < s->conf->n_datacenters ? s->conf->datacenters[dc].name : NULL;
}

static json_t *row_json(const server_t *s, const gslb_paths_t *t, uint32_t row)
{
	int family;
	uint8_t addr[16];
	unsigned plen;
	gslb_paths_row_prefix(t, row, &family, addr, &plen);
	char text[INET6_ADDRSTRLEN + 8], ip[INET6_ADDRSTRLEN];
	inet_ntop(family, addr, ip, sizeof(ip));
	snprintf(text, sizeof(text), "%s/%u", ip, plen);
	json_t *cols = json_array();
	for (unsigned c = 0; c < gslb_paths_columns(t); c++) {
		gslb_path_cell_t cell = gslb_paths_cell(t, row, c);
		const char *name = column_name(s, t, c);
		json_t *o =
		    json_pack("{s:s, s:b}", "datacenter", name ? name : "?", "empty", cell.empty);
		if (!cell.empty) {
			json_object_set_new(o, "rtt_ms",
			                    cell.rtt == GSLB_PATHFMT_RTT_NONE
			                        ? json_null()
			                        : json_real(cell.rtt / 10.0));
			json_object_set_new(o, "loss", json_integer(cell.loss));
			json_object_set_new(o, "hops", json_integer(cell.hops));
			json_object_set_new(o, "age_s", json_integer(cell.age_s));
		}
		json_array_append_new(cols, o);
	}
	const char *best = column_name(s, t, gslb_paths_row_best(t, row));
	unsigned rounds = 0;
	const char *challenger = column_name(s, t, gslb_paths_row_challenger(t, row, &rounds));
	json_t *o = json_pack("{s:s, s:o, s:o}", "prefix", text, "best",
	                      best ? json_string(best) : json_null(), "columns", cols);
	if (challenger) {
		json_object_set_new(o, "challenger", json_string(challenger));
		json_object_set_new(o, "challenger_rounds", json_integer(rounds));
	}
	return o;
}

static json_t *demand_json(const struct paths *p, int family, const uint8_t *addr)
{
	unsigned plen = family == AF_INET ? p->cfg.ipv4_prefix : p->cfg.ipv6_prefix;
	gslb_demand_row_t row;
	if (!p->enabled || !gslb_demand_find(p->demand, family, addr, plen, mono_ms(), &row))
		return json_null();
	char probe[INET6_ADDRSTRLEN];
	inet_ntop(family, row.probe, probe, sizeof(probe));
	return json_pack("{s:I, s:s, s:b, s:b}", "volume", (json_int_t)row.volume, "probe", probe,
	                 "ecs", (row.flags & GSLB_DEMAND_ECS) != 0, "urgent",
	                 (row.flags & GSLB_DEMAND_URGENT) != 0);
}

int paths_json(const server_t *s, const char *prefix, json_t **data, char *err, size_t errlen)
{
	const struct paths *p = s->paths;
	int family = 0;
	uint8_t addr[16];
	if (prefix && parse_prefix(prefix, &family, addr, err, errlen) != 0)
		return STEER_EINVAL;
	uint64_t now = wall_ms(), dropped = 0;
	json_t *agents = json_array();
	for (size_t i = 0; p && i < p->n_agents; i++)
		json_array_append_new(agents, agent_json(&p->agents[i], now));
	for (unsigned i = 0; p && i < p->n_rings; i++)
		dropped += gslb_demand_ring_dropped(p->rings[i]);
	json_t *o = json_pack("{s:b, s:o, s:o, s:{s:I, s:I}}", "enabled", p && p->enabled, "agents",
	                      agents, "table", p ? table_json(p) : json_null(), "demand",
	                      "prefixes", (json_int_t)(p ? gslb_demand_rows(p->demand) : 0),
	                      "dropped", (json_int_t)dropped);
	if (prefix) {
		uint32_t row;
		json_object_set_new(o, "query", json_string(prefix));
		json_object_set_new(o, "row",
		                    p && p->table && gslb_paths_lookup(p->table, family, addr, &row)
		                        ? row_json(s, p->table, row)
		                        : json_null());
		json_object_set_new(o, "prefix_demand",
		                    p ? demand_json(p, family, addr) : json_null());
	}
	*data = o;
	return 0;
}

void paths_metrics(const server_t *s, prom_t *pm)
{
	const struct paths *p = s->paths;
	if (!p || !p->enabled)
		return;
	gslb_paths_info_t info = {0};
	if (p->table)
		gslb_paths_info(p->table, &info);
	prom_family(pm, "steer_paths_rows", "Rows (client prefixes) of the merged path table.",
	            PROM_GAUGE);
	prom_label_t v4 = {"family", "ipv4"}, v6 = {"family", "ipv6"};
	prom_gauge(pm, &v4, 1, (double)info.rows4);
	prom_gauge(pm, &v6, 1, (double)info.rows6);
	prom_family(pm, "steer_paths_agent_up",
	            "1 when the agent's last table fetch succeeded (200 or 304).", PROM_GAUGE);
	for (size_t i = 0; i < p->n_agents; i++) {
		prom_label_t l = {"datacenter", p->agents[i].datacenter};
		prom_gauge(pm, &l, 1, p->agents[i].state == AGENT_UP);
	}
	prom_family(pm, "steer_paths_fetch_total", "Table fetches by agent and result.",
	            PROM_COUNTER);
	for (size_t i = 0; i < p->n_agents; i++) {
		for (size_t r = 0; r < FETCH_RESULTS; r++) {
			prom_label_t l[] = {{"datacenter", p->agents[i].datacenter},
			                    {"result", result_names[r]}};
			prom_counter(pm, l, 2, p->agents[i].results[r]);
		}
	}
	prom_family(pm, "steer_paths_table_age_seconds",
	            "Seconds since the agent generated the table the node holds (NaN: none).",
	            PROM_GAUGE);
	uint64_t now = wall_ms();
	for (size_t i = 0; i < p->n_agents; i++) {
		const agent_t *a = &p->agents[i];
		prom_label_t l = {"datacenter", a->datacenter};
		double age = NAN;
		if (a->generated_ms)
			age =
			    now > a->generated_ms ? (double)(now - a->generated_ms) / 1000.0 : 0.0;
		prom_gauge(pm, &l, 1, age);
	}
	prom_family(pm, "steer_paths_build_seconds", "How long the last merge of the tables took.",
	            PROM_GAUGE);
	prom_gauge(pm, NULL, 0, p->build_s);
	prom_family(pm, "steer_paths_builds_total", "Merges of the agents' tables.", PROM_COUNTER);
	prom_counter(pm, NULL, 0, p->builds);
	prom_family(pm, "steer_paths_demand_prefixes",
	            "Client prefixes in the demand report (/paths/demand).", PROM_GAUGE);
	prom_gauge(pm, NULL, 0, (double)gslb_demand_rows(p->demand));
	uint64_t dropped = 0;
	for (unsigned i = 0; i < p->n_rings; i++)
		dropped += gslb_demand_ring_dropped(p->rings[i]);
	prom_family(pm, "steer_paths_demand_dropped_total",
	            "Demand reports dropped because a query thread's ring was full.", PROM_COUNTER);
	prom_counter(pm, NULL, 0, dropped);
}
