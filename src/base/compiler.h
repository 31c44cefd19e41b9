/*
 * Compiler attributes used on declarations across Steer. No DNS knowledge here.
 */
#pragma once

#define STEER_NONNULL(...)     __attribute__((nonnull(__VA_ARGS__)))
#define STEER_WUR              __attribute__((warn_unused_result))
#define STEER_PRINTF(fmt, arg) __attribute__((format(printf, fmt, arg)))
#define STEER_NORETURN         __attribute__((noreturn))
#define STEER_UNUSED           __attribute__((unused))
#define STEER_LIKELY(x)        __builtin_expect(!!(x), 1)
#define STEER_UNLIKELY(x)      __builtin_expect(!!(x), 0)
#define STEER_ARRAY_LEN(a)     (sizeof(a) / sizeof((a)[0]))

/* Invariant check that stays on in release builds: a violation would corrupt state. */
#define STEER_ASSERT(cond)                                                                         \
	do {                                                                                       \
		if (STEER_UNLIKELY(!(cond)))                                                       \
			steer_assert_fail(#cond, __FILE__, __LINE__);                              \
	} while (0)

/** Print the failed assertion and abort. Never returns. */
STEER_NORETURN void steer_assert_fail(const char *cond, const char *file, int line);
