/*
 * Unit tests for gslb/nets_set.c: provenance lookup (including blocks the tree merges),
 * min-prefix-length, duplicates across entries, the reload shrink guard and its overrides.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "gslb/nets_set.h"
#include "unit.h"

#define MAX_FILES 4

static char paths[MAX_FILES][64];

static steer_prefix_t pfx(const char *text)
{
	steer_prefix_t p;
	if (steer_prefix_parse(text, &p) != 0)
		abort();
	return p;
}

/* Write @p text to temporary file @p i (created on first use). */
static const char *put(unsigned i, const char *text)
{
	if (!paths[i][0]) {
		snprintf(paths[i], sizeof(paths[i]), "/tmp/test_nets_set_%u_XXXXXX", i);
		int fd = mkstemp(paths[i]);
		if (fd < 0)
			abort();
		close(fd);
	}
	FILE *f = fopen(paths[i], "w");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
	return paths[i];
}

/* A map of up to three entries: files 0 and 1 (when given) and inline prefixes. */
typedef struct {
	conf_nets_t nets[3];
	conf_map_t map;
	uint32_t values[3];
} map_t;

static void map_init(map_t *m, const char *f0, uint32_t v0, const char *f1, uint32_t v1)
{
	memset(m, 0, sizeof(*m));
	size_t n = 0;
	if (f0) {
		m->nets[n] = (conf_nets_t){.file = (char *)put(0, f0), .line = 10};
		m->values[n++] = v0;
	}
	if (f1) {
		m->nets[n] = (conf_nets_t){.file = (char *)put(1, f1), .line = 11};
		m->values[n++] = v1;
	}
	m->map = (conf_map_t){.name = "isp", .nets = m->nets, .n_nets = n};
}

static void map_inline(map_t *m, steer_prefix_t *cidr, size_t n, uint32_t value)
{
	m->nets[m->map.n_nets] = (conf_nets_t){.cidr = cidr, .n_cidr = n, .line = 12};
	m->values[m->map.n_nets++] = value;
}

static const gslb_nets_opts_t defaults = {
    .map = "isp", .conf_path = "steer.yaml", .min4 = 8, .min6 = 16, .max_shrink = 50};

static int build(map_t *m, const gslb_nets_opts_t *o, steer_warnings_t *w, gslb_nets_set_t **out,
                 char *err, size_t len)
{
	return gslb_nets_set_build(&m->map, m->values, o, w, out, err, len);
}

/* Where the lookup of @p addr/@p len lands: "FILE#:LINE PREFIX" or "none". */
static void where(const gslb_nets_set_t *s, const char *addr, unsigned len, char *buf, size_t size)
{
	uint8_t a[16] = {0};
	int fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(fam, addr, a) != 1)
		abort();
	const gslb_nets_item_t *it = gslb_nets_set_lookup(s, fam, a, len);
	if (!it) {
		snprintf(buf, size, "none");
		return;
	}
	gslb_nets_set_describe(s, it, buf, size);
	/* the temporary names are random: keep the entry number */
	for (unsigned i = 0; i < MAX_FILES; i++) {
		size_t pl = strlen(paths[i]);
		if (pl && strncmp(buf, paths[i], pl) == 0) {
			char rest[256];
			snprintf(rest, sizeof(rest), "%s", buf + pl);
			snprintf(buf, size, "f%u%s", i, rest);
		}
	}
}

static void test_lookup(void)
{
	map_t m;
	map_init(&m, "# a\n10.0.0.0/9\n10.128.0.0/9\n192.0.2.0/24\n2001:db8::/32\n", 1,
	         "11.1.0.0/16\n::ffff:198.51.100.0/120\n", 2);
	steer_prefix_t cidr[] = {pfx("203.0.113.0/24")};
	map_inline(&m, cidr, 1, 3);
	gslb_nets_set_t *s = NULL;
	steer_warnings_t w = {0};
	char err[512] = "";
	int ret = build(&m, &defaults, &w, &s, err, sizeof(err));
	CHECK(ret == 0 && s && w.n == 0, "build: %d '%s' %zu warnings", ret, err, w.n);
	if (!s)
		return;
	static const struct {
		const char *addr;
		unsigned len;
		const char *want;
	} rows[] = {
	    {"10.200.1.1", 32, "f0:3: 10.128.0.0/9"}, /* the tree merges the /9s into 10/8 */
	    {"10.2.0.0", 24, "f0:2: 10.0.0.0/9"},
	    {"11.1.2.3", 32, "f1:1: 11.1.0.0/16"},
	    {"10.1.0.0", 8, "none"}, /* a /8 source is not inside a /9 */
	    {"192.0.2.77", 32, "f0:4: 192.0.2.0/24"},
	    {"198.51.100.9", 32, "f1:2: 198.51.100.0/24"}, /* IPv4-mapped in the file */
	    {"::ffff:198.51.100.9", 128, "f1:2: 198.51.100.0/24"},
	    {"203.0.113.5", 32, "steer.yaml:12: inline cidr 203.0.113.0/24"},
	    {"2001:db8:5::1", 128, "f0:5: 2001:db8::/32"},
	    {"2001:db9::1", 128, "none"},
	    {"8.8.8.8", 32, "none"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		char got[512];
		where(s, rows[i].addr, rows[i].len, got, sizeof(got));
		CHECK(strcmp(got, rows[i].want) == 0, "%s/%u: '%s' want '%s'", rows[i].addr,
		      rows[i].len, got, rows[i].want);
	}
	const gslb_nets_source_t *src;
	size_t n = gslb_nets_set_sources(s, &src);
	CHECK(n == 3 && src[0].n4 == 3 && src[0].n6 == 1 && src[1].n4 == 2 && src[1].n6 == 0 &&
	          src[2].n4 == 1 && src[2].path == NULL && src[2].conf_line == 12 &&
	          src[0].loaded_at > 0,
	      "sources: %zu", n);

	/* The tree built from the set answers the longest prefix. */
	gslb_nettree_builder_t *b = gslb_nettree_builder_new(0);
	CHECK(gslb_nets_set_apply(s, b, NULL) == 0, "apply");
	gslb_nettree_t *t = gslb_nettree_build(b);
	uint8_t a[4] = {11, 1, 2, 3}, scope;
	CHECK(gslb_nettree_lookup(t, AF_INET, a, &scope) == 2 && scope == 16, "tree 11.1.2.3");
	a[0] = 10;
	a[1] = 200;
	CHECK(gslb_nettree_lookup(t, AF_INET, a, &scope) == 1 && scope == 8, "tree 10.200: merged");
	gslb_nettree_free(t);
	gslb_nets_set_free(s);
}

static void test_errors(void)
{
	static const struct {
		const char *f0, *f1;
		uint32_t v1;
		bool allow_short;
		const char *want; /* message after the temporary file name, or a warning */
		bool warning;
	} rows[] = {
	    {"10.0.0.0/8\n128.0.0.0/1\n", NULL, 0, false,
	     ":2: 128.0.0.0/1 is shorter than map isp's minimum /8 for IPv4 (min-prefix-length); "
	     "allow it with allow-short-prefixes: true on this nets entry",
	     false},
	    {"0.0.0.0/0\n", NULL, 0, true, NULL, false},
	    {"2001:db8::/32\n2000::/3\n", NULL, 0, false,
	     ":2: 2000::/3 is shorter than map isp's minimum /16 for IPv6", false},
	    {"221.193.0.0/1\n", NULL, 0, false,
	     ":1: host bits set in '221.193.0.0/1': /1 of it is 128.0.0.0/1", false},
	    {"10.0.0.0/8\n192.0.2.0/24\n", "192.0.2.0/24\n", 2, false,
	     ":1: map isp: 192.0.2.0/24 is also at ", false},
	    {"10.0.0.0/8\n192.0.2.0/24\n", "192.0.2.0/24\n", 1, false,
	     ":1: map isp: 192.0.2.0/24 is also at ", true},
	    {"192.0.2.0/24\n10.0.0.0/8\n192.0.2.0/24\n", NULL, 0, false,
	     ":3: map isp: 192.0.2.0/24 is also at ", true},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		map_t m;
		map_init(&m, rows[i].f0, 1, rows[i].f1, rows[i].v1);
		m.nets[0].allow_short_prefixes = rows[i].allow_short;
		gslb_nets_set_t *s = NULL;
		steer_warnings_t w = {0};
		char err[512] = "";
		int ret = build(&m, &defaults, &w, &s, err, sizeof(err));
		const char *text = rows[i].warning ? (w.n ? w.msg[0] : "") : err;
		bool ok = rows[i].want == NULL ? ret == 0 && w.n == 0
		          : rows[i].warning
		              ? ret == 0 && w.n == 1 && strstr(text, rows[i].want)
		              : ret == STEER_ECONF && !s && strstr(text, rows[i].want);
		CHECK(ok, "row %zu: %d '%s' (%zu warnings)", i, ret, text, w.n);
		if (rows[i].want && rows[i].f1) /* both places are named */
			CHECK(strstr(text, paths[0]) && strstr(text, paths[1]), "row %zu: '%s'", i,
			      text);
		steer_warnings_clear(&w);
		gslb_nets_set_free(s);
	}
}

static void test_shrink(void)
{
	static const char ten[] = "10.0.0.0/8\n11.0.0.0/8\n12.0.0.0/8\n13.0.0.0/8\n14.0.0.0/8\n"
	                          "15.0.0.0/8\n16.0.0.0/8\n17.0.0.0/8\n18.0.0.0/8\n2001:db8::/32\n";
	map_t m;
	map_init(&m, ten, 1, "192.0.2.0/24\n", 2);
	gslb_nets_set_t *running = NULL;
	char err[1024] = "";
	CHECK(build(&m, &defaults, NULL, &running, err, sizeof(err)) == 0, "running: %s", err);
	if (!running)
		return;
	static const struct {
		const char *now;
		bool force, allow;
		int ret;
		const char *want; /* in the error, or in the one warning when ret is 0 */
	} rows[] = {
	    {"10.0.0.0/8\n11.0.0.0/8\n12.0.0.0/8\n13.0.0.0/8\n", false, false, STEER_ECONF,
	     "has 4 prefixes, the running configuration has 10 (lost 60%, more than max-shrink "
	     "50%): reload refused"},
	    {"", false, false, STEER_ECONF,
	     "is empty, the running configuration has 10 prefixes: reload refused"},
	    {"# all commented out\n", false, false, STEER_ECONF, "is empty"},
	    {"10.0.0.0/8\n11.0.0.0/8\n12.0.0.0/8\n13.0.0.0/8\n14.0.0.0/8\n", false, false, 0, NULL},
	    {"10.0.0.0/8\n", true, false, 0,
	     "lost 90%, more than max-shrink 50%): accepted (--force)"},
	    {"", false, true, 0,
	     "is empty, the running configuration has 10 prefixes: accepted "
	     "(allow-shrink)"},
	    {ten, false, false, 0, NULL},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		map_init(&m, rows[i].now, 1, "192.0.2.0/24\n", 2);
		m.nets[0].allow_shrink = rows[i].allow;
		gslb_nets_opts_t o = defaults;
		o.running = running;
		o.force = rows[i].force;
		gslb_nets_set_t *s = NULL;
		steer_warnings_t w = {0};
		err[0] = '\0';
		int ret = build(&m, &o, &w, &s, err, sizeof(err));
		bool ok = ret == rows[i].ret;
		if (ok && ret != 0)
			ok = strstr(err, rows[i].want) && strstr(err, paths[0]) &&
			     strncmp(err, "steer.yaml:10: map isp: nets file ", 34) == 0 &&
			     strstr(err, "'steerctl reload --force'");
		else if (ok)
			ok = rows[i].want ? w.n == 1 && strstr(w.msg[0], rows[i].want) : w.n == 0;
		CHECK(ok, "row %zu: %d '%s' %zu warnings '%s'", i, ret, err, w.n,
		      w.n ? w.msg[0] : "");
		steer_warnings_clear(&w);
		gslb_nets_set_free(s);
	}
	/* Without a running set (start-up) an empty file only warns; a file the running set
	 * does not have is not compared. */
	map_init(&m, "", 1, NULL, 0);
	gslb_nets_set_t *s = NULL;
	steer_warnings_t w = {0};
	CHECK(build(&m, &defaults, &w, &s, err, sizeof(err)) == 0 && w.n == 1 &&
	          strstr(w.msg[0], " is empty"),
	      "start-up empty: %zu '%s'", w.n, w.n ? w.msg[0] : err);
	steer_warnings_clear(&w);
	gslb_nets_set_free(s);
	map_init(&m, NULL, 0, "192.0.2.0/24\n", 2);
	put(2, "");
	m.nets[1] = (conf_nets_t){.file = paths[2], .line = 13};
	m.values[1] = 1;
	m.map.n_nets = 2;
	gslb_nets_opts_t o = defaults;
	o.running = running;
	s = NULL;
	CHECK(build(&m, &o, &w, &s, err, sizeof(err)) == 0 && w.n == 1, "new empty file: %s", err);
	steer_warnings_clear(&w);
	gslb_nets_set_free(s);
	gslb_nets_set_free(running);
}

static void test_unreadable(void)
{
	map_t m;
	map_init(&m, "10.0.0.0/8\n", 1, NULL, 0);
	m.nets[0].file = "/nonexistent/nets.txt";
	gslb_nets_set_t *s = NULL;
	char err[512] = "";
	int ret = build(&m, &defaults, NULL, &s, err, sizeof(err));
	CHECK(ret == STEER_ENOENT && !s &&
	          strcmp(err, "steer.yaml:10: map isp: nets file /nonexistent/nets.txt: "
	                      "No such file or directory") == 0,
	      "missing file: %d '%s'", ret, err);
}

int main(void)
{
	test_lookup();
	test_errors();
	test_shrink();
	test_unreadable();
	for (unsigned i = 0; i < MAX_FILES; i++)
		if (paths[i][0])
			unlink(paths[i]);
	return unit_finish("test_nets_set");
}
