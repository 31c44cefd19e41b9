/*
 * The decision log's rings (one producer: the query thread; one consumer: the control
 * thread) and its writer, which joins each recorded decision with the explain text of the
 * same name, client and ECS subnet.
 */
#include "daemon/decisions.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/counter.h"
#include "base/err.h"
#include "base/log.h"
#include "daemon/server.h"
#include "dns/dname.h"
#include "dns/ecs.h"
#include "dns/names.h"
#include "gslb/decision.h"

/* Records a thread's ring holds between two drains: 1280 sampled decisions a second. */
#define RING_SLOTS       256
#define EXPLAIN_TEXT_MAX 16384

typedef struct {
	steer_counter_t dropped; /* written by the producer only */
	_Atomic uint32_t head;   /* producer: records written */
	_Atomic uint32_t tail;   /* consumer: records taken */
	gslb_decision_t slots[RING_SLOTS];
} ring_t;

struct decisions {
	server_t *s;
	FILE *out;
	char *path;
	ring_t **rings;
	void **ring_args; /* the same pointers, as net_set_decision_log() takes them */
	unsigned n_rings;
	ev_timer drain;
	uint64_t written;
	uint64_t write_errors; /* lines the file did not take */
	char *explain;         /* EXPLAIN_TEXT_MAX bytes, reused */
};

/* On the query thread: copy the record in, or count it when the ring is full. */
static void ring_record(void *arg, const gslb_decision_t *d)
{
	ring_t *r = arg;
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (head - tail >= RING_SLOTS) {
		STEER_COUNTER_INC(r->dropped);
		return;
	}
	r->slots[head % RING_SLOTS] = *d;
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
}

static const char *kind_name(gslb_answer_kind_t kind)
{
	switch (kind) {
	case GSLB_ANSWER_ADDRS:
		return "addresses";
	case GSLB_ANSWER_CNAME:
		return "cname";
	case GSLB_ANSWER_NODATA:
		return "nodata";
	case GSLB_ANSWER_SERVFAIL:
		return "servfail";
	case GSLB_ANSWER_TXT:
		return "txt";
	}
	return "?";
}

static void resolver_str(const steer_sockaddr_t *a, char *buf, size_t size)
{
	if (a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a->sin6.sin6_addr))
		inet_ntop(AF_INET, a->sin6.sin6_addr.s6_addr + 12, buf, (socklen_t)size);
	else if (a->sa.sa_family == AF_INET6)
		inet_ntop(AF_INET6, &a->sin6.sin6_addr, buf, (socklen_t)size);
	else
		inet_ntop(AF_INET, &a->sin.sin_addr, buf, (socklen_t)size);
}

static void ecs_str(const gslb_decision_t *d, char *buf, size_t size)
{
	char addr[INET6_ADDRSTRLEN] = "?";
	inet_ntop(d->ecs_family == DNS_ECS_FAMILY_IPV6 ? AF_INET6 : AF_INET, d->ecs_addr, addr,
	          sizeof(addr));
	snprintf(buf, size, "%s/%u", addr, d->ecs_source_len);
}

static void time_str(const struct timespec *t, char *buf, size_t size)
{
	struct tm tm;
	gmtime_r(&t->tv_sec, &tm);
	char base[32];
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, size, "%s.%03ldZ", base, t->tv_nsec / 1000000);
}

static json_t *answer_json(const gslb_decision_t *d)
{
	json_t *a = json_pack("{s:s, s:I, s:i, s:b}", "kind", kind_name(d->kind), "ttl",
	                      (json_int_t)d->ttl, "scope", d->ecs_scope, "all_down", d->all_down);
	if (d->kind == GSLB_ANSWER_ADDRS) {
		json_t *list = json_array();
		unsigned n = d->count < GSLB_DECISION_ADDRS ? d->count : GSLB_DECISION_ADDRS;
		for (unsigned i = 0; i < n; i++) {
			char text[INET6_ADDRSTRLEN];
			inet_ntop(d->family, d->addrs[i], text, sizeof(text));
			json_array_append_new(list, json_string(text));
		}
		json_object_set_new(a, "addresses", list);
		json_object_set_new(a, "count", json_integer(d->count));
	} else if (d->kind == GSLB_ANSWER_CNAME) {
		char name[DNAME_STR_MAXLEN];
		json_object_set_new(a, "cname",
		                    json_string(dname_to_str(d->cname, name, sizeof(name))));
	}
	return a;
}

/* The lines of @p text's section for @p family ("== A ==" / "== AAAA =="). */
static json_t *explain_section(char *text, sa_family_t family)
{
	const char *want = family == AF_INET6 ? "== AAAA ==" : "== A ==";
	json_t *lines = json_array();
	bool in = false;
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "== ", 3) == 0) {
			in = strcmp(line, want) == 0;
			continue;
		}
		if (in)
			json_array_append_new(lines, json_string(line));
	}
	return lines;
}

static const char *after_prefix(const char *line, const char *prefix)
{
	size_t n = strlen(prefix);
	return strncmp(line, prefix, n) == 0 ? line + n : NULL;
}

/* The parts of the explanation as fields of @p row: map, block, decided_by, policy,
 * candidates (the datacenters in order, with their health or why they were skipped). */
static void reasons_json(json_t *row, json_t *lines)
{
	json_t *candidates = json_array();
	size_t i;
	json_t *v;
	json_array_foreach(lines, i, v)
	{
		const char *line = json_string_value(v);
		const char *rest;
		if ((rest = after_prefix(line, "map: ")) != NULL)
			json_object_set_new(row, "map", json_string(rest));
		else if ((rest = after_prefix(line, "decided by: ")) != NULL)
			json_object_set_new(row, "decided_by", json_string(rest));
		else if ((rest = after_prefix(line, "service ")) != NULL)
			json_object_set_new(row, "policy", json_string(rest));
		else if ((rest = after_prefix(line, "answer: ")) != NULL)
			json_object_set_new(row, "explained_answer", json_string(rest));
		else if (line[0] == ' ')
			json_array_append_new(candidates, json_string(line + strspn(line, " ")));
	}
	json_object_set_new(row, "candidates", candidates);
}

static json_t *decision_json(struct decisions *dl, const gslb_decision_t *d)
{
	char name[DNAME_STR_MAXLEN], when[48], client[INET6_ADDRSTRLEN] = "?", ecs[64] = "";
	char qtype[16];
	dname_to_str(d->name, name, sizeof(name));
	size_t len = strlen(name);
	if (len > 1 && name[len - 1] == '.')
		name[len - 1] = '\0';
	time_str(&d->time, when, sizeof(when));
	resolver_str(&d->resolver, client, sizeof(client));
	if (d->has_ecs)
		ecs_str(d, ecs, sizeof(ecs));
	json_t *row =
	    json_pack("{s:s, s:s, s:s, s:s, s:o, s:o}", "time", when, "name", name, "qtype",
	              dns_type_str(d->qtype, qtype, sizeof(qtype)), "client", client, "ecs",
	              d->has_ecs ? json_string(ecs) : json_null(), "answer", answer_json(d));
	int ret = gslb_view_explain(dl->s->gslb, name, client, d->has_ecs ? ecs : NULL, dl->explain,
	                            EXPLAIN_TEXT_MAX);
	if (ret != 0) {
		json_object_set_new(row, "explain_error", json_string(dl->explain));
		return row;
	}
	json_t *lines = explain_section(dl->explain, d->family);
	reasons_json(row, lines);
	json_object_set_new(row, "explain", lines);
	return row;
}

static void write_line(struct decisions *dl, const gslb_decision_t *d)
{
	static log_ratelimit_t rl;
	json_t *row = decision_json(dl, d);
	char *text = json_dumps(row, JSON_COMPACT);
	json_decref(row);
	if (text == NULL || fprintf(dl->out, "%s\n", text) < 0) {
		dl->write_errors++;
		log_ratelimited(&rl, LOG_LEVEL_WARNING, "decision log %s: cannot write: %s",
		                dl->path, steer_strerror(-errno));
	} else {
		dl->written++;
	}
	free(text);
}

static void drain(struct decisions *dl)
{
	for (unsigned i = 0; i < dl->n_rings; i++) {
		ring_t *r = dl->rings[i];
		uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
		uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);
		for (; tail != head; tail++) {
			write_line(dl, &r->slots[tail % RING_SLOTS]);
			atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
		}
	}
	fflush(dl->out);
}

static void on_drain(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	drain(w->data);
}

int decisions_start(server_t *s, char *err, size_t errlen)
{
	const conf_decision_log_t *c = &s->conf->decision_log;
	s->decisions = NULL;
	if (c->file == NULL)
		return 0;
	FILE *out = fopen(c->file, "ae");
	if (out == NULL) {
		int ret = -errno;
		snprintf(err, errlen, "decision-log: cannot open %s: %s", c->file,
		         steer_strerror(ret));
		return ret;
	}
	struct decisions *dl = xcalloc(1, sizeof(*dl));
	dl->s = s;
	dl->out = out;
	dl->path = xstrdup(c->file);
	dl->explain = xmalloc(EXPLAIN_TEXT_MAX);
	dl->n_rings = net_query_threads(s->net);
	dl->rings = xcalloc(dl->n_rings, sizeof(*dl->rings));
	dl->ring_args = xcalloc(dl->n_rings, sizeof(*dl->ring_args));
	for (unsigned i = 0; i < dl->n_rings; i++) {
		dl->rings[i] = xcalloc(1, sizeof(ring_t));
		dl->ring_args[i] = dl->rings[i];
	}
	net_set_decision_log(s->net, ring_record, dl->ring_args, c->sample);
	ev_timer_init(&dl->drain, on_drain, DECISIONS_DRAIN_MS / 1000.0,
	              DECISIONS_DRAIN_MS / 1000.0);
	dl->drain.data = dl;
	ev_timer_start(s->loop, &dl->drain);
	s->decisions = dl;
	log_info("decision log: every %u%s GSLB decision to %s", c->sample ? c->sample : 1,
	         c->sample > 1 ? "th" : "", c->file);
	return 0;
}

void decisions_stats(const server_t *s, uint64_t *written, uint64_t *dropped)
{
	const struct decisions *dl = s->decisions;
	*written = *dropped = 0;
	if (dl == NULL)
		return;
	*written = dl->written;
	*dropped = dl->write_errors;
	for (unsigned i = 0; i < dl->n_rings; i++)
		*dropped += atomic_load_explicit(&dl->rings[i]->dropped, memory_order_relaxed);
}

void decisions_stop(server_t *s)
{
	struct decisions *dl = s->decisions;
	if (dl == NULL)
		return;
	ev_timer_stop(s->loop, &dl->drain);
	drain(dl);
	fclose(dl->out);
	for (unsigned i = 0; i < dl->n_rings; i++)
		free(dl->rings[i]);
	free(dl->rings);
	free(dl->ring_args);
	free(dl->explain);
	free(dl->path);
	free(dl);
	s->decisions = NULL;
}
