#include "base/sockaddr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

static int parse_port(const char *text, uint16_t *port)
{
	char *end = NULL;
	long value = strtol(text, &end, 10);
	if (*text == '\0' || *end != '\0' || value < 0 || value > 65535)
		return STEER_EINVAL;
	*port = (uint16_t)value;
	return 0;
}

static int parse_host(const char *host, uint16_t port, steer_sockaddr_t *out)
{
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, host, &out->sin.sin_addr) == 1) {
		out->sin.sin_family = AF_INET;
		out->sin.sin_port = htons(port);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &out->sin6.sin6_addr) == 1) {
		out->sin6.sin6_family = AF_INET6;
		out->sin6.sin6_port = htons(port);
		return 0;
	}
	return STEER_EINVAL;
}

int steer_sockaddr_parse(const char *text, uint16_t default_port, steer_sockaddr_t *out)
{
	char host[INET6_ADDRSTRLEN + 1];
	uint16_t port = default_port;
	const char *colon = strrchr(text, ':');
	size_t hostlen;

	if (text[0] == '[') {
		const char *close = strchr(text, ']');
		if (!close || (close[1] != '\0' && close[1] != ':'))
			return STEER_EINVAL;
		if (close[1] == ':' && parse_port(close + 2, &port) != 0)
			return STEER_EINVAL;
		text++;
		hostlen = (size_t)(close - text);
	} else if (colon && strchr(text, ':') == colon) {
		/* Exactly one colon: IPv4 with a port. More colons: a bare IPv6 address. */
		if (parse_port(colon + 1, &port) != 0)
			return STEER_EINVAL;
		hostlen = (size_t)(colon - text);
	} else {
		hostlen = strlen(text);
	}
	if (hostlen == 0 || hostlen >= sizeof(host))
		return STEER_EINVAL;
	memcpy(host, text, hostlen);
	host[hostlen] = '\0';
	return parse_host(host, port, out);
}

const char *steer_sockaddr_str(const steer_sockaddr_t *addr, char *buf, size_t size)
{
	char ip[INET6_ADDRSTRLEN];
	if (addr->sa.sa_family == AF_INET) {
		inet_ntop(AF_INET, &addr->sin.sin_addr, ip, sizeof(ip));
		snprintf(buf, size, "%s:%u", ip, ntohs(addr->sin.sin_port));
	} else if (addr->sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &addr->sin6.sin6_addr, ip, sizeof(ip));
		snprintf(buf, size, "[%s]:%u", ip, ntohs(addr->sin6.sin6_port));
	} else if (addr->sa.sa_family == AF_UNIX) {
		snprintf(buf, size, "unix");
	} else {
		snprintf(buf, size, "(family %d)", addr->sa.sa_family);
	}
	return buf;
}

socklen_t steer_sockaddr_len(const steer_sockaddr_t *addr)
{
	return addr->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                      : sizeof(struct sockaddr_in);
}

uint16_t steer_sockaddr_port(const steer_sockaddr_t *addr)
{
	return ntohs(addr->sa.sa_family == AF_INET6 ? addr->sin6.sin6_port : addr->sin.sin_port);
}

static bool host_bits_clear(const uint8_t *addr, unsigned bytes, unsigned len)
{
	for (unsigned bit = len; bit < bytes * 8; bit++) {
		if (addr[bit / 8] & (0x80 >> (bit % 8)))
			return false;
	}
	return true;
}

int steer_prefix_parse(const char *text, steer_prefix_t *out)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(text, '/');
	size_t hostlen = slash ? (size_t)(slash - text) : strlen(text);
	if (hostlen == 0 || hostlen >= sizeof(host))
		return STEER_EINVAL;
	memcpy(host, text, hostlen);
	host[hostlen] = '\0';

	memset(out, 0, sizeof(*out));
	unsigned maxlen;
	if (inet_pton(AF_INET, host, out->addr) == 1) {
		out->family = AF_INET;
		maxlen = 32;
	} else if (inet_pton(AF_INET6, host, out->addr) == 1) {
		out->family = AF_INET6;
		maxlen = 128;
	} else {
		return STEER_EINVAL;
	}
	out->len = (uint8_t)maxlen;
	if (slash) {
		char *end = NULL;
		long len = strtol(slash + 1, &end, 10);
		if (slash[1] == '\0' || *end != '\0' || len < 0 || len > (long)maxlen)
			return STEER_EINVAL;
		out->len = (uint8_t)len;
	}
	return host_bits_clear(out->addr, maxlen / 8, out->len) ? 0 : STEER_EINVAL;
}

static bool bits_equal(const uint8_t *a, const uint8_t *b, unsigned len)
{
	unsigned full = len / 8, rest = len % 8;
	if (memcmp(a, b, full) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[full] & mask) == (b[full] & mask);
}

bool steer_prefix_match(const steer_prefix_t *prefix, const steer_sockaddr_t *addr)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (addr->sa.sa_family == AF_INET) {
		return prefix->family == AF_INET &&
		       bits_equal(prefix->addr, (const uint8_t *)&addr->sin.sin_addr, prefix->len);
	}
	if (addr->sa.sa_family != AF_INET6)
		return false;
	const uint8_t *a6 = addr->sin6.sin6_addr.s6_addr;
	if (prefix->family == AF_INET6)
		return bits_equal(prefix->addr, a6, prefix->len);
	return memcmp(a6, v4mapped, 12) == 0 && bits_equal(prefix->addr, a6 + 12, prefix->len);
}

bool steer_prefix_list_match(const steer_prefix_t *list, size_t n, const steer_sockaddr_t *addr)
{
	for (size_t i = 0; i < n; i++) {
		if (steer_prefix_match(&list[i], addr))
			return true;
	}
	return false;
}

const char *steer_sockaddr_ip_str(const steer_sockaddr_t *addr, char *buf, size_t size)
{
	const void *bytes = addr->sa.sa_family == AF_INET    ? (const void *)&addr->sin.sin_addr
	                    : addr->sa.sa_family == AF_INET6 ? (const void *)&addr->sin6.sin6_addr
	                                                     : NULL;
	if (!bytes || !inet_ntop(addr->sa.sa_family, bytes, buf, (socklen_t)size))
		snprintf(buf, size, "?");
	return buf;
}
