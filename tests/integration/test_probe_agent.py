"""steer-probe against real targets, all inside a network namespace the test makes.

Inside the namespace (every packet stays there):
  127.0.0.2:53     Unbound serving probe.example.test. (dns answers; its query log shows
                   every name the agent asked)
  127.0.0.3        nothing on port 53: dns gets port unreachable, tcp gets a RST (tcp answers)
  127.0.0.4        nft drops UDP and TCP to port 53: only ICMP echo answers
  198.51.100.77    behind a veth to nowhere: everything is dropped (loss 100, no RTT)
  ::1              nothing on port 53 (tcp answers over IPv6)
  fd00::4          nft drops UDP and TCP to port 53: only ICMPv6 echo answers
  127.0.0.1:8053   the DNS node's /paths/demand, a Python HTTP server of the test encoding
                   demand bodies from the layout in src/gslb/pathfmt.h
  127.0.0.1:8054   the agent's /paths/table and /paths/status

Needs root, iproute2, nftables and unbound (scripts/setup-deps.sh test installs them).
"""
from __future__ import annotations

import ipaddress
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import STEERD, assert_no_sanitizer_report, wait_for
from fwdlab import NFT, UNBOUND, ns_socket, run

STEER_PROBE = os.path.abspath(os.environ.get("STEER_PROBE") or
                              Path(STEERD).parents[1] / "probe" / "steer-probe")
DNS_NAME = "probe.example.test."
NODE_PORT, AGENT_PORT = 8053, 8054
TOKEN = "0123456789abcdef0123456789abcdef"

ZONE = """$ORIGIN example.test.
$TTL 300
@ IN SOA ns1 hostmaster 1 3600 600 86400 300
@ IN NS ns1
ns1 IN A 127.0.0.1
probe IN A 127.0.0.1
"""

# ---- the formats (src/gslb/pathfmt.h) ------------------------------------------------------

ECS, URGENT = 0x01, 0x02


def demand_body(rows, generated_ms: int = 1) -> bytes:
    """rows: (prefix "10.0.0.0/24", probe address, volume, flags), any order."""
    out = []
    for prefix, probe, volume, flags in rows:
        net = ipaddress.ip_network(prefix)
        fam = 4 if net.version == 4 else 6
        p = net.network_address.packed.ljust(16, b"\0")
        a = ipaddress.ip_address(probe).packed.ljust(16, b"\0")
        out.append((fam, p, net.prefixlen, struct.pack(">BBBBI", fam, net.prefixlen, flags, 0,
                                                       volume) + p + a))
    out.sort(key=lambda r: (r[0], r[1], r[2]))
    return (b"STPD" + struct.pack(">BBHQII", 1, 0, 0, generated_ms, len(out), 0) +
            b"".join(r[3] for r in out))


def decode_table(body: bytes) -> dict:
    assert body[:4] == b"STPT", body[:16]
    version, flags, _, generated, n4, n6, name_len = struct.unpack(">BBHQIIB", body[4:25])
    assert version == 1 and flags == 0
    pos = 32
    name = body[pos:pos + name_len].decode()
    pos += name_len
    rows = {}
    for fam, n, size in ((4, n4, 12), (6, n6, 16)):
        for _ in range(n):
            if fam == 4:
                key, plen = struct.unpack(">IB", body[pos:pos + 5])
                addr = ipaddress.IPv4Address(key)
                rest = body[pos + 5:pos + 12]
            else:
                key, plen = struct.unpack(">QB", body[pos:pos + 9])
                addr = ipaddress.IPv6Address(key << 64)
                rest = body[pos + 9:pos + 16]
            loss, rtt, hops, answered, age = struct.unpack(">BHBBH", rest)
            rows[f"{addr}/{plen}"] = {"loss": loss, "rtt": rtt, "hops": hops,
                                      "answered": answered, "age": age}
            pos += size
    assert pos == len(body), "nothing after the last row"
    return {"name": name, "generated_ms": generated, "rows": rows}


# ---- HTTP inside the namespace -------------------------------------------------------------


def http_get(ns: str, path: str, headers: dict | None = None, port: int = AGENT_PORT):
    """GET http://127.0.0.1:port/path from inside @ns: (status, headers, body)."""
    s = ns_socket(ns, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(("127.0.0.1", port))
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n{extra}\r\n"
                  .encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return status, hdrs, body


class DemandNode:
    """A DNS node's /paths/demand in the namespace: conditional GET, optional bearer token,
    and modes for a node gone wrong ("garbage", "slow")."""

    def __init__(self, ns: str, port: int, token: str | None = None):
        self.body = demand_body([])
        self.etag = '"1"'
        self.mode = "good"
        self.token = token
        self.requests: list[dict] = []
        node = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                node.requests.append(dict(self.headers))
                if node.token and self.headers.get("Authorization") != f"Bearer {node.token}":
                    self.send_response(401)
                    self.end_headers()
                    return
                if node.mode == "slow":
                    time.sleep(3)
                body = b"STPD garbage" if node.mode == "garbage" else node.body
                if node.mode == "good" and self.headers.get("If-None-Match") == node.etag:
                    self.send_response(304)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.steer.demand")
                self.send_header("ETag", node.etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler, bind_and_activate=False)
        self.server.daemon_threads = True  # a "slow" reply must not hold up close()
        self.server.block_on_close = False
        self.server.socket.close()
        self.server.socket = ns_socket(ns, socket.SOCK_STREAM)
        self.server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.server_bind()
        self.server.server_activate()
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def set_rows(self, rows, generation: int):
        self.body = demand_body(rows, generation)
        self.etag = f'"{generation}"'

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# ---- the namespace -------------------------------------------------------------------------


class Site:
    """The namespace with the targets and Unbound; closed (processes by PID, namespace
    deleted) at the end."""

    def __init__(self, workdir: Path):
        self.ns = f"sprobe-{os.getpid()}-{random.randint(0, 99999)}"
        self.dir = workdir
        self.procs: list[subprocess.Popen] = []
        run("ip", "netns", "add", self.ns)
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def ip(self, *args: str):
        run("ip", "-n", self.ns, *args)

    def _build(self):
        self.ip("link", "set", "lo", "up")
        self.ip("addr", "add", "fd00::4/128", "dev", "lo")
        # The black hole: a veth pair with both ends here, the far end without an address,
        # and a static neighbour nobody owns: frames leave and are dropped, nothing answers.
        self.ip("link", "add", "hole0", "type", "veth", "peer", "name", "hole1")
        self.ip("addr", "add", "198.51.100.1/24", "dev", "hole0")
        self.ip("link", "set", "hole0", "up")
        self.ip("link", "set", "hole1", "up")
        self.ip("neigh", "add", "198.51.100.77", "lladdr", "02:00:00:00:00:77", "dev", "hole0",
                "nud", "permanent")
        self.nft_reset()
        self._unbound()
        self.nft_reset()  # from zero: the readiness queries above are not the agent's

    def nft_reset(self):
        """Count every probe leaving (by kind and destination), drop port 53 to 127.0.0.4."""
        script = """
table inet probe {
  chain out {
    type filter hook output priority 0;
    ip daddr 127.0.0.1 accept
    udp dport 53 counter name dns_probes
    tcp dport 53 tcp flags & (syn | ack) == syn counter name tcp_probes
    icmp type echo-request counter name icmp_probes
    icmpv6 type echo-request counter name icmp_probes
    ip daddr 127.0.0.4 udp dport 53 drop
    ip daddr 127.0.0.4 tcp dport 53 drop
    ip6 daddr fd00::4 udp dport 53 drop
    ip6 daddr fd00::4 tcp dport 53 drop
  }
  counter dns_probes {}
  counter tcp_probes {}
  counter icmp_probes {}
}
"""
        subprocess.run(["ip", "netns", "exec", self.ns, NFT, "delete", "table", "inet",
                        "probe"], capture_output=True)
        res = subprocess.run(["ip", "netns", "exec", self.ns, NFT, "-f", "-"], input=script,
                             capture_output=True, text=True, timeout=20)
        assert res.returncode == 0, res.stderr

    def probes_counted(self) -> dict:
        out = run("ip", "netns", "exec", self.ns, NFT, "-j", "list", "counters").stdout
        counts = {}
        for item in json.loads(out)["nftables"]:
            c = item.get("counter")
            if c:
                counts[c["name"]] = c["packets"]
        return counts

    def _unbound(self):
        conf = self.dir / "unbound.conf"
        self.unbound_log = self.dir / "unbound.log"
        conf.write_text(f"""server:
  interface: 127.0.0.2
  port: 53
  do-daemonize: no
  username: ""
  chroot: ""
  directory: "{self.dir}"
  pidfile: "{self.dir}/unbound.pid"
  use-syslog: no
  logfile: "{self.unbound_log}"
  log-queries: yes
  verbosity: 0
  do-ip6: no
  access-control: 127.0.0.0/8 allow
  local-zone: "example.test." static
  local-data: "probe.example.test. 300 IN A 127.0.0.1"
remote-control:
  control-enable: no
""")
        p = subprocess.Popen(["ip", "netns", "exec", self.ns, UNBOUND, "-d", "-c", str(conf)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)

        def answers():
            s = ns_socket(self.ns)
            s.settimeout(0.2)
            try:
                s.sendto(bytes.fromhex("abcd00000001000000000000") +
                         b"\x05probe\x07example\x04test\x00\x00\x01\x00\x01", ("127.0.0.2", 53))
                return s.recv(512)[:2] == b"\xab\xcd"
            except OSError:
                return False
            finally:
                s.close()
        wait_for(answers, 10, what="unbound to answer")

    def queried_names(self) -> list[str]:
        """Every query name in Unbound's query log ("info: CLIENT NAME TYPE CLASS")."""
        names = []
        for line in self.unbound_log.read_text(errors="replace").splitlines():
            m = re.search(r"info: ([0-9.]+|[0-9a-f:]+) (\S+) \S+ \S+$", line)
            if m:
                names.append(m.group(2))
        return names

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        run("ip", "netns", "del", self.ns, check=False)


@pytest.fixture
def site(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (a network namespace)")
    missing = [p for p in (NFT, UNBOUND) if not shutil.which(p) and not os.path.exists(p)]
    if missing:
        pytest.fail(f"missing {missing} (scripts/setup-deps.sh test installs them)")
    s = Site(tmp_path)
    yield s
    s.close()


def config(tmp: Path, *, rate: int = 200, interval: str = "60s", hot: str = "10s",
           token: bool = False, nodes: int = 1, extra: str = "") -> Path:
    zone = tmp / "example.test.zone"
    zone.write_text(ZONE)
    token_line = ""
    if token:
        tf = tmp / "paths.token"
        tf.write_text(TOKEN + "\n")
        tf.chmod(0o600)
        token_line = f"  token-file: {tf}\n"
    node_urls = ", ".join(f'"http://127.0.0.1:{NODE_PORT + 10 * i}/"' for i in range(nodes))
    path = tmp / "steer.yaml"
    path.write_text(f"""server:
  listen: [127.0.0.1:5300]
zones:
  - domain: example.test
    file: {zone}
datacenters:
  - name: dc1
  - name: dc2
paths:
  agents:
    - datacenter: dc1
      url: "http://127.0.0.1:{AGENT_PORT}/"
    - datacenter: dc2
      url: "http://127.0.0.1:{AGENT_PORT + 1}/"
{token_line}  probe:
    nodes: [{node_urls}]
    methods: [dns, tcp, icmp]
    dns-name: {DNS_NAME}
    rate: {rate}
    samples: 3
    interval: {interval}
    hot-interval: {hot}
    timeout: 400ms
    publish-interval: 500ms
    demand-interval: 500ms
{extra}""")
    return path


class Agent:
    def __init__(self, site: Site, conf: Path, *args: str):
        self.log = conf.parent / "steer-probe.log"
        self.out = open(self.log, "w")
        self.proc = subprocess.Popen(["ip", "netns", "exec", site.ns, STEER_PROBE, "-c",
                                      str(conf), "-d", "dc1", *args], stdout=self.out,
                                     stderr=subprocess.STDOUT)
        site.procs.append(self.proc)
        self.site = site

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def status(self, headers=None) -> dict:
        st, _, body = http_get(self.site.ns, "/paths/status", headers)
        assert st == 200, body
        return json.loads(body)

    def table(self, headers=None) -> dict:
        st, h, body = http_get(self.site.ns, "/paths/table", headers)
        assert st == 200, body
        assert h["content-type"] == "application/vnd.steer.paths"
        t = decode_table(body)
        t["etag"] = h["etag"]
        return t

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(5) == 0, self.text()
        self.out.close()
        assert_no_sanitizer_report(self.text())


def wait_up(site: Site, agent: Agent):
    def up():
        try:
            return http_get(site.ns, "/paths/status")[0] == 200
        except OSError:
            return False
    wait_for(up, 10, what="steer-probe to serve")


TARGETS = [("127.0.0.2/32", "127.0.0.2"),          # Unbound: dns
           ("127.0.0.3/32", "127.0.0.3"),          # closed port: tcp RST
           ("127.0.0.4/32", "127.0.0.4"),          # port 53 dropped: icmp
           ("198.51.100.0/24", "198.51.100.77"),   # black hole
           ("::/64", "::1"),                       # IPv6, closed port: tcp
           ("fd00::/64", "fd00::4")]               # IPv6, port 53 dropped: icmp


def test_measures_by_the_first_method_that_answers(site, tmp_path):
    node = DemandNode(site.ns, NODE_PORT)
    node.set_rows([(p, a, 10, 0) for p, a in TARGETS], 1)
    agent = Agent(site, config(tmp_path))
    try:
        wait_up(site, agent)

        def complete():
            rows = agent.table()["rows"]
            return rows if len(rows) == len(TARGETS) else None
        rows = wait_for(complete, 15, what="every prefix measured")
        t = agent.table()
        assert t["name"] == "dc1"
        for prefix in ("127.0.0.2/32", "127.0.0.3/32", "127.0.0.4/32", "::/64", "fd00::/64"):
            r = rows[prefix]
            assert r["loss"] == 0 and r["answered"] == 3, (prefix, r)
            assert 0 <= r["rtt"] < 200, (prefix, r)  # under 20 ms on loopback
        # dns and icmp replies carry a TTL: a neighbour is one hop; tcp gives none
        assert rows["127.0.0.2/32"]["hops"] == 1
        assert rows["127.0.0.4/32"]["hops"] == 1
        assert rows["fd00::/64"]["hops"] == 1, "the ICMPv6 reply's hop limit"
        assert rows["127.0.0.3/32"]["hops"] == 0
        hole = rows["198.51.100.0/24"]
        assert hole == {**hole, "loss": 100, "rtt": 0xffff, "answered": 0}, hole
        st = agent.status()
        assert st["probes"]["dns"]["answered"] >= 3
        assert st["probes"]["tcp"]["answered"] >= 6
        assert st["probes"]["icmp"]["answered"] >= 6
        assert st["icmp_raw4"] and st["icmp_raw6"], "root without ping_group_range: raw ICMP"
        assert st["rows"]["total"] == len(TARGETS) and st["rows"]["silent"] == 1
        assert st["nodes"][0]["up"] and st["nodes"][0]["rows"] == len(TARGETS)
        # only our own name was ever asked, and it was asked
        names = site.queried_names()
        assert names and set(n.lower() for n in names) == {DNS_NAME}, names
        # the node's If-None-Match: unchanged demand is a 304, not a new body
        wait_for(lambda: any(r.get("If-None-Match") == '"1"' for r in node.requests), 5,
                 what="a conditional GET")
        # the agent's ETag: the same table is a 304
        st, h, body = http_get(site.ns, "/paths/table", {"If-None-Match": t["etag"]})
        if st == 200:  # republished in between: the new tag must work
            st, h, body = http_get(site.ns, "/paths/table",
                                   {"If-None-Match": agent.table()["etag"]})
        assert st == 304 and body == b""
        assert http_get(site.ns, "/api/v1/status")[0] == 404, "no control API on the agent"
        agent.stop()
    finally:
        node.close()


def test_budget_is_never_exceeded(site, tmp_path):
    """300 prefixes that need 6 probes each (dns refused, then tcp) at 40 probes/s: the
    counters in the namespace see no more than the budget, and the backlog is reported."""
    node = DemandNode(site.ns, NODE_PORT)
    rows = [(f"127.0.{1 + i // 250}.{1 + i % 250}/32", f"127.0.{1 + i // 250}.{1 + i % 250}",
             1, 0) for i in range(300)]
    node.set_rows(rows, 1)
    agent = Agent(site, config(tmp_path, rate=40, interval="2s", hot="1s"))
    try:
        wait_up(site, agent)
        wait_for(lambda: agent.status()["rows"]["total"] == 300, 5, what="the demand merged")
        site.nft_reset()
        start = time.monotonic()
        time.sleep(4)
        counted = site.probes_counted()
        elapsed = time.monotonic() - start
        total = sum(counted.values())
        # the budget plus the bucket (a tenth of a second) plus one measurement in flight
        assert total <= 40 * elapsed + 4 + 3, (total, elapsed, counted)
        assert total >= 40 * (elapsed - 1), f"the budget is used: {total} in {elapsed:.1f}s"
        st = agent.status()
        assert st["budget"]["backlog"] > 0 and st["budget"]["needed"] > 40, st["budget"]
        assert "budget too small" in agent.text()
        # every probe went to an address the demand named
        asked = {a for _, a, _, _ in rows}
        assert st["rows"]["rejected"] == 0
        assert len(asked) == 300
        agent.stop()
    finally:
        node.close()


def test_probes_only_inside_the_demanded_prefixes(site, tmp_path):
    """A demand body with a probe address outside its prefix is refused whole: nothing is
    probed until the node sends a good one."""
    node = DemandNode(site.ns, NODE_PORT)
    node.set_rows([("127.0.0.2/32", "127.0.0.2", 5, 0), ("127.0.9.0/24", "127.0.0.3", 5, 0)], 1)
    agent = Agent(site, config(tmp_path))
    try:
        wait_up(site, agent)
        wait_for(lambda: "bad demand body" in agent.text(), 5, what="the body refused")
        time.sleep(1)
        assert agent.status()["rows"]["total"] == 0
        assert sum(site.probes_counted().values()) == 0, site.probes_counted()
        node.set_rows([("127.0.0.2/32", "127.0.0.2", 5, 0)], 2)
        wait_for(lambda: "127.0.0.2/32" in agent.table()["rows"], 10, what="a measurement")
        counted = site.probes_counted()
        # the 127.0.0.2 row answers dns: 3 probes, no other method, nothing elsewhere
        assert counted == {"dns_probes": 3, "tcp_probes": 0, "icmp_probes": 0}, counted
        assert site.queried_names().count(DNS_NAME) >= 3
        agent.stop()
    finally:
        node.close()


def test_token_required_both_ways(site, tmp_path):
    node = DemandNode(site.ns, NODE_PORT, token=TOKEN)
    node.set_rows([("127.0.0.2/32", "127.0.0.2", 5, URGENT)], 1)
    agent = Agent(site, config(tmp_path, token=True))
    try:
        def up():
            try:
                return http_get(site.ns, "/paths/status")[0]
            except OSError:
                return 0
        assert wait_for(up, 10, what="steer-probe to serve") == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        st, h, _ = http_get(site.ns, "/paths/table", {"Authorization": "Bearer wrong-token-x"})
        assert st == 401
        wait_for(lambda: "127.0.0.2/32" in agent.table(auth)["rows"], 10,
                 what="a measurement with the demand fetched with the token")
        assert all(r.get("Authorization") == f"Bearer {TOKEN}" for r in node.requests)
        agent.stop()
    finally:
        node.close()


def test_bad_nodes_do_not_stop_the_agent(site, tmp_path):
    """One node returns garbage, one is slower than fetch-timeout, one is down, one is good:
    the good one's demand is measured, the others are logged once each."""
    good = DemandNode(site.ns, NODE_PORT)
    garbage = DemandNode(site.ns, NODE_PORT + 10)
    slow = DemandNode(site.ns, NODE_PORT + 20)
    garbage.mode, slow.mode = "garbage", "slow"
    good.set_rows([("127.0.0.2/32", "127.0.0.2", 5, 0)], 1)
    agent = Agent(site, config(tmp_path, nodes=4, extra="  fetch-timeout: 1s\n"
                                                         "  fetch-interval: 2s\n"))
    try:
        wait_up(site, agent)
        wait_for(lambda: "127.0.0.2/32" in agent.table()["rows"], 10, what="a measurement")
        wait_for(lambda: "Timeout" in agent.text() or "timed out" in agent.text(), 8,
                 what="the slow node logged")
        time.sleep(2)
        text = agent.text()
        assert text.count("bad demand body") == 1, text
        assert text.count(f":{NODE_PORT + 30}/paths/demand") == 1, text
        nodes = {n["url"]: n for n in agent.status()["nodes"]}
        assert nodes[f"http://127.0.0.1:{NODE_PORT}/paths/demand"]["up"]
        assert not nodes[f"http://127.0.0.1:{NODE_PORT + 10}/paths/demand"]["up"]
        # the good node changes its demand: the new prefix is measured too
        good.set_rows([("127.0.0.2/32", "127.0.0.2", 5, 0), ("127.0.0.3/32", "127.0.0.3", 1,
                                                             URGENT)], 2)
        wait_for(lambda: "127.0.0.3/32" in agent.table()["rows"], 10, what="new demand")
        agent.stop()
    finally:
        for n in (good, garbage, slow):
            n.close()


def test_check_config(tmp_path):
    conf = config(tmp_path)
    ok = subprocess.run([STEER_PROBE, "-c", str(conf), "-d", "dc1", "--check-config"],
                        capture_output=True, text=True, timeout=10)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([STEER_PROBE, "-c", str(conf), "-d", "dc9", "--check-config"],
                         capture_output=True, text=True, timeout=10)
    assert bad.returncode == 1 and "dc9 has no entry in paths.agents" in bad.stderr
    assert f"{conf}:" in bad.stderr, "the error names the file and line"
    usage = subprocess.run([STEER_PROBE, "-c", str(conf)], capture_output=True, text=True,
                           timeout=10)
    assert usage.returncode == 2 and "--datacenter" in usage.stderr


def test_with_a_real_node(site, tmp_path):
    """steerd and steer-probe together: a query from a resolver nobody measured is answered
    by the fallback at once and reported as urgent; the agent fetches the demand, measures
    the resolver (Unbound answers the dns probe), publishes; the node fetches the table and
    the rtt policy answers from the measured datacenter."""
    import dns.message
    import dns.rdatatype

    conf = config(tmp_path, token=True)
    text = conf.read_text()
    tf = tmp_path / "paths.token"
    text = text.replace("server:\n  listen: [127.0.0.1:5300]\n",
                        f"server:\n  listen: [127.0.0.1:5300]\n"
                        f"  control-socket: {tmp_path}/steerd.sock\n"
                        f"http:\n  listen: [127.0.0.1:{NODE_PORT}]\n  token-file: {tf}\n")
    # dc2 first: the fallback (failover) answers dc2; a measured dc1 must win over no data
    text = text.replace("paths:\n", "services:\n  - name: www.example.test.\n    policy: rtt\n"
                        "    fallback-policy: failover\n    ttl: 30\n    datacenters:\n"
                        "      - { name: dc2, addresses: [198.51.100.10] }\n"
                        "      - { name: dc1, addresses: [192.0.2.10] }\n"
                        "paths:\n  fetch-interval: 500ms\n  fetch-timeout: 500ms\n"
                        "  demand-sample: 1\n", 1)
    conf.write_text(text)
    node_log = open(tmp_path / "steerd.log", "w")
    node = subprocess.Popen(["ip", "netns", "exec", site.ns, STEERD, "-c", str(conf)],
                            stdout=node_log, stderr=subprocess.STDOUT)
    site.procs.append(node)

    def ask():
        s = ns_socket(site.ns)
        s.settimeout(1)
        try:
            s.bind(("127.0.0.2", 0))  # the resolver: Unbound's address
            s.sendto(dns.message.make_query("www.example.test.", "A").to_wire(),
                     ("127.0.0.1", 5300))
            reply = dns.message.from_wire(s.recv(4096))
            return {rr.address for rrset in reply.answer for rr in rrset
                    if rrset.rdtype == dns.rdatatype.A}
        except OSError:
            return None
        finally:
            s.close()
    assert wait_for(ask, 10, what="steerd to answer") == {"198.51.100.10"}, "the fallback"
    agent = Agent(site, conf)
    try:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        wait_for(lambda: ask() == {"192.0.2.10"}, 15, what="the measured datacenter")
        rows = agent.table(auth)["rows"]
        assert rows["127.0.0.0/24"]["answered"] == 3 and rows["127.0.0.0/24"]["hops"] == 1
        assert set(n.lower() for n in site.queried_names()) == {DNS_NAME}
        st = agent.status(auth)
        assert st["nodes"][0]["up"] and st["probes"]["dns"]["answered"] >= 3, st
        agent.stop()
    finally:
        node.send_signal(signal.SIGTERM)
        assert node.wait(10) == 0
        node_log.close()


def test_icmp_without_privilege(site, tmp_path):
    """Where ping_group_range allows it, ICMP goes through the unprivileged datagram socket
    (no raw socket), and its replies still carry the TTL."""
    run("ip", "netns", "exec", site.ns, "sysctl", "-q", "-w",
        "net.ipv4.ping_group_range=0 2147483647")
    node = DemandNode(site.ns, NODE_PORT)
    node.set_rows([("127.0.0.4/32", "127.0.0.4", 5, 0), ("fd00::/64", "fd00::4", 5, 0)], 1)
    agent = Agent(site, config(tmp_path))
    try:
        wait_up(site, agent)
        rows = wait_for(lambda: (r := agent.table()["rows"]) and len(r) == 2 and r, 10,
                        what="both measured")
        for prefix in ("127.0.0.4/32", "fd00::/64"):
            assert rows[prefix]["answered"] == 3 and rows[prefix]["hops"] == 1, rows[prefix]
        st = agent.status()
        assert not st["icmp_raw4"] and not st["icmp_raw6"], st
        agent.stop()
    finally:
        node.close()
