/*
 * Internal to src/tap: the UNIX socket transport of the Frame Streams writer. fstrm's own UNIX
 * writer blocks its I/O thread for as long as a reader that stopped reading wants, which would
 * also keep steerd from stopping; this one gives up on a read or write after
 * TAP_SOCKET_TIMEOUT_MS, and fstrm then closes the stream and reconnects.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include <fstrm.h>

#include "base/compiler.h"

#define TAP_SOCKET_TIMEOUT_MS 1000

/**
 * A bidirectional (handshaked) writer for @p path with @p wopt (content types). @p connected
 * is kept up to date by the I/O thread: true while a stream is open. NULL on failure.
 */
struct fstrm_writer *tap_socket_writer_new(const char *path,
                                           const struct fstrm_writer_options *wopt,
                                           atomic_bool *connected) STEER_NONNULL(1, 2, 3);
