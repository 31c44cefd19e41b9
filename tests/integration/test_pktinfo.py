"""Replies leave from the address the query arrived at (IP_PKTINFO / IPV6_RECVPKTINFO), so a
wildcard bind serves service addresses on loopback or dummy interfaces. The clients use
connected UDP sockets, which the kernel only hands replies from the address they sent to."""

import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from conftest import free_port, query

ZONES = {"example.test": "example.test.zone"}


def ask_connected(host, port, name="www.example.test"):
    import socket
    import dns.message
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(2.0)
        s.connect((host, port))
        q = query(name, "A")
        s.send(q.to_wire())
        try:
            r = dns.message.from_wire(s.recv(4096))
        except (TimeoutError, OSError):
            return None
        return r.answer[0][0].address if r.answer else "empty"


def test_wildcard_bind_replies_from_secondary_loopback_address(steerd):
    """127.0.0.2 is local but not the address the kernel would pick as source toward
    127.0.0.1: without IP_PKTINFO the reply would come from 127.0.0.1 and be dropped."""
    port = free_port()
    steerd(zones=ZONES, listen=[("0.0.0.0", port)])
    for host in ("127.0.0.1", "127.0.0.2", "127.0.0.53", "127.1.2.3"):
        assert ask_connected(host, port) == "192.0.2.10", f"no reply from {host}"


# --- in a network namespace with a dummy interface ----------------------------------------

CLIENT = r"""
import json, socket, sys, time
import dns.message, dns.query
port = int(sys.argv[1]); hosts = sys.argv[2:]
deadline = time.time() + 20
while True:   # wait until the daemon answers
    try:
        dns.query.udp(dns.message.make_query("example.test", "SOA"), "127.0.0.1", port=port,
                      timeout=0.2)
        break
    except Exception:
        if time.time() > deadline:
            print(json.dumps({"error": "steerd not ready"})); sys.exit(0)
        time.sleep(0.1)
out = {}
for host in hosts:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    for proto in ("udp", "tcp"):
        kind = socket.SOCK_DGRAM if proto == "udp" else socket.SOCK_STREAM
        s = socket.socket(fam, kind); s.settimeout(2.0)
        try:
            s.connect((host, port))
            q = dns.message.make_query("www.example.test", "A")
            if proto == "udp":
                s.send(q.to_wire()); wire = s.recv(4096)
            else:
                w = q.to_wire(); s.sendall(len(w).to_bytes(2, "big") + w)
                n = int.from_bytes(s.recv(2), "big"); wire = b""
                while len(wire) < n: wire += s.recv(n - len(wire))
            r = dns.message.from_wire(wire)
            out[f"{proto} {host}"] = r.answer[0][0].address if r.answer else "empty"
        except Exception as e:
            out[f"{proto} {host}"] = f"error: {e!r}"
        finally:
            s.close()
print(json.dumps(out))
"""

V4 = "198.51.100.53"
V6 = "2001:db8:53::53"


def ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@pytest.fixture
def netns():
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("network namespaces need root and iproute2")
    name = f"steer-test-{uuid.uuid4().hex[:8]}"
    ip("netns", "add", name)
    try:
        ip("-n", name, "link", "set", "lo", "up")
        # A dummy interface as a service address would use; loopback where the kernel has no
        # dummy driver (containers).
        if ip("-n", name, "link", "add", "svc0", "type", "dummy", check=False).returncode == 0:
            dev = "svc0"
            ip("-n", name, "link", "set", "svc0", "up")
        else:
            dev = "lo"
        ip("-n", name, "addr", "add", f"{V4}/32", "dev", dev)
        ip("-n", name, "-6", "addr", "add", f"{V6}/128", "dev", dev, "nodad")
        yield name
    finally:
        ip("netns", "del", name, check=False)


def test_service_addresses_in_namespace(netns, steerd):
    port = free_port()
    srv = steerd(zones=ZONES, listen=[("0.0.0.0", port), ("::", port)],
                 prefix=["ip", "netns", "exec", netns], ready=False)
    res = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", CLIENT,
                          str(port), "127.0.0.1", V4, "::1", V6],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert "error" not in got, srv.log()
    for key, value in got.items():
        assert value == "192.0.2.10", f"{key}: {value}\n{srv.log()}"
    assert len(got) == 8
