/* Unit tests of src/auth: answers for a small zone, checked section by section. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "auth/auth.h"
#include "base/err.h"
#include "dns/dname.h"
#include "dns/wire.h"
#include "unit.h"

static zone_set_t *zones;

static size_t make_query(uint8_t *buf, const char *qname, uint16_t qtype, int payload)
{
	wire_ctx_t ctx = wire_ctx_init(buf, 512);
	wire_ctx_write_u16(&ctx, 0xbeef);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 1);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, payload ? 1 : 0);
	uint8_t name[DNS_DNAME_MAXLEN];
	int len = dname_from_str(qname, name);
	wire_ctx_write(&ctx, name, (size_t)len);
	wire_ctx_write_u16(&ctx, qtype);
	wire_ctx_write_u16(&ctx, DNS_CLASS_IN);
	if (payload) {
		wire_ctx_write_u8(&ctx, 0);
		wire_ctx_write_u16(&ctx, DNS_TYPE_OPT);
		wire_ctx_write_u16(&ctx, (uint16_t)payload);
		wire_ctx_write_u32(&ctx, 0);
		wire_ctx_write_u16(&ctx, 0);
	}
	return wire_ctx_offset(&ctx);
}

typedef struct {
	const char *qname;
	uint16_t qtype;
	int payload;
	uint8_t rcode;
	bool aa, tc;
	uint16_t an, ns, ar; /* section counts, OPT included in ar */
} row_t;

static void run_rows(const row_t *rows, size_t n, bool tcp)
{
	static auth_qctx_t qctx; /* static: its counters are a few KiB */
	auth_qctx_init(&qctx, 1);
	auth_view_t view = {.zones = zones, .udp_max_payload = 1232};
	steer_sockaddr_t remote;
	CHECK(steer_sockaddr_parse("127.0.0.1:9999", 0, &remote) == 0, "client address");
	auth_client_t client = {.remote = &remote, .tcp = tcp};
	for (size_t i = 0; i < n; i++) {
		const row_t *r = &rows[i];
		uint8_t query[512], resp[65535];
		size_t qlen = make_query(query, r->qname, r->qtype, r->payload);
		auth_axfr_t axfr = {0};
		size_t len =
		    auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, &axfr);
		auth_axfr_cleanup(&axfr);
		CHECK(len >= 12, "%s/%u: answered", r->qname, r->qtype);
		if (len < 12)
			continue;
		uint16_t flags = wire_read_u16(resp + 2);
		CHECK((flags & 0xf) == r->rcode, "%s/%u: rcode %u, want %u", r->qname, r->qtype,
		      flags & 0xf, r->rcode);
		CHECK(!!(flags & DNS_FLAG_AA) == r->aa, "%s/%u: AA", r->qname, r->qtype);
		CHECK(!!(flags & DNS_FLAG_TC) == r->tc, "%s/%u: TC", r->qname, r->qtype);
		CHECK(wire_read_u16(resp + 6) == r->an, "%s/%u: ANCOUNT %u, want %u", r->qname,
		      r->qtype, wire_read_u16(resp + 6), r->an);
		CHECK(wire_read_u16(resp + 8) == r->ns, "%s/%u: NSCOUNT %u, want %u", r->qname,
		      r->qtype, wire_read_u16(resp + 8), r->ns);
		CHECK(wire_read_u16(resp + 10) == r->ar, "%s/%u: ARCOUNT %u, want %u", r->qname,
		      r->qtype, wire_read_u16(resp + 10), r->ar);
	}
}

static void test_answers(void)
{
	static const row_t rows[] = {
	    {"www.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NOERROR, true, false, 2, 0, 0},
	    {"WWW.Auth.Test", DNS_TYPE_A, 1232, DNS_RCODE_NOERROR, true, false, 2, 0, 1},
	    {"www.auth.test", DNS_TYPE_AAAA, 0, DNS_RCODE_NOERROR, true, false, 0, 1, 0},
	    {"nope.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NXDOMAIN, true, false, 0, 1, 0},
	    {"auth.test", DNS_TYPE_MX, 0, DNS_RCODE_NOERROR, true, false, 1, 0, 2},
	    {"alias.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NOERROR, true, false, 3, 0, 0},
	    {"alias.auth.test", DNS_TYPE_CNAME, 0, DNS_RCODE_NOERROR, true, false, 1, 0, 0},
	    {"chain1.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NOERROR, true, false, 4, 0, 0},
	    {"dangling.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NXDOMAIN, true, false, 1, 1, 0},
	    {"out.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NOERROR, true, false, 1, 0, 0},
	    {"loop1.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NOERROR, true, false, 2, 0, 0},
	    {"x.wild.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NOERROR, true, false, 1, 0, 0},
	    {"x.y.wild.auth.test", DNS_TYPE_MX, 0, DNS_RCODE_NOERROR, true, false, 1, 0, 2},
	    {"x.wild.auth.test", DNS_TYPE_TXT, 0, DNS_RCODE_NOERROR, true, false, 0, 1, 0},
	    {"wild.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NOERROR, true, false, 0, 1, 0},
	    {"ent.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NOERROR, true, false, 0, 1, 0},
	    {"x.ent.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NXDOMAIN, true, false, 0, 1, 0},
	    {"sub.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NOERROR, false, false, 0, 2, 2},
	    {"deep.sub.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NOERROR, false, false, 0, 2, 2},
	    {"ns.sub.auth.test", DNS_TYPE_A, 0, DNS_RCODE_NOERROR, false, false, 0, 2, 2},
	    {"sub.auth.test", DNS_TYPE_DS, 0, DNS_RCODE_NOERROR, true, false, 1, 0, 0},
	    {"auth.test", DNS_TYPE_ANY, 0, DNS_RCODE_NOERROR, true, false, 2, 0, 1},
	    {"big.auth.test", DNS_TYPE_TXT, 0, DNS_RCODE_NOERROR, true, true, 0, 0, 0},
	    {"big.auth.test", DNS_TYPE_TXT, 1232, DNS_RCODE_NOERROR, true, false, 6, 0, 1},
	    {"example.org", DNS_TYPE_A, 0, DNS_RCODE_REFUSED, false, false, 0, 0, 0},
	    {"auth.test", DNS_TYPE_AXFR, 0, DNS_RCODE_NOTIMP, false, false, 0, 0, 0},
	    /* an IXFR without the client's SOA in authority is malformed (RFC 1995 3) */
	    {"auth.test", DNS_TYPE_IXFR, 0, DNS_RCODE_FORMERR, false, false, 0, 0, 0},
	    {"auth.test", DNS_TYPE_OPT, 0, DNS_RCODE_NOERROR, true, false, 0, 1, 0},
	};
	run_rows(rows, STEER_ARRAY_LEN(rows), false);
}

static void test_tcp(void)
{
	static const row_t rows[] = {
	    /* Over TCP, ANY gets the whole node and nothing is truncated. */
	    {"auth.test", DNS_TYPE_ANY, 0, DNS_RCODE_NOERROR, true, false, 4, 0, 3},
	    {"big.auth.test", DNS_TYPE_TXT, 0, DNS_RCODE_NOERROR, true, false, 6, 0, 0},
	    /* The ACL is empty: transfers are refused. */
	    {"auth.test", DNS_TYPE_AXFR, 0, DNS_RCODE_REFUSED, false, false, 0, 0, 0},
	};
	run_rows(rows, STEER_ARRAY_LEN(rows), true);
}

static void test_axfr(void)
{
	zone_set_t *set = zone_set_new();
	zone_t *zone = NULL;
	char err[256];
	CHECK(zone_load("auth.test", "zones/auth/auth.test.zone", &zone, err, sizeof(err)) == 0,
	      "load: %s", err);
	dns_acl_entry_t acl = {0};
	CHECK(steer_prefix_parse("127.0.0.0/8", &acl.prefix) == 0, "acl");
	zone_set_entry_t tmpl = {.xfr_allow = &acl, .n_xfr_allow = 1};
	CHECK(zone_set_add(set, zone, &tmpl) == 0, "add");
	auth_view_t view = {.zones = set, .udp_max_payload = 1232};
	steer_sockaddr_t remote;
	CHECK(steer_sockaddr_parse("127.0.0.1", 0, &remote) == 0, "addr");
	auth_client_t client = {.remote = &remote, .tcp = true};
	static auth_qctx_t qctx; /* static: its counters are a few KiB */
	auth_qctx_init(&qctx, 1);
	static uint8_t query[512], resp[65535];
	size_t qlen = make_query(query, "auth.test", DNS_TYPE_AXFR, 0);
	auth_axfr_t axfr = {0};
	size_t len = auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, &axfr);
	unsigned records = wire_read_u16(resp + 6);
	CHECK(len > 12 && (wire_read_u16(resp + 2) & 0xf) == 0, "first AXFR message NOERROR");
	while ((len = auth_axfr_next(&axfr, resp, sizeof(resp))) > 0)
		records += wire_read_u16(resp + 6);
	auth_axfr_cleanup(&axfr);
	/* Every record once, the SOA twice (first and last). */
	CHECK(records == zone->n_records + 1, "AXFR carried %u records, zone has %zu", records,
	      zone->n_records);
	CHECK(atomic_load(&qctx.stats.axfr) == 1, "axfr counted");
	zone_set_free(set);
}

/* An IXFR query for ixfr.test. with the client's SOA of serial @p serial in authority. */
static size_t make_ixfr(uint8_t *buf, uint32_t serial)
{
	wire_ctx_t ctx = wire_ctx_init(buf, 512);
	static const uint8_t apex[] = "\4ixfr\4test";
	wire_ctx_write_u16(&ctx, 0x1234);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 1);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 1);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write(&ctx, apex, sizeof(apex));
	wire_ctx_write_u16(&ctx, DNS_TYPE_IXFR);
	wire_ctx_write_u16(&ctx, DNS_CLASS_IN);
	/* the SOA: owner and both names compressed to the question, as resolvers send it */
	static const uint8_t soa_head[] = {0xc0, 12, 0, 6,  0,    1,  0,    0,
	                                   0,    0,  0, 24, 0xc0, 12, 0xc0, 12};
	wire_ctx_write(&ctx, soa_head, sizeof(soa_head));
	wire_ctx_write_u32(&ctx, serial);
	for (int i = 0; i < 4; i++)
		wire_ctx_write_u32(&ctx, 300);
	return wire_ctx_offset(&ctx);
}

static zone_t *load_ixfr_zone(uint32_t serial, const char *body)
{
	char path[] = "/tmp/steer-test-ixfr-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return NULL;
	FILE *f = fdopen(fd, "w");
	fprintf(f,
	        "$ORIGIN ixfr.test.\n$TTL 300\n@ SOA ns h %u 3600 900 604800 300\n@ NS ns\n"
	        "ns A 192.0.2.1\n%s",
	        serial, body);
	fclose(f);
	zone_t *zone = NULL;
	char err[512] = "";
	int ret = zone_load("ixfr.test", path, &zone, err, sizeof(err));
	unlink(path);
	CHECK(ret == 0, "ixfr zone loads: %s", err);
	return zone;
}

/* Records in the answer sections of a whole transfer started with @p query. */
static unsigned transfer_records(const auth_view_t *view, const auth_client_t *client,
                                 const uint8_t *query, size_t qlen, unsigned *messages)
{
	static auth_qctx_t qctx;
	auth_qctx_init(&qctx, 1);
	static uint8_t resp[65535];
	auth_axfr_t axfr = {0};
	size_t len = auth_answer(view, client, query, qlen, resp, client->tcp ? sizeof(resp) : 512,
	                         &qctx, client->tcp ? &axfr : NULL);
	CHECK(len > 12 && (wire_read_u16(resp + 2) & 0xf) == 0, "IXFR answered NOERROR");
	unsigned records = len > 12 ? wire_read_u16(resp + 6) : 0;
	*messages = 1;
	while (client->tcp && (len = auth_axfr_next(&axfr, resp, sizeof(resp))) > 0) {
		records += wire_read_u16(resp + 6);
		(*messages)++;
	}
	auth_axfr_cleanup(&axfr);
	return records;
}

/* A change too big for one message streams over several, every record exactly once. */
static void test_ixfr_many_messages(const zone_t *v3, const zone_journal_t *j3,
                                    const dns_acl_entry_t *acl, const auth_client_t *tcp)
{
	enum { N = 8000 };
	size_t cap = (size_t)N * 48 + 8192, used = 0;
	char *body = malloc(cap);
	body[0] = '\0';
	for (int i = 0; i < N; i++)
		used += (size_t)snprintf(body + used, cap - used, "host-number-%d A 10.%d.%d.%d\n",
		                         i, i >> 16 & 255, i >> 8 & 255, i & 255);
	zone_t *v4 = load_ixfr_zone(4, body);
	free(body);
	if (!v4)
		return;
	zone_journal_t *j4 = zone_journal_next(j3, v3, v4, 20);
	CHECK(j4 && j4->n == 3, "a third change");
	zone_set_t *set = zone_set_new();
	zone_set_entry_t tmpl = {
	    .xfr_allow = (dns_acl_entry_t *)acl, .n_xfr_allow = 1, .journal = j4};
	zone_ref(v4);
	CHECK(zone_set_add(set, v4, &tmpl) == 0, "add v4");
	auth_view_t view = {.zones = set, .udp_max_payload = 1232};
	uint8_t query[512];
	unsigned msgs = 0;
	size_t qlen = make_ixfr(query, 3);
	/* SOA 4, [SOA 3, 60 TXT deleted, SOA 4, N added], SOA 4 */
	unsigned got = transfer_records(&view, tcp, query, qlen, &msgs);
	CHECK(got == 1 + 1 + 60 + 1 + N + 1, "IXFR over several messages: %u records", got);
	CHECK(msgs > 1, "IXFR took %u messages", msgs);
	zone_set_free(set);
	zone_journal_unref(j4);
	zone_unref(v4);
}

static void test_ixfr(void)
{
	char big[8192] = "";
	for (int i = 0; i < 60; i++) {
		char line[128];
		snprintf(line, sizeof(line), "t%d TXT \"a fairly long text record number %d\"\n", i,
		         i);
		strcat(big, line);
	}
	zone_t *v1 = load_ixfr_zone(1, "a A 192.0.2.10\n");
	zone_t *v2 = load_ixfr_zone(2, "a A 192.0.2.11\nb A 192.0.2.12\n");
	zone_t *v3 = load_ixfr_zone(3, big);
	if (!v1 || !v2 || !v3)
		return;
	zone_journal_t *j2 = zone_journal_next(NULL, v1, v2, 20);
	zone_journal_t *j3 = zone_journal_next(j2, v2, v3, 20);
	CHECK(j3 && j3->n == 2, "two changes");
	dns_acl_entry_t acl = {0};
	CHECK(steer_prefix_parse("127.0.0.0/8", &acl.prefix) == 0, "acl");
	zone_set_t *set = zone_set_new();
	zone_set_entry_t tmpl = {.xfr_allow = &acl, .n_xfr_allow = 1, .journal = j2};
	zone_ref(v2);
	CHECK(zone_set_add(set, v2, &tmpl) == 0, "add v2");
	zone_set_t *set3 = zone_set_new();
	tmpl.journal = j3;
	zone_ref(v3);
	CHECK(zone_set_add(set3, v3, &tmpl) == 0, "add v3");
	auth_view_t view = {.zones = set, .udp_max_payload = 1232};
	auth_view_t view3 = {.zones = set3, .udp_max_payload = 1232};
	steer_sockaddr_t remote;
	CHECK(steer_sockaddr_parse("127.0.0.1", 0, &remote) == 0, "addr");
	auth_client_t udp = {.remote = &remote, .tcp = false},
	              tcp = {.remote = &remote, .tcp = true};
	uint8_t query[512];
	unsigned msgs;
	static const struct {
		bool v3, tcp;
		uint32_t serial;
		unsigned records; /* answer records of the whole transfer */
	} rows[] = {
	    /* current or newer: the SOA alone (RFC 1995 2) */
	    {false, false, 2, 1},
	    {false, true, 2, 1},
	    {false, false, 7, 1},
	    /* SOA 2, [SOA 1, a .10, SOA 2, a .11, b], SOA 2 */
	    {false, false, 1, 7},
	    {false, true, 1, 7},
	    /* unknown version: SOA alone over UDP, the whole zone (5 records + SOA) over TCP */
	    {false, false, 0xfffffff0u, 1},
	    {false, true, 0xfffffff0u, 6},
	    /* from 1 to 3: SOA 3, the first change (5), [SOA 2, 2 deleted, SOA 3, 60 added],
	     * SOA 3; too big for 512 bytes of UDP: the SOA alone */
	    {true, false, 1, 1},
	    {true, true, 1, 1 + 5 + 3 + 61 + 1},
	    {true, true, 2, 1 + 1 + 2 + 1 + 60 + 1},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		size_t qlen = make_ixfr(query, rows[i].serial);
		unsigned got = transfer_records(rows[i].v3 ? &view3 : &view,
		                                rows[i].tcp ? &tcp : &udp, query, qlen, &msgs);
		CHECK(got == rows[i].records, "IXFR row %zu: %u records, want %u", i, got,
		      rows[i].records);
	}
	test_ixfr_many_messages(v3, j3, &acl, &tcp);
	zone_set_free(set);
	zone_set_free(set3);
	zone_journal_unref(j2);
	zone_journal_unref(j3);
	zone_unref(v1);
	zone_unref(v2);
	zone_unref(v3);
}

/* A query of class @p qclass; with @p edns >= 0 an OPT of that version, with NSID if asked. */
static size_t make_query_class(uint8_t *buf, const char *qname, uint16_t qtype, uint16_t qclass,
                               int edns, bool nsid)
{
	wire_ctx_t ctx = wire_ctx_init(buf, 512);
	wire_ctx_write_u16(&ctx, 0xbeef);
	wire_ctx_write_u16(&ctx, DNS_FLAG_RD);
	wire_ctx_write_u16(&ctx, 1);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, edns >= 0 ? 1 : 0);
	uint8_t name[DNS_DNAME_MAXLEN];
	int len = dname_from_str(qname, name);
	wire_ctx_write(&ctx, name, (size_t)len);
	wire_ctx_write_u16(&ctx, qtype);
	wire_ctx_write_u16(&ctx, qclass);
	if (edns >= 0) {
		wire_ctx_write_u8(&ctx, 0);
		wire_ctx_write_u16(&ctx, DNS_TYPE_OPT);
		wire_ctx_write_u16(&ctx, 1232);
		wire_ctx_write_u32(&ctx, (uint32_t)edns << 16);
		wire_ctx_write_u16(&ctx, nsid ? 4 : 0);
		if (nsid) {
			wire_ctx_write_u16(&ctx, 3);
			wire_ctx_write_u16(&ctx, 0);
		}
	}
	return wire_ctx_offset(&ctx);
}

static void test_identity(void)
{
	static const struct {
		const char *qname;
		uint16_t qtype, qclass;
		int edns;
		bool nsid;
		bool identity; /* the view has one */
		uint8_t rcode;
		uint16_t an;
		bool nsid_back; /* the response ends with the NSID option "n-1" */
	} rows[] = {
	    {"id.server.", DNS_TYPE_TXT, DNS_CLASS_CH, -1, false, true, 0, 1, false},
	    {"ID.Server.", DNS_TYPE_TXT, DNS_CLASS_CH, 0, true, true, 0, 1, true},
	    {"hostname.bind.", DNS_TYPE_TXT, DNS_CLASS_CH, 0, false, true, 0, 1, false},
	    {"version.bind.", DNS_TYPE_TXT, DNS_CLASS_CH, 0, true, true, DNS_RCODE_REFUSED, 0,
	     true},
	    {"x.id.server.", DNS_TYPE_TXT, DNS_CLASS_CH, -1, false, true, DNS_RCODE_REFUSED, 0,
	     false},
	    {"id.server.", DNS_TYPE_A, DNS_CLASS_CH, -1, false, true, DNS_RCODE_REFUSED, 0, false},
	    {"id.server.", DNS_TYPE_ANY, DNS_CLASS_CH, -1, false, true, DNS_RCODE_REFUSED, 0,
	     false},
	    {"id.server.", DNS_TYPE_TXT, DNS_CLASS_IN, 0, true, true, DNS_RCODE_REFUSED, 0, true},
	    {"id.server.", DNS_TYPE_TXT, DNS_CLASS_CH, 0, true, false, DNS_RCODE_REFUSED, 0, false},
	    {"auth.test.", DNS_TYPE_SOA, DNS_CLASS_IN, 0, true, true, 0, 1, true},
	    {"auth.test.", DNS_TYPE_SOA, DNS_CLASS_IN, 0, false, true, 0, 1, false},
	    {"auth.test.", DNS_TYPE_SOA, DNS_CLASS_IN, 0, true, false, 0, 1, false},
	    {"nx.auth.test.", DNS_TYPE_A, DNS_CLASS_IN, 0, true, true, DNS_RCODE_NXDOMAIN, 0, true},
	    /* BADVERS (16) is an extended rcode: 0 in the header */
	    {"auth.test.", DNS_TYPE_SOA, DNS_CLASS_IN, 1, true, true, 0, 0, true},
	};
	static auth_qctx_t qctx;
	auth_qctx_init(&qctx, 1);
	static const char id[] = "n-1";
	steer_sockaddr_t remote;
	CHECK(steer_sockaddr_parse("127.0.0.1:9999", 0, &remote) == 0, "client address");
	auth_client_t client = {.remote = &remote, .tcp = false};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		auth_view_t view = {.zones = zones, .udp_max_payload = 1232};
		if (rows[i].identity) {
			view.identity = id;
			view.identity_len = (uint8_t)strlen(id);
		}
		uint8_t query[512], resp[4096];
		size_t qlen = make_query_class(query, rows[i].qname, rows[i].qtype, rows[i].qclass,
		                               rows[i].edns, rows[i].nsid);
		size_t len =
		    auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, NULL);
		CHECK(len >= 12, "identity row %zu: answered", i);
		if (len < 12)
			continue;
		uint16_t flags = wire_read_u16(resp + 2);
		CHECK((flags & 0xf) == rows[i].rcode && wire_read_u16(resp + 6) == rows[i].an,
		      "identity row %zu (%s): rcode %u ancount %u", i, rows[i].qname, flags & 0xf,
		      wire_read_u16(resp + 6));
		static const uint8_t tail[] = {0, 3, 0, 3, 'n', '-', '1'};
		bool back = len > sizeof(tail) &&
		            memcmp(resp + len - sizeof(tail), tail, sizeof(tail)) == 0;
		CHECK(back == rows[i].nsid_back, "identity row %zu (%s): NSID %s", i, rows[i].qname,
		      back ? "returned" : "absent");
		if (rows[i].qclass == DNS_CLASS_CH && rows[i].an == 1) {
			/* the answer follows the question; its owner points at the question name */
			size_t at =
			    qlen - (rows[i].edns >= 0 ? 11u + (rows[i].nsid ? 4u : 0u) : 0u);
			static const uint8_t rr[] = {0xc0, 12, 0, 16, 0, 3,   0,   0,
			                             0,    0,  0, 4,  3, 'n', '-', '1'};
			CHECK(!(flags & DNS_FLAG_AA) && (flags & DNS_FLAG_RD) &&
			          len >= at + sizeof(rr) && memcmp(resp + at, rr, sizeof(rr)) == 0,
			      "identity row %zu: CH TXT, TTL 0, no AA, RD echoed", i);
		}
	}
}

static unsigned notified;
static uint32_t notified_serial;

static void on_notify(void *arg, const uint8_t *apex, uint32_t serial, bool has_serial)
{
	(void)apex;
	CHECK(arg == &notified, "the view's notify_arg is passed");
	notified++;
	notified_serial = has_serial ? serial : 0;
}

/* A NOTIFY for @p qname, with an SOA of @p serial in the answer section when not 0. */
static size_t make_notify(uint8_t *buf, const char *qname, uint32_t serial)
{
	size_t len = make_query_class(buf, qname, DNS_TYPE_SOA, DNS_CLASS_IN, -1, false);
	wire_write_u16(buf + 2, (uint16_t)(DNS_OPCODE_NOTIFY << DNS_OPCODE_SHIFT | DNS_FLAG_AA));
	if (serial == 0)
		return len;
	wire_write_u16(buf + 6, 1);
	static const uint8_t soa_rr[] = {0xc0, 12, 0, 6, 0, 1, 0, 0, 0, 60, 0, 22, 0, 0};
	memcpy(buf + len, soa_rr, sizeof(soa_rr));
	len += sizeof(soa_rr);
	wire_write_u32(buf + len, serial);
	memset(buf + len + 4, 0, 16);
	return len + 20;
}

static void test_notify_and_expire(void)
{
	zone_set_t *set = zone_set_new();
	zone_t *zone = NULL;
	char err[256];
	CHECK(zone_load("auth.test", "zones/auth/auth.test.zone", &zone, err, sizeof(err)) == 0,
	      "load: %s", err);
	dns_acl_entry_t allow = {0};
	CHECK(steer_prefix_parse("192.0.2.1", &allow.prefix) == 0, "acl");
	static _Atomic int64_t expire_at;
	atomic_store(&expire_at, (int64_t)time(NULL) + 1000);
	zone_set_entry_t tmpl = {.notify_allow = &allow,
	                         .n_notify_allow = 1,
	                         .secondary = true,
	                         .expire_at = &expire_at};
	CHECK(zone_set_add(set, zone, &tmpl) == 0, "add");
	auth_view_t view = {
	    .zones = set, .udp_max_payload = 1232, .on_notify = on_notify, .notify_arg = &notified};
	steer_sockaddr_t primary, other;
	CHECK(steer_sockaddr_parse("192.0.2.1", 0, &primary) == 0, "addr");
	CHECK(steer_sockaddr_parse("192.0.2.2", 0, &other) == 0, "addr");
	static auth_qctx_t qctx;
	auth_qctx_init(&qctx, 1);
	uint8_t query[512], resp[512];
	auth_client_t client = {.remote = &primary};
	size_t qlen = make_notify(query, "auth.test", 42);
	size_t len = auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, NULL);
	uint16_t flags = len >= 12 ? wire_read_u16(resp + 2) : 0;
	CHECK(len > 12 && (flags & 0xf) == DNS_RCODE_NOERROR && (flags & DNS_FLAG_AA) &&
	          ((flags & DNS_OPCODE_MASK) >> DNS_OPCODE_SHIFT) == DNS_OPCODE_NOTIFY &&
	          wire_read_u16(resp + 4) == 1,
	      "NOTIFY from the primary: NOERROR, AA, opcode and question echoed");
	CHECK(notified == 1 && notified_serial == 42, "callback with the serial hint (%u, %u)",
	      notified, notified_serial);
	client.remote = &other;
	len = auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, NULL);
	CHECK(len > 12 && (wire_read_u16(resp + 2) & 0xf) == DNS_RCODE_NOTAUTH && notified == 1,
	      "NOTIFY from another address: NOTAUTH, no callback");
	client.remote = &primary;
	qlen = make_notify(query, "nosuch.test", 0);
	len = auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, NULL);
	CHECK(len > 12 && (wire_read_u16(resp + 2) & 0xf) == DNS_RCODE_NOTAUTH && notified == 1,
	      "NOTIFY for a zone not ours: NOTAUTH");
	qlen = make_notify(query, "auth.test", 0);
	len = auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, NULL);
	CHECK(len > 12 && notified == 2 && notified_serial == 0, "NOTIFY without a serial");

	/* EXPIRE: the seconds left; none for a primary zone; SERVFAIL once expired. */
	qlen = make_query_class(query, "auth.test", DNS_TYPE_SOA, DNS_CLASS_IN, 0, false);
	static const uint8_t expire_opt[] = {0, 9, 0, 0};
	wire_write_u16(query + qlen - 2, sizeof(expire_opt));
	memcpy(query + qlen, expire_opt, sizeof(expire_opt));
	qlen += sizeof(expire_opt);
	len = auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, NULL);
	CHECK(len > 8 && (wire_read_u16(resp + 2) & 0xf) == DNS_RCODE_NOERROR, "SOA answered");
	CHECK(len > 8 && wire_read_u16(resp + len - 8) == 9 && wire_read_u16(resp + len - 6) == 4 &&
	          wire_read_u32(resp + len - 4) >= 999 && wire_read_u32(resp + len - 4) <= 1000,
	      "EXPIRE option with the seconds left");
	auth_view_t primary_view = {.zones = zones, .udp_max_payload = 1232};
	len = auth_answer(&primary_view, &client, query, qlen, resp, sizeof(resp), &qctx, NULL);
	CHECK(len > 8 && wire_read_u16(resp + len - 4) != 9, "no EXPIRE for a primary zone");
	atomic_store(&expire_at, (int64_t)time(NULL) - 1);
	len = auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, NULL);
	CHECK(len > 12 && (wire_read_u16(resp + 2) & 0xf) == DNS_RCODE_SERVFAIL &&
	          wire_read_u16(resp + 6) == 0,
	      "an expired zone: SERVFAIL");
	zone_set_free(set);
}

/* Before its first transfer a secondary zone answers SERVFAIL for every name in it, unless a
 * more specific served zone holds the name; NOTIFY is accepted from its primaries. */
static void test_pending_zones(void)
{
	zone_set_t *set = zone_set_new();
	zone_t *zone = NULL;
	char err[256];
	CHECK(zone_load("auth.test", "zones/auth/auth.test.zone", &zone, err, sizeof(err)) == 0,
	      "load: %s", err);
	CHECK(zone_set_add(set, zone, &(zone_set_entry_t){0}) == 0, "add the served zone");
	dns_acl_entry_t allow = {0};
	CHECK(steer_prefix_parse("192.0.2.1", &allow.prefix) == 0, "acl");
	zone_set_entry_t tmpl = {.notify_allow = &allow, .n_notify_allow = 1, .secondary = true};
	uint8_t apex[DNS_DNAME_MAXLEN];
	CHECK(dname_from_str("sub.auth.test", apex) > 0 &&
	          zone_set_add_pending(set, apex, &tmpl) == 0,
	      "pending child of a served zone");
	CHECK(dname_from_str("test", apex) > 0 && zone_set_add_pending(set, apex, &tmpl) == 0,
	      "pending parent of a served zone");
	CHECK(zone_set_add_pending(set, apex, &tmpl) == STEER_EEXIST, "pending twice: EEXIST");
	CHECK(dname_from_str("auth.test", apex) > 0 &&
	          zone_set_add_pending(set, apex, &tmpl) == STEER_EEXIST,
	      "pending over a served zone: EEXIST");
	CHECK(zone_set_count(set) == 1 && zone_set_pending_count(set) == 2 &&
	          strcmp(zone_set_pending_at(set, 0)->name, "sub.auth.test.") == 0,
	      "served and pending zones are counted apart");
	static const struct {
		const char *qname;
		uint16_t qtype;
		uint8_t rcode;
		const char *why;
	} rows[] = {
	    {"sub.auth.test", DNS_TYPE_SOA, DNS_RCODE_SERVFAIL, "pending apex SOA"},
	    {"a.b.sub.auth.test", DNS_TYPE_A, DNS_RCODE_SERVFAIL, "a name below a pending apex"},
	    {"sub.auth.test", DNS_TYPE_AXFR, DNS_RCODE_SERVFAIL, "AXFR of a pending zone"},
	    {"sub.auth.test", DNS_TYPE_IXFR, DNS_RCODE_SERVFAIL, "IXFR of a pending zone"},
	    {"auth.test", DNS_TYPE_SOA, DNS_RCODE_NOERROR, "the served zone inside a pending one"},
	    {"sub.auth.test", DNS_TYPE_DS, DNS_RCODE_NOERROR, "DS at a pending apex: the parent's"},
	    {"other.test", DNS_TYPE_A, DNS_RCODE_SERVFAIL, "pending parent, no served zone"},
	    {"example", DNS_TYPE_A, DNS_RCODE_REFUSED, "not ours at all"},
	};
	auth_view_t view = {
	    .zones = set, .udp_max_payload = 1232, .on_notify = on_notify, .notify_arg = &notified};
	static auth_qctx_t qctx;
	auth_qctx_init(&qctx, 1);
	uint8_t query[512], resp[512];
	steer_sockaddr_t primary, other;
	CHECK(steer_sockaddr_parse("192.0.2.1", 0, &primary) == 0, "addr");
	CHECK(steer_sockaddr_parse("192.0.2.2", 0, &other) == 0, "addr");
	auth_client_t client = {.remote = &primary};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		size_t qlen =
		    make_query_class(query, rows[i].qname, rows[i].qtype, DNS_CLASS_IN, -1, false);
		size_t len =
		    auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, NULL);
		uint8_t rcode = len > 12 ? (uint8_t)(wire_read_u16(resp + 2) & 0xf) : 0xff;
		CHECK(rcode == rows[i].rcode, "row %zu (%s): rcode %u, want %u", i, rows[i].why,
		      rcode, rows[i].rcode);
	}
	CHECK(atomic_load(&qctx.stats.rcode[DNS_RCODE_SERVFAIL]) == 5, "SERVFAIL counted (%llu)",
	      (unsigned long long)atomic_load(&qctx.stats.rcode[DNS_RCODE_SERVFAIL]));
	dns_query_t q;
	size_t qlen =
	    make_query_class(query, "x.sub.auth.test", DNS_TYPE_A, DNS_CLASS_IN, -1, false);
	CHECK(dns_query_parse(query, qlen, &q) == DNS_QUERY_OK && auth_serves(&view, &q),
	      "a pending zone is served (never forwarded)");

	unsigned before = notified;
	qlen = make_notify(query, "sub.auth.test", 7);
	size_t len = auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, NULL);
	uint16_t flags = len > 12 ? wire_read_u16(resp + 2) : 0;
	CHECK((flags & 0xf) == DNS_RCODE_NOERROR && (flags & DNS_FLAG_AA) &&
	          notified == before + 1 && notified_serial == 7,
	      "NOTIFY for a pending zone from its primary: NOERROR, AA, refresh started");
	client.remote = &other;
	len = auth_answer(&view, &client, query, qlen, resp, sizeof(resp), &qctx, NULL);
	CHECK(len > 12 && (wire_read_u16(resp + 2) & 0xf) == DNS_RCODE_NOTAUTH &&
	          notified == before + 1,
	      "NOTIFY for a pending zone from another address: NOTAUTH");
	zone_set_free(set);
}

int main(void)
{
	zones = zone_set_new();
	zone_t *zone = NULL;
	char err[256] = "";
	int ret = zone_load("auth.test", "zones/auth/auth.test.zone", &zone, err, sizeof(err));
	CHECK(ret == 0, "zone loads: %s", err);
	if (ret != 0)
		return unit_finish("test_auth");
	CHECK(zone_set_add(zones, zone, &(zone_set_entry_t){0}) == 0, "zone added");
	test_answers();
	test_tcp();
	test_axfr();
	test_ixfr();
	test_identity();
	test_notify_and_expire();
	test_pending_zones();
	zone_set_free(zones);
	return unit_finish("test_auth");
}
