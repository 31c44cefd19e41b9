/*
 * Unit tests of src/gslb/geoip and geo_distance: distances, opening databases, the whole-tree
 * walk against tables mirroring tests/data/gslb/mmdb/make_test_mmdb.pl, lookups, rules and
 * classification. Runs in tests/data.
 *
 * With an argument, `test_geoip FILE.mmdb` instead walks FILE and prints time and memory, to
 * measure real databases (GeoLite2-City) that cannot live in the repository;
 * `test_geoip CITY.mmdb ASN.mmdb` measures the pair walk of a map with geoip.asn-database.
 */
#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "gslb/geo_distance.h"
#include "gslb/geoip.h"
#include "unit.h"

#define DIR "gslb/mmdb/"

/* ---------------------------------------------------------------------------------------- */

static void test_distance(void)
{
	static const struct {
		const char *what;
		double lat1, lon1, lat2, lon2;
		double km, tolerance;
	} rows[] = {
	    {"Shanghai-Beijing", 31.23, 121.47, 39.90, 116.40, 1067.1, 1.0},
	    {"London-New York", 51.5074, -0.1278, 40.7128, -74.0060, 5570.2, 1.0},
	    {"same point", 31.23, 121.47, 31.23, 121.47, 0.0, 1e-9},
	    {"antipodes on the equator", 0, 0, 0, 180, M_PI * GSLB_GEO_EARTH_RADIUS_KM, 1e-6},
	    {"antipodes off the equator", 45, 10, -45, -170, M_PI * GSLB_GEO_EARTH_RADIUS_KM, 1e-6},
	    {"pole to pole", 90, 0, -90, 0, M_PI * GSLB_GEO_EARTH_RADIUS_KM, 1e-6},
	    {"quarter along the equator", 0, 0, 0, 90, M_PI / 2 * GSLB_GEO_EARTH_RADIUS_KM, 1e-6},
	    {"across the date line", 0, 179.5, 0, -179.5, 111.2, 0.1},
	    {"north pole, any longitude", 90, 0, 90, 123, 0.0, 1e-6},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		double d =
		    gslb_geo_distance_km(rows[i].lat1, rows[i].lon1, rows[i].lat2, rows[i].lon2);
		double back =
		    gslb_geo_distance_km(rows[i].lat2, rows[i].lon2, rows[i].lat1, rows[i].lon1);
		CHECK(fabs(d - rows[i].km) <= rows[i].tolerance, "%s: %.3f km, want %.3f",
		      rows[i].what, d, rows[i].km);
		CHECK(fabs(d - back) < 1e-9, "%s: not symmetric", rows[i].what);
	}
	CHECK(isnan(gslb_geo_distance_km(91, 0, 0, 0)), "latitude 91 is NaN");
	CHECK(isnan(gslb_geo_distance_km(0, 0, 0, -180.5)), "longitude -180.5 is NaN");
	CHECK(isnan(gslb_geo_distance_km(NAN, 0, 0, 0)), "NaN in, NaN out");
	CHECK(gslb_geo_coords_ok(-90, 180) && !gslb_geo_coords_ok(0, INFINITY), "coords_ok bounds");
}

/* Datacenters used by the ordering and classification tests. */
enum { DC_TELECOM, DC_UNICOM, DC_EDU, DC_EU, DC_US, DC_N };
static const gslb_geo_coords_t dc_coords[DC_N] = {
    [DC_TELECOM] = {31.23, 121.47, true}, /* Shanghai */
    [DC_UNICOM] = {39.90, 116.40, true},  /* Beijing */
    [DC_EDU] = {0, 0, false},
    [DC_EU] = {50.11, 8.68, true},   /* Frankfurt */
    [DC_US] = {40.71, -74.00, true}, /* New York */
};

static bool list_eq(const uint16_t *got, size_t n, const int *want)
{
	size_t m = 0;
	while (want[m] >= 0)
		m++;
	if (m != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i])
			return false;
	return true;
}

static void test_order_by_distance(void)
{
	/* Distances (km) from the points below to telecom, unicom, eu, us, computed
	 * independently: Los Angeles 10435 10063 9303 3936; Guangzhou 1214 1890 9030 12878;
	 * London 9194 8139 635 5572. */
	static const struct {
		const char *what;
		double lat, lon;
		size_t limit, cap;
		int ret;
		int want[DC_N + 1];
	} rows[] = {
	    {"Los Angeles",
	     34.0522,
	     -118.2437,
	     0,
	     DC_N,
	     4,
	     {DC_US, DC_EU, DC_UNICOM, DC_TELECOM, -1}},
	    {"Guangzhou", 23.1167, 113.25, 0, DC_N, 4, {DC_TELECOM, DC_UNICOM, DC_EU, DC_US, -1}},
	    {"London", 51.5142, -0.0931, 0, DC_N, 4, {DC_EU, DC_US, DC_UNICOM, DC_TELECOM, -1}},
	    {"London, limit 2", 51.5142, -0.0931, 2, DC_N, 2, {DC_EU, DC_US, -1}},
	    {"limit above count",
	     51.5142,
	     -0.0931,
	     9,
	     DC_N,
	     4,
	     {DC_EU, DC_US, DC_UNICOM, DC_TELECOM, -1}},
	    {"room for 3 of 4", 51.5142, -0.0931, 0, 3, STEER_ESPACE, {-1}},
	    {"room for 2 with limit 2", 51.5142, -0.0931, 2, 2, 2, {DC_EU, DC_US, -1}},
	    {"client without valid coordinates", 95, 0, 0, DC_N, 0, {-1}},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		uint16_t out[DC_N];
		int ret = gslb_geo_order_by_distance(rows[i].lat, rows[i].lon, dc_coords, DC_N,
		                                     rows[i].limit, out, rows[i].cap);
		CHECK(ret == rows[i].ret, "%s: returned %d, want %d", rows[i].what, ret,
		      rows[i].ret);
		if (ret >= 0)
			CHECK(list_eq(out, (size_t)ret, rows[i].want), "%s: wrong order",
			      rows[i].what);
	}
	/* Equal distances keep configuration order, whichever comes first in the array. */
	const gslb_geo_coords_t same[3] = {{10, 10, true}, {20, 20, true}, {10, 10, true}};
	uint16_t out[3];
	int ret = gslb_geo_order_by_distance(11, 11, same, 3, 0, out, 3);
	CHECK(ret == 3 && out[0] == 0 && out[1] == 2 && out[2] == 1, "ties by index: %u %u %u",
	      out[0], out[1], out[2]);
	/* More datacenters than fit on the stack take the heap path and agree with it. */
	size_t many = GSLB_GEO_STACK_DCS + 10;
	gslb_geo_coords_t *big = calloc(many, sizeof(*big));
	uint16_t *big_out = calloc(many, sizeof(*big_out));
	for (size_t i = 0; i < many; i++)
		big[i] = (gslb_geo_coords_t){(double)(i % 170) - 85.0, 0.0, i % 7 != 0};
	ret = gslb_geo_order_by_distance(0, 0, big, many, 0, big_out, many);
	bool sorted = ret > 0;
	for (int i = 1; i < ret && sorted; i++) {
		double a = fabs(big[big_out[i - 1]].lat), b = fabs(big[big_out[i]].lat);
		sorted = a < b || (a == b && big_out[i - 1] < big_out[i]);
	}
	size_t with_coords = 0;
	for (size_t i = 0; i < many; i++)
		with_coords += big[i].valid;
	CHECK(sorted && (size_t)ret == with_coords, "heap path: %d of %zu, sorted %d", ret,
	      with_coords, sorted);
	free(big);
	free(big_out);
}

/* ---------------------------------------------------------------------------------------- */

static void test_open(void)
{
	static const struct {
		const char *path;
		int ret;
		const char *err_has; /* expected in the message */
		const char *type;
		unsigned ip_version, kinds;
	} rows[] = {
	    {DIR "no-such-file.mmdb", STEER_ENOENT, "no-such-file.mmdb: No such file", NULL, 0, 0},
	    {DIR, STEER_EINVAL, "not a regular file", NULL, 0, 0},
	    {DIR "not-an-mmdb.mmdb", STEER_EMALF, "not a usable MaxMind DB file", NULL, 0, 0},
	    {DIR "empty.mmdb", STEER_EMALF, "empty.mmdb: empty file", NULL, 0, 0},
	    {DIR "make_test_mmdb.pl", STEER_EMALF, "not a usable MaxMind DB", NULL, 0, 0},
	    {DIR "test-anonymous-ip.mmdb", STEER_ECONF, "'GeoIP2-Anonymous-IP' has neither", NULL,
	     0, 0},
	    {DIR "test-city.mmdb", 0, NULL, "GeoIP2-City", 6, GSLB_GEOIP_KIND_LOCATION},
	    {DIR "test-asn.mmdb", 0, NULL, "GeoLite2-ASN", 6, GSLB_GEOIP_KIND_ASN},
	    {DIR "test-country-v4.mmdb", 0, NULL, "GeoLite2-Country", 4, GSLB_GEOIP_KIND_LOCATION},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		gslb_geoip_db_t *db = (gslb_geoip_db_t *)&rows; /* must be reset to NULL */
		char err[256] = "";
		int ret = gslb_geoip_open(rows[i].path, &db, err, sizeof(err));
		CHECK(ret == rows[i].ret, "%s: returned %d (%s), want %d", rows[i].path, ret, err,
		      rows[i].ret);
		if (rows[i].err_has)
			CHECK(strstr(err, rows[i].err_has) != NULL, "%s: message '%s'",
			      rows[i].path, err);
		CHECK((ret == 0) == (db != NULL), "%s: db set only on success", rows[i].path);
		if (ret != 0 || !db)
			continue;
		gslb_geoip_db_info_t info;
		gslb_geoip_info(db, &info);
		CHECK(strcmp(info.type, rows[i].type) == 0, "%s: type %s", rows[i].path, info.type);
		CHECK(info.ip_version == rows[i].ip_version, "%s: ip_version %u", rows[i].path,
		      info.ip_version);
		CHECK(info.kinds == rows[i].kinds, "%s: kinds %u", rows[i].path, info.kinds);
		CHECK(strcmp(info.path, rows[i].path) == 0, "%s: path", rows[i].path);
		gslb_geoip_close(db);
	}
	gslb_geoip_close(NULL);
}

/* ---------------------------------------------------------------------------------------- */

/* The records of test-city.mmdb, as make_test_mmdb.pl writes them. */
typedef struct {
	const char *key;
	const char *continent, *country, *subdivision, *city;
	uint32_t geoname_id;
	uint8_t flags;
	uint32_t asn;
	double lat, lon;
} want_rec_t;

#define LOC GSLB_GEOIP_REC_LOCATION
#define ASN GSLB_GEOIP_REC_ASN
#define REG GSLB_GEOIP_REC_REGISTERED

static const want_rec_t city_recs[] = {
    {"SH_TEL", "AS", "CN", "31", "Shanghai", 1796236, LOC | ASN, 4812, 31.2222, 121.4581},
    {"SH_A", "AS", "CN", "31", "Shanghai", 1796236, LOC, 0, 31.2222, 121.4581},
    {"SH_B", "AS", "CN", "31", "Shanghai", 1796236, LOC, 0, 31.2222, 121.4581},
    {"BJ_EDU", "AS", "CN", "11", "Beijing", 1816670, LOC | ASN, 4538, 39.9075, 116.3972},
    {"BJ_UNI", "AS", "CN", "11", "Beijing", 1816670, LOC, 0, 39.9075, 116.3972},
    {"GZ", "AS", "CN", "44", "Guangzhou", 1809858, LOC, 0, 23.1167, 113.25},
    {"XA", "AS", "CN", "61", "Xi'an", 1790630, LOC, 0, 34.2583, 108.9286},
    {"CN_NOLOC", "AS", "CN", "", NULL, 0, 0, 0, 0, 0},
    {"SG", "AS", "SG", "", "Singapore", 1880252, LOC, 0, 1.2897, 103.8501},
    {"LON", "EU", "GB", "ENG", "London", 2643743, LOC, 0, 51.5142, -0.0931},
    {"PAR", "EU", "FR", "IDF", "Paris", 2988507, LOC, 0, 48.8566, 2.3522},
    {"FRA", "EU", "DE", "HE", "Frankfurt am Main", 2925533, LOC, 0, 50.1109, 8.6821},
    {"FALK", "EU", "DE", "SN", "Falkenstein", 2928874, LOC, 0, 50.4779, 12.3713},
    {"EU_ONLY", "EU", "", "", NULL, 0, LOC, 0, 47.0, 8.0},
    {"NYC", "NA", "US", "NY", "New York", 5128581, LOC, 0, 40.7128, -74.0060},
    {"LAX", "NA", "US", "CA", "Los Angeles", 5368361, LOC, 0, 34.0522, -118.2437},
    {"MTV", "NA", "US", "CA", "Mountain View", 5375480, LOC, 0, 37.386, -122.0838},
    {"DAL", "NA", "US", "TX", "Dallas", 4684888, LOC, 0, 32.7767, -96.7970},
    {"US_REG", "", "US", "", NULL, 0, REG, 0, 0, 0},
    {"AU_BAD", "OC", "AU", "", NULL, 0, 0, 0, 0, 0}, /* coordinates 123, 200 rejected */
};

static const want_rec_t *want_rec(const char *key)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(city_recs); i++)
		if (strcmp(city_recs[i].key, key) == 0)
			return &city_recs[i];
	return NULL;
}

static bool city_is(const gslb_geoip_record_t *rec, const char *city)
{
	if (!city)
		return rec->city == NULL && rec->city_len == 0;
	return rec->city && rec->city_len == strlen(city) &&
	       memcmp(rec->city, city, rec->city_len) == 0;
}

/* Compare a decoded record with its expected contents; @p what names the row. */
static void check_rec(const char *what, const gslb_geoip_record_t *rec, const want_rec_t *w)
{
	CHECK(strcmp(rec->continent, w->continent) == 0, "%s: continent '%s', want '%s'", what,
	      rec->continent, w->continent);
	CHECK(strcmp(rec->country, w->country) == 0, "%s: country '%s', want '%s'", what,
	      rec->country, w->country);
	CHECK(strcmp(rec->subdivision, w->subdivision) == 0, "%s: subdivision '%s', want '%s'",
	      what, rec->subdivision, w->subdivision);
	CHECK(city_is(rec, w->city), "%s: city '%.*s', want '%s'", what, (int)rec->city_len,
	      rec->city ? rec->city : "", w->city ? w->city : "(none)");
	CHECK(rec->city_geoname_id == w->geoname_id, "%s: geoname_id %u", what,
	      rec->city_geoname_id);
	CHECK(rec->flags == w->flags, "%s: flags %#x, want %#x", what, rec->flags, w->flags);
	CHECK(rec->asn == w->asn, "%s: asn %u, want %u", what, rec->asn, w->asn);
	if (w->flags & LOC)
		CHECK(fabs(rec->lat - w->lat) < 1e-4 && fabs(rec->lon - w->lon) < 1e-4,
		      "%s: location %f,%f", what, rec->lat, rec->lon);
}

typedef struct {
	const char *prefix;
	const char *key; /* city_recs key (city db) or ASN as text (asn db) */
} want_leaf_t;

/* Ascending address order, IPv4 (as AF_INET) first; aliases absent. */
static const want_leaf_t city_leaves[] = {
    {"1.1.1.1/32", "AU_BAD"},
    {"1.80.0.0/13", "XA"},
    {"2.16.0.0/13", "PAR"},
    {"4.14.0.0/15", "NYC"},
    {"5.1.0.0/16", "FRA"},
    {"8.20.0.0/16", "US_REG"},
    {"24.0.0.0/12", "LAX"},
    {"36.96.0.0/12", "CN_NOLOC"},
    {"58.32.0.0/13", "SH_TEL"},
    {"81.2.69.0/24", "LON"},
    {"81.2.70.0/23", "LON"},
    {"101.80.0.0/13", "SH_TEL"},
    {"113.64.0.0/11", "GZ"},
    {"116.224.0.0/13", "SH_A"},
    {"116.232.0.0/13", "SH_B"},
    {"116.240.0.0/13", "SH_B"},
    {"123.112.0.0/12", "BJ_UNI"},
    {"175.41.128.0/17", "SG"},
    {"202.112.0.0/16", "BJ_EDU"},
    {"2001:da8::/32", "BJ_EDU"},
    {"2001:4860::/32", "MTV"},
    {"2408:8000::/20", "BJ_UNI"},
    {"240e::/20", "SH_TEL"},
    {"2600:1700::/28", "DAL"},
    {"2a00:1450:4001:81c::200e/128", "FRA"},
    {"2a01:4f8::/32", "FALK"},
    {"2a02:ffc0::/29", "EU_ONLY"},
};

/* 14.16.0.0/13 and 14.24.0.0/13 were inserted separately: the writer joins identical
 * siblings. */
static const want_leaf_t asn_leaves[] = {
    {"4.14.0.0/15", "3356"},    {"14.16.0.0/12", "4134"},   {"58.32.0.0/13", "4812"},
    {"81.2.69.0/24", "20712"},  {"101.80.0.0/13", "4812"},  {"113.64.0.0/11", "4134"},
    {"113.96.0.0/12", "4134"},  {"123.112.0.0/12", "4808"}, {"202.112.0.0/16", "4538"},
    {"2001:da8::/32", "23910"}, {"2408:8000::/20", "4837"}, {"240e::/20", "4134"},
};

static const want_leaf_t v4_leaves[] = {
    {"4.14.0.0/15", "US"},
    {"58.32.0.0/13", "CN"},
    {"81.2.69.0/24", "GB"},
};

#define MAX_SEEN 64

typedef struct {
	const gslb_geoip_db_t *db;
	size_t n;
	char prefix[MAX_SEEN][64];
	gslb_geoip_record_t rec[MAX_SEEN];
	int family[MAX_SEEN];
	int stop_at; /* return -42 at this leaf; -1: never */
	bool split;  /* leaves may be parts of a wider database block */
	int lookup_mismatch;
} seen_t;

static void prefix_str(const steer_prefix_t *p, char *buf, size_t size)
{
	char addr[INET6_ADDRSTRLEN];
	inet_ntop(p->family, p->addr, addr, sizeof(addr));
	snprintf(buf, size, "%s/%u", addr, p->len);
}

/* The last address of @p p, for the lookup cross-check. */
static void prefix_last(const steer_prefix_t *p, uint8_t *out)
{
	unsigned bits = p->family == AF_INET ? 32 : 128;
	memcpy(out, p->addr, 16);
	for (unsigned b = p->len; b < bits; b++)
		out[b / 8] |= (uint8_t)(0x80u >> (b % 8));
}

/* Every leaf must agree with libmaxminddb's own lookup at both ends of its prefix. */
static void cross_check(seen_t *s, const steer_prefix_t *p, const gslb_geoip_record_t *rec)
{
	uint8_t last[16];
	prefix_last(p, last);
	const uint8_t *ends[2] = {p->addr, last};
	for (int e = 0; e < 2; e++) {
		gslb_geoip_record_t got;
		unsigned len = 0;
		int ret = gslb_geoip_lookup(s->db, p->family, ends[e], &got, &len);
		bool len_ok = s->split ? len <= p->len : len == p->len;
		if (ret != 0 || !len_ok || got.data_offset != rec->data_offset)
			s->lookup_mismatch++;
	}
}

static int collect(const steer_prefix_t *p, const gslb_geoip_record_t *rec, void *ctx)
{
	seen_t *s = ctx;
	if (s->stop_at >= 0 && (size_t)s->stop_at == s->n)
		return -42;
	if (s->n < MAX_SEEN) {
		prefix_str(p, s->prefix[s->n], sizeof(s->prefix[0]));
		s->rec[s->n] = *rec;
		s->family[s->n] = p->family;
	}
	cross_check(s, p, rec);
	s->n++;
	return 0;
}

static gslb_geoip_db_t *open_ok(const char *path)
{
	gslb_geoip_db_t *db = NULL;
	char err[256] = "";
	int ret = gslb_geoip_open(path, &db, err, sizeof(err));
	CHECK(ret == 0, "open %s: %s", path, err);
	return db;
}

static void check_leaves(const char *what, const seen_t *s, const want_leaf_t *want, size_t n)
{
	CHECK(s->n == n, "%s: %zu leaves, want %zu", what, s->n, n);
	for (size_t i = 0; i < n && i < s->n; i++) {
		CHECK(strcmp(s->prefix[i], want[i].prefix) == 0, "%s leaf %zu: %s, want %s", what,
		      i, s->prefix[i], want[i].prefix);
		int family = strchr(want[i].prefix, ':') ? AF_INET6 : AF_INET;
		CHECK(s->family[i] == family, "%s: %s has family %d", what, want[i].prefix,
		      s->family[i]);
	}
	CHECK(s->lookup_mismatch == 0, "%s: %d leaf ends disagree with lookups", what,
	      s->lookup_mismatch);
}

static void test_walk_city(void)
{
	gslb_geoip_db_t *db = open_ok(DIR "test-city.mmdb");
	if (!db)
		return;
	static seen_t s;
	memset(&s, 0, sizeof(s));
	s.db = db;
	s.stop_at = -1;
	gslb_geoip_walk_stats_t st;
	char err[256] = "";
	int ret = gslb_geoip_walk(db, collect, &s, &st, err, sizeof(err));
	CHECK(ret == 0, "walk: %d %s", ret, err);
	check_leaves("city", &s, city_leaves, STEER_ARRAY_LEN(city_leaves));
	CHECK(st.leaves == s.n, "stats: %llu leaves", (unsigned long long)st.leaves);
	CHECK(st.records == STEER_ARRAY_LEN(city_recs), "stats: %u records, want %zu", st.records,
	      STEER_ARRAY_LEN(city_recs));
	CHECK(st.aliases == 3, "stats: %u aliases skipped (::ffff:0:0/96, 2001::/32, 2002::/16)",
	      st.aliases);
	gslb_geoip_db_info_t info;
	gslb_geoip_info(db, &info);
	CHECK(st.nodes > 0 && st.nodes <= info.node_count, "stats: %u nodes of %u", st.nodes,
	      info.node_count);
	for (size_t i = 0; i < s.n && i < STEER_ARRAY_LEN(city_leaves); i++) {
		const want_rec_t *w = want_rec(city_leaves[i].key);
		check_rec(city_leaves[i].prefix, &s.rec[i], w);
		CHECK(s.rec[i].id < st.records, "%s: id %u", city_leaves[i].prefix, s.rec[i].id);
		/* Leaves share an id exactly when they share a record. */
		for (size_t j = 0; j < i; j++) {
			bool same_key = strcmp(city_leaves[i].key, city_leaves[j].key) == 0;
			bool same_id = s.rec[i].id == s.rec[j].id;
			CHECK(same_key == same_id, "%s and %s: ids %u and %u",
			      city_leaves[i].prefix, city_leaves[j].prefix, s.rec[i].id,
			      s.rec[j].id);
			CHECK(same_id == (s.rec[i].data_offset == s.rec[j].data_offset),
			      "%s and %s: offsets", city_leaves[i].prefix, city_leaves[j].prefix);
		}
	}
	/* First-seen numbering: the first leaf's record is 0. */
	CHECK(s.n > 0 && s.rec[0].id == 0, "first id is 0");

	/* A callback error stops the walk and comes back unchanged. */
	memset(&s, 0, sizeof(s));
	s.db = db;
	s.stop_at = 3;
	ret = gslb_geoip_walk(db, collect, &s, NULL, err, sizeof(err));
	CHECK(ret == -42 && s.n == 3, "callback stop: %d after %zu", ret, s.n);
	gslb_geoip_close(db);
}

static void test_walk_others(void)
{
	static seen_t s;
	char err[256] = "";
	gslb_geoip_walk_stats_t st;

	gslb_geoip_db_t *db = open_ok(DIR "test-asn.mmdb");
	if (db) {
		memset(&s, 0, sizeof(s));
		s.db = db;
		s.stop_at = -1;
		int ret = gslb_geoip_walk(db, collect, &s, &st, err, sizeof(err));
		CHECK(ret == 0, "asn walk: %s", err);
		check_leaves("asn", &s, asn_leaves, STEER_ARRAY_LEN(asn_leaves));
		for (size_t i = 0; i < s.n && i < STEER_ARRAY_LEN(asn_leaves); i++) {
			CHECK(s.rec[i].flags == ASN &&
			          s.rec[i].asn == strtoul(asn_leaves[i].key, NULL, 10),
			      "%s: asn %u flags %#x", asn_leaves[i].prefix, s.rec[i].asn,
			      s.rec[i].flags);
			CHECK(s.rec[i].continent[0] == '\0' && s.rec[i].country[0] == '\0',
			      "%s: no location in an ASN db", asn_leaves[i].prefix);
		}
		/* The writer stores identical records once: one per ASN. */
		CHECK(st.records == 8, "asn: %u distinct records, want 8 (one per ASN)",
		      st.records);
		gslb_geoip_close(db);
	}

	db = open_ok(DIR "test-country-v4.mmdb");
	if (db) {
		memset(&s, 0, sizeof(s));
		s.db = db;
		s.stop_at = -1;
		int ret = gslb_geoip_walk(db, collect, &s, &st, err, sizeof(err));
		CHECK(ret == 0, "v4 walk: %s", err);
		check_leaves("v4", &s, v4_leaves, STEER_ARRAY_LEN(v4_leaves));
		for (size_t i = 0; i < s.n && i < STEER_ARRAY_LEN(v4_leaves); i++)
			CHECK(strcmp(s.rec[i].country, v4_leaves[i].key) == 0 &&
			          !(s.rec[i].flags & LOC),
			      "v4 %s: country %s", v4_leaves[i].prefix, s.rec[i].country);
		CHECK(st.aliases == 0, "v4: no aliases");
		gslb_geoip_close(db);
	}

	/* ::/64 holds IPv4: 0.0.0.0/0, then the rest of ::/64 as IPv6 siblings of the ::/96
	 * path in address order (::1:0:0/96, ::2:0:0/95 ... ::8000:0:0:0/65). */
	db = open_ok(DIR "test-wide.mmdb");
	if (db) {
		memset(&s, 0, sizeof(s));
		s.db = db;
		s.stop_at = -1;
		s.split = true;
		int ret = gslb_geoip_walk(db, collect, &s, &st, err, sizeof(err));
		CHECK(ret == 0, "wide walk: %s", err);
		CHECK(s.n == 34, "wide: %zu leaves, want 1 + 32 + 1", s.n);
		CHECK(s.n > 0 && strcmp(s.prefix[0], "0.0.0.0/0") == 0 && s.family[0] == AF_INET,
		      "wide: IPv4 first as 0.0.0.0/0, got %s", s.prefix[0]);
		static const char *const some[][2] = {
		    {"1", "::1:0:0/96"},    {"2", "::2:0:0/95"},       {"16", "::8000:0:0/81"},
		    {"17", "::1:0:0:0/80"}, {"32", "::8000:0:0:0/65"}, {"33", "2a02:ffc0::/29"},
		};
		for (size_t i = 0; i < STEER_ARRAY_LEN(some) && s.n == 34; i++) {
			size_t at = strtoul(some[i][0], NULL, 10);
			CHECK(strcmp(s.prefix[at], some[i][1]) == 0, "wide leaf %zu: %s, want %s",
			      at, s.prefix[at], some[i][1]);
		}
		for (size_t i = 1; i < 33 && i < s.n; i++)
			CHECK(s.family[i] == AF_INET6 && strcmp(s.rec[i].country, "GB") == 0 &&
			          s.rec[i].id == s.rec[0].id,
			      "wide leaf %zu: %s in GB's record", i, s.prefix[i]);
		CHECK(s.lookup_mismatch == 0, "wide: %d leaf ends disagree with lookups",
		      s.lookup_mismatch);
		gslb_geoip_record_t rec;
		unsigned len = 99;
		const uint8_t v4[4] = {81, 2, 69, 1};
		CHECK(gslb_geoip_lookup(db, AF_INET, v4, &rec, &len) == 0 && len == 0 &&
		          strcmp(rec.country, "GB") == 0,
		      "wide: IPv4 lookup is /0 (got /%u)", len);
		gslb_geoip_close(db);
	}
}

/* ---------------------------------------------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	static uint8_t buf[1 << 16];
	*len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	return buf;
}

/* Write @p data to a fresh temporary file; returns its path (static) or NULL. */
static const char *write_temp(const uint8_t *data, size_t len)
{
	static char path[64];
	snprintf(path, sizeof(path), "/tmp/steer-test-geoip-XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0)
		return NULL;
	bool ok = write(fd, data, len) == (ssize_t)len;
	close(fd);
	return ok ? path : NULL;
}

static int count_leaves(const steer_prefix_t *p, const gslb_geoip_record_t *rec, void *ctx)
{
	(void)p;
	(void)rec;
	(*(size_t *)ctx)++;
	return 0;
}

static void put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

/* Damaged search trees (record_size 24: node n is 6 bytes at 6n, left then right record)
 * must fail with STEER_EMALF and a message naming the file, at open when the damage is on the
 * path to the IPv4 data (checked there), else during the walk; never crash or loop. */
static void test_corrupt(void)
{
	enum { ROOT = 0, ZERO_PATH = 1, RIGHT_OF_ROOT = -1, SELF = -2 };
	static const struct {
		const char *what;
		int node; /* a node number, or RIGHT_OF_ROOT (off the IPv4 path) */
		bool right;
		int value; /* a record value, or SELF */
		bool open_fails;
	} rows[] = {
	    {"record beyond the data section", ROOT, true, 0xFFFFFF, false},
	    /* libmaxminddb itself calls a record of 0 (the root) invalid. */
	    {"root links to itself", ROOT, false, 0, false},
	    {"zero-path node links to itself", ZERO_PATH, false, SELF, true},
	    {"zero-path node links to the root", 5, false, 0, false},
	    {"zero-path node links back", 5, false, 2, true},
	    {"node links to itself", RIGHT_OF_ROOT, false, SELF, false},
	    {"node links to the root", RIGHT_OF_ROOT, true, 0, false},
	    {"node beyond the tree", RIGHT_OF_ROOT, false, 0xFFFFFE, false},
	};
	size_t len = 0;
	uint8_t *orig = slurp(DIR "test-city.mmdb", &len);
	CHECK(orig && len > 1000, "read test-city.mmdb");
	if (!orig)
		return;
	int right_of_root = orig[3] << 16 | orig[4] << 8 | orig[5];
	static uint8_t copy[1 << 16];
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		memcpy(copy, orig, len);
		int node = rows[i].node == RIGHT_OF_ROOT ? right_of_root : rows[i].node;
		int value = rows[i].value == SELF ? node : rows[i].value;
		put24(copy + 6 * node + (rows[i].right ? 3 : 0), (uint32_t)value);
		const char *path = write_temp(copy, len);
		CHECK(path != NULL, "temp file");
		if (!path)
			continue;
		gslb_geoip_db_t *db = NULL;
		char err[256] = "";
		int ret = gslb_geoip_open(path, &db, err, sizeof(err));
		CHECK(ret == (rows[i].open_fails ? STEER_EMALF : 0), "%s: open returned %d (%s)",
		      rows[i].what, ret, err);
		if (ret == 0) {
			size_t n = 0;
			ret = gslb_geoip_walk(db, count_leaves, &n, NULL, err, sizeof(err));
			CHECK(ret == STEER_EMALF, "%s: walk returned %d", rows[i].what, ret);
			gslb_geoip_close(db);
		}
		CHECK(strstr(err, "corrupt") && strstr(err, path), "%s: message '%s'", rows[i].what,
		      err);
		unlink(path);
	}
}

/* ---------------------------------------------------------------------------------------- */

static void test_lookup(void)
{
	static const struct {
		const char *db, *addr;
		int ret;
		unsigned len;
		const char *key; /* city_recs key, or country code for the v4 db */
	} rows[] = {
	    {"test-city.mmdb", "58.32.1.1", 0, 13, "SH_TEL"},
	    {"test-city.mmdb", "58.39.255.255", 0, 13, "SH_TEL"},
	    {"test-city.mmdb", "58.40.0.0", STEER_ENOENT, 0, NULL},
	    {"test-city.mmdb", "::ffff:58.32.1.1", 0, 13, "SH_TEL"},  /* folded to IPv4 */
	    {"test-city.mmdb", "2002:3a20:101::1", 0, 29, "SH_TEL"},  /* 6to4 alias, 16+13 */
	    {"test-city.mmdb", "2001:0:3a20:101::", 0, 45, "SH_TEL"}, /* Teredo alias, 32+13 */
	    {"test-city.mmdb", "1.1.1.1", 0, 32, "AU_BAD"},
	    {"test-city.mmdb", "1.1.1.2", STEER_ENOENT, 0, NULL},
	    {"test-city.mmdb", "10.1.2.3", STEER_ENOENT, 0, NULL},
	    {"test-city.mmdb", "81.2.71.255", 0, 23, "LON"},
	    {"test-city.mmdb", "8.20.1.1", 0, 16, "US_REG"},
	    {"test-city.mmdb", "175.41.200.1", 0, 17, "SG"},
	    {"test-city.mmdb", "2001:da8:8000::1", 0, 32, "BJ_EDU"},
	    {"test-city.mmdb", "2a00:1450:4001:81c::200e", 0, 128, "FRA"},
	    {"test-city.mmdb", "2a00:1450:4001:81c::200f", STEER_ENOENT, 0, NULL},
	    {"test-city.mmdb", "2a02:ffc7:ffff::1", 0, 29, "EU_ONLY"},
	    {"test-city.mmdb", "::1", STEER_ENOENT, 0, NULL},
	    {"test-country-v4.mmdb", "81.2.69.200", 0, 24, "GB"},
	    {"test-country-v4.mmdb", "::ffff:4.15.0.1", 0, 15, "US"},
	    {"test-country-v4.mmdb", "2001:db8::1", STEER_ENOENT, 0, NULL},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		char path[128];
		snprintf(path, sizeof(path), DIR "%s", rows[i].db);
		gslb_geoip_db_t *db = open_ok(path);
		if (!db)
			continue;
		uint8_t addr[16];
		int family = strchr(rows[i].addr, ':') ? AF_INET6 : AF_INET;
		CHECK(inet_pton(family, rows[i].addr, addr) == 1, "parse %s", rows[i].addr);
		gslb_geoip_record_t rec;
		unsigned len = 999;
		int ret = gslb_geoip_lookup(db, family, addr, &rec, &len);
		CHECK(ret == rows[i].ret, "%s in %s: returned %d, want %d", rows[i].addr,
		      rows[i].db, ret, rows[i].ret);
		if (ret == 0) {
			CHECK(len == rows[i].len, "%s: /%u, want /%u", rows[i].addr, len,
			      rows[i].len);
			CHECK(rec.id == GSLB_GEOIP_NO_ID, "%s: lookups have no id", rows[i].addr);
			const want_rec_t *w = want_rec(rows[i].key);
			if (w)
				check_rec(rows[i].addr, &rec, w);
			else
				CHECK(strcmp(rec.country, rows[i].key) == 0, "%s: country %s",
				      rows[i].addr, rec.country);
		}
		gslb_geoip_record_t rec2;
		CHECK(gslb_geoip_lookup(db, AF_UNIX, addr, &rec2, &len) == STEER_EINVAL,
		      "bad family");
		gslb_geoip_close(db);
	}
}

/* ---------------------------------------------------------------------------------------- */

#define DCS(...)                                                                                   \
	((const uint16_t[]){__VA_ARGS__}), STEER_ARRAY_LEN(((const uint16_t[]){__VA_ARGS__}))
#define ASNS(...)                                                                                  \
	((const uint32_t[]){__VA_ARGS__}), STEER_ARRAY_LEN(((const uint32_t[]){__VA_ARGS__}))

static void test_rules_errors(void)
{
	/* Not static: compound literals in a static initializer are not constants in C17. */
	const struct {
		const char *what;
		gslb_geoip_rule_def_t defs[2];
		size_t n;
		int ret;
		size_t bad;
		const char *err_has;
	} rows[] = {
	    {"continent, lower case", {{"as", NULL, 0, DCS(0)}}, 1, 0, 0, NULL},
	    {"full path", {{"as/cn/31/Shanghai", NULL, 0, DCS(0, 1)}}, 1, 0, 0, NULL},
	    {"city by geoname_id", {{"AS/CN/31/1796236", NULL, 0, DCS(0)}}, 1, 0, 0, NULL},
	    {"empty subdivision before a city",
	     {{"AS/SG//Singapore", NULL, 0, DCS(0)}},
	     1,
	     0,
	     0,
	     NULL},
	    {"unknown continent",
	     {{"XX/CN", NULL, 0, DCS(0)}},
	     1,
	     STEER_ESYNTAX,
	     0,
	     "continent 'XX'"},
	    {"country as continent", {{"CN", NULL, 0, DCS(0)}}, 1, STEER_ESYNTAX, 0, "continent"},
	    {"empty match", {{"", NULL, 0, DCS(0)}}, 1, STEER_ESYNTAX, 0, "continent"},
	    {"short country", {{"AS/C", NULL, 0, DCS(0)}}, 1, STEER_ESYNTAX, 0, "country 'C'"},
	    {"digit in country", {{"AS/C1", NULL, 0, DCS(0)}}, 1, STEER_ESYNTAX, 0, "country"},
	    {"trailing slash",
	     {{"AS/CN/", NULL, 0, DCS(0)}},
	     1,
	     STEER_ESYNTAX,
	     0,
	     "subdivision ''"},
	    {"long subdivision",
	     {{"AS/CN/3141", NULL, 0, DCS(0)}},
	     1,
	     STEER_ESYNTAX,
	     0,
	     "subdivision"},
	    {"empty city", {{"AS/CN/31/", NULL, 0, DCS(0)}}, 1, STEER_ESYNTAX, 0, "city"},
	    {"padded city", {{"AS/CN/31/ Shanghai", NULL, 0, DCS(0)}}, 1, STEER_ESYNTAX, 0, "city"},
	    {"five components",
	     {{"AS/CN/31/Shanghai/x", NULL, 0, DCS(0)}},
	     1,
	     STEER_ESYNTAX,
	     0,
	     "more than 4"},
	    {"geoname_id 0", {{"AS/CN/31/0", NULL, 0, DCS(0)}}, 1, STEER_ERANGE, 0, "geoname_id"},
	    {"geoname_id too big",
	     {{"AS/CN/31/99999999999", NULL, 0, DCS(0)}},
	     1,
	     STEER_ERANGE,
	     0,
	     "geoname_id"},
	    {"datacenter out of range",
	     {{"AS", NULL, 0, DCS(0, DC_N)}},
	     1,
	     STEER_ERANGE,
	     0,
	     "index 5"},
	    {"datacenter twice", {{"AS", NULL, 0, DCS(1, 2, 1)}}, 1, STEER_EEXIST, 0, "twice"},
	    {"no datacenters", {{"AS", NULL, 0, NULL, 0}}, 1, STEER_EINVAL, 0, "empty"},
	    {"neither match nor asns",
	     {{NULL, NULL, 0, DCS(0)}},
	     1,
	     STEER_EINVAL,
	     0,
	     "exactly one"},
	    {"both match and asns",
	     {{"AS", ASNS(4134), DCS(0)}},
	     1,
	     STEER_EINVAL,
	     0,
	     "exactly one"},
	    {"ASN 0", {{NULL, ASNS(4134, 0), DCS(0)}}, 1, STEER_ERANGE, 0, "ASN 0"},
	    {"same path twice",
	     {{"AS/CN", NULL, 0, DCS(0)}, {"as/cn", NULL, 0, DCS(1)}},
	     2,
	     STEER_EEXIST,
	     1,
	     "rule 0"},
	    {"same city name in other case",
	     {{"AS/CN/31/Shanghai", NULL, 0, DCS(0)}, {"AS/CN/31/SHANGHAI", NULL, 0, DCS(1)}},
	     2,
	     STEER_EEXIST,
	     1,
	     "rule 0"},
	    {"city name and id differ",
	     {{"AS/CN/31/Shanghai", NULL, 0, DCS(0)}, {"AS/CN/31/1796236", NULL, 0, DCS(1)}},
	     2,
	     0,
	     0,
	     NULL},
	    {"same ASN in two rules",
	     {{NULL, ASNS(4134, 4812), DCS(0)}, {NULL, ASNS(4812), DCS(1)}},
	     2,
	     STEER_EEXIST,
	     1,
	     "ASN 4812"},
	    {"same ASN in one rule",
	     {{NULL, ASNS(4134, 4134), DCS(0)}},
	     1,
	     STEER_EEXIST,
	     0,
	     "ASN 4134"},
	    {"error in the second rule",
	     {{"AS", NULL, 0, DCS(0)}, {"EU/GBR", NULL, 0, DCS(0)}},
	     2,
	     STEER_ESYNTAX,
	     1,
	     "'EU/GBR'"},
	};
	const gslb_geoip_opts_t opts = {.auto_distance = false};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		gslb_geoip_rules_t *rules = NULL;
		size_t bad = 99;
		char err[256] = "";
		int ret = gslb_geoip_rules_new(rows[i].defs, rows[i].n, DC_N, &opts, &rules, &bad,
		                               err, sizeof(err));
		CHECK(ret == rows[i].ret, "%s: returned %d (%s), want %d", rows[i].what, ret, err,
		      rows[i].ret);
		CHECK((ret == 0) == (rules != NULL), "%s: rules only on success", rows[i].what);
		if (ret != 0) {
			CHECK(bad == rows[i].bad, "%s: blamed rule %zu, want %zu", rows[i].what,
			      bad, rows[i].bad);
			CHECK(rows[i].err_has && strstr(err, rows[i].err_has), "%s: message '%s'",
			      rows[i].what, err);
		}
		gslb_geoip_rules_free(rules);
	}
	gslb_geoip_rules_t *rules = NULL;
	char err[256];
	CHECK(gslb_geoip_rules_new(NULL, 0, GSLB_GEOIP_MAX_DC + 1, &opts, &rules, NULL, err,
	                           sizeof(err)) == STEER_ERANGE,
	      "too many datacenters");
	CHECK(gslb_geoip_rules_new(NULL, 0, 0, &opts, &rules, NULL, err, sizeof(err)) == 0 &&
	          rules != NULL,
	      "no rules at all is fine");
	gslb_geoip_rules_free(rules);
}

/* The rules of the documented example map (docs/gslb.md), plus a few to reach every depth. */
static const gslb_geoip_rule_def_t map_rules[] = {
    /* 0 */ {"AS/CN/31", NULL, 0, DCS(DC_TELECOM, DC_EDU)},
    /* 1 */ {"AS/CN", NULL, 0, DCS(DC_TELECOM, DC_UNICOM)},
    /* 2 */ {NULL, ASNS(4134, 4812), DCS(DC_TELECOM)},
    /* 3 */ {"EU", NULL, 0, DCS(DC_EU)},
    /* 4 */ {"AS/CN/11/Beijing", NULL, 0, DCS(DC_UNICOM, DC_EDU)},
    /* 5 */ {"AS/SG//singapore", NULL, 0, DCS(DC_TELECOM, DC_UNICOM)},
    /* 6 */ {"NA/US/CA/5375480", NULL, 0, DCS(DC_US)}, /* Mountain View */
    /* 7 */ {NULL, ASNS(4538), DCS(DC_EDU, DC_UNICOM)},
    /* 8 */ {"NA/US/CA/Mountain View", NULL, 0, DCS(DC_EU)}, /* loses to the id */
};

static void test_classify(void)
{
	static const struct {
		const char *db, *addr;
		bool auto_distance;
		uint16_t limit;
		gslb_geoip_how_t how;
		size_t rule;
		unsigned depth;
		int want[DC_N + 1];
	} rows[] = {
	    /* ASN beats the location rule that also matches (AS/CN/31). */
	    {"test-city.mmdb", "58.32.1.1", true, 0, GSLB_GEOIP_BY_ASN, 2, 0, {DC_TELECOM, -1}},
	    {"test-city.mmdb",
	     "202.112.1.1",
	     true,
	     0,
	     GSLB_GEOIP_BY_ASN,
	     7,
	     0,
	     {DC_EDU, DC_UNICOM, -1}},
	    {"test-city.mmdb",
	     "116.225.0.1",
	     true,
	     0,
	     GSLB_GEOIP_BY_LOCATION,
	     0,
	     3,
	     {DC_TELECOM, DC_EDU, -1}},
	    {"test-city.mmdb",
	     "123.112.1.1",
	     true,
	     0,
	     GSLB_GEOIP_BY_LOCATION,
	     4,
	     4,
	     {DC_UNICOM, DC_EDU, -1}},
	    {"test-city.mmdb",
	     "2408:8000::1",
	     true,
	     0,
	     GSLB_GEOIP_BY_LOCATION,
	     4,
	     4,
	     {DC_UNICOM, DC_EDU, -1}},
	    {"test-city.mmdb",
	     "113.64.1.1",
	     true,
	     0,
	     GSLB_GEOIP_BY_LOCATION,
	     1,
	     2,
	     {DC_TELECOM, DC_UNICOM, -1}},
	    {"test-city.mmdb",
	     "1.80.0.1",
	     true,
	     0,
	     GSLB_GEOIP_BY_LOCATION,
	     1,
	     2,
	     {DC_TELECOM, DC_UNICOM, -1}},
	    {"test-city.mmdb",
	     "36.96.1.1",
	     true,
	     0,
	     GSLB_GEOIP_BY_LOCATION,
	     1,
	     2,
	     {DC_TELECOM, DC_UNICOM, -1}},
	    {"test-city.mmdb", "81.2.69.1", true, 0, GSLB_GEOIP_BY_LOCATION, 3, 1, {DC_EU, -1}},
	    {"test-city.mmdb", "2a02:ffc0::1", true, 0, GSLB_GEOIP_BY_LOCATION, 3, 1, {DC_EU, -1}},
	    {"test-city.mmdb",
	     "175.41.128.1",
	     true,
	     0,
	     GSLB_GEOIP_BY_LOCATION,
	     5,
	     4,
	     {DC_TELECOM, DC_UNICOM, -1}},
	    {"test-city.mmdb", "2001:4860::1", true, 0, GSLB_GEOIP_BY_LOCATION, 6, 4, {DC_US, -1}},
	    /* No rule: distance (Los Angeles: us 3936, eu 9303, unicom 10063, telecom 10435 km;
	     * Dallas: 2206, 8256, 11242, 11841). edu has no coordinates and is left out. */
	    {"test-city.mmdb",
	     "24.0.0.1",
	     true,
	     0,
	     GSLB_GEOIP_BY_DISTANCE,
	     0,
	     0,
	     {DC_US, DC_EU, DC_UNICOM, DC_TELECOM, -1}},
	    {"test-city.mmdb",
	     "2600:1700::1",
	     true,
	     0,
	     GSLB_GEOIP_BY_DISTANCE,
	     0,
	     0,
	     {DC_US, DC_EU, DC_UNICOM, DC_TELECOM, -1}},
	    {"test-city.mmdb",
	     "24.0.0.1",
	     true,
	     2,
	     GSLB_GEOIP_BY_DISTANCE,
	     0,
	     0,
	     {DC_US, DC_EU, -1}},
	    {"test-city.mmdb", "24.0.0.1", false, 0, GSLB_GEOIP_NO_MATCH, 0, 0, {-1}},
	    /* No continent, no location: nothing applies. Bad coordinates count as none. */
	    {"test-city.mmdb", "8.20.1.1", true, 0, GSLB_GEOIP_NO_MATCH, 0, 0, {-1}},
	    {"test-city.mmdb", "1.1.1.1", true, 0, GSLB_GEOIP_NO_MATCH, 0, 0, {-1}},
	    /* An ASN database: ASN rules apply, the rest has no location at all. */
	    {"test-asn.mmdb", "14.20.1.1", true, 0, GSLB_GEOIP_BY_ASN, 2, 0, {DC_TELECOM, -1}},
	    {"test-asn.mmdb", "240e::1", true, 0, GSLB_GEOIP_BY_ASN, 2, 0, {DC_TELECOM, -1}},
	    {"test-asn.mmdb",
	     "202.112.0.1",
	     true,
	     0,
	     GSLB_GEOIP_BY_ASN,
	     7,
	     0,
	     {DC_EDU, DC_UNICOM, -1}},
	    {"test-asn.mmdb", "4.14.0.1", true, 0, GSLB_GEOIP_NO_MATCH, 0, 0, {-1}},
	    /* A Country database: country depth only. */
	    {"test-country-v4.mmdb",
	     "58.32.0.1",
	     true,
	     0,
	     GSLB_GEOIP_BY_LOCATION,
	     1,
	     2,
	     {DC_TELECOM, DC_UNICOM, -1}},
	    {"test-country-v4.mmdb", "4.14.0.1", true, 0, GSLB_GEOIP_NO_MATCH, 0, 0, {-1}},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		gslb_geoip_opts_t opts = {.auto_distance = rows[i].auto_distance,
		                          .auto_limit = rows[i].limit};
		gslb_geoip_rules_t *rules = NULL;
		char err[256] = "";
		int ret = gslb_geoip_rules_new(map_rules, STEER_ARRAY_LEN(map_rules), DC_N, &opts,
		                               &rules, NULL, err, sizeof(err));
		CHECK(ret == 0, "rules: %s", err);
		char path[128];
		snprintf(path, sizeof(path), DIR "%s", rows[i].db);
		gslb_geoip_db_t *db = open_ok(path);
		if (!db || !rules) {
			gslb_geoip_rules_free(rules);
			gslb_geoip_close(db);
			continue;
		}
		uint8_t addr[16];
		int family = strchr(rows[i].addr, ':') ? AF_INET6 : AF_INET;
		inet_pton(family, rows[i].addr, addr);
		gslb_geoip_record_t rec;
		unsigned len;
		CHECK(gslb_geoip_lookup(db, family, addr, &rec, &len) == 0, "lookup %s",
		      rows[i].addr);
		uint16_t out[DC_N];
		size_t n = DC_N;
		gslb_geoip_match_t m;
		ret = gslb_geoip_classify(rules, &rec, dc_coords, DC_N, out, &n, &m);
		CHECK(ret == 0, "%s: classify %d", rows[i].addr, ret);
		CHECK(m.how == rows[i].how, "%s: matched by %s, want %s", rows[i].addr,
		      gslb_geoip_how_str(m.how), gslb_geoip_how_str(rows[i].how));
		if (m.how == GSLB_GEOIP_BY_ASN || m.how == GSLB_GEOIP_BY_LOCATION)
			CHECK(m.rule == rows[i].rule && m.depth == rows[i].depth,
			      "%s: rule %zu depth %u, want %zu depth %u", rows[i].addr, m.rule,
			      m.depth, rows[i].rule, rows[i].depth);
		CHECK(list_eq(out, n, rows[i].want), "%s: wrong list (%zu entries)", rows[i].addr,
		      n);
		gslb_geoip_rules_free(rules);
		gslb_geoip_close(db);
	}
}

/* Records built by hand: cases the test databases do not hold, and the error returns. */
static void test_classify_edges(void)
{
	const gslb_geoip_opts_t opts = {.auto_distance = true};
	gslb_geoip_rules_t *rules = NULL;
	char err[256] = "";
	CHECK(gslb_geoip_rules_new(map_rules, STEER_ARRAY_LEN(map_rules), DC_N, &opts, &rules, NULL,
	                           err, sizeof(err)) == 0,
	      "rules: %s", err);
	if (!rules)
		return;
	CHECK(gslb_geoip_rules_use_asn(rules) && gslb_geoip_rules_use_location(rules), "uses");

	static const char sing[] = "SINGAPOREx"; /* not NUL-terminated after 9 bytes */
	gslb_geoip_record_t rec = {.continent = "AS", .country = "SG", .city = sing, .city_len = 9};
	uint16_t out[DC_N];
	size_t n = DC_N;
	gslb_geoip_match_t m;
	CHECK(gslb_geoip_classify(rules, &rec, dc_coords, DC_N, out, &n, &m) == 0 &&
	          m.how == GSLB_GEOIP_BY_LOCATION && m.rule == 5,
	      "city names compare case-insensitively by length");
	/* The same city in a record with a subdivision does not match the "//" rule. */
	memcpy(rec.subdivision, "01", 3);
	n = DC_N;
	CHECK(gslb_geoip_classify(rules, &rec, dc_coords, DC_N, out, &n, &m) == 0 &&
	          m.how == GSLB_GEOIP_NO_MATCH && n == 0,
	      "'AS/SG//x' needs a record without subdivision");
	/* Mountain View by name alone matches rule 8; with its geoname_id, rule 6 wins. */
	gslb_geoip_record_t mv = {.continent = "NA",
	                          .country = "US",
	                          .subdivision = "CA",
	                          .city = "Mountain View",
	                          .city_len = 13};
	n = DC_N;
	CHECK(gslb_geoip_classify(rules, &mv, dc_coords, DC_N, out, &n, &m) == 0 && m.rule == 8,
	      "city by name");
	mv.city_geoname_id = 5375480;
	n = DC_N;
	CHECK(gslb_geoip_classify(rules, &mv, dc_coords, DC_N, out, &n, &m) == 0 && m.rule == 6,
	      "geoname_id beats name");
	/* An ASN without a rule falls through to location. */
	gslb_geoip_record_t eu = {.continent = "EU", .asn = 64500, .flags = GSLB_GEOIP_REC_ASN};
	n = DC_N;
	CHECK(gslb_geoip_classify(rules, &eu, dc_coords, DC_N, out, &n, &m) == 0 &&
	          m.how == GSLB_GEOIP_BY_LOCATION && m.rule == 3,
	      "unknown ASN falls through");
	/* Errors: no room, wrong datacenter count. */
	n = 0;
	CHECK(gslb_geoip_classify(rules, &eu, dc_coords, DC_N, out, &n, &m) == STEER_ESPACE,
	      "no room for a rule list");
	gslb_geoip_record_t far = {.lat = 34.05f, .lon = -118.24f, .flags = LOC};
	n = 2;
	CHECK(gslb_geoip_classify(rules, &far, dc_coords, DC_N, out, &n, &m) == STEER_ESPACE,
	      "no room for a distance list");
	n = DC_N;
	CHECK(gslb_geoip_classify(rules, &far, dc_coords, DC_N - 1, out, &n, NULL) == STEER_EINVAL,
	      "datacenter count differs from the rules'");
	/* No datacenter has coordinates: distance ordering yields nothing. */
	const gslb_geo_coords_t none[DC_N] = {{0, 0, false}};
	n = DC_N;
	CHECK(gslb_geoip_classify(rules, &far, none, DC_N, out, &n, &m) == 0 &&
	          m.how == GSLB_GEOIP_NO_MATCH && n == 0,
	      "no datacenter coordinates");
	gslb_geoip_rules_free(rules);
	CHECK(strcmp(gslb_geoip_how_str(GSLB_GEOIP_BY_DISTANCE), "distance") == 0, "how_str");
}

/* ----------------------------------------------------------------------------------------
 * Two databases walked as one (geoip.asn-database): test-pair-*.mmdb, make_pair_mmdb.pl
 */

typedef struct {
	steer_prefix_t prefix;
	gslb_geoip_record_t rec;
} got_leaf_t;

typedef struct {
	got_leaf_t *v;
	size_t n, cap;
	int order_errors; /* a leaf that starts before the previous one */
} leaves_t;

/* Walk order: IPv4 first, then by start address, wider first. */
static int prefix_order(const steer_prefix_t *a, const steer_prefix_t *b)
{
	if (a->family != b->family)
		return a->family == AF_INET ? -1 : 1;
	int c = memcmp(a->addr, b->addr, 16);
	return c ? c : (a->len > b->len) - (a->len < b->len);
}

static bool prefix_has(const steer_prefix_t *p, int family, const uint8_t *addr)
{
	if (p->family != family)
		return false;
	for (unsigned b = 0; b < p->len; b++) {
		uint8_t m = (uint8_t)(0x80u >> (b % 8));
		if ((p->addr[b / 8] & m) != (addr[b / 8] & m))
			return false;
	}
	return true;
}

static int collect_all(const steer_prefix_t *p, const gslb_geoip_record_t *rec, void *ctx)
{
	leaves_t *l = ctx;
	if (l->n && prefix_order(&l->v[l->n - 1].prefix, p) >= 0)
		l->order_errors++;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 256;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			abort();
	}
	l->v[l->n++] = (got_leaf_t){.prefix = *p, .rec = *rec};
	return 0;
}

/* The record in force at @p addr after applying the leaves in order (a later leaf overrides
 * an earlier one where it lies inside it, as gslb_nettree_set() does), or NULL. */
static const gslb_geoip_record_t *overlay_at(const leaves_t *l, int family, const uint8_t *addr)
{
	for (size_t i = l->n; i-- > 0;)
		if (prefix_has(&l->v[i].prefix, family, addr))
			return &l->v[i].rec;
	return NULL;
}

/* The reference: both databases looked up directly, the records merged. */
static bool pair_lookup(const gslb_geoip_db_t *loc, const gslb_geoip_db_t *asn, int family,
                        const uint8_t *addr, gslb_geoip_record_t *out)
{
	gslb_geoip_record_t l, a;
	unsigned len;
	int rl = gslb_geoip_lookup(loc, family, addr, &l, &len);
	int ra = gslb_geoip_lookup(asn, family, addr, &a, &len);
	CHECK((rl == 0 || rl == STEER_ENOENT) && (ra == 0 || ra == STEER_ENOENT), "lookup %d %d",
	      rl, ra);
	if (rl != 0 && ra != 0)
		return false;
	gslb_geoip_record_merge(rl == 0 ? &l : NULL, ra == 0 ? &a : NULL, out);
	return true;
}

static bool same_facts(const gslb_geoip_record_t *a, const gslb_geoip_record_t *b)
{
	return strcmp(a->continent, b->continent) == 0 && strcmp(a->country, b->country) == 0 &&
	       strcmp(a->subdivision, b->subdivision) == 0 && a->city_len == b->city_len &&
	       (a->city_len == 0 || memcmp(a->city, b->city, a->city_len) == 0) &&
	       a->city_geoname_id == b->city_geoname_id && a->flags == b->flags &&
	       a->asn == b->asn && a->lat == b->lat && a->lon == b->lon &&
	       a->data_offset == b->data_offset;
}

static void addr_text(int family, const uint8_t *addr, char *buf, size_t len)
{
	inet_ntop(family, addr, buf, (socklen_t)len);
}

/* The IPv6 ranges the walk skips as links to the IPv4 tree (lookups follow them). */
static bool in_alias(int family, const uint8_t *a)
{
	static const uint8_t zero[12];
	return family == AF_INET6 && (memcmp(a, zero, 12) == 0 || (a[0] == 0x20 && a[1] == 0x02) ||
	                              (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) ||
	                              (memcmp(a, zero, 10) == 0 && a[10] == 0xff && a[11] == 0xff));
}

/* Compare the pair walk with the reference at @p addr. Returns false on a mismatch. */
static bool check_point(const gslb_geoip_db_t *loc, const gslb_geoip_db_t *asn, const leaves_t *l,
                        int family, const uint8_t *addr)
{
	if (in_alias(family, addr))
		return true;
	gslb_geoip_record_t want;
	bool have = pair_lookup(loc, asn, family, addr, &want);
	const gslb_geoip_record_t *got = overlay_at(l, family, addr);
	bool ok = have ? got && same_facts(got, &want) : got == NULL;
	if (!ok) {
		char a[INET6_ADDRSTRLEN];
		addr_text(family, addr, a, sizeof(a));
		CHECK(false, "pair walk at %s: got %s AS%u, want %s %s AS%u", a,
		      got ? got->country : "(nothing)", got ? got->asn : 0, have ? "" : "(nothing)",
		      have ? want.country : "", have ? want.asn : 0);
	}
	return ok;
}

/* @p addr += @p delta (+1/-1) in the family's width; false when it wraps. */
static bool addr_step(int family, uint8_t *addr, int delta)
{
	int bytes = family == AF_INET ? 4 : 16;
	for (int i = bytes - 1; i >= 0; i--) {
		uint8_t old = addr[i];
		addr[i] = (uint8_t)(old + delta);
		if ((delta > 0 && old != 0xff) || (delta < 0 && old != 0))
			return true;
	}
	return false;
}

/* Probe both ends of every block of @p single and the addresses just outside them. */
static size_t check_edges(const gslb_geoip_db_t *loc, const gslb_geoip_db_t *asn,
                          const leaves_t *pair, const leaves_t *single, size_t *bad)
{
	size_t probes = 0;
	for (size_t i = 0; i < single->n && *bad < 10; i++) {
		const steer_prefix_t *p = &single->v[i].prefix;
		uint8_t pts[4][16];
		memcpy(pts[0], p->addr, 16);
		prefix_last(p, pts[1]);
		memcpy(pts[2], pts[0], 16);
		memcpy(pts[3], pts[1], 16);
		bool ok2 = addr_step(p->family, pts[2], -1);
		bool ok3 = addr_step(p->family, pts[3], +1);
		for (int k = 0; k < 4; k++) {
			if ((k == 2 && !ok2) || (k == 3 && !ok3))
				continue;
			probes++;
			if (!check_point(loc, asn, pair, p->family, pts[k]))
				(*bad)++;
		}
	}
	return probes;
}

static void walk_single(const gslb_geoip_db_t *db, leaves_t *out)
{
	char err[256] = "";
	int ret = gslb_geoip_walk(db, collect_all, out, NULL, err, sizeof(err));
	CHECK(ret == 0, "walk: %s", err);
}

/* Leaves sharing an id must carry the same facts (callers memoize per id). */
static void check_ids(const char *what, const leaves_t *l, uint32_t records)
{
	const gslb_geoip_record_t **by_id = calloc(records + 1, sizeof(*by_id));
	int bad = 0;
	for (size_t i = 0; i < l->n && by_id; i++) {
		const gslb_geoip_record_t *r = &l->v[i].rec;
		if (r->id >= records) {
			bad++;
			continue;
		}
		if (!by_id[r->id])
			by_id[r->id] = r;
		else if (!same_facts(by_id[r->id], r))
			bad++;
	}
	CHECK(by_id && bad == 0, "%s: %d leaves with an id out of range or shared by other facts",
	      what, bad);
	free(by_id);
}

/* Brute force: the pair walk against direct lookups in both databases. */
static void check_pair_brute(const char *city_path, const char *asn_path, unsigned random_points)
{
	gslb_geoip_db_t *loc = open_ok(city_path), *asn = open_ok(asn_path);
	if (!loc || !asn) {
		gslb_geoip_close(loc);
		gslb_geoip_close(asn);
		return;
	}
	leaves_t pair = {0}, sl = {0}, sa = {0};
	gslb_geoip_walk_stats_t st;
	char err[256] = "";
	int ret = gslb_geoip_walk_pair(loc, asn, collect_all, &pair, &st, err, sizeof(err));
	CHECK(ret == 0 && st.leaves == pair.n, "walk_pair %s: %d %s", city_path, ret, err);
	CHECK(pair.order_errors == 0, "%s: %d leaves out of walk order", city_path,
	      pair.order_errors);
	check_ids(city_path, &pair, st.records);
	walk_single(loc, &sl);
	walk_single(asn, &sa);
	size_t bad = 0, probes = check_edges(loc, asn, &pair, &sl, &bad);
	probes += check_edges(loc, asn, &pair, &sa, &bad);
	/* random addresses, half of them inside blocks of the two databases */
	uint64_t x = 0x9E3779B97F4A7C15ull;
	for (unsigned i = 0; i < random_points && bad < 10; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		const leaves_t *src = (x & 1) ? &sl : &sa;
		uint8_t a[16] = {0};
		int family = AF_INET;
		if (src->n && (x & 2)) {
			const steer_prefix_t *p = &src->v[(x >> 8) % src->n].prefix;
			family = p->family;
			memcpy(a, p->addr, 16);
			for (unsigned b = p->len; b < (family == AF_INET ? 32u : 128u); b++)
				if ((x >> (b % 61)) & 1)
					a[b / 8] |= (uint8_t)(0x80u >> (b % 8));
		} else {
			for (int k = 0; k < 16; k++)
				a[k] = (uint8_t)(x >> ((k % 8) * 8));
			if (x & 4) {
				family = AF_INET6;
				a[0] = 0x24; /* 2400::/8 and around, where the test data is */
			}
		}
		probes++;
		if (!check_point(loc, asn, &pair, family, a))
			bad++;
	}
	CHECK(bad == 0, "%s + %s: %zu of %zu probes differ", city_path, asn_path, bad, probes);
	if (getenv("TEST_GEOIP_VERBOSE"))
		printf("%s + %s: %zu + %zu leaves -> %zu pair leaves, %u pairs; %zu probes\n",
		       city_path, asn_path, sl.n, sa.n, pair.n, st.records, probes);
	free(pair.v);
	free(sl.v);
	free(sa.v);
	gslb_geoip_close(loc);
	gslb_geoip_close(asn);
}

static void test_record_merge(void)
{
	gslb_geoip_record_t loc = {.city = "Shanghai",
	                           .city_len = 8,
	                           .id = 3,
	                           .data_offset = 77,
	                           .asn = 4812,
	                           .lat = 31.0f,
	                           .lon = 121.0f,
	                           .continent = "AS",
	                           .country = "CN",
	                           .subdivision = "31",
	                           .flags = GSLB_GEOIP_REC_LOCATION | GSLB_GEOIP_REC_ASN};
	gslb_geoip_record_t asn = {
	    .id = 5, .data_offset = 999, .asn = 4134, .country = "US", .flags = GSLB_GEOIP_REC_ASN};
	gslb_geoip_record_t out;
	gslb_geoip_record_merge(&loc, &asn, &out);
	CHECK(out.asn == 4134 && strcmp(out.country, "CN") == 0 && out.data_offset == 77 &&
	          out.id == GSLB_GEOIP_NO_ID && out.city == loc.city &&
	          out.flags == (GSLB_GEOIP_REC_LOCATION | GSLB_GEOIP_REC_ASN),
	      "merge: location from loc, ASN from asn");
	asn.flags = 0;
	gslb_geoip_record_merge(&loc, &asn, &out);
	CHECK(out.asn == 4812 && (out.flags & GSLB_GEOIP_REC_ASN),
	      "merge: an ASN record without an ASN keeps the location database's");
	asn.flags = GSLB_GEOIP_REC_ASN;
	gslb_geoip_record_merge(NULL, &asn, &out);
	CHECK(out.asn == 4134 && out.flags == GSLB_GEOIP_REC_ASN && out.country[0] == '\0' &&
	          out.data_offset == 0 && !out.city,
	      "merge: ASN only, no location facts from the ASN database");
	gslb_geoip_record_merge(&loc, NULL, &out);
	CHECK(out.asn == 4812 && strcmp(out.subdivision, "31") == 0, "merge: location only");
	gslb_geoip_record_merge(NULL, NULL, &out);
	CHECK(out.flags == 0 && out.continent[0] == '\0' && out.id == GSLB_GEOIP_NO_ID,
	      "merge: nothing");
}

/* The hand-made pair: the exact leaves, in overlay order, with merged facts. */
static void test_walk_pair(void)
{
	static const struct {
		const char *prefix;
		const char *where; /* "CN/31", or "" without location */
		uint32_t asn;      /* 0: none */
	} want[] = {
	    {"1.0.0.0/16", "CN/31", 0},    /* the rest of the /16: City facts alone */
	    {"1.0.0.0/24", "CN/31", 4134}, /* ... overridden by the ASN blocks inside */
	    {"1.0.1.0/24", "CN/31", 4812},     {"5.1.0.0/16", "DE/HE", 0},
	    {"14.0.0.0/8", "", 4837}, /* ASN wider than City */
	    {"14.1.0.0/16", "CN/11", 4837},    {"14.200.0.0/16", "CN/31", 4837},
	    {"36.0.0.0/12", "", 4538},         {"58.32.0.0/13", "CN/31", 4812}, /* once */
	    {"101.0.0.0/12", "CN/31", 0},      {"101.4.0.0/14", "CN/31", 4134},
	    {"101.8.0.0/13", "CN/31", 4134},   {"2001:da8::/32", "CN/11", 0},
	    {"2001:da8::/48", "CN/11", 23910}, {"2408:8000::/20", "", 4837},
	    {"240e::/20", "CN/31", 0},         {"240e::/24", "CN/31", 4134},
	    {"240e:100::/24", "CN/31", 4812},
	};
	gslb_geoip_db_t *loc = open_ok(DIR "test-pair-city.mmdb");
	gslb_geoip_db_t *asn = open_ok(DIR "test-pair-asn.mmdb");
	if (loc && asn) {
		leaves_t l = {0};
		gslb_geoip_walk_stats_t st;
		char err[256] = "";
		int ret = gslb_geoip_walk_pair(loc, asn, collect_all, &l, &st, err, sizeof(err));
		CHECK(ret == 0, "walk_pair: %s", err);
		CHECK(l.n == STEER_ARRAY_LEN(want), "pair: %zu leaves, want %zu", l.n,
		      STEER_ARRAY_LEN(want));
		for (size_t i = 0; i < l.n && i < STEER_ARRAY_LEN(want); i++) {
			char p[64], where[16];
			prefix_str(&l.v[i].prefix, p, sizeof(p));
			const gslb_geoip_record_t *r = &l.v[i].rec;
			snprintf(where, sizeof(where), "%s%s%s", r->country,
			         r->country[0] ? "/" : "", r->subdivision);
			uint32_t a = (r->flags & GSLB_GEOIP_REC_ASN) ? r->asn : 0;
			CHECK(strcmp(p, want[i].prefix) == 0 && strcmp(where, want[i].where) == 0 &&
			          a == want[i].asn,
			      "pair leaf %zu: %s %s AS%u, want %s %s AS%u", i, p, where, a,
			      want[i].prefix, want[i].where, want[i].asn);
		}
		/* ids: (SH,-) (SH,4134) (SH,4812) (FRA,-) (-,4837) (BJ,4837) (SH,4837) (-,4538)
		 * (BJ,-) (BJ,23910) = 10 pairs; the rest repeat one */
		CHECK(st.records == 10, "pair: %u distinct pairs, want 10", st.records);
		check_ids("small pair", &l, st.records);
		free(l.v);
		size_t n = 0;
		ret = gslb_geoip_walk_pair(loc, asn, count_leaves, &n, NULL, err, sizeof(err));
		CHECK(ret == 0 && n == STEER_ARRAY_LEN(want), "count: %d %zu", ret, n);
	}
	gslb_geoip_close(loc);
	gslb_geoip_close(asn);
	check_pair_brute(DIR "test-pair-city.mmdb", DIR "test-pair-asn.mmdb", 2000);
	check_pair_brute(DIR "test-pair-rand-city.mmdb", DIR "test-pair-rand-asn.mmdb", 20000);
	/* the existing single databases as a pair too (aliases, a host route, IPv6) */
	check_pair_brute(DIR "test-city.mmdb", DIR "test-asn.mmdb", 2000);
	/* an IPv4-only location database with an IPv6 ASN database */
	check_pair_brute(DIR "test-country-v4.mmdb", DIR "test-asn.mmdb", 2000);
	/* a location block wider than all of IPv4 (::/64), split by the walk */
	check_pair_brute(DIR "test-wide.mmdb", DIR "test-asn.mmdb", 2000);
}

static int stop_at_third(const steer_prefix_t *p, const gslb_geoip_record_t *rec, void *ctx)
{
	(void)p;
	(void)rec;
	int *n = ctx;
	return ++*n == 3 ? -42 : 0;
}

static void test_walk_pair_errors(void)
{
	gslb_geoip_db_t *loc = open_ok(DIR "test-pair-city.mmdb");
	gslb_geoip_db_t *asn = open_ok(DIR "test-pair-asn.mmdb");
	if (loc && asn) {
		int n = 0;
		char err[256] = "";
		int ret = gslb_geoip_walk_pair(loc, asn, stop_at_third, &n, NULL, err, sizeof(err));
		CHECK(ret == -42 && n == 3, "pair walk stops on a callback error: %d %d", ret, n);
	}
	/* a corrupt ASN database: the error names its file */
	size_t len = 0;
	uint8_t *data = slurp(DIR "test-pair-asn.mmdb", &len);
	if (data && len > 64 && loc) {
		put24(data + 3, 0xFFFFFF); /* the root's right record: beyond the data section */
		const char *path = write_temp(data, len);
		gslb_geoip_db_t *bad = NULL;
		char err[256] = "";
		if (path && gslb_geoip_open(path, &bad, err, sizeof(err)) == 0) {
			size_t n = 0;
			int ret = gslb_geoip_walk_pair(loc, bad, count_leaves, &n, NULL, err,
			                               sizeof(err));
			CHECK(ret == STEER_EMALF && strstr(err, path), "corrupt ASN db: %d %s", ret,
			      err);
			gslb_geoip_close(bad);
		}
		if (path)
			unlink(path);
	}
	gslb_geoip_close(loc);
	gslb_geoip_close(asn);
}

/* ---------------------------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long max_rss_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* Measurement mode: walk one database, as a map build would, and report the cost. */
static int bench(const char *path)
{
	long rss0 = max_rss_kib();
	double t0 = now_s();
	gslb_geoip_db_t *db = NULL;
	char err[256];
	int ret = gslb_geoip_open(path, &db, err, sizeof(err));
	if (ret != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	double t1 = now_s();
	size_t n = 0;
	gslb_geoip_walk_stats_t st;
	ret = gslb_geoip_walk(db, count_leaves, &n, &st, err, sizeof(err));
	double t2 = now_s();
	if (ret != 0) {
		fprintf(stderr, "%s\n", err);
		gslb_geoip_close(db);
		return 1;
	}
	gslb_geoip_db_info_t info;
	gslb_geoip_info(db, &info);
	printf("%s: %s, %u nodes; open %.3f s, walk %.3f s: %llu leaves, %u records, %u nodes "
	       "read, %u aliases; cache %.1f MiB; max RSS +%ld KiB (includes the mapped file "
	       "pages touched)\n",
	       path, info.type, info.node_count, t1 - t0, t2 - t1, (unsigned long long)st.leaves,
	       st.records, st.nodes, st.aliases, (double)st.cache_bytes / 1048576.0,
	       max_rss_kib() - rss0);
	gslb_geoip_close(db);
	return 0;
}

/* Measurement mode for a pair: walk CITY and ASN as one (geoip.asn-database). */
static int bench_pair(const char *city, const char *asn)
{
	long rss0 = max_rss_kib();
	gslb_geoip_db_t *loc = NULL, *adb = NULL;
	char err[256];
	if (gslb_geoip_open(city, &loc, err, sizeof(err)) != 0 ||
	    gslb_geoip_open(asn, &adb, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		gslb_geoip_close(loc);
		return 1;
	}
	size_t n_loc = 0, n_asn = 0, n = 0;
	gslb_geoip_walk_stats_t st;
	double t0 = now_s();
	int ret = gslb_geoip_walk(loc, count_leaves, &n_loc, NULL, err, sizeof(err));
	if (ret == 0)
		ret = gslb_geoip_walk(adb, count_leaves, &n_asn, NULL, err, sizeof(err));
	double t1 = now_s();
	if (ret == 0)
		ret = gslb_geoip_walk_pair(loc, adb, count_leaves, &n, &st, err, sizeof(err));
	double t2 = now_s();
	if (ret != 0)
		fprintf(stderr, "%s\n", err);
	else
		printf("%s + %s: single walks %.3f s (%zu + %zu leaves); pair walk %.3f s: %llu "
		       "leaves, %u distinct pairs, temporary memory %.1f MiB; max RSS +%ld KiB "
		       "(includes the mapped file pages touched)\n",
		       city, asn, t1 - t0, n_loc, n_asn, t2 - t1, (unsigned long long)st.leaves,
		       st.records, (double)st.cache_bytes / 1048576.0, max_rss_kib() - rss0);
	gslb_geoip_close(loc);
	gslb_geoip_close(adb);
	return ret == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 2)
		return bench(argv[1]);
	if (argc == 3)
		return bench_pair(argv[1], argv[2]);
	test_distance();
	test_order_by_distance();
	test_open();
	test_walk_city();
	test_walk_others();
	test_corrupt();
	test_lookup();
	test_rules_errors();
	test_classify();
	test_classify_edges();
	test_record_merge();
	test_walk_pair();
	test_walk_pair_errors();
	return unit_finish("test_geoip");
}
