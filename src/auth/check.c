/*
 * Zone data against GSLB names (see check.h). The query path (answer.c) answers a GSLB name's
 * own types from the GSLB view and every other type from the zone's node at that name; what
 * it cannot serve that way is refused here instead of being hidden.
 */
#include "auth/check.h"

#include <stdarg.h>
#include <stdio.h>

#include "auth/auth_int.h"
#include "base/err.h"
#include "dns/const.h"
#include "dns/dname.h"

typedef struct {
	char *buf;
	size_t len, pos;
	int ret;
} problems_t;

STEER_PRINTF(2, 3)
static void problem(problems_t *p, const char *fmt, ...)
{
	p->ret = STEER_ECONF;
	if (p->pos >= p->len)
		return;
	if (p->pos > 0 && p->pos + 1 < p->len)
		p->buf[p->pos++] = '\n';
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(p->buf + p->pos, p->len - p->pos, fmt, ap);
	va_end(ap);
	if (n > 0)
		p->pos += (size_t)n < p->len - p->pos ? (size_t)n : p->len - p->pos - 1;
}

static const char *type_name(uint16_t type)
{
	switch (type) {
	case DNS_TYPE_A:
		return "A";
	case DNS_TYPE_AAAA:
		return "AAAA";
	case DNS_TYPE_TXT:
		return "TXT";
	case DNS_TYPE_CNAME:
		return "CNAME";
	case DNS_TYPE_DNAME:
		return "DNAME";
	case DNS_TYPE_NS:
		return "NS";
	}
	return "?";
}

/* One problem naming the zone record (@p node, @p type) and the GSLB name's definition. */
static void conflict(problems_t *p, const zone_t *zone, const zone_node_t *node, uint16_t type,
                     const gslb_name_info_t *gi, const char *why)
{
	char where[1024], owner[DNAME_STR_MAXLEN], name[DNAME_STR_MAXLEN];
	zone_record_where(zone, node->owner, type, where, sizeof(where));
	dname_to_str(node->owner, owner, sizeof(owner));
	dname_to_str(gi->wire, name, sizeof(name));
	const char *kind = gi->whoami ? "whoami name" : "GSLB service";
	if (gi->line)
		problem(p, "%s: %s %s %s the %s %s (%s:%u)", where, owner, type_name(type), why,
		        kind, name, gi->file, gi->line);
	else
		problem(p, "%s: %s %s %s the %s %s (%s)", where, owner, type_name(type), why, kind,
		        name, gi->file);
}

static void check_name(problems_t *p, const zone_t *zone, const gslb_name_t *gname,
                       const gslb_name_info_t *gi)
{
	auth_lookup_t look;
	auth_lookup(zone, gi->wire, &look);
	if (look.cut) {
		conflict(p, zone, look.cut, DNS_TYPE_NS, gi,
		         look.cut == look.exact ? "delegates the name of"
		                                : "delegates the subtree holding");
		return;
	}
	/* A DNAME redirects the names below its owner (RFC 6672 2.3), not the owner itself. */
	const zone_node_t *n = look.encloser;
	if (n == look.exact && n)
		n = n->parent;
	for (; n; n = n->parent) {
		if (zone_node_rrset(n, DNS_TYPE_DNAME))
			conflict(p, zone, n, DNS_TYPE_DNAME, gi, "redirects the subtree holding");
	}
	const zone_node_t *node = look.exact;
	if (!node)
		return;
	if (zone_node_rrset(node, DNS_TYPE_CNAME))
		conflict(p, zone, node, DNS_TYPE_CNAME, gi, "is an alias at the name of");
	static const uint16_t own[] = {DNS_TYPE_A, DNS_TYPE_AAAA, DNS_TYPE_TXT};
	for (size_t i = 0; i < STEER_ARRAY_LEN(own); i++) {
		if (gslb_view_name_answers(gname, own[i]) && zone_node_rrset(node, own[i]))
			conflict(p, zone, node, own[i], gi, "would be hidden by");
	}
}

int auth_check_gslb_names(const zone_set_t *zones, const gslb_view_t *gslb, char *err,
                          size_t errlen)
{
	problems_t p = {err, errlen, 0, 0};
	if (errlen)
		err[0] = '\0';
	size_t n = gslb_view_name_count(gslb);
	for (size_t i = 0; i < n; i++) {
		gslb_name_info_t gi;
		gslb_view_name_info(gslb, i, &gi);
		const zone_set_entry_t *entry = zone_set_find(zones, gi.wire);
		if (!entry)
			continue;
		const gslb_name_t *gname = gslb_view_find(gslb, gi.wire);
		if (gname)
			check_name(&p, entry->zone, gname, &gi);
	}
	return p.ret;
}
