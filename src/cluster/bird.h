/*
 * A client of BIRD's control socket (what birdc speaks), without birdc or a shell: a UNIX
 * stream socket; BIRD greets with "0001 BIRD x.y ready."; each command is one line; each
 * reply line starts with a 4-digit code followed by '-' (more lines follow) or ' ' (the last
 * line), and lines starting with a space continue the previous one. Codes 0xxx-2xxx are
 * success (0000 OK, 0008/0010 "already disabled/enabled", 0009/0011 done, 1xxx/2xxx tables),
 * 8xxx runtime errors (8003 "No protocols match"), 9xxx parse errors ("syntax error").
 *
 * Every call opens its own connection and is bounded by @p timeout_ms as a whole (connect,
 * greeting, command, reply), so a hung BIRD costs the caller that much and no more. No state
 * is kept: any thread or process may call these.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/compiler.h"

/* What one BIRD command may take; BIRD answers enable/disable in well under a millisecond. */
#define BIRD_TIMEOUT_MS 1000

/**
 * Send @p command (one line, no newline) to the BIRD listening on @p socket_path and read its
 * whole reply. The reply's text lines, without their codes, are joined with '\n' into
 * @p reply (truncated to @p replylen; may be NULL). Returns 0 when BIRD answered with a
 * success code; STEER_ENOENT for 8003 (no protocol matches), -EIO for another 8xxx and
 * STEER_EINVAL for 9xxx, with BIRD's own text in @p err; -ECONNREFUSED, -ENOENT (no socket:
 * BIRD not running) or -ETIMEDOUT (no complete answer in time) with the reason in @p err.
 */
int bird_command(const char *socket_path, const char *command, unsigned timeout_ms, char *reply,
                 size_t replylen, char *err, size_t errlen) STEER_NONNULL(1, 2, 6) STEER_WUR;

/**
 * `enable` or `disable` the protocol named @p protocol. Doing it again is not an error
 * ("already enabled"); @p changed (may be NULL) tells whether BIRD changed anything. The name
 * must be a plain BIRD name (letters, digits, '_', '-', '.'): it is sent quoted, so an
 * unknown one is BIRD's "No protocols match" (STEER_ENOENT) rather than a syntax error.
 * Returns as bird_command(), STEER_EINVAL for a bad name.
 */
int bird_protocol_set(const char *socket_path, const char *protocol, bool enable,
                      unsigned timeout_ms, bool *changed, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 6) STEER_WUR;

/**
 * The state column of `show protocols "@p protocol"` ("up", "down", "start", ...) into
 * @p state. Returns 0, or as bird_command() (STEER_EMALF when the reply has no such row).
 */
int bird_protocol_state(const char *socket_path, const char *protocol, unsigned timeout_ms,
                        char *state, size_t statelen, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 4, 6) STEER_WUR;
