#!/usr/bin/python3
"""Scrape-time benchmark: GET /metrics of a steerd with 10,000 monitored GSLB targets.

Setup: 500 services (svcN.scrape.test) over 4 datacenters with 5 addresses each, 10,000
targets on distinct loopback addresses (127.1.0.0/16 and up), each watched by its own tcp
check (interval 10 s, so about 1,000 probes per second run on the control thread meanwhile):
the even services' monitor probes a port a listener accepts on (UP), the odd services' a
closed port (DOWN, connection refused). steerd runs with one UDP and one TCP worker.

After every check has a result, the benchmark scrapes /metrics --scrapes times (default 200)
one after the other over HTTP/1.1 on loopback and reports the median, 90th percentile and
max of the wall time per scrape (request sent to last byte read), the exposition's size and
sample count, and whether `promtool check metrics` accepts it. Meanwhile a client sends UDP
queries, one every 0.5 ms at most, and records their round trips, then does the same for as
long without scrapes: the query threads must not wait for a scrape.

Goal: a scrape of 10,000 health targets takes < 100 ms (median and max).

Usage: bench/metrics_scrape.py [--scrapes 200] [--steerd build/src/daemon/steerd]
                               [--json FILE]
"""

import argparse
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import multiprocessing
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZONE = "scrape.test"
SERVICES, DCS, PER_DC = 500, 4, 5
GOAL_S = 0.100

BACKEND = """import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(1024)
while True:
    c, _ = s.accept()
    c.close()
"""


def free_port():
    while True:
        port = random.randint(20000, 32000)
        ok = True
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(socket.AF_INET, kind)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                ok = False
            finally:
                s.close()
        if ok:
            return port


def address(i):
    return f"127.{1 + i // 65536}.{(i // 256) % 256}.{i % 256}"


def config(dns_port, http_port, up_port, down_port, workdir):
    lines = [f"""server:
  listen: [127.0.0.1:{dns_port}]
  control-socket: {workdir}/ctl.sock
  workers: 1
  tcp-workers: 1
zones:
  - {{ domain: {ZONE}, file: {workdir}/{ZONE}.zone }}
http:
  listen: [127.0.0.1:{http_port}]
  read-only-open: true
monitors:
  up: {{ type: tcp, port: {up_port}, interval: 10s, timeout: 1s, fall: 3, rise: 1 }}
  down: {{ type: tcp, port: {down_port}, interval: 10s, timeout: 1s, fall: 3, rise: 1 }}
datacenters:"""]
    lines += [f"  - {{ name: dc{d} }}" for d in range(DCS)]
    lines.append("services:")
    n = 0
    for s in range(SERVICES):
        lines += [f"  - name: svc{s}.{ZONE}", "    policy: failover",
                  f"    monitor: {'up' if s % 2 == 0 else 'down'}", "    ttl: 30",
                  "    datacenters:"]
        for d in range(DCS):
            addrs = ", ".join(address(n + k) for k in range(PER_DC))
            n += PER_DC
            lines.append(f"      dc{d}: {{ addresses: [{addrs}] }}")
    return "\n".join(lines) + "\n"


def scrape(conn):
    t0 = time.perf_counter()
    conn.request("GET", "/metrics")
    r = conn.getresponse()
    body = r.read()
    took = time.perf_counter() - t0
    if r.status != 200:
        raise RuntimeError(f"/metrics: HTTP {r.status}: {body[:200]!r}")
    return took, body


def checks_decided(body):
    """How many steer_check_probes_total samples are above 0."""
    n = 0
    for line in body.decode().splitlines():
        if line.startswith("steer_check_probes_total{") and not line.endswith(" 0"):
            n += 1
    return n


def cpu_seconds(pid):
    """User + system CPU time of @pid so far (every thread)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def render_seconds(body):
    """steer_metrics_render_seconds of a scrape: the previous scrape's rendering time."""
    for line in body.decode().splitlines():
        if line.startswith("steer_metrics_render_seconds "):
            return float(line.split()[1])
    return None


def query_wire(qid):
    """A minimal A query for ns1.<ZONE> (no EDNS), id @qid."""
    name = b"".join(bytes([len(p)]) + p for p in f"ns1.{ZONE}".encode().split(b".")) + b"\0"
    return qid.to_bytes(2, "big") + b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00" + name \
        + b"\x00\x01\x00\x01"


# Background queries: one every 0.5 ms at most, a steady load that leaves the CPUs to the
# scrapes (a flood would measure the two CPUs' sharing, not the scrape).
QUERY_GAP_S = 0.0005


def query_latencies(port, seconds, stop=None):
    """Round-trip times of UDP queries sent one after the other, QUERY_GAP_S apart, for
    @seconds (or until @stop is set): what a client sees of the query threads meanwhile."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    s.connect(("127.0.0.1", port))
    out, qid, end = [], 0, time.monotonic() + seconds
    try:
        while time.monotonic() < end and not (stop and stop.is_set()):
            qid = (qid + 1) & 0xFFFF
            t0 = time.perf_counter()
            s.send(query_wire(qid))
            try:
                while s.recv(4096)[:2] != qid.to_bytes(2, "big"):
                    pass
            except socket.timeout:
                out.append(1.0)
                continue
            out.append(time.perf_counter() - t0)
            time.sleep(QUERY_GAP_S)
    finally:
        s.close()
    return sorted(out)


def pct(values, p):
    return values[min(len(values) - 1, int(len(values) * p))] * 1000


def main():
    multiprocessing.set_start_method("fork")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--steerd", default=str(ROOT / "build" / "src" / "daemon" / "steerd"))
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="steer-scrape-"))
    procs = []
    try:
        dns_port, http_port, up_port, down_port = (free_port() for _ in range(4))
        (work / f"{ZONE}.zone").write_text(
            f"$ORIGIN {ZONE}.\n$TTL 3600\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n"
            f"  NS ns1\nns1 A 192.0.2.53\n")
        (work / "steer.yaml").write_text(config(dns_port, http_port, up_port, down_port, work))
        procs.append(subprocess.Popen([sys.executable, "-c", BACKEND, str(up_port)]))
        log = open(work / "steerd.log", "wb")
        t_start = time.monotonic()
        steerd = subprocess.Popen([args.steerd, "-c", str(work / "steer.yaml")], stdout=log,
                                  stderr=subprocess.STDOUT)
        procs.append(steerd)
        conn = None
        deadline = time.monotonic() + 120
        while conn is None:
            if steerd.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("steerd did not start:\n"
                                   + (work / "steerd.log").read_text()[-3000:])
            try:
                c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
                scrape(c)
                conn = c
            except OSError:
                time.sleep(0.2)
        targets = SERVICES * DCS * PER_DC
        while True:
            _, body = scrape(conn)
            decided = checks_decided(body)
            if decided >= targets:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {decided} of {targets} checks have a result")
            time.sleep(0.5)
        ready_s = time.monotonic() - t_start

        times, renders = [], []
        # The querier is a process of its own, so the scraper's parsing does not hold it up.
        stop = multiprocessing.Event()
        results = multiprocessing.Queue()
        querier = multiprocessing.Process(
            target=lambda: results.put(query_latencies(dns_port, 3600, stop)))
        querier.start()
        cpu0, t0 = cpu_seconds(steerd.pid), time.monotonic()
        for _ in range(args.scrapes):
            took, body = scrape(conn)
            times.append(took)
            renders.append(render_seconds(body))
        cpu_scraping, wall = cpu_seconds(steerd.pid) - cpu0, time.monotonic() - t0
        stop.set()
        during = results.get()
        querier.join()
        # As long without scrapes, the same queries: their CPU and the probes' is taken off
        # the total, and their round trips are the comparison.
        cpu0 = cpu_seconds(steerd.pid)
        quiet = query_latencies(dns_port, wall)
        cpu = (cpu_scraping - (cpu_seconds(steerd.pid) - cpu0)) / args.scrapes
        renders = sorted(r for r in renders[1:] if r is not None)
        text = body.decode()
        samples = sum(1 for ln in text.splitlines() if ln and not ln.startswith("#"))
        up = sum(1 for ln in text.splitlines()
                 if ln.startswith("steer_target_up{") and ln.endswith(" 1"))
        promtool = shutil.which("promtool")
        valid = None
        if promtool:
            res = subprocess.run([promtool, "check", "metrics"], input=text,
                                 capture_output=True, text=True)
            valid = res.returncode == 0 and not (res.stdout + res.stderr).strip()
        times.sort()
        result = {
            "targets": targets,
            "targets_up": up,
            "scrapes": len(times),
            "median_ms": statistics.median(times) * 1000,
            "p90_ms": times[int(len(times) * 0.9) - 1] * 1000,
            "max_ms": times[-1] * 1000,
            "bytes": len(body),
            "samples": samples,
            "promtool_ok": valid,
            "render_median_ms": statistics.median(renders) * 1000,
            "render_max_ms": renders[-1] * 1000,
            "steerd_cpu_ms_per_scrape": cpu * 1000,
            "loadavg": Path("/proc/loadavg").read_text().split()[:3],
            "query_ms_during_scrapes": {"n": len(during), "median": pct(during, 0.5),
                                        "p99": pct(during, 0.99), "max": during[-1] * 1000},
            "query_ms_without_scrapes": {"n": len(quiet), "median": pct(quiet, 0.5),
                                         "p99": pct(quiet, 0.99), "max": quiet[-1] * 1000},
            "all_checks_decided_s": ready_s,
            "goal_ms": GOAL_S * 1000,
        }
        print(f"{targets} targets ({up} UP), {samples} samples, {len(body) / 1e6:.2f} MB, "
              f"promtool {'ok' if valid else 'FAILED' if valid is False else 'missing'}")
        print(f"scrape over {len(times)} runs: median {result['median_ms']:.1f} ms, "
              f"p90 {result['p90_ms']:.1f} ms, max {result['max_ms']:.1f} ms "
              f"(goal < {GOAL_S * 1000:.0f} ms): "
              f"{'met' if times[-1] < GOAL_S else 'NOT met'}")
        print(f"rendering on the control thread: median {result['render_median_ms']:.1f} ms, "
              f"max {result['render_max_ms']:.1f} ms; steerd CPU per scrape (HTTP included, "
              f"queries and probes excluded) {result['steerd_cpu_ms_per_scrape']:.1f} ms; load average "
              f"{' '.join(result['loadavg'])}")
        for what, q in (("during the scrapes", result["query_ms_during_scrapes"]),
                        ("without scrapes", result["query_ms_without_scrapes"])):
            print(f"UDP queries {what}: {q['n']}, round trip median {q['median']:.3f} ms, "
                  f"p99 {q['p99']:.3f} ms, max {q['max']:.3f} ms")
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        return 0 if times[-1] < GOAL_S and valid is not False else 1
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
