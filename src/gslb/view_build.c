/*
 * Compiling the GSLB view (see view.h) from a conf_t, on the control thread; the result is
 * read-only.
 *
 * Maps. Each map becomes one gslb_nettree_t whose values are ids of *interned* datacenter
 * lists (ordered conf datacenter indices): two blocks that decide the same list carry the same
 * id, so the tree merges them and the ECS scope is the widest block with that decision. Id 0
 * is always the map's default list (possibly empty = the service's configured order). Layers,
 * later overriding earlier: default, mmdb leaves classified by the rules (leaves no rule
 * matches keep the default), nets entries (files and inline, longest prefix wins).
 *
 * Names. Services and whoami names sit in one open-addressing hash keyed by the lowercase
 * wire name, probed linearly; the table is at most half full.
 */
#include "gslb/view.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "dns/dname.h"
#include "gslb/geoip.h"
#include "gslb/nets_set.h"
#include "gslb/nettree.h"
#include "gslb/view_int.h"

/* ---- helpers ---- */

static const char *conf_file(const conf_t *conf)
{
	return conf->path ? conf->path : "config";
}

STEER_PRINTF(5, 6)
static int build_err(char *err, size_t errlen, const conf_t *conf, unsigned line, const char *fmt,
                     ...)
{
	int n = snprintf(err, errlen, "%s:%u: ", conf_file(conf), line);
	if (n < 0 || (size_t)n >= errlen)
		return STEER_ECONF;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return STEER_ECONF;
}

/* ---- datacenter list interning (build only) ---- */

typedef struct {
	view_map_t *map;
	size_t pool_len, pool_cap;
	size_t lists_cap;
	uint32_t *slots; /* list id + 1, 0 = empty */
	size_t slot_mask;
} intern_t;

static uint32_t list_hash(const uint16_t *dcs, size_t n)
{
	uint32_t h = 2166136261u ^ (uint32_t)n;
	for (size_t i = 0; i < n; i++)
		h = (h ^ dcs[i]) * 16777619u;
	return h;
}

static void intern_rehash(intern_t *in)
{
	size_t size = (in->slot_mask + 1) * 2;
	free(in->slots);
	in->slots = xcalloc(size, sizeof(*in->slots));
	in->slot_mask = size - 1;
	view_map_t *m = in->map;
	for (uint32_t id = 0; id < m->n_lists; id++) {
		size_t i = list_hash(m->pool + m->list_off[id], m->list_len[id]) & in->slot_mask;
		while (in->slots[i])
			i = (i + 1) & in->slot_mask;
		in->slots[i] = id + 1;
	}
}

/* The id of list @p dcs (interned). */
static uint32_t intern_list(intern_t *in, const uint16_t *dcs, size_t n)
{
	view_map_t *m = in->map;
	size_t i = list_hash(dcs, n) & in->slot_mask;
	for (; in->slots[i]; i = (i + 1) & in->slot_mask) {
		uint32_t id = in->slots[i] - 1;
		if (m->list_len[id] == n &&
		    memcmp(m->pool + m->list_off[id], dcs, n * sizeof(*dcs)) == 0)
			return id;
	}
	if (m->n_lists == in->lists_cap) {
		in->lists_cap *= 2;
		m->list_off = xrealloc(m->list_off, in->lists_cap * sizeof(*m->list_off));
		m->list_len = xrealloc(m->list_len, in->lists_cap * sizeof(*m->list_len));
	}
	while (in->pool_len + n > in->pool_cap) {
		in->pool_cap *= 2;
		m->pool = xrealloc(m->pool, in->pool_cap * sizeof(*m->pool));
	}
	uint32_t id = (uint32_t)m->n_lists++;
	memcpy(m->pool + in->pool_len, dcs, n * sizeof(*dcs));
	m->list_off[id] = (uint32_t)in->pool_len;
	m->list_len[id] = (uint16_t)n;
	in->pool_len += n;
	in->slots[i] = id + 1;
	if (m->n_lists * 2 > in->slot_mask + 1)
		intern_rehash(in);
	return id;
}

/* Intern a conf list; STEER_ERANGE (as a negative int64) for an index out of range. */
static int64_t intern_dclist(intern_t *in, const conf_dclist_t *l, size_t n_dc, uint16_t *tmp)
{
	if (l->n > n_dc || n_dc > GSLB_GEOIP_MAX_DC)
		return STEER_ERANGE;
	for (size_t i = 0; i < l->n; i++) {
		if (l->dc[i] >= n_dc)
			return STEER_ERANGE;
		tmp[i] = (uint16_t)l->dc[i];
	}
	return intern_list(in, tmp, l->n);
}

/* ---- map building ---- */

typedef struct {
	gslb_nettree_builder_t *b;
	view_map_t *map;
	intern_t *in;
	size_t n_dc;
	uint32_t *cache; /* per record id: list id + 1; UINT32_MAX = no match; 0 = unknown */
	size_t cache_len;
	uint16_t *tmp; /* n_dc entries */
	/* A pair walk overlays narrower leaves on wider ones, so a leaf nothing matches must be
	 * set to the default list (its id here) instead of being skipped; UINT32_MAX: skip. */
	uint32_t no_match_value;
} walk_ctx_t;

#define WALK_NO_MATCH UINT32_MAX

static int walk_cb(const steer_prefix_t *prefix, const gslb_geoip_record_t *rec, void *ctx)
{
	walk_ctx_t *w = ctx;
	if (rec->id >= w->cache_len) {
		size_t len = w->cache_len ? w->cache_len : 256;
		while (len <= rec->id)
			len *= 2;
		w->cache = xrealloc(w->cache, len * sizeof(*w->cache));
		memset(w->cache + w->cache_len, 0, (len - w->cache_len) * sizeof(*w->cache));
		w->cache_len = len;
	}
	uint32_t v = w->cache[rec->id];
	if (v == 0) {
		size_t n = w->n_dc;
		int ret = gslb_geoip_classify(w->map->rules, rec, w->map->coords, w->n_dc, w->tmp,
		                              &n, NULL);
		if (ret < 0)
			return ret;
		v = n == 0 ? WALK_NO_MATCH : intern_list(w->in, w->tmp, n) + 1;
		w->cache[rec->id] = v;
	}
	if (v == WALK_NO_MATCH)
		return w->no_match_value == UINT32_MAX
		           ? 0
		           : gslb_nettree_set(w->b, prefix, w->no_match_value);
	return gslb_nettree_set(w->b, prefix, v - 1);
}

/* Open the map's database(s). With asn-database the first one must hold locations and the
 * second ASNs: anything else is a configuration mistake, not a map that silently never
 * matches. */
static int geoip_open(const conf_t *conf, const conf_map_t *cm, view_map_t *m, char *err,
                      size_t errlen)
{
	char msg[512];
	int ret = gslb_geoip_open(cm->geoip_database, &m->db, msg, sizeof(msg));
	if (ret == 0 && cm->geoip_asn_database)
		ret = gslb_geoip_open(cm->geoip_asn_database, &m->asn_db, msg, sizeof(msg));
	if (ret < 0)
		return build_err(err, errlen, conf, cm->line, "map %s: %s", cm->name, msg);
	if (!m->asn_db)
		return 0;
	gslb_geoip_db_info_t loc, asn;
	gslb_geoip_info(m->db, &loc);
	gslb_geoip_info(m->asn_db, &asn);
	if (!(loc.kinds & GSLB_GEOIP_KIND_LOCATION))
		return build_err(err, errlen, conf, cm->line,
		                 "map %s: geoip.database %s (%s) has no location data: with "
		                 "asn-database it must be a City, Country or Enterprise database",
		                 cm->name, loc.path, loc.type);
	if (!(asn.kinds & GSLB_GEOIP_KIND_ASN))
		return build_err(err, errlen, conf, cm->line,
		                 "map %s: geoip.asn-database %s (%s) has no ASN data: want an ASN, "
		                 "ISP or Enterprise database",
		                 cm->name, asn.path, asn.type);
	return 0;
}

static int geoip_rules(const conf_t *conf, const conf_map_t *cm, view_map_t *m, char *err,
                       size_t errlen)
{
	char msg[512];
	gslb_geoip_rule_def_t *defs = xcalloc(cm->n_rules ? cm->n_rules : 1, sizeof(*defs));
	uint16_t *dcs = xcalloc(1 + cm->n_rules * (conf->n_datacenters + 1), sizeof(*dcs));
	uint16_t *p = dcs;
	for (size_t i = 0; i < cm->n_rules; i++) {
		const conf_geoip_rule_t *r = &cm->rules[i];
		defs[i].match = r->match;
		defs[i].asns = r->asn;
		defs[i].n_asns = r->n_asn;
		for (size_t j = 0; j < r->datacenters.n && j <= conf->n_datacenters; j++)
			p[j] = (uint16_t)r->datacenters.dc[j];
		defs[i].dcs = p;
		defs[i].n_dcs = r->datacenters.n;
		p += conf->n_datacenters + 1;
	}
	m->rule_lines = xcalloc(cm->n_rules + 1, sizeof(*m->rule_lines));
	for (size_t i = 0; i < cm->n_rules; i++)
		m->rule_lines[i] = cm->rules[i].line;
	gslb_geoip_opts_t opts = {.auto_distance = cm->auto_distance};
	size_t bad = 0;
	int ret = gslb_geoip_rules_new(defs, cm->n_rules, conf->n_datacenters, &opts, &m->rules,
	                               &bad, msg, sizeof(msg));
	free(defs);
	free(dcs);
	if (ret < 0) {
		unsigned line = bad < cm->n_rules ? cm->rules[bad].line : cm->line;
		return build_err(err, errlen, conf, line, "map %s: geoip rule: %s", cm->name, msg);
	}
	return 0;
}

/* The first rule that is (@p asn) or is not an ASN rule, or NULL. */
static const conf_geoip_rule_t *first_rule(const conf_map_t *cm, bool asn)
{
	for (size_t i = 0; i < cm->n_rules; i++)
		if ((cm->rules[i].n_asn > 0) == asn)
			return &cm->rules[i];
	return NULL;
}

/* A rule needing data that no configured database has would never match: refuse it. */
static int geoip_check_data(const conf_t *conf, const conf_map_t *cm, const view_map_t *m,
                            char *err, size_t errlen)
{
	gslb_geoip_db_info_t info;
	gslb_geoip_info(m->db, &info);
	unsigned kinds = info.kinds;
	if (m->asn_db) {
		gslb_geoip_db_info_t asn;
		gslb_geoip_info(m->asn_db, &asn);
		kinds |= asn.kinds & GSLB_GEOIP_KIND_ASN;
	}
	const conf_geoip_rule_t *r = first_rule(cm, true);
	if (gslb_geoip_rules_use_asn(m->rules) && !(kinds & GSLB_GEOIP_KIND_ASN))
		return build_err(err, errlen, conf, r ? r->line : cm->line,
		                 "map %s: geoip rule with 'asn', but %s (%s) has no ASN data: add "
		                 "geoip.asn-database (e.g. GeoLite2-ASN) or use an ASN, ISP or "
		                 "Enterprise database",
		                 cm->name, info.path, info.type);
	r = first_rule(cm, false);
	if (gslb_geoip_rules_use_location(m->rules) && !(kinds & GSLB_GEOIP_KIND_LOCATION))
		return build_err(err, errlen, conf, r ? r->line : cm->line,
		                 "map %s: geoip %s needs location data, but %s (%s) has none: use "
		                 "a City, Country or Enterprise database",
		                 cm->name, r ? "rule with 'match'" : "auto-distance", info.path,
		                 info.type);
	return 0;
}

static int build_geoip(const conf_t *conf, const conf_map_t *cm, view_map_t *m, intern_t *in,
                       gslb_nettree_builder_t *b, uint16_t *tmp, uint32_t def, char *err,
                       size_t errlen)
{
	int ret = geoip_open(conf, cm, m, err, errlen);
	if (ret == 0)
		ret = geoip_rules(conf, cm, m, err, errlen);
	if (ret == 0)
		ret = geoip_check_data(conf, cm, m, err, errlen);
	if (ret < 0)
		return ret;

	char msg[512];
	walk_ctx_t w = {.b = b,
	                .map = m,
	                .in = in,
	                .n_dc = conf->n_datacenters,
	                .tmp = tmp,
	                .no_match_value = m->asn_db ? def : UINT32_MAX};
	if (m->asn_db)
		ret = gslb_geoip_walk_pair(m->db, m->asn_db, walk_cb, &w, NULL, msg, sizeof(msg));
	else
		ret = gslb_geoip_walk(m->db, walk_cb, &w, NULL, msg, sizeof(msg));
	free(w.cache);
	if (ret == STEER_EMALF)
		return build_err(err, errlen, conf, cm->line, "map %s: %s", cm->name, msg);
	if (ret < 0)
		return build_err(err, errlen, conf, cm->line, "map %s: %s: %s", cm->name,
		                 cm->geoip_database, steer_strerror(ret));
	return 0;
}

/* The map of the same name in the running view, or NULL. */
static const view_map_t *running_map(const gslb_view_build_opts_t *opts, const char *name)
{
	if (!opts || !opts->running)
		return NULL;
	for (size_t i = 0; i < opts->running->n_maps; i++)
		if (strcmp(opts->running->maps[i].name, name) == 0)
			return &opts->running->maps[i];
	return NULL;
}

static int build_map(const conf_t *conf, const conf_map_t *cm, const gslb_view_build_opts_t *opts,
                     view_map_t *m, steer_warnings_t *warnings, char *err, size_t errlen)
{
	int ret = 0;
	size_t n_dc = conf->n_datacenters;
	uint16_t *tmp = xcalloc(n_dc + 1, sizeof(*tmp));
	intern_t in = {.map = m, .pool_cap = 64, .lists_cap = 16, .slot_mask = 63};
	m->name = xstrdup(cm->name);
	m->ignore_ecs = cm->ignore_ecs;
	m->ecs_private_is_absent = cm->ecs_private_is_absent;
	m->min_prefix4 = cm->min_prefix4;
	m->min_prefix6 = cm->min_prefix6;
	m->max_shrink = cm->max_shrink;
	m->list_off = xcalloc(in.lists_cap, sizeof(*m->list_off));
	m->list_len = xcalloc(in.lists_cap, sizeof(*m->list_len));
	m->pool = xcalloc(in.pool_cap, sizeof(*m->pool));
	in.slots = xcalloc(in.slot_mask + 1, sizeof(*in.slots));
	m->coords = xcalloc(n_dc + 1, sizeof(*m->coords));
	for (size_t i = 0; i < n_dc; i++) {
		const conf_datacenter_t *d = &conf->datacenters[i];
		m->coords[i].valid = d->has_coords && gslb_geo_coords_ok(d->lat, d->lon);
		m->coords[i].lat = d->lat;
		m->coords[i].lon = d->lon;
	}

	gslb_nettree_builder_t *b = NULL;
	uint32_t *values = xcalloc(cm->n_nets + 1, sizeof(*values));
	int64_t def = intern_dclist(&in, &cm->default_dcs, n_dc, tmp);
	if (def < 0) {
		ret = build_err(err, errlen, conf, cm->line, "map %s: default: bad datacenter list",
		                cm->name);
		goto out;
	}
	b = gslb_nettree_builder_new((uint32_t)def);

	if (cm->geoip_database) {
		ret = build_geoip(conf, cm, m, &in, b, tmp, (uint32_t)def, err, errlen);
		if (ret < 0)
			goto out;
	}
	for (size_t i = 0; i < cm->n_nets; i++) {
		int64_t id = intern_dclist(&in, &cm->nets[i].datacenters, n_dc, tmp);
		if (id < 0) {
			ret = build_err(err, errlen, conf, cm->nets[i].line,
			                "map %s: nets: bad datacenter list", cm->name);
			goto out;
		}
		values[i] = (uint32_t)id;
	}
	const view_map_t *old = running_map(opts, cm->name);
	gslb_nets_opts_t nopts = {.map = cm->name,
	                          .conf_path = conf_file(conf),
	                          .min4 = cm->min_prefix4,
	                          .min6 = cm->min_prefix6,
	                          .max_shrink = cm->max_shrink,
	                          .running = old ? old->nets : NULL,
	                          .baseline = opts ? opts->baseline : NULL,
	                          .force = opts && opts->force};
	ret = gslb_nets_set_build(cm, values, &nopts, warnings, &m->nets, err, errlen);
	if (ret < 0)
		goto out;
	size_t bad = 0;
	ret = gslb_nets_set_apply(m->nets, b, &bad);
	if (ret < 0) {
		/* Only values beyond GSLB_NETTREE_VALUE_MAX or bad families can get here. */
		ret = build_err(err, errlen, conf, cm->line, "map %s: nets entry %zu: %s", cm->name,
		                bad, steer_strerror(ret));
		goto out;
	}
	m->tree = gslb_nettree_build(b);
	b = NULL;
out:
	gslb_nettree_builder_free(b);
	free(values);
	free(in.slots);
	free(tmp);
	return ret;
}

static void map_free(view_map_t *m)
{
	free(m->name);
	gslb_nettree_free(m->tree);
	free(m->list_off);
	free(m->list_len);
	free(m->pool);
	gslb_geoip_close(m->db);
	gslb_geoip_close(m->asn_db);
	gslb_geoip_rules_free(m->rules);
	free(m->coords);
	free(m->rule_lines);
	gslb_nets_set_free(m->nets);
}

/* ---- services ---- */

/* Name without the trailing dot, as target names use it. */
static void svc_plain_name(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s", name);
	size_t n = strlen(buf);
	if (n > 1 && buf[n - 1] == '.')
		buf[n - 1] = '\0';
}

static int conf_addr(const conf_t *conf, const conf_service_t *cs, unsigned line,
                     const conf_address_t *ca, gslb_policy_addr_t *pa, char *err, size_t errlen)
{
	if (ca->family != AF_INET && ca->family != AF_INET6)
		return build_err(err, errlen, conf, line, "service %s: bad address family",
		                 cs->name);
	if (ca->weight < 1 || ca->weight > 65535)
		return build_err(err, errlen, conf, line,
		                 "service %s: address weight %u out of range 1..65535", cs->name,
		                 (unsigned)ca->weight);
	memcpy(pa->addr, ca->addr, 16);
	pa->family = ca->family;
	pa->weight = (uint16_t)ca->weight;
	return 0;
}

/* The fallback policy and qos coefficients of a measured policy. */
static int measured_policy(const conf_t *conf, const conf_service_t *cs, view_svc_t *s, char *err,
                           size_t errlen)
{
	gslb_policy_svc_t *p = &s->p;
	p->fallback_policy = cs->map != SIZE_MAX ? GSLB_POLICY_GEO : GSLB_POLICY_FAILOVER;
	if (!gslb_policy_kind_measured(p->policy)) {
		if (cs->fallback_policy)
			return build_err(err, errlen, conf, cs->line,
			                 "service %s: fallback-policy is only used by a measured "
			                 "policy, not '%s'",
			                 cs->name, gslb_policy_kind_name(p->policy));
		return 0;
	}
	if (cs->fallback_policy &&
	    (gslb_policy_kind_parse(cs->fallback_policy, &p->fallback_policy) < 0 ||
	     !gslb_policy_kind_dc_level(p->fallback_policy) ||
	     gslb_policy_kind_measured(p->fallback_policy)))
		return build_err(err, errlen, conf, cs->line,
		                 "service %s: fallback-policy '%s' cannot decide without "
		                 "measurements (use failover, geo, weighted, persist or "
		                 "round-robin)",
		                 cs->name, cs->fallback_policy);
	for (size_t i = 0; i < CONF_QOS_TERMS; i++) {
		if (cs->qos[i] > 1000)
			return build_err(err, errlen, conf, cs->line,
			                 "service %s: qos coefficient %u out of range 0..1000",
			                 cs->name, cs->qos[i]);
		s->qos[i] = (uint16_t)cs->qos[i];
	}
	return 0;
}

static int build_service(const conf_t *conf, const conf_service_t *cs, view_svc_t *s,
                         const gslb_view_t *v, uint32_t *next_target, char *err, size_t errlen)
{
	gslb_policy_svc_t *p = &s->p;
	p->name = xstrdup(cs->name);
	s->conf2svc = xmalloc(conf->n_datacenters + 1);
	memset(s->conf2svc, 0xff, conf->n_datacenters + 1);

	const char *pol = cs->policy ? cs->policy : "failover";
	if (gslb_policy_kind_parse(pol, &p->policy) < 0)
		return build_err(err, errlen, conf, cs->line, "service %s: unknown policy '%s'",
		                 cs->name, pol);
	if (!gslb_policy_kind_dc_level(p->policy))
		return build_err(
		    err, errlen, conf, cs->line,
		    "service %s: policy '%s' does not choose datacenters (use failover, "
		    "geo, weighted, persist, round-robin or a measured policy such as rtt)",
		    cs->name, pol);
	const char *ad = cs->all_down ? cs->all_down : "first-datacenter";
	if (gslb_alldown_parse(ad, &p->all_down) < 0)
		return build_err(err, errlen, conf, cs->line, "service %s: unknown all-down '%s'",
		                 cs->name, ad);
	int ret = measured_policy(conf, cs, s, err, errlen);
	if (ret < 0)
		return ret;
	bool uses_map = p->policy == GSLB_POLICY_GEO || (gslb_policy_kind_measured(p->policy) &&
	                                                 p->fallback_policy == GSLB_POLICY_GEO);
	if (uses_map) {
		if (cs->map == SIZE_MAX || cs->map >= v->n_maps)
			return build_err(err, errlen, conf, cs->line,
			                 "service %s: policy geo needs a map", cs->name);
		s->map = &v->maps[cs->map];
	} else if (cs->map != SIZE_MAX) {
		return build_err(err, errlen, conf, cs->line,
		                 "service %s: a map is only used by policy geo (or a measured "
		                 "policy falling back on geo), not '%s'",
		                 cs->name, pol);
	}
	if (cs->ttl > GSLB_POLICY_TTL_MAX)
		return build_err(err, errlen, conf, cs->line, "service %s: ttl %u too large",
		                 cs->name, (unsigned)cs->ttl);
	p->ttl = cs->ttl;
	if (cs->persist_prefix4 > 32 || cs->persist_prefix6 > 128)
		return build_err(
		    err, errlen, conf, cs->line,
		    "service %s: persist-prefix out of range (IPv4 0..32, IPv6 0..128)", cs->name);
	s->persist4 = (uint8_t)cs->persist_prefix4;
	s->persist6 = (uint8_t)cs->persist_prefix6;
	s->persist =
	    p->policy == GSLB_POLICY_PERSIST ||
	    (gslb_policy_kind_measured(p->policy) && p->fallback_policy == GSLB_POLICY_PERSIST);

	if (cs->n_dcs == 0 || cs->n_dcs > GSLB_POLICY_DC_MAX)
		return build_err(err, errlen, conf, cs->line,
		                 "service %s: needs 1..%d datacenters, has %zu", cs->name,
		                 GSLB_POLICY_DC_MAX, cs->n_dcs);
	size_t n_addrs = 0;
	for (size_t i = 0; i < cs->n_dcs; i++) {
		const conf_service_dc_t *cd = &cs->dcs[i];
		if (cd->n_addresses == 0 || cd->n_addresses > GSLB_POLICY_ADDR_MAX)
			return build_err(err, errlen, conf, cd->line,
			                 "service %s: datacenter needs 1..%d addresses, has %zu",
			                 cs->name, GSLB_POLICY_ADDR_MAX, cd->n_addresses);
		n_addrs += cd->n_addresses;
	}
	p->dcs = xcalloc(cs->n_dcs, sizeof(*p->dcs));
	p->dc_count = (uint8_t)cs->n_dcs;
	s->svc2conf = xcalloc(cs->n_dcs, sizeof(*s->svc2conf));
	s->addrs = xcalloc(n_addrs, sizeof(*s->addrs));
	size_t k = 0;
	for (size_t i = 0; i < cs->n_dcs; i++) {
		const conf_service_dc_t *cd = &cs->dcs[i];
		gslb_policy_dc_t *d = &p->dcs[i];
		if (cd->datacenter >= conf->n_datacenters)
			return build_err(err, errlen, conf, cd->line,
			                 "service %s: unknown datacenter index %zu", cs->name,
			                 cd->datacenter);
		if (s->conf2svc[cd->datacenter] != 0xff)
			return build_err(err, errlen, conf, cd->line,
			                 "service %s: datacenter %s listed twice", cs->name,
			                 conf->datacenters[cd->datacenter].name);
		s->conf2svc[cd->datacenter] = (uint8_t)i;
		s->svc2conf[i] = (uint16_t)cd->datacenter;
		d->name = v->dc_names[cd->datacenter];
		if (cd->weight > 65535)
			return build_err(
			    err, errlen, conf, cd->line,
			    "service %s: datacenter %s: weight %u out of range 1..65535", cs->name,
			    d->name, (unsigned)cd->weight);
		/* 0: a conf_t built by code that left the field unset; the schema default is 1. */
		d->weight = cd->weight ? (uint16_t)cd->weight : 1;
		const char *dp = cd->policy ? cd->policy : "all";
		if (gslb_policy_kind_parse(dp, &d->policy) < 0)
			return build_err(err, errlen, conf, cd->line,
			                 "service %s: datacenter %s: unknown policy '%s'", cs->name,
			                 d->name, dp);
		if (!gslb_policy_kind_in_dc(d->policy))
			return build_err(
			    err, errlen, conf, cd->line,
			    "service %s: datacenter %s: policy '%s' cannot choose "
			    "addresses (use all, failover, weighted, multi, round-robin or "
			    "persist)",
			    cs->name, d->name, dp);
		if (d->policy == GSLB_POLICY_MULTI) {
			if (cd->multi < 1 || cd->multi > GSLB_POLICY_ADDR_MAX)
				return build_err(err, errlen, conf, cd->line,
				                 "service %s: datacenter %s: multi must be 1..%d",
				                 cs->name, d->name, GSLB_POLICY_ADDR_MAX);
			d->multi = (uint8_t)cd->multi;
		}
		if (d->policy == GSLB_POLICY_PERSIST)
			s->persist = true;
		d->addrs = &s->addrs[k];
		d->addr_count = (uint8_t)cd->n_addresses;
		for (size_t j = 0; j < cd->n_addresses; j++, k++) {
			ret = conf_addr(conf, cs, cd->line, &cd->addresses[j], &s->addrs[k], err,
			                errlen);
			if (ret < 0)
				return ret;
			s->addrs[k].target = (*next_target)++;
		}
	}
	if (cs->n_fallback > GSLB_POLICY_ADDR_MAX)
		return build_err(err, errlen, conf, cs->line,
		                 "service %s: at most %d fallback addresses", cs->name,
		                 GSLB_POLICY_ADDR_MAX);
	if (cs->n_fallback) {
		p->fallback = xcalloc(cs->n_fallback, sizeof(*p->fallback));
		p->fallback_count = (uint8_t)cs->n_fallback;
		for (size_t j = 0; j < cs->n_fallback; j++) {
			ret = conf_addr(conf, cs, cs->line, &cs->fallback[j], &p->fallback[j], err,
			                errlen);
			if (ret < 0)
				return ret;
			p->fallback[j].target = UINT32_MAX; /* health is ignored for fallbacks */
		}
	}
	if (cs->fallback_cname) {
		uint8_t wire[DNS_DNAME_MAXLEN];
		int len = dname_from_str(cs->fallback_cname, wire);
		if (len < 0)
			return build_err(err, errlen, conf, cs->line,
			                 "service %s: bad fallback-cname '%s'", cs->name,
			                 cs->fallback_cname);
		p->fallback_cname = xmemdup(wire, (size_t)len);
	}
	if ((p->fallback_count || p->fallback_cname) && p->all_down != GSLB_ALLDOWN_FALLBACK)
		return build_err(err, errlen, conf, cs->line,
		                 "service %s: fallback is set but all-down is '%s', not 'fallback'",
		                 cs->name, ad);
	char msg[256];
	if (gslb_policy_svc_prepare(p, msg, sizeof(msg)) < 0)
		return build_err(err, errlen, conf, cs->line, "%s", msg);
	return 0;
}

/*
 * A policy steering by paths needs the agents that measure them: without a paths section it
 * is a mistake; with agents for none of the service's datacenters it would always fall back,
 * which is worth a warning but may be a staged roll-out. Load policies without any metrics
 * monitor likewise always fall back.
 */
static int check_measurements(const conf_t *conf, const conf_service_t *cs, const view_svc_t *s,
                              steer_warnings_t *warnings, char *err, size_t errlen)
{
	gslb_policy_kind_t k = s->p.policy;
	const char *name = gslb_policy_kind_name(k);
	if (!gslb_policy_kind_measured(k))
		return 0;
	if (gslb_policy_kind_by_path(k)) {
		if (!conf->paths.enabled)
			return build_err(err, errlen, conf, cs->line,
			                 "service %s: policy %s needs measured paths: add a "
			                 "'paths:' section with an agent per datacenter",
			                 cs->name, name);
		bool any = false;
		for (size_t a = 0; a < conf->paths.n_agents; a++)
			for (size_t d = 0; d < cs->n_dcs; d++)
				any |= conf->paths.agents[a].datacenter == cs->dcs[d].datacenter;
		if (!any)
			steer_warnings_add(warnings,
			                   "%s:%u: service %s: policy %s, but no datacenter of the "
			                   "service has a paths agent: %s always decides",
			                   conf_file(conf), cs->line, cs->name, name,
			                   gslb_policy_kind_name(s->p.fallback_policy));
	}
	if (k == GSLB_POLICY_RTT || k == GSLB_POLICY_COMPLETION_RATE || k == GSLB_POLICY_HOPS)
		return 0;
	bool metrics = cs->metrics != CONF_MONITOR_NONE;
	for (size_t d = 0; d < cs->n_dcs; d++)
		metrics |= cs->dcs[d].metrics != CONF_MONITOR_NONE;
	if (!metrics && k != GSLB_POLICY_QOS)
		steer_warnings_add(warnings,
		                   "%s:%u: service %s: policy %s, but no 'metrics' monitor reports "
		                   "load for its addresses: %s always decides",
		                   conf_file(conf), cs->line, cs->name, name,
		                   gslb_policy_kind_name(s->p.fallback_policy));
	return 0;
}

static void svc_free(view_svc_t *s)
{
	free((char *)s->p.name);
	free(s->p.dcs);
	free(s->p.fallback);
	free((uint8_t *)s->p.fallback_cname);
	free(s->addrs);
	free(s->conf2svc);
	free(s->svc2conf);
}

/* ---- names ---- */

/* Add @p text; returns 0, STEER_ESYNTAX for a bad name or STEER_EEXIST for a duplicate. */
static int names_add(gslb_view_t *v, const char *text, uint8_t kind, uint32_t svc, unsigned line)
{
	uint8_t wire[DNS_DNAME_MAXLEN];
	int len = dname_from_str(text, wire);
	if (len < 0)
		return STEER_ESYNTAX;
	dname_lower(wire);
	if (view_names_find(v, wire, (size_t)len))
		return STEER_EEXIST;
	gslb_name_t *n = &v->names[v->n_names];
	n->wire = xmemdup(wire, (size_t)len);
	n->len = (uint8_t)len;
	n->kind = kind;
	n->svc = svc;
	n->line = line;
	size_t i = view_hash(wire, (size_t)len) & v->slot_mask;
	while (v->slots[i])
		i = (i + 1) & v->slot_mask;
	v->slots[i] = (uint32_t)++v->n_names;
	return 0;
}

/* ---- health ---- */

static int build_health(const conf_t *conf, gslb_view_t *v, uint32_t n_targets, char *err,
                        size_t errlen)
{
	int ret = 0;
	char msg[1024];
	v->health = gslb_health_new(n_targets);
	v->targets = xcalloc(n_targets + 1, sizeof(*v->targets));
	v->n_targets = n_targets;
	for (size_t i = 0; i < v->n_svcs; i++) {
		const gslb_policy_svc_t *p = &v->svcs[i].p;
		const conf_service_t *cs = &conf->services[i];
		char sname[DNS_DNAME_MAXLEN * 4 + 2];
		svc_plain_name(p->name, sname, sizeof(sname));
		for (size_t d = 0; d < p->dc_count; d++) {
			const conf_service_dc_t *cd = &cs->dcs[d]; /* p->dcs[d] was built from it */
			for (size_t a = 0; a < p->dcs[d].addr_count; a++) {
				const gslb_policy_addr_t *pa = &p->dcs[d].addrs[a];
				char astr[INET6_ADDRSTRLEN];
				view_addr_str(pa->family, pa->addr, astr, sizeof(astr));
				char tname[sizeof(sname) + 300];
				snprintf(tname, sizeof(tname), "service/%s/%s/%s", sname,
				         p->dcs[d].name, astr);
				ret = gslb_health_set_name(v->health, pa->target, tname);
				if (ret < 0)
					return build_err(err, errlen, conf, cs->line,
					                 "service %s: bad target name '%s'",
					                 p->name, tname);
				v->targets[pa->target] = (gslb_target_t){
				    .id = pa->target,
				    .name = xstrdup(tname),
				    .family = pa->family,
				    .addr = pa->addr,
				    .service = i,
				    .service_dc = d,
				    .address = a,
				    .datacenter = cd->datacenter,
				    .monitor = cd->monitor != CONF_MONITOR_NONE ? cd->monitor
				                                                : cs->monitor,
				};
			}
		}
	}

	gslb_overrides_t ov, file;
	gslb_overrides_init(&ov);
	gslb_overrides_init(&file);
	for (size_t i = 0; i < conf->n_overrides; i++) {
		const conf_override_t *co = &conf->overrides[i];
		ret = gslb_overrides_set(&ov, co->pattern, !co->up, 0, msg, sizeof(msg));
		if (ret < 0) {
			ret = build_err(err, errlen, conf, co->line, "override: %s", msg);
			goto out;
		}
	}
	size_t n_conf = ov.count;
	if (conf->state_file) {
		ret = gslb_overrides_load(&file, conf->state_file, msg, sizeof(msg));
		if (ret == STEER_ENOENT) {
			ret = 0;
		} else if (ret < 0) {
			snprintf(err, errlen, "%s", msg);
			goto out;
		}
		/* State-file rules come after the config's, so the latest admin command wins. */
		for (size_t i = 0; i < file.count; i++) {
			ret = gslb_overrides_add(&ov, &file.rules[i], msg, sizeof(msg));
			if (ret < 0) {
				snprintf(err, errlen, "%s:%u: %s", conf->state_file,
				         file.rules[i].line, msg);
				goto out;
			}
		}
	}
	uint32_t *matches = xcalloc(ov.count + 1, sizeof(*matches));
	gslb_health_apply_overrides(v->health, &ov, matches);
	/* Config rules that the state file did not replace keep their order at the front. */
	for (size_t i = 0; i < ov.count && i < n_conf; i++)
		if (matches[i] == 0 && ov.rules[i].line == 0)
			log_warn("override '%s' matches no target", ov.rules[i].pattern);
	free(matches);
out:
	gslb_overrides_deinit(&ov);
	gslb_overrides_deinit(&file);
	return ret;
}

/* ---- build ---- */

/* The policy services of @p v, for gslb/steer.h. Caller frees. */
static const gslb_policy_svc_t **svc_list(const gslb_view_t *v)
{
	const gslb_policy_svc_t **svcs = xcalloc(v->n_svcs + 1, sizeof(*svcs));
	for (size_t i = 0; i < v->n_svcs; i++)
		svcs[i] = &v->svcs[i].p;
	return svcs;
}

/* The load orders of @p v under its health table, carrying @p prev's hysteresis. */
static void rebuild_steer(gslb_view_t *v, const gslb_steer_t *prev)
{
	v->steer = NULL;
	if (!v->any_load)
		return;
	const gslb_policy_svc_t **svcs = svc_list(v);
	v->steer = gslb_steer_build(prev, svcs, v->n_svcs, v->health, &v->steer_opts);
	free(svcs);
}

/* A reload: the load hysteresis of the running view's services of the same names. */
static void carry_steer(gslb_view_t *v, const gslb_view_t *running)
{
	if (!v->any_load || !running || !running->steer) {
		rebuild_steer(v, NULL);
		return;
	}
	const gslb_policy_svc_t **svcs = svc_list(v), **old = svc_list(running);
	size_t *from = xcalloc(v->n_svcs + 1, sizeof(*from));
	for (size_t i = 0; i < v->n_svcs; i++) {
		from[i] = SIZE_MAX;
		for (size_t j = 0; j < running->n_svcs; j++)
			if (strcmp(svcs[i]->name, old[j]->name) == 0)
				from[i] = j;
	}
	gslb_steer_t *prev = gslb_steer_remap(running->steer, svcs, v->n_svcs, old, from);
	rebuild_steer(v, prev);
	gslb_steer_free(prev);
	free(from);
	free(old);
	free(svcs);
}

/* Point @p v at @p paths (a new reference) and resolve every service datacenter's column. */
static void attach_paths(gslb_view_t *v, gslb_paths_t *paths)
{
	v->paths = paths ? gslb_paths_ref(paths) : NULL;
	v->path_cols = xmalloc(v->n_svc_dcs + 1);
	memset(v->path_cols, GSLB_PATHS_NO_COLUMN, v->n_svc_dcs + 1);
	if (!paths)
		return;
	for (size_t i = 0; i < v->n_svcs; i++) {
		const view_svc_t *s = &v->svcs[i];
		for (size_t d = 0; d < s->p.dc_count; d++)
			v->path_cols[s->first_dc + d] =
			    (uint8_t)gslb_paths_column(paths, s->svc2conf[d]);
	}
}

int gslb_view_build(const conf_t *conf, const gslb_view_build_opts_t *opts, gslb_view_t **out,
                    steer_warnings_t *warnings, char *err, size_t errlen)
{
	int ret = 0;
	*out = NULL;
	if (errlen)
		err[0] = '\0';
	gslb_view_t *v = xcalloc(1, sizeof(*v));
	v->shared = xcalloc(1, sizeof(*v->shared));
	*v->shared = 1;
	v->answer_bank = opts && opts->running ? !opts->running->answer_bank : 0;

	v->n_dcs = conf->n_datacenters;
	/* Load policies work without a paths section: its defaults then apply (conf_paths.c
	 * fills the struct only when the section is present). */
	const conf_paths_t *cp = &conf->paths;
	v->steer_opts = (gslb_steer_opts_t){.margin_pct = cp->enabled ? cp->hyst_margin : 20,
	                                    .rounds = cp->enabled ? cp->hyst_rounds : 2};
	v->paths_margin_pct = v->steer_opts.margin_pct;
	v->paths_min_diff_ms = cp->enabled ? cp->hyst_min_difference : 10;
	v->paths_plen4 = cp->enabled ? cp->ipv4_prefix : 24;
	v->paths_plen6 = cp->enabled ? cp->ipv6_prefix : 48;
	v->demand_sample = cp->enabled ? cp->demand_sample : 16;
	v->dc_names = xcalloc(v->n_dcs + 1, sizeof(*v->dc_names));
	v->conf_path = xstrdup(conf_file(conf));
	for (size_t i = 0; i < v->n_dcs; i++)
		v->dc_names[i] = xstrdup(conf->datacenters[i].name);

	v->maps = xcalloc(conf->n_maps + 1, sizeof(*v->maps));
	for (size_t i = 0; i < conf->n_maps; i++) {
		v->n_maps = i + 1;
		ret = build_map(conf, &conf->maps[i], opts, &v->maps[i], warnings, err, errlen);
		if (ret < 0)
			goto fail;
	}

	size_t n_names = conf->n_services + conf->n_whoami;
	size_t slots = 16;
	while (slots < n_names * 2)
		slots *= 2;
	v->slots = xcalloc(slots, sizeof(*v->slots));
	v->slot_mask = slots - 1;
	v->names = xcalloc(n_names + 1, sizeof(*v->names));

	v->svcs = xcalloc(conf->n_services + 1, sizeof(*v->svcs));
	uint32_t n_targets = 0;
	for (size_t i = 0; i < conf->n_services; i++) {
		const conf_service_t *cs = &conf->services[i];
		v->n_svcs = i + 1;
		ret = build_service(conf, cs, &v->svcs[i], v, &n_targets, err, errlen);
		if (ret < 0)
			goto fail;
		v->svcs[i].answer_slot = v->n_answer_slots;
		v->n_answer_slots += (uint32_t)VIEW_SVC_ANSWER_SLOTS(&v->svcs[i]);
		ret = check_measurements(conf, cs, &v->svcs[i], warnings, err, errlen);
		if (ret < 0)
			goto fail;
		gslb_policy_kind_t k = v->svcs[i].p.policy;
		v->any_load |= gslb_policy_kind_measured(k) &&
		               (k == GSLB_POLICY_QOS || !gslb_policy_kind_by_path(k));
		v->svcs[i].first_dc = v->n_svc_dcs;
		v->n_svc_dcs += v->svcs[i].p.dc_count;
		ret = names_add(v, cs->name, VIEW_NAME_SERVICE, (uint32_t)i, cs->line);
		if (ret < 0) {
			ret = build_err(err, errlen, conf, cs->line, "service %s: %s", cs->name,
			                ret == STEER_EEXIST ? "name defined twice" : "bad name");
			goto fail;
		}
	}
	for (size_t i = 0; i < conf->n_whoami; i++) {
		ret = names_add(v, conf->whoami[i], VIEW_NAME_WHOAMI, 0, 0);
		if (ret < 0) {
			snprintf(err, errlen, "%s: whoami %s: %s", conf_file(conf), conf->whoami[i],
			         ret == STEER_EEXIST ? "name already used by a service or whoami"
			                             : "bad name");
			ret = STEER_ECONF;
			goto fail;
		}
		v->n_whoami++;
	}
	ret = build_health(conf, v, n_targets, err, errlen);
	if (ret < 0)
		goto fail;
	/* No path table yet, even on a reload: the running one's columns number the old
	 * configuration's datacenters. Whoever owns the tables derives one with
	 * gslb_view_with_paths(). */
	attach_paths(v, NULL);
	carry_steer(v, opts ? opts->running : NULL);
	*out = v;
	return 0;
fail:
	if (ret != STEER_ECONF && errlen && !err[0])
		snprintf(err, errlen, "%s: %s", conf_file(conf), steer_strerror(ret));
	gslb_view_free(v);
	return ret < 0 ? ret : STEER_ECONF;
}

gslb_view_t *gslb_view_with_health(const gslb_view_t *view, gslb_health_t *health)
{
	gslb_view_t *v = xmalloc(sizeof(*v));
	*v = *view;
	(*v->shared)++;
	v->health = health;
	v->path_cols = xmemdup(view->path_cols, view->n_svc_dcs + 1);
	if (v->paths)
		gslb_paths_ref(v->paths);
	rebuild_steer(v, view->steer);
	return v;
}

gslb_view_t *gslb_view_with_paths(const gslb_view_t *view, gslb_paths_t *paths)
{
	gslb_view_t *v = xmalloc(sizeof(*v));
	*v = *view;
	(*v->shared)++;
	v->health = gslb_health_dup(view->health, view->health->count);
	attach_paths(v, paths);
	rebuild_steer(v, view->steer);
	return v;
}

bool gslb_view_steer_pending(const gslb_view_t *view)
{
	return view->steer && gslb_steer_pending(view->steer);
}

const gslb_paths_t *gslb_view_paths(const gslb_view_t *view)
{
	return view->paths;
}

void gslb_view_free(gslb_view_t *v)
{
	if (!v)
		return;
	gslb_health_free(v->health);
	gslb_paths_unref(v->paths);
	free(v->path_cols);
	gslb_steer_free(v->steer);
	if (--*v->shared > 0) {
		free(v);
		return;
	}
	free(v->shared);
	for (size_t i = 0; i < v->n_maps; i++)
		map_free(&v->maps[i]);
	free(v->maps);
	for (size_t i = 0; i < v->n_svcs; i++)
		svc_free(&v->svcs[i]);
	free(v->svcs);
	for (size_t i = 0; i < v->n_names; i++)
		free(v->names[i].wire);
	free(v->names);
	free(v->slots);
	for (size_t i = 0; i < v->n_dcs; i++)
		free(v->dc_names[i]);
	free(v->dc_names);
	free(v->conf_path);
	for (size_t i = 0; i < v->n_targets; i++)
		free((char *)v->targets[i].name);
	free(v->targets);
	free(v);
}

unsigned gslb_view_answer_bank(const gslb_view_t *view)
{
	return view->answer_bank;
}

size_t gslb_view_answer_slots(const gslb_view_t *view)
{
	return view->n_answer_slots;
}

void gslb_view_answer_slot(const gslb_view_t *view, size_t slot, const char **service,
                           const char **datacenter)
{
	STEER_ASSERT(slot < view->n_answer_slots);
	/* Services are in slot order: the last whose first slot is <= @p slot has it. */
	size_t lo = 0, hi = view->n_svcs;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (view->svcs[mid].answer_slot <= slot)
			lo = mid;
		else
			hi = mid;
	}
	const view_svc_t *s = &view->svcs[lo];
	size_t i = slot - s->answer_slot;
	static const char *const extra[] = {GSLB_ANSWER_DC_NONE, GSLB_ANSWER_DC_FALLBACK,
	                                    GSLB_ANSWER_DC_ALL_DOWN};
	*service = s->p.name;
	*datacenter = i < s->p.dc_count ? s->p.dcs[i].name : extra[i - s->p.dc_count];
}

const gslb_target_t *gslb_view_targets(const gslb_view_t *view, size_t *n)
{
	*n = view->n_targets;
	return view->targets;
}

const gslb_health_t *gslb_view_health(const gslb_view_t *view)
{
	return view->health;
}

void gslb_view_counts(const gslb_view_t *view, size_t *services, size_t *maps, size_t *whoami)
{
	*services = view->n_svcs;
	*maps = view->n_maps;
	*whoami = view->n_whoami;
}

int gslb_view_map_info(const gslb_view_t *view, size_t i, gslb_view_map_info_t *info)
{
	if (i >= view->n_maps)
		return STEER_ENOENT;
	const view_map_t *m = &view->maps[i];
	memset(info, 0, sizeof(*info));
	info->name = m->name;
	info->nets = m->nets;
	gslb_geoip_db_info_t di;
	if (m->db) {
		gslb_geoip_info(m->db, &di);
		info->geoip_database = di.path;
	}
	if (m->asn_db) {
		gslb_geoip_info(m->asn_db, &di);
		info->geoip_asn_database = di.path;
	}
	info->min_prefix4 = m->min_prefix4;
	info->min_prefix6 = m->min_prefix6;
	info->max_shrink = m->max_shrink;
	return 0;
}
