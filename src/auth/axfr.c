/*
 * Outgoing zone transfer over TCP: AXFR (RFC 5936) and IXFR (RFC 1995). A transfer holds a
 * zone reference (and a journal reference for IXFR), so it keeps streaming a consistent
 * version even when a reload replaces the zone halfway. IXFR answers: a single SOA when the
 * client is current; the journal's changes since the client's version when it has them (over
 * UDP too when they fit, else the SOA alone, which sends the client to TCP, RFC 1995 2); a
 * full transfer over TCP (the SOA alone over UDP) when the client's version is unknown, as
 * RFC 1995 4 allows.
 */
#include <string.h>
#include <time.h>

#include "auth/auth_int.h"
#include "base/err.h"
#include "base/log.h"
#include "dns/dname.h"

enum { PHASE_FIRST_SOA, PHASE_NODES, PHASE_LAST_SOA, PHASE_DONE };

static int put_soa(const zone_t *zone, dns_msg_t *msg)
{
	const zone_rrset_t *soa = zone->soa;
	uint16_t rdlen = (uint16_t)(soa->rdata[0] << 8 | soa->rdata[1]);
	return dns_msg_put_rr(msg, DNS_SEC_ANSWER, zone->apex, DNS_TYPE_SOA, DNS_CLASS_IN, soa->ttl,
	                      soa->rdata + 2, rdlen);
}

/* The current record's rdata and length. */
static const uint8_t *current_record(auth_axfr_t *axfr, const zone_node_t *node, uint16_t *len)
{
	if (axfr->record == 0)
		axfr->cursor = node->rrsets[axfr->rrset].rdata;
	*len = (uint16_t)(axfr->cursor[0] << 8 | axfr->cursor[1]);
	return axfr->cursor + 2;
}

static void advance(auth_axfr_t *axfr, const zone_node_t *node, uint16_t rdlen)
{
	axfr->cursor += 2 + (size_t)rdlen;
	if (++axfr->record < node->rrsets[axfr->rrset].count)
		return;
	axfr->record = 0;
	if (++axfr->rrset < node->n_rrsets)
		return;
	axfr->rrset = 0;
	axfr->node++;
}

static void skip_empty_and_soa(auth_axfr_t *axfr, const zone_node_t *nodes, size_t n)
{
	while (axfr->node < n) {
		const zone_node_t *node = &nodes[axfr->node];
		if (axfr->rrset >= node->n_rrsets) {
			axfr->node++;
			axfr->rrset = 0;
			axfr->record = 0;
		} else if (node->rrsets[axfr->rrset].type == DNS_TYPE_SOA &&
		           (node->flags & ZONE_NODE_APEX)) {
			axfr->rrset++;
			axfr->record = 0;
		} else {
			return;
		}
	}
}

/*
 * Puts the journal's records from the current position on into @p msg; @p wrote is set when
 * at least one went in. Returns false when the message filled up first (the position is kept).
 */
static bool fill_changes(auth_axfr_t *axfr, dns_msg_t *msg, bool *wrote)
{
	const zone_journal_t *j = axfr->journal;
	while (axfr->change < j->n) {
		const zone_change_t *c = j->changes[axfr->change];
		if (axfr->change_pos >= c->len) {
			axfr->change++;
			axfr->change_pos = 0;
			continue;
		}
		zone_change_rr_t rr;
		size_t next = zone_change_read(c, axfr->change_pos, &rr);
		int ret = dns_msg_put_rr(msg, DNS_SEC_ANSWER, rr.owner, rr.type, DNS_CLASS_IN,
		                         rr.ttl, rr.rdata, rr.rdlen);
		if (ret == STEER_ESPACE)
			return false;
		axfr->change_pos = next;
		*wrote = *wrote || ret == 0;
	}
	return true;
}

/* Fills @p msg with as many records as fit; returns false if not even one fit. */
static bool fill(auth_axfr_t *axfr, dns_msg_t *msg)
{
	size_t n_nodes;
	const zone_node_t *nodes = zone_nodes(axfr->zone, &n_nodes);
	bool wrote = false;
	while (axfr->phase != PHASE_DONE) {
		if (axfr->phase == PHASE_FIRST_SOA || axfr->phase == PHASE_LAST_SOA) {
			if (put_soa(axfr->zone, msg) != 0)
				return wrote;
			axfr->phase++;
			wrote = true;
			continue;
		}
		if (axfr->journal) {
			if (!fill_changes(axfr, msg, &wrote))
				return wrote;
			axfr->phase = PHASE_LAST_SOA;
			continue;
		}
		skip_empty_and_soa(axfr, nodes, n_nodes);
		if (axfr->node == n_nodes) {
			axfr->phase = PHASE_LAST_SOA;
			continue;
		}
		const zone_node_t *node = &nodes[axfr->node];
		uint16_t rdlen = 0;
		const uint8_t *rdata = current_record(axfr, node, &rdlen);
		const zone_rrset_t *rrset = &node->rrsets[axfr->rrset];
		int ret = dns_msg_put_rr(msg, DNS_SEC_ANSWER, node->owner, rrset->type,
		                         DNS_CLASS_IN, rrset->ttl, rdata, rdlen);
		if (ret == STEER_ESPACE)
			return wrote;
		advance(axfr, node, rdlen);
		wrote = wrote || ret == 0;
	}
	return wrote;
}

static void transfer_init(const zone_t *zone, const dns_query_t *q, auth_axfr_t *axfr)
{
	memset(axfr, 0, sizeof(*axfr));
	zone_ref((zone_t *)zone);
	axfr->zone = (zone_t *)zone;
	axfr->id = q->id;
	memcpy(axfr->question, q->question, q->question_len);
	axfr->question_len = (uint16_t)q->question_len;
	axfr->phase = PHASE_FIRST_SOA;
}

/*
 * The incremental answer from change @p change of @p journal on. Over UDP (no @p axfr) it is
 * the whole answer when it fits, else the SOA alone; over TCP it streams like AXFR.
 */
static uint8_t ixfr_start(const zone_t *zone, const zone_journal_t *journal, size_t change,
                          const dns_query_t *q, const auth_client_t *client, auth_axfr_t *axfr,
                          dns_msg_t *msg, auth_stats_t *stats)
{
	STEER_COUNTER_INC(stats->ixfr);
	if (client->tcp && axfr) {
		transfer_init(zone, q, axfr);
		axfr->journal = zone_journal_ref(journal);
		axfr->change = change;
		fill(axfr, msg);
		return DNS_RCODE_NOERROR;
	}
	/* The view keeps zone and journal alive for this query: no references needed. */
	auth_axfr_t udp = {.zone = (zone_t *)zone, .journal = journal, .change = change};
	size_t len = msg->len;
	uint16_t count[3];
	memcpy(count, msg->count, sizeof(count));
	if (!fill(&udp, msg) || udp.phase != PHASE_DONE) {
		dns_msg_rewind(msg, len, count);
		put_soa(zone, msg);
	}
	return DNS_RCODE_NOERROR;
}

uint8_t auth_xfr_start(const zone_t *zone, const zone_set_entry_t *entry, const dns_query_t *q,
                       const auth_client_t *client, auth_axfr_t *axfr, dns_msg_t *msg,
                       auth_stats_t *stats, const dns_tsig_ctx_t *tsig)
{
	if (!dname_equal(q->qname, zone->apex))
		return DNS_RCODE_NOTAUTH;
	if (!client->tcp && q->qtype == DNS_TYPE_AXFR)
		return DNS_RCODE_NOTIMP; /* RFC 5936 4.2: AXFR over UDP is not defined */
	const uint8_t *key = tsig && tsig->key ? tsig->key->name : NULL;
	if (!dns_acl_match(entry->xfr_allow, entry->n_xfr_allow, client->remote, key)) {
		STEER_COUNTER_INC(stats->axfr_refused);
		return DNS_RCODE_REFUSED;
	}
	dns_msg_set_flags(msg, DNS_FLAG_AA, 0);
	if (q->qtype == DNS_TYPE_IXFR) {
		/* RFC 1995 2: a client as new as we are gets our SOA alone. */
		if (!zone_serial_gt(zone->serial, q->soa_serial)) {
			put_soa(zone, msg);
			return DNS_RCODE_NOERROR;
		}
		long change = zone_journal_find(entry->journal, q->soa_serial, zone->serial);
		if (change >= 0)
			return ixfr_start(zone, entry->journal, (size_t)change, q, client, axfr,
			                  msg, stats);
	}
	if (!client->tcp || !axfr) {
		/* RFC 1995 2: over UDP an IXFR we cannot serve incrementally gets our SOA, which
		 * tells the client to retry over TCP if it is behind. */
		put_soa(zone, msg);
		return DNS_RCODE_NOERROR;
	}
	STEER_COUNTER_INC(stats->axfr);
	transfer_init(zone, q, axfr);
	fill(axfr, msg);
	return DNS_RCODE_NOERROR;
}

size_t auth_axfr_next(auth_axfr_t *axfr, uint8_t *resp, size_t resp_cap)
{
	if (!axfr->zone || axfr->phase == PHASE_DONE)
		return 0;
	dns_query_t q;
	memset(&q, 0, sizeof(q));
	q.id = axfr->id;
	q.has_question = true;
	q.question = axfr->question;
	q.question_len = axfr->question_len;
	q.qname_len = (uint8_t)(axfr->question_len - 4);
	dns_msg_t msg;
	size_t limit = resp_cap < DNS_MSG_MAXLEN ? resp_cap : DNS_MSG_MAXLEN;
	dns_msg_init(&msg, resp, limit);
	if (axfr->tsig_on)
		dns_msg_reserve(&msg, dns_tsig_rr_len(&axfr->tsig));
	if (dns_msg_begin(&msg, &q, DNS_RCODE_NOERROR) != 0)
		return 0;
	dns_msg_set_flags(&msg, DNS_FLAG_AA, 0);
	if (!fill(axfr, &msg)) {
		log_warn("%s of %s stopped: a record does not fit in a message",
		         axfr->journal ? "IXFR" : "AXFR", axfr->zone->name);
		axfr->phase = PHASE_DONE;
		return 0;
	}
	size_t len = dns_msg_finish(&msg);
	if (axfr->tsig_on)
		len = dns_tsig_sign(&axfr->tsig, resp, len, limit, (uint64_t)time(NULL));
	return len;
}

void auth_axfr_cleanup(auth_axfr_t *axfr)
{
	zone_unref(axfr->zone);
	axfr->zone = NULL;
	zone_journal_unref(axfr->journal);
	axfr->journal = NULL;
	axfr->phase = PHASE_DONE;
}
