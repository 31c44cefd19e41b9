/* Unit tests of src/auth/rrl.c: bucket arithmetic on a fake clock, slip, classes, exempt. */
#include <arpa/inet.h>
#include <string.h>

#include "auth/rrl.h"
#include "base/compiler.h"
#include "unit.h"

static steer_sockaddr_t v4(const char *text)
{
	steer_sockaddr_t a;
	memset(&a, 0, sizeof(a));
	a.sin.sin_family = AF_INET;
	inet_pton(AF_INET, text, &a.sin.sin_addr);
	return a;
}

static steer_sockaddr_t v6(const char *text)
{
	steer_sockaddr_t a;
	memset(&a, 0, sizeof(a));
	a.sin6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, text, &a.sin6.sin6_addr);
	return a;
}

static auth_rrl_t make(auth_rrl_table_t *t, unsigned rate, unsigned slip, unsigned window)
{
	auth_rrl_t r = {.table = t};
	r.conf.rate = r.conf.nxdomain_rate = r.conf.error_rate = rate;
	r.conf.slip = slip;
	r.conf.window = window;
	r.conf.ipv4_prefix = 24;
	r.conf.ipv6_prefix = 56;
	r.conf.exempt_cookies = true;
	return r;
}

/* An answer of class @p cls for @p name (NULL = none) and @p qtype. */
typedef struct {
	uint8_t cls;
	const char *name;
	uint16_t qtype;
	bool cookie_ok;
} answer_kind_t;

static auth_rrl_info_t classify(const auth_rrl_t *r, const steer_sockaddr_t *a, answer_kind_t k)
{
	auth_rrl_info_t info = {.cls = k.cls, .cookie_ok = k.cookie_ok};
	auth_rrl_classify(r, a, (const uint8_t *)k.name, k.qtype, &info);
	return info;
}

/* How many of @p n answers of kind @p k to @p a at second @p now pass. */
static unsigned passes(const auth_rrl_t *r, const steer_sockaddr_t *a, const answer_kind_t *k,
                       uint32_t now, unsigned n, auth_stats_t *st)
{
	auth_rrl_info_t info = classify(r, a, *k);
	unsigned ok = 0;
	for (unsigned i = 0; i < n; i++)
		ok += auth_rrl_check(r, &info, now, st) == AUTH_RRL_PASS;
	return ok;
}

static void test_bucket(void)
{
	auth_rrl_table_t *t = auth_rrl_table_new(4099);
	auth_rrl_t r = make(t, 10, 0, 3);
	auth_stats_t st;
	memset(&st, 0, sizeof(st));
	steer_sockaddr_t a = v4("192.0.2.7");
	answer_kind_t info = {AUTH_RRL_POSITIVE, "\3www", 1, false};
	uint32_t now = 1000;
	/* A new flow: one second's burst of `rate`. */
	CHECK(passes(&r, &a, &info, now, 100, &st) == 10, "burst");
	CHECK(st.rrl_dropped == 90, "dropped %llu", (unsigned long long)st.rrl_dropped);
	/* 90 over: the debt is capped at window * rate = 30, so 3 s of credit repay it, the
	 * fourth second answers again, and at most `rate` (the credit cap) pass. */
	CHECK(passes(&r, &a, &info, now + 3, 1, &st) == 0, "still in debt after 3 s");
	CHECK(passes(&r, &a, &info, now + 7, 100, &st) == 10, "after the window: rate again");
	/* Steady at the rate: every answer passes. */
	now += 100;
	unsigned ok = 0;
	for (uint32_t s = 0; s < 20; s++)
		ok += passes(&r, &a, &info, now + s, 10, &st);
	CHECK(ok == 200, "steady rate: %u of 200", ok);
	/* Twice the rate for 20 s: the bucket ends in debt and then passes nothing. */
	now += 100;
	ok = 0;
	for (uint32_t s = 0; s < 20; s++)
		ok += passes(&r, &a, &info, now + s, 20, &st);
	CHECK(ok >= 10 && ok <= 40, "double rate: %u", ok);
	/* Same /24 shares; another /24 does not. */
	steer_sockaddr_t same = v4("192.0.2.200"), other = v4("192.0.3.7");
	CHECK(passes(&r, &same, &info, now + 19, 1, &st) == 0, "same /24 is limited too");
	CHECK(passes(&r, &other, &info, now + 19, 10, &st) == 10, "another /24 is not");
	/* IPv6 by /56. */
	steer_sockaddr_t x = v6("2001:db8:0:100::1"), y = v6("2001:db8:0:1ff::2"),
	                 z = v6("2001:db8:0:200::1");
	CHECK(passes(&r, &x, &info, 5000, 10, &st) == 10, "v6 burst");
	CHECK(passes(&r, &y, &info, 5000, 1, &st) == 0, "same /56");
	CHECK(passes(&r, &z, &info, 5000, 1, &st) == 1, "another /56");
	auth_rrl_table_free(t);
}

static void test_slip_and_classes(void)
{
	auth_rrl_table_t *t = auth_rrl_table_new(4099);
	auth_rrl_t r = make(t, 5, 3, 1);
	auth_stats_t st;
	memset(&st, 0, sizeof(st));
	steer_sockaddr_t a = v4("198.51.100.1");
	answer_kind_t info = {AUTH_RRL_POSITIVE, "\1a", 1, false};
	auth_rrl_info_t classified = classify(&r, &a, info);
	unsigned verdict[3] = {0};
	for (int i = 0; i < 35; i++)
		verdict[auth_rrl_check(&r, &classified, 77, &st)]++;
	CHECK(verdict[AUTH_RRL_PASS] == 5, "pass %u", verdict[AUTH_RRL_PASS]);
	CHECK(verdict[AUTH_RRL_SLIP] == 10, "every third of 30 slips: %u", verdict[AUTH_RRL_SLIP]);
	CHECK(verdict[AUTH_RRL_DROP] == 20, "drop %u", verdict[AUTH_RRL_DROP]);
	CHECK(st.rrl_slipped == 10 && st.rrl_dropped == 20, "counters");

	/* Other names, types and classes have buckets of their own. */
	answer_kind_t aaaa = {AUTH_RRL_POSITIVE, "\1a", 28, false};
	answer_kind_t nx = {AUTH_RRL_NXDOMAIN, "\4test", 0, false};
	answer_kind_t err = {AUTH_RRL_ERROR, NULL, 0, false};
	CHECK(passes(&r, &a, &aaaa, 77, 5, &st) == 5, "another type");
	CHECK(passes(&r, &a, &nx, 77, 5, &st) == 5, "nxdomain");
	CHECK(passes(&r, &a, &err, 77, 5, &st) == 5, "error");
	/* NXDOMAIN per zone: a different rate. */
	r.conf.nxdomain_rate = 2;
	nx.name = "\5other";
	CHECK(passes(&r, &a, &nx, 77, 5, &st) == 2, "nxdomain-rate");
	answer_kind_t none = {AUTH_RRL_NONE, NULL, 0, false};
	CHECK(passes(&r, &a, &none, 77, 50, &st) == 50, "unclassified answers pass");

	/* Exempt: by prefix, by a valid cookie (unless exempt-cookies is off). */
	steer_prefix_t ex;
	CHECK(steer_prefix_parse("198.51.100.0/24", &ex) == 0, "prefix");
	r.conf.exempt = &ex;
	r.conf.n_exempt = 1;
	CHECK(passes(&r, &a, &info, 77, 20, &st) == 20, "exempt prefix");
	r.conf.n_exempt = 0;
	answer_kind_t cookie = info;
	cookie.cookie_ok = true;
	CHECK(passes(&r, &a, &cookie, 77, 20, &st) == 20, "valid cookie exempts");
	r.conf.exempt_cookies = false;
	CHECK(passes(&r, &a, &cookie, 77, 20, &st) == 0, "unless exempt-cookies is off");
	/* log-only: counted, not limited. */
	r.conf.log_only = true;
	uint64_t before = st.rrl_logged;
	CHECK(passes(&r, &a, &info, 77, 20, &st) == 20, "log-only passes");
	CHECK(st.rrl_logged == before + 20, "log-only counts");
	/* Off: no table. */
	auth_rrl_t off = make(NULL, 5, 2, 1);
	classified.exempt = false;
	unsigned ok = 0;
	for (int i = 0; i < 50; i++)
		ok += auth_rrl_check(&off, &classified, 77, &st) == AUTH_RRL_PASS;
	CHECK(ok == 50, "no table, no limit");
	auth_rrl_table_free(t);
}

static void test_slip_rewrite(void)
{
	auth_rrl_table_t *t = auth_rrl_table_new(1024);
	auth_rrl_t r = make(t, 1, 1, 1);
	auth_stats_t st;
	memset(&st, 0, sizeof(st));
	steer_sockaddr_t a = v4("203.0.113.9");
	/* A response: header (1 answer, 1 additional), question "a." A IN, then records. */
	uint8_t resp[64] = {0x12, 0x34, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 1, 1, 'a', 0, 0, 1, 0, 1};
	size_t len = 50;
	auth_rrl_info_t info = {.cls = AUTH_RRL_POSITIVE, .question_end = 19};
	auth_rrl_classify(&r, &a, (const uint8_t *)"\1a", 1, &info);
	/* Real clock here: the first answer passes on a fresh bucket, the second slips. */
	CHECK(auth_rrl_apply(&r, &info, resp, len, &st) == len, "first passes");
	size_t n = auth_rrl_apply(&r, &info, resp, len, &st);
	CHECK(n == 19, "slipped length %zu", n);
	CHECK((resp[2] & 0x02) && resp[3] == 0 && resp[5] == 1 && resp[7] == 0 && resp[11] == 0,
	      "TC set, no records");
	CHECK(resp[0] == 0x12 && resp[1] == 0x34 && (resp[2] & 0x80), "id and QR kept");
	auth_rrl_table_free(t);
}

int main(void)
{
	test_bucket();
	test_slip_and_classes();
	test_slip_rewrite();
	return unit_finish("test_auth_rrl");
}
