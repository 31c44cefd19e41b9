/*
 * The few rtnetlink operations a cluster node needs, each one request and its
 * acknowledgement on a fresh NETLINK_ROUTE socket (no state kept between calls): the holder
 * interface and its addresses, kernel routes that a routing daemon redistributes, and route
 * lookups that tell whether replies can leave the node. Changing links, addresses and routes
 * needs CAP_NET_ADMIN (the keeper process); lookups do not.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/compiler.h"
#include "base/sockaddr.h"

/*
 * The route protocol number (rtm_protocol) of the routes Steer adds, so that `ip route show
 * proto 53` lists them and a routing daemon's filter can pick them; no daemon uses 53.
 */
#define NL_RTPROT_STEER 53

/**
 * Make sure the interface @p ifname exists: create it as a `dummy` link, or as an `ifb` link
 * when this kernel has no dummy driver (never assumes a type for an existing one). Sets
 * @p created when it made it. For IPv6 the interface keeps its addresses while admin down
 * (keep_addr_on_down). Returns 0 or a negative steer_err with the reason in @p err.
 */
int nl_link_ensure(const char *ifname, bool *created, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/** Set @p ifname admin up or down. Returns 0 or a negative steer_err with @p err. */
int nl_link_set_up(const char *ifname, bool up, char *err, size_t errlen)
    STEER_NONNULL(1, 3) STEER_WUR;

/**
 * Whether @p ifname is admin up: 1 up, 0 down, or a negative steer_err (no such device) with
 * @p err.
 */
int nl_link_is_up(const char *ifname, char *err, size_t errlen) STEER_NONNULL(1, 2) STEER_WUR;

/**
 * Add @p addr as a host address (/32, /128; IPv6 without duplicate address detection) to
 * @p ifname unless it is there already. Returns 0 or a negative steer_err with @p err.
 */
int nl_addr_ensure(const char *ifname, const steer_sockaddr_t *addr, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Add (@p present) or remove the host route to @p dst through @p ifname in routing table
 * @p table, marked with Steer's own route protocol number so that it is never confused with
 * another daemon's route. Adding an existing route or removing a missing one succeeds.
 * Returns 0 or a negative steer_err with @p err.
 */
int nl_route_set(const steer_sockaddr_t *dst, const char *ifname, unsigned table, bool present,
                 char *err, size_t errlen) STEER_NONNULL(1, 2, 5) STEER_WUR;

/**
 * Add (@p present) or remove a `local` route to @p addr through lo in the local table (metric
 * 1024, Steer's route protocol), so that the node keeps accepting packets to @p addr while
 * the interface holding it is down. IPv4 keeps the local routes of a down interface's
 * addresses by itself; IPv6 removes them even with keep_addr_on_down. Idempotent. Returns 0
 * or a negative steer_err with @p err.
 */
int nl_local_route_set(const steer_sockaddr_t *addr, bool present, char *err, size_t errlen)
    STEER_NONNULL(1, 3) STEER_WUR;

/**
 * Whether a reply from @p src (family 0 = any source) to @p dst can leave the node: the
 * kernel's route lookup (RTM_GETROUTE) finds a unicast route whose device is up. With @p dst
 * NULL, whether the main table holds a default route of @p family whose device is up. Returns
 * 1 yes, 0 no (the reason in @p why), or a negative steer_err when the lookup itself failed.
 */
int nl_route_check(int family, const steer_sockaddr_t *dst, const steer_sockaddr_t *src, char *why,
                   size_t whylen) STEER_NONNULL(4) STEER_WUR;
