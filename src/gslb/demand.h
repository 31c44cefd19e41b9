/*
 * Demand: which client prefixes this DNS node answers for measured policies, by volume, and
 * which it had no usable measurement for. The steer-probe agents poll it (GET /paths/demand)
 * to decide what to probe, so what the node's clients use gets measured first.
 *
 * Two halves:
 *   ring  one per query thread (single producer: that thread; single consumer: the control
 *         thread). gslb_demand_record() keeps every `demand-sample`-th decision and every
 *         urgent one (the prefix was unknown or stale) in a small direct-mapped cache that
 *         adds up repeats of one prefix and hands the sum to the ring about once a second, so
 *         a flood of one prefix costs one ring slot a second. A full ring drops the report and
 *         counts it. No lock, no allocation, no system call but a coarse clock read.
 *   map   the control thread's: gslb_demand_drain() folds the rings into a bounded map of
 *         prefix -> decayed volume, probe address, ECS and urgent flags, last seen, and
 *         gslb_demand_encode() serves it in the format of gslb/pathfmt.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "gslb/pathfmt.h"

typedef struct gslb_demand_ring gslb_demand_ring_t;
typedef struct gslb_demand_map gslb_demand_map_t;

/* Reports a ring holds between two drains (the control thread drains every 200 ms). */
#define GSLB_DEMAND_RING_SLOTS 1024
/* The volume of a prefix halves every this long without queries: the agents' hot set follows
 * a traffic shift within minutes, while a prefix busy yesterday still ranks above a new one. */
#define GSLB_DEMAND_HALF_LIFE_MS (10u * 60u * 1000u)
/* A prefix not reported for this long leaves the map (the agents keep it until forget-after). */
#define GSLB_DEMAND_IDLE_MS (60u * 60u * 1000u)

/**
 * A ring for one query thread that keeps every @p sample th non-urgent decision (1 = all).
 * Control thread; aborts on OOM.
 */
gslb_demand_ring_t *gslb_demand_ring_new(unsigned sample) STEER_WUR;

/** Keep every @p sample th non-urgent decision from now on (a reload). Control thread. */
void gslb_demand_ring_set_sample(gslb_demand_ring_t *r, unsigned sample) STEER_NONNULL(1);

/** Free a ring no thread records into any more. NULL is ignored. */
void gslb_demand_ring_free(gslb_demand_ring_t *r);

/**
 * Record one measured decision for client prefix @p addr (network order, 4 bytes for
 * AF_INET, 16 for AF_INET6, @p family) of length @p plen (cut here: host bits may be set).
 * @p probe is the address to probe (the resolver's, same family and length as @p addr); for
 * @p flags with GSLB_DEMAND_ECS it may be NULL: the prefix's first host is probed. Flags:
 * GSLB_DEMAND_ECS (an ECS client prefix), GSLB_DEMAND_URGENT (no usable measurement: always
 * reported, deduplicated). A NULL @p r (measured paths off) does nothing. Query thread that
 * owns @p r; no lock, no allocation.
 */
void gslb_demand_record(gslb_demand_ring_t *r, int family, const uint8_t *addr, unsigned plen,
                        const uint8_t *probe, uint8_t flags);

/** Reports dropped because the ring was full. Any thread. */
uint64_t gslb_demand_ring_dropped(const gslb_demand_ring_t *r) STEER_NONNULL(1);

/** A map of at most @p max_rows prefixes. Control thread; aborts on OOM. */
gslb_demand_map_t *gslb_demand_map_new(size_t max_rows) STEER_WUR;

/** Free the map. NULL is ignored. */
void gslb_demand_map_free(gslb_demand_map_t *m);

/**
 * Move what @p r holds into @p m at monotonic time @p now_ms. When the map is full, the
 * tenth of its rows with the least volume makes room (urgent rows last). Returns the reports
 * taken. Control thread (the ring's only consumer).
 */
size_t gslb_demand_drain(gslb_demand_map_t *m, gslb_demand_ring_t *r, uint64_t now_ms)
    STEER_NONNULL(1, 2);

/** Drop the rows idle for GSLB_DEMAND_IDLE_MS at @p now_ms. Control thread. */
void gslb_demand_expire(gslb_demand_map_t *m, uint64_t now_ms) STEER_NONNULL(1);

/** Rows in the map. */
size_t gslb_demand_rows(const gslb_demand_map_t *m) STEER_NONNULL(1);

/** True when a drain or expiry changed the map since the last gslb_demand_encode(). */
bool gslb_demand_changed(const gslb_demand_map_t *m) STEER_NONNULL(1);

/**
 * The map as a demand body (gslb/pathfmt.h), volumes decayed to @p now_ms (monotonic),
 * generated_ms = @p wall_ms; *@p len its size. Caller frees. Control thread; aborts on OOM.
 */
uint8_t *gslb_demand_encode(gslb_demand_map_t *m, uint64_t now_ms, uint64_t wall_ms, size_t *len)
    STEER_NONNULL(1, 4) STEER_WUR;

/**
 * The row of the prefix containing @p addr (@p family, network order) at length @p plen into
 * @p out (volume decayed to @p now_ms): true when there is one. For steerctl. Control thread.
 */
bool gslb_demand_find(const gslb_demand_map_t *m, int family, const uint8_t *addr, unsigned plen,
                      uint64_t now_ms, gslb_demand_row_t *out) STEER_NONNULL(1, 3, 6);
