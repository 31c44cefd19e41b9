/*
 * GeoIP maps over libmaxminddb: opening databases, decoding records, single lookups, the
 * whole-tree walk that compiles a database into prefixes, and rule classification.
 * Runs on the control thread when maps are (re)built; lookups also serve `explain`. The
 * search tree format is https://maxmind.github.io/MaxMind-DB/.
 */
#include "gslb/geoip.h"

#include <arpa/inet.h>
#include <maxminddb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/err.h"

struct gslb_geoip_db {
	MMDB_s mmdb;
	char *path; /* owned */
	unsigned kinds;
	unsigned depth; /* address bits in the tree: 32 or 128 */
	/* Where the ::/96 path of an IPv6 tree ends: the record found after following zero
	 * bits from the root (a search node at depth 96 when the tree has IPv4 data below).
	 * The writer's aliases are links to this same record. */
	uint64_t v4_record;
	unsigned v4_depth;
};

/* =========================================================================================
 * Opening
 */

/* Database types are vendor strings ("GeoLite2-City", "DBIP-ASN-Lite"); MaxMind puts the
 * kind of data in a dash-separated word, other vendors follow the convention. */
static unsigned kinds_of_type(const char *type)
{
	static const struct {
		const char *word;
		unsigned kinds;
	} words[] = {
	    {"City", GSLB_GEOIP_KIND_LOCATION},
	    {"Country", GSLB_GEOIP_KIND_LOCATION},
	    {"ASN", GSLB_GEOIP_KIND_ASN},
	    {"ISP", GSLB_GEOIP_KIND_ASN},
	    {"Enterprise", GSLB_GEOIP_KIND_LOCATION | GSLB_GEOIP_KIND_ASN},
	};
	unsigned kinds = 0;
	for (size_t i = 0; i < STEER_ARRAY_LEN(words); i++) {
		size_t len = strlen(words[i].word);
		for (const char *p = strstr(type, words[i].word); p;
		     p = strstr(p + 1, words[i].word)) {
			bool starts = p == type || p[-1] == '-' || p[-1] == '_' || p[-1] == ' ';
			bool ends =
			    p[len] == '\0' || p[len] == '-' || p[len] == '_' || p[len] == ' ';
			if (starts && ends)
				kinds |= words[i].kinds;
		}
	}
	return kinds;
}

static int open_status_to_err(int status)
{
	switch (status) {
	case MMDB_OUT_OF_MEMORY_ERROR:
		return STEER_ENOMEM;
	case MMDB_IO_ERROR:
		return -EIO;
	default:
		return STEER_EMALF;
	}
}

/* Follow the all-zero path to find where IPv4 data (::/96) starts. A node met twice on the
 * way is a loop in a corrupt file: STEER_EMALF. */
static int find_v4_root(gslb_geoip_db_t *db, char *err, size_t errlen)
{
	db->v4_record = 0;
	db->v4_depth = 0;
	if (db->mmdb.metadata.ip_version != 6 || db->mmdb.metadata.node_count == 0)
		return 0;
	uint32_t seen[96];
	uint32_t node = 0;
	for (unsigned depth = 0; depth < 96; depth++) {
		MMDB_search_node_s sn;
		for (unsigned i = 0; i < depth; i++) {
			if (seen[i] == node) {
				snprintf(err, errlen, "%s: corrupt search tree (loop at node %u)",
				         db->path, node);
				return STEER_EMALF;
			}
		}
		seen[depth] = node;
		if (MMDB_read_node(&db->mmdb, node, &sn) != MMDB_SUCCESS) {
			snprintf(err, errlen, "%s: corrupt search tree (bad node %u)", db->path,
			         node);
			return STEER_EMALF;
		}
		db->v4_record = sn.left_record;
		db->v4_depth = depth + 1;
		if (sn.left_record_type != MMDB_RECORD_TYPE_SEARCH_NODE)
			return 0;
		node = (uint32_t)sn.left_record;
	}
	return 0;
}

/* stat() first: libmaxminddb reports a missing file and a directory alike. */
static int check_file(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return e == ENOENT ? STEER_ENOENT : e == EACCES ? STEER_EACCES : -e;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		return STEER_EINVAL;
	}
	if (st.st_size == 0) { /* mmap() would fail with a puzzling EINVAL */
		snprintf(err, errlen, "%s: empty file, not a MaxMind DB", path);
		return STEER_EMALF;
	}
	return 0;
}

static int check_metadata(gslb_geoip_db_t *db, char *err, size_t errlen)
{
	const MMDB_metadata_s *md = &db->mmdb.metadata;
	const char *type = md->database_type ? md->database_type : "";
	if (md->ip_version != 4 && md->ip_version != 6) {
		snprintf(err, errlen, "%s: unsupported ip_version %u", db->path, md->ip_version);
		return STEER_EMALF;
	}
	db->depth = md->ip_version == 6 ? 128 : 32;
	db->kinds = kinds_of_type(type);
	if (db->kinds == 0) {
		snprintf(err, errlen,
		         "%s: database type '%s' has neither location nor ASN data (want a City, "
		         "Country, ASN, ISP or Enterprise database)",
		         db->path, type);
		return STEER_ECONF;
	}
	return 0;
}

int gslb_geoip_open(const char *path, gslb_geoip_db_t **out, char *err, size_t errlen)
{
	*out = NULL;
	int ret = check_file(path, err, errlen);
	if (ret != 0)
		return ret;
	gslb_geoip_db_t *db = xcalloc(1, sizeof(*db));
	db->path = xstrdup(path);
	errno = 0;
	int status = MMDB_open(path, MMDB_MODE_MMAP, &db->mmdb);
	if (status != MMDB_SUCCESS) {
		if (status == MMDB_IO_ERROR && errno != 0)
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
		else
			snprintf(err, errlen, "%s: not a usable MaxMind DB file: %s", path,
			         MMDB_strerror(status));
		free(db->path);
		free(db);
		return open_status_to_err(status);
	}
	ret = check_metadata(db, err, errlen);
	if (ret != 0) {
		gslb_geoip_close(db);
		return ret;
	}
	ret = find_v4_root(db, err, errlen);
	if (ret != 0) {
		gslb_geoip_close(db);
		return ret;
	}
	/* libmaxminddb finds its own IPv4 start node lazily and stores it in the MMDB_s during
	 * the first IPv4 lookup; doing one now keeps later concurrent lookups read-only. */
	int gai_err, mmdb_err;
	(void)MMDB_lookup_string(&db->mmdb, "0.0.0.0", &gai_err, &mmdb_err);
	*out = db;
	return 0;
}

void gslb_geoip_close(gslb_geoip_db_t *db)
{
	if (!db)
		return;
	MMDB_close(&db->mmdb);
	free(db->path);
	free(db);
}

void gslb_geoip_info(const gslb_geoip_db_t *db, gslb_geoip_db_info_t *info)
{
	const MMDB_metadata_s *md = &db->mmdb.metadata;
	info->path = db->path;
	info->type = md->database_type ? md->database_type : "";
	info->ip_version = md->ip_version;
	info->record_size = md->record_size;
	info->node_count = md->node_count;
	info->build_epoch = md->build_epoch;
	info->kinds = db->kinds;
}

/* =========================================================================================
 * Decoding one data record
 */

static const char *const PATH_CONTINENT[] = {"continent", "code", NULL};
static const char *const PATH_COUNTRY[] = {"country", "iso_code", NULL};
static const char *const PATH_REG_COUNTRY[] = {"registered_country", "iso_code", NULL};
static const char *const PATH_SUBDIVISION[] = {"subdivisions", "0", "iso_code", NULL};
static const char *const PATH_CITY[] = {"city", "names", "en", NULL};
static const char *const PATH_CITY_ID[] = {"city", "geoname_id", NULL};
static const char *const PATH_LAT[] = {"location", "latitude", NULL};
static const char *const PATH_LON[] = {"location", "longitude", NULL};
static const char *const PATH_ASN[] = {"autonomous_system_number", NULL};
static const char *const PATH_TRAITS_ASN[] = {"traits", "autonomous_system_number", NULL};

/* 1 when @p path holds a value, 0 when it is absent or the record has another shape,
 * STEER_EMALF when the data section is corrupt. */
static int get_value(const MMDB_s *mmdb, uint32_t offset, const char *const *path,
                     MMDB_entry_data_s *data)
{
	MMDB_entry_s entry = {.mmdb = mmdb, .offset = offset};
	int status = MMDB_aget_value(&entry, data, path);
	switch (status) {
	case MMDB_SUCCESS:
		return data->has_data ? 1 : 0;
	case MMDB_LOOKUP_PATH_DOES_NOT_MATCH_DATA_ERROR:
	case MMDB_INVALID_LOOKUP_PATH_ERROR:
		return 0;
	default:
		return STEER_EMALF;
	}
}

/* Copy a code of @p min..@p max ASCII letters/digits, uppercased; anything else is absent,
 * so a garbled code can never match a rule by accident. */
static int get_code(const MMDB_s *mmdb, uint32_t offset, const char *const *path, char *dst,
                    size_t min, size_t max)
{
	MMDB_entry_data_s data;
	dst[0] = '\0';
	int ret = get_value(mmdb, offset, path, &data);
	if (ret <= 0 || data.type != MMDB_DATA_TYPE_UTF8_STRING)
		return ret < 0 ? ret : 0;
	if (data.data_size < min || data.data_size > max)
		return 0;
	for (uint32_t i = 0; i < data.data_size; i++) {
		char c = data.utf8_string[i];
		bool alnum =
		    (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum) {
			dst[0] = '\0';
			return 0;
		}
		dst[i] = (char)(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
	}
	dst[data.data_size] = '\0';
	return 1;
}

/* Unsigned integers come as uint16/uint32 in MaxMind's databases, other writers differ. */
static int get_u32(const MMDB_s *mmdb, uint32_t offset, const char *const *path, uint32_t *out)
{
	MMDB_entry_data_s data;
	int ret = get_value(mmdb, offset, path, &data);
	if (ret <= 0)
		return ret;
	switch (data.type) {
	case MMDB_DATA_TYPE_UINT16:
		*out = data.uint16;
		return 1;
	case MMDB_DATA_TYPE_UINT32:
		*out = data.uint32;
		return 1;
	case MMDB_DATA_TYPE_UINT64:
		*out = (uint32_t)data.uint64;
		return data.uint64 <= UINT32_MAX;
	case MMDB_DATA_TYPE_INT32:
		*out = (uint32_t)data.int32;
		return data.int32 >= 0;
	default:
		return 0;
	}
}

static int get_double(const MMDB_s *mmdb, uint32_t offset, const char *const *path, double *out)
{
	MMDB_entry_data_s data;
	int ret = get_value(mmdb, offset, path, &data);
	if (ret <= 0)
		return ret;
	if (data.type == MMDB_DATA_TYPE_DOUBLE)
		*out = data.double_value;
	else if (data.type == MMDB_DATA_TYPE_FLOAT)
		*out = data.float_value;
	else
		return 0;
	return 1;
}

static int decode_city(const MMDB_s *mmdb, uint32_t offset, gslb_geoip_record_t *rec)
{
	MMDB_entry_data_s data;
	int ret = get_value(mmdb, offset, PATH_CITY, &data);
	if (ret < 0)
		return ret;
	if (ret > 0 && data.type == MMDB_DATA_TYPE_UTF8_STRING && data.data_size > 0 &&
	    data.data_size <= UINT16_MAX) {
		rec->city = data.utf8_string;
		rec->city_len = (uint16_t)data.data_size;
	}
	uint32_t id = 0;
	ret = get_u32(mmdb, offset, PATH_CITY_ID, &id);
	if (ret > 0)
		rec->city_geoname_id = id;
	return ret < 0 ? ret : 0;
}

static int decode_location(const MMDB_s *mmdb, uint32_t offset, gslb_geoip_record_t *rec)
{
	double lat = 0, lon = 0;
	int r1 = get_double(mmdb, offset, PATH_LAT, &lat);
	int r2 = get_double(mmdb, offset, PATH_LON, &lon);
	if (r1 < 0 || r2 < 0)
		return STEER_EMALF;
	if (r1 > 0 && r2 > 0 && gslb_geo_coords_ok(lat, lon)) {
		rec->lat = (float)lat;
		rec->lon = (float)lon;
		rec->flags |= GSLB_GEOIP_REC_LOCATION;
	}
	return 0;
}

static int decode_asn(const MMDB_s *mmdb, uint32_t offset, gslb_geoip_record_t *rec)
{
	uint32_t asn = 0;
	int ret = get_u32(mmdb, offset, PATH_ASN, &asn);
	if (ret == 0)
		ret = get_u32(mmdb, offset, PATH_TRAITS_ASN, &asn);
	if (ret > 0 && asn != 0) {
		rec->asn = asn;
		rec->flags |= GSLB_GEOIP_REC_ASN;
	}
	return ret < 0 ? ret : 0;
}

/* Decode the data record at @p offset. Returns 0 or STEER_EMALF. Allocates nothing. */
static int decode_record(const MMDB_s *mmdb, uint32_t offset, gslb_geoip_record_t *rec)
{
	memset(rec, 0, sizeof(*rec));
	rec->id = GSLB_GEOIP_NO_ID;
	rec->data_offset = offset;
	int ret = get_code(mmdb, offset, PATH_CONTINENT, rec->continent, 2, 2);
	if (ret >= 0)
		ret = get_code(mmdb, offset, PATH_COUNTRY, rec->country, 2, 2);
	if (ret == 0) {
		/* No physical country: the registrant's is the best location hint left. */
		ret = get_code(mmdb, offset, PATH_REG_COUNTRY, rec->country, 2, 2);
		if (ret > 0)
			rec->flags |= GSLB_GEOIP_REC_REGISTERED;
	}
	if (ret >= 0)
		ret = get_code(mmdb, offset, PATH_SUBDIVISION, rec->subdivision, 1, 3);
	if (ret >= 0)
		ret = decode_city(mmdb, offset, rec);
	if (ret >= 0)
		ret = decode_location(mmdb, offset, rec);
	if (ret >= 0)
		ret = decode_asn(mmdb, offset, rec);
	return ret < 0 ? STEER_EMALF : 0;
}

/* =========================================================================================
 * Single lookups
 */

static bool is_v4mapped(const uint8_t *a)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(a, prefix, sizeof(prefix)) == 0;
}

int gslb_geoip_lookup(const gslb_geoip_db_t *db, int family, const void *addr,
                      gslb_geoip_record_t *rec, unsigned *prefix_len)
{
	const uint8_t *a = addr;
	steer_sockaddr_t sa;
	memset(&sa, 0, sizeof(sa));
	if (family == AF_INET6 && is_v4mapped(a)) {
		family = AF_INET;
		a += 12;
	}
	if (family == AF_INET) {
		sa.sin.sin_family = AF_INET;
		memcpy(&sa.sin.sin_addr, a, 4);
	} else if (family == AF_INET6) {
		sa.sin6.sin6_family = AF_INET6;
		memcpy(&sa.sin6.sin6_addr, a, 16);
	} else {
		return STEER_EINVAL;
	}
	int mmdb_err = MMDB_SUCCESS;
	MMDB_lookup_result_s res = MMDB_lookup_sockaddr(&db->mmdb, &sa.sa, &mmdb_err);
	if (mmdb_err == MMDB_IPV6_LOOKUP_IN_IPV4_DATABASE_ERROR)
		return STEER_ENOENT;
	if (mmdb_err != MMDB_SUCCESS)
		return STEER_EMALF;
	if (!res.found_entry)
		return STEER_ENOENT;
	unsigned bits = res.netmask;
	/* IPv4 in an IPv6 tree lives at ::/96; a block wider than that covers all of IPv4. */
	if (family == AF_INET && db->depth == 128)
		bits = bits > 96 ? bits - 96 : 0;
	*prefix_len = bits;
	return decode_record(&db->mmdb, res.entry.offset, rec);
}

/* =========================================================================================
 * Walking the search tree
 */

/* Records decoded so far, indexed by a hash of their data offset: a full GeoLite2-City has
 * millions of leaves but a few hundred thousand records, so each is decoded once. */
typedef struct {
	gslb_geoip_record_t *recs; /* recs[i].id == i */
	uint32_t n, cap;
	uint32_t *slots; /* record index + 1, 0 = free; open addressing */
	uint32_t mask;
} rec_cache_t;

static uint32_t hash_offset(uint32_t offset)
{
	return offset * 0x9E3779B1u; /* Fibonacci hashing: offsets are multiples of small sizes */
}

static void cache_grow_slots(rec_cache_t *c)
{
	uint32_t size = c->mask ? (c->mask + 1) * 2 : 1024;
	uint32_t *slots = xcalloc(size, sizeof(*slots));
	for (uint32_t i = 0; i < c->n; i++) {
		uint32_t s = hash_offset(c->recs[i].data_offset) & (size - 1);
		while (slots[s])
			s = (s + 1) & (size - 1);
		slots[s] = i + 1;
	}
	free(c->slots);
	c->slots = slots;
	c->mask = size - 1;
}

/* The record at @p offset, decoded on first use. NULL with STEER_EMALF in *ret. */
static const gslb_geoip_record_t *cache_get(rec_cache_t *c, const MMDB_s *mmdb, uint32_t offset,
                                            int *ret)
{
	uint32_t s = hash_offset(offset) & c->mask;
	for (; c->slots[s]; s = (s + 1) & c->mask) {
		const gslb_geoip_record_t *r = &c->recs[c->slots[s] - 1];
		if (r->data_offset == offset)
			return r;
	}
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 256;
		c->recs = xrealloc(c->recs, (size_t)c->cap * sizeof(*c->recs));
	}
	gslb_geoip_record_t *r = &c->recs[c->n];
	*ret = decode_record(mmdb, offset, r);
	if (*ret != 0)
		return NULL;
	r->id = c->n++;
	c->slots[s] = r->id + 1;
	if (c->n * 2 > c->mask + 1) /* keep load under 1/2 for short probes */
		cache_grow_slots(c);
	return r;
}

typedef struct {
	const gslb_geoip_db_t *db;
	gslb_geoip_leaf_cb cb;
	void *ctx;
	rec_cache_t cache;
	gslb_geoip_walk_stats_t stats;
	uint8_t path[16]; /* bits taken from the root so far */
	char *err;
	size_t errlen;
} walk_t;

static void path_set(walk_t *w, unsigned bit, bool one)
{
	uint8_t mask = (uint8_t)(0x80u >> (bit & 7));
	if (one)
		w->path[bit >> 3] |= mask;
	else
		w->path[bit >> 3] &= (uint8_t)~mask;
}

/* True when the first @p bits of the path are all zero. */
static bool path_zero(const walk_t *w, unsigned bits)
{
	for (unsigned i = 0; i < bits / 8; i++)
		if (w->path[i])
			return false;
	return bits % 8 == 0 || (w->path[bits / 8] & (uint8_t)(0xFF00u >> (bits % 8))) == 0;
}

static int emit(walk_t *w, int family, unsigned len, const uint8_t *addr,
                const gslb_geoip_record_t *rec)
{
	steer_prefix_t prefix;
	memset(&prefix, 0, sizeof(prefix));
	prefix.family = (sa_family_t)family;
	prefix.len = (uint8_t)len;
	size_t bytes = (len + 7) / 8;
	memcpy(prefix.addr, addr, bytes);
	if (len % 8)
		prefix.addr[bytes - 1] &= (uint8_t)(0xFFu << (8 - len % 8));
	w->stats.leaves++;
	return w->cb(&prefix, rec, w->ctx);
}

/* A data leaf at ::/depth with depth < 96 holds all of IPv4 and some IPv6: report it as
 * 0.0.0.0/0 plus, for each level below, the IPv6 sibling of the zero path, narrowest (lowest
 * address) first to keep the walk in address order. */
static int emit_split_v4(walk_t *w, unsigned depth, const gslb_geoip_record_t *rec)
{
	static const uint8_t zero[16];
	int ret = emit(w, AF_INET, 0, zero, rec);
	for (unsigned k = 96; k > depth && ret == 0; k--) {
		uint8_t addr[16] = {0};
		addr[(k - 1) >> 3] = (uint8_t)(0x80u >> ((k - 1) & 7));
		ret = emit(w, AF_INET6, k, addr, rec);
	}
	return ret;
}

/* MaxMind's writer links these to the IPv4 tree at ::/96 (alias_ipv6_to_ipv4). */
static bool at_alias_location(const uint8_t *path, unsigned depth)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t teredo[4] = {0x20, 0x01, 0, 0};
	static const uint8_t six_to_four[2] = {0x20, 0x02};
	return (depth == 96 && memcmp(path, mapped, sizeof(mapped)) == 0) ||
	       (depth == 32 && memcmp(path, teredo, sizeof(teredo)) == 0) ||
	       (depth == 16 && memcmp(path, six_to_four, sizeof(six_to_four)) == 0);
}

/* True when the record reached at @p depth is a link back to the IPv4 data. */
static bool is_alias(const walk_t *w, uint64_t record, uint8_t type, unsigned depth)
{
	const gslb_geoip_db_t *db = w->db;
	if (db->depth != 128 || db->v4_depth == 0 || record != db->v4_record)
		return false;
	if (depth == db->v4_depth && path_zero(w, depth))
		return false; /* the original */
	/* Every node has one parent in a tree, so a second link to the IPv4 root node is an
	 * alias wherever it is. A data record, though, is legitimately shared by many leaves:
	 * only the writer's alias locations count then. */
	if (type == MMDB_RECORD_TYPE_SEARCH_NODE)
		return true;
	return at_alias_location(w->path, depth);
}

static int walk_data(walk_t *w, uint32_t offset, unsigned depth)
{
	int ret = 0;
	const gslb_geoip_record_t *rec = cache_get(&w->cache, &w->db->mmdb, offset, &ret);
	if (!rec) {
		snprintf(w->err, w->errlen, "%s: corrupt data record at offset %u", w->db->path,
		         offset);
		return ret;
	}
	if (w->db->depth == 32)
		return emit(w, AF_INET, depth, w->path, rec);
	if (depth >= 96 && path_zero(w, 96))
		return emit(w, AF_INET, depth - 96, w->path + 12, rec);
	if (path_zero(w, depth))
		return emit_split_v4(w, depth, rec);
	return emit(w, AF_INET6, depth, w->path, rec);
}

static int walk_node(walk_t *w, uint32_t node, unsigned depth);

/* Follow one record found at @p depth bits (the path holds its bits). */
static int walk_record(walk_t *w, uint64_t record, uint8_t type, const MMDB_entry_s *entry,
                       unsigned depth)
{
	if ((type == MMDB_RECORD_TYPE_SEARCH_NODE || type == MMDB_RECORD_TYPE_DATA) &&
	    is_alias(w, record, type, depth)) {
		w->stats.aliases++;
		return 0;
	}
	switch (type) {
	case MMDB_RECORD_TYPE_SEARCH_NODE:
		return walk_node(w, (uint32_t)record, depth);
	case MMDB_RECORD_TYPE_EMPTY:
		return 0;
	case MMDB_RECORD_TYPE_DATA:
		return walk_data(w, entry->offset, depth);
	default:
		snprintf(w->err, w->errlen, "%s: corrupt search tree (record %llu at depth %u)",
		         w->db->path, (unsigned long long)record, depth);
		return STEER_EMALF;
	}
}

static int walk_node(walk_t *w, uint32_t node, unsigned depth)
{
	/* A valid tree reaches each node once (aliases are skipped) and ends by the address
	 * length; anything else is a corrupt file that could otherwise loop for ever. */
	if (w->stats.nodes >= w->db->mmdb.metadata.node_count || depth >= w->db->depth) {
		snprintf(w->err, w->errlen,
		         "%s: corrupt search tree (node %u reached again or "
		         "below %u bits)",
		         w->db->path, node, w->db->depth);
		return STEER_EMALF;
	}
	w->stats.nodes++;
	MMDB_search_node_s sn;
	if (MMDB_read_node(&w->db->mmdb, node, &sn) != MMDB_SUCCESS) {
		snprintf(w->err, w->errlen, "%s: corrupt search tree (bad node %u)", w->db->path,
		         node);
		return STEER_EMALF;
	}
	path_set(w, depth, false);
	int ret =
	    walk_record(w, sn.left_record, sn.left_record_type, &sn.left_record_entry, depth + 1);
	if (ret == 0) {
		path_set(w, depth, true);
		ret = walk_record(w, sn.right_record, sn.right_record_type, &sn.right_record_entry,
		                  depth + 1);
	}
	path_set(w, depth, false);
	return ret;
}

int gslb_geoip_walk(const gslb_geoip_db_t *db, gslb_geoip_leaf_cb cb, void *ctx,
                    gslb_geoip_walk_stats_t *stats, char *err, size_t errlen)
{
	walk_t w = {.db = db, .cb = cb, .ctx = ctx, .err = err, .errlen = errlen};
	cache_grow_slots(&w.cache);
	int ret = 0;
	if (db->mmdb.metadata.node_count > 0)
		ret = walk_node(&w, 0, 0);
	w.stats.records = w.cache.n;
	w.stats.cache_bytes = (size_t)w.cache.cap * sizeof(*w.cache.recs) +
	                      ((size_t)w.cache.mask + 1) * sizeof(*w.cache.slots);
	if (stats)
		*stats = w.stats;
	free(w.cache.recs);
	free(w.cache.slots);
	return ret;
}

/* =========================================================================================
 * Walking a location database and an ASN database as one
 */

void gslb_geoip_record_merge(const gslb_geoip_record_t *loc, const gslb_geoip_record_t *asn,
                             gslb_geoip_record_t *out)
{
	if (loc) {
		*out = *loc;
	} else {
		memset(out, 0, sizeof(*out));
	}
	out->id = GSLB_GEOIP_NO_ID;
	if (asn && (asn->flags & GSLB_GEOIP_REC_ASN)) {
		out->asn = asn->asn;
		out->flags |= GSLB_GEOIP_REC_ASN;
	}
}

/* One leaf of the ASN database, kept between the two walks. */
typedef struct {
	steer_prefix_t prefix;
	uint32_t rec; /* index into pair_t.recs (the walk's record id) */
} pair_leaf_t;

typedef struct {
	/* the ASN database, walked first: leaves in walk order, records by id */
	pair_leaf_t *leaves;
	size_t n_leaves, cap_leaves;
	gslb_geoip_record_t *recs;
	uint32_t n_recs, cap_recs;
	/* the merge */
	size_t next;     /* first ASN leaf not handled yet */
	size_t last_asn; /* the ASN leaf handled last, SIZE_MAX before the first */
	bool have_loc;
	steer_prefix_t last_loc_prefix; /* the location leaf handled last */
	gslb_geoip_record_t last_loc;   /* its record (city points into the mapping: stays valid) */
	/* dense ids for (location record id, ASN record id) pairs; open addressing */
	uint64_t *keys; /* pair + 1, 0 = free */
	uint32_t *ids;
	uint32_t mask, n_pairs;
	gslb_geoip_leaf_cb cb;
	void *ctx;
	uint64_t leaves_out;
} pair_t;

static int pair_collect(const steer_prefix_t *prefix, const gslb_geoip_record_t *rec, void *ctx)
{
	pair_t *p = ctx;
	if (p->n_leaves == p->cap_leaves) {
		p->cap_leaves = p->cap_leaves ? p->cap_leaves * 2 : 1024;
		p->leaves = xrealloc(p->leaves, p->cap_leaves * sizeof(*p->leaves));
	}
	p->leaves[p->n_leaves++] = (pair_leaf_t){.prefix = *prefix, .rec = rec->id};
	if (rec->id >= p->n_recs) { /* ids are dense, in first-seen order */
		while (rec->id >= p->cap_recs)
			p->cap_recs = p->cap_recs ? p->cap_recs * 2 : 256;
		p->recs = xrealloc(p->recs, (size_t)p->cap_recs * sizeof(*p->recs));
		p->n_recs = rec->id + 1;
	}
	p->recs[rec->id] = *rec;
	return 0;
}

static void pair_grow(pair_t *p)
{
	uint32_t size = p->mask ? (p->mask + 1) * 2 : 1024;
	uint64_t *keys = xcalloc(size, sizeof(*keys));
	uint32_t *ids = xcalloc(size, sizeof(*ids));
	for (uint32_t i = 0; p->mask && i <= p->mask; i++) {
		if (!p->keys[i])
			continue;
		uint32_t s = hash_offset((uint32_t)(p->keys[i] ^ (p->keys[i] >> 29))) & (size - 1);
		while (keys[s])
			s = (s + 1) & (size - 1);
		keys[s] = p->keys[i];
		ids[s] = p->ids[i];
	}
	free(p->keys);
	free(p->ids);
	p->keys = keys;
	p->ids = ids;
	p->mask = size - 1;
}

/* The dense id of the pair (@p loc_id, @p asn_id); GSLB_GEOIP_NO_ID stands for "no record". */
static uint32_t pair_id(pair_t *p, uint32_t loc_id, uint32_t asn_id)
{
	/* never 0: at least one side is a real record, so not both are GSLB_GEOIP_NO_ID */
	uint64_t key = (((uint64_t)loc_id << 32) | asn_id) + 1;
	uint32_t s = hash_offset((uint32_t)(key ^ (key >> 29))) & p->mask;
	for (; p->keys[s]; s = (s + 1) & p->mask)
		if (p->keys[s] == key)
			return p->ids[s];
	p->keys[s] = key;
	p->ids[s] = p->n_pairs++;
	if (p->n_pairs * 2 > p->mask + 1)
		pair_grow(p);
	return p->n_pairs - 1;
}

/* True when @p outer contains @p inner (or equals it). */
static bool prefix_contains(const steer_prefix_t *outer, const steer_prefix_t *inner)
{
	if (outer->family != inner->family || outer->len > inner->len)
		return false;
	unsigned bytes = outer->len / 8u, rest = outer->len % 8u;
	if (memcmp(outer->addr, inner->addr, bytes) != 0)
		return false;
	return rest == 0 ||
	       ((outer->addr[bytes] ^ inner->addr[bytes]) & (uint8_t)(0xFF00u >> rest)) == 0;
}

/* Walk order: IPv4 before IPv6, then by start address, then wider first. */
static int prefix_order(const steer_prefix_t *a, const steer_prefix_t *b)
{
	if (a->family != b->family)
		return a->family == AF_INET ? -1 : 1;
	int c = memcmp(a->addr, b->addr, sizeof(a->addr));
	if (c != 0)
		return c;
	return (a->len > b->len) - (a->len < b->len);
}

static int pair_emit(pair_t *p, const steer_prefix_t *prefix, const gslb_geoip_record_t *loc,
                     const gslb_geoip_record_t *asn)
{
	gslb_geoip_record_t rec;
	gslb_geoip_record_merge(loc, asn, &rec);
	rec.id = pair_id(p, loc ? loc->id : GSLB_GEOIP_NO_ID, asn ? asn->id : GSLB_GEOIP_NO_ID);
	p->leaves_out++;
	return p->cb(prefix, &rec, p->ctx);
}

/* An ASN leaf: inside the location leaf handled last, or alone. Both streams consist of
 * disjoint blocks in walk order, so the only block of the other stream that can contain a
 * block is the one handled just before it. */
static int pair_asn_leaf(pair_t *p, size_t i)
{
	const pair_leaf_t *l = &p->leaves[i];
	bool inside = p->have_loc && prefix_contains(&p->last_loc_prefix, &l->prefix);
	p->last_asn = i;
	return pair_emit(p, &l->prefix, inside ? &p->last_loc : NULL, &p->recs[l->rec]);
}

static int pair_loc_leaf(const steer_prefix_t *prefix, const gslb_geoip_record_t *rec, void *ctx)
{
	pair_t *p = ctx;
	int ret = 0;
	while (ret == 0 && p->next < p->n_leaves &&
	       prefix_order(&p->leaves[p->next].prefix, prefix) < 0)
		ret = pair_asn_leaf(p, p->next++);
	if (ret != 0)
		return ret;
	const gslb_geoip_record_t *asn = NULL;
	if (p->next < p->n_leaves && prefix_order(&p->leaves[p->next].prefix, prefix) == 0) {
		/* the same block in both: one leaf */
		p->last_asn = p->next++;
		asn = &p->recs[p->leaves[p->last_asn].rec];
	} else if (p->last_asn != SIZE_MAX &&
	           prefix_contains(&p->leaves[p->last_asn].prefix, prefix)) {
		asn = &p->recs[p->leaves[p->last_asn].rec];
	}
	p->have_loc = true;
	p->last_loc_prefix = *prefix;
	p->last_loc = *rec;
	return pair_emit(p, prefix, rec, asn);
}

int gslb_geoip_walk_pair(const gslb_geoip_db_t *loc, const gslb_geoip_db_t *asn,
                         gslb_geoip_leaf_cb cb, void *ctx, gslb_geoip_walk_stats_t *stats,
                         char *err, size_t errlen)
{
	pair_t p = {.cb = cb, .ctx = ctx, .last_asn = SIZE_MAX};
	gslb_geoip_walk_stats_t sa = {0}, sl = {0};
	pair_grow(&p);
	int ret = gslb_geoip_walk(asn, pair_collect, &p, &sa, err, errlen);
	size_t held = p.cap_leaves * sizeof(*p.leaves) + (size_t)p.cap_recs * sizeof(*p.recs);
	if (ret == 0)
		ret = gslb_geoip_walk(loc, pair_loc_leaf, &p, &sl, err, errlen);
	while (ret == 0 && p.next < p.n_leaves)
		ret = pair_asn_leaf(&p, p.next++);
	if (stats) {
		size_t pairs = ((size_t)p.mask + 1) * (sizeof(*p.keys) + sizeof(*p.ids));
		/* the ASN leaves are held through both walks */
		size_t peak =
		    held + (sa.cache_bytes > sl.cache_bytes ? sa.cache_bytes : sl.cache_bytes);
		*stats = (gslb_geoip_walk_stats_t){
		    .leaves = p.leaves_out,
		    .records = p.n_pairs,
		    .nodes = sa.nodes + sl.nodes,
		    .aliases = sa.aliases + sl.aliases,
		    .cache_bytes = peak + pairs,
		};
	}
	free(p.leaves);
	free(p.recs);
	free(p.keys);
	free(p.ids);
	return ret;
}

/* =========================================================================================
 * Rules
 */

/* A location rule, also used as the probe built from a record (then city is borrowed and
 * def/dcs are unused). Sorted by loc_cmp so a record needs one binary search per depth. */
typedef struct {
	char continent[3];
	char country[3];
	char subdivision[4]; /* "" at depth 4 matches records without one */
	uint8_t depth;       /* components: 1 continent .. 4 city */
	uint32_t city_id;    /* depth 4 by geoname_id, else 0 */
	const char *city;    /* depth 4 by name (owned by the rules), else NULL */
	uint16_t city_len;
	uint16_t n_dcs;
	uint32_t dcs_off; /* into gslb_geoip_rules.dcs */
	size_t def;       /* index of the definition */
} loc_rule_t;

typedef struct {
	uint32_t asn;
	uint16_t n_dcs;
	uint32_t dcs_off;
	size_t def;
} asn_rule_t;

struct gslb_geoip_rules {
	loc_rule_t *loc; /* sorted by loc_cmp */
	size_t n_loc;
	asn_rule_t *asn; /* sorted by asn */
	size_t n_asn;
	uint16_t *dcs; /* every rule's list, back to back */
	size_t n_dc;
	gslb_geoip_opts_t opts;
};

static int ascii_lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* City names compare ASCII case-insensitively, byte-wise beyond ASCII (UTF-8 as stored). */
static int city_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	for (size_t i = 0; i < n; i++) {
		int x = ascii_lower((unsigned char)a[i]), y = ascii_lower((unsigned char)b[i]);
		if (x != y)
			return x - y;
	}
	return (alen > blen) - (alen < blen);
}

static int loc_cmp(const void *pa, const void *pb)
{
	const loc_rule_t *a = pa, *b = pb;
	int c = (int)a->depth - (int)b->depth;
	if (c == 0)
		c = strcmp(a->continent, b->continent);
	if (c == 0)
		c = strcmp(a->country, b->country);
	if (c == 0)
		c = strcmp(a->subdivision, b->subdivision);
	if (c == 0 && a->city_id != b->city_id)
		c = a->city_id < b->city_id ? -1 : 1;
	if (c == 0)
		c = city_cmp(a->city ? a->city : "", a->city_len, b->city ? b->city : "",
		             b->city_len);
	return c;
}

static int asn_cmp(const void *pa, const void *pb)
{
	const asn_rule_t *a = pa, *b = pb;
	return (a->asn > b->asn) - (a->asn < b->asn);
}

/* Copy @p len characters of a code, uppercased, requiring letters (and digits when
 * @p digits). */
static bool parse_code(const char *s, size_t len, size_t min, size_t max, bool digits, char *dst)
{
	if (len < min || len > max)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
		if (!letter && !(digits && c >= '0' && c <= '9'))
			return false;
		dst[i] = (char)(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
	}
	dst[len] = '\0';
	return true;
}

static bool parse_continent(const char *s, size_t len, char *dst)
{
	static const char *const known[] = {"AF", "AN", "AS", "EU", "NA", "OC", "SA"};
	if (!parse_code(s, len, 2, 2, false, dst))
		return false;
	for (size_t i = 0; i < STEER_ARRAY_LEN(known); i++)
		if (strcmp(dst, known[i]) == 0)
			return true;
	return false;
}

/* The 4th component: a geoname_id when all digits, else a city name. */
static int parse_city(const char *s, size_t len, loc_rule_t *r, char *err, size_t errlen)
{
	if (len == 0 || len > UINT16_MAX || s[0] == ' ' || s[len - 1] == ' ') {
		snprintf(err, errlen, "bad city '%.*s' (empty, too long or padded with spaces)",
		         (int)(len > 64 ? 64 : len), s);
		return STEER_ESYNTAX;
	}
	size_t digits = strspn(s, "0123456789");
	if (digits >= len) {
		unsigned long long id = len <= 10 ? strtoull(s, NULL, 10) : 0;
		if (id == 0 || id > UINT32_MAX) {
			snprintf(err, errlen, "bad geoname_id '%.*s'", (int)len, s);
			return STEER_ERANGE;
		}
		r->city_id = (uint32_t)id;
		return 0;
	}
	char *city = xmalloc(len + 1);
	for (size_t i = 0; i < len; i++)
		city[i] = (char)ascii_lower((unsigned char)s[i]);
	city[len] = '\0';
	r->city = city;
	r->city_len = (uint16_t)len;
	return 0;
}

/* Parse "continent[/country[/subdivision[/city]]]" into @p r. */
static int parse_path(const char *path, loc_rule_t *r, char *err, size_t errlen)
{
	const char *part[5];
	size_t len[5], n = 0;
	for (const char *p = path;; n++) {
		const char *slash = strchr(p, '/');
		if (n == 4) {
			snprintf(err, errlen, "'%s': more than 4 components", path);
			return STEER_ESYNTAX;
		}
		part[n] = p;
		len[n] = slash ? (size_t)(slash - p) : strlen(p);
		if (!slash) {
			n++;
			break;
		}
		p = slash + 1;
	}
	r->depth = (uint8_t)n;
	if (!parse_continent(part[0], len[0], r->continent)) {
		snprintf(err, errlen,
		         "'%s': unknown continent '%.*s' (want AF, AN, AS, EU, NA, OC "
		         "or SA)",
		         path, (int)len[0], part[0]);
		return STEER_ESYNTAX;
	}
	if (n >= 2 && !parse_code(part[1], len[1], 2, 2, false, r->country)) {
		snprintf(err, errlen, "'%s': bad country '%.*s' (want an ISO 3166-1 alpha-2 code)",
		         path, (int)len[1], part[1]);
		return STEER_ESYNTAX;
	}
	bool empty_sub_ok = n == 4 && len[2] == 0;
	if (n >= 3 && !empty_sub_ok && !parse_code(part[2], len[2], 1, 3, true, r->subdivision)) {
		snprintf(err, errlen,
		         "'%s': bad subdivision '%.*s' (want the 1-3 character ISO "
		         "3166-2 suffix, e.g. 31 for CN-31)",
		         path, (int)len[2], part[2]);
		return STEER_ESYNTAX;
	}
	if (n == 4) {
		int ret = parse_city(part[3], len[3], r, err, errlen);
		if (ret != 0) {
			size_t used = strlen(err);
			snprintf(err + used, errlen > used ? errlen - used : 0, " in '%s'", path);
			return ret;
		}
	}
	return 0;
}

/* Append a definition's datacenter list to rules->dcs after checking it. */
static int add_dcs(gslb_geoip_rules_t *rules, size_t *used, const gslb_geoip_rule_def_t *def,
                   uint32_t *off, uint16_t *n, char *err, size_t errlen)
{
	if (def->n_dcs == 0 || !def->dcs) {
		snprintf(err, errlen, "empty datacenter list");
		return STEER_EINVAL;
	}
	if (def->n_dcs > rules->n_dc) {
		snprintf(err, errlen, "%zu datacenters listed, the map has %zu: one is repeated",
		         def->n_dcs, rules->n_dc);
		return STEER_EEXIST;
	}
	for (size_t i = 0; i < def->n_dcs; i++) {
		if (def->dcs[i] >= rules->n_dc) {
			snprintf(err, errlen, "datacenter index %u out of range (map has %zu)",
			         def->dcs[i], rules->n_dc);
			return STEER_ERANGE;
		}
		for (size_t j = 0; j < i; j++) {
			if (def->dcs[j] == def->dcs[i]) {
				snprintf(err, errlen, "datacenter index %u listed twice",
				         def->dcs[i]);
				return STEER_EEXIST;
			}
		}
	}
	*off = (uint32_t)*used;
	*n = (uint16_t)def->n_dcs;
	memcpy(rules->dcs + *used, def->dcs, def->n_dcs * sizeof(*def->dcs));
	*used += def->n_dcs;
	return 0;
}

static int add_rule(gslb_geoip_rules_t *rules, size_t i, const gslb_geoip_rule_def_t *def,
                    size_t *dcs_used, char *err, size_t errlen)
{
	if (!def->match == !def->asns || (def->asns && def->n_asns == 0)) {
		snprintf(err, errlen,
		         "a rule needs exactly one of a location match or an ASN "
		         "list");
		return STEER_EINVAL;
	}
	uint32_t off = 0;
	uint16_t n = 0;
	int ret = add_dcs(rules, dcs_used, def, &off, &n, err, errlen);
	if (ret != 0)
		return ret;
	if (def->match) {
		loc_rule_t *r = &rules->loc[rules->n_loc++];
		memset(r, 0, sizeof(*r));
		r->def = i;
		r->dcs_off = off;
		r->n_dcs = n;
		return parse_path(def->match, r, err, errlen);
	}
	for (size_t k = 0; k < def->n_asns; k++) {
		if (def->asns[k] == 0) {
			snprintf(err, errlen, "ASN 0 is reserved (RFC 7607) and never in data");
			return STEER_ERANGE;
		}
		asn_rule_t *a = &rules->asn[rules->n_asn++];
		*a = (asn_rule_t){.asn = def->asns[k], .n_dcs = n, .dcs_off = off, .def = i};
	}
	return 0;
}

/* After sorting, equal neighbours are the same key given twice: blame the later rule. */
static int check_duplicates(const gslb_geoip_rules_t *rules, size_t *bad, char *err, size_t errlen)
{
	for (size_t i = 1; i < rules->n_loc; i++) {
		const loc_rule_t *a = &rules->loc[i - 1], *b = &rules->loc[i];
		if (loc_cmp(a, b) == 0) {
			*bad = a->def > b->def ? a->def : b->def;
			snprintf(err, errlen, "same location as rule %zu",
			         a->def < b->def ? a->def : b->def);
			return STEER_EEXIST;
		}
	}
	for (size_t i = 1; i < rules->n_asn; i++) {
		const asn_rule_t *a = &rules->asn[i - 1], *b = &rules->asn[i];
		if (a->asn == b->asn) {
			*bad = a->def > b->def ? a->def : b->def;
			snprintf(err, errlen, "ASN %u already in rule %zu", a->asn,
			         a->def < b->def ? a->def : b->def);
			return STEER_EEXIST;
		}
	}
	return 0;
}

static gslb_geoip_rules_t *rules_alloc(const gslb_geoip_rule_def_t *defs, size_t n_defs,
                                       size_t n_dc)
{
	size_t n_asns = 0, n_loc = 0, n_dcs = 0;
	for (size_t i = 0; i < n_defs; i++) {
		n_loc += defs[i].match != NULL;
		n_asns += defs[i].asns ? defs[i].n_asns : 0;
		n_dcs += defs[i].n_dcs <= n_dc ? defs[i].n_dcs : 0;
	}
	gslb_geoip_rules_t *rules = xcalloc(1, sizeof(*rules));
	rules->n_dc = n_dc;
	rules->loc = xcalloc(n_loc ? n_loc : 1, sizeof(*rules->loc));
	rules->asn = xcalloc(n_asns ? n_asns : 1, sizeof(*rules->asn));
	rules->dcs = xcalloc(n_dcs ? n_dcs : 1, sizeof(*rules->dcs));
	return rules;
}

int gslb_geoip_rules_new(const gslb_geoip_rule_def_t *defs, size_t n_defs, size_t n_dc,
                         const gslb_geoip_opts_t *opts, gslb_geoip_rules_t **out, size_t *bad_rule,
                         char *err, size_t errlen)
{
	*out = NULL;
	size_t bad = 0;
	if (n_dc > GSLB_GEOIP_MAX_DC || (n_defs > 0 && !defs)) {
		snprintf(err, errlen, "%zu datacenters, at most %u", n_dc, GSLB_GEOIP_MAX_DC);
		if (bad_rule)
			*bad_rule = 0;
		return STEER_ERANGE;
	}
	gslb_geoip_rules_t *rules = rules_alloc(defs, n_defs, n_dc);
	rules->opts = *opts;
	size_t dcs_used = 0;
	int ret = 0;
	for (size_t i = 0; i < n_defs && ret == 0; i++) {
		bad = i;
		ret = add_rule(rules, i, &defs[i], &dcs_used, err, errlen);
	}
	if (ret == 0) {
		qsort(rules->loc, rules->n_loc, sizeof(*rules->loc), loc_cmp);
		qsort(rules->asn, rules->n_asn, sizeof(*rules->asn), asn_cmp);
		ret = check_duplicates(rules, &bad, err, errlen);
	}
	if (ret != 0) {
		if (bad_rule)
			*bad_rule = bad;
		gslb_geoip_rules_free(rules);
		return ret;
	}
	*out = rules;
	return 0;
}

void gslb_geoip_rules_free(gslb_geoip_rules_t *rules)
{
	if (!rules)
		return;
	for (size_t i = 0; i < rules->n_loc; i++)
		free((char *)rules->loc[i].city);
	free(rules->loc);
	free(rules->asn);
	free(rules->dcs);
	free(rules);
}

bool gslb_geoip_rules_use_asn(const gslb_geoip_rules_t *rules)
{
	return rules->n_asn > 0;
}

bool gslb_geoip_rules_use_location(const gslb_geoip_rules_t *rules)
{
	return rules->n_loc > 0 || rules->opts.auto_distance;
}

const char *gslb_geoip_how_str(gslb_geoip_how_t how)
{
	switch (how) {
	case GSLB_GEOIP_NO_MATCH:
		return "none";
	case GSLB_GEOIP_BY_ASN:
		return "asn";
	case GSLB_GEOIP_BY_LOCATION:
		return "location";
	case GSLB_GEOIP_BY_DISTANCE:
		return "distance";
	}
	return "?";
}

/* =========================================================================================
 * Classification
 */

static const loc_rule_t *find_loc_at(const gslb_geoip_rules_t *rules, const loc_rule_t *probe)
{
	return bsearch(probe, rules->loc, rules->n_loc, sizeof(*rules->loc), loc_cmp);
}

/* The deepest location rule matching @p rec, or NULL. */
static const loc_rule_t *find_loc(const gslb_geoip_rules_t *rules, const gslb_geoip_record_t *rec)
{
	if (rules->n_loc == 0 || rec->continent[0] == '\0')
		return NULL;
	loc_rule_t probe;
	memset(&probe, 0, sizeof(probe));
	memcpy(probe.continent, rec->continent, sizeof(probe.continent));
	memcpy(probe.country, rec->country, sizeof(probe.country));
	memcpy(probe.subdivision, rec->subdivision, sizeof(probe.subdivision));
	const loc_rule_t *found = NULL;
	if (rec->country[0] != '\0') {
		probe.depth = 4;
		if (rec->city_geoname_id != 0) {
			probe.city_id = rec->city_geoname_id;
			found = find_loc_at(rules, &probe);
			probe.city_id = 0;
		}
		if (!found && rec->city) {
			probe.city = rec->city;
			probe.city_len = rec->city_len;
			found = find_loc_at(rules, &probe);
			probe.city = NULL;
			probe.city_len = 0;
		}
		probe.depth = 3;
		if (!found && rec->subdivision[0] != '\0')
			found = find_loc_at(rules, &probe);
		probe.subdivision[0] = '\0';
		probe.depth = 2;
		if (!found)
			found = find_loc_at(rules, &probe);
	}
	probe.country[0] = '\0';
	probe.subdivision[0] = '\0';
	probe.depth = 1;
	return found ? found : find_loc_at(rules, &probe);
}

static const asn_rule_t *find_asn(const gslb_geoip_rules_t *rules, const gslb_geoip_record_t *rec)
{
	if (rules->n_asn == 0 || !(rec->flags & GSLB_GEOIP_REC_ASN))
		return NULL;
	asn_rule_t probe = {.asn = rec->asn};
	return bsearch(&probe, rules->asn, rules->n_asn, sizeof(*rules->asn), asn_cmp);
}

int gslb_geoip_classify(const gslb_geoip_rules_t *rules, const gslb_geoip_record_t *rec,
                        const gslb_geo_coords_t *dc_coords, size_t n_dc, uint16_t *out,
                        size_t *out_len, gslb_geoip_match_t *match)
{
	size_t cap = *out_len;
	*out_len = 0;
	if (n_dc != rules->n_dc)
		return STEER_EINVAL;
	gslb_geoip_match_t m = {.how = GSLB_GEOIP_NO_MATCH};
	uint32_t off = 0;
	size_t n = 0;
	const asn_rule_t *a = find_asn(rules, rec);
	const loc_rule_t *l = a ? NULL : find_loc(rules, rec);
	if (a) {
		m = (gslb_geoip_match_t){.how = GSLB_GEOIP_BY_ASN, .rule = a->def};
		off = a->dcs_off;
		n = a->n_dcs;
	} else if (l) {
		m = (gslb_geoip_match_t){
		    .how = GSLB_GEOIP_BY_LOCATION, .rule = l->def, .depth = l->depth};
		off = l->dcs_off;
		n = l->n_dcs;
	}
	if (n > 0) {
		if (n > cap || !out)
			return STEER_ESPACE;
		memcpy(out, rules->dcs + off, n * sizeof(*out));
		*out_len = n;
	} else if (rules->opts.auto_distance && (rec->flags & GSLB_GEOIP_REC_LOCATION) && n_dc) {
		int got = gslb_geo_order_by_distance(rec->lat, rec->lon, dc_coords, n_dc,
		                                     rules->opts.auto_limit, out, out ? cap : 0);
		if (got < 0)
			return got;
		if (got > 0) {
			m.how = GSLB_GEOIP_BY_DISTANCE;
			*out_len = (size_t)got;
		}
	}
	if (match)
		*match = m;
	return 0;
}
