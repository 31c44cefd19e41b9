/*
 * Haversine distance and proximity ordering. No state; any thread.
 */
#include "gslb/geo_distance.h"

#include <math.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/err.h"

#define DEG_TO_RAD (M_PI / 180.0)

bool gslb_geo_coords_ok(double lat, double lon)
{
	return isfinite(lat) && isfinite(lon) && lat >= -90.0 && lat <= 90.0 && lon >= -180.0 &&
	       lon <= 180.0;
}

double gslb_geo_distance_km(double lat1, double lon1, double lat2, double lon2)
{
	if (!gslb_geo_coords_ok(lat1, lon1) || !gslb_geo_coords_ok(lat2, lon2))
		return NAN;
	double dlat = (lat2 - lat1) * DEG_TO_RAD;
	double dlon = (lon2 - lon1) * DEG_TO_RAD;
	double s_lat = sin(dlat / 2.0);
	double s_lon = sin(dlon / 2.0);
	double a = s_lat * s_lat + cos(lat1 * DEG_TO_RAD) * cos(lat2 * DEG_TO_RAD) * s_lon * s_lon;
	/* Rounding can push a a hair outside [0, 1] near antipodes; atan2 stays accurate there
	 * where asin(sqrt(a)) loses precision. */
	if (a > 1.0)
		a = 1.0;
	if (a < 0.0)
		a = 0.0;
	return 2.0 * GSLB_GEO_EARTH_RADIUS_KM * atan2(sqrt(a), sqrt(1.0 - a));
}

typedef struct {
	double km;
	uint16_t dc;
} dc_dist_t;

/* Total order: distance, then configuration order, so the result is deterministic (every
 * cluster node computes the same list) and qsort's instability does not matter. */
static int dc_dist_cmp(const void *a, const void *b)
{
	const dc_dist_t *x = a, *y = b;
	if (x->km != y->km)
		return x->km < y->km ? -1 : 1;
	return (x->dc > y->dc) - (x->dc < y->dc);
}

int gslb_geo_order_by_distance(double lat, double lon, const gslb_geo_coords_t *dcs, size_t n_dc,
                               size_t limit, uint16_t *out, size_t cap)
{
	if (n_dc > (size_t)UINT16_MAX + 1)
		return STEER_EINVAL;
	if (!gslb_geo_coords_ok(lat, lon))
		return 0;
	dc_dist_t stack[GSLB_GEO_STACK_DCS];
	dc_dist_t *d = n_dc <= GSLB_GEO_STACK_DCS ? stack : xmalloc(n_dc * sizeof(*d));
	size_t n = 0;
	for (size_t i = 0; i < n_dc; i++) {
		if (!dcs[i].valid || !gslb_geo_coords_ok(dcs[i].lat, dcs[i].lon))
			continue;
		d[n].km = gslb_geo_distance_km(lat, lon, dcs[i].lat, dcs[i].lon);
		d[n].dc = (uint16_t)i;
		n++;
	}
	/* A full sort even with a limit: n_dc is small and this runs at build time. */
	qsort(d, n, sizeof(*d), dc_dist_cmp);
	size_t want = limit != 0 && n > limit ? limit : n;
	int ret = (int)want;
	if (want > cap) {
		ret = STEER_ESPACE;
		goto out;
	}
	for (size_t i = 0; i < want; i++)
		out[i] = d[i].dc;
out:
	if (d != stack)
		free(d);
	return ret;
}
