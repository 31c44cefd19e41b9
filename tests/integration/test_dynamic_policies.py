"""The measured steering policies end to end: steerd fetches path tables from agents (real HTTP
servers in the test serving the binary layout of src/gslb/pathfmt.h, encoded here) and answers
rtt, completion-rate, hops and qos services per ECS client prefix; an unknown prefix gets the
fallback policy at once with the scope of the rows; a DOWN datacenter is skipped along the RTT
order; explain shows the row, the candidates and the sticky best. The load policies read a
`metrics` monitor against Prometheus text endpoints served by the test, with hysteresis.
"""

from __future__ import annotations

import http.server
import ipaddress
import struct
import threading
import time

import dns.edns
import dns.rdatatype
import pytest

from conftest import free_port, query, server_config, wait_for

ZONE = "paths.test"
ZONE_TEXT = f"""$ORIGIN {ZONE}.
$TTL 300
@   SOA ns1 hostmaster 1 3600 600 86400 60
    NS  ns1
ns1 A   192.0.2.53
"""
DCS = ("dc1", "dc2", "dc3")
ADDR = {"dc1": "198.18.0.1", "dc2": "198.18.0.2", "dc3": "198.18.0.3"}
DC_OF = {a: dc for dc, a in ADDR.items()}

# per datacenter: (prefix, rtt ms, loss %, hops, age s)
ROWS = {
    "dc1": [("198.51.100.0/24", 60.0, 0, 3, 12), ("203.0.113.0/24", 40.0, 0, 5, 4)],
    "dc2": [("198.51.100.0/24", 20.0, 10, 0, 12)],
    "dc3": [("198.51.100.0/24", 5.0, 30, 9, 12)],
}
ROWS6 = {
    "dc1": [("2001:db8:aa::/48", 30.0, 0, 4, 7)],
    "dc2": [("2001:db8:aa::/48", 10.0, 0, 4, 7)],
    "dc3": [("2001:db8:aa::/48", 90.0, 0, 4, 7)],
}


def now_ms() -> int:
    return int(time.time() * 1000)


def encode_table(name: str, generated_ms: int, rows4=(), rows6=()) -> bytes:
    """A site table, version 1 (src/gslb/pathfmt.h), rows sorted."""
    def row(r, shift):
        net = ipaddress.ip_network(r[0])
        rtt = 0xFFFF if r[1] is None else int(round(r[1] * 10))
        return (int(net.network_address) >> shift, net.prefixlen, r[2], rtt, r[3], 3, r[4])

    r4 = sorted(row(r, 0) for r in rows4)
    r6 = sorted(row(r, 64) for r in rows6)
    raw = name.encode()
    out = struct.pack(">4sBBHQIIB7x", b"STPT", 1, 0, 0, generated_ms, len(r4), len(r6), len(raw))
    out += raw
    out += b"".join(struct.pack(">IBBHBBH", *r) for r in r4)
    out += b"".join(struct.pack(">QBBHBBH", *r) for r in r6)
    return out


class Server:
    """A small threaded HTTP server on @host answering GET @path with what body() returns."""

    def __init__(self, host: str, port: int, path: str, content_type: str, body):
        self.body, self.path, self.ctype = body, path, content_type
        srv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                data = srv.body() if self.path == srv.path else None
                self.send_response(200 if data is not None else 404)
                self.send_header("Content-Type", srv.ctype)
                self.send_header("Content-Length", str(len(data or b"")))
                self.end_headers()
                self.wfile.write(data or b"")

        self.httpd = http.server.ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def agents():
    """One agent per datacenter serving its table (fresh generated_ms on every fetch)."""
    made = {}
    for dc in DCS:
        port = free_port()
        made[dc] = Server("127.0.0.1", port, "/paths/table", "application/vnd.steer.paths",
                          lambda dc=dc: encode_table(dc, now_ms(), ROWS[dc], ROWS6[dc]))
        made[dc].url = f"http://127.0.0.1:{port}/"
    yield made
    for s in made.values():
        s.stop()


def svc_yaml(name: str, policy: str, extra: str = "") -> str:
    dcs = "".join(f"      - {{ name: {dc}, addresses: [{ADDR[dc]}] }}\n" for dc in DCS)
    return (f"  - name: {name}.{ZONE}.\n    policy: {policy}\n    ttl: 30\n{extra}"
            f"    datacenters:\n{dcs}")


def paths_config(agents) -> str:
    dcs = "".join(f"  - {{ name: {dc} }}\n" for dc in DCS)
    agents_yaml = "".join(f'    - {{ datacenter: {dc}, url: "{a.url}" }}\n'
                          for dc, a in agents.items())
    return server_config(
        f"datacenters:\n{dcs}"
        "maps:\n  m1:\n    nets:\n      - { cidr: [192.0.0.0/16], datacenters: [dc2, dc1] }\n"
        "    default: [dc1]\n"
        "services:\n"
        + svc_yaml("rtt", "rtt", "    fallback-policy: failover\n")
        + svc_yaml("rttgeo", "rtt", "    map: m1\n")
        + svc_yaml("rttdown", "rtt")
        + svc_yaml("cr", "completion-rate")
        + svc_yaml("hops", "hops")
        + svc_yaml("qos", "qos")
        + svc_yaml("qoscr", "qos", "    qos: { rtt: 0, completion-rate: 100 }\n")
        + "gslb:\n  overrides:\n"
        f'    - {{ pattern: "service/rttdown.{ZONE}/dc3/*", state: down }}\n'
        f"paths:\n  agents:\n{agents_yaml}"
        "  fetch-interval: 300ms\n  fetch-timeout: 300ms\n")


def ask(srv, name: str, subnet: str | None, rdtype: str = "A"):
    """The datacenter answered for @name and the ECS scope (None without ECS)."""
    opts = []
    if subnet:
        net = ipaddress.ip_network(subnet, strict=False)
        opts = [dns.edns.ECSOption(str(net.network_address), net.prefixlen, 0)]
    resp = srv.udp(query(f"{name}.{ZONE}", rdtype, edns=True, options=opts))
    addrs = [rr.address for rrset in resp.answer for rr in rrset
             if rrset.rdtype == dns.rdatatype.A]
    scope = next((o.scopelen for o in resp.options if isinstance(o, dns.edns.ECSOption)), None)
    return (DC_OF.get(addrs[0]) if len(addrs) == 1 else addrs), scope


def explain(srv, *args: str) -> str:
    res = srv.ctl("explain", *args)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.fixture
def measured(steerd, agents):
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=paths_config(agents))
    wait_for(lambda: ask(srv, "rtt", "198.51.100.0/24")[0] == "dc3", 5,
             what="the agents' tables steering rtt")
    return srv


def test_path_policies_per_prefix(measured):
    srv = measured
    cases = [
        ("rtt", "198.51.100.0/24", "dc3", 24),     # 5 ms
        ("rtt", "198.51.100.77/32", "dc3", 24),    # inside the row
        ("rtt", "203.0.113.0/24", "dc1", 24),      # only dc1 measured it
        ("rtt", "2001:db8:aa::/48", "dc2", 48),    # IPv6 row, A answer
        ("cr", "198.51.100.0/24", "dc1", 24),      # no loss
        ("hops", "198.51.100.0/24", "dc1", 24),    # 3 hops
        ("qos", "198.51.100.0/24", "dc3", 24),     # F5 defaults: RTT weighs most
        ("qoscr", "198.51.100.0/24", "dc1", 24),   # completion rate only
        ("rttdown", "198.51.100.0/24", "dc2", 24),  # dc3 forced DOWN: the next RTT
    ]
    for name, subnet, dc, scope in cases:
        assert ask(srv, name, subnet) == (dc, scope), (name, subnet)


def test_unknown_prefix_answered_at_once_by_the_fallback(measured):
    srv = measured
    # failover fallback: the first datacenter, scoped to the row size it will be measured at
    assert ask(srv, "rtt", "192.0.2.0/24") == ("dc1", 24)
    # geo fallback: the map's choice; the scope is the longer of the map block and the row
    assert ask(srv, "rttgeo", "192.0.2.0/24") == ("dc2", 24)
    # an ECS prefix coarser than the rows cannot pick a row: the map decides at its scope
    assert ask(srv, "rttgeo", "192.0.0.0/16") == ("dc2", 16)
    # the measured prefix still steers the geo-fallback service by RTT
    assert ask(srv, "rttgeo", "198.51.100.0/24") == ("dc3", 24)


def test_explain_shows_row_candidates_and_sticky_best(measured):
    srv = measured
    text = explain(srv, f"rtt.{ZONE}", "192.0.2.200", "198.51.100.0/24")
    assert "paths: row 198.51.100.0/24 from ECS" in text, text
    assert "  dc1: rtt 60.0 ms, loss 0 %, hops 3, age 12 s" in text, text
    assert "  dc3: rtt 5.0 ms, loss 30 %, hops 9, age 12 s" in text, text
    assert "sticky best: dc3, first" in text, text
    text = explain(srv, f"rttgeo.{ZONE}", "192.0.2.200", "192.0.2.0/24")
    assert "paths: no measurement for 192.0.2.0/24 from ECS: fallback geo" in text, text
    assert "no measurement for this client: fallback policy geo decides" in text, text
    text = explain(srv, f"qos.{ZONE}", "192.0.2.200", "198.51.100.0/24")
    assert "score 64.2" in text and "its score counts 20 % more" in text, text


# ---- load policies --------------------------------------------------------------------------

LOAD_ADDR = {"dc1": "127.0.0.11", "dc2": "127.0.0.12", "dc3": "127.0.0.13"}


@pytest.fixture
def exporters():
    """A Prometheus text endpoint on each datacenter's address, all on one port."""
    port = free_port()
    conns = {"dc1": 500, "dc2": 80, "dc3": 300}
    made = []
    for dc, addr in LOAD_ADDR.items():
        made.append(Server(addr, port, "/metrics", "text/plain; version=0.0.4",
                           lambda dc=dc: (
                               "# TYPE app_connections gauge\n"
                               f'app_connections{{state="active"}} {conns[dc]}\n'
                               f'app_connections{{state="idle"}} 1\n').encode()))
    yield port, conns
    for s in made:
        s.stop()


def test_least_connections_with_hysteresis(steerd, exporters):
    port, conns = exporters
    dcs = "".join(f"  - {{ name: {dc} }}\n" for dc in DCS)
    sdcs = "".join(f"      - {{ name: {dc}, addresses: [{a}] }}\n" for dc, a in LOAD_ADDR.items())
    cfg = server_config(
        f"monitors:\n  load:\n    type: metrics\n    format: prometheus\n    port: {port}\n"
        "    interval: 300ms\n    timeout: 200ms\n"
        "    connections: 'app_connections{state=\"active\"}'\n"
        f"datacenters:\n{dcs}"
        f"services:\n  - name: lc.{ZONE}.\n    policy: least-connections\n    metrics: load\n"
        f"    ttl: 30\n    datacenters:\n{sdcs}")
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=cfg)

    def answer():
        resp = srv.udp(query(f"lc.{ZONE}", "A"))
        return [rr.address for rrset in resp.answer for rr in rrset][0]

    wait_for(lambda: answer() == LOAD_ADDR["dc2"], 5, what="the least loaded datacenter")
    text = explain(srv, f"lc.{ZONE}", "192.0.2.200")
    assert "  dc2: connections 80.0" in text and "sticky best: dc2" in text, text
    # dc2 gets a little busier than dc3: 300 is not 20 % better than 310, dc2 stays
    conns["dc2"] = 310
    time.sleep(1.5)
    assert answer() == LOAD_ADDR["dc2"]
    assert "connections 310.0" in explain(srv, f"lc.{ZONE}", "192.0.2.200")
    # clearly busier: dc3 takes over after two rounds
    conns["dc2"] = 900
    wait_for(lambda: answer() == LOAD_ADDR["dc3"], 5, what="dc3 after two rounds")
