"""The node's unicast address as the source of health probes and forwarded queries.

Every 127.0.0.0/8 address is local, so a listener on 127.0.0.1 sees which source a probe
took: 127.0.0.3 when that is the configured source, 127.0.0.1 (the kernel's choice) when none.
- The probes themselves (tcp, http, dns, exec's STEER_SOURCE) through tests/health/probe_run
  --source, on the host's loopback.
- The daemon's wiring (cluster.unicast -> monitors and upstreams without `source`) with a
  `cluster` section, which creates a holder interface: so steerd runs in a network namespace
  of this test (scc<pid>...), with the peers inside it too.
"""

import http.server
import json
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import textwrap
import threading
import time

import dns.message
import dns.rcode
import pytest

import conftest
from conftest import SERVER_CONFIG, free_port

PROBE_RUN = conftest.PROBE_RUN
SOURCE = "127.0.0.3"
ZONE = (conftest.ZONES_DIR / "example.test.zone").read_text()


def probe(*argv, env=None):
    proc = subprocess.run([PROBE_RUN, *argv], capture_output=True, text=True, timeout=30,
                          env=env)
    assert not any(m in proc.stderr for m in conftest.SANITIZER_MARKERS), proc.stderr
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.strip()]
    assert lines, f"probe_run {argv}: {proc.stdout} {proc.stderr}"
    return lines[-1]


class Peers:
    """The source addresses a server saw."""

    def __init__(self):
        self.seen = []
        self.lock = threading.Lock()

    def add(self, host):
        with self.lock:
            self.seen.append(host)

    def wait(self, n=1, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.seen) >= n:
                    return list(self.seen)
            time.sleep(0.02)
        return list(self.seen)


@pytest.fixture
def tcp_server():
    peers = Peers()
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    stop = threading.Event()

    def run():
        while not stop.is_set():
            try:
                conn, addr = srv.accept()
            except OSError:
                continue
            peers.add(addr[0])
            conn.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    yield srv.getsockname()[1], peers
    stop.set()
    t.join()
    srv.close()


@pytest.fixture
def http_server():
    peers = Peers()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            peers.add(self.client_address[0])
            body = b"ok"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = socketserver.TCPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1], peers
    srv.shutdown()
    srv.server_close()
    t.join()


@pytest.fixture
def dns_server():
    peers = Peers()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def run():
        while not stop.is_set():
            try:
                wire, addr = sock.recvfrom(4096)
            except OSError:
                continue
            peers.add(addr[0])
            sock.sendto(dns.message.make_response(dns.message.from_wire(wire)).to_wire(), addr)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    yield sock.getsockname()[1], peers
    stop.set()
    t.join()
    sock.close()


# --- the probes ------------------------------------------------------------------------------

@pytest.mark.parametrize("source", [None, SOURCE])
def test_tcp_probe_source(tcp_server, source):
    port, peers = tcp_server
    opts = ["--source", source] if source else []
    r = probe("tcp", f"127.0.0.1:{port}", *opts)
    assert r["ok"], r
    assert peers.wait() == [source or "127.0.0.1"]


@pytest.mark.parametrize("source", [None, SOURCE])
def test_http_probe_source(http_server, source):
    port, peers = http_server
    opts = ["--source", source] if source else []
    r = probe("http", f"127.0.0.1:{port}", "--path", "/health", *opts)
    assert r["ok"], r
    assert peers.wait() == [source or "127.0.0.1"]


@pytest.mark.parametrize("source", [None, SOURCE])
def test_dns_probe_source(dns_server, source):
    port, peers = dns_server
    opts = ["--source", source] if source else []
    r = probe("dns", f"127.0.0.1:{port}", "--qname", "probe.test.", *opts)
    assert r["ok"], r
    assert peers.wait() == [source or "127.0.0.1"]


def test_exec_probe_gets_steer_source():
    env = dict(os.environ, STEER_SOURCE="inherited")
    r = probe("exec", "127.0.0.1:53", "--source", SOURCE, "--", "sh", "-c",
              f'test "$STEER_SOURCE" = {SOURCE}', env=env)
    assert r["ok"], r
    # without a source it is set and empty: an inherited value never leaks through
    r = probe("exec", "127.0.0.1:53", "--", "sh", "-c",
              'test "${STEER_SOURCE-unset}" = ""', env=env)
    assert r["ok"], r


def test_source_of_the_other_family_is_not_used(tcp_server):
    port, peers = tcp_server
    r = probe("tcp", f"127.0.0.1:{port}", "--source", "::1")
    assert r["ok"], r
    assert peers.wait() == ["127.0.0.1"]


def test_source_that_is_not_local_fails_the_probe(tcp_server):
    port, peers = tcp_server
    r = probe("tcp", f"127.0.0.1:{port}", "--source", "192.0.2.99")
    assert not r["ok"]
    assert "bind 192.0.2.99" in r.get("start_error", r.get("detail", "")), r
    assert peers.wait(timeout=0.3) == []


# --- the daemon, in a namespace ----------------------------------------------------------------

# Runs inside the namespace: a TCP listener (the monitored backend) and a DNS upstream on
# 127.0.0.1, printing each peer as a JSON line.
PEERS = textwrap.dedent("""
    import json, socket, sys, threading
    import dns.message, dns.rrset
    tcp = socket.create_server(("127.0.0.1", int(sys.argv[1])))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", int(sys.argv[2])))
    lock = threading.Lock()
    def say(kind, host):
        with lock:
            print(json.dumps([kind, host]), flush=True)
    def accept():
        while True:
            conn, addr = tcp.accept()
            say("tcp", addr[0])
            conn.close()
    threading.Thread(target=accept, daemon=True).start()
    print(json.dumps(["ready", ""]), flush=True)
    while True:
        wire, addr = udp.recvfrom(4096)
        q = dns.message.from_wire(wire)
        r = dns.message.make_response(q)
        r.flags |= dns.flags.RA
        if q.question[0].rdtype == 1:
            r.answer.append(dns.rrset.from_text(q.question[0].name, 60, "IN", "A", "192.0.2.77"))
        say("udp", addr[0])
        udp.sendto(r.to_wire(), addr)
""")

# Runs inside the namespace: ask steerd until it answers a forwarded name; prints the rcode.
ASK = textwrap.dedent("""
    import sys, time
    import dns.message, dns.query
    deadline = time.monotonic() + 20
    while True:
        try:
            r = dns.query.udp(dns.message.make_query("www.elsewhere.test", "A"), "127.0.0.1",
                              port=int(sys.argv[1]), timeout=0.5)
            print(r.rcode(), [str(x) for x in r.answer])
            break
        except Exception as e:
            if time.monotonic() > deadline:
                print("error", e)
                break
            time.sleep(0.1)
""")


def ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@pytest.fixture
def netns():
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("network namespaces need root and iproute2")
    name = f"scc{os.getpid()}src"
    ip("netns", "add", name)
    try:
        ip("-n", name, "link", "set", "lo", "up")
        yield name
    finally:
        ip("netns", "del", name, check=False)


def test_daemon_probes_and_forwards_from_unicast(netns, steerd):
    backend, upstream, port = free_port(), free_port(), free_port()
    peers = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", PEERS,
                              str(backend), str(upstream)],
                             stdout=subprocess.PIPE, text=True)
    seen = Peers()
    try:
        assert json.loads(peers.stdout.readline())[0] == "ready"
        reader = threading.Thread(
            target=lambda: [seen.add(tuple(json.loads(ln))) for ln in peers.stdout],
            daemon=True)
        reader.start()
        config = SERVER_CONFIG + f"""cluster:
  node-id: n1
  service-addresses: 192.0.2.53
  interface: scc{os.getpid() % 10000}v
  unicast: {SOURCE}
monitors:
  web: {{{{ type: tcp, port: {backend}, interval: 200ms, timeout: 100ms }}}}
datacenters:
  - {{{{ name: dc1 }}}}
services:
  - name: svc.example.test
    monitor: web
    datacenters:
      - {{{{ name: dc1, addresses: [127.0.0.1] }}}}
forward:
  allow-recursion: [127.0.0.0/8]
  groups:
    - domain: .
      upstreams:
        - {{{{ name: up1, address: "127.0.0.1:{upstream}" }}}}
"""
        srv = steerd(zones={"example.test": ZONE}, listen=[("127.0.0.1", port)],
                     config=config, prefix=["ip", "netns", "exec", netns], ready=False)
        ask = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", ASK,
                              str(port)], capture_output=True, text=True, timeout=60)
        assert ask.stdout.startswith(f"{dns.rcode.NOERROR} "), ask.stdout + ask.stderr + srv.log()
        assert "192.0.2.77" in ask.stdout
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and {k for k, _ in seen.wait(0)} != {"tcp", "udp"}:
            time.sleep(0.05)
    finally:
        peers.kill()
        peers.wait()
    got = seen.wait(0)
    assert {k for k, _ in got} == {"tcp", "udp"}, got
    assert {h for _, h in got} == {SOURCE}, f"{got}\n{srv.log()}"
