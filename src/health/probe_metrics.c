/*
 * The metrics probe: an HTTP(S) GET through the shared transfer of probe_http.c, then the body
 * parsed in the monitor's format and each configured expression read from it. Rates need the
 * previous scrape, which only the engine keeps, so the result carries the raw numbers.
 */
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "health/metrics_parse.h"
#include "health/probe_int.h"

static const char *const metric_names[HEALTH_METRIC_KINDS] = {
    [HEALTH_METRIC_CONNECTIONS] = "connections",
    [HEALTH_METRIC_CAPACITY] = "capacity",
    [HEALTH_METRIC_PACKET_RATE] = "packet-rate",
    [HEALTH_METRIC_KBPS] = "kbps",
    [HEALTH_METRIC_CPU] = "cpu",
    [HEALTH_METRIC_LINK_CAPACITY] = "link-capacity",
};

const char *health_metric_name(unsigned kind)
{
	return kind < HEALTH_METRIC_KINDS ? metric_names[kind] : "?";
}

static void on_reply(const health_probe_spec_t *spec, long status, const char *body, size_t len,
                     struct timespec start, health_probe_result_t *res)
{
	if (status < 200 || status > 299) {
		health_probe_result_set(res, false, start, "HTTP %ld (expected 2xx)", status);
		return;
	}
	char why[HEALTH_PROBE_DETAIL - 32];
	metrics_doc_t *doc = NULL;
	if (metrics_doc_parse(spec->format, body, len, &doc, why, sizeof(why)) != 0) {
		health_probe_result_set(res, false, start, "%s body: %s",
		                        metrics_format_name(spec->format), why);
		return;
	}
	unsigned wanted = 0, read = 0;
	char first_miss[HEALTH_PROBE_DETAIL - 32] = "";
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++) {
		const metrics_expr_t *e = spec->metric_compiled[k];
		if (!e)
			continue;
		wanted++;
		char msg[sizeof(first_miss) - 16];
		if (metrics_expr_sample(e, doc, &res->metric_raw[k], msg, sizeof(msg)) == 0) {
			res->metric_have |= (uint8_t)(1u << k);
			read++;
		} else if (!first_miss[0]) {
			snprintf(first_miss, sizeof(first_miss), "%s: %s", metric_names[k], msg);
		}
	}
	metrics_doc_free(doc);
	if (read == wanted)
		health_probe_result_set(res, true, start, "HTTP %ld, %u value%s", status, read,
		                        read == 1 ? "" : "s");
	else
		health_probe_result_set(res, false, start, "%u of %u values; %s", read, wanted,
		                        first_miss);
}

int health_probe_metrics_start(health_probe_ctx_t *ctx, const health_probe_req_t *req,
                               health_probe_t **out, char *err, size_t errlen)
{
	const health_probe_spec_t *spec = req->spec;
	for (unsigned k = 0; k < HEALTH_METRIC_KINDS; k++) {
		if (spec->metric_expr[k] && !spec->metric_compiled[k]) {
			snprintf(err, errlen, "metrics probe: %s is not compiled", metric_names[k]);
			return STEER_EINVAL;
		}
	}
	return health_http_transfer_start(ctx, req, on_reply, HEALTH_METRICS_BODY_MAX, out, err,
	                                  errlen);
}
