/*
 * DNS probe: one query over a connected UDP socket, built with Steer's own message builder.
 *
 * The socket is connected so that an ICMP port unreachable comes back as ECONNREFUSED and
 * the probe fails at once instead of waiting for the timeout. Only a reply with our random
 * id, QR set and our exact question (name compared case-insensitively) is accepted; anything
 * else is counted and ignored, so an off-path spoofer has to guess 32 bits (id and port).
 *
 * A reply with TC=1 still carries a trustworthy rcode, so it is judged as it is, without a
 * retry over TCP: a health check wants "does the server answer", and a probe whose expected
 * answer does not fit in 1232 bytes is misconfigured. Its detail says "truncated".
 *
 * Expected answers (spec->answer) are supported for these types, compared in parsed form:
 *   A, AAAA              an address, any spelling ("2001:db8::1" = "2001:DB8:0::1")
 *   NS, CNAME, PTR, DNAME a name, case-insensitive, trailing dot optional
 *   MX                   "preference name", SRV "priority weight port target"
 *   TXT                  the record's character-strings concatenated, compared byte for
 *                        byte (no quotes, no escapes: "v=spf1 -all")
 * Other types can be probed for their rcode only; an expected answer for them is a start
 * error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "dns/const.h"
#include "dns/dname.h"
#include "dns/msg.h"
#include "dns/names.h"
#include "dns/pkt.h"
#include "dns/wire.h"
#include "health/probe_int.h"

/* Datagrams handled per wakeup, so a flood of junk cannot starve the loop. */
#define DNS_PROBE_RECV_BATCH 16
/* Most numeric fields an expected answer layout has (SRV). */
#define DNS_PROBE_NUMS_MAX 3

typedef enum {
	ANSWER_ANY,    /* no expected answer */
	ANSWER_ADDR,   /* A / AAAA: rdata equals the parsed address */
	ANSWER_FIELDS, /* 16-bit numbers then one name, as in @c layout */
	ANSWER_TXT,    /* concatenated character-strings */
} answer_kind_t;

typedef struct {
	uint16_t type;
	const char *name;
	answer_kind_t kind;
	const char *layout; /* ANSWER_FIELDS: '2' a 16-bit number, 'n' a name (always last) */
} type_info_t;

static const type_info_t type_infos[] = {
    {DNS_TYPE_A, "A", ANSWER_ADDR, NULL},          {DNS_TYPE_NS, "NS", ANSWER_FIELDS, "n"},
    {DNS_TYPE_CNAME, "CNAME", ANSWER_FIELDS, "n"}, {DNS_TYPE_PTR, "PTR", ANSWER_FIELDS, "n"},
    {DNS_TYPE_MX, "MX", ANSWER_FIELDS, "2n"},      {DNS_TYPE_TXT, "TXT", ANSWER_TXT, NULL},
    {DNS_TYPE_AAAA, "AAAA", ANSWER_ADDR, NULL},    {DNS_TYPE_SRV, "SRV", ANSWER_FIELDS, "222n"},
    {DNS_TYPE_DNAME, "DNAME", ANSWER_FIELDS, "n"},
};

/* The parsed form of spec->answer. */
typedef struct {
	answer_kind_t kind;
	const char *layout;
	uint8_t addr[16];
	uint8_t addr_len;
	uint16_t nums[DNS_PROBE_NUMS_MAX];
	uint8_t name[DNS_DNAME_MAXLEN];
	const char *text; /* ANSWER_TXT, borrowed from the spec */
} answer_t;

typedef struct {
	health_probe_t base;
	health_probe_ctx_t *ctx;
	const health_probe_spec_t *spec;
	health_probe_cb cb;
	void *arg;
	uint32_t timeout_ms;
	struct timespec start;
	int fd;
	uint16_t id;
	uint8_t qname[DNS_DNAME_MAXLEN];
	unsigned ignored; /* replies that did not match the query */
	answer_t want;
	ev_io io;
	ev_timer timer;
	health_probe_result_t res; /* filled early when sending fails at once */
} dns_probe_t;

/* What the response says, as far as the probe cares. */
typedef struct {
	uint16_t flags;
	unsigned rcode; /* extended with the OPT upper bits when present */
	uint16_t ancount;
	bool found; /* an answer record matched the expected answer */
	bool malformed;
} reply_t;

static const type_info_t *type_info(uint16_t type)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(type_infos); i++) {
		if (type_infos[i].type == type)
			return &type_infos[i];
	}
	return NULL;
}

static const char *type_str(uint16_t type, char *buf, size_t size)
{
	const type_info_t *info = type_info(type);
	if (info)
		return info->name;
	snprintf(buf, size, "TYPE%u", type);
	return buf;
}

static const char *rcode_str(unsigned rcode, char *buf, size_t size)
{
	const char *name = dns_rcode_name(rcode);
	if (name != NULL)
		return name;
	snprintf(buf, size, "RCODE%u", rcode);
	return buf;
}

/* Parses "NUM NUM ... NAME" after @p layout into @p want. */
static bool parse_fields(const char *text, const char *layout, answer_t *want)
{
	const char *p = text;
	unsigned n = 0;
	for (; *layout == '2'; layout++) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p || errno || v > UINT16_MAX || (*end != ' ' && *end != '\t'))
			return false;
		want->nums[n++] = (uint16_t)v;
		p = end + strspn(end, " \t");
	}
	char name[DNAME_STR_MAXLEN];
	size_t len = strcspn(p, " \t");
	if (len == 0 || len >= sizeof(name) || p[len + strspn(p + len, " \t")] != '\0')
		return false;
	memcpy(name, p, len);
	name[len] = '\0';
	return dname_from_str(name, want->name) > 0;
}

static int parse_answer(const health_probe_spec_t *spec, answer_t *want, char *err, size_t errlen)
{
	want->kind = ANSWER_ANY;
	if (!spec->answer)
		return 0;
	char tbuf[16];
	const type_info_t *info = type_info(spec->qtype);
	if (!info) {
		snprintf(
		    err, errlen,
		    "dns probe: expected answer not supported for type %s (supported: A, AAAA, "
		    "NS, CNAME, PTR, DNAME, MX, SRV, TXT)",
		    type_str(spec->qtype, tbuf, sizeof(tbuf)));
		return STEER_EINVAL;
	}
	bool ok = true;
	want->kind = info->kind;
	want->layout = info->layout;
	if (info->kind == ANSWER_ADDR) {
		int af = spec->qtype == DNS_TYPE_A ? AF_INET : AF_INET6;
		want->addr_len = af == AF_INET ? 4 : 16;
		ok = inet_pton(af, spec->answer, want->addr) == 1;
	} else if (info->kind == ANSWER_FIELDS) {
		ok = parse_fields(spec->answer, info->layout, want);
	} else {
		want->text = spec->answer;
	}
	if (!ok) {
		snprintf(err, errlen, "dns probe: bad expected %s answer '%s'", info->name,
		         spec->answer);
		return STEER_EINVAL;
	}
	return 0;
}

/* Numeric fields then a possibly compressed name, all inside the rdata, equal to @p want. */
static bool fields_match(const uint8_t *pkt, size_t pos, size_t end, const answer_t *want)
{
	unsigned n = 0;
	for (const char *l = want->layout; *l == '2'; l++, pos += 2) {
		if (pos + 2 > end || wire_read_u16(pkt + pos) != want->nums[n++])
			return false;
	}
	uint8_t name[DNS_DNAME_MAXLEN];
	/* The name may point anywhere earlier in the message, but its own bytes end the rdata. */
	if (pos >= end || dname_unpack(pkt, end, &pos, name) < 0 || pos != end)
		return false;
	return dname_equal(name, want->name);
}

static bool txt_match(const uint8_t *rdata, size_t rdlen, const char *text)
{
	size_t tlen = strlen(text);
	size_t got = 0;
	for (size_t pos = 0; pos < rdlen;) {
		size_t n = rdata[pos++];
		if (pos + n > rdlen || got + n > tlen || memcmp(rdata + pos, text + got, n) != 0)
			return false;
		got += n;
		pos += n;
	}
	return got == tlen;
}

static bool rdata_match(const uint8_t *pkt, size_t rdoff, uint16_t rdlen, const answer_t *want)
{
	switch (want->kind) {
	case ANSWER_ANY:
		return true;
	case ANSWER_ADDR:
		return rdlen == want->addr_len && memcmp(pkt + rdoff, want->addr, rdlen) == 0;
	case ANSWER_FIELDS:
		return fields_match(pkt, rdoff, rdoff + (size_t)rdlen, want);
	case ANSWER_TXT:
		return txt_match(pkt + rdoff, rdlen, want->text);
	}
	return false;
}

/* Reads one record's fixed part at @p *pos; returns false on malformed data. */
static bool read_rr(const uint8_t *pkt, size_t len, size_t *pos, uint16_t *type, uint16_t *rclass,
                    uint32_t *ttl, size_t *rdoff, uint16_t *rdlen)
{
	uint8_t owner[DNS_DNAME_MAXLEN];
	if (dname_unpack(pkt, len, pos, owner) < 0)
		return false;
	wire_ctx_t ctx = wire_ctx_init_const(pkt + *pos, len - *pos);
	*type = wire_ctx_read_u16(&ctx);
	*rclass = wire_ctx_read_u16(&ctx);
	*ttl = wire_ctx_read_u32(&ctx);
	*rdlen = wire_ctx_read_u16(&ctx);
	*rdoff = *pos + wire_ctx_offset(&ctx);
	wire_ctx_skip(&ctx, *rdlen);
	if (ctx.err)
		return false;
	*pos += wire_ctx_offset(&ctx);
	return true;
}

/* True when @p pkt answers our query: id, QR, opcode and the very same question. */
static bool reply_matches(const dns_probe_t *p, const uint8_t *pkt, size_t len, size_t *pos)
{
	if (len < DNS_HEADER_LEN || wire_read_u16(pkt) != p->id)
		return false;
	uint16_t flags = wire_read_u16(pkt + 2);
	if (!(flags & DNS_FLAG_QR) || (flags & DNS_OPCODE_MASK) != 0 || wire_read_u16(pkt + 4) != 1)
		return false;
	uint8_t qname[DNS_DNAME_MAXLEN];
	*pos = DNS_HEADER_LEN;
	if (dname_unpack(pkt, len, pos, qname) < 0 || *pos + 4 > len)
		return false;
	if (!dname_equal(qname, p->qname) || wire_read_u16(pkt + *pos) != p->spec->qtype ||
	    wire_read_u16(pkt + *pos + 2) != DNS_CLASS_IN)
		return false;
	*pos += 4;
	return true;
}

/* Walks the sections after the question: expected answer, extended rcode. */
static void reply_parse(const dns_probe_t *p, const uint8_t *pkt, size_t len, size_t pos,
                        reply_t *r)
{
	r->flags = wire_read_u16(pkt + 2);
	r->rcode = r->flags & DNS_RCODE_MASK;
	r->ancount = wire_read_u16(pkt + 6);
	unsigned additional = (unsigned)r->ancount + wire_read_u16(pkt + 8);
	unsigned total = additional + wire_read_u16(pkt + 10);
	for (unsigned i = 0; i < total; i++) {
		uint16_t type, rclass, rdlen;
		uint32_t ttl;
		size_t rdoff;
		if (!read_rr(pkt, len, &pos, &type, &rclass, &ttl, &rdoff, &rdlen)) {
			/* A truncated reply may legitimately stop anywhere. */
			r->malformed = !(r->flags & DNS_FLAG_TC);
			return;
		}
		if (i < r->ancount && type == p->spec->qtype && rclass == DNS_CLASS_IN &&
		    rdata_match(pkt, rdoff, rdlen, &p->want))
			r->found = true;
		else if (i >= additional && type == DNS_TYPE_OPT)
			r->rcode |= (ttl >> 24) << 4;
	}
}

static void dns_probe_free(dns_probe_t *p)
{
	ev_io_stop(p->ctx->loop, &p->io);
	ev_timer_stop(p->ctx->loop, &p->timer);
	if (p->fd >= 0)
		close(p->fd);
	free(p);
}

static void dns_probe_cancel(health_probe_t *self)
{
	dns_probe_free((dns_probe_t *)self);
}

static void dns_probe_finish(dns_probe_t *p)
{
	health_probe_report(&p->base, &p->res, p->cb, p->arg);
}

static void judge(dns_probe_t *p, const reply_t *r)
{
	const health_probe_spec_t *spec = p->spec;
	char rbuf[16], ebuf[16], tbuf[16];
	const char *rname = rcode_str(r->rcode, rbuf, sizeof(rbuf));
	const char *tc = (r->flags & DNS_FLAG_TC) ? " (truncated)" : "";
	if (r->malformed)
		health_probe_result_set(&p->res, false, p->start, "%s, malformed records", rname);
	else if (r->rcode != spec->rcode)
		health_probe_result_set(&p->res, false, p->start, "rcode %s (expected %s)%s", rname,
		                        rcode_str(spec->rcode, ebuf, sizeof(ebuf)), tc);
	else if (!r->found && spec->answer)
		health_probe_result_set(&p->res, false, p->start, "%s but no %s %s in answer%s",
		                        rname, type_str(spec->qtype, tbuf, sizeof(tbuf)),
		                        spec->answer, tc);
	else
		health_probe_result_set(&p->res, true, p->start, "%s, %u answer%s%s", rname,
		                        r->ancount, r->ancount == 1 ? "" : "s", tc);
}

/* Returns true when the probe has its result (and must finish). */
static bool handle_datagram(dns_probe_t *p, const uint8_t *pkt, size_t len)
{
	size_t pos;
	if (!reply_matches(p, pkt, len, &pos)) {
		p->ignored++;
		return false;
	}
	reply_t r = {0};
	reply_parse(p, pkt, len, pos, &r);
	judge(p, &r);
	return true;
}

static void dns_on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	dns_probe_t *p = w->data;
	uint8_t buf[DNS_MSG_MAXLEN];
	for (int i = 0; i < DNS_PROBE_RECV_BATCH; i++) {
		ssize_t n = recv(p->fd, buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			if (errno == ECONNREFUSED)
				health_probe_result_set(&p->res, false, p->start,
				                        "connection refused");
			else
				health_probe_result_set(&p->res, false, p->start, "recv: %s",
				                        strerror(errno));
			dns_probe_finish(p);
			return;
		}
		if (handle_datagram(p, buf, (size_t)n)) {
			dns_probe_finish(p);
			return;
		}
	}
}

static void dns_on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	dns_probe_t *p = w->data;
	if (p->res.detail[0] == '\0' && p->ignored)
		health_probe_result_set(&p->res, false, p->start,
		                        "timeout after %u ms (%u non-matching replies ignored)",
		                        p->timeout_ms, p->ignored);
	else if (p->res.detail[0] == '\0')
		health_probe_result_set(&p->res, false, p->start, "timeout after %u ms",
		                        p->timeout_ms);
	dns_probe_finish(p);
}

static uint16_t random_id(void)
{
	uint16_t id;
	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) == (ssize_t)sizeof(id))
		return id;
	/* Only before the kernel's pool is ready at early boot: weaker, still unpredictable
	 * enough for a health check on a network we choose. */
	struct timespec ts = health_probe_now();
	return (uint16_t)(ts.tv_nsec ^ (ts.tv_nsec >> 16) ^ getpid());
}

/* Builds the query with the response builder: header from a synthetic query, QR cleared. */
static size_t build_query(const dns_probe_t *p, int qname_len, uint8_t *buf, size_t size)
{
	uint8_t question[DNS_DNAME_MAXLEN + 4];
	wire_ctx_t qctx = wire_ctx_init(question, sizeof(question));
	wire_ctx_write(&qctx, p->qname, (size_t)qname_len);
	wire_ctx_write_u16(&qctx, p->spec->qtype);
	wire_ctx_write_u16(&qctx, DNS_CLASS_IN);
	dns_query_t q = {.id = p->id,
	                 .flags = 0,
	                 .has_question = true,
	                 .question = question,
	                 .question_len = wire_ctx_offset(&qctx)};
	dns_msg_t msg;
	dns_msg_init(&msg, buf, size);
	if (qctx.err || dns_msg_begin(&msg, &q, DNS_RCODE_NOERROR) != 0 ||
	    dns_msg_put_opt(&msg, DNS_EDNS_DEFAULT_PAYLOAD, 0, false, NULL, 0) != 0)
		return 0;
	dns_msg_set_flags(&msg, 0, DNS_FLAG_QR);
	return dns_msg_finish(&msg);
}

static bool qtype_valid(uint16_t qtype)
{
	return qtype != 0 && qtype != DNS_TYPE_OPT &&
	       !(qtype >= DNS_TYPE_TKEY && qtype <= DNS_TYPE_AXFR);
}

static int check_spec(const health_probe_spec_t *spec, uint8_t qname[DNS_DNAME_MAXLEN],
                      answer_t *want, char *err, size_t errlen)
{
	if (!spec->qname) {
		snprintf(err, errlen, "dns probe without a query name");
		return STEER_EINVAL;
	}
	int len = dname_from_str(spec->qname, qname);
	if (len <= 0) {
		snprintf(err, errlen, "dns probe: bad query name '%s'", spec->qname);
		return STEER_EINVAL;
	}
	if (!qtype_valid(spec->qtype)) {
		snprintf(err, errlen, "dns probe: query type %u cannot be probed over UDP",
		         spec->qtype);
		return STEER_EINVAL;
	}
	int ret = parse_answer(spec, want, err, errlen);
	return ret < 0 ? ret : len;
}

static int open_socket(const health_probe_req_t *req, char *err, size_t errlen)
{
	const steer_sockaddr_t *dst = &req->dst;
	int fd = socket(dst->sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int ret = -errno;
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return ret;
	}
	int bound = health_probe_bind_source(fd, req, err, errlen);
	if (bound != 0) {
		close(fd);
		return bound;
	}
	if (connect(fd, &dst->sa, steer_sockaddr_len(dst)) != 0) {
		int ret = -errno;
		snprintf(err, errlen, "connect: %s", strerror(errno));
		close(fd);
		return ret;
	}
	return fd;
}

int health_probe_dns_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                           health_probe_t **out, char *err, size_t errlen)
{
	uint8_t qname[DNS_DNAME_MAXLEN];
	answer_t want = {0};
	int qlen = check_spec(req->spec, qname, &want, err, errlen);
	if (qlen < 0)
		return qlen;
	int fd = open_socket(req, err, errlen);
	if (fd < 0)
		return fd;
	dns_probe_t *p = xcalloc(1, sizeof(*p));
	*p = (dns_probe_t){.base.cancel = dns_probe_cancel,
	                   .ctx = ctx,
	                   .spec = req->spec,
	                   .cb = req->cb,
	                   .arg = req->arg,
	                   .timeout_ms = req->timeout_ms,
	                   .start = health_probe_now(),
	                   .fd = fd,
	                   .id = random_id(),
	                   .want = want};
	memcpy(p->qname, qname, (size_t)qlen);
	ev_io_init(&p->io, dns_on_readable, fd, EV_READ);
	p->io.data = p;
	/* The loop's cached time can lag (a long callback before us): the timeout counts from now.
	 */
	ev_now_update(ctx->loop);
	ev_timer_init(&p->timer, dns_on_timer, req->timeout_ms / 1000.0, 0.);
	p->timer.data = p;

	uint8_t buf[DNS_HEADER_LEN + DNS_DNAME_MAXLEN + 4 + DNS_OPT_RR_LEN];
	size_t len = build_query(p, qlen, buf, sizeof(buf));
	if (len == 0) {
		health_probe_result_set(&p->res, false, p->start, "cannot build the query");
		ev_timer_set(&p->timer, 0., 0.); /* report from the loop, never from here */
	} else if (send(fd, buf, len, 0) != (ssize_t)len) {
		if (errno == ECONNREFUSED)
			health_probe_result_set(&p->res, false, p->start, "connection refused");
		else
			health_probe_result_set(&p->res, false, p->start, "send: %s",
			                        strerror(errno));
		ev_timer_set(&p->timer, 0., 0.);
	} else {
		ev_io_start(ctx->loop, &p->io);
	}
	ev_timer_start(ctx->loop, &p->timer);
	*out = &p->base;
	return 0;
}
