/*
 * A minimal table-driven test harness: CHECK prints one line per failed row and counts it;
 * main() returns unit_failures() so meson sees the result.
 */
#pragma once

#include <stdio.h>

static int unit_failed;
static int unit_checked;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		unit_checked++;                                                                    \
		if (!(cond)) {                                                                     \
			unit_failed++;                                                             \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
		}                                                                                  \
	} while (0)

static inline int unit_finish(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, unit_checked, unit_failed);
	return unit_failed ? 1 : 0;
}
