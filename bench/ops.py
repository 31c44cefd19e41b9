#!/usr/bin/python3
"""Operations overhead benchmark: UDP q/s with metrics, the status page, the decision log,
statistics snapshots and dnstap on, against the same server with all of them off.

Setup: the GSLB benchmark's zone and map (bench/gen_nets.py, deterministic: a geo service over
10 datacenters on a nets map), served by one steerd per variant that differ only in the
operations sections:
  off     none of them
  ops     the HTTP front end, scraped like Prometheus and polled like an open status page (a
          scraper thread fetches /metrics and the page's API calls once a second), the
          decision log (one decision in 1,000), statistics snapshots every second
  tap100  ops plus dnstap of one query in 100 with its response, to a file
  tap1    ops plus dnstap of every query and response, to a file
  knot, knot-tap1   Knot DNS without and with its dnstap module logging every query and
          response to a file (Debian knot-module-dnstap; static rows only): the peer's price
Each server runs one UDP worker; the whole process (worker, control thread, dnstap's writer
thread) is pinned to CPU 0 and the load generator to CPU 1, so whatever a feature costs in any
thread shows up as lost q/s.

Rows (interleaved rounds, median q/s): <variant>-static (static.bench.test A with EDNS) and
<variant>-geo (geo.bench.test A with EDNS and ECS: a GSLB decision per query).
The goal: ops and tap100 >= 0.97 x off (the issue's "<= 3 % q/s"). tap1 logs two messages a
query at several hundred thousand queries per second; its cost is reported as measured.

Usage: bench/ops.py [--rounds 5 --duration 5] [--variants off,ops,tap100,tap1,knot,knot-tap1]
                    [--json FILE]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_nets  # noqa: E402
import gslb  # noqa: E402  (the GSLB benchmark's zone, map and steerd configuration)
import run  # noqa: E402

# What an open status page asks once a second (it skips upstreams and cluster on a server
# without a forwarder or a cluster section, as this one is), plus Prometheus' scrape.
POLLED = ["/metrics", "/api/v1/status", "/api/v1/health", "/api/v1/monitors", "/api/v1/stats",
          "/api/v1/events"]


VARIANTS = ("off", "ops", "tap100", "tap1", "knot", "knot-tap1")
# Knot DNS with and without its dnstap module (Debian knot-module-dnstap) logging every query
# and response to a file: the peer's price of the same log. Static rows only (no GSLB).
KNOT_DNSTAP = """mod-dnstap:
  - id: tap
    sink: "{sink}"
    log-queries: on
    log-responses: on
"""


def knotd_argv(tap):
    def argv(d, port, zone, zone_file):
        zf = os.path.join(d, "bench.zone")
        gslb.write_zone(zf, False)
        cmd = run.knotd_argv(d, port, zone, zf)
        if tap:
            conf = os.path.join(d, "knot.conf")
            with open(conf) as f:
                text = f.read()
            # global-module belongs to the default template: add it there
            text = text.replace("template:\n  - id: default\n",
                                "template:\n  - id: default\n    global-module: mod-dnstap/tap\n")
            text = KNOT_DNSTAP.format(sink=os.path.join(d, "dnstap.fstrm")) + text
            with open(conf, "w") as f:
                f.write(text)
        return cmd
    return argv


def ops_config(d, variant, http_port):
    if variant == "off":
        return ""
    lines = ["http:", "  listen: [127.0.0.1:%d]" % http_port,
             "decision-log: { file: %s, sample: 1000 }" % os.path.join(d, "decisions.jsonl"),
             "stats-snapshots: { file: %s, interval: 1s }" % os.path.join(d, "stats.jsonl")]
    if variant.startswith("tap"):
        lines += ["dnstap:", "  file: %s" % os.path.join(d, "dnstap.fstrm"),
                  "  messages: [auth-query, auth-response]",
                  "  sample: %s" % variant[len("tap"):]]
    return "\n".join(lines) + "\n"


def steerd_argv(binary, data, variant, http_port):
    base = gslb.steerd_argv(binary, data)

    def argv(d, port, zone, zone_file):
        cmd = base(d, port, zone, zone_file)
        with open(os.path.join(d, "steer.yaml"), "a") as f:
            f.write(ops_config(d, variant, http_port))
        return cmd
    return argv


class Scraper(threading.Thread):
    """Fetches the polled paths of every port once a second until stopped; counts failures."""

    def __init__(self, ports):
        super().__init__(daemon=True)
        self.ports = ports
        self.stop_event = threading.Event()
        self.fetches = 0
        self.failures = []
        self.metrics_bytes = 0

    def run(self):
        while not self.stop_event.wait(1.0):
            for port in self.ports:
                for path in POLLED:
                    self.fetch(port, path)

    def fetch(self, port, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
                body = r.read()
            self.fetches += 1
            if path == "/metrics":
                self.metrics_bytes = len(body)
        except OSError as e:
            self.failures.append("%s: %s" % (path, e))


def dnstap_counts(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/stats" % port, timeout=2) as r:
        stats = json.load(r)["data"]
    tap = stats.get("dnstap") or {}
    return tap.get("logged", 0), tap.get("dropped", 0)


def measure(args, srv, queries, ecs_file):
    a = argparse.Namespace(**vars(args))
    a.queries_file = queries
    a.edns = args.edns
    a.loadgen_args = args.loadgen_args + (" --ecs-file " + ecs_file if ecs_file else "")
    return run.measure_one(a, srv, False)


def throughput(args, data):
    wd = args.workdir
    qgeo, qstatic = os.path.join(wd, "geo.txt"), os.path.join(wd, "static.txt")
    run.write(qgeo, "geo.%s A\n" % gslb.ZONE)
    run.write(qstatic, "static.%s A\n" % gslb.ZONE)
    ecs_file = os.path.join(data, "ecs.txt")
    servers, ports = {}, {}
    for v in args.variants:
        knot = v.startswith("knot")
        ports[v] = run.free_port() if v != "off" and not knot else 0
        argv = knotd_argv(v == "knot-tap1") if knot else steerd_argv(args.steerd, data, v,
                                                                      ports[v])
        servers[v] = run.make_server(v, argv, wd, gslb.ZONE, None, args.server_cpu)
        run.RUNNING.append(servers[v])
        servers[v].start()
        run.wait_answering(servers[v], ("static." if v.startswith("knot") else "geo.") +
                           gslb.ZONE, "A", 60)
    scraper = Scraper([p for p in ports.values() if p])
    scraper.start()
    rows = []
    for kind, queries, ecs in (("static", qstatic, None), ("geo", qgeo, ecs_file)):
        rows += [("%s-%s" % (v, kind), v, queries, ecs) for v in args.variants
                 if kind == "static" or not v.startswith("knot")]
    results = {r[0]: [] for r in rows}
    taps = {v: dnstap_counts(p) for v, p in ports.items() if v.startswith("tap")}
    for rnd in range(args.rounds):
        for name, v, queries, ecs in rows:
            srv = servers[v]
            if not srv.alive():
                raise RuntimeError("%s died:\n%s" % (name, srv.log_tail()))
            res = measure(args, srv, queries, ecs)
            results[name].append(res)
            run.log("  round %d/%d %-13s %9.0f q/s  server cpu %3.0f%%  other cpu %3.0f%%  "
                    "lost %d" % (rnd + 1, args.rounds, name, res["qps"],
                                 res["server_cpu"] * 100, res["other_cpu"] * 100, res["lost"]))
    taps = {v: [b - a for a, b in zip(before, dnstap_counts(ports[v]))]
            for v, before in taps.items()}
    scraper.stop_event.set()
    scraper.join()
    for srv in servers.values():
        srv.stop()
        run.RUNNING.remove(srv)
    table = run.summarize(results)
    run.print_rows("operations overhead, UDP q/s, %d round(s) x %g s" % (args.rounds,
                                                                       args.duration),
                   [r[0] for r in rows], table)
    ratios = {}
    if {"knot", "knot-tap1"} <= set(args.variants):
        a, b = table["knot-tap1-static"], table["knot-static"]
        med = a["median"] / b["median"]
        paired = statistics.median(x / y for x, y in zip(a["runs"], b["runs"]))
        ratios["knot-tap1-static"] = (med, paired)
        print("knot-tap1-static / knot-static: %.3fx (ratio of medians), %.3fx (median of "
              "per-round ratios)" % (med, paired))
    for v in args.variants:
        if v in ("off", "knot", "knot-tap1") or "off" not in args.variants:
            continue
        for kind in ("static", "geo"):
            a, b = table["%s-%s" % (v, kind)], table["off-" + kind]
            med = a["median"] / b["median"]
            paired = statistics.median(x / y for x, y in zip(a["runs"], b["runs"]))
            ratios["%s-%s" % (v, kind)] = (med, paired)
            goal = "" if v == "tap1" else "  goal >= 0.97x: %s" % ("met" if med >= 0.97
                                                                   else "MISSED")
            print("%s-%s / off-%s: %.3fx (ratio of medians), %.3fx (median of per-round "
                  "ratios)%s" % (v, kind, kind, med, paired, goal))
    for v, (logged, dropped) in taps.items():
        print("dnstap %s during the runs: %s messages logged, %s dropped" %
              (v, format(logged, ","), format(dropped, ",")))
    print("scraper: %d fetches, %d failed%s; /metrics %d bytes" % (
        scraper.fetches, len(scraper.failures),
        " (%s)" % "; ".join(scraper.failures[:3]) if scraper.failures else "",
        scraper.metrics_bytes))
    return {"table": table, "ratios": ratios, "dnstap": taps,
            "scraper": {"fetches": scraper.fetches, "failures": len(scraper.failures)}}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steerd", default=os.path.join(run.REPO, "build/src/daemon/steerd"))
    ap.add_argument("--loadgen", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--count", type=int, default=60000, help="CIDRs of the map")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--edns", type=int, default=1232)
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--sockets", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=1000)
    ap.add_argument("--loadgen-args", default="")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--loadgen-cpu", type=int, default=1)
    ap.add_argument("--quiet-wait", type=float, default=0)
    ap.add_argument("--retries", type=int, default=0)
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma-separated, from %s" % ", ".join(VARIANTS))
    ap.add_argument("--json", help="write every run's numbers here")
    ap.add_argument("--workdir", help="keep configs, data and logs here")
    a = ap.parse_args()
    a.variants = a.variants.split(",")
    if set(a.variants) - set(VARIANTS):
        ap.error("unknown variant in %s" % a.variants)
    if a.loadgen is None:
        a.loadgen = os.path.join(os.path.dirname(a.steerd), "../../bench/loadgen")
    return a


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, run.on_term)
    keep = args.workdir is not None
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="ops-bench-")
    os.makedirs(args.workdir, exist_ok=True)
    try:
        data = os.path.join(args.workdir, "data")
        gen_nets.write_all(data, args.count, gslb.NDC, 100000, args.seed)
        record = throughput(args, data)
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
