/*
 * The two bodies measured-path steering moves over HTTP, and their codecs:
 *
 *   site table  what a datacenter's steer-probe agent measured: per client prefix the smoothed
 *               RTT, loss, hops and age (GET <agent>/paths/table, application/vnd.steer.paths)
 *   demand      which client prefixes a DNS node answers, by volume, and which it could not
 *               decide for (GET <node>/paths/demand, application/vnd.steer.demand)
 *
 * Both are compact fixed-size big-endian rows behind a small header, sorted, so a million
 * rows encode and decode in tens of milliseconds and the node merges tables with a linear
 * merge-join. The layouts are specified below, byte by byte; the decoders check every field
 * and give a clear reason for anything else (a node must survive an agent that returns
 * garbage). Pure functions; any thread.
 *
 * Site table, version 1:
 *   header, 32 bytes:  "STPT" | version u8 = 1 | flags u8 = 0 | reserved u16 = 0
 *                      | generated_ms u64 (unix ms) | n4 u32 | n6 u32 | name_len u8 | pad[7] = 0
 *   name:              name_len bytes, the datacenter name (1..63 of [A-Za-z0-9._-])
 *   n4 IPv4 rows, 12 bytes each, strictly ascending by (prefix, plen):
 *                      prefix u32 (host bits zero) | plen u8 (8..32) | loss u8 (0..100 %)
 *                      | rtt u16 (smoothed RTT in 0.1 ms; 0xffff = no reply) | hops u8 (0 =
 *                      unknown) | answered u8 (samples answered in the last measurement)
 *                      | age_s u16 (seconds since measured at generated_ms, saturating);
 *                      a row with rtt 0xffff has answered 0
 *   n6 IPv6 rows, 16 bytes each: prefix u64 (the top 64 bits, host bits zero) | plen u8
 *                      (16..64) | the same 7 fields
 *   nothing after the last row.
 *
 * Demand, version 1:
 *   header, 24 bytes:  "STPD" | version u8 = 1 | flags u8 = 0 | reserved u16 = 0
 *                      | generated_ms u64 | n u32 | reserved u32 = 0
 *   n rows, 40 bytes each, strictly ascending by (family, prefix, plen):
 *                      family u8 (4 or 6) | plen u8 | flags u8 (GSLB_DEMAND_*) | reserved u8
 *                      | volume u32 | prefix[16] (IPv4 in the first 4 bytes, host bits zero)
 *                      | probe[16] (the address to probe, inside the prefix: the resolver
 *                      seen, or for ECS rows an address inside the client prefix); plen
 *                      IPv4 8..32, IPv6 16..64; IPv4 addresses in the first 4 bytes, the
 *                      other 12 zero
 *
 * Decoder errors name the row (0-based within its family, or within the demand body), its
 * prefix and the reason: "IPv4 row 17 (10.0.3.0/24): prefixes out of order".
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

#define GSLB_PATHFMT_NAME_MAX   63
#define GSLB_PATHFMT_RTT_NONE   UINT16_C(0xffff) /* rtt of a prefix that never answered */
#define GSLB_PATHFMT_TABLE_HDR  32
#define GSLB_PATHFMT_ROW4       12
#define GSLB_PATHFMT_ROW6       16
#define GSLB_PATHFMT_DEMAND_HDR 24
#define GSLB_PATHFMT_DEMAND_ROW 40

/* One measured prefix. IPv4 prefixes are in the top 32 bits of @c prefix (u64, host order),
 * IPv6 prefixes are the top 64 bits of the address: one key type for both families. */
typedef struct {
	uint64_t prefix;  /* host order, see above; bits beyond plen zero */
	uint8_t plen;     /* IPv4 8..32, IPv6 16..64 */
	uint8_t loss;     /* percent 0..100 */
	uint16_t rtt;     /* 0.1 ms units, GSLB_PATHFMT_RTT_NONE = no reply */
	uint8_t hops;     /* 0 = unknown */
	uint8_t answered; /* samples answered in the last measurement */
	uint16_t age_s;   /* seconds, saturating at 65535 */
} gslb_path_row_t;

/* A decoded (or to be encoded) site table. Rows borrowed by the encoder, owned after decode. */
typedef struct {
	char name[GSLB_PATHFMT_NAME_MAX + 1];
	uint64_t generated_ms;
	gslb_path_row_t *rows4; /* ascending */
	size_t n4;
	gslb_path_row_t *rows6; /* ascending */
	size_t n6;
} gslb_path_table_t;

#define GSLB_DEMAND_ECS    0x01u /* an ECS client prefix (probe = an address inside it) */
#define GSLB_DEMAND_URGENT 0x02u /* the node had no usable measurement for it */

typedef struct {
	uint8_t family; /* 4 or 6 */
	uint8_t plen;
	uint8_t flags; /* GSLB_DEMAND_* */
	uint32_t volume;
	uint8_t prefix[16];
	uint8_t probe[16];
} gslb_demand_row_t;

typedef struct {
	uint64_t generated_ms;
	gslb_demand_row_t *rows; /* ascending */
	size_t n;
} gslb_demand_t;

/**
 * Check @p t against the format (what gslb_pathfmt_encode_table() refuses). Returns 0, or
 * STEER_EINVAL with the reason in @p err (may be NULL) worded like the decoder's. Any thread.
 */
int gslb_pathfmt_check_table(const gslb_path_table_t *t, char *err, size_t errlen) STEER_NONNULL(1);

/** Bytes gslb_pathfmt_encode_table() writes for @p t. */
size_t gslb_pathfmt_table_size(const gslb_path_table_t *t) STEER_NONNULL(1);

/**
 * Encode @p t into @p buf (at least gslb_pathfmt_table_size() bytes). Returns the bytes
 * written, or 0 when @p t breaks the format (unsorted rows, a bad name, plen or value):
 * what the encoder writes the decoder accepts. gslb_pathfmt_check_table() says why.
 */
size_t gslb_pathfmt_encode_table(const gslb_path_table_t *t, uint8_t *buf, size_t len)
    STEER_NONNULL(1, 2);

/**
 * Decode a site table of @p len bytes into @p out (rows allocated; free with
 * gslb_pathfmt_table_free()), at most @p max_rows rows in all. Returns 0, or STEER_EINVAL
 * with the reason in @p err ("row 17: IPv4 prefixes out of order", "truncated header", ...).
 * On error @p out holds nothing to free.
 */
int gslb_pathfmt_decode_table(const uint8_t *buf, size_t len, size_t max_rows,
                              gslb_path_table_t *out, char *err, size_t errlen)
    STEER_NONNULL(1, 4, 5) STEER_WUR;

/** Free the rows of a decoded table (the struct itself is the caller's). */
void gslb_pathfmt_table_free(gslb_path_table_t *t) STEER_NONNULL(1);

/** Check @p d against the format, like gslb_pathfmt_check_table(). */
int gslb_pathfmt_check_demand(const gslb_demand_t *d, char *err, size_t errlen) STEER_NONNULL(1);

/** Bytes gslb_pathfmt_encode_demand() writes for @p d. */
size_t gslb_pathfmt_demand_size(const gslb_demand_t *d) STEER_NONNULL(1);

/** Encode @p d like gslb_pathfmt_encode_table(): bytes written, 0 when @p d is invalid. */
size_t gslb_pathfmt_encode_demand(const gslb_demand_t *d, uint8_t *buf, size_t len)
    STEER_NONNULL(1, 2);

/** Decode a demand body like gslb_pathfmt_decode_table(); free with gslb_pathfmt_demand_free(). */
int gslb_pathfmt_decode_demand(const uint8_t *buf, size_t len, size_t max_rows, gslb_demand_t *out,
                               char *err, size_t errlen) STEER_NONNULL(1, 4, 5) STEER_WUR;

/** Free the rows of a decoded demand body. */
void gslb_pathfmt_demand_free(gslb_demand_t *d) STEER_NONNULL(1);

/**
 * The key of @p addr (4 or 16 bytes, network order) of @p family (AF_INET / AF_INET6) cut to
 * @p plen bits (IPv4 at most 32, IPv6 at most 64), as gslb_path_row_t.prefix holds it.
 * Any thread; no allocation.
 */
uint64_t gslb_pathfmt_key(int family, const uint8_t *addr, unsigned plen) STEER_NONNULL(2);
