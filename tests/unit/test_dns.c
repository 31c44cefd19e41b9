/* Unit tests of src/dns: names, query parsing and the response builder. */
#include <string.h>

#include "base/err.h"
#include "dns/dname.h"
#include "dns/ecs.h"
#include "dns/msg.h"
#include "dns/names.h"
#include "dns/nsid.h"
#include "dns/pkt.h"
#include "dns/wire.h"
#include "unit.h"

static void test_dname_text(void)
{
	static const struct {
		const char *text;
		int len; /* wire length or error */
		const char *back;
	} rows[] = {
	    {"www.example.test", 18, "www.example.test."},
	    {"www.example.test.", 18, "www.example.test."},
	    {".", 1, "."},
	    {"a\\.b.test", 10, "a\\.b.test."},
	    {"\\065.test", 8, "A.test."},
	    {"sp\\032ace.test", 13, "sp\\032ace.test."},
	    {"a..b", STEER_ESYNTAX, NULL},
	    {".a", STEER_ESYNTAX, NULL},
	    {"", STEER_ESYNTAX, NULL},
	    {"bad\\2", STEER_ESYNTAX, NULL},
	    {"x\\300.test", STEER_ESYNTAX, NULL},
	    {"0123456789012345678901234567890123456789012345678901234567890123.test", STEER_ERANGE,
	     NULL},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		uint8_t wire[DNS_DNAME_MAXLEN];
		int len = dname_from_str(rows[i].text, wire);
		CHECK(len == rows[i].len, "'%s' gave %d, want %d", rows[i].text, len, rows[i].len);
		if (len > 0 && rows[i].back) {
			char buf[DNAME_STR_MAXLEN];
			dname_to_str(wire, buf, sizeof(buf));
			CHECK(strcmp(buf, rows[i].back) == 0, "'%s' printed as '%s'", rows[i].text,
			      buf);
			CHECK(dname_len(wire) == (size_t)len, "len of '%s'", rows[i].text);
			CHECK(dname_is_valid(wire, (size_t)len), "valid '%s'", rows[i].text);
		}
	}
	/* A 255-octet name is the longest legal one; 256 is not. */
	char longname[300] = "";
	for (int i = 0; i < 4; i++)
		strcat(longname, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.");
	uint8_t wire[DNS_DNAME_MAXLEN];
	CHECK(dname_from_str(longname, wire) == 253, "4x62 labels fit (%s)", "253 octets");
	strcat(longname, "b");
	CHECK(dname_from_str(longname, wire) == 255, "255 octets fit");
	strcat(longname, "c");
	CHECK(dname_from_str(longname, wire) == STEER_ERANGE, "256 octets rejected");
}

static void test_dname_relations(void)
{
	uint8_t a[DNS_DNAME_MAXLEN], b[DNS_DNAME_MAXLEN], c[DNS_DNAME_MAXLEN];
	CHECK(dname_from_str("WwW.Example.TEST", a) > 0, "parse a");
	CHECK(dname_from_str("www.example.test", b) > 0, "parse b");
	CHECK(dname_from_str("example.test", c) > 0, "parse c");
	CHECK(dname_equal(a, b), "case-insensitive equality");
	CHECK(dname_is_subdomain(a, c), "www below apex");
	CHECK(!dname_is_subdomain(c, a), "apex not below www");
	CHECK(dname_is_subdomain(c, c), "name is subdomain of itself");
	CHECK(dname_labels(a) == 3, "3 labels");
	CHECK(dname_equal(dname_parent(b), c), "parent");
	dname_lower(a);
	CHECK(memcmp(a, b, dname_len(b)) == 0, "lowered");
	uint8_t wc[DNS_DNAME_MAXLEN];
	CHECK(dname_from_str("*.example.test", wc) > 0 && dname_is_wildcard(wc), "wildcard");
	CHECK(!dname_is_wildcard(c), "not wildcard");
}

static void test_dname_unpack(void)
{
	/* 12 bytes of header, then "example.test" at 12 and pointers after it. */
	uint8_t msg[64] = {0};
	const uint8_t name[] = "\x07"
	                       "example\x04test";
	memcpy(msg + 12, name, sizeof(name));                  /* includes the root label */
	size_t at = 12 + sizeof(name);                         /* 26 */
	const uint8_t tail[] = {3,    'w', 'w', 'w', 0xc0, 12, /* www + ptr to 12 */
	                        0xc0, 26,                      /* ptr to www... */
	                        0xc0, 40,                      /* forward pointer */
	                        0xc0, 36};                     /* points at itself */
	memcpy(msg + at, tail, sizeof(tail));
	uint8_t out[DNS_DNAME_MAXLEN];
	size_t off = at;
	int len = dname_unpack(msg, sizeof(msg), &off, out);
	CHECK(len == 18 && off == at + 6, "www + pointer (len %d, off %zu)", len, off);
	off = at + 6;
	len = dname_unpack(msg, sizeof(msg), &off, out);
	CHECK(len == 18 && off == at + 8, "pointer to pointer chain (len %d)", len);
	off = at + 8;
	CHECK(dname_unpack(msg, sizeof(msg), &off, out) == STEER_EMALF, "forward pointer");
	off = at + 10;
	CHECK(dname_unpack(msg, sizeof(msg), &off, out) == STEER_EMALF, "self pointer");
	off = 12;
	CHECK(dname_unpack(msg, 20, &off, out) == STEER_ETRUNC, "truncated name");
	uint8_t mixed[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 'W', 'w', 'W', 2, 'T', 'x', 0};
	off = 12;
	CHECK(dname_unpack_lower(mixed, sizeof(mixed), &off, out) == 8 && off == sizeof(mixed) &&
	          memcmp(out, "\x03www\x02tx", 8) == 0,
	      "unpack_lower folds case while copying");
	off = 12;
	CHECK(dname_unpack(mixed, sizeof(mixed), &off, out) == 8 && out[1] == 'W',
	      "unpack keeps case");
	uint8_t ext[] = {0x40, 0};
	off = 0;
	CHECK(dname_unpack(ext, sizeof(ext), &off, out) == STEER_EMALF, "extended label");
}

/* Builds a query: header, question, optional OPT. Returns its length. */
static size_t make_query(uint8_t *buf, uint16_t flags, uint16_t qdcount, const char *qname,
                         uint16_t qtype, int opt_version, uint16_t payload)
{
	wire_ctx_t ctx = wire_ctx_init(buf, 512);
	wire_ctx_write_u16(&ctx, 0x1234);
	wire_ctx_write_u16(&ctx, flags);
	wire_ctx_write_u16(&ctx, qdcount);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, opt_version >= 0 ? 1 : 0);
	uint8_t name[DNS_DNAME_MAXLEN];
	int len = dname_from_str(qname, name);
	wire_ctx_write(&ctx, name, (size_t)len);
	wire_ctx_write_u16(&ctx, qtype);
	wire_ctx_write_u16(&ctx, DNS_CLASS_IN);
	if (opt_version >= 0) {
		wire_ctx_write_u8(&ctx, 0);
		wire_ctx_write_u16(&ctx, DNS_TYPE_OPT);
		wire_ctx_write_u16(&ctx, payload);
		wire_ctx_write_u32(&ctx, (uint32_t)opt_version << 16 | DNS_EDNS_DO);
		wire_ctx_write_u16(&ctx, 4); /* one unknown empty option */
		wire_ctx_write_u16(&ctx, 65001);
		wire_ctx_write_u16(&ctx, 0);
	}
	return wire_ctx_offset(&ctx);
}

static void test_query_parse(void)
{
	uint8_t buf[512];
	dns_query_t q;
	size_t len = make_query(buf, DNS_FLAG_RD, 1, "WWW.example.test", DNS_TYPE_A, 0, 100);
	CHECK(dns_query_parse(buf, len, &q) == DNS_QUERY_OK, "good query");
	CHECK(q.qtype == DNS_TYPE_A && q.qclass == DNS_CLASS_IN, "qtype/qclass");
	CHECK(q.has_edns && q.edns_payload == 512 && q.edns_do, "payload raised to 512, DO");
	CHECK(q.qname[1] == 'w' && q.question[1] == 'W', "qname lowered, question kept");
	CHECK(q.question_len == 18 + 4, "question length %zu", q.question_len);

	static const struct {
		const char *what;
		uint16_t flags;
		uint16_t qdcount;
		int version;
		size_t cut; /* bytes removed from the end, or added garbage when > 1000 */
		dns_query_status_t want;
	} rows[] = {
	    {"response", DNS_FLAG_QR, 1, -1, 0, DNS_QUERY_DROP},
	    {"no question", 0, 0, -1, 0, DNS_QUERY_FORMERR},
	    {"two questions", 0, 2, -1, 0, DNS_QUERY_FORMERR},
	    {"EDNS version 1", 0, 1, 1, 0, DNS_QUERY_BADVERS},
	    {"truncated OPT", 0, 1, 0, 3, DNS_QUERY_FORMERR},
	    {"trailing garbage", 0, 1, -1, 1001, DNS_QUERY_FORMERR},
	    {"NOTIFY", DNS_OPCODE_NOTIFY << DNS_OPCODE_SHIFT, 1, -1, 0, DNS_QUERY_OK},
	    {"UPDATE", DNS_OPCODE_UPDATE << DNS_OPCODE_SHIFT, 1, -1, 0, DNS_QUERY_NOTIMP},
	    {"short", 0, 1, -1, 25, DNS_QUERY_FORMERR},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		len = make_query(buf, rows[i].flags, rows[i].qdcount, "a.test", DNS_TYPE_A,
		                 rows[i].version, 1232);
		if (rows[i].cut > 1000)
			buf[len++] = 0;
		else
			len -= rows[i].cut;
		dns_query_status_t st = dns_query_parse(buf, len, &q);
		CHECK(st == rows[i].want, "%s: status %d, want %d", rows[i].what, st, rows[i].want);
	}
	CHECK(dns_query_parse(buf, 11, &q) == DNS_QUERY_DROP, "shorter than a header");
}

/* Whether an error answer may carry an OPT: only when the whole message parsed. */
static void test_query_opt_on_errors(void)
{
	static const struct {
		const char *what;
		uint16_t flags, qdcount;
		int version;
		size_t cut; /* as in test_query_parse() */
		dns_query_status_t want;
		bool edns;
	} rows[] = {
	    {"no question, OPT", 0, 0, 0, 0, DNS_QUERY_FORMERR, true},
	    {"opcode 15, OPT", 15 << DNS_OPCODE_SHIFT, 1, 0, 0, DNS_QUERY_NOTIMP, true},
	    {"UPDATE, OPT", DNS_OPCODE_UPDATE << DNS_OPCODE_SHIFT, 1, 0, 0, DNS_QUERY_NOTIMP, true},
	    {"NOTIFY, OPT", DNS_OPCODE_NOTIFY << DNS_OPCODE_SHIFT, 1, 0, 0, DNS_QUERY_OK, true},
	    {"EDNS version 1", 0, 1, 1, 0, DNS_QUERY_BADVERS, true},
	    {"truncated OPT", 0, 1, 0, 3, DNS_QUERY_FORMERR, false},
	    {"OPT then garbage", 0, 1, 0, 1001, DNS_QUERY_FORMERR, false},
	};
	uint8_t buf[512];
	dns_query_t q;
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		size_t len = rows[i].qdcount ? make_query(buf, rows[i].flags, 1, "a.test",
		                                          DNS_TYPE_A, rows[i].version, 1232)
		                             : 0;
		if (rows[i].qdcount == 0) {
			/* a header and the OPT alone */
			size_t full = make_query(buf, 0, 0, "a.test", DNS_TYPE_A, 0, 1232);
			memmove(buf + 12, buf + 12 + 8 + 4, full - 12 - 8 - 4);
			len = full - 8 - 4;
		}
		if (rows[i].cut > 1000)
			buf[len++] = 0;
		else
			len -= rows[i].cut;
		dns_query_status_t st = dns_query_parse(buf, len, &q);
		CHECK(st == rows[i].want && q.has_edns == rows[i].edns, "%s: status %d, OPT %d",
		      rows[i].what, st, q.has_edns);
	}

	/* The IXFR client's SOA in authority, its names compressed to the question. */
	static const uint8_t ixfr[] = {
	    0x12, 0x34, 0,    0,    0,    1,  0, 0, 0, 1, 0, 0, 1, 'a', 4, 't', 'e',  's', 't',  0,
	    0,    251,  0,    1,    0xc0, 12, 0, 6, 0, 1, 0, 0, 0, 0,   0, 24,  0xc0, 12,  0xc0, 12,
	    0xde, 0xad, 0xbe, 0xef, 0,    0,  0, 1, 0, 0, 0, 2, 0, 0,   0, 3,   0,    0,   0,    4};
	CHECK(dns_query_parse(ixfr, sizeof(ixfr), &q) == DNS_QUERY_OK && q.has_soa &&
	          q.soa_serial == 0xdeadbeef,
	      "IXFR: SOA serial %#x", q.soa_serial);
	uint8_t bad[sizeof(ixfr)];
	memcpy(bad, ixfr, sizeof(ixfr));
	bad[35] = 22; /* rdlength short of the five integers */
	CHECK(dns_query_parse(bad, sizeof(bad) - 2, &q) == DNS_QUERY_FORMERR, "IXFR: short SOA");
	memcpy(bad, ixfr, sizeof(ixfr));
	bad[37] = 60; /* a pointer forward, past the name */
	CHECK(dns_query_parse(bad, sizeof(bad), &q) == DNS_QUERY_FORMERR, "IXFR: forward pointer");
	CHECK(dns_query_parse(ixfr, 24, &q) == DNS_QUERY_FORMERR && !q.has_soa,
	      "IXFR: counted SOA missing");
	size_t len = make_query(buf, 0, 1, "a.test", DNS_TYPE_IXFR, -1, 0);
	CHECK(dns_query_parse(buf, len, &q) == DNS_QUERY_OK && !q.has_soa, "IXFR without SOA");
}

static void test_msg_compression(void)
{
	uint8_t query[512], resp[512];
	dns_query_t q;
	size_t qlen = make_query(query, 0, 1, "WWW.Example.Test", DNS_TYPE_MX, -1, 0);
	CHECK(dns_query_parse(query, qlen, &q) == DNS_QUERY_OK, "parse");
	dns_msg_t msg;
	dns_msg_init(&msg, resp, sizeof(resp));
	CHECK(dns_msg_begin(&msg, &q, 0) == 0, "begin");
	uint8_t rdata[2 + DNS_DNAME_MAXLEN] = {0, 10};
	int nlen = dname_from_str("mail.example.test", rdata + 2);
	CHECK(dns_msg_put_rr(&msg, DNS_SEC_ANSWER, q.qname, DNS_TYPE_MX, DNS_CLASS_IN, 300, rdata,
	                     (uint16_t)(2 + nlen)) == 0,
	      "put MX");
	size_t len = dns_msg_finish(&msg);
	/* header 12 + question 22 + owner ptr 2 + fixed 10 + pref 2 + "mail" 5 + ptr 2 */
	CHECK(len == 12 + 22 + 2 + 10 + 2 + 5 + 2, "compressed length %zu", len);
	size_t off = 34;
	uint8_t owner[DNS_DNAME_MAXLEN];
	CHECK(dname_unpack(resp, len, &off, owner) == 18 && owner[1] == 'W',
	      "owner points at the question, case kept");
	off = 34 + 2 + 10 + 2;
	uint8_t target[DNS_DNAME_MAXLEN];
	CHECK(dname_unpack(resp, len, &off, target) == nlen && dname_equal(target, rdata + 2),
	      "target decompresses");
	CHECK((resp[2] & 0x80) && resp[7] == 1, "QR set, ANCOUNT 1");

	/* A record that does not fit leaves the message unchanged. */
	dns_msg_init(&msg, resp, 60);
	CHECK(dns_msg_begin(&msg, &q, 0) == 0, "begin small");
	uint8_t big[100] = {0};
	size_t before = msg.len;
	CHECK(dns_msg_put_rr(&msg, DNS_SEC_ANSWER, q.qname, DNS_TYPE_TXT, DNS_CLASS_IN, 1, big,
	                     sizeof(big)) == STEER_ESPACE,
	      "too big");
	CHECK(msg.len == before && msg.count[DNS_SEC_ANSWER] == 0, "rolled back");
	dns_msg_reserve(&msg, DNS_OPT_RR_LEN);
	CHECK(dns_msg_put_rr(&msg, DNS_SEC_ANSWER, q.qname, DNS_TYPE_TXT, DNS_CLASS_IN, 1, big,
	                     14) == STEER_ESPACE,
	      "reserved space is kept");
	CHECK(dns_msg_put_opt(&msg, 1232, 0, true, NULL, 0) == 0, "OPT fits in reserved space");
}

static void test_ecs(void)
{
	static const struct {
		const char *what;
		uint8_t data[24];
		uint16_t len;
		int ret;
	} rows[] = {
	    {"IPv4 /24", {0, 1, 24, 0, 192, 0, 2}, 7, 0},
	    {"IPv4 /0", {0, 1, 0, 0}, 4, 0},
	    {"IPv4 /32", {0, 1, 32, 0, 192, 0, 2, 1}, 8, 0},
	    {"IPv6 /56", {0, 2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0}, 11, 0},
	    {"IPv4 /23 odd bits", {0, 1, 23, 0, 192, 0, 3}, 7, STEER_EMALF},
	    {"IPv4 /22 clean", {0, 1, 22, 0, 192, 0, 4}, 7, 0},
	    {"family 3", {0, 3, 0, 0}, 4, STEER_EMALF},
	    {"IPv4 /33", {0, 1, 33, 0, 1, 2, 3, 4, 0}, 9, STEER_EMALF},
	    {"IPv6 /129", {0, 2, 129, 0}, 4, STEER_EMALF},
	    {"address too long", {0, 1, 8, 0, 10, 0}, 6, STEER_EMALF},
	    {"address too short", {0, 1, 24, 0, 10, 0}, 6, STEER_EMALF},
	    {"non-zero scope", {0, 1, 24, 24, 192, 0, 2}, 7, STEER_EMALF},
	    {"short option", {0, 1, 24}, 3, STEER_EMALF},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		dns_ecs_t ecs;
		int ret = dns_ecs_parse(rows[i].data, rows[i].len, &ecs);
		CHECK(ret == rows[i].ret, "ECS %s: %d, want %d", rows[i].what, ret, rows[i].ret);
		if (ret != 0)
			continue;
		uint8_t out[4 + DNS_ECS_MAXLEN];
		size_t n = dns_ecs_write(&ecs, 16, out);
		CHECK(n == dns_ecs_option_len(&ecs) && n == 4u + rows[i].len,
		      "ECS %s: written %zu bytes", rows[i].what, n);
		CHECK(out[7] == 16 && memcmp(out + 8, rows[i].data + 4, rows[i].len - 4u) == 0,
		      "ECS %s: scope set, address echoed", rows[i].what);
	}
}

static void test_nsid(void)
{
	uint8_t buf[512];
	dns_query_t q;
	size_t len = make_query(buf, 0, 1, "example.test.", DNS_TYPE_A, 0, 1232);
	CHECK(dns_query_parse(buf, len, &q) == DNS_QUERY_OK && q.has_edns && !q.has_nsid,
	      "an unknown option is not NSID");
	/* turn the unknown option into NSID, with and without a payload */
	buf[len - 4] = 0;
	buf[len - 3] = DNS_EDNS_OPT_NSID;
	CHECK(dns_query_parse(buf, len, &q) == DNS_QUERY_OK && q.has_nsid, "empty NSID parsed");
	memcpy(buf + len, "ab", 2);
	buf[len - 1] = 2;
	buf[len - 5] = 6; /* OPT rdlength */
	CHECK(dns_query_parse(buf, len + 2, &q) == DNS_QUERY_OK && q.has_nsid,
	      "NSID with a payload is a request too");
	len = make_query(buf, 0, 1, "example.test.", DNS_TYPE_A, -1, 0);
	CHECK(dns_query_parse(buf, len, &q) == DNS_QUERY_OK && !q.has_nsid, "no OPT, no NSID");
	uint8_t out[16];
	size_t n = dns_nsid_write((const uint8_t *)"n1", 2, out);
	static const uint8_t want[] = {0, 3, 0, 2, 'n', '1'};
	CHECK(n == sizeof(want) && memcmp(out, want, n) == 0, "NSID option written");
	n = dns_nsid_write(NULL, 0, out);
	CHECK(n == 4 && out[1] == 3 && out[3] == 0, "empty NSID option written");
}

/* A response: header, question example.test. A, one A answer, then @p opt_rdlen bytes of OPT
 * (or no OPT when negative). */
static size_t make_response(uint8_t *buf, int opt_rdlen)
{
	static const uint8_t head[] = {0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0};
	size_t len = 0;
	memcpy(buf, head, sizeof(head));
	len = sizeof(head);
	len += (size_t)dname_from_str("example.test.", buf + len);
	wire_write_u16(buf + len, DNS_TYPE_A);
	wire_write_u16(buf + len + 2, DNS_CLASS_IN);
	len += 4;
	static const uint8_t answer[] = {0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1};
	memcpy(buf + len, answer, sizeof(answer));
	len += sizeof(answer);
	if (opt_rdlen < 0)
		return len;
	wire_write_u16(buf + 10, 1);
	static const uint8_t opt[] = {0, 0, 41, 4, 0xd0, 0, 0, 0, 0};
	memcpy(buf + len, opt, sizeof(opt));
	len += sizeof(opt);
	wire_write_u16(buf + len, (uint16_t)opt_rdlen);
	len += 2;
	memset(buf + len, 0, (size_t)opt_rdlen);
	return len + (size_t)opt_rdlen;
}

static void test_nsid_append(void)
{
	uint8_t buf[512];
	size_t len = make_response(buf, 0);
	size_t n = dns_nsid_append(buf, len, sizeof(buf), (const uint8_t *)"node-7", 6);
	CHECK(n == len + 10, "appended: %zu -> %zu", len, n);
	CHECK(wire_read_u16(buf + len - 2) == 10, "OPT rdlength grew to %u",
	      wire_read_u16(buf + len - 2));
	CHECK(wire_read_u16(buf + len) == DNS_EDNS_OPT_NSID && wire_read_u16(buf + len + 2) == 6 &&
	          memcmp(buf + len + 4, "node-7", 6) == 0,
	      "the option at the end");
	/* an OPT that has options already keeps them */
	len = make_response(buf, 4);
	n = dns_nsid_append(buf, len, sizeof(buf), (const uint8_t *)"n1", 2);
	CHECK(n == len + 6 && wire_read_u16(buf + len - 6) == 10, "after another option");
	/* left out: no OPT, no room, not the last record, a message that does not walk */
	len = make_response(buf, -1);
	CHECK(dns_nsid_append(buf, len, sizeof(buf), (const uint8_t *)"n1", 2) == len, "no OPT");
	len = make_response(buf, 0);
	CHECK(dns_nsid_append(buf, len, len + 5, (const uint8_t *)"n1", 2) == len, "no room");
	CHECK(dns_nsid_append(buf, len, len + 6, (const uint8_t *)"n1", 2) == len + 6,
	      "exactly enough room");
	len = make_response(buf, 0);
	CHECK(dns_nsid_append(buf, len - 1, sizeof(buf), (const uint8_t *)"n1", 2) == len - 1,
	      "a truncated message");
	len = make_response(buf, 0);
	wire_write_u16(buf + 10, 0); /* the OPT counted in the authority section */
	wire_write_u16(buf + 8, 1);
	CHECK(dns_nsid_append(buf, len, sizeof(buf), (const uint8_t *)"n1", 2) == len,
	      "an OPT outside the additional section");
	len = make_response(buf, 0);
	buf[len - 11] = 1; /* the last record is not the root name */
	CHECK(dns_nsid_append(buf, len, sizeof(buf), (const uint8_t *)"n1", 2) == len,
	      "the last record is not an OPT");
}

static void test_edns_option_append(void)
{
	static const uint8_t cookie[8 + 4] = {0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8};
	uint8_t buf[512];
	size_t len = make_response(buf, 4);
	size_t n = dns_edns_option_append(buf, len, sizeof(buf), cookie, sizeof(cookie));
	CHECK(n == len + sizeof(cookie) && wire_read_u16(buf + len - 6) == 4 + sizeof(cookie) &&
	          memcmp(buf + len, cookie, sizeof(cookie)) == 0,
	      "appended after the option already there");
	len = make_response(buf, 0);
	CHECK(dns_edns_option_append(buf, len, len + sizeof(cookie) - 1, cookie, sizeof(cookie)) ==
	          len,
	      "no room: left out");
	CHECK(wire_read_u16(buf + len - 2) == 0, "and the OPT is unchanged");
	len = make_response(buf, -1);
	CHECK(dns_edns_option_append(buf, len, sizeof(buf), cookie, sizeof(cookie)) == len,
	      "no OPT");
}

static void test_names(void)
{
	static const struct {
		unsigned rcode;
		const char *name; /* NULL: unassigned */
	} rcodes[] = {
	    {0, "NOERROR"}, {3, "NXDOMAIN"}, {10, "NOTZONE"},
	    {12, NULL},     {16, "BADVERS"}, {999, NULL},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rcodes); i++) {
		const char *got = dns_rcode_name(rcodes[i].rcode);
		CHECK(rcodes[i].name ? got && strcmp(got, rcodes[i].name) == 0 : got == NULL,
		      "rcode %u named '%s'", rcodes[i].rcode, got ? got : "(null)");
		unsigned back = 9999;
		if (rcodes[i].name)
			CHECK(dns_rcode_parse(rcodes[i].name, &back) == 0 &&
			          back == rcodes[i].rcode,
			      "rcode '%s' parsed as %u", rcodes[i].name, back);
	}
	unsigned rc;
	CHECK(dns_rcode_parse("servfail", &rc) == 0 && rc == 2, "rcodes ignore case");
	CHECK(dns_rcode_parse("RCODE12", &rc) == STEER_EINVAL, "no generic rcode form");

	static const struct {
		const char *text;
		int ret;
		uint16_t type;
		const char *str; /* dns_type_str() of the parsed type */
	} types[] = {
	    {"A", 0, DNS_TYPE_A, "A"},
	    {"aaaa", 0, DNS_TYPE_AAAA, "AAAA"},
	    {"CAA", 0, DNS_TYPE_CAA, "CAA"},
	    {"NSEC3PARAM", 0, DNS_TYPE_NSEC3PARAM, "NSEC3PARAM"},
	    {"TYPE65", 0, DNS_TYPE_HTTPS, "HTTPS"},
	    {"type1234", 0, 1234, "TYPE1234"},
	    {"TYPE65535", 0, 65535, "TYPE65535"},
	    {"TYPE0", STEER_EINVAL, 0, NULL},
	    {"TYPE65536", STEER_EINVAL, 0, NULL},
	    {"TYPE", STEER_EINVAL, 0, NULL},
	    {"TYPE12x", STEER_EINVAL, 0, NULL},
	    {"AAA", STEER_EINVAL, 0, NULL},
	    {"", STEER_EINVAL, 0, NULL},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(types); i++) {
		uint16_t t = 0;
		int ret = dns_type_parse(types[i].text, &t);
		CHECK(ret == types[i].ret, "type '%s' gave %d, want %d", types[i].text, ret,
		      types[i].ret);
		if (ret != 0 || types[i].ret != 0)
			continue;
		char buf[16];
		CHECK(t == types[i].type, "type '%s' parsed as %u", types[i].text, t);
		CHECK(strcmp(dns_type_str(t, buf, sizeof(buf)), types[i].str) == 0,
		      "type %u printed as '%s'", t, buf);
	}
	CHECK(dns_type_name(DNS_TYPE_MX) && strcmp(dns_type_name(DNS_TYPE_MX), "MX") == 0, "MX");
	CHECK(dns_type_name(4000) == NULL, "no mnemonic for type 4000");
}

int main(void)
{
	test_dname_text();
	test_dname_relations();
	test_dname_unpack();
	test_query_parse();
	test_query_opt_on_errors();
	test_msg_compression();
	test_ecs();
	test_nsid();
	test_nsid_append();
	test_edns_option_append();
	test_names();
	return unit_finish("test_dns");
}
