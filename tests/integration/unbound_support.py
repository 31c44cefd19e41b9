"""A real Unbound on 127.0.0.1 that answers from its own local data: the upstream of the
forwarder tests that need no namespaces or hierarchy (the lab in fwdlab.py has those)."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

import dns.query
import dns.rcode

from conftest import free_port, query, wait_for

UNBOUND = shutil.which("unbound") or "/usr/sbin/unbound"

CONF = """server:
  interface: 127.0.0.1@{port}
  access-control: 127.0.0.0/8 allow
  do-daemonize: no
  chroot: ""
  username: ""
  directory: "{dir}"
  pidfile: "{dir}/unbound.pid"
  use-syslog: no
  logfile: "{dir}/unbound.log"
  verbosity: 1
  num-threads: 1
  do-ip6: no
  module-config: "iterator"
{local}
remote-control:
  control-enable: no
"""


class LocalUnbound:
    """Unbound answering @local (unbound.conf lines: local-zone, local-data) on a free port,
    ready when @ready_name answers NOERROR. stop() ends it (SIGTERM, then SIGKILL)."""

    def __init__(self, workdir: Path, local: list[str], ready_name: str):
        self.dir = workdir / "unbound"
        self.dir.mkdir(exist_ok=True)
        self.port = free_port()
        conf = self.dir / "unbound.conf"
        conf.write_text(CONF.format(port=self.port, dir=self.dir,
                                    local="\n".join(f"  {line}" for line in local)))
        self.log = open(self.dir / "stdout.log", "ab")
        self.proc = subprocess.Popen([UNBOUND, "-d", "-c", str(conf)], stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.ready_name = ready_name
        wait_for(self._answers, 20, what=f"unbound on 127.0.0.1:{self.port}")

    def _answers(self) -> bool:
        try:
            r = dns.query.udp(query(self.ready_name, "A"), "127.0.0.1", port=self.port,
                              timeout=0.3)
            return r.rcode() == dns.rcode.NOERROR
        except Exception:
            return False

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()
