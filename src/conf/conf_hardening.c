/*
 * The attack-resistance sections: `rrl` (response rate limiting) and `cookies` (DNS Cookies).
 * Scalar keys go through the generic parsers; the prefix lengths and the hex secrets are
 * checked here so a typo is an error with its line, never a silently weaker setting.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "conf/conf_int.h"

static int check_mapping(conf_loader_t *ld, const char *name, const yaml_node_t *node)
{
	if (node->type == YAML_MAPPING_NODE || conf_is_null(node))
		return 0;
	return conf_fail(ld, conf_node_line(node), "section '%s' must be a mapping of keys, got %s",
	                 name, conf_kind_name(node));
}

void conf_hardening_defaults(conf_t *conf)
{
	conf_apply_defaults("rrl", &conf->rrl);
	conf->rrl.ipv4_prefix = 24;
	conf->rrl.ipv6_prefix = 56;
	conf_apply_defaults("cookies", &conf->cookies);
}

static int prefix_len(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                      unsigned max, uint8_t *out)
{
	const char *text;
	int ret = conf_scalar_text(ld, key, value, &text);
	if (ret != 0)
		return ret;
	char *end = NULL;
	errno = 0;
	unsigned long n = strtoul(text, &end, 10);
	if (!isdigit((unsigned char)text[0]) || *end != '\0' || errno != 0 || n < 1 || n > max)
		return conf_fail(ld, conf_node_line(value), "rrl.%s: expected 1 to %u, got '%s'",
		                 key->name, max, text);
	*out = (uint8_t)n;
	return 0;
}

static int rrl_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                       const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_rrl_t *r = base;
	if (strcmp(key->name, "ipv4-prefix") == 0)
		return prefix_len(ld, key, value, 32, &r->ipv4_prefix);
	STEER_ASSERT(strcmp(key->name, "ipv6-prefix") == 0);
	return prefix_len(ld, key, value, 128, &r->ipv6_prefix);
}

int conf_rrl_load(conf_loader_t *ld, const yaml_node_t *node)
{
	int ret = check_mapping(ld, "rrl", node);
	if (ret != 0 || conf_is_null(node))
		return ret;
	return conf_load_keys(ld, "rrl", &ld->conf->rrl, node, rrl_node_cb, NULL);
}

/* 32 hex digits into a 16-byte secret; -1 for anything else. */
static int secret_from_hex(const char *text, size_t len, uint8_t out[16])
{
	if (len != 32)
		return -1;
	for (size_t i = 0; i < 16; i++) {
		char pair[3] = {text[2 * i], text[2 * i + 1], '\0'};
		if (!isxdigit((unsigned char)pair[0]) || !isxdigit((unsigned char)pair[1]))
			return -1;
		out[i] = (uint8_t)strtoul(pair, NULL, 16);
	}
	return 0;
}

static int cookies_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                           const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_cookies_t *c = base;
	const char *text;
	int ret = conf_scalar_text(ld, key, value, &text);
	if (ret != 0)
		return ret;
	bool prev = strcmp(key->name, "previous-secret") == 0;
	if (secret_from_hex(text, strlen(text), prev ? c->previous : c->secret) != 0)
		return conf_fail(
		    ld, conf_node_line(value),
		    "cookies.%s: expected 32 hex digits (16 bytes), got %zu characters%s",
		    key->name, strlen(text),
		    strlen(text) == 32 ? " that are not all hex digits" : "");
	if (prev)
		c->previous_set = true;
	else
		c->secret_set = true;
	return 0;
}

/* Line 1 the secret, optional line 2 the previous one; blank lines and spaces around ignored. */
static int read_secret_file(conf_loader_t *ld, conf_cookies_t *c, size_t line)
{
	FILE *f = fopen(c->secret_file, "r");
	if (!f)
		return conf_fail(ld, line, "cookies.secret-file: cannot open %s: %s",
		                 c->secret_file, strerror(errno));
	char buf[256];
	int n = 0, ret = 0;
	while (ret == 0 && fgets(buf, sizeof(buf), f) != NULL) {
		char *s = buf;
		while (isspace((unsigned char)*s))
			s++;
		size_t len = strlen(s);
		while (len > 0 && isspace((unsigned char)s[len - 1]))
			len--;
		if (len == 0)
			continue;
		if (n == 2 || secret_from_hex(s, len, n == 0 ? c->secret : c->previous) != 0)
			ret = conf_fail(ld, line,
			                "cookies.secret-file: %s: line %d is not 32 hex digits%s",
			                c->secret_file, n + 1, n == 2 ? " (at most 2 lines)" : "");
		n++;
	}
	fclose(f);
	if (ret == 0 && n == 0)
		ret =
		    conf_fail(ld, line, "cookies.secret-file: %s holds no secret", c->secret_file);
	if (ret == 0) {
		c->secret_set = true;
		c->previous_set = n == 2;
	}
	explicit_bzero(buf, sizeof(buf));
	return ret;
}

int conf_cookies_load(conf_loader_t *ld, const yaml_node_t *node)
{
	conf_cookies_t *c = &ld->conf->cookies;
	int ret = check_mapping(ld, "cookies", node);
	if (ret != 0 || conf_is_null(node))
		return ret;
	size_t line = conf_node_line(node);
	ret = conf_load_keys(ld, "cookies", c, node, cookies_node_cb, NULL);
	if (ret != 0)
		return ret;
	if (c->secret_file) {
		if (c->secret_set || c->previous_set)
			return conf_fail(ld, conf_key_line(ld, node, "secret-file", line),
			                 "cookies: 'secret-file' excludes 'secret' and "
			                 "'previous-secret': set one");
		return read_secret_file(ld, c, conf_key_line(ld, node, "secret-file", line));
	}
	if (c->previous_set && !c->secret_set)
		return conf_fail(ld, conf_key_line(ld, node, "previous-secret", line),
		                 "cookies: 'previous-secret' needs 'secret'");
	return 0;
}

void conf_hardening_free(conf_t *conf)
{
	conf_free_fields("rrl", &conf->rrl);
	conf_free_fields("cookies", &conf->cookies);
	explicit_bzero(conf->cookies.secret, sizeof(conf->cookies.secret));
	explicit_bzero(conf->cookies.previous, sizeof(conf->cookies.previous));
}
