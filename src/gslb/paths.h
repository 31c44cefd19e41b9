/*
 * The merged path table a DNS node steers by: for each measured client prefix, what every
 * datacenter's steer-probe agent measured (RTT, loss, hops, age), plus the sticky best
 * datacenter that gives RTT steering its hysteresis.
 *
 * Columns are the configured datacenters that have an agent (gslb_paths_column() maps a
 * conf_t.datacenters index to one); rows are the union of the agents' prefixes, IPv4 at the
 * node's ipv4-prefix granularity and IPv6 at ipv6-prefix. The lookup is two sorted key arrays
 * (IPv4 u32, IPv6 u64 top bits) each with a 65,536-entry index on 16 bits (the first 16 in
 * which the family's keys differ, so IPv6 keys inside 2000::/3 still spread), then the row's
 * sticky best and cells in one block: about three cache misses, no allocation and no lock.
 *
 * Hysteresis (F5 switches on measured metrics; answers that flip with every probe round are
 * worse than slightly suboptimal ones): each row keeps a sticky best column. A challenger
 * replaces it only when its RTT beats the sticky best's by both the margin (percent) and the
 * minimum difference, in @c rounds consecutive builds in which the challenger's site table
 * changed. gslb_paths_build() carries this state from the previous table by prefix.
 *
 * Threads: built on the control thread (or any thread that owns the inputs), then immutable;
 * published inside the served GSLB view (gslb_view_with_paths()) and read by query threads under
 * RCU. The reference count is not atomic: control thread only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "gslb/pathfmt.h"

typedef struct gslb_paths gslb_paths_t;

#define GSLB_PATHS_COLUMNS_MAX 64 /* datacenters with an agent */
#define GSLB_PATHS_NO_COLUMN   0xff

/* One measurement in the merged table. rtt GSLB_PATHFMT_RTT_NONE and empty = no data. */
typedef struct {
	uint16_t rtt;   /* 0.1 ms units, GSLB_PATHFMT_RTT_NONE = the prefix never answered */
	uint8_t loss;   /* percent */
	uint8_t hops;   /* 0 = unknown */
	uint16_t age_s; /* at build time, saturating: the site table's age plus the agent's
	                   age of the row, which is exact to 31 s, else rounded up within 1/16 */
	bool empty;     /* no (fresh) measurement from this column's agent */
} gslb_path_cell_t;

/* What gslb_paths_build() needs besides the site tables. */
typedef struct {
	unsigned ipv4_prefix, ipv6_prefix; /* rows' granularity; finer agent rows are folded */
	unsigned path_ttl_s;               /* cells older than this are empty */
	unsigned max_rows;   /* rows kept at most: the freshest win (by their freshest cell), ties
	                        go to IPv4 and then to lower prefixes */
	unsigned margin_pct; /* hysteresis, see above */
	unsigned min_difference_100us;
	unsigned rounds;
	/* column -> conf_t.datacenters index, @c n_columns of them */
	const size_t *column_dc;
	size_t n_columns;
	size_t n_datacenters; /* conf_t.n_datacenters, for gslb_paths_column() */
} gslb_paths_opts_t;

/*
 * A site table as the node holds it: the decoded body, when it arrived, whether it is new.
 * With @c reuse the column is taken from the previous table instead (the same datacenter's
 * column of @p prev, at the same granularity; empty when @p prev has none), so a node need not
 * keep a decoded table once a build has used it: at a million rows that is 16 MB per site.
 * Reused cells keep the agent's ages and go stale as they would have (their ages rounded up
 * to 1/16, so a little early rather than late).
 */
typedef struct {
	const gslb_path_table_t *table; /* NULL = nothing from this column's agent */
	uint64_t fetched_ms;            /* wall clock it was received at */
	bool changed;                   /* differs from the one the previous build used (a round) */
	bool reuse; /* unchanged since @p prev: take its column (table unused) */
} gslb_paths_site_t;

/**
 * Merge @p sites (one per column, in column order) into a new table at wall-clock @p now_ms,
 * carrying the hysteresis state of @p prev (NULL = none). Agent rows finer than the node's
 * granularity fold into their row (per column the lowest RTT, then the freshest); coarser
 * ones are skipped (info.coarse_skipped). A cell is empty when its age (age_s plus the time
 * since the table's generated_ms) exceeds path_ttl_s; a row with no fresh cell is left out.
 * The tables are only read during the call. Returns NULL only on bad options or an unsorted
 * site table (message in @p err); aborts on OOM. Control thread (any one thread at a time
 * per @p prev).
 */
gslb_paths_t *gslb_paths_build(const gslb_paths_t *prev, const gslb_paths_site_t *sites,
                               const gslb_paths_opts_t *opts, uint64_t now_ms, char *err,
                               size_t errlen) STEER_NONNULL(2, 3, 5) STEER_WUR;

/** Take a reference. Control thread. */
gslb_paths_t *gslb_paths_ref(gslb_paths_t *p) STEER_NONNULL(1);

/**
 * Drop a reference; the last one frees at once. Query threads read the table through the
 * served view, which is dropped only after an RCU grace period, so none still reads it then.
 * NULL is ignored. Control thread.
 */
void gslb_paths_unref(gslb_paths_t *p);

/**
 * The row of @p addr (4 or 16 bytes, network order, @p family AF_INET/AF_INET6) into @p row:
 * true when the table has one. Query threads; no allocation, no lock.
 */
bool gslb_paths_lookup(const gslb_paths_t *p, int family, const uint8_t *addr, uint32_t *row)
    STEER_NONNULL(1, 3, 4);

/** The cell of (@p row, @p column). Any thread. */
gslb_path_cell_t gslb_paths_cell(const gslb_paths_t *p, uint32_t row, unsigned column)
    STEER_NONNULL(1);

/** The row's sticky best column, GSLB_PATHS_NO_COLUMN when no column has an RTT. */
unsigned gslb_paths_row_best(const gslb_paths_t *p, uint32_t row) STEER_NONNULL(1);

/**
 * The row's pending challenger (GSLB_PATHS_NO_COLUMN when none beats the sticky best by the
 * margin) and in @p rounds how many changed rounds it has won so far. For explain. Any thread.
 */
unsigned gslb_paths_row_challenger(const gslb_paths_t *p, uint32_t row, unsigned *rounds)
    STEER_NONNULL(1, 3);

/** The column of conf_t.datacenters index @p dc, GSLB_PATHS_NO_COLUMN when it has no agent. */
unsigned gslb_paths_column(const gslb_paths_t *p, size_t dc) STEER_NONNULL(1);

/** Number of columns, and the datacenter index of column @p c. */
size_t gslb_paths_columns(const gslb_paths_t *p) STEER_NONNULL(1);
size_t gslb_paths_column_dc(const gslb_paths_t *p, unsigned c) STEER_NONNULL(1);

/** The prefix length rows of @p family have (the ECS scope of decisions made from them). */
unsigned gslb_paths_prefix_len(const gslb_paths_t *p, int family) STEER_NONNULL(1);

/** The row's prefix: family, address (16 bytes, zero-padded), length. Any thread. */
void gslb_paths_row_prefix(const gslb_paths_t *p, uint32_t row, int *family, uint8_t addr[16],
                           unsigned *plen) STEER_NONNULL(1, 3, 4, 5);

/* Counts for steerctl and /metrics. */
typedef struct {
	size_t rows4, rows6;
	size_t cells;        /* non-empty */
	size_t sticky_held;  /* rows where hysteresis kept a best another column beat this build */
	uint64_t built_ms;   /* wall clock of the build */
	uint32_t build_us;   /* how long the build took */
	size_t bytes;        /* memory the table holds */
	size_t rows_dropped; /* fresh rows max_rows left out (the stalest) */
	size_t coarse_skipped; /* agent rows coarser than the node's granularity, not used */
} gslb_paths_info_t;

/** Fill @p out. Any thread. */
void gslb_paths_info(const gslb_paths_t *p, gslb_paths_info_t *out) STEER_NONNULL(1, 2);
