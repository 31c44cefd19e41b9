/*
 * The status page's files (src/ops/status/), built into the binary by embed_assets.py so the
 * daemon serves them without reading the disk or reaching the internet. Static, read-only
 * data: any thread.
 */
#pragma once

#include <stddef.h>

#include "base/compiler.h"

/* One built-in file. Every member is static data. */
typedef struct {
	const char *path;         /* where it is served: "/" (index.html), "/assets/status.js" */
	const char *content_type; /* "text/javascript; charset=utf-8" */
	const unsigned char *data;
	size_t len;
	const char *etag; /* strong ETag with its quotes: a digest of the content */
} ops_asset_t;

/* The generated table, sorted by file name (assets_data.c). */
extern const ops_asset_t ops_assets[];
extern const size_t ops_assets_count;

/**
 * The asset served at URL path @p path ("/", "/assets/status.css"; no query string), or NULL
 * when there is none. Paths are compared exactly: "/assets/../x" finds nothing.
 */
const ops_asset_t *ops_asset_find(const char *path) STEER_NONNULL(1);
