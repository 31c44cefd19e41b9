/*
 * The run-time layers of the served GSLB view (see admin.h): admin overrides with their state
 * file, the configuration's overrides, monitor states, and the all-down transitions they
 * cause. Control thread only.
 */
#include "gslb/admin.h"

#include <arpa/inet.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"

/* In-datacenter policies that read address weights (policy.c, pick_addrs()). */
static const char *const weight_policies[] = {"weighted", "multi", "persist"};

void gslb_admin_init(gslb_admin_t *a)
{
	gslb_overrides_init(&a->rules);
}

void gslb_admin_deinit(gslb_admin_t *a)
{
	gslb_overrides_deinit(&a->rules);
}

/* @p dst (uninitialised) becomes a copy of @p src. */
static void rules_copy(gslb_overrides_t *dst, const gslb_overrides_t *src)
{
	char err[256];
	gslb_overrides_init(dst);
	for (size_t i = 0; i < src->count; i++) {
		/* The rules were accepted once: they are valid. */
		int ret = gslb_overrides_add(dst, &src->rules[i], err, sizeof(err));
		STEER_ASSERT(ret == 0);
	}
}

static int rules_load(gslb_overrides_t *rules, const conf_t *conf, char *err, size_t errlen)
{
	if (conf->state_file == NULL)
		return 0;
	int ret = gslb_overrides_load(rules, conf->state_file, err, errlen);
	if (ret == STEER_ENOENT) {
		/* A state file configured since the admin set overrides: keep and save them. */
		if (rules->count > 0)
			return gslb_overrides_save(rules, conf->state_file, err, errlen);
		return 0;
	}
	return ret;
}

int gslb_admin_load(gslb_admin_t *a, const conf_t *conf, char *err, size_t errlen)
{
	return rules_load(&a->rules, conf, err, errlen);
}

/* The rules in effect: the config's, then the admin's (later rules win). */
static int rules_effective(const conf_t *conf, const gslb_overrides_t *api, gslb_overrides_t *out,
                           char *err, size_t errlen)
{
	gslb_overrides_init(out);
	for (size_t i = 0; i < conf->n_overrides; i++) {
		const conf_override_t *co = &conf->overrides[i];
		int ret = gslb_overrides_set(out, co->pattern, !co->up, 0, err, errlen);
		if (ret != 0)
			return ret;
	}
	for (size_t i = 0; i < api->count; i++) {
		int ret = gslb_overrides_add(out, &api->rules[i], err, errlen);
		if (ret != 0)
			return ret;
	}
	return 0;
}

/* gslb_admin_apply() over a bare rule list; @p eff receives the effective rules. */
static int rules_apply(const gslb_overrides_t *api, const conf_t *conf, const gslb_view_t *gslb,
                       gslb_view_t **out, gslb_overrides_t *eff, uint32_t **matches, char *err,
                       size_t errlen)
{
	int ret = rules_effective(conf, api, eff, err, errlen);
	if (ret != 0) {
		gslb_overrides_deinit(eff);
		return ret;
	}
	const gslb_health_t *old = gslb_view_health(gslb);
	gslb_health_t *h = gslb_health_dup(old, old->count);
	uint32_t *m = xcalloc(eff->count + 1, sizeof(*m));
	gslb_health_apply_overrides(h, eff, m);
	if (matches != NULL)
		*matches = m;
	else
		free(m);
	*out = gslb_view_with_health(gslb, h);
	return 0;
}

int gslb_admin_apply(const gslb_admin_t *a, const conf_t *conf, const gslb_view_t *gslb,
                     gslb_view_t **out, uint32_t **matches, char *err, size_t errlen)
{
	gslb_overrides_t eff;
	int ret = rules_apply(&a->rules, conf, gslb, out, &eff, matches, err, errlen);
	if (ret == 0)
		gslb_overrides_deinit(&eff);
	return ret;
}

int gslb_admin_reload(gslb_admin_t *a, const conf_t *conf, gslb_view_t **gslb, char *err,
                      size_t errlen)
{
	gslb_overrides_t api;
	rules_copy(&api, &a->rules);
	int ret = rules_load(&api, conf, err, errlen);
	gslb_view_t *next = NULL;
	gslb_overrides_t eff;
	if (ret == 0)
		ret = rules_apply(&api, conf, *gslb, &next, &eff, NULL, err, errlen);
	gslb_view_free(*gslb);
	*gslb = NULL;
	if (ret != 0) {
		gslb_overrides_deinit(&api);
		return ret;
	}
	gslb_overrides_deinit(&eff);
	*gslb = next;
	gslb_overrides_deinit(&a->rules);
	a->rules = api;
	return 0;
}

uint32_t gslb_admin_pattern_targets(const gslb_view_t *gslb, const char *pattern)
{
	gslb_overrides_t one;
	char err[256];
	uint32_t n = 0;
	gslb_overrides_init(&one);
	if (gslb_overrides_set(&one, pattern, true, 0, err, sizeof(err)) == 0) {
		const gslb_health_t *h = gslb_view_health(gslb);
		gslb_health_t *tmp = gslb_health_dup(h, h->count);
		gslb_health_apply_overrides(tmp, &one, &n);
		gslb_health_free(tmp);
	}
	gslb_overrides_deinit(&one);
	return n;
}

gslb_view_t *gslb_admin_monitored(const gslb_view_t *gslb, gslb_health_fill_cb fill, void *ctx)
{
	const gslb_health_t *old = gslb_view_health(gslb);
	gslb_health_t *h = gslb_health_dup(old, old->count);
	fill(ctx, h);
	return gslb_view_with_health(gslb, h);
}

/* ---- targets and their configuration -------------------------------------------------------- */

/* Length of a service name without its trailing dot, as target names spell it. */
static size_t plain_len(const char *name)
{
	size_t n = strlen(name);
	return n > 1 && name[n - 1] == '.' ? n - 1 : n;
}

/*
 * The service of target name "service/<service>/<datacenter>/<address>" in @p conf, and in
 * @p dc its datacenter (NULL when @p dc is NULL or none matches). NULL for other names.
 */
static const conf_service_t *target_service(const conf_t *conf, const char *name,
                                            const conf_service_dc_t **dc)
{
	static const char prefix[] = "service/";
	if (dc != NULL)
		*dc = NULL;
	if (name == NULL || strncmp(name, prefix, sizeof(prefix) - 1) != 0)
		return NULL;
	const char *svc = name + sizeof(prefix) - 1;
	const char *addr = strrchr(svc, '/');
	if (addr == NULL || addr == svc)
		return NULL;
	const char *dcname = addr - 1;
	while (dcname > svc && *dcname != '/')
		dcname--;
	if (dcname == svc)
		return NULL;
	size_t svc_len = (size_t)(dcname - svc), dc_len = (size_t)(addr - dcname - 1);
	for (size_t i = 0; i < conf->n_services; i++) {
		const conf_service_t *cs = &conf->services[i];
		if (plain_len(cs->name) != svc_len || strncasecmp(cs->name, svc, svc_len) != 0)
			continue;
		for (size_t d = 0; dc != NULL && d < cs->n_dcs; d++) {
			const char *n = conf->datacenters[cs->dcs[d].datacenter].name;
			if (strlen(n) == dc_len && strncmp(n, dcname + 1, dc_len) == 0)
				*dc = &cs->dcs[d];
		}
		return cs;
	}
	return NULL;
}

static bool policy_reads_weights(const char *policy)
{
	for (size_t i = 0; policy != NULL && i < STEER_ARRAY_LEN(weight_policies); i++) {
		if (strcasecmp(policy, weight_policies[i]) == 0)
			return true;
	}
	return false;
}

/*
 * Refuse a weight rule on @p pattern when a target it matches sits in a datacenter whose
 * in-datacenter policy never reads address weights: the rule would be saved, listed and
 * silently do nothing.
 */
static int weight_check(const conf_t *conf, const gslb_health_t *h, const char *pattern, char *err,
                        size_t errlen)
{
	for (uint32_t id = 0; id < h->count; id++) {
		gslb_health_entry_t e;
		if (gslb_health_entry(h, id, &e) != 0 || e.name == NULL ||
		    fnmatch(pattern, e.name, FNM_CASEFOLD) != 0)
			continue;
		const char *name = e.name;
		const conf_service_dc_t *dc = NULL;
		const conf_service_t *cs = target_service(conf, name, &dc);
		if (cs == NULL || dc == NULL || policy_reads_weights(dc->policy))
			continue;
		const char *policy = dc->policy ? dc->policy : "all";
		int n = snprintf(err, errlen,
		                 "%s: policy '%s' of datacenter %s in service %.*s ignores "
		                 "weights; weights apply to",
		                 pattern, policy, conf->datacenters[dc->datacenter].name,
		                 (int)plain_len(cs->name), cs->name);
		for (size_t i = 0;
		     i < STEER_ARRAY_LEN(weight_policies) && n >= 0 && (size_t)n < errlen; i++)
			n += snprintf(err + n, errlen - (size_t)n, "%s'%s'",
			              i == 0                                     ? " "
			              : i + 1 < STEER_ARRAY_LEN(weight_policies) ? ", "
			                                                         : " and ",
			              weight_policies[i]);
		return STEER_EINVAL;
	}
	return 0;
}

/* ---- changes ------------------------------------------------------------------------------- */

static int rules_clear(gslb_overrides_t *next, const conf_t *conf, const gslb_admin_req_t *req,
                       gslb_admin_result_t *res, char *err, size_t errlen)
{
	const char *pattern = req->rule.pattern;
	bool state = req->any_kind || req->rule.kind == GSLB_OVERRIDE_STATE;
	bool weight = req->any_kind || req->rule.kind == GSLB_OVERRIDE_WEIGHT;
	res->cleared_state =
	    state && gslb_overrides_remove(next, pattern, GSLB_OVERRIDE_STATE) == 0;
	res->cleared_weight =
	    weight && gslb_overrides_remove(next, pattern, GSLB_OVERRIDE_WEIGHT) == 0;
	if (res->cleared_state || res->cleared_weight)
		return 0;
	bool in_conf = false;
	for (size_t i = 0; state && i < conf->n_overrides; i++)
		in_conf |= strcmp(conf->overrides[i].pattern, pattern) == 0;
	snprintf(err, errlen,
	         in_conf ? "override '%s' comes from the configuration (gslb.overrides): edit it "
	                   "there and reload"
	                 : "no admin override '%s' (see steerctl override list)",
	         pattern);
	return STEER_ENOENT;
}

int gslb_admin_change(gslb_admin_t *a, const conf_t *conf, const gslb_view_t *gslb,
                      const gslb_admin_req_t *req, gslb_view_t **out, gslb_admin_result_t *res,
                      char *err, size_t errlen)
{
	const gslb_override_t *rule = &req->rule;
	gslb_overrides_t next, eff;
	gslb_view_t *view = NULL;
	uint32_t *matches = NULL;
	*res = (gslb_admin_result_t){0};
	rules_copy(&next, &a->rules);
	int ret;
	if (req->action == GSLB_ADMIN_SET) {
		ret = gslb_overrides_add(&next, rule, err, errlen);
		if (ret == 0 && rule->kind == GSLB_OVERRIDE_WEIGHT)
			ret =
			    weight_check(conf, gslb_view_health(gslb), rule->pattern, err, errlen);
	} else {
		ret = rules_clear(&next, conf, req, res, err, errlen);
	}
	if (ret == 0)
		ret = rules_apply(&next, conf, gslb, &view, &eff, &matches, err, errlen);
	if (ret == 0 && conf->state_file != NULL) {
		ret = gslb_overrides_save(&next, conf->state_file, err, errlen);
		if (ret != 0) {
			gslb_view_free(view);
			free(matches);
			gslb_overrides_deinit(&eff);
		}
	}
	if (ret != 0) {
		gslb_overrides_deinit(&next);
		return ret;
	}
	if (req->action == GSLB_ADMIN_SET) {
		for (size_t i = 0; i < eff.count; i++)
			if (eff.rules[i].kind == rule->kind &&
			    strcmp(eff.rules[i].pattern, rule->pattern) == 0)
				res->targets = matches[i];
	} else {
		/* How many targets the cleared pattern matches (a config rule may remain). */
		res->targets = gslb_admin_pattern_targets(view, rule->pattern);
	}
	free(matches);
	gslb_overrides_deinit(&eff);
	gslb_overrides_deinit(&a->rules);
	a->rules = next;
	*out = view;
	return 0;
}

/* ---- expiry -------------------------------------------------------------------------------- */

int64_t gslb_admin_next_expiry(const gslb_admin_t *a)
{
	int64_t next = 0;
	for (size_t i = 0; i < a->rules.count; i++) {
		int64_t t = a->rules.rules[i].expires_ms;
		if (t > 0 && (next == 0 || t < next))
			next = t;
	}
	return next;
}

static void log_lapsed(const gslb_override_t *r)
{
	if (r->kind == GSLB_OVERRIDE_WEIGHT)
		log_notice("override '%s' WEIGHT %u expired: back to the configured weight",
		           r->pattern, r->weight);
	else
		log_notice("override '%s' %s expired: back to the monitors' state", r->pattern,
		           r->down ? "DOWN" : "UP");
}

size_t gslb_admin_expire(gslb_admin_t *a, const conf_t *conf, const gslb_view_t *gslb,
                         int64_t now_ms, gslb_view_t **out)
{
	gslb_overrides_t next, eff;
	char err[512];
	size_t dropped = 0;
	*out = NULL;
	gslb_overrides_init(&next);
	for (size_t i = 0; i < a->rules.count; i++) {
		const gslb_override_t *r = &a->rules.rules[i];
		if (r->expires_ms > 0 && r->expires_ms <= now_ms) {
			log_lapsed(r);
			dropped++;
			continue;
		}
		int ret = gslb_overrides_add(&next, r, err, sizeof(err));
		STEER_ASSERT(ret == 0); /* accepted once: valid */
	}
	if (dropped == 0) {
		gslb_overrides_deinit(&next);
		return 0;
	}
	/* The config's rules were accepted at load, and the rest of the admin's when set. */
	int ret = rules_apply(&next, conf, gslb, out, &eff, NULL, err, sizeof(err));
	STEER_ASSERT(ret == 0);
	gslb_overrides_deinit(&eff);
	if (conf->state_file != NULL &&
	    gslb_overrides_save(&next, conf->state_file, err, sizeof(err)) != 0)
		log_warn("override expiry: cannot save the state file: %s", err);
	gslb_overrides_deinit(&a->rules);
	a->rules = next;
	return dropped;
}

/* ---- all-down transitions ------------------------------------------------------------------ */

/* Per service of @p conf: true when @p h has targets of it and none is UP. */
static void services_all_down(const conf_t *conf, const gslb_health_t *h, bool *down)
{
	bool *seen = xcalloc(conf->n_services + 1, sizeof(*seen));
	bool *up = xcalloc(conf->n_services + 1, sizeof(*up));
	const conf_service_t *last = NULL;
	for (uint32_t id = 0; h != NULL && id < h->count; id++) {
		gslb_health_entry_t e;
		if (gslb_health_entry(h, id, &e) != 0)
			continue;
		const char *name = e.name;
		/* Targets of one service are numbered together: mostly one lookup per service. */
		const conf_service_t *cs = last;
		size_t len = cs ? plain_len(cs->name) : 0;
		if (cs == NULL || name == NULL || strncmp(name, "service/", 8) != 0 ||
		    strncasecmp(name + 8, cs->name, len) != 0 || name[8 + len] != '/')
			cs = target_service(conf, name, NULL);
		if (cs == NULL)
			continue;
		last = cs;
		size_t i = (size_t)(cs - conf->services);
		seen[i] = true;
		up[i] |= !gslb_sttl_down(e.eff);
	}
	for (size_t i = 0; i < conf->n_services; i++)
		down[i] = seen[i] && !up[i];
	free(seen);
	free(up);
}

/* What the all-down policy of @p cs answers, for the log line. */
static void all_down_action(const conf_t *conf, const conf_service_t *cs, char *buf, size_t len)
{
	const char *ad = cs->all_down ? cs->all_down : "first-datacenter";
	if (strcasecmp(ad, "fallback") == 0 && cs->fallback_cname != NULL) {
		snprintf(buf, len, "answering fallback CNAME %s", cs->fallback_cname);
	} else if (strcasecmp(ad, "fallback") == 0) {
		int n = snprintf(buf, len, "answering fallback");
		for (size_t i = 0; i < cs->n_fallback && n >= 0 && (size_t)n < len; i++) {
			char text[INET6_ADDRSTRLEN] = "?";
			inet_ntop(cs->fallback[i].family, cs->fallback[i].addr, text, sizeof(text));
			n += snprintf(buf + n, len - (size_t)n, "%s%s", i ? ", " : " ", text);
		}
	} else if (strcasecmp(ad, "first-datacenter") == 0 && cs->n_dcs > 0) {
		snprintf(buf, len, "answering datacenter %s anyway (all-down: first-datacenter)",
		         conf->datacenters[cs->dcs[0].datacenter].name);
	} else {
		snprintf(buf, len, "answering %s",
		         strcasecmp(ad, "servfail") == 0 ? "SERVFAIL" : "NODATA");
	}
}

void gslb_admin_log_all_down(const conf_t *conf, const gslb_health_t *before,
                             const gslb_health_t *after)
{
	if (conf->n_services == 0)
		return;
	bool *was = xcalloc(conf->n_services, sizeof(*was));
	bool *now = xcalloc(conf->n_services, sizeof(*now));
	services_all_down(conf, before, was);
	services_all_down(conf, after, now);
	for (size_t i = 0; i < conf->n_services; i++) {
		const conf_service_t *cs = &conf->services[i];
		int len = (int)plain_len(cs->name);
		char action[512];
		if (now[i] && !was[i]) {
			all_down_action(conf, cs, action, sizeof(action));
			log_warn("service %.*s: all datacenters down, %s", len, cs->name, action);
		} else if (was[i] && !now[i]) {
			log_info("service %.*s: a datacenter is up again, all-down is over", len,
			         cs->name);
		}
	}
	free(was);
	free(now);
}
