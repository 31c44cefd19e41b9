/*
 * The daemon's life cycle: configuration (file or command line), zone loading, binding,
 * privilege drop, the query threads, the control thread's event loop (signals, control
 * socket) and reload. Everything here runs on the control thread (the main thread); query
 * threads only see what net_publish() hands them.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <ev.h>

#include "auth/auth.h"
#include "base/compiler.h"
#include "base/log.h"
#include "base/warnings.h"
#include "conf/conf.h"
#include "ctl/commands.h"
#include "ctl/ctl.h"
#include "ctl/http.h"
#include "daemon/events.h"
#include "daemon/hardening.h"
#include "daemon/metrics.h"
#include "daemon/monitors.h"
#include "daemon/node.h"
#include "daemon/snapshots.h"
#include "fwd/engine.h"
#include "gslb/admin.h"
#include "gslb/view.h"
#include "net/net.h"
#include "ops/alerts.h"
#include "tap/tap.h"
#include "zone/zone_set.h"

/* Room for the errors of one load or reload: one "file:line: message" line per bad zone. */
#define SERVER_ERR_MAX 4096

/* What the command line asks for. Strings are borrowed from argv. */
typedef struct {
	const char *config_path; /* -c FILE; NULL = quick mode from listen/zones */
	const char **listen;     /* --listen, quick mode */
	size_t n_listen;
	const char **zones; /* --zone NAME=FILE, quick mode */
	size_t n_zones;
	const char **forward; /* --forward ADDR[:PORT][@SRC], quick mode, in preference order */
	size_t n_forward;
	const char **allow_recursion; /* --allow-recursion PREFIX, quick mode */
	size_t n_allow_recursion;
	const char **http; /* --http ADDR:PORT, quick mode: the HTTP API, /metrics, status page */
	size_t n_http;
	/* Overrides, applied on top of the file as well, and again on every reload. */
	const char *control_socket; /* NULL = from the config */
	bool has_log_level;
	log_level_t log_level;
	long workers; /* -1 = from the config */
	long tcp_workers;
	bool force; /* --force: at start-up, accept nets files that shrank since the last
	             * accepted load (gslb.nets-state-file); reloads have steerctl reload --force */
} server_opts_t;

/* What a successful zone build or reload did. */
typedef struct {
	char **loaded; /* names of the zones read from their files (new or changed); owned */
	size_t n_loaded;
	size_t n_unchanged;        /* zones kept from the running set */
	char restart[512];         /* comma-separated settings that only apply on restart */
	steer_warnings_t warnings; /* what the operator must see though the build succeeded
	                            * (nets guards, duplicate prefixes); owned */
} server_report_t;

typedef struct {
	time_t at; /* 0 = never reloaded */
	bool ok;
	char error[SERVER_ERR_MAX];
	uint64_t count;    /* reloads attempted */
	uint64_t failures; /* ... that failed */
} server_reload_status_t;

typedef struct server {
	server_opts_t opts;
	conf_t *boot_conf;    /* the configuration the process started with; owned */
	conf_t *conf;         /* the current one (after reloads); owned, may be boot_conf */
	net_view_t *view;     /* published to the query threads; owned with its zone set */
	gslb_view_t *gslb;    /* the GSLB view of @c conf (never NULL once started); owned.
	                       * view->gslb points to it when it has names, else is NULL */
	net_t *net;           /* owned */
	fwd_engine_t *fwd;    /* the caching forwarder; NULL when `forward:` has no groups */
	ctl_server_t *ctl;    /* NULL when the control socket could not be created (quick mode) */
	ctl_http_t *http;     /* the HTTP front end; NULL when `http.listen` is empty */
	struct ev_loop *loop; /* libev default loop of the control thread */
	uid_t uid;            /* target of the privilege drop, valid when @c drop */
	gid_t gid;
	bool drop;
	bool pid_written;
	time_t started_at;
	server_reload_status_t last_reload;
	/*
	 * Admin overrides set at run time (steerctl override), applied on top of the config's.
	 * Saved to gslb.state-file when there is one (and read back from it at start and on
	 * reload); without one they last until the process exits, across reloads.
	 */
	gslb_admin_t admin;
	ev_timer expiry_w;     /* fires when the admin's next timed override lapses */
	ev_timer steer_w;      /* re-derives the view while load hysteresis counts rounds */
	ctl_backend_t backend; /* what the control socket serves (daemon/commands.c) */
	/* Health monitors, on the control loop: the engine runs the checks of @c plan, whose
	 * results are folded into the GSLB health table once per loop iteration (publish_w). */
	health_engine_t *engine;
	monitor_plan_t *plan;
	ev_prepare publish_w;
	bool health_dirty;     /* a check changed since the last publish */
	node_t node;           /* the cluster node: keeper and self-check (cluster: section) */
	events_t events;       /* state changes: log lines, the ring of `steerctl events`, alerts */
	alerts_t *alerts;      /* the alert destinations; NULL without `alerts:` */
	snapshots_t snapshots; /* stats-snapshots: */
	tap_t *tap;            /* the dnstap log (daemon/tap.c); NULL when off */
	struct decisions *decisions; /* the GSLB decision log (daemon/decisions.c); NULL = off */
	metrics_t metrics;   /* what /metrics keeps between scrapes (answers of replaced views) */
	struct paths *paths; /* measured paths: agent tables and demand (daemon/paths.c) */
	/* RRL table and cookie secret kept across reloads (daemon/hardening.c) */
	hardening_t hardening;
} server_t;

/**
 * Build the configuration @p opts describe: the config file (or defaults plus the quick-mode
 * listen addresses and zones), the command-line overrides, then conf_validate(). The same
 * function serves start-up, --check-config and reload. Returns 0, or a negative steer_err
 * with "file:line: message" (or a command-line error) in @p err.
 */
int server_conf_build(const server_opts_t *opts, conf_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Build the zone set of @p conf. A zone whose domain and file match one of @p old (may be
 * NULL) and whose file did not change is shared by reference; the others are loaded. Every
 * zone is tried, so that all errors are reported at once, one "file:line: message" per line in
 * @p err. Fills @p report (release with server_report_clear()). Returns 0 or a negative
 * steer_err; on error nothing is kept.
 */
int server_zones_build(const conf_t *conf, const zone_set_t *old, zone_set_t **out,
                       server_report_t *report, char *err, size_t errlen)
    STEER_NONNULL(1, 3, 4, 5) STEER_WUR;

/**
 * Build the GSLB view of @p conf (gslb_view_build() with @p opts, NULL at start-up, and the
 * errors as one "file:line: message" in @p err; warnings appended to @p warnings, may be NULL).
 * The same function serves start-up, --check-config and reload. Returns 0 or a negative
 * steer_err.
 */
int server_gslb_build(const conf_t *conf, const gslb_view_build_opts_t *opts, gslb_view_t **out,
                      steer_warnings_t *warnings, char *err, size_t errlen)
    STEER_NONNULL(1, 3, 5) STEER_WUR;

/**
 * Rebuild the zone set with the current versions of the secondary zones (the others are
 * shared) and publish it with the running configuration and GSLB view; on error (a GSLB name
 * no longer in its zone) the running set stays and the error is logged. Control thread.
 */
void server_zones_republish(server_t *server) STEER_NONNULL(1);

/** Free what a report owns and empty it. */
void server_report_clear(server_report_t *report) STEER_NONNULL(1);

/**
 * Set up the daemon from @p conf (taken over): load zones, bind sockets, write the pid file,
 * create the control socket, drop privileges, start the query threads, log what is served.
 * Returns 0, or a negative steer_err after logging why (the caller exits non-zero).
 */
int server_start(server_t *server, const server_opts_t *opts, conf_t *conf)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Publish the monitor results not yet folded into the health table (the loop does it before
 * it sleeps; control commands call this first so that what they report is already served).
 */
void server_health_flush(server_t *server) STEER_NONNULL(1);

/** Run the control thread's loop until SIGTERM or SIGINT. */
void server_run(server_t *server) STEER_NONNULL(1);

/**
 * Reload: rebuild the configuration, the zone set (re-reading changed zone files only) and the
 * GSLB view, and publish them without stopping the query threads. On any error the running
 * configuration, zones and GSLB view stay, the error is logged and returned in @p err. The
 * nets guards compare with the running view; @p force (steerctl reload --force, never SIGHUP)
 * accepts nets files that shrank beyond max-shrink. Settings that need a restart and the
 * build's warnings (each also logged once) are reported in @p report. Returns 0 or a negative
 * steer_err.
 */
int server_reload(server_t *server, bool force, server_report_t *report, char *err, size_t errlen)
    STEER_NONNULL(1, 3, 4);

/**
 * Apply the admin's override change @p req (gslb_admin_change(): saved to the state file when
 * one is configured) and publish the GSLB view with the new health table (maps and services
 * are shared, not rebuilt). @p res says how many targets the pattern matches now and what a
 * clear dropped. On error nothing changes and @p err says why (bad pattern, unknown pattern to
 * clear, a weight on a policy that ignores weights, state file not writable). Returns 0 or a
 * negative steer_err.
 */
int server_override(server_t *server, const gslb_admin_req_t *req, gslb_admin_result_t *res,
                    char *err, size_t errlen) STEER_NONNULL(1, 2, 3, 4);

/**
 * Serve a GSLB view like the running one but steering by @p paths (a reference is taken;
 * NULL = none), sharing everything else. Control thread (daemon/paths.c after a merge).
 */
void server_publish_paths(server_t *server, gslb_paths_t *paths) STEER_NONNULL(1);

/** The wall clock in ms since the epoch: what timed overrides expire by (they survive a
 *  restart, so they cannot use the monotonic clock). */
int64_t server_wall_ms(void);

/**
 * Stop the query threads, close the control socket, remove the pid file and free everything.
 * Safe after a failed server_start().
 */
void server_stop(server_t *server) STEER_NONNULL(1);
