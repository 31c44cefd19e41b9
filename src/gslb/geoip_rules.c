/*
 * GeoIP rules: parsing the map's location and ASN rules and classifying a decoded record into
 * a datacenter list. Pure data work, no database access. Control thread (map building,
 * explain).
 */
#include "gslb/geoip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"

/* =========================================================================================
 * Rules
 */

/* A location rule, also used as the probe built from a record (then city is borrowed and
 * def/dcs are unused). Sorted by loc_cmp so a record needs one binary search per depth. */
typedef struct {
	char continent[3];
	char country[3];
	char subdivision[4]; /* "" at depth 4 matches records without one */
	uint8_t depth;       /* components: 1 continent .. 4 city */
	uint32_t city_id;    /* depth 4 by geoname_id, else 0 */
	const char *city;    /* depth 4 by name (owned by the rules), else NULL */
	uint16_t city_len;
	uint16_t n_dcs;
	uint32_t dcs_off; /* into gslb_geoip_rules.dcs */
	size_t def;       /* index of the definition */
} loc_rule_t;

typedef struct {
	uint32_t asn;
	uint16_t n_dcs;
	uint32_t dcs_off;
	size_t def;
} asn_rule_t;

struct gslb_geoip_rules {
	loc_rule_t *loc; /* sorted by loc_cmp */
	size_t n_loc;
	asn_rule_t *asn; /* sorted by asn */
	size_t n_asn;
	uint16_t *dcs; /* every rule's list, back to back */
	size_t n_dc;
	gslb_geoip_opts_t opts;
};

static int ascii_lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* City names compare ASCII case-insensitively, byte-wise beyond ASCII (UTF-8 as stored). */
static int city_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	for (size_t i = 0; i < n; i++) {
		int x = ascii_lower((unsigned char)a[i]), y = ascii_lower((unsigned char)b[i]);
		if (x != y)
			return x - y;
	}
	return (alen > blen) - (alen < blen);
}

static int loc_cmp(const void *pa, const void *pb)
{
	const loc_rule_t *a = pa, *b = pb;
	int c = (int)a->depth - (int)b->depth;
	if (c == 0)
		c = strcmp(a->continent, b->continent);
	if (c == 0)
		c = strcmp(a->country, b->country);
	if (c == 0)
		c = strcmp(a->subdivision, b->subdivision);
	if (c == 0 && a->city_id != b->city_id)
		c = a->city_id < b->city_id ? -1 : 1;
	if (c == 0)
		c = city_cmp(a->city ? a->city : "", a->city_len, b->city ? b->city : "",
		             b->city_len);
	return c;
}

static int asn_cmp(const void *pa, const void *pb)
{
	const asn_rule_t *a = pa, *b = pb;
	return (a->asn > b->asn) - (a->asn < b->asn);
}

/* Copy @p len characters of a code, uppercased, requiring letters (and digits when
 * @p digits). */
static bool parse_code(const char *s, size_t len, size_t min, size_t max, bool digits, char *dst)
{
	if (len < min || len > max)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
		if (!letter && !(digits && c >= '0' && c <= '9'))
			return false;
		dst[i] = (char)(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
	}
	dst[len] = '\0';
	return true;
}

static bool parse_continent(const char *s, size_t len, char *dst)
{
	static const char *const known[] = {"AF", "AN", "AS", "EU", "NA", "OC", "SA"};
	if (!parse_code(s, len, 2, 2, false, dst))
		return false;
	for (size_t i = 0; i < STEER_ARRAY_LEN(known); i++)
		if (strcmp(dst, known[i]) == 0)
			return true;
	return false;
}

/* The 4th component: a geoname_id when all digits, else a city name. */
static int parse_city(const char *s, size_t len, loc_rule_t *r, char *err, size_t errlen)
{
	if (len == 0 || len > UINT16_MAX || s[0] == ' ' || s[len - 1] == ' ') {
		snprintf(err, errlen, "bad city '%.*s' (empty, too long or padded with spaces)",
		         (int)(len > 64 ? 64 : len), s);
		return STEER_ESYNTAX;
	}
	size_t digits = strspn(s, "0123456789");
	if (digits >= len) {
		unsigned long long id = len <= 10 ? strtoull(s, NULL, 10) : 0;
		if (id == 0 || id > UINT32_MAX) {
			snprintf(err, errlen, "bad geoname_id '%.*s'", (int)len, s);
			return STEER_ERANGE;
		}
		r->city_id = (uint32_t)id;
		return 0;
	}
	char *city = xmalloc(len + 1);
	for (size_t i = 0; i < len; i++)
		city[i] = (char)ascii_lower((unsigned char)s[i]);
	city[len] = '\0';
	r->city = city;
	r->city_len = (uint16_t)len;
	return 0;
}

/* Parse "continent[/country[/subdivision[/city]]]" into @p r. */
static int parse_path(const char *path, loc_rule_t *r, char *err, size_t errlen)
{
	const char *part[5];
	size_t len[5], n = 0;
	for (const char *p = path;; n++) {
		const char *slash = strchr(p, '/');
		if (n == 4) {
			snprintf(err, errlen, "'%s': more than 4 components", path);
			return STEER_ESYNTAX;
		}
		part[n] = p;
		len[n] = slash ? (size_t)(slash - p) : strlen(p);
		if (!slash) {
			n++;
			break;
		}
		p = slash + 1;
	}
	r->depth = (uint8_t)n;
	if (!parse_continent(part[0], len[0], r->continent)) {
		snprintf(err, errlen,
		         "'%s': unknown continent '%.*s' (want AF, AN, AS, EU, NA, OC "
		         "or SA)",
		         path, (int)len[0], part[0]);
		return STEER_ESYNTAX;
	}
	if (n >= 2 && !parse_code(part[1], len[1], 2, 2, false, r->country)) {
		snprintf(err, errlen, "'%s': bad country '%.*s' (want an ISO 3166-1 alpha-2 code)",
		         path, (int)len[1], part[1]);
		return STEER_ESYNTAX;
	}
	bool empty_sub_ok = n == 4 && len[2] == 0;
	if (n >= 3 && !empty_sub_ok && !parse_code(part[2], len[2], 1, 3, true, r->subdivision)) {
		snprintf(err, errlen,
		         "'%s': bad subdivision '%.*s' (want the 1-3 character ISO "
		         "3166-2 suffix, e.g. 31 for CN-31)",
		         path, (int)len[2], part[2]);
		return STEER_ESYNTAX;
	}
	if (n == 4) {
		int ret = parse_city(part[3], len[3], r, err, errlen);
		if (ret != 0) {
			size_t used = strlen(err);
			snprintf(err + used, errlen > used ? errlen - used : 0, " in '%s'", path);
			return ret;
		}
	}
	return 0;
}

/* Append a definition's datacenter list to rules->dcs after checking it. */
static int add_dcs(gslb_geoip_rules_t *rules, size_t *used, const gslb_geoip_rule_def_t *def,
                   uint32_t *off, uint16_t *n, char *err, size_t errlen)
{
	if (def->n_dcs == 0 || !def->dcs) {
		snprintf(err, errlen, "empty datacenter list");
		return STEER_EINVAL;
	}
	if (def->n_dcs > rules->n_dc) {
		snprintf(err, errlen, "%zu datacenters listed, the map has %zu: one is repeated",
		         def->n_dcs, rules->n_dc);
		return STEER_EEXIST;
	}
	for (size_t i = 0; i < def->n_dcs; i++) {
		if (def->dcs[i] >= rules->n_dc) {
			snprintf(err, errlen, "datacenter index %u out of range (map has %zu)",
			         def->dcs[i], rules->n_dc);
			return STEER_ERANGE;
		}
		for (size_t j = 0; j < i; j++) {
			if (def->dcs[j] == def->dcs[i]) {
				snprintf(err, errlen, "datacenter index %u listed twice",
				         def->dcs[i]);
				return STEER_EEXIST;
			}
		}
	}
	*off = (uint32_t)*used;
	*n = (uint16_t)def->n_dcs;
	memcpy(rules->dcs + *used, def->dcs, def->n_dcs * sizeof(*def->dcs));
	*used += def->n_dcs;
	return 0;
}

static int add_rule(gslb_geoip_rules_t *rules, size_t i, const gslb_geoip_rule_def_t *def,
                    size_t *dcs_used, char *err, size_t errlen)
{
	if (!def->match == !def->asns || (def->asns && def->n_asns == 0)) {
		snprintf(err, errlen,
		         "a rule needs exactly one of a location match or an ASN "
		         "list");
		return STEER_EINVAL;
	}
	uint32_t off = 0;
	uint16_t n = 0;
	int ret = add_dcs(rules, dcs_used, def, &off, &n, err, errlen);
	if (ret != 0)
		return ret;
	if (def->match) {
		loc_rule_t *r = &rules->loc[rules->n_loc++];
		memset(r, 0, sizeof(*r));
		r->def = i;
		r->dcs_off = off;
		r->n_dcs = n;
		return parse_path(def->match, r, err, errlen);
	}
	for (size_t k = 0; k < def->n_asns; k++) {
		if (def->asns[k] == 0) {
			snprintf(err, errlen, "ASN 0 is reserved (RFC 7607) and never in data");
			return STEER_ERANGE;
		}
		asn_rule_t *a = &rules->asn[rules->n_asn++];
		*a = (asn_rule_t){.asn = def->asns[k], .n_dcs = n, .dcs_off = off, .def = i};
	}
	return 0;
}

/* After sorting, equal neighbours are the same key given twice: blame the later rule. */
static int check_duplicates(const gslb_geoip_rules_t *rules, size_t *bad, char *err, size_t errlen)
{
	for (size_t i = 1; i < rules->n_loc; i++) {
		const loc_rule_t *a = &rules->loc[i - 1], *b = &rules->loc[i];
		if (loc_cmp(a, b) == 0) {
			*bad = a->def > b->def ? a->def : b->def;
			snprintf(err, errlen, "same location as rule %zu",
			         a->def < b->def ? a->def : b->def);
			return STEER_EEXIST;
		}
	}
	for (size_t i = 1; i < rules->n_asn; i++) {
		const asn_rule_t *a = &rules->asn[i - 1], *b = &rules->asn[i];
		if (a->asn == b->asn) {
			*bad = a->def > b->def ? a->def : b->def;
			snprintf(err, errlen, "ASN %u already in rule %zu", a->asn,
			         a->def < b->def ? a->def : b->def);
			return STEER_EEXIST;
		}
	}
	return 0;
}

static gslb_geoip_rules_t *rules_alloc(const gslb_geoip_rule_def_t *defs, size_t n_defs,
                                       size_t n_dc)
{
	size_t n_asns = 0, n_loc = 0, n_dcs = 0;
	for (size_t i = 0; i < n_defs; i++) {
		n_loc += defs[i].match != NULL;
		n_asns += defs[i].asns ? defs[i].n_asns : 0;
		n_dcs += defs[i].n_dcs <= n_dc ? defs[i].n_dcs : 0;
	}
	gslb_geoip_rules_t *rules = xcalloc(1, sizeof(*rules));
	rules->n_dc = n_dc;
	rules->loc = xcalloc(n_loc ? n_loc : 1, sizeof(*rules->loc));
	rules->asn = xcalloc(n_asns ? n_asns : 1, sizeof(*rules->asn));
	rules->dcs = xcalloc(n_dcs ? n_dcs : 1, sizeof(*rules->dcs));
	return rules;
}

int gslb_geoip_rules_new(const gslb_geoip_rule_def_t *defs, size_t n_defs, size_t n_dc,
                         const gslb_geoip_opts_t *opts, gslb_geoip_rules_t **out, size_t *bad_rule,
                         char *err, size_t errlen)
{
	*out = NULL;
	size_t bad = 0;
	if (n_dc > GSLB_GEOIP_MAX_DC || (n_defs > 0 && !defs)) {
		snprintf(err, errlen, "%zu datacenters, at most %u", n_dc, GSLB_GEOIP_MAX_DC);
		if (bad_rule)
			*bad_rule = 0;
		return STEER_ERANGE;
	}
	gslb_geoip_rules_t *rules = rules_alloc(defs, n_defs, n_dc);
	rules->opts = *opts;
	size_t dcs_used = 0;
	int ret = 0;
	for (size_t i = 0; i < n_defs && ret == 0; i++) {
		bad = i;
		ret = add_rule(rules, i, &defs[i], &dcs_used, err, errlen);
	}
	if (ret == 0) {
		qsort(rules->loc, rules->n_loc, sizeof(*rules->loc), loc_cmp);
		qsort(rules->asn, rules->n_asn, sizeof(*rules->asn), asn_cmp);
		ret = check_duplicates(rules, &bad, err, errlen);
	}
	if (ret != 0) {
		if (bad_rule)
			*bad_rule = bad;
		gslb_geoip_rules_free(rules);
		return ret;
	}
	*out = rules;
	return 0;
}

void gslb_geoip_rules_free(gslb_geoip_rules_t *rules)
{
	if (!rules)
		return;
	for (size_t i = 0; i < rules->n_loc; i++)
		free((char *)rules->loc[i].city);
	free(rules->loc);
	free(rules->asn);
	free(rules->dcs);
	free(rules);
}

bool gslb_geoip_rules_use_asn(const gslb_geoip_rules_t *rules)
{
	return rules->n_asn > 0;
}

bool gslb_geoip_rules_use_location(const gslb_geoip_rules_t *rules)
{
	return rules->n_loc > 0 || rules->opts.auto_distance;
}

const char *gslb_geoip_how_str(gslb_geoip_how_t how)
{
	switch (how) {
	case GSLB_GEOIP_NO_MATCH:
		return "none";
	case GSLB_GEOIP_BY_ASN:
		return "asn";
	case GSLB_GEOIP_BY_LOCATION:
		return "location";
	case GSLB_GEOIP_BY_DISTANCE:
		return "distance";
	}
	return "?";
}

/* =========================================================================================
 * Classification
 */

static const loc_rule_t *find_loc_at(const gslb_geoip_rules_t *rules, const loc_rule_t *probe)
{
	return bsearch(probe, rules->loc, rules->n_loc, sizeof(*rules->loc), loc_cmp);
}

/* The deepest location rule matching @p rec, or NULL. */
static const loc_rule_t *find_loc(const gslb_geoip_rules_t *rules, const gslb_geoip_record_t *rec)
{
	if (rules->n_loc == 0 || rec->continent[0] == '\0')
		return NULL;
	loc_rule_t probe;
	memset(&probe, 0, sizeof(probe));
	memcpy(probe.continent, rec->continent, sizeof(probe.continent));
	memcpy(probe.country, rec->country, sizeof(probe.country));
	memcpy(probe.subdivision, rec->subdivision, sizeof(probe.subdivision));
	const loc_rule_t *found = NULL;
	if (rec->country[0] != '\0') {
		probe.depth = 4;
		if (rec->city_geoname_id != 0) {
			probe.city_id = rec->city_geoname_id;
			found = find_loc_at(rules, &probe);
			probe.city_id = 0;
		}
		if (!found && rec->city) {
			probe.city = rec->city;
			probe.city_len = rec->city_len;
			found = find_loc_at(rules, &probe);
			probe.city = NULL;
			probe.city_len = 0;
		}
		probe.depth = 3;
		if (!found && rec->subdivision[0] != '\0')
			found = find_loc_at(rules, &probe);
		probe.subdivision[0] = '\0';
		probe.depth = 2;
		if (!found)
			found = find_loc_at(rules, &probe);
	}
	probe.country[0] = '\0';
	probe.subdivision[0] = '\0';
	probe.depth = 1;
	return found ? found : find_loc_at(rules, &probe);
}

static const asn_rule_t *find_asn(const gslb_geoip_rules_t *rules, const gslb_geoip_record_t *rec)
{
	if (rules->n_asn == 0 || !(rec->flags & GSLB_GEOIP_REC_ASN))
		return NULL;
	asn_rule_t probe = {.asn = rec->asn};
	return bsearch(&probe, rules->asn, rules->n_asn, sizeof(*rules->asn), asn_cmp);
}

int gslb_geoip_classify(const gslb_geoip_rules_t *rules, const gslb_geoip_record_t *rec,
                        const gslb_geo_coords_t *dc_coords, size_t n_dc, uint16_t *out,
                        size_t *out_len, gslb_geoip_match_t *match)
{
	size_t cap = *out_len;
	*out_len = 0;
	if (n_dc != rules->n_dc)
		return STEER_EINVAL;
	gslb_geoip_match_t m = {.how = GSLB_GEOIP_NO_MATCH};
	uint32_t off = 0;
	size_t n = 0;
	const asn_rule_t *a = find_asn(rules, rec);
	const loc_rule_t *l = a ? NULL : find_loc(rules, rec);
	if (a) {
		m = (gslb_geoip_match_t){.how = GSLB_GEOIP_BY_ASN, .rule = a->def};
		off = a->dcs_off;
		n = a->n_dcs;
	} else if (l) {
		m = (gslb_geoip_match_t){
		    .how = GSLB_GEOIP_BY_LOCATION, .rule = l->def, .depth = l->depth};
		off = l->dcs_off;
		n = l->n_dcs;
	}
	if (n > 0) {
		if (n > cap || !out)
			return STEER_ESPACE;
		memcpy(out, rules->dcs + off, n * sizeof(*out));
		*out_len = n;
	} else if (rules->opts.auto_distance && (rec->flags & GSLB_GEOIP_REC_LOCATION) && n_dc) {
		int got = gslb_geo_order_by_distance(rec->lat, rec->lon, dc_coords, n_dc,
		                                     rules->opts.auto_limit, out, out ? cap : 0);
		if (got < 0)
			return got;
		if (got > 0) {
			m.how = GSLB_GEOIP_BY_DISTANCE;
			*out_len = (size_t)got;
		}
	}
	if (match)
		*match = m;
	return 0;
}
