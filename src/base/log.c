/*
 * Logger. The configuration is three atomics so any thread can read it while the control
 * thread reconfigures on reload.
 */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"

static _Atomic int log_target = LOG_TARGET_STDERR;
static _Atomic int log_level = LOG_LEVEL_INFO;
/* 1: stderr is journald's stream (it stamps lines and reads "<N>"); -1: not looked yet. */
static _Atomic int log_journal = -1;
/* The program name in every line; set once at start-up, before any thread logs. */
static const char *log_ident = "steerd";

/* Per window, a call site may emit this many messages before it is muted for the rest of it. */
#define RATELIMIT_BURST 5

static const char *const level_names[] = {
    [LOG_LEVEL_ERR] = "error", [LOG_LEVEL_WARNING] = "warning", [LOG_LEVEL_NOTICE] = "notice",
    [LOG_LEVEL_INFO] = "info", [LOG_LEVEL_DEBUG] = "debug",
};

void log_set_ident(const char *ident)
{
	log_ident = ident;
}

void log_setup(log_target_t target, log_level_t level)
{
	if (target == LOG_TARGET_SYSLOG && atomic_load(&log_target) != LOG_TARGET_SYSLOG)
		openlog(log_ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	atomic_store(&log_target, target);
	atomic_store(&log_level, level);
	atomic_store(&log_journal, getenv("JOURNAL_STREAM") != NULL);
}

/* systemd sets JOURNAL_STREAM for a service whose stderr goes to the journal. */
static bool under_journal(void)
{
	int v = atomic_load_explicit(&log_journal, memory_order_relaxed);
	if (v < 0) {
		v = getenv("JOURNAL_STREAM") != NULL;
		atomic_store_explicit(&log_journal, v, memory_order_relaxed);
	}
	return v != 0;
}

int log_timestamp(char *buf, size_t size)
{
	struct timespec now;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &now);
	if (!localtime_r(&now.tv_sec, &tm) || size < 30) {
		if (size > 0)
			buf[0] = '\0';
		return 0;
	}
	size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
	long off = tm.tm_gmtoff / 60;
	int m = snprintf(buf + n, size - n, ".%03ld%c%02ld:%02ld", now.tv_nsec / 1000000,
	                 off < 0 ? '-' : '+', labs(off) / 60, labs(off) % 60);
	return m < 0 ? (int)n : (int)n + m;
}

int log_level_parse(const char *name, log_level_t *out)
{
	for (int i = LOG_LEVEL_ERR; i <= LOG_LEVEL_DEBUG; i++) {
		if (strcmp(name, level_names[i]) == 0) {
			*out = (log_level_t)i;
			return 0;
		}
	}
	return STEER_EINVAL;
}

const char *log_level_name(log_level_t level)
{
	if (level < LOG_LEVEL_ERR || level > LOG_LEVEL_DEBUG)
		return "unknown";
	return level_names[level];
}

bool log_enabled(log_level_t level)
{
	return (int)level <= atomic_load_explicit(&log_level, memory_order_relaxed);
}

static void log_vmsg(log_level_t level, const char *fmt, va_list ap)
{
	if (atomic_load(&log_target) == LOG_TARGET_SYSLOG) {
		vsyslog((int)level, fmt, ap);
		return;
	}
	char line[1024], stamp[48];
	int n;
	if (under_journal()) {
		n = snprintf(line, sizeof(line), "<%d>%s[%s]: ", (int)level, log_ident,
		             level_names[level]);
	} else {
		log_timestamp(stamp, sizeof(stamp));
		n = snprintf(line, sizeof(line), "%s %s[%s]: ", stamp, log_ident,
		             level_names[level]);
	}
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	/* One write per line so concurrent threads never interleave inside a line. */
	ssize_t ignored = write(STDERR_FILENO, line, len);
	(void)ignored;
}

void log_msg(log_level_t level, const char *fmt, ...)
{
	if (!log_enabled(level))
		return;
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

void log_ratelimited(log_ratelimit_t *state, log_level_t level, const char *fmt, ...)
{
	if (!log_enabled(level))
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
	/* Racy by design: worst case a few extra lines when two threads hit the same site. */
	if (now.tv_sec != state->window_start) {
		if (state->suppressed > 0)
			log_msg(level, "(%d similar messages suppressed)", state->suppressed);
		state->window_start = now.tv_sec;
		state->in_window = 0;
		state->suppressed = 0;
	}
	if (state->in_window++ >= RATELIMIT_BURST) {
		state->suppressed++;
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}
