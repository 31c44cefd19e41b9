/*
 * Fuzz target: the reply matching and parsing of the dns health probe (src/health/probe_dns.c),
 * which reads datagrams from the network. The file is included so that its static parser
 * functions are reachable without widening the library's API.
 *
 * Input: byte 0 picks the query and expected answer (A, AAAA, MX, TXT, CNAME with an expected
 * answer, or A without one); the rest is the datagram. The probe's id is taken from the
 * datagram so that the fuzzer gets past the id check. Besides sanitizer findings it checks
 * that a match really has our id and question, and that an answer was only found when the
 * reply has answer records.
 */
#include "../../src/health/probe_dns.c"

#include "fuzz.h"

static const struct {
	uint16_t qtype;
	const char *answer;
} cases[] = {
    {DNS_TYPE_A, "192.0.2.80"},           {DNS_TYPE_AAAA, "2001:db8::1"},
    {DNS_TYPE_MX, "10 mail.probe.test."}, {DNS_TYPE_TXT, "hello world"},
    {DNS_TYPE_CNAME, "x.probe.test."},    {DNS_TYPE_A, NULL},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *pkt = data + 1;
	size_t len = size - 1;
	health_probe_spec_t spec = {.type = HEALTH_PROBE_DNS, .qname = "www.probe.test."};
	spec.qtype = cases[data[0] % STEER_ARRAY_LEN(cases)].qtype;
	spec.answer = cases[data[0] % STEER_ARRAY_LEN(cases)].answer;
	dns_probe_t p = {.spec = &spec};
	char err[256];
	FUZZ_CHECK(dname_from_str(spec.qname, p.qname) > 0);
	FUZZ_CHECK(parse_answer(&spec, &p.want, err, sizeof(err)) == 0);
	p.id = len >= 2 ? wire_read_u16(pkt) : 0;

	size_t pos = 0;
	if (!dns_reply_matches(pkt, len, p.id, p.qname, spec.qtype, DNS_CLASS_IN, &pos))
		return 0;
	FUZZ_CHECK(len >= DNS_HEADER_LEN && pos <= len);
	FUZZ_CHECK(wire_read_u16(pkt) == p.id && (wire_read_u16(pkt + 2) & DNS_FLAG_QR));
	reply_t r = {0};
	reply_parse(&p, pkt, len, pos, &r);
	FUZZ_CHECK(!r.found || r.ancount > 0);
	FUZZ_CHECK(r.rcode < 4096);
	return 0;
}
