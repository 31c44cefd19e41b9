/*
 * The probe sockets (probe/sender.h). Each dns and tcp sample owns a socket, an ev_io and a
 * timeout; the ICMP samples share one socket per family and are found by sequence number.
 * Only the agent's loop thread touches a sender.
 */
#include "probe/sender.h"

#include <errno.h>
#include <ev.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "dns/dname.h"
#include "dns/wire.h"

#define ICMP_SEQS 65536u
/* Enough for a DNS response to our question (we only read its header and question) and for
 * an ICMP reply with its IP header. */
#define RECV_BUF   1500
#define ICMP_BATCH 64

typedef struct probe_sample probe_sample_t;

/* One ICMP socket of one family. */
typedef struct {
	int fd; /* -1 = not open (yet, or it could not be) */
	bool raw;
	uint16_t ident; /* the echo identifier on a raw socket (the kernel's on a datagram one) */
	uint16_t next_seq;
	probe_sample_t **by_seq; /* ICMP_SEQS slots */
	ev_io io;
} icmp_sock_t;

struct probe_sender {
	struct ev_loop *loop;
	probe_sender_opts_t o;
	size_t qname_len;
	probe_sample_cb cb;
	void *ctx;
	icmp_sock_t icmp4, icmp6;
	probe_method_stats_t stats[CONF_PROBE_METHODS];
	size_t pending;
	probe_sample_t *all; /* every pending sample, doubly linked, for free */
};

struct probe_sample {
	probe_sender_t *s;
	conf_probe_method_t method;
	int family;
	int fd;               /* dns, tcp: owned; icmp: -1 */
	uint16_t id;          /* dns ID or icmp sequence */
	bool refused_at_once; /* tcp: connect() said ECONNREFUSED synchronously */
	uint64_t token;
	uint64_t sent_ns;
	ev_io io;
	ev_timer timer;
	probe_sample_t *prev, *next;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint16_t random_u16(void)
{
	uint16_t v = 0;
	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = (uint16_t)(mono_ns() ^ (mono_ns() >> 17));
	return v;
}

/* ---- the DNS query (pure) ------------------------------------------------------------- */

size_t probe_dns_query(const uint8_t *qname, uint16_t id, uint8_t *buf, size_t size)
{
	wire_ctx_t w = wire_ctx_init(buf, size);
	wire_ctx_write_u16(&w, id);
	wire_ctx_write_u16(&w, 0); /* a standard query, RD=0: we ask an authority-free question */
	wire_ctx_write_u16(&w, 1);
	wire_ctx_write_u16(&w, 0);
	wire_ctx_write_u16(&w, 0);
	wire_ctx_write_u16(&w, 0);
	wire_ctx_write(&w, qname, dname_len(qname));
	wire_ctx_write_u16(&w, DNS_TYPE_A);
	wire_ctx_write_u16(&w, DNS_CLASS_IN);
	return w.err ? 0 : wire_ctx_offset(&w);
}

bool probe_dns_reply_matches(const uint8_t *pkt, size_t len, const uint8_t *qname, uint16_t id)
{
	if (len < 12 || wire_read_u16(pkt) != id || !(pkt[2] & 0x80) || wire_read_u16(pkt + 4) != 1)
		return false;
	uint8_t name[DNS_DNAME_MAXLEN];
	size_t pos = 12;
	if (dname_unpack(pkt, len, &pos, name) < 0 || pos + 4 > len)
		return false;
	return dname_equal(name, qname) && wire_read_u16(pkt + pos) == DNS_TYPE_A &&
	       wire_read_u16(pkt + pos + 2) == DNS_CLASS_IN;
}

/* ---- sample life cycle ---------------------------------------------------------------- */

static probe_sample_t *sample_new(probe_sender_t *s, conf_probe_method_t method, int family,
                                  uint64_t token)
{
	probe_sample_t *p = xcalloc(1, sizeof(*p));
	*p = (probe_sample_t){.s = s, .method = method, .family = family, .fd = -1, .token = token};
	p->next = s->all;
	if (s->all)
		s->all->prev = p;
	s->all = p;
	return p;
}

static void sample_release(probe_sample_t *p)
{
	probe_sender_t *s = p->s;
	ev_io_stop(s->loop, &p->io);
	ev_timer_stop(s->loop, &p->timer);
	if (p->fd >= 0)
		close(p->fd);
	icmp_sock_t *ic = p->family == AF_INET ? &s->icmp4 : &s->icmp6;
	if (p->method == CONF_PROBE_ICMP && ic->by_seq && ic->by_seq[p->id] == p)
		ic->by_seq[p->id] = NULL;
	if (p->prev)
		p->prev->next = p->next;
	else
		s->all = p->next;
	if (p->next)
		p->next->prev = p->prev;
	free(p);
}

/* End @p p: count it, report it, free it. */
static void sample_end(probe_sample_t *p, bool answered, uint8_t ttl)
{
	probe_sender_t *s = p->s;
	uint64_t rtt_ns = mono_ns() - p->sent_ns;
	uint64_t rtt_us = rtt_ns / 1000;
	if (answered)
		s->stats[p->method].answered++;
	s->pending--;
	probe_sample_cb cb = s->cb;
	void *ctx = s->ctx;
	uint64_t token = p->token;
	sample_release(p);
	cb(ctx, token, answered, (uint32_t)(rtt_us > UINT32_MAX ? UINT32_MAX : rtt_us), ttl);
}

static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	sample_end(w->data, false, 0);
}

/* Arm the timeout and count the sample as sent. */
static void sample_started(probe_sample_t *p)
{
	probe_sender_t *s = p->s;
	p->sent_ns = mono_ns();
	ev_timer_init(&p->timer, on_timeout, s->o.timeout_ms / 1000.0, 0);
	p->timer.data = p;
	ev_timer_start(s->loop, &p->timer);
	s->stats[p->method].sent++;
	s->pending++;
}

/* ---- addresses and sockets ------------------------------------------------------------ */

static socklen_t target_addr(int family, const uint8_t *addr, uint16_t port, steer_sockaddr_t *sa)
{
	memset(sa, 0, sizeof(*sa));
	if (family == AF_INET) {
		sa->sin.sin_family = AF_INET;
		sa->sin.sin_port = htons(port);
		memcpy(&sa->sin.sin_addr, addr, 4);
		return sizeof(sa->sin);
	}
	sa->sin6.sin6_family = AF_INET6;
	sa->sin6.sin6_port = htons(port);
	memcpy(&sa->sin6.sin6_addr, addr, 16);
	return sizeof(sa->sin6);
}

/* Bind @p fd to the configured source of @p family (any port), if one is set. */
static int bind_source(const probe_sender_t *s, int fd, int family)
{
	const steer_sockaddr_t *src = family == AF_INET ? &s->o.source4 : &s->o.source6;
	if (src->sa.sa_family == 0)
		return 0;
	steer_sockaddr_t any = *src;
	if (family == AF_INET)
		any.sin.sin_port = 0;
	else
		any.sin6.sin6_port = 0;
	return bind(fd, &any.sa, steer_sockaddr_len(&any)) == 0 ? 0 : -errno;
}

static void want_ttl(int fd, int family)
{
	int on = 1;
	if (family == AF_INET)
		(void)setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &on, sizeof(on));
	else
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &on, sizeof(on));
}

/* The TTL / hop limit of a received message, 0 when it carried none. */
static uint8_t msg_ttl(struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
		int v = -1;
		if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) ||
		    (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT))
			memcpy(&v, CMSG_DATA(c), sizeof(v));
		if (v >= 0 && v <= 255)
			return (uint8_t)v;
	}
	return 0;
}

/* recvmsg() with room for the TTL; returns the length or -errno. */
static ssize_t recv_with_ttl(int fd, uint8_t *buf, size_t size, uint8_t *ttl)
{
	union {
		char buf[CMSG_SPACE(sizeof(int)) * 4];
		struct cmsghdr align;
	} control;
	struct iovec iov = {.iov_base = buf, .iov_len = size};
	struct msghdr mh = {.msg_iov = &iov,
	                    .msg_iovlen = 1,
	                    .msg_control = control.buf,
	                    .msg_controllen = sizeof(control.buf)};
	ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	*ttl = msg_ttl(&mh);
	return n;
}

/* ---- dns ------------------------------------------------------------------------------ */

static void on_dns_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	probe_sample_t *p = w->data;
	uint8_t buf[RECV_BUF];
	for (;;) {
		uint8_t ttl = 0;
		ssize_t n = recv_with_ttl(p->fd, buf, sizeof(buf), &ttl);
		if (n == -EAGAIN || n == -EWOULDBLOCK)
			return;
		if (n < 0) {
			/* port or host unreachable: no DNS server there, the next method decides */
			sample_end(p, false, 0);
			return;
		}
		if (probe_dns_reply_matches(buf, (size_t)n, p->s->o.qname, p->id)) {
			sample_end(p, true, ttl);
			return;
		}
	}
}

static int send_dns(probe_sender_t *s, probe_sample_t *p, const steer_sockaddr_t *to,
                    socklen_t tolen)
{
	p->fd = socket(p->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd < 0)
		return -errno;
	want_ttl(p->fd, p->family);
	int ret = bind_source(s, p->fd, p->family);
	if (ret == 0 && connect(p->fd, &to->sa, tolen) != 0)
		ret = -errno;
	if (ret != 0)
		return ret;
	p->id = random_u16();
	uint8_t q[DNS_DNAME_MAXLEN + 16];
	size_t len = probe_dns_query(s->o.qname, p->id, q, sizeof(q));
	if (send(p->fd, q, len, 0) != (ssize_t)len)
		return -errno;
	ev_io_init(&p->io, on_dns_readable, p->fd, EV_READ);
	p->io.data = p;
	ev_io_start(s->loop, &p->io);
	return 0;
}

/* ---- tcp ------------------------------------------------------------------------------ */

static void on_tcp_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	probe_sample_t *p = w->data;
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
		soerr = errno;
	/* A SYN-ACK or a RST: either way the host answered from the other end of the path. */
	sample_end(p, p->refused_at_once || soerr == 0 || soerr == ECONNREFUSED, 0);
}

static int send_tcp(probe_sender_t *s, probe_sample_t *p, const steer_sockaddr_t *to,
                    socklen_t tolen)
{
	p->fd = socket(p->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd < 0)
		return -errno;
	/* Close with a RST: the handshake was all we wanted, so no FIN exchange and no
	 * TIME_WAIT on either side. */
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	(void)setsockopt(p->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	int ret = bind_source(s, p->fd, p->family);
	if (ret != 0)
		return ret;
	if (connect(p->fd, &to->sa, tolen) != 0) {
		if (errno == ECONNREFUSED)
			p->refused_at_once = true;
		else if (errno != EINPROGRESS)
			return -errno;
	}
	ev_io_init(&p->io, on_tcp_writable, p->fd, EV_WRITE);
	p->io.data = p;
	ev_io_start(s->loop, &p->io);
	return 0;
}

/* ---- icmp ----------------------------------------------------------------------------- */

static uint16_t inet_checksum(const uint8_t *data, size_t len)
{
	uint32_t sum = 0;
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)data[i] << 8 | data[i + 1];
	if (len & 1)
		sum += (uint32_t)data[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* An echo reply in @p buf (the IPv4 header first on a raw IPv4 socket): its sequence, or -1
 * when it is not a reply of ours. */
static int icmp_reply_seq(const icmp_sock_t *ic, int family, const uint8_t *buf, size_t n,
                          uint8_t *ttl)
{
	if (family == AF_INET && ic->raw) {
		if (n < 20 || (buf[0] >> 4) != 4)
			return -1;
		size_t ihl = (size_t)(buf[0] & 0x0f) * 4;
		if (ihl < 20 || n < ihl + 8)
			return -1;
		*ttl = buf[8];
		buf += ihl;
		n -= ihl;
	}
	if (n < 8)
		return -1;
	uint8_t reply = family == AF_INET ? ICMP_ECHOREPLY : ICMP6_ECHO_REPLY;
	if (buf[0] != reply || buf[1] != 0)
		return -1;
	if (ic->raw && wire_read_u16(buf + 4) != ic->ident)
		return -1;
	return wire_read_u16(buf + 6);
}

static void on_icmp_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	probe_sender_t *s = w->data;
	icmp_sock_t *ic = w == &s->icmp4.io ? &s->icmp4 : &s->icmp6;
	int family = ic == &s->icmp4 ? AF_INET : AF_INET6;
	uint8_t buf[RECV_BUF];
	/* A bounded batch per wake-up: a flood of replies must not starve the loop. */
	for (int i = 0; i < ICMP_BATCH; i++) {
		uint8_t ttl = 0;
		ssize_t n = recv_with_ttl(ic->fd, buf, sizeof(buf), &ttl);
		if (n == -EAGAIN || n == -EWOULDBLOCK)
			return;
		if (n < 0)
			continue; /* an error queued on the socket: that sample's timeout decides */
		int seq = icmp_reply_seq(ic, family, buf, (size_t)n, &ttl);
		if (seq >= 0 && ic->by_seq[seq] != NULL)
			sample_end(ic->by_seq[seq], true, ttl);
	}
}

/* Open the ICMP socket of @p family: the datagram kind first (no privilege needed where
 * net.ipv4.ping_group_range allows), else a raw one (CAP_NET_RAW). */
static int icmp_open(probe_sender_t *s, icmp_sock_t *ic, int family)
{
	int proto = family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6;
	int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, proto);
	ic->raw = false;
	if (fd < 0) {
		fd = socket(family, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, proto);
		ic->raw = true;
	}
	if (fd < 0)
		return -errno;
	if (ic->raw && family == AF_INET6) {
		struct icmp6_filter filter;
		ICMP6_FILTER_SETBLOCKALL(&filter);
		ICMP6_FILTER_SETPASS(ICMP6_ECHO_REPLY, &filter);
		(void)setsockopt(fd, IPPROTO_ICMPV6, ICMP6_FILTER, &filter, sizeof(filter));
	}
	want_ttl(fd, family);
	int ret = bind_source(s, fd, family);
	if (ret != 0) {
		close(fd);
		return ret;
	}
	ic->fd = fd;
	ic->ident = random_u16();
	ic->next_seq = random_u16();
	ic->by_seq = xcalloc(ICMP_SEQS, sizeof(*ic->by_seq));
	ev_io_init(&ic->io, on_icmp_readable, fd, EV_READ);
	ic->io.data = s;
	ev_io_start(s->loop, &ic->io);
	return 0;
}

static int send_icmp(probe_sender_t *s, probe_sample_t *p, steer_sockaddr_t *to, socklen_t tolen)
{
	icmp_sock_t *ic = p->family == AF_INET ? &s->icmp4 : &s->icmp6;
	if (ic->fd < 0) {
		int ret = icmp_open(s, ic, p->family);
		if (ret != 0)
			return ret;
	}
	/* A sequence nobody waits for: 65,536 of them outlast any timeout at any rate we allow. */
	uint16_t seq = ic->next_seq++;
	if (ic->by_seq[seq] != NULL)
		return STEER_EAGAIN;
	uint8_t pkt[16] = {p->family == AF_INET ? ICMP_ECHO : ICMP6_ECHO_REQUEST, 0};
	wire_write_u16(pkt + 4, ic->ident);
	wire_write_u16(pkt + 6, seq);
	memcpy(pkt + 8, "steer-pr", 8);
	if (p->family == AF_INET)
		wire_write_u16(pkt + 2, inet_checksum(pkt, sizeof(pkt)));
	if (p->family == AF_INET6)
		to->sin6.sin6_port = 0;
	else
		to->sin.sin_port = 0;
	if (sendto(ic->fd, pkt, sizeof(pkt), 0, &to->sa, tolen) != (ssize_t)sizeof(pkt))
		return -errno;
	p->id = seq;
	ic->by_seq[seq] = p;
	return 0;
}

/* ---- the sender ----------------------------------------------------------------------- */

int probe_sender_new(struct ev_loop *loop, const probe_sender_opts_t *opts, probe_sample_cb cb,
                     void *ctx, probe_sender_t **out)
{
	probe_sender_t *s = xcalloc(1, sizeof(*s));
	s->loop = loop;
	s->o = *opts;
	s->cb = cb;
	s->ctx = ctx;
	s->icmp4.fd = -1;
	s->icmp6.fd = -1;
	*out = s;
	return 0;
}

int probe_sender_send(probe_sender_t *s, conf_probe_method_t method, int family,
                      const uint8_t *addr, uint64_t token)
{
	steer_sockaddr_t to;
	socklen_t tolen = target_addr(family, addr, s->o.port, &to);
	probe_sample_t *p = sample_new(s, method, family, token);
	int ret = STEER_EINVAL;
	switch (method) {
	case CONF_PROBE_DNS:
		ret = send_dns(s, p, &to, tolen);
		break;
	case CONF_PROBE_TCP:
		ret = send_tcp(s, p, &to, tolen);
		break;
	case CONF_PROBE_ICMP:
		ret = send_icmp(s, p, &to, tolen);
		break;
	}
	if (ret != 0) {
		s->stats[method].errors++;
		sample_release(p);
		return ret;
	}
	sample_started(p);
	return 0;
}

probe_method_stats_t probe_sender_stats(const probe_sender_t *s, conf_probe_method_t method)
{
	return s->stats[method];
}

size_t probe_sender_pending(const probe_sender_t *s)
{
	return s->pending;
}

bool probe_sender_icmp_raw(const probe_sender_t *s, int family)
{
	const icmp_sock_t *ic = family == AF_INET ? &s->icmp4 : &s->icmp6;
	return ic->fd >= 0 && ic->raw;
}

static void icmp_close(probe_sender_t *s, icmp_sock_t *ic)
{
	if (ic->fd >= 0) {
		ev_io_stop(s->loop, &ic->io);
		close(ic->fd);
	}
	free(ic->by_seq);
}

void probe_sender_free(probe_sender_t *s)
{
	if (s == NULL)
		return;
	while (s->all != NULL)
		sample_release(s->all);
	icmp_close(s, &s->icmp4);
	icmp_close(s, &s->icmp6);
	free(s);
}
