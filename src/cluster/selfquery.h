/*
 * The self-check's answer check: one real UDP query to every local service address, from
 * the node's unicast address of its family, on the cluster thread's event loop. What is
 * asked: the SOA of a zone apex (NOERROR, AA, the SOA in the answer), or the id.server CH
 * TXT of the node when no zone is served.
 *
 * Where each query goes, per service address:
 *   - the service address itself, when it is configured on this node (bind() to it works);
 *   - the unicast address of its family instead when it is not (a keepalived VIP that the
 *     other node holds), or when the node is withdrawn by putting the holder interface down
 *     and the address cannot be reached then (an IPv6 address on an admin-down interface
 *     has no local route, an IPv4 one keeps it); the detail says so;
 *   - nowhere, when neither works: the round fails when no query at all could be asked.
 * Duplicate destinations are asked once.
 *
 * One round at a time; the object belongs to the thread that runs @p loop.
 */
#pragma once

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "conf/conf.h"
#include "dns/const.h"

typedef struct cluster_selfquery cluster_selfquery_t;

/* The round's result: @p ok, and @p detail (what failed, or what passed). */
typedef void (*cluster_selfquery_cb)(void *arg, bool ok, const char *detail);

/* What one query asks and what its answer must be. */
typedef struct {
	uint16_t id;
	uint8_t qname[DNS_DNAME_MAXLEN]; /* wire form */
	uint16_t qtype;                  /* SOA or TXT */
	uint16_t qclass;                 /* IN (SOA) or CH (TXT) */
	const char *txt;                 /* the id.server text expected, NULL = any */
} cluster_question_t;

/**
 * Build the query for @p q into @p buf (@p size bytes; DNS_HEADER_LEN + DNS_DNAME_MAXLEN + 4
 * + DNS_OPT_RR_LEN are enough). Returns its length, 0 when it does not fit.
 */
size_t cluster_question_build(const cluster_question_t *q, uint8_t *buf, size_t size)
    STEER_NONNULL(1, 2);

/**
 * Judge the datagram @p pkt (@p len bytes) against @p q. Returns 1 a good answer, 0 a reply
 * to our query that is not good (the reason in @p why), -1 not a reply to our query (another
 * id or question: ignore it). Pure, thread-safe.
 */
int cluster_question_judge(const cluster_question_t *q, const uint8_t *pkt, size_t len, char *why,
                           size_t whylen) STEER_NONNULL(1, 2, 4);

/**
 * The answer check for @p cc (borrowed: must outlive the object) on @p loop; @p cb gets each
 * round's result, from the loop. Aborts on out-of-memory.
 */
cluster_selfquery_t *cluster_selfquery_new(struct ev_loop *loop, const conf_cluster_t *cc,
                                           cluster_selfquery_cb cb, void *arg)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Start a round asking for the SOA of @p apex (wire form; its text @p apex_text for the
 * details) or, with @p apex NULL, for id.server CH TXT. @p holder_down: the interface
 * holding the service addresses is admin down (the withdrawn state of the `interface`
 * method), so IPv6 service addresses, and any that cannot be reached, are asked through the
 * unicast address of their family instead. The result comes through the callback, never from within
 * this call. Returns the number of queries sent (the drain counts them out of the client queries).
 */
unsigned cluster_selfquery_start(cluster_selfquery_t *sq, const uint8_t *apex,
                                 const char *apex_text, bool holder_down, unsigned timeout_ms)
    STEER_NONNULL(1);

/** True while a round waits for its answers. */
bool cluster_selfquery_busy(const cluster_selfquery_t *sq) STEER_NONNULL(1);

/** Abandon the round in progress (no callback) and free @p sq. NULL is ignored. */
void cluster_selfquery_free(cluster_selfquery_t *sq);
