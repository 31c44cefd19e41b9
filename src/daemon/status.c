/*
 * The status page's paths (see status.h). The files are static data; each answer carries the
 * file's ETag, so a browser revalidates with If-None-Match and gets a 304 instead of the body,
 * and "no-cache", so it does revalidate (the file names do not change across versions).
 */
#include "daemon/status.h"

#include "base/err.h"
#include "base/log.h"
#include "ctl/http.h"
#include "daemon/server.h"
#include "ops/assets.h"

/*
 * The page may load only its own files and talk only to its own origin: no inline script or
 * style, no other host, no framing, and no form submission (the token form is handled by the
 * script; without it a submit must not put the token into a URL).
 */
#define STATUS_CSP                                                                                 \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "                \
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
#define STATUS_CACHE "no-cache"

static const char not_found[] = "{\"ok\": false, \"error\": \"no such page\"}\n";

static int status_page(const char *path, ctl_http_page_t *page, char *err, size_t errlen, void *ctx)
{
	(void)err;
	(void)errlen;
	(void)ctx;
	const ops_asset_t *a = ops_asset_find(path);
	page->csp = STATUS_CSP;
	if (a == NULL) {
		page->status = 404;
		page->content_type = "application/json";
		page->body = not_found;
		page->len = sizeof(not_found) - 1;
		return 0;
	}
	page->content_type = a->content_type;
	page->body = a->data;
	page->len = a->len;
	page->etag = a->etag;
	page->cache_control = STATUS_CACHE;
	return 0;
}

/*
 * Every built-in file at its own path, open (see status.h), and "/" also as the prefix that
 * answers 404 for any path nothing else serves; a closed server asks for the token first
 * there, so it does not tell which other pages exist.
 */
int status_page_register(server_t *s)
{
	for (size_t i = 0; i < ops_assets_count; i++) {
		const char *path = ops_assets[i].path;
		int ret = ctl_http_add_open_page(s->http, path, status_page, NULL);
		if (ret != 0) {
			log_err("http: status page %s: %s", path, steer_strerror(ret));
			return ret;
		}
	}
	return 0;
}
