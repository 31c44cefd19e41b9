/*
 * Parsing of incoming DNS queries (header, question, EDNS OPT). No I/O, no allocation; the
 * parsed query borrows the packet buffer.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "dns/const.h"
#include "dns/cookie.h"
#include "dns/ecs.h"

typedef enum {
	DNS_QUERY_OK,      /* answerable */
	DNS_QUERY_DROP,    /* no reply: shorter than a header, or QR=1 (never answer a response) */
	DNS_QUERY_FORMERR, /* reply FORMERR; the question is echoed only if it parsed, the OPT
	                    * (has_edns) only if the whole message parsed (as Knot DNS does) */
	DNS_QUERY_NOTIMP,  /* reply NOTIMP: opcode we do not implement */
	DNS_QUERY_BADVERS, /* reply BADVERS: EDNS version above 0 (RFC 6891 6.1.3) */
} dns_query_status_t;

typedef struct {
	uint16_t id;
	uint16_t flags; /* host order, as received */
	uint8_t opcode;
	uint16_t qdcount, ancount, nscount, arcount;

	bool has_question;
	const uint8_t *question;         /* the question section as received (owner case kept) */
	size_t question_len;             /* bytes of the question section */
	uint8_t qname[DNS_DNAME_MAXLEN]; /* lowercase, uncompressed */
	uint8_t qname_len;
	uint16_t qtype;
	uint16_t qclass;

	bool has_edns;
	uint8_t edns_version;
	uint16_t edns_payload; /* advertised UDP payload size, raised to 512 when smaller */
	bool edns_do;

	bool has_ecs; /* a valid EDNS Client Subnet option (RFC 7871) is in @c ecs */
	dns_ecs_t ecs;
	bool has_nsid; /* the OPT asks for the server's identity (RFC 5001) */

	/* An SOA in the authority section: an IXFR client's current version (RFC 1995 3). */
	bool has_soa;
	uint32_t soa_serial;
	/* A TSIG record (RFC 8945), which may only be the last additional record: where it
	 * begins, 0 when there is none. @c msg and @c msg_len are the whole query, for its MAC. */
	size_t tsig_offset;
	const uint8_t *msg;
	size_t msg_len;
	bool has_expire; /* the OPT carries the EXPIRE option (RFC 7314) */
	/* A well-formed COOKIE option (RFC 7873), the first one, is in @c cookie. */
	bool has_cookie;
	dns_cookie_t cookie;
} dns_query_t;

/**
 * Parse the query in @p pkt (@p len bytes). Fills @p q as far as parsing got and returns what
 * to do with it. Thread-safe; @p q borrows @p pkt.
 */
dns_query_status_t dns_query_parse(const uint8_t *pkt, size_t len, dns_query_t *q)
    STEER_NONNULL(1, 3);

/**
 * Whether @p pkt (@p len bytes) is the reply to our query @p id asking @p qname (wire form)
 * @p qtype @p qclass: the ID, QR set, opcode QUERY, one question and that very question
 * (names compared case-insensitively). When it is, @p pos is the offset after the question.
 * For the self-made queries of probes and checks; any thread.
 */
bool dns_reply_matches(const uint8_t *pkt, size_t len, uint16_t id, const uint8_t *qname,
                       uint16_t qtype, uint16_t qclass, size_t *pos) STEER_NONNULL(1, 4, 7);
