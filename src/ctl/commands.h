/*
 * The control commands as data: one table row per command (name, optional sub-command, usage,
 * argument count, whether it changes the server, handler) and one dispatcher that every front
 * end calls, the UNIX control socket today (ctl_dispatch_cb() as its ctl_handler_cb) and any
 * later one (an HTTP API) alike. Rows only check and parse arguments; what a command does is
 * up to the backend, a table of functions the daemon implements. Nothing here knows a
 * transport or the daemon's state.
 *
 * Commands, their arguments and the backend function each one calls:
 *
 *   status                        backend status()     daemon version, uptime, threads, listen
 *   zones                         backend zones()      served zones
 *   reload [--force]              backend reload()     re-read configuration and changed zones
 *                                                      (--force: accept shrunk nets files)
 *   stats                         backend stats()      query counters
 *   explain NAME CLIENT-IP [ECS]  backend explain()    the GSLB decision for a client, and why
 *   health [PATTERN]              backend health()     GSLB targets (names matching PATTERN)
 *   monitors [PATTERN]            backend monitors()   checks (keys or monitors matching PATTERN)
 *   maps                          backend maps()       GSLB maps, their nets files and guards
 *   override list                 backend override_list()
 *   override set PATTERN up|down [FOR]   backend override()   force targets up or down
 *                                                      (for a while: FOR, e.g. 30m)
 *   override clear PATTERN        backend override()   drop the admin's state and weight rules
 *   override weight PATTERN N|default [FOR]   backend override()   set or drop a weight rule
 *   upstreams [PATTERN]           backend upstreams()  forwarder upstreams (names matching
 *                                                      PATTERN): state, counters, RTT
 *   cache                         backend cache()      forwarder cache and engine counters
 *   cache flush [NAME]            backend cache_flush() drop the cached answers of NAME and
 *                                                      every name below it; no NAME: all
 *   cluster                       backend cluster()    the node's announcement, self-check,
 *                                                      drain and keeper state
 *   cluster health                backend cluster_health() whether the node wants to be
 *                                                      announced (steerctl's exit status)
 *   cluster bird-config [OPT=V..] backend cluster_config() a BIRD or FRR configuration for
 *   cluster frr-config [OPT=V..]                       this node (bgp or ospf, peer, ASNs)
 *   cluster notify STATE          backend cluster_notify() keepalived's VRRP state (notify hook)
 *   drain [TIMEOUT]               backend drain()      withdraw and wait for queries to stop
 *   undrain                       backend undrain()    announce again after a drain
 *   paths [PREFIX|ADDRESS]        backend paths()      measured paths: each agent's table
 *                                                      state; with a prefix its row (RTT,
 *                                                      loss, hops, age per datacenter, the
 *                                                      sticky best) and its demand
 *   events [N] [since=SEQ]        backend events()     the last state changes, oldest first:
 *                                                      at most N (default all kept), only
 *                                                      those with a sequence number above
 *                                                      SEQ (a poller passes the last one it
 *                                                      saw and gets what is new)
 *
 * PATTERN filters are fnmatch(3) globs, case-insensitive. reload, override set, clear and
 * weight, cache flush, cluster notify, drain and undrain are marked mutating. TIMEOUT and FOR
 * are durations with a unit (500ms, 30s, 2m, 1h, 1d). The reply shapes are documented in
 * tools/steerctl.c.
 *
 * Threads: whatever thread the front end calls from; the daemon's front end is its control
 * thread, and the backend relies on that.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

/* What "override set/clear/weight" asks the backend to do. */
typedef enum {
	CTL_OVERRIDE_SET,   /* add or replace the rule of @c kind for the pattern */
	CTL_OVERRIDE_CLEAR, /* drop the rule of @c kind (CTL_OVERRIDE_ANY: every kind) */
} ctl_override_action_t;

typedef enum {
	CTL_OVERRIDE_STATE,  /* force UP or DOWN */
	CTL_OVERRIDE_WEIGHT, /* replace the configured weight */
	CTL_OVERRIDE_ANY,    /* CTL_OVERRIDE_CLEAR only: state and weight rules */
} ctl_override_kind_t;

typedef struct {
	ctl_override_action_t action;
	ctl_override_kind_t kind;
	const char *pattern; /* borrowed from the request */
	bool down;           /* SET STATE */
	uint16_t weight;     /* SET WEIGHT: 0..65535 */
	unsigned for_ms;     /* SET: the rule lapses this long after it is set; 0 = never */
} ctl_override_req_t;

/*
 * What a front end serves, implemented by the daemon. Each function fills @p data with the
 * reply's "data" (the caller takes the reference) and returns 0, or returns a negative
 * steer_err with a message in @p err. String arguments are borrowed for the call; optional
 * ones are NULL when absent. @c prepare, if not NULL, runs before every command (the daemon
 * publishes pending monitor results there, so a reply never reports a state not yet served).
 */
typedef struct {
	void *ctx;
	void (*prepare)(void *ctx);
	int (*status)(void *ctx, json_t **data, char *err, size_t errlen);
	int (*zones)(void *ctx, json_t **data, char *err, size_t errlen);
	int (*reload)(void *ctx, bool force, json_t **data, char *err, size_t errlen);
	int (*stats)(void *ctx, json_t **data, char *err, size_t errlen);
	int (*explain)(void *ctx, const char *name, const char *client, const char *ecs,
	               json_t **data, char *err, size_t errlen);
	int (*health)(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen);
	int (*monitors)(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen);
	int (*override_list)(void *ctx, json_t **data, char *err, size_t errlen);
	int (*override)(void *ctx, const ctl_override_req_t *req, json_t **data, char *err,
	                size_t errlen);
	int (*maps)(void *ctx, json_t **data, char *err, size_t errlen);
	int (*upstreams)(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen);
	int (*cache)(void *ctx, json_t **data, char *err, size_t errlen);
	int (*cache_flush)(void *ctx, const char *name, json_t **data, char *err, size_t errlen);
	int (*cluster)(void *ctx, json_t **data, char *err, size_t errlen);
	int (*cluster_health)(void *ctx, json_t **data, char *err, size_t errlen);
	/* @p daemon "bird" or "frr"; @p opts the OPTION=VALUE arguments, unparsed */
	int (*cluster_config)(void *ctx, const char *daemon, const char *const *opts, size_t n_opts,
	                      json_t **data, char *err, size_t errlen);
	int (*cluster_notify)(void *ctx, const char *state, json_t **data, char *err,
	                      size_t errlen);
	/* @p timeout_ms 0 = the configured drain timeout */
	int (*drain)(void *ctx, unsigned timeout_ms, json_t **data, char *err, size_t errlen);
	int (*undrain)(void *ctx, json_t **data, char *err, size_t errlen);
	/* @p since 0 = every kept event; @p max 0 = no limit */
	int (*events)(void *ctx, uint64_t since, size_t max, json_t **data, char *err,
	              size_t errlen);
	/* @p prefix NULL = only the agents and the table's counts */
	int (*paths)(void *ctx, const char *prefix, json_t **data, char *err, size_t errlen);
	/* refresh the secondary zone @p zone now; @p axfr: transfer it whole whatever the serial */
	int (*zone_refresh)(void *ctx, const char *zone, bool axfr, json_t **data, char *err,
	                    size_t errlen);
} ctl_backend_t;

/*
 * A row's handler: @p argv holds the @p argc arguments after the name (and after the
 * sub-command), all strings, their count already within the row's bounds.
 */
typedef int (*ctl_command_cb)(const ctl_backend_t *b, const char *const *argv, size_t argc,
                              json_t **data, char *err, size_t errlen);

typedef struct {
	const char *name;    /* "override" */
	const char *sub;     /* first argument that selects this row ("set"), NULL = none */
	const char *args;    /* usage of the arguments after name and sub, "" = none */
	const char *summary; /* one line for help texts */
	uint8_t min_args, max_args;
	bool mutates; /* changes what is served: a front end may require authorisation */
	ctl_command_cb handler;
} ctl_command_t;

/** The table, @p n rows, in help order (rows of one name are adjacent). Static data. */
const ctl_command_t *ctl_command_table(size_t *n) STEER_NONNULL(1);

/**
 * The row for command @p name with arguments @p argv (@p argc of them; the first selects a
 * sub-command row). Returns NULL with the reason in @p err: an unknown command (the message
 * lists the commands), an unknown sub-command, or a wrong argument count (the message is the
 * usage). Any thread.
 */
const ctl_command_t *ctl_command_match(const char *name, const char *const *argv, size_t argc,
                                       char *err, size_t errlen) STEER_NONNULL(1, 4);

/* ctl_dispatch() flags. */
#define CTL_DISPATCH_READ_ONLY 1u /* refuse mutating commands (an unauthorised client) */

/**
 * Run command @p cmd with the JSON array @p args (NULL = none) on backend @p b: match the row,
 * refuse a mutating one under CTL_DISPATCH_READ_ONLY (STEER_EACCES), call b->prepare and the
 * handler. Returns 0 with the reply's data in @p data (caller owns it), or a negative
 * steer_err with a message in @p err (STEER_EINVAL for unknown commands, bad arguments).
 */
int ctl_dispatch(const ctl_backend_t *b, const char *cmd, const json_t *args, unsigned flags,
                 json_t **data, char *err, size_t errlen) STEER_NONNULL(1, 2, 5, 6) STEER_WUR;

/**
 * ctl_dispatch() without flags as a ctl_handler_cb (ctl/ctl.h), @p ctx being the
 * `const ctl_backend_t *`: what the UNIX control socket serves.
 */
int ctl_dispatch_cb(const char *cmd, json_t *args, json_t **data, char *err, size_t errlen,
                    void *ctx);
