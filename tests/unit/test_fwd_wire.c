/* Unit tests of src/fwd/wire.c and src/fwd/rng.c: upstream queries, reply checks, client
 * replies, probes, and the randomness of IDs and ports. */
#include <string.h>

#include "base/err.h"
#include "dns/dname.h"
#include "dns/pkt.h"
#include "dns/wire.h"
#include "fwd/rng.h"
#include "fwd/wire.h"
#include "unit.h"

static fwd_rng_t rng;

static void rng_reset(uint8_t fill)
{
	uint8_t seed[FWD_RNG_SEED_LEN];
	memset(seed, fill, sizeof(seed));
	fwd_rng_init(&rng, seed);
}

/* A small message writer for the test replies. */
typedef struct {
	uint8_t b[2048];
	size_t n;
} msg_t;

static void put16(msg_t *m, uint16_t v)
{
	wire_write_u16(m->b + m->n, v);
	m->n += 2;
}

static void put32(msg_t *m, uint32_t v)
{
	wire_write_u32(m->b + m->n, v);
	m->n += 4;
}

static void putname(msg_t *m, const char *text)
{
	uint8_t w[DNS_DNAME_MAXLEN];
	int len = dname_from_str(text, w);
	memcpy(m->b + m->n, w, (size_t)len);
	m->n += (size_t)len;
}

static void putraw(msg_t *m, const void *p, size_t n)
{
	if (n)
		memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void header(msg_t *m, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns,
                   uint16_t ar)
{
	m->n = 0;
	put16(m, id);
	put16(m, flags);
	put16(m, qd);
	put16(m, an);
	put16(m, ns);
	put16(m, ar);
}

/* A record with an uncompressed owner; rdata raw. */
static void rr(msg_t *m, const char *owner, uint16_t type, const void *rdata, uint16_t rdlen)
{
	putname(m, owner);
	put16(m, type);
	put16(m, DNS_CLASS_IN);
	put32(m, 300);
	put16(m, rdlen);
	putraw(m, rdata, rdlen);
}

static void rr_name(msg_t *m, const char *owner, uint16_t type, const char *target)
{
	uint8_t w[DNS_DNAME_MAXLEN];
	int len = dname_from_str(target, w);
	rr(m, owner, type, w, (uint16_t)len);
}

static void opt(msg_t *m, uint8_t ext_rcode, bool do_bit, const void *opts, uint16_t len)
{
	m->b[m->n++] = 0;
	put16(m, DNS_TYPE_OPT);
	put16(m, 4096);
	put32(m, (uint32_t)ext_rcode << 24 | (do_bit ? DNS_EDNS_DO : 0));
	put16(m, len);
	putraw(m, opts, len);
}

/* A client query, parsed. */
static uint8_t client_pkt[512];

static void client_query(dns_query_t *q, const char *name, uint16_t qtype, uint16_t flags,
                         int edns /* -1 none, else payload */, bool do_bit)
{
	msg_t m;
	header(&m, 0xc1c1, flags, 1, 0, 0, edns >= 0 ? 1 : 0);
	putname(&m, name);
	put16(&m, qtype);
	put16(&m, DNS_CLASS_IN);
	if (edns >= 0) {
		/* A client cookie, which must not reach the upstream. */
		static const uint8_t cookie[] = {0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8};
		m.b[m.n++] = 0;
		put16(&m, DNS_TYPE_OPT);
		put16(&m, (uint16_t)edns);
		put32(&m, do_bit ? DNS_EDNS_DO : 0);
		put16(&m, sizeof(cookie));
		putraw(&m, cookie, sizeof(cookie));
	}
	memcpy(client_pkt, m.b, m.n);
	dns_query_status_t st = dns_query_parse(client_pkt, m.n, q);
	CHECK(st == DNS_QUERY_OK, "client query %s parses (%d)", name, st);
}

static void test_rng(void)
{
	/* RFC 8439 A.1 test vector 1: all-zero key, nonce and counter. */
	rng_reset(0);
	static const uint32_t want[4] = {0xade0b876, 0x903df1a0, 0xe56a5d40, 0x28bd8653};
	for (int i = 0; i < 4; i++) {
		uint32_t got = fwd_rng_u32(&rng);
		CHECK(got == want[i], "chacha20 word %d: %08x, want %08x", i, got, want[i]);
	}
	rng_reset(7);
	unsigned hist[6] = {0};
	for (int i = 0; i < 6000; i++)
		hist[fwd_rng_below(&rng, 6)]++;
	for (int i = 0; i < 6; i++)
		CHECK(hist[i] > 850 && hist[i] < 1150, "below(6) bucket %d: %u of 6000", i,
		      hist[i]);
	CHECK(fwd_rng_below(&rng, 0) == 0, "below(0)");
	CHECK(fwd_rng_below(&rng, 1) == 0, "below(1)");
}

static unsigned distinct16(const uint16_t *v, size_t n)
{
	static uint8_t seen[65536];
	memset(seen, 0, sizeof(seen));
	unsigned d = 0;
	for (size_t i = 0; i < n; i++)
		if (!seen[v[i]]++)
			d++;
	return d;
}

static void test_spread(void)
{
	rng_reset(1);
	dns_query_t q;
	client_query(&q, "www.example.test", DNS_TYPE_A, DNS_FLAG_RD, 1232, false);
	uint16_t ids[500], ports[500];
	for (int i = 0; i < 500; i++) {
		uint8_t buf[FWD_WIRE_QUERY_MAXLEN];
		fwd_wire_pending_t p;
		int len = fwd_wire_query_build(&q, NULL, &rng, buf, sizeof(buf), &p);
		CHECK(len > 0 && wire_read_u16(buf) == p.id, "query %d built", i);
		ids[i] = p.id;
	}
	unsigned d = distinct16(ids, 500);
	CHECK(d >= 495, "500 queries have %u distinct IDs, want >= 495", d);

	static const uint16_t excl[][2] = {{5300, 5399}, {8053, 8053}, {40000, 49999}};
	bool bad = false;
	for (int i = 0; i < 500; i++) {
		int port = fwd_wire_port_pick(&rng, FWD_WIRE_PORT_MIN, FWD_WIRE_PORT_MAX, excl,
		                              STEER_ARRAY_LEN(excl));
		bad |= port < FWD_WIRE_PORT_MIN || (port >= 5300 && port <= 5399) || port == 8053 ||
		       (port >= 40000 && port <= 49999);
		ports[i] = (uint16_t)port;
	}
	CHECK(!bad, "every port in range and outside the exclusions");
	d = distinct16(ports, 500);
	CHECK(d >= 495, "500 ports have %u distinct values, want >= 495", d);
	static const uint16_t all[][2] = {{1024, 2047}};
	CHECK(fwd_wire_port_pick(&rng, 1024, 2047, all, 1) == STEER_ENOENT, "all excluded");
	CHECK(fwd_wire_port_pick(&rng, 2000, 2000, NULL, 0) == 2000, "one-port range");
	CHECK(fwd_wire_port_pick(&rng, 2001, 2000, NULL, 0) == STEER_ENOENT, "empty range");
}

static void test_query_build(void)
{
	static const struct {
		const char *what;
		const char *name;
		uint16_t flags; /* client header flags */
		int edns;
		bool do_bit;
		bool use_0x20;
		bool ecs;
		uint16_t want_flags;
		uint16_t want_rdlen;
	} rows[] = {
	    {"plain", "www.Example.test", DNS_FLAG_RD, 1232, false, false, false, DNS_FLAG_RD, 0},
	    {"RD=0 client still RD=1 up", "a.test", 0, 4096, false, false, false, DNS_FLAG_RD, 0},
	    {"CD copied", "a.test", DNS_FLAG_RD | DNS_FLAG_CD, 512, true, false, false,
	     DNS_FLAG_RD | DNS_FLAG_CD, 0},
	    {"AD and others not copied", "a.test", DNS_FLAG_RD | DNS_FLAG_AD | DNS_FLAG_AA, -1,
	     false, false, false, DNS_FLAG_RD, 0},
	    {"0x20", "abcdefghijklmnopqrstuvwxyz.abcdefghijklmnop.test", DNS_FLAG_RD, 1232, true,
	     true, false, DNS_FLAG_RD, 0},
	    {"ECS", "a.test", DNS_FLAG_RD, 1232, false, false, true, DNS_FLAG_RD, 11},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		rng_reset((uint8_t)(i + 2));
		dns_query_t q;
		client_query(&q, rows[i].name, DNS_TYPE_AAAA, rows[i].flags, rows[i].edns,
		             rows[i].do_bit);
		dns_ecs_t ecs;
		static const uint8_t addr[4] = {192, 0, 2, 77};
		CHECK(fwd_wire_ecs_make(DNS_ECS_FAMILY_IPV4, addr, 24, &ecs) == 0, "ecs");
		fwd_wire_query_opts_t opts = {.use_0x20 = rows[i].use_0x20,
		                              .ecs = rows[i].ecs ? &ecs : NULL};
		uint8_t buf[FWD_WIRE_QUERY_MAXLEN];
		fwd_wire_pending_t p;
		int len = fwd_wire_query_build(&q, &opts, &rng, buf, sizeof(buf), &p);
		CHECK(len > 0, "%s: built (%d)", rows[i].what, len);
		if (len <= 0)
			continue;
		dns_query_t up;
		CHECK(dns_query_parse(buf, (size_t)len, &up) == DNS_QUERY_OK, "%s: parses",
		      rows[i].what);
		CHECK(up.flags == rows[i].want_flags, "%s: flags %04x, want %04x", rows[i].what,
		      up.flags, rows[i].want_flags);
		CHECK(up.id == p.id && up.id != q.id, "%s: our own id", rows[i].what);
		CHECK(up.has_edns && up.edns_payload == FWD_WIRE_PAYLOAD &&
		          up.edns_do == (rows[i].edns >= 0 && rows[i].do_bit),
		      "%s: OPT payload %u DO %d", rows[i].what, up.edns_payload, up.edns_do);
		CHECK(up.has_ecs == rows[i].ecs, "%s: ECS %d", rows[i].what, up.has_ecs);
		if (rows[i].ecs)
			CHECK(up.ecs.source_len == 24 && up.ecs.addr[2] == 2 && up.ecs.addr[3] == 0,
			      "%s: ECS /24 masked", rows[i].what);
		uint16_t rdlen = wire_read_u16(buf + len - (rows[i].want_rdlen + 2));
		CHECK(rdlen == rows[i].want_rdlen, "%s: OPT rdlen %u: no client option forwarded",
		      rows[i].what, rdlen);
		CHECK(dname_equal(up.qname, q.qname) && up.qtype == q.qtype, "%s: same question",
		      rows[i].what);
		CHECK(memcmp(p.qname, buf + DNS_HEADER_LEN, p.qname_len) == 0,
		      "%s: pending keeps the name as sent", rows[i].what);
		bool same_case = memcmp(p.qname, q.question, q.qname_len) == 0;
		CHECK(same_case == !rows[i].use_0x20, "%s: case %s", rows[i].what,
		      same_case ? "kept" : "randomised");
	}
	/* Each letter gets its own bit: over many queries every letter is seen in both cases. */
	dns_query_t q;
	client_query(&q, "abcdefghijklmnopqrstuvwxyz.test", DNS_TYPE_A, DNS_FLAG_RD, -1, false);
	unsigned upper[26] = {0};
	fwd_wire_query_opts_t opts = {.use_0x20 = true};
	for (int n = 0; n < 200; n++) {
		uint8_t buf[FWD_WIRE_QUERY_MAXLEN];
		fwd_wire_pending_t p;
		CHECK(fwd_wire_query_build(&q, &opts, &rng, buf, sizeof(buf), &p) > 0, "0x20 %d",
		      n);
		for (int c = 0; c < 26; c++)
			upper[c] += p.qname[1 + c] == 'A' + c;
	}
	for (int c = 0; c < 26; c++)
		CHECK(upper[c] > 60 && upper[c] < 140, "letter %c upper %u of 200", 'a' + c,
		      upper[c]);
	uint8_t small[20];
	fwd_wire_pending_t p;
	CHECK(fwd_wire_query_build(&q, NULL, &rng, small, sizeof(small), &p) == STEER_ESPACE,
	      "small buffer");
}

/* The outstanding query every reply row is checked against. */
static fwd_wire_pending_t pend;

static void reply_start(msg_t *m, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
                        uint16_t ns, uint16_t ar)
{
	header(m, id, flags, qd, an, ns, ar);
	putraw(m, pend.qname, pend.qname_len);
	put16(m, pend.qtype);
	put16(m, pend.qclass);
}

#define OK_FLAGS (DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA)

typedef enum {
	R_A,          /* one A answer */
	R_ID,         /* wrong id */
	R_QR0,        /* QR=0 */
	R_OPCODE,     /* opcode NOTIFY */
	R_QNAME,      /* another name */
	R_QTYPE,      /* another type */
	R_CASE,       /* name in lowercase */
	R_QD2,        /* two questions */
	R_SHORT,      /* 11 bytes */
	R_LOOP,       /* owner a pointer to itself */
	R_TRUNC_RR,   /* rdlength beyond the end */
	R_COUNT_HIGH, /* ancount 2, one record */
	R_TRAILING,   /* bytes after the last record */
	R_OPT_ANSWER, /* OPT in the answer section */
	R_OPT_TWICE,  /* two OPTs */
	R_TC,         /* TC=1, cut mid-record */
	R_SERVFAIL,
	R_REFUSED,
	R_NXDOMAIN,
	R_FORMERR_NOQ, /* FORMERR without the question */
	R_BADVERS,     /* extended rcode 16 via OPT */
	R_CHAIN,       /* qname -> c1 -> c2 -> A, out of order */
	R_CHAIN_LONG,  /* 17 links */
	R_CHAIN_LOOP,  /* a -> b -> a */
	R_UNRELATED,   /* an A for another name besides the answer */
	R_DNAME,       /* DNAME at the parent + synthesized CNAME */
	R_BIG_UDP,     /* 1300 bytes over UDP */
	R_BIG_TCP,     /* the same over TCP */
	R_REFERRAL,    /* NOERROR, RA=0, NS in authority */
	R_NODATA,      /* NOERROR, RA=1, SOA in authority */
} reply_kind_t;

static void make_reply(msg_t *m, reply_kind_t k)
{
	static const uint8_t a[4] = {192, 0, 2, 1};
	switch (k) {
	case R_A:
	case R_ID:
	case R_QR0:
	case R_OPCODE:
	case R_TRUNC_RR:
	case R_COUNT_HIGH:
	case R_TRAILING:
		reply_start(m, k == R_ID ? (uint16_t)(pend.id ^ 1) : pend.id,
		            k == R_QR0      ? DNS_FLAG_RD
		            : k == R_OPCODE ? OK_FLAGS | DNS_OPCODE_NOTIFY << DNS_OPCODE_SHIFT
		                            : OK_FLAGS,
		            1, k == R_COUNT_HIGH ? 2 : 1, 0, 1);
		put16(m, 0xc00c);
		put16(m, DNS_TYPE_A);
		put16(m, DNS_CLASS_IN);
		put32(m, 300);
		put16(m, k == R_TRUNC_RR ? 40 : 4);
		putraw(m, a, 4);
		opt(m, 0, false, NULL, 0);
		if (k == R_TRAILING)
			put16(m, 0);
		break;
	case R_QNAME:
	case R_QTYPE:
	case R_CASE:
		header(m, pend.id, OK_FLAGS, 1, 0, 0, 0);
		if (k == R_QNAME) {
			putname(m, "www.example.tesu");
		} else {
			putraw(m, pend.qname, pend.qname_len);
			if (k == R_CASE)
				dname_lower(m->b + DNS_HEADER_LEN);
		}
		put16(m, k == R_QTYPE ? DNS_TYPE_AAAA : pend.qtype);
		put16(m, pend.qclass);
		break;
	case R_QD2:
		reply_start(m, pend.id, OK_FLAGS, 2, 0, 0, 0);
		putraw(m, pend.qname, pend.qname_len);
		put16(m, pend.qtype);
		put16(m, pend.qclass);
		break;
	case R_SHORT:
		reply_start(m, pend.id, OK_FLAGS, 1, 0, 0, 0);
		m->n = 11;
		break;
	case R_LOOP: {
		reply_start(m, pend.id, OK_FLAGS, 1, 1, 0, 0);
		uint16_t here = (uint16_t)m->n;
		put16(m, (uint16_t)(0xc000 | here));
		put16(m, DNS_TYPE_A);
		put16(m, DNS_CLASS_IN);
		put32(m, 300);
		put16(m, 4);
		putraw(m, a, 4);
		break;
	}
	case R_OPT_ANSWER:
		reply_start(m, pend.id, OK_FLAGS, 1, 1, 0, 0);
		opt(m, 0, false, NULL, 0);
		break;
	case R_OPT_TWICE:
		reply_start(m, pend.id, OK_FLAGS, 1, 0, 0, 2);
		opt(m, 0, false, NULL, 0);
		opt(m, 0, false, NULL, 0);
		break;
	case R_TC:
		reply_start(m, pend.id, OK_FLAGS | DNS_FLAG_TC, 1, 3, 0, 0);
		put16(m, 0xc00c);
		put16(m, DNS_TYPE_A);
		break;
	case R_SERVFAIL:
	case R_REFUSED:
	case R_NXDOMAIN: {
		uint16_t rc = k == R_SERVFAIL  ? DNS_RCODE_SERVFAIL
		              : k == R_REFUSED ? DNS_RCODE_REFUSED
		                               : DNS_RCODE_NXDOMAIN;
		reply_start(m, pend.id, OK_FLAGS | rc, 1, 0, k == R_NXDOMAIN ? 1 : 0, 1);
		if (k == R_NXDOMAIN) {
			uint8_t soa[2 * DNS_DNAME_MAXLEN + 20], w[DNS_DNAME_MAXLEN];
			size_t s = 0;
			int n = dname_from_str("ns.example.test", w);
			memcpy(soa, w, (size_t)n);
			s += (size_t)n;
			n = dname_from_str("h.example.test", w);
			memcpy(soa + s, w, (size_t)n);
			s += (size_t)n;
			memset(soa + s, 0, 20);
			s += 20;
			rr(m, "example.test", DNS_TYPE_SOA, soa, (uint16_t)s);
		}
		/* An EDE (code 15, info 23 "Network Error") and a cookie (10). */
		static const uint8_t opts[] = {0,  15, 0, 6, 0, 23, 'n', 'e', 't', '!', 0,
		                               10, 0,  8, 1, 2, 3,  4,   5,   6,   7,   8};
		opt(m, 0, true, opts, sizeof(opts));
		break;
	}
	case R_FORMERR_NOQ:
		header(m, pend.id, DNS_FLAG_QR | DNS_RCODE_FORMERR, 0, 0, 0, 0);
		break;
	case R_BADVERS:
		reply_start(m, pend.id, OK_FLAGS, 1, 0, 0, 1);
		opt(m, 1, false, NULL, 0);
		break;
	case R_CHAIN:
		reply_start(m, pend.id, OK_FLAGS, 1, 3, 0, 0);
		rr(m, "c2.example.test", DNS_TYPE_A, a, 4);
		rr_name(m, "c1.example.test", DNS_TYPE_CNAME, "c2.example.test");
		put16(m, 0xc00c);
		put16(m, DNS_TYPE_CNAME);
		put16(m, DNS_CLASS_IN);
		put32(m, 300);
		{
			uint8_t w[DNS_DNAME_MAXLEN];
			int n = dname_from_str("C1.example.TEST", w);
			put16(m, (uint16_t)n);
			putraw(m, w, (size_t)n);
		}
		break;
	case R_CHAIN_LONG:
	case R_CHAIN_LOOP: {
		int links = k == R_CHAIN_LONG ? FWD_WIRE_CNAME_MAX + 1 : 2;
		reply_start(m, pend.id, OK_FLAGS, 1, (uint16_t)links, 0, 0);
		char owner[64], target[64];
		for (int i = 0; i < links; i++) {
			if (i == 0)
				dname_to_str(pend.qname, owner, sizeof(owner));
			else
				snprintf(owner, sizeof(owner), "c%d.example.test", i);
			if (k == R_CHAIN_LOOP && i == links - 1)
				dname_to_str(pend.qname, target, sizeof(target));
			else
				snprintf(target, sizeof(target), "c%d.example.test", i + 1);
			rr_name(m, owner, DNS_TYPE_CNAME, target);
		}
		break;
	}
	case R_UNRELATED:
		reply_start(m, pend.id, OK_FLAGS, 1, 2, 0, 0);
		put16(m, 0xc00c);
		put16(m, DNS_TYPE_A);
		put16(m, DNS_CLASS_IN);
		put32(m, 300);
		put16(m, 4);
		putraw(m, a, 4);
		rr(m, "bank.example", DNS_TYPE_A, a, 4);
		break;
	case R_DNAME:
		reply_start(m, pend.id, OK_FLAGS, 1, 3, 0, 0);
		rr_name(m, "example.test", DNS_TYPE_DNAME, "example.net");
		rr_name(m, "www.example.test", DNS_TYPE_CNAME, "www.example.net");
		rr(m, "www.example.net", DNS_TYPE_A, a, 4);
		break;
	case R_REFERRAL:
	case R_NODATA:
		reply_start(m, pend.id, k == R_REFERRAL ? DNS_FLAG_QR | DNS_FLAG_RD : OK_FLAGS, 1,
		            0, 1, 0);
		if (k == R_REFERRAL)
			rr_name(m, "example.test", DNS_TYPE_NS, "ns.example.test");
		else
			rr_name(m, "example.test", DNS_TYPE_SOA, "ns.example.test");
		break;
	case R_BIG_UDP:
	case R_BIG_TCP: {
		reply_start(m, pend.id, OK_FLAGS, 1, 1, 0, 0);
		uint8_t txt[1260];
		memset(txt, 'x', sizeof(txt));
		txt[0] = 255;
		txt[256] = 255;
		txt[512] = 255;
		txt[768] = 255;
		txt[1024] = 235;
		rr(m, "www.example.test", DNS_TYPE_TXT, txt, sizeof(txt));
		break;
	}
	}
}

static void test_reply_check(void)
{
	static const struct {
		const char *what;
		reply_kind_t kind;
		bool use_0x20;
		fwd_wire_verdict_t verdict;
		fwd_wire_rcode_class_t rclass;
		bool tc;
		uint8_t chain;
		uint16_t unrelated;
	} rows[] = {
	    {"A answer", R_A, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_ANSWER, false, 0, 0},
	    {"wrong id", R_ID, true, FWD_WIRE_DROP_ID, 0, false, 0, 0},
	    {"QR=0", R_QR0, true, FWD_WIRE_DROP_NOT_REPLY, 0, false, 0, 0},
	    {"opcode NOTIFY", R_OPCODE, true, FWD_WIRE_DROP_OPCODE, 0, false, 0, 0},
	    {"other name", R_QNAME, true, FWD_WIRE_DROP_QUESTION, 0, false, 0, 0},
	    {"other type", R_QTYPE, true, FWD_WIRE_DROP_QUESTION, 0, false, 0, 0},
	    {"case mismatch with 0x20", R_CASE, true, FWD_WIRE_DROP_CASE, 0, false, 0, 0},
	    {"lowercased without 0x20", R_CASE, false, FWD_WIRE_ACCEPT, FWD_WIRE_RC_ANSWER, false,
	     0, 0},
	    {"two questions", R_QD2, true, FWD_WIRE_DROP_QUESTION, 0, false, 0, 0},
	    {"short", R_SHORT, true, FWD_WIRE_DROP_SHORT, 0, false, 0, 0},
	    {"compression loop", R_LOOP, true, FWD_WIRE_DROP_MALFORMED, 0, false, 0, 0},
	    {"truncated RR", R_TRUNC_RR, true, FWD_WIRE_DROP_MALFORMED, 0, false, 0, 0},
	    {"count too high", R_COUNT_HIGH, true, FWD_WIRE_DROP_MALFORMED, 0, false, 0, 0},
	    {"trailing bytes", R_TRAILING, true, FWD_WIRE_DROP_MALFORMED, 0, false, 0, 0},
	    {"OPT in answer", R_OPT_ANSWER, true, FWD_WIRE_DROP_MALFORMED, 0, false, 0, 0},
	    {"two OPTs", R_OPT_TWICE, true, FWD_WIRE_DROP_MALFORMED, 0, false, 0, 0},
	    {"TC=1 cut mid-record", R_TC, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_ANSWER, true, 0, 0},
	    {"SERVFAIL", R_SERVFAIL, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_SERVFAIL, false, 0, 0},
	    {"REFUSED", R_REFUSED, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_REFUSED, false, 0, 0},
	    {"NXDOMAIN", R_NXDOMAIN, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_NXDOMAIN, false, 0, 0},
	    {"FORMERR without question", R_FORMERR_NOQ, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_FORMERR,
	     false, 0, 0},
	    {"BADVERS (extended)", R_BADVERS, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_OTHER, false, 0,
	     0},
	    {"chain out of order", R_CHAIN, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_ANSWER, false, 2, 0},
	    {"chain of 17", R_CHAIN_LONG, true, FWD_WIRE_DROP_CHAIN, 0, false, 0, 0},
	    {"chain loop", R_CHAIN_LOOP, true, FWD_WIRE_DROP_CHAIN, 0, false, 0, 0},
	    {"unrelated answer", R_UNRELATED, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_ANSWER, false, 0,
	     1},
	    {"DNAME", R_DNAME, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_ANSWER, false, 1, 0},
	    {"oversize UDP", R_BIG_UDP, true, FWD_WIRE_DROP_SIZE, 0, false, 0, 0},
	    {"large over TCP", R_BIG_TCP, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_ANSWER, false, 0, 0},
	    {"referral (RA=0) is lame", R_REFERRAL, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_LAME, false,
	     0, 0},
	    {"NODATA", R_NODATA, true, FWD_WIRE_ACCEPT, FWD_WIRE_RC_ANSWER, false, 0, 0},
	};
	fwd_wire_counters_t counters = {0};
	unsigned want_drops[FWD_WIRE_VERDICT_MAX] = {0};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		rng_reset(9);
		dns_query_t q;
		client_query(&q, "www.example.test", DNS_TYPE_A, DNS_FLAG_RD, 1232, false);
		fwd_wire_query_opts_t opts = {.use_0x20 = rows[i].use_0x20};
		uint8_t buf[FWD_WIRE_QUERY_MAXLEN];
		CHECK(fwd_wire_query_build(&q, &opts, &rng, buf, sizeof(buf), &pend) > 0, "build");
		CHECK(!rows[i].use_0x20 || memcmp(pend.qname, q.question, pend.qname_len) != 0,
		      "%s: this seed changes the case", rows[i].what);
		msg_t m;
		make_reply(&m, rows[i].kind);
		fwd_wire_reply_t info;
		fwd_wire_verdict_t v = fwd_wire_reply_check(
		    &pend, m.b, m.n, rows[i].kind == R_BIG_TCP, &info, &counters);
		want_drops[rows[i].verdict]++;
		CHECK(v == rows[i].verdict && info.verdict == v, "%s: verdict %s, want %s",
		      rows[i].what, fwd_wire_verdict_name(v),
		      fwd_wire_verdict_name(rows[i].verdict));
		if (v != FWD_WIRE_ACCEPT)
			continue;
		CHECK(info.rclass == rows[i].rclass, "%s: rcode class %d, want %d", rows[i].what,
		      info.rclass, rows[i].rclass);
		CHECK(info.tc == rows[i].tc, "%s: tc %d", rows[i].what, info.tc);
		CHECK(info.chain == rows[i].chain, "%s: chain %u, want %u", rows[i].what,
		      info.chain, rows[i].chain);
		CHECK(info.unrelated == rows[i].unrelated, "%s: unrelated %u, want %u",
		      rows[i].what, info.unrelated, rows[i].unrelated);
	}
	for (int v = 0; v < FWD_WIRE_VERDICT_MAX; v++)
		CHECK(counters.drop[v] == want_drops[v], "counter %s: %llu, want %u",
		      fwd_wire_verdict_name(v), (unsigned long long)counters.drop[v],
		      want_drops[v]);
	msg_t m;
	make_reply(&m, R_BADVERS);
	fwd_wire_reply_t info;
	fwd_wire_reply_check(&pend, m.b, m.n, false, &info, NULL);
	CHECK(info.rcode == DNS_RCODE_BADVERS, "extended rcode %u", info.rcode);
}

static void test_client_reply(void)
{
	static const struct {
		const char *what;
		reply_kind_t kind;
		uint16_t client_flags;
		int edns;
		bool do_bit;
		size_t limit;
		int want_len; /* -1: don't check */
		uint16_t want_flags;
		uint16_t an, ns, ar;
		uint8_t ext_rcode;
		uint16_t opt_rdlen;
	} rows[] = {
	    {"A, EDNS client", R_A, DNS_FLAG_RD, 1232, false, 1232, -1,
	     DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA, 1, 0, 1, 0, 0},
	    {"A, no EDNS, CD kept", R_A, DNS_FLAG_RD | DNS_FLAG_CD, -1, false, 512, -1,
	     DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA | DNS_FLAG_CD, 1, 0, 0, 0, 0},
	    {"NXDOMAIN, DO client gets EDE only", R_NXDOMAIN, 0, 1232, true, 1232, -1,
	     DNS_FLAG_QR | DNS_FLAG_RA | DNS_RCODE_NXDOMAIN, 0, 1, 1, 0, 10},
	    {"BADVERS to EDNS client", R_BADVERS, DNS_FLAG_RD, 1232, false, 1232, -1,
	     DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA, 0, 0, 1, 1, 0},
	    {"BADVERS to non-EDNS client = SERVFAIL", R_BADVERS, DNS_FLAG_RD, -1, false, 512, -1,
	     DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA | DNS_RCODE_SERVFAIL, 0, 0, 0, 0, 0},
	    {"1300 bytes cut to 512, no EDNS", R_BIG_TCP, DNS_FLAG_RD, -1, false, 512, 12 + 22,
	     DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA | DNS_FLAG_TC, 0, 0, 0, 0, 0},
	    {"1300 bytes cut to 1232, EDNS", R_BIG_TCP, DNS_FLAG_RD, 1232, false, 1232,
	     12 + 22 + 11, DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA | DNS_FLAG_TC, 0, 0, 1, 0, 0},
	    {"1300 bytes over TCP", R_BIG_TCP, DNS_FLAG_RD, -1, false, 65535, -1,
	     DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA, 1, 0, 0, 0, 0},
	    {"chain kept intact", R_CHAIN, DNS_FLAG_RD, 1232, false, 1232, -1,
	     DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA, 3, 0, 1, 0, 0},
	    {"FORMERR without question", R_FORMERR_NOQ, DNS_FLAG_RD, 1232, false, 1232,
	     12 + 22 + 11, DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA | DNS_RCODE_FORMERR, 0, 0, 1, 0,
	     0},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		rng_reset(9);
		dns_query_t q;
		client_query(&q, "www.Example.test", DNS_TYPE_A, rows[i].client_flags, rows[i].edns,
		             rows[i].do_bit);
		fwd_wire_query_opts_t opts = {.use_0x20 = true};
		uint8_t buf[FWD_WIRE_QUERY_MAXLEN];
		CHECK(fwd_wire_query_build(&q, &opts, &rng, buf, sizeof(buf), &pend) > 0, "build");
		msg_t m;
		make_reply(&m, rows[i].kind);
		fwd_wire_reply_t info;
		fwd_wire_verdict_t v = fwd_wire_reply_check(&pend, m.b, m.n, true, &info, NULL);
		CHECK(v == FWD_WIRE_ACCEPT, "%s: accepted (%s)", rows[i].what,
		      fwd_wire_verdict_name(v));
		uint8_t out[2048];
		int len =
		    fwd_wire_client_reply(&q, m.b, m.n, &info, out, sizeof(out), rows[i].limit);
		CHECK(len > 0, "%s: built (%d)", rows[i].what, len);
		if (len <= 0)
			continue;
		CHECK((size_t)len <= rows[i].limit, "%s: %d bytes within %zu", rows[i].what, len,
		      rows[i].limit);
		CHECK(rows[i].want_len < 0 || len == rows[i].want_len, "%s: length %d, want %d",
		      rows[i].what, len, rows[i].want_len);
		CHECK(wire_read_u16(out) == 0xc1c1, "%s: client id", rows[i].what);
		CHECK(wire_read_u16(out + 2) == rows[i].want_flags, "%s: flags %04x, want %04x",
		      rows[i].what, wire_read_u16(out + 2), rows[i].want_flags);
		CHECK(memcmp(out + DNS_HEADER_LEN, q.question, q.question_len) == 0,
		      "%s: the client's question case", rows[i].what);
		CHECK(wire_read_u16(out + 6) == rows[i].an &&
		          wire_read_u16(out + 8) == rows[i].ns &&
		          wire_read_u16(out + 10) == rows[i].ar,
		      "%s: counts %u/%u/%u", rows[i].what, wire_read_u16(out + 6),
		      wire_read_u16(out + 8), wire_read_u16(out + 10));
		/* What we send must be a well-formed message: check it as if it were a reply. */
		fwd_wire_pending_t back = pend;
		back.id = 0xc1c1;
		back.case_check = false;
		back.payload = 0;
		fwd_wire_reply_t again;
		v = fwd_wire_reply_check(&back, out, (size_t)len, true, &again, NULL);
		CHECK(v == FWD_WIRE_ACCEPT, "%s: our reply walks (%s)", rows[i].what,
		      fwd_wire_verdict_name(v));
		if (rows[i].edns >= 0 && !again.tc) {
			CHECK(again.has_edns && again.edns_payload == FWD_WIRE_PAYLOAD &&
			          again.edns_do == rows[i].do_bit &&
			          again.rcode >> 4 == rows[i].ext_rcode,
			      "%s: our OPT (payload %u, DO %d, rcode %u)", rows[i].what,
			      again.edns_payload, again.edns_do, again.rcode);
			uint16_t rdlen = wire_read_u16(out + len - 2 - rows[i].opt_rdlen);
			CHECK(rdlen == rows[i].opt_rdlen, "%s: OPT rdlen %u, want %u", rows[i].what,
			      rdlen, rows[i].opt_rdlen);
		}
		if (rows[i].kind == R_A) {
			/* The record's compression pointer still lands on the question name. */
			CHECK(wire_read_u16(out + DNS_HEADER_LEN + q.question_len) == 0xc00c,
			      "%s: pointer kept", rows[i].what);
		}
	}

	/* AD: passed only to a client that set DO or AD. */
	static const struct {
		uint16_t flags;
		bool do_bit;
		bool want_ad;
	} ad[] = {{DNS_FLAG_RD, false, false},
	          {DNS_FLAG_RD | DNS_FLAG_AD, false, true},
	          {DNS_FLAG_RD, true, true}};
	for (size_t i = 0; i < STEER_ARRAY_LEN(ad); i++) {
		dns_query_t q;
		client_query(&q, "www.example.test", DNS_TYPE_A, ad[i].flags, 1232, ad[i].do_bit);
		CHECK(fwd_wire_query_build(&q, NULL, &rng, (uint8_t[FWD_WIRE_QUERY_MAXLEN]){0},
		                           FWD_WIRE_QUERY_MAXLEN, &pend) > 0,
		      "build");
		msg_t m;
		make_reply(&m, R_A);
		wire_write_u16(m.b + 2, OK_FLAGS | DNS_FLAG_AD);
		fwd_wire_reply_t info;
		CHECK(fwd_wire_reply_check(&pend, m.b, m.n, false, &info, NULL) == FWD_WIRE_ACCEPT,
		      "AD %zu accepted", i);
		uint8_t out[512];
		int len = fwd_wire_client_reply(&q, m.b, m.n, &info, out, sizeof(out), 512);
		CHECK(len > 0 && ((wire_read_u16(out + 2) & DNS_FLAG_AD) != 0) == ad[i].want_ad,
		      "AD row %zu: flags %04x", i, wire_read_u16(out + 2));
	}

	/* Refused inputs: a dropped or truncated reply is never turned into an answer. */
	dns_query_t q;
	client_query(&q, "www.example.test", DNS_TYPE_A, DNS_FLAG_RD, 1232, false);
	fwd_wire_reply_t info = {.verdict = FWD_WIRE_DROP_ID};
	uint8_t out[512];
	uint8_t up[64] = {0};
	CHECK(fwd_wire_client_reply(&q, up, sizeof(up), &info, out, sizeof(out), 512) ==
	          STEER_EINVAL,
	      "dropped reply refused");
	/* An accepted reply to another query (a caller mix-up) is refused too. */
	dns_query_t other;
	client_query(&other, "www.example.tesu", DNS_TYPE_A, DNS_FLAG_RD, 1232, false);
	CHECK(fwd_wire_query_build(&other, NULL, &rng, (uint8_t[FWD_WIRE_QUERY_MAXLEN]){0},
	                           FWD_WIRE_QUERY_MAXLEN, &pend) > 0,
	      "build");
	msg_t m;
	make_reply(&m, R_A);
	CHECK(fwd_wire_reply_check(&pend, m.b, m.n, false, &info, NULL) == FWD_WIRE_ACCEPT,
	      "other accepted");
	client_query(&q, "www.example.test", DNS_TYPE_A, DNS_FLAG_RD, 1232, false);
	CHECK(fwd_wire_client_reply(&q, m.b, m.n, &info, out, sizeof(out), 512) == STEER_EINVAL,
	      "reply to another question refused");
	client_query(&q, "www.example.tesu", DNS_TYPE_AAAA, DNS_FLAG_RD, 1232, false);
	CHECK(fwd_wire_client_reply(&q, m.b, m.n, &info, out, sizeof(out), 512) == STEER_EINVAL,
	      "reply to another type refused");
	info.verdict = FWD_WIRE_ACCEPT;
	info.tc = true;
	CHECK(fwd_wire_client_reply(&q, up, sizeof(up), &info, out, sizeof(out), 512) ==
	          STEER_EINVAL,
	      "truncated reply refused");
}

static void test_probes(void)
{
	rng_reset(5);
	char nonce[FWD_WIRE_NONCE_LEN + 1];
	CHECK(fwd_wire_probe_nonce(&rng, 0x2a, nonce) == FWD_WIRE_NONCE_LEN &&
	          strncmp(nonce, "000000000000002a", 16) == 0 && strlen(nonce) == 24,
	      "nonce '%s'", nonce);
	uint8_t probe_name[DNS_DNAME_MAXLEN];
	CHECK(dname_from_str("probe.example.test", probe_name) > 0, "probe name");

	uint8_t buf[FWD_WIRE_QUERY_MAXLEN];
	fwd_wire_pending_t p;
	int len = fwd_wire_probe_build(FWD_WIRE_PROBE_RECURSIVE, probe_name, nonce, 0, true, &rng,
	                               buf, sizeof(buf), &p);
	dns_query_t q;
	CHECK(len > 0 && dns_query_parse(buf, (size_t)len, &q) == DNS_QUERY_OK, "recursive probe");
	char text[DNAME_STR_MAXLEN];
	dname_to_str(q.qname, text, sizeof(text));
	char want[128];
	snprintf(want, sizeof(want), "%s.probe.example.test.", nonce);
	CHECK(strcmp(text, want) == 0, "probe name '%s', want '%s'", text, want);
	CHECK((q.flags & DNS_FLAG_RD) && q.qtype == DNS_TYPE_A && q.has_edns && !q.edns_do,
	      "recursive probe: RD=1 A, OPT without DO");

	fwd_wire_pending_t lp;
	len = fwd_wire_probe_build(FWD_WIRE_PROBE_LIVENESS, NULL, NULL, 0, true, &rng, buf,
	                           sizeof(buf), &lp);
	CHECK(len > 0 && dns_query_parse(buf, (size_t)len, &q) == DNS_QUERY_OK, "liveness probe");
	CHECK(!(q.flags & DNS_FLAG_RD) && q.qtype == DNS_TYPE_NS && q.qname_len == 1,
	      "liveness probe: RD=0 . NS");

	CHECK(fwd_wire_probe_build(FWD_WIRE_PROBE_RECURSIVE, probe_name, "bad.nonce", 0, false,
	                           &rng, buf, sizeof(buf), &p) == STEER_EINVAL,
	      "nonce with a dot refused");
	CHECK(fwd_wire_probe_build(FWD_WIRE_PROBE_RECURSIVE, NULL, nonce, 0, false, &rng, buf,
	                           sizeof(buf), &p) == STEER_EINVAL,
	      "recursive probe needs a name");
	len = fwd_wire_probe_build(FWD_WIRE_PROBE_RECURSIVE, probe_name, nonce, 0, true, &rng, buf,
	                           sizeof(buf), &p);

	static const struct {
		const char *what;
		bool liveness;
		reply_kind_t kind;
		fwd_wire_probe_result_t want;
	} rows[] = {
	    {"NOERROR resolves", false, R_A, FWD_WIRE_PROBE_RESOLVES},
	    {"NXDOMAIN from our zone resolves", false, R_NXDOMAIN, FWD_WIRE_PROBE_RESOLVES},
	    {"SERVFAIL fails", false, R_SERVFAIL, FWD_WIRE_PROBE_FAILS},
	    {"REFUSED fails", false, R_REFUSED, FWD_WIRE_PROBE_FAILS},
	    {"referral fails", false, R_REFERRAL, FWD_WIRE_PROBE_FAILS},
	    {"liveness referral alive", true, R_REFERRAL, FWD_WIRE_PROBE_ALIVE},
	    {"wrong id ignored", false, R_ID, FWD_WIRE_PROBE_DROP},
	    {"case mismatch ignored", false, R_CASE, FWD_WIRE_PROBE_DROP},
	    {"liveness NOERROR", true, R_A, FWD_WIRE_PROBE_ALIVE},
	    {"liveness SERVFAIL still alive", true, R_SERVFAIL, FWD_WIRE_PROBE_ALIVE},
	    {"liveness wrong id ignored", true, R_ID, FWD_WIRE_PROBE_DROP},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		pend = rows[i].liveness ? lp : p;
		msg_t m;
		make_reply(&m, rows[i].kind);
		fwd_wire_probe_result_t r = fwd_wire_probe_check(
		    &pend, rows[i].liveness ? FWD_WIRE_PROBE_LIVENESS : FWD_WIRE_PROBE_RECURSIVE,
		    m.b, m.n, NULL, NULL);
		CHECK(r == rows[i].want, "%s: %d, want %d", rows[i].what, r, rows[i].want);
	}
}

int main(void)
{
	test_rng();
	test_spread();
	test_query_build();
	test_reply_check();
	test_client_reply();
	test_probes();
	return unit_finish("fwd_wire");
}
