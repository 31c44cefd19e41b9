/* Unit tests of src/dns/cookie.c: SipHash-2-4, RFC 9018 server cookies, validation windows. */
#include <string.h>

#include "base/compiler.h"
#include "dns/cookie.h"
#include "dns/pkt.h"
#include "unit.h"

static void hex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		sscanf(s + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
}

/* The reference implementation's vectors: key 00..0f, messages 00, 00 01, ... (vectors.h). */
static void test_siphash(void)
{
	static const struct {
		size_t len;
		uint64_t want; /* the output bytes read little-endian */
	} rows[] =
	    {
	        {0, 0x726fdb47dd0e0e31ULL},  {1, 0x74f839c593dc67fdULL},
	        {7, 0xab0200f58b01d137ULL},  {8, 0x93f5f5799a932462ULL},
	        {15, 0xa129ca6149be45e5ULL}, /* the paper's appendix A example */
	        {63, 0x958a324ceb064572ULL},
	    };
	uint8_t key[16], msg[64];
	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 64; i++)
		msg[i] = (uint8_t)i;
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		uint64_t got = dns_siphash24(key, msg, rows[i].len);
		CHECK(got == rows[i].want, "len %zu: %016llx, want %016llx", rows[i].len,
		      (unsigned long long)got, (unsigned long long)rows[i].want);
	}
}

/* RFC 9018 appendix A: server secret e5e973e5a6b2a43f48e7dc849e37bfcf. */
static void test_rfc9018_examples(void)
{
	static const struct {
		const char *client;
		const char *ip;
		size_t ip_len;
		uint32_t now;
		const char *server;
	} rows[] = {
	    /* A.1 learning a new server cookie, 198.51.100.100 */
	    {"2464c4abcf10c957", "c6336464", 4, 1559731985, "010000005cf79f111f8130c3eee29480"},
	    /* A.2 the same client, a renewed cookie */
	    {"2464c4abcf10c957", "c6336464", 4, 1559734385, "010000005cf7a871d4a564a1442aca77"},
	    /* A.3 another client, 203.0.113.203 */
	    {"fc93fc62807ddb86", "cb0071cb", 4, 1559734700, "010000005cf7a9acf73a7810aca2381e"},
	};
	dns_cookie_secrets_t sec = {.has_previous = false};
	hex("e5e973e5a6b2a43f48e7dc849e37bfcf", sec.secret, 16);
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		uint8_t client[8], ip[16], want[16], got[16];
		hex(rows[i].client, client, 8);
		hex(rows[i].ip, ip, rows[i].ip_len);
		hex(rows[i].server, want, 16);
		dns_cookie_make(sec.secret, client, ip, rows[i].ip_len, rows[i].now, got);
		CHECK(memcmp(got, want, 16) == 0, "A.%zu: server cookie differs", i + 1);
		dns_cookie_t c;
		memcpy(c.client, client, 8);
		memcpy(c.server, want, 16);
		c.server_len = 16;
		CHECK(dns_cookie_check(&sec, &c, ip, rows[i].ip_len, rows[i].now + 10) ==
		          DNS_COOKIE_VALID,
		      "A.%zu: our cookie is not valid", i + 1);
	}
}

static void test_windows(void)
{
	dns_cookie_secrets_t sec = {.has_previous = false};
	memset(sec.secret, 0x11, 16);
	const uint8_t ip[4] = {192, 0, 2, 1}, other_ip[4] = {192, 0, 2, 2};
	const uint32_t t = 1700000000;
	dns_cookie_t c = {.client = {1, 2, 3, 4, 5, 6, 7, 8}, .server_len = 16};
	dns_cookie_make(sec.secret, c.client, ip, 4, t, c.server);
	static const struct {
		int64_t delta; /* now - timestamp */
		dns_cookie_status_t want;
	} rows[] = {
	    {0, DNS_COOKIE_VALID},      {1800, DNS_COOKIE_VALID},     {1801, DNS_COOKIE_STALE},
	    {3600, DNS_COOKIE_STALE},   {3601, DNS_COOKIE_INVALID},   {-300, DNS_COOKIE_VALID},
	    {-301, DNS_COOKIE_INVALID}, {-86400, DNS_COOKIE_INVALID},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		dns_cookie_status_t st =
		    dns_cookie_check(&sec, &c, ip, 4, (uint32_t)(t + rows[i].delta));
		CHECK(st == rows[i].want, "delta %lld: %d, want %d", (long long)rows[i].delta, st,
		      rows[i].want);
	}
	CHECK(dns_cookie_check(&sec, &c, other_ip, 4, t) == DNS_COOKIE_INVALID,
	      "another address's cookie is accepted");
	dns_cookie_t other = c;
	other.client[0] ^= 1;
	CHECK(dns_cookie_check(&sec, &other, ip, 4, t) == DNS_COOKIE_INVALID,
	      "another client cookie is accepted");
	other = c;
	other.server[15] ^= 0x80;
	CHECK(dns_cookie_check(&sec, &other, ip, 4, t) == DNS_COOKIE_INVALID, "a flipped hash bit");
	other = c;
	other.server_len = 8;
	CHECK(dns_cookie_check(&sec, &other, ip, 4, t) == DNS_COOKIE_INVALID, "short cookie");
	other.server_len = 0;
	CHECK(dns_cookie_check(&sec, &other, ip, 4, t) == DNS_COOKIE_NO_SERVER, "client only");

	/* Rollover: a cookie of the previous secret stays valid, answered with a fresh one. */
	dns_cookie_secrets_t rolled = {.has_previous = true};
	memset(rolled.secret, 0x22, 16);
	memcpy(rolled.previous, sec.secret, 16);
	CHECK(dns_cookie_check(&rolled, &c, ip, 4, t) == DNS_COOKIE_STALE, "previous secret");
	rolled.has_previous = false;
	CHECK(dns_cookie_check(&rolled, &c, ip, 4, t) == DNS_COOKIE_INVALID, "forgotten secret");

	uint8_t opt[DNS_COOKIE_OPTION_LEN];
	CHECK(dns_cookie_write(&sec, &c, DNS_COOKIE_VALID, ip, 4, t + 5, opt) == 28, "length");
	CHECK(memcmp(opt + 12, c.server, 16) == 0, "a fresh valid cookie is echoed");
	dns_cookie_write(&rolled, &c, DNS_COOKIE_STALE, ip, 4, t + 5, opt);
	dns_cookie_t back;
	CHECK(dns_cookie_parse(opt + 4, 24, &back) == 0, "parse our own");
	CHECK(dns_cookie_check(&rolled, &back, ip, 4, t + 5) == DNS_COOKIE_VALID, "fresh one");
	CHECK(opt[0] == 0 && opt[1] == 10 && opt[2] == 0 && opt[3] == 24, "option header");
}

static void test_parse(void)
{
	uint8_t buf[41] = {0};
	for (size_t len = 0; len <= 41; len++) {
		dns_cookie_t c;
		bool ok = len == 8 || (len >= 16 && len <= 40);
		CHECK((dns_cookie_parse(buf, len, &c) == 0) == ok, "length %zu", len);
		if (ok)
			CHECK(c.server_len == len - 8, "server length %zu", len);
	}
}

/* A query with a COOKIE option of @p optlen bytes; returns the packet length. */
static size_t make_query(uint8_t *pkt, size_t optlen)
{
	static const uint8_t head[] = {0x12, 0x34, 0x00, 0x00, 0,    1,   0, 0, 0, 0, 0,
	                               1,    4,    't',  'e',  's',  't', 0, 0, 1, 0, 1,
	                               0,    0,    41,   0x04, 0xd0, 0,   0, 0, 0};
	size_t n = sizeof(head);
	memcpy(pkt, head, n);
	pkt[n++] = 0;
	pkt[n++] = (uint8_t)(4 + optlen);
	pkt[n++] = 0;
	pkt[n++] = DNS_EDNS_OPT_COOKIE;
	pkt[n++] = 0;
	pkt[n++] = (uint8_t)optlen;
	for (size_t i = 0; i < optlen; i++)
		pkt[n++] = (uint8_t)(0xa0 + i);
	return n;
}

static void test_query_parse(void)
{
	uint8_t pkt[128];
	dns_query_t q;
	size_t n = make_query(pkt, 8);
	CHECK(dns_query_parse(pkt, n, &q) == DNS_QUERY_OK && q.has_cookie &&
	          q.cookie.server_len == 0 && q.cookie.client[0] == 0xa0,
	      "client cookie");
	n = make_query(pkt, 24);
	CHECK(dns_query_parse(pkt, n, &q) == DNS_QUERY_OK && q.has_cookie &&
	          q.cookie.server_len == 16 && q.cookie.server[0] == 0xa8,
	      "client and server cookie");
	static const size_t bad[] = {0, 7, 9, 15, 41};
	for (size_t i = 0; i < STEER_ARRAY_LEN(bad); i++) {
		n = make_query(pkt, bad[i]);
		CHECK(dns_query_parse(pkt, n, &q) == DNS_QUERY_FORMERR, "length %zu: not FORMERR",
		      bad[i]);
	}
}

static void test_client_ip(void)
{
	static const struct {
		const char *addr; /* NULL: no address */
		size_t len;       /* 0: no cookie */
	} rows[] = {
	    {"192.0.2.7", 4},
	    {"2001:db8::7", 16},
	    {NULL, 0},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		steer_sockaddr_t sa;
		const uint8_t *ip = NULL;
		size_t len = 0;
		if (rows[i].addr)
			CHECK(steer_sockaddr_parse(rows[i].addr, 53, &sa) == 0, "parse %s",
			      rows[i].addr);
		bool ok = dns_cookie_client_ip(rows[i].addr ? &sa : NULL, &ip, &len);
		CHECK(ok == (rows[i].len != 0) && len == rows[i].len, "%s: %zu bytes",
		      rows[i].addr ? rows[i].addr : "none", len);
	}
	steer_sockaddr_t sa;
	const uint8_t *ip = NULL;
	size_t len = 0;
	CHECK(steer_sockaddr_parse("192.0.2.7", 53, &sa) == 0, "parse");
	CHECK(dns_cookie_client_ip(&sa, &ip, &len) && ip[0] == 192 && ip[3] == 7,
	      "the address bytes, network order");
	sa.sa.sa_family = AF_UNIX;
	CHECK(!dns_cookie_client_ip(&sa, &ip, &len), "another family: no cookie");
}

int main(void)
{
	test_siphash();
	test_rfc9018_examples();
	test_windows();
	test_parse();
	test_query_parse();
	test_client_ip();
	return unit_finish("test_dns_cookie");
}
