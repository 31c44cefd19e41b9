/*
 * Journal files: zone_journal_t to bytes and back (the format is in journal_file.h). Control
 * thread only; the parser keeps no state, so the fuzz target drives it directly.
 *
 * The parser validates every change as strictly as the transfer code trusts it: IXFR out
 * walks a change with zone_change_read(), which believes the lengths it finds, so a record
 * that overruns its change would be a read past the buffer on a TCP thread.
 */
#include "zone/journal_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/file.h"
#include "dns/const.h"
#include "dns/dname.h"
#include "dns/wire.h"

static const uint8_t MAGIC[8] = {'S', 'T', 'E', 'E', 'R', 'J', 'N', 'L'};

/* from, to, deleted, added, length: the fixed part before a change's data. */
#define CHANGE_HEAD 20
/* The fewest bytes a change takes on disk (head, checksum), to bound the count before
 * allocating for it. */
#define CHANGE_MIN (CHANGE_HEAD + 4)

/* zlib's crc32() over @p n bytes, chained from @p crc (0 to start). */
static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n)
{
	return (uint32_t)crc32_z(crc, p, n);
}

/* ---- writing ----------------------------------------------------------------------------- */

typedef struct {
	FILE *f;
	uint32_t crc;
} writer_t;

static void w_put(writer_t *w, const void *p, size_t n)
{
	w->crc = crc_update(w->crc, p, n);
	(void)fwrite(p, 1, n, w->f); /* ferror() is checked once at the end */
}

/* Ends a checksummed part with its checksum and starts the next one. */
static void w_seal(writer_t *w)
{
	uint8_t b[4];
	wire_write_u32(b, w->crc);
	(void)fwrite(b, 1, sizeof(b), w->f);
	w->crc = 0;
}

static void write_change(writer_t *w, const zone_change_t *c)
{
	uint8_t head[CHANGE_HEAD];
	wire_write_u32(head, c->from);
	wire_write_u32(head + 4, c->to);
	wire_write_u32(head + 8, (uint32_t)c->n_del);
	wire_write_u32(head + 12, (uint32_t)c->n_add);
	wire_write_u32(head + 16, (uint32_t)c->len);
	w_put(w, head, sizeof(head));
	w_put(w, c->data, c->len);
	w_seal(w);
}

int zone_journal_write(FILE *f, const uint8_t *apex, uint64_t digest, const zone_journal_t *journal)
{
	writer_t w = {.f = f};
	uint8_t head[sizeof(MAGIC) + 17];
	size_t apex_len = dname_len(apex);
	memcpy(head, MAGIC, sizeof(MAGIC));
	wire_write_u16(head + 8, ZONE_JOURNAL_FILE_VERSION);
	wire_write_u16(head + 10, 0);
	wire_write_u32(head + 12, (uint32_t)journal->n);
	wire_write_u32(head + 16, (uint32_t)(digest >> 32));
	wire_write_u32(head + 20, (uint32_t)digest);
	head[24] = (uint8_t)apex_len;
	w_put(&w, head, sizeof(head));
	w_put(&w, apex, apex_len);
	w_seal(&w);
	for (size_t i = 0; i < journal->n; i++)
		write_change(&w, journal->changes[i]);
	return ferror(f) ? -EIO : 0;
}

typedef struct {
	const uint8_t *apex;
	uint64_t digest;
	const zone_journal_t *journal;
} save_ctx_t;

static int save_fill(FILE *f, void *arg)
{
	const save_ctx_t *ctx = arg;
	return zone_journal_write(f, ctx->apex, ctx->digest, ctx->journal);
}

int zone_journal_save(const char *path, const uint8_t *apex, uint64_t digest,
                      const zone_journal_t *journal)
{
	save_ctx_t ctx = {apex, digest, journal};
	return steer_file_replace(path, 0644, save_fill, &ctx);
}

/* ---- reading ----------------------------------------------------------------------------- */

typedef struct {
	wire_ctx_t w;
	const uint8_t *part; /* where the current checksummed part began */
	char *err;
	size_t errlen;
} reader_t;

static int r_fail(reader_t *r, int code, const char *fmt, ...) STEER_PRINTF(3, 4);

static int r_fail(reader_t *r, int code, const char *fmt, ...)
{
	int n = snprintf(r->err, r->errlen, "at byte %zu: ", wire_ctx_offset(&r->w));
	if (n >= 0 && (size_t)n < r->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* Checks the checksum that closes the part begun at r->part; the next part starts after it. */
static int r_check_seal(reader_t *r, const char *what)
{
	const uint8_t *end = r->w.pos;
	uint32_t want = wire_ctx_read_u32(&r->w);
	if (r->w.err)
		return r_fail(r, STEER_ETRUNC, "%s: the file ends early", what);
	if (crc_update(0, r->part, (size_t)(end - r->part)) != want)
		return r_fail(r, STEER_EMALF, "%s: checksum mismatch", what);
	r->part = r->w.pos;
	return 0;
}

/* Length of the uncompressed name at @p p, within @p max bytes; 0 when it is not one. */
static size_t name_len(const uint8_t *p, size_t max)
{
	size_t pos = 0;
	for (;;) {
		if (pos >= max || p[pos] > 63)
			return 0;
		size_t label = p[pos];
		pos += 1 + label;
		if (pos > DNS_DNAME_MAXLEN)
			return 0;
		if (label == 0)
			return pos;
	}
}

static int read_header(reader_t *r, const uint8_t *apex, uint32_t *n_changes, uint64_t *digest)
{
	const uint8_t *magic = r->w.pos;
	wire_ctx_skip(&r->w, sizeof(MAGIC));
	if (r->w.err || memcmp(magic, MAGIC, sizeof(MAGIC)) != 0)
		return r_fail(r, r->w.err ? STEER_ETRUNC : STEER_EMALF, "not a journal file");
	uint16_t version = wire_ctx_read_u16(&r->w);
	uint16_t reserved = wire_ctx_read_u16(&r->w);
	*n_changes = wire_ctx_read_u32(&r->w);
	*digest = (uint64_t)wire_ctx_read_u32(&r->w) << 32;
	*digest |= wire_ctx_read_u32(&r->w);
	uint8_t apex_len = wire_ctx_read_u8(&r->w);
	const uint8_t *name = r->w.pos;
	wire_ctx_skip(&r->w, apex_len);
	if (r->w.err)
		return r_fail(r, STEER_ETRUNC, "header: the file ends early");
	if (version != ZONE_JOURNAL_FILE_VERSION || reserved != 0)
		return r_fail(r, STEER_EMALF, "format version %u, this steerd reads %u", version,
		              ZONE_JOURNAL_FILE_VERSION);
	int ret = r_check_seal(r, "header");
	if (ret != 0)
		return ret;
	if (name_len(name, apex_len) != apex_len || !dname_equal(name, apex))
		return r_fail(r, STEER_EMALF, "the file is another zone's");
	return 0;
}

/* The serial of an SOA's rdata, or false when it is not a well-formed SOA. */
static bool soa_serial(const uint8_t *rdata, size_t rdlen, uint32_t *serial)
{
	size_t mname = name_len(rdata, rdlen);
	size_t rname = mname ? name_len(rdata + mname, rdlen - mname) : 0;
	if (rname == 0 || rdlen - mname - rname != 20)
		return false;
	*serial = wire_read_u32(rdata + mname + rname);
	return true;
}

/*
 * Checks that the change's data is n_del + n_add records of the zone @p apex filling it
 * exactly, each half opened by the apex SOA of the change's serial. Returns NULL when it is,
 * or what is wrong.
 */
static const char *check_records(const zone_change_t *c, const uint8_t *apex)
{
	size_t pos = 0, n = 0;
	while (pos < c->len) {
		const uint8_t *rr = c->data + pos;
		size_t left = c->len - pos, owner = name_len(rr, left);
		if (owner == 0 || left - owner < 8)
			return "a record's owner or header is malformed";
		uint16_t type = wire_read_u16(rr + owner), rdlen = wire_read_u16(rr + owner + 6);
		if (left - owner - 8 < rdlen)
			return "a record's rdata runs past the change";
		if (!dname_is_subdomain(rr, apex))
			return "a record is outside the zone";
		if (n == 0 || n == c->n_del) {
			uint32_t serial;
			bool soa = type == DNS_TYPE_SOA && dname_equal(rr, apex) &&
			           soa_serial(rr + owner + 8, rdlen, &serial);
			if (!soa || serial != (n == 0 ? c->from : c->to))
				return "a part does not open with the zone's SOA of its serial";
		}
		pos += owner + 8 + rdlen;
		n++;
	}
	return n == c->n_del + c->n_add ? NULL : "the record counts do not match the data";
}

/* The next change, or NULL with the reason in r->err and the code in @p ret. */
static zone_change_t *read_change(reader_t *r, const uint8_t *apex, int *ret)
{
	uint32_t from = wire_ctx_read_u32(&r->w), to = wire_ctx_read_u32(&r->w);
	uint32_t n_del = wire_ctx_read_u32(&r->w), n_add = wire_ctx_read_u32(&r->w);
	uint32_t len = wire_ctx_read_u32(&r->w);
	const uint8_t *data = r->w.pos;
	wire_ctx_skip(&r->w, len);
	if (r->w.err) {
		*ret = r_fail(r, STEER_ETRUNC, "change %u..%u: the file ends early", from, to);
		return NULL;
	}
	if ((*ret = r_check_seal(r, "change")) != 0)
		return NULL;
	if (n_del == 0 || n_add == 0 || !zone_serial_gt(to, from)) {
		*ret = r_fail(r, STEER_EMALF, "change %u..%u: not a change", from, to);
		return NULL;
	}
	zone_change_t *c = xcalloc(1, sizeof(*c));
	*c = (zone_change_t){.from = from, .to = to, .len = len, .n_del = n_del, .n_add = n_add};
	c->data = xmalloc(len ? len : 1);
	memcpy(c->data, data, len);
	c->refcount = 1;
	const char *why = check_records(c, apex);
	if (why != NULL) {
		free(c->data);
		free(c);
		*ret = r_fail(r, STEER_EMALF, "change %u..%u: %s", from, to, why);
		return NULL;
	}
	return c;
}

static int read_changes(reader_t *r, const uint8_t *apex, zone_journal_t *j, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		int ret = 0;
		zone_change_t *c = read_change(r, apex, &ret);
		if (c == NULL)
			return ret;
		j->changes[j->n++] = c;
		j->bytes += c->len;
		if (i > 0 && j->changes[i - 1]->to != c->from)
			return r_fail(r, STEER_EMALF, "change %u..%u does not follow serial %u",
			              c->from, c->to, j->changes[i - 1]->to);
	}
	if (wire_ctx_available(&r->w) != 0)
		return r_fail(r, STEER_EMALF, "data after the last change");
	return 0;
}

int zone_journal_parse(const uint8_t *data, size_t len, const uint8_t *apex, zone_journal_t **out,
                       uint64_t *digest, char *err, size_t errlen)
{
	*out = NULL;
	*digest = 0;
	if (errlen > 0)
		err[0] = '\0';
	reader_t r = {
	    .w = wire_ctx_init_const(data, len), .part = data, .err = err, .errlen = errlen};
	uint32_t n = 0;
	int ret = read_header(&r, apex, &n, digest);
	if (ret != 0)
		return ret;
	if (n > wire_ctx_available(&r.w) / CHANGE_MIN)
		return r_fail(&r, STEER_ETRUNC, "%u changes announced, the file is too short", n);
	if (n == 0)
		return wire_ctx_available(&r.w) ? r_fail(&r, STEER_EMALF, "data after the header")
		                                : 0;
	zone_journal_t *j = xcalloc(1, sizeof(*j));
	j->changes = xcalloc(n, sizeof(*j->changes));
	j->refcount = 1;
	ret = read_changes(&r, apex, j, n);
	if (ret != 0) {
		zone_journal_unref(j);
		return ret;
	}
	*out = j;
	return 0;
}

/* The whole file at @p fd into a new buffer (*data, *len). Returns 0 or a negative errno. */
static int read_all(int fd, uint8_t **data, size_t *len)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	size_t size = (size_t)st.st_size, got = 0;
	uint8_t *buf = xmalloc(size ? size : 1);
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* shrunk under us: parse what is there, the checks will say */
		got += (size_t)n;
	}
	*data = buf;
	*len = got;
	return 0;
}

int zone_journal_load(const char *path, const uint8_t *apex, zone_journal_t **out, uint64_t *digest,
                      char *err, size_t errlen)
{
	*out = NULL;
	if (errlen > 0)
		err[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int ret = -errno;
		snprintf(err, errlen, "%s: %s", path, steer_strerror(ret));
		return ret;
	}
	uint8_t *data = NULL;
	size_t len = 0;
	int ret = read_all(fd, &data, &len);
	close(fd);
	if (ret == 0)
		ret = zone_journal_parse(data, len, apex, out, digest, err, errlen);
	else
		snprintf(err, errlen, "%s: %s", path, steer_strerror(ret));
	free(data);
	return ret;
}
