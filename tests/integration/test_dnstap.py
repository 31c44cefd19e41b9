"""The dnstap query log, read with the ecosystem's own tools: a file written by steerd and read
with BIND's dnstap-read, a socket read by fstrm_capture (bidirectional Frame Streams), sampling,
the forwarder's messages against a real Unbound upstream, and a reader that stops reading
(or none at all): answers never wait for the log, and the drops are counted in stats.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import dns.flags
import dns.message
import dns.rcode
import pytest
import yaml

from conftest import free_port, query, server_config, wait_for
from unbound_support import UNBOUND, LocalUnbound

DNSTAP_READ = shutil.which("dnstap-read") or "/usr/bin/dnstap-read"
FSTRM_CAPTURE = shutil.which("fstrm_capture") or "/usr/bin/fstrm_capture"

pytestmark = pytest.mark.skipif(not os.path.exists(DNSTAP_READ), reason="needs dnstap-read")


def dnstap_config(output: str, messages=("auth-query", "auth-response"), sample=1, queue=None,
                  forward: str = "") -> str:
    lines = [f"dnstap:\n  {output}\n  messages: [{', '.join(messages)}]\n  sample: {sample}\n"]
    if queue is not None:
        lines.append(f"  queue: {queue}\n")
    return server_config("".join(lines) + forward)


def read_frames(path) -> list[dict]:
    """Every frame of a dnstap file, as dnstap-read -y prints it (one YAML document each)."""
    out = subprocess.run([DNSTAP_READ, "-y", str(path)], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def question(frame: dict, part: str) -> str:
    return frame["message"][part]["QUESTION_SECTION"][0]


def of_type(frames, kind):
    return [f for f in frames if f["message"]["type"] == kind]


def test_file_auth_messages(steerd, tmp_path):
    """Queries to our zones and our answers, over UDP (IPv4) and TCP (IPv6): types, addresses,
    ports, the question and the rcode as dnstap-read decodes them, identity and version."""
    path = tmp_path / "tap.fstrm"
    srv = steerd(zones={"example.test": "example.test.zone"}, listen=["127.0.0.1", "::1"],
                 config=dnstap_config(f"file: {path}").replace(
                     "  workers: 1\n", "  workers: 1\n  identity: tap-node\n"))
    v4_port = srv.listen[0][1]
    v6_port = srv.listen[1][1]
    ready = srv.ctl_json("stats")["dnstap"]["logged"]  # the readiness probes are logged too
    r = srv.udp(query("www.example.test", "A"), host="127.0.0.1")
    assert r.rcode() == dns.rcode.NOERROR
    r = srv.tcp(query("nope.example.test", "AAAA"), host="::1", port=v6_port)
    assert r.rcode() == dns.rcode.NXDOMAIN
    assert srv.ctl_json("stats")["dnstap"]["logged"] == ready + 4
    srv.stop()  # flushes the file

    frames = read_frames(path)
    assert all(f["identity"] == "tap-node" for f in frames)
    assert all(f["version"].startswith("steerd ") for f in frames)
    www = [f for f in frames if "www.example.test" in question(
        f, "query_message_data" if f["message"]["type"] == "AUTH_QUERY"
        else "response_message_data")]
    q = of_type(www, "AUTH_QUERY")
    a = of_type(www, "AUTH_RESPONSE")
    assert len(q) == 1 and len(a) == 1
    for f in (q[0], a[0]):
        m = f["message"]
        assert m["socket_family"] == "INET" and m["socket_protocol"] == "UDP"
        assert m["query_address"] == "127.0.0.1" and m["response_address"] == "127.0.0.1"
        assert m["response_port"] == v4_port and m["query_port"] > 0
    assert q[0]["message"]["query_message_data"]["QUESTION_SECTION"] == [
        "www.example.test. IN A"]
    resp = a[0]["message"]["response_message_data"]
    assert resp["status"] == "NOERROR" and "aa" in resp["flags"].split()
    assert any("192.0.2.10" in rr for rr in resp["ANSWER_SECTION"])
    assert "response_time" in a[0]["message"]

    nope = [f for f in frames if f["message"]["socket_protocol"] == "TCP"]
    assert [f["message"]["type"] for f in nope] == ["AUTH_QUERY", "AUTH_RESPONSE"]
    for f in nope:
        m = f["message"]
        assert m["socket_family"] == "INET6" and m["query_address"] == "::1"
        assert m["response_address"] == "::1" and m["response_port"] == v6_port
    assert nope[1]["message"]["response_message_data"]["status"] == "NXDOMAIN"
    assert question(nope[1], "response_message_data") == "nope.example.test. IN AAAA"


def test_wildcard_bind_logs_the_address_asked(steerd, tmp_path):
    """On 0.0.0.0 the responder address is the one the query arrived at (IP_PKTINFO)."""
    path = tmp_path / "tap.fstrm"
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"}, listen=[("0.0.0.0", port)],
                 config=dnstap_config(f"file: {path}"))
    r = srv.udp(query("www.example.test", "A"), host="127.0.0.2", port=port)
    assert r.rcode() == dns.rcode.NOERROR
    srv.stop()
    frames = [f for f in read_frames(path) if f["message"]["query_address"] == "127.0.0.1"
              and f["message"]["response_address"] == "127.0.0.2"]
    assert [f["message"]["type"] for f in frames] == ["AUTH_QUERY", "AUTH_RESPONSE"]
    assert all(f["message"]["response_port"] == port for f in frames)


def test_only_configured_kinds(steerd, tmp_path):
    """messages: [auth-response] logs the answers and nothing else."""
    path = tmp_path / "tap.fstrm"
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=dnstap_config(f"file: {path}", messages=("auth-response",)))
    for _ in range(5):
        srv.udp(query("www.example.test", "A"))
    srv.stop()
    kinds = {f["message"]["type"] for f in read_frames(path)}
    assert kinds == {"AUTH_RESPONSE"}


@pytest.mark.skipif(not os.path.exists(FSTRM_CAPTURE), reason="needs fstrm_capture")
def test_socket_output_read_by_fstrm_capture(steerd, tmp_path):
    """A UNIX socket output with the bidirectional handshake, read by fstrm_capture."""
    sock = tmp_path / "tap.sock"
    out = tmp_path / "captured.fstrm"
    cap = subprocess.Popen([FSTRM_CAPTURE, "-t", "protobuf:dnstap.Dnstap", "-u", str(sock),
                            "-w", str(out)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        wait_for(sock.exists, 10, what="fstrm_capture's socket")
        srv = steerd(zones={"example.test": "example.test.zone"},
                     config=dnstap_config(f"socket: {sock}"))
        for i in range(10):
            assert srv.udp(query(f"www.example.test", "A")).rcode() == dns.rcode.NOERROR
        srv.stop()  # the writer flushes and closes the stream
        time.sleep(0.2)
    finally:
        cap.send_signal(signal.SIGINT)  # fstrm_capture closes its file on SIGINT
        try:
            cap.wait(10)
        except subprocess.TimeoutExpired:
            cap.kill()
            cap.wait()
    frames = read_frames(out)
    www_q = [f for f in of_type(frames, "AUTH_QUERY")
             if question(f, "query_message_data") == "www.example.test. IN A"]
    www_a = [f for f in of_type(frames, "AUTH_RESPONSE")
             if question(f, "response_message_data") == "www.example.test. IN A"]
    assert len(www_q) == 10 and len(www_a) == 10


def test_sample_every_tenth(steerd, tmp_path):
    """sample: 10 logs about a tenth of the queries, each with its answer."""
    path = tmp_path / "tap.fstrm"
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=dnstap_config(f"file: {path}", sample=10))
    for i in range(300):
        srv.udp(query(f"s{i}.example.test", "A"))
    srv.stop()
    frames = read_frames(path)
    asked = [question(f, "query_message_data") for f in of_type(frames, "AUTH_QUERY")]
    answered = [question(f, "response_message_data") for f in of_type(frames, "AUTH_RESPONSE")]
    sampled = [q for q in asked if q.startswith("s")]
    assert 25 <= len(sampled) <= 35, len(sampled)
    # Each logged query comes with its own response.
    assert sorted(asked) == sorted(answered)


@pytest.mark.skipif(not os.path.exists(UNBOUND), reason="needs unbound")
def test_forwarder_messages(steerd, tmp_path):
    """A cache miss: the client's query, the forwarder's upstream leg (to Unbound's address)
    and its response, the client's answer; then a cache hit answered by the query thread."""
    upstream = LocalUnbound(tmp_path, ['local-zone: "fwd.test." static',
                                       'local-data: "fwd.test. 300 IN SOA ns.fwd.test. '
                                       'host.fwd.test. 1 3600 600 86400 60"',
                                       'local-data: "www.fwd.test. 300 IN A 198.51.100.1"'],
                            "www.fwd.test")
    try:
        path = tmp_path / "tap.fstrm"
        forward = ("forward:\n  allow-recursion: [127.0.0.0/8]\n  groups:\n    - domain: .\n"
                   f"      upstreams: [{{ name: u1, address: \"{upstream.addr}\" }}]\n")
        kinds = ("auth-query", "auth-response", "client-query", "client-response",
                 "forwarder-query", "forwarder-response")
        srv = steerd(zones={"example.test": "example.test.zone"},
                     config=dnstap_config(f"file: {path}", messages=kinds, forward=forward))
        q = query("www.fwd.test", "A")
        q.flags |= dns.flags.RD
        first = srv.udp(q)
        assert first.rcode() == dns.rcode.NOERROR
        hit = srv.udp(q)
        assert hit.rcode() == dns.rcode.NOERROR
        # A miss over TCP: the engine's answer goes back through the connection's thread.
        q6 = query("www.fwd.test", "AAAA")
        q6.flags |= dns.flags.RD
        assert srv.tcp(q6).rcode() == dns.rcode.NOERROR
        srv.stop()
    finally:
        upstream.stop()
    frames = [f for f in read_frames(path) if "fwd.test" in str(f["message"])]
    tcp = [f for f in frames if f["message"]["socket_protocol"] == "TCP"]
    assert [f["message"]["type"] for f in tcp] == ["CLIENT_QUERY", "CLIENT_RESPONSE"]
    assert question(tcp[1], "response_message_data").lower() == "www.fwd.test. in aaaa"
    frames = [f for f in frames if f not in tcp and "AAAA" not in str(f["message"])]
    kinds_seen = [f["message"]["type"] for f in frames]
    assert kinds_seen.count("CLIENT_QUERY") == 2
    assert kinds_seen.count("CLIENT_RESPONSE") == 2
    fq = of_type(frames, "FORWARDER_QUERY")
    fr = of_type(frames, "FORWARDER_RESPONSE")
    assert len(fq) >= 1 and len(fr) == 1
    for f in fq + fr:
        m = f["message"]
        assert m["response_address"] == "127.0.0.1" and m["response_port"] == upstream.port
        assert m["query_address"] == "127.0.0.1" and m["query_port"] not in (0, srv.port)
        assert m["socket_protocol"] == "UDP"
    assert question(fq[0], "query_message_data").lower() == "www.fwd.test. in a"
    assert any("198.51.100.1" in rr
               for rr in fr[0]["message"]["response_message_data"]["ANSWER_SECTION"])
    for f in of_type(frames, "CLIENT_RESPONSE"):
        data = f["message"]["response_message_data"]
        assert data["status"] == "NOERROR" and "ra" in data["flags"].split()
        assert f["message"]["query_address"] == "127.0.0.1"
    # The authoritative kinds stay for our own names only.
    assert not of_type(frames, "AUTH_QUERY")


class StalledReader:
    """A Frame Streams 'reader' that accepts the connection and then never reads a byte, so
    the writer's handshake and every write after it wait forever."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.conns = []

    def accept(self, timeout):
        self.sock.settimeout(timeout)
        conn, _ = self.sock.accept()
        self.conns.append(conn)

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


def blast(srv, n):
    """@n queries, one at a time; returns the slowest answer's time in seconds."""
    slowest = 0.0
    for i in range(n):
        t0 = time.monotonic()
        r = srv.udp(query("www.example.test", "A"))
        slowest = max(slowest, time.monotonic() - t0)
        assert r.rcode() == dns.rcode.NOERROR
    return slowest


def test_stalled_reader_never_slows_answers(steerd, tmp_path):
    """The reader stops reading: the queue fills, every later message is dropped at once and
    counted, and every query is still answered without delay."""
    reader = StalledReader(tmp_path / "stalled.sock")
    try:
        srv = steerd(zones={"example.test": "example.test.zone"},
                     config=dnstap_config(f"socket: {reader.path}", queue=16))
        reader.accept(10)
        slowest = blast(srv, 500)
        st = srv.ctl_json("stats")["dnstap"]
        assert st["enabled"] is True
        # Two messages a query: what the queue took (16) and, once the writer gave up on the
        # reader after a second, what it threw away are dropped too.
        assert st["dropped"] >= 500 and st["logged"] + st["dropped"] >= 2 * 500, st
        assert slowest < 0.5, f"an answer took {slowest:.3f} s"
        srv.stop()
    finally:
        reader.close()


def test_no_reader_at_all(steerd, tmp_path):
    """No reader listens on the socket: steerd starts, answers at full speed, keeps trying to
    connect in the background and counts every message as dropped, in stats and /metrics."""
    http_port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=dnstap_config(f"socket: {tmp_path / 'nobody.sock'}") +
                 f"http:\n  listen: [127.0.0.1:{http_port}]\n")
    slowest = blast(srv, 200)
    assert slowest < 0.5

    def all_dropped():
        st = srv.ctl_json("stats")["dnstap"]
        return st["logged"] == 0 and st["dropped"] >= 400
    wait_for(all_dropped, 5, what="every message counted as dropped")
    st = srv.ctl_json("stats")["dnstap"]
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    # the stats read came first: the metrics may have counted the readiness probes since
    dropped = int(re.search(r"^steer_dnstap_dropped_total (\d+)$", text, re.M).group(1))
    logged = int(re.search(r"^steer_dnstap_messages_total (\d+)$", text, re.M).group(1))
    assert logged == 0 and dropped >= st["dropped"] >= 400, (logged, dropped, st)


def test_stats_without_dnstap(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"})
    srv.udp(query("www.example.test", "A"))
    assert srv.ctl_json("stats")["dnstap"] == {"enabled": False, "logged": 0, "dropped": 0}
