/*
 * Fuzz target: the forwarder cache's reply parser and its answers (fwd_cache_store, then
 * fwd_cache_answer from what got in). Input: one control byte (bit 0 DO, bit 1 CD, bit 2 the
 * client has EDNS, bit 3 upper-case the client's name), then the upstream reply. The query
 * the reply is checked against is its own question, so most inputs reach the record walk.
 * Besides sanitizer findings it checks what an answer promises: the client's ID and question
 * bytes, QR set, within the size asked for.
 */
#include <string.h>
#include <urcu.h>

#include "dns/pkt.h"
#include "dns/wire.h"
#include "fuzz.h"
#include "fwd/cache.h"

/* The reply's question turned into a client query (QR cleared, no records), parsed. */
static bool make_query(const uint8_t *reply, size_t len, uint8_t ctl, uint8_t *buf, dns_query_t *q)
{
	if (len < DNS_HEADER_LEN)
		return false;
	size_t pos = DNS_HEADER_LEN;
	while (pos < len && reply[pos] != 0 && reply[pos] < 64)
		pos += (size_t)reply[pos] + 1;
	pos += 5;
	if (pos > len || pos > 300)
		return false;
	memcpy(buf, reply, pos);
	wire_write_u16(buf + 2, (uint16_t)(DNS_FLAG_RD | ((ctl & 2) ? DNS_FLAG_CD : 0)));
	wire_write_u16(buf + 4, 1);
	memset(buf + 6, 0, 6);
	if (ctl & 8)
		for (size_t i = DNS_HEADER_LEN; i < pos - 4; i++)
			if (buf[i] >= 'a' && buf[i] <= 'z')
				buf[i] = (uint8_t)(buf[i] - 32);
	if (ctl & 5) {
		wire_write_u16(buf + 10, 1);
		const uint8_t opt[11] = {0, 0, 41, 0x10, 0, 0, 0, (ctl & 1) ? 0x80 : 0, 0, 0, 0};
		memcpy(buf + pos, opt, sizeof(opt));
		pos += sizeof(opt);
	}
	return dns_query_parse(buf, pos, q) == DNS_QUERY_OK;
}

static void check_answer(const fwd_cache_t *c, const dns_query_t *q, uint64_t now, bool stale,
                         uint16_t udp)
{
	static uint8_t resp[65536];
	size_t n = 1;
	fwd_cache_result_t res =
	    fwd_cache_answer(c, q, now, stale, udp, resp, sizeof(resp), &n, NULL);
	if (res == FWD_CACHE_MISS || res == FWD_CACHE_STALE_AVAILABLE) {
		FUZZ_CHECK(n == 0);
		return;
	}
	FUZZ_CHECK(n >= DNS_HEADER_LEN + q->question_len);
	FUZZ_CHECK(udp == 0 || n <= udp);
	FUZZ_CHECK(wire_read_u16(resp) == q->id);
	FUZZ_CHECK(wire_read_u16(resp + 2) & DNS_FLAG_QR);
	FUZZ_CHECK(memcmp(resp + DNS_HEADER_LEN, q->question, q->question_len) == 0);
	FUZZ_CHECK(!(res == FWD_CACHE_STALE) || stale);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool registered;
	if (!registered) {
		rcu_register_thread();
		registered = true;
	}
	if (size < 1)
		return 0;
	uint8_t ctl = data[0];
	const uint8_t *reply = data + 1;
	size_t len = size - 1;
	uint8_t qbuf[320];
	dns_query_t q;
	if (!make_query(reply, len, ctl, qbuf, &q))
		return 0;
	fwd_cache_opts_t o;
	fwd_cache_opts_default(&o);
	o.max_bytes = 256 * 1024;
	o.min_ttl = ctl & 0x10 ? 30 : 0;
	fwd_cache_t *c = NULL;
	FUZZ_CHECK(fwd_cache_new(&o, &c) == 0);
	int ret = fwd_cache_store(c, &q, reply, len, 1000);
	fwd_cache_stats_t st;
	fwd_cache_stats(c, &st);
	FUZZ_CHECK(st.entries == (ret == 0 ? 1u : 0u));
	FUZZ_CHECK(st.bytes <= st.max_bytes);
	rcu_read_lock();
	check_answer(c, &q, 1000, false, 512);
	check_answer(c, &q, 1000, false, 0);
	check_answer(c, &q, 5000, false, 1232);
	check_answer(c, &q, 1000 + 86400000ull, true, 1232);
	rcu_read_unlock();
	fwd_cache_sweep(c, UINT64_MAX / 2, 0);
	fwd_cache_stats(c, &st);
	FUZZ_CHECK(st.entries == 0);
	fwd_cache_free(c);
	return 0;
}
