/*
 * The cluster node's part of the configuration: the `cluster` section (node identity, the
 * service addresses and the device holding them, the unicast addresses, the announcement
 * method and its settings, the self-check, the keeper's liveness timeout and drain). Scalar
 * keys go through the generic parsers (conf_load_keys()); address lists and the cross-checks
 * (names, families, timings) are here, so every error carries its file:line. Nothing here
 * touches the network: `steerd --check-config` runs this code as it is. What the settings do
 * at run time is cluster/'s business. Control thread only.
 */
#include "conf/conf_int.h"

#include <arpa/inet.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"

/* More would be a misuse: every address is announced and self-checked each round. */
#define SERVICE_MAX 64
/* Destinations the routes check looks up each round. */
#define RETURN_PATH_MAX 16
/* Room for a message before the "file:line: " prefix. */
#define MSG_MAX 512
/* The kernel's local table, where it keeps the node's own addresses. */
#define RT_TABLE_LOCAL 255

static const char *const nested_sections[] = {
    "cluster.bird", "cluster.frr", "cluster.keepalived", "cluster.self-check", "cluster.drain",
};

/* ---- addresses ----------------------------------------------------------------------------- */

static const char *family_name(sa_family_t family)
{
	return family == AF_INET6 ? "IPv6" : "IPv4";
}

/* The address bytes of @p a (4 for IPv4, 16 for IPv6) and their count. */
static const uint8_t *ip_bytes(const steer_sockaddr_t *a, size_t *len)
{
	if (a->sa.sa_family == AF_INET6) {
		*len = 16;
		return a->sin6.sin6_addr.s6_addr;
	}
	*len = 4;
	return (const uint8_t *)&a->sin.sin_addr;
}

static bool same_ip(const steer_sockaddr_t *a, const steer_sockaddr_t *b)
{
	size_t la, lb;
	const uint8_t *x = ip_bytes(a, &la), *y = ip_bytes(b, &lb);
	return a->sa.sa_family == b->sa.sa_family && la == lb && memcmp(x, y, la) == 0;
}

static bool is_unspecified(const steer_sockaddr_t *a)
{
	size_t len;
	const uint8_t *b = ip_bytes(a, &len);
	for (size_t i = 0; i < len; i++) {
		if (b[i] != 0)
			return false;
	}
	return true;
}

static bool is_multicast(const steer_sockaddr_t *a)
{
	size_t len;
	const uint8_t *b = ip_bytes(a, &len);
	return len == 4 ? (b[0] & 0xf0) == 0xe0 : b[0] == 0xff;
}

/* ::ffff:a.b.c.d: an IPv4 address in IPv6 clothing, which no IPv6 route or socket uses. */
static bool is_v4_mapped(const steer_sockaddr_t *a)
{
	static const uint8_t prefix[12] = {[10] = 0xff, [11] = 0xff};
	return a->sa.sa_family == AF_INET6 &&
	       memcmp(a->sin6.sin6_addr.s6_addr, prefix, sizeof(prefix)) == 0;
}

/* fe80::/10: valid on one link only, never routed, so never announced or a route source. */
static bool is_link_local6(const steer_sockaddr_t *a)
{
	const uint8_t *b = a->sin6.sin6_addr.s6_addr;
	return a->sa.sa_family == AF_INET6 && b[0] == 0xfe && (b[1] & 0xc0) == 0x80;
}

static bool is_loopback(const steer_sockaddr_t *a)
{
	size_t len;
	const uint8_t *b = ip_bytes(a, &len);
	if (len == 4)
		return b[0] == 127;
	static const uint8_t one[16] = {[15] = 1};
	return memcmp(b, one, sizeof(one)) == 0;
}

/* "192.0.2.53", "2001:db8::53": an address without a port, parsed into @p out. */
static int bare_address(const char *what, const char *text, steer_sockaddr_t *out, char *msg,
                        size_t len)
{
	steer_sockaddr_t other;
	/* A port given in the text is kept by both parses; a missing one takes each default. */
	if (steer_sockaddr_parse(text, 0, out) != 0 || steer_sockaddr_parse(text, 1, &other) != 0) {
		snprintf(msg, len, "%s: invalid address '%s' (expected an IP address)", what, text);
		return -1;
	}
	if (steer_sockaddr_port(out) != 0 || steer_sockaddr_port(&other) != 1) {
		snprintf(msg, len, "%s: '%s' must be an address without a port", what, text);
		return -1;
	}
	return 0;
}

static void addr_text(const steer_sockaddr_t *a, char *buf, size_t size)
{
	size_t len;
	const uint8_t *b = ip_bytes(a, &len);
	if (!inet_ntop(a->sa.sa_family, b, buf, (socklen_t)size))
		snprintf(buf, size, "?");
}

/* One address of @p what into @p out; unspecified and multicast addresses are errors. */
static int item_address(conf_loader_t *ld, const char *what, const yaml_node_t *item,
                        steer_sockaddr_t *out)
{
	char msg[MSG_MAX];
	int ret = 0;
	const char *text = conf_item_text(ld, what, item, &ret);
	if (!text)
		return ret;
	if (bare_address(what, text, out, msg, sizeof(msg)) != 0)
		return conf_fail(ld, conf_node_line(item), "%s", msg);
	if (is_unspecified(out) || is_multicast(out))
		return conf_fail(ld, conf_node_line(item), "%s: '%s' is %s address", what, text,
		                 is_multicast(out) ? "a multicast" : "the unspecified");
	if (is_v4_mapped(out)) {
		char v4[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, out->sin6.sin6_addr.s6_addr + 12, v4, sizeof(v4));
		return conf_fail(ld, conf_node_line(item),
		                 "%s: '%s' is an IPv4-mapped address; write it as %s", what, text,
		                 v4);
	}
	if (is_link_local6(out))
		return conf_fail(ld, conf_node_line(item),
		                 "%s: '%s' is a link-local address (never routed); use a global or "
		                 "unique local address",
		                 what, text);
	return 0;
}

static int append_address(conf_loader_t *ld, const char *what, const yaml_node_t *item,
                          steer_sockaddr_t **list, size_t *n, size_t max)
{
	steer_sockaddr_t addr;
	int ret = item_address(ld, what, item, &addr);
	if (ret != 0)
		return ret;
	if (*n == max)
		return conf_fail(ld, conf_node_line(item), "%s: at most %zu addresses", what, max);
	for (size_t i = 0; i < *n; i++) {
		if (same_ip(&(*list)[i], &addr))
			return conf_fail(ld, conf_node_line(item), "%s: duplicate address '%s'",
			                 what, (const char *)item->data.scalar.value);
	}
	*list = xrealloc(*list, (*n + 1) * sizeof(**list));
	(*list)[(*n)++] = addr;
	return 0;
}

static int service_cb(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	conf_cluster_t *cc = ctx;
	return append_address(ld, what, item, &cc->service, &cc->n_service, SERVICE_MAX);
}

static int return_path_cb(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	conf_cluster_t *cc = ctx;
	int ret =
	    append_address(ld, what, item, &cc->return_path, &cc->n_return_path, RETURN_PATH_MAX);
	/* Loopback is always routable: it would pass while the node black-holes its replies. */
	if (ret == 0 && is_loopback(&cc->return_path[cc->n_return_path - 1]))
		return conf_fail(ld, conf_node_line(item),
		                 "%s: '%s' is a loopback address (always routable, so it proves "
		                 "nothing about the return path)",
		                 what, (const char *)item->data.scalar.value);
	return ret;
}

static int unicast_cb(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	conf_cluster_t *cc = ctx;
	steer_sockaddr_t addr;
	char have[INET6_ADDRSTRLEN];
	int ret = item_address(ld, what, item, &addr);
	if (ret != 0)
		return ret;
	steer_sockaddr_t *slot = addr.sa.sa_family == AF_INET6 ? &cc->unicast6 : &cc->unicast4;
	if (slot->sa.sa_family != 0) {
		addr_text(slot, have, sizeof(have));
		return conf_fail(
		    ld, conf_node_line(item),
		    "%s: at most one IPv4 and one IPv6 address ('%s' and '%s' are both "
		    "%s)",
		    what, have, (const char *)item->data.scalar.value,
		    family_name(addr.sa.sa_family));
	}
	*slot = addr;
	return 0;
}

/* ---- the YAML section ---------------------------------------------------------------------- */

static int cluster_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                           const yaml_node_t *value, void *ctx);

/* A nested mapping of table keys (`bird`, `self-check`, ...); null keeps the defaults. */
static int load_nested(conf_loader_t *ld, const conf_key_t *key, conf_cluster_t *cc,
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
	return conf_load_keys(ld, section, cc, value, cluster_node_cb, NULL);
}

static int cluster_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                           const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_cluster_t *cc = base;
	char what[64];
	snprintf(what, sizeof(what), "%s.%s", key->section, key->name);
	if (strcmp(key->name, "service-addresses") == 0) {
		free(cc->service);
		cc->service = NULL;
		cc->n_service = 0;
		return conf_for_each_item(ld, what, value, false, service_cb, cc);
	}
	if (strcmp(key->name, "unicast") == 0) {
		memset(&cc->unicast4, 0, sizeof(cc->unicast4));
		memset(&cc->unicast6, 0, sizeof(cc->unicast6));
		return conf_for_each_item(ld, what, value, true, unicast_cb, cc);
	}
	if (strcmp(key->name, "return-path") == 0) {
		free(cc->return_path);
		cc->return_path = NULL;
		cc->n_return_path = 0;
		return conf_for_each_item(ld, what, value, true, return_path_cb, cc);
	}
	return load_nested(ld, key, cc, value);
}

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

/* Line of @p key inside the nested mapping @p sub of @p map, else of @p sub, else @p fallback. */
static size_t nested_line(conf_loader_t *ld, const yaml_node_t *map, const char *sub,
                          const char *key, size_t fallback)
{
	size_t line = conf_key_line(ld, map, sub, fallback);
	const yaml_node_t *m = map_value(ld, map, sub);
	return m && m->type == YAML_MAPPING_NODE ? conf_key_line(ld, m, key, line) : line;
}

static bool all_in(const char *s, const char *set)
{
	return strspn(s, set) == strlen(s);
}

#define ALNUM "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

/* What the kernel accepts as a device name (dev_valid_name()), the length checked already. */
static bool valid_ifname(const char *name)
{
	return strcmp(name, ".") != 0 && strcmp(name, "..") != 0 && !strpbrk(name, "/: \t\n\r\v\f");
}

/* A BIRD symbol as its lexer reads it unquoted: a letter or '_', then letters, digits, '_'. */
static bool valid_bird_symbol(const char *name)
{
	return strchr(ALNUM "_", name[0]) && !(name[0] >= '0' && name[0] <= '9') &&
	       all_in(name, ALNUM "_");
}

static int check_names(conf_loader_t *ld, conf_cluster_t *cc, const yaml_node_t *node)
{
	size_t line = cc->line;
	if (!all_in(cc->node_id, ALNUM "-_."))
		return conf_fail(ld, conf_key_line(ld, node, "node-id", line),
		                 "cluster.node-id: '%s' may only contain letters, digits, '-', '_' "
		                 "and '.'",
		                 cc->node_id);
	bool has_interface = map_value(ld, node, "interface") != NULL;
	if (cc->announce == CONF_ANNOUNCE_KEEPALIVED && !has_interface) {
		free(cc->interface);
		cc->interface = NULL; /* keepalived holds the addresses itself */
	}
	if (cc->interface && !valid_ifname(cc->interface))
		return conf_fail(
		    ld, conf_key_line(ld, node, "interface", line),
		    "cluster.interface: '%s' is not a network device name (no '/', ':' "
		    "or spaces)",
		    cc->interface);
	/* Withdrawing takes the device down: loopback would take 127.0.0.1 and ::1 with it. */
	if (cc->interface && cc->announce == CONF_ANNOUNCE_INTERFACE &&
	    strcmp(cc->interface, "lo") == 0)
		return conf_fail(ld, conf_key_line(ld, node, "interface", line),
		                 "cluster.interface: announce interface takes the device down to "
		                 "withdraw, and 'lo' holds 127.0.0.1 and ::1; use a device of its "
		                 "own (the default vip0)");
	if (cc->bird_protocol && !valid_bird_symbol(cc->bird_protocol))
		return conf_fail(
		    ld, nested_line(ld, node, "bird", "protocol", line),
		    "cluster.bird.protocol: '%s' is not a BIRD protocol name (a letter "
		    "or '_', then letters, digits and '_')",
		    cc->bird_protocol);
	if (cc->announce == CONF_ANNOUNCE_BIRD && !cc->bird_protocol)
		return conf_fail(
		    ld, conf_key_line(ld, node, "bird", conf_key_line(ld, node, "announce", line)),
		    "cluster: announce bird needs bird.protocol (the BIRD protocol to "
		    "enable and disable)");
	if (cc->frr_table == RT_TABLE_LOCAL)
		return conf_fail(
		    ld, nested_line(ld, node, "frr", "table", line),
		    "cluster.frr.table: 255 is the kernel's local table (where it keeps "
		    "the node's own addresses); use 254 (main) or a table of your own");
	return 0;
}

static bool has_family(const conf_cluster_t *cc, sa_family_t family)
{
	for (size_t i = 0; i < cc->n_service; i++) {
		if (cc->service[i].sa.sa_family == family)
			return true;
	}
	return false;
}

static int check_addresses(conf_loader_t *ld, const conf_cluster_t *cc, const yaml_node_t *node)
{
	char text[INET6_ADDRSTRLEN];
	size_t line = conf_key_line(ld, node, "unicast", cc->line);
	const steer_sockaddr_t *uni[] = {&cc->unicast4, &cc->unicast6};
	for (size_t u = 0; u < STEER_ARRAY_LEN(uni); u++) {
		for (size_t i = 0; uni[u]->sa.sa_family != 0 && i < cc->n_service; i++) {
			if (!same_ip(uni[u], &cc->service[i]))
				continue;
			addr_text(uni[u], text, sizeof(text));
			return conf_fail(ld, line,
			                 "cluster.unicast: %s is a service address; the unicast "
			                 "address must be the node's own (replies to it must come "
			                 "back to this node)",
			                 text);
		}
	}
	line = nested_line(ld, node, "self-check", "return-path", cc->line);
	for (size_t i = 0; i < cc->n_return_path; i++) {
		sa_family_t family = cc->return_path[i].sa.sa_family;
		if (has_family(cc, family))
			continue;
		addr_text(&cc->return_path[i], text, sizeof(text));
		return conf_fail(ld, line,
		                 "cluster.self-check.return-path: %s is %s but no service address "
		                 "is",
		                 text, family_name(family));
	}
	return 0;
}

static int check_timing(conf_loader_t *ld, const conf_cluster_t *cc, const yaml_node_t *node)
{
	char a[32], b[32];
	if (cc->check_timeout >= cc->check_interval)
		return conf_fail(
		    ld,
		    nested_line(ld, node, "self-check", "timeout",
		                nested_line(ld, node, "self-check", "interval", cc->line)),
		    "cluster.self-check: timeout %s must be less than interval %s",
		    conf_duration_str(cc->check_timeout, a, sizeof(a)),
		    conf_duration_str(cc->check_interval, b, sizeof(b)));
	/* The keeper must not withdraw a healthy node because one heartbeat came late. */
	if (cc->liveness_timeout <= 2 * cc->check_interval)
		return conf_fail(
		    ld,
		    conf_key_line(ld, node, "liveness-timeout",
		                  nested_line(ld, node, "self-check", "interval", cc->line)),
		    "cluster.liveness-timeout: %s must be more than twice self-check.interval %s "
		    "(a heartbeat goes every interval; one late heartbeat must not withdraw the "
		    "node)",
		    conf_duration_str(cc->liveness_timeout, a, sizeof(a)),
		    conf_duration_str(cc->check_interval, b, sizeof(b)));
	if (cc->drain_quiet >= cc->drain_timeout)
		return conf_fail(ld,
		                 nested_line(ld, node, "drain", "quiet",
		                             nested_line(ld, node, "drain", "timeout", cc->line)),
		                 "cluster.drain: quiet %s must be less than timeout %s",
		                 conf_duration_str(cc->drain_quiet, a, sizeof(a)),
		                 conf_duration_str(cc->drain_timeout, b, sizeof(b)));
	return 0;
}

int conf_cluster_load(conf_loader_t *ld, const yaml_node_t *node)
{
	conf_cluster_t *cc = &ld->conf->cluster;
	if (node->type != YAML_MAPPING_NODE && !conf_is_null(node))
		return conf_fail(ld, conf_node_line(node),
		                 "section 'cluster' must be a mapping of keys, got %s",
		                 conf_kind_name(node));
	cc->enabled = true;
	cc->line = (unsigned)conf_node_line(node);
	conf_apply_defaults("cluster", cc);
	for (size_t i = 0; i < STEER_ARRAY_LEN(nested_sections); i++)
		conf_apply_defaults(nested_sections[i], cc);
	if (conf_is_null(node))
		return conf_fail(ld, cc->line,
		                 "missing required key 'node-id' in section 'cluster'");
	int ret = conf_load_keys(ld, "cluster", cc, node, cluster_node_cb, NULL);
	if (ret == 0)
		ret = check_names(ld, cc, node);
	if (ret == 0)
		ret = check_addresses(ld, cc, node);
	if (ret == 0)
		ret = check_timing(ld, cc, node);
	return ret;
}

/* ---- comparing and freeing ----------------------------------------------------------------- */

static bool addrs_equal(const steer_sockaddr_t *a, size_t na, const steer_sockaddr_t *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++) {
		if (!same_ip(&a[i], &b[i]))
			return false;
	}
	return true;
}

bool conf_cluster_node_equal(const conf_key_t *key, const conf_cluster_t *a,
                             const conf_cluster_t *b)
{
	if (strcmp(key->name, "service-addresses") == 0)
		return addrs_equal(a->service, a->n_service, b->service, b->n_service);
	if (strcmp(key->name, "return-path") == 0)
		return addrs_equal(a->return_path, a->n_return_path, b->return_path,
		                   b->n_return_path);
	if (strcmp(key->name, "unicast") == 0)
		return a->unicast4.sa.sa_family == b->unicast4.sa.sa_family &&
		       a->unicast6.sa.sa_family == b->unicast6.sa.sa_family &&
		       (a->unicast4.sa.sa_family == 0 || same_ip(&a->unicast4, &b->unicast4)) &&
		       (a->unicast6.sa.sa_family == 0 || same_ip(&a->unicast6, &b->unicast6));
	return true;
}

void conf_cluster_free(conf_t *conf)
{
	conf_cluster_t *cc = &conf->cluster;
	conf_free_fields("cluster", cc);
	for (size_t i = 0; i < STEER_ARRAY_LEN(nested_sections); i++)
		conf_free_fields(nested_sections[i], cc);
	free(cc->service);
	free(cc->return_path);
	*cc = (conf_cluster_t){0};
}
