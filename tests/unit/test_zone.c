/*
 * Unit tests of src/zone: loading (node shapes, flags, rdata handling, semantic errors and
 * warnings), change detection, reference counting and the zone set. Runs in tests/data.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "dns/dname.h"
#include "zone/zone.h"
#include "zone/zone_set.h"
#include "unit.h"

#define DIR "zones/unit/"

static zone_t *load(const char *origin, const char *file, int *ret, char *err, size_t errlen)
{
	zone_t *zone = NULL;
	*ret = zone_load(origin, file, &zone, err, errlen);
	return zone;
}

static int wire(const char *name, uint8_t out[DNS_DNAME_MAXLEN])
{
	int len = dname_from_str(name, out);
	if (len > 0)
		dname_lower(out);
	return len;
}

static const zone_node_t *node(const zone_t *zone, const char *name)
{
	uint8_t w[DNS_DNAME_MAXLEN];
	int len = wire(name, w);
	return len > 0 ? zone_find_node(zone, w, (size_t)len) : NULL;
}

static const zone_rrset_t *rrset(const zone_t *zone, const char *name, uint16_t type)
{
	const zone_node_t *n = node(zone, name);
	return n ? zone_node_rrset(n, type) : NULL;
}

/* The first record's rdata of @p name/@p type, or NULL. */
static const uint8_t *first_rdata(const zone_t *zone, const char *name, uint16_t type,
                                  uint16_t *len)
{
	const zone_rrset_t *rr = rrset(zone, name, type);
	if (rr == NULL)
		return NULL;
	zone_rdata_iter_t it = zone_rdata_iter(rr);
	return zone_rdata_next(&it, len);
}

static bool name_is(const uint8_t *name, const char *text)
{
	char buf[DNAME_STR_MAXLEN];
	return strcmp(dname_to_str(name, buf, sizeof(buf)), text) == 0;
}

static void test_nodes(const zone_t *z)
{
	enum { A = ZONE_NODE_APEX, D = ZONE_NODE_DELEG, N = ZONE_NODE_NONAUTH };
	enum { W = ZONE_NODE_WILDCARD_CHILD };
	static const struct {
		const char *name; /* presentation, trailing dot */
		bool exists;
		uint16_t flags;
		uint16_t n_rrsets;
		const char *cut; /* expected cut owner, NULL for none */
	} rows[] = {
	    {"example.test.", true, A, 3, NULL},
	    {"ns1.example.test.", true, 0, 1, NULL},
	    {"www.example.test.", true, 0, 3, NULL},
	    {"c.example.test.", true, 0, 0, NULL}, /* empty non-terminal */
	    {"b.c.example.test.", true, 0, 0, NULL},
	    {"a.b.c.example.test.", true, 0, 1, NULL},
	    {"wild.example.test.", true, W, 1, NULL},
	    {"*.wild.example.test.", true, 0, 1, NULL},
	    {"sub.example.test.", true, D, 2, "sub.example.test."},
	    {"ns.sub.example.test.", true, N, 1, "sub.example.test."},
	    {"below.sub.example.test.", true, N, 0, "sub.example.test."},
	    /* NS under a cut is occluded data, not a second cut */
	    {"deep.below.sub.example.test.", true, N, 1, "sub.example.test."},
	    {"included.example.test.", true, 0, 1, NULL},
	    {"unknown.example.test.", true, 0, 1, NULL},
	    {"ttl.example.test.", true, 0, 1, NULL},
	    {"nothere.example.test.", false, 0, 0, NULL},
	    {"x.www.example.test.", false, 0, 0, NULL},
	    {"outside.other.test.", false, 0, 0, NULL},
	    {"test.", false, 0, 0, NULL},
	    {".", false, 0, 0, NULL},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		const char *name = rows[i].name;
		const zone_node_t *n = node(z, name);
		CHECK((n != NULL) == rows[i].exists, "%s exists=%d", name, n != NULL);
		if (n == NULL)
			continue;
		CHECK(name_is(n->owner, name), "%s owner", name);
		CHECK(n->flags == rows[i].flags, "%s flags %#x, want %#x", name, n->flags,
		      rows[i].flags);
		CHECK(n->n_rrsets == rows[i].n_rrsets, "%s has %u rrsets, want %u", name,
		      n->n_rrsets, rows[i].n_rrsets);
		CHECK((n->n_rrsets == 0) == (n->rrsets == NULL), "%s rrsets pointer", name);
		CHECK((n->cut == NULL) == (rows[i].cut == NULL) &&
		          (n->cut == NULL || name_is(n->cut->owner, rows[i].cut)),
		      "%s cut", name);
		for (uint16_t k = 1; k < n->n_rrsets; k++)
			CHECK(n->rrsets[k - 1].type < n->rrsets[k].type, "%s rrsets sorted", name);
		if (n->flags & ZONE_NODE_APEX) {
			CHECK(n->parent == NULL && n == z->apex_node, "apex has no parent");
		} else {
			const char *dot = strchr(name, '.');
			CHECK(n->parent != NULL &&
			          name_is(n->parent->owner, dot[1] ? dot + 1 : "."),
			      "%s parent", name);
		}
	}
}

static void test_rdata(const zone_t *z)
{
	uint16_t len = 0;
	const uint8_t *rd;

	/* Duplicates collapse (RFC 2181 5) even when the owners differ only in case. */
	const zone_rrset_t *rr = rrset(z, "www.example.test.", DNS_TYPE_A);
	CHECK(rr && rr->count == 1, "www A collapsed to %u records", rr ? rr->count : 0);
	/* RFC 2181 5.2: the lowest TTL of the rrset wins. */
	rr = rrset(z, "ttl.example.test.", DNS_TYPE_A);
	CHECK(rr && rr->count == 3 && rr->ttl == 300, "ttl rrset count %u ttl %u",
	      rr ? rr->count : 0, rr ? rr->ttl : 0);
	/* Canonical order inside the rrset (RFC 4034 6.3). */
	if (rr != NULL) {
		zone_rdata_iter_t it = zone_rdata_iter(rr);
		uint8_t last = 0;
		while ((rd = zone_rdata_next(&it, &len)) != NULL) {
			CHECK(len == 4 && rd[3] > last, "ttl rdata order %u", rd[3]);
			last = rd[3];
		}
	}
	rd = first_rdata(z, "unknown.example.test.", 65280, &len);
	CHECK(rd && len == 4 && memcmp(rd, "\x0a\x00\x00\x01", 4) == 0, "RFC 3597 rdata");

	/* Names in well-known rdata are folded to lowercase. */
	rd = first_rdata(z, "example.test.", DNS_TYPE_MX, &len);
	CHECK(rd && len == 2 + 19 && name_is(rd + 2, "mail.example.test."), "MX target lowered");
	rd = first_rdata(z, "srv.example.test.", DNS_TYPE_SRV, &len);
	CHECK(rd && name_is(rd + 6, "sip.example.test."), "SRV target lowered");
	rd = first_rdata(z, "cname.example.test.", DNS_TYPE_CNAME, &len);
	CHECK(rd && name_is(rd, "www.example.test."), "CNAME target lowered");
	rd = first_rdata(z, "example.test.", DNS_TYPE_SOA, &len);
	CHECK(rd && name_is(rd, "ns1.example.test.") &&
	          name_is(rd + 18, "hostmaster.example.test."),
	      "SOA names lowered");
	rd = first_rdata(z, "www.example.test.", DNS_TYPE_TXT, &len);
	CHECK(rd && len == 5 && memcmp(rd, "\x04late", 5) == 0, "TXT listed apart from owner");
	rd = first_rdata(z, "sub.example.test.", DNS_TYPE_DS, &len);
	CHECK(rd && len == 36, "DS rdata length %u", len);
	rr = rrset(z, "sub.example.test.", DNS_TYPE_NS);
	CHECK(rr && rr->count == 2, "sub NS count");
	CHECK(rrset(z, "www.example.test.", DNS_TYPE_MX) == NULL, "no MX at www");
}

static void test_load_ok(void)
{
	char err[512];
	int ret;
	zone_t *z = load("Example.Test", DIR "example.test.zone", &ret, err, sizeof(err));
	CHECK(ret == 0 && z != NULL, "example.test loads: %d %s", ret, err);
	if (z == NULL)
		return;
	CHECK(strcmp(z->name, "example.test.") == 0, "name %s", z->name);
	CHECK(strcmp(z->file, DIR "example.test.zone") == 0, "file %s", z->file);
	CHECK(z->apex_len == 14 && name_is(z->apex, "example.test."), "apex");
	CHECK(z->serial == 2024010101, "serial %u", z->serial);
	CHECK(z->n_records == 23, "records %zu", z->n_records);
	CHECK(z->n_nodes == 17, "nodes %zu", z->n_nodes);
	CHECK(z->soa && z->soa->type == DNS_TYPE_SOA && z->soa->count == 1, "soa rrset");
	CHECK(z->soa && z->soa->ttl == 3600, "soa ttl");
	CHECK(z->refcount == 1, "one reference");
	CHECK(z->loaded_at > 0, "loaded_at set");
	CHECK(!zone_file_changed(z), "file unchanged");
	test_nodes(z);
	test_rdata(z);

	size_t count = 0;
	const zone_node_t *nodes = zone_nodes(z, &count);
	CHECK(count == z->n_nodes && &nodes[0] == z->apex_node, "nodes: apex first");
	for (size_t i = 1; i < count; i++) {
		CHECK(nodes[i].parent != NULL && nodes[i].parent < &nodes[i],
		      "node %zu: parent before child", i);
	}
	zone_unref(z);
}

static void test_errors(void)
{
	static const struct {
		const char *origin;
		const char *file;
		int ret;
		const char *msg; /* must occur in the error text */
	} rows[] = {
	    {"conflict.test", DIR "cname-conflict.zone", STEER_EZONE,
	     DIR "cname-conflict.zone:7: CNAME and A records at www.conflict.test."},
	    {"two.test", DIR "cname-two.zone", STEER_EZONE,
	     DIR "cname-two.zone:7: more than one CNAME record at www.two.test."},
	    {"nosoa.test", DIR "no-soa.zone", STEER_EZONE, DIR "no-soa.zone: no SOA record"},
	    {"nons.test", DIR "no-ns.zone", STEER_EZONE, DIR "no-ns.zone: no NS records"},
	    {"below.test", DIR "soa-below.zone", STEER_EZONE,
	     DIR "soa-below.zone:4: SOA record not at the zone apex below.test."},
	    {"twosoa.test", DIR "two-soa.zone", STEER_EZONE,
	     DIR "two-soa.zone:4: more than one SOA record"},
	    {"ch.test", DIR "class-ch.zone", STEER_EZONE,
	     DIR "class-ch.zone:4: unsupported record type (or a class other than IN)"},
	    {"syntax.test", DIR "syntax.zone", STEER_EZONE, DIR "syntax.zone:4: invalid IPv4"},
	    {"incbad.test", DIR "include-bad.zone", STEER_EZONE,
	     "zones/unit/inc/bad.inc:2: invalid address character"},
	    {"incmiss.test", DIR "include-missing.zone", STEER_EZONE,
	     DIR "include-missing.zone:4: cannot open $INCLUDE file /"},
	    {"meta.test", DIR "meta-type.zone", STEER_EZONE,
	     DIR "meta-type.zone:4: type ANY cannot appear in a zone"},
	    {"missing.test", DIR "missing.zone", STEER_ENOENT,
	     DIR "missing.zone: No such file or directory"},
	    {"empty.test", DIR "empty.zone", STEER_EZONE, "no SOA record at the zone apex"},
	    {"inc.test", DIR "inc", STEER_EINVAL, DIR "inc: not a regular file"},
	    {"a..b", DIR "example.test.zone", STEER_EINVAL, "a..b: invalid zone name"},
	    /* the wrong origin: every record is out of zone, so the apex has nothing */
	    {"other.test", DIR "example.test.zone", STEER_EZONE, "no SOA record"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		char err[512] = "unset";
		int ret;
		zone_t *z = load(rows[i].origin, rows[i].file, &ret, err, sizeof(err));
		CHECK(z == NULL && ret == rows[i].ret, "%s: ret %d, want %d", rows[i].file, ret,
		      rows[i].ret);
		CHECK(strstr(err, rows[i].msg) != NULL, "%s: error '%s' lacks '%s'", rows[i].file,
		      err, rows[i].msg);
		zone_unref(z);
	}
	/* A short error buffer truncates but stays a string. */
	char small[8];
	int ret;
	zone_t *z = load("nosoa.test", DIR "no-soa.zone", &ret, small, sizeof(small));
	CHECK(z == NULL && strlen(small) == 7, "truncated error '%s'", small);
}

static void test_load_variants(void)
{
	static const struct {
		const char *origin;
		const char *file;
		size_t records;
	} rows[] = {
	    /* RRSIG and NSEC may share a CNAME's node (RFC 4035 2.5) */
	    {"rrsig.test", DIR "cname-rrsig.zone", 6},  {".", DIR "root.zone", 3},
	    {"glue.test", DIR "glue.zone", 4},          {"many.test", DIR "outside-many.zone", 2},
	    {"parent.test", DIR "parent.test.zone", 5},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		char err[512] = "";
		int ret;
		zone_t *z = load(rows[i].origin, rows[i].file, &ret, err, sizeof(err));
		CHECK(ret == 0 && z != NULL, "%s loads: %s", rows[i].file, err);
		CHECK(z == NULL || z->n_records == rows[i].records, "%s: %zu records", rows[i].file,
		      z ? z->n_records : 0);
		zone_unref(z);
	}
}

/* Run a load with stderr captured into @p out (the logger writes to fd 2). */
static void load_captured(const char *origin, const char *file, char *out, size_t outlen)
{
	char path[] = "/tmp/steer-test-zone-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp");
	if (fd < 0)
		return;
	unlink(path);
	int saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	char err[512];
	int ret;
	zone_t *z = load(origin, file, &ret, err, sizeof(err));
	dup2(saved, STDERR_FILENO);
	close(saved);
	CHECK(ret == 0, "%s loads: %s", file, err);
	zone_unref(z);
	ssize_t n = pread(fd, out, outlen - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
}

static size_t count_str(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static void test_warnings(void)
{
	static char log[16384];
	load_captured("example.test", DIR "example.test.zone", log, sizeof(log));
	CHECK(strstr(log, DIR "example.test.zone:36: outside.other.test. A is outside the zone "
	                      "example.test., ignored"),
	      "out-of-zone warning with file:line: %s", log);
	CHECK(strstr(log, DIR "example.test.zone:19: ttl.example.test. A: records with different "
	                      "TTLs, using 300"),
	      "TTL warning: %s", log);
	CHECK(!strstr(log, "glue"), "glue present, no warning: %s", log);

	load_captured("many.test", DIR "outside-many.zone", log, sizeof(log));
	CHECK(count_str(log, "is outside the zone") == 10, "rate limited to 10: %s", log);
	CHECK(strstr(log, "4 more records outside the zone many.test. ignored"), "summary: %s",
	      log);

	load_captured("glue.test", DIR "glue.zone", log, sizeof(log));
	CHECK(strstr(log, "delegation sub.glue.test.: no glue address for name server "
	                  "ns.sub.glue.test."),
	      "glue warning: %s", log);
	CHECK(!strstr(log, "ns.elsewhere.test"), "out-of-bailiwick NS needs no glue: %s", log);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL, "create %s", path);
	if (f != NULL) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_changed(void)
{
	char dir[] = "/tmp/steer-test-zone-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char main_path[128], inc_path[128];
	snprintf(main_path, sizeof(main_path), "%s/c.zone", dir);
	snprintf(inc_path, sizeof(inc_path), "%s/c.inc", dir);
	write_file(main_path, "$ORIGIN c.test.\n@ 60 IN SOA ns hm 1 2 3 4 5\n@ 60 IN NS ns\n"
	                      "$INCLUDE c.inc\n");
	write_file(inc_path, "ns 60 IN A 192.0.2.1\n");
	char err[512];
	int ret;
	zone_t *z = load("c.test", main_path, &ret, err, sizeof(err));
	CHECK(z != NULL, "temp zone loads: %s", err);
	if (z == NULL)
		return;
	CHECK(node(z, "ns.c.test.") != NULL, "included record present");
	CHECK(!zone_file_changed(z), "unchanged after load");
	write_file(inc_path, "ns 60 IN A 192.0.2.2\nx 60 IN A 192.0.2.3\n");
	CHECK(zone_file_changed(z), "include change detected");
	zone_unref(z);

	z = load("c.test", main_path, &ret, err, sizeof(err));
	CHECK(z && z->serial == 1 && !zone_file_changed(z), "reloaded");
	write_file(main_path, "$ORIGIN c.test.\n@ 60 IN SOA ns hm 2 2 3 4 5\n@ 60 IN NS ns\n");
	CHECK(z && zone_file_changed(z), "main file change detected");
	zone_unref(z);

	z = load("c.test", main_path, &ret, err, sizeof(err));
	CHECK(z && z->serial == 2 && !zone_file_changed(z), "reloaded after main change");
	unlink(main_path);
	CHECK(z && zone_file_changed(z), "deleted file detected");
	zone_unref(z);
	unlink(inc_path);
	rmdir(dir);
}

/* A zone whose records come in scrambled order: several types per owner, far apart. */
static void test_scrambled(void)
{
	enum { NAMES = 3000, TYPES = 3 };
	static const char *const rdata[TYPES] = {"A 192.0.2.%u", "AAAA 2001:db8::%x",
	                                         "TXT \"t%u\""};
	char dir[] = "/tmp/steer-test-zone-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char path[128];
	snprintf(path, sizeof(path), "%s/s.zone", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL, "create %s", path);
	if (f == NULL)
		return;
	fprintf(f, "$ORIGIN s.test.\n@ 60 IN SOA ns hm 1 2 3 4 5\n@ 60 IN NS ns\n");
	/* i * 7919 mod N visits every (name, type) pair once in a scattered order */
	for (unsigned i = 0; i < NAMES * TYPES; i++) {
		unsigned k = (unsigned)(((unsigned long)i * 7919) % (NAMES * TYPES));
		unsigned name = k / TYPES, type = k % TYPES;
		fprintf(f, "h%u.g%u 60 IN ", name, name % 10);
		fprintf(f, rdata[type], name % 250 + 1);
		fprintf(f, "\n");
		if (i % 5 == 0) /* an exact duplicate now and then */
			fprintf(f, "h%u.g%u 60 IN TXT \"t%u\"\n", name, name % 10, name % 250 + 1);
	}
	fprintf(f, "ns 60 IN A 192.0.2.1\n");
	fclose(f);
	char err[512];
	int ret;
	zone_t *z = load("s.test", path, &ret, err, sizeof(err));
	CHECK(z != NULL, "scrambled zone loads: %s", err);
	if (z != NULL) {
		CHECK(z->n_records == NAMES * TYPES + 3, "records %zu", z->n_records);
		/* apex, ns, 10 g<N> ENTs, the hosts */
		CHECK(z->n_nodes == NAMES + 12, "nodes %zu", z->n_nodes);
		size_t bad = 0;
		for (unsigned i = 0; i < NAMES; i++) {
			char name[64];
			snprintf(name, sizeof(name), "h%u.g%u.s.test.", i, i % 10);
			const zone_node_t *n = node(z, name);
			if (n == NULL || n->n_rrsets != TYPES || n->rrsets[0].type != DNS_TYPE_A ||
			    n->rrsets[1].type != DNS_TYPE_TXT ||
			    n->rrsets[2].type != DNS_TYPE_AAAA || n->rrsets[1].count != 1)
				bad++;
		}
		CHECK(bad == 0, "%zu scrambled nodes wrong", bad);
	}
	zone_unref(z);
	unlink(path);
	rmdir(dir);
}

static void test_refcount(void)
{
	char err[512];
	int ret;
	zone_t *z = load("parent.test", DIR "parent.test.zone", &ret, err, sizeof(err));
	CHECK(z != NULL, "parent loads: %s", err);
	if (z == NULL)
		return;
	zone_ref(z);
	zone_ref(z);
	CHECK(z->refcount == 3, "three references");
	zone_unref(z);
	CHECK(z->refcount == 2, "two references");
	zone_set_t *set = zone_set_new();
	CHECK(zone_set_add(set, z, &(zone_set_entry_t){0}) == 0, "add takes one reference");
	CHECK(z->refcount == 2, "still two");
	zone_set_free(set);
	CHECK(z->refcount == 1, "set dropped its reference");
	zone_unref(z); /* the last: freed (ASan would report a leak otherwise) */
	zone_unref(NULL);
}

static void test_zone_set(void)
{
	static const struct {
		const char *origin;
		const char *file;
	} zones[] = {
	    {"parent.test", DIR "parent.test.zone"},
	    {"child.parent.test", DIR "child.parent.test.zone"},
	    {"example.test", DIR "example.test.zone"},
	};
	zone_set_t *set = zone_set_new();
	dns_acl_entry_t acl[2] = {0};
	CHECK(steer_prefix_parse("192.0.2.0/24", &acl[0].prefix) == 0, "acl 0");
	CHECK(steer_prefix_parse("2001:db8::/32", &acl[1].prefix) == 0, "acl 1");
	for (size_t i = 0; i < STEER_ARRAY_LEN(zones); i++) {
		char err[512];
		int ret;
		zone_t *z = load(zones[i].origin, zones[i].file, &ret, err, sizeof(err));
		CHECK(z != NULL, "%s loads: %s", zones[i].file, err);
		if (z != NULL)
			CHECK(zone_set_add(
			          set, z,
			          &(zone_set_entry_t){.xfr_allow = acl, .n_xfr_allow = i}) == 0,
			      "add %s", zones[i].origin);
	}
	acl[0].prefix.len = 8; /* the set keeps its own copy */

	static const struct {
		const char *qname;
		const char *zone; /* longest match, NULL for none */
	} rows[] = {
	    {"www.child.parent.test.", "child.parent.test."},
	    {"child.parent.test.", "child.parent.test."},
	    {"a.b.c.child.parent.test.", "child.parent.test."},
	    {"ns1.child.parent.test.", "child.parent.test."},
	    {"parent.test.", "parent.test."},
	    {"x.parent.test.", "parent.test."},
	    {"xchild.parent.test.", "parent.test."},
	    {"www.example.test.", "example.test."},
	    {"example.test.", "example.test."},
	    {"test.", NULL},
	    {"other.test.", NULL},
	    {"parent.test.example.", NULL},
	    {".", NULL},
	};
	for (int with_root = 0; with_root < 2; with_root++) {
		for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
			uint8_t q[DNS_DNAME_MAXLEN];
			CHECK(wire(rows[i].qname, q) > 0, "parse %s", rows[i].qname);
			const zone_set_entry_t *e = zone_set_find(set, q);
			const char *want = rows[i].zone ? rows[i].zone : with_root ? "." : NULL;
			CHECK((e == NULL && want == NULL) ||
			          (e != NULL && want != NULL && strcmp(e->zone->name, want) == 0),
			      "%s (root %d) -> %s, want %s", rows[i].qname, with_root,
			      e ? e->zone->name : "none", want ? want : "none");
		}
		if (!with_root) {
			char err[512];
			int ret;
			zone_t *root = load(".", DIR "root.zone", &ret, err, sizeof(err));
			CHECK(root != NULL && zone_set_add(set, root, &(zone_set_entry_t){0}) == 0,
			      "add root: %s", err);
		}
	}

	uint8_t q[DNS_DNAME_MAXLEN];
	CHECK(wire("child.parent.test", q) > 0, "parse");
	const zone_set_entry_t *e = zone_set_get(set, q);
	CHECK(e && strcmp(e->zone->name, "child.parent.test.") == 0, "get exact");
	CHECK(e && e->n_xfr_allow == 1 && e->xfr_allow[0].prefix.len == 24, "acl copied");
	CHECK(wire("www.child.parent.test", q) > 0 && zone_set_get(set, q) == NULL, "get is exact");

	/* A second zone with an existing apex is refused; the caller keeps its reference. */
	char err[512];
	int ret;
	zone_t *dup = load("Parent.Test", DIR "parent.test.zone", &ret, err, sizeof(err));
	CHECK(dup && zone_set_add(set, dup, &(zone_set_entry_t){0}) == STEER_EEXIST,
	      "duplicate apex refused");
	zone_unref(dup);

	static const char *const sorted[] = {".", "child.parent.test.", "example.test.",
	                                     "parent.test."};
	CHECK(zone_set_count(set) == STEER_ARRAY_LEN(sorted), "count %zu", zone_set_count(set));
	for (size_t i = 0; i < STEER_ARRAY_LEN(sorted); i++) {
		e = zone_set_at(set, i);
		CHECK(e && strcmp(e->zone->name, sorted[i]) == 0, "at(%zu) = %s", i,
		      e ? e->zone->name : "none");
	}
	CHECK(zone_set_at(set, 4) == NULL, "at() past the end");
	zone_set_free(set);
	zone_set_free(NULL);

	zone_set_t *empty = zone_set_new();
	CHECK(wire("www.example.test", q) > 0 && zone_set_find(empty, q) == NULL, "empty set");
	zone_set_free(empty);
}

int main(void)
{
	test_load_ok();
	test_errors();
	test_load_variants();
	test_warnings();
	test_changed();
	test_scrambled();
	test_refcount();
	test_zone_set();
	return unit_finish("test_zone");
}
