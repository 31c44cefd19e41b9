/*
 * The query latency histogram of net/: which bucket a reply time lands in (upper bounds are
 * inclusive, as Prometheus' le), the overflow bucket, the sum, and batches counted at once.
 */
#include <stdint.h>

#include "net/net.h"
#include "unit.h"

static size_t bucket_of(uint64_t ns)
{
	net_latency_t h = {0};
	net_latency_observe(&h, ns);
	for (size_t b = 0; b <= NET_LATENCY_BOUNDS; b++)
		if (h.bucket[b] == 1)
			return b;
	return SIZE_MAX;
}

static void test_buckets(void)
{
	static const struct {
		uint64_t ns;
		size_t bucket;
		const char *what;
	} rows[] = {
	    {0, 0, "nothing at all"},
	    {49999, 0, "just under 50 us"},
	    {50000, 0, "50 us is in le=0.00005"},
	    {50001, 1, "just over 50 us"},
	    {100000, 1, "100 us"},
	    {999999, 4, "just under 1 ms"},
	    {1000000, 4, "1 ms"},
	    {2500001, 6, "just over 2.5 ms"},
	    {1000000000, 13, "1 s, the last bound"},
	    {1000000001, 14, "over 1 s: the overflow bucket"},
	    {UINT64_MAX, 14, "absurdly long"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		CHECK(bucket_of(rows[i].ns) == rows[i].bucket, "%s: bucket %zu, want %zu",
		      rows[i].what, bucket_of(rows[i].ns), rows[i].bucket);
	for (size_t b = 1; b < NET_LATENCY_BOUNDS; b++)
		CHECK(net_latency_bounds_ns[b] > net_latency_bounds_ns[b - 1],
		      "bounds increase at %zu", b);
	CHECK(net_latency_bounds_ns[0] == 50000 &&
	          net_latency_bounds_ns[NET_LATENCY_BOUNDS - 1] == 1000000000,
	      "from 50 us to 1 s");
}

static void test_sum_and_batches(void)
{
	net_latency_t h = {0};
	net_latency_observe(&h, 30000);
	net_latency_observe_n(&h, 200000, 5);
	CHECK(h.bucket[0] == 1 && h.bucket[2] == 5, "batch of 5 in one bucket: %llu %llu",
	      (unsigned long long)h.bucket[0], (unsigned long long)h.bucket[2]);
	CHECK(h.sum_ns == 30000 + 5 * 200000, "sum %llu", (unsigned long long)h.sum_ns);
}

int main(void)
{
	test_buckets();
	test_sum_and_batches();
	return unit_finish("net_latency");
}
