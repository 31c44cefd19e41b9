/*
 * Corpus replay: runs a fuzz target over every file given, or every file in the directories
 * given, without libFuzzer. Built for each target and registered as a test, so the corpus is
 * replayed in every normal (and sanitizer) test run. A crash or a failed check aborts.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Runs one file through the target. Returns 0, or -1 when it cannot be read. */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		perror(path);
		return -1;
	}
	uint8_t *data = NULL;
	size_t len = 0, cap = 0, n;
	do {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			uint8_t *grown = realloc(data, cap);
			if (grown == NULL) {
				perror("realloc");
				exit(2);
			}
			data = grown;
		}
		n = fread(data + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	int ret = ferror(f) ? -1 : 0;
	fclose(f);
	if (ret == 0) {
		/* An exact-size copy, so a read past the input is caught by ASan. */
		uint8_t *exact = malloc(len ? len : 1);
		if (exact == NULL) {
			perror("malloc");
			exit(2);
		}
		memcpy(exact, data, len);
		/* Named before it runs: a crash report (abort, sanitizer exit) then says which. */
		fprintf(stderr, "%s\n", path);
		LLVMFuzzerTestOneInput(exact, len);
		free(exact);
	} else {
		perror(path);
	}
	free(data);
	return ret;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file of @p dir in name order; returns the number of files or -1. */
static long replay_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL) {
		perror(dir);
		return -1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **grown = realloc(names, cap * sizeof(*names));
			if (grown == NULL) {
				perror("realloc");
				exit(2);
			}
			names = grown;
		}
		size_t size = strlen(dir) + strlen(e->d_name) + 2;
		names[n] = malloc(size);
		if (names[n] == NULL) {
			perror("malloc");
			exit(2);
		}
		snprintf(names[n++], size, "%s/%s", dir, e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_names);
	long done = 0;
	for (size_t i = 0; i < n; i++) {
		if (done >= 0 && replay_file(names[i]) < 0)
			done = -1;
		else if (done >= 0)
			done++;
		free(names[i]);
	}
	free(names);
	return done;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
		return 2;
	}
	long total = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		long n;
		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		n = S_ISDIR(st.st_mode) ? replay_dir(argv[i])
		                        : (replay_file(argv[i]) == 0 ? 1 : -1);
		if (n < 0)
			return 1;
		total += n;
	}
	if (total == 0) {
		fprintf(stderr, "%s: no input files: an empty corpus tests nothing\n", argv[0]);
		return 1;
	}
	printf("%ld inputs replayed\n", total);
	return 0;
}
