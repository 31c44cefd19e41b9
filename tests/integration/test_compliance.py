"""Protocol compliance as ISC's EDNS compliance tester (DNS-Compliance-Testing, genreport)
checks it, category by category, over UDP and TCP, IPv4 and IPv6.

Each case sends the query genreport sends (raw wire where dnspython cannot build it: opcodes
it does not know, flags it will not set, EDNS versions above 0) and asserts what an
RFC-correct authoritative server returns. The categories: dns, aa, rd, zflag, opcode,
opcodeflg, type666, tcp, edns, edns1, edns@512, ednsflags, optlist, ednsopt, edns1opt, do,
docd, ednstcp, signed, ednssubnet, and one query per record type (genreport's type mode).
"signed" checks what genreport checks of an unsigned zone (DO echoed, no RRSIG invented):
Steer serves no signed zones.

Besides genreport: every opcode 0..15 with every header flag set or clear, compared with a
real knotd; error answers carry an OPT exactly when the query had a valid one (RFC 6891
6.1.1) and, like Knot, none when the OPT itself was malformed; CH TXT version.bind and
version.server (server.version); IXFR at the current serial is one SOA (RFC 1995 2).
"""
from __future__ import annotations

import socket
import struct
import subprocess
from dataclasses import dataclass, field

import pytest

from conftest import STEERD, server_config, tcp_frame, tcp_read_message
from knot_support import Knotd

ORIGIN = "compliance.test."
ZONE = f"""$ORIGIN {ORIGIN}
$TTL 300
@ SOA ns1 hostmaster 2026120201 3600 900 604800 300
@ NS ns1
@ NS ns2
@ MX 10 mail
@ TXT "v=spf1 -all"
@ CAA 0 issue "ca.example"
@ A 192.0.2.1
@ AAAA 2001:db8::1
ns1 A 192.0.2.53
ns1 AAAA 2001:db8::53
ns2 A 192.0.2.54
mail A 192.0.2.25
www CNAME @
_sip._udp SRV 10 20 5060 www
1.2.0.192.in-addr PTR www
"""

# Header flag bits.
QR, AA, TC, RD, RA, Z, AD, CD = 0x8000, 0x0400, 0x0200, 0x0100, 0x0080, 0x0040, 0x0020, 0x0010
DO = 0x8000
OPT_NSID, OPT_ECS, OPT_EXPIRE, OPT_COOKIE = 3, 8, 9, 10
NOERROR, FORMERR, NOTIMP, REFUSED, NOTAUTH, BADVERS = 0, 1, 4, 5, 9, 16
SOA, TXT, CH = 6, 16, 3


def wire_name(name: str) -> bytes:
    out = b""
    for label in name.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def opt_rr(version: int = 0, flags: int = 0, payload: int = 4096, options=(),
           owner: bytes = b"\0") -> bytes:
    data = b"".join(struct.pack("!HH", code, len(val)) + val for code, val in options)
    return owner + struct.pack("!HHBBHH", 41, payload, 0, version, flags, len(data)) + data


def build(qname: str = ORIGIN, qtype: int = SOA, qclass: int = 1, *, flags: int = 0,
          opcode: int = 0, edns: int | None = None, ednsflags: int = 0, payload: int = 4096,
          options=(), qid: int = 0x4242) -> bytes:
    """A query as genreport's dig-like options build it; edns=None: no OPT."""
    hdr = struct.pack("!HHHHHH", qid, flags | (opcode << 11), 1, 0, 0, 0 if edns is None else 1)
    body = wire_name(qname) + struct.pack("!HH", qtype, qclass)
    if edns is not None:
        body += opt_rr(edns, ednsflags, payload, options)
    return hdr + body


def read_name(wire: bytes, off: int) -> tuple[str, int]:
    labels, end, hops = [], None, 0
    while True:
        n = wire[off]
        if n & 0xC0 == 0xC0:
            if end is None:
                end = off + 2
            off = ((n & 0x3F) << 8) | wire[off + 1]
            hops += 1
            assert hops < 64, "compression loop"
            continue
        off += 1
        if n == 0:
            break
        labels.append(wire[off:off + n].decode("ascii", "replace").lower())
        off += n
    return ".".join(labels) + ".", end if end is not None else off


@dataclass
class Opt:
    payload: int
    ext_rcode: int
    version: int
    flags: int
    options: list[tuple[int, bytes]]


@dataclass
class Reply:
    """A response parsed by hand: dnspython refuses opcodes 3 and 6..15."""

    wire: bytes
    id: int = 0
    flags: int = 0
    opcode: int = 0
    rcode: int = 0
    counts: tuple = ()
    question: list = field(default_factory=list)
    answer: list = field(default_factory=list)     # (name, type, class, ttl, rdata)
    authority: list = field(default_factory=list)
    additional: list = field(default_factory=list)
    opts: list[Opt] = field(default_factory=list)

    @property
    def opt(self) -> Opt | None:
        return self.opts[0] if self.opts else None


def parse(wire: bytes) -> Reply:
    r = Reply(wire)
    r.id, r.flags, *counts = struct.unpack("!HHHHHH", wire[:12])
    r.counts = tuple(counts)
    r.opcode = (r.flags >> 11) & 0xF
    off = 12
    for _ in range(counts[0]):
        name, off = read_name(wire, off)
        r.question.append((name,) + struct.unpack("!HH", wire[off:off + 4]))
        off += 4
    for section, n in ((r.answer, counts[1]), (r.authority, counts[2]),
                       (r.additional, counts[3])):
        for _ in range(n):
            name, off = read_name(wire, off)
            rtype, rclass, ttl, rdlen = struct.unpack("!HHIH", wire[off:off + 10])
            off += 10
            rdata = wire[off:off + rdlen]
            off += rdlen
            section.append((name, rtype, rclass, ttl, rdata))
            if rtype == 41:
                opts, pos = [], 0
                while pos + 4 <= len(rdata):
                    code, olen = struct.unpack("!HH", rdata[pos:pos + 4])
                    opts.append((code, rdata[pos + 4:pos + 4 + olen]))
                    pos += 4 + olen
                r.opts.append(Opt(rclass, ttl >> 24, (ttl >> 16) & 0xFF, ttl & 0xFFFF, opts))
    assert off == len(wire), "trailing bytes in the response"
    r.rcode = (r.flags & 0xF) | ((r.opt.ext_rcode << 4) if r.opt else 0)
    return r


def exchange(host: str, port: int, wire: bytes, tcp: bool, timeout: float = 3.0) -> Reply | None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if tcp:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(tcp_frame(wire))
            data = tcp_read_message(s)
    else:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.settimeout(timeout)
            s.sendto(wire, (host, port))
            try:
                data = s.recv(65535)
            except socket.timeout:
                data = None
    return parse(data) if data else None


# ---- what every answer must satisfy ------------------------------------------------------

def assert_header(r: Reply, query: bytes, rcode: int, *, aa: bool | None = None,
                  echoed: int = RD | CD):
    qid, qflags = struct.unpack("!HH", query[:4])
    assert r.id == qid
    assert r.flags & QR
    assert r.opcode == (qflags >> 11) & 0xF, "opcode echoed"
    assert r.rcode == rcode, f"rcode {r.rcode}, want {rcode}"
    assert r.flags & (RD | CD) == qflags & echoed, f"flags {r.flags:#06x}: echo of RD/CD"
    assert not r.flags & (Z | RA | AD), f"flags {r.flags:#06x}: Z, RA and AD stay clear"
    if aa is not None:
        assert bool(r.flags & AA) == aa, f"AA {'missing' if aa else 'set'}"
    assert len(r.opts) <= 1


def assert_opt(r: Reply, *, present: bool = True, do: bool = False, sent=()):
    if not present:
        assert r.opt is None, "no OPT in an answer to a query without a valid one"
        return
    assert r.opt is not None, "OPT missing (RFC 6891 6.1.1)"
    assert r.opt.version == 0, "EDNS version 0"
    assert r.opt.flags == (DO if do else 0), f"EDNS flags {r.opt.flags:#06x}"
    assert r.opt.payload >= 512
    codes = [c for c, _ in r.opt.options]
    assert len(codes) == len(set(codes)), "an option twice"
    assert set(codes) <= set(sent) & {OPT_NSID, OPT_ECS, OPT_EXPIRE, OPT_COOKIE}, \
        f"options {codes} not asked for or unknown"


def soa_answer(r: Reply):
    assert [t for _, t, *_ in r.answer] == [SOA] and r.answer[0][0] == ORIGIN


def nodata(r: Reply):
    assert not r.answer and [t for _, t, *_ in r.authority] == [SOA]


# ---- the genreport categories ------------------------------------------------------------

@dataclass
class Case:
    name: str
    query: bytes
    check: object  # (reply, query) -> None
    tcp_only: bool = False


def _dns(r, q):
    assert_header(r, q, NOERROR, aa=True)
    assert_opt(r, present=False)
    soa_answer(r)


def _opcode(r, q):
    assert_header(r, q, NOTIMP, aa=False, echoed=RD)
    assert not r.answer and not r.authority
    assert_opt(r, present=False)


def _type666(r, q):
    assert_header(r, q, NOERROR, aa=True)
    nodata(r)
    assert_opt(r, present=False)


def _edns(r, q):
    assert_header(r, q, NOERROR, aa=True)
    assert_opt(r)
    soa_answer(r)


def _edns1(r, q):
    assert_header(r, q, BADVERS)
    assert_opt(r, sent=(100,))
    assert not r.answer


def _edns512(r, q):
    assert_header(r, q, NOERROR, aa=True)
    assert_opt(r)
    assert len(r.wire) <= 512 or r.counts[1] > 0


def _do(r, q):
    assert_header(r, q, NOERROR, aa=True)
    assert_opt(r, do=True)
    soa_answer(r)


def _signed(r, q):
    _do(r, q)
    assert 46 not in [t for _, t, *_ in r.answer + r.authority], "RRSIG in an unsigned zone"


def _optlist(r, q):
    assert_header(r, q, NOERROR, aa=True)
    assert_opt(r, sent=(OPT_NSID, OPT_ECS, OPT_EXPIRE, OPT_COOKIE))
    soa_answer(r)


def _ednsopt(r, q):
    assert_header(r, q, NOERROR, aa=True)
    assert_opt(r, sent=(100,))
    soa_answer(r)


def _subnet(r, q):
    assert_header(r, q, NOERROR, aa=True)
    assert_opt(r, sent=(OPT_ECS,))
    soa_answer(r)
    ecs = [v for c, v in r.opt.options if c == OPT_ECS]
    # RFC 7871 7.2.1: family, source prefix and address echoed; zone data has scope 0.
    assert ecs == [struct.pack("!HBB", 1, 24, 0) + bytes([127, 0, 0])], ecs


ECS_QUERY = (OPT_ECS, struct.pack("!HBB", 1, 24, 0) + bytes([127, 0, 0]))
OPTLIST = ((OPT_NSID, b""), (OPT_ECS, struct.pack("!HBB", 1, 0, 0)), (OPT_EXPIRE, b""),
           (OPT_COOKIE, bytes.fromhex("0102030405060708")))

CASES = [
    Case("dns", build(), _dns),
    Case("aa", build(flags=AA), _dns),
    Case("rd", build(flags=RD), _dns),
    Case("zflag", build(flags=Z), _dns),
    Case("opcode", build(opcode=15), _opcode),
    Case("opcodeflg", build(opcode=15, flags=AA | TC | RD | RA | Z | AD | CD), _opcode),
    Case("type666", build(qtype=666), _type666),
    Case("tcp", build(), _dns, tcp_only=True),
    Case("edns", build(edns=0), _edns),
    Case("edns1", build(edns=1), _edns1),
    Case("edns@512", build(qtype=48, edns=0, payload=512), _edns512),
    Case("ednsflags", build(edns=0, ednsflags=0x0080), _edns),
    Case("optlist", build(edns=0, options=OPTLIST), _optlist),
    Case("ednsopt", build(edns=0, options=((100, b""),)), _ednsopt),
    Case("edns1opt", build(edns=1, options=((100, b""),)), _edns1),
    Case("do", build(edns=0, ednsflags=DO), _do),
    Case("docd", build(edns=0, ednsflags=DO, flags=CD), _do),
    Case("ednstcp", build(edns=0), _edns, tcp_only=True),
    Case("signed", build(edns=0, ednsflags=DO), _signed),
    Case("ednssubnet", build(edns=0, options=(ECS_QUERY,)), _subnet),
]

# genreport's type mode: one query per type, EDNS 0 with a 4096-byte buffer.
TYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "MX": 15, "TXT": 16, "AAAA": 28,
         "SRV": 33, "NAPTR": 35, "DS": 43, "SSHFP": 44, "RRSIG": 46, "NSEC": 47, "DNSKEY": 48,
         "NSEC3": 50, "NSEC3PARAM": 51, "TLSA": 52, "CDS": 59, "CDNSKEY": 60, "SVCB": 64,
         "HTTPS": 65, "SPF": 99, "URI": 256, "CAA": 257, "TYPE1000": 1000}
OWNER = {"CNAME": "www." + ORIGIN, "PTR": "1.2.0.192.in-addr." + ORIGIN,
         "SRV": "_sip._udp." + ORIGIN}
PRESENT = {"A", "NS", "CNAME", "SOA", "PTR", "MX", "TXT", "AAAA", "SRV", "CAA"}

TRANSPORTS = [("udp", "127.0.0.1"), ("tcp", "127.0.0.1"), ("udp", "::1"), ("tcp", "::1")]


def matrix(cases):
    return [pytest.param(c, proto, host, id=f"{c.name}-{proto}-{'v6' if ':' in host else 'v4'}")
            for c in cases for proto, host in TRANSPORTS if not (c.tcp_only and proto == "udp")]


@pytest.fixture(scope="module")
def srv(module_launcher):
    return module_launcher(zones={"compliance.test": ZONE}, config=server_config(""),
                           listen=["127.0.0.1", "::1"])


def port_of(srv, host: str) -> int:
    return next(p for h, p in srv.listen if h == host)


@pytest.mark.parametrize("case,proto,host", matrix(CASES))
def test_genreport(srv, case, proto, host):
    r = exchange(host, port_of(srv, host), case.query, proto == "tcp")
    assert r is not None, "no answer"
    case.check(r, case.query)


@pytest.mark.parametrize("rtype", list(TYPES))
@pytest.mark.parametrize("proto,host", TRANSPORTS,
                         ids=[f"{p}-{'v6' if ':' in h else 'v4'}" for p, h in TRANSPORTS])
def test_genreport_types(srv, rtype, proto, host):
    owner = OWNER.get(rtype, ORIGIN)
    q = build(owner, TYPES[rtype], edns=0)
    r = exchange(host, port_of(srv, host), q, proto == "tcp")
    assert r is not None, "no answer"
    assert_header(r, q, NOERROR, aa=True)
    assert_opt(r)
    assert not r.flags & TC
    if rtype in PRESENT:
        assert r.answer and r.answer[0][1] == TYPES[rtype] and r.answer[0][0] == owner
    else:
        nodata(r)


# ---- opcodes and flags, side by side with Knot --------------------------------------------

FLAG_SETS = [0, RD, AA | TC | RD | RA | Z | AD | CD, CD | AD, Z | RA]


@pytest.fixture(scope="module")
def knot(tmp_path_factory):
    k = Knotd(tmp_path_factory.mktemp("knot"), ORIGIN, ZONE)
    yield k
    k.stop()


@pytest.mark.parametrize("edns", [None, 0], ids=["noedns", "edns"])
@pytest.mark.parametrize("proto", ["udp", "tcp"])
@pytest.mark.parametrize("opcode", range(16))
def test_opcodes_like_knot(srv, knot, opcode, proto, edns):
    for flags in FLAG_SETS:
        q = build(opcode=opcode, flags=flags, edns=edns)
        mine = exchange("127.0.0.1", port_of(srv, "127.0.0.1"), q, proto == "tcp")
        theirs = exchange("127.0.0.1", knot.port, q, proto == "tcp")
        assert mine is not None and theirs is not None
        # QUERY: Knot 3.2 leaves CD clear; RFC 4035 3.1.6 has the server copy it, as we do.
        ignore = CD if opcode == 0 else 0
        assert (mine.flags | ignore) & ~0xF == (theirs.flags | ignore) & ~0xF, \
            f"flags {mine.flags:#06x}, Knot {theirs.flags:#06x}"
        if opcode == 0:
            assert mine.rcode == theirs.rcode == NOERROR
            assert_header(mine, q, NOERROR, aa=True)
            assert (mine.opt is None) == (theirs.opt is None) == (edns is None)
            continue
        assert (mine.opt is None) == (theirs.opt is None), "OPT presence as Knot"
        assert mine.question == theirs.question
        if opcode in (4, 5):
            # NOTIFY and UPDATE, which Knot implements: it answers NOTAUTH or FORMERR
            assert mine.rcode in (NOTIMP, REFUSED, NOTAUTH)
        else:
            assert mine.rcode == theirs.rcode == NOTIMP
        assert_header(mine, q, mine.rcode, aa=False, echoed=RD)
        assert not mine.answer and not mine.authority


# ---- error answers and the OPT (RFC 6891 6.1.1) --------------------------------------------

def _raw(header_counts, body):
    return struct.pack("!HHHHHH", 0x5151, 0, *header_counts) + body


QUESTION = wire_name(ORIGIN) + struct.pack("!HH", SOA, 1)
GOOD_OPT = opt_rr(options=((100, b"x"),))

ERRORS = [
    # (name, query, rcode, OPT in the answer)
    ("no-question-edns", _raw((0, 0, 0, 1), GOOD_OPT), FORMERR, True),
    ("no-question", _raw((0, 0, 0, 0), b""), FORMERR, False),
    ("two-opts", _raw((1, 0, 0, 2), QUESTION + GOOD_OPT + GOOD_OPT), FORMERR, False),
    ("opt-in-answer", _raw((1, 1, 0, 0), QUESTION + GOOD_OPT), FORMERR, False),
    ("opt-in-authority", _raw((1, 0, 1, 0), QUESTION + GOOD_OPT), FORMERR, False),
    ("opt-options-overrun", _raw((1, 0, 0, 1), QUESTION + b"\0" +
                                 struct.pack("!HHIHHH", 41, 1232, 0, 4, 100, 9)),
     FORMERR, False),
    ("trailing-garbage", _raw((1, 0, 0, 1), QUESTION + GOOD_OPT + b"\0"), FORMERR, False),
    ("refused-edns", build("example.org.", 1, edns=0), REFUSED, True),
    ("refused", build("example.org.", 1), REFUSED, False),
    ("notimp-edns", build(opcode=2, edns=0, flags=RD | CD), NOTIMP, True),
    ("badvers", build(edns=1, ednsflags=DO), BADVERS, True),
    ("ixfr-no-soa-edns", build(qtype=251, edns=0), FORMERR, True),
]


@pytest.mark.parametrize("proto", ["udp", "tcp"])
@pytest.mark.parametrize("name,query,rcode,has_opt", ERRORS, ids=[e[0] for e in ERRORS])
def test_error_answers(srv, knot, name, query, rcode, has_opt, proto):
    r = exchange("127.0.0.1", port_of(srv, "127.0.0.1"), query, proto == "tcp")
    assert r is not None
    assert r.rcode == rcode
    assert not r.answer
    assert (r.opt is not None) == has_opt
    if has_opt:
        assert r.opt.version == 0 and not r.opt.options
        assert r.opt.flags & ~DO == 0
    if name.startswith("ixfr"):
        return  # Knot checks the ACL first (NOTAUTH)
    # Knot agrees on whether the answer carries an OPT.
    theirs = exchange("127.0.0.1", knot.port, query, proto == "tcp")
    assert theirs is not None and (theirs.opt is not None) == has_opt


# ---- CH TXT version.bind / version.server -------------------------------------------------

def steerd_version() -> str:
    out = subprocess.run([STEERD, "--version"], capture_output=True, text=True, timeout=30)
    return "Steer " + out.stdout.split()[1]


def txt_of(r: Reply) -> bytes:
    rdata = r.answer[0][4]
    return rdata[1:1 + rdata[0]]


@pytest.mark.parametrize("proto,host", TRANSPORTS,
                         ids=[f"{p}-{'v6' if ':' in h else 'v4'}" for p, h in TRANSPORTS])
@pytest.mark.parametrize("name", ["version.bind.", "version.server.", "VERSION.Bind."])
def test_version_default(srv, name, proto, host):
    q = build(name, TXT, CH, edns=0, flags=RD)
    r = exchange(host, port_of(srv, host), q, proto == "tcp")
    assert_header(r, q, NOERROR, aa=False)
    assert_opt(r)
    assert len(r.answer) == 1 and r.answer[0][1:4] == (TXT, CH, 0)
    assert txt_of(r) == steerd_version().encode()


def test_version_other_types_and_names_refused(srv):
    port = port_of(srv, "127.0.0.1")
    for name, qtype in (("version.bind.", 1), ("version.bind.", 255), ("x.version.bind.", TXT),
                        ("authors.bind.", TXT), ("id.server.", TXT)):
        q = build(name, qtype, CH, edns=0)
        r = exchange("127.0.0.1", port, q, False)
        assert_header(r, q, REFUSED, aa=False)
        assert_opt(r)
        assert not r.answer


SERVER_VERSION_CONFIG = """server:
  listen: {listen}
  control-socket: {ctl}
  workers: 1
  tcp-workers: 1
  version: "ns.example 7"
{zones}"""


def test_version_configured_and_hidden(steerd):
    srv = steerd(zones={"compliance.test": ZONE},
                 config=SERVER_VERSION_CONFIG)
    port = srv.port
    q = build("version.bind.", TXT, CH)
    r = exchange("127.0.0.1", port, q, False)
    assert r.rcode == NOERROR and txt_of(r) == b"ns.example 7"
    text = srv.config_path.read_text().replace('version: "ns.example 7"', 'version: ""')
    srv.config_path.write_text(text)
    out = srv.ctl_json("reload")
    assert out.get("ok", True), out
    for name in ("version.bind.", "version.server."):
        r = exchange("127.0.0.1", port, build(name, TXT, CH, edns=0), True)
        assert r.rcode == REFUSED and not r.answer and r.opt is not None


# ---- IXFR at the current serial (RFC 1995 2) -----------------------------------------------

XFR_CONFIG = """server:
  listen: {listen}
  control-socket: {ctl}
  workers: 1
  tcp-workers: 1
zones:
  - domain: ixfr.test
    file: {dir}/ixfr.test.zone
    xfr-allow: [127.0.0.1, "::1"]
"""
IXFR_ZONE = ("$ORIGIN ixfr.test.\n$TTL 300\n@ SOA ns h 42 3600 900 604800 300\n@ NS ns\n"
             "ns A 192.0.2.1\n")


@pytest.fixture(scope="module")
def xfr_srv(module_launcher):
    return module_launcher(zones={"ixfr.test": IXFR_ZONE}, config=XFR_CONFIG,
                           listen=["127.0.0.1", "::1"])


def ixfr_query(serial: int, edns: int | None = None) -> bytes:
    soa = (b"\xc0\x0c" + struct.pack("!HHIH", SOA, 1, 0, 24) + b"\xc0\x0c\xc0\x0c" +
           struct.pack("!IIIII", serial, 0, 0, 0, 0))
    hdr = struct.pack("!HHHHHH", 0x7777, 0, 1, 0, 1, 0 if edns is None else 1)
    body = wire_name("ixfr.test.") + struct.pack("!HH", 251, 1) + soa
    return hdr + body + (opt_rr(edns) if edns is not None else b"")


@pytest.mark.parametrize("edns", [None, 0], ids=["noedns", "edns"])
@pytest.mark.parametrize("proto,host", TRANSPORTS,
                         ids=[f"{p}-{'v6' if ':' in h else 'v4'}" for p, h in TRANSPORTS])
def test_ixfr_current_serial_is_one_soa(xfr_srv, proto, host, edns):
    for serial in (42, 43):  # current, and newer than ours
        q = ixfr_query(serial, edns)
        r = exchange(host, port_of(xfr_srv, host), q, proto == "tcp")
        assert r is not None and r.rcode == NOERROR and r.flags & AA
        assert len(r.answer) == 1 and r.answer[0][1] == SOA
        assert struct.unpack("!I", r.answer[0][4][-20:-16])[0] == 42
        assert (r.opt is not None) == (edns is not None)
