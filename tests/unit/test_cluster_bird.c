/*
 * The BIRD control socket client against a real BIRD 2 started here (in the test's own
 * network namespace, its socket in a private folder), and against sockets that refuse,
 * are missing, or accept and never answer. The bird announcement method rides on it and is
 * checked here too. Needs root and /usr/sbin/bird; skipped (77) without them.
 */
#include "base/err.h"
#include "cluster/announce.h"
#include "cluster/bird.h"
#include "cluster/keeper.h"
#include "cluster/nl.h"
#include "cluster_test.h"
#include "unit.h"

static const char *state_of(const char *sock)
{
	static char state[32];
	char err[256];
	int ret = bird_protocol_state(sock, "vip", 500, state, sizeof(state), err, sizeof(err));
	if (ret < 0)
		snprintf(state, sizeof(state), "error %d", ret);
	return state;
}

static void test_commands(const char *sock)
{
	char err[300], reply[1024];
	CHECK(!strcmp(state_of(sock), "up"), "vip starts up: %s", state_of(sock));
	for (int i = 0; i < 2; i++) {
		err[0] = '\0';
		bool changed = i == 0;
		CHECK(bird_protocol_set(sock, "vip", false, 500, &changed, err, sizeof(err)) == 0,
		      "disable #%d: %s", i, err);
		CHECK(changed == (i == 0), "disable #%d changed: %d", i, changed);
		CHECK(!strcmp(state_of(sock), "down"), "vip down: %s", state_of(sock));
	}
	for (int i = 0; i < 2; i++) {
		bool changed = i == 0;
		CHECK(bird_protocol_set(sock, "vip", true, 500, &changed, err, sizeof(err)) == 0,
		      "enable #%d: %s", i, err);
		CHECK(changed == (i == 0), "enable #%d changed: %d", i, changed);
		CHECK(!strcmp(state_of(sock), "up"), "vip up: %s", state_of(sock));
	}

	int ret = bird_protocol_set(sock, "nosuch", false, 500, NULL, err, sizeof(err));
	CHECK(ret == STEER_ENOENT, "unknown protocol: %d", ret);
	CHECK(strstr(err, "No protocols match") && strstr(err, sock), "BIRD's words: %s", err);
	ret = bird_protocol_set(sock, "vip\"; down", false, 500, NULL, err, sizeof(err));
	CHECK(ret == STEER_EINVAL && strstr(err, "bad BIRD protocol name"), "bad name: %d %s", ret,
	      err);
	ret = bird_protocol_set(sock, "vi*", false, 500, NULL, err, sizeof(err));
	CHECK(ret == STEER_EINVAL, "a pattern is not a name: %d", ret);
	CHECK(!strcmp(state_of(sock), "up"), "vip untouched by refused commands");

	ret = bird_command(sock, "foo bar", 500, reply, sizeof(reply), err, sizeof(err));
	CHECK(ret == STEER_EINVAL && strstr(err, "syntax error"), "syntax error: %d %s", ret, err);
	ret = bird_command(sock, "show status", 500, reply, sizeof(reply), err, sizeof(err));
	CHECK(ret == 0, "show status: %d %s", ret, err);
	CHECK(strstr(reply, "BIRD 2.") && strstr(reply, "Router ID is 10.53.0.1") &&
	          strstr(reply, "Daemon is up and running"),
	      "show status reply, continuation lines included: %s", reply);
	ret = bird_protocol_state(sock, "nosuch", 500, reply, sizeof(reply), err, sizeof(err));
	CHECK(ret < 0, "state of an unknown protocol: %d %s", ret, err);
	ret = bird_command(sock, "show protocols\nshow status", 500, NULL, 0, err, sizeof(err));
	CHECK(ret == STEER_EINVAL, "two lines refused: %d", ret);
}

static void test_announcer(void)
{
	char err[300];
	ct_cluster_t c;
	ct_cluster_init(&c, CONF_ANNOUNCE_BIRD, "skpb0");
	announcer_t *a = NULL;
	int ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == 0, "bird announcer: %s", err);
	if (ret < 0)
		return;
	CHECK(nl_link_is_up("skpb0", err, sizeof(err)) == 1, "holder up with bird");
	const char *out = ct_sh_out("ip addr show dev skpb0");
	CHECK(strstr(out, "192.0.2.53/32") && strstr(out, "2001:db8::53/128"), "addresses: %s",
	      out);
	CHECK(!strcmp(state_of(c.bird_socket), "down"), "announcer_new withdrew");
	CHECK(announcer_apply(a, true, err, sizeof(err)) == 0, "announce: %s", err);
	CHECK(!strcmp(state_of(c.bird_socket), "up"), "announced: protocol up");
	CHECK(announcer_apply(a, true, err, sizeof(err)) == 0, "announce again: %s", err);
	CHECK(announcer_apply(a, false, err, sizeof(err)) == 0, "withdraw: %s", err);
	CHECK(!strcmp(state_of(c.bird_socket), "down"), "withdrawn: protocol down");
	CHECK(nl_link_is_up("skpb0", err, sizeof(err)) == 1, "holder stays up");
	announcer_free(a);

	/* BIRD not there yet is not a set-up failure; applying it is */
	ct_cluster_init(&c, CONF_ANNOUNCE_BIRD, "skpb1");
	snprintf(c.bird_socket, sizeof(c.bird_socket), "%s/none.ctl", ct_tmpdir());
	ret = announcer_new(&c.cc, &a, err, sizeof(err));
	CHECK(ret == 0, "bird absent at set-up: %d %s", ret, err);
	if (ret == 0) {
		ret = announcer_apply(a, true, err, sizeof(err));
		CHECK(ret == -ENOENT && strstr(err, "is BIRD running?"), "apply: %d %s", ret, err);
		announcer_free(a);
	}
	ct_cluster_init(&c, CONF_ANNOUNCE_BIRD, "skpb2");
	c.cc.bird_protocol = NULL;
	CHECK(announcer_new(&c.cc, &a, err, sizeof(err)) == STEER_EINVAL, "bird without protocol");
}

/* Accepts (the kernel's backlog does), says nothing. */
static int silent_socket(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%.100s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 8) < 0)
		return -1;
	return fd;
}

static void test_failures(void)
{
	char err[300], path[160];
	/* no socket at all */
	snprintf(path, sizeof(path), "%s/missing.ctl", ct_tmpdir());
	int ret = bird_protocol_set(path, "vip", true, 500, NULL, err, sizeof(err));
	CHECK(ret == -ENOENT && strstr(err, "is BIRD running?"), "missing: %d %s", ret, err);

	/* a socket file nobody listens on (BIRD died) */
	snprintf(path, sizeof(path), "%s/dead.ctl", ct_tmpdir());
	int fd = silent_socket(path);
	CHECK(fd >= 0, "dead socket made");
	close(fd);
	ret = bird_protocol_set(path, "vip", true, 500, NULL, err, sizeof(err));
	CHECK(ret == -ECONNREFUSED && strstr(err, "Connection refused"), "refused: %d %s", ret,
	      err);

	/* accepts, never greets */
	snprintf(path, sizeof(path), "%s/hung.ctl", ct_tmpdir());
	fd = silent_socket(path);
	int64_t t0 = ct_now_us();
	ret = bird_protocol_set(path, "vip", true, 300, NULL, err, sizeof(err));
	int64_t ms = (ct_now_us() - t0) / 1000;
	CHECK(ret == -ETIMEDOUT && strstr(err, "no complete answer"), "hung: %d %s", ret, err);
	CHECK(ms >= 290 && ms < 600, "hung BIRD costs the timeout: %lld ms", (long long)ms);
	close(fd);

	/* greets, then never answers the command */
	snprintf(path, sizeof(path), "%s/mute.ctl", ct_tmpdir());
	fd = silent_socket(path);
	pid_t pid = fork();
	if (pid == 0) {
		int c = accept(fd, NULL, NULL);
		if (c >= 0 && write(c, "0001 BIRD 2.0.12 ready.\n", 24) == 24)
			pause();
		_exit(0);
	}
	close(fd);
	t0 = ct_now_us();
	ret = bird_protocol_set(path, "vip", false, 300, NULL, err, sizeof(err));
	ms = (ct_now_us() - t0) / 1000;
	CHECK(ret == -ETIMEDOUT && strstr(err, "disable \"vip\""), "mute: %d %s", ret, err);
	CHECK(ms >= 290 && ms < 600, "mute BIRD costs the timeout: %lld ms", (long long)ms);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	/* something that is not BIRD */
	snprintf(path, sizeof(path), "%s/other.ctl", ct_tmpdir());
	fd = silent_socket(path);
	pid = fork();
	if (pid == 0) {
		int c = accept(fd, NULL, NULL);
		if (c >= 0 && write(c, "HTTP/1.0 400 Bad\r\n", 18) == 18)
			pause();
		_exit(0);
	}
	close(fd);
	ret = bird_protocol_set(path, "vip", false, 300, NULL, err, sizeof(err));
	CHECK(ret == STEER_EMALF && strstr(err, "not BIRD's protocol"), "not bird: %d %s", ret,
	      err);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/*
 * The keeper on top of BIRD: announce and withdraw through it, and a BIRD restart (which
 * brings the protocol back up, as configured) is undone within a verify period.
 */
static pid_t test_keeper(pid_t bird, char *sock, size_t socklen)
{
	char err[300];
	ct_cluster_t c;
	ct_cluster_init(&c, CONF_ANNOUNCE_BIRD, "skpb3");
	snprintf(c.bird_socket, sizeof(c.bird_socket), "%s", sock);
	cluster_keeper_t *k = NULL;
	int ret = cluster_keeper_spawn(&c.cc, &k, err, sizeof(err));
	CHECK(ret == 0, "keeper with bird: %d %s", ret, err);
	if (ret < 0)
		return bird;
	CHECK(!strcmp(state_of(sock), "down"), "keeper starts withdrawn");
	(void)cluster_keeper_send(k, true, "test");
	int64_t end = ct_now_us() + 1000000;
	while (strcmp(state_of(sock), "up") && ct_now_us() < end)
		ct_sleep_ms(5);
	CHECK(!strcmp(state_of(sock), "up"), "announced through BIRD");
	(void)cluster_keeper_send(k, false, "test");
	end = ct_now_us() + 1000000;
	while (strcmp(state_of(sock), "down") && ct_now_us() < end)
		ct_sleep_ms(5);
	CHECK(!strcmp(state_of(sock), "down"), "withdrawn through BIRD");

	ct_bird_stop(bird);
	bird = ct_bird_start(sock, socklen);
	CHECK(bird > 0, "BIRD restarted");
	int64_t t0 = ct_now_us();
	bool seen_up = !strcmp(state_of(sock), "up");
	end = t0 + 2500000;
	while (strcmp(state_of(sock), "down") && ct_now_us() < end) {
		(void)cluster_keeper_send(k, false, "test");
		ct_sleep_ms(20);
	}
	double ms = (double)(ct_now_us() - t0) / 1000.0;
	CHECK(!strcmp(state_of(sock), "down"), "restart undone (protocol down again)");
	printf("BIRD restarted with vip %s: the keeper disabled it again after %.0f ms\n",
	       seen_up ? "up" : "?", ms);
	CHECK(ms < 1300, "within a verify period: %.0f ms", ms);
	cluster_keeper_shutdown(k);
	return bird;
}

int main(void)
{
	int skip = ct_enter_netns("test_cluster_bird");
	if (skip)
		return skip;
	char sock[160];
	pid_t bird = ct_bird_start(sock, sizeof(sock));
	if (bird < 0) {
		printf("test_cluster_bird: cannot start /usr/sbin/bird, skipped\n");
		ct_rmtmp();
		return 77;
	}
	test_commands(sock);
	test_announcer();
	test_failures();
	bird = test_keeper(bird, sock, sizeof(sock));
	ct_bird_stop(bird);
	/* BIRD gone: the same socket path now refuses or is missing */
	char err[256];
	int ret = bird_protocol_set(sock, "vip", true, 300, NULL, err, sizeof(err));
	CHECK(ret == -ENOENT || ret == -ECONNREFUSED, "after BIRD stopped: %d %s", ret, err);
	ct_rmtmp();
	return unit_finish("test_cluster_bird");
}
