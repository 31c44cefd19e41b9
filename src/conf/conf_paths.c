/*
 * The `paths:` section: the steer-probe agents a DNS node fetches measured-path tables from,
 * how it fetches and trusts them, the hysteresis of RTT steering, and `paths.probe`, the
 * agents' own settings (steer-probe reads the same file with this same code, so an agent and
 * its nodes cannot disagree about what the file means). Scalar keys go through the generic
 * parsers; the lists (agents, nodes, methods) and the cross-checks (datacenters exist and have
 * one agent each, dns-name inside a served zone, the token file usable) are here, each error
 * with its file:line. Loaded after the GSLB sections it refers to. Control thread only.
 */
#include "conf/conf_int.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "dns/dname.h"

/* More agents than the merged table has columns cannot be used. */
#define PATHS_AGENTS_MAX 64
/* Each node is polled every demand-interval; more than this is a typo, not a deployment. */
#define PATHS_NODES_MAX 256
#define PATHS_URL_MAX   2048
/* The same bounds as the HTTP API's token file (ctl/http.h): a shorter token is guessable. */
#define PATHS_TOKEN_MIN 16u
#define PATHS_TOKEN_MAX 1024u

static const char *const method_names[CONF_PROBE_METHODS] = {
    [CONF_PROBE_DNS] = "dns",
    [CONF_PROBE_TCP] = "tcp",
    [CONF_PROBE_ICMP] = "icmp",
};

/* The value of key @p name in mapping @p map, or NULL. */
static const yaml_node_t *map_value(conf_loader_t *ld, const yaml_node_t *map, const char *name)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (const yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		const yaml_node_t *k = conf_node(ld, p->key);
		if (k->type == YAML_SCALAR_NODE &&
		    strcmp((const char *)k->data.scalar.value, name) == 0)
			return conf_node(ld, p->value);
	}
	return NULL;
}

/* Line of @p sub.@p key inside mapping @p map, else of @p sub, else @p fallback. */
static size_t nested_line(conf_loader_t *ld, const yaml_node_t *map, const char *sub,
                          const char *key, size_t fallback)
{
	size_t line = conf_key_line(ld, map, sub, fallback);
	const yaml_node_t *m = map_value(ld, map, sub);
	return m && m->type == YAML_MAPPING_NODE ? conf_key_line(ld, m, key, line) : line;
}

/*
 * An http:// or https:// base URL with a host, ending in '/' (the documents live below it:
 * <url>paths/table, <url>paths/demand), without spaces or control characters. 0, or -1 with
 * the reason in @p msg.
 */
static int check_base_url(const char *url, char *msg, size_t len)
{
	size_t scheme = strncasecmp(url, "http://", 7) == 0    ? 7
	                : strncasecmp(url, "https://", 8) == 0 ? 8
	                                                       : 0;
	if (scheme == 0) {
		snprintf(msg, len, "'%s' must be an http:// or https:// URL", url);
		return -1;
	}
	if (url[scheme] == '\0' || url[scheme] == '/') {
		snprintf(msg, len, "'%s' has no host", url);
		return -1;
	}
	for (const char *p = url; *p; p++) {
		if (*p <= ' ' || *p == 0x7f) {
			snprintf(msg, len, "'%s' contains a space or control character", url);
			return -1;
		}
	}
	if (strchr(url + scheme, '/') == NULL || url[strlen(url) - 1] != '/') {
		snprintf(msg, len, "'%s' must end in '/' (the tables are fetched below it)", url);
		return -1;
	}
	if (strchr(url, '?') || strchr(url, '#')) {
		snprintf(msg, len, "'%s' may not have a query or fragment", url);
		return -1;
	}
	return 0;
}

/* ---- agents -----------------------------------------------------------------------------------
 */

static int agent_datacenter(conf_loader_t *ld, conf_path_agent_t *a, const yaml_node_t *value)
{
	const conf_t *conf = ld->conf;
	const char *text;
	int ret = conf_scalar_text(ld, conf_find_key("paths.agents", "datacenter"), value, &text);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < conf->n_datacenters; i++) {
		if (strcmp(conf->datacenters[i].name, text) == 0) {
			a->datacenter = i;
			return 0;
		}
	}
	if (conf->n_datacenters == 0)
		return conf_fail(ld, conf_node_line(value),
		                 "paths.agents.datacenter: unknown datacenter '%s' (no datacenters "
		                 "are configured)",
		                 text);
	char names[256] = "", hint[128] = "";
	size_t used = 0;
	conf_suggest_t sg;
	conf_suggest_init(&sg, text);
	for (size_t i = 0; i < conf->n_datacenters; i++) {
		conf_suggest_add(&sg, conf->datacenters[i].name);
		if (used < sizeof(names))
			used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s",
			                         i ? ", " : "", conf->datacenters[i].name);
	}
	if (conf_suggest_hint(&sg, hint, sizeof(hint)))
		return conf_fail(ld, conf_node_line(value),
		                 "paths.agents.datacenter: unknown datacenter '%s'%s", text, hint);
	return conf_fail(ld, conf_node_line(value),
	                 "paths.agents.datacenter: unknown datacenter '%s' (datacenters: %s)", text,
	                 names);
}

/* An IP address without a port: where the agent's probes leave from. */
static int agent_source(conf_loader_t *ld, conf_path_agent_t *a, const yaml_node_t *value)
{
	const char *text;
	int ret = conf_scalar_text(ld, conf_find_key("paths.agents", "source"), value, &text);
	if (ret != 0)
		return ret;
	steer_sockaddr_t *s = &a->source;
	memset(s, 0, sizeof(*s));
	if (inet_pton(AF_INET, text, &s->sin.sin_addr) == 1) {
		s->sin.sin_family = AF_INET;
	} else if (inet_pton(AF_INET6, text, &s->sin6.sin6_addr) == 1) {
		s->sin6.sin6_family = AF_INET6;
	} else {
		return conf_fail(ld, conf_node_line(value),
		                 "paths.agents.source: '%s' is not an IP address (no port, no "
		                 "brackets)",
		                 text);
	}
	return 0;
}

static int agent_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                         const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	if (strcmp(key->name, "datacenter") == 0)
		return agent_datacenter(ld, base, value);
	STEER_ASSERT(strcmp(key->name, "source") == 0);
	return agent_source(ld, base, value);
}

static int load_agent(conf_loader_t *ld, const yaml_node_t *item, void *owner)
{
	conf_paths_t *p = owner;
	if (p->n_agents == PATHS_AGENTS_MAX)
		return conf_fail(ld, conf_node_line(item), "paths.agents: at most %d agents",
		                 PATHS_AGENTS_MAX);
	p->agents = xrealloc(p->agents, (p->n_agents + 1) * sizeof(*p->agents));
	conf_path_agent_t *a = &p->agents[p->n_agents++];
	memset(a, 0, sizeof(*a));
	a->line = (unsigned)conf_node_line(item);
	int ret = conf_load_keys(ld, "paths.agents", a, item, agent_node_cb, NULL);
	if (ret != 0)
		return ret;
	char msg[PATHS_URL_MAX + 128];
	if (check_base_url(a->url, msg, sizeof(msg)) != 0)
		return conf_fail(ld, conf_key_line(ld, item, "url", a->line),
		                 "paths.agents.url: %s", msg);
	for (size_t i = 0; i + 1 < p->n_agents; i++) {
		if (p->agents[i].datacenter == a->datacenter)
			return conf_fail(ld, conf_key_line(ld, item, "datacenter", a->line),
			                 "paths.agents: datacenter '%s' already has an agent (line "
			                 "%u); one agent per datacenter",
			                 ld->conf->datacenters[a->datacenter].name,
			                 p->agents[i].line);
		if (strcmp(p->agents[i].url, a->url) == 0)
			return conf_fail(
			    ld, conf_key_line(ld, item, "url", a->line),
			    "paths.agents: url '%s' is already the agent of datacenter "
			    "'%s' (line %u)",
			    a->url, ld->conf->datacenters[p->agents[i].datacenter].name,
			    p->agents[i].line);
	}
	return 0;
}

/* ---- probe.nodes and probe.methods ------------------------------------------------------------
 */

static int node_url_cb(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	conf_paths_t *p = ctx;
	int ret = 0;
	const char *text = conf_item_text(ld, what, item, &ret);
	if (!text)
		return ret;
	char msg[PATHS_URL_MAX + 128];
	if (strlen(text) > PATHS_URL_MAX)
		return conf_fail(ld, conf_node_line(item), "%s: a URL of at most %d bytes", what,
		                 PATHS_URL_MAX);
	if (check_base_url(text, msg, sizeof(msg)) != 0)
		return conf_fail(ld, conf_node_line(item), "%s: %s", what, msg);
	for (size_t i = 0; i < p->n_nodes; i++) {
		if (strcmp(p->nodes[i], text) == 0)
			return conf_fail(ld, conf_node_line(item), "%s: '%s' is listed twice", what,
			                 text);
	}
	if (p->n_nodes == PATHS_NODES_MAX)
		return conf_fail(ld, conf_node_line(item), "%s: at most %d nodes", what,
		                 PATHS_NODES_MAX);
	p->nodes = xrealloc(p->nodes, (p->n_nodes + 1) * sizeof(*p->nodes));
	p->nodes[p->n_nodes++] = xstrdup(text);
	return 0;
}

static int method_cb(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	conf_paths_t *p = ctx;
	int ret = 0;
	const char *text = conf_item_text(ld, what, item, &ret);
	if (!text)
		return ret;
	for (size_t m = 0; m < CONF_PROBE_METHODS; m++) {
		if (strcasecmp(text, method_names[m]) != 0)
			continue;
		for (size_t i = 0; i < p->n_methods; i++) {
			if (p->methods[i] == (conf_probe_method_t)m)
				return conf_fail(ld, conf_node_line(item),
				                 "%s: '%s' is listed twice", what, method_names[m]);
		}
		p->methods[p->n_methods++] = (conf_probe_method_t)m;
		return 0;
	}
	char hint[128] = "";
	conf_suggest_t sg;
	conf_suggest_init(&sg, text);
	for (size_t m = 0; m < CONF_PROBE_METHODS; m++)
		conf_suggest_add(&sg, method_names[m]);
	if (conf_suggest_hint(&sg, hint, sizeof(hint)))
		return conf_fail(ld, conf_node_line(item), "%s: unknown probe method '%s'%s", what,
		                 text, hint);
	return conf_fail(ld, conf_node_line(item),
	                 "%s: unknown probe method '%s' (expected dns, tcp or icmp)", what, text);
}

/* ---- the section ------------------------------------------------------------------------------
 */

static int paths_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                         const yaml_node_t *value, void *ctx);

/* A nested mapping of table keys (`hysteresis`, `probe`); null keeps the defaults. */
static int load_nested(conf_loader_t *ld, const conf_key_t *key, conf_paths_t *p,
                       const yaml_node_t *value)
{
	char section[64];
	if (conf_is_null(value))
		return 0;
	if (value->type != YAML_MAPPING_NODE)
		return conf_fail(ld, conf_node_line(value),
		                 "%s.%s: expected a mapping of keys, got %s", key->section,
		                 key->name, conf_kind_name(value));
	snprintf(section, sizeof(section), "%s.%s", key->section, key->name);
	return conf_load_keys(ld, section, p, value, paths_node_cb, NULL);
}

static int paths_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                         const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_paths_t *p = base;
	if (strcmp(key->section, "paths") == 0 && strcmp(key->name, "agents") == 0)
		return conf_load_mapping_list(ld, "paths.agents", "datacenter: NAME, url: URL",
		                              value, false, load_agent, p);
	if (strcmp(key->name, "nodes") == 0) {
		for (size_t i = 0; i < p->n_nodes; i++)
			free(p->nodes[i]);
		free(p->nodes);
		p->nodes = NULL;
		p->n_nodes = 0;
		return conf_for_each_item(ld, "paths.probe.nodes", value, false, node_url_cb, p);
	}
	if (strcmp(key->name, "methods") == 0) {
		p->n_methods = 0;
		return conf_for_each_item(ld, "paths.probe.methods", value, false, method_cb, p);
	}
	return load_nested(ld, key, p, value);
}

static bool uses_method(const conf_paths_t *p, conf_probe_method_t m)
{
	for (size_t i = 0; i < p->n_methods; i++) {
		if (p->methods[i] == m)
			return true;
	}
	return false;
}

/* The agent's DNS probes ask for dns-name: it must be ours, never a third party's name. */
static int check_dns_name(conf_loader_t *ld, const conf_paths_t *p, const yaml_node_t *node)
{
	size_t line = nested_line(ld, node, "probe", "dns-name",
	                          nested_line(ld, node, "probe", "methods", p->line));
	if (!uses_method(p, CONF_PROBE_DNS))
		return 0;
	if (!p->dns_name)
		return conf_fail(ld, line,
		                 "paths.probe: method dns needs dns-name (a name inside a zone "
		                 "this configuration serves)");
	uint8_t wire[DNS_DNAME_MAXLEN], apex[DNS_DNAME_MAXLEN];
	if (dname_from_str(p->dns_name, wire) <= 0)
		return conf_fail(ld, line, "paths.probe.dns-name: invalid domain name '%s'",
		                 p->dns_name);
	dname_lower(wire);
	const conf_t *conf = ld->conf;
	for (size_t i = 0; i < conf->n_zones; i++) {
		if (dname_from_str(conf->zones[i].domain, apex) > 0) {
			dname_lower(apex);
			if (dname_is_subdomain(wire, apex))
				return 0;
		}
	}
	char zones[256] = "";
	size_t used = 0;
	for (size_t i = 0; i < conf->n_zones && used < sizeof(zones); i++)
		used += (size_t)snprintf(zones + used, sizeof(zones) - used, "%s%s", i ? ", " : "",
		                         conf->zones[i].domain);
	return conf_fail(ld, line,
	                 "paths.probe.dns-name: '%s' is not inside a served zone (zones: %s); "
	                 "probes only ask for our own names",
	                 p->dns_name, conf->n_zones ? zones : "none");
}

/* Nodes and agents send the same bearer token: it must be there and long enough now, not at
 * the first fetch. Only the first line counts, as for the HTTP API's token file. */
static int check_token_file(conf_loader_t *ld, const conf_paths_t *p, const yaml_node_t *node)
{
	if (!p->token_file)
		return 0;
	size_t line = conf_key_line(ld, node, "token-file", p->line);
	char buf[PATHS_TOKEN_MAX + 2];
	int fd = open(p->token_file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return conf_fail(ld, line, "paths.token-file: %s: %s", p->token_file,
		                 strerror(errno));
	struct stat st;
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		n = read(fd, buf, sizeof(buf) - 1);
	else
		errno = EISDIR;
	int err = errno;
	close(fd);
	if (n < 0)
		return conf_fail(ld, line, "paths.token-file: %s: %s", p->token_file,
		                 strerror(err));
	buf[n] = '\0';
	size_t len = strcspn(buf, "\r\n");
	while (len > 0 && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	if (len < PATHS_TOKEN_MIN || len > PATHS_TOKEN_MAX)
		return conf_fail(ld, line,
		                 "paths.token-file: %s: the first line must hold a token of %u..%u "
		                 "characters (e.g. openssl rand -hex 32), not %zu",
		                 p->token_file, PATHS_TOKEN_MIN, PATHS_TOKEN_MAX, len);
	if (st.st_mode & 0006)
		return conf_fail(ld, line,
		                 "paths.token-file: %s is readable or writable by everyone (mode "
		                 "%04o): chmod o-rw it",
		                 p->token_file, (unsigned)(st.st_mode & 07777));
	return 0;
}

static int check_timing(conf_loader_t *ld, const conf_paths_t *p, const yaml_node_t *node)
{
	char a[32], b[32];
	if (p->fetch_timeout > p->fetch_interval)
		return conf_fail(ld, conf_key_line(ld, node, "fetch-timeout", p->line),
		                 "paths: fetch-timeout %s must not exceed fetch-interval %s (one "
		                 "fetch per agent at a time)",
		                 conf_duration_str(p->fetch_timeout, a, sizeof(a)),
		                 conf_duration_str(p->fetch_interval, b, sizeof(b)));
	if (p->hot_interval > p->probe_interval)
		return conf_fail(ld, nested_line(ld, node, "probe", "hot-interval", p->line),
		                 "paths.probe: hot-interval %s must not exceed interval %s",
		                 conf_duration_str(p->hot_interval, a, sizeof(a)),
		                 conf_duration_str(p->probe_interval, b, sizeof(b)));
	if (p->probe_timeout >= p->hot_interval)
		return conf_fail(ld, nested_line(ld, node, "probe", "timeout", p->line),
		                 "paths.probe: timeout %s must be less than hot-interval %s",
		                 conf_duration_str(p->probe_timeout, a, sizeof(a)),
		                 conf_duration_str(p->hot_interval, b, sizeof(b)));
	/* A table the agent re-measures less often than path-ttl would be stale between rounds
	 * (only where an agent runs: a node's file may shorten path-ttl for itself). */
	if (map_value(ld, node, "probe") &&
	    (uint64_t)p->probe_interval >= (uint64_t)p->path_ttl * 1000)
		return conf_fail(ld, nested_line(ld, node, "probe", "interval", p->line),
		                 "paths.probe: interval %s must be less than paths.path-ttl %s (or "
		                 "every measurement goes stale before it is renewed)",
		                 conf_duration_str(p->probe_interval, a, sizeof(a)),
		                 conf_duration_str((uint64_t)p->path_ttl * 1000, b, sizeof(b)));
	return 0;
}

static const char *const nested_sections[] = {"paths.hysteresis", "paths.probe"};

int conf_paths_load(conf_loader_t *ld, const yaml_node_t *node)
{
	conf_paths_t *p = &ld->conf->paths;
	if (conf_is_null(node))
		return 0;
	if (node->type != YAML_MAPPING_NODE)
		return conf_fail(ld, conf_node_line(node),
		                 "section 'paths' must be a mapping of keys, got %s",
		                 conf_kind_name(node));
	p->enabled = true;
	p->line = (unsigned)conf_node_line(node);
	conf_apply_defaults("paths", p);
	for (size_t i = 0; i < STEER_ARRAY_LEN(nested_sections); i++)
		conf_apply_defaults(nested_sections[i], p);
	for (size_t m = 0; m < CONF_PROBE_METHODS; m++)
		p->methods[m] = (conf_probe_method_t)m;
	p->n_methods = CONF_PROBE_METHODS;
	int ret = conf_load_keys(ld, "paths", p, node, paths_node_cb, NULL);
	/* Without a name to ask for, the default methods leave dns out; a list that names dns
	 * explicitly needs dns-name (check_dns_name()). */
	if (ret == 0 && !p->dns_name && !map_value(ld, map_value(ld, node, "probe"), "methods")) {
		p->methods[0] = CONF_PROBE_TCP;
		p->methods[1] = CONF_PROBE_ICMP;
		p->n_methods = 2;
	}
	if (ret == 0)
		ret = check_dns_name(ld, p, node);
	if (ret == 0)
		ret = check_token_file(ld, p, node);
	if (ret == 0)
		ret = check_timing(ld, p, node);
	return ret;
}

const char *conf_probe_method_name(conf_probe_method_t m)
{
	return (unsigned)m < CONF_PROBE_METHODS ? method_names[m] : "?";
}

/* ---- comparing and freeing --------------------------------------------------------------------
 */

void conf_paths_free(conf_t *conf)
{
	conf_paths_t *p = &conf->paths;
	for (size_t i = 0; i < p->n_agents; i++)
		conf_free_fields("paths.agents", &p->agents[i]);
	free(p->agents);
	for (size_t i = 0; i < p->n_nodes; i++)
		free(p->nodes[i]);
	free(p->nodes);
	conf_free_fields("paths", p);
	for (size_t i = 0; i < STEER_ARRAY_LEN(nested_sections); i++)
		conf_free_fields(nested_sections[i], p);
	*p = (conf_paths_t){0};
}
