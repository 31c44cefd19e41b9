/*
 * The libFuzzer entry point shared by the fuzz targets and the corpus replay (replay.c), so
 * each target builds both as a libFuzzer binary and as a plain test executable.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/** Run one input through the target; aborts (via assert or a sanitizer) on a bug. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Stops the fuzzer with a message when a target's own invariant check fails: assert() would
 * vanish under NDEBUG, and an abort is what libFuzzer and the replay test both report. */
#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fuzz_fail(__FILE__, __LINE__, #cond);                                      \
	} while (0)

/** Print the failed check and abort. */
_Noreturn void fuzz_fail(const char *file, int line, const char *what);
