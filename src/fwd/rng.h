/*
 * The forwarder's random numbers: upstream query IDs, source ports, 0x20 case bits and probe
 * nonces. Off-path spoofing resistance rests on these being unpredictable, and a client can
 * make us query its own server and watch the IDs and ports we use, so a statistical generator
 * (splitmix, xoshiro) whose state can be recovered from its output is not enough. This is the
 * ChaCha20 block function (RFC 8439) run as a keystream generator, as OpenBSD's arc4random and
 * Unbound's do: key from getrandom() at init, 64-bit block counter, 16 words per block.
 *
 * One state per thread, owned by that thread; no locks, no allocation, no I/O.
 */
#pragma once

#include <stdint.h>

#include "base/compiler.h"

#define FWD_RNG_SEED_LEN 32 /* a ChaCha20 key */

typedef struct {
	uint32_t key[8];
	uint64_t block; /* next block counter */
	uint32_t out[16];
	unsigned avail; /* unused words at the end of out[] */
} fwd_rng_t;

/**
 * Key @p rng with @p seed (FWD_RNG_SEED_LEN bytes, from getrandom() in the daemon; fixed in
 * tests). The caller owns both; @p seed may be wiped afterwards. Any thread.
 */
void fwd_rng_init(fwd_rng_t *rng, const uint8_t seed[FWD_RNG_SEED_LEN]) STEER_NONNULL(1, 2);

/** The next 32 random bits. The owning thread only. */
uint32_t fwd_rng_u32(fwd_rng_t *rng) STEER_NONNULL(1);

/** A uniform number in [0, @p range) without modulo bias; 0 when @p range is 0. */
uint32_t fwd_rng_below(fwd_rng_t *rng, uint32_t range) STEER_NONNULL(1);
