/*
 * The query threads' side of the forwarder (see serve.h).
 */
#include "fwd/serve.h"

#include <string.h>

#include "dns/const.h"
#include "dns/msg.h"
#include "dns/nsid.h"

bool fwd_serve_type_ok(uint16_t qtype)
{
	/* 128-254 are the meta types and question-only types (RFC 6895 3.1), OPT is not a
	 * question either; ANY (255) is a question a resolver answers. */
	return qtype != DNS_TYPE_OPT && (qtype < 128 || qtype > 254);
}

size_t fwd_serve_error(const dns_query_t *q, uint8_t rcode, uint16_t payload, uint8_t *resp,
                       size_t cap)
{
	size_t limit = cap < DNS_MSG_MAXLEN ? cap : DNS_MSG_MAXLEN;
	dns_msg_t msg;
	dns_msg_init(&msg, resp, limit);
	if (q->has_edns)
		dns_msg_reserve(&msg, DNS_OPT_RR_LEN);
	if (dns_msg_begin(&msg, q, rcode) != 0)
		return 0;
	dns_msg_set_flags(&msg, DNS_FLAG_RA, 0);
	if (q->has_edns && dns_msg_put_opt(&msg, payload, 0, q->edns_do, NULL, 0) != 0)
		return 0;
	return dns_msg_finish(&msg);
}

/* The largest UDP reply this client may get: 512 without EDNS, else its size within ours. */
static uint16_t udp_payload(const fwd_view_t *v, const dns_query_t *q)
{
	if (!q->has_edns)
		return DNS_UDP_MINLEN;
	return q->edns_payload < v->udp_max_payload ? q->edns_payload : v->udp_max_payload;
}

/* The client's COOKIE option, added to an answer built within its size minus the option's:
 * the room was kept, so it always fits (left out only if a builder misbehaved). */
static size_t with_cookie(const fwd_serve_client_t *client, uint8_t *resp, size_t len, size_t limit)
{
	if (len == 0 || client->cookie_len == 0)
		return len;
	return dns_edns_option_append(resp, len, limit, client->cookie, client->cookie_len);
}

/* Our own error answer to a client we serve, with its cookie. */
static size_t serve_error(const fwd_view_t *v, const dns_query_t *q,
                          const fwd_serve_client_t *client, uint8_t rcode, uint8_t *resp,
                          size_t resp_cap)
{
	size_t len = fwd_serve_error(q, rcode, v->udp_max_payload, resp, resp_cap);
	return with_cookie(client, resp, len, resp_cap);
}

static void prefetch(const fwd_view_t *v, const uint8_t *pkt, size_t len,
                     const fwd_serve_client_t *client)
{
	fwd_client_t none;
	client->fill(client->fill_arg, &none);
	none.reply = NULL;
	/* A refusal (engine full) only means the entry expires and the next miss fetches it. */
	if (fwd_engine_submit(v->engine, pkt, len, &none, FWD_SUBMIT_PREFETCH) != 0)
		return;
}

static fwd_serve_result_t hand_off(const fwd_view_t *v, const dns_query_t *q, const uint8_t *pkt,
                                   size_t len, const fwd_serve_client_t *client, bool stale_ok,
                                   uint8_t *resp, size_t resp_cap, size_t *resp_len,
                                   fwd_serve_counters_t *ctr)
{
	fwd_client_t who;
	client->fill(client->fill_arg, &who);
	if (client->cookie_len != 0) {
		memcpy(who.cookie, client->cookie, client->cookie_len);
		who.cookie_len = client->cookie_len;
	}
	int ret = fwd_engine_submit(v->engine, pkt, len, &who, stale_ok ? FWD_SUBMIT_STALE_OK : 0);
	if (ret == 0) {
		STEER_COUNTER_INC(ctr->forwarded);
		return FWD_SERVE_QUEUED;
	}
	STEER_COUNTER_INC(ctr->overload);
	*resp_len = serve_error(v, q, client, DNS_RCODE_SERVFAIL, resp, resp_cap);
	return FWD_SERVE_ANSWERED;
}

fwd_serve_result_t fwd_serve(const fwd_view_t *v, const dns_query_t *q, const uint8_t *pkt,
                             size_t len, const fwd_serve_client_t *client, uint64_t now_ms,
                             uint8_t *resp, size_t resp_cap, size_t *resp_len,
                             fwd_serve_counters_t *ctr)
{
	*resp_len = 0;
	if (v->engine == NULL || !fwd_serve_type_ok(q->qtype) || q->qclass != DNS_CLASS_IN)
		return FWD_SERVE_REFUSED;
	if (!steer_prefix_list_match(v->allow, v->n_allow, client->remote)) {
		STEER_COUNTER_INC(ctr->refused);
		return FWD_SERVE_REFUSED;
	}
	/* The cookie's room comes off both the UDP size and the buffer (TCP). */
	size_t limit = client->tcp ? resp_cap : udp_payload(v, q);
	if (limit > resp_cap)
		limit = resp_cap;
	uint16_t payload = client->tcp ? 0 : (uint16_t)(limit - client->cookie_len);
	fwd_cache_result_t r =
	    fwd_cache_answer(v->cache, q, now_ms, false, payload, resp,
	                     resp_cap - client->cookie_len, resp_len, &ctr->cache);
	bool rd = (q->flags & DNS_FLAG_RD) != 0;
	switch (r) {
	case FWD_CACHE_HIT_PREFETCH:
		prefetch(v, pkt, len, client);
		/* fall through */
	case FWD_CACHE_HIT:
	case FWD_CACHE_STALE:
		*resp_len = with_cookie(client, resp, *resp_len, limit);
		return FWD_SERVE_ANSWERED;
	case FWD_CACHE_STALE_AVAILABLE:
	case FWD_CACHE_MISS:
		break;
	}
	if (!rd) {
		STEER_COUNTER_INC(ctr->norec_miss);
		*resp_len = serve_error(v, q, client, DNS_RCODE_SERVFAIL, resp, resp_cap);
		return FWD_SERVE_ANSWERED;
	}
	return hand_off(v, q, pkt, len, client, r == FWD_CACHE_STALE_AVAILABLE, resp, resp_cap,
	                resp_len, ctr);
}
