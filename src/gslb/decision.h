/*
 * The sample hook of the GSLB decision log. A query thread that has a sampler records every
 * Nth service decision (of its own, counted per thread) into a fixed-size gslb_decision_t
 * and hands it to the sampler's callback, which must not block, lock or allocate (the
 * daemon's callback copies it into the thread's single-producer ring). Whoever drains the
 * records asks the explain machinery for the reasons, off the query path.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "base/sockaddr.h"
#include "dns/const.h"
#include "gslb/policy.h"

/* Addresses kept per recorded decision; the rest are only counted. */
#define GSLB_DECISION_ADDRS 16

/* One sampled decision, as the query thread saw and made it. */
typedef struct {
	struct timespec time;           /* CLOCK_REALTIME */
	uint8_t name[DNS_DNAME_MAXLEN]; /* the GSLB name (lowercase wire) */
	uint16_t qtype;
	steer_sockaddr_t resolver;
	bool has_ecs;
	uint16_t ecs_family; /* DNS_ECS_FAMILY_* */
	uint8_t ecs_source_len;
	uint8_t ecs_addr[16];
	gslb_answer_kind_t kind;
	bool all_down;
	uint8_t ecs_scope;
	uint32_t ttl;
	uint8_t count; /* addresses answered (kind GSLB_ANSWER_ADDRS) */
	sa_family_t family;
	uint8_t addrs[GSLB_DECISION_ADDRS][16];
	uint8_t cname[DNS_DNAME_MAXLEN]; /* kind GSLB_ANSWER_CNAME: the target (wire) */
} gslb_decision_t;

/** Take @p d (valid during the call only). On the query thread: must not block or allocate. */
typedef void (*gslb_decision_cb)(void *arg, const gslb_decision_t *d);

/* A query thread's sampler; @c record NULL = no decision log. */
typedef struct {
	gslb_decision_cb record;
	void *arg;
	unsigned sample;    /* every Nth decision; 0 or 1 = all */
	unsigned countdown; /* decisions to skip before the next recorded one */
} gslb_decision_sampler_t;
