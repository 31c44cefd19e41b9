/*
 * Project-wide error codes: 0 is success, negative values are errors. Codes that have an errno
 * equivalent are -errno, the rest live below STEER_ERR_BASE so they never collide.
 */
#pragma once

#include <errno.h>

enum steer_err {
	STEER_EOK = 0,
	STEER_ENOMEM = -ENOMEM,
	STEER_EINVAL = -EINVAL,
	STEER_ENOENT = -ENOENT,
	STEER_EEXIST = -EEXIST,
	STEER_ERANGE = -ERANGE,
	STEER_EAGAIN = -EAGAIN,
	STEER_EACCES = -EACCES,

	STEER_ERR_BASE = -1000,
	STEER_EMALF = STEER_ERR_BASE, /* malformed wire data */
	STEER_ESPACE,                 /* output buffer too small */
	STEER_ETRUNC,                 /* input ended early */
	STEER_ELOOP,                  /* compression or CNAME loop */
	STEER_EZONE,                  /* zone file or zone semantics error */
	STEER_ECONF,                  /* configuration error */
	STEER_ESYNTAX,                /* text syntax error */
};

/** Human-readable text for a steer_err or a negative errno. Static storage, thread-safe. */
const char *steer_strerror(int err);
