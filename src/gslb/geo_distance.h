/*
 * Great-circle distances and distance ordering of datacenters, for GeoIP maps that order
 * datacenters by proximity to the client (gdnsd auto_dc_coords, F5/Route 53 geoproximity).
 * Pure functions, thread-safe; used when maps are built, not on the query path.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"

/* Mean Earth radius (IUGG R1), the usual choice for the spherical haversine model: its error
 * against the WGS84 ellipsoid stays under 0.5%, far below GeoIP location accuracy. */
#define GSLB_GEO_EARTH_RADIUS_KM 6371.0088

/* Datacenters up to this many are ordered without allocating. */
#define GSLB_GEO_STACK_DCS 256

/** Coordinates of one datacenter, in degrees; @c valid is false for a datacenter without them. */
typedef struct {
	double lat; /* -90 .. 90, north positive */
	double lon; /* -180 .. 180, east positive */
	bool valid;
} gslb_geo_coords_t;

/** True when @p lat and @p lon are finite and within [-90, 90] and [-180, 180]. */
bool gslb_geo_coords_ok(double lat, double lon);

/**
 * Great-circle distance in km between two points given in degrees (haversine formula on a
 * sphere of GSLB_GEO_EARTH_RADIUS_KM). Symmetric, 0 for equal points, at most pi * R for
 * antipodes. Inputs must satisfy gslb_geo_coords_ok(); the result is NaN otherwise.
 */
double gslb_geo_distance_km(double lat1, double lon1, double lat2, double lon2);

/**
 * Write to @p out the indices of the datacenters in @p dcs (@p n_dc of them) that have valid
 * coordinates, nearest to (@p lat, @p lon) first; equal distances keep index (configuration)
 * order. At most @p limit indices are written (0: no limit). @p cap is the room in @p out.
 * Returns how many indices were written (0 when no datacenter has coordinates or the client's
 * are invalid), STEER_ESPACE when @p cap is too small, STEER_EINVAL when @p n_dc exceeds
 * UINT16_MAX + 1. Allocates a scratch array only when @p n_dc > GSLB_GEO_STACK_DCS.
 */
int gslb_geo_order_by_distance(double lat, double lon, const gslb_geo_coords_t *dcs, size_t n_dc,
                               size_t limit, uint16_t *out, size_t cap) STEER_WUR;
