/*
 * The dnstap writer. Each writing thread owns a byte ring: it encodes a frame in place and
 * submits a pointer to it to its own single-producer fstrm queue. fstrm's I/O thread writes
 * the frame and calls back, and that callback (the ring's only consumer) marks the chunk done
 * and moves the ring's tail over every chunk that is done, so the bytes are reused in order
 * even if frames came back out of order.
 */
#include "tap/tap.h"

#include <fcntl.h>
#include <fstrm.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"
#include "tap/dnstap.pb-c.h"
#include "tap/socket.h"

#define TAP_QUEUE_DEFAULT 16384
/* Ring bytes per queued message: a dnstap frame of a typical query or answer is 100 to 600
 * bytes, and a ring smaller than the queue only makes drops come from the ring first. */
#define TAP_RING_PER_MESSAGE 256
#define TAP_RING_MIN         (64 * 1024)
#define TAP_RING_MAX         (8 * 1024 * 1024)
#define TAP_ALIGN            8
/* The largest frame: a 64 KiB response (TCP), its query, addresses, identity and version. */
#define TAP_FRAME_MAX (70 * 1024)

/* The start of every chunk of a ring. A padding chunk fills the end of the ring when the next
 * frame does not fit there. */
typedef struct {
	_Atomic uint32_t size; /* bytes from this header to the next chunk */
	_Atomic uint32_t done; /* fstrm gave the frame back (or: padding); reset when consumed */
} chunk_t;

struct tap_thread {
	tap_counters_t counters; /* written by the owner only */
	tap_t *tap;
	struct fstrm_iothr_queue *ioq;
	unsigned messages; /* TAP_BIT()s */
	unsigned sample;
	unsigned countdown; /* queries to skip before the next sampled one */
	uint8_t *ring;
	size_t ring_size; /* a power of two */
	size_t head;      /* owner: where the next chunk starts (a running byte count) */
	/* Published by the owner after a submit: the consumer never looks at or past it. */
	_Atomic size_t published;
	/* Written by the consumer (the I/O thread's free callback): bytes given back. */
	_Atomic size_t tail;
};

struct tap {
	struct fstrm_iothr *iothr;
	/* Socket output: whether a reader is connected, kept by the I/O thread; true for a
	 * file. */
	atomic_bool connected;
	/* Frames fstrm threw away while no reader was connected: written by the I/O thread
	 * only. */
	steer_counter_t discarded;
	char *identity;
	char *version;
	tap_thread_t *threads;
	unsigned n_threads;
};

static unsigned round_pow2(unsigned v, unsigned min, unsigned max)
{
	unsigned p = min;
	while (p < v && p < max)
		p <<= 1;
	return p;
}

static void fill_address(const steer_sockaddr_t *a, protobuf_c_boolean *has_addr,
                         ProtobufCBinaryData *addr, protobuf_c_boolean *has_port, uint32_t *port)
{
	if (a == NULL)
		return;
	if (a->sa.sa_family == AF_INET) {
		addr->data = (uint8_t *)&a->sin.sin_addr;
		addr->len = sizeof(a->sin.sin_addr);
	} else if (a->sa.sa_family == AF_INET6) {
		addr->data = (uint8_t *)&a->sin6.sin6_addr;
		addr->len = sizeof(a->sin6.sin6_addr);
	} else {
		return;
	}
	*has_addr = true;
	*has_port = true;
	*port = steer_sockaddr_port(a);
}

static sa_family_t message_family(const tap_msg_t *msg)
{
	if (msg->query_address != NULL && msg->query_address->sa.sa_family != 0)
		return msg->query_address->sa.sa_family;
	if (msg->response_address != NULL)
		return msg->response_address->sa.sa_family;
	return 0;
}

static void fill_bytes(const uint8_t *data, size_t len, protobuf_c_boolean *has,
                       ProtobufCBinaryData *out)
{
	if (data == NULL)
		return;
	*has = true;
	out->data = (uint8_t *)data;
	out->len = len;
}

static void fill_message(const tap_msg_t *msg, Dnstap__Message *m)
{
	m->type = (Dnstap__Message__Type)msg->type;
	sa_family_t family = message_family(msg);
	if (family == AF_INET || family == AF_INET6) {
		m->has_socket_family = true;
		m->socket_family =
		    family == AF_INET ? DNSTAP__SOCKET_FAMILY__INET : DNSTAP__SOCKET_FAMILY__INET6;
	}
	m->has_socket_protocol = true;
	m->socket_protocol = msg->tcp ? DNSTAP__SOCKET_PROTOCOL__TCP : DNSTAP__SOCKET_PROTOCOL__UDP;
	fill_address(msg->query_address, &m->has_query_address, &m->query_address,
	             &m->has_query_port, &m->query_port);
	fill_address(msg->response_address, &m->has_response_address, &m->response_address,
	             &m->has_response_port, &m->response_port);
	if (msg->query_time.tv_sec != 0) {
		m->has_query_time_sec = m->has_query_time_nsec = true;
		m->query_time_sec = (uint64_t)msg->query_time.tv_sec;
		m->query_time_nsec = (uint32_t)msg->query_time.tv_nsec;
	}
	if (msg->response_time.tv_sec != 0) {
		m->has_response_time_sec = m->has_response_time_nsec = true;
		m->response_time_sec = (uint64_t)msg->response_time.tv_sec;
		m->response_time_nsec = (uint32_t)msg->response_time.tv_nsec;
	}
	fill_bytes(msg->query, msg->query_len, &m->has_query_message, &m->query_message);
	fill_bytes(msg->response, msg->response_len, &m->has_response_message,
	           &m->response_message);
	fill_bytes(msg->zone, msg->zone_len, &m->has_query_zone, &m->query_zone);
}

/* Fill @p d and @p m (which @p d points to) from @p msg; they borrow its bytes. */
static void build_frame(const tap_msg_t *msg, const char *identity, const char *version,
                        Dnstap__Dnstap *d, Dnstap__Message *m)
{
	*m = (Dnstap__Message)DNSTAP__MESSAGE__INIT;
	*d = (Dnstap__Dnstap)DNSTAP__DNSTAP__INIT;
	fill_message(msg, m);
	d->type = DNSTAP__DNSTAP__TYPE__MESSAGE;
	d->message = m;
	if (identity != NULL)
		fill_bytes((const uint8_t *)identity, strlen(identity), &d->has_identity,
		           &d->identity);
	if (version != NULL)
		fill_bytes((const uint8_t *)version, strlen(version), &d->has_version, &d->version);
}

size_t tap_encode(const tap_msg_t *msg, const char *identity, const char *version, uint8_t *buf,
                  size_t cap)
{
	Dnstap__Message m;
	Dnstap__Dnstap d;
	build_frame(msg, identity, version, &d, &m);
	if (dnstap__dnstap__get_packed_size(&d) > cap)
		return 0;
	return dnstap__dnstap__pack(&d, buf);
}

struct timespec tap_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts;
}

static chunk_t *chunk_at(const tap_thread_t *th, size_t pos)
{
	return (chunk_t *)(th->ring + (pos & (th->ring_size - 1)));
}

static void ring_consume(tap_thread_t *th)
{
	size_t tail = atomic_load_explicit(&th->tail, memory_order_relaxed);
	size_t end = atomic_load_explicit(&th->published, memory_order_acquire);
	while (tail != end) {
		chunk_t *c = chunk_at(th, tail);
		if (!atomic_load_explicit(&c->done, memory_order_acquire))
			break;
		uint32_t size = atomic_load_explicit(&c->size, memory_order_relaxed);
		atomic_store_explicit(&c->done, 0, memory_order_relaxed);
		tail += size;
	}
	atomic_store_explicit(&th->tail, tail, memory_order_release);
}

/* fstrm is done with a frame: called on the I/O thread (or, once it stopped, on the thread
 * destroying it), the rings' only consumer. The frame follows its chunk header. */
static void frame_done(void *buf, void *arg)
{
	tap_thread_t *th = arg;
	chunk_t *c = (chunk_t *)buf - 1;
	if (!atomic_load_explicit(&th->tap->connected, memory_order_relaxed))
		STEER_COUNTER_INC(th->tap->discarded);
	atomic_store_explicit(&c->done, 1, memory_order_release);
	ring_consume(th);
}

bool tap_wants(const tap_thread_t *th, tap_type_t type)
{
	return (th->messages & TAP_BIT(type)) != 0;
}

bool tap_sample(tap_thread_t *th)
{
	if (th->countdown == 0) {
		th->countdown = th->sample > 1 ? th->sample - 1 : 0;
		return true;
	}
	th->countdown--;
	return false;
}

static size_t align_up(size_t n)
{
	return (n + TAP_ALIGN - 1) & ~(size_t)(TAP_ALIGN - 1);
}

/*
 * Where a chunk of @p need bytes (header included, aligned) goes: the current position, or
 * the start of the ring after a padding chunk when it does not fit before the end. Returns
 * NULL when the consumer has not given back enough bytes yet; @p *advance gets the bytes the
 * head moves by on success (padding included).
 */
static chunk_t *ring_reserve(tap_thread_t *th, size_t need, size_t *advance)
{
	size_t pos = th->head & (th->ring_size - 1);
	size_t pad = th->ring_size - pos < need ? th->ring_size - pos : 0;
	size_t tail = atomic_load_explicit(&th->tail, memory_order_acquire);
	if (th->head + pad + need - tail > th->ring_size)
		return NULL;
	if (pad > 0) {
		/* Done from the start: the consumer skips it once the chunk before it is back,
		 * but never looks at it before the head is published past it. */
		chunk_t *p = chunk_at(th, th->head);
		atomic_store_explicit(&p->size, (uint32_t)pad, memory_order_relaxed);
		atomic_store_explicit(&p->done, 1, memory_order_relaxed);
	}
	*advance = pad + need;
	return chunk_at(th, th->head + pad);
}

static int dropped(tap_thread_t *th)
{
	STEER_COUNTER_INC(th->counters.dropped);
	return STEER_EAGAIN;
}

int tap_log(tap_thread_t *th, const tap_msg_t *msg)
{
	const tap_t *tap = th->tap;
	Dnstap__Message m;
	Dnstap__Dnstap d;
	build_frame(msg, tap->identity, tap->version, &d, &m);
	size_t len = dnstap__dnstap__get_packed_size(&d);
	size_t need = align_up(sizeof(chunk_t) + len);
	size_t advance;
	chunk_t *c = len <= TAP_FRAME_MAX ? ring_reserve(th, need, &advance) : NULL;
	if (c == NULL)
		return dropped(th);
	dnstap__dnstap__pack(&d, (uint8_t *)(c + 1));
	atomic_store_explicit(&c->size, (uint32_t)need, memory_order_relaxed);
	atomic_store_explicit(&c->done, 0, memory_order_relaxed);
	/* fstrm's queue publishes the pointer with a release of its own; the frame's bytes and
	 * header are complete before it. */
	fstrm_res res = fstrm_iothr_submit(tap->iothr, th->ioq, c + 1, len, frame_done, th);
	if (res != fstrm_res_success)
		return dropped(th);
	th->head += advance;
	atomic_store_explicit(&th->published, th->head, memory_order_release);
	STEER_COUNTER_INC(th->counters.logged);
	return 0;
}

/* A file output is opened by the I/O thread; try it here so a bad path fails the start. */
static int check_file(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		int ret = -errno;
		snprintf(err, errlen, "dnstap: cannot open %s: %s", path, steer_strerror(ret));
		return ret;
	}
	close(fd);
	return 0;
}

static struct fstrm_writer *writer_new(const tap_opts_t *opts, atomic_bool *connected)
{
	struct fstrm_writer_options *wopt = fstrm_writer_options_init();
	struct fstrm_writer *w = NULL;
	fstrm_writer_options_add_content_type(wopt, TAP_CONTENT_TYPE, strlen(TAP_CONTENT_TYPE));
	if (opts->socket != NULL) {
		w = tap_socket_writer_new(opts->socket, wopt, connected);
	} else {
		atomic_store(connected, true);
		struct fstrm_file_options *fopt = fstrm_file_options_init();
		fstrm_file_options_set_file_path(fopt, opts->file);
		w = fstrm_file_writer_init(fopt, wopt);
		fstrm_file_options_destroy(&fopt);
	}
	fstrm_writer_options_destroy(&wopt);
	return w;
}

/* The I/O thread is woken when a queue holds this many frames (else once a second): a small
 * queue must wake it well before it is full. */
static unsigned notify_threshold(unsigned queue)
{
	unsigned t = queue / 4;
	if (t < FSTRM_IOTHR_QUEUE_NOTIFY_THRESHOLD_MIN)
		t = FSTRM_IOTHR_QUEUE_NOTIFY_THRESHOLD_MIN;
	return t < FSTRM_IOTHR_QUEUE_NOTIFY_THRESHOLD_DEFAULT
	           ? t
	           : FSTRM_IOTHR_QUEUE_NOTIFY_THRESHOLD_DEFAULT;
}

static struct fstrm_iothr *iothr_new(const tap_opts_t *opts, unsigned queue,
                                     struct fstrm_writer **w)
{
	struct fstrm_iothr_options *iopt = fstrm_iothr_options_init();
	struct fstrm_iothr *iothr = NULL;
	if (fstrm_iothr_options_set_num_input_queues(iopt, opts->n_threads) == fstrm_res_success &&
	    fstrm_iothr_options_set_input_queue_size(iopt, queue) == fstrm_res_success &&
	    fstrm_iothr_options_set_queue_model(iopt, FSTRM_IOTHR_QUEUE_MODEL_SPSC) ==
	        fstrm_res_success &&
	    fstrm_iothr_options_set_reopen_interval(iopt, 1) == fstrm_res_success &&
	    fstrm_iothr_options_set_queue_notify_threshold(iopt, notify_threshold(queue)) ==
	        fstrm_res_success)
		iothr = fstrm_iothr_init(iopt, w);
	fstrm_iothr_options_destroy(&iopt);
	return iothr;
}

static void threads_init(tap_t *tap, const tap_opts_t *opts, unsigned queue)
{
	/* The I/O thread is woken when a queue holds notify_threshold() frames: the ring must
	 * hold that many of the largest, or a full ring would wait for its timer (a second). */
	unsigned want = queue * TAP_RING_PER_MESSAGE;
	if (want < notify_threshold(queue) * TAP_FRAME_MAX)
		want = notify_threshold(queue) * TAP_FRAME_MAX;
	size_t ring = round_pow2(want, TAP_RING_MIN, TAP_RING_MAX);
	tap->threads = xcalloc(opts->n_threads, sizeof(*tap->threads));
	for (unsigned i = 0; i < opts->n_threads; i++) {
		tap_thread_t *th = &tap->threads[i];
		th->tap = tap;
		th->messages = opts->messages;
		th->sample = opts->sample;
		th->ring = xcalloc(1, ring);
		th->ring_size = ring;
		atomic_init(&th->published, 0);
		atomic_init(&th->tail, 0);
	}
}

int tap_new(const tap_opts_t *opts, tap_t **out, char *err, size_t errlen)
{
	if ((opts->socket == NULL) == (opts->file == NULL) || opts->n_threads == 0) {
		snprintf(err, errlen, "dnstap: exactly one of socket and file, and a thread");
		return STEER_EINVAL;
	}
	if (opts->file != NULL) {
		int ret = check_file(opts->file, err, errlen);
		if (ret != 0)
			return ret;
	}
	unsigned queue =
	    round_pow2(opts->queue ? opts->queue : TAP_QUEUE_DEFAULT,
	               FSTRM_IOTHR_INPUT_QUEUE_SIZE_MIN, FSTRM_IOTHR_INPUT_QUEUE_SIZE_MAX);
	/* The I/O thread reads the flag from its start: the tap exists before it. */
	tap_t *tap = xcalloc(1, sizeof(*tap));
	atomic_init(&tap->connected, false);
	struct fstrm_writer *w = writer_new(opts, &tap->connected);
	struct fstrm_iothr *iothr = w != NULL ? iothr_new(opts, queue, &w) : NULL;
	if (iothr == NULL) {
		if (w != NULL)
			fstrm_writer_destroy(&w);
		snprintf(err, errlen, "dnstap: cannot start the Frame Streams writer for %s",
		         opts->socket != NULL ? opts->socket : opts->file);
		free(tap);
		return STEER_EINVAL;
	}
	tap->iothr = iothr;
	tap->identity = opts->identity != NULL ? xstrdup(opts->identity) : NULL;
	tap->version = opts->version != NULL ? xstrdup(opts->version) : NULL;
	tap->n_threads = opts->n_threads;
	threads_init(tap, opts, queue);
	for (unsigned i = 0; i < tap->n_threads; i++)
		tap->threads[i].ioq = fstrm_iothr_get_input_queue_idx(iothr, i);
	*out = tap;
	return 0;
}

tap_thread_t *tap_thread(tap_t *tap, unsigned idx)
{
	STEER_ASSERT(idx < tap->n_threads);
	return &tap->threads[idx];
}

void tap_stats(const tap_t *tap, tap_counters_t *sum)
{
	tap_counters_t all = {0};
	for (unsigned i = 0; i < tap->n_threads; i++)
		steer_counters_add((steer_counter_t *)&all,
		                   (const steer_counter_t *)&tap->threads[i].counters,
		                   STEER_COUNTERS_IN(tap_counters_t));
	/* A frame may come back before its thread counted it as logged. */
	uint64_t discarded = atomic_load_explicit(&tap->discarded, memory_order_relaxed);
	uint64_t logged = atomic_load_explicit(&all.logged, memory_order_relaxed);
	if (discarded > logged)
		discarded = logged;
	STEER_COUNTER_ADD(sum->logged, logged - discarded);
	STEER_COUNTER_ADD(sum->dropped,
	                  atomic_load_explicit(&all.dropped, memory_order_relaxed) + discarded);
}

void tap_free(tap_t *tap)
{
	if (tap == NULL)
		return;
	/* Frames still queued come back through frame_done() before this returns. */
	fstrm_iothr_destroy(&tap->iothr);
	for (unsigned i = 0; i < tap->n_threads; i++)
		free(tap->threads[i].ring);
	free(tap->threads);
	free(tap->identity);
	free(tap->version);
	free(tap);
}
