/* Unit tests of src/fwd/cache: templates, TTLs, negative caching, stale, prefetch, eviction. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "base/err.h"
#include "dns/dname.h"
#include "dns/msg.h"
#include "dns/pkt.h"
#include "dns/wire.h"
#include "fwd/cache.h"
#include "unit.h"

#define T0 1000000u /* the fake clock's start, ms */

typedef struct {
	uint8_t wire[512];
	size_t len;
	dns_query_t q;
} query_t;

enum { Q_EDNS = 1, Q_DO = 2, Q_CD = 4, Q_NORD = 8, Q_AD = 16 };

/* A client query for @p name (case kept) as it would arrive, parsed. */
static void make_query(query_t *out, const char *name, uint16_t qtype, unsigned fl, uint16_t id)
{
	uint8_t *p = out->wire;
	memset(p, 0, 12);
	wire_write_u16(p, id);
	uint16_t flags = (fl & Q_NORD) ? 0 : DNS_FLAG_RD;
	flags |= (fl & Q_CD) ? DNS_FLAG_CD : 0;
	flags |= (fl & Q_AD) ? DNS_FLAG_AD : 0;
	wire_write_u16(p + 2, flags);
	wire_write_u16(p + 4, 1);
	int n = dname_from_str(name, p + 12);
	size_t len = 12 + (size_t)n;
	wire_write_u16(p + len, qtype);
	wire_write_u16(p + len + 2, DNS_CLASS_IN);
	len += 4;
	if (fl & (Q_EDNS | Q_DO)) {
		wire_write_u16(p + 10, 1);
		p[len] = 0;
		wire_write_u16(p + len + 1, DNS_TYPE_OPT);
		wire_write_u16(p + len + 3, 4096);
		wire_write_u32(p + len + 5, (fl & Q_DO) ? DNS_EDNS_DO : 0);
		wire_write_u16(p + len + 9, 0);
		len += 11;
	}
	out->len = len;
	dns_query_status_t st = dns_query_parse(out->wire, len, &out->q);
	if (st != DNS_QUERY_OK)
		printf("bad test query %s\n", name);
}

typedef struct {
	enum dns_section sec;
	const char *owner; /* NULL: the question name */
	uint16_t type;
	uint32_t ttl;
	const char *data; /* A: dotted quad; CNAME: name; SOA: "minimum" as number; TXT: text */
} rr_t;

/* An upstream reply to @p q built with the response builder (so names are compressed). */
static size_t make_reply(const dns_query_t *q, uint8_t rcode, uint16_t set_flags, const rr_t *rrs,
                         size_t n, bool opt, uint8_t *buf, size_t cap)
{
	dns_msg_t msg;
	dns_msg_init(&msg, buf, cap);
	dns_msg_begin(&msg, q, rcode);
	dns_msg_set_flags(&msg, DNS_FLAG_RA | set_flags, 0);
	if (opt)
		dns_msg_reserve(&msg, DNS_OPT_RR_LEN);
	for (size_t i = 0; i < n; i++) {
		uint8_t owner[DNS_DNAME_MAXLEN], rdata[600];
		uint16_t rdlen = 0;
		if (!rrs[i].owner)
			memcpy(owner, q->qname, q->qname_len);
		else if (dname_from_str(rrs[i].owner, owner) < 0)
			printf("bad owner %s\n", rrs[i].owner);
		switch (rrs[i].type) {
		case DNS_TYPE_A: {
			unsigned a, b, c, d;
			sscanf(rrs[i].data, "%u.%u.%u.%u", &a, &b, &c, &d);
			rdata[0] = (uint8_t)a, rdata[1] = (uint8_t)b, rdata[2] = (uint8_t)c;
			rdata[3] = (uint8_t)d;
			rdlen = 4;
			break;
		}
		case DNS_TYPE_CNAME:
			rdlen = (uint16_t)dname_from_str(rrs[i].data, rdata);
			break;
		case DNS_TYPE_SOA: {
			int l = dname_from_str("ns.example.test", rdata);
			l += dname_from_str("host.example.test", rdata + l);
			for (int k = 0; k < 4; k++)
				wire_write_u32(rdata + l + 4 * k, 1000u + (unsigned)k);
			wire_write_u32(rdata + l + 16, (uint32_t)strtoul(rrs[i].data, NULL, 10));
			rdlen = (uint16_t)(l + 20);
			break;
		}
		default:
			rdlen = (uint16_t)strlen(rrs[i].data);
			memcpy(rdata, rrs[i].data, rdlen);
		}
		if (dns_msg_put_rr(&msg, rrs[i].sec, owner, rrs[i].type, DNS_CLASS_IN, rrs[i].ttl,
		                   rdata, rdlen) != 0)
			printf("test reply too big\n");
	}
	if (opt)
		dns_msg_put_opt(&msg, 1232, 0, false, NULL, 0);
	return dns_msg_finish(&msg);
}

static fwd_cache_t *new_cache(void (*tweak)(fwd_cache_opts_t *))
{
	fwd_cache_opts_t o;
	fwd_cache_opts_default(&o);
	o.max_bytes = 4u * 1024 * 1024;
	if (tweak)
		tweak(&o);
	fwd_cache_t *c = NULL;
	int ret = fwd_cache_new(&o, &c);
	if (ret)
		printf("fwd_cache_new: %d\n", ret);
	return c;
}

/* Walk a response: the TTL of its first answer record and the counts. */
typedef struct {
	uint16_t id, flags, qd, an, ns, ar;
	uint32_t ttl[64];
	uint16_t type[64];
	unsigned nrr;
	bool has_opt, opt_do;
	uint16_t opt_payload;
	bool ok;
} resp_t;

static resp_t parse_resp(const uint8_t *p, size_t len)
{
	resp_t r;
	memset(&r, 0, sizeof(r));
	if (len < 12)
		return r;
	r.id = wire_read_u16(p);
	r.flags = wire_read_u16(p + 2);
	r.qd = wire_read_u16(p + 4);
	r.an = wire_read_u16(p + 6);
	r.ns = wire_read_u16(p + 8);
	r.ar = wire_read_u16(p + 10);
	size_t pos = 12;
	uint8_t name[DNS_DNAME_MAXLEN];
	if (r.qd) {
		if (dname_unpack(p, len, &pos, name) < 0)
			return r;
		pos += 4;
	}
	unsigned total = (unsigned)r.an + r.ns + r.ar;
	for (unsigned i = 0; i < total; i++) {
		if (dname_unpack(p, len, &pos, name) < 0 || pos + 10 > len)
			return r;
		uint16_t type = wire_read_u16(p + pos);
		uint32_t ttl = wire_read_u32(p + pos + 4);
		uint16_t rdlen = wire_read_u16(p + pos + 8);
		if (type == DNS_TYPE_OPT) {
			r.has_opt = true;
			r.opt_payload = wire_read_u16(p + pos + 2);
			r.opt_do = (ttl & DNS_EDNS_DO) != 0;
		} else if (r.nrr < 64) {
			r.type[r.nrr] = type;
			r.ttl[r.nrr++] = ttl;
		}
		pos += 10 + rdlen;
	}
	r.ok = pos == len;
	return r;
}

static const rr_t rr_a300[] = {{DNS_SEC_ANSWER, NULL, DNS_TYPE_A, 300, "192.0.2.1"}};

static void test_hit_countdown_and_patches(void)
{
	fwd_cache_t *c = new_cache(NULL);
	query_t up, cl;
	make_query(&up, "www.example.test", DNS_TYPE_A, Q_EDNS, 0x1111);
	uint8_t reply[4096], resp[4096];
	size_t rlen = make_reply(&up.q, DNS_RCODE_NOERROR, DNS_FLAG_AA, rr_a300, 1, true, reply,
	                         sizeof(reply));
	size_t n = 0;
	fwd_cache_counters_t ctr;
	memset(&ctr, 0, sizeof(ctr));
	CHECK(fwd_cache_answer(c, &up.q, T0, false, 1232, resp, sizeof(resp), &n, &ctr) ==
	              FWD_CACHE_MISS &&
	          n == 0,
	      "empty cache misses");
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == 0, "store A");

	static const struct {
		const char *name;
		unsigned fl;
		uint64_t at_ms;
		uint32_t ttl;
	} rows[] = {
	    {"www.example.test", Q_EDNS, 0, 300},
	    {"www.example.test", Q_EDNS, 999, 300},
	    {"WwW.ExAmple.TEST", Q_EDNS, 10500, 290},
	    {"WWW.EXAMPLE.TEST", Q_EDNS | Q_NORD, 299999, 1},
	    {"www.example.test", Q_EDNS | Q_CD, 100000, 200},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		make_query(&cl, rows[i].name, DNS_TYPE_A, rows[i].fl, (uint16_t)(0x4000 + i));
		fwd_cache_result_t res = fwd_cache_answer(c, &cl.q, T0 + rows[i].at_ms, false, 1232,
		                                          resp, sizeof(resp), &n, &ctr);
		if (rows[i].fl & Q_CD) {
			CHECK(res == FWD_CACHE_MISS, "CD is part of the key (row %zu)", i);
			continue;
		}
		/* Row 3 is the third hit, in the last 10 %: popular, so prefetch is wanted. */
		CHECK(res == (i == 3 ? FWD_CACHE_HIT_PREFETCH : FWD_CACHE_HIT), "row %zu: hit (%d)",
		      i, res);
		resp_t r = parse_resp(resp, n);
		CHECK(r.ok && r.an == 1 && r.nrr == 1, "row %zu: one answer", i);
		CHECK(r.ttl[0] == rows[i].ttl, "row %zu: ttl %u want %u", i, r.ttl[0], rows[i].ttl);
		CHECK(r.id == 0x4000 + i, "row %zu: id patched", i);
		CHECK((r.flags & DNS_FLAG_QR) && (r.flags & DNS_FLAG_RA) &&
		          !(r.flags & DNS_FLAG_AA),
		      "row %zu: QR RA set, AA cleared (%04x)", i, r.flags);
		CHECK(!!(r.flags & DNS_FLAG_RD) == !(rows[i].fl & Q_NORD), "row %zu: RD copied", i);
		CHECK(memcmp(resp + 12, cl.q.question, cl.q.question_len) == 0,
		      "row %zu: question as the client wrote it", i);
		CHECK(r.has_opt && r.opt_payload == 1232 && !r.opt_do, "row %zu: our OPT", i);
	}
	resp_t r;
	make_query(&cl, "www.example.test", DNS_TYPE_A, Q_EDNS, 6);
	CHECK(fwd_cache_answer(c, &cl.q, T0 - 5, false, 1232, resp, sizeof(resp), &n, &ctr) ==
	          FWD_CACHE_HIT,
	      "a reader clock behind the writer's hits");
	r = parse_resp(resp, n);
	CHECK(r.ok && r.ttl[0] == 300, "and sees the full TTL (%u)", r.ttl[0]);
	make_query(&cl, "www.example.test", DNS_TYPE_A, 0, 7);
	CHECK(fwd_cache_answer(c, &cl.q, T0 + 1000, false, 512, resp, sizeof(resp), &n, &ctr) ==
	          FWD_CACHE_HIT,
	      "client without EDNS hits");
	r = parse_resp(resp, n);
	CHECK(r.ok && !r.has_opt && r.ar == 0, "no OPT for a client without EDNS");
	make_query(&cl, "www.example.test", DNS_TYPE_A, Q_DO, 8);
	CHECK(fwd_cache_answer(c, &cl.q, T0 + 1000, false, 1232, resp, sizeof(resp), &n, &ctr) ==
	          FWD_CACHE_MISS,
	      "DO is part of the key");
	make_query(&cl, "www.example.test", DNS_TYPE_AAAA, Q_EDNS, 9);
	CHECK(fwd_cache_answer(c, &cl.q, T0 + 1000, false, 1232, resp, sizeof(resp), &n, &ctr) ==
	          FWD_CACHE_MISS,
	      "qtype is part of the key");
	CHECK(atomic_load(&ctr.hits) == 6 && atomic_load(&ctr.misses) == 4, "counters %lu %lu",
	      (unsigned long)atomic_load(&ctr.hits), (unsigned long)atomic_load(&ctr.misses));
	fwd_cache_free(c);
}

static void test_do_and_ad(void)
{
	fwd_cache_t *c = new_cache(NULL);
	query_t up, cl;
	uint8_t reply[4096], resp[4096];
	size_t n;
	make_query(&up, "sec.example.test", DNS_TYPE_A, Q_DO, 1);
	size_t rlen = make_reply(&up.q, DNS_RCODE_NOERROR, DNS_FLAG_AD, rr_a300, 1, true, reply,
	                         sizeof(reply));
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == 0, "store DO=1");
	make_query(&cl, "sec.example.test", DNS_TYPE_A, Q_DO, 2);
	CHECK(fwd_cache_answer(c, &cl.q, T0, false, 1232, resp, sizeof(resp), &n, NULL) ==
	          FWD_CACHE_HIT,
	      "DO hit");
	resp_t r = parse_resp(resp, n);
	CHECK(r.has_opt && r.opt_do && (r.flags & DNS_FLAG_AD), "DO echoed, AD kept");

	make_query(&up, "sec.example.test", DNS_TYPE_A, Q_EDNS, 1);
	rlen = make_reply(&up.q, DNS_RCODE_NOERROR, DNS_FLAG_AD, rr_a300, 1, false, reply,
	                  sizeof(reply));
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == 0, "store DO=0");
	make_query(&cl, "sec.example.test", DNS_TYPE_A, Q_EDNS, 3);
	fwd_cache_answer(c, &cl.q, T0, false, 1232, resp, sizeof(resp), &n, NULL);
	r = parse_resp(resp, n);
	CHECK(r.ok && !(r.flags & DNS_FLAG_AD), "AD cleared for a client without DO or AD");
	make_query(&cl, "sec.example.test", DNS_TYPE_A, Q_EDNS | Q_AD, 4);
	fwd_cache_answer(c, &cl.q, T0, false, 1232, resp, sizeof(resp), &n, NULL);
	r = parse_resp(resp, n);
	CHECK(r.ok && (r.flags & DNS_FLAG_AD), "AD kept for a client that set AD");
	fwd_cache_free(c);
}

static void clamp_60_1000(fwd_cache_opts_t *o)
{
	o->min_ttl = 60;
	o->max_ttl = 1000;
}

static void test_ttl_rules(void)
{
	static const struct {
		const char *what;
		uint8_t rcode;
		rr_t rrs[4];
		size_t n;
		int ret;
		uint32_t ttl; /* first record's TTL served at T0 */
		unsigned last_rr;
	} rows[] = {
	    {"min-ttl raises",
	     0,
	     {{DNS_SEC_ANSWER, NULL, DNS_TYPE_A, 10, "192.0.2.1"}},
	     1,
	     0,
	     60,
	     0},
	    {"max-ttl caps",
	     0,
	     {{DNS_SEC_ANSWER, NULL, DNS_TYPE_A, 86400, "192.0.2.1"}},
	     1,
	     0,
	     1000,
	     0},
	    {"top bit TTL is 0, raised",
	     0,
	     {{DNS_SEC_ANSWER, NULL, DNS_TYPE_A, 0x80000000u, "192.0.2.1"}},
	     1,
	     0,
	     60,
	     0},
	    {"NXDOMAIN: SOA MINIMUM below TTL",
	     DNS_RCODE_NXDOMAIN,
	     {{DNS_SEC_AUTHORITY, "example.test", DNS_TYPE_SOA, 700, "300"}},
	     1,
	     0,
	     300,
	     0},
	    {"NXDOMAIN: SOA TTL below MINIMUM",
	     DNS_RCODE_NXDOMAIN,
	     {{DNS_SEC_AUTHORITY, "example.test", DNS_TYPE_SOA, 200, "900"}},
	     1,
	     0,
	     200,
	     0},
	    {"NXDOMAIN without SOA", DNS_RCODE_NXDOMAIN, {{0}}, 0, STEER_EACCES, 0, 0},
	    {"NODATA: capped by max-ttl",
	     0,
	     {{DNS_SEC_AUTHORITY, "example.test", DNS_TYPE_SOA, 86400, "86400"}},
	     1,
	     0,
	     1000,
	     0},
	    {"NODATA behind a CNAME",
	     0,
	     {{DNS_SEC_ANSWER, NULL, DNS_TYPE_CNAME, 500, "other.example.test"},
	      {DNS_SEC_AUTHORITY, "example.test", DNS_TYPE_SOA, 400, "100"}},
	     2,
	     0,
	     100,
	     1},
	    {"CNAME only, no SOA",
	     0,
	     {{DNS_SEC_ANSWER, NULL, DNS_TYPE_CNAME, 500, "other.example.test"}},
	     1,
	     STEER_EACCES,
	     0,
	     0},
	    {"CNAME then A: shortest TTL",
	     0,
	     {{DNS_SEC_ANSWER, NULL, DNS_TYPE_CNAME, 500, "other.example.test"},
	      {DNS_SEC_ANSWER, "other.example.test", DNS_TYPE_A, 120, "192.0.2.9"}},
	     2,
	     0,
	     120,
	     1},
	    {"SERVFAIL", DNS_RCODE_SERVFAIL, {{0}}, 0, STEER_EACCES, 0, 0},
	    {"REFUSED", DNS_RCODE_REFUSED, {{0}}, 0, STEER_EACCES, 0, 0},
	    {"FORMERR", DNS_RCODE_FORMERR, {{0}}, 0, STEER_EACCES, 0, 0},
	    {"NOTIMP", DNS_RCODE_NOTIMP, {{0}}, 0, STEER_EACCES, 0, 0},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		fwd_cache_t *c = new_cache(clamp_60_1000);
		query_t up;
		make_query(&up, "q.example.test", DNS_TYPE_A, Q_EDNS, 1);
		uint8_t reply[4096], resp[4096];
		size_t rlen = make_reply(&up.q, rows[i].rcode, 0, rows[i].rrs, rows[i].n, true,
		                         reply, sizeof(reply));
		int ret = fwd_cache_store(c, &up.q, reply, rlen, T0);
		CHECK(ret == rows[i].ret, "%s: store %d want %d", rows[i].what, ret, rows[i].ret);
		size_t n;
		fwd_cache_result_t res =
		    fwd_cache_answer(c, &up.q, T0, false, 1232, resp, sizeof(resp), &n, NULL);
		CHECK((res == FWD_CACHE_HIT) == (rows[i].ret == 0), "%s: hit %d", rows[i].what,
		      res);
		if (res == FWD_CACHE_HIT) {
			resp_t r = parse_resp(resp, n);
			CHECK(r.ok && (r.flags & DNS_RCODE_MASK) == rows[i].rcode, "%s: rcode",
			      rows[i].what);
			CHECK(r.nrr > rows[i].last_rr && r.ttl[rows[i].last_rr] == rows[i].ttl,
			      "%s: ttl %u want %u", rows[i].what, r.ttl[rows[i].last_rr],
			      rows[i].ttl);
		}
		fwd_cache_free(c);
	}

	/* RFC 2308 cap: 3600 s by default, whatever the SOA says. */
	fwd_cache_t *c = new_cache(NULL);
	query_t up;
	make_query(&up, "nx.example.test", DNS_TYPE_A, 0, 1);
	uint8_t reply[4096], resp[4096];
	rr_t soa = {DNS_SEC_AUTHORITY, "example.test", DNS_TYPE_SOA, 86400, "86400"};
	size_t rlen =
	    make_reply(&up.q, DNS_RCODE_NXDOMAIN, 0, &soa, 1, false, reply, sizeof(reply));
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == 0, "store NXDOMAIN");
	size_t n;
	fwd_cache_answer(c, &up.q, T0, false, 512, resp, sizeof(resp), &n, NULL);
	resp_t r = parse_resp(resp, n);
	CHECK(r.ok && r.ns == 1 && r.ttl[0] == 3600, "negative TTL capped at 3600 (%u)", r.ttl[0]);
	CHECK(fwd_cache_answer(c, &up.q, T0 + 3600 * 1000, false, 512, resp, sizeof(resp), &n,
	                       NULL) == FWD_CACHE_STALE_AVAILABLE,
	      "negative entry expires after 3600 s");
	fwd_cache_free(c);
}

static void test_refused_replies(void)
{
	fwd_cache_t *c = new_cache(NULL);
	query_t up, other;
	make_query(&up, "www.example.test", DNS_TYPE_A, 0, 1);
	uint8_t reply[4096];
	size_t rlen = make_reply(&up.q, 0, 0, rr_a300, 1, false, reply, sizeof(reply));

	uint8_t bad[4200];
	memcpy(bad, reply, rlen);
	wire_write_u16(bad + 2, (uint16_t)(wire_read_u16(bad + 2) | DNS_FLAG_TC));
	CHECK(fwd_cache_store(c, &up.q, bad, rlen, T0) == STEER_EACCES, "TC=1 not cached");
	memcpy(bad, reply, rlen);
	wire_write_u16(bad + 2, (uint16_t)(wire_read_u16(bad + 2) & ~DNS_FLAG_QR));
	CHECK(fwd_cache_store(c, &up.q, bad, rlen, T0) == STEER_EINVAL, "QR=0 refused");
	make_query(&other, "www.example.tesu", DNS_TYPE_A, 0, 1);
	CHECK(fwd_cache_store(c, &other.q, reply, rlen, T0) == STEER_EINVAL, "other name refused");
	make_query(&other, "www.example.test", DNS_TYPE_AAAA, 0, 1);
	CHECK(fwd_cache_store(c, &other.q, reply, rlen, T0) == STEER_EINVAL, "other type refused");
	make_query(&other, "WWW.example.test", DNS_TYPE_A, 0, 1);
	CHECK(fwd_cache_store(c, &other.q, reply, rlen, T0) == 0, "name compared without case");
	CHECK(fwd_cache_store(c, &up.q, reply, rlen - 1, T0) == STEER_EMALF, "truncated reply");
	memcpy(bad, reply, rlen);
	bad[rlen] = 0;
	CHECK(fwd_cache_store(c, &up.q, bad, rlen + 1, T0) == STEER_EMALF, "trailing byte");
	CHECK(fwd_cache_store(c, &up.q, reply, 11, T0) == STEER_EMALF, "short header");

	/* TTL 0 is a "do not cache" from the zone. */
	rr_t zero = {DNS_SEC_ANSWER, NULL, DNS_TYPE_A, 0, "192.0.2.1"};
	rlen = make_reply(&up.q, 0, 0, &zero, 1, false, reply, sizeof(reply));
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == STEER_EACCES, "TTL 0 not cached");

	/* CNAME chains: 16 is fine, 17 is not. */
	rr_t chain[17];
	char names[18][32];
	for (int i = 0; i < 17; i++) {
		snprintf(names[i + 1], sizeof(names[i + 1]), "c%d.example.test", i + 1);
		chain[i] =
		    (rr_t){DNS_SEC_ANSWER, i ? names[i] : NULL, DNS_TYPE_CNAME, 60, names[i + 1]};
	}
	rr_t with_a[17];
	memcpy(with_a, chain, sizeof(rr_t) * 16);
	with_a[16] = (rr_t){DNS_SEC_ANSWER, names[16], DNS_TYPE_A, 60, "192.0.2.3"};
	rlen = make_reply(&up.q, 0, 0, with_a, 17, false, reply, sizeof(reply));
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == 0, "16 CNAMEs cached");
	rlen = make_reply(&up.q, 0, 0, chain, 17, false, reply, sizeof(reply));
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == STEER_EACCES, "17 CNAMEs refused");

	/* A refused reply leaves the entry that is there. */
	rlen = make_reply(&up.q, 0, 0, rr_a300, 1, false, reply, sizeof(reply));
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == 0, "store");
	rlen = make_reply(&up.q, DNS_RCODE_SERVFAIL, 0, NULL, 0, false, reply, sizeof(reply));
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0 + 1) == STEER_EACCES, "SERVFAIL refused");
	uint8_t resp[4096];
	size_t n;
	CHECK(fwd_cache_answer(c, &up.q, T0 + 2, false, 512, resp, sizeof(resp), &n, NULL) ==
	          FWD_CACHE_HIT,
	      "SERVFAIL did not replace the entry");
	fwd_cache_stats_t st;
	fwd_cache_stats(c, &st);
	CHECK(st.entries == 1 && st.replaced == 2 && st.inserts == 3, "stats %lu %lu %lu",
	      (unsigned long)st.entries, (unsigned long)st.replaced, (unsigned long)st.inserts);
	fwd_cache_free(c);
}

static void no_stale(fwd_cache_opts_t *o)
{
	o->stale_answer_ttl = 0;
}

static void test_stale(void)
{
	fwd_cache_t *c = new_cache(NULL);
	query_t up;
	make_query(&up, "www.example.test", DNS_TYPE_A, 0, 1);
	uint8_t reply[4096], resp[4096];
	size_t rlen = make_reply(&up.q, 0, 0, rr_a300, 1, false, reply, sizeof(reply));
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == 0, "store");
	static const struct {
		uint64_t at_ms;
		bool want_stale;
		fwd_cache_result_t res;
		uint32_t ttl;
	} rows[] = {
	    {299999, false, FWD_CACHE_HIT, 1},
	    {300000, false, FWD_CACHE_STALE_AVAILABLE, 0},
	    {300000, true, FWD_CACHE_STALE, 30},
	    {86400000, true, FWD_CACHE_STALE, 30},
	    {86400000 + 300000 - 1, true, FWD_CACHE_STALE, 30},
	    {86400000 + 300000, true, FWD_CACHE_MISS, 0},
	};
	fwd_cache_counters_t ctr;
	memset(&ctr, 0, sizeof(ctr));
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		size_t n;
		fwd_cache_result_t res =
		    fwd_cache_answer(c, &up.q, T0 + rows[i].at_ms, rows[i].want_stale, 512, resp,
		                     sizeof(resp), &n, &ctr);
		CHECK(res == rows[i].res, "row %zu: %d want %d", i, res, rows[i].res);
		if (rows[i].ttl) {
			resp_t r = parse_resp(resp, n);
			CHECK(r.ok && r.ttl[0] == rows[i].ttl, "row %zu: ttl %u", i, r.ttl[0]);
		} else {
			CHECK(n == 0, "row %zu: nothing written", i);
		}
	}
	CHECK(atomic_load(&ctr.stale_answers) == 3 && atomic_load(&ctr.stale_available) == 1,
	      "stale counters");
	CHECK(fwd_cache_sweep(c, T0 + 86400000 + 299999, 0) == 0, "sweep keeps servable stale");
	CHECK(fwd_cache_sweep(c, T0 + 86400000 + 300000, 0) == 1, "sweep drops past stale-keep");
	fwd_cache_stats_t st;
	fwd_cache_stats(c, &st);
	CHECK(st.entries == 0 && st.expired == 1, "swept (%lu entries)", (unsigned long)st.entries);
	fwd_cache_free(c);

	c = new_cache(no_stale);
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == 0, "store");
	size_t n;
	CHECK(fwd_cache_answer(c, &up.q, T0 + 300000, true, 512, resp, sizeof(resp), &n, NULL) ==
	          FWD_CACHE_MISS,
	      "no stale when serve-stale is off");
	fwd_cache_free(c);
}

static void test_flush(void)
{
	static const char *const names[] = {"example.test",     "www.example.test",
	                                    "a.b.example.test", "xexample.test",
	                                    "other.test",       "WWW.example.test"};
	static const struct {
		const char *flush; /* NULL: everything */
		bool subtree;
		size_t dropped;
		bool left[6]; /* which of names[] still hit afterwards */
	} rows[] = {
	    {"WWW.EXAMPLE.TEST", false, 2, {1, 0, 1, 1, 1, 0}},
	    {"example.test", false, 1, {0, 1, 1, 1, 1, 1}},
	    {"example.test", true, 4, {0, 0, 0, 1, 1, 0}},
	    {"b.example.test", true, 1, {1, 1, 0, 1, 1, 1}},
	    {"nothing.test", true, 0, {1, 1, 1, 1, 1, 1}},
	    {NULL, false, 6, {0, 0, 0, 0, 0, 0}},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		fwd_cache_t *c = new_cache(NULL);
		query_t q[6];
		uint8_t reply[4096], resp[4096];
		for (size_t k = 0; k < 6; k++) {
			/* The last one is www.example.test again with DO: another key, same name.
			 */
			make_query(&q[k], names[k], DNS_TYPE_A, k == 5 ? Q_DO : 0, 1);
			size_t rlen =
			    make_reply(&q[k].q, 0, 0, rr_a300, 1, false, reply, sizeof(reply));
			CHECK(fwd_cache_store(c, &q[k].q, reply, rlen, T0) == 0,
			      "row %zu store %zu", i, k);
		}
		uint8_t name[DNS_DNAME_MAXLEN];
		const uint8_t *fname = NULL;
		if (rows[i].flush) {
			CHECK(dname_from_str(rows[i].flush, name) > 0, "name");
			fname = name;
		}
		size_t dropped = fwd_cache_flush(c, fname, rows[i].subtree);
		CHECK(dropped == rows[i].dropped, "row %zu: dropped %zu want %zu", i, dropped,
		      rows[i].dropped);
		for (size_t k = 0; k < 6; k++) {
			size_t n;
			fwd_cache_result_t res = fwd_cache_answer(c, &q[k].q, T0 + 1000, false, 512,
			                                          resp, sizeof(resp), &n, NULL);
			CHECK((res == FWD_CACHE_HIT) == rows[i].left[k], "row %zu: %s %s", i,
			      names[k], res == FWD_CACHE_HIT ? "still cached" : "dropped");
		}
		fwd_cache_stats_t st;
		fwd_cache_stats(c, &st);
		CHECK(st.entries == 6 - rows[i].dropped && st.evictions == 0 && st.expired == 0,
		      "row %zu: %lu entries", i, (unsigned long)st.entries);
		fwd_cache_free(c);
	}
}

static void no_prefetch(fwd_cache_opts_t *o)
{
	o->prefetch = false;
}

static void test_prefetch(void)
{
	static const struct {
		bool enabled;
		uint64_t at_ms[5];
		fwd_cache_result_t res[5];
	} rows[] = {
	    /* popular, then in the last 10 %: reported once */
	    {true,
	     {1000, 2000, 90000, 95000, 99000},
	     {FWD_CACHE_HIT, FWD_CACHE_HIT, FWD_CACHE_HIT_PREFETCH, FWD_CACHE_HIT, FWD_CACHE_HIT}},
	    /* first hit in the window is not popular yet; the second is */
	    {true,
	     {91000, 92000, 93000, 0, 0},
	     {FWD_CACHE_HIT, FWD_CACHE_HIT_PREFETCH, FWD_CACHE_HIT, 0, 0}},
	    {true, {89999, 89999, 0, 0, 0}, {FWD_CACHE_HIT, FWD_CACHE_HIT, 0, 0, 0}},
	    {false,
	     {1000, 95000, 96000, 0, 0},
	     {FWD_CACHE_HIT, FWD_CACHE_HIT, FWD_CACHE_HIT, 0, 0}},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		fwd_cache_t *c = new_cache(rows[i].enabled ? NULL : no_prefetch);
		query_t up;
		make_query(&up, "pop.example.test", DNS_TYPE_A, 0, 1);
		rr_t a = {DNS_SEC_ANSWER, NULL, DNS_TYPE_A, 100, "192.0.2.1"};
		uint8_t reply[4096], resp[4096];
		size_t rlen = make_reply(&up.q, 0, 0, &a, 1, false, reply, sizeof(reply));
		CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == 0, "store");
		for (size_t k = 0; k < 5 && rows[i].at_ms[k]; k++) {
			size_t n;
			fwd_cache_result_t res =
			    fwd_cache_answer(c, &up.q, T0 + rows[i].at_ms[k], false, 512, resp,
			                     sizeof(resp), &n, NULL);
			CHECK(res == rows[i].res[k], "row %zu hit %zu: %d want %d", i, k, res,
			      rows[i].res[k]);
		}
		/* A refreshed entry may be prefetched again. */
		if (i == 0) {
			CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0 + 99000) == 0, "refresh");
			size_t n;
			fwd_cache_answer(c, &up.q, T0 + 99000, false, 512, resp, sizeof(resp), &n,
			                 NULL);
			CHECK(fwd_cache_answer(c, &up.q, T0 + 99000 + 95000, false, 512, resp,
			                       sizeof(resp), &n, NULL) == FWD_CACHE_HIT_PREFETCH,
			      "refreshed entry prefetched again");
		}
		fwd_cache_free(c);
	}
}

static void test_truncation(void)
{
	fwd_cache_t *c = new_cache(NULL);
	query_t up, cl;
	make_query(&up, "big.example.test", DNS_TYPE_TXT, Q_EDNS, 1);
	rr_t txt[8];
	static const char blob[] =
	    "\xff"
	    "0123456789012345678901234567890123456789012345678901234567890123"
	    "0123456789012345678901234567890123456789012345678901234567890123"
	    "0123456789012345678901234567890123456789012345678901234567890123"
	    "012345678901234567890123456789012345678901234567890123456789012";
	for (int i = 0; i < 8; i++)
		txt[i] = (rr_t){DNS_SEC_ANSWER, NULL, DNS_TYPE_TXT, 300, blob};
	uint8_t reply[4096], resp[4096];
	size_t rlen = make_reply(&up.q, 0, 0, txt, 8, true, reply, sizeof(reply));
	CHECK(rlen > 2048, "big reply (%zu)", rlen);
	CHECK(fwd_cache_store(c, &up.q, reply, rlen, T0) == 0, "store big");
	fwd_cache_counters_t ctr;
	memset(&ctr, 0, sizeof(ctr));
	make_query(&cl, "BIG.example.test", DNS_TYPE_TXT, Q_EDNS, 2);
	size_t n;
	CHECK(fwd_cache_answer(c, &cl.q, T0, false, 1232, resp, sizeof(resp), &n, &ctr) ==
	          FWD_CACHE_HIT,
	      "hit");
	resp_t r = parse_resp(resp, n);
	CHECK(r.ok && (r.flags & DNS_FLAG_TC) && r.an == 0 && r.qd == 1 && r.has_opt,
	      "UDP: question and OPT, TC=1");
	CHECK(memcmp(resp + 12, cl.q.question, cl.q.question_len) == 0, "TC answer keeps case");
	CHECK(fwd_cache_answer(c, &cl.q, T0, false, 0, resp, sizeof(resp), &n, &ctr) ==
	          FWD_CACHE_HIT,
	      "hit over TCP");
	r = parse_resp(resp, n);
	CHECK(r.ok && !(r.flags & DNS_FLAG_TC) && r.an == 8 && r.has_opt, "TCP: everything");
	CHECK(atomic_load(&ctr.truncated) == 1, "truncated counted");
	fwd_cache_free(c);
}

static void small_cache(fwd_cache_opts_t *o)
{
	o->max_bytes = 512u * 1024;
}

static void flood_name(char *buf, size_t size, unsigned i)
{
	snprintf(buf, size, "r%08x-%u.flood.example.test", i * 2654435761u, i);
}

static void test_eviction(void)
{
	fwd_cache_t *c = new_cache(small_cache);
	query_t hot, q;
	make_query(&hot, "hot.example.test", DNS_TYPE_A, 0, 1);
	uint8_t reply[4096], resp[4096];
	size_t rlen = make_reply(&hot.q, 0, 0, rr_a300, 1, false, reply, sizeof(reply));
	CHECK(fwd_cache_store(c, &hot.q, reply, rlen, T0) == 0, "store hot");
	bool over = false, hot_lost = false;
	for (unsigned i = 0; i < 50000; i++) {
		char name[64];
		flood_name(name, sizeof(name), i);
		make_query(&q, name, DNS_TYPE_A, 0, 1);
		rlen = make_reply(&q.q, 0, 0, rr_a300, 1, false, reply, sizeof(reply));
		if (fwd_cache_store(c, &q.q, reply, rlen, T0 + i) != 0)
			over = true;
		fwd_cache_stats_t st;
		fwd_cache_stats(c, &st);
		if (st.bytes > st.max_bytes)
			over = true;
		size_t n;
		if (i % 16 == 0 && fwd_cache_answer(c, &hot.q, T0 + i, false, 512, resp,
		                                    sizeof(resp), &n, NULL) != FWD_CACHE_HIT)
			hot_lost = true;
	}
	fwd_cache_stats_t st;
	fwd_cache_stats(c, &st);
	CHECK(!over, "bytes stayed within the cap");
	CHECK(!hot_lost, "a name hit between flood inserts survives (second chance)");
	CHECK(st.evictions > 40000 && st.entries > 1000, "evicted %lu, %lu entries, %lu bytes",
	      (unsigned long)st.evictions, (unsigned long)st.entries, (unsigned long)st.bytes);
	CHECK(st.bytes > st.max_bytes * 8 / 10, "the cap is used (%lu of %lu)",
	      (unsigned long)st.bytes, (unsigned long)st.max_bytes);
	fwd_cache_free(c);
}

/* Several readers answer under RCU while one writer floods, replaces and sweeps. */
typedef struct {
	fwd_cache_t *c;
	atomic_bool stop;
	atomic_ulong answers, bad;
} race_t;

static void *reader(void *arg)
{
	race_t *rc = arg;
	rcu_register_thread();
	query_t q;
	uint8_t resp[4096];
	unsigned i = 0;
	while (!atomic_load(&rc->stop)) {
		char name[64];
		flood_name(name, sizeof(name), i++ % 4096);
		make_query(&q, name, DNS_TYPE_A, Q_EDNS, (uint16_t)i);
		size_t n;
		rcu_read_lock();
		fwd_cache_result_t res =
		    fwd_cache_answer(rc->c, &q.q, T0 + i, true, 1232, resp, sizeof(resp), &n, NULL);
		rcu_read_unlock();
		if (res == FWD_CACHE_HIT || res == FWD_CACHE_HIT_PREFETCH ||
		    res == FWD_CACHE_STALE) {
			resp_t r = parse_resp(resp, n);
			if (!r.ok || r.id != (uint16_t)i || r.an != 1 || !r.has_opt ||
			    memcmp(resp + 12, q.q.question, q.q.question_len) != 0)
				atomic_fetch_add(&rc->bad, 1);
			atomic_fetch_add(&rc->answers, 1);
		}
	}
	rcu_unregister_thread();
	return NULL;
}

static void test_concurrent(void)
{
	race_t rc = {.c = new_cache(small_cache)};
	pthread_t th[3];
	for (int i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, reader, &rc);
	rcu_register_thread();
	query_t q;
	uint8_t reply[4096];
	for (unsigned i = 0; i < 60000; i++) {
		char name[64];
		flood_name(name, sizeof(name), i % 8192);
		make_query(&q, name, DNS_TYPE_A, Q_EDNS, 1);
		rr_t a = {DNS_SEC_ANSWER, NULL, DNS_TYPE_A, 1 + i % 50, "192.0.2.7"};
		size_t rlen = make_reply(&q.q, 0, 0, &a, 1, true, reply, sizeof(reply));
		(void)fwd_cache_store(rc.c, &q.q, reply, rlen, T0 + i);
		if (i % 1000 == 0)
			fwd_cache_sweep(rc.c, T0 + i, 64);
	}
	atomic_store(&rc.stop, true);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	CHECK(atomic_load(&rc.answers) > 0, "readers got answers");
	CHECK(atomic_load(&rc.bad) == 0, "%lu bad answers of %lu", atomic_load(&rc.bad),
	      atomic_load(&rc.answers));
	fwd_cache_stats_t st;
	fwd_cache_stats(rc.c, &st);
	CHECK(st.bytes <= st.max_bytes, "within the cap under concurrency");
	fwd_cache_free(rc.c);
	rcu_barrier();
	rcu_unregister_thread();
}

static void test_opts(void)
{
	fwd_cache_opts_t o;
	fwd_cache_t *c;
	fwd_cache_opts_default(&o);
	o.max_bytes = 1000;
	CHECK(fwd_cache_new(&o, &c) == STEER_EINVAL && !c, "tiny cap refused");
	fwd_cache_opts_default(&o);
	o.min_ttl = 10;
	o.max_ttl = 5;
	CHECK(fwd_cache_new(&o, &c) == STEER_EINVAL, "min above max refused");
	fwd_cache_opts_default(&o);
	CHECK(fwd_cache_new(&o, &c) == 0, "defaults (256 MiB)");
	fwd_cache_stats_t st;
	fwd_cache_stats(c, &st);
	CHECK(st.bytes < st.max_bytes / 8 && st.entries == 0, "empty: the table only (%lu)",
	      (unsigned long)st.bytes);
	fwd_cache_free(c);
}

int main(void)
{
	rcu_register_thread();
	test_opts();
	test_hit_countdown_and_patches();
	test_do_and_ad();
	test_ttl_rules();
	test_refused_replies();
	test_stale();
	test_prefetch();
	test_flush();
	test_truncation();
	test_eviction();
	rcu_unregister_thread();
	test_concurrent();
	return unit_finish("test_fwd_cache");
}
