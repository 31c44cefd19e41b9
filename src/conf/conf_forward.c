/*
 * The caching forwarder's part of the configuration: the `forward` section (allow-recursion,
 * the cache, the forwarding groups with their upstreams and probe settings) and the quick-mode
 * arguments `--forward` and `--allow-recursion`. Scalar keys go through the generic parsers
 * (conf_load_keys()); addresses, lists and the cross-checks (unique domains and names, address
 * families, probe timing, TTL order) are here, so every error carries its file:line. What an
 * upstream definition means at run time is fwd/'s business; this file only guarantees that
 * the engine is given values it accepts. Control thread only.
 */
#include "conf/conf_int.h"

#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/err.h"
#include "dns/dname.h"

/* Upstreams per group: the forwarder keeps a group's tried members in a 64-bit mask. */
#define GROUP_MAX_UPSTREAMS 64
/* Recursive probes ask <nonce>.<probe name>; the nonce label is 24 bytes plus its length. */
#define PROBE_NONCE_WIRE 25
/* Room for a message before the "file:line: " prefix. */
#define MSG_MAX 512

/* ---- shared by the YAML loader and quick mode ---------------------------------------------- */

static const char *family_name(const steer_sockaddr_t *a)
{
	return a->sa.sa_family == AF_INET6 ? "IPv6" : "IPv4";
}

/* The family of the source must match the upstream's, or no query could leave. */
static int check_families(const conf_upstream_t *up, char *msg, size_t len)
{
	char a[STEER_SOCKADDR_STRLEN];
	if (up->source.sa.sa_family == 0 || up->source.sa.sa_family == up->address.sa.sa_family)
		return 0;
	snprintf(msg, len, "source is %s but address %s is %s", family_name(&up->source),
	         steer_sockaddr_str(&up->address, a, sizeof(a)), family_name(&up->address));
	return -1;
}

/* Upstream names appear in logs and steerctl output, one word each. */
static int check_upstream_name(const char *name, char *msg, size_t len)
{
	size_t n = strlen(name);
	if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
	    n) {
		snprintf(msg, len, "'%s' may only contain letters, digits, '-', '_' and '.'", name);
		return -1;
	}
	return 0;
}

/* The upstream of any group named @p name (case-insensitive), other than @p self, or NULL. */
static const conf_upstream_t *find_upstream(const conf_forward_t *fwd, const char *name,
                                            const conf_upstream_t *self)
{
	for (size_t g = 0; g < fwd->n_groups; g++) {
		for (size_t i = 0; i < fwd->groups[g].n_upstreams; i++) {
			const conf_upstream_t *u = &fwd->groups[g].upstreams[i];
			if (u != self && u->name && strcasecmp(u->name, name) == 0)
				return u;
		}
	}
	return NULL;
}

static conf_upstream_t *upstream_append(conf_fwd_group_t *g)
{
	g->upstreams = xrealloc(g->upstreams, (g->n_upstreams + 1) * sizeof(*g->upstreams));
	conf_upstream_t *up = &g->upstreams[g->n_upstreams++];
	*up = (conf_upstream_t){0};
	return up;
}

static conf_fwd_group_t *group_append(conf_forward_t *fwd)
{
	fwd->groups = xrealloc(fwd->groups, (fwd->n_groups + 1) * sizeof(*fwd->groups));
	conf_fwd_group_t *g = &fwd->groups[fwd->n_groups++];
	*g = (conf_fwd_group_t){0};
	conf_apply_defaults("forward.groups", g);
	conf_apply_defaults("forward.groups.probe", g);
	return g;
}

/* The policy as the table spells it (the parser accepts any case). */
static void canonical_policy(conf_fwd_group_t *g)
{
	const conf_key_t *key = conf_find_key("forward.groups", "policy");
	STEER_ASSERT(key && g->policy);
	for (const conf_enum_t *e = key->enums; e->name; e++) {
		if (strcasecmp(e->name, g->policy) == 0 && strcmp(e->name, g->policy) != 0) {
			free(g->policy);
			g->policy = xstrdup(e->name);
		}
	}
}

/* The domain in its canonical form: lowercase with the trailing dot. */
static void canonical_domain(conf_fwd_group_t *g, const uint8_t *wire)
{
	char text[DNAME_STR_MAXLEN];
	dname_to_str(wire, text, sizeof(text));
	free(g->domain);
	g->domain = xstrdup(text);
}

/* Index of an earlier group whose domain equals @p wire (lowercased), or -1. */
static long find_domain(const conf_forward_t *fwd, const uint8_t *wire, size_t before)
{
	uint8_t other[DNS_DNAME_MAXLEN];
	for (size_t i = 0; i < before; i++) {
		if (dname_from_str(fwd->groups[i].domain, other) > 0) {
			dname_lower(other);
			if (dname_equal(other, wire))
				return (long)i;
		}
	}
	return -1;
}

/* ---- the YAML section ---------------------------------------------------------------------- */

/* A nested mapping of table keys (`cache`, `probe`); null keeps the defaults. */
static int load_nested(conf_loader_t *ld, const conf_key_t *key, const char *section, void *base,
                       const yaml_node_t *value)
{
	if (conf_is_null(value))
		return 0;
	if (value->type != YAML_MAPPING_NODE)
		return conf_fail(ld, conf_node_line(value),
		                 "%s.%s: expected a mapping of keys, got %s", key->section,
		                 key->name, conf_kind_name(value));
	return conf_load_keys(ld, section, base, value, NULL, NULL);
}

static int upstream_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                            const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_upstream_t *up = base;
	char msg[MSG_MAX];
	const char *text;
	int ret = conf_scalar_text(ld, key, value, &text);
	if (ret != 0)
		return ret;
	bool is_address = strcmp(key->name, "address") == 0;
	int bad = is_address ? conf_peer_address(text, &up->address, msg, sizeof(msg))
	                     : conf_source_address(text, &up->source, msg, sizeof(msg));
	if (bad)
		return conf_fail(ld, conf_node_line(value), "%s.%s: %s", key->section, key->name,
		                 msg);
	return 0;
}

static int load_upstream(conf_loader_t *ld, const yaml_node_t *item, void *owner)
{
	conf_fwd_group_t *g = owner;
	char msg[MSG_MAX];
	const char *what = "forward.groups.upstreams";
	if (g->n_upstreams == GROUP_MAX_UPSTREAMS)
		return conf_fail(ld, conf_node_line(item), "%s: at most %d upstreams per group",
		                 what, GROUP_MAX_UPSTREAMS);
	conf_upstream_t *up = upstream_append(g);
	up->line = (unsigned)conf_node_line(item);
	int ret = conf_load_keys(ld, what, up, item, upstream_node_cb, NULL);
	if (ret != 0)
		return ret;
	size_t name_line = conf_key_line(ld, item, "name", up->line);
	if (check_upstream_name(up->name, msg, sizeof(msg)) != 0)
		return conf_fail(ld, name_line, "%s.name: %s", what, msg);
	const conf_upstream_t *dup = find_upstream(&ld->conf->forward, up->name, up);
	if (dup)
		return conf_fail(ld, name_line,
		                 "duplicate upstream '%s' (first defined at line %u)", up->name,
		                 dup->line);
	if (check_families(up, msg, sizeof(msg)) != 0)
		return conf_fail(ld, conf_key_line(ld, item, "source", up->line),
		                 "%s: upstream '%s': %s", what, up->name, msg);
	if (up->link && (strchr(up->link, '/') || strchr(up->link, ' ') ||
	                 strcmp(up->link, ".") == 0 || strcmp(up->link, "..") == 0))
		return conf_fail(ld, conf_key_line(ld, item, "link", up->line),
		                 "%s.link: '%s' is not a network device name", what, up->link);
	return 0;
}

static int group_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                         const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_fwd_group_t *g = base;
	if (strcmp(key->name, "probe") == 0)
		return load_nested(ld, key, "forward.groups.probe", g, value);
	STEER_ASSERT(strcmp(key->name, "upstreams") == 0);
	return conf_load_mapping_list(ld, "forward.groups.upstreams", "name: NAME, address: IP",
	                              value, false, load_upstream, g);
}

/* The probe's timing and name: values the engine takes without a second look. */
static int check_probe(conf_loader_t *ld, const conf_fwd_group_t *g, const yaml_node_t *item)
{
	const yaml_node_t *probe = NULL;
	for (const yaml_node_pair_t *p = item->data.mapping.pairs.start;
	     p < item->data.mapping.pairs.top; p++) {
		const yaml_node_t *k = conf_node(ld, p->key);
		if (strcmp((const char *)k->data.scalar.value, "probe") == 0)
			probe = conf_node(ld, p->value);
	}
	size_t line = conf_key_line(ld, item, "probe", g->line);
	bool map = probe && probe->type == YAML_MAPPING_NODE;
	if (g->probe_timeout >= g->probe_interval) {
		char t[32], i[32];
		return conf_fail(
		    ld,
		    map ? conf_key_line(ld, probe, "timeout",
		                        conf_key_line(ld, probe, "interval", line))
		        : line,
		    "forward.groups: %s: probe timeout %s must be less than interval %s", g->domain,
		    conf_duration_str(g->probe_timeout, t, sizeof(t)),
		    conf_duration_str(g->probe_interval, i, sizeof(i)));
	}
	uint8_t wire[DNS_DNAME_MAXLEN];
	if (g->probe_name && dname_from_str(g->probe_name, wire) > 0 &&
	    dname_len(wire) + PROBE_NONCE_WIRE > DNS_DNAME_MAXLEN)
		return conf_fail(
		    ld, map ? conf_key_line(ld, probe, "name", line) : line,
		    "forward.groups.probe.name: '%s' is too long for a probe name (the "
		    "nonce label takes %d of the %d bytes of a name)",
		    g->probe_name, PROBE_NONCE_WIRE, DNS_DNAME_MAXLEN);
	return 0;
}

static int load_group(conf_loader_t *ld, const yaml_node_t *item, void *owner)
{
	conf_forward_t *fwd = owner;
	conf_fwd_group_t *g = group_append(fwd);
	g->line = (unsigned)conf_node_line(item);
	int ret = conf_load_keys(ld, "forward.groups", g, item, group_node_cb, NULL);
	if (ret != 0)
		return ret;
	uint8_t wire[DNS_DNAME_MAXLEN];
	STEER_ASSERT(dname_from_str(g->domain, wire) > 0); /* validated as a DNAME */
	dname_lower(wire);
	canonical_domain(g, wire);
	canonical_policy(g);
	long first = find_domain(fwd, wire, fwd->n_groups - 1);
	if (first >= 0)
		return conf_fail(ld, conf_key_line(ld, item, "domain", g->line),
		                 "duplicate forward group '%s' (first defined at line %u)",
		                 g->domain, fwd->groups[first].line);
	return check_probe(ld, g, item);
}

static int forward_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                           const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_forward_t *fwd = base;
	if (strcmp(key->name, "cache") == 0)
		return load_nested(ld, key, "forward.cache", fwd, value);
	STEER_ASSERT(strcmp(key->name, "groups") == 0);
	return conf_load_mapping_list(ld, "forward.groups", "domain: NAME, upstreams: [...]", value,
	                              true, load_group, fwd);
}

int conf_forward_load(conf_loader_t *ld, const yaml_node_t *node)
{
	conf_forward_t *fwd = &ld->conf->forward;
	if (conf_is_null(node))
		return 0;
	if (node->type != YAML_MAPPING_NODE)
		return conf_fail(ld, conf_node_line(node),
		                 "section 'forward' must be a mapping of keys, got %s",
		                 conf_kind_name(node));
	fwd->line = (unsigned)conf_node_line(node);
	int ret = conf_load_keys(ld, "forward", fwd, node, forward_node_cb, NULL);
	if (ret != 0)
		return ret;
	if (fwd->cache_min_ttl > fwd->cache_max_ttl) {
		const yaml_node_t *cache = NULL;
		for (const yaml_node_pair_t *p = node->data.mapping.pairs.start;
		     p < node->data.mapping.pairs.top; p++) {
			const yaml_node_t *k = conf_node(ld, p->key);
			if (strcmp((const char *)k->data.scalar.value, "cache") == 0)
				cache = conf_node(ld, p->value);
		}
		char lo[32], hi[32];
		size_t line = conf_key_line(ld, node, "cache", fwd->line);
		if (cache && cache->type == YAML_MAPPING_NODE)
			line = conf_key_line(ld, cache, "min-ttl", line);
		return conf_fail(
		    ld, line, "forward.cache: min-ttl %s is above max-ttl %s",
		    conf_duration_str((uint64_t)fwd->cache_min_ttl * 1000, lo, sizeof(lo)),
		    conf_duration_str((uint64_t)fwd->cache_max_ttl * 1000, hi, sizeof(hi)));
	}
	if (fwd->n_allow_recursion > 0 && fwd->n_groups == 0)
		return conf_fail(
		    ld, conf_key_line(ld, node, "allow-recursion", fwd->line),
		    "forward: allow-recursion needs forward groups (there is nothing to "
		    "forward to)");
	return 0;
}

int conf_forward_validate(const conf_t *conf, char *err, size_t errlen)
{
	const conf_forward_t *fwd = &conf->forward;
	if (fwd->n_allow_recursion > 0 && fwd->n_groups == 0) {
		snprintf(err, errlen,
		         "allow-recursion needs forward groups (there is nothing to forward to)");
		return STEER_ECONF;
	}
	return 0;
}

/* ---- quick mode ---------------------------------------------------------------------------- */

int conf_add_forward_arg(conf_t *conf, const char *arg, char *err, size_t errlen)
{
	conf_forward_t *fwd = &conf->forward;
	char *text = xstrdup(arg);
	char *at = strchr(text, '@');
	conf_upstream_t up = {0};
	int ret = STEER_EINVAL;
	if (at)
		*at = '\0';
	if (conf_peer_address(text, &up.address, err, errlen) != 0)
		goto out;
	if (at && conf_source_address(at + 1, &up.source, err, errlen) != 0)
		goto out;
	if (check_families(&up, err, errlen) != 0)
		goto out;
	conf_fwd_group_t *g = NULL;
	for (size_t i = 0; i < fwd->n_groups && !g; i++) {
		if (strcmp(fwd->groups[i].domain, ".") == 0)
			g = &fwd->groups[i];
	}
	if (g && g->n_upstreams == GROUP_MAX_UPSTREAMS) {
		snprintf(err, errlen, "at most %d upstreams", GROUP_MAX_UPSTREAMS);
		goto out;
	}
	if (!g) {
		g = group_append(fwd);
		g->domain = xstrdup(".");
	}
	char name[32];
	size_t n = 0;
	for (size_t i = 0; i < fwd->n_groups; i++)
		n += fwd->groups[i].n_upstreams;
	snprintf(name, sizeof(name), "upstream%zu", n + 1);
	conf_upstream_t *slot = upstream_append(g);
	*slot = up;
	slot->name = xstrdup(name);
	ret = 0;
out:
	free(text);
	return ret;
}

int conf_add_allow_recursion_arg(conf_t *conf, const char *arg, char *err, size_t errlen)
{
	steer_prefix_t prefix;
	if (steer_prefix_parse(arg, &prefix) != 0) {
		snprintf(err, errlen,
		         "invalid address prefix '%s' (expected ADDRESS or ADDRESS/LENGTH with no "
		         "bits set beyond LENGTH)",
		         arg);
		return STEER_EINVAL;
	}
	conf_forward_t *fwd = &conf->forward;
	fwd->allow_recursion = xrealloc(fwd->allow_recursion, (fwd->n_allow_recursion + 1) *
	                                                          sizeof(*fwd->allow_recursion));
	fwd->allow_recursion[fwd->n_allow_recursion++] = prefix;
	return 0;
}

/* ---- freeing ------------------------------------------------------------------------------- */

void conf_forward_free(conf_t *conf)
{
	conf_forward_t *fwd = &conf->forward;
	for (size_t g = 0; g < fwd->n_groups; g++) {
		conf_fwd_group_t *grp = &fwd->groups[g];
		for (size_t i = 0; i < grp->n_upstreams; i++)
			conf_free_fields("forward.groups.upstreams", &grp->upstreams[i]);
		free(grp->upstreams);
		conf_free_fields("forward.groups", grp);
		conf_free_fields("forward.groups.probe", grp);
	}
	free(fwd->groups);
	fwd->groups = NULL;
	fwd->n_groups = 0;
	conf_free_fields("forward", fwd);
	conf_free_fields("forward.cache", fwd);
}
