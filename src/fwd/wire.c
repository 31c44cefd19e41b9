/*
 * The upstream leg's wire code (see wire.h for the trust model). Runs on the forwarder's
 * event-loop threads and on query threads: bounded work for any input, no allocation.
 */
#include "fwd/wire.h"

#include <string.h>

#include "dns/dname.h"
#include "dns/wire.h"

#define EDNS_OPT_EDE 15 /* Extended DNS Errors (RFC 8914): the one upstream option we relay */
/* Room for relayed EDE options in the client's OPT: a code and a short text is what
 * resolvers send; more would only eat into the answer's space. */
#define EDE_RELAY_MAX 128

typedef struct {
	uint8_t owner[DNS_DNAME_MAXLEN]; /* lowercase */
	uint16_t type;
	uint16_t rclass;
	uint32_t ttl;
	size_t rdata; /* offset of the rdata in the message */
	uint16_t rdlen;
	bool root_owner;
} rr_t;

/* Reads the record at *pos and moves past it. Returns 0 or STEER_EMALF / STEER_ETRUNC. */
static int rr_next(const uint8_t *pkt, size_t len, size_t *pos, rr_t *rr)
{
	int ret = dname_unpack_lower(pkt, len, pos, rr->owner);
	if (ret < 0)
		return ret;
	rr->root_owner = (ret == 1);
	wire_ctx_t ctx = wire_ctx_init_const(pkt + *pos, len - *pos);
	rr->type = wire_ctx_read_u16(&ctx);
	rr->rclass = wire_ctx_read_u16(&ctx);
	rr->ttl = wire_ctx_read_u32(&ctx);
	rr->rdlen = wire_ctx_read_u16(&ctx);
	wire_ctx_skip(&ctx, rr->rdlen);
	if (ctx.err)
		return ctx.err;
	rr->rdata = *pos + 10;
	*pos += wire_ctx_offset(&ctx);
	return 0;
}

/* Copies the name, flipping the case of each letter by one random bit (0x20, draft-vixie):
 * an off-path forger must now also guess one bit per letter. */
static void put_name(wire_ctx_t *ctx, const uint8_t *name, size_t len, bool use_0x20,
                     fwd_rng_t *rng)
{
	uint8_t *dst = ctx->pos;
	wire_ctx_write(ctx, name, len);
	if (ctx->err || !use_0x20)
		return;
	uint32_t bits = 0;
	unsigned left = 0;
	for (size_t i = 0; i < len;) {
		uint8_t l = dst[i++];
		for (uint8_t j = 0; j < l; j++, i++) {
			uint8_t c = dst[i] | 0x20;
			if (c < 'a' || c > 'z')
				continue;
			if (left == 0) {
				bits = fwd_rng_u32(rng);
				left = 32;
			}
			dst[i] = (bits & 1) ? (uint8_t)(c & ~0x20) : c;
			bits >>= 1;
			left--;
		}
	}
}

typedef struct {
	uint16_t flags;
	const uint8_t *name; /* uncompressed wire name */
	size_t name_len;
	uint16_t qtype, qclass;
	bool use_0x20;
	bool edns_do;
	const dns_ecs_t *ecs;
} query_spec_t;

static int build(const query_spec_t *s, fwd_rng_t *rng, uint8_t *buf, size_t cap,
                 fwd_wire_pending_t *out)
{
	wire_ctx_t ctx = wire_ctx_init(buf, cap);
	uint16_t id = (uint16_t)fwd_rng_u32(rng);
	wire_ctx_write_u16(&ctx, id);
	wire_ctx_write_u16(&ctx, s->flags);
	wire_ctx_write_u16(&ctx, 1);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 1);
	uint8_t *qname = ctx.pos;
	put_name(&ctx, s->name, s->name_len, s->use_0x20, rng);
	wire_ctx_write_u16(&ctx, s->qtype);
	wire_ctx_write_u16(&ctx, s->qclass);
	uint8_t ecs[4 + DNS_ECS_MAXLEN];
	size_t ecs_len = s->ecs ? dns_ecs_write(s->ecs, 0, ecs) : 0;
	wire_ctx_write_u8(&ctx, 0);
	wire_ctx_write_u16(&ctx, DNS_TYPE_OPT);
	wire_ctx_write_u16(&ctx, FWD_WIRE_PAYLOAD);
	wire_ctx_write_u32(&ctx, s->edns_do ? DNS_EDNS_DO : 0);
	wire_ctx_write_u16(&ctx, (uint16_t)ecs_len);
	wire_ctx_write(&ctx, ecs, ecs_len);
	if (ctx.err)
		return ctx.err;
	out->id = id;
	out->qtype = s->qtype;
	out->qclass = s->qclass;
	out->payload = FWD_WIRE_PAYLOAD;
	out->case_check = s->use_0x20;
	out->rd = (s->flags & DNS_FLAG_RD) != 0;
	out->qname_len = (uint8_t)s->name_len;
	memcpy(out->qname, qname, s->name_len);
	return (int)wire_ctx_offset(&ctx);
}

int fwd_wire_query_build(const dns_query_t *client, const fwd_wire_query_opts_t *opts,
                         fwd_rng_t *rng, uint8_t *buf, size_t cap, fwd_wire_pending_t *out)
{
	if (!client->has_question || client->qname_len == 0)
		return STEER_EINVAL;
	/* The parser guarantees an uncompressed question, so its first qname_len bytes are the
	 * name in the client's case; the upstream never sees the client's ID or options. */
	query_spec_t s = {
	    .flags = (uint16_t)(DNS_FLAG_RD | (client->flags & DNS_FLAG_CD)),
	    .name = client->question,
	    .name_len = client->qname_len,
	    .qtype = client->qtype,
	    .qclass = client->qclass,
	    .use_0x20 = opts && opts->use_0x20,
	    .edns_do = client->has_edns && client->edns_do,
	    .ecs = opts ? opts->ecs : NULL,
	};
	return build(&s, rng, buf, cap, out);
}

int fwd_wire_ecs_make(uint16_t family, const uint8_t *addr, uint8_t source_len, dns_ecs_t *out)
{
	unsigned bytes = family == DNS_ECS_FAMILY_IPV4 ? 4 : family == DNS_ECS_FAMILY_IPV6 ? 16 : 0;
	if (bytes == 0 || source_len > bytes * 8)
		return STEER_EINVAL;
	memset(out, 0, sizeof(*out));
	out->family = family;
	out->source_len = source_len;
	unsigned full = source_len / 8u, rest = source_len % 8u;
	memcpy(out->addr, addr, full);
	if (rest)
		out->addr[full] = (uint8_t)(addr[full] & (0xff00u >> rest));
	return 0;
}

static fwd_wire_rcode_class_t rcode_class(uint16_t rcode)
{
	switch (rcode) {
	case DNS_RCODE_NOERROR:
		return FWD_WIRE_RC_ANSWER;
	case DNS_RCODE_NXDOMAIN:
		return FWD_WIRE_RC_NXDOMAIN;
	case DNS_RCODE_SERVFAIL:
		return FWD_WIRE_RC_SERVFAIL;
	case DNS_RCODE_REFUSED:
		return FWD_WIRE_RC_REFUSED;
	case DNS_RCODE_FORMERR:
		return FWD_WIRE_RC_FORMERR;
	default:
		return FWD_WIRE_RC_OTHER;
	}
}

static fwd_wire_verdict_t check_question(const fwd_wire_pending_t *p, const uint8_t *pkt,
                                         size_t len, fwd_wire_reply_t *info)
{
	uint8_t name[DNS_DNAME_MAXLEN];
	size_t pos = DNS_HEADER_LEN;
	int ret = dname_unpack(pkt, len, &pos, name);
	/* A compression pointer in the question can only point at the header or into itself. */
	if (ret < 0 || pos - DNS_HEADER_LEN != (size_t)ret || pos + 4 > len)
		return FWD_WIRE_DROP_MALFORMED;
	info->question_end = pos + 4;
	if ((size_t)ret != p->qname_len || !dname_equal(name, p->qname) ||
	    wire_read_u16(pkt + pos) != p->qtype || wire_read_u16(pkt + pos + 2) != p->qclass)
		return FWD_WIRE_DROP_QUESTION;
	if (p->case_check && memcmp(name, p->qname, p->qname_len) != 0)
		return FWD_WIRE_DROP_CASE;
	return FWD_WIRE_ACCEPT;
}

static fwd_wire_verdict_t walk_sections(const uint8_t *pkt, size_t len, fwd_wire_reply_t *info)
{
	size_t pos = info->question_end;
	unsigned total = (unsigned)info->ancount + info->nscount + info->arcount;
	for (unsigned i = 0; i < total; i++) {
		size_t start = pos;
		rr_t rr;
		if (rr_next(pkt, len, &pos, &rr) != 0)
			return FWD_WIRE_DROP_MALFORMED;
		if (rr.type != DNS_TYPE_OPT)
			continue;
		unsigned first_ar = (unsigned)info->ancount + info->nscount;
		/* One OPT, in the additional section, owned by the root (RFC 6891 6.1.1). */
		if (i < first_ar || info->has_edns || !rr.root_owner)
			return FWD_WIRE_DROP_MALFORMED;
		info->has_edns = true;
		info->opt_start = start;
		info->opt_index = (uint16_t)(i - first_ar);
		info->edns_payload = rr.rclass;
		info->edns_version = (uint8_t)(rr.ttl >> 16);
		info->edns_do = (rr.ttl & DNS_EDNS_DO) != 0;
		info->rcode = (uint16_t)(info->rcode | (rr.ttl >> 24) << 4);
	}
	/* Bytes after the last record mean the counts lie. */
	return pos == len ? FWD_WIRE_ACCEPT : FWD_WIRE_DROP_MALFORMED;
}

/* The rdata of a CNAME or DNAME must be exactly one (possibly compressed) name. */
static int rdata_name(const uint8_t *pkt, size_t len, const rr_t *rr, uint8_t out[DNS_DNAME_MAXLEN])
{
	size_t pos = rr->rdata;
	int ret = dname_unpack_lower(pkt, len, &pos, out);
	if (ret < 0 || pos != rr->rdata + rr->rdlen)
		return STEER_EMALF;
	return ret;
}

typedef struct {
	uint8_t n; /* names in name[]: the qname and the targets reached */
	uint8_t name[FWD_WIRE_CNAME_MAX + 1][DNS_DNAME_MAXLEN];
} chain_t;

static bool chain_has(const chain_t *c, const uint8_t *name)
{
	for (unsigned i = 0; i < c->n; i++)
		if (dname_equal(c->name[i], name))
			return true;
	return false;
}

/*
 * Follows the CNAME chain from the qname through the answer section, whatever the record
 * order: every link found restarts the scan, so at most FWD_WIRE_CNAME_MAX + 2 scans.
 */
static fwd_wire_verdict_t follow_chain(const uint8_t *pkt, size_t len, const fwd_wire_pending_t *p,
                                       fwd_wire_reply_t *info, chain_t *c)
{
	memcpy(c->name[0], p->qname, p->qname_len);
	dname_lower(c->name[0]);
	c->n = 1;
	/* Asking for the CNAME (or ANY) itself means the CNAME is the answer, not a link. */
	if (p->qtype == DNS_TYPE_CNAME || p->qtype == DNS_TYPE_ANY)
		return FWD_WIRE_ACCEPT;
	bool again = true;
	while (again) {
		again = false;
		size_t pos = info->question_end;
		for (unsigned i = 0; i < info->ancount; i++) {
			rr_t rr;
			if (rr_next(pkt, len, &pos, &rr) != 0)
				return FWD_WIRE_DROP_MALFORMED;
			if (rr.type != DNS_TYPE_CNAME || !dname_equal(rr.owner, c->name[c->n - 1]))
				continue;
			uint8_t target[DNS_DNAME_MAXLEN];
			if (rdata_name(pkt, len, &rr, target) < 0)
				return FWD_WIRE_DROP_MALFORMED;
			if (chain_has(c, target) || c->n > FWD_WIRE_CNAME_MAX)
				return FWD_WIRE_DROP_CHAIN;
			memcpy(c->name[c->n++], target, dname_len(target));
			again = true;
			break;
		}
	}
	info->chain = (uint8_t)(c->n - 1);
	return FWD_WIRE_ACCEPT;
}

static void count_unrelated(const uint8_t *pkt, size_t len, fwd_wire_reply_t *info,
                            const chain_t *c)
{
	size_t pos = info->question_end;
	for (unsigned i = 0; i < info->ancount; i++) {
		rr_t rr;
		if (rr_next(pkt, len, &pos, &rr) != 0)
			return; /* walk_sections() already proved this cannot happen */
		bool related = chain_has(c, rr.owner);
		for (unsigned k = 0; !related && rr.type == DNS_TYPE_DNAME && k < c->n; k++)
			related = dname_is_subdomain(c->name[k], rr.owner);
		if (!related)
			info->unrelated++;
	}
}

static fwd_wire_verdict_t check(const fwd_wire_pending_t *p, const uint8_t *pkt, size_t len,
                                bool tcp, fwd_wire_reply_t *info)
{
	memset(info, 0, sizeof(*info));
	info->question_end = DNS_HEADER_LEN;
	if (len < DNS_HEADER_LEN)
		return FWD_WIRE_DROP_SHORT;
	info->flags = wire_read_u16(pkt + 2);
	uint16_t qdcount = wire_read_u16(pkt + 4);
	info->ancount = wire_read_u16(pkt + 6);
	info->nscount = wire_read_u16(pkt + 8);
	info->arcount = wire_read_u16(pkt + 10);
	info->rcode = info->flags & DNS_RCODE_MASK;
	info->tc = (info->flags & DNS_FLAG_TC) != 0;
	if (!(info->flags & DNS_FLAG_QR))
		return FWD_WIRE_DROP_NOT_REPLY;
	if (wire_read_u16(pkt) != p->id)
		return FWD_WIRE_DROP_ID;
	if ((info->flags & DNS_OPCODE_MASK) >> DNS_OPCODE_SHIFT != DNS_OPCODE_QUERY)
		return FWD_WIRE_DROP_OPCODE;
	size_t udp_max = p->payload > DNS_UDP_MINLEN ? p->payload : DNS_UDP_MINLEN;
	if (!tcp && len > udp_max)
		return FWD_WIRE_DROP_SIZE;
	fwd_wire_verdict_t v;
	if (qdcount == 0 && info->rcode == DNS_RCODE_FORMERR) {
		v = FWD_WIRE_ACCEPT;
	} else if (qdcount != 1) {
		return FWD_WIRE_DROP_QUESTION;
	} else if ((v = check_question(p, pkt, len, info)) != FWD_WIRE_ACCEPT) {
		return v;
	}
	/* A truncated reply may end mid-record (RFC 2181 9): nothing past the question counts. */
	if (info->tc)
		return FWD_WIRE_ACCEPT;
	if ((v = walk_sections(pkt, len, info)) != FWD_WIRE_ACCEPT)
		return v;
	chain_t chain;
	if ((v = follow_chain(pkt, len, p, info, &chain)) != FWD_WIRE_ACCEPT)
		return v;
	count_unrelated(pkt, len, info, &chain);
	return FWD_WIRE_ACCEPT;
}

fwd_wire_verdict_t fwd_wire_reply_check(const fwd_wire_pending_t *p, const uint8_t *pkt, size_t len,
                                        bool tcp, fwd_wire_reply_t *info,
                                        fwd_wire_counters_t *counters)
{
	fwd_wire_verdict_t v = check(p, pkt, len, tcp, info);
	info->verdict = v;
	info->rclass = rcode_class(info->rcode);
	if (info->rclass == FWD_WIRE_RC_ANSWER && p->rd && info->ancount == 0 && !info->tc &&
	    !(info->flags & DNS_FLAG_RA))
		info->rclass = FWD_WIRE_RC_LAME;
	if (counters)
		counters->drop[v]++;
	return v;
}

/* Copies the upstream's EDE options (the reason behind a SERVFAIL is useful to the client;
 * cookies, padding, ECS and the rest are per hop or private). Returns the bytes written. */
static size_t relay_ede(const uint8_t *up, size_t up_len, const fwd_wire_reply_t *info,
                        uint8_t out[EDE_RELAY_MAX])
{
	if (!info->has_edns)
		return 0;
	size_t pos = info->opt_start;
	rr_t rr;
	if (rr_next(up, up_len, &pos, &rr) != 0)
		return 0;
	wire_ctx_t in = wire_ctx_init_const(up + rr.rdata, rr.rdlen);
	size_t n = 0;
	while (wire_ctx_available(&in) >= 4) {
		uint16_t code = wire_ctx_read_u16(&in);
		uint16_t olen = wire_ctx_read_u16(&in);
		const uint8_t *data = in.pos;
		wire_ctx_skip(&in, olen);
		if (in.err)
			break;
		if (code != EDNS_OPT_EDE || n + 4u + olen > EDE_RELAY_MAX)
			continue;
		wire_write_u16(out + n, code);
		wire_write_u16(out + n + 2, olen);
		memcpy(out + n + 4, data, olen);
		n += 4u + olen;
	}
	return n;
}

int fwd_wire_client_reply(const dns_query_t *client, const uint8_t *up, size_t up_len,
                          const fwd_wire_reply_t *info, uint8_t *out, size_t cap, size_t limit)
{
	if (info->verdict != FWD_WIRE_ACCEPT || info->tc || !client->has_question ||
	    info->question_end > up_len)
		return STEER_EINVAL;
	bool has_question = info->question_end > DNS_HEADER_LEN;
	/* The records are copied as they are, so their compression pointers stay valid only if
	 * the question in front of them keeps its length: same name, only the case differs. */
	if (has_question &&
	    (info->question_end != DNS_HEADER_LEN + client->question_len ||
	     !dname_equal(up + DNS_HEADER_LEN, client->qname) ||
	     memcmp(up + info->question_end - 4, client->question + client->qname_len, 4) != 0))
		return STEER_EINVAL;
	size_t body_end = info->has_edns ? info->opt_start : up_len;
	uint16_t ar = info->has_edns ? info->opt_index : info->arcount;
	size_t body = has_question ? body_end - info->question_end : 0;

	uint16_t rcode = info->rcode;
	uint8_t ede[EDE_RELAY_MAX];
	size_t ede_len = 0;
	if (client->has_edns)
		ede_len = relay_ede(up, up_len, info, ede);
	else if (rcode > DNS_RCODE_MASK)
		rcode = DNS_RCODE_SERVFAIL; /* needs an OPT to be expressed (RFC 6891 6.1.3) */
	size_t opt_len = client->has_edns ? DNS_OPT_RR_LEN + ede_len : 0;

	uint16_t flags = (uint16_t)(DNS_FLAG_QR | DNS_FLAG_RA | (rcode & DNS_RCODE_MASK) |
	                            (client->flags & (DNS_FLAG_RD | DNS_FLAG_CD)));
	/* RFC 6840 5.8: AD only to a client that showed it understands it. */
	if ((info->flags & DNS_FLAG_AD) && (client->edns_do || (client->flags & DNS_FLAG_AD)))
		flags |= DNS_FLAG_AD;
	size_t head = DNS_HEADER_LEN + client->question_len;
	size_t max = limit < cap ? limit : cap;
	uint16_t an = has_question ? info->ancount : 0, ns = has_question ? info->nscount : 0;
	if (!has_question)
		ar = 0;
	if (head + body + opt_len > max) {
		/* Cut to the question rather than split an RRset: the client retries over TCP. */
		body = 0;
		an = ns = ar = 0;
		flags |= DNS_FLAG_TC;
	}
	wire_ctx_t ctx = wire_ctx_init(out, max);
	wire_ctx_write_u16(&ctx, client->id);
	wire_ctx_write_u16(&ctx, flags);
	wire_ctx_write_u16(&ctx, 1);
	wire_ctx_write_u16(&ctx, an);
	wire_ctx_write_u16(&ctx, ns);
	wire_ctx_write_u16(&ctx, (uint16_t)(ar + (client->has_edns ? 1 : 0)));
	wire_ctx_write(&ctx, client->question, client->question_len);
	wire_ctx_write(&ctx, up + info->question_end, body);
	if (client->has_edns) {
		wire_ctx_write_u8(&ctx, 0);
		wire_ctx_write_u16(&ctx, DNS_TYPE_OPT);
		wire_ctx_write_u16(&ctx, FWD_WIRE_PAYLOAD);
		uint32_t ttl = (uint32_t)(rcode >> 4) << 24 | (client->edns_do ? DNS_EDNS_DO : 0);
		wire_ctx_write_u32(&ctx, ttl);
		wire_ctx_write_u16(&ctx, (uint16_t)ede_len);
		wire_ctx_write(&ctx, ede, ede_len);
	}
	if (ctx.err)
		return ctx.err;
	return (int)wire_ctx_offset(&ctx);
}

size_t fwd_wire_probe_nonce(fwd_rng_t *rng, uint64_t counter, char out[FWD_WIRE_NONCE_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	uint32_t r = fwd_rng_u32(rng);
	for (int i = 0; i < 16; i++)
		out[i] = hex[(counter >> (60 - 4 * i)) & 0xf];
	for (int i = 0; i < 8; i++)
		out[16 + i] = hex[(r >> (28 - 4 * i)) & 0xf];
	out[FWD_WIRE_NONCE_LEN] = '\0';
	return FWD_WIRE_NONCE_LEN;
}

static bool nonce_ok(const char *nonce, size_t n)
{
	if (n == 0 || n > DNS_LABEL_MAXLEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = nonce[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '-'))
			return false;
	}
	return true;
}

int fwd_wire_probe_build(fwd_wire_probe_kind_t kind, const uint8_t *name, const char *nonce,
                         uint16_t qtype, bool use_0x20, fwd_rng_t *rng, uint8_t *buf, size_t cap,
                         fwd_wire_pending_t *out)
{
	static const uint8_t root[1] = {0};
	uint8_t qname[DNS_DNAME_MAXLEN];
	size_t len;
	query_spec_t s = {.qclass = DNS_CLASS_IN, .use_0x20 = use_0x20, .name = qname};
	if (kind == FWD_WIRE_PROBE_RECURSIVE) {
		if (!name || !nonce)
			return STEER_EINVAL;
		size_t n = strlen(nonce);
		size_t name_len = dname_len(name);
		if (!nonce_ok(nonce, n))
			return STEER_EINVAL;
		if (1 + n + name_len > DNS_DNAME_MAXLEN)
			return STEER_ERANGE;
		qname[0] = (uint8_t)n;
		memcpy(qname + 1, nonce, n);
		memcpy(qname + 1 + n, name, name_len);
		len = 1 + n + name_len;
		s.flags = DNS_FLAG_RD;
		s.qtype = qtype ? qtype : DNS_TYPE_A;
	} else {
		const uint8_t *src = name ? name : root;
		len = dname_len(src);
		if (len > DNS_DNAME_MAXLEN)
			return STEER_ERANGE;
		memcpy(qname, src, len);
		s.flags =
		    0; /* RD=0: answerable from the upstream's memory, no recursion involved */
		s.qtype = qtype ? qtype : DNS_TYPE_NS;
	}
	s.name_len = len;
	return build(&s, rng, buf, cap, out);
}

fwd_wire_probe_result_t fwd_wire_probe_check(const fwd_wire_pending_t *p,
                                             fwd_wire_probe_kind_t kind, const uint8_t *pkt,
                                             size_t len, fwd_wire_reply_t *info,
                                             fwd_wire_counters_t *counters)
{
	fwd_wire_reply_t local;
	if (!info)
		info = &local;
	if (fwd_wire_reply_check(p, pkt, len, false, info, counters) != FWD_WIRE_ACCEPT)
		return FWD_WIRE_PROBE_DROP;
	if (kind == FWD_WIRE_PROBE_LIVENESS)
		return FWD_WIRE_PROBE_ALIVE;
	if (info->rclass == FWD_WIRE_RC_ANSWER || info->rclass == FWD_WIRE_RC_NXDOMAIN)
		return FWD_WIRE_PROBE_RESOLVES;
	return FWD_WIRE_PROBE_FAILS;
}

static bool port_excluded(uint16_t port, const uint16_t (*excl)[2], size_t n_excl)
{
	for (size_t i = 0; i < n_excl; i++)
		if (port >= excl[i][0] && port <= excl[i][1])
			return true;
	return false;
}

int fwd_wire_port_pick(fwd_rng_t *rng, uint16_t lo, uint16_t hi, const uint16_t (*excl)[2],
                       size_t n_excl)
{
	if (lo > hi)
		return STEER_ENOENT;
	uint32_t range = (uint32_t)hi - lo + 1;
	for (int i = 0; i < 64; i++) {
		uint16_t port = (uint16_t)(lo + fwd_rng_below(rng, range));
		if (!excl || !port_excluded(port, excl, n_excl))
			return port;
	}
	return STEER_ENOENT;
}

const char *fwd_wire_verdict_name(fwd_wire_verdict_t v)
{
	switch (v) {
	case FWD_WIRE_ACCEPT:
		return "accept";
	case FWD_WIRE_DROP_SHORT:
		return "short";
	case FWD_WIRE_DROP_NOT_REPLY:
		return "not-reply";
	case FWD_WIRE_DROP_ID:
		return "wrong-id";
	case FWD_WIRE_DROP_OPCODE:
		return "wrong-opcode";
	case FWD_WIRE_DROP_QUESTION:
		return "wrong-question";
	case FWD_WIRE_DROP_CASE:
		return "case-mismatch";
	case FWD_WIRE_DROP_MALFORMED:
		return "malformed";
	case FWD_WIRE_DROP_SIZE:
		return "oversize";
	case FWD_WIRE_DROP_CHAIN:
		return "cname-chain";
	case FWD_WIRE_VERDICT_MAX:
		break;
	}
	return "unknown";
}
