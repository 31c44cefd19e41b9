/*
 * Unit tests for src/conf: a complete config, defaults, one row per error class with the exact
 * "file:line: message" text, the quick-mode helpers, the restart-only diff, and that
 * docs/configuration.md is exactly the generated reference. Runs with tests/data as cwd.
 */
#include "conf/conf.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/err.h"
#include "unit.h"

static const char *addr_str(const steer_sockaddr_t *addr)
{
	static char buf[STEER_SOCKADDR_STRLEN];
	return steer_sockaddr_str(addr, buf, sizeof(buf));
}

static const char *prefix_str(const steer_prefix_t *p)
{
	static char buf[INET6_ADDRSTRLEN + 8];
	char ip[INET6_ADDRSTRLEN];
	inet_ntop(p->family, p->addr, ip, sizeof(ip));
	snprintf(buf, sizeof(buf), "%s/%u", ip, p->len);
	return buf;
}

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static conf_t *load_ok(const char *path)
{
	char err[1024] = "";
	conf_t *conf = NULL;
	int ret = conf_load_file(path, &conf, err, sizeof(err));
	CHECK(ret == 0 && conf, "%s loads (%s)", path, ret == 0 ? "ok" : err);
	return conf;
}

static void test_valid(void)
{
	conf_t *c = load_ok("conf/valid.yaml");
	if (!c)
		return;
	CHECK(str_eq(c->path, "conf/valid.yaml"), "path kept: %s", c->path);
	CHECK(c->n_listen == 2, "two listen addresses: %zu", c->n_listen);
	if (c->n_listen == 2) {
		CHECK(strcmp(addr_str(&c->listen[0]), "127.0.0.1:5353") == 0, "listen[0] %s",
		      addr_str(&c->listen[0]));
		CHECK(strcmp(addr_str(&c->listen[1]), "[::1]:5353") == 0, "listen[1] %s",
		      addr_str(&c->listen[1]));
	}
	CHECK(!c->listen_is_default, "listen from the file is not the default");
	CHECK(c->workers == 2, "workers %u", c->workers);
	CHECK(c->tcp_workers == 1, "tcp-workers %u", c->tcp_workers);
	CHECK(c->udp_max_payload == 1400, "udp-max-payload %u", c->udp_max_payload);
	CHECK(c->tcp_max_clients == 500, "tcp-max-clients %u", c->tcp_max_clients);
	CHECK(c->tcp_idle_timeout == 20000, "tcp-idle-timeout %u", c->tcp_idle_timeout);
	CHECK(c->tcp_io_timeout == 3000, "tcp-io-timeout %u", c->tcp_io_timeout);
	CHECK(c->tcp_max_per_address == 20 && c->tcp_max_per_prefix == 40,
	      "tcp-max-clients-per-address %u, -per-prefix %u", c->tcp_max_per_address,
	      c->tcp_max_per_prefix);
	CHECK(str_eq(c->user, "steer"), "user %s", c->user);
	CHECK(str_eq(c->group, "steergrp"), "group %s", c->group);
	CHECK(str_eq(c->control_socket, "conf/steerd.sock"), "relative control-socket resolved: %s",
	      c->control_socket);
	CHECK(str_eq(c->pid_file, "/run/steer/steerd.pid"), "absolute pid-file kept: %s",
	      c->pid_file);
	CHECK(c->log_target == LOG_TARGET_SYSLOG, "log target syslog");
	CHECK(c->log_level == LOG_LEVEL_DEBUG, "log level debug");
	CHECK(c->n_zones == 3, "three zones: %zu", c->n_zones);
	if (c->n_zones != 3) {
		conf_free(c);
		return;
	}
	const conf_zone_t *z = &c->zones[0];
	CHECK(str_eq(z->domain, "example.test"), "zone 0 domain %s", z->domain);
	CHECK(str_eq(z->file, "conf/zones/example.test.zone"), "zone 0 file resolved: %s", z->file);
	CHECK(z->n_xfr_allow == 3, "zone 0 has three xfr-allow prefixes: %zu", z->n_xfr_allow);
	if (z->n_xfr_allow == 3) {
		CHECK(strcmp(prefix_str(&z->xfr_allow[0].prefix), "127.0.0.1/32") == 0, "acl 0 %s",
		      prefix_str(&z->xfr_allow[0].prefix));
		CHECK(strcmp(prefix_str(&z->xfr_allow[1].prefix), "10.0.0.0/8") == 0, "acl 1 %s",
		      prefix_str(&z->xfr_allow[1].prefix));
		CHECK(strcmp(prefix_str(&z->xfr_allow[2].prefix), "2001:db8::/32") == 0, "acl 2 %s",
		      prefix_str(&z->xfr_allow[2].prefix));
	}
	CHECK(str_eq(c->zones[1].domain, "Other.Test."), "zone 1 domain as written");
	CHECK(str_eq(c->zones[1].file, "/var/lib/steer/other.test.zone"),
	      "absolute zone file kept");
	CHECK(c->zones[1].n_xfr_allow == 0 && !c->zones[1].xfr_allow, "zone 1: no xfr-allow");
	CHECK(c->zones[2].n_xfr_allow == 1, "a single scalar is a one-item list");

	CHECK(conf_find_zone(c, "other.test") == &c->zones[1], "find zone case-insensitively");
	CHECK(conf_find_zone(c, "EXAMPLE.TEST.") == &c->zones[0], "find zone with trailing dot");
	CHECK(conf_find_zone(c, "www.example.test") == NULL, "a name below a zone is not a zone");
	CHECK(conf_find_zone(c, "a..b") == NULL, "an invalid name finds nothing");
	conf_free(c);
}

static const char *ip_str(const conf_address_t *a)
{
	static char buf[INET6_ADDRSTRLEN];
	return inet_ntop(a->family, a->addr, buf, sizeof(buf)) ? buf : "?";
}

/* The datacenter names of @p l joined by ',' (e.g. "telecom,edu"). */
static const char *dcs_str(const conf_t *c, const conf_dclist_t *l)
{
	static char buf[256];
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < l->n && used < sizeof(buf); i++)
		used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%s", i ? "," : "",
		                         l->dc[i] < c->n_datacenters ? c->datacenters[l->dc[i]].name
		                                                     : "?");
	return buf;
}

/* "address/weight" items of an address list joined by ' '. */
static const char *addrs_str(const conf_address_t *a, size_t n)
{
	static char buf[512];
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && used < sizeof(buf); i++) {
		char ip[INET6_ADDRSTRLEN];
		inet_ntop(a[i].family, a[i].addr, ip, sizeof(ip));
		used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%s/%u", i ? " " : "",
		                         ip, a[i].weight);
	}
	return buf;
}

static void test_gslb_maps(const conf_t *c)
{
	CHECK(c->n_maps == 2, "two maps: %zu", c->n_maps);
	if (c->n_maps != 2)
		return;
	const conf_map_t *m = &c->maps[0];
	CHECK(str_eq(m->name, "isp") && m->line == 37, "map 0 isp at line 37: %s %u", m->name,
	      m->line);
	CHECK(m->n_nets == 3, "isp has three nets items: %zu", m->n_nets);
	if (m->n_nets == 3) {
		const conf_nets_t *n = m->nets;
		CHECK(str_eq(n[0].file, "conf/nets/chinanet.txt") && n[0].n_cidr == 0 &&
		          n[0].line == 39,
		      "nets 0: file resolved against the config folder: %s, line %u", n[0].file,
		      n[0].line);
		CHECK(strcmp(dcs_str(c, &n[0].datacenters), "telecom,edu,unicom") == 0,
		      "nets 0 datacenters in order: %s", dcs_str(c, &n[0].datacenters));
		CHECK(!n[1].file && n[1].n_cidr == 2 && n[1].line == 40,
		      "nets 1: two inline prefixes");
		if (n[1].n_cidr == 2)
			CHECK(strcmp(prefix_str(&n[1].cidr[1]), "2001:da8::/32") == 0,
			      "nets 1 cidr 1 %s", prefix_str(&n[1].cidr[1]));
		CHECK(strcmp(dcs_str(c, &n[1].datacenters), "edu,telecom") == 0, "nets 1 dcs %s",
		      dcs_str(c, &n[1].datacenters));
		CHECK(n[2].n_cidr == 1 && n[2].datacenters.n == 1 && n[2].datacenters.dc[0] == 1,
		      "nets 2: a single prefix and a single datacenter (unicom = index 1)");
	}
	CHECK(str_eq(m->geoip_database, "/var/lib/GeoIP/GeoLite2-City.mmdb"), "geoip database %s",
	      m->geoip_database);
	CHECK(m->auto_distance, "auto-distance true");
	CHECK(m->n_rules == 3, "three rules: %zu", m->n_rules);
	if (m->n_rules == 3) {
		const conf_geoip_rule_t *r = m->rules;
		CHECK(str_eq(r[0].match, "AS/CN/31") && r[0].n_asn == 0 && r[0].line == 46 &&
		          strcmp(dcs_str(c, &r[0].datacenters), "telecom,edu") == 0,
		      "rule 0: location AS/CN/31 -> %s", dcs_str(c, &r[0].datacenters));
		CHECK(!r[1].match && r[1].n_asn == 2 && r[1].asn[0] == 4134 &&
		          r[1].asn[1] == 4812 && r[1].line == 47,
		      "rule 1: ASNs 4134, 4812");
		CHECK(r[2].n_asn == 1 && r[2].asn[0] == 4538 &&
		          strcmp(dcs_str(c, &r[2].datacenters), "edu") == 0,
		      "rule 2: a single ASN");
	}
	CHECK(strcmp(dcs_str(c, &m->default_dcs), "telecom,unicom,edu") == 0, "default %s",
	      dcs_str(c, &m->default_dcs));
	CHECK(!m->ignore_ecs && m->ecs_private_is_absent,
	      "ignore-ecs false, private-is-absent true");
	m = &c->maps[1];
	CHECK(str_eq(m->name, "empty") && m->n_nets == 0 && !m->geoip_database && m->n_rules == 0 &&
	          m->default_dcs.n == 0 && !m->auto_distance && !m->ignore_ecs &&
	          !m->ecs_private_is_absent && m->line == 52,
	      "an empty map has every default");
}

static void test_gslb_services(const conf_t *c)
{
	CHECK(c->n_services == 2, "two services: %zu", c->n_services);
	if (c->n_services != 2)
		return;
	const conf_service_t *s = &c->services[0];
	CHECK(str_eq(s->name, "VPN.ecslb.example.test.") && s->line == 3,
	      "service 0 name as written, line %u", s->line);
	CHECK(str_eq(s->policy, "geo") && s->map == 0, "geo with map isp (index 0)");
	CHECK(s->ttl == 2147483647u, "ttl at its maximum: %u", s->ttl);
	CHECK(str_eq(s->all_down, "fallback") && !s->fallback_cname, "all-down fallback");
	CHECK(strcmp(addrs_str(s->fallback, s->n_fallback), "192.0.2.99/1 2001:db8::99/1") == 0,
	      "fallback addresses: %s", addrs_str(s->fallback, s->n_fallback));
	CHECK(s->persist_prefix4 == 20 && s->persist_prefix6 == 48, "persist-prefix 20, 48");
	CHECK(s->n_dcs == 3, "three datacenters: %zu", s->n_dcs);
	if (s->n_dcs == 3) {
		const conf_service_dc_t *d = s->dcs;
		CHECK(d[0].datacenter == 1 && d[1].datacenter == 0 && d[2].datacenter == 2,
		      "YAML order kept (unicom, telecom, edu), not datacenter order: %zu %zu %zu",
		      d[0].datacenter, d[1].datacenter, d[2].datacenter);
		CHECK(d[0].line == 8 && d[1].line == 12 && d[2].line == 13,
		      "each datacenter keeps its line: %u %u %u", d[0].line, d[1].line, d[2].line);
		CHECK(strcmp(addrs_str(d[0].addresses, d[0].n_addresses),
		             "203.0.113.10/3 203.0.113.11/1") == 0 &&
		          str_eq(d[0].policy, "weighted"),
		      "unicom: weights list applied: %s",
		      addrs_str(d[0].addresses, d[0].n_addresses));
		CHECK(strcmp(addrs_str(d[1].addresses, d[1].n_addresses),
		             "198.51.100.10/1 2001:db8:1::10/1") == 0 &&
		          !d[1].policy && d[1].multi == 0,
		      "telecom: IPv4 and IPv6, weight 1, no policy: %s",
		      addrs_str(d[1].addresses, d[1].n_addresses));
		CHECK(d[1].n_addresses == 2 && d[1].addresses[1].family == AF_INET6 &&
		          d[1].addresses[0].family == AF_INET,
		      "address families");
		CHECK(strcmp(addrs_str(d[2].addresses, d[2].n_addresses),
		             "192.0.2.10/2 192.0.2.11/1 2001:db8:2::1/1") == 0,
		      "edu: mapping and plain addresses mixed: %s",
		      addrs_str(d[2].addresses, d[2].n_addresses));
		CHECK(str_eq(d[2].policy, "multi") && d[2].multi == 2, "edu: multi 2");
	}
	s = &c->services[1];
	CHECK(str_eq(s->name, "www.other.test") && s->line == 23, "service 1 www.other.test");
	CHECK(str_eq(s->policy, "failover") && s->map == SIZE_MAX && s->ttl == 30 &&
	          str_eq(s->all_down, "first-datacenter") && s->persist_prefix4 == 24 &&
	          s->persist_prefix6 == 56 && s->n_fallback == 0,
	      "service 1: defaults (failover, no map, ttl 30, first-datacenter, 24/56)");
	CHECK(str_eq(s->fallback_cname, "backup.example.net."), "fallback-cname %s",
	      s->fallback_cname);
	CHECK(s->n_dcs == 1 && s->dcs[0].datacenter == 2 && s->dcs[0].n_addresses == 1 &&
	          strcmp(ip_str(&s->dcs[0].addresses[0]), "192.0.2.20") == 0,
	      "a single address is a one-item list");
}

static void test_gslb(void)
{
	conf_t *c = load_ok("conf/gslb.yaml");
	if (!c)
		return;
	CHECK(c->n_datacenters == 3, "three datacenters: %zu", c->n_datacenters);
	if (c->n_datacenters == 3) {
		const conf_datacenter_t *d = c->datacenters;
		CHECK(str_eq(d[0].name, "telecom") && d[0].has_coords && d[0].lat == 31.23 &&
		          d[0].lon == 121.47 && d[0].line == 33,
		      "telecom at 31.23, 121.47, line %u", d[0].line);
		CHECK(str_eq(d[1].name, "unicom") && d[1].has_coords && d[1].lat == -39.9 &&
		          d[1].lon == -116.4,
		      "negative coordinates");
		CHECK(str_eq(d[2].name, "edu") && !d[2].has_coords && d[2].line == 35,
		      "edu without coordinates");
		test_gslb_maps(c);
		test_gslb_services(c);
	}
	CHECK(c->n_whoami == 2 && str_eq(c->whoami[0], "whoami.ecslb.example.test") &&
	          str_eq(c->whoami[1], "WhoAmI.Other.Test."),
	      "whoami names as written");
	CHECK(str_eq(c->state_file, "conf/state/overrides"), "state-file resolved: %s",
	      c->state_file);
	CHECK(c->n_overrides == 2, "two overrides: %zu", c->n_overrides);
	if (c->n_overrides == 2) {
		CHECK(str_eq(c->overrides[0].pattern, "service/*/unicom/*") &&
		          !c->overrides[0].up && c->overrides[0].line == 57,
		      "override 0: down, line %u", c->overrides[0].line);
		CHECK(str_eq(c->overrides[1].pattern, "service/www.other.test/*") &&
		          c->overrides[1].up && c->overrides[1].line == 58,
		      "override 1: up, line %u", c->overrides[1].line);
	}
	conf_free(c);

	c = load_ok("conf/gslb-minimal.yaml");
	if (c) {
		CHECK(c->n_services == 1 && c->n_datacenters == 1 && c->n_maps == 0 &&
		          c->n_whoami == 0 && c->n_overrides == 0 && !c->state_file,
		      "minimal GSLB: one service, one datacenter, nothing else");
		if (c->n_services == 1)
			CHECK(str_eq(c->services[0].policy, "failover") &&
			          c->services[0].map == SIZE_MAX && c->services[0].ttl == 30 &&
			          str_eq(c->services[0].all_down, "first-datacenter") &&
			          c->services[0].dcs[0].addresses[0].weight == 1,
			      "minimal GSLB: service defaults");
		conf_free(c);
	}
	c = load_ok("conf/valid.yaml");
	if (c) {
		CHECK(c->n_datacenters == 0 && c->n_maps == 0 && c->n_services == 0 &&
		          c->n_whoami == 0 && c->n_overrides == 0 && !c->state_file,
		      "a config without GSLB sections has none");
		conf_free(c);
	}
}

static void check_defaults(const conf_t *c, const char *what)
{
	CHECK(c->n_listen == 1 && strcmp(addr_str(&c->listen[0]), "127.0.0.1:53") == 0,
	      "%s: listen defaults to 127.0.0.1:53", what);
	CHECK(c->workers == 0 && c->tcp_workers == 0, "%s: workers default to 0 (per CPU)", what);
	CHECK(c->udp_max_payload == 1232, "%s: udp-max-payload 1232", what);
	CHECK(c->tcp_max_clients == 1000, "%s: tcp-max-clients 1000", what);
	CHECK(c->tcp_idle_timeout == 10000 && c->tcp_io_timeout == 2000, "%s: tcp timeouts", what);
	CHECK(c->tcp_max_per_address == 100 && c->tcp_max_per_prefix == 250,
	      "%s: tcp client shares 100 and 250", what);
	CHECK(!c->user && !c->group && !c->pid_file, "%s: user, group, pid-file unset", what);
	CHECK(str_eq(c->control_socket, "/run/steer/steerd.sock"), "%s: control socket %s", what,
	      c->control_socket);
	CHECK(c->log_target == LOG_TARGET_STDERR && c->log_level == LOG_LEVEL_INFO,
	      "%s: log to stderr at info", what);
	const conf_forward_t *f = &c->forward;
	CHECK(f->n_groups == 0 && !f->groups && f->n_allow_recursion == 0,
	      "%s: no forwarding, nobody may recurse", what);
	CHECK(f->cache_max_size == 256u << 20 && f->cache_min_ttl == 0 &&
	          f->cache_max_ttl == 86400 && f->cache_max_negative_ttl == 3600 &&
	          f->serve_stale == 30 && f->prefetch && !f->use_0x20,
	      "%s: forward cache defaults (256M, 0..1d, negative 1h, stale 30s, prefetch on, no "
	      "0x20)",
	      what);
}

static void test_defaults(void)
{
	conf_t *c = conf_new_default();
	check_defaults(c, "conf_new_default");
	CHECK(c->listen_is_default, "conf_new_default: listen marked default");
	CHECK(c->n_zones == 0 && !c->path, "conf_new_default: no zones, no path");
	conf_free(c);

	const char *files[] = {"conf/minimal.yaml", "conf/empty-sections.yaml"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		c = load_ok(files[i]);
		if (!c)
			continue;
		check_defaults(c, files[i]);
		CHECK(c->listen_is_default, "%s: listen marked default", files[i]);
		CHECK(c->n_zones == 1 && str_eq(c->zones[0].file, "conf/example.test.zone"),
		      "%s: one zone", files[i]);
		conf_free(c);
	}
}

static const struct {
	const char *file;
	const char *error;
} error_rows[] = {
    {"conf/nope.yaml", "conf/nope.yaml: cannot open: No such file or directory"},
    {"conf", "conf: cannot open: Is a directory"},
    {"conf/err-unknown-key.yaml", "conf/err-unknown-key.yaml:3: unknown key 'listne' in section "
                                  "'server' (did you mean 'listen'?)"},
    {"conf/err-unknown-section.yaml",
     "conf/err-unknown-section.yaml:3: unknown section 'logging' (expected server, log, zones, "
     "keys, health, monitors, datacenters, maps, services, whoami, gslb, forward, cluster, http, "
     "dnstap, "
     "stats-snapshots, alerts, "
     "decision-log, paths, rrl, cookies)"},
    {"conf/err-uint.yaml",
     "conf/err-uint.yaml:2: server.workers: expected an unsigned integer, got 'two'"},
    {"conf/err-negative.yaml",
     "conf/err-negative.yaml:2: server.workers: expected an unsigned integer, got '-1'"},
    {"conf/err-range.yaml",
     "conf/err-range.yaml:2: server.udp-max-payload: 100 is out of range (512 to 4096)"},
    {"conf/err-range-huge.yaml", "conf/err-range-huge.yaml:2: server.tcp-max-clients: "
                                 "99999999999999999999999 is out of range (1 to 1000000)"},
    {"conf/err-addr.yaml", "conf/err-addr.yaml:4: server.listen: invalid address "
                           "'127.0.0.1:99999' (expected IP or IP:PORT, IPv6 as [::1]:PORT)"},
    {"conf/err-port0.yaml",
     "conf/err-port0.yaml:2: server.listen: port 0 is not allowed in '127.0.0.1:0'"},
    {"conf/err-dup-addr.yaml",
     "conf/err-dup-addr.yaml:2: server.listen: duplicate address '127.0.0.1:53'"},
    {"conf/err-empty-listen.yaml",
     "conf/err-empty-listen.yaml:2: server.listen: needs at least one value"},
    {"conf/err-prefix.yaml",
     "conf/err-prefix.yaml:4: zones.xfr-allow: invalid address prefix '10.0.0.1/8' (expected "
     "ADDRESS or ADDRESS/LENGTH with no bits set beyond LENGTH)"},
    {"conf/err-dup-zone.yaml",
     "conf/err-dup-zone.yaml:6: duplicate zone 'A.TEST.' (first defined at line 2)"},
    {"conf/err-domain.yaml", "conf/err-domain.yaml:2: zones.domain: invalid domain name 'a..test'"},
    {"conf/err-domain-long.yaml",
     "conf/err-domain-long.yaml:2: zones.domain: domain name "
     "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.test' is too long "
     "(labels at most 63 bytes, names 255)"},
    {"conf/err-missing-file.yaml",
     "conf/err-missing-file.yaml:4: missing required key 'file' in section 'zones'"},
    {"conf/err-missing-zones.yaml",
     "conf/err-missing-zones.yaml:1: missing required section 'zones'"},
    {"conf/err-empty-file.yaml", "conf/err-empty-file.yaml:1: missing required section 'zones'"},
    {"conf/err-empty-zones.yaml",
     "conf/err-empty-zones.yaml:1: section 'zones' needs at least one zone"},
    {"conf/err-syntax.yaml",
     "conf/err-syntax.yaml:3: invalid YAML: mapping values are not allowed in this context"},
    {"conf/err-syntax-flow.yaml",
     "conf/err-syntax-flow.yaml:3: invalid YAML: did not find expected ',' or ']' while "
     "parsing a flow sequence that started at line 2"},
    {"conf/err-tab.yaml",
     "conf/err-tab.yaml:2: invalid YAML: found character that cannot start any token while "
     "scanning for the next token that started at line 2 (indent with spaces, not tabs)"},
    {"conf/err-ipv6-bare.yaml",
     "conf/err-ipv6-bare.yaml:2: invalid YAML: did not find expected node content while parsing "
     "a flow node that started at line 2 (quote IPv6 addresses: \"[::1]:53\")"},
    {"conf/err-ipv6-nested.yaml", "conf/err-ipv6-nested.yaml:2: server.listen: list items must "
                                  "be single values (quote IPv6 addresses: \"[::1]:53\")"},
    {"conf/err-utf8.yaml", "conf/err-utf8.yaml:3: invalid YAML: invalid leading UTF-8 octet"},
    {"conf/err-type.yaml",
     "conf/err-type.yaml:2: server.workers: expected a single value, got a list"},
    {"conf/err-type-list.yaml",
     "conf/err-type-list.yaml:2: server.listen: expected a list, got a mapping"},
    {"conf/err-list-item.yaml",
     "conf/err-list-item.yaml:5: zones.xfr-allow: expected PREFIX or { address: PREFIX, key: "
     "NAME }, got a list"},
    {"conf/err-enum.yaml", "conf/err-enum.yaml:2: log.level: expected one of error, warning, "
                           "notice, info, debug; got 'loud'"},
    {"conf/err-dup-key.yaml",
     "conf/err-dup-key.yaml:4: duplicate key 'workers' in section 'server' (first at line 2)"},
    {"conf/err-section-type.yaml", "conf/err-section-type.yaml:1: section 'server' must be a "
                                   "mapping of keys, got a single value"},
    {"conf/err-root-type.yaml",
     "conf/err-root-type.yaml:1: the top level must be a mapping of sections, got a list"},
    {"conf/err-zone-type.yaml", "conf/err-zone-type.yaml:2: zones: each zone must be a mapping "
                                "(- domain: NAME, file: PATH), got a single value"},
    {"conf/err-null.yaml", "conf/err-null.yaml:2: server.workers: needs a value"},
    {"conf/err-empty-string.yaml", "conf/err-empty-string.yaml:3: zones.file: must not be empty"},
    {"conf/err-socket-long.yaml", "conf/err-socket-long.yaml:2: server.control-socket: "
                                  "'/run/steer/"
                                  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                  ".sock' is 118 bytes long, at most 107 are allowed"},
    {"conf/err-two-docs.yaml",
     "conf/err-two-docs.yaml:5: only one YAML document is allowed per file"},
    /* GSLB */
    {"conf/err-gslb-asn.yaml",
     "conf/err-gslb-asn.yaml:13: maps.geoip.rules.asn: expected an unsigned integer, got 'AS4812'"},
    {"conf/err-gslb-bad-ip.yaml", "conf/err-gslb-bad-ip.yaml:11: services.datacenters.addresses: "
                                  "invalid IP address '192.0.2.300'"},
    {"conf/err-gslb-bool.yaml",
     "conf/err-gslb-bool.yaml:10: maps.ignore-ecs: expected true or false, got 'yes'"},
    {"conf/err-gslb-coords-shape.yaml", "conf/err-gslb-coords-shape.yaml:5: datacenters.coords: "
                                        "expected [latitude, longitude] in degrees"},
    {"conf/err-gslb-coords.yaml",
     "conf/err-gslb-coords.yaml:6: datacenters.coords: latitude 91 is out of range (-90 to 90)"},
    {"conf/err-gslb-dc-name.yaml", "conf/err-gslb-dc-name.yaml:2: datacenters.name: 'us/east' may "
                                   "only contain letters, digits, '-', '_' and '.'"},
    {"conf/err-gslb-dc-twice.yaml",
     "conf/err-gslb-dc-twice.yaml:10: maps.default: datacenter 'edu' is listed twice"},
    {"conf/err-gslb-dup-address.yaml",
     "conf/err-gslb-dup-address.yaml:11: services.datacenters.addresses: duplicate address "
     "'2001:db8::1'"},
    {"conf/err-gslb-dup-dc.yaml",
     "conf/err-gslb-dup-dc.yaml:8: duplicate datacenter 'unicom' (first defined at line 6)"},
    {"conf/err-gslb-dup-service.yaml", "conf/err-gslb-dup-service.yaml:11: services.name: "
                                       "'WWW.example.test.' is already a service (line 9)"},
    {"conf/err-gslb-fallback-both.yaml", "conf/err-gslb-fallback-both.yaml:13: services: give "
                                         "either 'fallback' or 'fallback-cname', not both"},
    {"conf/err-gslb-geoip-database.yaml", "conf/err-gslb-geoip-database.yaml:10: missing required "
                                          "key 'database' in section 'maps.geoip'"},
    {"conf/err-gslb-map-type.yaml", "conf/err-gslb-map-type.yaml:9: maps.isp: expected a mapping "
                                    "of keys (nets, geoip, default, ...), got a list"},
    {"conf/err-gslb-missing-addresses.yaml",
     "conf/err-gslb-missing-addresses.yaml:11: missing required key 'addresses' in section "
     "'services.datacenters'"},
    {"conf/err-gslb-multi.yaml",
     "conf/err-gslb-multi.yaml:11: services.datacenters.multi: 65 is out of range (1 to 64)"},
    {"conf/err-gslb-nets-both.yaml",
     "conf/err-gslb-nets-both.yaml:11: maps.nets: give either 'file' or 'cidr' (got both)"},
    {"conf/err-gslb-no-dcs.yaml", "conf/err-gslb-no-dcs.yaml:7: services.datacenters: unknown "
                                  "datacenter 'dc1' (no datacenters are configured)"},
    {"conf/err-gslb-no-service-dcs.yaml",
     "conf/err-gslb-no-service-dcs.yaml:10: services.datacenters: needs at least one datacenter"},
    {"conf/err-gslb-override-pattern.yaml", "conf/err-gslb-override-pattern.yaml:11: missing "
                                            "required key 'pattern' in section 'gslb.overrides'"},
    {"conf/err-gslb-override.yaml",
     "conf/err-gslb-override.yaml:10: gslb.overrides.state: expected one of up, down; got 'off'"},
    {"conf/err-gslb-persist.yaml",
     "conf/err-gslb-persist.yaml:12: services.persist-prefix: 129 is out of range (0 to 128)"},
    {"conf/err-gslb-policy-type.yaml",
     "conf/err-gslb-policy-type.yaml:10: services.policy: expected a single value, got a list"},
    {"conf/err-gslb-rule-neither.yaml", "conf/err-gslb-rule-neither.yaml:13: maps.geoip.rules: "
                                        "give either 'match' or 'asn' (got neither)"},
    {"conf/err-gslb-section-type.yaml", "conf/err-gslb-section-type.yaml:9: section 'services' "
                                        "must be a list of services (- name: NAME), got a mapping"},
    {"conf/err-gslb-service-dc.yaml",
     "conf/err-gslb-service-dc.yaml:12: services.datacenters: unknown datacenter 'tel' "
     "(datacenters: telecom, unicom, edu)"},
    {"conf/err-gslb-ttl.yaml",
     "conf/err-gslb-ttl.yaml:10: services.ttl: 2147483648s is above the maximum 2147483647s"},
    {"conf/err-gslb-unknown-dc.yaml",
     "conf/err-gslb-unknown-dc.yaml:11: maps.nets.datacenters: unknown datacenter 'unicon' "
     "(datacenters: telecom, unicom, edu)"},
    {"conf/err-gslb-unknown-key.yaml",
     "conf/err-gslb-unknown-key.yaml:12: unknown key 'adresses' in section 'services.datacenters' "
     "(did you mean 'addresses'?)"},
    {"conf/err-gslb-unknown-map.yaml",
     "conf/err-gslb-unknown-map.yaml:13: services.map: unknown map 'ips' (maps: isp)"},
    {"conf/err-gslb-weight-range.yaml",
     "conf/err-gslb-weight-range.yaml:12: services.datacenters.addresses.weight: 0 is out of range "
     "(1 to 65535)"},
    {"conf/err-gslb-weights-both.yaml",
     "conf/err-gslb-weights-both.yaml:12: services.datacenters.weights: give weights either in "
     "'weights' or per address, not both"},
    {"conf/err-gslb-weights.yaml",
     "conf/err-gslb-weights.yaml:13: services.datacenters.weights: 1 weights for 2 addresses"},
    {"conf/err-gslb-whoami-zone.yaml",
     "conf/err-gslb-whoami-zone.yaml:8: whoami: 'whoami.example.org' is not inside a served zone "
     "(zones: example.test)"},
    {"conf/err-gslb-whoami.yaml",
     "conf/err-gslb-whoami.yaml:13: whoami: 'www.example.test' is already a service (line 9)"},
    {"conf/err-gslb-zone.yaml", "conf/err-gslb-zone.yaml:11: services.name: 'www.example.org' is "
                                "not inside a served zone (zones: example.test)"},
};

static void test_errors(void)
{
	for (size_t i = 0; i < sizeof(error_rows) / sizeof(error_rows[0]); i++) {
		static conf_t sentinel;
		char err[1024] = "";
		conf_t *conf = &sentinel; /* must be reset to NULL on failure */
		int ret = conf_load_file(error_rows[i].file, &conf, err, sizeof(err));
		CHECK(ret == STEER_ECONF && !conf && strcmp(err, error_rows[i].error) == 0,
		      "%s -> \"%s\"%s%s", error_rows[i].file, err,
		      strcmp(err, error_rows[i].error) ? " expected " : "",
		      strcmp(err, error_rows[i].error) ? error_rows[i].error : "");
		if (ret == 0)
			conf_free(conf);
	}

	/* A short buffer truncates the message but never overflows. */
	char small[12];
	conf_t *conf = NULL;
	int ret = conf_load_file("conf/err-uint.yaml", &conf, small, sizeof(small));
	CHECK(ret == STEER_ECONF && strlen(small) == sizeof(small) - 1,
	      "short error buffer truncated: \"%s\"", small);
}

/* ---- configuration written inline: durations, hints, aliases, list-form datacenters ---- */

#define TEXT_FILE "conf-text.yaml"

#define ZONES_TEXT "zones:\n  - domain: example.test\n    file: example.test.zone\n"
static const char zones_text[] = ZONES_TEXT;

/* Load @p text from a scratch file; *@p msg is the error without its "file:line: " prefix. */
static int load_text(const char *text, conf_t **out, char *err, size_t errlen, const char **msg)
{
	FILE *f = fopen(TEXT_FILE, "w");
	CHECK(f != NULL, "write %s", TEXT_FILE);
	if (!f)
		return -1;
	fputs(text, f);
	fclose(f);
	err[0] = '\0';
	int ret = conf_load_file(TEXT_FILE, out, err, errlen);
	remove(TEXT_FILE);
	const char *colon = strchr(err, ':');
	colon = colon ? strchr(colon + 1, ':') : NULL;
	*msg = colon ? colon + 2 : err;
	return ret;
}

typedef enum { D_IDLE, D_IO, D_INTERVAL, D_TIMEOUT, D_HOLD, D_SLOW, D_FLOOR, D_TTL } dkey_t;

/* One config that sets duration key @p key to @p value (every other key valid). */
static void duration_config(dkey_t key, const char *value, char *buf, size_t size)
{
	static const char *const names[] = {
	    "tcp-idle-timeout", "tcp-io-timeout", "interval",  "timeout",
	    "hold-down",        "slow-start",     "ttl-floor", "ttl"};
	const char *name = names[key];
	int n = snprintf(buf, size, "%s", zones_text);
	if (key <= D_IO)
		n += snprintf(buf + n, size - (size_t)n, "server:\n  %s: %s\n", name, value);
	/* an interval under test needs a timeout below it, and the other way round */
	n += snprintf(buf + n, size - (size_t)n, "monitors:\n  m:\n    type: static\n");
	if (key >= D_INTERVAL && key <= D_FLOOR)
		n += snprintf(buf + n, size - (size_t)n, "    %s: %s\n", name, value);
	if (key == D_INTERVAL)
		n += snprintf(buf + n, size - (size_t)n, "    timeout: 10\n");
	if (key == D_TIMEOUT)
		n += snprintf(buf + n, size - (size_t)n, "    interval: 1h\n");
	n += snprintf(buf + n, size - (size_t)n,
	              "datacenters:\n  - name: dc1\nservices:\n  - name: www.example.test\n");
	if (key == D_TTL)
		n += snprintf(buf + n, size - (size_t)n, "    ttl: %s\n", value);
	snprintf(buf + n, size - (size_t)n,
	         "    datacenters:\n      - { name: dc1, addresses: [192.0.2.1] }\n");
}

static unsigned duration_value(const conf_t *c, dkey_t key)
{
	const conf_monitor_t *m = &c->monitors[0];
	const unsigned v[] = {c->tcp_idle_timeout, c->tcp_io_timeout, m->interval,
	                      m->timeout,          m->hold_down,      m->slow_start,
	                      m->ttl_floor,        c->services[0].ttl};
	return v[key];
}

static const struct {
	dkey_t key;
	const char *text;
	unsigned value;    /* in the key's base unit, when ok */
	const char *error; /* NULL: loads */
} duration_rows[] = {
    /* milliseconds keys: a bare number is milliseconds */
    {D_IDLE, "1500", 1500, NULL},
    {D_IDLE, "1s", 1000, NULL},
    {D_IDLE, "500ms", 500, NULL},
    {D_IDLE, "1m30s", 90000, NULL},
    {D_IDLE, "1h", 3600000, NULL},
    {D_IDLE, "1m30s250ms", 90250, NULL},
    {D_IDLE, "50ms", 0, "server.tcp-idle-timeout: 50ms is below the minimum 100ms"},
    {D_IDLE, "99", 0, "server.tcp-idle-timeout: 99ms is below the minimum 100ms"},
    {D_IDLE, "2h", 0, "server.tcp-idle-timeout: 2h is above the maximum 1h"},
    {D_IDLE, "1d", 0, "server.tcp-idle-timeout: 1d is above the maximum 1h"},
    {D_IDLE, "99999999999999999999999", 0,
     "server.tcp-idle-timeout: 99999999999999999999999ms is above the maximum 1h"},
    {D_IDLE, "99999999999999999d", 0,
     "server.tcp-idle-timeout: 99999999999999999d is above the maximum 1h"},
    {D_IDLE, "2 s", 0,
     "server.tcp-idle-timeout: expected a duration such as 500ms, 2s, 1m, 1h, 1d or 1m30s (a "
     "bare number is milliseconds), got '2 s'"},
    {D_IDLE, "30s1m", 0,
     "server.tcp-idle-timeout: expected a duration such as 500ms, 2s, 1m, 1h, 1d or 1m30s (a "
     "bare number is milliseconds), got '30s1m'"},
    {D_IDLE, "2S", 0,
     "server.tcp-idle-timeout: expected a duration such as 500ms, 2s, 1m, 1h, 1d or 1m30s (a "
     "bare number is milliseconds), got '2S'"},
    {D_IDLE, "s", 0,
     "server.tcp-idle-timeout: expected a duration such as 500ms, 2s, 1m, 1h, 1d or 1m30s (a "
     "bare number is milliseconds), got 's'"},
    {D_IDLE, "-1s", 0,
     "server.tcp-idle-timeout: expected a duration such as 500ms, 2s, 1m, 1h, 1d or 1m30s (a "
     "bare number is milliseconds), got '-1s'"},
    {D_IO, "2s", 2000, NULL},
    {D_IO, "11m", 0, "server.tcp-io-timeout: 11m is above the maximum 10m"},
    {D_INTERVAL, "300ms", 300, NULL},
    {D_INTERVAL, "300", 300, NULL},
    {D_INTERVAL, "50ms", 0, "monitors.interval: 50ms is below the minimum 100ms"},
    {D_TIMEOUT, "5ms", 0, "monitors.timeout: 5ms is below the minimum 10ms"},
    {D_TIMEOUT, "2s", 2000, NULL},
    {D_HOLD, "1d", 86400000, NULL},
    {D_HOLD, "0", 0, NULL},
    {D_HOLD, "1d1ms", 0, "monitors.hold-down: 1d1ms is above the maximum 1d"},
    {D_SLOW, "1m", 60000, NULL},
    /* seconds keys: a bare number is seconds, finer values are errors */
    {D_FLOOR, "10", 10, NULL},
    {D_FLOOR, "10s", 10, NULL},
    {D_FLOOR, "2000ms", 2, NULL},
    {D_FLOOR, "1500ms", 0, "monitors.ttl-floor: 1500ms is not a whole number of seconds"},
    {D_FLOOR, "2d", 0, "monitors.ttl-floor: 2d is above the maximum 1d"},
    {D_TTL, "30", 30, NULL},
    {D_TTL, "5m", 300, NULL},
    {D_TTL, "1d", 86400, NULL},
    {D_TTL, "0s", 0, NULL},
    {D_TTL, "500ms", 0, "services.ttl: 500ms is not a whole number of seconds"},
    {D_TTL, "24856d", 0, "services.ttl: 24856d is above the maximum 2147483647s"},
    {D_TTL, "2147483648", 0, "services.ttl: 2147483648s is above the maximum 2147483647s"},
    {D_TTL, "thirty", 0,
     "services.ttl: expected a duration such as 500ms, 2s, 1m, 1h, 1d or 1m30s (a bare number "
     "is seconds), got 'thirty'"},
};

static void test_durations(void)
{
	char text[2048], err[1024];
	for (size_t i = 0; i < sizeof(duration_rows) / sizeof(duration_rows[0]); i++) {
		conf_t *c = NULL;
		const char *msg;
		duration_config(duration_rows[i].key, duration_rows[i].text, text, sizeof(text));
		int ret = load_text(text, &c, err, sizeof(err), &msg);
		if (!duration_rows[i].error) {
			CHECK(ret == 0 &&
			          duration_value(c, duration_rows[i].key) == duration_rows[i].value,
			      "duration '%s' -> %u (want %u) %s", duration_rows[i].text,
			      ret == 0 ? duration_value(c, duration_rows[i].key) : 0,
			      duration_rows[i].value, err);
		} else {
			CHECK(ret == STEER_ECONF && strcmp(msg, duration_rows[i].error) == 0,
			      "duration '%s' -> \"%s\" expected \"%s\"", duration_rows[i].text, msg,
			      duration_rows[i].error);
		}
		conf_free(c);
	}
}

static const struct {
	const char *text;
	const char *error; /* with its line */
} hint_rows[] = {
    {"zones:\n  - domain: example.test\n    fiel: x.zone\n",
     "3: unknown key 'fiel' in section 'zones' (did you mean 'file'?)"},
    {"zones:\n  - domain: example.test\n    File: x.zone\n",
     "3: unknown key 'File' in section 'zones' (did you mean 'file'?)"},
    {"zones:\n  - domain: example.test\n    file: x.zone\nmonitors:\n  m:\n    type: static\n"
     "    intreval: 1s\n",
     "7: unknown key 'intreval' in section 'monitors' (did you mean 'interval'?)"},
    {"zones:\n  - domain: example.test\n    file: x.zone\nserver:\n  tcp-idle: 1s\n",
     "5: unknown key 'tcp-idle' in section 'server' (did you mean 'tcp-idle-timeout'?)"},
    {"zones:\n  - domain: example.test\n    file: x.zone\nlog:\n  zzz: 1\n",
     "5: unknown key 'zzz' in section 'log' (valid keys: target, level)"},
    {"zone:\n  - domain: example.test\n", "1: unknown section 'zone' (did you mean 'zones'?)"},
    {"datacenter:\n  - name: dc1\n",
     "1: unknown section 'datacenter' (did you mean 'datacenters'?)"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    datacenter: { dc1: { addresses: 192.0.2.1 } }\n",
     "8: unknown key 'datacenter' in section 'services' (did you mean 'datacenters'?)"},
    /* values from a fixed set list the set and the nearest */
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    policy: fialover\n"
     "    datacenters: { dc1: { addresses: 192.0.2.1 } }\n",
     "8: services.policy: expected one of failover, geo, weighted, persist, round-robin, rtt, "
     "completion-rate, hops, qos, least-connections, capacity, packet-rate, kbps; got "
     "'fialover' (did you mean 'failover'?)"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    policy: multi\n"
     "    datacenters: { dc1: { addresses: 192.0.2.1 } }\n",
     "8: services.policy: expected one of failover, geo, weighted, persist, round-robin, rtt, "
     "completion-rate, hops, qos, least-connections, capacity, packet-rate, kbps; got "
     "'multi'"},
    /* measured policies: fallback-policy and qos */
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    policy: rtt\n    fallback-policy: kbps\n"
     "    datacenters: { dc1: { addresses: 192.0.2.1 } }\n",
     "9: services.fallback-policy: expected one of failover, geo, weighted, persist, "
     "round-robin; got 'kbps'"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    policy: weighted\n"
     "    fallback-policy: failover\n    datacenters: { dc1: { addresses: 192.0.2.1 } }\n",
     "9: services.fallback-policy: only used by a measured policy (rtt, completion-rate, hops, "
     "qos, least-connections, capacity, packet-rate, kbps), not 'weighted'"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    policy: rtt\n    fallback-policy: geo\n"
     "    datacenters: { dc1: { addresses: 192.0.2.1 } }\n",
     "9: services.fallback-policy: geo needs a 'map'"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    policy: qos\n"
     "    qos: { rtt: 10, packet_rate: 2 }\n"
     "    datacenters: { dc1: { addresses: 192.0.2.1 } }\n",
     "9: unknown key 'packet_rate' in section 'services.qos' (did you mean 'packet-rate'?)"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    policy: qos\n    qos: { rtt: 1001 }\n"
     "    datacenters: { dc1: { addresses: 192.0.2.1 } }\n",
     "9: services.qos.rtt: 1001 is out of range (0 to 1000)"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    policy: qos\n    qos: [1, 2]\n"
     "    datacenters: { dc1: { addresses: 192.0.2.1 } }\n",
     "9: services.qos: expected a mapping of coefficients, e.g. { rtt: 50, completion-rate: 5 "
     "}, got a list"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    policy: rtt\n    qos: { rtt: 1 }\n"
     "    datacenters: { dc1: { addresses: 192.0.2.1 } }\n",
     "9: services.qos: only used by policy qos, not 'rtt'"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    all-down: nxdomain\n"
     "    datacenters: { dc1: { addresses: 192.0.2.1 } }\n",
     "8: services.all-down: expected one of first-datacenter, fallback, nodata, servfail; got "
     "'nxdomain'"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    datacenters:\n"
     "      - { name: dc1, addresses: 192.0.2.1, policy: geo }\n",
     "9: services.datacenters.policy: expected one of all, failover, weighted, multi, "
     "round-robin, persist; got 'geo'"},
    {"zones:\n  - domain: example.test\n    file: x.zone\nlog:\n  level: warn\n",
     "5: log.level: expected one of error, warning, notice, info, debug; got 'warn' (did you "
     "mean 'warning'?)"},
    /* errors about one key point at that key, not at the start of its mapping */
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - datacenters: [{ name: dc1, addresses: 192.0.2.1 }]\n"
     "    name: www.example.org\n",
     "8: services.name: 'www.example.org' is not inside a served zone (zones: example.test)"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - coords: [1, 2]\n"
     "    probe: 10.0.0.1\n    name: dc1\n",
     "6: datacenters: 'dc1' has a 'probe' but no 'monitor'"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "  - coords: [1, 2]\n    name: dc1\n",
     "7: duplicate datacenter 'dc1' (first defined at line 5)"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    datacenters: [{ name: dc1, addresses: "
     "192.0.2.1 }]\n    fallback: 192.0.2.9\n    all-down: fallback\n"
     "    fallback-cname: sorry.example.test\n",
     "11: services: give either 'fallback' or 'fallback-cname', not both"},
    /* aliases */
    {"zones:\n  - domain: example.test\n    name: example.test\n    file: x.zone\n",
     "3: zones: give either 'domain' or 'name', not both (the first at line 2)"},
    {"zones:\n  - file: x.zone\n", "2: missing required key 'domain' in section 'zones'"},
    /* list-form datacenters */
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    datacenters:\n"
     "      - { name: dc1, addresses: 192.0.2.1 }\n"
     "      - { name: dc1, addresses: 192.0.2.2 }\n",
     "10: services.datacenters.name: datacenter 'dc1' is listed twice (first at line 9)"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    datacenters:\n"
     "      - { addresses: 192.0.2.1 }\n",
     "9: missing required key 'name' in section 'services.datacenters' (the list form names "
     "each datacenter: - name: DC, addresses: [...])"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    datacenters:\n"
     "      - { name: dc2, addresses: 192.0.2.1 }\n",
     "9: services.datacenters.name: unknown datacenter 'dc2' (datacenters: dc1)"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    datacenters:\n      - dc1\n",
     "9: services.datacenters: each entry must be a mapping (- name: DC, addresses: [...]), "
     "got a single value"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    datacenters: []\n",
     "8: services.datacenters: needs at least one datacenter"},
    {"zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n  - name: dc1\n"
     "services:\n  - name: www.example.test\n    datacenters:\n"
     "      dc1: { name: dc1, addresses: 192.0.2.1 }\n",
     "9: services.datacenters.dc1: 'name' is only used in the list form (- name: DC, "
     "addresses: [...]); here the key is the name"},
};

static void test_hints(void)
{
	char err[1024];
	for (size_t i = 0; i < sizeof(hint_rows) / sizeof(hint_rows[0]); i++) {
		conf_t *c = NULL;
		const char *msg;
		int ret = load_text(hint_rows[i].text, &c, err, sizeof(err), &msg);
		const char *line = strchr(err, ':');
		line = line ? line + 1 : "";
		CHECK(ret == STEER_ECONF && strcmp(line, hint_rows[i].error) == 0,
		      "hint row %zu -> \"%s\" expected \"%s\"", i, line, hint_rows[i].error);
		conf_free(c);
	}
}

/* qos coefficients: the given ones replace F5's defaults, the others keep them. */
static void test_qos_keys(void)
{
	char err[1024];
	const char *msg;
	conf_t *c = NULL;
	int ret = load_text("zones:\n  - domain: example.test\n    file: x.zone\ndatacenters:\n"
	                    "  - name: dc1\nservices:\n  - name: www.example.test\n"
	                    "    policy: qos\n    fallback-policy: weighted\n"
	                    "    qos: { rtt: 100, packet-rate: 0, vs-capacity: 7 }\n"
	                    "    datacenters: { dc1: { addresses: 192.0.2.1 } }\n",
	                    &c, err, sizeof(err), &msg);
	CHECK(ret == 0, "qos service loads: %s", err);
	if (ret == 0) {
		const conf_service_t *s = &c->services[0];
		CHECK(s->qos[CONF_QOS_RTT] == 100 && s->qos[CONF_QOS_PACKET_RATE] == 0 &&
		          s->qos[CONF_QOS_VS_CAPACITY] == 7,
		      "given coefficients: rtt %u packet-rate %u vs-capacity %u",
		      s->qos[CONF_QOS_RTT], s->qos[CONF_QOS_PACKET_RATE],
		      s->qos[CONF_QOS_VS_CAPACITY]);
		CHECK(s->qos[CONF_QOS_COMPLETION_RATE] == 5 &&
		          s->qos[CONF_QOS_LINK_CAPACITY] == 30 && s->qos[CONF_QOS_KBPS] == 3 &&
		          s->qos[CONF_QOS_HOPS] == 0,
		      "defaults kept");
		CHECK(s->fallback_policy && strcmp(s->fallback_policy, "weighted") == 0,
		      "fallback-policy");
	}
	conf_free(c);
}

/* server.version: unset, a value, "" (hidden); zones' ixfr-history: default, set, bounds. */
static void test_version_and_ixfr_history(void)
{
	static const struct {
		const char *text;
		bool ok;
		const char *version; /* NULL: unset */
		unsigned history;
	} rows[] = {
	    {"zones:\n  - domain: a.test\n    file: a.zone\n", true, NULL, 20},
	    {"server:\n  version: \"ns 1\"\nzones:\n  - domain: a.test\n    file: a.zone\n"
	     "    ixfr-history: 0\n",
	     true, "ns 1", 0},
	    {"server:\n  version: \"\"\nzones:\n  - domain: a.test\n    file: a.zone\n"
	     "    ixfr-history: 500\n",
	     true, "", 500},
	    {"server:\n  version: \"bad\\x01\"\nzones:\n  - domain: a.test\n    file: a.zone\n",
	     false, NULL, 0},
	    {"zones:\n  - domain: a.test\n    file: a.zone\n    ixfr-history: 10001\n", false, NULL,
	     0},
	    {"zones:\n  - domain: a.test\n    file: a.zone\n    ixfr-history: -1\n", false, NULL,
	     0},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		char err[1024];
		const char *msg;
		conf_t *c = NULL;
		int ret = load_text(rows[i].text, &c, err, sizeof(err), &msg);
		CHECK((ret == 0) == rows[i].ok, "version/ixfr-history row %zu: %s", i, err);
		if (ret == 0 && rows[i].ok) {
			CHECK(rows[i].version ? str_eq(c->version, rows[i].version) : !c->version,
			      "row %zu: server.version", i);
			CHECK(c->zones[0].ixfr_history == rows[i].history,
			      "row %zu: ixfr-history %u", i, c->zones[0].ixfr_history);
		}
		conf_free(c);
	}
}

static void test_alias_and_list_form(void)
{
	char err[1024];
	const char *msg;
	conf_t *c = NULL;
	int ret = load_text("zones:\n  - name: example.test\n    file: x.zone\n"
	                    "  - domain: other.test\n    file: y.zone\n",
	                    &c, err, sizeof(err), &msg);
	CHECK(ret == 0 && c->n_zones == 2 && str_eq(c->zones[0].domain, "example.test") &&
	          str_eq(c->zones[1].domain, "other.test"),
	      "zones accept name: as an alias of domain (%s)", err);
	conf_free(c);

	/* The list is the failover order, whatever the names sort as; keys keep working. */
	c = NULL;
	ret = load_text("zones:\n  - domain: example.test\n    file: x.zone\n"
	                "monitors:\n  web: { type: static }\n"
	                "datacenters:\n  - name: alpha\n  - name: zeta\n  - name: mid\n"
	                "services:\n  - name: www.example.test\n    datacenters:\n"
	                "      - name: zeta\n        addresses: [192.0.2.1, 192.0.2.2]\n"
	                "        weights: [3, 1]\n        policy: weighted\n"
	                "      - { addresses: 192.0.2.3, name: alpha, monitor: web, weight: 2 }\n"
	                "      - { name: mid, policy: multi, multi: 1, addresses: 192.0.2.4 }\n",
	                &c, err, sizeof(err), &msg);
	CHECK(ret == 0, "list-form datacenters load (%s)", err);
	if (ret == 0) {
		const conf_service_t *s = &c->services[0];
		CHECK(s->n_dcs == 3 && s->dcs[0].datacenter == 1 && s->dcs[1].datacenter == 0 &&
		          s->dcs[2].datacenter == 2,
		      "list order kept: zeta, alpha, mid");
		CHECK(s->dcs[0].n_addresses == 2 && s->dcs[0].addresses[0].weight == 3 &&
		          s->dcs[0].addresses[1].weight == 1 &&
		          str_eq(s->dcs[0].policy, "weighted") && s->dcs[0].line == 13,
		      "zeta: weights, policy, line %u", s->dcs[0].line);
		CHECK(s->dcs[1].monitor == 0 && s->dcs[1].weight == 2 && s->dcs[1].line == 17,
		      "alpha: name after other keys, monitor, weight, line %u", s->dcs[1].line);
		CHECK(str_eq(s->dcs[2].policy, "multi") && s->dcs[2].multi == 1, "mid: multi 1");
	}
	conf_free(c);
}

/* ---- health monitors ---- */

/* The shared state-machine keys of @p m, as text, for one comparison per monitor. */
static const char *timing_str(const conf_monitor_t *m)
{
	static char buf[128];
	snprintf(buf, sizeof(buf), "%u/%u fall %u rise %u jitter %u hold %u slow %u floor %u",
	         m->interval, m->timeout, m->fall, m->rise, m->jitter, m->hold_down, m->slow_start,
	         m->ttl_floor);
	return buf;
}

static const char default_timing[] = "2000/1000 fall 3 rise 3 jitter 10 hold 0 slow 0 floor 5";

static void test_health_monitors(const conf_t *c)
{
	const conf_monitor_t *m = c->monitors;
	CHECK(str_eq(m[0].name, "web") && str_eq(m[0].type, "http") && m[0].port == 8080 &&
	          m[0].line == 8,
	      "web: http on 8080, line %u", m[0].line);
	CHECK(str_eq(m[0].path, "/health?full=1") && str_eq(m[0].host, "www.example.test") &&
	          str_eq(m[0].body, "OK") && m[0].tls_verify,
	      "web: path, host, body, tls-verify default true");
	CHECK(m[0].n_status == 2 && m[0].status[0] == 200 && m[0].status[1] == 204,
	      "web: expect-status [200, 204]: %zu codes", m[0].n_status);
	CHECK(strcmp(timing_str(&m[0]),
	             "5000/1500 fall 2 rise 4 jitter 0 hold 30000 slow 60000 floor 10") == 0,
	      "web: timing %s", timing_str(&m[0]));
	CHECK(str_eq(m[1].type, "https") && !m[1].tls_verify && m[1].port == 0 &&
	          m[1].n_status == 1 && m[1].status[0] == 200 && str_eq(m[1].path, "/") &&
	          !m[1].host && !m[1].body,
	      "secure: https, tls-verify false, one status, port and path defaults");
	CHECK(strcmp(timing_str(&m[1]), default_timing) == 0, "secure: default timing %s",
	      timing_str(&m[1]));
	CHECK(str_eq(m[2].type, "tcp") && m[2].port == 179 && m[2].interval == 1000 &&
	          m[2].timeout == 500,
	      "gw: tcp 179, 1000/500");
	CHECK(str_eq(m[3].type, "dns") && str_eq(m[3].qname, "example.test.") && m[3].qtype == 6 &&
	          m[3].rcode == 3 && str_eq(m[3].answer, "192.0.2.1"),
	      "dns1: SOA (6) %u, NXDOMAIN (3) %u, qname and answer", m[3].qtype, m[3].rcode);
	CHECK(!m[4].qname && m[4].qtype == 65280 && m[4].rcode == 0 && !m[4].answer,
	      "dns2: TYPE65280 %u, NOERROR, no qname (the service's)", m[4].qtype);
	CHECK(str_eq(m[5].type, "exec") && m[5].n_command == 3 &&
	          str_eq(m[5].command[0], "/usr/local/bin/check-db") &&
	          str_eq(m[5].command[1], "--quick") && str_eq(m[5].command[2], "") &&
	          m[5].command[3] == NULL,
	      "script: argv of 3 and a NULL terminator");
	CHECK(str_eq(m[6].type, "static") && m[6].static_down, "maint: static down");
	CHECK(str_eq(m[7].type, "static") && !m[7].static_down, "plain: static, default up");
}

static void test_health_targets(const conf_t *c)
{
	const conf_datacenter_t *d = c->datacenters;
	CHECK(d[0].monitor == 2 && str_eq(d[0].probe, "10.0.0.1"), "telecom: link monitor gw");
	CHECK(d[1].monitor == 3 && str_eq(d[1].probe, "[2001:db8::53]:5353"),
	      "edu: dns1 probing [2001:db8::53]:5353");
	CHECK(d[2].monitor == 6 && !d[2].probe, "dc1: static monitor needs no probe");
	CHECK(d[3].monitor == CONF_MONITOR_NONE && !d[3].probe, "dc2: no link monitor");

	const conf_service_t *s = &c->services[0];
	CHECK(s->monitor == 0 && s->n_dcs == 2, "www: monitor web");
	CHECK(s->dcs[0].monitor == 1 && s->dcs[1].monitor == CONF_MONITOR_NONE,
	      "www: dc1 overrides with secure, dc2 keeps the service's");
	const conf_address_t *a = s->dcs[0].addresses;
	CHECK(s->dcs[0].n_addresses == 3 && !a[0].probe && a[0].n_requires == 0 && !a[0].requires,
	      "plain address: no probe, no requires");
	CHECK(str_eq(a[1].probe, "10.0.0.11:8080") && a[1].n_requires == 2 &&
	          str_eq(a[1].requires[0], "datacenter/telecom") &&
	          str_eq(a[1].requires[1], "service/db.example.test/dc1/10.1.1.1") &&
	          a[1].weight == 1,
	      "198.51.100.11: probe and two requires");
	CHECK(strcmp(ip_str(&a[2]), "2001:db8::10") == 0 && str_eq(a[2].probe, "2001:db8::11") &&
	          a[2].weight == 3 && a[2].n_requires == 1 &&
	          str_eq(a[2].requires[0], "datacenter/edu"),
	      "probe before address in the mapping is kept; a single requires value");
	s = &c->services[1];
	CHECK(s->monitor == CONF_MONITOR_NONE && s->dcs[0].monitor == CONF_MONITOR_NONE &&
	          s->dcs[0].addresses[0].n_requires == 0,
	      "db: no monitor, empty requires");
}

static void test_metrics_monitors(void)
{
	conf_t *c = load_ok("conf/health/metrics.yaml");
	if (!c)
		return;
	CHECK(c->n_monitors == 3 && c->n_services == 1 && c->services[0].n_dcs == 2,
	      "three monitors, one service");
	if (c->n_monitors != 3 || c->n_services != 1 || c->services[0].n_dcs != 2) {
		conf_free(c);
		return;
	}
	const conf_monitor_t *load = &c->monitors[1], *stub = &c->monitors[2];
	CHECK(str_eq(load->type, "metrics") && str_eq(load->format, "prometheus") && !load->tls &&
	          load->port == 9100 && str_eq(load->path, "/metrics") &&
	          load->stale_after == 10000,
	      "metrics monitor: format default, path default /metrics, stale-after");
	CHECK(str_eq(load->metric_expr[CONF_METRIC_CONNECTIONS],
	             "nginx_connections_active{instance=\"a\"}") &&
	          load->metric_line[CONF_METRIC_CONNECTIONS] == 10,
	      "an expression is kept as text with its line");
	CHECK(!load->metric_expr[CONF_METRIC_CAPACITY] &&
	          load->metric_is_const[CONF_METRIC_CAPACITY] &&
	          load->metric_const[CONF_METRIC_CAPACITY] == 10000,
	      "a number is a constant");
	CHECK(str_eq(load->metric_expr[CONF_METRIC_KBPS],
	             "rate(node_network_transmit_bytes_total{device=\"eth0\"}) / 1000") &&
	          !load->metric_expr[CONF_METRIC_CPU] && !load->metric_is_const[CONF_METRIC_CPU] &&
	          load->metric_line[CONF_METRIC_CPU] == 0,
	      "unset values are neither");
	CHECK(str_eq(stub->format, "nginx-stub-status") && stub->tls &&
	          str_eq(stub->path, "/status"),
	      "nginx monitor: format, tls, explicit path");
	const conf_service_t *svc = &c->services[0];
	CHECK(svc->monitor == 0 && svc->metrics == 1 && svc->dcs[0].metrics == CONF_MONITOR_NONE &&
	          svc->dcs[1].metrics == 2 && svc->dcs[1].monitor == CONF_MONITOR_NONE,
	      "service and datacenter metrics resolved apart from monitor");
	conf_free(c);

	c = load_ok("conf/health/minimal.yaml");
	if (c) {
		CHECK(c->n_services == 1 && c->services[0].metrics == CONF_MONITOR_NONE,
		      "no metrics by default");
		conf_free(c);
	}
}

static void test_health(void)
{
	conf_t *c = load_ok("conf/health/valid.yaml");
	if (!c)
		return;
	CHECK(str_eq(c->health_state_file, "conf/health/state/health.state"),
	      "health.state-file resolved: %s", c->health_state_file);
	CHECK(c->n_monitors == 8, "eight monitors: %zu", c->n_monitors);
	CHECK(c->n_datacenters == 4 && c->n_services == 2, "datacenters and services");
	if (c->n_monitors == 8 && c->n_datacenters == 4 && c->n_services == 2) {
		test_health_monitors(c);
		test_health_targets(c);
	}
	conf_free(c);

	/* Monitors load before the sections that use them wherever they stand in the file. */
	c = load_ok("conf/health/minimal.yaml");
	if (c) {
		const conf_monitor_t *m = c->monitors;
		CHECK(c->n_monitors == 1 && str_eq(m[0].type, "http") && m[0].port == 0 &&
		          str_eq(m[0].path, "/") && !m[0].host && !m[0].body && m[0].tls_verify &&
		          m[0].n_status == 0 && !m[0].qname && m[0].qtype == 1 && m[0].rcode == 0 &&
		          !m[0].answer && !m[0].command && m[0].n_command == 0 && !m[0].static_down,
		      "minimal monitor: defaults");
		if (c->n_monitors == 1)
			CHECK(strcmp(timing_str(&m[0]), default_timing) == 0, "default timing %s",
			      timing_str(&m[0]));
		CHECK(!c->health_state_file, "no health state file by default");
		CHECK(c->n_services == 1 && c->services[0].monitor == 0 &&
		          c->services[0].dcs[0].monitor == CONF_MONITOR_NONE &&
		          c->datacenters[0].monitor == CONF_MONITOR_NONE,
		      "service monitor resolved, others none");
		conf_free(c);
	}

	c = load_ok("conf/gslb.yaml");
	if (c) {
		bool none = c->n_monitors == 0 && !c->monitors && !c->health_state_file;
		for (size_t i = 0; i < c->n_datacenters; i++)
			none = none && c->datacenters[i].monitor == CONF_MONITOR_NONE &&
			       !c->datacenters[i].probe;
		for (size_t i = 0; i < c->n_services; i++) {
			none = none && c->services[i].monitor == CONF_MONITOR_NONE;
			for (size_t d = 0; d < c->services[i].n_dcs; d++)
				none = none && c->services[i].dcs[d].monitor == CONF_MONITOR_NONE;
		}
		CHECK(none, "a GSLB config without monitors: every monitor is CONF_MONITOR_NONE");
		conf_free(c);
	}
}

#define H "conf/health/"

static const struct {
	const char *file;
	const char *error;
} health_error_rows[] = {
    {H "err-undefined-monitor.yaml", H "err-undefined-monitor.yaml:10: services.monitor: "
                                       "unknown monitor 'wbe' (monitors: web)"},
    {H "err-undefined-dc-monitor.yaml", H "err-undefined-dc-monitor.yaml:5: datacenters.monitor: "
                                          "unknown monitor 'gw' (no monitors are configured)"},
    {H "err-undefined-sdc-monitor.yaml",
     H "err-undefined-sdc-monitor.yaml:14: services.datacenters.monitor: unknown monitor 'web2' "
       "(monitors: web, api)"},
    {H "err-timeout.yaml", H "err-timeout.yaml:8: monitors.web: timeout 1s must be less "
                             "than interval 1s"},
    {H "err-timeout-default.yaml", H "err-timeout-default.yaml:7: monitors.web: timeout 1s "
                                     "must be less than interval 500ms"},
    {H "err-wrong-type-key.yaml", H "err-wrong-type-key.yaml:8: monitors.gw: 'path' does not "
                                    "apply to tcp monitors (only http, https, metrics)"},
    {H "err-command-on-http.yaml", H "err-command-on-http.yaml:5: monitors.web: 'command' does "
                                     "not apply to http monitors (only exec)"},
    {H "err-tls-verify-http.yaml", H "err-tls-verify-http.yaml:5: monitors.web: 'tls-verify' does "
                                     "not apply to http monitors (only https, metrics)"},
    {H "err-exec-no-command.yaml",
     H "err-exec-no-command.yaml:5: monitors.script: an exec monitor needs a 'command'"},
    {H "err-command-empty.yaml",
     H "err-command-empty.yaml:5: monitors.command: needs at least one value"},
    {H "err-tcp-no-port.yaml", H "err-tcp-no-port.yaml:5: monitors.gw: a tcp monitor needs a "
                                 "'port'"},
    {H "err-probe.yaml",
     H "err-probe.yaml:14: services.datacenters.addresses.probe: invalid probe address "
       "'192.0.2.300:80' (expected IP or IP:PORT, IPv6 as \"[2001:db8::1]:PORT\")"},
    {H "err-probe-port0.yaml",
     H "err-probe-port0.yaml:7: datacenters.probe: port 0 is not allowed in '10.0.0.1:0'"},
    {H "err-qtype.yaml",
     H "err-qtype.yaml:5: monitors.qtype: unknown qtype 'AXFR' (expected A, NS, CNAME, SOA, PTR, "
       "HINFO, MX, TXT, AAAA, SRV, NAPTR, DNAME, DS, DNSKEY, TLSA, SVCB, HTTPS, CAA, NSEC, "
       "NSEC3PARAM)"},
    {H "err-qtype-meta.yaml", H "err-qtype-meta.yaml:5: monitors.qtype: 'TYPE255' is not a query "
                                "type a monitor can ask for (TYPE1 to TYPE65535, no meta types)"},
    {H "err-rcode.yaml",
     H "err-rcode.yaml:5: monitors.rcode: unknown rcode 'NOERR' (expected NOERROR, FORMERR, "
       "SERVFAIL, NXDOMAIN, NOTIMP, REFUSED, YXDOMAIN, YXRRSET, NXRRSET, NOTAUTH, NOTZONE)"},
    {H "err-status.yaml", H "err-status.yaml:5: monitors.expect-status: '600' is not an HTTP "
                            "status code (100 to 599)"},
    {H "err-status-many.yaml",
     H "err-status-many.yaml:5: monitors.expect-status: at most 8 status codes"},
    {H "err-static-state.yaml",
     H "err-static-state.yaml:5: monitors.state: expected one of up, down; got 'maybe'"},
    {H "err-requires-space.yaml",
     H "err-requires-space.yaml:12: services.datacenters.addresses.requires: 'datacenter/ dc1' is "
       "not a target name (e.g. datacenter/NAME or service/NAME/DATACENTER/ADDRESS, without "
       "spaces)"},
    {H "err-type.yaml", H "err-type.yaml:5: monitors.type: expected one of tcp, http, https, dns, "
                          "exec, static, metrics; got 'ping'"},
    {H "err-metrics-no-value.yaml",
     H "err-metrics-no-value.yaml:5: monitors.load: a metrics monitor needs at least one value "
       "(connections, capacity, packet-rate, kbps, cpu, link-capacity)"},
    {H "err-metrics-key-on-http.yaml", H "err-metrics-key-on-http.yaml:5: monitors.web: "
                                         "'connections' does not apply to http monitors (only "
                                         "metrics)"},
    {H "err-metrics-format.yaml", H "err-metrics-format.yaml:5: monitors.format: expected one of "
                                    "prometheus, json, nginx-stub-status; got 'xml'"},
    {H "err-metrics-fall.yaml", H "err-metrics-fall.yaml:5: monitors.load: 'fall' does not apply "
                                  "to metrics monitors (only tcp, http, https, dns, exec, static)"},
    {H "err-metrics-negative.yaml",
     H "err-metrics-negative.yaml:7: monitors.capacity: -5 is not a number of 0 or more"},
    {H "err-metrics-as-monitor.yaml",
     H "err-metrics-as-monitor.yaml:10: services.monitor: 'load' is a metrics monitor: it reads "
       "load values and never decides up or down (use 'metrics: load' on a service)"},
    {H "err-metrics-not-metrics.yaml",
     H "err-metrics-not-metrics.yaml:11: services.datacenters.metrics: 'web' is a http monitor, "
       "not a metrics monitor (use 'monitor: web' for up/down checks)"},
    {H "err-type-missing.yaml",
     H "err-type-missing.yaml:6: missing required key 'type' in section 'monitors'"},
    {H "err-monitor-name.yaml",
     H "err-monitor-name.yaml:5: monitors: 'web/1' must not contain '/' or spaces"},
    {H "err-dc-probe-no-monitor.yaml",
     H "err-dc-probe-no-monitor.yaml:5: datacenters: 'dc1' has a 'probe' but no 'monitor'"},
    {H "err-dc-monitor-no-probe.yaml",
     H "err-dc-monitor-no-probe.yaml:8: datacenters: 'dc2' has a 'monitor' but no 'probe' (the "
       "address the link monitor checks, e.g. the ISP gateway)"},
    {H "err-dc-dns-no-qname.yaml",
     H "err-dc-dns-no-qname.yaml:7: datacenters: 'dc1' uses dns monitor 'dns1', which needs a "
       "'qname' here (there is no service name to ask for)"},
    {H "err-address-probe-no-monitor.yaml",
     H "err-address-probe-no-monitor.yaml:9: services.datacenters.addresses: 192.0.2.1 has a "
       "'probe' but no monitor (set 'monitor' on the service or the datacenter)"},
    {H "err-monitor-unknown-key.yaml", H "err-monitor-unknown-key.yaml:7: unknown key 'intervall' "
                                         "in section 'monitors' (did you mean 'interval'?)"},
    {H "err-monitors-type.yaml", H "err-monitors-type.yaml:5: section 'monitors' must be a "
                                   "mapping of monitor names to monitors, got a list"},
    {H "err-path.yaml", H "err-path.yaml:5: monitors.web: path 'health' must start with '/' and "
                          "contain no spaces (encode them as %20)"},
    {H "err-interval.yaml",
     H "err-interval.yaml:5: monitors.interval: 50ms is below the minimum 100ms"},
    {H "err-health-key.yaml", H "err-health-key.yaml:5: unknown key 'statefile' in section "
                                "'health' (did you mean 'state-file'?)"},
    {H "err-dup-monitor.yaml",
     H "err-dup-monitor.yaml:6: duplicate key 'web' in section 'monitors' (first at line 5)"},
};

#undef H

static void test_health_errors(void)
{
	for (size_t i = 0; i < sizeof(health_error_rows) / sizeof(health_error_rows[0]); i++) {
		static conf_t sentinel;
		char err[1024] = "";
		conf_t *conf = &sentinel; /* must be reset to NULL on failure */
		int ret = conf_load_file(health_error_rows[i].file, &conf, err, sizeof(err));
		bool same = strcmp(err, health_error_rows[i].error) == 0;
		CHECK(ret == STEER_ECONF && !conf && same, "%s -> \"%s\"%s%s",
		      health_error_rows[i].file, err, same ? "" : " expected ",
		      same ? "" : health_error_rows[i].error);
		if (ret == 0)
			conf_free(conf);
	}
}

/* ---- the forward section ---- */

static const char *upstream_str(const conf_upstream_t *u)
{
	static char buf[256];
	char a[STEER_SOCKADDR_STRLEN], s[STEER_SOCKADDR_STRLEN] = "-";
	if (u->source.sa.sa_family)
		steer_sockaddr_str(&u->source, s, sizeof(s));
	snprintf(buf, sizeof(buf), "%s %s from %s link %s", u->name,
	         steer_sockaddr_str(&u->address, a, sizeof(a)), s, u->link ? u->link : "-");
	return buf;
}

static const char *probe_str(const conf_fwd_group_t *g)
{
	static char buf[256];
	snprintf(buf, sizeof(buf), "%s %u/%u fall %u rise %u hold %u retry %u%s",
	         g->probe_name ? g->probe_name : "(root)", g->probe_interval, g->probe_timeout,
	         g->probe_fall, g->probe_rise, g->probe_hold_down, g->retry_timeout,
	         g->retry_adaptive ? " adaptive" : " fixed");
	return buf;
}

static void test_forward(void)
{
	conf_t *c = load_ok("conf/forward.yaml");
	if (!c)
		return;
	const conf_forward_t *f = &c->forward;
	CHECK(c->n_zones == 0, "a forwarder needs no zones: %zu", c->n_zones);
	CHECK(f->n_allow_recursion == 2 &&
	          strcmp(prefix_str(&f->allow_recursion[0]), "10.0.0.0/24") == 0 &&
	          strcmp(prefix_str(&f->allow_recursion[1]), "2001:db8:10::/48") == 0,
	      "allow-recursion: %zu prefixes", f->n_allow_recursion);
	CHECK(f->cache_max_size == 256u << 20 && f->cache_min_ttl == 0 &&
	          f->cache_max_ttl == 86400 && f->serve_stale == 30 && f->prefetch &&
	          f->cache_max_negative_ttl == 3600,
	      "cache: %llu bytes, ttl %u..%u, stale %u, prefetch %d",
	      (unsigned long long)f->cache_max_size, f->cache_min_ttl, f->cache_max_ttl,
	      f->serve_stale, f->prefetch);
	CHECK(f->use_0x20, "use-0x20: true");
	CHECK(f->n_groups == 2, "two groups: %zu", f->n_groups);
	if (f->n_groups != 2) {
		conf_free(c);
		return;
	}
	const conf_fwd_group_t *g = &f->groups[0];
	CHECK(str_eq(g->domain, ".") && str_eq(g->policy, "ordered") && g->line == 6,
	      "group 0: %s %s line %u", g->domain, g->policy, g->line);
	CHECK(strcmp(probe_str(g),
	             "probe.example.test 1000/500 fall 2 rise 3 hold 5000 retry 400 adaptive") == 0,
	      "group 0 probe: %s", probe_str(g));
	CHECK(g->n_upstreams == 2, "group 0: two upstreams: %zu", g->n_upstreams);
	if (g->n_upstreams == 2) {
		CHECK(strcmp(upstream_str(&g->upstreams[0]),
		             "link1 10.53.1.53:53 from 10.1.1.1:0 link -") == 0 &&
		          g->upstreams[0].line == 9,
		      "upstream 0: %s line %u", upstream_str(&g->upstreams[0]),
		      g->upstreams[0].line);
		CHECK(strcmp(upstream_str(&g->upstreams[1]),
		             "link2 10.53.2.53:53 from 10.1.2.1:0 link -") == 0,
		      "upstream 1: %s", upstream_str(&g->upstreams[1]));
	}
	g = &f->groups[1];
	CHECK(str_eq(g->domain, "corp.example.") && str_eq(g->policy, "fastest"),
	      "group 1: domain and policy canonical: %s %s", g->domain, g->policy);
	CHECK(strcmp(probe_str(g), "(root) 1000/500 fall 2 rise 3 hold 5000 retry 400 fixed") == 0,
	      "group 1: probe defaults, retry-adaptive false: %s", probe_str(g));
	CHECK(g->n_upstreams == 2, "group 1: two upstreams: %zu", g->n_upstreams);
	if (g->n_upstreams == 2) {
		CHECK(strcmp(upstream_str(&g->upstreams[0]),
		             "corp-a [2001:db8::53]:5353 from [2001:db8::1]:0 link eth2") == 0,
		      "upstream 2: %s", upstream_str(&g->upstreams[0]));
		CHECK(strcmp(upstream_str(&g->upstreams[1]),
		             "corp-b 10.9.9.9:5353 from - link -") == 0,
		      "upstream 3: %s", upstream_str(&g->upstreams[1]));
	}
	conf_free(c);

	/* prefetch and the other switches take on/off as well as true/false */
	char err[1024];
	const char *msg;
	c = NULL;
	int ret = load_text("forward:\n  cache: { prefetch: off, min-ttl: 5s, max-ttl: 60 }\n"
	                    "  use-0x20: on\n  groups:\n    - domain: .\n"
	                    "      retry-adaptive: off\n"
	                    "      upstreams: [{ name: a, address: 127.0.0.1 }]\n" ZONES_TEXT,
	                    &c, err, sizeof(err), &msg);
	CHECK(ret == 0 && c && !c->forward.prefetch && c->forward.use_0x20 &&
	          c->forward.cache_min_ttl == 5 && c->forward.cache_max_ttl == 60 &&
	          c->forward.n_groups == 1 && !c->forward.groups[0].retry_adaptive &&
	          c->n_zones == 1,
	      "on/off switches, bare TTLs in seconds, zones and forwarding together: %s", err);
	conf_free(c);
}

#define ONE_GROUP "forward:\n  groups:\n    - domain: .\n      upstreams:\n"
#define UP_A      "        - { name: a, address: 10.0.0.1 }\n"

static const struct {
	const char *text;
	const char *error; /* with its line */
} forward_error_rows[] = {
    {"forward:\n  allow-recursion: [10.0.0.0/24]\n" ZONES_TEXT,
     "2: forward: allow-recursion needs forward groups (there is nothing to forward to)"},
    {"forward:\n  allow-recursion: [10.0.0.1/24]\n",
     "2: forward.allow-recursion: invalid address prefix '10.0.0.1/24' (expected ADDRESS or "
     "ADDRESS/LENGTH with no bits set beyond LENGTH)"},
    {"forward:\n  cache: { max-size: 512K }\n" ZONES_TEXT,
     "2: forward.cache.max-size: 512K is below the minimum 1M"},
    {"forward:\n  cache: { max-size: 2T }\n" ZONES_TEXT,
     "2: forward.cache.max-size: 2T is above the maximum 1T"},
    {"forward:\n  cache: { max-size: 256MB }\n" ZONES_TEXT,
     "2: forward.cache.max-size: expected a size such as 512K, 256M or 1G (a bare number is "
     "bytes), got '256MB'"},
    {"forward:\n  cache:\n    max-ttl: 1h\n    min-ttl: 2h\n" ZONES_TEXT,
     "4: forward.cache.min-ttl: 2h is above the maximum 1h"},
    {"forward:\n  cache:\n    max-ttl: 1m\n    min-ttl: 2m\n" ZONES_TEXT,
     "4: forward.cache: min-ttl 2m is above max-ttl 1m"},
    {"forward:\n  cache: { serve-stale: 1500ms }\n" ZONES_TEXT,
     "2: forward.cache.serve-stale: 1500ms is not a whole number of seconds"},
    {"forward:\n  cache: { prefetch: yes }\n" ZONES_TEXT,
     "2: forward.cache.prefetch: expected one of on, off, true, false; got 'yes'"},
    {"forward:\n  cache: { prefech: on }\n" ZONES_TEXT,
     "2: unknown key 'prefech' in section 'forward.cache' (did you mean 'prefetch'?)"},
    {"forward:\n  cache: [1]\n" ZONES_TEXT,
     "2: forward.cache: expected a mapping of keys, got a list"},
    {"forward: [1]\n", "1: section 'forward' must be a mapping of keys, got a list"},
    {"forward:\n  groups:\n    - domain: .\n", "3: missing required key 'upstreams' in section "
                                               "'forward.groups'"},
    {"forward:\n  groups:\n    - upstreams: [{ name: a, address: 10.0.0.1 }]\n",
     "3: missing required key 'domain' in section 'forward.groups'"},
    {"forward:\n  groups:\n    - domain: a..b\n      upstreams: [{ name: a, address: 10.0.0.1 "
     "}]\n",
     "3: forward.groups.domain: invalid domain name 'a..b'"},
    {ONE_GROUP UP_A "    - domain: example.\n      upstreams: [{ name: b, address: 10.0.0.2 }]\n"
                    "    - domain: EXAMPLE\n      upstreams: [{ name: c, address: 10.0.0.3 }]\n",
     "8: duplicate forward group 'example.' (first defined at line 6)"},
    {"forward:\n  groups:\n    - domain: .\n      policy: first\n      upstreams: [{ name: a, "
     "address: 10.0.0.1 }]\n",
     "4: forward.groups.policy: expected one of ordered, round-robin, fastest; got 'first'"},
    {"forward:\n  groups:\n    - domain: .\n      upstreams: []\n",
     "4: forward.groups.upstreams: needs at least one entry"},
    {"forward:\n  groups:\n    - domain: .\n      upstreams: [10.0.0.1]\n",
     "4: forward.groups.upstreams: each entry must be a mapping (name: NAME, address: IP), got "
     "a single value"},
    {ONE_GROUP "        - { address: 10.0.0.1 }\n",
     "5: missing required key 'name' in section 'forward.groups.upstreams'"},
    {ONE_GROUP "        - { name: a }\n",
     "5: missing required key 'address' in section 'forward.groups.upstreams'"},
    {ONE_GROUP "        - { name: a b, address: 10.0.0.1 }\n",
     "5: forward.groups.upstreams.name: 'a b' may only contain letters, digits, '-', '_' and "
     "'.'"},
    {ONE_GROUP UP_A "        - { name: A, address: 10.0.0.2 }\n",
     "6: duplicate upstream 'A' (first defined at line 5)"},
    {ONE_GROUP UP_A "    - domain: corp.example\n      upstreams:\n"
                    "        - { name: a, address: 10.0.0.2 }\n",
     "8: duplicate upstream 'a' (first defined at line 5)"},
    {ONE_GROUP "        - { name: a, address: 10.0.0.300 }\n",
     "5: forward.groups.upstreams.address: invalid address '10.0.0.300' (expected IP, "
     "IP:PORT or IP@PORT, IPv6 with a port as \"[2001:db8::53]:53\")"},
    {ONE_GROUP "        - { name: a, address: \"10.0.0.1:0\" }\n",
     "5: forward.groups.upstreams.address: port 0 is not allowed in '10.0.0.1:0'"},
    {ONE_GROUP "        - { name: a, address: 10.0.0.1, source: \"10.1.1.1:53\" }\n",
     "5: forward.groups.upstreams.source: source '10.1.1.1:53' must be an address without a "
     "port (each query leaves from a random port)"},
    {ONE_GROUP "        - { name: a, address: 10.0.0.1, source: host1 }\n",
     "5: forward.groups.upstreams.source: invalid source address 'host1' (expected an IP "
     "address)"},
    {ONE_GROUP
     "        - name: a\n          address: 10.0.0.1\n          source: \"2001:db8::1\"\n",
     "7: forward.groups.upstreams: upstream 'a': source is IPv6 but address 10.0.0.1:53 is "
     "IPv4"},
    {ONE_GROUP "        - { name: a, address: 10.0.0.1, link: eth0/1 }\n",
     "5: forward.groups.upstreams.link: 'eth0/1' is not a network device name"},
    {ONE_GROUP "        - { name: a, address: 10.0.0.1, link: a-very-long-device }\n",
     "5: forward.groups.upstreams.link: 'a-very-long-device' is 18 bytes long, at most 15 are "
     "allowed"},
    {ONE_GROUP UP_A "      probe:\n        interval: 1s\n        timeout: 1s\n",
     "8: forward.groups: .: probe timeout 1s must be less than interval 1s"},
    {ONE_GROUP UP_A "      probe: { interval: 400ms }\n",
     "6: forward.groups: .: probe timeout 500ms must be less than interval 400ms"},
    {ONE_GROUP UP_A "      probe: { fall: 0 }\n",
     "6: forward.groups.probe.fall: 0 is out of range (1 to 100)"},
    {ONE_GROUP UP_A "      probe: { rise: 0 }\n",
     "6: forward.groups.probe.rise: 0 is out of range (1 to 100)"},
    {ONE_GROUP UP_A "      probe: { intervall: 2s }\n",
     "6: unknown key 'intervall' in section 'forward.groups.probe' (did you mean 'interval'?)"},
    {ONE_GROUP UP_A "      probe: { name: \"a.b..c\" }\n",
     "6: forward.groups.probe.name: invalid domain name 'a.b..c'"},
    {ONE_GROUP UP_A "      retry-timeout: 5s\n",
     "6: forward.groups.retry-timeout: 5s is above the maximum 3s"},
    {"forward:\n  groups:\n", "1: nothing to serve: no zones, and no forward groups"},
    {"forward:\n  cache: { max-size: 1G }\n",
     "1: nothing to serve: no zones, and no forward groups"},
    {"zones: []\nforward:\n  cache: { max-size: 1G }\n",
     "2: nothing to serve: no zones, and no forward groups"},
};

static void test_forward_errors(void)
{
	char err[1024];
	for (size_t i = 0; i < sizeof(forward_error_rows) / sizeof(forward_error_rows[0]); i++) {
		conf_t *c = NULL;
		const char *msg;
		int ret = load_text(forward_error_rows[i].text, &c, err, sizeof(err), &msg);
		const char *line = strchr(err, ':');
		line = line ? line + 1 : "";
		CHECK(ret == STEER_ECONF && !c && strcmp(line, forward_error_rows[i].error) == 0,
		      "forward row %zu -> \"%s\" expected \"%s\"", i, line,
		      forward_error_rows[i].error);
		conf_free(c);
	}
	/* 64 upstreams in a group, not 65 (line 69: the 65th) */
	static char many[8192];
	for (int extra = 0; extra < 2; extra++) {
		size_t used = (size_t)snprintf(many, sizeof(many), ONE_GROUP);
		for (int i = 0; i < 64 + extra; i++)
			used += (size_t)snprintf(many + used, sizeof(many) - used,
			                         "        - { name: u%d, address: 10.0.0.%d }\n", i,
			                         i + 1);
		conf_t *c = NULL;
		const char *msg;
		int ret = load_text(many, &c, err, sizeof(err), &msg);
		const char *line = strchr(err, ':');
		CHECK(extra ? ret == STEER_ECONF && line &&
		                  strcmp(line + 1,
		                         "69: forward.groups.upstreams: at most 64 upstreams "
		                         "per group") == 0
		            : ret == 0 && c->forward.groups[0].n_upstreams == 64,
		      "%d upstreams: %s", 64 + extra, ret ? err : "ok");
		conf_free(c);
	}
	/* the longest probe name that leaves room for the nonce label: 230 wire bytes */
	char text[1024], name[300];
	size_t n = 0;
	for (int i = 0; i < 3; i++)
		n += (size_t)snprintf(
		    name + n, sizeof(name) - n, "%.63s.",
		    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	snprintf(name + n, sizeof(name) - n, "%.36s", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
	for (int extra = 0; extra < 2; extra++) {
		conf_t *c = NULL;
		const char *msg;
		snprintf(text, sizeof(text), ONE_GROUP UP_A "      probe: { name: %s%s }\n", name,
		         extra ? "b" : "");
		int ret = load_text(text, &c, err, sizeof(err), &msg);
		CHECK(extra ? ret == STEER_ECONF && strstr(msg, "is too long for a probe name")
		            : ret == 0,
		      "probe name of %zu bytes: %s", strlen(name) + 2 + (size_t)extra,
		      ret ? msg : "ok");
		conf_free(c);
	}
}

static void test_forward_sizes(void)
{
	static const struct {
		const char *text;
		unsigned long long bytes; /* 0: an error */
	} rows[] = {
	    {"1M", 1ULL << 20},
	    {"256M", 256ULL << 20},
	    {"256m", 256ULL << 20},
	    {"2048K", 2ULL << 20},
	    {"1G", 1ULL << 30},
	    {"1T", 1ULL << 40},
	    {"1048576", 1ULL << 20},
	    {"1048575", 0},
	    {"1.5G", 0},
	    {"G", 0},
	    {"-1M", 0},
	    {"99999999999999999999G", 0},
	    {"17179869184G", 0},
	    {"1 G", 0},
	};
	char text[512], err[1024];
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		conf_t *c = NULL;
		const char *msg;
		snprintf(text, sizeof(text), "forward:\n  cache: { max-size: \"%s\" }\n" ZONES_TEXT,
		         rows[i].text);
		int ret = load_text(text, &c, err, sizeof(err), &msg);
		if (rows[i].bytes)
			CHECK(ret == 0 && c->forward.cache_max_size == rows[i].bytes,
			      "max-size %s -> %llu (%s)", rows[i].text,
			      c ? (unsigned long long)c->forward.cache_max_size : 0ULL, err);
		else
			CHECK(ret == STEER_ECONF &&
			          strncmp(msg, "forward.cache.max-size: ", 24) == 0,
			      "max-size %s refused: %s", rows[i].text, msg);
		conf_free(c);
	}
}

static const struct {
	const char *text;
	int ret;
	const char *result; /* normalised address, or the error message */
} listen_rows[] = {
    {"127.0.0.1:5353", 0, "127.0.0.1:5353"},
    {"192.0.2.1", 0, "192.0.2.1:53"},
    {"[::1]:5353", 0, "[::1]:5353"},
    {"[2001:db8::1]", 0, "[2001:db8::1]:53"},
    {"::1", 0, "[::1]:53"},
    {"localhost:53", STEER_EINVAL,
     "invalid address 'localhost:53' (expected IP or IP:PORT, IPv6 as [::1]:PORT)"},
    {"127.0.0.1:", STEER_EINVAL,
     "invalid address '127.0.0.1:' (expected IP or IP:PORT, IPv6 as [::1]:PORT)"},
    {"[::1:53", STEER_EINVAL,
     "invalid address '[::1:53' (expected IP or IP:PORT, IPv6 as [::1]:PORT)"},
    {"1.2.3.4:65536", STEER_EINVAL,
     "invalid address '1.2.3.4:65536' (expected IP or IP:PORT, IPv6 as [::1]:PORT)"},
    {"[::1]:0", STEER_EINVAL, "port 0 is not allowed in '[::1]:0'"},
    {"", STEER_EINVAL, "invalid address '' (expected IP or IP:PORT, IPv6 as [::1]:PORT)"},
};

static void test_add_listen(void)
{
	conf_t *c = conf_new_default();
	size_t good = 0;
	for (size_t i = 0; i < sizeof(listen_rows) / sizeof(listen_rows[0]); i++) {
		char err[256] = "";
		int ret = conf_add_listen(c, listen_rows[i].text, err, sizeof(err));
		const char *got = ret == 0 && c->n_listen > good ? addr_str(&c->listen[good]) : err;
		CHECK(ret == listen_rows[i].ret && strcmp(got, listen_rows[i].result) == 0,
		      "conf_add_listen(\"%s\") -> %d \"%s\"", listen_rows[i].text, ret, got);
		good += ret == 0;
	}
	CHECK(c->n_listen == good, "the first --listen replaced the default: %zu addresses",
	      c->n_listen);
	char err[256] = "";
	CHECK(conf_add_listen(c, "127.0.0.1:5353", err, sizeof(err)) == STEER_EINVAL &&
	          strcmp(err, "duplicate address '127.0.0.1:5353'") == 0,
	      "duplicate listen refused: %s", err);
	conf_free(c);
}

static void test_add_zone(void)
{
	static const struct {
		const char *arg;
		int ret;
		const char *err;
	} rows[] = {
	    {"example.test=zones/example.test.zone", 0, ""},
	    {"other.test.=/abs/other.zone", 0, ""},
	    {"example.test", STEER_EINVAL, "expected DOMAIN=FILE, got 'example.test'"},
	    {"=file.zone", STEER_EINVAL, "expected DOMAIN=FILE, got '=file.zone'"},
	    {"example.org=", STEER_EINVAL, "expected DOMAIN=FILE, got 'example.org='"},
	    {"a..b=x.zone", STEER_EINVAL, "invalid domain name 'a..b'"},
	    {"EXAMPLE.TEST.=again.zone", STEER_EINVAL, "duplicate zone 'EXAMPLE.TEST.'"},
	    {"sub.example.test=sub.zone", 0, ""},
	};
	conf_t *c = conf_new_default();
	char err[256];
	CHECK(conf_validate(c, err, sizeof(err)) == STEER_ECONF &&
	          strcmp(err, "no zones configured (and no forward groups)") == 0,
	      "validate without zones: %s", err);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		err[0] = '\0';
		int ret = conf_add_zone_arg(c, rows[i].arg, err, sizeof(err));
		CHECK(ret == rows[i].ret && strcmp(err, rows[i].err) == 0,
		      "conf_add_zone_arg(\"%s\") -> %d \"%s\"", rows[i].arg, ret, err);
	}
	CHECK(c->n_zones == 3, "three zones added: %zu", c->n_zones);
	if (c->n_zones == 3) {
		CHECK(str_eq(c->zones[0].file, "zones/example.test.zone"),
		      "quick-mode file kept relative to the cwd: %s", c->zones[0].file);
		CHECK(str_eq(c->zones[1].domain, "other.test.") &&
		          str_eq(c->zones[1].file, "/abs/other.zone"),
		      "zone 1: %s=%s", c->zones[1].domain, c->zones[1].file);
		CHECK(c->zones[0].n_xfr_allow == 0, "quick-mode zones allow no transfers");
	}
	CHECK(conf_validate(c, err, sizeof(err)) == 0, "validate with default listen and zones");
	conf_free(c);
}

static void test_add_forward(void)
{
	static const struct {
		const char *arg;
		int ret;
		const char *result; /* the upstream added, or the error */
	} rows[] = {
	    {"10.53.1.53", 0, "upstream1 10.53.1.53:53 from - link -"},
	    {"10.53.2.53:5353@10.1.2.1", 0, "upstream2 10.53.2.53:5353 from 10.1.2.1:0 link -"},
	    {"[2001:db8::53]:53@2001:db8::1", 0,
	     "upstream3 [2001:db8::53]:53 from [2001:db8::1]:0 link -"},
	    {"2001:db8::54", 0, "upstream4 [2001:db8::54]:53 from - link -"},
	    {"10.53.1.53@2001:db8::1", STEER_EINVAL,
	     "source is IPv6 but address 10.53.1.53:53 is IPv4"},
	    {"10.53.1.53@10.1.1.1:53", STEER_EINVAL,
	     "source '10.1.1.1:53' must be an address without a port (each query leaves from a "
	     "random port)"},
	    {"resolver.example", STEER_EINVAL,
	     "invalid address 'resolver.example' (expected IP, IP:PORT or IP@PORT, IPv6 with "
	     "a port as \"[2001:db8::53]:53\")"},
	    {"10.53.1.53:0", STEER_EINVAL, "port 0 is not allowed in '10.53.1.53:0'"},
	    {"10.53.1.53@", STEER_EINVAL, "invalid source address '' (expected an IP address)"},
	    {"", STEER_EINVAL,
	     "invalid address '' (expected IP, IP:PORT or IP@PORT, IPv6 with a port as "
	     "\"[2001:db8::53]:53\")"},
	};
	conf_t *c = conf_new_default();
	size_t good = 0;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char err[256] = "";
		int ret = conf_add_forward_arg(c, rows[i].arg, err, sizeof(err));
		const conf_fwd_group_t *g = c->forward.n_groups ? &c->forward.groups[0] : NULL;
		const char *got = ret == 0 && g && g->n_upstreams > good
		                      ? upstream_str(&g->upstreams[good])
		                      : err;
		CHECK(ret == rows[i].ret && strcmp(got, rows[i].result) == 0,
		      "conf_add_forward_arg(\"%s\") -> %d \"%s\"", rows[i].arg, ret, got);
		good += ret == 0;
	}
	CHECK(c->forward.n_groups == 1, "one group: %zu", c->forward.n_groups);
	if (c->forward.n_groups == 1) {
		const conf_fwd_group_t *g = &c->forward.groups[0];
		CHECK(str_eq(g->domain, ".") && str_eq(g->policy, "ordered") &&
		          g->n_upstreams == good,
		      "group . ordered with %zu upstreams in order", g->n_upstreams);
		CHECK(strcmp(probe_str(g), "(root) 1000/500 fall 2 rise 3 hold 5000 retry 400 "
		                           "adaptive") == 0,
		      "quick-mode group: default probe settings: %s", probe_str(g));
	}
	char err[256];
	CHECK(conf_validate(c, err, sizeof(err)) == 0, "--forward without --zone is valid: %s",
	      err);
	for (size_t i = good; i < 64; i++)
		CHECK(conf_add_forward_arg(c, "10.9.9.9", err, sizeof(err)) == 0, "upstream %zu",
		      i + 1);
	CHECK(conf_add_forward_arg(c, "10.9.9.9", err, sizeof(err)) == STEER_EINVAL &&
	          strcmp(err, "at most 64 upstreams") == 0,
	      "a 65th upstream is refused: %s", err);
	conf_free(c);
}

static void test_add_allow_recursion(void)
{
	static const struct {
		const char *arg;
		int ret;
	} rows[] = {
	    {"10.0.0.0/24", 0},
	    {"2001:db8:10::/48", 0},
	    {"192.0.2.1", 0},
	    {"10.0.0.1/24", STEER_EINVAL},
	    {"10.0.0.0/33", STEER_EINVAL},
	    {"lan", STEER_EINVAL},
	};
	conf_t *c = conf_new_default();
	char err[256];
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		err[0] = '\0';
		int ret = conf_add_allow_recursion_arg(c, rows[i].arg, err, sizeof(err));
		CHECK(ret == rows[i].ret && (ret == 0) == (err[0] == '\0'),
		      "conf_add_allow_recursion_arg(\"%s\") -> %d \"%s\"", rows[i].arg, ret, err);
	}
	CHECK(c->forward.n_allow_recursion == 3 &&
	          strcmp(prefix_str(&c->forward.allow_recursion[2]), "192.0.2.1/32") == 0,
	      "three prefixes, an address is a host prefix: %zu", c->forward.n_allow_recursion);
	CHECK(strcmp(err, "invalid address prefix 'lan' (expected ADDRESS or ADDRESS/LENGTH with "
	                  "no bits set beyond LENGTH)") == 0,
	      "the error names the prefix: %s", err);
	CHECK(conf_validate(c, err, sizeof(err)) == STEER_ECONF &&
	          strcmp(err, "no zones configured (and no forward groups)") == 0,
	      "allow-recursion alone serves nothing: %s", err);
	CHECK(conf_add_zone_arg(c, "example.test=x.zone", err, sizeof(err)) == 0, "add a zone");
	CHECK(conf_validate(c, err, sizeof(err)) == STEER_ECONF &&
	          strcmp(err, "allow-recursion needs forward groups (there is nothing to forward "
	                      "to)") == 0,
	      "--allow-recursion without --forward: %s", err);
	CHECK(conf_add_forward_arg(c, "10.53.1.53", err, sizeof(err)) == 0 &&
	          conf_validate(c, err, sizeof(err)) == 0,
	      "with a --forward it is valid: %s", err);
	conf_free(c);
}

static void test_restart_changes(void)
{
	conf_t *a = load_ok("conf/valid.yaml");
	conf_t *b = load_ok("conf/valid.yaml");
	conf_t *d = conf_new_default();
	if (!a || !b) {
		conf_free(a);
		conf_free(b);
		conf_free(d);
		return;
	}
	char buf[256] = "x";
	conf_restart_only_changes(a, b, buf, sizeof(buf));
	CHECK(strcmp(buf, "") == 0, "same file: no restart-only changes (\"%s\")", buf);

	b->udp_max_payload = 4096;
	b->tcp_idle_timeout = 1;
	b->log_level = LOG_LEVEL_ERR;
	conf_restart_only_changes(a, b, buf, sizeof(buf));
	CHECK(strcmp(buf, "") == 0, "reloadable keys are not reported (\"%s\")", buf);

	conf_t *g = load_ok("conf/gslb.yaml"), *gm = load_ok("conf/gslb-minimal.yaml");
	if (g && gm) {
		conf_restart_only_changes(g, gm, buf, sizeof(buf));
		CHECK(strcmp(buf, "") == 0,
		      "GSLB sections differ but are reloadable: nothing reported (\"%s\")", buf);
	}
	conf_free(g);
	conf_free(gm);

	b->workers = 7;
	b->listen[1].sin6.sin6_port = htons(5454);
	free(b->group);
	b->group = NULL;
	conf_restart_only_changes(a, b, buf, sizeof(buf));
	CHECK(strcmp(buf, "listen,workers,group") == 0, "listen, workers, group: \"%s\"", buf);

	conf_restart_only_changes(a, d, buf, sizeof(buf));
	CHECK(strcmp(buf, "listen,workers,tcp-workers,user,group,control-socket,pid-file") == 0,
	      "valid vs defaults: \"%s\"", buf);

	char small[10];
	conf_restart_only_changes(a, d, small, sizeof(small));
	CHECK(strcmp(small, "listen") == 0, "a short buffer keeps whole names only: \"%s\"", small);

	/* the forwarder's cache and groups are built at start; allow-recursion reloads */
	conf_t *f1 = load_ok("conf/forward.yaml"), *f2 = load_ok("conf/forward.yaml");
	if (f1 && f2) {
		f2->forward.n_allow_recursion = 1;
		conf_restart_only_changes(f1, f2, buf, sizeof(buf));
		CHECK(strcmp(buf, "") == 0, "allow-recursion is reloadable: \"%s\"", buf);
		f2->forward.cache_max_size *= 2;
		f2->forward.use_0x20 = false;
		f2->forward.groups[1].upstreams[1].address.sin.sin_port = htons(53);
		conf_restart_only_changes(f1, f2, buf, sizeof(buf));
		CHECK(strcmp(buf, "forward.use-0x20,forward.cache.max-size,forward.groups") == 0,
		      "forward changes that need a restart: \"%s\"", buf);
		f2->forward.groups[1].upstreams[1].address.sin.sin_port = htons(5353);
		f2->forward.groups[0].probe_rise = 5;
		conf_restart_only_changes(f1, f2, buf, sizeof(buf));
		CHECK(strstr(buf, "forward.groups") != NULL, "a probe setting changed: \"%s\"",
		      buf);
	}
	conf_free(f1);
	conf_free(f2);
	conf_free(a);
	conf_free(b);
	conf_free(d);
}

static char *read_all(FILE *f, size_t *len)
{
	size_t cap = 4096, n = 0, got;
	char *buf = malloc(cap);
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			char *bigger = realloc(buf, cap *= 2);
			if (!bigger) {
				free(buf);
				return NULL;
			}
			buf = bigger;
		}
	}
	*len = n;
	return buf;
}

static void test_reference(void)
{
	char *generated = NULL, *file = NULL;
	size_t glen = 0, flen = 0;
	FILE *mem = open_memstream(&generated, &glen);
	conf_write_reference(mem);
	fclose(mem);

	FILE *f = fopen("../../docs/configuration.md", "r");
	CHECK(f != NULL, "docs/configuration.md exists");
	if (f) {
		file = read_all(f, &flen);
		fclose(f);
	}
	bool same = file && glen == flen && memcmp(generated, file, glen) == 0;
	CHECK(same, "docs/configuration.md matches the schema (regenerate with `steerd "
	            "--config-reference > docs/configuration.md`)");
	CHECK(strstr(generated, "### `server.listen`") &&
	          strstr(generated, "### `zones.xfr-allow`") &&
	          strstr(generated, "### `datacenters.coords`") &&
	          strstr(generated, "### `maps.geoip.rules.asn`") &&
	          strstr(generated, "### `services.datacenters.addresses.weight`") &&
	          strstr(generated, "### `gslb.overrides.state`") &&
	          strstr(generated, "### `forward.groups.probe.hold-down`") &&
	          strstr(generated, "### `forward.cache.max-size`") &&
	          strstr(generated, "## `whoami`") &&
	          strstr(generated, "### `cluster.self-check.return-path`") &&
	          strstr(generated, "### `server.identity`"),
	      "reference documents every section");
	free(generated);
	free(file);
}

/* ---- cluster ---- */

#define CLUSTER_MIN "cluster:\n  node-id: n1\n  service-addresses: 192.0.2.53\n"

static const char *ip_only(const steer_sockaddr_t *a)
{
	static char buf[STEER_SOCKADDR_STRLEN];
	const void *raw = a->sa.sa_family == AF_INET6 ? (const void *)&a->sin6.sin6_addr
	                                              : (const void *)&a->sin.sin_addr;
	if (a->sa.sa_family == 0)
		return "-";
	inet_ntop(a->sa.sa_family, raw, buf, sizeof(buf));
	return buf;
}

static void test_cluster(void)
{
	char err[1024];
	const char *msg;
	conf_t *c = NULL;
	/* the issue's contract, as written there */
	int ret = load_text(ZONES_TEXT "cluster:\n"
	                               "  node-id: n1\n"
	                               "  service-addresses: [192.0.2.53, \"2001:db8::53\"]\n"
	                               "  interface: vip0\n"
	                               "  unicast: 10.53.0.11\n"
	                               "  announce: interface\n"
	                               "  bird: { socket: /run/bird/bird.ctl, protocol: vip }\n"
	                               "  self-check: { interval: 100ms, fall: 3, rise: 5, "
	                               "hold-down: 2s }\n",
	                    &c, err, sizeof(err), &msg);
	CHECK(ret == 0 && c, "the contract's example loads: %s", err);
	if (c) {
		const conf_cluster_t *cc = &c->cluster;
		CHECK(cc->enabled && str_eq(cc->node_id, "n1") && cc->n_service == 2 &&
		          strcmp(addr_str(&cc->service[0]), "192.0.2.53:0") == 0 &&
		          strcmp(addr_str(&cc->service[1]), "[2001:db8::53]:0") == 0,
		      "node id and service addresses: %s, %zu", cc->node_id, cc->n_service);
		CHECK(str_eq(cc->interface, "vip0") &&
		          strcmp(ip_only(&cc->unicast4), "10.53.0.11") == 0 &&
		          cc->unicast6.sa.sa_family == 0 && steer_sockaddr_port(&cc->unicast4) == 0,
		      "interface %s, unicast %s", cc->interface, ip_only(&cc->unicast4));
		CHECK(cc->announce == CONF_ANNOUNCE_INTERFACE &&
		          str_eq(cc->bird_socket, "/run/bird/bird.ctl") &&
		          str_eq(cc->bird_protocol, "vip"),
		      "announce interface, bird %s %s", cc->bird_socket, cc->bird_protocol);
		CHECK(cc->check_interval == 100 && cc->check_timeout == 80 && cc->check_fall == 3 &&
		          cc->check_rise == 5 && cc->check_hold_down == 2000,
		      "self-check %u/%u fall %u rise %u hold %u", cc->check_interval,
		      cc->check_timeout, cc->check_fall, cc->check_rise, cc->check_hold_down);
		CHECK(cc->check_reload && !cc->check_forwarder && cc->check_routes &&
		          cc->n_return_path == 0,
		      "self-check switches default to reload on, forwarder off, routes on");
		CHECK(cc->frr_table == 254 &&
		          str_eq(cc->keepalived_track_file, "/run/steer/vrrp-track") &&
		          cc->liveness_timeout == 300 && cc->drain_quiet == 500 &&
		          cc->drain_timeout == 30000,
		      "defaults: table %u, track %s, liveness %u, drain %u/%u", cc->frr_table,
		      cc->keepalived_track_file, cc->liveness_timeout, cc->drain_quiet,
		      cc->drain_timeout);
		CHECK(cc->line == 5, "cluster at line %u", cc->line);
		CHECK(!c->identity && str_eq(conf_identity(c), "n1"),
		      "identity defaults to the node id: %s", conf_identity(c));
	}
	conf_free(c);

	/* every added key */
	c = NULL;
	ret = load_text(ZONES_TEXT "server:\n  identity: dns-a.example (rack 4)\n"
	                           "cluster:\n"
	                           "  node-id: node-1.dc_a\n"
	                           "  service-addresses: \"2001:db8::53\"\n"
	                           "  unicast: [\"2001:db8:1::11\", 10.53.0.11]\n"
	                           "  announce: frr\n"
	                           "  frr: { table: 4294967295 }\n"
	                           "  keepalived: { track-file: run/track }\n"
	                           "  liveness-timeout: 1s\n"
	                           "  drain: { quiet: 1s, timeout: 1m }\n"
	                           "  self-check:\n"
	                           "    interval: 250ms\n"
	                           "    timeout: 200ms\n"
	                           "    reload: off\n"
	                           "    forwarder: on\n"
	                           "    routes: off\n"
	                           "    return-path: [\"2001:db8:99::1\", \"2001:db8:98::1\"]\n",
	                &c, err, sizeof(err), &msg);
	CHECK(ret == 0 && c, "every cluster key: %s", err);
	if (c) {
		const conf_cluster_t *cc = &c->cluster;
		CHECK(strcmp(ip_only(&cc->unicast4), "10.53.0.11") == 0 &&
		          strcmp(ip_only(&cc->unicast6), "2001:db8:1::11") == 0,
		      "unicast list: one address per family");
		CHECK(cc->announce == CONF_ANNOUNCE_FRR && cc->frr_table == 4294967295U,
		      "frr table %u", cc->frr_table);
		CHECK(str_eq(cc->keepalived_track_file, "run/track") &&
		          str_eq(cc->interface, "vip0") && !cc->bird_protocol,
		      "track file kept relative to the config folder (the cwd here): %s",
		      cc->keepalived_track_file);
		CHECK(cc->liveness_timeout == 1000 && cc->drain_quiet == 1000 &&
		          cc->drain_timeout == 60000 && cc->check_interval == 250 &&
		          cc->check_timeout == 200,
		      "durations with units");
		CHECK(!cc->check_reload && cc->check_forwarder && !cc->check_routes &&
		          cc->n_return_path == 2 &&
		          strcmp(ip_only(&cc->return_path[1]), "2001:db8:98::1") == 0,
		      "switches and return-path");
		CHECK(str_eq(conf_identity(c), "dns-a.example (rack 4)"),
		      "server.identity wins over the node id: %s", conf_identity(c));
	}
	conf_free(c);

	/* keepalived holds the addresses: no holder interface unless one is given */
	const char *kinds[] = {"", "  interface: vip1\n"};
	for (size_t i = 0; i < 2; i++) {
		char text[512];
		snprintf(text, sizeof(text), ZONES_TEXT CLUSTER_MIN "  announce: keepalived\n%s",
		         kinds[i]);
		c = NULL;
		ret = load_text(text, &c, err, sizeof(err), &msg);
		CHECK(ret == 0 && c &&
		          (i ? str_eq(c->cluster.interface, "vip1") : !c->cluster.interface),
		      "keepalived, interface %s: %s", i ? "given" : "not given",
		      ret ? err : (c->cluster.interface ? c->cluster.interface : "(none)"));
		conf_free(c);
	}

	/* the classic anycast layout: the addresses on lo, a BIRD protocol announces them */
	c = NULL;
	ret = load_text(ZONES_TEXT CLUSTER_MIN "  interface: lo\n  announce: bird\n"
	                                       "  bird: { protocol: vip }\n",
	                &c, err, sizeof(err), &msg);
	CHECK(ret == 0 && c && str_eq(c->cluster.interface, "lo"),
	      "lo holds the addresses with announce bird: %s", ret ? err : "ok");
	conf_free(c);

	/* no cluster section: no identity, nothing enabled */
	c = NULL;
	ret = load_text(ZONES_TEXT, &c, err, sizeof(err), &msg);
	CHECK(ret == 0 && c && !c->cluster.enabled && !conf_identity(c),
	      "without a cluster section there is no identity");
	conf_free(c);
	c = conf_new_default();
	CHECK(!c->cluster.enabled && !conf_identity(c), "quick mode: no cluster, no identity");
	conf_free(c);
}

static const struct {
	const char *text;  /* after ZONES_TEXT */
	const char *error; /* with its line (ZONES_TEXT takes lines 1-3) */
} cluster_error_rows[] = {
    {"cluster:\n", "4: missing required key 'node-id' in section 'cluster'"},
    {"cluster: [n1]\n", "4: section 'cluster' must be a mapping of keys, got a list"},
    {"cluster:\n  service-addresses: 192.0.2.53\n",
     "5: missing required key 'node-id' in section 'cluster'"},
    {"cluster:\n  node-id: n1\n", "5: missing required key 'service-addresses' in section "
                                  "'cluster'"},
    {CLUSTER_MIN "  nodeid: n2\n",
     "7: unknown key 'nodeid' in section 'cluster' (did you mean 'node-id'?)"},
    {CLUSTER_MIN "  self-check: { intervall: 1s }\n",
     "7: unknown key 'intervall' in section 'cluster.self-check' (did you mean 'interval'?)"},
    {CLUSTER_MIN "  bird: { protocl: vip }\n",
     "7: unknown key 'protocl' in section 'cluster.bird' (did you mean 'protocol'?)"},
    {"cluster:\n  node-id: \"n 1\"\n  service-addresses: 192.0.2.53\n",
     "5: cluster.node-id: 'n 1' may only contain letters, digits, '-', '_' and '.'"},
    {"cluster:\n  node-id: \"\"\n  service-addresses: 192.0.2.53\n",
     "5: cluster.node-id: must not be empty"},
    {"cluster:\n  node-id: "
     "n123456789012345678901234567890123456789012345678901234567890123\n"
     "  service-addresses: 192.0.2.53\n",
     "5: cluster.node-id: 'n123456789012345678901234567890123456789012345678901234567890123' "
     "is 64 bytes long, at most 63 are allowed"},
    {"cluster:\n  node-id: n1\n  service-addresses: []\n",
     "6: cluster.service-addresses: needs at least one value"},
    {"cluster:\n  node-id: n1\n  service-addresses:\n",
     "6: cluster.service-addresses: needs at least one value"},
    {"cluster:\n  node-id: n1\n  service-addresses: [192.0.2.53, 192.0.2.54, 192.0.2.53]\n",
     "6: cluster.service-addresses: duplicate address '192.0.2.53'"},
    {"cluster:\n  node-id: n1\n  service-addresses: \"192.0.2.53:53\"\n",
     "6: cluster.service-addresses: '192.0.2.53:53' must be an address without a port"},
    {"cluster:\n  node-id: n1\n  service-addresses: \"[2001:db8::53]:53\"\n",
     "6: cluster.service-addresses: '[2001:db8::53]:53' must be an address without a port"},
    {"cluster:\n  node-id: n1\n  service-addresses: dns.example\n",
     "6: cluster.service-addresses: invalid address 'dns.example' (expected an IP address)"},
    {"cluster:\n  node-id: n1\n  service-addresses: 0.0.0.0\n",
     "6: cluster.service-addresses: '0.0.0.0' is the unspecified address"},
    {"cluster:\n  node-id: n1\n  service-addresses: [192.0.2.53, \"::\"]\n",
     "6: cluster.service-addresses: '::' is the unspecified address"},
    {"cluster:\n  node-id: n1\n  service-addresses: 224.0.0.53\n",
     "6: cluster.service-addresses: '224.0.0.53' is a multicast address"},
    {"cluster:\n  node-id: n1\n  service-addresses: \"ff02::53\"\n",
     "6: cluster.service-addresses: 'ff02::53' is a multicast address"},
    {"cluster:\n  node-id: n1\n  service-addresses: \"::ffff:192.0.2.53\"\n",
     "6: cluster.service-addresses: '::ffff:192.0.2.53' is an IPv4-mapped address; write it "
     "as 192.0.2.53"},
    {"cluster:\n  node-id: n1\n  service-addresses: \"fe80::53\"\n",
     "6: cluster.service-addresses: 'fe80::53' is a link-local address (never routed); use a "
     "global or unique local address"},
    {CLUSTER_MIN "  unicast: \"fe80::1\"\n",
     "7: cluster.unicast: 'fe80::1' is a link-local address (never routed); use a global or "
     "unique local address"},
    {"cluster:\n  node-id: n1\n  service-addresses: [[192.0.2.53]]\n",
     "6: cluster.service-addresses: list items must be single values (quote IPv6 addresses)"},
    {CLUSTER_MIN "  interface: eth0/1\n",
     "7: cluster.interface: 'eth0/1' is not a network device name (no '/', ':' or spaces)"},
    {CLUSTER_MIN "  interface: \"vip 0\"\n",
     "7: cluster.interface: 'vip 0' is not a network device name (no '/', ':' or spaces)"},
    {CLUSTER_MIN "  interface: eth0:1\n",
     "7: cluster.interface: 'eth0:1' is not a network device name (no '/', ':' or spaces)"},
    {CLUSTER_MIN "  interface: ..\n",
     "7: cluster.interface: '..' is not a network device name (no '/', ':' or spaces)"},
    {CLUSTER_MIN "  interface: lo\n",
     "7: cluster.interface: announce interface takes the device down to withdraw, and 'lo' "
     "holds 127.0.0.1 and ::1; use a device of its own (the default vip0)"},
    {CLUSTER_MIN "  interface: vip-interface-16\n",
     "7: cluster.interface: 'vip-interface-16' is 16 bytes long, at most 15 are allowed"},
    {CLUSTER_MIN "  unicast: 192.0.2.53\n",
     "7: cluster.unicast: 192.0.2.53 is a service address; the unicast address must be the "
     "node's own (replies to it must come back to this node)"},
    {CLUSTER_MIN "  unicast: [10.0.0.1, 10.0.0.2]\n",
     "7: cluster.unicast: at most one IPv4 and one IPv6 address ('10.0.0.1' and '10.0.0.2' are "
     "both IPv4)"},
    {CLUSTER_MIN "  unicast:\n    - \"2001:db8::1\"\n    - 10.0.0.1\n    - \"2001:db8::2\"\n",
     "10: cluster.unicast: at most one IPv4 and one IPv6 address ('2001:db8::1' and "
     "'2001:db8::2' are both IPv6)"},
    {CLUSTER_MIN "  unicast: \"10.0.0.1:53\"\n",
     "7: cluster.unicast: '10.0.0.1:53' must be an address without a port"},
    {CLUSTER_MIN "  unicast: 0.0.0.0\n", "7: cluster.unicast: '0.0.0.0' is the unspecified "
                                         "address"},
    {CLUSTER_MIN "  announce: bgp\n",
     "7: cluster.announce: expected one of interface, bird, frr, keepalived; got 'bgp'"},
    {CLUSTER_MIN "  announce: bird\n",
     "7: cluster: announce bird needs bird.protocol (the BIRD protocol to enable and disable)"},
    {CLUSTER_MIN "  announce: bird\n  bird: { socket: /run/bird.ctl }\n",
     "8: cluster: announce bird needs bird.protocol (the BIRD protocol to enable and disable)"},
    {CLUSTER_MIN "  announce: bird\n  bird:\n    protocol: 1vip\n",
     "9: cluster.bird.protocol: '1vip' is not a BIRD protocol name (a letter or '_', then "
     "letters, digits and '_')"},
    {CLUSTER_MIN "  bird: { protocol: vip-1 }\n",
     "7: cluster.bird.protocol: 'vip-1' is not a BIRD protocol name (a letter or '_', then "
     "letters, digits and '_')"},
    {CLUSTER_MIN "  bird: [vip]\n", "7: cluster.bird: expected a mapping of keys, got a list"},
    {CLUSTER_MIN "  frr:\n    table: 255\n",
     "8: cluster.frr.table: 255 is the kernel's local table (where it keeps the node's own "
     "addresses); use 254 (main) or a table of your own"},
    {CLUSTER_MIN "  frr: { table: 0 }\n",
     "7: cluster.frr.table: 0 is out of range (1 to 4294967295)"},
    {CLUSTER_MIN "  frr: { table: 4294967296 }\n",
     "7: cluster.frr.table: 4294967296 is out of range (1 to 4294967295)"},
    {CLUSTER_MIN "  self-check:\n    interval: 100ms\n    timeout: 100ms\n",
     "9: cluster.self-check: timeout 100ms must be less than interval 100ms"},
    {CLUSTER_MIN "  self-check: { interval: 50ms }\n",
     "7: cluster.self-check: timeout 80ms must be less than interval 50ms"},
    {CLUSTER_MIN "  self-check: { fall: 0 }\n",
     "7: cluster.self-check.fall: 0 is out of range (1 to 100)"},
    {CLUSTER_MIN "  self-check: { rise: 0 }\n",
     "7: cluster.self-check.rise: 0 is out of range (1 to 100)"},
    {CLUSTER_MIN "  self-check: { hold-down: 2h }\n",
     "7: cluster.self-check.hold-down: 2h is above the maximum 1h"},
    {CLUSTER_MIN "  self-check: { interval: 1h }\n",
     "7: cluster.self-check.interval: 1h is above the maximum 5s"},
    {CLUSTER_MIN "  self-check: { routes: yes }\n",
     "7: cluster.self-check.routes: expected one of on, off, true, false; got 'yes'"},
    {CLUSTER_MIN "  self-check:\n    interval: 200ms\n",
     "8: cluster.liveness-timeout: 300ms must be more than twice self-check.interval 200ms (a "
     "heartbeat goes every interval; one late heartbeat must not withdraw the node)"},
    {CLUSTER_MIN "  liveness-timeout: 200ms\n",
     "7: cluster.liveness-timeout: 200ms must be more than twice self-check.interval 100ms (a "
     "heartbeat goes every interval; one late heartbeat must not withdraw the node)"},
    {CLUSTER_MIN "  liveness-timeout: 11s\n",
     "7: cluster.liveness-timeout: 11s is above the maximum 10s"},
    {CLUSTER_MIN "  self-check: { return-path: \"2001:db8::1\" }\n",
     "7: cluster.self-check.return-path: 2001:db8::1 is IPv6 but no service address is"},
    {CLUSTER_MIN "  self-check: { return-path: 127.0.0.1 }\n",
     "7: cluster.self-check.return-path: '127.0.0.1' is a loopback address (always routable, "
     "so it proves nothing about the return path)"},
    {CLUSTER_MIN "  self-check: { return-path: [10.0.0.1, 10.0.0.1] }\n",
     "7: cluster.self-check.return-path: duplicate address '10.0.0.1'"},
    {CLUSTER_MIN "  self-check: { return-path: 10.0.0.0/8 }\n",
     "7: cluster.self-check.return-path: invalid address '10.0.0.0/8' (expected an IP "
     "address)"},
    {CLUSTER_MIN "  drain: { quiet: 30s }\n",
     "7: cluster.drain: quiet 30s must be less than timeout 30s"},
    {CLUSTER_MIN "  drain: { timeout: 10ms }\n",
     "7: cluster.drain.timeout: 10ms is below the minimum 100ms"},
    {CLUSTER_MIN "  node-id: n2\n",
     "7: duplicate key 'node-id' in section 'cluster' (first at line 5)"},
    {CLUSTER_MIN "cluster:\n  node-id: n2\n", "7: duplicate section 'cluster' (first at line 4)"},
    {"server:\n  identity: \"tab\\there\"\n" CLUSTER_MIN,
     "5: server.identity: 'tab\there' may only contain printable ASCII characters"},
};

static void test_cluster_errors(void)
{
	char err[1024], text[1024];
	for (size_t i = 0; i < sizeof(cluster_error_rows) / sizeof(cluster_error_rows[0]); i++) {
		conf_t *c = NULL;
		const char *msg;
		snprintf(text, sizeof(text), "%s%s", zones_text, cluster_error_rows[i].text);
		int ret = load_text(text, &c, err, sizeof(err), &msg);
		const char *line = strchr(err, ':');
		line = line ? line + 1 : "";
		CHECK(ret == STEER_ECONF && !c && strcmp(line, cluster_error_rows[i].error) == 0,
		      "cluster row %zu -> \"%s\" expected \"%s\"", i, line,
		      cluster_error_rows[i].error);
		conf_free(c);
	}
	/* 64 service addresses, not 65 */
	static char many[4096];
	for (int extra = 0; extra < 2; extra++) {
		size_t used = (size_t)snprintf(many, sizeof(many),
		                               ZONES_TEXT "cluster:\n  node-id: n1\n"
		                                          "  service-addresses:\n");
		for (int i = 0; i < 64 + extra; i++)
			used += (size_t)snprintf(many + used, sizeof(many) - used,
			                         "    - 192.0.2.%d\n", i + 1);
		conf_t *c = NULL;
		const char *msg;
		int ret = load_text(many, &c, err, sizeof(err), &msg);
		CHECK(extra
		          ? ret == STEER_ECONF &&
		                strcmp(msg, "cluster.service-addresses: at most 64 addresses") == 0
		          : ret == 0 && c->cluster.n_service == 64,
		      "%d service addresses: %s", 64 + extra, ret ? msg : "ok");
		conf_free(c);
	}
}

/* Every cluster key is restart-only, and reported by its full name. */
static void test_cluster_restart(void)
{
	static const struct {
		const char *text; /* the cluster keys after CLUSTER_MIN */
		const char *changes;
	} rows[] = {
	    {"", ""},
	    {"  announce: bird\n  bird: { protocol: vip }\n",
	     "cluster.announce,cluster.bird.protocol"},
	    {"  unicast: 10.0.0.1\n  interface: vip9\n", "cluster.interface,cluster.unicast"},
	    {"  self-check: { hold-down: 5s, routes: off, return-path: 10.9.9.9 }\n",
	     "cluster.self-check.hold-down,cluster.self-check.routes,"
	     "cluster.self-check.return-path"},
	    {"  liveness-timeout: 400ms\n  drain: { quiet: 1s }\n  frr: { table: 100 }\n",
	     "cluster.liveness-timeout,cluster.frr.table,cluster.drain.quiet"},
	};
	char err[1024], text[1024], buf[512];
	const char *msg;
	conf_t *base = NULL, *none = NULL;
	int ret = load_text(ZONES_TEXT CLUSTER_MIN, &base, err, sizeof(err), &msg);
	ret |= load_text(ZONES_TEXT, &none, err, sizeof(err), &msg);
	CHECK(ret == 0, "restart base configs load: %s", err);
	for (size_t i = 0; ret == 0 && i < sizeof(rows) / sizeof(rows[0]); i++) {
		conf_t *c = NULL;
		snprintf(text, sizeof(text), ZONES_TEXT CLUSTER_MIN "%s", rows[i].text);
		int r = load_text(text, &c, err, sizeof(err), &msg);
		CHECK(r == 0, "restart row %zu loads: %s", i, err);
		if (r != 0)
			continue;
		conf_restart_only_changes(base, c, buf, sizeof(buf));
		CHECK(strcmp(buf, rows[i].changes) == 0, "restart row %zu: \"%s\" expected \"%s\"",
		      i, buf, rows[i].changes);
		conf_free(c);
	}
	conf_t *c = NULL;
	if (ret == 0 && load_text(ZONES_TEXT "cluster:\n  node-id: n2\n  service-addresses: "
	                                     "[192.0.2.53, 192.0.2.54]\n",
	                          &c, err, sizeof(err), &msg) == 0) {
		conf_restart_only_changes(base, c, buf, sizeof(buf));
		CHECK(strcmp(buf, "cluster.node-id,cluster.service-addresses") == 0,
		      "node id and addresses: \"%s\"", buf);
	}
	conf_free(c);
	if (ret == 0) {
		conf_restart_only_changes(none, base, buf, sizeof(buf));
		CHECK(strcmp(buf, "cluster") == 0, "a cluster section added: \"%s\"", buf);
		conf_restart_only_changes(base, none, buf, sizeof(buf));
		CHECK(strcmp(buf, "cluster") == 0, "a cluster section removed: \"%s\"", buf);
	}
	/* the identity answers are data: they follow a reload */
	c = NULL;
	if (ret == 0 && load_text("server: { identity: other }\n" ZONES_TEXT CLUSTER_MIN, &c, err,
	                          sizeof(err), &msg) == 0) {
		conf_restart_only_changes(base, c, buf, sizeof(buf));
		CHECK(strcmp(buf, "") == 0 && str_eq(conf_identity(c), "other"),
		      "server.identity reloads: \"%s\"", buf);
	}
	conf_free(c);
	conf_free(base);
	conf_free(none);
}

/* ---- operations: http, dnstap, stats-snapshots, alerts, decision-log ---- */

#define OPS_TEXT                                                                                   \
	ZONES_TEXT                                                                                 \
	"http:\n"                                                                                  \
	"  listen: [127.0.0.1:8053, \"[::1]:8053\"]\n"                                             \
	"  token-file: /etc/steer/api.token\n"                                                     \
	"dnstap:\n"                                                                                \
	"  socket: /run/steer/dnstap.sock\n"                                                       \
	"  messages: [auth-query, auth-response, forwarder-query, forwarder-response]\n"           \
	"  sample: 4\n"                                                                            \
	"stats-snapshots: { file: /tmp/stats.jsonl, interval: 1m }\n"                              \
	"alerts:\n"                                                                                \
	"  - { webhook: \"http://127.0.0.1:9000/hook\" }\n"                                        \
	"  - { exec: /bin/true, timeout: 2s, retries: 0 }\n"                                       \
	"decision-log: { file: /tmp/decisions.jsonl }\n"

static void test_ops(void)
{
	char err[1024];
	const char *msg;
	conf_t *d = conf_new_default();
	CHECK(d->http.n_listen == 0 && d->http.read_only_open && !d->dnstap.enabled &&
	          !d->snapshots.file && d->n_alerts == 0 && !d->decision_log.file,
	      "operations are off by default");
	conf_free(d);

	conf_t *c = NULL;
	int ret = load_text(OPS_TEXT, &c, err, sizeof(err), &msg);
	CHECK(ret == 0, "operations config loads: %s", err);
	if (ret != 0)
		return;
	CHECK(c->http.n_listen == 2 && steer_sockaddr_port(&c->http.listen[0]) == 8053 &&
	          c->http.listen[1].sa.sa_family == AF_INET6 && c->http.read_only_open &&
	          str_eq(c->http.token_file, "/etc/steer/api.token"),
	      "http: %zu listen", c->http.n_listen);
	CHECK(c->dnstap.enabled && str_eq(c->dnstap.socket, "/run/steer/dnstap.sock") &&
	          !c->dnstap.file && c->dnstap.sample == 4 && c->dnstap.queue == 16384 &&
	          c->dnstap.messages ==
	              (CONF_DNSTAP_AUTH_QUERY | CONF_DNSTAP_AUTH_RESPONSE |
	               CONF_DNSTAP_FORWARDER_QUERY | CONF_DNSTAP_FORWARDER_RESPONSE),
	      "dnstap: messages %#x sample %u", c->dnstap.messages, c->dnstap.sample);
	CHECK(str_eq(c->snapshots.file, "/tmp/stats.jsonl") && c->snapshots.interval == 60000,
	      "stats-snapshots: interval %u", c->snapshots.interval);
	CHECK(c->n_alerts == 2 && str_eq(c->alerts[0].webhook, "http://127.0.0.1:9000/hook") &&
	          !c->alerts[0].exec && c->alerts[0].timeout == 5000 && c->alerts[0].retries == 3 &&
	          str_eq(c->alerts[1].exec, "/bin/true") && c->alerts[1].timeout == 2000 &&
	          c->alerts[1].retries == 0,
	      "alerts: %zu", c->n_alerts);
	CHECK(str_eq(c->decision_log.file, "/tmp/decisions.jsonl") &&
	          c->decision_log.sample == 1000,
	      "decision-log: sample %u", c->decision_log.sample);

	/* token-file and read-only-open reload; the rest needs a restart */
	conf_t *o = NULL;
	char buf[512];
	ret = load_text(OPS_TEXT, &o, err, sizeof(err), &msg);
	if (ret == 0) {
		o->http.read_only_open = false;
		free(o->http.token_file);
		o->http.token_file = NULL;
		conf_restart_only_changes(c, o, buf, sizeof(buf));
		CHECK(strcmp(buf, "") == 0, "http token and read-only-open reload: \"%s\"", buf);
		o->http.n_listen = 1;
		o->dnstap.sample = 1;
		o->dnstap.messages = CONF_DNSTAP_AUTH_QUERY;
		o->snapshots.interval = 1000;
		o->alerts[1].retries = 2;
		o->decision_log.sample = 1;
		conf_restart_only_changes(c, o, buf, sizeof(buf));
		CHECK(strcmp(buf, "dnstap.sample,stats-snapshots.interval,decision-log.sample,"
		                  "http.listen,dnstap.messages,alerts") == 0,
		      "restart-only operations keys: \"%s\"", buf);
	}
	conf_free(o);
	conf_free(c);
}

static const struct {
	const char *text;
	const char *error;
} ops_error_rows[] = {
    {"http: { listen: [127.0.0.1] }\n",
     "http.listen: '127.0.0.1' needs a port (e.g. 127.0.0.1:8053, \"[::1]:8053\")"},
    {"http: { listen: [127.0.0.1:0] }\n", "http.listen: port 0 is not allowed in '127.0.0.1:0'"},
    {"http: { listen: [127.0.0.1:80, 127.0.0.1:80] }\n",
     "http.listen: duplicate address '127.0.0.1:80'"},
    {"http: { token-file: /x }\n", "http: 'listen' is required (e.g. [127.0.0.1:8053])"},
    {"http: { listen: [127.0.0.1:80], read-only-open: maybe }\n", NULL},
    {"http: [127.0.0.1:80]\n", "section 'http' must be a mapping of keys, got a list"},
    {"dnstap: { file: /tmp/x, socket: /tmp/y }\n",
     "dnstap: 'socket' and 'file' exclude each other: set one"},
    {"dnstap: { sample: 2 }\n", "dnstap: set 'socket' (a Frame Streams reader) or 'file'"},
    {"dnstap: { file: /tmp/x, messages: [auth-querry] }\n",
     "dnstap.messages: unknown message kind 'auth-querry' (did you mean 'auth-query'?)"},
    {"dnstap: { file: /tmp/x, messages: [auth-query, auth-query] }\n",
     "dnstap.messages: 'auth-query' is listed twice"},
    {"dnstap: { file: /tmp/x, messages: [] }\n", "dnstap.messages: needs at least one value"},
    {"dnstap: { file: /tmp/x, sample: 0 }\n", "dnstap.sample: 0 is out of range (1 to 1000000)"},
    {"stats-snapshots: { interval: 5m }\n",
     "missing required key 'file' in section 'stats-snapshots'"},
    {"stats-snapshots: { file: /nonexistent/s.jsonl }\n",
     "stats-snapshots.file: folder '/nonexistent' does not exist"},
    {"stats-snapshots: { file: /tmp/s.jsonl, interval: 10ms }\n", NULL},
    {"alerts: [ { webhook: \"ftp://x\" } ]\n",
     "alerts: webhook 'ftp://x' must be an http:// or https:// URL"},
    {"alerts: [ { webhook: \"http:///x\" } ]\n",
     "alerts: webhook 'http:///x' must be an http:// or https:// URL"},
    {"alerts: [ { webhook: \"http://a b\" } ]\n",
     "alerts: webhook 'http://a b' contains a space or control character"},
    {"alerts: [ { webhook: \"http://a\", exec: /bin/true } ]\n",
     "alerts: each item needs exactly one of 'webhook' or 'exec'"},
    {"alerts: [ { timeout: 1s } ]\n", "alerts: each item needs exactly one of 'webhook' or 'exec'"},
    {"alerts: [ { exec: /nonexistent-alert } ]\n",
     "alerts: exec '/nonexistent-alert' is not a file"},
    {"alerts: [ { exec: /proc/version } ]\n", "alerts: exec '/proc/version' is not executable"},
    {"alerts: [ { exec: /bin/true, retries: 11 } ]\n",
     "alerts.retries: 11 is out of range (0 to 10)"},
    {"alerts: { webhook: x }\n",
     "alerts: expected a list of mappings (webhook: URL | exec: PATH), got a mapping"},
    {"decision-log: { file: /tmp/d, sample: 0 }\n",
     "decision-log.sample: 0 is out of range (1 to 1000000000)"},
};

static void test_ops_errors(void)
{
	char err[1024], text[1024];
	for (size_t i = 0; i < sizeof(ops_error_rows) / sizeof(ops_error_rows[0]); i++) {
		conf_t *c = NULL;
		const char *msg;
		snprintf(text, sizeof(text), "%s%s", zones_text, ops_error_rows[i].text);
		int ret = load_text(text, &c, err, sizeof(err), &msg);
		/* NULL: an error from the generic parsers, whatever its wording */
		CHECK(ret == STEER_ECONF && !c &&
		          (!ops_error_rows[i].error || strcmp(msg, ops_error_rows[i].error) == 0),
		      "ops row %zu -> \"%s\" expected \"%s\"", i, err,
		      ops_error_rows[i].error ? ops_error_rows[i].error : "an error");
		conf_free(c);
	}
}

/* ---- measured paths ---- */

#define PATHS_DCS "datacenters:\n  - { name: dc1 }\n  - { name: dc2 }\n"
#define PATHS_AGENT                                                                                \
	"paths:\n  agents:\n    - { datacenter: dc1, url: \"http://192.0.2.1:8054/\" }\n"
#define PATHS_TOKEN "conf-paths.token"

static void write_token(const char *text, mode_t mode)
{
	FILE *f = fopen(PATHS_TOKEN, "w");
	CHECK(f != NULL, "write %s", PATHS_TOKEN);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	chmod(PATHS_TOKEN, mode);
}

static void test_paths(void)
{
	char err[1024];
	const char *msg;
	conf_t *c = NULL;
	write_token("0123456789abcdef0123\n", 0600);
	/* the design's contract, as written there */
	int ret = load_text(ZONES_TEXT PATHS_DCS
	                    "paths:\n"
	                    "  agents:\n"
	                    "    - datacenter: dc1\n"
	                    "      url: \"http://192.0.2.1:8054/\"\n"
	                    "      source: 192.0.2.1\n"
	                    "    - { datacenter: dc2, url: \"https://[2001:db8::2]:8054/steer/\",\n"
	                    "        source: \"2001:db8::2\" }\n"
	                    "  fetch-interval: 3s\n"
	                    "  fetch-timeout: 1500ms\n"
	                    "  path-ttl: 2400s\n"
	                    "  ipv4-prefix: 22\n"
	                    "  ipv6-prefix: 56\n"
	                    "  max-prefixes: 500000\n"
	                    "  demand-sample: 8\n"
	                    "  token-file: " PATHS_TOKEN "\n"
	                    "  hysteresis:\n"
	                    "    margin: 25\n"
	                    "    min-difference: 15ms\n"
	                    "    rounds: 3\n"
	                    "  probe:\n"
	                    "    nodes: [\"http://10.0.0.53:8053/\", \"http://10.0.0.54:8053/\"]\n"
	                    "    methods: [icmp, dns]\n"
	                    "    dns-name: probe.example.test.\n"
	                    "    rate: 300\n"
	                    "    samples: 4\n"
	                    "    interval: 2m\n"
	                    "    hot-interval: 20s\n"
	                    "    hot-share: 10\n"
	                    "    timeout: 800ms\n"
	                    "    smoothing: 50\n"
	                    "    publish-interval: 5s\n"
	                    "    demand-interval: 4s\n"
	                    "    forget-after: 7d\n",
	                    &c, err, sizeof(err), &msg);
	CHECK(ret == 0 && c, "every paths key: %s", err);
	if (c) {
		const conf_paths_t *p = &c->paths;
		CHECK(p->enabled && p->line == 8, "paths enabled at line %u", p->line);
		CHECK(p->n_agents == 2 && p->agents[0].datacenter == 0 &&
		          p->agents[1].datacenter == 1 &&
		          strcmp(p->agents[0].url, "http://192.0.2.1:8054/") == 0 &&
		          strcmp(p->agents[1].url, "https://[2001:db8::2]:8054/steer/") == 0,
		      "two agents in order");
		CHECK(p->agents[0].source.sa.sa_family == AF_INET &&
		          strcmp(ip_only(&p->agents[0].source), "192.0.2.1") == 0 &&
		          p->agents[1].source.sa.sa_family == AF_INET6 &&
		          strcmp(ip_only(&p->agents[1].source), "2001:db8::2") == 0,
		      "agent sources %s", ip_only(&p->agents[1].source));
		CHECK(p->agents[0].line == 9 && p->agents[1].line == 12, "agent lines %u %u",
		      p->agents[0].line, p->agents[1].line);
		CHECK(p->fetch_interval == 3000 && p->fetch_timeout == 1500 &&
		          p->path_ttl == 2400 && p->ipv4_prefix == 22 && p->ipv6_prefix == 56 &&
		          p->max_prefixes == 500000 && p->demand_sample == 8,
		      "node keys");
		CHECK(p->token_file && strcmp(p->token_file, PATHS_TOKEN) == 0, "token file %s",
		      p->token_file ? p->token_file : "(none)");
		CHECK(p->hyst_margin == 25 && p->hyst_min_difference == 15 && p->hyst_rounds == 3,
		      "hysteresis");
		CHECK(p->n_nodes == 2 && strcmp(p->nodes[1], "http://10.0.0.54:8053/") == 0,
		      "probe nodes");
		CHECK(p->n_methods == 2 && p->methods[0] == CONF_PROBE_ICMP &&
		          p->methods[1] == CONF_PROBE_DNS,
		      "methods in order");
		CHECK(p->dns_name && strcasecmp(p->dns_name, "probe.example.test.") == 0,
		      "dns-name");
		CHECK(p->probe_rate == 300 && p->probe_samples == 4 &&
		          p->probe_interval == 120000 && p->hot_interval == 20000 &&
		          p->hot_share == 10 && p->probe_timeout == 800 && p->smoothing == 50 &&
		          p->publish_interval == 5000 && p->demand_interval == 4000 &&
		          p->forget_after == 7 * 86400,
		      "probe keys");
		CHECK(strcmp(conf_probe_method_name(p->methods[0]), "icmp") == 0, "method name");
	}
	conf_free(c);

	/* defaults; without dns-name the default methods leave dns out */
	c = NULL;
	ret = load_text(ZONES_TEXT PATHS_DCS PATHS_AGENT, &c, err, sizeof(err), &msg);
	CHECK(ret == 0 && c, "minimal paths: %s", err);
	if (c) {
		const conf_paths_t *p = &c->paths;
		CHECK(p->enabled && p->n_agents == 1 && p->fetch_interval == 2000 &&
		          p->fetch_timeout == 2000 && p->path_ttl == 2400 && p->ipv4_prefix == 24 &&
		          p->ipv6_prefix == 48 && p->max_prefixes == 1000000 &&
		          p->demand_sample == 16 && !p->token_file,
		      "node defaults");
		CHECK(p->hyst_margin == 20 && p->hyst_min_difference == 10 && p->hyst_rounds == 2,
		      "hysteresis defaults");
		CHECK(p->n_nodes == 0 && p->n_methods == 2 && p->methods[0] == CONF_PROBE_TCP &&
		          p->methods[1] == CONF_PROBE_ICMP && !p->dns_name,
		      "methods default without dns-name: %zu", p->n_methods);
		CHECK(p->probe_rate == 200 && p->probe_samples == 3 && p->probe_interval == 60000 &&
		          p->hot_interval == 10000 && p->hot_share == 20 &&
		          p->probe_timeout == 1000 && p->smoothing == 30 &&
		          p->publish_interval == 2000 && p->demand_interval == 2000 &&
		          p->forget_after == 28 * 86400,
		      "probe defaults");
		CHECK(p->agents[0].source.sa.sa_family == 0, "no source");
	}
	conf_free(c);

	/* with dns-name the default methods are all three, dns first */
	c = NULL;
	ret = load_text(ZONES_TEXT PATHS_DCS PATHS_AGENT "  probe: { dns-name: p.example.test }\n",
	                &c, err, sizeof(err), &msg);
	CHECK(ret == 0 && c && c->paths.n_methods == 3 && c->paths.methods[0] == CONF_PROBE_DNS,
	      "default methods with dns-name: %s", err);
	conf_free(c);

	/* a node's file may shorten path-ttl below the agents' interval when it has no probe */
	c = NULL;
	ret = load_text(ZONES_TEXT PATHS_DCS PATHS_AGENT "  path-ttl: 3s\n", &c, err, sizeof(err),
	                &msg);
	CHECK(ret == 0 && c && c->paths.path_ttl == 3, "short path-ttl on a node: %s", err);
	conf_free(c);

	/* no section: off */
	c = NULL;
	ret = load_text(ZONES_TEXT, &c, err, sizeof(err), &msg);
	CHECK(ret == 0 && c && !c->paths.enabled && c->paths.n_agents == 0, "no paths: off");
	conf_free(c);
	remove(PATHS_TOKEN);
}

static const struct {
	const char *text;  /* after ZONES_TEXT PATHS_DCS (lines 1-6) */
	const char *error; /* without the file name */
} paths_error_rows[] = {
    {"paths:\n", NULL}, /* null: off, not an error (see test_paths_errors) */
    {"paths: [a]\n", "7: section 'paths' must be a mapping of keys, got a list"},
    {"paths:\n  fetch-interval: 2s\n", "8: missing required key 'agents' in section 'paths'"},
    {"paths:\n  agents: []\n", "8: paths.agents: needs at least one entry"},
    {"paths:\n  agents: [dc1]\n",
     "8: paths.agents: each entry must be a mapping (datacenter: NAME, url: URL), got a single "
     "value"},
    {"paths:\n  agents:\n    - { url: \"http://a/\" }\n",
     "9: missing required key 'datacenter' in section 'paths.agents'"},
    {"paths:\n  agents:\n    - { datacenter: dc1 }\n",
     "9: missing required key 'url' in section 'paths.agents'"},
    {"paths:\n  agents:\n    - { datacenter: dcx, url: \"http://a/\" }\n",
     "9: paths.agents.datacenter: unknown datacenter 'dcx' (did you mean 'dc1'?)"},
    {"paths:\n  agents:\n    - { datacenter: tokyo, url: \"http://a/\" }\n",
     "9: paths.agents.datacenter: unknown datacenter 'tokyo' (datacenters: dc1, dc2)"},
    {"paths:\n  agents:\n    - { datacenter: dc1, url: \"http://a/\" }\n"
     "    - { datacenter: dc1, url: \"http://b/\" }\n",
     "10: paths.agents: datacenter 'dc1' already has an agent (line 9); one agent per "
     "datacenter"},
    {"paths:\n  agents:\n    - { datacenter: dc1, url: \"http://a/\" }\n"
     "    - { datacenter: dc2, url: \"http://a/\" }\n",
     "10: paths.agents: url 'http://a/' is already the agent of datacenter 'dc1' (line 9)"},
    {"paths:\n  agents:\n    - { datacenter: dc1, url: \"ftp://a/\" }\n",
     "9: paths.agents.url: 'ftp://a/' must be an http:// or https:// URL"},
    {"paths:\n  agents:\n    - { datacenter: dc1, url: \"http://a\" }\n",
     "9: paths.agents.url: 'http://a' must end in '/' (the tables are fetched below it)"},
    {"paths:\n  agents:\n    - { datacenter: dc1, url: \"http://a/x\" }\n",
     "9: paths.agents.url: 'http://a/x' must end in '/' (the tables are fetched below it)"},
    {"paths:\n  agents:\n    - { datacenter: dc1, url: \"http:///\" }\n",
     "9: paths.agents.url: 'http:///' has no host"},
    {"paths:\n  agents:\n    - { datacenter: dc1, url: \"http://a b/\" }\n",
     "9: paths.agents.url: 'http://a b/' contains a space or control character"},
    {"paths:\n  agents:\n    - { datacenter: dc1, url: \"http://a/?x=/\" }\n",
     "9: paths.agents.url: 'http://a/?x=/' may not have a query or fragment"},
    {"paths:\n  agents:\n    - { datacenter: dc1, url: \"http://a/\", source: \"1.2.3.4:5\" }\n",
     "9: paths.agents.source: '1.2.3.4:5' is not an IP address (no port, no brackets)"},
    {"paths:\n  agents:\n    - { datacenter: dc1, url: \"http://a/\", sorce: 1.2.3.4 }\n",
     "9: unknown key 'sorce' in section 'paths.agents' (did you mean 'source'?)"},
    {PATHS_AGENT "  ipv4-prefix: 7\n", NULL},
    {PATHS_AGENT "  ipv4-prefix: 33\n", NULL},
    {PATHS_AGENT "  ipv6-prefix: 15\n", NULL},
    {PATHS_AGENT "  ipv6-prefix: 65\n", NULL},
    {PATHS_AGENT "  path-ttl: 0s\n", NULL},
    {PATHS_AGENT "  fetch-interval: 2\n", NULL},
    {PATHS_AGENT "  fetch-timeout: 3s\n",
     "10: paths: fetch-timeout 3s must not exceed fetch-interval 2s (one fetch per agent at a "
     "time)"},
    {PATHS_AGENT "  fetch-intervall: 3s\n",
     "10: unknown key 'fetch-intervall' in section 'paths' (did you mean 'fetch-interval'?)"},
    {PATHS_AGENT "  hysteresis: { margn: 3 }\n",
     "10: unknown key 'margn' in section 'paths.hysteresis' (did you mean 'margin'?)"},
    {PATHS_AGENT "  hysteresis: [3]\n", "10: paths.hysteresis: expected a mapping of keys, got "
                                        "a list"},
    {PATHS_AGENT "  hysteresis: { rounds: 0 }\n", NULL},
    {PATHS_AGENT "  probe: { methods: [dns] }\n",
     "10: paths.probe: method dns needs dns-name (a name inside a zone this configuration "
     "serves)"},
    {PATHS_AGENT "  probe: { methods: [tcp, dsn] }\n",
     "10: paths.probe.methods: unknown probe method 'dsn' (did you mean 'dns'?)"},
    {PATHS_AGENT "  probe: { methods: [udp] }\n",
     "10: paths.probe.methods: unknown probe method 'udp' (expected dns, tcp or icmp)"},
    {PATHS_AGENT "  probe: { methods: [tcp, TCP] }\n",
     "10: paths.probe.methods: 'tcp' is listed twice"},
    {PATHS_AGENT "  probe: { methods: [] }\n", "10: paths.probe.methods: needs at least one value"},
    {PATHS_AGENT "  probe: { dns-name: probe.example.com. }\n",
     "10: paths.probe.dns-name: 'probe.example.com.' is not inside a served zone (zones: "
     "example.test); probes only ask for our own names"},
    {PATHS_AGENT "  probe: { nodes: [\"http://n/\", \"http://n/\"] }\n",
     "10: paths.probe.nodes: 'http://n/' is listed twice"},
    {PATHS_AGENT "  probe: { nodes: [\"n:8053\"] }\n",
     "10: paths.probe.nodes: 'n:8053' must be an http:// or https:// URL"},
    {PATHS_AGENT "  probe: { hot-interval: 2m }\n",
     "10: paths.probe: hot-interval 2m must not exceed interval 1m"},
    {PATHS_AGENT "  probe: { timeout: 10s }\n",
     "10: paths.probe: timeout 10s must be less than hot-interval 10s"},
    {PATHS_AGENT "  path-ttl: 30s\n  probe: { rate: 100 }\n",
     "11: paths.probe: interval 1m must be less than paths.path-ttl 30s (or every measurement "
     "goes stale before it is renewed)"},
    {PATHS_AGENT "  probe: { samples: 17 }\n", NULL},
    {PATHS_AGENT "  probe: { smoothing: 0 }\n", NULL},
    {PATHS_AGENT "  token-file: conf-paths.missing\n",
     "10: paths.token-file: conf-paths.missing: No such file or directory"},
};

static void test_paths_errors(void)
{
	char err[1024], text[1024];
	for (size_t i = 0; i < sizeof(paths_error_rows) / sizeof(paths_error_rows[0]); i++) {
		conf_t *c = NULL;
		const char *msg;
		snprintf(text, sizeof(text), ZONES_TEXT PATHS_DCS "%s", paths_error_rows[i].text);
		int ret = load_text(text, &c, err, sizeof(err), &msg);
		const char *line = strchr(err, ':');
		line = line ? line + 1 : "";
		if (i == 0) {
			CHECK(ret == 0 && c && !c->paths.enabled, "a null paths section is off: %s",
			      err);
		} else {
			/* NULL: an error from the generic parsers, whatever its wording */
			CHECK(ret == STEER_ECONF && !c &&
			          (!paths_error_rows[i].error ||
			           strcmp(line, paths_error_rows[i].error) == 0),
			      "paths row %zu -> \"%s\" expected \"%s\"", i, err,
			      paths_error_rows[i].error ? paths_error_rows[i].error : "an error");
		}
		conf_free(c);
	}
	/* the token file: long enough, not open to everyone */
	static const struct {
		const char *content;
		mode_t mode;
		const char *error;
	} tokens[] = {
	    {"short\n", 0600,
	     "10: paths.token-file: conf-paths.token: the first line must hold a token of "
	     "16..1024 characters (e.g. openssl rand -hex 32), not 5"},
	    {"0123456789abcdef0123\n", 0644,
	     "10: paths.token-file: conf-paths.token is readable or writable by everyone (mode "
	     "0644): chmod o-rw it"},
	    {"0123456789abcdef\nsecond line\n", 0640, NULL},
	};
	for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++) {
		conf_t *c = NULL;
		const char *msg;
		write_token(tokens[i].content, tokens[i].mode);
		int ret =
		    load_text(ZONES_TEXT PATHS_DCS PATHS_AGENT "  token-file: " PATHS_TOKEN "\n",
		              &c, err, sizeof(err), &msg);
		const char *line = strchr(err, ':');
		line = line ? line + 1 : "";
		CHECK(tokens[i].error ? ret == STEER_ECONF && strcmp(line, tokens[i].error) == 0
		                      : ret == 0 && c,
		      "token row %zu -> \"%s\"", i, err);
		conf_free(c);
	}
	remove(PATHS_TOKEN);
}

#define KEYS_BIND "conf-keys-bind.key"
#define KEYS_KNOT "conf-keys-knot.key"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL, "write %s", path);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_keys(void)
{
	char err[1024];
	const char *msg;
	conf_t *c = NULL;
	write_file(KEYS_BIND, "key \"bind-key\" {\n\talgorithm hmac-sha512;\n"
	                      "\tsecret \"AQIDBAUGBwg=\";\n};\n");
	write_file(KEYS_KNOT, "# hmac-sha1:knot-key:AQID\nkey:\n  - id: knot-key\n"
	                      "    algorithm: hmac-sha1\n    secret: AQID\n");
	const char *text = "keys:\n"
	                   "  - name: transfer-key\n"
	                   "    algorithm: HMAC-SHA256\n"
	                   "    secret: \"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"\n"
	                   "  - file: " KEYS_BIND "\n"
	                   "  - file: " KEYS_KNOT "\n"
	                   "zones:\n"
	                   "  - domain: example.test\n"
	                   "    file: example.test.zone\n"
	                   "    xfr-allow:\n"
	                   "      - 192.0.2.1\n"
	                   "      - { address: 10.0.0.0/8, key: Transfer-Key. }\n"
	                   "      - { key: knot-key }\n";
	int ret = load_text(text, &c, err, sizeof(err), &msg);
	CHECK(ret == 0 && c, "keys config loads: %s", err);
	if (c) {
		CHECK(c->n_keys == 3, "three keys: %zu", c->n_keys);
		const conf_tsig_key_t *k = conf_tsig_key_find(c, "TRANSFER-KEY.");
		CHECK(k && k->secret_len == 32 && k->secret[31] == 31 &&
		          strcmp(k->algorithm, "hmac-sha256") == 0 && k->line == 2,
		      "inline key");
		k = conf_tsig_key_find(c, "bind-key");
		CHECK(k && k->secret_len == 8 && strcmp(k->algorithm, "hmac-sha512") == 0,
		      "BIND file key");
		k = conf_tsig_key_find(c, "knot-key");
		CHECK(k && k->secret_len == 3 && strcmp(k->algorithm, "hmac-sha1") == 0,
		      "Knot file key");
		CHECK(!conf_tsig_key_find(c, "other"), "unknown key");
		const conf_zone_t *z = &c->zones[0];
		CHECK(z->n_xfr_allow == 3 && !z->xfr_allow[0].key && !z->xfr_allow[0].any_address &&
		          z->xfr_allow[1].key &&
		          strcmp(z->xfr_allow[1].key, "Transfer-Key.") == 0 &&
		          z->xfr_allow[1].prefix.len == 8 && z->xfr_allow[2].any_address &&
		          z->xfr_allow[2].line == 13,
		      "acl entries");
		dns_acl_entry_t *acl = conf_acl_build(z->xfr_allow, z->n_xfr_allow);
		CHECK(!acl[0].has_key && acl[1].has_key && acl[1].key_len == 14 &&
		          memcmp(acl[1].key, "\x0ctransfer-key", 14) == 0 && acl[2].any_address,
		      "acl in wire form");
		free(acl);
		dns_tsig_keyring_t *ring = conf_keyring_new(c);
		CHECK(ring->n_keys == 3 &&
		          dns_tsig_keyring_find(ring, (const uint8_t *)"\x08knot-key") &&
		          ring->keys[1].alg == DNS_TSIG_HMAC_SHA512,
		      "keyring");
		conf_keyring_free(ring);
	}
	conf_free(c);

	static const struct {
		const char *text;
		const char *error; /* after "file:" */
	} rows[] = {
	    {"keys:\n  - { name: a, algorithm: hmac-md5, secret: AQID }\n", "2: keys.algorithm: "},
	    {"keys:\n  - { name: a, algorithm: hmac-sha256, secret: \"AQ!D\" }\n",
	     "2: keys: key 'a': secret is not valid base64 (or longer than 256 bytes)"},
	    {"keys:\n  - { name: a, algorithm: hmac-sha256, secret: AQID }\n"
	     "  - { name: A., algorithm: hmac-sha1, secret: AQID }\n",
	     "3: keys: duplicate key 'A.' (first defined at line 2)"},
	    {"keys:\n  - { name: a, secret: AQID }\n",
	     "2: keys: a key needs `name`, `algorithm` and `secret` (or `file`)"},
	    {"keys:\n  - { name: a, algorithm: hmac-sha256, secret: AQID, file: x }\n",
	     "2: keys: give either `file` or `name`, `algorithm` and `secret`"},
	    {"keys:\n  - file: " KEYS_BIND "\n  - file: " KEYS_BIND "\n",
	     "3: keys.file: " KEYS_BIND ":1: duplicate key 'bind-key' (first defined at line 2)"},
	    {"keys:\n  - file: no-such.key\n",
	     "2: keys.file: cannot open no-such.key: No such file or directory"},
	    {"keys:\n  - file: conf-keys-bad.key\n",
	     "2: keys.file: conf-keys-bad.key: line 3: expected `;`"},
	    {"keys:\n  - { name: a, algorithm: hmac-sha256, secret: AQID }\n"
	     "zones:\n  - domain: x.test\n    file: example.test.zone\n"
	     "    xfr-allow:\n      - 127.0.0.1\n      - { address: 10.0.0.0/8, key: b }\n",
	     "8: zones: x.test: xfr-allow: unknown key 'b' (see `keys`)"},
	    {"zones:\n  - domain: x.test\n    file: example.test.zone\n"
	     "    xfr-allow: [{ address: 10.0.0.1/8 }]\n",
	     NULL},
	    {"zones:\n  - domain: x.test\n    file: example.test.zone\n"
	     "    xfr-allow: [{ colour: red }]\n",
	     "4: zones.xfr-allow: unknown key 'colour' (expected address, key)"},
	    {"zones:\n  - domain: x.test\n    file: example.test.zone\n    xfr-allow: [{}]\n",
	     "4: zones.xfr-allow: an entry needs `address`, `key` or both"},
	};
	write_file("conf-keys-bad.key",
	           "key \"a\" {\n algorithm hmac-sha256\n secret \"AQID\"; };\n");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char text2[1024];
		bool has_zones = strstr(rows[i].text, "zones:") != NULL;
		snprintf(text2, sizeof(text2), "%s%s", rows[i].text, has_zones ? "" : ZONES_TEXT);
		c = NULL;
		ret = load_text(text2, &c, err, sizeof(err), &msg);
		const char *line = strchr(err, ':');
		line = line ? line + 1 : "";
		CHECK(ret == STEER_ECONF && !c &&
		          (!rows[i].error ||
		           strncmp(line, rows[i].error, strlen(rows[i].error)) == 0),
		      "keys row %zu -> \"%s\" expected \"%s\"", i, err,
		      rows[i].error ? rows[i].error : "an error");
		conf_free(c);
	}
	remove(KEYS_BIND);
	remove(KEYS_KNOT);
	remove("conf-keys-bad.key");
}

int main(void)
{
	test_valid();
	test_defaults();
	test_errors();
	test_durations();
	test_hints();
	test_qos_keys();
	test_alias_and_list_form();
	test_version_and_ixfr_history();
	test_gslb();
	test_health();
	test_health_errors();
	test_metrics_monitors();
	test_forward();
	test_forward_errors();
	test_forward_sizes();
	test_add_listen();
	test_add_zone();
	test_add_forward();
	test_add_allow_recursion();
	test_restart_changes();
	test_cluster();
	test_cluster_errors();
	test_cluster_restart();
	test_ops();
	test_ops_errors();
	test_paths();
	test_paths_errors();
	test_keys();
	test_reference();
	return unit_finish("test_conf");
}
