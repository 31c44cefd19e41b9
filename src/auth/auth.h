/*
 * Authoritative answering (RFC 1034 4.3.2, RFC 2308, RFC 4592, RFC 6891, RFC 8482): turns
 * a query packet into a response packet from a zone set. No I/O, no allocation, no locks;
 * called by every query thread inside an RCU read-side section that keeps @c view alive.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/qctx.h"
#include "auth/rrl.h"
#include "auth/stats.h"
#include "base/compiler.h"
#include "base/sockaddr.h"
#include "dns/cookie.h"
#include "dns/pkt.h"
#include "dns/tsig.h"
#include "gslb/view.h"
#include "zone/zone_set.h"

typedef struct {
	const zone_set_t *zones;
	/* GSLB names answered instead of zone data; NULL when the configuration has none, so
	 * that zone-only servers skip the GSLB lookup entirely. */
	const gslb_view_t *gslb;
	uint16_t udp_max_payload; /* our EDNS payload size, the UDP ceiling (default 1232) */
	/* This server's name for CH TXT id.server. and hostname.bind. and the NSID option
	 * (RFC 5001), borrowed from the configuration; NULL = none: those names are REFUSED like
	 * every other CH query and NSID requests are ignored. */
	const char *identity;
	uint8_t identity_len; /* strlen(identity), at most 255 (one TXT string) */
	/* CH TXT version.bind. and version.server., borrowed from the configuration or the
	 * daemon; NULL = hidden: those names are REFUSED like every unknown CH name. */
	const char *version;
	uint8_t version_len; /* strlen(version), at most 255 (one TXT string) */
	/* TSIG keys that signed requests are verified against (owned by the view snapshot);
	 * NULL = none configured: every signed request is answered NOTAUTH/BADKEY. */
	const dns_tsig_keyring_t *keys;
	/* An accepted NOTIFY (RFC 1996) for the secondary zone @p apex (lowercase wire; served
	 * or still pending its first transfer), with the SOA serial the primary sent when
	 * @p has_serial. Called on the query thread: it must not block, lock or allocate (the
	 * daemon sets a flag and wakes the transfer thread). NULL = ignored. */
	void (*on_notify)(void *arg, const uint8_t *apex, uint32_t serial_hint, bool has_serial);
	void *notify_arg;
	/* DNS Cookies (RFC 7873, RFC 9018): off unless cookies_enable; the secrets are this
	 * configuration's snapshot (or the daemon's random one). cookies_require answers UDP
	 * queries that carry a COOKIE option without a valid server cookie BADCOOKIE. */
	bool cookies_enable;
	bool cookies_require;
	dns_cookie_secrets_t cookies;
	/* Response rate limiting: limits and the table (owned by the daemon, kept across
	 * reloads); rrl.table NULL = off. Applied by the UDP layer (auth_rrl_apply()). */
	auth_rrl_t rrl;
} auth_view_t;

typedef struct {
	const steer_sockaddr_t *remote;
	bool tcp;
} auth_client_t;

/* State of an outgoing zone transfer; the TCP layer keeps it across messages. */
typedef struct {
	zone_t *zone; /* referenced while the transfer runs; NULL when none */
	uint16_t id;  /* query id echoed in every message */
	uint8_t question[DNS_DNAME_MAXLEN + 4];
	uint16_t question_len;
	size_t node; /* position in zone_nodes() */
	uint16_t rrset;
	uint16_t record;
	const uint8_t *cursor; /* the current record (rdlength first) in the current rrset */
	uint8_t phase;         /* 0 leading SOA, 1 nodes, 2 trailing SOA, 3 done */
	/* An incremental transfer (IXFR, RFC 1995) sends the journal's changes instead of the
	 * nodes in phase 1: */
	const zone_journal_t *journal; /* referenced while it runs; NULL for a full transfer */
	size_t change;                 /* index of the change being sent */
	size_t change_pos;             /* byte offset of the next record in that change */
	bool tsig_on; /* the request was signed: every message is (RFC 8945 5.3.1) */
	dns_tsig_ctx_t tsig;
} auth_axfr_t;

/**
 * Answer the query @p req (@p req_len bytes) from @p client into @p resp, whose capacity
 * @p resp_cap must be at least 512 (UDP) or 65535 (TCP), in the calling thread's context
 * @p qctx (its counters and GSLB state).
 * Returns the response length, or 0 when no reply must be sent (QR=1, shorter than a header).
 * When @p axfr is not NULL (TCP) and the query is an allowed AXFR, the transfer state is set
 * up in @p axfr (which takes a zone reference) and the first message is returned; the caller
 * then calls auth_axfr_next() until it returns 0, and auth_axfr_cleanup() at the end.
 */
size_t auth_answer(const auth_view_t *view, const auth_client_t *client, const uint8_t *req,
                   size_t req_len, uint8_t *resp, size_t resp_cap, auth_qctx_t *qctx,
                   auth_axfr_t *axfr) STEER_NONNULL(1, 2, 3, 5, 7);

/**
 * auth_answer() for a query the caller parsed already (dns_query_parse() of the packet, with
 * its @p status): the same answer. The packet @p q borrows must live; @p q itself may be
 * changed (a question too long to echo is dropped from it).
 */
size_t auth_answer_parsed(const auth_view_t *view, const auth_client_t *client, dns_query_t *q,
                          dns_query_status_t status, uint8_t *resp, size_t resp_cap,
                          auth_qctx_t *qctx, auth_axfr_t *axfr) STEER_NONNULL(1, 2, 3, 5, 7);

/**
 * True when the parsed query @p q (class IN or ANY) falls inside a zone of @p view, i.e.
 * auth_answer() answers it from zone or GSLB data rather than REFUSED: such names are never
 * forwarded. Inside the caller's RCU read-side section.
 */
bool auth_serves(const auth_view_t *view, const dns_query_t *q) STEER_NONNULL(1, 2);

/**
 * The next message of a running transfer into @p resp (@p resp_cap >= 65535), or 0 when the
 * transfer is complete. Needs no RCU section: the transfer holds its own zone reference.
 */
size_t auth_axfr_next(auth_axfr_t *axfr, uint8_t *resp, size_t resp_cap) STEER_NONNULL(1, 2);

/** Release the transfer's zone and journal references; safe to call on an idle or finished
 * state. */
void auth_axfr_cleanup(auth_axfr_t *axfr) STEER_NONNULL(1);
