#include "auth/qctx.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"

void auth_qctx_init(auth_qctx_t *ctx, uint64_t seed)
{
	memset(ctx, 0, sizeof(*ctx));
	gslb_policy_rng_init(&ctx->gslb.rng, seed);
}

auth_qctx_t *auth_qctx_new(uint64_t thread)
{
	uint64_t seed = 0;
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 32 ^ (uint64_t)getpid() << 16;
	}
	auth_qctx_t *ctx = xmalloc(sizeof(*ctx));
	/* Golden-ratio multiple of the thread index: distinct seeds per thread, always. */
	auth_qctx_init(ctx, seed ^ (thread + 1) * UINT64_C(0x9E3779B97F4A7C15));
	return ctx;
}

void auth_qctx_free(auth_qctx_t *ctx)
{
	free(ctx);
}

void auth_qctx_sum(const auth_qctx_t *ctx, auth_stats_t *auth, gslb_stats_t *gslb)
{
	auth_stats_sum(auth, &ctx->stats);
	gslb_stats_sum(gslb, &ctx->gslb.stats);
}
