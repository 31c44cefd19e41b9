/*
 * The cluster thread end to end inside a private network namespace (root only; exit 77
 * skips otherwise): the real keeper process with the `interface` method holding
 * 192.0.2.53 and 2001:db8::53 on an ifb holder, a small DNS responder thread of this test
 * on the service and unicast addresses standing in for the server under check, and inputs
 * callbacks the test flips. Each phase measures from the fault (or the recovery) to the
 * holder going down (or up) and prints the time; the goal is a withdraw within 0.5 s with a
 * 100 ms interval and fall 3.
 */
#include "cluster/cluster.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cluster/selfquery.h"
#include "dns/const.h"
#include "dns/dname.h"
#include "dns/msg.h"
#include "dns/pkt.h"
#include "unit.h"

#define HOLDER "vip0"
#define UPLINK "up0"

/* Generous bounds for a loaded two-core machine; the printed times are the result. */
#define WITHDRAW_MAX_MS 700
#define HOLD_DOWN_MS    1000

static const char *const service_text[] = {"192.0.2.53", "2001:db8::53"};
static const char *const bind_text[] = {"192.0.2.53", "2001:db8::53", "10.53.0.11",
                                        "2001:db8:1::11"};
#define N_BIND 4

/* What the test flips. */
static atomic_bool answering = true;
static atomic_bool threads_good = true;
static atomic_bool reload_good = true;
static atomic_int hang_ms;        /* threads_ok sleeps this long once: a hung cluster thread */
static _Atomic double hang_start; /* when it began */
static atomic_ullong served;      /* queries the responder received */
static atomic_ullong client_sent; /* queries of the fake clients */
static atomic_bool responder_quit;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int sh(const char *cmd)
{
	int ret = system(cmd);
	CHECK(ret == 0, "command failed: %s", cmd);
	return ret;
}

static int holder_up(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", HOLDER);
	int ret = ioctl(fd, SIOCGIFFLAGS, &ifr);
	close(fd);
	if (ret != 0)
		return -1;
	return (ifr.ifr_flags & IFF_UP) != 0;
}

/* Milliseconds until the holder is @p up, or -1 after @p max_ms. */
static double wait_holder(bool up, double start, unsigned max_ms)
{
	while (now_ms() - start < max_ms) {
		if (holder_up() == (int)up)
			return now_ms() - start;
		sleep_ms(2);
	}
	return -1;
}

/* ---- the responder: id.server CH TXT "n1" and the SOA of example.test ---- */

static size_t answer(const uint8_t *pkt, size_t len, uint8_t *out, size_t size)
{
	dns_query_t q;
	if (dns_query_parse(pkt, len, &q) != DNS_QUERY_OK || !q.has_question)
		return 0;
	dns_msg_t msg;
	dns_msg_init(&msg, out, size);
	uint8_t apex[DNS_DNAME_MAXLEN], id[DNS_DNAME_MAXLEN];
	if (dname_from_str("example.test", apex) <= 0 || dname_from_str("id.server", id) <= 0)
		return 0;
	if (q.qtype == DNS_TYPE_SOA && q.qclass == DNS_CLASS_IN && dname_equal(q.qname, apex)) {
		static const uint8_t soa[] = {2, 'n', 's', 0, 0, 0, 0, 0, 1, 0, 0, 0, 2,
		                              0, 0,   0,   3, 0, 0, 0, 4, 0, 0, 0, 5};
		dns_msg_begin(&msg, &q, DNS_RCODE_NOERROR);
		dns_msg_set_flags(&msg, DNS_FLAG_AA, 0);
		dns_msg_put_rr(&msg, DNS_SEC_ANSWER, apex, DNS_TYPE_SOA, DNS_CLASS_IN, 60, soa,
		               sizeof(soa));
	} else if (q.qtype == DNS_TYPE_TXT && q.qclass == DNS_CLASS_CH &&
	           dname_equal(q.qname, id)) {
		static const uint8_t txt[] = {2, 'n', '1'};
		dns_msg_begin(&msg, &q, DNS_RCODE_NOERROR);
		dns_msg_put_rr(&msg, DNS_SEC_ANSWER, id, DNS_TYPE_TXT, DNS_CLASS_CH, 0, txt,
		               sizeof(txt));
	} else {
		dns_msg_begin(&msg, &q, DNS_RCODE_REFUSED);
	}
	return dns_msg_finish(&msg);
}

static int bind_udp(const char *text, uint16_t port)
{
	steer_sockaddr_t a;
	if (steer_sockaddr_parse(text, port, &a) != 0)
		return -1;
	int fd = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (a.sa.sa_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, &a.sa, steer_sockaddr_len(&a)) != 0) {
		printf("bind %s: %s\n", text, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static void *responder_main(void *arg)
{
	int *fds = arg;
	struct pollfd pfd[N_BIND];
	for (int i = 0; i < N_BIND; i++)
		pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
	while (!responder_quit) {
		if (poll(pfd, N_BIND, 20) <= 0)
			continue;
		for (int i = 0; i < N_BIND; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			uint8_t buf[1500], out[1500];
			steer_sockaddr_t from;
			socklen_t flen = sizeof(from);
			ssize_t n = recvfrom(fds[i], buf, sizeof(buf), 0, &from.sa, &flen);
			if (n <= 0)
				continue;
			served++;
			if (!answering)
				continue;
			size_t len = answer(buf, (size_t)n, out, sizeof(out));
			if (len)
				sendto(fds[i], out, len, 0, &from.sa, flen);
		}
	}
	return NULL;
}

/* ---- a client sending queries to the service address (for the drain) ---- */

static void *client_main(void *arg)
{
	unsigned ms = *(unsigned *)arg;
	steer_sockaddr_t dst;
	if (steer_sockaddr_parse("192.0.2.53", 53, &dst) != 0)
		return NULL;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	static const uint8_t query[] = {0,   1, 0,   0,   0,   1,   0,   0,   0, 0, 0,  0, 2, 'i',
	                                'd', 6, 's', 'e', 'r', 'v', 'e', 'r', 0, 0, 16, 0, 3};
	double start = now_ms();
	while (now_ms() - start < ms) {
		sendto(fd, query, sizeof(query), 0, &dst.sa, steer_sockaddr_len(&dst));
		client_sent++;
		sleep_ms(20);
	}
	close(fd);
	return NULL;
}

/* ---- inputs ---- */

static bool in_threads(void *ctx, unsigned max_age_ms, char *why, size_t whylen)
{
	(void)ctx;
	int hang = atomic_exchange(&hang_ms, 0);
	if (hang) {
		hang_start = now_ms();
		sleep_ms((unsigned)hang);
	}
	if (threads_good)
		return true;
	snprintf(why, whylen, "query thread 1 made no progress for more than %u ms", max_age_ms);
	return false;
}

static bool in_reload(void *ctx, char *why, size_t whylen)
{
	(void)ctx;
	if (reload_good)
		return true;
	snprintf(why, whylen, "zone example.test: example.test.zone:3: bad SOA");
	return false;
}

static uint64_t in_queries(void *ctx)
{
	(void)ctx;
	return served;
}

/* ---- phases ---- */

static void status_of(cluster_t *c, cluster_status_t *st)
{
	cluster_status(c, st);
}

static void expect_state(cluster_t *c, cluster_state_t want, const char *reason, const char *phase)
{
	cluster_status_t st;
	status_of(c, &st);
	CHECK(st.state == want, "%s: state %s, want %s (reason: %s)", phase,
	      cluster_state_name(st.state), cluster_state_name(want), st.reason);
	CHECK(!reason || strstr(st.reason, reason), "%s: reason '%s' lacks '%s'", phase, st.reason,
	      reason);
}

/* The time of the last transition (the withdraw just seen), for the hold-down check. */
static double last_transition(cluster_t *c)
{
	cluster_status_t st;
	status_of(c, &st);
	return st.last_transition;
}

/* Waits for the holder to come up after a recovery at @p start; the announce must come at
 * least the hold-down after the withdraw at @p withdrawn_at (the cluster's own time stamps:
 * the holder's are late by however long the keeper and this loop took). */
static void expect_rejoin(cluster_t *c, double start, double withdrawn_at, const char *phase)
{
	double t = wait_holder(true, start, HOLD_DOWN_MS + 3000);
	double gap = (last_transition(c) - withdrawn_at) * 1e3;
	printf("%s: recovery -> announced (holder up) in %.0f ms, %.0f ms after the withdraw "
	       "(rise 5 x 100 ms, hold-down %d ms)\n",
	       phase, t, gap, HOLD_DOWN_MS);
	CHECK(t >= 0, "%s: announced again", phase);
	CHECK(gap >= HOLD_DOWN_MS - 5,
	      "%s: announced %.0f ms after the withdraw, inside the hold-down", phase, gap);
	expect_state(c, CLUSTER_ANNOUNCED, NULL, phase);
}

static void phase_withdraw(cluster_t *c, const char *phase, atomic_bool *flag, const char *reason)
{
	double start = now_ms();
	*flag = false;
	double t = wait_holder(false, start, 3000);
	double down = last_transition(c);
	printf("%s: failure -> withdrawn (holder down) in %.0f ms\n", phase, t);
	CHECK(t >= 0 && t <= WITHDRAW_MAX_MS, "%s: withdrawn in %.0f ms (at most %d)", phase, t,
	      WITHDRAW_MAX_MS);
	expect_state(c, CLUSTER_WITHDRAWN, reason, phase);
	/* While withdrawn both service addresses are still asked themselves: IPv4 keeps its
	 * local route on a down holder, and the keeper gave the IPv6 one a local route through
	 * lo. */
	sleep_ms(300);
	*flag = true;
	start = now_ms();
	sleep_ms(250);
	cluster_status_t st;
	status_of(c, &st);
	CHECK(st.hold_down_left > 0, "%s: hold-down running (%.3f s left)", phase,
	      st.hold_down_left);
	CHECK(strstr(st.checks[0].detail, "SOA from 2 addresses") &&
	          !strstr(st.checks[0].detail, "asked"),
	      "%s: answer detail while withdrawn: %s", phase, st.checks[0].detail);
	if (strcmp(phase, "answer") == 0) {
		/* Without that local route a query to it would leave by the default route: the
		 * unicast address is asked instead, and the detail says so. */
		sh("ip -6 route del local 2001:db8::53 table local");
		sleep_ms(250);
		status_of(c, &st);
		CHECK(st.checks[0].ok && strstr(st.checks[0].detail,
		                                "2001:db8::53 has no local route while withdrawn: "
		                                "asked 2001:db8:1::11"),
		      "%s: answer detail without the IPv6 local route: %s", phase,
		      st.checks[0].detail);
		printf("%s: without the IPv6 local route: %s\n", phase, st.checks[0].detail);
		sh("ip -6 route add local 2001:db8::53 dev lo table local proto 53");
	}
	expect_rejoin(c, start, down, phase);
}

static void phase_routes(cluster_t *c)
{
	double start = now_ms();
	sh("ip route del default");
	double t = wait_holder(false, start, 3000);
	double down = last_transition(c);
	printf("routes: IPv4 default route removed -> withdrawn in %.0f ms\n", t);
	CHECK(t >= 0 && t <= WITHDRAW_MAX_MS, "routes: withdrawn in %.0f ms", t);
	expect_state(c, CLUSTER_WITHDRAWN, "routes: no IPv4 default route", "routes");
	sh("ip route add default via 10.53.0.1 dev " UPLINK);
	expect_rejoin(c, now_ms(), down, "routes");
}

static void phase_hang(cluster_t *c)
{
	double start = now_ms();
	hang_ms = 700;
	double t = wait_holder(false, start, 3000);
	double hung = start + t - hang_start;
	/* The keeper counts from the last heartbeat, up to one period (100 ms) before the block. */
	printf("hang: cluster thread blocked -> keeper withdrew (holder down) in %.0f ms "
	       "(liveness 300 ms from the last heartbeat)\n",
	       hung);
	CHECK(t >= 0 && hung >= 150 && hung <= 450, "hang: keeper withdrew %.0f ms after the block",
	      hung);
	sleep_ms(700);
	expect_state(c, CLUSTER_WITHDRAWN, "keeper: ", "hang");
	expect_rejoin(c, now_ms(), last_transition(c), "hang");
}

static void phase_drain(cluster_t *c)
{
	unsigned traffic_ms = 800;
	pthread_t client;
	pthread_create(&client, NULL, client_main, &traffic_ms);
	sleep_ms(100);
	double start = now_ms();
	cluster_drain(c, 0);
	double t = wait_holder(false, start, 1000);
	printf("drain: drain -> withdrawn in %.0f ms\n", t);
	CHECK(t >= 0 && t <= 200, "drain: withdrawn at once (%.0f ms)", t);
	expect_state(c, CLUSTER_DRAINING, "drain requested", "drain");
	sleep_ms(500);
	expect_state(c, CLUSTER_DRAINING, NULL, "drain: queries still arriving");
	pthread_join(client, NULL);
	double stopped = now_ms();
	cluster_status_t st;
	do {
		sleep_ms(10);
		status_of(c, &st);
	} while (st.state == CLUSTER_DRAINING && now_ms() - stopped < 3000);
	printf("drain: last client query -> drained in %.0f ms (drain-quiet 500 ms)\n",
	       now_ms() - stopped);
	expect_state(c, CLUSTER_DRAINED, "no client query", "drain");
	CHECK(!st.drain_timed_out && st.drain_started > 0, "drain: ended by quiet (timed out %d)",
	      st.drain_timed_out);
	CHECK(holder_up() == 0, "drain: still withdrawn");
	start = now_ms();
	CHECK(cluster_undrain(c), "undrain accepted");
	t = wait_holder(true, start, 1000);
	printf("undrain: -> announced in %.0f ms (no hold-down)\n", t);
	CHECK(t >= 0 && t <= 200, "undrain: announced at once (%.0f ms)", t);
	expect_state(c, CLUSTER_ANNOUNCED, "undrain", "undrain");
	CHECK(!cluster_undrain(c), "undrain refused when not draining");
}

static void phase_drain_timeout(cluster_t *c)
{
	unsigned traffic_ms = 1200;
	pthread_t client;
	pthread_create(&client, NULL, client_main, &traffic_ms);
	double start = now_ms();
	cluster_drain(c, 600);
	cluster_status_t st;
	do {
		sleep_ms(10);
		status_of(c, &st);
	} while (st.state == CLUSTER_DRAINING && now_ms() - start < 3000);
	printf("drain: busy drain with a 600 ms timeout ended in %.0f ms\n", now_ms() - start);
	CHECK(st.state == CLUSTER_DRAINED && st.drain_timed_out,
	      "drain timeout: %s timed out %d (%s)", cluster_state_name(st.state),
	      st.drain_timed_out, st.reason);
	pthread_join(client, NULL);
	CHECK(cluster_undrain(c), "undrain after a timed-out drain");
	CHECK(wait_holder(true, now_ms(), 1000) >= 0, "announced after the undrain");
}

/* ---- the answer check's zones: a failing zone asked again, expired zones skipped ---- */

/* Waits up to @p max_ms for the answer check's detail to hold @p want. */
static bool wait_answer_detail(cluster_t *c, const char *want, unsigned max_ms)
{
	double start = now_ms();
	cluster_status_t st;
	do {
		status_of(c, &st);
		if (strstr(st.checks[0].detail, want) != NULL)
			return true;
		sleep_ms(10);
	} while (now_ms() - start < max_ms);
	printf("answer detail '%s' lacks '%s'\n", st.checks[0].detail, want);
	return false;
}

/* Whether the answer check's list marks zone @p i expired (skipped). */
static bool zone_skipped(cluster_t *c, size_t i)
{
	size_t n = 0;
	cluster_zone_status_t *z = cluster_zones(c, &n);
	bool skipped = i < n && z[i].expired;
	cluster_zones_free(z, n);
	return skipped;
}

static void phase_zones(cluster_t *c)
{
	/* other.test is REFUSED by the responder: asked in turn with a good zone it would fail
	 * one round in two, never fall (3) in a row; asked again after each failure it does. */
	static _Atomic int64_t example_expire, other_expire;
	atomic_store(&example_expire, 0);
	atomic_store(&other_expire, 0);
	const cluster_zone_t zones[] = {{"example.test", &example_expire},
	                                {"other.test", &other_expire}};
	double start = now_ms();
	cluster_set_zones(c, zones, 2);
	double t = wait_holder(false, start, 3000);
	double down = last_transition(c);
	printf("zones: a REFUSED zone next to a good one -> withdrawn in %.0f ms\n", t);
	CHECK(t >= 0 && t <= WITHDRAW_MAX_MS + 200, "zones: withdrawn in %.0f ms", t);
	expect_state(c, CLUSTER_WITHDRAWN, "answer: 192.0.2.53: other.test. SOA: rcode REFUSED",
	             "zones: failing zone");
	cluster_status_t st;
	status_of(c, &st);
	CHECK(st.checks[0].failures >= 3 && strstr(st.checks[0].detail, "other.test."),
	      "zones: the same zone failed %u rounds in a row: %s", st.checks[0].failures,
	      st.checks[0].detail);

	/* Expired, it is skipped: the rounds ask example.test only, the node comes back. */
	start = now_ms();
	atomic_store(&other_expire, (int64_t)time(NULL) - 1);
	CHECK(wait_answer_detail(c, "example.test. SOA from 2 addresses", 500),
	      "zones: the expired zone skipped, the good one asked");
	CHECK(!zone_skipped(c, 0) && zone_skipped(c, 1), "zones: other.test. shown expired");
	expect_rejoin(c, start, down, "zones: expired zone skipped");

	/* Every zone expired: id.server is asked, the node stays announced. */
	atomic_store(&example_expire, (int64_t)time(NULL) - 1);
	CHECK(wait_answer_detail(c, "id.server from 2 addresses", 500),
	      "zones: every zone expired: id.server asked");
	CHECK(zone_skipped(c, 0) && zone_skipped(c, 1), "zones: both shown expired");
	/* A list given again (a republish) keeps the rotation and the flags. */
	cluster_set_zones(c, zones, 2);
	CHECK(zone_skipped(c, 0) && zone_skipped(c, 1), "zones: flags kept over a new list");
	/* A refresh that succeeds brings the zone back into the check. */
	atomic_store(&example_expire, (int64_t)time(NULL) + 3600);
	CHECK(wait_answer_detail(c, "example.test. SOA from 2 addresses", 500),
	      "zones: a zone no longer expired is asked again");
	CHECK(!zone_skipped(c, 0) && zone_skipped(c, 1), "zones: example.test. back");
	sleep_ms(300);
	expect_state(c, CLUSTER_ANNOUNCED, NULL, "zones: announced throughout");
}

/* ---- the answer check alone, on a loop of this thread ---- */

typedef struct {
	bool done, ok;
	char detail[256];
} sq_result_t;

static void sq_cb(void *arg, bool ok, const char *detail)
{
	sq_result_t *r = arg;
	r->done = true;
	r->ok = ok;
	snprintf(r->detail, sizeof(r->detail), "%s", detail);
}

typedef struct {
	const char *name;
	const char *service[2];
	bool unicast;
	bool want_ok;
	const char *detail;
	const char *identity;
} sq_row_t;

static const sq_row_t sq_rows[] = {
    {"a VIP the other node holds is asked through the unicast address",
     {"192.0.2.99", "2001:db8::53"},
     true,
     true,
     "id.server from 2 addresses",
     "n1"},
    {"  ... and the detail says so",
     {"192.0.2.99", NULL},
     true,
     true,
     "192.0.2.99 not on this node: asked 10.53.0.11",
     "n1"},
    {"two VIPs elsewhere ask the unicast address once",
     {"192.0.2.98", "192.0.2.99"},
     true,
     true,
     "id.server from 1 address in",
     "n1"},
    {"nothing listening: refused at once",
     {"192.0.2.53:5399", NULL},
     true,
     false,
     "192.0.2.53:5399: connection refused",
     NULL},
    {"no local address and no unicast address: nothing to ask",
     {"192.0.2.99", NULL},
     false,
     false,
     "nothing to ask; 192.0.2.99 not on this node, no unicast address",
     NULL},
    {"id.server must answer the identity in force",
     {"192.0.2.53", NULL},
     true,
     false,
     "192.0.2.53: id.server: answers \"n1\", not this node's \"dns-a\"",
     "dns-a"},
    {"any identity when none is expected",
     {"192.0.2.53", NULL},
     true,
     true,
     "from 1 address",
     NULL},
};

static void phase_selfquery(void)
{
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	for (size_t i = 0; i < STEER_ARRAY_LEN(sq_rows); i++) {
		const sq_row_t *row = &sq_rows[i];
		conf_cluster_t cc;
		steer_sockaddr_t service[2];
		memset(&cc, 0, sizeof(cc));
		for (size_t j = 0; j < 2 && row->service[j]; j++)
			CHECK(steer_sockaddr_parse(row->service[j], 0, &service[cc.n_service++]) ==
			          0,
			      "parse %s", row->service[j]);
		cc.service = service;
		cc.node_id = "n1";
		if (row->unicast) {
			CHECK(steer_sockaddr_parse("10.53.0.11", 0, &cc.unicast4) == 0, "parse");
			CHECK(steer_sockaddr_parse("2001:db8:1::11", 0, &cc.unicast6) == 0,
			      "parse");
		}
		sq_result_t r = {0};
		cluster_selfquery_t *sq =
		    cluster_selfquery_new(loop, &cc, row->identity, sq_cb, &r);
		cluster_selfquery_start(sq, NULL, NULL, false, 80);
		CHECK(!r.done, "%s: no result from within the start", row->name);
		double start = now_ms();
		while (!r.done && now_ms() - start < 1000)
			ev_run(loop, EVRUN_ONCE);
		printf("selfquery: %s: %s %s\n", row->name, r.ok ? "ok" : "fails", r.detail);
		CHECK(r.done && r.ok == row->want_ok, "%s: ok %d, want %d (%s)", row->name, r.ok,
		      row->want_ok, r.detail);
		CHECK(strstr(r.detail, row->detail) != NULL, "%s: detail '%s' lacks '%s'",
		      row->name, r.detail, row->detail);
		cluster_selfquery_free(sq);
	}
	ev_loop_destroy(loop);
}

/* A second node with return paths instead of default routes: only its routes check is
 * looked at (its holder and service address are its own; nothing answers there). */
static void phase_return_paths(cluster_keeper_t *k2, const conf_cluster_t *base)
{
	conf_cluster_t cc = *base;
	steer_sockaddr_t service, paths[2];
	CHECK(steer_sockaddr_parse("192.0.2.54", 0, &service) == 0, "parse");
	CHECK(steer_sockaddr_parse("203.0.113.9", 0, &paths[0]) == 0, "parse");
	CHECK(steer_sockaddr_parse("2001:db8:2::9", 0, &paths[1]) == 0, "parse");
	cc.service = &service;
	cc.n_service = 1;
	cc.interface = "vip1";
	cc.return_path = paths;
	cc.n_return_path = 2;
	cluster_inputs_t in = {0};
	cluster_t *c = cluster_new(&cc, k2, &in);
	CHECK(cluster_start(c) == 0, "second node started");
	sleep_ms(250);
	cluster_status_t st;
	status_of(c, &st);
	printf("return paths: %s\n", st.checks[2].detail);
	CHECK(st.checks[2].ok && strcmp(st.checks[2].detail, "2 return paths routable") == 0,
	      "return paths: %s", st.checks[2].detail);
	sh("ip -6 route add prohibit 2001:db8:2::9");
	sleep_ms(250);
	status_of(c, &st);
	printf("return paths: %s\n", st.checks[2].detail);
	CHECK(!st.checks[2].ok && strstr(st.checks[2].detail, "2001:db8:2::9") &&
	          strstr(st.checks[2].detail, "from 2001:db8:1::11") && st.checks[2].failures >= 1,
	      "prohibited return path: %s (%u failures)", st.checks[2].detail,
	      st.checks[2].failures);
	sh("ip -6 route del prohibit 2001:db8:2::9");
	cluster_free(c);
}

static int setup_namespace(void)
{
	if (geteuid() != 0) {
		printf("cluster_thread: not root, skipped\n");
		return 77;
	}
	if (unshare(CLONE_NEWNET) != 0) {
		printf("cluster_thread: unshare(CLONE_NEWNET): %s, skipped\n", strerror(errno));
		return 77;
	}
	if (system("ip link set lo up") != 0 || system("ip link add " UPLINK " type ifb") != 0) {
		printf("cluster_thread: no ip(8) or ifb here, skipped\n");
		return 77;
	}
	sh("ip link set " UPLINK " up");
	sh("ip addr add 10.53.0.11/24 dev " UPLINK);
	sh("ip -6 addr add 2001:db8:1::11/64 dev " UPLINK " nodad");
	sh("ip route add default via 10.53.0.1 dev " UPLINK);
	sh("ip -6 route add default via 2001:db8:1::1 dev " UPLINK);
	return 0;
}

static void conf_fill(conf_cluster_t *cc, steer_sockaddr_t *service)
{
	memset(cc, 0, sizeof(*cc));
	for (int i = 0; i < 2; i++)
		CHECK(steer_sockaddr_parse(service_text[i], 0, &service[i]) == 0, "parse");
	CHECK(steer_sockaddr_parse("10.53.0.11", 0, &cc->unicast4) == 0, "parse");
	CHECK(steer_sockaddr_parse("2001:db8:1::11", 0, &cc->unicast6) == 0, "parse");
	cc->enabled = true;
	cc->node_id = "n1";
	cc->service = service;
	cc->n_service = 2;
	cc->interface = HOLDER;
	cc->announce = CONF_ANNOUNCE_INTERFACE;
	cc->check_interval = 100;
	cc->check_timeout = 80;
	cc->check_fall = 3;
	cc->check_rise = 5;
	cc->check_hold_down = HOLD_DOWN_MS;
	cc->check_reload = true;
	cc->check_routes = true;
	cc->liveness_timeout = 300;
	cc->drain_quiet = 500;
	cc->drain_timeout = 3000;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int skip = setup_namespace();
	if (skip)
		return skip;
	conf_cluster_t cc;
	steer_sockaddr_t service[2];
	conf_fill(&cc, service);

	cluster_keeper_t *k = NULL;
	char err[256] = "";
	int ret = cluster_keeper_spawn(&cc, &k, err, sizeof(err));
	CHECK(ret == 0, "keeper spawn: %s", err);
	if (ret != 0)
		return unit_finish("cluster_thread");
	CHECK(holder_up() == 0, "the keeper starts withdrawn");
	conf_cluster_t cc2 = cc;
	steer_sockaddr_t service2;
	CHECK(steer_sockaddr_parse("192.0.2.54", 0, &service2) == 0, "parse");
	cc2.service = &service2;
	cc2.n_service = 1;
	cc2.interface = "vip1";
	cluster_keeper_t *k2 = NULL;
	ret = cluster_keeper_spawn(&cc2, &k2, err, sizeof(err));
	CHECK(ret == 0, "second keeper spawn: %s", err);
	if (ret != 0)
		return unit_finish("cluster_thread");

	int fds[N_BIND];
	for (int i = 0; i < N_BIND; i++) {
		fds[i] = bind_udp(bind_text[i], 53);
		CHECK(fds[i] >= 0, "responder on %s", bind_text[i]);
		if (fds[i] < 0)
			return unit_finish("cluster_thread");
	}
	pthread_t responder;
	pthread_create(&responder, NULL, responder_main, fds);

	cluster_inputs_t in = {
	    .threads_ok = in_threads, .reload_ok = in_reload, .queries = in_queries};
	cluster_t *c = cluster_new(&cc, k, &in);
	static const cluster_zone_t zones[] = {{"example.test", NULL}};
	cluster_set_zones(c, zones, 1);
	size_t n_copy = 0;
	cluster_zone_status_t *copy = cluster_zones(c, &n_copy);
	CHECK(n_copy == 1 && strcmp(copy[0].apex, "example.test.") == 0 && !copy[0].expired,
	      "cluster_zones: the answer check's list, presentation form");
	cluster_zones_free(copy, n_copy);
	double start = now_ms();
	CHECK(cluster_start(c) == 0, "cluster thread started");
	double t = wait_holder(true, start, 3000);
	printf("start: -> announced (holder up) in %.0f ms (rise 5 x 100 ms, no hold-down)\n", t);
	CHECK(t >= 300 && t <= 1500, "start: announced in %.0f ms", t);
	cluster_status_t st;
	sleep_ms(150);
	status_of(c, &st);
	CHECK(st.state == CLUSTER_ANNOUNCED && st.announced && st.keeper_alive && st.healthy,
	      "start: announced %d keeper %d healthy %d (%s / %s)", st.announced, st.keeper_alive,
	      st.healthy, st.reason, st.keeper_message);
	for (size_t i = 0; i < st.n_checks; i++)
		printf("  check %-9s %s %s\n", st.checks[i].name,
		       !st.checks[i].enabled ? "off "
		       : st.checks[i].ok     ? "ok  "
		                             : "FAIL",
		       st.checks[i].detail);
	CHECK(strstr(st.checks[0].detail, "example.test. SOA from 2 addresses") != NULL,
	      "answer detail: %s", st.checks[0].detail);

	phase_selfquery();
	phase_return_paths(k2, &cc);
	phase_withdraw(c, "answer", &answering, "answer: 192.0.2.53: timeout after 80 ms");
	phase_withdraw(c, "threads", &threads_good, "threads: query thread 1 made no progress");
	phase_withdraw(c, "reload", &reload_good, "reload: zone example.test: example.test.zone:3");
	phase_routes(c);
	phase_hang(c);
	phase_drain(c);
	phase_drain_timeout(c);
	phase_zones(c);

	cluster_set_zones(c, NULL, 0);
	CHECK(cluster_zones(c, &n_copy) == NULL && n_copy == 0, "cluster_zones: none");
	sleep_ms(300);
	status_of(c, &st);
	CHECK(strstr(st.checks[0].detail, "id.server from 2 addresses") != NULL,
	      "answer without zones asks id.server: %s", st.checks[0].detail);
	CHECK(st.state == CLUSTER_ANNOUNCED, "still announced with id.server: %s", st.reason);
	printf("transitions: %llu, last: %s\n", (unsigned long long)st.transitions, st.reason);

	/* The keeper killed: the thread notices once and reports it. */
	CHECK(kill(st.keeper_pid, SIGKILL) == 0, "kill the keeper %ld", (long)st.keeper_pid);
	start = now_ms();
	do {
		sleep_ms(5);
		status_of(c, &st);
	} while (st.keeper_alive && now_ms() - start < 2000);
	printf("keeper killed: noticed in %.0f ms (%s)\n", now_ms() - start, st.keeper_message);
	CHECK(!st.keeper_alive && !st.announced, "keeper gone: alive %d announced %d",
	      st.keeper_alive, st.announced);
	sh("ip link set " HOLDER " down");

	start = now_ms();
	cluster_stop(c);
	printf("stop: -> holder down in %.0f ms\n", now_ms() - start);
	CHECK(holder_up() == 0, "stop withdraws");
	status_of(c, &st);
	CHECK(!st.keeper_alive && !st.want_announce, "stopped: keeper %d want %d", st.keeper_alive,
	      st.want_announce);
	cluster_stop(c);
	cluster_free(c);
	responder_quit = true;
	pthread_join(responder, NULL);
	for (int i = 0; i < N_BIND; i++)
		close(fds[i]);
	return unit_finish("cluster_thread");
}
