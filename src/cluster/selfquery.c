/*
 * The self-check's answer check (see selfquery.h). Runs on the cluster thread only.
 *
 * Each query has its own socket, bound to the unicast address of its family (the kernel
 * picks a random port) and connected to its destination: the kernel then delivers only
 * datagrams from that address and port, and an ICMP port unreachable fails the query at once
 * ("connection refused") instead of after the timeout. A random id and the exact question
 * must match too, so a stray or spoofed datagram is ignored rather than judged.
 */
#include "cluster/selfquery.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/sockaddr.h"
#include "dns/dname.h"
#include "dns/msg.h"
#include "dns/names.h"
#include "dns/pkt.h"
#include "dns/wire.h"

/* The DNS port, for service addresses configured without one. */
#define SELFQUERY_PORT 53
/* Datagrams read per wakeup, so junk cannot keep the loop busy. */
#define SELFQUERY_RECV_BATCH 8

typedef struct {
	cluster_selfquery_t *sq;
	steer_sockaddr_t dst;
	char service[STEER_SOCKADDR_STRLEN]; /* the service address this query stands for */
	char note[112];                      /* why it went elsewhere, "" = to the address itself */
	int fd;
	bool done, ok;
	char detail[112];
	cluster_question_t q;
	ev_io io;
} target_t;

struct cluster_selfquery {
	struct ev_loop *loop;
	const conf_cluster_t *cc;
	cluster_selfquery_cb cb;
	void *arg;
	target_t *targets; /* cc->n_service slots */
	size_t n_targets, pending;
	bool busy;
	unsigned timeout_ms;
	struct timespec start;
	char what[DNAME_STR_MAXLEN + 8]; /* "example.test. SOA" or "id.server" */
	ev_timer timer;                  /* the timeout, or 0 s to report from the loop */
};

/* snprintf() for details that may be cut short: a detail is for people, and a cut one still
 * says what failed. */
static void detail_set(char *buf, size_t size, const char *fmt, ...) STEER_PRINTF(3, 4);

static void detail_set(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

static double ms_since(struct timespec start)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - start.tv_sec) * 1e3 +
	       (double)(now.tv_nsec - start.tv_nsec) / 1e6;
}

static uint16_t random_id(void)
{
	uint16_t id;
	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) == (ssize_t)sizeof(id))
		return id;
	/* Only before the kernel's pool is ready at early boot; a self-query on our own node
	 * needs no more than this. */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint16_t)(ts.tv_nsec ^ (ts.tv_nsec >> 16) ^ getpid());
}

/* ---- the wire side ---- */

size_t cluster_question_build(const cluster_question_t *q, uint8_t *buf, size_t size)
{
	uint8_t question[DNS_DNAME_MAXLEN + 4];
	wire_ctx_t qctx = wire_ctx_init(question, sizeof(question));
	wire_ctx_write(&qctx, q->qname, dname_len(q->qname));
	wire_ctx_write_u16(&qctx, q->qtype);
	wire_ctx_write_u16(&qctx, q->qclass);
	dns_query_t dq = {.id = q->id,
	                  .has_question = true,
	                  .question = question,
	                  .question_len = wire_ctx_offset(&qctx)};
	dns_msg_t msg;
	dns_msg_init(&msg, buf, size);
	if (qctx.err || dns_msg_begin(&msg, &dq, DNS_RCODE_NOERROR) != 0 ||
	    dns_msg_put_opt(&msg, DNS_EDNS_DEFAULT_PAYLOAD, 0, false, NULL, 0) != 0)
		return 0;
	dns_msg_set_flags(&msg, 0, DNS_FLAG_QR);
	return dns_msg_finish(&msg);
}

/* One record's owner and fixed part at @p *pos; false on malformed data. */
static bool read_rr(const uint8_t *pkt, size_t len, size_t *pos, uint8_t owner[DNS_DNAME_MAXLEN],
                    uint16_t *type, uint16_t *rclass, size_t *rdoff, uint16_t *rdlen)
{
	if (dname_unpack(pkt, len, pos, owner) < 0)
		return false;
	wire_ctx_t ctx = wire_ctx_init_const(pkt + *pos, len - *pos);
	*type = wire_ctx_read_u16(&ctx);
	*rclass = wire_ctx_read_u16(&ctx);
	wire_ctx_skip(&ctx, 4); /* ttl */
	*rdlen = wire_ctx_read_u16(&ctx);
	*rdoff = *pos + wire_ctx_offset(&ctx);
	wire_ctx_skip(&ctx, *rdlen);
	if (ctx.err)
		return false;
	*pos += wire_ctx_offset(&ctx);
	return true;
}

/* The TXT rdata's character-strings concatenated, NUL-terminated, cut to @p size - 1. */
static void txt_text(const uint8_t *rdata, size_t rdlen, char *out, size_t size)
{
	size_t got = 0;
	for (size_t pos = 0; pos < rdlen;) {
		size_t n = rdata[pos++];
		if (pos + n > rdlen)
			n = rdlen - pos;
		for (size_t i = 0; i < n && got + 1 < size; i++)
			out[got++] = (char)rdata[pos + i];
		pos += n;
	}
	out[got] = '\0';
}

/* Position after the question when @p pkt answers @p q (id, QR, opcode, same question). */
static bool is_reply(const cluster_question_t *q, const uint8_t *pkt, size_t len, size_t *pos)
{
	if (len < DNS_HEADER_LEN || wire_read_u16(pkt) != q->id)
		return false;
	uint16_t flags = wire_read_u16(pkt + 2);
	if (!(flags & DNS_FLAG_QR) || (flags & DNS_OPCODE_MASK) != 0 || wire_read_u16(pkt + 4) != 1)
		return false;
	uint8_t qname[DNS_DNAME_MAXLEN];
	*pos = DNS_HEADER_LEN;
	if (dname_unpack(pkt, len, pos, qname) < 0 || *pos + 4 > len)
		return false;
	if (!dname_equal(qname, q->qname) || wire_read_u16(pkt + *pos) != q->qtype ||
	    wire_read_u16(pkt + *pos + 2) != q->qclass)
		return false;
	*pos += 4;
	return true;
}

int cluster_question_judge(const cluster_question_t *q, const uint8_t *pkt, size_t len, char *why,
                           size_t whylen)
{
	size_t pos;
	if (!is_reply(q, pkt, len, &pos))
		return -1;
	uint16_t flags = wire_read_u16(pkt + 2);
	unsigned rcode = flags & DNS_RCODE_MASK;
	if (rcode != DNS_RCODE_NOERROR) {
		const char *name = dns_rcode_name(rcode);
		if (name)
			snprintf(why, whylen, "rcode %s", name);
		else
			snprintf(why, whylen, "rcode %u", rcode);
		return 0;
	}
	if (q->qtype == DNS_TYPE_SOA && !(flags & DNS_FLAG_AA)) {
		snprintf(why, whylen, "no AA flag: not authoritative");
		return 0;
	}
	unsigned ancount = wire_read_u16(pkt + 6);
	char seen[64] = "";
	for (unsigned i = 0; i < ancount; i++) {
		uint8_t owner[DNS_DNAME_MAXLEN];
		uint16_t type, rclass, rdlen;
		size_t rdoff;
		if (!read_rr(pkt, len, &pos, owner, &type, &rclass, &rdoff, &rdlen)) {
			snprintf(why, whylen, "malformed answer section");
			return 0;
		}
		if (type != q->qtype || rclass != q->qclass || !dname_equal(owner, q->qname))
			continue;
		if (q->qtype != DNS_TYPE_TXT || !q->txt)
			return 1;
		txt_text(pkt + rdoff, rdlen, seen, sizeof(seen));
		if (strcmp(seen, q->txt) == 0)
			return 1;
	}
	if (seen[0] || (q->qtype == DNS_TYPE_TXT && q->txt && ancount))
		snprintf(why, whylen, "answers \"%s\", not this node's \"%s\"", seen, q->txt);
	else
		snprintf(why, whylen, "no %s record in the answer",
		         q->qtype == DNS_TYPE_SOA ? "SOA" : "TXT");
	return 0;
}

/* ---- the round ---- */

static void round_finish(cluster_selfquery_t *sq)
{
	ev_timer_stop(sq->loop, &sq->timer);
	size_t asked = 0;
	const target_t *failed = NULL;
	char notes[160] = "";
	size_t nlen = 0;
	for (size_t i = 0; i < sq->n_targets; i++) {
		target_t *t = &sq->targets[i];
		if (t->fd >= 0) {
			ev_io_stop(sq->loop, &t->io);
			close(t->fd);
			t->fd = -1;
		}
		if (t->note[0] && nlen < sizeof(notes)) {
			detail_set(notes + nlen, sizeof(notes) - nlen, "; %s", t->note);
			nlen += strlen(notes + nlen);
		}
		if (!t->done)
			continue;
		asked += t->ok;
		if (!t->ok && !failed)
			failed = t;
	}
	char detail[200];
	bool ok = false;
	if (failed) {
		detail_set(detail, sizeof(detail), "%s: %s%s%s", failed->service, failed->detail,
		           failed->note[0] ? "; " : "", failed->note);
	} else if (asked == 0) {
		detail_set(detail, sizeof(detail), "nothing to ask%s", notes);
	} else {
		ok = true;
		detail_set(detail, sizeof(detail), "%s from %zu address%s in %.1f ms%s", sq->what,
		           asked, asked == 1 ? "" : "es", ms_since(sq->start), notes);
	}
	sq->busy = false;
	sq->cb(sq->arg, ok, detail);
}

static void target_done(target_t *t, bool ok, const char *fmt, ...) STEER_PRINTF(3, 4);

static void target_done(target_t *t, bool ok, const char *fmt, ...)
{
	cluster_selfquery_t *sq = t->sq;
	if (t->done)
		return;
	t->done = true;
	t->ok = ok;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->detail, sizeof(t->detail), fmt, ap);
	va_end(ap);
	if (t->fd >= 0)
		ev_io_stop(sq->loop, &t->io);
	if (sq->pending > 0 && --sq->pending == 0 && sq->busy)
		round_finish(sq);
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	target_t *t = w->data;
	uint8_t buf[DNS_MSG_MAXLEN];
	for (int i = 0; i < SELFQUERY_RECV_BATCH && !t->done; i++) {
		ssize_t n = recv(t->fd, buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			if (errno == ECONNREFUSED)
				target_done(t, false, "connection refused");
			else
				target_done(t, false, "recv: %s", strerror(errno));
			return;
		}
		char why[96];
		int verdict = cluster_question_judge(&t->q, buf, (size_t)n, why, sizeof(why));
		if (verdict > 0)
			target_done(t, true, "ok");
		else if (verdict == 0)
			target_done(t, false, "%s: %s", t->sq->what, why);
	}
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	cluster_selfquery_t *sq = w->data;
	for (size_t i = 0; i < sq->n_targets; i++) {
		target_t *t = &sq->targets[i];
		if (!t->done && t->fd >= 0)
			target_done(t, false, "timeout after %u ms", sq->timeout_ms);
	}
	if (sq->busy)
		round_finish(sq);
}

static const steer_sockaddr_t *unicast_of(const conf_cluster_t *cc, int family)
{
	const steer_sockaddr_t *u = family == AF_INET ? &cc->unicast4 : &cc->unicast6;
	return u->sa.sa_family == family ? u : NULL;
}

/* Whether @p addr is configured on this node: only then can a socket bind to it. */
static bool addr_is_local(const steer_sockaddr_t *addr)
{
	int fd = socket(addr->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true; /* cannot tell: ask it and let the query say what is wrong */
	steer_sockaddr_t a = *addr;
	if (a.sa.sa_family == AF_INET)
		a.sin.sin_port = 0;
	else
		a.sin6.sin6_port = 0;
	bool local = bind(fd, &a.sa, steer_sockaddr_len(&a)) == 0 || errno != EADDRNOTAVAIL;
	close(fd);
	return local;
}

/* The address alone when it uses the DNS port, as operators write it in the config. */
static const char *addr_str(const steer_sockaddr_t *a, char *buf, size_t size)
{
	if (steer_sockaddr_port(a) != SELFQUERY_PORT)
		return steer_sockaddr_str(a, buf, size);
	const void *raw = a->sa.sa_family == AF_INET ? (const void *)&a->sin.sin_addr
	                                             : (const void *)&a->sin6.sin6_addr;
	if (!inet_ntop(a->sa.sa_family, raw, buf, (socklen_t)size))
		snprintf(buf, size, "?");
	return buf;
}

static steer_sockaddr_t with_port(const steer_sockaddr_t *addr)
{
	steer_sockaddr_t a = *addr;
	if (steer_sockaddr_port(&a) == 0) {
		if (a.sa.sa_family == AF_INET)
			a.sin.sin_port = htons(SELFQUERY_PORT);
		else
			a.sin6.sin6_port = htons(SELFQUERY_PORT);
	}
	return a;
}

/* A socket from the unicast address of the family to @p dst; -errno on failure. */
static int open_to(const conf_cluster_t *cc, const steer_sockaddr_t *dst, const char **step)
{
	int fd = socket(dst->sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	*step = "socket";
	if (fd < 0)
		return -errno;
	const steer_sockaddr_t *src = unicast_of(cc, dst->sa.sa_family);
	if (src) {
		steer_sockaddr_t s = *src;
		if (s.sa.sa_family == AF_INET)
			s.sin.sin_port = 0;
		else
			s.sin6.sin6_port = 0;
		*step = "bind";
		if (bind(fd, &s.sa, steer_sockaddr_len(&s)) != 0)
			goto fail;
	}
	*step = "connect";
	if (connect(fd, &dst->sa, steer_sockaddr_len(dst)) != 0)
		goto fail;
	return fd;
fail:;
	int ret = -errno;
	close(fd);
	return ret;
}

static bool unreachable(int err)
{
	return err == -ENETUNREACH || err == -EHOSTUNREACH || err == -EADDRNOTAVAIL ||
	       err == -EINVAL;
}

static bool dst_taken(const cluster_selfquery_t *sq, size_t n, const steer_sockaddr_t *dst)
{
	for (size_t i = 0; i < n; i++) {
		const target_t *t = &sq->targets[i];
		if ((t->fd >= 0 || t->done) && memcmp(&t->dst, dst, steer_sockaddr_len(dst)) == 0)
			return true;
	}
	return false;
}

/* Open the query for service address @p i; the slot is left unused (fd -1, not done) when
 * there is nothing to ask or its destination is asked already. */
static void target_open(cluster_selfquery_t *sq, size_t i, bool holder_down)
{
	const conf_cluster_t *cc = sq->cc;
	target_t *t = &sq->targets[i];
	steer_sockaddr_t service = with_port(&cc->service[i]);
	const steer_sockaddr_t *uni = unicast_of(cc, service.sa.sa_family);
	char ubuf[STEER_SOCKADDR_STRLEN];
	*t = (target_t){.sq = sq, .fd = -1, .dst = service};
	addr_str(&service, t->service, sizeof(t->service));
	if (uni) {
		steer_sockaddr_t u = with_port(uni);
		addr_str(&u, ubuf, sizeof(ubuf));
	}
	if (!addr_is_local(&service)) {
		if (!uni) {
			detail_set(t->note, sizeof(t->note),
			           "%s not on this node, no unicast address", t->service);
			return;
		}
		t->dst = with_port(uni);
		detail_set(t->note, sizeof(t->note), "%s not on this node: asked %s", t->service,
		           ubuf);
	}
	if (dst_taken(sq, i, &t->dst))
		return;
	const char *step;
	int fd;
	if (holder_down && service.sa.sa_family == AF_INET6 && uni && !t->note[0]) {
		/* The kernel drops an IPv6 address's local route while its device is down (the
		 * address itself stays, keep_addr_on_down): a query to it would leave by the
		 * default route. IPv4 keeps its local route, so only IPv6 goes elsewhere. */
		detail_set(t->note, sizeof(t->note),
		           "%s has no local route while withdrawn: asked %s", t->service, ubuf);
		t->dst = with_port(uni);
		if (dst_taken(sq, i, &t->dst))
			return;
	} else if (holder_down && service.sa.sa_family == AF_INET6 && !t->note[0]) {
		detail_set(t->note, sizeof(t->note),
		           "%s not asked: no local route while withdrawn, no unicast address",
		           t->service);
		return;
	}
	fd = open_to(cc, &t->dst, &step);
	if (fd < 0 && holder_down && uni && !t->note[0] && unreachable(fd)) {
		detail_set(t->note, sizeof(t->note),
		           "%s unreachable while withdrawn (%s): asked %s", t->service,
		           strerror(-fd), ubuf);
		t->dst = with_port(uni);
		if (dst_taken(sq, i, &t->dst))
			return;
		fd = open_to(cc, &t->dst, &step);
	}
	t->q.id = random_id();
	if (fd < 0) {
		t->done = true;
		detail_set(t->detail, sizeof(t->detail), "%s: %s", step, strerror(-fd));
		return;
	}
	t->fd = fd;
}

static void target_send(cluster_selfquery_t *sq, target_t *t)
{
	uint8_t buf[DNS_HEADER_LEN + DNS_DNAME_MAXLEN + 4 + DNS_OPT_RR_LEN];
	size_t len = cluster_question_build(&t->q, buf, sizeof(buf));
	if (len == 0) {
		t->done = true;
		snprintf(t->detail, sizeof(t->detail), "cannot build the query");
	} else if (send(t->fd, buf, len, 0) != (ssize_t)len) {
		t->done = true;
		if (errno == ECONNREFUSED)
			snprintf(t->detail, sizeof(t->detail), "connection refused");
		else
			snprintf(t->detail, sizeof(t->detail), "send: %s", strerror(errno));
	} else {
		ev_io_init(&t->io, on_readable, t->fd, EV_READ);
		t->io.data = t;
		ev_io_start(sq->loop, &t->io);
		sq->pending++;
	}
}

unsigned cluster_selfquery_start(cluster_selfquery_t *sq, const uint8_t *apex,
                                 const char *apex_text, bool holder_down, unsigned timeout_ms)
{
	STEER_ASSERT(!sq->busy);
	cluster_question_t q = {.qtype = DNS_TYPE_SOA, .qclass = DNS_CLASS_IN};
	if (apex) {
		memcpy(q.qname, apex, dname_len(apex));
		snprintf(sq->what, sizeof(sq->what), "%s SOA", apex_text ? apex_text : "zone");
	} else {
		int len = dname_from_str("id.server", q.qname);
		STEER_ASSERT(len > 0);
		q.qtype = DNS_TYPE_TXT;
		q.qclass = DNS_CLASS_CH;
		q.txt = sq->cc->node_id;
		snprintf(sq->what, sizeof(sq->what), "id.server");
	}
	clock_gettime(CLOCK_MONOTONIC, &sq->start);
	sq->busy = true;
	sq->pending = 0;
	sq->timeout_ms = timeout_ms;
	sq->n_targets = sq->cc->n_service;
	unsigned sent = 0;
	for (size_t i = 0; i < sq->n_targets; i++) {
		target_open(sq, i, holder_down);
		target_t *t = &sq->targets[i];
		uint16_t id = t->q.id;
		t->q = q;
		t->q.id = id;
		if (t->fd >= 0) {
			target_send(sq, t);
			sent += t->fd >= 0 && !t->done;
		}
	}
	/* Even a round that sent nothing reports from the loop, never from within this call. */
	ev_timer_set(&sq->timer, sq->pending ? timeout_ms / 1000.0 : 0., 0.);
	ev_timer_start(sq->loop, &sq->timer);
	return sent;
}

bool cluster_selfquery_busy(const cluster_selfquery_t *sq)
{
	return sq->busy;
}

cluster_selfquery_t *cluster_selfquery_new(struct ev_loop *loop, const conf_cluster_t *cc,
                                           cluster_selfquery_cb cb, void *arg)
{
	cluster_selfquery_t *sq = xcalloc(1, sizeof(*sq));
	sq->loop = loop;
	sq->cc = cc;
	sq->cb = cb;
	sq->arg = arg;
	sq->targets = xcalloc(cc->n_service ? cc->n_service : 1, sizeof(*sq->targets));
	for (size_t i = 0; i < cc->n_service; i++)
		sq->targets[i].fd = -1;
	ev_timer_init(&sq->timer, on_timer, 0., 0.);
	sq->timer.data = sq;
	return sq;
}

void cluster_selfquery_free(cluster_selfquery_t *sq)
{
	if (!sq)
		return;
	ev_timer_stop(sq->loop, &sq->timer);
	for (size_t i = 0; i < sq->n_targets; i++) {
		target_t *t = &sq->targets[i];
		if (t->fd >= 0) {
			ev_io_stop(sq->loop, &t->io);
			close(t->fd);
		}
	}
	free(sq->targets);
	free(sq);
}
