/*
 * Zone loading: libzscanner parses the master file and calls on_record() per record; each
 * record's rdata is appended to a flat buffer and a small fixed-size entry (node, type, TTL,
 * where it came from) to a record array. Nodes, every ancestor included, are created on first
 * sight of an owner, so node creation order already has parents before children. After the
 * parse, the record array is put in (node, type, input order) order, each group becomes one
 * rrset in the zone's arena (sorted and deduplicated), then flags, cuts and semantic checks
 * are applied. The temporaries are unmapped before returning.
 *
 * Runs on the control thread (or a loader thread); the zone it builds is not visible to any
 * other thread until zone_load() returns.
 */
#include <libzscanner/scanner.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "dns/dname.h"
#include "dns/names.h"
#include "zone/zone.h"
#include "zone/zone_int.h"

/* Warnings of one kind printed per load before the rest are only counted. */
#define WARN_LIMIT 10
/* $INCLUDE depth is bounded by libzscanner; the file table only needs a 16-bit index. */
#define MAX_SOURCES 65535

/* One parsed record; 24 bytes so a million of them are a 24 MB temporary. */
typedef struct {
	uint64_t off;  /* of its 2-byte rdlength in the raw buffer; increases in input order */
	uint32_t node; /* index into the node array */
	uint32_t ttl;
	uint32_t line;
	uint16_t type;
	uint16_t src; /* index into loader_t.srcs */
} load_rec_t;

typedef struct {
	zone_t *zone;
	struct zone_priv *priv;
	char *err;
	size_t errlen;
	bool failed;
	zone_vec_t recs;    /* load_rec_t[] */
	zone_vec_t raw;     /* rdlength + rdata, back to back, in input order */
	zone_vec_t parents; /* uint32_t[] parent node index per node */
	/* Last owner seen: zone files mostly list a name's records together. */
	uint8_t last_owner[DNS_DNAME_MAXLEN];
	size_t last_len;
	int64_t last_node; /* -1: outside the zone */
	/* Files records came from, for messages; [0] is the main file. */
	const char **srcs;
	size_t n_srcs;
	uint16_t cur_src;
	size_t n_outside;
	size_t n_warnings;
} loader_t;

/* The type's mnemonic (or TYPEn) for messages; @p buf holds at least 16 bytes. */
static const char *type_str(uint16_t type, char buf[16])
{
	return dns_type_str(type, buf, 16);
}

/* Record the first error as "where: message" and make every later callback stop the parse. */
static void fail(loader_t *ld, const char *where, uint64_t line, const char *fmt, ...)
    STEER_PRINTF(4, 5);
static void fail(loader_t *ld, const char *where, uint64_t line, const char *fmt, ...)
{
	if (ld->failed)
		return;
	ld->failed = true;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		snprintf(ld->err, ld->errlen, "%s:%llu: %s", where, (unsigned long long)line, msg);
	else
		snprintf(ld->err, ld->errlen, "%s: %s", where, msg);
}

/* A warning counted against the per-load limit; the overflow is summarised at the end. */
static void warn(size_t *counter, const char *fmt, ...) STEER_PRINTF(2, 3);
static void warn(size_t *counter, const char *fmt, ...)
{
	if ((*counter)++ >= WARN_LIMIT || !log_enabled(LOG_LEVEL_WARNING))
		return;
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warn("%s", msg);
}

static void lower(uint8_t *p, size_t len)
{
	/* Label length octets are <= 63, below 'A', so folding whole wire names is safe. */
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(p[i] + ((unsigned)(p[i] - 'A') < 26u) * ('a' - 'A'));
}

/* Offset where the suffix of @p len bytes starts in @p name at a label boundary, or -1. */
static int64_t suffix_at(const uint8_t *name, size_t name_len, size_t len)
{
	if (len > name_len)
		return -1;
	size_t off = 0;
	while (off < name_len - len)
		off += (size_t)name[off] + 1;
	return off == name_len - len ? (int64_t)off : -1;
}

static bool is_below(const uint8_t *name, size_t name_len, const uint8_t *parent, size_t parent_len)
{
	int64_t off = suffix_at(name, name_len, parent_len);
	return off >= 0 && memcmp(name + off, parent, parent_len) == 0;
}

static uint32_t n_nodes(const loader_t *ld)
{
	return (uint32_t)(ld->priv->nodes.used / sizeof(zone_node_t));
}

/* The node of @p name (lowercase, inside the zone), created with its missing ancestors. */
static uint32_t ensure_node(loader_t *ld, const uint8_t *name, size_t len)
{
	uint64_t hash = zone_name_hash(name, len);
	/* The index exists from the apex on; the apex itself is created into an empty one. */
	zone_node_t *found =
	    ld->priv->index_bits ? zone_index_find(ld->priv, name, len, hash) : NULL;
	if (found != NULL)
		return (uint32_t)(found - (zone_node_t *)ld->priv->nodes.data);

	uint32_t parent = UINT32_MAX;
	if (len != ld->zone->apex_len)
		parent = ensure_node(ld, name + name[0] + 1, len - name[0] - 1u);
	uint32_t idx = n_nodes(ld);
	uint8_t *owner = zone_arena_alloc(&ld->priv->arena, len, 1);
	memcpy(owner, name, len);
	zone_node_t *nodes = zone_vec_reserve(&ld->priv->nodes, sizeof(zone_node_t));
	nodes[idx] = (zone_node_t){.owner = owner};
	ld->priv->nodes.used += sizeof(zone_node_t);
	uint32_t *parents = zone_vec_reserve(&ld->parents, sizeof(uint32_t));
	parents[idx] = parent;
	ld->parents.used += sizeof(uint32_t);
	zone_index_insert(ld->priv, hash, idx);
	if (parent != UINT32_MAX && name[0] == 1 && name[1] == '*')
		nodes[parent].flags |= ZONE_NODE_WILDCARD_CHILD;
	return idx;
}

/* The index of the file @p s reads, registering it (and its stat) when new. */
static uint16_t current_src(loader_t *ld, const zs_scanner_t *s)
{
	/* By name: a freed $INCLUDE scanner's address may be reused by the next one. */
	if (strcmp(ld->srcs[ld->cur_src], s->file.name) == 0)
		return ld->cur_src;
	for (size_t i = 0; i < ld->n_srcs; i++) {
		if (strcmp(ld->srcs[i], s->file.name) == 0)
			return ld->cur_src = (uint16_t)i;
	}
	if (ld->n_srcs == MAX_SOURCES)
		return ld->cur_src = 0;
	/* An $INCLUDEd file: remember its stat so a change to it triggers a reload. */
	struct zone_priv *priv = ld->priv;
	priv->srcs = xrealloc(priv->srcs, (priv->n_srcs + 1) * sizeof(*priv->srcs));
	zone_src_t *src = &priv->srcs[priv->n_srcs];
	src->name = xstrdup(s->file.name);
	if (stat(src->name, &src->st) != 0)
		memset(&src->st, 0, sizeof(src->st));
	priv->n_srcs++;
	ld->srcs = xrealloc(ld->srcs, (ld->n_srcs + 1) * sizeof(*ld->srcs));
	ld->srcs[ld->n_srcs] = src->name;
	return ld->cur_src = (uint16_t)ld->n_srcs++;
}

/*
 * Where the names sit in rdata of the types whose names are folded to lowercase: the types
 * of RFC 3597 section 4 plus those whose names RFC 4034 section 6.2 canonicalises and that
 * answers use (SRV, DNAME, NAPTR...). 'n' a name, 's' a character-string, digits a fixed
 * field of that many octets; the rest of the rdata is left alone.
 */
static const char *name_layout(uint16_t type)
{
	switch (type) {
	case DNS_TYPE_NS:
	case DNS_TYPE_MD:
	case DNS_TYPE_MF:
	case DNS_TYPE_CNAME:
	case DNS_TYPE_MB:
	case DNS_TYPE_MG:
	case DNS_TYPE_MR:
	case DNS_TYPE_PTR:
	case DNS_TYPE_DNAME:
		return "n";
	case DNS_TYPE_SOA:
		return "nn";
	case DNS_TYPE_MINFO:
	case 17: /* RP */
		return "nn";
	case DNS_TYPE_MX:
	case 18: /* AFSDB */
	case 21: /* RT */
	case 36: /* KX */
		return "2n";
	case 26: /* PX */
		return "2nn";
	case DNS_TYPE_SRV:
		return "222n";
	case DNS_TYPE_NAPTR:
		return "22sssn";
	case DNS_TYPE_RRSIG:
		return "2114442n";
	default:
		return NULL;
	}
}

static void lower_rdata_names(uint16_t type, uint8_t *rd, size_t len)
{
	const char *layout = name_layout(type);
	size_t off = 0;
	for (; layout != NULL && *layout != 0 && off < len; layout++) {
		if (*layout == 'n') {
			size_t start = off;
			while (off < len && rd[off] != 0)
				off += (size_t)rd[off] + 1;
			off = off < len ? off + 1 : len;
			lower(rd + start, off - start);
		} else if (*layout == 's') {
			off += (size_t)rd[off] + 1;
		} else {
			off += (size_t)(*layout - '0');
		}
	}
}

/* RFC 6895 section 3.1: 0, OPT and the meta/query range cannot be zone data. */
static bool type_storable(uint16_t type)
{
	return type != 0 && type != DNS_TYPE_OPT && (type < 128 || type > 255);
}

static void on_error(zs_scanner_t *s)
{
	loader_t *ld = s->process.data;
	if (s->error.code == ZS_FILE_OPEN && s->include_filename[0] != '\0') {
		fail(ld, s->file.name, s->line_counter, "cannot open $INCLUDE file %s",
		     s->include_filename);
	} else {
		/* libzscanner reads any class but IN as an unknown type name: say so. */
		bool type = s->error.code == ZS_UNSUPPORTED_TYPE;
		fail(ld, s->file.name, s->line_counter, "%s%s", zs_strerror(s->error.code),
		     type ? " (or a class other than IN)" : "");
	}
	s->state = ZS_STATE_STOP;
}

/* Node of the record's owner, or -1 when it lies outside the zone. */
static int64_t owner_node(loader_t *ld, const zs_scanner_t *s)
{
	uint8_t owner[DNS_DNAME_MAXLEN];
	size_t len = s->r_owner_length;
	memcpy(owner, s->r_owner, len);
	lower(owner, len);
	if (len == ld->last_len && memcmp(owner, ld->last_owner, len) == 0)
		return ld->last_node;
	memcpy(ld->last_owner, owner, len);
	ld->last_len = len;
	const zone_t *zone = ld->zone;
	if (is_below(owner, len, zone->apex, zone->apex_len))
		ld->last_node = ensure_node(ld, owner, len);
	else
		ld->last_node = -1;
	return ld->last_node;
}

/* Class and type checks that fail the load; false after fail(). */
static bool record_allowed(loader_t *ld, zs_scanner_t *s)
{
	char tbuf[16];
	if (s->r_class != DNS_CLASS_IN) {
		fail(ld, s->file.name, s->line_counter, "class %u is not supported, only IN",
		     s->r_class);
		return false;
	}
	if (!type_storable(s->r_type)) {
		fail(ld, s->file.name, s->line_counter, "type %s cannot appear in a zone",
		     type_str(s->r_type, tbuf));
		return false;
	}
	return true;
}

/* Keep the record: rdata to the raw buffer, a fixed-size entry to the record array. */
static void append_record(loader_t *ld, const zs_scanner_t *s, uint32_t node, uint16_t src)
{
	uint8_t *raw = zone_vec_reserve(&ld->raw, 2 + s->r_data_length);
	uint64_t off = ld->raw.used;
	raw[off] = (uint8_t)(s->r_data_length >> 8);
	raw[off + 1] = (uint8_t)s->r_data_length;
	memcpy(raw + off + 2, s->r_data, s->r_data_length);
	ld->raw.used += 2 + s->r_data_length;

	load_rec_t *recs = zone_vec_reserve(&ld->recs, sizeof(load_rec_t));
	recs[ld->recs.used / sizeof(load_rec_t)] = (load_rec_t){
	    .off = off,
	    .node = node,
	    .ttl = s->r_ttl,
	    .line = s->line_counter > UINT32_MAX ? UINT32_MAX : (uint32_t)s->line_counter,
	    .type = s->r_type,
	    .src = src,
	};
	ld->recs.used += sizeof(load_rec_t);
}

static void on_record(zs_scanner_t *s)
{
	loader_t *ld = s->process.data;
	if (ld->failed || !record_allowed(ld, s)) {
		s->state = ZS_STATE_STOP;
		return;
	}
	uint16_t src = current_src(ld, s);
	char tbuf[16];
	int64_t node = owner_node(ld, s);
	if (node < 0) {
		char name[DNAME_STR_MAXLEN];
		warn(&ld->n_outside, "%s:%llu: %s %s is outside the zone %s, ignored", s->file.name,
		     (unsigned long long)s->line_counter,
		     dname_to_str(ld->last_owner, name, sizeof(name)), type_str(s->r_type, tbuf),
		     ld->zone->name);
		return;
	}
	if (s->r_type == DNS_TYPE_SOA && node != 0) {
		fail(ld, s->file.name, s->line_counter, "SOA record not at the zone apex %s",
		     ld->zone->name);
		s->state = ZS_STATE_STOP;
		return;
	}
	lower_rdata_names(s->r_type, s->r_data, s->r_data_length);
	append_record(ld, s, (uint32_t)node, src);
}

static bool rec_before(const load_rec_t *a, const load_rec_t *b)
{
	if (a->type != b->type)
		return a->type < b->type;
	return a->off < b->off;
}

/* Within one node: by type, then input order. */
static int rec_cmp_type(const void *pa, const void *pb, void *arg)
{
	(void)arg;
	const load_rec_t *a = pa, *b = pb;
	if (a->type != b->type)
		return a->type < b->type ? -1 : 1;
	return a->off < b->off ? -1 : a->off > b->off;
}

static void insertion_sort(load_rec_t *r, size_t n, int (*cmp)(const void *, const void *, void *),
                           void *arg)
{
	for (size_t i = 1; i < n; i++) {
		load_rec_t x = r[i];
		size_t j = i;
		for (; j > 0 && cmp(&r[j - 1], &x, arg) > 0; j--)
			r[j] = r[j - 1];
		r[j] = x;
	}
}

/* Small groups (the usual case) sort faster by insertion than through qsort's indirection. */
static void sort_group(load_rec_t *r, size_t n, int (*cmp)(const void *, const void *, void *),
                       void *arg)
{
	if (n <= 16)
		insertion_sort(r, n, cmp, arg);
	else
		qsort_r(r, n, sizeof(*r), cmp, arg);
}

/* Stable counting sort of the records by node: linear, whatever the input order. */
static void sort_by_node(loader_t *ld)
{
	const load_rec_t *r = (const load_rec_t *)ld->recs.data;
	size_t n = ld->recs.used / sizeof(load_rec_t);
	size_t nn = n_nodes(ld);
	zone_vec_t pos = {0}, out = {0};
	uint32_t *start = zone_vec_reserve(&pos, (nn + 1) * sizeof(uint32_t));
	for (size_t k = 0; k < n; k++)
		start[r[k].node + 1]++;
	for (size_t k = 1; k <= nn; k++)
		start[k] += start[k - 1];
	load_rec_t *sorted = zone_vec_reserve(&out, n * sizeof(load_rec_t));
	for (size_t k = 0; k < n; k++)
		sorted[start[r[k].node]++] = r[k];
	zone_vec_free(&pos);
	out.used = ld->recs.used;
	zone_vec_free(&ld->recs);
	ld->recs = out;
}

/*
 * Put the records in (node, type, input order) order. Files that list each name's records
 * together are already in node order (nodes are numbered by first sight) and skip the sort by
 * node; inside a node, records are sorted by type only when they are not already.
 */
static void sort_records(loader_t *ld)
{
	size_t n = ld->recs.used / sizeof(load_rec_t);
	const load_rec_t *r = (const load_rec_t *)ld->recs.data;
	for (size_t i = 1; i < n; i++) {
		if (r[i].node < r[i - 1].node) {
			sort_by_node(ld);
			break;
		}
	}
	load_rec_t *sorted = (load_rec_t *)ld->recs.data;
	for (size_t a = 0, b; a < n; a = b) {
		bool ordered = true;
		for (b = a + 1; b < n && sorted[b].node == sorted[a].node; b++)
			ordered = ordered && rec_before(&sorted[b - 1], &sorted[b]);
		if (!ordered)
			sort_group(sorted + a, b - a, rec_cmp_type, NULL);
	}
}

static const uint8_t *raw_rdata(const loader_t *ld, const load_rec_t *r, uint16_t *len)
{
	const uint8_t *p = ld->raw.data + r->off;
	*len = (uint16_t)(p[0] << 8 | p[1]);
	return p + 2;
}

/* RFC 4034 section 6.3 canonical rdata order, then input order so sorting is stable. */
static int rec_cmp_rdata(const void *pa, const void *pb, void *arg)
{
	const loader_t *ld = arg;
	const load_rec_t *a = pa, *b = pb;
	uint16_t la, lb;
	const uint8_t *da = raw_rdata(ld, a, &la), *db = raw_rdata(ld, b, &lb);
	int c = memcmp(da, db, la < lb ? la : lb);
	if (c == 0 && la != lb)
		c = la < lb ? -1 : 1;
	if (c == 0)
		c = a->off < b->off ? -1 : a->off > b->off;
	return c;
}

static bool same_rdata(const loader_t *ld, const load_rec_t *a, const load_rec_t *b)
{
	uint16_t la, lb;
	const uint8_t *da = raw_rdata(ld, a, &la), *db = raw_rdata(ld, b, &lb);
	return la == lb && memcmp(da, db, la) == 0;
}

static const char *owner_str(const loader_t *ld, uint32_t node, char buf[DNAME_STR_MAXLEN])
{
	const zone_node_t *nodes = (const zone_node_t *)ld->priv->nodes.data;
	return dname_to_str(nodes[node].owner, buf, DNAME_STR_MAXLEN);
}

static bool singleton_type(uint16_t type)
{
	return type == DNS_TYPE_CNAME || type == DNS_TYPE_SOA || type == DNS_TYPE_DNAME;
}

/*
 * Build one rrset from the @p n records at @p r (one node, one type, input order), which get
 * reordered. Identical records collapse (RFC 2181 section 5); differing TTLs become the
 * lowest with a warning (RFC 2181 section 5.2). Returns false after fail().
 */
static bool build_rrset(loader_t *ld, load_rec_t *r, size_t n, zone_rrset_t *out)
{
	char tbuf[16], name[DNAME_STR_MAXLEN];
	const load_rec_t *ttl_diff = NULL;
	uint32_t ttl = r[0].ttl;
	for (size_t i = 1; i < n; i++) {
		if (r[i].ttl != r[0].ttl && ttl_diff == NULL)
			ttl_diff = &r[i];
		ttl = r[i].ttl < ttl ? r[i].ttl : ttl;
	}
	/* RRSIGs of different covered types legitimately differ in TTL (RFC 4034 3). */
	if (ttl_diff != NULL && r[0].type != DNS_TYPE_RRSIG)
		warn(&ld->n_warnings, "%s:%u: %s %s: records with different TTLs, using %u",
		     ld->srcs[ttl_diff->src], ttl_diff->line, owner_str(ld, r[0].node, name),
		     type_str(r[0].type, tbuf), ttl);
	if (n > 1)
		sort_group(r, n, rec_cmp_rdata, ld);

	size_t kept = 0, bytes = 0;
	const load_rec_t *latest = NULL;
	for (size_t i = 0; i < n; i++) {
		if (kept > 0 && same_rdata(ld, &r[kept - 1], &r[i]))
			continue;
		r[kept++] = r[i];
		uint16_t len;
		raw_rdata(ld, &r[i], &len);
		bytes += 2u + len;
		if (latest == NULL || r[i].off > latest->off)
			latest = &r[kept - 1];
	}
	if (kept > 1 && singleton_type(r[0].type)) {
		fail(ld, ld->srcs[latest->src], latest->line, "more than one %s record at %s",
		     type_str(r[0].type, tbuf), owner_str(ld, r[0].node, name));
		return false;
	}
	if (kept > UINT16_MAX) {
		fail(ld, ld->srcs[r[0].src], r[0].line, "more than %u %s records at %s", UINT16_MAX,
		     type_str(r[0].type, tbuf), owner_str(ld, r[0].node, name));
		return false;
	}
	uint8_t *blob = zone_arena_alloc(&ld->priv->arena, bytes, 1);
	*out =
	    (zone_rrset_t){.type = r[0].type, .count = (uint16_t)kept, .ttl = ttl, .rdata = blob};
	for (size_t i = 0; i < kept; i++) {
		const uint8_t *p = ld->raw.data + r[i].off;
		size_t len = 2u + (size_t)(p[0] << 8 | p[1]);
		memcpy(blob, p, len);
		blob += len;
	}
	ld->zone->n_records += kept;
	return true;
}

/* CNAME exclusivity (RFC 1034 3.6.2, RFC 2181 10.1; RRSIG/NSEC allowed by RFC 4035 2.5). */
static bool check_cname(loader_t *ld, const load_rec_t *r, size_t n)
{
	const load_rec_t *cname = NULL, *other = NULL;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && r[i].type == r[i - 1].type)
			continue;
		if (r[i].type == DNS_TYPE_CNAME)
			cname = &r[i];
		else if (r[i].type != DNS_TYPE_RRSIG && r[i].type != DNS_TYPE_NSEC && other == NULL)
			other = &r[i];
	}
	if (cname == NULL || other == NULL)
		return true;
	/* Blame whichever of the two came later in the file: it broke the rule. */
	const load_rec_t *bad = cname->off > other->off ? cname : other;
	char tbuf[16], name[DNAME_STR_MAXLEN];
	fail(ld, ld->srcs[bad->src], bad->line, "CNAME and %s records at %s",
	     type_str(other->type, tbuf), owner_str(ld, r[0].node, name));
	return false;
}

/* Turn the sorted records of each node into its rrset array. */
static bool build_nodes(loader_t *ld)
{
	load_rec_t *r = (load_rec_t *)ld->recs.data;
	size_t n = ld->recs.used / sizeof(load_rec_t);
	zone_node_t *nodes = (zone_node_t *)ld->priv->nodes.data;
	for (size_t a = 0, b; a < n; a = b) {
		size_t types = 1;
		for (b = a + 1; b < n && r[b].node == r[a].node; b++)
			types += r[b].type != r[b - 1].type;
		if (!check_cname(ld, r + a, b - a))
			return false;
		if (types > UINT16_MAX) {
			fail(ld, ld->srcs[r[a].src], r[a].line, "too many types at one name");
			return false;
		}
		zone_rrset_t *rrsets =
		    zone_arena_alloc(&ld->priv->arena, types * sizeof(zone_rrset_t), 8);
		size_t t = 0;
		for (size_t g = a, h; g < b; g = h) {
			for (h = g + 1; h < b && r[h].type == r[g].type; h++)
				;
			if (!build_rrset(ld, r + g, h - g, &rrsets[t++]))
				return false;
		}
		nodes[r[a].node].rrsets = rrsets;
		nodes[r[a].node].n_rrsets = (uint16_t)types;
	}
	return true;
}

/*
 * Flags and cuts, in node order (parents first). Only the topmost NS below the apex is a cut:
 * NS records under a cut are occluded data of the child zone, not further cuts of ours.
 */
static void set_flags(loader_t *ld)
{
	zone_node_t *nodes = (zone_node_t *)ld->priv->nodes.data;
	const uint32_t *parents = (const uint32_t *)ld->parents.data;
	size_t nn = n_nodes(ld);
	nodes[0].flags |= ZONE_NODE_APEX;
	for (size_t i = 1; i < nn; i++) {
		zone_node_t *node = &nodes[i];
		const zone_node_t *parent = &nodes[parents[i]];
		node->parent = parent;
		if (parent->cut != NULL) {
			node->flags |= ZONE_NODE_NONAUTH;
			node->cut = parent->cut;
		} else if (zone_node_rrset(node, DNS_TYPE_NS) != NULL) {
			node->flags |= ZONE_NODE_DELEG;
			node->cut = node;
		}
	}
}

/* Warn about name servers inside a delegated subtree that have no address (glue). */
static void check_glue(loader_t *ld)
{
	const zone_node_t *nodes = (const zone_node_t *)ld->priv->nodes.data;
	size_t nn = n_nodes(ld);
	for (size_t i = 1; i < nn; i++) {
		if (!(nodes[i].flags & ZONE_NODE_DELEG))
			continue;
		const uint8_t *cut = nodes[i].owner;
		size_t cut_len = zone_wire_len(cut);
		zone_rdata_iter_t it = zone_rdata_iter(zone_node_rrset(&nodes[i], DNS_TYPE_NS));
		const uint8_t *ns;
		uint16_t len;
		while ((ns = zone_rdata_next(&it, &len)) != NULL) {
			if (!is_below(ns, len, cut, cut_len))
				continue;
			const zone_node_t *glue = zone_find_node(ld->zone, ns, len);
			if (glue != NULL && (zone_node_rrset(glue, DNS_TYPE_A) != NULL ||
			                     zone_node_rrset(glue, DNS_TYPE_AAAA) != NULL))
				continue;
			char a[DNAME_STR_MAXLEN], b[DNAME_STR_MAXLEN];
			warn(&ld->n_warnings,
			     "%s: delegation %s: no glue address for name server %s",
			     ld->zone->file, dname_to_str(cut, a, sizeof(a)),
			     dname_to_str(ns, b, sizeof(b)));
		}
	}
}

static bool check_apex(loader_t *ld)
{
	zone_t *zone = ld->zone;
	const zone_node_t *apex = (const zone_node_t *)ld->priv->nodes.data;
	zone->soa = zone_node_rrset(apex, DNS_TYPE_SOA);
	if (zone->soa == NULL) {
		fail(ld, zone->file, 0, "no SOA record at the zone apex %s", zone->name);
		return false;
	}
	if (zone_node_rrset(apex, DNS_TYPE_NS) == NULL) {
		fail(ld, zone->file, 0, "no NS records at the zone apex %s", zone->name);
		return false;
	}
	/* Serial: after MNAME and RNAME (RFC 1035 3.3.13). */
	const uint8_t *rd = zone->soa->rdata + 2;
	size_t off = zone_wire_len(rd);
	off += zone_wire_len(rd + off);
	zone->serial = (uint32_t)rd[off] << 24 | (uint32_t)rd[off + 1] << 16 |
	               (uint32_t)rd[off + 2] << 8 | rd[off + 3];
	return true;
}

static bool parse_file(loader_t *ld)
{
	zone_t *zone = ld->zone;
	zs_scanner_t *s = zone_map(sizeof(*s));
	bool ok = false;
	if (zs_init(s, zone->name, DNS_CLASS_IN, 3600) != 0) {
		fail(ld, zone->name, 0, "invalid zone origin: %s", zs_strerror(s->error.code));
		goto out;
	}
	errno = 0;
	if (zs_set_input_file(s, zone->file) != 0) {
		fail(ld, zone->file, 0, "cannot read: %s",
		     errno ? steer_strerror(-errno) : zs_strerror(s->error.code));
		goto out;
	}
	if (zs_set_processing(s, on_record, on_error, ld) != 0) {
		fail(ld, zone->file, 0, "%s", zs_strerror(s->error.code));
		goto out;
	}
	if (zs_parse_all(s) != 0 && !ld->failed)
		fail(ld, zone->file, s->line_counter, "%s", zs_strerror(s->error.code));
	ok = !ld->failed;
out:
	zs_deinit(s);
	zone_unmap(s, sizeof(*s));
	return ok;
}

static void log_summary(loader_t *ld)
{
	const zone_t *zone = ld->zone;
	if (ld->n_outside > WARN_LIMIT)
		log_warn("%s: %zu more records outside the zone %s ignored", zone->file,
		         ld->n_outside - WARN_LIMIT, zone->name);
	if (ld->n_warnings > WARN_LIMIT)
		log_warn("%s: %zu more warnings not shown", zone->file,
		         ld->n_warnings - WARN_LIMIT);
}

/* Everything after a successful parse: the zone's final shape and the semantic checks. */
static bool build(loader_t *ld)
{
	sort_records(ld);
	if (!build_nodes(ld))
		return false;
	zone_vec_free(&ld->recs);
	zone_vec_free(&ld->raw);
	zone_vec_shrink(&ld->priv->nodes);
	zone_vec_shrink(&ld->priv->index);
	set_flags(ld);
	if (!check_apex(ld))
		return false;
	check_glue(ld);
	ld->zone->n_nodes = n_nodes(ld);
	ld->zone->apex_node = (const zone_node_t *)ld->priv->nodes.data;
	return true;
}

/* The zone shell: names, apex node, stat of the file. */
static int zone_init(loader_t *ld, const char *origin, const char *file)
{
	zone_t *zone = ld->zone;
	char name[DNAME_STR_MAXLEN];
	int len = dname_from_str(origin, zone->apex);
	if (len < 0) {
		fail(ld, origin, 0, "invalid zone name");
		return STEER_EINVAL;
	}
	zone->apex_len = (uint8_t)len;
	lower(zone->apex, zone->apex_len);
	zone->name = xstrdup(dname_to_str(zone->apex, name, sizeof(name)));
	zone->file = xstrdup(file);
	zone->refcount = 1;
	if (stat(file, &zone->file_stat) != 0) {
		int ret = -errno;
		fail(ld, file, 0, "%s", steer_strerror(ret));
		return ret;
	}
	if (!S_ISREG(zone->file_stat.st_mode)) {
		fail(ld, file, 0, "not a regular file");
		return STEER_EINVAL;
	}
	ld->srcs = xmalloc(sizeof(*ld->srcs));
	ld->srcs[0] = zone->file;
	ld->n_srcs = 1;
	ld->last_node = -1;
	ld->last_len = 0;
	ensure_node(ld, zone->apex, zone->apex_len);
	return 0;
}

int zone_load(const char *origin, const char *file, zone_t **out, char *err, size_t errlen)
{
	zone_t *zone = xcalloc(1, sizeof(*zone));
	zone->priv = xcalloc(1, sizeof(*zone->priv));
	loader_t ld = {.zone = zone, .priv = zone->priv, .err = err, .errlen = errlen};
	if (errlen > 0)
		err[0] = '\0';
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);

	int ret = zone_init(&ld, origin, file);
	if (ret != 0)
		goto out;
	ret = STEER_EZONE;
	bool ok = parse_file(&ld) && build(&ld);
	log_summary(&ld);
	if (!ok)
		goto out;
	zone->loaded_at = time(NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	log_debug("zone %s: loaded from %s, serial %u, %zu records, %zu nodes in %.3f s",
	          zone->name, zone->file, zone->serial, zone->n_records, zone->n_nodes,
	          (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	ret = 0;
out:
	zone_vec_free(&ld.recs);
	zone_vec_free(&ld.raw);
	zone_vec_free(&ld.parents);
	free(ld.srcs);
	if (ret != 0) {
		zone_free(zone);
		zone = NULL;
	}
	*out = zone;
	return ret;
}

/* ---- where a record came from ---- */

typedef struct {
	const uint8_t *owner; /* lowercase wire */
	size_t owner_len;
	uint16_t type;
	char *buf;
	size_t len;
	bool found;
} where_t;

static void on_where_record(zs_scanner_t *s)
{
	where_t *w = s->process.data;
	uint8_t owner[DNS_DNAME_MAXLEN];
	size_t len = s->r_owner_length;
	if (len != w->owner_len || s->r_type != w->type)
		return;
	memcpy(owner, s->r_owner, len);
	lower(owner, len);
	if (memcmp(owner, w->owner, len) != 0)
		return;
	snprintf(w->buf, w->len, "%s:%llu", s->file.name, (unsigned long long)s->line_counter);
	w->found = true;
	s->state = ZS_STATE_STOP;
}

static void on_where_error(zs_scanner_t *s)
{
	s->state = ZS_STATE_STOP;
}

/*
 * The zone keeps no line numbers (they would cost memory per record for every zone), so the
 * rare caller that needs one for a message reads the file again.
 */
void zone_record_where(const zone_t *zone, const uint8_t *owner, uint16_t type, char *buf,
                       size_t len)
{
	where_t w = {
	    .owner = owner, .owner_len = dname_len(owner), .type = type, .buf = buf, .len = len};
	zs_scanner_t *s = zone_map(sizeof(*s));
	if (zs_init(s, zone->name, DNS_CLASS_IN, 3600) == 0 &&
	    zs_set_input_file(s, zone->file) == 0 &&
	    zs_set_processing(s, on_where_record, on_where_error, &w) == 0)
		(void)zs_parse_all(s);
	zs_deinit(s);
	zone_unmap(s, sizeof(*s));
	if (!w.found)
		snprintf(buf, len, "%s", zone->file);
}
