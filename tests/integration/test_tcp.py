"""DNS over TCP per RFC 7766: 2-byte framing, pipelining, messages split across segments,
idle and partial-message timeouts, and the cap on open connections."""

import socket
import struct
import time

import dns.message
import dns.rcode
import pytest

from conftest import query, tcp_frame, tcp_read_message

CONFIG = """
server:
  listen: {listen}
  control-socket: {ctl}
  tcp-workers: %(tcp_workers)d
  tcp-idle-timeout: %(idle)d
  tcp-io-timeout: %(io)d
  tcp-max-clients: %(clients)d
  tcp-max-clients-per-address: %(per_address)d
  tcp-max-clients-per-prefix: %(per_address)d
{zones}"""

ZONES = {"example.test": "example.test.zone"}


def start(steerd, idle=10000, io=2000, clients=100, listen=None, tcp_workers=1):
    # One client address opens all the connections here: no per-client share below the pool.
    config = CONFIG % {"idle": idle, "io": io, "clients": clients, "tcp_workers": tcp_workers,
                       "per_address": clients}
    return steerd(zones=ZONES, config=config, listen=listen)


def ask(sock, name, rdtype="A", qid=None):
    q = query(name, rdtype, qid=qid)
    sock.sendall(tcp_frame(q.to_wire()))
    wire = tcp_read_message(sock)
    assert wire is not None, "connection closed instead of an answer"
    r = dns.message.from_wire(wire)
    assert r.id == q.id
    return r


def closed_within(sock, seconds):
    """Seconds until the server closed the connection (EOF or reset), or None if it stayed
    open for `seconds`."""
    sock.settimeout(seconds)
    t0 = time.monotonic()
    try:
        data = sock.recv(1)
    except socket.timeout:
        return None
    except ConnectionResetError:
        return time.monotonic() - t0
    assert data == b"", f"unexpected data {data!r}"
    return time.monotonic() - t0


def test_tcp_ipv4_and_ipv6(steerd):
    srv = start(steerd, listen=["127.0.0.1", "::1"])
    for host, port in srv.listen:
        r = srv.tcp(query("www.example.test", "AAAA"), host=host, port=port)
        assert r.rcode() == dns.rcode.NOERROR and r.answer[0][0].address == "2001:db8::10"


def test_several_queries_per_connection(steerd):
    srv = start(steerd)
    with srv.tcp_connect() as s:
        for i in range(20):
            r = ask(s, "www.example.test" if i % 2 else "nothere.example.test")
            assert r.rcode() == (dns.rcode.NOERROR if i % 2 else dns.rcode.NXDOMAIN)


def test_pipelining(steerd):
    """Queries sent back to back in one write are all answered, in order."""
    srv = start(steerd)
    names = [f"{n}.example.test" for n in
             ("www", "mail", "nothere", "chain1", "foo.wild", "ns1", "www.sub", "big")] * 4
    queries = [query(name, "TXT" if name.startswith("big") else "A", qid=1000 + i)
               for i, name in enumerate(names)]
    with srv.tcp_connect() as s:
        s.sendall(b"".join(tcp_frame(q.to_wire()) for q in queries))
        ids = []
        for _ in queries:
            wire = tcp_read_message(s)
            assert wire is not None, f"closed after {len(ids)} of {len(queries)} answers"
            ids.append(dns.message.from_wire(wire).id)
    assert ids == [q.id for q in queries]


def test_message_split_across_segments(steerd):
    srv = start(steerd, io=3000)
    q = query("www.example.test", "A")
    data = tcp_frame(q.to_wire())
    with srv.tcp_connect() as s:
        for i in range(len(data)):  # one byte per segment (TCP_NODELAY)
            s.send(data[i:i + 1])
            time.sleep(0.005)
        r = dns.message.from_wire(tcp_read_message(s))
        assert r.id == q.id and r.answer


def test_big_answer_over_tcp(steerd):
    srv = start(steerd)
    with srv.tcp_connect() as s:
        r = ask(s, "big.example.test", "TXT")
        assert sum(len(x) for x in r.answer) == 28


def test_idle_timeout_after_query(steerd):
    srv = start(steerd, idle=500, io=5000)
    with srv.tcp_connect() as s:
        ask(s, "www.example.test")
        took = closed_within(s, 5.0)
        assert took is not None, "idle connection not closed after tcp-idle-timeout"
        assert 0.3 < took < 3.0, f"closed after {took:.2f}s, idle timeout is 0.5s"


def test_idle_timeout_without_query(steerd):
    srv = start(steerd, idle=500, io=5000)
    with srv.tcp_connect() as s:
        took = closed_within(s, 5.0)
        assert took is not None and took < 3.0


def test_activity_keeps_connection_open(steerd):
    srv = start(steerd, idle=800, io=5000)
    with srv.tcp_connect() as s:
        for _ in range(6):  # 6 x 0.3 s > idle timeout, but never idle that long
            ask(s, "www.example.test")
            time.sleep(0.3)
        ask(s, "www.example.test")


def test_partial_message_timeout(steerd):
    """A started message must complete within tcp-io-timeout, long before the idle timeout."""
    srv = start(steerd, idle=20000, io=500)
    wire = query("www.example.test", "A").to_wire()
    for partial in (tcp_frame(wire)[:1], tcp_frame(wire)[:2], tcp_frame(wire)[:10]):
        with srv.tcp_connect() as s:
            s.sendall(partial)
            took = closed_within(s, 8.0)
            assert took is not None, f"stalled after {len(partial)} bytes but not closed"
            assert took < 4.0, f"closed after {took:.2f}s; tcp-io-timeout is 0.5s"


@pytest.mark.parametrize("tcp_workers", [1, 2])
def test_max_clients(steerd, tcp_workers):
    """At most tcp-max-clients connections are served at once, across all TCP threads; slots
    come back on close."""
    cap = 3
    srv = start(steerd, clients=cap, tcp_workers=tcp_workers)
    held = []
    try:
        for _ in range(cap):
            s = srv.tcp_connect()
            ask(s, "www.example.test")
            held.append(s)
        extra = srv.tcp_connect()
        held.append(extra)
        served = 0
        for s in held:
            try:
                s.settimeout(1.5)
                q = query("www.example.test", "A")
                s.sendall(tcp_frame(q.to_wire()))
                if tcp_read_message(s) is not None:
                    served += 1
            except OSError:
                pass
        assert served <= cap, f"{served} connections served, cap is {cap}"
    finally:
        for s in held:
            s.close()
    # Every slot is free again.
    deadline = time.monotonic() + 5
    conns = []
    try:
        while len(conns) < cap:
            s = srv.tcp_connect()
            try:
                ask(s, "www.example.test")
                conns.append(s)
            except (OSError, AssertionError):
                s.close()
                assert time.monotonic() < deadline, "closed connections did not free slots"
                time.sleep(0.1)
    finally:
        for s in conns:
            s.close()


def test_garbage_over_tcp(steerd):
    srv = start(steerd)
    for payload in (b"\x00\x00", b"\x00\x03abc", struct.pack("!H", 12) + b"\xff" * 12):
        with srv.tcp_connect() as s:
            s.sendall(payload)
            s.settimeout(0.5)  # answering FORMERR, dropping or closing are all fine
            try:
                wire = tcp_read_message(s)
            except (socket.timeout, ConnectionResetError):
                wire = None
            if wire is not None:
                assert struct.unpack("!H", wire[2:4])[0] & 0xF == dns.rcode.FORMERR
    assert srv.tcp(query("www.example.test", "A")).rcode() == dns.rcode.NOERROR


def test_client_closing_early(steerd):
    """Clients that send a query and close at once, or reset, do not disturb the server."""
    srv = start(steerd)
    big = tcp_frame(query("big.example.test", "TXT").to_wire())
    for _ in range(50):
        s = srv.tcp_connect()
        s.sendall(big)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST
    with srv.tcp_connect() as s:
        ask(s, "www.example.test")


def test_many_concurrent_connections(steerd):
    srv = start(steerd, clients=1000, tcp_workers=2)
    conns = [srv.tcp_connect() for _ in range(200)]
    try:
        for i, s in enumerate(conns):
            s.sendall(tcp_frame(query(f"c{i}.wild.example.test", "A", qid=i).to_wire()))
        for i, s in enumerate(conns):
            r = dns.message.from_wire(tcp_read_message(s))
            assert r.id == i and r.answer[0][0].address == "192.0.2.40"
    finally:
        for s in conns:
            s.close()


def test_edns_over_tcp(steerd):
    srv = start(steerd)
    r = srv.tcp(query("www.example.test", "A", edns=0, payload=1232))
    assert r.edns == 0 and r.answer
    r = srv.tcp(query("www.example.test", "A", edns=1))
    assert r.rcode() == dns.rcode.BADVERS
