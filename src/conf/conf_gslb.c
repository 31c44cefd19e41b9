/*
 * The GSLB sections of the configuration: datacenters, maps, services, whoami and gslb. The
 * schema table in conf_schema.c lists and documents every key; scalar keys go through the
 * generic parsers (conf_load_keys()), structured ones (datacenter lists, address lists,
 * coordinates, ...) are parsed here. Names are resolved to indices while parsing, so a typo
 * is reported with its file:line; every item keeps its line for the GSLB builder's own
 * errors. These sections load after server, log and zones (see load_root() in conf.c), in
 * table order, so services can check their zone and refer to maps and datacenters. Control
 * thread only.
 */
#include "conf/conf_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "dns/dname.h"

/* Longest datacenter or map name: they appear in health target names and messages. */
#define NAME_MAXLEN 63

/* ---- generic helpers ---------------------------------------------------------------------- */

/* "section.key" of @p key, for messages about its items. */
static const char *what_of(const conf_key_t *key, char *buf, size_t size)
{
	snprintf(buf, size, "%s.%s", key->section, key->name);
	return buf;
}

/* The text of scalar @p node; @p what names it in messages. */
static int scalar(conf_loader_t *ld, const char *what, const yaml_node_t *node, const char **out)
{
	if (node->type != YAML_SCALAR_NODE)
		return conf_fail(ld, conf_node_line(node), "%s: expected a single value, got %s",
		                 what, conf_kind_name(node));
	if (conf_is_null(node))
		return conf_fail(ld, conf_node_line(node), "%s: needs a value", what);
	const char *text = (const char *)node->data.scalar.value;
	if (strlen(text) != node->data.scalar.length)
		return conf_fail(ld, conf_node_line(node), "%s: value contains a NUL byte", what);
	*out = text;
	return 0;
}

static int parse_u32(conf_loader_t *ld, const char *what, const yaml_node_t *node, uint32_t lo,
                     uint32_t hi, uint32_t *out)
{
	const char *text;
	int ret = scalar(ld, what, node, &text);
	if (ret != 0)
		return ret;
	char *end = NULL;
	errno = 0;
	unsigned long long v = text[0] >= '0' && text[0] <= '9' ? strtoull(text, &end, 10) : 0;
	if (!end || *end != '\0')
		return conf_fail(ld, conf_node_line(node),
		                 "%s: expected an unsigned integer, got '%s'", what, text);
	if (errno == ERANGE || v < lo || v > hi)
		return conf_fail(ld, conf_node_line(node), "%s: %s is out of range (%u to %u)",
		                 what, text, lo, hi);
	*out = (uint32_t)v;
	return 0;
}

/* Datacenter and map names: they are parts of health target names, so no '/', glob or space. */
static int check_name(conf_loader_t *ld, const char *what, const char *name, size_t line)
{
	size_t len = strlen(name);
	if (len == 0)
		return conf_fail(ld, line, "%s: must not be empty", what);
	if (len > NAME_MAXLEN)
		return conf_fail(ld, line, "%s: '%s' is longer than %d bytes", what, name,
		                 NAME_MAXLEN);
	if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
	    len)
		return conf_fail(ld, line,
		                 "%s: '%s' may only contain letters, digits, '-', '_' and '.'",
		                 what, name);
	return 0;
}

/* A domain name in wire form, lowercased; @p what names it in messages. */
static int parse_dname(conf_loader_t *ld, const char *what, const char *text, size_t line,
                       uint8_t wire[DNS_DNAME_MAXLEN])
{
	int ret = dname_from_str(text, wire);
	if (ret == STEER_ERANGE)
		return conf_fail(
		    ld, line,
		    "%s: domain name '%s' is too long (labels at most 63 bytes, names 255)", what,
		    text);
	if (ret < 0)
		return conf_fail(ld, line, "%s: invalid domain name '%s'", what, text);
	dname_lower(wire);
	return 0;
}

/* @p wire must lie inside (or at the apex of) a configured zone. */
static int check_in_zone(conf_loader_t *ld, const char *what, const char *text, const uint8_t *wire,
                         size_t line)
{
	const conf_t *conf = ld->conf;
	uint8_t apex[DNS_DNAME_MAXLEN];
	for (size_t i = 0; i < conf->n_zones; i++) {
		if (dname_from_str(conf->zones[i].domain, apex) > 0 &&
		    dname_is_subdomain(wire, apex))
			return 0;
	}
	char zones[256] = "";
	size_t used = 0;
	for (size_t i = 0; i < conf->n_zones && used < sizeof(zones); i++)
		used += (size_t)snprintf(zones + used, sizeof(zones) - used, "%s%s", i ? ", " : "",
		                         conf->zones[i].domain);
	return conf_fail(ld, line, "%s: '%s' is not inside a served zone (zones: %s)", what, text,
	                 zones);
}

/* ---- datacenter lists --------------------------------------------------------------------- */

static int dc_index(conf_loader_t *ld, const char *what, const yaml_node_t *node, size_t *out)
{
	const conf_t *conf = ld->conf;
	const char *text;
	int ret = scalar(ld, what, node, &text);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < conf->n_datacenters; i++) {
		if (strcmp(conf->datacenters[i].name, text) == 0) {
			*out = i;
			return 0;
		}
	}
	if (conf->n_datacenters == 0)
		return conf_fail(ld, conf_node_line(node),
		                 "%s: unknown datacenter '%s' (no datacenters are configured)",
		                 what, text);
	char names[256] = "";
	size_t used = 0;
	for (size_t i = 0; i < conf->n_datacenters && used < sizeof(names); i++)
		used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
		                         conf->datacenters[i].name);
	return conf_fail(ld, conf_node_line(node), "%s: unknown datacenter '%s' (datacenters: %s)",
	                 what, text, names);
}

static int dclist_item(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	conf_dclist_t *list = ctx;
	size_t idx;
	int ret = dc_index(ld, what, item, &idx);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < list->n; i++) {
		if (list->dc[i] == idx)
			return conf_fail(ld, conf_node_line(item),
			                 "%s: datacenter '%s' is listed twice", what,
			                 ld->conf->datacenters[idx].name);
	}
	list->dc = xrealloc(list->dc, (list->n + 1) * sizeof(*list->dc));
	list->dc[list->n++] = idx;
	return 0;
}

static int parse_dclist(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *node,
                        conf_dclist_t *list, bool allow_empty)
{
	char what[96];
	free(list->dc);
	*list = (conf_dclist_t){0};
	return conf_for_each_item(ld, what_of(key, what, sizeof(what)), node, allow_empty,
	                          dclist_item, list);
}

/* ---- addresses ---------------------------------------------------------------------------- */

static int parse_ip(conf_loader_t *ld, const char *what, const yaml_node_t *node,
                    conf_address_t *out)
{
	const char *text;
	int ret = scalar(ld, what, node, &text);
	if (ret != 0)
		return ret;
	*out = (conf_address_t){.weight = 1};
	if (inet_pton(AF_INET, text, out->addr) == 1)
		out->family = AF_INET;
	else if (inet_pton(AF_INET6, text, out->addr) == 1)
		out->family = AF_INET6;
	else
		return conf_fail(ld, conf_node_line(node), "%s: invalid IP address '%s'", what,
		                 text);
	return 0;
}

typedef struct {
	conf_address_t **items;
	size_t *n;
	bool any_weight; /* some address gave its own weight */
} addr_list_t;

static bool same_addr(const conf_address_t *a, const conf_address_t *b)
{
	return a->family == b->family &&
	       memcmp(a->addr, b->addr, a->family == AF_INET ? 4 : 16) == 0;
}

static int address_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                           const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	char what[96];
	conf_address_t *addr = base, ip;
	if (strcmp(key->name, "probe") == 0)
		return conf_health_probe(ld, key, value, &addr->probe);
	if (strcmp(key->name, "requires") == 0)
		return conf_health_requires(ld, key, value, addr);
	/* address: keep the keys loaded before it (weight, probe, ...) */
	int ret = parse_ip(ld, what_of(key, what, sizeof(what)), value, &ip);
	if (ret == 0) {
		addr->family = ip.family;
		memcpy(addr->addr, ip.addr, sizeof(addr->addr));
	}
	return ret;
}

static int addr_item(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	addr_list_t *list = ctx;
	conf_address_t addr = {0};
	int ret;
	if (item->type == YAML_MAPPING_NODE) {
		ret = conf_load_keys(ld, "services.datacenters.addresses", &addr, item,
		                     address_node_cb, NULL);
		if (ret != 0) {
			conf_health_address_free(&addr);
			return ret;
		}
		if (addr.weight != 0)
			list->any_weight = true;
		else
			addr.weight = 1;
	} else {
		ret = parse_ip(ld, what, item, &addr);
		if (ret != 0)
			return ret;
	}
	char text[INET6_ADDRSTRLEN];
	for (size_t i = 0; i < *list->n; i++) {
		if (same_addr(&(*list->items)[i], &addr)) {
			conf_health_address_free(&addr);
			return conf_fail(
			    ld, conf_node_line(item), "%s: duplicate address '%s'", what,
			    inet_ntop(addr.family, addr.addr, text, sizeof(text)) ? text : "?");
		}
	}
	*list->items = xrealloc(*list->items, (*list->n + 1) * sizeof(**list->items));
	(*list->items)[(*list->n)++] = addr;
	return 0;
}

/* ---- datacenters -------------------------------------------------------------------------- */

static int parse_degrees(conf_loader_t *ld, const char *what, const yaml_node_t *node,
                         const char *name, double limit, double *out)
{
	const char *text;
	int ret = scalar(ld, what, node, &text);
	if (ret != 0)
		return ret;
	char *end = NULL;
	errno = 0;
	double v = strtod(text, &end);
	if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v))
		return conf_fail(ld, conf_node_line(node),
		                 "%s: expected a number of degrees, got '%s'", what, text);
	if (v < -limit || v > limit)
		return conf_fail(ld, conf_node_line(node), "%s: %s %s is out of range (%g to %g)",
		                 what, name, text, -limit, limit);
	*out = v;
	return 0;
}

static int datacenter_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                              const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	char what[96];
	conf_datacenter_t *dc = base;
	what_of(key, what, sizeof(what));
	if (strcmp(key->name, "monitor") == 0)
		return conf_health_monitor_ref(ld, key, value, &dc->monitor);
	if (strcmp(key->name, "probe") == 0)
		return conf_health_probe(ld, key, value, &dc->probe);
	/* coords */
	if (value->type != YAML_SEQUENCE_NODE ||
	    value->data.sequence.items.top - value->data.sequence.items.start != 2)
		return conf_fail(ld, conf_node_line(value),
		                 "%s: expected [latitude, longitude] in degrees", what);
	const yaml_node_item_t *it = value->data.sequence.items.start;
	int ret = parse_degrees(ld, what, conf_node(ld, it[0]), "latitude", 90, &dc->lat);
	if (ret == 0)
		ret = parse_degrees(ld, what, conf_node(ld, it[1]), "longitude", 180, &dc->lon);
	dc->has_coords = ret == 0;
	return ret;
}

int conf_gslb_load_datacenters(conf_loader_t *ld, const yaml_node_t *node)
{
	conf_t *conf = ld->conf;
	if (conf_is_null(node))
		return 0;
	if (node->type != YAML_SEQUENCE_NODE)
		return conf_fail(
		    ld, conf_node_line(node),
		    "section 'datacenters' must be a list of datacenters (- name: NAME), "
		    "got %s",
		    conf_kind_name(node));
	for (const yaml_node_item_t *it = node->data.sequence.items.start;
	     it < node->data.sequence.items.top; it++) {
		const yaml_node_t *item = conf_node(ld, *it);
		if (item->type != YAML_MAPPING_NODE)
			return conf_fail(
			    ld, conf_node_line(item),
			    "datacenters: each datacenter must be a mapping (- name: NAME, "
			    "coords: [LAT, LON]), got %s",
			    conf_kind_name(item));
		conf->datacenters = xrealloc(conf->datacenters, (conf->n_datacenters + 1) *
		                                                    sizeof(*conf->datacenters));
		conf_datacenter_t *dc = &conf->datacenters[conf->n_datacenters++];
		*dc = (conf_datacenter_t){.monitor = CONF_MONITOR_NONE,
		                          .line = (unsigned)conf_node_line(item)};
		int ret = conf_load_keys(ld, "datacenters", dc, item, datacenter_node_cb, NULL);
		size_t name_line = conf_key_line(ld, item, "name", dc->line);
		if (ret == 0)
			ret = check_name(ld, "datacenters.name", dc->name, name_line);
		if (ret == 0)
			ret = conf_health_check_datacenter(ld, dc, item);
		if (ret != 0)
			return ret;
		for (size_t i = 0; i + 1 < conf->n_datacenters; i++) {
			if (strcmp(conf->datacenters[i].name, dc->name) == 0)
				return conf_fail(
				    ld, name_line,
				    "duplicate datacenter '%s' (first defined at line %u)",
				    dc->name, conf->datacenters[i].line);
		}
	}
	return 0;
}

/* ---- maps --------------------------------------------------------------------------------- */

static int asn_item(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	conf_geoip_rule_t *rule = ctx;
	uint32_t asn;
	int ret = parse_u32(ld, what, item, 1, UINT32_MAX, &asn);
	if (ret != 0)
		return ret;
	rule->asn = xrealloc(rule->asn, (rule->n_asn + 1) * sizeof(*rule->asn));
	rule->asn[rule->n_asn++] = asn;
	return 0;
}

static int rule_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                        const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	char what[96];
	conf_geoip_rule_t *rule = base;
	if (strcmp(key->name, "asn") == 0) {
		free(rule->asn);
		rule->asn = NULL;
		rule->n_asn = 0;
		return conf_for_each_item(ld, what_of(key, what, sizeof(what)), value, false,
		                          asn_item, rule);
	}
	return parse_dclist(ld, key, value, &rule->datacenters, false);
}

static int nets_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                        const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_nets_t *nets = base;
	return parse_dclist(ld, key, value, &nets->datacenters, false);
}

static int load_nets_item(conf_loader_t *ld, const yaml_node_t *item, void *owner)
{
	conf_map_t *map = owner;
	map->nets = xrealloc(map->nets, (map->n_nets + 1) * sizeof(*map->nets));
	conf_nets_t *nets = &map->nets[map->n_nets++];
	*nets = (conf_nets_t){.line = (unsigned)conf_node_line(item)};
	int ret = conf_load_keys(ld, "maps.nets", nets, item, nets_node_cb, NULL);
	if (ret != 0)
		return ret;
	if ((nets->file != NULL) == (nets->n_cidr > 0))
		return conf_fail(ld, nets->line, "maps.nets: give either 'file' or 'cidr' (got %s)",
		                 nets->file ? "both" : "neither");
	return 0;
}

static int load_rule_item(conf_loader_t *ld, const yaml_node_t *item, void *owner)
{
	conf_map_t *map = owner;
	map->rules = xrealloc(map->rules, (map->n_rules + 1) * sizeof(*map->rules));
	conf_geoip_rule_t *rule = &map->rules[map->n_rules++];
	*rule = (conf_geoip_rule_t){.line = (unsigned)conf_node_line(item)};
	int ret = conf_load_keys(ld, "maps.geoip.rules", rule, item, rule_node_cb, NULL);
	if (ret != 0)
		return ret;
	if ((rule->match != NULL) == (rule->n_asn > 0))
		return conf_fail(
		    ld, rule->match ? conf_key_line(ld, item, "asn", rule->line) : rule->line,
		    "maps.geoip.rules: give either 'match' or 'asn' (got %s)",
		    rule->match ? "both" : "neither");
	return 0;
}

static int geoip_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                         const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	(void)key; /* rules: the only structured key */
	return conf_load_mapping_list(ld, "maps.geoip.rules", "match: AS/CN, datacenters: [...]",
	                              value, true, load_rule_item, base);
}

/* min-prefix-length: [IPv4 length, IPv6 length], like services.persist-prefix. */
static int parse_min_prefix(conf_loader_t *ld, const yaml_node_t *value, conf_map_t *map)
{
	const char *what = "maps: min-prefix-length";
	if (value->type != YAML_SEQUENCE_NODE ||
	    value->data.sequence.items.top - value->data.sequence.items.start != 2)
		return conf_fail(ld, conf_node_line(value),
		                 "%s: expected [IPv4 length, IPv6 length], e.g. [8, 16]", what);
	const yaml_node_item_t *it = value->data.sequence.items.start;
	uint32_t v4, v6;
	int ret = parse_u32(ld, what, conf_node(ld, it[0]), 0, 32, &v4);
	if (ret == 0)
		ret = parse_u32(ld, what, conf_node(ld, it[1]), 0, 128, &v6);
	if (ret == 0) {
		map->min_prefix4 = v4;
		map->min_prefix6 = v6;
	}
	return ret;
}

/* "50%" (or a bare 50), 0 to 100. */
static int parse_percent(conf_loader_t *ld, const char *what, const yaml_node_t *node,
                         unsigned *out)
{
	const char *text;
	int ret = scalar(ld, what, node, &text);
	if (ret != 0)
		return ret;
	size_t digits = strspn(text, "0123456789");
	bool ok = digits > 0 && digits <= 3 &&
	          (text[digits] == '\0' || (text[digits] == '%' && text[digits + 1] == '\0'));
	unsigned long v = ok ? strtoul(text, NULL, 10) : 0;
	if (!ok || v > 100)
		return conf_fail(
		    ld, conf_node_line(node),
		    "%s: expected a percentage from 0%% to 100%% (e.g. 50%%), got '%s'", what,
		    text);
	*out = (unsigned)v;
	return 0;
}

static int map_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                       const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_map_t *map = base;
	if (strcmp(key->name, "nets") == 0)
		return conf_load_mapping_list(ld, "maps.nets",
		                              "file: PATH or cidr: [...], datacenters: [...]",
		                              value, true, load_nets_item, map);
	if (strcmp(key->name, "default") == 0)
		return parse_dclist(ld, key, value, &map->default_dcs, true);
	if (strcmp(key->name, "min-prefix-length") == 0)
		return parse_min_prefix(ld, value, map);
	if (strcmp(key->name, "max-shrink") == 0)
		return parse_percent(ld, "maps: max-shrink", value, &map->max_shrink);
	/* geoip */
	if (value->type != YAML_MAPPING_NODE)
		return conf_fail(ld, conf_node_line(value),
		                 "maps.geoip: expected a mapping of keys (database, ...), got %s",
		                 conf_kind_name(value));
	return conf_load_keys(ld, "maps.geoip", map, value, geoip_node_cb, NULL);
}

static int map_load(conf_loader_t *ld, const char *name, const yaml_node_t *key,
                    const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_t *conf = ld->conf;
	int ret = check_name(ld, "maps", name, conf_node_line(key));
	if (ret != 0)
		return ret;
	conf->maps = xrealloc(conf->maps, (conf->n_maps + 1) * sizeof(*conf->maps));
	conf_map_t *map = &conf->maps[conf->n_maps++];
	*map = (conf_map_t){.name = xstrdup(name),
	                    .min_prefix4 = 8,
	                    .min_prefix6 = 16,
	                    .max_shrink = 50,
	                    .line = (unsigned)conf_node_line(key)};
	conf_apply_defaults("maps", map);
	conf_apply_defaults("maps.geoip", map);
	return conf_load_keys(ld, "maps", map, value, map_node_cb, NULL);
}

int conf_gslb_load_maps(conf_loader_t *ld, const yaml_node_t *node)
{
	return conf_for_each_named(ld, "maps", node, "map names to maps",
	                           "nets, geoip, default, ...", map_load, NULL);
}

/* ---- services ----------------------------------------------------------------------------- */

typedef struct {
	conf_service_t *svc;
	bool list_form;    /* `- name: DC` items: the `name` key says which datacenter */
	uint32_t *weights; /* the dc's `weights` list, applied once addresses are known */
	size_t n_weights;
	size_t weights_line;
	addr_list_t addrs;
} sdc_ctx_t;

static int weight_item(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	sdc_ctx_t *c = ctx;
	uint32_t w;
	int ret = parse_u32(ld, what, item, 1, 65535, &w);
	if (ret != 0)
		return ret;
	c->weights = xrealloc(c->weights, (c->n_weights + 1) * sizeof(*c->weights));
	c->weights[c->n_weights++] = w;
	return 0;
}

/* The datacenter named by @p node must not already serve this service. */
static int sdc_datacenter(conf_loader_t *ld, conf_service_t *svc, conf_service_dc_t *sdc,
                          const char *what, const yaml_node_t *node)
{
	size_t idx;
	int ret = dc_index(ld, what, node, &idx);
	if (ret != 0)
		return ret;
	for (size_t i = 0; i < svc->n_dcs; i++) {
		if (&svc->dcs[i] != sdc && svc->dcs[i].datacenter == idx)
			return conf_fail(ld, conf_node_line(node),
			                 "%s: datacenter '%s' is listed twice (first at line %u)",
			                 what, ld->conf->datacenters[idx].name, svc->dcs[i].line);
	}
	sdc->datacenter = idx;
	return 0;
}

static int sdc_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                       const yaml_node_t *value, void *ctx)
{
	char what[96];
	conf_service_dc_t *sdc = base;
	sdc_ctx_t *c = ctx;
	what_of(key, what, sizeof(what));
	if (strcmp(key->name, "name") == 0) {
		if (!c->list_form)
			return conf_fail(ld, conf_node_line(value),
			                 "services.datacenters.%s: 'name' is only used in the list "
			                 "form (- name: DC, addresses: [...]); here the key is the "
			                 "name",
			                 ld->conf->datacenters[sdc->datacenter].name);
		return sdc_datacenter(ld, c->svc, sdc, "services.datacenters.name", value);
	}
	if (strcmp(key->name, "monitor") == 0)
		return conf_health_monitor_ref(ld, key, value, &sdc->monitor);
	if (strcmp(key->name, "metrics") == 0)
		return conf_health_metrics_ref(ld, key, value, &sdc->metrics);
	if (strcmp(key->name, "weights") == 0) {
		c->weights_line = conf_node_line(value);
		return conf_for_each_item(ld, what, value, false, weight_item, c);
	}
	/* addresses */
	c->addrs = (addr_list_t){.items = &sdc->addresses, .n = &sdc->n_addresses};
	return conf_for_each_item(ld, what, value, false, addr_item, &c->addrs);
}

/*
 * One datacenter of a service: @p name_node is the mapping key naming it (mapping form) or
 * NULL (list form: the item's `name` key does); @p v is its mapping of keys.
 */
static int load_service_dc(conf_loader_t *ld, conf_service_t *svc, const yaml_node_t *name_node,
                           const yaml_node_t *v)
{
	int ret = 0;
	svc->dcs = xrealloc(svc->dcs, (svc->n_dcs + 1) * sizeof(*svc->dcs));
	conf_service_dc_t *sdc = &svc->dcs[svc->n_dcs++];
	*sdc = (conf_service_dc_t){.datacenter = SIZE_MAX,
	                           .monitor = CONF_MONITOR_NONE,
	                           .metrics = CONF_MONITOR_NONE,
	                           .line = (unsigned)conf_node_line(name_node ? name_node : v)};
	conf_apply_defaults("services.datacenters", sdc);
	if (name_node) {
		ret = sdc_datacenter(ld, svc, sdc, "services.datacenters", name_node);
		if (ret != 0)
			return ret;
		if (v->type != YAML_MAPPING_NODE)
			return conf_fail(
			    ld, conf_node_line(v),
			    "services.datacenters.%s: expected a mapping of keys (addresses, ...), "
			    "got %s",
			    ld->conf->datacenters[sdc->datacenter].name,
			    conf_is_null(v) ? "nothing" : conf_kind_name(v));
	}
	sdc_ctx_t c = {.svc = svc, .list_form = !name_node};
	ret = conf_load_keys(ld, "services.datacenters", sdc, v, sdc_node_cb, &c);
	if (ret == 0 && sdc->datacenter == SIZE_MAX)
		ret =
		    conf_fail(ld, sdc->line,
		              "missing required key 'name' in section 'services.datacenters' (the "
		              "list form names each datacenter: - name: DC, addresses: [...])");
	if (ret == 0 && c.n_weights > 0) {
		if (c.addrs.any_weight)
			ret = conf_fail(
			    ld, c.weights_line,
			    "services.datacenters.weights: give weights either in 'weights' "
			    "or per address, not both");
		else if (c.n_weights != sdc->n_addresses)
			ret =
			    conf_fail(ld, c.weights_line,
			              "services.datacenters.weights: %zu weights for %zu addresses",
			              c.n_weights, sdc->n_addresses);
		for (size_t i = 0; ret == 0 && i < c.n_weights; i++)
			sdc->addresses[i].weight = c.weights[i];
	}
	free(c.weights);
	return ret;
}

static int fallback_item(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	if (item->type != YAML_SCALAR_NODE)
		return conf_fail(ld, conf_node_line(item), "%s: list items must be single values",
		                 what);
	return addr_item(ld, what, item, ctx);
}

static int service_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                           const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	char what[96];
	conf_service_t *svc = base;
	const conf_t *conf = ld->conf;
	what_of(key, what, sizeof(what));
	int ret = 0;
	if (strcmp(key->name, "monitor") == 0)
		return conf_health_monitor_ref(ld, key, value, &svc->monitor);
	if (strcmp(key->name, "metrics") == 0)
		return conf_health_metrics_ref(ld, key, value, &svc->metrics);
	if (strcmp(key->name, "map") == 0) {
		const char *text;
		ret = scalar(ld, what, value, &text);
		if (ret != 0)
			return ret;
		for (size_t i = 0; i < conf->n_maps; i++) {
			if (strcmp(conf->maps[i].name, text) == 0) {
				svc->map = i;
				return 0;
			}
		}
		char names[256] = "";
		size_t used = 0;
		for (size_t i = 0; i < conf->n_maps && used < sizeof(names); i++)
			used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s",
			                         i ? ", " : "", conf->maps[i].name);
		return conf_fail(ld, conf_node_line(value), "%s: unknown map '%s' (%s%s)", what,
		                 text, conf->n_maps ? "maps: " : "no maps are configured", names);
	}
	if (strcmp(key->name, "fallback") == 0) {
		free(svc->fallback);
		svc->fallback = NULL;
		svc->n_fallback = 0;
		addr_list_t list = {.items = &svc->fallback, .n = &svc->n_fallback};
		return conf_for_each_item(ld, what, value, false, fallback_item, &list);
	}
	if (strcmp(key->name, "qos") == 0) {
		if (value->type != YAML_MAPPING_NODE)
			return conf_fail(ld, conf_node_line(value),
			                 "%s: expected a mapping of coefficients, e.g. { rtt: 50, "
			                 "completion-rate: 5 }, got %s",
			                 what,
			                 conf_is_null(value) ? "nothing" : conf_kind_name(value));
		return conf_load_keys(ld, "services.qos", svc, value, NULL, NULL);
	}
	if (strcmp(key->name, "persist-prefix") == 0) {
		if (value->type != YAML_SEQUENCE_NODE ||
		    value->data.sequence.items.top - value->data.sequence.items.start != 2)
			return conf_fail(ld, conf_node_line(value),
			                 "%s: expected [IPv4 length, IPv6 length], e.g. [24, 56]",
			                 what);
		const yaml_node_item_t *it = value->data.sequence.items.start;
		uint32_t v4, v6;
		ret = parse_u32(ld, what, conf_node(ld, it[0]), 0, 32, &v4);
		if (ret == 0)
			ret = parse_u32(ld, what, conf_node(ld, it[1]), 0, 128, &v6);
		if (ret == 0) {
			svc->persist_prefix4 = v4;
			svc->persist_prefix6 = v6;
		}
		return ret;
	}
	/*
	 * datacenters, in failover order: a list of `- name: DC, ...` mappings, or the older
	 * mapping of datacenter name -> keys, whose order a YAML tool may re-sort.
	 */
	if (value->type == YAML_SEQUENCE_NODE) {
		if (value->data.sequence.items.start == value->data.sequence.items.top)
			return conf_fail(ld, conf_node_line(value),
			                 "%s: needs at least one datacenter", what);
		for (const yaml_node_item_t *it = value->data.sequence.items.start;
		     it < value->data.sequence.items.top && ret == 0; it++) {
			const yaml_node_t *item = conf_node(ld, *it);
			if (item->type != YAML_MAPPING_NODE)
				return conf_fail(ld, conf_node_line(item),
				                 "%s: each entry must be a mapping (- name: DC, "
				                 "addresses: [...]), got %s",
				                 what, conf_kind_name(item));
			ret = load_service_dc(ld, svc, NULL, item);
		}
		return ret;
	}
	if (value->type != YAML_MAPPING_NODE)
		return conf_fail(ld, conf_node_line(value),
		                 "%s: expected a list of datacenters in failover order (- name: "
		                 "DC, addresses: [...]), got %s",
		                 what, conf_is_null(value) ? "nothing" : conf_kind_name(value));
	if (value->data.mapping.pairs.start == value->data.mapping.pairs.top)
		return conf_fail(ld, conf_node_line(value), "%s: needs at least one datacenter",
		                 what);
	for (const yaml_node_pair_t *p = value->data.mapping.pairs.start;
	     p < value->data.mapping.pairs.top && ret == 0; p++) {
		const yaml_node_t *k = conf_node(ld, p->key);
		const char *name = conf_key_text(ld, k, &ret);
		if (!name)
			return ret;
		ret = conf_check_duplicate_key(ld, value, p, name, what);
		if (ret == 0)
			ret = load_service_dc(ld, svc, k, conf_node(ld, p->value));
	}
	return ret;
}

/* Names answered by GSLB (services and whoami) must be unique. */
static int check_gslb_name_unique(conf_loader_t *ld, const char *what, const char *text,
                                  const uint8_t *wire, size_t line, size_t n_services)
{
	const conf_t *conf = ld->conf;
	uint8_t other[DNS_DNAME_MAXLEN];
	for (size_t i = 0; i < n_services; i++) {
		if (dname_from_str(conf->services[i].name, other) > 0 && dname_equal(wire, other))
			return conf_fail(ld, line, "%s: '%s' is already a service (line %u)", what,
			                 text, conf->services[i].line);
	}
	for (size_t i = 0; i < conf->n_whoami; i++) {
		if (dname_from_str(conf->whoami[i], other) > 0 && dname_equal(wire, other))
			return conf_fail(ld, line, "%s: '%s' is listed twice", what, text);
	}
	return 0;
}

/* The policies that order by measurements (gslb/policy.h's measured kinds). */
static bool policy_is_measured(const char *policy)
{
	static const char *const measured[] = {
	    "rtt",      "completion-rate", "hops", "qos", "least-connections",
	    "capacity", "packet-rate",     "kbps"};
	for (size_t i = 0; policy && i < STEER_ARRAY_LEN(measured); i++)
		if (strcmp(policy, measured[i]) == 0)
			return true;
	return false;
}

/* fallback-policy and qos belong to measured policies; geo needs a map to fall back on. */
static int check_measured_keys(conf_loader_t *ld, const yaml_node_t *item,
                               const conf_service_t *svc)
{
	size_t fb_line = conf_key_line(ld, item, "fallback-policy", 0);
	size_t qos_line = conf_key_line(ld, item, "qos", 0);
	if (fb_line && !policy_is_measured(svc->policy))
		return conf_fail(ld, fb_line,
		                 "services.fallback-policy: only used by a measured policy (rtt, "
		                 "completion-rate, hops, qos, least-connections, capacity, "
		                 "packet-rate, kbps), not '%s'",
		                 svc->policy ? svc->policy : "failover");
	if (qos_line && (!svc->policy || strcmp(svc->policy, "qos") != 0))
		return conf_fail(ld, qos_line, "services.qos: only used by policy qos, not '%s'",
		                 svc->policy ? svc->policy : "failover");
	if (svc->fallback_policy && strcmp(svc->fallback_policy, "geo") == 0 &&
	    svc->map == SIZE_MAX)
		return conf_fail(ld, fb_line, "services.fallback-policy: geo needs a 'map'");
	return 0;
}

static int load_service_item(conf_loader_t *ld, const yaml_node_t *item, void *owner)
{
	conf_t *conf = owner;
	conf->services = xrealloc(conf->services, (conf->n_services + 1) * sizeof(*conf->services));
	conf_service_t *svc = &conf->services[conf->n_services++];
	*svc = (conf_service_t){.map = SIZE_MAX,
	                        .monitor = CONF_MONITOR_NONE,
	                        .metrics = CONF_MONITOR_NONE,
	                        .qos = {[CONF_QOS_PACKET_RATE] = 1,
	                                [CONF_QOS_RTT] = 50,
	                                [CONF_QOS_COMPLETION_RATE] = 5,
	                                [CONF_QOS_LINK_CAPACITY] = 30,
	                                [CONF_QOS_KBPS] = 3},
	                        .persist_prefix4 = 24,
	                        .persist_prefix6 = 56,
	                        .line = (unsigned)conf_node_line(item)};
	conf_apply_defaults("services", svc);
	int ret = conf_load_keys(ld, "services", svc, item, service_node_cb, NULL);
	if (ret == 0)
		ret = conf_health_check_service(ld, svc);
	if (ret != 0)
		return ret;
	if (svc->n_fallback > 0 && svc->fallback_cname)
		return conf_fail(ld, conf_key_line(ld, item, "fallback-cname", svc->line),
		                 "services: give either 'fallback' or 'fallback-cname', not both");
	ret = check_measured_keys(ld, item, svc);
	if (ret != 0)
		return ret;
	uint8_t wire[DNS_DNAME_MAXLEN];
	size_t name_line = conf_key_line(ld, item, "name", svc->line);
	ret = parse_dname(ld, "services.name", svc->name, name_line, wire);
	if (ret == 0)
		ret = check_in_zone(ld, "services.name", svc->name, wire, name_line);
	if (ret == 0)
		ret = check_gslb_name_unique(ld, "services.name", svc->name, wire, name_line,
		                             conf->n_services - 1);
	return ret;
}

int conf_gslb_load_services(conf_loader_t *ld, const yaml_node_t *node)
{
	if (!conf_is_null(node) && node->type != YAML_SEQUENCE_NODE)
		return conf_fail(
		    ld, conf_node_line(node),
		    "section 'services' must be a list of services (- name: NAME), got %s",
		    conf_kind_name(node));
	return conf_load_mapping_list(ld, "services", "name: NAME, policy: ..., datacenters: {...}",
	                              node, true, load_service_item, ld->conf);
}

/* ---- whoami and gslb ---------------------------------------------------------------------- */

static int whoami_item(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	(void)ctx;
	conf_t *conf = ld->conf;
	const char *text;
	uint8_t wire[DNS_DNAME_MAXLEN];
	int ret = scalar(ld, what, item, &text);
	size_t line = conf_node_line(item);
	if (ret == 0)
		ret = parse_dname(ld, what, text, line, wire);
	if (ret == 0)
		ret = check_in_zone(ld, what, text, wire, line);
	if (ret == 0)
		ret = check_gslb_name_unique(ld, what, text, wire, line, conf->n_services);
	if (ret != 0)
		return ret;
	conf->whoami = xrealloc(conf->whoami, (conf->n_whoami + 1) * sizeof(*conf->whoami));
	conf->whoami[conf->n_whoami++] = xstrdup(text);
	return 0;
}

int conf_gslb_load_whoami(conf_loader_t *ld, const yaml_node_t *node)
{
	return conf_for_each_item(ld, "whoami", node, true, whoami_item, NULL);
}

static int load_override_item(conf_loader_t *ld, const yaml_node_t *item, void *owner)
{
	conf_t *conf = owner;
	conf->overrides =
	    xrealloc(conf->overrides, (conf->n_overrides + 1) * sizeof(*conf->overrides));
	conf_override_t *ov = &conf->overrides[conf->n_overrides++];
	*ov = (conf_override_t){.line = (unsigned)conf_node_line(item)};
	return conf_load_keys(ld, "gslb.overrides", ov, item, NULL, NULL);
}

static int gslb_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                        const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	(void)key; /* overrides: the only structured key */
	return conf_load_mapping_list(ld, "gslb.overrides", "pattern: GLOB, state: up|down", value,
	                              true, load_override_item, base);
}

int conf_gslb_load_gslb(conf_loader_t *ld, const yaml_node_t *node)
{
	if (conf_is_null(node))
		return 0;
	if (node->type != YAML_MAPPING_NODE)
		return conf_fail(ld, conf_node_line(node),
		                 "section 'gslb' must be a mapping of keys, got %s",
		                 conf_kind_name(node));
	return conf_load_keys(ld, "gslb", ld->conf, node, gslb_node_cb, NULL);
}

/* ---- freeing ------------------------------------------------------------------------------ */

static void map_free(conf_map_t *map)
{
	for (size_t i = 0; i < map->n_nets; i++) {
		conf_free_fields("maps.nets", &map->nets[i]);
		free(map->nets[i].datacenters.dc);
	}
	free(map->nets);
	for (size_t i = 0; i < map->n_rules; i++) {
		conf_free_fields("maps.geoip.rules", &map->rules[i]);
		free(map->rules[i].asn);
		free(map->rules[i].datacenters.dc);
	}
	free(map->rules);
	free(map->default_dcs.dc);
	conf_free_fields("maps.geoip", map);
	conf_free_fields("maps", map);
	free(map->name);
}

static void service_free(conf_service_t *svc)
{
	for (size_t i = 0; i < svc->n_dcs; i++) {
		conf_free_fields("services.datacenters", &svc->dcs[i]);
		for (size_t a = 0; a < svc->dcs[i].n_addresses; a++)
			conf_health_address_free(&svc->dcs[i].addresses[a]);
		free(svc->dcs[i].addresses);
	}
	free(svc->dcs);
	free(svc->fallback);
	conf_free_fields("services", svc);
}

void conf_gslb_free(conf_t *conf)
{
	for (size_t i = 0; i < conf->n_datacenters; i++) {
		conf_free_fields("datacenters", &conf->datacenters[i]);
		free(conf->datacenters[i].probe);
	}
	free(conf->datacenters);
	for (size_t i = 0; i < conf->n_maps; i++)
		map_free(&conf->maps[i]);
	free(conf->maps);
	for (size_t i = 0; i < conf->n_services; i++)
		service_free(&conf->services[i]);
	free(conf->services);
	for (size_t i = 0; i < conf->n_whoami; i++)
		free(conf->whoami[i]);
	free(conf->whoami);
	for (size_t i = 0; i < conf->n_overrides; i++)
		conf_free_fields("gslb.overrides", &conf->overrides[i]);
	free(conf->overrides);
	conf_free_fields("gslb", conf);
	conf->datacenters = NULL;
	conf->maps = NULL;
	conf->services = NULL;
	conf->whoami = NULL;
	conf->overrides = NULL;
	conf->n_datacenters = conf->n_maps = conf->n_services = conf->n_whoami = 0;
	conf->n_overrides = 0;
}
