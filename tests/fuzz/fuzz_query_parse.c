/*
 * Fuzz target: query parsing (dns_query_parse) and the EDNS options it takes. Besides sanitizer
 * findings it checks what the parser promises about an accepted query: a valid lowercase name
 * inside the packet, and an ECS option only as RFC 7871 allows it in a query, which the
 * response's option writer echoes so that it parses back the same.
 */
#include <string.h>

#include "dns/dname.h"
#include "dns/pkt.h"
#include "fuzz.h"

static void check_ecs(const dns_query_t *q)
{
	const dns_ecs_t *e = &q->ecs;
	FUZZ_CHECK(q->has_edns);
	FUZZ_CHECK(e->family == DNS_ECS_FAMILY_IPV4 || e->family == DNS_ECS_FAMILY_IPV6);
	FUZZ_CHECK(e->source_len <= (e->family == DNS_ECS_FAMILY_IPV4 ? 32 : 128));
	FUZZ_CHECK(e->scope_len == 0);
	for (unsigned bit = e->source_len; bit < 128; bit++)
		FUZZ_CHECK(!(e->addr[bit / 8] & (0x80 >> (bit % 8))));
	uint8_t opt[4 + DNS_ECS_MAXLEN];
	size_t len = dns_ecs_write(e, 0, opt);
	FUZZ_CHECK(len == dns_ecs_option_len(e) && len >= 8 && len <= sizeof(opt));
	FUZZ_CHECK(opt[0] == 0 && opt[1] == DNS_EDNS_OPT_ECS &&
	           (size_t)(opt[2] << 8 | opt[3]) == len - 4);
	dns_ecs_t back;
	FUZZ_CHECK(dns_ecs_parse(opt + 4, (uint16_t)(len - 4), &back) == 0);
	FUZZ_CHECK(back.family == e->family && back.source_len == e->source_len &&
	           memcmp(back.addr, e->addr, sizeof(back.addr)) == 0);
}

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
	if (q.has_ecs)
		check_ecs(&q);
	return 0;
}
