/*
 * The operations sections of the configuration: `http` (the JSON API, /metrics and the status
 * page), `dnstap` (the query log), `stats-snapshots`, `alerts` and `decision-log`. Scalar keys
 * go through the generic parsers (conf_load_keys()); the lists (listen addresses, dnstap
 * message kinds, alert destinations) and the cross-checks are here, so every error carries its
 * file:line. Nothing here opens a socket or a file for writing: `steerd --check-config` runs
 * this code as it is. Control thread only.
 */
#include "conf/conf_int.h"

#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"

/* More listen addresses than this is a typo, not a deployment. */
#define HTTP_LISTEN_MAX 16
/* Alert destinations: each gets every event. */
#define ALERTS_MAX 16

typedef struct {
	const char *name;
	unsigned bit;
} dnstap_kind_t;

static const dnstap_kind_t dnstap_kinds[] = {
    {"auth-query", CONF_DNSTAP_AUTH_QUERY},
    {"auth-response", CONF_DNSTAP_AUTH_RESPONSE},
    {"client-query", CONF_DNSTAP_CLIENT_QUERY},
    {"client-response", CONF_DNSTAP_CLIENT_RESPONSE},
    {"forwarder-query", CONF_DNSTAP_FORWARDER_QUERY},
    {"forwarder-response", CONF_DNSTAP_FORWARDER_RESPONSE},
};

/* A top-level section that must be a mapping; null is accepted as "not configured". */
static int check_mapping(conf_loader_t *ld, const char *name, const yaml_node_t *node)
{
	if (node->type == YAML_MAPPING_NODE || conf_is_null(node))
		return 0;
	return conf_fail(ld, conf_node_line(node), "section '%s' must be a mapping of keys, got %s",
	                 name, conf_kind_name(node));
}

/* ---- http ----------------------------------------------------------------------------------- */

/* Append "IP:PORT" @p text to @p h's listen list; 0, or -1 with the reason in @p msg. */
static int http_listen_add(conf_http_t *h, const char *text, char *msg, size_t len)
{
	steer_sockaddr_t addr, other;
	/* The port is required: parse with two defaults, a missing port shows as a difference. */
	if (steer_sockaddr_parse(text, 0, &addr) != 0 ||
	    steer_sockaddr_parse(text, 1, &other) != 0) {
		snprintf(msg, len,
		         "invalid address '%s' (expected IP:PORT, IPv6 as \"[::1]:PORT\")", text);
		return -1;
	}
	if (steer_sockaddr_port(&addr) != steer_sockaddr_port(&other)) {
		snprintf(msg, len, "'%s' needs a port (e.g. 127.0.0.1:8053, \"[::1]:8053\")", text);
		return -1;
	}
	if (steer_sockaddr_port(&addr) == 0) {
		snprintf(msg, len, "port 0 is not allowed in '%s'", text);
		return -1;
	}
	for (size_t i = 0; i < h->n_listen; i++) {
		if (memcmp(&h->listen[i], &addr, sizeof(addr)) == 0) {
			snprintf(msg, len, "duplicate address '%s'", text);
			return -1;
		}
	}
	if (h->n_listen == HTTP_LISTEN_MAX) {
		snprintf(msg, len, "at most %d addresses", HTTP_LISTEN_MAX);
		return -1;
	}
	h->listen = xrealloc(h->listen, (h->n_listen + 1) * sizeof(*h->listen));
	h->listen[h->n_listen++] = addr;
	return 0;
}

static int http_listen_cb(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	int ret = 0;
	const char *text = conf_item_text(ld, what, item, &ret);
	if (!text)
		return ret;
	char msg[256];
	if (http_listen_add(ctx, text, msg, sizeof(msg)) != 0)
		return conf_fail(ld, conf_node_line(item), "%s: %s", what, msg);
	return 0;
}

int conf_add_http_arg(conf_t *conf, const char *text, char *err, size_t errlen)
{
	return http_listen_add(&conf->http, text, err, errlen) == 0 ? 0 : STEER_EINVAL;
}

static int http_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                        const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_http_t *h = base;
	STEER_ASSERT(strcmp(key->name, "listen") == 0);
	free(h->listen);
	h->listen = NULL;
	h->n_listen = 0;
	return conf_for_each_item(ld, "http.listen", value, false, http_listen_cb, h);
}

int conf_http_load(conf_loader_t *ld, const yaml_node_t *node)
{
	conf_http_t *h = &ld->conf->http;
	int ret = check_mapping(ld, "http", node);
	if (ret != 0 || conf_is_null(node))
		return ret;
	h->line = (unsigned)conf_node_line(node);
	ret = conf_load_keys(ld, "http", h, node, http_node_cb, NULL);
	if (ret == 0 && h->n_listen == 0)
		ret = conf_fail(ld, h->line, "http: 'listen' is required (e.g. [127.0.0.1:8053])");
	return ret;
}

/* ---- dnstap --------------------------------------------------------------------------------- */

static int dnstap_kind_cb(conf_loader_t *ld, const char *what, const yaml_node_t *item, void *ctx)
{
	conf_dnstap_t *d = ctx;
	int ret = 0;
	const char *text = conf_item_text(ld, what, item, &ret);
	if (!text)
		return ret;
	for (size_t i = 0; i < STEER_ARRAY_LEN(dnstap_kinds); i++) {
		if (strcasecmp(text, dnstap_kinds[i].name) != 0)
			continue;
		if (d->messages & dnstap_kinds[i].bit)
			return conf_fail(ld, conf_node_line(item), "%s: '%s' is listed twice", what,
			                 dnstap_kinds[i].name);
		d->messages |= dnstap_kinds[i].bit;
		return 0;
	}
	char hint[128] = "";
	conf_suggest_t sg;
	conf_suggest_init(&sg, text);
	for (size_t i = 0; i < STEER_ARRAY_LEN(dnstap_kinds); i++)
		conf_suggest_add(&sg, dnstap_kinds[i].name);
	if (conf_suggest_hint(&sg, hint, sizeof(hint)))
		return conf_fail(ld, conf_node_line(item), "%s: unknown message kind '%s'%s", what,
		                 text, hint);
	return conf_fail(ld, conf_node_line(item),
	                 "%s: unknown message kind '%s' (expected auth-query, auth-response, "
	                 "client-query, client-response, forwarder-query or forwarder-response)",
	                 what, text);
}

static int dnstap_node_cb(conf_loader_t *ld, const conf_key_t *key, void *base,
                          const yaml_node_t *value, void *ctx)
{
	(void)ctx;
	conf_dnstap_t *d = base;
	STEER_ASSERT(strcmp(key->name, "messages") == 0);
	d->messages = 0;
	return conf_for_each_item(ld, "dnstap.messages", value, false, dnstap_kind_cb, d);
}

int conf_dnstap_load(conf_loader_t *ld, const yaml_node_t *node)
{
	conf_dnstap_t *d = &ld->conf->dnstap;
	int ret = check_mapping(ld, "dnstap", node);
	if (ret != 0 || conf_is_null(node))
		return ret;
	d->line = (unsigned)conf_node_line(node);
	d->messages = CONF_DNSTAP_AUTH_QUERY | CONF_DNSTAP_AUTH_RESPONSE;
	conf_apply_defaults("dnstap", d);
	ret = conf_load_keys(ld, "dnstap", d, node, dnstap_node_cb, NULL);
	if (ret != 0)
		return ret;
	if (d->socket && d->file)
		return conf_fail(ld, conf_key_line(ld, node, "file", d->line),
		                 "dnstap: 'socket' and 'file' exclude each other: set one");
	if (!d->socket && !d->file)
		return conf_fail(ld, d->line,
		                 "dnstap: set 'socket' (a Frame Streams reader) or 'file'");
	d->enabled = true;
	return 0;
}

/* ---- stats-snapshots and decision-log ------------------------------------------------------ */

/* The folder a log file will be created in must exist: a typo should fail here, not later. */
static int check_parent_dir(conf_loader_t *ld, const char *what, const char *path, size_t line)
{
	const char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		return 0;
	char *dir = xstrdup(path);
	dir[slash - path] = '\0';
	struct stat st;
	int ret = 0;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		ret = conf_fail(ld, line, "%s: folder '%s' does not exist", what, dir);
	free(dir);
	return ret;
}

int conf_snapshots_load(conf_loader_t *ld, const yaml_node_t *node)
{
	conf_snapshots_t *s = &ld->conf->snapshots;
	int ret = check_mapping(ld, "stats-snapshots", node);
	if (ret != 0 || conf_is_null(node))
		return ret;
	s->line = (unsigned)conf_node_line(node);
	ret = conf_load_keys(ld, "stats-snapshots", s, node, NULL, NULL);
	if (ret == 0)
		ret = check_parent_dir(ld, "stats-snapshots.file", s->file,
		                       conf_key_line(ld, node, "file", s->line));
	return ret;
}

int conf_decision_log_load(conf_loader_t *ld, const yaml_node_t *node)
{
	conf_decision_log_t *d = &ld->conf->decision_log;
	int ret = check_mapping(ld, "decision-log", node);
	if (ret != 0 || conf_is_null(node))
		return ret;
	d->line = (unsigned)conf_node_line(node);
	ret = conf_load_keys(ld, "decision-log", d, node, NULL, NULL);
	if (ret == 0)
		ret = check_parent_dir(ld, "decision-log.file", d->file,
		                       conf_key_line(ld, node, "file", d->line));
	return ret;
}

/* ---- alerts --------------------------------------------------------------------------------- */

static bool is_web_url(const char *url)
{
	size_t http = strlen("http://"), https = strlen("https://");
	if (strncasecmp(url, "http://", http) == 0)
		return url[http] != '\0' && url[http] != '/';
	if (strncasecmp(url, "https://", https) == 0)
		return url[https] != '\0' && url[https] != '/';
	return false;
}

static int check_alert(conf_loader_t *ld, const conf_alert_t *a, const yaml_node_t *item)
{
	if (!a->webhook == !a->exec)
		return conf_fail(ld, a->line,
		                 "alerts: each item needs exactly one of 'webhook' or "
		                 "'exec'");
	if (a->webhook) {
		if (!is_web_url(a->webhook))
			return conf_fail(ld, conf_key_line(ld, item, "webhook", a->line),
			                 "alerts: webhook '%s' must be an http:// or https:// URL",
			                 a->webhook);
		for (const char *p = a->webhook; *p; p++) {
			if (*p <= ' ' || *p == 0x7f)
				return conf_fail(ld, conf_key_line(ld, item, "webhook", a->line),
				                 "alerts: webhook '%s' contains a space or control "
				                 "character",
				                 a->webhook);
		}
		return 0;
	}
	size_t line = conf_key_line(ld, item, "exec", a->line);
	if (a->exec[0] != '/')
		return conf_fail(ld, line, "alerts: exec '%s' must be an absolute path", a->exec);
	struct stat st;
	if (stat(a->exec, &st) != 0 || !S_ISREG(st.st_mode))
		return conf_fail(ld, line, "alerts: exec '%s' is not a file", a->exec);
	if (access(a->exec, X_OK) != 0)
		return conf_fail(ld, line, "alerts: exec '%s' is not executable", a->exec);
	return 0;
}

static int load_alert(conf_loader_t *ld, const yaml_node_t *item, void *owner)
{
	conf_t *conf = owner;
	if (conf->n_alerts == ALERTS_MAX)
		return conf_fail(ld, conf_node_line(item), "alerts: at most %d destinations",
		                 ALERTS_MAX);
	conf->alerts = xrealloc(conf->alerts, (conf->n_alerts + 1) * sizeof(*conf->alerts));
	conf_alert_t *a = &conf->alerts[conf->n_alerts++];
	memset(a, 0, sizeof(*a));
	a->line = (unsigned)conf_node_line(item);
	conf_apply_defaults("alerts", a);
	int ret = conf_load_keys(ld, "alerts", a, item, NULL, NULL);
	return ret != 0 ? ret : check_alert(ld, a, item);
}

int conf_alerts_load(conf_loader_t *ld, const yaml_node_t *node)
{
	return conf_load_mapping_list(ld, "alerts", "webhook: URL | exec: PATH", node, true,
	                              load_alert, ld->conf);
}

/* ---- comparing and freeing ----------------------------------------------------------------- */

bool conf_ops_node_equal(const conf_key_t *key, const conf_t *a, const conf_t *b)
{
	if (strcmp(key->section, "http") == 0) {
		STEER_ASSERT(strcmp(key->name, "listen") == 0);
		return a->http.n_listen == b->http.n_listen &&
		       (a->http.n_listen == 0 ||
		        memcmp(a->http.listen, b->http.listen,
		               a->http.n_listen * sizeof(*a->http.listen)) == 0);
	}
	STEER_ASSERT(strcmp(key->section, "dnstap") == 0 && strcmp(key->name, "messages") == 0);
	return a->dnstap.messages == b->dnstap.messages;
}

bool conf_alerts_equal(const conf_t *a, const conf_t *b)
{
	if (a->n_alerts != b->n_alerts)
		return false;
	for (size_t i = 0; i < a->n_alerts; i++) {
		const conf_alert_t *x = &a->alerts[i], *y = &b->alerts[i];
		bool same_hook = (!x->webhook && !y->webhook) ||
		                 (x->webhook && y->webhook && strcmp(x->webhook, y->webhook) == 0);
		bool same_exec =
		    (!x->exec && !y->exec) || (x->exec && y->exec && strcmp(x->exec, y->exec) == 0);
		if (!same_hook || !same_exec || x->timeout != y->timeout ||
		    x->retries != y->retries)
			return false;
	}
	return true;
}

void conf_ops_free(conf_t *conf)
{
	conf_free_fields("http", &conf->http);
	free(conf->http.listen);
	conf_free_fields("dnstap", &conf->dnstap);
	conf_free_fields("stats-snapshots", &conf->snapshots);
	conf_free_fields("decision-log", &conf->decision_log);
	for (size_t i = 0; i < conf->n_alerts; i++)
		conf_free_fields("alerts", &conf->alerts[i]);
	free(conf->alerts);
}
