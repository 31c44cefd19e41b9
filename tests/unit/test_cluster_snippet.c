/*
 * The routing daemon configurations of `steerctl cluster bird-config` / `frr-config`: their
 * content for each announce method and protocol, option errors, and (when the daemons are
 * installed) that bird and FRR's vtysh accept them.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "cluster/snippet.h"
#include "unit.h"

static steer_sockaddr_t v4(const char *text)
{
	steer_sockaddr_t a = {0};
	a.sin.sin_family = AF_INET;
	inet_pton(AF_INET, text, &a.sin.sin_addr);
	return a;
}

static steer_sockaddr_t v6(const char *text)
{
	steer_sockaddr_t a = {0};
	a.sin6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, text, &a.sin6.sin6_addr);
	return a;
}

static steer_sockaddr_t service[2];

static conf_cluster_t cluster(conf_announce_t announce)
{
	service[0] = v4("192.0.2.53");
	service[1] = v6("2001:db8::53");
	conf_cluster_t cc = {.enabled = true,
	                     .node_id = "n1",
	                     .service = service,
	                     .n_service = 2,
	                     .interface = "vip0",
	                     .unicast4 = v4("10.53.0.11"),
	                     .announce = announce,
	                     .bird_protocol = "anycast"};
	return cc;
}

static char *gen(const conf_cluster_t *cc, const char *daemon, const char *args)
{
	const char *argv[8];
	size_t n = 0;
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", args);
	for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && n < 8;
	     t = strtok_r(NULL, " ", &save))
		argv[n++] = t;
	char *out = NULL, err[256] = "";
	int ret = cluster_snippet(cc, daemon, argv, n, &out, err, sizeof(err));
	CHECK(ret == 0, "%s %s: %s", daemon, args, err);
	return ret == 0 ? out : NULL;
}

static void test_content(void)
{
	static const struct {
		conf_announce_t announce;
		const char *daemon, *args;
		const char *want[4]; /* pieces the text must hold */
	} rows[] = {
	    {CONF_ANNOUNCE_INTERFACE,
	     "bird",
	     "peer=10.53.0.1",
	     {"protocol direct vip {", "neighbor 10.53.0.1 as 65000;", "bfd on;",
	      "graceful restart off;"}},
	    {CONF_ANNOUNCE_BIRD,
	     "bird",
	     "bgp peer=10.53.0.1 local-as=64512 peer-as=64513",
	     {"protocol direct anycast {", "local 10.53.0.11 as 64512;",
	      "export where proto = \"anycast\";", "neighbor 10.53.0.1 as 64513;"}},
	    {CONF_ANNOUNCE_INTERFACE,
	     "bird",
	     "ospf uplink=eth1 area=1",
	     {"protocol ospf v2 ospf4", "area 0.0.0.1 {", "interface \"eth1\"",
	      "protocol ospf v3"}},
	    {CONF_ANNOUNCE_FRR,
	     "frr",
	     "peer=10.53.0.1 bfd-interval=50 bfd-multiplier=4",
	     {"redistribute kernel route-map STEER-SERVICE", "neighbor 10.53.0.1 bfd profile steer",
	      "receive-interval 50", " set origin igp\n"}},
	    {CONF_ANNOUNCE_INTERFACE,
	     "frr",
	     "peer=10.53.0.1 peer=2001:db8:1::1",
	     {"redistribute connected route-map STEER-SERVICE",
	      "ip prefix-list STEER-SERVICE seq 5 permit 192.0.2.53/32",
	      "ipv6 prefix-list STEER-SERVICE6 seq 5 permit 2001:db8::53/128",
	      "neighbor 2001:db8:1::1 route-map STEER-SERVICE6 out"}},
	    {CONF_ANNOUNCE_FRR,
	     "frr",
	     "ospf uplink=eth0",
	     {"interface eth0", "ip ospf bfd profile steer", "ip ospf dead-interval 3",
	      "redistribute kernel route-map STEER-SERVICE"}},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		conf_cluster_t cc = cluster(rows[i].announce);
		char *text = gen(&cc, rows[i].daemon, rows[i].args);
		for (size_t k = 0; text != NULL && k < 4 && rows[i].want[k]; k++)
			CHECK(strstr(text, rows[i].want[k]) != NULL, "row %zu lacks '%s':\n%s", i,
			      rows[i].want[k], text);
		free(text);
	}
}

static void test_errors(void)
{
	static const struct {
		const char *daemon, *args, *want;
	} rows[] = {
	    {"bird", "", "BGP needs the router's address"},
	    {"bird", "peer=10.53.0.1:179", "bad value in 'peer=10.53.0.1:179'"},
	    {"bird", "peer=10.53.0.1 local-as=0", "bad value in 'local-as=0'"},
	    {"bird", "peer=10.53.0.1 local-as=4294967296", "bad value"},
	    {"frr", "peer=10.53.0.1 bfd-interval=5", "bad value in 'bfd-interval=5'"},
	    {"frr", "peer=10.53.0.1 colour=blue", "unknown option 'colour'"},
	    {"frr", "rip", "want bgp, ospf or OPTION=VALUE"},
	    {"bird", "ospf uplink=a/b", "bad value in 'uplink=a/b'"},
	    {"bird", "ospf area=x.y", "bad value in 'area=x.y'"},
	    {"quagga", "", "unknown routing daemon 'quagga'"},
	};
	conf_cluster_t cc = cluster(CONF_ANNOUNCE_INTERFACE);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *argv[4];
		size_t n = 0;
		char buf[128];
		snprintf(buf, sizeof(buf), "%s", rows[i].args);
		for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && n < 4;
		     t = strtok_r(NULL, " ", &save))
			argv[n++] = t;
		char *out = NULL, err[256] = "";
		int ret = cluster_snippet(&cc, rows[i].daemon, argv, n, &out, err, sizeof(err));
		CHECK(ret == STEER_EINVAL && strstr(err, rows[i].want) != NULL,
		      "row %zu: ret %d err '%s', want '%s'", i, ret, err, rows[i].want);
		free(out);
	}
	/* OSPF without uplink=: the interface holding the unicast address, here none. */
	cc.unicast4 = v4("192.0.2.254");
	char *out = NULL, err[256] = "";
	const char *argv[] = {"ospf"};
	CHECK(cluster_snippet(&cc, "bird", argv, 1, &out, err, sizeof(err)) == STEER_EINVAL &&
	          strstr(err, "uplink=IFNAME") != NULL,
	      "ospf without an uplink: '%s'", err);
	free(out);
}

static bool have(const char *path)
{
	return access(path, X_OK) == 0;
}

/* The daemons' own parsers must accept what we print. */
static void check_with(const char *text, const char *cmd_fmt, const char *what)
{
	char path[] = "/tmp/steer-snippet-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp");
	if (fd < 0)
		return;
	size_t len = strlen(text);
	CHECK(write(fd, text, len) == (ssize_t)len, "write");
	close(fd);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), cmd_fmt, path);
	int status = system(cmd);
	CHECK(status == 0, "%s rejects the snippet (%s):\n%s", what, cmd, text);
	unlink(path);
}

static void test_daemons_accept(void)
{
	static const struct {
		conf_announce_t announce;
		const char *daemon, *args;
	} rows[] = {
	    {CONF_ANNOUNCE_INTERFACE, "bird", "peer=10.53.0.1"},
	    {CONF_ANNOUNCE_BIRD, "bird", "peer=10.53.0.1 peer=10.53.0.2"},
	    {CONF_ANNOUNCE_BIRD, "bird", "ospf uplink=eth0"},
	    {CONF_ANNOUNCE_FRR, "frr", "peer=10.53.0.1"},
	    {CONF_ANNOUNCE_INTERFACE, "frr", "peer=10.53.0.1 peer=2001:db8:1::1"},
	    {CONF_ANNOUNCE_FRR, "frr", "ospf uplink=eth0"},
	};
	bool bird = have("/usr/sbin/bird"), vtysh = have("/usr/bin/vtysh");
	if (!bird || !vtysh)
		printf("skipped: the %s parser check (not installed)\n", !bird ? "bird" : "FRR");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		bool is_bird = strcmp(rows[i].daemon, "bird") == 0;
		if ((is_bird && !bird) || (!is_bird && !vtysh))
			continue;
		conf_cluster_t cc = cluster(rows[i].announce);
		char *text = gen(&cc, rows[i].daemon, rows[i].args);
		if (text == NULL)
			continue;
		if (is_bird)
			check_with(text, "bird -p -c %s >/dev/null 2>&1", "bird -p");
		else
			check_with(text, "vtysh --dryrun -f %s >/dev/null 2>&1", "vtysh --dryrun");
		free(text);
	}
}

int main(void)
{
	test_content();
	test_errors();
	test_daemons_accept();
	return unit_finish("cluster_snippet");
}
