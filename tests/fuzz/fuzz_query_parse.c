/*
 * Fuzz target: query parsing (dns_query_parse). Besides sanitizer findings it checks what the
 * parser promises about an accepted query: a valid lowercase name inside the packet.
 */
#include <string.h>

#include "dns/dname.h"
#include "dns/pkt.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	dns_query_t q;
	memset(&q, 0, sizeof(q));
	dns_query_status_t st = dns_query_parse(data, size, &q);
	if (st == DNS_QUERY_DROP)
		FUZZ_CHECK(size < DNS_HEADER_LEN || (data[2] & 0x80));
	if (st != DNS_QUERY_OK || !q.has_question)
		return 0;
	FUZZ_CHECK(q.question >= data + DNS_HEADER_LEN);
	FUZZ_CHECK(q.question + q.question_len <= data + size);
	FUZZ_CHECK(dname_is_valid(q.qname, q.qname_len));
	uint8_t lower[DNS_DNAME_MAXLEN];
	memcpy(lower, q.qname, q.qname_len);
	dname_lower(lower);
	FUZZ_CHECK(memcmp(lower, q.qname, q.qname_len) == 0);
	FUZZ_CHECK(!q.has_edns || q.edns_payload >= DNS_UDP_MINLEN);
	return 0;
}
