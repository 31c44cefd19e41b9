/*
 * SipHash, see siphash.h. Written here rather than taken from a library: it is a few dozen
 * lines on the query path, where a library call would cost more than the hash.
 */
#include "base/siphash.h"

static inline uint64_t rotl(uint64_t x, int b)
{
	return x << b | x >> (64 - b);
}

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

typedef struct {
	uint64_t v0, v1, v2, v3;
} sip_state_t;

static inline void sip_round(sip_state_t *s)
{
	s->v0 += s->v1;
	s->v1 = rotl(s->v1, 13) ^ s->v0;
	s->v0 = rotl(s->v0, 32);
	s->v2 += s->v3;
	s->v3 = rotl(s->v3, 16) ^ s->v2;
	s->v0 += s->v3;
	s->v3 = rotl(s->v3, 21) ^ s->v0;
	s->v2 += s->v1;
	s->v1 = rotl(s->v1, 17) ^ s->v2;
	s->v2 = rotl(s->v2, 32);
}

static inline void sip_absorb(sip_state_t *s, uint64_t m, unsigned c_rounds)
{
	s->v3 ^= m;
	for (unsigned r = 0; r < c_rounds; r++)
		sip_round(s);
	s->v0 ^= m;
}

/* The round counts are constants at both call sites, so each variant is unrolled. */
static inline uint64_t siphash(uint64_t k0, uint64_t k1, const uint8_t *in, size_t len,
                               unsigned c_rounds, unsigned d_rounds)
{
	sip_state_t s = {k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL,
	                 k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL};
	size_t full = len & ~(size_t)7;
	for (size_t i = 0; i < full; i += 8)
		sip_absorb(&s, load_le64(in + i), c_rounds);
	uint64_t last = (uint64_t)len << 56;
	for (size_t i = full; i < len; i++)
		last |= (uint64_t)in[i] << (8 * (i - full));
	sip_absorb(&s, last, c_rounds);
	s.v2 ^= 0xff;
	for (unsigned r = 0; r < d_rounds; r++)
		sip_round(&s);
	return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

void steer_siphash_key(const uint8_t bytes[16], uint64_t *k0, uint64_t *k1)
{
	*k0 = load_le64(bytes);
	*k1 = load_le64(bytes + 8);
}

uint64_t steer_siphash24(uint64_t k0, uint64_t k1, const void *data, size_t len)
{
	return siphash(k0, k1, data, len, 2, 4);
}

uint64_t steer_siphash13(uint64_t k0, uint64_t k1, const void *data, size_t len)
{
	return siphash(k0, k1, data, len, 1, 3);
}
