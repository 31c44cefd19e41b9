/*
 * ChaCha20 keystream generator (see rng.h for why not a faster statistical one). A block
 * gives 16 words, so the 20-round cost is shared by about eight upstream queries (ID, port).
 */
#include "fwd/rng.h"

#include <string.h>

#define ROTL(v, n) ((uint32_t)((v) << (n)) | ((v) >> (32 - (n))))
#define QR(a, b, c, d)                                                                             \
	do {                                                                                       \
		a += b;                                                                            \
		d = ROTL(d ^ a, 16);                                                               \
		c += d;                                                                            \
		b = ROTL(b ^ c, 12);                                                               \
		a += b;                                                                            \
		d = ROTL(d ^ a, 8);                                                                \
		c += d;                                                                            \
		b = ROTL(b ^ c, 7);                                                                \
	} while (0)

static void chacha_block(fwd_rng_t *rng)
{
	/* "expand 32-byte k"; words 12-13 the block counter, 14-15 a zero nonce (the original
	 * 64-bit-counter layout, so one key never repeats a block). */
	uint32_t in[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};
	memcpy(in + 4, rng->key, sizeof(rng->key));
	in[12] = (uint32_t)rng->block;
	in[13] = (uint32_t)(rng->block >> 32);
	uint32_t x[16];
	memcpy(x, in, sizeof(x));
	for (int i = 0; i < 10; i++) {
		QR(x[0], x[4], x[8], x[12]);
		QR(x[1], x[5], x[9], x[13]);
		QR(x[2], x[6], x[10], x[14]);
		QR(x[3], x[7], x[11], x[15]);
		QR(x[0], x[5], x[10], x[15]);
		QR(x[1], x[6], x[11], x[12]);
		QR(x[2], x[7], x[8], x[13]);
		QR(x[3], x[4], x[9], x[14]);
	}
	for (int i = 0; i < 16; i++)
		rng->out[i] = x[i] + in[i];
	rng->block++;
	rng->avail = 16;
}

void fwd_rng_init(fwd_rng_t *rng, const uint8_t seed[FWD_RNG_SEED_LEN])
{
	for (int i = 0; i < 8; i++)
		rng->key[i] = (uint32_t)seed[4 * i] | (uint32_t)seed[4 * i + 1] << 8 |
		              (uint32_t)seed[4 * i + 2] << 16 | (uint32_t)seed[4 * i + 3] << 24;
	rng->block = 0;
	rng->avail = 0;
}

uint32_t fwd_rng_u32(fwd_rng_t *rng)
{
	if (rng->avail == 0)
		chacha_block(rng);
	return rng->out[16 - rng->avail--];
}

uint32_t fwd_rng_below(fwd_rng_t *rng, uint32_t range)
{
	if (range == 0)
		return 0;
	/* Lemire's multiply-and-reject: unbiased, and rejects only when range does not divide
	 * 2^32, then rarely. */
	uint64_t m = (uint64_t)fwd_rng_u32(rng) * range;
	uint32_t low = (uint32_t)m;
	if (low < range) {
		uint32_t floor = (uint32_t)-range % range;
		while (low < floor) {
			m = (uint64_t)fwd_rng_u32(rng) * range;
			low = (uint32_t)m;
		}
	}
	return (uint32_t)(m >> 32);
}
