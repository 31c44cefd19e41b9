/*
 * Helpers shared by every fuzz target, linked into both the libFuzzer and the replay builds.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"

_Noreturn void fuzz_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
	abort();
}
