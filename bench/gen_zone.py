#!/usr/bin/python3
"""Generate the benchmark zones and query mix (deterministic for a given --seed).

Writes into --out:
  example.test.zone  a small realistic zone for the q/s runs: SOA, NS with glue, apex A/AAAA/MX/TXT,
                     hosts with A and AAAA, mail hosts, CNAMEs to hosts, TXT names, SRV, two
                     wildcards and a delegation with glue.
  queries.txt        the query mix for loadgen, "name type" per line, shuffled: mostly A/AAAA for
                     existing names, then NXDOMAIN, MX, CNAME-to-host, wildcard and TXT queries.
  big.test.zone      exactly --big-records records (default 1,000,000) for the RSS/load-time run.
  big.last           the last name of big.test, which run.py polls to see that the zone is loaded.

Only RFC 1035 master-file syntax is used, so knotd, nsd, gdnsd and steerd load the same files.
"""

import argparse
import ipaddress
import os
import random
import sys

SOA_SERIAL = 2024010101


def header(origin, lines):
    lines.append("$ORIGIN %s." % origin)
    lines.append("$TTL 3600")
    lines.append("@\tSOA\tns1 hostmaster %d 7200 3600 1209600 300" % SOA_SERIAL)
    lines.append("@\tNS\tns1")
    lines.append("@\tNS\tns2")
    lines.append("ns1\tA\t192.0.2.53")
    lines.append("ns1\tAAAA\t2001:db8::53")
    lines.append("ns2\tA\t198.51.100.53")
    lines.append("ns2\tAAAA\t2001:db8:1::53")


def host_v4(i):
    return str(ipaddress.IPv4Address(0x0A000000 + i))  # 10.0.0.0/8


def host_v6(i):
    return str(ipaddress.IPv6Address((0x20010DB8 << 96) + (0xAB << 64) + i))


def small_zone(hosts, cnames, txts):
    """Returns (zone text, dict of query pools)."""
    z = []
    header("example.test", z)
    z += [
        "@\tA\t192.0.2.1",
        "@\tAAAA\t2001:db8::1",
        "@\tMX\t10 mail1",
        "@\tMX\t20 mail2",
        '@\tTXT\t"v=spf1 mx -all"',
        "mail1\tA\t192.0.2.25",
        "mail1\tAAAA\t2001:db8::25",
        "mail2\tA\t198.51.100.25",
        "www\tA\t192.0.2.80",
        "www\tAAAA\t2001:db8::80",
        "ftp\tCNAME\twww",
        "_sip._udp\tSRV\t10 5 5060 www",
        "*.wild\tA\t192.0.2.200",
        "*.wild\tAAAA\t2001:db8::200",
        "*.users\tTXT\t\"user page\"",
        "sub\tNS\tns.sub",
        "ns.sub\tA\t192.0.2.99",
    ]
    host_names = ["host%d" % i for i in range(hosts)]
    for i, h in enumerate(host_names):
        z.append("%s\tA\t%s" % (h, host_v4(i)))
        z.append("%s\tAAAA\t%s" % (h, host_v6(i)))
    alias_names = ["alias%d" % i for i in range(cnames)]
    for i, a in enumerate(alias_names):
        z.append("%s\tCNAME\t%s" % (a, host_names[(i * 7) % hosts]))
    txt_names = ["txt%d" % i for i in range(txts)]
    for i, t in enumerate(txt_names):
        z.append('%s\tTXT\t"record %d of the benchmark zone" "second string"' % (t, i))
    pools = {
        "a": ["", "www", "mail1", "ns1"] + host_names,
        "aaaa": ["", "www", "mail1", "ns1"] + host_names,
        "alias": alias_names,
        "txt": txt_names,
    }
    return "\n".join(z) + "\n", pools


def fqdn(label, origin="example.test"):
    return "%s.%s" % (label, origin) if label else origin


def query_mix(pools, count, rng):
    """The mix, in percent: A 45, AAAA 25, NXDOMAIN 10, MX 5, CNAME 5, wildcard 5, TXT 5."""
    out = []
    for _ in range(count):
        r = rng.random() * 100
        if r < 45:
            out.append((fqdn(rng.choice(pools["a"])), "A"))
        elif r < 70:
            out.append((fqdn(rng.choice(pools["aaaa"])), "AAAA"))
        elif r < 80:
            out.append((fqdn("nx%d" % rng.randrange(1 << 30)), rng.choice(["A", "AAAA"])))
        elif r < 85:
            out.append((fqdn(""), "MX"))
        elif r < 90:
            out.append((fqdn(rng.choice(pools["alias"])), "A"))
        elif r < 95:
            out.append((fqdn("u%d.wild" % rng.randrange(1 << 20)), rng.choice(["A", "AAAA"])))
        else:
            out.append((fqdn(rng.choice(pools["txt"])), "TXT"))
    return "".join("%s %s\n" % q for q in out)


def big_zone(path, records):
    """Writes exactly RECORDS records; every name has A, even ones AAAA, every tenth TXT.

    Returns the last owner name written."""
    last = None
    with open(path, "w") as f:
        z = []
        header("big.test", z)
        f.write("\n".join(z) + "\n")
        n = len(z) - 2  # every line after $ORIGIN and $TTL is one record
        i = 0
        while n < records:
            name = "h%d" % i
            rows = ["%s\tA\t%s" % (name, host_v4(i))]
            if i % 2 == 0:
                rows.append("%s\tAAAA\t%s" % (name, host_v6(i)))
            if i % 10 == 0:
                rows.append('%s\tTXT\t"big zone record %d"' % (name, i))
            rows = rows[: records - n]
            f.write("\n".join(rows) + "\n")
            n += len(rows)
            last = name
            i += 1
    return fqdn(last, "big.test") if last else "big.test"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    ap.add_argument("--hosts", type=int, default=1000, help="host names with A+AAAA (default 1000)")
    ap.add_argument("--cnames", type=int, default=200, help="CNAME names (default 200)")
    ap.add_argument("--txts", type=int, default=100, help="TXT names (default 100)")
    ap.add_argument("--queries", type=int, default=100000, help="query lines (default 100000)")
    ap.add_argument("--big-records", type=int, default=1000000,
                    help="records in big.test.zone (default 1000000, 0 = skip)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    for opt in ("hosts", "cnames", "txts", "queries"):
        if getattr(args, opt) < 1:
            ap.error("--%s must be at least 1" % opt)
    if args.big_records != 0 and args.big_records < 8:
        ap.error("--big-records must be 0 or at least 8")
    if args.hosts >= 1 << 24:
        ap.error("--hosts must be below 2^24 (addresses come from 10.0.0.0/8)")
    if args.big_records >= 1 << 24:
        ap.error("--big-records must be below 2^24")

    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    text, pools = small_zone(args.hosts, args.cnames, args.txts)
    with open(os.path.join(args.out, "example.test.zone"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "queries.txt"), "w") as f:
        f.write(query_mix(pools, args.queries, rng))
    if args.big_records:
        last = big_zone(os.path.join(args.out, "big.test.zone"), args.big_records)
        with open(os.path.join(args.out, "big.last"), "w") as f:
            f.write(last + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
