"""Health monitors end to end: steerd probes real backends started by the tests (TCP listeners,
python http.server over HTTP and HTTPS, knotd for DNS, shell commands), and answers follow:
a dead backend leaves the answers within fall x interval, comes back after rise successes,
link monitors take a whole datacenter out, `requires` chains targets, admin overrides win,
states survive a restart through the state file, and the first answer after start-up already
knows which backends are dead.

Backends listen on 127.0.0.x addresses (all of 127/8 is local on Linux), so the answered
address is the probed one. Monitors run with intervals of 200-300 ms to keep the tests fast.
"""
from __future__ import annotations

import http.server
import os
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import pytest

from conftest import SERVER_CONFIG as SERVER, server_config as yaml, find_rrset, free_port, run_steerd, wait_for
from knot_support import Knotd

ZONE = "hc.example.test"
ZONE_TEXT = f"""$ORIGIN {ZONE}.
$TTL 3600
@   SOA ns1 hostmaster 1 7200 3600 1209600 300
    NS  ns1
ns1 A   192.0.2.53
"""


class TcpBackend:
    """A TCP listener that accepts and closes connections, in a thread; stop() and start()."""

    def __init__(self, host: str, port: int | None = None):
        self.host = host
        self.port = port or free_port()
        self.sock = None
        self.thread = None

    def start(self):
        fam = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((self.host, self.port))
        s.listen(64)
        self.sock = s
        self.thread = threading.Thread(target=self._serve, args=(s,), daemon=True)
        self.thread.start()
        return self

    def _serve(self, s):
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            conn.close()

    def stop(self):
        if self.sock:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
            self.sock = None
            self.thread.join(2)


class HttpBackend:
    """python http.server answering GET with a status and body the test can change."""

    def __init__(self, host: str, tls_dir: Path | None = None):
        self.host = host
        self.port = free_port()
        self.status = 200
        self.body = b"OK healthy\n"
        self.hosts_seen: list[str] = []
        self.tls_dir = tls_dir
        self.server = None

    def start(self):
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                backend.hosts_seen.append(self.headers.get("Host", ""))
                self.send_response(backend.status)
                self.send_header("Content-Length", str(len(backend.body)))
                self.end_headers()
                self.wfile.write(backend.body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((self.host, self.port), Handler)
        if self.tls_dir:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.tls_dir / "cert.pem", self.tls_dir / "key.pem")
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@pytest.fixture
def backends():
    started = []

    def make(kind, *args, **kw):
        b = kind(*args, **kw).start()
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()


def ask(srv, name, rdtype="A"):
    return srv.udp(dns.message.make_query(name, rdtype))


def answer(srv, name=f"www.{ZONE}", rdtype="A"):
    resp = ask(srv, name, rdtype)
    rr = find_rrset(resp.answer, name, rdtype)
    return (sorted(r.address for r in rr) if rr else []), (rr.ttl if rr else None)


def addrs(srv, name=f"www.{ZONE}"):
    return answer(srv, name)[0]


def monitors(srv):
    return {r["key"]: r for r in srv.ctl_json("monitors")}


def start(launcher, text, ready=True):
    return launcher(zones={ZONE: ZONE_TEXT}, config=yaml(text), ready=ready)


def tcp_config(port, extra="", mon_extra="", service_extra=""):
    return f"""monitors:
  web: {{ type: tcp, port: {port}, interval: 200, timeout: 100, fall: 2, rise: 2, ttl-floor: 2{mon_extra} }}
datacenters:
  - {{ name: dc1 }}
  - {{ name: dc2 }}
services:
  - name: www.{ZONE}
    policy: failover
    monitor: web
    ttl: 60{service_extra}
    datacenters:
      dc1: {{ addresses: [127.0.0.11] }}
      dc2: {{ addresses: [127.0.0.12] }}
{extra}"""


# --- tcp: down and back ---------------------------------------------------------------------

def test_tcp_backend_down_leaves_answers_and_returns(steerd, backends):
    port = free_port()
    b1 = backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    srv = start(steerd, tcp_config(port))
    assert addrs(srv) == ["127.0.0.11"]
    b1.stop()
    t0 = time.monotonic()
    wait_for(lambda: addrs(srv) == ["127.0.0.12"], 3, 0.02, "dc1 leaves the answers")
    took = time.monotonic() - t0
    # fall 2 x interval 200 ms (+ jitter 10%, timeout, publish) is well under 1 s.
    assert took < 1.0, took
    row = monitors(srv)[f"web@127.0.0.11:{port}"]
    assert row["state"] == "DOWN" and row["fail_run"] >= 2, row
    assert "connect" in row["last"]["detail"], row
    assert f"web 127.0.0.11:{port} DOWN: connect: Connection refused after 2 failures" \
        in srv.log(), srv.log()
    health = {r["name"]: r for r in srv.ctl_json("health")}
    h = health[f"service/www.{ZONE}/dc1/127.0.0.11"]
    assert h["state"] == "DOWN" and h["forced"] is False, h
    assert h["reason"] == f"monitor: DOWN (web@127.0.0.11:{port}: connect: Connection refused)", h
    assert h["monitors"][0]["key"] == f"web@127.0.0.11:{port}", h
    b1.start()
    wait_for(lambda: addrs(srv) == ["127.0.0.11"], 3, 0.02, "dc1 comes back")
    row = monitors(srv)[f"web@127.0.0.11:{port}"]
    assert row["state"] == "UP" and row["flaps"] == 2, row
    assert "UP: connected after 2 successes" in srv.log()
    out = srv.ctl("monitors").stdout
    assert f"web@127.0.0.11:{port}" in out and "UP" in out, out


def test_answers_change_before_the_control_api_reports_the_state(steerd, backends):
    """The health table is republished in the loop iteration of the deciding probe result,
    before the control socket is served again: once `steerctl monitors` says DOWN (or UP),
    the very next query already reflects it (within 100 ms of the result)."""
    port = free_port()
    b1 = backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    srv = start(steerd, tcp_config(port))
    key = f"web@127.0.0.11:{port}"
    b1.stop()
    wait_for(lambda: monitors(srv)[key]["state"] == "DOWN", 3, 0.0, "monitor DOWN")
    assert addrs(srv) == ["127.0.0.12"]
    b1.start()
    wait_for(lambda: monitors(srv)[key]["state"] == "UP", 3, 0.0, "monitor UP")
    assert addrs(srv) == ["127.0.0.11"]


def test_one_check_per_probe_target_shared_by_services(steerd, backends):
    port = free_port()
    backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    text = tcp_config(port) + f"""  - name: api.{ZONE}
    policy: failover
    monitor: web
    datacenters:
      dc1: {{ addresses: [127.0.0.11] }}
      dc2: {{ addresses: [127.0.0.12] }}
"""
    text = text.replace("\n\n  - name: api", "\n  - name: api")
    srv = start(steerd, text)
    keys = sorted(monitors(srv))
    assert keys == [f"web@127.0.0.11:{port}", f"web@127.0.0.12:{port}"], keys
    assert addrs(srv, f"api.{ZONE}") == ["127.0.0.11"]


def test_monitored_ttl_shortens_while_down(steerd, backends):
    port = free_port()
    b1 = backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    srv = start(steerd, tcp_config(port))
    assert answer(srv)[1] == 60  # steady UP: the service TTL
    b1.stop()
    wait_for(lambda: addrs(srv) == ["127.0.0.12"], 3, 0.02, "failover")
    # The answer depends on dc1 (examined and skipped): its DOWN cap, (rise) x 200 ms -> the
    # floor of 2 s, bounds the TTL so resolvers ask again soon.
    ttl = answer(srv)[1]
    assert ttl == 2, ttl


def test_first_answer_after_start_knows_a_dead_backend(steerd, backends):
    port = free_port()
    backends(TcpBackend, "127.0.0.12", port)  # dc1 (127.0.0.11) is dead from the start
    srv = start(steerd, tcp_config(port))
    # The very first query, with no state file: already failed over (no blind start).
    assert addrs(srv) == ["127.0.0.12"]
    assert "first round done" in srv.log(), srv.log()


def test_state_file_restores_states_across_restart(steerd, backends):
    port = free_port()
    b1 = backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    text = "health:\n  state-file: {dir}/health.state\n" + tcp_config(port)
    text = yaml(text).replace("{{dir}}", "{dir}")
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=text)
    b1.stop()
    wait_for(lambda: addrs(srv) == ["127.0.0.12"], 3, 0.02, "failover")
    # Written once per burst of changes, 100 ms after the first.
    state_file = steerd.workdir / "health.state"
    wait_for(lambda: f"web@127.0.0.11:{port} DOWN" in state_file.read_text(), 2, 0.02,
             "the state file records the DOWN")
    srv.stop()
    srv.returncode = None
    srv.proc = None
    srv.start()
    row = monitors(srv)[f"web@127.0.0.11:{port}"]
    assert row["state"] == "DOWN", row
    assert addrs(srv) == ["127.0.0.12"]


# --- http / https -----------------------------------------------------------------------------

def http_config(port, mtype="http", extra=""):
    return f"""monitors:
  web: {{ type: {mtype}, port: {port}, path: /health, host: www.{ZONE}, body: healthy,
         expect-status: [200], interval: 200, timeout: 150, fall: 2, rise: 2{extra} }}
datacenters:
  - {{ name: dc1 }}
  - {{ name: dc2 }}
services:
  - name: www.{ZONE}
    policy: failover
    monitor: web
    datacenters:
      dc1: {{ addresses: [127.0.0.21] }}
      dc2: {{ addresses: [127.0.0.22] }}
"""


def test_http_status_and_body_drive_the_state(steerd, backends):
    b1 = backends(HttpBackend, "127.0.0.21")
    b2 = backends(HttpBackend, "127.0.0.22")
    b2.port = b1.port  # both on the same port: restart b2 there
    b2.stop()
    b2.start()
    srv = start(steerd, http_config(b1.port))
    assert addrs(srv) == ["127.0.0.21"]
    assert f"www.{ZONE}" in b1.hosts_seen[-1], b1.hosts_seen
    b1.status = 503
    wait_for(lambda: addrs(srv) == ["127.0.0.22"], 3, 0.02, "HTTP 503 takes dc1 out")
    assert "DOWN: HTTP 503" in srv.log(), srv.log()
    b1.status = 200
    wait_for(lambda: addrs(srv) == ["127.0.0.21"], 3, 0.02, "200 brings it back")
    b1.body = b"maintenance\n"
    wait_for(lambda: addrs(srv) == ["127.0.0.22"], 3, 0.02, "body without 'healthy'")


@pytest.fixture
def tls_dir(tmp_path):
    d = tmp_path / "tls"
    d.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", f"/CN=www.{ZONE}", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem")], check=True, capture_output=True)
    return d


def test_https_with_self_signed_certificate(steerd, backends, tls_dir):
    b1 = backends(HttpBackend, "127.0.0.21", tls_dir=tls_dir)
    b2 = backends(HttpBackend, "127.0.0.22")
    b2.stop()
    b2.port = b1.port
    b2.tls_dir = tls_dir
    b2.start()
    # Verification off: the self-signed certificate is accepted.
    srv = start(steerd, http_config(b1.port, "https", ", tls-verify: false"))
    assert addrs(srv) == ["127.0.0.21"]
    b1.stop()
    wait_for(lambda: addrs(srv) == ["127.0.0.22"], 3, 0.02, "https backend stopped")
    srv.stop()


def test_https_verification_fails_on_self_signed(steerd, backends, tls_dir):
    b1 = backends(HttpBackend, "127.0.0.21", tls_dir=tls_dir)
    srv = start(steerd, http_config(b1.port, "https"))
    row = monitors(srv)[f"web@127.0.0.21:{b1.port}"]
    assert row["state"] == "DOWN", row
    assert "certificate" in row["last"]["detail"].lower() or "TLS" in row["last"]["detail"], row


# --- dns -------------------------------------------------------------------------------------

def test_dns_monitor_against_knotd(steerd, tmp_path):
    knot = Knotd(tmp_path / "knot", "probe.test.",
                 "$ORIGIN probe.test.\n@ 300 SOA ns h 1 2 3 4 5\n@ 300 NS ns\n"
                 "ns 300 A 192.0.2.1\nwww 300 A 192.0.2.80\n", addrs=("127.0.0.31",))
    try:
        text = f"""monitors:
  ns: {{ type: dns, port: {knot.port}, qname: www.probe.test., qtype: A, answer: 192.0.2.80,
        interval: 200, timeout: 150, fall: 2, rise: 2 }}
datacenters:
  - {{ name: dc1 }}
  - {{ name: dc2 }}
services:
  - name: www.{ZONE}
    policy: failover
    datacenters:
      dc1: {{ addresses: [127.0.0.31], monitor: ns }}
      dc2: {{ addresses: [127.0.0.32] }}
"""
        srv = start(steerd, text)
        assert monitors(srv)[f"ns@127.0.0.31:{knot.port}"]["state"] == "UP"
        assert addrs(srv) == ["127.0.0.31"]
        knot.stop()
        wait_for(lambda: addrs(srv) == ["127.0.0.32"], 3, 0.02, "knotd stopped")
    finally:
        knot.stop()


# --- exec ------------------------------------------------------------------------------------

def test_exec_monitor_follows_the_command(steerd, tmp_path):
    flag = tmp_path / "healthy"
    flag.write_text("")
    text = f"""monitors:
  script: {{ type: exec, command: [sh, -c, 'test -e {flag} && test "$STEER_TARGET_ADDR" = 127.0.0.41'],
            interval: 200, timeout: 150, fall: 2, rise: 2 }}
datacenters:
  - {{ name: dc1 }}
  - {{ name: dc2 }}
services:
  - name: www.{ZONE}
    policy: failover
    datacenters:
      dc1: {{ addresses: [127.0.0.41], monitor: script }}
      dc2: {{ addresses: [127.0.0.42] }}
"""
    srv = start(steerd, text)
    assert addrs(srv) == ["127.0.0.41"]
    flag.unlink()
    wait_for(lambda: addrs(srv) == ["127.0.0.42"], 3, 0.02, "command fails")
    assert "exit status 1" in monitors(srv)["script@127.0.0.41:0"]["last"]["detail"]
    flag.write_text("")
    wait_for(lambda: addrs(srv) == ["127.0.0.41"], 3, 0.02, "command succeeds again")


# --- overrides, static, requires, hold-down, slow start -----------------------------------------

def test_admin_override_wins_over_the_monitor(steerd, backends):
    port = free_port()
    backends(TcpBackend, "127.0.0.12", port)
    srv = start(steerd, tcp_config(port))
    assert addrs(srv) == ["127.0.0.12"]
    srv.ctl_json("override", "set", f"service/www.{ZONE}/dc1/*", "up")
    assert addrs(srv) == ["127.0.0.11"]
    h = {r["name"]: r for r in srv.ctl_json("health")}[f"service/www.{ZONE}/dc1/127.0.0.11"]
    assert h["forced"] and "monitor: DOWN" in h["reason"], h
    srv.ctl_json("override", "clear", f"service/www.{ZONE}/dc1/*")
    assert addrs(srv) == ["127.0.0.12"]


def test_static_monitor_and_requires(steerd, backends):
    port = free_port()
    backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    text = tcp_config(port).replace(
        "monitors:\n", "monitors:\n  maint: { type: static, state: down }\n").replace(
        "dc1: { addresses: [127.0.0.11] }",
        "dc1: { addresses: [{ address: 127.0.0.11, requires: [datacenter/dc3] }] }").replace(
        "  - { name: dc2 }\n", "  - { name: dc2 }\n  - { name: dc3, monitor: maint, probe: 127.0.0.1 }\n")
    srv = start(steerd, text)
    assert addrs(srv) == ["127.0.0.12"]  # dc1's address requires dc3's link, statically down
    rows = monitors(srv)
    assert rows["maint@127.0.0.1:0"]["type"] == "static", rows


def check_config_fails(tmp_path, gslb_text: str, needle: str):
    """steerd --check-config on a config with @gslb_text rejects it, naming @needle."""
    (tmp_path / "z.zone").write_text(ZONE_TEXT)
    conf = tmp_path / "bad.yaml"
    conf.write_text(yaml(gslb_text).format(
        listen='["127.0.0.1:5399"]', ctl=tmp_path / "c.sock", dir=tmp_path,
        zones=f"zones:\n  - domain: {ZONE}\n    file: z.zone\n"))
    res = run_steerd("-c", str(conf), "--check-config")
    assert res.returncode == 1, res.stdout + res.stderr
    assert needle in res.stderr + res.stdout, res.stderr


def test_requires_unknown_target_is_a_config_error(tmp_path):
    check_config_fails(tmp_path, tcp_config(80).replace(
        "dc1: { addresses: [127.0.0.11] }",
        "dc1: { addresses: [{ address: 127.0.0.11, requires: [service/nope/dc1/1.2.3.4] }] }"),
        "requires 'service/nope/dc1/1.2.3.4'")


def test_requires_an_unmonitored_target_is_a_config_error(tmp_path):
    check_config_fails(tmp_path, tcp_config(80).replace("    monitor: web\n", "").replace(
        "dc1: { addresses: [127.0.0.11] }",
        f"dc1: {{ addresses: [{{ address: 127.0.0.11, requires: [service/www.{ZONE}/dc2/127.0.0.12] }}] }}"),
        "no such monitored target")


def test_hold_down_and_slow_start(steerd, backends):
    port = free_port()
    b1 = backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    text = tcp_config(port, mon_extra=", hold-down: 1000, slow-start: 2000")
    srv = start(steerd, text)
    b1.stop()
    wait_for(lambda: addrs(srv) == ["127.0.0.12"], 3, 0.02, "down")
    b1.start()
    t0 = time.monotonic()
    wait_for(lambda: addrs(srv) == ["127.0.0.11"], 5, 0.02, "back after hold-down")
    took = time.monotonic() - t0
    assert took >= 1.0, took  # rise 2 x 200 ms alone would be ~0.4 s
    assert "hold-down" in srv.log()
    row = monitors(srv)[f"web@127.0.0.11:{port}"]
    assert 0 < row.get("ramp_percent", 0) < 100, row
    h = {r["name"]: r for r in srv.ctl_json("health")}[f"service/www.{ZONE}/dc1/127.0.0.11"]
    assert 0 < h.get("ramp_percent", 0) < 100, h
    wait_for(lambda: "ramp_percent" not in monitors(srv)[f"web@127.0.0.11:{port}"], 4, 0.1,
             "ramp ends")


# --- link failure in network namespaces --------------------------------------------------------

def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


@pytest.fixture
def netns():
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    name = f"steer-hc-{os.getpid()}"
    veth = f"vh{os.getpid() % 100000}"
    ip("netns", "add", name)
    try:
        ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
        ip("addr", "add", "10.199.0.1/30", "dev", veth)
        ip("link", "set", veth, "up")
        ip("-n", name, "addr", "add", "10.199.0.2/30", "dev", "eth0")
        ip("-n", name, "link", "set", "eth0", "up")
        ip("-n", name, "link", "set", "lo", "up")
        yield name, veth
    finally:
        ip("link", "del", veth, check=False)
        ip("netns", "del", name, check=False)


def test_link_monitor_takes_the_datacenter_out_when_the_link_fails(steerd, netns):
    name, veth = netns
    port = free_port()
    gw = subprocess.Popen(
        ["ip", "netns", "exec", name, "/usr/bin/python3", "-c",
         "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
         f"s.bind(('10.199.0.2',{port}))\ns.listen(8)\n"
         "while True:\n c,_=s.accept()\n c.close()\n"])
    try:
        wait_for(lambda: subprocess.run(["ip", "netns", "exec", name, "ss", "-ltn"],
                                        capture_output=True, text=True).stdout.count(str(port)) > 0,
                 5, 0.05, "gateway listener")
        text = f"""monitors:
  gw: {{ type: tcp, port: {port}, interval: 200, timeout: 150, fall: 2, rise: 2 }}
datacenters:
  - {{ name: telecom, monitor: gw, probe: 10.199.0.2 }}
  - {{ name: unicom }}
services:
  - name: www.{ZONE}
    policy: failover
    datacenters:
      telecom: {{ addresses: [198.51.100.10, 198.51.100.11] }}
      unicom: {{ addresses: [203.0.113.10] }}
"""
        srv = start(steerd, text)
        assert addrs(srv) == ["198.51.100.10", "198.51.100.11"]
        # The far side of the link fails. (Not the near side: with its route gone, the probe
        # would follow the default route out of the machine.)
        ip("-n", name, "link", "set", "eth0", "down")
        wait_for(lambda: addrs(srv) == ["203.0.113.10"], 3, 0.02, "link down -> unicom")
        row = monitors(srv)[f"gw@10.199.0.2:{port}"]
        assert row["state"] == "DOWN" and "timeout" in row["last"]["detail"], row
        ip("-n", name, "link", "set", "eth0", "up")
        wait_for(lambda: addrs(srv) == ["198.51.100.10", "198.51.100.11"], 5, 0.05,
                 "link back -> telecom")
    finally:
        gw.kill()
        gw.wait()


def test_reload_keeps_monitor_state_and_adds_new_checks(steerd, backends):
    port = free_port()
    backends(TcpBackend, "127.0.0.12", port)
    srv = start(steerd, tcp_config(port))
    before = monitors(srv)[f"web@127.0.0.11:{port}"]
    assert before["state"] == "DOWN"
    text = srv.config_path.read_text()
    assert "dc2: { addresses: [127.0.0.12] }" in text
    srv.config_path.write_text(text.replace("dc2: { addresses: [127.0.0.12] }",
                                            "dc2: { addresses: [127.0.0.12, 127.0.0.13] }"))
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    rows = monitors(srv)
    assert rows[f"web@127.0.0.11:{port}"]["since"] == before["since"], rows
    assert rows[f"web@127.0.0.11:{port}"]["probes"] >= before["probes"], rows
    wait_for(lambda: monitors(srv)[f"web@127.0.0.13:{port}"]["state"] == "DOWN", 3, 0.05,
             "new check probed")
    assert addrs(srv) == ["127.0.0.12"]


def test_reloads_replace_checks_with_probes_in_flight(steerd, backends, tmp_path):
    """Each reload changes every monitor, so every running check (with an HTTP request, a
    command or a DNS query in flight) is cancelled and replaced: no crash, no leak (the ASan
    run of the suite checks), answers keep coming, the new checks probe."""
    http = backends(HttpBackend, "127.0.0.61")
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.62", 0))
    dns_port = silent.getsockname()[1]
    try:
        def config(interval):
            return f"""monitors:
  web: {{ type: http, port: {http.port}, interval: {interval}, timeout: 80, fall: 1, rise: 1 }}
  cmd: {{ type: exec, command: [sh, -c, "sleep 0.05"], interval: {interval}, timeout: 80 }}
  ns:  {{ type: dns, port: {dns_port}, qname: x.test., interval: {interval}, timeout: 80 }}
datacenters:
  - {{ name: dc1 }}
  - {{ name: dc2 }}
  - {{ name: dc3 }}
services:
  - name: www.{ZONE}
    policy: failover
    datacenters:
      dc1: {{ addresses: [127.0.0.61], monitor: web }}
      dc2: {{ addresses: [127.0.0.63], monitor: cmd }}
      dc3: {{ addresses: [127.0.0.62], monitor: ns }}
"""
        srv = start(steerd, config(100))
        text = srv.config_path.read_text()
        for i in range(12):
            interval = 100 + 10 * ((i + 1) % 2)
            srv.config_path.write_text(text.replace("interval: 100", f"interval: {interval}"))
            time.sleep(0.03 + 0.01 * (i % 4))  # land at different points of the probes
            res = srv.ctl("reload")
            assert res.returncode == 0, res.stdout + res.stderr
            assert addrs(srv) == ["127.0.0.61"]
        rows = monitors(srv)
        assert len(rows) == 3, rows
        wait_for(lambda: all(r["probes"] > 0 for r in monitors(srv).values()), 3, 0.05,
                 "the new checks probe")
        assert srv.alive()
    finally:
        silent.close()


def test_ipv6_addresses_are_probed_over_ipv6(steerd, backends):
    port = free_port()
    b = backends(TcpBackend, "::1", port)
    text = f"""monitors:
  web: {{ type: tcp, port: {port}, interval: 200, timeout: 100, fall: 2, rise: 2 }}
datacenters:
  - {{ name: dc1 }}
  - {{ name: dc2 }}
services:
  - name: www.{ZONE}
    policy: failover
    datacenters:
      dc1: {{ addresses: ["::1"], monitor: web }}
      dc2: {{ addresses: ["2001:db8::2"] }}
"""
    srv = start(steerd, text)

    def aaaa():
        return answer(srv, rdtype="AAAA")[0]
    assert aaaa() == ["::1"]
    assert monitors(srv)[f"web@[::1]:{port}"]["state"] == "UP"
    b.stop()
    wait_for(lambda: aaaa() == ["2001:db8::2"], 3, 0.02, "IPv6 backend down")
    b.start()
    wait_for(lambda: aaaa() == ["::1"], 3, 0.02, "IPv6 backend back")
