/*
 * DNS protocol constants (RFC 1035, 6891 and the type registry).
 */
#pragma once

#include <stdint.h>

#define DNS_HEADER_LEN   12
#define DNS_DNAME_MAXLEN 255 /* wire form, including the root label */
#define DNS_LABEL_MAXLEN 63
#define DNS_MSG_MAXLEN   65535
#define DNS_UDP_MINLEN   512 /* RFC 1035 limit without EDNS; RFC 6891 floor for payload size */
/* DNS Flag Day 2020: a payload size that avoids IP fragmentation on virtually every path. */
#define DNS_EDNS_DEFAULT_PAYLOAD 1232
#define DNS_OPT_RR_LEN           11 /* root owner, type, class, ttl, rdlength */

enum dns_class { DNS_CLASS_IN = 1, DNS_CLASS_CH = 3, DNS_CLASS_NONE = 254, DNS_CLASS_ANY = 255 };

enum dns_type {
	DNS_TYPE_A = 1,
	DNS_TYPE_NS = 2,
	DNS_TYPE_MD = 3,
	DNS_TYPE_MF = 4,
	DNS_TYPE_CNAME = 5,
	DNS_TYPE_SOA = 6,
	DNS_TYPE_MB = 7,
	DNS_TYPE_MG = 8,
	DNS_TYPE_MR = 9,
	DNS_TYPE_NULL = 10,
	DNS_TYPE_PTR = 12,
	DNS_TYPE_HINFO = 13,
	DNS_TYPE_MINFO = 14,
	DNS_TYPE_MX = 15,
	DNS_TYPE_TXT = 16,
	DNS_TYPE_AAAA = 28,
	DNS_TYPE_SRV = 33,
	DNS_TYPE_NAPTR = 35,
	DNS_TYPE_DNAME = 39,
	DNS_TYPE_OPT = 41,
	DNS_TYPE_DS = 43,
	DNS_TYPE_RRSIG = 46,
	DNS_TYPE_NSEC = 47,
	DNS_TYPE_DNSKEY = 48,
	DNS_TYPE_NSEC3 = 50,
	DNS_TYPE_NSEC3PARAM = 51,
	DNS_TYPE_TLSA = 52,
	DNS_TYPE_SVCB = 64,
	DNS_TYPE_HTTPS = 65,
	DNS_TYPE_TKEY = 249,
	DNS_TYPE_TSIG = 250,
	DNS_TYPE_IXFR = 251,
	DNS_TYPE_AXFR = 252,
	DNS_TYPE_MAILB = 253,
	DNS_TYPE_MAILA = 254,
	DNS_TYPE_ANY = 255,
	DNS_TYPE_CAA = 257,
};

/* EDNS EXPIRE option (RFC 7314): a secondary zone's remaining expire time. */
#define DNS_EDNS_OPT_EXPIRE 9

enum dns_opcode { DNS_OPCODE_QUERY = 0, DNS_OPCODE_NOTIFY = 4, DNS_OPCODE_UPDATE = 5 };

enum dns_rcode {
	DNS_RCODE_NOERROR = 0,
	DNS_RCODE_FORMERR = 1,
	DNS_RCODE_SERVFAIL = 2,
	DNS_RCODE_NXDOMAIN = 3,
	DNS_RCODE_NOTIMP = 4,
	DNS_RCODE_REFUSED = 5,
	DNS_RCODE_NOTAUTH = 9,
	DNS_RCODE_BADVERS = 16, /* extended: upper 8 bits live in the OPT TTL */
};

/* Header flag bits in the 16-bit flags word (host order). */
#define DNS_FLAG_QR      0x8000
#define DNS_FLAG_AA      0x0400
#define DNS_FLAG_TC      0x0200
#define DNS_FLAG_RD      0x0100
#define DNS_FLAG_RA      0x0080
#define DNS_FLAG_AD      0x0020
#define DNS_FLAG_CD      0x0010
#define DNS_OPCODE_SHIFT 11
#define DNS_OPCODE_MASK  0x7800
#define DNS_RCODE_MASK   0x000f

#define DNS_EDNS_DO 0x8000 /* in the OPT TTL's low 16 bits */

enum dns_section { DNS_SEC_ANSWER = 0, DNS_SEC_AUTHORITY = 1, DNS_SEC_ADDITIONAL = 2 };
