/*
 * SipHash (Aumasson and Bernstein): a keyed hash for tables whose keys come from the network,
 * so that a client cannot aim many keys at one bucket. SipHash-2-4 is the standard variant
 * (DNS server cookies, RFC 9018, depend on its exact output); SipHash-1-3 is the faster one for
 * in-process tables. Pure functions, no allocation; any thread.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

/** The 128-bit key @p bytes as the reference implementation reads it (two little-endian words). */
void steer_siphash_key(const uint8_t bytes[16], uint64_t *k0, uint64_t *k1) STEER_NONNULL(1, 2, 3);

/** SipHash-2-4 of @p len bytes at @p data under the key (@p k0, @p k1). */
uint64_t steer_siphash24(uint64_t k0, uint64_t k1, const void *data, size_t len);

/** SipHash-1-3 of @p len bytes at @p data under the key (@p k0, @p k1). */
uint64_t steer_siphash13(uint64_t k0, uint64_t k1, const void *data, size_t len);
