/*
 * Bounds-checked cursor over a byte buffer with a sticky error: once a read or write fails,
 * every later call is a no-op and the caller checks ctx.err once at the end. No allocation.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"

typedef struct {
	uint8_t *start;
	uint8_t *pos;
	uint8_t *end;
	int err; /* 0 or the first error (STEER_ETRUNC on read, STEER_ESPACE on write) */
} wire_ctx_t;

static inline wire_ctx_t wire_ctx_init(uint8_t *buf, size_t len)
{
	wire_ctx_t ctx = {.start = buf, .pos = buf, .end = buf + len, .err = 0};
	return ctx;
}

static inline wire_ctx_t wire_ctx_init_const(const uint8_t *buf, size_t len)
{
	return wire_ctx_init((uint8_t *)buf, len);
}

static inline size_t wire_ctx_available(const wire_ctx_t *ctx)
{
	return ctx->err ? 0 : (size_t)(ctx->end - ctx->pos);
}

static inline size_t wire_ctx_offset(const wire_ctx_t *ctx)
{
	return (size_t)(ctx->pos - ctx->start);
}

static inline int wire_ctx_need(wire_ctx_t *ctx, size_t n, int err)
{
	if (ctx->err)
		return ctx->err;
	if ((size_t)(ctx->end - ctx->pos) < n)
		ctx->err = err;
	return ctx->err;
}

static inline void wire_ctx_skip(wire_ctx_t *ctx, size_t n)
{
	if (wire_ctx_need(ctx, n, STEER_ETRUNC) == 0)
		ctx->pos += n;
}

static inline uint8_t wire_ctx_read_u8(wire_ctx_t *ctx)
{
	if (wire_ctx_need(ctx, 1, STEER_ETRUNC))
		return 0;
	return *ctx->pos++;
}

static inline uint16_t wire_ctx_read_u16(wire_ctx_t *ctx)
{
	if (wire_ctx_need(ctx, 2, STEER_ETRUNC))
		return 0;
	uint16_t v = (uint16_t)(ctx->pos[0] << 8 | ctx->pos[1]);
	ctx->pos += 2;
	return v;
}

static inline uint32_t wire_ctx_read_u32(wire_ctx_t *ctx)
{
	if (wire_ctx_need(ctx, 4, STEER_ETRUNC))
		return 0;
	uint32_t v = (uint32_t)ctx->pos[0] << 24 | (uint32_t)ctx->pos[1] << 16 |
	             (uint32_t)ctx->pos[2] << 8 | ctx->pos[3];
	ctx->pos += 4;
	return v;
}

static inline void wire_ctx_write_u8(wire_ctx_t *ctx, uint8_t v)
{
	if (wire_ctx_need(ctx, 1, STEER_ESPACE) == 0)
		*ctx->pos++ = v;
}

static inline void wire_ctx_write_u16(wire_ctx_t *ctx, uint16_t v)
{
	if (wire_ctx_need(ctx, 2, STEER_ESPACE) == 0) {
		ctx->pos[0] = (uint8_t)(v >> 8);
		ctx->pos[1] = (uint8_t)v;
		ctx->pos += 2;
	}
}

static inline void wire_ctx_write_u32(wire_ctx_t *ctx, uint32_t v)
{
	if (wire_ctx_need(ctx, 4, STEER_ESPACE) == 0) {
		ctx->pos[0] = (uint8_t)(v >> 24);
		ctx->pos[1] = (uint8_t)(v >> 16);
		ctx->pos[2] = (uint8_t)(v >> 8);
		ctx->pos[3] = (uint8_t)v;
		ctx->pos += 4;
	}
}

static inline void wire_ctx_write(wire_ctx_t *ctx, const void *data, size_t n)
{
	if (n && wire_ctx_need(ctx, n, STEER_ESPACE) == 0) {
		memcpy(ctx->pos, data, n);
		ctx->pos += n;
	}
}

/* Unaligned big-endian helpers for code that already checked bounds. */
static inline uint16_t wire_read_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t wire_read_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void wire_write_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void wire_write_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
