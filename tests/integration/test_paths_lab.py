"""Measured steering end to end (tests/integration/lab_delay.py): three sites whose probes to
the resolvers cross a userspace delay line with 5, 20 and 60 ms, a real steer-probe in each,
steerd in the node namespace fetching their tables for a service with `policy: rtt` and
`fallback-policy: failover` (failover order s60, s5, s20, so the fallback never answers what
the measurements would).

First the delay line on its own (packet code without root; the line in its namespaces with
root): each site's delay, TTL, jitter and swaps as configured, for ICMP, TCP and DNS over IPv4
and IPv6, and nothing answered that is not addressed to the resolver prefixes from a site.

Then the scenarios, in order, on one lab (module fixture `steering`):
  - every client prefix (ECS from the test, IPv4 and IPv6; resolvers querying from their own
    address in the client namespace) ends on the 5 ms site, with the table's scope; the
    agents' tables and `steerctl paths` hold each site's delay, hops and the sticky best;
  - an unprobed prefix is answered at once by the fallback with the table's scope, then
    probed (urgent demand) and steered;
  - the delays swapped (5 <-> 60 ms) move every answer within the bound the intervals give,
    and back;
  - s5 and s20 within 5 % of each other under +-15 % jitter: the agents' raw RTTs cross,
    the answers never move;
  - the delay line saw no DNS probe for another name than dns-name, nor to a prefix no node
    reported;
  - s5's agent killed: its last table steers until path-ttl, then the best measured site left
    takes over; every agent killed: the fallback decides.
The intervals are short (probe 1 s, publish, fetch and demand 500 ms, path-ttl 5 s), so the
whole module takes about 45 s.
"""
from __future__ import annotations

import http.client
import ipaddress
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import time
from pathlib import Path

import dns.edns
import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

import lab_delay
from conftest import SANITIZER_MARKERS, STEERCTL, STEERD
from lab_delay import NODE_ADDR4, NODE_ADDR6, PathsLab, site_ttl

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network "
                                "namespaces)")


def in_lab(test):
    """A test of the lab's namespaces (marker lab; skipped without root). The packet-code
    tests above need neither."""
    return pytest.mark.lab(needs_root(test))

# How much later than its configured delay a reply may arrive on this shared 2-core machine.
SLACK_MS = 25.0
# How much shorter than the path an agent's RTT may be: steer-probe takes a sample's send time
# just after sendto()/connect(), so a preemption in between shortens it (seen: 18.9 ms for the
# 20 ms site under ASan on a busy machine).
AGENT_EARLY_MS = 2.0


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
    _, reply, _ = r.handle(ipv6("fd70:0:1::2", "2001:db8:1::1", 58, echo))
    src, dst, seg = reply[8:24], reply[24:40], reply[40:]
    assert seg[0] == 129 and seg[4:] == echo[4:]
    assert lab_delay.l4_checksum(src, dst, 58, seg) == 0
    syn = struct.pack("!HHIIHHHH", 40000, 53, 1000, 0, (5 << 12) | 0x02, 1024, 0, 0)
    _, reply, _ = r.handle(ipv6("fd70:0:1::2", "2001:db8:1::1", 6, syn))
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
    assert r.handle(ipv6("fd70:0:1::2", "2001:db9::1", 17, udp(1, 53, q))) is None
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
    s.setblocking(False)  # dnspython's timeout only holds on a non-blocking socket
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


TARGETS = {socket.AF_INET: "198.18.4.1", socket.AF_INET6: "2001:db8:4::1"}


@in_lab
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


@in_lab
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


@in_lab
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


@in_lab
def test_qnames_are_logged(lab):
    dns_rtt(lab, "s20", TARGETS[socket.AF_INET], qname="Q1.Probe.Example.TEST.")
    dns_rtt(lab, "s60", TARGETS[socket.AF_INET6], family=socket.AF_INET6)
    logged = lab.delay.qnames()
    assert ("s20", lab.site_addr("s20"), TARGETS[socket.AF_INET], "q1.probe.example.test.",
            1) in logged
    assert ("s60", lab.site_addr("s60", socket.AF_INET6), TARGETS[socket.AF_INET6],
            "probe.example.test.", 1) in logged


# --------------------------------------------------------------------------------------------
# Measured steering: three steer-probe agents, one steerd


STEER_PROBE = os.path.abspath(os.environ.get("STEER_PROBE")
                              or Path(STEERD).resolve().parents[2] / "src" / "probe"
                              / "steer-probe")
AGENT_PORT = 8054
NODE_HTTP = 8053
# The intervals of CONFIG, in seconds: the bounds below are computed from them.
PROBE_INTERVAL, PUBLISH, FETCH, DEMAND, PATH_TTL = 1.0, 0.5, 0.5, 0.5, 5.0
# What the machine may add to a bound: two cores shared with builds and other tests.
MARGIN_S = 1.0
SITE_OF = {"192.0.2.5": "s5", "192.0.2.20": "s20", "192.0.2.60": "s60"}
# Failover order s60, s5, s20: the fallback's answer (s60) is never the measured best (s5),
# and with s5's agent gone the best measured site (s20) is not the fallback's either.
FALLBACK_SITE = "s60"

ZONE = """$ORIGIN example.test.
$TTL 300
@      SOA ns1 hostmaster 1 7200 3600 1209600 300
       NS  ns1
ns1    A   192.0.2.1
probe  A   192.0.2.53
"""

CONFIG = f"""server:
  listen: ["{NODE_ADDR4}:53", "[{NODE_ADDR6}]:53"]
  control-socket: {{dir}}/ctl.sock
  workers: 1
  tcp-workers: 1
http:
  listen: ["{NODE_ADDR4}:{NODE_HTTP}"]
zones:
  - domain: example.test
    file: {{dir}}/example.test.zone
datacenters:
  - {{ name: s5 }}
  - {{ name: s20 }}
  - {{ name: s60 }}
paths:
  agents:
{{agents}}
  fetch-interval: {int(FETCH * 1000)}ms
  fetch-timeout: {int(FETCH * 1000)}ms
  path-ttl: {int(PATH_TTL)}s
  ipv4-prefix: 24
  ipv6-prefix: 48
  demand-sample: 1
  hysteresis: {{ margin: 20, min-difference: 10ms, rounds: 2 }}
  probe:
    nodes: ["http://{NODE_ADDR4}:{NODE_HTTP}/"]
    methods: [dns, tcp, icmp]
    dns-name: probe.example.test.
    rate: 200
    samples: 3
    interval: {int(PROBE_INTERVAL * 1000)}ms
    hot-interval: {int(PROBE_INTERVAL * 1000)}ms
    timeout: 500ms
    smoothing: 70
    publish-interval: {int(PUBLISH * 1000)}ms
    demand-interval: {int(DEMAND * 1000)}ms
services:
  - name: www.example.test.
    policy: rtt
    fallback-policy: failover
    ttl: 5
    datacenters:
      - {{ name: s60, addresses: [192.0.2.60] }}
      - {{ name: s5, addresses: [192.0.2.5] }}
      - {{ name: s20, addresses: [192.0.2.20] }}
"""

# The clients: ECS prefixes the test sends, and resolvers that query from their own address.
ECS_PREFIXES = ["198.18.10.0/24", "198.18.11.0/24", "198.18.12.0/24", "2001:db8:10::/56",
                "2001:db8:11::/56"]
SOURCES = ["198.18.5.10", "198.18.6.10", "2001:db8:5::10"]


class Steering:
    """The lab with steerd in the node namespace and a steer-probe in each site."""

    def __init__(self, lab: PathsLab):
        self.lab = lab
        self.dir = lab.dir
        agents = "\n".join(
            f'    - {{ datacenter: {name}, url: "http://{lab.site_addr(name)}:{AGENT_PORT}/" }}'
            for name in lab.site_names)
        (self.dir / "example.test.zone").write_text(ZONE)
        self.config = self.dir / "steer.yaml"
        self.config.write_text(CONFIG.replace("{agents}", agents).replace("{dir}",
                                                                          str(self.dir)))
        for addr in SOURCES:
            lab.add_client(addr)
        # The delay line's own tests asked it too: the agents' queries are those after.
        self.qnames_before = len(lab.delay.qnames())
        self.steerd = lab.start("steerd", [STEERD, "-c", str(self.config)], lab.node,
                                "steerd.log")
        self.agents = {name: self.start_agent(name) for name in lab.site_names}
        self.wait_ready()

    def start_agent(self, name):
        return self.lab.start(f"steer-probe {name}",
                              [STEER_PROBE, "--config", str(self.config), "--datacenter", name,
                               "--foreground"], self.lab.site_ns[name], f"probe-{name}.log")

    def wait_ready(self, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            for p in [self.steerd, *self.agents.values()]:
                if not p.alive():
                    pytest.fail(f"{p.name} exited:\n{p.log()}")
            try:
                if self.ask(qname="example.test.", rdtype="SOA").rcode == dns.rcode.NOERROR and \
                        all(self.agent_table(n) for n in self.lab.site_names):
                    return
            except (OSError, dns.exception.DNSException, http.client.HTTPException,
                    ValueError):
                pass
            if time.monotonic() > deadline:
                pytest.fail("the node or an agent is not ready:\n" + "\n".join(
                    f"--- {p.name}\n{p.log()}" for p in [self.steerd, *self.agents.values()]))
            time.sleep(0.1)

    # ---- asking -----------------------------------------------------------------------------

    def ask(self, ecs: str | None = None, source: str | None = None,
            qname="www.example.test.", rdtype="A", timeout=2.0) -> "Answer":
        """One query from the client namespace, with ECS @ecs or from resolver @source."""
        family = socket.AF_INET6 if source and ":" in source else socket.AF_INET
        server = NODE_ADDR6 if family == socket.AF_INET6 else NODE_ADDR4
        if ecs:
            net = ipaddress_network(ecs)
            q = dns.message.make_query(qname, rdtype, use_edns=0, options=[
                dns.edns.ECSOption(str(net.network_address), net.prefixlen)])
        else:
            q = dns.message.make_query(qname, rdtype)
        s = self.lab.client_socket(family)
        try:
            if source:
                s.bind((source, 0))
            s.setblocking(False)  # dnspython's timeout only holds on a non-blocking socket
            start = time.monotonic()
            r = dns.query.udp(q, server, timeout=timeout, sock=s)
            return Answer(r, time.monotonic() - start)
        finally:
            s.close()

    def site_for(self, client: str) -> str | None:
        """Which site www.example.test is answered with for @client (an ECS prefix or a
        resolver address)."""
        return (self.ask(ecs=client) if "/" in client else self.ask(source=client)).site

    def sites_now(self, clients) -> dict[str, str | None]:
        return {c: self.site_for(c) for c in clients}

    def wait_sites(self, clients, want: str, timeout: float) -> float:
        """Seconds until every client is answered with site @want (fails after @timeout)."""
        start = time.monotonic()
        while True:
            now = self.sites_now(clients)
            if all(v == want for v in now.values()):
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                pytest.fail(f"after {timeout:.1f} s not every client answered with {want}: "
                            f"{now}\n{self.explain(clients[0])}")
            time.sleep(0.05)

    def ctl_json(self, *args: str):
        """`steerctl --json ARGS` against the node: its "data", after checking it is ok."""
        res = subprocess.run(["ip", "netns", "exec", self.lab.node, STEERCTL, "-s",
                              str(self.dir / "ctl.sock"), "--json", *args],
                             capture_output=True, text=True, timeout=10)
        assert res.returncode == 0, res.stdout + res.stderr
        reply = json.loads(res.stdout)
        assert reply.get("ok") is True, reply
        return reply["data"]

    def explain(self, client: str) -> str:
        """`steerctl explain` for @client (an ECS prefix or a resolver address)."""
        if "/" in client:
            args = [str(ipaddress_network(client).network_address + 1), client]
        else:
            args = [client]
        res = subprocess.run(["ip", "netns", "exec", self.lab.node, STEERCTL, "-s",
                              str(self.dir / "ctl.sock"), "explain", "www.example.test.",
                              *args], capture_output=True, text=True, timeout=10)
        return res.stdout + res.stderr

    # ---- the agents -------------------------------------------------------------------------

    def agent_table(self, name: str) -> dict:
        """The site table agent @name serves, decoded (lab_delay.decode_table)."""
        addr = self.lab.site_addr(name)
        s = self.lab.ns_socket(self.lab.site_ns[name], socket.SOCK_STREAM)
        s.settimeout(2.0)
        s.connect((addr, AGENT_PORT))
        conn = http.client.HTTPConnection(addr, AGENT_PORT, timeout=2.0)
        conn.sock = s
        try:
            conn.request("GET", "/paths/table")
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                raise ValueError(f"{name}: GET /paths/table: {r.status}")
            assert r.getheader("Content-Type") == lab_delay.TABLE_CT
            return lab_delay.decode_table(body)
        finally:
            conn.close()

    def close(self) -> list[str]:
        """Stop everything; what went wrong at shutdown (exit status, sanitizer reports)."""
        problems = []
        for p in [*self.agents.values(), self.steerd]:
            if not p.alive() and p.proc.returncode == -signal.SIGKILL:
                continue  # killed by a test
            p.stop()
            log = p.log_path.read_text(errors="replace")
            if p.proc.returncode != 0:
                problems.append(f"{p.name} exited with {p.proc.returncode}:\n{log[-3000:]}")
            if any(m in log for m in SANITIZER_MARKERS):
                problems.append(f"sanitizer report in {p.name}'s output:\n{log[-5000:]}")
        return problems


def ipaddress_network(text):
    return ipaddress.ip_network(text, strict=False)


def row_of(client: str) -> tuple[int, str]:
    """(family, the table row's prefix) a client falls in: its /24 or /48."""
    net = ipaddress_network(client if "/" in client else client + ("/128" if ":" in client
                                                                    else "/32"))
    row = net.supernet(new_prefix=24 if net.version == 4 else 48)
    return net.version, str(row)


class Answer:
    def __init__(self, r: dns.message.Message, elapsed: float):
        self.rcode = r.rcode()
        self.addrs = sorted(rd.address for rrs in r.answer for rd in rrs
                            if rrs.rdtype == dns.rdatatype.A)
        scopes = [o.scopelen for o in r.options if isinstance(o, dns.edns.ECSOption)]
        self.scope = scopes[0] if scopes else None
        self.elapsed = elapsed
        self.site = SITE_OF.get(self.addrs[0]) if len(self.addrs) == 1 else None


ALL_CLIENTS = ECS_PREFIXES + SOURCES
# A round: every prefix measured once (probe interval). After a change of the delays the
# measurement in flight may still straddle it (one round), then two rounds of new values pass
# the hysteresis (rounds: 2), then the agent publishes and the node fetches once more.
ROUND_S = PROBE_INTERVAL
SWAP_BOUND = ROUND_S + 2 * ROUND_S + PUBLISH + FETCH


@pytest.fixture(scope="module")
def steering(lab):
    for path in (STEERD, STEER_PROBE):
        if not os.path.exists(path):
            pytest.fail(f"{path} is not built")
    st = Steering(lab)
    try:
        yield st
    finally:
        problems = st.close()
        lab.procs.clear()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@in_lab
def test_every_prefix_steers_to_the_5ms_site(steering):
    first = steering.sites_now(ALL_CLIENTS)
    assert all(site is not None for site in first.values()), first
    took = steering.wait_sites(ALL_CLIENTS, "s5", timeout=15)
    print(f"every prefix on the 5 ms site {took:.2f} s after the first queries")
    for _ in range(3):
        for client in ALL_CLIENTS:
            a = steering.ask(ecs=client) if "/" in client else steering.ask(source=client)
            assert a.site == "s5", (client, a.addrs)
            if "/" in client:  # the decision's granularity is the table's
                assert a.scope == (24 if ":" not in client else 48), (client, a.scope)
        time.sleep(0.3)
    # What the agents measured: each prefix's RTT is its site's delay; hops grow with the
    # site's TTL distance; nothing lost.
    tables = {name: steering.agent_table(name) for name in steering.lab.site_names}
    hops = {}
    for name, table in tables.items():
        assert table["name"] == name
        delay = steering.lab.delays[name]
        for client in ALL_CLIENTS:
            family, row = row_of(client)
            cell = table[f"rows{family}"].get(row)
            assert cell is not None, f"{name} has no row {row}: {sorted(table['rows4'])}"
            assert (delay - AGENT_EARLY_MS) * 10 <= cell["rtt"] <= (delay + SLACK_MS) * 10, \
                (name, row, cell)
            assert cell["loss"] == 0 and cell["answered"] >= 1, (name, row, cell)
            hops.setdefault(name, set()).add(cell["hops"])
    assert max(hops["s5"]) < min(hops["s20"]) and max(hops["s20"]) < min(hops["s60"]), hops
    # What the node merged, as `steerctl paths` shows it: the same RTTs, s5 the sticky best,
    # the prefix's demand with the address the agents probe.
    state = steering.ctl_json("paths")
    assert {a["datacenter"]: a["state"] for a in state["agents"]} == \
        {name: "up" for name in steering.lab.site_names}
    for client in ALL_CLIENTS:
        addr = str(ipaddress_network(client).network_address + 1) if "/" in client else client
        data = steering.ctl_json("paths", addr)
        assert data["row"]["prefix"] == row_of(client)[1] and data["row"]["best"] == "s5", data
        for col in data["row"]["columns"]:
            delay = steering.lab.delays[col["datacenter"]]
            assert not col["empty"], col
            assert delay - AGENT_EARLY_MS <= col["rtt_ms"] <= delay + SLACK_MS, col
        assert data["prefix_demand"]["ecs"] == ("/" in client), data["prefix_demand"]
        if "/" not in client:
            assert data["prefix_demand"]["probe"] == client, data["prefix_demand"]
    text = steering.explain("198.18.10.0/24")
    assert "row 198.18.10.0/24 from ECS" in text and "sticky best: s5" in text, text


@in_lab
def test_unprobed_prefix_is_answered_at_once_by_the_fallback(steering):
    for client, scope in (("198.18.99.0/24", 24), ("2001:db8:99::/56", 48)):
        a = steering.ask(ecs=client)
        assert a.rcode == dns.rcode.NOERROR and a.site == FALLBACK_SITE, (client, a.addrs)
        assert a.scope == scope, (client, a.scope)
        assert a.elapsed < 0.5, a.elapsed  # no waiting for a probe
        took = steering.wait_sites([client], "s5", timeout=DEMAND + ROUND_S + PUBLISH
                                   + FETCH + 2 * MARGIN_S)
        print(f"{client}: fallback at once, steered to s5 {took:.2f} s later")


@in_lab
def test_swapped_delays_move_answers_within_two_rounds(steering):
    lab = steering.lab
    assert steering.sites_now(ALL_CLIENTS) == {c: "s5" for c in ALL_CLIENTS}
    try:
        lab.set_delays({"s5": 60, "s60": 5})
        took = steering.wait_sites(ALL_CLIENTS, "s60", timeout=SWAP_BOUND + MARGIN_S)
        print(f"5 <-> 60 ms: every prefix on s60 after {took:.2f} s (bound "
              f"{SWAP_BOUND:.1f} s + {MARGIN_S} s)")
    finally:
        lab.set_delays({"s5": 5, "s60": 60})
    took = steering.wait_sites(ALL_CLIENTS, "s5", timeout=SWAP_BOUND + MARGIN_S)
    print(f"and back on s5 after {took:.2f} s")


@in_lab
@pytest.mark.timing  # jitter statistics over time
def test_jitter_never_flips_answers(steering):
    """s5 and s20 within 5 % of each other under +-15 % jitter: the raw measurements cross
    (checked in the agents' tables, so the test could see a flip), the answers never do."""
    lab = steering.lab
    steering.wait_sites(ALL_CLIENTS, "s5", timeout=SWAP_BOUND + MARGIN_S)
    crossings = 0
    seen = set()
    try:
        lab.set_delays({"s5": 20, "s20": 21}, jitter=15)
        end = time.monotonic() + 8 * ROUND_S
        last_gen = None
        while time.monotonic() < end:
            now = steering.sites_now(ALL_CLIENTS)
            assert all(v == "s5" for v in now.values()), now
            seen.update(now.values())
            t5, t20 = steering.agent_table("s5"), steering.agent_table("s20")
            if (t5["generated_ms"], t20["generated_ms"]) != last_gen:
                last_gen = (t5["generated_ms"], t20["generated_ms"])
                for client in ALL_CLIENTS:
                    family, row = row_of(client)
                    crossings += t20[f"rows{family}"][row]["rtt"] < \
                        t5[f"rows{family}"][row]["rtt"]
            time.sleep(0.1)
    finally:
        lab.set_delays({"s5": 5, "s20": 20}, jitter=0)
    print(f"{crossings} raw crossings of s20 below s5 in the agents' tables, answers: {seen}")
    assert crossings > 0


@in_lab
def test_probes_ask_only_for_dns_name(steering):
    logged = steering.lab.delay.qnames()[steering.qnames_before:]
    assert logged, "no DNS probe reached the delay line"
    assert {q[3] for q in logged} == {"probe.example.test."}
    assert {q[4] for q in logged} <= {1, 28}
    assert {q[0] for q in logged} == set(steering.lab.site_names)
    # Probes went only to prefixes some node reported.
    wanted = {row_of(c)[1] for c in ALL_CLIENTS + ["198.18.99.0/24", "2001:db8:99::/56"]}
    assert {row_of(q[2])[1] for q in logged} <= wanted


@in_lab
def test_killed_agent_keeps_its_table_until_path_ttl_then_falls_back(steering):
    steering.wait_sites(ALL_CLIENTS, "s5", timeout=SWAP_BOUND + MARGIN_S)
    steering.agents["s5"].kill()
    killed = time.monotonic()
    # Until its last table is path-ttl old the node keeps steering to s5 ...
    while time.monotonic() - killed < PATH_TTL - PUBLISH - FETCH - 0.5:
        assert steering.sites_now(ALL_CLIENTS) == {c: "s5" for c in ALL_CLIENTS}
        time.sleep(0.1)
    # ... then s5 has no measurement: the best measured site left takes over.
    steering.wait_sites(ALL_CLIENTS, "s20", timeout=PUBLISH + 2 * FETCH + MARGIN_S + 1.0)
    moved = time.monotonic() - killed
    print(f"s5's agent killed: answers left s5 after {moved:.2f} s (path-ttl {PATH_TTL} s)")
    assert moved >= PATH_TTL - PUBLISH - FETCH - 0.5
    agents = {a["datacenter"]: a["state"] for a in steering.ctl_json("paths")["agents"]}
    assert agents["s5"] != "up" and agents["s20"] == agents["s60"] == "up", agents
    row = steering.ctl_json("paths", "198.18.10.1")["row"]
    assert [c["datacenter"] for c in row["columns"] if not c["empty"]] == ["s20", "s60"], row
    # Every agent gone: no measurement at all, the fallback (failover) decides.
    for name in ("s20", "s60"):
        steering.agents[name].kill()
    killed = time.monotonic()
    steering.wait_sites(ALL_CLIENTS, FALLBACK_SITE, timeout=PATH_TTL + FETCH + MARGIN_S + 1.0)
    moved = time.monotonic() - killed
    assert moved >= PATH_TTL - PUBLISH - FETCH - 0.5, moved
    a = steering.ask(ecs="198.18.10.0/24")
    assert a.scope == 24
