/*
 * The demand report: the query thread's ring (sampling, the dedupe cache, a full ring), the
 * control thread's map (drain, decay, bound, expiry) and its encoding, decoded back with the
 * real decoder of gslb/pathfmt.c.
 */
#include "gslb/demand.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/err.h"
#include "gslb/pathfmt.h"
#include "unit.h"

static void ip4(const char *text, uint8_t out[16])
{
	memset(out, 0, 16);
	CHECK(inet_pton(AF_INET, text, out) == 1, "parse %s", text);
}

static void ip6(const char *text, uint8_t out[16])
{
	CHECK(inet_pton(AF_INET6, text, out) == 1, "parse %s", text);
}

/* Encode @p m and decode it again with the real decoder: what an agent would see. */
static gslb_demand_t encode_decode(gslb_demand_map_t *m, uint64_t now_ms)
{
	size_t len = 0;
	uint8_t *buf = gslb_demand_encode(m, now_ms, 1700000000000ull, &len);
	gslb_demand_t d = {0};
	char err[256] = "";
	int ret = gslb_pathfmt_decode_demand(buf, len, 1u << 24, &d, err, sizeof(err));
	CHECK(ret == 0, "the encoded demand decodes: %s", err);
	CHECK(ret != 0 || d.generated_ms == 1700000000000ull, "generated_ms kept");
	free(buf);
	return d;
}

static void test_ecs_and_resolver(void)
{
	gslb_demand_ring_t *r = gslb_demand_ring_new(1);
	gslb_demand_map_t *m = gslb_demand_map_new(100);
	uint8_t ecs[16], resolver[16], v6[16], v6res[16];
	ip4("192.0.2.77", ecs);
	ip4("198.51.100.9", resolver);
	ip6("2001:db8:1:2::99", v6);
	ip6("2001:db8:1:2::53", v6res);
	gslb_demand_record(r, AF_INET, ecs, 24, NULL, GSLB_DEMAND_ECS);
	gslb_demand_record(r, AF_INET, resolver, 24, resolver, GSLB_DEMAND_URGENT);
	gslb_demand_record(r, AF_INET6, v6res, 48, v6res, 0);
	CHECK(gslb_demand_drain(m, r, 1000) == 3, "three reports in the ring");
	CHECK(gslb_demand_rows(m) == 3 && gslb_demand_changed(m), "three rows");

	gslb_demand_t d = encode_decode(m, 1000);
	CHECK(d.n == 3, "three rows on the wire, got %zu", d.n);
	if (d.n == 3) {
		/* sorted: IPv4 by prefix, then IPv6 */
		uint8_t want[16];
		ip4("192.0.2.0", want);
		CHECK(d.rows[0].family == 4 && d.rows[0].plen == 24 &&
		          memcmp(d.rows[0].prefix, want, 16) == 0 &&
		          d.rows[0].flags == GSLB_DEMAND_ECS,
		      "ECS row first, cut to /24");
		ip4("192.0.2.1", want);
		CHECK(memcmp(d.rows[0].probe, want, 16) == 0,
		      "an ECS prefix probes its first host");
		ip4("198.51.100.0", want);
		CHECK(memcmp(d.rows[1].prefix, want, 16) == 0 &&
		          d.rows[1].flags == GSLB_DEMAND_URGENT &&
		          memcmp(d.rows[1].probe, resolver, 16) == 0,
		      "the resolver row is urgent and probes the resolver");
		ip6("2001:db8:1::", want);
		CHECK(d.rows[2].family == 6 && d.rows[2].plen == 48 &&
		          memcmp(d.rows[2].prefix, want, 16) == 0 &&
		          memcmp(d.rows[2].probe, v6res, 16) == 0 && d.rows[2].volume == 1,
		      "IPv6 row /48 with its resolver");
	}
	gslb_pathfmt_demand_free(&d);
	CHECK(!gslb_demand_changed(m), "encoding clears the change flag");

	gslb_demand_row_t row;
	CHECK(gslb_demand_find(m, AF_INET, ecs, 24, 1000, &row) && row.flags == GSLB_DEMAND_ECS,
	      "find the ECS prefix by a client address");
	CHECK(!gslb_demand_find(m, AF_INET, ecs, 25, 1000, &row), "another length is another row");

	/* a probe outside the prefix, a bad length, a bad family are never trusted */
	uint8_t other[16];
	ip4("203.0.113.5", other);
	gslb_demand_record(r, AF_INET, ecs, 16, other, 0);
	gslb_demand_record(r, AF_INET, ecs, 7, resolver, 0);
	gslb_demand_record(r, AF_INET6, v6, 65, v6, 0);
	gslb_demand_record(r, 99, v6, 24, v6, 0);
	gslb_demand_record(NULL, AF_INET, ecs, 24, NULL, 0);
	CHECK(gslb_demand_drain(m, r, 1100) == 1, "only the /16 report is taken");
	d = encode_decode(m, 1100);
	CHECK(d.n == 4, "four rows now, got %zu", d.n);
	gslb_pathfmt_demand_free(&d);
	CHECK(gslb_demand_find(m, AF_INET, ecs, 16, 1100, &row) && row.probe[0] == 192 &&
	          row.probe[1] == 0 && row.probe[3] == 1,
	      "the foreign probe address became the prefix's first host");
	gslb_demand_map_free(m);
	gslb_demand_ring_free(r);
}

static void test_sampling_and_dedupe(void)
{
	gslb_demand_ring_t *r = gslb_demand_ring_new(16);
	gslb_demand_map_t *m = gslb_demand_map_new(100);
	uint8_t a[16];
	ip4("192.0.2.10", a);
	/* 1600 decisions of one prefix in well under a second: the first report at once, the
	 * rest added up in the cache (no second report within the second) */
	for (int i = 0; i < 1600; i++)
		gslb_demand_record(r, AF_INET, a, 24, a, 0);
	CHECK(gslb_demand_drain(m, r, 0) <= 2, "a flood of one prefix is one or two reports");
	gslb_demand_row_t row;
	CHECK(gslb_demand_find(m, AF_INET, a, 24, 0, &row) && row.volume >= 16 &&
	          row.volume <= 1600,
	      "volume counts sampled decisions times the sample: %u", row.volume);

	/* urgent decisions always get through the sampler, once each (deduplicated) */
	uint8_t b[16];
	ip4("203.0.113.1", b);
	for (int i = 0; i < 5; i++)
		gslb_demand_record(r, AF_INET, b, 24, b, GSLB_DEMAND_URGENT);
	CHECK(gslb_demand_drain(m, r, 0) == 1, "five urgent decisions are one report");
	CHECK(gslb_demand_find(m, AF_INET, b, 24, 0, &row) && row.flags == GSLB_DEMAND_URGENT,
	      "reported as urgent");

	/* many prefixes: each shows up, and the sampler keeps 1 in 16 of the non-urgent ones */
	gslb_demand_ring_t *r2 = gslb_demand_ring_new(16);
	for (int i = 0; i < 320; i++) {
		uint8_t c[16] = {10, (uint8_t)(i >> 8), (uint8_t)i, 1};
		gslb_demand_record(r2, AF_INET, c, 24, c, 0);
	}
	CHECK(gslb_demand_drain(m, r2, 0) == 20, "320 decisions at sample 16 are 20 reports");
	gslb_demand_ring_free(r2);
	gslb_demand_map_free(m);
	gslb_demand_ring_free(r);
}

static void test_full_ring(void)
{
	gslb_demand_ring_t *r = gslb_demand_ring_new(1);
	gslb_demand_map_t *m = gslb_demand_map_new(1u << 20);
	unsigned n = GSLB_DEMAND_RING_SLOTS + 100;
	for (unsigned i = 0; i < n; i++) {
		uint8_t c[16] = {10, (uint8_t)(i >> 8), (uint8_t)i, 1};
		gslb_demand_record(r, AF_INET, c, 24, c, 0);
	}
	CHECK(gslb_demand_ring_dropped(r) == 100, "a full ring drops and counts: %llu",
	      (unsigned long long)gslb_demand_ring_dropped(r));
	CHECK(gslb_demand_drain(m, r, 0) == GSLB_DEMAND_RING_SLOTS, "the ring holds its slots");
	CHECK(gslb_demand_drain(m, r, 0) == 0, "and is empty after a drain");
	gslb_demand_map_free(m);
	gslb_demand_ring_free(r);
}

static void test_decay_bound_expire(void)
{
	gslb_demand_map_t *m = gslb_demand_map_new(50);
	gslb_demand_ring_t *r = gslb_demand_ring_new(1000), *r1 = gslb_demand_ring_new(1);
	uint8_t hot[16];
	ip4("192.0.2.1", hot);
	for (int i = 0; i < 1000; i++)
		gslb_demand_record(r, AF_INET, hot, 24, hot, 0);
	gslb_demand_drain(m, r, 0);
	gslb_demand_row_t row;
	CHECK(gslb_demand_find(m, AF_INET, hot, 24, 0, &row) && row.volume == 1000,
	      "the hot prefix is there with its volume: %u", row.volume);
	CHECK(gslb_demand_find(m, AF_INET, hot, 24, GSLB_DEMAND_HALF_LIFE_MS, &row) &&
	          row.volume == 500,
	      "volume halves in a half-life: %u", row.volume);

	/* 200 prefixes into a map of 50: it stays bounded and keeps the hot one */
	for (unsigned i = 0; i < 200; i++) {
		uint8_t c[16] = {10, 0, (uint8_t)i, 7};
		gslb_demand_record(r1, AF_INET, c, 24, c, 0);
		if (i % 8 == 7)
			gslb_demand_drain(m, r1, 10);
	}
	gslb_demand_drain(m, r1, 10);
	CHECK(gslb_demand_rows(m) <= 50, "bounded at 50 rows: %zu", gslb_demand_rows(m));
	CHECK(gslb_demand_find(m, AF_INET, hot, 24, 10, &row), "the busiest prefix stays");
	gslb_demand_t d = encode_decode(m, 10);
	CHECK(d.n == gslb_demand_rows(m), "every row encodes");
	gslb_pathfmt_demand_free(&d);

	/* the map forgets what nobody asked for in an hour, and still finds the rest */
	gslb_demand_record(r1, AF_INET, hot, 24, hot, 0);
	CHECK(gslb_demand_drain(m, r1, GSLB_DEMAND_IDLE_MS) == 1, "the hot prefix again");
	gslb_demand_expire(m, GSLB_DEMAND_IDLE_MS + 15);
	CHECK(gslb_demand_rows(m) == 1 && gslb_demand_find(m, AF_INET, hot, 24, 0, &row),
	      "only the prefix seen within the hour stays: %zu", gslb_demand_rows(m));
	gslb_demand_expire(m, 2 * GSLB_DEMAND_IDLE_MS + 5);
	CHECK(gslb_demand_rows(m) == 0, "then none");
	d = encode_decode(m, 0);
	CHECK(d.n == 0, "an empty map encodes to an empty body");
	gslb_pathfmt_demand_free(&d);
	gslb_demand_map_free(m);
	gslb_demand_ring_free(r);
	gslb_demand_ring_free(r1);
}

/* Many rows through growth and backward-shift deletion: every key stays findable. */
static void test_map_consistency(void)
{
	gslb_demand_map_t *m = gslb_demand_map_new(100000);
	gslb_demand_ring_t *r = gslb_demand_ring_new(1);
	unsigned n = 20000;
	for (unsigned i = 0; i < n; i++) {
		uint8_t c[16] = {(uint8_t)(11 + (i >> 16)), (uint8_t)(i >> 8), (uint8_t)i, 1};
		gslb_demand_record(r, AF_INET, c, 24, c, 0);
		if (i % 512 == 511)
			gslb_demand_drain(m, r, i < n / 2 ? 0 : GSLB_DEMAND_IDLE_MS / 2);
	}
	gslb_demand_drain(m, r, GSLB_DEMAND_IDLE_MS / 2);
	CHECK(gslb_demand_rows(m) == n, "%u rows: %zu", n, gslb_demand_rows(m));
	/* the first half goes idle first */
	gslb_demand_expire(m, GSLB_DEMAND_IDLE_MS + 1);
	size_t found = 0, wrong = 0;
	for (unsigned i = 0; i < n; i++) {
		uint8_t c[16] = {(uint8_t)(11 + (i >> 16)), (uint8_t)(i >> 8), (uint8_t)i, 1};
		gslb_demand_row_t row;
		bool have = gslb_demand_find(m, AF_INET, c, 24, 0, &row);
		found += have;
		/* drains come every 512 records: the last one at time 0 took i < 9728 */
		wrong += have != (i >= 9728);
	}
	CHECK(wrong == 0 && found == gslb_demand_rows(m), "after expiry %zu rows, %zu misplaced",
	      found, wrong);
	gslb_demand_map_free(m);
	gslb_demand_ring_free(r);
}

int main(void)
{
	test_ecs_and_resolver();
	test_sampling_and_dedupe();
	test_full_ring();
	test_decay_bound_expire();
	test_map_consistency();
	return unit_finish("test_gslb_demand");
}
