/*
 * The daemon's side of secondary zones and NOTIFY (xfr/): the secondary zones of the zone
 * set come from the transfer module instead of their files, a new version becomes a new
 * zone set published like a reload's, a NOTIFY accepted by a query thread wakes the transfer
 * thread, and primary zones with `notify:` targets are announced at start and on reload.
 * Control thread, except daemon_xfr_on_notify().
 */
#pragma once

#include <stdbool.h>

#include "conf/conf.h"
#include "xfr/xfr.h"
#include "zone/zone_set.h"

struct server;

/** Create the transfer module (not yet its thread); before the first zone build. */
void daemon_xfr_init(void);

/**
 * For server_zones_build(): the version of the secondary zone @p cz of @p conf to serve (a new
 * reference, NULL when none is held yet: the caller adds the zone as pending, answered
 * SERVFAIL until its first transfer) and its serving data in @p tmpl (secondary, expiry cell,
 * notify-allow list with the primaries, owned by the caller: free tmpl->notify_allow). Without
 * daemon_xfr_init() (--check-config) the file is read when it exists.
 */
zone_t *daemon_xfr_zone(const conf_t *conf, const conf_zone_t *cz, zone_set_entry_t *tmpl)
    STEER_NONNULL(1, 2, 3);

/** After a configuration is applied: zones no longer configured stop being refreshed. */
void daemon_xfr_applied(void);

/** Start the transfer thread; its new versions are published on @p server's loop. */
int daemon_xfr_start(struct server *server) STEER_NONNULL(1);

/** NOTIFY the targets of every primary zone of @p conf (at start), or of the zones named in
 *  @p names (@p n of them, after a reload loaded them). */
void daemon_xfr_announce(const conf_t *conf, const zone_set_t *set, char *const *names, size_t n,
                         bool all) STEER_NONNULL(1, 2);

/** The view's NOTIFY callback (auth_view_t.on_notify); query threads. */
void daemon_xfr_on_notify(void *arg, const uint8_t *apex, uint32_t serial, bool has_serial);

/** The module, for the view's notify_arg, steerctl and metrics; NULL before init. */
xfr_t *daemon_xfr_get(void);

/** Stop the thread and free the module. */
void daemon_xfr_stop(void);
