/*
 * The daemon's side of IXFR histories on disk: where a zone's journal file lives
 * (<server.storage>/<domain>.journal), reading it back when a zone first enters the zone set,
 * and rewriting it when a new zone set carries a new history. Control thread only; nothing
 * here runs before daemon_journal_enable(), so --check-config neither reads nor writes. The
 * only file ever removed is one this process wrote itself; a daemon without server.storage
 * (quick mode) keeps its histories in memory.
 */
#pragma once

#include "conf/conf.h"
#include "zone/journal.h"
#include "zone/zone_set.h"

/** Let the functions below touch the disk: the running daemon calls it before its first
 *  zone build. */
void daemon_journal_enable(void);

/** Stop touching the disk and forget which files this process wrote (at shutdown, after the
 *  last zone set was published). */
void daemon_journal_stop(void);

/**
 * The history to serve @p zone (configured as @p cz of @p conf) with when it enters the zone
 * set without a previous version (at start, or a zone added by a reload): the journal file's,
 * when it is sound and ends at @p zone's serial and records (a new reference), else NULL with
 * a log line. A file is never removed here, whatever it holds: one that does not fit is
 * replaced at the zone's next change, and a zone that keeps no history (no xfr-allow,
 * ixfr-history 0) does not even read it.
 */
zone_journal_t *daemon_journal_restore(const conf_t *conf, const conf_zone_t *cz,
                                       const zone_t *zone) STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Write the journal file of every zone of @p conf whose history in @p set differs from its
 * history in @p old (the set being replaced). Where the history ended (ixfr-history 0, no
 * xfr-allow any more, a serial that went back), the file is removed only when this process
 * wrote it; another is left in place (it may be another daemon's). Zones new in @p set came
 * from their file (daemon_journal_restore()) and are left alone. Called before @p set is
 * published; a file that cannot be written is logged (once until one can) and the history
 * keeps serving from memory.
 */
void daemon_journal_persist(const conf_t *conf, const zone_set_t *old, const zone_set_t *set)
    STEER_NONNULL(1, 2, 3);
