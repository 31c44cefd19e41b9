#!/usr/bin/python3
"""Operations overhead benchmark: UDP q/s with metrics, dnstap, the decision log and the status
page all on, against the same server with all of them off.

Setup: the GSLB benchmark's zone and map (bench/gen_nets.py, deterministic: a geo service over
10 datacenters on a nets map) served by two steerd processes that differ only in the operations
sections. The "on" server has the HTTP front end, dnstap of every auth query and response to a
file (sample 1), the decision log (one decision in 1,000) and statistics snapshots; while it is
measured, a scraper fetches /metrics and the status page's API calls once a second, as
Prometheus and an open status page would. Both servers run one UDP worker pinned to CPU 0, the
load generator runs on CPU 1.

Rows (interleaved rounds, median q/s):
  off-static / on-static   static.bench.test A with EDNS
  off-geo    / on-geo      geo.bench.test A with EDNS and ECS (a GSLB decision per query)
The goal: on >= 0.97 x off for both (the issue's "<= 3 % q/s"). dnstap drops are reported: a
drop means the file writer fell behind, which the log is allowed to do (it never blocks a
worker), but the figure says how much was logged.

Usage: bench/ops.py [--rounds 5 --duration 5] [--json FILE]
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

# What an open status page asks once a second, plus Prometheus' scrape.
POLLED = ["/metrics", "/api/v1/status", "/api/v1/health", "/api/v1/monitors",
          "/api/v1/upstreams", "/api/v1/cluster", "/api/v1/stats", "/api/v1/events"]


def ops_config(d, http_port):
    return "\n".join([
        "http:",
        "  listen: [127.0.0.1:%d]" % http_port,
        "dnstap:",
        "  file: %s" % os.path.join(d, "dnstap.fstrm"),
        "  messages: [auth-query, auth-response]",
        "  sample: 1",
        "decision-log: { file: %s, sample: 1000 }" % os.path.join(d, "decisions.jsonl"),
        "stats-snapshots: { file: %s, interval: 1s }" % os.path.join(d, "stats.jsonl"),
    ]) + "\n"


def steerd_argv(binary, data, http_port):
    base = gslb.steerd_argv(binary, data)

    def argv(d, port, zone, zone_file):
        cmd = base(d, port, zone, zone_file)
        if http_port:
            with open(os.path.join(d, "steer.yaml"), "a") as f:
                f.write(ops_config(d, http_port))
        return cmd
    return argv


class Scraper(threading.Thread):
    """Fetches the polled paths once a second until stopped; counts failures."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.stop_event = threading.Event()
        self.fetches = 0
        self.failures = 0
        self.metrics_bytes = 0

    def run(self):
        while not self.stop_event.wait(1.0):
            for path in POLLED:
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path),
                                                timeout=2) as r:
                        body = r.read()
                    self.fetches += 1
                    if path == "/metrics":
                        self.metrics_bytes = len(body)
                except OSError:
                    self.failures += 1


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
    http_port = run.free_port()
    off = run.make_server("off", steerd_argv(args.steerd, data, 0), wd, gslb.ZONE, None,
                          args.server_cpu)
    on = run.make_server("on", steerd_argv(args.steerd, data, http_port), wd, gslb.ZONE, None,
                         args.server_cpu)
    for s in (off, on):
        run.RUNNING.append(s)
        s.start()
        run.wait_answering(s, "geo." + gslb.ZONE, "A", 60)
    scraper = Scraper(http_port)
    scraper.start()
    rows = [("off-static", off, qstatic, None), ("on-static", on, qstatic, None),
            ("off-geo", off, qgeo, ecs_file), ("on-geo", on, qgeo, ecs_file)]
    results = {r[0]: [] for r in rows}
    logged0, dropped0 = dnstap_counts(http_port)
    for rnd in range(args.rounds):
        for name, srv, queries, ecs in rows:
            if not srv.alive():
                raise RuntimeError("%s died:\n%s" % (name, srv.log_tail()))
            res = measure(args, srv, queries, ecs)
            results[name].append(res)
            run.log("  round %d/%d %-10s %9.0f q/s  server cpu %3.0f%%  other cpu %3.0f%%  "
                    "lost %d" % (rnd + 1, args.rounds, name, res["qps"],
                                 res["server_cpu"] * 100, res["other_cpu"] * 100, res["lost"]))
    logged1, dropped1 = dnstap_counts(http_port)
    scraper.stop_event.set()
    scraper.join()
    for s in (off, on):
        s.stop()
        run.RUNNING.remove(s)
    table = run.summarize(results)
    run.print_rows("operations overhead, UDP q/s, %d round(s) x %g s" % (args.rounds,
                                                                       args.duration),
                   [r[0] for r in rows], table)
    ratios = {}
    for kind in ("static", "geo"):
        a, b = table["on-" + kind], table["off-" + kind]
        med = a["median"] / b["median"]
        paired = statistics.median(x / y for x, y in zip(a["runs"], b["runs"]))
        ratios[kind] = (med, paired)
        print("on-%s / off-%s: %.3fx (ratio of medians), %.3fx (median of per-round "
              "ratios)  goal >= 0.97x: %s" % (kind, kind, med, paired,
                                              "met" if med >= 0.97 else "MISSED"))
    print("dnstap during the runs: %s messages logged, %s dropped; scraper: %d fetches, %d "
          "failed, /metrics %d bytes" % (format(logged1 - logged0, ","),
                                          format(dropped1 - dropped0, ","), scraper.fetches,
                                          scraper.failures, scraper.metrics_bytes))
    return {"table": table, "ratios": ratios,
            "dnstap": {"logged": logged1 - logged0, "dropped": dropped1 - dropped0},
            "scraper": {"fetches": scraper.fetches, "failures": scraper.failures}}


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
    ap.add_argument("--json", help="write every run's numbers here")
    ap.add_argument("--workdir", help="keep configs, data and logs here")
    a = ap.parse_args()
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
