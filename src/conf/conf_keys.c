/*
 * TSIG keys (`keys:`, inline or from tsig-keygen / keymgr -t files) and the access lists that
 * name them (`xfr-allow`, `notify-allow`): loading, cross-checks, and the wire forms the
 * daemon serves with.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "conf/conf.h"
#include "conf/conf_int.h"
#include "dns/dname.h"

#define MSG_MAX      512
#define KEYFILE_MAX  (1u << 20) /* a key file is a few lines; this bounds a wrong path */
#define KEYS_WHAT    "keys"
#define KEYS_SHAPE   "name: NAME, algorithm: ALG, secret: BASE64 | file: PATH"
#define SECRET_LIMIT DNS_TSIG_SECRET_MAX

/* The wire form of a key name, lowercase; false when it is not a domain name. */
static bool key_wire(const char *name, uint8_t wire[DNS_DNAME_MAXLEN])
{
	if (dname_from_str(name, wire) <= 0)
		return false;
	dname_lower(wire);
	return true;
}

const conf_tsig_key_t *conf_tsig_key_find(const conf_t *conf, const char *name)
{
	uint8_t want[DNS_DNAME_MAXLEN], have[DNS_DNAME_MAXLEN];
	if (!key_wire(name, want))
		return NULL;
	for (size_t i = 0; i < conf->n_keys; i++) {
		if (key_wire(conf->keys[i].name, have) && dname_equal(want, have))
			return &conf->keys[i];
	}
	return NULL;
}

/* Validates one key and appends it; @p where names its origin in messages. */
static int add_key(conf_loader_t *ld, size_t line, const char *where, const char *name,
                   const char *algorithm, const char *secret)
{
	uint8_t wire[DNS_DNAME_MAXLEN];
	if (!key_wire(name, wire))
		return conf_fail(ld, line, "%skey name '%s' is not a domain name", where, name);
	dns_tsig_alg_t alg;
	if (!dns_tsig_alg_from_str(algorithm, &alg))
		return conf_fail(ld, line,
		                 "%skey '%s': unknown algorithm '%s' (expected hmac-sha1, "
		                 "hmac-sha224, hmac-sha256, hmac-sha384 or hmac-sha512)",
		                 where, name, algorithm);
	uint8_t buf[SECRET_LIMIT];
	int len = dns_tsig_secret_decode(secret, buf, sizeof(buf));
	if (len <= 0)
		return conf_fail(ld, line,
		                 "%skey '%s': secret is not valid base64 (or longer than %d bytes)",
		                 where, name, SECRET_LIMIT);
	const conf_tsig_key_t *dup = conf_tsig_key_find(ld->conf, name);
	if (dup)
		return conf_fail(ld, line, "%sduplicate key '%s' (first defined at line %u)", where,
		                 name, dup->line);
	conf_t *c = ld->conf;
	c->keys = xrealloc(c->keys, (c->n_keys + 1) * sizeof(*c->keys));
	size_t alen;
	const uint8_t *aw = dns_tsig_alg_wire(alg, &alen);
	char canon[32];
	snprintf(canon, sizeof(canon), "%.*s", (int)aw[0], (const char *)aw + 1);
	conf_tsig_key_t *k = &c->keys[c->n_keys++];
	k->name = xstrdup(name);
	k->algorithm = xstrdup(canon);
	k->secret = xmalloc((size_t)len);
	memcpy(k->secret, buf, (size_t)len);
	k->secret_len = (size_t)len;
	k->line = (unsigned)line;
	return 0;
}

typedef struct {
	conf_loader_t *ld;
	size_t line;
	const char *path;
	int ret;
} keyfile_ctx_t;

static int keyfile_cb(void *arg, const char *name, const char *algorithm, const char *secret,
                      unsigned fline)
{
	keyfile_ctx_t *kc = arg;
	char where[600];
	snprintf(where, sizeof(where), "keys.file: %s:%u: ", kc->path, fline);
	kc->ret = add_key(kc->ld, kc->line, where, name, algorithm, secret);
	return kc->ret;
}

static int load_keyfile(conf_loader_t *ld, size_t line, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return conf_fail(ld, line, "keys.file: cannot open %s: %s", path, strerror(errno));
	char *text = xmalloc(KEYFILE_MAX + 1);
	size_t n = fread(text, 1, KEYFILE_MAX + 1, f);
	bool bad = ferror(f);
	fclose(f);
	int ret = 0;
	if (bad || n > KEYFILE_MAX) {
		ret = conf_fail(ld, line, "keys.file: %s: %s", path,
		                bad ? "read error" : "larger than 1 MiB");
		goto out;
	}
	keyfile_ctx_t kc = {ld, line, path, 0};
	char err[MSG_MAX];
	if (dns_tsig_parse_keyfile(text, n, keyfile_cb, &kc, err, sizeof(err)) != 0) {
		/* A key the file held but we refused has its message written already. */
		ret = kc.ret ? kc.ret : conf_fail(ld, line, "keys.file: %s: %s", path, err);
		goto out;
	}
out:
	explicit_bzero(text, n < KEYFILE_MAX ? n : KEYFILE_MAX);
	free(text);
	return ret;
}

static int load_key_item(conf_loader_t *ld, const yaml_node_t *item, void *owner)
{
	(void)owner;
	conf_key_item_t it = {0};
	size_t line = conf_node_line(item);
	int ret = conf_load_keys(ld, "keys", &it, item, NULL, NULL);
	if (ret != 0)
		goto out;
	if (it.file) {
		if (it.name || it.algorithm || it.secret) {
			ret = conf_fail(
			    ld, line,
			    "keys: give either `file` or `name`, `algorithm` and `secret`");
			goto out;
		}
		size_t before = ld->conf->n_keys;
		ret = load_keyfile(ld, line, it.file);
		if (ret == 0 && ld->conf->n_keys == before)
			ret = conf_fail(ld, line, "keys.file: %s: no key in the file", it.file);
		goto out;
	}
	if (!it.name || !it.algorithm || !it.secret) {
		ret = conf_fail(ld, line,
		                "keys: a key needs `name`, `algorithm` and `secret` (or "
		                "`file`)");
		goto out;
	}
	ret = add_key(ld, conf_key_line(ld, item, "name", line), "keys: ", it.name, it.algorithm,
	              it.secret);
out:
	if (it.secret)
		explicit_bzero(it.secret, strlen(it.secret));
	conf_free_fields("keys", &it);
	return ret;
}

int conf_keys_load(conf_loader_t *ld, const yaml_node_t *node)
{
	return conf_load_mapping_list(ld, KEYS_WHAT, KEYS_SHAPE, node, true, load_key_item, NULL);
}

void conf_keys_free(conf_t *conf)
{
	for (size_t i = 0; i < conf->n_keys; i++) {
		free(conf->keys[i].name);
		free(conf->keys[i].algorithm);
		if (conf->keys[i].secret)
			explicit_bzero(conf->keys[i].secret, conf->keys[i].secret_len);
		free(conf->keys[i].secret);
	}
	free(conf->keys);
	conf->keys = NULL;
	conf->n_keys = 0;
}

/* ---- access lists */

typedef struct {
	conf_acl_t **list;
	size_t *n;
} acl_out_t;

static conf_acl_t *acl_append(acl_out_t *o)
{
	*o->list = xrealloc(*o->list, (*o->n + 1) * sizeof(**o->list));
	conf_acl_t *a = &(*o->list)[(*o->n)++];
	memset(a, 0, sizeof(*a));
	return a;
}

static int acl_prefix(conf_loader_t *ld, const char *what, const yaml_node_t *node,
                      steer_prefix_t *out)
{
	int ret = 0;
	const char *text = conf_item_text(ld, what, node, &ret);
	if (!text)
		return ret;
	if (steer_prefix_parse(text, out) != 0)
		return conf_fail(ld, conf_node_line(node),
		                 "%s: invalid address prefix '%s' (expected ADDRESS or "
		                 "ADDRESS/LENGTH with no bits set beyond LENGTH)",
		                 what, text);
	return 0;
}

static int acl_item(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	acl_out_t *o = ctx;
	size_t line = conf_node_line(item);
	if (item->type == YAML_SCALAR_NODE) {
		steer_prefix_t p;
		int ret = acl_prefix(ld, what, item, &p);
		if (ret != 0)
			return ret;
		conf_acl_t *a = acl_append(o);
		a->prefix = p;
		a->line = (unsigned)line;
		return 0;
	}
	if (item->type != YAML_MAPPING_NODE)
		return conf_fail(ld, line,
		                 "%s: expected PREFIX or { address: PREFIX, key: NAME }, got %s",
		                 what, conf_kind_name(item));
	bool has_addr = false;
	steer_prefix_t p = {0};
	const char *key = NULL;
	for (const yaml_node_pair_t *pr = item->data.mapping.pairs.start;
	     pr < item->data.mapping.pairs.top; pr++) {
		int ret = 0;
		const char *name = conf_key_text(ld, conf_node(ld, pr->key), &ret);
		if (!name)
			return ret;
		ret = conf_check_duplicate_key(ld, item, pr, name, what);
		if (ret != 0)
			return ret;
		const yaml_node_t *v = conf_node(ld, pr->value);
		if (strcmp(name, "address") == 0) {
			ret = acl_prefix(ld, what, v, &p);
			has_addr = true;
		} else if (strcmp(name, "key") == 0) {
			key = conf_item_text(ld, what, v, &ret);
		} else {
			return conf_fail(ld, conf_node_line(conf_node(ld, pr->key)),
			                 "%s: unknown key '%s' (expected address, key)", what,
			                 name);
		}
		if (ret != 0)
			return ret;
	}
	if (!has_addr && !key)
		return conf_fail(ld, line, "%s: an entry needs `address`, `key` or both", what);
	conf_acl_t *a = acl_append(o);
	a->any_address = !has_addr;
	a->prefix = p;
	a->key = key ? xstrdup(key) : NULL;
	a->line = (unsigned)line;
	return 0;
}

int conf_acl_load(conf_loader_t *ld, const char *what, const yaml_node_t *node, conf_acl_t **list,
                  size_t *n)
{
	acl_out_t o = {list, n};
	return conf_for_each_item(ld, what, node, true, acl_item, &o);
}

void conf_acl_free(conf_acl_t *acl, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(acl[i].key);
	free(acl);
}

int conf_zone_node(conf_loader_t *ld, const conf_key_t *key, void *base, const yaml_node_t *value,
                   void *ctx)
{
	(void)ctx;
	conf_zone_t *z = base;
	if (strcmp(key->name, "xfr-allow") == 0)
		return conf_acl_load(ld, "zones.xfr-allow", value, &z->xfr_allow, &z->n_xfr_allow);
	return conf_fail(ld, conf_node_line(value), "zones.%s: not supported", key->name);
}

void conf_zone_acl_free(conf_zone_t *z)
{
	conf_acl_free(z->xfr_allow, z->n_xfr_allow);
	z->xfr_allow = NULL;
	z->n_xfr_allow = 0;
}

static int check_ref(conf_loader_t *ld, const conf_zone_t *z, const char *what, const char *key,
                     unsigned line)
{
	if (!key || conf_tsig_key_find(ld->conf, key))
		return 0;
	return conf_fail(ld, line ? line : z->line, "zones: %s: %s: unknown key '%s' (see `keys`)",
	                 z->domain, what, key);
}

int conf_keys_check_refs(conf_loader_t *ld)
{
	const conf_t *c = ld->conf;
	int ret = 0;
	for (size_t i = 0; i < c->n_zones && ret == 0; i++) {
		const conf_zone_t *z = &c->zones[i];
		for (size_t j = 0; j < z->n_xfr_allow && ret == 0; j++)
			ret = check_ref(ld, z, "xfr-allow", z->xfr_allow[j].key,
			                z->xfr_allow[j].line);
		for (size_t j = 0; j < z->n_notify_allow && ret == 0; j++)
			ret = check_ref(ld, z, "notify-allow", z->notify_allow[j].key,
			                z->notify_allow[j].line);
		for (size_t j = 0; j < z->n_primaries && ret == 0; j++)
			ret = check_ref(ld, z, "primaries", z->primaries[j].key,
			                z->primaries[j].line);
		for (size_t j = 0; j < z->n_notify && ret == 0; j++)
			ret = check_ref(ld, z, "notify", z->notify[j].key, z->notify[j].line);
	}
	return ret;
}

/* ---- wire forms for the daemon */

dns_acl_entry_t *conf_acl_build(const conf_acl_t *acl, size_t n)
{
	dns_acl_entry_t *out = xcalloc(n ? n : 1, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		out[i].any_address = acl[i].any_address;
		out[i].prefix = acl[i].prefix;
		if (acl[i].key) {
			uint8_t wire[DNS_DNAME_MAXLEN];
			out[i].has_key = true;
			if (key_wire(acl[i].key, wire)) {
				out[i].key_len = (uint8_t)dname_len(wire);
				memcpy(out[i].key, wire, out[i].key_len);
			} else {
				/* Checked at load; were it not, no wire name starts with 0xff. */
				out[i].key[0] = 0xff;
				out[i].key_len = 1;
			}
		}
	}
	return out;
}

dns_tsig_keyring_t *conf_keyring_new(const conf_t *conf)
{
	dns_tsig_keyring_t *ring = xcalloc(1, sizeof(*ring));
	dns_tsig_key_t *keys = xcalloc(conf->n_keys ? conf->n_keys : 1, sizeof(*keys));
	size_t n = 0;
	for (size_t i = 0; i < conf->n_keys; i++) {
		const conf_tsig_key_t *ck = &conf->keys[i];
		dns_tsig_key_t *k = &keys[n];
		if (!key_wire(ck->name, k->name) ||
		    !dns_tsig_alg_from_str(ck->algorithm, &k->alg) ||
		    ck->secret_len > sizeof(k->secret))
			continue; /* checked at load */
		k->name_len = (uint8_t)dname_len(k->name);
		memcpy(k->secret, ck->secret, ck->secret_len);
		k->secret_len = (uint16_t)ck->secret_len;
		n++;
	}
	ring->keys = keys;
	ring->n_keys = n;
	return ring;
}

void conf_keyring_free(dns_tsig_keyring_t *ring)
{
	if (!ring)
		return;
	explicit_bzero((void *)ring->keys, ring->n_keys * sizeof(*ring->keys));
	free((void *)ring->keys);
	free(ring);
}
