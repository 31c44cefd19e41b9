/*
 * Secondary zones in the daemon. The transfer module is process-wide, like the control
 * loop: one daemon per process, and server_zones_build() (shared with --check-config) reaches
 * it here rather than through every caller.
 */
#include "daemon/xfr.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "daemon/server.h"
#include "dns/dname.h"

static xfr_t *g_xfr;
static ev_async g_update_w; /* on the control loop: a zone has a new version */
static struct server *g_server;

static void on_update(void *arg)
{
	(void)arg;
	/* Transfer thread: only wake the control loop, which rebuilds and publishes. */
	if (g_server != NULL)
		ev_async_send(g_server->loop, &g_update_w);
}

void daemon_xfr_init(void)
{
	if (g_xfr == NULL)
		g_xfr = xfr_new(on_update, NULL);
}

xfr_t *daemon_xfr_get(void)
{
	return g_xfr;
}

/* A primary's address as a host prefix. */
static steer_prefix_t host_prefix(const steer_sockaddr_t *a)
{
	steer_prefix_t p = {.family = a->sa.sa_family};
	if (a->sa.sa_family == AF_INET6) {
		p.len = 128;
		memcpy(p.addr, &a->sin6.sin6_addr, 16);
	} else {
		p.len = 32;
		memcpy(p.addr, &a->sin.sin_addr, 4);
	}
	return p;
}

/* Resolve a remote's key by name in `keys:`, so the transfer thread can sign with it. */
static void remote_from_conf(const conf_t *conf, const conf_remote_t *cr, xfr_remote_t *r)
{
	*r = (xfr_remote_t){.addr = cr->addr, .source = cr->source, .key = cr->key};
	if (cr->key == NULL || conf == NULL)
		return;
	for (size_t k = 0; k < conf->n_keys; k++) {
		const conf_tsig_key_t *key = &conf->keys[k];
		if (strcasecmp(key->name, cr->key) == 0) {
			r->tsig_ok = xfr_tsig_key(key->name, key->algorithm, key->secret,
			                          key->secret_len, &r->tsig);
			return;
		}
	}
}

/* The primaries may always NOTIFY, from their address and signed with their key if they
 * have one; notify-allow adds others. */
static void fill_entry(const conf_zone_t *cz, zone_set_entry_t *e)
{
	e->secondary = true;
	dns_acl_entry_t *extra = conf_acl_build(cz->notify_allow, cz->n_notify_allow);
	e->notify_allow =
	    xcalloc(cz->n_primaries + cz->n_notify_allow + 1, sizeof(*e->notify_allow));
	e->n_notify_allow = 0;
	for (size_t i = 0; i < cz->n_primaries; i++) {
		dns_acl_entry_t *d = &e->notify_allow[e->n_notify_allow++];
		d->prefix = host_prefix(&cz->primaries[i].addr);
		int len = cz->primaries[i].key ? dname_from_str(cz->primaries[i].key, d->key) : -1;
		if (len > 0) {
			dname_lower(d->key);
			d->key_len = (uint8_t)len;
			d->has_key = true;
		}
	}
	memcpy(&e->notify_allow[e->n_notify_allow], extra, cz->n_notify_allow * sizeof(*extra));
	e->n_notify_allow += cz->n_notify_allow;
	free(extra);
}

zone_t *daemon_xfr_zone(const conf_t *conf, const conf_zone_t *cz, zone_set_entry_t *tmpl)
{
	fill_entry(cz, tmpl);
	if (g_xfr == NULL) {
		struct stat st;
		zone_t *zone = NULL;
		char err[1024] = "";
		if (stat(cz->file, &st) != 0)
			return NULL;
		if (zone_load(cz->domain, cz->file, &zone, err, sizeof(err)) != 0) {
			log_warn("secondary zone %s: %s is not loadable, it will be transferred "
			         "again: %s",
			         cz->domain, cz->file, err);
			return NULL;
		}
		return zone;
	}
	xfr_remote_t *prim = xcalloc(cz->n_primaries ? cz->n_primaries : 1, sizeof(*prim));
	for (size_t i = 0; i < cz->n_primaries; i++)
		remote_from_conf(conf, &cz->primaries[i], &prim[i]);
	xfr_zone_conf_t c = {
	    .name = cz->domain,
	    .file = cz->file,
	    .primaries = prim,
	    .n_primaries = cz->n_primaries,
	    .ixfr = cz->ixfr,
	    .refresh_min_ms = cz->refresh_min,
	    .refresh_max_ms = cz->refresh_max,
	    .max_transfer_size = cz->max_transfer_size,
	    .max_records = cz->max_records,
	};
	int ret = xfr_zone_sync(g_xfr, &c);
	free(prim);
	if (ret != 0)
		return NULL;
	uint8_t apex[DNS_DNAME_MAXLEN];
	if (dname_from_str(cz->domain, apex) < 0)
		return NULL;
	dname_lower(apex);
	return xfr_zone_current(g_xfr, apex, &tmpl->expire_at);
}

void daemon_xfr_applied(void)
{
	if (g_xfr != NULL)
		xfr_sync_done(g_xfr);
}

static void on_update_ctl(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)revents;
	server_zones_republish(w->data);
}

int daemon_xfr_start(struct server *s)
{
	if (g_xfr == NULL)
		return 0;
	g_server = s;
	ev_async_init(&g_update_w, on_update_ctl);
	g_update_w.data = s;
	ev_async_start(s->loop, &g_update_w);
	xfr_sync_done(g_xfr); /* the start-up build synced every zone */
	int ret = xfr_start(g_xfr);
	if (ret != 0)
		log_err("cannot start the transfer thread: %s", steer_strerror(ret));
	return ret;
}

static bool named(const conf_zone_t *cz, char *const *names, size_t n)
{
	uint8_t a[DNS_DNAME_MAXLEN], b[DNS_DNAME_MAXLEN];
	if (dname_from_str(cz->domain, a) < 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (dname_from_str(names[i], b) > 0 && dname_equal(a, b))
			return true;
	}
	return false;
}

void daemon_xfr_announce(const conf_t *conf, const zone_set_t *set, char *const *names, size_t n,
                         bool all)
{
	if (g_xfr == NULL)
		return;
	for (size_t i = 0; i < conf->n_zones; i++) {
		const conf_zone_t *cz = &conf->zones[i];
		if (cz->n_notify == 0 || cz->n_primaries > 0 || (!all && !named(cz, names, n)))
			continue;
		uint8_t apex[DNS_DNAME_MAXLEN];
		if (dname_from_str(cz->domain, apex) < 0)
			continue;
		dname_lower(apex);
		const zone_set_entry_t *e = zone_set_get(set, apex);
		if (e == NULL)
			continue;
		xfr_remote_t *t = xcalloc(cz->n_notify, sizeof(*t));
		for (size_t j = 0; j < cz->n_notify; j++)
			remote_from_conf(conf, &cz->notify[j], &t[j]);
		log_info("zone %s: sending NOTIFY for serial %u to %zu secondaries", e->zone->name,
		         e->zone->serial, cz->n_notify);
		xfr_notify_send(g_xfr, e->zone, t, cz->n_notify);
		free(t);
	}
}

void daemon_xfr_on_notify(void *arg, const uint8_t *apex, uint32_t serial, bool has_serial)
{
	(void)serial;
	(void)has_serial;
	/* The serial is a hint only (RFC 1996 3.11): the SOA query decides. */
	if (arg != NULL)
		xfr_notify_received(arg, apex);
}

void daemon_xfr_stop(void)
{
	/* The thread first: it may still wake the control loop. */
	xfr_free(g_xfr);
	g_xfr = NULL;
	if (g_server != NULL && g_server->loop != NULL)
		ev_async_stop(g_server->loop, &g_update_w);
	g_server = NULL;
}
