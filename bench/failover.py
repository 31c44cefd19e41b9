#!/usr/bin/python3
"""Failover-time benchmark: from killing a backend to the first answer without it.

Setup: steerd serves www.failover.test, a failover service over two datacenters whose addresses
(127.0.0.51, 127.0.0.52) each run a real TCP backend (a python3 process listening on them);
a tcp monitor with interval 1 s, timeout 0.5 s, fall 2, rise 2 and the default 10% jitter
watches both.

Each trial waits until the answer is dc1's address, waits a random 0-1 s (so the kill lands at
a random phase of the probe schedule), kills dc1's backend process (SIGKILL: the kernel then
refuses connections, as after a crash), and queries steerd over UDP every 5 ms until the
answer no longer holds dc1's address. That time is the failover time. The backend is then
restarted and the trial waits for dc1 to come back (the failback time, also reported).

Goal (issue 4): median and max <= interval x fall + 0.5 s = 2.5 s.

Usage: bench/failover.py [--trials 20] [--steerd build/src/daemon/steerd] [--json FILE]
"""

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dns.message
import dns.query

ROOT = Path(__file__).resolve().parents[1]
ZONE = "failover.test"
NAME = f"www.{ZONE}"
DC1, DC2 = "127.0.0.51", "127.0.0.52"
INTERVAL_MS, FALL = 1000, 2
GOAL = INTERVAL_MS / 1000 * FALL + 0.5

BACKEND = """import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(64)
while True:
    c, _ = s.accept()
    c.close()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_backend(host: str, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", BACKEND, host, str(port)])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.01)
    proc.kill()
    raise RuntimeError(f"backend {host}:{port} did not start")


def answer(port: int) -> list[str]:
    q = dns.message.make_query(NAME, "A")
    try:
        r = dns.query.udp(q, "127.0.0.1", port=port, timeout=0.2)
    except Exception:
        return []
    return sorted(rd.address for rrset in r.answer for rd in rrset)


def wait_answer(port: int, want: list[str], timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if answer(port) == want:
            return time.monotonic() - t0
        time.sleep(0.005)
    raise RuntimeError(f"no answer {want} within {timeout} s (last {answer(port)})")


def config(workdir: Path, dns_port: int, backend_port: int) -> Path:
    (workdir / "z.zone").write_text(f"$ORIGIN {ZONE}.\n$TTL 300\n@ SOA ns h 1 2 3 4 5\n"
                                    "@ NS ns\nns A 192.0.2.53\n")
    conf = workdir / "steer.yaml"
    conf.write_text(f"""server:
  listen: ["127.0.0.1:{dns_port}"]
  control-socket: {workdir}/ctl.sock
  workers: 1
  tcp-workers: 1
log:
  target: stderr
  level: warning
zones:
  - domain: {ZONE}
    file: z.zone
monitors:
  web: {{ type: tcp, port: {backend_port}, interval: {INTERVAL_MS}, timeout: 500, fall: {FALL}, rise: 2 }}
datacenters:
  - {{ name: dc1 }}
  - {{ name: dc2 }}
services:
  - name: {NAME}
    policy: failover
    monitor: web
    ttl: 30
    datacenters:
      dc1: {{ addresses: [{DC1}] }}
      dc2: {{ addresses: [{DC2}] }}
""")
    return conf


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--steerd", default=str(ROOT / "build" / "src" / "daemon" / "steerd"))
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    rng = random.Random(1)
    work = Path(tempfile.mkdtemp(prefix="steer-failover-"))
    dns_port, backend_port = free_port(), free_port()
    b2 = start_backend(DC2, backend_port)
    b1 = start_backend(DC1, backend_port)
    steerd = subprocess.Popen([args.steerd, "-c", str(config(work, dns_port, backend_port))])
    downs, ups = [], []
    try:
        wait_answer(dns_port, [DC1], 10)
        for i in range(args.trials):
            wait_answer(dns_port, [DC1], 10)
            time.sleep(rng.random())
            b1.send_signal(signal.SIGKILL)
            b1.wait()
            t_down = wait_answer(dns_port, [DC2], 10)
            b1 = start_backend(DC1, backend_port)
            t_up = wait_answer(dns_port, [DC1], 10)
            downs.append(t_down)
            ups.append(t_up)
            print(f"trial {i + 1:2}: failover {t_down:.3f} s, failback {t_up:.3f} s", flush=True)
    finally:
        for p in (steerd, b1, b2):
            if p.poll() is None:
                p.terminate() if p is steerd else p.kill()
            p.wait()
        for f in sorted(work.iterdir(), reverse=True):
            f.unlink()
        work.rmdir()
    med, worst = statistics.median(downs), max(downs)
    print(f"\nfailover (kill -> first answer without it), {len(downs)} trials: "
          f"median {med:.3f} s, max {worst:.3f} s, min {min(downs):.3f} s "
          f"(goal <= {GOAL:.1f} s: {'met' if worst <= GOAL else 'MISSED'})")
    print(f"failback (restart -> answered again, rise 2): median {statistics.median(ups):.3f} s, "
          f"max {max(ups):.3f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"failover_s": downs, "failback_s": ups,
                                               "median": med, "max": worst, "goal": GOAL}))
    return 0 if worst <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
