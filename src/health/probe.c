#include "health/probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "health/probe_int.h"

static const char *const type_names[] = {
    [HEALTH_PROBE_TCP] = "tcp", [HEALTH_PROBE_HTTP] = "http", [HEALTH_PROBE_HTTPS] = "https",
    [HEALTH_PROBE_DNS] = "dns", [HEALTH_PROBE_EXEC] = "exec", [HEALTH_PROBE_METRICS] = "metrics",
};

const char *health_probe_type_name(health_probe_type_t type)
{
	if ((size_t)type < STEER_ARRAY_LEN(type_names) && type_names[type])
		return type_names[type];
	return "?";
}

int health_probe_type_parse(const char *name, health_probe_type_t *out)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(type_names); i++) {
		if (type_names[i] && strcmp(name, type_names[i]) == 0) {
			*out = (health_probe_type_t)i;
			return 0;
		}
	}
	return STEER_EINVAL;
}

int health_probe_ctx_new(struct ev_loop *loop, health_probe_ctx_t **out, char *err, size_t errlen)
{
	health_probe_ctx_t *ctx = xcalloc(1, sizeof(*ctx));
	ctx->loop = loop;
	int ret = health_http_init(ctx, err, errlen);
	if (ret != 0) {
		free(ctx);
		return ret;
	}
	*out = ctx;
	return 0;
}

void health_probe_ctx_free(health_probe_ctx_t *ctx)
{
	if (!ctx)
		return;
	health_http_fini(ctx->http);
	free(ctx);
}

static bool needs_port(health_probe_type_t type)
{
	return type != HEALTH_PROBE_EXEC;
}

int health_probe_start(health_probe_ctx_t *ctx, const health_probe_req_t *req, health_probe_t **out,
                       char *err, size_t errlen)
{
	if (!req->spec || !req->cb || req->timeout_ms == 0) {
		snprintf(err, errlen, "probe request without spec, callback or timeout");
		return STEER_EINVAL;
	}
	sa_family_t family = req->dst.sa.sa_family;
	if (family != AF_INET && family != AF_INET6) {
		snprintf(err, errlen, "probe target has no IPv4 or IPv6 address");
		return STEER_EINVAL;
	}
	if (needs_port(req->spec->type) && steer_sockaddr_port(&req->dst) == 0) {
		snprintf(err, errlen, "%s probe target has no port",
		         health_probe_type_name(req->spec->type));
		return STEER_EINVAL;
	}
	switch (req->spec->type) {
	case HEALTH_PROBE_TCP:
		return health_probe_tcp_start(ctx, req, out, err, errlen);
	case HEALTH_PROBE_HTTP:
	case HEALTH_PROBE_HTTPS:
		return health_probe_http_start(ctx, req, out, err, errlen);
	case HEALTH_PROBE_DNS:
		return health_probe_dns_start(ctx, req, out, err, errlen);
	case HEALTH_PROBE_EXEC:
		return health_probe_exec_start(ctx, req, out, err, errlen);
	case HEALTH_PROBE_METRICS:
		return health_probe_metrics_start(ctx, req, out, err, errlen);
	}
	snprintf(err, errlen, "unknown probe type %d", (int)req->spec->type);
	return STEER_EINVAL;
}

void health_probe_report(health_probe_t *p, const health_probe_result_t *res, health_probe_cb cb,
                         void *arg)
{
	health_probe_result_t copy = *res;
	health_probe_cancel(p);
	cb(&copy, arg);
}

const char *health_probe_source_text(const health_probe_req_t *req, char *buf, size_t size)
{
	const steer_sockaddr_t *s = &req->source;
	buf[0] = '\0';
	if (s->sa.sa_family == 0 || s->sa.sa_family != req->dst.sa.sa_family)
		return buf;
	const void *raw = s->sa.sa_family == AF_INET6 ? (const void *)&s->sin6.sin6_addr
	                                              : (const void *)&s->sin.sin_addr;
	if (!inet_ntop(s->sa.sa_family, raw, buf, (socklen_t)size))
		buf[0] = '\0';
	return buf;
}

int health_probe_bind_source(int fd, const health_probe_req_t *req, char *err, size_t errlen)
{
	char text[INET6_ADDRSTRLEN];
	if (health_probe_source_text(req, text, sizeof(text))[0] == '\0')
		return 0;
	steer_sockaddr_t src = req->source;
	if (src.sa.sa_family == AF_INET6)
		src.sin6.sin6_port = 0;
	else
		src.sin.sin_port = 0;
	if (bind(fd, &src.sa, steer_sockaddr_len(&src)) == 0)
		return 0;
	int ret = -errno;
	snprintf(err, errlen, "bind %s: %s", text, strerror(errno));
	return ret;
}

uint32_t health_probe_elapsed_us(struct timespec start)
{
	struct timespec now = health_probe_now();
	int64_t us =
	    (int64_t)(now.tv_sec - start.tv_sec) * 1000000 + (now.tv_nsec - start.tv_nsec) / 1000;
	if (us < 0)
		return 0;
	return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

void health_probe_result_set(health_probe_result_t *res, bool ok, struct timespec start,
                             const char *fmt, ...)
{
	res->ok = ok;
	res->rtt_us = health_probe_elapsed_us(start);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->detail, sizeof(res->detail), fmt, ap);
	va_end(ap);
}
