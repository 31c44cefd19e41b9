/*
 * Secondary-side wire code: queries, the AXFR receiver and the master-file writer. The
 * receiver checks every message as RFC 5936 2.2 asks (same id, QR, NOERROR, the question
 * echoed or absent, records in class IN) and enforces the zone's limits while it receives,
 * so a primary cannot make us hold more than max-transfer-size or max-records.
 */
#include "xfr/msg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "dns/dname.h"
#include "dns/wire.h"
#include "zone/zone.h"

bool xfr_serial_gt(uint32_t a, uint32_t b)
{
	return a != b && (uint32_t)(a - b) < 0x80000000u;
}

/* Skip one uncompressed name inside rdata; false when it does not end inside. */
static bool skip_name(const uint8_t *p, size_t len, size_t *pos)
{
	while (*pos < len) {
		uint8_t l = p[*pos];
		if (l == 0) {
			(*pos)++;
			return true;
		}
		if (l > 63)
			return false;
		*pos += 1 + (size_t)l;
	}
	return false;
}

bool xfr_soa_parse(const uint8_t *rdata, size_t len, xfr_soa_t *soa)
{
	size_t pos = 0;
	if (!skip_name(rdata, len, &pos) || !skip_name(rdata, len, &pos) || pos + 20 != len)
		return false;
	soa->serial = wire_read_u32(rdata + pos);
	soa->refresh = wire_read_u32(rdata + pos + 4);
	soa->retry = wire_read_u32(rdata + pos + 8);
	soa->expire = wire_read_u32(rdata + pos + 12);
	soa->minimum = wire_read_u32(rdata + pos + 16);
	return true;
}

size_t xfr_query_write(uint8_t *buf, size_t cap, uint16_t id, const uint8_t *apex, uint16_t qtype,
                       bool notify, uint32_t ttl, const uint8_t *soa_rdata, uint16_t soa_len)
{
	size_t apex_len = dname_len(apex);
	bool with_soa = notify && soa_rdata != NULL;
	size_t need = DNS_HEADER_LEN + apex_len + 4 + (with_soa ? 2 + 10 + soa_len : 0);
	if (need > cap)
		return 0;
	memset(buf, 0, DNS_HEADER_LEN);
	wire_write_u16(buf, id);
	/* NOTIFY: opcode 4 with AA (RFC 1996 3.7); queries to a primary ask no recursion. */
	wire_write_u16(
	    buf + 2, notify ? (uint16_t)(DNS_OPCODE_NOTIFY << DNS_OPCODE_SHIFT | DNS_FLAG_AA) : 0);
	wire_write_u16(buf + 4, 1);
	wire_write_u16(buf + 6, with_soa ? 1 : 0);
	size_t pos = DNS_HEADER_LEN;
	memcpy(buf + pos, apex, apex_len);
	pos += apex_len;
	wire_write_u16(buf + pos, notify ? DNS_TYPE_SOA : qtype);
	wire_write_u16(buf + pos + 2, DNS_CLASS_IN);
	pos += 4;
	if (with_soa) {
		wire_write_u16(buf + pos, 0xC000 | DNS_HEADER_LEN); /* the question's name */
		wire_write_u16(buf + pos + 2, DNS_TYPE_SOA);
		wire_write_u16(buf + pos + 4, DNS_CLASS_IN);
		wire_write_u32(buf + pos + 6, ttl);
		wire_write_u16(buf + pos + 10, soa_len);
		memcpy(buf + pos + 12, soa_rdata, soa_len);
		pos += 12 + soa_len;
	}
	return pos;
}

/*
 * The header and question of a reply to our query @p id: returns the offset after the
 * question, or 0 with a reason. @p qtype is what we asked.
 */
static size_t check_header(const uint8_t *msg, size_t len, uint16_t id, const uint8_t *apex,
                           uint16_t qtype, bool question_needed, char *err, size_t errlen)
{
	if (len < DNS_HEADER_LEN) {
		snprintf(err, errlen, "short message (%zu bytes)", len);
		return 0;
	}
	uint16_t flags = wire_read_u16(msg + 2);
	if (wire_read_u16(msg) != id || !(flags & DNS_FLAG_QR) || (flags & DNS_OPCODE_MASK) != 0) {
		snprintf(err, errlen, "not a reply to our query (id, QR or opcode)");
		return 0;
	}
	uint8_t rcode = (uint8_t)(flags & DNS_RCODE_MASK);
	if (rcode != DNS_RCODE_NOERROR) {
		snprintf(err, errlen, "the primary answered rcode %u", rcode);
		return 0;
	}
	uint16_t qd = wire_read_u16(msg + 4);
	size_t pos = DNS_HEADER_LEN;
	if (qd > 1 || (qd == 0 && question_needed)) {
		snprintf(err, errlen, "%u questions in the reply", qd);
		return 0;
	}
	if (qd == 1) {
		uint8_t name[DNS_DNAME_MAXLEN];
		if (dname_unpack_lower(msg, len, &pos, name) < 0 || pos + 4 > len) {
			snprintf(err, errlen, "malformed question");
			return 0;
		}
		if (!dname_equal(name, apex) || wire_read_u16(msg + pos) != qtype ||
		    wire_read_u16(msg + pos + 2) != DNS_CLASS_IN) {
			snprintf(err, errlen, "the reply's question is not ours");
			return 0;
		}
		pos += 4;
	}
	return pos;
}

/* One record's fixed part after its owner. */
typedef struct {
	uint16_t type, rclass, rdlen;
	uint32_t ttl;
	size_t rdata; /* offset in the message */
} rr_head_t;

static bool read_rr(const uint8_t *msg, size_t len, size_t *pos, uint8_t *owner, rr_head_t *rr)
{
	if (dname_unpack_lower(msg, len, pos, owner) < 0 || *pos + 10 > len)
		return false;
	rr->type = wire_read_u16(msg + *pos);
	rr->rclass = wire_read_u16(msg + *pos + 2);
	rr->ttl = wire_read_u32(msg + *pos + 4);
	rr->rdlen = wire_read_u16(msg + *pos + 8);
	*pos += 10;
	rr->rdata = *pos;
	if (*pos + rr->rdlen > len)
		return false;
	*pos += rr->rdlen;
	return true;
}

int xfr_soa_reply(const uint8_t *msg, size_t len, uint16_t id, const uint8_t *apex, xfr_soa_t *soa,
                  char *err, size_t errlen)
{
	size_t pos = check_header(msg, len, id, apex, DNS_TYPE_SOA, true, err, errlen);
	if (pos == 0)
		return -1;
	if (wire_read_u16(msg + 2) & DNS_FLAG_TC)
		return 1;
	if (!(wire_read_u16(msg + 2) & DNS_FLAG_AA)) {
		snprintf(err, errlen, "the primary is not authoritative for the zone (no AA)");
		return -1;
	}
	uint16_t an = wire_read_u16(msg + 6);
	for (uint16_t i = 0; i < an; i++) {
		uint8_t owner[DNS_DNAME_MAXLEN];
		rr_head_t rr;
		if (!read_rr(msg, len, &pos, owner, &rr))
			break;
		if (rr.type != DNS_TYPE_SOA || !dname_equal(owner, apex))
			continue;
		/* SOA names may be compressed: expand to read the timers. */
		size_t p = rr.rdata;
		uint8_t name[DNS_DNAME_MAXLEN];
		size_t end = rr.rdata + rr.rdlen;
		if (dname_unpack(msg, end, &p, name) < 0 || dname_unpack(msg, end, &p, name) < 0 ||
		    p + 20 != end)
			break;
		soa->serial = wire_read_u32(msg + p);
		soa->refresh = wire_read_u32(msg + p + 4);
		soa->retry = wire_read_u32(msg + p + 8);
		soa->expire = wire_read_u32(msg + p + 12);
		soa->minimum = wire_read_u32(msg + p + 16);
		return 0;
	}
	snprintf(err, errlen, "no SOA record in the answer");
	return -1;
}

bool xfr_notify_reply(const uint8_t *msg, size_t len, uint16_t id, uint8_t *rcode)
{
	if (len < DNS_HEADER_LEN || wire_read_u16(msg) != id)
		return false;
	uint16_t flags = wire_read_u16(msg + 2);
	if (!(flags & DNS_FLAG_QR) ||
	    ((flags & DNS_OPCODE_MASK) >> DNS_OPCODE_SHIFT) != DNS_OPCODE_NOTIFY)
		return false;
	*rcode = (uint8_t)(flags & DNS_RCODE_MASK);
	return true;
}

void xfr_rx_init(xfr_rx_t *rx, const uint8_t *apex, uint16_t id, uint64_t max_bytes,
                 uint64_t max_records)
{
	memset(rx, 0, sizeof(*rx));
	rx->apex_len = dname_len(apex);
	memcpy(rx->apex, apex, rx->apex_len);
	rx->id = id;
	rx->max_bytes = max_bytes;
	rx->max_records = max_records;
}

void xfr_rx_init_ixfr(xfr_rx_t *rx, const uint8_t *apex, uint16_t id, uint64_t max_bytes,
                      uint64_t max_records, uint32_t have_serial)
{
	xfr_rx_init(rx, apex, id, max_bytes, max_records);
	rx->ixfr_asked = true;
	rx->have_serial = have_serial;
}

size_t xfr_ixfr_query_write(uint8_t *buf, size_t cap, uint16_t id, const uint8_t *apex,
                            uint32_t ttl, const uint8_t *soa_rdata, uint16_t soa_len)
{
	size_t len = xfr_query_write(buf, cap, id, apex, DNS_TYPE_IXFR, false, 0, NULL, 0);
	if (len == 0 || len + 12 + soa_len > cap)
		return 0;
	/* RFC 1995 3: our SOA in the authority section. */
	wire_write_u16(buf + 8, 1);
	wire_write_u16(buf + len, 0xC000 | DNS_HEADER_LEN);
	wire_write_u16(buf + len + 2, DNS_TYPE_SOA);
	wire_write_u16(buf + len + 4, DNS_CLASS_IN);
	wire_write_u32(buf + len + 6, ttl);
	wire_write_u16(buf + len + 10, soa_len);
	memcpy(buf + len + 12, soa_rdata, soa_len);
	return len + 12 + soa_len;
}

static int rx_fail(xfr_rx_t *rx, const char *what)
{
	snprintf(rx->err, sizeof(rx->err), "%s", what);
	return -1;
}

/*
 * Where the names sit in the rdata of the types whose names a sender may compress (RFC 3597
 * 4 and the types RFC 3597 says receivers must expand): 'n' a name, a digit that many octets
 * (a '9' stands for the SOA's twenty). Other types are copied as they are.
 */
static const char *rdata_layout(uint16_t type)
{
	switch (type) {
	case 2:  /* NS */
	case 3:  /* MD */
	case 4:  /* MF */
	case 5:  /* CNAME */
	case 7:  /* MB */
	case 8:  /* MG */
	case 9:  /* MR */
	case 12: /* PTR */
	case 39: /* DNAME */
		return "n";
	case 6: /* SOA */
		return "nn9";
	case 14: /* MINFO */
	case 17: /* RP */
		return "nn";
	case 15: /* MX */
	case 18: /* AFSDB */
	case 21: /* RT */
	case 36: /* KX */
		return "2n";
	case 33: /* SRV */
		return "6n";
	default:
		return NULL;
	}
}

/* Append the expanded rdata of @p rr to rx->buf (room already reserved: at most 255 per
 * name over the wire length, see the caller). Returns the new rdata length or -1. */
static int expand_rdata(const uint8_t *msg, const rr_head_t *rr, uint8_t *out, size_t room)
{
	const char *layout = rdata_layout(rr->type);
	size_t end = rr->rdata + rr->rdlen;
	if (layout == NULL) {
		if (rr->rdlen > room)
			return -1;
		memcpy(out, msg + rr->rdata, rr->rdlen);
		return rr->rdlen;
	}
	size_t pos = rr->rdata, w = 0;
	for (const char *l = layout; *l; l++) {
		if (*l == 'n') {
			uint8_t name[DNS_DNAME_MAXLEN];
			int n = dname_unpack(msg, end, &pos, name);
			if (n < 0 || w + (size_t)n > room)
				return -1;
			memcpy(out + w, name, (size_t)n);
			w += (size_t)n;
		} else {
			size_t n = *l == '9' ? 20 : (size_t)(*l - '0');
			if (pos + n > end || w + n > room)
				return -1;
			memcpy(out + w, msg + pos, n);
			pos += n;
			w += n;
		}
	}
	if (pos != end || w > UINT16_MAX)
		return -1;
	return (int)w;
}

static void rx_reserve(xfr_rx_t *rx, size_t more)
{
	if (rx->len + more <= rx->cap)
		return;
	size_t cap = rx->cap ? rx->cap : 65536;
	while (cap < rx->len + more)
		cap *= 2;
	rx->buf = xrealloc(rx->buf, cap);
	rx->cap = cap;
}

/* Append one record of kind @p op (its rdata is already at its place). */
static void rx_commit(xfr_rx_t *rx, uint8_t op, const uint8_t *owner, size_t owner_len,
                      uint16_t type, uint32_t ttl, int rdlen)
{
	uint8_t *rec = rx->buf + rx->len;
	rec[0] = op;
	rec[1] = (uint8_t)owner_len;
	memcpy(rec + 2, owner, owner_len);
	wire_write_u16(rec + 2 + owner_len, type);
	wire_write_u32(rec + 2 + owner_len + 2, ttl);
	wire_write_u16(rec + 2 + owner_len + 6, (uint16_t)rdlen);
	rx->len += 2 + owner_len + 8 + (size_t)rdlen;
}

/*
 * One IXFR record after the first SOA (RFC 1995 4): diffs of (old SOA, deletions, new SOA,
 * additions), chained by serial, closed by the new SOA again. Returns the record's kind, or
 * -1 with the reason set, or 3 when it is the closing SOA.
 */
static int ixfr_step(xfr_rx_t *rx, bool is_soa, const xfr_soa_t *soa)
{
	switch (rx->diff_state) {
	case 0: /* an old SOA, or the end */
		if (!is_soa)
			return rx_fail(rx, "an IXFR diff that does not start with an SOA");
		if (soa->serial != (rx->n_diffs == 0 ? rx->have_serial : rx->diff_new))
			return rx_fail(rx, "IXFR diffs that do not chain by serial");
		rx->n_diffs++;
		rx->diff_state = 1;
		return XFR_OP_DEL;
	case 1:
		if (!is_soa)
			return XFR_OP_DEL;
		rx->diff_new = soa->serial;
		rx->diff_state = 2;
		return XFR_OP_ADD;
	default:
		if (!is_soa)
			return XFR_OP_ADD;
		if (soa->serial == rx->soa.serial && rx->diff_new == rx->soa.serial)
			return 3;
		rx->diff_state = 0;
		return ixfr_step(rx, is_soa, soa);
	}
}

int xfr_rx_feed(xfr_rx_t *rx, const uint8_t *msg, size_t len)
{
	if (rx->done)
		return rx_fail(rx, "a message after the closing SOA");
	rx->bytes += len;
	if (rx->bytes > rx->max_bytes)
		return rx_fail(rx, "the transfer exceeds max-transfer-size");
	uint16_t qtype = rx->ixfr_asked ? DNS_TYPE_IXFR : DNS_TYPE_AXFR;
	size_t pos = check_header(msg, len, rx->id, rx->apex, qtype, rx->messages == 0, rx->err,
	                          sizeof(rx->err));
	if (pos == 0)
		return -1;
	if (wire_read_u16(msg + 2) & DNS_FLAG_TC)
		return rx_fail(rx, "a truncated message");
	rx->messages++;
	uint16_t an = wire_read_u16(msg + 6);
	if (an == 0)
		return rx_fail(rx, "a message without records");
	for (uint16_t i = 0; i < an; i++) {
		uint8_t owner[DNS_DNAME_MAXLEN];
		rr_head_t rr;
		if (!read_rr(msg, len, &pos, owner, &rr))
			return rx_fail(rx, "a malformed record");
		if (rx->done)
			return rx_fail(rx, "records after the closing SOA");
		if (rr.rclass != DNS_CLASS_IN)
			return rx_fail(rx, "a record not of class IN");
		bool at_apex = dname_equal(owner, rx->apex);
		if (!dname_is_subdomain(owner, rx->apex))
			return rx_fail(rx, "a record outside the zone");
		size_t owner_len = dname_len(owner);
		/* Expanded names grow by at most 253 octets each, and no layout has more than 2. */
		size_t room = (size_t)rr.rdlen + 2 * DNS_DNAME_MAXLEN;
		rx_reserve(rx, 2 + owner_len + 8 + room);
		uint8_t *rdata = rx->buf + rx->len + 2 + owner_len + 8;
		int rdlen = expand_rdata(msg, &rr, rdata, room);
		if (rdlen < 0)
			return rx_fail(rx, "a record with malformed rdata");
		bool is_soa = rr.type == DNS_TYPE_SOA && at_apex;
		xfr_soa_t soa = {0};
		if (is_soa && !xfr_soa_parse(rdata, (size_t)rdlen, &soa))
			return rx_fail(rx, "a malformed SOA");
		int op = XFR_OP_ZONE;
		if (rx->seen++ == 0) {
			if (!is_soa)
				return rx_fail(rx,
				               "the transfer does not start with the zone's SOA");
			rx->soa = soa;
			rx->mode = rx->ixfr_asked ? XFR_RX_UNKNOWN : XFR_RX_AXFR;
		} else if (rx->mode == XFR_RX_UNKNOWN) {
			if (is_soa && soa.serial == rx->have_serial &&
			    soa.serial != rx->soa.serial) {
				/* Diffs: the first SOA stored so far was not a zone record. */
				rx->mode = XFR_RX_IXFR;
				rx->len = 0;
				rx->records = 0;
				memmove(rx->buf + 2 + owner_len + 8, rdata, (size_t)rdlen);
			} else {
				rx->mode = XFR_RX_AXFR;
			}
		}
		if (rx->mode == XFR_RX_IXFR) {
			op = ixfr_step(rx, is_soa, &soa);
			if (op < 0)
				return -1;
			if (op == 3) {
				rx->done = true;
				continue;
			}
		} else if (is_soa && rx->seen > 1) {
			/* RFC 5936 2.2: the closing SOA repeats the first. */
			if (soa.serial != rx->soa.serial)
				return rx_fail(rx,
				               "the closing SOA's serial differs from the first");
			rx->done = true;
			continue;
		}
		if (++rx->records > rx->max_records)
			return rx_fail(rx, "the zone exceeds max-records");
		rx_commit(rx, (uint8_t)op, owner, owner_len, rr.type, rr.ttl, rdlen);
	}
	/* RFC 1995 4: a single SOA in one message says our version is current. */
	if (rx->mode == XFR_RX_UNKNOWN && rx->seen == 1 && rx->messages == 1) {
		rx->mode = XFR_RX_UPTODATE;
		rx->done = true;
	}
	return rx->done ? 1 : 0;
}

int xfr_rx_write(const xfr_rx_t *rx, FILE *f)
{
	char owner[DNAME_STR_MAXLEN];
	fprintf(f, "; transferred, serial %u\n$ORIGIN .\n", rx->soa.serial);
	for (size_t pos = 0; pos < rx->len;) {
		const uint8_t *rec = rx->buf + pos;
		size_t owner_len = rec[1];
		const uint8_t *p = rec + 2 + owner_len;
		uint16_t type = wire_read_u16(p);
		uint32_t ttl = wire_read_u32(p + 2);
		uint16_t rdlen = wire_read_u16(p + 6);
		pos += 2 + owner_len + 8 + rdlen;
		if (rec[0] != XFR_OP_ZONE)
			continue;
		dname_to_str(rec + 2, owner, sizeof(owner));
		fprintf(f, "%s %u IN TYPE%u \\# %u", owner, ttl, type, rdlen);
		if (rdlen > 0)
			fputc(' ', f);
		for (uint16_t i = 0; i < rdlen; i++)
			fprintf(f, "%02x", p[8 + i]);
		fputc('\n', f);
	}
	return ferror(f) ? -EIO : 0;
}

void xfr_rx_free(xfr_rx_t *rx)
{
	free(rx->buf);
	rx->buf = NULL;
	rx->len = rx->cap = 0;
}

/* ---- applying IXFR diffs ------------------------------------------------------------------- */

/* One record of the zone being patched; pointers borrow the zone or the receiver. */
typedef struct {
	const uint8_t *owner;
	uint8_t owner_len;
	uint16_t type;
	uint32_t ttl;
	const uint8_t *rdata;
	uint16_t rdlen;
	bool deleted;
} patch_rr_t;

static int patch_cmp(const void *a, const void *b)
{
	const patch_rr_t *x = a, *y = b;
	size_t n = x->owner_len < y->owner_len ? x->owner_len : y->owner_len;
	int c = memcmp(x->owner, y->owner, n);
	if (c != 0 || x->owner_len != y->owner_len)
		return c != 0 ? c : (x->owner_len < y->owner_len ? -1 : 1);
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	n = x->rdlen < y->rdlen ? x->rdlen : y->rdlen;
	c = memcmp(x->rdata, y->rdata, n);
	if (c != 0 || x->rdlen == y->rdlen)
		return c;
	return x->rdlen < y->rdlen ? -1 : 1;
}

int xfr_rx_apply(const xfr_rx_t *rx, const zone_t *zone, xfr_rx_t *out)
{
	xfr_rx_init(out, rx->apex, rx->id, UINT64_MAX, rx->max_records);
	out->mode = XFR_RX_AXFR;
	out->soa = rx->soa;
	out->done = true;
	size_t n_nodes, n = 0, cap = zone->n_records ? zone->n_records : 1;
	patch_rr_t *rrs = xmalloc(cap * sizeof(*rrs));
	const zone_node_t *nodes = zone_nodes(zone, &n_nodes);
	for (size_t i = 0; i < n_nodes; i++) {
		for (uint16_t j = 0; j < nodes[i].n_rrsets; j++) {
			const zone_rrset_t *set = &nodes[i].rrsets[j];
			zone_rdata_iter_t it = zone_rdata_iter(set);
			uint16_t len;
			const uint8_t *rd;
			while ((rd = zone_rdata_next(&it, &len)) != NULL) {
				if (n == cap) {
					cap *= 2;
					rrs = xrealloc(rrs, cap * sizeof(*rrs));
				}
				rrs[n++] = (patch_rr_t){nodes[i].owner,
				                        (uint8_t)dname_len(nodes[i].owner),
				                        set->type,
				                        set->ttl,
				                        rd,
				                        len,
				                        false};
			}
		}
	}
	qsort(rrs, n, sizeof(*rrs), patch_cmp);
	/* Diffs apply in order: a record one diff adds, a later one may delete. */
	patch_rr_t *adds = NULL;
	size_t n_adds = 0, cap_adds = 0;
	int ret = -1;
	uint64_t kept = n;
	for (size_t pos = 0; pos < rx->len;) {
		const uint8_t *rec = rx->buf + pos;
		patch_rr_t key = {.owner = rec + 2, .owner_len = rec[1]};
		const uint8_t *p = rec + 2 + key.owner_len;
		key.type = wire_read_u16(p);
		key.ttl = wire_read_u32(p + 2);
		key.rdlen = wire_read_u16(p + 6);
		key.rdata = p + 8;
		pos += 2 + key.owner_len + 8 + key.rdlen;
		if (rec[0] == XFR_OP_ADD) {
			if (n_adds == cap_adds) {
				cap_adds = cap_adds ? cap_adds * 2 : 64;
				adds = xrealloc(adds, cap_adds * sizeof(*adds));
			}
			adds[n_adds++] = key;
			kept++;
			continue;
		}
		if (rec[0] != XFR_OP_DEL)
			continue;
		patch_rr_t *hit = bsearch(&key, rrs, n, sizeof(*rrs), patch_cmp);
		if (hit != NULL && hit->deleted)
			hit = NULL;
		for (size_t i = n_adds; hit == NULL && i > 0; i--) {
			if (!adds[i - 1].deleted && patch_cmp(&adds[i - 1], &key) == 0)
				hit = &adds[i - 1];
		}
		if (hit == NULL) {
			char name[DNAME_STR_MAXLEN];
			snprintf(out->err, sizeof(out->err),
			         "IXFR deletes a record we do not hold (%s type %u)",
			         dname_to_str(key.owner, name, sizeof(name)), key.type);
			goto out;
		}
		hit->deleted = true;
		kept--;
	}
	if (kept > out->max_records) {
		snprintf(out->err, sizeof(out->err), "the zone exceeds max-records");
		goto out;
	}
	/* The kept records, then the additions; duplicates merge when the file is loaded. */
	for (int list = 0; list < 2; list++) {
		const patch_rr_t *v = list == 0 ? rrs : adds;
		size_t count = list == 0 ? n : n_adds;
		for (size_t i = 0; i < count; i++) {
			if (v[i].deleted)
				continue;
			rx_reserve(out, 2 + v[i].owner_len + 8 + v[i].rdlen);
			memcpy(out->buf + out->len + 2 + v[i].owner_len + 8, v[i].rdata,
			       v[i].rdlen);
			rx_commit(out, XFR_OP_ZONE, v[i].owner, v[i].owner_len, v[i].type, v[i].ttl,
			          v[i].rdlen);
		}
	}
	out->records = kept;
	if (out->records > out->max_records) {
		snprintf(out->err, sizeof(out->err), "the zone exceeds max-records");
		goto out;
	}
	ret = 0;
out:
	free(adds);
	free(rrs);
	return ret;
}
