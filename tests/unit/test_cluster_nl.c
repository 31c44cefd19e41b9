/*
 * The rtnetlink helpers against the real kernel, in a network namespace of their own
 * (unshare(CLONE_NEWNET)), so nothing on the host is touched and everything made here goes
 * with the namespace when the test exits. `ip` reads the results back independently. Needs
 * root; skipped (77) without it.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "cluster/nl.h"
#include "unit.h"

static steer_sockaddr_t addr(const char *text)
{
	steer_sockaddr_t a;
	if (steer_sockaddr_parse(text, 0, &a) < 0) {
		printf("bad address %s\n", text);
		exit(2);
	}
	return a;
}

/* Output of a shell command (the test's own view of the kernel), "" on failure. */
static const char *sh_out(const char *cmd)
{
	static char buf[8192];
	buf[0] = '\0';
	FILE *p = popen(cmd, "r");
	if (!p)
		return buf;
	size_t n = fread(buf, 1, sizeof(buf) - 1, p);
	buf[n] = '\0';
	pclose(p);
	return buf;
}

static const char *local_routes(void)
{
	return sh_out("ip -6 route show table local");
}

static int sh(const char *cmd)
{
	return system(cmd);
}

static void test_link(void)
{
	char err[256];
	bool created = false;
	CHECK(nl_link_ensure("skp0", &created, err, sizeof(err)) == 0, "ensure: %s", err);
	CHECK(created, "skp0 was created");
	const char *d = sh_out("ip -d link show skp0");
	CHECK(strstr(d, "dummy") || strstr(d, "ifb"), "skp0 is a dummy or ifb link: %s", d);
	CHECK(!strcmp(sh_out("cat /proc/sys/net/ipv6/conf/skp0/keep_addr_on_down"), "1\n"),
	      "keep_addr_on_down set");
	CHECK(nl_link_ensure("skp0", &created, err, sizeof(err)) == 0, "again: %s", err);
	CHECK(!created, "an existing link is not created again");

	/* an existing link of another type is taken as it is */
	CHECK(sh("ip link add skpv0 type veth peer name skpv1") == 0, "veth made");
	CHECK(nl_link_ensure("skpv0", &created, err, sizeof(err)) == 0 && !created, "veth: %s",
	      err);
	CHECK(strstr(sh_out("ip -d link show skpv0"), "veth") != NULL, "veth stays a veth");

	CHECK(nl_link_is_up("skp0", err, sizeof(err)) == 0, "new link is down");
	CHECK(nl_link_set_up("skp0", true, err, sizeof(err)) == 0, "up: %s", err);
	CHECK(nl_link_is_up("skp0", err, sizeof(err)) == 1, "is up");
	CHECK(strstr(sh_out("ip link show skp0"), ",UP") != NULL, "ip sees it up");
	CHECK(nl_link_set_up("skp0", true, err, sizeof(err)) == 0, "up again: %s", err);
	CHECK(nl_link_set_up("skp0", false, err, sizeof(err)) == 0, "down: %s", err);
	CHECK(nl_link_is_up("skp0", err, sizeof(err)) == 0, "is down");
}

static void test_addresses(void)
{
	char err[256];
	steer_sockaddr_t a4 = addr("192.0.2.53"), a6 = addr("2001:db8::53");
	CHECK(nl_addr_ensure("skp0", &a4, err, sizeof(err)) == 0, "v4: %s", err);
	CHECK(nl_addr_ensure("skp0", &a6, err, sizeof(err)) == 0, "v6: %s", err);
	CHECK(nl_addr_ensure("skp0", &a4, err, sizeof(err)) == 0, "v4 again: %s", err);
	CHECK(nl_addr_ensure("skp0", &a6, err, sizeof(err)) == 0, "v6 again: %s", err);
	CHECK(nl_link_set_up("skp0", true, err, sizeof(err)) == 0, "up: %s", err);
	CHECK(nl_link_set_up("skp0", false, err, sizeof(err)) == 0, "down: %s", err);
	const char *out = sh_out("ip addr show dev skp0");
	CHECK(strstr(out, "192.0.2.53/32") != NULL, "v4 kept while down: %s", out);
	CHECK(strstr(out, "2001:db8::53/128") != NULL, "v6 kept while down: %s", out);
	CHECK(strstr(out, "tentative") == NULL, "v6 not waiting for DAD: %s", out);
	/* admin down keeps the local route: in-flight queries are still answered */
	out = sh_out("ip route show table local");
	CHECK(strstr(out, "local 192.0.2.53 dev skp0") != NULL, "local route kept: %s", out);
	CHECK(nl_link_set_up("skp0", true, err, sizeof(err)) == 0, "up: %s", err);
	out = sh_out("ip addr show dev skp0");
	CHECK(strstr(out, "2001:db8::53/128") != NULL, "v6 back up: %s", out);
}

static void test_routes(void)
{
	char err[256];
	steer_sockaddr_t a4 = addr("192.0.2.53"), a6 = addr("2001:db8::53");
	for (int i = 0; i < 2; i++) {
		CHECK(nl_route_set(&a4, "skp0", 100, true, err, sizeof(err)) == 0, "add v4: %s",
		      err);
		CHECK(nl_route_set(&a6, "skp0", 100, true, err, sizeof(err)) == 0, "add v6: %s",
		      err);
	}
	const char *out = sh_out("ip route show table 100 proto 53");
	CHECK(strstr(out, "192.0.2.53 dev skp0") != NULL, "v4 route in table 100: %s", out);
	out = sh_out("ip -6 route show table 100 proto 53");
	CHECK(strstr(out, "2001:db8::53 dev skp0") != NULL, "v6 route in table 100: %s", out);
	CHECK(nl_route_set(&a4, "skp0", 254, true, err, sizeof(err)) == 0, "main: %s", err);
	CHECK(strstr(sh_out("ip route show proto 53"), "192.0.2.53 dev skp0") != NULL,
	      "v4 route in main");
	for (int i = 0; i < 2; i++) {
		CHECK(nl_route_set(&a4, "skp0", 100, false, err, sizeof(err)) == 0, "del v4: %s",
		      err);
		CHECK(nl_route_set(&a6, "skp0", 100, false, err, sizeof(err)) == 0, "del v6: %s",
		      err);
	}
	CHECK(sh_out("ip route show table 100")[0] == '\0', "table 100 empty");
	CHECK(sh_out("ip -6 route show table 100")[0] == '\0', "v6 table 100 empty");
	CHECK(nl_route_set(&a4, "skp0", 254, false, err, sizeof(err)) == 0, "del main: %s", err);
	CHECK(strstr(sh_out("ip route show"), "192.0.2.53") == NULL, "main route gone");
	/* another daemon's route to the same place is not ours to delete */
	CHECK(sh("ip route add 192.0.2.54/32 dev skp0 proto static") == 0, "static route");
	steer_sockaddr_t b4 = addr("192.0.2.54");
	CHECK(nl_route_set(&b4, "skp0", 254, false, err, sizeof(err)) == 0, "del foreign: %s", err);
	CHECK(strstr(sh_out("ip route show"), "192.0.2.54 dev skp0 proto static") != NULL,
	      "foreign route kept");
	CHECK(nl_route_set(&a4, "skp0", 255, true, err, sizeof(err)) == STEER_EINVAL,
	      "local table refused");

	/*
	 * Local routes of ours, beside the kernel's own for the holder's address when it has one:
	 * IPv6 adds it from a work queue after the link came up, and after a quick down/up it
	 * sometimes does not come back at all (which is what our route is for).
	 */
	for (int i = 0; i < 100 && !strstr(local_routes(), "2001:db8::53 dev skp0 proto kernel");
	     i++)
		usleep(10000);
	bool kernels = strstr(local_routes(), "2001:db8::53 dev skp0 proto kernel") != NULL;
	for (int i = 0; i < 2; i++)
		CHECK(nl_local_route_set(&a6, true, err, sizeof(err)) == 0, "local v6: %s", err);
	const char *loc = local_routes();
	CHECK(strstr(loc, "local 2001:db8::53 dev lo proto 53") != NULL, "ours: %s", loc);
	for (int i = 0; i < 2; i++)
		CHECK(nl_local_route_set(&a6, false, err, sizeof(err)) == 0, "del local v6: %s",
		      err);
	loc = local_routes();
	CHECK(strstr(loc, "dev lo proto 53") == NULL, "ours gone: %s", loc);
	CHECK(!kernels || strstr(loc, "local 2001:db8::53 dev skp0 proto kernel") != NULL,
	      "the kernel's own kept: %s", loc);
}

static void expect_check(int family, const char *dst, const char *src, int want,
                         const char *why_has, int line)
{
	char why[256] = "";
	steer_sockaddr_t d, s;
	if (dst)
		d = addr(dst);
	if (src)
		s = addr(src);
	int ret = nl_route_check(family, dst ? &d : NULL, src ? &s : NULL, why, sizeof(why));
	CHECK(ret == want, "line %d: check %s from %s: %d, want %d (%s)", line,
	      dst ? dst : "default", src ? src : "-", ret, want, why);
	if (why_has)
		CHECK(strstr(why, why_has) != NULL, "line %d: why \"%s\" has \"%s\"", line, why,
		      why_has);
}

/* Carrier changes reach the routes through the kernel's link watch, up to a second later. */
static void settle_check(int family, const char *dst, int want)
{
	char why[256];
	steer_sockaddr_t d;
	if (dst)
		d = addr(dst);
	for (int i = 0; i < 200; i++) {
		if (nl_route_check(family, dst ? &d : NULL, NULL, why, sizeof(why)) == want)
			return;
		usleep(10000);
	}
}

static void test_route_check(void)
{
	expect_check(AF_INET, NULL, NULL, 0, "no IPv4 default route", __LINE__);
	expect_check(AF_INET6, NULL, NULL, 0, "no IPv6 default route", __LINE__);
	expect_check(AF_INET, "198.51.100.1", NULL, 0, "no route to 198.51.100.1", __LINE__);

	CHECK(sh("ip addr add 10.9.0.1/24 dev skpv0 && ip link set skpv0 up && ip link set "
	         "skpv1 up && ip route add default via 10.9.0.2 && ip -6 addr add fd00::1/64 dev "
	         "skpv0 nodad && ip -6 route add default via fd00::2 dev skpv0") == 0,
	      "veth with default routes");
	settle_check(AF_INET, NULL, 1);
	settle_check(AF_INET6, NULL, 1);
	expect_check(AF_INET, NULL, NULL, 1, NULL, __LINE__);
	expect_check(AF_INET6, NULL, NULL, 1, NULL, __LINE__);
	expect_check(AF_INET, "198.51.100.1", NULL, 1, NULL, __LINE__);
	expect_check(AF_INET, "198.51.100.1", "10.9.0.1", 1, NULL, __LINE__);
	expect_check(AF_INET6, "2001:db8:1::1", "fd00::1", 1, NULL, __LINE__);
	expect_check(AF_INET, "198.51.100.1", "10.77.0.1", 0, "from 10.77.0.1", __LINE__);

	/* the link's far end goes: the route stays in the table but leads nowhere */
	CHECK(sh("ip link set skpv1 down") == 0, "peer down");
	settle_check(AF_INET, NULL, 0);
	settle_check(AF_INET6, NULL, 0);
	expect_check(AF_INET, NULL, NULL, 0, "skpv0", __LINE__);
	expect_check(AF_INET6, NULL, NULL, 0, "skpv0", __LINE__);
	expect_check(AF_INET, "198.51.100.1", NULL, 0, "skpv0", __LINE__);
	CHECK(sh("ip link set skpv1 up") == 0, "peer up");
	settle_check(AF_INET, NULL, 1);
	expect_check(AF_INET, NULL, NULL, 1, NULL, __LINE__);

	CHECK(sh("ip route replace unreachable default") == 0, "unreachable default");
	expect_check(AF_INET, NULL, NULL, 0, "unreachable", __LINE__);
	expect_check(AF_INET, "198.51.100.1", NULL, 0, "198.51.100.1", __LINE__);
	CHECK(sh("ip route replace blackhole default") == 0, "blackhole default");
	expect_check(AF_INET, NULL, NULL, 0, "blackhole", __LINE__);
	expect_check(AF_INET, "198.51.100.1", NULL, 0, "198.51.100.1", __LINE__);
	CHECK(sh("ip route replace prohibit default") == 0, "prohibit default");
	expect_check(AF_INET, NULL, NULL, 0, "prohibit", __LINE__);
	expect_check(AF_INET, "198.51.100.1", NULL, 0, "prohibit", __LINE__);
	CHECK(sh("ip -6 route replace blackhole default") == 0, "v6 blackhole default");
	expect_check(AF_INET6, NULL, NULL, 0, "blackhole", __LINE__);
	expect_check(AF_INET6, "2001:db8:1::1", NULL, 0, "2001:db8:1::1", __LINE__);
	/* the lowest metric decides, as it does for the kernel */
	CHECK(sh("ip route del default && ip route add default via 10.9.0.2 metric 100 && ip route "
	         "add unreachable default metric 200") == 0,
	      "two defaults");
	expect_check(AF_INET, NULL, NULL, 1, NULL, __LINE__);
	expect_check(AF_INET, "203.0.113.9", NULL, 1, NULL, __LINE__);
	CHECK(sh("ip route add blackhole default metric 50") == 0, "a third default");
	expect_check(AF_INET, NULL, NULL, 0, "blackhole", __LINE__);
	expect_check(AF_INET, "203.0.113.9", NULL, 0, "203.0.113.9", __LINE__);
	CHECK(sh("ip route del blackhole default metric 50") == 0, "third default gone");
	expect_check(AF_INET, NULL, NULL, 1, NULL, __LINE__);
}

static void test_errors(void)
{
	char err[256];
	bool created;
	steer_sockaddr_t a4 = addr("192.0.2.53");
	static const char *bad[] = {"", "a/b", "x y", "0123456789abcdefXYZ", ".."};
	for (size_t i = 0; i < STEER_ARRAY_LEN(bad); i++) {
		err[0] = '\0';
		CHECK(nl_link_ensure(bad[i], &created, err, sizeof(err)) == STEER_EINVAL,
		      "ensure \"%s\" refused", bad[i]);
		CHECK(strstr(err, "bad interface name") != NULL, "ensure \"%s\": %s", bad[i], err);
		CHECK(nl_link_set_up(bad[i], true, err, sizeof(err)) == STEER_EINVAL, "up \"%s\"",
		      bad[i]);
	}
	err[0] = '\0';
	CHECK(nl_link_set_up("skpnone", true, err, sizeof(err)) == -ENODEV, "no such device");
	CHECK(strstr(err, "skpnone") && strstr(err, "No such device"), "err: %s", err);
	CHECK(nl_link_is_up("skpnone", err, sizeof(err)) == -ENODEV, "is_up no device");
	CHECK(nl_addr_ensure("skpnone", &a4, err, sizeof(err)) == -ENODEV, "addr no device");
	CHECK(nl_route_set(&a4, "skpnone", 254, true, err, sizeof(err)) == -ENODEV,
	      "route no device");
	steer_sockaddr_t none = {0};
	CHECK(nl_addr_ensure("skp0", &none, err, sizeof(err)) == STEER_EINVAL, "no family");
	/* the kernel's own refusal comes back with its words */
	CHECK(nl_link_set_up("skp0", false, err, sizeof(err)) == 0, "down");
	steer_sockaddr_t a6 = addr("2001:db8::99");
	int ret = nl_route_set(&a6, "skp0", 254, true, err, sizeof(err));
	CHECK(ret < 0 && strstr(err, "add route 2001:db8::99 dev skp0"), "route on down dev: %d %s",
	      ret, err);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("test_cluster_nl: needs root, skipped\n");
		return 77;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		printf("test_cluster_nl: unshare(CLONE_NEWNET): %s, skipped\n", strerror(errno));
		return 77;
	}
	if (sh("ip link set lo up") != 0) {
		printf("test_cluster_nl: no ip command, skipped\n");
		return 77;
	}
	test_link();
	test_addresses();
	test_routes();
	test_route_check();
	test_errors();
	return unit_finish("test_cluster_nl");
}
