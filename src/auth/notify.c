/*
 * NOTIFY received (RFC 1996): a primary tells us a secondary zone changed. The answer only
 * acknowledges; the refresh itself runs on the transfer thread, which the view's callback
 * wakes without blocking this query thread.
 */
#include <string.h>

#include "auth/auth_int.h"
#include "dns/dname.h"
#include "dns/wire.h"

/* The SOA serial in the first answer record of the NOTIFY, when it is the zone's SOA
 * (RFC 1996 3.7 allows the primary to send it as a hint). */
static bool notify_serial(const dns_query_t *q, uint32_t *serial)
{
	if (q->ancount == 0 || q->question == NULL)
		return false;
	/* One question follows the header (dns_query_parse() checked the counts). */
	const uint8_t *pkt = q->msg;
	size_t len = q->msg_len;
	size_t pos = DNS_HEADER_LEN + q->question_len;
	uint8_t owner[DNS_DNAME_MAXLEN], name[DNS_DNAME_MAXLEN];
	if (dname_unpack_lower(pkt, len, &pos, owner) < 0 || pos + 10 > len ||
	    !dname_equal(owner, q->qname))
		return false;
	uint16_t type = wire_read_u16(pkt + pos);
	uint16_t rdlen = wire_read_u16(pkt + pos + 8);
	pos += 10;
	if (type != DNS_TYPE_SOA)
		return false;
	size_t rd_end = pos + rdlen;
	if (rd_end > len)
		return false;
	if (dname_unpack(pkt, rd_end, &pos, name) < 0 ||
	    dname_unpack(pkt, rd_end, &pos, name) < 0 || pos + 20 > rd_end)
		return false;
	*serial = wire_read_u32(pkt + pos);
	return true;
}

/* Who may NOTIFY the secondary zone @p apex, served or still before its first transfer (a
 * NOTIFY is what should start that one); false when it is no secondary zone of ours. */
static bool notify_acl(const zone_set_t *zones, const uint8_t *apex, const dns_acl_entry_t **allow,
                       size_t *n_allow)
{
	const zone_set_entry_t *entry = zone_set_get(zones, apex);
	if (entry != NULL) {
		*allow = entry->notify_allow;
		*n_allow = entry->n_notify_allow;
		return entry->secondary;
	}
	const zone_set_pending_t *p = zone_set_get_pending(zones, apex);
	if (p == NULL)
		return false;
	*allow = p->notify_allow;
	*n_allow = p->n_notify_allow;
	return true;
}

uint8_t auth_notify(const auth_view_t *view, const auth_client_t *client, const dns_query_t *q,
                    const dns_tsig_ctx_t *tsig, dns_msg_t *msg)
{
	const dns_acl_entry_t *allow = NULL;
	size_t n_allow = 0;
	if (q->qclass != DNS_CLASS_IN || client->remote == NULL ||
	    !notify_acl(view->zones, q->qname, &allow, &n_allow))
		return DNS_RCODE_NOTAUTH;
	/* TSIG-signed NOTIFYs are matched by address only until requests are verified here. */
	const uint8_t *key = tsig && tsig->key ? tsig->key->name : NULL;
	if (!dns_acl_match(allow, n_allow, client->remote, key))
		return DNS_RCODE_NOTAUTH;
	uint32_t serial = 0;
	bool has_serial = notify_serial(q, &serial);
	if (view->on_notify != NULL)
		view->on_notify(view->notify_arg, q->qname, serial, has_serial);
	dns_msg_set_flags(msg, DNS_FLAG_AA, 0);
	return DNS_RCODE_NOERROR;
}
