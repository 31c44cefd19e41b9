/*
 * Selection policies: which addresses a GSLB service answers, given the client, the query's
 * address family and the health table. Pure functions, no allocation, no locks, no global
 * state; called on query threads with a per-thread gslb_policy_rng_t.
 *
 * Model
 *   service      an ordered list of datacenters (at most GSLB_POLICY_DC_MAX), a
 *                datacenter-level policy, an all-down policy and a TTL.
 *   datacenter   an address set (at most GSLB_POLICY_ADDR_MAX; IPv4 and IPv6 mixed, each with a
 *                weight 1..65535 and a target id in the health table), an in-datacenter policy
 *                and a weight (used by datacenter-level weighted and persist).
 *
 * Selection is two-level (gdnsd's geoip -> metafo -> weighted, F5's wide IP -> pool -> member):
 *   1. the datacenter-level policy picks one datacenter among the *available* ones:
 *      failover     the first available in configured order (F5 global availability, metafo)
 *      geo          failover over the client's map order (gslb_policy_query_t.order)
 *      weighted     random, proportional to the datacenter weights
 *      persist      rendezvous hash of the client subnet, weighted (F5 LDNS persistence)
 *      round-robin  the next one, per worker thread
 *      measured     failover over an order the caller measured (gslb_policy_query_t.measured):
 *                   rtt, completion-rate, hops and qos order by the client prefix's path
 *                   measurements, least-connections, capacity, packet-rate and kbps by the
 *                   datacenters' load (F5's dynamic methods; the GSLB view computes the order).
 *                   Datacenters without a measurement follow in the fallback policy's order.
 *                   Without any measurement (an unknown prefix, no load values) the service's
 *                   fallback policy, any of the above but measured, decides instead, exactly
 *                   as if it were the service's policy.
 *   2. the in-datacenter policy picks addresses among that datacenter's UP addresses:
 *      all          every UP address (configured order)
 *      failover     the first UP address in configured order (gdnsd simplefo)
 *      weighted     one, random, proportional to the weights
 *      multi        up to N, by weight without replacement (gdnsd weighted `multi`)
 *      round-robin  one, the next one per worker thread
 *      persist      one, rendezvous hash of the client subnet, weighted
 *
 * Address families: an A query considers only IPv4 addresses, AAAA only IPv6. A datacenter is
 * *available* for a family when it has at least one UP address of that family. A datacenter
 * with no address of that family at all is skipped (trace: GSLB_DC_NO_FAMILY) without
 * counting as down; if no considered datacenter has an address of the family the answer is
 * NODATA (the name simply has no records of that type) and the all-down policy is not used.
 * gdnsd instead fails over per family only within one resource set; we chose the skip because
 * dual-stack and IPv4-only sites commonly mix in one service.
 *
 * All-down: when datacenters have addresses of the family but none is UP, the service's
 * explicit all-down policy answers:
 *   first-datacenter  every address of the family of the first considered datacenter that has
 *                     any, regardless of health (gdnsd's behaviour, made explicit)
 *   fallback          the configured fallback addresses of the family (NODATA if none of the
 *                     family), or the configured fallback CNAME target
 *   nodata / servfail
 *
 * TTL: the service TTL, capped by the lowest non-zero TTL cap of every target whose state the
 * decision read (the chosen addresses and the datacenters examined and skipped before them),
 * because any of those changing state changes the answer (gdnsd's metafo merges the same way).
 *
 * Determinism: failover, geo, all, persist and the measured kinds depend only on (service,
 * family, client key or measured order, health snapshot), so every node of a cluster gives the same
 * answer and the ECS scope can be derived from the map and the persist prefix. Persist uses
 * integer-only hashing (no libm) so nodes on different platforms agree. Weighted, multi and
 * round-robin draw from the per-thread state and are random per query by design.
 *
 * Round-robin is per worker thread, as gdnsd's: each thread keeps its own counters (in
 * gslb_policy_rng_t, GSLB_POLICY_RR_SLOTS of them, a service and datacenter hashing to one), so
 * a thread cycles exactly through the UP candidates, and N threads together spread evenly.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/compiler.h"
#include "gslb/health.h"

#define GSLB_POLICY_ADDR_MAX 64   /* addresses per datacenter: one bit each in a uint64_t */
#define GSLB_POLICY_DC_MAX   64   /* datacenters per service: one bit each in a uint64_t */
#define GSLB_POLICY_DC_NONE  0xff /* answer.dc when no datacenter's addresses are answered */
#define GSLB_POLICY_RR_SLOTS 256  /* per-thread round-robin counters, see gslb_policy_rng_t */
#define GSLB_POLICY_TTL_MAX  UINT32_C(0x7fffffff) /* RFC 2181 8 */

typedef enum {
	GSLB_POLICY_FAILOVER,    /* both levels */
	GSLB_POLICY_GEO,         /* datacenter level only */
	GSLB_POLICY_ROUND_ROBIN, /* both levels */
	GSLB_POLICY_WEIGHTED,    /* both levels */
	GSLB_POLICY_PERSIST,     /* both levels */
	GSLB_POLICY_MULTI,       /* in-datacenter only */
	GSLB_POLICY_ALL,         /* in-datacenter only */
	/* Measured (gslb_policy_kind_measured()), datacenter level only. By the client prefix's
	 * paths: */
	GSLB_POLICY_RTT,             /* lowest round-trip time */
	GSLB_POLICY_COMPLETION_RATE, /* most probes answered */
	GSLB_POLICY_HOPS,            /* fewest hops */
	GSLB_POLICY_QOS,             /* highest weighted score of paths and load */
	/* By the datacenters' load: */
	GSLB_POLICY_LEAST_CONNECTIONS, /* fewest current connections */
	GSLB_POLICY_CAPACITY,          /* most spare capacity */
	GSLB_POLICY_PACKET_RATE,       /* fewest packets per second */
	GSLB_POLICY_KBPS,              /* fewest kilobytes per second */
} gslb_policy_kind_t;

typedef enum {
	GSLB_ALLDOWN_FIRST_DC,
	GSLB_ALLDOWN_FALLBACK,
	GSLB_ALLDOWN_NODATA,
	GSLB_ALLDOWN_SERVFAIL,
} gslb_alldown_t;

/* One answer address. The integrator fills the first four fields. */
typedef struct {
	uint8_t addr[16];   /* network order; the first 4 bytes for AF_INET */
	sa_family_t family; /* AF_INET or AF_INET6 */
	uint16_t weight;    /* 1..65535 */
	uint32_t target;    /* id in the health table */
	uint64_t hrw_id;    /* derived by gslb_policy_svc_prepare(): persist identity */
} gslb_policy_addr_t;

typedef struct {
	const char *name;          /* borrowed; for the trace and the persist identity */
	gslb_policy_addr_t *addrs; /* borrowed, @c addr_count of them */
	uint8_t addr_count;        /* 1..GSLB_POLICY_ADDR_MAX */
	gslb_policy_kind_t policy; /* in-datacenter policy */
	uint8_t multi;             /* N for GSLB_POLICY_MULTI, 1..GSLB_POLICY_ADDR_MAX */
	uint16_t weight;           /* 1..65535, for datacenter-level weighted and persist */
	/* Derived by gslb_policy_svc_prepare(): */
	uint64_t mask4, mask6; /* which addrs[] are IPv4 / IPv6 */
	uint64_t hrw_id;       /* persist identity of the datacenter (hash of its name) */
} gslb_policy_dc_t;

typedef struct {
	const char *name;          /* borrowed; seeds the round-robin slot */
	gslb_policy_dc_t *dcs;     /* borrowed, @c dc_count of them, in configured order */
	uint8_t dc_count;          /* 1..GSLB_POLICY_DC_MAX */
	gslb_policy_kind_t policy; /* datacenter-level policy */
	/* measured policies: the datacenter-level, non-measured policy deciding for a client
	 * without measurements (geo reads gslb_policy_query_t.order as usual) */
	gslb_policy_kind_t fallback_policy;
	gslb_alldown_t all_down;
	/* all_down == GSLB_ALLDOWN_FALLBACK: addresses (health ignored) or a CNAME, not both */
	gslb_policy_addr_t *fallback;  /* borrowed */
	uint8_t fallback_count;        /* 0..GSLB_POLICY_ADDR_MAX */
	const uint8_t *fallback_cname; /* borrowed, uncompressed wire form, or NULL */
	uint32_t ttl;                  /* 0..GSLB_POLICY_TTL_MAX */
	uint8_t rr_slot;               /* derived: first round-robin slot of this service */
} gslb_policy_svc_t;

/* What a query brings to the decision. */
typedef struct {
	sa_family_t family; /* AF_INET for A, AF_INET6 for AAAA */
	/* geo only: indices into svc->dcs, best first. Out-of-range and repeated entries are
	 * dropped; datacenters not listed are not candidates (the map decides who may serve the
	 * client). NULL, empty, or nothing valid left = the configured order. */
	const uint8_t *order;
	uint8_t order_len;
	uint64_t client_key; /* persist only: gslb_policy_client_key() of the client subnet */
	/* measured policies only: indices into svc->dcs that have a measurement, best first
	 * (invalid and repeated entries dropped). The datacenters not listed follow in the fallback
	 * policy's order (@c order for geo, else configured). NULL or empty: no measurement for
	 * this query, the fallback policy decides. */
	const uint8_t *measured;
	uint8_t measured_len;
} gslb_policy_query_t;

/* Per worker thread, owned by that thread: random state and round-robin counters. */
typedef struct {
	uint64_t s; /* splitmix64 state */
	uint32_t rr[GSLB_POLICY_RR_SLOTS];
} gslb_policy_rng_t;

typedef enum {
	GSLB_ANSWER_ADDRS,    /* answer.idx[] index svc->dcs[answer.dc].addrs or svc->fallback */
	GSLB_ANSWER_CNAME,    /* answer.cname */
	GSLB_ANSWER_NODATA,   /* no records of the family */
	GSLB_ANSWER_SERVFAIL, /* all-down policy servfail */
	GSLB_ANSWER_TXT,      /* not from a policy: the view's whoami TXT (gslb_result_t.txt) */
} gslb_answer_kind_t;

typedef struct {
	gslb_answer_kind_t kind;
	uint8_t dc;    /* datacenter answered from, GSLB_POLICY_DC_NONE otherwise */
	bool all_down; /* the all-down policy decided */
	bool fallback; /* idx[] index svc->fallback */
	uint8_t count; /* entries in idx[] */
	uint8_t idx[GSLB_POLICY_ADDR_MAX];
	uint32_t ttl; /* for every kind (a NODATA answer may still prefer the SOA minimum) */
	const uint8_t *cname;
} gslb_policy_answer_t;

/* Why a datacenter was or was not used, for `explain`. */
typedef enum {
	GSLB_DC_UNSEEN,      /* not examined: a better one was chosen first */
	GSLB_DC_CHOSEN,      /* the datacenter-level policy picked it */
	GSLB_DC_CANDIDATE,   /* available, but weighted/persist/round-robin picked another */
	GSLB_DC_NO_FAMILY,   /* no address of the query's family */
	GSLB_DC_DOWN,        /* every address of the family DOWN, at least one by a monitor */
	GSLB_DC_FORCED_DOWN, /* every address of the family forced DOWN by an admin override */
} gslb_dc_status_t;

typedef struct {
	uint8_t dc;          /* index in svc->dcs */
	uint8_t status;      /* gslb_dc_status_t */
	uint8_t total;       /* addresses of the family (valid unless UNSEEN) */
	uint8_t up;          /* of which UP */
	uint8_t forced_down; /* of which forced DOWN */
} gslb_policy_trace_dc_t;

/* The decision trace: fixed size, filled only when the caller passes one. */
typedef struct {
	gslb_policy_kind_t policy; /* that decided: the service's, or its fallback policy */
	uint8_t n_measured;        /* of the datacenters considered, the first this many were
	                            * ordered by measurements (measured policies) */
	uint8_t n;                 /* datacenters considered, in order */
	gslb_policy_trace_dc_t dcs[GSLB_POLICY_DC_MAX];
	uint32_t ttl_cap; /* lowest health TTL cap read, 0 = none */
} gslb_policy_trace_t;

/** Seed a per-thread state (e.g. from getrandom() and the thread index). Any thread. */
void gslb_policy_rng_init(gslb_policy_rng_t *rng, uint64_t seed) STEER_NONNULL(1);

/**
 * Check a service the integrator filled in and compute its derived fields (family masks,
 * persist identities, round-robin slot). Call once at config load, before the service is
 * published; the select function assumes a prepared service. Returns 0 or STEER_ECONF with a
 * message in @p err naming the service, datacenter and address concerned.
 */
int gslb_policy_svc_prepare(gslb_policy_svc_t *svc, char *err, size_t errlen)
    STEER_NONNULL(1, 2) STEER_WUR;

/**
 * Select the answer for @p q (see the model above) into @p out, and explain it into @p trace
 * unless that is NULL (the query path passes NULL). @p health may be NULL: every target UP.
 * Reads @p svc and @p health only; updates @p rng. Query threads; no allocation, no locks.
 */
void gslb_policy_select(const gslb_policy_svc_t *svc, const gslb_health_t *health,
                        const gslb_policy_query_t *q, gslb_policy_rng_t *rng,
                        gslb_policy_answer_t *out, gslb_policy_trace_t *trace)
    STEER_NONNULL(1, 3, 4, 5);

/** The address answer entry @p i stands for. */
static inline const gslb_policy_addr_t *
gslb_policy_answer_addr(const gslb_policy_svc_t *svc, const gslb_policy_answer_t *ans, unsigned i)
{
	return ans->fallback ? &svc->fallback[ans->idx[i]] : &svc->dcs[ans->dc].addrs[ans->idx[i]];
}

/**
 * The persist key of a client subnet: a hash of @p family and the first @p prefix_len bits of
 * @p addr (16 bytes, network order; bits beyond the prefix are ignored). Callers pick the
 * prefix (e.g. /24 IPv4, /56 IPv6, F5's LDNS persistence masks) and should make the ECS scope
 * at least that long. Stable across versions and platforms. Any thread.
 */
uint64_t gslb_policy_client_key(sa_family_t family, const uint8_t *addr, unsigned prefix_len)
    STEER_NONNULL(2);

/** Parse a policy name ("failover", "geo", "round-robin", ...). Returns 0 or STEER_EINVAL. */
int gslb_policy_kind_parse(const char *name, gslb_policy_kind_t *out) STEER_NONNULL(1, 2) STEER_WUR;

/** Name of a policy, as gslb_policy_kind_parse() accepts it. */
const char *gslb_policy_kind_name(gslb_policy_kind_t kind);

/** True when @p kind may pick datacenters / addresses inside a datacenter. */
bool gslb_policy_kind_dc_level(gslb_policy_kind_t kind);
bool gslb_policy_kind_in_dc(gslb_policy_kind_t kind);

/** True when @p kind orders datacenters by measurements (rtt ... kbps). */
bool gslb_policy_kind_measured(gslb_policy_kind_t kind);

/** True for the measured kinds that order by the client prefix's paths (rtt, completion-rate,
 * hops, qos); the others order by datacenter load. */
bool gslb_policy_kind_by_path(gslb_policy_kind_t kind);

/** Parse "first-datacenter", "fallback", "nodata", "servfail". Returns 0 or STEER_EINVAL. */
int gslb_alldown_parse(const char *name, gslb_alldown_t *out) STEER_NONNULL(1, 2) STEER_WUR;

/** Name of an all-down policy. */
const char *gslb_alldown_name(gslb_alldown_t a);

/** Short text for a datacenter status ("chosen", "all DOWN", "no IPv6 addresses", ...). */
const char *gslb_dc_status_str(gslb_dc_status_t s, sa_family_t family);

/**
 * Write a human explanation of a decision (datacenters in order with their status and UP
 * counts, the answer, the TTL) into @p buf, always terminated; lines end in '\n'. Returns the
 * length snprintf() semantics would need. For `steerctl explain`; not for the query path.
 */
int gslb_policy_explain(const gslb_policy_svc_t *svc, const gslb_policy_query_t *q,
                        const gslb_policy_answer_t *ans, const gslb_policy_trace_t *trace,
                        char *buf, size_t len) STEER_NONNULL(1, 2, 3, 4, 5);
