/*
 * Unit tests for gslb/pathfmt.c: site table and demand round trips, the byte layout, and every
 * rejection the decoders promise (each with the reason they give), including header counts
 * that would overflow a size computation; the encoders refuse what the decoders reject.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/alloc.h"
#include "base/err.h"
#include "gslb/pathfmt.h"
#include "unit.h"

static uint64_t key4(const char *text)
{
	uint8_t a[4];
	if (inet_pton(AF_INET, text, a) != 1)
		abort();
	return gslb_pathfmt_key(AF_INET, a, 32);
}

static uint64_t key6(const char *text)
{
	uint8_t a[16];
	if (inet_pton(AF_INET6, text, a) != 1)
		abort();
	return gslb_pathfmt_key(AF_INET6, a, 64);
}

static gslb_path_row_t row(uint64_t prefix, uint8_t plen, uint16_t rtt)
{
	return (gslb_path_row_t){.prefix = prefix,
	                         .plen = plen,
	                         .loss = 10,
	                         .rtt = rtt,
	                         .hops = 7,
	                         .answered = 3,
	                         .age_s = 42};
}

typedef struct {
	gslb_path_row_t r4[4], r6[2];
	gslb_path_table_t t;
} table_t;

static void table_init(table_t *s)
{
	memset(s, 0, sizeof(*s));
	s->r4[0] = row(key4("10.0.0.0"), 24, 100);
	s->r4[1] = row(key4("10.0.1.0"), 24, 0);
	s->r4[2] = row(key4("10.0.1.0"), 25, 2000);
	s->r4[3] = row(key4("192.0.2.0"), 24, GSLB_PATHFMT_RTT_NONE);
	s->r4[3].answered = 0;
	s->r4[3].loss = 100;
	s->r6[0] = row(key6("2001:db8::"), 48, 550);
	s->r6[1] = row(key6("2001:db8:1::"), 48, 65534);
	s->r6[1].age_s = 65535;
	strcpy(s->t.name, "dc-1.eu_west");
	s->t.generated_ms = 1764660000123ull;
	s->t.rows4 = s->r4;
	s->t.n4 = 4;
	s->t.rows6 = s->r6;
	s->t.n6 = 2;
}

/* Encode @p t into a new buffer; *len its size (0 when the encoder refused). */
static uint8_t *encode(const gslb_path_table_t *t, size_t *len)
{
	size_t size = gslb_pathfmt_table_size(t);
	uint8_t *buf = xmalloc(size + 16);
	*len = gslb_pathfmt_encode_table(t, buf, size + 16);
	return buf;
}

static bool rows_equal(const gslb_path_row_t *a, const gslb_path_row_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (a[i].prefix != b[i].prefix || a[i].plen != b[i].plen ||
		    a[i].loss != b[i].loss || a[i].rtt != b[i].rtt || a[i].hops != b[i].hops ||
		    a[i].answered != b[i].answered || a[i].age_s != b[i].age_s)
			return false;
	}
	return true;
}

static void test_key(void)
{
	uint8_t a4[4] = {10, 1, 2, 255};
	CHECK(gslb_pathfmt_key(AF_INET, a4, 24) == 0x0a010200ull << 32, "IPv4 /24 key");
	CHECK(gslb_pathfmt_key(AF_INET, a4, 32) == 0x0a0102ffull << 32, "IPv4 /32 key");
	CHECK(gslb_pathfmt_key(AF_INET, a4, 0) == 0, "IPv4 /0 key");
	CHECK(gslb_pathfmt_key(AF_INET, a4, 99) == 0x0a0102ffull << 32, "IPv4 plen clamps to 32");
	uint8_t a6[16] = {0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34, 0x56, 0x78, 0xff};
	CHECK(gslb_pathfmt_key(AF_INET6, a6, 48) == 0x20010db812340000ull, "IPv6 /48 key");
	CHECK(gslb_pathfmt_key(AF_INET6, a6, 64) == 0x20010db812345678ull, "IPv6 /64 key");
	CHECK(gslb_pathfmt_key(AF_INET6, a6, 128) == 0x20010db812345678ull, "IPv6 /128 = /64");
	CHECK(gslb_pathfmt_key(AF_INET6, a6, 1) == 0, "IPv6 /1 key");
}

static void test_table_round_trip(void)
{
	table_t s;
	table_init(&s);
	size_t len;
	uint8_t *buf = encode(&s.t, &len);
	CHECK(len == 32 + 12 + 4 * 12 + 2 * 16, "encoded size %zu", len);
	CHECK(len == gslb_pathfmt_table_size(&s.t), "size function agrees");
	CHECK(memcmp(buf, "STPT\x01\x00\x00\x00", 8) == 0, "magic, version, flags");
	CHECK(buf[24] == 12 && memcmp(buf + 32, "dc-1.eu_west", 12) == 0, "name");
	static const uint8_t row0[12] = {10, 0, 0, 0, 24, 10, 0, 100, 7, 3, 0, 42};
	CHECK(memcmp(buf + 44, row0, 12) == 0, "first IPv4 row bytes");
	gslb_path_table_t out;
	char err[128] = "";
	int ret = gslb_pathfmt_decode_table(buf, len, 6, &out, err, sizeof(err));
	CHECK(ret == 0, "decode: %s", err);
	if (ret == 0) {
		CHECK(strcmp(out.name, s.t.name) == 0, "name %s", out.name);
		CHECK(out.generated_ms == s.t.generated_ms, "generated_ms");
		CHECK(out.n4 == 4 && rows_equal(out.rows4, s.r4, 4), "IPv4 rows");
		CHECK(out.n6 == 2 && rows_equal(out.rows6, s.r6, 2), "IPv6 rows");
		gslb_pathfmt_table_free(&out);
	}
	CHECK(gslb_pathfmt_encode_table(&s.t, buf, len - 1) == 0, "short buffer refused");
	free(buf);

	table_t e;
	table_init(&e);
	e.t.n4 = e.t.n6 = 0;
	buf = encode(&e.t, &len);
	ret = gslb_pathfmt_decode_table(buf, len, 0, &out, err, sizeof(err));
	CHECK(ret == 0 && out.n4 == 0 && out.n6 == 0, "empty table: %s", err);
	gslb_pathfmt_table_free(&out);
	free(buf);
}

/* A table the encoder must refuse, and the decoder too once its bytes are forced in. */
typedef struct {
	const char *what;
	void (*mutate)(table_t *s);
	const char *reason;
} bad_table_t;

static void unsorted4(table_t *s)
{
	s->r4[1].prefix = key4("9.0.0.0");
}
static void duplicate4(table_t *s)
{
	s->r4[2].plen = 24;
}
static void unsorted6(table_t *s)
{
	s->r6[1].prefix = key6("2001:db7::");
}
static void host_bits4(table_t *s)
{
	s->r4[0].prefix = key4("10.0.0.1");
}
static void host_bits6(table_t *s)
{
	s->r6[0].prefix = key6("2001:db8:0:1::");
}
static void plen_short4(table_t *s)
{
	s->r4[0].plen = 7;
	s->r4[0].prefix = 0;
}
static void plen_long4(table_t *s)
{
	s->r4[3].plen = 33;
}
static void plen_short6(table_t *s)
{
	s->r6[0].plen = 15;
	s->r6[0].prefix = 0;
}
static void plen_long6(table_t *s)
{
	s->r6[1].plen = 65;
}
static void loss(table_t *s)
{
	s->r4[2].loss = 101;
}
static void answered_no_rtt(table_t *s)
{
	s->r4[3].answered = 1;
}

static const bad_table_t bad_rows[] = {
    {"IPv4 unsorted", unsorted4, "IPv4 row 1 (9.0.0.0/24): prefixes out of order"},
    {"IPv4 duplicate", duplicate4, "IPv4 row 2 (10.0.1.0/24): duplicate prefix"},
    {"IPv6 unsorted", unsorted6, "IPv6 row 1 (2001:db7::/48): prefixes out of order"},
    {"IPv4 host bits", host_bits4, "IPv4 row 0 (10.0.0.1/24): host bits set"},
    {"IPv6 host bits", host_bits6, "IPv6 row 0 (2001:db8:0:1::/48): host bits set"},
    {"IPv4 plen 7", plen_short4, "IPv4 row 0 (0.0.0.0/7): prefix length out of range (8..32)"},
    {"IPv4 plen 33", plen_long4, "prefix length out of range (8..32)"},
    {"IPv6 plen 15", plen_short6, "IPv6 row 0 (::/15): prefix length out of range (16..64)"},
    {"IPv6 plen 65", plen_long6, "prefix length out of range (16..64)"},
    {"loss 101", loss, "IPv4 row 2 (10.0.1.0/25): loss above 100 percent"},
    {"answered, no rtt", answered_no_rtt, "answered samples but no RTT"},
};

/* Write row values without the encoder's checks: the bytes a broken agent would send. */
static void force_rows(const table_t *s, uint8_t *buf)
{
	uint8_t *p = buf + 32 + strlen(s->t.name);
	for (size_t i = 0; i < s->t.n4; i++, p += 12) {
		const gslb_path_row_t *r = &s->r4[i];
		uint32_t v = htonl((uint32_t)(r->prefix >> 32));
		memcpy(p, &v, 4);
		uint8_t vals[8] = {
		    r->plen, r->loss,     (uint8_t)(r->rtt >> 8),   (uint8_t)r->rtt,
		    r->hops, r->answered, (uint8_t)(r->age_s >> 8), (uint8_t)r->age_s};
		memcpy(p + 4, vals, 8);
	}
	for (size_t i = 0; i < s->t.n6; i++, p += 16) {
		const gslb_path_row_t *r = &s->r6[i];
		for (int b = 0; b < 8; b++)
			p[b] = (uint8_t)(r->prefix >> (56 - 8 * b));
		uint8_t vals[8] = {
		    r->plen, r->loss,     (uint8_t)(r->rtt >> 8),   (uint8_t)r->rtt,
		    r->hops, r->answered, (uint8_t)(r->age_s >> 8), (uint8_t)r->age_s};
		memcpy(p + 8, vals, 8);
	}
}

static void expect_reject(const uint8_t *buf, size_t len, size_t max_rows, const char *what,
                          const char *reason)
{
	gslb_path_table_t out;
	char err[160] = "";
	int ret = gslb_pathfmt_decode_table(buf, len, max_rows, &out, err, sizeof(err));
	CHECK(ret == STEER_EINVAL, "%s: decoder accepted", what);
	CHECK(strstr(err, reason) != NULL, "%s: error '%s', expected '%s'", what, err, reason);
	CHECK(out.rows4 == NULL && out.rows6 == NULL && out.n4 == 0, "%s: nothing to free", what);
}

static void test_table_bad_rows(void)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(bad_rows); i++) {
		const bad_table_t *b = &bad_rows[i];
		table_t good, s;
		table_init(&good);
		table_init(&s);
		b->mutate(&s);
		size_t len;
		uint8_t *buf = encode(&s.t, &len);
		CHECK(len == 0, "%s: encoder accepted", b->what);
		char err[160] = "";
		CHECK(gslb_pathfmt_check_table(&s.t, err, sizeof(err)) == STEER_EINVAL &&
		          strstr(err, b->reason),
		      "%s: check says '%s'", b->what, err);
		free(buf);
		buf = encode(&good.t, &len);
		force_rows(&s, buf);
		expect_reject(buf, len, 100, b->what, b->reason);
		free(buf);
	}
}

static void test_table_bad_header(void)
{
	table_t s;
	table_init(&s);
	size_t len;
	uint8_t *buf = encode(&s.t, &len);
	uint8_t *copy = xmalloc(len + 8);
	struct {
		const char *what;
		size_t offset;
		uint8_t value;
		const char *reason;
	} bytes[] = {
	    {"magic", 0, 'X', "bad magic"},
	    {"version", 4, 2, "version 2"},
	    {"flags", 5, 1, "flags"},
	    {"reserved", 7, 1, "reserved"},
	    {"pad", 31, 1, "padding"},
	    {"name length 0", 24, 0, "name length 0"},
	    {"name length 64", 24, 64, "name length 64"},
	    {"name length 11", 24, 11, "1 bytes after the last row"},
	    {"name length 13", 24, 13, "truncated"},
	    {"name charset", 35, '/', "datacenter name"},
	    {"name NUL", 35, 0, "datacenter name"},
	    {"n4 + 1", 19, 5, "truncated"},
	    {"n4 - 1", 19, 3, "bytes after the last row"},
	    {"n6 huge", 20, 0xff, "rows, more than the limit of 100"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(bytes); i++) {
		memcpy(copy, buf, len);
		copy[bytes[i].offset] = bytes[i].value;
		expect_reject(copy, len, 100, bytes[i].what, bytes[i].reason);
	}
	for (size_t cut = 0; cut < len; cut++) {
		char what[32];
		snprintf(what, sizeof(what), "cut at %zu", cut);
		expect_reject(buf, cut, 100, what, cut < 32 ? "truncated header" : "truncated");
	}
	memcpy(copy, buf, len);
	copy[len] = 0;
	expect_reject(copy, len + 1, 100, "trailing byte", "1 bytes after the last row");
	expect_reject(buf, len, 5, "max rows", "6 rows, more than the limit of 5");

	/* Counts whose byte size overflows 32 bits (and 64-bit n4 * 12 on a 32-bit size_t). */
	memcpy(copy, buf, len);
	memset(copy + 16, 0xff, 8);
	expect_reject(copy, len, SIZE_MAX, "n4 = n6 = 2^32-1", "truncated");
	memset(copy + 16, 0, 8);
	copy[16] = 0x15;
	copy[17] = 0x55;
	copy[18] = 0x55;
	copy[19] = 0x56; /* 0x15555556 * 12 wraps to 8 in 32 bits */
	expect_reject(copy, len, SIZE_MAX, "n4 * 12 wraps", "truncated");
	free(copy);
	free(buf);

	const char *names[] = {"", "a b", "dc/1", "d\xc3\xa9"};
	for (size_t i = 0; i < STEER_ARRAY_LEN(names); i++) {
		strcpy(s.t.name, names[i]);
		buf = encode(&s.t, &len);
		CHECK(len == 0, "name '%s' refused", names[i]);
		free(buf);
	}
}

/* ---- demand ----------------------------------------------------------------------------- */

static gslb_demand_row_t demand(int family, const char *prefix, uint8_t plen, const char *probe,
                                uint8_t flags, uint32_t volume)
{
	gslb_demand_row_t r = {.family = (uint8_t)(family == AF_INET ? 4 : 6),
	                       .plen = plen,
	                       .flags = flags,
	                       .volume = volume};
	if (inet_pton(family, prefix, r.prefix) != 1 || inet_pton(family, probe, r.probe) != 1)
		abort();
	return r;
}

typedef struct {
	gslb_demand_row_t r[4];
	gslb_demand_t d;
} demand_t;

static void demand_init(demand_t *s)
{
	s->r[0] = demand(AF_INET, "10.0.0.0", 24, "10.0.0.53", 0, 1000);
	s->r[1] = demand(AF_INET, "198.51.100.0", 24, "198.51.100.1", GSLB_DEMAND_ECS, 7);
	s->r[2] = demand(AF_INET6, "2001:db8::", 48, "2001:db8::53", GSLB_DEMAND_URGENT, 0);
	s->r[3] = demand(AF_INET6, "2001:db8:1::", 48, "2001:db8:1::1",
	                 GSLB_DEMAND_ECS | GSLB_DEMAND_URGENT, UINT32_MAX);
	s->d = (gslb_demand_t){.generated_ms = 99, .rows = s->r, .n = 4};
}

static uint8_t *encode_demand(const gslb_demand_t *d, size_t *len)
{
	size_t size = gslb_pathfmt_demand_size(d);
	uint8_t *buf = xmalloc(size);
	*len = gslb_pathfmt_encode_demand(d, buf, size);
	return buf;
}

static void expect_demand_reject(const uint8_t *buf, size_t len, size_t max_rows, const char *what,
                                 const char *reason)
{
	gslb_demand_t out;
	char err[160] = "";
	int ret = gslb_pathfmt_decode_demand(buf, len, max_rows, &out, err, sizeof(err));
	CHECK(ret == STEER_EINVAL, "%s: decoder accepted", what);
	CHECK(strstr(err, reason) != NULL, "%s: error '%s', expected '%s'", what, err, reason);
	CHECK(out.rows == NULL && out.n == 0, "%s: nothing to free", what);
}

static void test_demand_round_trip(void)
{
	demand_t s;
	demand_init(&s);
	size_t len;
	uint8_t *buf = encode_demand(&s.d, &len);
	CHECK(len == 24 + 4 * 40, "demand size %zu", len);
	CHECK(memcmp(buf, "STPD\x01", 5) == 0, "demand magic");
	static const uint8_t row1[8] = {4, 24, 1, 0, 0, 0, 0, 7};
	CHECK(memcmp(buf + 24 + 40, row1, 8) == 0, "second row bytes");
	gslb_demand_t out;
	char err[128] = "";
	int ret = gslb_pathfmt_decode_demand(buf, len, 4, &out, err, sizeof(err));
	CHECK(ret == 0, "demand decode: %s", err);
	if (ret == 0) {
		CHECK(out.generated_ms == 99 && out.n == 4, "demand header");
		for (size_t i = 0; i < 4; i++) {
			const gslb_demand_row_t *a = &out.rows[i], *b = &s.r[i];
			CHECK(a->family == b->family && a->plen == b->plen &&
			          a->flags == b->flags && a->volume == b->volume &&
			          !memcmp(a->prefix, b->prefix, 16) &&
			          !memcmp(a->probe, b->probe, 16),
			      "demand row %zu", i);
		}
		gslb_pathfmt_demand_free(&out);
	}
	expect_demand_reject(buf, len, 3, "demand max rows", "4 rows, more than the limit of 3");
	for (size_t cut = 0; cut < len; cut++)
		expect_demand_reject(buf, cut, 100, "demand cut", "truncated");
	uint8_t *copy = xmalloc(len + 1);
	memcpy(copy, buf, len);
	copy[len] = 0;
	expect_demand_reject(copy, len + 1, 100, "demand trailing", "1 bytes after the last row");
	struct {
		const char *what;
		size_t offset;
		uint8_t value;
		const char *reason;
	} bytes[] = {
	    {"magic", 3, 'T', "bad magic"},
	    {"version", 4, 0, "version 0"},
	    {"flags", 5, 0x80, "flags"},
	    {"reserved", 23, 1, "reserved"},
	    {"n huge", 16, 0xff, "rows, more than the limit of 100"},
	    {"family", 24, 5, "demand row 0 (?/24): family must be 4 or 6"},
	    {"row reserved", 24 + 3, 1, "demand row 0: reserved byte"},
	    {"row flags", 24 + 2, 4, "demand row 0 (10.0.0.0/24): unknown flags"},
	    {"plen", 24 + 1, 7, "prefix length out of range (8..32)"},
	    {"plen6", 24 + 80 + 1, 65, "demand row 2 (2001:db8::/65): prefix length"},
	    {"host bits", 24 + 8 + 3, 1, "host bits set"},
	    {"v4 tail", 24 + 8 + 5, 1, "IPv4 address beyond 4 bytes"},
	    {"probe outside", 24 + 24 + 2, 1, "demand row 0 (10.0.0.0/24): probe address outside"},
	    {"v6 before v4", 24 + 40, 6, "prefixes out of order"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(bytes); i++) {
		memcpy(copy, buf, len);
		copy[bytes[i].offset] = bytes[i].value;
		expect_demand_reject(copy, len, 100, bytes[i].what, bytes[i].reason);
	}
	memcpy(copy, buf, len);
	memcpy(copy + 24, buf + 64, 40);
	memcpy(copy + 64, buf + 24, 40);
	expect_demand_reject(copy, len, 100, "demand swapped rows",
	                     "demand row 1 (10.0.0.0/24): prefixes out of order");
	free(copy);
	free(buf);

	demand_init(&s);
	s.r[3] = s.r[2];
	buf = encode_demand(&s.d, &len);
	CHECK(len == 0, "duplicate demand row refused by the encoder");
	char why[128] = "";
	CHECK(gslb_pathfmt_check_demand(&s.d, why, sizeof(why)) == STEER_EINVAL &&
	          strstr(why, "demand row 3 (2001:db8::/48): duplicate prefix"),
	      "duplicate: '%s'", why);
	free(buf);
}

int main(void)
{
	test_key();
	test_table_round_trip();
	test_table_bad_rows();
	test_table_bad_header();
	test_demand_round_trip();
	return unit_finish("gslb_pathfmt");
}
