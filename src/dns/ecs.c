#include "dns/ecs.h"

#include <string.h>

#include "base/err.h"
#include "dns/wire.h"

static size_t addr_bytes(uint8_t source_len)
{
	return ((size_t)source_len + 7) / 8;
}

int dns_ecs_parse(const uint8_t *data, uint16_t len, dns_ecs_t *out)
{
	if (len < 4)
		return STEER_EMALF;
	out->family = wire_read_u16(data);
	out->source_len = data[2];
	out->scope_len = data[3];
	unsigned max_len;
	if (out->family == DNS_ECS_FAMILY_IPV4)
		max_len = 32;
	else if (out->family == DNS_ECS_FAMILY_IPV6)
		max_len = 128;
	else
		return STEER_EMALF;
	size_t n = addr_bytes(out->source_len);
	if (out->source_len > max_len || out->scope_len != 0 || len - 4u != n)
		return STEER_EMALF;
	memset(out->addr, 0, sizeof(out->addr));
	if (n > 0) {
		memcpy(out->addr, data + 4, n);
		unsigned spare = (unsigned)(n * 8 - out->source_len);
		if (out->addr[n - 1] & ((1u << spare) - 1))
			return STEER_EMALF; /* bits beyond the source prefix */
	}
	return 0;
}

size_t dns_ecs_option_len(const dns_ecs_t *ecs)
{
	return 4 + 4 + addr_bytes(ecs->source_len);
}

size_t dns_ecs_write(const dns_ecs_t *ecs, uint8_t scope, uint8_t *out)
{
	size_t n = addr_bytes(ecs->source_len);
	wire_write_u16(out, DNS_EDNS_OPT_ECS);
	wire_write_u16(out + 2, (uint16_t)(4 + n));
	wire_write_u16(out + 4, ecs->family);
	out[6] = ecs->source_len;
	out[7] = scope;
	memcpy(out + 8, ecs->addr, n);
	return 8 + n;
}
