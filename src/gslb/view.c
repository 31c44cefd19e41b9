/*
 * The GSLB view (see view.h): compiled from a conf_t on the control thread, then read-only.
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
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "dns/const.h"
#include "dns/dname.h"
#include "gslb/geoip.h"
#include "gslb/nets_set.h"
#include "gslb/nettree.h"

/* ---- compiled structures ---- */

typedef struct {
	char *name;           /* owned */
	gslb_nettree_t *tree; /* owned */
	uint32_t *list_off;   /* per list id: offset into @c pool */
	uint16_t *list_len;   /* per list id: length (0 = the service's configured order) */
	uint16_t *pool;       /* conf datacenter indices */
	size_t n_lists;
	gslb_geoip_db_t *db;       /* owned, NULL without geoip; kept for explain */
	gslb_geoip_db_t *asn_db;   /* owned, NULL without geoip.asn-database */
	gslb_geoip_rules_t *rules; /* owned, NULL without geoip */
	gslb_geo_coords_t *coords; /* owned, one per conf datacenter */
	unsigned *rule_lines;      /* owned, config line per geoip rule (explain) */
	gslb_nets_set_t *nets;     /* owned: the nets prefixes with provenance (explain, maps) */
	unsigned min_prefix4, min_prefix6, max_shrink; /* the map's guards, as configured */
	bool ignore_ecs;
	bool ecs_private_is_absent;
} view_map_t;

typedef struct {
	gslb_policy_svc_t p;        /* p.dcs, p.fallback, p.fallback_cname, p.name owned */
	gslb_policy_addr_t *addrs;  /* owned: every datacenter's addresses, back to back */
	const view_map_t *map;      /* geo only, else NULL */
	uint8_t *conf2svc;          /* owned: conf datacenter index -> p.dcs index, 0xff = none */
	uint8_t persist4, persist6; /* client prefix hashed by persist */
	bool persist;               /* some level uses persist: the scope covers the prefix */
} view_svc_t;

enum { VIEW_NAME_SERVICE, VIEW_NAME_WHOAMI };

struct gslb_name {
	uint8_t *wire; /* owned, lowercase */
	uint8_t len;
	uint8_t kind; /* VIEW_NAME_* */
	uint32_t svc; /* index into view->svcs for services */
};

struct gslb_view {
	view_map_t *maps;
	size_t n_maps;
	view_svc_t *svcs;
	size_t n_svcs;
	gslb_name_t *names;
	size_t n_names;
	size_t n_whoami;
	uint32_t *slots; /* names index + 1, 0 = empty; power-of-two size */
	size_t slot_mask;
	char **dc_names; /* owned copies of the conf datacenter names */
	size_t n_dcs;
	/*
	 * Everything above is shared by the views gslb_view_with_health() derives from one
	 * build (immutable once built); @c shared counts those views. Control thread only.
	 */
	uint32_t *shared;
	gslb_health_t *health; /* owned by this view alone */
};

/* ---- helpers ---- */

static uint32_t view_hash(const uint8_t *wire, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ wire[i]) * 16777619u;
	return h;
}

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

static void addr_str(int family, const uint8_t *addr, char *buf, size_t len)
{
	if (!inet_ntop(family, addr, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

/* Address family length in bits. */
static unsigned family_bits(int family)
{
	return family == AF_INET ? 32 : 128;
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
		    "geo, weighted, persist or round-robin)",
		    cs->name, pol);
	const char *ad = cs->all_down ? cs->all_down : "first-datacenter";
	if (gslb_alldown_parse(ad, &p->all_down) < 0)
		return build_err(err, errlen, conf, cs->line, "service %s: unknown all-down '%s'",
		                 cs->name, ad);
	if (p->policy == GSLB_POLICY_GEO) {
		if (cs->map == SIZE_MAX || cs->map >= v->n_maps)
			return build_err(err, errlen, conf, cs->line,
			                 "service %s: policy geo needs a map", cs->name);
		s->map = &v->maps[cs->map];
	} else if (cs->map != SIZE_MAX) {
		return build_err(err, errlen, conf, cs->line,
		                 "service %s: a map is only used by policy geo, not '%s'", cs->name,
		                 pol);
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
	s->persist = p->policy == GSLB_POLICY_PERSIST;

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
			int ret = conf_addr(conf, cs, cd->line, &cd->addresses[j], &s->addrs[k],
			                    err, errlen);
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
			int ret = conf_addr(conf, cs, cs->line, &cs->fallback[j], &p->fallback[j],
			                    err, errlen);
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

static void svc_free(view_svc_t *s)
{
	free((char *)s->p.name);
	free(s->p.dcs);
	free(s->p.fallback);
	free((uint8_t *)s->p.fallback_cname);
	free(s->addrs);
	free(s->conf2svc);
}

/* ---- names ---- */

static const gslb_name_t *names_find(const gslb_view_t *v, const uint8_t *wire, size_t len)
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

/* Add @p text; returns 0, STEER_ESYNTAX for a bad name or STEER_EEXIST for a duplicate. */
static int names_add(gslb_view_t *v, const char *text, uint8_t kind, uint32_t svc)
{
	uint8_t wire[DNS_DNAME_MAXLEN];
	int len = dname_from_str(text, wire);
	if (len < 0)
		return STEER_ESYNTAX;
	dname_lower(wire);
	if (names_find(v, wire, (size_t)len))
		return STEER_EEXIST;
	gslb_name_t *n = &v->names[v->n_names];
	n->wire = xmemdup(wire, (size_t)len);
	n->len = (uint8_t)len;
	n->kind = kind;
	n->svc = svc;
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
	for (size_t i = 0; i < v->n_svcs; i++) {
		const gslb_policy_svc_t *p = &v->svcs[i].p;
		char sname[DNS_DNAME_MAXLEN * 4 + 2];
		svc_plain_name(p->name, sname, sizeof(sname));
		for (size_t d = 0; d < p->dc_count; d++) {
			for (size_t a = 0; a < p->dcs[d].addr_count; a++) {
				const gslb_policy_addr_t *pa = &p->dcs[d].addrs[a];
				char astr[INET6_ADDRSTRLEN];
				addr_str(pa->family, pa->addr, astr, sizeof(astr));
				char tname[sizeof(sname) + 300];
				snprintf(tname, sizeof(tname), "service/%s/%s/%s", sname,
				         p->dcs[d].name, astr);
				ret = gslb_health_set_name(v->health, pa->target, tname);
				if (ret < 0)
					return build_err(err, errlen, conf, conf->services[i].line,
					                 "service %s: bad target name '%s'",
					                 p->name, tname);
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

	v->n_dcs = conf->n_datacenters;
	v->dc_names = xcalloc(v->n_dcs + 1, sizeof(*v->dc_names));
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
		ret = names_add(v, cs->name, VIEW_NAME_SERVICE, (uint32_t)i);
		if (ret < 0) {
			ret = build_err(err, errlen, conf, cs->line, "service %s: %s", cs->name,
			                ret == STEER_EEXIST ? "name defined twice" : "bad name");
			goto fail;
		}
	}
	for (size_t i = 0; i < conf->n_whoami; i++) {
		ret = names_add(v, conf->whoami[i], VIEW_NAME_WHOAMI, 0);
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
	return v;
}

void gslb_view_free(gslb_view_t *v)
{
	if (!v)
		return;
	gslb_health_free(v->health);
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
	free(v);
}

const gslb_name_t *gslb_view_find(const gslb_view_t *view, const uint8_t *qname)
{
	return names_find(view, qname, dname_len(qname));
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

/* ---- deciding ---- */

typedef enum {
	CLIENT_RESOLVER,    /* no ECS in the query */
	CLIENT_ECS,         /* ECS used */
	CLIENT_ECS_ZERO,    /* ECS with source prefix 0: the resolver asks for no tailoring */
	CLIENT_ECS_IGNORED, /* the map ignores ECS */
	CLIENT_ECS_PRIVATE, /* ECS address private/loopback/link-local: treated as absent */
} client_how_t;

/* Everything a decision looked at, for explain. */
typedef struct {
	client_how_t how;
	int family; /* of the address decided on */
	uint8_t addr[16];
	uint8_t len;   /* bits of it used (the ECS source prefix or the full address) */
	uint32_t list; /* geo: map list id */
	uint8_t scope; /* map block scope */
	uint8_t order[GSLB_POLICY_DC_MAX];
	uint8_t order_len;
	gslb_policy_query_t q;
} decide_t;

/* The address the decision is based on (RFC 7871 7.1.1 / 7.2.1). */
static void pick_client(const view_map_t *map, const gslb_client_t *c, decide_t *d)
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
static uint8_t decide(const gslb_view_t *v, const view_svc_t *s, sa_family_t family,
                      const gslb_client_t *client, gslb_policy_rng_t *rng, decide_t *d,
                      gslb_policy_answer_t *ans, gslb_policy_trace_t *trace)
{
	pick_client(s->map, client, d);
	d->q = (gslb_policy_query_t){.family = family};
	d->order_len = 0;
	uint8_t scope = 0;
	if (s->map) {
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
		scope = d->scope;
	}
	/* The persist key: cheap, so always computed (datacenter- or in-datacenter persist). */
	unsigned plen = d->family == AF_INET ? s->persist4 : s->persist6;
	if (plen > d->len)
		plen = d->len;
	d->q.client_key =
	    gslb_policy_client_key(d->family == AF_INET ? AF_INET : AF_INET6, d->addr, plen);
	if (s->persist && plen > scope)
		scope = (uint8_t)plen;
	gslb_policy_select(&s->p, v->health, &d->q, rng, ans, trace);
	if (d->how != CLIENT_ECS)
		scope = 0;
	return scope;
}

static void answer_whoami(const gslb_client_t *c, uint16_t qtype, gslb_result_t *out)
{
	decide_t d;
	gslb_client_t rc = {.resolver = c->resolver, .ecs = NULL};
	pick_client(NULL, &rc, &d);
	out->ttl = GSLB_VIEW_WHOAMI_TTL;
	out->ecs_scope = c->ecs ? c->ecs->source_len : 0;
	out->kind = GSLB_RESULT_NODATA;
	if ((qtype == DNS_TYPE_A && d.family == AF_INET) ||
	    (qtype == DNS_TYPE_AAAA && d.family == AF_INET6)) {
		out->kind = GSLB_RESULT_ADDRS;
		memcpy(out->whoami_addr, d.addr, 16);
		out->addrs[0] = out->whoami_addr;
		out->count = 1;
		return;
	}
	if (qtype != DNS_TYPE_TXT)
		return;
	char s[2][96];
	char a[INET6_ADDRSTRLEN];
	if (d.family == AF_INET || d.family == AF_INET6) {
		addr_str(d.family, d.addr, a, sizeof(a));
		snprintf(s[0], sizeof(s[0]), "resolver %s", a);
	} else {
		snprintf(s[0], sizeof(s[0]), "resolver unknown");
	}
	if (c->ecs) {
		int fam = c->ecs->family == DNS_ECS_FAMILY_IPV4 ? AF_INET : AF_INET6;
		addr_str(fam, c->ecs->addr, a, sizeof(a));
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
	out->kind = GSLB_RESULT_TXT;
}

void gslb_view_answer(const gslb_view_t *view, const gslb_name_t *name, uint16_t qtype,
                      const gslb_client_t *client, gslb_policy_rng_t *rng, gslb_result_t *out)
{
	out->kind = GSLB_RESULT_NODATA;
	out->ttl = 0;
	out->ecs_scope = 0;
	out->count = 0;
	out->cname = NULL;
	out->txt_len = 0;
	out->ecs_ignored = false;
	if (name->kind == VIEW_NAME_WHOAMI) {
		answer_whoami(client, qtype, out);
		return;
	}
	const view_svc_t *s = &view->svcs[name->svc];
	sa_family_t family;
	if (qtype == DNS_TYPE_A || qtype == DNS_TYPE_ANY)
		family = AF_INET; /* ANY: the A RRset, as RFC 8482 allows a subset */
	else if (qtype == DNS_TYPE_AAAA)
		family = AF_INET6;
	else {
		out->ttl = s->p.ttl;
		return;
	}
	decide_t d;
	gslb_policy_answer_t ans;
	uint8_t scope = decide(view, s, family, client, rng, &d, &ans, NULL);
	out->ecs_ignored = d.how == CLIENT_ECS_IGNORED || d.how == CLIENT_ECS_PRIVATE;
	out->ttl = ans.ttl;
	out->ecs_scope = scope;
	switch (ans.kind) {
	case GSLB_ANSWER_ADDRS:
		out->kind = GSLB_RESULT_ADDRS;
		for (unsigned i = 0; i < ans.count; i++)
			out->addrs[i] = gslb_policy_answer_addr(&s->p, &ans, i)->addr;
		out->count = ans.count;
		break;
	case GSLB_ANSWER_CNAME:
		out->kind = GSLB_RESULT_CNAME;
		out->cname = ans.cname;
		break;
	case GSLB_ANSWER_NODATA:
		out->kind = GSLB_RESULT_NODATA;
		break;
	case GSLB_ANSWER_SERVFAIL:
		out->kind = GSLB_RESULT_SERVFAIL;
		break;
	}
}

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
			addr_str(fam, net, a, sizeof(a));
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
	addr_str(fam, block, a, sizeof(a));
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
	gslb_policy_rng_t rng;
	gslb_policy_rng_init(&rng, 1);
	if (gn->kind == VIEW_NAME_WHOAMI) {
		outf(&o, "%s: whoami name\n", name);
		gslb_result_t r;
		gslb_view_answer(view, gn, DNS_TYPE_TXT, &c, &rng, &r);
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
		uint8_t scope = decide(view, s, fams[f], &c, &rng, &d, &ans, &trace);
		outf(&o, "== %s ==\n", fams[f] == AF_INET ? "A" : "AAAA");
		char a[INET6_ADDRSTRLEN];
		if (d.family == AF_INET || d.family == AF_INET6)
			addr_str(d.family, d.addr, a, sizeof(a));
		else
			snprintf(a, sizeof(a), "unknown");
		outf(&o, "client: %s/%u, %s\n", a, d.len, how_str(d.how));
		if (s->map)
			explain_map(view, s, &d, &o);
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
