/*
 * Internal to the GSLB view (view.h): the compiled structures shared by its three parts,
 * view_build.c (compile a conf_t, control thread), view_answer.c (the query path: find a
 * name, decide, fill the result) and view_explain.c (the same decision, narrated).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gslb/geo_distance.h"
#include "gslb/geoip.h"
#include "gslb/nets_set.h"
#include "gslb/nettree.h"
#include "gslb/paths.h"
#include "gslb/steer.h"
#include "gslb/view.h"

typedef struct {
	char *name;           /* owned */
	gslb_nettree_t *tree; /* owned */
	uint32_t *list_off;   /* per list id: offset into @c pool */
	uint16_t *list_len;   /* per list id: length (0 = the service's configured order) */
	uint16_t *pool;       /* conf datacenter indices */
	size_t n_lists;
	gslb_geoip_db_t *db;       /* owned, NULL without geoip; kept for explain */
	gslb_geoip_db_t *asn_db;   /* owned, NULL without geoip.asn-database */
	gslb_geoip_rules_t *rules; /* owned, NULL without geoip */
	gslb_geo_coords_t *coords; /* owned, one per conf datacenter */
	unsigned *rule_lines;      /* owned, config line per geoip rule (explain) */
	gslb_nets_set_t *nets;     /* owned: the nets prefixes with provenance (explain, maps) */
	unsigned min_prefix4, min_prefix6, max_shrink; /* the map's guards, as configured */
	bool ignore_ecs;
	bool ecs_private_is_absent;
} view_map_t;

typedef struct {
	gslb_policy_svc_t p;          /* p.dcs, p.fallback, p.fallback_cname, p.name owned */
	gslb_policy_addr_t *addrs;    /* owned: every datacenter's addresses, back to back */
	const view_map_t *map;        /* geo only, else NULL */
	uint8_t *conf2svc;            /* owned: conf datacenter index -> p.dcs index, 0xff = none */
	uint16_t *svc2conf;           /* owned: p.dcs index -> conf datacenter index */
	uint8_t persist4, persist6;   /* client prefix hashed by persist */
	bool persist;                 /* some level uses persist: the scope covers the prefix */
	uint32_t answer_slot;         /* first of its VIEW_SVC_ANSWER_SLOTS() answer counters */
	uint16_t qos[CONF_QOS_TERMS]; /* policy qos: the coefficients */
	uint32_t first_dc;            /* its datacenters' first index in per-view arrays such as
	                               * gslb_view.path_cols (services back to back) */
} view_svc_t;

/* A service's answer slots: one per datacenter, then none, fallback and all-down. */
#define VIEW_SVC_ANSWER_SLOTS(s) ((size_t)(s)->p.dc_count + 3)

enum { VIEW_NAME_SERVICE, VIEW_NAME_WHOAMI };

struct gslb_name {
	uint8_t *wire; /* owned, lowercase */
	uint8_t len;
	uint8_t kind;  /* VIEW_NAME_* */
	uint32_t svc;  /* index into view->svcs for services */
	unsigned line; /* of its definition in the config, 0 = unknown */
};

struct gslb_view {
	view_map_t *maps;
	size_t n_maps;
	view_svc_t *svcs;
	size_t n_svcs;
	gslb_name_t *names;
	size_t n_names;
	size_t n_whoami;
	uint32_t *slots; /* names index + 1, 0 = empty; power-of-two size */
	size_t slot_mask;
	char **dc_names;        /* owned copies of the conf datacenter names */
	char *conf_path;        /* owned copy of the config file name, for messages */
	gslb_target_t *targets; /* owned, indexed by target id; names owned */
	size_t n_targets;
	size_t n_dcs;
	/*
	 * Everything above is shared by the views gslb_view_with_health() derives from one
	 * build (immutable once built); @c shared counts those views. Control thread only.
	 */
	uint32_t *shared;
	uint32_t n_answer_slots; /* sum of VIEW_SVC_ANSWER_SLOTS() over the services */
	uint8_t answer_bank;     /* gslb_view_answer_bank() */
	gslb_health_t *health;   /* owned by this view alone */
	uint32_t n_svc_dcs;      /* datacenters of every service, back to back (first_dc) */
	/* The measured paths: a reference (NULL = none, measured policies use their fallback)
	 * and, per service datacenter (first_dc + i), its column in it or GSLB_PATHS_NO_COLUMN,
	 * owned by this view: resolved once per table instead of per query. */
	gslb_paths_t *paths;
	uint8_t *path_cols;
	gslb_steer_t *steer; /* owned: load orders (NULL when no service steers by load) */
	/* From conf paths: (shared, like everything above @c shared) */
	gslb_steer_opts_t steer_opts;
	unsigned paths_margin_pct;         /* qos: the sticky RTT best's bonus */
	unsigned paths_min_diff_ms;        /* rtt hysteresis, for explain */
	unsigned paths_plen4, paths_plen6; /* measurement granularity, for scopes without a table */
	unsigned demand_sample;            /* every Nth measured decision reported as volume */
	bool any_load;                     /* some service steers by load (or qos) */
};

/* How the query's client was turned into the address the decision used. */
typedef enum {
	CLIENT_RESOLVER,    /* no ECS in the query */
	CLIENT_ECS,         /* ECS used */
	CLIENT_ECS_ZERO,    /* ECS with source prefix 0: the resolver asks for no tailoring */
	CLIENT_ECS_IGNORED, /* the map ignores ECS */
	CLIENT_ECS_PRIVATE, /* ECS address private/loopback/link-local: treated as absent */
} client_how_t;

/* What a measured policy found for the client (decide_t.paths). */
typedef enum {
	PATHS_NOT_USED,  /* not a policy by paths */
	PATHS_ROW,       /* the row decided (some datacenter of the service has a cell) */
	PATHS_NO_ROW,    /* no row, or no usable cell: the fallback decided; report as urgent */
	PATHS_NO_TABLE,  /* the view has no table (yet): the fallback decided */
	PATHS_TOO_SHORT, /* the ECS source prefix is shorter than the rows: the fallback */
} paths_how_t;

/* Everything a decision looked at, for explain. */
typedef struct {
	client_how_t how;
	int family; /* of the address decided on */
	uint8_t addr[16];
	uint8_t len;   /* bits of it used (the ECS source prefix or the full address) */
	uint32_t list; /* geo: map list id */
	uint8_t scope; /* map block scope */
	uint8_t order[GSLB_POLICY_DC_MAX];
	uint8_t order_len;
	gslb_policy_query_t q;
	bool map_used; /* the map was looked up (d->list, d->scope valid) */
	/* measured policies: */
	uint8_t paths; /* paths_how_t */
	uint8_t plen;  /* the rows' prefix length for d->family */
	uint32_t row;  /* PATHS_ROW: the row */
	uint8_t measured[GSLB_POLICY_DC_MAX];
	float score[GSLB_POLICY_DC_MAX]; /* qos: per svc->dcs index, valid for measured ones */
} decide_t;

/* FNV-1a of a wire name: the names hash. */
static inline uint32_t view_hash(const uint8_t *wire, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ wire[i]) * 16777619u;
	return h;
}

/* Address family length in bits. */
static inline unsigned family_bits(int family)
{
	return family == AF_INET ? 32 : 128;
}

/** Presentation form of @p addr ("?" if it has none) into @p buf. Any thread. */
void view_addr_str(int family, const uint8_t *addr, char *buf, size_t len) STEER_NONNULL(2, 3);

/** The name @p wire (@p len bytes, lowercase) in @p v's hash, or NULL. Any thread. */
const gslb_name_t *view_names_find(const gslb_view_t *v, const uint8_t *wire, size_t len)
    STEER_NONNULL(1, 2);

/**
 * The address a decision is based on (RFC 7871 7.1.1 / 7.2.1) for @p c under @p map (NULL:
 * no map, private ECS counts as absent) into @p d. Query threads.
 */
void view_pick_client(const view_map_t *map, const gslb_client_t *c, decide_t *d)
    STEER_NONNULL(2, 3);

/**
 * For a measured policy of @p s: the order of its datacenters for the client in @p d (filled
 * by view_pick_client()) into d->q.measured, and d->paths, d->row, d->plen. Returns the ECS
 * scope the measurement needs, at least @p scope. Query threads; no allocation.
 */
uint8_t view_measured_order(const gslb_view_t *v, const view_svc_t *s, sa_family_t family,
                            decide_t *d, uint8_t scope) STEER_NONNULL(1, 2, 4);

/**
 * Decide for service @p s and @p family: the client, the map block and its datacenter order,
 * then one gslb_policy_select() call writing into @p ans (and @p trace unless NULL). Fills
 * @p d with what was looked at and returns the ECS scope. Query threads; no allocation.
 */
uint8_t view_decide(const gslb_view_t *v, const view_svc_t *s, sa_family_t family,
                    const gslb_client_t *client, gslb_policy_rng_t *rng, decide_t *d,
                    gslb_policy_answer_t *ans, gslb_policy_trace_t *trace)
    STEER_NONNULL(1, 2, 4, 5, 6, 7);
