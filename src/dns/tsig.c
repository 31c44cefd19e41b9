/*
 * TSIG (RFC 8945): finding the record, verifying and signing messages, key files. See tsig.h.
 */
#include "dns/tsig.h"

#include <ctype.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "dns/dname.h"
#include "dns/wire.h"

typedef struct {
	const char *name;
	const char *digest; /* OpenSSL digest name */
	const uint8_t *wire;
	size_t wire_len;
	size_t mac_len;
} alg_info_t;

/* Wire names of the IANA TSIG algorithm registry, lowercase; the NUL is the root label. */
#define W(s) (const uint8_t *)(s), sizeof(s)
static const alg_info_t algs[DNS_TSIG_ALG_COUNT] = {
    [DNS_TSIG_HMAC_SHA1] = {"hmac-sha1", "SHA1", W("\x09hmac-sha1"), 20},
    [DNS_TSIG_HMAC_SHA224] = {"hmac-sha224", "SHA224", W("\x0bhmac-sha224"), 28},
    [DNS_TSIG_HMAC_SHA256] = {"hmac-sha256", "SHA256", W("\x0bhmac-sha256"), 32},
    [DNS_TSIG_HMAC_SHA384] = {"hmac-sha384", "SHA384", W("\x0bhmac-sha384"), 48},
    [DNS_TSIG_HMAC_SHA512] = {"hmac-sha512", "SHA512", W("\x0bhmac-sha512"), 64},
};
#undef W

bool dns_tsig_alg_from_str(const char *name, dns_tsig_alg_t *alg)
{
	size_t n = strlen(name);
	if (n > 0 && name[n - 1] == '.')
		n--;
	for (int i = 0; i < DNS_TSIG_ALG_COUNT; i++) {
		if (strlen(algs[i].name) == n && strncasecmp(algs[i].name, name, n) == 0) {
			*alg = (dns_tsig_alg_t)i;
			return true;
		}
	}
	return false;
}

const uint8_t *dns_tsig_alg_wire(dns_tsig_alg_t alg, size_t *len)
{
	if ((unsigned)alg >= DNS_TSIG_ALG_COUNT)
		alg = DNS_TSIG_HMAC_SHA256;
	*len = algs[alg].wire_len;
	return algs[alg].wire;
}

size_t dns_tsig_mac_len(dns_tsig_alg_t alg)
{
	return (unsigned)alg < DNS_TSIG_ALG_COUNT ? algs[alg].mac_len : 0;
}

const dns_tsig_key_t *dns_tsig_keyring_find(const dns_tsig_keyring_t *ring, const uint8_t *name)
{
	size_t len = dname_len(name);
	for (size_t i = 0; i < ring->n_keys; i++) {
		const dns_tsig_key_t *k = &ring->keys[i];
		if (k->name_len == len && memcmp(k->name, name, len) == 0)
			return k;
	}
	return NULL;
}

int dns_tsig_secret_decode(const char *b64, uint8_t *out, size_t cap)
{
	/* EVP_DecodeBlock wants no whitespace and returns padding as zero bytes. */
	char clean[DNS_TSIG_SECRET_MAX * 2];
	size_t n = 0, pad = 0;
	for (const char *p = b64; *p; p++) {
		if (isspace((unsigned char)*p))
			continue;
		if (n + 1 >= sizeof(clean))
			return -1;
		if (*p == '=')
			pad++;
		else if (pad > 0 || !(isalnum((unsigned char)*p) || *p == '+' || *p == '/'))
			return -1;
		clean[n++] = *p;
	}
	clean[n] = '\0';
	if (n == 0 || n % 4 != 0 || pad > 2)
		return -1;
	unsigned char buf[DNS_TSIG_SECRET_MAX * 2];
	int got = EVP_DecodeBlock(buf, (const unsigned char *)clean, (int)n);
	if (got < 0 || (size_t)got < pad)
		return -1;
	size_t len = (size_t)got - pad;
	if (len == 0 || len > cap)
		return -1;
	memcpy(out, buf, len);
	OPENSSL_cleanse(buf, sizeof(buf));
	return (int)len;
}

/* ---- HMAC */

static EVP_MAC *hmac_impl;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void hmac_fetch(void)
{
	hmac_impl = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

typedef struct {
	EVP_MAC_CTX *c;
} mac_t;

static bool mac_begin(mac_t *m, const dns_tsig_key_t *key)
{
	pthread_once(&hmac_once, hmac_fetch);
	m->c = hmac_impl ? EVP_MAC_CTX_new(hmac_impl) : NULL;
	if (!m->c)
		return false;
	OSSL_PARAM params[2] = {
	    OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)algs[key->alg].digest,
	                                     0),
	    OSSL_PARAM_construct_end(),
	};
	if (!EVP_MAC_init(m->c, key->secret, key->secret_len, params)) {
		EVP_MAC_CTX_free(m->c);
		m->c = NULL;
		return false;
	}
	return true;
}

static void mac_update(mac_t *m, const void *data, size_t len)
{
	if (m->c && len > 0 && !EVP_MAC_update(m->c, data, len)) {
		EVP_MAC_CTX_free(m->c);
		m->c = NULL;
	}
}

static size_t mac_end(mac_t *m, uint8_t out[DNS_TSIG_MAC_MAX])
{
	size_t len = 0;
	if (m->c && !EVP_MAC_final(m->c, out, &len, DNS_TSIG_MAC_MAX))
		len = 0;
	EVP_MAC_CTX_free(m->c);
	m->c = NULL;
	return len;
}

static void mac_u16(mac_t *m, uint16_t v)
{
	uint8_t b[2];
	wire_write_u16(b, v);
	mac_update(m, b, 2);
}

static void mac_u48(mac_t *m, uint64_t v)
{
	uint8_t b[6] = {(uint8_t)(v >> 40), (uint8_t)(v >> 32), (uint8_t)(v >> 24),
	                (uint8_t)(v >> 16), (uint8_t)(v >> 8),  (uint8_t)v};
	mac_update(m, b, 6);
}

/* The message as it was before the TSIG record was added: original ID, ARCOUNT one less. */
static void mac_message(mac_t *m, const uint8_t *msg, size_t tsig_offset, uint16_t orig_id,
                        bool had_tsig)
{
	uint8_t hdr[DNS_HEADER_LEN];
	memcpy(hdr, msg, DNS_HEADER_LEN);
	wire_write_u16(hdr, orig_id);
	if (had_tsig)
		wire_write_u16(hdr + 10, (uint16_t)(wire_read_u16(hdr + 10) - 1));
	mac_update(m, hdr, DNS_HEADER_LEN);
	mac_update(m, msg + DNS_HEADER_LEN, tsig_offset - DNS_HEADER_LEN);
}

typedef struct {
	const uint8_t *key_name;
	size_t key_name_len;
	dns_tsig_alg_t alg;
	uint64_t time_signed;
	uint16_t fudge;
	uint16_t error;
	const uint8_t *other;
	uint16_t other_len;
} tsig_vars_t;

typedef struct {
	const uint8_t *const *msgs;
	const size_t *lens;
	size_t n;
} unsigned_run_t;

/*
 * The MAC of one message (RFC 8945 4.3): the previous MAC if any, the unsigned messages since
 * it (@p run, may be NULL), the message, and all TSIG variables (@p timers_only false) or only
 * the timers (later messages of a transfer).
 */
static size_t compute_mac_run(const dns_tsig_key_t *key, const uint8_t *prev, uint16_t prev_len,
                              const unsigned_run_t *run, const uint8_t *msg, size_t tsig_offset,
                              uint16_t orig_id, bool had_tsig, const tsig_vars_t *v,
                              bool timers_only, uint8_t out[DNS_TSIG_MAC_MAX])
{
	mac_t m;
	if (!mac_begin(&m, key))
		return 0;
	if (prev) {
		mac_u16(&m, prev_len);
		mac_update(&m, prev, prev_len);
	}
	for (size_t i = 0; run && i < run->n; i++)
		mac_update(&m, run->msgs[i], run->lens[i]);
	mac_message(&m, msg, tsig_offset, orig_id, had_tsig);
	if (!timers_only) {
		mac_update(&m, v->key_name, v->key_name_len);
		mac_u16(&m, DNS_CLASS_ANY);
		uint8_t ttl[4] = {0};
		mac_update(&m, ttl, 4);
		size_t alen;
		const uint8_t *aw = dns_tsig_alg_wire(v->alg, &alen);
		mac_update(&m, aw, alen);
	}
	mac_u48(&m, v->time_signed);
	mac_u16(&m, v->fudge);
	if (!timers_only) {
		mac_u16(&m, v->error);
		mac_u16(&m, v->other_len);
		mac_update(&m, v->other, v->other_len);
	}
	return mac_end(&m, out);
}

static size_t compute_mac(const dns_tsig_key_t *key, const uint8_t *prev, uint16_t prev_len,
                          const uint8_t *msg, size_t tsig_offset, uint16_t orig_id, bool had_tsig,
                          const tsig_vars_t *v, bool timers_only, uint8_t out[DNS_TSIG_MAC_MAX])
{
	return compute_mac_run(key, prev, prev_len, NULL, msg, tsig_offset, orig_id, had_tsig, v,
	                       timers_only, out);
}

/* ---- Finding the record */

static bool skip_question(const uint8_t *msg, size_t len, size_t *pos)
{
	uint8_t name[DNS_DNAME_MAXLEN];
	if (dname_unpack(msg, len, pos, name) < 0 || *pos + 4 > len)
		return false;
	*pos += 4;
	return true;
}

static bool parse_tsig_rdata(const uint8_t *rd, uint16_t rdlen, dns_tsig_rr_t *rr)
{
	size_t pos = 0;
	uint8_t alg[DNS_DNAME_MAXLEN];
	/* A buffer of its own: the algorithm name must not be compressed. */
	int alen = dname_unpack_lower(rd, rdlen, &pos, alg);
	if (alen < 0)
		return false;
	rr->alg_known = false;
	for (int i = 0; i < DNS_TSIG_ALG_COUNT; i++) {
		if (algs[i].wire_len == (size_t)alen &&
		    memcmp(algs[i].wire, alg, (size_t)alen) == 0) {
			rr->alg_known = true;
			rr->alg = (dns_tsig_alg_t)i;
		}
	}
	wire_ctx_t c = wire_ctx_init_const(rd + pos, rdlen - pos);
	uint64_t hi = wire_ctx_read_u16(&c);
	rr->time_signed = hi << 32 | wire_ctx_read_u32(&c);
	rr->fudge = wire_ctx_read_u16(&c);
	rr->mac_len = wire_ctx_read_u16(&c);
	rr->mac = c.pos;
	wire_ctx_skip(&c, rr->mac_len);
	rr->orig_id = wire_ctx_read_u16(&c);
	rr->error = wire_ctx_read_u16(&c);
	rr->other_len = wire_ctx_read_u16(&c);
	rr->other = c.pos;
	wire_ctx_skip(&c, rr->other_len);
	return !c.err && wire_ctx_available(&c) == 0;
}

int dns_tsig_find(const uint8_t *msg, size_t len, dns_tsig_rr_t *rr)
{
	if (len < DNS_HEADER_LEN)
		return -1;
	unsigned qd = wire_read_u16(msg + 4);
	unsigned total =
	    (unsigned)wire_read_u16(msg + 6) + wire_read_u16(msg + 8) + wire_read_u16(msg + 10);
	unsigned first_additional = total - wire_read_u16(msg + 10);
	size_t pos = DNS_HEADER_LEN;
	for (unsigned i = 0; i < qd; i++) {
		if (!skip_question(msg, len, &pos))
			return -1;
	}
	for (unsigned i = 0; i < total; i++) {
		size_t start = pos;
		uint8_t owner[DNS_DNAME_MAXLEN];
		int olen = dname_unpack_lower(msg, len, &pos, owner);
		if (olen < 0 || pos + 10 > len)
			return -1;
		uint16_t type = wire_read_u16(msg + pos);
		uint16_t rclass = wire_read_u16(msg + pos + 2);
		uint16_t rdlen = wire_read_u16(msg + pos + 8);
		pos += 10;
		if (pos + rdlen > len)
			return -1;
		if (type == DNS_TYPE_TSIG) {
			/* Only as the last additional record, class ANY (RFC 8945 5.1). */
			if (i != total - 1 || i < first_additional || rclass != DNS_CLASS_ANY)
				return -1;
			rr->offset = start;
			memcpy(rr->key_name, owner, (size_t)olen);
			rr->key_name_len = (uint8_t)olen;
			if (!parse_tsig_rdata(msg + pos, rdlen, rr))
				return -1;
			return pos + rdlen == len ? 1 : -1;
		}
		pos += rdlen;
	}
	return 0;
}

/* ---- Server side */

static size_t min_mac_len(dns_tsig_alg_t alg)
{
	size_t half = (algs[alg].mac_len + 1) / 2;
	return half > 10 ? half : 10;
}

static uint64_t abs_diff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

uint8_t dns_tsig_verify_request(const dns_tsig_keyring_t *ring, const uint8_t *msg,
                                const dns_tsig_rr_t *rr, uint64_t now, dns_tsig_ctx_t *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	memcpy(ctx->key_name, rr->key_name, rr->key_name_len);
	ctx->key_name_len = rr->key_name_len;
	ctx->alg = rr->alg_known ? rr->alg : DNS_TSIG_HMAC_SHA256;
	ctx->time_signed = rr->time_signed;
	ctx->fudge = rr->fudge;
	ctx->messages = 1;

	const dns_tsig_key_t *key = dns_tsig_keyring_find(ring, rr->key_name);
	if (!key || !rr->alg_known || key->alg != rr->alg) {
		ctx->error = DNS_TSIG_ERR_BADKEY;
		return DNS_RCODE_NOTAUTH;
	}
	ctx->key = key;
	size_t full = algs[key->alg].mac_len;
	/* Longer than the hash, or shorter than RFC 8945 5.2.2.1 allows: not a valid record. */
	if (rr->mac_len > full || rr->mac_len < min_mac_len(key->alg))
		return DNS_RCODE_FORMERR;

	tsig_vars_t v = {rr->key_name, rr->key_name_len, key->alg,  rr->time_signed,
	                 rr->fudge,    rr->error,        rr->other, rr->other_len};
	uint8_t mac[DNS_TSIG_MAC_MAX];
	size_t got = compute_mac(key, NULL, 0, msg, rr->offset, rr->orig_id, true, &v, false, mac);
	if (got != full || CRYPTO_memcmp(mac, rr->mac, rr->mac_len) != 0) {
		ctx->key = NULL; /* a BADSIG answer is unsigned */
		ctx->error = DNS_TSIG_ERR_BADSIG;
		return DNS_RCODE_NOTAUTH;
	}
	memcpy(ctx->prev_mac, rr->mac, rr->mac_len);
	ctx->prev_mac_len = rr->mac_len;
	if (abs_diff(now, rr->time_signed) > rr->fudge) {
		ctx->error = DNS_TSIG_ERR_BADTIME;
		return DNS_RCODE_NOTAUTH;
	}
	return DNS_RCODE_NOERROR;
}

static bool ctx_signs(const dns_tsig_ctx_t *ctx)
{
	return ctx->key != NULL && ctx->error != DNS_TSIG_ERR_BADKEY &&
	       ctx->error != DNS_TSIG_ERR_BADSIG;
}

size_t dns_tsig_rr_len(const dns_tsig_ctx_t *ctx)
{
	size_t alen;
	dns_tsig_alg_wire(ctx->alg, &alen);
	size_t mac = ctx_signs(ctx) ? algs[ctx->key->alg].mac_len : 0;
	size_t other = ctx->error == DNS_TSIG_ERR_BADTIME ? 6 : 0;
	return ctx->key_name_len + 10 + alen + 6 + 2 + 2 + mac + 2 + 2 + 2 + other;
}

/* Appends the TSIG record at @p len. Returns the new length, or 0 when it does not fit. */
static size_t append_rr(uint8_t *msg, size_t len, size_t cap, const tsig_vars_t *v,
                        const uint8_t *mac, size_t mac_len)
{
	size_t alen;
	const uint8_t *aw = dns_tsig_alg_wire(v->alg, &alen);
	size_t rdlen = alen + 16 + mac_len + v->other_len;
	if (len < DNS_HEADER_LEN || len + v->key_name_len + 10 + rdlen > cap || rdlen > 0xffff)
		return 0;
	wire_ctx_t c = wire_ctx_init(msg + len, cap - len);
	wire_ctx_write(&c, v->key_name, v->key_name_len);
	wire_ctx_write_u16(&c, DNS_TYPE_TSIG);
	wire_ctx_write_u16(&c, DNS_CLASS_ANY);
	wire_ctx_write_u32(&c, 0);
	wire_ctx_write_u16(&c, (uint16_t)rdlen);
	wire_ctx_write(&c, aw, alen);
	wire_ctx_write_u16(&c, (uint16_t)(v->time_signed >> 32));
	wire_ctx_write_u32(&c, (uint32_t)v->time_signed);
	wire_ctx_write_u16(&c, v->fudge);
	wire_ctx_write_u16(&c, (uint16_t)mac_len);
	wire_ctx_write(&c, mac, mac_len);
	wire_ctx_write_u16(&c, wire_read_u16(msg));
	wire_ctx_write_u16(&c, v->error);
	wire_ctx_write_u16(&c, v->other_len);
	wire_ctx_write(&c, v->other, v->other_len);
	if (c.err)
		return 0;
	wire_write_u16(msg + 10, (uint16_t)(wire_read_u16(msg + 10) + 1));
	return len + wire_ctx_offset(&c);
}

size_t dns_tsig_sign(dns_tsig_ctx_t *ctx, uint8_t *msg, size_t len, size_t cap, uint64_t now)
{
	if (len < DNS_HEADER_LEN)
		return 0;
	tsig_vars_t v = {ctx->key_name,  ctx->key_name_len, ctx->alg, now,
	                 DNS_TSIG_FUDGE, ctx->error,        NULL,     0};
	uint8_t other[6];
	if (!ctx_signs(ctx)) {
		/* RFC 8945 5.3.2: BADKEY and BADSIG answers carry no MAC. */
		v.time_signed = ctx->time_signed ? ctx->time_signed : now;
		v.fudge = ctx->fudge ? ctx->fudge : DNS_TSIG_FUDGE;
		ctx->messages++;
		return append_rr(msg, len, cap, &v, NULL, 0);
	}
	if (ctx->error == DNS_TSIG_ERR_BADTIME) {
		/* The request's time, and ours as other data, so the client can see the skew. */
		v.time_signed = ctx->time_signed;
		v.fudge = ctx->fudge;
		other[0] = (uint8_t)(now >> 40);
		other[1] = (uint8_t)(now >> 32);
		wire_write_u32(other + 2, (uint32_t)now);
		v.other = other;
		v.other_len = 6;
	}
	uint8_t mac[DNS_TSIG_MAC_MAX];
	bool timers_only = ctx->messages > 1;
	size_t mac_len = compute_mac(ctx->key, ctx->prev_mac, ctx->prev_mac_len, msg, len,
	                             wire_read_u16(msg), false, &v, timers_only, mac);
	if (mac_len == 0)
		return 0;
	size_t out = append_rr(msg, len, cap, &v, mac, mac_len);
	if (out == 0)
		return 0;
	memcpy(ctx->prev_mac, mac, mac_len);
	ctx->prev_mac_len = (uint16_t)mac_len;
	ctx->messages++;
	return out;
}

/* ---- Client side */

size_t dns_tsig_sign_request(const dns_tsig_key_t *key, dns_tsig_ctx_t *ctx, uint8_t *msg,
                             size_t len, size_t cap, uint64_t now)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->key = key;
	memcpy(ctx->key_name, key->name, key->name_len);
	ctx->key_name_len = key->name_len;
	ctx->alg = key->alg;
	ctx->fudge = DNS_TSIG_FUDGE;
	ctx->time_signed = now;
	if (len < DNS_HEADER_LEN)
		return 0;
	tsig_vars_t v = {key->name, key->name_len, key->alg, now, DNS_TSIG_FUDGE, 0, NULL, 0};
	uint8_t mac[DNS_TSIG_MAC_MAX];
	size_t mac_len =
	    compute_mac(key, NULL, 0, msg, len, wire_read_u16(msg), false, &v, false, mac);
	if (mac_len == 0)
		return 0;
	size_t out = append_rr(msg, len, cap, &v, mac, mac_len);
	if (out == 0)
		return 0;
	memcpy(ctx->prev_mac, mac, mac_len);
	ctx->prev_mac_len = (uint16_t)mac_len;
	ctx->messages = 1;
	return out;
}

/* Verifies the signed answer @p msg (TSIG @p rr) that ends the unsigned messages @p run. */
static int verify_signed(dns_tsig_ctx_t *ctx, const unsigned_run_t *run, const uint8_t *msg,
                         const dns_tsig_rr_t *rr, uint64_t now)
{
	if (rr->key_name_len != ctx->key_name_len ||
	    memcmp(rr->key_name, ctx->key_name, rr->key_name_len) != 0)
		return DNS_TSIG_ERR_BADKEY;
	if (!rr->alg_known || rr->alg != ctx->key->alg)
		return DNS_TSIG_ERR_BADKEY;
	if (rr->error != 0 && rr->mac_len == 0)
		return rr->error;
	size_t full = algs[rr->alg].mac_len;
	if (rr->mac_len > full || rr->mac_len < min_mac_len(rr->alg))
		return -1;
	tsig_vars_t v = {rr->key_name, rr->key_name_len, rr->alg,   rr->time_signed,
	                 rr->fudge,    rr->error,        rr->other, rr->other_len};
	uint8_t mac[DNS_TSIG_MAC_MAX];
	bool timers_only = ctx->messages > 1;
	size_t got = compute_mac_run(ctx->key, ctx->prev_mac, ctx->prev_mac_len, run, msg,
	                             rr->offset, rr->orig_id, true, &v, timers_only, mac);
	if (got != full || CRYPTO_memcmp(mac, rr->mac, rr->mac_len) != 0)
		return DNS_TSIG_ERR_BADSIG;
	memcpy(ctx->prev_mac, rr->mac, rr->mac_len);
	ctx->prev_mac_len = rr->mac_len;
	ctx->messages++;
	ctx->unsigned_run = 0;
	if (rr->error != 0)
		return rr->error;
	if (abs_diff(now, rr->time_signed) > rr->fudge)
		return DNS_TSIG_ERR_BADTIME;
	return 0;
}

/* RFC 8945 5.3.1: at least every 100th message of a transfer is signed. */
#define UNSIGNED_RUN_MAX 99

int dns_tsig_verify_response(dns_tsig_ctx_t *ctx, const uint8_t *msg, size_t len, bool last,
                             uint64_t now)
{
	dns_tsig_rr_t rr;
	int found = dns_tsig_find(msg, len, &rr);
	if (found < 0 || ctx->key == NULL)
		return -1;
	if (found == 0) {
		/* The first answer and the last must be signed; the caller keeps the others for
		 * dns_tsig_verify_response_after(). */
		if (ctx->messages <= 1 || last || ctx->unsigned_run >= UNSIGNED_RUN_MAX)
			return -1;
		ctx->unsigned_run++;
		return 0;
	}
	if (ctx->unsigned_run > 0)
		return -1; /* its MAC covers the unsigned messages: see _after() */
	return verify_signed(ctx, NULL, msg, &rr, now);
}

int dns_tsig_verify_response_after(dns_tsig_ctx_t *ctx, const uint8_t *const *unsigned_msgs,
                                   const size_t *unsigned_lens, size_t n_unsigned,
                                   const uint8_t *msg, size_t len, uint64_t now)
{
	dns_tsig_rr_t rr;
	if (ctx->key == NULL || n_unsigned != ctx->unsigned_run ||
	    dns_tsig_find(msg, len, &rr) != 1)
		return -1;
	unsigned_run_t run = {unsigned_msgs, unsigned_lens, n_unsigned};
	return verify_signed(ctx, &run, msg, &rr, now);
}

/* ---- Key files */

typedef struct {
	const char *p, *end;
	unsigned line;
} scan_t;

/* Next token of BIND syntax: a quoted string, one of "{};", or a bare word. */
static size_t next_token(scan_t *s, char *out, size_t cap, bool *quoted)
{
	for (;;) {
		while (s->p < s->end && isspace((unsigned char)*s->p)) {
			if (*s->p == '\n')
				s->line++;
			s->p++;
		}
		if (s->p >= s->end)
			return 0;
		bool hash = *s->p == '#';
		bool slashes = s->end - s->p >= 2 && s->p[0] == '/' && s->p[1] == '/';
		if (hash || slashes) {
			while (s->p < s->end && *s->p != '\n')
				s->p++;
			continue;
		}
		if (s->end - s->p >= 2 && s->p[0] == '/' && s->p[1] == '*') {
			s->p += 2;
			while (s->end - s->p >= 2 && !(s->p[0] == '*' && s->p[1] == '/')) {
				if (*s->p == '\n')
					s->line++;
				s->p++;
			}
			s->p = s->end - s->p >= 2 ? s->p + 2 : s->end;
			continue;
		}
		break;
	}
	size_t n = 0;
	*quoted = false;
	if (*s->p == '"') {
		*quoted = true;
		s->p++;
		while (s->p < s->end && *s->p != '"' && *s->p != '\n') {
			if (n + 1 < cap)
				out[n++] = *s->p;
			s->p++;
		}
		if (s->p >= s->end || *s->p != '"')
			return (size_t)-1;
		s->p++;
	} else if (strchr("{};", *s->p)) {
		out[n++] = *s->p++;
	} else {
		while (s->p < s->end && !isspace((unsigned char)*s->p) && !strchr("{};\"", *s->p)) {
			if (n + 1 < cap)
				out[n++] = *s->p;
			s->p++;
		}
	}
	out[n] = '\0';
	return n ? n : (*quoted ? (size_t)-2 : 0);
}

#define TOK_MAX 512

static int parse_bind(scan_t *s,
                      int (*cb)(void *, const char *, const char *, const char *, unsigned),
                      void *arg, char *err, size_t errlen)
{
	char tok[TOK_MAX], name[TOK_MAX], alg[TOK_MAX], secret[TOK_MAX];
	bool q;
	for (;;) {
		size_t n = next_token(s, tok, sizeof(tok), &q);
		if (n == 0)
			return 0;
		unsigned line = s->line;
		if (n == (size_t)-1 || q || strcmp(tok, "key") != 0) {
			snprintf(err, errlen, "line %u: expected `key \"name\" { ... };`", line);
			return -1;
		}
		n = next_token(s, name, sizeof(name), &q);
		if (n == 0 || n >= (size_t)-2 || strchr("{};", name[0])) {
			snprintf(err, errlen, "line %u: a key needs a name", line);
			return -1;
		}
		if (next_token(s, tok, sizeof(tok), &q) != 1 || strcmp(tok, "{") != 0) {
			snprintf(err, errlen, "line %u: expected `{` after the key name", s->line);
			return -1;
		}
		alg[0] = secret[0] = '\0';
		for (;;) {
			n = next_token(s, tok, sizeof(tok), &q);
			if (n == 1 && !q && tok[0] == '}')
				break;
			char *dst = NULL;
			if (n != 0 && n < (size_t)-2 && !q && strcmp(tok, "algorithm") == 0)
				dst = alg;
			else if (n != 0 && n < (size_t)-2 && !q && strcmp(tok, "secret") == 0)
				dst = secret;
			if (!dst) {
				snprintf(
				    err, errlen,
				    "line %u: expected `algorithm`, `secret` or `}` in key \"%s\"",
				    s->line, name);
				return -1;
			}
			n = next_token(s, dst, TOK_MAX, &q);
			if (n == 0 || n >= (size_t)-2) {
				snprintf(err, errlen, "line %u: `%s` needs a value", s->line, tok);
				return -1;
			}
			if (next_token(s, tok, sizeof(tok), &q) != 1 || tok[0] != ';') {
				snprintf(err, errlen, "line %u: expected `;`", s->line);
				return -1;
			}
		}
		if (next_token(s, tok, sizeof(tok), &q) != 1 || tok[0] != ';') {
			snprintf(err, errlen, "line %u: expected `;` after `}`", s->line);
			return -1;
		}
		if (!alg[0] || !secret[0]) {
			snprintf(err, errlen, "line %u: key \"%s\" needs an algorithm and a secret",
			         line, name);
			return -1;
		}
		if (cb(arg, name, alg, secret, line) != 0) {
			snprintf(err, errlen, "line %u: key \"%s\" rejected", line, name);
			return -1;
		}
	}
}

/* One "  - id: x" / "    algorithm: y" line of keymgr's YAML: the value, unquoted. */
static bool yaml_value(const char *line, size_t len, const char *field, char *out, size_t cap)
{
	size_t i = 0;
	while (i < len && (line[i] == ' ' || line[i] == '-'))
		i++;
	size_t fl = strlen(field);
	if (len - i < fl + 1 || memcmp(line + i, field, fl) != 0 || line[i + fl] != ':')
		return false;
	i += fl + 1;
	while (i < len && isspace((unsigned char)line[i]))
		i++;
	size_t e = len;
	while (e > i && isspace((unsigned char)line[e - 1]))
		e--;
	if (e > i + 1 && (line[i] == '"' || line[i] == '\'') && line[e - 1] == line[i]) {
		i++;
		e--;
	}
	if (e - i + 1 > cap)
		return false;
	memcpy(out, line + i, e - i);
	out[e - i] = '\0';
	return true;
}

static int yaml_flush(char *name, char *alg, char *secret, unsigned line,
                      int (*cb)(void *, const char *, const char *, const char *, unsigned),
                      void *arg, char *err, size_t errlen)
{
	if (!name[0] && !alg[0] && !secret[0])
		return 0;
	if (!name[0] || !alg[0] || !secret[0]) {
		snprintf(err, errlen, "line %u: a key needs `id`, `algorithm` and `secret`", line);
		return -1;
	}
	if (cb(arg, name, alg, secret, line) != 0) {
		snprintf(err, errlen, "line %u: key \"%s\" rejected", line, name);
		return -1;
	}
	name[0] = alg[0] = secret[0] = '\0';
	return 0;
}

static int parse_knot(scan_t *s,
                      int (*cb)(void *, const char *, const char *, const char *, unsigned),
                      void *arg, char *err, size_t errlen)
{
	char name[TOK_MAX] = "", alg[TOK_MAX] = "", secret[TOK_MAX] = "";
	unsigned key_line = 0;
	bool in_keys = false;
	while (s->p < s->end) {
		const char *nl = memchr(s->p, '\n', (size_t)(s->end - s->p));
		const char *le = nl ? nl : s->end;
		const char *line = s->p;
		size_t len = (size_t)(le - line);
		s->line++;
		s->p = nl ? nl + 1 : s->end;
		size_t i = 0;
		while (i < len && isspace((unsigned char)line[i]))
			i++;
		if (i == len || line[i] == '#')
			continue;
		if (i == 0) {
			if (yaml_flush(name, alg, secret, key_line, cb, arg, err, errlen) != 0)
				return -1;
			in_keys = len >= 4 && memcmp(line, "key:", 4) == 0;
			if (!in_keys) {
				snprintf(err, errlen, "line %u: expected `key:`", s->line);
				return -1;
			}
			continue;
		}
		if (!in_keys) {
			snprintf(err, errlen, "line %u: expected `key:`", s->line);
			return -1;
		}
		bool item = line[i] == '-';
		if (item) {
			if (yaml_flush(name, alg, secret, key_line, cb, arg, err, errlen) != 0)
				return -1;
			key_line = s->line;
		}
		if (!yaml_value(line, len, "id", name, sizeof(name)) &&
		    !yaml_value(line, len, "algorithm", alg, sizeof(alg)) &&
		    !yaml_value(line, len, "secret", secret, sizeof(secret))) {
			snprintf(err, errlen, "line %u: expected `id`, `algorithm` or `secret`",
			         s->line);
			return -1;
		}
	}
	return yaml_flush(name, alg, secret, key_line, cb, arg, err, errlen);
}

int dns_tsig_parse_keyfile(const char *text, size_t len,
                           int (*cb)(void *arg, const char *name, const char *algorithm,
                                     const char *secret_base64, unsigned line),
                           void *arg, char *err, size_t errlen)
{
	if (errlen > 0)
		err[0] = '\0';
	/* keymgr's YAML starts (after comments) with `key:` in the first column. */
	const char *p = text, *end = text + len;
	bool yaml = false;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *q = p;
		while (q < le && isspace((unsigned char)*q))
			q++;
		if (q < le && *q != '#') {
			yaml = le - q >= 4 && memcmp(q, "key:", 4) == 0;
			break;
		}
		p = nl ? nl + 1 : end;
	}
	scan_t s = {text, end, yaml ? 0 : 1};
	int ret =
	    yaml ? parse_knot(&s, cb, arg, err, errlen) : parse_bind(&s, cb, arg, err, errlen);
	return ret;
}
