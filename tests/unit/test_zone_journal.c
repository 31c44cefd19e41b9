/* Unit tests of src/zone/journal.c and journal_file.c: differences between zone versions, their
 * history, and the history's file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dns/const.h"
#include "dns/dname.h"
#include "dns/wire.h"
#include "zone/journal.h"
#include "zone/journal_file.h"
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

/* ---- journal files ---------------------------------------------------------------------- */

/* A history of @p n changes ending at serial n + 1, and the zones (v[0..n]) it spans. */
static zone_journal_t *make_history(zone_t **v, size_t n)
{
	zone_journal_t *j = NULL;
	for (size_t i = 0; i <= n; i++) {
		char body[128];
		snprintf(body, sizeof(body), "h%zu A 192.0.2.%zu\nt%zu 60 TXT \"v%zu\"\n", i,
		         i + 10, i % 2, i);
		v[i] = load_text((uint32_t)i + 1, body);
		if (v[i] == NULL)
			return j;
		if (i > 0) {
			zone_journal_t *next = zone_journal_next(j, v[i - 1], v[i], 20);
			zone_journal_unref(j);
			j = next;
		}
	}
	return j;
}

#define DIGEST 0x0123456789abcdefull

/* @p j serialized into a new buffer (*len bytes). */
static uint8_t *serialize(const zone_journal_t *j, const uint8_t *apex, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	int ret = zone_journal_write(f, apex, DIGEST, j);
	fclose(f);
	CHECK(ret == 0, "journal written: %d", ret);
	return (uint8_t *)buf;
}

static bool same_journal(const zone_journal_t *a, const zone_journal_t *b)
{
	if (a == NULL || b == NULL || a->n != b->n || a->bytes != b->bytes)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const zone_change_t *x = a->changes[i], *y = b->changes[i];
		if (x->from != y->from || x->to != y->to || x->n_del != y->n_del ||
		    x->n_add != y->n_add || x->len != y->len || memcmp(x->data, y->data, x->len))
			return false;
	}
	return true;
}

static const uint8_t apex_j[] = "\x01j\x04test";
static const uint8_t apex_other[] = "\x05other\x04test";

static void test_file_round_trip(void)
{
	zone_t *v[4] = {0};
	zone_journal_t *j = make_history(v, 3);
	CHECK(j && j->n == 3, "a history of 3 changes");
	if (!j || !v[3])
		goto out;
	size_t len = 0;
	uint8_t *data = serialize(j, apex_j, &len);
	zone_journal_t *back = NULL;
	char err[256];
	uint64_t digest = 0;
	int ret = zone_journal_parse(data, len, apex_j, &back, &digest, err, sizeof(err));
	CHECK(ret == 0 && same_journal(j, back), "parsed back the same: %s", err);
	CHECK(digest == DIGEST, "the digest read back: %llx", (unsigned long long)digest);
	CHECK(back && zone_journal_find(back, 2, 4) == 1, "IXFR finds serial 2 in it");

	/* through a real file, as the daemon does */
	char dir[] = "/tmp/steer-test-jfile-XXXXXX", path[64];
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(path, sizeof(path), "%s/j.test.journal", dir);
	CHECK(zone_journal_save(path, apex_j, DIGEST, j) == 0, "saved");
	zone_journal_t *loaded = NULL;
	ret = zone_journal_load(path, apex_j, &loaded, &digest, err, sizeof(err));
	CHECK(ret == 0 && same_journal(j, loaded), "loaded back the same: %s", err);
	zone_journal_unref(loaded);
	ret = zone_journal_load(path, apex_other, &loaded, &digest, err, sizeof(err));
	CHECK(ret == STEER_EMALF && loaded == NULL && strstr(err, "another zone"),
	      "another zone's file is refused: %s", err);
	unlink(path);
	CHECK(zone_journal_load(path, apex_j, &loaded, &digest, err, sizeof(err)) == STEER_ENOENT,
	      "no file: ENOENT");
	rmdir(dir);

	/* resumed only when it ends at the loaded zone's serial, trimmed like a reload trims */
	zone_journal_t *r = zone_journal_resume(back, v[3], 20);
	CHECK(r && same_journal(r, j), "ends at serial 4: resumed whole");
	zone_journal_unref(r);
	r = zone_journal_resume(back, v[3], 2);
	CHECK(r && r->n == 2 && r->changes[0]->from == 2, "ixfr-history 2: the newest 2 kept");
	zone_journal_unref(r);
	CHECK(zone_journal_resume(back, v[2], 20) == NULL, "zone at serial 3: discarded");
	CHECK(zone_journal_resume(back, v[3], 0) == NULL, "ixfr-history 0: none");
	CHECK(zone_journal_resume(NULL, v[3], 20) == NULL, "no file: none");
	zone_journal_unref(back);
	free(data);
out:
	zone_journal_unref(j);
	for (size_t i = 0; i < 4; i++)
		zone_unref(v[i]);
}

/* Every shorter file and every one-byte corruption is refused, never half taken. */
static void test_file_damage(void)
{
	zone_t *v[3] = {0};
	zone_journal_t *j = make_history(v, 2);
	if (!j)
		goto out;
	size_t len = 0;
	uint8_t *data = serialize(j, apex_j, &len);
	size_t bad_trunc = 0, bad_flip = 0;
	char err[256];
	uint64_t digest;
	for (size_t cut = 0; cut < len; cut++) {
		zone_journal_t *out = NULL;
		int ret = zone_journal_parse(data, cut, apex_j, &out, &digest, err, sizeof(err));
		bad_trunc += ret == 0 || out != NULL;
		zone_journal_unref(out);
	}
	CHECK(bad_trunc == 0, "%zu of %zu truncations accepted", bad_trunc, len);
	for (size_t i = 0; i < len; i++) {
		for (unsigned bit = 0; bit < 8; bit += 3) {
			data[i] ^= (uint8_t)(1u << bit);
			zone_journal_t *out = NULL;
			int ret =
			    zone_journal_parse(data, len, apex_j, &out, &digest, err, sizeof(err));
			bad_flip += ret == 0 || out != NULL;
			zone_journal_unref(out);
			data[i] ^= (uint8_t)(1u << bit);
		}
	}
	CHECK(bad_flip == 0, "%zu bit flips accepted", bad_flip);
	zone_journal_t *out = NULL;
	int ret = zone_journal_parse(data, len / 2, apex_j, &out, &digest, err, sizeof(err));
	CHECK(ret == STEER_ETRUNC && strstr(err, "ends early"), "half a file: truncated (%s)", err);
	uint8_t *longer = malloc(len + 1);
	memcpy(longer, data, len);
	longer[len] = 0;
	ret = zone_journal_parse(longer, len + 1, apex_j, &out, &digest, err, sizeof(err));
	CHECK(ret == STEER_EMALF && strstr(err, "after the last change"), "trailing byte: %s", err);
	free(longer);
	data[9] = 2; /* version 2, a format from a newer steerd */
	ret = zone_journal_parse(data, len, apex_j, &out, &digest, err, sizeof(err));
	CHECK(ret == STEER_EMALF && strstr(err, "version 2"), "newer format refused: %s", err);
	free(data);
out:
	zone_journal_unref(j);
	for (size_t i = 0; i < 3; i++)
		zone_unref(v[i]);
}

static uint32_t crc32_ieee(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
	}
	return ~c;
}

/* A one-change file for j.test. whose change data is @p rr (n_del + n_add records). */
static size_t craft(uint8_t *out, uint32_t from, uint32_t to, uint32_t n_del, uint32_t n_add,
                    const uint8_t *rr, size_t rr_len)
{
	size_t apex_len = sizeof(apex_j);
	memcpy(out, "STEERJNL\x00\x01\x00\x00\x00\x00\x00\x01", 16);
	memset(out + 16, 0, 8); /* digest */
	out[24] = (uint8_t)apex_len;
	memcpy(out + 25, apex_j, apex_len);
	size_t pos = 25 + apex_len;
	wire_write_u32(out + pos, crc32_ieee(out, pos));
	size_t start = pos += 4;
	uint32_t fixed[5] = {from, to, n_del, n_add, (uint32_t)rr_len};
	for (size_t i = 0; i < 5; i++, pos += 4)
		wire_write_u32(out + pos, fixed[i]);
	memcpy(out + pos, rr, rr_len);
	pos += rr_len;
	wire_write_u32(out + pos, crc32_ieee(out + start, pos - start));
	return pos + 4;
}

/* An apex SOA record of serial @p serial at @p out; returns its length. */
static size_t soa_rr(uint8_t *out, uint32_t serial)
{
	static const uint8_t rdata_names[] = "\x02ns\x01j\x04test\x00\x01h\x01j\x04test";
	size_t pos = 0;
	memcpy(out, apex_j, sizeof(apex_j));
	pos += sizeof(apex_j);
	uint16_t rdlen = (uint16_t)(sizeof(rdata_names) + 20);
	uint8_t fixed[8];
	wire_write_u16(fixed, DNS_TYPE_SOA);
	wire_write_u32(fixed + 2, 300);
	wire_write_u16(fixed + 6, rdlen);
	memcpy(out + pos, fixed, 8);
	pos += 8;
	memcpy(out + pos, rdata_names, sizeof(rdata_names));
	pos += sizeof(rdata_names);
	uint32_t tail[5] = {serial, 3600, 900, 604800, 300};
	for (size_t i = 0; i < 5; i++, pos += 4)
		wire_write_u32(out + pos, tail[i]);
	return pos;
}

/* Files with good checksums whose changes lie: the record checks catch each one. */
static void test_file_lies(void)
{
	uint8_t rr[512], file[1024];
	size_t a = soa_rr(rr, 1), b = soa_rr(rr + a, 2), ok_len = a + b;
	static const struct {
		uint32_t from, to, n_del, n_add;
		size_t trim;   /* bytes cut off the record data */
		size_t poke;   /* offset in the record data set to @c value (0 = none): the
		                * owner's labels at 0.., type at 8, rdlength at 14 */
		uint8_t value; /* when @c poke */
		int want;
		const char *why;
	} rows[] = {
	    {1, 2, 1, 1, 0, 0, 0, 0, "a sound change"},
	    {1, 3, 1, 1, 0, 0, 0, STEER_EMALF, "serial in the SOA is not the change's"},
	    {2, 1, 1, 1, 0, 0, 0, STEER_EMALF, "serial going back"},
	    {1, 2, 1, 2, 0, 0, 0, STEER_EMALF, "more records announced than held"},
	    {1, 2, 0, 2, 0, 0, 0, STEER_EMALF, "no deleted part"},
	    {1, 2, 1, 1, 3, 0, 0, STEER_EMALF, "the last rdata cut short"},
	    {1, 2, 1, 1, 0, 14, 0xff, STEER_EMALF, "rdlength beyond the change"},
	    {1, 2, 1, 1, 0, 2, 64, STEER_EMALF, "a label longer than 63"},
	    {1, 2, 1, 1, 0, 1, 'k', STEER_EMALF, "owner outside the zone"},
	    {1, 2, 1, 1, 0, 8, 1, STEER_EMALF, "the first record is no SOA"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		uint8_t data[512];
		memcpy(data, rr, ok_len);
		if (rows[i].poke)
			data[rows[i].poke] = rows[i].value;
		size_t n = craft(file, rows[i].from, rows[i].to, rows[i].n_del, rows[i].n_add, data,
		                 ok_len - rows[i].trim);
		zone_journal_t *out = NULL;
		char err[256] = "";
		uint64_t digest;
		int ret = zone_journal_parse(file, n, apex_j, &out, &digest, err, sizeof(err));
		CHECK(ret == rows[i].want && (out != NULL) == (ret == 0), "row %zu (%s): %d, %s", i,
		      rows[i].why, ret, err);
		zone_journal_unref(out);
	}
}

/* The digest follows the records, not their order in the file; the serial is one of them. */
static void test_digest(void)
{
	zone_t *a = load_text(7, "x A 192.0.2.1\nx A 192.0.2.2\ny TXT \"t\"\n");
	zone_t *b = load_text(7, "y TXT \"t\"\nx A 192.0.2.2\nx A 192.0.2.1\n");
	zone_t *c = load_text(7, "x A 192.0.2.1\nx A 192.0.2.3\ny TXT \"t\"\n");
	zone_t *d = load_text(7, "x 60 A 192.0.2.1\nx 60 A 192.0.2.2\ny TXT \"t\"\n");
	zone_t *e = load_text(8, "x A 192.0.2.1\nx A 192.0.2.2\ny TXT \"t\"\n");
	if (a && b && c && d && e) {
		CHECK(zone_digest(a) == zone_digest(b), "same records in another order: same");
		CHECK(zone_digest(a) != zone_digest(c), "one rdata changed: differs");
		CHECK(zone_digest(a) != zone_digest(d), "a TTL changed: differs");
		CHECK(zone_digest(a) != zone_digest(e), "the serial changed: differs");
	}
	zone_unref(a);
	zone_unref(b);
	zone_unref(c);
	zone_unref(d);
	zone_unref(e);
}

int main(void)
{
	test_differences();
	test_history();
	test_serial_arithmetic();
	test_size_bound();
	test_file_round_trip();
	test_file_damage();
	test_file_lies();
	test_digest();
	return unit_finish("test_zone_journal");
}
