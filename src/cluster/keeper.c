/*
 * The keeper process (keeper.h) and steerd's handle on it.
 *
 * steerd side: the handle (one socket, the pid); cluster_keeper_send/recv never block, so a
 * keeper that stopped reading costs steerd nothing. The control thread spawns and shuts the
 * keeper down; the cluster thread sends and receives.
 *
 * keeper side: one thread, one ppoll() loop. It tracks what steerd wants, what is in force
 * (or unknown after a failed apply) and when steerd last spoke. Reports go out with
 * MSG_DONTWAIT and are dropped when steerd does not read them: a stopped steerd must never
 * stop its keeper.
 */
#include "cluster/keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "cluster/announce.h"

#define KEEPER_MAGIC 0x5354504bu /* "STPK" */

/* How long spawn waits for the keeper's set-up (holder interface, addresses, first apply). */
#define KEEPER_SETUP_TIMEOUT_MS 5000
/* How long shutdown waits for the keeper to withdraw and exit before it is killed. */
#define KEEPER_EXIT_TIMEOUT_MS 2000
/* A failed apply is retried at most this often: a broken method must not spin the CPU. */
#define KEEPER_RETRY_MS 100
/*
 * What is in force is checked this often: a BIRD restart puts its protocol back to its
 * configured state, and someone may set the holder up or down by hand. One BIRD command or
 * netlink request a second costs nothing.
 */
#define KEEPER_VERIFY_MS 1000
/* The keeper's socket descriptor after it closed everything else (0-2 are stdio). */
#define KEEPER_FD 3

enum { KEEPER_MSG_STATE = 1, KEEPER_MSG_EXIT = 2 };
enum { KEEPER_REPORT_SETUP = 1, KEEPER_REPORT_APPLY = 2 };

/* steerd -> keeper: the wanted state; every message is also a heartbeat. */
typedef struct {
	uint32_t magic;
	uint8_t kind;
	uint8_t announce;
	char reason[120];
} keeper_msg_t;

/* keeper -> steerd. */
typedef struct {
	uint32_t magic;
	uint8_t kind;
	cluster_keeper_report_t r;
} keeper_report_msg_t;

struct cluster_keeper {
	int fd;
	pid_t pid;
};

static int64_t keeper_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the keeper process ----------------------------------------------------------------- */

static volatile sig_atomic_t keeper_signal;

static void keeper_signal_cb(int sig)
{
	keeper_signal = sig;
}

typedef struct {
	int fd;
	announcer_t *an;
	const char *method;
	int64_t liveness_ns;
	bool wanted;         /* what steerd asked last */
	bool self_withdrawn; /* we withdrew because steerd went quiet; until it speaks again */
	int applied;         /* 1 announced, 0 withdrawn, -1 unknown (the last apply failed) */
	int attempted;       /* the target of the last apply, -1 none yet */
	int64_t last_msg_ns;
	int64_t last_attempt_ns;
	char reason[120];    /* steerd's reason for the wanted state */
	char last_fail[200]; /* the last failure logged, so a retry loop logs once */
} keeper_t;

static void keeper_report(keeper_t *k, int kind, int error, const char *fmt, ...)
    STEER_PRINTF(4, 5);
static void keeper_report(keeper_t *k, int kind, int error, const char *fmt, ...)
{
	keeper_report_msg_t m = {.magic = KEEPER_MAGIC, .kind = (uint8_t)kind};
	m.r.announced = k->applied == 1;
	m.r.self_withdraw = k->self_withdrawn;
	m.r.error = error;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m.r.message, sizeof(m.r.message), fmt, ap);
	va_end(ap);
	/* dropped when steerd does not read: it learns the state from the next report */
	(void)send(k->fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void keeper_failed(keeper_t *k, bool target, int ret, const char *err)
{
	k->applied = -1;
	if (strcmp(err, k->last_fail)) {
		log_warn("cluster keeper: %s (%s) failed: %s; retrying",
		         target ? "announce" : "withdraw", k->method, err);
		snprintf(k->last_fail, sizeof(k->last_fail), "%s", err);
	}
	keeper_report(k, KEEPER_REPORT_APPLY, ret, "%s failed: %s",
	              target ? "announce" : "withdraw", err);
}

static void keeper_apply(keeper_t *k, bool target, const char *why)
{
	char err[200];
	int64_t t0 = keeper_now_ns();
	k->attempted = target;
	k->last_attempt_ns = t0;
	int ret = announcer_apply(k->an, target, err, sizeof(err));
	unsigned us = (unsigned)((keeper_now_ns() - t0) / 1000);
	if (ret < 0) {
		keeper_failed(k, target, ret, err);
		return;
	}
	k->applied = target;
	k->last_fail[0] = '\0';
	log_info("cluster keeper: %s (%s, %u us): %s", target ? "announced" : "withdrawn",
	         k->method, us, why);
	keeper_report(k, KEEPER_REPORT_APPLY, 0, "%s: %s", target ? "announced" : "withdrawn", why);
}

/* The state in force, checked again: a restarted BIRD or a hand-made change is put right. */
static void keeper_verify(keeper_t *k, bool target)
{
	char err[200];
	bool drifted = false;
	k->last_attempt_ns = keeper_now_ns();
	int ret = announcer_verify(k->an, target, &drifted, err, sizeof(err));
	if (ret < 0) {
		keeper_failed(k, target, ret, err);
		return;
	}
	if (drifted) {
		const char *state = target ? "announced" : "withdrawn";
		log_warn(
		    "cluster keeper: %s state changed behind the keeper's back (%s restarted, or "
		    "changed by hand): %s again",
		    k->method, k->method, state);
		keeper_report(k, KEEPER_REPORT_APPLY, 0, "%s again: the %s state had been changed",
		              state, k->method);
	}
}

/* Withdraw on the way out (steerd gone, asked to exit, or a signal) and leave. */
static STEER_NORETURN void keeper_exit(keeper_t *k, const char *why)
{
	if (k->applied != 0 || k->attempted != 0)
		keeper_apply(k, false, why);
	else
		log_info("cluster keeper: exiting (%s)", why);
	announcer_free(k->an);
	_exit(0);
}

/* A message from steerd; false when steerd is gone or asked us to exit (reason in @p why). */
static bool keeper_read(keeper_t *k, char *why, size_t whylen)
{
	for (;;) {
		keeper_msg_t m;
		ssize_t n = recv(k->fd, &m, sizeof(m), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return true;
		if (n <= 0) {
			snprintf(why, whylen, "steerd is gone (%s)",
			         n == 0 ? "socket closed" : strerror(errno));
			return false;
		}
		if ((size_t)n != sizeof(m) || m.magic != KEEPER_MAGIC) {
			log_warn("cluster keeper: ignored a malformed message (%zd bytes)", n);
			continue;
		}
		k->last_msg_ns = keeper_now_ns();
		if (m.kind == KEEPER_MSG_EXIT) {
			snprintf(why, whylen, "steerd asked the keeper to exit");
			return false;
		}
		m.reason[sizeof(m.reason) - 1] = '\0';
		if (k->self_withdrawn && m.announce)
			log_info("cluster keeper: steerd is back and wants the announcement");
		if (k->self_withdrawn)
			k->self_withdrawn = false;
		k->wanted = m.announce;
		snprintf(k->reason, sizeof(k->reason), "%s",
		         m.reason[0] ? m.reason
		                     : (m.announce ? "steerd wants it" : "steerd withdrew"));
	}
}

/* Decide, apply or verify; returns the ns until something is due. */
static int64_t keeper_step(keeper_t *k)
{
	int64_t now = keeper_now_ns();
	if (k->wanted && !k->self_withdrawn && now - k->last_msg_ns >= k->liveness_ns) {
		k->self_withdrawn = true;
		unsigned quiet = (unsigned)((now - k->last_msg_ns) / 1000000);
		log_warn(
		    "cluster keeper: no heartbeat from steerd for %u ms: withdrawing on its own",
		    quiet);
		snprintf(k->reason, sizeof(k->reason), "no heartbeat for %u ms", quiet);
	}
	bool target = k->wanted && !k->self_withdrawn;
	if (k->applied != (int)target) {
		/* a new target goes at once; the same one failed before: paced */
		if (k->attempted != (int)target ||
		    now - k->last_attempt_ns >= KEEPER_RETRY_MS * 1000000LL)
			keeper_apply(k, target, k->reason);
	} else if (now - k->last_attempt_ns >= KEEPER_VERIFY_MS * 1000000LL) {
		keeper_verify(k, target);
	}
	int64_t due = k->last_attempt_ns - now;
	due += (k->applied != (int)target ? KEEPER_RETRY_MS : KEEPER_VERIFY_MS) * 1000000LL;
	if (k->wanted && !k->self_withdrawn) {
		int64_t live = k->last_msg_ns + k->liveness_ns - now;
		due = live < due ? live : due;
	}
	return due < 0 ? 0 : due;
}

static void keeper_loop(keeper_t *k)
{
	sigset_t none;
	sigemptyset(&none);
	for (;;) {
		int64_t due = keeper_step(k);
		struct timespec ts = {.tv_sec = due / 1000000000, .tv_nsec = due % 1000000000};
		struct pollfd pfd = {.fd = k->fd, .events = POLLIN};
		int n = ppoll(&pfd, 1, &ts, &none);
		if (keeper_signal) {
			char why[48];
			snprintf(why, sizeof(why), "signal %d", (int)keeper_signal);
			keeper_exit(k, why);
		}
		if (n < 0 && errno != EINTR) {
			log_err("cluster keeper: poll: %s", strerror(errno));
			keeper_exit(k, "poll failed");
		}
		/*
		 * Read also after a timeout: a heartbeat that came in while the keeper itself was
		 * waiting for a CPU must count before the liveness timeout is judged.
		 */
		char why[96];
		if (!keeper_read(k, why, sizeof(why)))
			keeper_exit(k, why);
	}
}

/*
 * The keeper must not keep steerd's sockets (listeners, control socket) open after steerd
 * died, nor be stopped by what stops steerd's terminal job.
 */
static void keeper_detach(int fd)
{
	if (fd != KEEPER_FD) {
		if (dup2(fd, KEEPER_FD) < 0)
			_exit(2);
		close(fd);
	}
	closelog(); /* its socket is closed below; syslog() reopens it when it needs one */
	if (syscall(SYS_close_range, KEEPER_FD + 1, ~0U, 0) < 0) {
		long max = sysconf(_SC_OPEN_MAX);
		for (long i = KEEPER_FD + 1; i < (max > 0 && max < 65536 ? max : 65536); i++)
			close((int)i);
	}
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		if (fcntl(2, F_GETFD) < 0)
			dup2(null,
			     2); /* started without stderr: logs go nowhere, not into a socket */
		if (null > 2 && null != KEEPER_FD)
			close(null);
	}

	struct sigaction dfl = {.sa_handler = SIG_DFL};
	for (int sig = 1; sig < NSIG; sig++)
		(void)sigaction(sig, &dfl, NULL);
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigaction(SIGPIPE, &ign, NULL);
	sigaction(SIGHUP, &ign, NULL);
	sigaction(SIGTSTP, &ign, NULL);
	sigaction(SIGTTIN, &ign, NULL);
	sigaction(SIGTTOU, &ign, NULL);
	struct sigaction term = {.sa_handler = keeper_signal_cb};
	sigemptyset(&term.sa_mask);
	sigaction(SIGTERM, &term, NULL);
	sigaction(SIGINT, &term, NULL);
	/* delivered only inside ppoll(), so a signal between two checks is never missed */
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_SETMASK, &block, NULL);
	prctl(PR_SET_NAME, "steer-keeper", 0, 0, 0);
	/*
	 * The process that withdraws for a dead steerd must outlive it: out of memory, the kernel
	 * kills steerd (the keeper then withdraws), never the small keeper. Best effort: it needs
	 * the privilege the keeper keeps anyway.
	 */
	int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oom >= 0) {
		if (write(oom, "-1000\n", 6) != 6)
			log_debug("cluster keeper: oom_score_adj: %s", strerror(errno));
		close(oom);
	}
	/* A withdraw must not wait behind steerd's busy workers for the CPU. */
	struct sched_param rt = {.sched_priority = 1};
	if (sched_setscheduler(0, SCHED_RR, &rt) != 0)
		log_debug("cluster keeper: no real-time priority: %s", strerror(errno));
}

static STEER_NORETURN void keeper_main(int fd, const conf_cluster_t *cc)
{
	keeper_detach(fd);
	keeper_t k = {
	    .fd = KEEPER_FD,
	    .method = announcer_method_name(cc->announce),
	    .liveness_ns = (int64_t)(cc->liveness_timeout ? cc->liveness_timeout : 300) * 1000000,
	    .attempted = -1,
	    .applied = -1,
	};
	k.last_msg_ns = keeper_now_ns();
	char err[200];
	int ret = announcer_new(cc, &k.an, err, sizeof(err));
	if (ret < 0) {
		log_err("cluster keeper: set-up (%s) failed: %s", k.method, err);
		keeper_report(&k, KEEPER_REPORT_SETUP, ret, "%s", err);
		_exit(1);
	}
	log_info("cluster keeper: pid %d holds the announcement (%s, liveness %u ms)",
	         (int)getpid(), k.method, (unsigned)(k.liveness_ns / 1000000));
	/* announcer_new withdrew already; BIRD may not have answered yet, hence "unknown" */
	keeper_report(&k, KEEPER_REPORT_SETUP, 0, "set up (%s)", k.method);
	snprintf(k.reason, sizeof(k.reason), "starting");
	keeper_loop(&k);
	_exit(0);
}

/* ---- steerd's side ---------------------------------------------------------------------- */

/* Reap @p pid within @p ms: 1 reaped (or not our child any more), 0 still running. */
static int keeper_reap(pid_t pid, int ms, int *status)
{
	int64_t end = keeper_now_ns() + (int64_t)ms * 1000000;
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid || (r < 0 && errno == ECHILD))
			return 1; /* ECHILD: someone else (a SIGCHLD handler) reaped it */
		if (r < 0 && errno != EINTR)
			return 1;
		if (keeper_now_ns() >= end)
			return 0;
		struct timespec ts = {.tv_nsec = 5 * 1000000};
		nanosleep(&ts, NULL);
	}
}

static void keeper_kill(pid_t pid)
{
	int status;
	if (!keeper_reap(pid, KEEPER_EXIT_TIMEOUT_MS, &status)) {
		kill(pid, SIGKILL);
		(void)keeper_reap(pid, KEEPER_EXIT_TIMEOUT_MS, &status);
	}
}

static int keeper_wait_setup(cluster_keeper_t *k, char *err, size_t errlen)
{
	int64_t end = keeper_now_ns() + (int64_t)KEEPER_SETUP_TIMEOUT_MS * 1000000;
	for (;;) {
		int left = (int)((end - keeper_now_ns()) / 1000000);
		if (left <= 0) {
			snprintf(err, errlen, "cluster keeper: no set-up report within %d ms",
			         KEEPER_SETUP_TIMEOUT_MS);
			return -ETIMEDOUT;
		}
		struct pollfd pfd = {.fd = k->fd, .events = POLLIN};
		int n = poll(&pfd, 1, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			continue;
		keeper_report_msg_t m;
		ssize_t got = recv(k->fd, &m, sizeof(m), MSG_DONTWAIT);
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (got <= 0) {
			snprintf(err, errlen, "cluster keeper: exited during set-up");
			return -ECHILD;
		}
		if ((size_t)got != sizeof(m) || m.magic != KEEPER_MAGIC ||
		    m.kind != KEEPER_REPORT_SETUP) {
			snprintf(err, errlen, "cluster keeper: unexpected set-up report");
			return STEER_EMALF;
		}
		m.r.message[sizeof(m.r.message) - 1] = '\0';
		if (m.r.error < 0) {
			snprintf(err, errlen, "cluster keeper: %s", m.r.message);
			return m.r.error;
		}
		return 0;
	}
}

int cluster_keeper_spawn(const conf_cluster_t *cc, cluster_keeper_t **out, char *err, size_t errlen)
{
	int sv[2];
	*out = NULL;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		int ret = -errno;
		snprintf(err, errlen, "cluster keeper: socketpair: %s", strerror(errno));
		return ret;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int ret = -errno;
		snprintf(err, errlen, "cluster keeper: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return ret;
	}
	if (pid == 0) {
		close(sv[0]);
		keeper_main(sv[1], cc);
	}
	close(sv[1]);
	cluster_keeper_t *k = xcalloc(1, sizeof(*k));
	k->fd = sv[0];
	k->pid = pid;
	int ret = keeper_wait_setup(k, err, errlen);
	if (ret < 0) {
		close(k->fd);
		if (ret == -ETIMEDOUT)
			kill(pid, SIGKILL);
		keeper_kill(pid);
		free(k);
		return ret;
	}
	*out = k;
	return 0;
}

int cluster_keeper_fd(const cluster_keeper_t *k)
{
	return k->fd;
}

pid_t cluster_keeper_pid(const cluster_keeper_t *k)
{
	return k->pid;
}

static int keeper_send_msg(cluster_keeper_t *k, int kind, bool announce, const char *reason)
{
	keeper_msg_t m = {.magic = KEEPER_MAGIC, .kind = (uint8_t)kind, .announce = announce};
	if (reason)
		snprintf(m.reason, sizeof(m.reason), "%s", reason);
	if (send(k->fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(m))
		return 0;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return STEER_EAGAIN;
	return errno ? -errno : -EPIPE;
}

int cluster_keeper_send(cluster_keeper_t *k, bool announce, const char *reason)
{
	return keeper_send_msg(k, KEEPER_MSG_STATE, announce, reason);
}

int cluster_keeper_recv(cluster_keeper_t *k, cluster_keeper_report_t *out)
{
	for (;;) {
		keeper_report_msg_t m;
		ssize_t n = recv(k->fd, &m, sizeof(m), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return STEER_EAGAIN;
		if (n <= 0)
			return n == 0 ? -EPIPE : -errno;
		if ((size_t)n != sizeof(m) || m.magic != KEEPER_MAGIC)
			return STEER_EMALF;
		m.r.message[sizeof(m.r.message) - 1] = '\0';
		*out = m.r;
		return 0;
	}
}

void cluster_keeper_shutdown(cluster_keeper_t *k)
{
	if (!k)
		return;
	/* A full socket means the keeper is not reading; the kill below settles it then. */
	if (keeper_send_msg(k, KEEPER_MSG_EXIT, false, "shutdown") < 0) {
		close(k->fd);
		k->fd = -1;
	}
	keeper_kill(k->pid);
	if (k->fd >= 0)
		close(k->fd);
	free(k);
}
