/*
 * Fuzz target: the metrics monitor's parsers (src/health/metrics_parse.c), which read bodies
 * from the sites' endpoints and expressions from the configuration.
 *
 * Input: byte 0 picks the format (low two bits: prometheus, json, nginx-stub-status) and, with
 * bit 7 set, makes the rest an expression instead of a body. A body is parsed by the sample
 * callback parser and as a document; every sample must have a well-formed name, and a parsed
 * document is evaluated with fixed expressions, whose values must be finite. An expression
 * that parses is evaluated over a fixed body of its format.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "health/metrics_parse.h"

static const char *const exprs[][3] = {
    {"node_network_receive_packets_total", "rate(node_cpu_seconds_total{mode=\"idle\"}) * 100",
     "x{a=\"1\",b=\"\\\"\"} / 8"},
    {"a.b.0.c", "rate(x) / 1000", "0"},
    {"active", "rate(requests)", "waiting * 2"},
};

static const char *const bodies[] = {
    "x_total{a=\"1\"} 5\nnode_network_receive_packets_total{device=\"eth0\"} 12\n",
    "{\"a\": {\"b\": [{\"c\": 1}]}, \"x\": 2}",
    ("Active connections: 1 \nserver accepts handled requests\n 1 2 3 \n"
     "Reading: 0 Writing: 1 Waiting: 0 \n"),
};

static int check_sample(const metrics_sample_t *s, void *ctx)
{
	(void)ctx;
	FUZZ_CHECK(s->name && s->name[0] != '\0' && !(s->name[0] >= '0' && s->name[0] <= '9'));
	FUZZ_CHECK(s->n_labels <= METRICS_LABELS_MAX);
	for (size_t i = 0; i < s->n_labels; i++)
		FUZZ_CHECK(s->labels[i].name[0] != '\0' && s->labels[i].value != NULL);
	return 0;
}

static void evaluate(const metrics_expr_t *e, const metrics_doc_t *d)
{
	char err[256];
	double raw, v, prev = 0;
	if (metrics_expr_sample(e, d, &raw, err, sizeof(err)) != 0)
		return;
	FUZZ_CHECK(isfinite(raw));
	if (metrics_expr_finish(e, raw, &prev, 1.5, &v))
		FUZZ_CHECK(isfinite(v));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	metrics_format_t format = (metrics_format_t)((data[0] & 3) % 3);
	const char *text = (const char *)data + 1;
	size_t len = size - 1;
	char err[256];
	if (data[0] & 0x80) {
		char *expr = malloc(len + 1);
		memcpy(expr, text, len);
		expr[len] = '\0';
		metrics_expr_t *e = NULL;
		if (metrics_expr_parse(format, expr, &e, err, sizeof(err)) == 0) {
			metrics_doc_t *d = NULL;
			const char *body = bodies[format];
			FUZZ_CHECK(metrics_doc_parse(format, body, strlen(body), &d, err,
			                             sizeof(err)) == 0);
			evaluate(e, d);
			metrics_doc_free(d);
			metrics_expr_free(e);
		}
		free(expr);
		return 0;
	}
	if (format == METRICS_PROMETHEUS)
		(void)metrics_prom_parse(text, len, check_sample, NULL, err, sizeof(err));
	metrics_doc_t *d = NULL;
	if (metrics_doc_parse(format, text, len, &d, err, sizeof(err)) != 0)
		return 0;
	for (size_t i = 0; i < 3; i++) {
		metrics_expr_t *e = NULL;
		FUZZ_CHECK(metrics_expr_parse(format, exprs[format][i], &e, err, sizeof(err)) == 0);
		evaluate(e, d);
		metrics_expr_free(e);
	}
	metrics_doc_free(d);
	return 0;
}
