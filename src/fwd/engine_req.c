/*
 * Client requests on the engine thread: the upstream attempts (UDP, TCP after TC=1), the
 * in-request retry, the reply checks, the cache store, stale answers and SERVFAIL.
 *
 * Every byte believed from an upstream has passed fwd_wire_reply_check(); the reply handed
 * on is rebuilt by fwd_wire_client_reply() or comes from the cache, and every length read
 * from the network is bounded by the buffer it lands in.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <urcu.h>

#include "base/err.h"
#include "base/log.h"
#include "dns/msg.h"
#include "dns/nsid.h"
#include "dns/wire.h"
#include "fwd/engine_int.h"

static void req_next(fwd_req_t *r);

/* The most the client can receive (its UDP size; the largest message over TCP). */
static uint16_t client_room(const fwd_req_t *r)
{
	if (r->client.tcp)
		return DNS_MSG_MAXLEN;
	if (!r->q.has_edns)
		return DNS_UDP_MINLEN;
	return r->q.edns_payload < r->e->udp_payload ? r->q.edns_payload : r->e->udp_payload;
}

/* What an answer may take before its COOKIE option, which always fits after it (the
 * authoritative path reserves the same room): a bigger answer goes TC=1. */
static uint16_t client_limit(const fwd_req_t *r)
{
	return (uint16_t)(client_room(r) - r->client.cookie_len);
}

static void report(fwd_engine_t *e, uint32_t id, fwd_result_t res, uint32_t rtt_us)
{
	pthread_mutex_lock(&e->lock);
	(void)fwd_upstream_query_result(e->ups, id, res, rtt_us, fwd_eng_now_ms());
	pthread_mutex_unlock(&e->lock);
	fwd_eng_events(e);
	/* A bad outcome may have made the upstream suspect, which brings its probe forward. */
	if (res != FWD_RESULT_ANSWER)
		fwd_eng_probe_rearm(e);
}

/* The identity in the answer of a client that asked for it (every answer is built in out). */
static size_t with_nsid(fwd_req_t *r, size_t len)
{
	fwd_engine_t *e = r->e;
	char id[sizeof(e->identity)];
	pthread_mutex_lock(&e->lock);
	uint8_t id_len = e->identity_len;
	memcpy(id, e->identity, id_len);
	pthread_mutex_unlock(&e->lock);
	if (id_len == 0)
		return len;
	return dns_nsid_append(e->out, len, client_room(r), (const uint8_t *)id, id_len);
}

/* The dnstap record of one upstream leg of a sampled request: from our socket @p a to its
 * upstream, over TCP when @p tcp. */
static void tap_leg(const fwd_req_t *r, const fwd_att_t *a, tap_type_t type, const uint8_t *msg,
                    size_t len, bool tcp)
{
	tap_thread_t *tap = r->e->tap;
	if (!r->tapped || !tap_wants(tap, type))
		return;
	steer_sockaddr_t local;
	socklen_t local_len = sizeof(local);
	memset(&local, 0, sizeof(local));
	if (getsockname(a->fd, &local.sa, &local_len) != 0)
		local.sa.sa_family = 0;
	tap_msg_t m = {.type = type,
	               .tcp = tcp,
	               .query_address = &local,
	               .response_address = &r->e->eup[a->upstream].address};
	if (type == TAP_FORWARDER_QUERY) {
		m.query = msg;
		m.query_len = len;
		m.query_time = tap_now();
	} else {
		m.response = msg;
		m.response_len = len;
		m.response_time = tap_now();
	}
	(void)tap_log(tap, &m);
}

/* The dnstap record of the answer to a sampled client, as it leaves. */
static void tap_client_response(const fwd_req_t *r, const uint8_t *msg, size_t len)
{
	tap_thread_t *tap = r->e->tap;
	if (!r->tapped || !tap_wants(tap, TAP_CLIENT_RESPONSE))
		return;
	tap_msg_t m = {.type = TAP_CLIENT_RESPONSE,
	               .tcp = r->client.tcp,
	               .query_address = &r->client.remote,
	               .response_address = &r->client.local,
	               .query = r->pkt,
	               .query_len = r->len,
	               .response = msg,
	               .response_len = len,
	               .response_time = tap_now()};
	(void)tap_log(tap, &m);
}

static void deliver(fwd_req_t *r, const uint8_t *msg, size_t len)
{
	if (!r->answered && r->client.reply) {
		if (r->client.cookie_len != 0 && msg == r->e->out)
			len = dns_edns_option_append(r->e->out, len, client_room(r),
			                             r->client.cookie, r->client.cookie_len);
		if (r->q.has_nsid && msg == r->e->out)
			len = with_nsid(r, len);
		r->client.reply(&r->client, msg, len);
		tap_client_response(r, msg, len);
	}
	r->answered = true;
}

static void att_close(fwd_req_t *r, fwd_att_t *a)
{
	if (a->state == FWD_ATT_IDLE)
		return;
	ev_io_stop(r->e->loop, &a->io);
	close(a->fd);
	a->fd = -1;
	a->state = FWD_ATT_IDLE;
	free(a->tcp_buf);
	a->tcp_buf = NULL;
}

void fwd_eng_req_free(fwd_req_t *r)
{
	fwd_engine_t *e = r->e;
	ev_timer_stop(e->loop, &r->retry);
	ev_timer_stop(e->loop, &r->stale);
	for (unsigned i = 0; i < r->n_att; i++)
		att_close(r, &r->att[i]);
	if (r->prev)
		r->prev->next = r->next;
	else
		e->reqs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	if (r->flags & FWD_SUBMIT_PREFETCH) {
		if (r->pf_prev)
			r->pf_prev->pf_next = r->pf_next;
		else if (e->prefetching == r)
			e->prefetching = r->pf_next;
		if (r->pf_next)
			r->pf_next->pf_prev = r->pf_prev;
	}
	free(r->last);
	free(r);
	atomic_fetch_sub_explicit(&e->pending, 1, memory_order_relaxed);
}

static bool outstanding(const fwd_req_t *r)
{
	for (unsigned i = 0; i < r->n_att; i++)
		if (r->att[i].state != FWD_ATT_IDLE)
			return true;
	return false;
}

/* A SERVFAIL of our own, with the client's ID, question and OPT. */
static void send_servfail(fwd_req_t *r)
{
	fwd_engine_t *e = r->e;
	if (r->answered || !r->client.reply)
		return;
	dns_msg_t m;
	dns_msg_init(&m, e->out, client_limit(r));
	if (dns_msg_begin(&m, &r->q, DNS_RCODE_SERVFAIL) != 0)
		return;
	dns_msg_set_flags(&m, DNS_FLAG_RA, 0);
	if (r->q.has_edns && dns_msg_put_opt(&m, e->udp_payload, 0, r->q.edns_do, NULL, 0) != 0)
		return;
	size_t len = dns_msg_finish(&m);
	e->st.servfail++;
	deliver(r, e->out, len);
}

/* Answer from a stale (or meanwhile refreshed) cache entry; false when there is none. */
static bool answer_stale(fwd_req_t *r)
{
	fwd_engine_t *e = r->e;
	if (r->answered || !r->client.reply)
		return false;
	size_t n = 0;
	rcu_read_lock();
	fwd_cache_result_t res = fwd_cache_answer(e->cache, &r->q, fwd_eng_now_ms(), true,
	                                          r->client.tcp ? 0 : client_limit(r), e->out,
	                                          client_limit(r), &n, NULL);
	rcu_read_unlock();
	if (res == FWD_CACHE_MISS || res == FWD_CACHE_STALE_AVAILABLE || n == 0)
		return false;
	if (res == FWD_CACHE_STALE)
		e->st.answered_stale++;
	else
		e->st.answered++;
	deliver(r, e->out, n);
	return true;
}

/* Nothing more to try: stale, else the last unusable reply, else SERVFAIL; then end. */
static void req_fail(fwd_req_t *r)
{
	fwd_engine_t *e = r->e;
	if (!r->answered && r->client.reply && !answer_stale(r)) {
		int n = -1;
		if (r->last && !r->last_lame)
			n = fwd_wire_client_reply(&r->q, r->last, r->last_len, &r->last_info,
			                          e->out, sizeof(e->out), client_limit(r));
		if (n > 0) {
			e->st.answered++;
			deliver(r, e->out, (size_t)n);
		} else {
			send_servfail(r);
		}
	}
	fwd_eng_req_free(r);
}

static void arm_retry(fwd_req_t *r, uint32_t ms)
{
	ev_timer_stop(r->e->loop, &r->retry);
	ev_timer_set(&r->retry, ms / 1000.0, 0.);
	ev_timer_start(r->e->loop, &r->retry);
}

static void on_udp(struct ev_loop *loop, ev_io *w, int revents);

static int att_send(fwd_req_t *r, uint32_t id)
{
	fwd_engine_t *e = r->e;
	fwd_att_t *a = &r->att[r->n_att];
	memset(a, 0, sizeof(*a));
	a->req = r;
	a->upstream = id;
	a->fd = -1;
	uint8_t q[FWD_WIRE_QUERY_MAXLEN];
	fwd_wire_query_opts_t o = {.use_0x20 = e->use_0x20};
	int qlen = fwd_wire_query_build(&r->q, &o, &e->rng, q, sizeof(q), &a->pend);
	if (qlen < 0)
		return qlen;
	fwd_eng_fresh_id(e, q, &a->pend);
	int fd = fwd_eng_udp_open(e, id);
	if (fd < 0) {
		e->st.socket_errors++;
		return fd;
	}
	if (send(fd, q, (size_t)qlen, 0) != qlen) {
		int ret = -errno;
		close(fd);
		e->st.socket_errors++;
		return ret ? ret : STEER_EAGAIN;
	}
	a->fd = fd;
	tap_leg(r, a, TAP_FORWARDER_QUERY, q, (size_t)qlen, false);
	a->state = FWD_ATT_UDP;
	a->sent_us = fwd_eng_now_us();
	ev_io_init(&a->io, on_udp, fd, EV_READ);
	a->io.data = a;
	ev_io_start(e->loop, &a->io);
	e->st.upstream_queries++;
	if (r->n_att > 0)
		e->st.retries++;
	r->n_att++;
	return 0;
}

static uint32_t budget_left(const fwd_req_t *r)
{
	uint64_t end = r->t.start_ms + r->e->groups[r->t.group].budget_ms;
	uint64_t now = fwd_eng_now_ms();
	return end > now ? (uint32_t)(end - now) : 0;
}

/* Ask the next upstream, or wait, or give up: the retry sequence of upstream.c. */
static void req_next(fwd_req_t *r)
{
	fwd_engine_t *e = r->e;
	for (;;) {
		if (r->n_att >= FWD_REQ_ATTEMPTS) {
			uint32_t left = budget_left(r);
			if (left == 0 || !outstanding(r)) {
				req_fail(r);
				return;
			}
			arm_retry(r, left);
			return;
		}
		uint32_t id = FWD_UPSTREAM_NONE, tmo = 0;
		pthread_mutex_lock(&e->lock);
		int ret = fwd_upstream_pick(e->ups, &r->t, fwd_eng_now_ms(), &id, &tmo);
		pthread_mutex_unlock(&e->lock);
		if (ret == STEER_ENOENT && (r->flags & FWD_SUBMIT_STALE_OK))
			answer_stale(r); /* no usable upstream: the client gets stale at once */
		if (ret == 0 || (ret == STEER_ENOENT && id != FWD_UPSTREAM_NONE)) {
			int sret = att_send(r, id);
			if (sret == 0) {
				arm_retry(r, tmo ? tmo : 1);
				return;
			}
			/* No route, a firewall's EPERM, a vanished source address: the way to this
			 * upstream is broken, which is what a timeout tells upstream.c. Running out
			 * of descriptors or memory says nothing about the upstream. */
			if (!fwd_eng_local_error(sret))
				report(e, id, FWD_RESULT_TIMEOUT, 0);
			continue;
		}
		if ((ret == STEER_EAGAIN || ret == STEER_ENOENT) && outstanding(r)) {
			uint32_t left = ret == STEER_EAGAIN && tmo ? tmo : budget_left(r);
			if (left) {
				arm_retry(r, left);
				return;
			}
		}
		req_fail(r);
		return;
	}
}

static void on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	fwd_req_t *r = w->data;
	for (unsigned i = 0; i < r->n_att; i++) {
		fwd_att_t *a = &r->att[i];
		if (a->state == FWD_ATT_IDLE || a->timed_out)
			continue;
		a->timed_out = true;
		if (!a->reported) {
			a->reported = true;
			report(r->e, a->upstream, FWD_RESULT_TIMEOUT, 0);
		}
	}
	req_next(r);
}

static void on_stale(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	fwd_req_t *r = w->data;
	/* The upstream query keeps running: its answer refreshes the cache. */
	answer_stale(r);
}

/* Attempt @p a is finished without a usable answer: go on with the sequence unless the
 * request had already moved past it and still waits for a later one. */
static void att_unusable(fwd_req_t *r, fwd_att_t *a)
{
	bool current = !a->timed_out;
	att_close(r, a);
	if (current || !outstanding(r)) {
		ev_timer_stop(r->e->loop, &r->retry);
		req_next(r);
	}
}

static void att_failed(fwd_req_t *r, fwd_att_t *a)
{
	if (!a->reported) {
		a->reported = true;
		report(r->e, a->upstream, FWD_RESULT_TIMEOUT, 0);
	}
	att_unusable(r, a);
}

static void keep_last(fwd_req_t *r, const uint8_t *msg, size_t len, const fwd_wire_reply_t *info,
                      bool lame)
{
	uint8_t *copy = malloc(len);
	if (!copy)
		return;
	memcpy(copy, msg, len);
	free(r->last);
	r->last = copy;
	r->last_len = len;
	r->last_info = *info;
	r->last_lame = lame;
}

static void on_tcp(struct ev_loop *loop, ev_io *w, int revents);

static int tcp_start(fwd_req_t *r, fwd_att_t *a)
{
	fwd_engine_t *e = r->e;
	const fwd_eup_t *u = &e->eup[a->upstream];
	ev_io_stop(e->loop, &a->io);
	close(a->fd);
	a->fd = -1;
	a->state = FWD_ATT_IDLE;
	a->tcp_buf = malloc(FWD_TCP_BUF);
	if (!a->tcp_buf)
		return STEER_ENOMEM;
	fwd_wire_query_opts_t o = {.use_0x20 = e->use_0x20};
	int qlen =
	    fwd_wire_query_build(&r->q, &o, &e->rng, a->tcp_buf + 2, FWD_TCP_BUF - 2, &a->pend);
	if (qlen < 0)
		return qlen;
	fwd_eng_fresh_id(e, a->tcp_buf + 2, &a->pend);
	wire_write_u16(a->tcp_buf, (uint16_t)qlen);
	a->tcp_len = 2 + (size_t)qlen;
	a->tcp_off = 0;
	int family = u->address.sa.sa_family;
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Same link as the UDP query; the kernel picks the port (TCP is not blind-spoofable). */
	if (u->source.sa.sa_family == family) {
		steer_sockaddr_t src = u->source;
		if (family == AF_INET)
			src.sin.sin_port = 0;
		else
			src.sin6.sin6_port = 0;
		if (bind(fd, &src.sa, steer_sockaddr_len(&src)) != 0) {
			int ret = -errno;
			close(fd);
			return ret;
		}
	}
	if (connect(fd, &u->address.sa, steer_sockaddr_len(&u->address)) != 0 &&
	    errno != EINPROGRESS) {
		int ret = -errno;
		close(fd);
		return ret;
	}
	a->fd = fd;
	tap_leg(r, a, TAP_FORWARDER_QUERY, a->tcp_buf + 2, (size_t)qlen, true);
	a->state = FWD_ATT_TCP_WRITE;
	a->sent_us = fwd_eng_now_us();
	ev_io_init(&a->io, on_tcp, fd, EV_WRITE);
	a->io.data = a;
	ev_io_start(e->loop, &a->io);
	e->st.tcp_queries++;
	return 0;
}

/* FORMERR to a query with EDNS: ask the same upstream once more without it. */
static int resend_plain(fwd_req_t *r, fwd_att_t *a)
{
	fwd_engine_t *e = r->e;
	uint8_t q[FWD_WIRE_QUERY_MAXLEN];
	fwd_wire_query_opts_t o = {.use_0x20 = e->use_0x20};
	int qlen = fwd_wire_query_build(&r->q, &o, &e->rng, q, sizeof(q), &a->pend);
	if (qlen < 0)
		return qlen;
	fwd_eng_fresh_id(e, q, &a->pend);
	/* The builder puts exactly one record, the OPT, after the question. */
	size_t plain = DNS_HEADER_LEN + (size_t)a->pend.qname_len + 4;
	if ((size_t)qlen > plain && wire_read_u16(q + 10) == 1) {
		wire_write_u16(q + 10, 0);
		qlen = (int)plain;
		a->pend.payload = 0;
	}
	if (send(a->fd, q, (size_t)qlen, 0) != qlen)
		return errno ? -errno : STEER_EAGAIN;
	a->formerr_retried = true;
	tap_leg(r, a, TAP_FORWARDER_QUERY, q, (size_t)qlen, false);
	a->sent_us = fwd_eng_now_us();
	return 0;
}

/* An accepted reply @p msg on attempt @p a. May end (free) the request. */
static void att_reply(fwd_req_t *r, fwd_att_t *a, const uint8_t *msg, size_t len,
                      const fwd_wire_reply_t *info, bool tcp)
{
	fwd_engine_t *e = r->e;
	uint64_t rtt = fwd_eng_now_us() - a->sent_us;
	uint32_t rtt_us = rtt > UINT32_MAX ? UINT32_MAX : (uint32_t)rtt;
	tap_leg(r, a, TAP_FORWARDER_RESPONSE, msg, len, tcp);
	if (info->tc && !tcp) {
		if (tcp_start(r, a) == 0)
			return;
		e->st.socket_errors++;
		att_failed(r, a);
		return;
	}
	fwd_wire_rcode_class_t rc = info->tc ? FWD_WIRE_RC_OTHER : info->rclass;
	if (rc == FWD_WIRE_RC_FORMERR && a->pend.payload && !a->formerr_retried && !tcp &&
	    resend_plain(r, a) == 0)
		return;
	bool first = !a->reported;
	a->reported = true;
	switch (rc) {
	case FWD_WIRE_RC_ANSWER:
	case FWD_WIRE_RC_NXDOMAIN: {
		if (first)
			report(e, a->upstream, FWD_RESULT_ANSWER, rtt_us);
		/* Never cache an answer that carries names the question did not lead to. */
		if (info->unrelated == 0 &&
		    fwd_cache_store(e->cache, &r->q, msg, len, fwd_eng_now_ms()) == 0)
			e->st.cache_stores++;
		if (r->answered) {
			e->st.late_replies++;
		} else if (r->client.reply) {
			int n = fwd_wire_client_reply(&r->q, msg, len, info, e->out, sizeof(e->out),
			                              client_limit(r));
			if (n > 0) {
				e->st.answered++;
				deliver(r, e->out, (size_t)n);
			} else {
				send_servfail(r);
			}
		}
		fwd_eng_req_free(r);
		return;
	}
	case FWD_WIRE_RC_SERVFAIL:
		if (first)
			report(e, a->upstream, FWD_RESULT_SERVFAIL, rtt_us);
		att_unusable(r, a);
		return;
	case FWD_WIRE_RC_REFUSED:
	case FWD_WIRE_RC_FORMERR:
	case FWD_WIRE_RC_OTHER:
	case FWD_WIRE_RC_LAME:
		/* It answered (so it is alive) but not usably: the next upstream may do better. */
		if (first)
			report(e, a->upstream, FWD_RESULT_ANSWER, rtt_us);
		keep_last(r, msg, len, info, rc == FWD_WIRE_RC_LAME);
		att_unusable(r, a);
		return;
	}
}

static void on_udp(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	fwd_att_t *a = w->data;
	fwd_req_t *r = a->req;
	fwd_engine_t *e = r->e;
	for (int i = 0; i < FWD_RECV_BURST; i++) {
		ssize_t n = recv(a->fd, e->rx, sizeof(e->rx), 0);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			/* ECONNREFUSED (ICMP port unreachable) and the like: nobody will answer. */
			att_failed(r, a);
			return;
		}
		fwd_wire_reply_t info;
		if (fwd_wire_reply_check(&a->pend, e->rx, (size_t)n, false, &info, &e->st.wire) !=
		    FWD_WIRE_ACCEPT)
			continue; /* forged, malformed, stale: keep waiting for the real one */
		att_reply(r, a, e->rx, (size_t)n, &info, false);
		return;
	}
}

static void on_tcp(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)revents;
	fwd_att_t *a = w->data;
	fwd_req_t *r = a->req;
	fwd_engine_t *e = r->e;
	if (a->state == FWD_ATT_TCP_WRITE) {
		ssize_t n =
		    send(a->fd, a->tcp_buf + a->tcp_off, a->tcp_len - a->tcp_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			att_failed(r, a);
			return;
		}
		a->tcp_off += (size_t)n;
		if (a->tcp_off < a->tcp_len)
			return;
		a->state = FWD_ATT_TCP_READ;
		a->tcp_off = 0;
		a->tcp_len = 2; /* the length prefix first */
		ev_io_stop(loop, &a->io);
		ev_io_set(&a->io, a->fd, EV_READ);
		ev_io_start(loop, &a->io);
		return;
	}
	ssize_t n = recv(a->fd, a->tcp_buf + a->tcp_off, a->tcp_len - a->tcp_off, 0);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		att_failed(r, a);
		return;
	}
	a->tcp_off += (size_t)n;
	if (a->tcp_off < a->tcp_len)
		return;
	if (a->tcp_len == 2) {
		uint16_t mlen = wire_read_u16(a->tcp_buf);
		if (mlen < DNS_HEADER_LEN) {
			att_failed(r, a);
			return;
		}
		a->tcp_len = 2 + (size_t)mlen; /* at most FWD_TCP_BUF */
		return;
	}
	fwd_wire_reply_t info;
	const uint8_t *msg = a->tcp_buf + 2;
	size_t mlen = a->tcp_len - 2;
	if (fwd_wire_reply_check(&a->pend, msg, mlen, true, &info, &e->st.wire) !=
	    FWD_WIRE_ACCEPT) {
		/* One query per connection: anything else on it is not our answer. */
		att_failed(r, a);
		return;
	}
	att_reply(r, a, msg, mlen, &info, true);
}

/* The same question with the same key bits (what the cache keys on). */
static bool same_key(const dns_query_t *a, const dns_query_t *b)
{
	return a->qtype == b->qtype && a->qclass == b->qclass && a->edns_do == b->edns_do &&
	       ((a->flags ^ b->flags) & DNS_FLAG_CD) == 0 && a->qname_len == b->qname_len &&
	       memcmp(a->qname, b->qname, a->qname_len) == 0;
}

void fwd_eng_req_start(fwd_engine_t *e, fwd_req_t *r)
{
	r->pf_prev = r->pf_next = NULL;
	r->n_att = 0;
	r->answered = false;
	r->last = NULL;
	r->last_len = 0;
	r->last_lame = false;
	ev_init(&r->retry, on_retry);
	r->retry.data = r;
	ev_init(&r->stale, on_stale);
	r->stale.data = r;
	if (r->flags & FWD_SUBMIT_PREFETCH)
		r->client.reply = NULL;
	/* A client's request follows its query's sampling; prefetches are sampled here. */
	r->tapped = e->tap != NULL &&
	            (r->client.tapped || ((r->flags & FWD_SUBMIT_PREFETCH) && tap_sample(e->tap)));
	/* The caller parsed it already; this parse only rebuilds the view into our copy. */
	if (dns_query_parse(r->pkt, r->len, &r->q) != DNS_QUERY_OK || !r->q.has_question) {
		fwd_eng_req_free(r);
		return;
	}
	if (r->flags & FWD_SUBMIT_PREFETCH) {
		/* One refresh per entry at a time: a second one would only ask again. */
		for (const fwd_req_t *o = e->prefetching; o; o = o->pf_next) {
			if (same_key(&o->q, &r->q)) {
				r->flags &= ~(unsigned)FWD_SUBMIT_PREFETCH; /* not on the list */
				fwd_eng_req_free(r);
				return;
			}
		}
		r->pf_next = e->prefetching;
		if (e->prefetching)
			e->prefetching->pf_prev = r;
		e->prefetching = r;
	}
	int g = fwd_group_find(e->ups, r->q.qname);
	if (g < 0) {
		send_servfail(r);
		fwd_eng_req_free(r);
		return;
	}
	fwd_try_init(&r->t, (uint32_t)g, fwd_eng_now_ms());
	if ((r->flags & FWD_SUBMIT_STALE_OK) && r->client.reply) {
		ev_timer_set(&r->stale, e->stale_after_ms / 1000.0, 0.);
		ev_timer_start(e->loop, &r->stale);
	}
	req_next(r);
}
