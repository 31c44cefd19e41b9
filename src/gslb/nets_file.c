/*
 * Nets list parser (see nets_file.h). Runs on the config/reload thread; no state beyond the
 * call. The file is read whole and scanned line by line with memchr, so the cost per line is
 * one address parse (inet_pton) and no allocation.
 */
#include "gslb/nets_file.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/err.h"

/* Quoted bad text in messages is cut to this many input bytes. */
#define QUOTE_MAX 48

typedef struct {
	const char *name;
	unsigned line;
	char *err;
	size_t errlen;
} nets_ctx_t;

static void set_err(const nets_ctx_t *c, const char *fmt, ...) STEER_PRINTF(2, 3);

static void set_err(const nets_ctx_t *c, const char *fmt, ...)
{
	if (c->err == NULL || c->errlen == 0)
		return;
	int n = snprintf(c->err, c->errlen, "%s:%u: ", c->name, c->line);
	if (n < 0 || (size_t)n >= c->errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/* Printable copy of untrusted text for a message: escapes non-printables, cuts long text. */
static const char *quote(const char *text, size_t len, char *buf, size_t size)
{
	size_t o = 0;
	for (size_t i = 0; i < len && i < QUOTE_MAX && o + 5 < size; i++) {
		unsigned char ch = (unsigned char)text[i];
		if (ch >= 0x20 && ch < 0x7f && ch != '\\')
			buf[o++] = (char)ch;
		else
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", ch);
	}
	if (len > QUOTE_MAX && o + 4 < size) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Clear the bits of @p p beyond its length; true when any was set. */
static bool clear_host_bits(steer_prefix_t *p)
{
	bool any = false;
	unsigned bytes = p->family == AF_INET ? 4 : 16;
	for (unsigned i = 0; i < bytes; i++) {
		unsigned keep = p->len > i * 8 ? p->len - i * 8 : 0;
		uint8_t mask = keep >= 8 ? 0xff : (uint8_t)(0xff00 >> keep);
		any |= (p->addr[i] & ~mask) != 0;
		p->addr[i] &= mask;
	}
	return any;
}

/*
 * Parse one prefix token (NUL-terminated). The strict steer_prefix_parse() handles the normal
 * case; only when it fails is the address re-parsed alone, to tell "host bits set" (an error
 * of its own, with the network in *@p out so the message can name it) from bad syntax.
 */
static int parse_token(char *tok, steer_prefix_t *out, bool *host_bits)
{
	*host_bits = false;
	if (steer_prefix_parse(tok, out) == 0)
		return 0;
	char *slash = strchr(tok, '/');
	if (slash == NULL)
		return STEER_ESYNTAX;
	size_t digits = strspn(slash + 1, "0123456789");
	if (digits == 0 || digits > 3 || slash[1 + digits] != '\0')
		return STEER_ESYNTAX;
	unsigned len = (unsigned)atoi(slash + 1);
	*slash = '\0';
	int ret = steer_prefix_parse(tok, out);
	*slash = '/';
	if (ret != 0 || len > out->len)
		return STEER_ESYNTAX;
	out->len = (uint8_t)len;
	*host_bits = clear_host_bits(out);
	return *host_bits ? STEER_ESYNTAX : 0;
}

/* Handle one line without its newline. Returns 0 or an error (message already set). */
static int parse_line(nets_ctx_t *c, const char *p, size_t len, gslb_nets_file_cb cb, void *ctx,
                      gslb_nets_stats_t *st)
{
	char qbuf[QUOTE_MAX * 4 + 8];
	const char *hash = memchr(p, '#', len);
	if (hash)
		len = (size_t)(hash - p);
	while (len > 0 && is_space(*p)) {
		p++;
		len--;
	}
	while (len > 0 && is_space(p[len - 1]))
		len--;
	if (len == 0)
		return 0;

	size_t toklen = 0;
	while (toklen < len && !is_space(p[toklen]))
		toklen++;
	if (toklen < len) {
		set_err(c, "one prefix per line, junk after it: '%s'",
		        quote(p, len, qbuf, sizeof(qbuf)));
		return STEER_ESYNTAX;
	}
	char tok[GSLB_NETS_TOKEN_MAX + 1];
	steer_prefix_t prefix;
	bool host_bits = false;
	int ret = STEER_ESYNTAX;
	if (toklen <= GSLB_NETS_TOKEN_MAX && memchr(p, '\0', toklen) == NULL) {
		memcpy(tok, p, toklen);
		tok[toklen] = '\0';
		ret = parse_token(tok, &prefix, &host_bits);
	}
	if (ret != 0 && host_bits) {
		char net[INET6_ADDRSTRLEN];
		if (!inet_ntop(prefix.family, prefix.addr, net, sizeof(net)))
			snprintf(net, sizeof(net), "?");
		set_err(c,
		        "host bits set in '%s': /%u of it is %s/%u (fix the address or the length)",
		        tok, prefix.len, net, prefix.len);
		return ret;
	}
	if (ret != 0) {
		set_err(c, "bad prefix '%s'", quote(p, toklen, qbuf, sizeof(qbuf)));
		return ret;
	}
	ret = cb(ctx, &prefix, c->line);
	if (ret == GSLB_NETS_CB_FAIL)
		return STEER_ECONF;
	if (ret != 0) {
		set_err(c, "%s", steer_strerror(ret));
		return ret;
	}
	st->prefixes++;
	return 0;
}

int gslb_nets_parse(const char *name, const char *text, size_t len, gslb_nets_file_cb cb, void *ctx,
                    gslb_nets_stats_t *stats, char *err, size_t errlen)
{
	gslb_nets_stats_t local;
	gslb_nets_stats_t *st = stats ? stats : &local;
	memset(st, 0, sizeof(*st));
	nets_ctx_t c = {.name = name, .err = err, .errlen = errlen};
	if (err && errlen)
		err[0] = '\0';
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		c.line++;
		st->lines = c.line;
		int ret = parse_line(&c, p, (size_t)(eol - p), cb, ctx, st);
		if (ret != 0)
			return ret;
		p = nl ? nl + 1 : end;
	}
	return 0;
}

/* Read the whole regular file at @p path into a new buffer. Returns 0 or an error, message set. */
static int slurp(const char *path, char **data, size_t *len, char *err, size_t errlen)
{
	int ret = 0;
	*data = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	struct stat sb;
	if (fstat(fd, &sb) != 0) {
		ret = -errno;
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		ret = STEER_EINVAL;
		goto out;
	}
	if ((unsigned long long)sb.st_size > GSLB_NETS_FILE_MAX) {
		ret = STEER_ERANGE;
		goto out;
	}
	size_t size = (size_t)sb.st_size;
	char *buf = xmalloc(size ? size : 1);
	size_t got = 0;
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			free(buf);
			goto out;
		}
		if (n == 0)
			break; /* shrank while reading: parse what is there */
		got += (size_t)n;
	}
	*data = buf;
	*len = got;
out:
	if (fd >= 0)
		close(fd);
	if (ret != 0 && err && errlen) {
		snprintf(err, errlen, "%s: %s", path,
		         ret == STEER_EINVAL   ? "not a regular file"
		         : ret == STEER_ERANGE ? "file too large"
		                               : steer_strerror(ret));
	}
	return ret;
}

int gslb_nets_file_read(const char *path, gslb_nets_file_cb cb, void *ctx, gslb_nets_stats_t *stats,
                        char *err, size_t errlen)
{
	char *data;
	size_t len;
	if (stats)
		memset(stats, 0, sizeof(*stats));
	int ret = slurp(path, &data, &len, err, errlen);
	if (ret != 0)
		return ret;
	ret = gslb_nets_parse(path, data, len, cb, ctx, stats, err, errlen);
	free(data);
	return ret;
}
