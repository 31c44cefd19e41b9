/*
 * Fuzz target: the response builder (auth_answer, auth_axfr_next) over the zones of the
 * differential test, loaded once. Each input is answered as UDP with the smallest and the
 * largest buffer the contract allows and as TCP, where an allowed AXFR runs to the end. Every
 * reply must fit its buffer and be a well-formed message answering the input's id.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth.h"
#include "base/log.h"
#include "dns/dname.h"
#include "fuzz.h"

/* More AXFR messages than the test zones can need: a transfer that goes on is a hang. */
#define AXFR_MESSAGES_MAX 10000

static const char *const zones[][2] = {
    {"diff.test.", "diff.test.zone"},
    {"child.diff.test.", "child.diff.test.zone"},
    {"other.test.", "other.test.zone"},
    {"2.0.192.in-addr.arpa.", "2.0.192.in-addr.arpa.zone"},
};

static auth_view_t view;
static steer_sockaddr_t remote;
static auth_qctx_t qctx;             /* zeroed: counters at 0, a fixed random state */
static uint8_t *small_buf, *big_buf; /* exactly their capacity, so ASan sees any overrun */

static void setup(void)
{
	char path[4096], err[512];
	dns_acl_entry_t allow = {0};
	log_setup(LOG_TARGET_STDERR, LOG_LEVEL_ERR);
	zone_set_t *set = zone_set_new();
	for (size_t i = 0; i < sizeof(zones) / sizeof(zones[0]); i++) {
		zone_t *zone;
		snprintf(path, sizeof(path), "%s/%s", FUZZ_ZONE_DIR, zones[i][1]);
		if (zone_load(zones[i][0], path, &zone, err, sizeof(err)) != 0) {
			fprintf(stderr, "fuzz_answer: %s\n", err);
			abort();
		}
		/* AXFR allowed for the first zone only, so both the transfer and the refusal run.
		 */
		FUZZ_CHECK(steer_prefix_parse(i == 0 ? "127.0.0.0/8" : "192.0.2.0/24",
		                              &allow.prefix) == 0);
		FUZZ_CHECK(
		    zone_set_add(set, zone,
		                 &(zone_set_entry_t){.xfr_allow = &allow, .n_xfr_allow = 1}) == 0);
	}
	FUZZ_CHECK(steer_sockaddr_parse("127.0.0.1:53000", 53, &remote) == 0);
	view.zones = set;
	view.udp_max_payload = DNS_EDNS_DEFAULT_PAYLOAD;
	/* the longest identity there is, so NSID and CH TXT press on every size limit */
	static char identity[256];
	memset(identity, 'n', sizeof(identity) - 1);
	view.identity = identity;
	view.identity_len = (uint8_t)(sizeof(identity) - 1);
	small_buf = malloc(DNS_UDP_MINLEN);
	big_buf = malloc(DNS_MSG_MAXLEN);
	FUZZ_CHECK(small_buf != NULL && big_buf != NULL);
}

/* A reply is a header, its questions and records that exactly fill it. */
static void check_reply(const uint8_t *req, size_t req_len, const uint8_t *resp, size_t len,
                        size_t cap)
{
	uint8_t name[DNS_DNAME_MAXLEN];
	FUZZ_CHECK(len <= cap && len >= DNS_HEADER_LEN && (resp[2] & 0x80));
	FUZZ_CHECK(req_len < 2 || memcmp(req, resp, 2) == 0);
	size_t pos = DNS_HEADER_LEN;
	unsigned qd = resp[4] << 8 | resp[5];
	unsigned rrs =
	    (resp[6] << 8 | resp[7]) + (resp[8] << 8 | resp[9]) + (resp[10] << 8 | resp[11]);
	for (unsigned i = 0; i < qd + rrs; i++) {
		FUZZ_CHECK(dname_unpack(resp, len, &pos, name) > 0);
		size_t fixed = i < qd ? 4 : 10;
		FUZZ_CHECK(pos + fixed <= len);
		if (i >= qd)
			pos += (size_t)(resp[pos + 8] << 8 | resp[pos + 9]);
		pos += fixed;
		FUZZ_CHECK(pos <= len);
	}
	FUZZ_CHECK(pos == len);
}

static void answer(const uint8_t *data, size_t size, bool tcp, uint8_t *buf, size_t cap)
{
	auth_client_t client = {.remote = &remote, .tcp = tcp};
	auth_axfr_t axfr;
	memset(&axfr, 0, sizeof(axfr));
	size_t len = auth_answer(&view, &client, data, size, buf, cap, &qctx, tcp ? &axfr : NULL);
	if (len > 0)
		check_reply(data, size, buf, len, cap);
	if (!tcp)
		return;
	for (unsigned n = 0; axfr.zone != NULL; n++) {
		FUZZ_CHECK(n < AXFR_MESSAGES_MAX);
		len = auth_axfr_next(&axfr, buf, cap);
		if (len == 0)
			break;
		check_reply(data, size, buf, len, cap);
	}
	auth_axfr_cleanup(&axfr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (view.zones == NULL)
		setup();
	answer(data, size, false, small_buf, DNS_UDP_MINLEN);
	answer(data, size, false, big_buf, DNS_MSG_MAXLEN);
	answer(data, size, true, big_buf, DNS_MSG_MAXLEN);
	return 0;
}
