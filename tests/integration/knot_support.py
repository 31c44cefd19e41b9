"""A real authoritative peer for the health tests: Debian's knotd serving one zone on chosen
loopback addresses, in the foreground, in a folder of the test's."""
from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import dns.rcode

from conftest import free_port

KNOTD = shutil.which("knotd") or "/usr/sbin/knotd"


class Knotd:
    """knotd serving zone @origin (text @zone) on @addrs at a free port; stop() ends it."""

    def __init__(self, workdir: Path, origin: str, zone: str,
                 addrs: tuple[str, ...] = ("127.0.0.1", "::1")):
        self.workdir = workdir
        self.origin = origin
        self.addrs = addrs
        self.port = free_port()
        for sub in ("run", "db", "zones"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)
        zonefile = workdir / f"{origin}zone"
        zonefile.write_text(zone)
        listen = ", ".join(f"{a}@{self.port}" for a in addrs)
        conf = workdir / "knot.conf"
        conf.write_text(f"""server:
    rundir: "{workdir / 'run'}"
    listen: [ {listen} ]
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: info
database:
    storage: "{workdir / 'db'}"
template:
  - id: default
    storage: "{workdir / 'zones'}"
    journal-content: none
    zonefile-sync: -1
zone:
  - domain: {origin}
    file: "{zonefile}"
""")
        self.log = open(workdir / "knotd.log", "wb")
        self.proc = subprocess.Popen([KNOTD, "-c", str(conf)], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        q = dns.message.make_query(self.origin, "SOA")
        for addr in self.addrs:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError("knotd exited: " + self.log_text())
                try:
                    r = dns.query.udp(q, addr, port=self.port, timeout=0.2)
                    if r.rcode() == dns.rcode.NOERROR and r.answer:
                        break
                except (dns.exception.Timeout, OSError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("knotd not ready: " + self.log_text())
                time.sleep(0.05)

    def log_text(self) -> str:
        self.log.flush()
        return (self.workdir / "knotd.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()
