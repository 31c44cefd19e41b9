/*
 * Unit tests for the steer.yaml(5) page that conf_write_reference_man() generates: it says
 * what the Markdown reference says (every section and key heading, every code block, the
 * inline spans translated), and it is well-formed roff (only the man macros we emit, no
 * Markdown left over, no stray escapes). tests/integration/test_install.py renders the
 * installed page with groff's warnings on.
 */
#include "conf/conf.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

/* File-scope, because the streams write the pointers at fclose() (a local would be a
 * dangling pointer to GCC once the helpers are inlined). */
static char *md_text, *man_text;
static size_t md_len, man_len;

static void produce(const char *version)
{
	FILE *mem = open_memstream(&md_text, &md_len);
	conf_write_reference(mem);
	fclose(mem);
	mem = open_memstream(&man_text, &man_len);
	int ret = conf_write_reference_man(mem, version);
	fclose(mem);
	CHECK(ret == 0, "conf_write_reference_man() returns 0, got %d", ret);
}

/* The roff form of a Markdown heading's code span: quotes around, hyphens escaped. */
static void heading_roff(const char *macro, const char *name, size_t n, char *out, size_t size)
{
	size_t o = (size_t)snprintf(out, size, "%s \"", macro);
	for (size_t i = 0; i < n && o + 4 < size; i++) {
		if (name[i] == '-')
			out[o++] = '\\';
		out[o++] = name[i];
	}
	snprintf(out + o, size - o, "\"\n");
}

static size_t count(const char *text, const char *needle)
{
	size_t n = 0;
	for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

/* Every "## `x`" and "### `x`" of the Markdown is a .SH or .SS of the page, in order. */
static void test_headings(const char *md, const char *man)
{
	size_t sections = 0, keys = 0;
	const char *cursor = man;
	bool in_order = true;
	for (const char *line = md; line != NULL && *line; line = strchr(line, '\n')) {
		line += *line == '\n';
		bool key = strncmp(line, "### `", 5) == 0, section = strncmp(line, "## `", 4) == 0;
		if (!key && !section)
			continue;
		const char *name = line + (key ? 5 : 4);
		const char *end = strchr(name, '`');
		char want[256];
		heading_roff(key ? ".SS" : ".SH", name, (size_t)(end - name), want, sizeof(want));
		const char *found = strstr(cursor, want);
		if (found == NULL) {
			in_order = false;
			CHECK(false, "the page has the heading %.*s", (int)(end - name), name);
			continue;
		}
		cursor = found + strlen(want);
		sections += section;
		keys += key;
	}
	CHECK(in_order, "every heading in the Markdown's order");
	CHECK(sections >= 10 && keys >= 100, "headings found: %zu sections, %zu keys", sections,
	      keys);
	CHECK(count(man, "\n.SS \"") == keys, "as many .SS as key headings (%zu)", keys);
	CHECK(strstr(man, "\n.SS \"server.tcp\\-idle\\-timeout\"\n") != NULL,
	      "key names keep their hyphens as \\-");
}

static void test_code_blocks(const char *md, const char *man)
{
	size_t fences = count(md, "\n```");
	CHECK(fences % 2 == 0 && fences >= 4, "the Markdown has code blocks (%zu fences)", fences);
	CHECK(count(man, "\n.EX\n") == fences / 2, "one .EX per code block");
	CHECK(count(man, "\n.EE\n") == fences / 2, "one .EE per code block");
	CHECK(strstr(man, ".EX\nserver:\n  listen: [127.0.0.1:5353, \"[::1]:5353\"]\n") != NULL,
	      "the intro's example is verbatim");
	CHECK(strstr(man, "\n  \\- domain: example.test\n") != NULL,
	      "a list dash in code is \\- (no hyphenation, copy-pasteable)");
}

static const char *const macros[] = {".TH ",  ".SH ", ".SS ", ".PP\n", ".IP ", ".EX\n",
                                     ".EE\n", ".B ",  ".BR ", ".TP\n", ".I ",  ".\\\" "};

static bool known_macro(const char *line)
{
	for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]); i++) {
		if (strncmp(line, macros[i], strlen(macros[i])) == 0)
			return true;
	}
	return false;
}

/* Escapes the writer produces: \e \- \fB \fI \fR \(bu \& and, in .TH/.BR, none else. */
static bool known_escape(const char *p)
{
	static const char *const escapes[] = {"\\e", "\\-", "\\fB", "\\fI", "\\fR", "\\(bu", "\\&"};
	for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		if (strncmp(p, escapes[i], strlen(escapes[i])) == 0)
			return true;
	}
	return false;
}

static void test_well_formed(const char *man)
{
	CHECK(strncmp(man, ".\\\" Generated from src/conf/conf_schema.c", 41) == 0,
	      "the page says where it comes from");
	CHECK(strstr(man, "\n.TH STEER.YAML 5 \"\" \"steer 9.8.7\" \"File Formats Manual\"\n"),
	      "the title line carries the version");
	CHECK(strstr(man, "\n.SH NAME\nsteer.yaml \\- ") != NULL, "a NAME section for whatis");
	CHECK(strstr(man, "\n.SH \"SEE ALSO\"\n.BR steerd (8),\n.BR steerctl (8)\n") != NULL,
	      "SEE ALSO names the other pages");
	size_t bad_macro = 0, backticks = 0, bad_escape = 0, md_heading = 0;
	bool in_code = false;
	size_t first_line = strcspn(man, "\n") + 1; /* after the comment line */
	for (size_t at = first_line; man[at] != '\0'; at += strcspn(man + at, "\n") + 1) {
		const char *line = man + at;
		if (strncmp(line, ".EX\n", 4) == 0)
			in_code = true;
		if (strncmp(line, ".EE\n", 4) == 0)
			in_code = false;
		if ((*line == '.' || *line == '\'') && !known_macro(line)) {
			bad_macro++;
			printf("  unknown request: %.*s\n", (int)strcspn(line, "\n"), line);
		}
		md_heading += !in_code && *line == '#';
		const char *end = strchr(line, '\n');
		for (const char *p = line; p < end; p++) {
			backticks += *p == '`';
			if (*p == '\\' && !known_escape(p) && strncmp(line, ".\\\"", 3) != 0) {
				bad_escape++;
				printf("  unknown escape: %.*s\n", (int)(end - line), line);
			}
			if (*p == '\\' && p[1] != '\0')
				p++;
		}
	}
	CHECK(!in_code, "the last code block is closed");
	CHECK(bad_macro == 0, "only the man macros we emit start a line (%zu others)", bad_macro);
	CHECK(backticks == 0, "no Markdown code span left (%zu backticks)", backticks);
	CHECK(bad_escape == 0, "only known escapes (%zu others)", bad_escape);
	CHECK(md_heading == 0, "no Markdown heading left outside code (%zu)", md_heading);
}

static void test_inline_spans(const char *man)
{
	/* From the intro: a code span, an italic span, and the bullets. */
	CHECK(
	    strstr(man, "Steer reads one YAML file: \\fBsteerd \\-c /etc/steer/steer.yaml\\fR.") !=
	        NULL,
	    "code spans are bold with \\- for hyphens");
	CHECK(strstr(man, "Settings applied \\fIon restart\\fR keep") != NULL, "*text* is italic");
	CHECK(strstr(man, "\n.IP \\(bu 2\nUnknown sections and keys are errors") != NULL,
	      "list items are bullets");
	CHECK(strstr(man, "\n.IP \\(bu 2\nType: ") != NULL, "a key's facts are bullets too");
}

int main(void)
{
	produce("9.8.7");
	CHECK(md_text && man_text, "both references produced");
	if (md_text && man_text) {
		test_headings(md_text, man_text);
		test_code_blocks(md_text, man_text);
		test_well_formed(man_text);
		test_inline_spans(man_text);
	}
	free(md_text);
	free(man_text);
	return unit_finish("test_conf_man");
}
