/*
 * steerd's life cycle on the control thread: configuration, zones, sockets, privileges, the
 * event loop with signals and the control socket, reload and shutdown. The query threads
 * (src/net) never touch this state; they only read the view published with net_publish().
 */
#include "daemon/server.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "auth/check.h"
#include "base/err.h"
#include "daemon/alerting.h"
#include "daemon/commands.h"
#include "daemon/decisions.h"
#include "daemon/paths.h"
#include "daemon/forward.h"
#include "daemon/journal.h"
#include "daemon/notify.h"
#include "daemon/tap.h"
#include "daemon/xfr.h"
#include "daemon/http.h"
#include "daemon/status.h"
#include "dns/dname.h"
#include "gslb/nets_baseline.h"
#include "zone/journal.h"

#ifndef STEER_VERSION
#define STEER_VERSION "unknown"
#endif

/* One control thread per process, so its signal watchers can be file-scope. */
static ev_signal sig_hup, sig_term, sig_int;

/* ---- configuration --------------------------------------------------------------------- */

static int conf_from_args(const server_opts_t *opts, conf_t *conf, char *err, size_t errlen)
{
	char msg[512];
	for (size_t i = 0; i < opts->n_listen; i++) {
		if (conf_add_listen(conf, opts->listen[i], msg, sizeof(msg)) != 0) {
			snprintf(err, errlen, "--listen %s: %s", opts->listen[i], msg);
			return STEER_ECONF;
		}
	}
	for (size_t i = 0; i < opts->n_zones; i++) {
		if (conf_add_zone_arg(conf, opts->zones[i], msg, sizeof(msg)) != 0) {
			snprintf(err, errlen, "--zone %s: %s", opts->zones[i], msg);
			return STEER_ECONF;
		}
	}
	for (size_t i = 0; i < opts->n_forward; i++) {
		if (conf_add_forward_arg(conf, opts->forward[i], msg, sizeof(msg)) != 0) {
			snprintf(err, errlen, "--forward %s: %s", opts->forward[i], msg);
			return STEER_ECONF;
		}
	}
	for (size_t i = 0; i < opts->n_allow_recursion; i++) {
		if (conf_add_allow_recursion_arg(conf, opts->allow_recursion[i], msg,
		                                 sizeof(msg)) != 0) {
			snprintf(err, errlen, "--allow-recursion %s: %s", opts->allow_recursion[i],
			         msg);
			return STEER_ECONF;
		}
	}
	for (size_t i = 0; i < opts->n_http; i++) {
		if (conf_add_http_arg(conf, opts->http[i], msg, sizeof(msg)) != 0) {
			snprintf(err, errlen, "--http %s: %s", opts->http[i], msg);
			return STEER_ECONF;
		}
	}
	return 0;
}

static void conf_override(const server_opts_t *opts, conf_t *conf)
{
	if (opts->control_socket != NULL) {
		free(conf->control_socket);
		conf->control_socket = xstrdup(opts->control_socket);
	}
	if (opts->has_log_level)
		conf->log_level = opts->log_level;
	if (opts->workers >= 0)
		conf->workers = (unsigned)opts->workers;
	if (opts->tcp_workers >= 0)
		conf->tcp_workers = (unsigned)opts->tcp_workers;
}

int server_conf_build(const server_opts_t *opts, conf_t **out, char *err, size_t errlen)
{
	conf_t *conf = NULL;
	int ret;
	if (opts->config_path != NULL) {
		ret = conf_load_file(opts->config_path, &conf, err, errlen);
		if (ret != 0)
			return ret;
	} else {
		conf = conf_new_quick();
		/* The socket steerctl tries first without -s, so quick mode needs no flags. */
		char sock[CTL_SOCKET_PATH_MAX];
		free(conf->control_socket);
		conf->control_socket = xstrdup(ctl_default_socket(sock, sizeof(sock)));
		ret = conf_from_args(opts, conf, err, errlen);
		if (ret != 0)
			goto out;
	}
	conf_override(opts, conf);
	ret = conf_validate(conf, err, errlen);
out:
	if (ret != 0) {
		conf_free(conf);
		return ret;
	}
	*out = conf;
	return 0;
}

/* ---- zones ----------------------------------------------------------------------------- */

/* Append one line to a multi-line error buffer, keeping whole lines when it is full. */
static void err_append(char *err, size_t errlen, const char *line)
{
	size_t used = strlen(err);
	int n = snprintf(err + used, errlen - used, "%s%s", used ? "\n" : "", line);
	if (n < 0 || (size_t)n >= errlen - used)
		err[used] = '\0';
}

/* The running zone to reuse for @p cz: same apex, same file, file unchanged. */
static zone_t *zone_reusable(const zone_set_t *old, const conf_zone_t *cz)
{
	uint8_t apex[DNS_DNAME_MAXLEN];
	if (old == NULL || dname_from_str(cz->domain, apex) < 0)
		return NULL;
	dname_lower(apex);
	const zone_set_entry_t *e = zone_set_get(old, apex);
	if (e == NULL || strcmp(e->zone->file, cz->file) != 0 || zone_file_changed(e->zone))
		return NULL;
	return e->zone;
}

/* The serving data of @p cz for the zone set: its access lists (owned by the caller). */
static void zone_entry_from_conf(const conf_zone_t *cz, zone_set_entry_t *e)
{
	*e = (zone_set_entry_t){0};
	e->n_xfr_allow = cz->n_xfr_allow;
	e->xfr_allow = conf_acl_build(cz->xfr_allow, cz->n_xfr_allow);
}

/* A secondary zone with no version yet: pending in the set (SERVFAIL, NOTIFY accepted). */
static int zone_add_pending(const conf_zone_t *cz, zone_set_t *set, const zone_set_entry_t *tmpl)
{
	uint8_t apex[DNS_DNAME_MAXLEN];
	if (dname_from_str(cz->domain, apex) < 0)
		return STEER_EINVAL;
	dname_lower(apex);
	return zone_set_add_pending(set, apex, tmpl);
}

/*
 * The IXFR history to serve @p zone with (a new reference, NULL = none): the previous
 * version's history in @p old plus the difference to @p zone, or the journal file's when the
 * zone was not served before.
 */
static zone_journal_t *zone_history(const conf_t *conf, const conf_zone_t *cz,
                                    const zone_set_t *old, const zone_t *zone)
{
	const zone_set_entry_t *prev = old ? zone_set_get(old, zone->apex) : NULL;
	if (prev == NULL)
		return daemon_journal_restore(conf, cz, zone);
	/* Nobody may transfer a zone without xfr-allow: its history would cost for nothing. */
	if (cz->n_xfr_allow == 0)
		return NULL;
	return zone_journal_next(prev->journal, prev->zone, zone, cz->ixfr_history);
}

/*
 * A secondary zone is never read here: the transfer module holds its current version
 * (pending in the set until the first transfer), so a reload neither drops nor re-reads it.
 * Its history grows by the difference from the version @p old served.
 */
static int zone_build_secondary(const conf_t *conf, const conf_zone_t *cz, const zone_set_t *old,
                                zone_set_t *set, server_report_t *report, char *err, size_t errlen)
{
	zone_set_entry_t tmpl;
	zone_entry_from_conf(cz, &tmpl);
	zone_t *zone = daemon_xfr_zone(conf, cz, &tmpl);
	if (zone != NULL)
		tmpl.journal = zone_history(conf, cz, old, zone);
	int ret = zone != NULL ? zone_set_add(set, zone, &tmpl) : zone_add_pending(cz, set, &tmpl);
	if (ret != 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), "zone %s: %s", cz->domain,
		         ret == STEER_EEXIST ? "listed twice" : steer_strerror(ret));
		err_append(err, errlen, msg);
		zone_unref(zone);
	}
	zone_journal_unref(tmpl.journal);
	free(tmpl.xfr_allow);
	free(tmpl.notify_allow);
	if (ret == 0)
		report->n_unchanged++;
	return ret;
}

/* Load or reuse one zone and add it to @p set. Returns 0 or a steer_err (line in @p err). */
static int zone_build_one(const conf_t *conf, const conf_zone_t *cz, const zone_set_t *old,
                          zone_set_t *set, server_report_t *report, char *err, size_t errlen)
{
	char msg[1024];
	if (cz->n_primaries > 0)
		return zone_build_secondary(conf, cz, old, set, report, err, errlen);
	zone_t *zone = zone_reusable(old, cz);
	bool loaded = zone == NULL;
	if (zone != NULL) {
		zone_ref(zone);
	} else {
		msg[0] = '\0';
		int ret = zone_load(cz->domain, cz->file, &zone, msg, sizeof(msg));
		if (ret != 0) {
			if (msg[0] == '\0')
				snprintf(msg, sizeof(msg), "%s: zone %s: %s", cz->file, cz->domain,
				         steer_strerror(ret));
			err_append(err, errlen, msg);
			return ret;
		}
	}
	zone_set_entry_t tmpl;
	zone_entry_from_conf(cz, &tmpl);
	tmpl.journal = zone_history(conf, cz, old, zone);
	int ret = zone_set_add(set, zone, &tmpl);
	free(tmpl.xfr_allow);
	zone_journal_unref(tmpl.journal);
	if (ret != 0) {
		snprintf(msg, sizeof(msg), "zone %s: listed twice", cz->domain);
		err_append(err, errlen, msg);
		zone_unref(zone);
		return ret;
	}
	if (!loaded) {
		report->n_unchanged++;
		return 0;
	}
	report->loaded = xrealloc(report->loaded, (report->n_loaded + 1) * sizeof(char *));
	report->loaded[report->n_loaded++] = xstrdup(zone->name);
	return 0;
}

int server_zones_build(const conf_t *conf, const zone_set_t *old, zone_set_t **out,
                       server_report_t *report, char *err, size_t errlen)
{
	int first_err = 0;
	if (errlen > 0)
		err[0] = '\0';
	zone_set_t *set = zone_set_new();
	for (size_t i = 0; i < conf->n_zones; i++) {
		int ret = zone_build_one(conf, &conf->zones[i], old, set, report, err, errlen);
		if (ret != 0 && first_err == 0)
			first_err = ret;
	}
	if (first_err != 0) {
		zone_set_free(set);
		server_report_clear(report);
		return first_err;
	}
	*out = set;
	return 0;
}

void server_report_clear(server_report_t *report)
{
	for (size_t i = 0; i < report->n_loaded; i++)
		free(report->loaded[i]);
	free(report->loaded);
	report->loaded = NULL;
	report->n_loaded = 0;
	report->n_unchanged = 0;
	steer_warnings_clear(&report->warnings);
}

int server_gslb_build(const conf_t *conf, const gslb_view_build_opts_t *opts, gslb_view_t **out,
                      steer_warnings_t *warnings, char *err, size_t errlen)
{
	if (errlen > 0)
		err[0] = '\0';
	/* The baseline of the last accepted load: what the shrink guard compares a file with
	 * when no running view has it (at start-up, every file). */
	gslb_view_build_opts_t o = opts ? *opts : (gslb_view_build_opts_t){0};
	gslb_nets_baseline_t *baseline = NULL;
	int ret = 0;
	if (conf->nets_state_file)
		ret = gslb_nets_baseline_load(conf->nets_state_file, &baseline, err, errlen);
	o.baseline = baseline;
	if (ret == 0)
		ret = gslb_view_build(conf, &o, out, warnings, err, errlen);
	gslb_nets_baseline_free(baseline);
	if (ret != 0 && errlen > 0 && err[0] == '\0')
		snprintf(err, errlen, "GSLB configuration: %s", steer_strerror(ret));
	if (ret != 0)
		return ret;
	/* The monitor wiring (requires, probe addresses) is part of the configuration too. */
	monitor_plan_t *plan = NULL;
	ret = monitor_plan_build(conf, *out, &plan, err, errlen);
	monitor_plan_free(plan);
	if (ret != 0) {
		gslb_view_free(*out);
		*out = NULL;
	}
	return ret;
}

/* True when @p gslb answers at least one name, so the query path must look names up. */
static bool gslb_has_names(const gslb_view_t *gslb)
{
	size_t services, maps, whoami;
	gslb_view_counts(gslb, &services, &maps, &whoami);
	return services + whoami > 0;
}

static net_view_t *view_new(zone_set_t *zones, const gslb_view_t *gslb, const conf_t *conf,
                            fwd_engine_t *fwd, hardening_t *hardening)
{
	net_view_t *view = xcalloc(1, sizeof(*view));
	view->auth.zones = zones;
	view->auth.gslb = gslb != NULL && gslb_has_names(gslb) ? gslb : NULL;
	view->auth.udp_max_payload = conf->udp_max_payload;
	view->auth.identity = conf_identity(conf);
	/* the schema caps server.identity at 255 bytes and cluster.node-id at 63 */
	view->auth.identity_len = view->auth.identity ? (uint8_t)strlen(view->auth.identity) : 0;
	/* the schema caps server.version at 255 bytes; "" hides it */
	if (conf->version == NULL)
		view->auth.version = "Steer " STEER_VERSION;
	else if (conf->version[0] != '\0')
		view->auth.version = conf->version;
	view->auth.version_len = view->auth.version ? (uint8_t)strlen(view->auth.version) : 0;
	/* Each view owns its keyring, so a reload's new keys come and go with the snapshot. */
	view->auth.keys = conf_keyring_new(conf);
	view->auth.on_notify = daemon_xfr_on_notify;
	view->auth.notify_arg = daemon_xfr_get();
	forward_view_fill(&view->fwd, conf, fwd);
	hardening_view(hardening, conf, &view->auth);
	return view;
}

/* Free @p view but not its zone set, which a newer view took over. */
static void view_free_shell(net_view_t *view)
{
	forward_view_clear(&view->fwd);
	conf_keyring_free((dns_tsig_keyring_t *)view->auth.keys);
	free(view);
}

/*
 * Only once no query thread can see @p view (after net_publish() or before net_start()). The
 * GSLB view is owned by server_t and freed separately.
 */
static void view_free(const net_view_t *view)
{
	if (view == NULL)
		return;
	zone_set_free((zone_set_t *)view->auth.zones);
	view_free_shell((net_view_t *)view);
}

/* ---- publishing: admin overrides and monitor states on top of the compiled view --------- */

/*
 * Load hysteresis counts metric rounds, but the health table is republished only when a value
 * changes: while a challenger is counting, re-derive the view now and then so a challenger
 * whose values hold still still wins. Once a second: the rounds come from the monitors'
 * counters, so this only bounds how late a switch is seen.
 */
#define STEER_RECHECK_S 1.0

static void on_steer_recheck(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	server_t *s = w->data;
	s->health_dirty = true;
	server_health_flush(s);
}

static void steer_recheck_arm(server_t *s)
{
	if (!gslb_view_steer_pending(s->gslb) || ev_is_active(&s->steer_w))
		return;
	ev_timer_set(&s->steer_w, STEER_RECHECK_S, 0.);
	ev_timer_start(s->loop, &s->steer_w);
}

/* Serve @p gslb (taken over) with the running zones; the old GSLB view is freed. */
static void publish_gslb(server_t *s, gslb_view_t *gslb)
{
	gslb_admin_log_all_down(s->conf, gslb_view_health(s->gslb), gslb_view_health(gslb));
	alerting_health(s, gslb_view_health(s->gslb), gslb_view_health(gslb));
	net_view_t *view =
	    view_new((zone_set_t *)s->view->auth.zones, gslb, s->conf, s->fwd, &s->hardening);
	/* net_publish() waits for the grace period: no query thread sees the old views after. */
	net_view_t *old = (net_view_t *)net_publish(s->net, view);
	gslb_view_t *old_gslb = s->gslb;
	s->view = view;
	s->gslb = gslb;
	view_free_shell(old); /* the zone set now belongs to the new view */
	gslb_view_free(old_gslb);
	steer_recheck_arm(s);
}

static void log_lines(const char *prefix, const char *text);

/*
 * The running set with the current versions of the secondary zones: primary zones are
 * shared as they are (a changed file waits for a reload, as always).
 */
static int zones_with_secondaries(const server_t *s, zone_set_t **out, char *err, size_t errlen)
{
	server_report_t report = {0};
	zone_set_t *set = zone_set_new();
	const zone_set_t *old = s->view->auth.zones;
	int ret = 0;
	for (size_t i = 0; i < s->conf->n_zones && ret == 0; i++) {
		const conf_zone_t *cz = &s->conf->zones[i];
		if (cz->n_primaries > 0) {
			ret = zone_build_secondary(s->conf, cz, old, set, &report, err, errlen);
			continue;
		}
		uint8_t apex[DNS_DNAME_MAXLEN];
		if (dname_from_str(cz->domain, apex) < 0)
			continue;
		dname_lower(apex);
		const zone_set_entry_t *e = zone_set_get(old, apex);
		if (e == NULL)
			continue;
		zone_set_entry_t tmpl;
		zone_entry_from_conf(cz, &tmpl);
		tmpl.journal = e->journal; /* zone_set_add() takes its own reference */
		zone_ref(e->zone);
		if ((ret = zone_set_add(set, e->zone, &tmpl)) != 0)
			zone_unref(e->zone);
		free(tmpl.xfr_allow);
	}
	server_report_clear(&report);
	if (ret != 0) {
		zone_set_free(set);
		return ret;
	}
	*out = set;
	return 0;
}

void server_zones_republish(server_t *s)
{
	char err[SERVER_ERR_MAX] = "";
	zone_set_t *set = NULL;
	int ret = zones_with_secondaries(s, &set, err, sizeof(err));
	if (ret == 0 && (ret = auth_check_gslb_names(set, s->gslb, err, sizeof(err))) != 0)
		zone_set_free(set);
	if (ret != 0) {
		log_lines("secondary zone update: ", err);
		log_err("secondary zone update refused: still serving the previous zones");
		return;
	}
	daemon_journal_persist(s->conf, s->view->auth.zones, set);
	net_view_t *view = view_new(set, s->gslb, s->conf, s->fwd, &s->hardening);
	/* net_publish() waits for the grace period: no query thread sees the old view after. */
	const net_view_t *old = net_publish(s->net, view);
	s->view = view;
	view_free(old);
	/* A secondary zone that arrived after start is checked like the others from now on. */
	node_zones_changed(&s->node, set);
}

void server_publish_paths(server_t *s, gslb_paths_t *paths)
{
	if (s->net == NULL || s->view == NULL)
		return;
	publish_gslb(s, gslb_view_with_paths(s->gslb, paths));
}

/* The planner's part of the layering: monitor states into a GSLB health table. */
static void monitor_fill(void *arg, gslb_health_t *h)
{
	const server_t *s = arg;
	monitor_plan_apply(s->plan, s->engine, h);
}

/* Replace *@p gslb (unpublished) with its monitored version. */
static void gslb_with_monitors(server_t *s, gslb_view_t **gslb)
{
	gslb_view_t *next = gslb_admin_monitored(*gslb, monitor_fill, s);
	gslb_view_free(*gslb);
	*gslb = next;
}

/* A check changed: publish once per loop iteration however many results came in it. */
static void on_monitor_change(void *arg)
{
	server_t *s = arg;
	s->health_dirty = true;
}

void server_health_flush(server_t *s)
{
	if (!s->health_dirty || s->net == NULL || s->view == NULL)
		return;
	s->health_dirty = false;
	publish_gslb(s, gslb_admin_monitored(s->gslb, monitor_fill, s));
}

static void on_loop_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)loop;
	(void)revents;
	server_health_flush(w->data);
}

/*
 * Give the engine the checks of @p conf for @p gslb's targets; on success the plan replaces
 * the running one. On error nothing changes.
 */
static int monitors_configure(server_t *s, const conf_t *conf, const gslb_view_t *gslb, char *err,
                              size_t errlen)
{
	monitor_plan_t *plan = NULL;
	int ret = monitor_plan_build(conf, gslb, &plan, err, errlen);
	if (ret != 0)
		return ret;
	size_t n;
	const health_check_def_t *defs = monitor_plan_checks(plan, &n);
	health_engine_set_checks(s->engine, defs, n, conf->health_state_file);
	monitor_plan_free(s->plan);
	s->plan = plan;
	return 0;
}

static void first_round_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	*(bool *)w->data = true;
}

/*
 * Start the monitors and wait for their first round (bounded by the longest timeout), so
 * the first answer already knows which backends are dead: no blind start. Then fold the
 * states into s->gslb before anything is served.
 */
static int monitors_start(server_t *s, char *err, size_t errlen)
{
	int ret = health_engine_new(s->loop, s->conf->health_state_file, on_monitor_change, s,
	                            &s->engine, err, errlen);
	if (ret == 0)
		ret = monitors_configure(s, s->conf, s->gslb, err, errlen);
	if (ret != 0)
		return ret;
	size_t n;
	(void)monitor_plan_checks(s->plan, &n);
	if (n > 0) {
		bool late = false;
		ev_timer deadline;
		ev_timer_init(&deadline, first_round_deadline,
		              health_engine_max_timeout(s->engine) / 1000.0 + 0.2, 0.);
		deadline.data = &late;
		ev_timer_start(s->loop, &deadline);
		while (!late && !health_engine_first_round_done(s->engine))
			ev_run(s->loop, EVRUN_ONCE);
		ev_timer_stop(s->loop, &deadline);
		log_info("monitors: %zu check(s), first round %s", n,
		         late ? "incomplete at the deadline (unknown states read as UP)" : "done");
	}
	gslb_with_monitors(s, &s->gslb);
	gslb_admin_log_all_down(s->conf, NULL, gslb_view_health(s->gslb));
	s->health_dirty = false;
	ev_prepare_init(&s->publish_w, on_loop_prepare);
	s->publish_w.data = s;
	ev_prepare_start(s->loop, &s->publish_w);
	return 0;
}

int64_t server_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define OVERRIDE_EXPIRY_RECHECK_MS 60000

/* Sleep until the admin's next timed override lapses (none: no timer). */
static void overrides_expiry_arm(server_t *s)
{
	ev_timer_stop(s->loop, &s->expiry_w);
	int64_t next = gslb_admin_next_expiry(&s->admin);
	if (next == 0)
		return;
	int64_t wait = next - server_wall_ms();
	/* The expiry is wall-clock time and the timer monotonic: waking at least once a minute
	 * catches a clock step (NTP, an admin) within that minute instead of days later. */
	if (wait > OVERRIDE_EXPIRY_RECHECK_MS)
		wait = OVERRIDE_EXPIRY_RECHECK_MS;
	/* The timer counts from the loop's cached time, which may lag: refresh it first. */
	ev_now_update(s->loop);
	ev_timer_set(&s->expiry_w, wait > 0 ? (double)wait / 1000.0 : 0., 0.);
	ev_timer_start(s->loop, &s->expiry_w);
}

static void on_override_expiry(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	server_t *s = w->data;
	gslb_view_t *next = NULL;
	if (gslb_admin_expire(&s->admin, s->conf, s->gslb, server_wall_ms(), &next) > 0)
		publish_gslb(s, next);
	overrides_expiry_arm(s);
}

int server_override(server_t *s, const gslb_admin_req_t *req, gslb_admin_result_t *res, char *err,
                    size_t errlen)
{
	gslb_view_t *gslb = NULL;
	int ret = gslb_admin_change(&s->admin, s->conf, s->gslb, req, &gslb, res, err, errlen);
	if (ret != 0)
		return ret;
	publish_gslb(s, gslb);
	overrides_expiry_arm(s);
	const gslb_override_t *rule = &req->rule;
	if (req->action == GSLB_ADMIN_SET && rule->kind == GSLB_OVERRIDE_WEIGHT)
		log_info("override set '%s' WEIGHT %u: %u target(s)", rule->pattern, rule->weight,
		         res->targets);
	else if (req->action == GSLB_ADMIN_SET)
		log_info("override set '%s' %s: %u target(s)", rule->pattern,
		         rule->down ? "DOWN" : "UP", res->targets);
	else
		log_info("override cleared '%s'%s%s: %u target(s)", rule->pattern,
		         res->cleared_state ? " STATE" : "", res->cleared_weight ? " WEIGHT" : "",
		         res->targets);
	return 0;
}

static void log_gslb(const gslb_view_t *gslb, const char *verb)
{
	size_t services, maps, whoami;
	gslb_view_counts(gslb, &services, &maps, &whoami);
	if (services + maps + whoami > 0)
		log_info("%s GSLB: %zu service(s), %zu map(s), %zu whoami name(s)", verb, services,
		         maps, whoami);
}

/* ---- process: user, pid file, control socket -------------------------------------------- */

static int resolve_user(server_t *s, char *err, size_t errlen)
{
	const conf_t *conf = s->conf;
	if (conf->user == NULL && conf->group == NULL)
		return 0;
	s->uid = getuid();
	s->gid = getgid();
	if (conf->user != NULL) {
		struct passwd *pw = getpwnam(conf->user);
		if (pw == NULL) {
			snprintf(err, errlen, "unknown user '%s' (server.user)", conf->user);
			return STEER_ECONF;
		}
		s->uid = pw->pw_uid;
		s->gid = pw->pw_gid;
	}
	if (conf->group != NULL) {
		struct group *gr = getgrnam(conf->group);
		if (gr == NULL) {
			snprintf(err, errlen, "unknown group '%s' (server.group)", conf->group);
			return STEER_ECONF;
		}
		s->gid = gr->gr_gid;
	}
	if (geteuid() != 0 && (s->uid != geteuid() || s->gid != getegid())) {
		snprintf(err, errlen, "cannot switch to user '%s' group '%s': not running as root",
		         conf->user ? conf->user : "(unchanged)",
		         conf->group ? conf->group : "(primary)");
		return STEER_EACCES;
	}
	s->drop = geteuid() == 0;
	return 0;
}

static int drop_privileges(const server_t *s)
{
	if (!s->drop)
		return 0;
	/* Supplementary groups first: after setuid() we could no longer shed root's groups. */
	if (setgroups(1, &s->gid) != 0 || setgid(s->gid) != 0 || setuid(s->uid) != 0) {
		int ret = -errno;
		log_err("cannot drop privileges to uid %u gid %u: %s", (unsigned)s->uid,
		        (unsigned)s->gid, steer_strerror(ret));
		return ret;
	}
	log_info("running as uid %u gid %u", (unsigned)s->uid, (unsigned)s->gid);
	return 0;
}

static int pid_file_write(server_t *s)
{
	const char *path = s->boot_conf->pid_file;
	if (path == NULL)
		return 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		int ret = -errno;
		log_err("cannot write pid file %s: %s", path, steer_strerror(ret));
		return ret;
	}
	char text[32];
	int n = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
	ssize_t w = write(fd, text, (size_t)n);
	close(fd);
	if (w != n) {
		log_err("cannot write pid file %s", path);
		unlink(path);
		return STEER_EACCES;
	}
	s->pid_written = true;
	return 0;
}

/*
 * Create the socket's folder when missing (e.g. /run/steer on a fresh boot), owned by the
 * user we switch to so that the socket can be removed at shutdown.
 */
static void ctl_make_dir(const server_t *s, const char *path)
{
	char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0750) == 0) {
			if (s->drop && chown(dir, s->uid, s->gid) != 0)
				log_warn("cannot chown %s: %s", dir, steer_strerror(-errno));
		} else if (errno != EEXIST) {
			log_warn("cannot create %s: %s", dir, steer_strerror(-errno));
		}
	}
	free(dir);
}

static int ctl_open(server_t *s)
{
	const char *path = s->boot_conf->control_socket;
	if (path == NULL)
		return 0;
	ctl_make_dir(s, path);
	int ret =
	    ctl_server_start(&s->ctl, s->loop, path, ctl_dispatch_cb, (void *)commands_backend(s));
	if (ret != 0) {
		s->ctl = NULL;
		if (s->opts.config_path != NULL)
			return ret;
		log_warn("continuing without a control socket (give --control-socket PATH to "
		         "enable steerctl)");
		return 0;
	}
	/* Mode 0660 from ctl: the daemon's group may use it after the switch. */
	if (s->drop && chown(path, s->uid, s->gid) != 0)
		log_warn("cannot chown %s: %s", path, steer_strerror(-errno));
	return 0;
}

/* Log each line of a multi-line error as its own message. */
static void log_lines(const char *prefix, const char *text)
{
	char *copy = xstrdup(text);
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		log_err("%s%s", prefix, line);
	free(copy);
}

/* Each warning of a build, once. */
static void log_warnings(const steer_warnings_t *w, const char *prefix)
{
	for (size_t i = 0; i < w->n; i++)
		log_warn("%s%s", prefix, w->msg[i]);
}

/* ---- event loop ------------------------------------------------------------------------ */

static void on_sighup(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)loop;
	(void)revents;
	server_report_t report = {0};
	char err[SERVER_ERR_MAX];
	log_info("SIGHUP: reloading");
	/* No --force from a signal: the nets guards apply. */
	(void)server_reload(w->data, false, &report, err, sizeof(err));
	server_report_clear(&report);
}

static void on_sigterm(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)revents;
	log_info("%s: shutting down", w->signum == SIGINT ? "SIGINT" : "SIGTERM");
	ev_break(loop, EVBREAK_ALL);
}

static void signals_start(server_t *s)
{
	ev_signal_init(&sig_hup, on_sighup, SIGHUP);
	ev_signal_init(&sig_term, on_sigterm, SIGTERM);
	ev_signal_init(&sig_int, on_sigterm, SIGINT);
	sig_hup.data = sig_term.data = sig_int.data = s;
	ev_signal_start(s->loop, &sig_hup);
	ev_signal_start(s->loop, &sig_term);
	ev_signal_start(s->loop, &sig_int);
}

/* ---- start-up -------------------------------------------------------------------------- */

static void log_zones(const zone_set_t *set, const char *verb)
{
	for (size_t i = 0; i < zone_set_count(set); i++) {
		const zone_t *z = zone_set_at(set, i)->zone;
		log_info("%s zone %s serial %u, %zu records, from %s", verb, z->name, z->serial,
		         z->n_records, z->file);
	}
	for (size_t i = 0; i < zone_set_pending_count(set); i++)
		log_info("secondary zone %s: no version yet, SERVFAIL until its first transfer",
		         zone_set_pending_at(set, i)->name);
}

/* The address to tell a user to query: loopback for a wildcard bind. */
static void hint_host(const steer_sockaddr_t *addr, char *buf, size_t size)
{
	if (addr->sa.sa_family == AF_INET6) {
		if (IN6_IS_ADDR_UNSPECIFIED(&addr->sin6.sin6_addr))
			snprintf(buf, size, "::1");
		else
			inet_ntop(AF_INET6, &addr->sin6.sin6_addr, buf, (socklen_t)size);
	} else {
		if (addr->sin.sin_addr.s_addr == htonl(INADDR_ANY))
			snprintf(buf, size, "127.0.0.1");
		else
			inet_ntop(AF_INET, &addr->sin.sin_addr, buf, (socklen_t)size);
	}
}

/* "query it: kdig @127.0.0.1 -p 5353 www.example.test", for trying a quick-mode server. */
static void log_query_hint(const server_t *s)
{
	const steer_sockaddr_t *addr = net_listen_at(s->net, 0);
	const zone_set_t *set = s->view->auth.zones;
	char host[STEER_SOCKADDR_STRLEN], port[16] = "";
	if (zone_set_count(set) == 0)
		return;
	hint_host(addr, host, sizeof(host));
	if (steer_sockaddr_port(addr) != 53)
		snprintf(port, sizeof(port), " -p %u", steer_sockaddr_port(addr));
	const char *zone = zone_set_at(set, 0)->zone->name;
	size_t len = strlen(zone);
	if (len > 0 && zone[len - 1] == '.')
		len--;
	log_info("query it: kdig @%s%s www.%.*s", host, port, (int)len, zone);
}

static void log_forward(const server_t *s)
{
	const conf_forward_t *f = &s->conf->forward;
	for (size_t i = 0; i < f->n_groups; i++) {
		const conf_fwd_group_t *g = &f->groups[i];
		char list[256] = "";
		for (size_t j = 0; j < g->n_upstreams; j++) {
			size_t used = strlen(list);
			snprintf(list + used, sizeof(list) - used, "%s%s", j ? ", " : "",
			         g->upstreams[j].name);
		}
		log_info("forwarding %s (%s) to %s", g->domain, g->policy ? g->policy : "ordered",
		         list);
	}
	if (f->n_groups > 0 && f->n_allow_recursion == 0)
		log_warn("forward: allow-recursion is empty: every client is REFUSED recursion");
	else if (f->n_groups > 0)
		log_info("recursion allowed for %zu network(s)", f->n_allow_recursion);
}

/* One line for the service manager's STATUS=: what is served now. */
static void serving_status(const server_t *s, char *buf, size_t size)
{
	size_t services, maps, whoami, checks = 0;
	gslb_view_counts(s->gslb, &services, &maps, &whoami);
	if (s->plan != NULL)
		(void)monitor_plan_checks(s->plan, &checks);
	snprintf(buf, size, "serving %zu zone(s), %zu GSLB service(s), %zu health check(s)",
	         zone_set_count(s->view->auth.zones), services, checks);
}

static void log_started(const server_t *s)
{
	char text[STEER_SOCKADDR_STRLEN];
	for (size_t i = 0; i < net_listen_count(s->net); i++)
		log_info("listening on %s (UDP and TCP)",
		         steer_sockaddr_str(net_listen_at(s->net, i), text, sizeof(text)));
	log_info("%u UDP worker(s) per address, %u TCP thread(s), control socket %s",
	         net_workers(s->net), net_tcp_workers(s->net),
	         s->ctl != NULL ? s->boot_conf->control_socket : "(none)");
	log_zones(s->view->auth.zones, "serving");
	log_gslb(s->gslb, "serving");
	log_forward(s);
	if (s->opts.config_path == NULL)
		log_query_hint(s);
}

/* Record the nets counts just accepted: the next start-up's shrink guard compares with them. */
static void nets_baseline_save(const conf_t *conf, const gslb_view_t *gslb)
{
	char err[512];
	if (conf->nets_state_file &&
	    gslb_nets_baseline_save(gslb, conf->nets_state_file, err, sizeof(err)) != 0)
		log_warn("nets state file not written, a restart cannot check nets shrinkage: %s",
		         err);
}

/*
 * The forwarder's engine, once the listen ports are known (never used as source ports),
 * joined to the first view before any query thread runs.
 */
static int forward_start(server_t *s, char *err, size_t errlen)
{
	uint16_t ports[64];
	size_t n = net_listen_ports(s->net, ports, sizeof(ports) / sizeof(ports[0]));
	int ret = forward_engine_new(s->conf, ports, n, &s->fwd, err, errlen);
	if (ret != 0 || s->fwd == NULL)
		return ret;
	fwd_engine_set_identity(s->fwd, conf_identity(s->conf));
	forward_view_clear(&s->view->fwd);
	forward_view_fill(&s->view->fwd, s->conf, s->fwd);
	return 0;
}

static int forward_run(server_t *s)
{
	if (s->fwd == NULL)
		return 0;
	int ret = fwd_engine_start(s->fwd);
	if (ret != 0)
		log_err("cannot start the forwarder: %s", steer_strerror(ret));
	return ret;
}

int server_start(server_t *s, const server_opts_t *opts, conf_t *conf)
{
	char err[SERVER_ERR_MAX] = "";
	server_report_t report = {0};
	zone_set_t *set = NULL;
	memset(s, 0, sizeof(*s));
	s->opts = *opts;
	s->conf = s->boot_conf = conf;
	s->started_at = time(NULL);
	hardening_init(&s->hardening);
	metrics_init(&s->metrics);
	log_setup(conf->log_target, conf->log_level);
	alerting_init(s);

	int ret = resolve_user(s, err, sizeof(err));
	if (ret != 0)
		goto fail;
	/* First, while the process has one thread: the keeper is forked from it. */
	ret = node_spawn(&s->node, conf, err, sizeof(err));
	if (ret != 0)
		goto fail;
	daemon_xfr_init();
	daemon_journal_enable();
	ret = server_zones_build(conf, NULL, &set, &report, err, sizeof(err));
	server_report_clear(&report);
	if (ret != 0)
		goto fail;
	gslb_view_build_opts_t gopts = {.force = opts->force};
	ret = server_gslb_build(conf, &gopts, &s->gslb, &report.warnings, err, sizeof(err));
	log_warnings(&report.warnings, "");
	server_report_clear(&report);
	if (ret == 0)
		ret = auth_check_gslb_names(set, s->gslb, err, sizeof(err));
	if (ret != 0) {
		zone_set_free(set);
		goto fail;
	}
	nets_baseline_save(conf, s->gslb);
	/* The view applied the state file already; keep its rules as the admin's list. */
	gslb_admin_init(&s->admin);
	ret = gslb_admin_load(&s->admin, conf, err, sizeof(err));
	if (ret != 0) {
		zone_set_free(set);
		goto fail;
	}
	s->loop = ev_default_loop(EVFLAG_AUTO);
	if (s->loop == NULL) {
		zone_set_free(set);
		log_err("cannot create the control event loop");
		return STEER_ENOMEM;
	}
	/* Before the first health round, which runs this loop and may take a while. */
	notify_watchdog_start(s->loop);
	ev_timer_init(&s->expiry_w, on_override_expiry, 0., 0.);
	s->expiry_w.data = s;
	ev_timer_init(&s->steer_w, on_steer_recheck, 0., 0.);
	s->steer_w.data = s;
	overrides_expiry_arm(s);
	ret = monitors_start(s, err, sizeof(err));
	if (ret != 0) {
		zone_set_free(set);
		goto fail;
	}
	s->view = view_new(set, s->gslb, conf, NULL, &s->hardening);
	s->net = net_new(conf, s->view);
	ret = net_bind(s->net, err, sizeof(err));
	if (ret == 0)
		ret = forward_start(s, err, sizeof(err));
	if (ret == 0)
		ret = server_tap_start(s, err, sizeof(err));
	if (ret == 0)
		ret = decisions_start(s, err, sizeof(err));
	if (ret == 0)
		ret = paths_start(s, err, sizeof(err));
	if (ret != 0)
		goto fail;
	err[0] = '\0';
	signals_start(s);
	/* The cluster thread starts before the privilege drop, which would forbid its real-time
	 * priority; it announces nothing until the query threads answer its checks. */
	if ((ret = ctl_open(s)) != 0 || (ret = server_http_start(s)) != 0 ||
	    (ret = metrics_http_register(s)) != 0 || (ret = status_page_register(s)) != 0 ||
	    (ret = paths_http_register(s)) != 0 || (ret = pid_file_write(s)) != 0 ||
	    (ret = node_start(&s->node, conf, s->net, s->fwd, set)) != 0 ||
	    (ret = drop_privileges(s)) != 0 || (ret = alerting_start(s)) != 0 ||
	    (ret = forward_run(s)) != 0 || (ret = net_start(s->net)) != 0 ||
	    (ret = daemon_xfr_start(s)) != 0)
		return ret;
	daemon_xfr_announce(conf, set, NULL, 0, true);
	log_started(s);
	char status[256];
	serving_status(s, status, sizeof(status));
	/* After the first health round (monitors_start), so nothing is served blind. */
	notify_ready(status);
	return 0;
fail:
	log_lines("", err);
	return ret;
}

void server_run(server_t *s)
{
	ev_run(s->loop, 0);
}

/* ---- reload ---------------------------------------------------------------------------- */

static void reload_failed(server_t *s, const char *err)
{
	s->last_reload.ok = false;
	s->last_reload.failures++;
	snprintf(s->last_reload.error, sizeof(s->last_reload.error), "%s", err);
	log_lines("reload: ", err);
	log_err("reload failed: still serving the previous configuration and zones");
}

static void reload_apply(server_t *s, conf_t *conf, zone_set_t *set, gslb_view_t *gslb)
{
	gslb_admin_log_all_down(conf, gslb_view_health(s->gslb), gslb_view_health(gslb));
	alerting_health(s, gslb_view_health(s->gslb), gslb_view_health(gslb));
	net_view_t *view = view_new(set, gslb, conf, s->fwd, &s->hardening);
	/* net_publish() waits for the grace period: no query thread sees the old views after. */
	const net_view_t *old = net_publish(s->net, view);
	hardening_retire(&s->hardening);
	gslb_view_t *old_gslb = s->gslb;
	metrics_gslb_replaced(&s->metrics, s->net, old_gslb, gslb);
	s->view = view;
	s->gslb = gslb;
	view_free(old);
	gslb_view_free(old_gslb);
	net_reconfigure(s->net, conf);
	if (s->fwd != NULL)
		fwd_engine_set_identity(s->fwd, conf_identity(conf));
	log_setup(conf->log_target, conf->log_level);
	if (s->conf != s->boot_conf)
		conf_free(s->conf);
	s->conf = conf;
	nets_baseline_save(conf, gslb);
}

int server_reload(server_t *s, bool force, server_report_t *report, char *err, size_t errlen)
{
	conf_t *conf = NULL;
	zone_set_t *set = NULL;
	gslb_view_t *gslb = NULL;
	char http_token[CTL_HTTP_TOKEN_MAX + 1] = "";
	char paths_token[CTL_HTTP_TOKEN_MAX + 1] = "";
	s->last_reload.at = time(NULL);
	notify_reloading();
	s->last_reload.count++;
	int ret = server_conf_build(&s->opts, &conf, err, errlen);
	if (ret == 0)
		ret = server_http_token(conf, http_token, sizeof(http_token), err, errlen);
	if (ret == 0)
		ret = paths_reload_token(conf, paths_token, sizeof(paths_token), err, errlen);
	if (ret == 0)
		ret = server_zones_build(conf, s->view->auth.zones, &set, report, err, errlen);
	if (ret == 0) {
		/* All or nothing, like zones: a GSLB error keeps the running view serving. */
		gslb_view_build_opts_t opts = {.running = s->gslb, .force = force};
		ret = server_gslb_build(conf, &opts, &gslb, &report->warnings, err, errlen);
		log_warnings(&report->warnings, "reload: ");
		if (ret == 0 && (ret = auth_check_gslb_names(set, gslb, err, errlen)) != 0)
			gslb_view_free(gslb);
		if (ret == 0)
			ret = gslb_admin_reload(&s->admin, conf, &gslb, err, errlen);
		if (ret == 0) {
			ret = monitors_configure(s, conf, gslb, err, errlen);
			if (ret == 0)
				gslb_with_monitors(s, &gslb);
			else
				gslb_view_free(gslb);
		}
		if (ret != 0) {
			zone_set_free(set);
			server_report_clear(report);
		}
	}
	if (ret != 0) {
		conf_free(conf);
		reload_failed(s, err);
		node_reloaded(&s->node, false, NULL, err);
		alerting_reload(s, false, err);
		notify_reloaded(false, "", err);
		return ret;
	}
	conf_restart_only_changes(s->boot_conf, conf, report->restart, sizeof(report->restart));
	paths_reload(s, conf, paths_token, &gslb);
	explicit_bzero(paths_token, sizeof(paths_token));
	daemon_journal_persist(conf, s->view->auth.zones, set);
	reload_apply(s, conf, set, gslb);
	daemon_xfr_applied();
	daemon_xfr_announce(conf, set, report->loaded, report->n_loaded, false);
	overrides_expiry_arm(s);
	server_http_reconfigure(s, conf, http_token);
	explicit_bzero(http_token, sizeof(http_token));
	node_reloaded(&s->node, true, set, NULL);
	alerting_reload(s, true, NULL);
	s->last_reload.ok = true;
	s->last_reload.error[0] = '\0';
	for (size_t i = 0; i < report->n_loaded; i++) {
		const zone_set_entry_t *e = NULL;
		uint8_t apex[DNS_DNAME_MAXLEN];
		if (dname_from_str(report->loaded[i], apex) > 0) {
			dname_lower(apex);
			e = zone_set_get(set, apex);
		}
		if (e != NULL)
			log_info("reload: loaded zone %s serial %u, %zu records", e->zone->name,
			         e->zone->serial, e->zone->n_records);
	}
	log_info("reload done: %zu zone(s) loaded, %zu unchanged", report->n_loaded,
	         report->n_unchanged);
	log_gslb(gslb, "reload:");
	if (report->restart[0] != '\0')
		log_warn("reload: changed settings that only apply after a restart: %s",
		         report->restart);
	char status[256];
	serving_status(s, status, sizeof(status));
	notify_reloaded(true, status, NULL);
	return 0;
}

/* ---- shutdown -------------------------------------------------------------------------- */

void server_stop(server_t *s)
{
	notify_stopping();
	ctl_server_stop(s->ctl);
	s->ctl = NULL;
	alerting_stop(s); /* polls the forwarder and the cluster node: before they go */
	server_http_stop(s);
	/* Withdraw before anything stops answering. */
	node_stop(&s->node);
	/* The engine first: it hands answers to the transports' sockets and threads. */
	if (s->fwd != NULL)
		fwd_engine_stop(s->fwd);
	if (s->net != NULL)
		net_stop(s->net);
	net_free(s->net);
	s->net = NULL;
	daemon_xfr_stop();     /* no query thread can call it any more */
	daemon_journal_stop(); /* no zone set is published any more */
	/* With no query thread left; it still explains with the GSLB view. */
	decisions_stop(s);
	paths_stop(s); /* the demand rings too: no query thread writes them now */
	view_free(s->view);
	s->view = NULL;
	hardening_deinit(&s->hardening);
	fwd_engine_free(s->fwd);
	s->fwd = NULL;
	/* After every thread that writes to it. */
	server_tap_stop(s);
	gslb_view_free(s->gslb);
	s->gslb = NULL;
	gslb_admin_deinit(&s->admin);
	if (s->loop != NULL) {
		ev_prepare_stop(s->loop, &s->publish_w);
		ev_timer_stop(s->loop, &s->expiry_w);
		ev_timer_stop(s->loop, &s->steer_w);
	}
	health_engine_free(s->engine);
	s->engine = NULL;
	monitor_plan_free(s->plan);
	s->plan = NULL;
	if (s->pid_written && unlink(s->boot_conf->pid_file) != 0)
		log_debug("cannot remove pid file %s: %s", s->boot_conf->pid_file,
		          steer_strerror(-errno));
	if (s->loop != NULL) {
		notify_watchdog_stop(s->loop);
		ev_signal_stop(s->loop, &sig_hup);
		ev_signal_stop(s->loop, &sig_term);
		ev_signal_stop(s->loop, &sig_int);
	}
	if (s->conf != s->boot_conf)
		conf_free(s->conf);
	conf_free(s->boot_conf);
	s->conf = s->boot_conf = NULL;
	metrics_deinit(&s->metrics);
}
