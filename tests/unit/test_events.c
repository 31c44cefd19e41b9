/*
 * State-change events (daemon/events.c): the ring and its JSON (since=, N), the diffs of
 * GSLB health tables (targets by name across reloads, datacenter and service all-down), the
 * reload, upstream, link and cluster diffs, and the sink seeing every event once.
 */
#include "daemon/events.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "unit.h"

typedef struct {
	int calls;
	char last[512];
} sink_t;

static void on_event(const event_t *e, void *ctx)
{
	sink_t *s = ctx;
	s->calls++;
	snprintf(s->last, sizeof(s->last), "%s %s %s->%s", event_kind_name(e->kind), e->subject,
	         e->from, e->to);
}

static void reason_of(void *ctx, const gslb_health_entry_t *e, char *buf, size_t len)
{
	(void)ctx;
	snprintf(buf, len, "check of %s", e->name);
}

/* The kinds, subjects and transitions of the ring after @p since, one per line. */
static void ring_text(const events_t *ev, uint64_t since, char *buf, size_t len)
{
	json_t *list = events_json(ev, since, 0);
	size_t used = 0, i;
	json_t *row;
	buf[0] = '\0';
	json_array_foreach(list, i, row)
	{
		used += (size_t)snprintf(buf + used, len - used, "%s %s %s->%s\n",
		                         json_string_value(json_object_get(row, "kind")),
		                         json_string_value(json_object_get(row, "subject")),
		                         json_string_value(json_object_get(row, "from")),
		                         json_string_value(json_object_get(row, "to")));
	}
	json_decref(list);
}

static gslb_health_t *table(const char *const *names, const bool *down, uint32_t n)
{
	gslb_health_t *h = gslb_health_new(n);
	for (uint32_t i = 0; i < n; i++) {
		int ret = gslb_health_set_name(h, i, names[i]);
		ret |= gslb_health_set_monitor(h, i, gslb_sttl_make(down[i], 0));
		CHECK(ret == 0, "table row %u", i);
	}
	return h;
}

static void test_ring(void)
{
	events_t ev;
	events_init(&ev);
	sink_t sink = {0};
	events_set_sink(&ev, on_event, &sink);
	for (int i = 0; i < EVENTS_RING + 10; i++) {
		char subject[32];
		snprintf(subject, sizeof(subject), "upstream/u%d", i);
		uint64_t seq =
		    events_emit(&ev, EVENT_UPSTREAM, subject, "up", "upstream-down", "timeout");
		CHECK(seq == (uint64_t)i + 1, "seq %llu", (unsigned long long)seq);
	}
	CHECK(sink.calls == EVENTS_RING + 10, "sink saw %d", sink.calls);
	json_t *all = events_json(&ev, 0, 0);
	CHECK(json_array_size(all) == EVENTS_RING, "ring keeps %zu", json_array_size(all));
	CHECK(json_integer_value(json_object_get(json_array_get(all, 0), "seq")) == 11,
	      "oldest kept is 11");
	json_decref(all);
	static const struct {
		uint64_t since;
		size_t max;
		size_t want_n;
		json_int_t want_first;
	} rows[] = {
	    {0, 5, 5, EVENTS_RING + 6},
	    {EVENTS_RING + 8, 0, 2, EVENTS_RING + 9},
	    {EVENTS_RING + 8, 1, 1, EVENTS_RING + 10},
	    {EVENTS_RING + 10, 0, 0, 0},
	    {EVENTS_RING + 99, 0, 0, 0},
	    {3, 0, EVENTS_RING, 11}, /* asked for what the ring no longer holds: all it has */
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		json_t *l = events_json(&ev, rows[i].since, rows[i].max);
		CHECK(json_array_size(l) == rows[i].want_n, "row %zu: %zu events", i,
		      json_array_size(l));
		if (rows[i].want_n)
			CHECK(json_integer_value(json_object_get(json_array_get(l, 0), "seq")) ==
			          rows[i].want_first,
			      "row %zu: first", i);
		json_decref(l);
	}
	events_deinit(&ev);
}

static void test_health_diff(void)
{
	static const char *const names[] = {
	    "service/www/dc1/192.0.2.1", "service/www/dc1/192.0.2.2", "service/www/dc2/192.0.2.3",
	    "service/api/dc1/192.0.2.4", "service/api/dc2/192.0.2.5",
	};
	bool up[5] = {false}, step1[5] = {true, true, false, false, false},
	     step2[5] = {true, true, true, true, false};
	gslb_health_t *h0 = table(names, up, 5), *h1 = table(names, step1, 5),
	              *h2 = table(names, step2, 5);
	events_t ev;
	events_init(&ev);
	char text[4096];
	events_health_diff(&ev, NULL, h0, reason_of, NULL);
	CHECK(ev.last_seq == 0, "no table before: no event");
	events_health_diff(&ev, h0, h0, reason_of, NULL);
	CHECK(ev.last_seq == 0, "no change: no event");
	events_health_diff(&ev, h0, h1, reason_of, NULL);
	ring_text(&ev, 0, text, sizeof(text));
	CHECK(strcmp(text, "target service/www/dc1/192.0.2.1 up->down\n"
	                   "target service/www/dc1/192.0.2.2 up->down\n") == 0,
	      "dc1 of www down, dc1 still has api: %s", text);
	events_health_diff(&ev, h1, h2, reason_of, NULL);
	ring_text(&ev, 2, text, sizeof(text));
	CHECK(strcmp(text, "target service/www/dc2/192.0.2.3 up->down\n"
	                   "target service/api/dc1/192.0.2.4 up->down\n"
	                   "datacenter datacenter/dc1 up->all-down\n"
	                   "service service/www up->all-down\n") == 0,
	      "www all down and dc1 all down: %s", text);
	json_t *l = events_json(&ev, 0, 1);
	const char *reason = json_string_value(json_object_get(json_array_get(l, 0), "reason"));
	CHECK(reason && strcmp(reason, "every datacenter is down") == 0, "service reason %s",
	      reason);
	json_decref(l);
	l = events_json(&ev, 0, 0);
	reason = json_string_value(json_object_get(json_array_get(l, 0), "reason"));
	CHECK(reason && strcmp(reason, "check of service/www/dc1/192.0.2.1") == 0,
	      "target reason from the callback: %s", reason);
	json_decref(l);
	/* a reloaded table: other ids, one target gone, one new (DOWN, but new: no event) */
	static const char *const renamed[] = {
	    "service/new/dc3/192.0.2.9", "service/api/dc2/192.0.2.5", "service/api/dc1/192.0.2.4",
	    "service/www/dc2/192.0.2.3", "service/www/dc1/192.0.2.2",
	};
	bool r[5] = {true, false, false, true, true};
	gslb_health_t *h3 = table(renamed, r, 5);
	uint64_t before = ev.last_seq;
	events_health_diff(&ev, h2, h3, reason_of, NULL);
	ring_text(&ev, before, text, sizeof(text));
	CHECK(strcmp(text, "target service/api/dc1/192.0.2.4 down->up\n"
	                   "datacenter datacenter/dc1 all-down->up\n") == 0,
	      "matched by name across a reload: %s", text);
	events_deinit(&ev);
	gslb_health_free(h0);
	gslb_health_free(h1);
	gslb_health_free(h2);
	gslb_health_free(h3);
}

static void test_reload(void)
{
	events_t ev;
	events_init(&ev);
	char text[1024];
	events_reload(&ev, true, "/etc/steer/steer.yaml", NULL);
	CHECK(ev.last_seq == 0, "a good reload after none: no event");
	events_reload(&ev, false, "/etc/steer/steer.yaml", "steer.yaml:3: unknown key\nmore");
	events_reload(&ev, false, "/etc/steer/steer.yaml", "steer.yaml:4: again");
	events_reload(&ev, true, "/etc/steer/steer.yaml", NULL);
	events_reload(&ev, true, "/etc/steer/steer.yaml", NULL);
	ring_text(&ev, 0, text, sizeof(text));
	CHECK(strcmp(text, "reload config//etc/steer/steer.yaml ok->failed\n"
	                   "reload config//etc/steer/steer.yaml failed->failed\n"
	                   "reload config//etc/steer/steer.yaml failed->ok\n") == 0,
	      "reload events: %s", text);
	json_t *l = events_json(&ev, 0, 0);
	const char *reason = json_string_value(json_object_get(json_array_get(l, 0), "reason"));
	CHECK(reason && strcmp(reason, "steer.yaml:3: unknown key") == 0, "first line: %s", reason);
	json_decref(l);
	events_deinit(&ev);
}

static void test_upstreams_and_links(void)
{
	events_t ev;
	events_init(&ev);
	fwd_upstream_stats_t st[3] = {
	    {.name = "a", .link = "eth1", .fault = FWD_FAULT_NONE},
	    {.name = "b", .link = "eth1", .fault = FWD_FAULT_NONE},
	    {.name = "c", .link = NULL, .fault = FWD_FAULT_UPSTREAM_DOWN},
	};
	char text[1024];
	events_upstreams_diff(&ev, st, 3);
	CHECK(ev.last_seq == 0, "the first poll records");
	st[0].fault = FWD_FAULT_LINK_DOWN;
	snprintf(st[0].reason, sizeof(st[0].reason), "link eth1 down");
	events_upstreams_diff(&ev, st, 3);
	st[1].fault = FWD_FAULT_LINK_DOWN;
	st[2].fault = FWD_FAULT_NONE;
	events_upstreams_diff(&ev, st, 3);
	events_upstreams_diff(&ev, st, 3);
	st[0].fault = st[1].fault = FWD_FAULT_UPSTREAM_DEGRADED;
	events_upstreams_diff(&ev, st, 3);
	ring_text(&ev, 0, text, sizeof(text));
	CHECK(strcmp(text, "upstream upstream/a up->link-down\n"
	                   "upstream upstream/b up->link-down\n"
	                   "upstream upstream/c upstream-down->up\n"
	                   "link link/eth1 up->down\n"
	                   "upstream upstream/a link-down->degraded\n"
	                   "upstream upstream/b link-down->degraded\n"
	                   "link link/eth1 down->up\n") == 0,
	      "upstream and link events: %s", text);
	json_t *l = events_json(&ev, 0, 1);
	CHECK(json_array_size(l) == 1, "one");
	json_decref(l);
	l = events_json(&ev, 0, 0);
	const char *reason = json_string_value(json_object_get(json_array_get(l, 0), "reason"));
	CHECK(reason && strcmp(reason, "link eth1 down") == 0, "upstream reason: %s", reason);
	json_decref(l);
	events_deinit(&ev);
}

static void test_cluster(void)
{
	events_t ev;
	events_init(&ev);
	snprintf(ev.node, sizeof(ev.node), "n1");
	cluster_status_t st = {.state = CLUSTER_STARTING};
	char text[1024];
	events_cluster_diff(&ev, &st);
	st.state = CLUSTER_ANNOUNCED;
	snprintf(st.reason, sizeof(st.reason), "self-check good for 5 rounds");
	events_cluster_diff(&ev, &st);
	events_cluster_diff(&ev, &st);
	st.state = CLUSTER_WITHDRAWN;
	snprintf(st.reason, sizeof(st.reason), "answer: timeout after 80 ms");
	events_cluster_diff(&ev, &st);
	ring_text(&ev, 0, text, sizeof(text));
	CHECK(strcmp(text, "cluster node/n1 starting->announced\n"
	                   "cluster node/n1 announced->withdrawn\n") == 0,
	      "cluster events: %s", text);
	events_deinit(&ev);
}

/* Whatever a backend answered, the event is valid JSON text. */
static void test_text_is_cleaned(void)
{
	events_t ev;
	events_init(&ev);
	static const struct {
		const char *in, *want;
	} rows[] = {
	    {"HTTP 503: caf\xc3\xa9", "HTTP 503: caf\xc3\xa9"}, /* UTF-8 stays */
	    {"latin-1 caf\xe9!", "latin-1 caf?!"},
	    {"line\nbreak\ttab\x7f", "line?break?tab?"},
	    {"overlong \xc0\xaf", "overlong ??"},
	    {"cut \xe2\x82", "cut ??"},
	    {"quote \" and \\", "quote \" and \\"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		events_emit(&ev, EVENT_TARGET, "service/x/dc/192.0.2.1", "up", "down", rows[i].in);
		json_t *l = events_json(&ev, ev.last_seq - 1, 0);
		const char *reason =
		    json_string_value(json_object_get(json_array_get(l, 0), "reason"));
		CHECK(reason && strcmp(reason, rows[i].want) == 0, "row %zu: '%s'", i,
		      reason ? reason : "(no JSON)");
		json_decref(l);
	}
	events_deinit(&ev);
}

int main(void)
{
	log_setup(LOG_TARGET_STDERR, LOG_LEVEL_ERR); /* the event lines are notices and warnings */
	test_ring();
	test_health_diff();
	test_reload();
	test_upstreams_and_links();
	test_cluster();
	test_text_is_cleaned();
	return unit_finish("events");
}
