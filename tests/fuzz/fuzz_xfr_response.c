/*
 * Fuzz target: what a secondary receives from a primary (src/xfr/msg.c): the reply to its SOA
 * query and the messages of an AXFR, fed to the receiver with the zone's limits, then the
 * received zone written as a master file and loaded back, as a transfer is applied.
 *
 * Input: byte 0 picks the limits (max-records and max-transfer-size, small ones included so
 * that the abort paths run) and, with bit 7, an IXFR from serial 7 of a small fz.test. zone
 * whose diffs are then applied to it; then messages, each a 16-bit big-endian length and the bytes
 * (TCP framing). The query id is taken from the first message so the fuzzer gets past it.
 * Besides sanitizer findings it checks that a completed transfer kept within the limits and
 * that what it wrote loads as a zone whose serial is the transferred one, or is refused.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "dns/dname.h"
#include "dns/wire.h"
#include "fuzz.h"
#include "xfr/msg.h"
#include "zone/zone.h"

static const struct {
	uint64_t records, bytes;
} limits[] = {{5000000, 256u << 20}, {3, 65536}, {1, 1 << 20}, {1000, 600}};

static int fill(FILE *f, const xfr_rx_t *rx)
{
	return xfr_rx_write(rx, f);
}

static const char base_zone[] = "$ORIGIN fz.test.\n$TTL 300\n"
                                "@ SOA ns admin 7 3600 600 86400 300\n@ NS ns\n"
                                "ns A 127.0.0.1\nwww A 192.0.2.1\nmail MX 10 www\n";

/* The version an IXFR starts from, loaded once. */
static zone_t *base(const char *path)
{
	static zone_t *zone;
	if (zone == NULL) {
		FILE *f = fopen(path, "w");
		FUZZ_CHECK(f != NULL && fputs(base_zone, f) >= 0 && fclose(f) == 0);
		char err[1024];
		FUZZ_CHECK(zone_load("fz.test.", path, &zone, err, sizeof(err)) == 0);
		unlink(path);
	}
	return zone;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	if (path[0] == '\0') {
		snprintf(path, sizeof(path), "/tmp/fuzz_xfr_%ld.zone", (long)getpid());
	}
	const zone_t *cur = base(path);
	bool ixfr = size > 0 && (data[0] & 0x80);
	if (size < 3)
		return 0;
	uint8_t apex[DNS_DNAME_MAXLEN];
	FUZZ_CHECK(dname_from_str("fz.test.", apex) > 0);
	size_t li = (data[0] & 0x7f) % (sizeof(limits) / sizeof(limits[0]));
	const uint8_t *p = data + 1;
	size_t left = size - 1;
	uint16_t id = left >= 4 ? wire_read_u16(p + 2) : 0;

	/* The first message also as the answer to an SOA query and to a NOTIFY. */
	if (left >= 2) {
		size_t len = wire_read_u16(p);
		if (len <= left - 2) {
			xfr_soa_t soa;
			char err[160];
			uint8_t rcode;
			(void)xfr_soa_reply(p + 2, len, id, apex, &soa, err, sizeof(err));
			(void)xfr_notify_reply(p + 2, len, id, &rcode);
		}
	}

	xfr_rx_t rx, whole = {0};
	if (ixfr)
		xfr_rx_init_ixfr(&rx, apex, id, limits[li].bytes, limits[li].records, cur->serial);
	else
		xfr_rx_init(&rx, apex, id, limits[li].bytes, limits[li].records);
	int st = 0;
	while (st == 0 && left >= 2) {
		size_t len = wire_read_u16(p);
		if (len > left - 2)
			break;
		st = xfr_rx_feed(&rx, p + 2, len);
		p += 2 + len;
		left -= 2 + len;
	}
	if (st == 1 && rx.mode == XFR_RX_IXFR) {
		FUZZ_CHECK(ixfr);
		if (xfr_rx_apply(&rx, cur, &whole) == 0) {
			FUZZ_CHECK(whole.records <= limits[li].records);
			xfr_rx_free(&rx);
			rx = whole;
			whole = (xfr_rx_t){0};
		} else {
			st = -1;
		}
	}
	if (st == 1 && rx.mode == XFR_RX_UPTODATE) {
		FUZZ_CHECK(ixfr && rx.records <= 1);
		st = 0;
	}
	if (st == 1) {
		FUZZ_CHECK(rx.records <= limits[li].records);
		FUZZ_CHECK(rx.bytes <= limits[li].bytes);
		FUZZ_CHECK(rx.records >= 1);
		FILE *f = fopen(path, "w");
		FUZZ_CHECK(f != NULL);
		FUZZ_CHECK(fill(f, &rx) == 0);
		FUZZ_CHECK(fclose(f) == 0);
		zone_t *zone = NULL;
		char err[1024];
		if (zone_load("fz.test.", path, &zone, err, sizeof(err)) == 0) {
			FUZZ_CHECK(zone->serial == rx.soa.serial);
			FUZZ_CHECK(zone->n_records <= rx.records);
			zone_unref(zone);
		}
		unlink(path);
	}
	xfr_rx_free(&rx);
	xfr_rx_free(&whole);
	return 0;
}
