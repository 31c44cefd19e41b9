/*
 * Fuzz target: zone input (zone_load: libzscanner and our semantic checks and index build) for
 * the origin fuzz.test. The input is the master file, written into a private temporary
 * directory that also holds one file to include, so a relative $INCLUDE exercises the include
 * path without reaching anything else. Any other $INCLUDE (an absolute path, "..", a quoted or
 * escaped name) is turned into a comment before the file is written: fuzzed input must not
 * read arbitrary files of the machine it runs on.
 *
 * Besides sanitizer findings (leaks included) it checks that a failure leaves no zone and a
 * message naming a file, and what an accepted zone promises its readers: SOA and NS at the
 * apex, every node findable by its own lowercase owner inside the zone, parents before
 * children, rrsets sorted by type with their records inside the zone's storage, and CNAME
 * sharing its node only with RRSIG and NSEC.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/log.h"
#include "dns/dname.h"
#include "fuzz.h"
#include "zone/zone.h"

#define ORIGIN "fuzz.test."
#define INC    "inc.zone"

static char dir[64]; /* removed at exit */
static char zone_path[96], inc_path[96];

static void remove_dir(void)
{
	unlink(zone_path);
	unlink(inc_path);
	rmdir(dir);
}

static void setup(void)
{
	log_setup(LOG_TARGET_STDERR, LOG_LEVEL_ERR);
	snprintf(dir, sizeof(dir), "%s/steer-fuzz-zone.XXXXXX",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (strlen(dir) > 40 || mkdtemp(dir) == NULL) {
		snprintf(dir, sizeof(dir), "/tmp/steer-fuzz-zone.XXXXXX");
		FUZZ_CHECK(mkdtemp(dir) != NULL);
	}
	snprintf(zone_path, sizeof(zone_path), "%s/zone", dir);
	snprintf(inc_path, sizeof(inc_path), "%s/" INC, dir);
	FILE *f = fopen(inc_path, "w");
	FUZZ_CHECK(f != NULL);
	fputs("inc-a 300 A 192.0.2.9\n"
	      "inc-txt TXT \"included\"\n"
	      "@ MX 10 inc-a\n",
	      f);
	FUZZ_CHECK(fclose(f) == 0);
	atexit(remove_dir);
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Comments out every $INCLUDE but "$INCLUDE inc.zone [ORIGIN]" with a plain name. The scanner
 * takes the name as a token, so checking the bytes that follow the directive is enough: a
 * quoted, escaped or longer name is not the literal "inc.zone" followed by a separator. */
static void neutralise_includes(char *text, size_t size)
{
	static const char kw[] = "$include";
	const size_t kwlen = sizeof(kw) - 1;
	for (size_t i = 0; i + kwlen <= size; i++) {
		if (text[i] != '$' || strncasecmp(text + i, kw, kwlen) != 0)
			continue;
		size_t j = i + kwlen;
		while (j < size && is_blank(text[j]))
			j++;
		bool ok = j > i + kwlen && size - j >= sizeof(INC) - 1 &&
		          memcmp(text + j, INC, sizeof(INC) - 1) == 0;
		j += sizeof(INC) - 1;
		ok = ok && (j == size || is_blank(text[j]) || text[j] == '\n' || text[j] == '\r' ||
		            text[j] == ';');
		if (!ok)
			text[i] = ';';
	}
}

static bool in_zone(const zone_t *zone, const uint8_t *name, size_t len)
{
	return len >= zone->apex_len && dname_is_subdomain(name, zone->apex);
}

static void check_node(const zone_t *zone, const zone_node_t *node)
{
	size_t len = dname_len(node->owner);
	FUZZ_CHECK(dname_is_valid(node->owner, len));
	FUZZ_CHECK(in_zone(zone, node->owner, len));
	uint8_t lower[DNS_DNAME_MAXLEN];
	memcpy(lower, node->owner, len);
	dname_lower(lower);
	FUZZ_CHECK(memcmp(lower, node->owner, len) == 0);
	FUZZ_CHECK(zone_find_node(zone, node->owner, len) == node);
	FUZZ_CHECK((node->parent == NULL) == (node == zone->apex_node));
	FUZZ_CHECK((node->rrsets == NULL) == (node->n_rrsets == 0));
	bool cname = false, other = false;
	for (uint16_t i = 0; i < node->n_rrsets; i++) {
		const zone_rrset_t *rs = &node->rrsets[i];
		FUZZ_CHECK(i == 0 || node->rrsets[i - 1].type < rs->type);
		FUZZ_CHECK(rs->count > 0 && rs->rdata != NULL);
		FUZZ_CHECK(zone_node_rrset(node, rs->type) == rs);
		zone_rdata_iter_t it = zone_rdata_iter(rs);
		uint16_t rdlen;
		size_t n = 0;
		while (zone_rdata_next(&it, &rdlen) != NULL)
			n++;
		FUZZ_CHECK(n == rs->count);
		cname = cname || rs->type == DNS_TYPE_CNAME;
		other = other || (rs->type != DNS_TYPE_CNAME && rs->type != DNS_TYPE_RRSIG &&
		                  rs->type != DNS_TYPE_NSEC);
	}
	FUZZ_CHECK(!(cname && other) || (node->flags & ZONE_NODE_NONAUTH));
}

static void check_zone(const zone_t *zone)
{
	FUZZ_CHECK(zone->apex_node != NULL && zone->soa != NULL);
	FUZZ_CHECK(zone->apex_node->flags & ZONE_NODE_APEX);
	FUZZ_CHECK(zone_node_rrset(zone->apex_node, DNS_TYPE_SOA) == zone->soa);
	FUZZ_CHECK(zone_node_rrset(zone->apex_node, DNS_TYPE_NS) != NULL);
	FUZZ_CHECK(zone->soa->count == 1);
	size_t n;
	const zone_node_t *nodes = zone_nodes(zone, &n);
	FUZZ_CHECK(n == zone->n_nodes && n >= 1 && &nodes[0] == zone->apex_node);
	for (size_t i = 0; i < n; i++) {
		check_node(zone, &nodes[i]);
		/* AXFR walks this order: a parent always came earlier */
		FUZZ_CHECK(i == 0 || (nodes[i].parent >= nodes && nodes[i].parent < &nodes[i]));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (dir[0] == '\0')
		setup();
	char *text = malloc(size ? size : 1);
	FUZZ_CHECK(text != NULL);
	memcpy(text, data, size);
	neutralise_includes(text, size);
	FILE *f = fopen(zone_path, "w");
	FUZZ_CHECK(f != NULL);
	FUZZ_CHECK(fwrite(text, 1, size, f) == size);
	FUZZ_CHECK(fclose(f) == 0);
	free(text);

	zone_t *zone = NULL;
	char err[1024] = "";
	int ret = zone_load(ORIGIN, zone_path, &zone, err, sizeof(err));
	if (ret == 0) {
		FUZZ_CHECK(zone != NULL);
		check_zone(zone);
		zone_unref(zone);
	} else {
		FUZZ_CHECK(zone == NULL);
		FUZZ_CHECK(strstr(err, dir) != NULL || strstr(err, ORIGIN) != NULL);
	}
	return 0;
}
