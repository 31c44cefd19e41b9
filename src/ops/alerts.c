/*
 * Alert delivery (see alerts.h): the destinations' queues, attempts with backoff, counters,
 * and the exec hooks. Webhook transfers live in alerts_webhook.c. Control thread only.
 */
#include "ops/alerts.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "ops/alerts_int.h"

extern char **environ;

/* The first retry waits this long, each further one twice as long as the one before. */
#define ALERTS_BACKOFF_FIRST_S 1.0
/* ... but never more than this, however many retries are configured. */
#define ALERTS_BACKOFF_MAX_S 300.0

/* ---- the event as JSON and environment ------------------------------------------------- */

static void iso_time(double t, char *buf, size_t len)
{
	time_t sec = (time_t)t;
	struct tm tm;
	int ms = (int)((t - (double)sec) * 1000.0);
	if (gmtime_r(&sec, &tm) == NULL)
		memset(&tm, 0, sizeof(tm));
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03dZ", ms < 0 ? 0 : ms > 999 ? 999 : ms);
}

json_t *alerts_event_json(const alert_event_t *ev, const char *node)
{
	char iso[40];
	iso_time(ev->time, iso, sizeof(iso));
	return json_pack("{s:I, s:f, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "seq",
	                 (json_int_t)ev->seq, "time", ev->time, "timestamp", iso, "kind", ev->kind,
	                 "subject", ev->subject, "from", ev->from, "to", ev->to, "reason",
	                 ev->reason, "node", node);
}

/* The event's variables, set for the command on top of the daemon's environment. */
static char **event_env(const alert_event_t *ev, const char *node)
{
	char seq[24], iso[40];
	snprintf(seq, sizeof(seq), "%llu", (unsigned long long)ev->seq);
	iso_time(ev->time, iso, sizeof(iso));
	const char *kv[][2] = {
	    {"STEER_EVENT_KIND", ev->kind},     {"STEER_EVENT_SUBJECT", ev->subject},
	    {"STEER_EVENT_FROM", ev->from},     {"STEER_EVENT_TO", ev->to},
	    {"STEER_EVENT_REASON", ev->reason}, {"STEER_EVENT_TIME", iso},
	    {"STEER_EVENT_SEQ", seq},           {"STEER_EVENT_NODE", node},
	};
	char **env = xcalloc(STEER_ARRAY_LEN(kv) + 1, sizeof(*env));
	for (size_t i = 0; i < STEER_ARRAY_LEN(kv); i++)
		env[i] = xstrcat3(kv[i][0], "=", kv[i][1]);
	return env;
}

static alert_item_t *item_new(const alert_event_t *ev, const char *node, bool want_json,
                              bool want_env)
{
	alert_item_t *item = xcalloc(1, sizeof(*item));
	item->seq = ev->seq;
	snprintf(item->subject, sizeof(item->subject), "%s", ev->subject);
	if (want_json) {
		json_t *j = alerts_event_json(ev, node);
		item->json = json_dumps(j, JSON_COMPACT);
		json_decref(j);
		if (item->json == NULL)
			item->json = xstrdup("{}");
	}
	if (want_env)
		item->env = event_env(ev, node);
	return item;
}

static void item_free(alert_item_t *item)
{
	if (item == NULL)
		return;
	free(item->json);
	for (char **e = item->env; e && *e; e++)
		free(*e);
	free(item->env);
	free(item);
}

/* ---- queue and attempts ---------------------------------------------------------------- */

static void dest_kick(alert_dest_t *d);

static const char *dest_type(const alert_dest_t *d)
{
	return d->is_exec ? "exec" : "webhook";
}

static void queue_pop(alert_dest_t *d)
{
	item_free(d->queue[d->head]);
	d->queue[d->head] = NULL;
	d->head = (d->head + 1) % ALERTS_QUEUE_MAX;
	d->count--;
	d->attempts = 0;
}

/* Full: the oldest event not in flight makes room (the head, unless an attempt runs). */
static void queue_push(alert_dest_t *d, alert_item_t *item)
{
	if (d->count == ALERTS_QUEUE_MAX) {
		size_t victim = (d->busy || ev_is_active(&d->backoff_w)) ? 1 : 0;
		size_t at = (d->head + victim) % ALERTS_QUEUE_MAX;
		alert_item_t *old = d->queue[at];
		log_warn("alert %s %s: queue full (%d events), dropping event %llu (%s)",
		         dest_type(d), d->target, ALERTS_QUEUE_MAX, (unsigned long long)old->seq,
		         old->subject);
		item_free(old);
		for (size_t i = victim; i + 1 < d->count; i++)
			d->queue[(d->head + i) % ALERTS_QUEUE_MAX] =
			    d->queue[(d->head + i + 1) % ALERTS_QUEUE_MAX];
		d->count--;
		d->dropped++;
		if (victim == 0)
			d->attempts = 0;
	}
	d->queue[(d->head + d->count) % ALERTS_QUEUE_MAX] = item;
	d->count++;
}

static void on_backoff(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	dest_kick(w->data);
}

static double backoff_s(unsigned failed_attempts)
{
	double s = ALERTS_BACKOFF_FIRST_S;
	for (unsigned i = 1; i < failed_attempts && s < ALERTS_BACKOFF_MAX_S; i++)
		s *= 2;
	return s < ALERTS_BACKOFF_MAX_S ? s : ALERTS_BACKOFF_MAX_S;
}

void alert_attempt_done(alert_dest_t *d, bool ok, const char *detail)
{
	d->busy = false;
	const alert_item_t *item = d->queue[d->head];
	if (ok) {
		d->sent++;
		log_debug("alert %s %s: event %llu delivered (%s)", dest_type(d), d->target,
		          (unsigned long long)item->seq, detail);
		queue_pop(d);
		dest_kick(d);
		return;
	}
	d->failures++;
	if (d->attempts > d->retries) {
		d->given_up++;
		log_err("alert %s %s: event %llu (%s) not delivered after %u attempt(s): %s",
		        dest_type(d), d->target, (unsigned long long)item->seq, item->subject,
		        d->attempts, detail);
		queue_pop(d);
		dest_kick(d);
		return;
	}
	double wait = backoff_s(d->attempts);
	log_warn("alert %s %s: event %llu attempt %u failed: %s; retrying in %.0f s", dest_type(d),
	         d->target, (unsigned long long)item->seq, d->attempts, detail, wait);
	ev_timer_set(&d->backoff_w, wait, 0.);
	ev_timer_start(d->owner->loop, &d->backoff_w);
}

/* ---- exec ------------------------------------------------------------------------------ */

/* The daemon's environment without inherited STEER_EVENT_*, then the event's. */
static char **spawn_env(const alert_item_t *item)
{
	size_t n = 0, k = 0, extra = 0;
	while (environ && environ[n])
		n++;
	while (item->env[extra])
		extra++;
	char **env = xcalloc(n + extra + 1, sizeof(*env));
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "STEER_EVENT_", 12) != 0)
			env[k++] = environ[i];
	for (size_t i = 0; i < extra; i++)
		env[k++] = item->env[i];
	return env; /* the strings are borrowed: free the array only */
}

/*
 * stdin and stdout /dev/null, stderr the daemon's (a hook's complaints reach its log), no
 * other descriptor; default signal dispositions and an empty mask (the daemon ignores SIGPIPE
 * and blocks signals in its threads); its own process group, so a timeout kills all of it.
 */
static int spawn_command(alert_dest_t *d, const alert_item_t *item, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
	                                    POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	char **env = spawn_env(item);
	int rc = posix_spawn(pid, d->argv[0], &fa, &attr, d->argv, env);
	free(env);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

/*
 * SIGKILL the command's process group, but only while the command is not reaped: until then
 * its pid, and so the group id, cannot belong to anybody else. libev's SIGCHLD handler may
 * have reaped it in this loop iteration already (on_child() is then pending): WNOWAIT asks
 * without reaping.
 */
static void kill_group(pid_t pid)
{
	siginfo_t info;
	if (pid > 0 && waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0)
		kill(-pid, SIGKILL);
}

static void on_child(struct ev_loop *loop, ev_child *w, int revents)
{
	(void)revents;
	alert_dest_t *d = w->data;
	ev_child_stop(loop, w);
	ev_timer_stop(loop, &d->kill_w);
	int status = w->rstatus;
	d->pid = 0;
	char detail[96];
	bool ok = false;
	if (d->timed_out)
		snprintf(detail, sizeof(detail), "timeout after %u ms, killed", d->timeout_ms);
	else if ((ok = WIFEXITED(status) && WEXITSTATUS(status) == 0))
		snprintf(detail, sizeof(detail), "exit status 0");
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		snprintf(detail, sizeof(detail), "exit status 127 (command not found or not run)");
	else if (WIFEXITED(status))
		snprintf(detail, sizeof(detail), "exit status %d", WEXITSTATUS(status));
	else
		snprintf(detail, sizeof(detail), "killed by signal %d", WTERMSIG(status));
	alert_attempt_done(d, ok, detail);
}

static void on_kill(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	alert_dest_t *d = w->data;
	d->timed_out = true;
	kill_group(d->pid); /* on_child() reports once it is reaped */
}

static void exec_start(alert_dest_t *d)
{
	pid_t pid = 0;
	d->timed_out = false;
	int rc = spawn_command(d, d->queue[d->head], &pid);
	if (rc != 0) {
		char detail[160];
		snprintf(detail, sizeof(detail), "cannot run %s: %s", d->argv[0], strerror(rc));
		alert_attempt_done(d, false, detail);
		return;
	}
	d->pid = pid;
	/* the loop reaps children (SIGCHLD) only in its next iteration: no status is lost */
	ev_child_set(&d->child_w, pid, 0);
	ev_child_start(d->owner->loop, &d->child_w);
	ev_timer_set(&d->kill_w, d->timeout_ms / 1000.0, 0.);
	ev_timer_start(d->owner->loop, &d->kill_w);
}

static void dest_kick(alert_dest_t *d)
{
	if (d->busy || d->count == 0 || ev_is_active(&d->backoff_w))
		return;
	d->busy = true;
	d->attempts++;
	if (d->is_exec)
		exec_start(d);
	else
		alert_webhook_start(d);
}

/* ---- destinations ---------------------------------------------------------------------- */

static int dest_init(alerts_t *a, alert_dest_t *d, const alert_dest_def_t *def, char *err,
                     size_t errlen)
{
	d->owner = a;
	d->timeout_ms = def->timeout_ms ? def->timeout_ms : 5000;
	d->retries = def->retries;
	ev_timer_init(&d->backoff_w, on_backoff, 0., 0.);
	d->backoff_w.data = d;
	ev_timer_init(&d->kill_w, on_kill, 0., 0.);
	d->kill_w.data = d;
	ev_child_init(&d->child_w, on_child, 0, 0);
	d->child_w.data = d;
	if ((def->webhook == NULL) == (def->exec == NULL)) {
		snprintf(err, errlen, "an alert needs exactly one of webhook and exec");
		return STEER_EINVAL;
	}
	if (def->webhook) {
		d->target = xstrdup(def->webhook);
		if (strncmp(d->target, "http://", 7) != 0 &&
		    strncmp(d->target, "https://", 8) != 0) {
			snprintf(err, errlen, "alert webhook '%s': want an http:// or https:// URL",
			         d->target);
			return STEER_EINVAL;
		}
		return 0;
	}
	d->is_exec = true;
	d->target = xstrdup(def->exec);
	d->argv = xcalloc(2, sizeof(*d->argv));
	d->argv[0] = xstrdup(def->exec);
	if (d->argv[0][0] != '/') {
		snprintf(err, errlen, "alert exec '%s': want an absolute path", def->exec);
		return STEER_EINVAL;
	}
	return 0;
}

int alerts_new(struct ev_loop *loop, const alert_dest_def_t *defs, size_t n, const char *node,
               alerts_t **out, char *err, size_t errlen)
{
	if (!ev_is_default_loop(loop)) {
		snprintf(err, errlen, "alerts: exec hooks need the default loop (ev_child)");
		return STEER_EINVAL;
	}
	alerts_t *a = xcalloc(1, sizeof(*a));
	a->loop = loop;
	a->node = xstrdup(node);
	a->dests = xcalloc(n ? n : 1, sizeof(*a->dests));
	int ret = 0;
	for (size_t i = 0; i < n && ret == 0; i++) {
		ret = dest_init(a, &a->dests[i], &defs[i], err, errlen);
		a->n_dests = i + 1;
		if (ret == 0 && !a->dests[i].is_exec && a->http == NULL)
			ret = alert_http_new(loop, &a->http, err, errlen);
	}
	if (ret != 0) {
		alerts_free(a);
		return ret;
	}
	*out = a;
	return 0;
}

void alerts_send(alerts_t *a, const alert_event_t *ev)
{
	/* one copy per destination: each pops its own when done */
	for (size_t i = 0; i < a->n_dests; i++) {
		alert_dest_t *d = &a->dests[i];
		queue_push(d, item_new(ev, a->node, !d->is_exec, d->is_exec));
		dest_kick(d);
	}
}

static json_t *counters_json(uint64_t sent, uint64_t failures, uint64_t given_up, uint64_t dropped,
                             uint64_t queued)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I}", "sent", (json_int_t)sent, "failures",
	                 (json_int_t)failures, "given_up", (json_int_t)given_up, "dropped",
	                 (json_int_t)dropped, "queued", (json_int_t)queued);
}

json_t *alerts_stats_json(const alerts_t *a)
{
	uint64_t sent = 0, failures = 0, given_up = 0, dropped = 0, queued = 0;
	json_t *list = json_array();
	for (size_t i = 0; i < a->n_dests; i++) {
		const alert_dest_t *d = &a->dests[i];
		json_t *row =
		    counters_json(d->sent, d->failures, d->given_up, d->dropped, d->count);
		json_object_set_new(row, "type", json_string(dest_type(d)));
		json_object_set_new(row, "target", json_string(d->target));
		json_array_append_new(list, row);
		sent += d->sent;
		failures += d->failures;
		given_up += d->given_up;
		dropped += d->dropped;
		queued += d->count;
	}
	json_t *all = counters_json(sent, failures, given_up, dropped, queued);
	json_object_set_new(all, "destinations", list);
	return all;
}

static void dest_deinit(alerts_t *a, alert_dest_t *d)
{
	ev_timer_stop(a->loop, &d->backoff_w);
	ev_timer_stop(a->loop, &d->kill_w);
	ev_child_stop(a->loop, &d->child_w);
	kill_group(d->pid); /* the loop's SIGCHLD handler reaps it */
	if (a->http)
		alert_webhook_cancel(d);
	if (d->count > 0)
		log_warn("alert %s %s: %zu undelivered event(s) dropped at shutdown", dest_type(d),
		         d->target ? d->target : "?", d->count);
	while (d->count > 0)
		queue_pop(d);
	free(d->target);
	for (char **p = d->argv; p && *p; p++)
		free(*p);
	free(d->argv);
}

void alerts_free(alerts_t *a)
{
	if (a == NULL)
		return;
	for (size_t i = 0; i < a->n_dests; i++)
		dest_deinit(a, &a->dests[i]);
	alert_http_free(a->http);
	free(a->dests);
	free(a->node);
	free(a);
}
