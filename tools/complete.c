/*
 * Completion candidates from the command table; see complete.h.
 */
#include "complete.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ctl/commands.h"

/* steerctl's own options (parse_options() in steerctl.c), and those that take a value, which
 * is not the command. */
static const char *const options[] = {"-s",        "--socket", "-j",     "--json", "-t",
                                      "--timeout", "-h",       "--help", "-V",     "--version"};
static const char *const value_options[] = {"-s", "--socket", "-t", "--timeout"};

static bool takes_value(const char *word)
{
	for (size_t i = 0; i < sizeof(value_options) / sizeof(value_options[0]); i++) {
		if (strcmp(word, value_options[i]) == 0)
			return true;
	}
	return false;
}

static void print_commands(void)
{
	size_t n;
	const ctl_command_t *t = ctl_command_table(&n);
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++)
		puts(options[i]);
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || strcmp(t[i].name, t[i - 1].name) != 0)
			puts(t[i].name);
	}
}

/* A literal of a usage token: lower-case words, options and "key=" prefixes, not the
 * upper-case placeholders. */
static void print_literal(const char *s, size_t len)
{
	if (len == 0 || isupper((unsigned char)s[0]) || strncmp(s, "...", 3) == 0)
		return;
	const char *eq = memchr(s, '=', len);
	if (eq != NULL)
		len = (size_t)(eq - s) + 1;
	printf("%.*s\n", (int)len, s);
}

/* The alternatives of token @p pos of @p usage ("[bgp|ospf]", "up|down"). With a trailing
 * "..." the key=VALUE options may come in any order: `cluster bird-config peer=X ...`. */
static void print_usage_choices(const char *usage, size_t pos)
{
	size_t idx = 0;
	const char *tok = usage;
	bool repeats = strstr(usage, "...") != NULL;
	while (*tok != '\0') {
		size_t len = strcspn(tok, " ");
		bool key_option = memchr(tok, '=', len) != NULL;
		if (idx == pos || (repeats && key_option)) {
			const char *p = tok, *end = tok + len;
			while (p < end) {
				while (p < end && (*p == '[' || *p == ']' || *p == '|'))
					p++;
				size_t alt = strcspn(p, "|] ");
				print_literal(p, alt < (size_t)(end - p) ? alt : (size_t)(end - p));
				p += alt;
			}
		}
		tok += len;
		tok += *tok == ' ';
		idx++;
	}
}

/* Candidates after @p cmd with @p args (n of them) typed. */
static void print_arguments(const char *cmd, const char *const *args, size_t n)
{
	size_t rows;
	const ctl_command_t *t = ctl_command_table(&rows);
	for (size_t i = 0; i < rows; i++) {
		if (strcmp(t[i].name, cmd) != 0)
			continue;
		if (t[i].sub != NULL && n == 0) {
			puts(t[i].sub);
		} else if (t[i].sub != NULL && strcmp(t[i].sub, args[0]) == 0) {
			print_usage_choices(t[i].args, n - 1);
			return;
		}
	}
	/* The row without a sub-command ("cache [NAME]"), unless a sub-command was typed. */
	for (size_t i = 0; i < rows; i++) {
		if (strcmp(t[i].name, cmd) == 0 && t[i].sub == NULL)
			print_usage_choices(t[i].args, n);
	}
	/* steerctl's own arguments, handled before the daemon sees the command. */
	if (n == 0 && strcmp(cmd, "explain") == 0)
		puts("--config");
	if (strcmp(cmd, "drain") == 0)
		puts("--no-wait");
}

int steerctl_complete(const char *const *words, int n)
{
	int i = 0;
	while (i < n && words[i][0] == '-')
		i += takes_value(words[i]) ? 2 : 1;
	if (i >= n)
		print_commands();
	else
		print_arguments(words[i], words + i + 1, (size_t)(n - i - 1));
	return 0;
}
