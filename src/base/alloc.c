#include "base/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t size)
{
	fprintf(stderr, "steer: out of memory allocating %zu bytes\n", size);
	abort();
}

void steer_assert_fail(const char *cond, const char *file, int line)
{
	fprintf(stderr, "steer: assertion '%s' failed at %s:%d\n", cond, file, line);
	abort();
}

void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);
	if (!p)
		oom(size);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		oom(n * size);
	return p;
}

void *xrealloc(void *ptr, size_t size)
{
	void *p = realloc(ptr, size ? size : 1);
	if (!p)
		oom(size);
	return p;
}

char *xstrdup(const char *s)
{
	return s ? xmemdup(s, strlen(s) + 1) : NULL;
}

void *xmemdup(const void *src, size_t size)
{
	void *p = xmalloc(size);
	memcpy(p, src, size);
	return p;
}

char *xstrcat3(const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
	char *s = xmalloc(la + lb + lc + 1);
	memcpy(s, a, la);
	memcpy(s + la, b, lb);
	memcpy(s + la + lb, c, lc + 1);
	return s;
}
