/*
 * NSID option writing (see nsid.h).
 */
#include "dns/nsid.h"

#include <string.h>

#include "dns/const.h"
#include "dns/dname.h"
#include "dns/wire.h"

size_t dns_nsid_write(const uint8_t *id, uint16_t len, uint8_t *out)
{
	wire_write_u16(out, DNS_EDNS_OPT_NSID);
	wire_write_u16(out + 2, len);
	if (len > 0)
		memcpy(out + DNS_NSID_HEADER_LEN, id, len);
	return DNS_NSID_HEADER_LEN + (size_t)len;
}

/* Offset of the last record of @p msg, or 0 when there is none or the message does not walk. */
static size_t last_record(const uint8_t *msg, size_t len)
{
	if (len < DNS_HEADER_LEN)
		return 0;
	size_t pos = DNS_HEADER_LEN, last = 0;
	uint8_t name[DNS_DNAME_MAXLEN];
	for (unsigned i = 0, qd = wire_read_u16(msg + 4); i < qd; i++) {
		if (dname_unpack(msg, len, &pos, name) < 0 || pos + 4 > len)
			return 0;
		pos += 4;
	}
	unsigned rrs =
	    (unsigned)wire_read_u16(msg + 6) + wire_read_u16(msg + 8) + wire_read_u16(msg + 10);
	for (unsigned i = 0; i < rrs; i++) {
		last = pos;
		if (dname_unpack(msg, len, &pos, name) < 0 || pos + 10 > len)
			return 0;
		pos += 10 + (size_t)wire_read_u16(msg + pos + 8);
		if (pos > len)
			return 0;
	}
	return pos == len ? last : 0;
}

/* Grow the OPT that ends @p msg by @p add bytes of option: the offset where they go (the old
 * end), or 0 when the message does not end with an OPT or the option does not fit @p limit. */
static size_t opt_grow(uint8_t *msg, size_t len, size_t limit, size_t add)
{
	size_t opt = last_record(msg, len);
	/* An OPT is the root name (one zero byte) and must be in the additional section. */
	if (opt == 0 || wire_read_u16(msg + 10) == 0 || msg[opt] != 0 ||
	    wire_read_u16(msg + opt + 1) != DNS_TYPE_OPT || len + add > limit ||
	    wire_read_u16(msg + opt + 9) + add > UINT16_MAX)
		return 0;
	wire_write_u16(msg + opt + 9, (uint16_t)(wire_read_u16(msg + opt + 9) + add));
	return len;
}

size_t dns_nsid_append(uint8_t *msg, size_t len, size_t limit, const uint8_t *id, uint16_t idlen)
{
	size_t at = opt_grow(msg, len, limit, DNS_NSID_HEADER_LEN + (size_t)idlen);
	return at == 0 ? len : len + dns_nsid_write(id, idlen, msg + at);
}

size_t dns_edns_option_append(uint8_t *msg, size_t len, size_t limit, const uint8_t *option,
                              size_t option_len)
{
	size_t at = opt_grow(msg, len, limit, option_len);
	if (at == 0 || option_len == 0)
		return len;
	memcpy(msg + at, option, option_len);
	return len + option_len;
}
