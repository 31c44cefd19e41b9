/*
 * Query parsing. Strict where RFCs require an error (FORMERR), lenient only where they allow
 * it. Runs on query threads: no allocation, bounded work for any input.
 */
#include "dns/pkt.h"

#include <string.h>

#include "dns/dname.h"
#include "dns/nsid.h"
#include "dns/wire.h"

/* Skips one resource record (owner, fixed fields, rdata). Returns its type, or -1. */
static int skip_rr(const uint8_t *pkt, size_t len, size_t *pos, uint16_t *rclass, uint32_t *ttl,
                   const uint8_t **rdata, uint16_t *rdlen, bool *root_owner)
{
	uint8_t owner[DNS_DNAME_MAXLEN];
	int ret = dname_unpack(pkt, len, pos, owner);
	if (ret < 0)
		return -1;
	*root_owner = (ret == 1);
	wire_ctx_t ctx = wire_ctx_init_const(pkt + *pos, len - *pos);
	uint16_t type = wire_ctx_read_u16(&ctx);
	*rclass = wire_ctx_read_u16(&ctx);
	*ttl = wire_ctx_read_u32(&ctx);
	*rdlen = wire_ctx_read_u16(&ctx);
	*rdata = ctx.pos;
	wire_ctx_skip(&ctx, *rdlen);
	if (ctx.err)
		return -1;
	*pos += wire_ctx_offset(&ctx);
	return type;
}

/*
 * EDNS options must tile the rdata exactly (RFC 6891 6.1.2); unknown ones are ignored. An ECS
 * option is parsed strictly, and more than one is an error (RFC 7871 6).
 */
static bool parse_edns_options(dns_query_t *q, const uint8_t *rdata, uint16_t rdlen)
{
	wire_ctx_t ctx = wire_ctx_init_const(rdata, rdlen);
	while (wire_ctx_available(&ctx) > 0) {
		uint16_t code = wire_ctx_read_u16(&ctx);
		uint16_t optlen = wire_ctx_read_u16(&ctx);
		const uint8_t *data = ctx.pos;
		wire_ctx_skip(&ctx, optlen);
		if (ctx.err)
			return false;
		if (code == DNS_EDNS_OPT_ECS) {
			if (q->has_ecs || dns_ecs_parse(data, optlen, &q->ecs) != 0)
				return false;
			q->has_ecs = true;
		}
		/* RFC 5001 2.1: the requester sends an empty payload; any is read as a request. */
		if (code == DNS_EDNS_OPT_NSID)
			q->has_nsid = true;
		if (code == DNS_EDNS_OPT_EXPIRE)
			q->has_expire = true;
		/* RFC 7873 5.2.2: a malformed cookie is FORMERR; later ones add nothing. */
		if (code == DNS_EDNS_OPT_COOKIE && !q->has_cookie) {
			if (dns_cookie_parse(data, optlen, &q->cookie) != 0)
				return false;
			q->has_cookie = true;
		}
	}
	return ctx.err == 0;
}

static dns_query_status_t parse_opt(dns_query_t *q, uint16_t rclass, uint32_t ttl,
                                    const uint8_t *rdata, uint16_t rdlen, bool root_owner)
{
	if (q->has_edns || !root_owner || !parse_edns_options(q, rdata, rdlen))
		return DNS_QUERY_FORMERR;
	q->has_edns = true;
	q->edns_payload = rclass < DNS_UDP_MINLEN ? DNS_UDP_MINLEN : rclass;
	q->edns_version = (uint8_t)(ttl >> 16);
	q->edns_do = (ttl & DNS_EDNS_DO) != 0;
	return DNS_QUERY_OK;
}

static dns_query_status_t parse_question(const uint8_t *pkt, size_t len, size_t *pos,
                                         dns_query_t *q)
{
	size_t start = *pos;
	int ret = dname_unpack_lower(pkt, len, pos, q->qname);
	/* No name precedes the question, so a compression pointer in it can only point at the
	 * header or into the name itself (RFC 1035 4.1.4): either way it is malformed. */
	if (ret < 0 || *pos - start != (size_t)ret || *pos + 4 > len)
		return DNS_QUERY_FORMERR;
	q->qname_len = (uint8_t)ret;
	q->qtype = wire_read_u16(pkt + *pos);
	q->qclass = wire_read_u16(pkt + *pos + 2);
	*pos += 4;
	q->has_question = true;
	q->question = pkt + start;
	q->question_len = *pos - start;
	return DNS_QUERY_OK;
}

/* The serial of an SOA whose rdata (@p rdlen bytes at @p rdata inside @p pkt) may use
 * compression pointers into the rest of the message. */
static int parse_soa_serial(const uint8_t *pkt, const uint8_t *rdata, uint16_t rdlen,
                            uint32_t *serial)
{
	uint8_t name[DNS_DNAME_MAXLEN];
	size_t pos = (size_t)(rdata - pkt);
	size_t end = pos + rdlen;
	if (dname_unpack(pkt, end, &pos, name) < 0 || dname_unpack(pkt, end, &pos, name) < 0 ||
	    pos + 20 != end)
		return -1;
	*serial = wire_read_u32(pkt + pos);
	return 0;
}

/* Skips the questions after the first, which are not answered but must parse. */
static dns_query_status_t skip_questions(const uint8_t *pkt, size_t len, size_t *pos, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint8_t name[DNS_DNAME_MAXLEN];
		if (dname_unpack(pkt, len, pos, name) < 0 || *pos + 4 > len)
			return DNS_QUERY_FORMERR;
		*pos += 4;
	}
	return DNS_QUERY_OK;
}

static dns_query_status_t parse_records(const uint8_t *pkt, size_t len, size_t pos, dns_query_t *q)
{
	unsigned total = (unsigned)q->ancount + q->nscount + q->arcount;
	for (unsigned i = 0; i < total; i++) {
		uint16_t rclass, rdlen;
		uint32_t ttl;
		const uint8_t *rdata;
		bool root_owner;
		size_t start = pos;
		int type = skip_rr(pkt, len, &pos, &rclass, &ttl, &rdata, &rdlen, &root_owner);
		if (type < 0)
			return DNS_QUERY_FORMERR;
		bool additional = i >= (unsigned)q->ancount + q->nscount;
		bool authority = i >= q->ancount && !additional;
		if (type == DNS_TYPE_SOA && authority && !q->has_soa) {
			if (parse_soa_serial(pkt, rdata, rdlen, &q->soa_serial) != 0)
				return DNS_QUERY_FORMERR;
			q->has_soa = true;
		}
		if (type == DNS_TYPE_OPT) {
			if (!additional)
				return DNS_QUERY_FORMERR;
			if (parse_opt(q, rclass, ttl, rdata, rdlen, root_owner) != DNS_QUERY_OK)
				return DNS_QUERY_FORMERR;
		}
		if (type == DNS_TYPE_TSIG) {
			/* RFC 8945 5.1: only last; dns_tsig_find() checks the record itself. */
			if (!additional || i != total - 1)
				return DNS_QUERY_FORMERR;
			q->tsig_offset = start;
		}
	}
	/* Bytes after the last record mean the counts lie. */
	return pos == len ? DNS_QUERY_OK : DNS_QUERY_FORMERR;
}

dns_query_status_t dns_query_parse(const uint8_t *pkt, size_t len, dns_query_t *q)
{
	/* Field by field: zeroing the 255-byte name buffer would cost more than the parse. */
	q->has_question = false;
	q->question = NULL;
	q->question_len = 0;
	q->qname_len = 0;
	q->qtype = q->qclass = 0;
	q->has_edns = q->edns_do = false;
	q->has_ecs = false;
	q->has_nsid = false;
	q->has_expire = false;
	q->has_cookie = false;
	q->edns_version = 0;
	q->edns_payload = 0;
	q->has_soa = false;
	q->soa_serial = 0;
	q->tsig_offset = 0;
	q->msg = pkt;
	q->msg_len = len;
	if (len < DNS_HEADER_LEN)
		return DNS_QUERY_DROP;

	q->id = wire_read_u16(pkt);
	q->flags = wire_read_u16(pkt + 2);
	q->qdcount = wire_read_u16(pkt + 4);
	q->ancount = wire_read_u16(pkt + 6);
	q->nscount = wire_read_u16(pkt + 8);
	q->arcount = wire_read_u16(pkt + 10);
	q->opcode = (uint8_t)((q->flags & DNS_OPCODE_MASK) >> DNS_OPCODE_SHIFT);
	if (q->flags & DNS_FLAG_QR)
		return DNS_QUERY_DROP;

	/*
	 * The whole message is parsed before its contents are judged, so that an error answer
	 * carries an OPT exactly when the query had a valid one (RFC 6891 6.1.1); a message that
	 * does not parse gets none, since its OPT cannot be trusted.
	 */
	size_t pos = DNS_HEADER_LEN;
	if ((q->qdcount > 0 && parse_question(pkt, len, &pos, q) != DNS_QUERY_OK) ||
	    (q->qdcount > 1 && skip_questions(pkt, len, &pos, q->qdcount - 1u) != DNS_QUERY_OK) ||
	    parse_records(pkt, len, pos, q) != DNS_QUERY_OK) {
		q->has_edns = false;
		q->has_ecs = q->has_nsid = false;
		return DNS_QUERY_FORMERR;
	}
	if (q->has_edns && q->edns_version > 0)
		return DNS_QUERY_BADVERS;
	/* NOTIFY (RFC 1996) is answered by auth/notify.c. */
	if (q->opcode != DNS_OPCODE_QUERY && q->opcode != DNS_OPCODE_NOTIFY)
		return DNS_QUERY_NOTIMP;
	if (q->qdcount != 1)
		return DNS_QUERY_FORMERR;
	return DNS_QUERY_OK;
}

bool dns_reply_matches(const uint8_t *pkt, size_t len, uint16_t id, const uint8_t *qname,
                       uint16_t qtype, uint16_t qclass, size_t *pos)
{
	if (len < DNS_HEADER_LEN || wire_read_u16(pkt) != id)
		return false;
	uint16_t flags = wire_read_u16(pkt + 2);
	if (!(flags & DNS_FLAG_QR) || (flags & DNS_OPCODE_MASK) != 0 || wire_read_u16(pkt + 4) != 1)
		return false;
	uint8_t name[DNS_DNAME_MAXLEN];
	*pos = DNS_HEADER_LEN;
	if (dname_unpack(pkt, len, pos, name) < 0 || *pos + 4 > len)
		return false;
	if (!dname_equal(name, qname) || wire_read_u16(pkt + *pos) != qtype ||
	    wire_read_u16(pkt + *pos + 2) != qclass)
		return false;
	*pos += 4;
	return true;
}
