/*
 * The secondary's wire code (xfr/msg.c): RFC 1982 serial arithmetic, SOA replies, the AXFR
 * receiver (message rules, limits), IXFR answers (up to date, whole zone, diffs) and applying
 * diffs to a held version, and the file writer read back by zone_load().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dns/dname.h"
#include "dns/wire.h"
#include "unit.h"
#include "xfr/msg.h"
#include "zone/zone.h"

static uint8_t apex[DNS_DNAME_MAXLEN];

/* A reply message builder: header, optional question, records given as wire pieces. */
typedef struct {
	uint8_t buf[4096];
	size_t len;
	uint16_t an;
} msg_t;

static void msg_start(msg_t *m, uint16_t id, uint16_t qtype, bool question, uint16_t flags)
{
	memset(m, 0, sizeof(*m));
	wire_write_u16(m->buf, id);
	wire_write_u16(m->buf + 2, (uint16_t)(DNS_FLAG_QR | DNS_FLAG_AA | flags));
	wire_write_u16(m->buf + 4, question ? 1 : 0);
	m->len = DNS_HEADER_LEN;
	if (question) {
		size_t n = dname_len(apex);
		memcpy(m->buf + m->len, apex, n);
		m->len += n;
		wire_write_u16(m->buf + m->len, qtype);
		wire_write_u16(m->buf + m->len + 2, DNS_CLASS_IN);
		m->len += 4;
	}
}

static void msg_rr(msg_t *m, const char *owner, uint16_t type, const uint8_t *rdata, uint16_t rdlen)
{
	uint8_t name[DNS_DNAME_MAXLEN];
	int n = dname_from_str(owner, name);
	memcpy(m->buf + m->len, name, (size_t)n);
	m->len += (size_t)n;
	wire_write_u16(m->buf + m->len, type);
	wire_write_u16(m->buf + m->len + 2, DNS_CLASS_IN);
	wire_write_u32(m->buf + m->len + 4, 300);
	wire_write_u16(m->buf + m->len + 8, rdlen);
	memcpy(m->buf + m->len + 10, rdata, rdlen);
	m->len += 10 + rdlen;
	wire_write_u16(m->buf + 6, ++m->an);
}

/* SOA rdata "ns.x.test. admin.x.test. SERIAL 3600 600 86400 300", the names compressed to
 * point at the question's name when @p compressed. */
static uint16_t soa_rdata(uint8_t *out, uint32_t serial, bool compressed)
{
	size_t p = 0;
	if (compressed) {
		static const uint8_t names[] = {2,   'n', 's', 0xc0, 12,   5, 'a',
		                                'd', 'm', 'i', 'n',  0xc0, 12};
		memcpy(out, names, sizeof(names));
		p = sizeof(names);
	} else {
		static const uint8_t names[] = {2,   'n', 's', 1,   'x', 4,   't', 'e', 's',
		                                't', 0,   5,   'a', 'd', 'm', 'i', 'n', 1,
		                                'x', 4,   't', 'e', 's', 't', 0};
		memcpy(out, names, sizeof(names));
		p = sizeof(names);
	}
	uint32_t v[5] = {serial, 3600, 600, 86400, 300};
	for (int i = 0; i < 5; i++)
		wire_write_u32(out + p + 4 * i, v[i]);
	return (uint16_t)(p + 20);
}

static void put_soa(msg_t *m, uint32_t serial)
{
	uint8_t rd[128];
	msg_rr(m, "x.test.", DNS_TYPE_SOA, rd, soa_rdata(rd, serial, false));
}

static void put_a(msg_t *m, const char *owner, uint8_t last)
{
	uint8_t rd[4] = {192, 0, 2, last};
	msg_rr(m, owner, DNS_TYPE_A, rd, 4);
}

static void put_ns(msg_t *m)
{
	/* "ns" + pointer to the question's name: compressed, must be expanded. */
	uint8_t rd[] = {2, 'n', 's', 0xc0, 12};
	msg_rr(m, "x.test.", DNS_TYPE_NS, rd, sizeof(rd));
}

static void test_serials(void)
{
	CHECK(xfr_serial_gt(2, 1) && !xfr_serial_gt(1, 2) && !xfr_serial_gt(5, 5), "simple");
	CHECK(xfr_serial_gt(1, 0xffffffffu) && !xfr_serial_gt(0xffffffffu, 1), "wrap-around");
	CHECK(!xfr_serial_gt(0x80000000u, 0) && !xfr_serial_gt(0, 0x80000000u), "undefined pair");
}

static void test_soa_reply(void)
{
	msg_t m;
	xfr_soa_t soa;
	char err[160];
	uint8_t rd[128];
	msg_start(&m, 7, DNS_TYPE_SOA, true, 0);
	msg_rr(&m, "x.test.", DNS_TYPE_SOA, rd, soa_rdata(rd, 99, true));
	CHECK(xfr_soa_reply(m.buf, m.len, 7, apex, &soa, err, sizeof(err)) == 0 &&
	          soa.serial == 99 && soa.expire == 86400,
	      "SOA reply with compressed names: %s", err);
	CHECK(xfr_soa_reply(m.buf, m.len, 8, apex, &soa, err, sizeof(err)) == -1, "wrong id");
	msg_start(&m, 7, DNS_TYPE_SOA, true, DNS_FLAG_TC);
	CHECK(xfr_soa_reply(m.buf, m.len, 7, apex, &soa, err, sizeof(err)) == 1,
	      "TC: ask over TCP");
	msg_start(&m, 7, DNS_TYPE_SOA, true, DNS_RCODE_REFUSED);
	CHECK(xfr_soa_reply(m.buf, m.len, 7, apex, &soa, err, sizeof(err)) == -1 &&
	          strstr(err, "rcode 5"),
	      "REFUSED: %s", err);
}

static int write_and_load(const xfr_rx_t *rx, zone_t **zone)
{
	char path[] = "/tmp/test_xfr_XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	CHECK(f != NULL && xfr_rx_write(rx, f) == 0 && fclose(f) == 0, "written");
	char err[512] = "";
	int ret = zone_load("x.test.", path, zone, err, sizeof(err));
	CHECK(ret == 0, "the written zone loads: %s", err);
	unlink(path);
	return ret;
}

static void test_axfr(void)
{
	msg_t m;
	xfr_rx_t rx;
	xfr_rx_init(&rx, apex, 11, 1 << 20, 100);
	msg_start(&m, 11, DNS_TYPE_AXFR, true, 0);
	put_soa(&m, 5);
	put_ns(&m);
	CHECK(xfr_rx_feed(&rx, m.buf, m.len) == 0, "first message: more to come");
	msg_start(&m, 11, DNS_TYPE_AXFR, false, 0);
	put_a(&m, "ns.x.test.", 1);
	put_a(&m, "www.x.test.", 2);
	put_soa(&m, 5);
	CHECK(xfr_rx_feed(&rx, m.buf, m.len) == 1 && rx.records == 4 && rx.soa.serial == 5,
	      "second message closes: %s", rx.err);
	CHECK(xfr_rx_feed(&rx, m.buf, m.len) == -1, "nothing after the end");
	zone_t *zone = NULL;
	if (write_and_load(&rx, &zone) == 0) {
		CHECK(zone->serial == 5 && zone->n_records == 4, "serial %u, %zu records",
		      zone->serial, zone->n_records);
		uint8_t ns[DNS_DNAME_MAXLEN];
		int n = dname_from_str("ns.x.test.", ns);
		const zone_node_t *node = zone_find_node(zone, ns, (size_t)n);
		CHECK(node != NULL && zone_node_rrset(node, DNS_TYPE_A) != NULL, "glue kept");
	}
	/* IXFR against the loaded version: up to date, diffs, a diff that does not apply. */
	xfr_rx_t ix, whole;
	xfr_rx_init_ixfr(&ix, apex, 12, 1 << 20, 100, 5);
	msg_start(&m, 12, DNS_TYPE_IXFR, true, 0);
	put_soa(&m, 5);
	CHECK(xfr_rx_feed(&ix, m.buf, m.len) == 1 && ix.mode == XFR_RX_UPTODATE, "single SOA");
	xfr_rx_free(&ix);

	xfr_rx_init_ixfr(&ix, apex, 13, 1 << 20, 100, 5);
	msg_start(&m, 13, DNS_TYPE_IXFR, true, 0);
	put_soa(&m, 7);
	put_soa(&m, 5);
	put_a(&m, "www.x.test.", 2); /* deleted */
	put_soa(&m, 6);
	put_a(&m, "new.x.test.", 6);
	put_soa(&m, 6);
	put_soa(&m, 7);
	put_a(&m, "www.x.test.", 7);
	put_soa(&m, 7);
	CHECK(xfr_rx_feed(&ix, m.buf, m.len) == 1 && ix.mode == XFR_RX_IXFR && ix.n_diffs == 2,
	      "two chained diffs: %s", ix.err);
	if (zone != NULL && ix.mode == XFR_RX_IXFR) {
		CHECK(xfr_rx_apply(&ix, zone, &whole) == 0, "diffs apply: %s", whole.err);
		zone_t *next = NULL;
		if (write_and_load(&whole, &next) == 0) {
			CHECK(next->serial == 7 && next->n_records == 5, "serial %u, %zu records",
			      next->serial, next->n_records);
			zone_unref(next);
		}
		xfr_rx_free(&whole);
	}
	xfr_rx_free(&ix);

	xfr_rx_init_ixfr(&ix, apex, 14, 1 << 20, 100, 5);
	msg_start(&m, 14, DNS_TYPE_IXFR, true, 0);
	put_soa(&m, 6);
	put_soa(&m, 5);
	put_a(&m, "nothere.x.test.", 9);
	put_soa(&m, 6);
	put_soa(&m, 6);
	CHECK(xfr_rx_feed(&ix, m.buf, m.len) == 1, "received: %s", ix.err);
	if (zone != NULL)
		CHECK(xfr_rx_apply(&ix, zone, &whole) == -1 && strstr(whole.err, "do not hold"),
		      "a deletion of a record we do not hold: %s", whole.err);
	xfr_rx_free(&whole);
	xfr_rx_free(&ix);

	xfr_rx_init_ixfr(&ix, apex, 15, 1 << 20, 100, 5);
	msg_start(&m, 15, DNS_TYPE_IXFR, true, 0);
	put_soa(&m, 6);
	put_soa(&m, 4); /* not our serial */
	put_soa(&m, 6);
	put_soa(&m, 6);
	CHECK(xfr_rx_feed(&ix, m.buf, m.len) == -1 || ix.mode != XFR_RX_IXFR,
	      "diffs from another serial are not taken as ours");
	xfr_rx_free(&ix);
	zone_unref(zone);
	xfr_rx_free(&rx);
}

static void test_limits_and_rules(void)
{
	msg_t m;
	xfr_rx_t rx;
	xfr_rx_init(&rx, apex, 21, 1 << 20, 2);
	msg_start(&m, 21, DNS_TYPE_AXFR, true, 0);
	put_soa(&m, 1);
	put_ns(&m);
	put_a(&m, "ns.x.test.", 1);
	put_soa(&m, 1);
	CHECK(xfr_rx_feed(&rx, m.buf, m.len) == -1 && strstr(rx.err, "max-records"),
	      "max-records: %s", rx.err);
	xfr_rx_free(&rx);

	xfr_rx_init(&rx, apex, 22, 100, 100);
	CHECK(xfr_rx_feed(&rx, m.buf, m.len) == -1 && strstr(rx.err, "max-transfer-size"),
	      "max-transfer-size: %s", rx.err);
	xfr_rx_free(&rx);

	xfr_rx_init(&rx, apex, 23, 1 << 20, 100);
	msg_start(&m, 23, DNS_TYPE_AXFR, true, 0);
	put_a(&m, "www.x.test.", 1);
	CHECK(xfr_rx_feed(&rx, m.buf, m.len) == -1, "must start with the SOA");
	xfr_rx_free(&rx);

	xfr_rx_init(&rx, apex, 24, 1 << 20, 100);
	msg_start(&m, 24, DNS_TYPE_AXFR, true, 0);
	put_soa(&m, 1);
	put_a(&m, "www.other.test.", 1);
	CHECK(xfr_rx_feed(&rx, m.buf, m.len) == -1 && strstr(rx.err, "outside"),
	      "records outside the zone: %s", rx.err);
	xfr_rx_free(&rx);

	xfr_rx_init(&rx, apex, 25, 1 << 20, 100);
	msg_start(&m, 25, DNS_TYPE_AXFR, true, 0);
	put_soa(&m, 1);
	put_soa(&m, 2);
	CHECK(xfr_rx_feed(&rx, m.buf, m.len) == -1, "closing SOA with another serial");
	xfr_rx_free(&rx);

	xfr_rx_init(&rx, apex, 26, 1 << 20, 100);
	msg_start(&m, 27, DNS_TYPE_AXFR, true, 0);
	put_soa(&m, 1);
	CHECK(xfr_rx_feed(&rx, m.buf, m.len) == -1, "another id");
	xfr_rx_free(&rx);
}

static void test_queries(void)
{
	uint8_t buf[512], rd[128];
	size_t n = xfr_query_write(buf, sizeof(buf), 9, apex, DNS_TYPE_AXFR, false, 0, NULL, 0);
	CHECK(n == DNS_HEADER_LEN + 8 + 4 && wire_read_u16(buf + 4) == 1 &&
	          wire_read_u16(buf + n - 4) == DNS_TYPE_AXFR,
	      "AXFR query");
	uint16_t rdlen = soa_rdata(rd, 3, false);
	n = xfr_query_write(buf, sizeof(buf), 9, apex, 0, true, 60, rd, rdlen);
	CHECK(n > 0 &&
	          ((wire_read_u16(buf + 2) & DNS_OPCODE_MASK) >> DNS_OPCODE_SHIFT) ==
	              DNS_OPCODE_NOTIFY &&
	          wire_read_u16(buf + 6) == 1,
	      "NOTIFY with the SOA in answer");
	n = xfr_ixfr_query_write(buf, sizeof(buf), 9, apex, 60, rd, rdlen);
	CHECK(n > 0 && wire_read_u16(buf + 8) == 1, "IXFR with our SOA in authority");
	uint8_t rcode = 0;
	wire_write_u16(buf + 2, (uint16_t)(DNS_FLAG_QR | DNS_OPCODE_NOTIFY << DNS_OPCODE_SHIFT));
	CHECK(xfr_notify_reply(buf, n, 9, &rcode) && rcode == 0, "NOTIFY reply recognised");
	CHECK(!xfr_notify_reply(buf, n, 10, &rcode), "other id");
}

int main(void)
{
	CHECK(dname_from_str("x.test.", apex) > 0, "apex");
	test_serials();
	test_soa_reply();
	test_axfr();
	test_limits_and_rules();
	test_queries();
	return unit_finish("test_xfr");
}
