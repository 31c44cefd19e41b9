/*
 * State changes into events, and events to alerts (see alerting.h). Control thread only.
 */
#include "daemon/alerting.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "daemon/commands.h"
#include "daemon/server.h"

/* How often the forwarder's and the cluster's copies are compared: a change is an event
 * within this, and a poll costs a few copies under their locks. */
#define WATCH_INTERVAL_MS 200

void alerting_init(server_t *s)
{
	events_init(&s->events);
	s->alerts = NULL;
	memset(&s->snapshots, 0, sizeof(s->snapshots));
}

/*
 * Why a target is in its new state: an override's rule when one forces it, else the first
 * check in the new state with its last result ("web@192.0.2.10:80: HTTP 503").
 */
static void target_reason(void *ctx, const gslb_health_entry_t *e, char *buf, size_t len)
{
	const server_t *s = ctx;
	if (e->forced || !s->plan || !s->engine) {
		(void)gslb_health_reason(e, buf, len);
		return;
	}
	health_check_status_t st;
	if (monitor_plan_target_check(s->plan, s->engine, e->id, gslb_sttl_down(e->eff), &st))
		snprintf(buf, len, "%s: %s", st.key,
		         st.last_at ? st.last_detail : health_check_state_str(&st));
	else
		(void)gslb_health_reason(e, buf, len);
}

void alerting_health(server_t *s, const gslb_health_t *before, const gslb_health_t *after)
{
	events_health_diff(&s->events, before, after, target_reason, s);
}

/* The node's name in events and alerts: the configured identity, else the host name. */
static void node_name(const server_t *s, char *buf, size_t len)
{
	const char *id = conf_identity(s->boot_conf);
	if (id != NULL) {
		snprintf(buf, len, "%s", id);
		return;
	}
	if (gethostname(buf, len) != 0 || buf[0] == '\0')
		snprintf(buf, len, "steerd");
	buf[len - 1] = '\0';
}

/* Every event to the alert destinations. */
static void to_alerts(const event_t *e, void *ctx)
{
	server_t *s = ctx;
	if (s->alerts == NULL)
		return;
	alert_event_t ae = {.seq = e->seq,
	                    .time = e->time,
	                    .kind = event_kind_name(e->kind),
	                    .subject = e->subject,
	                    .from = e->from,
	                    .to = e->to,
	                    .reason = e->reason};
	alerts_send(s->alerts, &ae);
}

/* Destinations for @p conf's alert list (NULL when it is empty). */
static int alerts_build(const server_t *s, const conf_t *conf, const char *node, alerts_t **out,
                        char *err, size_t errlen)
{
	*out = NULL;
	if (conf->n_alerts == 0)
		return 0;
	alert_dest_def_t *defs = xcalloc(conf->n_alerts, sizeof(*defs));
	for (size_t i = 0; i < conf->n_alerts; i++) {
		const conf_alert_t *ca = &conf->alerts[i];
		defs[i] = (alert_dest_def_t){.webhook = ca->webhook,
		                             .exec = ca->exec,
		                             .timeout_ms = ca->timeout,
		                             .retries = ca->retries};
	}
	int ret = alerts_new(s->loop, defs, conf->n_alerts, node, out, err, errlen);
	free(defs);
	return ret;
}

/* The stats command's data, for a snapshot line. */
static json_t *snapshot_stats(void *ctx)
{
	const ctl_backend_t *b = commands_backend(ctx);
	json_t *data = NULL;
	char err[256];
	if (b->stats(b->ctx, &data, err, sizeof(err)) != 0) {
		log_warn("stats-snapshots: no stats: %s", err);
		return NULL;
	}
	return data;
}

int alerting_start(server_t *s)
{
	char node[64], err[512];
	size_t errlen = sizeof(err);
	node_name(s, node, sizeof(node));
	/* alerts and snapshots apply on restart: a reload reports their changes as such */
	const conf_t *conf = s->boot_conf;
	int ret = alerts_build(s, conf, node, &s->alerts, err, errlen);
	if (ret != 0) {
		log_err("%s", err);
		return ret;
	}
	events_set_sink(&s->events, to_alerts, s);
	if (conf->snapshots.file) {
		ret =
		    snapshots_start(&s->snapshots, s->loop, conf->snapshots.file,
		                    conf->snapshots.interval, node, snapshot_stats, s, err, errlen);
		if (ret != 0) {
			log_err("%s", err);
			return ret;
		}
	}
	events_watch_start(&s->events, s->loop, s->fwd, s->node.cluster, node, WATCH_INTERVAL_MS);
	if (conf->n_alerts > 0)
		log_info("alerts: %zu destination(s)", conf->n_alerts);
	return 0;
}

void alerting_reload(server_t *s, bool ok, const char *err)
{
	events_reload(&s->events, ok, s->opts.config_path, err);
}

json_t *alerting_stats_json(const server_t *s)
{
	if (s->alerts)
		return alerts_stats_json(s->alerts);
	return json_pack("{s:i, s:i, s:i, s:i, s:i, s:[]}", "sent", 0, "failures", 0, "given_up", 0,
	                 "dropped", 0, "queued", 0, "destinations");
}

void alerting_stop(server_t *s)
{
	events_deinit(&s->events);
	snapshots_stop(&s->snapshots);
	alerts_free(s->alerts);
	s->alerts = NULL;
}
