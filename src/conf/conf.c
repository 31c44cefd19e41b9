/*
 * Configuration loading: YAML (libyaml document API, whose node marks give line numbers) is
 * walked against the schema table in conf_schema.c, every value is validated, and the result is
 * a conf_t that nobody mutates afterwards. Quick mode (command-line zones) starts from the
 * defaults and goes through the same value parsers. Runs on the control thread only; nothing
 * here is shared between threads.
 */
#include "conf/conf.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "base/alloc.h"
#include "base/err.h"
#include "conf/conf_int.h"
#include "dns/dname.h"

static_assert(sizeof(log_target_t) == sizeof(int), "enums are stored as int");
static_assert(sizeof(log_level_t) == sizeof(int), "enums are stored as int");
static_assert(sizeof(uint32_t) == sizeof(unsigned), "uint32_t fields are parsed as unsigned");

/* Room for a value error before the "file:line: section.key: " prefix is added. */
#define MSG_MAX 512

/* ---- schema lookups ---------------------------------------------------------------------- */

const conf_key_t *conf_find_key(const char *section, const char *name)
{
	for (size_t i = 0; i < conf_n_keys; i++) {
		if (strcmp(conf_keys[i].section, section) == 0 &&
		    strcmp(conf_keys[i].name, name) == 0)
			return &conf_keys[i];
	}
	return NULL;
}

static const conf_section_t *find_section(const char *name)
{
	for (size_t i = 0; i < conf_n_sections; i++) {
		if (strcmp(conf_sections[i].name, name) == 0)
			return &conf_sections[i];
	}
	return NULL;
}

static bool is_list_type(conf_type_t type)
{
	return type == CONF_TYPE_ADDR_LIST || type == CONF_TYPE_PREFIX_LIST;
}

static bool is_string_type(conf_type_t type)
{
	return type == CONF_TYPE_STRING || type == CONF_TYPE_PATH || type == CONF_TYPE_DNAME;
}

static void *field(void *base, const conf_key_t *key)
{
	return (char *)base + key->offset;
}

static const void *cfield(const void *base, const conf_key_t *key)
{
	return (const char *)base + key->offset;
}

static size_t elem_size(conf_type_t type)
{
	return type == CONF_TYPE_ADDR_LIST ? sizeof(steer_sockaddr_t) : sizeof(steer_prefix_t);
}

/* Lists are a pointer at key->offset and a size_t count at key->size. */
static size_t *list_count(void *base, const conf_key_t *key)
{
	return (size_t *)(void *)((char *)base + key->size);
}

static size_t list_ccount(const void *base, const conf_key_t *key)
{
	return *(const size_t *)(const void *)((const char *)base + key->size);
}

static void list_clear(void *base, const conf_key_t *key)
{
	void **items = field(base, key);
	free(*items);
	*items = NULL;
	*list_count(base, key) = 0;
}

static void list_append(void *base, const conf_key_t *key, const void *item)
{
	void **items = field(base, key);
	size_t *n = list_count(base, key);
	size_t size = elem_size(key->type);
	*items = xrealloc(*items, (*n + 1) * size);
	memcpy((char *)*items + *n * size, item, size);
	(*n)++;
}

/* ---- "did you mean": nearest candidate by edit distance ----------------------------------- */

/* Keys and values are short; longer words never get a hint. */
#define SUGGEST_MAXLEN 64

/* Optimal string alignment distance, case-insensitive: a swap of neighbours counts as one. */
static unsigned edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned d[SUGGEST_MAXLEN + 1][SUGGEST_MAXLEN + 1];
	if (la > SUGGEST_MAXLEN || lb > SUGGEST_MAXLEN)
		return UINT_MAX;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)a[i - 1]),
			    cb = tolower((unsigned char)b[j - 1]);
			unsigned best = d[i - 1][j - 1] + (ca != cb);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

void conf_suggest_init(conf_suggest_t *s, const char *word)
{
	*s = (conf_suggest_t){.word = word, .score = UINT_MAX};
}

void conf_suggest_add(conf_suggest_t *s, const char *candidate)
{
	size_t len = strlen(s->word);
	unsigned allowed = len < 3 ? 0 : (len < 6 ? 1 : 2);
	unsigned dist = edit_distance(s->word, candidate), score = UINT_MAX;
	if (strcmp(s->word, candidate) == 0)
		return; /* the word itself is not a hint */
	if (dist <= allowed)
		score = dist;
	else if (len >= 4 && strncasecmp(candidate, s->word, len) == 0)
		score = allowed + 1; /* a clear prefix, after every close spelling */
	if (score < s->score) {
		s->score = score;
		s->best = candidate;
	}
}

bool conf_suggest_hint(const conf_suggest_t *s, char *buf, size_t size)
{
	size_t used = strlen(buf);
	if (!s->best || used >= size)
		return false;
	snprintf(buf + used, size - used, " (did you mean '%s'?)", s->best);
	return true;
}

/* ---- durations ----------------------------------------------------------------------------- */

static const struct {
	const char *suffix;
	uint64_t ms;
} duration_units[] = {
    {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1},
};

const char *conf_duration_str(uint64_t ms, char *buf, size_t size)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(duration_units); i++) {
		if (ms != 0 && ms % duration_units[i].ms == 0) {
			snprintf(buf, size, "%" PRIu64 "%s", ms / duration_units[i].ms,
			         duration_units[i].suffix);
			return buf;
		}
	}
	snprintf(buf, size, "0s");
	return buf;
}

static const char *unit_name(conf_unit_t unit)
{
	return unit == CONF_UNIT_S ? "seconds" : "milliseconds";
}

/*
 * "1m30s", "500ms", "2h" (units largest first, each once) -> *@p ms. Returns 0, -1 for text
 * that is not a duration, -2 for one too large for 64 bits of milliseconds.
 */
static int duration_text(const char *text, uint64_t *ms)
{
	uint64_t total = 0;
	size_t last = 0; /* index after the previous unit: units must come in decreasing size */
	const char *p = text;
	if (*p == '\0')
		return -1;
	while (*p) {
		if (*p < '0' || *p > '9')
			return -1;
		uint64_t n = 0;
		bool big = false;
		for (; *p >= '0' && *p <= '9'; p++) {
			big = big || n > (UINT64_MAX - 9) / 10;
			n = n * 10 + (uint64_t)(*p - '0');
		}
		size_t ulen = strspn(p, "abcdefghijklmnopqrstuvwxyz");
		size_t u = last;
		while (u < STEER_ARRAY_LEN(duration_units) &&
		       (strlen(duration_units[u].suffix) != ulen ||
		        strncmp(duration_units[u].suffix, p, ulen) != 0))
			u++;
		if (ulen == 0 || u == STEER_ARRAY_LEN(duration_units))
			return -1;
		if (big || n > (UINT64_MAX - total) / duration_units[u].ms)
			return -2;
		total += n * duration_units[u].ms;
		last = u + 1;
		p += ulen;
	}
	*ms = total;
	return 0;
}

static int parse_duration(const conf_key_t *key, void *base, const char *text, char *msg,
                          size_t len)
{
	char shown[64], lo[32], hi[32];
	uint64_t unit = (uint64_t)key->unit, value = 0;
	bool bare = text[0] != '\0' && strspn(text, "0123456789") == strlen(text);
	int ret = 0;
	if (bare) {
		errno = 0;
		unsigned long long n = strtoull(text, NULL, 10);
		ret = errno == ERANGE || n > UINT64_MAX / unit ? -2 : 0;
		value = (uint64_t)n * unit;
		snprintf(shown, sizeof(shown), "%s%s", text, unit == CONF_UNIT_S ? "s" : "ms");
	} else {
		ret = duration_text(text, &value);
		snprintf(shown, sizeof(shown), "%s", text);
	}
	conf_duration_str((uint64_t)key->min * unit, lo, sizeof(lo));
	conf_duration_str((uint64_t)key->max * unit, hi, sizeof(hi));
	if (ret == -1) {
		snprintf(
		    msg, len,
		    "expected a duration such as 500ms, 2s, 1m, 1h, 1d or 1m30s (a bare number "
		    "is %s), got '%s'",
		    unit_name(key->unit), text);
		return -1;
	}
	if (ret == -2 || value / unit > key->max) {
		snprintf(msg, len, "%s is above the maximum %s", shown, hi);
		return -1;
	}
	if (value % unit != 0) {
		snprintf(msg, len, "%s is not a whole number of %s", shown, unit_name(key->unit));
		return -1;
	}
	if (value / unit < key->min) {
		snprintf(msg, len, "%s is below the minimum %s", shown, lo);
		return -1;
	}
	*(unsigned *)field(base, key) = (unsigned)(value / unit);
	return 0;
}

/* ---- sizes -------------------------------------------------------------------------------- */

/* Binary units: a cache cap is memory, which the kernel counts in pages of 4 KiB. */
static const struct {
	char suffix;
	uint64_t bytes;
} size_units[] = {
    {'T', 1ULL << 40},
    {'G', 1ULL << 30},
    {'M', 1ULL << 20},
    {'K', 1ULL << 10},
};

const char *conf_size_str(uint64_t bytes, char *buf, size_t size)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(size_units); i++) {
		if (bytes != 0 && bytes % size_units[i].bytes == 0) {
			snprintf(buf, size, "%" PRIu64 "%c", bytes / size_units[i].bytes,
			         size_units[i].suffix);
			return buf;
		}
	}
	snprintf(buf, size, "%" PRIu64, bytes);
	return buf;
}

/* "256M", "1G", "512K", "1048576" (bytes); units are powers of 1024, K/M/G/T in either case. */
static int parse_size(const conf_key_t *key, void *base, const char *text, char *msg, size_t len)
{
	char lo[32], hi[32];
	uint64_t n = 0, mult = 1;
	const char *p = text;
	bool big = false;
	for (; *p >= '0' && *p <= '9'; p++) {
		big = big || n > (UINT64_MAX - 9) / 10;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	bool ok = p > text;
	if (ok && *p != '\0') {
		size_t u = 0;
		while (u < STEER_ARRAY_LEN(size_units) &&
		       size_units[u].suffix != toupper((unsigned char)*p))
			u++;
		ok = u < STEER_ARRAY_LEN(size_units) && p[1] == '\0';
		if (ok)
			mult = size_units[u].bytes;
	}
	if (!ok) {
		snprintf(msg, len,
		         "expected a size such as 512K, 256M or 1G (a bare number is bytes), got "
		         "'%s'",
		         text);
		return -1;
	}
	uint64_t min = (uint64_t)key->min << 10, max = (uint64_t)key->max << 10;
	conf_size_str(min, lo, sizeof(lo));
	conf_size_str(max, hi, sizeof(hi));
	if (big || n > UINT64_MAX / mult || n * mult > max) {
		snprintf(msg, len, "%s is above the maximum %s", text, hi);
		return -1;
	}
	if (n * mult < min) {
		snprintf(msg, len, "%s is below the minimum %s", text, lo);
		return -1;
	}
	*(uint64_t *)field(base, key) = n * mult;
	return 0;
}

/* ---- value parsers: text -> field, shared by YAML, defaults and quick mode ---------------- */

static int parse_uint(const conf_key_t *key, void *base, const char *text, char *msg, size_t len)
{
	char *end = NULL;
	if (text[0] < '0' || text[0] > '9') {
		snprintf(msg, len, "expected an unsigned integer, got '%s'", text);
		return -1;
	}
	errno = 0;
	unsigned long value = strtoul(text, &end, 10);
	if (*end != '\0') {
		snprintf(msg, len, "expected an unsigned integer, got '%s'", text);
		return -1;
	}
	if (errno == ERANGE || value < key->min || value > key->max) {
		snprintf(msg, len, "%s is out of range (%u to %u)", text, key->min, key->max);
		return -1;
	}
	if (key->size == sizeof(uint16_t))
		*(uint16_t *)field(base, key) = (uint16_t)value;
	else
		*(unsigned *)field(base, key) = (unsigned)value;
	return 0;
}

/* "expected one of a, b, c; got 'x'" plus a hint for the nearest name. */
static void choices_error(const conf_enum_t *enums, const char *text, char *msg, size_t len)
{
	conf_suggest_t sg;
	conf_suggest_init(&sg, text);
	int n = snprintf(msg, len, "expected one of");
	for (const conf_enum_t *e = enums; e->name && n >= 0 && (size_t)n < len; e++) {
		n += snprintf(msg + n, len - (size_t)n, "%s%s", e == enums ? " " : ", ", e->name);
		conf_suggest_add(&sg, e->name);
	}
	if (n >= 0 && (size_t)n < len)
		snprintf(msg + n, len - (size_t)n, "; got '%s'", text);
	conf_suggest_hint(&sg, msg, len);
}

static int parse_enum(const conf_key_t *key, void *base, const char *text, char *msg, size_t len)
{
	for (const conf_enum_t *e = key->enums; e->name; e++) {
		if (strcmp(e->name, text) != 0)
			continue;
		if (key->size == sizeof(bool))
			*(bool *)field(base, key) = e->value != 0;
		else
			*(int *)field(base, key) = e->value;
		return 0;
	}
	choices_error(key->enums, text, msg, len);
	return -1;
}

/* Relative paths are relative to the config file's folder; @p dir is NULL for the cwd. */
char *conf_resolve_path(const char *dir, const char *text)
{
	if (!dir || text[0] == '/')
		return xstrdup(text);
	size_t dlen = strlen(dir), tlen = strlen(text);
	bool slash = dlen > 0 && dir[dlen - 1] == '/';
	char *out = xmalloc(dlen + tlen + 2);
	memcpy(out, dir, dlen);
	if (!slash)
		out[dlen++] = '/';
	memcpy(out + dlen, text, tlen + 1);
	return out;
}

static int parse_string(const conf_key_t *key, void *base, const char *text, const char *dir,
                        char *msg, size_t len)
{
	uint8_t wire[DNS_DNAME_MAXLEN];
	if (text[0] == '\0' && !(key->flags & CONF_F_EMPTY_OK)) {
		snprintf(msg, len, "must not be empty");
		return -1;
	}
	if (key->enums) {
		const conf_enum_t *e = key->enums;
		while (e->name && strcasecmp(e->name, text) != 0)
			e++;
		if (!e->name) {
			choices_error(key->enums, text, msg, len);
			return -1;
		}
	}
	if (key->type == CONF_TYPE_DNAME) {
		int ret = dname_from_str(text, wire);
		if (ret == STEER_ERANGE) {
			snprintf(
			    msg, len,
			    "domain name '%s' is too long (labels at most 63 bytes, names 255)",
			    text);
			return -1;
		}
		if (ret < 0) {
			snprintf(msg, len, "invalid domain name '%s'", text);
			return -1;
		}
	}
	char *value = key->type == CONF_TYPE_PATH ? conf_resolve_path(dir, text) : xstrdup(text);
	if (key->max && strlen(value) > key->max) {
		snprintf(msg, len, "'%s' is %zu bytes long, at most %u are allowed", value,
		         strlen(value), key->max);
		free(value);
		return -1;
	}
	char **slot = field(base, key);
	free(*slot);
	*slot = value;
	return 0;
}

static int parse_addr(const conf_key_t *key, void *base, const char *text, char *msg, size_t len)
{
	steer_sockaddr_t addr;
	if (steer_sockaddr_parse(text, 53, &addr) != 0) {
		snprintf(msg, len,
		         "invalid address '%s' (expected IP or IP:PORT, IPv6 as [::1]:PORT)", text);
		return -1;
	}
	if (steer_sockaddr_port(&addr) == 0) {
		snprintf(msg, len, "port 0 is not allowed in '%s'", text);
		return -1;
	}
	const steer_sockaddr_t *items = *(steer_sockaddr_t **)field(base, key);
	for (size_t i = 0; i < *list_count(base, key); i++) {
		if (memcmp(&items[i], &addr, sizeof(addr)) == 0) {
			snprintf(msg, len, "duplicate address '%s'", text);
			return -1;
		}
	}
	list_append(base, key, &addr);
	return 0;
}

static int parse_prefix(const conf_key_t *key, void *base, const char *text, char *msg, size_t len)
{
	steer_prefix_t prefix;
	if (steer_prefix_parse(text, &prefix) != 0) {
		snprintf(msg, len,
		         "invalid address prefix '%s' (expected ADDRESS or ADDRESS/LENGTH with no "
		         "bits set beyond LENGTH)",
		         text);
		return -1;
	}
	list_append(base, key, &prefix);
	return 0;
}

/* YAML 1.2 core schema booleans. */
static int parse_bool(const conf_key_t *key, void *base, const char *text, char *msg, size_t len)
{
	static const char *const yes[] = {"true", "True", "TRUE"}, *const no[] = {"false", "False",
	                                                                          "FALSE"};
	for (size_t i = 0; i < STEER_ARRAY_LEN(yes); i++) {
		if (strcmp(text, yes[i]) == 0 || strcmp(text, no[i]) == 0) {
			*(bool *)field(base, key) = strcmp(text, yes[i]) == 0;
			return 0;
		}
	}
	snprintf(msg, len, "expected true or false, got '%s'", text);
	return -1;
}

/*
 * Parse @p text into the field of @p key in @p base (lists: append one item). Returns 0 or -1
 * with a message (no location) in @p msg.
 */
static int value_parse(const conf_key_t *key, void *base, const char *text, const char *dir,
                       char *msg, size_t len)
{
	switch (key->type) {
	case CONF_TYPE_UINT:
		return parse_uint(key, base, text, msg, len);
	case CONF_TYPE_DURATION:
		return parse_duration(key, base, text, msg, len);
	case CONF_TYPE_SIZE:
		return parse_size(key, base, text, msg, len);
	case CONF_TYPE_ENUM:
		return parse_enum(key, base, text, msg, len);
	case CONF_TYPE_STRING:
	case CONF_TYPE_PATH:
	case CONF_TYPE_DNAME:
		return parse_string(key, base, text, dir, msg, len);
	case CONF_TYPE_ADDR_LIST:
		return parse_addr(key, base, text, msg, len);
	case CONF_TYPE_PREFIX_LIST:
		return parse_prefix(key, base, text, msg, len);
	case CONF_TYPE_BOOL:
		return parse_bool(key, base, text, msg, len);
	case CONF_TYPE_NODE:
		break;
	}
	snprintf(msg, len, "unsupported type");
	return -1;
}

void conf_apply_defaults(const char *section, void *base)
{
	char msg[MSG_MAX], item[256];
	for (size_t i = 0; i < conf_n_keys; i++) {
		const conf_key_t *key = &conf_keys[i];
		if (strcmp(key->section, section) != 0 || !key->def ||
		    key->type == CONF_TYPE_NODE || (key->flags & CONF_F_ALIAS))
			continue;
		if (!is_list_type(key->type)) {
			STEER_ASSERT(value_parse(key, base, key->def, NULL, msg, sizeof(msg)) == 0);
			continue;
		}
		for (const char *p = key->def; *p;) {
			size_t n = strcspn(p, " ");
			STEER_ASSERT(n > 0 && n < sizeof(item));
			memcpy(item, p, n);
			item[n] = '\0';
			STEER_ASSERT(value_parse(key, base, item, NULL, msg, sizeof(msg)) == 0);
			p += n + strspn(p + n, " ");
		}
	}
}

void conf_free_fields(const char *section, void *base)
{
	for (size_t i = 0; i < conf_n_keys; i++) {
		const conf_key_t *key = &conf_keys[i];
		if (strcmp(key->section, section) != 0 || (key->flags & CONF_F_ALIAS))
			continue; /* an alias shares its key's field: free it once */
		if (strcmp(section, "zones") == 0 && key->type == CONF_TYPE_NODE &&
		    strcmp(key->name, "xfr-allow") == 0)
			conf_zone_acl_free(base);
		if (is_list_type(key->type)) {
			list_clear(base, key);
		} else if (is_string_type(key->type)) {
			char **slot = field(base, key);
			free(*slot);
			*slot = NULL;
		}
	}
}

/* ---- zones -------------------------------------------------------------------------------- */

typedef struct {
	uint8_t wire[DNS_DNAME_MAXLEN]; /* lowercased */
	size_t index;
} zone_name_t;

static int zone_name_cmp(const void *a, const void *b)
{
	const zone_name_t *x = a, *y = b;
	size_t xl = dname_len(x->wire), yl = dname_len(y->wire);
	int c = memcmp(x->wire, y->wire, xl < yl ? xl : yl);
	if (c == 0 && xl != yl)
		c = xl < yl ? -1 : 1;
	if (c == 0)
		c = x->index < y->index ? -1 : (x->index > y->index ? 1 : 0);
	return c;
}

static bool same_name(const zone_name_t *a, const zone_name_t *b)
{
	return dname_len(a->wire) == dname_len(b->wire) &&
	       memcmp(a->wire, b->wire, dname_len(a->wire)) == 0;
}

/*
 * Find the first zone (in list order) that repeats an earlier one. Sorting by (name, index)
 * puts each name's first definition at the head of its run and its first repeat right after,
 * so this is O(n log n) and configs with many zones stay fast.
 */
static bool find_duplicate_zone(const conf_t *conf, size_t *first, size_t *dup)
{
	if (conf->n_zones < 2)
		return false;
	zone_name_t *names = xcalloc(conf->n_zones, sizeof(*names));
	for (size_t i = 0; i < conf->n_zones; i++) {
		STEER_ASSERT(dname_from_str(conf->zones[i].domain, names[i].wire) > 0);
		dname_lower(names[i].wire);
		names[i].index = i;
	}
	qsort(names, conf->n_zones, sizeof(*names), zone_name_cmp);
	bool found = false;
	for (size_t i = 1; i < conf->n_zones; i++) {
		bool run_head = i == 1 || !same_name(&names[i - 2], &names[i - 1]);
		if (!run_head || !same_name(&names[i - 1], &names[i]))
			continue;
		if (!found || names[i].index < *dup) {
			*first = names[i - 1].index;
			*dup = names[i].index;
			found = true;
		}
	}
	free(names);
	return found;
}

static void zone_append(conf_t *conf, const conf_zone_t *zone)
{
	conf->zones = xrealloc(conf->zones, (conf->n_zones + 1) * sizeof(*conf->zones));
	conf->zones[conf->n_zones++] = *zone;
}

static void zone_drop_last(conf_t *conf)
{
	STEER_ASSERT(conf->n_zones > 0);
	conf_free_fields("zones", &conf->zones[--conf->n_zones]);
}

/* ---- YAML walking ------------------------------------------------------------------------- */

size_t conf_node_line(const yaml_node_t *node)
{
	return node->start_mark.line + 1;
}

int conf_fail(conf_loader_t *ld, size_t line, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(ld->err, ld->errlen, "%s:%zu: ", ld->file, line);
	if (n < 0 || (size_t)n >= ld->errlen)
		return STEER_ECONF;
	va_start(ap, fmt);
	vsnprintf(ld->err + n, ld->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return STEER_ECONF;
}

int conf_load_mapping_list(conf_loader_t *ld, const char *what, const char *shape,
                           const yaml_node_t *node, bool allow_empty, conf_item_load_cb load,
                           void *owner)
{
	if (conf_is_null(node) ||
	    (node->type == YAML_SEQUENCE_NODE &&
	     node->data.sequence.items.start == node->data.sequence.items.top)) {
		if (allow_empty)
			return 0;
		return conf_fail(ld, conf_node_line(node), "%s: needs at least one entry", what);
	}
	if (node->type != YAML_SEQUENCE_NODE)
		return conf_fail(ld, conf_node_line(node),
		                 "%s: expected a list of mappings (%s), got %s", what, shape,
		                 conf_kind_name(node));
	for (const yaml_node_item_t *it = node->data.sequence.items.start;
	     it < node->data.sequence.items.top; it++) {
		const yaml_node_t *item = conf_node(ld, *it);
		if (item->type != YAML_MAPPING_NODE)
			return conf_fail(ld, conf_node_line(item),
			                 "%s: each entry must be a mapping (%s), "
			                 "got %s",
			                 what, shape, conf_kind_name(item));
		int ret = load(ld, item, owner);
		if (ret != 0)
			return ret;
	}
	return 0;
}

const char *conf_kind_name(const yaml_node_t *node)
{
	switch (node->type) {
	case YAML_MAPPING_NODE:
		return "a mapping";
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_SCALAR_NODE:
		return "a single value";
	case YAML_NO_NODE:
		break;
	}
	return "nothing";
}

bool conf_is_null(const yaml_node_t *node)
{
	if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *v = (const char *)node->data.scalar.value;
	return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
	       strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

yaml_node_t *conf_node(conf_loader_t *ld, int id)
{
	return yaml_document_get_node(ld->doc, id);
}

/* Mapping keys must be plain text without NUL bytes; returns the text or NULL (error set). */
const char *conf_key_text(conf_loader_t *ld, const yaml_node_t *key, int *ret)
{
	if (key->type != YAML_SCALAR_NODE) {
		*ret = conf_fail(ld, conf_node_line(key), "keys must be plain names, not %s",
		                 conf_kind_name(key));
		return NULL;
	}
	const char *text = (const char *)key->data.scalar.value;
	if (strlen(text) != key->data.scalar.length) {
		*ret = conf_fail(ld, conf_node_line(key), "key contains a NUL byte");
		return NULL;
	}
	return text;
}

/* YAML leaves duplicate keys to the application; a repeated key is almost always a mistake. */
int conf_check_duplicate_key(conf_loader_t *ld, const yaml_node_t *map,
                             const yaml_node_pair_t *pair, const char *text, const char *section)
{
	for (const yaml_node_pair_t *p = map->data.mapping.pairs.start; p < pair; p++) {
		const yaml_node_t *k = conf_node(ld, p->key);
		if (k->type == YAML_SCALAR_NODE &&
		    strcmp((const char *)k->data.scalar.value, text) == 0)
			return section
			           ? conf_fail(
			                 ld, conf_node_line(conf_node(ld, pair->key)),
			                 "duplicate key '%s' in section '%s' (first at line %zu)",
			                 text, section, conf_node_line(k))
			           : conf_fail(ld, conf_node_line(conf_node(ld, pair->key)),
			                       "duplicate section '%s' (first at line %zu)", text,
			                       conf_node_line(k));
	}
	return 0;
}

static int scalar_value(conf_loader_t *ld, const conf_key_t *key, void *base,
                        const yaml_node_t *node)
{
	char msg[MSG_MAX];
	const char *text = (const char *)node->data.scalar.value;
	if (strlen(text) != node->data.scalar.length)
		return conf_fail(ld, conf_node_line(node), "%s.%s: value contains a NUL byte",
		                 key->section, key->name);
	if (value_parse(key, base, text, ld->dir, msg, sizeof(msg)) != 0)
		return conf_fail(ld, conf_node_line(node), "%s.%s: %s", key->section, key->name,
		                 msg);
	return 0;
}

static int list_value(conf_loader_t *ld, const conf_key_t *key, void *base, const yaml_node_t *node)
{
	list_clear(base, key);
	if (node->type == YAML_SCALAR_NODE && conf_is_null(node)) {
		if (key->flags & CONF_F_NONEMPTY)
			return conf_fail(ld, conf_node_line(node),
			                 "%s.%s: needs at least one value", key->section,
			                 key->name);
		return 0;
	}
	if (node->type == YAML_SCALAR_NODE)
		return scalar_value(ld, key, base, node);
	if (node->type != YAML_SEQUENCE_NODE)
		return conf_fail(ld, conf_node_line(node), "%s.%s: expected a list, got %s",
		                 key->section, key->name, conf_kind_name(node));
	const yaml_node_item_t *start = node->data.sequence.items.start;
	const yaml_node_item_t *top = node->data.sequence.items.top;
	if (start == top && (key->flags & CONF_F_NONEMPTY))
		return conf_fail(ld, conf_node_line(node), "%s.%s: needs at least one value",
		                 key->section, key->name);
	for (const yaml_node_item_t *it = start; it < top; it++) {
		const yaml_node_t *item = conf_node(ld, *it);
		if (item->type != YAML_SCALAR_NODE || conf_is_null(item))
			return conf_fail(
			    ld, conf_node_line(item), "%s.%s: list items must be single values%s",
			    key->section, key->name,
			    key->type == CONF_TYPE_ADDR_LIST && item->type != YAML_SCALAR_NODE
			        ? " (quote IPv6 addresses: \"[::1]:53\")"
			        : "");
		int ret = scalar_value(ld, key, base, item);
		if (ret != 0)
			return ret;
	}
	return 0;
}

static int key_value(conf_loader_t *ld, const conf_key_t *key, void *base, const yaml_node_t *node)
{
	if (is_list_type(key->type))
		return list_value(ld, key, base, node);
	if (node->type != YAML_SCALAR_NODE)
		return conf_fail(ld, conf_node_line(node), "%s.%s: expected a single value, got %s",
		                 key->section, key->name, conf_kind_name(node));
	if (conf_is_null(node)) {
		if (key->def || (key->flags & CONF_F_REQUIRED) || !is_string_type(key->type))
			return conf_fail(ld, conf_node_line(node), "%s.%s: needs a value",
			                 key->section, key->name);
		char **slot = field(base, key);
		free(*slot);
		*slot = NULL;
		return 0;
	}
	return scalar_value(ld, key, base, node);
}

static bool mapping_has_key(conf_loader_t *ld, const yaml_node_t *map, const char *name)
{
	for (const yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		const yaml_node_t *k = conf_node(ld, p->key);
		if (k->type == YAML_SCALAR_NODE &&
		    strcmp((const char *)k->data.scalar.value, name) == 0)
			return true;
	}
	return false;
}

/* The row that @p key is an alias of (same section and field), or @p key itself. */
static const conf_key_t *alias_target(const conf_key_t *key)
{
	if (!(key->flags & CONF_F_ALIAS))
		return key;
	for (size_t i = 0; i < conf_n_keys; i++) {
		const conf_key_t *k = &conf_keys[i];
		if (!(k->flags & CONF_F_ALIAS) && k->offset == key->offset &&
		    strcmp(k->section, key->section) == 0)
			return k;
	}
	STEER_ASSERT(!"an alias row follows the key it renames");
	return key;
}

/* True when @p map has key @p key or one of its aliases. */
static bool mapping_has_any_name(conf_loader_t *ld, const yaml_node_t *map, const conf_key_t *key)
{
	for (size_t i = 0; i < conf_n_keys; i++) {
		const conf_key_t *k = &conf_keys[i];
		if (alias_target(k) == key && mapping_has_key(ld, map, k->name))
			return true;
	}
	return false;
}

static int check_required(conf_loader_t *ld, const char *section, const yaml_node_t *map)
{
	for (size_t i = 0; i < conf_n_keys; i++) {
		const conf_key_t *key = &conf_keys[i];
		if (strcmp(key->section, section) != 0 || !(key->flags & CONF_F_REQUIRED))
			continue;
		if (!mapping_has_any_name(ld, map, key))
			return conf_fail(ld, conf_node_line(map),
			                 "missing required key '%s' in section '%s'", key->name,
			                 section);
	}
	return 0;
}

size_t conf_key_line(conf_loader_t *ld, const yaml_node_t *map, const char *name, size_t fallback)
{
	for (const yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		const yaml_node_t *k = conf_node(ld, p->key);
		if (k->type == YAML_SCALAR_NODE &&
		    strcmp((const char *)k->data.scalar.value, name) == 0)
			return conf_node_line(k);
	}
	return fallback;
}

/* "unknown key 'K' in section 'S'" and the nearest valid key, or the valid keys. */
static int unknown_key(conf_loader_t *ld, const yaml_node_t *k, const char *name,
                       const char *section)
{
	char hint[MSG_MAX] = "";
	conf_suggest_t sg;
	conf_suggest_init(&sg, name);
	for (size_t i = 0; i < conf_n_keys; i++) {
		if (strcmp(conf_keys[i].section, section) == 0)
			conf_suggest_add(&sg, conf_keys[i].name);
	}
	if (!conf_suggest_hint(&sg, hint, sizeof(hint))) {
		size_t used = (size_t)snprintf(hint, sizeof(hint), " (valid keys:");
		for (size_t i = 0; i < conf_n_keys && used < sizeof(hint); i++) {
			if (strcmp(conf_keys[i].section, section) == 0)
				used += (size_t)snprintf(hint + used, sizeof(hint) - used, "%s %s",
				                         hint[used - 1] == ':' ? "" : ",",
				                         conf_keys[i].name);
		}
		if (used < sizeof(hint))
			snprintf(hint + used, sizeof(hint) - used, ")");
	}
	return conf_fail(ld, conf_node_line(k), "unknown key '%s' in section '%s'%s", name, section,
	                 hint);
}

/* A key and its alias name one field: giving both is a contradiction, not an override. */
static int check_alias_twice(conf_loader_t *ld, const yaml_node_t *map,
                             const yaml_node_pair_t *pair, const conf_key_t *key)
{
	const conf_key_t *target = alias_target(key);
	for (const yaml_node_pair_t *p = map->data.mapping.pairs.start; p < pair; p++) {
		const yaml_node_t *k = conf_node(ld, p->key);
		if (k->type != YAML_SCALAR_NODE)
			continue;
		const conf_key_t *other =
		    conf_find_key(key->section, (const char *)k->data.scalar.value);
		if (other && other != key && alias_target(other) == target)
			return conf_fail(
			    ld, conf_node_line(conf_node(ld, pair->key)),
			    "%s: give either '%s' or '%s', not both (the first at line %zu)",
			    key->section, other->name, key->name, conf_node_line(k));
	}
	return 0;
}

/*
 * Call @p cb for each item of list @p node. A single value is a one-item list; null is an
 * empty list, an error unless @p allow_empty.
 */
const char *conf_item_text(conf_loader_t *ld, const char *what, const yaml_node_t *item, int *ret)
{
	if (item->type != YAML_SCALAR_NODE || conf_is_null(item)) {
		*ret =
		    conf_fail(ld, conf_node_line(item),
		              "%s: list items must be single values (quote IPv6 addresses)", what);
		return NULL;
	}
	const char *text = (const char *)item->data.scalar.value;
	if (strlen(text) != item->data.scalar.length) {
		*ret = conf_fail(ld, conf_node_line(item), "%s: value contains a NUL byte", what);
		return NULL;
	}
	return text;
}

int conf_for_each_item(conf_loader_t *ld, const char *what, const yaml_node_t *node,
                       bool allow_empty, conf_item_cb cb, void *ctx)
{
	if (conf_is_null(node) ||
	    (node->type == YAML_SEQUENCE_NODE &&
	     node->data.sequence.items.start == node->data.sequence.items.top)) {
		if (allow_empty)
			return 0;
		return conf_fail(ld, conf_node_line(node), "%s: needs at least one value", what);
	}
	if (node->type == YAML_SCALAR_NODE)
		return cb(ld, what, node, ctx);
	if (node->type != YAML_SEQUENCE_NODE)
		return conf_fail(ld, conf_node_line(node), "%s: expected a list, got %s", what,
		                 conf_kind_name(node));
	for (const yaml_node_item_t *it = node->data.sequence.items.start;
	     it < node->data.sequence.items.top; it++) {
		int ret = cb(ld, what, conf_node(ld, *it), ctx);
		if (ret != 0)
			return ret;
	}
	return 0;
}

int conf_for_each_named(conf_loader_t *ld, const char *section, const yaml_node_t *node,
                        const char *what, const char *keys, conf_named_cb cb, void *ctx)
{
	if (conf_is_null(node))
		return 0;
	if (node->type != YAML_MAPPING_NODE)
		return conf_fail(ld, conf_node_line(node),
		                 "section '%s' must be a mapping of %s, got %s", section, what,
		                 conf_kind_name(node));
	for (const yaml_node_pair_t *p = node->data.mapping.pairs.start;
	     p < node->data.mapping.pairs.top; p++) {
		int ret = 0;
		const yaml_node_t *k = conf_node(ld, p->key), *v = conf_node(ld, p->value);
		const char *name = conf_key_text(ld, k, &ret);
		if (!name)
			return ret;
		ret = conf_check_duplicate_key(ld, node, p, name, section);
		if (ret != 0)
			return ret;
		if (v->type != YAML_MAPPING_NODE)
			return conf_fail(
			    ld, conf_node_line(v), "%s.%s: expected a mapping of keys (%s), got %s",
			    section, name, keys, conf_is_null(v) ? "nothing" : conf_kind_name(v));
		ret = cb(ld, name, k, v, ctx);
		if (ret != 0)
			return ret;
	}
	return 0;
}

int conf_scalar_text(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *node,
                     const char **out)
{
	if (node->type != YAML_SCALAR_NODE)
		return conf_fail(ld, conf_node_line(node), "%s.%s: expected a single value, got %s",
		                 key->section, key->name, conf_kind_name(node));
	if (conf_is_null(node))
		return conf_fail(ld, conf_node_line(node), "%s.%s: needs a value", key->section,
		                 key->name);
	const char *text = (const char *)node->data.scalar.value;
	if (strlen(text) != node->data.scalar.length)
		return conf_fail(ld, conf_node_line(node), "%s.%s: value contains a NUL byte",
		                 key->section, key->name);
	*out = text;
	return 0;
}

int conf_load_keys(conf_loader_t *ld, const char *section, void *base, const yaml_node_t *map,
                   conf_node_cb cb, void *ctx)
{
	int ret = 0;
	for (const yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		const yaml_node_t *k = conf_node(ld, p->key);
		const char *name = conf_key_text(ld, k, &ret);
		if (!name)
			return ret;
		ret = conf_check_duplicate_key(ld, map, p, name, section);
		if (ret != 0)
			return ret;
		const conf_key_t *key = conf_find_key(section, name);
		if (!key)
			return unknown_key(ld, k, name, section);
		ret = check_alias_twice(ld, map, p, key);
		if (ret != 0)
			return ret;
		const yaml_node_t *value = conf_node(ld, p->value);
		if (key->type == CONF_TYPE_NODE) {
			STEER_ASSERT(cb);
			ret = cb(ld, key, base, value, ctx);
		} else {
			ret = key_value(ld, key, base, value);
		}
		if (ret != 0)
			return ret;
		if (key == conf_find_key("server", "listen"))
			ld->conf->listen_is_default = false;
	}
	return check_required(ld, section, map);
}

static int load_mapping(conf_loader_t *ld, const char *section, void *base, const yaml_node_t *map)
{
	return conf_load_keys(ld, section, base, map, NULL, NULL);
}

static int load_zone(conf_loader_t *ld, const yaml_node_t *item, size_t index)
{
	conf_zone_t zone = {0};
	if (item->type != YAML_MAPPING_NODE)
		return conf_fail(
		    ld, conf_node_line(item),
		    "zones: each zone must be a mapping (- domain: NAME, file: PATH), got %s",
		    conf_kind_name(item));
	conf_apply_defaults("zones", &zone);
	zone.line = (unsigned)conf_node_line(item);
	int ret = conf_load_keys(ld, "zones", &zone, item, conf_xfr_zone_node, NULL);
	if (ret == 0)
		ret = conf_xfr_zone_check(ld, &zone, item);
	if (ret != 0) {
		conf_free_fields("zones", &zone);
		conf_xfr_zone_free(&zone);
		return ret;
	}
	zone_append(ld->conf, &zone);
	ld->zone_lines[index] = conf_node_line(item);
	return 0;
}

static int load_zones(conf_loader_t *ld, const conf_section_t *sec, const yaml_node_t *node)
{
	if (node->type != YAML_SEQUENCE_NODE && !conf_is_null(node))
		return conf_fail(ld, conf_node_line(node),
		                 "section 'zones' must be a list of zones (- domain: NAME), got %s",
		                 conf_kind_name(node));
	const yaml_node_item_t *start = NULL, *top = NULL;
	if (node->type == YAML_SEQUENCE_NODE) {
		start = node->data.sequence.items.start;
		top = node->data.sequence.items.top;
	}
	if (start == top && (sec->flags & CONF_F_NONEMPTY) && !ld->zones_optional)
		return conf_fail(ld, conf_node_line(node),
		                 "section 'zones' needs at least one zone");
	ld->zone_lines = xcalloc((size_t)(top - start), sizeof(size_t));
	for (const yaml_node_item_t *it = start; it < top; it++) {
		int ret = load_zone(ld, conf_node(ld, *it), (size_t)(it - start));
		if (ret != 0)
			return ret;
	}
	size_t first, dup;
	if (find_duplicate_zone(ld->conf, &first, &dup))
		return conf_fail(ld, ld->zone_lines[dup],
		                 "duplicate zone '%s' (first defined at line %zu)",
		                 ld->conf->zones[dup].domain, ld->zone_lines[first]);
	return 0;
}

static int load_section(conf_loader_t *ld, const yaml_node_t *k, const yaml_node_t *v)
{
	const char *name = (const char *)k->data.scalar.value;
	const conf_section_t *sec = find_section(name);
	if (!sec || sec->nested) {
		char expected[256] = "", hint[128] = "";
		size_t used = 0;
		conf_suggest_t sg;
		conf_suggest_init(&sg, name);
		for (size_t i = 0; i < conf_n_sections && used < sizeof(expected); i++) {
			if (conf_sections[i].nested)
				continue;
			used += (size_t)snprintf(expected + used, sizeof(expected) - used, "%s%s",
			                         used ? ", " : "", conf_sections[i].name);
			conf_suggest_add(&sg, conf_sections[i].name);
		}
		if (conf_suggest_hint(&sg, hint, sizeof(hint)))
			return conf_fail(ld, conf_node_line(k), "unknown section '%s'%s", name,
			                 hint);
		return conf_fail(ld, conf_node_line(k), "unknown section '%s' (expected %s)", name,
		                 expected);
	}
	if (sec->load)
		return 0; /* after every other section: see load_root() */
	if (sec->is_list)
		return load_zones(ld, sec, v);
	if (conf_is_null(v))
		return 0;
	if (v->type != YAML_MAPPING_NODE)
		return conf_fail(ld, conf_node_line(v),
		                 "section '%s' must be a mapping of keys, got %s", name,
		                 conf_kind_name(v));
	return load_mapping(ld, name, ld->conf, v);
}

static int check_required_sections(conf_loader_t *ld, const yaml_node_t *root)
{
	for (size_t i = 0; i < conf_n_sections; i++) {
		const conf_section_t *sec = &conf_sections[i];
		if (!(sec->flags & CONF_F_REQUIRED))
			continue;
		if (ld->zones_optional && strcmp(sec->name, "zones") == 0)
			continue; /* checked once `forward` is loaded: see load_root() */
		if (!root || !mapping_has_key(ld, root, sec->name))
			return conf_fail(ld, root ? conf_node_line(root) : 1,
			                 "missing required section '%s'", sec->name);
	}
	return 0;
}

/* The identity and version go into TXT records, NSID options and logs: printable ASCII only. */
static int check_printable(conf_loader_t *ld, const yaml_node_t *root, const char *name,
                           const char *id)
{
	for (const char *p = id; p && *p; p++) {
		if (*p < 0x20 || *p > 0x7e) {
			size_t line = conf_node_line(root);
			for (const yaml_node_pair_t *q = root->data.mapping.pairs.start;
			     q < root->data.mapping.pairs.top; q++) {
				const yaml_node_t *k = conf_node(ld, q->key),
				                  *v = conf_node(ld, q->value);
				if (strcmp((const char *)k->data.scalar.value, "server") == 0 &&
				    v->type == YAML_MAPPING_NODE)
					line = conf_key_line(ld, v, name, line);
			}
			return conf_fail(ld, line,
			                 "server.%s: '%s' may only contain printable ASCII "
			                 "characters",
			                 name, id);
		}
	}
	return 0;
}

static int load_root(conf_loader_t *ld, const yaml_node_t *root)
{
	int ret = 0;
	if (!root || conf_is_null(root))
		return check_required_sections(ld, NULL);
	if (root->type != YAML_MAPPING_NODE)
		return conf_fail(ld, conf_node_line(root),
		                 "the top level must be a mapping of sections, got %s",
		                 conf_kind_name(root));
	ld->zones_optional = mapping_has_key(ld, root, "forward");
	for (const yaml_node_pair_t *p = root->data.mapping.pairs.start;
	     p < root->data.mapping.pairs.top; p++) {
		const yaml_node_t *k = conf_node(ld, p->key);
		if (!conf_key_text(ld, k, &ret))
			return ret;
		ret =
		    conf_check_duplicate_key(ld, root, p, (const char *)k->data.scalar.value, NULL);
		if (ret == 0)
			ret = load_section(ld, k, conf_node(ld, p->value));
		if (ret != 0)
			return ret;
	}
	ret = check_required_sections(ld, root);
	if (ret == 0)
		ret = check_printable(ld, root, "identity", ld->conf->identity);
	if (ret == 0)
		ret = check_printable(ld, root, "version", ld->conf->version);
	/*
	 * Sections with their own loader (GSLB) refer to zones and to each other by name, so they
	 * load last, in table order (datacenters, maps, services, ...), wherever they stand.
	 */
	for (size_t i = 0; i < conf_n_sections && ret == 0; i++) {
		const conf_section_t *sec = &conf_sections[i];
		if (!sec->load || sec->nested)
			continue;
		for (const yaml_node_pair_t *p = root->data.mapping.pairs.start;
		     p < root->data.mapping.pairs.top && ret == 0; p++) {
			const yaml_node_t *k = conf_node(ld, p->key);
			if (strcmp((const char *)k->data.scalar.value, sec->name) == 0)
				ret = sec->load(ld, conf_node(ld, p->value));
		}
	}
	if (ret == 0)
		ret = conf_keys_check_refs(ld);
	if (ret == 0)
		ret = conf_xfr_finish(ld);
	/* A forwarder needs no zones, but a server must serve something. */
	if (ret == 0 && ld->zones_optional && ld->conf->n_zones == 0 &&
	    ld->conf->forward.n_groups == 0)
		ret = conf_fail(ld, conf_key_line(ld, root, "forward", conf_node_line(root)),
		                "nothing to serve: no zones, and no forward groups");
	return ret;
}

/* libyaml reports reader (encoding) errors as a byte offset only. */
static size_t line_of_offset(FILE *in, size_t offset)
{
	size_t line = 1;
	int c;
	rewind(in);
	for (size_t i = 0; i < offset && (c = getc(in)) != EOF; i++)
		line += c == '\n';
	return line;
}

/* Line @p line (1-based) of the input, truncated to @p size; empty when past the end. */
static void read_line(FILE *in, size_t line, char *buf, size_t size)
{
	size_t cur = 1;
	int c;
	rewind(in);
	while (cur < line && (c = getc(in)) != EOF)
		cur += c == '\n';
	if (!fgets(buf, (int)size, in))
		buf[0] = '\0';
}

/* An unquoted "[::1]:53" starts a YAML flow list; libyaml's message does not say so. */
static bool has_bare_ipv6(const char *text)
{
	for (const char *p = strchr(text, '['); p; p = strchr(p + 1, '[')) {
		if (p > text && (p[-1] == '"' || p[-1] == '\''))
			continue;
		size_t len = strspn(p + 1, "0123456789abcdefABCDEF:.");
		const char *q = p + 1;
		unsigned colons = 0;
		for (size_t i = 0; i < len; i++)
			colons += q[i] == ':';
		if (q[len] == ']' && colons >= 2)
			return true;
	}
	return false;
}

/* The two most common YAML mistakes in a config file, which libyaml's messages hide. */
static const char *syntax_hint(FILE *in, size_t line)
{
	char text[512];
	read_line(in, line, text, sizeof(text));
	if (text[strspn(text, " ")] == '\t')
		return " (indent with spaces, not tabs)";
	if (has_bare_ipv6(text))
		return " (quote IPv6 addresses: \"[::1]:53\")";
	return "";
}

static int yaml_error(conf_loader_t *ld, const yaml_parser_t *parser)
{
	const char *problem = parser->problem ? parser->problem : "unreadable input";
	size_t line = parser->problem_mark.line + 1;
	if (parser->error == YAML_READER_ERROR)
		return conf_fail(ld, line_of_offset(ld->in, parser->problem_offset),
		                 "invalid YAML: %s", problem);
	const char *hint = syntax_hint(ld->in, line);
	if (parser->context)
		return conf_fail(ld, line, "invalid YAML: %s %s that started at line %zu%s",
		                 problem, parser->context, parser->context_mark.line + 1, hint);
	return conf_fail(ld, line, "invalid YAML: %s%s", problem, hint);
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return NULL;
	if (slash == path)
		return xstrdup("/");
	char *dir = xmalloc((size_t)(slash - path) + 1);
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	return dir;
}

/* Parse the first document; a second one is refused since it would be silently ignored. */
static int load_document(conf_loader_t *ld, yaml_parser_t *parser)
{
	yaml_document_t doc, extra;
	if (!yaml_parser_load(parser, &doc))
		return yaml_error(ld, parser);
	ld->doc = &doc;
	int ret = load_root(ld, yaml_document_get_root_node(&doc));
	ld->doc = NULL;
	yaml_document_delete(&doc);
	if (ret != 0)
		return ret;
	if (!yaml_parser_load(parser, &extra))
		return yaml_error(ld, parser);
	yaml_node_t *more = yaml_document_get_root_node(&extra);
	if (more)
		ret = conf_fail(ld, conf_node_line(more),
		                "only one YAML document is allowed per file");
	yaml_document_delete(&extra);
	return ret;
}

int conf_load_file(const char *path, conf_t **out, char *err, size_t errlen)
{
	conf_loader_t ld = {.file = path, .err = err, .errlen = errlen};
	yaml_parser_t parser;
	int ret;

	*out = NULL;
	struct stat st;
	FILE *f = fopen(path, "r");
	if (f && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		f = NULL;
		errno = EISDIR;
	}
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return STEER_ECONF;
	}
	STEER_ASSERT(yaml_parser_initialize(&parser));
	yaml_parser_set_input_file(&parser, f);
	ld.in = f;
	ld.dir = dir_of(path);
	ld.conf = conf_new_default();
	ld.conf->path = xstrdup(path);

	ret = load_document(&ld, &parser);
	if (ret == 0) {
		char msg[MSG_MAX];
		ret = conf_validate(ld.conf, msg, sizeof(msg));
		if (ret != 0)
			snprintf(err, errlen, "%s: %s", path, msg);
	}
	yaml_parser_delete(&parser);
	fclose(f);
	free(ld.dir);
	free(ld.zone_lines);
	if (ret != 0) {
		conf_free(ld.conf);
		return STEER_ECONF;
	}
	*out = ld.conf;
	return 0;
}

/* ---- quick mode and queries --------------------------------------------------------------- */

conf_t *conf_new_default(void)
{
	conf_t *conf = xcalloc(1, sizeof(*conf));
	conf_apply_defaults("server", conf);
	conf_apply_defaults("log", conf);
	conf_apply_defaults("forward", &conf->forward);
	conf_apply_defaults("forward.cache", &conf->forward);
	conf_apply_defaults("http", &conf->http);
	conf_apply_defaults("dnstap", &conf->dnstap);
	conf_apply_defaults("stats-snapshots", &conf->snapshots);
	conf_apply_defaults("decision-log", &conf->decision_log);
	conf->dnstap.messages = CONF_DNSTAP_AUTH_QUERY | CONF_DNSTAP_AUTH_RESPONSE;
	conf_hardening_defaults(conf);
	conf->listen_is_default = true;
	return conf;
}

conf_t *conf_new_quick(void)
{
	conf_t *conf = conf_new_default();
	/* The default folder is the production daemon's: its journals are not ours to touch. */
	free(conf->storage);
	conf->storage = NULL;
	return conf;
}

int conf_add_listen(conf_t *conf, const char *text, char *err, size_t errlen)
{
	const conf_key_t *key = conf_find_key("server", "listen");
	STEER_ASSERT(key);
	if (conf->listen_is_default) {
		list_clear(conf, key);
		conf->listen_is_default = false;
	}
	return value_parse(key, conf, text, NULL, err, errlen) == 0 ? 0 : STEER_EINVAL;
}

int conf_add_zone_arg(conf_t *conf, const char *arg, char *err, size_t errlen)
{
	char msg[MSG_MAX];
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || eq[1] == '\0') {
		snprintf(err, errlen, "expected DOMAIN=FILE, got '%s'", arg);
		return STEER_EINVAL;
	}
	char *domain = xmalloc((size_t)(eq - arg) + 1);
	memcpy(domain, arg, (size_t)(eq - arg));
	domain[eq - arg] = '\0';

	conf_zone_t zone = {0};
	int ret = 0;
	conf_apply_defaults("zones", &zone);
	if (value_parse(conf_find_key("zones", "domain"), &zone, domain, NULL, msg, sizeof(msg)) !=
	        0 ||
	    value_parse(conf_find_key("zones", "file"), &zone, eq + 1, NULL, msg, sizeof(msg)) !=
	        0) {
		snprintf(err, errlen, "%s", msg);
		conf_free_fields("zones", &zone);
		ret = STEER_EINVAL;
		goto out;
	}
	zone_append(conf, &zone);
	size_t first, dup;
	if (find_duplicate_zone(conf, &first, &dup)) {
		snprintf(err, errlen, "duplicate zone '%s'", domain);
		zone_drop_last(conf);
		ret = STEER_EINVAL;
	}
out:
	free(domain);
	return ret;
}

int conf_validate(const conf_t *conf, char *err, size_t errlen)
{
	if (conf->n_listen == 0) {
		snprintf(err, errlen, "no listen address configured");
		return STEER_ECONF;
	}
	if (conf->n_zones == 0 && conf->forward.n_groups == 0) {
		snprintf(err, errlen, "no zones configured (and no forward groups)");
		return STEER_ECONF;
	}
	for (size_t i = 0; i < conf->n_zones; i++) {
		if (!conf->zones[i].domain || !conf->zones[i].file) {
			snprintf(err, errlen, "zone %zu lacks a domain or a file", i + 1);
			return STEER_ECONF;
		}
	}
	return conf_forward_validate(conf, err, errlen);
}

const conf_zone_t *conf_find_zone(const conf_t *conf, const char *domain)
{
	uint8_t want[DNS_DNAME_MAXLEN], have[DNS_DNAME_MAXLEN];
	if (dname_from_str(domain, want) < 0)
		return NULL;
	for (size_t i = 0; i < conf->n_zones; i++) {
		if (dname_from_str(conf->zones[i].domain, have) > 0 && dname_equal(want, have))
			return &conf->zones[i];
	}
	return NULL;
}

static bool value_equal(const conf_key_t *key, const void *a, const void *b)
{
	if (is_list_type(key->type)) {
		size_t n = list_ccount(a, key);
		if (n != list_ccount(b, key))
			return false;
		const void *x = *(void *const *)cfield(a, key), *y = *(void *const *)cfield(b, key);
		return n == 0 || memcmp(x, y, n * elem_size(key->type)) == 0;
	}
	if (is_string_type(key->type)) {
		const char *x = *(char *const *)cfield(a, key), *y = *(char *const *)cfield(b, key);
		return (!x && !y) || (x && y && strcmp(x, y) == 0);
	}
	if (key->type == CONF_TYPE_UINT && key->size == sizeof(uint16_t))
		return *(const uint16_t *)cfield(a, key) == *(const uint16_t *)cfield(b, key);
	if (key->type == CONF_TYPE_UINT || key->type == CONF_TYPE_DURATION)
		return *(const unsigned *)cfield(a, key) == *(const unsigned *)cfield(b, key);
	if (key->type == CONF_TYPE_SIZE)
		return *(const uint64_t *)cfield(a, key) == *(const uint64_t *)cfield(b, key);
	if (key->type == CONF_TYPE_BOOL ||
	    (key->type == CONF_TYPE_ENUM && key->size == sizeof(bool)))
		return *(const bool *)cfield(a, key) == *(const bool *)cfield(b, key);
	return *(const int *)cfield(a, key) == *(const int *)cfield(b, key);
}

/* Append ",NAME"; once a name does not fit, nothing more is (whole names, in order). */
static void restart_append(char *buf, size_t size, size_t *used, const char *section,
                           const char *name)
{
	if (*used == SIZE_MAX)
		return;
	int n = snprintf(buf + *used, size - *used, "%s%s%s%s", *used ? "," : "",
	                 section ? section : "", section ? "." : "", name);
	if (n < 0 || (size_t)n >= size - *used) {
		buf[*used] = '\0';
		*used = SIZE_MAX;
		return;
	}
	*used += (size_t)n;
}

static bool str_same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The forwarding groups, upstreams and probe settings of @p a and @p b are the same. */
static bool forward_groups_equal(const conf_forward_t *a, const conf_forward_t *b)
{
	if (a->n_groups != b->n_groups)
		return false;
	for (size_t g = 0; g < a->n_groups; g++) {
		const conf_fwd_group_t *x = &a->groups[g], *y = &b->groups[g];
		if (!str_same(x->domain, y->domain) || !str_same(x->policy, y->policy) ||
		    !str_same(x->probe_name, y->probe_name) ||
		    x->probe_interval != y->probe_interval ||
		    x->probe_timeout != y->probe_timeout || x->probe_fall != y->probe_fall ||
		    x->probe_rise != y->probe_rise || x->probe_hold_down != y->probe_hold_down ||
		    x->retry_timeout != y->retry_timeout ||
		    x->retry_adaptive != y->retry_adaptive || x->n_upstreams != y->n_upstreams)
			return false;
		for (size_t i = 0; i < x->n_upstreams; i++) {
			const conf_upstream_t *u = &x->upstreams[i], *v = &y->upstreams[i];
			if (!str_same(u->name, v->name) || !str_same(u->link, v->link) ||
			    memcmp(&u->address, &v->address, sizeof(u->address)) != 0 ||
			    memcmp(&u->source, &v->source, sizeof(u->source)) != 0)
				return false;
		}
	}
	return true;
}

/* The struct holding the keys of an operations section (one mapping each), or NULL. */
static const void *ops_section(const conf_t *conf, const char *section)
{
	if (strcmp(section, "http") == 0)
		return &conf->http;
	if (strcmp(section, "dnstap") == 0)
		return &conf->dnstap;
	if (strcmp(section, "stats-snapshots") == 0)
		return &conf->snapshots;
	if (strcmp(section, "decision-log") == 0)
		return &conf->decision_log;
	return NULL;
}

void conf_restart_only_changes(const conf_t *old, const conf_t *new, char *buf, size_t size)
{
	size_t used = 0;
	if (size > 0)
		buf[0] = '\0';
	bool clusters = old->cluster.enabled && new->cluster.enabled;
	for (size_t i = 0; i < conf_n_keys && size > 0; i++) {
		const conf_key_t *key = &conf_keys[i];
		if (!(key->flags & CONF_F_RESTART) || (key->flags & CONF_F_ALIAS))
			continue;
		/* the keeper process and the holder interface are set up once, at start */
		bool clu = strncmp(key->section, "cluster", 7) == 0;
		if (clu && clusters &&
		    (key->type == CONF_TYPE_NODE
		         ? !conf_cluster_node_equal(key, &old->cluster, &new->cluster)
		         : !value_equal(key, &old->cluster, &new->cluster)))
			restart_append(buf, size, &used, key->section, key->name);
		if (key->type == CONF_TYPE_NODE)
			continue;
		bool top = strcmp(key->section, "server") == 0 || strcmp(key->section, "log") == 0;
		bool fwd = strcmp(key->section, "forward") == 0 ||
		           strcmp(key->section, "forward.cache") == 0;
		if (top && !value_equal(key, old, new))
			restart_append(buf, size, &used, NULL, key->name);
		/* the forwarder's engine and cache are built once, at start */
		if (fwd && !value_equal(key, &old->forward, &new->forward))
			restart_append(buf, size, &used, key->section, key->name);
		const void *ops_old = ops_section(old, key->section),
		           *ops_new = ops_section(new, key->section);
		if (ops_old && !value_equal(key, ops_old, ops_new))
			restart_append(buf, size, &used, key->section, key->name);
		/* other sections are not keys of conf_t; GSLB reloads */
	}
	for (size_t i = 0; i < conf_n_keys && size > 0; i++) {
		const conf_key_t *key = &conf_keys[i];
		bool ops = strcmp(key->section, "http") == 0 || strcmp(key->section, "dnstap") == 0;
		if (ops && key->type == CONF_TYPE_NODE && !conf_ops_node_equal(key, old, new))
			restart_append(buf, size, &used, key->section, key->name);
	}
	if (size > 0 && !conf_alerts_equal(old, new))
		restart_append(buf, size, &used, NULL, "alerts");
	if (size > 0 && !forward_groups_equal(&old->forward, &new->forward))
		restart_append(buf, size, &used, NULL, "forward.groups");
	if (size > 0 && old->cluster.enabled != new->cluster.enabled)
		restart_append(buf, size, &used, NULL, "cluster");
}

const char *conf_identity(const conf_t *conf)
{
	if (conf->identity)
		return conf->identity;
	return conf->cluster.enabled ? conf->cluster.node_id : NULL;
}

void conf_free(conf_t *conf)
{
	if (!conf)
		return;
	for (size_t i = 0; i < conf->n_zones; i++) {
		conf_free_fields("zones", &conf->zones[i]);
		conf_xfr_zone_free(&conf->zones[i]);
	}
	free(conf->zones);
	conf_free_fields("server", conf);
	conf_free_fields("log", conf);
	conf_gslb_free(conf);
	conf_health_free(conf);
	conf_forward_free(conf);
	conf_cluster_free(conf);
	conf_ops_free(conf);
	conf_paths_free(conf);
	conf_keys_free(conf);
	conf_hardening_free(conf);
	free(conf->path);
	free(conf);
}
