#include "dns/rdata.h"

#include "dns/const.h"
#include "dns/dname.h"

const char *dns_rdata_compressible_layout(uint16_t type)
{
	switch (type) {
	case DNS_TYPE_NS:
	case DNS_TYPE_MD:
	case DNS_TYPE_MF:
	case DNS_TYPE_CNAME:
	case DNS_TYPE_MB:
	case DNS_TYPE_MG:
	case DNS_TYPE_MR:
	case DNS_TYPE_PTR:
		return "n";
	case DNS_TYPE_SOA:
		return "nn44444";
	case DNS_TYPE_MINFO:
		return "nn";
	case DNS_TYPE_MX:
		return "2n";
	default:
		return NULL;
	}
}

const uint8_t *dns_rdata_target(uint16_t type, const uint8_t *rdata, uint16_t rdlen)
{
	size_t skip;
	switch (type) {
	case DNS_TYPE_NS:
		skip = 0;
		break;
	case DNS_TYPE_MX:
		skip = 2;
		break;
	case DNS_TYPE_SRV:
		skip = 6; /* priority, weight, port */
		break;
	case DNS_TYPE_SVCB:
	case DNS_TYPE_HTTPS:
		skip = 2; /* priority; the parameters follow the target (RFC 9460 4.2) */
		break;
	default:
		return NULL;
	}
	if (rdlen <= skip)
		return NULL;
	const uint8_t *name = rdata + skip;
	size_t max = rdlen - skip, len = 0;
	/* Walk the labels within the rdata: the name may be followed by other fields. */
	while (len < max && name[len] != 0 && name[len] <= DNS_LABEL_MAXLEN)
		len += 1 + (size_t)name[len];
	if (len >= max || name[len] != 0 || len + 1 > DNS_DNAME_MAXLEN)
		return NULL;
	return len == 0 ? NULL : name; /* "." means "the owner" in SVCB: nothing to add */
}
