/*
 * The daemon's side of RRL and DNS Cookies: the state that outlives one configuration (the
 * random cookie secret made at start, the RRL bucket table) and filling each new view's
 * snapshot from the configuration. Control thread only.
 */
#pragma once

#include <stdint.h>

#include "auth/auth.h"
#include "base/compiler.h"
#include "conf/conf.h"

typedef struct {
	uint8_t random_secret[DNS_COOKIE_SECRET_LEN]; /* used while no secret is configured */
	auth_rrl_table_t *table;   /* the current RRL table; NULL while RRL is off */
	auth_rrl_table_t *retired; /* replaced, freed by hardening_retire() after the publish */
} hardening_t;

/** Make the random cookie secret. Before the first view. */
void hardening_init(hardening_t *h) STEER_NONNULL(1);

/**
 * Fill @p view's cookie and RRL fields from @p conf. The RRL table is kept when its size is
 * unchanged; otherwise a new one is made and the old one waits in @c retired until
 * hardening_retire(), which the caller runs once the previous view is unpublished.
 */
void hardening_view(hardening_t *h, const conf_t *conf, auth_view_t *view) STEER_NONNULL(1, 2, 3);

/** Free a replaced table: only after net_publish() returned (no query thread sees it). */
void hardening_retire(hardening_t *h) STEER_NONNULL(1);

/** Free everything, once no query thread runs. */
void hardening_deinit(hardening_t *h) STEER_NONNULL(1);
