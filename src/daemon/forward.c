/*
 * Wiring of the caching forwarder (see forward.h).
 */
#include "daemon/forward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "dns/dname.h"

static fwd_policy_t policy_of(const char *name)
{
	if (name != NULL && strcmp(name, "round-robin") == 0)
		return FWD_POLICY_ROUND_ROBIN;
	if (name != NULL && strcmp(name, "fastest") == 0)
		return FWD_POLICY_FASTEST;
	return FWD_POLICY_ORDERED;
}

/* An upstream's own source, else the node's unicast address of its family: answers to a
 * query from a shared service address could reach another node of the cluster. */
static steer_sockaddr_t upstream_source(const conf_upstream_t *u, const conf_cluster_t *cc)
{
	if (u->source.sa.sa_family != 0)
		return u->source;
	return u->address.sa.sa_family == AF_INET6 ? cc->unicast6 : cc->unicast4;
}

static void group_def(const conf_fwd_group_t *g, const conf_cluster_t *cc, fwd_upstream_def_t *ups,
                      fwd_group_def_t *out)
{
	for (size_t i = 0; i < g->n_upstreams; i++) {
		const conf_upstream_t *u = &g->upstreams[i];
		ups[i] = (fwd_upstream_def_t){.name = u->name,
		                              .address = u->address,
		                              .source = upstream_source(u, cc),
		                              .link = u->link};
	}
	*out = (fwd_group_def_t){
	    .domain = g->domain,
	    .policy = policy_of(g->policy),
	    .upstreams = ups,
	    .n_upstreams = g->n_upstreams,
	    .probe = {.interval_ms = g->probe_interval,
	              .timeout_ms = g->probe_timeout,
	              .fall = g->probe_fall,
	              .rise = g->probe_rise,
	              .hold_down_ms = g->probe_hold_down},
	    .retry_timeout_ms = g->retry_timeout,
	    .retry_fixed = !g->retry_adaptive,
	};
}

static void cache_opts(const conf_forward_t *f, uint16_t payload, fwd_cache_opts_t *out)
{
	fwd_cache_opts_default(out);
	out->max_bytes = (size_t)f->cache_max_size;
	out->min_ttl = f->cache_min_ttl;
	out->max_ttl = f->cache_max_ttl;
	out->max_negative_ttl = f->cache_max_negative_ttl;
	out->stale_answer_ttl = f->serve_stale;
	out->edns_payload = payload;
	out->prefetch = f->prefetch;
}

/* The probe names in wire form, one buffer per group; NULL entries for the root. */
static int probe_names(const conf_forward_t *f, uint8_t (*wire)[DNS_DNAME_MAXLEN],
                       const uint8_t **names, char *err, size_t errlen)
{
	for (size_t i = 0; i < f->n_groups; i++) {
		const char *name = f->groups[i].probe_name;
		names[i] = NULL;
		if (name == NULL)
			continue;
		if (dname_from_str(name, wire[i]) <= 0) {
			snprintf(err, errlen, "forward group %s: bad probe name '%s'",
			         f->groups[i].domain, name);
			return STEER_ECONF;
		}
		names[i] = wire[i];
	}
	return 0;
}

int forward_engine_new(const conf_t *conf, const uint16_t *ports, size_t n_ports,
                       fwd_engine_t **out, char *err, size_t errlen)
{
	const conf_forward_t *f = &conf->forward;
	*out = NULL;
	if (f->n_groups == 0)
		return 0;
	size_t n_ups = 0;
	for (size_t i = 0; i < f->n_groups; i++)
		n_ups += f->groups[i].n_upstreams;
	fwd_group_def_t *groups = xcalloc(f->n_groups, sizeof(*groups));
	fwd_upstream_def_t *ups = xcalloc(n_ups, sizeof(*ups));
	uint8_t(*wire)[DNS_DNAME_MAXLEN] = xcalloc(f->n_groups, sizeof(*wire));
	const uint8_t **names = xcalloc(f->n_groups, sizeof(*names));
	uint16_t(*excl)[2] = xcalloc(n_ports ? n_ports : 1, sizeof(*excl));
	for (size_t i = 0, at = 0; i < f->n_groups; i++) {
		group_def(&f->groups[i], &conf->cluster, ups + at, &groups[i]);
		at += f->groups[i].n_upstreams;
	}
	for (size_t i = 0; i < n_ports; i++)
		excl[i][0] = excl[i][1] = ports[i];
	int ret = probe_names(f, wire, names, err, errlen);
	if (ret == 0) {
		fwd_engine_opts_t opts = {.groups = groups,
		                          .n_groups = f->n_groups,
		                          .probe_names = names,
		                          .use_0x20 = f->use_0x20,
		                          .port_exclude = (const uint16_t(*)[2])excl,
		                          .n_port_exclude = n_ports};
		cache_opts(f, conf->udp_max_payload, &opts.cache);
		ret = fwd_engine_new(&opts, out, err, errlen);
	}
	free(excl);
	free(names);
	free(wire);
	free(ups);
	free(groups);
	return ret;
}

void forward_view_fill(fwd_view_t *v, const conf_t *conf, fwd_engine_t *engine)
{
	const conf_forward_t *f = &conf->forward;
	memset(v, 0, sizeof(*v));
	v->engine = engine;
	v->udp_max_payload = conf->udp_max_payload;
	if (engine == NULL)
		return;
	v->cache = fwd_engine_cache(engine);
	if (f->n_allow_recursion > 0)
		v->allow =
		    xmemdup(f->allow_recursion, f->n_allow_recursion * sizeof(*f->allow_recursion));
	v->n_allow = f->n_allow_recursion;
}

void forward_view_clear(fwd_view_t *v)
{
	free((void *)v->allow);
	v->allow = NULL;
	v->n_allow = 0;
}
