/*
 * Replacing small state files safely (admin overrides, monitor states): the new content is
 * written to a temporary file in the same folder, synced, and renamed over the old one, so a
 * crash leaves either the old file or the new one, never a torn one.
 */
#pragma once

#include <stdio.h>
#include <sys/types.h>

#include "base/compiler.h"

/* Writes the file's content to @p f; returns 0 or a negative errno. */
typedef int (*steer_file_fill_cb)(FILE *f, void *ctx);

/**
 * Replace @p path with what @p fill writes, with permissions @p mode: temporary file, fsync,
 * rename, then a best-effort fsync of the folder. On any failure the old file is untouched,
 * the temporary file is removed and a negative errno is returned. Not thread-safe against
 * another writer of the same path; control thread.
 */
int steer_file_replace(const char *path, mode_t mode, steer_file_fill_cb fill, void *ctx)
    STEER_NONNULL(1, 3) STEER_WUR;
