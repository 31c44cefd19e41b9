/*
 * NSID option writing (see nsid.h).
 */
#include "dns/nsid.h"

#include <string.h>

#include "dns/wire.h"

size_t dns_nsid_write(const uint8_t *id, uint16_t len, uint8_t *out)
{
	wire_write_u16(out, DNS_EDNS_OPT_NSID);
	wire_write_u16(out + 2, len);
	if (len > 0)
		memcpy(out + DNS_NSID_HEADER_LEN, id, len);
	return DNS_NSID_HEADER_LEN + (size_t)len;
}
