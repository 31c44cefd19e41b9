/* Warnings list (see warnings.h). */
#include "base/warnings.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

void steer_warnings_init(steer_warnings_t *w)
{
	memset(w, 0, sizeof(*w));
}

void steer_warnings_add(steer_warnings_t *w, const char *fmt, ...)
{
	if (w == NULL)
		return;
	char small[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		small[0] = '\0';
	size_t len = n > 0 ? (size_t)n : 0;
	char *text = xmalloc(len + 1);
	if (len < sizeof(small)) {
		memcpy(text, small, len + 1);
	} else {
		va_start(ap, fmt);
		vsnprintf(text, len + 1, fmt, ap);
		va_end(ap);
	}
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 8;
		w->msg = xrealloc(w->msg, w->cap * sizeof(*w->msg));
	}
	w->msg[w->n++] = text;
}

void steer_warnings_clear(steer_warnings_t *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->msg[i]);
	free(w->msg);
	memset(w, 0, sizeof(*w));
}
