/*
 * Access lists for zone transfers and NOTIFY: each entry is a client address range, a TSIG
 * key, or both (then both must match). Immutable once built; matched on query threads without
 * allocation.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "dns/const.h"

typedef struct {
	bool any_address;      /* no address range: any client signing with @c key */
	steer_prefix_t prefix; /* when !any_address */
	bool has_key;
	uint8_t key[DNS_DNAME_MAXLEN]; /* TSIG key name, lowercase wire, when has_key */
	uint8_t key_len;
} dns_acl_entry_t;

/**
 * Whether a client at @p remote whose request was signed with the (verified) key @p key
 * (lowercase wire name, NULL when unsigned) matches an entry of @p acl (@p n entries).
 * An empty list matches nobody.
 */
bool dns_acl_match(const dns_acl_entry_t *acl, size_t n, const steer_sockaddr_t *remote,
                   const uint8_t *key) STEER_NONNULL(3);
