#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"

/* mkstemp(3) wants the template's last six characters to be X. */
#define TMP_SUFFIX ".tmpXXXXXX"

/*
 * Make the rename durable: the new directory entry is only on disk once the folder is synced.
 * Best effort: a failure here leaves a complete file that may revert to the old one on power
 * loss, which is no reason to report the write as failed.
 */
static void sync_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = xstrdup(slash ? path : ".");
	if (slash)
		dir[slash == path ? 1 : slash - path] = '\0'; /* "/f" lives in "/" */
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
	free(dir);
}

/* Fill, flush, sync and close @p fd (always closed). */
static int write_fd(int fd, steer_file_fill_cb fill, void *ctx)
{
	FILE *f = fdopen(fd, "w");
	if (!f) {
		int ret = -errno;
		close(fd);
		return ret;
	}
	int ret = fill(f, ctx);
	if (!ret && ferror(f))
		ret = -EIO; /* fprintf does not say why; fflush below usually will */
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		ret = ret ? ret : -errno;
	if (fclose(f) != 0 && !ret)
		ret = -errno;
	return ret;
}

int steer_file_replace(const char *path, mode_t mode, steer_file_fill_cb fill, void *ctx)
{
	size_t len = strlen(path);
	char *tmp = xmalloc(len + sizeof(TMP_SUFFIX));
	memcpy(tmp, path, len);
	memcpy(tmp + len, TMP_SUFFIX, sizeof(TMP_SUFFIX));
	int ret = 0;
	int fd = mkstemp(tmp);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	/* mkstemp makes 0600; state files are not secret and operators read them. */
	if (fchmod(fd, mode) != 0) {
		ret = -errno;
		close(fd);
	} else {
		ret = write_fd(fd, fill, ctx);
	}
	if (!ret && rename(tmp, path) != 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
	else
		sync_parent(path);
out:
	free(tmp);
	return ret;
}
