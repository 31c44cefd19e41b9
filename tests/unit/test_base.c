/* Unit tests of src/base: error texts, socket address and prefix parsing and matching, the
 * stderr log line format. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/sockaddr.h"
#include "unit.h"

static void test_sockaddr_parse(void)
{
	static const struct {
		const char *text;
		int ret;
		const char *formatted;
	} rows[] = {
	    {"127.0.0.1:5353", 0, "127.0.0.1:5353"},
	    {"127.0.0.1", 0, "127.0.0.1:53"},
	    {"[::1]:5353", 0, "[::1]:5353"},
	    {"::1", 0, "[::1]:53"},
	    {"[2001:db8::1]", 0, "[2001:db8::1]:53"},
	    {"0.0.0.0:0", 0, "0.0.0.0:0"},
	    {"127.0.0.1:65536", STEER_EINVAL, NULL},
	    {"127.0.0.1:", STEER_EINVAL, NULL},
	    {"[::1]5353", STEER_EINVAL, NULL},
	    {"localhost:53", STEER_EINVAL, NULL},
	    {"", STEER_EINVAL, NULL},
	    {"1.2.3.4:-1", STEER_EINVAL, NULL},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		steer_sockaddr_t addr;
		int ret = steer_sockaddr_parse(rows[i].text, 53, &addr);
		CHECK(ret == rows[i].ret, "parse '%s' returned %d, want %d", rows[i].text, ret,
		      rows[i].ret);
		if (ret == 0 && rows[i].formatted) {
			char buf[STEER_SOCKADDR_STRLEN];
			steer_sockaddr_str(&addr, buf, sizeof(buf));
			CHECK(strcmp(buf, rows[i].formatted) == 0, "format '%s' gave '%s'",
			      rows[i].text, buf);
		}
	}
}

static void test_prefix(void)
{
	static const struct {
		const char *prefix;
		int ret;
		const char *addr;
		bool match;
	} rows[] = {
	    {"192.0.2.0/24", 0, "192.0.2.77", true},
	    {"192.0.2.0/24", 0, "192.0.3.1", false},
	    {"192.0.2.0/24", 0, "::ffff:192.0.2.5", true},
	    {"192.0.2.1", 0, "192.0.2.1", true},
	    {"192.0.2.1", 0, "192.0.2.2", false},
	    {"0.0.0.0/0", 0, "203.0.113.9", true},
	    {"0.0.0.0/0", 0, "2001:db8::1", false},
	    {"2001:db8::/32", 0, "2001:db8:ffff::1", true},
	    {"2001:db8::/32", 0, "2001:db9::1", false},
	    {"10.0.0.0/7", 0, "11.255.0.1", true},
	    {"192.0.2.1/24", STEER_EINVAL, NULL, false}, /* host bits set */
	    {"192.0.2.0/33", STEER_EINVAL, NULL, false},
	    {"2001:db8::/129", STEER_EINVAL, NULL, false},
	    {"192.0.2.0/", STEER_EINVAL, NULL, false},
	    {"nonsense/8", STEER_EINVAL, NULL, false},
	};
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		steer_prefix_t prefix;
		int ret = steer_prefix_parse(rows[i].prefix, &prefix);
		CHECK(ret == rows[i].ret, "prefix '%s' returned %d", rows[i].prefix, ret);
		if (ret != 0 || !rows[i].addr)
			continue;
		steer_sockaddr_t addr;
		CHECK(steer_sockaddr_parse(rows[i].addr, 0, &addr) == 0, "addr %s", rows[i].addr);
		CHECK(steer_prefix_match(&prefix, &addr) == rows[i].match, "%s in %s should be %d",
		      rows[i].addr, rows[i].prefix, rows[i].match);
	}
}

static void test_err_and_log(void)
{
	CHECK(strcmp(steer_strerror(STEER_EOK), "success") == 0, "EOK text");
	CHECK(strcmp(steer_strerror(STEER_ENOENT), strerror(ENOENT)) == 0, "errno text");
	CHECK(strcmp(steer_strerror(STEER_EMALF), "malformed data") == 0, "project text");
	log_level_t level;
	CHECK(log_level_parse("debug", &level) == 0 && level == LOG_LEVEL_DEBUG, "debug level");
	CHECK(log_level_parse("loud", &level) == STEER_EINVAL, "bad level rejected");
}

/* Run log_info() with stderr redirected to a file and return the line written. */
static const char *logged_line(void)
{
	static char buf[512];
	buf[0] = '\0';
	fflush(stderr);
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	if (!tmp || saved < 0 || dup2(fileno(tmp), STDERR_FILENO) < 0) {
		CHECK(false, "redirect stderr");
		return buf;
	}
	log_info("hello %d", 42);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	if (!fgets(buf, sizeof(buf), tmp))
		buf[0] = '\0';
	fclose(tmp);
	return buf;
}

static void test_log_format(void)
{
	char stamp[64];
	int n = log_timestamp(stamp, sizeof(stamp));
	unsigned y, mo, d, h, mi, sec, ms, oh, om;
	char sign;
	CHECK(n == 29 &&
	          sscanf(stamp, "%4u-%2u-%2uT%2u:%2u:%2u.%3u%c%2u:%2u", &y, &mo, &d, &h, &mi, &sec,
	                 &ms, &sign, &oh, &om) == 10 &&
	          (sign == '+' || sign == '-') && y >= 2024 && mo >= 1 && mo <= 12 && ms <= 999,
	      "ISO 8601 timestamp with ms and offset: \"%s\" (%d)", stamp, n);
	CHECK(log_timestamp(stamp, 29) == 0 && stamp[0] == '\0', "short buffer left empty");

	unsetenv("JOURNAL_STREAM");
	log_setup(LOG_TARGET_STDERR, LOG_LEVEL_INFO);
	const char *line = logged_line();
	CHECK(strlen(line) > 30 && line[29] == ' ' &&
	          strcmp(line + 30, "steerd[info]: hello 42\n") == 0 && line[10] == 'T',
	      "stderr line starts with a timestamp: \"%s\"", line);

	setenv("JOURNAL_STREAM", "8:12345", 1);
	log_setup(LOG_TARGET_STDERR, LOG_LEVEL_INFO);
	line = logged_line();
	CHECK(strcmp(line, "<6>steerd[info]: hello 42\n") == 0,
	      "under journald: priority prefix, no timestamp: \"%s\"", line);
	unsetenv("JOURNAL_STREAM");
	log_setup(LOG_TARGET_STDERR, LOG_LEVEL_INFO);
}

int main(void)
{
	test_sockaddr_parse();
	test_prefix();
	test_err_and_log();
	test_log_format();
	return unit_finish("test_base");
}
