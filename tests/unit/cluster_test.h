/*
 * Shared by the cluster tests: a private network namespace for the test process, shell
 * helpers that read the kernel's state back independently (`ip`), a real BIRD started and
 * stopped by pid, and a conf_cluster_t filled by hand. Everything a test makes lives in its
 * namespace or its own temporary folder and goes when the test ends.
 */
#pragma once

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/sockaddr.h"
#include "conf/conf.h"

/* Enter a network namespace of our own; returns 0, or 77 (skip) with the reason printed. */
static inline int ct_enter_netns(const char *test)
{
	if (geteuid() != 0) {
		printf("%s: needs root, skipped\n", test);
		return 77;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		printf("%s: unshare(CLONE_NEWNET): %s, skipped\n", test, strerror(errno));
		return 77;
	}
	if (system("ip link set lo up") != 0) {
		printf("%s: no ip command, skipped\n", test);
		return 77;
	}
	return 0;
}

static inline int ct_sh(const char *cmd)
{
	return system(cmd);
}

/* Output of a shell command, "" on failure; static buffer. */
static inline const char *ct_sh_out(const char *cmd)
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

static inline steer_sockaddr_t ct_addr(const char *text)
{
	steer_sockaddr_t a;
	if (steer_sockaddr_parse(text, 0, &a) < 0) {
		printf("bad address %s\n", text);
		exit(2);
	}
	return a;
}

static inline int64_t ct_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline void ct_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* A folder of our own under /tmp, for sockets, configs and track files. */
static inline const char *ct_tmpdir(void)
{
	static char dir[64];
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/skp-unit-%d-XXXXXX", (int)getpid());
		if (!mkdtemp(dir)) {
			printf("mkdtemp: %s\n", strerror(errno));
			exit(2);
		}
	}
	return dir;
}

static inline void ct_rmtmp(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ct_tmpdir());
	(void)ct_sh(cmd);
}

/* Whether something accepts connections on the UNIX socket @p path. */
static inline bool ct_socket_ready(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%.100s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/*
 * Start `bird -f` in the foreground of a child (our namespace) with a static protocol `vip`
 * and wait until its control socket answers. Returns the pid, or -1 (no bird: skip).
 */
static inline pid_t ct_bird_start(char *sock, size_t socklen)
{
	const char *dir = ct_tmpdir();
	char conf[128], log[128], pidf[128];
	snprintf(conf, sizeof(conf), "%s/bird.conf", dir);
	snprintf(log, sizeof(log), "%s/bird.log", dir);
	snprintf(pidf, sizeof(pidf), "%s/bird.pid", dir);
	snprintf(sock, socklen, "%s/bird.ctl", dir);
	FILE *f = fopen(conf, "w");
	if (!f)
		return -1;
	fprintf(f,
	        "router id 10.53.0.1;\n"
	        "log \"%s\" all;\n"
	        "protocol device {}\n"
	        "protocol static vip { ipv4; route 192.0.2.53/32 blackhole; }\n",
	        log);
	fclose(f);
	if (access("/usr/sbin/bird", X_OK) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		execl("/usr/sbin/bird", "bird", "-c", conf, "-s", sock, "-P", pidf, "-f",
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && pid > 0; i++) {
		if (ct_socket_ready(sock))
			return pid;
		ct_sleep_ms(10);
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	return -1;
}

static inline void ct_bird_stop(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (int i = 0; i < 200; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		ct_sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A cluster section as the config loader would make it (defaults filled in). */
typedef struct {
	conf_cluster_t cc;
	steer_sockaddr_t service[2];
	char ifname[16];
	char bird_socket[160];
	char bird_protocol[32];
	char track_file[160];
} ct_cluster_t;

static inline void ct_cluster_init(ct_cluster_t *c, conf_announce_t method, const char *ifname)
{
	memset(c, 0, sizeof(*c));
	c->service[0] = ct_addr("192.0.2.53");
	c->service[1] = ct_addr("2001:db8::53");
	snprintf(c->ifname, sizeof(c->ifname), "%s", ifname ? ifname : "");
	snprintf(c->bird_protocol, sizeof(c->bird_protocol), "vip");
	snprintf(c->bird_socket, sizeof(c->bird_socket), "%s/bird.ctl", ct_tmpdir());
	snprintf(c->track_file, sizeof(c->track_file), "%s/run/vrrp-track", ct_tmpdir());
	c->cc.enabled = true;
	c->cc.node_id = (char *)"n1";
	c->cc.service = c->service;
	c->cc.n_service = 2;
	c->cc.interface = ifname ? c->ifname : NULL;
	c->cc.announce = method;
	c->cc.bird_socket = c->bird_socket;
	c->cc.bird_protocol = c->bird_protocol;
	c->cc.frr_table = 254;
	c->cc.keepalived_track_file = c->track_file;
	c->cc.check_interval = 100;
	c->cc.check_timeout = 80;
	c->cc.check_fall = 3;
	c->cc.check_rise = 5;
	c->cc.check_hold_down = 2000;
	c->cc.liveness_timeout = 300;
	c->cc.drain_quiet = 500;
	c->cc.drain_timeout = 30000;
}
