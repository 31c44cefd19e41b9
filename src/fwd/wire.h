/*
 * The forwarder's upstream leg on the wire: the query we send a recursive resolver for a
 * client, the checks a reply must pass before anything in it is believed, the reply we give
 * the client, and the health probes. Pure functions over caller buffers: no I/O, no
 * allocation, no locks, no global state; safe on any thread with per-thread fwd_rng_t and
 * fwd_wire_counters_t.
 *
 * Trust model. The upstreams are recursive resolvers we trust, but the path to them is not: a
 * reply is believed only when it comes from the queried address and port (the caller checks
 * the socket) and fwd_wire_reply_check() accepts it: QR=1, our random ID, opcode QUERY, the
 * same question (byte for byte, case included, when 0x20 is on), sections that walk cleanly.
 * Everything else is dropped and counted by reason; the caller keeps waiting for the real
 * reply (a drop is never an answer and never cached).
 *
 * Answer records. The answer section is related to the question when its owner is the qname
 * or a name the CNAME chain reached (a DNAME at an ancestor of one counts too). The chain is
 * followed in any record order, bounded by FWD_WIRE_CNAME_MAX links; a longer chain or a loop
 * drops the reply (FWD_WIRE_DROP_CHAIN). Unrelated answer records are counted in
 * fwd_wire_reply_t.unrelated, not removed: the client reply passes them through (they came
 * from a resolver we trust, and removing records would break the compression pointers that
 * may point into them), but the cache must store only related records - never an unrelated
 * name, which is the classic poisoning vector.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "dns/const.h"
#include "dns/ecs.h"
#include "dns/pkt.h"
#include "fwd/rng.h"

/* The UDP payload size we advertise upstream and to clients (DNS Flag Day 2020). */
#define FWD_WIRE_PAYLOAD DNS_EDNS_DEFAULT_PAYLOAD
/* CNAME links followed from the qname; Unbound and BIND stop at a few more (their
 * MAX_RESTART_COUNT / max-recursion), no legitimate chain comes close. */
#define FWD_WIRE_CNAME_MAX 16
/* Longest upstream query: header, question, OPT with one ECS option. */
#define FWD_WIRE_QUERY_MAXLEN                                                                      \
	(DNS_HEADER_LEN + DNS_DNAME_MAXLEN + 4 + DNS_OPT_RR_LEN + 4 + DNS_ECS_MAXLEN)
/* Probe nonce label: 16 hex digits of counter, 8 of randomness. */
#define FWD_WIRE_NONCE_LEN 24
/* The wide source port range (IANA registered + dynamic), as Unbound's default. */
#define FWD_WIRE_PORT_MIN 1024
#define FWD_WIRE_PORT_MAX 65535

/* What an upstream query needs remembered until its reply arrives. Caller-owned. */
typedef struct {
	uint16_t id; /* our random TXID */
	uint16_t qtype;
	uint16_t qclass;
	uint16_t payload; /* the UDP size we advertised, 0 = no EDNS sent */
	bool case_check;  /* 0x20 was applied: the reply's qname must match qname exactly */
	bool rd;          /* RD we sent (1 for client queries and recursive probes) */
	uint8_t qname_len;
	uint8_t qname[DNS_DNAME_MAXLEN]; /* exactly as sent, 0x20 case included */
} fwd_wire_pending_t;

typedef struct {
	bool use_0x20; /* randomise the qname's letter case and check it in the reply */
	const dns_ecs_t
	    *ecs; /* NULL (the default): no ECS; else sent as is (fwd_wire_ecs_make()) */
} fwd_wire_query_opts_t;

/* Why a reply was dropped; FWD_WIRE_ACCEPT when it was not. */
typedef enum {
	FWD_WIRE_ACCEPT = 0,
	FWD_WIRE_DROP_SHORT,     /* shorter than a header */
	FWD_WIRE_DROP_NOT_REPLY, /* QR=0 */
	FWD_WIRE_DROP_ID,        /* not our ID: a forgery or a late reply to a reused port */
	FWD_WIRE_DROP_OPCODE,    /* opcode other than QUERY */
	FWD_WIRE_DROP_QUESTION,  /* another question (name, type, class or count) */
	FWD_WIRE_DROP_CASE,      /* our question but not our 0x20 case: forgery, or an upstream
	                          * that does not echo the case (then every reply shows this) */
	FWD_WIRE_DROP_MALFORMED, /* sections do not walk: bad names, lengths, counts, OPT misuse */
	FWD_WIRE_DROP_SIZE,      /* larger than we advertised (UDP) */
	FWD_WIRE_DROP_CHAIN,     /* CNAME chain longer than FWD_WIRE_CNAME_MAX or a loop */
	FWD_WIRE_VERDICT_MAX,
} fwd_wire_verdict_t;

/* What an accepted reply says about the upstream. */
typedef enum {
	FWD_WIRE_RC_ANSWER,   /* NOERROR with an answer, or a NODATA from a recursing upstream */
	FWD_WIRE_RC_NXDOMAIN, /* a valid negative answer */
	FWD_WIRE_RC_SERVFAIL, /* the upstream failed: try the next one, never cache */
	FWD_WIRE_RC_REFUSED,  /* the upstream will not serve us: try the next one */
	FWD_WIRE_RC_FORMERR,  /* maybe our EDNS: the caller may retry once without OPT */
	FWD_WIRE_RC_OTHER,    /* NOTIMP, BADVERS, anything else: an upstream problem */
	FWD_WIRE_RC_LAME,     /* NOERROR, no answer, RA=0 to our RD=1: a referral or an upstream
	                       * that does not recurse for us, not a NODATA: never cache */
} fwd_wire_rcode_class_t;

/* The result of fwd_wire_reply_check(). Offsets index the checked reply. */
typedef struct {
	fwd_wire_verdict_t verdict;
	fwd_wire_rcode_class_t rclass; /* valid when accepted */
	bool tc;                       /* TC=1: retry over TCP; sections were not walked */
	uint16_t flags;                /* header flags word as received */
	uint16_t rcode;                /* 12 bits: header rcode | OPT extended rcode << 4 */
	uint16_t ancount, nscount, arcount;
	bool has_edns;
	uint8_t edns_version;
	uint16_t edns_payload;
	bool edns_do;
	size_t question_end; /* offset after the question (DNS_HEADER_LEN when qdcount is 0) */
	size_t opt_start;    /* offset of the OPT record, 0 when none */
	uint16_t opt_index;  /* its index within the additional section */
	uint8_t chain;       /* CNAME links followed from the qname */
	uint16_t unrelated;  /* answer records owned by neither the qname nor the chain */
} fwd_wire_reply_t;

/* Dropped replies by reason, per thread, written only by the owner (summed elsewhere). */
typedef struct {
	uint64_t
	    drop[FWD_WIRE_VERDICT_MAX]; /* index fwd_wire_verdict_t; [FWD_WIRE_ACCEPT] = accepted */
} fwd_wire_counters_t;

typedef enum {
	FWD_WIRE_PROBE_RECURSIVE, /* RD=1 <nonce>.<probe name>: can the upstream resolve? */
	FWD_WIRE_PROBE_LIVENESS,  /* RD=0 ". NS" (or the probe name): is it up at all? */
} fwd_wire_probe_kind_t;

typedef enum {
	FWD_WIRE_PROBE_DROP,     /* not a reply to this probe: keep waiting (timeout = failure) */
	FWD_WIRE_PROBE_ALIVE,    /* liveness: any accepted reply, whatever its rcode */
	FWD_WIRE_PROBE_RESOLVES, /* recursive: NOERROR or NXDOMAIN (the nonce name does not
	                          * exist, so NXDOMAIN from our zone proves a full resolution) */
	FWD_WIRE_PROBE_FAILS,    /* recursive: answered (so alive) but SERVFAIL, REFUSED, ...:
	                          * the upstream is degraded */
} fwd_wire_probe_result_t;

/**
 * Build the upstream query for the parsed client query @p client (DNS_QUERY_OK, opcode QUERY)
 * into @p buf (@p cap bytes; FWD_WIRE_QUERY_MAXLEN always suffices): a fresh random ID from
 * @p rng, RD=1, CD copied, the client's question with the case randomised when
 * @p opts->use_0x20, OPT with FWD_WIRE_PAYLOAD and the client's DO, an ECS option only when
 * @p opts->ecs. No other client option is forwarded. Fills @p out for the reply check.
 * @p opts may be NULL (the defaults: no 0x20, no ECS). Returns the length or STEER_ESPACE /
 * STEER_EINVAL (no question).
 */
int fwd_wire_query_build(const dns_query_t *client, const fwd_wire_query_opts_t *opts,
                         fwd_rng_t *rng, uint8_t *buf, size_t cap, fwd_wire_pending_t *out)
    STEER_NONNULL(1, 3, 4, 6) STEER_WUR;

/**
 * Fill @p out with the ECS option to send for a client at @p addr (4 or 16 bytes, network
 * order, for @p family DNS_ECS_FAMILY_IPV4 / _IPV6), keeping only @p source_len bits (privacy:
 * /24 and /56 are the RFC 7871 11.1 recommendations). Returns 0 or STEER_EINVAL.
 */
int fwd_wire_ecs_make(uint16_t family, const uint8_t *addr, uint8_t source_len, dns_ecs_t *out)
    STEER_NONNULL(2, 4) STEER_WUR;

/**
 * Check reply @p pkt (@p len bytes) against the outstanding query @p p; @p tcp says whether it
 * came over TCP (a UDP reply larger than we advertised is dropped). Fills @p info (always; the
 * verdict says whether the rest means anything) and counts the verdict in @p counters when not
 * NULL. Accepted replies with TC=1 have only header and question checked: retry over TCP.
 * A FORMERR reply without a question is accepted on ID alone (old servers strip it), because
 * all it can make us do is retry without EDNS. Returns @p info->verdict.
 */
fwd_wire_verdict_t fwd_wire_reply_check(const fwd_wire_pending_t *p, const uint8_t *pkt, size_t len,
                                        bool tcp, fwd_wire_reply_t *info,
                                        fwd_wire_counters_t *counters) STEER_NONNULL(1, 2, 5);

/**
 * Build the client's reply from an accepted, untruncated upstream reply @p up (@p up_len bytes,
 * @p info from fwd_wire_reply_check()) for the parsed client query @p client, into @p out
 * (@p cap bytes), at most @p limit bytes (the client's UDP size: its EDNS payload or 512; 65535
 * over TCP). The client's ID and question (its case) are restored, RD and CD are the client's,
 * RA=1, AA=0 (we are not the authority), AD only when the client set DO or AD (RFC 6840 5.8);
 * the sections are copied, the upstream's OPT is replaced by ours (FWD_WIRE_PAYLOAD, the
 * client's DO, no upstream options) when the client sent EDNS, and records after the upstream
 * OPT (TSIG, anything else) are left out. An extended rcode the client cannot see without
 * EDNS becomes SERVFAIL. When the reply does not fit @p limit it is cut to header + question
 * (+ OPT) with TC=1, so the client retries over TCP and no RRset is split. Returns the length
 * or STEER_EINVAL (a rejected or truncated @p info, another question) / STEER_ESPACE.
 */
int fwd_wire_client_reply(const dns_query_t *client, const uint8_t *up, size_t up_len,
                          const fwd_wire_reply_t *info, uint8_t *out, size_t cap, size_t limit)
    STEER_NONNULL(1, 2, 4, 5) STEER_WUR;

/**
 * Write a probe nonce label into @p out: @p counter in 16 hex digits then 32 random bits in 8,
 * so it is unique per upstream and unguessable (a guessed nonce could be pre-cached). Returns
 * FWD_WIRE_NONCE_LEN; @p out gets a NUL too.
 */
size_t fwd_wire_probe_nonce(fwd_rng_t *rng, uint64_t counter, char out[FWD_WIRE_NONCE_LEN + 1])
    STEER_NONNULL(1, 3);

/**
 * Build a probe into @p buf (@p cap bytes): RECURSIVE asks RD=1 `<nonce>.<name>` (@p nonce a
 * label from fwd_wire_probe_nonce(), @p name the probe name in wire form, @p qtype 0 = A),
 * LIVENESS asks RD=0 `<name>` (NULL @p name = the root) type @p qtype (0 = NS); @p nonce is
 * ignored. Both use a random ID, optional 0x20 and OPT without DO. Fills @p out. Returns the
 * length, STEER_EINVAL (missing name or nonce, bad nonce) or STEER_ERANGE (name too long).
 */
int fwd_wire_probe_build(fwd_wire_probe_kind_t kind, const uint8_t *name, const char *nonce,
                         uint16_t qtype, bool use_0x20, fwd_rng_t *rng, uint8_t *buf, size_t cap,
                         fwd_wire_pending_t *out) STEER_NONNULL(6, 7, 9) STEER_WUR;

/**
 * Classify reply @p pkt to the probe @p p of kind @p kind (see fwd_wire_probe_result_t): the
 * reply must pass fwd_wire_reply_check() (its verdict is counted in @p counters when not
 * NULL); a TC=1 reply counts by its rcode. @p info may be NULL.
 */
fwd_wire_probe_result_t fwd_wire_probe_check(const fwd_wire_pending_t *p,
                                             fwd_wire_probe_kind_t kind, const uint8_t *pkt,
                                             size_t len, fwd_wire_reply_t *info,
                                             fwd_wire_counters_t *counters) STEER_NONNULL(1, 3);

/**
 * Pick a source port uniformly in [@p lo, @p hi] that is not in any of the @p n_excl closed
 * ranges @p excl[i][0]..@p excl[i][1] (the service port, other listeners; any order, may
 * overlap). Rejection sampling, at most 64 draws, so a range with at least half its ports
 * free fails with probability below 2^-64. Returns the port or STEER_ENOENT.
 */
int fwd_wire_port_pick(fwd_rng_t *rng, uint16_t lo, uint16_t hi, const uint16_t (*excl)[2],
                       size_t n_excl) STEER_NONNULL(1);

/** Short name of a verdict for counters and logs ("accept", "forged-id", ...). Static. */
const char *fwd_wire_verdict_name(fwd_wire_verdict_t v);
