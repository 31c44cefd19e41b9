/*
 * The forwarder engine's internals, shared by engine.c (life cycle, hand-off, control-thread
 * readers), engine_req.c (client requests), engine_probe.c (active probes) and engine_link.c
 * (link state over rtnetlink). Everything here runs on the engine thread unless it says so.
 */
#pragma once

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <urcu/wfcqueue.h>

#include "dns/const.h"
#include "dns/pkt.h"
#include "fwd/engine.h"

/* Upstream queries one request may have outstanding; a group larger than this is still
 * served, the request just stops widening and waits for the ones it asked. */
#define FWD_REQ_ATTEMPTS 8
/* bind() tries with fresh random ports before a socket counts as an error. */
#define FWD_BIND_TRIES 8
/* Datagrams read per readiness callback, so one flooded socket cannot starve the loop. */
#define FWD_RECV_BURST 16
/* Entries the per-second sweep visits per shard. */
#define FWD_SWEEP_VISIT 1024
/* Largest DNS message plus the TCP length prefix. */
#define FWD_TCP_BUF (2 + DNS_MSG_MAXLEN)

/* Upstream IDs and source ports are not reused within this many queries (see fwd_recent_t). */
#define FWD_RECENT 1024

/*
 * The last FWD_RECENT values of a 16-bit field (query IDs, source ports) as a ring and a
 * bitmap. Fresh values are drawn at random as before, and one seen this recently is drawn
 * again: a late reply to an earlier query can never match a new one, and a window of 500
 * queries never repeats a port or an ID. The guessing odds of a blind spoofer move from
 * 1/65536 to at most 1/64512.
 */
typedef struct {
	uint64_t bits[65536 / 64];
	uint16_t ring[FWD_RECENT];
	uint32_t n; /* values added so far */
} fwd_recent_t;

typedef enum {
	FWD_NODE_REQ,
	FWD_NODE_FLUSH,
} fwd_node_kind_t;

/* What travels on the submission queue. */
typedef struct {
	struct cds_wfcq_node node;
	fwd_node_kind_t kind;
} fwd_node_t;

typedef struct {
	fwd_node_t hdr;
	bool all, subtree;
	uint8_t name[DNS_DNAME_MAXLEN];
} fwd_flush_cmd_t;

typedef enum {
	FWD_ATT_IDLE = 0, /* closed */
	FWD_ATT_UDP,
	FWD_ATT_TCP_WRITE, /* connecting, then writing the framed query */
	FWD_ATT_TCP_READ,
} fwd_att_state_t;

typedef struct fwd_req fwd_req_t;

/* One upstream query of a request (UDP, then TCP after TC=1). */
typedef struct {
	fwd_req_t *req;
	uint32_t upstream;
	fwd_att_state_t state;
	int fd;
	ev_io io;
	bool reported;  /* its outcome went to upstream.c */
	bool timed_out; /* the request moved on without it (it may still answer) */
	bool formerr_retried;
	uint64_t sent_us;
	fwd_wire_pending_t pend;
	uint8_t *tcp_buf; /* FWD_TCP_BUF bytes while on TCP */
	size_t tcp_len, tcp_off;
} fwd_att_t;

/* One client query (or prefetch) in flight. */
struct fwd_req {
	fwd_node_t hdr;
	fwd_engine_t *e;
	fwd_req_t *prev, *next;       /* the engine's list of requests */
	fwd_req_t *pf_prev, *pf_next; /* prefetches only: the list of those in flight */
	fwd_client_t client;
	unsigned flags;
	uint16_t len;
	uint8_t pkt[FWD_ENGINE_QUERY_MAX];
	dns_query_t q; /* borrows pkt */
	fwd_try_t t;
	ev_timer retry; /* the current attempt's timeout, or the rest of the budget */
	ev_timer stale; /* RFC 8767 client response timer */
	bool answered;  /* the client has an answer (stale): only the cache is left to refresh */
	bool tapped;    /* sampled for the dnstap log (the client's query was, or a prefetch) */
	/* The last accepted reply that was not usable (REFUSED, LAME, other): given to the
	 * client when no upstream is left (LAME as SERVFAIL). */
	uint8_t *last;
	size_t last_len;
	bool last_lame;
	fwd_wire_reply_t last_info;
	unsigned n_att;
	fwd_att_t att[FWD_REQ_ATTEMPTS];
};

typedef struct fwd_probe_run fwd_probe_run_t;

/* One leg of a probe round: the recursive or the liveness query. */
typedef struct {
	fwd_probe_run_t *run;
	fwd_wire_probe_kind_t kind;
	int fd;
	ev_io io;
	bool done; /* answered or failed */
	fwd_wire_probe_result_t result;
	fwd_wire_pending_t pend;
} fwd_probe_leg_t;

struct fwd_probe_run {
	fwd_engine_t *e;
	fwd_probe_run_t *prev, *next;
	fwd_probe_t p;
	ev_timer timer;
	uint64_t sent_us;
	uint32_t rtt_us;
	fwd_probe_leg_t leg[2]; /* [0] recursive, [1] liveness */
};

/* The engine's view of one upstream. */
typedef struct {
	const char *name; /* owned by the upstream set */
	const char *link; /* owned by the upstream set; NULL: untracked */
	steer_sockaddr_t address, source;
	uint32_t group;
	bool link_up; /* last state reported to the set */
	char addr_str[STEER_SOCKADDR_STRLEN];
} fwd_eup_t;

typedef struct {
	char *domain;
	fwd_policy_t policy;
	uint32_t budget_ms;
	bool has_probe_name;
	uint8_t probe_name[DNS_DNAME_MAXLEN];
} fwd_egroup_t;

struct fwd_engine {
	struct ev_loop *loop;
	pthread_t thread;
	bool started;
	atomic_bool stopping;
	ev_async wake;
	ev_timer probe_timer;
	ev_timer sweep_timer;
	ev_prepare publish;
	int nl_fd; /* rtnetlink, -1 without */
	ev_io nl_io;

	struct cds_wfcq_head qhead;
	struct cds_wfcq_tail qtail;
	_Atomic uint32_t pending;
	_Atomic uint64_t refused_full;
	uint32_t max_pending, stale_after_ms;
	bool use_0x20;
	uint16_t udp_payload; /* our UDP ceiling towards clients (the cache's edns_payload) */
	uint16_t (*port_exclude)[2];
	size_t n_port_exclude;

	fwd_upstreams_t *ups;
	fwd_cache_t *cache;
	fwd_eup_t *eup;
	size_t n_ups;
	fwd_egroup_t *groups;
	size_t n_groups;
	fwd_rng_t rng;
	fwd_recent_t recent_ids, recent_ports;

	/* Taken by the engine thread around calls that change the upstream set and to
	 * publish its counters, by the control thread to copy them. */
	pthread_mutex_t lock;
	fwd_engine_stats_t st;  /* engine thread only */
	fwd_engine_stats_t pub; /* under lock */

	fwd_req_t *reqs;
	fwd_req_t *prefetching;
	fwd_probe_run_t *probes;
	uint8_t rx[DNS_MSG_MAXLEN + 1];
	uint8_t out[DNS_MSG_MAXLEN];
	char identity[256]; /* the NSID of answers (fwd_engine_set_identity), under @c lock */
	uint8_t identity_len;
	tap_thread_t *tap; /* the engine thread's dnstap queue; NULL = no log */
};

/* Monotonic clock, the epoch of the query threads' CLOCK_MONOTONIC_COARSE. */
uint64_t fwd_eng_now_ms(void);
uint64_t fwd_eng_now_us(void);

/* Log every queued upstream state change once. */
void fwd_eng_events(fwd_engine_t *e) STEER_NONNULL(1);

/* True for errors of our own making (descriptors, memory, ports, a query we could not
 * build), which say nothing about the upstream or the way to it. */
bool fwd_eng_local_error(int err);

/**
 * Open a non-blocking UDP socket for upstream @p id: bound to its source address (or the
 * wildcard of its family) and a random port of the wide range minus the excluded ones and
 * the recently used ones, connected to the upstream. Returns the fd or a negative steer_err.
 */
int fwd_eng_udp_open(fwd_engine_t *e, uint32_t id) STEER_NONNULL(1);

/**
 * Give the query just built in @p msg (its pending state @p p) an ID not used by the last
 * FWD_RECENT queries, and remember it.
 */
void fwd_eng_fresh_id(fwd_engine_t *e, uint8_t *msg, fwd_wire_pending_t *p) STEER_NONNULL(1, 2, 3);

/* Requests (engine_req.c). @p r is on the engine's list; start it (or end it at once). */
void fwd_eng_req_start(fwd_engine_t *e, fwd_req_t *r) STEER_NONNULL(1, 2);
/* End @p r without a reply: timers stopped, sockets closed, memory freed. */
void fwd_eng_req_free(fwd_req_t *r) STEER_NONNULL(1);

/* Probes (engine_probe.c): start every due probe and arm the timer for the next one. */
void fwd_eng_probe_rearm(fwd_engine_t *e) STEER_NONNULL(1);
void fwd_eng_probe_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);
void fwd_eng_probe_free(fwd_probe_run_t *run) STEER_NONNULL(1);

/* Link state (engine_link.c). Called from fwd_engine_new() on copies of the @p n upstream
 * definitions: give each one with a source address and no link the interface holding that
 * address (a strdup'ed name, also stored in @p owned[i] for the caller to free). */
void fwd_eng_link_devices(fwd_upstream_def_t *defs, size_t n, char **owned) STEER_NONNULL(1, 3);
/* Open the rtnetlink socket (control thread, before start). */
int fwd_eng_link_open(fwd_engine_t *e, char *err, size_t errlen) STEER_NONNULL(1, 2);
/* Engine thread, before the loop runs: read every tracked device's state. */
void fwd_eng_link_initial(fwd_engine_t *e) STEER_NONNULL(1);
