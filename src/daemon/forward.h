/*
 * Wiring of the caching forwarder: the `forward:` configuration turned into the engine's
 * definitions, and the forwarding part of each serving view. Control thread only.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "conf/conf.h"
#include "fwd/engine.h"
#include "fwd/serve.h"

/**
 * Create (not start) the engine for @p conf's forward groups into @p *out; NULL when there
 * are none. @p ports are the listen ports, never used as upstream source ports. Returns 0 or
 * a negative steer_err with the reason in @p err.
 */
int forward_engine_new(const conf_t *conf, const uint16_t *ports, size_t n_ports,
                       fwd_engine_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 4, 5) STEER_WUR;

/**
 * Fill the forwarding part of a serving view from @p conf (allow-recursion, copied: release
 * with forward_view_clear()) and the running @p engine (NULL: forwarding off).
 */
void forward_view_fill(fwd_view_t *v, const conf_t *conf, fwd_engine_t *engine) STEER_NONNULL(1, 2);

/** Free what forward_view_fill() copied. */
void forward_view_clear(fwd_view_t *v) STEER_NONNULL(1);
