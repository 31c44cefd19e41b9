/*
 * Fuzz target: the self-check's judgement of a reply datagram (src/cluster/selfquery.c),
 * which reads what comes back from the network.
 *
 * Input: byte 0 picks the question (the SOA of an apex, or id.server CH TXT with or without
 * an expected text); the rest is the datagram. The question's id is taken from the datagram
 * so that the fuzzer gets past the id check. Besides sanitizer findings it checks that a
 * good or bad verdict is only given to a reply with our id and QR set, and that a reason
 * comes with a bad one.
 */
#include "cluster/selfquery.h"

#include <string.h>

#include "dns/dname.h"
#include "dns/wire.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *pkt = data + 1;
	size_t len = size - 1;
	cluster_question_t q = {.qtype = DNS_TYPE_SOA, .qclass = DNS_CLASS_IN};
	const char *name = "example.test";
	if (data[0] % 3) {
		name = "id.server";
		q.qtype = DNS_TYPE_TXT;
		q.qclass = DNS_CLASS_CH;
		q.txt = data[0] % 3 == 1 ? "n1" : NULL;
	}
	FUZZ_CHECK(dname_from_str(name, q.qname) > 0);
	q.id = len >= 2 ? wire_read_u16(pkt) : 0;
	char why[128] = "";
	int verdict = cluster_question_judge(&q, pkt, len, why, sizeof(why));
	FUZZ_CHECK(verdict >= -1 && verdict <= 1);
	if (verdict < 0)
		return 0;
	FUZZ_CHECK(len >= DNS_HEADER_LEN && wire_read_u16(pkt) == q.id &&
	           (wire_read_u16(pkt + 2) & DNS_FLAG_QR));
	FUZZ_CHECK(verdict == 1 || why[0] != '\0');
	FUZZ_CHECK(verdict == 0 || wire_read_u16(pkt + 6) > 0);
	return 0;
}
