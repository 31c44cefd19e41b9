/*
 * Parser of an operator's nets list: one CIDR per line, IPv4 or IPv6 ("192.0.2.0/24",
 * "2001:db8::/32"; a bare address is a host prefix), '#' starts a comment (whole line or after
 * the prefix), blank lines and surrounding whitespace (spaces, tabs, CR of CRLF files) are
 * ignored. Anything else on a line is an error naming file:line and the bad text.
 *
 * Host bits: a line such as "221.193.0.0/1" or "1.2.3.4/24" is an error naming the network the
 * length really covers ("host bits set: ... is 0.0.0.0/1"): clearing them silently would turn a
 * typo in the length into a map of half the address space (as xfr-allow and inline `cidr`
 * already refuse such prefixes).
 *
 * Pure functions (no logging, no global state), used on the config/reload thread; the whole
 * file is read into one buffer and parsed in place, with no allocation per line.
 */
#pragma once

#include <stddef.h>

#include "base/compiler.h"
#include "base/sockaddr.h"

/* Lines longer than this (after stripping comments and whitespace) cannot be a prefix. */
#define GSLB_NETS_TOKEN_MAX 63
/* A callback's "I reported it myself" code (see gslb_nets_file_cb). */
#define GSLB_NETS_CB_FAIL 1
/* Files above this size are refused rather than read into memory (about 50 M lines). */
#define GSLB_NETS_FILE_MAX ((size_t)1 << 30)

/**
 * Called once per prefix, in file order, with the 1-based line number. @p prefix is valid only
 * during the call. Return 0 to continue, or a negative steer_err to stop: parsing then fails
 * with that code and the message "NAME:LINE: <steer_strerror(code)>", unless the callback
 * returns GSLB_NETS_CB_FAIL: then it wrote its own message and the parser leaves @p err alone
 * and returns STEER_ECONF.
 */
typedef int (*gslb_nets_file_cb)(void *ctx, const steer_prefix_t *prefix, unsigned line);

/** Counters of one parse. */
typedef struct {
	unsigned lines;    /* lines read (the last line counts without a newline) */
	unsigned prefixes; /* prefixes passed to the callback */
} gslb_nets_stats_t;

/**
 * Parse @p len bytes of nets-list @p text (need not be NUL-terminated; a NUL byte outside a comment
 * is an error), calling @p cb per prefix. @p name is used in messages (a file name, "inline", ...).
 * On error writes "NAME:LINE: reason 'text'" to @p err (if @p errlen > 0; truncated as needed,
 * always NUL-terminated) and stops at the first bad line. @p stats (optional) is filled in either
 * way. Returns 0, STEER_ESYNTAX for a bad line, or the callback's error (STEER_ECONF for
 * GSLB_NETS_CB_FAIL).
 */
int gslb_nets_parse(const char *name, const char *text, size_t len, gslb_nets_file_cb cb, void *ctx,
                    gslb_nets_stats_t *stats, char *err, size_t errlen)
    STEER_NONNULL(1, 4) STEER_WUR;

/**
 * Read the nets file @p path and parse it like gslb_nets_parse() (messages name @p path).
 * Returns 0, STEER_ENOENT/STEER_EACCES/another -errno when the file cannot be read,
 * STEER_EINVAL when it is not a regular file, STEER_ERANGE when it exceeds GSLB_NETS_FILE_MAX,
 * or a parse error. Allocates one buffer of the file's size for the duration of the call.
 */
int gslb_nets_file_read(const char *path, gslb_nets_file_cb cb, void *ctx, gslb_nets_stats_t *stats,
                        char *err, size_t errlen) STEER_NONNULL(1, 2) STEER_WUR;
