#!/usr/bin/python3
"""Soak benchmark: one steerd under a steady UDP load for a long time, reloaded and refreshed
as a production server is, to show that nothing is lost and memory stays flat.

What runs, all on loopback:
  steerd   one UDP and one TCP worker (pinned to --server-cpu), a primary zone soak.test
           (1,000 names) and, unless --no-secondary, the secondary zone sec.soak.test pulled
           from a real Knot primary (Debian knot) with `primaries:`
  load     bench/loadgen --rate (default 20,000 q/s) of names of both zones (A, AAAA, MX,
           TXT and NXDOMAIN), in one-minute segments so q/s is reported per minute; a query
           unanswered after --timeout ms counts as lost
  reloads  every --reload-interval (30 s): the zone file is rewritten with a new serial and
           a changed record, then `steerctl reload`; the new serial must be served within 5 s
  refresh  every --refresh-interval (10 s): Knot's copy of sec.soak.test gets a new serial and
           `knotc zone-reload`; Knot NOTIFYs steerd, which must serve the new serial within
           the interval (and without the NOTIFY the SOA refresh of 10 s would get it)
  memory   VmRSS of steerd from /proc/PID/status every second

Report: queries sent, answered and lost; RSS at start (after --rss-baseline seconds of load,
when the caches, arenas and a first reload are warm), at the end and the maximum; answered q/s
per minute; reloads and refreshes done and failed. Goal: 0 lost, RSS end < start x 1.05.
Exit status 1 when the goal is missed or a reload or refresh failed.

Usage: bench/soak.py [--duration 600] [--rate 20000] [--no-secondary] [--json FILE]
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (free_port, process helpers)

ZONE = "soak.test."
SECONDARY = "sec.soak.test."
NAMES = 1000


def log(msg):
    print(time.strftime("%H:%M:%S ") + msg, flush=True)


def zone_text(origin, serial, generation, names):
    """The zone: apex records, NAMES hosts with A, AAAA and MX, and one TXT record that
    carries the generation, so every reload really changes data."""
    lines = [f"$ORIGIN {origin}", "$TTL 300",
             f"@ SOA ns1 hostmaster {serial} 10 5 3600 60",
             "@ NS ns1", "ns1 A 192.0.2.1", f"gen TXT \"generation {generation}\""]
    for i in range(names):
        lines.append(f"h{i} A 10.{i >> 8 & 255}.{i & 255}.1")
        lines.append(f"h{i} AAAA 2001:db8::{i:x}")
        lines.append(f"h{i} MX 10 h{(i + 1) % names}")
    return "\n".join(lines) + "\n"


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def query_file(path, with_secondary):
    """loadgen's 'name type' lines: mostly answers, some NODATA and NXDOMAIN."""
    lines = []
    zones = [(ZONE, NAMES)] + ([(SECONDARY, 100)] if with_secondary else [])
    for origin, n in zones:
        for i in range(0, n, 7):
            lines.append(f"h{i}.{origin} A")
            lines.append(f"h{i}.{origin} AAAA")
            lines.append(f"h{i}.{origin} MX")
            lines.append(f"nx{i}.{origin} A")
        lines.append(f"gen.{origin} TXT")
        lines.append(f"{origin} SOA")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def soa_serial(port, origin, timeout=0.5):
    q = dns.message.make_query(origin, "SOA")
    try:
        r = dns.query.udp(q, "127.0.0.1", port=port, timeout=timeout)
    except (dns.exception.Timeout, OSError):
        return None
    if r.rcode() != dns.rcode.NOERROR:
        return None
    for rrset in r.answer:
        if rrset.rdtype == dns.rdatatype.SOA:
            return rrset[0].serial
    return None


def wait_serial(port, origin, serial, timeout):
    """Seconds until the server answers @serial (or newer) for @origin, or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        s = soa_serial(port, origin)
        if s is not None and s >= serial:
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Knot:
    """A Knot primary for the secondary zone, with a control socket for knotc."""

    def __init__(self, workdir, steer_port):
        self.dir = os.path.join(workdir, "knot")
        os.makedirs(os.path.join(self.dir, "db"))
        self.port = run.free_port()
        self.sock = os.path.join(self.dir, "knot.sock")
        self.zone_file = os.path.join(self.dir, "sec.soak.test.zone")
        self.serial = 1
        write_atomic(self.zone_file, zone_text(SECONDARY, self.serial, 0, 100))
        self.conf = os.path.join(self.dir, "knot.conf")
        run.write(self.conf, f"""server:
    rundir: "{self.dir}"
    listen: 127.0.0.1@{self.port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
control:
    listen: "{self.sock}"
database:
    storage: "{self.dir}/db"
log:
  - target: stderr
    any: warning
remote:
  - id: steer
    address: 127.0.0.1@{steer_port}
acl:
  - id: transfer
    address: 127.0.0.0/8
    action: transfer
template:
  - id: default
    storage: "{self.dir}"
    zonefile-sync: -1
    zonefile-load: difference
    journal-content: changes
zone:
  - domain: {SECONDARY}
    file: "{self.zone_file}"
    acl: transfer
    notify: steer
""")
        knotd = shutil.which("knotd") or "/usr/sbin/knotd"
        if not os.path.exists(knotd):
            raise RuntimeError("knotd not found: install the Debian package 'knot'")
        self.log_path = os.path.join(self.dir, "knotd.log")
        self.log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen([knotd, "-c", self.conf], stdout=self.log_file,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        if wait_serial(self.port, SECONDARY, 1, 10) is None:
            raise RuntimeError("knotd does not answer:\n" + open(self.log_path).read())

    def bump(self, generation):
        """A new serial and a changed record, loaded by knotd (which NOTIFYs steerd)."""
        self.serial += 1
        write_atomic(self.zone_file, zone_text(SECONDARY, self.serial, generation, 100))
        knotc = shutil.which("knotc") or "/usr/sbin/knotc"
        res = subprocess.run([knotc, "-c", self.conf, "-s", self.sock, "zone-reload",
                              SECONDARY], capture_output=True, text=True, timeout=10)
        if res.returncode != 0:
            raise RuntimeError("knotc zone-reload: " + res.stdout + res.stderr)
        return self.serial

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()


class Steerd:
    def __init__(self, args, workdir, knot, port):
        self.dir = workdir
        self.port = port
        self.ctl = os.path.join(workdir, "ctl.sock")
        self.zone_file = os.path.join(workdir, "soak.test.zone")
        self.serial = 1
        self.generation = 0
        write_atomic(self.zone_file, zone_text(ZONE, self.serial, 0, NAMES))
        storage = os.path.join(workdir, "storage")
        os.makedirs(storage)
        secondary = storage_key = ""
        if knot:
            # where steerd keeps the transferred zone (a server key of the secondary feature)
            storage_key = f"  storage: {storage}\n"
            secondary = f"""  - domain: {SECONDARY}
    primaries:
      - {{ address: "127.0.0.1@{knot.port}" }}
"""
        self.conf = os.path.join(workdir, "steer.yaml")
        run.write(self.conf, f"""server:
  listen: [ "127.0.0.1:{self.port}" ]
  control-socket: {self.ctl}
  workers: 1
  tcp-workers: 1
{storage_key}zones:
  - domain: {ZONE}
    file: {self.zone_file}
{secondary}""")
        self.steerctl = args.steerctl
        self.log_path = os.path.join(workdir, "steerd.log")
        self.log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(["taskset", "-c", str(args.server_cpu), args.steerd, "-c",
                                      self.conf], stdout=self.log_file,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        if wait_serial(self.port, ZONE, 1, 30) is None:
            self.stop()
            raise RuntimeError("steerd does not answer:\n" + self.log_tail())
        # taskset execs steerd: the pid is steerd's
        self.pid = self.proc.pid

    def log_tail(self, n=20):
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def reload(self):
        """A changed zone file, then steerctl reload; returns the new serial."""
        self.serial += 1
        self.generation += 1
        write_atomic(self.zone_file, zone_text(ZONE, self.serial, self.generation, NAMES))
        res = subprocess.run([self.steerctl, "-s", self.ctl, "reload"], capture_output=True,
                             text=True, timeout=30)
        if res.returncode != 0:
            raise RuntimeError("steerctl reload: " + res.stdout + res.stderr)
        return self.serial

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()
        return self.proc.returncode


class Periodic(threading.Thread):
    """Calls fn(i) every @interval seconds until stopped; records results and failures."""

    def __init__(self, name, interval, fn):
        super().__init__(name=name, daemon=True)
        self.interval, self.fn = interval, fn
        self.stop_ev = threading.Event()
        self.done, self.failures, self.lags = 0, [], []

    def run(self):
        i = 0
        while not self.stop_ev.wait(self.interval):
            i += 1
            try:
                lag = self.fn(i)
                self.done += 1
                self.lags.append(lag)
            except Exception as e:  # a failed step is reported, the soak goes on
                self.failures.append(f"{self.name} {i}: {e}")
                log(f"{self.name} {i} FAILED: {e}")

    def stop(self):
        self.stop_ev.set()
        self.join()


class RssSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(name="rss", daemon=True)
        self.pid = pid
        self.samples = []  # (seconds since start, KiB)
        self.stop_ev = threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        while True:
            kib = rss_kib(self.pid)
            if kib is not None:
                self.samples.append((time.monotonic() - self.t0, kib))
            if self.stop_ev.wait(1.0):
                return

    def at(self, seconds):
        """The first sample at or after @seconds."""
        for t, kib in self.samples:
            if t >= seconds:
                return kib
        return self.samples[-1][1] if self.samples else None

    def stop(self):
        self.stop_ev.set()
        self.join()


def loadgen_segment(args, port, queries, seconds):
    argv = ["taskset", "-c", str(args.loadgen_cpu), args.loadgen, "--server", "127.0.0.1",
            "--port", str(port), "--queries", queries, "--rate", str(args.rate), "--duration",
            str(seconds), "--warmup", "0", "--timeout", str(args.timeout), "--sockets", "4",
            "--window", str(args.window), "--json"]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=seconds + 60)
    if p.returncode not in (0, 1) or not p.stdout.strip():
        raise RuntimeError(f"loadgen failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


def parse_args():
    build = os.path.join(ROOT, "build")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steerd", default=os.path.join(build, "src", "daemon", "steerd"))
    ap.add_argument("--steerctl", default=os.path.join(build, "tools", "steerctl"))
    ap.add_argument("--loadgen", default=os.path.join(build, "bench", "loadgen"))
    ap.add_argument("--duration", type=float, default=600, help="seconds of load (default 600)")
    ap.add_argument("--rate", type=int, default=20000, help="queries per second")
    ap.add_argument("--reload-interval", type=float, default=30)
    ap.add_argument("--refresh-interval", type=float, default=10)
    ap.add_argument("--no-secondary", action="store_true",
                    help="no Knot primary and no secondary zone")
    ap.add_argument("--rss-baseline", type=float, default=10,
                    help="RSS 'start' is taken this many seconds into the load")
    ap.add_argument("--segment", type=float, default=60, help="seconds per q/s row")
    ap.add_argument("--timeout", type=int, default=1000, help="loadgen loss timeout, ms")
    ap.add_argument("--window", type=int, default=256, help="loadgen UDP window")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--loadgen-cpu", type=int, default=1)
    ap.add_argument("--workdir", help="keep configs, zones and logs here (default: temporary)")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    for b in (args.steerd, args.steerctl, args.loadgen):
        if not os.access(b, os.X_OK):
            ap.error(f"{b}: not found (build first: ninja -C build)")
    return args


def main():
    args = parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="steer-soak-")
    os.makedirs(workdir, exist_ok=True)
    knot = steer = None
    signal.signal(signal.SIGTERM, run.on_term)
    try:
        # Knot NOTIFYs steerd, and steerd pulls from Knot: steerd's port is chosen first.
        steer_port = run.free_port()
        knot = None if args.no_secondary else Knot(workdir, steer_port)
        steer = Steerd(args, workdir, knot, steer_port)
        if knot and wait_serial(steer.port, SECONDARY, 1, 30) is None:
            raise RuntimeError("steerd does not serve the secondary zone:\n" + steer.log_tail())
        queries = os.path.join(workdir, "queries.txt")
        query_file(queries, knot is not None)
        log(f"steerd pid {steer.pid} on 127.0.0.1:{steer.port}, {args.rate} q/s for "
            f"{args.duration:.0f} s, reload every {args.reload_interval:.0f} s" +
            ("" if knot is None else f", secondary refresh every {args.refresh_interval:.0f} s"
             f" from knotd on port {knot.port}") + f"; files in {workdir}")

        def do_reload(i):
            serial = steer.reload()
            lag = wait_serial(steer.port, ZONE, serial, 5)
            if lag is None:
                raise RuntimeError(f"serial {serial} not served 5 s after the reload")
            return lag

        def do_refresh(i):
            serial = knot.bump(i)
            lag = wait_serial(steer.port, SECONDARY, serial, args.refresh_interval)
            if lag is None:
                raise RuntimeError(f"serial {serial} not served {args.refresh_interval:.0f} s "
                                   "after the primary changed")
            return lag

        rss0 = rss_kib(steer.pid)
        sampler = RssSampler(steer.pid)
        sampler.start()
        reloader = Periodic("reload", args.reload_interval, do_reload)
        reloader.start()
        refresher = Periodic("refresh", args.refresh_interval, do_refresh) if knot else None
        if refresher:
            refresher.start()
        minutes = []
        t_end = time.monotonic() + args.duration
        while True:
            left = t_end - time.monotonic()
            if left < 1:
                break
            seg = min(args.segment, left)
            res = loadgen_segment(args, steer.port, queries, seg)
            minutes.append(res)
            log(f"segment {len(minutes)}: sent {res['sent']} answered {res['received']} "
                f"lost {res['lost']} q/s {res['qps']:.0f} rss {rss_kib(steer.pid)} KiB")
            if steer.proc.poll() is not None:
                raise RuntimeError("steerd exited:\n" + steer.log_tail())
        reloader.stop()
        if refresher:
            refresher.stop()
        sampler.stop()
        code = steer.stop()
        if knot:
            knot.stop()

        sent = sum(m["sent"] for m in minutes)
        answered = sum(m["received"] for m in minutes)
        lost = sum(m["lost"] for m in minutes)
        uncounted = sent - answered - lost
        rcodes = {}
        for m in minutes:
            for k, v in m["rcodes"].items():
                rcodes[k] = rcodes.get(k, 0) + v
        kib = [k for _, k in sampler.samples]
        start = sampler.at(args.rss_baseline)
        end = kib[-1] if kib else None
        growth = (end - start) / start if start and end else None
        failures = reloader.failures + (refresher.failures if refresher else [])
        if code != 0:
            failures.append(f"steerd exited {code}")
        result = {
            "rate": args.rate, "duration": args.duration, "secondary": knot is not None,
            "sent": sent, "answered": answered, "lost": lost, "uncounted": uncounted,
            "late": sum(m["late"] for m in minutes), "bad": sum(m["bad"] for m in minutes),
            "rcodes": rcodes,
            "qps_per_segment": [round(m["qps"]) for m in minutes],
            "segment_seconds": [round(m["seconds"], 1) for m in minutes],
            "rss_kib": {"before_load": rss0, "start": start, "end": end,
                        "max": max(kib) if kib else None, "growth": growth,
                        "samples": len(kib)},
            "reloads": reloader.done, "reload_lag_max": max(reloader.lags, default=None),
            "refreshes": refresher.done if refresher else 0,
            "refresh_lag_max": max(refresher.lags, default=None) if refresher else None,
            "failures": failures,
        }
        ok = (lost == 0 and uncounted == 0 and not failures and growth is not None
              and growth < 0.05)
        result["ok"] = ok
        print()
        print(f"queries sent {sent}  answered {answered}  lost {lost}"
              + (f"  uncounted {uncounted}" if uncounted else ""))
        print("answered q/s per segment: " + " ".join(str(q) for q in result["qps_per_segment"]))
        r = result["rss_kib"]
        print(f"steerd RSS KiB: before load {r['before_load']}  start {start} (at "
              f"{args.rss_baseline:.0f} s)  end {end}  max {r['max']}  growth "
              + (f"{growth * 100:+.2f} %" if growth is not None else "?"))
        print(f"reloads {reloader.done} (slowest served after {result['reload_lag_max'] or 0:.2f}"
              " s)" + ("" if not refresher else f", secondary refreshes {refresher.done} "
                       f"(slowest {result['refresh_lag_max'] or 0:.2f} s)"))
        for f in failures:
            print("FAILED: " + f)
        print("goal (0 lost, RSS +< 5 %): " + ("met" if ok else "MISSED"))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        if not args.workdir and ok:
            shutil.rmtree(workdir, ignore_errors=True)
        return 0 if ok else 1
    finally:
        for p in (steer, knot):
            if p is not None and getattr(p, "proc", None) is not None and p.proc.poll() is None:
                p.stop()


if __name__ == "__main__":
    sys.exit(main())
