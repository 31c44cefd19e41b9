#!/usr/bin/python3
"""GSLB benchmark: steerd's geo answers with ECS against its static answers and gdnsd's geoip.

Setup (bench/gen_nets.py writes the data, deterministic): a zone bench.test with a static A
name and a geo service over 10 datacenters whose map is a 60,000-CIDR nets list (ISP-list
shapes, 10% IPv6); queries are `geo.bench.test A` with EDNS and an ECS option from 100,000
subnets (90% inside a map prefix, 10% public /24s no map prefix covers). steerd serves the map as
`maps.isp.nets` (one file per first-choice datacenter); gdnsd 3 serves the same map through its
geoip plugin (`nets` file, `datacenters`, a DYNA record). Before measuring, a sample of the ECS
subnets is asked of both servers: each must answer the datacenter a longest-prefix match of the
map gives, with an ECS option carrying a non-zero scope where the map decided.

Rows (interleaved rounds, median q/s; server on CPU 0, loadgen on CPU 1, one worker thread):
  steerd-static   static.bench.test A, no EDNS, no ECS       (the static baseline)
  steerd-edns     static.bench.test A with EDNS (OPT, no ECS)
  steerd-stat-ecs static.bench.test A with the same EDNS and ECS (parsing ECS, no GSLB)
  steerd-geo      geo.bench.test A with ECS
  gdnsd-geo       the same queries to gdnsd's geoip plugin
  gdnsd-static    static.bench.test A on gdnsd, for context
Then the map-load test: each server is started fresh on a 500,000-CIDR map and timed until
the geo name answers; RSS is read 0.2 s later, then 50 ECS subnets are checked against the
map (so the map was really loaded, not just the zone).

Usage: bench/gslb.py [--rounds 5 --duration 5] [--no-load] [--load-only]
"""

import argparse
import ipaddress
import json
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time

import dns.edns
import dns.message
import dns.query
import dns.rcode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_nets  # noqa: E402
import run  # noqa: E402  (bench/run.py: Server, loadgen runner, table printing)

ZONE = "bench.test"
NDC = 10
STATIC_ADDR = "192.0.2.80"


def dc_addr(k):
    return "198.18.0.%d" % (10 + k)


def dc_list(k):
    return ["dc%d" % ((k + i) % NDC) for i in range(3)]


def write_zone(path, gdnsd):
    text = ("$ORIGIN %s.\n$TTL 3600\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n"
            "@ NS ns1\nns1 A 192.0.2.53\nstatic A %s\n" % (ZONE, STATIC_ADDR))
    if gdnsd:
        text += "geo 30 DYNA geoip!geo\n"
    run.write(path, text)


def steerd_argv(binary, data):
    def argv(d, port, zone, zone_file):
        shutil.copytree(os.path.join(data, "nets"), os.path.join(d, "nets"))
        write_zone(os.path.join(d, "bench.zone"), False)
        conf = ["server:", "  listen: [127.0.0.1:%d]" % port, "  workers: 1",
                "  tcp-workers: 1", "  control-socket: %s" % os.path.join(d, "ctl.sock"),
                "zones:", "  - domain: %s" % ZONE, "    file: bench.zone",
                "datacenters:"]
        conf += ["  - { name: dc%d }" % k for k in range(NDC)]
        conf += ["maps:", "  isp:", "    nets:"]
        conf += ["      - { file: nets/dc%d.txt, datacenters: [%s] }" % (k, ", ".join(dc_list(k)))
                 for k in range(NDC)]
        conf += ["    default: [%s]" % ", ".join(dc_list(0)), "services:",
                 "  - name: geo.%s" % ZONE, "    policy: geo", "    map: isp", "    ttl: 30",
                 "    datacenters:"]
        conf += ["      dc%d: { addresses: [%s] }" % (k, dc_addr(k)) for k in range(NDC)]
        run.write(os.path.join(d, "steer.yaml"), "\n".join(conf) + "\n")
        return [binary, "-c", os.path.join(d, "steer.yaml")]
    return argv


def gdnsd_argv(data):
    def argv(d, port, zone, zone_file):
        os.makedirs(os.path.join(d, "zones"))
        os.makedirs(os.path.join(d, "geoip"))
        shutil.copy(os.path.join(data, "gdnsd-nets"), os.path.join(d, "geoip", "nets"))
        write_zone(os.path.join(d, "zones", ZONE), True)
        dcs = ", ".join("dc%d" % k for k in range(NDC))
        dcmap = "\n".join("          dc%d => %s" % (k, dc_addr(k)) for k in range(NDC))
        run.write(os.path.join(d, "config"), f"""options => {{
    listen => [ 127.0.0.1:{port} ]
    udp_threads => 1
    tcp_threads => 1
    run_dir => "{d}/run"
    state_dir => "{d}/state"
}}
plugins => {{
  geoip => {{
    maps => {{
      isp => {{
        datacenters => [ {dcs} ]
        nets => nets
      }}
    }}
    resources => {{
      geo => {{
        map => isp
        dcmap => {{
{dcmap}
        }}
      }}
    }}
  }}
}}
""")
        return ["/usr/sbin/gdnsd", "-c", d, "start"]
    return argv


# ---- correctness sample -------------------------------------------------------------------------


def expected_dc(index, subnet):
    """Longest-prefix match of SUBNET in the map; the default (dc0) when nothing covers it."""
    net = ipaddress.ip_network(subnet)
    for plen in range(net.prefixlen, -1, -1):
        dc = index.get(net.supernet(new_prefix=plen) if plen < net.prefixlen else net)
        if dc is not None:
            return dc, True
    return 0, False


def ask(port, subnet):
    net = ipaddress.ip_network(subnet)
    opt = dns.edns.ECSOption(str(net.network_address), net.prefixlen)
    q = dns.message.make_query("geo." + ZONE, "A", use_edns=0, options=[opt])
    r = dns.query.udp(q, "127.0.0.1", port=port, timeout=2)
    addrs = [rd.address for rrs in r.answer for rd in rrs]
    scopes = [o.scopelen for o in r.options if isinstance(o, dns.edns.ECSOption)]
    return r.rcode(), addrs, scopes


def verify(servers, prefixes, ecs, sample):
    """Both servers answer the datacenter the map gives, with an ECS scope; returns counts."""
    index = {net: dc for net, dc in prefixes}
    rng = random.Random(7)
    stats = {s.name: {"match": 0, "scope": 0, "nonzero": 0} for s in servers}
    in_map = 0
    for subnet in rng.sample(ecs, sample):
        dc, covered = expected_dc(index, subnet)
        in_map += covered
        for s in servers:
            rcode, addrs, scopes = ask(s.port, subnet)
            if rcode != dns.rcode.NOERROR or addrs != [dc_addr(dc)]:
                raise RuntimeError("%s answered %s %s for ECS %s; the map says dc%d (%s)"
                                   % (s.name, dns.rcode.to_text(rcode), addrs, subnet, dc,
                                      dc_addr(dc)))
            st = stats[s.name]
            st["match"] += 1
            st["scope"] += len(scopes) == 1
            st["nonzero"] += bool(scopes and scopes[0] > 0)
    for name, st in stats.items():
        run.log("  %s: %d/%d answers = the map's datacenter, %d with an ECS option (%d with a "
                "non-zero scope); %d of the sample are covered by a map prefix"
                % (name, st["match"], sample, st["scope"], st["nonzero"], in_map))
        if st["scope"] != sample:
            raise RuntimeError("%s left the ECS option out of %d answers"
                               % (name, sample - st["scope"]))
    return stats, in_map


# ---- throughput ---------------------------------------------------------------------------------


class Row:
    """A measured row: one server process asked one query set."""

    def __init__(self, name, srv, queries, ecs_file, edns):
        self.name, self.srv = name, srv
        self.queries, self.ecs_file, self.edns = queries, ecs_file, edns
        self.port = srv.port

    def alive(self):
        return self.srv.alive()

    def cpu_seconds(self):
        return self.srv.cpu_seconds()

    def log_tail(self):
        return self.srv.log_tail()


def measure(args, row):
    a = argparse.Namespace(**vars(args))
    a.queries_file = row.queries
    a.edns = row.edns
    a.loadgen_args = args.loadgen_args + (" --ecs-file " + row.ecs_file if row.ecs_file else "")
    return run.measure_one(a, row, False)


def throughput(args, data, prefixes, ecs):
    wd = args.workdir
    qgeo = os.path.join(wd, "geo.txt")
    qstatic = os.path.join(wd, "static.txt")
    run.write(qgeo, "geo.%s A\n" % ZONE)
    run.write(qstatic, "static.%s A\n" % ZONE)
    ecs_file = os.path.join(data, "ecs.txt")
    steerd = run.make_server("steerd", steerd_argv(args.steerd, data), wd, ZONE, None,
                             args.server_cpu)
    gdnsd = run.make_server("gdnsd", gdnsd_argv(data), wd, ZONE, None, args.server_cpu)
    for s in (steerd, gdnsd):
        run.RUNNING.append(s)
        s.start()
        secs = run.wait_answering(s, "geo." + ZONE, "A", 60)
        run.log("%s answers after %.2f s" % (s.name, secs))
    verify([steerd, gdnsd], prefixes, ecs, args.sample)
    rows = [Row("steerd-static", steerd, qstatic, None, 0),
            Row("steerd-edns", steerd, qstatic, None, args.edns),
            Row("steerd-stat-ecs", steerd, qstatic, ecs_file, args.edns),
            Row("steerd-geo", steerd, qgeo, ecs_file, args.edns),
            Row("gdnsd-geo", gdnsd, qgeo, ecs_file, args.edns),
            Row("gdnsd-static", gdnsd, qstatic, None, 0)]
    results = {r.name: [] for r in rows}
    for rnd in range(args.rounds):
        for row in rows:
            if not row.alive():
                raise RuntimeError("%s died:\n%s" % (row.name, row.log_tail()))
            res = measure(args, row)
            results[row.name].append(res)
            run.log("  round %d/%d %-13s %9.0f q/s  server cpu %3.0f%%  other cpu %3.0f%%  "
                    "lost %d  bad %d" % (rnd + 1, args.rounds, row.name, res["qps"],
                                         res["server_cpu"] * 100, res["other_cpu"] * 100,
                                         res["lost"], res["bad"]))
    for s in (steerd, gdnsd):
        s.stop()
        run.RUNNING.remove(s)
    table = run.summarize(results)
    run.print_rows("GSLB q/s: %s CIDRs, %s ECS subnets, %d round(s) x %g s"
                % (format(len(prefixes), ","), format(len(ecs), ","), args.rounds,
                   args.duration), [r.name for r in rows], table)

    def ratio(a, b):
        med = table[a]["median"] / table[b]["median"]
        paired = statistics.median(x / y for x, y in zip(table[a]["runs"], table[b]["runs"]))
        return med, paired

    out = {}
    for a, b, goal in (("steerd-geo", "steerd-static", 0.9), ("steerd-geo", "gdnsd-geo", 1.1),
                       ("steerd-geo", "steerd-stat-ecs", None),
                       ("steerd-stat-ecs", "steerd-edns", None),
                       ("steerd-edns", "steerd-static", None),
                       ("gdnsd-geo", "gdnsd-static", None)):
        med, paired = ratio(a, b)
        out["%s/%s" % (a, b)] = (med, paired)
        print("%s / %s: %.2fx (ratio of medians), %.2fx (median of per-round ratios)%s"
              % (a, b, med, paired, "" if goal is None else
                 "  goal >= %.1fx: %s" % (goal, "met" if med >= goal else "MISSED")))
    return table, out


# ---- map load -----------------------------------------------------------------------------------


def map_load(args):
    data = os.path.join(args.workdir, "data-load")
    t0 = time.monotonic()
    prefixes = gen_nets.write_all(data, args.load_count, NDC, 0, args.seed + 1)
    sample = gen_nets.ecs_subnets(random.Random(3), prefixes, 50)
    run.log("wrote the %s-CIDR map in %.1f s" % (format(args.load_count, ","),
                                                time.monotonic() - t0))
    fns = [("steerd", steerd_argv(args.steerd, data)), ("gdnsd", gdnsd_argv(data))]
    res = {}
    for rnd in range(args.load_rounds):
        for name, fn in fns:
            srv = run.make_server(name, fn, args.workdir, ZONE, None, args.server_cpu)
            run.RUNNING.append(srv)
            srv.start()
            try:
                secs = run.wait_answering(srv, "geo." + ZONE, "A", 120)
                time.sleep(0.2)
                rss = run.group_rss_kib(srv.proc.pid)
                hwm = run.group_rss_kib(srv.proc.pid, "VmHWM")
                verify([srv], prefixes, sample, len(sample))  # the whole map was loaded
            finally:
                srv.stop()
                run.RUNNING.remove(srv)
            res.setdefault(name, []).append((secs, rss, hwm))
            run.log("  load round %d/%d %-7s %.2f s  RSS %.1f MiB  peak %.1f MiB"
                    % (rnd + 1, args.load_rounds, name, secs, rss / 1024, hwm / 1024))
    print("\nmap load: %s CIDRs, median of %d fresh start(s)"
          % (format(args.load_count, ","), args.load_rounds))
    print("%-8s %12s %10s %14s" % ("server", "answers in s", "RSS MiB", "peak RSS MiB"))
    rows = {}
    for name, runs in res.items():
        r = tuple(statistics.median(x[i] for x in runs) for i in range(3))
        rows[name] = r
        print("%-8s %12.2f %10.1f %14.1f" % (name, r[0], r[1] / 1024, r[2] / 1024))
    s = rows["steerd"]
    print("steerd goals: load < 1 s: %s (%.2f s); RSS < 64 MiB: %s (%.1f MiB)"
          % ("met" if s[0] < 1 else "MISSED", s[0], "met" if s[1] < 64 * 1024 else "MISSED",
             s[1] / 1024))
    return rows


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steerd", default=os.path.join(run.REPO, "build-bench/src/daemon/steerd"))
    ap.add_argument("--loadgen", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--count", type=int, default=60000, help="CIDRs of the q/s map")
    ap.add_argument("--load-count", type=int, default=500000, help="CIDRs of the load map")
    ap.add_argument("--load-rounds", type=int, default=3)
    ap.add_argument("--sample", type=int, default=300, help="ECS subnets verified on both")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--edns", type=int, default=1232)
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--sockets", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=1000)
    ap.add_argument("--loadgen-args", default="")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--loadgen-cpu", type=int, default=1)
    ap.add_argument("--quiet-wait", type=float, default=0,
                    help="wait up to this many s before each run for CPUs 0 and 1 to be idle")
    ap.add_argument("--retries", type=int, default=0,
                    help="repeat a run during which others used > 10%% of a CPU")
    ap.add_argument("--json", help="write every run's numbers here")
    ap.add_argument("--no-load", action="store_true")
    ap.add_argument("--load-only", action="store_true")
    ap.add_argument("--workdir", help="keep configs, data and logs here")
    a = ap.parse_args()
    if a.loadgen is None:
        a.loadgen = os.path.join(os.path.dirname(a.steerd), "../../bench/loadgen")
    return a


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, run.on_term)  # stop the servers on kill as on Ctrl-C
    keep = args.workdir is not None
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="gslb-bench-")
    os.makedirs(args.workdir, exist_ok=True)
    record = {"args": {k: v for k, v in vars(args).items()}}
    try:
        if not args.load_only:
            data = os.path.join(args.workdir, "data")
            prefixes = gen_nets.write_all(data, args.count, NDC, 100000, args.seed)
            with open(os.path.join(data, "ecs.txt")) as f:
                ecs = f.read().split()
            record["qps"], record["ratios"] = throughput(args, data, prefixes, ecs)
        if not args.no_load:
            record["load"] = map_load(args)
        if args.json:
            record["machine"] = run.machine_info()
            with open(args.json, "w") as f:
                json.dump(record, f, indent=1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        run.stop_all()
        if not keep:
            shutil.rmtree(args.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
