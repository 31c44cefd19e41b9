/*
 * Explaining a GSLB decision (see view.h, gslb_view_explain()): the same decision as the query
 * path (view_decide()), with its trace, written as text for `steerctl explain`.
 */
#include "gslb/view.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "dns/const.h"
#include "dns/dname.h"
#include "gslb/view_int.h"

/* ---- explain ---- */

typedef struct {
	char *buf;
	size_t len, pos;
} out_t;

STEER_PRINTF(2, 3)
static void outf(out_t *o, const char *fmt, ...)
{
	if (o->pos >= o->len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
	if (o->pos >= o->len)
		o->pos = o->len;
}

/* "192.0.2.1" or "2001:db8::1" into a sockaddr (port 0). */
static int parse_ip(const char *text, steer_sockaddr_t *sa)
{
	memset(sa, 0, sizeof(*sa));
	if (inet_pton(AF_INET, text, &sa->sin.sin_addr) == 1) {
		sa->sin.sin_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, text, &sa->sin6.sin6_addr) == 1) {
		sa->sin6.sin6_family = AF_INET6;
		return 0;
	}
	return STEER_EINVAL;
}

/* "198.51.100.0/24" (host bits are cleared, as a resolver would) into @p ecs. */
static int parse_ecs(const char *text, dns_ecs_t *ecs)
{
	char a[INET6_ADDRSTRLEN + 8];
	const char *slash = strchr(text, '/');
	size_t alen = slash ? (size_t)(slash - text) : strlen(text);
	if (alen >= sizeof(a))
		return STEER_EINVAL;
	memcpy(a, text, alen);
	a[alen] = '\0';
	memset(ecs, 0, sizeof(*ecs));
	unsigned max;
	if (inet_pton(AF_INET, a, ecs->addr) == 1) {
		ecs->family = DNS_ECS_FAMILY_IPV4;
		max = 32;
	} else if (inet_pton(AF_INET6, a, ecs->addr) == 1) {
		ecs->family = DNS_ECS_FAMILY_IPV6;
		max = 128;
	} else {
		return STEER_EINVAL;
	}
	unsigned long len = max;
	if (slash) {
		char *end;
		errno = 0;
		len = strtoul(slash + 1, &end, 10);
		if (!isdigit((unsigned char)slash[1]) || *end || errno || len > max)
			return STEER_EINVAL;
	}
	ecs->source_len = (uint8_t)len;
	for (unsigned i = 0; i < 16; i++) {
		unsigned from = i * 8;
		if (from >= len)
			ecs->addr[i] = 0;
		else if (from + 8 > len)
			ecs->addr[i] &= (uint8_t)(0xff00u >> (len - from));
	}
	return 0;
}

static const char *how_str(client_how_t how)
{
	switch (how) {
	case CLIENT_RESOLVER:
		return "resolver address (query without ECS)";
	case CLIENT_ECS:
		return "ECS subnet";
	case CLIENT_ECS_ZERO:
		return "resolver address (ECS source prefix 0: no client information)";
	case CLIENT_ECS_IGNORED:
		return "resolver address (the map ignores ECS: ignore-ecs)";
	case CLIENT_ECS_PRIVATE:
		return "resolver address (ECS address is private/loopback/link-local: "
		       "ecs-private-is-absent)";
	}
	return "?";
}

/* One database's facts for explain: "/16 AS/CN/31/Shanghai AS4812" (ASN only when known). */
static void explain_facts(const gslb_geoip_record_t *rec, unsigned plen, bool location, out_t *o)
{
	outf(o, "/%u", plen);
	if (location)
		outf(o, " %s/%s/%s/%.*s", rec->continent, rec->country, rec->subdivision,
		     rec->city ? (int)rec->city_len : 0, rec->city ? rec->city : "");
	if (rec->flags & GSLB_GEOIP_REC_ASN)
		outf(o, " AS%u", (unsigned)rec->asn);
}

/* What the database(s) say about @p addr and how the rules classify it. With an
 * asn-database both records are shown, each with its own block, then the merged verdict. */
static void explain_geoip(const gslb_view_t *v, const view_map_t *m, int fam, const uint8_t *addr,
                          out_t *o)
{
	gslb_geoip_record_t loc, asn, rec;
	unsigned lplen = 0, aplen = 0;
	int rl = gslb_geoip_lookup(m->db, fam, addr, &loc, &lplen);
	int ra = m->asn_db ? gslb_geoip_lookup(m->asn_db, fam, addr, &asn, &aplen) : STEER_ENOENT;
	if (rl != 0 && ra != 0) {
		outf(o, "geoip: no data for this address\n");
		return;
	}
	gslb_geoip_record_merge(rl == 0 ? &loc : NULL, ra == 0 ? &asn : NULL, &rec);
	outf(o, "geoip: ");
	if (!m->asn_db) {
		explain_facts(&loc, lplen, true, o);
	} else {
		gslb_geoip_db_info_t li, ai;
		gslb_geoip_info(m->db, &li);
		gslb_geoip_info(m->asn_db, &ai);
		if (rl == 0)
			explain_facts(&loc, lplen, true, o);
		else
			outf(o, "no location data");
		outf(o, " (%s); ", li.type);
		if (ra == 0 && (asn.flags & GSLB_GEOIP_REC_ASN))
			explain_facts(&asn, aplen, false, o);
		else
			outf(o, "no ASN");
		outf(o, " (%s)", ai.type);
	}
	uint16_t tmp[GSLB_POLICY_DC_MAX * 4];
	size_t n = v->n_dcs < STEER_ARRAY_LEN(tmp) ? v->n_dcs : STEER_ARRAY_LEN(tmp);
	gslb_geoip_match_t mt = {0};
	if (gslb_geoip_classify(m->rules, &rec, m->coords, v->n_dcs, tmp, &n, &mt) < 0)
		n = 0;
	outf(o, ", classified by %s", gslb_geoip_how_str(mt.how));
	if (mt.how == GSLB_GEOIP_BY_ASN || mt.how == GSLB_GEOIP_BY_LOCATION)
		outf(o, " (rule %zu, line %u)", mt.rule + 1, m->rule_lines[mt.rule]);
	outf(o, "\n");
}

/* Which input decided: the nets line (even inside a merged block), the mmdb network, or the
 * default. */
static void explain_decided_by(const view_map_t *m, int fam, const decide_t *d, out_t *o)
{
	/* The tree decides a source prefix by its first address (bits beyond it are zero), even
	 * when a longer prefix holds it: look that address up. */
	const gslb_nets_item_t *it =
	    gslb_nets_set_lookup(m->nets, fam, d->addr, fam == AF_INET ? 32 : 128);
	char text[1024];
	if (it) {
		gslb_nets_set_describe(m->nets, it, text, sizeof(text));
		outf(o, "decided by: nets %s\n", text);
		return;
	}
	if (d->list != 0 && m->db) {
		/* the record of each database that has one (with asn-database both count) */
		const gslb_geoip_db_t *dbs[2] = {m->db, m->asn_db};
		const char *sep = "decided by: geoip ";
		for (int i = 0; i < 2 && dbs[i]; i++) {
			gslb_geoip_record_t rec;
			unsigned plen = 0;
			if (gslb_geoip_lookup(dbs[i], fam, d->addr, &rec, &plen) != 0)
				continue;
			uint8_t net[16] = {0};
			memcpy(net, d->addr, plen / 8);
			if (plen % 8)
				net[plen / 8] =
				    d->addr[plen / 8] & (uint8_t)(0xff00u >> (plen % 8));
			char a[INET6_ADDRSTRLEN];
			view_addr_str(fam, net, a, sizeof(a));
			gslb_geoip_db_info_t info;
			gslb_geoip_info(dbs[i], &info);
			outf(o, "%s%s, network %s/%u", sep, info.path, a, plen);
			sep = " + ";
		}
		if (sep[0] == ' ') {
			outf(o, "\n");
			return;
		}
	}
	outf(o, "decided by: %s\n", d->list == 0 ? "the map default" : "geoip");
}

static void explain_map(const gslb_view_t *v, const view_svc_t *s, const decide_t *d, out_t *o)
{
	const view_map_t *m = s->map;
	char a[INET6_ADDRSTRLEN];
	uint8_t block[16] = {0};
	int fam = d->family == AF_INET ? AF_INET : AF_INET6;
	unsigned bits = d->scope;
	memcpy(block, d->addr, bits / 8);
	if (bits % 8)
		block[bits / 8] = d->addr[bits / 8] & (uint8_t)(0xff00u >> (bits % 8));
	view_addr_str(fam, block, a, sizeof(a));
	outf(o, "map: %s, block %s/%u (scope %u)%s\n", m->name, a, bits, bits,
	     d->list == 0 ? ", the map default" : "");
	if (m->db)
		explain_geoip(v, m, fam, d->addr, o);
	explain_decided_by(m, fam, d, o);
	outf(o, "map datacenters:");
	if (m->list_len[d->list] == 0)
		outf(o, " (empty: the service's configured order)");
	for (size_t i = 0; i < m->list_len[d->list]; i++) {
		uint16_t dc = m->pool[m->list_off[d->list] + i];
		outf(o, " %s%s", v->dc_names[dc],
		     s->conf2svc[dc] == 0xff ? "(not in service)" : "");
	}
	outf(o, "\n");
}

/* ---- measured policies ---- */

static const char *fallback_name(const view_svc_t *s)
{
	return gslb_policy_kind_name(s->p.fallback_policy);
}

/* The path measurements of one cell: "rtt 5.2 ms, loss 0 %, hops 3, age 12 s". */
static void explain_cell(const gslb_path_cell_t *c, out_t *o)
{
	if (c->rtt == GSLB_PATHFMT_RTT_NONE)
		outf(o, "rtt none (no reply)");
	else
		outf(o, "rtt %u.%u ms", c->rtt / 10, c->rtt % 10);
	outf(o, ", loss %u %%, hops ", c->loss);
	if (c->hops)
		outf(o, "%u", c->hops);
	else
		outf(o, "unknown");
	outf(o, ", age %u s", c->age_s);
}

static void explain_load(const gslb_steer_dc_t *l, out_t *o)
{
	static const char *const names[GSLB_LOAD_KINDS] = {
	    [GSLB_LOAD_CONNECTIONS] = "connections",
	    [GSLB_LOAD_CAPACITY] = "capacity",
	    [GSLB_LOAD_PACKET_RATE] = "packet-rate",
	    [GSLB_LOAD_KBPS] = "kbps",
	    [GSLB_LOAD_CPU] = "cpu",
	    [GSLB_LOAD_LINK_CAPACITY] = "link-capacity",
	};
	if (!l->have) {
		outf(o, "no load values (%u address%s up)", l->up, l->up == 1 ? "" : "es");
		return;
	}
	const char *sep = "";
	for (unsigned k = 0; k < GSLB_LOAD_KINDS; k++) {
		if (l->have & (1u << k)) {
			outf(o, "%s%s %.1f", sep, names[k], (double)l->v[k]);
			sep = ", ";
		}
	}
	outf(o, ", age %.1f s", l->age_ms / 1000.0);
	if (l->estimated)
		outf(o, " (%u of %u addresses up counted by weight share)", l->estimated, l->up);
}

/* Where the row came from, or why there is none. */
static void explain_row(const gslb_view_t *v, const view_svc_t *s, const decide_t *d, out_t *o)
{
	char a[INET6_ADDRSTRLEN];
	uint8_t net[16] = {0};
	int fam = d->family == AF_INET ? AF_INET : AF_INET6;
	unsigned plen = d->plen;
	memcpy(net, d->addr, plen / 8);
	if (plen % 8)
		net[plen / 8] = d->addr[plen / 8] & (uint8_t)(0xff00u >> (plen % 8));
	view_addr_str(fam, net, a, sizeof(a));
	const char *from = d->how == CLIENT_ECS ? "ECS" : "the resolver";
	switch ((paths_how_t)d->paths) {
	case PATHS_ROW: {
		gslb_paths_info_t info;
		gslb_paths_info(v->paths, &info);
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		uint64_t now_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
		outf(o, "paths: row %s/%u from %s (table built %.1f s ago)\n", a, plen, from,
		     now_ms > info.built_ms ? (double)(now_ms - info.built_ms) / 1000.0 : 0.0);
		return;
	}
	case PATHS_NO_ROW:
		outf(o,
		     "paths: no measurement for %s/%u from %s: fallback %s (reported to the "
		     "agents as urgent)\n",
		     a, plen, from, fallback_name(s));
		return;
	case PATHS_NO_TABLE:
		outf(o, "paths: no path table yet: fallback %s\n", fallback_name(s));
		return;
	case PATHS_TOO_SHORT:
		outf(o, "paths: ECS source /%u is shorter than the rows (/%u): fallback %s\n",
		     d->len, plen, fallback_name(s));
		return;
	case PATHS_NOT_USED:
		break;
	}
}

/* Why the row's sticky best leads (or not) the rtt and qos orders. */
static void explain_sticky_row(const gslb_view_t *v, const view_svc_t *s, const decide_t *d,
                               out_t *o)
{
	unsigned best = gslb_paths_row_best(v->paths, d->row);
	if (best == GSLB_PATHS_NO_COLUMN) {
		outf(o, "sticky best: none (no datacenter has an RTT for this row)\n");
		return;
	}
	size_t dc = gslb_paths_column_dc(v->paths, best);
	const char *name = dc < v->n_dcs ? v->dc_names[dc] : "?";
	if (dc >= v->n_dcs || s->conf2svc[dc] == 0xff) {
		outf(o, "sticky best: %s, not a datacenter of this service: ordered by %s alone\n",
		     name, s->p.policy == GSLB_POLICY_QOS ? "score" : "RTT");
		return;
	}
	if (s->p.policy == GSLB_POLICY_QOS) {
		outf(o, "sticky best: %s, its score counts %u %% more (hysteresis)\n", name,
		     v->paths_margin_pct);
		return;
	}
	/* The service's lowest RTT: when it is not the sticky best, hysteresis holds it back. */
	unsigned low = GSLB_PATHS_NO_COLUMN, sticky_rtt = GSLB_PATHFMT_RTT_NONE;
	unsigned low_rtt = GSLB_PATHFMT_RTT_NONE;
	for (unsigned i = 0; i < s->p.dc_count; i++) {
		uint8_t col = v->path_cols[s->first_dc + i];
		if (col == GSLB_PATHS_NO_COLUMN)
			continue;
		gslb_path_cell_t c = gslb_paths_cell(v->paths, d->row, col);
		if (c.empty)
			continue;
		if (col == best)
			sticky_rtt = c.rtt;
		if (c.rtt < low_rtt) {
			low_rtt = c.rtt;
			low = i;
		}
	}
	outf(o, "sticky best: %s, first", name);
	if (low != GSLB_PATHS_NO_COLUMN && low_rtt < sticky_rtt)
		outf(o,
		     ", held by hysteresis: %s is faster (%u.%u ms) but not yet %u %% and %u ms "
		     "faster for %u rounds",
		     s->p.dcs[low].name, low_rtt / 10, low_rtt % 10, v->paths_margin_pct,
		     v->paths_min_diff_ms, v->steer_opts.rounds);
	else
		outf(o,
		     " (also the lowest RTT; another must be %u %% and %u ms faster for %u rounds "
		     "to replace it)",
		     v->paths_margin_pct, v->paths_min_diff_ms, v->steer_opts.rounds);
	outf(o, "\n");
}

static void explain_by_path(const gslb_view_t *v, const view_svc_t *s, const decide_t *d, out_t *o)
{
	explain_row(v, s, d, o);
	if (d->paths != PATHS_ROW)
		return;
	size_t si = (size_t)(s - v->svcs);
	for (unsigned i = 0; i < s->p.dc_count; i++) {
		uint8_t col = v->path_cols[s->first_dc + i];
		outf(o, "  %s: ", s->p.dcs[i].name);
		if (col == GSLB_PATHS_NO_COLUMN) {
			outf(o, "no agent\n");
			continue;
		}
		gslb_path_cell_t c = gslb_paths_cell(v->paths, d->row, col);
		if (c.empty) {
			outf(o, "no (fresh) measurement\n");
			continue;
		}
		explain_cell(&c, o);
		if (s->p.policy == GSLB_POLICY_QOS) {
			if (v->steer) {
				outf(o, "; ");
				explain_load(gslb_steer_dc(v->steer, si, d->q.family, i), o);
			}
			outf(o, "; score %.1f", (double)d->score[i]);
		}
		outf(o, "\n");
	}
	if (s->p.policy == GSLB_POLICY_RTT || s->p.policy == GSLB_POLICY_QOS)
		explain_sticky_row(v, s, d, o);
}

static void explain_by_load(const gslb_view_t *v, const view_svc_t *s, const decide_t *d, out_t *o)
{
	size_t si = (size_t)(s - v->svcs);
	const char *fam = d->q.family == AF_INET ? "IPv4" : "IPv6";
	if (!v->steer)
		return;
	const gslb_steer_order_t *ord = gslb_steer_order(v->steer, si, d->q.family);
	outf(o, "load (%s), per datacenter over its UP %s addresses:\n",
	     gslb_policy_kind_name(s->p.policy), fam);
	for (unsigned i = 0; i < s->p.dc_count; i++) {
		outf(o, "  %s: ", s->p.dcs[i].name);
		explain_load(gslb_steer_dc(v->steer, si, d->q.family, i), o);
		outf(o, "\n");
	}
	if (ord->n == 0) {
		outf(o, "no datacenter reports the %s values: fallback %s\n",
		     gslb_policy_kind_name(s->p.policy), fallback_name(s));
		return;
	}
	outf(o, "sticky best: %s", s->p.dcs[ord->sticky].name);
	if (ord->challenger != GSLB_POLICY_DC_NONE)
		outf(o, ", held by hysteresis: %s beats it by %u %% or more, %u of %u rounds",
		     s->p.dcs[ord->challenger].name, v->steer_opts.margin_pct, ord->streak,
		     v->steer_opts.rounds);
	else
		outf(o, " (nothing beats it by %u %%)", v->steer_opts.margin_pct);
	outf(o, "\n");
}

static void explain_measured(const gslb_view_t *v, const view_svc_t *s, const decide_t *d, out_t *o)
{
	if (gslb_policy_kind_by_path(s->p.policy))
		explain_by_path(v, s, d, o);
	else
		explain_by_load(v, s, d, o);
}

int gslb_view_explain(const gslb_view_t *view, const char *name, const char *client_ip,
                      const char *ecs, char *buf, size_t len)
{
	out_t o = {buf, len, 0};
	if (len)
		buf[0] = '\0';
	uint8_t wire[DNS_DNAME_MAXLEN];
	if (dname_from_str(name, wire) < 0) {
		outf(&o, "bad name '%s'\n", name);
		return STEER_EINVAL;
	}
	dname_lower(wire);
	const gslb_name_t *gn = gslb_view_find(view, wire);
	if (!gn) {
		outf(&o, "%s is not a GSLB service or whoami name\n", name);
		return STEER_ENOENT;
	}
	steer_sockaddr_t sa;
	if (parse_ip(client_ip, &sa) < 0) {
		outf(&o, "bad client address '%s'\n", client_ip);
		return STEER_EINVAL;
	}
	dns_ecs_t e;
	if (ecs && parse_ecs(ecs, &e) < 0) {
		outf(&o, "bad ECS subnet '%s' (want ADDRESS/LENGTH)\n", ecs);
		return STEER_EINVAL;
	}
	gslb_client_t c = {.resolver = &sa, .ecs = ecs ? &e : NULL};
	/* Explaining must not count as a query: a state of its own, seeded for repeatability. */
	gslb_qstate_t qs = {0};
	gslb_policy_rng_init(&qs.rng, 1);
	if (gn->kind == VIEW_NAME_WHOAMI) {
		outf(&o, "%s: whoami name\n", name);
		gslb_result_t r;
		gslb_view_answer(view, gn, DNS_TYPE_TXT, &c, &qs, &r);
		for (size_t i = 0; i < r.txt_len; i += 1u + r.txt[i])
			outf(&o, "TXT \"%.*s\"\n", (int)r.txt[i], (const char *)&r.txt[i + 1]);
		outf(&o, "scope: %u\n", r.ecs_scope);
		return 0;
	}
	const view_svc_t *s = &view->svcs[gn->svc];
	static const sa_family_t fams[2] = {AF_INET, AF_INET6};
	for (int f = 0; f < 2; f++) {
		decide_t d;
		gslb_policy_answer_t ans;
		gslb_policy_trace_t trace;
		uint8_t scope = view_decide(view, s, fams[f], &c, &qs.rng, &d, &ans, &trace);
		outf(&o, "== %s ==\n", fams[f] == AF_INET ? "A" : "AAAA");
		char a[INET6_ADDRSTRLEN];
		if (d.family == AF_INET || d.family == AF_INET6)
			view_addr_str(d.family, d.addr, a, sizeof(a));
		else
			snprintf(a, sizeof(a), "unknown");
		outf(&o, "client: %s/%u, %s\n", a, d.len, how_str(d.how));
		if (s->map && d.map_used)
			explain_map(view, s, &d, &o);
		else if (s->map)
			outf(&o, "map: %s not consulted: every datacenter is measured\n",
			     s->map->name);
		if (gslb_policy_kind_measured(s->p.policy))
			explain_measured(view, s, &d, &o);
		if (o.pos < o.len) {
			int n = gslb_policy_explain(&s->p, &d.q, &ans, &trace, o.buf + o.pos,
			                            o.len - o.pos);
			if (n > 0)
				o.pos += (size_t)n < o.len - o.pos ? (size_t)n : o.len - o.pos;
		}
		/* gslb_policy_explain() wrote the answer and the TTL */
		outf(&o, "scope: %u%s\n", scope,
		     c.ecs ? "" : " (no ECS in the query: no ECS option in the response)");
	}
	if (o.pos >= o.len && len > 4)
		memcpy(buf + len - 5, "...\n", 5);
	return 0;
}
