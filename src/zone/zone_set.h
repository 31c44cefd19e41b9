/*
 * The set of zones served by one configuration snapshot: the longest matching zone for a
 * query name. Built on the control thread, then immutable; query threads read it lock-free.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "dns/acl.h"
#include "zone/journal.h"
#include "zone/zone.h"

/* A zone as one configuration snapshot serves it: the zone and its per-zone serving data. */
typedef struct {
	zone_t *zone;               /* one reference held by the set */
	dns_acl_entry_t *xfr_allow; /* owned; who may AXFR/IXFR this zone */
	size_t n_xfr_allow;
	dns_acl_entry_t *notify_allow; /* owned; who may NOTIFY this zone (a secondary zone) */
	size_t n_notify_allow;
	bool secondary; /* transferred from a primary rather than loaded */
	/* The IXFR history ending at this zone's version, NULL = none (AXFR only); one
	 * reference held by the set (zone_set_add() takes its own of the template's). */
	const zone_journal_t *journal;
	/* Secondary zones: when the zone expires (seconds since the epoch, 0 = never), kept by
	 * the transfer thread and read by query threads for EXPIRE (RFC 7314) and to stop
	 * serving an expired zone; shared by every set that serves the zone, so a good refresh
	 * needs no new set. NULL for a primary zone. */
	const _Atomic int64_t *expire_at;
} zone_set_entry_t;

/*
 * A configured secondary zone that has no version yet (before its first transfer). It is
 * kept apart from the served entries, so every reader of zone_set_entry_t.zone still sees a
 * zone: only the answer path (SERVFAIL for every name in it), NOTIFY (which may start the
 * first transfer) and the listings look at pending zones.
 */
typedef struct {
	uint8_t apex[DNS_DNAME_MAXLEN]; /* lowercase wire */
	uint8_t apex_len;
	char *name;                    /* owned; presentation form, trailing dot */
	dns_acl_entry_t *notify_allow; /* owned; who may NOTIFY it, as for a served secondary */
	size_t n_notify_allow;
} zone_set_pending_t;

typedef struct zone_set zone_set_t;

/** An empty set. Aborts on out-of-memory (control path). */
zone_set_t *zone_set_new(void);

/**
 * Add @p zone (the set takes over the caller's reference) with the serving data of @p tmpl
 * (its access lists are copied, its journal referenced; its @c zone is ignored). Returns 0, or
 * STEER_EEXIST when a zone with the same apex is already in the set.
 */
int zone_set_add(zone_set_t *set, zone_t *zone, const zone_set_entry_t *tmpl)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * The zone that @p qname (lowercase wire) falls in: the one with the longest matching apex, or
 * NULL. Lock-free, allocation-free; any thread.
 */
const zone_set_entry_t *zone_set_find(const zone_set_t *set, const uint8_t *qname)
    STEER_NONNULL(1, 2);

/** The zone with apex exactly @p apex (lowercase wire), or NULL. */
const zone_set_entry_t *zone_set_get(const zone_set_t *set, const uint8_t *apex)
    STEER_NONNULL(1, 2);

/** Number of zones and the i-th entry (sorted by name), for listing. */
size_t zone_set_count(const zone_set_t *set) STEER_NONNULL(1);
const zone_set_entry_t *zone_set_at(const zone_set_t *set, size_t i) STEER_NONNULL(1);

/**
 * Add the pending secondary zone @p apex (lowercase wire) with the notify-allow list of
 * @p tmpl (copied). Returns 0, STEER_EEXIST when the apex is already in the set (served or
 * pending), or STEER_EINVAL for a bad name. Control thread, before the set is published.
 */
int zone_set_add_pending(zone_set_t *set, const uint8_t *apex, const zone_set_entry_t *tmpl)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * The pending zone that @p qname (lowercase wire) falls in when it is more specific than
 * @p served (the result of zone_set_find(), may be NULL): the longest match wins whether
 * served or pending. NULL when none. Lock-free, allocation-free; any thread. Costs one test
 * when the set has no pending zone.
 */
const zone_set_pending_t *zone_set_find_pending(const zone_set_t *set, const uint8_t *qname,
                                                const zone_set_entry_t *served) STEER_NONNULL(1, 2);

/** The pending zone with apex exactly @p apex (lowercase wire), or NULL. Any thread. */
const zone_set_pending_t *zone_set_get_pending(const zone_set_t *set, const uint8_t *apex)
    STEER_NONNULL(1, 2);

/** Number of pending zones and the i-th one (in insertion order), for listing. */
size_t zone_set_pending_count(const zone_set_t *set) STEER_NONNULL(1);
const zone_set_pending_t *zone_set_pending_at(const zone_set_t *set, size_t i) STEER_NONNULL(1);

/** Free the set and drop its zone references. NULL is ignored. */
void zone_set_free(zone_set_t *set);
