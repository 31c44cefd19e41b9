/*
 * The answer cache. A fixed number of shards, each a fixed-size table of RCU-published
 * singly linked chains: the memory cap bounds the number of entries, so the tables never
 * resize and a reader never meets a table being rebuilt. Writers serialise per shard on a
 * mutex; eviction is CLOCK over a writer-only ring per shard.
 */
#include "fwd/cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <urcu.h>

#include "base/err.h"
#include "base/siphash.h"
#include "dns/dname.h"
#include "dns/wire.h"

#define FWD_SHARD_BITS 4
#define FWD_SHARDS     (1u << FWD_SHARD_BITS)
/* What malloc keeps next to each block (glibc: one size word, 16-byte rounding). */
#define FWD_MALLOC_OVERHEAD 16
/* Assumed mean entry size when sizing the tables: one bucket per this many bytes of cap. */
#define FWD_BYTES_PER_BUCKET 512
#define FWD_MIN_BYTES        (256u * 1024)
/* Hits since insert that make an entry popular enough to prefetch. */
#define FWD_PREFETCH_HITS 2
/* The most records a 65535-byte message can hold (11 bytes each after the header). */
#define FWD_MAX_RRS ((DNS_MSG_MAXLEN - DNS_HEADER_LEN) / 11)
/* RFC 2181 8: a TTL with the top bit set is treated as 0. */
#define FWD_TTL_MAX 0x7fffffffu
/* Chain links written by the shard's writer: it reads its own writes relaxed. Readers load
 * with acquire to pair with the release that published an entry (a plain load on x86, and one
 * that TSan understands, unlike liburcu's rcu_dereference); liburcu still provides the grace
 * period before an unlinked entry is freed. */
#define LOAD_RELAXED(x) atomic_load_explicit(&(x), memory_order_relaxed)
/* Key flag bits: the query bits that change what upstream answers. */
#define FWD_KEY_DO 0x01
#define FWD_KEY_CD 0x02

typedef struct fwd_entry fwd_entry_t;
struct fwd_entry {
	fwd_entry_t *_Atomic next; /* bucket chain: published with release, read with acquire */
	fwd_entry_t *clock_prev, *clock_next; /* writer only */
	struct rcu_head rcu;
	uint64_t hash;
	uint64_t stored_ms, expire_ms, stale_until_ms;
	uint32_t ttl_s;
	uint32_t size;              /* bytes accounted */
	_Atomic uint8_t referenced; /* hit since the clock hand last passed */
	_Atomic uint8_t hits;       /* saturates at FWD_PREFETCH_HITS */
	_Atomic uint8_t prefetched; /* prefetch reported */
	uint8_t kflags;
	uint8_t qname_len;
	uint16_t qtype, qclass;
	uint16_t nttl;
	uint16_t wire_len;
	/* ECS (off by default) would add its scope here and to the key compare. */
	uint16_t ttl_off[]; /* nttl TTL offsets into the wire, then qname, then wire */
};

typedef struct {
	pthread_mutex_t lock; /* writers only */
	fwd_entry_t *_Atomic *buckets;
	uint64_t mask;
	fwd_entry_t *hand;  /* CLOCK hand, NULL when empty */
	fwd_entry_t *sweep; /* where the next sweep starts */
	size_t budget;      /* bytes this shard's entries may use */
	_Atomic uint64_t bytes, entries, inserts, replaced, refused, evictions, expired;
} __attribute__((aligned(64))) fwd_shard_t;

struct fwd_cache {
	fwd_cache_opts_t opts;
	uint64_t k0, k1; /* hash key: names are chosen by clients, so chains must not be */
	size_t table_bytes;
	fwd_shard_t shards[FWD_SHARDS];
};

void fwd_cache_opts_default(fwd_cache_opts_t *opts)
{
	*opts = (fwd_cache_opts_t){
	    .max_bytes = 256u * 1024 * 1024,
	    .min_ttl = 0,
	    .max_ttl = 86400,
	    .max_negative_ttl = 3600,
	    .stale_answer_ttl = 30,
	    .stale_keep = 86400,
	    .edns_payload = DNS_EDNS_DEFAULT_PAYLOAD,
	    .max_cname = FWD_CACHE_MAX_CNAME,
	    .prefetch = true,
	};
}

static uint8_t key_flags(const dns_query_t *q)
{
	return (uint8_t)((q->edns_do ? FWD_KEY_DO : 0) |
	                 ((q->flags & DNS_FLAG_CD) ? FWD_KEY_CD : 0));
}

static uint64_t key_hash(const fwd_cache_t *c, const dns_query_t *q, uint8_t kflags)
{
	uint8_t key[DNS_DNAME_MAXLEN + 5];
	memcpy(key, q->qname, q->qname_len);
	wire_write_u16(key + q->qname_len, q->qtype);
	wire_write_u16(key + q->qname_len + 2, q->qclass);
	key[q->qname_len + 4] = kflags;
	/* Keyed, so a client cannot aim many names at one chain. */
	return steer_siphash13(c->k0, c->k1, key, (size_t)q->qname_len + 5);
}

static inline const uint8_t *entry_qname(const fwd_entry_t *e)
{
	return (const uint8_t *)(e->ttl_off + e->nttl);
}

static inline const uint8_t *entry_wire(const fwd_entry_t *e)
{
	return entry_qname(e) + e->qname_len;
}

/* A worker's clock may read a little behind the writer that stored the entry just now. */
static inline uint64_t entry_age_ms(const fwd_entry_t *e, uint64_t now_ms)
{
	return now_ms > e->stored_ms ? now_ms - e->stored_ms : 0;
}

static inline bool entry_matches(const fwd_entry_t *e, uint64_t hash, const dns_query_t *q,
                                 uint8_t kflags)
{
	return e->hash == hash && e->qtype == q->qtype && e->qclass == q->qclass &&
	       e->kflags == kflags && e->qname_len == q->qname_len &&
	       memcmp(entry_qname(e), q->qname, q->qname_len) == 0;
}

static inline fwd_shard_t *shard_of(const fwd_cache_t *c, uint64_t hash)
{
	return (fwd_shard_t *)&c->shards[hash >> (64 - FWD_SHARD_BITS)];
}

static inline fwd_entry_t *_Atomic *bucket_of(fwd_shard_t *s, uint64_t hash)
{
	return &s->buckets[hash & s->mask];
}

static uint64_t next_pow2(uint64_t v)
{
	uint64_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

static void seed_key(fwd_cache_t *c)
{
	uint64_t k[2];
	if (getrandom(k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k)) {
		/* No entropy yet (early boot): a clock-and-address key still differs per run. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		k[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)c;
		k[1] = (uint64_t)ts.tv_sec * 0xc2b2ae3d27d4eb4full ^ (uint64_t)(uintptr_t)&ts;
	}
	c->k0 = k[0];
	c->k1 = k[1];
}

int fwd_cache_new(const fwd_cache_opts_t *opts, fwd_cache_t **out)
{
	int ret = 0;
	*out = NULL;
	if (opts->max_bytes < FWD_MIN_BYTES || opts->max_ttl < opts->min_ttl ||
	    opts->edns_payload < DNS_UDP_MINLEN)
		return STEER_EINVAL;
	fwd_cache_t *c = calloc(1, sizeof(*c));
	if (!c)
		return STEER_ENOMEM;
	c->opts = *opts;
	seed_key(c);
	/* A table of about one bucket per mean entry, never more than 1/8 of the cap. */
	uint64_t buckets = next_pow2(opts->max_bytes / FWD_BYTES_PER_BUCKET);
	while (buckets * sizeof(fwd_entry_t *) > opts->max_bytes / 8)
		buckets >>= 1;
	if (buckets < FWD_SHARDS * 16)
		buckets = FWD_SHARDS * 16;
	uint64_t per_shard = buckets / FWD_SHARDS;
	c->table_bytes = buckets * sizeof(fwd_entry_t *) + sizeof(*c);
	size_t budget = (opts->max_bytes - c->table_bytes) / FWD_SHARDS;
	for (unsigned i = 0; i < FWD_SHARDS; i++) {
		fwd_shard_t *s = &c->shards[i];
		pthread_mutex_init(&s->lock, NULL);
		s->mask = per_shard - 1;
		s->budget = budget;
		s->buckets = calloc(per_shard, sizeof(*s->buckets));
		if (!s->buckets) {
			ret = STEER_ENOMEM;
			goto out;
		}
	}
	*out = c;
	c = NULL;
out:
	fwd_cache_free(c);
	return ret;
}

void fwd_cache_free(fwd_cache_t *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < FWD_SHARDS; i++) {
		fwd_shard_t *s = &c->shards[i];
		if (s->buckets) {
			for (uint64_t b = 0; b <= s->mask; b++) {
				fwd_entry_t *e = LOAD_RELAXED(s->buckets[b]);
				while (e) {
					fwd_entry_t *next = LOAD_RELAXED(e->next);
					free(e);
					e = next;
				}
			}
		}
		free(s->buckets);
		pthread_mutex_destroy(&s->lock);
	}
	free(c);
}

/* ---- reader side ---- */

static void put_ttls(const fwd_entry_t *e, uint8_t *resp, bool stale, uint32_t stale_ttl,
                     uint32_t age_s)
{
	const uint8_t *wire = entry_wire(e);
	for (uint16_t i = 0; i < e->nttl; i++) {
		uint16_t off = e->ttl_off[i];
		uint32_t ttl = stale_ttl;
		if (!stale) {
			uint32_t orig = wire_read_u32(wire + off);
			ttl = orig > age_s ? orig - age_s : 0;
		}
		wire_write_u32(resp + off, ttl);
	}
}

static uint16_t answer_flags(uint16_t tpl, const dns_query_t *q, bool tc)
{
	uint16_t f = DNS_FLAG_QR | DNS_FLAG_RA | (tpl & DNS_RCODE_MASK);
	f |= q->flags & (DNS_FLAG_RD | DNS_FLAG_CD);
	/* RFC 6840 5.8: AD only for a client that showed it understands it. */
	if ((tpl & DNS_FLAG_AD) && (q->edns_do || (q->flags & DNS_FLAG_AD)))
		f |= DNS_FLAG_AD;
	if (tc)
		f |= DNS_FLAG_TC;
	return f;
}

static size_t put_opt(const fwd_cache_t *c, const dns_query_t *q, uint8_t *p)
{
	p[0] = 0; /* root owner */
	wire_write_u16(p + 1, DNS_TYPE_OPT);
	wire_write_u16(p + 3, c->opts.edns_payload);
	wire_write_u32(p + 5, q->edns_do ? DNS_EDNS_DO : 0);
	wire_write_u16(p + 9, 0);
	return DNS_OPT_RR_LEN;
}

static size_t build_answer(const fwd_cache_t *c, const fwd_entry_t *e, const dns_query_t *q,
                           uint64_t now_ms, bool stale, uint16_t udp_payload, uint8_t *resp,
                           size_t resp_cap, fwd_cache_counters_t *ctr)
{
	const uint8_t *wire = entry_wire(e);
	size_t opt_len = q->has_edns ? DNS_OPT_RR_LEN : 0;
	size_t limit = udp_payload && udp_payload < resp_cap ? udp_payload : resp_cap;
	uint16_t tpl_flags = wire_read_u16(wire + 2);
	size_t len;
	if ((size_t)e->wire_len + opt_len <= limit) {
		memcpy(resp, wire, e->wire_len);
		/* The client's own spelling of the name: same length, so pointers stay valid. */
		memcpy(resp + DNS_HEADER_LEN, q->question, q->question_len);
		uint32_t age_s = (uint32_t)(entry_age_ms(e, now_ms) / 1000);
		put_ttls(e, resp, stale, c->opts.stale_answer_ttl, age_s);
		wire_write_u16(resp + 2, answer_flags(tpl_flags, q, false));
		len = e->wire_len;
	} else {
		/* Too big for this client over UDP: the question alone, TC=1, so it asks over
		 * TCP (RFC 2181 9: never a partial RRset). */
		if (DNS_HEADER_LEN + q->question_len + opt_len > resp_cap)
			return 0;
		memcpy(resp + DNS_HEADER_LEN, q->question, q->question_len);
		wire_write_u16(resp + 2, answer_flags(tpl_flags, q, true));
		wire_write_u16(resp + 4, 1);
		memset(resp + 6, 0, 6);
		len = DNS_HEADER_LEN + q->question_len;
		if (ctr)
			STEER_COUNTER_INC(ctr->truncated);
	}
	wire_write_u16(resp, q->id);
	if (opt_len) {
		len += put_opt(c, q, resp + len);
		wire_write_u16(resp + 10, (uint16_t)(wire_read_u16(resp + 10) + 1));
	}
	return len;
}

/* Mark the entry used, writing only when a bit changes, so a name hot on every worker does
 * not bounce its cache line between them on each hit. */
static inline unsigned note_hit(fwd_entry_t *e)
{
	if (!atomic_load_explicit(&e->referenced, memory_order_relaxed))
		atomic_store_explicit(&e->referenced, 1, memory_order_relaxed);
	unsigned hits = atomic_load_explicit(&e->hits, memory_order_relaxed);
	if (hits < FWD_PREFETCH_HITS) {
		hits++;
		atomic_store_explicit(&e->hits, (uint8_t)hits, memory_order_relaxed);
	}
	return hits;
}

fwd_cache_result_t fwd_cache_answer(const fwd_cache_t *c, const dns_query_t *q, uint64_t now_ms,
                                    bool want_stale, uint16_t udp_payload, uint8_t *resp,
                                    size_t resp_cap, size_t *resp_len, fwd_cache_counters_t *ctr)
{
	*resp_len = 0;
	fwd_cache_result_t res = FWD_CACHE_MISS;
	if (!q->has_question || q->question_len != (size_t)q->qname_len + 4)
		goto out;
	uint8_t kflags = key_flags(q);
	uint64_t hash = key_hash(c, q, kflags);
	fwd_shard_t *s = shard_of(c, hash);
	fwd_entry_t *e = atomic_load_explicit(bucket_of(s, hash), memory_order_acquire);
	while (e && !entry_matches(e, hash, q, kflags))
		e = atomic_load_explicit(&e->next, memory_order_acquire);
	if (!e || now_ms >= e->stale_until_ms)
		goto out;
	bool stale = now_ms >= e->expire_ms;
	if (stale && !want_stale) {
		res = FWD_CACHE_STALE_AVAILABLE;
		goto out;
	}
	unsigned hits = note_hit(e);
	*resp_len = build_answer(c, e, q, now_ms, stale, udp_payload, resp, resp_cap, ctr);
	if (*resp_len == 0)
		goto out;
	if (stale) {
		res = FWD_CACHE_STALE;
		goto out;
	}
	res = FWD_CACHE_HIT;
	/* Last 10 % of the TTL: age * 10 >= ttl * 9, in milliseconds. */
	if (c->opts.prefetch && hits >= FWD_PREFETCH_HITS &&
	    entry_age_ms(e, now_ms) * 10 >= (uint64_t)e->ttl_s * 9000 &&
	    !atomic_load_explicit(&e->prefetched, memory_order_relaxed) &&
	    !atomic_exchange_explicit(&e->prefetched, 1, memory_order_relaxed))
		res = FWD_CACHE_HIT_PREFETCH;
out:
	if (ctr) {
		switch (res) {
		case FWD_CACHE_MISS:
			STEER_COUNTER_INC(ctr->misses);
			break;
		case FWD_CACHE_HIT:
			STEER_COUNTER_INC(ctr->hits);
			break;
		case FWD_CACHE_HIT_PREFETCH:
			STEER_COUNTER_INC(ctr->hits);
			STEER_COUNTER_INC(ctr->prefetches);
			break;
		case FWD_CACHE_STALE_AVAILABLE:
			STEER_COUNTER_INC(ctr->stale_available);
			break;
		case FWD_CACHE_STALE:
			STEER_COUNTER_INC(ctr->stale_answers);
			break;
		}
	}
	return res;
}

/* ---- writer side ---- */

static void entry_free_cb(struct rcu_head *head)
{
	free(caa_container_of(head, fwd_entry_t, rcu));
}

static void counter_add(_Atomic uint64_t *ctr, int64_t n)
{
	/* Written under the shard lock only; readers of the stats load relaxed. */
	atomic_store_explicit(ctr, atomic_load_explicit(ctr, memory_order_relaxed) + (uint64_t)n,
	                      memory_order_relaxed);
}

static void ring_insert(fwd_shard_t *s, fwd_entry_t *e)
{
	/* Just behind the hand: a new entry gets a full turn before it is looked at. */
	if (!s->hand) {
		e->clock_next = e->clock_prev = e;
		s->hand = e;
		return;
	}
	e->clock_next = s->hand;
	e->clock_prev = s->hand->clock_prev;
	s->hand->clock_prev->clock_next = e;
	s->hand->clock_prev = e;
}

static void ring_remove(fwd_shard_t *s, fwd_entry_t *e)
{
	if (e->clock_next == e) {
		s->hand = s->sweep = NULL;
		return;
	}
	if (s->hand == e)
		s->hand = e->clock_next;
	if (s->sweep == e)
		s->sweep = e->clock_next;
	e->clock_prev->clock_next = e->clock_next;
	e->clock_next->clock_prev = e->clock_prev;
}

/* Unlink @p e from its chain, its ring and the accounting; freed after a grace period. */
static void entry_remove(fwd_shard_t *s, fwd_entry_t *e, _Atomic uint64_t *why)
{
	fwd_entry_t *_Atomic *link = bucket_of(s, e->hash);
	while (LOAD_RELAXED(*link) != e)
		link = &LOAD_RELAXED(*link)->next;
	/* Readers on e still step from it to its successor until the grace period ends. */
	atomic_store_explicit(link, LOAD_RELAXED(e->next), memory_order_release);
	ring_remove(s, e);
	counter_add(&s->bytes, -(int64_t)e->size);
	counter_add(&s->entries, -1);
	if (why)
		counter_add(why, 1);
	call_rcu(&e->rcu, entry_free_cb);
}

/* CLOCK: drop the first entry past stale-keep or not hit since the hand last passed. */
static bool evict_one(fwd_shard_t *s, uint64_t now_ms, fwd_entry_t *keep)
{
	fwd_entry_t *e = s->hand;
	uint64_t n = atomic_load_explicit(&s->entries, memory_order_relaxed);
	/* Two turns at most: the first clears every referenced bit. */
	for (uint64_t i = 0; e && i <= 2 * n; i++, e = e->clock_next) {
		if (e == keep)
			continue;
		if (now_ms >= e->stale_until_ms) {
			s->hand = e->clock_next;
			entry_remove(s, e, &s->expired);
			return true;
		}
		if (atomic_load_explicit(&e->referenced, memory_order_relaxed)) {
			atomic_store_explicit(&e->referenced, 0, memory_order_relaxed);
			continue;
		}
		s->hand = e->clock_next;
		entry_remove(s, e, &s->evictions);
		return true;
	}
	return false;
}

typedef struct {
	uint16_t tpl_len; /* bytes of the template (the reply up to its OPT) */
	uint16_t arcount; /* additional records kept */
	uint16_t nttl;
	uint32_t ttl_s;
	uint16_t ttl_off[FWD_MAX_RRS];
	uint32_t ttl[FWD_MAX_RRS];
} fwd_parsed_t;

/* The SOA's MINIMUM (RFC 2308 4) from its rdata, names skipped; -1 when malformed. */
static int64_t soa_minimum(const uint8_t *msg, size_t rdata, size_t rdend)
{
	uint8_t name[DNS_DNAME_MAXLEN];
	size_t pos = rdata;
	if (dname_unpack(msg, rdend, &pos, name) < 0 || dname_unpack(msg, rdend, &pos, name) < 0)
		return -1;
	if (rdend - pos != 20)
		return -1;
	return wire_read_u32(msg + pos + 16);
}

static int parse_reply(const fwd_cache_t *c, const dns_query_t *q, const uint8_t *msg, size_t len,
                       fwd_parsed_t *p)
{
	if (len < DNS_HEADER_LEN)
		return STEER_EMALF;
	if (len > DNS_MSG_MAXLEN)
		return STEER_ERANGE;
	uint16_t flags = wire_read_u16(msg + 2);
	uint16_t qd = wire_read_u16(msg + 4), an = wire_read_u16(msg + 6);
	uint16_t ns = wire_read_u16(msg + 8), ar = wire_read_u16(msg + 10);
	if (!(flags & DNS_FLAG_QR) || (flags & DNS_OPCODE_MASK) || qd != 1)
		return STEER_EINVAL;
	uint8_t name[DNS_DNAME_MAXLEN];
	size_t pos = DNS_HEADER_LEN;
	int nlen = dname_unpack_lower(msg, len, &pos, name);
	if (nlen < 0 || pos - DNS_HEADER_LEN != (size_t)nlen || pos + 4 > len)
		return STEER_EMALF;
	if (nlen != q->qname_len || memcmp(name, q->qname, (size_t)nlen) != 0 ||
	    wire_read_u16(msg + pos) != q->qtype || wire_read_u16(msg + pos + 2) != q->qclass)
		return STEER_EINVAL;
	pos += 4;
	uint8_t rcode = flags & DNS_RCODE_MASK;
	if ((flags & DNS_FLAG_TC) || (rcode != DNS_RCODE_NOERROR && rcode != DNS_RCODE_NXDOMAIN))
		return STEER_EACCES;

	unsigned total = (unsigned)an + ns + ar, cnames = 0;
	bool has_data = false, has_soa = false;
	uint32_t neg_ttl = 0;
	p->tpl_len = 0;
	p->arcount = ar;
	p->nttl = 0;
	for (unsigned i = 0; i < total; i++) {
		size_t start = pos;
		if (dname_unpack(msg, len, &pos, name) < 0)
			return STEER_EMALF;
		bool root = name[0] == 0;
		wire_ctx_t ctx = wire_ctx_init_const(msg + pos, len - pos);
		uint16_t type = wire_ctx_read_u16(&ctx);
		wire_ctx_skip(&ctx, 2);
		uint32_t ttl = wire_ctx_read_u32(&ctx);
		uint16_t rdlen = wire_ctx_read_u16(&ctx);
		wire_ctx_skip(&ctx, rdlen);
		if (ctx.err)
			return STEER_EMALF;
		size_t ttl_off = pos + 4, rdata = pos + 10;
		pos += wire_ctx_offset(&ctx);
		if (i < an) {
			if (type == DNS_TYPE_CNAME && ++cnames > c->opts.max_cname)
				return STEER_EACCES;
			if (type == q->qtype || q->qtype == DNS_TYPE_ANY)
				has_data = true;
		} else if (i < (unsigned)an + ns && type == DNS_TYPE_SOA && !has_soa) {
			int64_t min = soa_minimum(msg, rdata, pos);
			if (min < 0)
				return STEER_EMALF;
			has_soa = true;
			uint32_t t = ttl > FWD_TTL_MAX ? 0 : ttl;
			neg_ttl = (uint32_t)min < t ? (uint32_t)min : t;
		}
		if (type == DNS_TYPE_OPT) {
			/* Rebuilt per client. Only when last: removing it from the middle would
			 * move the records that compression pointers may point into. */
			if (i < (unsigned)an + ns || !root || i != total - 1)
				return i < (unsigned)an + ns || !root ? STEER_EMALF : STEER_EACCES;
			if ((ttl >> 24) != 0 || ((ttl >> 16) & 0xff) != 0)
				return STEER_EACCES; /* extended rcode or EDNS version we did not
				                        ask */
			p->tpl_len = (uint16_t)start;
			p->arcount--;
			continue;
		}
		if (type == DNS_TYPE_TSIG)
			return STEER_EACCES;
		p->ttl_off[p->nttl] = (uint16_t)ttl_off;
		p->ttl[p->nttl] = ttl > FWD_TTL_MAX ? 0 : ttl;
		p->nttl++;
	}
	if (pos != len)
		return STEER_EMALF; /* bytes after the last record: the counts lie */
	if (p->tpl_len == 0)
		p->tpl_len = (uint16_t)len;

	bool negative = rcode == DNS_RCODE_NXDOMAIN || !has_data;
	uint32_t cap = c->opts.max_ttl;
	if (negative) {
		if (!has_soa)
			return STEER_EACCES;
		if (neg_ttl > c->opts.max_negative_ttl)
			neg_ttl = c->opts.max_negative_ttl;
		cap = neg_ttl < cap ? neg_ttl : cap;
	}
	/* Every TTL served is clamped, and the entry lives as long as its shortest one, so no
	 * record counts down to 0 while the entry is fresh. min_ttl raises positive records
	 * only: a negative TTL is the zone's own choice (RFC 2308). */
	uint32_t min = UINT32_MAX;
	for (uint16_t i = 0; i < p->nttl; i++) {
		uint32_t t = p->ttl[i];
		if (!negative && t < c->opts.min_ttl)
			t = c->opts.min_ttl;
		if (t > cap)
			t = cap;
		p->ttl[i] = t;
		if (t < min)
			min = t;
	}
	if (p->nttl == 0 || min == 0)
		return STEER_EACCES;
	p->ttl_s = min;
	return 0;
}

static fwd_entry_t *entry_make(const fwd_cache_t *c, const dns_query_t *q, const uint8_t *msg,
                               const fwd_parsed_t *p, uint64_t hash, uint64_t now_ms)
{
	size_t bytes = sizeof(fwd_entry_t) + p->nttl * sizeof(uint16_t) + q->qname_len + p->tpl_len;
	fwd_entry_t *e = malloc(bytes);
	if (!e)
		return NULL;
	memset(e, 0, sizeof(*e));
	e->hash = hash;
	e->stored_ms = now_ms;
	e->ttl_s = p->ttl_s;
	e->expire_ms = now_ms + (uint64_t)p->ttl_s * 1000;
	e->stale_until_ms = e->expire_ms;
	if (c->opts.stale_answer_ttl)
		e->stale_until_ms += (uint64_t)c->opts.stale_keep * 1000;
	e->size = (uint32_t)(bytes + FWD_MALLOC_OVERHEAD);
	e->kflags = key_flags(q);
	e->qname_len = q->qname_len;
	e->qtype = q->qtype;
	e->qclass = q->qclass;
	e->nttl = p->nttl;
	e->wire_len = p->tpl_len;
	memcpy(e->ttl_off, p->ttl_off, p->nttl * sizeof(uint16_t));
	memcpy((uint8_t *)entry_qname(e), q->qname, q->qname_len);
	uint8_t *wire = (uint8_t *)entry_wire(e);
	memcpy(wire, msg, p->tpl_len);
	wire_write_u16(wire, 0);
	wire_write_u16(wire + 10, p->arcount);
	for (uint16_t i = 0; i < p->nttl; i++)
		wire_write_u32(wire + p->ttl_off[i], p->ttl[i]);
	return e;
}

int fwd_cache_store(fwd_cache_t *c, const dns_query_t *q, const uint8_t *reply, size_t len,
                    uint64_t now_ms)
{
	int ret = 0;
	fwd_parsed_t *p = NULL;
	fwd_entry_t *e = NULL;
	uint64_t hash = q->has_question ? key_hash(c, q, key_flags(q)) : 0;
	fwd_shard_t *s = shard_of(c, hash);
	if (!q->has_question) {
		ret = STEER_EINVAL;
		goto out;
	}
	/* ~36 KiB: too much for the stack of an event-loop thread. */
	p = malloc(sizeof(*p));
	if (!p) {
		ret = STEER_ENOMEM;
		goto out;
	}
	ret = parse_reply(c, q, reply, len, p);
	if (ret)
		goto out;
	e = entry_make(c, q, reply, p, hash, now_ms);
	if (!e) {
		ret = STEER_ENOMEM;
		goto out;
	}
	if (e->size > s->budget) {
		ret = STEER_ERANGE;
		goto out;
	}

	pthread_mutex_lock(&s->lock);
	fwd_entry_t *_Atomic *head = bucket_of(s, hash);
	fwd_entry_t *old = LOAD_RELAXED(*head);
	while (old && !entry_matches(old, hash, q, e->kflags))
		old = LOAD_RELAXED(old->next);
	size_t freed = old ? old->size : 0;
	while (atomic_load_explicit(&s->bytes, memory_order_relaxed) + e->size >
	           s->budget + freed &&
	       evict_one(s, now_ms, old))
		;
	/* Publish the new entry before unlinking the old one: readers see one or the other. */
	atomic_store_explicit(&e->next, LOAD_RELAXED(*head), memory_order_relaxed);
	atomic_store_explicit(head, e, memory_order_release);
	ring_insert(s, e);
	counter_add(&s->bytes, e->size);
	counter_add(&s->entries, 1);
	counter_add(&s->inserts, 1);
	if (old)
		entry_remove(s, old, &s->replaced);
	pthread_mutex_unlock(&s->lock);
	e = NULL;
out:
	if (ret) {
		pthread_mutex_lock(&s->lock);
		counter_add(&s->refused, 1);
		pthread_mutex_unlock(&s->lock);
	}
	free(e);
	free(p);
	return ret;
}

size_t fwd_cache_sweep(fwd_cache_t *c, uint64_t now_ms, size_t max_visit)
{
	size_t dropped = 0;
	for (unsigned i = 0; i < FWD_SHARDS; i++) {
		fwd_shard_t *s = &c->shards[i];
		pthread_mutex_lock(&s->lock);
		uint64_t n = atomic_load_explicit(&s->entries, memory_order_relaxed);
		if (max_visit && max_visit < n)
			n = max_visit;
		fwd_entry_t *e = s->sweep ? s->sweep : s->hand;
		for (uint64_t k = 0; k < n && e; k++) {
			fwd_entry_t *next = e->clock_next;
			if (now_ms >= e->stale_until_ms) {
				entry_remove(s, e, &s->expired);
				dropped++;
				if (!s->hand)
					next = NULL;
			}
			e = next;
		}
		s->sweep = e;
		pthread_mutex_unlock(&s->lock);
	}
	return dropped;
}

static bool flush_match(const fwd_entry_t *e, const uint8_t *name, bool subtree)
{
	if (!name)
		return true;
	/* Stored names are lowercase and valid; dname_* compare case-insensitively. */
	return subtree ? dname_is_subdomain(entry_qname(e), name)
	               : dname_equal(entry_qname(e), name);
}

size_t fwd_cache_flush(fwd_cache_t *c, const uint8_t *name, bool subtree)
{
	size_t dropped = 0;
	for (unsigned i = 0; i < FWD_SHARDS; i++) {
		fwd_shard_t *s = &c->shards[i];
		pthread_mutex_lock(&s->lock);
		uint64_t n = atomic_load_explicit(&s->entries, memory_order_relaxed);
		fwd_entry_t *e = s->hand;
		/* The ring shrinks under us: visit exactly the n entries it held. */
		for (uint64_t k = 0; k < n && e; k++) {
			fwd_entry_t *next = e->clock_next;
			if (flush_match(e, name, subtree)) {
				entry_remove(s, e, NULL);
				dropped++;
				if (!s->hand)
					next = NULL;
			}
			e = next;
		}
		pthread_mutex_unlock(&s->lock);
	}
	return dropped;
}

void fwd_cache_stats(const fwd_cache_t *c, fwd_cache_stats_t *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < FWD_SHARDS; i++) {
		const fwd_shard_t *s = &c->shards[i];
		out->inserts += atomic_load_explicit(&s->inserts, memory_order_relaxed);
		out->replaced += atomic_load_explicit(&s->replaced, memory_order_relaxed);
		out->refused += atomic_load_explicit(&s->refused, memory_order_relaxed);
		out->evictions += atomic_load_explicit(&s->evictions, memory_order_relaxed);
		out->expired += atomic_load_explicit(&s->expired, memory_order_relaxed);
		out->entries += atomic_load_explicit(&s->entries, memory_order_relaxed);
		out->bytes += atomic_load_explicit(&s->bytes, memory_order_relaxed);
	}
	out->bytes += c->table_bytes;
	out->max_bytes = c->opts.max_bytes;
}
