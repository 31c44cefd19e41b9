/*
 * rtnetlink requests, one fresh NETLINK_ROUTE socket per call: a request carries a sequence
 * number and asks for an acknowledgement, and only replies with that number from the kernel
 * (port 0) are taken; every receive is bounded by NL_RECV_TIMEOUT_MS, so a stuck socket fails
 * the call instead of hanging the keeper. No state is kept, so any thread or process may call
 * these at any time.
 */
#include "cluster/nl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"

/* A netlink answer takes microseconds; a second means the kernel will not answer at all. */
#define NL_RECV_TIMEOUT_MS 1000
#define NL_BUF_SIZE        16384

/* <linux/if.h> has it but clashes with <net/if.h>; the value is kernel ABI. */
#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000
#endif

/* Messages are built in place: header, family struct, then attributes. */
typedef struct {
	struct nlmsghdr *h;
	size_t cap;
} nl_msg_t;

typedef union {
	struct nlmsghdr h;
	char buf[1024];
} nl_req_t;

/* Called for each reply that is not the final acknowledgement; returns 0 or a steer_err. */
typedef int (*nl_reply_cb)(const struct nlmsghdr *h, void *ctx);

static void nl_seterr(char *err, size_t errlen, const char *fmt, ...) STEER_PRINTF(3, 4);
static void nl_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int nl_msg_init(nl_msg_t *m, nl_req_t *req, uint16_t type, uint16_t flags, size_t hdrlen)
{
	memset(req, 0, sizeof(*req));
	m->h = &req->h;
	m->cap = sizeof(req->buf);
	m->h->nlmsg_len = NLMSG_LENGTH(hdrlen);
	m->h->nlmsg_type = type;
	m->h->nlmsg_flags = NLM_F_REQUEST | flags;
	return 0;
}

static void *nl_msg_data(nl_msg_t *m)
{
	return NLMSG_DATA(m->h);
}

static struct rtattr *nl_attr_put(nl_msg_t *m, uint16_t type, const void *data, size_t len)
{
	size_t at = NLMSG_ALIGN(m->h->nlmsg_len);
	STEER_ASSERT(at + RTA_SPACE(len) <= m->cap);
	struct rtattr *rta = (struct rtattr *)((char *)m->h + at);
	rta->rta_type = type;
	rta->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(rta), data, len);
	m->h->nlmsg_len = (uint32_t)(at + RTA_ALIGN(rta->rta_len));
	return rta;
}

static void nl_attr_put_u32(nl_msg_t *m, uint16_t type, uint32_t v)
{
	nl_attr_put(m, type, &v, sizeof(v));
}

static void nl_attr_nest_end(nl_msg_t *m, struct rtattr *nest)
{
	nest->rta_len = (unsigned short)((char *)m->h + m->h->nlmsg_len - (char *)nest);
}

/* The attributes of one message, indexed by type (types above max are ignored). */
static void nl_attrs_parse(struct rtattr *rta, int len, struct rtattr **tb, unsigned max)
{
	memset(tb, 0, sizeof(*tb) * (max + 1));
	for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
		unsigned type = rta->rta_type & (unsigned)~NLA_F_NESTED;
		if (type <= max && !tb[type])
			tb[type] = rta;
	}
}

/* A 32-bit attribute, or @p dflt when it is missing or short. */
static uint32_t nl_attr_u32(const struct rtattr *rta, uint32_t dflt)
{
	uint32_t v;
	if (!rta || RTA_PAYLOAD(rta) < sizeof(v))
		return dflt;
	memcpy(&v, RTA_DATA(rta), sizeof(v));
	return v;
}

static int nl_open(char *err, size_t errlen)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0) {
		int ret = -errno;
		nl_seterr(err, errlen, "netlink socket: %s", strerror(errno));
		return ret;
	}
	int one = 1;
	/* Best effort: the kernel's own words ("Unknown device type") make better errors. */
	(void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int ret = -errno;
		nl_seterr(err, errlen, "netlink bind: %s", strerror(errno));
		close(fd);
		return ret;
	}
	return fd;
}

/* The kernel's extended-ack text of an error message, or NULL. */
static const char *nl_extack_msg(const struct nlmsghdr *h)
{
	if (!(h->nlmsg_flags & NLM_F_ACK_TLVS))
		return NULL;
	const struct nlmsgerr *e = NLMSG_DATA(h);
	size_t off = sizeof(*e);
	if (!(h->nlmsg_flags & NLM_F_CAPPED))
		off += e->msg.nlmsg_len - sizeof(struct nlmsghdr);
	if (NLMSG_LENGTH(off) > h->nlmsg_len)
		return NULL;
	struct rtattr *tb[NLMSGERR_ATTR_MAX + 1];
	nl_attrs_parse((struct rtattr *)((char *)e + NLMSG_ALIGN(off)),
	               (int)(h->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(off))), tb, NLMSGERR_ATTR_MAX);
	struct rtattr *msg = tb[NLMSGERR_ATTR_MSG];
	if (!msg || RTA_PAYLOAD(msg) < 1 || ((char *)RTA_DATA(msg))[RTA_PAYLOAD(msg) - 1] != '\0')
		return NULL;
	return RTA_DATA(msg);
}

/* Read replies to @p seq until its acknowledgement (or NLMSG_DONE of a dump). */
static int nl_recv_replies(int fd, uint32_t seq, nl_reply_cb cb, void *ctx, const char *what,
                           char *err, size_t errlen)
{
	static _Thread_local char buf[NL_BUF_SIZE] __attribute__((aligned(8)));
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int pr = poll(&pfd, 1, NL_RECV_TIMEOUT_MS);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			nl_seterr(err, errlen, "%s: no answer from the kernel", what);
			return -ETIMEDOUT;
		}
		struct sockaddr_nl from;
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr mh = {.msg_name = &from,
		                    .msg_namelen = sizeof(from),
		                    .msg_iov = &iov,
		                    .msg_iovlen = 1};
		ssize_t n = recvmsg(fd, &mh, 0);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			int ret = -errno;
			nl_seterr(err, errlen, "%s: netlink receive: %s", what, strerror(errno));
			return ret;
		}
		if (mh.msg_flags & MSG_TRUNC) {
			nl_seterr(err, errlen, "%s: netlink reply truncated", what);
			return STEER_ETRUNC;
		}
		if (from.nl_pid != 0)
			continue;
		int len = (int)n;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len);
		     h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_seq != seq)
				continue; /* a late answer to someone else's request */
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
					nl_seterr(err, errlen, "%s: short netlink error", what);
					return STEER_EMALF;
				}
				const struct nlmsgerr *e = NLMSG_DATA(h);
				if (e->error == 0)
					return 0;
				const char *ext = nl_extack_msg(h);
				char detail[160];
				snprintf(detail, sizeof(detail), "%s%s%s", strerror(-e->error),
				         ext ? " - " : "", ext ? ext : "");
				nl_seterr(err, errlen, "%s: %s", what, detail);
				return e->error < 0 ? e->error : -EPROTO;
			}
			if (cb) {
				int ret = cb(h, ctx);
				if (ret < 0) {
					nl_seterr(err, errlen, "%s: %s", what, steer_strerror(ret));
					return ret;
				}
			}
		}
	}
}

/*
 * Send @p m and wait for its answer. @p what names the operation in errors. Requests that are
 * not dumps ask for an acknowledgement, so a success is confirmed, never assumed.
 */
static int nl_talk(nl_msg_t *m, nl_reply_cb cb, void *ctx, const char *what, char *err,
                   size_t errlen)
{
	static _Atomic uint32_t seq_next;
	int fd = nl_open(err, errlen);
	if (fd < 0)
		return fd;
	int ret;
	uint32_t seq = (uint32_t)time(NULL) ^ ((uint32_t)getpid() << 16);
	seq += ++seq_next;
	m->h->nlmsg_seq = seq;
	/* NLM_F_DUMP shares its bits with NLM_F_EXCL and NLM_F_REPLACE: only a GET is a dump. */
	bool dump = (m->h->nlmsg_type & 3) == 2 && (m->h->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
	if (!dump)
		m->h->nlmsg_flags |= NLM_F_ACK;
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	if (sendto(fd, m->h, m->h->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		ret = -errno;
		nl_seterr(err, errlen, "%s: netlink send: %s", what, strerror(errno));
		goto out;
	}
	ret = nl_recv_replies(fd, seq, cb, ctx, what, err, errlen);
out:
	close(fd);
	return ret;
}

/* ---- links -------------------------------------------------------------------------------- */

static int nl_ifname_check(const char *ifname, char *err, size_t errlen)
{
	size_t len = strlen(ifname);
	if (len == 0 || len >= IFNAMSIZ || strchr(ifname, '/') || strchr(ifname, ' ') ||
	    !strcmp(ifname, ".") || !strcmp(ifname, "..")) {
		nl_seterr(err, errlen, "bad interface name \"%s\"", ifname);
		return STEER_EINVAL;
	}
	return 0;
}

typedef struct {
	int index;
	unsigned flags;
	bool found;
	char name[IFNAMSIZ];
} nl_link_info_t;

static int nl_link_cb(const struct nlmsghdr *h, void *ctx)
{
	nl_link_info_t *li = ctx;
	if (h->nlmsg_type != RTM_NEWLINK || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifinfomsg)))
		return 0;
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	struct rtattr *tb[IFLA_MAX + 1];
	nl_attrs_parse(IFLA_RTA(ifi), (int)IFLA_PAYLOAD(h), tb, IFLA_MAX);
	li->found = true;
	li->index = ifi->ifi_index;
	li->flags = ifi->ifi_flags;
	if (tb[IFLA_IFNAME])
		snprintf(li->name, sizeof(li->name), "%.*s", (int)RTA_PAYLOAD(tb[IFLA_IFNAME]),
		         (const char *)RTA_DATA(tb[IFLA_IFNAME]));
	return 0;
}

/* Look a link up by name (@p ifname) or index; -ENODEV when there is none. */
static int nl_link_get(const char *ifname, int index, nl_link_info_t *li, char *err, size_t errlen)
{
	nl_req_t req;
	nl_msg_t m;
	char what[64];
	nl_msg_init(&m, &req, RTM_GETLINK, 0, sizeof(struct ifinfomsg));
	struct ifinfomsg *ifi = nl_msg_data(&m);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = index;
	if (ifname) {
		nl_attr_put(&m, IFLA_IFNAME, ifname, strlen(ifname) + 1);
		snprintf(what, sizeof(what), "interface %s", ifname);
	} else {
		snprintf(what, sizeof(what), "interface #%d", index);
	}
	memset(li, 0, sizeof(*li));
	int ret = nl_talk(&m, nl_link_cb, li, what, err, errlen);
	if (ret == 0 && !li->found) {
		nl_seterr(err, errlen, "%s: %s", what, strerror(ENODEV));
		ret = -ENODEV;
	}
	return ret;
}

static int nl_link_create(const char *ifname, const char *kind, char *err, size_t errlen)
{
	nl_req_t req;
	nl_msg_t m;
	char what[64];
	snprintf(what, sizeof(what), "create %s interface %s", kind, ifname);
	nl_msg_init(&m, &req, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, sizeof(struct ifinfomsg));
	struct ifinfomsg *ifi = nl_msg_data(&m);
	ifi->ifi_family = AF_UNSPEC;
	nl_attr_put(&m, IFLA_IFNAME, ifname, strlen(ifname) + 1);
	struct rtattr *info = nl_attr_put(&m, IFLA_LINKINFO, NULL, 0);
	nl_attr_put(&m, IFLA_INFO_KIND, kind, strlen(kind));
	nl_attr_nest_end(&m, info);
	return nl_talk(&m, NULL, NULL, what, err, errlen);
}

/*
 * Without keep_addr_on_down the kernel drops a down link's IPv6 addresses, and bringing the
 * holder up again would come back without them. A kernel without IPv6 has no such file, and
 * then there are no IPv6 addresses to keep.
 */
static int nl_keep_addr_on_down(const char *ifname, char *err, size_t errlen)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/keep_addr_on_down", ifname);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		int ret = -errno;
		nl_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return ret;
	}
	int ret = 0;
	if (write(fd, "1\n", 2) != 2) {
		ret = -errno;
		nl_seterr(err, errlen, "%s: %s", path, strerror(errno));
	}
	close(fd);
	return ret;
}

int nl_link_ensure(const char *ifname, bool *created, char *err, size_t errlen)
{
	nl_link_info_t li;
	*created = false;
	int ret = nl_ifname_check(ifname, err, errlen);
	if (ret < 0)
		return ret;
	ret = nl_link_get(ifname, 0, &li, err, errlen);
	if (ret == -ENODEV) {
		/* dummy is the natural holder; kernels built without it still have ifb */
		ret = nl_link_create(ifname, "dummy", err, errlen);
		if (ret == -EOPNOTSUPP)
			ret = nl_link_create(ifname, "ifb", err, errlen);
		if (ret == 0)
			*created = true;
		else if (ret == -EEXIST)
			ret =
			    0; /* made by someone else meanwhile: it exists, which is all we need */
	}
	if (ret < 0)
		return ret;
	return nl_keep_addr_on_down(ifname, err, errlen);
}

int nl_link_set_up(const char *ifname, bool up, char *err, size_t errlen)
{
	nl_link_info_t li;
	int ret = nl_ifname_check(ifname, err, errlen);
	if (ret < 0)
		return ret;
	ret = nl_link_get(ifname, 0, &li, err, errlen);
	if (ret < 0)
		return ret;
	nl_req_t req;
	nl_msg_t m;
	char what[64];
	snprintf(what, sizeof(what), "set interface %s %s", ifname, up ? "up" : "down");
	nl_msg_init(&m, &req, RTM_NEWLINK, 0, sizeof(struct ifinfomsg));
	struct ifinfomsg *ifi = nl_msg_data(&m);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = li.index;
	ifi->ifi_flags = up ? IFF_UP : 0;
	ifi->ifi_change = IFF_UP;
	return nl_talk(&m, NULL, NULL, what, err, errlen);
}

int nl_link_is_up(const char *ifname, char *err, size_t errlen)
{
	nl_link_info_t li;
	int ret = nl_ifname_check(ifname, err, errlen);
	if (ret < 0)
		return ret;
	ret = nl_link_get(ifname, 0, &li, err, errlen);
	if (ret < 0)
		return ret;
	return (li.flags & IFF_UP) ? 1 : 0;
}

/* ---- addresses and routes ----------------------------------------------------------------- */

static const void *nl_sa_addr(const steer_sockaddr_t *a, size_t *len)
{
	if (a->sa.sa_family == AF_INET) {
		*len = 4;
		return &a->sin.sin_addr;
	}
	*len = 16;
	return &a->sin6.sin6_addr;
}

static const char *nl_sa_str(const steer_sockaddr_t *a, char *buf, size_t size)
{
	if (!inet_ntop(a->sa.sa_family,
	               a->sa.sa_family == AF_INET ? (const void *)&a->sin.sin_addr
	                                          : (const void *)&a->sin6.sin6_addr,
	               buf, (socklen_t)size))
		snprintf(buf, size, "(family %d)", a->sa.sa_family);
	return buf;
}

static int nl_family_check(const steer_sockaddr_t *a, char *err, size_t errlen)
{
	if (a->sa.sa_family != AF_INET && a->sa.sa_family != AF_INET6) {
		nl_seterr(err, errlen, "not an IPv4 or IPv6 address");
		return STEER_EINVAL;
	}
	return 0;
}

int nl_addr_ensure(const char *ifname, const steer_sockaddr_t *addr, char *err, size_t errlen)
{
	nl_link_info_t li;
	int ret = nl_ifname_check(ifname, err, errlen);
	if (ret == 0)
		ret = nl_family_check(addr, err, errlen);
	if (ret == 0)
		ret = nl_link_get(ifname, 0, &li, err, errlen);
	if (ret < 0)
		return ret;
	char astr[INET6_ADDRSTRLEN + 8], what[96];
	snprintf(what, sizeof(what), "add address %s to %s", nl_sa_str(addr, astr, sizeof(astr)),
	         ifname);
	nl_req_t req;
	nl_msg_t m;
	nl_msg_init(&m, &req, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, sizeof(struct ifaddrmsg));
	struct ifaddrmsg *ifa = nl_msg_data(&m);
	size_t alen;
	const void *raw = nl_sa_addr(addr, &alen);
	ifa->ifa_family = (unsigned char)addr->sa.sa_family;
	ifa->ifa_prefixlen = (unsigned char)(alen * 8);
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned)li.index;
	/* A holder address is on every node at once: duplicate detection would fail them all. */
	if (addr->sa.sa_family == AF_INET6) {
		ifa->ifa_flags = IFA_F_NODAD;
		nl_attr_put_u32(&m, IFA_FLAGS, IFA_F_NODAD);
	}
	nl_attr_put(&m, IFA_LOCAL, raw, alen);
	nl_attr_put(&m, IFA_ADDRESS, raw, alen);
	ret = nl_talk(&m, NULL, NULL, what, err, errlen);
	if (ret == -EEXIST)
		ret = 0;
	return ret;
}

/* What one route request changes: a host route of @p type in @p table through @p ifname. */
typedef struct {
	unsigned table;
	unsigned char type;  /* RTN_UNICAST, RTN_LOCAL */
	unsigned char scope; /* when added */
	uint32_t metric;     /* 0 = the kernel's default */
} nl_route_kind_t;

static int nl_route_change(const steer_sockaddr_t *dst, const char *ifname,
                           const nl_route_kind_t *kind, bool present, char *err, size_t errlen)
{
	nl_link_info_t li;
	int ret = nl_link_get(ifname, 0, &li, err, errlen);
	if (ret < 0)
		return ret;
	char astr[INET6_ADDRSTRLEN + 8], what[128];
	snprintf(what, sizeof(what), "%s %sroute %s dev %s table %u", present ? "add" : "delete",
	         kind->type == RTN_LOCAL ? "local " : "", nl_sa_str(dst, astr, sizeof(astr)),
	         ifname, kind->table);
	nl_req_t req;
	nl_msg_t m;
	nl_msg_init(&m, &req, present ? RTM_NEWROUTE : RTM_DELROUTE,
	            present ? NLM_F_CREATE | NLM_F_EXCL : 0, sizeof(struct rtmsg));
	struct rtmsg *rtm = nl_msg_data(&m);
	size_t alen;
	const void *raw = nl_sa_addr(dst, &alen);
	rtm->rtm_family = (unsigned char)dst->sa.sa_family;
	rtm->rtm_dst_len = (unsigned char)(alen * 8);
	rtm->rtm_table = kind->table < 256 ? (unsigned char)kind->table : RT_TABLE_UNSPEC;
	rtm->rtm_protocol = NL_RTPROT_STEER;
	rtm->rtm_scope = present ? kind->scope : RT_SCOPE_NOWHERE;
	rtm->rtm_type = kind->type;
	nl_attr_put(&m, RTA_DST, raw, alen);
	nl_attr_put_u32(&m, RTA_TABLE, kind->table);
	nl_attr_put_u32(&m, RTA_OIF, (uint32_t)li.index);
	if (kind->metric != 0)
		nl_attr_put_u32(&m, RTA_PRIORITY, kind->metric);
	ret = nl_talk(&m, NULL, NULL, what, err, errlen);
	/* EEXIST: the route is there; ESRCH: it is gone. Either is the state asked for. */
	if ((present && ret == -EEXIST) || (!present && ret == -ESRCH))
		ret = 0;
	return ret;
}

int nl_route_set(const steer_sockaddr_t *dst, const char *ifname, unsigned table, bool present,
                 char *err, size_t errlen)
{
	int ret = nl_ifname_check(ifname, err, errlen);
	if (ret == 0)
		ret = nl_family_check(dst, err, errlen);
	if (ret == 0 && (table == 0 || table == RT_TABLE_LOCAL)) {
		nl_seterr(err, errlen, "route table %s is not for announced routes",
		          table ? "255 (local)" : "0");
		ret = STEER_EINVAL;
	}
	if (ret < 0)
		return ret;
	nl_route_kind_t kind = {.table = table, .type = RTN_UNICAST, .scope = RT_SCOPE_LINK};
	return nl_route_change(dst, ifname, &kind, present, err, errlen);
}

int nl_local_route_set(const steer_sockaddr_t *addr, bool present, char *err, size_t errlen)
{
	int ret = nl_family_check(addr, err, errlen);
	if (ret < 0)
		return ret;
	/* Behind the kernel's own local route (metric 0) while the holder is up. */
	nl_route_kind_t kind = {
	    .table = RT_TABLE_LOCAL, .type = RTN_LOCAL, .scope = RT_SCOPE_HOST, .metric = 1024};
	return nl_route_change(addr, "lo", &kind, present, err, errlen);
}

/* ---- route checks ------------------------------------------------------------------------- */

typedef struct {
	bool found;
	unsigned char type;
	unsigned flags; /* rtm_flags (RTNH_F_DEAD, RTNH_F_LINKDOWN) */
	int oif;        /* 0 when the route has several next hops */
	int oifs[8];    /* the next hops' devices */
	unsigned n_oifs;
	uint32_t metric;
	bool want_default; /* dump: keep only a default route in the main table */
} nl_route_info_t;

static void nl_route_nexthops(nl_route_info_t *ri, struct rtattr *mp)
{
	struct rtnexthop *nh = RTA_DATA(mp);
	int len = (int)RTA_PAYLOAD(mp);
	while (len >= (int)sizeof(*nh) && nh->rtnh_len >= sizeof(*nh) && nh->rtnh_len <= len &&
	       ri->n_oifs < STEER_ARRAY_LEN(ri->oifs)) {
		if (!(nh->rtnh_flags & (RTNH_F_DEAD | RTNH_F_LINKDOWN)))
			ri->oifs[ri->n_oifs++] = nh->rtnh_ifindex;
		len -= RTNH_ALIGN(nh->rtnh_len);
		nh = RTNH_NEXT(nh);
	}
}

static int nl_route_cb(const struct nlmsghdr *h, void *ctx)
{
	nl_route_info_t *ri = ctx;
	if (h->nlmsg_type != RTM_NEWROUTE || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct rtmsg)))
		return 0;
	const struct rtmsg *rtm = NLMSG_DATA(h);
	struct rtattr *tb[RTA_MAX + 1];
	nl_attrs_parse(RTM_RTA(rtm), (int)RTM_PAYLOAD(h), tb, RTA_MAX);
	uint32_t metric = nl_attr_u32(tb[RTA_PRIORITY], 0);
	if (ri->want_default) {
		unsigned table = nl_attr_u32(tb[RTA_TABLE], rtm->rtm_table);
		if (rtm->rtm_dst_len != 0 || table != RT_TABLE_MAIN)
			return 0;
		/* The kernel takes the lowest metric and skips dead routes; so does the check. */
		if (rtm->rtm_flags & RTNH_F_DEAD)
			return 0;
		if (ri->found && ri->metric <= metric)
			return 0;
	} else if (ri->found) {
		return 0;
	}
	ri->metric = metric;
	ri->found = true;
	ri->type = rtm->rtm_type;
	ri->flags = rtm->rtm_flags;
	ri->oif = (int)nl_attr_u32(tb[RTA_OIF], 0);
	ri->n_oifs = 0;
	if (tb[RTA_MULTIPATH])
		nl_route_nexthops(ri, tb[RTA_MULTIPATH]);
	return 0;
}

static const char *nl_rtn_name(unsigned char type)
{
	switch (type) {
	case RTN_UNREACHABLE:
		return "unreachable";
	case RTN_BLACKHOLE:
		return "blackhole";
	case RTN_PROHIBIT:
		return "prohibit";
	case RTN_THROW:
		return "throw";
	default:
		return "not unicast";
	}
}

/* Whether the device @p index is up and has a carrier: 1, or 0 with @p why. */
static int nl_oif_usable(int index, char *why, size_t whylen)
{
	nl_link_info_t li;
	char err[128];
	int ret = nl_link_get(NULL, index, &li, err, sizeof(err));
	if (ret < 0) {
		snprintf(why, whylen, "device #%d of the route: %s", index, err);
		return ret == -ENODEV ? 0 : ret;
	}
	if (!(li.flags & IFF_UP)) {
		snprintf(why, whylen, "device %s of the route is down", li.name);
		return 0;
	}
	if (!(li.flags & IFF_LOWER_UP)) {
		snprintf(why, whylen, "device %s of the route has no carrier", li.name);
		return 0;
	}
	return 1;
}

/* The route found by a lookup or a dump, judged. */
static int nl_route_judge(const nl_route_info_t *ri, const char *target, char *why, size_t whylen)
{
	if (!ri->found) {
		snprintf(why, whylen, "no route to %s", target);
		return 0;
	}
	if (ri->type != RTN_UNICAST && ri->type != RTN_LOCAL) {
		snprintf(why, whylen, "route to %s is %s", target, nl_rtn_name(ri->type));
		return 0;
	}
	if (ri->flags & (RTNH_F_DEAD | RTNH_F_LINKDOWN)) {
		nl_link_info_t li = {.name = "?"};
		char err[128];
		if (ri->oif)
			(void)nl_link_get(NULL, ri->oif, &li, err, sizeof(err));
		snprintf(why, whylen, "route to %s is %s (device %s)", target,
		         (ri->flags & RTNH_F_DEAD) ? "dead" : "on a link that is down", li.name);
		return 0;
	}
	if (ri->oif)
		return nl_oif_usable(ri->oif, why, whylen);
	for (unsigned i = 0; i < ri->n_oifs; i++) {
		int ret = nl_oif_usable(ri->oifs[i], why, whylen);
		if (ret != 0)
			return ret; /* one usable next hop is enough */
	}
	snprintf(why, whylen, "route to %s has no usable next hop", target);
	return 0;
}

static int nl_route_check_default(int family, char *why, size_t whylen)
{
	nl_req_t req;
	nl_msg_t m;
	char err[160];
	nl_msg_init(&m, &req, RTM_GETROUTE, NLM_F_DUMP, sizeof(struct rtmsg));
	struct rtmsg *rtm = nl_msg_data(&m);
	rtm->rtm_family = (unsigned char)family;
	nl_route_info_t ri = {.want_default = true};
	int ret = nl_talk(&m, nl_route_cb, &ri, "route dump", err, sizeof(err));
	if (ret < 0) {
		snprintf(why, whylen, "%s", err);
		return ret;
	}
	if (!ri.found) {
		snprintf(why, whylen, "no %s default route", family == AF_INET ? "IPv4" : "IPv6");
		return 0;
	}
	return nl_route_judge(&ri, family == AF_INET ? "0.0.0.0/0" : "::/0", why, whylen);
}

int nl_route_check(int family, const steer_sockaddr_t *dst, const steer_sockaddr_t *src, char *why,
                   size_t whylen)
{
	char dstr[INET6_ADDRSTRLEN + 8], sstr[INET6_ADDRSTRLEN + 8], err[160], target[120];
	if (!dst) {
		if (family != AF_INET && family != AF_INET6) {
			snprintf(why, whylen, "route check: family %d is not IPv4 or IPv6", family);
			return STEER_EINVAL;
		}
		return nl_route_check_default(family, why, whylen);
	}
	if (nl_family_check(dst, err, sizeof(err)) < 0 ||
	    (src && src->sa.sa_family && src->sa.sa_family != dst->sa.sa_family)) {
		snprintf(why, whylen, "route check: bad destination or source family");
		return STEER_EINVAL;
	}
	bool with_src = src && src->sa.sa_family;
	nl_sa_str(dst, dstr, sizeof(dstr));
	if (with_src)
		snprintf(target, sizeof(target), "%s from %s", dstr,
		         nl_sa_str(src, sstr, sizeof(sstr)));
	else
		snprintf(target, sizeof(target), "%s", dstr);

	nl_req_t req;
	nl_msg_t m;
	nl_msg_init(&m, &req, RTM_GETROUTE, 0, sizeof(struct rtmsg));
	struct rtmsg *rtm = nl_msg_data(&m);
	size_t alen;
	const void *raw = nl_sa_addr(dst, &alen);
	rtm->rtm_family = (unsigned char)dst->sa.sa_family;
	rtm->rtm_dst_len = (unsigned char)(alen * 8);
	nl_attr_put(&m, RTA_DST, raw, alen);
	if (with_src) {
		raw = nl_sa_addr(src, &alen);
		rtm->rtm_src_len = (unsigned char)(alen * 8);
		nl_attr_put(&m, RTA_SRC, raw, alen);
	}
	nl_route_info_t ri = {0};
	int ret = nl_talk(&m, nl_route_cb, &ri, "route lookup", err, sizeof(err));
	switch (ret) {
	case 0:
		return nl_route_judge(&ri, target, why, whylen);
	case -ENETUNREACH:
	case -EHOSTUNREACH:
		snprintf(why, whylen, "no route to %s", target);
		return 0;
	case -EACCES:
	case -EPERM:
		snprintf(why, whylen, "route to %s is prohibit", target);
		return 0;
	case -EINVAL:
		/* what IPv4 says for a blackhole route, and for a source that is not ours */
		snprintf(why, whylen, "route to %s is refused (blackhole, or a source not local)",
		         target);
		return 0;
	default:
		snprintf(why, whylen, "%s", err);
		return ret;
	}
}
