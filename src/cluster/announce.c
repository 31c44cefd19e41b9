/*
 * The announcement methods (announce.h). Each announcer owns a copy of what it needs from
 * the cluster configuration. Runs in the keeper process, one thread.
 *
 * The holder interface keeps the service addresses in every method that has one, so the
 * node always accepts queries to them: a withdraw only stops new traffic from being routed
 * here, and in-flight queries are still answered.
 */
#include "cluster/announce.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/file.h"
#include "base/log.h"
#include "cluster/bird.h"
#include "cluster/nl.h"

struct announcer {
	conf_announce_t method;
	char *ifname;            /* owned; NULL: no holder (keepalived without an interface) */
	steer_sockaddr_t *addrs; /* owned */
	size_t n_addrs;
	char *bird_socket;   /* owned */
	char *bird_protocol; /* owned */
	unsigned table;
	char *track_file; /* owned */
};

const char *announcer_method_name(conf_announce_t method)
{
	switch (method) {
	case CONF_ANNOUNCE_INTERFACE:
		return "interface";
	case CONF_ANNOUNCE_BIRD:
		return "bird";
	case CONF_ANNOUNCE_FRR:
		return "frr";
	case CONF_ANNOUNCE_KEEPALIVED:
		return "keepalived";
	}
	return "unknown";
}

void announcer_free(announcer_t *a)
{
	if (!a)
		return;
	free(a->ifname);
	free(a->addrs);
	free(a->bird_socket);
	free(a->bird_protocol);
	free(a->track_file);
	free(a);
}

/*
 * The addresses on the holder, and for IPv6 a local route through lo as well: the kernel
 * drops an IPv6 address's local route while its interface is down, and a withdrawn node
 * must still answer the queries already on their way (IPv4 keeps its local routes).
 */
static int announcer_addrs(const announcer_t *a, char *err, size_t errlen)
{
	for (size_t i = 0; a->ifname && i < a->n_addrs; i++) {
		int ret = nl_addr_ensure(a->ifname, &a->addrs[i], err, errlen);
		if (ret == 0 && a->addrs[i].sa.sa_family == AF_INET6)
			ret = nl_local_route_set(&a->addrs[i], true, err, errlen);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Create the holder, put the addresses on it and set it up or down. */
static int announcer_holder(const announcer_t *a, bool up, char *err, size_t errlen)
{
	bool created = false;
	int ret = nl_link_ensure(a->ifname, &created, err, errlen);
	if (ret < 0)
		return ret;
	if (created)
		log_info("cluster: created the holder interface %s", a->ifname);
	ret = announcer_addrs(a, err, errlen);
	return ret < 0 ? ret : nl_link_set_up(a->ifname, up, err, errlen);
}

static int track_fill_cb(FILE *f, void *ctx)
{
	const char *value = ctx;
	return fputs(value, f) < 0 ? -EIO : 0;
}

/*
 * keepalived reads the track file as a number: 0 healthy, anything else a fault. It is
 * replaced by rename, so keepalived's inotify watch never sees a half-written value.
 */
static int announcer_track_file(const announcer_t *a, bool healthy, char *err, size_t errlen)
{
	int ret = steer_file_replace(a->track_file, 0644, track_fill_cb,
	                             (void *)(healthy ? "0\n" : "1\n"));
	if (ret == -ENOENT) {
		/* /run/steer is not there after a reboot: make the one missing folder */
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s", a->track_file);
		char *slash = strrchr(dir, '/');
		if (slash && slash != dir) {
			*slash = '\0';
			if (mkdir(dir, 0755) == 0 || errno == EEXIST)
				ret = steer_file_replace(a->track_file, 0644, track_fill_cb,
				                         (void *)(healthy ? "0\n" : "1\n"));
		}
	}
	if (ret < 0)
		snprintf(err, errlen, "track file %s: %s", a->track_file, steer_strerror(ret));
	return ret;
}

static int announcer_routes(const announcer_t *a, bool present, char *err, size_t errlen)
{
	for (size_t i = 0; i < a->n_addrs; i++) {
		int ret = nl_route_set(&a->addrs[i], "lo", a->table, present, err, errlen);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int announcer_apply(announcer_t *a, bool announce, char *err, size_t errlen)
{
	switch (a->method) {
	case CONF_ANNOUNCE_INTERFACE:
		return nl_link_set_up(a->ifname, announce, err, errlen);
	case CONF_ANNOUNCE_BIRD:
		return bird_protocol_set(a->bird_socket, a->bird_protocol, announce,
		                         BIRD_TIMEOUT_MS, NULL, err, errlen);
	case CONF_ANNOUNCE_FRR:
		return announcer_routes(a, announce, err, errlen);
	case CONF_ANNOUNCE_KEEPALIVED:
		return announcer_track_file(a, announce, err, errlen);
	}
	snprintf(err, errlen, "unknown announcement method %d", (int)a->method);
	return STEER_EINVAL;
}

/* Whether the holder is @p up; puts it right (and says so in @p drifted) when it is not. */
static int announcer_link_verify(const announcer_t *a, bool up, bool *drifted, char *err,
                                 size_t errlen)
{
	int ret = nl_link_is_up(a->ifname, err, errlen);
	if (ret < 0)
		return ret;
	if (ret == (int)up)
		return 0;
	*drifted = true;
	return nl_link_set_up(a->ifname, up, err, errlen);
}

static int announcer_track_verify(const announcer_t *a, bool healthy, bool *drifted, char *err,
                                  size_t errlen)
{
	char buf[8] = "";
	FILE *f = fopen(a->track_file, "re");
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = '\0';
		fclose(f);
	}
	if (!strcmp(buf, healthy ? "0\n" : "1\n"))
		return 0;
	*drifted = true;
	return announcer_track_file(a, healthy, err, errlen);
}

int announcer_verify(announcer_t *a, bool announce, bool *drifted, char *err, size_t errlen)
{
	*drifted = false;
	int ret = announcer_addrs(a, err, errlen);
	if (ret < 0)
		return ret;
	switch (a->method) {
	case CONF_ANNOUNCE_INTERFACE:
		return announcer_link_verify(a, announce, drifted, err, errlen);
	case CONF_ANNOUNCE_BIRD:
		ret = announcer_link_verify(a, true, drifted, err, errlen);
		if (ret == 0) {
			bool changed = false;
			ret = bird_protocol_set(a->bird_socket, a->bird_protocol, announce,
			                        BIRD_TIMEOUT_MS, &changed, err, errlen);
			*drifted = *drifted || changed;
		}
		return ret;
	case CONF_ANNOUNCE_FRR:
		ret = announcer_link_verify(a, false, drifted, err, errlen);
		return ret < 0 ? ret : announcer_routes(a, announce, err, errlen);
	case CONF_ANNOUNCE_KEEPALIVED:
		ret = a->ifname ? announcer_link_verify(a, true, drifted, err, errlen) : 0;
		return ret < 0 ? ret : announcer_track_verify(a, announce, drifted, err, errlen);
	}
	snprintf(err, errlen, "unknown announcement method %d", (int)a->method);
	return STEER_EINVAL;
}

static int announcer_check(const conf_cluster_t *cc, char *err, size_t errlen)
{
	bool holder = cc->announce != CONF_ANNOUNCE_KEEPALIVED || cc->interface;
	if (holder && (!cc->interface || !*cc->interface)) {
		snprintf(err, errlen, "cluster: announce %s needs an interface",
		         announcer_method_name(cc->announce));
		return STEER_EINVAL;
	}
	if (cc->announce == CONF_ANNOUNCE_BIRD && (!cc->bird_socket || !cc->bird_protocol)) {
		snprintf(err, errlen, "cluster: announce bird needs bird socket and protocol");
		return STEER_EINVAL;
	}
	if (cc->announce == CONF_ANNOUNCE_KEEPALIVED &&
	    (!cc->keepalived_track_file || !*cc->keepalived_track_file)) {
		snprintf(err, errlen, "cluster: announce keepalived needs a track file");
		return STEER_EINVAL;
	}
	return 0;
}

int announcer_new(const conf_cluster_t *cc, announcer_t **out, char *err, size_t errlen)
{
	*out = NULL;
	int ret = announcer_check(cc, err, errlen);
	if (ret < 0)
		return ret;
	announcer_t *a = xcalloc(1, sizeof(*a));
	a->method = cc->announce;
	a->ifname = xstrdup(cc->interface);
	if (cc->n_service)
		a->addrs = xmemdup(cc->service, cc->n_service * sizeof(*cc->service));
	a->n_addrs = cc->n_service;
	a->bird_socket = xstrdup(cc->bird_socket);
	a->bird_protocol = xstrdup(cc->bird_protocol);
	a->table = cc->frr_table ? cc->frr_table : 254;
	a->track_file = xstrdup(cc->keepalived_track_file);

	switch (a->method) {
	case CONF_ANNOUNCE_INTERFACE:
		/* the holder comes up only when the self-check says so */
		ret = announcer_holder(a, false, err, errlen);
		break;
	case CONF_ANNOUNCE_FRR:
		/* Down for good: zebra would prefer the holder's connected routes to the kernel
		 * routes it redistributes, and hide them. The addresses stay local. */
		ret = announcer_holder(a, false, err, errlen);
		if (ret == 0)
			ret = announcer_routes(a, false, err, errlen);
		break;
	case CONF_ANNOUNCE_BIRD:
		ret = announcer_holder(a, true, err, errlen);
		if (ret == 0) {
			/* BIRD may start after steerd; the keeper retries the withdraw until it
			 * answers, so a silent BIRD is not a set-up failure */
			char berr[256];
			int bret = announcer_apply(a, false, berr, sizeof(berr));
			if (bret < 0)
				log_warn("cluster: cannot withdraw through BIRD yet: %s", berr);
		}
		break;
	case CONF_ANNOUNCE_KEEPALIVED:
		ret = a->ifname ? announcer_holder(a, true, err, errlen) : 0;
		if (ret == 0)
			ret = announcer_apply(a, false, err, errlen);
		break;
	}
	if (ret < 0) {
		announcer_free(a);
		return ret;
	}
	*out = a;
	return 0;
}
