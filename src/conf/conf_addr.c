/*
 * The addresses of peers (upstreams, primaries, NOTIFY targets) and of the local source
 * they are reached from, as every section that talks to another server writes them.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf_int.h"

int conf_peer_address(const char *text, steer_sockaddr_t *out, char *msg, size_t len)
{
	char buf[128];
	const char *at = strrchr(text, '@');
	const char *parse = text;
	if (at != NULL) {
		/* BIND's and Knot's IP@PORT, rewritten to the IP:PORT form the parser takes. */
		size_t host = (size_t)(at - text);
		bool v6 = memchr(text, ':', host) != NULL;
		int n = snprintf(buf, sizeof(buf), "%s%.*s%s:%s", v6 ? "[" : "", (int)host, text,
		                 v6 ? "]" : "", at + 1);
		parse = n < 0 || (size_t)n >= sizeof(buf) || host == 0 ? NULL : buf;
	}
	if (parse == NULL || steer_sockaddr_parse(parse, 53, out) != 0) {
		snprintf(msg, len,
		         "invalid address '%s' (expected IP, IP:PORT or IP@PORT, IPv6 with a port "
		         "as \"[2001:db8::53]:53\")",
		         text);
		return -1;
	}
	if (steer_sockaddr_port(out) == 0) {
		snprintf(msg, len, "port 0 is not allowed in '%s'", text);
		return -1;
	}
	return 0;
}

int conf_source_address(const char *text, steer_sockaddr_t *out, char *msg, size_t len)
{
	steer_sockaddr_t other;
	/* A port given in the text is kept by both parses; a missing one takes each default. */
	if (steer_sockaddr_parse(text, 0, out) != 0 || steer_sockaddr_parse(text, 1, &other) != 0) {
		snprintf(msg, len, "invalid source address '%s' (expected an IP address)", text);
		return -1;
	}
	if (steer_sockaddr_port(out) != 0 || steer_sockaddr_port(&other) != 1) {
		snprintf(msg, len,
		         "source '%s' must be an address without a port (each query leaves from a "
		         "random port)",
		         text);
		return -1;
	}
	return 0;
}
