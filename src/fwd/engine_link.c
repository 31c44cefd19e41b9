/*
 * Link state of the upstreams' exit devices: found at creation (the configured device, or
 * the interface holding the upstream's source address), read at start, then followed over
 * rtnetlink (RTMGRP_LINK) on the engine's loop. A device is up when it is administratively
 * up and has carrier (IFF_UP, IFF_RUNNING, IFF_LOWER_UP); a vanished device is down.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "fwd/engine_int.h"

#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000 /* linux/if.h, which clashes with net/if.h */
#endif

static bool same_addr(const struct sockaddr *a, const steer_sockaddr_t *b)
{
	if (!a || a->sa_family != b->sa.sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)(const void *)a)->sin_addr,
		              &b->sin.sin_addr, sizeof(b->sin.sin_addr)) == 0;
	if (a->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
		              &b->sin6.sin6_addr, sizeof(b->sin6.sin6_addr)) == 0;
	return false;
}

void fwd_eng_link_devices(fwd_upstream_def_t *defs, size_t n, char **owned)
{
	struct ifaddrs *ifs = NULL;
	bool need = false;
	for (size_t i = 0; i < n; i++)
		need |= !defs[i].link && defs[i].source.sa.sa_family != 0;
	if (!need)
		return;
	if (getifaddrs(&ifs) != 0) {
		log_warn("forwarder: cannot list interfaces (%s): link state not followed",
		         strerror(errno));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (defs[i].link || defs[i].source.sa.sa_family == 0)
			continue;
		for (struct ifaddrs *f = ifs; f; f = f->ifa_next) {
			if (same_addr(f->ifa_addr, &defs[i].source)) {
				owned[i] = strdup(f->ifa_name);
				defs[i].link = owned[i];
				break;
			}
		}
		if (!defs[i].link)
			log_warn("forwarder: upstream %s: no interface holds its source address, "
			         "link state not followed",
			         defs[i].name ? defs[i].name : "?");
	}
	freeifaddrs(ifs);
}

/* Report a device's state when it changed. */
static void apply(fwd_engine_t *e, const char *dev, bool up)
{
	bool changed = false;
	for (size_t i = 0; i < e->n_ups; i++) {
		fwd_eup_t *u = &e->eup[i];
		if (u->link && strcmp(u->link, dev) == 0 && u->link_up != up) {
			u->link_up = up;
			changed = true;
		}
	}
	if (!changed)
		return;
	pthread_mutex_lock(&e->lock);
	(void)fwd_upstream_link_state(e->ups, dev, up, fwd_eng_now_ms());
	pthread_mutex_unlock(&e->lock);
	fwd_eng_events(e);
	fwd_eng_probe_rearm(e);
}

static bool flags_up(unsigned flags)
{
	return (flags & IFF_UP) && (flags & IFF_RUNNING) && (flags & IFF_LOWER_UP);
}

/* Every tracked device's state now (start, and after netlink lost messages). */
static void read_all(fwd_engine_t *e)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	for (size_t i = 0; i < e->n_ups; i++) {
		const char *dev = e->eup[i].link;
		if (!dev)
			continue;
		struct ifreq ifr;
		memset(&ifr, 0, sizeof(ifr));
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
		bool up = false;
		if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
			/* SIOCGIFFLAGS has only 16 bits: carrier is IFF_RUNNING there. */
			unsigned fl = (unsigned)(uint16_t)ifr.ifr_flags;
			up = (fl & IFF_UP) && (fl & IFF_RUNNING);
		}
		apply(e, dev, up);
	}
	close(fd);
}

static void on_netlink(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	fwd_engine_t *e = w->data;
	_Alignas(struct nlmsghdr) uint8_t buf[16384];
	for (int burst = 0; burst < 64; burst++) {
		ssize_t n = recv(e->nl_fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0) {
			if (errno == ENOBUFS)
				read_all(e); /* messages were lost: ask the devices directly */
			return;
		}
		size_t len = (size_t)n;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len);
		     h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK)
				continue;
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifinfomsg)))
				continue;
			struct ifinfomsg *ifi = NLMSG_DATA(h);
			char name[IFNAMSIZ] = "";
			int alen = (int)IFLA_PAYLOAD(h);
			for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, alen);
			     a = RTA_NEXT(a, alen)) {
				if (a->rta_type != IFLA_IFNAME)
					continue;
				size_t l = RTA_PAYLOAD(a);
				if (l >= sizeof(name))
					l = sizeof(name) - 1;
				memcpy(name, RTA_DATA(a), l);
				name[l] = 0;
			}
			if (!name[0])
				continue;
			bool up = h->nlmsg_type == RTM_NEWLINK && flags_up(ifi->ifi_flags);
			apply(e, name, up);
		}
	}
}

int fwd_eng_link_open(fwd_engine_t *e, char *err, size_t errlen)
{
	bool tracked = false;
	for (size_t i = 0; i < e->n_ups; i++)
		tracked |= e->eup[i].link != NULL;
	if (!tracked)
		return 0;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = RTMGRP_LINK};
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int ret = -errno;
		snprintf(err, errlen, "forwarder: cannot follow link state (rtnetlink): %s",
		         steer_strerror(ret));
		if (fd >= 0)
			close(fd);
		return ret;
	}
	e->nl_fd = fd;
	ev_io_init(&e->nl_io, on_netlink, fd, EV_READ);
	e->nl_io.data = e;
	ev_io_start(e->loop, &e->nl_io);
	return 0;
}

void fwd_eng_link_initial(fwd_engine_t *e)
{
	read_all(e);
}
