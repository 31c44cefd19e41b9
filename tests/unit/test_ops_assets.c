/*
 * Tests for src/ops/assets: the built-in status page files. Every file is found at its path
 * with its content type and a quoted ETag, paths match exactly (no traversal, no prefix
 * match), ETags differ between files, and every /assets/ URL the page names (src= and href=
 * in index.html) is built in, so the page never asks for a file the daemon lacks.
 */
#include "ops/assets.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "unit.h"

static void test_lookup(void)
{
	static const struct {
		const char *path;
		const char *type; /* NULL = must not be found */
	} rows[] = {
	    {"/", "text/html; charset=utf-8"},
	    {"/assets/status.js", "text/javascript; charset=utf-8"},
	    {"/assets/status.css", "text/css; charset=utf-8"},
	    {"/assets/favicon.svg", "image/svg+xml"},
	    {"/index.html", NULL},
	    {"/assets/", NULL},
	    {"/assets", NULL},
	    {"", NULL},
	    {"/assets/status.js/", NULL},
	    {"/assets/../assets/status.js", NULL},
	    {"/assets/STATUS.JS", NULL},
	    {"/assets/status.j", NULL},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const ops_asset_t *a = ops_asset_find(rows[i].path);
		if (rows[i].type == NULL) {
			CHECK(a == NULL, "'%s' must not be served", rows[i].path);
			continue;
		}
		CHECK(a != NULL, "'%s' is built in", rows[i].path);
		if (a == NULL)
			continue;
		CHECK(strcmp(a->content_type, rows[i].type) == 0, "'%s': type '%s', want '%s'",
		      rows[i].path, a->content_type, rows[i].type);
		CHECK(a->len > 0 && a->data != NULL, "'%s' has content", rows[i].path);
		size_t n = strlen(a->etag);
		CHECK(n > 2 && a->etag[0] == '"' && a->etag[n - 1] == '"', "'%s': ETag %s quoted",
		      rows[i].path, a->etag);
	}
}

static void test_etags_differ(void)
{
	for (size_t i = 0; i < ops_assets_count; i++)
		for (size_t j = i + 1; j < ops_assets_count; j++)
			CHECK(strcmp(ops_assets[i].etag, ops_assets[j].etag) != 0,
			      "%s and %s share ETag %s", ops_assets[i].path, ops_assets[j].path,
			      ops_assets[i].etag);
}

/* Each attribute="/assets/..." in the page must name a built-in file. */
static void test_page_references_exist(void)
{
	const ops_asset_t *page = ops_asset_find("/");
	if (page == NULL)
		return;
	char html[65536];
	CHECK(page->len < sizeof(html), "index.html fits the test buffer (%zu)", page->len);
	if (page->len >= sizeof(html))
		return;
	memcpy(html, page->data, page->len);
	html[page->len] = '\0';
	size_t refs = 0;
	for (const char *p = strstr(html, "=\"/assets/"); p; p = strstr(p + 1, "=\"/assets/")) {
		const char *start = p + 2, *end = strchr(start, '"');
		char path[256];
		if (end == NULL || (size_t)(end - start) >= sizeof(path))
			break;
		memcpy(path, start, (size_t)(end - start));
		path[end - start] = '\0';
		CHECK(ops_asset_find(path) != NULL, "index.html names %s, which is not built in",
		      path);
		refs++;
	}
	CHECK(refs >= 3, "index.html names its script, style sheet and icon (%zu refs)", refs);
	CHECK(strstr(html, "http://") == NULL && strstr(html, "https://") == NULL,
	      "index.html loads nothing from elsewhere");
}

int main(void)
{
	test_lookup();
	test_etags_differ();
	test_page_references_exist();
	return unit_finish("ops_assets");
}
