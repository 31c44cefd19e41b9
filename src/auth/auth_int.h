/*
 * Helpers shared by the files of auth/ (answering and zone transfer). Query-thread safe.
 */
#pragma once

#include "auth/auth.h"
#include "dns/msg.h"
#include "dns/pkt.h"

typedef struct {
	const zone_node_t *exact; /* the node named exactly, or NULL */
	const zone_node_t
	    *encloser;          /* closest existing ancestor-or-self (RFC 4592 closest encloser) */
	const zone_node_t *cut; /* the delegation covering the name, or NULL when authoritative */
} auth_lookup_t;

/** Find @p name (lowercase wire, inside @p zone) the way RFC 1034 4.3.2 step 3 walks. */
void auth_lookup(const zone_t *zone, const uint8_t *name, auth_lookup_t *res);

/**
 * Handle an AXFR or IXFR question for @p zone: checks transport and the zone's ACL (with the
 * request's verified TSIG key from @p tsig, NULL when unsigned), writes the first message
 * into @p msg and sets up @p axfr for the rest. Returns the rcode.
 */
uint8_t auth_xfr_start(const zone_t *zone, const zone_set_entry_t *entry, const dns_query_t *q,
                       const auth_client_t *client, auth_axfr_t *axfr, dns_msg_t *msg,
                       auth_stats_t *stats, const dns_tsig_ctx_t *tsig);

/**
 * Answer the NOTIFY @p q (opcode NOTIFY, RFC 1996 3.7) from @p client, signed as @p tsig says
 * (NULL: unsigned), into @p msg, whose header and question are written: NOERROR with AA for a
 * secondary zone of @p view (served, or pending its first transfer) whose notify-allow list
 * (primaries included) admits the client, after calling view->on_notify; NOTAUTH otherwise, as
 * Knot DNS answers. Returns the rcode.
 */
uint8_t auth_notify(const auth_view_t *view, const auth_client_t *client, const dns_query_t *q,
                    const dns_tsig_ctx_t *tsig, dns_msg_t *msg);
