/*
 * Nets entries of one map with provenance and guard rails (see nets_set.h). Control thread;
 * the set is immutable once built.
 */
#include "gslb/nets_set.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/err.h"
#include "gslb/nets_file.h"

struct gslb_nets_set {
	gslb_nets_source_t *sources; /* owned, config order */
	size_t n_sources;
	gslb_nets_item_t *items; /* owned, sorted by (family, address, length, place) */
	size_t n_items, cap;
	char *conf_path; /* owned */
};

/* While one entry is read. */
typedef struct {
	gslb_nets_set_t *set;
	const gslb_nets_opts_t *opts;
	uint32_t source;
	char *err;
	size_t errlen;
} load_t;

static const char *conf_name(const gslb_nets_opts_t *opts)
{
	return opts->conf_path ? opts->conf_path : "config";
}

static void prefix_str(const steer_prefix_t *p, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];
	if (!inet_ntop(p->family, p->addr, a, sizeof(a)))
		snprintf(a, sizeof(a), "?");
	snprintf(buf, len, "%s/%u", a, p->len);
}

/* ::ffff:a.b.c.d/(96+n) is a.b.c.d/n: the tree answers mapped addresses from the IPv4 side. */
static void normalize(steer_prefix_t *p)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (p->family != AF_INET6 || p->len < 96 || memcmp(p->addr, mapped, 12) != 0)
		return;
	uint8_t v4[4];
	memcpy(v4, p->addr + 12, 4);
	memset(p->addr, 0, sizeof(p->addr));
	memcpy(p->addr, v4, 4);
	p->family = AF_INET;
	p->len = (uint8_t)(p->len - 96);
}

/* "nets/unicom.txt:4" or "steer.yaml:12" into @p buf. */
static void place_str(const gslb_nets_set_t *set, uint32_t source, unsigned line, char *buf,
                      size_t len)
{
	const gslb_nets_source_t *s = &set->sources[source];
	snprintf(buf, len, "%s:%u", s->path ? s->path : set->conf_path, line);
}

/* Add one prefix of the current entry; the min-prefix-length guard applies here. */
static int add_prefix(load_t *ld, const steer_prefix_t *prefix, unsigned line)
{
	gslb_nets_set_t *set = ld->set;
	gslb_nets_source_t *src = &set->sources[ld->source];
	steer_prefix_t p = *prefix;
	normalize(&p);
	unsigned min = p.family == AF_INET ? ld->opts->min4 : ld->opts->min6;
	if (p.len < min && !src->allow_short_prefixes) {
		char text[INET6_ADDRSTRLEN + 8], where[512];
		prefix_str(prefix, text, sizeof(text));
		place_str(set, ld->source, line, where, sizeof(where));
		snprintf(
		    ld->err, ld->errlen,
		    "%s: %s%s is shorter than map %s's minimum /%u for %s (min-prefix-length); "
		    "allow it with allow-short-prefixes: true on this nets entry",
		    where, src->path ? "" : "inline cidr ", text, ld->opts->map, min,
		    p.family == AF_INET ? "IPv4" : "IPv6");
		return GSLB_NETS_CB_FAIL;
	}
	if (set->n_items == set->cap) {
		set->cap = set->cap ? set->cap * 2 : 64;
		set->items = xrealloc(set->items, set->cap * sizeof(*set->items));
	}
	set->items[set->n_items++] = (gslb_nets_item_t){
	    .prefix = p, .value = src->value, .source = ld->source, .line = line};
	if (p.family == AF_INET)
		src->n4++;
	else
		src->n6++;
	return 0;
}

static int file_cb(void *ctx, const steer_prefix_t *prefix, unsigned line)
{
	return add_prefix(ctx, prefix, line);
}

static const gslb_nets_source_t *running_source(const gslb_nets_set_t *running, const char *path)
{
	if (!running)
		return NULL;
	for (size_t i = 0; i < running->n_sources; i++)
		if (running->sources[i].path && strcmp(running->sources[i].path, path) == 0)
			return &running->sources[i];
	return NULL;
}

/*
 * The count to compare @p src with: the same file in the running set, else the baseline of the
 * last accepted load; false when neither has it. @p whence names the one used, for messages.
 */
static bool shrink_reference(const gslb_nets_source_t *src, const gslb_nets_opts_t *opts,
                             size_t *before, bool *running)
{
	const gslb_nets_source_t *old = running_source(opts->running, src->path);
	*running = old != NULL;
	if (old) {
		*before = old->n4 + old->n6;
		return true;
	}
	return gslb_nets_baseline_find(opts->baseline, opts->map, src->path, before);
}

/* The shrink guard of one file (see nets_set.h). */
static int check_shrink(const gslb_nets_set_t *set, const gslb_nets_source_t *src,
                        const gslb_nets_opts_t *opts, steer_warnings_t *warnings, char *err,
                        size_t errlen)
{
	size_t now = src->n4 + src->n6;
	size_t before = 0;
	bool running = false;
	if (!shrink_reference(src, opts, &before, &running) || before == 0) {
		if (now == 0)
			steer_warnings_add(warnings, "%s:%u: map %s: nets file %s is empty",
			                   set->conf_path, src->conf_line, opts->map, src->path);
		return 0;
	}
	if (now >= before)
		return 0;
	/* lost/before > max/100, in integers */
	size_t lost = before - now;
	if (now > 0 && lost * 100 <= (size_t)opts->max_shrink * before)
		return 0;
	unsigned pct = (unsigned)(lost * 100 / before);
	const char *whence = running ? "the running configuration has"
	                             : "the last accepted load (nets-state-file) had";
	char what[256];
	if (now == 0)
		snprintf(what, sizeof(what), "is empty, %s %zu prefixes", whence, before);
	else
		snprintf(what, sizeof(what),
		         "has %zu prefixes, %s %zu (lost %u%%, more than max-shrink %u%%)", now,
		         whence, before, pct, opts->max_shrink);
	if (src->allow_shrink || opts->force) {
		steer_warnings_add(warnings, "%s:%u: map %s: nets file %s %s: accepted (%s)",
		                   set->conf_path, src->conf_line, opts->map, src->path, what,
		                   src->allow_shrink ? "allow-shrink" : "--force");
		return 0;
	}
	if (running)
		snprintf(
		    err, errlen,
		    "%s:%u: map %s: nets file %s %s: reload refused, the running configuration "
		    "keeps serving; check the file, then accept it with 'steerctl reload "
		    "--force' or allow-shrink: true on this nets entry",
		    set->conf_path, src->conf_line, opts->map, src->path, what);
	else
		snprintf(err, errlen,
		         "%s:%u: map %s: nets file %s %s: refused; check the file, then accept it "
		         "with 'steerd --force' (or 'steerctl reload --force' on a running daemon) "
		         "or allow-shrink: true on this nets entry",
		         set->conf_path, src->conf_line, opts->map, src->path, what);
	return STEER_ECONF;
}

static int item_cmp(const void *a, const void *b)
{
	const gslb_nets_item_t *x = a, *y = b;
	if (x->prefix.family != y->prefix.family)
		return x->prefix.family < y->prefix.family ? -1 : 1;
	int c = memcmp(x->prefix.addr, y->prefix.addr, sizeof(x->prefix.addr));
	if (c != 0)
		return c;
	if (x->prefix.len != y->prefix.len)
		return x->prefix.len < y->prefix.len ? -1 : 1;
	if (x->source != y->source)
		return x->source < y->source ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static bool same_prefix(const gslb_nets_item_t *x, const gslb_nets_item_t *y)
{
	return x->prefix.family == y->prefix.family && x->prefix.len == y->prefix.len &&
	       memcmp(x->prefix.addr, y->prefix.addr, sizeof(x->prefix.addr)) == 0;
}

/* Sort, then the duplicate check: each run of equal prefixes is compared with its first. */
static int check_duplicates(gslb_nets_set_t *set, const gslb_nets_opts_t *opts,
                            steer_warnings_t *warnings, char *err, size_t errlen)
{
	if (set->n_items > 1)
		qsort(set->items, set->n_items, sizeof(*set->items), item_cmp);
	size_t first = 0;
	for (size_t i = 1; i < set->n_items; i++) {
		const gslb_nets_item_t *a = &set->items[first], *b = &set->items[i];
		if (!same_prefix(a, b)) {
			first = i;
			continue;
		}
		char text[INET6_ADDRSTRLEN + 8], pa[512], pb[512];
		prefix_str(&b->prefix, text, sizeof(text));
		place_str(set, a->source, a->line, pa, sizeof(pa));
		place_str(set, b->source, b->line, pb, sizeof(pb));
		if (a->value != b->value) {
			snprintf(err, errlen,
			         "%s: map %s: %s is also at %s with a different datacenter list "
			         "(nets entries at %s lines %u and %u): keep one of them",
			         pb, opts->map, text, pa, set->conf_path,
			         set->sources[a->source].conf_line,
			         set->sources[b->source].conf_line);
			return STEER_ECONF;
		}
		steer_warnings_add(warnings, "%s: map %s: %s is also at %s (same datacenters)", pb,
		                   opts->map, text, pa);
	}
	return 0;
}

int gslb_nets_set_build(const conf_map_t *cm, const uint32_t *values, const gslb_nets_opts_t *opts,
                        steer_warnings_t *warnings, gslb_nets_set_t **out, char *err, size_t errlen)
{
	int ret = 0;
	*out = NULL;
	if (errlen)
		err[0] = '\0';
	gslb_nets_set_t *set = xcalloc(1, sizeof(*set));
	set->conf_path = xstrdup(conf_name(opts));
	set->sources = xcalloc(cm->n_nets + 1, sizeof(*set->sources));
	load_t ld = {.set = set, .opts = opts, .err = err, .errlen = errlen};
	for (size_t i = 0; i < cm->n_nets; i++) {
		const conf_nets_t *cn = &cm->nets[i];
		gslb_nets_source_t *src = &set->sources[i];
		set->n_sources = i + 1;
		*src = (gslb_nets_source_t){.path = xstrdup(cn->file),
		                            .conf_line = cn->line,
		                            .value = values[i],
		                            .allow_short_prefixes = cn->allow_short_prefixes,
		                            .allow_shrink = cn->allow_shrink};
		ld.source = (uint32_t)i;
		for (size_t j = 0; j < cn->n_cidr; j++) {
			ret = add_prefix(&ld, &cn->cidr[j], cn->line);
			if (ret == GSLB_NETS_CB_FAIL) {
				ret = STEER_ECONF;
				goto fail;
			}
		}
		src->loaded_at = time(NULL);
		if (!cn->file)
			continue;
		char msg[1024];
		ret = gslb_nets_file_read(cn->file, file_cb, &ld, NULL, msg, sizeof(msg));
		src->loaded_at = time(NULL);
		if (ret == STEER_ECONF)
			goto fail; /* add_prefix wrote the message */
		if (ret == STEER_ESYNTAX) {
			snprintf(err, errlen, "%s:%u: map %s: %s", set->conf_path, cn->line,
			         opts->map, msg);
			ret = STEER_ECONF;
			goto fail;
		}
		if (ret < 0) {
			snprintf(err, errlen, "%s:%u: map %s: nets file %s: %s", set->conf_path,
			         cn->line, opts->map, cn->file, steer_strerror(ret));
			goto fail;
		}
		ret = check_shrink(set, src, opts, warnings, err, errlen);
		if (ret < 0)
			goto fail;
	}
	ret = check_duplicates(set, opts, warnings, err, errlen);
	if (ret < 0)
		goto fail;
	*out = set;
	return 0;
fail:
	gslb_nets_set_free(set);
	return ret < 0 ? ret : STEER_ECONF;
}

void gslb_nets_set_free(gslb_nets_set_t *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n_sources; i++)
		free(set->sources[i].path);
	free(set->sources);
	free(set->items);
	free(set->conf_path);
	free(set);
}

int gslb_nets_set_apply(const gslb_nets_set_t *set, gslb_nettree_builder_t *b, size_t *bad)
{
	gslb_nettree_entry_t *e = xcalloc(set->n_items + 1, sizeof(*e));
	for (size_t i = 0; i < set->n_items; i++) {
		e[i].prefix = set->items[i].prefix;
		e[i].value = set->items[i].value;
	}
	int ret = gslb_nettree_set_nets(b, e, set->n_items, bad);
	free(e);
	return ret;
}

size_t gslb_nets_set_sources(const gslb_nets_set_t *set, const gslb_nets_source_t **out)
{
	*out = set->sources;
	return set->n_sources;
}

const gslb_nets_item_t *gslb_nets_set_lookup(const gslb_nets_set_t *set, int family,
                                             const uint8_t *addr, unsigned len)
{
	gslb_nets_item_t key = {.prefix = {.family = (sa_family_t)family}};
	unsigned bytes = family == AF_INET ? 4 : 16;
	memcpy(key.prefix.addr, addr, bytes);
	key.prefix.len = (uint8_t)(len > bytes * 8 ? bytes * 8 : len);
	normalize(&key.prefix);
	unsigned max = key.prefix.len;
	/* From the longest candidate down: mask, then binary-search the exact prefix. */
	for (int l = (int)max; l >= 0; l--) {
		gslb_nets_item_t k = key;
		k.prefix.len = (uint8_t)l;
		for (unsigned bit = (unsigned)l; bit < sizeof(k.prefix.addr) * 8; bit++)
			k.prefix.addr[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
		size_t lo = 0, hi = set->n_items;
		while (lo < hi) { /* first item not below k (source 0, line 0 sorts first) */
			size_t mid = lo + (hi - lo) / 2;
			gslb_nets_item_t probe = set->items[mid];
			if (item_cmp(&probe, &k) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < set->n_items && same_prefix(&set->items[lo], &k))
			return &set->items[lo];
	}
	return NULL;
}

void gslb_nets_set_describe(const gslb_nets_set_t *set, const gslb_nets_item_t *item, char *buf,
                            size_t len)
{
	char text[INET6_ADDRSTRLEN + 8], where[512];
	prefix_str(&item->prefix, text, sizeof(text));
	place_str(set, item->source, item->line, where, sizeof(where));
	snprintf(buf, len, "%s: %s%s", where, set->sources[item->source].path ? "" : "inline cidr ",
	         text);
}
