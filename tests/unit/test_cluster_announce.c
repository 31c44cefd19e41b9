/*
 * The interface, frr and keepalived announcement methods against the real kernel and file
 * system, in the test's own network namespace (bird is in test_cluster_bird). The state is
 * read back independently with `ip` and stat(). Needs root; skipped (77) without it.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/stat.h>

#include "base/err.h"
#include "cluster/announce.h"
#include "cluster/nl.h"
#include "cluster_test.h"
#include "unit.h"

/* Whether a datagram to @p text (port 5354, bound there) is delivered locally. */
static bool delivered(const char *text)
{
	steer_sockaddr_t a = ct_addr(text);
	a.sin.sin_port = htons(5354); /* same offset in sin6 */
	int s = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int c = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok = false;
	if (s >= 0 && c >= 0 && bind(s, &a.sa, steer_sockaddr_len(&a)) == 0 &&
	    sendto(c, "q", 1, 0, &a.sa, steer_sockaddr_len(&a)) == 1) {
		struct pollfd pfd = {.fd = s, .events = POLLIN};
		char b;
		ok = poll(&pfd, 1, 300) == 1 && recv(s, &b, 1, 0) == 1;
	}
	if (s >= 0)
		close(s);
	if (c >= 0)
		close(c);
	return ok;
}

static void test_interface(void)
{
	char err[256];
	ct_cluster_t c;
	ct_cluster_init(&c, CONF_ANNOUNCE_INTERFACE, "skpi0");
	announcer_t *a = NULL;
	int ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == 0, "interface announcer: %s", err);
	if (ret < 0)
		return;
	CHECK(nl_link_is_up("skpi0", err, sizeof(err)) == 0, "starts withdrawn (down)");
	const char *out = ct_sh_out("ip addr show dev skpi0");
	CHECK(strstr(out, "192.0.2.53/32") && strstr(out, "2001:db8::53/128"), "addresses: %s",
	      out);
	for (int i = 0; i < 2; i++) {
		CHECK(announcer_apply(a, true, err, sizeof(err)) == 0, "announce: %s", err);
		CHECK(nl_link_is_up("skpi0", err, sizeof(err)) == 1, "announced = up");
	}
	for (int i = 0; i < 2; i++) {
		CHECK(announcer_apply(a, false, err, sizeof(err)) == 0, "withdraw: %s", err);
		CHECK(nl_link_is_up("skpi0", err, sizeof(err)) == 0, "withdrawn = down");
	}
	out = ct_sh_out("ip addr show dev skpi0");
	CHECK(strstr(out, "192.0.2.53/32") && strstr(out, "2001:db8::53/128"),
	      "addresses kept while withdrawn: %s", out);
	/* withdrawn, the node still takes queries to its addresses (the in-flight ones) */
	CHECK(delivered("192.0.2.53"), "v4 delivered while withdrawn");
	CHECK(delivered("2001:db8::53"), "v6 delivered while withdrawn");
	CHECK(ct_sh("ip -6 route del local 2001:db8::53 table local proto 53") == 0,
	      "our v6 local route removed by hand");
	CHECK(!delivered("2001:db8::53"), "without it, IPv6 drops the down holder's address");

	/* verify: nothing changed, then a hand-made change is undone */
	bool drifted = true;
	CHECK(announcer_verify(a, false, &drifted, err, sizeof(err)) == 0 && !drifted,
	      "verify, no drift: %s", err);
	CHECK(ct_sh("ip link set skpi0 up && ip addr del 192.0.2.53/32 dev skpi0") == 0, "by hand");
	CHECK(announcer_verify(a, false, &drifted, err, sizeof(err)) == 0 && drifted,
	      "verify sees the drift: %s", err);
	CHECK(nl_link_is_up("skpi0", err, sizeof(err)) == 0, "down again");
	CHECK(strstr(ct_sh_out("ip addr show dev skpi0"), "192.0.2.53/32") != NULL,
	      "address restored");
	CHECK(delivered("2001:db8::53") && delivered("192.0.2.53"), "delivered again");
	announcer_free(a);

	/* an existing holder that was up is put down: the node starts withdrawn */
	CHECK(ct_sh("ip link set skpi0 up") == 0, "up by hand");
	ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == 0 && nl_link_is_up("skpi0", err, sizeof(err)) == 0, "new withdraws: %s", err);
	announcer_free(a);

	ct_cluster_init(&c, CONF_ANNOUNCE_INTERFACE, "skp/bad");
	ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == STEER_EINVAL && strstr(err, "bad interface name"), "bad holder: %d %s", ret,
	      err);
	CHECK(a == NULL, "no announcer on failure");
	ct_cluster_init(&c, CONF_ANNOUNCE_INTERFACE, NULL);
	CHECK(announcer_new(&c.cc, &a, err, sizeof(err)) == STEER_EINVAL, "interface needs one");
}

static void test_frr(void)
{
	char err[256];
	ct_cluster_t c;
	ct_cluster_init(&c, CONF_ANNOUNCE_FRR, "skpf0");
	c.cc.frr_table = 53;
	announcer_t *a = NULL;
	int ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == 0, "frr announcer: %s", err);
	if (ret < 0)
		return;
	/* down: zebra would prefer the holder's connected routes to the kernel routes */
	CHECK(nl_link_is_up("skpf0", err, sizeof(err)) == 0, "frr holder down");
	CHECK(delivered("192.0.2.53") && delivered("2001:db8::53"), "addresses still delivered");
	CHECK(ct_sh_out("ip route show table 53 2>/dev/null")[0] == '\0',
	      "starts withdrawn: no v4 route");
	CHECK(ct_sh_out("ip -6 route show table 53 2>/dev/null")[0] == '\0',
	      "starts withdrawn: no v6 route");
	for (int i = 0; i < 2; i++) {
		CHECK(announcer_apply(a, true, err, sizeof(err)) == 0, "announce: %s", err);
		const char *out = ct_sh_out("ip route show table 53 proto 53");
		CHECK(strstr(out, "192.0.2.53 dev lo") != NULL, "v4 route: %s", out);
		out = ct_sh_out("ip -6 route show table 53 proto 53");
		CHECK(strstr(out, "2001:db8::53 dev lo") != NULL, "v6 route: %s", out);
	}
	for (int i = 0; i < 2; i++) {
		CHECK(announcer_apply(a, false, err, sizeof(err)) == 0, "withdraw: %s", err);
		CHECK(ct_sh_out("ip route show table 53 2>/dev/null")[0] == '\0', "v4 route gone");
		CHECK(ct_sh_out("ip -6 route show table 53 2>/dev/null")[0] == '\0',
		      "v6 route gone");
	}
	CHECK(nl_link_is_up("skpf0", err, sizeof(err)) == 0, "frr holder stays down");
	CHECK(announcer_apply(a, true, err, sizeof(err)) == 0, "announce: %s", err);
	CHECK(ct_sh("ip route del 192.0.2.53/32 table 53") == 0, "route removed by hand");
	bool drifted;
	CHECK(announcer_verify(a, true, &drifted, err, sizeof(err)) == 0, "verify: %s", err);
	CHECK(strstr(ct_sh_out("ip route show table 53 proto 53"), "192.0.2.53 dev lo") != NULL,
	      "route restored");
	CHECK(announcer_verify(a, false, &drifted, err, sizeof(err)) == 0, "verify: %s", err);
	CHECK(ct_sh_out("ip route show table 53 2>/dev/null")[0] == '\0', "routes removed");
	announcer_free(a);

	/* the default table is main */
	ct_cluster_init(&c, CONF_ANNOUNCE_FRR, "skpf0");
	ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == 0 && announcer_apply(a, true, err, sizeof(err)) == 0, "main: %s", err);
	CHECK(strstr(ct_sh_out("ip route show proto 53"), "192.0.2.53 dev lo") != NULL,
	      "route in main");
	announcer_free(a);
	/* free keeps the announcement: the keeper decides, not a destructor */
	CHECK(strstr(ct_sh_out("ip route show proto 53"), "192.0.2.53 dev lo") != NULL,
	      "free does not withdraw");
	ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == 0 && strstr(ct_sh_out("ip route show proto 53"), "192.0.2.53") == NULL,
	      "a new announcer withdraws the old routes");
	announcer_free(a);
}

/* zebra's view of the routes to 192.0.2.53/32 (`show ip route` lines), "" when none. */
static const char *zebra_routes(const char *vtydir)
{
	static char out[1024];
	char cmd[256];
	snprintf(cmd, sizeof(cmd),
	         "vtysh --vty_socket %s -c 'show ip route' -c 'show ipv6 route' 2>/dev/null | "
	         "grep -E '192.0.2.53/32|2001:db8::53/128'",
	         vtydir);
	snprintf(out, sizeof(out), "%s", ct_sh_out(cmd));
	return out;
}

/* Wait up to 5 s (a loaded machine) for zebra's routes to contain (or not) @p text. */
static bool zebra_wait(const char *vtydir, const char *text, bool present)
{
	int64_t end = ct_now_us() + 5000000;
	while (ct_now_us() < end) {
		if ((strstr(zebra_routes(vtydir), text) != NULL) == present)
			return true;
		ct_sleep_ms(10);
	}
	return false;
}

/*
 * A real zebra (FRR) in the namespace: the frr method's routes are what zebra selects, so
 * `redistribute kernel` exports them, and a holder set up by hand (its connected routes beat
 * the kernel routes) is put down again by verify.
 */
static void test_frr_zebra(void)
{
	char err[256], dir[160], conf[192], vty[192], pidf[192];
	struct passwd *pw = getpwnam("frr");
	if (access("/usr/lib/frr/zebra", X_OK) != 0 || !pw) {
		printf("test_cluster_announce: no FRR zebra, zebra checks skipped\n");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/frr", ct_tmpdir());
	snprintf(conf, sizeof(conf), "%s/zebra.conf", dir);
	snprintf(vty, sizeof(vty), "%s/zebra.vty", dir);
	snprintf(pidf, sizeof(pidf), "%s/zebra.pid", dir);
	CHECK(chmod(ct_tmpdir(), 0755) == 0 && mkdir(dir, 0755) == 0 &&
	          chown(dir, pw->pw_uid, pw->pw_gid) == 0,
	      "zebra folder");
	FILE *f = fopen(conf, "w");
	if (f) {
		fputs("hostname skp\n", f);
		fclose(f);
	}
	/* the earlier tests' holders carry the same addresses: zebra would see them too */
	(void)ct_sh("for i in skpi0 skpf0 skpk0; do ip link del $i 2>/dev/null; done");
	pid_t zebra = fork();
	if (zebra == 0) {
		char zs[192];
		snprintf(zs, sizeof(zs), "%s/zserv.api", dir);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		execl("/usr/lib/frr/zebra", "zebra", "-f", conf, "-i", pidf, "-z", zs,
		      "--vty_socket", dir, "-u", "frr", "-g", "frr", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 300 && access(vty, F_OK) != 0; i++)
		ct_sleep_ms(10);
	CHECK(access(vty, F_OK) == 0, "zebra runs");

	ct_cluster_t c;
	ct_cluster_init(&c, CONF_ANNOUNCE_FRR, "skpz0");
	announcer_t *a = NULL;
	int ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == 0, "frr announcer: %s", err);
	if (ret == 0) {
		CHECK(announcer_apply(a, true, err, sizeof(err)) == 0, "announce: %s", err);
		CHECK(zebra_wait(dir, "K>* 192.0.2.53/32", true), "zebra selects the v4 route: %s",
		      zebra_routes(dir));
		CHECK(zebra_wait(dir, "K>* 2001:db8::53/128", true),
		      "zebra selects the v6 route: %s", zebra_routes(dir));
		/* what went wrong with the holder up: its connected route wins */
		CHECK(ct_sh("ip link set skpz0 up") == 0, "holder up by hand");
		CHECK(zebra_wait(dir, "C>* 192.0.2.53/32", true) &&
		          !strstr(zebra_routes(dir), "K>* 192.0.2.53/32"),
		      "connected beats kernel: %s", zebra_routes(dir));
		bool drifted = false;
		CHECK(announcer_verify(a, true, &drifted, err, sizeof(err)) == 0 && drifted,
		      "verify puts the holder down: %s", err);
		CHECK(zebra_wait(dir, "K>* 192.0.2.53/32", true), "kernel route selected again: %s",
		      zebra_routes(dir));
		CHECK(announcer_apply(a, false, err, sizeof(err)) == 0, "withdraw: %s", err);
		CHECK(zebra_wait(dir, "192.0.2.53/32", false), "zebra has no route: %s",
		      zebra_routes(dir));
		CHECK(zebra_wait(dir, "2001:db8::53/128", false), "zebra has no v6 route: %s",
		      zebra_routes(dir));
		announcer_free(a);
	}
	kill(zebra, SIGTERM);
	for (int i = 0; i < 200 && waitpid(zebra, NULL, WNOHANG) == 0; i++)
		ct_sleep_ms(10);
	if (waitpid(zebra, NULL, WNOHANG) == 0) {
		kill(zebra, SIGKILL);
		waitpid(zebra, NULL, 0);
	}
}

static const char *file_text(const char *path)
{
	static char buf[64];
	buf[0] = '\0';
	FILE *f = fopen(path, "r");
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = '\0';
		fclose(f);
	}
	return buf;
}

static ino_t inode_of(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* Files in @p dir other than the track file itself (a temporary file left behind). */
static int stray_files(const char *dir)
{
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    strcmp(e->d_name, "vrrp-track"))
			n++;
	if (d)
		closedir(d);
	return n;
}

static void test_keepalived(void)
{
	char err[256], dir[160];
	ct_cluster_t c;
	ct_cluster_init(&c, CONF_ANNOUNCE_KEEPALIVED, NULL);
	snprintf(dir, sizeof(dir), "%s/run", ct_tmpdir());
	announcer_t *a = NULL;
	int links = atoi(ct_sh_out("ip -o link show | wc -l"));
	/* the folder is missing (a fresh /run): it is made */
	int ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == 0, "keepalived announcer: %s", err);
	if (ret < 0)
		return;
	CHECK(!strcmp(file_text(c.track_file), "1\n"), "starts withdrawn: fault (1)");
	struct stat st;
	CHECK(stat(c.track_file, &st) == 0 && (st.st_mode & 0777) == 0644, "mode 0644");
	ino_t before = inode_of(c.track_file);
	CHECK(announcer_apply(a, true, err, sizeof(err)) == 0, "announce: %s", err);
	CHECK(!strcmp(file_text(c.track_file), "0\n"), "announced: healthy (0)");
	ino_t after = inode_of(c.track_file);
	CHECK(before && after && before != after, "replaced by rename, not rewritten in place");
	CHECK(announcer_apply(a, false, err, sizeof(err)) == 0, "withdraw: %s", err);
	CHECK(!strcmp(file_text(c.track_file), "1\n"), "withdrawn: fault (1)");
	CHECK(stray_files(dir) == 0, "no temporary file left in %s", dir);
	bool drifted = true;
	CHECK(announcer_verify(a, false, &drifted, err, sizeof(err)) == 0 && !drifted,
	      "verify, no drift: %s", err);
	FILE *f = fopen(c.track_file, "w");
	if (f) {
		fputs("0\n", f);
		fclose(f);
	}
	CHECK(announcer_verify(a, false, &drifted, err, sizeof(err)) == 0 && drifted,
	      "verify sees the hand-written file: %s", err);
	CHECK(!strcmp(file_text(c.track_file), "1\n"), "fault (1) again");
	CHECK(atoi(ct_sh_out("ip -o link show | wc -l")) == links,
	      "no holder without an interface");
	announcer_free(a);

	/* with an interface, the holder is up and keeps the addresses */
	ct_cluster_init(&c, CONF_ANNOUNCE_KEEPALIVED, "skpk0");
	ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == 0 && nl_link_is_up("skpk0", err, sizeof(err)) == 1, "keepalived holder: %s",
	      err);
	announcer_free(a);

	/* an unwritable place fails set-up with the path in the error */
	ct_cluster_init(&c, CONF_ANNOUNCE_KEEPALIVED, NULL);
	snprintf(c.track_file, sizeof(c.track_file), "%s/no/such/dir/track", ct_tmpdir());
	ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret < 0 && strstr(err, "no/such/dir/track"), "unwritable: %d %s", ret, err);
}

/* The last state keepalived's notify script wrote, "" before the first. */
static const char *ka_state(const char *states)
{
	static char last[32];
	last[0] = '\0';
	FILE *f = fopen(states, "r");
	char line[64];
	while (f && fgets(line, sizeof(line), f))
		sscanf(line, "%31s", last);
	if (f)
		fclose(f);
	return last;
}

static bool ka_wait(const char *states, const char *want, unsigned ms)
{
	int64_t end = ct_now_us() + (int64_t)ms * 1000;
	while (ct_now_us() < end) {
		if (!strcmp(ka_state(states), want))
			return true;
		ct_sleep_ms(5);
	}
	return false;
}

/*
 * A real keepalived (VRRPv3, 0.1 s adverts) tracking the file: the withdrawn file (1) is
 * FAULT, the announced one (0) lets it become MASTER, and a withdraw is FAULT again.
 */
static void test_keepalived_real(void)
{
	char err[256], conf[192], states[192], script[192], log[192], pid1[192], pid2[192];
	if (access("/usr/sbin/keepalived", X_OK) != 0) {
		printf("test_cluster_announce: no keepalived, its checks skipped\n");
		return;
	}
	const char *dir = ct_tmpdir();
	snprintf(conf, sizeof(conf), "%s/keepalived.conf", dir);
	snprintf(states, sizeof(states), "%s/ka-states", dir);
	snprintf(script, sizeof(script), "%s/ka-notify.sh", dir);
	snprintf(log, sizeof(log), "%s/keepalived.log", dir);
	snprintf(pid1, sizeof(pid1), "%s/keepalived.pid", dir);
	snprintf(pid2, sizeof(pid2), "%s/vrrp.pid", dir);
	ct_cluster_t c;
	ct_cluster_init(&c, CONF_ANNOUNCE_KEEPALIVED, NULL);
	FILE *f = fopen(script, "w");
	if (f) {
		fprintf(f, "#!/bin/sh\necho \"$3\" >> %s\n", states);
		fclose(f);
	}
	CHECK(chmod(script, 0755) == 0, "notify script");
	f = fopen(conf, "w");
	if (f) {
		fprintf(
		    f,
		    "global_defs {\n router_id skp\n script_user root\n enable_script_security\n}\n"
		    "track_file steer {\n file %s\n weight 0\n}\n"
		    "vrrp_instance VI {\n state BACKUP\n interface skpkv0\n virtual_router_id 53\n"
		    " priority 100\n advert_int 0.1\n version 3\n"
		    " virtual_ipaddress {\n  192.0.2.153/32\n }\n track_file {\n  steer\n }\n"
		    " notify %s\n}\n",
		    c.track_file, script);
		fclose(f);
	}
	CHECK(ct_sh("ip link add skpkv0 type veth peer name skpkv1 && ip link set skpkv0 up && "
	            "ip link set skpkv1 up && ip addr add 10.9.1.1/24 dev skpkv0") == 0,
	      "veth for VRRP");
	announcer_t *a = NULL;
	int ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == 0, "keepalived announcer: %s", err);
	if (ret < 0)
		return;
	pid_t ka = fork();
	if (ka == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl("/usr/sbin/keepalived", "keepalived", "-n", "-l", "-D", "-f", conf, "-p",
		      pid1, "-r", pid2, (char *)NULL);
		_exit(127);
	}
	CHECK(ka_wait(states, "FAULT", 3000), "withdrawn: FAULT (%s)", ka_state(states));
	CHECK(announcer_apply(a, true, err, sizeof(err)) == 0, "announce: %s", err);
	CHECK(ka_wait(states, "MASTER", 3000), "announced: MASTER (%s)", ka_state(states));
	CHECK(strstr(ct_sh_out("ip addr show dev skpkv0"), "192.0.2.153/32") != NULL,
	      "the VIP is on the master");
	int64_t t0 = ct_now_us();
	CHECK(announcer_apply(a, false, err, sizeof(err)) == 0, "withdraw: %s", err);
	CHECK(ka_wait(states, "FAULT", 2000), "withdrawn: FAULT again (%s)", ka_state(states));
	printf("keepalived went to FAULT %.1f ms after the track file said 1\n",
	       (double)(ct_now_us() - t0) / 1000.0);
	CHECK(strstr(ct_sh_out("ip addr show dev skpkv0"), "192.0.2.153/32") == NULL,
	      "the VIP left");
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "cat %s", log);
	CHECK(!strstr(ct_sh_out(cmd), "deprecated"), "no deprecated keepalived syntax");
	announcer_free(a);
	kill(ka, SIGTERM);
	for (int i = 0; i < 300 && waitpid(ka, NULL, WNOHANG) == 0; i++)
		ct_sleep_ms(10);
	if (waitpid(ka, NULL, WNOHANG) == 0) {
		kill(ka, SIGKILL);
		waitpid(ka, NULL, 0);
	}
}

static void test_names(void)
{
	CHECK(!strcmp(announcer_method_name(CONF_ANNOUNCE_INTERFACE), "interface"), "interface");
	CHECK(!strcmp(announcer_method_name(CONF_ANNOUNCE_BIRD), "bird"), "bird");
	CHECK(!strcmp(announcer_method_name(CONF_ANNOUNCE_FRR), "frr"), "frr");
	CHECK(!strcmp(announcer_method_name(CONF_ANNOUNCE_KEEPALIVED), "keepalived"), "keepalived");
	announcer_free(NULL);
}

int main(void)
{
	int skip = ct_enter_netns("test_cluster_announce");
	if (skip)
		return skip;
	test_names();
	test_interface();
	test_frr();
	test_keepalived();
	test_frr_zebra();
	test_keepalived_real();
	ct_rmtmp();
	return unit_finish("test_cluster_announce");
}
