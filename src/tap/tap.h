/*
 * The dnstap query log: DNS messages as dnstap protobuf frames (https://dnstap.info) written
 * over Frame Streams (libfstrm) to a UNIX socket (a collector such as fstrm_capture, with the
 * bidirectional handshake) or a file.
 *
 * Threads. The control thread creates the writer with one input queue per writing thread
 * (each UDP worker, each TCP thread, the forwarder's engine thread) and hands each thread its
 * tap_thread_t. A writing thread samples, encodes a message into its own byte ring (allocated
 * once) and submits it to its fstrm queue; fstrm's I/O thread writes it and gives the bytes
 * back. When the ring or the queue is full the message is dropped and counted: the log never
 * blocks a query thread, takes no lock and allocates nothing on its path.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/compiler.h"
#include "base/counter.h"
#include "base/sockaddr.h"

typedef struct tap tap_t;
typedef struct tap_thread tap_thread_t;

/* The kinds of messages steerd logs; the values are dnstap's Message.Type. */
typedef enum {
	TAP_AUTH_QUERY = 1,
	TAP_AUTH_RESPONSE = 2,
	TAP_CLIENT_QUERY = 5,
	TAP_CLIENT_RESPONSE = 6,
	TAP_FORWARDER_QUERY = 7,
	TAP_FORWARDER_RESPONSE = 8,
} tap_type_t;

/* The bit of @p type in tap_opts_t.messages. */
#define TAP_BIT(type) (1u << (type))

/* Frame Streams content type of every frame: what readers ask for in the handshake. */
#define TAP_CONTENT_TYPE "protobuf:dnstap.Dnstap"

typedef struct {
	const char *socket;   /* a reader's UNIX socket; or */
	const char *file;     /* a file (truncated at start); exactly one of the two */
	const char *identity; /* Dnstap.identity; NULL = none */
	const char *version;  /* Dnstap.version; NULL = none */
	unsigned n_threads;   /* writing threads, one queue each (at least 1) */
	unsigned queue;       /* messages one thread's queue holds (rounded up to a power of
	                       * two, 2..16384); 0 = 16384 */
	unsigned messages;    /* TAP_BIT()s of the kinds to log */
	unsigned sample;      /* log every Nth query of each thread (with its responses); 0 or
	                       * 1 = every query */
} tap_opts_t;

/* One writing thread's counters, written by it only (tap_stats() adds the I/O thread's). */
typedef struct {
	steer_counter_t logged;  /* messages handed to the I/O thread */
	steer_counter_t dropped; /* messages dropped: queue or ring full, or too large; in
	                          * tap_stats() also those the I/O thread threw away while no
	                          * reader was connected */
} tap_counters_t;

/* One DNS message to log. Unset parts: NULL pointers, zero times, family 0 addresses. */
typedef struct {
	tap_type_t type;
	bool tcp;                                 /* socket protocol: TCP, else UDP */
	const steer_sockaddr_t *query_address;    /* the query's initiator (client, or us) */
	const steer_sockaddr_t *response_address; /* the responder (us, or the upstream) */
	struct timespec query_time;               /* CLOCK_REALTIME */
	struct timespec response_time;
	const uint8_t *query; /* the query message (wire format) */
	size_t query_len;
	const uint8_t *response; /* the response message */
	size_t response_len;
	const uint8_t *zone; /* the zone (wire-format name) the query was sent under */
	size_t zone_len;
} tap_msg_t;

/**
 * Open the output (for a socket: a connection attempt now and every second after a
 * failure, so a collector may start later; a reader that leaves a read or write waiting for
 * a second is disconnected and reconnected) and start fstrm's I/O thread. Returns 0 and
 * *out, or a negative steer_err with a message in @p err (bad options, fstrm refused them).
 * Control thread, at start-up (allocates).
 */
int tap_new(const tap_opts_t *opts, tap_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/** The state of writing thread @p idx (< n_threads), owned by @p tap. */
tap_thread_t *tap_thread(tap_t *tap, unsigned idx) STEER_NONNULL(1);

/** Whether @p th logs messages of @p type at all (configured kinds). Any thread. */
bool tap_wants(const tap_thread_t *th, tap_type_t type) STEER_NONNULL(1);

/**
 * Count one query on the calling thread and say whether it is sampled: every Nth query is
 * (the first one included). The thread logs a sampled query and its responses, nothing of
 * the others. Owner thread only.
 */
bool tap_sample(tap_thread_t *th) STEER_NONNULL(1);

/**
 * Encode @p msg (a kind tap_wants()) with the writer's identity and version and queue it for
 * the I/O thread. Never blocks, never allocates. Returns 0, or STEER_EAGAIN when it was
 * dropped (queue or ring full, a frame over 70 KiB), counted either way.
 * Owner thread only.
 */
int tap_log(tap_thread_t *th, const tap_msg_t *msg) STEER_NONNULL(1, 2);

/** Now, on the clock of tap_msg_t times. */
struct timespec tap_now(void);

/**
 * Add every thread's counters into @p sum (not cleared first), with what the I/O thread threw
 * away while no reader was connected moved from logged to dropped. Any thread.
 */
void tap_stats(const tap_t *tap, tap_counters_t *sum) STEER_NONNULL(1, 2);

/**
 * Stop the I/O thread after it wrote (or, without a reader, discarded) what was queued, close
 * the output and free everything. No writing thread may use its tap_thread_t any more.
 * NULL is ignored. Control thread.
 */
void tap_free(tap_t *tap);

/**
 * Encode @p msg as a Dnstap frame into @p buf (@p cap bytes) with @p identity and
 * @p version (NULL = none). Returns the length, 0 when it does not fit. Pure, any thread.
 */
size_t tap_encode(const tap_msg_t *msg, const char *identity, const char *version, uint8_t *buf,
                  size_t cap) STEER_NONNULL(1, 4);
