/*
 * sd_notify(3) messages and the watchdog timer; see notify.h. Runs on the control thread only.
 */
#include "daemon/notify.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "base/log.h"

/* STATUS= is one line for `systemctl status`; longer errors are in the log. */
#define STATUS_MAX 512

static ev_timer watchdog_w;
static bool watchdog_on;

/* Failures only go to the debug log: a lost notification must not stop the server, and
 * systemd itself reports a missing READY or watchdog ping. */
static void notify_send(const char *msg)
{
	int ret = sd_notify(0, msg);
	if (ret < 0)
		log_debug("sd_notify: %s", strerror(-ret));
}

static void on_watchdog(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	notify_send("WATCHDOG=1");
}

void notify_watchdog_start(struct ev_loop *loop)
{
	uint64_t usec = 0;
	if (watchdog_on || sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return;
	/* Half the period, as sd_watchdog_enabled(3) advises: one late tick is not a restart. */
	double every = (double)usec / 2e6;
	ev_timer_init(&watchdog_w, on_watchdog, every, every);
	ev_timer_start(loop, &watchdog_w);
	watchdog_on = true;
	log_info("systemd watchdog: pinging every %.3fs", every);
	notify_send("WATCHDOG=1");
}

void notify_watchdog_stop(struct ev_loop *loop)
{
	if (!watchdog_on)
		return;
	ev_timer_stop(loop, &watchdog_w);
	watchdog_on = false;
}

/* @p text up to its first newline, so that STATUS= stays one line. */
static void first_line(const char *text, char *out, size_t size)
{
	size_t n = strcspn(text, "\n");
	snprintf(out, size, "%.*s", (int)n, text);
}

void notify_ready(const char *status)
{
	char line[STATUS_MAX], msg[STATUS_MAX + 32];
	first_line(status, line, sizeof(line));
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", line);
	notify_send(msg);
}

void notify_reloading(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	char msg[96];
	snprintf(msg, sizeof(msg), "RELOADING=1\nSTATUS=reloading\nMONOTONIC_USEC=%llu",
	         (unsigned long long)now.tv_sec * 1000000ull +
	             (unsigned long long)now.tv_nsec / 1000ull);
	notify_send(msg);
}

void notify_reloaded(bool ok, const char *status, const char *error)
{
	if (ok) {
		notify_ready(status);
		return;
	}
	char line[STATUS_MAX], text[STATUS_MAX + 32];
	first_line(error ? error : "unknown error", line, sizeof(line));
	snprintf(text, sizeof(text), "reload failed: %s", line);
	notify_ready(text);
}

void notify_stopping(void)
{
	notify_send("STOPPING=1\nSTATUS=stopping");
}
