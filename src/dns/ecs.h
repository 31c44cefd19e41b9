/*
 * EDNS Client Subnet (RFC 7871) option: strict parsing of the query's option and writing the
 * response's. Pure functions, no allocation; used on query threads.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

#define DNS_EDNS_OPT_ECS    8
#define DNS_ECS_FAMILY_IPV4 1
#define DNS_ECS_FAMILY_IPV6 2
/* Option payload: family (2), source and scope prefix lengths (1 + 1), up to 16 address bytes. */
#define DNS_ECS_MAXLEN (4 + 16)

typedef struct {
	uint16_t family;    /* DNS_ECS_FAMILY_IPV4 or _IPV6 */
	uint8_t source_len; /* SOURCE PREFIX-LENGTH */
	uint8_t scope_len;  /* SCOPE PREFIX-LENGTH (0 in every valid query) */
	uint8_t addr[16];   /* network order, bits beyond source_len zero */
} dns_ecs_t;

/**
 * Parse the payload of an ECS option (@p len bytes at @p data) from a query. Everything
 * RFC 7871 section 6 rules out is an error, to be answered with FORMERR: an unknown family, a
 * source prefix longer than the family's address, an address field whose length is not
 * ceil(source/8), address bits set beyond the source prefix, a non-zero scope.
 * Returns 0 or STEER_EMALF.
 */
int dns_ecs_parse(const uint8_t *data, uint16_t len, dns_ecs_t *out) STEER_NONNULL(3) STEER_WUR;

/**
 * Write the response's ECS option (code, length and payload) for the query's @p ecs with
 * SCOPE PREFIX-LENGTH @p scope into @p out (at least 4 + DNS_ECS_MAXLEN bytes). The family,
 * source prefix and address are echoed as received (RFC 7871 7.2.1). Returns the bytes
 * written.
 */
size_t dns_ecs_write(const dns_ecs_t *ecs, uint8_t scope, uint8_t *out) STEER_NONNULL(1, 3);

/** Bytes dns_ecs_write() writes for @p ecs. */
size_t dns_ecs_option_len(const dns_ecs_t *ecs) STEER_NONNULL(1);
