"""The failover lab for the caching forwarder: network namespaces, veth exit links, a real
Unbound per link resolving a private hierarchy served by knotd, faults that break and heal one
link, and the forwarders under test (dnsdist, Unbound as a forwarder, steerd).

Needs root, iproute2, nftables, unbound, knotd (scripts/setup-deps.sh test installs them).
Every packet stays inside the lab's namespaces: no veth reaches the host's namespace, and the
helpers here never send from the host's namespace (sockets are made inside a lab namespace).

    with Lab(links=2) as lab:
        fwd = lab.start_forwarder("dnsdist")
        r = lab.query(lab.client, SERVICE, "www.example.test", "A")
        lab.fault("drop", 1)          # link 1 silently drops everything from the node
        lab.heal()                    # undo every fault applied
        with lab.sniff(1) as sn:      # what the forwarder sends over link 1
            ...
        ports = {p[2] for p in sn.packets}
        lab.forge(1, port, reply)     # a datagram from 10.53.1.53:53 arriving over link 1
        fwd.stop()

Topology (N = 1..links; every name below is inside the lab's own namespaces):

    client ns         node ns (forwarder)          upN ns (Unbound)          hier ns (knotd x3)
    10.0.0.2/24 ---- 10.0.0.1/24 + 10.0.0.53 (service)
    10.0.1.2/24 ---- 10.0.1.1/24 (a client outside the allowed network)
                     linkN 10.1.N.1/24 ------ node 10.1.N.2/24
                                              lo 10.53.N.53 (Unbound)
                                              hier 10.99.N.2/24 ------- upN 10.99.N.1/24
                                                                         lo 10.255.0.1 root
                                                                            10.255.0.2 test.
                                                                            10.255.0.3 example.test.

The node reaches upstream N only over link N: a /32 route per upstream in the main table, and
`ip rule from 10.1.N.1 lookup 100+N` (default via link N), so a query sent from link N's source
address leaves on link N whatever its destination.

Names (hierarchy: root -> test. -> example.test.):
  www.example.test A, c0..c199.example.test A (TTL 3600: the "cached" names),
  t0..t49.example.test A (TTL 5), *.bust.example.test A (TTL 60, wildcard: cache-busting),
  probe.example.test and *.probe.example.test A (TTL 1: probe names),
  big.example.test TXT (12 strings, about 3 kB: too big for UDP, it takes TCP),
  *.whichlink.lab TXT "linkN" (TTL 0): answered by upstream N itself (Unbound local-data), so
  the answer says which link carried the query.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

SERVICE = "10.0.0.53"  # the service address clients ask
NODE_CLIENT = "10.0.0.1"  # the node's unicast address on the client network
CLIENT = "10.0.0.2"  # a client inside the allowed network
CLIENT_NET = "10.0.0.0/24"
OUTSIDER = "10.0.1.2"  # a client outside it (for allow-recursion tests)
ROOT_ADDR, TLD_ADDR, ZONE_ADDR = "10.255.0.1", "10.255.0.2", "10.255.0.3"
ZONE = "example.test"
CACHED_NAMES = [f"c{i}.{ZONE}" for i in range(200)]
TTL5_NAMES = [f"t{i}.{ZONE}" for i in range(50)]
BUST_SUFFIX = f"bust.{ZONE}"
PROBE_SUFFIX = f"probe.{ZONE}"
WHICH_SUFFIX = "whichlink.lab"
BIG_NAME = f"big.{ZONE}"
# The strings of BIG_NAME's TXT: 12 x 250 bytes, distinct so a partial answer shows.
BIG_TXT = [f"big{i:02d}-" + "abcdefghij" * 24 + "0123" for i in range(12)]

FAULTS = ("link-down", "carrier-down", "drop", "kill", "cutoff", "loss30")
FAULT_HELP = {
    "link-down": "the node's side of the link set admin down (routes over it vanish)",
    "carrier-down": "the far side set down: the node's side shows NO-CARRIER, routes stay",
    "drop": "nft in the upstream namespace silently drops everything from the node",
    "kill": "the link's Unbound killed with SIGKILL (restarted on heal)",
    "cutoff": "the link's Unbound alive but cut off from the hierarchy (silent drop at hier)",
    "loss30": "nft in the upstream namespace drops 30 % of packets from the node at random",
}

UNBOUND = shutil.which("unbound") or "/usr/sbin/unbound"
UNBOUND_CONTROL = shutil.which("unbound-control") or "/usr/sbin/unbound-control"
KNOTD = shutil.which("knotd") or "/usr/sbin/knotd"
DNSDIST = shutil.which("dnsdist") or "/usr/bin/dnsdist"
NFT = shutil.which("nft") or "/usr/sbin/nft"


def link_source(n: int) -> str:
    """The node's own address on link n (the source of everything sent over it)."""
    return f"10.1.{n}.1"


def link_peer(n: int) -> str:
    return f"10.1.{n}.2"


def upstream_addr(n: int) -> str:
    """The address of link n's Unbound."""
    return f"10.53.{n}.53"


def missing_tools() -> list[str]:
    """The programs the lab needs that are not installed."""
    need = {"ip": shutil.which("ip"), "nft": NFT, "unbound": UNBOUND, "knotd": KNOTD,
            "unbound-control": UNBOUND_CONTROL}
    return [k for k, v in need.items() if not v or not os.path.exists(v)]


def lab_for_tests(tmp_path_factory, links: int = 2):
    """A built lab for a module-scoped pytest fixture (`yield from` it): skipped without
    root, an error when a program is missing, closed (namespaces removed) at the end."""
    import pytest
    if os.geteuid() != 0:
        pytest.skip("the lab needs root (network namespaces)")
    missing = missing_tools()
    if missing:
        pytest.fail(f"missing {', '.join(missing)} (scripts/setup-deps.sh test installs them)")
    lab = Lab(links=links, workdir=tmp_path_factory.mktemp("fwdlab"))
    try:
        lab.build()
        yield lab
    finally:
        lab.close()


def run(*argv: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess:
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {res.returncode}: {res.stderr.strip()}")
    return res


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    # os.setns is Python 3.12; Debian 12 has 3.11.
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def ns_socket(ns: str, kind: int = socket.SOCK_DGRAM, family: int = socket.AF_INET,
              proto: int = 0) -> socket.socket:
    """A socket made inside network namespace @ns (it stays there: only this thread switches
    namespaces, and only for the socket() call)."""
    here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        _setns(there)
        try:
            return socket.socket(family, kind, proto)
        finally:
            _setns(here)
    finally:
        os.close(here)
        os.close(there)


def ns_http_get(ns: str, port: int, path: str = "/metrics") -> bytes:
    """The whole HTTP/1.0 response (head and body) to GET @path from 127.0.0.1:@port inside
    network namespace @ns, read to EOF."""
    s = ns_socket(ns, socket.SOCK_STREAM)
    try:
        s.settimeout(5)
        s.connect(("127.0.0.1", port))
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    finally:
        s.close()
    return data


def query(ns: str, server: str, qname: str, rdtype: str = "A", *, source: str | None = None,
          timeout: float = 1.0, tcp: bool = False, rd: bool = True,
          port: int = 53) -> dns.message.Message:
    """One query from namespace @ns (optionally from @source) to @server. Raises
    dns.exception.Timeout or OSError (e.g. ENETUNREACH, ECONNREFUSED) on failure."""
    q = dns.message.make_query(qname, rdtype)
    if not rd:
        q.flags &= ~dns.flags.RD
    s = ns_socket(ns, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM)
    try:
        if source:
            s.bind((source, 0))
        if tcp:
            s.settimeout(timeout)
            s.connect((server, port))
            return dns.query.tcp(q, server, timeout=timeout, port=port, sock=s)
        # Connected, so an ICMP port unreachable comes back as ECONNREFUSED at once.
        s.connect((server, port))
        s.setblocking(False)
        return dns.query.udp(q, server, timeout=timeout, port=port, sock=s)
    finally:
        s.close()


def answers(ns: str, server: str, qname: str, rdtype: str = "A", **kw) -> str | None:
    """The rcode name of the answer, or None when none came (timeout, unreachable, refused)."""
    try:
        return dns.rcode.to_text(query(ns, server, qname, rdtype, **kw).rcode())
    except (dns.exception.Timeout, OSError):
        return None


def which_link(ns: str, server: str, nonce: str, **kw) -> str | None:
    """The TXT of <nonce>.whichlink.lab through @server ("link1", ...), or None."""
    try:
        r = query(ns, server, f"{nonce}.{WHICH_SUFFIX}", "TXT", **kw)
    except (dns.exception.Timeout, OSError):
        return None
    for rrset in r.answer:
        if rrset.rdtype == dns.rdatatype.TXT:
            for rd in rrset:
                return b"".join(rd.strings).decode()
    return None


def wait_for(what: str, fn, timeout: float = 20.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(interval)


# --------------------------------------------------------------------------------------------
# Zone data

SOA = "3600 600 86400 30"  # negative TTL 30 s


def root_zone() -> str:
    return f"""$TTL 86400
. SOA rootns. hostmaster.lab. 1 {SOA}
. NS rootns.
rootns. A {ROOT_ADDR}
test. NS ns.test.
ns.test. A {TLD_ADDR}
"""


def tld_zone() -> str:
    return f"""$TTL 86400
test. SOA ns.test. hostmaster.test. 1 {SOA}
test. NS ns.test.
ns.test. A {TLD_ADDR}
{ZONE}. NS ns.{ZONE}.
ns.{ZONE}. A {ZONE_ADDR}
"""


def leaf_zone() -> str:
    lines = ["$TTL 3600", f"{ZONE}. SOA ns.{ZONE}. hostmaster.{ZONE}. 1 {SOA}",
             f"{ZONE}. NS ns.{ZONE}.", f"ns.{ZONE}. A {ZONE_ADDR}", f"www.{ZONE}. A 192.0.2.80"]
    lines += [f"{n}. 3600 A 192.0.2.{i % 250 + 1}" for i, n in enumerate(CACHED_NAMES)]
    lines += [f"{n}. 5 A 198.51.100.{i % 250 + 1}" for i, n in enumerate(TTL5_NAMES)]
    lines += [f"*.{BUST_SUFFIX}. 60 A 203.0.113.1", f"{PROBE_SUFFIX}. 1 A 203.0.113.2",
              f"*.{PROBE_SUFFIX}. 1 A 203.0.113.2",
              f"{BIG_NAME}. 3600 TXT " + " ".join(f'"{t}"' for t in BIG_TXT)]
    return "\n".join(lines) + "\n"


KNOT_CONF = """server:
    rundir: "{dir}"
    listen: {addr}@53
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: warning
database:
    storage: "{dir}/db"
template:
  - id: default
    storage: "{dir}"
    journal-content: none
    zonefile-sync: -1
zone:
  - domain: "{origin}"
    file: "{dir}/zone"
"""

UPSTREAM_CONF = """server:
  interface: {addr}
  port: 53
  access-control: 10.0.0.0/8 allow
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
  qname-minimisation: no
  root-hints: "{dir}/root.hints"
  # .test is one of Unbound's default local zones (RFC 6761): let it be resolved
  local-zone: "test." nodefault
  local-zone: "{which}." redirect
  local-data: '{which}. 0 IN TXT "link{n}"'
  # A hierarchy server that timed out is probed again soon, not after 15 minutes
  infra-keep-probing: yes
remote-control:
  control-enable: yes
  control-interface: "{dir}/unbound.ctl"
  control-use-cert: no
"""


class Sniffer:
    """The DNS queries (UDP, IPv4) that reach an upstream namespace from the node, seen on
    the wire before any fault drops them: a raw packet socket on the upstream's side of the
    link, read by a thread. Use as a context manager, or start()/stop(); then .packets is a
    list of (time, src, sport, dst, dport, txid, question bytes as on the wire)."""

    ETH_P_IP = 0x0800

    def __init__(self, ns: str, ifname: str = "node"):
        self.ns = ns
        self.ifname = ifname
        self.packets: list[tuple[float, str, int, str, int, int, bytes]] = []
        self._stop = False
        self._sock: socket.socket | None = None
        self._thread = None

    def __enter__(self) -> "Sniffer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        import threading
        self._sock = ns_socket(self.ns, socket.SOCK_RAW, socket.AF_PACKET)
        self._sock.bind((self.ifname, self.ETH_P_IP))
        self._sock.settimeout(0.05)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop = True
        if self._thread:
            self._thread.join()
            self._thread = None
        if self._sock:
            self._sock.close()
            self._sock = None

    def _run(self) -> None:
        while not self._stop:
            try:
                frame, addr = self._sock.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                return
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            self._parse(frame[14:])

    def _parse(self, ip: bytes) -> None:
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 17:
            return
        ihl = (ip[0] & 0x0F) * 4
        udp = ip[ihl:]
        if len(udp) < 8 + 12:
            return
        sport, dport = int.from_bytes(udp[0:2], "big"), int.from_bytes(udp[2:4], "big")
        dnsmsg = udp[8:]
        if dport != 53 or dnsmsg[2] & 0x80:
            return
        end = 12
        while end < len(dnsmsg) and dnsmsg[end] != 0 and dnsmsg[end] < 64:
            end += 1 + dnsmsg[end]
        self.packets.append((time.monotonic(), socket.inet_ntoa(ip[12:16]), sport,
                             socket.inet_ntoa(ip[16:20]), dport,
                             int.from_bytes(dnsmsg[0:2], "big"), bytes(dnsmsg[12:end + 5])))


class Proc:
    """A process started in a namespace (ip netns exec execs, so the PID is the program's)."""

    def __init__(self, name: str, argv: list[str], ns: str, log: Path):
        self.name = name
        self.log_path = log
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        self._log.flush()
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 10) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._log.closed:
            self._log.close()


class Lab:
    """The lab: built on __enter__ (or build()), torn down on __exit__ (or close()), also when
    building failed half-way. @links exit links (2 or 3); @workdir keeps configs and logs (else
    a temporary folder, removed at close unless @keep)."""

    def __init__(self, links: int = 2, workdir: Path | str | None = None, keep: bool = False):
        if links not in (1, 2, 3):
            raise ValueError("links: 1 to 3")
        self.links = links
        tag = uuid.uuid4().hex[:6]
        self.tag = tag
        self.client = f"fl{tag}-client"
        self.node = f"fl{tag}-node"
        self.hier = f"fl{tag}-hier"
        self.up = {n: f"fl{tag}-up{n}" for n in range(1, links + 1)}
        self._tmp = None
        if workdir is None:
            self._tmp = tempfile.mkdtemp(prefix="fwdlab-")
            workdir = self._tmp
        self.dir = Path(workdir)
        self.keep = keep
        self.namespaces: list[str] = []
        self.knot: list[Proc] = []
        self.unbound: dict[int, Proc] = {}
        self.forwarders: list[Forwarder] = []
        self.active: list[tuple[str, int]] = []  # faults applied and not healed

    # ---- building and tearing down ----------------------------------------------------------

    def __enter__(self) -> "Lab":
        self.build()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def build(self) -> None:
        try:
            self._namespaces()
            self._wire()
            self._hierarchy()
            for n in self.up:
                self._start_unbound(n)
            for n in self.up:
                self.wait_upstream(n)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop every process the lab started (by PID), then delete its namespaces."""
        for f in list(self.forwarders):
            f.stop()
        for p in list(self.unbound.values()) + self.knot:
            p.stop()
        for ns in reversed(self.namespaces):
            run("ip", "netns", "del", ns, check=False)
        self.namespaces.clear()
        if self._tmp and not self.keep:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def ip(self, ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run("ip", "-n", ns, *args, check=check)

    def nft(self, ns: str, script: str) -> None:
        res = subprocess.run(["ip", "netns", "exec", ns, NFT, "-f", "-"], input=script,
                             capture_output=True, text=True, timeout=20)
        if res.returncode != 0:
            raise RuntimeError(f"nft in {ns}: {res.stderr.strip()}\n{script}")

    def _namespaces(self) -> None:
        for ns in (self.client, self.node, self.hier, *self.up.values()):
            run("ip", "netns", "add", ns)
            self.namespaces.append(ns)
            self.ip(ns, "link", "set", "lo", "up")

    def _veth(self, ns_a: str, a: str, ns_b: str, b: str) -> None:
        # Made inside ns_a with its peer moved to ns_b at once: it never exists in the host's.
        self.ip(ns_a, "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns_b)
        self.ip(ns_a, "link", "set", a, "up")
        self.ip(ns_b, "link", "set", b, "up")

    def _wire(self) -> None:
        c, nd, h = self.client, self.node, self.hier
        self._veth(c, "node", nd, "client")
        self.ip(c, "addr", "add", f"{CLIENT}/24", "dev", "node")
        self.ip(c, "addr", "add", f"{OUTSIDER}/24", "dev", "node")
        self.ip(nd, "addr", "add", f"{NODE_CLIENT}/24", "dev", "client")
        self.ip(nd, "addr", "add", "10.0.1.1/24", "dev", "client")
        self.ip(nd, "addr", "add", f"{SERVICE}/32", "dev", "lo")
        for n, up in self.up.items():
            self._veth(nd, f"link{n}", up, "node")
            self.ip(nd, "addr", "add", f"{link_source(n)}/24", "dev", f"link{n}")
            self.ip(up, "addr", "add", f"{link_peer(n)}/24", "dev", "node")
            self.ip(up, "addr", "add", f"{upstream_addr(n)}/32", "dev", "lo")
            self.ip(nd, "rule", "add", "from", link_source(n), "lookup", str(100 + n),
                    "priority", str(100 + n))
            self._link_routes(n)
            self._veth(up, "hier", h, f"up{n}")
            self.ip(up, "addr", "add", f"10.99.{n}.2/24", "dev", "hier")
            self.ip(h, "addr", "add", f"10.99.{n}.1/24", "dev", f"up{n}")
            self.ip(up, "route", "add", "10.255.0.0/24", "via", f"10.99.{n}.1")
            # Before any fault's chain (priority 0): counts what the node sent, dropped or not.
            self.nft(up, 'table inet fwdlab_count {\n chain in { type filter hook input '
                     'priority -10; iifname "node" udp dport 53 counter; '
                     'iifname "node" tcp dport 53 counter; }\n}\n')
        for a in (ROOT_ADDR, TLD_ADDR, ZONE_ADDR):
            self.ip(h, "addr", "add", f"{a}/32", "dev", "lo")

    def _link_routes(self, n: int) -> None:
        """Routes over link n (an admin-down link loses them; heal puts them back)."""
        nd = self.node
        self.ip(nd, "route", "replace", f"{upstream_addr(n)}/32", "via", link_peer(n), "dev",
                f"link{n}", "src", link_source(n))
        self.ip(nd, "route", "replace", "default", "via", link_peer(n), "dev", f"link{n}",
                "table", str(100 + n))

    def _hierarchy(self) -> None:
        for name, origin, addr, text in ((".", ".", ROOT_ADDR, root_zone()),
                                         ("test", "test.", TLD_ADDR, tld_zone()),
                                         (ZONE, f"{ZONE}.", ZONE_ADDR, leaf_zone())):
            d = self.dir / f"knot-{name.strip('.') or 'root'}"
            (d / "db").mkdir(parents=True, exist_ok=True)
            (d / "zone").write_text(text)
            (d / "knot.conf").write_text(KNOT_CONF.format(dir=d, addr=addr, origin=origin))
            self.knot.append(Proc(f"knotd {origin}", [KNOTD, "-c", str(d / "knot.conf")],
                                  self.hier, d / "knotd.log"))
        for p, (origin, addr) in zip(self.knot, ((".", ROOT_ADDR), ("test.", TLD_ADDR),
                                                 (f"{ZONE}.", ZONE_ADDR))):
            def up(p=p, origin=origin, addr=addr):
                if not p.alive():
                    raise RuntimeError(f"{p.name} exited: {p.log()}")
                return answers(self.hier, addr, origin, "SOA", timeout=0.3) == "NOERROR"
            wait_for(p.name, up)

    def _start_unbound(self, n: int) -> None:
        d = self.dir / f"unbound-up{n}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "root.hints").write_text(f". 3600000 NS rootns.\nrootns. 3600000 A {ROOT_ADDR}\n")
        conf = d / "unbound.conf"
        conf.write_text(UPSTREAM_CONF.format(addr=upstream_addr(n), dir=d, n=n,
                                             which=WHICH_SUFFIX))
        self.unbound[n] = Proc(f"unbound link{n}", [UNBOUND, "-d", "-c", str(conf)], self.up[n],
                               d / "stderr.log")

    def wait_upstream(self, n: int, timeout: float = 20) -> None:
        """Until link n's Unbound resolves through the hierarchy from the node, sent from the
        link's source address."""
        p = self.unbound[n]

        def up():
            if not p.alive():
                raise RuntimeError(f"{p.name} exited: {p.log()}")
            return answers(self.node, upstream_addr(n), f"www.{ZONE}", source=link_source(n),
                           timeout=0.5) == "NOERROR"
        wait_for(f"unbound on link{n}", up, timeout)

    def unbound_control(self, n: int, *args: str) -> str:
        conf = self.dir / f"unbound-up{n}" / "unbound.conf"
        return run("ip", "netns", "exec", self.up[n], UNBOUND_CONTROL, "-c", str(conf),
                   *args).stdout

    # ---- faults ----------------------------------------------------------------------------

    def fault(self, kind: str, n: int = 1) -> None:
        """Break link n the way @kind says (FAULTS, FAULT_HELP). Faults on several links (or
        of several kinds on one link) may be active at once; heal() undoes them. Applying an
        active fault again raises ValueError."""
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r} (one of {', '.join(FAULTS)})")
        if (kind, n) in self.active:
            raise ValueError(f"{kind} is already applied to link {n}")
        up = self.up[n]
        table = f"fwdlab_{kind.replace('-', '_')}_{n}"
        if kind == "link-down":
            self.ip(self.node, "link", "set", f"link{n}", "down")
        elif kind == "carrier-down":
            self.ip(up, "link", "set", "node", "down")
        elif kind == "drop":
            self.nft(up, f'table inet {table} {{\n chain in {{ type filter hook input '
                     'priority 0; iifname "node" drop; }\n}\n')
        elif kind == "loss30":
            self.nft(up, f'table inet {table} {{\n chain in {{ type filter hook input '
                     'priority 0; iifname "node" numgen random mod 100 < 30 drop; }\n}\n')
        elif kind == "kill":
            self.unbound[n].kill()
        elif kind == "cutoff":
            self.nft(self.hier, f'table inet {table} {{\n chain in {{ type filter hook input '
                     f'priority 0; iifname "up{n}" drop; }}\n}}\n')
        self.active.append((kind, n))

    def heal(self, links: list[int] | None = None, wait: bool = True) -> None:
        """Undo the faults applied to @links (default: all), newest first; with @wait, return
        once every healed link's Unbound resolves again from the node."""
        healed = set()
        for kind, n in list(reversed(self.active)):
            if links is not None and n not in links:
                continue
            self.active.remove((kind, n))
            up = self.up[n]
            table = f"fwdlab_{kind.replace('-', '_')}_{n}"
            if kind == "link-down":
                self.ip(self.node, "link", "set", f"link{n}", "up")
                self._link_routes(n)
            elif kind == "carrier-down":
                self.ip(up, "link", "set", "node", "up")
            elif kind in ("drop", "loss30"):
                self.nft(up, f"delete table inet {table}\n")
            elif kind == "kill":
                self.unbound[n].stop()
                self._start_unbound(n)
            elif kind == "cutoff":
                self.nft(self.hier, f"delete table inet {table}\n")
                # Unbound backs off from servers that timed out; the lab heals the path, not
                # Unbound's memory of it, so forget it (the forwarder's failback is measured).
                self.unbound_control(n, "flush_infra", "all")
                self.unbound_control(n, "flush_bogus")
                self.unbound_control(n, "flush_requestlist")
            healed.add(n)
        if wait:
            for n in sorted(healed):
                self.wait_upstream(n)

    def sniff(self, n: int) -> Sniffer:
        """A Sniffer of the DNS queries reaching link n's upstream from the node (context
        manager): the source ports, IDs and questions a forwarder sends over link n."""
        return Sniffer(self.up[n])

    def forge(self, n: int, dport: int, payload: bytes, *, src: str | None = None,
              sport: int = 53, dst: str | None = None) -> None:
        """Send one UDP datagram from link n's upstream namespace to the node (@dst, default
        link n's source address, port @dport) that claims to come from @src:@sport (default
        the upstream's address and port 53): a forged reply arriving over the real link."""
        src = src or upstream_addr(n)
        dst = dst or link_source(n)
        udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload  # no checksum
        hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                          socket.inet_aton(src), socket.inet_aton(dst))
        csum = sum(struct.unpack("!10H", hdr))
        while csum >> 16:
            csum = (csum & 0xFFFF) + (csum >> 16)
        hdr = hdr[:10] + struct.pack("!H", ~csum & 0xFFFF) + hdr[12:]
        s = ns_socket(self.up[n], socket.SOCK_RAW, socket.AF_INET, socket.IPPROTO_RAW)
        try:
            s.sendto(hdr + udp, (dst, 0))
        finally:
            s.close()

    def upstream_queries(self, n: int) -> tuple[int, int]:
        """DNS packets (UDP, TCP segments) that reached link n's upstream namespace from the
        node since the lab was built, counted before any fault drops them."""
        out = subprocess.run(["ip", "netns", "exec", self.up[n], NFT, "-j", "list", "table",
                              "inet", "fwdlab_count"], capture_output=True, text=True,
                             timeout=20, check=True).stdout
        counts = []
        for item in json.loads(out)["nftables"]:
            rule = item.get("rule")
            if rule:
                for e in rule["expr"]:
                    if "counter" in e:
                        counts.append(e["counter"]["packets"])
        return counts[0], counts[1]

    def link_state(self, n: int) -> str:
        """The node side's `ip link` flags of link n, e.g. "NO-CARRIER,BROADCAST,...,UP"."""
        out = self.ip(self.node, "-o", "link", "show", f"link{n}").stdout
        return out.split("<", 1)[1].split(">", 1)[0] if "<" in out else out

    # ---- forwarders ------------------------------------------------------------------------

    def start_forwarder(self, kind: str, **kw) -> "Forwarder":
        """Start a forwarder under test in the node namespace (KINDS) and wait until it
        answers the client."""
        f = KINDS[kind](self, **kw)
        self.forwarders.append(f)
        try:
            f.start()
            f.wait_ready()
        except BaseException:
            f.stop()
            raise
        return f


class Forwarder:
    """A forwarder under test in the node namespace, listening on SERVICE:53, forwarding to
    the links' Unbounds in preference order (link 1 first)."""

    kind = "?"

    def __init__(self, lab: Lab, **kw):
        self.lab = lab
        self.opts = kw
        self.proc: Proc | None = None
        # One folder per instance: its config, log and control socket are its own.
        self.dir = lab.dir / f"fwd-{self.kind}"
        k = 1
        while self.dir.exists():
            k += 1
            self.dir = lab.dir / f"fwd-{self.kind}-{k}"
        self.dir.mkdir(parents=True)

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        self.proc = Proc(self.kind, self.argv(), self.lab.node, self.dir / "log")

    def wait_ready(self, timeout: float = 20) -> None:
        def up():
            if not self.proc.alive():
                raise RuntimeError(f"{self.kind} exited: {self.proc.log()}")
            return answers(self.lab.client, SERVICE, f"www.{ZONE}", source=CLIENT,
                           timeout=0.5) == "NOERROR"
        wait_for(self.kind, up, timeout)

    def stop(self) -> None:
        if self.proc:
            self.proc.stop()
        if self in self.lab.forwarders:
            self.lab.forwarders.remove(self)


class Dnsdist(Forwarder):
    """dnsdist: firstAvailable over the links in order, default health checks (every 1 s,
    1 s timeout, down after 1 failure, up after 1 success, checkName a.root-servers.net), each
    backend sending from its link's source address, packet cache on."""

    kind = "dnsdist"

    def argv(self) -> list[str]:
        servers = "\n".join(
            f'newServer({{address="{upstream_addr(n)}:53", source="{link_source(n)}", '
            f'order={n}, name="link{n}"}})' for n in self.lab.up)
        conf = self.dir / "dnsdist.conf"
        conf.write_text(f"""setLocal("{SERVICE}:53")
setACL({{"{CLIENT_NET}"}})
setServerPolicy(firstAvailable)
{servers}
pc = newPacketCache(100000)
getPool(""):setCache(pc)
""")
        return [DNSDIST, "--supervised", "--disable-syslog", "-C", str(conf)]


class UnboundForwarder(Forwarder):
    """Unbound as a forwarder: one forward-zone "." listing the links' Unbounds in order
    (Unbound picks among them by RTT; it does not keep the order), cache on."""

    kind = "unbound"

    def argv(self) -> list[str]:
        addrs = "\n".join(f"  forward-addr: {upstream_addr(n)}" for n in self.lab.up)
        conf = self.dir / "unbound.conf"
        conf.write_text(f"""server:
  interface: {SERVICE}
  port: 53
  access-control: {CLIENT_NET} allow
  do-daemonize: no
  chroot: ""
  username: ""
  directory: "{self.dir}"
  pidfile: "{self.dir}/unbound.pid"
  use-syslog: no
  logfile: "{self.dir}/unbound.log"
  verbosity: 1
  num-threads: 1
  do-ip6: no
  module-config: "iterator"
  local-zone: "test." nodefault
remote-control:
  control-enable: no
forward-zone:
  name: "."
{addrs}
""")
        return [UNBOUND, "-d", "-c", str(conf)]


# Lines the sanitizers print when they find something (as tests/integration/conftest.py).
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                     "WARNING: AddressSanitizer", "runtime error:", "UndefinedBehaviorSanitizer")


class Steerd(Forwarder):
    """steerd in quick mode: --forward UPSTREAM@SOURCE per link in order and
    --allow-recursion for the client network. @steerd: the binary (default $STEERD or
    build/src/daemon/steerd); @args: more options.

    @config: run from a YAML file instead (the configuration contract's `forward:` section,
    see steerd_yaml()); a dict of steerd_yaml()'s keyword arguments, e.g.
    {"cache": "{ max-size: 16M }"}. @zones: {origin: zone text} served as well (quick mode:
    --zone, config: zones:)."""

    kind = "steerd"

    def binary(self) -> str:
        root = Path(__file__).resolve().parents[2]
        return os.path.abspath(self.opts.get("steerd") or os.environ.get("STEERD") or
                               str(root / "build" / "src" / "daemon" / "steerd"))

    def steerctl(self) -> str:
        """$STEERCTL, else the steerctl of the build that holds the steerd binary."""
        return os.path.abspath(os.environ.get("STEERCTL") or
                               Path(self.binary()).resolve().parents[2] / "tools" / "steerctl")

    @property
    def socket(self) -> Path:
        return self.dir / "steerd.sock"

    def zone_files(self) -> dict[str, Path]:
        out = {}
        for origin, text in (self.opts.get("zones") or {}).items():
            path = self.dir / f"{origin.strip('.')}.zone"
            path.write_text(text)
            out[origin.strip(".")] = path
        return out

    def argv(self) -> list[str]:
        zones = self.zone_files()
        if self.opts.get("config") is not None:
            conf = self.dir / "steerd.yaml"
            conf.write_text(steerd_yaml(self.lab, control_socket=self.socket, zones=zones,
                                        **self.opts["config"]))
            return [self.binary(), "-c", str(conf)] + list(self.opts.get("args", []))
        argv = [self.binary(), "--listen", f"{SERVICE}:53", "--workers", "1"]
        for n in self.lab.up:
            argv += ["--forward", f"{upstream_addr(n)}@{link_source(n)}"]
        for origin, path in zones.items():
            argv += ["--zone", f"{origin}={path}"]
        argv += ["--allow-recursion", CLIENT_NET, "--control-socket", str(self.socket)]
        return argv + list(self.opts.get("args", []))

    def ctl(self, *args: str, timeout: float = 10) -> dict:
        """`steerctl --json ARGS` against this steerd: the reply's "data"."""
        res = subprocess.run([self.steerctl(), "-s", str(self.socket), "--json", "-t",
                              str(timeout), *args], capture_output=True, text=True,
                             timeout=timeout + 5)
        if res.returncode != 0:
            raise RuntimeError(f"steerctl {' '.join(args)}: exit {res.returncode}: "
                               f"{res.stderr.strip() or res.stdout.strip()}")
        doc = json.loads(res.stdout)
        if not doc.get("ok"):
            raise RuntimeError(f"steerctl {' '.join(args)}: {doc}")
        return doc["data"]

    # Every upstream state change is logged once: "upstream NAME (ADDR): FROM -> TO: reason".
    STATE_LINE = re.compile(r"^(\S+) steerd\[\w+\]: upstream \S+ \(([^)]+)\): (\S+) -> (\S+): ")

    def state_changes(self, addr: str) -> list[tuple[float, str, str]]:
        """(wall-clock time, from, to) of every state change steerd logged for the upstream
        at @addr ("10.53.1.53"), oldest first."""
        out = []
        for line in self.full_log().splitlines():
            m = self.STATE_LINE.match(line)
            if m and m.group(2).split(":")[0] == addr:  # "10.53.1.53" or "10.53.1.53:53"
                out.append((datetime.datetime.fromisoformat(m.group(1)).timestamp(),
                            m.group(3), m.group(4)))
        return out

    def full_log(self) -> str:
        try:
            return self.proc.log_path.read_text(errors="replace")
        except (OSError, AttributeError):
            return ""

    def stop_checked(self) -> list[str]:
        """Stop (SIGTERM) and say what was wrong: a crash before the stop, an exit status
        other than 0, a sanitizer report in the log. Empty: a clean run."""
        problems = []
        if self.proc and not self.proc.alive():
            problems.append(f"steerd exited on its own ({self.proc.proc.returncode})")
        self.stop()
        if self.proc and self.proc.proc.returncode not in (0, None) and not problems:
            problems.append(f"steerd exit status {self.proc.proc.returncode}")
        log = self.full_log()
        problems += [f"sanitizer: {m}" for m in SANITIZER_MARKERS if m in log]
        if problems:
            problems.append(log[-3000:])
        return problems


def steerd_yaml(lab: Lab, *, control_socket: Path, zones: dict[str, Path] | None = None,
                cache: str | None = None, probe: str | None = None,
                retry_timeout: str | None = None, policy: str = "ordered",
                allow: list[str] | None = None, extra: str = "") -> str:
    """A steerd configuration per the forwarder's configuration contract: SERVICE:53, one
    worker, `forward:` with allow-recursion (@allow, default the client network), one group
    "." with the links' upstreams in order (name linkN, address, source), and the flow-style
    mappings @cache and @probe as written (e.g. "{ max-size: 16M }"), @retry_timeout
    ("400ms"). @zones: {origin: file}."""
    allow = [CLIENT_NET] if allow is None else allow
    lines = ["server:", f"  listen: [\"{SERVICE}:53\"]", "  workers: 1", "  tcp-workers: 1",
             f"  control-socket: {control_socket}"]
    if zones:
        lines.append("zones:")
        for origin, path in zones.items():
            lines += [f"  - domain: {origin}", f"    file: {path}"]
    lines += ["forward:", f"  allow-recursion: [{', '.join(allow)}]"]
    if cache:
        lines.append(f"  cache: {cache}")
    lines += ["  groups:", "    - domain: .", f"      policy: {policy}", "      upstreams:"]
    lines += [f"        - {{ name: link{n}, address: {upstream_addr(n)}, "
              f"source: {link_source(n)} }}" for n in lab.up]
    if probe:
        lines.append(f"      probe: {probe}")
    if retry_timeout:
        lines.append(f"      retry-timeout: {retry_timeout}")
    return "\n".join(lines) + "\n" + extra


KINDS: dict[str, type[Forwarder]] = {"dnsdist": Dnsdist, "unbound": UnboundForwarder,
                                     "steerd": Steerd}
