"""Response Rate Limiting end to end: a reflection attack, an attacker spoofing a victim's
address (here simply sending from the victim's address, 127.0.0.5, which is where a spoofed
query's answers go), gets the victim at most about `rate` answers a second plus the slipped
TC=1 ones; the victim's TCP retry is answered; another client is not limited; off by
default."""

from __future__ import annotations

import re
import socket
import threading
import time
import urllib.request

import dns.flags
import dns.message
import dns.rcode
import pytest

from conftest import free_port, server_config

VICTIM = "127.0.0.5"
OTHER = "127.0.1.1"  # another /24
RATE = 20
FLOOD_QPS = 1000
FLOOD_SECONDS = 3.0


def metrics(http_port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as r:
        return r.read().decode()


def metric(text: str, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    assert m, f"{name} missing"
    return float(m.group(1))


def flood(srv, source: str, qname: str = "www.example.test", qps: int = FLOOD_QPS,
          seconds: float = FLOOD_SECONDS) -> tuple[int, int, int]:
    """Send @qps queries a second from @source for @seconds; returns (sent, full answers,
    truncated answers) as received by @source."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((source, 0))
    s.settimeout(0.5)
    full = tc = 0
    done = threading.Event()

    def receive():
        nonlocal full, tc
        while True:
            try:
                data = s.recv(4096)
            except socket.timeout:
                if done.is_set():
                    return
                continue
            r = dns.message.from_wire(data)
            if r.flags & dns.flags.TC:
                assert not r.answer
                tc += 1
            else:
                assert r.rcode() == dns.rcode.NOERROR and r.answer
                full += 1

    t = threading.Thread(target=receive)
    t.start()
    sent = 0
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            q = dns.message.make_query(qname, "A")
            q.id = sent & 0xFFFF
            s.sendto(q.to_wire(), (srv.host, srv.port))
            sent += 1
            # Pace to qps: sleep until the next send is due.
            due = start + sent / qps
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        elapsed = time.monotonic() - start
    finally:
        time.sleep(0.3)
        done.set()
        t.join()
        s.close()
    return sent, full, tc, elapsed


def rrl_config(http_port: int, rrl: str) -> str:
    return server_config(f"""http:
  listen: [127.0.0.1:{http_port}]
  read-only-open: true
rrl: {rrl}
""")


def test_reflection_is_limited(steerd):
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=rrl_config(port, f"{{ rate: {RATE}, slip: 2, window: 5s }}"))
    other_answered = []

    def other_client():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((OTHER, 0))
        s.settimeout(1.0)
        ok = 0
        for i in range(15):
            q = dns.message.make_query("www.example.test", "A")
            s.sendto(q.to_wire(), (srv.host, srv.port))
            try:
                r = dns.message.from_wire(s.recv(4096))
                ok += r.rcode() == dns.rcode.NOERROR and bool(r.answer)
            except socket.timeout:
                pass
            time.sleep(0.1)  # 10 q/s: under RATE
        s.close()
        other_answered.append(ok)

    sent, full, tc, elapsed = flood(srv, VICTIM)
    assert sent >= FLOOD_QPS * FLOOD_SECONDS * 0.8, sent
    # At most one second's burst, then RATE a second (as BIND, a flood far above the rate
    # keeps the bucket in debt, so fewer get through); a second of slack for the clock.
    assert 0 < full <= RATE * (elapsed + 2), (full, sent)
    limited = sent - full
    # slip 2: every second limited answer goes out truncated, the others are dropped.
    assert abs(tc - limited / 2) <= limited * 0.05 + 5, (tc, limited)
    text = metrics(port)
    assert metric(text, "steer_rrl_slipped_total") == tc
    assert metric(text, "steer_rrl_dropped_total") == limited - tc

    # The victim's TCP retry is answered: TCP is never limited.
    with socket.create_connection((srv.host, srv.port), source_address=(VICTIM, 0),
                                  timeout=3) as s:
        q = dns.message.make_query("www.example.test", "A")
        wire = q.to_wire()
        s.sendall(len(wire).to_bytes(2, "big") + wire)
        n = int.from_bytes(s.recv(2), "big")
        data = b""
        while len(data) < n:
            data += s.recv(n - len(data))
        r = dns.message.from_wire(data)
        assert r.rcode() == dns.rcode.NOERROR and r.answer

    # Another client, in another /24, while the victim's bucket is deep in debt: unaffected.
    t = threading.Thread(target=other_client)
    t.start()
    flood(srv, VICTIM, seconds=1.5)
    t.join()
    assert other_answered[0] == 15, other_answered


def test_classes_are_separate(steerd):
    """A flood for one name does not limit the same client's answers for another name."""
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=rrl_config(port, f"{{ rate: {RATE}, slip: 0 }}"))
    sent, full, tc, elapsed = flood(srv, VICTIM, seconds=1.0)
    assert tc == 0 and full <= RATE * (elapsed + 2)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((VICTIM, 0))
    s.settimeout(1.0)
    q = dns.message.make_query("mail.example.test", "A")
    s.sendto(q.to_wire(), (srv.host, srv.port))
    r = dns.message.from_wire(s.recv(4096))
    assert r.answer
    s.close()


def test_exempt_and_log_only(steerd):
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=rrl_config(port, f"{{ rate: {RATE}, exempt: [{VICTIM}] }}"))
    sent, full, tc, _ = flood(srv, VICTIM, seconds=1.0)
    assert full == sent and tc == 0
    port2 = free_port()
    srv2 = steerd(zones={"example.test": "example.test.zone"},
                  config=rrl_config(port2, f"{{ rate: {RATE}, log-only: true }}"))
    sent, full, tc, elapsed = flood(srv2, VICTIM, seconds=1.0)
    assert full == sent and tc == 0
    assert metric(metrics(port2), "steer_rrl_logged_total") >= sent - RATE * (elapsed + 2)
    # One notice when the flow starts being limited, not one per answer.
    notices = [line for line in srv2.log().splitlines() if "rate limit:" in line]
    assert len(notices) == 1, notices
    assert ("would limit (log-only) positive answers to 127.0.0.0/24 for www.example.test."
            in notices[0]), notices
    assert "rate limit:" not in srv.log()


def test_limiting_is_logged_once_per_flow(steerd):
    """The operator sees who is limited, for what and how, once per flow (not per answer)."""
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=rrl_config(port, f"{{ rate: {RATE}, slip: 0 }}"))
    flood(srv, VICTIM, seconds=1.0)
    notices = [line for line in srv.log().splitlines() if "rate limit:" in line]
    assert len(notices) == 1, notices
    assert ("limiting (dropped) positive answers to 127.0.0.0/24 for www.example.test."
            in notices[0]), notices


def test_off_by_default(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"}, config=server_config(""))
    sent, full, tc, _ = flood(srv, VICTIM, seconds=1.0)
    assert full == sent and tc == 0


def test_table_survives_reload(steerd):
    """A reload with the same table-size keeps the buckets: a flood in debt stays limited
    (a fresh table would hand it a new burst of `rate` answers)."""
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=rrl_config(port, f"{{ rate: {RATE}, slip: 0, window: 30s }}"))
    sent, full, tc, _ = flood(srv, VICTIM, seconds=1.0)
    assert full <= RATE * 3 and tc == 0
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    sent, full, tc, _ = flood(srv, VICTIM, qps=200, seconds=0.5)
    assert full == 0, (full, sent)
    # A new table-size is a new table: the burst is back.
    srv.config_path.write_text(srv.config_path.read_text().replace(
        "window: 30s", "window: 30s, table-size: 4099"))
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    sent, full, tc, _ = flood(srv, VICTIM, qps=200, seconds=0.5)
    assert 0 < full <= 2 * RATE + 1, (full, sent)  # a second boundary may refill once
