/*
 * Unit tests of src/health/metrics_parse: the Prometheus text parser (samples, labels and
 * their escapes, comments, special values, timestamps, malformed bodies with the line they
 * fail at), the JSON and nginx stub_status bodies, and the expressions (parse errors with
 * their position, sums over labelled samples, rate between scrapes, counter resets, scaling).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "health/metrics_parse.h"
#include "unit.h"

/* Samples of a body as "name{l=v,...} value" lines joined by '|'. */
typedef struct {
	char text[2048];
	size_t n;
} collect_t;

static int collect(const metrics_sample_t *s, void *ctx)
{
	collect_t *c = ctx;
	size_t used = strlen(c->text);
	used += (size_t)snprintf(c->text + used, sizeof(c->text) - used, "%s%s", c->n ? "|" : "",
	                         s->name);
	for (size_t i = 0; i < s->n_labels; i++)
		used += (size_t)snprintf(c->text + used, sizeof(c->text) - used, "%s%s=%s",
		                         i ? "," : "{", s->labels[i].name, s->labels[i].value);
	if (s->n_labels)
		used += (size_t)snprintf(c->text + used, sizeof(c->text) - used, "}");
	used += (size_t)snprintf(c->text + used, sizeof(c->text) - used, " %g", s->value);
	if (s->has_timestamp)
		snprintf(c->text + used, sizeof(c->text) - used, " @%lld",
		         (long long)s->timestamp_ms);
	c->n++;
	return 0;
}

static void test_prometheus_bodies(void)
{
	static const struct {
		const char *what, *body;
		int ret;
		const char *want; /* samples, or the error */
	} rows[] = {
	    {"empty body", "", 0, ""},
	    {"one sample", "up 1\n", 0, "up 1"},
	    {"no final newline", "up 1", 0, "up 1"},
	    {"HELP and TYPE", "# HELP x_total Things.\n# TYPE x_total counter\nx_total 3\n", 0,
	     "x_total 3"},
	    {"free comment", "# just a note { \" \n# \nx 1\n", 0, "x 1"},
	    {"labels", "x{a=\"1\",b=\"two\"} 2\n", 0, "x{a=1,b=two} 2"},
	    {"trailing comma and blanks", "x { a = \"1\" , } 2\n", 0, "x{a=1} 2"},
	    {"empty labels", "x{} 5\n", 0, "x 5"},
	    {"escapes", "x{p=\"a\\\\b\\\"c\\nd\"} 1\n", 0, "x{p=a\\b\"c\nd} 1"},
	    {"commas and braces in a value", "x{p=\"a,b}{=\"} 1\n", 0, "x{p=a,b}{=} 1"},
	    {"NaN and infinities", "a NaN\nb +Inf\nc -Inf\n", 0, "a nan|b inf|c -inf"},
	    {"exponent", "x 1.5e3\n", 0, "x 1500"},
	    {"timestamp", "x 1 1700000000000\n", 0, "x 1 @1700000000000"},
	    {"negative timestamp", "x 1 -5\n", 0, "x 1 @-5"},
	    {"colons in names", "job:rate:5m 7\n", 0, "job:rate:5m 7"},
	    {"CRLF lines", "a 1\r\nb 2\r\n", 0, "a 1|b 2"},
	    {"blank lines and tabs", "\n\t\na\t1\n\n", 0, "a 1"},
	    {"bad value", "x one\n", STEER_EINVAL, "line 1: x: 'one' is not a number"},
	    {"missing value", "x\n", STEER_EINVAL, "line 1: x: expected a value"},
	    {"bad name", "a 1\n9x 1\n", STEER_EINVAL, "line 2: expected a metric name"},
	    {"unterminated label", "x{a=\"1} 2\n", STEER_EINVAL,
	     "line 1: label a: unterminated value"},
	    {"unquoted label", "x{a=1} 2\n", STEER_EINVAL, "line 1: label a: expected '\"'"},
	    {"bad escape", "x{a=\"\\t\"} 2\n", STEER_EINVAL,
	     "line 1: label a: bad escape in value (only \\\\, \\\" and \\n)"},
	    {"duplicate label", "x{a=\"1\",a=\"2\"} 2\n", STEER_EINVAL,
	     "line 1: label a given twice"},
	    {"missing comma", "x{a=\"1\" b=\"2\"} 2\n", STEER_EINVAL,
	     "line 1: expected ',' or '}' after label a"},
	    {"text after timestamp", "x 1 2 3\n", STEER_EINVAL,
	     "line 1: x: unexpected text after the timestamp"},
	    {"float timestamp", "x 1 2.5\n", STEER_EINVAL,
	     "line 1: x: '2.5' is not a timestamp (integer milliseconds)"},
	    {"unknown type", "# TYPE x countr\n", STEER_EINVAL,
	     "line 1: unknown metric type 'countr'"},
	    {"HTML", "<html><body>502 Bad Gateway</body></html>\n", STEER_EINVAL,
	     "line 1: expected a metric name"},
	    {"NUL in a label value", "x{a=\"\0\"} 1\n", STEER_EINVAL,
	     "line 1: label a: NUL byte in value"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		collect_t c = {{0}, 0};
		char err[256] = "";
		size_t len = strlen(rows[i].body);
		if (strstr(rows[i].what, "NUL"))
			len = 12;
		int ret = metrics_prom_parse(rows[i].body, len, collect, &c, err, sizeof(err));
		const char *got = ret ? err : c.text;
		CHECK(ret == rows[i].ret && strcmp(got, rows[i].want) == 0,
		      "%s: ret %d, got '%s', want '%s'", rows[i].what, ret, got, rows[i].want);
	}
}

/* The value of @p expr over @p body, one scrape: "17", "none: reason", "parse: reason". */
static void eval(metrics_format_t format, const char *expr, const char *body, char *out, size_t len)
{
	metrics_expr_t *e = NULL;
	metrics_doc_t *d = NULL;
	char err[256] = "";
	double raw, v;
	if (metrics_expr_parse(format, expr, &e, err, sizeof(err)) != 0) {
		snprintf(out, len, "expr: %s", err);
	} else if (metrics_doc_parse(format, body, strlen(body), &d, err, sizeof(err)) != 0) {
		snprintf(out, len, "body: %s", err);
	} else if (metrics_expr_sample(e, d, &raw, err, sizeof(err)) != 0) {
		snprintf(out, len, "none: %s", err);
	} else if (!metrics_expr_finish(e, raw, NULL, 0, &v)) {
		snprintf(out, len, "no value yet");
	} else {
		snprintf(out, len, "%g", v);
	}
	metrics_doc_free(d);
	metrics_expr_free(e);
}

static const char *const node_body =
    "# TYPE node_network_receive_packets_total counter\n"
    "node_network_receive_packets_total{device=\"eth0\"} 1000\n"
    "node_network_receive_packets_total{device=\"lo\"} 50\n"
    "node_network_receive_packets_total{device=\"eth1\",extra=\"x\"} 7\n"
    "nginx_connections_active 17\n"
    "weird NaN\n"
    "weird 3\n"
    "inf +Inf\n";

static const char *const stub_body = "Active connections: 291 \n"
                                     "server accepts handled requests\n"
                                     " 16630948 16630947 31070465 \n"
                                     "Reading: 6 Writing: 179 Waiting: 106 \n";

static void test_expressions(void)
{
	static const struct {
		metrics_format_t format;
		const char *expr, *body, *want;
	} rows[] = {
	    {METRICS_PROMETHEUS, "nginx_connections_active", NULL, "17"},
	    {METRICS_PROMETHEUS, "node_network_receive_packets_total", NULL, "1057"},
	    {METRICS_PROMETHEUS, "node_network_receive_packets_total{device=\"eth0\"}", NULL,
	     "1000"},
	    {METRICS_PROMETHEUS, "node_network_receive_packets_total{extra=\"x\"}", NULL, "7"},
	    {METRICS_PROMETHEUS, " nginx_connections_active * 2 ", NULL, "34"},
	    {METRICS_PROMETHEUS, "nginx_connections_active / 4", NULL, "4.25"},
	    {METRICS_PROMETHEUS, "weird", NULL, "3"},
	    {METRICS_PROMETHEUS, "rate(nginx_connections_active)", NULL, "no value yet"},
	    {METRICS_PROMETHEUS, "rate", NULL, "none: no sample matches rate"},
	    {METRICS_PROMETHEUS, "inf", NULL, "none: inf: not finite"},
	    {METRICS_PROMETHEUS, "node_network_receive_packets_total{device=\"eth9\"}", NULL,
	     "none: no sample matches node_network_receive_packets_total{device=\"eth9\"}"},
	    {METRICS_PROMETHEUS, "", NULL, "expr: at 1: expected a metric name"},
	    {METRICS_PROMETHEUS, "x{a=1}", NULL, "expr: at 5: label a: expected '\"'"},
	    {METRICS_PROMETHEUS, "rate(x", NULL, "expr: at 7: expected ')' to close rate("},
	    {METRICS_PROMETHEUS, "x * y", NULL, "expr: at 5: expected a number after '*'"},
	    {METRICS_PROMETHEUS, "x / 0", NULL, "expr: at 5: division by zero"},
	    {METRICS_PROMETHEUS, "x + 1", NULL,
	     "expr: at 3: unexpected '+' (want `* N` or `/ N` at most)"},
	    {METRICS_PROMETHEUS, "sum(x)", NULL,
	     "expr: at 4: unexpected '(' (want `* N` or `/ N` at most)"},
	    {METRICS_JSON, "a.b.1.c", "{\"a\": {\"b\": [{\"c\": 1}, {\"c\": 2.5}]}}", "2.5"},
	    {METRICS_JSON, "rate(a) * 8", "{\"a\": 5}", "no value yet"},
	    {METRICS_JSON, "a.x", "{\"a\": {\"b\": 1}}", "none: a.x: no 'x' at component 2"},
	    {METRICS_JSON, "a", "{\"a\": \"12\"}", "none: a: not a number"},
	    {METRICS_JSON, "a.-1", "{\"a\": [1]}", "none: a.-1: no '-1' at component 2"},
	    {METRICS_JSON, "a..b", "{}", "expr: at 3: expected a path component (a.b.0.c)"},
	    {METRICS_JSON, "a",
	     "{\"a\": ", "body: line 1 column 6: unexpected token near end of file"},
	    {METRICS_NGINX_STUB_STATUS, "active", NULL, "291"},
	    {METRICS_NGINX_STUB_STATUS, "handled", NULL, "1.66309e+07"},
	    {METRICS_NGINX_STUB_STATUS, "waiting / 2", NULL, "53"},
	    {METRICS_NGINX_STUB_STATUS, "reading", NULL, "6"},
	    {METRICS_NGINX_STUB_STATUS, "idle", NULL,
	     "expr: at 1: expected one of active, reading, writing, waiting, accepts, handled, "
	     "requests"},
	    {METRICS_NGINX_STUB_STATUS, "active", "Active connections: x\n",
	     "body: not a stub_status page: expected a number after 'connections:'"},
	    {METRICS_NGINX_STUB_STATUS, "active", "<html>\n",
	     "body: not a stub_status page: expected 'Active'"},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		const char *body = rows[i].body;
		if (!body)
			body = rows[i].format == METRICS_PROMETHEUS ? node_body : stub_body;
		char got[320];
		eval(rows[i].format, rows[i].expr, body, got, sizeof(got));
		CHECK(strcmp(got, rows[i].want) == 0, "%s '%s': got '%s', want '%s'",
		      metrics_format_name(rows[i].format), rows[i].expr, got, rows[i].want);
	}
}

static void test_rates(void)
{
	metrics_expr_t *e = NULL;
	char err[128];
	CHECK(metrics_expr_parse(METRICS_PROMETHEUS, "rate(x_total{d=\"a\"}) / 1000", &e, err,
	                         sizeof(err)) == 0 &&
	          metrics_expr_is_rate(e),
	      "a rate parses");
	if (!e)
		return;
	double v = -1, prev = 1000;
	CHECK(!metrics_expr_finish(e, 5000, NULL, 2, &v), "no rate without a previous scrape");
	CHECK(metrics_expr_finish(e, 5000, &prev, 2, &v) && v == 2,
	      "(5000 - 1000) / 2 s / 1000: %g", v);
	CHECK(!metrics_expr_finish(e, 10, &prev, 2, &v), "a counter reset gives no value");
	CHECK(!metrics_expr_finish(e, 5000, &prev, 0, &v), "no time between scrapes: no value");
	prev = 5000;
	CHECK(metrics_expr_finish(e, 5000, &prev, 1, &v) && v == 0, "an idle counter: 0");
	metrics_expr_free(e);

	CHECK(metrics_expr_parse(METRICS_PROMETHEUS, "x", &e, err, sizeof(err)) == 0 &&
	          !metrics_expr_is_rate(e) && metrics_expr_finish(e, 7, NULL, 0, &v) && v == 7,
	      "a gauge needs no previous scrape");
	metrics_expr_free(e);

	metrics_doc_t *d = NULL;
	CHECK(metrics_doc_parse(METRICS_JSON, "{\"x\": 1}", 8, &d, err, sizeof(err)) == 0,
	      "json body");
	CHECK(metrics_expr_parse(METRICS_PROMETHEUS, "x", &e, err, sizeof(err)) == 0, "prom expr");
	double raw;
	CHECK(metrics_expr_sample(e, d, &raw, err, sizeof(err)) == STEER_EINVAL &&
	          strcmp(err, "x: expression of format prometheus, body of json") == 0,
	      "an expression of another format: %s", err);
	metrics_expr_free(e);
	metrics_doc_free(d);

	metrics_format_t f;
	CHECK(metrics_format_parse("nginx-stub-status", &f) == 0 &&
	          f == METRICS_NGINX_STUB_STATUS && metrics_format_parse("xml", &f) == STEER_EINVAL,
	      "format names");
}

/* A large exporter body: every sample is kept and summed, and a label-heavy line is fine. */
static void test_large_body(void)
{
	size_t cap = 1u << 20, len = 0;
	char *body = malloc(cap);
	for (int i = 0; i < 20000 && len + 128 < cap; i++)
		len += (size_t)snprintf(body + len, cap - len,
		                        "req_total{code=\"%d\",path=\"/p/%d\"} %d\n", 200 + i % 3,
		                        i, 1);
	metrics_doc_t *d = NULL;
	metrics_expr_t *e = NULL;
	char err[128];
	double raw = 0;
	CHECK(metrics_doc_parse(METRICS_PROMETHEUS, body, len, &d, err, sizeof(err)) == 0 &&
	          metrics_expr_parse(METRICS_PROMETHEUS, "req_total{code=\"201\"}", &e, err,
	                             sizeof(err)) == 0 &&
	          metrics_expr_sample(e, d, &raw, err, sizeof(err)) == 0 && raw == 6667,
	      "20000 samples, a third of them match: %g", raw);
	metrics_expr_free(e);
	metrics_doc_free(d);
	free(body);

	char many[4096] = "x{";
	for (int i = 0; i < METRICS_LABELS_MAX + 1; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "l%d=\"v\",", i);
	strcat(many, "} 1\n");
	collect_t c = {{0}, 0};
	CHECK(metrics_prom_parse(many, strlen(many), collect, &c, err, sizeof(err)) ==
	              STEER_EINVAL &&
	          strcmp(err, "line 1: more than 64 labels") == 0,
	      "too many labels: %s", err);
}

int main(void)
{
	test_prometheus_bodies();
	test_expressions();
	test_rates();
	test_large_body();
	return unit_finish("test_health_metrics");
}
