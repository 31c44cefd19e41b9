/*
 * The IXFR history of a zone on disk, so that a restart keeps serving IXFR: one file per zone,
 * written whole (temporary file, fsync, rename) by the control thread when the history
 * changes, and read back at start. Nothing here runs on a query thread.
 *
 * Format, version 1, integers big-endian:
 *   header:  magic "STEERJNL" (8), version (u16) = 1, reserved (u16) = 0, change count (u32),
 *            zone_digest() of the version the history ends at (u64), apex length (u8), apex
 *            (uncompressed lowercase wire name), CRC-32 of all the header's bytes before it
 *            (u32);
 *   changes: oldest first, each: from serial, to serial, deleted records, added records,
 *            data length (u32 each), the data in the layout of zone_change_t, CRC-32 of the
 *            change's bytes before it (u32);
 *   nothing after the last change.
 * The CRC is the zlib/IEEE one, so a one-line script can check a file. A file is taken only
 * when everything checks out: the magic and version, every checksum, the apex, each change's
 * records (names, lengths, the SOAs that open both halves with the change's serials) and the
 * chain of serials. Anything else is refused whole: half a history is no history.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/compiler.h"
#include "zone/journal.h"

/* The format version this code writes and reads. */
#define ZONE_JOURNAL_FILE_VERSION 1

/**
 * Write @p journal of the zone @p apex (lowercase wire) to @p f in the format above, with
 * @p digest, the zone_digest() of the version the journal ends at. Returns 0, or a negative
 * errno when a write failed. Control thread.
 */
int zone_journal_write(FILE *f, const uint8_t *apex, uint64_t digest, const zone_journal_t *journal)
    STEER_NONNULL(1, 2, 4) STEER_WUR;

/**
 * Replace the file @p path with @p journal (zone_journal_write(), then steer_file_replace():
 * the old file stays whole on failure). Returns 0 or a negative errno. Control thread.
 */
int zone_journal_save(const char *path, const uint8_t *apex, uint64_t digest,
                      const zone_journal_t *journal) STEER_NONNULL(1, 2, 4) STEER_WUR;

/**
 * Parse @p len bytes at @p data, a journal file of the zone @p apex (lowercase wire). On
 * success returns 0, in @p out a journal with one reference for the caller (NULL when the
 * file holds no change) and in @p digest the digest it was written with. Otherwise returns
 * STEER_ETRUNC (the data ends early) or STEER_EMALF (anything else) with the reason in @p err, and
 * @p out is NULL. Never trusts a length before checking it against what is left; aborts only on
 * out-of-memory. Any thread (no state).
 */
int zone_journal_parse(const uint8_t *data, size_t len, const uint8_t *apex, zone_journal_t **out,
                       uint64_t *digest, char *err, size_t errlen)
    STEER_NONNULL(1, 3, 4, 5, 6) STEER_WUR;

/**
 * zone_journal_parse() of the file @p path. Returns STEER_ENOENT when there is no such file,
 * another negative errno when it cannot be read, or what zone_journal_parse() returns.
 * Control thread.
 */
int zone_journal_load(const char *path, const uint8_t *apex, zone_journal_t **out, uint64_t *digest,
                      char *err, size_t errlen) STEER_NONNULL(1, 2, 3, 4, 5) STEER_WUR;
