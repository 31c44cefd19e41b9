/*
 * The command table and its dispatcher (see commands.h). Handlers turn checked string
 * arguments into one backend call; they hold no state and know no transport.
 */
#include "ctl/commands.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"

/* Arguments a request may carry, a row's sub-command included: "cluster bird-config" takes
 * eight options after its sub-command. ctl_dispatch() refuses a row that would take more than
 * it read, so a longer row is an error, never a NULL argument. */
#define CTL_MAX_ARGS 9

static int cmd_status(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                      char *err, size_t errlen)
{
	(void)argv;
	(void)argc;
	return b->status(b->ctx, data, err, errlen);
}

static int cmd_zones(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                     char *err, size_t errlen)
{
	(void)argv;
	(void)argc;
	return b->zones(b->ctx, data, err, errlen);
}

static int cmd_reload(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                      char *err, size_t errlen)
{
	bool force = argc > 0;
	if (force && strcmp(argv[0], "--force") != 0) {
		snprintf(err, errlen, "reload: the only option is --force, not '%s'", argv[0]);
		return STEER_EINVAL;
	}
	return b->reload(b->ctx, force, data, err, errlen);
}

static int cmd_zone_refresh(const ctl_backend_t *b, const char *const *argv, size_t argc,
                            json_t **data, char *err, size_t errlen)
{
	(void)argc;
	return b->zone_refresh(b->ctx, argv[0], false, data, err, errlen);
}

static int cmd_zone_retransfer(const ctl_backend_t *b, const char *const *argv, size_t argc,
                               json_t **data, char *err, size_t errlen)
{
	(void)argc;
	return b->zone_refresh(b->ctx, argv[0], true, data, err, errlen);
}

static int cmd_maps(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                    char *err, size_t errlen)
{
	(void)argv;
	(void)argc;
	return b->maps(b->ctx, data, err, errlen);
}

static int cmd_stats(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                     char *err, size_t errlen)
{
	(void)argv;
	(void)argc;
	return b->stats(b->ctx, data, err, errlen);
}

static int cmd_explain(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                       char *err, size_t errlen)
{
	return b->explain(b->ctx, argv[0], argv[1], argc > 2 ? argv[2] : NULL, data, err, errlen);
}

static int cmd_health(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                      char *err, size_t errlen)
{
	return b->health(b->ctx, argc > 0 ? argv[0] : NULL, data, err, errlen);
}

static int cmd_monitors(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                        char *err, size_t errlen)
{
	return b->monitors(b->ctx, argc > 0 ? argv[0] : NULL, data, err, errlen);
}

static int cmd_upstreams(const ctl_backend_t *b, const char *const *argv, size_t argc,
                         json_t **data, char *err, size_t errlen)
{
	return b->upstreams(b->ctx, argc > 0 ? argv[0] : NULL, data, err, errlen);
}

static int cmd_paths(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                     char *err, size_t errlen)
{
	if (!b->paths) {
		snprintf(err, errlen, "paths: not supported by this server");
		return STEER_EINVAL;
	}
	return b->paths(b->ctx, argc > 0 ? argv[0] : NULL, data, err, errlen);
}

static int cmd_cache(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                     char *err, size_t errlen)
{
	(void)argv;
	(void)argc;
	return b->cache(b->ctx, data, err, errlen);
}

/* "cache flush" without a name empties the cache; with one, drops that name's subtree. */
static int cmd_cache_flush(const ctl_backend_t *b, const char *const *argv, size_t argc,
                           json_t **data, char *err, size_t errlen)
{
	if (argc > 0 && argv[0][0] == '\0') {
		snprintf(err, errlen, "cache flush: the name must not be empty (no NAME: all)");
		return STEER_EINVAL;
	}
	return b->cache_flush(b->ctx, argc > 0 ? argv[0] : NULL, data, err, errlen);
}

static int cmd_cluster(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                       char *err, size_t errlen)
{
	(void)argv;
	(void)argc;
	return b->cluster(b->ctx, data, err, errlen);
}

static int cmd_cluster_health(const ctl_backend_t *b, const char *const *argv, size_t argc,
                              json_t **data, char *err, size_t errlen)
{
	(void)argv;
	(void)argc;
	return b->cluster_health(b->ctx, data, err, errlen);
}

static int cmd_cluster_bird(const ctl_backend_t *b, const char *const *argv, size_t argc,
                            json_t **data, char *err, size_t errlen)
{
	return b->cluster_config(b->ctx, "bird", argv, argc, data, err, errlen);
}

static int cmd_cluster_frr(const ctl_backend_t *b, const char *const *argv, size_t argc,
                           json_t **data, char *err, size_t errlen)
{
	return b->cluster_config(b->ctx, "frr", argv, argc, data, err, errlen);
}

static int cmd_cluster_notify(const ctl_backend_t *b, const char *const *argv, size_t argc,
                              json_t **data, char *err, size_t errlen)
{
	(void)argc;
	static const char *const states[] = {"master", "backup", "fault", "stop"};
	for (size_t i = 0; i < STEER_ARRAY_LEN(states); i++)
		if (strcasecmp(argv[0], states[i]) == 0)
			return b->cluster_notify(b->ctx, states[i], data, err, errlen);
	snprintf(err, errlen,
	         "cluster notify: state must be master, backup, fault or stop, not '%s'", argv[0]);
	return STEER_EINVAL;
}

/* A duration with its unit, as in the configuration: "500ms", "30s", "2m", "1h", "1d". */
static int parse_duration_ms(const char *text, unsigned *out)
{
	char *end = NULL;
	if (!isdigit((unsigned char)text[0]))
		return STEER_EINVAL;
	unsigned long long v = strtoull(text, &end, 10);
	unsigned long long scale;
	if (strcmp(end, "ms") == 0)
		scale = 1;
	else if (strcmp(end, "s") == 0)
		scale = 1000;
	else if (strcmp(end, "m") == 0)
		scale = 60000;
	else if (strcmp(end, "h") == 0)
		scale = 3600000;
	else if (strcmp(end, "d") == 0)
		scale = 86400000;
	else
		return STEER_EINVAL;
	if (v == 0 || v > UINT32_MAX / scale)
		return STEER_ERANGE;
	*out = (unsigned)(v * scale);
	return 0;
}

static int cmd_drain(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                     char *err, size_t errlen)
{
	unsigned timeout = 0;
	if (argc > 0 && parse_duration_ms(argv[0], &timeout) != 0) {
		snprintf(err, errlen,
		         "drain: TIMEOUT must be a duration like 500ms, 30s or 2m, not '%s'",
		         argv[0]);
		return STEER_EINVAL;
	}
	return b->drain(b->ctx, timeout, data, err, errlen);
}

static int cmd_undrain(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                       char *err, size_t errlen)
{
	(void)argv;
	(void)argc;
	return b->undrain(b->ctx, data, err, errlen);
}

/* A decimal number without sign or junk, up to @p max. */
static bool parse_count(const char *text, uint64_t max, uint64_t *out)
{
	char *end = NULL;
	if (!isdigit((unsigned char)text[0]))
		return false;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno != 0 || *end != '\0' || v > max)
		return false;
	*out = v;
	return true;
}

/* "events [N] [since=SEQ]", the two in either order, each at most once. */
static int cmd_events(const ctl_backend_t *b, const char *const *argv, size_t argc, json_t **data,
                      char *err, size_t errlen)
{
	uint64_t since = 0, max = 0;
	bool has_since = false, has_max = false;
	for (size_t i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (strncmp(a, "since=", 6) == 0 && !has_since) {
			has_since = parse_count(a + 6, UINT64_MAX, &since);
			if (!has_since) {
				snprintf(err, errlen,
				         "events: since= wants a sequence number, not '%s'", a + 6);
				return STEER_EINVAL;
			}
		} else if (!has_max && parse_count(a, SIZE_MAX, &max) && max > 0) {
			has_max = true;
		} else {
			snprintf(err, errlen,
			         "events: want [N] [since=SEQ] with N above 0, not '%s'", a);
			return STEER_EINVAL;
		}
	}
	return b->events(b->ctx, since, (size_t)max, data, err, errlen);
}

static int cmd_override_list(const ctl_backend_t *b, const char *const *argv, size_t argc,
                             json_t **data, char *err, size_t errlen)
{
	(void)argv;
	(void)argc;
	return b->override_list(b->ctx, data, err, errlen);
}

/* The optional FOR of "override set" and "override weight": how long the rule lasts. */
static int parse_for(const char *cmd, const char *const *argv, size_t argc, size_t at,
                     unsigned *for_ms, char *err, size_t errlen)
{
	*for_ms = 0;
	if (argc <= at)
		return 0;
	if (parse_duration_ms(argv[at], for_ms) != 0) {
		snprintf(
		    err, errlen,
		    "%s: FOR must be a duration like 90s, 30m, 2h or 1d (at most 49 days), not "
		    "'%s'",
		    cmd, argv[at]);
		return STEER_EINVAL;
	}
	return 0;
}

static int cmd_override_set(const ctl_backend_t *b, const char *const *argv, size_t argc,
                            json_t **data, char *err, size_t errlen)
{
	ctl_override_req_t req = {.action = CTL_OVERRIDE_SET,
	                          .kind = CTL_OVERRIDE_STATE,
	                          .pattern = argv[0],
	                          .down = strcasecmp(argv[1], "down") == 0};
	if (!req.down && strcasecmp(argv[1], "up") != 0) {
		snprintf(err, errlen, "override set: state must be 'up' or 'down', not '%s'",
		         argv[1]);
		return STEER_EINVAL;
	}
	if (parse_for("override set", argv, argc, 2, &req.for_ms, err, errlen) != 0)
		return STEER_EINVAL;
	return b->override(b->ctx, &req, data, err, errlen);
}

/* "override clear PATTERN" drops what the admin set on PATTERN, whatever its kind. */
static int cmd_override_clear(const ctl_backend_t *b, const char *const *argv, size_t argc,
                              json_t **data, char *err, size_t errlen)
{
	(void)argc;
	ctl_override_req_t req = {
	    .action = CTL_OVERRIDE_CLEAR, .kind = CTL_OVERRIDE_ANY, .pattern = argv[0]};
	return b->override(b->ctx, &req, data, err, errlen);
}

/* "override weight PATTERN default" is the clear of the weight rule alone. */
static int cmd_override_weight(const ctl_backend_t *b, const char *const *argv, size_t argc,
                               json_t **data, char *err, size_t errlen)
{
	const char *value = argv[1];
	ctl_override_req_t req = {
	    .action = CTL_OVERRIDE_SET, .kind = CTL_OVERRIDE_WEIGHT, .pattern = argv[0]};
	if (strcmp(value, "default") == 0) {
		if (argc > 2) {
			snprintf(err, errlen,
			         "override weight: 'default' drops the rule, so "
			         "FOR makes no sense with it");
			return STEER_EINVAL;
		}
		req.action = CTL_OVERRIDE_CLEAR;
		return b->override(b->ctx, &req, data, err, errlen);
	}
	char *end = NULL;
	unsigned long w = strtoul(value, &end, 10);
	if (!*value || *end || !isdigit((unsigned char)*value) || w > UINT16_MAX) {
		snprintf(err, errlen, "override weight: want 0..65535 or 'default', not '%s'",
		         value);
		return STEER_EINVAL;
	}
	req.weight = (uint16_t)w;
	if (parse_for("override weight", argv, argc, 2, &req.for_ms, err, errlen) != 0)
		return STEER_EINVAL;
	return b->override(b->ctx, &req, data, err, errlen);
}

static const ctl_command_t commands[] = {
    {"status", NULL, "", "daemon version, uptime, threads, listen addresses, last reload", 0, 0,
     false, cmd_status},
    {"reload", NULL, "[--force]",
     "re-read the configuration and changed zone files (--force: accept nets files that "
     "shrank beyond max-shrink or became empty)",
     0, 1, true, cmd_reload},
    {"zones", NULL, "", "served zones with serial, record count and load time", 0, 0, false,
     cmd_zones},
    {"zone-refresh", NULL, "ZONE", "check a secondary zone's serial with its primaries now", 1, 1,
     true, cmd_zone_refresh},
    {"zone-retransfer", NULL, "ZONE", "transfer a secondary zone whole (AXFR) now", 1, 1, true,
     cmd_zone_retransfer},
    {"stats", NULL, "", "query counters by transport, rcode, type and ECS", 0, 0, false, cmd_stats},
    {"explain", NULL, "NAME CLIENT-IP [ECS-SUBNET]", "the GSLB decision for a client and why", 2, 3,
     false, cmd_explain},
    {"health", NULL, "[PATTERN]", "GSLB targets (names matching PATTERN): state, forced, reason", 0,
     1, false, cmd_health},
    {"monitors", NULL, "[PATTERN]", "checks (key or monitor matching PATTERN): state, runs, result",
     0, 1, false, cmd_monitors},
    {"maps", NULL, "", "GSLB maps: nets files with IPv4/IPv6 prefix counts, load time, guards", 0,
     0, false, cmd_maps},
    {"override", "set", "PATTERN up|down [FOR]",
     "force the GSLB targets matching PATTERN up or down (for FOR, e.g. 30m: then it lapses)", 2, 3,
     true, cmd_override_set},
    {"override", "clear", "PATTERN", "drop the admin's state and weight rules of PATTERN", 1, 1,
     true, cmd_override_clear},
    {"override", "weight", "PATTERN N|default [FOR]",
     "set the weight of matching targets (for FOR), or back to the config's", 2, 3, true,
     cmd_override_weight},
    {"override", "list", "", "the configuration's and the admin's override rules", 0, 0, false,
     cmd_override_list},
    {"upstreams", NULL, "[PATTERN]",
     "forwarder upstreams (names matching PATTERN): state, fault, RTT, counters", 0, 1, false,
     cmd_upstreams},
    {"cache", NULL, "", "forwarder cache (entries, memory, hits, misses) and engine counters", 0, 0,
     false, cmd_cache},
    {"cache", "flush", "[NAME]",
     "drop the cached answers of NAME and every name below it (no NAME: all)", 0, 1, true,
     cmd_cache_flush},
    {"cluster", NULL, "", "this node: announcement, method, last transition, self-check, drain", 0,
     0, false, cmd_cluster},
    {"cluster", "health", "",
     "whether this node wants to be announced (exit status 0 yes, 1 no: a vrrp_script)", 0, 0,
     false, cmd_cluster_health},
    {"cluster", "bird-config", "[bgp|ospf] [peer=ADDR] [local-as=N] [peer-as=N] [area=ID] ...",
     "a BIRD 2 configuration for this node", 0, 8, false, cmd_cluster_bird},
    {"cluster", "frr-config", "[bgp|ospf] [peer=ADDR] [local-as=N] [peer-as=N] [area=ID] ...",
     "an FRR configuration for this node", 0, 8, false, cmd_cluster_frr},
    {"cluster", "notify", "master|backup|fault|stop",
     "record keepalived's VRRP state (its notify hooks call this)", 1, 1, true, cmd_cluster_notify},
    {"drain", NULL, "[TIMEOUT]",
     "withdraw this node and wait until queries stop (default timeout: cluster.drain.timeout)", 0,
     1, true, cmd_drain},
    {"undrain", NULL, "", "end a drain: announce again once the self-check is good", 0, 0, true,
     cmd_undrain},
    {"paths", NULL, "[PREFIX|ADDRESS]",
     "measured paths: the agents' tables; with a prefix its row (RTT, loss, hops, age, best)", 0, 1,
     false, cmd_paths},
    {"events", NULL, "[N] [since=SEQ]",
     "the last state changes (targets, services, upstreams, cluster, reloads), oldest first", 0, 2,
     false, cmd_events},
};

const ctl_command_t *ctl_command_table(size_t *n)
{
	*n = STEER_ARRAY_LEN(commands);
	return commands;
}

/* Append to @p buf (always terminated, truncated when full). */
static void put(char *buf, size_t size, size_t *used, const char *text)
{
	int n = snprintf(buf + *used, *used < size ? size - *used : 0, "%s", text);
	if (n > 0)
		*used = *used + (size_t)n < size ? *used + (size_t)n : size;
}

/* "usage: override set PATTERN up|down | override clear PATTERN | ..." for @p name. */
static void usage_of(const char *name, char *err, size_t errlen)
{
	size_t used = 0;
	put(err, errlen, &used, "usage:");
	for (size_t i = 0, k = 0; i < STEER_ARRAY_LEN(commands); i++) {
		const ctl_command_t *c = &commands[i];
		if (strcmp(c->name, name) != 0)
			continue;
		put(err, errlen, &used, k++ ? " | " : " ");
		put(err, errlen, &used, c->name);
		if (c->sub) {
			put(err, errlen, &used, " ");
			put(err, errlen, &used, c->sub);
		}
		if (c->args[0]) {
			put(err, errlen, &used, " ");
			put(err, errlen, &used, c->args);
		}
	}
}

static void unknown_command(const char *name, char *err, size_t errlen)
{
	size_t used = 0;
	char head[160];
	snprintf(head, sizeof(head), "unknown command '%.64s' (try", name);
	put(err, errlen, &used, head);
	for (size_t i = 0; i < STEER_ARRAY_LEN(commands); i++) {
		if (i > 0 && strcmp(commands[i - 1].name, commands[i].name) == 0)
			continue;
		put(err, errlen, &used, i ? ", " : " ");
		put(err, errlen, &used, commands[i].name);
	}
	put(err, errlen, &used, ")");
}

const ctl_command_t *ctl_command_match(const char *name, const char *const *argv, size_t argc,
                                       char *err, size_t errlen)
{
	bool known = false;
	for (size_t i = 0; i < STEER_ARRAY_LEN(commands); i++) {
		const ctl_command_t *c = &commands[i];
		if (strcmp(c->name, name) != 0)
			continue;
		known = true;
		size_t skip = c->sub != NULL;
		if (c->sub && (argc == 0 || argv[0] == NULL || strcmp(argv[0], c->sub) != 0))
			continue;
		if (argc - skip >= c->min_args && argc - skip <= c->max_args)
			return c;
		/* a row without a sub-command ("cache") must not hide one with ("cache flush") */
	}
	if (!known) {
		unknown_command(name, err, errlen);
		return NULL;
	}
	size_t n = 0;
	for (size_t i = 0; i < STEER_ARRAY_LEN(commands); i++)
		n += strcmp(commands[i].name, name) == 0 && commands[i].max_args > 0;
	if (n == 0)
		snprintf(err, errlen, "'%s' takes no arguments", name);
	else
		usage_of(name, err, errlen);
	return NULL;
}

int ctl_dispatch(const ctl_backend_t *b, const char *cmd, const json_t *args, unsigned flags,
                 json_t **data, char *err, size_t errlen)
{
	const char *argv[CTL_MAX_ARGS + 1] = {NULL};
	size_t argc = args ? json_array_size(args) : 0;
	if (argc > CTL_MAX_ARGS) {
		/* More than any row takes: let the matcher word the usage error. */
		argc = CTL_MAX_ARGS + 1;
	}
	for (size_t i = 0; i < argc && i < CTL_MAX_ARGS; i++) {
		argv[i] = json_string_value(json_array_get(args, i));
		if (argv[i] == NULL) {
			snprintf(err, errlen, "%s: argument %zu is not a string", cmd, i + 1);
			return STEER_EINVAL;
		}
	}
	const ctl_command_t *c = ctl_command_match(cmd, argv, argc, err, errlen);
	if (c == NULL)
		return STEER_EINVAL;
	if (argc > CTL_MAX_ARGS) {
		snprintf(err, errlen, "%s: more than %d arguments", cmd, CTL_MAX_ARGS);
		return STEER_EINVAL;
	}
	if (c->mutates && (flags & CTL_DISPATCH_READ_ONLY)) {
		snprintf(err, errlen, "'%s%s%s' changes the server: not allowed for this client",
		         cmd, c->sub ? " " : "", c->sub ? c->sub : "");
		return STEER_EACCES;
	}
	if (b->prepare)
		b->prepare(b->ctx);
	size_t skip = c->sub != NULL;
	return c->handler(b, argv + skip, argc - skip, data, err, errlen);
}

int ctl_dispatch_cb(const char *cmd, json_t *args, json_t **data, char *err, size_t errlen,
                    void *ctx)
{
	return ctl_dispatch(ctx, cmd, args, 0, data, err, errlen);
}
