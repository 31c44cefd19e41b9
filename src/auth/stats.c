#include "auth/stats.h"

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "base/compiler.h"

/* ---- ECS resolvers ---- */

typedef struct stats_ecs_resolver stats_ecs_resolver_t;

/* The address as two words: IPv6, IPv4 as IPv4-mapped. Returns false for other families. */
static bool resolver_key(const steer_sockaddr_t *sa, uint64_t key[2])
{
	uint8_t a[16] = {0};
	if (sa->sa.sa_family == AF_INET) {
		a[10] = a[11] = 0xff;
		memcpy(a + 12, &sa->sin.sin_addr, 4);
	} else if (sa->sa.sa_family == AF_INET6) {
		memcpy(a, sa->sin6.sin6_addr.s6_addr, 16);
	} else {
		return false;
	}
	memcpy(key, a, 16);
	return true;
}

static size_t resolver_set(const uint64_t key[2])
{
	uint64_t h =
	    (key[0] ^ (key[1] * UINT64_C(0x9e3779b97f4a7c15))) * UINT64_C(0xff51afd7ed558ccd);
	return (size_t)(h >> 32) % (STATS_ECS_RESOLVERS / STATS_ECS_WAYS) * STATS_ECS_WAYS;
}

#define LOAD(x)     atomic_load_explicit(&(x), memory_order_relaxed)
#define STORE(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)

/* Owner (single writer) rewrites entry @p e: the seqlock write side. */
static void resolver_write(stats_ecs_resolver_t *e, const uint64_t key[2], uint64_t queries)
{
	uint32_t seq = LOAD(e->seq);
	STORE(e->seq, seq + 1);
	atomic_thread_fence(memory_order_release);
	STORE(e->addr[0], key[0]);
	STORE(e->addr[1], key[1]);
	STORE(e->queries, queries);
	atomic_store_explicit(&e->seq, seq + 2, memory_order_release);
}

/* A consistent copy of entry @p e written by another thread; false if it kept changing. */
static bool resolver_read(const stats_ecs_resolver_t *e, uint64_t key[2], uint64_t *queries)
{
	for (int tries = 0; tries < 8; tries++) {
		uint32_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
		key[0] = LOAD(e->addr[0]);
		key[1] = LOAD(e->addr[1]);
		*queries = LOAD(e->queries);
		atomic_thread_fence(memory_order_acquire);
		uint32_t s2 = LOAD(e->seq);
		if (s1 == s2 && !(s1 & 1))
			return true;
	}
	return false;
}

/* Add @p queries for @p key to the set of @p top (the entry with fewest queries makes room). */
static void resolver_add(struct stats_ecs_top *top, const uint64_t key[2], uint64_t queries,
                         bool replace_always)
{
	stats_ecs_resolver_t *set = &top->e[resolver_set(key)];
	stats_ecs_resolver_t *victim = &set[0];
	uint64_t least = UINT64_MAX;
	for (size_t i = 0; i < STATS_ECS_WAYS; i++) {
		uint64_t q = LOAD(set[i].queries);
		if (q != 0 && LOAD(set[i].addr[0]) == key[0] && LOAD(set[i].addr[1]) == key[1]) {
			STORE(set[i].queries, q + queries);
			return;
		}
		if (q < least) {
			least = q;
			victim = &set[i];
		}
	}
	if (replace_always || least < queries)
		resolver_write(victim, key, queries);
}

void auth_stats_ecs_resolver(auth_stats_t *stats, const steer_sockaddr_t *remote)
{
	uint64_t key[2];
	if (resolver_key(remote, key))
		resolver_add(&stats->ecs_top, key, 1, true);
}

static void resolvers_merge(struct stats_ecs_top *dst, const struct stats_ecs_top *src)
{
	for (size_t i = 0; i < STATS_ECS_RESOLVERS; i++) {
		uint64_t key[2], queries;
		if (resolver_read(&src->e[i], key, &queries) && queries > 0)
			resolver_add(dst, key, queries, false);
	}
}

size_t auth_stats_top_resolvers(const auth_stats_t *stats, auth_stats_resolver_t *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < STATS_ECS_RESOLVERS; i++) {
		uint64_t key[2], queries;
		if (!resolver_read(&stats->ecs_top.e[i], key, &queries) || queries == 0)
			continue;
		/* Insertion into the sorted prefix; max is small (top 10). */
		size_t at = n;
		while (at > 0 && out[at - 1].queries < queries)
			at--;
		if (at >= max)
			continue;
		size_t end = n < max ? n : max - 1;
		memmove(&out[at + 1], &out[at], (end - at) * sizeof(*out));
		if (n < max)
			n++;
		auth_stats_resolver_t *r = &out[at];
		memset(&r->addr, 0, sizeof(r->addr));
		uint8_t a[16];
		memcpy(a, key, 16);
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (memcmp(a, mapped, 12) == 0) {
			r->addr.sin.sin_family = AF_INET;
			memcpy(&r->addr.sin.sin_addr, a + 12, 4);
		} else {
			r->addr.sin6.sin6_family = AF_INET6;
			memcpy(r->addr.sin6.sin6_addr.s6_addr, a, 16);
		}
		r->queries = queries;
	}
	return n;
}

void auth_stats_sum(auth_stats_t *dst, const auth_stats_t *src)
{
	/* The counters, up to the resolver table, can be walked as one array. */
	static_assert(offsetof(auth_stats_t, ecs_top) % sizeof(uint64_t) == 0,
	              "stats hold only counters before the resolver table");
	steer_counters_add((steer_counter_t *)dst, (const steer_counter_t *)src,
	                   offsetof(auth_stats_t, ecs_top) / sizeof(steer_counter_t));
	resolvers_merge(&dst->ecs_top, &src->ecs_top);
}
