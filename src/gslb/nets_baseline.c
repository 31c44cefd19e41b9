/*
 * The nets baseline file (see nets_baseline.h): read whole at start-up, written after every
 * accepted load. Small (one line per nets file), so a flat array searched linearly is enough.
 */
#include "gslb/nets_baseline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/file.h"
#include "gslb/nets_set.h"
#include "gslb/view.h"

/* A line longer than this is damaged: paths are at most PATH_MAX, map names 63 bytes. */
#define LINE_MAX_LEN 8192

typedef struct {
	char *map;  /* owned */
	char *file; /* owned */
	size_t count;
} baseline_entry_t;

struct gslb_nets_baseline {
	baseline_entry_t *v;
	size_t n, cap;
};

static void entry_add(gslb_nets_baseline_t *b, const char *map, const char *file, size_t count)
{
	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 16;
		b->v = xrealloc(b->v, b->cap * sizeof(*b->v));
	}
	b->v[b->n].map = xstrdup(map);
	b->v[b->n].file = xstrdup(file);
	b->v[b->n].count = count;
	b->n++;
}

/* "COUNT MAP PATH" without its newline; 0 or STEER_ESYNTAX with the reason in @p why. */
static int parse_line(gslb_nets_baseline_t *b, char *line, const char **why)
{
	char *p = line;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\0' || *p == '#')
		return 0;
	char *end = NULL;
	errno = 0;
	unsigned long long count = strtoull(p, &end, 10);
	if (end == p || errno != 0 || *p == '-' || (*end != ' ' && *end != '\t')) {
		*why = "want 'COUNT MAP PATH'";
		return STEER_ESYNTAX;
	}
	p = end;
	while (*p == ' ' || *p == '\t')
		p++;
	char *map = p;
	size_t map_len = strcspn(p, " \t");
	p += map_len;
	while (*p == ' ' || *p == '\t')
		p++;
	if (map_len == 0 || *p == '\0') {
		*why = "want 'COUNT MAP PATH'";
		return STEER_ESYNTAX;
	}
	map[map_len] = '\0';
	entry_add(b, map, p, (size_t)count);
	return 0;
}

int gslb_nets_baseline_load(const char *path, gslb_nets_baseline_t **out, char *err, size_t errlen)
{
	gslb_nets_baseline_t *b = xcalloc(1, sizeof(*b));
	int ret = 0;
	char *line = NULL;
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		if (errno == ENOENT)
			goto out;
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, steer_strerror(ret));
		goto out;
	}
	line = xmalloc(LINE_MAX_LEN + 2);
	unsigned lineno = 0;
	while (fgets(line, LINE_MAX_LEN + 2, f) != NULL) {
		lineno++;
		size_t len = strlen(line);
		const char *why = NULL;
		if (len > LINE_MAX_LEN || (len > 0 && line[len - 1] != '\n' && !feof(f)))
			why = "line too long";
		if (why == NULL) {
			if (len > 0 && line[len - 1] == '\n')
				line[--len] = '\0';
			ret = parse_line(b, line, &why);
		} else {
			ret = STEER_ESYNTAX;
		}
		if (ret != 0) {
			snprintf(err, errlen,
			         "%s:%u: %s (a damaged nets state file; fix or remove it)", path,
			         lineno, why);
			goto out;
		}
	}
	if (ferror(f)) {
		ret = -EIO;
		snprintf(err, errlen, "%s: read error", path);
	}
out:
	free(line);
	if (f != NULL)
		fclose(f);
	if (ret != 0) {
		gslb_nets_baseline_free(b);
		b = NULL;
	}
	*out = b;
	return ret;
}

void gslb_nets_baseline_free(gslb_nets_baseline_t *b)
{
	if (b == NULL)
		return;
	for (size_t i = 0; i < b->n; i++) {
		free(b->v[i].map);
		free(b->v[i].file);
	}
	free(b->v);
	free(b);
}

bool gslb_nets_baseline_find(const gslb_nets_baseline_t *b, const char *map, const char *file,
                             size_t *count)
{
	if (b == NULL)
		return false;
	/* The last line wins, like a later rule: the file is rewritten whole, so there is one. */
	for (size_t i = b->n; i-- > 0;) {
		if (strcmp(b->v[i].map, map) == 0 && strcmp(b->v[i].file, file) == 0) {
			*count = b->v[i].count;
			return true;
		}
	}
	return false;
}

static int write_lines(FILE *f, void *ctx)
{
	const gslb_view_t *view = ctx;
	fputs("# steerd: prefixes per nets file as last accepted (COUNT MAP PATH); the nets\n"
	      "# shrink guard compares with these at start-up. Rewritten on every load.\n",
	      f);
	gslb_view_map_info_t info;
	for (size_t i = 0; gslb_view_map_info(view, i, &info) == 0; i++) {
		const gslb_nets_source_t *src;
		size_t n = gslb_nets_set_sources(info.nets, &src);
		for (size_t j = 0; j < n; j++) {
			/* a path with a newline cannot be one line: that file goes unguarded */
			if (src[j].path == NULL || strchr(src[j].path, '\n') != NULL)
				continue;
			fprintf(f, "%zu %s %s\n", src[j].n4 + src[j].n6, info.name, src[j].path);
		}
	}
	return ferror(f) ? -EIO : 0;
}

int gslb_nets_baseline_save(const gslb_view_t *view, const char *path, char *err, size_t errlen)
{
	int ret = steer_file_replace(path, 0644, write_lines, (void *)view);
	if (ret != 0)
		snprintf(err, errlen, "%s: %s", path, steer_strerror(ret));
	return ret;
}
