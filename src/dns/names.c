/* Rcode and RR type mnemonics; see names.h. */
#include "dns/names.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "base/err.h"
#include "dns/const.h"

static const char *const rcode_names[] = {
    [DNS_RCODE_NOERROR] = "NOERROR",
    [DNS_RCODE_FORMERR] = "FORMERR",
    [DNS_RCODE_SERVFAIL] = "SERVFAIL",
    [DNS_RCODE_NXDOMAIN] = "NXDOMAIN",
    [DNS_RCODE_NOTIMP] = "NOTIMP",
    [DNS_RCODE_REFUSED] = "REFUSED",
    [6] = "YXDOMAIN",
    [7] = "YXRRSET",
    [8] = "NXRRSET",
    [DNS_RCODE_NOTAUTH] = "NOTAUTH",
    [10] = "NOTZONE",
    [11] = "DSOTYPENI",
    [DNS_RCODE_BADVERS] = "BADVERS",
};

static const struct {
	uint16_t type;
	const char *name;
} type_names[] = {
    {DNS_TYPE_A, "A"},         {DNS_TYPE_NS, "NS"},
    {DNS_TYPE_MD, "MD"},       {DNS_TYPE_MF, "MF"},
    {DNS_TYPE_CNAME, "CNAME"}, {DNS_TYPE_SOA, "SOA"},
    {DNS_TYPE_MB, "MB"},       {DNS_TYPE_MG, "MG"},
    {DNS_TYPE_MR, "MR"},       {DNS_TYPE_NULL, "NULL"},
    {DNS_TYPE_PTR, "PTR"},     {DNS_TYPE_HINFO, "HINFO"},
    {DNS_TYPE_MINFO, "MINFO"}, {DNS_TYPE_MX, "MX"},
    {DNS_TYPE_TXT, "TXT"},     {DNS_TYPE_AAAA, "AAAA"},
    {DNS_TYPE_SRV, "SRV"},     {DNS_TYPE_NAPTR, "NAPTR"},
    {DNS_TYPE_DNAME, "DNAME"}, {DNS_TYPE_OPT, "OPT"},
    {DNS_TYPE_DS, "DS"},       {DNS_TYPE_RRSIG, "RRSIG"},
    {DNS_TYPE_NSEC, "NSEC"},   {DNS_TYPE_DNSKEY, "DNSKEY"},
    {DNS_TYPE_NSEC3, "NSEC3"}, {DNS_TYPE_NSEC3PARAM, "NSEC3PARAM"},
    {DNS_TYPE_TLSA, "TLSA"},   {DNS_TYPE_SVCB, "SVCB"},
    {DNS_TYPE_HTTPS, "HTTPS"}, {DNS_TYPE_TKEY, "TKEY"},
    {DNS_TYPE_TSIG, "TSIG"},   {DNS_TYPE_IXFR, "IXFR"},
    {DNS_TYPE_AXFR, "AXFR"},   {DNS_TYPE_MAILB, "MAILB"},
    {DNS_TYPE_MAILA, "MAILA"}, {DNS_TYPE_ANY, "ANY"},
    {DNS_TYPE_CAA, "CAA"},
};

const char *dns_rcode_name(unsigned rcode)
{
	return rcode < STEER_ARRAY_LEN(rcode_names) ? rcode_names[rcode] : NULL;
}

const char *dns_type_name(uint16_t type)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(type_names); i++) {
		if (type_names[i].type == type)
			return type_names[i].name;
	}
	return NULL;
}

const char *dns_type_str(uint16_t type, char *buf, size_t size)
{
	const char *name = dns_type_name(type);
	if (name != NULL)
		snprintf(buf, size, "%s", name);
	else
		snprintf(buf, size, "TYPE%u", type);
	return buf;
}

int dns_type_parse(const char *text, uint16_t *type)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(type_names); i++) {
		if (strcasecmp(type_names[i].name, text) == 0) {
			*type = type_names[i].type;
			return 0;
		}
	}
	if (strncasecmp(text, "TYPE", 4) != 0 || text[4] < '0' || text[4] > '9')
		return STEER_EINVAL;
	char *end = NULL;
	errno = 0;
	unsigned long n = strtoul(text + 4, &end, 10);
	if (*end != '\0' || errno == ERANGE || n == 0 || n > UINT16_MAX)
		return STEER_EINVAL;
	*type = (uint16_t)n;
	return 0;
}

int dns_rcode_parse(const char *text, unsigned *rcode)
{
	for (unsigned i = 0; i < STEER_ARRAY_LEN(rcode_names); i++) {
		if (rcode_names[i] != NULL && strcasecmp(rcode_names[i], text) == 0) {
			*rcode = i;
			return 0;
		}
	}
	return STEER_EINVAL;
}
