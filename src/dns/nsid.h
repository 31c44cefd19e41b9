/*
 * The Name Server Identifier option (RFC 5001): a query asks for it with the option (its
 * payload is ignored), the response carries the server's identity in it. Pure functions, no
 * allocation; used on query threads.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

#define DNS_EDNS_OPT_NSID 3
/* Option code and length before the payload. */
#define DNS_NSID_HEADER_LEN 4

/**
 * Write the response's NSID option (code, length, then the @p len bytes of @p id as they
 * are) into @p out (at least DNS_NSID_HEADER_LEN + @p len bytes). Returns the bytes written.
 */
size_t dns_nsid_write(const uint8_t *id, uint16_t len, uint8_t *out) STEER_NONNULL(3);
