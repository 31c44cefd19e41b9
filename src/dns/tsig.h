/*
 * Transaction signatures (TSIG, RFC 8945) with HMAC-SHA1/224/256/384/512 from OpenSSL: finding
 * and parsing the TSIG record of a message, verifying a signed request and signing its
 * answers (one message, or every message of a zone transfer), and the client side (signing a
 * request, verifying the answers to it). Wire code with no I/O; the HMAC is OpenSSL's.
 *
 * Times are seconds since the epoch (48-bit on the wire), passed in by the caller so that
 * tests can move the clock.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "dns/const.h"

/* TSIG error codes (RFC 8945 3, the extended RCODEs of the TSIG record). */
#define DNS_TSIG_ERR_NONE     0
#define DNS_TSIG_ERR_BADSIG   16
#define DNS_TSIG_ERR_BADKEY   17
#define DNS_TSIG_ERR_BADTIME  18
#define DNS_TSIG_ERR_BADTRUNC 22

/* The default fudge we sign with and the one RFC 8945 recommends. */
#define DNS_TSIG_FUDGE 300
/* Longest MAC (SHA-512) and longest secret we keep. */
#define DNS_TSIG_MAC_MAX    64
#define DNS_TSIG_SECRET_MAX 256

typedef enum {
	DNS_TSIG_HMAC_SHA1,
	DNS_TSIG_HMAC_SHA224,
	DNS_TSIG_HMAC_SHA256,
	DNS_TSIG_HMAC_SHA384,
	DNS_TSIG_HMAC_SHA512,
	DNS_TSIG_ALG_COUNT
} dns_tsig_alg_t;

typedef struct {
	uint8_t name[DNS_DNAME_MAXLEN]; /* lowercase wire */
	uint8_t name_len;
	dns_tsig_alg_t alg;
	uint8_t secret[DNS_TSIG_SECRET_MAX];
	uint16_t secret_len;
} dns_tsig_key_t;

/* An immutable set of keys, part of a configuration snapshot. */
typedef struct {
	const dns_tsig_key_t *keys;
	size_t n_keys;
} dns_tsig_keyring_t;

/* A TSIG record as found in a message. Pointers borrow the message. */
typedef struct {
	size_t offset; /* where the TSIG RR begins (the MAC covers [0, offset)) */
	uint8_t key_name[DNS_DNAME_MAXLEN]; /* lowercase wire */
	uint8_t key_name_len;
	bool alg_known;
	dns_tsig_alg_t alg;
	uint64_t time_signed;
	uint16_t fudge;
	const uint8_t *mac;
	uint16_t mac_len;
	uint16_t orig_id;
	uint16_t error;
	const uint8_t *other;
	uint16_t other_len;
} dns_tsig_rr_t;

/*
 * The signing state of one exchange: the key, the MAC of the previous message (a response's
 * MAC covers the request's MAC; each message of a transfer covers the one before), and the
 * TSIG error to report. Plain data: it holds no OpenSSL objects and is copied freely.
 */
typedef struct {
	const dns_tsig_key_t *key;          /* NULL: unknown key (BADKEY answers are unsigned) */
	uint8_t key_name[DNS_DNAME_MAXLEN]; /* as the request named it, for the error answer */
	uint8_t key_name_len;
	dns_tsig_alg_t alg;
	uint8_t prev_mac[DNS_TSIG_MAC_MAX];
	uint16_t prev_mac_len;
	uint64_t time_signed; /* of the request, echoed in BADTIME answers' other data */
	uint16_t fudge;
	uint16_t error;        /* DNS_TSIG_ERR_* to put into our signed answer */
	unsigned messages;     /* messages signed or verified so far in this exchange */
	unsigned unsigned_run; /* client: messages since the last signed one (RFC 8945 5.3.1) */
} dns_tsig_ctx_t;

/** The algorithm named @p name ("hmac-sha256", case-insensitive, trailing dot optional). */
bool dns_tsig_alg_from_str(const char *name, dns_tsig_alg_t *alg) STEER_NONNULL(1, 2);

/** The algorithm's wire name (lowercase, uncompressed) and its MAC length. */
const uint8_t *dns_tsig_alg_wire(dns_tsig_alg_t alg, size_t *len) STEER_NONNULL(2);
size_t dns_tsig_mac_len(dns_tsig_alg_t alg);

/** The key named @p name (lowercase wire) in @p ring, or NULL. Any thread, no allocation. */
const dns_tsig_key_t *dns_tsig_keyring_find(const dns_tsig_keyring_t *ring, const uint8_t *name)
    STEER_NONNULL(1, 2);

/**
 * Find the TSIG record of the message @p msg (@p len bytes): it must be the last record of the
 * additional section. Returns 1 and fills @p rr, 0 when the message has none, or -1 when a
 * TSIG record is malformed or not last (answer FORMERR).
 */
int dns_tsig_find(const uint8_t *msg, size_t len, dns_tsig_rr_t *rr) STEER_NONNULL(1, 3);

/**
 * Server side: verify the request @p msg whose TSIG record is @p rr, against @p ring at time
 * @p now. Sets up @p ctx for signing the answer(s). Returns the RCODE to answer with:
 * NOERROR when the signature is good; NOTAUTH with ctx->error BADKEY, BADSIG or BADTIME
 * otherwise (RFC 8945 5.2). Allocation-free apart from OpenSSL's HMAC state.
 */
uint8_t dns_tsig_verify_request(const dns_tsig_keyring_t *ring, const uint8_t *msg,
                                const dns_tsig_rr_t *rr, uint64_t now, dns_tsig_ctx_t *ctx)
    STEER_NONNULL(1, 2, 3, 5);

/** Bytes a TSIG record signed by @p ctx adds to a message (reserve them before building). */
size_t dns_tsig_rr_len(const dns_tsig_ctx_t *ctx) STEER_NONNULL(1);

/**
 * Sign the message @p msg (@p len bytes, room for @p cap) of @p ctx's exchange at @p now: a
 * TSIG record is appended and ARCOUNT raised. The first call signs the answer to the request
 * (covering its MAC), later calls the next messages of a transfer (covering the previous
 * MAC, timers only). An error answer (ctx->error BADKEY) gets an unsigned TSIG record as
 * RFC 8945 5.3.2 says. Returns the new length, or 0 when the record does not fit.
 */
size_t dns_tsig_sign(dns_tsig_ctx_t *ctx, uint8_t *msg, size_t len, size_t cap, uint64_t now)
    STEER_NONNULL(1, 2);

/**
 * Client side: start an exchange with @p key and sign the request @p msg (@p len bytes, room
 * for @p cap). Returns the new length, or 0 when it does not fit.
 */
size_t dns_tsig_sign_request(const dns_tsig_key_t *key, dns_tsig_ctx_t *ctx, uint8_t *msg,
                             size_t len, size_t cap, uint64_t now) STEER_NONNULL(1, 2, 3);

/**
 * Client side: verify one answer message of @p ctx's exchange at @p now. The first answer
 * must be signed; in a transfer later messages may be unsigned, up to 99 in a row, and the
 * last one must be signed (the caller says which is last with @p last). An unsigned message
 * allowed there returns 0: the caller keeps it, and verifies the next signed message, whose
 * MAC covers the unsigned ones, with dns_tsig_verify_response_after() (this function returns
 * -1 for it). Returns 0, or a DNS_TSIG_ERR_* (BADSIG, BADKEY, BADTIME) or -1 (malformed,
 * unsigned where a signature was due) — the transfer must then be dropped.
 */
int dns_tsig_verify_response(dns_tsig_ctx_t *ctx, const uint8_t *msg, size_t len, bool last,
                             uint64_t now) STEER_NONNULL(1, 2);

/**
 * Client side: verify the signed message @p msg (@p len bytes) that follows @p n_unsigned
 * unsigned messages of a transfer (@p unsigned_msgs, @p unsigned_lens: exactly those that
 * dns_tsig_verify_response() returned 0 for since the last signed message, in order), as
 * servers that sign only every Nth message send them (RFC 8945 5.3.1). Returns as
 * dns_tsig_verify_response().
 */
int dns_tsig_verify_response_after(dns_tsig_ctx_t *ctx, const uint8_t *const *unsigned_msgs,
                                   const size_t *unsigned_lens, size_t n_unsigned,
                                   const uint8_t *msg, size_t len, uint64_t now)
    STEER_NONNULL(1, 5);

/**
 * Parse a key file: BIND's `tsig-keygen` output (`key "name" { algorithm ...; secret "...";
 * };`, several allowed) or Knot's `keymgr -t` YAML (`key:` list of `id`, `algorithm`,
 * `secret`). Calls @p cb for each key. Returns 0, or -1 with "line N: reason" in @p err.
 * Control thread.
 */
int dns_tsig_parse_keyfile(const char *text, size_t len,
                           int (*cb)(void *arg, const char *name, const char *algorithm,
                                     const char *secret_base64, unsigned line),
                           void *arg, char *err, size_t errlen) STEER_NONNULL(1, 3, 5);

/**
 * Decode the base64 secret @p b64 (whitespace ignored) into @p out (room for @p cap bytes).
 * Returns the secret's length, or -1 when it is not valid base64, empty or too long.
 */
int dns_tsig_secret_decode(const char *b64, uint8_t *out, size_t cap) STEER_NONNULL(1, 2);
