/*
 * TSIG: the vectors come from dnspython's dns.tsig (the reference implementation of the
 * integration tests), the rest are round trips between our client and server halves.
 */
#include <stdlib.h>
#include <string.h>

#include "dns/dname.h"
#include "dns/tsig.h"
#include "dns/wire.h"
#include "unit.h"

#define T0 1700000000ULL

/* dnspython 2.3: www.example.com A, id 0x1234, key transfer-key. hmac-sha256, secret 0..31. */
static const char query_hex[] =
    "12340100000100000000000103777777076578616d706c6503636f6d00000100010c7472616e736665722d6b"
    "65790000fa00ff00000000003d0b686d61632d7368613235360000006553f100012c0020bc3cc7e4f56aeca4"
    "5b87a9037bf7ba63edf2c48f7678f6816fdb237624c6ec2a123400000000";
/* Its response (QR AA RD, no records) signed by dnspython at the same time. */
static const char resp_hex[] =
    "12348500000100000000000103777777076578616d706c6503636f6d00000100010c7472616e736665722d6b"
    "65790000fa00ff00000000003d0b686d61632d7368613235360000006553f100012c00202bd25df49d58fac4"
    "719bcca9f1d2c427ea9fa4d802b86e48a54f6e4e7fdf9444123400000000";

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = strlen(h) / 2;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		sscanf(h + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
	return n;
}

static dns_tsig_key_t make_key(const char *name, dns_tsig_alg_t alg, uint8_t fill)
{
	dns_tsig_key_t k;
	memset(&k, 0, sizeof(k));
	int n = dname_from_str(name, k.name);
	k.name_len = (uint8_t)(n > 0 ? n : 0);
	k.alg = alg;
	k.secret_len = 32;
	for (int i = 0; i < 32; i++)
		k.secret[i] = (uint8_t)(fill + i);
	return k;
}

/* A query for www.example.com A with id @p id. */
static size_t make_query(uint8_t *buf, uint16_t id)
{
	static const uint8_t q[] = {0,   0,   1,   0,   0,   1,   0,   0,   0,   0,   0,
	                            0,   3,   'w', 'w', 'w', 7,   'e', 'x', 'a', 'm', 'p',
	                            'l', 'e', 3,   'c', 'o', 'm', 0,   0,   1,   0,   1};
	memcpy(buf, q, sizeof(q));
	wire_write_u16(buf, id);
	return sizeof(q);
}

static void test_dnspython_vectors(void)
{
	uint8_t msg[512];
	size_t len = unhex(query_hex, msg);
	dns_tsig_key_t key = make_key("transfer-key", DNS_TSIG_HMAC_SHA256, 0);
	dns_tsig_keyring_t ring = {&key, 1};
	dns_tsig_rr_t rr;
	CHECK(dns_tsig_find(msg, len, &rr) == 1, "dnspython's TSIG found");
	CHECK(rr.alg_known && rr.alg == DNS_TSIG_HMAC_SHA256 && rr.mac_len == 32 &&
	          rr.time_signed == T0 && rr.fudge == 300 && rr.orig_id == 0x1234,
	      "fields parsed");
	dns_tsig_ctx_t ctx;
	CHECK(dns_tsig_verify_request(&ring, msg, &rr, T0 + 10, &ctx) == DNS_RCODE_NOERROR,
	      "dnspython's signature verifies");

	/* Our signed answer must be byte for byte dnspython's. */
	uint8_t ans[512];
	memcpy(ans, msg, rr.offset);
	wire_write_u16(ans + 2, 0x8500);
	wire_write_u16(ans + 10, 0);
	CHECK(dns_tsig_rr_len(&ctx) == len - rr.offset, "reserved length %zu",
	      dns_tsig_rr_len(&ctx));
	size_t alen = dns_tsig_sign(&ctx, ans, rr.offset, sizeof(ans), T0);
	uint8_t want[512];
	size_t wlen = unhex(resp_hex, want);
	CHECK(alen == wlen && memcmp(ans, want, wlen) == 0, "answer equals dnspython's");

	/* One flipped bit anywhere before the MAC is BADSIG, answered unsigned. */
	msg[20] ^= 0x20;
	CHECK(dns_tsig_verify_request(&ring, msg, &rr, T0, &ctx) == DNS_RCODE_NOTAUTH &&
	          ctx.error == DNS_TSIG_ERR_BADSIG,
	      "changed message is BADSIG");
	msg[20] ^= 0x20;
	wire_write_u16(ans + 10, 0);
	size_t blen = dns_tsig_sign(&ctx, ans, rr.offset, sizeof(ans), T0);
	dns_tsig_rr_t brr;
	CHECK(blen > 0 && dns_tsig_find(ans, blen, &brr) == 1 && brr.mac_len == 0 &&
	          brr.error == DNS_TSIG_ERR_BADSIG,
	      "BADSIG answer unsigned");

	dns_tsig_key_t other = make_key("transfer-key", DNS_TSIG_HMAC_SHA256, 1);
	dns_tsig_keyring_t ring2 = {&other, 1};
	CHECK(dns_tsig_verify_request(&ring2, msg, &rr, T0, &ctx) == DNS_RCODE_NOTAUTH &&
	          ctx.error == DNS_TSIG_ERR_BADSIG,
	      "wrong secret is BADSIG");
	dns_tsig_key_t wrongalg = make_key("transfer-key", DNS_TSIG_HMAC_SHA512, 0);
	dns_tsig_keyring_t ring3 = {&wrongalg, 1};
	CHECK(dns_tsig_verify_request(&ring3, msg, &rr, T0, &ctx) == DNS_RCODE_NOTAUTH &&
	          ctx.error == DNS_TSIG_ERR_BADKEY && ctx.key == NULL,
	      "other algorithm is BADKEY");
	dns_tsig_key_t unknown = make_key("nokey", DNS_TSIG_HMAC_SHA256, 0);
	dns_tsig_keyring_t ring4 = {&unknown, 1};
	CHECK(dns_tsig_verify_request(&ring4, msg, &rr, T0, &ctx) == DNS_RCODE_NOTAUTH &&
	          ctx.error == DNS_TSIG_ERR_BADKEY,
	      "unknown key is BADKEY");
	CHECK(dns_tsig_verify_request(&ring, msg, &rr, T0 + 301, &ctx) == DNS_RCODE_NOTAUTH &&
	          ctx.error == DNS_TSIG_ERR_BADTIME,
	      "time outside fudge is BADTIME");
	CHECK(dns_tsig_verify_request(&ring, msg, &rr, T0 - 300, &ctx) == DNS_RCODE_NOERROR,
	      "time at the edge of the fudge is good");
}

/* Client signs, server verifies and answers a transfer of @p n messages, client verifies. */
static void round_trip(dns_tsig_alg_t alg, unsigned n)
{
	dns_tsig_key_t key = make_key("k.example", alg, 7);
	dns_tsig_key_t decoy = make_key("decoy", DNS_TSIG_HMAC_SHA1, 9);
	dns_tsig_key_t keys[2] = {decoy, key};
	dns_tsig_keyring_t ring = {keys, 2};
	uint8_t msg[1024];
	size_t len = make_query(msg, 0x4242);
	dns_tsig_ctx_t cli, srv;
	len = dns_tsig_sign_request(&key, &cli, msg, len, sizeof(msg), T0);
	dns_tsig_rr_t rr;
	CHECK(len > 0 && dns_tsig_find(msg, len, &rr) == 1, "alg %d: request signed", alg);
	CHECK(rr.mac_len == dns_tsig_mac_len(alg), "alg %d: full MAC", alg);
	CHECK(dns_tsig_verify_request(&ring, msg, &rr, T0 + 1, &srv) == DNS_RCODE_NOERROR,
	      "alg %d: request verifies", alg);
	for (unsigned i = 0; i < n; i++) {
		uint8_t ans[1024];
		size_t alen = make_query(ans, 0x4242);
		wire_write_u16(ans + 2, 0x8400);
		size_t room = dns_tsig_rr_len(&srv);
		size_t slen = dns_tsig_sign(&srv, ans, alen, sizeof(ans), T0 + 2 + i);
		CHECK(slen == alen + room, "alg %d msg %u: reserved room is exact", alg, i);
		int ret = dns_tsig_verify_response(&cli, ans, slen, i + 1 == n, T0 + 2);
		CHECK(ret == 0, "alg %d msg %u: answer verifies (%d)", alg, i, ret);
		if (i == 1) {
			/* A replayed earlier message does not verify in place of the next. */
			dns_tsig_ctx_t copy = cli;
			CHECK(dns_tsig_verify_response(&copy, ans, slen, false, T0 + 2) ==
			          DNS_TSIG_ERR_BADSIG,
			      "alg %d: replayed message rejected", alg);
		}
	}
	/* An unsigned message mid-transfer is refused (see tsig.h). */
	uint8_t plain[512];
	size_t plen = make_query(plain, 0x4242);
	CHECK(dns_tsig_verify_response(&cli, plain, plen, true, T0) == -1,
	      "alg %d: unsigned last message refused", alg);
}

static void test_round_trips(void)
{
	for (int a = 0; a < DNS_TSIG_ALG_COUNT; a++)
		round_trip((dns_tsig_alg_t)a, 5);
}

static void test_badtime_answer(void)
{
	dns_tsig_key_t key = make_key("k", DNS_TSIG_HMAC_SHA384, 3);
	dns_tsig_keyring_t ring = {&key, 1};
	uint8_t msg[512];
	dns_tsig_ctx_t cli, srv;
	size_t len = dns_tsig_sign_request(&key, &cli, msg, make_query(msg, 1), sizeof(msg), T0);
	dns_tsig_rr_t rr;
	CHECK(dns_tsig_find(msg, len, &rr) == 1, "signed");
	CHECK(dns_tsig_verify_request(&ring, msg, &rr, T0 + 1000, &srv) == DNS_RCODE_NOTAUTH &&
	          srv.error == DNS_TSIG_ERR_BADTIME,
	      "BADTIME");
	uint8_t ans[512];
	size_t alen = make_query(ans, 1);
	wire_write_u16(ans + 2, 0x8009);
	size_t slen = dns_tsig_sign(&srv, ans, alen, sizeof(ans), T0 + 1000);
	dns_tsig_rr_t arr;
	CHECK(slen == alen + dns_tsig_rr_len(&srv) && dns_tsig_find(ans, slen, &arr) == 1,
	      "signed");
	CHECK(arr.error == DNS_TSIG_ERR_BADTIME && arr.mac_len == 48 && arr.time_signed == T0 &&
	          arr.other_len == 6,
	      "BADTIME answer: signed, request's time, ours as other data");
	uint64_t theirs = (uint64_t)wire_read_u16(arr.other) << 32 | wire_read_u32(arr.other + 2);
	CHECK(theirs == T0 + 1000, "server time %llu", (unsigned long long)theirs);
	CHECK(dns_tsig_verify_response(&cli, ans, slen, true, T0) == DNS_TSIG_ERR_BADTIME,
	      "client sees BADTIME with a good MAC");
}

/* Rewrites the request's MAC to its first @p keep bytes. */
static size_t truncate_mac(uint8_t *msg, size_t len, const dns_tsig_rr_t *rr, uint16_t keep)
{
	size_t mac_at = (size_t)(rr->mac - msg);
	size_t cut = rr->mac_len - keep;
	memmove(msg + mac_at + keep, msg + mac_at + rr->mac_len, len - mac_at - rr->mac_len);
	wire_write_u16(msg + mac_at - 2, keep);
	size_t rdlen_at = rr->offset + rr->key_name_len + 8;
	wire_write_u16(msg + rdlen_at, (uint16_t)(wire_read_u16(msg + rdlen_at) - cut));
	return len - cut;
}

static void test_truncated_mac(void)
{
	dns_tsig_key_t key = make_key("k", DNS_TSIG_HMAC_SHA256, 5);
	dns_tsig_keyring_t ring = {&key, 1};
	const uint16_t keeps[] = {16, 20, 15, 9};
	const uint8_t want[] = {DNS_RCODE_NOERROR, DNS_RCODE_NOERROR, DNS_RCODE_FORMERR,
	                        DNS_RCODE_FORMERR};
	for (size_t i = 0; i < sizeof(keeps) / sizeof(keeps[0]); i++) {
		uint8_t msg[512];
		dns_tsig_ctx_t cli, srv;
		size_t len =
		    dns_tsig_sign_request(&key, &cli, msg, make_query(msg, 9), sizeof(msg), T0);
		dns_tsig_rr_t rr;
		CHECK(dns_tsig_find(msg, len, &rr) == 1, "signed");
		len = truncate_mac(msg, len, &rr, keeps[i]);
		CHECK(dns_tsig_find(msg, len, &rr) == 1 && rr.mac_len == keeps[i],
		      "truncated parses");
		uint8_t rc = dns_tsig_verify_request(&ring, msg, &rr, T0, &srv);
		CHECK(rc == want[i], "MAC of %u bytes: rcode %u", keeps[i], rc);
	}
}

static void test_malformed(void)
{
	dns_tsig_key_t key = make_key("k", DNS_TSIG_HMAC_SHA256, 5);
	uint8_t msg[512];
	dns_tsig_ctx_t cli;
	dns_tsig_rr_t rr;
	size_t base = make_query(msg, 3);
	CHECK(dns_tsig_find(msg, base, &rr) == 0, "unsigned message has none");
	size_t len = dns_tsig_sign_request(&key, &cli, msg, base, sizeof(msg), T0);
	for (size_t cut = base; cut < len; cut++)
		CHECK(dns_tsig_find(msg, cut, &rr) == -1, "cut at %zu malformed", cut);

	/* A TSIG followed by another record: not last. */
	uint8_t two[600];
	memcpy(two, msg, len);
	static const uint8_t a_rr[] = {0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4};
	memcpy(two + len, a_rr, sizeof(a_rr));
	wire_write_u16(two + 10, 2);
	CHECK(dns_tsig_find(two, len + sizeof(a_rr), &rr) == -1, "TSIG not last");

	/* Class must be ANY. */
	uint8_t bad[512];
	memcpy(bad, msg, len);
	wire_write_u16(bad + base + 3 + 2, DNS_CLASS_IN); /* after the owner "k" */
	CHECK(dns_tsig_find(bad, len, &rr) == -1, "class IN refused");

	/* A TSIG in the answer section. */
	memcpy(bad, msg, len);
	wire_write_u16(bad + 6, 1);
	wire_write_u16(bad + 10, 0);
	CHECK(dns_tsig_find(bad, len, &rr) == -1, "TSIG in answer section");

	/* Rdata longer than the MAC says. */
	memcpy(bad, msg, len);
	dns_tsig_find(msg, len, &rr);
	size_t mac_at = (size_t)(rr.mac - msg);
	wire_write_u16(bad + mac_at - 2, 200);
	CHECK(dns_tsig_find(bad, len, &rr) == -1, "MAC size beyond rdata");

	/* Unknown algorithm: parsed, answered BADKEY. */
	memcpy(bad, msg, len);
	dns_tsig_find(msg, len, &rr);
	size_t alg_at = rr.offset + rr.key_name_len + 10;
	bad[alg_at + 1] = 'x';
	CHECK(dns_tsig_find(bad, len, &rr) == 1 && !rr.alg_known, "unknown algorithm parses");
	dns_tsig_keyring_t ring = {&key, 1};
	dns_tsig_ctx_t srv;
	CHECK(dns_tsig_verify_request(&ring, bad, &rr, T0, &srv) == DNS_RCODE_NOTAUTH &&
	          srv.error == DNS_TSIG_ERR_BADKEY,
	      "unknown algorithm is BADKEY");
	CHECK(dns_tsig_find(msg, 5, &rr) == -1, "short header");
}

typedef struct {
	int n;
	char names[4][64];
	char algs[4][32];
	char secrets[4][128];
	unsigned lines[4];
} keys_seen_t;

static int key_cb(void *arg, const char *name, const char *alg, const char *secret, unsigned line)
{
	keys_seen_t *k = arg;
	if (k->n >= 4)
		return -1;
	snprintf(k->names[k->n], 64, "%s", name);
	snprintf(k->algs[k->n], 32, "%s", alg);
	snprintf(k->secrets[k->n], 128, "%s", secret);
	k->lines[k->n++] = line;
	return 0;
}

static void test_keyfile(void)
{
	/* tsig-keygen's output, twice, with comments. */
	const char *bind = "# generated\n"
	                   "key \"transfer-key\" {\n"
	                   "\talgorithm hmac-sha256;\n"
	                   "\tsecret \"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\";\n"
	                   "};\n"
	                   "// second\n"
	                   "key other. { algorithm hmac-sha512; secret \"AQID\"; };\n";
	keys_seen_t k = {0};
	char err[128];
	CHECK(dns_tsig_parse_keyfile(bind, strlen(bind), key_cb, &k, err, sizeof(err)) == 0,
	      "BIND key file parses: %s", err);
	CHECK(k.n == 2 && strcmp(k.names[0], "transfer-key") == 0 &&
	          strcmp(k.algs[0], "hmac-sha256") == 0 &&
	          strcmp(k.secrets[0], "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=") == 0 &&
	          k.lines[0] == 2 && strcmp(k.names[1], "other.") == 0 && k.lines[1] == 7,
	      "BIND keys: %d %s %u", k.n, k.names[0], k.lines[0]);

	/* keymgr -t's output. */
	const char *knot = "# hmac-sha256:knot-key:AQID\n"
	                   "key:\n"
	                   "  - id: knot-key\n"
	                   "    algorithm: hmac-sha256\n"
	                   "    secret: AQID\n"
	                   "  - id: \"second\"\n"
	                   "    algorithm: hmac-sha1\n"
	                   "    secret: BAUG\n";
	memset(&k, 0, sizeof(k));
	CHECK(dns_tsig_parse_keyfile(knot, strlen(knot), key_cb, &k, err, sizeof(err)) == 0,
	      "Knot key file parses: %s", err);
	CHECK(k.n == 2 && strcmp(k.names[0], "knot-key") == 0 &&
	          strcmp(k.secrets[0], "AQID") == 0 && k.lines[0] == 3 &&
	          strcmp(k.names[1], "second") == 0 && strcmp(k.algs[1], "hmac-sha1") == 0 &&
	          k.lines[1] == 6,
	      "Knot keys: %d %s %u", k.n, k.names[0], k.lines[0]);

	static const struct {
		const char *text;
		const char *err;
	} bad[] = {
	    {"key \"a\" { algorithm hmac-sha256; };\n", "line 1:"},
	    {"\n\nkey \"a\" { algorithm hmac-sha256 secret \"AQID\"; };\n", "line 3:"},
	    {"key \"a\" { algorithm hmac-sha256; secret \"AQID\"; }\n", "line 2:"},
	    {"zone \"a\" { };\n", "line 1:"},
	    {"key \"a { algorithm x; };\n", "line 1:"},
	    {"key:\n  - id: a\n    algorithm: hmac-sha256\n", "line 2:"},
	    {"key:\n  - id: a\n    colour: red\n", "line 3:"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&k, 0, sizeof(k));
		err[0] = '\0';
		int ret = dns_tsig_parse_keyfile(bad[i].text, strlen(bad[i].text), key_cb, &k, err,
		                                 sizeof(err));
		CHECK(ret == -1 && strncmp(err, bad[i].err, strlen(bad[i].err)) == 0,
		      "bad file %zu: %d '%s'", i, ret, err);
	}
}

static void test_secret_and_algs(void)
{
	uint8_t out[DNS_TSIG_SECRET_MAX];
	CHECK(dns_tsig_secret_decode("AQID", out, sizeof(out)) == 3 && out[2] == 3, "AQID");
	CHECK(dns_tsig_secret_decode("AQI=", out, sizeof(out)) == 2, "padding");
	CHECK(dns_tsig_secret_decode("AQ==", out, sizeof(out)) == 1, "double padding");
	CHECK(dns_tsig_secret_decode(" AQ\nID ", out, sizeof(out)) == 3, "whitespace");
	CHECK(dns_tsig_secret_decode("AQI", out, sizeof(out)) == -1, "length not a multiple of 4");
	CHECK(dns_tsig_secret_decode("AQ!D", out, sizeof(out)) == -1, "bad character");
	CHECK(dns_tsig_secret_decode("A=ID", out, sizeof(out)) == -1, "padding inside");
	CHECK(dns_tsig_secret_decode("", out, sizeof(out)) == -1, "empty");
	CHECK(dns_tsig_secret_decode("AQID", out, 2) == -1, "too long for the buffer");

	dns_tsig_alg_t a;
	CHECK(dns_tsig_alg_from_str("HMAC-SHA256.", &a) && a == DNS_TSIG_HMAC_SHA256, "sha256");
	CHECK(dns_tsig_alg_from_str("hmac-sha1", &a) && a == DNS_TSIG_HMAC_SHA1, "sha1");
	CHECK(!dns_tsig_alg_from_str("hmac-md5", &a), "md5 not supported");
	CHECK(!dns_tsig_alg_from_str("hmac-sha2566", &a), "no prefix match");
	size_t wl;
	const uint8_t *w = dns_tsig_alg_wire(DNS_TSIG_HMAC_SHA512, &wl);
	CHECK(wl == 13 && memcmp(w, "\x0bhmac-sha512", 13) == 0, "wire name");
	CHECK(dns_tsig_mac_len(DNS_TSIG_HMAC_SHA224) == 28, "sha224 length");
}

/* A transfer whose server signs only some messages (NSD signs every 100th or so). */
static void test_unsigned_run(void)
{
	dns_tsig_key_t key = make_key("xfr", DNS_TSIG_HMAC_SHA256, 11);
	dns_tsig_keyring_t ring = {&key, 1};
	uint8_t req[512];
	dns_tsig_ctx_t cli, srv;
	size_t rlen = dns_tsig_sign_request(&key, &cli, req, make_query(req, 77), sizeof(req), T0);
	dns_tsig_rr_t rr;
	CHECK(dns_tsig_find(req, rlen, &rr) == 1 &&
	          dns_tsig_verify_request(&ring, req, &rr, T0, &srv) == DNS_RCODE_NOERROR,
	      "request verifies");
	uint8_t m[4][128];
	size_t len[4];
	for (int i = 0; i < 4; i++) {
		len[i] = make_query(m[i], 77);
		wire_write_u16(m[i] + 2, 0x8400);
		m[i][len[i] - 6] = (uint8_t)('0' + i); /* a different name in each */
	}
	len[0] = dns_tsig_sign(&srv, m[0], len[0], sizeof(m[0]), T0);
	/* m[3]'s MAC covers m[1] and m[2] as sent: sign the three back to back, move the TSIG. */
	uint8_t cat[512];
	size_t clen = 0;
	for (int i = 1; i < 4; i++) {
		memcpy(cat + clen, m[i], len[i]);
		clen += len[i];
	}
	size_t slen = dns_tsig_sign(&srv, cat, clen, sizeof(cat), T0);
	CHECK(slen > clen, "run signed");
	memcpy(m[3] + len[3], cat + clen, slen - clen);
	len[3] += slen - clen;
	wire_write_u16(m[3] + 10, 1);

	CHECK(dns_tsig_verify_response(&cli, m[0], len[0], false, T0) == 0, "first signed");
	dns_tsig_ctx_t start = cli;
	CHECK(dns_tsig_verify_response(&cli, m[1], len[1], false, T0) == 0, "unsigned 1 allowed");
	CHECK(dns_tsig_verify_response(&cli, m[2], len[2], false, T0) == 0, "unsigned 2 allowed");
	CHECK(dns_tsig_verify_response(&cli, m[3], len[3], true, T0) == -1,
	      "signed after unsigned needs _after");
	const uint8_t *run[2] = {m[1], m[2]};
	size_t run_len[2] = {len[1], len[2]};
	dns_tsig_ctx_t copy = cli;
	CHECK(dns_tsig_verify_response_after(&copy, run, run_len, 1, m[3], len[3], T0) == -1,
	      "run must be the unsigned messages seen");
	copy = cli;
	m[2][len[2] - 6] ^= 1;
	CHECK(dns_tsig_verify_response_after(&copy, run, run_len, 2, m[3], len[3], T0) ==
	          DNS_TSIG_ERR_BADSIG,
	      "a changed unsigned message fails the MAC");
	m[2][len[2] - 6] ^= 1;
	CHECK(dns_tsig_verify_response_after(&cli, run, run_len, 2, m[3], len[3], T0) == 0,
	      "MAC over the run verifies");
	CHECK(cli.unsigned_run == 0 && cli.messages == 3, "state after the run");

	/* At most 99 unsigned in a row; the first answer and the last must be signed. */
	for (int i = 0; i < 99; i++)
		CHECK(dns_tsig_verify_response(&start, m[1], len[1], false, T0) == 0, "unsigned %d",
		      i);
	CHECK(dns_tsig_verify_response(&start, m[1], len[1], false, T0) == -1, "100th unsigned");
	dns_tsig_ctx_t fresh;
	dns_tsig_sign_request(&key, &fresh, req, make_query(req, 77), sizeof(req), T0);
	CHECK(dns_tsig_verify_response(&fresh, m[1], len[1], false, T0) == -1,
	      "unsigned first answer");
}

int main(void)
{
	test_dnspython_vectors();
	test_round_trips();
	test_badtime_answer();
	test_unsigned_run();
	test_truncated_mac();
	test_malformed();
	test_keyfile();
	test_secret_and_algs();
	return unit_finish("dns_tsig");
}
