/*
 * The wire side of a secondary zone, with no I/O: the queries a secondary sends (SOA, AXFR,
 * NOTIFY), the receiver that turns the messages of an AXFR (RFC 5936) into a list of records
 * within the zone's limits, and the master-file writer for what was received. Any thread;
 * one receiver per transfer.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/compiler.h"
#include "dns/const.h"

/* The SOA fields a secondary runs on (RFC 1035 3.3.13). */
typedef struct {
	uint32_t serial, refresh, retry, expire, minimum;
} xfr_soa_t;

/** Serial @p a is newer than @p b in RFC 1982 arithmetic (undefined halfway pairs: false). */
bool xfr_serial_gt(uint32_t a, uint32_t b);

/** Read the timers from SOA rdata (uncompressed names). Returns false when malformed. */
bool xfr_soa_parse(const uint8_t *rdata, size_t len, xfr_soa_t *soa) STEER_NONNULL(1, 3);

/**
 * Write a query for @p apex (wire) of @p qtype (SOA or AXFR; opcode QUERY) or, with
 * @p notify, a NOTIFY of the SOA carrying @p soa_rdata (may be NULL) in its answer section,
 * into @p buf. Returns the length, or 0 when it does not fit @p cap.
 */
size_t xfr_query_write(uint8_t *buf, size_t cap, uint16_t id, const uint8_t *apex, uint16_t qtype,
                       bool notify, uint32_t ttl, const uint8_t *soa_rdata, uint16_t soa_len)
    STEER_NONNULL(1, 4);

/**
 * Check the reply @p msg (@p len bytes) to our SOA query @p id for @p apex and read the SOA
 * from its answer section. Returns 0, 1 when truncated (TC: ask again over TCP), or -1 with
 * a reason in @p err.
 */
int xfr_soa_reply(const uint8_t *msg, size_t len, uint16_t id, const uint8_t *apex, xfr_soa_t *soa,
                  char *err, size_t errlen) STEER_NONNULL(1, 4, 5, 6);

/** Whether @p msg is the reply to our NOTIFY @p id (any rcode counts as an answer). */
bool xfr_notify_reply(const uint8_t *msg, size_t len, uint16_t id, uint8_t *rcode)
    STEER_NONNULL(1, 4);

/* The state of one incoming AXFR. */
typedef struct {
	uint8_t apex[DNS_DNAME_MAXLEN];
	size_t apex_len;
	uint16_t id;
	uint64_t max_bytes, max_records; /* limits; exceeding one aborts the transfer */
	uint64_t bytes, records;
	unsigned messages;
	bool done;
	xfr_soa_t soa; /* of the first record */
	/* Records received, back to back: owner length (1), owner (lowercase wire), type (2),
	 * ttl (4), rdlength (2), rdata with every name uncompressed. */
	uint8_t *buf;
	size_t len, cap;
	char err[160];
} xfr_rx_t;

/** Start receiving the AXFR of @p apex answering our query @p id, with the given limits. */
void xfr_rx_init(xfr_rx_t *rx, const uint8_t *apex, uint16_t id, uint64_t max_bytes,
                 uint64_t max_records) STEER_NONNULL(1, 2);

/**
 * Feed the next message. Returns 1 when the transfer is complete (the closing SOA arrived),
 * 0 when more messages are due, or -1 with the reason in rx->err (rcode, malformed message,
 * wrong id or question, a limit exceeded): the transfer must then be dropped.
 */
int xfr_rx_feed(xfr_rx_t *rx, const uint8_t *msg, size_t len) STEER_NONNULL(1, 2);

/**
 * Write the received records as a master file (RFC 3597 generic rdata, absolute owners) to
 * @p f. Returns 0 or a negative errno.
 */
int xfr_rx_write(const xfr_rx_t *rx, FILE *f) STEER_NONNULL(1, 2);

/** Free the receiver's records. */
void xfr_rx_free(xfr_rx_t *rx) STEER_NONNULL(1);
