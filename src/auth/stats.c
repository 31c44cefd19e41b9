#include "auth/stats.h"

#include <assert.h>
#include <stddef.h>

#include "base/compiler.h"

static void add(_Atomic uint64_t *dst, const _Atomic uint64_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = atomic_load_explicit(&src[i], memory_order_relaxed);
		atomic_fetch_add_explicit(&dst[i], v, memory_order_relaxed);
	}
}

void steer_stats_sum(steer_stats_t *dst, const steer_stats_t *src)
{
	/* The struct is nothing but counters, so it can be walked as one array. */
	static_assert(sizeof(steer_stats_t) % sizeof(uint64_t) == 0, "stats hold only counters");
	add((_Atomic uint64_t *)dst, (const _Atomic uint64_t *)src,
	    sizeof(steer_stats_t) / sizeof(uint64_t));
}
