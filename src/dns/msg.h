/*
 * Response builder: header, question echo, resource records with name compression, EDNS OPT.
 * Works on a caller-provided buffer, allocates nothing; one builder per thread at a time.
 *
 * A record that does not fit is not written at all (the message is left as it was) and the
 * call returns STEER_ESPACE, so the caller decides between setting TC and omitting it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "dns/const.h"
#include "dns/pkt.h"

/* Compression targets remembered per message: every label start of every name written in
 * full. Beyond this many, names are still written, just less compressed. */
#define DNS_MSG_COMPR_MAX 128

typedef struct {
	uint8_t *buf;
	size_t limit;      /* current size limit (payload size for UDP, 65535 for TCP) */
	size_t len;        /* bytes written */
	size_t reserved;   /* bytes kept free at the end for the OPT record */
	uint16_t count[3]; /* answer, authority, additional */
	uint16_t n_compr;
	/* The owner of the previous record and where it sits, so the records of one RRset point
	 * at it without searching. */
	const uint8_t *last_owner;
	uint16_t last_owner_off;
	uint16_t compr[DNS_MSG_COMPR_MAX]; /* offsets of names and name suffixes in buf */
} dns_msg_t;

/** Start a response in @p buf (@p cap bytes) with the size limit @p limit (<= @p cap). */
void dns_msg_init(dns_msg_t *msg, uint8_t *buf, size_t limit) STEER_NONNULL(1, 2);

/**
 * Write the header (id and RD/CD copied from @p q, QR set, @p rcode) and echo the question
 * exactly as received when @p q has one, leaving the dns_msg_reserve() bytes free (call it
 * first). Returns 0 or STEER_ESPACE.
 */
int dns_msg_begin(dns_msg_t *msg, const dns_query_t *q, uint8_t rcode) STEER_NONNULL(1, 2);

/** Keep @p bytes free at the end (for OPT) so records never eat into them. */
void dns_msg_reserve(dns_msg_t *msg, size_t bytes) STEER_NONNULL(1);

/**
 * Append one record. @p owner is an uncompressed name (case kept as given); names inside the
 * rdata of the RFC 1035 types (NS, CNAME, SOA, PTR, MX, MINFO, MB, MG, MR, MD, MF) are
 * compressed, all other rdata is copied verbatim (RFC 3597 section 4).
 * Returns 0 or STEER_ESPACE (nothing written).
 */
int dns_msg_put_rr(dns_msg_t *msg, enum dns_section section, const uint8_t *owner, uint16_t type,
                   uint16_t rclass, uint32_t ttl, const uint8_t *rdata, uint16_t rdlen)
    STEER_NONNULL(1, 3);

/**
 * Append the OPT record (uses the reserved space, which is then released): @p payload is our
 * UDP size, @p ext_rcode the upper 8 bits of the rcode, @p do_bit echoes DO, @p options
 * (@p options_len bytes, may be NULL when 0) are the already encoded EDNS options.
 * Returns 0 or STEER_ESPACE.
 */
int dns_msg_put_opt(dns_msg_t *msg, uint16_t payload, uint8_t ext_rcode, bool do_bit,
                    const uint8_t *options, uint16_t options_len) STEER_NONNULL(1);

/** Set or clear header flag bits (DNS_FLAG_*). */
void dns_msg_set_flags(dns_msg_t *msg, uint16_t set, uint16_t clear) STEER_NONNULL(1);

/** Set the 4-bit header rcode. */
void dns_msg_set_rcode(dns_msg_t *msg, uint8_t rcode) STEER_NONNULL(1);

/**
 * Return the message to an earlier state: @p len bytes and section counts @p count, as saved
 * from msg->len and msg->count before writing. Compression targets past @p len are forgotten.
 */
void dns_msg_rewind(dns_msg_t *msg, size_t len, const uint16_t count[3]) STEER_NONNULL(1, 3);

/** Write the section counts into the header and return the message length. */
size_t dns_msg_finish(dns_msg_t *msg) STEER_NONNULL(1);
