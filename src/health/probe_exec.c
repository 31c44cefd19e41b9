/*
 * Exec probe: run a command (argv, no shell) and judge its exit status.
 *
 * Who reaps the command is the hard part. libev's default loop (the daemon's main loop)
 * installs a SIGCHLD handler that calls waitpid(-1, ...), so any ordinary child of the daemon
 * can have its exit status stolen by the main thread before the monitor thread sees it, and
 * exec() always makes a process an ordinary child (the kernel resets its exit signal to
 * SIGCHLD). Hence two processes per probe:
 *
 *   daemon --clone3(CLONE_PIDFD, exit signal 0)--> waiter --vfork+execvpe--> command
 *
 * The waiter never execs, so it keeps exit signal 0: no SIGCHLD, invisible to waitpid(-1)
 * without __WALL, reaped only by us through its pidfd (whose readability replaces ev_child,
 * which only works on the default loop). The waiter runs the command in a new process group,
 * waits for it, kills what is left of the group, and writes the command's wait status (or
 * the exec errno) into a status pipe before exiting. It is also a child subreaper, so the
 * command's own children are reaped too: no zombies whatever init is. A SIGTERM from us (or
 * from PR_SET_PDEATHSIG when the monitor thread dies) makes it SIGKILL the group first.
 *
 * The waiter is a fork of a multi-threaded process: it only makes async-signal-safe calls
 * (glibc's execvpe() does not allocate). It keeps only the descriptors it needs: the
 * command gets stdin from /dev/null, stdout and stderr into one pipe (the first bytes explain
 * a failure), default signal dispositions, an empty signal mask (the daemon ignores SIGPIPE
 * and blocks signals in its threads) and the daemon's environment plus STEER_TARGET_ADDR,
 * STEER_TARGET_PORT, STEER_TARGET_NAME and STEER_SOURCE.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "health/probe_int.h"

extern char **environ;

/* Bytes of output kept for the result detail. */
#define EXEC_OUTPUT_KEEP 120
/* How long a cancel or a timeout waits for the killed command before reaping the waiter in
 * the background. Only a process in uninterruptible sleep (a dead NFS mount) takes longer. */
#define EXEC_KILL_WAIT_MS 200
/* The status pipe's descriptor in the waiter and the command (close-on-exec there). */
#define EXEC_STATUS_FD 3

/* From the waiter or the command to the daemon: one write each, atomic (< PIPE_BUF). */
enum { EXEC_MSG_EXEC_ERRNO = 1, EXEC_MSG_SPAWN_ERRNO, EXEC_MSG_STATUS };
typedef struct {
	int32_t kind;
	int32_t value;
} exec_msg_t;

/* Everything the waiter needs, prepared before clone3 (the waiter must not allocate). */
typedef struct {
	char *const *argv;
	char *const *env;
	int out_w;
	int status_w;
	pid_t daemon_pid;
} exec_job_t;

typedef struct {
	health_probe_t base;
	health_probe_ctx_t *ctx;
	health_probe_cb cb;
	void *arg;
	uint32_t timeout_ms;
	struct timespec start;
	int pidfd;     /* the waiter's, -1 once reaped */
	int out_fd;    /* read end of the command's stdout/stderr, -1 once closed */
	int status_fd; /* read end of the status pipe */
	bool stopping; /* the waiter was told to kill the command */
	size_t out_len;
	char out[EXEC_OUTPUT_KEEP + 1];
	ev_io exit_io;
	ev_io out_io;
	ev_timer timer;
	health_probe_result_t res;
} exec_probe_t;

/* A waiter that did not end in time: reaped whenever it does. */
typedef struct {
	int pidfd;
	ev_io io;
} exec_reaper_t;

/* ---- the waiter and the command (forked: async-signal-safe calls only) ---- */

static void send_msg(int fd, int32_t kind, int32_t value)
{
	exec_msg_t m = {kind, value};
	ssize_t ignored = write(fd, &m, sizeof(m));
	(void)ignored;
}

/* Runs in the vfork() child. Never returns. */
static STEER_NORETURN void command_exec(const exec_job_t *job)
{
	setpgid(0, 0);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execvpe(job->argv[0], job->argv, job->env);
	send_msg(EXEC_STATUS_FD, EXEC_MSG_EXEC_ERRNO, errno);
	_exit(127);
}

/* stdin /dev/null, stdout and stderr the output pipe, 3 the status pipe, nothing else. */
static int waiter_fds(const exec_job_t *job)
{
	/* Moved above the target numbers first, in case the daemon runs without 0, 1 or 2. */
	int out = fcntl(job->out_w, F_DUPFD_CLOEXEC, EXEC_STATUS_FD + 1);
	int status = fcntl(job->status_w, F_DUPFD_CLOEXEC, EXEC_STATUS_FD + 1);
	int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (out < 0 || status < 0 || null_fd < 0)
		return -errno;
	if (null_fd == STDIN_FILENO)
		fcntl(STDIN_FILENO, F_SETFD, 0); /* dup2() onto itself would keep close-on-exec */
	else if (dup2(null_fd, STDIN_FILENO) < 0)
		return -errno;
	if (dup2(out, STDOUT_FILENO) < 0 || dup2(out, STDERR_FILENO) < 0 ||
	    dup3(status, EXEC_STATUS_FD, O_CLOEXEC) < 0)
		return -errno;
	/* The waiter must not keep the daemon's sockets open (a restarted daemon could not bind
	 * its ports while a probe runs); everything is close-on-exec for the command anyway. */
	syscall(SYS_close_range, EXEC_STATUS_FD + 1, ~0U, 0);
	return 0;
}

/* Waits for the command; a SIGTERM (from the daemon) kills its group first. */
static int wait_command(pid_t cmd, bool kill_now)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	for (;;) {
		if (kill_now)
			kill(-cmd, SIGKILL);
		int status;
		pid_t r = waitpid(cmd, &status, kill_now ? 0 : WNOHANG);
		if (r == cmd)
			return status;
		if (r < 0 && errno != EINTR)
			return -1;
		/* Both signals are blocked, so one that came before this call is still pending. */
		if (!kill_now && sigwaitinfo(&set, NULL) == SIGTERM)
			kill_now = true;
	}
}

/*
 * SIG_DFL for @p sig through the system call: glibc's sigaction() refuses its own signals (32
 * and 33, used for thread cancellation), but a parent may have left them ignored (sanitizer
 * runtimes do) and an ignored disposition survives exec. Fails harmlessly for KILL and STOP.
 */
static void reset_signal(int sig)
{
	struct {
		void (*handler)(int);
		unsigned long flags;
		void (*restorer)(void);
		uint64_t mask;
	} dfl = {.handler = SIG_DFL};
	(void)syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
}

static STEER_NORETURN void waiter_main(const exec_job_t *job)
{
	/* CLONE_CLEAR_SIGHAND reset the handlers; ignored signals (SIGPIPE) need this. All
	 * signals stay blocked: the waiter takes SIGCHLD and SIGTERM with sigwaitinfo(). */
	for (int sig = 1; sig < NSIG; sig++)
		reset_signal(sig);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	bool orphaned = getppid() != job->daemon_pid; /* the daemon died before the prctl */
	int ret = waiter_fds(job);
	if (ret < 0) {
		send_msg(job->status_w, EXEC_MSG_SPAWN_ERRNO, -ret);
		_exit(127);
	}
	pid_t cmd = vfork();
	if (cmd == 0)
		command_exec(job);
	if (cmd < 0) {
		send_msg(EXEC_STATUS_FD, EXEC_MSG_SPAWN_ERRNO, errno);
		_exit(127);
	}
	int status = wait_command(cmd, orphaned);
	send_msg(EXEC_STATUS_FD, EXEC_MSG_STATUS, status);
	/* Whatever the command left in its group goes too, and is reaped here (we are its
	 * subreaper); processes that left the group are inherited by init when we exit. */
	kill(-cmd, SIGKILL);
	while (waitpid(-cmd, NULL, 0) > 0)
		;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	_exit(0);
}

/* ---- the daemon side ---- */

static void reaper_on_exit(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)revents;
	exec_reaper_t *r = w->data;
	siginfo_t info = {0};
	if (waitid(P_PIDFD, (id_t)r->pidfd, &info, WEXITED | WNOHANG | __WALL) == 0 &&
	    info.si_pid == 0)
		return; /* not yet */
	ev_ref(loop);   /* balances the ev_unref() at start, as libev requires before a stop */
	ev_io_stop(loop, &r->io);
	close(r->pidfd);
	free(r);
}

/* Reaps the waiter (already told to stop) within @p wait_ms or hands it to a background
 * reaper, so a stuck command never blocks the monitor thread for long. */
static void reap_waiter(struct ev_loop *loop, int pidfd, int wait_ms)
{
	struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
	siginfo_t info;
	if (poll(&pfd, 1, wait_ms) == 1 &&
	    waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED | __WALL) == 0) {
		close(pidfd);
		return;
	}
	exec_reaper_t *r = xcalloc(1, sizeof(*r));
	r->pidfd = pidfd;
	ev_io_init(&r->io, reaper_on_exit, pidfd, EV_READ);
	r->io.data = r;
	ev_io_start(loop, &r->io);
	ev_unref(loop); /* a stuck command must not keep the loop (or a shutdown) waiting */
}

static void stop_waiter(exec_probe_t *p)
{
	if (!p->stopping)
		syscall(SYS_pidfd_send_signal, p->pidfd, SIGTERM, NULL, 0);
	p->stopping = true;
}

static void exec_probe_free(exec_probe_t *p)
{
	struct ev_loop *loop = p->ctx->loop;
	ev_io_stop(loop, &p->exit_io);
	ev_io_stop(loop, &p->out_io);
	ev_timer_stop(loop, &p->timer);
	if (p->pidfd >= 0) {
		/* After a timeout the grace period has already been waited for. */
		int wait_ms = p->stopping ? 0 : EXEC_KILL_WAIT_MS;
		stop_waiter(p);
		reap_waiter(loop, p->pidfd, wait_ms);
	}
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->status_fd >= 0)
		close(p->status_fd);
	free(p);
}

static void exec_probe_cancel(health_probe_t *self)
{
	exec_probe_free((exec_probe_t *)self);
}

static void exec_probe_finish(exec_probe_t *p)
{
	health_probe_report(&p->base, &p->res, p->cb, p->arg);
}

/* Keeps the first bytes, discards the rest so the command never blocks on a full pipe. */
static void drain_output(exec_probe_t *p)
{
	char buf[4096];
	for (;;) {
		ssize_t n = read(p->out_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			ev_io_stop(p->ctx->loop, &p->out_io);
			close(p->out_fd);
			p->out_fd = -1;
			return;
		}
		size_t keep = EXEC_OUTPUT_KEEP - p->out_len;
		if ((size_t)n < keep)
			keep = (size_t)n;
		memcpy(p->out + p->out_len, buf, keep);
		p->out_len += keep;
	}
}

static void exec_on_output(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	drain_output(w->data);
}

/* The first non-empty line of the output, control characters replaced, for the detail. */
static const char *first_line(exec_probe_t *p)
{
	p->out[p->out_len] = '\0';
	char *s = p->out + strspn(p->out, " \t\r\n");
	s[strcspn(s, "\r\n")] = '\0';
	for (char *c = s; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = ' ';
	}
	return s;
}

static void judge(exec_probe_t *p, const siginfo_t *waiter)
{
	int exec_errno = 0, spawn_errno = 0, status = -1;
	exec_msg_t m;
	while (read(p->status_fd, &m, sizeof(m)) == (ssize_t)sizeof(m)) {
		if (m.kind == EXEC_MSG_EXEC_ERRNO)
			exec_errno = m.value;
		else if (m.kind == EXEC_MSG_SPAWN_ERRNO)
			spawn_errno = m.value;
		else if (m.kind == EXEC_MSG_STATUS)
			status = m.value;
	}
	const char *line = first_line(p);
	const char *sep = *line ? ": " : "";
	if (exec_errno)
		health_probe_result_set(&p->res, false, p->start, "exec: %s", strerror(exec_errno));
	else if (spawn_errno)
		health_probe_result_set(&p->res, false, p->start, "spawn: %s",
		                        strerror(spawn_errno));
	else if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		health_probe_result_set(&p->res, true, p->start, "exit status 0");
	else if (status != -1 && WIFEXITED(status))
		health_probe_result_set(&p->res, false, p->start, "exit status %d%s%s",
		                        WEXITSTATUS(status), sep, line);
	else if (status != -1 && WIFSIGNALED(status))
		health_probe_result_set(&p->res, false, p->start, "killed by signal %d%s%s",
		                        WTERMSIG(status), sep, line);
	else
		health_probe_result_set(&p->res, false, p->start,
		                        "exec waiter ended without a status (code %d, status %d)",
		                        waiter->si_code, waiter->si_status);
}

static void exec_on_exit(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	exec_probe_t *p = w->data;
	siginfo_t info = {0};
	if (waitid(P_PIDFD, (id_t)p->pidfd, &info, WEXITED | WNOHANG | __WALL) != 0) {
		health_probe_result_set(&p->res, false, p->start, "waitid: %s", strerror(errno));
		exec_probe_finish(p);
		return;
	}
	if (info.si_pid == 0)
		return; /* spurious wakeup */
	close(p->pidfd);
	p->pidfd = -1;
	if (p->out_fd >= 0)
		drain_output(p); /* what the command wrote just before exiting */
	if (!p->stopping)
		judge(p, &info);
	exec_probe_finish(p);
}

static void exec_on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	exec_probe_t *p = w->data;
	if (p->stopping) {
		exec_probe_finish(p); /* the grace period is over: reap in the background */
		return;
	}
	health_probe_result_set(&p->res, false, p->start, "timeout after %u ms, killed",
	                        p->timeout_ms);
	/* Report once the waiter has killed and reaped the command, so it is really gone. */
	stop_waiter(p);
	ev_timer_set(&p->timer, EXEC_KILL_WAIT_MS / 1000.0, 0.);
	ev_timer_start(loop, &p->timer);
}

/* Entries build_env() adds, which it owns: the last ones of the array. */
#define ENV_OWNED 4

/* The daemon's environment without inherited STEER_TARGET_* and STEER_SOURCE, plus the
 * target's and the source's. */
static char **build_env(const health_probe_req_t *req)
{
	size_t n = 0;
	while (environ && environ[n])
		n++;
	char **env = xcalloc(n + ENV_OWNED + 1, sizeof(*env));
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(environ[i], "STEER_TARGET_", 13) != 0 &&
		    strncmp(environ[i], "STEER_SOURCE=", 13) != 0)
			env[k++] = environ[i];
	}
	char addr[INET6_ADDRSTRLEN] = "";
	const void *raw = req->dst.sa.sa_family == AF_INET6 ? (const void *)&req->dst.sin6.sin6_addr
	                                                    : (const void *)&req->dst.sin.sin_addr;
	inet_ntop(req->dst.sa.sa_family, raw, addr, sizeof(addr));
	char port[8];
	snprintf(port, sizeof(port), "%u", steer_sockaddr_port(&req->dst));
	env[k++] = xstrcat3("STEER_TARGET_ADDR", "=", addr);
	env[k++] = xstrcat3("STEER_TARGET_PORT", "=", port);
	env[k++] = xstrcat3("STEER_TARGET_NAME", "=", req->target_name ? req->target_name : "");
	char source[INET6_ADDRSTRLEN];
	env[k++] =
	    xstrcat3("STEER_SOURCE", "=", health_probe_source_text(req, source, sizeof(source)));
	env[k] = NULL;
	return env;
}

static void free_env(char **env)
{
	size_t n = 0;
	while (env[n])
		n++;
	for (size_t i = n - ENV_OWNED; i < n; i++)
		free(env[i]);
	free(env);
}

/*
 * A fork with a pidfd and no exit signal; returns the pid (0 in the child) or -errno. The
 * caller blocks every signal around it, so no inherited handler can run before the waiter
 * resets them; CLONE_CLEAR_SIGHAND only makes that belt and braces.
 */
static pid_t clone_waiter(int *pidfd)
{
	struct clone_args args = {
	    .flags = CLONE_PIDFD | CLONE_CLEAR_SIGHAND,
	    .pidfd = (uint64_t)(uintptr_t)pidfd,
	    .exit_signal = 0,
	};
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	/* Container seccomp profiles (Docker's default) still answer ENOSYS to clone3 so that
	 * libc falls back to clone(2), which takes CLONE_PIDFD too (pidfd at parent_tid), and
	 * the exit signal in its low byte: 0. */
	if (pid < 0 && errno == ENOSYS)
		pid = syscall(SYS_clone, (unsigned long)CLONE_PIDFD, NULL, pidfd, NULL, 0UL);
	return pid < 0 ? -errno : (pid_t)pid;
}

static int spawn(exec_probe_t *p, const health_probe_req_t *req, char *err, size_t errlen)
{
	int out[2], status[2];
	if (pipe2(out, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -errno;
	}
	if (pipe2(status, O_CLOEXEC) != 0) {
		int ret = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		close(out[0]);
		close(out[1]);
		return ret;
	}
	char **env = build_env(req);
	exec_job_t job = {.argv = req->spec->argv,
	                  .env = env,
	                  .out_w = out[1],
	                  .status_w = status[1],
	                  .daemon_pid = getpid()};
	/* No handler of the daemon may run in the waiter before it resets them. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = clone_waiter(&p->pidfd);
	if (pid == 0)
		waiter_main(&job);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	free_env(env);
	close(out[1]);
	close(status[1]);
	if (pid < 0) {
		snprintf(err, errlen, "clone3: %s", strerror(-pid));
		close(out[0]);
		close(status[0]);
		return pid;
	}
	p->out_fd = out[0];
	p->status_fd = status[0];
	fcntl(p->out_fd, F_SETFL, O_NONBLOCK);
	fcntl(p->status_fd, F_SETFL, O_NONBLOCK);
	return 0;
}

int health_probe_exec_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                            health_probe_t **out, char *err, size_t errlen)
{
	char *const *argv = req->spec->argv;
	if (!argv || !argv[0] || !argv[0][0]) {
		snprintf(err, errlen, "exec probe without a command");
		return STEER_EINVAL;
	}
	exec_probe_t *p = xcalloc(1, sizeof(*p));
	*p = (exec_probe_t){.base.cancel = exec_probe_cancel,
	                    .ctx = ctx,
	                    .cb = req->cb,
	                    .arg = req->arg,
	                    .timeout_ms = req->timeout_ms,
	                    .start = health_probe_now(),
	                    .pidfd = -1,
	                    .out_fd = -1,
	                    .status_fd = -1};
	int ret = spawn(p, req, err, errlen);
	if (ret != 0) {
		free(p);
		return ret;
	}
	ev_io_init(&p->exit_io, exec_on_exit, p->pidfd, EV_READ);
	p->exit_io.data = p;
	ev_io_init(&p->out_io, exec_on_output, p->out_fd, EV_READ);
	p->out_io.data = p;
	/* The loop's cached time can lag (a long callback before us): the timeout counts from now.
	 */
	ev_now_update(ctx->loop);
	ev_timer_init(&p->timer, exec_on_timer, req->timeout_ms / 1000.0, 0.);
	p->timer.data = p;
	ev_io_start(ctx->loop, &p->exit_io);
	ev_io_start(ctx->loop, &p->out_io);
	ev_timer_start(ctx->loop, &p->timer);
	*out = &p->base;
	return 0;
}
