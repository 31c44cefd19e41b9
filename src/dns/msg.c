/*
 * Response building with RFC 1035 4.1.4 name compression. Compression targets are offsets of
 * label starts already in the message; a new name is matched suffix by suffix against them,
 * case-insensitively, so the question's original case (0x20) is what pointers lead to.
 */
#include "dns/msg.h"

#include <string.h>

#include "dns/dname.h"
#include "dns/rdata.h"
#include "dns/wire.h"

/* Pointers carry 14 bits of offset. */
#define COMPR_OFFSET_MAX 0x3fff

void dns_msg_init(dns_msg_t *msg, uint8_t *buf, size_t limit)
{
	msg->buf = buf;
	msg->limit = limit;
	msg->len = 0;
	msg->reserved = 0;
	msg->count[0] = msg->count[1] = msg->count[2] = 0;
	msg->n_compr = 0;
	msg->last_owner = NULL;
	msg->last_owner_off = 0;
}

static inline uint8_t ascii_lower(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + ('a' - 'A')) : c;
}

/* Does the (uncompressed) name suffix @p name equal the message name at @p off? */
static bool name_matches_at(const dns_msg_t *msg, const uint8_t *name, size_t off)
{
	const uint8_t *buf = msg->buf;
	for (;;) {
		/* Message names were written by us: pointers are well-formed and backward. */
		while ((buf[off] & 0xc0) == 0xc0)
			off = (size_t)(buf[off] & 0x3f) << 8 | buf[off + 1];
		uint8_t len = buf[off];
		if (len != *name)
			return false;
		if (len == 0)
			return true;
		for (uint8_t i = 1; i <= len; i++) {
			if (ascii_lower(buf[off + i]) != ascii_lower(name[i]))
				return false;
		}
		off += 1 + (size_t)len;
		name += 1 + len;
	}
}

static int find_compression(const dns_msg_t *msg, const uint8_t *suffix)
{
	for (uint16_t i = 0; i < msg->n_compr; i++) {
		if (msg->buf[msg->compr[i]] == *suffix &&
		    name_matches_at(msg, suffix, msg->compr[i]))
			return msg->compr[i];
	}
	return -1;
}

static void remember(dns_msg_t *msg, size_t off)
{
	if (off <= COMPR_OFFSET_MAX && msg->n_compr < DNS_MSG_COMPR_MAX)
		msg->compr[msg->n_compr++] = (uint16_t)off;
}

/*
 * Writes @p name, compressed against earlier names, and remembers its new label starts.
 * Returns the offset a later pointer to the whole name can use.
 */
static size_t write_name(dns_msg_t *msg, wire_ctx_t *ctx, const uint8_t *name)
{
	size_t start = wire_ctx_offset(ctx);
	const uint8_t *label = name;
	while (*label) {
		int ptr = find_compression(msg, label);
		if (ptr >= 0) {
			wire_ctx_write_u16(ctx, (uint16_t)(0xc000 | ptr));
			return label == name ? (size_t)ptr : start;
		}
		size_t off = wire_ctx_offset(ctx);
		wire_ctx_write(ctx, label, 1 + (size_t)*label);
		if (ctx->err)
			return start;
		remember(msg, off);
		label += 1 + *label;
	}
	wire_ctx_write_u8(ctx, 0);
	return start;
}

static void write_owner(dns_msg_t *msg, wire_ctx_t *ctx, const uint8_t *owner)
{
	if (owner == msg->last_owner) {
		wire_ctx_write_u16(ctx, (uint16_t)(0xc000 | msg->last_owner_off));
		return;
	}
	size_t off = write_name(msg, ctx, owner);
	if (ctx->err == 0 && off <= COMPR_OFFSET_MAX) {
		msg->last_owner = owner;
		msg->last_owner_off = (uint16_t)off;
	}
}

int dns_msg_begin(dns_msg_t *msg, const dns_query_t *q, uint8_t rcode)
{
	/* The question is a record like any other: it must leave the reservation free, or a long
	 * name with ECS and NSID leaves no room for the OPT record promised to the caller. */
	size_t end = msg->limit > msg->reserved ? msg->limit - msg->reserved : 0;
	wire_ctx_t ctx = wire_ctx_init(msg->buf, end);
	/* RD is echoed whatever the opcode (RFC 1035 4.1.1); CD is defined for QUERY only
	 * (RFC 4035 3.1.6), so other opcodes' answers leave it clear, as Knot DNS does. */
	uint16_t echoed = q->opcode == DNS_OPCODE_QUERY ? DNS_FLAG_RD | DNS_FLAG_CD : DNS_FLAG_RD;
	uint16_t flags = DNS_FLAG_QR | (q->flags & (echoed | DNS_OPCODE_MASK));
	wire_ctx_write_u16(&ctx, q->id);
	wire_ctx_write_u16(&ctx, (uint16_t)(flags | (rcode & DNS_RCODE_MASK)));
	wire_ctx_write_u16(&ctx, q->has_question ? 1 : 0);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 0);
	wire_ctx_write_u16(&ctx, 0);
	if (q->has_question) {
		/* The echoed name is uncompressed when it was received uncompressed; a pointer
		 * in a received question points into the header-sized prefix, equally valid. */
		size_t off = wire_ctx_offset(&ctx);
		wire_ctx_write(&ctx, q->question, q->question_len);
		if (ctx.err == 0 && q->question_len == (size_t)q->qname_len + 4) {
			for (const uint8_t *l = q->question; *l; l += 1 + *l)
				remember(msg, off + (size_t)(l - q->question));
			/* Most answers are owned by the question name: point at it directly. */
			msg->last_owner = q->qname;
			msg->last_owner_off = (uint16_t)off;
		}
	}
	if (ctx.err)
		return ctx.err;
	msg->len = wire_ctx_offset(&ctx);
	return 0;
}

void dns_msg_reserve(dns_msg_t *msg, size_t bytes)
{
	msg->reserved = bytes;
}

static void write_rdata(dns_msg_t *msg, wire_ctx_t *ctx, uint16_t type, const uint8_t *rdata,
                        uint16_t rdlen)
{
	const char *layout = dns_rdata_compressible_layout(type);
	if (!layout) {
		wire_ctx_write(ctx, rdata, rdlen);
		return;
	}
	wire_ctx_t in = wire_ctx_init_const(rdata, rdlen);
	for (; *layout && in.err == 0; layout++) {
		if (*layout == 'n') {
			size_t left = wire_ctx_available(&in);
			const uint8_t *name = in.pos;
			size_t nlen = left ? dname_len(name) : 0;
			if (nlen == 0 || nlen > left || !dname_is_valid(name, nlen))
				break;
			write_name(msg, ctx, name);
			wire_ctx_skip(&in, nlen);
		} else {
			size_t n = (size_t)(*layout - '0');
			const uint8_t *field = in.pos;
			wire_ctx_skip(&in, n);
			if (in.err == 0)
				wire_ctx_write(ctx, field, n);
		}
	}
	/* Anything the layout did not consume (or malformed data) goes out verbatim. */
	if (in.err == 0 && *layout == '\0')
		wire_ctx_write(ctx, in.pos, wire_ctx_available(&in));
	else
		ctx->err = STEER_EMALF;
}

int dns_msg_put_rr(dns_msg_t *msg, enum dns_section section, const uint8_t *owner, uint16_t type,
                   uint16_t rclass, uint32_t ttl, const uint8_t *rdata, uint16_t rdlen)
{
	size_t end = msg->limit > msg->reserved ? msg->limit - msg->reserved : 0;
	if (end <= msg->len || msg->count[section] == UINT16_MAX)
		return STEER_ESPACE;
	uint16_t saved_compr = msg->n_compr;
	wire_ctx_t ctx = wire_ctx_init(msg->buf, end);
	ctx.pos += msg->len;

	write_owner(msg, &ctx, owner);
	wire_ctx_write_u16(&ctx, type);
	wire_ctx_write_u16(&ctx, rclass);
	wire_ctx_write_u32(&ctx, ttl);
	size_t rdlen_at = wire_ctx_offset(&ctx);
	wire_ctx_write_u16(&ctx, 0);
	write_rdata(msg, &ctx, type, rdata, rdlen);
	if (ctx.err) {
		msg->n_compr = saved_compr;
		if (msg->last_owner && msg->last_owner_off >= msg->len)
			msg->last_owner = NULL;
		return ctx.err == STEER_EMALF ? STEER_EMALF : STEER_ESPACE;
	}
	size_t written = wire_ctx_offset(&ctx) - rdlen_at - 2;
	wire_write_u16(msg->buf + rdlen_at, (uint16_t)written);
	msg->len = wire_ctx_offset(&ctx);
	msg->count[section]++;
	return 0;
}

int dns_msg_put_opt(dns_msg_t *msg, uint16_t payload, uint8_t ext_rcode, bool do_bit,
                    const uint8_t *options, uint16_t options_len)
{
	if (msg->len + DNS_OPT_RR_LEN + options_len > msg->limit)
		return STEER_ESPACE;
	uint8_t *p = msg->buf + msg->len;
	p[0] = 0; /* root owner */
	wire_write_u16(p + 1, DNS_TYPE_OPT);
	wire_write_u16(p + 3, payload);
	wire_write_u32(p + 5, (uint32_t)ext_rcode << 24 | (do_bit ? DNS_EDNS_DO : 0));
	wire_write_u16(p + 9, options_len);
	if (options_len)
		memcpy(p + DNS_OPT_RR_LEN, options, options_len);
	msg->len += DNS_OPT_RR_LEN + (size_t)options_len;
	msg->count[DNS_SEC_ADDITIONAL]++;
	msg->reserved = 0;
	return 0;
}

void dns_msg_set_flags(dns_msg_t *msg, uint16_t set, uint16_t clear)
{
	uint16_t flags = wire_read_u16(msg->buf + 2);
	wire_write_u16(msg->buf + 2, (uint16_t)((flags & ~clear) | set));
}

void dns_msg_set_rcode(dns_msg_t *msg, uint8_t rcode)
{
	dns_msg_set_flags(msg, rcode & DNS_RCODE_MASK, DNS_RCODE_MASK);
}

void dns_msg_rewind(dns_msg_t *msg, size_t len, const uint16_t count[3])
{
	msg->len = len;
	memcpy(msg->count, count, sizeof(msg->count));
	uint16_t kept = 0;
	for (uint16_t i = 0; i < msg->n_compr; i++) {
		if (msg->compr[i] < len)
			msg->compr[kept++] = msg->compr[i];
	}
	msg->n_compr = kept;
	if (msg->last_owner_off >= len)
		msg->last_owner = NULL;
}

size_t dns_msg_finish(dns_msg_t *msg)
{
	wire_write_u16(msg->buf + 6, msg->count[DNS_SEC_ANSWER]);
	wire_write_u16(msg->buf + 8, msg->count[DNS_SEC_AUTHORITY]);
	wire_write_u16(msg->buf + 10, msg->count[DNS_SEC_ADDITIONAL]);
	return msg->len;
}
