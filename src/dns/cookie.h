/*
 * DNS Cookies (RFC 7873) with interoperable server cookies (RFC 9018: version 1, a timestamp
 * and a SipHash-2-4 hash). Pure functions, no allocation, no clock of their own (callers pass
 * the time): used on query threads and in tests with a fake clock.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"

#define DNS_EDNS_OPT_COOKIE    10
#define DNS_COOKIE_CLIENT_LEN  8
#define DNS_COOKIE_SERVER_MIN  8
#define DNS_COOKIE_SERVER_MAX  32
#define DNS_COOKIE_SERVER_LEN  16 /* ours: RFC 9018 version 1 */
#define DNS_COOKIE_SECRET_LEN  16 /* a SipHash-2-4 key */
#define DNS_COOKIE_OPTION_LEN  (4 + DNS_COOKIE_CLIENT_LEN + DNS_COOKIE_SERVER_LEN)
#define DNS_RCODE_BADCOOKIE    23
#define DNS_COOKIE_MAX_AGE     3600 /* RFC 9018 4.3: older cookies are invalid */
#define DNS_COOKIE_MAX_FUTURE  300  /* ... and so are ones from further in the future */
#define DNS_COOKIE_REFRESH_AGE 1800 /* older valid ones are answered with a fresh cookie */

/* The COOKIE option of a query, as received. */
typedef struct {
	uint8_t client[DNS_COOKIE_CLIENT_LEN];
	uint8_t server[DNS_COOKIE_SERVER_MAX];
	uint8_t server_len; /* 0: the client has no server cookie yet */
} dns_cookie_t;

/* The secrets server cookies are made and checked with (a snapshot per configuration). */
typedef struct {
	uint8_t secret[DNS_COOKIE_SECRET_LEN];   /* makes and validates cookies */
	uint8_t previous[DNS_COOKIE_SECRET_LEN]; /* validates only (rollover) */
	bool has_previous;
} dns_cookie_secrets_t;

typedef enum {
	DNS_COOKIE_NO_SERVER, /* only a client cookie */
	DNS_COOKIE_INVALID,   /* a server cookie that is not ours, or expired */
	DNS_COOKIE_VALID,     /* ours, current secret, fresh enough to echo */
	DNS_COOKIE_STALE,     /* ours and valid, but answer with a fresh one (age, old secret) */
} dns_cookie_status_t;

/** SipHash-2-4 of @p len bytes at @p data under @p key, as the reference implementation. */
uint64_t dns_siphash24(const uint8_t key[16], const uint8_t *data, size_t len) STEER_NONNULL(1);

/**
 * Parse a COOKIE option payload (@p len bytes at @p data) into @p out. Returns 0, or -1 for
 * a malformed option (RFC 7873 5.2.2: the query then gets FORMERR).
 */
int dns_cookie_parse(const uint8_t *data, size_t len, dns_cookie_t *out) STEER_NONNULL(3);

/**
 * Make our server cookie (RFC 9018 4) for client cookie @p client, client address @p ip
 * (@p ip_len 4 or 16 bytes) at time @p now (seconds since the epoch, wall clock: cluster
 * nodes must agree) into @p out.
 */
void dns_cookie_make(const uint8_t secret[DNS_COOKIE_SECRET_LEN],
                     const uint8_t client[DNS_COOKIE_CLIENT_LEN], const uint8_t *ip, size_t ip_len,
                     uint32_t now, uint8_t out[DNS_COOKIE_SERVER_LEN]) STEER_NONNULL(1, 2, 3, 6);

/**
 * Check the server cookie of @p c from address @p ip at time @p now against @p secrets:
 * valid when its hash matches the current or the previous secret and its timestamp lies
 * within the past hour or at most 5 minutes ahead (RFC 9018 4.3).
 */
dns_cookie_status_t dns_cookie_check(const dns_cookie_secrets_t *secrets, const dns_cookie_t *c,
                                     const uint8_t *ip, size_t ip_len, uint32_t now)
    STEER_NONNULL(1, 2, 3);

/**
 * Write the response's COOKIE option (code, length, client cookie of @p c, then the server
 * cookie: @p c's own when @p status is DNS_COOKIE_VALID, else a fresh one made with the
 * current secret) into @p out (DNS_COOKIE_OPTION_LEN bytes). Returns the bytes written.
 */
size_t dns_cookie_write(const dns_cookie_secrets_t *secrets, const dns_cookie_t *c,
                        dns_cookie_status_t status, const uint8_t *ip, size_t ip_len, uint32_t now,
                        uint8_t *out) STEER_NONNULL(1, 2, 4, 7);

/**
 * Point @p ip / @p ip_len at the address bytes of @p addr a server cookie is bound to
 * (RFC 9018 4.4: 4 for IPv4, 16 for IPv6; borrowed from @p addr). False when @p addr is NULL
 * or of another family: such a client gets no cookie.
 */
bool dns_cookie_client_ip(const steer_sockaddr_t *addr, const uint8_t **ip, size_t *ip_len)
    STEER_NONNULL(2, 3);
