/*
 * Per-thread query counters. Each worker owns one block and is its only writer (relaxed
 * load+store, no locked instruction on the packet path); the control thread sums all blocks
 * on demand and may read a counter while it is being written (it sees the old or new value).
 */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

/* Query types counted individually; everything else goes to "other". */
#define STATS_QTYPE_SLOTS 256
#define STATS_RCODE_SLOTS 24 /* up to BADVERS (16) and a little room */

typedef struct {
	_Atomic uint64_t udp_queries;
	_Atomic uint64_t tcp_queries;
	_Atomic uint64_t ipv6_queries; /* subset of UDP+TCP that arrived over IPv6 */
	_Atomic uint64_t edns;         /* queries with an OPT record */
	_Atomic uint64_t edns_do;      /* ... and the DO bit */
	_Atomic uint64_t truncated;    /* responses sent with TC=1 */
	_Atomic uint64_t dropped;      /* malformed beyond answering, or QR=1 */
	_Atomic uint64_t axfr;         /* zone transfers started */
	_Atomic uint64_t axfr_refused;
	_Atomic uint64_t rcode[STATS_RCODE_SLOTS];
	_Atomic uint64_t qtype[STATS_QTYPE_SLOTS]; /* index 0 counts types >= 256 */
} steer_stats_t;

/* Owner-only increment: no read-modify-write instruction, because only one thread writes. */
#define STATS_ADD(counter, n)                                                                      \
	atomic_store_explicit(&(counter),                                                          \
	                      atomic_load_explicit(&(counter), memory_order_relaxed) + (n),        \
	                      memory_order_relaxed)
#define STATS_INC(counter) STATS_ADD(counter, 1)

/** Add every counter of @p src into @p dst (control thread). */
void steer_stats_sum(steer_stats_t *dst, const steer_stats_t *src);
