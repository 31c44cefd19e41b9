"""Measured steering end to end (tests/integration/lab_delay.py): three sites whose probes to
the resolvers cross a userspace delay line with 5, 20 and 60 ms, a real steer-probe in each,
steerd in the node namespace fetching their tables with `policy: rtt`.

First the delay line on its own (packet code without root; the line in its namespaces with
root): each site's delay, TTL, jitter and swaps as configured, for ICMP, TCP and DNS over IPv4
and IPv6, and nothing answered that is not addressed to the resolver prefixes from a site.
"""

from __future__ import annotations

import os
import socket
import statistics
import struct
import subprocess
import time

import dns.flags
import dns.message
import dns.query
import dns.rcode
import pytest

import lab_delay
from lab_delay import PathsLab, site_ttl

pytestmark = pytest.mark.lab

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network "
                                "namespaces)")

# How much later than its configured delay a reply may arrive on this shared 2-core machine.
SLACK_MS = 25.0


# --------------------------------------------------------------------------------------------
# The packet code (no root)

def ipv4(src, dst, proto, payload, ttl=64):
    return lab_delay.ip_packet(socket.inet_pton(socket.AF_INET, src),
                               socket.inet_pton(socket.AF_INET, dst), proto, payload, ttl)


def ipv6(src, dst, proto, payload, ttl=64):
    return lab_delay.ip_packet(socket.inet_pton(socket.AF_INET6, src),
                               socket.inet_pton(socket.AF_INET6, dst), proto, payload, ttl)


def udp(sport, dport, data):
    return struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data


def responder(jitter=0):
    return lab_delay.Responder({
        "generation": 1, "prefixes": [lab_delay.RESOLVER_NET4, lab_delay.RESOLVER_NET6],
        "sites": {"10.70.1.2": {"name": "s5", "delay_ms": 5, "jitter": jitter, "ttl": 63},
                  "fd70:0:1::2": {"name": "s5", "delay_ms": 5, "jitter": jitter, "ttl": 63}}})


def test_checksum_of_a_known_header():
    # The IPv4 header of RFC 1071's usual worked example (checksum field zero).
    head = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert lab_delay.inet_checksum(head) == 0xB861


def test_dns_reply_echoes_id_and_question():
    q = dns.message.make_query("probe.example.test.", "AAAA")
    q.id = 4242
    r = responder()
    delay, reply, logged = r.handle(ipv4("10.70.1.2", "198.18.7.1", 17, udp(5555, 53,
                                                                             q.to_wire())))
    assert delay == pytest.approx(0.005)
    assert logged[0] == "s5" and logged[3:] == ("probe.example.test.", 28)
    assert lab_delay.inet_checksum(reply[:20]) == 0  # the IP header's checksum is right
    assert reply[8] == 63 and reply[12:16] == socket.inet_aton("198.18.7.1")
    seg = reply[20:]
    assert struct.unpack("!HH", seg[:4]) == (53, 5555)
    assert lab_delay.l4_checksum(reply[12:16], reply[16:20], 17, seg) == 0
    msg = dns.message.from_wire(seg[8:])
    assert msg.id == 4242 and msg.flags & dns.flags.QR and msg.rcode() == dns.rcode.NOERROR
    assert msg.question == q.question and not msg.answer


def test_ipv6_echo_and_tcp_checksums():
    r = responder()
    echo = struct.pack("!BBHHH", 128, 0, 0, 9, 1) + b"payload"
    _, reply, _ = r.handle(ipv6("fd70:0:1::2", "2001:db8:ffff:1::1", 58, echo))
    src, dst, seg = reply[8:24], reply[24:40], reply[40:]
    assert seg[0] == 129 and seg[4:] == echo[4:]
    assert lab_delay.l4_checksum(src, dst, 58, seg) == 0
    syn = struct.pack("!HHIIHHHH", 40000, 53, 1000, 0, (5 << 12) | 0x02, 1024, 0, 0)
    _, reply, _ = r.handle(ipv6("fd70:0:1::2", "2001:db8:ffff:1::1", 6, syn))
    seg = reply[40:]
    _, _, _, ack, flags = struct.unpack("!HHIIH", seg[:14])
    assert ack == 1001 and flags & 0x3F == 0x12  # SYN-ACK
    assert lab_delay.l4_checksum(reply[8:24], reply[24:40], 6, seg) == 0


def test_jitter_stays_within_bounds():
    r = responder(jitter=15)
    echo = struct.pack("!BBHHH", 8, 0, 0, 1, 1)
    delays = [r.handle(ipv4("10.70.1.2", "198.18.0.9", 1, echo))[0] for _ in range(300)]
    assert min(delays) >= 0.005 * 0.85 and max(delays) <= 0.005 * 1.15
    assert max(delays) - min(delays) > 0.005 * 0.2  # it does vary


def test_nothing_answered_outside_prefixes_or_sites():
    r = responder()
    q = dns.message.make_query("probe.example.test.", "A").to_wire()
    assert r.handle(ipv4("10.70.1.2", "203.0.113.1", 17, udp(1, 53, q))) is None
    assert r.handle(ipv4("10.70.9.2", "198.18.0.1", 17, udp(1, 53, q))) is None  # no site
    assert r.handle(ipv6("fd70:0:1::2", "2001:db8:fffe::1", 17, udp(1, 53, q))) is None
    assert r.handle(ipv4("10.70.1.2", "198.18.0.1", 17, udp(1, 54, q))) is None  # not 53
    reply = dns.message.make_response(dns.message.make_query("x.", "A")).to_wire()
    assert r.handle(ipv4("10.70.1.2", "198.18.0.1", 17, udp(1, 53, reply))) is None  # QR
    two = bytearray(q)
    two[5] = 2  # QDCOUNT 2
    assert r.handle(ipv4("10.70.1.2", "198.18.0.1", 17, udp(1, 53, bytes(two)))) is None
    assert r.handle(ipv4("10.70.1.2", "198.18.0.1", 17, udp(1, 53, q[:15]))) is None
    assert r.handle(b"\x45" + b"\0" * 10) is None
    assert r.counters["ignored-destination"] == 2 and r.counters["ignored-source"] == 1
    assert sum(r.answered.values()) == 0
    with pytest.raises(ValueError):
        r.apply({"prefixes": [lab_delay.RESOLVER_NET4],
                 "sites": {"10.70.1.2": {"delay_ms": 5, "jitter": 100}}})


# --------------------------------------------------------------------------------------------
# The delay line in its namespaces

@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the lab needs root (network namespaces)")
    lab = PathsLab(delays=(5, 20, 60), workdir=tmp_path_factory.mktemp("pathslab"))
    lab.build()
    names = list(lab.namespaces)
    yield lab
    lab.close()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in names if n in left.split()], left


def icmp_rtt(lab, site, dst, family=socket.AF_INET, ident=7):
    """(RTT ms, reply TTL or None for IPv6) of one ICMP echo from @site to @dst."""
    proto = socket.IPPROTO_ICMP if family == socket.AF_INET else socket.IPPROTO_ICMPV6
    s = lab.ns_socket(lab.site_ns[site], socket.SOCK_RAW, family, proto)
    try:
        s.settimeout(1.0)
        kind = 8 if family == socket.AF_INET else 128
        pkt = struct.pack("!BBHHH", kind, 0, 0, ident, 1) + os.urandom(8)
        if family == socket.AF_INET:
            pkt = pkt[:2] + struct.pack("!H", lab_delay.inet_checksum(pkt)) + pkt[4:]
        start = time.monotonic()
        s.sendto(pkt, (dst, 0))
        while True:
            data = s.recv(2048)
            ttl = None
            if family == socket.AF_INET:
                ttl, data = data[8], data[(data[0] & 0x0F) * 4:]
            reply_kind = 0 if family == socket.AF_INET else 129
            if data[0] == reply_kind and data[4:] == pkt[4:]:
                return (time.monotonic() - start) * 1000, ttl
    finally:
        s.close()


def tcp_rtt(lab, site, dst, family=socket.AF_INET):
    s = lab.ns_socket(lab.site_ns[site], socket.SOCK_STREAM, family)
    try:
        s.settimeout(1.0)
        start = time.monotonic()
        s.connect((dst, 53))
        return (time.monotonic() - start) * 1000
    finally:
        s.close()


def dns_rtt(lab, site, dst, family=socket.AF_INET, qname="probe.example.test."):
    s = lab.ns_socket(lab.site_ns[site], socket.SOCK_DGRAM, family)
    try:
        q = dns.message.make_query(qname, "A")
        start = time.monotonic()
        r = dns.query.udp(q, dst, timeout=1.0, sock=s)
        rtt = (time.monotonic() - start) * 1000
        assert r.id == q.id and r.question == q.question and r.rcode() == dns.rcode.NOERROR
        return rtt
    finally:
        s.close()


def best_of(n, fn):
    return min(fn() for _ in range(n))


TARGETS = {socket.AF_INET: "198.18.4.1", socket.AF_INET6: "2001:db8:ffff:4::1"}


@needs_root
@pytest.mark.parametrize("family", [socket.AF_INET, socket.AF_INET6], ids=["ipv4", "ipv6"])
def test_each_site_sees_its_delay(lab, family):
    dst = TARGETS[family]
    for site in lab.site_names:
        want = lab.delays[site]
        got = {"icmp": best_of(3, lambda: icmp_rtt(lab, site, dst, family)[0]),
               "tcp": best_of(3, lambda: tcp_rtt(lab, site, dst, family)),
               "dns": best_of(3, lambda: dns_rtt(lab, site, dst, family))}
        for kind, ms in got.items():
            assert want <= ms <= want + SLACK_MS, f"{site} {kind}: {ms:.1f} ms, want {want}"
        if family == socket.AF_INET:
            # The line's TTL, less wan's one forwarding hop.
            assert icmp_rtt(lab, site, dst)[1] == site_ttl(lab.site_index(site)) - 1


@needs_root
def test_delays_swap_and_jitter_while_running(lab):
    dst = TARGETS[socket.AF_INET]
    try:
        lab.set_delays({"s5": 60, "s60": 5})
        assert 60 <= best_of(3, lambda: tcp_rtt(lab, "s5", dst)) <= 60 + SLACK_MS
        assert 5 <= best_of(3, lambda: tcp_rtt(lab, "s60", dst)) <= 5 + SLACK_MS
        lab.set_delays({"s5": 5, "s60": 60}, jitter=15)
        samples = [icmp_rtt(lab, "s20", dst)[0] for _ in range(30)]
        assert min(samples) >= 20 * 0.85
        assert statistics.median(samples) <= 20 * 1.15 + SLACK_MS
        assert max(samples) - min(samples) > 1.0  # the jitter shows
    finally:
        lab.set_delays({"s5": 5, "s20": 20, "s60": 60}, jitter=0)


@needs_root
def test_only_resolver_prefixes_from_sites_are_answered(lab):
    before = lab.delay.status()
    # Another prefix routed into the line: read, never answered.
    lab.ip(lab.wan, "route", "add", "203.0.113.0/24", "dev", lab_delay.TUN_NAME)
    # The node (not a site) routed into the line for one address: never answered.
    lab.ip(lab.node, "route", "add", "198.18.200.1/32", "via", lab_delay.WAN_NODE4)
    try:
        with pytest.raises(socket.timeout):
            tcp_rtt(lab, "s5", "203.0.113.1")
        s = lab.ns_socket(lab.node, socket.SOCK_STREAM)
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):
            s.connect(("198.18.200.1", 53))
        s.close()
        time.sleep(0.6)  # the status file is rewritten twice a second
        after = lab.delay.status()
        assert after["ignored-destination"] > before["ignored-destination"]
        assert after["ignored-source"] > before["ignored-source"]
        assert after["answered"] == before["answered"]
    finally:
        lab.ip(lab.wan, "route", "del", "203.0.113.0/24")
        lab.ip(lab.node, "route", "del", "198.18.200.1/32")


@needs_root
def test_qnames_are_logged(lab):
    dns_rtt(lab, "s20", TARGETS[socket.AF_INET], qname="Q1.Probe.Example.TEST.")
    dns_rtt(lab, "s60", TARGETS[socket.AF_INET6], family=socket.AF_INET6)
    logged = lab.delay.qnames()
    assert ("s20", lab.site_addr("s20"), TARGETS[socket.AF_INET], "q1.probe.example.test.",
            1) in logged
    assert ("s60", lab.site_addr("s60", socket.AF_INET6), TARGETS[socket.AF_INET6],
            "probe.example.test.", 1) in logged
