"""steerd's caching forwarder on the security side, in the lab (tests/integration/fwdlab.py),
with the queries that reach the upstreams seen on the wire (fwdlab.Sniffer):

- allow-recursion: a client outside the allowed network gets REFUSED for names outside
  steerd's zones (also cached ones) and its query never goes upstream; a client inside gets
  the answer; steerd's own zone answers everyone, authoritatively, without asking upstream;
- every upstream query has a fresh random source port and ID (500 of them: all distinct, as
  steerd never reuses one within 1,024 queries; the issue asks >= 495);
- forged replies (wrong ID, wrong source port, wrong question) raced against a silent real
  upstream are dropped and never cached;
- RD=0 is answered from the cache only: a miss never goes upstream and gets SERVFAIL;
- a TC=1 reply from the upstream is asked again over TCP: the client gets the whole ~3 kB;
- the question's case comes back as the client wrote it, from the upstream and from cache;
- negative answers are cached: an NXDOMAIN asked twice goes upstream once.

Needs root (network namespaces) and a steerd with the forwarder."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import pytest

import fwdlab
from fwdlab import BIG_NAME, BIG_TXT, CLIENT, OUTSIDER, SERVICE, ZONE, query, upstream_addr

pytestmark = pytest.mark.lab

OWN_ZONE = "steer.lab"
OWN_ZONE_TEXT = f"""$ORIGIN {OWN_ZONE}.
$TTL 300
@ SOA ns hostmaster 1 3600 600 86400 30
@ NS ns
ns A 10.0.0.53
www A 192.0.2.53
"""
BUST_ADDR = "203.0.113.1"  # what *.bust.example.test really is
FORGED_ADDR = "6.6.6.6"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    yield from fwdlab.lab_for_tests(tmp_path_factory)


def start(lab):
    fwd = lab.start_forwarder("steerd", zones={OWN_ZONE: OWN_ZONE_TEXT})
    # Both links proven by their first probe rounds, and an RTT sample for each.
    for i in range(5):
        fwdlab.answers(lab.client, SERVICE, f"warm{i}.bust.{ZONE}", source=CLIENT)
    time.sleep(1.5)
    return fwd


@pytest.fixture(scope="module")
def steerd(lab):
    fwd = start(lab)
    yield fwd
    problems = fwd.stop_checked()
    assert not problems, problems


@contextlib.contextmanager
def sniff_all(lab, settle: float = 0.3):
    """Sniffers on every link; on exit, waits @settle s for late sends before stopping."""
    sns = [lab.sniff(n) for n in lab.up]
    for s in sns:
        s.start()
    try:
        yield sns
    finally:
        time.sleep(settle)
        for s in sns:
            s.stop()


def wire_name(name: str) -> bytes:
    return b"".join(bytes([len(x)]) + x.encode() for x in name.rstrip(".").split(".")) + b"\0"


def asked(sns, name: str) -> list:
    """Upstream queries for @name (any case) the sniffers saw."""
    w = wire_name(name).lower()
    return [p for s in sns for p in s.packets if p[6][:-4].lower() == w]


def addrs(r) -> list[str]:
    return sorted(rd.address for rrs in r.answer if rrs.rdtype == dns.rdatatype.A for rd in rrs)


def uniq(tag: str) -> str:
    return f"{tag}{os.urandom(4).hex()}"


def raw_udp(lab, wire: bytes, timeout: float = 2.0) -> bytes:
    s = fwdlab.ns_socket(lab.client)
    try:
        s.bind((CLIENT, 0))
        s.settimeout(timeout)
        s.connect((SERVICE, 53))
        s.send(wire)
        return s.recv(65535)
    finally:
        s.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_allow_recursion_and_own_zone(lab, steerd):
    name = f"{uniq('acl')}.bust.{ZONE}"
    with sniff_all(lab) as sns:
        r = query(lab.client, SERVICE, name, source=OUTSIDER)
        assert r.rcode() == dns.rcode.REFUSED, r
        assert not r.answer
    assert asked(sns, name) == []  # an outsider's query never goes upstream
    r = query(lab.client, SERVICE, name, source=CLIENT)
    assert r.rcode() == dns.rcode.NOERROR and addrs(r) == [BUST_ADDR], r
    assert r.flags & dns.flags.RA and not r.flags & dns.flags.AA
    # Cached now, still refused to the outsider (no cache snooping from outside).
    r = query(lab.client, SERVICE, name, source=OUTSIDER)
    assert r.rcode() == dns.rcode.REFUSED and not r.answer, r
    # Our own zone answers everyone, authoritatively, from the zone.
    with sniff_all(lab) as sns:
        for src in (OUTSIDER, CLIENT):
            r = query(lab.client, SERVICE, f"www.{OWN_ZONE}", source=src)
            assert r.rcode() == dns.rcode.NOERROR and addrs(r) == ["192.0.2.53"], r
            assert r.flags & dns.flags.AA, r
            r = query(lab.client, SERVICE, f"nothere.{OWN_ZONE}", source=src)
            assert r.rcode() == dns.rcode.NXDOMAIN and r.flags & dns.flags.AA, r
    assert asked(sns, f"www.{OWN_ZONE}") == [] and asked(sns, f"nothere.{OWN_ZONE}") == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_upstream_queries_have_fresh_random_ports_and_ids(lab, steerd):
    tag = uniq("sp")
    with lab.sniff(1) as sn:
        for i in range(520):
            fwdlab.answers(lab.client, SERVICE, f"{tag}x{i}.bust.{ZONE}", source=CLIENT,
                           timeout=1)
        time.sleep(0.3)
    got = [p for p in sn.packets if tag.encode() in p[6]][:500]
    assert len(got) == 500, len(got)
    assert all(p[1] == fwdlab.link_source(1) and p[3] == upstream_addr(1) for p in got)
    ports = {p[2] for p in got}
    ids = {p[5] for p in got}
    assert len(ports) == 500, len(ports)
    assert len(ids) == 500, len(ids)
    # Drawn from the wide range, not a narrow block of it.
    assert min(ports) < 20000 and max(ports) > 50000, (min(ports), max(ports))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_rd0_is_answered_from_cache_only(lab, steerd):
    cached = f"{uniq('rd')}.bust.{ZONE}"
    assert addrs(query(lab.client, SERVICE, cached, source=CLIENT)) == [BUST_ADDR]
    miss = f"{uniq('rd')}.bust.{ZONE}"
    with sniff_all(lab, settle=0.5) as sns:
        r = query(lab.client, SERVICE, cached, source=CLIENT, rd=False)
        assert r.rcode() == dns.rcode.NOERROR and addrs(r) == [BUST_ADDR], r
        assert not r.flags & dns.flags.RD
        r = query(lab.client, SERVICE, miss, source=CLIENT, rd=False)
        assert r.rcode() == dns.rcode.SERVFAIL and not r.answer, r
    assert asked(sns, cached) == [] and asked(sns, miss) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_truncated_upstream_reply_is_asked_again_over_tcp(lab, steerd):
    tcp_before = sum(lab.upstream_queries(n)[1] for n in lab.up)
    engine_tcp = steerd.ctl("cache")["engine"]["tcp_queries"]
    with sniff_all(lab) as sns:
        r = query(lab.client, SERVICE, BIG_NAME, "TXT", source=CLIENT, tcp=True, timeout=3)
    assert r.rcode() == dns.rcode.NOERROR, r
    texts = [x.decode() for rrs in r.answer if rrs.rdtype == dns.rdatatype.TXT
             for rd in rrs for x in rd.strings]
    assert texts == BIG_TXT, r
    assert len(r.to_wire()) > 3000
    assert asked(sns, BIG_NAME), "the first try goes over UDP"
    # The upstream's UDP reply had TC=1: steerd asked again over TCP.
    assert sum(lab.upstream_queries(n)[1] for n in lab.up) > tcp_before
    assert steerd.ctl("cache")["engine"]["tcp_queries"] > engine_tcp
    # From the cache now; over UDP the client gets it whole or (beyond steerd's UDP size) TC=1.
    q = dns.message.make_query(BIG_NAME, "TXT", use_edns=0, payload=4096)
    r = dns.message.from_wire(raw_udp(lab, q.to_wire()), ignore_trailing=True)
    assert r.rcode() == dns.rcode.NOERROR
    assert r.flags & dns.flags.TC or len(r.to_wire()) > 3000, r


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_question_case_is_preserved(lab, steerd):
    tag = uniq("case")
    spellings = (f"MiXeD{tag}.BuSt.Example.TEST", f"mixed{tag.upper()}.bust.EXAMPLE.test",
                 f"MIXED{tag}.BUST.EXAMPLE.TEST")
    with sniff_all(lab) as sns:
        for i, spelling in enumerate(spellings):
            q = dns.message.make_query(spelling, "A")
            wire = q.to_wire()
            reply = raw_udp(lab, wire)
            qlen = len(wire_name(spelling)) + 4
            assert reply[12:12 + qlen] == wire[12:12 + qlen], (spelling, reply[12:12 + qlen])
            r = dns.message.from_wire(reply)
            assert addrs(r) == [BUST_ADDR], r
            if i == 0:
                time.sleep(0.2)
                first = len(asked(sns, spelling))
    # The first was a miss, asked upstream; the other spellings were answered from the cache.
    assert first >= 1 and len(asked(sns, spellings[0])) == first


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_negative_answers_are_cached(lab, steerd):
    name = f"{uniq('nx')}.{ZONE}"
    with sniff_all(lab) as sns:
        r = query(lab.client, SERVICE, name, source=CLIENT)
        assert r.rcode() == dns.rcode.NXDOMAIN, r
        assert any(rrs.rdtype == dns.rdatatype.SOA for rrs in r.authority), r
        time.sleep(0.2)
        first = len(asked(sns, name))
        r = query(lab.client, SERVICE, name, source=CLIENT)
        assert r.rcode() == dns.rcode.NXDOMAIN, r
        soa = [rrs for rrs in r.authority if rrs.rdtype == dns.rdatatype.SOA]
        assert soa and soa[0].ttl <= 30, r  # the zone's negative TTL, counted down
    assert first >= 1
    assert len(asked(sns, name)) == first, "the second NXDOMAIN went upstream"


def forged_reply(txid: int, question: bytes, addr: str = FORGED_ADDR) -> bytes:
    """A reply (QR RD RA) to @question (wire, type and class included) with an A record for
    its name, TTL 3600."""
    hdr = struct.pack("!HHHHHH", txid, 0x8180, 1, 1, 0, 0)
    rr = struct.pack("!HHHIH", 0xC00C, 1, 1, 3600, 4) + socket.inet_aton(addr)
    return hdr + question + rr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_forged_replies_are_dropped_and_not_cached(lab, steerd):
    # Last in the file: link 1 is down in steerd's eyes for a while afterwards.
    names = {kind: f"{uniq('forge')}.bust.{ZONE}" for kind in ("id", "port", "question")}
    victim = f"www.{ZONE}"  # the name the wrong-question forgery claims to answer
    results: dict[str, object] = {}

    def ask(kind):
        try:
            results[kind] = query(lab.client, SERVICE, names[kind], source=CLIENT, timeout=3)
        except Exception as e:  # reported below
            results[kind] = e

    lags = {}
    before = steerd.ctl("cache")["engine"]["replies"]
    try:
        # Link 1's upstream goes silent, so the only replies arriving over link 1 are ours,
        # while steerd's queries wait there until the in-request retry asks link 2.
        lab.fault("drop", 1)
        with lab.sniff(1) as sn:
            threads = [threading.Thread(target=ask, args=(k,)) for k in names]
            for t in threads:
                t.start()
            pending = dict(names)
            deadline = time.monotonic() + 2
            while pending and time.monotonic() < deadline:
                for kind, name in list(pending.items()):
                    seen = [p for p in sn.packets if p[6][:-4].lower() == wire_name(name)]
                    if not seen:
                        continue
                    t_seen, _, sport, _, _, txid, question = seen[0]
                    if kind == "id":
                        lab.forge(1, sport, forged_reply(txid ^ 0x5A5A, question))
                    elif kind == "port":
                        lab.forge(1, sport, forged_reply(txid, question), sport=5353)
                    else:
                        other = wire_name(victim) + question[-4:]
                        lab.forge(1, sport, forged_reply(txid, other))
                    lags[kind] = time.monotonic() - t_seen
                    del pending[kind]
                time.sleep(0.001)
            for t in threads:
                t.join()
        assert not pending, f"steerd sent nothing over link 1 for {sorted(pending)}"
    finally:
        lab.heal(wait=True)
    # The forgeries arrived while steerd still waited on link 1 (its retry timeout is at
    # least 100 ms), so they were tested, not dropped by a closed socket: steerd counted the
    # wrong ID and the wrong question (the kernel drops the wrong port: connected sockets).
    assert all(v < 0.08 for v in lags.values()), lags
    after = steerd.ctl("cache")["engine"]["replies"]
    assert after["wrong-id"] > before["wrong-id"], (before, after)
    assert after["wrong-question"] > before["wrong-question"], (before, after)
    for kind, r in results.items():
        assert isinstance(r, dns.message.Message), (kind, r)
        assert r.rcode() == dns.rcode.NOERROR and addrs(r) == [BUST_ADDR], (kind, r)
    # Not cached either: asked again, the real data; the victim name was not poisoned.
    for kind, name in names.items():
        r = query(lab.client, SERVICE, name, source=CLIENT)
        assert addrs(r) == [BUST_ADDR], (kind, r)
    r = query(lab.client, SERVICE, victim, source=CLIENT)
    assert addrs(r) == ["192.0.2.80"], r
