/*
 * steerctl's shell completion: `steerctl --complete WORD...` prints the words that may follow
 * WORD... (the command line after "steerctl", without the word being completed), one per
 * line, taken from the command table so the bash completion never drifts from the commands.
 * dist/steerctl.bash calls it. No daemon involved.
 */
#pragma once

#include "base/compiler.h"

/**
 * Print to stdout the candidates for the word after @p words (@p n of them, borrowed): the
 * global options and command names first, then a command's sub-commands, then the literal
 * choices of its usage at that position ("up", "down", "--force", "peer="). Placeholders
 * (PATTERN, NAME) have none. Returns the exit status, 0.
 */
int steerctl_complete(const char *const *words, int n) STEER_NONNULL(1);
