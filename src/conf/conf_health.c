/*
 * The health-monitoring parts of the configuration: the `monitors` section (name -> monitor),
 * and the `monitor`, `probe` and `requires` keys that datacenters, services, service
 * datacenters and addresses carry (conf_gslb.c's callbacks hand those values to the helpers
 * here). The `health` section is a plain mapping of conf_t keys and goes through the generic
 * loader. `monitors` comes before `datacenters` in the section table, so it loads first and
 * monitor names are resolved to indices while parsing: a typo is reported with its file:line.
 * What cannot be resolved here (`requires` names targets the health engine builds) is only
 * checked for shape. Control thread only.
 */
#include "conf/conf_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/err.h"
#include "dns/const.h"

/* Monitor names appear in log lines and steerctl output next to target names. */
#define MONITOR_NAME_MAXLEN 63

typedef enum {
	MON_TCP,
	MON_HTTP,
	MON_HTTPS,
	MON_DNS,
	MON_EXEC,
	MON_STATIC,
	MON_METRICS,
	MON_N,
} mon_type_t;

static const char *const type_names[MON_N] = {"tcp",  "http",   "https",  "dns",
                                              "exec", "static", "metrics"};

/* The load values of a metrics monitor, in CONF_METRIC_* order. */
static const char *const metric_keys[CONF_METRIC_KINDS] = {
    [CONF_METRIC_CONNECTIONS] = "connections",
    [CONF_METRIC_CAPACITY] = "capacity",
    [CONF_METRIC_PACKET_RATE] = "packet-rate",
    [CONF_METRIC_KBPS] = "kbps",
    [CONF_METRIC_CPU] = "cpu",
    [CONF_METRIC_LINK_CAPACITY] = "link-capacity",
};

#define METRIC_EXPR_MAXLEN 1024

#define T(type)      (1u << (type))
#define UPDOWN_TYPES ((T(MON_N) - 1) & ~T(MON_METRICS))

/* Keys that only some monitor types use; every other key applies to all of them. */
static const struct {
	const char *key;
	unsigned types;
} type_only_keys[] = {
    {"port", T(MON_TCP) | T(MON_HTTP) | T(MON_HTTPS) | T(MON_DNS) | T(MON_METRICS)},
    {"path", T(MON_HTTP) | T(MON_HTTPS) | T(MON_METRICS)},
    {"host", T(MON_HTTP) | T(MON_HTTPS) | T(MON_METRICS)},
    {"expect-status", T(MON_HTTP) | T(MON_HTTPS)},
    {"body", T(MON_HTTP) | T(MON_HTTPS)},
    {"tls-verify", T(MON_HTTPS) | T(MON_METRICS)},
    {"format", T(MON_METRICS)},
    {"tls", T(MON_METRICS)},
    {"stale-after", T(MON_METRICS)},
    {"connections", T(MON_METRICS)},
    {"capacity", T(MON_METRICS)},
    {"packet-rate", T(MON_METRICS)},
    {"kbps", T(MON_METRICS)},
    {"cpu", T(MON_METRICS)},
    {"link-capacity", T(MON_METRICS)},
    {"qname", T(MON_DNS)},
    {"qtype", T(MON_DNS)},
    {"rcode", T(MON_DNS)},
    {"answer", T(MON_DNS)},
    {"command", T(MON_EXEC)},
    {"state", T(MON_STATIC)},
    /* the up/down state machine: a metrics monitor has none */
    {"fall", UPDOWN_TYPES},
    {"rise", UPDOWN_TYPES},
    {"hold-down", UPDOWN_TYPES},
    {"slow-start", UPDOWN_TYPES},
    {"ttl-floor", UPDOWN_TYPES},
};

typedef struct {
	const char *name;
	unsigned value;
} mnemonic_t;

/* Query types a health check may ask for; meta types (ANY, AXFR, OPT) make no sense here. */
static const mnemonic_t qtypes[] = {
    {"A", DNS_TYPE_A},         {"NS", DNS_TYPE_NS},
    {"CNAME", DNS_TYPE_CNAME}, {"SOA", DNS_TYPE_SOA},
    {"PTR", DNS_TYPE_PTR},     {"HINFO", DNS_TYPE_HINFO},
    {"MX", DNS_TYPE_MX},       {"TXT", DNS_TYPE_TXT},
    {"AAAA", DNS_TYPE_AAAA},   {"SRV", DNS_TYPE_SRV},
    {"NAPTR", DNS_TYPE_NAPTR}, {"DNAME", DNS_TYPE_DNAME},
    {"DS", DNS_TYPE_DS},       {"DNSKEY", DNS_TYPE_DNSKEY},
    {"TLSA", DNS_TYPE_TLSA},   {"SVCB", DNS_TYPE_SVCB},
    {"HTTPS", DNS_TYPE_HTTPS}, {"CAA", DNS_TYPE_CAA},
    {"NSEC", DNS_TYPE_NSEC},   {"NSEC3PARAM", DNS_TYPE_NSEC3PARAM},
};

/* The header rcodes (4 bits, RFC 1035 and RFC 2136); extended ones need EDNS. */
static const mnemonic_t rcodes[] = {
    {"NOERROR", DNS_RCODE_NOERROR},
    {"FORMERR", DNS_RCODE_FORMERR},
    {"SERVFAIL", DNS_RCODE_SERVFAIL},
    {"NXDOMAIN", DNS_RCODE_NXDOMAIN},
    {"NOTIMP", DNS_RCODE_NOTIMP},
    {"REFUSED", DNS_RCODE_REFUSED},
    {"YXDOMAIN", 6},
    {"YXRRSET", 7},
    {"NXRRSET", 8},
    {"NOTAUTH", DNS_RCODE_NOTAUTH},
    {"NOTZONE", 10},
};

#define HTTP_STATUS_MIN 100
#define HTTP_STATUS_MAX 599

/* ---- small helpers ------------------------------------------------------------------------ */

/* Target names, monitor names and requires entries are single words in logs and commands. */
static bool has_space_or_control(const char *text)
{
	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		if (*p <= ' ' || *p == 0x7f)
			return true;
	}
	return false;
}

typedef int (*scalar_cb)(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *item,
                         const char *text, void *ctx);

typedef struct {
	const conf_key_t *key;
	scalar_cb cb;
	void *ctx;
} scalar_ctx_t;

static int scalar_item(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *arg)
{
	(void)what;
	const scalar_ctx_t *c = arg;
	const char *text;
	int ret = conf_scalar_text(ld, c->key, item, &text);
	return ret != 0 ? ret : c->cb(ld, c->key, item, text, c->ctx);
}

/*
 * Call @p cb with the text of each item of list @p node; a single value is a one-item list.
 * An empty list (or null) is an error unless @p allow_empty.
 */
static int for_each_scalar(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *node,
                           bool allow_empty, scalar_cb cb, void *ctx)
{
	char what[128];
	snprintf(what, sizeof(what), "%s.%s", key->section, key->name);
	scalar_ctx_t c = {key, cb, ctx};
	return conf_for_each_item(ld, what, node, allow_empty, scalar_item, &c);
}

static int mnemonic(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *node,
                    const mnemonic_t *table, size_t n, unsigned *out)
{
	const char *text;
	int ret = conf_scalar_text(ld, key, node, &text);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < n; i++) {
		if (strcasecmp(table[i].name, text) == 0) {
			*out = table[i].value;
			return 0;
		}
	}
	char names[256] = "";
	size_t used = 0;
	for (size_t i = 0; i < n && used < sizeof(names); i++)
		used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
		                         table[i].name);
	return conf_fail(ld, conf_node_line(node), "%s.%s: unknown %s '%s' (expected %s)",
	                 key->section, key->name, key->name, text, names);
}

static int parse_qtype(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *node,
                       uint16_t *out)
{
	unsigned v;
	const char *text;
	int ret = conf_scalar_text(ld, key, node, &text);
	if (ret != 0)
		return ret;
	/* RFC 3597 generic form, for types we have no mnemonic for */
	if (strncasecmp(text, "TYPE", 4) == 0 && text[4] >= '0' && text[4] <= '9') {
		char *end = NULL;
		errno = 0;
		unsigned long n = strtoul(text + 4, &end, 10);
		bool meta = n == DNS_TYPE_OPT || (n >= 128 && n <= 255);
		if (*end != '\0' || errno == ERANGE || n == 0 || n > UINT16_MAX || meta)
			return conf_fail(ld, conf_node_line(node),
			                 "%s.%s: '%s' is not a query type a monitor can ask for "
			                 "(TYPE1 to TYPE65535, no meta types)",
			                 key->section, key->name, text);
		*out = (uint16_t)n;
		return 0;
	}
	ret = mnemonic(ld, key, node, qtypes, STEER_ARRAY_LEN(qtypes), &v);
	if (ret == 0)
		*out = (uint16_t)v;
	return ret;
}

/* ---- monitors ----------------------------------------------------------------------------- */

static int status_item(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *item,
                       const char *text, void *ctx)
{
	conf_monitor_t *mon = ctx;
	char *end = NULL;
	errno = 0;
	unsigned long code = text[0] >= '0' && text[0] <= '9' ? strtoul(text, &end, 10) : 0;
	if (!end || *end != '\0' || errno == ERANGE || code < HTTP_STATUS_MIN ||
	    code > HTTP_STATUS_MAX)
		return conf_fail(ld, conf_node_line(item),
		                 "%s.%s: '%s' is not an HTTP status code (%d to %d)", key->section,
		                 key->name, text, HTTP_STATUS_MIN, HTTP_STATUS_MAX);
	for (size_t i = 0; i < mon->n_status; i++) {
		if (mon->status[i] == code)
			return conf_fail(ld, conf_node_line(item), "%s.%s: %lu is listed twice",
			                 key->section, key->name, code);
	}
	if (mon->n_status == CONF_HTTP_STATUS_MAX)
		return conf_fail(ld, conf_node_line(item), "%s.%s: at most %d status codes",
		                 key->section, key->name, CONF_HTTP_STATUS_MAX);
	mon->status[mon->n_status++] = (uint16_t)code;
	return 0;
}

static int command_item(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *item,
                        const char *text, void *ctx)
{
	conf_monitor_t *mon = ctx;
	if (mon->n_command == 0 && text[0] == '\0')
		return conf_fail(ld, conf_node_line(item), "%s.%s: the program must not be empty",
		                 key->section, key->name);
	/* argv stays NULL-terminated after every append */
	mon->command = xrealloc(mon->command, (mon->n_command + 2) * sizeof(*mon->command));
	mon->command[mon->n_command++] = xstrdup(text);
	mon->command[mon->n_command] = NULL;
	return 0;
}

static void command_free(conf_monitor_t *mon)
{
	for (size_t i = 0; i < mon->n_command; i++)
		free(mon->command[i]);
	free(mon->command);
	mon->command = NULL;
	mon->n_command = 0;
}

static int monitor_type(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                        conf_monitor_t *mon)
{
	const char *text;
	int ret = conf_scalar_text(ld, key, value, &text);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < MON_N; i++) {
		if (strcmp(type_names[i], text) == 0) {
			free(mon->type);
			mon->type = xstrdup(text);
			return 0;
		}
	}
	return conf_fail(ld, conf_node_line(value),
	                 "%s.%s: expected one of tcp, http, https, dns, exec, static, metrics; got "
	                 "'%s'",
	                 key->section, key->name, text);
}

/* A load value: a number (kept as is) or an expression (checked by the planner, which
 * knows the expression language; conf only keeps the text and its line). */
static int metric_value(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                        conf_monitor_t *mon, size_t k)
{
	const char *text;
	int ret = conf_scalar_text(ld, key, value, &text);
	if (ret != 0)
		return ret;
	size_t len = strlen(text);
	if (len == 0 || len > METRIC_EXPR_MAXLEN || strchr(text, '\n'))
		return conf_fail(ld, conf_node_line(value),
		                 "%s.%s: expected a number or an expression of one line (at most "
		                 "%d bytes)",
		                 key->section, key->name, METRIC_EXPR_MAXLEN);
	free(mon->metric_expr[k]);
	mon->metric_expr[k] = NULL;
	mon->metric_is_const[k] = false;
	mon->metric_line[k] = (unsigned)conf_node_line(value);
	char *end = NULL;
	double v = strtod(text, &end);
	bool numeric = (text[0] >= '0' && text[0] <= '9') || text[0] == '-' || text[0] == '+' ||
	               text[0] == '.';
	if (numeric && end && *end == '\0') {
		if (!isfinite(v) || v < 0)
			return conf_fail(ld, conf_node_line(value),
			                 "%s.%s: %s is not a number of 0 or more", key->section,
			                 key->name, text);
		mon->metric_const[k] = v;
		mon->metric_is_const[k] = true;
		return 0;
	}
	mon->metric_expr[k] = xstrdup(text);
	return 0;
}

static int monitor_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                           const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_monitor_t *mon = base;
	unsigned rcode;
	int ret;
	if (strcmp(key->name, "type") == 0)
		return monitor_type(ld, key, value, mon);
	for (size_t k = 0; k < CONF_METRIC_KINDS; k++)
		if (strcmp(key->name, metric_keys[k]) == 0)
			return metric_value(ld, key, value, mon, k);
	if (strcmp(key->name, "expect-status") == 0) {
		mon->n_status = 0;
		return for_each_scalar(ld, key, value, false, status_item, mon);
	}
	if (strcmp(key->name, "qtype") == 0)
		return parse_qtype(ld, key, value, &mon->qtype);
	if (strcmp(key->name, "rcode") == 0) {
		ret = mnemonic(ld, key, value, rcodes, STEER_ARRAY_LEN(rcodes), &rcode);
		if (ret == 0)
			mon->rcode = (uint8_t)rcode;
		return ret;
	}
	STEER_ASSERT(strcmp(key->name, "command") == 0);
	command_free(mon);
	return for_each_scalar(ld, key, value, false, command_item, mon);
}

static mon_type_t type_of(const conf_monitor_t *mon)
{
	for (size_t i = 0; i < MON_N; i++) {
		if (strcmp(type_names[i], mon->type) == 0)
			return (mon_type_t)i;
	}
	STEER_ASSERT(!"monitor type validated while parsing");
	return MON_STATIC;
}

/* Keys given for a type that does not use them: a silently ignored `path` on a tcp monitor
 * would hide a mistake. */
static int check_type_keys(conf_loader_t *ld, const conf_monitor_t *mon, const yaml_node_t *map)
{
	mon_type_t type = type_of(mon);
	for (const yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		const yaml_node_t *k = conf_node(ld, p->key);
		const char *name = (const char *)k->data.scalar.value;
		for (size_t i = 0; i < STEER_ARRAY_LEN(type_only_keys); i++) {
			if (strcmp(type_only_keys[i].key, name) != 0 ||
			    (type_only_keys[i].types & T(type)))
				continue;
			char types[64] = "";
			size_t used = 0;
			for (size_t t = 0; t < MON_N; t++) {
				if (type_only_keys[i].types & T(t))
					used += (size_t)snprintf(types + used, sizeof(types) - used,
					                         "%s%s", used ? ", " : "",
					                         type_names[t]);
			}
			return conf_fail(
			    ld, conf_node_line(k),
			    "monitors.%s: '%s' does not apply to %s monitors (only %s)", mon->name,
			    name, mon->type, types);
		}
	}
	return 0;
}

static int check_http_target(conf_loader_t *ld, const conf_monitor_t *mon, const yaml_node_t *map)
{
	if (mon->path[0] != '/' || has_space_or_control(mon->path))
		return conf_fail(ld, conf_key_line(ld, map, "path", mon->line),
		                 "monitors.%s: path '%s' must start with '/' and contain no "
		                 "spaces (encode them as %%20)",
		                 mon->name, mon->path);
	if (mon->host && has_space_or_control(mon->host))
		return conf_fail(ld, conf_key_line(ld, map, "host", mon->line),
		                 "monitors.%s: host '%s' must not contain spaces", mon->name,
		                 mon->host);
	return 0;
}

static int check_metrics_monitor(conf_loader_t *ld, conf_monitor_t *mon, const yaml_node_t *map)
{
	/* The exporters' convention, rather than the http monitors' "/". */
	if (conf_key_line(ld, map, "path", 0) == 0) {
		free(mon->path);
		mon->path = xstrdup("/metrics");
	}
	int ret = check_http_target(ld, mon, map);
	if (ret != 0)
		return ret;
	bool any = false;
	for (size_t k = 0; k < CONF_METRIC_KINDS; k++)
		any |= mon->metric_expr[k] != NULL || mon->metric_is_const[k];
	if (!any)
		return conf_fail(ld, mon->line,
		                 "monitors.%s: a metrics monitor needs at least one value "
		                 "(connections, capacity, packet-rate, kbps, cpu, link-capacity)",
		                 mon->name);
	return 0;
}

static int check_monitor(conf_loader_t *ld, conf_monitor_t *mon, const yaml_node_t *map)
{
	int ret = check_type_keys(ld, mon, map);
	if (ret != 0)
		return ret;
	if (mon->timeout >= mon->interval) {
		char t[32], i[32];
		return conf_fail(ld,
		                 conf_key_line(ld, map, "timeout",
		                               conf_key_line(ld, map, "interval", mon->line)),
		                 "monitors.%s: timeout %s must be less than interval %s", mon->name,
		                 conf_duration_str(mon->timeout, t, sizeof(t)),
		                 conf_duration_str(mon->interval, i, sizeof(i)));
	}
	switch (type_of(mon)) {
	case MON_TCP:
		if (mon->port == 0)
			return conf_fail(ld, mon->line, "monitors.%s: a tcp monitor needs a 'port'",
			                 mon->name);
		break;
	case MON_EXEC:
		if (mon->n_command == 0)
			return conf_fail(ld, mon->line,
			                 "monitors.%s: an exec monitor needs a 'command'",
			                 mon->name);
		break;
	case MON_METRICS:
		return check_metrics_monitor(ld, mon, map);
	case MON_HTTP:
	case MON_HTTPS:
		return check_http_target(ld, mon, map);
	case MON_DNS:
	case MON_STATIC:
	case MON_N:
		break;
	}
	return 0;
}

static int check_monitor_name(conf_loader_t *ld, const char *name, size_t line)
{
	size_t len = strlen(name);
	if (len == 0)
		return conf_fail(ld, line, "monitors: a monitor name must not be empty");
	if (len > MONITOR_NAME_MAXLEN)
		return conf_fail(ld, line, "monitors: '%s' is longer than %d bytes", name,
		                 MONITOR_NAME_MAXLEN);
	if (strchr(name, '/') || has_space_or_control(name))
		return conf_fail(ld, line, "monitors: '%s' must not contain '/' or spaces", name);
	return 0;
}

static void monitor_free(conf_monitor_t *mon)
{
	conf_free_fields("monitors", mon);
	for (size_t k = 0; k < CONF_METRIC_KINDS; k++)
		free(mon->metric_expr[k]);
	command_free(mon);
	free(mon->type);
	free(mon->name);
}

static int monitor_load(conf_loader_t *ld, const char *name, const yaml_node_t *key,
                        const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_t *conf = ld->conf;
	int ret = check_monitor_name(ld, name, conf_node_line(key));
	if (ret != 0)
		return ret;
	conf->monitors = xrealloc(conf->monitors, (conf->n_monitors + 1) * sizeof(*conf->monitors));
	conf_monitor_t *mon = &conf->monitors[conf->n_monitors++];
	*mon = (conf_monitor_t){.name = xstrdup(name),
	                        .qtype = DNS_TYPE_A,
	                        .rcode = DNS_RCODE_NOERROR,
	                        .line = (unsigned)conf_node_line(key)};
	conf_apply_defaults("monitors", mon);
	ret = conf_load_keys(ld, "monitors", mon, value, monitor_node_cb, NULL);
	return ret != 0 ? ret : check_monitor(ld, mon, value);
}

int conf_health_load_monitors(conf_loader_t *ld, const yaml_node_t *node)
{
	return conf_for_each_named(ld, "monitors", node, "monitor names to monitors", "type, ...",
	                           monitor_load, NULL);
}

/* ---- references from datacenters, services and addresses ---------------------------------- */

/* The monitor named in @p value; @p metrics: it must be a metrics monitor, else must not. */
static int monitor_ref(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                       bool metrics, size_t *out)
{
	const conf_t *conf = ld->conf;
	const char *text;
	int ret = conf_scalar_text(ld, key, value, &text);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < conf->n_monitors; i++) {
		if (strcmp(conf->monitors[i].name, text) != 0)
			continue;
		bool is_metrics = type_of(&conf->monitors[i]) == MON_METRICS;
		if (metrics && !is_metrics)
			return conf_fail(ld, conf_node_line(value),
			                 "%s.%s: '%s' is a %s monitor, not a metrics monitor (use "
			                 "'monitor: %s' for up/down checks)",
			                 key->section, key->name, text, conf->monitors[i].type,
			                 text);
		if (!metrics && is_metrics)
			return conf_fail(
			    ld, conf_node_line(value),
			    "%s.%s: '%s' is a metrics monitor: it reads load values and "
			    "never decides up or down (use 'metrics: %s' on a service)",
			    key->section, key->name, text, text);
		*out = i;
		return 0;
	}
	char names[256] = "";
	size_t used = 0;
	for (size_t i = 0; i < conf->n_monitors && used < sizeof(names); i++)
		used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
		                         conf->monitors[i].name);
	return conf_fail(ld, conf_node_line(value), "%s.%s: unknown monitor '%s' (%s%s)",
	                 key->section, key->name, text,
	                 conf->n_monitors ? "monitors: " : "no monitors are configured", names);
}

int conf_health_monitor_ref(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                            size_t *out)
{
	return monitor_ref(ld, key, value, false, out);
}

int conf_health_metrics_ref(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                            size_t *out)
{
	return monitor_ref(ld, key, value, true, out);
}

int conf_health_probe(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                      char **out)
{
	const char *text;
	steer_sockaddr_t addr;
	int ret = conf_scalar_text(ld, key, value, &text);
	if (ret != 0)
		return ret;
	if (steer_sockaddr_parse(text, 0, &addr) != 0)
		return conf_fail(ld, conf_node_line(value),
		                 "%s.%s: invalid probe address '%s' (expected IP or IP:PORT, IPv6 "
		                 "as \"[2001:db8::1]:PORT\")",
		                 key->section, key->name, text);
	/* Port 0 is both "none given" (default 0) and an explicit ":0"; a second parse with
	 * another default tells them apart. */
	if (steer_sockaddr_port(&addr) == 0 && steer_sockaddr_parse(text, 1, &addr) == 0 &&
	    steer_sockaddr_port(&addr) == 0)
		return conf_fail(ld, conf_node_line(value), "%s.%s: port 0 is not allowed in '%s'",
		                 key->section, key->name, text);
	free(*out);
	*out = xstrdup(text);
	return 0;
}

typedef struct {
	char ***items;
	size_t *n;
} str_list_t;

static int requires_item(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *item,
                         const char *text, void *ctx)
{
	str_list_t *list = ctx;
	if (text[0] == '\0' || has_space_or_control(text))
		return conf_fail(ld, conf_node_line(item),
		                 "%s.%s: '%s' is not a target name (e.g. datacenter/NAME or "
		                 "service/NAME/DATACENTER/ADDRESS, without spaces)",
		                 key->section, key->name, text);
	for (size_t i = 0; i < *list->n; i++) {
		if (strcmp((*list->items)[i], text) == 0)
			return conf_fail(ld, conf_node_line(item), "%s.%s: '%s' is listed twice",
			                 key->section, key->name, text);
	}
	*list->items = xrealloc(*list->items, (*list->n + 1) * sizeof(**list->items));
	(*list->items)[(*list->n)++] = xstrdup(text);
	return 0;
}

int conf_health_requires(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                         conf_address_t *addr)
{
	str_list_t list = {.items = &addr->requires, .n = &addr->n_requires};
	return for_each_scalar(ld, key, value, true, requires_item, &list);
}

int conf_health_check_datacenter(conf_loader_t *ld, const conf_datacenter_t *dc,
                                 const yaml_node_t *map)
{
	size_t monitor_line = conf_key_line(ld, map, "monitor", dc->line);
	if (dc->monitor == CONF_MONITOR_NONE) {
		if (dc->probe)
			return conf_fail(ld, conf_key_line(ld, map, "probe", dc->line),
			                 "datacenters: '%s' has a 'probe' but no 'monitor'",
			                 dc->name);
		return 0;
	}
	const conf_monitor_t *mon = &ld->conf->monitors[dc->monitor];
	mon_type_t type = type_of(mon);
	if (type == MON_STATIC)
		return 0; /* nothing is probed */
	if (!dc->probe)
		return conf_fail(ld, monitor_line,
		                 "datacenters: '%s' has a 'monitor' but no 'probe' (the address "
		                 "the link monitor checks, e.g. the ISP gateway)",
		                 dc->name);
	if (type == MON_DNS && !mon->qname)
		return conf_fail(ld, monitor_line,
		                 "datacenters: '%s' uses dns monitor '%s', which needs a 'qname' "
		                 "here (there is no service name to ask for)",
		                 dc->name, mon->name);
	return 0;
}

int conf_health_check_service(conf_loader_t *ld, const conf_service_t *svc)
{
	char text[INET6_ADDRSTRLEN];
	for (size_t d = 0; d < svc->n_dcs; d++) {
		const conf_service_dc_t *sdc = &svc->dcs[d];
		if (sdc->monitor != CONF_MONITOR_NONE || svc->monitor != CONF_MONITOR_NONE)
			continue;
		for (size_t a = 0; a < sdc->n_addresses; a++) {
			const conf_address_t *addr = &sdc->addresses[a];
			if (!addr->probe)
				continue;
			if (!inet_ntop(addr->family, addr->addr, text, sizeof(text)))
				snprintf(text, sizeof(text), "?");
			return conf_fail(ld, sdc->line,
			                 "services.datacenters.addresses: %s has a 'probe' but no "
			                 "monitor (set 'monitor' on the service or the datacenter)",
			                 text);
		}
	}
	return 0;
}

/* ---- freeing ------------------------------------------------------------------------------ */

void conf_health_address_free(conf_address_t *addr)
{
	for (size_t i = 0; i < addr->n_requires; i++)
		free(addr->requires[i]);
	free(addr->requires);
	free(addr->probe);
	addr->requires = NULL;
	addr->n_requires = 0;
	addr->probe = NULL;
}

void conf_health_free(conf_t *conf)
{
	for (size_t i = 0; i < conf->n_monitors; i++)
		monitor_free(&conf->monitors[i]);
	free(conf->monitors);
	conf->monitors = NULL;
	conf->n_monitors = 0;
	conf_free_fields("health", conf);
}
