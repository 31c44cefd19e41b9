/*
 * Fuzz target: the state files steerd reads back at start and on reload, the GSLB admin
 * overrides (gslb_overrides_load), the nets baseline (gslb_nets_baseline_load) and the monitor
 * states (src/health/engine.c, included to reach its static reader). The input is written to a
 * memfd and read through /proc/self/fd. Besides sanitizer findings it checks what the readers
 * promise: accepted override rules are storable (a pattern without blanks, a weight in range) and
 * survive a save and reload unchanged; a rejected file leaves the list as it was and names the
 * file; saved monitor states have clean keys.
 */
#include "../../src/health/engine.c"

#include <sys/mman.h>

#include "fuzz.h"
#include "gslb/health.h"
#include "gslb/nets_baseline.h"

static int memfd_path(const char *name, const uint8_t *data, size_t size, char *path, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, data, size) == (ssize_t)size);
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

static bool clean_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

static char dir[64]; /* for the round trip, removed at exit */

static void remove_dir(void)
{
	rmdir(dir);
}

static void check_overrides(const char *path)
{
	gslb_overrides_t ov, back;
	gslb_overrides_init(&ov);
	gslb_overrides_init(&back);
	char err[2048];
	FUZZ_CHECK(gslb_overrides_set(&ov, "keep/*", true, 0, err, sizeof(err)) == 0);
	if (gslb_overrides_load(&ov, path, err, sizeof(err)) != 0) {
		FUZZ_CHECK(ov.count == 1 && strcmp(ov.rules[0].pattern, "keep/*") == 0);
		FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0);
		gslb_overrides_deinit(&ov);
		return;
	}
	for (size_t i = 0; i < ov.count; i++) {
		FUZZ_CHECK(clean_token(ov.rules[i].pattern) && !strchr(ov.rules[i].pattern, '#'));
		FUZZ_CHECK(ov.rules[i].kind == GSLB_OVERRIDE_STATE ||
		           ov.rules[i].kind == GSLB_OVERRIDE_WEIGHT);
		FUZZ_CHECK(ov.rules[i].expires_ms >= 0); /* 0 = never; a lapsed one is skipped */
	}
	/* Round trip through a real file (tmpfs: the save fsyncs). */
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s/steer-fuzz-XXXXXX",
		         access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		FUZZ_CHECK(mkdtemp(dir) != NULL);
		atexit(remove_dir);
	}
	char saved[96];
	snprintf(saved, sizeof(saved), "%s/overrides.state", dir);
	FUZZ_CHECK(gslb_overrides_save(&ov, saved, err, sizeof(err)) == 0);
	FUZZ_CHECK(gslb_overrides_load(&back, saved, err, sizeof(err)) == 0);
	FUZZ_CHECK(back.count == ov.count);
	for (size_t i = 0; i < ov.count; i++) {
		const gslb_override_t *a = &ov.rules[i], *b = &back.rules[i];
		FUZZ_CHECK(strcmp(a->pattern, b->pattern) == 0 && a->kind == b->kind &&
		           a->down == b->down && a->weight == b->weight &&
		           a->expires_ms == b->expires_ms);
	}
	unlink(saved);
	gslb_overrides_deinit(&ov);
	gslb_overrides_deinit(&back);
}

/* A baseline is accepted whole or refused with the file named; what is in it can be found. */
static void check_nets_baseline(const char *path)
{
	gslb_nets_baseline_t *b = NULL;
	char err[1024] = "";
	if (gslb_nets_baseline_load(path, &b, err, sizeof(err)) != 0) {
		FUZZ_CHECK(b == NULL && strncmp(err, path, strlen(path)) == 0);
		return;
	}
	FUZZ_CHECK(b != NULL);
	size_t count;
	(void)gslb_nets_baseline_find(b, "isp", "nets/unicom.txt", &count);
	gslb_nets_baseline_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;
	if (!quiet) {
		log_setup(LOG_TARGET_STDERR, LOG_LEVEL_ERR); /* malformed lines are logged */
		quiet = true;
	}
	char path[64];
	int fd = memfd_path("state", data, size, path, sizeof(path));
	size_t n;
	saved_t *saved = state_file_read(path, &n);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(clean_token(saved[i].key) && saved[i].key[0] != '#');
	saved_free(saved, n);
	check_overrides(path);
	check_nets_baseline(path);
	close(fd);
	return 0;
}
