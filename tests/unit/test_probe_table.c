/*
 * steer-probe's prefix table on a fake clock: the budget (never more than `rate` probes per
 * second, so 2,000 prefixes at 200/s and 3 samples take 30 s), urgent and hot rows first and
 * more often, the method fallback, the arithmetic of a measurement (min, EWMA, loss, hops from
 * the TTL), the merge of several nodes' demand and the published table.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "gslb/pathfmt.h"
#include "probe/table.h"
#include "unit.h"

static probe_table_opts_t opts(void)
{
	return (probe_table_opts_t){.rate = 200,
	                            .samples = 3,
	                            .interval = 60000,
	                            .hot_interval = 10000,
	                            .hot_share = 20,
	                            .smoothing = 30,
	                            .n_methods = 3,
	                            .max_rows = 1000000,
	                            .forget_after = 28ull * 86400 * 1000,
	                            .urgent_stale = 6000};
}

/* A demand row for 10.(i / 256).(i % 256).0/24 probing .53 in it. */
static gslb_demand_row_t row4(unsigned i, uint32_t volume, uint8_t flags)
{
	gslb_demand_row_t r = {.family = 4, .plen = 24, .flags = flags, .volume = volume};
	r.prefix[0] = 10;
	r.prefix[1] = (uint8_t)(i / 256);
	r.prefix[2] = (uint8_t)(i % 256);
	memcpy(r.probe, r.prefix, 4);
	r.probe[3] = 53;
	return r;
}

static void add_rows(probe_table_t *t, unsigned n, uint64_t now)
{
	probe_table_merge_begin(t, 0);
	for (unsigned i = 0; i < n; i++) {
		gslb_demand_row_t r = row4(i, 1, 0);
		CHECK(probe_table_merge_add(t, &r, now) == 0, "row %u added", i);
	}
	probe_table_merge_end(t, now);
}

static const probe_result_t answered3 = {.sent = 3, .answered = 3, .min_rtt_us = 5000, .ttl = 64};

/* 2,000 prefixes, rate 200, 3 samples: the last measurement cannot start before 30 s, and no
 * second ever holds more than the rate plus the bucket (a tenth of a second of budget). */
static void test_budget(void)
{
	probe_table_opts_t o = opts();
	o.hot_share = 0; /* every row at the same interval: one round to count */
	probe_table_t *t = probe_table_new(&o, 0);
	add_rows(t, 2000, 0);
	static unsigned per_second[64];
	memset(per_second, 0, sizeof(per_second));
	unsigned started = 0;
	uint64_t last_start = 0;
	for (uint64_t now = 0; now < 40000 && started < 2000; now++) {
		probe_row_t *r;
		while ((r = probe_table_next(t, now)) != NULL) {
			started++;
			last_start = now;
			per_second[now / 1000] += o.samples;
			CHECK(probe_table_done(t, r, &answered3, now), "measured");
		}
	}
	CHECK(started == 2000, "every prefix measured once in 40 s: %u", started);
	CHECK(last_start >= 29990,
	      "2,000 x 3 probes at 200/s take 30 s, the last started at %llu ms",
	      (unsigned long long)last_start);
	for (unsigned s = 0; s < 40; s++)
		CHECK(per_second[s] <= o.rate + o.rate / 10, "second %u: %u probes (rate %u)", s,
		      per_second[s], o.rate);
	/* Everything measured and due again in a minute: nothing now. */
	CHECK(probe_table_next(t, 31000) == NULL, "nothing due before the interval");
	CHECK(probe_table_wait(t, 31000) > 0, "the scheduler sleeps");
	CHECK(probe_table_backlog(t, 31000) == 0, "no backlog");
	probe_table_free(t);
}

/* Urgent rows go before older ordinary ones; hot rows come back every hot-interval. */
static void test_order_and_hot(void)
{
	probe_table_opts_t o = opts();
	o.rate = 100000; /* budget out of the way */
	probe_table_t *t = probe_table_new(&o, 0);
	probe_table_merge_begin(t, 0);
	for (unsigned i = 0; i < 10; i++) {
		gslb_demand_row_t r = row4(i, i == 9 ? 1000 : 1, i >= 8 ? GSLB_DEMAND_URGENT : 0);
		CHECK(probe_table_merge_add(t, &r, 0) == 0, "row %u", i);
	}
	probe_table_merge_end(t, 1000);
	probe_row_t *first = probe_table_next(t, 1000);
	probe_row_t *second = probe_table_next(t, 1000);
	CHECK(first && first->urgent && second && second->urgent, "the two urgent rows first");
	CHECK(probe_table_done(t, first, &answered3, 1000), "done");
	CHECK(probe_table_done(t, second, &answered3, 1000), "done");
	probe_row_t *r;
	while ((r = probe_table_next(t, 1000)) != NULL)
		CHECK(probe_table_done(t, r, &answered3, 1000), "done");
	/* 10 rows with distinct volumes, hot-share 20 %: the two busiest are hot */
	probe_table_merge_begin(t, 0);
	for (unsigned i = 0; i < 10; i++) {
		gslb_demand_row_t d = row4(i, 10 + i, 0);
		CHECK(probe_table_merge_add(t, &d, 2000) == 0, "row %u", i);
	}
	probe_table_merge_end(t, 2000);
	size_t hot = 0;
	for (size_t i = 0; i < probe_table_rows(t); i++) {
		const probe_row_t *x = probe_table_row(t, i);
		hot += x->hot;
		if (x->hot)
			CHECK(x->volume >= 18, "a hot row is one of the two busiest: volume %u",
			      x->volume);
	}
	CHECK(hot == 2, "20 %% of 10 rows are hot: %zu", hot);
	CHECK(probe_table_next(t, 10999) == NULL, "nothing due before hot-interval");
	unsigned due_hot = 0;
	while ((r = probe_table_next(t, 11000)) != NULL) {
		CHECK(r->hot, "only hot rows are due after 10 s");
		due_hot++;
		CHECK(probe_table_done(t, r, &answered3, 11000), "done");
	}
	CHECK(due_hot == 2, "both hot rows re-measured after hot-interval: %u", due_hot);
	unsigned due_all = 0;
	while ((r = probe_table_next(t, 61000)) != NULL) {
		due_all++;
		CHECK(probe_table_done(t, r, &answered3, 61000), "done");
	}
	CHECK(due_all == 10, "every row after interval: %u", due_all);
	probe_table_free(t);
}

/* The first method that answers is kept; silence on every method is loss 100, rtt none. */
static void test_methods(void)
{
	probe_table_opts_t o = opts();
	o.rate = 100000;
	probe_table_t *t = probe_table_new(&o, 0);
	add_rows(t, 1, 0);
	const probe_result_t silent = {.sent = 3};
	probe_row_t *r = probe_table_next(t, 10);
	uint8_t fam = r->family, plen = r->plen;
	uint64_t key = r->key;
	CHECK(r->trying == 0, "dns first");
	CHECK(!probe_table_done(t, r, &silent, 10), "silent dns: no measurement yet");
	r = probe_table_find(t, fam, plen, key);
	CHECK(r->trying == 1 && !r->measured, "tcp next, at once");
	r = probe_table_next(t, 10);
	CHECK(r != NULL && r->key == key, "the same row again");
	CHECK(probe_table_done(t, r, &answered3, 10), "tcp answered");
	CHECK(r->method == 1 && r->trying == 1, "tcp remembered: method %d", r->method);
	CHECK(r->rtt == 50 && r->loss == 0 && r->hops == 1, "rtt %u loss %u hops %u", r->rtt,
	      r->loss, r->hops);
	probe_table_free(t);
	/* a row silent by every method */
	t = probe_table_new(&o, 0);
	add_rows(t, 1, 0);
	r = probe_table_next(t, 10);
	for (int i = 0; i < 2; i++) {
		CHECK(!probe_table_done(t, r, &silent, 10), "method %d silent", i);
		r = probe_table_next(t, 10);
	}
	CHECK(probe_table_done(t, r, &silent, 10), "the last method ends the measurement");
	CHECK(r->rtt == GSLB_PATHFMT_RTT_NONE && r->loss == 100 && r->answered == 0,
	      "never answered: rtt %u loss %u", r->rtt, r->loss);
	CHECK(r->method == -1 && r->trying == 0, "methods tried afresh next time");
	probe_table_free(t);
}

/* A measurement whose probes could not leave the host folds nothing in and comes back. */
static void test_abort(void)
{
	probe_table_opts_t o = opts();
	o.rate = 100000;
	probe_table_t *t = probe_table_new(&o, 0);
	add_rows(t, 1, 0);
	probe_row_t *r = probe_table_next(t, 10);
	CHECK(r != NULL, "due");
	probe_table_abort(t, r, 1010);
	CHECK(!r->measured && !r->in_flight && r->rtt == GSLB_PATHFMT_RTT_NONE, "nothing folded");
	CHECK(probe_table_next(t, 1000) == NULL, "not before the retry time");
	CHECK(probe_table_next(t, 1010) == r, "again at the retry time");
	probe_table_free(t);
}

/* Minimum of the samples, EWMA across measurements, loss, and hops from the reply's TTL. */
static void test_arithmetic(void)
{
	static const struct {
		uint8_t ttl, hops;
	} hops[] = {{0, 0},   {64, 1},  {60, 5},  {1, 64},  {65, 64},
	            {128, 1}, {120, 9}, {255, 1}, {250, 6}, {129, 127}};
	for (size_t i = 0; i < sizeof(hops) / sizeof(hops[0]); i++)
		CHECK(probe_hops_from_ttl(hops[i].ttl) == hops[i].hops, "ttl %u: hops %u, want %u",
		      hops[i].ttl, probe_hops_from_ttl(hops[i].ttl), hops[i].hops);
	CHECK(probe_ewma(100, 200, 30) == 130, "30 %% of 200 + 70 %% of 100");
	CHECK(probe_ewma(100, 200, 100) == 200, "weight 100: the new value");
	CHECK(probe_ewma(100, 200, 0) == 100, "weight 0: the old value");

	probe_table_opts_t o = opts();
	o.rate = 100000;
	probe_table_t *t = probe_table_new(&o, 0);
	add_rows(t, 1, 0);
	probe_row_t *r = probe_table_next(t, 1);
	probe_result_t m1 = {.sent = 3, .answered = 2, .min_rtt_us = 12345, .ttl = 61};
	CHECK(probe_table_done(t, r, &m1, 1), "measured");
	CHECK(r->rtt == 123 && r->loss == 33 && r->hops == 4 && r->answered == 2,
	      "first measurement as is: rtt %u loss %u hops %u", r->rtt, r->loss, r->hops);
	r = probe_table_next(t, 60001);
	probe_result_t m2 = {.sent = 3, .answered = 3, .min_rtt_us = 22345};
	CHECK(probe_table_done(t, r, &m2, 60001), "measured");
	/* 0.3 x 223 + 0.7 x 123 = 153; loss 0.3 x 0 + 0.7 x 33 = 23; no TTL keeps the hops */
	CHECK(r->rtt == 153 && r->loss == 23 && r->hops == 4, "smoothed: rtt %u loss %u hops %u",
	      r->rtt, r->loss, r->hops);
	r = probe_table_next(t, 120001);
	const probe_result_t silent = {.sent = 3};
	for (int i = 0; i < 3; i++) {
		if (!probe_table_done(t, r, &silent, 120001))
			r = probe_table_next(t, 120001);
	}
	CHECK(r->rtt == 153 && r->loss == 46 && r->answered == 0,
	      "a silent round after answers: rtt kept, loss rises: rtt %u loss %u", r->rtt,
	      r->loss);
	probe_table_free(t);
}

/* Demand of several nodes: volumes summed, urgent if any, nothing outside its prefix, the
 * limit, and forgetting. */
static void test_merge(void)
{
	probe_table_opts_t o = opts();
	o.max_rows = 3;
	o.forget_after = 10000;
	probe_table_t *t = probe_table_new(&o, 0);
	probe_table_merge_begin(t, 0);
	gslb_demand_row_t a = row4(1, 5, 0), b = row4(1, 7, GSLB_DEMAND_URGENT);
	CHECK(probe_table_merge_add(t, &a, 100) == 0, "node 1");
	CHECK(probe_table_merge_add(t, &b, 200) == 0, "node 2");
	gslb_demand_row_t out = row4(2, 1, 0);
	out.probe[2] ^= 1; /* 10.0.3.53 for 10.0.2.0/24 */
	CHECK(probe_table_merge_add(t, &out, 200) == STEER_EINVAL, "probe outside its prefix");
	gslb_demand_row_t v6 = {.family = 6, .plen = 48, .volume = 1};
	inet_pton(AF_INET6, "2001:db8:1::", v6.prefix);
	inet_pton(AF_INET6, "2001:db8:1::53", v6.probe);
	CHECK(probe_table_merge_add(t, &v6, 200) == 0, "IPv6 row");
	gslb_demand_row_t c = row4(3, 1, 0), d = row4(4, 1, 0);
	CHECK(probe_table_merge_add(t, &c, 200) == 0, "third row");
	CHECK(probe_table_merge_add(t, &d, 200) == STEER_ESPACE, "max-prefixes");
	probe_table_merge_end(t, 200);
	CHECK(probe_table_rows(t) == 3, "three rows: %zu", probe_table_rows(t));
	probe_row_t *r = probe_table_row(t, 0);
	CHECK(r->volume == 12 && r->urgent && r->first, "summed %u, urgent from node 2", r->volume);
	/* node 2 goes quiet: only node 1's view of the row is left after the next round */
	probe_table_merge_begin(t, 0);
	CHECK(probe_table_merge_add(t, &a, 5000) == 0, "node 1 again");
	probe_table_merge_end(t, 5000);
	r = probe_table_row(t, 0);
	CHECK(r->volume == 5 && !r->urgent, "volume %u, not urgent", r->volume);
	/* 10 s after their last report, the rows nobody reports are forgotten */
	probe_table_merge_begin(t, 0);
	CHECK(probe_table_merge_add(t, &a, 12000) == 0, "node 1 again");
	size_t dropped = probe_table_merge_end(t, 12000);
	CHECK(dropped == 2 && probe_table_rows(t) == 1, "dropped %zu, left %zu", dropped,
	      probe_table_rows(t));
	probe_table_free(t);
}

/* The snapshot is a valid site table: sorted, both families, ages from the measurement. */
static void test_snapshot(void)
{
	probe_table_opts_t o = opts();
	o.rate = 100000;
	probe_table_t *t = probe_table_new(&o, 0);
	probe_table_merge_begin(t, 0);
	for (unsigned i = 300; i-- > 0;) {
		gslb_demand_row_t r = row4(i * 7 % 300, 1, 0);
		CHECK(probe_table_merge_add(t, &r, 0) == 0, "row");
	}
	gslb_demand_row_t v6 = {.family = 6, .plen = 48, .volume = 1};
	inet_pton(AF_INET6, "2001:db8:1::", v6.prefix);
	inet_pton(AF_INET6, "2001:db8:1::53", v6.probe);
	CHECK(probe_table_merge_add(t, &v6, 0) == 0, "IPv6 row");
	probe_table_merge_end(t, 0);
	probe_row_t *r;
	unsigned n = 0;
	while ((r = probe_table_next(t, 1000)) != NULL && n++ < 250)
		CHECK(probe_table_done(t, r, &answered3, 1000), "measured");
	CHECK(probe_table_dirty(t), "dirty after measurements");
	gslb_path_table_t snap;
	probe_table_snapshot(t, "dc1", 1700000000000ull, 31000, &snap);
	CHECK(!probe_table_dirty(t), "clean after the snapshot");
	CHECK(snap.n4 + snap.n6 == 250, "only measured rows: %zu + %zu", snap.n4, snap.n6);
	for (size_t i = 1; i < snap.n4; i++)
		CHECK(snap.rows4[i - 1].prefix < snap.rows4[i].prefix, "ascending at %zu", i);
	CHECK(snap.n4 > 0 && snap.rows4[0].age_s == 30, "age 30 s: %u",
	      snap.n4 ? snap.rows4[0].age_s : 0);
	size_t size = gslb_pathfmt_table_size(&snap);
	uint8_t *buf = malloc(size);
	CHECK(gslb_pathfmt_encode_table(&snap, buf, size) == size, "encodes");
	gslb_path_table_t back;
	char err[256] = "";
	CHECK(gslb_pathfmt_decode_table(buf, size, 1000, &back, err, sizeof(err)) == 0,
	      "decodes: %s", err);
	CHECK(back.n4 == snap.n4 && back.n6 == snap.n6 && strcmp(back.name, "dc1") == 0,
	      "round trip");
	gslb_pathfmt_table_free(&back);
	free(buf);
	gslb_pathfmt_table_free(&snap);
	probe_table_free(t);
}

int main(void)
{
	test_budget();
	test_order_and_hot();
	test_methods();
	test_abort();
	test_arithmetic();
	test_merge();
	test_snapshot();
	return unit_finish("probe_table");
}
