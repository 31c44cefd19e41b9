/*
 * The availability table and the admin override list (see health.h). Everything here runs on
 * the control thread except the read-only accessors, which any thread may call on a frozen
 * table.
 */
#include "gslb/health.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/file.h"

/* Longest pattern we accept: target names are at most "service/" + a 253-octet name + a
 * datacenter name + an IPv6 address, so 1 KiB leaves room without letting a state file carry
 * megabyte lines. */
#define OVERRIDE_PATTERN_MAX 1024
/* A state-file line: the pattern, blanks and a state word. */
#define OVERRIDE_LINE_MAX (OVERRIDE_PATTERN_MAX + 64)

gslb_health_t *gslb_health_new(uint32_t count)
{
	gslb_health_t *h = xcalloc(1, sizeof(*h));
	h->count = count;
	/* calloc of 0 elements may return NULL; keep every array a valid pointer. */
	size_t n = count ? count : 1;
	h->eff = xcalloc(n, sizeof(*h->eff));
	h->monitor = xcalloc(n, sizeof(*h->monitor));
	h->rule = xmalloc(n * sizeof(*h->rule));
	h->wrule = xmalloc(n * sizeof(*h->wrule));
	h->wx = xcalloc(n, sizeof(*h->wx));
	h->names = xcalloc(n, sizeof(*h->names));
	for (uint32_t i = 0; i < count; i++)
		h->rule[i] = h->wrule[i] = -1;
	return h;
}

static void rules_copy(gslb_health_t *h, const gslb_override_t *rules, size_t n)
{
	h->rules = n ? xcalloc(n, sizeof(*h->rules)) : NULL;
	h->n_rules = n;
	for (size_t i = 0; i < n; i++) {
		h->rules[i] = rules[i];
		h->rules[i].pattern = xstrdup(rules[i].pattern);
	}
}

static void rules_free(gslb_health_t *h)
{
	for (size_t i = 0; i < h->n_rules; i++)
		free(h->rules[i].pattern);
	free(h->rules);
	h->rules = NULL;
	h->n_rules = 0;
}

gslb_health_t *gslb_health_dup(const gslb_health_t *h, uint32_t count)
{
	if (count < h->count)
		count = h->count;
	gslb_health_t *d = gslb_health_new(count);
	memcpy(d->eff, h->eff, h->count * sizeof(*h->eff));
	memcpy(d->monitor, h->monitor, h->count * sizeof(*h->monitor));
	memcpy(d->rule, h->rule, h->count * sizeof(*h->rule));
	memcpy(d->wrule, h->wrule, h->count * sizeof(*h->wrule));
	memcpy(d->wx, h->wx, h->count * sizeof(*h->wx));
	for (uint32_t i = 0; i < h->count; i++)
		d->names[i] = xstrdup(h->names[i]);
	if (h->load) {
		d->load = xcalloc(count, sizeof(*d->load));
		memcpy(d->load, h->load, h->count * sizeof(*h->load));
	}
	rules_copy(d, h->rules, h->n_rules);
	return d;
}

void gslb_health_free(gslb_health_t *h)
{
	if (!h)
		return;
	for (uint32_t i = 0; i < h->count; i++)
		free(h->names[i]);
	rules_free(h);
	free(h->names);
	free(h->rule);
	free(h->wrule);
	free(h->wx);
	free(h->monitor);
	free(h->eff);
	free(h->load);
	free(h);
}

/* Names and patterns go into a whitespace-separated state file, so neither may hold blanks. */
static bool token_is_clean(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= ' ' || c == 0x7f)
			return false;
	}
	return true;
}

int gslb_health_set_name(gslb_health_t *h, uint32_t id, const char *name)
{
	if (id >= h->count)
		return STEER_ERANGE;
	if (!token_is_clean(name) || strlen(name) > OVERRIDE_PATTERN_MAX)
		return STEER_EINVAL;
	free(h->names[id]);
	h->names[id] = xstrdup(name);
	return 0;
}

/* The effective word of target @p i from its monitor state and forcing rule. */
static void recompute(gslb_health_t *h, uint32_t i)
{
	gslb_sttl_t mon = h->monitor[i];
	if (h->rule[i] < 0) {
		h->eff[i] = mon;
		return;
	}
	bool down = h->rules[h->rule[i]].down;
	h->eff[i] = gslb_sttl_make(down, gslb_sttl_ttl(mon)) | GSLB_STTL_FORCED;
}

int gslb_health_set_monitor(gslb_health_t *h, uint32_t id, gslb_sttl_t sttl)
{
	if (id >= h->count)
		return STEER_ERANGE;
	h->monitor[id] = sttl & ~GSLB_STTL_FORCED;
	recompute(h, id);
	return 0;
}

int gslb_health_set_load(gslb_health_t *h, uint32_t id, const gslb_load_t *load)
{
	if (id >= h->count)
		return STEER_ERANGE;
	bool clear = load == NULL || load->have == 0;
	if (clear && h->load == NULL)
		return 0;
	/* Most tables have no metrics monitor at all: allocate on the first value. */
	if (h->load == NULL)
		h->load = xcalloc(h->count ? h->count : 1, sizeof(*h->load));
	if (clear)
		h->load[id] = (gslb_load_t){0};
	else
		h->load[id] = *load;
	return 0;
}

int gslb_health_set_ramp(gslb_health_t *h, uint32_t id, unsigned percent)
{
	if (id >= h->count)
		return STEER_ERANGE;
	if (percent >= 100)
		percent = 0;
	h->wx[id] = (h->wx[id] & GSLB_HEALTH_WX_WEIGHT) | (uint32_t)percent
	                                                      << GSLB_HEALTH_WX_RAMP_SHIFT;
	return 0;
}

static bool rule_matches(const gslb_override_t *r, const char *name)
{
	return fnmatch(r->pattern, name, FNM_CASEFOLD) == 0;
}

/* The weight word of target @p i from its weight rule, keeping its ramp. */
static void recompute_weight(gslb_health_t *h, uint32_t i)
{
	uint32_t ramp = h->wx[i] & ~GSLB_HEALTH_WX_WEIGHT;
	int32_t r = h->wrule[i];
	h->wx[i] = ramp | (r >= 0 ? (uint32_t)h->rules[r].weight + 1 : 0);
}

void gslb_health_apply_overrides(gslb_health_t *h, const gslb_overrides_t *ov, uint32_t *matches)
{
	rules_free(h);
	rules_copy(h, ov->rules, ov->count);
	if (matches)
		memset(matches, 0, ov->count * sizeof(*matches));
	for (uint32_t i = 0; i < h->count; i++) {
		h->rule[i] = h->wrule[i] = -1;
		for (size_t r = 0; h->names[i] && r < ov->count; r++) {
			if (!rule_matches(&ov->rules[r], h->names[i]))
				continue;
			/* Later rules overwrite: the last match of each kind wins. */
			if (ov->rules[r].kind == GSLB_OVERRIDE_WEIGHT)
				h->wrule[i] = (int32_t)r;
			else
				h->rule[i] = (int32_t)r;
			if (matches)
				matches[r]++;
		}
		recompute(h, i);
		recompute_weight(h, i);
	}
}

int gslb_health_entry(const gslb_health_t *h, uint32_t id, gslb_health_entry_t *out)
{
	if (id >= h->count)
		return STEER_ERANGE;
	int32_t r = h->rule[id];
	int32_t wr = h->wrule[id];
	*out = (gslb_health_entry_t){
	    .id = id,
	    .name = h->names[id],
	    .eff = h->eff[id],
	    .monitor = h->monitor[id],
	    .forced = r >= 0,
	    .pattern = r >= 0 ? h->rules[r].pattern : NULL,
	    .rule_line = r >= 0 ? h->rules[r].line : 0,
	    .weight = wr >= 0 ? (int32_t)h->rules[wr].weight : -1,
	    .weight_pattern = wr >= 0 ? h->rules[wr].pattern : NULL,
	    .ramp = h->wx[id] >> GSLB_HEALTH_WX_RAMP_SHIFT,
	};
	return 0;
}

static const char *state_word(gslb_sttl_t s)
{
	return gslb_sttl_down(s) ? "DOWN" : "UP";
}

int gslb_health_reason(const gslb_health_entry_t *e, char *buf, size_t len)
{
	if (!e->forced)
		return snprintf(buf, len, "monitor: %s", state_word(e->monitor));
	if (e->rule_line)
		return snprintf(buf, len, "forced %s by override '%s' (line %u); monitor: %s",
		                state_word(e->eff), e->pattern, e->rule_line,
		                state_word(e->monitor));
	return snprintf(buf, len, "forced %s by override '%s'; monitor: %s", state_word(e->eff),
	                e->pattern, state_word(e->monitor));
}

int gslb_health_list(const gslb_health_t *h, gslb_health_list_cb cb, void *ctx)
{
	for (uint32_t i = 0; i < h->count; i++) {
		gslb_health_entry_t e;
		if (gslb_health_entry(h, i, &e) == 0) {
			int ret = cb(&e, ctx);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* ---- override list ---- */

void gslb_overrides_init(gslb_overrides_t *ov)
{
	*ov = (gslb_overrides_t){0};
}

void gslb_overrides_deinit(gslb_overrides_t *ov)
{
	for (size_t i = 0; i < ov->count; i++)
		free(ov->rules[i].pattern);
	free(ov->rules);
	gslb_overrides_init(ov);
}

/*
 * glibc's fnmatch() treats an unclosed '[' as a literal, so "*[telecom" would silently match
 * nothing useful. Reject it: every '[' needs a ']' after its first member ("[]" and "[!]"
 * start with a literal ']').
 */
static bool brackets_closed(const char *p)
{
	for (; *p; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			continue;
		}
		if (*p != '[')
			continue;
		const char *q = p + 1;
		if (*q == '!' || *q == '^')
			q++;
		if (*q == ']')
			q++;
		while (*q && *q != ']')
			q++;
		if (!*q)
			return false;
		p = q;
	}
	return true;
}

static int pattern_check(const char *pattern, char *err, size_t errlen)
{
	if (!*pattern) {
		snprintf(err, errlen, "empty pattern");
		return STEER_EINVAL;
	}
	if (strlen(pattern) > OVERRIDE_PATTERN_MAX) {
		snprintf(err, errlen, "pattern longer than %d bytes", OVERRIDE_PATTERN_MAX);
		return STEER_EINVAL;
	}
	if (!token_is_clean(pattern)) {
		snprintf(err, errlen, "pattern contains whitespace or control characters");
		return STEER_EINVAL;
	}
	if (strchr(pattern, '#')) {
		snprintf(err, errlen, "'#' in pattern (it starts a comment in the state file)");
		return STEER_EINVAL;
	}
	if (!brackets_closed(pattern)) {
		snprintf(err, errlen, "unclosed '[' in pattern '%s'", pattern);
		return STEER_EINVAL;
	}
	return 0;
}

static ssize_t rule_find(const gslb_overrides_t *ov, const char *pattern, gslb_override_kind_t kind)
{
	for (size_t i = 0; i < ov->count; i++)
		if (ov->rules[i].kind == kind && strcmp(ov->rules[i].pattern, pattern) == 0)
			return (ssize_t)i;
	return -1;
}

static void rule_delete(gslb_overrides_t *ov, size_t i)
{
	free(ov->rules[i].pattern);
	memmove(&ov->rules[i], &ov->rules[i + 1], (ov->count - i - 1) * sizeof(ov->rules[0]));
	ov->count--;
}

/* Append @p rule (pattern borrowed) after removing its namesake of the same kind. */
static int rule_append(gslb_overrides_t *ov, gslb_override_t rule, char *err, size_t errlen)
{
	int ret = pattern_check(rule.pattern, err, errlen);
	if (ret)
		return ret;
	ssize_t old = rule_find(ov, rule.pattern, rule.kind);
	if (old >= 0)
		rule_delete(ov, (size_t)old);
	if (ov->count == ov->cap) {
		ov->cap = ov->cap ? ov->cap * 2 : 8;
		ov->rules = xrealloc(ov->rules, ov->cap * sizeof(*ov->rules));
	}
	rule.pattern = xstrdup(rule.pattern);
	ov->rules[ov->count++] = rule;
	return 0;
}

int gslb_overrides_set(gslb_overrides_t *ov, const char *pattern, bool down, uint32_t line,
                       char *err, size_t errlen)
{
	gslb_override_t rule = {
	    .pattern = (char *)pattern, .down = down, .line = line, .kind = GSLB_OVERRIDE_STATE};
	return rule_append(ov, rule, err, errlen);
}

int gslb_overrides_set_weight(gslb_overrides_t *ov, const char *pattern, uint16_t weight,
                              uint32_t line, char *err, size_t errlen)
{
	gslb_override_t rule = {.pattern = (char *)pattern,
	                        .weight = weight,
	                        .line = line,
	                        .kind = GSLB_OVERRIDE_WEIGHT};
	return rule_append(ov, rule, err, errlen);
}

int gslb_overrides_add(gslb_overrides_t *ov, const gslb_override_t *rule, char *err, size_t errlen)
{
	return rule_append(ov, *rule, err, errlen);
}

int gslb_overrides_remove(gslb_overrides_t *ov, const char *pattern, gslb_override_kind_t kind)
{
	ssize_t i = rule_find(ov, pattern, kind);
	if (i < 0)
		return STEER_ENOENT;
	rule_delete(ov, (size_t)i);
	return 0;
}

static int parse_state(const char *word, bool *down)
{
	if (strcasecmp(word, "DOWN") == 0)
		*down = true;
	else if (strcasecmp(word, "UP") == 0)
		*down = false;
	else
		return STEER_ESYNTAX;
	return 0;
}

/* "PATTERN WEIGHT N": @p num is N. */
static int parse_weight_rule(gslb_overrides_t *ov, const char *pattern, const char *num,
                             uint32_t lineno, char *msg, size_t len)
{
	char *end = NULL;
	unsigned long w = num ? strtoul(num, &end, 10) : 0;
	if (!num || *end || *num == '-' || *num == '+' || w > UINT16_MAX) {
		snprintf(msg, len, "bad weight '%s' (want 0..65535)", num ? num : "");
		return STEER_ESYNTAX;
	}
	if (gslb_overrides_set_weight(ov, pattern, (uint16_t)w, lineno, msg, len))
		return STEER_ESYNTAX;
	return 0;
}

/* "SECONDS[.MMM]" since the epoch into milliseconds; -1 when malformed or out of range. */
static int64_t parse_until(const char *text)
{
	int64_t ms = 0;
	size_t i = 0;
	for (; isdigit((unsigned char)text[i]); i++) {
		if (i >= 12) /* beyond the year 33658: not a time this file holds */
			return -1;
		ms = ms * 10 + (text[i] - '0');
	}
	if (i == 0)
		return -1;
	ms *= 1000;
	if (text[i] == '.') {
		int64_t scale = 100;
		size_t j = i + 1;
		for (; isdigit((unsigned char)text[j]) && j - i <= 3; j++, scale /= 10)
			ms += (text[j] - '0') * scale;
		if (j == i + 1)
			return -1;
		i = j;
	}
	return text[i] == '\0' && ms > 0 ? ms : -1;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The words of a line, at most @p max; more is an error the caller words. */
static size_t split_words(char *line, const char **words, size_t max, bool *more)
{
	char *save = NULL;
	size_t n = 0;
	*more = false;
	for (const char *w = strtok_r(line, " \t\r\n\v\f", &save); w;
	     w = strtok_r(NULL, " \t\r\n\v\f", &save)) {
		if (n == max) {
			*more = true;
			break;
		}
		words[n++] = w;
	}
	return n;
}

/* The optional "UNTIL T" after a rule's words (from @p words[at], @p n words in all). */
static int parse_expiry(const char *const *words, size_t n, size_t at, bool more, bool weight,
                        int64_t *expires, char *msg, size_t len)
{
	*expires = 0;
	if (n <= at)
		return 0;
	if (strcasecmp(words[at], "UNTIL") != 0) {
		snprintf(msg, len, "unexpected '%s' after the %s", words[at],
		         weight ? "weight" : "state");
		return STEER_ESYNTAX;
	}
	if (n == at + 1 || (*expires = parse_until(words[at + 1])) < 0) {
		snprintf(msg, len, "bad time after UNTIL '%s' (want seconds since the epoch)",
		         n > at + 1 ? words[at + 1] : "");
		return STEER_ESYNTAX;
	}
	if (more || n > at + 2) {
		snprintf(msg, len, "unexpected words after UNTIL %s", words[at + 1]);
		return STEER_ESYNTAX;
	}
	return 0;
}

/*
 * One state-file line into @p ov. Blank lines and comments are fine; anything else must be
 * exactly a pattern and a state, and maybe its expiry. @p msg receives the reason on error (no
 * file:line prefix).
 */
static int parse_line(gslb_overrides_t *ov, char *line, uint32_t lineno, char *msg, size_t len)
{
	char *hash = strchr(line, '#');
	if (hash)
		*hash = '\0';
	const char *w[5];
	bool more;
	size_t n = split_words(line, w, STEER_ARRAY_LEN(w), &more);
	if (n == 0)
		return 0;
	if (n == 1) {
		snprintf(msg, len, "missing state after '%s' (want UP, DOWN or WEIGHT n)", w[0]);
		return STEER_ESYNTAX;
	}
	bool weight = strcasecmp(w[1], "WEIGHT") == 0;
	int64_t expires;
	int ret = parse_expiry(w, n, weight ? 3 : 2, more, weight, &expires, msg, len);
	if (ret)
		return ret;
	bool down = false;
	if (!weight && parse_state(w[1], &down)) {
		snprintf(msg, len, "bad state '%s' (want UP, DOWN or WEIGHT n)", w[1]);
		return STEER_ESYNTAX;
	}
	if (expires != 0 && expires <= now_ms())
		return 0; /* lapsed while nobody was serving it */
	ret = weight ? parse_weight_rule(ov, w[0], n > 2 ? w[2] : NULL, lineno, msg, len)
	      : gslb_overrides_set(ov, w[0], down, lineno, msg, len) ? STEER_ESYNTAX
	                                                             : 0;
	if (ret == 0)
		ov->rules[ov->count - 1].expires_ms = expires;
	return ret;
}

/* Reads lines of @p f into @p ov; on error @p msg and @p lineno say where. */
static int parse_file(FILE *f, gslb_overrides_t *ov, uint32_t *lineno, char *msg, size_t len)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ret = 0;
	*lineno = 0;
	errno = 0;
	while ((n = getline(&line, &cap, f)) >= 0) {
		(*lineno)++;
		if (n > OVERRIDE_LINE_MAX) {
			snprintf(msg, len, "line longer than %d bytes", OVERRIDE_LINE_MAX);
			ret = STEER_ESYNTAX;
			break;
		}
		/* A NUL would silently cut the line short: this is not a text file. */
		if (strlen(line) != (size_t)n) {
			snprintf(msg, len, "NUL byte in line");
			ret = STEER_ESYNTAX;
			break;
		}
		ret = parse_line(ov, line, *lineno, msg, len);
		if (ret)
			break;
	}
	if (!ret && ferror(f)) {
		ret = errno ? -errno : STEER_EINVAL;
		snprintf(msg, len, "read error: %s", steer_strerror(ret));
	}
	free(line);
	return ret;
}

int gslb_overrides_load(gslb_overrides_t *ov, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		int ret = -errno;
		snprintf(err, errlen, "%s: %s", path, steer_strerror(ret));
		return ret;
	}
	gslb_overrides_t next;
	gslb_overrides_init(&next);
	char msg[256];
	uint32_t lineno;
	int ret = parse_file(f, &next, &lineno, msg, sizeof(msg));
	fclose(f);
	if (ret) {
		/* A read error before the first line (a folder, an I/O error) has no line to name.
		 */
		if (lineno)
			snprintf(err, errlen, "%s:%u: %s", path, lineno, msg);
		else
			snprintf(err, errlen, "%s: %s", path, msg);
		gslb_overrides_deinit(&next);
		return ret;
	}
	gslb_overrides_deinit(ov);
	*ov = next;
	return 0;
}

/* " UNTIL 1796183541.250 # 2026-12-02T04:32:21Z": the time, and for people in UTC. */
static void write_expiry(FILE *f, int64_t ms)
{
	time_t sec = (time_t)(ms / 1000);
	struct tm tm;
	char iso[32] = "?";
	if (gmtime_r(&sec, &tm) != NULL)
		strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm);
	fprintf(f, " UNTIL %lld.%03d # %s", (long long)(ms / 1000), (int)(ms % 1000), iso);
}

static int write_rules(FILE *f, void *ctx)
{
	const gslb_overrides_t *ov = ctx;
	fprintf(f, "# steer GSLB admin overrides: PATTERN UP|DOWN|WEIGHT n [UNTIL epoch-seconds], "
	           "the last matching line of each kind wins\n");
	for (size_t i = 0; i < ov->count; i++) {
		const gslb_override_t *r = &ov->rules[i];
		if (r->kind == GSLB_OVERRIDE_WEIGHT)
			fprintf(f, "%s WEIGHT %u", r->pattern, r->weight);
		else
			fprintf(f, "%s %s", r->pattern, r->down ? "DOWN" : "UP");
		if (r->expires_ms > 0)
			write_expiry(f, r->expires_ms);
		fputc('\n', f);
	}
	return 0;
}

int gslb_overrides_save(const gslb_overrides_t *ov, const char *path, char *err, size_t errlen)
{
	int ret = steer_file_replace(path, 0644, write_rules, (void *)ov);
	if (ret)
		snprintf(err, errlen, "%s: %s", path, steer_strerror(ret));
	return ret;
}
