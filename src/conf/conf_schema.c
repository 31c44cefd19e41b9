/*
 * The configuration schema: every section and key Steer accepts, with type, bounds, default,
 * reload behaviour and documentation. conf.c parses and validates by walking this table and
 * conf_write_reference() turns it into docs/configuration.md, so the docs cannot drift from the
 * parser (a unit test compares them). Pure data plus one printer; no threads involved.
 */
#include "conf/conf_int.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERVER_UINT(key, field, lo, hi, dflt, fl, text)                                            \
	{                                                                                          \
		.section = "server", .name = key, .type = CONF_TYPE_UINT,                          \
		.offset = offsetof(conf_t, field), .size = sizeof(((conf_t *)0)->field),           \
		.min = lo, .max = hi, .def = dflt, .flags = fl, .doc = text                        \
	}

#define SERVER_DURATION(key, field, lo, hi, dflt, text)                                            \
	{                                                                                          \
		.section = "server", .name = key, .type = CONF_TYPE_DURATION,                      \
		.offset = offsetof(conf_t, field), .size = sizeof(((conf_t *)0)->field),           \
		.min = lo, .max = hi, .unit = CONF_UNIT_MS, .def = dflt, .doc = text               \
	}

static const conf_enum_t tsig_algorithms[] = {
    {"hmac-sha1", 0},   {"hmac-sha224", 0}, {"hmac-sha256", 0},
    {"hmac-sha384", 0}, {"hmac-sha512", 0}, {NULL, 0},
};

static const conf_enum_t log_targets[] = {
    {"stderr", LOG_TARGET_STDERR},
    {"syslog", LOG_TARGET_SYSLOG},
    {NULL, 0},
};

static const conf_enum_t log_levels[] = {
    {"error", LOG_LEVEL_ERR}, {"warning", LOG_LEVEL_WARNING}, {"notice", LOG_LEVEL_NOTICE},
    {"info", LOG_LEVEL_INFO}, {"debug", LOG_LEVEL_DEBUG},     {NULL, 0},
};

static const conf_enum_t override_states[] = {
    {"up", 1},
    {"down", 0},
    {NULL, 0},
};

/* Stored in conf_monitor_t.static_down. */
static const conf_enum_t static_states[] = {
    {"up", 0},
    {"down", 1},
    {NULL, 0},
};

#define MONITOR_UINT(key, field, lo, hi, dflt, text)                                               \
	{                                                                                          \
		.section = "monitors", .name = key, .type = CONF_TYPE_UINT,                        \
		.offset = offsetof(conf_monitor_t, field),                                         \
		.size = sizeof(((conf_monitor_t *)0)->field), .min = lo, .max = hi, .def = dflt,   \
		.doc = text                                                                        \
	}

#define MONITOR_DURATION(key, field, lo, hi, u, dflt, text)                                        \
	{                                                                                          \
		.section = "monitors", .name = key, .type = CONF_TYPE_DURATION,                    \
		.offset = offsetof(conf_monitor_t, field),                                         \
		.size = sizeof(((conf_monitor_t *)0)->field), .min = lo, .max = hi, .unit = u,     \
		.def = dflt, .doc = text                                                           \
	}

static const conf_enum_t metrics_formats[] = {
    {"prometheus", 0},
    {"json", 0},
    {"nginx-stub-status", 0},
    {NULL, 0},
};

/* One load value of a metrics monitor: a number or an expression over the fetched body. */
#define METRIC_VALUE(key, what)                                                                    \
	{                                                                                          \
		.section = "monitors", .name = key, .type = CONF_TYPE_NODE,                        \
		.type_doc = "a number, or an expression (see `format`)",                           \
		.doc =                                                                             \
		    "`metrics`: " what ". An expression reads it from the body: for "              \
		    "`prometheus` `NAME` or `NAME{label=\"value\",...}` (the sum of the "          \
		    "matching samples), for `json` a dotted path `a.b.0.c` to a number, for "      \
		    "`nginx-stub-status` one of `active`, `reading`, `writing`, `waiting`, "       \
		    "`accepts`, `handled`, `requests`; each may be wrapped in `rate(...)` (per "   \
		    "second, between two fetches; a counter reset gives no value for one "         \
		    "round) and followed by `* N` or `/ N`. An expression that does not parse "    \
		    "is an error at its line."                                                     \
	}

/* The values the GSLB builder accepts (gslb/policy.c); checked here so a typo is reported at
 * its line with the valid names. The value field is unused. */
static const conf_enum_t dc_policies[] = {
    {"failover", 0},
    {"geo", 0},
    {"weighted", 0},
    {"persist", 0},
    {"round-robin", 0},
    {"rtt", 0},
    {"completion-rate", 0},
    {"hops", 0},
    {"qos", 0},
    {"least-connections", 0},
    {"capacity", 0},
    {"packet-rate", 0},
    {"kbps", 0},
    {NULL, 0},
};

/* What may decide for a measured policy without measurements: the non-measured ones. */
static const conf_enum_t fallback_policies[] = {
    {"failover", 0}, {"geo", 0}, {"weighted", 0}, {"persist", 0}, {"round-robin", 0}, {NULL, 0},
};

static const conf_enum_t in_dc_policies[] = {
    {"all", 0},         {"failover", 0}, {"weighted", 0}, {"multi", 0},
    {"round-robin", 0}, {"persist", 0},  {NULL, 0},
};

static const conf_enum_t all_down_actions[] = {
    {"first-datacenter", 0}, {"fallback", 0}, {"nodata", 0}, {"servfail", 0}, {NULL, 0},
};

/* The forward section's switches: YAML 1.1 habits (`on`) and booleans alike. */
static const conf_enum_t switches[] = {
    {"on", 1}, {"off", 0}, {"true", 1}, {"false", 0}, {NULL, 0},
};

static const conf_enum_t fwd_policies[] = {
    {"ordered", 0},
    {"round-robin", 0},
    {"fastest", 0},
    {NULL, 0},
};

#define FWD_TTL(key, field, lo, hi, dflt, text)                                                    \
	{                                                                                          \
		.section = "forward.cache", .name = key, .type = CONF_TYPE_DURATION,               \
		.offset = offsetof(conf_forward_t, field),                                         \
		.size = sizeof(((conf_forward_t *)0)->field), .min = lo, .max = hi,                \
		.unit = CONF_UNIT_S, .def = dflt, .flags = CONF_F_RESTART, .doc = text             \
	}

#define FWD_PROBE_DURATION(key, field, lo, hi, dflt, text)                                         \
	{                                                                                          \
		.section = "forward.groups.probe", .name = key, .type = CONF_TYPE_DURATION,        \
		.offset = offsetof(conf_fwd_group_t, field),                                       \
		.size = sizeof(((conf_fwd_group_t *)0)->field), .min = lo, .max = hi,              \
		.unit = CONF_UNIT_MS, .def = dflt, .flags = CONF_F_RESTART, .doc = text            \
	}

#define FWD_PROBE_UINT(key, field, lo, hi, dflt, text)                                             \
	{                                                                                          \
		.section = "forward.groups.probe", .name = key, .type = CONF_TYPE_UINT,            \
		.offset = offsetof(conf_fwd_group_t, field),                                       \
		.size = sizeof(((conf_fwd_group_t *)0)->field), .min = lo, .max = hi, .def = dflt, \
		.flags = CONF_F_RESTART, .doc = text                                               \
	}

#define PATHS_UINT(sec, key, field, lo, hi, dflt, text)                                            \
	{                                                                                          \
		.section = sec, .name = key, .type = CONF_TYPE_UINT,                               \
		.offset = offsetof(conf_paths_t, field),                                           \
		.size = sizeof(((conf_paths_t *)0)->field), .min = lo, .max = hi, .def = dflt,     \
		.doc = text                                                                        \
	}

#define PATHS_DURATION(sec, key, field, lo, hi, u, dflt, text)                                     \
	{                                                                                          \
		.section = sec, .name = key, .type = CONF_TYPE_DURATION,                           \
		.offset = offsetof(conf_paths_t, field),                                           \
		.size = sizeof(((conf_paths_t *)0)->field), .min = lo, .max = hi, .unit = u,       \
		.def = dflt, .doc = text                                                           \
	}

/* sun_path holds 108 bytes including the terminating NUL. */
#define UNIX_PATH_MAXLEN 107

static const conf_enum_t announce_methods[] = {
    {"interface", CONF_ANNOUNCE_INTERFACE},
    {"bird", CONF_ANNOUNCE_BIRD},
    {"frr", CONF_ANNOUNCE_FRR},
    {"keepalived", CONF_ANNOUNCE_KEEPALIVED},
    {NULL, 0},
};

#define CLUSTER_DURATION(sec, key, field, lo, hi, dflt, text)                                      \
	{                                                                                          \
		.section = sec, .name = key, .type = CONF_TYPE_DURATION,                           \
		.offset = offsetof(conf_cluster_t, field),                                         \
		.size = sizeof(((conf_cluster_t *)0)->field), .min = lo, .max = hi,                \
		.unit = CONF_UNIT_MS, .def = dflt, .flags = CONF_F_RESTART, .doc = text            \
	}

#define CLUSTER_UINT(sec, key, field, lo, hi, dflt, text)                                          \
	{                                                                                          \
		.section = sec, .name = key, .type = CONF_TYPE_UINT,                               \
		.offset = offsetof(conf_cluster_t, field),                                         \
		.size = sizeof(((conf_cluster_t *)0)->field), .min = lo, .max = hi, .def = dflt,   \
		.flags = CONF_F_RESTART, .doc = text                                               \
	}

#define CLUSTER_SWITCH(key, field, dflt, text)                                                     \
	{                                                                                          \
		.section = "cluster.self-check", .name = key, .type = CONF_TYPE_ENUM,              \
		.offset = offsetof(conf_cluster_t, field),                                         \
		.size = sizeof(((conf_cluster_t *)0)->field), .enums = switches, .def = dflt,      \
		.flags = CONF_F_RESTART, .doc = text                                               \
	}

const conf_section_t conf_sections[] = {
    {"server", false, 0, "Listening sockets, threads, limits and process settings.", false, NULL},
    {"log", false, 0, "Where log messages go and how many.", false, NULL},
    {"zones", true, CONF_F_REQUIRED | CONF_F_NONEMPTY,
     "The zones to serve: a list with one mapping per zone. At least one zone is required, "
     "unless the server only forwards (see `forward`). "
     "Zone files are re-read on reload only when they changed.",
     false, NULL},
    {"keys", true, 0,
     "TSIG keys (RFC 8945) that sign zone transfers and other requests, one mapping per key "
     "or per key file. A signed request to any zone is verified: an unknown key is answered "
     "NOTAUTH/BADKEY, a wrong signature NOTAUTH/BADSIG, a clock off by more than the fudge "
     "NOTAUTH/BADTIME, and a good one gets a signed answer (every message of a transfer is "
     "signed). `xfr-allow` entries name keys to require them. See [TSIG](tsig.md). "
     "Example:\n\n"
     "```yaml\n"
     "keys:\n"
     "  - name: transfer-key\n"
     "    algorithm: hmac-sha256\n"
     "    secret: \"2k5Q1yE7pnJfQmPzWZ6Jw2yWbHk0Z3bJ5l1xZ8cQn3A=\"\n"
     "  - file: keys/knot.key\n"
     "zones:\n"
     "  - domain: example.com\n"
     "    file: example.com.zone\n"
     "    xfr-allow: [{ address: 192.0.2.0/24, key: transfer-key }]\n"
     "```",
     false, conf_keys_load},
    {"health", false, 0, "Health monitoring settings that are not per monitor.", false, NULL},
    {"monitors", false, 0,
     "Health checks: a mapping of monitor name -> the keys below. Names may not contain `/` or "
     "spaces. A monitor is attached by name to a service (every address of the service), to "
     "one datacenter of a service (overriding the service's), or to a datacenter itself as a "
     "link monitor that probes a `probe` address, such as the ISP gateway: while it is down, "
     "every address behind that datacenter is down. A target goes down after `fall` failed "
     "probes in a row and comes back after `rise` good ones. A key that only some types use "
     "(`path`, `qname`, `command`, ...) is an error on the others. Example:\n\n"
     "```yaml\n"
     "monitors:\n"
     "  web: { type: http, port: 8080, path: /health, expect-status: [200, 204] }\n"
     "  gw: { type: tcp, port: 179, interval: 1s, timeout: 500ms, fall: 2 }\n"
     "  dns1: { type: dns, qname: example.test., qtype: SOA, rcode: NOERROR }\n"
     "  script: { type: exec, command: [/usr/local/bin/check-db, --quick] }\n"
     "  maint: { type: static, state: down }\n"
     "datacenters:\n"
     "  - { name: telecom, monitor: gw, probe: 10.0.0.1 }\n"
     "services:\n"
     "  - name: www.example.test\n"
     "    monitor: web\n"
     "    datacenters:\n"
     "      - name: telecom\n"
     "        addresses:\n"
     "          - 198.51.100.10\n"
     "          - { address: 198.51.100.11, probe: \"10.0.0.11:8080\",\n"
     "              requires: [datacenter/telecom] }\n"
     "health:\n"
     "  state-file: /var/lib/steer/health.state\n"
     "```",
     false, conf_health_load_monitors},
    {"datacenters", true, 0,
     "GSLB: the sites (or ISP links) that services answer from, one mapping per datacenter. "
     "Maps and services refer to them by name. All GSLB sections take effect on reload; a "
     "name that refers to something not configured is an error with its `file:line`.",
     false, conf_gslb_load_datacenters},
    {"maps", false, 0,
     "GSLB: client address -> ordered list of datacenters, used by `geo` services. A mapping "
     "of map name -> the keys below. The most specific source wins: `nets` prefixes (longest "
     "match), then the `geoip` database, then `default`. The client is the EDNS Client Subnet "
     "address when the query carries one (RFC 7871), else the resolver's address.",
     false, conf_gslb_load_maps},
    {"maps.nets", true, 0,
     "Each item of a map's `nets` list: address prefixes, inline or from a file, and the "
     "datacenters to prefer for them. Give exactly one of `file` and `cidr`. A prefix with "
     "bits set beyond its length (`1.2.3.4/24`) is an error. The same prefix twice in one map "
     "(in one file, two files or inline) is an error naming both places when the datacenter "
     "lists differ, and a warning when they are the same.",
     true, NULL},
    {"maps.geoip", false, 0,
     "A map's `geoip` mapping: a MaxMind database (mmdb, e.g. GeoLite2-City or GeoLite2-ASN), "
     "or a location database plus an ASN database (`asn-database`), consulted for clients no "
     "`nets` prefix matched. A rule needing data that no configured database has (an `asn` "
     "rule on a City database alone, a `match` rule or `auto-distance` on an ASN database) is "
     "a configuration error.",
     true, NULL},
    {"maps.geoip.rules", true, 0,
     "Each item of `geoip.rules`: a location or ASN rule and its datacenters. ASN rules win "
     "over location rules; among location rules the deepest match wins. Give exactly one of "
     "`match` and `asn`.",
     true, NULL},
    {"services", true, 0,
     "GSLB: names answered per client. A list with one mapping per service; each name must "
     "lie inside a served zone and may be listed once. A service answers A and AAAA queries "
     "with the addresses of the datacenter its `policy` picks, skipping datacenters with no "
     "address up. Example:\n\n"
     "```yaml\n"
     "datacenters:\n"
     "  - { name: telecom, coords: [31.23, 121.47] }\n"
     "  - { name: edu }\n"
     "maps:\n"
     "  isp:\n"
     "    nets:\n"
     "      - { file: nets/chinanet.txt, datacenters: [telecom, edu] }\n"
     "      - { cidr: [202.120.0.0/16, \"2001:da8::/32\"], datacenters: [edu, telecom] }\n"
     "    default: [telecom, edu]\n"
     "services:\n"
     "  - name: www.example.test\n"
     "    policy: geo\n"
     "    map: isp\n"
     "    datacenters:\n"
     "      - { name: telecom, addresses: [198.51.100.10, \"2001:db8:1::10\"] }\n"
     "      - { name: edu, addresses: [192.0.2.10, 192.0.2.11], policy: weighted,\n"
     "          weights: [3, 1] }\n"
     "    all-down: fallback\n"
     "    fallback: [192.0.2.99]\n"
     "whoami: [whoami.example.test]\n"
     "gslb:\n"
     "  overrides:\n"
     "    - { pattern: \"service/*/edu/*\", state: down }\n"
     "```",
     false, conf_gslb_load_services},
    {"services.datacenters", false, 0,
     "A service's `datacenters`, best first: the order is the failover order (and the `geo` "
     "order for clients no map entry prefers). Write it as a list, one mapping per "
     "datacenter with its `name` and the keys below:\n\n"
     "```yaml\n"
     "    datacenters:\n"
     "      - { name: telecom, addresses: [198.51.100.10] }\n"
     "      - { name: edu, addresses: [192.0.2.10, 192.0.2.11], policy: weighted }\n"
     "```\n\n"
     "The older mapping form (`telecom: { addresses: [...] }`, one key per datacenter) is "
     "still accepted and keeps the order of the keys as written, but a YAML tool that "
     "rewrites the file (PyYAML's `safe_dump` sorts keys by default) silently changes the "
     "failover order; a list keeps its order everywhere.",
     true, NULL},
    {"services.qos", false, 0,
     "A service's `qos` mapping: the coefficients of the `qos` score (F5 3-DNS's defaults). "
     "Each candidate datacenter scores the sum over the metrics of coefficient x its value "
     "normalised to 0..1 among the candidates (1 = the best one); a metric no candidate has is "
     "left out, a candidate without it scores 0 for it. The highest score is answered first. "
     "Example: `qos: { rtt: 100, completion-rate: 10, packet-rate: 0 }` (keys not given keep "
     "their defaults).",
     true, NULL},
    {"services.datacenters.addresses", false, 0,
     "An item of `addresses` written as a mapping, to give one address its own weight, probe "
     "or dependencies: `{ address: 192.0.2.10, weight: 2 }`. A plain address has weight 1.",
     true, NULL},
    {"whoami", false, 0,
     "GSLB: a list of names (each inside a served zone) that answer with the address of the "
     "resolver that asked and the EDNS Client Subnet it sent (A/AAAA and TXT). For debugging what "
     "a resolver passes on.",
     false, conf_gslb_load_whoami},
    {"gslb", false, 0,
     "GSLB administration: forced up/down states (overrides) and where they persist. Health "
     "targets are named `service/<service name without trailing dot>/<datacenter>/<address>`, "
     "e.g. `service/www.example.test/edu/192.0.2.10`.",
     false, conf_gslb_load_gslb},
    {"gslb.overrides", true, 0,
     "Each item of `gslb.overrides`: force the targets matching a glob up or down. Later "
     "rules win; rules from the state file apply after these.",
     true, NULL},
    {"forward", false, 0,
     "The caching forwarder: names outside the served zones are answered from a cache, and "
     "cache misses are forwarded to recursive resolvers (Unbound, BIND, Knot Resolver; Steer "
     "does not resolve iteratively). Authoritative and GSLB names answer first. Each "
     "`groups` entry sends a domain suffix (`.` for everything) to its upstreams, one per "
     "network exit link in preference order. Every upstream is probed over the path real "
     "queries take (its `source` address and `link`) with a cache-busting recursive query, "
     "so an upstream that is alive but cannot resolve is told from one that is down; real "
     "queries that time out bring the next probe forward, and a client query whose "
     "upstream does not answer within `retry-timeout` is sent to the next upstream within "
     "the same request. Only clients in `allow-recursion` may recurse; the others get "
     "REFUSED for names outside Steer's own zones. With `forward` groups, `zones` may be "
     "left out (a forwarder-only server). Example:\n\n"
     "```yaml\n"
     "forward:\n"
     "  allow-recursion: [10.0.0.0/24, \"2001:db8:10::/48\"]\n"
     "  cache: { max-size: 256M, min-ttl: 0, max-ttl: 1d, serve-stale: 30s, prefetch: on }\n"
     "  groups:\n"
     "    - domain: .\n"
     "      policy: ordered\n"
     "      upstreams:\n"
     "        - { name: link1, address: 10.53.1.53, source: 10.1.1.1 }\n"
     "        - { name: link2, address: 10.53.2.53, source: 10.1.2.1 }\n"
     "      probe: { name: probe.example.test, interval: 1s, timeout: 500ms, fall: 2, rise: "
     "3, hold-down: 5s }\n"
     "      retry-timeout: 400ms\n"
     "```\n\n"
     "Without a configuration file, `steerd --forward ADDR[:PORT][@SOURCE]` (repeatable, in "
     "preference order; IPv6 as `[2001:db8::53]:53@2001:db8::1`) and `--allow-recursion "
     "PREFIX` (repeatable) make one group `.` with policy `ordered`, the default probe "
     "settings and upstreams named `upstream1`, `upstream2`, ...",
     false, conf_forward_load},
    {"forward.cache", false, 0,
     "The `forward.cache` mapping: the answer cache shared by every group. Positive and "
     "negative answers (RFC 2308) are cached with their TTLs counted down; SERVFAIL and "
     "other failures are never cached.",
     true, NULL},
    {"forward.groups", true, 0,
     "Each item of `forward.groups`: a domain suffix and the upstreams that resolve it. A "
     "query goes to the group with the longest matching `domain`; names no group covers "
     "are REFUSED. Each domain may be listed once.",
     true, NULL},
    {"forward.groups.upstreams", true, 0,
     "Each item of a group's `upstreams`, in preference order (the order `ordered` tries "
     "them): one recursive resolver, usually one per exit link.",
     true, NULL},
    {"forward.groups.probe", false, 0,
     "A group's `probe` mapping: how each of its upstreams is checked. An upstream goes "
     "down after `fall` failed probes in a row and comes back after `rise` good ones that "
     "also span `hold-down`; while real queries to it time out it is probed every 200 ms "
     "instead of every `interval`.",
     true, NULL},
    {"cluster", false, 0,
     "This server as one node of a cluster behind shared service addresses: anycast (each "
     "node announces the addresses through BIRD or FRR, the routers spread queries by "
     "equal-cost multipath) or VRRP (keepalived moves the addresses). `steerd` checks itself "
     "every `self-check.interval` (a real query to each service address from the unicast "
     "address, every query thread alive, zones and reloads good, the return path routable) "
     "and withdraws the addresses after `fall` failed rounds; a separate keeper process holds "
     "the announcement and withdraws on its own when `steerd` stops sending heartbeats for "
     "`liveness-timeout` (killed, hung, stopped). Every key applies on restart. Example:\n\n"
     "```yaml\n"
     "cluster:\n"
     "  node-id: n1\n"
     "  service-addresses: [192.0.2.53, \"2001:db8::53\"]\n"
     "  interface: vip0\n"
     "  unicast: [10.53.0.11, \"2001:db8:53::11\"]\n"
     "  announce: bird\n"
     "  bird: { socket: /run/bird/bird.ctl, protocol: vip }\n"
     "  self-check: { interval: 100ms, fall: 3, rise: 5, hold-down: 2s }\n"
     "  liveness-timeout: 300ms\n"
     "  drain: { quiet: 500ms, timeout: 30s }\n"
     "```\n\n"
     "`steerd --check-config` validates the section without touching the network.",
     false, conf_cluster_load},
    {"cluster.bird", false, 0,
     "The `cluster.bird` mapping: the BIRD 2 protocol that `announce: bird` enables and "
     "disables over BIRD's control socket.",
     true, NULL},
    {"cluster.frr", false, 0,
     "The `cluster.frr` mapping: with `announce: frr` the node adds a kernel route to each "
     "service address while it should be announced and removes it to withdraw; FRR "
     "redistributes those routes (`redistribute kernel`).",
     true, NULL},
    {"cluster.keepalived", false, 0,
     "The `cluster.keepalived` mapping: with `announce: keepalived` the node writes its state "
     "into a track file that keepalived's `track_file` watches (`0` healthy, `1` fault); "
     "keepalived itself holds the service addresses (`virtual_ipaddress`).",
     true, NULL},
    {"cluster.self-check", false, 0,
     "The `cluster.self-check` mapping: how often and how strictly the node checks itself. A "
     "round fails when any check fails; `fall` failed rounds withdraw, `rise` good rounds "
     "after `hold-down` announce again.",
     true, NULL},
    {"cluster.drain", false, 0,
     "The `cluster.drain` mapping: `steerctl drain` withdraws first, keeps answering until "
     "no client query arrived for `quiet` (the routers moved the traffic away), then reports "
     "the node drained, or after `timeout` at the latest.",
     true, NULL},
    {"http", false, 0,
     "The HTTP front end, off unless `listen` is set: every control command as a JSON API "
     "under `/api/v1/<command>` (the same commands and replies as `steerctl`), Prometheus "
     "metrics at `/metrics` and the live status page at `/`. Mutating calls (reload, "
     "overrides, cache flush, drain, ...) need `Authorization: Bearer <token>` with the "
     "token of `token-file`; read-only calls need it too unless `read-only-open` is true. "
     "Served by the control thread, never by a query thread. Example:\n\n"
     "```yaml\n"
     "http:\n"
     "  listen: [127.0.0.1:8053, \"[::1]:8053\"]\n"
     "  token-file: /etc/steer/api.token\n"
     "  read-only-open: true\n"
     "```",
     false, conf_http_load},
    {"dnstap", false, 0,
     "The dnstap query log (https://dnstap.info): protobuf messages in Frame Streams, to a "
     "reader's UNIX socket (`fstrm_capture`, a collector) or to a file (`dnstap-read` reads "
     "it). Each query thread has its own queue; when the writer falls behind, messages are "
     "dropped and counted (`steerctl stats`, `/metrics`), the queries are never slowed. "
     "Every key applies on restart. Example:\n\n"
     "```yaml\n"
     "dnstap:\n"
     "  socket: /run/steer/dnstap.sock     # or file: /var/log/steer/dnstap.fstrm\n"
     "  messages: [auth-query, auth-response, forwarder-query, forwarder-response]\n"
     "  sample: 1                          # every Nth query\n"
     "```",
     false, conf_dnstap_load},
    {"stats-snapshots", false, 0,
     "Statistics snapshots for long-term graphs: every `interval` the counters of "
     "`steerctl stats` are appended to `file` as one JSON line (`{\"time\": ..., \"node\": "
     "..., \"stats\": {...}}`). Off unless `file` is set. Every key applies on restart.",
     false, conf_snapshots_load},
    {"alerts", true, 0,
     "Where state changes are sent: a list of destinations, each a `webhook` (the event "
     "POSTed as JSON) or an `exec` command (run without a shell, the event in its "
     "environment). Events: a health target up or down, a service or datacenter with "
     "every target down and its recovery, a forwarder upstream or link up or down, the "
     "cluster announcement withdrawn or restored, a failed reload and the next good one. "
     "Delivery runs on the control thread, never on the query path, and is retried. Every "
     "event is also logged as one structured line. Applies on restart. Example:\n\n"
     "```yaml\n"
     "alerts:\n"
     "  - { webhook: \"http://127.0.0.1:9000/hook\" }\n"
     "  - { exec: /usr/local/bin/steer-alert, timeout: 10s }\n"
     "```",
     false, conf_alerts_load},
    {"decision-log", false, 0,
     "The sampled GSLB decision log: for every `sample`-th GSLB decision, one JSON line in "
     "`file` with the client and its ECS subnet, the map block that matched and its nets "
     "`file:line`, the candidates with their health, the policy and the answer. Query "
     "threads only record the sample; the reasons are worked out and written by the control "
     "thread. Off unless `file` is set. Every key applies on restart.",
     false, conf_decision_log_load},
    {"paths", false, 0,
     "Steering by measured paths (F5 3-DNS's dynamic methods): a `steer-probe` agent in each "
     "datacenter measures the round-trip time, loss and hops to the resolvers and ECS client "
     "prefixes the DNS nodes report, and publishes a table that every node fetches with a "
     "conditional GET (`<url>paths/table`). The node merges the tables (one column per "
     "datacenter) and swaps the result in off the query path; services with a measured "
     "`policy` (`rtt`, `completion-rate`, `hops`, `qos`) answer from it. A node serves the "
     "prefixes it answers at `/paths/demand` for the agents to probe. Absent: off. The node's "
     "keys apply on reload; `probe` is read by `steer-probe` (see [measured "
     "paths](measured-paths.md)). Example:\n\n"
     "```yaml\n"
     "paths:\n"
     "  agents:\n"
     "    - { datacenter: dc1, url: \"http://192.0.2.1:8054/\" }\n"
     "    - { datacenter: dc2, url: \"http://198.51.100.1:8054/\" }\n"
     "  path-ttl: 2400s\n"
     "  token-file: /etc/steer/paths.token\n"
     "  hysteresis: { margin: 20, min-difference: 10ms, rounds: 2 }\n"
     "  probe:\n"
     "    nodes: [\"http://10.0.0.53:8053/\"]\n"
     "    methods: [dns, tcp, icmp]\n"
     "    dns-name: probe.example.test.\n"
     "```",
     false, conf_paths_load},
    {"paths.agents", true, 0,
     "Each item of `paths.agents`: one datacenter's `steer-probe` and where the nodes fetch "
     "its table. A datacenter has one agent at most; datacenters without one have no column "
     "(measured policies order them after those with data).",
     true, NULL},
    {"paths.hysteresis", false, 0,
     "The `paths.hysteresis` mapping: when RTT steering (and the load policies) may move a "
     "prefix to another datacenter. A challenger replaces the sticky best only when it is "
     "better by `margin` percent and by `min-difference`, in `rounds` consecutive rounds, so "
     "measurement jitter never makes answers flip back and forth.",
     true, NULL},
    {"paths.probe", false, 0,
     "The `paths.probe` mapping: the settings of the `steer-probe` agents (they read the same "
     "file). DNS nodes ignore it; `steerd --check-config` validates it all the same, so an "
     "agent never starts on a file its nodes would reject.",
     true, NULL},
    {"rrl", false, 0,
     "Response Rate Limiting, as in BIND, Knot and NSD: a server that answers spoofed UDP "
     "queries becomes a reflector; RRL caps the answers one client prefix (`ipv4-prefix`, "
     "`ipv6-prefix`) gets per second for one kind of response (the same name and type, "
     "NXDOMAIN from one zone, a referral to one delegation, NODATA, errors). Over the limit, "
     "every `slip`-th answer goes out empty with TC=1, so a real client retries over TCP, "
     "the others are dropped. TCP is never limited. Off unless `rate` is set. Every key "
     "applies on reload; the bucket table is kept when `table-size` is unchanged.",
     false, conf_rrl_load},
    {"cookies", false, 0,
     "DNS Cookies (RFC 7873) with RFC 9018 server cookies (SipHash-2-4, a timestamp valid for "
     "an hour): a query with a COOKIE option gets our server cookie back; a client presenting "
     "a valid one proves it is not spoofed, which `rrl.exempt-cookies` honours. Nodes of a "
     "cluster that share `secret` accept each other's cookies. Without a secret a random one "
     "is made at start and kept across reloads. Malformed COOKIE options are answered "
     "FORMERR. Every key applies on reload.",
     false, conf_cookies_load},
};
const size_t conf_n_sections = sizeof(conf_sections) / sizeof(conf_sections[0]);

const conf_key_t conf_keys[] = {
    {.section = "server",
     .name = "listen",
     .type = CONF_TYPE_ADDR_LIST,
     .offset = offsetof(conf_t, listen),
     .size = offsetof(conf_t, n_listen),
     .def = "127.0.0.1:53",
     .flags = CONF_F_RESTART | CONF_F_NONEMPTY,
     .doc =
         "Addresses to answer DNS queries on, over both UDP and TCP. Write `IP:PORT`; IPv6 "
         "addresses go in brackets and must be quoted in YAML (`\"[::1]:53\"`); the port is 53 "
         "when omitted. A wildcard address (`0.0.0.0`, `\"[::]\"`) works: replies leave from the "
         "address each query arrived at. The default only listens on loopback, so a fresh "
         "install is not an open server by accident."},
    SERVER_UINT("workers", workers, 0, 256, "0", CONF_F_RESTART,
                "UDP worker threads; each has its own `SO_REUSEPORT` socket per listen address. "
                "`0` starts one per CPU."),
    SERVER_UINT("tcp-workers", tcp_workers, 0, 64, "0", CONF_F_RESTART,
                "TCP event-loop threads. `0` starts one per CPU, at most 4."),
    SERVER_UINT(
        "udp-max-payload", udp_max_payload, 512, 4096, "1232", 0,
        "Largest UDP reply in bytes when the client advertises EDNS(0) (RFC 6891); "
        "larger answers are truncated (TC=1) so the client retries over TCP. 1232 avoids IP "
        "fragmentation on virtually every path (DNS Flag Day 2020)."),
    {.section = "server",
     .name = "storage",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_t, storage),
     .def = "/var/lib/steer",
     .doc = "Folder where secondary zones without `file` are kept, one "
            "`<domain>.zone` each, and the IXFR history of every zone that keeps one, one "
            "`<domain>.journal` each. Must be writable by the daemon's user. Quick mode "
            "(no configuration file) has none: it neither reads nor writes this folder."},
    SERVER_UINT("tcp-max-clients", tcp_max_clients, 1, 1000000, "1000", 0,
                "Open TCP connections allowed across all TCP threads. When all are open, a new "
                "connection takes the socket of an idle one (the oldest, preferring clients "
                "that hold many); it is closed at once only when none can be evicted."),
    SERVER_DURATION("tcp-idle-timeout", tcp_idle_timeout, 100, 3600000, "10s",
                    "How long a TCP connection may sit idle between queries before it is "
                    "closed (RFC 7766)."),
    SERVER_DURATION("tcp-io-timeout", tcp_io_timeout, 100, 600000, "2s",
                    "How long the rest of a TCP message may take to arrive once its first byte "
                    "did, so slow or stalled clients cannot hold connections."),
    SERVER_UINT("tcp-max-clients-per-address", tcp_max_per_address, 0, 1000000, "100", 0,
                "Open TCP connections one client address may hold; a further connection from it "
                "is closed at once, so a single client cannot take the pool of "
                "`tcp-max-clients` for itself. `0`: no limit. See the TCP section of the "
                "operations guide for how a full pool evicts idle connections."),
    SERVER_UINT("tcp-max-clients-per-prefix", tcp_max_per_prefix, 0, 1000000, "250", 0,
                "Open TCP connections the addresses of one IPv4 /24 or IPv6 /56 may hold "
                "together; further ones are closed at once. `0`: no limit."),
    {.section = "server",
     .name = "user",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_t, user),
     .flags = CONF_F_RESTART,
     .doc = "Drop privileges to this user after binding the sockets. Unset: keep running as the "
            "user that started `steerd`."},
    {.section = "server",
     .name = "group",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_t, group),
     .flags = CONF_F_RESTART,
     .doc = "Group to switch to together with `user`. Unset: the user's primary group. Members "
            "of this group may use the control socket."},
    {.section = "server",
     .name = "control-socket",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_t, control_socket),
     .max = UNIX_PATH_MAXLEN,
     .def = "/run/steer/steerd.sock",
     .flags = CONF_F_RESTART,
     .doc = "UNIX socket that `steerctl` talks to (mode 0660: root and the daemon's group). At "
            "most 107 bytes long, the limit of a UNIX socket address."},
    {.section = "server",
     .name = "pid-file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_t, pid_file),
     .flags = CONF_F_RESTART,
     .doc = "Write the daemon's process id to this file. Unset: no pid file."},
    {.section = "server",
     .name = "identity",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_t, identity),
     .max = 255,
     .doc = "The name of this server instance, for operators and monitoring to see which node "
            "of an anycast or VRRP service answered: `CH TXT id.server.` and `hostname.bind.` "
            "answer it (TTL 0, like Knot DNS), and a query whose EDNS OPT carries the NSID "
            "option (RFC 5001) gets it back as the response's NSID, on error answers and "
            "the caching forwarder's answers too (left out only when it would not fit the "
            "client's UDP size). "
            "Printable ASCII, at most 255 bytes. Unset: `cluster.node-id` when a `cluster` "
            "section is present, else none (those names are REFUSED like every other CH "
            "query, and NSID is ignored). `version.bind` is `server.version`'s."},
    {.section = "server",
     .name = "version",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_t, version),
     .max = 255,
     .flags = CONF_F_EMPTY_OK,
     .doc = "What `CH TXT version.bind.` and `version.server.` answer (TTL 0, no AA), whether "
            "or not `server.identity` is set. Printable ASCII, at most 255 bytes. Unset: "
            "`Steer ` and the daemon's version. `\"\"` hides it: those names are REFUSED like "
            "every other unknown CH name."},
    {.section = "log",
     .name = "target",
     .type = CONF_TYPE_ENUM,
     .offset = offsetof(conf_t, log_target),
     .enums = log_targets,
     .def = "stderr",
     .doc = "`stderr` writes one line per message starting with an ISO 8601 timestamp with "
            "milliseconds and UTC offset (`2026-12-01T20:15:03.123+00:00 steerd[info]: ...`); "
            "under systemd (`JOURNAL_STREAM` set) the line starts with a priority prefix "
            "(`<6>`) instead, which journald reads, and journald records the time. `syslog` "
            "sends to the local syslog daemon (facility daemon)."},
    {.section = "log",
     .name = "level",
     .type = CONF_TYPE_ENUM,
     .offset = offsetof(conf_t, log_level),
     .enums = log_levels,
     .def = "info",
     .doc = "Least severe messages that are logged. Messages on the query path are also rate "
            "limited whatever the level."},
    {.section = "zones",
     .name = "domain",
     .type = CONF_TYPE_DNAME,
     .offset = offsetof(conf_zone_t, domain),
     .flags = CONF_F_REQUIRED,
     .doc = "The zone's apex, e.g. `example.com` (trailing dot optional). Each zone may be "
            "listed once; a zone and its parent may both be served, the longest match wins."},
    {.section = "zones",
     .name = "name",
     .type = CONF_TYPE_DNAME,
     .offset = offsetof(conf_zone_t, domain),
     .flags = CONF_F_ALIAS,
     .doc = "Another name for `domain`, so that every list entry can be named with `name:`. "
            "Give one of the two."},
    {.section = "zones",
     .name = "file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_zone_t, file),
     .doc = "Zone file in RFC 1035 master format. A file with an error is refused with its "
            "`file:line` and, on reload, the previous version of the zone keeps serving. "
            "Required, except for a secondary zone (one with `primaries`): there it is where "
            "the transferred zone is kept (written whole after each transfer, then read at "
            "start so the zone is served at once), by default `<server.storage>/<domain>.zone`."},
    {.section = "zones",
     .name = "xfr-allow",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of prefixes or `{ address: PREFIX, key: NAME }`",
     .doc = "Clients allowed to transfer the zone with AXFR over TCP. A plain item is an "
            "address or prefix such as `192.0.2.1`, `10.0.0.0/8`, `\"2001:db8::/32\"` (host "
            "bits beyond the prefix length are an error, which catches typos); a mapping "
            "`{ address: PREFIX, key: NAME }` also requires the request to be signed with the "
            "TSIG key NAME from `keys`, and `{ key: NAME }` allows any address that signs with "
            "it. A client that matches only entries needing a key and does not sign is "
            "refused. A key not configured in `keys` is an error. Unset or empty: nobody."},
    {.section = "zones",
     .name = "ixfr-history",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_zone_t, ixfr_history),
     .size = sizeof(((conf_zone_t *)0)->ixfr_history),
     .min = 0,
     .max = 10000,
     .def = "20",
     .doc = "How many changes of the zone (each reload that raised its SOA serial, or each "
            "new version of a secondary zone) are kept so that IXFR (RFC 1995) can send a "
            "secondary only what changed since its version. The history is kept in "
            "`<server.storage>/<domain>.journal` and read back at start when it ends at the "
            "serial of the zone loaded (otherwise it starts empty); it is cleared when a new "
            "serial is not greater than the old one (RFC 1982), and its oldest changes are "
            "dropped while all of them together are larger than the zone itself. A client "
            "whose version is not in it gets the whole zone, as RFC 1995 4 allows. Kept only "
            "for zones with an `xfr-allow`. 0: AXFR only (and no file)."},
    /* ---- TSIG keys ---- */
    {.section = "keys",
     .name = "name",
     .type = CONF_TYPE_DNAME,
     .offset = offsetof(conf_key_item_t, name),
     .doc = "The key's name, a domain name (`transfer-key`, `xfr.example.com.`); both ends "
            "must use the same one. Names are unique, compared case-insensitively."},
    {.section = "keys",
     .name = "algorithm",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_key_item_t, algorithm),
     .enums = tsig_algorithms,
     .doc = "The HMAC: `hmac-sha256` (what `tsig-keygen` and `keymgr -t` make by default), "
            "`hmac-sha384`, `hmac-sha512`, `hmac-sha224`, or `hmac-sha1` for old peers."},
    {.section = "keys",
     .name = "secret",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_key_item_t, secret),
     .doc = "The shared secret in base64, as `tsig-keygen` prints it. It must decode (at "
            "most 256 bytes). Keep the configuration file unreadable to others, or use `file`."},
    {.section = "keys",
     .name = "file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_key_item_t, file),
     .doc = "Instead of `name`, `algorithm` and `secret`: a key file as `tsig-keygen NAME` "
            "(BIND: `key \"NAME\" { algorithm ...; secret \"...\"; };`) or `keymgr -t NAME` "
            "(Knot: `key:` list of `id`, `algorithm`, `secret`) write it; it may hold several "
            "keys. An error in the file is reported with its line."},
    {.section = "zones",
     .name = "notify",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of addresses or mappings (`address`, `key`, `source`)",
     .doc = "Secondaries sent a NOTIFY (RFC 1996) when this zone is loaded with a new serial "
            "(at start and on reload): `192.0.2.2`, `\"192.0.2.3@5300\"`, "
            "`\"[2001:db8::2]:5300\"` or `{ address: ..., key: NAME, source: IP }` (signed "
            "with the TSIG key NAME of `keys:`, sent from IP). Each is retried up to 5 times, "
            "2 s apart, until it answers. Unset: none."},
    {.section = "zones",
     .name = "primaries",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of addresses or mappings (`address`, `key`, `source`)",
     .doc = "Makes this a secondary zone: it is transferred (AXFR, RFC 5936, or IXFR) from these "
            "servers, tried in order, and refreshed as its SOA says (refresh, retry, expire; "
            "serials compared as RFC 1982 says). Entries as in `notify`; with `key` the "
            "queries are signed with that TSIG key. A NOTIFY from a primary refreshes at "
            "once. When the zone expires (no good refresh for the SOA's expire time) it is "
            "answered SERVFAIL until a transfer succeeds again."},
    {.section = "zones",
     .name = "notify-allow",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of prefixes or mappings (`address`, `key`)",
     .doc = "Who may NOTIFY this secondary zone besides its primaries (which always may): "
            "prefixes like `xfr-allow`. Others get NOTAUTH. Secondary zones only."},
    {.section = "zones",
     .name = "ixfr",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_zone_t, ixfr),
     .def = "true",
     .doc = "Ask for an incremental transfer (IXFR, RFC 1995) when a version of the zone is "
            "held; a primary that refuses it, or diffs that do not apply to the version held, "
            "fall back to AXFR. `false`: always AXFR."},
    {.section = "zones",
     .name = "refresh-min",
     .type = CONF_TYPE_DURATION,
     .offset = offsetof(conf_zone_t, refresh_min),
     .size = sizeof(((conf_zone_t *)0)->refresh_min),
     .min = 100,
     .max = 86400000,
     .unit = CONF_UNIT_MS,
     .def = "2s",
     .doc = "Lower bound on the SOA's refresh and retry intervals of a secondary zone (also "
            "the retry interval before any version is held)."},
    {.section = "zones",
     .name = "refresh-max",
     .type = CONF_TYPE_DURATION,
     .offset = offsetof(conf_zone_t, refresh_max),
     .size = sizeof(((conf_zone_t *)0)->refresh_max),
     .min = 100,
     .max = 2419200000U,
     .unit = CONF_UNIT_MS,
     .def = "1d",
     .doc = "Upper bound on the SOA's refresh and retry intervals of a secondary zone."},
    {.section = "zones",
     .name = "max-transfer-size",
     .type = CONF_TYPE_SIZE,
     .offset = offsetof(conf_zone_t, max_transfer_size),
     .size = sizeof(((conf_zone_t *)0)->max_transfer_size),
     .min = 1,
     .max = 4194304,
     .def = "256M",
     .doc = "Bytes of messages one transfer of a secondary zone may receive; a bigger "
            "transfer is aborted and the version served keeps serving. At most 4G."},
    {.section = "zones",
     .name = "max-records",
     .type = CONF_TYPE_NODE,
     .type_doc = "number (1 to 1000000000)",
     .doc = "Records one version of a secondary zone may have; a transfer with more is "
            "aborted and the version served keeps serving. Unset: 5000000."},
    /* ---- health monitors ---- */
    {.section = "health",
     .name = "state-file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_t, health_state_file),
     .doc = "Monitor states are saved here when they change and read back at start and on "
            "reload, so a restarted server answers with the last known states until its first "
            "probes complete. Unset: states are not saved."},
    {.section = "monitors",
     .name = "type",
     .type = CONF_TYPE_NODE,
     .type_doc = "one of `tcp`, `http`, `https`, `dns`, `exec`, `static`, `metrics`",
     .flags = CONF_F_REQUIRED,
     .doc = "What a probe does: `tcp` connects; `http` and `https` send a GET and check the "
            "status (and `body`); `dns` sends a query and checks the rcode (and `answer`); "
            "`exec` runs `command` and checks for exit status 0; `static` never probes and "
            "holds `state` (for maintenance); `metrics` fetches load values over HTTP(S) "
            "(`format`, the value keys) for the load policies and never decides up or down "
            "(name it with `metrics:` on a service, not `monitor:`)."},
    {.section = "monitors",
     .name = "port",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_monitor_t, port),
     .size = sizeof(((conf_monitor_t *)0)->port),
     .min = 1,
     .max = 65535,
     .doc = "Port to probe on the target address. Unset: 80 for `http`, 443 for `https`, 53 "
            "for `dns`, 80 (443 with `tls`) for `metrics`; `tcp` needs one. A port in a `probe` "
            "address wins (not for `metrics`, which reads the answer address). `tcp`, `http`, "
            "`https`, `dns` and `metrics` only."},
    MONITOR_DURATION("interval", interval, 100, 3600000, CONF_UNIT_MS, "2s",
                     "Time between the starts of two probes of a target."),
    MONITOR_DURATION("timeout", timeout, 10, 600000, CONF_UNIT_MS, "1s",
                     "How long a probe may take before it counts as failed (an `exec` command "
                     "is killed). Must be less than `interval`."),
    MONITOR_UINT("fall", fall, 1, 100, "3", "Failed probes in a row that take a target down."),
    MONITOR_UINT("rise", rise, 1, 100, "3", "Good probes in a row that bring a target back up."),
    MONITOR_UINT("jitter", jitter, 0, 50, "10",
                 "Each probe starts up to this percentage of `interval` early or late, so "
                 "targets checked by one monitor are not all probed at once."),
    MONITOR_DURATION("hold-down", hold_down, 0, 86400000, CONF_UNIT_MS, "0s",
                     "How long a recovered target waits after its `rise` good probes before "
                     "it is answered again, so a flapping server stays out longer."),
    MONITOR_DURATION("slow-start", slow_start, 0, 86400000, CONF_UNIT_MS, "0s",
                     "Time over which a recovered target's weight ramps up to its full "
                     "weight, for weighted policies. `0s`: full weight at once."),
    MONITOR_DURATION("ttl-floor", ttl_floor, 0, 86400, CONF_UNIT_S, "5s",
                     "While a target an answer depends on is down or flapping, the answer's "
                     "TTL is at most this, so resolvers ask again soon. Whole seconds (a TTL "
                     "has no finer unit)."),
    {.section = "monitors",
     .name = "path",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_monitor_t, path),
     .def = "/",
     .doc = "`http`, `https`, `metrics`: the request path, with any query string; starts with "
            "`/`. Unset: `/` (`/metrics` for `metrics`)."},
    {.section = "monitors",
     .name = "host",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_monitor_t, host),
     .doc = "`http`, `https`, `metrics`: the `Host` header and the TLS server name. Unset: "
            "the probed address."},
    {.section = "monitors",
     .name = "expect-status",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of 1 to 8 HTTP status codes, 100 to 599 (a single code is accepted too)",
     .doc = "`http`, `https`: the status codes that count as up. Unset: any 2xx or 3xx."},
    {.section = "monitors",
     .name = "body",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_monitor_t, body),
     .doc = "`http`, `https`: text that must appear in the first 5,120 bytes of the response "
            "body. Unset: the body is not checked."},
    {.section = "monitors",
     .name = "tls-verify",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_monitor_t, tls_verify),
     .def = "true",
     .doc = "`https`, `metrics` with `tls`: verify the certificate chain and name (`host`, "
            "else the address). `false` accepts self-signed certificates."},
    {.section = "monitors",
     .name = "qname",
     .type = CONF_TYPE_DNAME,
     .offset = offsetof(conf_monitor_t, qname),
     .doc = "`dns`: the name to query. Unset: the monitored service's name (a datacenter's "
            "link monitor needs one)."},
    {.section = "monitors",
     .name = "qtype",
     .type = CONF_TYPE_NODE,
     .type_doc = "a type mnemonic (`A`, `AAAA`, `NS`, `SOA`, `CNAME`, `MX`, `TXT`, `SRV`, `PTR`, "
                 "`CAA`, `DS`, `DNSKEY`, ...) or `TYPEn`",
     .def = "A",
     .doc = "`dns`: the query type."},
    {.section = "monitors",
     .name = "rcode",
     .type = CONF_TYPE_NODE,
     .type_doc = "`NOERROR`, `FORMERR`, `SERVFAIL`, `NXDOMAIN`, `NOTIMP`, `REFUSED`, `YXDOMAIN`, "
                 "`YXRRSET`, `NXRRSET`, `NOTAUTH` or `NOTZONE`",
     .def = "NOERROR",
     .doc = "`dns`: the response code that counts as up."},
    {.section = "monitors",
     .name = "answer",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_monitor_t, answer),
     .doc = "`dns`: an answer record's data, in presentation form (`192.0.2.1`), that must be "
            "in the response. Unset: any answer."},
    {.section = "monitors",
     .name = "command",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of strings: the program (the `PATH` is searched) and its arguments",
     .doc = "`exec`, required: the command to run, without a shell; exit status 0 is up. It "
            "is killed when `timeout` passes."},
    {.section = "monitors",
     .name = "state",
     .type = CONF_TYPE_ENUM,
     .offset = offsetof(conf_monitor_t, static_down),
     .size = sizeof(((conf_monitor_t *)0)->static_down),
     .enums = static_states,
     .def = "up",
     .doc = "`static`: the state every target of the monitor has."},
    {.section = "monitors",
     .name = "format",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_monitor_t, format),
     .enums = metrics_formats,
     .def = "prometheus",
     .doc = "`metrics`: what the endpoint serves: `prometheus` (the text exposition format of "
            "node_exporter and the nginx or haproxy exporters), `json` (any JSON document) or "
            "`nginx-stub-status` (nginx's stub_status page)."},
    {.section = "monitors",
     .name = "tls",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_monitor_t, tls),
     .def = "false",
     .doc = "`metrics`: fetch over HTTPS (see `tls-verify`) instead of HTTP."},
    MONITOR_DURATION("stale-after", stale_after, 100, 86400000, CONF_UNIT_MS, "30s",
                     "`metrics`: a value read longer ago than this is not used; the target "
                     "then counts by its static weight. A failed or garbled fetch keeps the "
                     "previous values until then."),
    METRIC_VALUE("connections", "current connections of the target"),
    METRIC_VALUE("capacity", "the connections the target can hold"),
    METRIC_VALUE("packet-rate", "packets per second, e.g. "
                                "`rate(node_network_receive_packets_total{device=\"eth0\"})`"),
    METRIC_VALUE("kbps", "kilobytes per second, e.g. "
                         "`rate(node_network_transmit_bytes_total{device=\"eth0\"}) / 1000`"),
    METRIC_VALUE("cpu", "CPU use in percent"),
    METRIC_VALUE("link-capacity", "spare link capacity in kilobytes per second (higher is "
                                  "better)"),
    /* ---- GSLB ---- */
    {.section = "datacenters",
     .name = "name",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_datacenter_t, name),
     .max = 63,
     .flags = CONF_F_REQUIRED,
     .doc = "The datacenter's name, unique: letters, digits, `-`, `_` and `.`."},
    {.section = "datacenters",
     .name = "coords",
     .type = CONF_TYPE_NODE,
     .type_doc = "`[latitude, longitude]` in degrees (-90 to 90, -180 to 180)",
     .doc = "Where the datacenter is, for `geoip.auto-distance`. Unset: the datacenter is "
            "never chosen by distance."},
    {.section = "datacenters",
     .name = "monitor",
     .type = CONF_TYPE_NODE,
     .type_doc = "monitor name",
     .doc = "A link monitor (see `monitors`) checking `probe`: while it is down, every address "
            "of every service in this datacenter is down. Its target is named "
            "`datacenter/<name>`. Unset: none."},
    {.section = "datacenters",
     .name = "probe",
     .type = CONF_TYPE_NODE,
     .type_doc = "address: `IP`, `IP:PORT` or `\"[IPv6]:PORT\"`",
     .doc = "What the link monitor probes, e.g. the ISP gateway. Required with `monitor` "
            "(unless it is `static`), not allowed without it."},
    {.section = "maps",
     .name = "nets",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of mappings (see `maps.nets`)",
     .doc = "Address prefixes and their datacenter lists; the longest prefix matching the "
            "client wins."},
    {.section = "maps",
     .name = "geoip",
     .type = CONF_TYPE_NODE,
     .type_doc = "mapping (see `maps.geoip`)",
     .doc = "A MaxMind database for clients no `nets` prefix matched. Unset: no database."},
    {.section = "maps",
     .name = "default",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of datacenter names",
     .doc = "Datacenters for clients nothing else matched. Unset or empty: the service's own "
            "datacenter order."},
    {.section = "maps",
     .name = "ignore-ecs",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_map_t, ignore_ecs),
     .def = "false",
     .doc = "Decide on the resolver's address even when the query carries an EDNS Client "
            "Subnet option (answers then have scope 0)."},
    {.section = "maps",
     .name = "ecs-private-is-absent",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_map_t, ecs_private_is_absent),
     .def = "false",
     .doc = "Treat an ECS address that is private (RFC 1918, RFC 4193), loopback or link-local "
            "as no ECS, and decide on the resolver's address instead."},
    {.section = "maps",
     .name = "min-prefix-length",
     .type = CONF_TYPE_NODE,
     .type_doc = "`[IPv4 length, IPv6 length]`, 0 to 32 and 0 to 128",
     .def = "[8, 16]",
     .doc = "The shortest prefix a `nets` entry of this map may hold: a shorter one (such as "
            "`221.193.0.0/1` typed for `/16`, or `0.0.0.0/0`) is an error naming its "
            "`file:line`, unless that entry sets `allow-short-prefixes`."},
    {.section = "maps",
     .name = "max-shrink",
     .type = CONF_TYPE_NODE,
     .type_doc = "percentage, `0%` to `100%` (a bare number is a percentage too)",
     .def = "50%",
     .doc = "On reload, a nets file that lost more than this share of its prefixes compared "
            "with the running configuration, or became empty, is refused and the running "
            "configuration keeps serving (a half-downloaded ISP list would otherwise re-route "
            "that ISP). `steerctl reload --force` or the entry's `allow-shrink` accepts it; "
            "`SIGHUP` never forces. At start-up an empty file is only a warning."},
    {.section = "maps.nets",
     .name = "file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_nets_t, file),
     .doc = "A nets file: one prefix per line (`202.96.0.0/11`, `2001:db8::/32`), `#` starts a "
            "comment. Read at start and on every reload."},
    {.section = "maps.nets",
     .name = "cidr",
     .type = CONF_TYPE_PREFIX_LIST,
     .offset = offsetof(conf_nets_t, cidr),
     .size = offsetof(conf_nets_t, n_cidr),
     .flags = CONF_F_NONEMPTY,
     .doc = "Inline prefixes. Quote IPv6 prefixes in flow lists: `\"2001:da8::/32\"`."},
    {.section = "maps.nets",
     .name = "datacenters",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of datacenter names",
     .flags = CONF_F_REQUIRED,
     .doc = "The datacenters to prefer for these prefixes, best first."},
    {.section = "maps.nets",
     .name = "allow-short-prefixes",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_nets_t, allow_short_prefixes),
     .def = "false",
     .doc = "Accept prefixes shorter than the map's `min-prefix-length` in this entry."},
    {.section = "maps.nets",
     .name = "allow-shrink",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_nets_t, allow_shrink),
     .def = "false",
     .doc = "Accept a reload where this entry's file shrank by more than the map's "
            "`max-shrink` or became empty (without `steerctl reload --force`)."},
    {.section = "maps.geoip",
     .name = "database",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_map_t, geoip_database),
     .flags = CONF_F_REQUIRED,
     .doc = "The mmdb file (GeoLite2/GeoIP2 City, Country or ASN)."},
    {.section = "maps.geoip",
     .name = "asn-database",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_map_t, geoip_asn_database),
     .doc = "A second mmdb file with ASN data (GeoLite2-ASN, GeoIP2-ISP) used together with "
            "`database` (then a City or Country database): each address gets the location "
            "from `database` and the ASN from this one, so `asn` and `match` rules work in "
            "one map. Unset: ASNs come from `database` alone."},
    {.section = "maps.geoip",
     .name = "auto-distance",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_map_t, auto_distance),
     .def = "false",
     .doc = "When no rule matches a located client, order the datacenters that have `coords` "
            "by great-circle distance from the client."},
    {.section = "maps.geoip",
     .name = "rules",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of mappings (see `maps.geoip.rules`)",
     .doc = "Location and ASN rules. Unset: only `auto-distance` (if on) and `default`."},
    {.section = "maps.geoip.rules",
     .name = "match",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_geoip_rule_t, match),
     .doc = "A location: continent code, then country (ISO 3166), subdivision and city, "
            "separated by `/`: `AS`, `AS/CN`, `AS/CN/31`, `AS/CN/31/Shanghai`."},
    {.section = "maps.geoip.rules",
     .name = "asn",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of AS numbers (a single number is accepted too)",
     .doc = "Autonomous system numbers, e.g. `[4134, 4812]`; needs ASN data: an ASN, ISP or "
            "Enterprise `database`, or an `asn-database`."},
    {.section = "maps.geoip.rules",
     .name = "datacenters",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of datacenter names",
     .flags = CONF_F_REQUIRED,
     .doc = "The datacenters for clients the rule matches, best first."},
    {.section = "services",
     .name = "name",
     .type = CONF_TYPE_DNAME,
     .offset = offsetof(conf_service_t, name),
     .flags = CONF_F_REQUIRED,
     .doc = "The name answered, e.g. `www.example.test`; it must lie inside a served zone."},
    {.section = "services",
     .name = "policy",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_service_t, policy),
     .enums = dc_policies,
     .def = "failover",
     .doc = "How the datacenter is picked: `failover` (the first in `datacenters` with an "
            "address up), `geo` (the same in the order `map` gives for the client), "
            "`weighted` (weighted random), `persist` (a consistent hash of the client "
            "subnet, so a client keeps its datacenter while it is up) or `round-robin`. "
            "Measured (failover over an order measured per query; see `paths` and `metrics` "
            "monitors): `rtt` (lowest round-trip time from the client prefix), "
            "`completion-rate` (fewest lost probes), `hops` (fewest hops), `qos` (highest "
            "score, see `qos`), `least-connections`, `capacity` (most spare connections), "
            "`packet-rate` or `kbps` (the least loaded datacenter). Datacenters without a "
            "measurement come after those with one, in the `fallback-policy` order; with "
            "none at all, `fallback-policy` decides. Switching follows the hysteresis of "
            "`paths.hysteresis`."},
    {.section = "services",
     .name = "fallback-policy",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_service_t, fallback_policy),
     .enums = fallback_policies,
     .doc = "For a measured `policy`: what decides for a client with no (fresh) measurement, "
            "at once, while its prefix is queued for probing: `failover`, `geo` (with `map`), "
            "`weighted`, `persist` or `round-robin`. Only with a measured policy. Unset: `geo` "
            "when the service has a `map`, else `failover`."},
    {.section = "services",
     .name = "qos",
     .type = CONF_TYPE_NODE,
     .type_doc = "mapping of coefficient name -> 0..1000 (see `services.qos`)",
     .doc = "The coefficients of the `qos` policy's score. Only with `policy: qos`. Unset: "
            "F5 3-DNS's defaults."},
    {.section = "services",
     .name = "map",
     .type = CONF_TYPE_NODE,
     .type_doc = "map name",
     .doc = "The map ordering datacenters per client, for `geo`. Unset: none."},
    {.section = "services",
     .name = "ttl",
     .type = CONF_TYPE_DURATION,
     .offset = offsetof(conf_service_t, ttl),
     .size = sizeof(((conf_service_t *)0)->ttl),
     .min = 0,
     .max = 2147483647,
     .unit = CONF_UNIT_S,
     .def = "30s",
     .doc = "TTL of the answers, in whole seconds (RFC 2181 limit). Short, so clients move "
            "when a datacenter goes down."},
    {.section = "services",
     .name = "datacenters",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of mappings with a `name` (recommended), or a mapping of datacenter "
                 "name -> mapping (see `services.datacenters`)",
     .flags = CONF_F_REQUIRED,
     .doc = "The datacenters serving the name and their addresses, in failover order: the "
            "order they are written in."},
    {.section = "services",
     .name = "all-down",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_service_t, all_down),
     .enums = all_down_actions,
     .def = "first-datacenter",
     .doc = "What to answer when no datacenter has an address up: `first-datacenter` (all "
            "addresses of the first one, as if up), `fallback` (the `fallback` addresses or "
            "the `fallback-cname`), `nodata` or `servfail`."},
    {.section = "services",
     .name = "fallback",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of IP addresses (a single address is accepted too)",
     .doc = "Addresses answered for `all-down: fallback`. Unset: none."},
    {.section = "services",
     .name = "fallback-cname",
     .type = CONF_TYPE_DNAME,
     .offset = offsetof(conf_service_t, fallback_cname),
     .doc = "Or a CNAME target answered for `all-down: fallback` (not both with `fallback`)."},
    {.section = "services",
     .name = "persist-prefix",
     .type = CONF_TYPE_NODE,
     .type_doc = "`[IPv4 length, IPv6 length]`, 0 to 32 and 0 to 128",
     .def = "[24, 56]",
     .doc = "How much of the client address `persist` hashes: clients in one such subnet "
            "share a datacenter."},
    {.section = "services",
     .name = "monitor",
     .type = CONF_TYPE_NODE,
     .type_doc = "monitor name",
     .doc = "The monitor (see `monitors`) checking every address of the service, unless its "
            "datacenter names another. Unset: addresses are up unless a link monitor, a "
            "dependency or an override says otherwise."},
    {.section = "services",
     .name = "metrics",
     .type = CONF_TYPE_NODE,
     .type_doc = "monitor name",
     .doc = "A `metrics` monitor reading the load values (connections, capacity, packet rate, "
            "kB/s, CPU, link capacity) of every address of the service from the address itself "
            "(at the monitor's `port` and `path`), unless its datacenter names another; the "
            "load policies use them. It never takes an address down. Unset: no load values "
            "(load policies count addresses by their weight)."},
    {.section = "services.qos",
     .name = "packet-rate",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_service_t, qos) + CONF_QOS_PACKET_RATE * sizeof(unsigned),
     .size = sizeof(unsigned),
     .min = 0,
     .max = 1000,
     .def = "1",
     .doc = "Packets per second of the datacenter (lower is better)."},
    {.section = "services.qos",
     .name = "rtt",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_service_t, qos) + CONF_QOS_RTT * sizeof(unsigned),
     .size = sizeof(unsigned),
     .min = 0,
     .max = 1000,
     .def = "50",
     .doc = "Round-trip time from the client prefix (lower is better)."},
    {.section = "services.qos",
     .name = "completion-rate",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_service_t, qos) + CONF_QOS_COMPLETION_RATE * sizeof(unsigned),
     .size = sizeof(unsigned),
     .min = 0,
     .max = 1000,
     .def = "5",
     .doc = "Probes answered, 100 - loss percent (higher is better)."},
    {.section = "services.qos",
     .name = "hops",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_service_t, qos) + CONF_QOS_HOPS * sizeof(unsigned),
     .size = sizeof(unsigned),
     .min = 0,
     .max = 1000,
     .def = "0",
     .doc = "Hops from the client prefix (fewer is better)."},
    {.section = "services.qos",
     .name = "link-capacity",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_service_t, qos) + CONF_QOS_LINK_CAPACITY * sizeof(unsigned),
     .size = sizeof(unsigned),
     .min = 0,
     .max = 1000,
     .def = "30",
     .doc = "Spare link capacity the metrics report (higher is better)."},
    {.section = "services.qos",
     .name = "vs-capacity",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_service_t, qos) + CONF_QOS_VS_CAPACITY * sizeof(unsigned),
     .size = sizeof(unsigned),
     .min = 0,
     .max = 1000,
     .def = "0",
     .doc = "Spare connections, capacity - connections (higher is better)."},
    {.section = "services.qos",
     .name = "kbps",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_service_t, qos) + CONF_QOS_KBPS * sizeof(unsigned),
     .size = sizeof(unsigned),
     .min = 0,
     .max = 1000,
     .def = "3",
     .doc = "Kilobytes per second of the datacenter (lower is better)."},
    {.section = "services.datacenters",
     .name = "name",
     .type = CONF_TYPE_NODE,
     .type_doc = "datacenter name",
     .doc = "List form, required: which datacenter (see `datacenters`) this item is. Not "
            "used in the mapping form, where the key is the name."},
    {.section = "services.datacenters",
     .name = "addresses",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of IP addresses or mappings (see `services.datacenters.addresses`)",
     .flags = CONF_F_REQUIRED,
     .doc = "The datacenter's addresses, IPv4 and IPv6 mixed: A queries get the IPv4 ones, "
            "AAAA queries the IPv6 ones. Each may be listed once."},
    {.section = "services.datacenters",
     .name = "weights",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of unsigned integers, 1 to 65535",
     .doc = "Weights of `addresses`, one per address in the same order, for `weighted` (not "
            "together with per-address weights). Unset: weight 1 each."},
    {.section = "services.datacenters",
     .name = "policy",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_service_dc_t, policy),
     .enums = in_dc_policies,
     .doc = "How addresses are picked inside the datacenter: `all` (every address that is "
            "up), `failover` (the first address up, in list order), `weighted` (weighted "
            "random by address weight), `multi` (at most `multi` addresses that are up), "
            "`round-robin` or `persist` (a consistent hash of the client subnet). Unset: "
            "`all`."},
    {.section = "services.datacenters",
     .name = "multi",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_service_dc_t, multi),
     .size = sizeof(((conf_service_dc_t *)0)->multi),
     .min = 1,
     .max = 64,
     .doc = "For `policy: multi`: answer at most this many addresses that are up."},
    {.section = "services.datacenters",
     .name = "weight",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_service_dc_t, weight),
     .size = sizeof(((conf_service_dc_t *)0)->weight),
     .min = 1,
     .max = 65535,
     .def = "1",
     .doc = "The datacenter's weight for the service-level `weighted` and `persist` "
            "policies: with weights 3 and 1, three clients in four get the first "
            "datacenter (when both are up)."},
    {.section = "services.datacenters",
     .name = "monitor",
     .type = CONF_TYPE_NODE,
     .type_doc = "monitor name",
     .doc = "The monitor checking this datacenter's addresses, instead of the service's "
            "`monitor`. Unset: the service's."},
    {.section = "services.datacenters",
     .name = "metrics",
     .type = CONF_TYPE_NODE,
     .type_doc = "monitor name",
     .doc = "The `metrics` monitor reading this datacenter's addresses, instead of the "
            "service's `metrics`. Unset: the service's."},
    {.section = "services.datacenters.addresses",
     .name = "address",
     .type = CONF_TYPE_NODE,
     .type_doc = "IP address",
     .flags = CONF_F_REQUIRED,
     .doc = "An IPv4 or IPv6 address."},
    {.section = "services.datacenters.addresses",
     .name = "weight",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_address_t, weight),
     .size = sizeof(((conf_address_t *)0)->weight),
     .min = 1,
     .max = 65535,
     .def = "1",
     .doc = "The address's weight for `weighted`."},
    {.section = "services.datacenters.addresses",
     .name = "probe",
     .type = CONF_TYPE_NODE,
     .type_doc = "address: `IP`, `IP:PORT` or `\"[IPv6]:PORT\"`",
     .doc = "Probe this address (or port) instead of the answered one, e.g. a management "
            "interface or a health port; a port here wins over the monitor's `port`. Needs a "
            "`monitor` on the service or the datacenter. Unset: the address itself."},
    {.section = "services.datacenters.addresses",
     .name = "requires",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of target names (a single name is accepted too)",
     .doc = "Targets that must be up for this address to be up, e.g. `datacenter/telecom` or "
            "`service/db.example.test/dc1/10.1.1.1`. Unset or empty: none."},
    {.section = "gslb",
     .name = "state-file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_t, state_file),
     .doc = "Admin overrides set with `steerctl` are saved here (one `PATTERN up|down` per "
            "line) and read back at start and on reload. Unset: they last until restart."},
    {.section = "gslb",
     .name = "nets-state-file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_t, nets_state_file),
     .doc = "The prefix count of every nets file as last accepted is saved here after each "
            "start and reload, and read at start-up, so the `max-shrink` guard also holds "
            "across a restart: a nets file that shrank or emptied while `steerd` was down (a "
            "failed ISP-list download) stops the start, unless `steerd --force` or the entry's "
            "`allow-shrink`. A damaged file is an error (fix or remove it). Unset: at start-up "
            "there is nothing to compare with and an empty nets file is only a warning."},
    {.section = "gslb",
     .name = "overrides",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of mappings (see `gslb.overrides`)",
     .doc = "Forced states from the configuration. Unset: none."},
    {.section = "gslb.overrides",
     .name = "pattern",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_override_t, pattern),
     .flags = CONF_F_REQUIRED,
     .doc = "A glob over target names (`*`, `?`, `[...]`), e.g. `service/*/edu/*`."},
    {.section = "gslb.overrides",
     .name = "state",
     .type = CONF_TYPE_ENUM,
     .offset = offsetof(conf_override_t, up),
     .size = sizeof(((conf_override_t *)0)->up),
     .enums = override_states,
     .flags = CONF_F_REQUIRED,
     .doc = "The forced state."},
    /* ---- caching forwarder ---- */
    {.section = "forward",
     .name = "allow-recursion",
     .type = CONF_TYPE_PREFIX_LIST,
     .offset = offsetof(conf_forward_t, allow_recursion),
     .size = offsetof(conf_forward_t, n_allow_recursion),
     .doc = "Clients that may recurse: addresses or prefixes such as `10.0.0.0/24`, "
            "`\"2001:db8:10::/48\"`. Others get REFUSED for names outside the served zones "
            "(they still get authoritative answers), so the server is never an open "
            "resolver by accident. Host bits beyond the prefix length are an error. Needs "
            "`groups`. Unset or empty: nobody."},
    {.section = "forward",
     .name = "use-0x20",
     .type = CONF_TYPE_ENUM,
     .offset = offsetof(conf_forward_t, use_0x20),
     .size = sizeof(((conf_forward_t *)0)->use_0x20),
     .enums = switches,
     .def = "off",
     .flags = CONF_F_RESTART,
     .doc = "Randomise the letter case of every name asked upstream and drop replies that do "
            "not echo it (draft-vixie-dnsext-dns0x20), which makes a forged reply harder to "
            "guess on top of the random port and ID. Off by default because some upstreams "
            "do not echo the case, and then every reply is dropped."},
    {.section = "forward",
     .name = "cache",
     .type = CONF_TYPE_NODE,
     .type_doc = "mapping (see `forward.cache`)",
     .flags = CONF_F_RESTART,
     .doc = "The answer cache's size and TTL limits. Unset: the defaults below."},
    {.section = "forward",
     .name = "groups",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of mappings (see `forward.groups`)",
     .flags = CONF_F_RESTART,
     .doc = "Where cache misses go, per domain suffix. Unset or empty: no forwarding (every "
            "name outside the served zones is REFUSED)."},
    {.section = "forward.cache",
     .name = "max-size",
     .type = CONF_TYPE_SIZE,
     .offset = offsetof(conf_forward_t, cache_max_size),
     .size = sizeof(((conf_forward_t *)0)->cache_max_size),
     .min = 1024,
     .max = 1073741824,
     .def = "256M",
     .flags = CONF_F_RESTART,
     .doc = "Memory the cache may use (entries and their index); when it is full, entries "
            "not asked for recently are evicted first, so a flood of random names cannot "
            "grow the process beyond it. At least 1M."},
    FWD_TTL("min-ttl", cache_min_ttl, 0, 3600, "0s",
            "Lowest TTL an answer is kept and served with. Raising it keeps answers longer "
            "than their owners asked for; `0s` keeps the upstream's TTLs."),
    FWD_TTL("max-ttl", cache_max_ttl, 1, 604800, "1d",
            "Highest TTL an answer is kept and served with, so a record with a TTL of weeks "
            "is still refreshed daily. At least `min-ttl`."),
    FWD_TTL("max-negative-ttl", cache_max_negative_ttl, 0, 86400, "1h",
            "Highest TTL of a cached NXDOMAIN or NODATA answer, whose TTL comes from the "
            "zone's SOA (RFC 2308: 3 hours at most is wise; `0s` caches no negative "
            "answers)."),
    FWD_TTL("serve-stale", serve_stale, 0, 3600, "30s",
            "When no upstream answers, expired answers are served with this TTL (RFC 8767 "
            "recommends 30 s) instead of SERVFAIL. `0s`: never serve stale answers."),
    {.section = "forward.cache",
     .name = "prefetch",
     .type = CONF_TYPE_ENUM,
     .offset = offsetof(conf_forward_t, prefetch),
     .size = sizeof(((conf_forward_t *)0)->prefetch),
     .enums = switches,
     .def = "on",
     .flags = CONF_F_RESTART,
     .doc = "Refresh a popular answer in the background when it is asked for in the last "
            "10 % of its TTL, so frequently used names never expire for clients."},
    {.section = "forward.groups",
     .name = "domain",
     .type = CONF_TYPE_DNAME,
     .offset = offsetof(conf_fwd_group_t, domain),
     .flags = CONF_F_REQUIRED | CONF_F_RESTART,
     .doc = "The domain suffix this group resolves: `.` for every name, or e.g. "
            "`corp.example` for an internal resolver (trailing dot optional)."},
    {.section = "forward.groups",
     .name = "policy",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_fwd_group_t, policy),
     .enums = fwd_policies,
     .def = "ordered",
     .flags = CONF_F_RESTART,
     .doc = "Which usable upstream a query goes to: `ordered` (the first in `upstreams` "
            "order; traffic moves back to a preferred upstream once it has recovered for "
            "`rise` probes and `hold-down`), `round-robin` (in turn) or `fastest` (lowest "
            "smoothed round-trip time)."},
    {.section = "forward.groups",
     .name = "upstreams",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of 1 to 64 mappings (see `forward.groups.upstreams`)",
     .flags = CONF_F_REQUIRED | CONF_F_RESTART,
     .doc = "The group's recursive resolvers, in preference order."},
    {.section = "forward.groups",
     .name = "probe",
     .type = CONF_TYPE_NODE,
     .type_doc = "mapping (see `forward.groups.probe`)",
     .flags = CONF_F_RESTART,
     .doc = "How the upstreams are checked. Unset: the defaults below."},
    {.section = "forward.groups",
     .name = "retry-timeout",
     .type = CONF_TYPE_DURATION,
     .offset = offsetof(conf_fwd_group_t, retry_timeout),
     .size = sizeof(((conf_fwd_group_t *)0)->retry_timeout),
     .min = 10,
     .max = 3000,
     .unit = CONF_UNIT_MS,
     .def = "400ms",
     .flags = CONF_F_RESTART,
     .doc = "A client query whose upstream has not answered within this time is also sent "
            "to the next upstream, within the same request, so a failing upstream costs the "
            "client a short delay rather than a failure. At most 3 s, the time one request "
            "may take in all."},
    {.section = "forward.groups",
     .name = "retry-adaptive",
     .type = CONF_TYPE_ENUM,
     .offset = offsetof(conf_fwd_group_t, retry_adaptive),
     .size = sizeof(((conf_fwd_group_t *)0)->retry_adaptive),
     .enums = switches,
     .def = "on",
     .flags = CONF_F_RESTART,
     .doc = "Derive each upstream's retry timeout from its smoothed round-trip time (three "
            "times it, at least 100 ms), with `retry-timeout` as the ceiling, so a nearby "
            "upstream is given up on sooner. `off`: always `retry-timeout`."},
    {.section = "forward.groups.upstreams",
     .name = "name",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_upstream_t, name),
     .max = 63,
     .flags = CONF_F_REQUIRED | CONF_F_RESTART,
     .doc = "The upstream's name in logs and `steerctl upstreams`, e.g. the exit link it "
            "uses: letters, digits, `-`, `_` and `.`, unique across all groups."},
    {.section = "forward.groups.upstreams",
     .name = "address",
     .type = CONF_TYPE_NODE,
     .type_doc = "address: `IP`, `IP:PORT` or `\"[IPv6]:PORT\"`",
     .flags = CONF_F_REQUIRED | CONF_F_RESTART,
     .doc = "The recursive resolver; port 53 unless given."},
    {.section = "forward.groups.upstreams",
     .name = "source",
     .type = CONF_TYPE_NODE,
     .type_doc = "IP address, no port",
     .flags = CONF_F_RESTART,
     .doc = "The node's own address that queries and probes to this upstream leave from, "
            "which picks the exit link (source routing); the same family as `address`. "
            "Each query gets a fresh random source port. Unset: `cluster.unicast` of the "
            "upstream's family when set, else the kernel's choice."},
    {.section = "forward.groups.upstreams",
     .name = "link",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_upstream_t, link),
     .max = 15,
     .flags = CONF_F_RESTART,
     .doc = "The network device whose state is followed: when it goes down (or loses "
            "carrier) the upstream is down at once, without waiting for probes. Unset: the "
            "device that holds `source`, if any."},
    {.section = "forward.groups.probe",
     .name = "name",
     .type = CONF_TYPE_DNAME,
     .offset = offsetof(conf_fwd_group_t, probe_name),
     .flags = CONF_F_RESTART,
     .doc = "Probes ask `<nonce>.<name>` with recursion desired, a new name each time, so "
            "the upstream must really resolve it (a cached or liveness answer would hide a "
            "resolver cut off from the DNS); best a zone Steer itself serves, so a probe "
            "proves the whole path. Any answer, NXDOMAIN included, proves resolution. Unset: "
            "the root (`<nonce>.`, answered NXDOMAIN by the root servers; a resolver that "
            "synthesises NXDOMAIN from the root's NSEC records, RFC 8198, may answer it from "
            "its cache, so set a name when the upstreams validate)."},
    FWD_PROBE_DURATION("interval", probe_interval, 100, 3600000, "1s",
                       "Time between two probes of each upstream, also while it is not "
                       "used, so a preferred upstream's recovery is seen."),
    FWD_PROBE_DURATION("timeout", probe_timeout, 10, 600000, "500ms",
                       "How long a probe may take before it counts as failed. Must be less "
                       "than `interval`."),
    FWD_PROBE_UINT("fall", probe_fall, 1, 100, "2",
                   "Failed probes in a row that take an upstream down."),
    FWD_PROBE_UINT("rise", probe_rise, 1, 100, "3",
                   "Good probes in a row that bring a down upstream back."),
    FWD_PROBE_DURATION("hold-down", probe_hold_down, 0, 3600000, "5s",
                       "How long a recovering upstream must stay good (with at least `rise` "
                       "probes) before it is used again; an upstream that fails again soon "
                       "after returning waits twice as long, so a lossy link does not flap."),
    /* ---- cluster ---- */
    {.section = "cluster",
     .name = "node-id",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_cluster_t, node_id),
     .max = 63,
     .flags = CONF_F_REQUIRED | CONF_F_RESTART,
     .doc = "This node's name, unique in the cluster: letters, digits, `-`, `_` and `.`. It "
            "is the default `server.identity` (what `id.server`, `hostname.bind` and NSID "
            "answer) and names the node in logs and `steerctl cluster`."},
    {.section = "cluster",
     .name = "service-addresses",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of 1 to 64 IP addresses without a port (a single address is accepted "
                 "too); quote IPv6 addresses",
     .flags = CONF_F_REQUIRED | CONF_F_RESTART,
     .doc = "The shared addresses clients query, IPv4 and IPv6, each once. They are put on "
            "`interface` and announced or withdrawn together; queries to them are answered on "
            "the `server.listen` addresses, so listen on them or on a wildcard. Not the "
            "unspecified address, a multicast, IPv4-mapped or IPv6 link-local address."},
    {.section = "cluster",
     .name = "interface",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_cluster_t, interface),
     .max = 15,
     .def = "vip0",
     .flags = CONF_F_RESTART,
     .doc = "The network device that holds the service addresses, created when missing (a "
            "`dummy` device, else `ifb` where the kernel has no dummy module) and never "
            "deleted. A Linux device name: at most 15 bytes, no `/`, `:` or spaces; not `lo` "
            "with `announce: interface`, which takes the device down to withdraw. With "
            "`announce: keepalived` the default is none (keepalived holds the addresses); "
            "give one to have the addresses on a device of their own anyway."},
    {.section = "cluster",
     .name = "unicast",
     .type = CONF_TYPE_NODE,
     .type_doc = "an IP address, or a list of at most one IPv4 and one IPv6 address",
     .flags = CONF_F_RESTART,
     .doc = "The node's own addresses, at most one per family, for management: self-check "
            "queries, health probes (`monitors`) and forwarded queries of upstreams without "
            "their own `source` leave from the one of their family, so the replies come back "
            "to this node rather than to whichever node the routers pick for a service "
            "address. Not one of the service addresses, and refused for the same kinds as "
            "they are (unspecified, multicast, IPv4-mapped, link-local). Unset: the kernel "
            "chooses."},
    {.section = "cluster",
     .name = "announce",
     .type = CONF_TYPE_ENUM,
     .offset = offsetof(conf_cluster_t, announce),
     .enums = announce_methods,
     .def = "interface",
     .flags = CONF_F_RESTART,
     .doc = "How the service addresses are announced and withdrawn: `interface` brings "
            "`interface` up and down (the routing daemon announces what is on it: OSPF "
            "`redistribute connected`, BIRD `direct`, FRR `network`); `bird` enables and "
            "disables the BIRD protocol `bird.protocol`; `frr` adds and removes kernel routes "
            "that FRR redistributes (see `cluster.frr`); `keepalived` writes "
            "`keepalived.track-file`."},
    {.section = "cluster",
     .name = "bird",
     .type = CONF_TYPE_NODE,
     .type_doc = "mapping (see `cluster.bird`)",
     .flags = CONF_F_RESTART,
     .doc = "BIRD's control socket and the protocol to drive; required with `announce: bird` "
            "(for `protocol`)."},
    {.section = "cluster",
     .name = "frr",
     .type = CONF_TYPE_NODE,
     .type_doc = "mapping (see `cluster.frr`)",
     .flags = CONF_F_RESTART,
     .doc = "The kernel table of the routes `announce: frr` adds. Unset: the defaults below."},
    {.section = "cluster",
     .name = "keepalived",
     .type = CONF_TYPE_NODE,
     .type_doc = "mapping (see `cluster.keepalived`)",
     .flags = CONF_F_RESTART,
     .doc = "The track file `announce: keepalived` writes. Unset: the defaults below."},
    {.section = "cluster",
     .name = "self-check",
     .type = CONF_TYPE_NODE,
     .type_doc = "mapping (see `cluster.self-check`)",
     .flags = CONF_F_RESTART,
     .doc = "Timing and scope of the self-check. Unset: the defaults below."},
    CLUSTER_DURATION("cluster", "liveness-timeout", liveness_timeout, 1, 10000, "300ms",
                     "The keeper process withdraws on its own when no heartbeat came from "
                     "`steerd` for this long (a heartbeat goes every `self-check.interval`), so "
                     "a killed, hung or stopped `steerd` leaves the cluster without help. More "
                     "than twice `self-check.interval`, at most 10 s."),
    {.section = "cluster",
     .name = "drain",
     .type = CONF_TYPE_NODE,
     .type_doc = "mapping (see `cluster.drain`)",
     .flags = CONF_F_RESTART,
     .doc = "When a drain counts as done. Unset: the defaults below."},
    {.section = "cluster.bird",
     .name = "socket",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_cluster_t, bird_socket),
     .max = UNIX_PATH_MAXLEN,
     .def = "/run/bird/bird.ctl",
     .flags = CONF_F_RESTART,
     .doc = "BIRD's control socket (`bird -s`). The keeper speaks BIRD's control protocol on "
            "it directly; `birdc` is not needed."},
    {.section = "cluster.bird",
     .name = "protocol",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_cluster_t, bird_protocol),
     .max = 64,
     .flags = CONF_F_RESTART,
     .doc = "The BIRD protocol to enable (announce) and disable (withdraw), usually a "
            "`static` protocol holding the service routes: a BIRD symbol (a letter or `_`, "
            "then letters, digits and `_`). Required with `announce: bird`."},
    CLUSTER_UINT("cluster.frr", "table", frr_table, 1, 4294967295U, "254",
                 "The kernel routing table of the service routes: `254` is `main`; any other "
                 "table but `255` (`local`, where the kernel keeps the addresses themselves)."),
    {.section = "cluster.keepalived",
     .name = "track-file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_cluster_t, keepalived_track_file),
     .def = "/run/steer/vrrp-track",
     .flags = CONF_F_RESTART,
     .doc = "The file keepalived's `track_file` block names; `0` while the node should hold "
            "the addresses, `1` otherwise (keepalived then enters FAULT and the backup takes "
            "over)."},
    CLUSTER_DURATION("cluster.self-check", "interval", check_interval, 10, 5000, "100ms",
                     "Time between the starts of two self-check rounds; also the heartbeat "
                     "interval towards the keeper."),
    CLUSTER_DURATION("cluster.self-check", "timeout", check_timeout, 1, 5000, "80ms",
                     "How long the self-queries of a round may take; a later answer fails the "
                     "round. Less than `interval`."),
    CLUSTER_UINT("cluster.self-check", "fall", check_fall, 1, 100, "3",
                 "Failed rounds in a row that withdraw the node."),
    CLUSTER_UINT("cluster.self-check", "rise", check_rise, 1, 100, "5",
                 "Good rounds in a row, after `hold-down`, that announce the node again."),
    CLUSTER_DURATION("cluster.self-check", "hold-down", check_hold_down, 0, 3600000, "2s",
                     "How long a withdrawn node stays withdrawn at least, so a flapping node "
                     "does not pull traffic back and forth."),
    CLUSTER_SWITCH("reload", check_reload, "on",
                   "A failed reload (a broken zone or configuration) withdraws the node until "
                   "a reload succeeds, since it may serve data the other nodes no longer do."),
    CLUSTER_SWITCH("forwarder", check_forwarder, "off",
                   "Withdraw when the forwarder has no usable upstream. Off by default: "
                   "every upstream down is rarely this node's fault, and withdrawing every "
                   "node for it would take the whole service away, while serving from the "
                   "cache (and stale answers) keeps it partly working."),
    CLUSTER_SWITCH("routes", check_routes, "on",
                   "Withdraw when replies cannot leave: no route from the unicast address to "
                   "`return-path` (a node whose uplink lost its default route still holds "
                   "the service address and would black-hole its share of the queries)."),
    {.section = "cluster.self-check",
     .name = "return-path",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of IP addresses without a port (a single address is accepted too)",
     .flags = CONF_F_RESTART,
     .doc = "Destinations that must be routable for the `routes` check, such as the "
            "clients' networks or the routers; each of a family that a service address has, "
            "not loopback, unspecified or multicast. Unset: a default route for each family "
            "of the service addresses."},
    CLUSTER_DURATION("cluster.drain", "quiet", drain_quiet, 10, 3600000, "500ms",
                     "A drain is done once no client query arrived for this long. Less than "
                     "`timeout`."),
    CLUSTER_DURATION("cluster.drain", "timeout", drain_timeout, 100, 3600000, "30s",
                     "A drain is done after this long even if queries still arrive "
                     "(`steerctl drain` may give its own)."),
    /* ---- operations ---- */
    {.section = "http",
     .name = "listen",
     .type = CONF_TYPE_NODE,
     .flags = CONF_F_RESTART,
     .type_doc = "list of IP:PORT",
     .doc = "Addresses the HTTP server listens on, each with its port (`127.0.0.1:8053`, "
            "IPv6 quoted in brackets: `\"[::1]:8053\"`). Plain HTTP: keep it on loopback or "
            "a management network, or put a TLS proxy in front."},
    {.section = "http",
     .name = "token-file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_http_t, token_file),
     .doc = "A file whose first line is the bearer token of mutating calls (at least 16 "
            "characters; e.g. `openssl rand -hex 32`). It must not be readable by other "
            "users. Re-read on reload. Unset: mutating calls are refused over HTTP (403)."},
    {.section = "http",
     .name = "read-only-open",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_http_t, read_only_open),
     .def = "true",
     .doc = "Whether read-only calls (`/metrics`, the status page, `/api/v1/` commands that "
            "change nothing) are served without a token. Applies on reload."},
    {.section = "dnstap",
     .name = "socket",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_dnstap_t, socket),
     .max = UNIX_PATH_MAXLEN,
     .flags = CONF_F_RESTART,
     .doc = "The UNIX socket of a Frame Streams reader (bidirectional handshake, content type "
            "`protobuf:dnstap.Dnstap`). steerd connects to it and reconnects when the reader "
            "restarts; while none listens, messages are dropped and counted."},
    {.section = "dnstap",
     .name = "file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_dnstap_t, file),
     .flags = CONF_F_RESTART,
     .doc = "Or a file that steerd writes itself (replaced at start)."},
    {.section = "dnstap",
     .name = "messages",
     .type = CONF_TYPE_NODE,
     .flags = CONF_F_RESTART,
     .type_doc = "list of message kinds",
     .def = "auth-query auth-response",
     .doc = "What is logged: `auth-query` and `auth-response` (queries to our zones and our "
            "answers), `client-query` and `client-response` (recursive clients of the "
            "forwarder and what they got, from the cache or upstream), `forwarder-query` and "
            "`forwarder-response` (the forwarder's queries to its upstreams and their "
            "responses)."},
    {.section = "dnstap",
     .name = "sample",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_dnstap_t, sample),
     .size = sizeof(unsigned),
     .min = 1,
     .max = 1000000,
     .def = "1",
     .flags = CONF_F_RESTART,
     .doc = "Log every Nth query of each query thread, with its response; `1` logs all."},
    {.section = "dnstap",
     .name = "queue",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_dnstap_t, queue),
     .size = sizeof(unsigned),
     .min = 2,
     .max = 16384,
     .def = "16384",
     .flags = CONF_F_RESTART,
     .doc = "Messages each thread's queue holds while the writer is busy (rounded up to a "
            "power of two, at most 16384, "
            "libfstrm's limit); beyond that, or when the thread's buffer is full, they are "
            "dropped and counted."},
    {.section = "stats-snapshots",
     .name = "file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_snapshots_t, file),
     .flags = CONF_F_RESTART | CONF_F_REQUIRED,
     .doc = "The JSON-lines file the snapshots are appended to (created with mode 0640); its "
            "folder must exist."},
    {.section = "stats-snapshots",
     .name = "interval",
     .type = CONF_TYPE_DURATION,
     .offset = offsetof(conf_snapshots_t, interval),
     .size = sizeof(unsigned),
     .min = 1000,
     .max = 86400000,
     .unit = CONF_UNIT_MS,
     .def = "5m",
     .flags = CONF_F_RESTART,
     .doc = "Time between snapshots."},
    {.section = "alerts",
     .name = "webhook",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_alert_t, webhook),
     .max = 2048,
     .flags = CONF_F_RESTART,
     .doc = "An `http://` or `https://` URL each event is POSTed to as a JSON object "
            "(`Content-Type: application/json`); any 2xx status is a delivery."},
    {.section = "alerts",
     .name = "exec",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_alert_t, exec),
     .flags = CONF_F_RESTART,
     .doc = "An executable (absolute path, no arguments, no shell) run once per event with "
            "the event in its environment (`STEER_EVENT_KIND`, `STEER_EVENT_SUBJECT`, "
            "`STEER_EVENT_FROM`, `STEER_EVENT_TO`, `STEER_EVENT_REASON`, ...); exit status 0 "
            "is a delivery."},
    {.section = "alerts",
     .name = "timeout",
     .type = CONF_TYPE_DURATION,
     .offset = offsetof(conf_alert_t, timeout),
     .size = sizeof(unsigned),
     .min = 100,
     .max = 60000,
     .unit = CONF_UNIT_MS,
     .def = "5s",
     .flags = CONF_F_RESTART,
     .doc = "How long one attempt may take (the command is killed after it)."},
    {.section = "alerts",
     .name = "retries",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_alert_t, retries),
     .size = sizeof(unsigned),
     .min = 0,
     .max = 10,
     .def = "3",
     .flags = CONF_F_RESTART,
     .doc = "Further attempts after a failed one, 1 s, 2 s, 4 s, ... apart."},
    {.section = "decision-log",
     .name = "file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_decision_log_t, file),
     .flags = CONF_F_RESTART | CONF_F_REQUIRED,
     .doc = "The JSON-lines file decisions are appended to; its folder must exist."},
    {.section = "decision-log",
     .name = "sample",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_decision_log_t, sample),
     .size = sizeof(unsigned),
     .min = 1,
     .max = 1000000000,
     .def = "1000",
     .flags = CONF_F_RESTART,
     .doc = "Record every Nth GSLB decision of each query thread; `1` records all."},
    /* ---- measured paths ---- */
    {.section = "paths",
     .name = "agents",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of mappings (see `paths.agents`)",
     .flags = CONF_F_REQUIRED,
     .doc = "The agents, one per datacenter that measures. A changed list applies on reload: "
            "agents that stay keep their last table."},
    PATHS_DURATION("paths", "fetch-interval", fetch_interval, 100, 3600000, CONF_UNIT_MS, "2s",
                   "How often the node fetches every agent's table (`If-None-Match`: an "
                   "unchanged table costs a 304 and no work)."),
    PATHS_DURATION("paths", "fetch-timeout", fetch_timeout, 100, 600000, CONF_UNIT_MS, "2s",
                   "How long one fetch may take (connect and transfer); a slower agent counts "
                   "as down this round and keeps its last table. At most `fetch-interval`."),
    PATHS_DURATION("paths", "path-ttl", path_ttl, 1, 31536000, CONF_UNIT_S, "2400s",
                   "How long a measurement is trusted (F5's `path-ttl`): a cell older than this, "
                   "or any cell of an agent whose last good table is older, is empty, and the "
                   "service's `fallback-policy` decides for the prefix."),
    PATHS_UINT("paths", "ipv4-prefix", ipv4_prefix, 8, 32, "24",
               "The IPv4 granularity of measurements: clients are grouped by this prefix length, "
               "and decisions from the table carry it as their ECS scope."),
    PATHS_UINT("paths", "ipv6-prefix", ipv6_prefix, 16, 64, "48",
               "The IPv6 granularity, as `ipv4-prefix`."),
    PATHS_UINT("paths", "max-prefixes", max_prefixes, 1, 16000000, "1000000",
               "Rows a table may hold, on the node (a larger table from an agent is refused, "
               "and bounds the body size of a fetch) and on the agent (the prefixes it keeps)."),
    PATHS_UINT("paths", "demand-sample", demand_sample, 1, 65536, "16",
               "Every Nth decision from a measured prefix counts towards its volume in "
               "`/paths/demand`; prefixes the node had no measurement for are always reported "
               "(once per prefix and second or so, per query thread)."),
    {.section = "paths",
     .name = "token-file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_paths_t, token_file),
     .doc = "A file whose first line is a bearer token (16..1024 characters, not readable by "
            "other users) that nodes send to the agents and the agents to the nodes' "
            "`/paths/demand`. Unset: no token is sent, and `/paths/demand` follows the HTTP "
            "server's `read-only-open`."},
    {.section = "paths",
     .name = "hysteresis",
     .type = CONF_TYPE_NODE,
     .type_doc = "mapping (see `paths.hysteresis`)",
     .doc = "When a prefix may move to another datacenter. Unset: the defaults below."},
    {.section = "paths",
     .name = "probe",
     .type = CONF_TYPE_NODE,
     .type_doc = "mapping (see `paths.probe`)",
     .doc = "The agents' settings. Unset: the defaults below (and no nodes to poll)."},
    {.section = "paths.agents",
     .name = "datacenter",
     .type = CONF_TYPE_NODE,
     .type_doc = "datacenter name",
     .flags = CONF_F_REQUIRED,
     .doc = "The configured datacenter this agent measures from: its column in the table."},
    {.section = "paths.agents",
     .name = "url",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_path_agent_t, url),
     .max = 2048,
     .flags = CONF_F_REQUIRED,
     .doc = "The agent's HTTP base URL, `http://` or `https://`, ending in `/`; the table is "
            "`<url>paths/table`."},
    {.section = "paths.agents",
     .name = "source",
     .type = CONF_TYPE_NODE,
     .type_doc = "IP address",
     .doc = "Agent side: the address its probes leave from. Unset: the kernel picks."},
    PATHS_UINT("paths.hysteresis", "margin", hyst_margin, 0, 1000, "20",
               "Percent by which a challenger must beat the sticky best."),
    PATHS_DURATION("paths.hysteresis", "min-difference", hyst_min_difference, 0, 60000,
                   CONF_UNIT_MS, "10ms",
                   "And by at least this much RTT (a 20 % margin of 2 ms is noise)."),
    PATHS_UINT("paths.hysteresis", "rounds", hyst_rounds, 1, 100, "2",
               "Consecutive rounds (new tables of the challenger's agent, or metric rounds for "
               "the load policies) the challenger must win before it becomes the best."),
    {.section = "paths.probe",
     .name = "nodes",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of URLs",
     .doc = "The DNS nodes' HTTP base URLs (ending in `/`) whose `<url>paths/demand` the agent "
            "polls for prefixes to probe."},
    {.section = "paths.probe",
     .name = "methods",
     .type = CONF_TYPE_NODE,
     .type_doc = "list of `dns`, `tcp`, `icmp`",
     .def = "dns tcp icmp",
     .doc = "Probe methods in the order they are tried per prefix until one answers: `dns` (a "
            "query for `dns-name` to port 53), `tcp` (a handshake to port 53, then a reset), "
            "`icmp` (an echo). Without `dns-name` the default is `tcp icmp`."},
    {.section = "paths.probe",
     .name = "dns-name",
     .type = CONF_TYPE_DNAME,
     .offset = offsetof(conf_paths_t, dns_name),
     .doc = "The name DNS probes ask for; required with method `dns`, and it must lie inside a "
            "zone this configuration serves: probes never ask for third parties' names."},
    PATHS_UINT("paths.probe", "rate", probe_rate, 1, 100000, "200",
               "Probes per second, the site's budget across all prefixes."),
    PATHS_UINT("paths.probe", "samples", probe_samples, 1, 16, "3",
               "Probes per measurement; the lowest RTT is kept."),
    PATHS_DURATION("paths.probe", "interval", probe_interval, 1000, 86400000, CONF_UNIT_MS, "60s",
                   "Every prefix is measured again at least this often (budget permitting). Less "
                   "than `path-ttl` when `probe` is given."),
    PATHS_DURATION("paths.probe", "hot-interval", hot_interval, 100, 86400000, CONF_UNIT_MS, "10s",
                   "The busiest prefixes (`hot-share`) are measured this often. At most "
                   "`interval`."),
    PATHS_UINT("paths.probe", "hot-share", hot_share, 0, 100, "20",
               "Percent of the rows, by volume, that count as hot."),
    PATHS_DURATION("paths.probe", "timeout", probe_timeout, 10, 60000, CONF_UNIT_MS, "1s",
                   "A probe without a reply by then is lost. Less than `hot-interval`."),
    PATHS_UINT("paths.probe", "smoothing", smoothing, 1, 100, "30",
               "Percent weight of a new measurement in the smoothed RTT (`100` keeps no "
               "history)."),
    PATHS_DURATION("paths.probe", "publish-interval", publish_interval, 100, 3600000, CONF_UNIT_MS,
                   "2s", "How often the agent re-encodes its table."),
    PATHS_DURATION("paths.probe", "demand-interval", demand_interval, 100, 3600000, CONF_UNIT_MS,
                   "2s", "How often the agent polls the nodes' demand."),
    PATHS_DURATION("paths.probe", "forget-after", forget_after, 60, 31536000, CONF_UNIT_S, "28d",
                   "A prefix no node reported for this long is dropped (F5 forgets an LDNS after "
                   "28 days)."),
    /* ---- attack resistance ---- */
    {.section = "rrl",
     .name = "rate",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_rrl_t, rate),
     .size = sizeof(unsigned),
     .max = 1000000,
     .def = "0",
     .doc = "Responses per second one client prefix gets for one kind of response; `0` turns "
            "rate limiting off."},
    {.section = "rrl",
     .name = "nxdomain-rate",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_rrl_t, nxdomain_rate),
     .size = sizeof(unsigned),
     .max = 1000000,
     .def = "0",
     .doc = "The rate for NXDOMAIN answers (counted per zone: random-name floods share one "
            "bucket); `0` = `rate`."},
    {.section = "rrl",
     .name = "error-rate",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_rrl_t, error_rate),
     .size = sizeof(unsigned),
     .max = 1000000,
     .def = "0",
     .doc = "The rate for error answers (REFUSED, FORMERR, SERVFAIL, NOTIMP, BADCOOKIE); "
            "`0` = `rate`."},
    {.section = "rrl",
     .name = "slip",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_rrl_t, slip),
     .size = sizeof(unsigned),
     .max = 10,
     .def = "2",
     .doc = "Every Nth limited answer goes out empty with TC=1 (the client may retry over "
            "TCP), the others are dropped; `0` drops them all, `1` truncates them all."},
    {.section = "rrl",
     .name = "window",
     .type = CONF_TYPE_DURATION,
     .offset = offsetof(conf_rrl_t, window),
     .size = sizeof(unsigned),
     .min = 1000,
     .max = 3600000,
     .unit = CONF_UNIT_MS,
     .def = "15s",
     .doc = "The averaging window, as BIND's: a bucket holds at most one second's worth of "
            "answers (a burst of `rate`) and goes at most `window` seconds' worth into debt, "
            "so a client flooding far above the rate gets almost nothing through until it "
            "slows down for a while."},
    {.section = "rrl",
     .name = "ipv4-prefix",
     .type = CONF_TYPE_NODE,
     .type_doc = "prefix length",
     .def = "24",
     .doc = "IPv4 clients are counted per prefix of this length (1 to 32)."},
    {.section = "rrl",
     .name = "ipv6-prefix",
     .type = CONF_TYPE_NODE,
     .type_doc = "prefix length",
     .def = "56",
     .doc = "IPv6 clients are counted per prefix of this length (1 to 128)."},
    {.section = "rrl",
     .name = "table-size",
     .type = CONF_TYPE_UINT,
     .offset = offsetof(conf_rrl_t, table_size),
     .size = sizeof(unsigned),
     .min = 1024,
     .max = 1 << 26,
     .def = "393241",
     .doc = "Buckets in the table (8 bytes each), shared by all query threads without locks. "
            "Prefix and class hash to a bucket; a collision makes two flows share one, which "
            "only limits sooner. Size it above the number of prefixes seen in a window."},
    {.section = "rrl",
     .name = "exempt",
     .type = CONF_TYPE_PREFIX_LIST,
     .offset = offsetof(conf_rrl_t, exempt),
     .size = offsetof(conf_rrl_t, n_exempt),
     .doc = "Clients never limited (monitoring, your own resolvers): addresses or prefixes."},
    {.section = "rrl",
     .name = "exempt-cookies",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_rrl_t, exempt_cookies),
     .def = "true",
     .doc = "A query with a valid server cookie (see `cookies`) is never limited: its source "
            "address cannot be spoofed."},
    {.section = "rrl",
     .name = "log-only",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_rrl_t, log_only),
     .def = "false",
     .doc = "Count what would be limited (`steer_rrl_logged_total`) but answer everything: "
            "for trying a rate out."},
    {.section = "cookies",
     .name = "enable",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_cookies_t, enable),
     .def = "true",
     .doc = "Answer COOKIE options with a server cookie. `false` ignores them (RFC 7873 "
            "servers without cookies)."},
    {.section = "cookies",
     .name = "secret",
     .type = CONF_TYPE_NODE,
     .type_doc = "32 hex digits",
     .doc = "The 16-byte SipHash-2-4 key server cookies are made with. Give every node of a "
            "cluster the same one (e.g. `openssl rand -hex 16`). Unset: random at start."},
    {.section = "cookies",
     .name = "previous-secret",
     .type = CONF_TYPE_NODE,
     .type_doc = "32 hex digits",
     .doc = "A retired secret whose cookies are still accepted (and answered with a new "
            "one), for a rollover without BADCOOKIE answers."},
    {.section = "cookies",
     .name = "secret-file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_cookies_t, secret_file),
     .doc = "Read the secrets from this file instead: line 1 the secret, optional line 2 the "
            "previous one, 32 hex digits each. Keeps them out of the configuration."},
    {.section = "cookies",
     .name = "require",
     .type = CONF_TYPE_BOOL,
     .offset = offsetof(conf_cookies_t, require),
     .def = "false",
     .doc = "A UDP query with a COOKIE option but no valid server cookie is answered "
            "BADCOOKIE with our cookie and no data (RFC 7873 5.2.3); the client retries "
            "with it. Queries without any COOKIE option and TCP are answered as usual."},
};
const size_t conf_n_keys = sizeof(conf_keys) / sizeof(conf_keys[0]);

static const char reference_intro[] =
    "# Configuration reference\n"
    "\n"
    "<!-- Generated from src/conf/conf_schema.c by `steerd --config-reference`. Do not edit: a "
    "unit test fails when this file and the schema differ. -->\n"
    "\n"
    "Steer reads one YAML file: `steerd -c /etc/steer/steer.yaml`. "
    "`steerd -c FILE --check-config` runs the same parser and checks, prints errors as "
    "`FILE:LINE: message` and exits 0 (valid) or 1.\n"
    "\n"
    "- Unknown sections and keys are errors, so a typo never silently falls back to a "
    "default.\n"
    "- An unknown key's error names its section and suggests the nearest valid key; a value "
    "from a fixed set lists the valid ones.\n"
    "- Relative paths are resolved against the folder that holds the configuration file.\n"
    "- Durations take a unit: `500ms`, `2s`, `1m`, `1h`, `1d`, or a combination largest "
    "first such as `1m30s`. A bare number keeps its older meaning, which depends on the key: "
    "milliseconds for `server.tcp-idle-timeout`, `server.tcp-io-timeout` and the monitor "
    "timings (`interval`, `timeout`, `hold-down`, `slow-start`); seconds for the TTLs "
    "(`services.ttl`, `monitors.ttl-floor`, the `forward.cache` TTLs). Writing the unit "
    "avoids the question. A value "
    "finer than its key's unit (`1500ms` for a TTL) is an error.\n"
    "- Settings applied *on restart* keep their running value on reload (`SIGHUP` or "
    "`steerctl reload`); the reload reports them in `restart_needed`. All others take effect "
    "on reload.\n"
    "- Without a configuration file, `steerd --listen ADDR --zone DOMAIN=FILE` (both "
    "repeatable) serves zones with these defaults; `--forward` and `--allow-recursion` add "
    "a forwarding group (see `forward`).\n"
    "\n"
    "A complete example:\n"
    "\n"
    "```yaml\n"
    "server:\n"
    "  listen: [127.0.0.1:5353, \"[::1]:5353\"]\n"
    "  workers: 2\n"
    "  user: steer\n"
    "  group: steer\n"
    "log:\n"
    "  target: stderr\n"
    "  level: info\n"
    "zones:\n"
    "  - domain: example.test\n"
    "    file: zones/example.test.zone\n"
    "    xfr-allow: [127.0.0.1, 10.0.0.0/8]\n"
    "```\n";

static const char *type_text(const conf_key_t *key)
{
	switch (key->type) {
	case CONF_TYPE_UINT:
		return "unsigned integer";
	case CONF_TYPE_STRING:
		return "string";
	case CONF_TYPE_PATH:
		return "path";
	case CONF_TYPE_ENUM:
		return "one of";
	case CONF_TYPE_DNAME:
		return "domain name";
	case CONF_TYPE_ADDR_LIST:
		return "list of addresses (a single address is accepted too)";
	case CONF_TYPE_PREFIX_LIST:
		return "list of address prefixes (a single prefix is accepted too)";
	case CONF_TYPE_BOOL:
		return "boolean (`true` or `false`)";
	case CONF_TYPE_NODE:
		return key->type_doc;
	case CONF_TYPE_SIZE:
		return "size (`512K`, `256M`, `1G`: powers of 1024; a bare number is bytes)";
	case CONF_TYPE_DURATION:
		return key->unit == CONF_UNIT_S
		           ? "duration (`30s`, `5m`, `1h`, `1d`; a bare number is "
		             "seconds)"
		           : "duration (`500ms`, `2s`, `1m`, `1h`, `1d`; a bare "
		             "number is milliseconds)";
	}
	return "?";
}

static void write_type(FILE *out, const conf_key_t *key)
{
	fprintf(out, "- Type: %s", type_text(key));
	if (key->type == CONF_TYPE_UINT)
		fprintf(out, ", %u to %u", key->min, key->max);
	if (key->type == CONF_TYPE_DURATION) {
		char lo[32], hi[32];
		fprintf(out, ", %s to %s",
		        conf_duration_str((uint64_t)key->min * key->unit, lo, sizeof(lo)),
		        conf_duration_str((uint64_t)key->max * key->unit, hi, sizeof(hi)));
	}
	if (key->type == CONF_TYPE_SIZE) {
		char lo[32], hi[32];
		fprintf(out, ", %s to %s", conf_size_str((uint64_t)key->min << 10, lo, sizeof(lo)),
		        conf_size_str((uint64_t)key->max << 10, hi, sizeof(hi)));
	}
	if (key->type == CONF_TYPE_STRING && key->enums) {
		for (const conf_enum_t *e = key->enums; e->name; e++)
			fprintf(out, "%s`%s`", e == key->enums ? ": one of " : ", ", e->name);
	}
	if (key->type == CONF_TYPE_ENUM) {
		for (const conf_enum_t *e = key->enums; e->name; e++)
			fprintf(out, "%s`%s`", e == key->enums ? " " : ", ", e->name);
	}
	if ((key->type == CONF_TYPE_PATH || key->type == CONF_TYPE_STRING) && key->max)
		fprintf(out, ", at most %u bytes", key->max);
	fputc('\n', out);
}

static void write_key(FILE *out, const conf_key_t *key)
{
	fprintf(out, "\n### `%s.%s`\n\n%s\n\n", key->section, key->name, key->doc);
	if (key->flags & CONF_F_ALIAS) {
		for (const conf_key_t *k = key; k > conf_keys; k--) {
			if (!(k[-1].flags & CONF_F_ALIAS) && k[-1].offset == key->offset &&
			    strcmp(k[-1].section, key->section) == 0) {
				fprintf(out, "- Same as `%s.%s`\n", k[-1].section, k[-1].name);
				return;
			}
		}
	}
	write_type(out, key);
	if (key->def)
		fprintf(out, "- Default: `%s`\n", key->def);
	else if (key->flags & CONF_F_REQUIRED)
		fprintf(out, "- Required\n");
	else
		fprintf(out, "- Default: unset\n");
	fprintf(out, "- Applies: %s\n", key->flags & CONF_F_RESTART ? "on restart" : "on reload");
}

void conf_write_reference(FILE *out)
{
	fputs(reference_intro, out);
	for (size_t s = 0; s < conf_n_sections; s++) {
		const conf_section_t *sec = &conf_sections[s];
		fprintf(out, "\n## `%s`\n\n%s\n", sec->name, sec->doc);
		for (size_t k = 0; k < conf_n_keys; k++) {
			if (strcmp(conf_keys[k].section, sec->name) == 0)
				write_key(out, &conf_keys[k]);
		}
	}
}

/* ---- the reference as a manual page ----------------------------------------------------- */

/*
 * The page is the Markdown reference translated line by line, for the subset the reference
 * uses: `##`/`###` headings, paragraphs, `- ` list items, fenced code blocks and the inline
 * `code`, **bold**, *italic* and [text](link) spans. Anything else is printed as text, so a
 * new construct shows up verbatim in the page rather than disappearing.
 */

/* Characters roff would take for escapes or, in code, for hyphens that break lines. */
static void man_escape_char(FILE *out, char c, bool code)
{
	if (c == '\\')
		fputs("\\e", out);
	else if (c == '-' && code)
		fputs("\\-", out);
	else
		fputc(c, out);
}

/* The closing @p mark of a span that starts at @p s, or NULL when there is none (an empty
 * span is no span: "``" and "**" stay text). */
static const char *man_span_end(const char *s, const char *mark)
{
	const char *end = strstr(s, mark);
	return end == s ? NULL : end;
}

static void man_write_font(FILE *out, const char *font, const char *s, size_t n, bool code)
{
	fprintf(out, "\\f%s", font);
	for (size_t i = 0; i < n; i++)
		man_escape_char(out, s[i], code);
	fputs("\\fR", out);
}

/* One line of running text with its inline spans; @p s has no newline. */
static void man_write_inline(FILE *out, const char *s)
{
	/* A leading dot or quote would be read as a request. */
	if (*s == '.' || *s == '\'')
		fputs("\\&", out);
	while (*s != '\0') {
		const char *end;
		if (*s == '`' && (end = man_span_end(s + 1, "`")) != NULL) {
			man_write_font(out, "B", s + 1, (size_t)(end - s - 1), true);
			s = end + 1;
		} else if (strncmp(s, "**", 2) == 0 && (end = man_span_end(s + 2, "**")) != NULL) {
			man_write_font(out, "B", s + 2, (size_t)(end - s - 2), false);
			s = end + 2;
		} else if (*s == '*' && s[1] != ' ' && (end = man_span_end(s + 1, "*")) != NULL) {
			man_write_font(out, "I", s + 1, (size_t)(end - s - 1), false);
			s = end + 1;
		} else if (*s == '[' && (end = strstr(s, "](")) != NULL &&
		           strchr(end, ')') != NULL) {
			const char *close = strchr(end, ')');
			fprintf(out, "%.*s <%.*s>", (int)(end - s - 1), s + 1,
			        (int)(close - end - 2), end + 2);
			s = close + 1;
		} else {
			man_escape_char(out, *s++, false);
		}
	}
	fputc('\n', out);
}

/* A heading's text: the reference writes them as `name` code spans. */
static void man_write_heading(FILE *out, const char *macro, const char *s)
{
	fprintf(out, "%s \"", macro);
	for (; *s != '\0'; s++) {
		if (*s != '`' && *s != '"')
			man_escape_char(out, *s, true);
	}
	fputs("\"\n", out);
}

static void man_write_code_line(FILE *out, const char *s)
{
	if (*s == '.' || *s == '\'')
		fputs("\\&", out);
	for (; *s != '\0'; s++)
		man_escape_char(out, *s, true);
	fputc('\n', out);
}

typedef struct {
	bool in_code;
	bool want_para; /* a blank line came: the next text starts a paragraph */
} man_state_t;

static void man_write_line(FILE *out, man_state_t *st, const char *line)
{
	if (st->in_code) {
		if (strncmp(line, "```", 3) == 0) {
			fputs(".EE\n", out);
			st->in_code = false;
			st->want_para = true;
		} else {
			man_write_code_line(out, line);
		}
		return;
	}
	if (*line == '\0') {
		st->want_para = true;
	} else if (strncmp(line, "<!--", 4) == 0 || strncmp(line, "# ", 2) == 0) {
		/* The Markdown file's own title and note; the page has .TH and NAME. */
	} else if (strncmp(line, "### ", 4) == 0) {
		man_write_heading(out, ".SS", line + 4);
		st->want_para = false;
	} else if (strncmp(line, "## ", 3) == 0) {
		man_write_heading(out, ".SH", line + 3);
		st->want_para = false;
	} else if (strncmp(line, "```", 3) == 0) {
		fputs(".PP\n.EX\n", out);
		st->in_code = true;
	} else if (strncmp(line, "- ", 2) == 0) {
		fputs(".IP \\(bu 2\n", out);
		man_write_inline(out, line + 2);
		st->want_para = false;
	} else {
		if (st->want_para)
			fputs(".PP\n", out);
		st->want_para = false;
		man_write_inline(out, line);
	}
}

static const char man_head[] =
    ".\\\" Generated from src/conf/conf_schema.c by `steerd --config-reference=man`.\n"
    ".TH STEER.YAML 5 \"\" \"steer %s\" \"File Formats Manual\"\n"
    ".SH NAME\n"
    "steer.yaml \\- configuration file of the Steer DNS server\n"
    ".SH SYNOPSIS\n"
    ".B /etc/steer/steer.yaml\n"
    ".SH DESCRIPTION\n"
    ".BR steerd (8)\n"
    "reads its configuration from one YAML file, given with\n"
    ".BR \"steerd \\-c\" .\n"
    "This page lists every section and key, as docs/configuration.md does.\n";

static const char man_tail[] = ".SH FILES\n"
                               ".TP\n"
                               ".I /etc/steer/steer.yaml\n"
                               "the configuration the systemd unit starts steerd with\n"
                               ".SH \"SEE ALSO\"\n"
                               ".BR steerd (8),\n"
                               ".BR steerctl (8)\n";

int conf_write_reference_man(FILE *out, const char *version)
{
	char *md = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&md, &len);
	if (mem == NULL)
		return -1;
	conf_write_reference(mem);
	if (fclose(mem) != 0 || md == NULL) {
		free(md);
		return -1;
	}
	fprintf(out, man_head, version);
	man_state_t st = {0};
	for (char *line = md, *next; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		man_write_line(out, &st, line);
	}
	if (st.in_code)
		fputs(".EE\n", out);
	fputs(man_tail, out);
	free(md);
	return 0;
}
