/*
 * Knowledge about rdata layouts needed by answering: where the domain names are.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

/**
 * The target name that triggers additional-section processing (NS nsdname, MX exchange, SRV
 * target), or NULL for other types or malformed rdata. The name is uncompressed wire form.
 */
const uint8_t *dns_rdata_target(uint16_t type, const uint8_t *rdata, uint16_t rdlen);

/**
 * For the types whose rdata names may be compressed (RFC 3597 section 4), the layout as a
 * string of fields: 'n' a name, '2' a 16-bit field, '4' a 32-bit field; NULL for the others,
 * whose rdata is always copied verbatim.
 */
const char *dns_rdata_compressible_layout(uint16_t type);
