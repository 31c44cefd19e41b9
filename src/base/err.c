#include "base/err.h"

#include <string.h>

const char *steer_strerror(int err)
{
	switch (err) {
	case STEER_EOK:
		return "success";
	case STEER_EMALF:
		return "malformed data";
	case STEER_ESPACE:
		return "not enough space";
	case STEER_ETRUNC:
		return "truncated input";
	case STEER_ELOOP:
		return "loop detected";
	case STEER_EZONE:
		return "zone error";
	case STEER_ECONF:
		return "configuration error";
	case STEER_ESYNTAX:
		return "syntax error";
	default:
		if (err < 0 && err > STEER_ERR_BASE)
			return strerror(-err);
		return "unknown error";
	}
}
