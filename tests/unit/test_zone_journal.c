/* Unit tests of src/zone/journal.c: differences between zone versions and their history. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dns/const.h"
#include "dns/dname.h"
#include "zone/journal.h"
#include "unit.h"

static const char head[] = "$ORIGIN j.test.\n$TTL 300\n";

/* Load zone j.test. from @p body (after an SOA of serial @p serial); NULL on failure. */
static zone_t *load_text(uint32_t serial, const char *body)
{
	char path[] = "/tmp/steer-test-journal-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp");
	if (fd < 0)
		return NULL;
	FILE *f = fdopen(fd, "w");
	fprintf(f, "%s@ SOA ns h %u 3600 900 604800 300\n@ NS ns\nns A 192.0.2.1\n%s", head, serial,
	        body);
	fclose(f);
	zone_t *zone = NULL;
	char err[512] = "";
	int ret = zone_load("j.test", path, &zone, err, sizeof(err));
	unlink(path);
	CHECK(ret == 0, "zone loads: %s", err);
	return ret == 0 ? zone : NULL;
}

/* The records of @p c as "D owner type ttl" / "A owner type ttl" lines, in order. */
static void render(const zone_change_t *c, char *out, size_t size)
{
	size_t used = 0, i = 0;
	out[0] = '\0';
	for (size_t pos = 0; pos < c->len; i++) {
		zone_change_rr_t rr;
		pos = zone_change_read(c, pos, &rr);
		char name[1024];
		dname_to_str(rr.owner, name, sizeof(name));
		int n = snprintf(out + used, size - used, "%s%c %s %u %u", used ? "," : "",
		                 i < c->n_del ? 'D' : 'A', name, rr.type, rr.ttl);
		if (n < 0 || (size_t)n >= size - used)
			return;
		used += (size_t)n;
	}
}

static void test_differences(void)
{
	static const struct {
		const char *old, *new;
		const char *want; /* rendered change; SOAs are type 6 */
	} rows[] = {
	    {"a A 192.0.2.10\n", "a A 192.0.2.10\n", "D j.test. 6 300,A j.test. 6 300"},
	    {"a A 192.0.2.10\n", "a A 192.0.2.11\n",
	     "D j.test. 6 300,D a.j.test. 1 300,A j.test. 6 300,A a.j.test. 1 300"},
	    {"", "b A 192.0.2.12\nb TXT \"x\"\n",
	     "D j.test. 6 300,A j.test. 6 300,A b.j.test. 1 300,A b.j.test. 16 300"},
	    {"c AAAA 2001:db8::1\n", "", "D j.test. 6 300,D c.j.test. 28 300,A j.test. 6 300"},
	    /* one RRset, one TTL: a TTL change replaces the RRset */
	    {"a A 192.0.2.10\na A 192.0.2.11\n", "a 60 A 192.0.2.10\na 60 A 192.0.2.11\n",
	     "D j.test. 6 300,D a.j.test. 1 300,D a.j.test. 1 300,A j.test. 6 300,"
	     "A a.j.test. 1 60,A a.j.test. 1 60"},
	    /* a record added to an RRset leaves its others alone */
	    {"a A 192.0.2.10\n", "a A 192.0.2.10\na A 192.0.2.11\n",
	     "D j.test. 6 300,A j.test. 6 300,A a.j.test. 1 300"},
	    {"x.y MX 10 ns\n", "x.y MX 20 ns\n",
	     "D j.test. 6 300,D x.y.j.test. 15 300,A j.test. 6 300,A x.y.j.test. 15 300"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		zone_t *a = load_text(1, rows[i].old), *b = load_text(2, rows[i].new);
		zone_journal_t *j = a && b ? zone_journal_next(NULL, a, b, 20) : NULL;
		CHECK(j != NULL && j->n == 1, "row %zu: one change", i);
		if (j && j->n == 1) {
			char got[1024];
			render(j->changes[0], got, sizeof(got));
			CHECK(strcmp(got, rows[i].want) == 0, "row %zu: got '%s', want '%s'", i,
			      got, rows[i].want);
			CHECK(j->changes[0]->from == 1 && j->changes[0]->to == 2,
			      "row %zu: serials", i);
		}
		zone_journal_unref(j);
		zone_unref(a);
		zone_unref(b);
	}
}

static void test_history(void)
{
	zone_t *v[5];
	static const uint32_t serials[] = {1, 2, 3, 4, 5};
	for (size_t i = 0; i < 5; i++) {
		char body[64];
		snprintf(body, sizeof(body), "h%zu A 192.0.2.%zu\n", i, i + 10);
		v[i] = load_text(serials[i], body);
		if (!v[i])
			return;
	}
	zone_journal_t *j = NULL;
	for (size_t i = 1; i < 5; i++) {
		zone_journal_t *next = zone_journal_next(j, v[i - 1], v[i], 3);
		zone_journal_unref(j);
		j = next;
	}
	CHECK(j && j->n == 3, "history capped at 3 changes: %zu", j ? j->n : 0);
	CHECK(zone_journal_find(j, 2, 5) == 0 && zone_journal_find(j, 4, 5) == 2,
	      "versions 2 and 4 found");
	CHECK(zone_journal_find(j, 1, 5) == -1, "version 1 dropped with the oldest change");
	CHECK(zone_journal_find(j, 5, 5) == -1, "the current version has no change");
	CHECK(zone_journal_find(j, 2, 6) == -1, "a journal not ending at the served serial");
	CHECK(zone_journal_find(NULL, 2, 5) == -1, "no journal");

	/* An unchanged zone keeps its history, trimmed to a smaller limit. */
	zone_journal_t *same = zone_journal_next(j, v[4], v[4], 3);
	CHECK(same == j, "same zone: same journal");
	zone_journal_unref(same);
	zone_journal_t *trimmed = zone_journal_next(j, v[4], v[4], 1);
	CHECK(trimmed && trimmed->n == 1 && trimmed->changes[0]->from == 4, "trimmed to 1");
	zone_journal_unref(trimmed);
	CHECK(zone_journal_next(j, v[4], v[4], 0) == NULL, "ixfr-history 0: none");

	/* A serial that does not grow (RFC 1982) starts over. */
	CHECK(zone_journal_next(j, v[4], v[3], 3) == NULL, "serial went back: no history");
	/* A change that does not start where the history ends is not chained to it. */
	zone_journal_t *fresh = zone_journal_next(j, v[1], v[4], 3);
	CHECK(fresh && fresh->n == 1 && fresh->changes[0]->from == 2, "unchained: fresh start");
	zone_journal_unref(fresh);
	zone_journal_unref(j);
	for (size_t i = 0; i < 5; i++)
		zone_unref(v[i]);
}

static void test_serial_arithmetic(void)
{
	CHECK(zone_serial_gt(2, 1) && !zone_serial_gt(1, 2) && !zone_serial_gt(7, 7), "basic");
	CHECK(zone_serial_gt(1, 0xffffffffu), "wraps past 2^32");
	CHECK(!zone_serial_gt(0x80000000u, 0), "2^31 apart is undefined: not greater");
	zone_t *a = load_text(0xfffffff0u, ""), *b = load_text(5, "w A 192.0.2.5\n");
	zone_journal_t *j = a && b ? zone_journal_next(NULL, a, b, 5) : NULL;
	CHECK(j && j->n == 1 && zone_journal_find(j, 0xfffffff0u, 5) == 0, "wrapped serial");
	zone_journal_unref(j);
	zone_unref(a);
	zone_unref(b);
}

/* A change that outweighs the zone (and the floor) is not kept: AXFR is cheaper. */
static void test_size_bound(void)
{
	size_t n = 600, cap = n * 300;
	char *old = malloc(cap), *new = malloc(cap);
	size_t o = 0, w = 0;
	char filler[201];
	memset(filler, 'x', 200);
	filler[200] = '\0';
	for (size_t i = 0; i < n; i++) {
		o += (size_t)snprintf(old + o, cap - o, "t%zu TXT \"%s\"\n", i, filler);
		w += (size_t)snprintf(new + w, cap - w, "t%zu TXT \"y%s\"\n", i, filler + 1);
	}
	zone_t *a = load_text(1, old), *b = load_text(2, new);
	CHECK(a && b && zone_journal_next(NULL, a, b, 20) == NULL,
	      "every record replaced in a 120 KB zone: no history");
	zone_t *c = load_text(3, new);
	zone_journal_t *j = b && c ? zone_journal_next(NULL, b, c, 20) : NULL;
	CHECK(j && j->n == 1 && j->bytes < 1024, "an SOA-only change is kept (%zu bytes)",
	      j ? j->bytes : 0);
	zone_journal_unref(j);
	zone_unref(a);
	zone_unref(b);
	zone_unref(c);
	free(old);
	free(new);
}

int main(void)
{
	test_differences();
	test_history();
	test_serial_arithmetic();
	test_size_bound();
	return unit_finish("test_zone_journal");
}
