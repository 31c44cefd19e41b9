#include "daemon/monitors.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/err.h"

struct monitor_plan {
	health_check_def_t *checks; /* key and monitor owned; spec strings borrow from conf */
	size_t n_checks;
	uint32_t *link; /* per conf datacenter: its link check, UINT32_MAX = none */
	uint32_t n_targets;
	uint32_t **deps; /* per target: check indices, owned */
	size_t *n_deps;
	uint32_t *metrics; /* per target: its metrics check, UINT32_MAX = none */
};

static_assert((int)HEALTH_METRIC_KINDS == (int)CONF_METRIC_KINDS &&
                  (int)GSLB_LOAD_KINDS == (int)CONF_METRIC_KINDS,
              "the load values are in the same order in conf, health and gslb");
static_assert(HEALTH_METRIC_KINDS <= 8, "a have mask is a byte");

static int plan_err(char *err, size_t errlen, const conf_t *conf, unsigned line, const char *fmt,
                    ...) STEER_PRINTF(5, 6);

static int plan_err(char *err, size_t errlen, const conf_t *conf, unsigned line, const char *fmt,
                    ...)
{
	int n = snprintf(err, errlen, "%s:%u: ", conf->path ? conf->path : "(config)", line);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return STEER_ECONF;
}

static uint16_t default_port(health_probe_type_t type, bool tls, uint16_t configured)
{
	if (configured)
		return configured;
	switch (type) {
	case HEALTH_PROBE_METRICS:
		return tls ? 443 : 80;
	case HEALTH_PROBE_HTTP:
		return 80;
	case HEALTH_PROBE_HTTPS:
		return 443;
	case HEALTH_PROBE_DNS:
		return 53;
	default:
		return 0;
	}
}

/* The check of monitor @p m on @p probe (text) or @p addr; @p qname for dns without one. */
static void def_fill(health_check_def_t *d, const conf_monitor_t *m, const steer_sockaddr_t *sa,
                     const char *qname)
{
	*d = (health_check_def_t){.monitor = m->name,
	                          .addr = *sa,
	                          .interval_ms = m->interval,
	                          .timeout_ms = m->timeout,
	                          .jitter_pct = m->jitter,
	                          .fall = m->fall,
	                          .rise = m->rise,
	                          .hold_down_ms = m->hold_down,
	                          .slow_start_ms = m->slow_start,
	                          .ttl_floor = m->ttl_floor};
	d->is_static = strcmp(m->type, "static") == 0;
	d->static_down = m->static_down;
	if (!d->is_static && health_probe_type_parse(m->type, &d->spec.type) != 0)
		d->is_static = true; /* the parser only lets known types through */
	health_probe_spec_t *sp = &d->spec;
	sp->path = m->path;
	sp->host = m->host;
	sp->body = m->body;
	sp->tls_verify = m->tls_verify;
	sp->n_status =
	    (uint8_t)(m->n_status < HEALTH_HTTP_STATUS_MAX ? m->n_status : HEALTH_HTTP_STATUS_MAX);
	memcpy(sp->status, m->status, sp->n_status * sizeof(sp->status[0]));
	sp->qname = m->qname ? m->qname : qname;
	sp->qtype = m->qtype ? m->qtype : 1;
	sp->rcode = m->rcode;
	sp->answer = m->answer;
	sp->argv = m->command;
	if (d->spec.type != HEALTH_PROBE_METRICS)
		return;
	sp->tls = m->tls;
	if (metrics_format_parse(m->format, &sp->format) != 0)
		sp->format = METRICS_PROMETHEUS; /* the schema only lets known formats through */
	d->stale_after_ms = m->stale_after;
	for (unsigned k = 0; k < CONF_METRIC_KINDS; k++) {
		sp->metric_expr[k] = m->metric_expr[k];
		if (m->metric_is_const[k]) {
			d->metric_const[k] = m->metric_const[k];
			d->metric_const_mask |= (uint8_t)(1u << k);
		}
	}
}

/* Index of the check for (monitor @p mi, probe address, qname), added when new. */
static uint32_t check_find_or_add(monitor_plan_t *p, const conf_t *conf, size_t mi,
                                  const steer_sockaddr_t *sa, const char *qname)
{
	const conf_monitor_t *m = &conf->monitors[mi];
	char addr[STEER_SOCKADDR_STRLEN], key[STEER_SOCKADDR_STRLEN + 600];
	steer_sockaddr_str(sa, addr, sizeof(addr));
	bool per_name = strcmp(m->type, "dns") == 0 && !m->qname;
	snprintf(key, sizeof(key), "%s@%s%s%s", m->name, addr, per_name ? "/" : "",
	         per_name ? qname : "");
	for (size_t i = 0; i < p->n_checks; i++)
		if (strcmp(p->checks[i].key, key) == 0)
			return (uint32_t)i;
	p->checks = xrealloc(p->checks, (p->n_checks + 1) * sizeof(*p->checks));
	health_check_def_t *d = &p->checks[p->n_checks];
	def_fill(d, m, sa, qname);
	/* seed 000: management traffic, health checks included, leaves from the unicast address */
	d->source = sa->sa.sa_family == AF_INET6 ? conf->cluster.unicast6 : conf->cluster.unicast4;
	d->key = xstrdup(key);
	return (uint32_t)p->n_checks++;
}

/* The probe address: @p probe text (with or without port) or the answer address. */
static int probe_addr(const conf_monitor_t *m, const char *probe, sa_family_t family,
                      const uint8_t *raw, steer_sockaddr_t *out)
{
	health_probe_type_t type;
	uint16_t port = m->port;
	if (health_probe_type_parse(m->type, &type) == 0)
		port = default_port(type, m->tls, m->port);
	if (probe)
		return steer_sockaddr_parse(probe, port, out);
	memset(out, 0, sizeof(*out));
	if (family == AF_INET) {
		out->sin.sin_family = AF_INET;
		memcpy(&out->sin.sin_addr, raw, 4);
		out->sin.sin_port = htons(port);
	} else {
		out->sin6.sin6_family = AF_INET6;
		memcpy(&out->sin6.sin6_addr, raw, 16);
		out->sin6.sin6_port = htons(port);
	}
	return 0;
}

static void dep_add(monitor_plan_t *p, uint32_t t, uint32_t check)
{
	for (size_t i = 0; i < p->n_deps[t]; i++)
		if (p->deps[t][i] == check)
			return;
	p->deps[t] = xrealloc(p->deps[t], (p->n_deps[t] + 1) * sizeof(uint32_t));
	p->deps[t][p->n_deps[t]++] = check;
}

static int links_build(monitor_plan_t *p, const conf_t *conf, char *err, size_t errlen)
{
	p->link = xmalloc((conf->n_datacenters + 1) * sizeof(*p->link));
	for (size_t i = 0; i < conf->n_datacenters; i++) {
		const conf_datacenter_t *dc = &conf->datacenters[i];
		p->link[i] = UINT32_MAX;
		if (dc->monitor == CONF_MONITOR_NONE)
			continue;
		steer_sockaddr_t sa;
		if (!dc->probe || probe_addr(&conf->monitors[dc->monitor], dc->probe, 0, NULL, &sa))
			return plan_err(err, errlen, conf, dc->line,
			                "datacenter %s: link monitor needs a probe address "
			                "(probe: ADDRESS[:PORT]), got '%s'",
			                dc->name, dc->probe ? dc->probe : "");
		p->link[i] = check_find_or_add(p, conf, dc->monitor, &sa, ".");
	}
	return 0;
}

/* Own and link checks of every target the view exports. */
static int targets_build(monitor_plan_t *p, const conf_t *conf, const gslb_target_t *tg, size_t n,
                         char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		const gslb_target_t *t = &tg[i];
		if (t->id >= p->n_targets || t->service >= conf->n_services)
			return plan_err(err, errlen, conf, 0,
			                "internal: target %s is not in this configuration",
			                t->name);
		const conf_service_t *cs = &conf->services[t->service];
		const conf_service_dc_t *cd = &cs->dcs[t->service_dc];
		const conf_address_t *ca = &cd->addresses[t->address];
		if (t->monitor != CONF_MONITOR_NONE) {
			steer_sockaddr_t sa;
			if (probe_addr(&conf->monitors[t->monitor], ca->probe, t->family, t->addr,
			               &sa) != 0)
				return plan_err(err, errlen, conf, cd->line,
				                "service %s: bad probe address '%s'", cs->name,
				                ca->probe);
			dep_add(p, t->id, check_find_or_add(p, conf, t->monitor, &sa, cs->name));
		}
		if (t->datacenter < conf->n_datacenters && p->link[t->datacenter] != UINT32_MAX)
			dep_add(p, t->id, p->link[t->datacenter]);
		/* The load values come from the answer address itself: a probe address belongs
		 * to the up/down monitor. */
		size_t mi = cd->metrics != CONF_MONITOR_NONE ? cd->metrics : cs->metrics;
		if (mi != CONF_MONITOR_NONE) {
			steer_sockaddr_t sa;
			(void)probe_addr(&conf->monitors[mi], NULL, t->family, t->addr, &sa);
			p->metrics[t->id] = check_find_or_add(p, conf, mi, &sa, cs->name);
		}
	}
	return 0;
}

/* Every metrics monitor's expressions compile: the configuration is wrong otherwise, at the
 * line of the value. */
static int metrics_validate(const conf_t *conf, char *err, size_t errlen)
{
	for (size_t i = 0; i < conf->n_monitors; i++) {
		const conf_monitor_t *m = &conf->monitors[i];
		metrics_format_t format;
		if (strcmp(m->type, "metrics") != 0 ||
		    metrics_format_parse(m->format, &format) != 0)
			continue;
		for (unsigned k = 0; k < CONF_METRIC_KINDS; k++) {
			if (!m->metric_expr[k])
				continue;
			metrics_expr_t *e = NULL;
			char why[160];
			if (metrics_expr_parse(format, m->metric_expr[k], &e, why, sizeof(why)) !=
			    0)
				return plan_err(err, errlen, conf, m->metric_line[k],
				                "monitors.%s.%s: '%s' is not a %s expression: %s",
				                m->name, health_metric_name(k), m->metric_expr[k],
				                m->format, why);
			metrics_expr_free(e);
		}
	}
	return 0;
}

/*
 * The checks that decide what @p name means: "datacenter/<dc>" (its link check) or a target's
 * own and link checks (@p direct: their count per target), never what that target requires
 * in turn, so the result does not depend on the order of targets and cycles are harmless.
 * Appends them to target @p t. Returns 0 or STEER_ENOENT.
 */
static int require_add(monitor_plan_t *p, const conf_t *conf, const gslb_health_t *h,
                       const size_t *direct, uint32_t t, const char *name)
{
	if (strncasecmp(name, "datacenter/", 11) == 0) {
		for (size_t i = 0; i < conf->n_datacenters; i++) {
			if (strcasecmp(conf->datacenters[i].name, name + 11) != 0)
				continue;
			if (p->link[i] == UINT32_MAX)
				return STEER_ENOENT;
			dep_add(p, t, p->link[i]);
			return 0;
		}
		return STEER_ENOENT;
	}
	for (uint32_t x = 0; x < h->count; x++) {
		gslb_health_entry_t e;
		if (gslb_health_entry(h, x, &e) != 0 || !e.name || strcasecmp(e.name, name) != 0)
			continue;
		if (direct[x] == 0)
			return STEER_ENOENT; /* not monitored: requiring it would mean nothing */
		for (size_t i = 0; i < direct[x]; i++)
			dep_add(p, t, p->deps[x][i]);
		return 0;
	}
	return STEER_ENOENT;
}

static int requires_build(monitor_plan_t *p, const conf_t *conf, const gslb_health_t *h,
                          const gslb_target_t *tg, size_t n, char *err, size_t errlen)
{
	/* A target's list starts with its direct checks; remember how many before appending. */
	size_t *direct = xmemdup(p->n_deps, (p->n_targets + 1) * sizeof(*direct));
	int ret = 0;
	for (size_t i = 0; i < n && ret == 0; i++) {
		const gslb_target_t *t = &tg[i];
		const conf_service_t *cs = &conf->services[t->service];
		const conf_service_dc_t *cd = &cs->dcs[t->service_dc];
		const conf_address_t *ca = &cd->addresses[t->address];
		for (size_t r = 0; r < ca->n_requires && ret == 0; r++) {
			if (require_add(p, conf, h, direct, t->id, ca->requires[r]) == 0)
				continue;
			ret = plan_err(err, errlen, conf, cd->line,
			               "service %s: requires '%s': no such monitored target or "
			               "datacenter link",
			               cs->name, ca->requires[r]);
		}
	}
	free(direct);
	return ret;
}

int monitor_plan_build(const conf_t *conf, const gslb_view_t *view, monitor_plan_t **out, char *err,
                       size_t errlen)
{
	const gslb_health_t *health = gslb_view_health(view);
	size_t n;
	const gslb_target_t *targets = gslb_view_targets(view, &n);
	monitor_plan_t *p = xcalloc(1, sizeof(*p));
	p->n_targets = health->count;
	p->deps = xcalloc(p->n_targets + 1, sizeof(*p->deps));
	p->n_deps = xcalloc(p->n_targets + 1, sizeof(*p->n_deps));
	p->metrics = xmalloc((p->n_targets + 1) * sizeof(*p->metrics));
	for (uint32_t t = 0; t <= p->n_targets; t++)
		p->metrics[t] = UINT32_MAX;
	int ret = metrics_validate(conf, err, errlen);
	if (ret == 0)
		ret = links_build(p, conf, err, errlen);
	if (ret == 0)
		ret = targets_build(p, conf, targets, n, err, errlen);
	if (ret == 0)
		ret = requires_build(p, conf, health, targets, n, err, errlen);
	if (ret != 0) {
		monitor_plan_free(p);
		return ret;
	}
	*out = p;
	return 0;
}
void monitor_plan_free(monitor_plan_t *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_checks; i++)
		free((char *)p->checks[i].key);
	free(p->checks);
	for (uint32_t t = 0; t < p->n_targets; t++)
		free(p->deps[t]);
	free(p->deps);
	free(p->n_deps);
	free(p->metrics);
	free(p->link);
	free(p);
}

const health_check_def_t *monitor_plan_checks(const monitor_plan_t *p, size_t *n)
{
	*n = p->n_checks;
	return p->checks;
}

const uint32_t *monitor_plan_target_checks(const monitor_plan_t *p, uint32_t target, size_t *n)
{
	if (target >= p->n_targets) {
		*n = 0;
		return NULL;
	}
	*n = p->n_deps[target];
	return p->deps[target];
}

bool monitor_plan_target_check(const monitor_plan_t *plan, const health_engine_t *engine,
                               uint32_t target, bool down, health_check_status_t *st)
{
	size_t n = 0;
	const uint32_t *idx = monitor_plan_target_checks(plan, target, &n);
	for (size_t i = 0; i < n; i++) {
		if (idx[i] >= health_engine_count(engine))
			continue;
		health_engine_status(engine, idx[i], st);
		if (down == (st->known && st->down))
			return true;
	}
	return false;
}

uint32_t monitor_plan_target_metrics(const monitor_plan_t *p, uint32_t target)
{
	return target < p->n_targets ? p->metrics[target] : UINT32_MAX;
}

/* Target @p t's load values from its metrics check: only the fresh ones. */
static void load_apply(const monitor_plan_t *p, const health_engine_t *engine, uint32_t t,
                       gslb_health_t *h)
{
	uint32_t ci = p->metrics[t];
	gslb_load_t load = {0};
	if (ci < health_engine_count(engine)) {
		health_check_status_t st;
		health_engine_status(engine, ci, &st);
		for (unsigned k = 0; k < GSLB_LOAD_KINDS; k++) {
			if (!(st.fresh & (1u << k)))
				continue;
			load.v[k] = (float)st.values[k];
			load.have |= (uint8_t)(1u << k);
			if (st.age_ms[k] > load.age_ms)
				load.age_ms = st.age_ms[k];
		}
		load.round = (uint32_t)st.probes;
	}
	int ret = gslb_health_set_load(h, t, &load); /* no fresh value clears them */
	STEER_ASSERT(ret == 0);
}

void monitor_plan_apply(const monitor_plan_t *p, const health_engine_t *engine, gslb_health_t *h)
{
	size_t n_checks = health_engine_count(engine);
	for (uint32_t t = 0; t < p->n_targets && t < h->count; t++) {
		bool down = false;
		uint32_t cap = 0;
		unsigned ramp = 0;
		for (size_t i = 0; i < p->n_deps[t]; i++) {
			if (p->deps[t][i] >= n_checks)
				continue;
			health_check_status_t st;
			health_engine_status(engine, p->deps[t][i], &st);
			if (!st.known)
				continue;
			down |= st.down;
			if (st.ttl_cap && (!cap || st.ttl_cap < cap))
				cap = st.ttl_cap;
			if (st.ramp && (!ramp || st.ramp < ramp))
				ramp = st.ramp;
		}
		/* t < h->count: neither can fail. */
		int ret = gslb_health_set_monitor(h, t, gslb_sttl_make(down, cap));
		ret |= gslb_health_set_ramp(h, t, ramp);
		STEER_ASSERT(ret == 0);
		load_apply(p, engine, t, h);
	}
}
