/*
 * steer-probe's dns probe on the wire: the query asks exactly dns-name (type A, class IN,
 * RD=0, our ID), and only a response to that question with that ID counts as a reply.
 */
#include <string.h>

#include "dns/dname.h"
#include "dns/wire.h"
#include "probe/sender.h"
#include "unit.h"

static size_t reply_to(const uint8_t *query, size_t len, uint8_t *out)
{
	memcpy(out, query, len);
	out[2] |= 0x84; /* QR, AA */
	out[3] = 0x03;  /* NXDOMAIN counts too: the server answered */
	return len;
}

int main(void)
{
	uint8_t qname[DNS_DNAME_MAXLEN];
	CHECK(dname_from_str("probe.example.test.", qname) > 0, "name");
	uint8_t q[512];
	size_t len = probe_dns_query(qname, 0x1234, q, sizeof(q));
	CHECK(len == 12 + 20 + 4, "query length %zu", len);
	CHECK(wire_read_u16(q) == 0x1234, "our ID");
	CHECK(q[2] == 0 && q[3] == 0, "a plain query: RD=0");
	CHECK(wire_read_u16(q + 4) == 1 && wire_read_u16(q + 6) == 0 && wire_read_u16(q + 8) == 0 &&
	          wire_read_u16(q + 10) == 0,
	      "one question, nothing else");
	CHECK(memcmp(q + 12, qname, 20) == 0, "the question is dns-name");
	CHECK(wire_read_u16(q + 32) == 1 && wire_read_u16(q + 34) == 1, "type A class IN");
	CHECK(probe_dns_query(qname, 1, q, 20) == 0, "too small a buffer");
	len = probe_dns_query(qname, 0x1234, q, sizeof(q));

	uint8_t r[512];
	size_t rlen = reply_to(q, len, r);
	CHECK(probe_dns_reply_matches(r, rlen, qname, 0x1234), "the reply matches");
	CHECK(!probe_dns_reply_matches(r, rlen, qname, 0x1235), "another ID does not");
	CHECK(!probe_dns_reply_matches(q, len, qname, 0x1234), "our own query (QR=0) does not");
	r[13] = 'P'; /* "Probe": names compare case-insensitively */
	CHECK(probe_dns_reply_matches(r, rlen, qname, 0x1234), "0x20 case still matches");
	r[14] = 'x';
	CHECK(!probe_dns_reply_matches(r, rlen, qname, 0x1234), "another name does not");
	rlen = reply_to(q, len, r);
	r[rlen - 3] = 28; /* AAAA */
	CHECK(!probe_dns_reply_matches(r, rlen, qname, 0x1234), "another type does not");
	rlen = reply_to(q, len, r);
	CHECK(!probe_dns_reply_matches(r, 11, qname, 0x1234), "a short packet does not");
	CHECK(!probe_dns_reply_matches(r, rlen - 2, qname, 0x1234), "a cut question does not");
	return unit_finish("probe_wire");
}
