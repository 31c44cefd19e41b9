/*
 * probe_run: run probes from the command line and print each result as one JSON line.
 * The integration tests drive it against real servers; it is also handy to try a monitor.
 *
 *   probe_run TYPE ADDRESS[:PORT] [options] [-- COMMAND ARGS...]
 *     --timeout MS      (default 1000)      --count N, --interval MS   repeat
 *     --path P  --host H  --body S  --status CODE (repeatable)  --insecure   (http/https)
 *     --qname N  --qtype NUM  --rcode NUM  --answer TEXT                      (dns)
 *     --name NAME       target name for logs and the exec environment
 *     --source ADDR     leave from this address (STEER_SOURCE for exec)
 * Exit status: 0 when the last probe succeeded, 1 when it failed, 2 on a usage or start error.
 */
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health/probe.h"

typedef struct {
	health_probe_ctx_t *ctx;
	health_probe_req_t req;
	int remaining;
	double interval;
	ev_timer next;
	bool last_ok;
	bool failed_start;
} run_t;

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void start_one(run_t *run);

static void on_result(const health_probe_result_t *res, void *arg)
{
	run_t *run = arg;
	printf("{\"ok\": %s, \"rtt_us\": %u, \"detail\": ", res->ok ? "true" : "false",
	       res->rtt_us);
	json_str(res->detail);
	printf("}\n");
	fflush(stdout);
	run->last_ok = res->ok;
	if (--run->remaining > 0) {
		ev_timer_set(&run->next, run->interval, 0.);
		ev_timer_start(ev_default_loop(0), &run->next);
	}
}

static void on_next(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	start_one(w->data);
}

static void start_one(run_t *run)
{
	health_probe_t *p;
	char err[256];
	if (health_probe_start(run->ctx, &run->req, &p, err, sizeof(err)) != 0) {
		printf("{\"ok\": false, \"start_error\": ");
		json_str(err);
		printf("}\n");
		run->failed_start = true;
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: probe_run TYPE ADDRESS[:PORT] [options] [-- COMMAND ARGS...]\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return usage();
	static health_probe_spec_t spec = {.qtype = 1, .tls_verify = true};
	if (health_probe_type_parse(argv[1], &spec.type) != 0)
		return usage();
	run_t run = {.remaining = 1, .interval = 1.0};
	run.req = (health_probe_req_t){.spec = &spec,
	                               .timeout_ms = 1000,
	                               .cb = on_result,
	                               .arg = &run,
	                               .target_name = argv[2]};
	if (steer_sockaddr_parse(argv[2], 0, &run.req.dst) != 0) {
		fprintf(stderr, "probe_run: bad address %s\n", argv[2]);
		return 2;
	}
	for (int i = 3; i < argc; i++) {
		const char *opt = argv[i];
		if (strcmp(opt, "--") == 0) {
			spec.argv = &argv[i + 1];
			break;
		}
		if (strcmp(opt, "--insecure") == 0) {
			spec.tls_verify = false;
			continue;
		}
		if (i + 1 >= argc)
			return usage();
		const char *val = argv[++i];
		if (strcmp(opt, "--timeout") == 0)
			run.req.timeout_ms = (uint32_t)strtoul(val, NULL, 10);
		else if (strcmp(opt, "--count") == 0)
			run.remaining = atoi(val);
		else if (strcmp(opt, "--interval") == 0)
			run.interval = strtod(val, NULL) / 1000.0;
		else if (strcmp(opt, "--path") == 0)
			spec.path = val;
		else if (strcmp(opt, "--host") == 0)
			spec.host = val;
		else if (strcmp(opt, "--body") == 0)
			spec.body = val;
		else if (strcmp(opt, "--status") == 0 && spec.n_status < HEALTH_HTTP_STATUS_MAX)
			spec.status[spec.n_status++] = (uint16_t)atoi(val);
		else if (strcmp(opt, "--qname") == 0)
			spec.qname = val;
		else if (strcmp(opt, "--qtype") == 0)
			spec.qtype = (uint16_t)atoi(val);
		else if (strcmp(opt, "--rcode") == 0)
			spec.rcode = (uint8_t)atoi(val);
		else if (strcmp(opt, "--answer") == 0)
			spec.answer = val;
		else if (strcmp(opt, "--name") == 0)
			run.req.target_name = val;
		else if (strcmp(opt, "--source") == 0) {
			if (steer_sockaddr_parse(val, 0, &run.req.source) != 0) {
				fprintf(stderr, "probe_run: bad source %s\n", val);
				return 2;
			}
		} else
			return usage();
	}
	struct ev_loop *loop = ev_default_loop(0);
	char err[256];
	if (health_probe_ctx_new(loop, &run.ctx, err, sizeof(err)) != 0) {
		fprintf(stderr, "probe_run: %s\n", err);
		return 2;
	}
	ev_timer_init(&run.next, on_next, 0., 0.);
	run.next.data = &run;
	start_one(&run);
	if (!run.failed_start)
		ev_run(loop, 0);
	health_probe_ctx_free(run.ctx);
	if (run.failed_start)
		return 2;
	return run.last_ok ? 0 : 1;
}
