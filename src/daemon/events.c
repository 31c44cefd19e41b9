/*
 * State-change events (see events.h): the ring, the structured log line, the diffs that
 * turn two snapshots of a state into events, and the timer that polls the forwarder and the
 * cluster node. Control thread only.
 */
#include "daemon/events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/log.h"

void events_init(events_t *ev)
{
	memset(ev, 0, sizeof(*ev));
}

static void links_free(events_t *ev)
{
	for (size_t i = 0; i < ev->n_links; i++)
		free(ev->links[i]);
	free(ev->links);
	free(ev->link_down);
	ev->links = NULL;
	ev->link_down = NULL;
	ev->n_links = 0;
}

void events_deinit(events_t *ev)
{
	if (ev->loop != NULL)
		ev_timer_stop(ev->loop, &ev->watch_w);
	ev->loop = NULL;
	free(ev->ups);
	ev->ups = NULL;
	ev->n_ups = 0;
	links_free(ev);
}

void events_set_sink(events_t *ev, events_sink_cb sink, void *ctx)
{
	ev->sink = sink;
	ev->sink_ctx = ctx;
}

const char *event_kind_name(event_kind_t kind)
{
	switch (kind) {
	case EVENT_TARGET:
		return "target";
	case EVENT_SERVICE:
		return "service";
	case EVENT_DATACENTER:
		return "datacenter";
	case EVENT_UPSTREAM:
		return "upstream";
	case EVENT_LINK:
		return "link";
	case EVENT_CLUSTER:
		return "cluster";
	case EVENT_RELOAD:
		return "reload";
	}
	return "unknown";
}

/* States an operator must act on are logged as warnings, recoveries as notices. */
static bool state_is_bad(const char *state)
{
	static const char *const bad[] = {"down",      "all-down",  "failed",
	                                  "withdrawn", "link-down", "degraded",
	                                  "draining",  "drained",   "upstream-down"};
	for (size_t i = 0; i < STEER_ARRAY_LEN(bad); i++)
		if (strcmp(state, bad[i]) == 0)
			return true;
	return false;
}

static double now_epoch(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The reason as one logfmt value: quotes and backslashes escaped (copy_text() took out the
 * control characters). */
static void quote_reason(const char *in, char *out, size_t size)
{
	size_t o = 0;
	for (const char *p = in; *p && o + 3 < size; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"' || c == '\\')
			out[o++] = '\\';
		out[o++] = (char)c;
	}
	out[o] = '\0';
}

/* Length of the valid UTF-8 sequence at @p p (1..4), 0 when it is not one. */
static size_t utf8_len(const unsigned char *p)
{
	size_t n = p[0] < 0x80             ? 1
	           : (p[0] & 0xe0) == 0xc0 ? 2
	           : (p[0] & 0xf0) == 0xe0 ? 3
	           : (p[0] & 0xf8) == 0xf0 ? 4
	                                   : 0;
	if (n == 0 || (n == 2 && p[0] < 0xc2))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/*
 * Copy @p in into @p out as printable UTF-8: JSON (the events list, webhooks) cannot carry
 * other bytes, and a probe's detail may quote whatever a backend answered. Invalid bytes
 * and control characters become '?'.
 */
static void copy_text(char *out, size_t size, const char *in)
{
	size_t o = 0;
	const unsigned char *p = (const unsigned char *)in;
	while (*p && o + 1 < size) {
		size_t n = utf8_len(p);
		if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f))) {
			out[o++] = '?';
			p++;
			continue;
		}
		if (o + n >= size)
			break;
		memcpy(out + o, p, n);
		o += n;
		p += n;
	}
	out[o] = '\0';
}

uint64_t events_emit(events_t *ev, event_kind_t kind, const char *subject, const char *from,
                     const char *to, const char *reason)
{
	event_t *e = &ev->ring[ev->last_seq % EVENTS_RING];
	e->seq = ++ev->last_seq;
	e->time = now_epoch();
	e->kind = kind;
	copy_text(e->subject, sizeof(e->subject), subject);
	copy_text(e->from, sizeof(e->from), from);
	copy_text(e->to, sizeof(e->to), to);
	copy_text(e->reason, sizeof(e->reason), reason);
	char quoted[2 * EVENT_REASON_MAX];
	quote_reason(e->reason, quoted, sizeof(quoted));
	log_msg(state_is_bad(e->to) ? LOG_LEVEL_WARNING : LOG_LEVEL_NOTICE,
	        "event kind=%s subject=%s from=%s to=%s reason=\"%s\" seq=%llu",
	        event_kind_name(kind), e->subject, e->from, e->to, quoted,
	        (unsigned long long)e->seq);
	if (ev->sink)
		ev->sink(e, ev->sink_ctx);
	return e->seq;
}

json_t *event_json(const event_t *e)
{
	return json_pack("{s:I, s:f, s:s, s:s, s:s, s:s, s:s}", "seq", (json_int_t)e->seq, "time",
	                 e->time, "kind", event_kind_name(e->kind), "subject", e->subject, "from",
	                 e->from, "to", e->to, "reason", e->reason);
}

json_t *events_json(const events_t *ev, uint64_t since, size_t max)
{
	json_t *list = json_array();
	uint64_t first = ev->last_seq > EVENTS_RING ? ev->last_seq - EVENTS_RING + 1 : 1;
	if (since + 1 > first)
		first = since + 1;
	if (max > 0 && ev->last_seq >= first && ev->last_seq - first + 1 > max)
		first = ev->last_seq - max + 1;
	for (uint64_t seq = first; seq <= ev->last_seq; seq++)
		json_array_append_new(list, event_json(&ev->ring[(seq - 1) % EVENTS_RING]));
	return list;
}

/* ---- GSLB health --------------------------------------------------------------------- */

/* "service/<service>/<datacenter>/<address>" split in place; false for other names. */
typedef struct {
	const char *service, *dc;
	size_t service_len, dc_len;
} target_name_t;

static bool target_name_split(const char *name, target_name_t *out)
{
	if (name == NULL || strncmp(name, "service/", 8) != 0)
		return false;
	out->service = name + 8;
	const char *slash = strchr(out->service, '/');
	if (slash == NULL)
		return false;
	out->service_len = (size_t)(slash - out->service);
	out->dc = slash + 1;
	slash = strchr(out->dc, '/');
	if (slash == NULL)
		return false;
	out->dc_len = (size_t)(slash - out->dc);
	return true;
}

/* A service or datacenter: whether the two tables have targets in it, and any of them UP. */
typedef struct {
	const char *name; /* borrowed from a table's names, @c len bytes */
	size_t len;
	bool seen[2], up[2];
} group_t;

typedef struct {
	group_t *g;
	size_t n, cap;
	size_t last; /* the group found last: targets of one group are mostly adjacent */
} groups_t;

static group_t *group_get(groups_t *gs, const char *name, size_t len)
{
	if (gs->last < gs->n && gs->g[gs->last].len == len &&
	    strncmp(gs->g[gs->last].name, name, len) == 0)
		return &gs->g[gs->last];
	for (size_t i = 0; i < gs->n; i++) {
		if (gs->g[i].len == len && strncmp(gs->g[i].name, name, len) == 0) {
			gs->last = i;
			return &gs->g[i];
		}
	}
	if (gs->n == gs->cap) {
		gs->cap = gs->cap ? 2 * gs->cap : 16;
		gs->g = xrealloc(gs->g, gs->cap * sizeof(*gs->g));
	}
	gs->g[gs->n] = (group_t){.name = name, .len = len};
	gs->last = gs->n;
	return &gs->g[gs->n++];
}

static void groups_count(groups_t *services, groups_t *dcs, const gslb_health_t *h, int which)
{
	for (uint32_t id = 0; id < h->count; id++) {
		gslb_health_entry_t e;
		target_name_t tn;
		if (gslb_health_entry(h, id, &e) != 0 || !target_name_split(e.name, &tn))
			continue;
		bool up = !gslb_sttl_down(e.eff);
		group_t *g = group_get(services, tn.service, tn.service_len);
		g->seen[which] = true;
		g->up[which] |= up;
		g = group_get(dcs, tn.dc, tn.dc_len);
		g->seen[which] = true;
		g->up[which] |= up;
	}
}

/* Groups in both tables whose all-down state changed. */
static void groups_emit(events_t *ev, const groups_t *gs, event_kind_t kind, const char *prefix)
{
	for (size_t i = 0; i < gs->n; i++) {
		const group_t *g = &gs->g[i];
		if (!g->seen[0] || !g->seen[1] || g->up[0] == g->up[1])
			continue;
		char subject[EVENT_SUBJECT_MAX];
		snprintf(subject, sizeof(subject), "%s/%.*s", prefix, (int)g->len, g->name);
		const char *what = kind == EVENT_SERVICE ? "datacenter" : "target";
		char reason[128];
		if (g->up[1])
			snprintf(reason, sizeof(reason), "a %s is up again", what);
		else
			snprintf(reason, sizeof(reason), "every %s is down", what);
		events_emit(ev, kind, subject, g->up[0] ? "up" : "all-down",
		            g->up[1] ? "up" : "all-down", reason);
	}
}

/* The name of target @p id, "" when unnamed or out of range. */
static const char *name_of(const gslb_health_t *h, uint32_t id)
{
	gslb_health_entry_t e;
	return gslb_health_entry(h, id, &e) == 0 && e.name ? e.name : "";
}

static bool down_of(const gslb_health_t *h, uint32_t id)
{
	gslb_health_entry_t e;
	return gslb_health_entry(h, id, &e) == 0 && gslb_sttl_down(e.eff);
}

/* Ids of @p h sorted by name, for matching the targets of a reloaded view (qsort has no
 * context argument; control thread only, so a file-scope table is safe). */
static const gslb_health_t *sort_table;

static int by_name(const void *a, const void *b)
{
	return strcmp(name_of(sort_table, *(const uint32_t *)a),
	              name_of(sort_table, *(const uint32_t *)b));
}

static uint32_t *names_index(const gslb_health_t *h)
{
	uint32_t *idx = xcalloc(h->count ? h->count : 1, sizeof(*idx));
	for (uint32_t i = 0; i < h->count; i++)
		idx[i] = i;
	sort_table = h;
	qsort(idx, h->count, sizeof(*idx), by_name);
	sort_table = NULL;
	return idx;
}

/* The id of @p name in @p h, or -1: the same id first (a publish keeps ids), else a search. */
static long find_target(const gslb_health_t *h, uint32_t **idx, uint32_t id, const char *name)
{
	if (strcmp(name_of(h, id), name) == 0)
		return id;
	if (*idx == NULL)
		*idx = names_index(h);
	size_t lo = 0, hi = h->count;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(name_of(h, (*idx)[mid]), name);
		if (c == 0)
			return (*idx)[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

void events_health_diff(events_t *ev, const gslb_health_t *before, const gslb_health_t *after,
                        events_reason_cb reason_cb, void *ctx)
{
	if (before == NULL)
		return;
	uint32_t *idx = NULL;
	bool any = false;
	for (uint32_t id = 0; id < after->count; id++) {
		gslb_health_entry_t e;
		if (gslb_health_entry(after, id, &e) != 0 || e.name == NULL)
			continue;
		long old = find_target(before, &idx, id, e.name);
		if (old < 0)
			continue;
		bool was = down_of(before, (uint32_t)old), now = gslb_sttl_down(e.eff);
		if (was == now)
			continue;
		char reason[EVENT_REASON_MAX] = "";
		reason_cb(ctx, &e, reason, sizeof(reason));
		events_emit(ev, EVENT_TARGET, e.name, was ? "down" : "up", now ? "down" : "up",
		            reason);
		any = true;
	}
	free(idx);
	if (!any)
		return;
	groups_t services = {0}, dcs = {0};
	groups_count(&services, &dcs, before, 0);
	groups_count(&services, &dcs, after, 1);
	groups_emit(ev, &dcs, EVENT_DATACENTER, "datacenter");
	groups_emit(ev, &services, EVENT_SERVICE, "service");
	free(services.g);
	free(dcs.g);
}

/* ---- reload ---------------------------------------------------------------------------- */

void events_reload(events_t *ev, bool ok, const char *config, const char *err)
{
	char subject[EVENT_SUBJECT_MAX];
	snprintf(subject, sizeof(subject), "config/%s", config ? config : "(command line)");
	if (ok) {
		if (ev->reload_failed)
			events_emit(ev, EVENT_RELOAD, subject, "failed", "ok",
			            "reload succeeded: serving the new configuration");
		ev->reload_failed = false;
		return;
	}
	char reason[EVENT_REASON_MAX];
	snprintf(reason, sizeof(reason), "%.*s", err ? (int)strcspn(err, "\n") : 0, err ? err : "");
	events_emit(ev, EVENT_RELOAD, subject, ev->reload_failed ? "failed" : "ok", "failed",
	            reason);
	ev->reload_failed = true;
}

/* ---- forwarder ------------------------------------------------------------------------- */

static const char *fault_state(fwd_fault_t fault)
{
	return fault == FWD_FAULT_NONE ? "up" : fwd_fault_str(fault);
}

static size_t link_find(const events_t *ev, const char *name)
{
	for (size_t i = 0; i < ev->n_links; i++)
		if (strcmp(ev->links[i], name) == 0)
			return i;
	return ev->n_links;
}

/* The first poll: remember the upstreams and the links they use. */
static void upstreams_record(events_t *ev, const fwd_upstream_stats_t *st, size_t n)
{
	free(ev->ups);
	links_free(ev);
	ev->ups = xcalloc(n ? n : 1, sizeof(*ev->ups));
	ev->n_ups = n;
	for (size_t i = 0; i < n; i++) {
		ev->ups[i] = (events_upstream_t){.fault = st[i].fault, .seen = true};
		if (st[i].link == NULL || link_find(ev, st[i].link) < ev->n_links)
			continue;
		ev->links = xrealloc(ev->links, (ev->n_links + 1) * sizeof(*ev->links));
		ev->link_down = xrealloc(ev->link_down, (ev->n_links + 1) * sizeof(*ev->link_down));
		ev->links[ev->n_links] = xstrdup(st[i].link);
		ev->link_down[ev->n_links++] = false;
	}
}

/* Link @p l is down when every upstream using it reports link-down. */
static bool link_is_down(const char *link, const fwd_upstream_stats_t *st, size_t n)
{
	size_t users = 0, down = 0;
	for (size_t i = 0; i < n; i++) {
		if (st[i].link == NULL || strcmp(st[i].link, link) != 0)
			continue;
		users++;
		down += st[i].fault == FWD_FAULT_LINK_DOWN;
	}
	return users > 0 && down == users;
}

static void links_diff(events_t *ev, const fwd_upstream_stats_t *st, size_t n)
{
	for (size_t l = 0; l < ev->n_links; l++) {
		bool down = link_is_down(ev->links[l], st, n);
		if (down == ev->link_down[l])
			continue;
		char subject[EVENT_SUBJECT_MAX];
		snprintf(subject, sizeof(subject), "link/%s", ev->links[l]);
		events_emit(ev, EVENT_LINK, subject, down ? "up" : "down", down ? "down" : "up",
		            down ? "the device is down for every upstream using it"
		                 : "the device is up again");
		ev->link_down[l] = down;
	}
}

void events_upstreams_diff(events_t *ev, const fwd_upstream_stats_t *st, size_t n)
{
	if (ev->ups == NULL || ev->n_ups != n) {
		upstreams_record(ev, st, n);
		for (size_t l = 0; l < ev->n_links; l++)
			ev->link_down[l] = link_is_down(ev->links[l], st, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (st[i].fault == ev->ups[i].fault)
			continue;
		char subject[EVENT_SUBJECT_MAX];
		snprintf(subject, sizeof(subject), "upstream/%s", st[i].name);
		events_emit(ev, EVENT_UPSTREAM, subject, fault_state(ev->ups[i].fault),
		            fault_state(st[i].fault), st[i].reason);
		ev->ups[i].fault = st[i].fault;
	}
	links_diff(ev, st, n);
}

/* ---- cluster --------------------------------------------------------------------------- */

void events_cluster_diff(events_t *ev, const cluster_status_t *st)
{
	if (ev->cluster_seen && st->state != ev->cluster_state) {
		char subject[EVENT_SUBJECT_MAX];
		snprintf(subject, sizeof(subject), "node/%s", ev->node[0] ? ev->node : "(unnamed)");
		events_emit(ev, EVENT_CLUSTER, subject, cluster_state_name(ev->cluster_state),
		            cluster_state_name(st->state), st->reason);
	}
	ev->cluster_state = st->state;
	ev->cluster_seen = true;
}

/* ---- the watch ------------------------------------------------------------------------- */

static void poll_upstreams(events_t *ev)
{
	size_t n = fwd_engine_upstream_count(ev->fwd);
	fwd_upstream_stats_t *st = xcalloc(n ? n : 1, sizeof(*st));
	for (size_t i = 0; i < n; i++)
		if (fwd_engine_upstream(ev->fwd, (uint32_t)i, &st[i]) != 0)
			goto out;
	events_upstreams_diff(ev, st, n);
out:
	free(st);
}

static void on_watch(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	events_t *ev = w->data;
	if (ev->fwd)
		poll_upstreams(ev);
	if (ev->cluster) {
		cluster_status_t st;
		cluster_status(ev->cluster, &st);
		events_cluster_diff(ev, &st);
	}
}

void events_watch_start(events_t *ev, struct ev_loop *loop, fwd_engine_t *fwd, cluster_t *cluster,
                        const char *node, unsigned interval_ms)
{
	ev->fwd = fwd;
	ev->cluster = cluster;
	snprintf(ev->node, sizeof(ev->node), "%s", node);
	if (fwd == NULL && cluster == NULL)
		return;
	ev->loop = loop;
	ev_timer_init(&ev->watch_w, on_watch, 0., interval_ms / 1000.0);
	ev->watch_w.data = ev;
	ev_timer_start(loop, &ev->watch_w);
	/* the first poll records the states the later ones compare with */
	on_watch(loop, &ev->watch_w, 0);
}
