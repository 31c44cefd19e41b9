/*
 * Socket addresses and address prefixes (ACLs), IPv4 and IPv6. Pure functions, thread-safe.
 */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/compiler.h"

typedef union {
	struct sockaddr sa;
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	struct sockaddr_storage ss;
} steer_sockaddr_t;

/* Big enough for "[ffff:...:ffff%scope]:65535". */
#define STEER_SOCKADDR_STRLEN 64

/**
 * Parse "1.2.3.4", "1.2.3.4:53", "::1", "[::1]:53". A missing port becomes @p default_port.
 * Returns 0 or STEER_EINVAL.
 */
int steer_sockaddr_parse(const char *text, uint16_t default_port, steer_sockaddr_t *out)
    STEER_NONNULL(1, 3) STEER_WUR;

/** Format as "1.2.3.4:53" or "[::1]:53" into @p buf (at least STEER_SOCKADDR_STRLEN). */
const char *steer_sockaddr_str(const steer_sockaddr_t *addr, char *buf, size_t size)
    STEER_NONNULL(1, 2);

/**
 * The address of @p addr without its port ("192.0.2.1", "2001:db8::1") into @p buf; "?" for
 * another family. Returns @p buf. INET6_ADDRSTRLEN bytes are enough.
 */
const char *steer_sockaddr_ip_str(const steer_sockaddr_t *addr, char *buf, size_t size)
    STEER_NONNULL(1, 2);

/** Length to pass to bind()/sendto() for the family of @p addr. */
socklen_t steer_sockaddr_len(const steer_sockaddr_t *addr) STEER_NONNULL(1);

/** Port in host order. */
uint16_t steer_sockaddr_port(const steer_sockaddr_t *addr) STEER_NONNULL(1);

/** An address prefix, e.g. 192.0.2.0/24 or 2001:db8::/32. Bits beyond @c len are zero. */
typedef struct {
	sa_family_t family; /* AF_INET or AF_INET6 */
	uint8_t len;        /* prefix length in bits */
	uint8_t addr[16];   /* network order; 4 bytes used for AF_INET */
} steer_prefix_t;

/**
 * Parse "192.0.2.0/24", "2001:db8::/32" or a bare address (a host prefix). Host bits set
 * beyond the prefix are an error, so typos in ACLs are caught. Returns 0 or STEER_EINVAL.
 */
int steer_prefix_parse(const char *text, steer_prefix_t *out) STEER_NONNULL(1, 2) STEER_WUR;

/** True when @p addr lies inside @p prefix (IPv4-mapped IPv6 addresses match IPv4 prefixes). */
bool steer_prefix_match(const steer_prefix_t *prefix, const steer_sockaddr_t *addr)
    STEER_NONNULL(1, 2);

/** True when @p addr matches any of @p n prefixes. */
bool steer_prefix_list_match(const steer_prefix_t *list, size_t n, const steer_sockaddr_t *addr)
    STEER_NONNULL(3);
