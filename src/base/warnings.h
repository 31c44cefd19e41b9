/*
 * A list of warnings collected while building something from operator input (a view from the
 * configuration, a reload): messages that did not stop the build but that the operator must
 * see. The builder appends; the caller prints them (steerctl reload, --check-config) and logs
 * them once. Not thread-safe: one owner at a time, on the config/reload thread.
 */
#pragma once

#include <stddef.h>

#include "base/compiler.h"

typedef struct {
	char **msg; /* owned, each owned, in the order added */
	size_t n;
	size_t cap;
} steer_warnings_t;

/** Empty list (equivalent to zero-initialising it). */
void steer_warnings_init(steer_warnings_t *w) STEER_NONNULL(1);

/**
 * Append a printf-formatted message. @p w may be NULL (the warning is then dropped: callers
 * that do not collect warnings pass NULL). Aborts on out-of-memory.
 */
void steer_warnings_add(steer_warnings_t *w, const char *fmt, ...) STEER_NONNULL(2)
    STEER_PRINTF(2, 3);

/** Free every message and empty the list (reusable afterwards). */
void steer_warnings_clear(steer_warnings_t *w) STEER_NONNULL(1);
