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

/* What an answer to IXFR turned out to be (RFC 1995 4). */
enum { XFR_RX_UNKNOWN, XFR_RX_AXFR, XFR_RX_IXFR, XFR_RX_UPTODATE };

/* Record kinds in a receiver: the whole zone (AXFR), or an IXFR diff's deletions and
 * additions, in order. */
enum { XFR_OP_ZONE, XFR_OP_DEL, XFR_OP_ADD };

/* The state of one incoming AXFR or IXFR. */
typedef struct {
	uint8_t apex[DNS_DNAME_MAXLEN];
	size_t apex_len;
	uint16_t id;
	bool ixfr_asked;      /* we sent IXFR with @c have_serial */
	uint32_t have_serial; /* our version's serial, when ixfr_asked */
	int mode;             /* XFR_RX_* */
	int diff_state;       /* IXFR: expecting 0 an old SOA, 1 deletions, 2 additions */
	uint32_t diff_new;    /* IXFR: the new serial of the current diff */
	unsigned n_diffs;
	uint64_t seen;                   /* answer records seen */
	uint64_t max_bytes, max_records; /* limits; exceeding one aborts the transfer */
	uint64_t bytes, records;
	unsigned messages;
	bool done;
	xfr_soa_t soa; /* of the first record */
	/* Records received, back to back: op (1, XFR_OP_*), owner length (1), owner (lowercase
	 * wire), type (2), ttl (4), rdlength (2), rdata with every name uncompressed. */
	uint8_t *buf;
	size_t len, cap;
	char err[160];
} xfr_rx_t;

/** Start receiving the AXFR of @p apex answering our query @p id, with the given limits. */
void xfr_rx_init(xfr_rx_t *rx, const uint8_t *apex, uint16_t id, uint64_t max_bytes,
                 uint64_t max_records) STEER_NONNULL(1, 2);

/**
 * Like xfr_rx_init() for an IXFR query sent with our serial @p have_serial: the answer may
 * be a single SOA (up to date), a whole zone (AXFR form) or diffs.
 */
void xfr_rx_init_ixfr(xfr_rx_t *rx, const uint8_t *apex, uint16_t id, uint64_t max_bytes,
                      uint64_t max_records, uint32_t have_serial) STEER_NONNULL(1, 2);

/** An IXFR query for @p apex with our SOA (@p soa_rdata, uncompressed) in authority. */
size_t xfr_ixfr_query_write(uint8_t *buf, size_t cap, uint16_t id, const uint8_t *apex,
                            uint32_t ttl, const uint8_t *soa_rdata, uint16_t soa_len)
    STEER_NONNULL(1, 4, 6);

/**
 * Feed the next message. Returns 1 when the transfer is complete (the closing SOA arrived),
 * 0 when more messages are due, or -1 with the reason in rx->err (rcode, malformed message,
 * wrong id or question, a limit exceeded): the transfer must then be dropped.
 */
int xfr_rx_feed(xfr_rx_t *rx, const uint8_t *msg, size_t len) STEER_NONNULL(1, 2);

struct zone;

/**
 * Apply the IXFR diffs of @p rx (mode XFR_RX_IXFR) to @p zone, the version whose serial we
 * sent, into @p out (initialised here, mode XFR_RX_AXFR: the whole new zone). Returns 0, or
 * -1 with the reason in out->err when a diff does not apply (a deleted record we do not hold)
 * or the result exceeds the record limit: the caller then falls back to AXFR.
 */
int xfr_rx_apply(const xfr_rx_t *rx, const struct zone *zone, xfr_rx_t *out) STEER_NONNULL(1, 2, 3);

/**
 * Write the received records as a master file (RFC 3597 generic rdata, absolute owners) to
 * @p f. Returns 0 or a negative errno.
 */
int xfr_rx_write(const xfr_rx_t *rx, FILE *f) STEER_NONNULL(1, 2);

/** Free the receiver's records. */
void xfr_rx_free(xfr_rx_t *rx) STEER_NONNULL(1);
