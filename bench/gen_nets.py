#!/usr/bin/python3
"""Writes the GSLB benchmark's nets map and ECS subnets (deterministic, --seed).

The map imitates operators' ISP lists: mostly IPv4 prefixes with a BGP-like length mix (/24
most common, down to a few /12s), 10% IPv6 (/29 to /48 inside 2400::/6 and
2800::/7, clear of 6to4 and Teredo, which gdnsd refuses), some more-specifics
nested inside larger prefixes, and neighbouring prefixes of one ISP steered alike (each /8 and
each IPv6 /12 has a home datacenter that 80% of its prefixes use). Private, loopback, CGN and
link-local space is left out. Every prefix maps to one of --datacenters datacenters; the files:

  nets/dcK.txt        steerd: one CIDR per line, the prefixes whose first choice is dcK
  gdnsd-nets          gdnsd geoip plugin: "CIDR => [dcK, dcK+1, dcK+2]" per prefix
  ecs.txt             --ecs subnets for loadgen --ecs-file: 90% inside a map prefix (IPv4
                      /24, IPv6 /56, like resolvers send), 10% public IPv4 /24s
                      outside every map prefix (the map's default answers them)

Used by bench/gslb.py; run alone: bench/gen_nets.py --count 60000 --out DIR.
"""

import argparse
import ipaddress
import os
import random

V4_LENGTHS = {24: 45, 23: 10, 22: 12, 21: 7, 20: 7, 19: 5, 18: 4, 17: 3, 16: 5, 15: 1, 14: 0.6,
              13: 0.3, 12: 0.1}
V6_LENGTHS = {32: 40, 29: 10, 36: 10, 40: 10, 44: 10, 48: 20}
RESERVED_V4 = [ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
    "203.0.113.0/24")]


def pick(rng, weights):
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def public_v4(net):
    return not any(net.overlaps(r) for r in RESERVED_V4)


def gen_prefixes(rng, count, ndc):
    """[(network, dc index)], unique networks; about 1 in 20 nested in an earlier one."""
    seen, out = set(), []
    home4 = [rng.randrange(ndc) for _ in range(256)]
    home6 = [rng.randrange(ndc) for _ in range(4096)]
    while len(out) < count:
        if out and rng.random() < 0.05:  # a more-specific of an existing prefix
            parent, _ = out[rng.randrange(len(out))]
            if parent.prefixlen >= (24 if parent.version == 4 else 48):
                continue
            plen = rng.randint(parent.prefixlen + 1, 24 if parent.version == 4 else 48)
            span = 1 << (plen - parent.prefixlen)
            base = int(parent.network_address) + rng.randrange(span) * (
                1 << (parent.max_prefixlen - plen))
            net = ipaddress.ip_network((base, plen))
            dc = rng.randrange(ndc)
        elif rng.random() < 0.9:
            plen = pick(rng, V4_LENGTHS)
            first = rng.randint(1, 223)
            base = (first << 24) | (rng.getrandbits(24) & ~((1 << (32 - plen)) - 1) & 0xffffff)
            net = ipaddress.IPv4Network((base, plen))
            if not public_v4(net):
                continue
            dc = home4[first] if rng.random() < 0.8 else rng.randrange(ndc)
        else:
            plen = pick(rng, V6_LENGTHS)
            top = rng.randint(0x2400, 0x2bff)  # RIR space: clear of 6to4 and Teredo
            base = (top << 112) | (rng.getrandbits(112) & ~((1 << (128 - plen)) - 1)
                                   & ((1 << 112) - 1))
            net = ipaddress.IPv6Network((base, plen))
            dc = home6[top >> 4 & 0xfff] if rng.random() < 0.8 else rng.randrange(ndc)
        if net in seen:
            continue
        seen.add(net)
        out.append((net, dc))
    return out


def covered(index, net):
    return any(net.supernet(new_prefix=p) in index for p in range(net.prefixlen + 1))


def ecs_subnets(rng, prefixes, count):
    index = {net for net, _ in prefixes}
    out = []
    while len(out) < count:
        if rng.random() < 0.9:
            net, _ = prefixes[rng.randrange(len(prefixes))]
            src = 24 if net.version == 4 else 56
            host = int(net.network_address) + rng.getrandbits(net.max_prefixlen - net.prefixlen)
            sub = ipaddress.ip_network((host, src), strict=False)
        else:
            sub = ipaddress.IPv4Network((rng.randint(1, 223) << 24 | rng.getrandbits(24), 24),
                                        strict=False)
            if not public_v4(sub) or covered(index, sub):
                continue
        out.append(str(sub))
    return out


def write_all(out, count, ndc, ecs_count, seed):
    rng = random.Random(seed)
    prefixes = gen_prefixes(rng, count, ndc)
    os.makedirs(os.path.join(out, "nets"), exist_ok=True)
    files = [open(os.path.join(out, "nets", "dc%d.txt" % k), "w") for k in range(ndc)]
    with open(os.path.join(out, "gdnsd-nets"), "w") as g:
        for net, dc in prefixes:
            files[dc].write("%s\n" % net)
            g.write("%s => [%s]\n" % (net, ", ".join("dc%d" % ((dc + i) % ndc) for i in range(3))))
    for f in files:
        f.close()
    if ecs_count:
        with open(os.path.join(out, "ecs.txt"), "w") as f:
            f.write("\n".join(ecs_subnets(rng, prefixes, ecs_count)) + "\n")
    return prefixes


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=60000)
    ap.add_argument("--datacenters", type=int, default=10)
    ap.add_argument("--ecs", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    write_all(a.out, a.count, a.datacenters, a.ecs, a.seed)


if __name__ == "__main__":
    main()
