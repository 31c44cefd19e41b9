/*
 * The GSLB view's query path (see view.h): find a name, decide for one client, fill the
 * result the auth layer writes. Query threads; no allocation, no locks.
 */
#include "gslb/view.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "dns/const.h"
#include "dns/dname.h"
#include "gslb/view_int.h"

void view_addr_str(int family, const uint8_t *addr, char *buf, size_t len)
{
	if (!inet_ntop(family, addr, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

/* True when the first @p len bits of @p a equal those of @p b. */
static bool bits_equal(const uint8_t *a, const uint8_t *b, unsigned len)
{
	unsigned full = len / 8;
	if (memcmp(a, b, full) != 0)
		return false;
	if (len % 8 == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff00u >> (len % 8));
	return ((a[full] ^ b[full]) & mask) == 0;
}

typedef struct {
	uint8_t addr[4];
	uint8_t len;
} v4_range_t;

typedef struct {
	uint8_t addr[16];
	uint8_t len;
} v6_range_t;

/* Addresses that say nothing about where a client is (RFC 6890 special purpose, private,
 * loopback, link-local, CGNAT, unspecified). */
static bool prefix_is_private(int family, const uint8_t *addr, unsigned len)
{
	static const v4_range_t v4[] = {
	    {{0, 0, 0, 0}, 8},      {{10, 0, 0, 0}, 8},     {{100, 64, 0, 0}, 10},
	    {{127, 0, 0, 0}, 8},    {{169, 254, 0, 0}, 16}, {{172, 16, 0, 0}, 12},
	    {{192, 168, 0, 0}, 16},
	};
	static const v6_range_t v6[] = {
	    {{0}, 128},         /* :: */
	    {{[15] = 1}, 128},  /* ::1 */
	    {{0xfc}, 7},        /* unique local */
	    {{0xfe, 0x80}, 10}, /* link-local */
	    {{0xfe, 0xc0}, 10}, /* site-local (deprecated) */
	};
	if (family == AF_INET) {
		for (size_t i = 0; i < sizeof(v4) / sizeof(v4[0]); i++)
			if (len >= v4[i].len && bits_equal(addr, v4[i].addr, v4[i].len))
				return true;
		return false;
	}
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (len >= 96 && memcmp(addr, mapped, 12) == 0)
		return prefix_is_private(AF_INET, addr + 12, len - 96);
	for (size_t i = 0; i < sizeof(v6) / sizeof(v6[0]); i++)
		if (len >= v6[i].len && bits_equal(addr, v6[i].addr, v6[i].len))
			return true;
	return false;
}

const gslb_name_t *view_names_find(const gslb_view_t *v, const uint8_t *wire, size_t len)
{
	if (!v->slots)
		return NULL;
	for (size_t i = view_hash(wire, len) & v->slot_mask; v->slots[i];
	     i = (i + 1) & v->slot_mask) {
		const gslb_name_t *n = &v->names[v->slots[i] - 1];
		if (n->len == len && memcmp(n->wire, wire, len) == 0)
			return n;
	}
	return NULL;
}

const gslb_name_t *gslb_view_find(const gslb_view_t *view, const uint8_t *qname)
{
	return view_names_find(view, qname, dname_len(qname));
}

bool gslb_view_name_answers(const gslb_name_t *name, uint16_t qtype)
{
	if (qtype == DNS_TYPE_A || qtype == DNS_TYPE_AAAA || qtype == DNS_TYPE_ANY)
		return true;
	return name->kind == VIEW_NAME_WHOAMI && qtype == DNS_TYPE_TXT;
}

size_t gslb_view_name_count(const gslb_view_t *view)
{
	return view->n_names;
}

void gslb_view_name_info(const gslb_view_t *view, size_t i, gslb_name_info_t *out)
{
	const gslb_name_t *n = &view->names[i];
	out->wire = n->wire;
	out->whoami = n->kind == VIEW_NAME_WHOAMI;
	out->file = view->conf_path;
	out->line = n->line;
}

/* ---- deciding ---- */

/* The address the decision is based on (RFC 7871 7.1.1 / 7.2.1). */
void view_pick_client(const view_map_t *map, const gslb_client_t *c, decide_t *d)
{
	const dns_ecs_t *ecs = c->ecs;
	bool private_absent = map ? map->ecs_private_is_absent : true;
	d->how = CLIENT_RESOLVER;
	if (ecs) {
		int fam = ecs->family == DNS_ECS_FAMILY_IPV4 ? AF_INET : AF_INET6;
		if (ecs->source_len == 0)
			d->how = CLIENT_ECS_ZERO;
		else if (map && map->ignore_ecs)
			d->how = CLIENT_ECS_IGNORED;
		else if (private_absent && prefix_is_private(fam, ecs->addr, ecs->source_len))
			d->how = CLIENT_ECS_PRIVATE;
		else {
			d->how = CLIENT_ECS;
			d->family = fam;
			memcpy(d->addr, ecs->addr, 16);
			d->len = ecs->source_len;
			if (d->len > family_bits(fam))
				d->len = (uint8_t)family_bits(fam);
			return;
		}
	}
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const steer_sockaddr_t *r = c->resolver;
	memset(d->addr, 0, sizeof(d->addr));
	if (r->sa.sa_family == AF_INET) {
		d->family = AF_INET;
		memcpy(d->addr, &r->sin.sin_addr, 4);
	} else if (r->sa.sa_family == AF_INET6 &&
	           memcmp(r->sin6.sin6_addr.s6_addr, mapped, 12) == 0) {
		d->family = AF_INET;
		memcpy(d->addr, r->sin6.sin6_addr.s6_addr + 12, 4);
	} else if (r->sa.sa_family == AF_INET6) {
		d->family = AF_INET6;
		memcpy(d->addr, r->sin6.sin6_addr.s6_addr, 16);
	} else {
		d->family = AF_UNSPEC; /* e.g. a UNIX socket in tests: the map's IPv6 default */
	}
	d->len = (uint8_t)family_bits(d->family == AF_INET ? AF_INET : AF_INET6);
}

/* Run the policy of service @p s for @p family; fills @p d and returns the ECS scope. */
uint8_t view_decide(const gslb_view_t *v, const view_svc_t *s, sa_family_t family,
                    const gslb_client_t *client, gslb_policy_rng_t *rng, decide_t *d,
                    gslb_policy_answer_t *ans, gslb_policy_trace_t *trace)
{
	view_pick_client(s->map, client, d);
	d->q = (gslb_policy_query_t){.family = family};
	d->order_len = 0;
	d->paths = PATHS_NOT_USED;
	uint8_t scope = 0;
	bool use_map = s->map != NULL;
	if (gslb_policy_kind_measured(s->p.policy)) {
		/* The map only orders what the measurements leave out: with every datacenter
		 * measured it would not change the answer, so it is not looked up. */
		scope = view_measured_order(v, s, family, d, 0);
		use_map = use_map && d->q.measured_len < s->p.dc_count;
	}
	d->map_used = use_map;
	if (use_map) {
		const view_map_t *m = s->map;
		d->list =
		    gslb_nettree_lookup_prefix(m->tree, d->family, d->addr, d->len, &d->scope);
		const uint16_t *l = m->pool + m->list_off[d->list];
		for (size_t i = 0; i < m->list_len[d->list]; i++) {
			uint8_t si = s->conf2svc[l[i]];
			if (si != 0xff)
				d->order[d->order_len++] = si;
		}
		d->q.order = d->order_len ? d->order : NULL;
		d->q.order_len = d->order_len;
		if (d->scope > scope)
			scope = d->scope;
	}
	/* Everything the policy needs is in d->q now, so it is called once and writes the answer
	 * where the caller reads it. The persist key is hashed only for services that use it. */
	if (s->persist) {
		unsigned plen = d->family == AF_INET ? s->persist4 : s->persist6;
		if (plen > d->len)
			plen = d->len;
		d->q.client_key = gslb_policy_client_key(d->family == AF_INET ? AF_INET : AF_INET6,
		                                         d->addr, plen);
		if (plen > scope)
			scope = (uint8_t)plen;
	}
	gslb_policy_select(&s->p, v->health, &d->q, rng, ans, trace);
	if (d->how != CLIENT_ECS)
		scope = 0;
	return scope;
}

static void answer_whoami(const gslb_client_t *c, uint16_t qtype, gslb_result_t *out)
{
	decide_t d;
	gslb_client_t rc = {.resolver = c->resolver, .ecs = NULL};
	view_pick_client(NULL, &rc, &d);
	out->ans.ttl = GSLB_VIEW_WHOAMI_TTL;
	out->ecs_scope = c->ecs ? c->ecs->source_len : 0;
	if ((qtype == DNS_TYPE_A && d.family == AF_INET) ||
	    (qtype == DNS_TYPE_AAAA && d.family == AF_INET6)) {
		out->ans.kind = GSLB_ANSWER_ADDRS;
		memcpy(out->whoami_addr, d.addr, 16);
		out->ans.count = 1;
		return;
	}
	if (qtype != DNS_TYPE_TXT)
		return;
	char s[2][96];
	char a[INET6_ADDRSTRLEN];
	if (d.family == AF_INET || d.family == AF_INET6) {
		view_addr_str(d.family, d.addr, a, sizeof(a));
		snprintf(s[0], sizeof(s[0]), "resolver %s", a);
	} else {
		snprintf(s[0], sizeof(s[0]), "resolver unknown");
	}
	if (c->ecs) {
		int fam = c->ecs->family == DNS_ECS_FAMILY_IPV4 ? AF_INET : AF_INET6;
		view_addr_str(fam, c->ecs->addr, a, sizeof(a));
		snprintf(s[1], sizeof(s[1]), "ecs %s/%u", a, c->ecs->source_len);
	} else {
		snprintf(s[1], sizeof(s[1]), "ecs none");
	}
	size_t n = 0;
	for (int i = 0; i < 2; i++) {
		size_t l = strlen(s[i]);
		out->txt[n++] = (uint8_t)l;
		memcpy(out->txt + n, s[i], l);
		n += l;
	}
	out->txt_len = (uint16_t)n;
	out->ans.kind = GSLB_ANSWER_TXT;
}

/* The decision into its (service, datacenter) slot of the view's bank. */
static void count_answer(const gslb_view_t *v, const view_svc_t *s, const gslb_result_t *r,
                         gslb_answer_counters_t *ac)
{
	size_t i = r->ans.dc < s->p.dc_count ? r->ans.dc : s->p.dc_count;
	if (r->ans.all_down)
		i = s->p.dc_count + (r->ans.fallback || r->ans.kind == GSLB_ANSWER_CNAME ? 1 : 2);
	size_t slot = s->answer_slot + i;
	if (STEER_LIKELY(slot < GSLB_ANSWER_SLOTS))
		STEER_COUNTER_INC(ac->slot[v->answer_bank][slot]);
	else
		STEER_COUNTER_INC(ac->untracked[v->answer_bank]);
}

/* A service decision into the thread's counters. */
static void count_decision(gslb_stats_t *st, const gslb_result_t *r, const decide_t *d)
{
	STEER_COUNTER_INC(st->services);
	switch (r->ans.kind) {
	case GSLB_ANSWER_ADDRS:
		STEER_COUNTER_INC(st->addresses);
		break;
	case GSLB_ANSWER_CNAME:
		STEER_COUNTER_INC(st->cname);
		break;
	case GSLB_ANSWER_NODATA:
	case GSLB_ANSWER_TXT:
		STEER_COUNTER_INC(st->nodata);
		break;
	case GSLB_ANSWER_SERVFAIL:
		STEER_COUNTER_INC(st->servfail);
		break;
	}
	if (r->ans.all_down)
		STEER_COUNTER_INC(st->all_down);
	if (d->how == CLIENT_ECS)
		STEER_COUNTER_INC(st->ecs_used);
	else if (r->ecs_ignored)
		STEER_COUNTER_INC(st->ecs_ignored);
}

/*
 * Tell the agents what to measure: every decision by paths counts for its prefix's volume
 * (the ring samples), one without a usable row is urgent. A decision on an ECS source prefix
 * shorter than the rows is not reported: there is no row-sized prefix to probe.
 */
static void report_demand(gslb_demand_ring_t *r, const decide_t *d)
{
	if (d->paths == PATHS_NOT_USED || d->paths == PATHS_TOO_SHORT ||
	    (d->family != AF_INET && d->family != AF_INET6))
		return;
	uint8_t flags = d->how == CLIENT_ECS ? GSLB_DEMAND_ECS : 0;
	if (d->paths != PATHS_ROW)
		flags |= GSLB_DEMAND_URGENT;
	gslb_demand_record(r, d->family, d->addr, d->plen, d->how == CLIENT_ECS ? NULL : d->addr,
	                   flags);
}

/* Every Nth decision of this thread goes to the decision log, as the query saw it. */
static void sample_decision(gslb_decision_sampler_t *ds, const gslb_name_t *name, uint16_t qtype,
                            const gslb_client_t *client, const gslb_result_t *out)
{
	if (ds->countdown > 0) {
		ds->countdown--;
		return;
	}
	ds->countdown = ds->sample > 1 ? ds->sample - 1 : 0;
	gslb_decision_t d;
	clock_gettime(CLOCK_REALTIME, &d.time);
	memcpy(d.name, name->wire, name->len);
	d.qtype = qtype;
	d.resolver = *client->resolver;
	d.has_ecs = client->ecs != NULL;
	if (d.has_ecs) {
		d.ecs_family = client->ecs->family;
		d.ecs_source_len = client->ecs->source_len;
		memcpy(d.ecs_addr, client->ecs->addr, sizeof(d.ecs_addr));
	}
	d.kind = out->ans.kind;
	d.all_down = out->ans.all_down;
	d.ecs_scope = out->ecs_scope;
	d.ttl = out->ans.ttl;
	d.count = 0;
	d.family = qtype == DNS_TYPE_AAAA ? AF_INET6 : AF_INET;
	if (d.kind == GSLB_ANSWER_ADDRS) {
		d.count = out->ans.count;
		unsigned n = d.count < GSLB_DECISION_ADDRS ? d.count : GSLB_DECISION_ADDRS;
		for (unsigned i = 0; i < n; i++)
			memcpy(d.addrs[i], gslb_result_addr(out, i), 16);
	}
	d.cname[0] = 0;
	if (d.kind == GSLB_ANSWER_CNAME && out->ans.cname != NULL)
		memcpy(d.cname, out->ans.cname, dname_len(out->ans.cname));
	ds->record(ds->arg, &d);
}

void gslb_view_answer(const gslb_view_t *view, const gslb_name_t *name, uint16_t qtype,
                      const gslb_client_t *client, gslb_qstate_t *qs, gslb_result_t *out)
{
	out->svc = NULL;
	out->ecs_scope = 0;
	out->ecs_ignored = false;
	out->txt_len = 0;
	if (name->kind == VIEW_NAME_WHOAMI) {
		out->ans =
		    (gslb_policy_answer_t){.kind = GSLB_ANSWER_NODATA, .dc = GSLB_POLICY_DC_NONE};
		answer_whoami(client, qtype, out);
		STEER_COUNTER_INC(qs->stats.whoami);
		return;
	}
	const view_svc_t *s = &view->svcs[name->svc];
	sa_family_t family;
	if (qtype == DNS_TYPE_A || qtype == DNS_TYPE_ANY)
		family = AF_INET; /* ANY: the A RRset, as RFC 8482 allows a subset */
	else if (qtype == DNS_TYPE_AAAA)
		family = AF_INET6;
	else {
		out->ans.kind = GSLB_ANSWER_NODATA;
		out->ans.dc = GSLB_POLICY_DC_NONE;
		out->ans.all_down = false;
		out->ans.count = 0;
		out->ans.cname = NULL;
		out->ans.ttl = s->p.ttl;
		return;
	}
	decide_t d;
	out->svc = &s->p;
	out->ecs_scope = view_decide(view, s, family, client, &qs->rng, &d, &out->ans, NULL);
	out->ecs_ignored = d.how == CLIENT_ECS_IGNORED || d.how == CLIENT_ECS_PRIVATE;
	count_decision(&qs->stats, out, &d);
	if (qs->demand)
		report_demand(qs->demand, &d);
	if (STEER_UNLIKELY(qs->decisions.record != NULL))
		sample_decision(&qs->decisions, name, qtype, client, out);
	count_answer(view, s, out, &qs->answers);
}
