/*
 * Unit tests of gslb/view: a conf_t built by hand (independent of the YAML parser) compiled
 * into a view, then answered for clients and ECS subnets. Runs in tests/data.
 */
#include "gslb/view.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "dns/const.h"
#include "dns/dname.h"
#include "gslb/geoip.h"
#include "unit.h"

/* ---- conf building helpers ---- */

enum { DC_TELECOM, DC_UNICOM, DC_EDU, DC_EU, DC_V6, DC_N };

static conf_datacenter_t dcs[DC_N] = {
    {.name = "telecom", .has_coords = true, .lat = 31.23, .lon = 121.47, .line = 2},
    {.name = "unicom", .has_coords = true, .lat = 39.90, .lon = 116.40, .line = 3},
    {.name = "edu", .line = 4},
    {.name = "eu", .has_coords = true, .lat = 50.11, .lon = 8.68, .line = 5},
    {.name = "v6only", .line = 6},
};

static conf_address_t addr(const char *text, uint32_t weight)
{
	conf_address_t a = {.weight = weight ? weight : 1};
	if (inet_pton(AF_INET, text, a.addr) == 1)
		a.family = AF_INET;
	else if (inet_pton(AF_INET6, text, a.addr) == 1)
		a.family = AF_INET6;
	else
		abort();
	return a;
}

static steer_prefix_t pfx(const char *text)
{
	steer_prefix_t p;
	if (steer_prefix_parse(text, &p) < 0)
		abort();
	return p;
}

/* Address lists of the datacenters, shared by the services. */
static conf_address_t a_telecom[2], a_unicom[2], a_edu[1], a_eu[1], a_v6[1], a_v4[1];

static void init_addrs(void)
{
	a_telecom[0] = addr("198.51.100.10", 0);
	a_telecom[1] = addr("2001:db8:1::10", 0);
	a_unicom[0] = addr("203.0.113.10", 0);
	a_unicom[1] = addr("203.0.113.11", 0);
	a_edu[0] = addr("192.0.2.10", 0);
	a_eu[0] = addr("192.0.2.77", 0);
	a_v6[0] = addr("2001:db8:2::1", 0);
	a_v4[0] = addr("192.0.2.50", 0);
}

static conf_service_dc_t sdc(size_t dc, conf_address_t *a, size_t n, unsigned line)
{
	return (conf_service_dc_t){
	    .datacenter = dc, .addresses = a, .n_addresses = n, .line = line};
}

#define N(a) (sizeof(a) / sizeof((a)[0]))
/* Datacenter lists; static storage because the conf_t outlives init_conf(). */
static size_t l_tel_edu_uni[] = {DC_TELECOM, DC_EDU, DC_UNICOM};
static size_t l_edu_tel[] = {DC_EDU, DC_TELECOM};
static size_t l_uni_tel_edu[] = {DC_UNICOM, DC_TELECOM, DC_EDU};
static size_t l_tel[] = {DC_TELECOM};
static size_t l_edu_uni[] = {DC_EDU, DC_UNICOM};
static size_t l_eu[] = {DC_EU};
#define DCLIST(l) ((conf_dclist_t){.dc = (l), .n = N(l)})

/* ---- query helpers ---- */

static steer_sockaddr_t sock(const char *ip)
{
	steer_sockaddr_t sa;
	memset(&sa, 0, sizeof(sa));
	if (inet_pton(AF_INET, ip, &sa.sin.sin_addr) == 1)
		sa.sin.sin_family = AF_INET;
	else if (inet_pton(AF_INET6, ip, &sa.sin6.sin6_addr) == 1)
		sa.sin6.sin6_family = AF_INET6;
	else
		abort();
	return sa;
}

static dns_ecs_t ecs_of(const char *text)
{
	steer_prefix_t p = pfx(text);
	dns_ecs_t e = {.family = p.family == AF_INET ? DNS_ECS_FAMILY_IPV4 : DNS_ECS_FAMILY_IPV6,
	               .source_len = p.len};
	memcpy(e.addr, p.addr, 16);
	return e;
}

static gslb_qstate_t qs;

/* Answer @p qtype at @p name for resolver @p res and optional ECS @p ecs. */
static gslb_result_t ask(const gslb_view_t *v, const char *name, uint16_t qtype, const char *res,
                         const char *ecs)
{
	uint8_t wire[DNS_DNAME_MAXLEN];
	/* Returned by value: a whoami address lives in the result and is read through
	 * gslb_result_addr(), so the copy is self-contained. */
	gslb_result_t r;
	memset(&r, 0, sizeof(r));
	if (dname_from_str(name, wire) < 0)
		abort();
	dname_lower(wire);
	const gslb_name_t *n = gslb_view_find(v, wire);
	if (!n) {
		r.ans.kind = (gslb_answer_kind_t)-1;
		return r;
	}
	steer_sockaddr_t sa = sock(res);
	dns_ecs_t e;
	if (ecs)
		e = ecs_of(ecs);
	gslb_client_t c = {.resolver = &sa, .ecs = ecs ? &e : NULL};
	gslb_view_answer(v, n, qtype, &c, &qs, &r);
	return r;
}

/* The answer addresses of an A answer as "a b c" (or the kind of a non-address answer). */
static const char *addrs_str(const gslb_result_t *r)
{
	static char buf[1024];
	size_t pos = 0;
	buf[0] = '\0';
	if (r->ans.kind != GSLB_ANSWER_ADDRS)
		return r->ans.kind == GSLB_ANSWER_NODATA     ? "NODATA"
		       : r->ans.kind == GSLB_ANSWER_SERVFAIL ? "SERVFAIL"
		       : r->ans.kind == GSLB_ANSWER_CNAME    ? "CNAME"
		       : r->ans.kind == GSLB_ANSWER_TXT      ? "TXT"
		                                             : "NOTFOUND";
	for (unsigned i = 0; i < r->ans.count; i++) {
		char a[INET6_ADDRSTRLEN];
		inet_ntop(AF_INET, gslb_result_addr(r, i), a, sizeof(a));
		pos += (size_t)snprintf(buf + pos, sizeof(buf) - pos, "%s%s", i ? " " : "", a);
	}
	return buf;
}

static const char *addrs6_str(const gslb_result_t *r)
{
	static char buf[1024];
	size_t pos = 0;
	buf[0] = '\0';
	if (r->ans.kind != GSLB_ANSWER_ADDRS)
		return addrs_str(r);
	for (unsigned i = 0; i < r->ans.count; i++) {
		char a[INET6_ADDRSTRLEN];
		inet_ntop(AF_INET6, gslb_result_addr(r, i), a, sizeof(a));
		pos += (size_t)snprintf(buf + pos, sizeof(buf) - pos, "%s%s", i ? " " : "", a);
	}
	return buf;
}

#define EXPECT_A(v, name, res, ecs, want, want_scope)                                              \
	do {                                                                                       \
		gslb_result_t r_ = ask(v, name, DNS_TYPE_A, res, ecs);                             \
		CHECK(strcmp(addrs_str(&r_), want) == 0,                                           \
		      "%s A from %s ecs %s: got '%s' want '%s'", name, res, ecs ? ecs : "-",       \
		      addrs_str(&r_), want);                                                       \
		CHECK(r_.ecs_scope == (want_scope), "%s A from %s ecs %s: scope %u want %u", name, \
		      res, ecs ? ecs : "-", r_.ecs_scope, (unsigned)(want_scope));                 \
	} while (0)

#define EXPECT_AAAA(v, name, res, ecs, want, want_scope)                                           \
	do {                                                                                       \
		gslb_result_t r_ = ask(v, name, DNS_TYPE_AAAA, res, ecs);                          \
		CHECK(strcmp(addrs6_str(&r_), want) == 0,                                          \
		      "%s AAAA from %s ecs %s: got '%s' want '%s'", name, res, ecs ? ecs : "-",    \
		      addrs6_str(&r_), want);                                                      \
		CHECK(r_.ecs_scope == (want_scope), "%s AAAA from %s ecs %s: scope %u want %u",    \
		      name, res, ecs ? ecs : "-", r_.ecs_scope, (unsigned)(want_scope));           \
	} while (0)

/* ---- the main configuration ---- */

static conf_nets_t isp_nets[2];
static conf_map_t maps[3];
static conf_geoip_rule_t geo_rules[2];
static uint32_t edu_asn[] = {4538};

static conf_service_dc_t svc_geo_dcs[3], svc_noecs_dcs[2], svc_fo_dcs[2], svc_p_dcs[2],
    svc_ad_dcs[1], svc_fb_dcs[1], svc_cn_dcs[1], svc_v6_dcs[2], svc_g_dcs[4], svc_st_dcs[2],
    svc_pin_dcs[1];
static conf_address_t fb_addrs[1];
static conf_service_t services[11];
static char *whoami[] = {"whoami.example.test"};
static conf_override_t overrides[] = {
    {.pattern = "service/fo.example.test/telecom/*", .up = false, .line = 90},
    {.pattern = "service/ad.example.test/*", .up = false, .line = 91},
    {.pattern = "service/fb.example.test/*", .up = false, .line = 92},
    {.pattern = "service/cn.example.test/*", .up = false, .line = 93},
};

static void init_conf(conf_t *c)
{
	memset(c, 0, sizeof(*c));
	c->path = "test.yaml";
	c->datacenters = dcs;
	c->n_datacenters = DC_N;

	isp_nets[0] = (conf_nets_t){
	    .file = "gslb/view/telecom.txt", .datacenters = DCLIST(l_tel_edu_uni), .line = 10};
	static steer_prefix_t edu_cidr[2];
	edu_cidr[0] = pfx("202.120.0.0/16");
	edu_cidr[1] = pfx("2001:da8::/32");
	isp_nets[1] = (conf_nets_t){
	    .cidr = edu_cidr, .n_cidr = 2, .datacenters = DCLIST(l_edu_tel), .line = 11};
	maps[0] = (conf_map_t){.name = "isp",
	                       .nets = isp_nets,
	                       .n_nets = 2,
	                       .default_dcs = DCLIST(l_uni_tel_edu),
	                       .ecs_private_is_absent = true,
	                       .line = 9};
	maps[1] = maps[0];
	maps[1].name = "isp-noecs";
	maps[1].ignore_ecs = true;
	maps[1].line = 12;
	geo_rules[0] =
	    (conf_geoip_rule_t){.match = "AS/CN/31", .datacenters = DCLIST(l_tel), .line = 15};
	geo_rules[1] = (conf_geoip_rule_t){
	    .asn = edu_asn, .n_asn = 1, .datacenters = DCLIST(l_edu_uni), .line = 16};
	maps[2] = (conf_map_t){.name = "world",
	                       .geoip_database = "gslb/mmdb/test-city.mmdb",
	                       .geoip_asn_database = "gslb/mmdb/test-asn.mmdb",
	                       .auto_distance = true,
	                       .rules = geo_rules,
	                       .n_rules = 2,
	                       .default_dcs = DCLIST(l_eu),
	                       .ecs_private_is_absent = true,
	                       .line = 13};
	c->maps = maps;
	c->n_maps = 3;

	svc_geo_dcs[0] = sdc(DC_TELECOM, a_telecom, 2, 21);
	svc_geo_dcs[1] = sdc(DC_UNICOM, a_unicom, 2, 22);
	svc_geo_dcs[2] = sdc(DC_EDU, a_edu, 1, 23);
	services[0] = (conf_service_t){.name = "vpn.example.test.",
	                               .policy = "geo",
	                               .map = 0,
	                               .ttl = 30,
	                               .dcs = svc_geo_dcs,
	                               .n_dcs = 3,
	                               .persist_prefix4 = 24,
	                               .persist_prefix6 = 56,
	                               .line = 20};
	svc_noecs_dcs[0] = sdc(DC_TELECOM, a_telecom, 2, 31);
	svc_noecs_dcs[1] = sdc(DC_EDU, a_edu, 1, 32);
	services[1] = (conf_service_t){.name = "noecs.example.test",
	                               .policy = "geo",
	                               .map = 1,
	                               .ttl = 30,
	                               .dcs = svc_noecs_dcs,
	                               .n_dcs = 2,
	                               .line = 30};
	svc_fo_dcs[0] = sdc(DC_TELECOM, a_telecom, 2, 41);
	svc_fo_dcs[1] = sdc(DC_UNICOM, a_unicom, 2, 42);
	services[2] = (conf_service_t){.name = "fo.example.test",
	                               .policy = "failover",
	                               .map = SIZE_MAX,
	                               .ttl = 60,
	                               .dcs = svc_fo_dcs,
	                               .n_dcs = 2,
	                               .line = 40};
	svc_p_dcs[0] = sdc(DC_TELECOM, a_telecom, 2, 51);
	svc_p_dcs[1] = sdc(DC_UNICOM, a_unicom, 2, 52);
	services[3] = (conf_service_t){.name = "p.example.test",
	                               .policy = "persist",
	                               .map = SIZE_MAX,
	                               .ttl = 60,
	                               .dcs = svc_p_dcs,
	                               .n_dcs = 2,
	                               .persist_prefix4 = 24,
	                               .persist_prefix6 = 56,
	                               .line = 50};
	svc_ad_dcs[0] = sdc(DC_TELECOM, a_telecom, 2, 61);
	services[4] = (conf_service_t){.name = "ad.example.test",
	                               .policy = "failover",
	                               .map = SIZE_MAX,
	                               .ttl = 60,
	                               .dcs = svc_ad_dcs,
	                               .n_dcs = 1,
	                               .all_down = "servfail",
	                               .line = 60};
	svc_fb_dcs[0] = sdc(DC_TELECOM, a_telecom, 2, 66);
	fb_addrs[0] = addr("192.0.2.99", 0);
	services[5] = (conf_service_t){.name = "fb.example.test",
	                               .policy = "failover",
	                               .map = SIZE_MAX,
	                               .ttl = 60,
	                               .dcs = svc_fb_dcs,
	                               .n_dcs = 1,
	                               .all_down = "fallback",
	                               .fallback = fb_addrs,
	                               .n_fallback = 1,
	                               .line = 65};
	svc_cn_dcs[0] = sdc(DC_TELECOM, a_telecom, 2, 71);
	services[6] = (conf_service_t){.name = "cn.example.test",
	                               .policy = "failover",
	                               .map = SIZE_MAX,
	                               .ttl = 60,
	                               .dcs = svc_cn_dcs,
	                               .n_dcs = 1,
	                               .all_down = "fallback",
	                               .fallback_cname = "backup.example.net.",
	                               .line = 70};
	svc_v6_dcs[0] = sdc(DC_V6, a_v6, 1, 76);
	svc_v6_dcs[1] = sdc(DC_EDU, a_v4, 1, 77);
	services[7] = (conf_service_t){.name = "v6.example.test",
	                               .policy = "failover",
	                               .map = SIZE_MAX,
	                               .ttl = 45,
	                               .dcs = svc_v6_dcs,
	                               .n_dcs = 2,
	                               .line = 75};
	svc_g_dcs[0] = sdc(DC_TELECOM, a_telecom, 2, 81);
	svc_g_dcs[1] = sdc(DC_UNICOM, a_unicom, 2, 82);
	svc_g_dcs[2] = sdc(DC_EDU, a_edu, 1, 83);
	svc_g_dcs[3] = sdc(DC_EU, a_eu, 1, 84);
	services[8] = (conf_service_t){.name = "g.example.test",
	                               .policy = "geo",
	                               .map = 2,
	                               .ttl = 20,
	                               .dcs = svc_g_dcs,
	                               .n_dcs = 4,
	                               .line = 80};
	svc_st_dcs[0] = sdc(DC_TELECOM, a_telecom, 2, 86);
	svc_st_dcs[1] = sdc(DC_UNICOM, a_unicom, 2, 87);
	services[9] = (conf_service_t){.name = "state.example.test",
	                               .policy = "failover",
	                               .map = SIZE_MAX,
	                               .ttl = 60,
	                               .dcs = svc_st_dcs,
	                               .n_dcs = 2,
	                               .line = 85};
	/* a geo service whose map lists only datacenters it does not have: configured order */
	svc_pin_dcs[0] = sdc(DC_EU, a_eu, 1, 89);
	services[10] = (conf_service_t){.name = "pin.example.test",
	                                .policy = "geo",
	                                .map = 0,
	                                .ttl = 10,
	                                .dcs = svc_pin_dcs,
	                                .n_dcs = 1,
	                                .line = 88};
	c->services = services;
	c->n_services = N(services);
	c->whoami = whoami;
	c->n_whoami = 1;
	c->overrides = overrides;
	c->n_overrides = N(overrides);
}

static gslb_view_t *build(const conf_t *c)
{
	gslb_view_t *v = NULL;
	char err[512];
	int ret = gslb_view_build(c, NULL, &v, NULL, err, sizeof(err));
	CHECK(ret == 0 && v, "build: %d %s", ret, err);
	return v;
}

/* ---- tests ---- */

static void test_geo_nets(const gslb_view_t *v)
{
	/* resolver address only: no ECS in the query, so scope 0 */
	EXPECT_A(v, "vpn.example.test", "58.33.1.1", NULL, "198.51.100.10", 0);
	EXPECT_A(v, "VPN.Example.Test.", "202.120.9.9", NULL, "192.0.2.10", 0);
	/* ECS inside the /16 inline entry: edu, scope 16 for a /24 query */
	EXPECT_A(v, "vpn.example.test", "8.8.8.8", "202.120.5.0/24", "192.0.2.10", 16);
	/* ECS inside a /13 of the nets file */
	EXPECT_A(v, "vpn.example.test", "8.8.8.8", "58.32.1.0/24", "198.51.100.10", 13);
	/* the line 1.2.3.0/24 */
	EXPECT_A(v, "vpn.example.test", "8.8.8.8", "1.2.3.0/24", "198.51.100.10", 24);
	/* ECS wider than the block: 58.0.0.0 is in default space up to 58.32.0.0/13, so the
	 * answer holds only for the narrower 58.0.0.0/11 (RFC 7871 7.2.1: scope > source) */
	EXPECT_A(v, "vpn.example.test", "8.8.8.8", "58.0.0.0/8", "203.0.113.10 203.0.113.11", 11);
	/* default space: 8.0.0.0/5 is the widest block without nets entries (1.2.3.0/24 and
	 * 58.32.0.0/13 split 0.0.0.0/2 and 0.0.0.0/4) */
	EXPECT_A(v, "vpn.example.test", "58.33.1.1", "8.8.8.0/24", "203.0.113.10 203.0.113.11", 5);
	/* default [unicom, telecom, edu] for AAAA: unicom has no IPv6, telecom answers */
	EXPECT_AAAA(v, "vpn.example.test", "58.33.1.1", "8.8.8.0/24", "2001:db8:1::10", 5);
	/* IPv6 ECS: [edu, telecom], edu has no IPv6 */
	EXPECT_AAAA(v, "vpn.example.test", "::1", "2001:da8:1::/48", "2001:db8:1::10", 32);
	EXPECT_A(v, "vpn.example.test", "::1", "2001:da8:1::/48", "192.0.2.10", 32);
	EXPECT_A(v, "vpn.example.test", "::1", "240e:1::/48", "198.51.100.10", 20);
	/* IPv4-mapped resolver address decides as IPv4 */
	EXPECT_A(v, "vpn.example.test", "::ffff:202.120.1.1", NULL, "192.0.2.10", 0);
	/* private ECS = absent: the resolver decides, scope 0 */
	EXPECT_A(v, "vpn.example.test", "202.120.1.1", "10.1.2.0/24", "192.0.2.10", 0);
	EXPECT_A(v, "vpn.example.test", "202.120.1.1", "192.168.0.0/16", "192.0.2.10", 0);
	EXPECT_A(v, "vpn.example.test", "202.120.1.1", "fe80::/64", "192.0.2.10", 0);
	EXPECT_A(v, "vpn.example.test", "202.120.1.1", "::ffff:127.0.0.0/104", "192.0.2.10", 0);
	/* ECS source prefix 0: no client information, scope 0 */
	EXPECT_A(v, "vpn.example.test", "202.120.1.1", "0.0.0.0/0", "192.0.2.10", 0);
	/* ignore-ecs: the resolver decides and the scope is 0 */
	EXPECT_A(v, "noecs.example.test", "58.33.1.1", "202.120.5.0/24", "198.51.100.10", 0);
	EXPECT_A(v, "noecs.example.test", "202.120.1.1", "58.33.0.0/24", "192.0.2.10", 0);
	/* the map lists nothing the service has: configured order; the scope is still the map's */
	EXPECT_A(v, "pin.example.test", "8.8.8.8", "202.120.5.0/24", "192.0.2.77", 16);
	/* TTL from the service */
	gslb_result_t r = ask(v, "vpn.example.test", DNS_TYPE_A, "58.33.1.1", NULL);
	CHECK(r.ans.ttl == 30, "ttl %u", r.ans.ttl);
	/* other types: NODATA with the service TTL; ANY: the A RRset */
	r = ask(v, "vpn.example.test", DNS_TYPE_MX, "58.33.1.1", NULL);
	CHECK(r.ans.kind == GSLB_ANSWER_NODATA && r.ans.ttl == 30, "MX: kind %d ttl %u", r.ans.kind,
	      r.ans.ttl);
	r = ask(v, "vpn.example.test", DNS_TYPE_ANY, "58.33.1.1", NULL);
	CHECK(r.ans.kind == GSLB_ANSWER_ADDRS && strcmp(addrs_str(&r), "198.51.100.10") == 0,
	      "ANY: %s", addrs_str(&r));
	/* not a GSLB name */
	r = ask(v, "nope.example.test", DNS_TYPE_A, "58.33.1.1", NULL);
	CHECK((int)r.ans.kind == -1, "nope.example.test found");
}

static void test_failover_override(const gslb_view_t *v)
{
	/* telecom is forced down by the config override: unicom, all addresses */
	EXPECT_A(v, "fo.example.test", "192.0.2.1", NULL, "203.0.113.10 203.0.113.11", 0);
	/* AAAA: telecom is the only one with IPv6 and it is down: first-datacenter answers it */
	EXPECT_AAAA(v, "fo.example.test", "192.0.2.1", NULL, "2001:db8:1::10", 0);
	/* ECS present: failover does not depend on the client, scope 0 */
	EXPECT_A(v, "fo.example.test", "192.0.2.1", "198.51.100.0/24", "203.0.113.10 203.0.113.11",
	         0);

	/* target names and the reason of the forced state */
	const gslb_health_t *h = gslb_view_health(v);
	bool found = false;
	for (uint32_t id = 0; id < h->count; id++) {
		gslb_health_entry_t e;
		CHECK(gslb_health_entry(h, id, &e) == 0, "entry %u", id);
		CHECK(e.name != NULL, "target %u unnamed", id);
		if (e.name &&
		    strcmp(e.name, "service/fo.example.test/telecom/2001:db8:1::10") == 0) {
			found = true;
			CHECK(e.forced && gslb_sttl_down(e.eff), "fo telecom v6 not forced down");
		}
		if (e.name && strcmp(e.name, "service/vpn.example.test/telecom/198.51.100.10") == 0)
			CHECK(!e.forced && !gslb_sttl_down(e.eff), "vpn telecom affected");
	}
	CHECK(found, "target service/fo.example.test/telecom/2001:db8:1::10 missing");
	size_t ns, nm, nw;
	gslb_view_counts(v, &ns, &nm, &nw);
	CHECK(ns == N(services) && nm == 3 && nw == 1, "counts %zu %zu %zu", ns, nm, nw);
}

static void test_persist_real(const gslb_view_t *v)
{
	gslb_result_t a = ask(v, "p.example.test", DNS_TYPE_A, "192.0.2.1", "198.18.5.0/24");
	CHECK(a.ans.kind == GSLB_ANSWER_ADDRS && a.ecs_scope == 24, "persist /24: kind %d scope %u",
	      a.ans.kind, a.ecs_scope);
	/* same /24 via the resolver address (no ECS): same datacenter, scope 0 */
	gslb_result_t b = ask(v, "p.example.test", DNS_TYPE_A, "198.18.5.77", NULL);
	char sa[256];
	snprintf(sa, sizeof(sa), "%s", addrs_str(&a));
	CHECK(strcmp(sa, addrs_str(&b)) == 0 && b.ecs_scope == 0, "persist: '%s' vs '%s' scope %u",
	      sa, addrs_str(&b), b.ecs_scope);
	/* a /16 source: the key covers 16 bits only, scope 16 */
	gslb_result_t c = ask(v, "p.example.test", DNS_TYPE_A, "192.0.2.1", "198.18.0.0/16");
	CHECK(c.ecs_scope == 16, "persist /16 scope %u", c.ecs_scope);
	/* IPv6 /64 ECS: scope 56 */
	gslb_result_t d = ask(v, "p.example.test", DNS_TYPE_A, "192.0.2.1", "2001:db8:5:6::/64");
	CHECK(d.ecs_scope == 56, "persist v6 scope %u", d.ecs_scope);
	/* the two datacenters both get some of many /24s, and each answer is stable */
	int seen[2] = {0, 0};
	for (int i = 0; i < 64; i++) {
		char e[32];
		snprintf(e, sizeof(e), "100.%d.%d.0/24", 1 + i, i * 3);
		gslb_result_t x = ask(v, "p.example.test", DNS_TYPE_A, "192.0.2.1", e);
		gslb_result_t y = ask(v, "p.example.test", DNS_TYPE_A, "192.0.2.1", e);
		char xs[256];
		snprintf(xs, sizeof(xs), "%s", addrs_str(&x));
		CHECK(strcmp(xs, addrs_str(&y)) == 0, "persist unstable for %s", e);
		seen[strcmp(xs, "198.51.100.10") == 0 ? 0 : 1]++;
	}
	CHECK(seen[0] > 5 && seen[1] > 5, "persist spread %d/%d", seen[0], seen[1]);
}

static void test_whoami(const gslb_view_t *v)
{
	EXPECT_A(v, "whoami.example.test", "192.0.2.1", NULL, "192.0.2.1", 0);
	EXPECT_AAAA(v, "whoami.example.test", "192.0.2.1", NULL, "NODATA", 0);
	EXPECT_AAAA(v, "whoami.example.test", "2001:db8::53", "198.51.100.0/24", "2001:db8::53",
	            24);
	EXPECT_A(v, "whoami.example.test", "2001:db8::53", NULL, "NODATA", 0);
	EXPECT_A(v, "whoami.example.test", "::ffff:192.0.2.7", NULL, "192.0.2.7", 0);
	gslb_result_t r =
	    ask(v, "whoami.example.test", DNS_TYPE_TXT, "192.0.2.1", "198.51.100.0/24");
	static const char want[] = "\x12resolver 192.0.2.1\x13"
	                           "ecs 198.51.100.0/24";
	CHECK(r.ans.kind == GSLB_ANSWER_TXT && r.txt_len == sizeof(want) - 1 &&
	          memcmp(r.txt, want, sizeof(want) - 1) == 0,
	      "whoami TXT: kind %d len %u '%.*s'", r.ans.kind, r.txt_len, (int)r.txt_len, r.txt);
	CHECK(r.ecs_scope == 24 && r.ans.ttl == GSLB_VIEW_WHOAMI_TTL, "whoami TXT scope %u ttl %u",
	      r.ecs_scope, r.ans.ttl);
	r = ask(v, "whoami.example.test", DNS_TYPE_TXT, "2001:db8::53", NULL);
	static const char want2[] = "\x15resolver 2001:db8::53\x08"
	                            "ecs none";
	CHECK(r.ans.kind == GSLB_ANSWER_TXT && r.txt_len == sizeof(want2) - 1 &&
	          memcmp(r.txt, want2, sizeof(want2) - 1) == 0,
	      "whoami TXT v6: '%.*s'", (int)r.txt_len, r.txt);
	r = ask(v, "whoami.example.test", DNS_TYPE_MX, "192.0.2.1", NULL);
	CHECK(r.ans.kind == GSLB_ANSWER_NODATA, "whoami MX kind %d", r.ans.kind);
}

static void test_alldown(const gslb_view_t *v)
{
	EXPECT_A(v, "ad.example.test", "192.0.2.1", NULL, "SERVFAIL", 0);
	EXPECT_A(v, "fb.example.test", "192.0.2.1", NULL, "192.0.2.99", 0);
	EXPECT_AAAA(v, "fb.example.test", "192.0.2.1", NULL, "NODATA", 0);
	gslb_result_t r = ask(v, "cn.example.test", DNS_TYPE_A, "192.0.2.1", NULL);
	char cn[DNS_DNAME_MAXLEN * 4 + 2] = "";
	if (r.ans.kind == GSLB_ANSWER_CNAME && r.ans.cname)
		dname_to_str(r.ans.cname, cn, sizeof(cn));
	CHECK(r.ans.kind == GSLB_ANSWER_CNAME && strcmp(cn, "backup.example.net.") == 0,
	      "fallback cname: kind %d '%s'", r.ans.kind, cn);
}

static void test_family_skip(const gslb_view_t *v)
{
	/* first datacenter has only IPv6: A skips it (not down), AAAA answers it */
	EXPECT_A(v, "v6.example.test", "192.0.2.1", NULL, "192.0.2.50", 0);
	EXPECT_AAAA(v, "v6.example.test", "192.0.2.1", NULL, "2001:db8:2::1", 0);
	gslb_result_t r = ask(v, "v6.example.test", DNS_TYPE_TXT, "192.0.2.1", NULL);
	CHECK(r.ans.kind == GSLB_ANSWER_NODATA && r.ans.ttl == 45, "TXT at service: %d %u",
	      r.ans.kind, r.ans.ttl);
}

static void test_mmdb(const gslb_view_t *v)
{
	/* SH_TEL 58.32.0.0/13: location rule AS/CN/31 -> telecom; 58.40.0.0/13 is empty */
	EXPECT_A(v, "g.example.test", "192.0.2.1", "58.33.0.0/16", "198.51.100.10", 13);
	/* SH_A 116.224.0.0/13 and SH_B 116.232.0.0/13 classify the same: one /12 block */
	EXPECT_A(v, "g.example.test", "192.0.2.1", "116.225.0.0/16", "198.51.100.10", 12);
	/* BJ_EDU 202.112.0.0/16 has AS4538: the ASN rule beats location: [edu, unicom] */
	EXPECT_A(v, "g.example.test", "192.0.2.1", "202.112.5.0/24", "192.0.2.10", 16);
	/* ... and for AAAA edu has none: unicom has none: no candidate of the map has IPv6 */
	EXPECT_AAAA(v, "g.example.test", "192.0.2.1", "202.112.5.0/24", "NODATA", 16);
	/* BJ_UNI (Beijing, no rule): auto-distance puts unicom first */
	EXPECT_A(v, "g.example.test", "192.0.2.1", "123.112.0.0/16", "203.0.113.10 203.0.113.11",
	         12);
	/* FRA 5.1.0.0/16: nearest is eu */
	EXPECT_A(v, "g.example.test", "192.0.2.1", "5.1.2.0/24", "192.0.2.77", 16);
	/* Shanghai over IPv6 (240e::/20 SH_TEL) */
	EXPECT_AAAA(v, "g.example.test", "192.0.2.1", "240e:1::/32", "2001:db8:1::10", 20);
	/* no data: the map default [eu] */
	gslb_result_t r = ask(v, "g.example.test", DNS_TYPE_A, "192.0.2.1", "8.8.8.0/24");
	CHECK(r.ans.kind == GSLB_ANSWER_ADDRS && strcmp(addrs_str(&r), "192.0.2.77") == 0 &&
	          r.ecs_scope > 0 && r.ecs_scope <= 24,
	      "mmdb default: %s scope %u", addrs_str(&r), r.ecs_scope);
	/* resolver decides when there is no ECS */
	EXPECT_A(v, "g.example.test", "58.32.9.9", NULL, "198.51.100.10", 0);
}

static void test_explain(const gslb_view_t *v)
{
	char buf[8192];
	int ret = gslb_view_explain(v, "vpn.example.test", "8.8.8.8", "202.120.5.77/24", buf,
	                            sizeof(buf));
	CHECK(ret == 0, "explain: %d %s", ret, buf);
	if (getenv("TEST_VIEW_VERBOSE"))
		fputs(buf, stdout);
	static const char *want[] = {
	    "service vpn.example.test.: policy geo",
	    "client: 202.120.5.0/24, ECS subnet",
	    "map: isp, block 202.120.0.0/16 (scope 16)",
	    "map datacenters: edu telecom",
	    "decided by: nets test.yaml:11: inline cidr 202.120.0.0/16\n",
	    "answer: 192.0.2.10 (datacenter edu)\n",
	    "answer: 2001:db8:1::10 (datacenter telecom)\n",
	    "ttl: 30",
	    "scope: 16",
	};
	for (size_t i = 0; i < N(want); i++)
		CHECK(strstr(buf, want[i]) != NULL, "explain lacks '%s':\n%s", want[i], buf);

	ret = gslb_view_explain(v, "noecs.example.test", "58.33.1.1", "202.120.5.0/24", buf,
	                        sizeof(buf));
	CHECK(ret == 0 && strstr(buf, "ignore-ecs") && strstr(buf, "scope: 0"),
	      "explain ignore-ecs:\n%s", buf);
	ret = gslb_view_explain(v, "fo.example.test", "192.0.2.1", NULL, buf, sizeof(buf));
	CHECK(ret == 0 && strstr(buf, "answer: 203.0.113.10 203.0.113.11"), "explain fo:\n%s", buf);
	ret =
	    gslb_view_explain(v, "g.example.test", "192.0.2.1", "202.112.5.0/24", buf, sizeof(buf));
	CHECK(ret == 0 && strstr(buf, "AS4538") &&
	          strstr(buf, "classified by asn (rule 2, line 16)") &&
	          strstr(buf, "decided by: geoip gslb/mmdb/test-city.mmdb, network 202.112.0.0/16 "
	                      "+ gslb/mmdb/test-asn.mmdb, network 202.112.0.0/16\n"),
	      "explain geoip:\n%s", buf);
	/* a nets file line, and the default */
	ret = gslb_view_explain(v, "vpn.example.test", "8.8.8.8", "58.33.0.0/16", buf, sizeof(buf));
	CHECK(ret == 0 && strstr(buf, "decided by: nets gslb/view/telecom.txt:2: 58.32.0.0/13\n"),
	      "explain nets file:\n%s", buf);
	ret = gslb_view_explain(v, "vpn.example.test", "8.8.8.8", NULL, buf, sizeof(buf));
	CHECK(ret == 0 && strstr(buf, "decided by: the map default\n"), "explain default:\n%s",
	      buf);
	if (getenv("TEST_VIEW_VERBOSE"))
		fputs(buf, stdout);
	ret = gslb_view_explain(v, "whoami.example.test", "192.0.2.1", NULL, buf, sizeof(buf));
	CHECK(ret == 0 && strstr(buf, "TXT \"resolver 192.0.2.1\""), "explain whoami:\n%s", buf);

	/* errors */
	ret = gslb_view_explain(v, "nope.example.test", "192.0.2.1", NULL, buf, sizeof(buf));
	CHECK(ret == STEER_ENOENT && strstr(buf, "not a GSLB"), "explain nope: %d %s", ret, buf);
	ret = gslb_view_explain(v, "vpn.example.test", "192.0.2.300", NULL, buf, sizeof(buf));
	CHECK(ret == STEER_EINVAL && strstr(buf, "bad client address"), "bad ip: %d %s", ret, buf);
	ret = gslb_view_explain(v, "vpn.example.test", "192.0.2.1", "1.2.3.0/33", buf, sizeof(buf));
	CHECK(ret == STEER_EINVAL && strstr(buf, "bad ECS"), "bad ecs: %d %s", ret, buf);
	/* a tiny buffer is truncated, never overrun */
	char small[40];
	ret = gslb_view_explain(v, "vpn.example.test", "8.8.8.8", NULL, small, sizeof(small));
	CHECK(ret == 0 && strlen(small) < sizeof(small), "small buffer");
}

/* A build that must fail with @p want in the message. */
static void expect_build_error(const conf_t *c, const char *want, const char *what)
{
	gslb_view_t *v = NULL;
	char err[512] = "";
	int ret = gslb_view_build(c, NULL, &v, NULL, err, sizeof(err));
	CHECK(ret < 0 && v == NULL && strstr(err, want), "%s: ret %d err '%s' want '%s'", what, ret,
	      err, want);
	gslb_view_free(v);
}

/* A rule that needs data no configured database has is an error, not a silent no-match. */
static void test_geoip_data_errors(void)
{
	conf_t c;
	init_conf(&c);
	maps[2].geoip_asn_database = NULL;
	expect_build_error(&c,
	                   "test.yaml:16: map world: geoip rule with 'asn', but "
	                   "gslb/mmdb/test-city.mmdb (GeoIP2-City) has no ASN data",
	                   "ASN rule without an ASN database");
	init_conf(&c);
	maps[2].geoip_asn_database = "gslb/mmdb/test-city.mmdb";
	expect_build_error(&c,
	                   "test.yaml:13: map world: geoip.asn-database gslb/mmdb/test-city.mmdb "
	                   "(GeoIP2-City) has no ASN data",
	                   "asn-database without ASNs");
	init_conf(&c);
	maps[2].geoip_database = "gslb/mmdb/test-asn.mmdb";
	expect_build_error(&c,
	                   "test.yaml:13: map world: geoip.database gslb/mmdb/test-asn.mmdb "
	                   "(GeoLite2-ASN) has no location data",
	                   "pair without a location database");
	init_conf(&c);
	maps[2].geoip_database = "gslb/mmdb/test-asn.mmdb";
	maps[2].geoip_asn_database = NULL;
	expect_build_error(&c,
	                   "test.yaml:15: map world: geoip rule with 'match' needs location data, "
	                   "but gslb/mmdb/test-asn.mmdb (GeoLite2-ASN) has none",
	                   "location rule on an ASN database");
	init_conf(&c);
	maps[2].geoip_database = "gslb/mmdb/test-asn.mmdb";
	maps[2].geoip_asn_database = NULL;
	maps[2].n_rules = 0;
	expect_build_error(&c, "test.yaml:13: map world: geoip auto-distance needs location data",
	                   "auto-distance on an ASN database");
	init_conf(&c);
	maps[2].geoip_asn_database = "gslb/mmdb/nope.mmdb";
	expect_build_error(&c, "test.yaml:13: map world: gslb/mmdb/nope.mmdb: No such file",
	                   "missing asn-database");
	init_conf(&c);
	/* an ASN database alone with only ASN rules is fine */
	maps[2].geoip_database = "gslb/mmdb/test-asn.mmdb";
	maps[2].geoip_asn_database = NULL;
	maps[2].auto_distance = false;
	maps[2].rules = &geo_rules[1];
	maps[2].n_rules = 1;
	gslb_view_t *v = build(&c);
	if (v)
		EXPECT_A(v, "g.example.test", "192.0.2.1", "202.112.5.0/24", "192.0.2.10", 16);
	gslb_view_free(v);
}

static void test_build_errors(void)
{
	conf_t c;
	init_conf(&c);
	services[2].policy = "nope";
	expect_build_error(&c, "test.yaml:40: service fo.example.test: unknown policy 'nope'",
	                   "unknown policy");
	init_conf(&c);
	services[2].all_down = "maybe";
	expect_build_error(&c, "test.yaml:40: service fo.example.test: unknown all-down 'maybe'",
	                   "unknown all-down");
	init_conf(&c);
	svc_fo_dcs[1].policy = "geo";
	expect_build_error(&c,
	                   "test.yaml:42: service fo.example.test: datacenter unicom: policy "
	                   "'geo' cannot choose addresses",
	                   "geo inside a datacenter");
	init_conf(&c);
	isp_nets[0].file = "gslb/view/bad.txt";
	expect_build_error(&c, "test.yaml:10: map isp: gslb/view/bad.txt:2:", "bad nets line");
	init_conf(&c);
	isp_nets[0].file = "gslb/view/missing.txt";
	expect_build_error(
	    &c, "test.yaml:10: map isp: nets file gslb/view/missing.txt:", "missing nets file");
	init_conf(&c);
	maps[2].geoip_database = "gslb/mmdb/not-an-mmdb.mmdb";
	expect_build_error(&c, "test.yaml:13: map world:", "bad mmdb");
	init_conf(&c);
	geo_rules[0].match = "XX/CN";
	expect_build_error(&c, "test.yaml:15: map world: geoip rule:", "bad rule");
	test_geoip_data_errors();
	init_conf(&c);
	services[0].map = SIZE_MAX;
	expect_build_error(&c, "test.yaml:20: service vpn.example.test.: policy geo needs a map",
	                   "geo without map");
	init_conf(&c);
	services[3].name = "vpn.example.test";
	expect_build_error(&c, "test.yaml:50: service vpn.example.test: name defined twice",
	                   "duplicate name");
	init_conf(&c);
	whoami[0] = "FO.example.test.";
	expect_build_error(&c, "whoami FO.example.test.: name already used", "whoami duplicate");
	whoami[0] = "whoami.example.test";
	init_conf(&c);
	overrides[0].pattern = "bad pattern";
	expect_build_error(&c, "test.yaml:90: override:", "bad override");
	overrides[0].pattern = "service/fo.example.test/telecom/*";
	init_conf(&c);
	c.state_file = "gslb/view/bad.state";
	expect_build_error(&c, "gslb/view/bad.state:1:", "bad state file");
	init_conf(&c);
	a_edu[0].weight = 70000;
	expect_build_error(&c, "test.yaml:23: service vpn.example.test.: address weight 70000",
	                   "weight");
	a_edu[0].weight = 1;
}

static void test_state_file(void)
{
	conf_t c;
	init_conf(&c);
	/* missing state file: fine */
	c.state_file = "gslb/view/no-such.state";
	gslb_view_t *v = build(&c);
	if (v)
		EXPECT_A(v, "state.example.test", "192.0.2.1", NULL, "198.51.100.10", 0);
	gslb_view_free(v);
	c.state_file = "gslb/view/overrides.state";
	v = build(&c);
	if (v)
		EXPECT_A(v, "state.example.test", "192.0.2.1", NULL, "203.0.113.10 203.0.113.11",
		         0);
	gslb_view_free(v);
}

static void test_private_ecs_used(void)
{
	conf_t c;
	init_conf(&c);
	maps[0].ecs_private_is_absent = false;
	gslb_view_t *v = build(&c);
	/* a private ECS address is now a client like any other: default space 8.0.0.0/5 */
	if (v)
		EXPECT_A(v, "vpn.example.test", "202.120.1.1", "10.1.2.0/24",
		         "203.0.113.10 203.0.113.11", 5);
	gslb_view_free(v);
	maps[0].ecs_private_is_absent = true;
}

/*
 * An admin override at run time: a view sharing everything but the health table answers with
 * the new states, the old one keeps its own, and either can be freed first.
 */
static void test_health_swap(void)
{
	conf_t c;
	init_conf(&c);
	gslb_view_t *v = build(&c);
	if (!v)
		return;
	const gslb_health_t *h = gslb_view_health(v);
	/* Drop the config's override (telecom back up), then force unicom down. */
	gslb_health_t *h2 = gslb_health_dup(h, h->count);
	gslb_overrides_t ov;
	char err[256];
	gslb_overrides_init(&ov);
	CHECK(gslb_overrides_set(&ov, "service/fo.example.test/unicom/*", true, 0, err,
	                         sizeof(err)) == 0,
	      "override: %s", err);
	uint32_t matched = 0;
	gslb_health_apply_overrides(h2, &ov, &matched);
	gslb_overrides_deinit(&ov);
	CHECK(matched == 2, "unicom rule matched %u", matched);
	gslb_view_t *v2 = gslb_view_with_health(v, h2);
	CHECK(gslb_view_health(v2) == h2, "new view reads the new table");
	EXPECT_A(v2, "fo.example.test", "192.0.2.1", NULL, "198.51.100.10", 0);
	EXPECT_A(v, "fo.example.test", "192.0.2.1", NULL, "203.0.113.10 203.0.113.11", 0);
	/* A third view from the second; then free the original first: the shared parts stay. */
	const gslb_health_t *hv2 = gslb_view_health(v2);
	gslb_view_t *v3 = gslb_view_with_health(v2, gslb_health_dup(hv2, hv2->count));
	gslb_view_free(v);
	EXPECT_A(v2, "fo.example.test", "192.0.2.1", NULL, "198.51.100.10", 0);
	EXPECT_A(v3, "fo.example.test", "192.0.2.1", NULL, "198.51.100.10", 0);
	EXPECT_A(v3, "vpn.example.test", "::1", "240e:1::/48", "198.51.100.10", 20);
	char *text = malloc(8192);
	CHECK(text && gslb_view_explain(v3, "fo.example.test", "192.0.2.1", NULL, text, 8192) == 0,
	      "explain on a derived view");
	free(text);
	gslb_view_free(v2);
	EXPECT_A(v3, "fo.example.test", "192.0.2.1", NULL, "198.51.100.10", 0);
	gslb_view_free(v3);
}

/* ecs_ignored: set when ECS was present but the decision used the resolver. */
static void test_ecs_ignored_flag(const gslb_view_t *v)
{
	gslb_result_t r = ask(v, "vpn.example.test", DNS_TYPE_A, "202.120.1.1", "10.1.2.0/24");
	CHECK(r.ecs_ignored, "private ECS not flagged as ignored");
	r = ask(v, "vpn.example.test", DNS_TYPE_A, "202.120.1.1", "240e:1::/48");
	CHECK(!r.ecs_ignored, "used ECS flagged as ignored");
	r = ask(v, "vpn.example.test", DNS_TYPE_A, "202.120.1.1", NULL);
	CHECK(!r.ecs_ignored, "no ECS flagged as ignored");
	r = ask(v, "whoami.example.test", DNS_TYPE_TXT, "202.120.1.1", "10.1.2.0/24");
	CHECK(!r.ecs_ignored, "whoami flagged as ignored");
}

/* ---- a map on two databases (City + ASN) against a brute-force reference ----
 *
 * The reference looks every address up in both databases, merges the records, classifies
 * them by the same rules and takes the map default when nothing matches. Its scope for an
 * address x is the shortest s such that the decision is the same on all of x/s, found by
 * evaluating the decision at every point of x/s where either database's block changes.
 * The view must report that block and that datacenter list (through explain, which prints
 * the map block and the list the query path used).
 */

#define PAIR_CITY "gslb/mmdb/test-pair-rand-city.mmdb"
#define PAIR_ASN  "gslb/mmdb/test-pair-rand-asn.mmdb"

static uint32_t pr_asn_tel[] = {4134}, pr_asn_tel_edu[] = {4812, 9808}, pr_asn_uni[] = {4837};
static size_t l_uni_tel[] = {DC_UNICOM, DC_TELECOM}, l_edu[] = {DC_EDU},
              l_edu_eu[] = {DC_EDU, DC_EU}, l_tel_edu[] = {DC_TELECOM, DC_EDU},
              l_uni[] = {DC_UNICOM}, l_eu_uni[] = {DC_EU, DC_UNICOM};
static conf_geoip_rule_t pr_rules[7];
static conf_map_t pr_map;
static conf_service_dc_t pr_sdcs[4];
static conf_service_t pr_svc;

static void init_pair_conf(conf_t *c)
{
	memset(c, 0, sizeof(*c));
	c->path = "pair.yaml";
	c->datacenters = dcs;
	c->n_datacenters = DC_N;
	pr_rules[0] = (conf_geoip_rule_t){
	    .asn = pr_asn_tel, .n_asn = 1, .datacenters = DCLIST(l_tel), .line = 10};
	pr_rules[1] =
	    (conf_geoip_rule_t){.match = "AS/CN/11", .datacenters = DCLIST(l_uni_tel), .line = 11};
	pr_rules[2] = (conf_geoip_rule_t){
	    .asn = pr_asn_tel_edu, .n_asn = 2, .datacenters = DCLIST(l_tel_edu), .line = 12};
	pr_rules[3] =
	    (conf_geoip_rule_t){.match = "AS/CN/44", .datacenters = DCLIST(l_edu), .line = 13};
	pr_rules[4] = (conf_geoip_rule_t){
	    .asn = pr_asn_uni, .n_asn = 1, .datacenters = DCLIST(l_uni), .line = 14};
	pr_rules[5] = (conf_geoip_rule_t){.match = "EU", .datacenters = DCLIST(l_eu), .line = 15};
	pr_rules[6] =
	    (conf_geoip_rule_t){.match = "NA/US/CA", .datacenters = DCLIST(l_edu_eu), .line = 16};
	pr_map = (conf_map_t){.name = "pair",
	                      .geoip_database = PAIR_CITY,
	                      .geoip_asn_database = PAIR_ASN,
	                      .auto_distance = true,
	                      .rules = pr_rules,
	                      .n_rules = N(pr_rules),
	                      .default_dcs = DCLIST(l_eu_uni),
	                      .line = 9};
	c->maps = &pr_map;
	c->n_maps = 1;
	pr_sdcs[0] = sdc(DC_TELECOM, a_telecom, 2, 21);
	pr_sdcs[1] = sdc(DC_UNICOM, a_unicom, 2, 22);
	pr_sdcs[2] = sdc(DC_EDU, a_edu, 1, 23);
	pr_sdcs[3] = sdc(DC_EU, a_eu, 1, 24);
	pr_svc = (conf_service_t){.name = "pair.example.test",
	                          .policy = "geo",
	                          .map = 0,
	                          .ttl = 30,
	                          .dcs = pr_sdcs,
	                          .n_dcs = 4,
	                          .line = 20};
	c->services = &pr_svc;
	c->n_services = 1;
}

typedef struct {
	steer_prefix_t *v;
	size_t n, cap;
} blocks_t;

static int collect_block(const steer_prefix_t *p, const gslb_geoip_record_t *rec, void *ctx)
{
	(void)rec;
	blocks_t *b = ctx;
	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 1024;
		b->v = realloc(b->v, b->cap * sizeof(*b->v));
		if (!b->v)
			abort();
	}
	b->v[b->n++] = *p;
	return 0;
}

typedef struct {
	gslb_geoip_db_t *loc, *asn;
	gslb_geoip_rules_t *rules;
	gslb_geo_coords_t coords[DC_N];
	blocks_t blocks; /* every block of both databases */
	/* per family (0 IPv4, 1 IPv6), sorted: where a block starts or the address after it */
	uint8_t (*points[2])[16];
	size_t n_points[2];
	char (*memo[2])[64]; /* the decision at each point, "" until computed */
} ref_t;

/* The reference decision at one address: the datacenter names, space-separated. */
static void ref_decide(const ref_t *r, int family, const uint8_t *addr, char *out, size_t len)
{
	uint16_t list[DC_N];
	size_t n = 0;
	static const uint8_t teredo[4] = {0x20, 0x01, 0, 0};
	/* the walk skips the writer's links to IPv4 there; a lookup would follow them */
	bool alias = family == AF_INET6 &&
	             (memcmp(addr, teredo, 4) == 0 || (addr[0] == 0x20 && addr[1] == 0x02));
	gslb_geoip_record_t l, a, m;
	unsigned plen;
	int rl = alias ? STEER_ENOENT : gslb_geoip_lookup(r->loc, family, addr, &l, &plen);
	int ra = alias ? STEER_ENOENT : gslb_geoip_lookup(r->asn, family, addr, &a, &plen);
	if (rl == 0 || ra == 0) {
		gslb_geoip_record_merge(rl == 0 ? &l : NULL, ra == 0 ? &a : NULL, &m);
		n = DC_N;
		if (gslb_geoip_classify(r->rules, &m, r->coords, DC_N, list, &n, NULL) < 0)
			n = 0;
	}
	if (n == 0) {
		for (size_t i = 0; i < N(l_eu_uni); i++)
			list[i] = (uint16_t)l_eu_uni[i];
		n = N(l_eu_uni);
	}
	size_t pos = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n && pos < len; i++)
		pos += (size_t)snprintf(out + pos, len - pos, " %s", dcs[list[i]].name);
}

static void addr_last(int family, const uint8_t *base, unsigned plen, uint8_t *out)
{
	unsigned bits = family == AF_INET ? 32 : 128;
	memcpy(out, base, 16);
	for (unsigned b = plen; b < bits; b++)
		out[b / 8] |= (uint8_t)(0x80u >> (b % 8));
}

/* +1 in the family's width; false on wrap-around. */
static bool addr_next(int family, uint8_t *a)
{
	for (int i = (family == AF_INET ? 4 : 16) - 1; i >= 0; i--)
		if (++a[i] != 0)
			return true;
	return false;
}

static bool in_prefix(const uint8_t *base, unsigned plen, const uint8_t *a)
{
	if (memcmp(base, a, plen / 8) != 0)
		return false;
	return plen % 8 == 0 || ((base[plen / 8] ^ a[plen / 8]) & (0xff00u >> (plen % 8))) == 0;
}

static int addr_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 16);
}

/* The points where the decision can change: both ends of every database block, and the
 * edges of the alias ranges the walk skips. */
static void ref_points(ref_t *r)
{
	static const steer_prefix_t extra[] = {
	    {.family = AF_INET6, .len = 32, .addr = {0x20, 0x01}},
	    {.family = AF_INET6, .len = 16, .addr = {0x20, 0x02}},
	};
	for (int f = 0; f < 2; f++) {
		r->points[f] = calloc(2 * (r->blocks.n + N(extra)) + 1, 16);
		if (!r->points[f])
			abort();
	}
	for (size_t i = 0; i < r->blocks.n + N(extra); i++) {
		const steer_prefix_t *p =
		    i < r->blocks.n ? &r->blocks.v[i] : &extra[i - r->blocks.n];
		int f = p->family == AF_INET ? 0 : 1;
		memcpy(r->points[f][r->n_points[f]++], p->addr, 16);
		uint8_t *next = r->points[f][r->n_points[f]];
		addr_last(p->family, p->addr, p->len, next);
		if (addr_next(p->family, next))
			r->n_points[f]++;
	}
	for (int f = 0; f < 2; f++) {
		qsort(r->points[f], r->n_points[f], 16, addr_cmp);
		r->memo[f] = calloc(r->n_points[f] + 1, sizeof(*r->memo[f]));
		if (!r->memo[f])
			abort();
	}
}

/* True when the decision is @p want everywhere in @p x/@p s. */
static bool ref_constant(ref_t *r, int family, const uint8_t *x, unsigned s, const char *want)
{
	uint8_t base[16] = {0};
	memcpy(base, x, family == AF_INET ? 4 : 16);
	for (unsigned b = s; b < 128; b++)
		base[b / 8] &= (uint8_t) ~(0x80u >> (b % 8));
	char got[128];
	ref_decide(r, family, base, got, sizeof(got));
	if (strcmp(got, want) != 0)
		return false;
	int f = family == AF_INET ? 0 : 1;
	size_t lo = 0, hi = r->n_points[f]; /* first point >= base */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (memcmp(r->points[f][mid], base, 16) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < r->n_points[f] && in_prefix(base, s, r->points[f][i]); i++) {
		char *d = r->memo[f][i];
		if (d[0] == '\0')
			ref_decide(r, family, r->points[f][i], d, sizeof(*r->memo[f]));
		if (strcmp(d, want) != 0)
			return false;
	}
	return true;
}

/* The reference scope: the shortest prefix around @p x on which the decision is constant. */
static unsigned ref_scope(ref_t *r, int family, const uint8_t *x, const char *want)
{
	unsigned lo = 0, hi = family == AF_INET ? 32 : 128; /* constant at hi, always */
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (ref_constant(r, family, x, mid, want))
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Compare the view and the reference at @p x; false on a mismatch. */
static bool pair_check_one(const gslb_view_t *v, ref_t *r, int family, const uint8_t *x, char *buf,
                           size_t len)
{
	char a[INET6_ADDRSTRLEN], ecs[INET6_ADDRSTRLEN + 8];
	inet_ntop(family, x, a, sizeof(a));
	snprintf(ecs, sizeof(ecs), "%s/%u", a, family == AF_INET ? 32 : 128);
	int ret = gslb_view_explain(v, "pair.example.test", "192.0.2.1", ecs, buf, len);
	char want[128];
	ref_decide(r, family, x, want, sizeof(want));
	unsigned want_scope = ref_scope(r, family, x, want);
	const char *blk = strstr(buf, ", block ");
	const char *dcl = strstr(buf, "map datacenters:");
	unsigned got_scope = 999;
	const char *slash = blk ? strchr(blk, '/') : NULL;
	if (slash)
		got_scope = (unsigned)strtoul(slash + 1, NULL, 10);
	char got[128] = "";
	if (dcl) {
		const char *eol = strchr(dcl, '\n');
		size_t n = eol ? (size_t)(eol - dcl) : strlen(dcl);
		n -= strlen("map datacenters:");
		if (n >= sizeof(got))
			n = sizeof(got) - 1;
		memcpy(got, dcl + strlen("map datacenters:"), n);
		got[n] = '\0';
	}
	bool ok = ret == 0 && strcmp(got, want) == 0 && got_scope == want_scope;
	CHECK(ok, "pair map at %s: got [%s] /%u, want [%s] /%u", ecs, got, got_scope, want,
	      want_scope);
	return ok;
}

static bool ref_init(ref_t *r)
{
	char err[256] = "";
	memset(r, 0, sizeof(*r));
	if (gslb_geoip_open(PAIR_CITY, &r->loc, err, sizeof(err)) != 0 ||
	    gslb_geoip_open(PAIR_ASN, &r->asn, err, sizeof(err)) != 0 ||
	    gslb_geoip_walk(r->loc, collect_block, &r->blocks, NULL, err, sizeof(err)) != 0 ||
	    gslb_geoip_walk(r->asn, collect_block, &r->blocks, NULL, err, sizeof(err)) != 0) {
		CHECK(false, "reference: %s", err);
		return false;
	}
	ref_points(r);
	gslb_geoip_rule_def_t defs[N(pr_rules)];
	static uint16_t lists[N(pr_rules)][DC_N];
	for (size_t i = 0; i < N(pr_rules); i++) {
		for (size_t j = 0; j < pr_rules[i].datacenters.n; j++)
			lists[i][j] = (uint16_t)pr_rules[i].datacenters.dc[j];
		defs[i] = (gslb_geoip_rule_def_t){.match = pr_rules[i].match,
		                                  .asns = pr_rules[i].asn,
		                                  .n_asns = pr_rules[i].n_asn,
		                                  .dcs = lists[i],
		                                  .n_dcs = pr_rules[i].datacenters.n};
	}
	for (size_t i = 0; i < DC_N; i++)
		r->coords[i] = (gslb_geo_coords_t){
		    .valid = dcs[i].has_coords, .lat = dcs[i].lat, .lon = dcs[i].lon};
	gslb_geoip_opts_t opts = {.auto_distance = true};
	int ret =
	    gslb_geoip_rules_new(defs, N(defs), DC_N, &opts, &r->rules, NULL, err, sizeof(err));
	CHECK(ret == 0, "reference rules: %s", err);
	return ret == 0;
}

static void ref_free(ref_t *r)
{
	gslb_geoip_close(r->loc);
	gslb_geoip_close(r->asn);
	gslb_geoip_rules_free(r->rules);
	free(r->blocks.v);
	for (int f = 0; f < 2; f++) {
		free(r->points[f]);
		free(r->memo[f]);
	}
}

static void test_pair_map_brute(void)
{
	conf_t c;
	init_pair_conf(&c);
	gslb_view_t *v = build(&c);
	ref_t r;
	if (!v || !ref_init(&r)) {
		if (v)
			ref_free(&r);
		gslb_view_free(v);
		return;
	}
	char *buf = malloc(8192);
	size_t probes = 0, bad = 0;
	/* both ends of every block, the address after it, and random addresses inside */
	uint64_t x = 0x2545F4914F6CDD1Dull;
	for (size_t i = 0; buf && i < r.blocks.n && bad < 10; i += 1 + (x % 3)) {
		const steer_prefix_t *p = &r.blocks.v[i];
		uint8_t pts[4][16];
		memcpy(pts[0], p->addr, 16);
		addr_last(p->family, p->addr, p->len, pts[1]);
		memcpy(pts[2], pts[1], 16);
		bool next = addr_next(p->family, pts[2]);
		memcpy(pts[3], p->addr, 16);
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		for (unsigned b = p->len; b < (p->family == AF_INET ? 32u : 128u); b++)
			if ((x >> (b % 64)) & 1)
				pts[3][b / 8] |= (uint8_t)(0x80u >> (b % 8));
		for (int k = 0; k < 4; k++) {
			if (k == 2 && !next)
				continue;
			probes++;
			if (!pair_check_one(v, &r, p->family, pts[k], buf, 8192))
				bad++;
		}
	}
	if (getenv("TEST_VIEW_VERBOSE"))
		printf("pair map: %zu blocks in the two databases, %zu probes, %zu bad\n",
		       r.blocks.n, probes, bad);
	CHECK(probes > 1000, "only %zu probes", probes);
	free(buf);
	ref_free(&r);
	gslb_view_free(v);
}

/* The hand-made pair: the example of the docs, scopes included. */
static void test_pair_map_small(void)
{
	conf_t c;
	init_pair_conf(&c);
	pr_map.geoip_database = "gslb/mmdb/test-pair-city.mmdb";
	pr_map.geoip_asn_database = "gslb/mmdb/test-pair-asn.mmdb";
	gslb_view_t *v = build(&c);
	if (!v)
		return;
	/* City 1.0.0.0/16 Shanghai; ASN 1.0.0.0/24 AS4134 (rule: telecom), 1.0.1.0/24 AS4812
	 * (telecom, edu); the rest of the /16: Shanghai has no rule, auto-distance: telecom,
	 * unicom, eu. Scopes: the /24s, then the rest as the widest blocks: 1.0.2.0/23 ... */
	EXPECT_A(v, "pair.example.test", "192.0.2.1", "1.0.0.0/24", "198.51.100.10", 24);
	EXPECT_A(v, "pair.example.test", "192.0.2.1", "1.0.1.0/24", "198.51.100.10", 24);
	EXPECT_A(v, "pair.example.test", "192.0.2.1", "1.0.2.0/24", "198.51.100.10", 23);
	EXPECT_A(v, "pair.example.test", "192.0.2.1", "1.0.128.0/24", "198.51.100.10", 17);
	/* ASN 14.0.0.0/8 AS4837 (rule: unicom) contains City 14.1.0.0/16 Beijing (ASN wins) */
	EXPECT_A(v, "pair.example.test", "192.0.2.1", "14.1.2.0/24", "203.0.113.10 203.0.113.11",
	         8);
	/* ASN only: 36.0.0.0/12 AS4538, no rule and no location: the default (eu), merged
	 * with the empty space around it into 32.0.0.0/4 */
	EXPECT_A(v, "pair.example.test", "192.0.2.1", "36.1.0.0/24", "192.0.2.77", 4);
	/* City only: Frankfurt, rule EU */
	EXPECT_A(v, "pair.example.test", "192.0.2.1", "5.1.2.0/24", "192.0.2.77", 16);
	/* IPv6: 240e::/20 Shanghai with 240e::/24 AS4134 and 240e:100::/24 AS4812 */
	EXPECT_AAAA(v, "pair.example.test", "192.0.2.1", "240e:0:1::/48", "2001:db8:1::10", 24);
	EXPECT_AAAA(v, "pair.example.test", "192.0.2.1", "240e:200::/48", "2001:db8:1::10", 23);
	char buf[4096];
	int ret =
	    gslb_view_explain(v, "pair.example.test", "192.0.2.1", "1.0.1.0/24", buf, sizeof(buf));
	CHECK(ret == 0 &&
	          strstr(buf, "geoip: /16 AS/CN/31/Shanghai (GeoLite2-City); /24 AS4812 "
	                      "(GeoLite2-ASN), classified by asn (rule 3, line 12)") &&
	          strstr(buf, "map datacenters: telecom edu"),
	      "explain pair:\n%s", buf);
	ret =
	    gslb_view_explain(v, "pair.example.test", "192.0.2.1", "1.0.9.0/24", buf, sizeof(buf));
	CHECK(ret == 0 && strstr(buf, "geoip: /16 AS/CN/31/Shanghai (GeoLite2-City); no ASN "
	                              "(GeoLite2-ASN), classified by distance"),
	      "explain pair, no ASN:\n%s", buf);
	ret =
	    gslb_view_explain(v, "pair.example.test", "192.0.2.1", "36.1.0.0/24", buf, sizeof(buf));
	CHECK(ret == 0 &&
	          strstr(buf, "geoip: no location data (GeoLite2-City); /12 AS4538 "
	                      "(GeoLite2-ASN), classified by none") &&
	          strstr(buf, "the map default"),
	      "explain pair, ASN only:\n%s", buf);
	if (getenv("TEST_VIEW_VERBOSE"))
		fputs(buf, stdout);
	gslb_view_free(v);
}

static void test_empty(void)
{
	conf_t c;
	memset(&c, 0, sizeof(c));
	gslb_view_t *v = build(&c);
	if (!v)
		return;
	uint8_t wire[DNS_DNAME_MAXLEN];
	CHECK(dname_from_str("vpn.example.test", wire) > 0, "dname");
	CHECK(gslb_view_find(v, wire) == NULL, "empty view finds a name");
	size_t ns, nm, nw;
	gslb_view_counts(v, &ns, &nm, &nw);
	CHECK(ns == 0 && nm == 0 && nw == 0, "empty counts");
	CHECK(gslb_view_health(v)->count == 0, "empty health");
	gslb_view_free(v);
}

/* The exported targets are the health table's, and their conf indices lead back to the
 * address each one stands for (what the monitor planner relies on). */
static void test_targets(const gslb_view_t *v, const conf_t *c)
{
	size_t n;
	const gslb_target_t *t = gslb_view_targets(v, &n);
	const gslb_health_t *h = gslb_view_health(v);
	CHECK(n == h->count && n > 0, "targets %zu, health %u", n, (unsigned)h->count);
	size_t bad = 0;
	for (size_t i = 0; i < n; i++) {
		gslb_health_entry_t e;
		const conf_service_t *cs = &c->services[t[i].service];
		const conf_service_dc_t *cd = &cs->dcs[t[i].service_dc];
		const conf_address_t *ca = &cd->addresses[t[i].address];
		size_t mon = cd->monitor != CONF_MONITOR_NONE ? cd->monitor : cs->monitor;
		if (t[i].id != i || gslb_health_entry(h, (uint32_t)i, &e) != 0 ||
		    strcmp(e.name, t[i].name) != 0 || t[i].family != ca->family ||
		    memcmp(t[i].addr, ca->addr, ca->family == AF_INET ? 4 : 16) != 0 ||
		    t[i].datacenter != cd->datacenter || t[i].monitor != mon)
			bad++;
	}
	CHECK(bad == 0, "%zu targets disagree with the health table or the conf", bad);
	/* names: the first service, ids and names as the builder numbered them */
	CHECK(strncmp(t[0].name, "service/", 8) == 0 && t[0].service == 0 && t[0].service_dc == 0 &&
	          t[0].address == 0,
	      "first target %s", t[0].name);
}

static void test_name_types(const gslb_view_t *v)
{
	uint8_t wire[DNS_DNAME_MAXLEN];
	const gslb_name_t *svc =
	    dname_from_str("vpn.example.test", wire) > 0 ? gslb_view_find(v, wire) : NULL;
	const gslb_name_t *who =
	    dname_from_str("whoami.example.test", wire) > 0 ? gslb_view_find(v, wire) : NULL;
	CHECK(svc && who, "names found");
	if (!svc || !who)
		return;
	CHECK(gslb_view_name_answers(svc, DNS_TYPE_A) &&
	          gslb_view_name_answers(svc, DNS_TYPE_AAAA) &&
	          gslb_view_name_answers(svc, DNS_TYPE_ANY),
	      "a service answers A, AAAA, ANY");
	CHECK(!gslb_view_name_answers(svc, DNS_TYPE_MX) &&
	          !gslb_view_name_answers(svc, DNS_TYPE_TXT),
	      "a service leaves MX and TXT to the zone");
	CHECK(gslb_view_name_answers(who, DNS_TYPE_TXT) &&
	          !gslb_view_name_answers(who, DNS_TYPE_MX),
	      "whoami answers TXT, not MX");
	size_t n = gslb_view_name_count(v), n_svc = 0, whoamis = 0;
	for (size_t i = 0; i < n; i++) {
		gslb_name_info_t gi;
		gslb_view_name_info(v, i, &gi);
		if (gi.whoami)
			whoamis++;
		else if (gi.line > 0 && gslb_view_find(v, gi.wire))
			n_svc++;
	}
	size_t ns, nm, nw;
	gslb_view_counts(v, &ns, &nm, &nw);
	CHECK(n_svc == ns && whoamis == nw, "name info: %zu services with lines, %zu whoami", n_svc,
	      whoamis);
}

/* The decision log's sample hook: every Nth service decision, with what the query saw. */
static gslb_decision_t recorded[8];
static unsigned n_recorded;

static void record_decision(void *arg, const gslb_decision_t *d)
{
	(*(unsigned *)arg)++;
	if (n_recorded < STEER_ARRAY_LEN(recorded))
		recorded[n_recorded++] = *d;
}

static void test_decision_sampler(const gslb_view_t *v)
{
	unsigned calls = 0;
	n_recorded = 0;
	qs.decisions =
	    (gslb_decision_sampler_t){.record = record_decision, .arg = &calls, .sample = 3};
	for (int i = 0; i < 7; i++)
		(void)ask(v, "vpn.example.test", DNS_TYPE_A, "8.8.8.8", "58.32.1.0/24");
	CHECK(calls == 3, "sample 3: decisions 1, 4 and 7 recorded, got %u", calls);
	(void)ask(v, "whoami.example.test", DNS_TYPE_A, "8.8.8.8", NULL);
	CHECK(calls == 3, "whoami answers are not GSLB decisions for the log");
	qs.decisions.sample = 1;
	qs.decisions.countdown = 0;
	(void)ask(v, "vpn.example.test", DNS_TYPE_AAAA, "192.0.2.77", NULL);
	CHECK(calls == 4 && n_recorded == 4, "sample 1 records every decision");
	const gslb_decision_t *d = &recorded[0];
	uint8_t wire[DNS_DNAME_MAXLEN];
	CHECK(dname_from_str("vpn.example.test", wire) > 0 && dname_equal(d->name, wire), "name");
	CHECK(d->qtype == DNS_TYPE_A && d->time.tv_sec > 0, "qtype and time");
	steer_sockaddr_t res = sock("8.8.8.8");
	CHECK(d->resolver.sin.sin_addr.s_addr == res.sin.sin_addr.s_addr, "resolver address");
	CHECK(d->has_ecs && d->ecs_family == DNS_ECS_FAMILY_IPV4 && d->ecs_source_len == 24 &&
	          d->ecs_addr[0] == 58 && d->ecs_addr[1] == 32 && d->ecs_addr[2] == 1,
	      "ECS subnet");
	CHECK(d->kind == GSLB_ANSWER_ADDRS && d->count == 1 && d->family == AF_INET &&
	          memcmp(d->addrs[0], "\xc6\x33\x64\x0a", 4) == 0,
	      "answered 198.51.100.10");
	CHECK(d->ecs_scope == 13 && d->ttl > 0, "scope %u of the /13 block", d->ecs_scope);
	const gslb_decision_t *six = &recorded[3];
	CHECK(six->qtype == DNS_TYPE_AAAA && !six->has_ecs && six->family == AF_INET6 &&
	          six->kind == GSLB_ANSWER_ADDRS && six->count >= 1,
	      "an AAAA decision without ECS");
	qs.decisions = (gslb_decision_sampler_t){0};
}

int main(void)
{
	gslb_policy_rng_init(&qs.rng, 42);
	init_addrs();
	conf_t c;
	init_conf(&c);
	gslb_view_t *v = build(&c);
	if (v) {
		test_geo_nets(v);
		test_failover_override(v);
		test_persist_real(v);
		test_whoami(v);
		test_alldown(v);
		test_family_skip(v);
		test_mmdb(v);
		test_explain(v);
		test_ecs_ignored_flag(v);
		test_targets(v, &c);
		test_name_types(v);
		test_decision_sampler(v);
	}
	gslb_view_free(v);
	test_build_errors();
	test_state_file();
	test_private_ecs_used();
	test_health_swap();
	test_empty();
	test_pair_map_small();
	test_pair_map_brute();
	gslb_view_free(NULL);
	return unit_finish("view");
}
