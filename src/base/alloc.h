/*
 * Allocation wrappers for start-up, config and reload paths: they abort on out-of-memory, so
 * callers need no error path. Never use them on the packet path (which allocates nothing).
 */
#pragma once

#include <stddef.h>

#include "base/compiler.h"

/** malloc() that aborts on failure. */
STEER_WUR void *xmalloc(size_t size);
/** calloc() that aborts on failure or multiplication overflow. */
STEER_WUR void *xcalloc(size_t n, size_t size);
/** realloc() that aborts on failure. */
STEER_WUR void *xrealloc(void *ptr, size_t size);
/** strdup() that aborts on failure; NULL in, NULL out. */
STEER_WUR char *xstrdup(const char *s);

/** @p a, @p b and @p c concatenated into one new string ("KEY" "=" "VALUE"). */
STEER_WUR char *xstrcat3(const char *a, const char *b, const char *c) STEER_NONNULL(1, 2, 3);
/** Copy of @p size bytes of @p src, aborts on failure. */
STEER_WUR void *xmemdup(const void *src, size_t size);
