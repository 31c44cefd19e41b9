/*
 * DNS Cookies. The hash is SipHash-2-4 (base/siphash.h), as RFC 9018 specifies; it runs once
 * or twice per query carrying a cookie.
 */
#include "dns/cookie.h"

#include <string.h>

#include "base/siphash.h"

uint64_t dns_siphash24(const uint8_t key[16], const uint8_t *data, size_t len)
{
	uint64_t k0, k1;
	steer_siphash_key(key, &k0, &k1);
	return steer_siphash24(k0, k1, data, len);
}

int dns_cookie_parse(const uint8_t *data, size_t len, dns_cookie_t *out)
{
	/* RFC 7873 5.2.2: a client cookie alone, or with a server cookie of 8 to 32 bytes. */
	if (len != DNS_COOKIE_CLIENT_LEN && (len < DNS_COOKIE_CLIENT_LEN + DNS_COOKIE_SERVER_MIN ||
	                                     len > DNS_COOKIE_CLIENT_LEN + DNS_COOKIE_SERVER_MAX))
		return -1;
	memcpy(out->client, data, DNS_COOKIE_CLIENT_LEN);
	out->server_len = (uint8_t)(len - DNS_COOKIE_CLIENT_LEN);
	if (out->server_len > 0)
		memcpy(out->server, data + DNS_COOKIE_CLIENT_LEN, out->server_len);
	return 0;
}

/* The hash of RFC 9018 4.4 over client cookie, version, reserved, timestamp and address. */
static uint64_t cookie_hash(const uint8_t secret[DNS_COOKIE_SECRET_LEN], const uint8_t *client,
                            const uint8_t head[8], const uint8_t *ip, size_t ip_len)
{
	uint8_t buf[DNS_COOKIE_CLIENT_LEN + 8 + 16];
	memcpy(buf, client, DNS_COOKIE_CLIENT_LEN);
	memcpy(buf + DNS_COOKIE_CLIENT_LEN, head, 8);
	if (ip_len > 16)
		ip_len = 16;
	memcpy(buf + DNS_COOKIE_CLIENT_LEN + 8, ip, ip_len);
	return dns_siphash24(secret, buf, DNS_COOKIE_CLIENT_LEN + 8 + ip_len);
}

static void store_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void dns_cookie_make(const uint8_t secret[DNS_COOKIE_SECRET_LEN],
                     const uint8_t client[DNS_COOKIE_CLIENT_LEN], const uint8_t *ip, size_t ip_len,
                     uint32_t now, uint8_t out[DNS_COOKIE_SERVER_LEN])
{
	out[0] = 1; /* version */
	out[1] = out[2] = out[3] = 0;
	out[4] = (uint8_t)(now >> 24);
	out[5] = (uint8_t)(now >> 16);
	out[6] = (uint8_t)(now >> 8);
	out[7] = (uint8_t)now;
	/* SipHash's reference output is little-endian; RFC 9018's examples are written so. */
	store_le64(out + 8, cookie_hash(secret, client, out, ip, ip_len));
}

/* Constant time, so a forger learns nothing from how long a wrong guess took. */
static bool hash_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t d = 0;
	for (int i = 0; i < 8; i++)
		d |= (uint8_t)(a[i] ^ b[i]);
	return d == 0;
}

dns_cookie_status_t dns_cookie_check(const dns_cookie_secrets_t *secrets, const dns_cookie_t *c,
                                     const uint8_t *ip, size_t ip_len, uint32_t now)
{
	if (c->server_len == 0)
		return DNS_COOKIE_NO_SERVER;
	const uint8_t *s = c->server;
	if (c->server_len != DNS_COOKIE_SERVER_LEN || s[0] != 1)
		return DNS_COOKIE_INVALID;
	uint32_t ts = (uint32_t)s[4] << 24 | (uint32_t)s[5] << 16 | (uint32_t)s[6] << 8 | s[7];
	/* Serial number arithmetic (RFC 1982), as RFC 9018 4.3 asks: the clock wraps in 2106. */
	int32_t age = (int32_t)(now - ts);
	if (age > DNS_COOKIE_MAX_AGE || age < -DNS_COOKIE_MAX_FUTURE)
		return DNS_COOKIE_INVALID;
	uint8_t h[8];
	store_le64(h, cookie_hash(secrets->secret, c->client, s, ip, ip_len));
	if (hash_equal(h, s + 8))
		return age > DNS_COOKIE_REFRESH_AGE ? DNS_COOKIE_STALE : DNS_COOKIE_VALID;
	if (secrets->has_previous) {
		store_le64(h, cookie_hash(secrets->previous, c->client, s, ip, ip_len));
		if (hash_equal(h, s + 8))
			return DNS_COOKIE_STALE;
	}
	return DNS_COOKIE_INVALID;
}

size_t dns_cookie_write(const dns_cookie_secrets_t *secrets, const dns_cookie_t *c,
                        dns_cookie_status_t status, const uint8_t *ip, size_t ip_len, uint32_t now,
                        uint8_t *out)
{
	out[0] = 0;
	out[1] = DNS_EDNS_OPT_COOKIE;
	out[2] = 0;
	out[3] = DNS_COOKIE_CLIENT_LEN + DNS_COOKIE_SERVER_LEN;
	memcpy(out + 4, c->client, DNS_COOKIE_CLIENT_LEN);
	uint8_t *server = out + 4 + DNS_COOKIE_CLIENT_LEN;
	if (status == DNS_COOKIE_VALID)
		memcpy(server, c->server, DNS_COOKIE_SERVER_LEN);
	else
		dns_cookie_make(secrets->secret, c->client, ip, ip_len, now, server);
	return DNS_COOKIE_OPTION_LEN;
}

bool dns_cookie_client_ip(const steer_sockaddr_t *addr, const uint8_t **ip, size_t *ip_len)
{
	if (addr != NULL && addr->sa.sa_family == AF_INET) {
		*ip = (const uint8_t *)&addr->sin.sin_addr;
		*ip_len = 4;
		return true;
	}
	if (addr != NULL && addr->sa.sa_family == AF_INET6) {
		*ip = (const uint8_t *)&addr->sin6.sin6_addr;
		*ip_len = 16;
		return true;
	}
	return false;
}
