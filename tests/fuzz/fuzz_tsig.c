/*
 * Fuzz target: TSIG. The first byte picks the parser: 0 the key file parser on the rest;
 * otherwise the rest is a message: finding its TSIG, verifying it as a request against a
 * keyring that holds the seeds' key (so good MACs reach the signing path), signing the
 * answer into the room dns_tsig_rr_len() promised, and verifying the message as the answer
 * to a request of ours.
 */
#include <string.h>

#include "dns/tsig.h"
#include "fuzz.h"

static int key_cb(void *arg, const char *name, const char *alg, const char *secret, unsigned line)
{
	(void)line;
	FUZZ_CHECK(name[0] && alg[0] && secret[0]);
	uint8_t out[DNS_TSIG_SECRET_MAX];
	dns_tsig_alg_t a;
	(void)dns_tsig_alg_from_str(alg, &a);
	(void)dns_tsig_secret_decode(secret, out, sizeof(out));
	(*(unsigned *)arg)++;
	return 0;
}

static dns_tsig_key_t seed_key(void)
{
	/* transfer-key., hmac-sha256, secret bytes 0..31: the key of the seed messages. */
	dns_tsig_key_t k;
	memset(&k, 0, sizeof(k));
	memcpy(k.name, "\x0ctransfer-key", 14);
	k.name_len = 14;
	k.alg = DNS_TSIG_HMAC_SHA256;
	k.secret_len = 32;
	for (int i = 0; i < 32; i++)
		k.secret[i] = (uint8_t)i;
	return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] == 0) {
		char err[256];
		unsigned n = 0;
		int ret = dns_tsig_parse_keyfile((const char *)data + 1, size - 1, key_cb, &n, err,
		                                 sizeof(err));
		FUZZ_CHECK(ret == 0 || memchr(err, '\0', sizeof(err)) != NULL);
		return 0;
	}
	const uint8_t *msg = data + 1;
	size_t len = size - 1;
	static const uint64_t now = 1700000000;
	dns_tsig_key_t key = seed_key();
	dns_tsig_keyring_t ring = {&key, 1};
	dns_tsig_rr_t rr;
	int found = dns_tsig_find(msg, len, &rr);
	FUZZ_CHECK(found >= -1 && found <= 1);
	if (found == 1) {
		FUZZ_CHECK(rr.offset >= 12 && rr.offset < len);
		FUZZ_CHECK(rr.mac + rr.mac_len <= msg + len &&
		           rr.other + rr.other_len <= msg + len);
		dns_tsig_ctx_t ctx;
		uint8_t rc = dns_tsig_verify_request(&ring, msg, &rr, now, &ctx);
		FUZZ_CHECK(rc == 0 || rc == 1 || rc == 9);
		if (rc != 1) {
			static uint8_t answer[65535];
			memcpy(answer, msg, rr.offset);
			answer[10] = answer[11] = 0;
			size_t room = dns_tsig_rr_len(&ctx);
			size_t out = dns_tsig_sign(&ctx, answer, rr.offset, sizeof(answer), now);
			FUZZ_CHECK(out == 0 || out == rr.offset + room);
		}
	}
	uint8_t req[512] = {0x12, 0x34, 0x01, 0x00, 0,   1, 0, 0, 0, 0, 0,
	                    0,    3,    'w',  'w',  'w', 0, 0, 1, 0, 1};
	dns_tsig_ctx_t cli;
	if (dns_tsig_sign_request(&key, &cli, req, 21, sizeof(req), now) > 0) {
		int ret = dns_tsig_verify_response(&cli, msg, len, true, now);
		FUZZ_CHECK(ret >= -1 && ret <= DNS_TSIG_ERR_BADTRUNC);
	}
	return 0;
}
