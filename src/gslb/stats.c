#include "gslb/stats.h"

void gslb_stats_sum(gslb_stats_t *dst, const gslb_stats_t *src)
{
	steer_counters_add((steer_counter_t *)dst, (const steer_counter_t *)src,
	                   STEER_COUNTERS_IN(gslb_stats_t));
}
