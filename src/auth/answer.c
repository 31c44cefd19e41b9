/*
 * Authoritative answering, RFC 1034 4.3.2 with RFC 2308 negative answers, RFC 4592 wildcards
 * and RFC 6604 CNAME chains, with GSLB names (gslb/view.h) answered per client: the types a
 * GSLB name answers (A, AAAA, ANY; TXT for whoami) come from the GSLB view, every other type
 * from the zone's node at that name. Runs on every query thread inside the caller's RCU read-side
 * section; no allocation, no locks, bounded work per query (CNAME_HOPS_MAX, fixed buffers).
 */
#include "auth/auth.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "auth/auth_int.h"
#include "dns/dname.h"
#include "dns/msg.h"
#include "dns/nsid.h"
#include "dns/pkt.h"
#include "dns/rdata.h"
#include "dns/wire.h"

/* Longest CNAME chain followed inside a zone; longer chains are answered as far as this. */
#define CNAME_HOPS_MAX 12
/* Distinct target names collected for additional-section processing. */
#define ADDITIONAL_MAX 64

typedef struct {
	dns_msg_t msg;
	const dns_query_t *q;
	const zone_t *zone;
	const gslb_view_t *gslb; /* NULL: no GSLB names configured */
	const auth_client_t *client;
	gslb_qstate_t *gslb_qs; /* the thread's GSLB state (random, counters) */
	bool tcp;
	bool truncated;
	uint8_t rcode;
	uint8_t ecs_scope;                    /* SCOPE PREFIX-LENGTH of the answer (RFC 7871) */
	bool cookie;                          /* answer with a COOKIE option */
	dns_cookie_status_t cookie_status;    /* of the query's server cookie */
	uint32_t now;                         /* wall clock seconds, read only for cookies */
	const uint8_t *cut;                   /* the delegation of a referral, for RRL */
	const uint8_t *extra[ADDITIONAL_MAX]; /* names needing A/AAAA in additional */
	unsigned n_extra;
	const zone_set_entry_t *entry; /* the zone answered from, NULL when none */
} answer_t;

/* Writes a whole rrset; on overflow removes what it wrote and reports it. */
static int put_rrset(answer_t *a, enum dns_section sec, const uint8_t *owner,
                     const zone_rrset_t *rrset, uint32_t ttl)
{
	size_t len = a->msg.len;
	uint16_t count[3];
	memcpy(count, a->msg.count, sizeof(count));
	zone_rdata_iter_t it = zone_rdata_iter(rrset);
	uint16_t rdlen;
	const uint8_t *rdata;
	while ((rdata = zone_rdata_next(&it, &rdlen)) != NULL) {
		int ret = dns_msg_put_rr(&a->msg, sec, owner, rrset->type, DNS_CLASS_IN, ttl, rdata,
		                         rdlen);
		if (ret != 0) {
			dns_msg_rewind(&a->msg, len, count);
			return ret;
		}
	}
	return 0;
}

/* Answer and authority data must be complete or the client must retry over TCP. */
static bool put_required(answer_t *a, enum dns_section sec, const uint8_t *owner,
                         const zone_rrset_t *rrset, uint32_t ttl)
{
	if (a->truncated)
		return false;
	if (put_rrset(a, sec, owner, rrset, ttl) == 0)
		return true;
	a->truncated = true;
	return false;
}

static void add_extra(answer_t *a, const uint8_t *target)
{
	if (a->n_extra == ADDITIONAL_MAX || !dname_is_subdomain(target, a->zone->apex))
		return;
	for (unsigned i = 0; i < a->n_extra; i++) {
		if (dname_equal(a->extra[i], target))
			return;
	}
	a->extra[a->n_extra++] = target;
}

static void want_additional(answer_t *a, const zone_rrset_t *rrset)
{
	zone_rdata_iter_t it = zone_rdata_iter(rrset);
	uint16_t rdlen;
	const uint8_t *rdata;
	while ((rdata = zone_rdata_next(&it, &rdlen)) != NULL) {
		const uint8_t *target = dns_rdata_target(rrset->type, rdata, rdlen);
		if (target)
			add_extra(a, target);
	}
}

static bool put_answer(answer_t *a, const uint8_t *owner, const zone_rrset_t *rrset)
{
	if (!put_required(a, DNS_SEC_ANSWER, owner, rrset, rrset->ttl))
		return false;
	want_additional(a, rrset);
	return true;
}

/* RFC 2308 3: the SOA's TTL in a negative answer is min(SOA TTL, SOA MINIMUM). */
static void put_negative_soa(answer_t *a)
{
	const zone_rrset_t *soa = a->zone->soa;
	uint16_t rdlen = (uint16_t)(soa->rdata[0] << 8 | soa->rdata[1]);
	uint32_t ttl = soa->ttl;
	if (rdlen >= 4) {
		const uint8_t *min = soa->rdata + 2 + rdlen - 4;
		uint32_t minimum = (uint32_t)min[0] << 24 | (uint32_t)min[1] << 16 |
		                   (uint32_t)min[2] << 8 | min[3];
		if (minimum < ttl)
			ttl = minimum;
	}
	put_required(a, DNS_SEC_AUTHORITY, a->zone->apex, soa, ttl);
}

static const zone_node_t *find_wildcard(const zone_t *zone, const zone_node_t *encloser)
{
	if (!(encloser->flags & ZONE_NODE_WILDCARD_CHILD))
		return NULL;
	uint8_t name[DNS_DNAME_MAXLEN];
	size_t len = dname_len(encloser->owner);
	if (len + 2 > DNS_DNAME_MAXLEN)
		return NULL;
	name[0] = 1;
	name[1] = '*';
	memcpy(name + 2, encloser->owner, len);
	return zone_find_node(zone, name, len + 2);
}

/*
 * NSEC3 records hang at hashed owner names outside the ordinary namespace (RFC 5155 7.2.8): a
 * node holding nothing else does not exist for lookups, as in every NSEC3-aware server.
 */
static bool is_nsec3_only(const zone_node_t *node)
{
	bool nsec3 = false;
	for (uint16_t i = 0; i < node->n_rrsets; i++) {
		uint16_t type = node->rrsets[i].type;
		if (type != DNS_TYPE_NSEC3 && type != DNS_TYPE_RRSIG)
			return false;
		nsec3 = nsec3 || type == DNS_TYPE_NSEC3;
	}
	return nsec3;
}

static const zone_node_t *find_visible(const zone_t *zone, const uint8_t *name)
{
	const zone_node_t *node = zone_find_node(zone, name, dname_len(name));
	return node && node->n_rrsets > 0 && is_nsec3_only(node) ? NULL : node;
}

void auth_lookup(const zone_t *zone, const uint8_t *name, auth_lookup_t *res)
{
	res->exact = NULL;
	res->encloser = NULL;
	res->cut = NULL;
	const uint8_t *cur = name;
	const zone_node_t *node;
	/* Strip labels until a node exists; the apex always does, so this ends there. */
	while ((node = find_visible(zone, cur)) == NULL) {
		cur = dname_parent(cur);
		if (!cur)
			return;
	}
	if (cur == name)
		res->exact = node;
	res->encloser = node;
	const zone_node_t *cut = node->cut;
	/* Nested cuts below a cut are occluded: the topmost one is the real delegation. */
	while (cut && (cut->flags & ZONE_NODE_NONAUTH) && cut->parent && cut->parent->cut)
		cut = cut->parent->cut;
	res->cut = cut;
}

static void put_glue_for(answer_t *a, const uint8_t *target, bool required)
{
	auth_lookup_t look;
	auth_lookup(a->zone, target, &look);
	const zone_node_t *node = look.exact;
	if (!node && look.encloser && !look.cut)
		node = find_wildcard(a->zone, look.encloser);
	if (!node)
		return;
	static const uint16_t types[] = {DNS_TYPE_A, DNS_TYPE_AAAA};
	for (size_t i = 0; i < STEER_ARRAY_LEN(types); i++) {
		const zone_rrset_t *rrset = zone_node_rrset(node, types[i]);
		if (rrset && put_rrset(a, DNS_SEC_ADDITIONAL, target, rrset, rrset->ttl) != 0 &&
		    required)
			a->truncated = true; /* RFC 9471: in-domain glue must fit, or TC */
	}
}

static void put_additional(answer_t *a)
{
	for (unsigned i = 0; i < a->n_extra && !a->truncated; i++)
		put_glue_for(a, a->extra[i], false);
}

static void put_referral(answer_t *a, const zone_node_t *cut)
{
	const zone_rrset_t *ns = zone_node_rrset(cut, DNS_TYPE_NS);
	if (!ns)
		return;
	if (a->msg.count[DNS_SEC_ANSWER] == 0)
		dns_msg_set_flags(&a->msg, 0, DNS_FLAG_AA);
	a->cut = cut->owner;
	if (!put_required(a, DNS_SEC_AUTHORITY, cut->owner, ns, ns->ttl))
		return;
	zone_rdata_iter_t it = zone_rdata_iter(ns);
	uint16_t rdlen;
	const uint8_t *rdata;
	while ((rdata = zone_rdata_next(&it, &rdlen)) != NULL) {
		const uint8_t *target = dns_rdata_target(DNS_TYPE_NS, rdata, rdlen);
		if (!target)
			continue;
		if (dname_is_subdomain(target, cut->owner))
			put_glue_for(a, target, true);
		else
			add_extra(a, target); /* in this zone but outside the child: optional */
	}
}

/* RFC 8482: ANY over UDP gets one RRset, not the whole node; TCP clients get everything. */
static void put_any(answer_t *a, const uint8_t *owner, const zone_node_t *node)
{
	for (uint16_t i = 0; i < node->n_rrsets; i++) {
		const zone_rrset_t *rrset = &node->rrsets[i];
		if (rrset->type == DNS_TYPE_RRSIG && node->n_rrsets > 1)
			continue;
		if (!put_answer(a, owner, rrset) || !a->tcp)
			return;
	}
}

static bool name_seen(const uint8_t *const *seen, unsigned n, const uint8_t *name)
{
	for (unsigned i = 0; i < n; i++) {
		if (dname_equal(seen[i], name))
			return true;
	}
	return false;
}

/* Answers at one node; returns the CNAME target to continue with, or NULL when done. */
static const uint8_t *answer_node(answer_t *a, const uint8_t *owner, const zone_node_t *node)
{
	uint16_t qtype = a->q->qtype;
	if (qtype == DNS_TYPE_ANY) {
		if (node->n_rrsets == 0)
			put_negative_soa(a);
		else
			put_any(a, owner, node);
		return NULL;
	}
	const zone_rrset_t *rrset = zone_node_rrset(node, qtype);
	if (rrset) {
		put_answer(a, owner, rrset);
		return NULL;
	}
	/* RRSIG and NSEC may sit beside a CNAME (RFC 4035 2.5): asked for, they end the chain. */
	bool follows_cname = qtype != DNS_TYPE_RRSIG && qtype != DNS_TYPE_NSEC;
	const zone_rrset_t *cname = follows_cname ? zone_node_rrset(node, DNS_TYPE_CNAME) : NULL;
	if (cname) {
		if (!put_answer(a, owner, cname))
			return NULL;
		uint16_t rdlen = (uint16_t)(cname->rdata[0] << 8 | cname->rdata[1]);
		const uint8_t *target = cname->rdata + 2;
		return dname_is_valid(target, rdlen) ? target : NULL;
	}
	put_negative_soa(a);
	return NULL;
}

/* Rdata of a GSLB address: the asked family decides its length (A 4 bytes, AAAA 16). */
static void put_gslb_addrs(answer_t *a, const uint8_t *owner, const gslb_result_t *res)
{
	uint16_t type = a->q->qtype == DNS_TYPE_AAAA ? DNS_TYPE_AAAA : DNS_TYPE_A;
	uint16_t rdlen = type == DNS_TYPE_AAAA ? 16 : 4;
	size_t len = a->msg.len;
	uint16_t count[3];
	memcpy(count, a->msg.count, sizeof(count));
	for (unsigned i = 0; i < res->ans.count; i++) {
		if (dns_msg_put_rr(&a->msg, DNS_SEC_ANSWER, owner, type, DNS_CLASS_IN, res->ans.ttl,
		                   gslb_result_addr(res, i), rdlen) != 0) {
			dns_msg_rewind(&a->msg, len, count);
			a->truncated = true;
			return;
		}
	}
}

static bool put_gslb_rr(answer_t *a, const uint8_t *owner, uint16_t type, uint32_t ttl,
                        const uint8_t *rdata, uint16_t rdlen)
{
	if (a->truncated)
		return false;
	if (dns_msg_put_rr(&a->msg, DNS_SEC_ANSWER, owner, type, DNS_CLASS_IN, ttl, rdata, rdlen) ==
	    0)
		return true;
	a->truncated = true;
	return false;
}

/*
 * Answers GSLB name @p name at @p owner for this client; returns the CNAME target to continue
 * with (inside the view, valid for the RCU section), or NULL when done.
 */
static const uint8_t *answer_gslb(answer_t *a, const uint8_t *owner, const gslb_name_t *name)
{
	gslb_client_t client = {.resolver = a->client->remote,
	                        .ecs = a->q->has_ecs ? &a->q->ecs : NULL};
	gslb_result_t res;
	gslb_view_answer(a->gslb, name, a->q->qtype, &client, a->gslb_qs, &res);
	/* One scope for the response: the narrowest any GSLB decision along the chain needed. */
	if (res.ecs_scope > a->ecs_scope)
		a->ecs_scope = res.ecs_scope;
	switch (res.ans.kind) {
	case GSLB_ANSWER_ADDRS:
		put_gslb_addrs(a, owner, &res);
		return NULL;
	case GSLB_ANSWER_CNAME: {
		size_t len = dname_len(res.ans.cname);
		if (!put_gslb_rr(a, owner, DNS_TYPE_CNAME, res.ans.ttl, res.ans.cname,
		                 (uint16_t)len))
			return NULL;
		return res.ans.cname;
	}
	case GSLB_ANSWER_TXT:
		put_gslb_rr(a, owner, DNS_TYPE_TXT, res.ans.ttl, res.txt, res.txt_len);
		return NULL;
	case GSLB_ANSWER_NODATA:
		put_negative_soa(a);
		return NULL;
	case GSLB_ANSWER_SERVFAIL:
		a->rcode = DNS_RCODE_SERVFAIL;
		return NULL;
	}
	return NULL;
}

/*
 * A type the GSLB name @p sname does not answer itself (MX, TXT, ... at a service): the zone's
 * node at that name answers it, NODATA when there is none (the name exists: it is a GSLB
 * name), never a wildcard. auth_check_gslb_names() keeps CNAMEs off such nodes.
 */
static const uint8_t *answer_beside_gslb(answer_t *a, const uint8_t *sname, const zone_node_t *node)
{
	if (!node) {
		put_negative_soa(a);
		return NULL;
	}
	return answer_node(a, sname, node);
}

/* Answers @p sname from zone data; returns the CNAME target to continue with, or NULL. */
static const uint8_t *answer_name(answer_t *a, const uint8_t *sname, const auth_lookup_t *look)
{
	const zone_node_t *node = look->exact;
	if (!node) {
		node = find_wildcard(a->zone, look->encloser);
		if (!node) {
			/* RFC 6604 2.1: the rcode describes the last name of the chain. */
			a->rcode = DNS_RCODE_NXDOMAIN;
			put_negative_soa(a);
			return NULL;
		}
	}
	/* The owner is the name asked for, exact or wildcard-synthesised (RFC 4592 2.1.1); passing
	 * @p sname itself lets the message point at the question without a compression search. */
	return answer_node(a, sname, node);
}

static void answer_from_zone(answer_t *a)
{
	const uint8_t *sname = a->q->qname;
	const uint8_t *seen[CNAME_HOPS_MAX];
	unsigned hops = 0;

	for (;;) {
		auth_lookup_t look;
		auth_lookup(a->zone, sname, &look);
		bool ds_at_cut = look.exact && look.exact == look.cut && a->q->qtype == DNS_TYPE_DS;
		if (look.cut && !ds_at_cut) {
			put_referral(a, look.cut);
			return;
		}
		const gslb_name_t *gname = a->gslb ? gslb_view_find(a->gslb, sname) : NULL;
		const uint8_t *target;
		if (!gname)
			target = answer_name(a, sname, &look);
		else if (gslb_view_name_answers(gname, a->q->qtype))
			target = answer_gslb(a, sname, gname);
		else
			target = answer_beside_gslb(a, sname, look.exact);
		if (!target || !dname_is_subdomain(target, a->zone->apex))
			return;
		seen[hops++] = sname;
		if (hops == CNAME_HOPS_MAX || name_seen(seen, hops, target))
			return;
		sname = target;
	}
}

/*
 * CH TXT id.server. (RFC 4892) and hostname.bind. answer the identity, version.bind. and
 * version.server. the version, as Knot DNS does: TTL 0, no AA (nothing here is zone data),
 * every other CH name and type REFUSED, and so is a name whose value is not configured.
 */
static uint8_t answer_chaos(answer_t *a, const auth_view_t *view)
{
	static const uint8_t id_server[] = "\2id\6server";
	static const uint8_t hostname_bind[] = "\10hostname\4bind";
	static const uint8_t version_bind[] = "\7version\4bind";
	static const uint8_t version_server[] = "\7version\6server";
	const dns_query_t *q = a->q;
	const char *value = NULL;
	uint8_t value_len = 0;
	if (dname_equal(q->qname, id_server) || dname_equal(q->qname, hostname_bind)) {
		value = view->identity;
		value_len = view->identity_len;
	} else if (dname_equal(q->qname, version_bind) || dname_equal(q->qname, version_server)) {
		value = view->version;
		value_len = view->version_len;
	}
	if (q->qtype != DNS_TYPE_TXT || value == NULL)
		return DNS_RCODE_REFUSED;
	uint8_t txt[1 + UINT8_MAX];
	txt[0] = value_len;
	memcpy(txt + 1, value, value_len);
	if (dns_msg_put_rr(&a->msg, DNS_SEC_ANSWER, q->qname, DNS_TYPE_TXT, DNS_CLASS_CH, 0, txt,
	                   (uint16_t)(1 + value_len)) != 0)
		a->truncated = true;
	return DNS_RCODE_NOERROR;
}

/* RFC 4035 3.1.4.1: DS lives in the parent; answer it from there when we serve both. */
static const zone_set_entry_t *find_zone(const zone_set_t *zones, const dns_query_t *q)
{
	const zone_set_entry_t *entry = zone_set_find(zones, q->qname);
	if (entry && q->qtype == DNS_TYPE_DS && q->qname_len > 1 &&
	    dname_equal(entry->zone->apex, q->qname)) {
		const zone_set_entry_t *parent = zone_set_find(zones, dname_parent(q->qname));
		if (parent)
			return parent;
	}
	return entry;
}

/*
 * True when @p q falls in a secondary zone still waiting for its first transfer and more
 * specific than @p entry (the served zone found, may be NULL). Such a zone is configured but
 * has nothing to give: SERVFAIL, as Knot DNS and BIND answer, not REFUSED (which tells
 * resolvers we are not authoritative at all). A DS at its apex still comes from a served
 * parent, as find_zone() does for a served child.
 */
static bool in_pending_zone(const zone_set_t *zones, const dns_query_t *q,
                            const zone_set_entry_t *entry)
{
	const zone_set_pending_t *p = zone_set_find_pending(zones, q->qname, entry);
	if (STEER_LIKELY(p == NULL))
		return false;
	return !(entry != NULL && q->qtype == DNS_TYPE_DS && dname_equal(p->apex, q->qname));
}

static uint16_t udp_limit(const auth_view_t *view, const dns_query_t *q, size_t cap)
{
	size_t limit = DNS_UDP_MINLEN;
	if (q->has_edns) {
		limit = q->edns_payload < view->udp_max_payload ? q->edns_payload
		                                                : view->udp_max_payload;
	}
	return (uint16_t)(limit < cap ? limit : cap);
}

/* ECS queries: by family and by resolver (what GSLB made of them, gslb/ counts). */
static void count_ecs(auth_stats_t *stats, const answer_t *a, const auth_client_t *client)
{
	if (a->q->ecs.family == DNS_ECS_FAMILY_IPV4)
		STEER_COUNTER_INC(stats->ecs_v4);
	else
		STEER_COUNTER_INC(stats->ecs_v6);
	if (client->remote != NULL)
		auth_stats_ecs_resolver(stats, client->remote);
}

static void count(auth_stats_t *stats, const answer_t *a, const auth_client_t *client)
{
	const dns_query_t *q = a->q;
	uint8_t rcode = a->rcode;
	STEER_COUNTER_INC(stats->rcode[rcode < STATS_RCODE_SLOTS ? rcode : 0]);
	STEER_COUNTER_INC(stats->qtype[q->qtype < STATS_QTYPE_SLOTS ? q->qtype : 0]);
	if (q->has_edns) {
		STEER_COUNTER_INC(stats->edns);
		if (q->edns_do)
			STEER_COUNTER_INC(stats->edns_do);
		if (STEER_UNLIKELY(q->has_ecs))
			count_ecs(stats, a, client);
	}
}

/* Seconds until the secondary zone of @p entry expires: 0 when it has, -1 when it never does
 * (a primary zone, or a secondary whose SOA says so). */
static int64_t expire_left(const zone_set_entry_t *entry)
{
	if (entry == NULL || entry->expire_at == NULL)
		return -1;
	int64_t at = atomic_load_explicit(entry->expire_at, memory_order_relaxed);
	if (at == 0)
		return -1;
	int64_t left = at - (int64_t)time(NULL);
	return left > 0 ? left : 0;
}

/* The response class and its name, for the UDP layer's rate limiter. */
static void rrl_info(const answer_t *a, const auth_view_t *view, const auth_client_t *client,
                     auth_qctx_t *qctx)
{
	const dns_query_t *q = a->q;
	auth_rrl_info_t *info = &qctx->rrl;
	const uint8_t *name = NULL;
	uint16_t type = 0;
	info->cookie_ok =
	    a->cookie_status == DNS_COOKIE_VALID || a->cookie_status == DNS_COOKIE_STALE;
	info->question_end = (uint16_t)(DNS_HEADER_LEN + (q->has_question ? q->question_len : 0));
	if (a->rcode == DNS_RCODE_NXDOMAIN && a->zone) {
		info->cls = AUTH_RRL_NXDOMAIN;
		name = a->zone->apex;
	} else if (a->rcode != DNS_RCODE_NOERROR) {
		info->cls = AUTH_RRL_ERROR;
	} else if (a->msg.count[DNS_SEC_ANSWER] > 0) {
		info->cls = AUTH_RRL_POSITIVE;
		name = q->qname;
		type = q->qtype;
	} else if (a->cut) {
		info->cls = AUTH_RRL_REFERRAL;
		name = a->cut;
	} else {
		info->cls = AUTH_RRL_NODATA;
		name = q->has_question ? q->qname : NULL;
	}
	if (client->remote != NULL)
		auth_rrl_classify(&view->rrl, client->remote, name, type, info);
	else
		info->cls = AUTH_RRL_NONE;
}

static size_t finish(answer_t *a, const auth_view_t *view, const auth_client_t *client,
                     auth_stats_t *stats)
{
	const dns_query_t *q = a->q;
	if (a->truncated) {
		dns_msg_set_flags(&a->msg, DNS_FLAG_TC, 0);
		STEER_COUNTER_INC(stats->truncated);
	}
	uint8_t rcode = a->rcode;
	dns_msg_set_rcode(&a->msg, (uint8_t)(rcode & DNS_RCODE_MASK));
	if (q->has_edns) {
		uint8_t options[4 + DNS_ECS_MAXLEN + DNS_NSID_HEADER_LEN + UINT8_MAX + 8 +
		                DNS_COOKIE_OPTION_LEN];
		size_t options_len = 0;
		/* RFC 7871 7.2.1: answers from zone data do not depend on the client: scope 0. */
		if (q->has_ecs)
			options_len = dns_ecs_write(&q->ecs, a->ecs_scope, options);
		if (q->has_nsid && view->identity)
			options_len += dns_nsid_write((const uint8_t *)view->identity,
			                              view->identity_len, options + options_len);
		/* RFC 7314 4: only secondary zones answer EXPIRE; primaries ignore it. */
		int64_t left = q->has_expire ? expire_left(a->entry) : -1;
		if (left >= 0) {
			wire_write_u16(options + options_len, DNS_EDNS_OPT_EXPIRE);
			wire_write_u16(options + options_len + 2, 4);
			wire_write_u32(options + options_len + 4,
			               left > UINT32_MAX ? UINT32_MAX : (uint32_t)left);
			options_len += 8;
		}
		const uint8_t *ip;
		size_t ip_len;
		if (a->cookie && dns_cookie_client_ip(client->remote, &ip, &ip_len))
			options_len +=
			    dns_cookie_write(&view->cookies, &q->cookie, a->cookie_status, ip,
			                     ip_len, a->now, options + options_len);
		int ret = dns_msg_put_opt(&a->msg, view->udp_max_payload, (uint8_t)(rcode >> 4),
		                          q->edns_do, options, (uint16_t)options_len);
		STEER_ASSERT(ret == 0); /* the space was reserved up front */
	}
	count(stats, a, client);
	return dns_msg_finish(&a->msg);
}

static uint8_t status_rcode(dns_query_status_t status)
{
	switch (status) {
	case DNS_QUERY_FORMERR:
		return DNS_RCODE_FORMERR;
	case DNS_QUERY_NOTIMP:
		return DNS_RCODE_NOTIMP;
	case DNS_QUERY_BADVERS:
		return DNS_RCODE_BADVERS;
	case DNS_QUERY_OK:
	case DNS_QUERY_DROP:
		break;
	}
	return DNS_RCODE_NOERROR;
}

static void answer_query(answer_t *a, const auth_view_t *view, const auth_client_t *client,
                         auth_axfr_t *axfr, auth_stats_t *stats, const dns_tsig_ctx_t *tsig)
{
	const dns_query_t *q = a->q;
	const zone_set_entry_t *entry = NULL;
	if (q->qclass == DNS_CLASS_CH) {
		a->rcode = answer_chaos(a, view);
		return;
	}
	if (q->qclass != DNS_CLASS_IN && q->qclass != DNS_CLASS_ANY) {
		a->rcode = DNS_RCODE_REFUSED;
		return;
	}
	entry = find_zone(view->zones, q);
	if (STEER_UNLIKELY(in_pending_zone(view->zones, q, entry))) {
		a->rcode = DNS_RCODE_SERVFAIL;
		return;
	}
	if (!entry) {
		a->rcode = DNS_RCODE_REFUSED;
		return;
	}
	/* An expired secondary zone is no longer ours to answer (RFC 1035 4.3.5); Knot DNS
	 * answers SERVFAIL for it. */
	if (STEER_UNLIKELY(entry->expire_at != NULL) && expire_left(entry) == 0) {
		a->rcode = DNS_RCODE_SERVFAIL;
		return;
	}
	a->entry = entry;
	a->zone = entry->zone;
	a->gslb = view->gslb;
	a->client = client;
	if (q->qtype == 0) {
		a->rcode = DNS_RCODE_NOTIMP; /* type 0 is reserved (RFC 6895 3.1) */
		return;
	}
	if (q->qtype == DNS_TYPE_IXFR && !q->has_soa) {
		a->rcode = DNS_RCODE_FORMERR; /* RFC 1995 3: the client's SOA is not optional */
		return;
	}
	if (q->qtype == DNS_TYPE_AXFR || q->qtype == DNS_TYPE_IXFR) {
		a->rcode = auth_xfr_start(a->zone, entry, q, client, axfr, &a->msg, stats, tsig);
		return;
	}
	dns_msg_set_flags(&a->msg, DNS_FLAG_AA, 0);
	answer_from_zone(a);
	put_additional(a);
}

bool auth_serves(const auth_view_t *view, const dns_query_t *q)
{
	if (q->qclass != DNS_CLASS_IN && q->qclass != DNS_CLASS_ANY)
		return false;
	/* A pending secondary zone is ours too: answered SERVFAIL, never forwarded. */
	const zone_set_entry_t *entry = zone_set_find(view->zones, q->qname);
	return entry != NULL || zone_set_find_pending(view->zones, q->qname, NULL) != NULL;
}

size_t auth_answer(const auth_view_t *view, const auth_client_t *client, const uint8_t *req,
                   size_t req_len, uint8_t *resp, size_t resp_cap, auth_qctx_t *qctx,
                   auth_axfr_t *axfr)
{
	dns_query_t q;
	dns_query_status_t status = dns_query_parse(req, req_len, &q);
	return auth_answer_parsed(view, client, &q, status, resp, resp_cap, qctx, axfr);
}

/*
 * Verify the TSIG of @p q (RFC 8945 5.2) and set up @p tsig to sign the answer. Returns the
 * query status (FORMERR for a malformed record); *@p rcode is NOTAUTH when the answer must be
 * the TSIG error rather than the query's answer; *@p on whether the answer gets a TSIG.
 */
static dns_query_status_t verify_tsig(const auth_view_t *view, const dns_query_t *q,
                                      auth_stats_t *stats, dns_tsig_ctx_t *tsig, uint8_t *rcode,
                                      uint64_t *now, bool *on)
{
	static const dns_tsig_keyring_t no_keys = {NULL, 0};
	dns_tsig_rr_t rr;
	if (dns_tsig_find(q->msg, q->msg_len, &rr) != 1)
		return DNS_QUERY_FORMERR;
	*now = (uint64_t)time(NULL);
	uint8_t rc =
	    dns_tsig_verify_request(view->keys ? view->keys : &no_keys, q->msg, &rr, *now, tsig);
	if (rc == DNS_RCODE_FORMERR)
		return DNS_QUERY_FORMERR;
	*on = true;
	*rcode = rc;
	if (rc == DNS_RCODE_NOERROR)
		STEER_COUNTER_INC(stats->tsig_ok);
	else if (tsig->error == DNS_TSIG_ERR_BADKEY)
		STEER_COUNTER_INC(stats->tsig_badkey);
	else if (tsig->error == DNS_TSIG_ERR_BADSIG)
		STEER_COUNTER_INC(stats->tsig_badsig);
	else
		STEER_COUNTER_INC(stats->tsig_badtime);
	return DNS_QUERY_OK;
}

size_t auth_answer_parsed(const auth_view_t *view, const auth_client_t *client, dns_query_t *q,
                          dns_query_status_t status, uint8_t *resp, size_t resp_cap,
                          auth_qctx_t *qctx, auth_axfr_t *axfr)
{
	auth_stats_t *stats = &qctx->stats;
	if (status == DNS_QUERY_DROP) {
		STEER_COUNTER_INC(stats->dropped);
		return 0;
	}
	/* Not "= {0}": the buffers inside are large and need no clearing. */
	answer_t a;
	a.q = q;
	a.zone = NULL;
	a.tcp = client->tcp;
	a.truncated = false;
	a.rcode = DNS_RCODE_NOERROR;
	a.ecs_scope = 0;
	a.gslb_qs = &qctx->gslb;
	a.n_extra = 0;
	a.entry = NULL;
	size_t limit = client->tcp ? resp_cap : udp_limit(view, q, resp_cap);
	if (limit > DNS_MSG_MAXLEN)
		limit = DNS_MSG_MAXLEN;
	dns_tsig_ctx_t tsig;
	uint64_t now = 0;
	uint8_t tsig_rcode = DNS_RCODE_NOERROR;
	bool tsig_on = false;
	if (q->tsig_offset != 0 && status != DNS_QUERY_FORMERR &&
	    verify_tsig(view, q, stats, &tsig, &tsig_rcode, &now, &tsig_on) == DNS_QUERY_FORMERR)
		status = DNS_QUERY_FORMERR;
	dns_msg_init(&a.msg, resp, limit);
	a.cookie = false;
	a.cookie_status = DNS_COOKIE_NO_SERVER;
	a.cut = NULL;
	const uint8_t *ip;
	size_t ip_len;
	if (q->has_cookie && view->cookies_enable &&
	    dns_cookie_client_ip(client->remote, &ip, &ip_len)) {
		a.cookie = true;
		a.now = (uint32_t)time(NULL);
		a.cookie_status = dns_cookie_check(&view->cookies, &q->cookie, ip, ip_len, a.now);
		STEER_COUNTER_INC(stats->cookie_queries);
		if (a.cookie_status == DNS_COOKIE_VALID || a.cookie_status == DNS_COOKIE_STALE)
			STEER_COUNTER_INC(stats->cookie_valid);
		else if (a.cookie_status == DNS_COOKIE_INVALID)
			STEER_COUNTER_INC(stats->cookie_invalid);
	}
	dns_msg_reserve(&a.msg,
	                (q->has_edns
	                     ? DNS_OPT_RR_LEN + (q->has_ecs ? dns_ecs_option_len(&q->ecs) : 0) +
	                           (q->has_nsid && view->identity
	                                ? DNS_NSID_HEADER_LEN + (size_t)view->identity_len
	                                : 0) +
	                           (q->has_expire ? 8 : 0) + (a.cookie ? DNS_COOKIE_OPTION_LEN : 0)
	                     : 0) +
	                    (tsig_on ? dns_tsig_rr_len(&tsig) : 0));
	if (dns_msg_begin(&a.msg, q, 0) != 0) {
		/* A question too long for 512 bytes cannot be echoed: answer without it. */
		q->has_question = false;
		if (dns_msg_begin(&a.msg, q, 0) != 0)
			return 0;
	}
	if (status != DNS_QUERY_OK) {
		a.rcode = status_rcode(status);
	} else if (tsig_rcode != DNS_RCODE_NOERROR) {
		a.rcode = tsig_rcode; /* RFC 8945 5.2: NOTAUTH, the TSIG error says why */
	} else if (q->opcode == DNS_OPCODE_NOTIFY) {
		a.rcode = auth_notify(view, client, q, tsig_on ? &tsig : NULL, &a.msg);
	} else if (a.cookie && view->cookies_require && !client->tcp && !tsig_on &&
	           a.cookie_status != DNS_COOKIE_VALID && a.cookie_status != DNS_COOKIE_STALE) {
		/* RFC 7873 5.2.3: no answer data until the client shows our cookie. */
		a.rcode = DNS_RCODE_BADCOOKIE;
		STEER_COUNTER_INC(stats->cookie_badcookie);
	} else {
		answer_query(&a, view, client, axfr, stats, tsig_on ? &tsig : NULL);
	}
	/* A signed answer is never rewritten by the limiter: the rewrite would break its MAC. */
	if (view->rrl.table != NULL && !client->tcp && !tsig_on)
		rrl_info(&a, view, client, qctx);
	size_t len = finish(&a, view, client, stats);
	if (!tsig_on || len == 0)
		return len;
	size_t signed_len = dns_tsig_sign(&tsig, resp, len, limit, now);
	STEER_ASSERT(signed_len != 0); /* the space was reserved up front */
	if (axfr && axfr->zone && client->tcp && a.rcode == DNS_RCODE_NOERROR &&
	    (q->qtype == DNS_TYPE_AXFR || q->qtype == DNS_TYPE_IXFR)) {
		/* The transfer's next messages continue this exchange. */
		axfr->tsig = tsig;
		axfr->tsig_on = true;
	}
	return signed_len;
}
