/*
 * Configuration checks that need both halves of a serving view: the zones and the GSLB names
 * answered inside them. Control thread, when the daemon builds a view (start-up, reload,
 * --check-config).
 */
#pragma once

#include <stddef.h>

#include "base/compiler.h"
#include "gslb/view.h"
#include "zone/zone_set.h"

/**
 * Check that every GSLB name in @p gslb can be served beside the zone data of @p zones: at a
 * service name the service answers A, AAAA and ANY and the zone every other type (a whoami
 * name also answers TXT), so a zone record is an error when it would never be answered or
 * would take the name away from the service: a CNAME at the name, a DNAME above it, a
 * delegation at or above it, or a record of a type the GSLB name answers itself. Each problem
 * is one line "zonefile:line: ... (service at conffile:line)" in @p err. GSLB names outside
 * every zone are not checked here. Reads the zone files again only to name lines. Returns 0
 * or STEER_ECONF.
 */
int auth_check_gslb_names(const zone_set_t *zones, const gslb_view_t *gslb, char *err,
                          size_t errlen) STEER_NONNULL(1, 2, 3) STEER_WUR;
