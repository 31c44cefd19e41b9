/*
 * Configuration: one declarative schema table (conf_schema.c) drives YAML parsing, validation,
 * defaults and the generated reference (docs/configuration.md). The result is an immutable
 * conf_t built on the control thread and swapped as a whole on reload.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/compiler.h"
#include "base/log.h"
#include "base/sockaddr.h"
#include "dns/acl.h"
#include "dns/tsig.h"

/*
 * One entry of an access list (`xfr-allow`, `notify-allow`): a client address range, a TSIG
 * key, or both, and then both must match. A plain prefix in the YAML list is an entry without
 * a key; a mapping `{ address: PREFIX, key: NAME }` names the key (address optional).
 */
typedef struct {
	bool any_address;      /* no `address`: any client that signs with @c key */
	steer_prefix_t prefix; /* when !any_address */
	char *key;             /* TSIG key name as configured, NULL = no key required */
	unsigned line;
} conf_acl_t;

/* A remote server of a zone: a primary we pull from, or a secondary we NOTIFY. */
typedef struct {
	steer_sockaddr_t addr; /* port 53 unless given ("192.0.2.1@5300" or "[2001:db8::1]:5300") */
	char *key;             /* TSIG key name as configured, NULL = unsigned */
	steer_sockaddr_t source; /* local address to send from; family 0 = the kernel's choice */
	unsigned line;
} conf_remote_t;

typedef struct {
	char *domain;          /* presentation form as configured (`domain:` or `name:`) */
	char *file;            /* zone file path, resolved against the config file's folder;
	                        * for a secondary zone, where the transferred zone is kept
	                        * (default <server.storage>/<domain>.zone) */
	conf_acl_t *xfr_allow; /* who may AXFR/IXFR; empty means nobody */
	size_t n_xfr_allow;

	/* Primary side: */
	conf_remote_t *notify; /* secondaries sent a NOTIFY when the zone changes */
	size_t n_notify;
	unsigned ixfr_history; /* reload versions kept for IXFR out; 0 = AXFR only */

	/* Secondary side (a zone with `primaries` is a secondary zone): */
	conf_remote_t *primaries; /* tried in order */
	size_t n_primaries;
	conf_acl_t *notify_allow; /* who may NOTIFY besides the primaries (which always may) */
	size_t n_notify_allow;
	bool ixfr;                  /* ask IXFR first when we have a version (default true) */
	unsigned refresh_min;       /* ms: bounds on the SOA's refresh and retry (default 2s) */
	unsigned refresh_max;       /* ms (default 1d) */
	uint64_t max_transfer_size; /* bytes of one transfer (default 256M) */
	uint64_t max_records;       /* records of one zone version (default 5,000,000) */
	unsigned line;
} conf_zone_t;

/* A TSIG key (RFC 8945), from `keys:` or a key file. */
typedef struct {
	char *name;      /* key name, presentation form as configured */
	char *algorithm; /* hmac-sha1 | hmac-sha224 | hmac-sha256 | hmac-sha384 | hmac-sha512 */
	uint8_t *secret; /* decoded from base64 */
	size_t secret_len;
	unsigned line;
} conf_tsig_key_t;

/* Response Rate Limiting (`rrl:`). */
typedef struct {
	unsigned rate;          /* responses per second per prefix and class; 0 = off (default) */
	unsigned nxdomain_rate; /* for NXDOMAIN answers; 0 = same as rate */
	unsigned error_rate;    /* for error answers (REFUSED, FORMERR, SERVFAIL); 0 = rate */
	unsigned slip;          /* every Nth dropped answer goes out truncated (TC=1); 0 = never */
	unsigned window;        /* ms over which the rate is averaged (default 15s) */
	uint8_t ipv4_prefix;    /* default 24 */
	uint8_t ipv6_prefix;    /* default 56 */
	unsigned table_size;    /* buckets (default 393241) */
	steer_prefix_t *exempt; /* never limited */
	size_t n_exempt;
	bool exempt_cookies; /* a valid server cookie exempts the client (default true) */
	bool log_only;       /* count and log, do not limit (default false) */
} conf_rrl_t;

/* DNS Cookies (`cookies:`, RFC 7873, RFC 9018). */
typedef struct {
	bool enable;          /* default true */
	uint8_t secret[16];   /* SipHash-2-4 key; random at start when none is configured */
	bool secret_set;      /* `secret` or `secret-file` given: cluster nodes share it */
	uint8_t previous[16]; /* still accepted during a rollover */
	bool previous_set;
	char *secret_file; /* 32 hex digits (the secret), optional second line (previous) */
	bool require;      /* UDP queries without a valid server cookie get BADCOOKIE
	                    * (with our cookie) instead of an answer (default false) */
} conf_cookies_t;

/* ---- GSLB: datacenters, maps, services. Names are resolved to indices by the
 * parser; semantic checks that need gslb/ knowledge (policy names, all-down names, address
 * families per policy) run in the GSLB builder, which reports errors with @c line. ---- */

/* ---- health monitors ---- */

#define CONF_MONITOR_NONE SIZE_MAX /* no monitor: always UP as far as monitors know */

/* The load values a `metrics` monitor reads (conf_monitor_t.metric_*), in this order. */
enum {
	CONF_METRIC_CONNECTIONS,   /* current connections */
	CONF_METRIC_CAPACITY,      /* connections the target can hold */
	CONF_METRIC_PACKET_RATE,   /* packets per second */
	CONF_METRIC_KBPS,          /* kilobytes per second */
	CONF_METRIC_CPU,           /* CPU use, percent */
	CONF_METRIC_LINK_CAPACITY, /* spare link capacity, kilobytes per second */
	CONF_METRIC_KINDS
};

/* The terms of a qos score (conf_service_t.qos), F5 3-DNS's, in this order. */
enum {
	CONF_QOS_PACKET_RATE,     /* default 1 */
	CONF_QOS_RTT,             /* default 50 */
	CONF_QOS_COMPLETION_RATE, /* default 5 */
	CONF_QOS_HOPS,            /* default 0 */
	CONF_QOS_LINK_CAPACITY,   /* default 30 */
	CONF_QOS_VS_CAPACITY,     /* default 0 */
	CONF_QOS_KBPS,            /* default 3 */
	CONF_QOS_TERMS
};
#define CONF_HTTP_STATUS_MAX 8

/* A named monitor: what to check and the up/down state machine's parameters. */
typedef struct {
	char *name;
	char *type;          /* tcp | http | https | dns | exec | static */
	uint16_t port;       /* 0 = the type's default (80, 443, 53); tcp needs one */
	unsigned interval;   /* ms between probe starts, default 2000 */
	unsigned timeout;    /* ms, default 1000, below interval */
	unsigned fall;       /* consecutive failures to go DOWN, default 3 */
	unsigned rise;       /* consecutive successes to come UP, default 3 */
	unsigned jitter;     /* percent of interval each probe start may move, default 10 */
	unsigned hold_down;  /* ms a recovered target waits UP-ready before it is answered */
	unsigned slow_start; /* ms over which a recovered target's weight ramps to 100% */
	unsigned ttl_floor;  /* s, lowest TTL cap while a target is DOWN or flapping, default 5 */
	/* http / https */
	char *path;      /* default "/" */
	char *host;      /* Host header and TLS name; NULL = the address */
	char *body;      /* substring expected in the first 5,120 body bytes; NULL = any */
	bool tls_verify; /* default true */
	uint16_t status[CONF_HTTP_STATUS_MAX]; /* expected codes; none = 200..399 */
	size_t n_status;
	/* dns */
	char *qname;    /* default: the monitored service's name */
	uint16_t qtype; /* default A (1) */
	uint8_t rcode;  /* default NOERROR (0) */
	char *answer;   /* expected rdata text; NULL = any */
	/* exec */
	char **command; /* argv, NULL-terminated; n_command entries before the NULL */
	size_t n_command;
	/* static */
	bool static_down; /* `state: down` */
	/* metrics: load values read from an HTTP(S) endpoint (never a state change) */
	char *format;                         /* prometheus | json | nginx-stub-status */
	bool tls;                             /* https instead of http */
	unsigned stale_after;                 /* ms after which values are not used, default 30 s */
	char *metric_expr[CONF_METRIC_KINDS]; /* per CONF_METRIC_*: an expression, or NULL */
	double metric_const[CONF_METRIC_KINDS];  /* used when the expression is NULL and ... */
	bool metric_is_const[CONF_METRIC_KINDS]; /* ... this is true (a number was configured) */
	unsigned metric_line[CONF_METRIC_KINDS]; /* where each value was configured, 0 = not */
	unsigned line;
} conf_monitor_t;

typedef struct {
	char *name;
	bool has_coords;
	double lat, lon; /* degrees, -90..90 / -180..180 */
	size_t monitor;  /* link monitor (index into conf_t.monitors) or CONF_MONITOR_NONE */
	char *probe;     /* what the link monitor probes: "addr" or "addr:port" (required with
	                    monitor); when DOWN every address of the datacenter is DOWN */
	unsigned line;
} conf_datacenter_t;

/* An ordered list of datacenters, as indices into conf_t.datacenters. */
typedef struct {
	size_t *dc;
	size_t n;
} conf_dclist_t;

typedef struct {
	char *file;           /* a nets file (resolved path) or NULL for inline prefixes */
	steer_prefix_t *cidr; /* inline prefixes */
	size_t n_cidr;
	conf_dclist_t datacenters;
	bool allow_short_prefixes; /* prefixes shorter than the map's min-prefix-length are fine */
	bool allow_shrink;         /* a reload may shrink or empty the file beyond max-shrink */
	unsigned line;
} conf_nets_t;

typedef struct {
	char *match; /* "AS", "AS/CN", "AS/CN/31", "AS/CN/31/Shanghai"; NULL for ASN rules */
	uint32_t *asn;
	size_t n_asn;
	conf_dclist_t datacenters;
	unsigned line;
} conf_geoip_rule_t;

typedef struct {
	char *name;
	conf_nets_t *nets;
	size_t n_nets;
	char *geoip_database; /* resolved path, NULL = no mmdb */
	/* resolved path of a second mmdb whose ASNs are merged into the first's records
	 * (GeoLite2-City + GeoLite2-ASN), NULL = none */
	char *geoip_asn_database;
	bool auto_distance; /* order by great-circle distance when no rule matches */
	conf_geoip_rule_t *rules;
	size_t n_rules;
	conf_dclist_t default_dcs;  /* when nothing matches; empty = the service's own order */
	bool ignore_ecs;            /* decide on the resolver's address even when ECS is present */
	bool ecs_private_is_absent; /* ECS with a private/loopback/link-local address = no ECS */
	unsigned min_prefix4, min_prefix6; /* shortest nets prefix allowed (8 / 16) */
	unsigned max_shrink; /* percent of a nets file's prefixes a reload may lose (50) */
	unsigned line;
} conf_map_t;

typedef struct {
	sa_family_t family; /* AF_INET or AF_INET6 */
	uint8_t addr[16];
	uint32_t weight; /* 1..65535, default 1 */
	char *probe;     /* probe this "addr" or "addr:port" instead of the address; NULL = it */
	char **requires; /* target names ("service/...", "datacenter/<dc>") that must be UP */
	size_t n_requires;
} conf_address_t;

typedef struct {
	size_t datacenter; /* index into conf_t.datacenters */
	conf_address_t *addresses;
	size_t n_addresses;
	char *policy;    /* in-datacenter policy name, NULL = all UP addresses */
	unsigned multi;  /* for policy multi: at most this many addresses */
	uint32_t weight; /* 1..65535, default 1: datacenter-level weighted and persist */
	size_t monitor;  /* index into conf_t.monitors; CONF_MONITOR_NONE = the service's */
	size_t metrics;  /* a `metrics` monitor; CONF_MONITOR_NONE = the service's */
	unsigned line;
} conf_service_dc_t;

typedef struct {
	char *name;   /* owner name, presentation form; must lie inside a served zone */
	char *policy; /* datacenter-level policy name (failover, geo, weighted, ...) */
	size_t map;   /* index into conf_t.maps, SIZE_MAX = none */
	uint32_t ttl;
	conf_service_dc_t *dcs; /* in the configured (failover) order: list or mapping form */
	size_t n_dcs;
	char *all_down;           /* first-datacenter | fallback | nodata | servfail */
	conf_address_t *fallback; /* for all_down fallback */
	size_t n_fallback;
	char *fallback_cname;                      /* or a CNAME target for all_down fallback */
	unsigned persist_prefix4, persist_prefix6; /* client prefix hashed by persist (24 / 56) */
	size_t monitor; /* default monitor of the addresses, or CONF_MONITOR_NONE */
	size_t metrics; /* default `metrics` monitor of the addresses, or CONF_MONITOR_NONE */
	char *fallback_policy; /* measured policies: what decides without data; NULL = geo with
	                        * a map, else failover */
	unsigned qos[CONF_QOS_TERMS]; /* qos coefficients per CONF_QOS_*, 0..1000 */
	unsigned line;
} conf_service_t;

typedef struct {
	char *pattern; /* glob over "service/<name>/<datacenter>/<address>" */
	bool up;
	unsigned line;
} conf_override_t;

/* ---- caching forwarder (`forward:`) ---- */

/* One upstream resolver of a forwarding group. */
typedef struct {
	char *name;               /* "link1": logs, steerctl upstreams; unique in the config */
	steer_sockaddr_t address; /* the recursive resolver; port 53 unless given */
	steer_sockaddr_t source;  /* queries and probes leave from here; family 0 = unset */
	char *link;               /* device to follow (up/down); NULL = the one holding source */
	unsigned line;
} conf_upstream_t;

/* A domain suffix and the upstreams that resolve it, in preference order. */
typedef struct {
	char *domain; /* presentation form with trailing dot: "." or "corp.example." */
	char *policy; /* ordered | round-robin | fastest */
	conf_upstream_t *upstreams;
	size_t n_upstreams;
	char *probe_name;         /* recursive probes ask <nonce>.<probe_name>; NULL = the root */
	unsigned probe_interval;  /* ms, default 1000 */
	unsigned probe_timeout;   /* ms, default 500, below the interval */
	unsigned probe_fall;      /* default 2 */
	unsigned probe_rise;      /* default 3 */
	unsigned probe_hold_down; /* ms, default 5000 */
	unsigned retry_timeout;   /* ms, default 400: the in-request retry timeout (its cap when
	                           * adaptive) */
	bool retry_adaptive;      /* default true: max(100 ms, 3 x smoothed RTT), capped above */
	unsigned line;
} conf_fwd_group_t;

typedef struct {
	steer_prefix_t *allow_recursion; /* who may recurse; empty = nobody (REFUSED) */
	size_t n_allow_recursion;
	uint64_t cache_max_size;         /* bytes, default 256 MiB */
	unsigned cache_min_ttl;          /* seconds, default 0 */
	unsigned cache_max_ttl;          /* seconds, default 86400 */
	unsigned cache_max_negative_ttl; /* seconds, default 3600 (RFC 2308) */
	unsigned serve_stale; /* seconds: TTL of stale answers (RFC 8767), 0 = off; default 30 */
	bool prefetch;        /* default true */
	bool use_0x20;        /* default false */
	conf_fwd_group_t *groups; /* empty = no forwarding */
	size_t n_groups;
	unsigned line;
} conf_forward_t;

/* ---- cluster (`cluster:`): this node of an anycast or VRRP service ---- */

/* How the node's service addresses are announced and withdrawn. */
typedef enum {
	CONF_ANNOUNCE_INTERFACE,  /* the holder interface admin up/down; the routing daemon
	                           * announces what is on it */
	CONF_ANNOUNCE_BIRD,       /* enable/disable a BIRD protocol over BIRD's control socket */
	CONF_ANNOUNCE_FRR,        /* add/remove kernel routes to the service addresses that FRR
	                           * redistributes */
	CONF_ANNOUNCE_KEEPALIVED, /* a keepalived track_file: 0 healthy, non-zero fault */
} conf_announce_t;

typedef struct {
	bool enabled;              /* a cluster: section is present */
	char *node_id;             /* identity answers (id.server, hostname.bind, NSID), logs */
	steer_sockaddr_t *service; /* the service addresses (port 0) */
	size_t n_service;
	char *interface;             /* device holding them, created if missing (dummy, else ifb);
	                              * default "vip0"; NULL with announce keepalived when none */
	steer_sockaddr_t unicast4;   /* the node's own addresses: self-check queries, health
	                              * probes and forwarded queries leave from them; family 0 = */
	steer_sockaddr_t unicast6;   /* unset */
	conf_announce_t announce;    /* default interface */
	char *bird_socket;           /* default /run/bird/bird.ctl */
	char *bird_protocol;         /* the protocol to enable/disable; required with bird */
	unsigned frr_table;          /* kernel table of the announced routes, default 254 (main) */
	char *keepalived_track_file; /* default /run/steer/vrrp-track */
	/* self-check: */
	unsigned check_interval;  /* ms between rounds, default 100 */
	unsigned check_timeout;   /* ms a self-query may take, default 80, below the interval */
	unsigned check_fall;      /* failed rounds to withdraw, default 3 */
	unsigned check_rise;      /* good rounds to announce again, default 5 */
	unsigned check_hold_down; /* ms after a withdraw before announcing again, default 2000 */
	bool check_reload;        /* a failed reload withdraws until one succeeds (default true) */
	bool check_forwarder;     /* no usable upstream withdraws (default false: a fault that
	                           * is not local keeps the node serving from cache) */
	bool check_routes;        /* a missing return path withdraws (default true) */
	steer_sockaddr_t *return_path; /* destinations that must be routable from the unicast
	                                * address; none = a default route per service family */
	size_t n_return_path;
	unsigned
	    liveness_timeout;   /* ms without a heartbeat after which the keeper process
	                         * withdraws on its own (steerd killed or stopped), default 300 */
	unsigned drain_quiet;   /* ms without client queries that ends a drain, default 500 */
	unsigned drain_timeout; /* ms a drain waits at most, default 30000 */
	unsigned line;
} conf_cluster_t;

/* ---- measured paths (`paths:`): steer-probe agents and what the nodes do with them ---- */

/* One datacenter's steer-probe agent. */
typedef struct {
	size_t datacenter;       /* index into conf_t.datacenters: its column in the table */
	char *url;               /* the agent's base URL, ending in '/' (paths/table below it) */
	steer_sockaddr_t source; /* agent side: probes leave from here; family 0 = unset */
	unsigned line;
} conf_path_agent_t;

/* Probe methods of the agent (conf_paths_t.methods, in preference order). */
typedef enum {
	CONF_PROBE_DNS,  /* a query for dns-name (a name in our own zone) to port 53 */
	CONF_PROBE_TCP,  /* a TCP handshake to port 53 (SYN, then RST) */
	CONF_PROBE_ICMP, /* an ICMP echo */
} conf_probe_method_t;

#define CONF_PROBE_METHODS 3

typedef struct {
	bool enabled; /* a paths: section is present */
	conf_path_agent_t *agents;
	size_t n_agents;
	unsigned fetch_interval; /* ms, default 2 s */
	unsigned fetch_timeout;  /* ms, default 2 s */
	unsigned path_ttl;       /* s, default 2400 */
	unsigned ipv4_prefix;    /* default 24 */
	unsigned ipv6_prefix;    /* default 48 */
	unsigned max_prefixes;   /* default 1,000,000 */
	unsigned demand_sample;  /* default 16 */
	char *token_file;        /* NULL = no bearer token */
	/* hysteresis: */
	unsigned hyst_margin;         /* percent, default 20 */
	unsigned hyst_min_difference; /* ms, default 10 */
	unsigned hyst_rounds;         /* default 2 */
	/* probe (the agent): */
	char **nodes; /* DNS nodes' base URLs, each ending in '/' */
	size_t n_nodes;
	conf_probe_method_t methods[CONF_PROBE_METHODS]; /* default dns, tcp, icmp */
	size_t n_methods;
	char *dns_name;            /* presentation form; required when dns is a method */
	unsigned probe_rate;       /* probes per second, default 200 */
	unsigned probe_samples;    /* default 3 */
	unsigned probe_interval;   /* ms, default 60 s */
	unsigned hot_interval;     /* ms, default 10 s */
	unsigned hot_share;        /* percent, default 20 */
	unsigned probe_timeout;    /* ms, default 1 s */
	unsigned smoothing;        /* percent weight of a new measurement, default 30 */
	unsigned publish_interval; /* ms, default 2 s */
	unsigned demand_interval;  /* ms, default 2 s */
	unsigned forget_after;     /* s, default 28 days */
	unsigned line;
} conf_paths_t;

/* ---- operations (`http`, `dnstap`, `stats-snapshots`, `alerts`, `decision-log`) ---- */

/* The HTTP front end: the control commands as a JSON API, /metrics and the status page. */
typedef struct {
	steer_sockaddr_t *listen; /* empty = no HTTP server (the default) */
	size_t n_listen;
	char *token_file;    /* the bearer token of mutating calls (first line); NULL = none, and
	                      * then mutating calls are refused over HTTP */
	bool read_only_open; /* GET /metrics, /, /api/v1/<read-only> without a token; default
	                      * true */
	unsigned line;
} conf_http_t;

/* dnstap message kinds (conf_dnstap_t.messages, a bit set). */
#define CONF_DNSTAP_AUTH_QUERY         0x01u /* queries to our zones, as received */
#define CONF_DNSTAP_AUTH_RESPONSE      0x02u /* our answers to them */
#define CONF_DNSTAP_CLIENT_QUERY       0x04u /* recursive queries from allowed clients */
#define CONF_DNSTAP_CLIENT_RESPONSE    0x08u /* our answers to them (cache or upstream) */
#define CONF_DNSTAP_FORWARDER_QUERY    0x10u /* the forwarder's queries to its upstreams */
#define CONF_DNSTAP_FORWARDER_RESPONSE 0x20u /* the upstreams' responses */

/* The dnstap query log (libfstrm + protobuf-c): a UNIX socket or a file. */
typedef struct {
	bool enabled;      /* a socket or a file is set */
	char *socket;      /* a Frame Streams reader's UNIX socket (fstrm_capture, dnstap-read) */
	char *file;        /* or a file, written by steerd itself; exactly one of the two */
	unsigned messages; /* CONF_DNSTAP_* bits; default auth-query | auth-response */
	unsigned sample;   /* log every Nth query (with its response), default 1 = all */
	unsigned queue;    /* messages each thread's queue holds before it drops, default 16384 */
	unsigned line;
} conf_dnstap_t;

/* Statistics snapshots: the `stats` counters appended as one JSON line per interval. */
typedef struct {
	char *file;        /* NULL = off */
	unsigned interval; /* ms, default 5 minutes */
	unsigned line;
} conf_snapshots_t;

/* One alert destination: state changes are POSTed to the webhook or passed to the command. */
typedef struct {
	char *webhook;    /* http:// or https:// URL; NULL when exec is set */
	char *exec;       /* a command (absolute path, run without a shell); NULL when webhook */
	unsigned timeout; /* ms a delivery may take, default 5s */
	unsigned retries; /* further attempts after a failed one, default 3 (1 s, 2 s, 4 s ...) */
	unsigned line;
} conf_alert_t;

/* The sampled GSLB decision log: one JSON line per sampled decision, with its reasons. */
typedef struct {
	char *file;      /* NULL = off */
	unsigned sample; /* every Nth GSLB decision, default 1000 */
	unsigned line;
} conf_decision_log_t;

typedef struct {
	char *path; /* the config file, NULL in quick mode (command-line zones) */

	/* server: */
	steer_sockaddr_t *listen; /* UDP and TCP listen addresses */
	size_t n_listen;
	bool listen_is_default;    /* still the built-in default: conf_add_listen() replaces it */
	unsigned workers;          /* UDP worker threads; 0 = one per CPU */
	unsigned tcp_workers;      /* TCP event-loop threads; 0 = one per CPU, at most 4 */
	uint16_t udp_max_payload;  /* our EDNS UDP payload ceiling (512..4096, default 1232) */
	unsigned tcp_max_clients;  /* open TCP connections across all TCP threads */
	unsigned tcp_idle_timeout; /* ms a connection may sit between queries */
	unsigned tcp_io_timeout;   /* ms to receive a whole message once it started */
	char *user;                /* drop privileges to this user after binding; NULL = stay */
	char *group;               /* and this group; NULL = the user's primary group */
	char *control_socket;      /* UNIX socket path for steerctl */
	char *pid_file;            /* NULL = none */
	char *identity;            /* server.identity as configured, NULL = unset: see
	                            * conf_identity() for the value in force */
	char *version;             /* CH TXT version.bind / version.server; NULL = "Steer
	                            * <version>"; "" = hidden (REFUSED) */
	char *
	    storage; /* secondary zones and journals (default /var/lib/steer; NULL in quick mode) */
	unsigned tcp_max_per_address; /* open TCP connections one client address may hold */
	unsigned tcp_max_per_prefix;  /* ... one /24 (IPv4) or /56 (IPv6) may hold */

	/* log: */
	log_target_t log_target;
	log_level_t log_level;

	conf_zone_t *zones;
	size_t n_zones;
	conf_tsig_key_t *keys; /* TSIG keys, `keys:` then key files, names unique */
	size_t n_keys;
	conf_rrl_t rrl;
	conf_cookies_t cookies;

	/* GSLB: */
	conf_datacenter_t *datacenters;
	size_t n_datacenters;
	conf_map_t *maps;
	size_t n_maps;
	conf_service_t *services;
	size_t n_services;
	char **whoami; /* names answering the resolver's and the ECS address */
	size_t n_whoami;
	char *state_file; /* admin overrides persisted here (read at start, written on change) */
	char *nets_state_file; /* nets prefix counts as last accepted (the start-up shrink guard) */
	conf_override_t *overrides; /* from the config, applied before the state file's */
	size_t n_overrides;

	/* health monitors: */
	conf_monitor_t *monitors;
	size_t n_monitors;
	char *health_state_file; /* monitor states saved here, restored at start; NULL = none */

	/* caching forwarder: */
	conf_forward_t forward;

	/* cluster node: */
	conf_cluster_t cluster;

	/* operations: */
	conf_http_t http;
	conf_dnstap_t dnstap;
	conf_snapshots_t snapshots;
	conf_alert_t *alerts;
	size_t n_alerts;
	conf_decision_log_t decision_log;

	/* measured paths: */
	conf_paths_t paths;
} conf_t;

/** A configuration with every default and no zones (the YAML loader starts from this). */
conf_t *conf_new_default(void);

/**
 * The configuration quick mode starts from: conf_new_default() without server.storage (NULL),
 * so a daemon started from the command line keeps its state in memory and never reads, writes
 * or removes files in the folder of a daemon run from a configuration file. Caller frees it
 * with conf_free().
 */
conf_t *conf_new_quick(void);

/**
 * Parse and validate the YAML file @p path. On error returns STEER_ECONF and writes
 * "file:line: message" into @p err. Unknown keys are errors. Control thread only.
 */
int conf_load_file(const char *path, conf_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Add a listen address given as "1.2.3.4:53" or "[::1]:53" (quick mode); default port 53.
 * Returns 0 or STEER_EINVAL with a message in @p err.
 */
int conf_add_listen(conf_t *conf, const char *text, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/** Add a zone given as "example.test=path/to/file" (quick mode). Returns 0 or STEER_EINVAL. */
int conf_add_zone_arg(conf_t *conf, const char *arg, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Add an upstream given as "ADDR[:PORT][@SOURCE]" (quick mode `--forward`; IPv6 as
 * "[2001:db8::53]:53@2001:db8::1") to the group "." (created on first use with policy ordered
 * and the default probe settings), after the upstreams added before it: the order is the
 * preference order. Upstreams are named "upstream1", "upstream2", ... in order. Returns 0 or
 * STEER_EINVAL with a message in @p err (bad address, a port on the source, families that
 * differ, more than 64 upstreams).
 */
int conf_add_forward_arg(conf_t *conf, const char *arg, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Add a client prefix allowed to recurse, "10.0.0.0/24" or an address (quick mode
 * `--allow-recursion`). Host bits beyond the length are an error. Returns 0 or STEER_EINVAL
 * with a message in @p err.
 */
int conf_add_allow_recursion_arg(conf_t *conf, const char *arg, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Add an HTTP listen address given as "127.0.0.1:8053" or "[::1]:8053" (quick mode `--http`;
 * the port is required). Returns 0 or STEER_EINVAL with a message in @p err (bad address, no
 * port, a duplicate, too many).
 */
int conf_add_http_arg(conf_t *conf, const char *text, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Final checks shared by both modes: at least one listen address, something to serve (a zone
 * or a forward group), allow-recursion only with forward groups.
 */
int conf_validate(const conf_t *conf, char *err, size_t errlen) STEER_NONNULL(1, 2) STEER_WUR;

/** The zone config for @p domain (case-insensitive, trailing dot optional), or NULL. */
const conf_zone_t *conf_find_zone(const conf_t *conf, const char *domain) STEER_NONNULL(1, 2);

/**
 * Names of settings that differ between @p old and @p new but only take effect on restart
 * (listen, workers, user, ...), comma-separated into @p buf; empty when none.
 */
void conf_restart_only_changes(const conf_t *old, const conf_t *new, char *buf, size_t size)
    STEER_NONNULL(1, 2, 3);

/**
 * The identity this server answers with (CH TXT id.server and hostname.bind, NSID):
 * server.identity, else cluster.node-id when a cluster section is present, else NULL (none).
 * Borrowed from @p conf.
 */
const char *conf_identity(const conf_t *conf) STEER_NONNULL(1);

/**
 * The TSIG key named @p name (case-insensitive, trailing dot optional) in @p conf, or NULL.
 * Borrowed from @p conf.
 */
const conf_tsig_key_t *conf_tsig_key_find(const conf_t *conf, const char *name) STEER_NONNULL(1, 2);

/**
 * The access list @p acl (@p n entries) in the form dns_acl_match() takes, key names as
 * lowercase wire names. Caller frees the array (never NULL, even for n == 0).
 */
dns_acl_entry_t *conf_acl_build(const conf_acl_t *acl, size_t n) STEER_WUR;

/**
 * The keys of @p conf as a keyring for the query threads (immutable once built). Free with
 * conf_keyring_free(), which also wipes the secrets.
 */
dns_tsig_keyring_t *conf_keyring_new(const conf_t *conf) STEER_NONNULL(1) STEER_WUR;
void conf_keyring_free(dns_tsig_keyring_t *ring);

/** The name of probe method @p m as the configuration writes it ("dns", "tcp", "icmp"). */
const char *conf_probe_method_name(conf_probe_method_t m);

/** Write the configuration reference (Markdown) generated from the schema table. */
void conf_write_reference(FILE *out) STEER_NONNULL(1);

/**
 * Write the same reference as the steer.yaml(5) manual page (roff, man macros): the Markdown
 * of conf_write_reference() translated, so the page and docs/configuration.md say the same.
 * @p version goes into the page's footer. Returns 0, or -1 when the Markdown could not be
 * produced (out of memory).
 */
int conf_write_reference_man(FILE *out, const char *version) STEER_NONNULL(1, 2);

/** Free a configuration. NULL is ignored. */
void conf_free(conf_t *conf);
