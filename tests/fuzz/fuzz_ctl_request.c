/*
 * Fuzz target: the control socket's request handling, exactly as the socket serves one line
 * (ctl_request_reply(): the JSON parse, the request's shape) and the command table behind it
 * (ctl_dispatch(): row match, argument counts and parsing). The backend answers every command
 * with what it was asked, and fails when the first argument starts with '!', with a message
 * quoting it, cut at the buffer's end as a real one would be.
 *
 * Each input runs twice: as the socket serves it, and read-only (an unauthorised front end),
 * where a mutating backend call is a failure. Besides sanitizer findings (leaks included) it
 * checks that every reply is {"ok": true, "data": ...} or {"ok": false, "error": "<text>"}
 * and can be encoded (the socket sends it as one line), and that the backend only sees
 * arguments in range.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "ctl/commands.h"
#include "ctl/ctl.h"
#include "fuzz.h"

typedef struct {
	bool read_only;
	unsigned calls;
} backend_state_t;

static backend_state_t state;

/* The backend's answer: what it was asked, or a failure for a '!' argument. */
static int answer(const char *fn, bool mutates, const char *arg, json_t **data, char *err,
                  size_t errlen)
{
	FUZZ_CHECK(!(mutates && state.read_only));
	state.calls++;
	if (arg && arg[0] == '!') {
		snprintf(err, errlen, "%s: cannot do '%s'", fn, arg);
		return STEER_EINVAL;
	}
	*data = json_pack("{s:s, s:s?}", "fn", fn, "arg", arg);
	FUZZ_CHECK(*data != NULL);
	return 0;
}

static int be_status(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("status", false, NULL, data, err, errlen);
}

static int be_zones(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("zones", false, NULL, data, err, errlen);
}

static int be_reload(void *ctx, bool force, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("reload", true, force ? "force" : NULL, data, err, errlen);
}

static int be_stats(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("stats", false, NULL, data, err, errlen);
}

static int be_explain(void *ctx, const char *name, const char *client, const char *ecs,
                      json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	FUZZ_CHECK(name != NULL && client != NULL);
	(void)ecs;
	return answer("explain", false, name, data, err, errlen);
}

static int be_health(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("health", false, pattern, data, err, errlen);
}

static int be_monitors(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("monitors", false, pattern, data, err, errlen);
}

static int be_override_list(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("override_list", false, NULL, data, err, errlen);
}

static int be_override(void *ctx, const ctl_override_req_t *req, json_t **data, char *err,
                       size_t errlen)
{
	(void)ctx;
	FUZZ_CHECK(req->pattern != NULL);
	FUZZ_CHECK(req->action == CTL_OVERRIDE_SET || req->action == CTL_OVERRIDE_CLEAR);
	FUZZ_CHECK(req->kind == CTL_OVERRIDE_STATE || req->kind == CTL_OVERRIDE_WEIGHT ||
	           (req->kind == CTL_OVERRIDE_ANY && req->action == CTL_OVERRIDE_CLEAR));
	FUZZ_CHECK(req->action == CTL_OVERRIDE_SET || req->for_ms == 0);
	return answer("override", true, req->pattern, data, err, errlen);
}

static int be_maps(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("maps", false, NULL, data, err, errlen);
}

static int be_upstreams(void *ctx, const char *pattern, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("upstreams", false, pattern, data, err, errlen);
}

static int be_cache(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("cache", false, NULL, data, err, errlen);
}

static int be_cache_flush(void *ctx, const char *name, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("cache_flush", true, name, data, err, errlen);
}

static int be_cluster(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("cluster", false, NULL, data, err, errlen);
}

static int be_cluster_health(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("cluster_health", false, NULL, data, err, errlen);
}

static int be_cluster_config(void *ctx, const char *daemon, const char *const *opts, size_t n_opts,
                             json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	FUZZ_CHECK(strcmp(daemon, "bird") == 0 || strcmp(daemon, "frr") == 0);
	for (size_t i = 0; i < n_opts; i++)
		FUZZ_CHECK(opts[i] != NULL);
	return answer("cluster_config", false, n_opts ? opts[0] : NULL, data, err, errlen);
}

static int be_cluster_notify(void *ctx, const char *st, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	FUZZ_CHECK(strcmp(st, "master") == 0 || strcmp(st, "backup") == 0 ||
	           strcmp(st, "fault") == 0 || strcmp(st, "stop") == 0);
	return answer("cluster_notify", true, st, data, err, errlen);
}

static int be_drain(void *ctx, unsigned timeout_ms, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	(void)timeout_ms;
	return answer("drain", true, NULL, data, err, errlen);
}

static int be_undrain(void *ctx, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("undrain", true, NULL, data, err, errlen);
}

static int be_events(void *ctx, uint64_t since, size_t max, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	(void)since;
	(void)max;
	return answer("events", false, NULL, data, err, errlen);
}

static int be_paths(void *ctx, const char *prefix, json_t **data, char *err, size_t errlen)
{
	(void)ctx;
	return answer("paths", false, prefix, data, err, errlen);
}

static const ctl_backend_t backend = {
    .ctx = &state,
    .status = be_status,
    .zones = be_zones,
    .reload = be_reload,
    .stats = be_stats,
    .explain = be_explain,
    .health = be_health,
    .monitors = be_monitors,
    .override_list = be_override_list,
    .override = be_override,
    .maps = be_maps,
    .upstreams = be_upstreams,
    .cache = be_cache,
    .cache_flush = be_cache_flush,
    .cluster = be_cluster,
    .cluster_health = be_cluster_health,
    .cluster_config = be_cluster_config,
    .cluster_notify = be_cluster_notify,
    .drain = be_drain,
    .undrain = be_undrain,
    .events = be_events,
    .paths = be_paths,
};

static int read_only_cb(const char *cmd, json_t *args, json_t **data, char *err, size_t errlen,
                        void *ctx)
{
	return ctl_dispatch(ctx, cmd, args, CTL_DISPATCH_READ_ONLY, data, err, errlen);
}

static void check_reply(json_t *reply)
{
	FUZZ_CHECK(json_is_object(reply));
	json_t *ok = json_object_get(reply, "ok");
	FUZZ_CHECK(json_is_boolean(ok));
	if (json_is_true(ok)) {
		FUZZ_CHECK(json_object_get(reply, "data") != NULL);
	} else {
		const char *msg = json_string_value(json_object_get(reply, "error"));
		FUZZ_CHECK(msg != NULL && msg[0] != '\0');
	}
	char *line = json_dumps(reply, JSON_COMPACT);
	FUZZ_CHECK(line != NULL && strchr(line, '\n') == NULL);
	free(line);
	json_decref(reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	state = (backend_state_t){0};
	check_reply(ctl_request_reply(text, size, ctl_dispatch_cb, (void *)&backend));
	unsigned calls = state.calls;
	state = (backend_state_t){.read_only = true};
	check_reply(ctl_request_reply(text, size, read_only_cb, (void *)&backend));
	/* read-only refuses, it never calls more */
	FUZZ_CHECK(state.calls <= calls);
	return 0;
}
