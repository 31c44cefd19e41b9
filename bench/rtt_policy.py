#!/usr/bin/python3
"""Measured-steering benchmark: steerd's `policy: rtt` against `policy: geo` on the same map,
and the swap of a 1,000,000-prefix x 8-site path table under load.

Setup (deterministic, --seed): a zone bench.test, 8 datacenters, a 60,000-CIDR nets map
(bench/gen_nets.py) and 100,000 ECS subnets (90 % inside a map prefix). Eight made-up agents,
one per datacenter, are served by a python http.server in this process (GET
/dcK/paths/table, the binary table of src/gslb/pathfmt.h, ETag and If-None-Match like a real
steer-probe); each measured the same 1,000,000 prefixes (90 % IPv4 /24, 10 % IPv6 /48), among
them the /24 (/48) of every ECS subnet, so rtt decisions come from the table, spread over a
million rows like reality, not from a few cached ones. Per row one datacenter is clearly best
(5 to 30 ms; the others 20 ms and more behind it); version B of the tables moves the best
of every row three datacenters on.

steerd serves two services over the same 8 datacenters: geo.bench.test (`policy: geo`, map
isp) and rtt.bench.test (`policy: rtt`, `fallback-policy: geo`, the same map). Before
measuring, a sample of ECS subnets is asked: rtt must answer each row's best datacenter with
the table's scope (/24, /48), geo the map's datacenter.

1. Load: steerd started fresh, timed until every sampled rtt answer is the table's (the 8
   tables fetched, decoded, merged and published); RSS then.
2. q/s (interleaved rounds, median; server on CPU 0, loadgen on CPU 1, one worker thread):
     steerd-static  static.bench.test A with EDNS and the ECS option (no GSLB)
     steerd-geo     geo.bench.test A with ECS
     steerd-rtt     rtt.bench.test A with ECS
   goal: rtt >= 0.9 x geo.
3. Swap under load: loadgen runs on rtt.bench.test for --swap-duration s while the agents'
   tables switch to version B and back (--swaps times); for each switch the time from the
   switch until every sampled row answers its new best (fetch interval included, and the time
   after the last agent's table was served: decode + merge + publish), the RSS peak, and the
   queries loadgen lost (goal 0) against those it sent. The node uses `hysteresis: rounds: 1`
   so one table change moves an answer (the default 2 would need two).

Usage: bench/rtt_policy.py [--rounds 5 --duration 5] [--rows 1000000] [--no-swap]
"""

import argparse
import array
import http.server
import ipaddress
import json
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time

import dns.edns
import dns.exception
import dns.message
import dns.query
import dns.rcode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))
import gen_nets  # noqa: E402
import run  # noqa: E402  (bench/run.py: Server, loadgen runner, table printing)
from lab_delay import TABLE_CT  # noqa: E402

ZONE = "bench.test"
NDC = 8
STATIC_ADDR = "192.0.2.80"


def dc_addr(k):
    return "198.51.100.%d" % (10 + k)


def dc_list(k):
    return ["dc%d" % ((k + i) % NDC) for i in range(3)]


# ---- the path tables ----------------------------------------------------------------------------


def row_keys(rng, ecs, total):
    """Sorted IPv4 /24 keys (32-bit ints) and IPv6 /48 keys (top 64 bits): the /24 (/48) of
    every ECS subnet, then random public ones up to @total rows, 90 % IPv4."""
    k4, k6 = set(), set()
    for sub in ecs:
        net = ipaddress.ip_network(sub)
        if net.version == 4:
            k4.add(int(net.network_address) & 0xFFFFFF00)
        else:
            k6.add((int(net.network_address) >> 64) & ~0xFFFF)
    reserved = [(int(n.network_address), int(n.broadcast_address)) for n in gen_nets.RESERVED_V4]
    want4 = max(len(k4), total * 9 // 10)
    while len(k4) < want4:
        key = (rng.randint(1, 223) << 24) | (rng.getrandbits(16) << 8)
        if not any(lo <= key <= hi for lo, hi in reserved):
            k4.add(key)
    while len(k4) + len(k6) < total:
        k6.add((0x2400 << 48 | rng.getrandbits(44) << 16) & ~0xFFFF)
    return sorted(k4), sorted(k6)


def best_of_row(key, version):
    """The datacenter a row's RTTs make best: a hash of its key, moved 3 on in version B."""
    h = (key * 0x9E3779B97F4A7C15 >> 32) & 0xFFFFFFFF
    return (h + (3 if version == "B" else 0)) % NDC


def row_rtts(keys, version):
    """Per datacenter, the RTT column (0.1 ms) of every row: the best 5..30 ms, each other
    datacenter 20 ms more per step away from the best."""
    cols = [array.array("H") for _ in range(NDC)]
    for key in keys:
        best = best_of_row(key, version)
        base = 50 + (key >> 8) % 250
        for k in range(NDC):
            cols[k].append(base + 200 * ((k - best) % NDC))
    return cols


def encode_column(keys, keylen, rtts, hops):
    """The rows of one site table (pathfmt.h) built column by column, at C speed."""
    n = len(keys)
    width = keylen + 8
    buf = bytearray(width * n)
    key_bytes = b"".join(k.to_bytes(keylen, "big") for k in keys)
    for j in range(keylen):
        buf[j::width] = key_bytes[j::keylen]
    buf[keylen::width] = bytes([24 if keylen == 4 else 48]) * n
    r = array.array("H", rtts)
    if sys.byteorder == "little":
        r.byteswap()
    rb = r.tobytes()
    buf[keylen + 2::width] = rb[0::2]
    buf[keylen + 3::width] = rb[1::2]
    buf[keylen + 4::width] = bytes([hops]) * n
    buf[keylen + 5::width] = b"\x03" * n  # answered: 3 samples
    return bytes(buf)  # loss 0, age 0


def site_tables(keys4, keys6, version, generated_ms):
    """The 8 encoded tables of one version."""
    import struct
    c4, c6 = row_rtts(keys4, version), row_rtts(keys6, version)
    out = []
    for k in range(NDC):
        name = b"dc%d" % k
        head = struct.pack("!4sBBHQIIB7x", b"STPT", 1, 0, 0, generated_ms, len(keys4),
                           len(keys6), len(name))
        out.append(head + name + encode_column(keys4, 4, c4[k], k + 2)
                   + encode_column(keys6, 8, c6[k], k + 2))
    return out


class Agents:
    """The made-up agents: GET /dcK/paths/table with ETag / If-None-Match, in a thread."""

    def __init__(self, tables):
        self.lock = threading.Lock()  # what the handler threads read
        self.publishing = threading.Lock()  # held while a new generation is made
        self.tables = tables  # version -> [body per datacenter]
        self.version = None
        self.bodies, self.etag = [], ""
        self.served = {}  # dc -> when a body of the current version was first sent
        self.requests = 0
        self.aborted = 0  # transfers the node gave up (its fetch-timeout)
        self.serving = False  # 503 until then: steerd's RSS without any table
        agents = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                agents.requests += 1
                parts = self.path.strip("/").split("/")
                if len(parts) != 3 or parts[1:] != ["paths", "table"] or \
                        not parts[0].startswith("dc"):
                    self.send_error(404)
                    return
                k = int(parts[0][2:])
                if not agents.serving:
                    self.send_error(503)
                    return
                with agents.lock:
                    body, etag, version = agents.bodies[k], agents.etag, agents.version
                if self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", TABLE_CT)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                with agents.lock:
                    if version == agents.version:
                        agents.served.setdefault(k, time.monotonic())

            def log_message(self, *a):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                agents.aborted += 1

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def set_version(self, version, generated_ms):
        """Serve @version from now on, as a new table generation (a new ETag)."""
        with self.publishing:  # one new generation at a time, with the version it was for
            self._publish(version, generated_ms)

    def _publish(self, version, generated_ms):
        # The generation is in the body: patch it in (header bytes 8..16).
        gen = generated_ms.to_bytes(8, "big")
        bodies = [b[:8] + gen + b[16:] for b in self.tables[version]]
        with self.lock:
            if version != self.version:
                self.served = {}
            self.version, self.bodies, self.etag = version, bodies, '"%d"' % generated_ms

    def republish(self, interval, stop):
        """Like a real agent, publish the current version as a new generation every
        @interval s until @stop is set (the node's hysteresis counts changed tables)."""
        while not stop.wait(interval):
            with self.publishing:
                self._publish(self.version, int(time.time() * 1000))

    def all_served(self):
        """When the last agent first sent its table of the current version, or None."""
        with self.lock:
            return max(self.served.values()) if len(self.served) == NDC else None

    def url(self, k):
        return "http://127.0.0.1:%d/dc%d/" % (self.port, k)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- steerd --------------------------------------------------------------------------------------


def steerd_argv(binary, data, agents, fetch_interval):
    def argv(d, port, zone, zone_file):
        shutil.copytree(os.path.join(data, "nets"), os.path.join(d, "nets"))
        run.write(os.path.join(d, "bench.zone"),
                  "$ORIGIN %s.\n$TTL 3600\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n"
                  "@ NS ns1\nns1 A 192.0.2.53\nstatic A %s\n" % (ZONE, STATIC_ADDR))
        conf = ["server:", "  listen: [127.0.0.1:%d]" % port, "  workers: 1",
                "  tcp-workers: 1", "  control-socket: %s" % os.path.join(d, "ctl.sock"),
                "zones:", "  - domain: %s" % ZONE, "    file: bench.zone", "datacenters:"]
        conf += ["  - { name: dc%d }" % k for k in range(NDC)]
        conf += ["maps:", "  isp:", "    nets:"]
        conf += ["      - { file: nets/dc%d.txt, datacenters: [%s] }" % (k, ", ".join(dc_list(k)))
                 for k in range(NDC)]
        conf += ["    default: [%s]" % ", ".join(dc_list(0)), "paths:", "  agents:"]
        conf += ['    - { datacenter: dc%d, url: "%s" }' % (k, agents.url(k)) for k in range(NDC)]
        conf += ["  fetch-interval: %s" % fetch_interval, "  fetch-timeout: %s" % fetch_interval,
                 "  max-prefixes: 2000000", "  hysteresis: { rounds: 1 }", "services:"]
        for name, policy in (("geo", "policy: geo"),
                             ("rtt", "policy: rtt\n    fallback-policy: geo")):
            conf += ["  - name: %s.%s" % (name, ZONE), "    " + policy, "    map: isp",
                     "    ttl: 30", "    datacenters:"]
            conf += ["      - { name: dc%d, addresses: [%s] }" % (k, dc_addr(k))
                     for k in range(NDC)]
        run.write(os.path.join(d, "steer.yaml"), "\n".join(conf) + "\n")
        return [binary, "-c", os.path.join(d, "steer.yaml")]
    return argv


def ask(port, name, subnet, timeout=2.0):
    """(rcode, addresses, ECS scope or None) of NAME A with ECS SUBNET."""
    net = ipaddress.ip_network(subnet)
    opt = dns.edns.ECSOption(str(net.network_address), net.prefixlen)
    q = dns.message.make_query(name, "A", use_edns=0, options=[opt])
    r = dns.query.udp(q, "127.0.0.1", port=port, timeout=timeout)
    addrs = [rd.address for rrs in r.answer for rd in rrs]
    scopes = [o.scopelen for o in r.options if isinstance(o, dns.edns.ECSOption)]
    return r.rcode(), addrs, scopes[0] if scopes else None


def row_key_of(subnet):
    net = ipaddress.ip_network(subnet)
    if net.version == 4:
        return int(net.network_address) & 0xFFFFFF00
    return (int(net.network_address) >> 64) & ~0xFFFF


def wrong_rtt_answers(port, sample, version):
    """The sampled subnets whose rtt answer is not their row's best under @version."""
    bad = []
    for sub in sample:
        want = dc_addr(best_of_row(row_key_of(sub), version))
        try:
            rcode, addrs, scope = ask(port, "rtt." + ZONE, sub, timeout=0.5)
        except (dns.exception.Timeout, OSError):
            bad.append((sub, "timeout"))
            continue
        plen = 24 if ":" not in sub else 48
        if rcode != dns.rcode.NOERROR or addrs != [want] or scope != plen:
            bad.append((sub, "%s %s scope %s, want %s scope %d"
                        % (dns.rcode.to_text(rcode), addrs, scope, want, plen)))
    return bad


def verify_geo(port, prefixes, sample):
    import gslb  # bench/gslb.py: the map's longest-prefix match
    index = {net: dc for net, dc in prefixes}
    for sub in sample:
        dc, _ = gslb.expected_dc(index, sub)
        rcode, addrs, _ = ask(port, "geo." + ZONE, sub)
        if rcode != dns.rcode.NOERROR or addrs != [dc_addr(dc)]:
            raise RuntimeError("geo answered %s %s for %s; the map says dc%d"
                               % (dns.rcode.to_text(rcode), addrs, sub, dc))


def wait_table(srv, sample, version, timeout):
    """Seconds until every sampled rtt answer follows @version's table."""
    start = time.monotonic()
    while True:
        if not srv.alive():
            raise RuntimeError("steerd exited:\n%s" % srv.log_tail())
        bad = wrong_rtt_answers(srv.port, sample, version)
        if not bad:
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise RuntimeError("rtt answers do not follow table %s after %d s, e.g. %s:\n%s"
                               % (version, timeout, bad[:3], srv.log_tail()))
        time.sleep(0.02)


def rss_mib(srv, field="VmRSS"):
    return run.group_rss_kib(srv.proc.pid, field) / 1024


def steerctl_paths(args, srv):
    """`steerctl --json paths` of the bench's steerd (what the node says about its table), or
    None when this steerd has no such command."""
    import subprocess
    ctl = os.path.join(os.path.dirname(args.steerd), "../../tools/steerctl")
    sock = os.path.join(os.path.dirname(srv.argv[-1]), "ctl.sock")
    p = subprocess.run([ctl, "-s", sock, "--json", "paths"], capture_output=True, text=True,
                       timeout=30)
    if p.returncode != 0:
        return None
    try:
        return json.loads(p.stdout).get("data")
    except ValueError:
        return None


# ---- the measurements ----------------------------------------------------------------------------


class Row:
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


def measure(args, row, duration=None):
    a = argparse.Namespace(**vars(args))
    a.queries_file = row.queries
    a.edns = row.edns
    a.duration = duration or args.duration
    a.loadgen_args = args.loadgen_args + (" --ecs-file " + row.ecs_file if row.ecs_file else "")
    return run.measure_one(a, row, False)


def throughput(args, srv, ecs_file):
    wd = args.workdir
    files = {}
    for name in ("static", "geo", "rtt"):
        files[name] = os.path.join(wd, "%s.txt" % name)
        run.write(files[name], "%s.%s A\n" % (name, ZONE))
    rows = [Row("steerd-static", srv, files["static"], ecs_file, args.edns),
            Row("steerd-geo", srv, files["geo"], ecs_file, args.edns),
            Row("steerd-rtt", srv, files["rtt"], ecs_file, args.edns)]
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
    table = run.summarize(results)
    run.print_rows("measured steering q/s: %s-row x %d-site path table, %s ECS subnets, "
                   "%d round(s) x %g s" % (format(args.rows, ","), NDC,
                                           format(args.ecs, ","), args.rounds, args.duration),
                   [r.name for r in rows], table)
    out = {}
    for a, b, goal in (("steerd-rtt", "steerd-geo", 0.9), ("steerd-geo", "steerd-static", None),
                       ("steerd-rtt", "steerd-static", None)):
        med = table[a]["median"] / table[b]["median"]
        paired = statistics.median(x / y for x, y in zip(table[a]["runs"], table[b]["runs"]))
        out["%s/%s" % (a, b)] = (med, paired)
        print("%s / %s: %.2fx (ratio of medians), %.2fx (median of per-round ratios)%s"
              % (a, b, med, paired, "" if goal is None else
                 "  goal >= %.1fx: %s" % (goal, "met" if med >= goal else "MISSED")))
    # ns added per query: the difference of the per-query server CPU times, meaningful only
    # while the server is the bottleneck (else its per-batch wake-ups dominate).
    per_q = {r.name: statistics.median(x["server_cpu"] / x["qps"] for x in results[r.name])
             for r in rows}
    busy = min(table[name]["server_cpu"] for name in ("steerd-geo", "steerd-rtt"))
    added = (per_q["steerd-rtt"] - per_q["steerd-geo"]) * 1e9
    out["rtt_added_ns"] = added
    print("rtt - geo server CPU per query: %+.0f ns%s" % (
        added, " (goal <= 100 ns: %s)" % ("met" if added <= 100 else "MISSED") if busy >= 0.8
        else " (not a measure: the server was busy %.0f%% of the time, not saturated)"
        % (busy * 100)))
    return table, out


def swap_under_load(args, srv, agents, sample, ecs_file):
    """Loadgen on rtt.bench.test while the tables switch versions; see the module doc."""
    qfile = os.path.join(args.workdir, "rtt.txt")
    run.write(qfile, "rtt.%s A\n" % ZONE)
    row = Row("steerd-rtt", srv, qfile, ecs_file, args.edns)
    switches = []
    rss_peak = [0.0]
    done = threading.Event()

    def watch_rss():
        while not done.is_set():
            rss_peak[0] = max(rss_peak[0], rss_mib(srv))
            time.sleep(0.05)

    def switcher():
        version = agents.version
        time.sleep(args.warmup + 1.0)
        for _ in range(args.swaps):
            version = "B" if version == "A" else "A"
            t0 = time.monotonic()
            agents.set_version(version, int(time.time() * 1000))
            try:
                moved = wait_table(srv, sample, version, 60) + t0
            except RuntimeError as e:
                switches.append({"error": str(e)})
                return
            served = agents.all_served()
            switches.append({"version": version, "switch_to_answers_s": moved - t0,
                             "served_to_answers_s": moved - served if served else None})
            run.log("  switch to %s: answers follow %.2f s after the switch, %.2f s after the "
                    "last agent's table was served" % (version, moved - t0,
                                                       (moved - served) if served else -1))
            time.sleep(1.0)

    watcher = threading.Thread(target=watch_rss, daemon=True)
    sw = threading.Thread(target=switcher, daemon=True)
    publisher = threading.Thread(target=agents.republish, args=(args.publish_interval, done),
                                 daemon=True)
    rss_before = rss_mib(srv)
    aborted = agents.aborted
    watcher.start()
    publisher.start()
    sw.start()
    res = measure(args, row, duration=args.swap_duration)
    sw.join()
    done.set()
    watcher.join()
    publisher.join()
    out = {"qps": res["qps"], "sent": res.get("sent"), "lost": res["lost"], "bad": res["bad"],
           "switches": switches, "rss_before_mib": rss_before, "rss_peak_mib": rss_peak[0],
           "hwm_mib": rss_mib(srv, "VmHWM"), "paths": steerctl_paths(args, srv),
           "aborted_transfers": agents.aborted - aborted}
    times = [s["served_to_answers_s"] for s in switches if s.get("served_to_answers_s")]
    print("\nswap under load: %d switch(es) of the %s-row x %d-site table during %g s of "
          "rtt queries" % (len(switches), format(args.rows, ","), NDC, args.swap_duration))
    print("  queries: %s sent, %d lost, %d bad (goal 0 lost: %s), %.0f q/s"
          % (res.get("sent"), res["lost"], res["bad"], "met" if res["lost"] == 0 else "MISSED",
             res["qps"]))
    if times:
        print("  served -> answers: median %.2f s, max %.2f s (goal <= 1 s: %s)"
              % (statistics.median(times), max(times), "met" if max(times) <= 1 else "MISSED"))
    print("  RSS: %.1f MiB before, %.1f MiB peak during, VmHWM %.1f MiB (goal <= 64 MiB)"
          % (rss_before, rss_peak[0], out["hwm_mib"]))
    print("  table transfers the node abandoned (fetch-timeout): %d"
          % out["aborted_transfers"])
    if any("error" in s for s in switches):
        print("  ERROR: %s" % [s["error"] for s in switches if "error" in s][0])
    return out


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steerd", default=os.path.join(run.REPO, "build-bench/src/daemon/steerd"))
    ap.add_argument("--loadgen", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--count", type=int, default=60000, help="CIDRs of the map")
    ap.add_argument("--ecs", type=int, default=100000, help="ECS subnets the queries carry")
    ap.add_argument("--rows", type=int, default=1000000, help="prefixes in each site table")
    ap.add_argument("--sample", type=int, default=200, help="ECS subnets verified")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--edns", type=int, default=1232)
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--sockets", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=1000)
    ap.add_argument("--loadgen-args", default="")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--loadgen-cpu", type=int, default=1)
    ap.add_argument("--fetch-interval", default="2s", help="the node's (and its fetch-timeout)")
    ap.add_argument("--publish-interval", type=float, default=2.0,
                    help="s between the made-up agents' new generations during the swap")
    ap.add_argument("--swaps", type=int, default=3)
    ap.add_argument("--swap-duration", type=float, default=30)
    ap.add_argument("--quiet-wait", type=float, default=0,
                    help="wait up to this many s before each run for CPUs 0 and 1 to be idle")
    ap.add_argument("--retries", type=int, default=0,
                    help="repeat a run during which others used > 10%% of a CPU")
    ap.add_argument("--json", help="write every run's numbers here")
    ap.add_argument("--no-swap", action="store_true")
    ap.add_argument("--no-qps", action="store_true")
    ap.add_argument("--workdir", help="keep configs, data and logs here")
    a = ap.parse_args()
    if a.loadgen is None:
        a.loadgen = os.path.join(os.path.dirname(a.steerd), "../../bench/loadgen")
    return a


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, run.on_term)  # stop the servers on kill as on Ctrl-C
    keep = args.workdir is not None
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="rtt-bench-")
    os.makedirs(args.workdir, exist_ok=True)
    record = {"args": {k: v for k, v in vars(args).items()}}
    agents = None
    try:
        data = os.path.join(args.workdir, "data")
        t0 = time.monotonic()
        prefixes = gen_nets.write_all(data, args.count, NDC, args.ecs, args.seed)
        ecs_file = os.path.join(data, "ecs.txt")
        with open(ecs_file) as f:
            ecs = f.read().split()
        rng = random.Random(args.seed + 7)
        keys4, keys6 = row_keys(rng, ecs, args.rows)
        now_ms = int(time.time() * 1000)
        tables = {v: site_tables(keys4, keys6, v, now_ms) for v in ("A", "B")}
        run.log("data: %s-CIDR map, %s ECS subnets, %s + %s rows x %d tables x 2 versions "
                "(%.0f MiB each) in %.1f s"
                % (format(args.count, ","), format(len(ecs), ","), format(len(keys4), ","),
                   format(len(keys6), ","), NDC, len(tables["A"][0]) / 2 ** 20,
                   time.monotonic() - t0))
        agents = Agents(tables)
        agents.set_version("A", now_ms)
        sample = random.Random(5).sample(ecs, args.sample)
        srv = run.make_server("steerd", steerd_argv(args.steerd, data, agents,
                                                    args.fetch_interval),
                              args.workdir, ZONE, None, args.server_cpu)
        run.RUNNING.append(srv)
        srv.start()
        answers = run.wait_answering(srv, "static." + ZONE, "A", 60)
        time.sleep(1.0)
        rss_empty = rss_mib(srv)  # the agents answer 503 so far: no table
        agents.serving = True
        t_serve = time.monotonic()
        loaded = wait_table(srv, sample, "A", 120)
        served = agents.all_served()
        rss = rss_mib(srv)
        verify_geo(srv.port, prefixes, sample)
        record["load"] = {"answers_s": answers, "table_s": loaded,
                          "served_to_answers_s": t_serve + loaded - served,
                          "rss_empty_mib": rss_empty, "rss_mib": rss,
                          "hwm_mib": rss_mib(srv, "VmHWM"), "paths": steerctl_paths(args, srv)}
        print("load: steerd answers after %.2f s with RSS %.1f MiB and no table; the agents "
              "then serve the %s-row x %d-site table: rtt answers follow it %.2f s later, "
              "%.2f s after the last agent's table was sent; RSS %.1f MiB (peak %.1f MiB)"
              % (answers, rss_empty, format(args.rows, ","), NDC, loaded,
                 record["load"]["served_to_answers_s"], rss, record["load"]["hwm_mib"]))
        paths = record["load"]["paths"]
        if paths and "table" in paths:
            print("  steerctl paths: %(rows4)d + %(rows6)d rows, %(cells)d cells, %(bytes)d "
                  "bytes, built in %(build_s).3f s" % paths["table"])
        if not args.no_qps:
            record["qps"], record["ratios"] = throughput(args, srv, ecs_file)
        if not args.no_swap:
            record["swap"] = swap_under_load(args, srv, agents, sample, ecs_file)
        srv.stop()
        run.RUNNING.remove(srv)
        if args.json:
            record["machine"] = run.machine_info()
            with open(args.json, "w") as f:
                json.dump(record, f, indent=1, default=str)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        run.stop_all()
        if agents:
            agents.close()
        if not keep:
            shutil.rmtree(args.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
