/*
 * GeoIP databases over libmaxminddb: opening them, decoding records and single lookups (the
 * query of `explain`, and what the walk decodes per leaf). Control thread. The search tree
 * format is https://maxmind.github.io/MaxMind-DB/.
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
#include "gslb/geoip_int.h"

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

int geoip_decode_record(const MMDB_s *mmdb, uint32_t offset, gslb_geoip_record_t *rec)
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
	return geoip_decode_record(&db->mmdb, res.entry.offset, rec);
}
