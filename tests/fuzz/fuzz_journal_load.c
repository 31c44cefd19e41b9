/*
 * Fuzz target: journal files (zone_journal_parse) of the zone fuzz.test. Besides sanitizer
 * findings it checks what the parser promises the IXFR code: a refused file leaves no journal
 * and says why; an accepted one chains its serials, and every change walks with
 * zone_change_read() to exactly its length and record count, inside the zone. Writing an
 * accepted journal again gives the input byte for byte (the format has one spelling).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "dns/dname.h"
#include "fuzz.h"
#include "zone/journal_file.h"

static const uint8_t APEX[] = "\x04"
                              "fuzz\x04"
                              "test";

static void check_change(const zone_change_t *c)
{
	size_t pos = 0, n = 0;
	while (pos < c->len) {
		zone_change_rr_t rr;
		size_t next = zone_change_read(c, pos, &rr);
		FUZZ_CHECK(next > pos && next <= c->len);
		FUZZ_CHECK(dname_is_valid(rr.owner, dname_len(rr.owner)));
		FUZZ_CHECK(dname_is_subdomain(rr.owner, APEX));
		pos = next;
		n++;
	}
	FUZZ_CHECK(pos == c->len && n == c->n_del + c->n_add);
}

static void check_rewrite(const zone_journal_t *j, uint64_t digest, const uint8_t *data,
                          size_t size)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	FUZZ_CHECK(f != NULL);
	FUZZ_CHECK(zone_journal_write(f, APEX, digest, j) == 0);
	FUZZ_CHECK(fclose(f) == 0);
	FUZZ_CHECK(len == size && memcmp(buf, data, size) == 0);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	zone_journal_t *j = NULL;
	char err[256] = "";
	uint64_t digest = 0;
	int ret = zone_journal_parse(data, size, APEX, &j, &digest, err, sizeof(err));
	if (ret != 0) {
		FUZZ_CHECK(j == NULL && err[0] != '\0');
		FUZZ_CHECK(ret == STEER_EMALF || ret == STEER_ETRUNC);
		return 0;
	}
	if (j == NULL)
		return 0; /* a header announcing no change */
	size_t bytes = 0;
	for (size_t i = 0; i < j->n; i++) {
		const zone_change_t *c = j->changes[i];
		FUZZ_CHECK(zone_serial_gt(c->to, c->from));
		FUZZ_CHECK(i == 0 || j->changes[i - 1]->to == c->from);
		check_change(c);
		bytes += c->len;
	}
	FUZZ_CHECK(bytes == j->bytes);
	uint32_t last = j->changes[j->n - 1]->to;
	FUZZ_CHECK(zone_journal_find(j, j->changes[0]->from, last) == 0);
	check_rewrite(j, digest, data, size);
	zone_journal_unref(j);
	return 0;
}
