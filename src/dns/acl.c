/*
 * Access lists: address ranges and TSIG key names, see acl.h.
 */
#include "dns/acl.h"

#include <string.h>

static bool entry_match(const dns_acl_entry_t *e, const steer_sockaddr_t *remote,
                        const uint8_t *key)
{
	if (!e->any_address && !steer_prefix_match(&e->prefix, remote))
		return false;
	if (!e->has_key)
		return true;
	/* The key names are lowercase wire names: equal names have equal bytes. */
	return key != NULL && memcmp(e->key, key, e->key_len) == 0;
}

bool dns_acl_match(const dns_acl_entry_t *acl, size_t n, const steer_sockaddr_t *remote,
                   const uint8_t *key)
{
	for (size_t i = 0; i < n; i++) {
		if (entry_match(&acl[i], remote, key))
			return true;
	}
	return false;
}
