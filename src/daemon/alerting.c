/*
 * State changes into events, and events to alerts (see alerting.h). Control thread only.
 */
#include "daemon/alerting.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/server.h"

/* How often the forwarder's and the cluster's copies are compared: a change is an event
 * within this, and a poll costs a few copies under their locks. */
#define WATCH_INTERVAL_MS 200

void alerting_init(server_t *s)
{
	events_init(&s->events);
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
	bool down = gslb_sttl_down(e->eff);
	size_t n = 0;
	const uint32_t *idx = monitor_plan_target_checks(s->plan, e->id, &n);
	for (size_t i = 0; i < n; i++) {
		if (idx[i] >= health_engine_count(s->engine))
			continue;
		health_check_status_t st;
		health_engine_status(s->engine, idx[i], &st);
		if (down != (st.known && st.down))
			continue;
		snprintf(buf, len, "%s: %s", st.key,
		         st.last_at ? st.last_detail : health_check_state_str(&st));
		return;
	}
	(void)gslb_health_reason(e, buf, len);
}

void alerting_health(server_t *s, const gslb_health_t *before, const gslb_health_t *after)
{
	events_health_diff(&s->events, before, after, target_reason, s);
}

void alerting_reload(server_t *s, bool ok, const char *err)
{
	events_reload(&s->events, ok, s->opts.config_path, err);
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

int alerting_start(server_t *s, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	char node[64];
	node_name(s, node, sizeof(node));
	events_watch_start(&s->events, s->loop, s->fwd, s->node.cluster, node, WATCH_INTERVAL_MS);
	return 0;
}

void alerting_stop(server_t *s)
{
	events_deinit(&s->events);
}
