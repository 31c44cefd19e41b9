/*
 * Statistics snapshots (see snapshots.h). Control thread only.
 */
#include "daemon/snapshots.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"

static int open_append(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
	return fd < 0 ? -errno : fd;
}

char *snapshots_line(double time, const char *node, json_t *stats)
{
	json_t *row = json_pack("{s:f, s:s, s:O}", "time", time, "node", node, "stats", stats);
	if (row == NULL)
		return NULL;
	char *text = json_dumps(row, JSON_COMPACT);
	json_decref(row);
	return text;
}

/* One whole line in one write(2): O_APPEND keeps lines of concurrent writers apart. */
static int write_line(const char *path, const char *text)
{
	int fd = open_append(path);
	if (fd < 0)
		return fd;
	size_t len = strlen(text);
	char *buf = xmalloc(len + 1);
	memcpy(buf, text, len);
	buf[len] = '\n';
	ssize_t n = write(fd, buf, len + 1);
	int ret = n < 0 ? -errno : (size_t)n != len + 1 ? -ENOSPC : 0;
	free(buf);
	if (close(fd) != 0 && ret == 0)
		ret = -errno;
	return ret;
}

static double now_epoch(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	snapshots_t *sn = w->data;
	json_t *stats = sn->stats(sn->ctx);
	if (stats == NULL)
		return;
	char *text = snapshots_line(now_epoch(), sn->node, stats);
	json_decref(stats);
	int ret = text ? write_line(sn->path, text) : STEER_ENOMEM;
	free(text);
	if (ret != 0 && !sn->failing)
		log_err("stats-snapshots: cannot write %s: %s (retrying every interval)", sn->path,
		        steer_strerror(ret));
	else if (ret == 0 && sn->failing)
		log_notice("stats-snapshots: writing %s again", sn->path);
	sn->failing = ret != 0;
	sn->lines += ret == 0;
}

int snapshots_start(snapshots_t *sn, struct ev_loop *loop, const char *path, unsigned interval_ms,
                    const char *node, snapshots_stats_cb stats, void *ctx, char *err, size_t errlen)
{
	memset(sn, 0, sizeof(*sn));
	int fd = open_append(path);
	if (fd < 0) {
		snprintf(err, errlen, "stats-snapshots: %s: %s", path, steer_strerror(fd));
		return fd;
	}
	close(fd);
	sn->path = xstrdup(path);
	snprintf(sn->node, sizeof(sn->node), "%s", node);
	sn->stats = stats;
	sn->ctx = ctx;
	sn->loop = loop;
	double every = (interval_ms ? interval_ms : 300000) / 1000.0;
	ev_timer_init(&sn->timer_w, on_timer, every, every);
	sn->timer_w.data = sn;
	ev_timer_start(loop, &sn->timer_w);
	log_info("stats-snapshots: appending to %s every %.3g s", path, every);
	return 0;
}

void snapshots_stop(snapshots_t *sn)
{
	if (sn->loop != NULL)
		ev_timer_stop(sn->loop, &sn->timer_w);
	sn->loop = NULL;
	free(sn->path);
	sn->path = NULL;
}
