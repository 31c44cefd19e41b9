/* Unit tests of src/tap: the dnstap encoding (unpacked again with the generated protobuf-c
 * code, every field checked), sampling, a file written through fstrm and read back with
 * fstrm's reader (the ring wrapping many times under the I/O thread), and drops when the
 * queue is full or a frame too large, all counted. */
#include <arpa/inet.h>
#include <fstrm.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/err.h"
#include "tap/dnstap.pb-c.h"
#include "tap/tap.h"
#include "unit.h"

static const uint8_t QUERY[] = {0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
                                0x00, 0x00, 0x00, 0x03, 'w',  'w',  'w',  0x04, 't',
                                'e',  's',  't',  0x00, 0x00, 0x01, 0x00, 0x01};
static const uint8_t ZONE[] = {0x04, 't', 'e', 's', 't', 0x00};

static bool bytes_eq(ProtobufCBinaryData b, const void *data, size_t len)
{
	return b.len == len && memcmp(b.data, data, len) == 0;
}

static void test_encode_fields(void)
{
	steer_sockaddr_t client, server;
	CHECK(steer_sockaddr_parse("192.0.2.7:40001", 53, &client) == 0, "parse client");
	CHECK(steer_sockaddr_parse("[2001:db8::53]:5353", 53, &server) == 0, "parse server");
	uint8_t response[sizeof(QUERY)];
	memcpy(response, QUERY, sizeof(QUERY));
	response[2] |= 0x80;
	tap_msg_t msg = {.type = TAP_AUTH_RESPONSE,
	                 .tcp = true,
	                 .query_address = &client,
	                 .response_address = &server,
	                 .query_time = {1700000000, 123456789},
	                 .response_time = {1700000001, 987654321},
	                 .query = QUERY,
	                 .query_len = sizeof(QUERY),
	                 .response = response,
	                 .response_len = sizeof(response),
	                 .zone = ZONE,
	                 .zone_len = sizeof(ZONE)};
	uint8_t buf[1024];
	size_t len = tap_encode(&msg, "ns1.test", "steerd 0.1.0", buf, sizeof(buf));
	CHECK(len > 0, "encode");
	CHECK(tap_encode(&msg, "ns1.test", "steerd 0.1.0", buf, len - 1) == 0,
	      "a buffer one byte short is refused");
	Dnstap__Dnstap *d = dnstap__dnstap__unpack(NULL, len, buf);
	CHECK(d != NULL, "unpack");
	if (d == NULL)
		return;
	CHECK(d->type == DNSTAP__DNSTAP__TYPE__MESSAGE, "type MESSAGE");
	CHECK(d->has_identity && bytes_eq(d->identity, "ns1.test", 8), "identity");
	CHECK(d->has_version && bytes_eq(d->version, "steerd 0.1.0", 12), "version");
	CHECK(!d->has_extra, "no extra");
	Dnstap__Message *m = d->message;
	CHECK(m != NULL, "message present");
	if (m != NULL) {
		CHECK(m->type == DNSTAP__MESSAGE__TYPE__AUTH_RESPONSE, "message type %d", m->type);
		/* The family comes from the initiator (an IPv4 client here). */
		CHECK(m->has_socket_family && m->socket_family == DNSTAP__SOCKET_FAMILY__INET,
		      "family");
		CHECK(m->has_socket_protocol && m->socket_protocol == DNSTAP__SOCKET_PROTOCOL__TCP,
		      "protocol");
		CHECK(m->has_query_address && bytes_eq(m->query_address, &client.sin.sin_addr, 4),
		      "query address");
		CHECK(m->has_query_port && m->query_port == 40001, "query port %u", m->query_port);
		CHECK(m->has_response_address &&
		          bytes_eq(m->response_address, &server.sin6.sin6_addr, 16),
		      "response address");
		CHECK(m->has_response_port && m->response_port == 5353, "response port");
		CHECK(m->has_query_time_sec && m->query_time_sec == 1700000000, "query sec");
		CHECK(m->has_query_time_nsec && m->query_time_nsec == 123456789, "query nsec");
		CHECK(m->has_response_time_sec && m->response_time_sec == 1700000001, "resp sec");
		CHECK(m->has_response_time_nsec && m->response_time_nsec == 987654321, "resp nsec");
		CHECK(m->has_query_message && bytes_eq(m->query_message, QUERY, sizeof(QUERY)),
		      "query message");
		CHECK(m->has_response_message &&
		          bytes_eq(m->response_message, response, sizeof(response)),
		      "response message");
		CHECK(m->has_query_zone && bytes_eq(m->query_zone, ZONE, sizeof(ZONE)), "zone");
	}
	dnstap__dnstap__free_unpacked(d, NULL);

	/* Unset parts stay absent: a UDP query with no times, addresses or identity. */
	tap_msg_t bare = {.type = TAP_FORWARDER_QUERY, .query = QUERY, .query_len = sizeof(QUERY)};
	len = tap_encode(&bare, NULL, NULL, buf, sizeof(buf));
	d = dnstap__dnstap__unpack(NULL, len, buf);
	CHECK(d != NULL && d->message != NULL, "unpack bare");
	if (d != NULL && d->message != NULL) {
		m = d->message;
		CHECK(!d->has_identity && !d->has_version, "no identity, no version");
		CHECK(m->type == DNSTAP__MESSAGE__TYPE__FORWARDER_QUERY, "forwarder query");
		CHECK(m->socket_protocol == DNSTAP__SOCKET_PROTOCOL__UDP, "udp");
		CHECK(!m->has_socket_family && !m->has_query_address && !m->has_response_address &&
		          !m->has_query_port && !m->has_query_time_sec &&
		          !m->has_response_time_sec && !m->has_response_message &&
		          !m->has_query_zone,
		      "nothing but what was set");
	}
	if (d != NULL)
		dnstap__dnstap__free_unpacked(d, NULL);
}

static char tmp_path[256];

static tap_t *open_file_tap(unsigned queue, unsigned sample, unsigned n_threads)
{
	snprintf(tmp_path, sizeof(tmp_path), "/tmp/steer-test-tap-%d.fstrm", (int)getpid());
	tap_opts_t opts = {.file = tmp_path,
	                   .identity = "unit",
	                   .version = "steerd test",
	                   .n_threads = n_threads,
	                   .queue = queue,
	                   .messages = TAP_BIT(TAP_AUTH_QUERY) | TAP_BIT(TAP_AUTH_RESPONSE),
	                   .sample = sample};
	tap_t *tap = NULL;
	char err[256];
	int ret = tap_new(&opts, &tap, err, sizeof(err));
	CHECK(ret == 0, "tap_new: %s", err);
	return tap;
}

static void test_sampling_and_kinds(void)
{
	tap_t *tap = open_file_tap(16, 3, 2);
	if (tap == NULL)
		return;
	tap_thread_t *a = tap_thread(tap, 0), *b = tap_thread(tap, 1);
	CHECK(tap_wants(a, TAP_AUTH_QUERY) && tap_wants(a, TAP_AUTH_RESPONSE), "auth kinds on");
	CHECK(!tap_wants(a, TAP_CLIENT_QUERY) && !tap_wants(a, TAP_FORWARDER_RESPONSE),
	      "other kinds off");
	static const bool want[] = {true, false, false, true, false, false, true};
	for (size_t i = 0; i < STEER_ARRAY_LEN(want); i++)
		CHECK(tap_sample(a) == want[i], "sample 3, query %zu", i);
	/* Each thread samples on its own. */
	CHECK(tap_sample(b), "the other thread's first query is sampled");
	tap_free(tap);
	unlink(tmp_path);

	tap = open_file_tap(16, 1, 1);
	for (int i = 0; tap != NULL && i < 5; i++)
		CHECK(tap_sample(tap_thread(tap, 0)), "sample 1 logs every query (%d)", i);
	tap_free(tap);
	unlink(tmp_path);
}

/* Read every frame of the Frame Streams file @p path, checking each one; returns the count. */
static size_t read_back(const char *path, size_t *bad)
{
	struct fstrm_file_options *fopt = fstrm_file_options_init();
	fstrm_file_options_set_file_path(fopt, path);
	struct fstrm_reader_options *ropt = fstrm_reader_options_init();
	fstrm_reader_options_add_content_type(ropt, TAP_CONTENT_TYPE, strlen(TAP_CONTENT_TYPE));
	struct fstrm_reader *r = fstrm_file_reader_init(fopt, ropt);
	fstrm_file_options_destroy(&fopt);
	fstrm_reader_options_destroy(&ropt);
	size_t n = 0;
	*bad = 0;
	if (r == NULL || fstrm_reader_open(r) != fstrm_res_success) {
		(*bad)++;
		if (r != NULL)
			fstrm_reader_destroy(&r);
		return 0;
	}
	const uint8_t *data;
	size_t len;
	while (fstrm_reader_read(r, &data, &len) == fstrm_res_success) {
		Dnstap__Dnstap *d = dnstap__dnstap__unpack(NULL, len, data);
		if (d == NULL || d->message == NULL || !d->message->has_query_message ||
		    !bytes_eq(d->message->query_message, QUERY, sizeof(QUERY)) ||
		    !d->message->has_response_message || d->message->response_message.len < 900 ||
		    d->message->response_message.len > 906 ||
		    d->message->response_message.data[899] != 0xab)
			(*bad)++;
		if (d != NULL)
			dnstap__dnstap__free_unpacked(d, NULL);
		n++;
	}
	fstrm_reader_destroy(&r);
	return n;
}

static void test_file_round_trip(void)
{
	/* A small queue and the smallest ring, so both wrap hundreds of times. */
	tap_t *tap = open_file_tap(8, 1, 1);
	if (tap == NULL)
		return;
	tap_thread_t *th = tap_thread(tap, 0);
	uint8_t response[1000];
	memset(response, 0xab, sizeof(response));
	const int total = 20000;
	int ok = 0;
	for (int i = 0; i < total; i++) {
		/* Sizes that vary, so that chunks end at every alignment. */
		tap_msg_t msg = {.type = TAP_AUTH_RESPONSE,
		                 .query = QUERY,
		                 .query_len = sizeof(QUERY),
		                 .response = response,
		                 .response_len = 900 + (size_t)(i % 7)};
		if (tap_log(th, &msg) == 0)
			ok++;
		else
			usleep(200); /* full: give the I/O thread time to give bytes back */
	}
	tap_counters_t sum = {0};
	tap_stats(tap, &sum);
	CHECK(sum.logged == (uint64_t)ok, "logged %llu, accepted %d",
	      (unsigned long long)sum.logged, ok);
	CHECK(sum.logged + sum.dropped == (uint64_t)total, "every message logged or dropped");
	/* Enough frames to go round the 64 KiB ring a dozen times at least. */
	CHECK(ok >= 1000, "the I/O thread gave room back (%d of %d logged)", ok, total);
	tap_free(tap);
	size_t bad;
	size_t n = read_back(tmp_path, &bad);
	CHECK(n == (size_t)ok, "read back %zu frames, logged %d", n, ok);
	CHECK(bad == 0, "%zu frames were damaged", bad);
	unlink(tmp_path);
}

static void test_oversize_dropped(void)
{
	tap_t *tap = open_file_tap(8, 1, 1);
	if (tap == NULL)
		return;
	/* A frame holds at most a 64 KiB DNS message and its query. */
	static uint8_t big[80000];
	tap_msg_t msg = {.type = TAP_AUTH_RESPONSE, .response = big, .response_len = 65535};
	CHECK(tap_log(tap_thread(tap, 0), &msg) == 0, "a 64 kB answer is logged");
	msg.response_len = sizeof(big);
	CHECK(tap_log(tap_thread(tap, 0), &msg) == STEER_EAGAIN, "an 80 kB frame is dropped");
	tap_counters_t sum = {0};
	tap_stats(tap, &sum);
	CHECK(sum.dropped == 1 && sum.logged == 1, "counted as dropped");
	tap_free(tap);
	unlink(tmp_path);
}

/*
 * A collector that accepts the connection and then never answers the handshake: fstrm's I/O
 * thread waits for it, so its queue fills and every further message must be dropped at once.
 */
static void test_stalled_reader_drops(void)
{
	char path[108];
	snprintf(path, sizeof(path), "/tmp/steer-test-tap-%d.sock", (int)getpid());
	unlink(path);
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	CHECK(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) == 0 && listen(lfd, 4) == 0,
	      "listen on %s", path);
	tap_opts_t opts = {.socket = path,
	                   .n_threads = 1,
	                   .queue = 4,
	                   .messages = TAP_BIT(TAP_AUTH_QUERY),
	                   .sample = 1};
	tap_t *tap = NULL;
	char err[256];
	CHECK(tap_new(&opts, &tap, err, sizeof(err)) == 0, "tap_new: %s", err);
	if (tap == NULL)
		return;
	struct pollfd pfd = {.fd = lfd, .events = POLLIN};
	CHECK(poll(&pfd, 1, 2000) == 1, "the writer connects");
	int cfd = accept(lfd, NULL, NULL);
	tap_thread_t *th = tap_thread(tap, 0);
	tap_msg_t msg = {.type = TAP_AUTH_QUERY, .query = QUERY, .query_len = sizeof(QUERY)};
	struct timespec t0 = tap_now();
	int dropped = 0;
	for (int i = 0; i < 1000; i++)
		dropped += tap_log(th, &msg) == STEER_EAGAIN;
	struct timespec t1 = tap_now();
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	CHECK(dropped >= 1000 - 4, "%d of 1000 dropped with a queue of 4", dropped);
	CHECK(ms < 100, "1000 messages took %.1f ms: the writer never waits", ms);
	tap_counters_t sum = {0};
	tap_stats(tap, &sum);
	CHECK(sum.dropped == (uint64_t)dropped && sum.logged + sum.dropped == 1000, "counted");
	/* Closing the collector lets the I/O thread give up, so that the writer stops. */
	close(cfd);
	close(lfd);
	tap_free(tap);
	unlink(path);
}

/* No reader at all: the I/O thread throws the frames away, and they count as dropped. */
static void test_no_reader_counts_drops(void)
{
	char path[108];
	snprintf(path, sizeof(path), "/tmp/steer-test-tap-%d-nobody.sock", (int)getpid());
	unlink(path);
	tap_opts_t opts = {.socket = path,
	                   .n_threads = 1,
	                   .queue = 16,
	                   .messages = TAP_BIT(TAP_AUTH_QUERY),
	                   .sample = 1};
	tap_t *tap = NULL;
	char err[256];
	CHECK(tap_new(&opts, &tap, err, sizeof(err)) == 0, "tap_new: %s", err);
	if (tap == NULL)
		return;
	tap_msg_t msg = {.type = TAP_AUTH_QUERY, .query = QUERY, .query_len = sizeof(QUERY)};
	for (int i = 0; i < 10; i++)
		(void)tap_log(tap_thread(tap, 0), &msg);
	tap_counters_t sum = {0};
	for (int i = 0; i < 300; i++) {
		memset(&sum, 0, sizeof(sum));
		tap_stats(tap, &sum);
		if (sum.dropped == 10)
			break;
		usleep(10000);
	}
	CHECK(sum.dropped == 10 && sum.logged == 0, "without a reader: %llu logged, %llu dropped",
	      (unsigned long long)sum.logged, (unsigned long long)sum.dropped);
	tap_free(tap);
}

/* A collector built from fstrm's own reader over an accepted connection: it does the
 * receiving side of the handshake, then reads frames, pausing once for a while (less than
 * the writer's send timeout, which would disconnect it). */
typedef struct {
	int lfd;
	size_t frames, bad;
	bool finished;
} slow_reader_t;

static fstrm_res fd_read(void *obj, void *data, size_t count)
{
	int fd = *(int *)obj;
	uint8_t *p = data;
	while (count > 0) {
		ssize_t n = read(fd, p, count);
		if (n == 0)
			return fstrm_res_stop;
		if (n < 0)
			return fstrm_res_failure;
		p += n;
		count -= (size_t)n;
	}
	return fstrm_res_success;
}

static fstrm_res fd_write(void *obj, const struct iovec *iov, int iovcnt)
{
	int fd = *(int *)obj;
	for (int i = 0; i < iovcnt; i++)
		if (write(fd, iov[i].iov_base, iov[i].iov_len) != (ssize_t)iov[i].iov_len)
			return fstrm_res_failure;
	return fstrm_res_success;
}

static fstrm_res fd_noop(void *obj)
{
	(void)obj;
	return fstrm_res_success;
}

static void *slow_reader_main(void *arg)
{
	slow_reader_t *sr = arg;
	int fd = accept(sr->lfd, NULL, NULL);
	struct fstrm_rdwr *rdwr = fstrm_rdwr_init(&fd);
	fstrm_rdwr_set_open(rdwr, fd_noop);
	fstrm_rdwr_set_close(rdwr, fd_noop);
	fstrm_rdwr_set_read(rdwr, fd_read);
	fstrm_rdwr_set_write(rdwr, fd_write);
	struct fstrm_reader_options *ropt = fstrm_reader_options_init();
	fstrm_reader_options_add_content_type(ropt, TAP_CONTENT_TYPE, strlen(TAP_CONTENT_TYPE));
	struct fstrm_reader *r = fstrm_reader_init(ropt, &rdwr);
	fstrm_reader_options_destroy(&ropt);
	if (fstrm_reader_open(r) == fstrm_res_success) {
		const uint8_t *data;
		size_t len;
		fstrm_res res;
		while ((res = fstrm_reader_read(r, &data, &len)) == fstrm_res_success) {
			Dnstap__Dnstap *d = dnstap__dnstap__unpack(NULL, len, data);
			if (d == NULL || d->message == NULL ||
			    d->message->response_message.len != 2000)
				sr->bad++;
			if (d != NULL)
				dnstap__dnstap__free_unpacked(d, NULL);
			if (++sr->frames == 200)
				usleep(600 * 1000);
		}
		sr->finished = res == fstrm_res_stop;
	}
	fstrm_reader_destroy(&r);
	close(fd);
	return NULL;
}

static void test_slow_reader_gets_every_frame(void)
{
	char path[108];
	snprintf(path, sizeof(path), "/tmp/steer-test-tap-%d-slow.sock", (int)getpid());
	unlink(path);
	slow_reader_t sr = {.lfd = socket(AF_UNIX, SOCK_STREAM, 0)};
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	CHECK(bind(sr.lfd, (struct sockaddr *)&sun, sizeof(sun)) == 0 && listen(sr.lfd, 4) == 0,
	      "listen on %s", path);
	pthread_t reader;
	pthread_create(&reader, NULL, slow_reader_main, &sr);
	tap_opts_t opts = {.socket = path,
	                   .n_threads = 1,
	                   .queue = 256,
	                   .messages = TAP_BIT(TAP_AUTH_RESPONSE),
	                   .sample = 1};
	tap_t *tap = NULL;
	char err[256];
	CHECK(tap_new(&opts, &tap, err, sizeof(err)) == 0, "tap_new: %s", err);
	if (tap == NULL)
		return;
	static uint8_t response[2000];
	tap_msg_t msg = {.type = TAP_AUTH_RESPONSE, .response = response, .response_len = 2000};
	int logged = 0;
	/* 3000 frames of 2 kB: far more than the socket buffers, so sends wait for the reader,
	 * the queue fills during its pause and the writer waits between tries. */
	for (int tries = 0; logged < 3000 && tries < 200000; tries++) {
		if (tap_log(tap_thread(tap, 0), &msg) == 0)
			logged++;
		else
			usleep(1000);
	}
	CHECK(logged == 3000, "logged %d of 3000", logged);
	tap_free(tap); /* flushes, then ends the stream */
	pthread_join(reader, NULL);
	CHECK(sr.frames == (size_t)logged && sr.bad == 0 && sr.finished,
	      "the reader got %zu intact frames of %d (%zu damaged), stream %s", sr.frames, logged,
	      sr.bad, sr.finished ? "ended cleanly" : "cut");
	close(sr.lfd);
	unlink(path);
}

static void test_bad_options(void)
{
	char err[256];
	tap_t *tap = NULL;
	tap_opts_t none = {.n_threads = 1};
	CHECK(tap_new(&none, &tap, err, sizeof(err)) == STEER_EINVAL, "neither socket nor file");
	tap_opts_t both = {.socket = "/tmp/x.sock", .file = "/tmp/x.fstrm", .n_threads = 1};
	CHECK(tap_new(&both, &tap, err, sizeof(err)) == STEER_EINVAL, "both socket and file");
	tap_opts_t bad_dir = {.file = "/nonexistent-dir/tap.fstrm", .n_threads = 1};
	CHECK(tap_new(&bad_dir, &tap, err, sizeof(err)) < 0 && strstr(err, "cannot open") != NULL,
	      "an unwritable file fails the start: %s", err);
}

int main(void)
{
	test_encode_fields();
	test_sampling_and_kinds();
	test_file_round_trip();
	test_oversize_dropped();
	test_stalled_reader_drops();
	test_no_reader_counts_drops();
	test_slow_reader_gets_every_frame();
	test_bad_options();
	return unit_finish("tap");
}
