/*
 * The interface, frr and keepalived announcement methods against the real kernel and file
 * system, in the test's own network namespace (bird is in test_cluster_bird). The state is
 * read back independently with `ip` and stat(). Needs root; skipped (77) without it.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "base/err.h"
#include "cluster/announce.h"
#include "cluster/nl.h"
#include "cluster_test.h"
#include "unit.h"

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
	/* down for good: zebra would prefer the holder's connected routes */
	CHECK(nl_link_is_up("skpf0", err, sizeof(err)) == 0, "frr holder down");
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
	ct_rmtmp();
	return unit_finish("test_cluster_announce");
}
