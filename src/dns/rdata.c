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
	default:
		return NULL;
	}
	if (rdlen <= skip || !dname_is_valid(rdata + skip, rdlen - skip))
		return NULL;
	return rdata + skip;
}
