/*
 * The IXFR history of a zone: the differences between its successive versions (RFC 1995
 * difference sequences), computed on the control thread when a reload replaces a primary zone
 * or a secondary zone gets a new version from its primaries, then immutable. A journal is shared by
 * reference count between the zone set entries of successive configuration snapshots and by the
 * transfers streaming from it, so query and TCP threads read it without locks. The daemon keeps a
 * copy on disk (zone/journal_file.h) and resumes from it at start when it ends at the loaded
 * version; without one, IXFR falls back to a full transfer, as RFC 1995 4 allows.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "zone/zone.h"

/*
 * One change: the zone went from serial @c from to serial @c to. Its records are packed in
 * @c data, the deleted ones first (beginning with the old SOA), then the added ones (beginning
 * with the new SOA), each as: owner (uncompressed lowercase wire name), type (16 bits), TTL
 * (32 bits), rdlength (16 bits), rdata, integers big-endian; the class is always IN.
 */
typedef struct {
	uint32_t from, to;
	uint8_t *data; /* owned */
	size_t len;    /* bytes of data */
	size_t n_del, n_add;
	int refcount; /* atomic: journals share changes */
} zone_change_t;

typedef struct {
	zone_change_t **changes; /* oldest first; changes[i]->to == changes[i + 1]->from */
	size_t n;
	size_t bytes; /* sum of the changes' data lengths */
	int refcount; /* atomic; see zone_journal_ref()/zone_journal_unref() */
} zone_journal_t;

/* One record of a change, as zone_change_read() returns it; pointers into the change. */
typedef struct {
	const uint8_t *owner;
	uint16_t type;
	uint32_t ttl;
	uint16_t rdlen;
	const uint8_t *rdata;
} zone_change_rr_t;

/** True when serial @p a is greater than @p b in RFC 1982 serial number arithmetic. */
static inline bool zone_serial_gt(uint32_t a, uint32_t b)
{
	return a != b && (uint32_t)(a - b) < 0x80000000u;
}

/**
 * The journal that follows @p old (NULL = none) when zone @p from is replaced by @p to: the
 * changes of @p old plus the difference from @p from to @p to, at most @p max_changes of
 * them (oldest dropped first), and no more bytes than @p to itself takes in a full transfer.
 * When @p from and @p to are the same zone, the old changes are kept (trimmed the same way).
 * A serial of @p to not greater than @p from's (RFC 1982), a journal that does not end at
 * @p from's serial, or @p max_changes 0 start over: the result is then NULL (no history).
 * Returns a journal with one reference for the caller, or NULL. Control thread; aborts on
 * out-of-memory.
 */
zone_journal_t *zone_journal_next(const zone_journal_t *old, const zone_t *from, const zone_t *to,
                                  unsigned max_changes) STEER_WUR;

/**
 * A digest of @p zone's records (owner, type, TTL, rdata; the SOA included), independent of
 * their order in the zone file: a journal file records it for the version its history ends
 * at, so a zone edited without a new serial while steerd was down does not resume a history
 * that no longer leads to it. Not a MAC (fixed key). Any thread; allocation-free.
 */
uint64_t zone_digest(const zone_t *zone) STEER_NONNULL(1);

/**
 * The journal to serve with @p zone at start from @p loaded (read back from disk): @p loaded
 * trimmed as zone_journal_next() trims (at most @p max_changes changes, no more bytes than
 * @p zone in a full transfer), provided it ends exactly at @p zone's serial. NULL when it does
 * not (the zone changed while the history was not kept), or when nothing is left. Returns a
 * new reference; @p loaded keeps the caller's. Control thread; aborts on out-of-memory.
 */
zone_journal_t *zone_journal_resume(const zone_journal_t *loaded, const zone_t *zone,
                                    unsigned max_changes) STEER_NONNULL(2) STEER_WUR;

/**
 * Index of the change that starts at serial @p serial in @p journal, provided the journal
 * ends at @p current (the serial being served), or -1 when the client's version is not in
 * the history. Any thread; allocation-free.
 */
long zone_journal_find(const zone_journal_t *journal, uint32_t serial, uint32_t current);

/**
 * Read the record at byte @p pos of @p change into @p rr and return the offset of the next
 * one. @p pos must be the start of a record (0, or what an earlier call returned, below
 * @c change->len). Any thread.
 */
size_t zone_change_read(const zone_change_t *change, size_t pos, zone_change_rr_t *rr)
    STEER_NONNULL(1, 3);

/** Take a reference and return @p journal. Thread-safe; NULL is returned as is. */
zone_journal_t *zone_journal_ref(const zone_journal_t *journal);

/** Drop a reference; the journal (and changes no other journal holds) goes with the last one.
 * Thread-safe; NULL is ignored. */
void zone_journal_unref(const zone_journal_t *journal);
