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

/**
 * Add the NSID option with @p id (@p idlen bytes) to the message @p msg (@p len bytes, room
 * for @p limit) whose last record is its OPT, as every response we build has it: the OPT's
 * RDLENGTH grows and the option goes at the end. Returns the new length, or @p len unchanged
 * when the last record is not an OPT, the message does not walk, or the option would not fit
 * in @p limit (RFC 5001 lets a server leave it out). For responses built elsewhere (the
 * forwarder's); no allocation.
 */
size_t dns_nsid_append(uint8_t *msg, size_t len, size_t limit, const uint8_t *id, uint16_t idlen)
    STEER_NONNULL(1);

/**
 * Add the ready-made EDNS option @p option (@p option_len bytes: code, length, payload) to
 * @p msg as dns_nsid_append() adds NSID, with the same conditions: returns the new length,
 * or @p len unchanged when the message does not end with its OPT or the option does not fit
 * @p limit. For options of responses built elsewhere (the forwarder's COOKIE).
 */
size_t dns_edns_option_append(uint8_t *msg, size_t len, size_t limit, const uint8_t *option,
                              size_t option_len) STEER_NONNULL(1);
