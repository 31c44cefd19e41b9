/*
 * Tests of src/fwd/engine: the engine thread against scripted upstreams on 127.0.0.1 (UDP and
 * TCP sockets served by a thread of this test), with a client whose reply function records
 * what it gets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <urcu.h>

#include "base/err.h"
#include "dns/dname.h"
#include "dns/pkt.h"
#include "dns/wire.h"
#include "fwd/engine.h"
#include "unit.h"

/* ------------------------------------------------------------------ scripted upstreams */

typedef enum {
	M_ANSWER,   /* A 192.0.2.<n>, TTL 300 */
	M_SILENT,   /* nothing */
	M_SERVFAIL, /* SERVFAIL to everything, probes included */
	M_TC,       /* UDP: TC=1 and no records; TCP: A 192.0.2.99 */
	M_FORGE,    /* a reply with the wrong ID, one with another question, then the answer */
	M_BIG,      /* an answer too big for 512 bytes: the client limit applies */
	M_REFUSED,  /* REFUSED */
	M_LAME,     /* NOERROR, no records, RA=0: a referral, not an answer */
	M_FORMERR,  /* FORMERR to queries with EDNS, the answer to those without */
	M_GARBAGE,  /* random datagrams and mangled copies of the answer, then the answer */
	M_LOWER,    /* the answer, but its question in lower case (does not echo 0x20) */
} mode_t_;

#define MAX_REC 1024

typedef struct {
	int n; /* its number: the last octet of its answers */
	int udp, tcp;
	uint16_t port;
	_Atomic int mode;
	_Atomic bool stop;
	pthread_t thread;
	pthread_mutex_t lock;
	unsigned nrec; /* client queries (first label "q...") seen */
	uint16_t rec_port[MAX_REC], rec_id[MAX_REC];
	_Atomic unsigned queries; /* every datagram, probes included */
	uint64_t rnd;             /* M_GARBAGE's generator, this thread only */
} upstream_t;

static uint32_t rnd32(upstream_t *u)
{
	u->rnd ^= u->rnd << 13;
	u->rnd ^= u->rnd >> 7;
	u->rnd ^= u->rnd << 17;
	return (uint32_t)(u->rnd >> 16);
}

static size_t put_answer(uint8_t *out, const uint8_t *q, size_t qlen, const dns_query_t *pq,
                         uint16_t rcode, bool tc, const uint8_t addr[4], unsigned nrr)
{
	wire_write_u16(out, pq->id);
	uint16_t flags = DNS_FLAG_QR | DNS_FLAG_RA | (pq->flags & (DNS_FLAG_RD | DNS_FLAG_CD));
	flags |= tc ? DNS_FLAG_TC : 0;
	wire_write_u16(out + 2, (uint16_t)(flags | rcode));
	wire_write_u16(out + 4, 1);
	wire_write_u16(out + 6, 0);
	wire_write_u16(out + 8, 0);
	wire_write_u16(out + 10, 0);
	(void)q;
	(void)qlen;
	/* The question exactly as asked (0x20 case kept). */
	memcpy(out + 12, pq->question, pq->question_len);
	size_t len = 12 + pq->question_len;
	if (rcode != 0 || tc || !addr)
		return len;
	for (unsigned i = 0; i < nrr; i++) {
		uint8_t *p = out + len;
		wire_write_u16(p, 0xc00c);
		wire_write_u16(p + 2, pq->qtype == DNS_TYPE_NS ? DNS_TYPE_NS : DNS_TYPE_A);
		if (pq->qtype == DNS_TYPE_NS) {
			/* A liveness probe: NS of the root, any name will do. */
			wire_write_u16(p + 2, DNS_TYPE_NS);
			wire_write_u16(p + 4, DNS_CLASS_IN);
			wire_write_u32(p + 6, 300);
			wire_write_u16(p + 10, 2);
			p[12] = 0xc0, p[13] = 0x0c;
			len += 14;
			continue;
		}
		wire_write_u16(p + 2, DNS_TYPE_A);
		wire_write_u16(p + 4, DNS_CLASS_IN);
		wire_write_u32(p + 6, 300);
		wire_write_u16(p + 10, 4);
		memcpy(p + 12, addr, 4);
		p[15] = (uint8_t)(addr[3] + i);
		len += 16;
	}
	wire_write_u16(out + 6, (uint16_t)nrr);
	return len;
}

static void serve_udp(upstream_t *u)
{
	uint8_t q[4096], out[8192];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	ssize_t n = recvfrom(u->udp, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
	if (n <= 0)
		return;
	atomic_fetch_add(&u->queries, 1);
	dns_query_t pq;
	if (dns_query_parse(q, (size_t)n, &pq) != DNS_QUERY_OK || !pq.has_question)
		return;
	bool client_q = pq.qname[0] > 0 && pq.qname[1] == 'q';
	if (client_q) {
		pthread_mutex_lock(&u->lock);
		if (u->nrec < MAX_REC) {
			u->rec_port[u->nrec] = ntohs(from.sin_port);
			u->rec_id[u->nrec++] = pq.id;
		}
		pthread_mutex_unlock(&u->lock);
	}
	uint8_t addr[4] = {192, 0, 2, (uint8_t)u->n};
	size_t len = 0;
	int mode = atomic_load(&u->mode);
	/* Probes see the scripted failure only in the modes that are about the upstream itself;
	 * the others script one reply, and probe results must not reorder the upstreams. */
	if (!client_q && mode != M_SILENT && mode != M_SERVFAIL && mode != M_GARBAGE)
		mode = M_ANSWER;
	switch (mode) {
	case M_SILENT:
		return;
	case M_SERVFAIL:
		len = put_answer(out, q, (size_t)n, &pq, DNS_RCODE_SERVFAIL, false, NULL, 0);
		break;
	case M_TC:
		len = put_answer(out, q, (size_t)n, &pq, 0, true, NULL, 0);
		break;
	case M_FORGE: {
		static const uint8_t evil[4] = {6, 6, 6, 6};
		dns_query_t f = pq;
		f.id = (uint16_t)(pq.id ^ 0x5a5a);
		len = put_answer(out, q, (size_t)n, &f, 0, false, evil, 1);
		sendto(u->udp, out, len, 0, (struct sockaddr *)&from, fl);
		/* Right ID, another question: evil.test. */
		uint8_t fq[64];
		memcpy(fq,
		       "\x04"
		       "evil"
		       "\x04"
		       "test"
		       "\x00",
		       11);
		wire_write_u16(fq + 11, DNS_TYPE_A);
		wire_write_u16(fq + 13, DNS_CLASS_IN);
		f = pq;
		f.question = fq;
		f.question_len = 15;
		len = put_answer(out, q, (size_t)n, &f, 0, false, evil, 1);
		sendto(u->udp, out, len, 0, (struct sockaddr *)&from, fl);
		len = put_answer(out, q, (size_t)n, &pq, 0, false, addr, 1);
		break;
	}
	case M_BIG:
		len = put_answer(out, q, (size_t)n, &pq, 0, false, addr, 60);
		break;
	case M_REFUSED:
		len = put_answer(out, q, (size_t)n, &pq, DNS_RCODE_REFUSED, false, NULL, 0);
		break;
	case M_LAME:
		len = put_answer(out, q, (size_t)n, &pq, 0, false, NULL, 0);
		wire_write_u16(out + 2, wire_read_u16(out + 2) & (uint16_t)~DNS_FLAG_RA);
		break;
	case M_FORMERR:
		len = put_answer(out, q, (size_t)n, &pq, pq.has_edns ? DNS_RCODE_FORMERR : 0, false,
		                 addr, 1);
		break;
	case M_LOWER: {
		uint8_t lq[DNS_DNAME_MAXLEN + 4];
		memcpy(lq, pq.question, pq.question_len);
		for (size_t b = 0; b < pq.question_len - 4; b++)
			if (lq[b] >= 'A' && lq[b] <= 'Z')
				lq[b] = (uint8_t)(lq[b] + 32);
		dns_query_t l = pq;
		l.question = lq;
		len = put_answer(out, q, (size_t)n, &l, 0, false, addr, 1);
		break;
	}
	case M_GARBAGE: {
		uint8_t real[8192], junk[8192];
		size_t rlen = put_answer(real, q, (size_t)n, &pq, 0, false, addr, 3);
		for (int k = 0; k < 30; k++) {
			size_t jl;
			if (k % 3 == 0) {
				jl = rnd32(u) % 600;
				for (size_t b = 0; b < jl; b++)
					junk[b] = (uint8_t)rnd32(u);
				if (jl >= 2 && (k & 1)) /* our ID, so the checks go deeper */
					wire_write_u16(junk, pq.id);
			} else {
				memcpy(junk, real, rlen);
				jl = rlen;
				for (unsigned f = 1 + rnd32(u) % 4; f > 0; f--)
					junk[rnd32(u) % rlen] ^= (uint8_t)(1u << (rnd32(u) % 8));
				if (k % 3 == 2)
					jl = rnd32(u) % (rlen + 1);
			}
			sendto(u->udp, junk, jl, 0, (struct sockaddr *)&from, fl);
		}
		memcpy(out, real, rlen);
		len = rlen;
		break;
	}
	default:
		len = put_answer(out, q, (size_t)n, &pq, 0, false, addr, 1);
	}
	sendto(u->udp, out, len, 0, (struct sockaddr *)&from, fl);
}

static void serve_tcp(upstream_t *u)
{
	int c = accept(u->tcp, NULL, NULL);
	if (c < 0)
		return;
	struct timeval tv = {.tv_sec = 1};
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	uint8_t q[4096], out[8192];
	size_t got = 0;
	while (got < 2 || got < 2u + wire_read_u16(q)) {
		ssize_t n = recv(c, q + got, sizeof(q) - got, 0);
		if (n <= 0) {
			close(c);
			return;
		}
		got += (size_t)n;
	}
	dns_query_t pq;
	if (dns_query_parse(q + 2, wire_read_u16(q), &pq) == DNS_QUERY_OK) {
		uint8_t addr[4] = {192, 0, 2, 99};
		size_t len = put_answer(out + 2, q + 2, 0, &pq, 0, false, addr, 1);
		wire_write_u16(out, (uint16_t)len);
		send(c, out, len + 2, MSG_NOSIGNAL);
	}
	close(c);
}

static void *upstream_main(void *arg)
{
	upstream_t *u = arg;
	while (!atomic_load(&u->stop)) {
		struct pollfd p[2] = {{.fd = u->udp, .events = POLLIN},
		                      {.fd = u->tcp, .events = POLLIN}};
		if (poll(p, 2, 20) <= 0)
			continue;
		if (p[0].revents & POLLIN)
			serve_udp(u);
		if (p[1].revents & POLLIN)
			serve_tcp(u);
	}
	return NULL;
}

static void upstream_start(upstream_t *u, int n, int mode)
{
	memset(u, 0, sizeof(*u));
	u->n = n;
	u->rnd = 0x9e3779b97f4a7c15ull * (uint64_t)(n + 1);
	atomic_store(&u->mode, mode);
	pthread_mutex_init(&u->lock, NULL);
	/* UDP and TCP on the same port number (as a resolver listens): a port the kernel gave
	 * the UDP socket may be taken on the TCP side, then try another. */
	for (int tries = 0;; tries++) {
		struct sockaddr_in sa = {.sin_family = AF_INET,
		                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		u->udp = socket(AF_INET, SOCK_DGRAM, 0);
		bind(u->udp, (struct sockaddr *)&sa, sizeof(sa));
		socklen_t sl = sizeof(sa);
		getsockname(u->udp, (struct sockaddr *)&sa, &sl);
		u->port = ntohs(sa.sin_port);
		u->tcp = socket(AF_INET, SOCK_STREAM, 0);
		int one = 1;
		setsockopt(u->tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(u->tcp, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		    listen(u->tcp, 16) == 0)
			break;
		close(u->udp);
		close(u->tcp);
		if (tries == 20) {
			printf("upstream %d: no port for both UDP and TCP\n", n);
			break;
		}
	}
	pthread_create(&u->thread, NULL, upstream_main, u);
}

static void upstream_stop(upstream_t *u)
{
	atomic_store(&u->stop, true);
	pthread_join(u->thread, NULL);
	close(u->udp);
	close(u->tcp);
	pthread_mutex_destroy(&u->lock);
}

/* ---------------------------------------------------------------------------- client */

typedef struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned replies;
	uint8_t last[65536];
	size_t last_len;
} client_rec_t;

static client_rec_t rec = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void on_reply(const fwd_client_t *client, const uint8_t *reply, size_t len)
{
	(void)client;
	pthread_mutex_lock(&rec.lock);
	rec.replies++;
	memcpy(rec.last, reply, len < sizeof(rec.last) ? len : sizeof(rec.last));
	rec.last_len = len;
	pthread_cond_broadcast(&rec.cond);
	pthread_mutex_unlock(&rec.lock);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait until @p n replies were recorded in all; false after @p ms. */
static bool wait_replies(unsigned n, unsigned ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&rec.lock);
	while (rec.replies < n)
		if (pthread_cond_timedwait(&rec.cond, &rec.lock, &until) == ETIMEDOUT)
			break;
	bool ok = rec.replies >= n;
	pthread_mutex_unlock(&rec.lock);
	return ok;
}

static unsigned replies_now(void)
{
	pthread_mutex_lock(&rec.lock);
	unsigned n = rec.replies;
	pthread_mutex_unlock(&rec.lock);
	return n;
}

typedef struct {
	uint8_t wire[512];
	size_t len;
	dns_query_t q;
} query_t;

static void make_query(query_t *out, const char *name, uint16_t id, bool edns)
{
	uint8_t *p = out->wire;
	memset(p, 0, 12);
	wire_write_u16(p, id);
	wire_write_u16(p + 2, DNS_FLAG_RD);
	wire_write_u16(p + 4, 1);
	int n = dname_from_str(name, p + 12);
	size_t len = 12 + (size_t)n;
	wire_write_u16(p + len, DNS_TYPE_A);
	wire_write_u16(p + len + 2, DNS_CLASS_IN);
	len += 4;
	if (edns) {
		wire_write_u16(p + 10, 1);
		p[len] = 0;
		wire_write_u16(p + len + 1, DNS_TYPE_OPT);
		wire_write_u16(p + len + 3, 4096);
		wire_write_u32(p + len + 5, 0);
		wire_write_u16(p + len + 9, 0);
		len += 11;
	}
	out->len = len;
	if (dns_query_parse(out->wire, len, &out->q) != DNS_QUERY_OK)
		printf("bad test query %s\n", name);
}

static const fwd_client_t client = {.reply = on_reply, .fd = -1};

/* What a reply says: rcode, id, the first A address, its TTL, the answer count, TC. */
typedef struct {
	bool ok;
	uint16_t id, rcode, an;
	bool tc;
	uint8_t addr[4];
	uint32_t ttl;
	size_t qend;
} reply_t;

static reply_t parse_reply(const uint8_t *p, size_t len)
{
	reply_t r;
	memset(&r, 0, sizeof(r));
	if (len < 12)
		return r;
	r.id = wire_read_u16(p);
	r.rcode = wire_read_u16(p + 2) & DNS_RCODE_MASK;
	r.tc = (wire_read_u16(p + 2) & DNS_FLAG_TC) != 0;
	r.an = wire_read_u16(p + 6);
	size_t pos = 12;
	uint8_t name[DNS_DNAME_MAXLEN];
	if (wire_read_u16(p + 4)) {
		if (dname_unpack(p, len, &pos, name) < 0)
			return r;
		pos += 4;
	}
	r.qend = pos;
	if (r.an) {
		if (dname_unpack(p, len, &pos, name) < 0 || pos + 14 > len)
			return r;
		r.ttl = wire_read_u32(p + pos + 4);
		memcpy(r.addr, p + pos + 10, 4);
	}
	r.ok = true;
	return r;
}

static reply_t last_reply(void)
{
	pthread_mutex_lock(&rec.lock);
	reply_t r = parse_reply(rec.last, rec.last_len);
	pthread_mutex_unlock(&rec.lock);
	return r;
}

/* ---------------------------------------------------------------------------- engine */

typedef struct {
	uint32_t retry_ms;
	uint32_t budget_ms;
	uint32_t probe_interval_ms;
	uint32_t max_pending;
	uint32_t stale_after_ms;
	uint32_t probe_timeout_ms;
	const char *link0; /* device of the first upstream */
	bool source0;      /* the first upstream's queries leave from 127.0.0.1 */
	bool use_0x20;
} setup_t;

static fwd_engine_t *engine_new(upstream_t *ups, size_t n, const setup_t *s)
{
	fwd_upstream_def_t defs[4];
	static const char *const names[] = {"up1", "up2", "up3", "up4"};
	for (size_t i = 0; i < n; i++) {
		memset(&defs[i], 0, sizeof(defs[i]));
		defs[i].name = names[i];
		defs[i].address.sin.sin_family = AF_INET;
		defs[i].address.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		defs[i].address.sin.sin_port = htons(ups[i].port);
	}
	defs[0].link = s->link0;
	if (s->source0) {
		defs[0].source.sin.sin_family = AF_INET;
		defs[0].source.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
	fwd_group_def_t g = {
	    .domain = ".",
	    .policy = FWD_POLICY_ORDERED,
	    .upstreams = defs,
	    .n_upstreams = n,
	    .probe = {.interval_ms = s->probe_interval_ms ? s->probe_interval_ms : 60000,
	              .timeout_ms = s->probe_timeout_ms ? s->probe_timeout_ms : 150,
	              .fall = 2,
	              .rise = 2,
	              .hold_down_ms = 100,
	              .fast_interval_ms = 100},
	    .retry_timeout_ms = s->retry_ms ? s->retry_ms : 200,
	    .retry_fixed = true,
	    .budget_ms = s->budget_ms ? s->budget_ms : 1500,
	};
	static const uint8_t probe_name[] = "\x05probe\x04test";
	const uint8_t *pn[1] = {probe_name};
	fwd_engine_opts_t o = {
	    .groups = &g,
	    .n_groups = 1,
	    .probe_names = pn,
	    .max_pending = s->max_pending,
	    .stale_after_ms = s->stale_after_ms,
	    .seed = 42,
	    .use_0x20 = s->use_0x20,
	};
	fwd_cache_opts_default(&o.cache);
	o.cache.max_bytes = 4u * 1024 * 1024;
	fwd_engine_t *e = NULL;
	char err[256] = "";
	int ret = fwd_engine_new(&o, &e, err, sizeof(err));
	CHECK(ret == 0, "fwd_engine_new: %d %s", ret, err);
	if (ret)
		return NULL;
	CHECK(fwd_engine_start(e) == 0, "start");
	return e;
}

/* The cache's answer to @p q now; FWD_CACHE_MISS etc. */
static fwd_cache_result_t cache_lookup(fwd_engine_t *e, const query_t *q, reply_t *out)
{
	uint8_t resp[4096];
	size_t n = 0;
	rcu_read_lock();
	fwd_cache_result_t res = fwd_cache_answer(fwd_engine_cache(e), &q->q, mono_ms(), false, 0,
	                                          resp, sizeof(resp), &n, NULL);
	rcu_read_unlock();
	if (out)
		*out = parse_reply(resp, n);
	return res;
}

/* The engine publishes its counters before its loop next blocks, just after a reply. */
static void get_stats(fwd_engine_t *e, fwd_engine_stats_t *st)
{
	usleep(20000);
	fwd_engine_stats(e, st);
}

static bool submit(fwd_engine_t *e, const query_t *q, unsigned flags)
{
	int ret = fwd_engine_submit(e, q->wire, q->len, &client, flags);
	CHECK(ret == 0, "submit: %d", ret);
	return ret == 0;
}

/* ----------------------------------------------------------------------------- tests */

static void test_answer_then_cache(void)
{
	upstream_t up[1];
	upstream_start(&up[0], 1, M_ANSWER);
	setup_t s = {0};
	fwd_engine_t *e = engine_new(up, 1, &s);
	query_t q;
	make_query(&q, "WwW.ExAmple.TEST", 0x1234, true);
	unsigned base = replies_now();
	submit(e, &q, 0);
	CHECK(wait_replies(base + 1, 2000), "answer delivered");
	pthread_mutex_lock(&rec.lock);
	bool same_q = rec.last_len >= 12 + q.q.question_len &&
	              memcmp(rec.last + 12, q.q.question, q.q.question_len) == 0;
	pthread_mutex_unlock(&rec.lock);
	reply_t r = last_reply();
	CHECK(r.ok && r.id == 0x1234 && r.rcode == 0 && r.an == 1 && r.addr[3] == 1,
	      "reply: id %04x rcode %u an %u", r.id, r.rcode, r.an);
	CHECK(same_q, "the client's question case is kept");
	reply_t c;
	CHECK(cache_lookup(e, &q, &c) == FWD_CACHE_HIT && c.addr[3] == 1, "then a cache hit");
	fwd_engine_stats_t st;
	get_stats(e, &st);
	CHECK(st.answered == 1 && st.cache_stores == 1 && st.upstream_queries == 1,
	      "stats: answered %llu stores %llu queries %llu", (unsigned long long)st.answered,
	      (unsigned long long)st.cache_stores, (unsigned long long)st.upstream_queries);

	/* Flush drops it within a loop iteration. */
	CHECK(fwd_engine_flush(e, "www.example.test", false) == 0, "flush queued");
	CHECK(fwd_engine_flush(e, "bad..name", false) == STEER_EINVAL, "bad flush name");
	bool gone = false;
	for (int i = 0; i < 100 && !gone; i++) {
		gone = cache_lookup(e, &q, NULL) == FWD_CACHE_MISS;
		if (!gone)
			usleep(10000);
	}
	CHECK(gone, "flushed entry gone");
	fwd_engine_free(e);
	upstream_stop(&up[0]);
}

static void test_retry_to_second(void)
{
	upstream_t up[2];
	upstream_start(&up[0], 1, M_SILENT);
	upstream_start(&up[1], 2, M_ANSWER);
	setup_t s = {.retry_ms = 200};
	fwd_engine_t *e = engine_new(up, 2, &s);
	/* Let the start-up probe rounds pass so the retry sequence, not probes, is tested:
	 * up1 is still "usable" (it needs fall rounds), so it is asked first. */
	query_t q;
	make_query(&q, "q-retry.example.test", 7, false);
	unsigned base = replies_now();
	uint64_t t0 = mono_ms();
	submit(e, &q, 0);
	CHECK(wait_replies(base + 1, 2000), "answer after the retry");
	uint64_t took = mono_ms() - t0;
	reply_t r = last_reply();
	CHECK(r.ok && r.rcode == 0 && r.addr[3] == 2, "answer from the second upstream (.%u)",
	      r.addr[3]);
	CHECK(took >= 150 && took < 700, "within about the retry timeout: %llu ms",
	      (unsigned long long)took);
	fwd_engine_stats_t st;
	get_stats(e, &st);
	CHECK(st.retries >= 1, "counted as a retry");
	fwd_engine_free(e);
	upstream_stop(&up[0]);
	upstream_stop(&up[1]);
}

static void test_tc_to_tcp(void)
{
	upstream_t up[1];
	upstream_start(&up[0], 1, M_TC);
	setup_t s = {0};
	fwd_engine_t *e = engine_new(up, 1, &s);
	query_t q;
	make_query(&q, "q-tc.example.test", 8, true);
	unsigned base = replies_now();
	submit(e, &q, 0);
	CHECK(wait_replies(base + 1, 2000), "answer over TCP");
	reply_t r = last_reply();
	CHECK(r.ok && r.id == 8 && r.rcode == 0 && r.addr[3] == 99 && !r.tc,
	      "the TCP answer (rcode %u an %u .%u, tc %d)", r.rcode, r.an, r.addr[3], r.tc);
	fwd_engine_stats_t st;
	get_stats(e, &st);
	CHECK(st.tcp_queries == 1, "one TCP query (%llu)", (unsigned long long)st.tcp_queries);
	fwd_engine_free(e);
	upstream_stop(&up[0]);
}

static void test_forged_dropped(void)
{
	upstream_t up[1];
	upstream_start(&up[0], 1, M_FORGE);
	setup_t s = {0};
	fwd_engine_t *e = engine_new(up, 1, &s);
	query_t q, evil;
	make_query(&q, "q-forge.example.test", 9, false);
	make_query(&evil, "evil.test", 9, false);
	unsigned base = replies_now();
	submit(e, &q, 0);
	CHECK(wait_replies(base + 1, 2000), "answer despite forgeries");
	reply_t r = last_reply();
	CHECK(r.ok && r.rcode == 0 && r.addr[0] == 192 && r.addr[3] == 1, "the real answer (%u.%u)",
	      r.addr[0], r.addr[3]);
	fwd_engine_stats_t st;
	get_stats(e, &st);
	CHECK(st.wire.drop[FWD_WIRE_DROP_ID] >= 1 && st.wire.drop[FWD_WIRE_DROP_QUESTION] >= 1,
	      "forgeries counted: id %llu question %llu",
	      (unsigned long long)st.wire.drop[FWD_WIRE_DROP_ID],
	      (unsigned long long)st.wire.drop[FWD_WIRE_DROP_QUESTION]);
	reply_t c;
	CHECK(cache_lookup(e, &q, &c) == FWD_CACHE_HIT && c.addr[0] == 192,
	      "cache has the real one");
	CHECK(cache_lookup(e, &evil, NULL) == FWD_CACHE_MISS, "the forged name is not cached");
	fwd_engine_free(e);
	upstream_stop(&up[0]);
}

static void test_servfail_next(void)
{
	upstream_t up[2];
	upstream_start(&up[0], 1, M_SERVFAIL);
	upstream_start(&up[1], 2, M_ANSWER);
	setup_t s = {.retry_ms = 1000};
	fwd_engine_t *e = engine_new(up, 2, &s);
	query_t q;
	make_query(&q, "q-sf.example.test", 10, false);
	unsigned base = replies_now();
	uint64_t t0 = mono_ms();
	submit(e, &q, 0);
	CHECK(wait_replies(base + 1, 2000), "answer");
	reply_t r = last_reply();
	CHECK(r.ok && r.rcode == 0 && r.addr[3] == 2, "answer from upstream 2 (rcode %u .%u)",
	      r.rcode, r.addr[3]);
	CHECK(mono_ms() - t0 < 500, "at once, not after the retry timeout");
	reply_t c;
	CHECK(cache_lookup(e, &q, &c) == FWD_CACHE_HIT && c.rcode == 0 && c.addr[3] == 2,
	      "cached the answer, not the SERVFAIL");

	/* Everyone SERVFAILs: the client gets SERVFAIL, nothing is cached. */
	atomic_store(&up[1].mode, M_SERVFAIL);
	make_query(&q, "q-sf2.example.test", 11, true);
	base = replies_now();
	submit(e, &q, 0);
	CHECK(wait_replies(base + 1, 2000), "reply");
	r = last_reply();
	CHECK(r.ok && r.id == 11 && r.rcode == DNS_RCODE_SERVFAIL, "SERVFAIL (rcode %u)", r.rcode);
	CHECK(cache_lookup(e, &q, NULL) == FWD_CACHE_MISS, "SERVFAIL not cached");
	fwd_engine_free(e);
	upstream_stop(&up[0]);
	upstream_stop(&up[1]);
}

static void test_stale_and_servfail(void)
{
	upstream_t up[2];
	upstream_start(&up[0], 1, M_SILENT);
	upstream_start(&up[1], 2, M_SILENT);
	/* Probes decide after the client response timer, so that timer is what answers. */
	setup_t s = {
	    .retry_ms = 150, .budget_ms = 600, .stale_after_ms = 300, .probe_timeout_ms = 900};
	fwd_engine_t *e = engine_new(up, 2, &s);

	/* A stale entry: stored with TTL 300 "400 s ago". */
	query_t q;
	make_query(&q, "q-stale.example.test", 12, false);
	uint8_t reply[512];
	uint8_t addr[4] = {192, 0, 2, 77};
	size_t rlen = put_answer(reply, q.wire, q.len, &q.q, 0, false, addr, 1);
	wire_write_u16(reply + 2, wire_read_u16(reply + 2) | DNS_FLAG_RA);
	uint64_t now = mono_ms();
	CHECK(fwd_cache_store(fwd_engine_cache(e), &q.q, reply, rlen, now - 400000) == 0,
	      "stale entry stored");
	CHECK(cache_lookup(e, &q, NULL) == FWD_CACHE_STALE_AVAILABLE, "it is stale");
	unsigned base = replies_now();
	uint64_t t0 = mono_ms();
	submit(e, &q, FWD_SUBMIT_STALE_OK);
	CHECK(wait_replies(base + 1, 2000), "stale answer");
	uint64_t took = mono_ms() - t0;
	reply_t r = last_reply();
	CHECK(r.ok && r.id == 12 && r.rcode == 0 && r.addr[3] == 77 && r.ttl == 30,
	      "stale answer with TTL 30 (ttl %u .%u)", r.ttl, r.addr[3]);
	CHECK(took >= 250 && took < 700, "after the client response timer: %llu ms",
	      (unsigned long long)took);

	/* Nothing stale: SERVFAIL once the budget is spent. */
	make_query(&q, "q-nothing.example.test", 13, true);
	base = replies_now();
	t0 = mono_ms();
	submit(e, &q, 0);
	CHECK(wait_replies(base + 1, 3000), "SERVFAIL");
	took = mono_ms() - t0;
	r = last_reply();
	CHECK(r.ok && r.id == 13 && r.rcode == DNS_RCODE_SERVFAIL, "SERVFAIL (rcode %u)", r.rcode);
	CHECK(took >= 500 && took < 1200, "after the budget: %llu ms", (unsigned long long)took);
	usleep(100000);
	CHECK(replies_now() == base + 1, "exactly one reply per request");

	/* Once probes have found both down, a stale answer goes out at once. */
	bool down = false;
	for (int i = 0; i < 300 && !down; i++) {
		fwd_upstream_stats_t u1, u2;
		(void)fwd_engine_upstream(e, 0, &u1);
		(void)fwd_engine_upstream(e, 1, &u2);
		down = !u1.usable && !u2.usable;
		if (!down)
			usleep(10000);
	}
	CHECK(down, "both upstreams down");
	make_query(&q, "q-stale.example.test", 14, false);
	base = replies_now();
	t0 = mono_ms();
	submit(e, &q, FWD_SUBMIT_STALE_OK);
	CHECK(wait_replies(base + 1, 2000), "stale answer");
	took = mono_ms() - t0;
	r = last_reply();
	CHECK(r.ok && r.id == 14 && r.addr[3] == 77 && took < 100, "stale at once (%llu ms)",
	      (unsigned long long)took);
	fwd_engine_stats_t st;
	get_stats(e, &st);
	CHECK(st.answered_stale == 2 && st.servfail == 1,
	      "stats: stale %llu servfail %llu pending %llu", (unsigned long long)st.answered_stale,
	      (unsigned long long)st.servfail, (unsigned long long)st.pending);
	fwd_engine_free(e);
	upstream_stop(&up[0]);
	upstream_stop(&up[1]);
}

static void test_probes(void)
{
	upstream_t up[3];
	upstream_start(&up[0], 1, M_SILENT);
	upstream_start(&up[1], 2, M_SERVFAIL);
	upstream_start(&up[2], 3, M_ANSWER);
	setup_t s = {.probe_interval_ms = 100};
	fwd_engine_t *e = engine_new(up, 3, &s);
	CHECK(fwd_engine_upstream_count(e) == 3 && fwd_engine_group_count(e) == 1, "counts");
	CHECK(strcmp(fwd_engine_group_domain(e, 0), ".") == 0 &&
	          strcmp(fwd_engine_group_policy(e, 0), "ordered") == 0 &&
	          !fwd_engine_group_domain(e, 1),
	      "group info");
	fwd_upstream_stats_t st[3];
	bool settled = false;
	for (int i = 0; i < 300 && !settled; i++) {
		for (uint32_t k = 0; k < 3; k++)
			CHECK(fwd_engine_upstream(e, k, &st[k]) == 0, "upstream %u", k);
		settled = st[0].fault == FWD_FAULT_UPSTREAM_DOWN &&
		          st[1].fault == FWD_FAULT_UPSTREAM_DEGRADED && st[2].probes >= 3;
		if (!settled)
			usleep(10000);
	}
	CHECK(st[0].fault == FWD_FAULT_UPSTREAM_DOWN, "silent upstream down (%s)",
	      fwd_fault_str(st[0].fault));
	CHECK(st[1].fault == FWD_FAULT_UPSTREAM_DEGRADED, "SERVFAILing upstream degraded (%s)",
	      fwd_fault_str(st[1].fault));
	CHECK(st[2].fault == FWD_FAULT_NONE && st[2].probe_rtt_us > 0, "answering upstream up");
	CHECK(fwd_engine_upstream(e, 3, &st[0]) == STEER_EINVAL, "bad id");

	/* Client queries now go to the healthy one first. */
	query_t q;
	make_query(&q, "q-probe.example.test", 14, false);
	unsigned base = replies_now();
	submit(e, &q, 0);
	CHECK(wait_replies(base + 1, 2000), "answer");
	reply_t r = last_reply();
	CHECK(r.ok && r.addr[3] == 3, "from the up upstream (.%u)", r.addr[3]);
	fwd_engine_free(e);
	for (int i = 0; i < 3; i++)
		upstream_stop(&up[i]);
}

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static unsigned distinct(uint16_t *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_u16);
	unsigned d = n ? 1 : 0;
	for (unsigned i = 1; i < n; i++)
		d += v[i] != v[i - 1];
	return d;
}

static void test_ports_and_ids(void)
{
	upstream_t up[1];
	upstream_start(&up[0], 1, M_ANSWER);
	setup_t s = {0};
	fwd_engine_t *e = engine_new(up, 1, &s);
	unsigned base = replies_now();
	for (unsigned i = 0; i < 500; i++) {
		char name[64];
		snprintf(name, sizeof(name), "q%u.example.test", i);
		query_t q;
		make_query(&q, name, (uint16_t)i, false);
		submit(e, &q, 0);
		if (i % 50 == 49)
			CHECK(wait_replies(base + i + 1, 3000), "batch %u answered", i / 50);
	}
	pthread_mutex_lock(&up[0].lock);
	unsigned n = up[0].nrec;
	unsigned ports = distinct(up[0].rec_port, n), ids = distinct(up[0].rec_id, n);
	pthread_mutex_unlock(&up[0].lock);
	CHECK(n == 500, "500 upstream queries recorded (%u)", n);
	/* Random, and never repeated within FWD_RECENT queries: 500 distinct, not ~498. */
	CHECK(ports == 500, "distinct source ports: %u", ports);
	CHECK(ids == 500, "distinct IDs: %u", ids);
	fwd_engine_free(e);
	upstream_stop(&up[0]);
}

static void test_max_pending(void)
{
	upstream_t up[1];
	upstream_start(&up[0], 1, M_SILENT);
	setup_t s = {.max_pending = 2, .budget_ms = 400};
	fwd_engine_t *e = engine_new(up, 1, &s);
	query_t q;
	make_query(&q, "q-full.example.test", 15, false);
	unsigned base = replies_now();
	CHECK(fwd_engine_submit(e, q.wire, q.len, &client, 0) == 0, "first");
	CHECK(fwd_engine_submit(e, q.wire, q.len, &client, 0) == 0, "second");
	CHECK(fwd_engine_submit(e, q.wire, q.len, &client, 0) == STEER_EAGAIN, "third refused");
	CHECK(fwd_engine_submit(e, q.wire, FWD_ENGINE_QUERY_MAX + 1, &client, 0) == STEER_EINVAL,
	      "too long");
	fwd_engine_stats_t st;
	get_stats(e, &st);
	CHECK(st.refused_full == 1 && st.pending == 2, "refused %llu pending %llu",
	      (unsigned long long)st.refused_full, (unsigned long long)st.pending);
	/* The two get SERVFAIL after the budget; then there is room again. */
	CHECK(wait_replies(base + 2, 2000), "both answered");
	usleep(20000);
	CHECK(fwd_engine_submit(e, q.wire, q.len, &client, 0) == 0, "room again");
	/* Stopped with a request in flight: dropped without a reply, nothing leaks. */
	fwd_engine_stop(e);
	fwd_engine_stop(e);
	get_stats(e, &st);
	CHECK(st.pending == 0, "nothing pending after stop (%llu)", (unsigned long long)st.pending);
	fwd_engine_free(e);
	upstream_stop(&up[0]);
}

static void test_client_limit(void)
{
	upstream_t up[1];
	upstream_start(&up[0], 1, M_BIG);
	setup_t s = {0};
	fwd_engine_t *e = engine_new(up, 1, &s);
	query_t q;
	make_query(&q, "q-big.example.test", 16, false);
	unsigned base = replies_now();
	submit(e, &q, 0);
	CHECK(wait_replies(base + 1, 2000), "answer");
	pthread_mutex_lock(&rec.lock);
	size_t len = rec.last_len;
	pthread_mutex_unlock(&rec.lock);
	reply_t r = last_reply();
	CHECK(r.ok && r.tc && len <= 512, "no EDNS: cut to 512 with TC (%zu bytes, tc %d)", len,
	      r.tc);
	make_query(&q, "q-big2.example.test", 17, true);
	submit(e, &q, 0);
	CHECK(wait_replies(base + 2, 2000), "answer");
	pthread_mutex_lock(&rec.lock);
	len = rec.last_len;
	pthread_mutex_unlock(&rec.lock);
	r = last_reply();
	CHECK(r.ok && !r.tc && r.an == 60 && len > 512, "EDNS: all of it (%zu bytes)", len);
	fwd_engine_free(e);
	upstream_stop(&up[0]);
}

/* True when the last reply ends with exactly @p opt inside its OPT (the last record). */
static bool last_ends_with_option(const uint8_t *opt, size_t opt_len)
{
	pthread_mutex_lock(&rec.lock);
	size_t len = rec.last_len;
	bool ok =
	    len >= DNS_OPT_RR_LEN + opt_len && memcmp(rec.last + len - opt_len, opt, opt_len) == 0;
	/* The OPT is ours (no other option) and its RDLENGTH counts the cookie. */
	const uint8_t *o = rec.last + len - opt_len - DNS_OPT_RR_LEN;
	ok = ok && o[0] == 0 && wire_read_u16(o + 1) == DNS_TYPE_OPT &&
	     wire_read_u16(o + 9) == opt_len;
	pthread_mutex_unlock(&rec.lock);
	return ok;
}

/* The client's COOKIE option, made by the query thread, ends every answer the engine gives
 * it: relayed and its own SERVFAIL; and its bytes come off the client's UDP size. */
static void test_cookie_carried(void)
{
	upstream_t up[1];
	upstream_start(&up[0], 1, M_ANSWER);
	setup_t s = {0};
	fwd_engine_t *e = engine_new(up, 1, &s);
	fwd_client_t with = client;
	with.cookie_len = DNS_COOKIE_OPTION_LEN;
	wire_write_u16(with.cookie, DNS_EDNS_OPT_COOKIE);
	wire_write_u16(with.cookie + 2, DNS_COOKIE_OPTION_LEN - 4);
	for (size_t i = 4; i < DNS_COOKIE_OPTION_LEN; i++)
		with.cookie[i] = (uint8_t)(0xa0 + i);
	query_t q;
	make_query(&q, "cookie.example.test", 41, true);
	unsigned base = replies_now();
	CHECK(fwd_engine_submit(e, q.wire, q.len, &with, 0) == 0, "submit");
	CHECK(wait_replies(base + 1, 2000), "answer");
	reply_t r = last_reply();
	CHECK(r.ok && r.id == 41 && r.rcode == DNS_RCODE_NOERROR && r.an == 1, "relayed");
	CHECK(last_ends_with_option(with.cookie, with.cookie_len), "relayed answer has the cookie");
	atomic_store(&up[0].mode, M_SERVFAIL);
	make_query(&q, "cookie2.example.test", 42, true);
	CHECK(fwd_engine_submit(e, q.wire, q.len, &with, 0) == 0, "submit");
	CHECK(wait_replies(base + 2, 3000), "answer");
	r = last_reply();
	CHECK(r.ok && r.id == 42 && r.rcode == DNS_RCODE_SERVFAIL, "SERVFAIL (%u)", r.rcode);
	CHECK(last_ends_with_option(with.cookie, with.cookie_len), "SERVFAIL has the cookie");
	/* Too big for a 512-byte client: cut to the question, and the cookie still fits. */
	atomic_store(&up[0].mode, M_BIG);
	make_query(&q, "q-big-cookie.example.test", 43, true);
	q.wire[q.len - 8] = 0x02; /* payload 512 in the OPT: the cookie must fit within it */
	q.wire[q.len - 7] = 0x00;
	CHECK(dns_query_parse(q.wire, q.len, &q.q) == DNS_QUERY_OK, "parse");
	CHECK(fwd_engine_submit(e, q.wire, q.len, &with, 0) == 0, "submit");
	CHECK(wait_replies(base + 3, 2000), "answer");
	pthread_mutex_lock(&rec.lock);
	size_t len = rec.last_len;
	pthread_mutex_unlock(&rec.lock);
	r = last_reply();
	CHECK(r.ok && r.tc && len <= 512, "cut within 512 with the cookie (%zu bytes)", len);
	CHECK(last_ends_with_option(with.cookie, with.cookie_len), "truncated answer has it");
	fwd_engine_free(e);
	upstream_stop(&up[0]);
}

/* One query @p name; the reply it got, or !ok after @p ms. */
static reply_t ask(fwd_engine_t *e, const char *name, uint16_t id, bool edns, unsigned ms)
{
	query_t q;
	make_query(&q, name, id, edns);
	unsigned base = replies_now();
	reply_t r = {0};
	if (submit(e, &q, 0) && wait_replies(base + 1, ms))
		r = last_reply();
	return r;
}

static void test_unusable_replies(void)
{
	static const struct {
		int mode1, mode2;
		uint16_t rcode; /* what the client gets */
		uint8_t from;   /* last octet of its address, 0: no answer records */
	} rows[] = {
	    {M_REFUSED, M_ANSWER, 0, 2},
	    {M_LAME, M_ANSWER, 0, 2},
	    {M_REFUSED, M_REFUSED, DNS_RCODE_REFUSED, 0},
	    {M_LAME, M_LAME, DNS_RCODE_SERVFAIL, 0},
	    {M_LAME, M_REFUSED, DNS_RCODE_REFUSED, 0},
	    {M_FORMERR, M_SILENT, 0, 1},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		upstream_t up[2];
		upstream_start(&up[0], 1, rows[i].mode1);
		upstream_start(&up[1], 2, rows[i].mode2);
		setup_t s = {.retry_ms = 1000};
		fwd_engine_t *e = engine_new(up, 2, &s);
		uint64_t t0 = mono_ms();
		reply_t r = ask(e, "q-unusable.example.test", (uint16_t)(100 + i), true, 2000);
		CHECK(r.ok && r.id == 100 + i && r.rcode == rows[i].rcode,
		      "row %zu: rcode %u want %u", i, r.rcode, rows[i].rcode);
		CHECK(rows[i].from ? r.an == 1 && r.addr[3] == rows[i].from : r.an == 0,
		      "row %zu: answer .%u (an %u)", i, r.addr[3], r.an);
		CHECK(mono_ms() - t0 < 700, "row %zu: no waiting for a timeout", i);
		query_t q;
		make_query(&q, "q-unusable.example.test", 1, true);
		CHECK((cache_lookup(e, &q, NULL) == FWD_CACHE_HIT) == (rows[i].from != 0),
		      "row %zu: only an answer is cached", i);
		fwd_engine_free(e);
		upstream_stop(&up[0]);
		upstream_stop(&up[1]);
	}
}

static void test_prefetch(void)
{
	upstream_t up[1];
	upstream_start(&up[0], 1, M_ANSWER);
	setup_t s = {0};
	fwd_engine_t *e = engine_new(up, 1, &s);
	query_t q;
	make_query(&q, "q-prefetch.example.test", 18, false);
	const fwd_client_t none = {.reply = NULL, .fd = -1};
	unsigned base = replies_now();
	CHECK(fwd_engine_submit(e, q.wire, q.len, &none, FWD_SUBMIT_PREFETCH) == 0, "submit");
	bool hit = false;
	for (int i = 0; i < 200 && !hit; i++) {
		hit = cache_lookup(e, &q, NULL) == FWD_CACHE_HIT;
		if (!hit)
			usleep(5000);
	}
	CHECK(hit, "prefetched into the cache");
	fwd_engine_stats_t st;
	get_stats(e, &st);
	CHECK(replies_now() == base && st.prefetches == 1 && st.answered == 0 && st.pending == 0,
	      "no reply for a prefetch");

	/* While one refresh of a name is in flight, another one for it is dropped. */
	atomic_store(&up[0].mode, M_SILENT);
	pthread_mutex_lock(&up[0].lock);
	up[0].nrec = 0;
	pthread_mutex_unlock(&up[0].lock);
	query_t other;
	make_query(&q, "q-pf2.example.test", 23, false);
	make_query(&other, "q-pf3.example.test", 24, false);
	CHECK(fwd_engine_submit(e, q.wire, q.len, &none, FWD_SUBMIT_PREFETCH) == 0, "submit");
	CHECK(fwd_engine_submit(e, q.wire, q.len, &none, FWD_SUBMIT_PREFETCH) == 0, "submit");
	CHECK(fwd_engine_submit(e, other.wire, other.len, &none, FWD_SUBMIT_PREFETCH) == 0,
	      "submit");
	usleep(100000);
	pthread_mutex_lock(&up[0].lock);
	unsigned asked = up[0].nrec;
	pthread_mutex_unlock(&up[0].lock);
	fwd_engine_stats(e, &st);
	CHECK(asked == 2 && st.pending == 2, "one query per name (%u asked, %llu pending)", asked,
	      (unsigned long long)st.pending);
	fwd_engine_free(e);
	upstream_stop(&up[0]);
}

static void test_links(void)
{
	upstream_t up[2];
	upstream_start(&up[0], 1, M_ANSWER);
	upstream_start(&up[1], 2, M_ANSWER);
	/* A device that does not exist is down from the start. */
	setup_t s = {.link0 = "steer-nodev0"};
	fwd_engine_t *e = engine_new(up, 2, &s);
	fwd_upstream_stats_t st;
	bool down = false;
	for (int i = 0; i < 100 && !down; i++) {
		(void)fwd_engine_upstream(e, 0, &st);
		down = st.fault == FWD_FAULT_LINK_DOWN;
		if (!down)
			usleep(5000);
	}
	CHECK(down, "missing device: link down (%s)", fwd_fault_str(st.fault));
	reply_t r = ask(e, "q-link.example.test", 19, false, 2000);
	CHECK(r.ok && r.addr[3] == 2, "answer from the other link (.%u)", r.addr[3]);
	fwd_engine_free(e);

	/* A source address and no device: the interface holding the address is followed. */
	s = (setup_t){.source0 = true};
	e = engine_new(up, 2, &s);
	(void)fwd_engine_upstream(e, 0, &st);
	CHECK(st.link && strcmp(st.link, "lo") == 0, "device of 127.0.0.1: %s",
	      st.link ? st.link : "(none)");
	r = ask(e, "q-link2.example.test", 20, false, 2000);
	CHECK(r.ok && r.addr[3] == 1, "answer from the first, via its source (.%u)", r.addr[3]);
	(void)fwd_engine_upstream(e, 0, &st);
	CHECK(st.fault == FWD_FAULT_NONE, "lo is up (%s)", fwd_fault_str(st.fault));
	fwd_engine_free(e);
	upstream_stop(&up[0]);
	upstream_stop(&up[1]);
}

static void test_garbage(void)
{
	upstream_t up[1];
	upstream_start(&up[0], 1, M_GARBAGE);
	setup_t s = {.budget_ms = 800};
	fwd_engine_t *e = engine_new(up, 1, &s);
	unsigned base = replies_now();
	for (unsigned i = 0; i < 100; i++) {
		char name[64];
		snprintf(name, sizeof(name), "q%u.garbage.test", i);
		query_t q;
		make_query(&q, name, (uint16_t)i, i & 1);
		submit(e, &q, 0);
	}
	CHECK(wait_replies(base + 100, 8000), "every request answered (%u)", replies_now() - base);
	fwd_engine_stats_t st;
	get_stats(e, &st);
	uint64_t dropped = 0;
	for (int v = 1; v < FWD_WIRE_VERDICT_MAX; v++)
		dropped += st.wire.drop[v];
	CHECK(dropped > 1000, "junk dropped (%llu)", (unsigned long long)dropped);
	atomic_store(&up[0].mode, M_ANSWER);
	reply_t r = ask(e, "q-after.garbage.test", 21, false, 2000);
	CHECK(r.ok && r.rcode == 0 && r.addr[3] == 1, "still answering");
	fwd_engine_free(e);
	upstream_stop(&up[0]);
}

static void test_0x20(void)
{
	upstream_t up[2];
	upstream_start(&up[0], 1, M_LOWER);
	upstream_start(&up[1], 2, M_ANSWER);
	setup_t s = {.use_0x20 = true, .retry_ms = 150};
	fwd_engine_t *e = engine_new(up, 2, &s);
	reply_t r = ask(e, "q-case.example.test", 22, false, 2000);
	CHECK(r.ok && r.rcode == 0 && r.addr[3] == 2, "the case-echoing upstream answers (.%u)",
	      r.addr[3]);
	fwd_engine_stats_t st;
	get_stats(e, &st);
	CHECK(st.wire.drop[FWD_WIRE_DROP_CASE] >= 1, "case mismatch dropped (%llu)",
	      (unsigned long long)st.wire.drop[FWD_WIRE_DROP_CASE]);
	fwd_engine_free(e);
	upstream_stop(&up[0]);
	upstream_stop(&up[1]);
}

/* The child of test_netlink: in its own network namespace, one end of a veth pair carries
 * the upstream's source address; taking it down and up must reach the upstream's state. Exit
 * code: 0 passed, 1 failed, 77 cannot set up (no privilege). */
static int netlink_child(void)
{
	if (unshare(CLONE_NEWNET) != 0)
		return 77;
	if (system("ip link set lo up && ip link add steer-d0 type veth peer name steer-d1 && "
	           "ip addr add 10.9.9.1/24 dev steer-d0 && ip link set steer-d0 up && "
	           "ip link set steer-d1 up") != 0)
		return 77;
	rcu_register_thread();
	upstream_t up[1];
	upstream_start(&up[0], 1, M_ANSWER);
	fwd_upstream_def_t def = {.name = "d0up"};
	def.address.sin.sin_family = AF_INET;
	def.address.sin.sin_addr.s_addr = htonl(0x0a090902); /* 10.9.9.2: nobody */
	def.address.sin.sin_port = htons(53);
	def.source.sin.sin_family = AF_INET;
	def.source.sin.sin_addr.s_addr = htonl(0x0a090901);
	fwd_group_def_t g = {.domain = ".",
	                     .upstreams = &def,
	                     .n_upstreams = 1,
	                     .probe = {.interval_ms = 60000, .timeout_ms = 100}};
	fwd_engine_opts_t o = {.groups = &g, .n_groups = 1, .seed = 7};
	fwd_cache_opts_default(&o.cache);
	o.cache.max_bytes = 1024 * 1024;
	fwd_engine_t *e = NULL;
	char err[256];
	if (fwd_engine_new(&o, &e, err, sizeof(err)) != 0 || fwd_engine_start(e) != 0) {
		printf("netlink child: %s\n", err);
		return 1;
	}
	fwd_upstream_stats_t st;
	(void)fwd_engine_upstream(e, 0, &st);
	CHECK(st.link && strcmp(st.link, "steer-d0") == 0, "device found: %s",
	      st.link ? st.link : "(none)");
	static const struct {
		const char *cmd;
		fwd_fault_t want;
	} steps[] = {
	    {"ip link set steer-d1 down", FWD_FAULT_LINK_DOWN},   /* far side: no carrier */
	    {"ip link set steer-d1 up", FWD_FAULT_UPSTREAM_DOWN}, /* until probes prove it */
	    {"ip link set steer-d0 down", FWD_FAULT_LINK_DOWN},   /* admin down */
	    {"ip link set steer-d0 up", FWD_FAULT_UPSTREAM_DOWN},
	    {"ip link del steer-d0", FWD_FAULT_LINK_DOWN}, /* gone */
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(steps); i++) {
		CHECK(system(steps[i].cmd) == 0, "%s", steps[i].cmd);
		bool seen = false;
		uint64_t t0 = mono_ms();
		while (!seen && mono_ms() - t0 < 2000) {
			(void)fwd_engine_upstream(e, 0, &st);
			seen = st.fault == steps[i].want;
			if (!seen)
				usleep(2000);
		}
		CHECK(seen, "%s: %s (want %s)", steps[i].cmd, fwd_fault_str(st.fault),
		      fwd_fault_str(steps[i].want));
		CHECK(mono_ms() - t0 < 500, "%s: seen within %llu ms", steps[i].cmd,
		      (unsigned long long)(mono_ms() - t0));
	}
	fwd_engine_free(e);
	upstream_stop(&up[0]);
	rcu_unregister_thread();
	return unit_failed ? 1 : 0;
}

static void test_netlink(void)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(netlink_child());
	int status = 0;
	waitpid(pid, &status, 0);
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	if (code == 77) {
		printf("test_netlink: skipped (no network namespace or ip(8))\n");
		return;
	}
	CHECK(code == 0, "link state over rtnetlink (child exit %d)", code);
}

static void test_no_descriptors(void)
{
	upstream_t up[1];
	upstream_start(&up[0], 1, M_ANSWER);
	setup_t s = {.probe_interval_ms = 50};
	fwd_engine_t *e = engine_new(up, 1, &s);
	reply_t r = ask(e, "q-fd1.example.test", 30, false, 2000);
	CHECK(r.ok && r.rcode == 0, "answer before");
	/* No descriptor left for the engine: every socket() fails with EMFILE. */
	struct rlimit old, low;
	getrlimit(RLIMIT_NOFILE, &old);
	int probe_fd = dup(0);
	close(probe_fd);
	low = old;
	low.rlim_cur = (rlim_t)probe_fd;
	setrlimit(RLIMIT_NOFILE, &low);
	r = ask(e, "q-fd2.example.test", 31, false, 2000);
	usleep(200000); /* probe rounds come and go, unsent */
	setrlimit(RLIMIT_NOFILE, &old);
	CHECK(r.ok && r.id == 31 && r.rcode == DNS_RCODE_SERVFAIL, "SERVFAIL at once (rcode %u)",
	      r.rcode);
	fwd_upstream_stats_t st;
	(void)fwd_engine_upstream(e, 0, &st);
	CHECK(st.fault == FWD_FAULT_NONE && st.timeouts == 0 && !st.suspect,
	      "the upstream is not blamed (%s, %llu timeouts)", fwd_fault_str(st.fault),
	      (unsigned long long)st.timeouts);
	fwd_engine_stats_t es;
	get_stats(e, &es);
	CHECK(es.socket_errors >= 1, "socket errors counted (%llu)",
	      (unsigned long long)es.socket_errors);
	r = ask(e, "q-fd3.example.test", 32, false, 2000);
	CHECK(r.ok && r.rcode == 0, "answers again");
	fwd_engine_free(e);
	upstream_stop(&up[0]);
}

int main(void)
{
	test_netlink(); /* first: it forks, before any thread exists */
	rcu_register_thread();
	test_answer_then_cache();
	test_retry_to_second();
	test_tc_to_tcp();
	test_forged_dropped();
	test_servfail_next();
	test_stale_and_servfail();
	test_probes();
	test_ports_and_ids();
	test_max_pending();
	test_client_limit();
	test_cookie_carried();
	test_unusable_replies();
	test_prefetch();
	test_links();
	test_garbage();
	test_0x20();
	test_no_descriptors();
	rcu_unregister_thread();
	return unit_finish("test_fwd_engine");
}
