/*
 * Domain name primitives on uncompressed wire form. Used by every thread; all pure.
 */
#include "dns/dname.h"

#include <stdio.h>
#include <string.h>

#include "base/err.h"

static inline uint8_t ascii_lower(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + ('a' - 'A')) : c;
}

static int unpack(const uint8_t *msg, size_t msglen, size_t *offset, uint8_t *out, bool lower)
{
	size_t pos = *offset, outlen = 0, resume = 0;
	bool jumped = false;

	for (;;) {
		if (pos >= msglen)
			return STEER_ETRUNC;
		uint8_t len = msg[pos];
		if ((len & 0xc0) == 0xc0) {
			if (pos + 1 >= msglen)
				return STEER_ETRUNC;
			size_t target = (size_t)(len & 0x3f) << 8 | msg[pos + 1];
			/* Only strictly backward pointers: termination without a hop counter.
			 * Nothing in the header is a name. */
			if (target >= pos || target < DNS_HEADER_LEN)
				return STEER_EMALF;
			if (!jumped)
				resume = pos + 2;
			jumped = true;
			pos = target;
			continue;
		}
		if (len & 0xc0)
			return STEER_EMALF; /* extended label types (RFC 6891 obsoleted them) */
		if (outlen + 1 + len > DNS_DNAME_MAXLEN)
			return STEER_EMALF;
		if (pos + 1 + len > msglen)
			return STEER_ETRUNC;
		out[outlen] = len;
		if (lower) {
			for (uint8_t i = 1; i <= len; i++)
				out[outlen + i] = ascii_lower(msg[pos + i]);
		} else {
			memcpy(out + outlen + 1, msg + pos + 1, len);
		}
		outlen += 1 + (size_t)len;
		pos += 1 + (size_t)len;
		if (len == 0)
			break;
	}
	*offset = jumped ? resume : pos;
	return (int)outlen;
}

int dname_unpack(const uint8_t *msg, size_t msglen, size_t *offset, uint8_t out[DNS_DNAME_MAXLEN])
{
	return unpack(msg, msglen, offset, out, false);
}

int dname_unpack_lower(const uint8_t *msg, size_t msglen, size_t *offset,
                       uint8_t out[DNS_DNAME_MAXLEN])
{
	return unpack(msg, msglen, offset, out, true);
}

size_t dname_len(const uint8_t *name)
{
	const uint8_t *p = name;
	while (*p)
		p += 1 + *p;
	return (size_t)(p - name) + 1;
}

bool dname_is_valid(const uint8_t *name, size_t len)
{
	size_t pos = 0;
	while (pos < len) {
		uint8_t l = name[pos];
		if (l > DNS_LABEL_MAXLEN)
			return false;
		pos += 1 + (size_t)l;
		if (l == 0)
			return pos == len && len <= DNS_DNAME_MAXLEN;
	}
	return false;
}

void dname_lower(uint8_t *name)
{
	while (*name) {
		uint8_t len = *name++;
		for (uint8_t i = 0; i < len; i++)
			name[i] = ascii_lower(name[i]);
		name += len;
	}
}

bool dname_equal(const uint8_t *a, const uint8_t *b)
{
	for (;;) {
		if (*a != *b)
			return false;
		uint8_t len = *a;
		if (len == 0)
			return true;
		for (uint8_t i = 1; i <= len; i++) {
			if (ascii_lower(a[i]) != ascii_lower(b[i]))
				return false;
		}
		a += 1 + len;
		b += 1 + len;
	}
}

unsigned dname_labels(const uint8_t *name)
{
	unsigned n = 0;
	while (*name) {
		name += 1 + *name;
		n++;
	}
	return n;
}

const uint8_t *dname_parent(const uint8_t *name)
{
	return *name ? name + 1 + *name : NULL;
}

bool dname_is_subdomain(const uint8_t *name, const uint8_t *parent)
{
	unsigned nl = dname_labels(name), pl = dname_labels(parent);
	if (nl < pl)
		return false;
	for (unsigned i = nl - pl; i > 0; i--)
		name = dname_parent(name);
	return dname_equal(name, parent);
}

bool dname_is_wildcard(const uint8_t *name)
{
	return name[0] == 1 && name[1] == '*';
}

/* Reads one possibly escaped character of a label; returns the octet or -1. */
static int read_escaped(const char **text)
{
	const char *p = *text;
	if (*p != '\\') {
		*text = p + 1;
		return (uint8_t)*p;
	}
	p++;
	if (p[0] >= '0' && p[0] <= '9') {
		if (!(p[1] >= '0' && p[1] <= '9' && p[2] >= '0' && p[2] <= '9'))
			return -1;
		int v = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
		*text = p + 3;
		return v > 255 ? -1 : v;
	}
	if (*p == '\0')
		return -1;
	*text = p + 1;
	return (uint8_t)*p;
}

int dname_from_str(const char *text, uint8_t out[DNS_DNAME_MAXLEN])
{
	size_t outlen = 0;
	if (strcmp(text, ".") == 0) {
		out[0] = 0;
		return 1;
	}
	while (*text) {
		size_t label_at = outlen++;
		uint8_t len = 0;
		while (*text && *text != '.') {
			int c = read_escaped(&text);
			if (c < 0)
				return STEER_ESYNTAX;
			if (len == DNS_LABEL_MAXLEN || outlen + 1 >= DNS_DNAME_MAXLEN)
				return STEER_ERANGE;
			out[outlen++] = (uint8_t)c;
			len++;
		}
		if (len == 0)
			return STEER_ESYNTAX; /* empty label: "a..b" or a leading dot */
		out[label_at] = len;
		if (*text == '.')
			text++;
	}
	if (outlen == 0)
		return STEER_ESYNTAX;
	out[outlen++] = 0;
	return (int)outlen;
}

char *dname_to_str(const uint8_t *name, char *buf, size_t size)
{
	size_t pos = 0;
	buf[0] = '\0';
	if (*name == 0) {
		snprintf(buf, size, ".");
		return buf;
	}
	while (*name && pos < size) {
		uint8_t len = *name++;
		for (uint8_t i = 0; i < len && pos < size; i++) {
			uint8_t c = name[i];
			int n;
			if (c == '.' || c == '\\' || c == '"' || c == ';' || c == '(' || c == ')')
				n = snprintf(buf + pos, size - pos, "\\%c", c);
			else if (c > 0x20 && c < 0x7f)
				n = snprintf(buf + pos, size - pos, "%c", c);
			else
				n = snprintf(buf + pos, size - pos, "\\%03u", c);
			pos += (size_t)n;
		}
		name += len;
		if (pos < size)
			pos += (size_t)snprintf(buf + pos, size - pos, ".");
	}
	if (pos >= size)
		buf[size - 1] = '\0';
	return buf;
}
