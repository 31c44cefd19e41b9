/*
 * Fuzz target: the forwarder's upstream reply checks and the client reply built from them
 * (src/fwd/wire.c), which read datagrams from the network.
 *
 * Input: byte 0 picks the outstanding query (qtype, 0x20 on or off, TCP or UDP, the client's
 * EDNS and UDP size); the rest is the reply. The query's ID and question are taken from the
 * reply so the fuzzer gets past the match. Besides sanitizer findings it checks that an
 * accepted reply really carries our ID and question, and that a client reply fits its limit,
 * has the client's ID and question, and walks again as a well-formed message.
 */
#include <string.h>

#include "dns/dname.h"
#include "dns/pkt.h"
#include "dns/wire.h"
#include "fuzz.h"
#include "fwd/wire.h"

static const uint16_t qtypes[] = {DNS_TYPE_A, DNS_TYPE_AAAA, DNS_TYPE_CNAME, DNS_TYPE_TXT};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	const uint8_t *pkt = data + 1;
	size_t len = size - 1;
	bool tcp = mode & 0x10;

	/* The pending query: the reply's question when it has one, else a fixed name. */
	fwd_wire_pending_t p = {.qtype = qtypes[mode & 3],
	                        .qclass = DNS_CLASS_IN,
	                        .payload = FWD_WIRE_PAYLOAD,
	                        .case_check = mode & 4,
	                        .rd = true};
	size_t pos = DNS_HEADER_LEN;
	int n = len >= DNS_HEADER_LEN ? dname_unpack(pkt, len, &pos, p.qname) : -1;
	if (n < 0)
		n = dname_from_str("www.example.test", p.qname);
	p.qname_len = (uint8_t)n;
	if (len >= 2)
		p.id = wire_read_u16(pkt);

	fwd_wire_reply_t info;
	fwd_wire_counters_t counters = {0};
	fwd_wire_verdict_t v = fwd_wire_reply_check(&p, pkt, len, tcp, &info, &counters);
	FUZZ_CHECK(counters.drop[v] == 1 && info.verdict == v);
	if (v != FWD_WIRE_ACCEPT)
		return 0;
	FUZZ_CHECK(len >= DNS_HEADER_LEN && wire_read_u16(pkt) == p.id);
	FUZZ_CHECK(wire_read_u16(pkt + 2) & DNS_FLAG_QR);
	FUZZ_CHECK(info.question_end <= len && info.chain <= FWD_WIRE_CNAME_MAX);
	FUZZ_CHECK(info.unrelated <= info.ancount);
	if (info.tc)
		return 0;

	/* The client asked the same question (lowercase, so the restore is visible). */
	uint8_t cq[DNS_HEADER_LEN + DNS_DNAME_MAXLEN + 4 + DNS_OPT_RR_LEN];
	wire_ctx_t c = wire_ctx_init(cq, sizeof(cq));
	bool edns = mode & 0x20;
	wire_ctx_write_u16(&c, 0x4242);
	wire_ctx_write_u16(&c, DNS_FLAG_RD | (mode & 0x40 ? DNS_FLAG_CD : 0));
	wire_ctx_write_u16(&c, 1);
	wire_ctx_write_u16(&c, 0);
	wire_ctx_write_u16(&c, 0);
	wire_ctx_write_u16(&c, edns ? 1 : 0);
	uint8_t lower[DNS_DNAME_MAXLEN];
	memcpy(lower, p.qname, p.qname_len);
	dname_lower(lower);
	wire_ctx_write(&c, lower, p.qname_len);
	wire_ctx_write_u16(&c, p.qtype);
	wire_ctx_write_u16(&c, p.qclass);
	if (edns) {
		wire_ctx_write_u8(&c, 0);
		wire_ctx_write_u16(&c, DNS_TYPE_OPT);
		wire_ctx_write_u16(&c, 1232);
		wire_ctx_write_u32(&c, mode & 0x80 ? DNS_EDNS_DO : 0);
		wire_ctx_write_u16(&c, 0);
	}
	FUZZ_CHECK(c.err == 0);
	dns_query_t q;
	FUZZ_CHECK(dns_query_parse(cq, wire_ctx_offset(&c), &q) == DNS_QUERY_OK);

	static uint8_t out[DNS_MSG_MAXLEN];
	size_t limit = tcp ? DNS_MSG_MAXLEN : (edns ? 1232 : 512);
	int olen = fwd_wire_client_reply(&q, pkt, len, &info, out, sizeof(out), limit);
	if (olen < 0)
		return 0;
	FUZZ_CHECK((size_t)olen <= limit && olen >= DNS_HEADER_LEN);
	FUZZ_CHECK(wire_read_u16(out) == 0x4242);
	FUZZ_CHECK(memcmp(out + DNS_HEADER_LEN, q.question, q.question_len) == 0);
	fwd_wire_pending_t back = p;
	back.id = 0x4242;
	back.case_check = false;
	fwd_wire_reply_t again;
	FUZZ_CHECK(fwd_wire_reply_check(&back, out, (size_t)olen, true, &again, NULL) ==
	           FWD_WIRE_ACCEPT);
	return 0;
}
