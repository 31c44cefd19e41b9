/*
 * One printf-checked logger. Any thread may log; each message is a single write(2) so lines
 * never interleave. On the packet path use log_ratelimited() only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/compiler.h"

typedef enum {
	LOG_LEVEL_ERR = 3,
	LOG_LEVEL_WARNING = 4,
	LOG_LEVEL_NOTICE = 5,
	LOG_LEVEL_INFO = 6,
	LOG_LEVEL_DEBUG = 7,
} log_level_t;

typedef enum {
	LOG_TARGET_STDERR, /* "TIMESTAMP steerd[level]: message"; under journald (JOURNAL_STREAM
	                      set) "<N>steerd[level]: message" and journald stamps the time */
	LOG_TARGET_SYSLOG,
} log_target_t;

/**
 * Name the program in every line and in syslog ("steerd" unless set): another binary of the
 * project (steer-probe) calls this first, before log_setup() and before any thread exists.
 * @p ident is borrowed (a string literal).
 */
void log_set_ident(const char *ident) STEER_NONNULL(1);

/**
 * Configure the logger and look again whether stderr goes to journald (JOURNAL_STREAM in the
 * environment). Safe to call again on reload; not concurrently with itself.
 */
void log_setup(log_target_t target, log_level_t level);

/**
 * Write the current local time as ISO 8601 with milliseconds and UTC offset
 * ("2026-12-01T20:15:03.123+00:00", 29 bytes) into @p buf; at least 30 bytes are needed, else
 * @p buf is left empty. Returns the length written. Thread-safe, no allocation.
 */
int log_timestamp(char *buf, size_t size) STEER_NONNULL(1);

/** Parse "error", "warning", "notice", "info", "debug". Returns 0 or STEER_EINVAL. */
int log_level_parse(const char *name, log_level_t *out) STEER_NONNULL(1, 2) STEER_WUR;

/** Name of a level, for config dumps. */
const char *log_level_name(log_level_t level);

/** True when messages of @p level are emitted; lets callers skip building expensive text. */
bool log_enabled(log_level_t level);

/** Emit one message. Thread-safe. */
void log_msg(log_level_t level, const char *fmt, ...) STEER_PRINTF(2, 3);

/**
 * Emit at most a few messages per second per call site (@p state is a static at the call
 * site); suppressed messages are counted and reported with the next one. Thread-safe, no
 * allocation, suitable for the packet path.
 */
typedef struct {
	long window_start; /* seconds, monotonic */
	int in_window;
	int suppressed;
} log_ratelimit_t;
void log_ratelimited(log_ratelimit_t *state, log_level_t level, const char *fmt, ...)
    STEER_PRINTF(3, 4);

#define log_err(...)    log_msg(LOG_LEVEL_ERR, __VA_ARGS__)
#define log_warn(...)   log_msg(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_LEVEL_NOTICE, __VA_ARGS__)
#define log_info(...)   log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
	do {                                                                                       \
		if (log_enabled(LOG_LEVEL_DEBUG))                                                  \
			log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__);                                     \
	} while (0)
