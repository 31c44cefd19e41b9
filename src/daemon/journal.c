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
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "dns/dname.h"
#include "zone/journal_file.h"

static bool g_enabled;
/* The last write failed and said so: one line per outage, not one per zone and change. */
static bool g_write_failed;

void daemon_journal_enable(void)
{
	g_enabled = true;
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
	if (!keeps_history(cz)) {
		remove_file(path, zone->name, "the zone keeps no IXFR history");
		return NULL;
	}
	zone_journal_t *loaded = NULL;
	uint64_t digest = 0;
	char err[512];
	int ret = zone_journal_load(path, zone->apex, &loaded, &digest, err, sizeof(err));
	if (ret == STEER_ENOENT || (ret == 0 && loaded == NULL))
		return NULL;
	if (ret != 0) {
		log_warn("zone %s: journal %s ignored, IXFR starts with an empty history: %s",
		         zone->name, path, err);
		return NULL;
	}
	const char *why = mismatch(loaded, digest, zone, err, sizeof(err));
	zone_journal_t *j = why ? NULL : zone_journal_resume(loaded, zone, cz->ixfr_history);
	if (why != NULL) {
		log_warn("zone %s: journal %s discarded: %s", zone->name, path, why);
		remove_file(path, zone->name, "it does not lead to the zone served");
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
		remove_file(path, e->zone->name, "its IXFR history ended");
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
