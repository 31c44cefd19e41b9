/*
 * The Prometheus text writer: exact output for each kind of sample, label escaping, number
 * formatting, and the sticky errors a renderer's mistakes must produce.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "ops/prom.h"
#include "unit.h"

static void check_text(prom_t *p, const char *want, const char *what)
{
	size_t len = 0;
	const char *got = prom_text(p, &len);
	CHECK(prom_error(p) == 0, "%s: unexpected error %s", what, prom_errmsg(p));
	CHECK(strcmp(got, want) == 0 && len == strlen(want), "%s:\n--- got\n%s--- want\n%s", what,
	      got, want);
}

static void test_counter_and_gauge(void)
{
	prom_t p;
	prom_init(&p);
	prom_family(&p, "steer_queries_total", "Queries received.", PROM_COUNTER);
	prom_label_t udp[] = {{"transport", "udp"}, {"family", "ipv4"}};
	prom_counter(&p, udp, 2, 18446744073709551615ull);
	prom_counter(&p, NULL, 0, 0);
	prom_family(&p, "steer_up", "Health state, 1 up.", PROM_GAUGE);
	prom_gauge(&p, NULL, 0, 1);
	prom_gauge(&p, NULL, 0, -3);
	prom_gauge(&p, NULL, 0, 0.001);
	prom_gauge(&p, NULL, 0, 0.1 + 0.2);
	prom_gauge(&p, NULL, 0, 1764647079.0);
	prom_gauge(&p, NULL, 0, 1e300);
	prom_gauge(&p, NULL, 0, 123 / 1e6);
	prom_gauge(&p, NULL, 0, -2.5);
	prom_gauge(&p, NULL, 0, 1e-7);
	prom_gauge(&p, NULL, 0, 1234567.000001);
	check_text(&p,
	           "# HELP steer_queries_total Queries received.\n"
	           "# TYPE steer_queries_total counter\n"
	           "steer_queries_total{transport=\"udp\",family=\"ipv4\"} 18446744073709551615\n"
	           "steer_queries_total 0\n"
	           "# HELP steer_up Health state, 1 up.\n"
	           "# TYPE steer_up gauge\n"
	           "steer_up 1\n"
	           "steer_up -3\n"
	           "steer_up 0.001\n"
	           "steer_up 0.30000000000000004\n"
	           "steer_up 1764647079\n"
	           "steer_up 1e+300\n"
	           "steer_up 0.000123\n"
	           "steer_up -2.5\n"
	           "steer_up 1e-07\n"
	           "steer_up 1234567.000001\n",
	           "counter and gauge");
	prom_deinit(&p);
}

static void test_special_values(void)
{
	prom_t p;
	prom_init(&p);
	prom_family(&p, "g", "x", PROM_GAUGE);
	prom_gauge(&p, NULL, 0, NAN);
	prom_gauge(&p, NULL, 0, INFINITY);
	prom_gauge(&p, NULL, 0, -INFINITY);
	check_text(&p, "# HELP g x\n# TYPE g gauge\ng NaN\ng +Inf\ng -Inf\n", "NaN and infinities");
	prom_deinit(&p);
}

static void test_escaping(void)
{
	static const struct {
		const char *value;
		const char *want;
	} rows[] = {
	    {"plain", "plain"},
	    {"back\\slash", "back\\\\slash"},
	    {"a \"quoted\" word", "a \\\"quoted\\\" word"},
	    {"two\nlines", "two\\nlines"},
	    {"\\\"\n", "\\\\\\\"\\n"},
	    {"", ""},
	    {"ünïcode ok", "ünïcode ok"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		prom_t p;
		prom_init(&p);
		prom_family(&p, "m", "help with \\ and\nnewline and \"quotes\"", PROM_GAUGE);
		prom_label_t label = {"name", rows[i].value};
		prom_gauge(&p, &label, 1, 2);
		char want[256];
		snprintf(want, sizeof(want),
		         "# HELP m help with \\\\ and\\nnewline and \"quotes\"\n# TYPE m gauge\n"
		         "m{name=\"%s\"} 2\n",
		         rows[i].want);
		check_text(&p, want, rows[i].value);
		prom_deinit(&p);
	}
}

static void test_histogram(void)
{
	prom_t p;
	prom_init(&p);
	prom_family(&p, "steer_query_duration_seconds", "Latency.", PROM_HISTOGRAM);
	const double bounds[] = {0.00005, 0.001, 1};
	const uint64_t counts[] = {3, 0, 5, 2};
	prom_label_t tcp = {"transport", "tcp"};
	prom_histogram(&p, &tcp, 1, bounds, 3, counts, 2.5);
	const uint64_t none[] = {0, 0, 0, 0};
	prom_histogram(&p, NULL, 0, bounds, 3, none, 0);
	check_text(&p,
	           "# HELP steer_query_duration_seconds Latency.\n"
	           "# TYPE steer_query_duration_seconds histogram\n"
	           "steer_query_duration_seconds_bucket{transport=\"tcp\",le=\"0.00005\"} 3\n"
	           "steer_query_duration_seconds_bucket{transport=\"tcp\",le=\"0.001\"} 3\n"
	           "steer_query_duration_seconds_bucket{transport=\"tcp\",le=\"1\"} 8\n"
	           "steer_query_duration_seconds_bucket{transport=\"tcp\",le=\"+Inf\"} 10\n"
	           "steer_query_duration_seconds_sum{transport=\"tcp\"} 2.5\n"
	           "steer_query_duration_seconds_count{transport=\"tcp\"} 10\n"
	           "steer_query_duration_seconds_bucket{le=\"0.00005\"} 0\n"
	           "steer_query_duration_seconds_bucket{le=\"0.001\"} 0\n"
	           "steer_query_duration_seconds_bucket{le=\"1\"} 0\n"
	           "steer_query_duration_seconds_bucket{le=\"+Inf\"} 0\n"
	           "steer_query_duration_seconds_sum 0\n"
	           "steer_query_duration_seconds_count 0\n",
	           "histogram");
	prom_deinit(&p);
}

typedef void (*misuse_fn)(prom_t *p);

static void misuse_bad_metric_name(prom_t *p)
{
	prom_family(p, "9lives", "x", PROM_GAUGE);
}
static void misuse_empty_metric_name(prom_t *p)
{
	prom_family(p, "", "x", PROM_GAUGE);
}
static void misuse_twice(prom_t *p)
{
	prom_family(p, "a", "x", PROM_GAUGE);
	prom_family(p, "a", "y", PROM_COUNTER);
}
static void misuse_no_family(prom_t *p)
{
	prom_gauge(p, NULL, 0, 1);
}
static void misuse_wrong_type(prom_t *p)
{
	prom_family(p, "a", "x", PROM_GAUGE);
	prom_counter(p, NULL, 0, 1);
}
static void misuse_bad_label_name(prom_t *p)
{
	prom_family(p, "a", "x", PROM_GAUGE);
	prom_label_t bad = {"has:colon", "v"};
	prom_gauge(p, &bad, 1, 1);
}
static void misuse_reserved_label(prom_t *p)
{
	prom_family(p, "a", "x", PROM_GAUGE);
	prom_label_t bad = {"__name__", "v"};
	prom_gauge(p, &bad, 1, 1);
}
static void misuse_null_value(prom_t *p)
{
	prom_family(p, "a", "x", PROM_GAUGE);
	prom_label_t bad = {"l", NULL};
	prom_gauge(p, &bad, 1, 1);
}
static void misuse_duplicate_label(prom_t *p)
{
	prom_family(p, "a", "x", PROM_GAUGE);
	prom_label_t twice[] = {{"l", "1"}, {"l", "2"}};
	prom_gauge(p, twice, 2, 1);
}
static void misuse_le_label(prom_t *p)
{
	prom_family(p, "h", "x", PROM_HISTOGRAM);
	prom_label_t le = {"le", "1"};
	const double bounds[] = {1};
	const uint64_t counts[] = {0, 0};
	prom_histogram(p, &le, 1, bounds, 1, counts, 0);
}
static void misuse_unsorted_bounds(prom_t *p)
{
	prom_family(p, "h", "x", PROM_HISTOGRAM);
	const double bounds[] = {1, 1};
	const uint64_t counts[] = {0, 0, 0};
	prom_histogram(p, NULL, 0, bounds, 2, counts, 0);
}
static void misuse_infinite_bound(prom_t *p)
{
	prom_family(p, "h", "x", PROM_HISTOGRAM);
	const double bounds[] = {INFINITY};
	const uint64_t counts[] = {0, 0};
	prom_histogram(p, NULL, 0, bounds, 1, counts, 0);
}
static void misuse_no_buckets(prom_t *p)
{
	prom_family(p, "h", "x", PROM_HISTOGRAM);
	const double bounds[] = {1};
	const uint64_t counts[] = {0};
	prom_histogram(p, NULL, 0, bounds, 0, counts, 0);
}

static void test_misuse(void)
{
	static const struct {
		const char *what;
		misuse_fn fn;
		int err;
		const char *msg;
	} rows[] = {
	    {"metric name starting with a digit", misuse_bad_metric_name, STEER_EINVAL,
	     "invalid metric name \"9lives\""},
	    {"empty metric name", misuse_empty_metric_name, STEER_EINVAL, "invalid metric name"},
	    {"family declared twice", misuse_twice, STEER_EEXIST, "declared twice"},
	    {"sample before any family", misuse_no_family, STEER_EINVAL, "outside"},
	    {"counter in a gauge family", misuse_wrong_type, STEER_EINVAL, "outside"},
	    {"label name with a colon", misuse_bad_label_name, STEER_EINVAL, "invalid label"},
	    {"reserved label name", misuse_reserved_label, STEER_EINVAL, "invalid label"},
	    {"label without a value", misuse_null_value, STEER_EINVAL, "invalid label"},
	    {"label given twice", misuse_duplicate_label, STEER_EINVAL, "given twice"},
	    {"le label on a histogram", misuse_le_label, STEER_EINVAL, "le"},
	    {"bounds not increasing", misuse_unsorted_bounds, STEER_EINVAL, "increasing"},
	    {"infinite bound", misuse_infinite_bound, STEER_EINVAL, "finite"},
	    {"histogram without buckets", misuse_no_buckets, STEER_EINVAL, "without buckets"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		prom_t p;
		prom_init(&p);
		rows[i].fn(&p);
		CHECK(prom_error(&p) == rows[i].err, "%s: error %d, want %d", rows[i].what,
		      prom_error(&p), rows[i].err);
		CHECK(strstr(prom_errmsg(&p), rows[i].msg) != NULL, "%s: message \"%s\"",
		      rows[i].what, prom_errmsg(&p));
		/* Sticky: nothing more is written and the first message stays. */
		size_t before = 0, after = 0;
		prom_text(&p, &before);
		prom_family(&p, "later", "x", PROM_GAUGE);
		prom_gauge(&p, NULL, 0, 1);
		prom_text(&p, &after);
		CHECK(before == after, "%s: wrote after the error", rows[i].what);
		CHECK(strstr(prom_errmsg(&p), rows[i].msg) != NULL, "%s: message replaced",
		      rows[i].what);
		prom_deinit(&p);
	}
}

/* A label set rendered once and used by two families reads as if given each time. */
static void test_labels_text(void)
{
	prom_t p;
	prom_init(&p);
	prom_label_t l[] = {{"check", "web@192.0.2.1:80"}, {"note", "a \"b\"\n"}};
	char *text = prom_labels_text(&p, l, 2);
	char *none = prom_labels_text(&p, NULL, 0);
	CHECK(text && strcmp(text, "{check=\"web@192.0.2.1:80\",note=\"a \\\"b\\\"\\n\"}") == 0,
	      "label text: %s", text ? text : "(null)");
	CHECK(none && strcmp(none, "") == 0, "no labels: \"%s\"", none ? none : "(null)");
	prom_family(&p, "c_total", "x", PROM_COUNTER);
	prom_counter_with(&p, text, 7);
	prom_counter_with(&p, none, 1);
	prom_family(&p, "g", "y", PROM_GAUGE);
	prom_gauge_with(&p, text, 0.5);
	check_text(&p,
	           "# HELP c_total x\n# TYPE c_total counter\n"
	           "c_total{check=\"web@192.0.2.1:80\",note=\"a \\\"b\\\"\\n\"} 7\n"
	           "c_total 1\n"
	           "# HELP g y\n# TYPE g gauge\n"
	           "g{check=\"web@192.0.2.1:80\",note=\"a \\\"b\\\"\\n\"} 0.5\n",
	           "labels text");
	prom_gauge_with(&p, NULL, 1);
	CHECK(prom_error(&p) == STEER_EINVAL, "NULL label text is an error");
	free(text);
	free(none);
	prom_deinit(&p);

	prom_init(&p);
	prom_label_t bad[] = {{"a", "1"}, {"a", "2"}};
	CHECK(prom_labels_text(&p, bad, 2) == NULL && prom_error(&p) == STEER_EINVAL,
	      "repeated label in a label text");
	prom_deinit(&p);
}

/* Growth: many samples, each one intact, and prom_take() hands over all of it. */
static void test_growth_and_take(void)
{
	prom_t p;
	prom_init(&p);
	prom_family(&p, "steer_target_up", "x", PROM_GAUGE);
	char addr[32];
	for (int i = 0; i < 50000; i++) {
		snprintf(addr, sizeof(addr), "10.%d.%d.%d", i >> 16, (i >> 8) & 255, i & 255);
		prom_label_t label = {"address", addr};
		prom_gauge(&p, &label, 1, i & 1);
	}
	size_t len = 0;
	char *text = prom_take(&p, &len);
	CHECK(prom_error(&p) == 0, "growth: error %s", prom_errmsg(&p));
	CHECK(strlen(text) == len, "growth: length %zu vs %zu", strlen(text), len);
	size_t lines = 0;
	for (const char *c = text; *c; c++)
		lines += *c == '\n';
	CHECK(lines == 50002, "growth: %zu lines", lines);
	CHECK(strstr(text, "steer_target_up{address=\"10.0.195.79\"} 1\n") != NULL,
	      "growth: sample 49999 missing");
	free(text);
	size_t empty = 1;
	CHECK(strcmp(prom_text(&p, &empty), "") == 0 && empty == 0, "take leaves the writer empty");
	prom_deinit(&p);
}

int main(void)
{
	test_counter_and_gauge();
	test_special_values();
	test_escaping();
	test_histogram();
	test_misuse();
	test_labels_text();
	test_growth_and_take();
	return unit_finish("ops_prom");
}
