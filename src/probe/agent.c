/*
 * The agent (probe/agent.h): the demand timer, the scheduler that turns due rows into
 * measurements of `samples` spaced probes, the publisher that re-encodes the site table and the
 * two HTTP pages. Everything runs on the loop the caller passes; the table, the sender and the
 * nodes belong to it.
 */
#include "probe/agent.h"

#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "ctl/http.h"
#include "dns/dname.h"
#include "gslb/pathfmt.h"
#include "probe/nodes.h"
#include "probe/sender.h"
#include "probe/table.h"

/* Samples of one measurement are this far apart: enough that one burst of loss (a queue
 * overflowing for a few milliseconds) does not take every sample, short enough that a
 * measurement ends within a second. */
#define SAMPLE_SPACING_MS 50u
/* The scheduler never sleeps longer than this, so a merge or a finished measurement that made
 * a row due is noticed soon even without a kick. */
#define SCHED_MAX_SLEEP_MS 1000u
/* ... and never shorter than this: measurements due within it start together, so at 2,000
 * probes/s the loop wakes a hundred times a second instead of once per measurement (the
 * budget's bucket holds a tenth of a second, so batching never loses budget). */
#define SCHED_MIN_SLEEP_MS 10u
/* An unchanged table is still re-encoded this often, so its generated time (which the nodes
 * compare with path-ttl) keeps moving while the agent is alive. */
#define REPUBLISH_MS 60000u
/* The nodes of one poll round answer within a few milliseconds of each other on a healthy
 * network; a merge this long after the first answer takes the others along. */
#define MERGE_DELAY_MS 100u
/* A measurement none of whose probes could leave this host is tried again after this. */
#define LOCAL_RETRY_MS 1000u

static const char *const method_names[CONF_PROBE_METHODS] = {"dns", "tcp", "icmp"};
static log_ratelimit_t send_log;

/* A published table body, shared by the responses in flight (refcounted). */
typedef struct {
	unsigned refs;
	size_t len;
	uint8_t data[];
} table_body_t;

/* One measurement in flight: the row's identity (rows move when the table is merged), what
 * it probes and what came back so far. */
typedef struct measure {
	struct probe_agent *agent;
	uint8_t family, plen;
	uint64_t key;
	uint8_t addr[16];
	conf_probe_method_t method;
	unsigned sent, done;
	unsigned local_errors; /* samples this host could not send (no path errors excluded) */
	probe_result_t res;
	ev_timer next; /* the next sample */
	struct measure *prev, *nextm;
} measure_t;

struct probe_agent {
	struct ev_loop *loop;
	const conf_t *conf;
	const conf_paths_t *paths;
	char name[GSLB_PATHFMT_NAME_MAX + 1];
	probe_table_t *table;
	probe_sender_t *sender;
	probe_nodes_t *nodes;
	ctl_http_t *http;
	ev_timer demand_timer, publish_timer, sched_timer;
	ev_timer merge_timer; /* one merge for every node's answers of a poll round */
	measure_t *measures;  /* in flight, doubly linked */
	size_t n_measures;
	uint64_t measurements, retries, rejected_rows, full_rows, local_failures;
	bool full_logged, behind;
	table_body_t *body; /* the current table; NULL before the first publish */
	char etag[32];
	uint64_t generated_ms, published_mono_ms;
	size_t published4, published6;
	uint64_t rate_window_ms, rate_window_sent; /* budget use over the last publish interval */
	double rate_used;
	uint64_t merge_pace_ms, publish_pace_ms; /* not before then (mono ms) */
};

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- the configuration ---------------------------------------------------------------- */

static const conf_path_agent_t *own_entry(const conf_t *conf, const char *dc, size_t *dc_index)
{
	for (size_t i = 0; i < conf->paths.n_agents; i++) {
		const conf_path_agent_t *a = &conf->paths.agents[i];
		if (a->datacenter < conf->n_datacenters &&
		    strcmp(conf->datacenters[a->datacenter].name, dc) == 0) {
			*dc_index = a->datacenter;
			return a;
		}
	}
	return NULL;
}

/* "http://ADDR:PORT/..." -> ADDR:PORT (80 without a port). */
static int url_listen(const char *url, steer_sockaddr_t *out)
{
	const char *p = strstr(url, "://");
	if (p == NULL || strncmp(url, "http://", 7) != 0)
		return STEER_EINVAL;
	p += 3;
	size_t len = strcspn(p, "/");
	char host[STEER_SOCKADDR_STRLEN];
	if (len == 0 || len >= sizeof(host))
		return STEER_EINVAL;
	memcpy(host, p, len);
	host[len] = '\0';
	return steer_sockaddr_parse(host, 80, out);
}

static int listen_addr(const probe_agent_opts_t *opts, const conf_path_agent_t *entry,
                       steer_sockaddr_t *out, char *err, size_t errlen)
{
	const char *file = opts->conf->path ? opts->conf->path : "(config)";
	if (opts->listen != NULL) {
		if (steer_sockaddr_parse(opts->listen, 0, out) != 0 ||
		    steer_sockaddr_port(out) == 0) {
			snprintf(err, errlen,
			         "--listen %s: expected ADDR:PORT (IPv6 as [::1]:8054)",
			         opts->listen);
			return STEER_ECONF;
		}
		return 0;
	}
	if (url_listen(entry->url, out) != 0) {
		snprintf(
		    err, errlen,
		    "%s:%u: paths.agents url %s: the agent listens on the URL's address, so it "
		    "must be http://ADDRESS:PORT/ (or give --listen)",
		    file, entry->line, entry->url);
		return STEER_ECONF;
	}
	return 0;
}

static int check_paths(const probe_agent_opts_t *opts, const conf_path_agent_t **entry, char *err,
                       size_t errlen)
{
	const conf_t *conf = opts->conf;
	const conf_paths_t *p = &conf->paths;
	const char *file = conf->path ? conf->path : "(config)";
	size_t dc = 0;
	if (!p->enabled) {
		snprintf(err, errlen, "%s: no paths: section: steer-probe has nothing to do", file);
		return STEER_ECONF;
	}
	*entry = own_entry(conf, opts->datacenter, &dc);
	if (*entry == NULL) {
		snprintf(err, errlen, "%s:%u: datacenter %s has no entry in paths.agents", file,
		         p->line, opts->datacenter);
		return STEER_ECONF;
	}
	if (p->n_nodes == 0) {
		snprintf(err, errlen,
		         "%s:%u: paths.probe.nodes is empty: no node to ask for demand", file,
		         p->line);
		return STEER_ECONF;
	}
	bool dns = false;
	for (size_t i = 0; i < p->n_methods; i++)
		dns |= p->methods[i] == CONF_PROBE_DNS;
	uint8_t qname[DNS_DNAME_MAXLEN];
	if (dns && (p->dns_name == NULL || dname_from_str(p->dns_name, qname) <= 0)) {
		snprintf(err, errlen,
		         "%s:%u: paths.probe.dns-name: needed (a name in our own zone) "
		         "when dns is a method",
		         file, p->line);
		return STEER_ECONF;
	}
	if (p->n_methods == 0 || p->probe_rate == 0 || p->probe_samples == 0) {
		snprintf(err, errlen, "%s:%u: paths.probe: methods, rate and samples must be set",
		         file, p->line);
		return STEER_ECONF;
	}
	return 0;
}

int probe_agent_check(const probe_agent_opts_t *opts, char *err, size_t errlen)
{
	const conf_path_agent_t *entry = NULL;
	int ret = check_paths(opts, &entry, err, errlen);
	steer_sockaddr_t addr;
	if (ret == 0)
		ret = listen_addr(opts, entry, &addr, err, errlen);
	char token[CTL_HTTP_TOKEN_MAX + 1];
	if (ret == 0 && opts->conf->paths.token_file != NULL)
		ret = ctl_http_token_read(opts->conf->paths.token_file, token, sizeof(token), err,
		                          errlen);
	return ret;
}

/* ---- measurements --------------------------------------------------------------------- */

static void kick(probe_agent_t *a);

static void measure_free(probe_agent_t *a, measure_t *m)
{
	ev_timer_stop(a->loop, &m->next);
	if (m->prev)
		m->prev->nextm = m->nextm;
	else
		a->measures = m->nextm;
	if (m->nextm)
		m->nextm->prev = m->prev;
	a->n_measures--;
	free(m);
}

static void measure_finish(probe_agent_t *a, measure_t *m)
{
	probe_row_t *row = probe_table_find(a->table, m->family, m->plen, m->key);
	if (row != NULL && m->local_errors == m->sent) {
		a->local_failures++;
		probe_table_abort(a->table, row, mono_ms() + LOCAL_RETRY_MS);
	} else if (row != NULL) {
		if (probe_table_done(a->table, row, &m->res, mono_ms()))
			a->measurements++;
		else
			a->retries++;
	}
	measure_free(a, m);
}

/* Errors that are the path's answer (no route, refused by a filter on the way) rather than
 * this host's trouble (out of descriptors, buffers or memory). */
static bool path_error(int ret)
{
	return ret == -ENETUNREACH || ret == -EHOSTUNREACH || ret == -EPERM || ret == -EACCES ||
	       ret == -ECONNREFUSED || ret == -EADDRNOTAVAIL;
}

/* One sample more; when it could not be sent it counts as lost at once. */
static void measure_send(probe_agent_t *a, measure_t *m)
{
	m->sent++;
	m->res.sent++;
	int family = m->family == 4 ? AF_INET : AF_INET6;
	int ret = probe_sender_send(a->sender, m->method, family, m->addr, (uint64_t)(uintptr_t)m);
	if (ret != 0) {
		m->done++;
		if (!path_error(ret)) {
			m->local_errors++;
			log_ratelimited(&send_log, LOG_LEVEL_WARNING,
			                "probe: cannot send a %s probe: %s",
			                method_names[m->method], steer_strerror(ret));
		}
	}
}

static void on_next_sample(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	measure_t *m = w->data;
	probe_agent_t *a = m->agent;
	unsigned samples = a->paths->probe_samples;
	measure_send(a, m);
	if (m->sent < samples) {
		ev_timer_set(&m->next, SAMPLE_SPACING_MS / 1000.0, 0);
		ev_timer_start(a->loop, &m->next);
	} else if (m->done == samples) {
		measure_finish(a, m);
		kick(a);
	}
}

static void on_sample(void *ctx, uint64_t token, bool answered, uint32_t rtt_us, uint8_t ttl)
{
	probe_agent_t *a = ctx;
	measure_t *m = (measure_t *)(uintptr_t)token;
	m->done++;
	if (answered) {
		if (m->res.answered == 0 || rtt_us < m->res.min_rtt_us)
			m->res.min_rtt_us = rtt_us;
		m->res.answered++;
		if (ttl != 0)
			m->res.ttl = ttl;
	}
	if (m->done == a->paths->probe_samples) {
		measure_finish(a, m);
		kick(a);
	}
}

static void measure_start(probe_agent_t *a, const probe_row_t *row)
{
	measure_t *m = xcalloc(1, sizeof(*m));
	m->agent = a;
	m->family = row->family;
	m->plen = row->plen;
	m->key = row->key;
	memcpy(m->addr, row->probe, sizeof(m->addr));
	m->method = a->paths->methods[row->trying];
	m->nextm = a->measures;
	if (a->measures)
		a->measures->prev = m;
	a->measures = m;
	a->n_measures++;
	ev_timer_init(&m->next, on_next_sample, 0, 0);
	m->next.data = m;
	/* The first sample from the loop too: a send that fails at once must not finish the
	 * measurement inside the scheduler's loop over the table. */
	ev_feed_event(a->loop, &m->next, EV_TIMER);
}

static void schedule(probe_agent_t *a)
{
	uint64_t now = mono_ms();
	const probe_row_t *row;
	while ((row = probe_table_next(a->table, now)) != NULL)
		measure_start(a, row);
	uint64_t wait = probe_table_wait(a->table, now);
	if (wait > SCHED_MAX_SLEEP_MS)
		wait = SCHED_MAX_SLEEP_MS;
	if (wait < SCHED_MIN_SLEEP_MS)
		wait = SCHED_MIN_SLEEP_MS;
	ev_timer_stop(a->loop, &a->sched_timer);
	ev_timer_set(&a->sched_timer, wait / 1000.0, 0);
	ev_timer_start(a->loop, &a->sched_timer);
}

/* Something became due (a measurement ended, a method retry is waiting): let the scheduler
 * run within its minimum sleep instead of waiting out a longer one. */
static void kick(probe_agent_t *a)
{
	if (ev_timer_remaining(a->loop, &a->sched_timer) > SCHED_MIN_SLEEP_MS / 1000.0) {
		ev_timer_stop(a->loop, &a->sched_timer);
		ev_timer_set(&a->sched_timer, SCHED_MIN_SLEEP_MS / 1000.0, 0);
		ev_timer_start(a->loop, &a->sched_timer);
	}
}

static void on_sched(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	schedule(w->data);
}

/* ---- demand --------------------------------------------------------------------------- */

/* The work of a merge or a publish grows with the rows (about half a second each for a
 * million): the next one waits this many times as long as the last took, so together they
 * never take more than a few percent of the loop however large the table. */
#define PACE_FACTOR 40u

static uint64_t paced(uint64_t start_ms, uint64_t end_ms)
{
	return end_ms + (end_ms - start_ms) * PACE_FACTOR;
}

static void merge_demand(probe_agent_t *a)
{
	uint64_t start = mono_ms();
	size_t expect = 0;
	for (size_t i = 0; i < probe_nodes_count(a->nodes); i++) {
		uint64_t ok_ms = 0;
		const gslb_demand_t *d = probe_nodes_demand(a->nodes, i, &ok_ms);
		expect = d != NULL && d->n > expect ? d->n : expect;
	}
	probe_table_merge_begin(a->table, expect);
	size_t full = 0;
	for (size_t i = 0; i < probe_nodes_count(a->nodes); i++) {
		uint64_t ok_ms = 0;
		const gslb_demand_t *d = probe_nodes_demand(a->nodes, i, &ok_ms);
		for (size_t r = 0; d != NULL && r < d->n; r++) {
			int ret = probe_table_merge_add(a->table, &d->rows[r], ok_ms);
			a->rejected_rows += ret == STEER_EINVAL;
			full += ret == STEER_ESPACE;
		}
	}
	size_t dropped = probe_table_merge_end(a->table, mono_ms());
	a->merge_pace_ms = paced(start, mono_ms());
	if (dropped > 0)
		log_info("probe: %zu prefixes no node reported for forget-after dropped", dropped);
	a->full_rows = full;
	if ((full > 0) != a->full_logged) {
		a->full_logged = full > 0;
		if (full > 0)
			log_warn(
			    "probe: table full (max-prefixes %u): %zu demanded prefixes not probed",
			    a->paths->max_prefixes, full);
		else
			log_notice("probe: every demanded prefix fits the table again");
	}
	schedule(a);
}

static void on_merge_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	merge_demand(w->data);
}

/* A node answered: merge soon, once for all the nodes answering in the same round, so the
 * cost of a merge (every row of every node) is paid once per demand-interval, not per node. */
static void on_node_fetched(void *ctx)
{
	probe_agent_t *a = ctx;
	if (!ev_is_active(&a->merge_timer)) {
		uint64_t now = mono_ms(), delay = MERGE_DELAY_MS;
		if (a->merge_pace_ms > now + delay)
			delay = a->merge_pace_ms - now;
		ev_timer_set(&a->merge_timer, delay / 1000.0, 0);
		ev_timer_start(a->loop, &a->merge_timer);
	}
}

static void on_demand_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	probe_agent_t *a = w->data;
	probe_nodes_poll(a->nodes, mono_ms());
}

/* ---- publishing ----------------------------------------------------------------------- */

static void body_unref(table_body_t *b)
{
	if (b != NULL && --b->refs == 0)
		free(b);
}

static void page_body_free(void *data)
{
	body_unref((table_body_t *)((uint8_t *)data - offsetof(table_body_t, data)));
}

static void publish(probe_agent_t *a)
{
	uint64_t now = unix_ms(), mono = mono_ms();
	if (now <= a->generated_ms)
		now = a->generated_ms + 1; /* the ETag must change with every new body */
	gslb_path_table_t t;
	probe_table_snapshot(a->table, a->name, now, mono, &t);
	size_t size = gslb_pathfmt_table_size(&t);
	table_body_t *b = xmalloc(sizeof(*b) + size);
	b->refs = 1;
	b->len = gslb_pathfmt_encode_table(&t, b->data, size);
	size_t n4 = t.n4, n6 = t.n6;
	gslb_pathfmt_table_free(&t);
	if (b->len == 0) {
		log_err("probe: the site table does not encode (a bug): keeping the last one");
		free(b);
		return;
	}
	body_unref(a->body);
	a->body = b;
	a->generated_ms = now;
	a->published_mono_ms = mono;
	a->published4 = n4;
	a->published6 = n6;
	snprintf(a->etag, sizeof(a->etag), "\"%llu\"", (unsigned long long)now);
}

static uint64_t probes_sent(const probe_agent_t *a)
{
	uint64_t n = 0;
	for (unsigned m = 0; m < CONF_PROBE_METHODS; m++)
		n += probe_sender_stats(a->sender, (conf_probe_method_t)m).sent;
	return n;
}

/* Log once when the budget cannot keep up with the rows, and once when it can again. */
static void watch_budget(probe_agent_t *a, uint64_t mono)
{
	size_t backlog = probe_table_backlog(a->table, mono);
	double need = probe_table_needed_rate(a->table);
	bool behind = backlog > 0 && need > a->paths->probe_rate;
	if (behind == a->behind)
		return;
	a->behind = behind;
	if (behind)
		log_warn("probe: budget too small: %.0f probes/s needed for %zu prefixes, rate %u; "
		         "%zu prefixes overdue",
		         need, probe_table_rows(a->table), a->paths->probe_rate, backlog);
	else
		log_notice(
		    "probe: budget covers every prefix again (%.0f probes/s needed, rate %u)", need,
		    a->paths->probe_rate);
}

static void on_publish_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	probe_agent_t *a = w->data;
	uint64_t mono = mono_ms();
	bool due = probe_table_dirty(a->table) || mono - a->published_mono_ms >= REPUBLISH_MS;
	if (a->body == NULL || (due && mono >= a->publish_pace_ms)) {
		publish(a);
		a->publish_pace_ms = paced(mono, mono_ms());
	}
	uint64_t sent = probes_sent(a);
	if (mono > a->rate_window_ms)
		a->rate_used = (double)(sent - a->rate_window_sent) * 1000.0 /
		               (double)(mono - a->rate_window_ms);
	a->rate_window_ms = mono;
	a->rate_window_sent = sent;
	watch_budget(a, mono);
}

static int table_page(const char *path, ctl_http_page_t *page, char *err, size_t errlen, void *ctx)
{
	(void)path;
	probe_agent_t *a = ctx;
	if (a->body == NULL) {
		snprintf(err, errlen, "no table published yet");
		return STEER_EAGAIN;
	}
	a->body->refs++;
	page->content_type = "application/vnd.steer.paths";
	page->body = a->body->data;
	page->len = a->body->len;
	page->free_body = page_body_free;
	page->etag = a->etag;
	return 0;
}

static json_t *methods_json(const probe_agent_t *a)
{
	json_t *o = json_object();
	for (unsigned m = 0; m < CONF_PROBE_METHODS; m++) {
		probe_method_stats_t st = probe_sender_stats(a->sender, (conf_probe_method_t)m);
		json_object_set_new(o, method_names[m],
		                    json_pack("{s:I, s:I, s:I}", "sent", (json_int_t)st.sent,
		                              "answered", (json_int_t)st.answered, "errors",
		                              (json_int_t)st.errors));
	}
	return o;
}

static json_t *rows_json(probe_agent_t *a)
{
	size_t measured = 0, urgent = 0, hot = 0, silent = 0;
	for (size_t i = 0; i < probe_table_rows(a->table); i++) {
		const probe_row_t *r = probe_table_row(a->table, i);
		measured += r->measured;
		urgent += r->first;
		hot += r->hot;
		silent += r->measured && r->rtt == GSLB_PATHFMT_RTT_NONE;
	}
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "total",
	                 (json_int_t)probe_table_rows(a->table), "measured", (json_int_t)measured,
	                 "urgent", (json_int_t)urgent, "hot", (json_int_t)hot, "silent",
	                 (json_int_t)silent, "rejected", (json_int_t)a->rejected_rows,
	                 "not_fitting", (json_int_t)a->full_rows);
}

static void json_body_free(void *body)
{
	free(body);
}

static int status_page(const char *path, ctl_http_page_t *page, char *err, size_t errlen, void *ctx)
{
	(void)path;
	probe_agent_t *a = ctx;
	uint64_t mono = mono_ms();
	json_t *budget =
	    json_pack("{s:I, s:f, s:f, s:I, s:I}", "rate", (json_int_t)a->paths->probe_rate, "used",
	              a->rate_used, "needed", probe_table_needed_rate(a->table), "backlog",
	              (json_int_t)probe_table_backlog(a->table, mono), "pending",
	              (json_int_t)probe_sender_pending(a->sender));
	json_t *table = json_pack("{s:I, s:I, s:I, s:s}", "generated_ms",
	                          (json_int_t)a->generated_ms, "ipv4", (json_int_t)a->published4,
	                          "ipv6", (json_int_t)a->published6, "etag", a->etag);
	json_t *o =
	    json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:b, s:b}", "datacenter", a->name,
	              "rows", rows_json(a), "probes", methods_json(a), "budget", budget, "table",
	              table, "nodes", probe_nodes_json(a->nodes, mono), "measurements",
	              (json_int_t)a->measurements, "method_retries", (json_int_t)a->retries,
	              "icmp_raw4", probe_sender_icmp_raw(a->sender, AF_INET), "icmp_raw6",
	              probe_sender_icmp_raw(a->sender, AF_INET6));
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (text == NULL) {
		snprintf(err, errlen, "cannot build the status");
		return STEER_ENOMEM;
	}
	page->content_type = "application/json";
	page->body = text;
	page->len = strlen(text);
	page->free_body = json_body_free;
	return 0;
}

/* ---- start and stop ------------------------------------------------------------------- */

/* A node still calling a prefix urgent this long after we measured it has not seen our table
 * yet (publish, fetch and demand intervals); re-measuring it sooner than a hot prefix would
 * spend the budget on a node that cannot reach us. */
static uint64_t urgent_stale(const conf_paths_t *p)
{
	uint64_t seen = (uint64_t)p->publish_interval + p->fetch_interval + p->demand_interval;
	return seen > p->hot_interval ? seen : p->hot_interval;
}

static probe_table_opts_t table_opts(const conf_paths_t *p)
{
	return (probe_table_opts_t){
	    .rate = p->probe_rate,
	    .samples = p->probe_samples,
	    .interval = p->probe_interval,
	    .hot_interval = p->hot_interval,
	    .hot_share = p->hot_share,
	    .smoothing = p->smoothing,
	    .n_methods = (unsigned)p->n_methods,
	    .max_rows = p->max_prefixes,
	    .forget_after = (uint64_t)p->forget_after * 1000u,
	    .urgent_stale = urgent_stale(p),
	};
}

static void start_timers(probe_agent_t *a)
{
	const conf_paths_t *p = a->paths;
	ev_timer_init(&a->demand_timer, on_demand_timer, 0, p->demand_interval / 1000.0);
	a->demand_timer.data = a;
	ev_timer_start(a->loop, &a->demand_timer);
	ev_timer_init(&a->publish_timer, on_publish_timer, 0, p->publish_interval / 1000.0);
	a->publish_timer.data = a;
	ev_timer_start(a->loop, &a->publish_timer);
	ev_timer_init(&a->merge_timer, on_merge_timer, 0, 0);
	a->merge_timer.data = a;
	ev_timer_init(&a->sched_timer, on_sched, SCHED_MAX_SLEEP_MS / 1000.0, 0);
	a->sched_timer.data = a;
	ev_timer_start(a->loop, &a->sched_timer);
}

static int start_http(probe_agent_t *a, const steer_sockaddr_t *listen, const char *token,
                      char *err, size_t errlen)
{
	ctl_http_opts_t hopts = {
	    .listen = listen, .n_listen = 1, .token = token, .read_only_open = token == NULL};
	int ret = ctl_http_start(&a->http, a->loop, &hopts, NULL, err, errlen);
	if (ret == 0)
		ret = ctl_http_add_page(a->http, "/paths/table", table_page, a);
	if (ret == 0)
		ret = ctl_http_add_page(a->http, "/paths/status", status_page, a);
	return ret;
}

static void sender_opts(const probe_agent_opts_t *opts, const conf_path_agent_t *entry,
                        probe_sender_opts_t *so)
{
	const conf_paths_t *p = &opts->conf->paths;
	memset(so, 0, sizeof(*so));
	if (p->dns_name == NULL || dname_from_str(p->dns_name, so->qname) <= 0)
		so->qname[0] = 0; /* no dns method (checked): the root, never sent */
	if (entry->source.sa.sa_family == AF_INET)
		so->source4 = entry->source;
	else if (entry->source.sa.sa_family == AF_INET6)
		so->source6 = entry->source;
	so->timeout_ms = p->probe_timeout;
	so->port = opts->probe_port ? opts->probe_port : PROBE_DNS_PORT;
}

int probe_agent_start(struct ev_loop *loop, const probe_agent_opts_t *opts, probe_agent_t **out,
                      char *err, size_t errlen)
{
	const conf_path_agent_t *entry = NULL;
	steer_sockaddr_t listen;
	char token[CTL_HTTP_TOKEN_MAX + 1] = "";
	int ret = check_paths(opts, &entry, err, errlen);
	if (ret == 0)
		ret = listen_addr(opts, entry, &listen, err, errlen);
	if (ret == 0 && opts->conf->paths.token_file != NULL)
		ret = ctl_http_token_read(opts->conf->paths.token_file, token, sizeof(token), err,
		                          errlen);
	if (ret != 0)
		return ret;
	probe_agent_t *a = xcalloc(1, sizeof(*a));
	a->loop = loop;
	a->conf = opts->conf;
	a->paths = &opts->conf->paths;
	snprintf(a->name, sizeof(a->name), "%s", opts->datacenter);
	probe_table_opts_t to = table_opts(a->paths);
	a->table = probe_table_new(&to, mono_ms());
	probe_sender_opts_t so;
	sender_opts(opts, entry, &so);
	ret = probe_sender_new(loop, &so, on_sample, a, &a->sender);
	probe_nodes_opts_t no = {.urls = a->paths->nodes,
	                         .n_urls = a->paths->n_nodes,
	                         .token = token[0] ? token : NULL,
	                         .timeout_ms = a->paths->fetch_timeout,
	                         .max_rows = a->paths->max_prefixes};
	if (ret == 0)
		ret = probe_nodes_new(loop, &no, on_node_fetched, a, &a->nodes, err, errlen);
	if (ret == 0)
		ret = start_http(a, &listen, token[0] ? token : NULL, err, errlen);
	if (ret != 0) {
		probe_agent_stop(a);
		return ret;
	}
	start_timers(a);
	char text[STEER_SOCKADDR_STRLEN];
	log_notice("probe: datacenter %s, %zu nodes, methods %zu, rate %u/s, serving %s", a->name,
	           a->paths->n_nodes, a->paths->n_methods, a->paths->probe_rate,
	           steer_sockaddr_str(&listen, text, sizeof(text)));
	*out = a;
	return 0;
}

uint16_t probe_agent_port(const probe_agent_t *a)
{
	return ctl_http_port(a->http, 0);
}

void probe_agent_stop(probe_agent_t *a)
{
	if (a == NULL)
		return;
	ev_timer_stop(a->loop, &a->demand_timer);
	ev_timer_stop(a->loop, &a->publish_timer);
	ev_timer_stop(a->loop, &a->sched_timer);
	ev_timer_stop(a->loop, &a->merge_timer);
	ctl_http_stop(a->http);
	probe_nodes_free(a->nodes);
	probe_sender_free(a->sender);
	while (a->measures != NULL)
		measure_free(a, a->measures);
	body_unref(a->body);
	probe_table_free(a->table);
	free(a);
}
