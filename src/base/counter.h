/*
 * Per-thread counters. Each block of counters has one writer, the thread that owns it, which
 * increments with a relaxed load and store (no locked instruction on the packet path). Other
 * threads (the control thread summing for `steerctl stats`) read with relaxed loads and see
 * the old or the new value of a counter being written.
 */
#pragma once

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef _Atomic uint64_t steer_counter_t;

/* Owner-only increment: no read-modify-write instruction, because only one thread writes. */
#define STEER_COUNTER_ADD(counter, n)                                                              \
	atomic_store_explicit(&(counter),                                                          \
	                      atomic_load_explicit(&(counter), memory_order_relaxed) + (n),        \
	                      memory_order_relaxed)
#define STEER_COUNTER_INC(counter) STEER_COUNTER_ADD(counter, 1)

/**
 * Add the @p n counters at @p src (written concurrently by their owner) into those at @p dst
 * (private to the caller). Any thread.
 */
static inline void steer_counters_add(steer_counter_t *dst, const steer_counter_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = atomic_load_explicit(&src[i], memory_order_relaxed);
		atomic_store_explicit(&dst[i],
		                      atomic_load_explicit(&dst[i], memory_order_relaxed) + v,
		                      memory_order_relaxed);
	}
}

/* Number of counters in a struct made only of steer_counter_t, for steer_counters_add(). */
#define STEER_COUNTERS_IN(type) (sizeof(type) / sizeof(steer_counter_t))
