/*
 * The zone transfer keys of a zone (secondary side: `primaries`, `notify-allow`, the limits;
 * primary side: `notify`) and `server.storage`, where a secondary zone without `file` is
 * kept. What the remotes and limits mean at run time is xfr/'s business; this file only
 * guarantees well-formed addresses, key names that exist, and a file for every zone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/err.h"
#include "conf/conf_int.h"

/* The text of a scalar, or NULL with an error naming @p what. */
static const char *scalar(conf_loader_t *ld, const char *what, const yaml_node_t *node, int *ret)
{
	if (node->type != YAML_SCALAR_NODE || conf_is_null(node) ||
	    strlen((const char *)node->data.scalar.value) != node->data.scalar.length) {
		*ret = conf_fail(ld, conf_node_line(node), "%s: expected a single value, got %s",
		                 what, conf_kind_name(node));
		return NULL;
	}
	return (const char *)node->data.scalar.value;
}

/* A key name must be one of `keys:` (when that section is loaded before us, see finish). */
static int remote_item(conf_loader_t *ld, const char *what, const yaml_node_t *item,
                       conf_remote_t *r)
{
	char msg[256];
	int ret = 0;
	*r = (conf_remote_t){.line = (unsigned)conf_node_line(item)};
	if (item->type == YAML_SCALAR_NODE) {
		const char *text = scalar(ld, what, item, &ret);
		if (text == NULL)
			return ret;
		if (conf_peer_address(text, &r->addr, msg, sizeof(msg)) != 0)
			return conf_fail(ld, conf_node_line(item), "%s: %s", what, msg);
		return 0;
	}
	if (item->type != YAML_MAPPING_NODE)
		return conf_fail(
		    ld, conf_node_line(item),
		    "%s: each entry is an address or a mapping (address, key, source), "
		    "got %s",
		    what, conf_kind_name(item));
	bool has_addr = false;
	for (const yaml_node_pair_t *p = item->data.mapping.pairs.start;
	     p < item->data.mapping.pairs.top; p++) {
		const yaml_node_t *k = conf_node(ld, p->key);
		const char *name = conf_key_text(ld, k, &ret);
		if (name == NULL)
			return ret;
		if ((ret = conf_check_duplicate_key(ld, item, p, name, what)) != 0)
			return ret;
		const yaml_node_t *v = conf_node(ld, p->value);
		const char *text = scalar(ld, what, v, &ret);
		if (text == NULL)
			return ret;
		if (strcmp(name, "address") == 0) {
			if (conf_peer_address(text, &r->addr, msg, sizeof(msg)) != 0)
				return conf_fail(ld, conf_node_line(v), "%s: %s", what, msg);
			has_addr = true;
		} else if (strcmp(name, "key") == 0) {
			free(r->key);
			r->key = xstrdup(text);
		} else if (strcmp(name, "source") == 0) {
			if (conf_source_address(text, &r->source, msg, sizeof(msg)) != 0)
				return conf_fail(ld, conf_node_line(v), "%s: %s", what, msg);
		} else {
			return conf_fail(ld, conf_node_line(k),
			                 "%s: unknown key '%s' (expected address, key, source)",
			                 what, name);
		}
	}
	if (!has_addr)
		return conf_fail(ld, conf_node_line(item), "%s: missing required key 'address'",
		                 what);
	if (r->source.sa.sa_family != 0 && r->source.sa.sa_family != r->addr.sa.sa_family)
		return conf_fail(ld, conf_node_line(item),
		                 "%s: source and address are of different families", what);
	return 0;
}

static int load_remotes(conf_loader_t *ld, const char *what, const yaml_node_t *value,
                        conf_remote_t **list, size_t *n)
{
	if (value->type != YAML_SEQUENCE_NODE) {
		if (conf_is_null(value))
			return 0;
		*list = xrealloc(*list, (*n + 1) * sizeof(**list));
		return remote_item(ld, what, value, &(*list)[(*n)++]);
	}
	for (const yaml_node_item_t *it = value->data.sequence.items.start;
	     it < value->data.sequence.items.top; it++) {
		*list = xrealloc(*list, (*n + 1) * sizeof(**list));
		/* counted even when half-filled, so that it is freed */
		int ret = remote_item(ld, what, conf_node(ld, *it), &(*list)[(*n)++]);
		if (ret != 0)
			return ret;
	}
	return 0;
}

static int load_max_records(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                            uint64_t *out)
{
	const char *text = NULL;
	int ret = conf_scalar_text(ld, key, value, &text);
	if (ret != 0)
		return ret;
	char *end = NULL;
	unsigned long long n = text[0] >= '0' && text[0] <= '9' ? strtoull(text, &end, 10) : 0;
	if (end == NULL || *end != '\0' || n < 1 || n > 1000000000ULL)
		return conf_fail(ld, conf_node_line(value),
		                 "zones.max-records: expected a number of records from 1 to "
		                 "1000000000, got '%s'",
		                 text);
	*out = n;
	return 0;
}

int conf_xfr_zone_node(conf_loader_t *ld, const conf_key_t *key, void *base,
                       const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_zone_t *z = base;
	if (strcmp(key->name, "primaries") == 0)
		return load_remotes(ld, "zones.primaries", value, &z->primaries, &z->n_primaries);
	if (strcmp(key->name, "notify") == 0)
		return load_remotes(ld, "zones.notify", value, &z->notify, &z->n_notify);
	if (strcmp(key->name, "notify-allow") == 0)
		return conf_acl_load(ld, "zones.notify-allow", value, &z->notify_allow,
		                     &z->n_notify_allow);
	if (strcmp(key->name, "max-records") == 0)
		return load_max_records(ld, key, value, &z->max_records);
	return conf_zone_node(ld, key, base, value, ctx);
}

int conf_xfr_zone_check(conf_loader_t *ld, conf_zone_t *z, const yaml_node_t *map)
{
	size_t line = conf_node_line(map);
	if (z->max_records == 0)
		z->max_records = 5000000;
	if (z->file == NULL && z->n_primaries == 0)
		return conf_fail(ld, line, "missing required key 'file' in section 'zones'");
	if (z->refresh_min > z->refresh_max)
		return conf_fail(ld, conf_key_line(ld, map, "refresh-min", line),
		                 "zones.refresh-min is above zones.refresh-max");
	if (z->n_notify_allow > 0 && z->n_primaries == 0)
		return conf_fail(ld, conf_key_line(ld, map, "notify-allow", line),
		                 "zones.notify-allow needs `primaries` (only a secondary zone "
		                 "accepts NOTIFY)");
	return 0;
}

int conf_xfr_finish(conf_loader_t *ld)
{
	conf_t *conf = ld->conf;
	for (size_t i = 0; i < conf->n_zones; i++) {
		conf_zone_t *z = &conf->zones[i];
		if (z->file != NULL)
			continue;
		/* The apex as written, without its trailing dot, names the file. */
		size_t n = strlen(z->domain);
		if (n > 1 && z->domain[n - 1] == '.')
			n--;
		size_t sl = strlen(conf->storage);
		z->file = xmalloc(sl + 1 + n + sizeof(".zone"));
		sprintf(z->file, "%s/%.*s.zone", conf->storage, (int)n, z->domain);
		if (strchr(z->domain, '/') != NULL)
			return conf_fail(ld, z->line, "zone '%s': a name with '/' needs `file`",
			                 z->domain);
	}
	return 0;
}

void conf_xfr_zone_free(conf_zone_t *z)
{
	for (size_t i = 0; i < z->n_primaries; i++)
		free(z->primaries[i].key);
	free(z->primaries);
	for (size_t i = 0; i < z->n_notify; i++)
		free(z->notify[i].key);
	free(z->notify);
	for (size_t i = 0; i < z->n_notify_allow; i++)
		free(z->notify_allow[i].key);
	free(z->notify_allow);
	z->primaries = z->notify = NULL;
	z->notify_allow = NULL;
	z->n_primaries = z->n_notify = z->n_notify_allow = 0;
}
