/*
 * Journal files of the running daemon (see journal.h). Writes happen on the control thread
 * just before a new zone set is published, never on the query path; a write that fails leaves
 * the previous file whole, and IXFR keeps serving from the history in memory.
 */
#include "daemon/journal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "dns/dname.h"
#include "zone/journal_file.h"

static bool g_enabled;
/* The last write failed and said so: one line per outage, not one per zone and change. */
static bool g_write_failed;
/*
 * The journal files this process wrote (full paths, sorted, owned): the only ones it may
 * remove. A file found at start may belong to another daemon sharing the folder, or to this
 * zone before an edit; it is never deleted, only replaced by the next change.
 */
static char **g_written;
static size_t g_n_written, g_cap_written;

void daemon_journal_enable(void)
{
	g_enabled = true;
}

void daemon_journal_stop(void)
{
	for (size_t i = 0; i < g_n_written; i++)
		free(g_written[i]);
	free(g_written);
	g_written = NULL;
	g_n_written = g_cap_written = 0;
	g_enabled = false;
}

/* Where @p path is in g_written, or would be inserted; *found says whether it is there. */
static size_t written_find(const char *path, bool *found)
{
	size_t lo = 0, hi = g_n_written;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(g_written[mid], path);
		if (cmp == 0) {
			*found = true;
			return mid;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static void written_add(const char *path)
{
	bool found;
	size_t at = written_find(path, &found);
	if (found)
		return;
	if (g_n_written == g_cap_written) {
		g_cap_written = g_cap_written ? 2 * g_cap_written : 16;
		g_written = xrealloc(g_written, g_cap_written * sizeof(*g_written));
	}
	memmove(&g_written[at + 1], &g_written[at], (g_n_written - at) * sizeof(*g_written));
	g_written[at] = xstrdup(path);
	g_n_written++;
}

/* Forget @p path; true when this process had written it. */
static bool written_take(const char *path)
{
	bool found;
	size_t at = written_find(path, &found);
	if (!found)
		return false;
	free(g_written[at]);
	memmove(&g_written[at], &g_written[at + 1], (g_n_written - at - 1) * sizeof(*g_written));
	g_n_written--;
	return true;
}

/* Only zones that someone may transfer keep a history, and only when asked to. */
static bool keeps_history(const conf_zone_t *cz)
{
	return cz->n_xfr_allow > 0 && cz->ixfr_history > 0;
}

/*
 * <storage>/<domain>.journal, the domain lowercase without its trailing dot ("root" for the
 * root zone). False when the name cannot be a file name or the path does not fit.
 */
static bool journal_path(const conf_t *conf, const conf_zone_t *cz, char *buf, size_t size)
{
	char name[256];
	size_t n = strlen(cz->domain);
	if (n > 1 && cz->domain[n - 1] == '.')
		n--;
	if (n >= sizeof(name) || strchr(cz->domain, '/') != NULL || conf->storage == NULL)
		return false;
	for (size_t i = 0; i < n; i++)
		name[i] = (char)tolower((unsigned char)cz->domain[i]);
	name[n] = '\0';
	int len = snprintf(buf, size, "%s/%s.journal", conf->storage,
	                   strcmp(name, ".") == 0 ? "root" : name);
	return len > 0 && (size_t)len < size;
}

static void remove_file(const char *path, const char *zone, const char *why)
{
	if (unlink(path) == 0)
		log_info("zone %s: removed journal %s (%s)", zone, path, why);
	else if (errno != ENOENT)
		log_warn("zone %s: cannot remove journal %s: %s", zone, path,
		         steer_strerror(-errno));
}

/* Why @p loaded (ending with @p digest) does not lead to @p zone, or NULL when it does. */
static const char *mismatch(const zone_journal_t *loaded, uint64_t digest, const zone_t *zone,
                            char *buf, size_t size)
{
	uint32_t last = loaded->changes[loaded->n - 1]->to;
	if (last != zone->serial) {
		snprintf(buf, size, "it ends at serial %u, the zone is at %u", last, zone->serial);
		return buf;
	}
	if (digest != zone_digest(zone))
		return "the zone's records differ from the version it ends at (same serial)";
	return NULL;
}

zone_journal_t *daemon_journal_restore(const conf_t *conf, const conf_zone_t *cz,
                                       const zone_t *zone)
{
	char path[PATH_MAX];
	if (!g_enabled || !journal_path(conf, cz, path, sizeof(path)))
		return NULL;
	/* Not even read: the file may be another daemon's, and it is left as found. */
	if (!keeps_history(cz))
		return NULL;
	zone_journal_t *loaded = NULL;
	uint64_t digest = 0;
	char err[512];
	int ret = zone_journal_load(path, zone->apex, &loaded, &digest, err, sizeof(err));
	if (ret == STEER_ENOENT || (ret == 0 && loaded == NULL))
		return NULL;
	if (ret != 0) {
		log_warn("zone %s: journal %s ignored, IXFR starts with an empty history (the "
		         "file is replaced at the next change): %s",
		         zone->name, path, err);
		return NULL;
	}
	const char *why = mismatch(loaded, digest, zone, err, sizeof(err));
	zone_journal_t *j = why ? NULL : zone_journal_resume(loaded, zone, cz->ixfr_history);
	if (why != NULL) {
		log_warn("zone %s: journal %s discarded: %s; IXFR starts with an empty history "
		         "(the file is replaced at the next change)",
		         zone->name, path, why);
	} else if (j != NULL) {
		log_info("zone %s: IXFR history of %zu changes (serials %u to %u) read from %s",
		         zone->name, j->n, j->changes[0]->from, zone->serial, path);
	}
	zone_journal_unref(loaded);
	return j;
}

/* The storage folder on a fresh system: created as for secondary zones (not its parents). */
static int save_creating_dir(const char *path, const zone_t *zone, const zone_journal_t *j)
{
	uint64_t digest = zone_digest(zone);
	int ret = zone_journal_save(path, zone->apex, digest, j);
	if (ret != -ENOENT)
		return ret;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return ret;
	*slash = '\0';
	if (mkdir(dir, 0750) == 0)
		log_info("created %s for zone journals", dir);
	return zone_journal_save(path, zone->apex, digest, j);
}

static void persist_one(const char *path, const zone_set_entry_t *e)
{
	if (e->journal == NULL) {
		if (written_take(path))
			remove_file(path, e->zone->name, "its IXFR history ended");
		else
			log_info("zone %s: IXFR history ended; journal %s, not written by this "
			         "process, is left in place",
			         e->zone->name, path);
		return;
	}
	int ret = save_creating_dir(path, e->zone, e->journal);
	if (ret != 0 && !g_write_failed)
		log_warn("zone %s: cannot write journal %s: %s; IXFR keeps its history in memory "
		         "only (further failures are not logged)",
		         e->zone->name, path, steer_strerror(ret));
	else if (ret == 0 && g_write_failed)
		log_info("zone %s: journal %s written again", e->zone->name, path);
	g_write_failed = ret != 0;
	if (ret == 0)
		written_add(path);
}

void daemon_journal_persist(const conf_t *conf, const zone_set_t *old, const zone_set_t *set)
{
	if (!g_enabled)
		return;
	for (size_t i = 0; i < conf->n_zones; i++) {
		const conf_zone_t *cz = &conf->zones[i];
		uint8_t apex[DNS_DNAME_MAXLEN];
		if (dname_from_str(cz->domain, apex) < 0)
			continue;
		dname_lower(apex);
		const zone_set_entry_t *e = zone_set_get(set, apex);
		const zone_set_entry_t *prev = zone_set_get(old, apex);
		char path[PATH_MAX];
		if (e == NULL || prev == NULL || prev->journal == e->journal ||
		    !journal_path(conf, cz, path, sizeof(path)))
			continue;
		persist_one(path, e);
	}
}
