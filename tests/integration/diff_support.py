"""Support code for the differential test against Knot DNS (test_differential.py).

Three parts: running the two servers (knotd from Debian, steerd from the build), a
deterministic corpus of queries built from the zones in tests/data/zones/diff, and the
comparison of two responses as header fields plus sets of RRsets per section.

Everything here is plain dnspython and sockets so the module also runs outside pytest:
`/usr/bin/python3 tests/integration/diff_support.py [STEERD]` prints every difference.
"""

from __future__ import annotations

import collections
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.zone

ROOT = Path(__file__).resolve().parents[2]
ZONE_DIR = ROOT / "tests" / "data" / "zones" / "diff"

# (origin, file) of every zone loaded into both servers.
ZONES = [
    ("diff.test.", "diff.test.zone"),
    ("child.diff.test.", "child.diff.test.zone"),
    ("other.test.", "other.test.zone"),
    ("2.0.192.in-addr.arpa.", "2.0.192.in-addr.arpa.zone"),
]

# Query types asked at every name: every type present in the zones, some present nowhere
# (NSEC3PARAM, NULL, DNAME, TYPE1234) and ANY.
QTYPES = [
    "A", "NS", "CNAME", "SOA", "PTR", "HINFO", "MX", "TXT", "AAAA", "TYPE29", "SRV", "NAPTR",
    "DS", "RRSIG", "NSEC", "DNSKEY", "NSEC3", "NSEC3PARAM", "TLSA", "SVCB", "HTTPS", "CAA",
    "TYPE65280", "TYPE65281", "TYPE65282", "NULL", "DNAME", "TYPE1234", "ANY",
]

# Names outside every served zone: REFUSED. "xdiff.test." shares a suffix with a zone but not
# on a label boundary; "test." is the parent of two served zones.
OUTSIDE_NAMES = [
    ".", "test.", "com.", "example.net.", "xdiff.test.", "diff.test.example.",
    "in-addr.arpa.", "3.0.192.in-addr.arpa.", "www.example.test.",
]

REPLY_TIMEOUT = 2.0     # a loopback server that has not answered in 2 s will not answer
NO_REPLY_TIMEOUT = 0.3  # how long to wait where silence is expected (QR=1, malformed)


# ---------------------------------------------------------------------------------------------
# Servers


def free_port() -> int:
    """A port free for UDP and TCP on 127.0.0.1, below the ephemeral range (32768 and up) so
    the client sockets of tests running in parallel cannot take it meanwhile."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10000, 32768)
        try:
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                with socket.socket(socket.AF_INET, kind) as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port found")


# What the sanitizers print when they find something (the suite also runs on an ASan build).
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "UndefinedBehaviorSanitizer")


class Server:
    """A DNS server process on 127.0.0.1:port with one UDP socket and one TCP connection."""

    def __init__(self, name: str, argv: list[str], port: int, log_path: Path):
        self.name = name
        self.port = port
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._udp.connect(("127.0.0.1", port))
        self._tcp: socket.socket | None = None

    def log_tail(self, lines: int = 30) -> str:
        if not self._log.closed:
            self._log.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def wait_ready(self, zones: list[str], timeout: float = 30.0) -> None:
        """Wait until the SOA of every zone is answered authoritatively."""
        deadline = time.monotonic() + timeout
        pending = list(zones)
        while pending:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n"
                                   + self.log_tail())
            q = dns.message.make_query(pending[0], "SOA")
            wire = self.ask(q.to_wire(), tcp=False, timeout=0.2)
            if wire is not None:
                r = dns.message.from_wire(wire)
                if r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA and r.answer:
                    pending.pop(0)
                    continue
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} does not serve {pending[0]} after {timeout} s:\n"
                                   + self.log_tail())
            time.sleep(0.05)

    def ask(self, wire: bytes, tcp: bool, timeout: float = REPLY_TIMEOUT) -> bytes | None:
        """Send one query; the reply with the same id, or None when none came in time."""
        return self._ask_tcp(wire, timeout) if tcp else self._ask_udp(wire, timeout)

    def _ask_udp(self, wire: bytes, timeout: float) -> bytes | None:
        self._udp.setblocking(False)
        try:  # drop late replies to earlier queries that timed out
            while True:
                self._udp.recv(65535)
        except (BlockingIOError, ConnectionRefusedError):
            pass
        self._udp.setblocking(True)
        self._udp.send(wire)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._udp.settimeout(left)
            try:
                reply = self._udp.recv(65535)
            except (socket.timeout, ConnectionRefusedError):
                return None
            if len(wire) < 2 or reply[:2] == wire[:2]:
                return reply

    def _ask_tcp(self, wire: bytes, timeout: float) -> bytes | None:
        for attempt in range(2):
            try:
                if self._tcp is None:
                    self._tcp = socket.create_connection(("127.0.0.1", self.port), timeout)
                self._tcp.settimeout(timeout)
                self._tcp.sendall(struct.pack("!H", len(wire)) + wire)
                head = _recv_exact(self._tcp, 2)
                if head is None:
                    raise ConnectionResetError("closed")
                return _recv_exact(self._tcp, struct.unpack("!H", head)[0])
            except socket.timeout:
                self._close_tcp()
                return None
            except OSError:
                # The server may close a connection after an error reply; one fresh try.
                self._close_tcp()
                if attempt == 1:
                    return None
        return None

    def _close_tcp(self) -> None:
        if self._tcp is not None:
            self._tcp.close()
            self._tcp = None

    def stop(self) -> list[str]:
        """SIGTERM and wait; returns what went wrong: an exit status other than 0, a
        sanitizer report in the output."""
        self._close_tcp()
        self._udp.close()
        problems = []
        if self.proc.poll() is not None:
            problems.append(f"{self.name} had exited before the end of the test")
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                problems.append(f"{self.name} did not stop within 15 s of SIGTERM")
        if self.proc.returncode != 0 and not problems:
            problems.append(f"{self.name} exited with status {self.proc.returncode}")
        self._log.close()
        text = self.log_path.read_text(errors="replace")
        if any(marker in text for marker in SANITIZER_MARKERS):
            problems.append(f"sanitizer report in the output of {self.name}")
        if problems:
            problems.append("last lines of its output:\n" + self.log_tail())
        return problems


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def knot_config(workdir: Path, port: int) -> str:
    """knot.conf for the test zones: no signing, no journal, zone files read as they are.

    semantic-checks: off keeps Knot's mandatory checks (SOA, CNAME exclusivity, NS at the apex)
    but skips the DNSSEC consistency checks, which would reject the RRSIG/NSEC/NSEC3 records
    that the zones hold as plain data without being signed. identity is emptied so Knot does
    not answer CH TXT id.server, which steerd without an identity does not serve; version is
    steerd's own default, so both answer version.bind alike.
    """
    zones = "\n".join(
        f'  - domain: "{origin}"\n    file: "{ZONE_DIR / fname}"' for origin, fname in ZONES)
    return f"""server:
    rundir: "{workdir / 'run'}"
    listen: 127.0.0.1@{port}
    identity: ""
    version: "{steerd_version()}"
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
    semantic-checks: off
    journal-content: none
    zonefile-sync: -1
    zonefile-load: whole
zone:
{zones}
"""


def start_knotd(workdir: Path) -> Server:
    knotd = shutil.which("knotd") or "/usr/sbin/knotd"
    if not os.path.exists(knotd):
        raise RuntimeError("knotd not found: install the Debian package 'knot'")
    for sub in ("run", "db", "zones"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = workdir / "knot.conf"
    conf.write_text(knot_config(workdir, port))
    server = Server("knotd", [knotd, "-c", str(conf)], port, workdir / "knotd.log")
    server.wait_ready([origin for origin, _ in ZONES])
    return server


def find_steerd() -> Path | None:
    """$STEERD, else build/src/daemon/steerd when it was built."""
    env = os.environ.get("STEERD")
    if env:
        return Path(env)
    default = ROOT / "build" / "src" / "daemon" / "steerd"
    return default if default.exists() else None


def steerd_version() -> str:
    """What steerd answers to CH TXT version.bind by default: "Steer <its version>"."""
    binary = find_steerd()
    if binary is None:
        return ""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                         timeout=30).stdout.split()
    return "Steer " + out[1] if len(out) > 1 else ""


def start_steerd(binary: Path, workdir: Path) -> Server:
    port = free_port()
    argv = [str(binary), "--listen", f"127.0.0.1:{port}", "--workers", "1",
            "--tcp-workers", "1", "--control-socket", str(workdir / "steerd.sock")]
    for origin, fname in ZONES:
        argv += ["--zone", f"{origin.rstrip('.')}={ZONE_DIR / fname}"]
    server = Server("steerd", argv, port, workdir / "steerd.log")
    server.wait_ready([origin for origin, _ in ZONES])
    return server


# ---------------------------------------------------------------------------------------------
# Corpus


@dataclass
class Query:
    """One query of the corpus: its wire form and how to send it."""

    desc: str
    wire: bytes
    tcp: bool = False
    expect_reply: bool = True
    malformed: bool = False  # a packet whose question cannot be parsed
    qname: dns.name.Name | None = None
    qtype: int | None = None


def load_zone_names() -> tuple[list[dns.name.Name], list[dns.name.Name]]:
    """(every owner and empty non-terminal of every zone, the wildcard owners)."""
    names: set[dns.name.Name] = set()
    wildcards: set[dns.name.Name] = set()
    for origin, fname in ZONES:
        apex = dns.name.from_text(origin)
        zone = dns.zone.from_file(str(ZONE_DIR / fname), origin, relativize=False)
        for owner in zone.nodes:
            name = owner
            while name != apex and name.is_subdomain(apex):
                names.add(name)  # the owner and the empty non-terminals above it
                name = name.parent()
            names.add(apex)
            if owner.labels[0] == b"*":
                wildcards.add(owner)
    return sorted(names), sorted(wildcards)


def random_case(rng: random.Random, name: dns.name.Name) -> dns.name.Name:
    """The same name with letters randomly in upper case (DNS 0x20)."""
    labels = []
    for label in name.labels:
        labels.append(bytes(c ^ 0x20 if (0x61 <= c <= 0x7a or 0x41 <= c <= 0x5a)
                            and rng.random() < 0.5 else c for c in label))
    return dns.name.Name(labels)


def random_label(rng: random.Random) -> str:
    return "nx" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789")
                          for _ in range(rng.randint(1, 8)))


class CorpusBuilder:
    """Builds the corpus deterministically from one seed."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.queries: list[Query] = []
        self.next_id = 1

    def _id(self) -> int:
        qid = self.next_id
        self.next_id = self.next_id % 65535 + 1
        return qid

    def add(self, name: dns.name.Name | str, qtype: str | int, *, tcp: bool | None = None,
            edns: int | None = -2, payload: int | None = None, do: bool | None = None,
            rdclass: int = dns.rdataclass.IN, tag: str = "") -> None:
        """Add a standard query; options left at their default are chosen at random."""
        rng = self.rng
        if isinstance(name, str):
            name = dns.name.from_text(name)
        qtype = dns.rdatatype.from_text(qtype) if isinstance(qtype, str) else qtype
        if edns == -2:
            edns = -1 if rng.random() < 0.3 else 0
        if payload is None:
            payload = rng.choice([512, 1232, 1232, 4096])
        if do is None:
            do = rng.random() < 0.2
        if tcp is None:
            tcp = rng.random() < 0.15
        qname = random_case(rng, name)
        q = dns.message.make_query(qname, qtype, rdclass, use_edns=edns,
                                   payload=payload, want_dnssec=do if edns >= 0 else False)
        q.id = self._id()
        if rng.random() < 0.5:
            q.flags &= ~dns.flags.RD
        if rng.random() < 0.1:
            q.flags |= dns.flags.CD
        desc = (f"{qname} {dns.rdataclass.to_text(rdclass)} {dns.rdatatype.to_text(qtype)} "
                f"{'TCP' if tcp else 'UDP'} "
                + (f"EDNS({payload}{',DO' if do else ''})" if edns >= 0 else "no-EDNS")
                + (" RD" if q.flags & dns.flags.RD else "")
                + (" CD" if q.flags & dns.flags.CD else "")
                + (f" [{tag}]" if tag else ""))
        self.queries.append(Query(desc, q.to_wire(), tcp, qname=qname, qtype=qtype))

    def add_raw(self, desc: str, wire: bytes, *, tcp: bool = False, expect_reply: bool = True,
                malformed: bool = False) -> None:
        """Add a hand-built packet; its first two bytes are replaced by a fresh id."""
        if len(wire) >= 2:
            wire = struct.pack("!H", self._id()) + wire[2:]
        self.queries.append(Query(desc, wire, tcp, expect_reply=expect_reply, malformed=malformed))


def build_corpus(seed: int = 20240101) -> list[Query]:
    """A few thousand queries covering every name, type, negative case and transport."""
    b = CorpusBuilder(seed)
    rng = b.rng
    names, wildcards = load_zone_names()

    for name in names:  # every name x every type
        for qtype in QTYPES:
            b.add(name, qtype)

    for name in names:  # nonexistent names below every node (RFC 8020), cuts included
        for depth in (1, 2):
            labels = [random_label(rng) for _ in range(depth)]
            nx = dns.name.from_text(".".join(labels), name)
            for qtype in ("A", "AAAA", "MX", "TXT", rng.choice(QTYPES)):
                b.add(nx, qtype, tag="below " + str(name))

    for wild in wildcards:  # names synthesised from every wildcard, at several depths
        parent = wild.parent()
        for depth in (1, 1, 2, 3):
            labels = [random_label(rng) for _ in range(depth)]
            for qtype in ("A", "AAAA", "MX", "TXT", "SRV", "CNAME", "ANY", rng.choice(QTYPES)):
                b.add(dns.name.from_text(".".join(labels), parent), qtype, tag="wildcard")

    for name in OUTSIDE_NAMES:
        for qtype in ("A", "SOA", "NS", "ANY"):
            b.add(name, qtype, tag="outside")

    # Large answers under every size limit and both transports.
    for name in ("mid.diff.test.", "big.diff.test.", "huge.diff.test.", "bigtxt.diff.test.",
                 "manymx.diff.test.", "longtxt.diff.test.", "host.bigdeleg.diff.test.",
                 "bigdeleg.diff.test.", "diff.test."):
        for qtype in ("A", "AAAA", "TXT", "MX", "NS", "DNSKEY", "ANY"):
            for edns, payload in ((-1, 512), (0, 512), (0, 1232), (0, 4096), (0, 65535)):
                for tcp in (False, True):
                    b.add(name, qtype, tcp=tcp, edns=edns, payload=payload, tag="size")

    add_special_queries(b)
    return b.queries


def _header(qid: int = 0, flags: int = 0, qd: int = 1, an: int = 0, ns: int = 0,
            ar: int = 0) -> bytes:
    return struct.pack("!HHHHHH", qid, flags, qd, an, ns, ar)


def _question(name: str = "www.diff.test.", qtype: int = 1, qclass: int = 1) -> bytes:
    return dns.name.from_text(name).to_wire() + struct.pack("!HH", qtype, qclass)


def _opt(payload: int = 1232, version: int = 0, do: bool = False, options: bytes = b"",
         owner: bytes = b"\x00") -> bytes:
    ttl = (version << 16) | (0x8000 if do else 0)
    return owner + struct.pack("!HHIH", 41, payload, ttl, len(options)) + options


def _option(code: int, data: bytes) -> bytes:
    return struct.pack("!HH", code, len(data)) + data


def add_special_queries(b: CorpusBuilder) -> None:
    """EDNS corner cases, other opcodes and classes, meta types and malformed packets."""
    ecs = _option(8, struct.pack("!HBB", 1, 24, 0) + bytes([192, 0, 2]))
    cookie = _option(10, bytes(range(8)))
    unknown = _option(65001, b"hello")
    for tcp in (False, True):
        t = "TCP" if tcp else "UDP"
        for name in ("www.diff.test.", "nx.diff.test.", "host.deleg.diff.test.", "example.net."):
            b.add(name, "A", tcp=tcp, edns=1, tag="EDNS version 1 -> BADVERS")
            b.add(name, "A", tcp=tcp, edns=255, tag="EDNS version 255 -> BADVERS")
        for opts, what in ((ecs, "ECS"), (cookie, "cookie"), (unknown, "unknown option"),
                           (ecs + cookie + unknown, "three options")):
            b.add_raw(f"www.diff.test. A {t} EDNS with {what}",
                      _header(ar=1) + _question() + _opt(options=opts), tcp=tcp)
        b.add_raw(f"www.diff.test. A {t} EDNS payload 100 (raised to 512)",
                  _header(ar=1) + _question() + _opt(payload=100), tcp=tcp)
        b.add_raw(f"big.diff.test. AAAA {t} EDNS payload 0",
                  _header(ar=1) + _question("big.diff.test.", 28) + _opt(payload=0), tcp=tcp)
        b.add_raw(f"www.diff.test. A {t} EDNS with unknown flag bits",
                  _header(ar=1) + _question()
                  + b"\x00" + struct.pack("!HHIH", 41, 1232, 0x7fff, 0), tcp=tcp)
        for opcode in (1, 2, 3, 4, 5, 6, 15):
            b.add_raw(f"www.diff.test. A {t} opcode {opcode}",
                      _header(flags=opcode << 11) + _question(), tcp=tcp)
        for qclass, cname in ((3, "CH"), (4, "HS"), (254, "NONE"), (255, "ANY"), (2, "CS"),
                              (1234, "CLASS1234")):
            b.add_raw(f"www.diff.test. {cname} A {t}",
                      _header() + _question(qclass=qclass), tcp=tcp)
        b.add_raw(f"version.bind. CH TXT {t}", _header() + _question("version.bind.", 16, 3),
                  tcp=tcp)
        for qtype, tname in ((252, "AXFR"), (251, "IXFR"), (253, "MAILB"), (254, "MAILA"),
                             (41, "OPT"), (249, "TKEY"), (250, "TSIG"), (0, "TYPE0"),
                             (128, "TYPE128 (meta range)")):
            b.add_raw(f"diff.test. {tname} {t}", _header() + _question("diff.test.", qtype),
                      tcp=tcp)
        b.add_raw(f"header only, QDCOUNT=0 {t}", _header(qd=0), tcp=tcp)
        b.add_raw(f"QDCOUNT=2 {t}", _header(qd=2) + _question() + _question("mail.diff.test."),
                  tcp=tcp, malformed=True)
        b.add_raw(f"QDCOUNT=1 and no question {t}", _header(), tcp=tcp, malformed=True)
        b.add_raw(f"question cut in the name {t}", _header() + _question()[:6],
                  tcp=tcp, malformed=True)
        b.add_raw(f"question cut in the type {t}", _header() + _question()[:-3],
                  tcp=tcp, malformed=True)
        b.add_raw(f"trailing garbage after the question {t}",
                  _header() + _question() + b"\xde\xad\xbe\xef", tcp=tcp)
        b.add_raw(f"ARCOUNT=1 and no record {t}", _header(ar=1) + _question(), tcp=tcp)
        b.add_raw(f"two OPT records {t}", _header(ar=2) + _question() + _opt() + _opt(),
                  tcp=tcp)
        b.add_raw(f"OPT with a non-root owner {t}",
                  _header(ar=1) + _question() + _opt(owner=b"\x01a\x00"), tcp=tcp)
        b.add_raw(f"OPT with an option overrunning its rdata {t}",
                  _header(ar=1) + _question() + b"\x00" + struct.pack("!HHIH", 41, 1232, 0, 4)
                  + struct.pack("!HH", 8, 40), tcp=tcp)
        b.add_raw(f"ANCOUNT=1 with an answer record {t}",
                  _header(an=1) + _question() + b"\xc0\x0c"
                  + struct.pack("!HHIH", 1, 1, 60, 4) + bytes([192, 0, 2, 1]), tcp=tcp)
        b.add_raw(f"NSCOUNT=1 with an authority record {t}",
                  _header(ns=1) + _question() + b"\xc0\x0c"
                  + struct.pack("!HHIH", 1, 1, 60, 4) + bytes([192, 0, 2, 1]), tcp=tcp)
        b.add_raw(f"compression pointer in the question {t}",
                  _header() + b"\xc0\x0c" + struct.pack("!HH", 1, 1), tcp=tcp, malformed=True)
        # A QNAME that points back into the header: nothing before it can be a name, and
        # echoed verbatim the pointer would read the reply's own header (flags, counts).
        b.add_raw(f"QNAME pointer to the flags {t}",
                  _header(flags=0x0100) + b"\xc0\x02" + struct.pack("!HH", 1, 1), tcp=tcp,
                  malformed=True)
        b.add_raw(f"QNAME pointer to QDCOUNT (reads as the root) {t}",
                  _header() + b"\xc0\x04" + struct.pack("!HH", 6, 1), tcp=tcp, malformed=True)
        # A QNAME that points into its own labels and reads on past the question: valid
        # backwards, but an echo of the question bytes alone leaves the name dangling.
        b.add_raw(f"QNAME pointer into itself, ending after the question {t}",
                  _header() + bytes.fromhex("020741c00d00010001") + b"\x00", tcp=tcp,
                  malformed=True)
        b.add_raw(f"forward compression pointer in the question {t}",
                  _header() + b"\x03www\xc0\x20" + struct.pack("!HH", 1, 1),
                  tcp=tcp, malformed=True)
        b.add_raw(f"label of 64 octets {t}",
                  _header() + b"\x40" + b"a" * 64 + b"\x00" + struct.pack("!HH", 1, 1),
                  tcp=tcp, malformed=True)
        b.add_raw(f"extended label type 0x40 {t}",
                  _header() + b"\x41\x00" + struct.pack("!HH", 1, 1), tcp=tcp, malformed=True)
        longname = b"".join(b"\x3f" + b"a" * 63 for _ in range(4)) + b"\x00"  # 257 octets
        b.add_raw(f"name longer than 255 octets {t}",
                  _header() + longname + struct.pack("!HH", 1, 1), tcp=tcp, malformed=True)
        for bits, what in ((0x0400, "AA"), (0x0200, "TC"), (0x0080, "RA"), (0x0040, "Z"),
                           (0x0020, "AD"), (0x0010, "CD")):
            b.add_raw(f"www.diff.test. A {t} with {what} set in the query",
                      _header(flags=bits) + _question(), tcp=tcp)
        b.add_raw(f"www.diff.test. A {t} with RCODE 3 in the query",
                  _header(flags=3) + _question(), tcp=tcp)
        b.add_raw(f"binary label www.d\\000iff.test. {t}",
                  _header() + b"\x03www\x05d\x00iff\x04test\x00" + struct.pack("!HH", 1, 1),
                  tcp=tcp)
    # QR=1 and runts are never answered; over UDP only, a silent TCP peer just stalls.
    b.add_raw("QR=1 response packet UDP", _header(flags=0x8000) + _question(),
              expect_reply=False)
    b.add_raw("QR=1 with EDNS UDP", _header(flags=0x8400, ar=1) + _question() + _opt(),
              expect_reply=False)
    b.add_raw("5-byte runt UDP", b"\x00\x01\x00\x00\x00", expect_reply=False)
    b.add_raw("11-byte runt UDP", _header()[:11], expect_reply=False)


# ---------------------------------------------------------------------------------------------
# Comparison


# Types whose rdata names may be compressed (RFC 3597 section 4) and where the names sit:
# "n" a name, an integer that many fixed octets. Every other type is compared byte for byte,
# so a server that compressed a name in, say, SRV rdata would show up as a difference.
RDATA_NAMES = {
    2: ("n",), 3: ("n",), 4: ("n",), 5: ("n",), 7: ("n",), 8: ("n",), 9: ("n",), 12: ("n",),
    6: ("n", "n", 20), 14: ("n", "n"), 15: (2, "n"),
}
OPT = 41
RRSIG = 46


def read_name(wire: bytes, off: int) -> tuple[bytes, int]:
    """The name at @off, uncompressed with its case kept, and the offset after it.

    Pointers must point before the name that uses them, so a loop is impossible."""
    out, end, start = b"", None, off
    while True:
        if off >= len(wire):
            raise ValueError("name runs past the end")
        n = wire[off]
        if n & 0xC0 == 0xC0:
            if off + 1 >= len(wire):
                raise ValueError("cut compression pointer")
            ptr = (n & 0x3F) << 8 | wire[off + 1]
            if ptr >= start:
                raise ValueError(f"compression pointer to {ptr} is not before the name it "
                                 f"continues (at {start})")
            if end is None:
                end = off + 2
            off = start = ptr
            continue
        if n & 0xC0:
            raise ValueError("extended label type")
        out += wire[off:off + n + 1]
        off += n + 1
        if len(out) > 255:
            raise ValueError("name longer than 255 octets")
        if n == 0:
            return out, end if end is not None else off


def name_text(name: bytes) -> str:
    labels, off = [], 0
    while name[off]:
        label = name[off + 1:off + 1 + name[off]]
        labels.append("".join(chr(c) if 0x21 <= c <= 0x7E and c not in b'.\\"()' else
                              f"\\{c:03d}" for c in label))
        off += name[off] + 1
    return ".".join(labels) + "."


def canonical_rdata(wire: bytes, rtype: int, off: int, rdlen: int) -> bytes:
    """The rdata with compressed names expanded and lowercased; verbatim for other types."""
    layout = RDATA_NAMES.get(rtype)
    if layout is None:
        return wire[off:off + rdlen]
    out, pos, end = b"", off, off + rdlen
    for part in layout:
        if part == "n":
            name, pos = read_name(wire, pos)
            out += name.lower()
        else:
            out += wire[pos:pos + part]
            pos += part
    if pos != end:
        raise ValueError(f"type {rtype} rdata length {rdlen} does not match its content")
    return out


@dataclass
class Msg:
    """A reply split into header, question and records, with names uncompressed."""

    id: int
    flags: int  # the header flags word: QR, opcode, AA, TC, RD, RA, Z, AD, CD, RCODE
    counts: tuple
    question: list  # (name as received, type, class)
    sections: tuple  # answer, authority, additional (without OPT): (owner, type, class, ttl, rdata)
    opt: list  # the OPT records: (owner, payload, ttl, rdata)

    @property
    def opcode(self) -> int:
        return (self.flags >> 11) & 0xF

    @property
    def rcode(self) -> int:
        ext = self.opt[0][2] >> 24 if len(self.opt) == 1 else 0
        return ext << 4 | (self.flags & 0xF)

    @property
    def edns(self) -> tuple | None:
        """(version, DO, options) of the one OPT record, or None."""
        if len(self.opt) != 1:
            return None
        _, _, ttl, rdata = self.opt[0]
        return ((ttl >> 16) & 0xFF, bool(ttl & 0x8000), rdata)


def parse_msg(wire: bytes) -> Msg:
    """Split a reply; ValueError for anything that is not a well-formed message."""
    if len(wire) < 12:
        raise ValueError(f"{len(wire)}-byte reply is shorter than a header")
    qid, flags, qd, an, ns, ar = struct.unpack("!6H", wire[:12])
    off, question = 12, []
    for _ in range(qd):
        name, off = read_name(wire, off)
        if off + 4 > len(wire):
            raise ValueError("question cut short")
        question.append((name, *struct.unpack("!HH", wire[off:off + 4])))
        off += 4
    sections, opt = ([], [], []), []
    for sec, count in enumerate((an, ns, ar)):
        for _ in range(count):
            owner, off = read_name(wire, off)
            if off + 10 > len(wire):
                raise ValueError("record header cut short")
            rtype, rclass, ttl, rdlen = struct.unpack("!HHIH", wire[off:off + 10])
            off += 10
            if off + rdlen > len(wire):
                raise ValueError("rdata cut short")
            if rtype == OPT:
                if sec != 2:
                    raise ValueError("OPT outside the additional section")
                opt.append((owner, rclass, ttl, wire[off:off + rdlen]))
            else:
                rdata = canonical_rdata(wire, rtype, off, rdlen)
                sections[sec].append((owner.lower(), rtype, rclass, ttl, rdata))
            off += rdlen
    if off != len(wire):
        raise ValueError(f"{len(wire) - off} octets after the last record")
    return Msg(qid, flags, (qd, an, ns, ar), question, sections, opt)


@dataclass
class Reply:
    wire: bytes | None
    msg: Msg | None = None
    error: str | None = None

    @classmethod
    def parse(cls, wire: bytes | None) -> "Reply":
        if wire is None:
            return cls(None)
        try:
            return cls(wire, parse_msg(wire))
        except (ValueError, IndexError, struct.error) as exc:
            return cls(wire, None, f"malformed reply: {exc}")

    def text(self) -> str:
        if self.wire is None:
            return "(no reply)"
        out = [] if self.error is None else [self.error]
        try:
            out.append(dns.message.from_wire(self.wire).to_text())
        except Exception:  # unassigned opcodes, UPDATE replies: show the bytes
            out.append(self.wire.hex())
        return "\n".join(out)


SECTIONS = ("answer", "authority", "additional")
HEADER_FLAGS = (("QR", 0x8000), ("AA", 0x0400), ("TC", 0x0200), ("RD", 0x0100), ("RA", 0x0080),
                ("Z", 0x0040), ("AD", 0x0020), ("CD", 0x0010))


def rrset_map(msg: Msg, sec: int) -> dict:
    """{(owner, class, type, covered type): (TTLs, rdata set, record count)} of a section."""
    out: dict = {}
    for owner, rtype, rclass, ttl, rdata in msg.sections[sec]:
        covers = struct.unpack("!H", rdata[:2])[0] if rtype == RRSIG and len(rdata) >= 2 else 0
        key = (owner, rclass, rtype, covers)
        ttls, rdatas, n = out.get(key, (frozenset(), frozenset(), 0))
        out[key] = (ttls | {ttl}, rdatas | {rdata}, n + 1)
    return out


def key_text(key) -> str:
    owner, rclass, rtype, covers = key
    t = dns.rdatatype.to_text(rtype)
    if covers:
        t += f"({dns.rdatatype.to_text(covers)})"
    return f"{name_text(owner)} {dns.rdataclass.to_text(rclass)} {t}"


def diff_sections(k: Msg, s: Msg, sections=(0, 1, 2)) -> list[str]:
    out = []
    for sec in sections:
        km, sm = rrset_map(k, sec), rrset_map(s, sec)
        for key in sorted(set(km) | set(sm)):
            what = f"{SECTIONS[sec]}: {key_text(key)}"
            if key not in sm:
                out.append(f"{what} only in knotd")
            elif key not in km:
                out.append(f"{what} only in steerd")
            elif km[key][1] != sm[key][1]:
                out.append(f"{what} rdata differ")
            elif km[key][0] != sm[key][0]:
                out.append(f"{what} TTL {sorted(km[key][0])} (knotd) vs "
                           f"{sorted(sm[key][0])} (steerd)")
            elif km[key][2] != sm[key][2]:
                out.append(f"{what} {km[key][2]} records (knotd) vs {sm[key][2]} (steerd): "
                           "duplicates")
    return out


def subset_of(part: Msg, full: Msg, who: str) -> list[str]:
    """Records of @part that @full does not have in the same section with the same TTL."""
    out = []
    for sec in range(3):
        fm = rrset_map(full, sec)
        for key, (ttls, rdatas, _) in rrset_map(part, sec).items():
            if key not in fm or not rdatas <= fm[key][1] or ttls != fm[key][0]:
                out.append(f"{SECTIONS[sec]}: {who}'s truncated reply has {key_text(key)} "
                           "records that the full answer over TCP does not")
    return out


def question_text(question: list) -> str:
    return ", ".join(f"{name_text(n)} {dns.rdataclass.to_text(c)} {dns.rdatatype.to_text(t)}"
                     for n, t, c in question)


EDE_OPTION = 15  # Extended DNS Errors, RFC 8914
ECS_OPTION = 8  # EDNS Client Subnet, RFC 7871


def without_ecs_echo(sopts: list[tuple[int, bytes]], query) -> list[tuple[int, bytes]]:
    """RFC 7871 section 7.2.1: an ECS-aware server echoes the query's option, with SCOPE
    PREFIX-LENGTH 0 when the answer does not depend on the client (all zone data). Knot 3.2
    without its geoip module ignores ECS and echoes nothing, so exactly that echo is dropped
    from steerd's options before comparing; any other ECS content still counts as a difference."""
    if query is None or not query.edns:
        return sopts
    asked = [o for o in edns_options(query.edns[2]) if o[0] == ECS_OPTION]
    if len(asked) != 1:
        return sopts
    return [o for o in sopts if o != asked[0]]


COOKIE_OPTION = 10  # DNS Cookies, RFC 7873


def without_cookie_answer(sopts: list[tuple[int, bytes]], query) -> list[tuple[int, bytes]]:
    """RFC 7873 5.2: a cookie-aware server answers a client cookie with it and a server
    cookie of its own. Knot 3.2 without its cookies module ignores the option, so steerd's
    answer is dropped before comparing when it has exactly the expected form: the query's
    client cookie followed by a 16-byte RFC 9018 version 1 server cookie."""
    if query is None or not query.edns:
        return sopts
    asked = [o for o in edns_options(query.edns[2]) if o[0] == COOKIE_OPTION]
    if len(asked) != 1 or len(asked[0][1]) < 8:
        return sopts
    client = asked[0][1][:8]
    return [o for o in sopts if not (o[0] == COOKIE_OPTION and len(o[1]) == 24
                                     and o[1][:8] == client and o[1][8:12] == b"\1\0\0\0")]


def edns_options(rdata: bytes) -> list[tuple[int, bytes]]:
    out, off = [], 0
    while off + 4 <= len(rdata):
        code, length = struct.unpack("!HH", rdata[off:off + 4])
        out.append((code, rdata[off + 4:off + 4 + length]))
        off += 4 + length
    return out


def diff_header(k: Msg, s: Msg, query: Msg | None, rcode_ok: bool = False) -> list[str]:
    """Header, question and EDNS differences. @rcode_ok: an exception rule already accepted
    steerd's rcode."""
    out = []
    if k.id != s.id:
        out.append(f"id {k.id} (knotd) vs {s.id} (steerd)")
    if k.opcode != s.opcode:
        out.append(f"opcode {k.opcode} (knotd) vs {s.opcode} (steerd)")
    if k.rcode != s.rcode and not rcode_ok:
        out.append(f"rcode {dns.rcode.to_text(k.rcode)} (knotd) vs "
                   f"{dns.rcode.to_text(s.rcode)} (steerd)")
    for fname, bit in HEADER_FLAGS:
        if (k.flags & bit) == (s.flags & bit):
            continue
        if bit == 0x0010 and query is not None and query.flags & s.flags & bit:
            # RFC 4035 section 3.1.6: "the name server side MUST copy the setting of the CD
            # bit from a query to the corresponding response". steerd does; Knot 3.2 clears it.
            continue
        out.append(f"flag {fname} {'set' if k.flags & bit else 'clear'} (knotd) vs "
                   f"{'set' if s.flags & bit else 'clear'} (steerd)")
    if k.question != s.question:  # names with their case: the 0x20 echo is compared too
        out.append(f"question [{question_text(k.question)}] (knotd) vs "
                   f"[{question_text(s.question)}] (steerd)")
    # EDNS: presence, version, DO echo (RFC 3225 section 3) and options. The payload size is
    # each server's own choice (RFC 6891 section 6.2.5), so it is not compared.
    if len(k.opt) != len(s.opt):
        out.append(f"{len(k.opt)} OPT records (knotd) vs {len(s.opt)} (steerd)")
    elif k.edns and s.edns:
        (kv, kdo, kopt), (sv, sdo, sopt) = k.edns, s.edns
        if kv != sv:
            out.append(f"EDNS version {kv} (knotd) vs {sv} (steerd)")
        if kdo != sdo:
            out.append(f"EDNS DO {'set' if kdo else 'clear'} (knotd) vs "
                       f"{'set' if sdo else 'clear'} (steerd)")
        # RFC 8914 makes Extended DNS Errors optional ("MAY"); Knot adds one to some errors
        # (e.g. REFUSED: "Not Authoritative"), steerd adds none. Every other option must match.
        sopts = without_cookie_answer(without_ecs_echo(edns_options(sopt), query), query)
        if [o for o in edns_options(kopt) if o[0] != EDE_OPTION] != sopts:
            out.append(f"EDNS options {kopt.hex()} (knotd) vs {sopt.hex()} (steerd)")
        if k.opt[0][0] != b"\0" or s.opt[0][0] != b"\0":
            out.append("OPT owner is not the root")
    return out


def diff_raw(k: Reply, s: Reply) -> list[str]:
    """Replies that do not parse: the same bytes, or the error of each."""
    if k.wire == s.wire:
        return []
    return [f"knotd: {k.error or 'well-formed reply'}", f"steerd: {s.error or 'well-formed reply'}"]


@dataclass
class Mismatch:
    query: Query
    knot: Reply
    steer: Reply
    reasons: list[str] = field(default_factory=list)

    def report(self) -> str:
        lines = [f"QUERY  {self.query.desc}", f"  wire {self.query.wire.hex()}"]
        lines += ["  DIFF " + r for r in self.reasons]
        lines.append("  --- knotd:")
        lines += ["    " + ln for ln in self.knot.text().splitlines()]
        lines.append("  --- steerd:")
        lines += ["    " + ln for ln in self.steer.text().splitlines()]
        return "\n".join(lines)


class Comparator:
    """Compares the two servers' replies to one query, asking Knot again where a rule
    needs the full answer (truncation) or the answer for one type (ANY)."""

    def __init__(self, knot: Server, steer: Server):
        self.knot = knot
        self.steer = steer

    def run(self, q: Query) -> Mismatch | None:
        timeout = REPLY_TIMEOUT if q.expect_reply and not q.malformed else NO_REPLY_TIMEOUT
        kw = self.knot.ask(q.wire, q.tcp, timeout)
        sw = self.steer.ask(q.wire, q.tcp, timeout)
        if kw == sw:
            return None
        k, s = Reply.parse(kw), Reply.parse(sw)
        reasons = self.compare(q, k, s)
        return Mismatch(q, k, s, reasons) if reasons else None

    def compare(self, q: Query, k: Reply, s: Reply) -> list[str]:
        if k.wire is None or s.wire is None:
            if q.malformed and k.wire is None and self.is_plain_formerr(s):
                # RFC 1035 section 4.1.1: FORMERR means "unable to interpret the query".
                # Knot drops a packet whose question does not parse; steerd answers FORMERR
                # (the issue asks for it), with nothing but the header and maybe OPT.
                return []
            if k.wire is None and q.malformed:
                return ["knotd dropped the malformed query; steerd's reply is "
                        + (s.error or "not a plain FORMERR")]
            if k.wire is None:
                return ["knotd did not reply, steerd did"]
            return ["steerd did not reply"]
        if k.msg is None or s.msg is None:
            return diff_raw(k, s)
        km, sm = k.msg, s.msg
        query = Reply.parse(q.wire).msg
        if query is not None and self.bad_opt_in_query(query) and self.is_plain_formerr(s):
            # RFC 6891 section 6.1.1: more than one OPT "MUST" get FORMERR; section 6.1.2: the
            # OPT owner "MUST be 0 (root domain)". steerd answers both with FORMERR; Knot
            # omits the OPT from its FORMERR, or ignores a misplaced OPT and answers.
            return []
        reasons = diff_header(km, sm, query, self.rcode_ok(q, query, km, sm))
        if km.flags & sm.flags & 0x0200:
            # RFC 2181 section 9: a reply with TC set is only a signal to retry over TCP;
            # its records are not used. Both servers set TC (compared above), so instead of
            # equality each record present must be one of the full answer's.
            full = self.full_answer(q)
            if full is None:
                reasons.append("knotd did not answer the query over TCP")
            else:
                reasons += subset_of(km, full, "knotd") + subset_of(sm, full, "steerd")
        elif self.is_minimal_any(q, km, sm):
            reasons += self.check_any(q, km, sm)
        else:
            reasons += diff_sections(km, sm)
        return reasons

    @staticmethod
    def rcode_ok(q: Query, query: Msg | None, km: Msg, sm: Msg) -> bool:
        """Where steerd's rcode may differ from Knot's; the rest of the reply still must match."""
        if query is None or any(sm.sections):
            return False
        if query.opcode == dns.opcode.NOTIFY:
            # A NOTIFY (RFC 1996) for a zone that is not a secondary zone of steerd's: NOTAUTH,
            # as Knot answers when no ACL allows it (Knot may see FORMERR first).
            return sm.rcode == dns.rcode.NOTAUTH
        if query.opcode == dns.opcode.UPDATE:
            # steerd does not implement UPDATE (RFC 2136): NOTIMP, "the name server does not
            # support the requested kind of query" (RFC 1035 section 4.1.1). Knot implements
            # it and rejects these with NOTAUTH or FORMERR.
            return sm.rcode == dns.rcode.NOTIMP
        if (len(query.question) == 1
                and query.question[0][1] in (dns.rdatatype.AXFR, dns.rdatatype.IXFR)):
            # A transfer no ACL allows (over TCP, or IXFR over UDP as RFC 1995 permits):
            # RFC 1035 section 4.1.1 names "zone transfer" as the example of REFUSED; Knot
            # answers NOTAUTH. An IXFR without the client's SOA in authority is malformed
            # (RFC 1995 section 3): steerd says FORMERR before looking at the ACL.
            if (query.question[0][1] == dns.rdatatype.IXFR and km.rcode == dns.rcode.NOTAUTH
                    and sm.rcode == dns.rcode.FORMERR):
                return True
            return km.rcode == dns.rcode.NOTAUTH and sm.rcode == dns.rcode.REFUSED
        return False

    @staticmethod
    def bad_opt_in_query(query: Msg) -> bool:
        return len(query.opt) > 1 or any(owner != b"\0" for owner, *_ in query.opt)

    @staticmethod
    def is_plain_formerr(r: Reply) -> bool:
        return (r.msg is not None and r.msg.rcode == dns.rcode.FORMERR
                and not any(r.msg.sections))

    def full_answer(self, q: Query) -> Msg | None:
        return Reply.parse(self.knot.ask(q.wire, tcp=True)).msg

    @staticmethod
    def is_minimal_any(q: Query, km: Msg, sm: Msg) -> bool:
        return (q.qtype == dns.rdatatype.ANY and km.rcode == sm.rcode == dns.rcode.NOERROR
                and bool(km.sections[0]) and bool(sm.sections[0]))

    def check_any(self, q: Query, km: Msg, sm: Msg) -> list[str]:
        """RFC 8482 section 4.1: an ANY query may be answered with any non-empty subset of
        the RRsets at the name; Knot returns one, steerd may choose another. Each RRset that
        steerd returns must be exactly what Knot answers for that type at that name, with
        the additional records Knot gives for it; the authority section must match Knot's."""
        reasons = diff_sections(km, sm, (1,))
        qname = q.qname.canonicalize().to_wire()
        chosen = rrset_map(sm, 0)
        for key, value in chosen.items():
            owner, _, rtype, _ = key
            if owner != qname:
                reasons.append(f"answer: ANY reply has a record of another owner {key_text(key)}")
                continue
            typed = dns.message.make_query(q.qname, rtype)
            typed.flags = 0
            ref = Reply.parse(self.knot.ask(typed.to_wire(), tcp=True)).msg
            if ref is None:
                reasons.append(f"knotd did not answer {key_text(key)} over TCP")
                continue
            if rrset_map(ref, 0).get(key) != value:
                reasons.append(f"answer: ANY reply {key_text(key)} is not the RRset knotd "
                               "has at the name")
            if len(chosen) == 1:
                reasons += [r + " (for the RRset chosen for ANY)"
                            for r in diff_sections(ref, sm, (2,))]
        return reasons


def run_corpus(knot: Server, steer: Server, corpus: list[Query]) -> list[Mismatch]:
    comp = Comparator(knot, steer)
    return [m for m in (comp.run(q) for q in corpus) if m is not None]


def summary(mismatches: list[Mismatch], total: int, shown: int) -> str:
    """The differences counted by reason, then the first @shown mismatches in full."""
    reasons = collections.Counter(r for m in mismatches for r in m.reasons)
    lines = [f"{len(mismatches)} of {total} queries answered differently", "",
             "most common differences:"]
    lines += [f"  {n:5d}  {r}" for r, n in reasons.most_common(25)]
    lines += ["", f"first {min(shown, len(mismatches))}:", ""]
    lines += [m.report() + "\n" for m in mismatches[:shown]]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run the whole comparison outside pytest and print every difference."""
    import tempfile
    binary = Path(argv[1]) if len(argv) > 1 else find_steerd()
    corpus = build_corpus()
    print(f"{len(corpus)} queries, {sum(q.tcp for q in corpus)} over TCP")
    with tempfile.TemporaryDirectory(prefix="steer-diff-") as tmp:
        knot = start_knotd(Path(tmp))
        try:
            if binary is None:
                print("no steerd binary: checking that knotd answers the corpus")
                unanswered = [q.desc for q in corpus if q.expect_reply and knot.ask(
                    q.wire, q.tcp, NO_REPLY_TIMEOUT if q.malformed else REPLY_TIMEOUT) is None]
                print(f"knotd left {len(unanswered)} queries unanswered")
                for desc in unanswered[:50]:
                    print("  ", desc)
                return 0
            steer = start_steerd(binary, Path(tmp))
            try:
                start = time.monotonic()
                mismatches = run_corpus(knot, steer, corpus)
                print(f"compared in {time.monotonic() - start:.1f} s")
                print(summary(mismatches, len(corpus), len(mismatches)))
            finally:
                for problem in steer.stop():
                    print(problem)
        finally:
            knot.stop()
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
