/*
 * Codecs of the site table and demand bodies (layouts in pathfmt.h). One validation per row
 * kind serves both directions, so the encoder refuses exactly what the decoder would reject.
 * The decoders check the announced row counts against the body length before allocating, so
 * a hostile header can neither overflow a size nor make the node allocate more than the body
 * it actually received. Pure functions; any thread.
 */
#include "gslb/pathfmt.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/alloc.h"
#include "base/err.h"
#include "dns/wire.h"

static const uint8_t table_magic[4] = {'S', 'T', 'P', 'T'};
static const uint8_t demand_magic[4] = {'S', 'T', 'P', 'D'};

#define FORMAT_VERSION 1
#define PLEN4_MIN      8 /* shorter prefixes are no client network anyone measures */
#define PLEN4_MAX      32
#define PLEN6_MIN      16
#define PLEN6_MAX      64 /* the table keeps the top 64 bits of IPv6 addresses */
#define LOSS_MAX       100

_Static_assert(GSLB_PATHFMT_ROW4 == 4 + 8, "IPv4 row: prefix u32 and the 8 shared bytes");
_Static_assert(GSLB_PATHFMT_ROW6 == 8 + 8, "IPv6 row: prefix u64 and the 8 shared bytes");
_Static_assert(GSLB_PATHFMT_DEMAND_ROW == 8 + 16 + 16, "demand row: 8 bytes and 2 addresses");

STEER_PRINTF(3, 4) static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return STEER_EINVAL;
}

static uint64_t read_u64(const uint8_t *p)
{
	return (uint64_t)wire_read_u32(p) << 32 | wire_read_u32(p + 4);
}

static void write_u64(uint8_t *p, uint64_t v)
{
	wire_write_u32(p, (uint32_t)(v >> 32));
	wire_write_u32(p + 4, (uint32_t)v);
}

/* The top @p plen bits of a 64-bit value (plen 0..64). */
static uint64_t mask64(uint64_t v, unsigned plen)
{
	return plen == 0 ? 0 : plen >= 64 ? v : v & ~(UINT64_MAX >> plen);
}

uint64_t gslb_pathfmt_key(int family, const uint8_t *addr, unsigned plen)
{
	STEER_ASSERT(family == AF_INET || family == AF_INET6);
	if (family == AF_INET)
		return mask64((uint64_t)wire_read_u32(addr) << 32, plen > 32 ? 32 : plen);
	return mask64(read_u64(addr), plen);
}

static bool name_ok(const char *name, size_t len)
{
	static const char allowed[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.";
	if (len == 0 || len > GSLB_PATHFMT_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!name[i] || !strchr(allowed, name[i]))
			return false;
	}
	return true;
}

/* ---- site table ------------------------------------------------------------------------- */

/* "10.1.2.0/24" or "2001:db8::/48" for messages. */
static const char *row_text(const gslb_path_row_t *r, bool v6, char *buf, size_t len)
{
	uint8_t addr[16] = {0};
	char text[INET6_ADDRSTRLEN];
	if (v6)
		write_u64(addr, r->prefix);
	else
		wire_write_u32(addr, (uint32_t)(r->prefix >> 32));
	inet_ntop(v6 ? AF_INET6 : AF_INET, addr, text, sizeof(text));
	snprintf(buf, len, "%s/%u", text, r->plen);
	return buf;
}

static int row_cmp(const gslb_path_row_t *a, const gslb_path_row_t *b)
{
	if (a->prefix != b->prefix)
		return a->prefix < b->prefix ? -1 : 1;
	return (a->plen > b->plen) - (a->plen < b->plen);
}

/* Why row @p r (after @p prev, NULL for the first) breaks the format, or NULL. */
static const char *row_problem(const gslb_path_row_t *r, const gslb_path_row_t *prev, bool v6)
{
	unsigned lo = v6 ? PLEN6_MIN : PLEN4_MIN, hi = v6 ? PLEN6_MAX : PLEN4_MAX;
	if (r->plen < lo || r->plen > hi)
		return v6 ? "prefix length out of range (16..64)"
		          : "prefix length out of range (8..32)";
	if (!v6 && (uint32_t)r->prefix != 0)
		return "IPv4 prefix beyond 32 bits";
	if (mask64(r->prefix, r->plen) != r->prefix)
		return "host bits set";
	if (r->loss > LOSS_MAX)
		return "loss above 100 percent";
	if (r->rtt == GSLB_PATHFMT_RTT_NONE && r->answered > 0)
		return "answered samples but no RTT";
	if (prev && row_cmp(prev, r) == 0)
		return "duplicate prefix";
	if (prev && row_cmp(prev, r) > 0)
		return "prefixes out of order";
	return NULL;
}

static int rows_check(const gslb_path_row_t *rows, size_t n, bool v6, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		const char *why = row_problem(&rows[i], i ? &rows[i - 1] : NULL, v6);
		if (why) {
			char text[64];
			return fail(err, errlen, "%s row %zu (%s): %s", v6 ? "IPv6" : "IPv4", i,
			            row_text(&rows[i], v6, text, sizeof(text)), why);
		}
	}
	return 0;
}

int gslb_pathfmt_check_table(const gslb_path_table_t *t, char *err, size_t errlen)
{
	size_t len = strnlen(t->name, sizeof(t->name));
	if (!name_ok(t->name, len))
		return fail(err, errlen,
		            "datacenter name must be 1..%d of letters, digits, '-', '_' and '.'",
		            GSLB_PATHFMT_NAME_MAX);
	if (t->n4 > UINT32_MAX || t->n6 > UINT32_MAX)
		return fail(err, errlen, "more than %u rows of one family", UINT32_MAX);
	int ret = rows_check(t->rows4, t->n4, false, err, errlen);
	return ret ? ret : rows_check(t->rows6, t->n6, true, err, errlen);
}

size_t gslb_pathfmt_table_size(const gslb_path_table_t *t)
{
	return GSLB_PATHFMT_TABLE_HDR + strnlen(t->name, sizeof(t->name)) +
	       t->n4 * GSLB_PATHFMT_ROW4 + t->n6 * GSLB_PATHFMT_ROW6;
}

/* The 8 bytes both row sizes end with. */
static void write_values(uint8_t *p, const gslb_path_row_t *r)
{
	p[0] = r->plen;
	p[1] = r->loss;
	wire_write_u16(p + 2, r->rtt);
	p[4] = r->hops;
	p[5] = r->answered;
	wire_write_u16(p + 6, r->age_s);
}

static void read_values(const uint8_t *p, gslb_path_row_t *r)
{
	r->plen = p[0];
	r->loss = p[1];
	r->rtt = wire_read_u16(p + 2);
	r->hops = p[4];
	r->answered = p[5];
	r->age_s = wire_read_u16(p + 6);
}

size_t gslb_pathfmt_encode_table(const gslb_path_table_t *t, uint8_t *buf, size_t len)
{
	size_t size = gslb_pathfmt_table_size(t);
	if (len < size || gslb_pathfmt_check_table(t, NULL, 0) != 0)
		return 0;
	size_t name_len = strnlen(t->name, sizeof(t->name));
	memset(buf, 0, GSLB_PATHFMT_TABLE_HDR);
	memcpy(buf, table_magic, 4);
	buf[4] = FORMAT_VERSION;
	write_u64(buf + 8, t->generated_ms);
	wire_write_u32(buf + 16, (uint32_t)t->n4);
	wire_write_u32(buf + 20, (uint32_t)t->n6);
	buf[24] = (uint8_t)name_len;
	uint8_t *p = buf + GSLB_PATHFMT_TABLE_HDR;
	memcpy(p, t->name, name_len);
	p += name_len;
	for (size_t i = 0; i < t->n4; i++, p += GSLB_PATHFMT_ROW4) {
		wire_write_u32(p, (uint32_t)(t->rows4[i].prefix >> 32));
		write_values(p + 4, &t->rows4[i]);
	}
	for (size_t i = 0; i < t->n6; i++, p += GSLB_PATHFMT_ROW6) {
		write_u64(p, t->rows6[i].prefix);
		write_values(p + 8, &t->rows6[i]);
	}
	return size;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i])
			return false;
	}
	return true;
}

/* Magic, version, flags and padding of a header of @p len >= @p hdr bytes. */
static int header_check(const uint8_t *buf, size_t len, size_t hdr, const uint8_t magic[4],
                        const char *what, char *err, size_t errlen)
{
	if (len < hdr)
		return fail(err, errlen, "truncated header: %zu bytes, a %s header has %zu", len,
		            what, hdr);
	if (memcmp(buf, magic, 4) != 0)
		return fail(err, errlen, "not a %s body (bad magic)", what);
	if (buf[4] != FORMAT_VERSION)
		return fail(err, errlen, "%s version %u, this node reads version %d", what, buf[4],
		            FORMAT_VERSION);
	if (buf[5] != 0 || buf[6] != 0 || buf[7] != 0)
		return fail(err, errlen, "unknown flags or reserved bits set in the %s header",
		            what);
	return 0;
}

/* The body must be exactly @p need bytes (computed in 64 bits: no overflow from the header). */
static int size_check(size_t len, uint64_t need, uint64_t rows, size_t max_rows, char *err,
                      size_t errlen)
{
	if (rows > max_rows)
		return fail(err, errlen, "%llu rows, more than the limit of %zu",
		            (unsigned long long)rows, max_rows);
	if (len < need)
		return fail(err, errlen,
		            "truncated: the header announces %llu rows (%llu bytes), "
		            "the body has %zu bytes",
		            (unsigned long long)rows, (unsigned long long)need, len);
	if (len > need)
		return fail(err, errlen, "%llu bytes after the last row",
		            (unsigned long long)(len - need));
	return 0;
}

int gslb_pathfmt_decode_table(const uint8_t *buf, size_t len, size_t max_rows,
                              gslb_path_table_t *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	int ret =
	    header_check(buf, len, GSLB_PATHFMT_TABLE_HDR, table_magic, "path table", err, errlen);
	if (ret)
		return ret;
	uint32_t n4 = wire_read_u32(buf + 16), n6 = wire_read_u32(buf + 20);
	size_t name_len = buf[24];
	if (!all_zero(buf + 25, 7))
		return fail(err, errlen, "padding after the name length is not zero");
	if (name_len == 0 || name_len > GSLB_PATHFMT_NAME_MAX)
		return fail(err, errlen, "datacenter name length %zu (must be 1..%d)", name_len,
		            GSLB_PATHFMT_NAME_MAX);
	uint64_t need = GSLB_PATHFMT_TABLE_HDR + (uint64_t)name_len +
	                (uint64_t)n4 * GSLB_PATHFMT_ROW4 + (uint64_t)n6 * GSLB_PATHFMT_ROW6;
	ret = size_check(len, need, (uint64_t)n4 + n6, max_rows, err, errlen);
	if (ret)
		return ret;
	const uint8_t *p = buf + GSLB_PATHFMT_TABLE_HDR;
	if (!name_ok((const char *)p, name_len) || memchr(p, 0, name_len))
		return fail(err, errlen,
		            "datacenter name must be 1..%d of letters, digits, '-', '_' and '.'",
		            GSLB_PATHFMT_NAME_MAX);
	gslb_path_table_t t = {.generated_ms = read_u64(buf + 8), .n4 = n4, .n6 = n6};
	memcpy(t.name, p, name_len);
	p += name_len;
	t.rows4 = xmalloc((n4 ? n4 : 1) * sizeof(*t.rows4));
	t.rows6 = xmalloc((n6 ? n6 : 1) * sizeof(*t.rows6));
	for (size_t i = 0; i < n4; i++, p += GSLB_PATHFMT_ROW4) {
		t.rows4[i].prefix = (uint64_t)wire_read_u32(p) << 32;
		read_values(p + 4, &t.rows4[i]);
	}
	for (size_t i = 0; i < n6; i++, p += GSLB_PATHFMT_ROW6) {
		t.rows6[i].prefix = read_u64(p);
		read_values(p + 8, &t.rows6[i]);
	}
	ret = gslb_pathfmt_check_table(&t, err, errlen);
	if (ret) {
		gslb_pathfmt_table_free(&t);
		return ret;
	}
	*out = t;
	return 0;
}

void gslb_pathfmt_table_free(gslb_path_table_t *t)
{
	free(t->rows4);
	free(t->rows6);
	t->rows4 = t->rows6 = NULL;
	t->n4 = t->n6 = 0;
}

/* ---- demand ------------------------------------------------------------------------------ */

static const char *demand_text(const gslb_demand_row_t *r, char *buf, size_t len)
{
	char text[INET6_ADDRSTRLEN] = "?";
	if (r->family == 4 || r->family == 6)
		inet_ntop(r->family == 4 ? AF_INET : AF_INET6, r->prefix, text, sizeof(text));
	snprintf(buf, len, "%s/%u", text, r->plen);
	return buf;
}

/* The mask of the prefix bits of byte @p i of a @p plen bit prefix. */
static uint8_t prefix_mask(size_t i, unsigned plen)
{
	unsigned bits = plen >= 8 * (i + 1) ? 8 : plen > 8 * i ? plen - 8 * (unsigned)i : 0;
	return (uint8_t)(0xff00u >> bits);
}

static bool host_bits_zero(const uint8_t *a, unsigned plen, size_t bytes)
{
	for (size_t i = 0; i < bytes; i++) {
		if (a[i] & (uint8_t)~prefix_mask(i, plen))
			return false;
	}
	return true;
}

static bool same_prefix(const uint8_t *a, const uint8_t *b, unsigned plen, size_t bytes)
{
	for (size_t i = 0; i < bytes; i++) {
		if ((a[i] ^ b[i]) & prefix_mask(i, plen))
			return false;
	}
	return true;
}

static int demand_cmp(const gslb_demand_row_t *a, const gslb_demand_row_t *b)
{
	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	int c = memcmp(a->prefix, b->prefix, sizeof(a->prefix));
	if (c)
		return c;
	return (a->plen > b->plen) - (a->plen < b->plen);
}

static const char *demand_problem(const gslb_demand_row_t *r, const gslb_demand_row_t *prev)
{
	if (r->family != 4 && r->family != 6)
		return "family must be 4 or 6";
	bool v6 = r->family == 6;
	if (r->plen < (v6 ? PLEN6_MIN : PLEN4_MIN) || r->plen > (v6 ? PLEN6_MAX : PLEN4_MAX))
		return v6 ? "prefix length out of range (16..64)"
		          : "prefix length out of range (8..32)";
	if (r->flags & ~(GSLB_DEMAND_ECS | GSLB_DEMAND_URGENT))
		return "unknown flags";
	size_t bytes = v6 ? 16 : 4;
	if (!v6 && (!all_zero(r->prefix + 4, 12) || !all_zero(r->probe + 4, 12)))
		return "IPv4 address beyond 4 bytes";
	if (!host_bits_zero(r->prefix, r->plen, bytes))
		return "host bits set";
	if (!same_prefix(r->probe, r->prefix, r->plen, bytes))
		return "probe address outside the prefix";
	if (prev && demand_cmp(prev, r) == 0)
		return "duplicate prefix";
	if (prev && demand_cmp(prev, r) > 0)
		return "prefixes out of order";
	return NULL;
}

int gslb_pathfmt_check_demand(const gslb_demand_t *d, char *err, size_t errlen)
{
	if (d->n > UINT32_MAX)
		return fail(err, errlen, "more than %u rows", UINT32_MAX);
	for (size_t i = 0; i < d->n; i++) {
		const char *why = demand_problem(&d->rows[i], i ? &d->rows[i - 1] : NULL);
		if (why) {
			char text[64];
			return fail(err, errlen, "demand row %zu (%s): %s", i,
			            demand_text(&d->rows[i], text, sizeof(text)), why);
		}
	}
	return 0;
}

size_t gslb_pathfmt_demand_size(const gslb_demand_t *d)
{
	return GSLB_PATHFMT_DEMAND_HDR + d->n * GSLB_PATHFMT_DEMAND_ROW;
}

size_t gslb_pathfmt_encode_demand(const gslb_demand_t *d, uint8_t *buf, size_t len)
{
	size_t size = gslb_pathfmt_demand_size(d);
	if (len < size || gslb_pathfmt_check_demand(d, NULL, 0) != 0)
		return 0;
	memset(buf, 0, size);
	memcpy(buf, demand_magic, 4);
	buf[4] = FORMAT_VERSION;
	write_u64(buf + 8, d->generated_ms);
	wire_write_u32(buf + 16, (uint32_t)d->n);
	uint8_t *p = buf + GSLB_PATHFMT_DEMAND_HDR;
	for (size_t i = 0; i < d->n; i++, p += GSLB_PATHFMT_DEMAND_ROW) {
		const gslb_demand_row_t *r = &d->rows[i];
		p[0] = r->family;
		p[1] = r->plen;
		p[2] = r->flags;
		wire_write_u32(p + 4, r->volume);
		memcpy(p + 8, r->prefix, 16);
		memcpy(p + 24, r->probe, 16);
	}
	return size;
}

int gslb_pathfmt_decode_demand(const uint8_t *buf, size_t len, size_t max_rows, gslb_demand_t *out,
                               char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	int ret =
	    header_check(buf, len, GSLB_PATHFMT_DEMAND_HDR, demand_magic, "demand", err, errlen);
	if (ret)
		return ret;
	uint32_t n = wire_read_u32(buf + 16);
	if (!all_zero(buf + 20, 4))
		return fail(err, errlen, "reserved bytes of the demand header are not zero");
	uint64_t need = GSLB_PATHFMT_DEMAND_HDR + (uint64_t)n * GSLB_PATHFMT_DEMAND_ROW;
	ret = size_check(len, need, n, max_rows, err, errlen);
	if (ret)
		return ret;
	gslb_demand_t d = {.generated_ms = read_u64(buf + 8), .n = n};
	d.rows = xmalloc((n ? n : 1) * sizeof(*d.rows));
	const uint8_t *p = buf + GSLB_PATHFMT_DEMAND_HDR;
	for (size_t i = 0; i < n; i++, p += GSLB_PATHFMT_DEMAND_ROW) {
		gslb_demand_row_t *r = &d.rows[i];
		if (p[3] != 0) {
			free(d.rows);
			return fail(err, errlen, "demand row %zu: reserved byte is not zero", i);
		}
		r->family = p[0];
		r->plen = p[1];
		r->flags = p[2];
		r->volume = wire_read_u32(p + 4);
		memcpy(r->prefix, p + 8, 16);
		memcpy(r->probe, p + 24, 16);
	}
	ret = gslb_pathfmt_check_demand(&d, err, errlen);
	if (ret) {
		gslb_pathfmt_demand_free(&d);
		return ret;
	}
	*out = d;
	return 0;
}

void gslb_pathfmt_demand_free(gslb_demand_t *d)
{
	free(d->rows);
	d->rows = NULL;
	d->n = 0;
}
