/*
 * fwd_cache_hits: answers per second of a forwarder cache hit (dns_query_parse +
 * fwd_cache_answer) against steerd's static authoritative answer (auth_answer) for the same
 * name and the same response bytes, on one thread, interleaved rounds.
 *
 *   fwd_cache_hits [-n QUERIES_PER_ROUND] [-r ROUNDS]
 *   fwd_cache_hits -f CAP_MIB [-n NAMES]
 *
 * -f floods a cache of CAP_MIB with NAMES (default 4,000,000) random names instead, storing
 * auth's answer to each as the forwarder would, and prints peak RSS against the cap (the
 * issue's goal: within the cap + 20 %).
 *
 * The cached entry is auth's own answer stored as if an upstream had sent it, so both paths
 * write the same message. Queries carry EDNS and rotate through a few IDs and name spellings,
 * as a load generator's would. Inside one RCU read-side section per 32 queries, as a UDP
 * worker's batch. Prints the best round of each and the ratio cache / auth, and the same for
 * what a forwarded name will cost in the worker: auth finding no zone for it, then the hit.
 */
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <urcu.h>

#include "auth/auth.h"
#include "auth/qctx.h"
#include "base/sockaddr.h"
#include "dns/dname.h"
#include "dns/pkt.h"
#include "dns/wire.h"
#include "fwd/cache.h"
#include "zone/zone.h"
#include "zone/zone_set.h"

#define BATCH 32
#define NQ    8

static const char zone_text[] = "$ORIGIN bench.test.\n"
                                "$TTL 3600\n"
                                "@ IN SOA ns1 hostmaster 1 7200 900 1209600 300\n"
                                "  IN NS ns1\n"
                                "ns1 IN A 192.0.2.1\n"
                                "www IN A 192.0.2.80\n";

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t make_query(uint8_t *buf, const char *name, uint16_t id)
{
	wire_ctx_t ctx = wire_ctx_init(buf, 512);
	wire_ctx_write_u16(&ctx, id);
	wire_ctx_write_u16(&ctx, DNS_FLAG_RD);
	wire_ctx_write_u16(&ctx, 1);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 1);
	uint8_t wire[DNS_DNAME_MAXLEN];
	int len = dname_from_str(name, wire);
	wire_ctx_write(&ctx, wire, (size_t)len);
	wire_ctx_write_u16(&ctx, DNS_TYPE_A);
	wire_ctx_write_u16(&ctx, DNS_CLASS_IN);
	wire_ctx_write_u8(&ctx, 0);
	wire_ctx_write_u16(&ctx, DNS_TYPE_OPT);
	wire_ctx_write_u16(&ctx, 1232);
	wire_ctx_write_u32(&ctx, 0);
	wire_ctx_write_u16(&ctx, 0);
	return wire_ctx_offset(&ctx);
}

static long rss_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* Random names under bench.test: auth answers NXDOMAIN with the SOA, a negative entry. */
static int flood(const auth_view_t *view, const auth_client_t *client, auth_qctx_t *qctx,
                 unsigned long cap_mib, unsigned long names)
{
	long base = rss_kib();
	fwd_cache_opts_t o;
	fwd_cache_opts_default(&o);
	o.max_bytes = cap_mib << 20;
	fwd_cache_t *c = NULL;
	if (fwd_cache_new(&o, &c) != 0)
		return 1;
	static uint8_t resp[65535];
	uint64_t x = 88172645463325252ull;
	double t = now_s();
	for (unsigned long i = 0; i < names; i++) {
		char name[64];
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		snprintf(name, sizeof(name), "%016llx.bench.test", (unsigned long long)x);
		uint8_t query[512];
		size_t qlen = make_query(query, name, (uint16_t)i);
		dns_query_t q;
		size_t rlen =
		    auth_answer(view, client, query, qlen, resp, sizeof(resp), qctx, NULL);
		if (dns_query_parse(query, qlen, &q) != DNS_QUERY_OK ||
		    fwd_cache_store(c, &q, resp, rlen, i / 1000) != 0) {
			fprintf(stderr, "store failed at %lu\n", i);
			return 1;
		}
	}
	double secs = now_s() - t;
	synchronize_rcu(); /* let liburcu free what eviction handed it */
	fwd_cache_stats_t st;
	fwd_cache_stats(c, &st);
	long peak = rss_kib() - base;
	printf("fwd_cache_hits flood: %lu names in %.2f s (%.0f stores/s), cap %lu MiB, "
	       "%llu entries, %llu evictions, accounted %.1f MiB, peak RSS growth %.1f MiB "
	       "(%.2f of the cap)\n",
	       names, secs, (double)names / secs, cap_mib, (unsigned long long)st.entries,
	       (unsigned long long)st.evictions, (double)st.bytes / 1048576.0,
	       (double)peak / 1024.0, (double)peak / 1024.0 / (double)cap_mib);
	fwd_cache_free(c);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long n = 4000000, rounds = 5, flood_mib = 0;
	int opt;
	while ((opt = getopt(argc, argv, "n:r:f:")) != -1) {
		if (opt == 'n')
			n = strtoul(optarg, NULL, 10);
		else if (opt == 'r')
			rounds = strtoul(optarg, NULL, 10);
		else if (opt == 'f')
			flood_mib = strtoul(optarg, NULL, 10);
		else {
			fprintf(stderr,
			        "usage: fwd_cache_hits [-n QUERIES] [-r ROUNDS] [-f CAP_MIB]\n");
			return 2;
		}
	}
	rcu_register_thread();
	char path[] = "/tmp/fwd_cache_hits.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 ||
	    write(fd, zone_text, sizeof(zone_text) - 1) != (ssize_t)sizeof(zone_text) - 1) {
		perror("zone file");
		return 1;
	}
	close(fd);
	zone_t *zone = NULL;
	char err[256] = "";
	int ret = zone_load("bench.test", path, &zone, err, sizeof(err));
	unlink(path);
	zone_set_t *zones = zone_set_new();
	if (ret != 0 || !zones || zone_set_add(zones, zone, &(zone_set_entry_t){0}) != 0) {
		fprintf(stderr, "zone: %s\n", err);
		return 1;
	}
	static auth_qctx_t qctx;
	auth_qctx_init(&qctx, 1);
	auth_view_t view = {.zones = zones, .udp_max_payload = 1232};
	steer_sockaddr_t remote;
	if (steer_sockaddr_parse("127.0.0.1:9999", 0, &remote) != 0)
		return 1;
	auth_client_t client = {.remote = &remote, .tcp = false};

	static const char *const spellings[NQ] = {
	    "www.bench.test", "WWW.bench.test", "www.BENCH.test", "wWw.bEnCh.TeSt",
	    "www.bench.TEST", "Www.Bench.Test", "WWW.BENCH.TEST", "www.bench.test",
	};
	uint8_t queries[NQ][512];
	size_t qlen[NQ];
	for (unsigned i = 0; i < NQ; i++)
		qlen[i] = make_query(queries[i], spellings[i], (uint16_t)(0x1000 + i));

	/* The "upstream reply": auth's own answer. */
	static uint8_t resp[65535];
	size_t rlen =
	    auth_answer(&view, &client, queries[0], qlen[0], resp, sizeof(resp), &qctx, NULL);
	fwd_cache_opts_t o;
	fwd_cache_opts_default(&o);
	fwd_cache_t *c = NULL;
	dns_query_t q;
	if (fwd_cache_new(&o, &c) != 0 ||
	    dns_query_parse(queries[0], qlen[0], &q) != DNS_QUERY_OK ||
	    fwd_cache_store(c, &q, resp, rlen, 0) != 0) {
		fprintf(stderr, "cache setup failed\n");
		return 1;
	}
	if (flood_mib)
		return flood(&view, &client, &qctx, flood_mib, n);
	fwd_cache_counters_t ctr;
	memset(&ctr, 0, sizeof(ctr));

	/* What a forwarded name costs the authoritative side first: a lookup that finds no zone. */
	uint8_t outside[NQ][512];
	size_t olen[NQ];
	for (unsigned i = 0; i < NQ; i++)
		olen[i] = make_query(outside[i], "www.forwarded.example", (uint16_t)(0x2000 + i));
	double best_auth = 0, best_cache = 0, best_outside = 0;
	size_t bytes[3] = {0}; /* per path, to show each wrote its answers */
	for (unsigned long r = 0; r < rounds; r++) {
		double t = now_s();
		for (unsigned long i = 0; i < n; i += BATCH) {
			rcu_read_lock();
			for (unsigned k = 0; k < BATCH; k++) {
				unsigned j = (unsigned)(i + k) % NQ;
				bytes[0] += auth_answer(&view, &client, queries[j], qlen[j], resp,
				                        sizeof(resp), &qctx, NULL);
			}
			rcu_read_unlock();
		}
		double rate = (double)n / (now_s() - t);
		best_auth = rate > best_auth ? rate : best_auth;

		t = now_s();
		for (unsigned long i = 0; i < n; i += BATCH) {
			rcu_read_lock();
			for (unsigned k = 0; k < BATCH; k++) {
				unsigned j = (unsigned)(i + k) % NQ;
				size_t len = 0;
				if (dns_query_parse(queries[j], qlen[j], &q) == DNS_QUERY_OK)
					fwd_cache_answer(c, &q, 1000, false, 1232, resp,
					                 sizeof(resp), &len, &ctr);
				bytes[1] += len;
			}
			rcu_read_unlock();
		}
		rate = (double)n / (now_s() - t);
		best_cache = rate > best_cache ? rate : best_cache;

		t = now_s();
		for (unsigned long i = 0; i < n; i += BATCH) {
			rcu_read_lock();
			for (unsigned k = 0; k < BATCH; k++) {
				unsigned j = (unsigned)(i + k) % NQ;
				bytes[2] += auth_answer(&view, &client, outside[j], olen[j], resp,
				                        sizeof(resp), &qctx, NULL);
			}
			rcu_read_unlock();
		}
		rate = (double)n / (now_s() - t);
		best_outside = rate > best_outside ? rate : best_outside;
	}
	if (atomic_load(&ctr.hits) != rounds * ((n + BATCH - 1) / BATCH * BATCH)) {
		fprintf(stderr, "not every cache lookup hit\n");
		return 1;
	}
	/* Both costs in one query: the worker tries its zones, then the cache. */
	double both = 1.0 / (1.0 / best_outside + 1.0 / best_cache);
	printf(
	    "fwd_cache_hits: response %zu bytes, auth %.0f q/s, cache hit %.0f q/s (ratio %.2f), "
	    "auth no-zone %.0f q/s, no-zone + cache hit %.0f q/s (ratio %.2f); mean bytes %.0f "
	    "%.0f %.0f\n",
	    rlen, best_auth, best_cache, best_cache / best_auth, best_outside, both,
	    both / best_auth, (double)bytes[0] / (double)(rounds * n),
	    (double)bytes[1] / (double)(rounds * n), (double)bytes[2] / (double)(rounds * n));
	fwd_cache_free(c);
	zone_set_free(zones);
	rcu_unregister_thread();
	return 0;
}
