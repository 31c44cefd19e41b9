/*
 * Response Rate Limiting. A bucket is one 64-bit word: the second it was last updated (32
 * bits), its signed balance of tokens (24 bits) and a count of limited answers (8 bits) that
 * picks every slip-th one. Flows whose keys hash to the same bucket share it: that can only
 * limit them sooner, and a keyed hash keeps an attacker from aiming at someone else's.
 */
#include "auth/rrl.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/alloc.h"
#include "base/log.h"
#include "dns/cookie.h"
#include "dns/dname.h"
#include "dns/wire.h"

#define BALANCE_MAX ((1 << 23) - 1)
#define BALANCE_MIN (-(1 << 23))
#define CAS_TRIES   8

struct auth_rrl_table {
	size_t size;
	uint8_t key[16];
	_Atomic uint64_t bucket[];
};

auth_rrl_table_t *auth_rrl_table_new(size_t size)
{
	STEER_ASSERT(size > 0);
	auth_rrl_table_t *t = xcalloc(1, sizeof(*t) + size * sizeof(t->bucket[0]));
	t->size = size;
	if (getrandom(t->key, sizeof(t->key), 0) != (ssize_t)sizeof(t->key)) {
		/* Predictable keys only let an attacker aim collisions: still a working limiter. */
		uint64_t x = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)t;
		memcpy(t->key, &x, sizeof(x));
	}
	for (size_t i = 0; i < size; i++)
		atomic_init(&t->bucket[i], 0);
	return t;
}

void auth_rrl_table_free(auth_rrl_table_t *t)
{
	free(t);
}

size_t auth_rrl_table_size(const auth_rrl_table_t *t)
{
	return t->size;
}

/* The client's prefix (masked address) into @p out; returns false for other families. */
static bool client_prefix(const auth_rrl_conf_t *c, const steer_sockaddr_t *remote, uint8_t out[17])
{
	memset(out, 0, 17);
	const uint8_t *addr;
	unsigned bits;
	if (remote->sa.sa_family == AF_INET) {
		addr = (const uint8_t *)&remote->sin.sin_addr;
		bits = c->ipv4_prefix;
		out[16] = 4;
	} else if (remote->sa.sa_family == AF_INET6) {
		addr = (const uint8_t *)&remote->sin6.sin6_addr;
		bits = c->ipv6_prefix;
		out[16] = 6;
	} else {
		return false;
	}
	unsigned full = bits / 8;
	memcpy(out, addr, full);
	if (bits % 8)
		out[full] = (uint8_t)(addr[full] & (0xff00 >> (bits % 8)));
	return true;
}

static unsigned class_rate(const auth_rrl_conf_t *c, uint8_t cls)
{
	if (cls == AUTH_RRL_NXDOMAIN)
		return c->nxdomain_rate;
	if (cls == AUTH_RRL_ERROR)
		return c->error_rate;
	return c->rate;
}

typedef struct {
	uint32_t ts;
	int32_t balance;
	uint8_t limited;
} bucket_t;

static bucket_t unpack(uint64_t w)
{
	bucket_t b = {.ts = (uint32_t)(w >> 32), .limited = (uint8_t)w};
	uint32_t raw = (uint32_t)(w >> 8) & 0xffffff;
	b.balance = (int32_t)(raw ^ 0x800000) - 0x800000; /* sign-extend 24 bits */
	return b;
}

static uint64_t pack(bucket_t b)
{
	return (uint64_t)b.ts << 32 | ((uint64_t)((uint32_t)b.balance & 0xffffff) << 8) | b.limited;
}

/* One token taken from @p b at @p now; returns whether one was there. @p dry: the bucket
 * had credit before this answer found none (the flow starts being limited). */
static bool take(bucket_t *b, uint32_t now, int64_t rate, int64_t debt, bool *dry)
{
	if (b->ts == 0) {
		b->balance = (int32_t)rate; /* a new flow starts with one second's worth */
	} else if (now != b->ts) {
		int64_t elapsed = (int64_t)(int32_t)(now - b->ts);
		if (elapsed < 0)
			elapsed = 0;
		int64_t bal = (int64_t)b->balance + elapsed * rate;
		b->balance = (int32_t)(bal > rate ? rate : bal);
	}
	b->ts = now == 0 ? 1 : now;
	int64_t bal = (int64_t)b->balance - 1;
	bool ok = bal >= 0;
	*dry = !ok && b->balance >= 0;
	if (bal < -debt)
		bal = -debt;
	b->balance = (int32_t)bal;
	if (!ok)
		b->limited++;
	return ok;
}

void auth_rrl_classify(const auth_rrl_t *rrl, const steer_sockaddr_t *remote, const uint8_t *name,
                       uint16_t qtype, auth_rrl_info_t *info)
{
	const auth_rrl_conf_t *c = &rrl->conf;
	/* Prefix, class, type and name in one buffer: a single hash per answer. */
	uint8_t key[17 + 1 + 2 + DNS_DNAME_MAXLEN];
	info->exempt = true;
	info->slot = 0;
	if (info->cls == AUTH_RRL_NONE || (info->cookie_ok && c->exempt_cookies) ||
	    !client_prefix(c, remote, key))
		return;
	if (c->n_exempt > 0 && steer_prefix_list_match(c->exempt, c->n_exempt, remote))
		return;
	info->exempt = false;
	memcpy(info->prefix, key, sizeof(info->prefix));
	key[17] = info->cls;
	key[18] = (uint8_t)(qtype >> 8);
	key[19] = (uint8_t)qtype;
	size_t len = 20;
	if (name != NULL) {
		size_t n = dname_len(name);
		memcpy(key + len, name, n);
		len += n;
	}
	const auth_rrl_table_t *t = rrl->table;
	info->slot = (uint32_t)(dns_siphash24(t->key, key, len) % t->size);
}

/* auth_rrl_check(), telling in @p dry whether this answer is the first one limited. */
static auth_rrl_verdict_t check(const auth_rrl_t *rrl, const auth_rrl_info_t *info, uint32_t now_s,
                                auth_stats_t *stats, bool *dry)
{
	*dry = false;
	const auth_rrl_conf_t *c = &rrl->conf;
	if (rrl->table == NULL || info->cls == AUTH_RRL_NONE || info->exempt)
		return AUTH_RRL_PASS;
	_Atomic uint64_t *slot = &rrl->table->bucket[info->slot % rrl->table->size];

	int64_t rate = class_rate(c, info->cls);
	if (rate > BALANCE_MAX)
		rate = BALANCE_MAX;
	int64_t debt = rate * (int64_t)c->window;
	if (debt > -(int64_t)BALANCE_MIN)
		debt = -(int64_t)BALANCE_MIN;
	uint64_t old = atomic_load_explicit(slot, memory_order_relaxed);
	bucket_t b;
	bool ok = true;
	/* A lost race retries with the winner's word; after a few, the last computation stands
	 * (at worst one answer is counted against a slightly stale balance). */
	for (int i = 0; i < CAS_TRIES; i++) {
		b = unpack(old);
		ok = take(&b, now_s, rate, debt, dry);
		if (atomic_compare_exchange_weak_explicit(slot, &old, pack(b), memory_order_relaxed,
		                                          memory_order_relaxed))
			break;
	}
	if (ok)
		return AUTH_RRL_PASS;
	if (c->log_only) {
		STEER_COUNTER_INC(stats->rrl_logged);
		return AUTH_RRL_PASS;
	}
	if (c->slip > 0 && b.limited % c->slip == 0) {
		STEER_COUNTER_INC(stats->rrl_slipped);
		return AUTH_RRL_SLIP;
	}
	STEER_COUNTER_INC(stats->rrl_dropped);
	return AUTH_RRL_DROP;
}

auth_rrl_verdict_t auth_rrl_check(const auth_rrl_t *rrl, const auth_rrl_info_t *info,
                                  uint32_t now_s, auth_stats_t *stats)
{
	bool dry;
	return check(rrl, info, now_s, stats, &dry);
}

static const char *class_name(uint8_t cls)
{
	switch (cls) {
	case AUTH_RRL_POSITIVE:
		return "positive";
	case AUTH_RRL_NODATA:
		return "NODATA";
	case AUTH_RRL_NXDOMAIN:
		return "NXDOMAIN";
	case AUTH_RRL_REFERRAL:
		return "referral";
	case AUTH_RRL_ERROR:
		return "error";
	default:
		return "other";
	}
}

/* "192.0.2.0/24" for the prefix of @p info into @p buf. */
static void prefix_str(const auth_rrl_conf_t *c, const auth_rrl_info_t *info, char *buf,
                       size_t size)
{
	int v4 = info->prefix[16] == 4;
	char addr[INET6_ADDRSTRLEN] = "?";
	inet_ntop(v4 ? AF_INET : AF_INET6, info->prefix, addr, sizeof(addr));
	snprintf(buf, size, "%s/%u", addr, v4 ? c->ipv4_prefix : c->ipv6_prefix);
}

/* The notice for a flow that starts being limited, with the question of @p resp. */
static void log_limited(const auth_rrl_t *rrl, const auth_rrl_info_t *info,
                        auth_rrl_verdict_t verdict, const uint8_t *resp, size_t len)
{
	static log_ratelimit_t rl;
	char who[INET6_ADDRSTRLEN + 8], qname[DNAME_STR_MAXLEN] = "?";
	uint8_t name[DNS_DNAME_MAXLEN];
	size_t off = DNS_HEADER_LEN;
	if (wire_read_u16(resp + 4) > 0 && dname_unpack(resp, len, &off, name) >= 0)
		dname_to_str(name, qname, sizeof(qname));
	prefix_str(&rrl->conf, info, who, sizeof(who));
	const char *what = rrl->conf.log_only         ? "would limit (log-only)"
	                   : verdict == AUTH_RRL_SLIP ? "limiting (this one slipped)"
	                                              : "limiting (dropped)";
	log_ratelimited(&rl, LOG_LEVEL_NOTICE, "rate limit: %s %s answers to %s for %s", what,
	                class_name(info->cls), who, qname);
}

size_t auth_rrl_apply(const auth_rrl_t *rrl, const auth_rrl_info_t *info, uint8_t *resp, size_t len,
                      auth_stats_t *stats)
{
	if (rrl->table == NULL || info->cls == AUTH_RRL_NONE || len < DNS_HEADER_LEN)
		return len;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	bool dry;
	auth_rrl_verdict_t verdict = check(rrl, info, (uint32_t)ts.tv_sec, stats, &dry);
	if (STEER_UNLIKELY(dry))
		log_limited(rrl, info, verdict, resp, len);
	switch (verdict) {
	case AUTH_RRL_PASS:
		return len;
	case AUTH_RRL_DROP:
		return 0;
	case AUTH_RRL_SLIP:
		break;
	}
	size_t end = info->question_end >= DNS_HEADER_LEN && info->question_end <= len
	                 ? info->question_end
	                 : DNS_HEADER_LEN;
	resp[2] |= DNS_FLAG_TC >> 8;
	wire_write_u16(resp + 4, end > DNS_HEADER_LEN ? 1 : 0);
	memset(resp + 6, 0, 6);
	return end;
}
