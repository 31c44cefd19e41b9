/*
 * UDP workers. Each worker thread owns one SO_REUSEPORT socket and every buffer it uses, all
 * allocated before the thread starts: the query path takes no lock and allocates nothing. A
 * batch is received with one blocking recvmmsg(MSG_WAITFORONE), answered inside one RCU
 * read-side section, and the replies leave with one sendmmsg. On a wildcard bind the reply
 * source address is the query's destination, taken from IP_PKTINFO / IPV6_PKTINFO.
 */
#include "net/udp.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <urcu.h>

#include "auth/auth.h"
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"

/* Queries longer than this are dropped (counted): real queries are a few hundred bytes, and a
 * larger buffer would only spread the batch over more memory. */
#define UDP_RX_SIZE 4096
/* The largest udp-max-payload the configuration accepts; auth_answer() applies the real
 * limit (the client's EDNS size and ours). */
#define UDP_TX_SIZE 4096
/* Socket buffers: a burst at several hundred thousand queries per second must not overflow
 * the receive queue while the worker answers a batch. The kernel caps it at rmem_max unless
 * we are privileged (SO_RCVBUFFORCE). */
#define UDP_RCVBUF (8 * 1024 * 1024)
#define UDP_SNDBUF (4 * 1024 * 1024)

typedef struct {
	_Alignas(struct cmsghdr) char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
} udp_cmsg_t;

/* State of the recvmmsg/sendmmsg strategy: everything one batch needs. */
typedef struct {
	int fd;
	bool v6;
	bool pktinfo;   /* wildcard bind: control messages carry the query's destination */
	int last_n;     /* entries of @c rx the kernel filled last time, to reset */
	uint64_t rx_ns; /* net_clock_ns() when the batch arrived: its replies' latency start */
	struct mmsghdr rx[UDP_BATCH];
	struct mmsghdr tx[UDP_BATCH];
	struct iovec rx_iov[UDP_BATCH];
	struct iovec tx_iov[UDP_BATCH];
	steer_sockaddr_t remote[UDP_BATCH];
	udp_cmsg_t cmsg[UDP_BATCH];
	udp_pkt_t pkts[UDP_BATCH];
	uint8_t slot[UDP_BATCH]; /* pkts[k] came from rx[slot[k]] */
	uint8_t rx_buf[UDP_BATCH][UDP_RX_SIZE];
	uint8_t tx_buf[UDP_BATCH][UDP_TX_SIZE];
} mmsg_io_t;

struct udp_worker {
	net_counters_t counters;      /* written by the worker only */
	fwd_serve_counters_t fwd_ctr; /* the forwarder's side on this worker */
	auth_qctx_t *qctx;            /* owned; the worker's answering state (counters, GSLB) */
	tap_thread_t *tap;            /* the worker's dnstap queue; NULL = no log */
	net_t *net;
	const udp_api_t *api;
	pthread_t thread;
	bool started;
	size_t addr_idx;
	unsigned idx;
	atomic_uint_least64_t alive_ms; /* net_clock_ms() of the last loop turn */
	mmsg_io_t io;
};

static void mmsg_reset(mmsg_io_t *io, int i)
{
	struct msghdr *h = &io->rx[i].msg_hdr;
	h->msg_namelen = sizeof(io->remote[i]);
	h->msg_controllen = io->pktinfo ? sizeof(io->cmsg[i]) : 0;
	h->msg_flags = 0;
}

static void mmsg_init(mmsg_io_t *io, int fd, bool v6, bool pktinfo)
{
	io->fd = fd;
	io->v6 = v6;
	io->pktinfo = pktinfo;
	for (int i = 0; i < UDP_BATCH; i++) {
		io->rx_iov[i] = (struct iovec){io->rx_buf[i], UDP_RX_SIZE};
		struct msghdr *h = &io->rx[i].msg_hdr;
		memset(h, 0, sizeof(*h));
		h->msg_name = &io->remote[i];
		h->msg_iov = &io->rx_iov[i];
		h->msg_iovlen = 1;
		h->msg_control = pktinfo ? io->cmsg[i].buf : NULL;
		mmsg_reset(io, i);
	}
	io->last_n = 0;
}

static int mmsg_recv(void *ctx, udp_pkt_t **pkts, net_counters_t *counters)
{
	static log_ratelimit_t rl;
	mmsg_io_t *io = ctx;
	for (int i = 0; i < io->last_n; i++)
		mmsg_reset(io, i);
	io->last_n = 0;
	/* Blocks for the first datagram only (bounded by SO_RCVTIMEO), then takes what is
	 * already queued. */
	int n = recvmmsg(io->fd, io->rx, UDP_BATCH, MSG_WAITFORONE, NULL);
	if (n <= 0) {
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			log_ratelimited(&rl, LOG_LEVEL_WARNING, "UDP receive failed: %s",
			                steer_strerror(-errno));
		return 0;
	}
	io->last_n = n;
	io->rx_ns = net_clock_ns();
	STEER_COUNTER_ADD(counters->udp_queries, (uint64_t)n);
	if (io->v6) {
		STEER_COUNTER_ADD(counters->ipv6_queries, (uint64_t)n);
		STEER_COUNTER_ADD(counters->udp_ipv6_queries, (uint64_t)n);
	} else {
		STEER_COUNTER_ADD(counters->udp_ipv4_queries, (uint64_t)n);
	}
	int k = 0;
	for (int i = 0; i < n; i++) {
		if (io->rx[i].msg_hdr.msg_flags & MSG_TRUNC) {
			STEER_COUNTER_INC(counters->dropped);
			continue;
		}
		io->pkts[k] = (udp_pkt_t){.rx = io->rx_buf[i],
		                          .rx_len = io->rx[i].msg_len,
		                          .remote = &io->remote[i],
		                          .tx = io->tx_buf[i],
		                          .tx_cap = UDP_TX_SIZE,
		                          .hdr = io->pktinfo ? &io->rx[i].msg_hdr : NULL};
		io->slot[k++] = (uint8_t)i;
	}
	*pkts = io->pkts;
	return k;
}

/*
 * Turn the received packet-info into the one that sets the reply's source: the query's
 * destination address, and no forced interface (the routing table picks it, which is what a
 * service address on a dummy interface needs) except for link-local IPv6, which needs its scope.
 */
static socklen_t mmsg_reply_cmsg(mmsg_io_t *io, int i)
{
	struct msghdr *h = &io->rx[i].msg_hdr;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL; c = CMSG_NXTHDR(h, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo *info = (struct in_pktinfo *)CMSG_DATA(c);
			info->ipi_spec_dst = info->ipi_addr;
			info->ipi_ifindex = 0;
			return (socklen_t)h->msg_controllen;
		}
		if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo *info = (struct in6_pktinfo *)CMSG_DATA(c);
			if (!IN6_IS_ADDR_LINKLOCAL(&info->ipi6_addr))
				info->ipi6_ifindex = 0;
			return (socklen_t)h->msg_controllen;
		}
	}
	return 0;
}

static void mmsg_send(void *ctx, udp_pkt_t *pkts, int n, net_counters_t *counters)
{
	static log_ratelimit_t rl;
	mmsg_io_t *io = ctx;
	unsigned m = 0;
	for (int k = 0; k < n; k++) {
		if (pkts[k].tx_len == 0)
			continue;
		int i = io->slot[k];
		io->tx_iov[i] = (struct iovec){pkts[k].tx, pkts[k].tx_len};
		struct msghdr *h = &io->tx[m++].msg_hdr;
		*h = (struct msghdr){.msg_name = &io->remote[i],
		                     .msg_namelen = io->rx[i].msg_hdr.msg_namelen,
		                     .msg_iov = &io->tx_iov[i],
		                     .msg_iovlen = 1};
		if (io->pktinfo) {
			h->msg_controllen = mmsg_reply_cmsg(io, i);
			h->msg_control = h->msg_controllen ? io->cmsg[i].buf : NULL;
		}
	}
	unsigned sent = 0;
	while (sent < m) {
		int r = sendmmsg(io->fd, io->tx + sent, m - sent, 0);
		if (r > 0) {
			sent += (unsigned)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		/* The first unsent reply failed (e.g. unreachable client): skip only that one. */
		log_ratelimited(&rl, LOG_LEVEL_WARNING, "UDP send failed: %s",
		                steer_strerror(r < 0 ? -errno : STEER_EAGAIN));
		STEER_COUNTER_INC(counters->dropped);
		sent++;
	}
	/* One clock read per batch: every reply of it left with the same sendmmsg calls. */
	if (m > 0)
		net_latency_observe_n(&counters->udp_latency, net_clock_ns() - io->rx_ns, m);
}

static const udp_api_t udp_api_mmsg = {
    .name = "recvmmsg",
    .recv = mmsg_recv,
    .send = mmsg_send,
};

/* The query's destination from its packet info: the forwarded reply's source. */
static void client_local(const struct msghdr *h, fwd_client_t *out)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL;
	     c = CMSG_NXTHDR((struct msghdr *)h, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			const struct in_pktinfo *info = (const struct in_pktinfo *)CMSG_DATA(c);
			out->local.sin =
			    (struct sockaddr_in){.sin_family = AF_INET, .sin_addr = info->ipi_addr};
			out->ifindex = (uint32_t)info->ipi_ifindex;
			return;
		}
		if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			const struct in6_pktinfo *info = (const struct in6_pktinfo *)CMSG_DATA(c);
			out->local.sin6 = (struct sockaddr_in6){.sin6_family = AF_INET6,
			                                        .sin6_addr = info->ipi6_addr};
			out->ifindex = info->ipi6_ifindex;
			return;
		}
	}
}

/*
 * The engine's answer to a forwarded query, on the engine thread: one non-blocking send on
 * the socket the query came in on (sending on a socket another thread receives on is safe),
 * from the address the client asked. A full send buffer loses the reply, as it would lose a
 * direct one; the client retries.
 */
static void udp_fwd_reply(const fwd_client_t *c, const uint8_t *reply, size_t len)
{
	static log_ratelimit_t rl;
	struct iovec iov = {(void *)reply, len};
	udp_cmsg_t cmsg;
	struct msghdr h = {.msg_name = (void *)&c->remote,
	                   .msg_namelen = steer_sockaddr_len(&c->remote),
	                   .msg_iov = &iov,
	                   .msg_iovlen = 1};
	memset(&cmsg, 0, sizeof(cmsg));
	if (c->local.sa.sa_family == AF_INET) {
		h.msg_control = cmsg.buf;
		h.msg_controllen = CMSG_SPACE(sizeof(struct in_pktinfo));
		struct cmsghdr *ch = CMSG_FIRSTHDR(&h);
		ch->cmsg_level = IPPROTO_IP;
		ch->cmsg_type = IP_PKTINFO;
		ch->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
		struct in_pktinfo *info = (struct in_pktinfo *)CMSG_DATA(ch);
		info->ipi_spec_dst = c->local.sin.sin_addr;
	} else if (c->local.sa.sa_family == AF_INET6) {
		h.msg_control = cmsg.buf;
		h.msg_controllen = CMSG_SPACE(sizeof(struct in6_pktinfo));
		struct cmsghdr *ch = CMSG_FIRSTHDR(&h);
		ch->cmsg_level = IPPROTO_IPV6;
		ch->cmsg_type = IPV6_PKTINFO;
		ch->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
		struct in6_pktinfo *info = (struct in6_pktinfo *)CMSG_DATA(ch);
		info->ipi6_addr = c->local.sin6.sin6_addr;
		if (IN6_IS_ADDR_LINKLOCAL(&info->ipi6_addr))
			info->ipi6_ifindex = c->ifindex;
	}
	ssize_t n;
	do {
		n = sendmsg(c->fd, &h, MSG_DONTWAIT | MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		log_ratelimited(&rl, LOG_LEVEL_WARNING, "UDP send of a forwarded answer failed: %s",
		                steer_strerror(-errno));
		return;
	}
	/* On the engine thread, the only writer of the net's forwarded-UDP histogram. */
	const udp_worker_t *w = c->transport;
	net_latency_observe(&w->net->fwd_udp_latency, net_clock_ns() - c->rx_ns);
}

typedef struct {
	const udp_worker_t *w;
	const udp_pkt_t *pkt;
} udp_fill_arg_t;

static void udp_client_fill(void *arg, fwd_client_t *out)
{
	const udp_fill_arg_t *a = arg;
	memset(out, 0, sizeof(*out));
	out->reply = udp_fwd_reply;
	out->transport = (void *)a->w;
	out->fd = a->w->io.fd;
	out->remote = *a->pkt->remote;
	out->rx_ns = a->w->io.rx_ns;
	if (a->pkt->hdr != NULL)
		client_local(a->pkt->hdr, out);
}

/* The address @p pkt arrived at, for the dnstap log: the listen address, or on a wildcard
 * bind its packet info's destination (into @p buf). */
static const steer_sockaddr_t *packet_local(const udp_worker_t *w, const udp_pkt_t *pkt,
                                            steer_sockaddr_t *buf)
{
	const steer_sockaddr_t *listen = &w->net->listen[w->addr_idx];
	if (pkt->hdr == NULL)
		return listen;
	fwd_client_t c;
	memset(&c, 0, sizeof(c));
	client_local(pkt->hdr, &c);
	*buf = c.local;
	if (buf->sa.sa_family == AF_INET)
		buf->sin.sin_port = listen->sin.sin_port;
	else if (buf->sa.sa_family == AF_INET6)
		buf->sin6.sin6_port = listen->sin6.sin6_port;
	return buf->sa.sa_family != 0 ? buf : listen;
}

static void answer_batch(udp_worker_t *w, udp_pkt_t *pkts, int n)
{
	auth_client_t client = {.tcp = false};
	net_tap_t tap = {w->tap, NULL};
	steer_sockaddr_t local;
	rcu_read_lock();
	const net_view_t *view = rcu_dereference(w->net->view);
	for (int k = 0; k < n; k++) {
		client.remote = pkts[k].remote;
		udp_fill_arg_t fill = {w, &pkts[k]};
		bool deferred;
		if (STEER_UNLIKELY(w->tap != NULL))
			tap.local = packet_local(w, &pkts[k], &local);
		w->qctx->rrl.cls = AUTH_RRL_NONE;
		pkts[k].tx_len = net_answer(view, &client, pkts[k].rx, pkts[k].rx_len, pkts[k].tx,
		                            pkts[k].tx_cap, w->qctx, NULL, &w->fwd_ctr,
		                            udp_client_fill, &fill, &tap, &deferred);
		/* After answering, before sending: only the answer knows its response class. */
		if (STEER_UNLIKELY(view->auth.rrl.table != NULL) && pkts[k].tx_len > 0)
			pkts[k].tx_len = auth_rrl_apply(&view->auth.rrl, &w->qctx->rrl, pkts[k].tx,
			                                pkts[k].tx_len, &w->qctx->stats);
	}
	rcu_read_unlock();
}

static void *udp_worker_main(void *arg)
{
	udp_worker_t *w = arg;
	rcu_register_thread();
	while (!atomic_load_explicit(&w->net->stopping, memory_order_relaxed)) {
		udp_pkt_t *pkts;
		net_heartbeat(&w->alive_ms);
		int n = w->api->recv(&w->io, &pkts, &w->counters);
		if (n <= 0)
			continue;
		answer_batch(w, pkts, n);
		w->api->send(&w->io, pkts, n, &w->counters);
	}
	rcu_unregister_thread();
	return NULL;
}

/* Buffer sizes are best effort (the kernel caps them), so failures there are not errors. */
static void set_buffers(int fd)
{
	int rcv = UDP_RCVBUF, snd = UDP_SNDBUF;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &snd, sizeof(snd)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
}

static int set_options(int fd, const steer_sockaddr_t *addr, bool pktinfo)
{
	int one = 1;
	bool v6 = addr->sa.sa_family == AF_INET6;
	struct timeval tv = {.tv_sec = 0, .tv_usec = UDP_RCVTIMEO_MS * 1000};
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
		return -errno;
	set_buffers(fd);
	/* Let large replies fragment instead of failing with EMSGSIZE, and ignore ICMP "packet
	 * too big", which an attacker could forge to shrink our replies. */
	int omit = v6 ? IPV6_PMTUDISC_OMIT : IP_PMTUDISC_OMIT;
	(void)setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP,
	                 v6 ? IPV6_MTU_DISCOVER : IP_MTU_DISCOVER, &omit, sizeof(omit));
	if (!pktinfo)
		return 0;
	if (setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_RECVPKTINFO : IP_PKTINFO, &one,
	               sizeof(one)) != 0)
		return -errno;
	return 0;
}

int udp_worker_new(net_t *net, size_t addr_idx, unsigned worker_idx, udp_worker_t **out, char *err,
                   size_t errlen)
{
	const steer_sockaddr_t *addr = &net->listen[addr_idx];
	int fd = net_socket_bind(addr, SOCK_DGRAM, true, err, errlen);
	if (fd < 0)
		return fd;
	bool pktinfo = net_addr_is_wildcard(addr);
	int ret = set_options(fd, addr, pktinfo);
	if (ret != 0) {
		char text[STEER_SOCKADDR_STRLEN];
		snprintf(err, errlen, "cannot set up UDP socket %s: %s",
		         steer_sockaddr_str(addr, text, sizeof(text)), steer_strerror(ret));
		close(fd);
		return ret;
	}
	udp_worker_t *w = xcalloc(1, sizeof(*w));
	w->net = net;
	w->api = &udp_api_mmsg;
	w->addr_idx = addr_idx;
	w->idx = worker_idx;
	w->qctx = auth_qctx_new((uint64_t)worker_idx << 16 | addr_idx);
	mmsg_init(&w->io, fd, addr->sa.sa_family == AF_INET6, pktinfo);
	*out = w;
	return 0;
}

void udp_worker_set_tap(udp_worker_t *w, tap_thread_t *tap)
{
	w->tap = tap;
}

int udp_worker_start(udp_worker_t *w)
{
	net_heartbeat(&w->alive_ms);
	int ret = pthread_create(&w->thread, NULL, udp_worker_main, w);
	if (ret != 0)
		return -ret;
	w->started = true;
	char name[16];
	udp_worker_name(w, name, sizeof(name));
	pthread_setname_np(w->thread, name);
	return 0;
}

void udp_worker_join(udp_worker_t *w)
{
	if (!w->started)
		return;
	pthread_join(w->thread, NULL);
	w->started = false;
}

auth_qctx_t *udp_worker_qctx(const udp_worker_t *w)
{
	return w->qctx;
}

void udp_worker_stats(const udp_worker_t *w, net_stats_t *sum)
{
	steer_counters_add((steer_counter_t *)&sum->net, (const steer_counter_t *)&w->counters,
	                   STEER_COUNTERS_IN(net_counters_t));
	auth_qctx_sum(w->qctx, &sum->auth, &sum->gslb);
	steer_counters_add((steer_counter_t *)&sum->fwd, (const steer_counter_t *)&w->fwd_ctr,
	                   STEER_COUNTERS_IN(fwd_serve_counters_t));
}

uint64_t udp_worker_silence_ms(const udp_worker_t *w, uint64_t now_ms)
{
	if (!w->started)
		return 0;
	uint64_t alive = atomic_load_explicit(&w->alive_ms, memory_order_relaxed);
	return now_ms > alive ? now_ms - alive : 0;
}

void udp_worker_name(const udp_worker_t *w, char *buf, size_t size)
{
	snprintf(buf, size, "steer-udp%u.%zu", w->idx, w->addr_idx);
}

void udp_worker_free(udp_worker_t *w)
{
	if (w == NULL)
		return;
	udp_worker_join(w);
	close(w->io.fd);
	auth_qctx_free(w->qctx);
	free(w);
}
