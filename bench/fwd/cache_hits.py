#!/usr/bin/python3
"""Forwarder cache-hit benchmark: steerd answering from its forwarder cache against Unbound
1.17 as a forwarder and dnsdist 1.7 with its packet cache, all cache hits, and against
steerd's own static authoritative answer for names of the same shape; then the cache-miss
overhead of each forwarder over its upstream's own latency.

Setup (all on 127.0.0.1, random ports): a knotd upstream serves hit.test (h0..h999 A, TTL
1 day, and a wildcard *.miss.hit.test for unique names); one steerd serves own.test (the same
h0..h999 names, its own zone) and forwards everything else to the knotd (config file:
forward: groups: [{domain: ., upstreams: [knotd]}], allow-recursion 127.0.0.0/8); Unbound
forwards "." to the knotd (one thread, its cache); dnsdist has the knotd as its only backend
and a 100,000-entry packet cache.

Rows (bench/loadgen with --rd on CPU 1; each server, with every thread it has, on CPU 0;
one worker / thread each; interleaved rounds; median q/s):
  steerd-hit    h<i>.hit.test A through steerd: forwarder cache hits
  steerd-auth   h<i>.own.test A from steerd's zone: the authoritative baseline
  unbound-hit   h<i>.hit.test A through Unbound: its cache
  dnsdist-hit   h<i>.hit.test A through dnsdist: its packet cache
Every forwarder is warmed first (each name asked until it is answered from the cache), and
the knotd upstream is stopped before the q/s rounds: an answer can only come from a cache, a
miss would show as a lost query or a SERVFAIL in the table.

Goals (docs/performance.md): steerd-hit >= 3x the faster of unbound-hit and dnsdist-hit,
and >= 0.8x steerd-auth.

Cache-miss overhead (before the upstream is stopped): unique names under *.miss.hit.test
asked one at a time from this script, in turn directly of the knotd and through each
forwarder, --miss-queries each; the median latency through a forwarder minus the median
direct latency is what the forwarder adds to a miss (goal for steerd: < 100 us).

Usage: bench/fwd/cache_hits.py [--steerd PATH] [--rows ...] [--rounds 5 --duration 5]
       [--miss-queries 2000] [--json FILE]       (see bench/README.md)
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import struct
import sys
import tempfile
import time

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import run  # noqa: E402  (bench/run.py: Server, loadgen runner, CPU accounting)

HIT_ZONE = "hit.test"  # forwarded: served by the knotd upstream
OWN_ZONE = "own.test"  # steerd's own zone, same name shapes
HOSTS = 1000
ROWS = ("steerd-hit", "steerd-auth", "unbound-hit", "dnsdist-hit")
FORWARDERS = ("steerd", "unbound", "dnsdist")


def host_addr(i):
    return "192.0.2.%d" % (i % 250 + 1)


def write_zone(path, origin, wildcard):
    lines = ["$ORIGIN %s." % origin, "$TTL 86400",
             "@ SOA ns hostmaster 1 3600 600 86400 300", "@ NS ns", "ns A 127.0.0.1"]
    lines += ["h%d A %s" % (i, host_addr(i)) for i in range(HOSTS)]
    if wildcard:
        lines.append("*.miss A 203.0.113.7")
    run.write(path, "\n".join(lines) + "\n")


def steerd_argv(binary, upstream_port):
    def argv(d, port):
        zone = os.path.join(d, "own.zone")
        write_zone(zone, OWN_ZONE, False)
        conf = os.path.join(d, "steer.yaml")
        run.write(conf, f"""server:
  listen: ["127.0.0.1:{port}"]
  workers: 1
  tcp-workers: 1
  control-socket: {d}/ctl.sock
zones:
  - domain: {OWN_ZONE}
    file: {zone}
forward:
  allow-recursion: [127.0.0.0/8]
  groups:
    - domain: .
      policy: ordered
      upstreams:
        - {{ name: knotd, address: "127.0.0.1:{upstream_port}" }}
""")
        return [binary, "-c", conf]
    return argv


def unbound_argv(upstream_port):
    def argv(d, port):
        conf = os.path.join(d, "unbound.conf")
        run.write(conf, f"""server:
  interface: 127.0.0.1
  port: {port}
  access-control: 127.0.0.0/8 allow
  do-daemonize: no
  chroot: ""
  username: ""
  directory: "{d}"
  pidfile: "{d}/unbound.pid"
  use-syslog: no
  logfile: ""
  verbosity: 0
  num-threads: 1
  do-ip6: no
  so-reuseport: no
  module-config: "iterator"
  do-not-query-localhost: no
  local-zone: "test." nodefault
remote-control:
  control-enable: no
forward-zone:
  name: "."
  forward-addr: 127.0.0.1@{upstream_port}
""")
        return ["/usr/sbin/unbound", "-d", "-c", conf]
    return argv


def dnsdist_argv(upstream_port):
    def argv(d, port):
        conf = os.path.join(d, "dnsdist.conf")
        run.write(conf, f"""setLocal("127.0.0.1:{port}")
setACL({{"127.0.0.0/8"}})
setSecurityPollSuffix("")
newServer({{address="127.0.0.1:{upstream_port}", name="knotd"}})
pc = newPacketCache(100000, {{maxTTL=86400}})
getPool(""):setCache(pc)
""")
        return ["/usr/bin/dnsdist", "--supervised", "--disable-syslog", "-C", conf]
    return argv


def make(name, argv_fn, workdir, pin_cpu):
    d = tempfile.mkdtemp(prefix=name + "-", dir=workdir)
    port = run.free_port()
    return run.Server(name, argv_fn(d, port), d, port, pin_cpu)


def ask(port, name, rdtype="A", timeout=1.0):
    q = dns.message.make_query(name, rdtype)  # RD set, as a stub resolver sends
    return dns.query.udp(q, "127.0.0.1", port=port, timeout=timeout)


def wait_answering(srv, name, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not srv.alive():
            raise RuntimeError("%s exited (status %s):\n%s" % (srv.name, srv.proc.returncode,
                                                               srv.log_tail()))
        try:
            r = ask(srv.port, name, timeout=0.3)
            if r.rcode() == dns.rcode.NOERROR and r.answer:
                return
        except Exception:
            pass
        time.sleep(0.05)
    raise RuntimeError("%s did not answer %s within %d s:\n%s" % (srv.name, name, timeout,
                                                                 srv.log_tail()))


def check_and_warm(srv, zone, forwarded):
    """Every h<i> name answered with its address (twice for a forwarder: the second from its
    cache); returns the rcode counts of the check."""
    for i in range(HOSTS):
        for _ in range(2 if forwarded else 1):
            r = ask(srv.port, "h%d.%s" % (i, zone), timeout=2)
        got = [rd.address for rrs in r.answer if rrs.rdtype == dns.rdatatype.A for rd in rrs]
        if r.rcode() != dns.rcode.NOERROR or got != [host_addr(i)]:
            raise RuntimeError("%s answered h%d.%s wrongly:\n%s" % (srv.name, i, zone, r))
        # dnsdist passes the upstream's flags through (AA from the knotd, no RA).
        if forwarded and srv.name != "dnsdist" and not r.flags & dns.flags.RA:
            raise RuntimeError("%s: no RA in a forwarded answer:\n%s" % (srv.name, r))
        if not forwarded and not r.flags & dns.flags.AA:
            raise RuntimeError("%s: no AA in its own zone's answer:\n%s" % (srv.name, r))


# ---- cache-miss latency -------------------------------------------------------------------------


def qwire(qid, name):
    q = b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + struct.pack("!HH", 1, 1)


def one_latency(sock, qid, name):
    """Seconds from send to the matching answer on connected @sock (None: none in 1 s)."""
    wire = qwire(qid, name)
    t0 = time.perf_counter()
    sock.send(wire)
    while True:
        try:
            reply = sock.recv(4096)
        except socket.timeout:
            return None
        t1 = time.perf_counter()
        if reply[:2] == wire[:2] and reply[12:len(wire)] == wire[12:] and reply[3] & 0xF == 0:
            return t1 - t0


def miss_latency(targets, n, tag):
    """{target: [seconds]}: unique names asked in turn of every target (name, port), n each."""
    socks = {}
    for name, port in targets:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(1.0)
        s.connect(("127.0.0.1", port))
        socks[name] = s
    lat = {name: [] for name, _ in targets}
    lost = {name: 0 for name, _ in targets}
    rng = random.Random(5)
    try:
        for i in range(n):
            order = list(targets)
            rng.shuffle(order)  # no target always first after the idle gap
            for name, _ in order:
                t = one_latency(socks[name], (i * 8 + len(lat[name])) & 0xFFFF,
                                "%s%s%d.miss.%s" % (tag, name[:2], i, HIT_ZONE))
                if t is None:
                    lost[name] += 1
                else:
                    lat[name].append(t)
    finally:
        for s in socks.values():
            s.close()
    return lat, lost


# ---- main ---------------------------------------------------------------------------------------


class Row:
    """One measured row: a server asked one query file (what run.measure_one needs)."""

    def __init__(self, name, srv, queries):
        self.name, self.srv, self.queries = name, srv, queries
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
    a.edns = 0
    a.loadgen_args = (args.loadgen_args + " --rd").strip()
    return run.measure_one(a, row, False)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steerd", default=os.path.join(run.REPO, "build-bench/src/daemon/steerd"))
    ap.add_argument("--loadgen", default=None, help="default: the steerd build's bench/loadgen")
    ap.add_argument("--rows", default=",".join(ROWS),
                    help="rows in round order (%s); without steerd rows, the peers alone"
                    % ",".join(ROWS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--miss-queries", type=int, default=2000,
                    help="unique names per target for the miss latency (0: skip)")
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
    ap.add_argument("--workdir", help="keep configs and logs here")
    a = ap.parse_args()
    a.rows = a.rows.split(",")
    for r in a.rows:
        if r not in ROWS:
            ap.error("unknown row %s" % r)
    if a.loadgen is None:
        for cand in (os.path.join(os.path.dirname(a.steerd), "../../bench/loadgen"),
                     os.path.join(run.REPO, "build/bench/loadgen")):
            if os.path.exists(cand):
                a.loadgen = os.path.abspath(cand)
                break
    if not a.loadgen or not os.path.exists(a.loadgen):
        ap.error("no bench/loadgen: build it (ninja -C build bench/loadgen) or pass --loadgen")
    return a


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, run.on_term)
    keep = args.workdir is not None
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="fwd-hits-")
    os.makedirs(args.workdir, exist_ok=True)
    record = {"args": {k: v for k, v in vars(args).items()}, "machine": run.machine_info()}
    kinds = {r.split("-")[0] for r in args.rows}
    try:
        zone = os.path.join(args.workdir, "hit.zone")
        write_zone(zone, HIT_ZONE, True)
        ud = tempfile.mkdtemp(prefix="knotd-", dir=args.workdir)
        uport = run.free_port()
        upstream = run.Server("knotd", run.knotd_argv(ud, uport, HIT_ZONE, zone), ud, uport, args.loadgen_cpu)
        run.RUNNING.append(upstream)
        upstream.start()
        wait_answering(upstream, "h1." + HIT_ZONE)
        fns = {"steerd": steerd_argv(args.steerd, uport), "unbound": unbound_argv(uport),
               "dnsdist": dnsdist_argv(uport)}
        servers = {}
        for kind in FORWARDERS:
            if kind not in kinds:
                continue
            srv = make(kind, fns[kind], args.workdir, args.server_cpu)
            run.RUNNING.append(srv)
            srv.start()
            wait_answering(srv, "h0." + HIT_ZONE)
            check_and_warm(srv, HIT_ZONE, True)
            if kind == "steerd":
                check_and_warm(srv, OWN_ZONE, False)
            servers[kind] = srv
            run.log("%s answers and is warm" % kind)
        if args.miss_queries:
            targets = [("direct", uport)] + [(k, s.port) for k, s in servers.items()]
            lat, lost = miss_latency(targets, args.miss_queries, os.urandom(3).hex())
            med = {k: statistics.median(v) for k, v in lat.items() if v}
            print("\ncache-miss latency: %d unique names per target, asked in turn (median, "
                  "p90, lost; overhead = median - direct median)" % args.miss_queries)
            for k, v in lat.items():
                if not v:
                    print("%-8s no answers (lost %d)" % (k, lost[k]))
                    continue
                p90 = sorted(v)[int(len(v) * 0.9)]
                over = "" if k == "direct" else "  overhead %+.0f us" % (
                    (med[k] - med["direct"]) * 1e6)
                print("%-8s median %6.0f us  p90 %6.0f us  lost %d%s"
                      % (k, med[k] * 1e6, p90 * 1e6, lost[k], over))
            if "steerd" in med and "direct" in med:
                over = (med["steerd"] - med["direct"]) * 1e6
                print("steerd miss overhead goal < 100 us: %s (%.0f us)"
                      % ("met" if over < 100 else "MISSED", over))
            record["miss"] = {"median_us": {k: v * 1e6 for k, v in med.items()}, "lost": lost}
        # From here on only a cache can answer.
        upstream.stop()
        run.RUNNING.remove(upstream)
        qfiles = {}
        for zname in (HIT_ZONE, OWN_ZONE):
            names = ["h%d.%s A" % (i, zname) for i in range(HOSTS)]
            random.Random(3).shuffle(names)
            qfiles[zname] = os.path.join(args.workdir, "queries-%s.txt" % zname)
            run.write(qfiles[zname], "\n".join(names) + "\n")
        rows = [Row(r, servers[r.split("-")[0]], qfiles[OWN_ZONE if r == "steerd-auth"
                                                        else HIT_ZONE]) for r in args.rows]
        results = {r.name: [] for r in rows}
        for rnd in range(args.rounds):
            for row in rows:
                if not row.alive():
                    raise RuntimeError("%s died:\n%s" % (row.name, row.log_tail()))
                res = measure(args, row)
                results[row.name].append(res)
                run.log("  round %d/%d %-12s %9.0f q/s  server cpu %3.0f%%  other cpu %3.0f%%  "
                        "lost %d  bad %d" % (rnd + 1, args.rounds, row.name, res["qps"],
                                             res["server_cpu"] * 100, res["other_cpu"] * 100,
                                             res["lost"], res["bad"]))
        table = run.summarize(results)
        run.print_rows("cache hits, one worker: %d round(s) x %g s, %d names, RD=1, no EDNS"
                    % (args.rounds, args.duration, HOSTS), [r.name for r in rows], table,
                       expect_rcodes={"NOERROR"})
        record["qps"] = table

        def ratio(a, b):
            med = table[a]["median"] / table[b]["median"]
            paired = statistics.median(x / y for x, y in zip(table[a]["runs"], table[b]["runs"]))
            return med, paired
        peers = [r for r in ("unbound-hit", "dnsdist-hit") if r in table]
        pairs = []
        if "steerd-hit" in table and peers:
            best = max(peers, key=lambda r: table[r]["median"])
            pairs.append(("steerd-hit", best, 3.0))
        if "steerd-hit" in table and "steerd-auth" in table:
            pairs.append(("steerd-hit", "steerd-auth", 0.8))
        if len(peers) == 2:
            pairs.append(("dnsdist-hit", "unbound-hit", None))
        record["ratios"] = {}
        for a, b, goal in pairs:
            med, paired = ratio(a, b)
            record["ratios"]["%s/%s" % (a, b)] = (med, paired)
            print("%s / %s: %.2fx (ratio of medians), %.2fx (median of per-round ratios)%s"
                  % (a, b, med, paired, "" if goal is None else
                     "  goal >= %.1fx: %s" % (goal, "met" if med >= goal else "MISSED")))
        if args.json:
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
