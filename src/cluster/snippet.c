/*
 * Routing daemon configurations for this node: see snippet.h. The text is what the lab runs
 * (tests/integration/test_cluster_snippets.py parses it with bird and FRR's vtysh).
 */
#include "cluster/snippet.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

#define SNIPPET_PEERS_MAX 8

typedef struct {
	bool ospf;
	steer_sockaddr_t peers[SNIPPET_PEERS_MAX];
	size_t n_peers;
	unsigned long local_as, peer_as;
	char area[16];
	char uplink[IF_NAMESIZE];
	unsigned long bfd_interval, bfd_multiplier;
} snippet_opts_t;

static int parse_ulong(const char *v, unsigned long lo, unsigned long hi, unsigned long *out)
{
	char *end = NULL;
	if (v[0] < '0' || v[0] > '9')
		return STEER_EINVAL;
	unsigned long n = strtoul(v, &end, 10);
	if (*end != '\0' || n < lo || n > hi)
		return STEER_EINVAL;
	*out = n;
	return 0;
}

static int parse_area(const char *v, char *out, size_t size)
{
	struct in_addr a;
	unsigned long n;
	if (inet_pton(AF_INET, v, &a) == 1) {
		snprintf(out, size, "%s", v);
		return 0;
	}
	if (parse_ulong(v, 0, UINT32_MAX, &n) != 0)
		return STEER_EINVAL;
	a.s_addr = htonl((uint32_t)n);
	inet_ntop(AF_INET, &a, out, (socklen_t)size);
	return 0;
}

/* A peer is a bare address: BGP's port is not ours to change. */
static int parse_peer(const char *v, steer_sockaddr_t *out)
{
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, v, &out->sin.sin_addr) == 1) {
		out->sin.sin_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, v, &out->sin6.sin6_addr) == 1) {
		out->sin6.sin6_family = AF_INET6;
		return 0;
	}
	return STEER_EINVAL;
}

static int parse_option(snippet_opts_t *o, const char *arg, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	if (eq == NULL) {
		snprintf(err, errlen, "'%s': want bgp, ospf or OPTION=VALUE", arg);
		return STEER_EINVAL;
	}
	size_t klen = (size_t)(eq - arg);
	const char *v = eq + 1;
	int ret = STEER_EINVAL;
#define KEY(name) (klen == strlen(name) && strncmp(arg, name, klen) == 0)
	if (KEY("peer")) {
		ret = o->n_peers < SNIPPET_PEERS_MAX ? parse_peer(v, &o->peers[o->n_peers]) : ret;
		if (ret == 0)
			o->n_peers++;
	} else if (KEY("local-as")) {
		ret = parse_ulong(v, 1, UINT32_MAX, &o->local_as);
	} else if (KEY("peer-as")) {
		ret = parse_ulong(v, 1, UINT32_MAX, &o->peer_as);
	} else if (KEY("area")) {
		ret = parse_area(v, o->area, sizeof(o->area));
	} else if (KEY("uplink")) {
		if (v[0] != '\0' && strlen(v) < IF_NAMESIZE && strpbrk(v, "/ \t\"'") == NULL) {
			snprintf(o->uplink, sizeof(o->uplink), "%s", v);
			ret = 0;
		}
	} else if (KEY("bfd-interval")) {
		ret = parse_ulong(v, 10, 60000, &o->bfd_interval);
	} else if (KEY("bfd-multiplier")) {
		ret = parse_ulong(v, 2, 255, &o->bfd_multiplier);
	} else {
		snprintf(
		    err, errlen,
		    "unknown option '%.*s' (peer, local-as, peer-as, area, uplink, bfd-interval, "
		    "bfd-multiplier)",
		    (int)klen, arg);
		return STEER_EINVAL;
	}
#undef KEY
	if (ret != 0)
		snprintf(err, errlen, "bad value in '%s'", arg);
	return ret;
}

/* The interface holding @p addr, for OSPF's uplink. */
static bool iface_of(const steer_sockaddr_t *addr, char *out, size_t size)
{
	struct ifaddrs *list = NULL;
	bool found = false;
	if (addr->sa.sa_family == 0 || getifaddrs(&list) != 0)
		return false;
	for (struct ifaddrs *i = list; i != NULL && !found; i = i->ifa_next) {
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != addr->sa.sa_family)
			continue;
		if (addr->sa.sa_family == AF_INET)
			found = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
			        addr->sin.sin_addr.s_addr;
		else
			found = memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
			               &addr->sin6.sin6_addr, 16) == 0;
		if (found)
			snprintf(out, size, "%s", i->ifa_name);
	}
	freeifaddrs(list);
	return found;
}

static int parse_opts(const conf_cluster_t *cc, const char *const *argv, size_t argc,
                      snippet_opts_t *o, char *err, size_t errlen)
{
	memset(o, 0, sizeof(*o));
	o->local_as = 65053;
	o->peer_as = 65000;
	snprintf(o->area, sizeof(o->area), "0.0.0.0");
	o->bfd_interval = 100;
	o->bfd_multiplier = 3;
	size_t i = 0;
	if (argc > 0 && (strcmp(argv[0], "bgp") == 0 || strcmp(argv[0], "ospf") == 0)) {
		o->ospf = strcmp(argv[0], "ospf") == 0;
		i = 1;
	}
	for (; i < argc; i++)
		if (parse_option(o, argv[i], err, errlen) != 0)
			return STEER_EINVAL;
	if (!o->ospf && o->n_peers == 0) {
		snprintf(err, errlen, "BGP needs the router's address: peer=ADDR (repeatable)");
		return STEER_EINVAL;
	}
	if (o->ospf && o->uplink[0] == '\0' &&
	    !iface_of(&cc->unicast4, o->uplink, sizeof(o->uplink)) &&
	    !iface_of(&cc->unicast6, o->uplink, sizeof(o->uplink))) {
		snprintf(err, errlen,
		         "OSPF needs the interface towards the routers: uplink=IFNAME (no local "
		         "interface holds cluster.unicast)");
		return STEER_EINVAL;
	}
	return 0;
}

static const char *addr_str(const steer_sockaddr_t *a, char *buf, size_t size)
{
	const void *raw = a->sa.sa_family == AF_INET ? (const void *)&a->sin.sin_addr
	                                             : (const void *)&a->sin6.sin6_addr;
	return inet_ntop(a->sa.sa_family, raw, buf, (socklen_t)size);
}

/* The router id: the unicast IPv4 address, else the first IPv4 service address's. */
static const char *router_id(const conf_cluster_t *cc, char *buf, size_t size)
{
	if (cc->unicast4.sa.sa_family == AF_INET)
		return addr_str(&cc->unicast4, buf, size);
	snprintf(buf, size, "<set router id: no cluster.unicast IPv4 address>");
	return buf;
}

static bool has_family(const conf_cluster_t *cc, int family)
{
	for (size_t i = 0; i < cc->n_service; i++)
		if (cc->service[i].sa.sa_family == family)
			return true;
	return false;
}

static const steer_sockaddr_t *unicast_of(const conf_cluster_t *cc, int family)
{
	const steer_sockaddr_t *u = family == AF_INET ? &cc->unicast4 : &cc->unicast6;
	return u->sa.sa_family == family ? u : NULL;
}

/* The protocol whose routes are the service addresses: the one steerd toggles with
 * announce: bird, else a `direct` protocol on the holder. */
static const char *bird_vip_name(const conf_cluster_t *cc)
{
	return cc->announce == CONF_ANNOUNCE_BIRD && cc->bird_protocol != NULL ? cc->bird_protocol
	                                                                       : "vip";
}

static void bird_common(FILE *f, const conf_cluster_t *cc, const snippet_opts_t *o)
{
	char rid[INET6_ADDRSTRLEN + 64];
	const char *ifname = cc->interface != NULL ? cc->interface : "vip0";
	fprintf(f,
	        "# BIRD 2 configuration for Steer node %s (steerctl cluster bird-config).\n"
	        "# The service addresses are the routes of the direct protocol \"%s\" on %s:\n"
	        "# %s\n\n"
	        "router id %s;\n\n"
	        "protocol device {\n\tscan time 10;\n}\n\n",
	        cc->node_id != NULL ? cc->node_id : "?", bird_vip_name(cc), ifname,
	        cc->announce == CONF_ANNOUNCE_BIRD
	            ? "steerd withdraws them with `disable` over this BIRD's control socket."
	            : "steerd withdraws them by taking the interface down.",
	        router_id(cc, rid, sizeof(rid)));
	fprintf(f, "protocol direct %s {\n", bird_vip_name(cc));
	if (has_family(cc, AF_INET))
		fprintf(f, "\tipv4;\n");
	if (has_family(cc, AF_INET6))
		fprintf(f, "\tipv6;\n");
	fprintf(f, "\tinterface \"%s\";\n}\n\n", ifname);
	fprintf(f,
	        "# Node and link death are detected by BFD: %lu ms x %lu.\n"
	        "protocol bfd {\n\tinterface \"*\" {\n\t\tmin rx interval %lu ms;\n"
	        "\t\tmin tx interval %lu ms;\n\t\tmultiplier %lu;\n\t};\n}\n\n",
	        o->bfd_interval, o->bfd_multiplier, o->bfd_interval, o->bfd_interval,
	        o->bfd_multiplier);
}

static void bird_bgp(FILE *f, const conf_cluster_t *cc, const snippet_opts_t *o)
{
	char a[INET6_ADDRSTRLEN], l[INET6_ADDRSTRLEN];
	for (size_t i = 0; i < o->n_peers; i++) {
		int fam = o->peers[i].sa.sa_family;
		const steer_sockaddr_t *src = unicast_of(cc, fam);
		fprintf(f, "protocol bgp uplink%zu {\n", i + 1);
		if (src != NULL)
			fprintf(f, "\tlocal %s as %lu;\n", addr_str(src, l, sizeof(l)),
			        o->local_as);
		else
			fprintf(f, "\tlocal as %lu;\n", o->local_as);
		fprintf(f,
		        "\tneighbor %s as %lu;\n"
		        "\thold time 3;\n\tkeepalive time 1;\n\tconnect retry time 1;\n"
		        "\terror wait time 1, 5;\n\tbfd on;\n\tgraceful restart off;\n"
		        "\t%s {\n\t\timport none;\n\t\texport where proto = \"%s\";\n\t};\n}\n\n",
		        addr_str(&o->peers[i], a, sizeof(a)), o->peer_as,
		        fam == AF_INET ? "ipv4" : "ipv6", bird_vip_name(cc));
	}
}

static void bird_ospf(FILE *f, const conf_cluster_t *cc, const snippet_opts_t *o)
{
	static const int fams[] = {AF_INET, AF_INET6};
	for (size_t i = 0; i < 2; i++) {
		if (!has_family(cc, fams[i]))
			continue;
		bool v4 = fams[i] == AF_INET;
		fprintf(f,
		        "# The service addresses go out as external routes: the routers need\n"
		        "# `merge external yes` in their OSPF protocol for ECMP over the nodes.\n"
		        "protocol ospf %s {\n"
		        "\t%s {\n\t\timport none;\n\t\texport where proto = \"%s\";\n\t};\n"
		        "\tarea %s {\n\t\tinterface \"%s\" {\n\t\t\thello 1;\n\t\t\tdead 3;\n"
		        "\t\t\tbfd yes;\n\t\t};\n\t};\n}\n\n",
		        v4 ? "v2 ospf4" : "v3 ospf6", v4 ? "ipv4" : "ipv6", bird_vip_name(cc),
		        o->area, o->uplink);
	}
}

static void frr_filters(FILE *f, const conf_cluster_t *cc)
{
	char a[INET6_ADDRSTRLEN];
	unsigned seq4 = 5, seq6 = 5;
	for (size_t i = 0; i < cc->n_service; i++) {
		bool v4 = cc->service[i].sa.sa_family == AF_INET;
		fprintf(f, "%s prefix-list STEER-SERVICE%s seq %u permit %s/%u\n",
		        v4 ? "ip" : "ipv6", v4 ? "" : "6", v4 ? seq4 : seq6,
		        addr_str(&cc->service[i], a, sizeof(a)), v4 ? 32 : 128);
		if (v4)
			seq4 += 5;
		else
			seq6 += 5;
	}
	/* One origin whatever the method: redistributed routes are "incomplete", `network`
	 * ones IGP, and a router only merges equal origins into one multipath route. */
	if (has_family(cc, AF_INET))
		fprintf(f, "!\nroute-map STEER-SERVICE permit 10\n match ip address prefix-list "
		           "STEER-SERVICE\n set origin igp\nexit\n");
	if (has_family(cc, AF_INET6))
		fprintf(f, "!\nroute-map STEER-SERVICE6 permit 10\n match ipv6 address prefix-list "
		           "STEER-SERVICE6\n set origin igp\nexit\n");
	fprintf(f, "!\n");
}

/* How the service routes enter FRR: kernel routes steerd adds (announce: frr), or the
 * holder's connected routes, present while it is up (announce: interface). */
static const char *frr_source(const conf_cluster_t *cc)
{
	return cc->announce == CONF_ANNOUNCE_FRR ? "kernel" : "connected";
}

static void frr_bgp(FILE *f, const conf_cluster_t *cc, const snippet_opts_t *o)
{
	char a[INET6_ADDRSTRLEN], rid[INET6_ADDRSTRLEN + 64];
	fprintf(f,
	        "router bgp %lu\n bgp router-id %s\n no bgp ebgp-requires-policy\n"
	        " no bgp default ipv4-unicast\n bgp graceful-restart-disable\n",
	        o->local_as, router_id(cc, rid, sizeof(rid)));
	for (size_t i = 0; i < o->n_peers; i++) {
		addr_str(&o->peers[i], a, sizeof(a));
		fprintf(f,
		        " neighbor %s remote-as %lu\n neighbor %s timers 1 3\n"
		        " neighbor %s timers connect 1\n neighbor %s bfd profile steer\n",
		        a, o->peer_as, a, a, a);
	}
	static const int fams[] = {AF_INET, AF_INET6};
	for (size_t k = 0; k < 2; k++) {
		bool v4 = fams[k] == AF_INET;
		if (!has_family(cc, fams[k]))
			continue;
		fprintf(
		    f,
		    " !\n address-family %s unicast\n  redistribute %s route-map STEER-SERVICE%s\n",
		    v4 ? "ipv4" : "ipv6", frr_source(cc), v4 ? "" : "6");
		for (size_t i = 0; i < o->n_peers; i++) {
			if (o->peers[i].sa.sa_family != fams[k])
				continue;
			addr_str(&o->peers[i], a, sizeof(a));
			fprintf(
			    f,
			    "  neighbor %s activate\n  neighbor %s route-map STEER-SERVICE%s out\n",
			    a, a, v4 ? "" : "6");
		}
		fprintf(f, " exit-address-family\n");
	}
	fprintf(f, "exit\n!\n");
}

static void frr_ospf(FILE *f, const conf_cluster_t *cc, const snippet_opts_t *o)
{
	char rid[INET6_ADDRSTRLEN + 64];
	fprintf(
	    f,
	    "interface %s\n ip ospf area %s\n ip ospf hello-interval 1\n"
	    " ip ospf dead-interval 3\n ip ospf bfd\n ip ospf bfd profile steer\nexit\n!\n"
	    "router ospf\n ospf router-id %s\n redistribute %s route-map STEER-SERVICE\nexit\n!\n",
	    o->uplink, o->area, router_id(cc, rid, sizeof(rid)), frr_source(cc));
	if (has_family(cc, AF_INET6))
		fprintf(f,
		        "! IPv6 service addresses need ospf6d with the same redistribution.\n!\n");
}

static void frr_config(FILE *f, const conf_cluster_t *cc, const snippet_opts_t *o)
{
	fprintf(f,
	        "! FRR configuration for Steer node %s (steerctl cluster frr-config).\n"
	        "! The service addresses are announced while %s; BFD %lu ms x %lu\n"
	        "! detects node and link death; graceful restart is off so a dead node's\n"
	        "! routes go at once.\n"
	        "frr defaults traditional\nhostname %s\n!\n",
	        cc->node_id != NULL ? cc->node_id : "?",
	        cc->announce == CONF_ANNOUNCE_FRR
	            ? "steerd keeps its kernel host routes to them"
	            : "the holder interface is up (steerd takes it down to withdraw)",
	        o->bfd_interval, o->bfd_multiplier, cc->node_id != NULL ? cc->node_id : "steer");
	frr_filters(f, cc);
	if (o->ospf)
		frr_ospf(f, cc, o);
	else
		frr_bgp(f, cc, o);
	fprintf(f,
	        "bfd\n profile steer\n  receive-interval %lu\n  transmit-interval %lu\n"
	        "  detect-multiplier %lu\n exit\nexit\n!\n",
	        o->bfd_interval, o->bfd_interval, o->bfd_multiplier);
}

int cluster_snippet(const conf_cluster_t *cc, const char *daemon, const char *const *opts,
                    size_t n_opts, char **out, char *err, size_t errlen)
{
	snippet_opts_t o;
	bool bird = strcmp(daemon, "bird") == 0;
	if (!bird && strcmp(daemon, "frr") != 0) {
		snprintf(err, errlen, "unknown routing daemon '%s' (bird or frr)", daemon);
		return STEER_EINVAL;
	}
	if (parse_opts(cc, opts, n_opts, &o, err, errlen) != 0)
		return STEER_EINVAL;
	size_t len = 0;
	FILE *f = open_memstream(out, &len);
	if (f == NULL)
		return STEER_ENOMEM;
	if (bird) {
		bird_common(f, cc, &o);
		if (o.ospf)
			bird_ospf(f, cc, &o);
		else
			bird_bgp(f, cc, &o);
	} else {
		frr_config(f, cc, &o);
	}
	return fclose(f) == 0 ? 0 : STEER_ENOMEM;
}
