"""Health probes of type dns and exec, run through tests/health/probe_run against real peers.

dns: a real knotd (Debian package 'knot') serving a small zone on 127.0.0.1 and ::1, a knotd
that is stopped (ICMP port unreachable -> "connection refused"), a UDP socket that never
answers (timeout), and a scripted UDP peer that sends spoofed and malformed replies before the
real one (the probe must ignore them).

exec: real commands (true, false, sh, sleep); the killed command's pids must be gone, its
environment, descriptors, signal state and stdin are checked from inside the command.

Binary: conftest.PROBE_RUN (next to $STEERD, or $STEER_PROBE_RUN), e.g.
    STEER_PROBE_RUN=build-asan/tests/probe_run /usr/bin/python3 -m pytest tests/integration/...
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rrset
import pytest

import conftest
from conftest import SANITIZER_MARKERS
from knot_support import KNOTD, Knotd

PROBE_RUN = Path(conftest.PROBE_RUN)


# Sanitized builds start slowly; the margin a timeout may overrun (the brief: timeout + 0.5 s).
TIMEOUT_SLACK = 0.5
ZONE = """$ORIGIN probe.test.
$TTL 300
@          SOA   ns.probe.test. hostmaster.probe.test. 1 3600 600 86400 300
@          NS    ns
ns         A     127.0.0.1
www        A     192.0.2.1
www        A     192.0.2.2
www        AAAA  2001:db8::1
alias      CNAME www
@          MX    10 mx.probe.test.
txt        TXT   "v=spf1" " -all"
_svc._tcp  SRV   0 5 443 www
"""


# --------------------------------------------------------------------------------------------
# Running probe_run


class Result:
    def __init__(self, argv: list[str], proc: subprocess.CompletedProcess, elapsed: float):
        self.argv = argv
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.elapsed = elapsed
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        self.all = [json.loads(ln) for ln in lines]
        self.last = self.all[-1] if self.all else {}

    @property
    def ok(self) -> bool:
        return self.last.get("ok") is True

    @property
    def detail(self) -> str:
        return self.last.get("detail", "")

    @property
    def start_error(self) -> str | None:
        return self.last.get("start_error")

    def __repr__(self) -> str:
        return (f"probe_run {' '.join(self.argv)} -> rc {self.rc} in {self.elapsed:.3f} s\n"
                f"stdout: {self.stdout}\nstderr: {self.stderr}")


def probe(ptype: str, target: str, *opts: str, cmd: list[str] | None = None,
          env: dict | None = None, **popen) -> Result:
    argv = [ptype, target, *opts]
    if cmd is not None:
        argv += ["--", *cmd]
    t0 = time.monotonic()
    proc = subprocess.run([str(PROBE_RUN), *argv], capture_output=True, text=True, timeout=60,
                          env=env, **popen)
    res = Result(argv, proc, time.monotonic() - t0)
    assert not any(m in proc.stderr for m in SANITIZER_MARKERS), repr(res)
    assert res.all, repr(res)
    # The exit status follows the last result: 0 ok, 1 failed, 2 start error.
    expected_rc = 2 if res.start_error is not None else (0 if res.ok else 1)
    assert res.rc == expected_rc, repr(res)
    return res


# --------------------------------------------------------------------------------------------
# knotd


@pytest.fixture(scope="module")
def knot(tmp_path_factory):
    if not os.path.exists(KNOTD):
        pytest.fail("knotd not found: install the Debian package 'knot'")
    server = Knotd(tmp_path_factory.mktemp("knotd"), "probe.test.", ZONE)
    yield server
    server.stop()


def v4(server) -> str:
    return f"127.0.0.1:{server.port}"


# --------------------------------------------------------------------------------------------
# dns against knotd


def test_dns_noerror(knot):
    r = probe("dns", v4(knot), "--qname", "www.probe.test.", "--qtype", "1")
    assert r.ok, r
    assert r.detail == "NOERROR, 2 answers", r


def test_dns_ipv6_target(knot):
    r = probe("dns", f"[::1]:{knot.port}", "--qname", "www.probe.test", "--qtype", "28",
              "--answer", "2001:db8::1")
    assert r.ok and r.detail == "NOERROR, 1 answer", r


@pytest.mark.parametrize("qname,qtype,answer", [
    ("www.probe.test.", 1, "192.0.2.2"),
    ("WWW.Probe.Test.", 1, "192.0.2.1"),                # 0x20 / case of the question
    ("www.probe.test.", 28, "2001:DB8:0:0:0::1"),       # any spelling of the address
    ("alias.probe.test.", 5, "WWW.probe.test"),          # name, case and final dot ignored
    ("probe.test.", 15, "10 mx.probe.test."),
    ("txt.probe.test.", 16, "v=spf1 -all"),              # character-strings concatenated
    ("_svc._tcp.probe.test.", 33, "0 5 443 www.probe.test."),
    ("probe.test.", 2, "ns.probe.test."),
])
def test_dns_expected_answer_present(knot, qname, qtype, answer):
    r = probe("dns", v4(knot), "--qname", qname, "--qtype", str(qtype), "--answer", answer)
    assert r.ok, r
    assert r.detail.startswith("NOERROR, "), r


@pytest.mark.parametrize("qname,qtype,answer,detail", [
    ("www.probe.test.", 1, "192.0.2.9", "NOERROR but no A 192.0.2.9 in answer"),
    ("www.probe.test.", 28, "2001:db8::2", "NOERROR but no AAAA 2001:db8::2 in answer"),
    ("probe.test.", 15, "20 mx.probe.test.", "NOERROR but no MX 20 mx.probe.test. in answer"),
    ("txt.probe.test.", 16, "v=spf1", "NOERROR but no TXT v=spf1 in answer"),
    # The A query for the alias follows the CNAME: the A records are in the answer, the
    # expected address is not.
    ("alias.probe.test.", 1, "198.51.100.1", "NOERROR but no A 198.51.100.1 in answer"),
])
def test_dns_expected_answer_absent(knot, qname, qtype, answer, detail):
    r = probe("dns", v4(knot), "--qname", qname, "--qtype", str(qtype), "--answer", answer)
    assert not r.ok, r
    assert r.detail == detail, r


def test_dns_nxdomain(knot):
    expected = probe("dns", v4(knot), "--qname", "nope.probe.test.", "--rcode", "3")
    assert expected.ok and expected.detail == "NXDOMAIN, 0 answers", expected
    unexpected = probe("dns", v4(knot), "--qname", "nope.probe.test.")
    assert not unexpected.ok, unexpected
    assert unexpected.detail == "rcode NXDOMAIN (expected NOERROR)", unexpected
    # An existing name is a failure when NXDOMAIN is what the monitor expects.
    r = probe("dns", v4(knot), "--qname", "www.probe.test.", "--rcode", "3")
    assert not r.ok and r.detail == "rcode NOERROR (expected NXDOMAIN)", r


def test_dns_refused_for_unserved_zone(knot):
    r = probe("dns", v4(knot), "--qname", "www.other.test.")
    assert not r.ok and r.detail == "rcode REFUSED (expected NOERROR)", r
    r = probe("dns", v4(knot), "--qname", "www.other.test.", "--rcode", "5")
    assert r.ok and r.detail.startswith("REFUSED"), r


def test_dns_repeated(knot):
    r = probe("dns", v4(knot), "--qname", "www.probe.test.", "--answer", "192.0.2.1",
              "--count", "5", "--interval", "20")
    assert len(r.all) == 5 and all(x["ok"] for x in r.all), r


def test_dns_server_stopped_is_refused_fast(tmp_path):
    server = Knotd(tmp_path, "probe.test.", ZONE)
    try:
        r = probe("dns", v4(server), "--qname", "www.probe.test.", "--timeout", "3000")
        assert r.ok, r
    finally:
        server.stop()
    for target in (v4(server), f"[::1]:{server.port}"):
        r = probe("dns", target, "--qname", "www.probe.test.", "--timeout", "3000")
        assert not r.ok and r.detail == "connection refused", r
        assert r.last["rtt_us"] < 500_000, r


@pytest.mark.parametrize("family,host", [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
def test_dns_silent_server_times_out(family, host):
    sink = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sink.bind((host, 0))
        port = sink.getsockname()[1]
        target = f"{host}:{port}" if family == socket.AF_INET else f"[{host}]:{port}"
        r = probe("dns", target, "--qname", "www.probe.test.", "--timeout", "700")
        assert not r.ok and r.detail == "timeout after 700 ms", r
        assert 0.7 <= r.last["rtt_us"] / 1e6 < 0.7 + TIMEOUT_SLACK, r
        # The query really went out, as Steer's builder made it: RD clear, EDNS 1232.
        sink.settimeout(1)
        q = dns.message.from_wire(sink.recv(65535))
        assert not q.flags & dns.flags.RD and not q.flags & dns.flags.QR
        assert q.edns == 0 and q.payload == 1232
        assert str(q.question[0].name) == "www.probe.test." and q.question[0].rdtype == 1
    finally:
        sink.close()


@pytest.mark.parametrize("opts,error", [
    (["--qname", "a..b"], "bad query name"),
    (["--qname", "x" * 64 + ".test."], "bad query name"),
    (["--qtype", "1"], "without a query name"),
    (["--qname", "www.probe.test.", "--answer", "300.1.1.1"], "bad expected A answer"),
    (["--qname", "www.probe.test.", "--qtype", "6", "--answer", "x"],
     "expected answer not supported for type TYPE6"),
    (["--qname", "www.probe.test.", "--qtype", "252"], "cannot be probed over UDP"),
    (["--qname", "probe.test.", "--qtype", "15", "--answer", "mx.probe.test."],
     "bad expected MX answer"),
])
def test_dns_bad_spec_is_a_start_error(opts, error):
    r = probe("dns", "127.0.0.1:9", *opts)
    assert r.start_error is not None and error in r.start_error, r


# --------------------------------------------------------------------------------------------
# dns against a peer that lies first


def spoofing_peer(sock: socket.socket, replies) -> threading.Thread:
    """Answers the first query it receives with replies(query) (a list of wire messages)."""
    def run():
        sock.settimeout(5)
        try:
            wire, addr = sock.recvfrom(65535)
        except socket.timeout:
            return
        q = dns.message.from_wire(wire)
        for out in replies(q):
            sock.sendto(out, addr)
            time.sleep(0.01)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def reply_to(q: dns.message.Message, rcode=dns.rcode.NOERROR, qname=None, flags=0,
             answer: str | None = None) -> dns.message.Message:
    r = dns.message.make_response(q)
    r.set_rcode(rcode)
    r.flags |= flags
    if qname is not None:
        r.question[0] = dns.rrset.RRset(dns.name.from_text(qname), 1, 1)
    if answer:
        r.answer.append(dns.rrset.from_text(q.question[0].name, 60, "IN", "A", answer))
    return r


def test_dns_ignores_spoofed_replies():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))

    def replies(q):
        wrong_id = reply_to(q, answer="192.0.2.1")
        wrong_id.id = (q.id + 1) % 65536
        not_response = reply_to(q, answer="192.0.2.1")
        not_response.flags &= ~dns.flags.QR
        return [wrong_id.to_wire(),
                reply_to(q, qname="evil.probe.test.", answer="192.0.2.1").to_wire(),
                not_response.to_wire(),
                b"\x00",                                  # shorter than a header
                q.to_wire()[:2] + b"\x80",                # our id, then nothing
                reply_to(q, rcode=dns.rcode.SERVFAIL).to_wire()]

    try:
        t = spoofing_peer(sock, replies)
        r = probe("dns", f"127.0.0.1:{sock.getsockname()[1]}", "--qname", "www.probe.test.",
                  "--answer", "192.0.2.1", "--timeout", "2000")
        t.join()
    finally:
        sock.close()
    # Every forged "good" answer was ignored: the genuine SERVFAIL decides.
    assert not r.ok and r.detail == "rcode SERVFAIL (expected NOERROR)", r


def test_dns_only_spoofed_replies_time_out():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))

    def replies(q):
        wrong_id = reply_to(q, answer="192.0.2.1")
        wrong_id.id = (q.id + 1) % 65536
        return [wrong_id.to_wire()]

    try:
        t = spoofing_peer(sock, replies)
        r = probe("dns", f"127.0.0.1:{sock.getsockname()[1]}", "--qname", "www.probe.test.",
                  "--timeout", "500")
        t.join()
    finally:
        sock.close()
    assert not r.ok and r.detail == "timeout after 500 ms (1 non-matching replies ignored)", r


def test_dns_truncated_reply_counts():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    try:
        t = spoofing_peer(sock, lambda q: [reply_to(q, qname="WWW.PROBE.TEST.",
                                                    flags=dns.flags.TC).to_wire()])
        r = probe("dns", f"127.0.0.1:{sock.getsockname()[1]}", "--qname", "www.probe.test.")
        t.join()
    finally:
        sock.close()
    # TC=1 with the expected rcode is a live server; no retry over TCP.
    assert r.ok and r.detail == "NOERROR, 0 answers (truncated)", r


# --------------------------------------------------------------------------------------------
# exec


def test_exec_true_false():
    r = probe("exec", "127.0.0.1", cmd=["true"])
    assert r.ok and r.detail == "exit status 0", r
    r = probe("exec", "127.0.0.1", cmd=["false"])
    assert not r.ok and r.detail == "exit status 1", r


def test_exec_failure_detail():
    r = probe("exec", "127.0.0.1", cmd=["sh", "-c", "echo broken; echo more; exit 3"])
    assert not r.ok and r.detail == "exit status 3: broken", r
    r = probe("exec", "127.0.0.1", cmd=["sh", "-c", "echo to stderr >&2; exit 4"])
    assert not r.ok and r.detail == "exit status 4: to stderr", r
    r = probe("exec", "127.0.0.1", cmd=["sh", "-c", "kill -9 $$"])
    assert not r.ok and r.detail == "killed by signal 9", r
    # A long output does not block the command and only its start is kept.
    r = probe("exec", "127.0.0.1",
              cmd=["sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' a; exit 5"])
    assert not r.ok and r.detail == "exit status 5: " + "a" * 120, r


def test_exec_nonexistent_program():
    r = probe("exec", "127.0.0.1", cmd=["/nonexistent/steer-check"])
    assert not r.ok and r.detail == "exec: No such file or directory", r
    r = probe("exec", "127.0.0.1", cmd=["steer-no-such-command-in-path"])
    assert not r.ok and r.detail == "exec: No such file or directory", r
    # A command that itself exits 127 is not mistaken for an exec failure.
    r = probe("exec", "127.0.0.1", cmd=["sh", "-c", "exit 127"])
    assert not r.ok and r.detail == "exit status 127", r


def test_exec_no_command_is_a_start_error():
    r = probe("exec", "127.0.0.1", cmd=[])
    assert r.start_error == "exec probe without a command", r


def pid_gone(pid: int) -> bool:
    """True when the process does not exist at all (not even as a zombie)."""
    return not Path(f"/proc/{pid}").exists()


def test_exec_timeout_kills_the_group(tmp_path):
    pids = tmp_path / "pids"
    script = f"echo $$ > {pids}; sleep 30 & echo $! >> {pids}; wait"
    r = probe("exec", "127.0.0.1", "--timeout", "500", cmd=["sh", "-c", script])
    assert not r.ok and r.detail == "timeout after 500 ms, killed", r
    assert r.last["rtt_us"] / 1e6 < 0.5 + TIMEOUT_SLACK, r
    found = [int(x) for x in pids.read_text().split()]
    assert len(found) == 2, found
    # The shell and its background sleep: killed and reaped, not left as zombies.
    deadline = time.monotonic() + 2
    while not all(pid_gone(p) for p in found) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(pid_gone(p) for p in found), [Path(f"/proc/{p}/status").read_text()
                                             for p in found if not pid_gone(p)]


def test_exec_leftovers_of_a_finished_command_are_reaped(tmp_path):
    pids = tmp_path / "pids"
    r = probe("exec", "127.0.0.1", cmd=["sh", "-c", f"sleep 30 & echo $! > {pids}; exit 0"])
    assert r.ok, r
    pid = int(pids.read_text())
    deadline = time.monotonic() + 2
    while not pid_gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_gone(pid)


def test_exec_environment(tmp_path):
    out = tmp_path / "env"
    script = f'echo "$STEER_TARGET_ADDR|$STEER_TARGET_PORT|$STEER_TARGET_NAME|$KEEP_ME" > {out}'
    env = dict(os.environ, KEEP_ME="kept", STEER_TARGET_NAME="stale")
    r = probe("exec", "192.0.2.7:8080", "--name", "web1", cmd=["sh", "-c", script], env=env)
    assert r.ok, r
    assert out.read_text() == "192.0.2.7|8080|web1|kept\n"
    r = probe("exec", "2001:db8::5", "--name", "", cmd=["sh", "-c", script], env=env)
    assert r.ok, r
    assert out.read_text() == "2001:db8::5|0||kept\n"


def test_exec_process_state():
    """Only 0, 1 and 2 open, stdin /dev/null, no blocked or ignored signals, own group, even
    when the probing process ignores SIGPIPE and blocks signals (as the daemon does)."""

    def block_signals():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGUSR1})

    # fstat() opens nothing, so this lists exactly what the command inherited.
    fds = ("import os, sys\n"
           "def is_open(fd):\n"
           "    try:\n"
           "        os.fstat(fd)\n"
           "        return True\n"
           "    except OSError:\n"
           "        return False\n"
           "print(*[fd for fd in range(4096) if is_open(fd)], os.readlink('/proc/self/fd/0'),\n"
           "      os.getpgid(0) == os.getpid())\n"
           "sys.exit(9)\n")
    # restore_signals=False: probe_run inherits Python's SIG_IGN for SIGPIPE and SIGXFSZ.
    r = probe("exec", "127.0.0.1", cmd=["/usr/bin/python3", "-c", fds], restore_signals=False,
              preexec_fn=block_signals)
    assert r.detail == "exit status 9: 0 1 2 /dev/null True", r
    # Python itself ignores SIGPIPE, so the signal state is read by a shell (which keeps
    # inherited dispositions, as POSIX requires).
    sigs = "grep -E '^Sig(Blk|Ign)' /proc/$$/status | tr '\\n\\t' '  '; exit 9"
    r = probe("exec", "127.0.0.1", cmd=["sh", "-c", sigs], restore_signals=False,
              preexec_fn=block_signals)
    zero = "0" * 16
    assert r.detail.rstrip() == f"exit status 9: SigBlk: {zero} SigIgn: {zero}", r
    # The same shell started by Python directly does see them: the check can fail.
    direct = subprocess.run(["sh", "-c", sigs], capture_output=True, text=True,
                            restore_signals=False, preexec_fn=block_signals)
    assert "SigIgn: 0000000000000000" not in direct.stdout
    assert "SigBlk: 0000000000000000" not in direct.stdout


def test_exec_status_is_never_stolen():
    """probe_run runs libev's default loop, whose SIGCHLD handler reaps any ordinary child:
    every result must still carry the command's own status."""
    r = probe("exec", "127.0.0.1", "--count", "20", "--interval", "5",
              cmd=["sh", "-c", "echo x; exit 2"])
    assert [x["detail"] for x in r.all] == ["exit status 2: x"] * 20, r
