/*
 * Secondary zones: the transfer thread, with its own libev loop, that owns every secondary
 * zone's refresh cycle (SOA query at refresh, retry on failure, expiry, AXFR when the
 * primary's serial is newer), keeps each transferred version on disk (master file, written
 * whole, then loaded) and hands new versions to the control thread; and the NOTIFY sender
 * for primary zones. Primaries are tried in order; network I/O on the transfer thread is
 * blocking with short timeouts, which is fine because no query thread ever waits for it.
 *
 * Threads: xfr_new/xfr_zone_sync/xfr_zone_current/xfr_notify_send/xfr_free on the control
 * thread; xfr_notify_received from any thread (query threads: lock-free, no allocation);
 * everything else runs on the transfer thread.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "dns/tsig.h"
#include "zone/zone.h"

typedef struct xfr xfr_t;

/* One remote server (a primary, or a secondary we NOTIFY). */
typedef struct {
	steer_sockaddr_t addr;
	steer_sockaddr_t source; /* family 0: the kernel's choice */
	char *key;               /* TSIG key name; NULL = unsigned */
	dns_tsig_key_t tsig;     /* the key itself, when @c tsig_ok */
	bool tsig_ok;            /* @c key was resolved (xfr_tsig_key()); a remote with a key
	                          * that is not is never sent anything unsigned */
} xfr_remote_t;

/**
 * The TSIG key @p name (presentation form) with @p algorithm ("hmac-sha256") and the decoded
 * @p secret into @p out. False when the name, algorithm or secret is unusable.
 */
bool xfr_tsig_key(const char *name, const char *algorithm, const uint8_t *secret, size_t len,
                  dns_tsig_key_t *out) STEER_NONNULL(1, 2, 5);

/* How a secondary zone is configured (copied by xfr_zone_sync()). */
typedef struct {
	const char *name; /* presentation form */
	const char *file; /* where versions are kept */
	const xfr_remote_t *primaries;
	size_t n_primaries;
	bool ixfr;
	unsigned refresh_min_ms, refresh_max_ms;
	uint64_t max_transfer_size, max_records;
} xfr_zone_conf_t;

/* What `steerctl zones` shows for a secondary zone. */
typedef struct {
	bool has_zone;
	uint32_t serial;
	time_t last_refresh;  /* last good refresh (SOA checked or transferred); 0 = never */
	time_t next_refresh;  /* when the next SOA query is due */
	time_t expire_at;     /* 0 = no version held */
	char primary[64];     /* the primary of the last good refresh */
	char last_error[192]; /* "" when the last refresh succeeded */
	uint64_t transfers_ok, transfers_failed;
	uint64_t ixfr_ok; /* of transfers_ok, those that came as IXFR diffs */
} xfr_zone_status_t;

/* Process-wide counters for metrics. */
typedef struct {
	uint64_t transfers_ok, transfers_failed, notify_received, notify_sent, notify_failed;
} xfr_counters_t;

/**
 * A transfer module with no zones, not running. @p on_update is called on the transfer
 * thread (with @p arg) after a zone got a new version; it must only wake the control thread.
 */
xfr_t *xfr_new(void (*on_update)(void *arg), void *arg);

/**
 * Add the secondary zone @p conf or update its configuration (matched by apex). A new zone
 * whose file exists is loaded from it at once (served until refreshed; its expiry counts from
 * the file's modification time). Returns 0 or a negative steer_err (bad name). Control thread.
 */
int xfr_zone_sync(xfr_t *xfr, const xfr_zone_conf_t *conf) STEER_NONNULL(1, 2);

/**
 * Mark every zone not synced since the last call as removed (it is no longer refreshed), and
 * wake the thread for new zones. Control thread, after a configuration is applied.
 */
void xfr_sync_done(xfr_t *xfr) STEER_NONNULL(1);

/**
 * The current version of the secondary zone @p apex (lowercase wire): a new reference, or
 * NULL when none is held. @p expire_at receives the zone's shared expiry cell (for
 * zone_set_entry_t), NULL when the zone is unknown. Control thread.
 */
zone_t *xfr_zone_current(xfr_t *xfr, const uint8_t *apex, const _Atomic int64_t **expire_at)
    STEER_NONNULL(1, 2);

/** Start the transfer thread. Returns 0 or a negative steer_err. */
int xfr_start(xfr_t *xfr) STEER_NONNULL(1);

/**
 * A NOTIFY for @p apex was accepted: refresh within a second. Lock-free and allocation-free;
 * any thread (ev_async wake-up). Unknown zones are ignored.
 */
void xfr_notify_received(xfr_t *xfr, const uint8_t *apex) STEER_NONNULL(1, 2);

/**
 * Refresh @p apex now (@p axfr: transfer the whole zone even when the serial did not change).
 * Returns 0 or STEER_ENOENT when it is not a secondary zone. Any thread.
 */
int xfr_refresh(xfr_t *xfr, const uint8_t *apex, bool axfr) STEER_NONNULL(1, 2);

/**
 * NOTIFY the @p n @p targets of the primary zone @p zone (a reference is taken for the SOA):
 * each is retried up to 5 times, 2 s apart, until it answers. Control thread.
 */
void xfr_notify_send(xfr_t *xfr, zone_t *zone, const xfr_remote_t *targets, size_t n)
    STEER_NONNULL(1, 2);

/** The status of @p apex; false when it is not a secondary zone. Control thread. */
bool xfr_zone_status(xfr_t *xfr, const uint8_t *apex, xfr_zone_status_t *out)
    STEER_NONNULL(1, 2, 3);

/** Counters since start. Any thread. */
void xfr_counters(xfr_t *xfr, xfr_counters_t *out) STEER_NONNULL(1, 2);

/** Stop the thread (if running) and free everything. NULL is ignored. Control thread. */
void xfr_free(xfr_t *xfr);
