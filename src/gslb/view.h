/*
 * The GSLB view: everything query threads need to answer GSLB names, compiled from a conf_t
 * on the control thread and then immutable (published inside the auth view with RCU, like
 * zones). It owns the compiled maps (nets + mmdb + default -> gslb_nettree_t of datacenter
 * lists), the services (gslb_policy_svc_t with their addresses), the whoami names and the
 * health table built from the admin overrides.
 *
 * Query path: gslb_view_find() says whether a name is a GSLB name, gslb_view_answer() decides
 * for one query. Both are allocation- and lock-free.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "base/sockaddr.h"
#include "base/warnings.h"
#include "conf/conf.h"
#include "dns/ecs.h"
#include "gslb/decision.h"
#include "gslb/demand.h"
#include "gslb/health.h"
#include "gslb/nets_set.h"
#include "gslb/paths.h"
#include "gslb/policy.h"
#include "gslb/stats.h"

typedef struct gslb_view gslb_view_t;

/* TTL of whoami answers: they describe one client, so they are not worth caching. */
#define GSLB_VIEW_WHOAMI_TTL 0

/*
 * What one query thread keeps for GSLB decisions: the policies' random state and round-robin
 * counters, and the decision counters. Owned by the query layer's per-thread context
 * (auth_qctx_t); only its thread writes it.
 */
typedef struct {
	gslb_policy_rng_t rng;
	gslb_stats_t stats;
	gslb_decision_sampler_t decisions; /* the decision log's sampler; zero = off */
	gslb_answer_counters_t answers;    /* per service and datacenter, see gslb/stats.h */
	gslb_demand_ring_t *demand;        /* measured paths' demand report; NULL = off */
} gslb_qstate_t;

/* A GSLB name found by gslb_view_find(): a service or a whoami name. */
typedef struct gslb_name gslb_name_t;

/* The client as the query thread sees it. */
typedef struct {
	const steer_sockaddr_t *resolver; /* the query's source address */
	const dns_ecs_t *ecs;             /* the query's valid ECS option, or NULL */
} gslb_client_t;

/*
 * A decision. Fixed size; lives on the query thread's stack. The policy writes its answer
 * straight into @c ans (no second translation); the auth layer reads @c ans and the address
 * bytes through gslb_result_addr().
 */
typedef struct {
	gslb_policy_answer_t ans;     /* kind, ttl, the addresses (idx[]) or the CNAME */
	const gslb_policy_svc_t *svc; /* borrowed: the service ans.idx[] indexes; NULL for whoami */
	uint8_t ecs_scope; /* SCOPE PREFIX-LENGTH for the response (0 = client-independent) */
	bool ecs_ignored;  /* the query had ECS but the decision used the resolver's address
	                    * (the map sets ignore-ecs, or a private ECS address is absent) */
	uint8_t txt[512];  /* whoami (GSLB_ANSWER_TXT): TXT rdata */
	uint16_t txt_len;
	uint8_t whoami_addr[16]; /* whoami A/AAAA: the address answered (ans.count == 1) */
} gslb_result_t;

/* How gslb_view_build() treats the view it replaces. */
typedef struct {
	const gslb_view_t *running; /* the view serving now (reload), NULL at start-up: the
	                             * nets shrink guard compares each file with its count here */
	bool force; /* steerctl reload --force, steerd --force: a shrunk nets file only warns */
	/* Nets counts as last accepted (gslb.nets-state-file), for files @c running lacks;
	 * NULL = none. */
	const gslb_nets_baseline_t *baseline;
} gslb_view_build_opts_t;

/** Address bytes of answer entry @p i (4 for A, 16 for AAAA), borrowed from the view or @p r. */
static inline const uint8_t *gslb_result_addr(const gslb_result_t *r, unsigned i)
{
	return r->svc ? gslb_policy_answer_addr(r->svc, &r->ans, i)->addr : r->whoami_addr;
}

/**
 * Compile the GSLB part of @p conf (datacenters, maps, services, whoami, overrides and the
 * state file) into a view. Reads nets files and mmdb databases and applies the nets guard
 * rails (see gslb/nets_set.h) with @p opts (NULL = start-up, no running view). Errors are
 * "file:line: text" in @p err (using the line numbers kept in conf); findings that do not stop
 * the build are appended to @p warnings (may be NULL). A conf without GSLB sections gives an
 * empty view (never NULL on success). Control thread only. Returns 0 or a negative steer_err.
 */
int gslb_view_build(const conf_t *conf, const gslb_view_build_opts_t *opts, gslb_view_t **out,
                    steer_warnings_t *warnings, char *err, size_t errlen)
    STEER_NONNULL(1, 3, 5) STEER_WUR;

/* One map of a view, for listing (steerctl maps). Pointers borrowed from the view. */
typedef struct {
	const char *name;
	const gslb_nets_set_t *nets;    /* its nets entries with counts and load times */
	const char *geoip_database;     /* path, NULL without geoip */
	const char *geoip_asn_database; /* path, NULL without one */
	unsigned min_prefix4, min_prefix6, max_shrink;
} gslb_view_map_info_t;

/**
 * Describe map @p i (0 .. the map count of gslb_view_counts() - 1) into @p info. Returns 0 or
 * STEER_ENOENT past the end. Control thread (or any reader of a published view).
 */
int gslb_view_map_info(const gslb_view_t *view, size_t i, gslb_view_map_info_t *info)
    STEER_NONNULL(1, 3);

/**
 * A new view answering like @p view but reading @p health (taken over), for an admin override
 * or a monitor change: the maps, services and names are shared with @p view (reference
 * counted), nothing is rebuilt or copied. @p health must have been derived from
 * gslb_view_health(@p view) with gslb_health_dup() so that target ids and names match. Publish
 * it like any view; @p view and the new one can then be freed in any order. Control thread
 * only (the reference count is not atomic). Aborts on OOM.
 */
gslb_view_t *gslb_view_with_health(const gslb_view_t *view, gslb_health_t *health)
    STEER_NONNULL(1, 2) STEER_WUR;

/**
 * A new view answering like @p view but steering measured policies by @p paths (a reference is
 * taken; NULL = no table, measured policies then use their fallback policy): everything else is
 * shared as with gslb_view_with_health(), the health table is duplicated (gslb_health_dup()).
 * Views derived from the result with gslb_view_with_health() keep the table. Publish it like any
 * view. Control thread only. Aborts on OOM.
 */
gslb_view_t *gslb_view_with_paths(const gslb_view_t *view, gslb_paths_t *paths)
    STEER_NONNULL(1) STEER_WUR;

/**
 * True while a load policy's hysteresis is counting rounds for a challenger (gslb/steer.h): the
 * caller should then derive the view again after the next metric round even if no load value
 * changed, so the rounds are seen. Control thread.
 */
bool gslb_view_steer_pending(const gslb_view_t *view) STEER_NONNULL(1);

/** The path table @p view steers by, NULL when none. Borrowed. Control thread. */
const gslb_paths_t *gslb_view_paths(const gslb_view_t *view) STEER_NONNULL(1);

/** Free a view (after the RCU grace period). NULL is ignored. */
void gslb_view_free(gslb_view_t *view);

/** The GSLB name @p qname (lowercase wire) or NULL. Lock-free; any thread. */
const gslb_name_t *gslb_view_find(const gslb_view_t *view, const uint8_t *qname)
    STEER_NONNULL(1, 2);

/**
 * Decide the answer to @p qtype at @p name for @p client into @p out, drawing from and
 * counting into @p qs (the query thread's own). The ECS scope follows RFC 7871: the width of the
 * map block the decision came from (at least the persist prefix for persist policies), 0 when the
 * answer does not depend on the client, the source prefix for whoami. Query threads; no allocation,
 * no locks.
 *
 * Services: A and AAAA run the policy for IPv4 / IPv6; ANY answers like A (RFC 8482 lets a
 * server answer ANY with one RRset); every other type is NODATA with the service TTL (the auth
 * layer answers those from the zone instead, see gslb_view_name_answers()). The
 * decision uses the ECS address when the query carries ECS with a source prefix > 0, the map
 * (geo) does not set ignore-ecs, and the address is not private/loopback/link-local under
 * ecs-private-is-absent (services without a map treat private ECS as absent); otherwise the
 * resolver's address (IPv4-mapped IPv6 as IPv4) and a scope of 0. Whoami: A/AAAA answer the
 * resolver's address when its family matches the type (else NODATA); TXT answers the strings
 * "resolver ADDR" and "ecs ADDR/LEN" (or "ecs none"); TTL GSLB_VIEW_WHOAMI_TTL.
 */
void gslb_view_answer(const gslb_view_t *view, const gslb_name_t *name, uint16_t qtype,
                      const gslb_client_t *client, gslb_qstate_t *qs, gslb_result_t *out)
    STEER_NONNULL(1, 2, 4, 5, 6);

/**
 * Explain the decision for @p name (presentation form) and a client at @p client_ip with an
 * optional ECS subnet @p ecs ("192.0.2.0/24", or NULL): the map block matched and its scope,
 * the datacenter order, what was skipped and why, the chosen addresses, TTL. Writes text
 * lines into @p buf. Returns 0 or a negative steer_err with a message in @p buf.
 * Control thread (steerctl explain), or offline from a config.
 */
int gslb_view_explain(const gslb_view_t *view, const char *name, const char *client_ip,
                      const char *ecs, char *buf, size_t len) STEER_NONNULL(1, 2, 3, 5);

/*
 * A health target of the view: one service address. The view numbers them; whoever attaches
 * monitors to targets (the daemon's planner) reads this list instead of re-deriving the
 * numbering. The conf_t indices refer to the configuration the view was built from.
 */
typedef struct {
	uint32_t id;         /* in gslb_view_health(), equal to its index in the list */
	const char *name;    /* "service/<service>/<datacenter>/<address>", owned by the view */
	sa_family_t family;  /* AF_INET or AF_INET6 */
	const uint8_t *addr; /* the answer address (4 or 16 bytes), borrowed from the view */
	size_t service;      /* conf_t.services[service] */
	size_t service_dc;   /* ... .dcs[service_dc] */
	size_t address;      /* ... .addresses[address] (probe, requires) */
	size_t datacenter;   /* conf_t.datacenters[datacenter] (its link monitor) */
	size_t monitor;      /* the monitor that applies (the datacenter entry's, else the
	                      * service's), conf_t.monitors index or CONF_MONITOR_NONE */
} gslb_target_t;

/**
 * The view's targets, @p n of them, in id order; borrowed, valid as long as @p view (and the
 * views gslb_view_with_health() derives from it). Control thread.
 */
const gslb_target_t *gslb_view_targets(const gslb_view_t *view, size_t *n) STEER_NONNULL(1, 2);

/** The health table of the view (for listing targets and their states). */
const gslb_health_t *gslb_view_health(const gslb_view_t *view) STEER_NONNULL(1);

/* What the answers of one slot of gslb_answer_counters_t count, besides a datacenter. */
#define GSLB_ANSWER_DC_NONE     "none"     /* no datacenter had an address of the family */
#define GSLB_ANSWER_DC_FALLBACK "fallback" /* all down: the fallback addresses or CNAME */
#define GSLB_ANSWER_DC_ALL_DOWN "all-down" /* all down: any other all-down answer */

/**
 * The bank (0 or 1) the query threads count @p view's answers into: a build with a running
 * view takes the other bank than it, views derived with gslb_view_with_health() share it.
 * Any thread.
 */
unsigned gslb_view_answer_bank(const gslb_view_t *view) STEER_NONNULL(1);

/**
 * Number of answer slots @p view numbers (one per service datacenter, plus none, fallback
 * and all-down per service); slots from GSLB_ANSWER_SLOTS on are counted as untracked.
 */
size_t gslb_view_answer_slots(const gslb_view_t *view) STEER_NONNULL(1);

/**
 * What slot @p slot (< gslb_view_answer_slots()) counts: the service's name (as configured,
 * trailing dot included) and the datacenter's name or one of GSLB_ANSWER_DC_*. Both borrowed
 * from the view. Control thread (or any reader of a published view).
 */
void gslb_view_answer_slot(const gslb_view_t *view, size_t slot, const char **service,
                           const char **datacenter) STEER_NONNULL(1, 3, 4);

/* A GSLB name as gslb_view_name_info() describes it. */
typedef struct {
	const uint8_t *wire; /* lowercase wire form, borrowed from the view */
	bool whoami;         /* a whoami name, else a service */
	const char *file;    /* the config file that defines it, borrowed */
	unsigned line;       /* its line there, 0 when unknown */
} gslb_name_info_t;

/**
 * True when GSLB name @p name answers @p qtype itself: A, AAAA and ANY for a service (plus TXT
 * for a whoami name). Every other type at the name is answered from the zone around it.
 * Query threads; no allocation.
 */
bool gslb_view_name_answers(const gslb_name_t *name, uint16_t qtype) STEER_NONNULL(1);

/** Number of GSLB names (services and whoami), for gslb_view_name_info(). */
size_t gslb_view_name_count(const gslb_view_t *view) STEER_NONNULL(1);

/**
 * Describe name @p i (0 <= i < gslb_view_name_count()) into @p out, pointers borrowed from
 * @p view. Control thread (configuration checks).
 */
void gslb_view_name_info(const gslb_view_t *view, size_t i, gslb_name_info_t *out)
    STEER_NONNULL(1, 3);

/** Number of services, maps and whoami names (status output). */
void gslb_view_counts(const gslb_view_t *view, size_t *services, size_t *maps, size_t *whoami)
    STEER_NONNULL(1, 2, 3, 4);
