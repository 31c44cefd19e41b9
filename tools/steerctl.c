/*
 * steerctl: talk to steerd over its control socket (see src/ctl/ctl.h for the framing).
 *
 *   steerctl [-s SOCKET] [--json] [-t SECONDS] COMMAND [ARGS]
 *   steerctl [--json] explain --config FILE NAME CLIENT-IP [ECS-SUBNET]   (offline, no daemon)
 *
 * The socket is -s, else $STEER_CONTROL_SOCKET, else ctl_default_socket() (/run/steer/steerd.sock
 * for root, $XDG_RUNTIME_DIR/steerd.sock for other users, as steerd's quick mode). Exit status: 0
 * when the daemon answered ok, 1 when it answered with an error, 2 on usage or connection errors.
 *
 * Reply "data" of each command, as steerd's handlers produce it (the contract of this file):
 *
 *   status  {"version": "0.1.0", "pid": 1234, "uptime_s": 3600, "workers": 2, "tcp_workers": 1,
 *            "listen": ["127.0.0.1:53", "[::1]:53"], "zones": 3,
 *            "config": "/etc/steer/steer.yaml" | null (quick mode),
 *            "last_reload": {"at": 1700000000, "ok": true, "error": null} | null (never),
 *            "gslb": {"services": 3, "maps": 1, "whoami": 1}, "hostname": "ns1",
 *            "forwarding": true (a forward: group runs), "cluster": false (a cluster: section)}
 *   reload [--force]   (request args: [] or ["--force"])
 *           {"zones_reloaded": ["example.test", ...], "zones_unchanged": 2,
 *            "restart_needed": ["listen", ...],
 *            "warnings": ["steer.yaml:14: map isp: nets file nets/a.txt is empty", ...]}
 *           on failure {"ok": false, "error": "zones/example.test.zone:12: ..."} and the old
 *           configuration and zones keep serving. --force accepts nets files that shrank
 *           beyond the map's max-shrink (or became empty).
 *   maps    [{"name": "isp", "min_prefix_length": [8, 16], "max_shrink_percent": 50,
 *             "geoip": ["/var/lib/GeoLite2-City.mmdb", ...],
 *             "nets": [{"file": "/etc/steer/nets/unicom.txt" | null (inline cidr),
 *                       "line": 12 (config line), "ipv4": 4012, "ipv6": 31,
 *                       "loaded_at": 1700000000, "allow_short_prefixes": false,
 *                       "allow_shrink": false}, ...]}, ...]
 *   zones   [{"name": "example.test", "serial": 2024010101, "records": 120, "nodes": 40,
 *             "file": "/etc/steer/zones/example.test.zone", "loaded_at": 1700000000,
 *             "state": "serving" | "expired" | "pending: no transfer yet[: last error]",
 *             "secondary": {...} (secondary zones)}, ...]
 *   stats   {"queries": {"udp": n, "ipv6": n, "tcp": n}, "rcode": {"NOERROR": n, ...},
 *            "qtype": {"A": n, ...}, "edns": n, "edns_do": n, "truncated": n, "dropped": n,
 *            "axfr": n, "axfr_refused": n, "ixfr": n,
 *            "ecs": {"ipv4": n, "ipv6": n, "ignored": n,
 *                    "resolvers": [{"address": "192.0.2.53", "queries": n}, ...]},
 *            "gslb": {...}, "forward": {"recursion_refused": n, "cache_hits": n,
 *                    "cache_misses": n, "forwarded": n, "norec_misses": n, "overload": n,
 *                    "prefetches": n},
 *            "answers": {"www.example.test": {"dc1": n, "dc2": n, "none": n,
 *                                             "fallback": n, "all-down": n}, ...}}
 *           (ecs: queries with a valid ECS option by family; ignored: GSLB decisions that
 *           used the resolver's address despite ECS; resolvers: the top 10 senders of ECS;
 *           forward: the query threads' side of the forwarder, `cache` has the rest;
 *           answers: GSLB decisions per service and datacenter, kept across reloads)
 *   explain NAME CLIENT-IP [ECS-SUBNET]
 *           {"name": "vpn.example.test", "client": "192.0.2.1", "ecs": "198.51.100.0/24" | null,
 *            "text": "map isp: 198.51.100.0/24 (scope 24) -> telecom, edu\n..."}
 *           (the offline form prints the same reply, computed from the config file)
 *   health [PATTERN]   (only the targets whose name matches the glob, case-insensitive)
 *           [{"id": 0, "name": "service/vpn.example.test/telecom/192.0.2.1", "state": "UP",
 *             "forced": false, "reason": "monitor: UP", "ttl_cap": 0}, ...]
 *   monitors [PATTERN] (only the checks whose key or monitor matches the glob)
 *           [{"key": "web@192.0.2.1:80", "monitor": "web", "type": "http",
 *             "address": "192.0.2.1:80", "state": "UP" | "DOWN" | "UP (restored)" |
 *             "DOWN (restored)" | "unknown", "flapping": false, "since": 1700000000,
 *             "ok_run": 5, "fail_run": 0, "flaps": 1, "probes": 42, "ttl_cap": 0,
 *             "ramp_percent": 40 (while slow start ramps),
 *             "last": {"ok": true, "rtt_us": 812, "detail": "HTTP 200", "at": 1700000042}}, ...]
 *           (metrics checks, state "metrics", also carry "values": {"connections": {"value": 17,
 *            "age_ms": 400, "fresh": true}, ...} and "values_at": 1700000042)
 *           (health rows also carry "monitors": [{"key", "state", "last"}] for their checks,
 *            and "load": {"values": {"connections": 17, ...}, "age_ms": 400, "round": 12} or
 *            null: the fresh load values the policies use)
 *   override list
 *           {"state_file": "/var/lib/steer/overrides" | null,
 *            "overrides": [{"pattern": "service/x/dc1/any", "state": "DOWN" (state rules) |
 *                           "weight": 5 (weight rules), "source": "config" | "admin",
 *                           "line": 3 | null, "targets": 2,
 *                           "expires": 1700003600.5 (seconds since the epoch) | null,
 *                           "expires_in_ms": 1799500 | null}, ...]}
 *           (config rules first, then the admin's; later rules win; line: in the config file
 *           or the state file)
 *   override set PATTERN up|down [FOR], override clear PATTERN,
 *   override weight PATTERN N|default [FOR]
 *           {"action": "set" | "clear", "kind": "state" | "weight", "pattern": "...",
 *            "state": "DOWN" | "UP" | null, "weight": N | null,
 *            "targets": n (targets the pattern matches), "state_file": ..., "overrides": [...]}
 *           a set also has "expires" and "expires_in_ms" (FOR, e.g. 30m: the rule lapses by
 *           itself then; null without FOR);
 *           a clear also has "cleared": ["state", "weight"] (the admin rules it dropped:
 *           override clear drops both kinds, override weight PATTERN default the weight only;
 *           "kind" is "state" when a state rule was dropped);
 *           applied to the running view at once (no reload) and saved to the state file.
 *           A weight rule on a target whose datacenter's policy ignores address weights
 *           (anything but weighted, multi and persist) is refused with the reason.
 *
 *   upstreams [PATTERN]   (only the upstreams whose name matches the glob)
 *           {"groups": [{"domain": ".", "policy": "ordered" | "round-robin" | "fastest",
 *                        "active": ["link1"] (the members taking the group's traffic now),
 *                        "upstreams": ["link1", "link2"] (in preference order)}, ...],
 *            "upstreams": [{"name": "link1", "group": ".", "policy": "ordered",
 *                           "address": "10.53.1.53:53", "source": "10.1.1.1" | null,
 *                           "link": "eth1" | null, "state": "up" | "link-down" |
 *                           "upstream-down" | "degraded", "suspect": false, "usable": true,
 *                           "active": true, "since": 1700000000, "since_s": 42 (in this
 *                           state), "reason": "probe answered", "queries": n, "answers": n,
 *                           "timeouts": n, "servfails": n, "srtt_ms": 1.25 | null,
 *                           "last_rtt_ms": 1.1 | null, "probe_rtt_ms": 2.5 | null,
 *                           "probes": n, "probe_failures": n, "hold_down_ms": 5000}, ...]}
 *           (groups: only those with a matching upstream; degraded upstreams answer but
 *           cannot resolve and are used only when no member of the group is up; suspect:
 *           real queries timed out, probes now run every 200 ms). Fails with "forwarding is
 *           not configured" when the server has no forward groups, as do the cache commands.
 *   cache   {"cache": {"entries": n, "bytes": n, "max_bytes": n, "hits": n, "misses": n,
 *                      "stale_answers": n, "prefetches": n, "truncated": n, "evictions": n,
 *                      "expired": n, "inserts": n, "replaced": n, "refused": n},
 *            "engine": {"requests": n, "answered": n, "answered_stale": n, "servfail": n,
 *                       "refused_full": n, "prefetches": n, "upstream_queries": n,
 *                       "retries": n, "tcp_queries": n, "late_replies": n,
 *                       "socket_errors": n, "probes": n, "cache_stores": n, "pending": n,
 *                       "replies": {"accept": n, "wrong-id": n, ...}}}
 *           (cache hits, misses, stale answers and prefetches are counted by the query
 *           threads; refused: replies the cache would not store (SERVFAIL, TC, no SOA...);
 *           engine.replies: upstream replies by the wire check's verdict, forged and
 *           malformed ones dropped)
 *   cache flush [NAME]
 *           {"name": "example.com" | null (everything), "subtree": true,
 *            "entries_before": n}
 *           (NAME and every name below it; the engine thread drops them within a moment)
 *
 *   cluster {"node_id": "n1", "method": "interface" | "bird" | "frr" | "keepalived",
 *            "service_addresses": ["192.0.2.53", "2001:db8::53"], "interface": "vip0" | null,
 *            "unicast": ["10.53.0.11"], "state": "starting" | "announced" | "withdrawn" |
 *            "draining" | "drained", "healthy": true (the self-check's verdict),
 *            "want_announce": true (asked of the keeper), "announced": true (in force, as
 *            the keeper reported), "transitions": n, "last_transition": 1700000000.25 | null,
 *            "reason": "answer: 192.0.2.53: timeout after 80 ms",
 *            "self_check": {"interval_ms": 100, "timeout_ms": 80, "fall": 3, "rise": 5,
 *                           "hold_down_ms": 2000, "good_rounds": n, "hold_down_left_s": 0.0,
 *                           "checks": [{"name": "answer" | "threads" | "routes" | "reload" |
 *                                       "forwarder", "enabled": true, "ok": true,
 *                                       "failures": 0, "detail": "..."}, ...],
 *                           "zones": ["example.test.", ...] (the answer check's, in turn),
 *                           "zones_skipped": {"sec.test.": "expired"} (of those, skipped)},
 *            "drain": {"state": "none" | "draining" | "drained", "started": 1700000000.5 |
 *                      null, "quiet_for_s": 0.4, "timed_out": false},
 *            "keeper": {"pid": 1235, "alive": true, "message": "announced"},
 *            "vrrp_state": "MASTER" | "BACKUP" | "FAULT" | "STOP" | null}
 *   cluster health
 *           {"healthy": true, "announced": true, "state": "announced", "reason": "..."}
 *           (steerctl exits 1 when healthy is false: usable as keepalived's vrrp_script)
 *   cluster bird-config|frr-config [bgp|ospf] [OPTION=VALUE ...]
 *           {"daemon": "bird" | "frr", "config": "..."} (printed as is)
 *   cluster notify master|backup|fault|stop
 *           {"vrrp_state": "MASTER"}
 *   drain [TIMEOUT]
 *           {"state": "draining", "timeout_ms": 30000, "quiet_ms": 500}; steerctl then polls
 *           `cluster` until drain.state is "drained" and exits 0, or 1 when the drain ended
 *           by its timeout (the node stays withdrawn either way); `drain --no-wait` returns
 *           at once
 *   undrain {"state": "starting" | "announced" | ...}
 *   events [N] [since=SEQ]
 *           {"last_seq": 42 (the newest event's, 0 before the first), "kept": 256,
 *            "events": [{"seq": 41, "time": 1700000000.25, "kind": "target" | "service" |
 *                        "datacenter" | "upstream" | "link" | "cluster" | "reload",
 *                        "subject": "service/www.example.test/dc1/192.0.2.10",
 *                        "from": "up", "to": "down", "reason": "HTTP 503"}, ...]}
 *           (oldest first; a poller passes since=<last_seq it saw>)
 *   paths [PREFIX|ADDRESS]
 *           {"enabled": true, "agents": [{"datacenter": "dc1", "url": "http://...:8054/",
 *                                         "state": "up" | "down" | "unknown",
 *                                         "last_fetch_ms": ..., "last_ok_ms": ... | null,
 *                                         "error": "HTTP 500" | null, "etag": "\"...\"",
 *                                         "rows": n | null (no table yet), "generated_ms": ...,
 *                                         "table_age_s": n, "fetches": {"ok": n,
 *                                         "not-modified": n, "invalid": n, "http-error": n,
 *                                         "timeout": n, "error": n}}, ...],
 *            "table": {"rows4": n, "rows6": n, "cells": n, "sticky_held": n,
 *                      "built_ms": ..., "build_s": 0.01, "bytes": n, "ipv4_prefix": 24,
 *                      "ipv6_prefix": 48} | null,
 *            "demand": {"prefixes": n, "dropped": n}}
 *           with PREFIX also "query", "row": {"prefix": "192.0.2.0/24", "best": "dc1" | null,
 *           "challenger": "dc2", "challenger_rounds": 1 (while one is pending),
 *           "columns": [{"datacenter": "dc1", "empty": false, "rtt_ms": 5.2 | null (no
 *           reply), "loss": 0, "hops": 0, "age_s": 3}, ...]} | null (not in the table), and
 *           "prefix_demand": {"volume": n, "probe": "192.0.2.1", "ecs": true, "urgent": false}
 *           | null
 *
 * Timestamps are UNIX seconds. Human output prints whatever members are present, so adding a
 * member on the daemon side never breaks steerctl; --json prints the whole reply unchanged. A
 * "warnings" list in any reply's data is printed to stderr, one "warning: ..." per line, and
 * does not change the exit status.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "conf/conf.h"
#include "complete.h"
#include "ctl/commands.h"
#include "ctl/ctl.h"
#include "gslb/view.h"

#ifndef STEER_VERSION
#define STEER_VERSION "unknown"
#endif

/* Reload re-reads changed zone files before answering; large zones take seconds. */
#define DEFAULT_TIMEOUT_S 60
/* Room for one explanation, as the daemon's. */
#define EXPLAIN_MAX 16384

enum { EXIT_OK = 0, EXIT_CMD = 1, EXIT_USAGE = 2 };

typedef void (*print_cb)(const json_t *data);

/* ---- formatting helpers -------------------------------------------------------------------- */

/* Any JSON value on one line: strings unquoted, the rest as compact JSON. */
static void print_value(FILE *out, const json_t *v)
{
	if (json_is_string(v)) {
		fputs(json_string_value(v), out);
		return;
	}
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	fputs(text ? text : "?", out);
	free(text);
}

static void print_time(FILE *out, const json_t *ts)
{
	char buf[64];
	if (!json_is_integer(ts)) {
		print_value(out, ts ? ts : json_null());
		return;
	}
	time_t t = (time_t)json_integer_value(ts);
	struct tm tm;
	if (!localtime_r(&t, &tm) || strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S %z", &tm) == 0)
		snprintf(buf, sizeof(buf), "%lld", (long long)t);
	fputs(buf, out);
}

static void print_duration(long long s)
{
	if (s >= 86400)
		printf("%lldd ", s / 86400);
	printf("%02lld:%02lld:%02lld", s % 86400 / 3600, s % 3600 / 60, s % 60);
}

static void print_list(const json_t *list)
{
	size_t i;
	const json_t *v;
	if (!json_is_array(list)) {
		print_value(stdout, list ? list : json_null());
		return;
	}
	json_array_foreach(list, i, v)
	{
		if (i)
			fputs(", ", stdout);
		print_value(stdout, v);
	}
}

/* ---- status -------------------------------------------------------------------------------- */

static void print_last_reload(const json_t *r)
{
	if (!json_is_object(r)) {
		puts("never");
		return;
	}
	print_time(stdout, json_object_get(r, "at"));
	const json_t *err = json_object_get(r, "error");
	if (json_is_true(json_object_get(r, "ok")))
		puts(", ok");
	else
		printf(", failed: %s\n", json_is_string(err) ? json_string_value(err) : "?");
}

static void print_status(const json_t *d)
{
	const json_t *v;
	printf("%-13s", "version");
	print_value(stdout, json_object_get(d, "version"));
	printf("\n%-13s", "pid");
	print_value(stdout, json_object_get(d, "pid"));
	printf("\n%-13s", "uptime");
	v = json_object_get(d, "uptime_s");
	if (json_is_integer(v))
		print_duration(json_integer_value(v));
	else
		print_value(stdout, v ? v : json_null());
	printf("\n%-13s", "workers");
	print_value(stdout, json_object_get(d, "workers"));
	fputs(" udp, ", stdout);
	print_value(stdout, json_object_get(d, "tcp_workers"));
	printf(" tcp\n%-13s", "listen");
	print_list(json_object_get(d, "listen"));
	printf("\n%-13s", "zones");
	print_value(stdout, json_object_get(d, "zones"));
	printf("\n%-13s", "config");
	v = json_object_get(d, "config");
	if (json_is_string(v))
		fputs(json_string_value(v), stdout);
	else
		fputs("none (zones from the command line)", stdout);
	printf("\n%-13s", "last reload");
	print_last_reload(json_object_get(d, "last_reload"));
}

/* ---- reload -------------------------------------------------------------------------------- */

static void print_reload(const json_t *d)
{
	const json_t *reloaded = json_object_get(d, "zones_reloaded");
	const json_t *restart = json_object_get(d, "restart_needed");
	size_t n = json_is_array(reloaded) ? json_array_size(reloaded) : 0;
	printf("reloaded: %zu zone%s", n, n == 1 ? "" : "s");
	if (n) {
		fputs(" (", stdout);
		print_list(reloaded);
		fputs(")", stdout);
	}
	fputs(", unchanged: ", stdout);
	print_value(stdout, json_object_get(d, "zones_unchanged"));
	putchar('\n');
	if (json_is_array(restart) && json_array_size(restart) > 0) {
		fputs("restart steerd to apply: ", stdout);
		print_list(restart);
		putchar('\n');
	}
}

/* ---- zones: an aligned table --------------------------------------------------------------- */

static const struct {
	const char *key, *title;
	bool right; /* numbers align right */
} zone_cols[] = {
    {"name", "ZONE", false},  {"serial", "SERIAL", true},     {"records", "RECORDS", true},
    {"nodes", "NODES", true}, {"loaded_at", "LOADED", false}, {"state", "STATE", false},
    {"file", "FILE", false},
};
#define N_ZONE_COLS (sizeof(zone_cols) / sizeof(zone_cols[0]))

static char *cell_text(const json_t *row, size_t col)
{
	const json_t *v = json_object_get(row, zone_cols[col].key);
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	if (!mem)
		return strdup("?");
	if (strcmp(zone_cols[col].key, "loaded_at") == 0)
		print_time(mem, v);
	else
		print_value(mem, v ? v : json_null());
	fclose(mem);
	return text;
}

static void print_zones(const json_t *d)
{
	size_t width[N_ZONE_COLS], i;
	const json_t *row;
	if (!json_is_array(d)) {
		print_value(stdout, d);
		putchar('\n');
		return;
	}
	for (size_t c = 0; c < N_ZONE_COLS; c++)
		width[c] = strlen(zone_cols[c].title);
	json_array_foreach(d, i, row)
	{
		for (size_t c = 0; c < N_ZONE_COLS; c++) {
			char *t = cell_text(row, c);
			if (t && strlen(t) > width[c])
				width[c] = strlen(t);
			free(t);
		}
	}
	for (size_t c = 0; c < N_ZONE_COLS; c++) {
		int w = zone_cols[c].right ? (int)width[c] : -(int)width[c];
		printf("%s%*s", c ? "  " : "", c == N_ZONE_COLS - 1 ? 0 : w, zone_cols[c].title);
	}
	putchar('\n');
	json_array_foreach(d, i, row)
	{
		for (size_t c = 0; c < N_ZONE_COLS; c++) {
			char *t = cell_text(row, c);
			int w = zone_cols[c].right ? (int)width[c] : -(int)width[c];
			/* The last column is not padded, so lines carry no trailing blanks. */
			if (c == N_ZONE_COLS - 1)
				printf("  %s", t ? t : "?");
			else
				printf("%s%*s", c ? "  " : "", w, t ? t : "?");
			free(t);
		}
		putchar('\n');
	}
}

/* ---- stats: nested counters, one aligned line each ----------------------------------------- */

/* Widest "indent + key" and widest value, so keys and numbers line up across sections. */
static void counter_widths(const json_t *obj, size_t indent, size_t *kw, size_t *vw)
{
	const char *key;
	const json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		if (json_is_object(v)) {
			counter_widths(v, indent + 2, kw, vw);
			continue;
		}
		char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		size_t len = text ? strlen(text) : 1;
		free(text);
		if (strlen(key) + indent > *kw)
			*kw = strlen(key) + indent;
		if (len > *vw)
			*vw = len;
	}
}

static void print_counters(const json_t *obj, size_t indent, size_t kw, size_t vw)
{
	const char *key;
	const json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		if (json_is_object(v)) {
			printf("%*s%s:\n", (int)indent, "", key);
			print_counters(v, indent + 2, kw, vw);
			continue;
		}
		char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		printf("%*s%-*s  %*s\n", (int)indent, "", (int)(kw - indent), key, (int)vw,
		       text ? text : "?");
		free(text);
	}
}

/* Width of a table column: the longest string member @p key of the rows, at least @p header's. */
static int column_width(const json_t *rows, const char *key, const char *header)
{
	size_t i, width = strlen(header);
	const json_t *row;
	json_array_foreach(rows, i, row)
	{
		const char *text = json_string_value(json_object_get(row, key));
		if (text && strlen(text) > width)
			width = strlen(text);
	}
	return (int)width;
}

static void print_stats(const json_t *d)
{
	if (!json_is_object(d)) {
		print_value(stdout, d);
		putchar('\n');
		return;
	}
	/* The resolver list is a table of its own, after the counters. */
	json_t *copy = json_deep_copy(d);
	json_t *ecs = json_object_get(copy, "ecs");
	json_t *resolvers = json_incref(json_object_get(ecs, "resolvers"));
	if (json_is_object(ecs))
		json_object_del(ecs, "resolvers");
	size_t kw = 0, vw = 0;
	counter_widths(copy, 0, &kw, &vw);
	print_counters(copy, 0, kw, vw);
	if (json_is_array(resolvers) && json_array_size(resolvers) > 0) {
		size_t i;
		const json_t *row;
		int wa = column_width(resolvers, "address", "ADDRESS");
		printf("top ECS resolvers:\n  %-*s  %s\n", wa, "ADDRESS", "QUERIES");
		json_array_foreach(resolvers, i, row)
		{
			const char *a = json_string_value(json_object_get(row, "address"));
			printf("  %-*s  ", wa, a ? a : "?");
			print_value(stdout, json_object_get(row, "queries"));
			putchar('\n');
		}
	}
	json_decref(resolvers);
	json_decref(copy);
}

/* ---- explain and health ------------------------------------------------------------------- */

static void print_explain(const json_t *d)
{
	const json_t *text = json_object_get(d, "text");
	if (!json_is_string(text)) {
		print_value(stdout, d ? d : json_null());
		putchar('\n');
		return;
	}
	const char *t = json_string_value(text);
	size_t len = strlen(t);
	fputs(t, stdout);
	if (len == 0 || t[len - 1] != '\n')
		putchar('\n');
}

/* "    values: connections 17 (0.4s old), kbps 1.25 (31.0s old, stale)" under a metrics check. */
static void print_check_values(const json_t *values)
{
	const char *name;
	const json_t *v;
	if (!json_is_object(values) || json_object_size(values) == 0)
		return;
	printf("    values:");
	const char *sep = " ";
	json_object_foreach((json_t *)values, name, v)
	{
		printf("%s%s %g (%.1fs old%s)", sep, name,
		       json_number_value(json_object_get(v, "value")),
		       json_integer_value(json_object_get(v, "age_ms")) / 1000.0,
		       json_is_true(json_object_get(v, "fresh")) ? "" : ", stale");
		sep = ", ";
	}
	putchar('\n');
}

/* "    load: connections 17, capacity 100 (0.4s old, round 12)" under a health row. */
static void print_target_load(const json_t *load)
{
	const char *name;
	const json_t *v;
	if (!json_is_object(load))
		return;
	printf("    load:");
	const char *sep = " ";
	json_object_foreach(json_object_get(load, "values"), name, v)
	{
		printf("%s%s %g", sep, name, json_number_value(v));
		sep = ", ";
	}
	printf(" (%.1fs old, round %lld)\n",
	       json_integer_value(json_object_get(load, "age_ms")) / 1000.0,
	       (long long)json_integer_value(json_object_get(load, "round")));
}

static void print_health(const json_t *d)
{
	size_t i;
	const json_t *row;
	if (!json_is_array(d)) {
		print_value(stdout, d ? d : json_null());
		putchar('\n');
		return;
	}
	if (json_array_size(d) == 0) {
		puts("no GSLB targets");
		return;
	}
	int wname = column_width(d, "name", "TARGET");
	printf("%-*s  %-5s  %-6s  %s\n", wname, "TARGET", "STATE", "FORCED", "REASON");
	json_array_foreach(d, i, row)
	{
		const char *name = json_string_value(json_object_get(row, "name"));
		const char *state = json_string_value(json_object_get(row, "state"));
		const char *reason = json_string_value(json_object_get(row, "reason"));
		printf("%-*s  %-5s  %-6s  %s\n", wname, name ? name : "(unnamed)",
		       state ? state : "?",
		       json_is_true(json_object_get(row, "forced")) ? "yes" : "no",
		       reason ? reason : "");
		print_target_load(json_object_get(row, "load"));
	}
}

static void print_monitors(const json_t *d)
{
	size_t i;
	const json_t *row;
	if (!json_is_array(d)) {
		print_value(stdout, d ? d : json_null());
		putchar('\n');
		return;
	}
	if (json_array_size(d) == 0) {
		puts("no monitored targets");
		return;
	}
	int wkey = column_width(d, "key", "CHECK");
	time_t now = time(NULL);
	printf("%-*s  %-15s  %8s  %4s  %4s  %5s  %9s  %s\n", wkey, "CHECK", "STATE", "FOR", "OK",
	       "FAIL", "FLAPS", "RTT", "LAST RESULT");
	json_array_foreach(d, i, row)
	{
		const char *key = json_string_value(json_object_get(row, "key"));
		const char *state = json_string_value(json_object_get(row, "state"));
		const json_t *last = json_object_get(row, "last");
		char since[32], rtt[32] = "-";
		long long age =
		    (long long)(now - json_integer_value(json_object_get(row, "since")));
		snprintf(since, sizeof(since), "%llds", age < 0 ? 0 : age);
		if (json_is_object(last))
			snprintf(rtt, sizeof(rtt), "%.1fms",
			         json_integer_value(json_object_get(last, "rtt_us")) / 1000.0);
		const char *detail = json_is_object(last)
		                         ? json_string_value(json_object_get(last, "detail"))
		                         : NULL;
		printf("%-*s  %-15s  %8s  %4lld  %4lld  %5lld  %9s  %s%s\n", wkey, key ? key : "?",
		       state ? state : "?", since,
		       (long long)json_integer_value(json_object_get(row, "ok_run")),
		       (long long)json_integer_value(json_object_get(row, "fail_run")),
		       (long long)json_integer_value(json_object_get(row, "flaps")), rtt,
		       detail ? detail : "-",
		       json_is_true(json_object_get(row, "flapping")) ? " (flapping)" : "");
		print_check_values(json_object_get(row, "values"));
	}
}

/* ---- upstreams and cache ------------------------------------------------------------------- */

static long long int_of(const json_t *row, const char *key)
{
	return (long long)json_integer_value(json_object_get(row, key));
}

static const char *str_of(const json_t *row, const char *key, const char *none)
{
	const char *text = json_string_value(json_object_get(row, key));
	return text ? text : none;
}

static void ms_text(const json_t *v, char *buf, size_t size)
{
	if (json_is_number(v))
		snprintf(buf, size, "%.1fms", json_number_value(v));
	else
		snprintf(buf, size, "-");
}

static void print_upstreams(const json_t *d)
{
	size_t i, j;
	const json_t *g, *row;
	const json_t *rows = json_object_get(d, "upstreams");
	if (!json_is_object(d) || !json_is_array(rows)) {
		print_value(stdout, d ? d : json_null());
		putchar('\n');
		return;
	}
	if (json_array_size(rows) == 0) {
		puts("no upstreams match");
		return;
	}
	json_array_foreach(json_object_get(d, "groups"), i, g)
	{
		printf("group %s  policy %s  using ", str_of(g, "domain", "?"),
		       str_of(g, "policy", "?"));
		const json_t *active = json_object_get(g, "active");
		if (json_array_size(active) == 0)
			fputs("none (no usable upstream)", stdout);
		else
			print_list(active);
		putchar('\n');
	}
	int wn = column_width(rows, "name", "NAME"), wa = column_width(rows, "address", "ADDRESS");
	int ws = column_width(rows, "source", "SOURCE"), wl = column_width(rows, "link", "LINK");
	int wg = column_width(rows, "group", "GROUP"), wt = (int)strlen("STATE");
	json_array_foreach(rows, j, row)
	{
		int len = (int)strlen(str_of(row, "state", "?")) +
		          (json_is_true(json_object_get(row, "suspect")) ? 10 : 0);
		wt = len > wt ? len : wt;
	}
	printf("  %-*s  %-*s  %-*s  %7s  %-*s  %-*s  %-*s  %8s  %8s  %8s  %9s  %8s  %9s  %6s  %6s  "
	       "%9s  %s\n",
	       wn, "NAME", wg, "GROUP", wt, "STATE", "SINCE", wa, "ADDRESS", ws, "SOURCE", wl,
	       "LINK", "QUERIES", "ANSWERS", "TIMEOUTS", "SERVFAILS", "SRTT", "PROBE-RTT", "PROBES",
	       "FAILED", "HOLD-DOWN", "REASON");
	json_array_foreach(rows, j, row)
	{
		char state[40], since[24], srtt[24], prtt[24], hold[24];
		snprintf(state, sizeof(state), "%s%s", str_of(row, "state", "?"),
		         json_is_true(json_object_get(row, "suspect")) ? " (suspect)" : "");
		snprintf(since, sizeof(since), "%llds", int_of(row, "since_s"));
		ms_text(json_object_get(row, "srtt_ms"), srtt, sizeof(srtt));
		ms_text(json_object_get(row, "probe_rtt_ms"), prtt, sizeof(prtt));
		snprintf(hold, sizeof(hold), "%lldms", int_of(row, "hold_down_ms"));
		printf(
		    "%c %-*s  %-*s  %-*s  %7s  %-*s  %-*s  %-*s  %8lld  %8lld  %8lld  %9lld  %8s  "
		    "%9s  %6lld  %6lld  %9s  %s\n",
		    json_is_true(json_object_get(row, "active")) ? '*' : ' ', wn,
		    str_of(row, "name", "?"), wg, str_of(row, "group", "?"), wt, state, since, wa,
		    str_of(row, "address", "?"), ws, str_of(row, "source", "-"), wl,
		    str_of(row, "link", "-"), int_of(row, "queries"), int_of(row, "answers"),
		    int_of(row, "timeouts"), int_of(row, "servfails"), srtt, prtt,
		    int_of(row, "probes"), int_of(row, "probe_failures"), hold,
		    str_of(row, "reason", ""));
	}
	puts("(* = taking the group's traffic now)");
}

static void print_bytes(long long n)
{
	if (n >= 1LL << 30)
		printf("%.1f GiB", (double)n / (double)(1LL << 30));
	else if (n >= 1LL << 20)
		printf("%.1f MiB", (double)n / (double)(1LL << 20));
	else if (n >= 1LL << 10)
		printf("%.1f KiB", (double)n / (double)(1LL << 10));
	else
		printf("%lld bytes", n);
}

/* "cache" and "cache flush" share the command name; the reply's shape tells them apart. */
static void print_cache(const json_t *d)
{
	if (json_is_object(d) && json_object_get(d, "entries_before")) {
		const char *name = json_string_value(json_object_get(d, "name"));
		if (name)
			printf("flushing %s and every name below it from the cache", name);
		else
			printf("flushing the whole cache (%lld entries)",
			       int_of(d, "entries_before"));
		puts("");
		return;
	}
	const json_t *cache = json_object_get(d, "cache");
	if (!json_is_object(cache)) {
		print_value(stdout, d ? d : json_null());
		putchar('\n');
		return;
	}
	long long bytes = int_of(cache, "bytes"), max = int_of(cache, "max_bytes");
	long long hits = int_of(cache, "hits"), misses = int_of(cache, "misses");
	printf("%lld entries, ", int_of(cache, "entries"));
	print_bytes(bytes);
	fputs(" of ", stdout);
	print_bytes(max);
	printf(" (%.0f%%)", max > 0 ? 100.0 * (double)bytes / (double)max : 0.0);
	if (hits + misses > 0)
		printf(", hit rate %.1f%%", 100.0 * (double)hits / (double)(hits + misses));
	putchar('\n');
	json_t *copy = json_deep_copy(d);
	json_t *c = json_object_get(copy, "cache");
	json_object_del(c, "entries");
	json_object_del(c, "bytes");
	json_object_del(c, "max_bytes");
	size_t kw = 0, vw = 0;
	counter_widths(copy, 0, &kw, &vw);
	print_counters(copy, 0, kw, vw);
	json_decref(copy);
}

/* ---- override ------------------------------------------------------------------------------ */

/* "in 29m 58s" for a rule's "expires_in_ms", "never" for null. Returns @p buf. */
static const char *expiry_text(const json_t *in_ms, char *buf, size_t size)
{
	if (!json_is_integer(in_ms)) {
		snprintf(buf, size, "never");
		return buf;
	}
	long long s = (json_integer_value(in_ms) + 999) / 1000;
	if (s >= 86400)
		snprintf(buf, size, "in %lldd %lldh", s / 86400, s % 86400 / 3600);
	else if (s >= 3600)
		snprintf(buf, size, "in %lldh %lldm", s / 3600, s % 3600 / 60);
	else if (s >= 60)
		snprintf(buf, size, "in %lldm %llds", s / 60, s % 60);
	else
		snprintf(buf, size, "in %llds", s);
	return buf;
}

static void print_overrides(const json_t *list)
{
	size_t i;
	const json_t *row;
	if (!json_is_array(list) || json_array_size(list) == 0) {
		puts("no overrides");
		return;
	}
	int wp = column_width(list, "pattern", "PATTERN");
	printf("%-*s  %-5s  %-6s  %-7s  %-5s  %s\n", wp, "PATTERN", "STATE", "SOURCE", "TARGETS",
	       "LINE", "EXPIRES");
	json_array_foreach(list, i, row)
	{
		const char *p = json_string_value(json_object_get(row, "pattern"));
		const char *st = json_string_value(json_object_get(row, "state"));
		const json_t *weight = json_object_get(row, "weight");
		char wbuf[24];
		if (!st && json_is_integer(weight)) {
			snprintf(wbuf, sizeof(wbuf), "w=%lld",
			         (long long)json_integer_value(weight));
			st = wbuf;
		}
		const char *src = json_string_value(json_object_get(row, "source"));
		const json_t *line = json_object_get(row, "line");
		const json_t *targets = json_object_get(row, "targets");
		printf("%-*s  %-5s  %-6s  %7lld  ", wp, p ? p : "?", st ? st : "?", src ? src : "?",
		       json_is_integer(targets) ? (long long)json_integer_value(targets) : 0LL);
		char lbuf[24] = "-", ebuf[64];
		if (json_is_integer(line))
			snprintf(lbuf, sizeof(lbuf), "%lld", (long long)json_integer_value(line));
		printf("%-5s  %s\n", lbuf,
		       expiry_text(json_object_get(row, "expires_in_ms"), ebuf, sizeof(ebuf)));
	}
}

static void print_override(const json_t *d)
{
	if (!json_is_object(d)) {
		print_value(stdout, d ? d : json_null());
		putchar('\n');
		return;
	}
	const char *action = json_string_value(json_object_get(d, "action"));
	const char *pattern = json_string_value(json_object_get(d, "pattern"));
	const json_t *targets = json_object_get(d, "targets");
	long long n = json_is_integer(targets) ? (long long)json_integer_value(targets) : 0;
	const json_t *weight = json_object_get(d, "weight");
	if (action && strcmp(action, "set") == 0 && json_is_integer(weight)) {
		printf("weight %lld: '%s' (%lld target%s)\n", (long long)json_integer_value(weight),
		       pattern ? pattern : "?", n, n == 1 ? "" : "s");
		if (n == 0)
			puts("warning: the pattern matches no target (see steerctl health)");
	} else if (action && strcmp(action, "set") == 0) {
		const char *st = json_string_value(json_object_get(d, "state"));
		printf("forced %s: '%s' (%lld target%s)\n", st ? st : "?", pattern ? pattern : "?",
		       n, n == 1 ? "" : "s");
		if (n == 0)
			puts("warning: the pattern matches no target (see steerctl health)");
	} else if (action) {
		/* "cleared": the admin rules dropped; older daemons only say "kind". */
		const json_t *cleared = json_object_get(d, "cleared");
		const char *kind = json_string_value(json_object_get(d, "kind"));
		const char *what =
		    kind && strcmp(kind, "weight") == 0 ? "weight rule" : "state rule";
		if (json_array_size(cleared) == 2)
			what = "state and weight rules";
		printf("cleared the %s of '%s' (%lld target%s)\n", what, pattern ? pattern : "?", n,
		       n == 1 ? "" : "s");
	}
	char ebuf[64];
	const json_t *in_ms = json_object_get(d, "expires_in_ms");
	if (action && strcmp(action, "set") == 0 && json_is_integer(in_ms))
		printf("expires %s\n", expiry_text(in_ms, ebuf, sizeof(ebuf)));
	const json_t *sf = json_object_get(d, "state_file");
	if (action)
		printf("%s\n", json_is_string(sf) ? "saved to the state file"
		                                  : "not persisted (no gslb.state-file): lasts "
		                                    "until steerd restarts");
	else
		printf("state file: %s\n", json_is_string(sf) ? json_string_value(sf)
		                                              : "none (admin overrides last "
		                                                "until steerd restarts)");
	print_overrides(json_object_get(d, "overrides"));
}

/* ---- maps ---------------------------------------------------------------------------------- */

static void print_maps(const json_t *d)
{
	size_t i, j;
	const json_t *m, *e;
	json_array_foreach(d, i, m)
	{
		const json_t *min = json_object_get(m, "min_prefix_length");
		printf("%smap %s: min-prefix-length /", i ? "\n" : "",
		       json_string_value(json_object_get(m, "name")));
		print_value(stdout, json_array_get(min, 0));
		fputs(" /", stdout);
		print_value(stdout, json_array_get(min, 1));
		fputs(", max-shrink ", stdout);
		print_value(stdout, json_object_get(m, "max_shrink_percent"));
		fputs("%\n", stdout);
		json_array_foreach(json_object_get(m, "geoip"), j, e)
		{
			printf("  geoip %s\n", json_string_value(e));
		}
		const json_t *nets = json_object_get(m, "nets");
		if (json_array_size(nets) == 0)
			continue;
		int wf = (int)strlen("FILE");
		json_array_foreach(nets, j, e)
		{
			const char *f = json_string_value(json_object_get(e, "file"));
			size_t len = f ? strlen(f) : strlen("(inline cidr)");
			if ((int)len > wf)
				wf = (int)len;
		}
		printf("  %-*s  %6s  %6s  %6s  %s\n", wf, "FILE", "LINE", "IPV4", "IPV6", "LOADED");
		json_array_foreach(nets, j, e)
		{
			const char *f = json_string_value(json_object_get(e, "file"));
			printf("  %-*s  %6lld  %6lld  %6lld  ", wf, f ? f : "(inline cidr)",
			       (long long)json_integer_value(json_object_get(e, "line")),
			       (long long)json_integer_value(json_object_get(e, "ipv4")),
			       (long long)json_integer_value(json_object_get(e, "ipv6")));
			print_time(stdout, json_object_get(e, "loaded_at"));
			if (json_is_true(json_object_get(e, "allow_short_prefixes")))
				fputs("  allow-short-prefixes", stdout);
			if (json_is_true(json_object_get(e, "allow_shrink")))
				fputs("  allow-shrink", stdout);
			putchar('\n');
		}
	}
}

/* ---- cluster -------------------------------------------------------------------------------- */

static void print_value_line(const json_t *data);

static void print_epoch(const json_t *v)
{
	if (json_is_number(v)) {
		json_t *whole = json_integer((json_int_t)json_number_value(v));
		print_time(stdout, whole);
		json_decref(whole);
	} else {
		fputs("never", stdout);
	}
}

static void print_checks(const json_t *checks)
{
	size_t i;
	const json_t *c;
	json_array_foreach(checks, i, c)
	{
		bool enabled = json_is_true(json_object_get(c, "enabled"));
		const char *verdict = !enabled                                 ? "off"
		                      : json_is_true(json_object_get(c, "ok")) ? "ok"
		                                                               : "FAIL";
		printf("  %-10s %-5s %s\n", str_of(c, "name", "?"), verdict,
		       enabled ? str_of(c, "detail", "") : "");
	}
}

/* The answer check's zones, in turn, those it skips marked with why; without any zone to ask
 * it asks for id.server. */
static void print_check_zones(const json_t *sc)
{
	const json_t *zones = json_object_get(sc, "zones");
	const json_t *skipped = json_object_get(sc, "zones_skipped");
	size_t asked = 0, i;
	const json_t *z;
	printf("  %-10s ", "zones");
	json_array_foreach(zones, i, z)
	{
		const char *name = json_string_value(z);
		const json_t *why = json_object_get(skipped, name ? name : "");
		printf("%s%s", i ? ", " : "", name ? name : "?");
		if (why != NULL)
			printf(" (skipped: %s)", json_string_value(why));
		else
			asked++;
	}
	if (json_array_size(zones) == 0)
		fputs("none (id.server)", stdout);
	else if (asked == 0)
		fputs("; none to ask (id.server)", stdout);
	putchar('\n');
}

static void print_cluster_status(const json_t *d)
{
	const json_t *sc = json_object_get(d, "self_check");
	const json_t *drain = json_object_get(d, "drain");
	const json_t *keeper = json_object_get(d, "keeper");
	printf("%-13s%s\n%-13s%s\n%-13s", "node", str_of(d, "node_id", "?"), "method",
	       str_of(d, "method", "?"), "addresses");
	print_list(json_object_get(d, "service_addresses"));
	printf(" on %s\n%-13s", str_of(d, "interface", "-"), "unicast");
	print_list(json_object_get(d, "unicast"));
	printf("\n%-13s%s (%s in force)\n", "state", str_of(d, "state", "?"),
	       json_is_true(json_object_get(d, "announced")) ? "announced" : "withdrawn");
	printf("%-13s", "last change");
	print_epoch(json_object_get(d, "last_transition"));
	printf(": %s\n%-13s%lld\n", str_of(d, "reason", ""), "transitions",
	       int_of(d, "transitions"));
	printf("%-13severy %lld ms: %lld good rounds in a row (rise %lld, fall %lld), hold-down "
	       "%.1f s left\n",
	       "self-check", int_of(sc, "interval_ms"), int_of(sc, "good_rounds"),
	       int_of(sc, "rise"), int_of(sc, "fall"),
	       json_number_value(json_object_get(sc, "hold_down_left_s")));
	print_checks(json_object_get(sc, "checks"));
	print_check_zones(sc);
	printf("%-13s%s", "drain", str_of(drain, "state", "none"));
	if (strcmp(str_of(drain, "state", "none"), "none") != 0)
		printf(" (quiet for %.1f s%s)",
		       json_number_value(json_object_get(drain, "quiet_for_s")),
		       json_is_true(json_object_get(drain, "timed_out")) ? ", timed out" : "");
	printf("\n%-13spid %lld, %s: %s\n", "keeper", int_of(keeper, "pid"),
	       json_is_true(json_object_get(keeper, "alive")) ? "alive" : "GONE",
	       str_of(keeper, "message", ""));
	if (json_is_string(json_object_get(d, "vrrp_state")))
		printf("%-13s%s\n", "vrrp", str_of(d, "vrrp_state", ""));
}

/* One printer for the cluster rows; the reply's members tell which one answered. */
static void print_cluster(const json_t *d)
{
	if (json_is_string(json_object_get(d, "config")))
		fputs(json_string_value(json_object_get(d, "config")), stdout);
	else if (json_object_get(d, "node_id") != NULL)
		print_cluster_status(d);
	else if (json_object_get(d, "healthy") != NULL)
		printf("%s: %s (%s)\n",
		       json_is_true(json_object_get(d, "healthy")) ? "healthy" : "unhealthy",
		       str_of(d, "state", "?"), str_of(d, "reason", ""));
	else
		print_value_line(d);
}

static void print_drain(const json_t *d)
{
	if (json_object_get(d, "timeout_ms") != NULL)
		printf("draining: withdrawn; waiting up to %lld ms for %lld ms without queries\n",
		       int_of(d, "timeout_ms"), int_of(d, "quiet_ms"));
	else
		printf("%s\n", str_of(d, "state", "?"));
}

static void print_events(const json_t *d)
{
	const json_t *rows = json_object_get(d, "events"), *row;
	size_t i;
	if (!json_is_array(rows)) {
		print_value_line(d);
		return;
	}
	if (json_array_size(rows) == 0)
		puts("no state changes");
	json_array_foreach(rows, i, row)
	{
		double t = json_number_value(json_object_get(row, "time"));
		json_t *whole = json_integer((json_int_t)t);
		printf("%6lld  ", int_of(row, "seq"));
		print_time(stdout, whole);
		json_decref(whole);
		printf("  %-10s %s  %s -> %s  %s\n", str_of(row, "kind", "?"),
		       str_of(row, "subject", "?"), str_of(row, "from", "?"),
		       str_of(row, "to", "?"), str_of(row, "reason", ""));
	}
}

/* ---- paths ------------------------------------------------------------------------------------
 */

static void print_path_row(const json_t *row)
{
	size_t i;
	const json_t *c;
	printf("prefix %s  best %s", str_of(row, "prefix", "?"), str_of(row, "best", "none"));
	if (json_object_get(row, "challenger"))
		printf("  challenger %s (%lld round(s) won)", str_of(row, "challenger", "?"),
		       int_of(row, "challenger_rounds"));
	putchar('\n');
	const json_t *cols = json_object_get(row, "columns");
	int wd = column_width(cols, "datacenter", "DATACENTER");
	printf("  %-*s  %9s  %5s  %4s  %6s\n", wd, "DATACENTER", "RTT", "LOSS", "HOPS", "AGE");
	json_array_foreach(cols, i, c)
	{
		if (json_is_true(json_object_get(c, "empty"))) {
			printf("  %-*s  %9s  %5s  %4s  %6s\n", wd, str_of(c, "datacenter", "?"),
			       "-", "-", "-", "-");
			continue;
		}
		char rtt[24], loss[16], hops[16], age[24];
		const json_t *r = json_object_get(c, "rtt_ms");
		if (json_is_number(r))
			snprintf(rtt, sizeof(rtt), "%.1fms", json_number_value(r));
		else
			snprintf(rtt, sizeof(rtt), "no reply");
		snprintf(loss, sizeof(loss), "%lld%%", int_of(c, "loss"));
		snprintf(hops, sizeof(hops), "%lld", int_of(c, "hops"));
		snprintf(age, sizeof(age), "%llds", int_of(c, "age_s"));
		printf("  %-*s  %9s  %5s  %4s  %6s\n", wd, str_of(c, "datacenter", "?"), rtt, loss,
		       int_of(c, "hops") ? hops : "-", age);
	}
}

static void print_paths(const json_t *d)
{
	size_t i;
	const json_t *a;
	const json_t *agents = json_object_get(d, "agents");
	if (!json_is_object(d) || !json_is_array(agents)) {
		print_value(stdout, d ? d : json_null());
		putchar('\n');
		return;
	}
	if (!json_is_true(json_object_get(d, "enabled")))
		puts("measured paths are off (no paths: section)");
	int wd = column_width(agents, "datacenter", "DATACENTER");
	int wu = column_width(agents, "url", "URL");
	if (json_array_size(agents) > 0)
		printf("%-*s  %-*s  %-7s  %8s  %8s  %s\n", wd, "DATACENTER", wu, "URL", "STATE",
		       "ROWS", "AGE", "ERROR");
	json_array_foreach(agents, i, a)
	{
		char rows[24] = "-", age[24] = "-";
		if (json_is_integer(json_object_get(a, "rows"))) {
			snprintf(rows, sizeof(rows), "%lld", int_of(a, "rows"));
			snprintf(age, sizeof(age), "%llds", int_of(a, "table_age_s"));
		}
		printf("%-*s  %-*s  %-7s  %8s  %8s  %s\n", wd, str_of(a, "datacenter", "?"), wu,
		       str_of(a, "url", "?"), str_of(a, "state", "?"), rows, age,
		       str_of(a, "error", ""));
	}
	const json_t *t = json_object_get(d, "table");
	if (json_is_object(t))
		printf("table: %lld IPv4 /%lld and %lld IPv6 /%lld rows, %lld cells, %lld bytes, "
		       "built in %.3fs, %lld held by hysteresis\n",
		       int_of(t, "rows4"), int_of(t, "ipv4_prefix"), int_of(t, "rows6"),
		       int_of(t, "ipv6_prefix"), int_of(t, "cells"), int_of(t, "bytes"),
		       json_number_value(json_object_get(t, "build_s")), int_of(t, "sticky_held"));
	else
		puts("table: none yet");
	const json_t *dm = json_object_get(d, "demand");
	printf("demand: %lld prefixes (%lld reports dropped)\n", int_of(dm, "prefixes"),
	       int_of(dm, "dropped"));
	if (!json_object_get(d, "query"))
		return;
	const json_t *row = json_object_get(d, "row");
	if (json_is_object(row))
		print_path_row(row);
	else
		printf("%s: not in the table (the fallback policy decides)\n",
		       str_of(d, "query", "?"));
	const json_t *pd = json_object_get(d, "prefix_demand");
	if (json_is_object(pd))
		printf("demand: volume %lld, probe %s%s%s\n", int_of(pd, "volume"),
		       str_of(pd, "probe", "?"),
		       json_is_true(json_object_get(pd, "ecs")) ? ", ECS" : "",
		       json_is_true(json_object_get(pd, "urgent")) ? ", urgent" : "");
}

/* ---- main ---------------------------------------------------------------------------------- */

/* How each command's reply is printed; names, arguments and help come from ctl's table. */
static const struct {
	const char *name;
	print_cb print;
} printers[] = {
    {"status", print_status},       {"reload", print_reload},     {"zones", print_zones},
    {"stats", print_stats},         {"explain", print_explain},   {"health", print_health},
    {"monitors", print_monitors},   {"override", print_override}, {"maps", print_maps},
    {"upstreams", print_upstreams}, {"cache", print_cache},       {"cluster", print_cluster},
    {"drain", print_drain},         {"undrain", print_drain},     {"events", print_events},
    {"paths", print_paths},
};

/* A command without its own printer (one the daemon has and this steerctl does not know). */
static void print_value_line(const json_t *data)
{
	print_value(stdout, data);
	putchar('\n');
}

static print_cb printer_of(const char *name)
{
	for (size_t i = 0; i < sizeof(printers) / sizeof(printers[0]); i++) {
		if (strcmp(printers[i].name, name) == 0)
			return printers[i].print;
	}
	return print_value_line;
}

static void usage(FILE *out)
{
	size_t n;
	const ctl_command_t *table = ctl_command_table(&n);
	fprintf(out, "usage: steerctl [-s SOCKET] [--json] [-t SECONDS] COMMAND [ARGS]\n\n"
	             "Commands:\n");
	for (size_t i = 0; i < n; i++) {
		char head[64];
		snprintf(head, sizeof(head), "%s%s%s%s%s", table[i].name, table[i].sub ? " " : "",
		         table[i].sub ? table[i].sub : "", table[i].args[0] ? " " : "",
		         table[i].args);
		if (strlen(head) > 32)
			fprintf(out, "  %s\n  %-32s %s\n", head, "", table[i].summary);
		else
			fprintf(out, "  %-32s %s\n", head, table[i].summary);
	}
	fprintf(
	    out,
	    "  %s\n  %-32s the same decision computed from a config file, no daemon\n"
	    "\nPATTERN is a glob over target names (service/<name>/<datacenter>/<address>) or,\n"
	    "for monitors, over check keys and monitor names; for upstreams, over upstream\n"
	    "names.\n"
	    "\ndrain waits until the node is drained (--no-wait: return at once); it exits 1\n"
	    "when the drain ended by its timeout. cluster health exits 1 when this node should\n"
	    "not be announced (a keepalived vrrp_script).\n",
	    "explain --config FILE NAME CLIENT-IP [ECS-SUBNET]", "");
	char sock[CTL_SOCKET_PATH_MAX];
	fprintf(out,
	        "\nOptions:\n"
	        "  -s, --socket PATH    control socket (default $STEER_CONTROL_SOCKET or %s)\n"
	        "  -j, --json           print the daemon's reply as JSON\n"
	        "  -t, --timeout SECS   give up after SECS seconds (default %d)\n"
	        "  -h, --help           this text\n"
	        "  -V, --version        print the version\n"
	        "\nExit status: 0 ok, 1 the command failed, 2 usage or connection error.\n",
	        ctl_default_socket(sock, sizeof(sock)), DEFAULT_TIMEOUT_S);
}

typedef struct {
	const char *socket;
	bool json;
	int timeout_ms;
} options_t;

/* Returns the index of the command in argv, or -1 (exit status set in *status). */
static int parse_options(int argc, char **argv, options_t *opt, int *status)
{
	static const struct option longopts[] = {
	    {"socket", required_argument, NULL, 's'},  {"json", no_argument, NULL, 'j'},
	    {"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0},
	};
	int c;
	char *end;
	/* "+": options end at the command, so its arguments are never taken for ours. */
	while ((c = getopt_long(argc, argv, "+s:jt:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			opt->socket = optarg;
			break;
		case 'j':
			opt->json = true;
			break;
		case 't': {
			long secs = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || secs <= 0 || secs > 86400) {
				fprintf(stderr,
				        "steerctl: invalid timeout '%s' (1 to 86400 seconds)\n",
				        optarg);
				*status = EXIT_USAGE;
				return -1;
			}
			opt->timeout_ms = (int)secs * 1000;
			break;
		}
		case 'h':
			usage(stdout);
			*status = EXIT_OK;
			return -1;
		case 'V':
			printf("steerctl %s\n", STEER_VERSION);
			*status = EXIT_OK;
			return -1;
		default:
			usage(stderr);
			*status = EXIT_USAGE;
			return -1;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		*status = EXIT_USAGE;
		return -1;
	}
	return optind;
}

static const char *connect_hint(int ret)
{
	if (ret == STEER_ENOENT || ret == -ECONNREFUSED)
		return " \xe2\x80\x94 is steerd running?";
	if (ret == STEER_EACCES || ret == -EPERM)
		return " \xe2\x80\x94 run as root or as a member of steerd's group";
	return "";
}

/* explain --config FILE NAME CLIENT-IP [ECS]: the decision computed without a daemon. */
static int explain_offline(const char *path, char **argv, int argc, const options_t *opt)
{
	char err[4096];
	conf_t *conf = NULL;
	gslb_view_t *view = NULL;
	int ret = conf_load_file(path, &conf, err, sizeof(err));
	if (ret == 0)
		ret = conf_validate(conf, err, sizeof(err));
	if (ret == 0) {
		err[0] = '\0';
		steer_warnings_t warnings = {0};
		ret = gslb_view_build(conf, NULL, &view, &warnings, err, sizeof(err));
		for (size_t i = 0; i < warnings.n; i++)
			fprintf(stderr, "warning: %s\n", warnings.msg[i]);
		steer_warnings_clear(&warnings);
		if (ret != 0 && err[0] == '\0')
			snprintf(err, sizeof(err), "%s: %s", path, steer_strerror(ret));
	}
	if (ret != 0) {
		fprintf(stderr, "steerctl: %s\n", err);
		conf_free(conf);
		return EXIT_CMD;
	}
	char *text = malloc(EXPLAIN_MAX);
	if (text == NULL) {
		fprintf(stderr, "steerctl: out of memory\n");
		gslb_view_free(view);
		conf_free(conf);
		return EXIT_CMD;
	}
	const char *ecs = argc == 3 ? argv[2] : NULL;
	ret = gslb_view_explain(view, argv[0], argv[1], ecs, text, EXPLAIN_MAX);
	json_t *reply;
	if (ret != 0)
		reply = json_pack("{s:b, s:s}", "ok", 0, "error", text);
	else
		reply = json_pack("{s:b, s:{s:s, s:s, s:o, s:s}}", "ok", 1, "data", "name", argv[0],
		                  "client", argv[1], "ecs", ecs ? json_string(ecs) : json_null(),
		                  "text", text);
	free(text);
	gslb_view_free(view);
	conf_free(conf);
	int status;
	if (opt->json) {
		char *dump = json_dumps(reply, JSON_INDENT(2));
		puts(dump ? dump : "{}");
		free(dump);
		status = ret == 0 ? EXIT_OK : EXIT_CMD;
	} else if (ret != 0) {
		fprintf(stderr, "steerctl: explain failed: %s\n",
		        json_string_value(json_object_get(reply, "error")));
		status = EXIT_CMD;
	} else {
		print_explain(json_object_get(reply, "data"));
		status = EXIT_OK;
	}
	json_decref(reply);
	return status;
}

static int show_reply(const json_t *reply, const options_t *opt, const char *cmd)
{
	bool ok = json_is_true(json_object_get(reply, "ok"));
	if (opt->json) {
		char *text = json_dumps(reply, JSON_INDENT(2));
		puts(text ? text : "{}");
		free(text);
		return ok ? EXIT_OK : EXIT_CMD;
	}
	if (!ok) {
		const json_t *err = json_object_get(reply, "error");
		fprintf(stderr, "steerctl: %s failed: %s\n", cmd,
		        json_is_string(err) ? json_string_value(err) : "unknown error");
		return EXIT_CMD;
	}
	const json_t *data = json_object_get(reply, "data");
	printer_of(cmd)(data ? data : json_null());
	size_t i;
	const json_t *w;
	json_array_foreach(json_object_get(data, "warnings"), i, w)
	{
		fprintf(stderr, "warning: %s\n", json_string_value(w));
	}
	return EXIT_OK;
}

/* Poll `cluster` until the drain is over. Exit 0 when it ended quiet, 1 when by timeout or
 * when someone ended it (undrain), 2 when the daemon stopped answering. */
static int drain_wait(const options_t *opt, long long timeout_ms)
{
	struct timespec step = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
	long long waited = 0, limit = timeout_ms + 5000;
	char err[1024];
	for (; waited <= limit; waited += 100) {
		json_t *reply = NULL;
		json_t *args = json_array();
		int ret = ctl_client_call(opt->socket, "cluster", args, opt->timeout_ms, &reply,
		                          err, sizeof(err));
		json_decref(args);
		if (ret != 0) {
			fprintf(stderr, "steerctl: drain: %s\n", err);
			return EXIT_USAGE;
		}
		const json_t *d = json_object_get(reply, "data");
		const json_t *drain = json_object_get(d, "drain");
		char state[32];
		snprintf(state, sizeof(state), "%s", str_of(drain, "state", "none"));
		bool timed_out = json_is_true(json_object_get(drain, "timed_out"));
		double quiet = json_number_value(json_object_get(drain, "quiet_for_s"));
		json_decref(reply);
		if (strcmp(state, "drained") == 0) {
			if (timed_out)
				printf("drain timed out: queries still arrive; the node stays "
				       "withdrawn\n");
			else
				printf("drained: no queries for %.1f s; safe to stop\n", quiet);
			return timed_out ? EXIT_CMD : EXIT_OK;
		}
		if (strcmp(state, "draining") != 0) {
			fprintf(stderr, "steerctl: drain ended before it was done (state %s)\n",
			        state);
			return EXIT_CMD;
		}
		nanosleep(&step, NULL);
	}
	fprintf(stderr, "steerctl: drain: the daemon did not finish within %lld ms\n", limit);
	return EXIT_CMD;
}

/* `cluster health` answers in its exit status too: 1 when the node should not be announced. */
static int health_status(const json_t *reply, int status)
{
	const json_t *d = json_object_get(reply, "data");
	if (status == EXIT_OK && json_is_false(json_object_get(d, "healthy")))
		return EXIT_CMD;
	return status;
}

int main(int argc, char **argv)
{
	options_t opt = {.socket = getenv("STEER_CONTROL_SOCKET"),
	                 .timeout_ms = DEFAULT_TIMEOUT_S * 1000};
	int status = EXIT_USAGE;
	char err[1024];
	json_t *reply = NULL;

	/* Hidden: the bash completion asks for the words that may come next. */
	if (argc >= 2 && strcmp(argv[1], "--complete") == 0)
		return steerctl_complete((const char *const *)argv + 2, argc - 2);

	char default_socket[CTL_SOCKET_PATH_MAX];
	if (!opt.socket || !*opt.socket)
		opt.socket = ctl_default_socket(default_socket, sizeof(default_socket));
	int first = parse_options(argc, argv, &opt, &status);
	if (first < 0)
		return status;
	const char *cmd = argv[first];
	int nargs = argc - first - 1;
	/* `drain --no-wait`: steerctl's own option, not sent to the daemon. */
	bool drain = strcmp(cmd, "drain") == 0, drain_no_wait = false;
	for (int i = first + 1; drain && i < argc; i++) {
		if (strcmp(argv[i], "--no-wait") == 0) {
			drain_no_wait = true;
			memmove(&argv[i], &argv[i + 1], sizeof(*argv) * (size_t)(argc - i));
			argc--;
			nargs--;
			break;
		}
	}
	bool offline =
	    strcmp(cmd, "explain") == 0 && nargs >= 1 && strcmp(argv[first + 1], "--config") == 0;
	if (offline) {
		if (nargs < 2) {
			fprintf(stderr, "steerctl: explain --config needs a FILE\n");
			return EXIT_USAGE;
		}
		nargs -= 2;
		if (nargs < 2 || nargs > 3) {
			fprintf(stderr, "steerctl: usage: explain --config FILE NAME CLIENT-IP "
			                "[ECS-SUBNET]\n");
			return EXIT_USAGE;
		}
		return explain_offline(argv[first + 2], argv + first + 3, nargs, &opt);
	}
	/* The daemon checks again; checking here gives usage errors their exit status. */
	if (ctl_command_match(cmd, (const char *const *)argv + first + 1, (size_t)nargs, err,
	                      sizeof(err)) == NULL) {
		fprintf(stderr, "steerctl: %s%s\n", err,
		        strncmp(err, "unknown command", 15) == 0
		            ? " \xe2\x80\x94 see steerctl --help"
		            : "");
		return EXIT_USAGE;
	}
	json_t *args = json_array();
	for (int i = 0; i < nargs; i++)
		json_array_append_new(args, json_string(argv[first + 1 + i]));
	int ret = ctl_client_call(opt.socket, cmd, args, opt.timeout_ms, &reply, err, sizeof(err));
	json_decref(args);
	if (ret != 0) {
		fprintf(stderr, "steerctl: %s%s\n", err, connect_hint(ret));
		return EXIT_USAGE;
	}
	status = show_reply(reply, &opt, cmd);
	if (strcmp(cmd, "cluster") == 0 && nargs == 1 && strcmp(argv[first + 1], "health") == 0)
		status = health_status(reply, status);
	if (drain && status == EXIT_OK && !drain_no_wait) {
		long long timeout = int_of(json_object_get(reply, "data"), "timeout_ms");
		fflush(stdout);
		status = drain_wait(&opt, timeout);
	}
	json_decref(reply);
	return status;
}
