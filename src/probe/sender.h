/*
 * The probes themselves, non-blocking on the agent's libev loop: one sample each.
 *
 *   dns   a UDP query for dns-name (only that name: it is in our own zone), type A, RD=0, a
 *         random ID from a fresh socket (so a random source port); any well-formed response
 *         with our ID and our question counts, whatever its rcode
 *   tcp   a non-blocking connect() to port 53: the SYN-ACK (connected) or a RST (refused)
 *         both count; the socket is closed with SO_LINGER 0, so the kernel sends a RST and
 *         keeps no TIME_WAIT
 *   icmp  an echo request on one ICMP datagram socket per family (IPPROTO_ICMP/ICMPV6, as
 *         unprivileged ping does), or a raw socket when the datagram kind is not allowed;
 *         replies are matched by sequence (and identifier on the raw socket)
 *
 * The reply's TTL (IP_RECVTTL, IPV6_RECVHOPLIMIT) is passed on when the method has one (dns,
 * icmp). Every sample ends exactly once in the callback: answered, or not (timeout, an ICMP
 * error such as port or host unreachable, a socket error). Agent loop thread only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "conf/conf.h"
#include "dns/const.h"

struct ev_loop;
typedef struct probe_sender probe_sender_t;

/* The port dns and tcp probes go to: resolvers and DNS servers listen there. */
#define PROBE_DNS_PORT 53

/* One sample's end: @p answered, the round trip in microseconds and the reply's TTL (0 when
 * the method gives none). Called from the loop, never from inside probe_sender_send(). */
typedef void (*probe_sample_cb)(void *ctx, uint64_t token, bool answered, uint32_t rtt_us,
                                uint8_t ttl);

typedef struct {
	uint8_t qname[DNS_DNAME_MAXLEN]; /* dns-name in wire form */
	steer_sockaddr_t source4;        /* probes leave from here; family 0 = the kernel's */
	steer_sockaddr_t source6;
	unsigned timeout_ms; /* a sample without a reply by then is lost */
	uint16_t port;       /* PROBE_DNS_PORT; another only in tests */
} probe_sender_opts_t;

/* Per-method counters. */
typedef struct {
	uint64_t sent;
	uint64_t answered;
	uint64_t errors; /* could not be sent (socket errors) */
} probe_method_stats_t;

/**
 * A sender on @p loop calling @p cb(@p ctx, ...) for every sample. Opens no socket yet (the
 * ICMP sockets open on first use). Returns 0 (never fails today; the int is for symmetry).
 */
int probe_sender_new(struct ev_loop *loop, const probe_sender_opts_t *opts, probe_sample_cb cb,
                     void *ctx, probe_sender_t **out) STEER_NONNULL(1, 2, 3, 5) STEER_WUR;

/**
 * Send one sample by @p method to @p addr (4 or 16 bytes of @p family AF_INET/AF_INET6), its
 * end reported with @p token. Returns 0, or a negative steer_err when it could not be sent
 * (counted; no callback follows).
 */
int probe_sender_send(probe_sender_t *s, conf_probe_method_t method, int family,
                      const uint8_t *addr, uint64_t token) STEER_NONNULL(1, 4);

/** Counters of @p method. */
probe_method_stats_t probe_sender_stats(const probe_sender_t *s, conf_probe_method_t method)
    STEER_NONNULL(1);

/** Samples waiting for a reply. */
size_t probe_sender_pending(const probe_sender_t *s) STEER_NONNULL(1);

/** Whether the ICMP socket of @p family is a raw one (the datagram kind was refused). */
bool probe_sender_icmp_raw(const probe_sender_t *s, int family) STEER_NONNULL(1);

/** Close every socket and free the sender; pending samples end without callbacks. */
void probe_sender_free(probe_sender_t *s);

/* ---- pure parts, tested on their own -------------------------------------------------- */

/** Build the dns probe query for @p qname (wire form) with @p id into @p buf; returns the
 *  length, or 0 when @p size is too small. */
size_t probe_dns_query(const uint8_t *qname, uint16_t id, uint8_t *buf, size_t size)
    STEER_NONNULL(1, 3);

/** Whether @p pkt is a response to probe_dns_query(@p qname, @p id): QR set, our ID, exactly
 *  our question (name case-insensitive, type A, class IN). */
bool probe_dns_reply_matches(const uint8_t *pkt, size_t len, const uint8_t *qname, uint16_t id)
    STEER_NONNULL(1, 3);
