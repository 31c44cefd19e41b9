/*
 * Mnemonics of DNS rcodes and RR types (RFC 1035, RFC 6895 registries), both ways: the one
 * table the stats, the zone loader's messages and the health probes print with. Pure data,
 * any thread, no allocation.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

/** The mnemonic of rcode @p rcode ("NXDOMAIN", "BADVERS"), or NULL for an unassigned one. */
const char *dns_rcode_name(unsigned rcode);

/** The mnemonic of RR type @p type ("AAAA", "CAA"), or NULL for one without a mnemonic here. */
const char *dns_type_name(uint16_t type);

/**
 * @p type as text in @p buf (@p size bytes, at least 12): its mnemonic, else the RFC 3597
 * form "TYPE<n>". Returns @p buf.
 */
const char *dns_type_str(uint16_t type, char *buf, size_t size) STEER_NONNULL(2);

/**
 * Parse a type mnemonic (case-insensitive) or the RFC 3597 form "TYPE<n>" (1..65535) into
 * @p type. Returns 0, or STEER_EINVAL for anything else (type 0 included).
 */
int dns_type_parse(const char *text, uint16_t *type) STEER_NONNULL(1, 2) STEER_WUR;

/** Parse an rcode mnemonic (case-insensitive) into @p rcode. Returns 0 or STEER_EINVAL. */
int dns_rcode_parse(const char *text, unsigned *rcode) STEER_NONNULL(1, 2) STEER_WUR;
