"""The bundled examples work as the README says: examples/zones/example.test.zone served in
quick mode (what `make run` starts) and examples/steer.yaml accepted by --check-config. Also
logging: timestamps on stderr (priority prefixes under journald) and the level filter."""

import os
import re
import shutil
import socket
import time

import dns.flags
import dns.rcode
import dns.rdatatype
import pytest

from conftest import ROOT, find_rrset, query, rrset_texts, run_steerd

EXAMPLE_ZONE = ROOT / "examples" / "zones" / "example.test.zone"


@pytest.fixture(scope="module")
def srv(module_launcher):
    return module_launcher(zones={"example.test": EXAMPLE_ZONE})


def test_readme_query(srv):
    r = srv.udp(query("www.example.test", "A"))
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    assert rrset_texts(r.answer) == {"www.example.test. 3600 IN A 192.0.2.10"}


def test_mail(srv):
    r = srv.udp(query("example.test", "MX"))
    assert {rd.exchange.to_text() for rd in r.answer[0]} == {"mail.example.test.",
                                                             "mail-backup.example.test."}
    assert find_rrset(r.additional, "mail.example.test", "AAAA") is not None


def test_wildcard_and_explicit(srv):
    assert srv.udp(query("anything.dyn.example.test")).answer[0][0].address == "192.0.2.80"
    assert srv.udp(query("fixed.dyn.example.test")).answer[0][0].address == "192.0.2.81"


def test_delegation(srv):
    r = srv.udp(query("host.lab.example.test"))
    assert not r.flags & dns.flags.AA and r.answer == []
    assert find_rrset(r.authority, "lab.example.test", "NS") is not None
    assert find_rrset(r.additional, "ns1.lab.example.test", "A") is not None


def test_cname_and_ent(srv):
    r = srv.udp(query("blog.example.test", "AAAA"))
    assert [x.rdtype for x in r.answer] == [dns.rdatatype.CNAME, dns.rdatatype.AAAA]
    r = srv.udp(query("b.ent.example.test", "A"))
    assert r.rcode() == dns.rcode.NOERROR and r.answer == []


@pytest.mark.parametrize("name,rdtype", [("_sip._tcp.example.test", "SRV"),
                                         ("example.test", "CAA"),
                                         ("_443._tcp.www.example.test", "TLSA"),
                                         ("svc.example.test", "HTTPS"),
                                         ("sel1._domainkey.example.test", "TXT")])
def test_other_types(srv, name, rdtype):
    r = srv.udp(query(name, rdtype))
    assert r.rcode() == dns.rcode.NOERROR and r.answer


def test_example_config_checks():
    res = run_steerd("-c", str(ROOT / "examples" / "steer.yaml"), "--check-config")
    assert res.returncode == 0, res.stderr


def test_example_config_gslb_block_checks(tmp_path):
    """The commented-out GSLB and monitor block of examples/steer.yaml is valid when enabled."""
    text = (ROOT / "examples" / "steer.yaml").read_text()
    head, block = text.split("# GSLB (docs/configuration.md", 1)
    block = block.split("\n# Caching forwarder", 1)[0]
    enabled = [line[2:] for line in block.splitlines()[4:] if line.startswith("# ")]
    conf = tmp_path / "steer.yaml"
    conf.write_text(head.replace("zones/example.test.zone",
                                 str(ROOT / "examples" / "zones" / "example.test.zone"))
                    + "\n".join(enabled) + "\n")
    assert "monitors:" in conf.read_text() and "services:" in conf.read_text()
    res = run_steerd("-c", str(conf), "--check-config")
    assert res.returncode == 0, res.stderr
    assert "1 GSLB service(s), 1 map(s), 1 whoami name(s)" in res.stdout + res.stderr, res


def test_example_config_forward_block_checks(tmp_path):
    """The commented-out forward section of examples/steer.yaml is valid when enabled."""
    text = (ROOT / "examples" / "steer.yaml").read_text()
    head = text.split("# GSLB (docs/configuration.md", 1)[0]
    block = "# forward:" + text.split("\n# forward:", 1)[1].split("\n\n", 1)[0]
    enabled = [line[2:] for line in block.splitlines() if line.startswith("# ")]
    conf = tmp_path / "steer.yaml"
    conf.write_text(head.replace("zones/example.test.zone",
                                 str(ROOT / "examples" / "zones" / "example.test.zone"))
                    + "\n".join(enabled) + "\n")
    res = run_steerd("-c", str(conf), "--check-config")
    assert res.returncode == 0, res.stderr
    assert "1 forward group(s) with 2 upstream(s)" in res.stdout + res.stderr, res


def test_example_config_cluster_block_checks(tmp_path):
    """The commented-out cluster section of examples/steer.yaml is valid when enabled
    (--check-config touches no interface)."""
    text = (ROOT / "examples" / "steer.yaml").read_text()
    head = text.split("# GSLB (docs/configuration.md", 1)[0]
    block = "# cluster:" + text.split("\n# cluster:", 1)[1].split("\n\n", 1)[0]
    enabled = [line[2:] for line in block.splitlines() if line.startswith("# ")]
    assert enabled[0] == "cluster:" and any("self-check" in line for line in enabled)
    conf = tmp_path / "steer.yaml"
    conf.write_text(head.replace("zones/example.test.zone",
                                 str(ROOT / "examples" / "zones" / "example.test.zone"))
                    + "\n".join(enabled) + "\n")
    res = run_steerd("-c", str(conf), "--check-config")
    assert res.returncode == 0, res.stderr



def test_example_config_operations_block_checks(tmp_path):
    """The commented-out operations sections of examples/steer.yaml are valid when enabled
    (with their folders and the alert command made to exist here)."""
    text = (ROOT / "examples" / "steer.yaml").read_text()
    head = text.split("# GSLB (docs/configuration.md", 1)[0]
    block = "# http:" + text.split("\n# http:", 1)[1].split("\n\n", 1)[0]
    enabled = [line[2:] for line in block.splitlines() if line.startswith("# ")]
    assert enabled[0] == "http:" and any(line.startswith("alerts:") for line in enabled)
    hook = tmp_path / "steer-alert"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    ops = ("\n".join(enabled).replace("/var/lib/steer", str(tmp_path))
           .replace("/var/log/steer", str(tmp_path))
           .replace("/usr/local/bin/steer-alert", str(hook)))
    conf = tmp_path / "steer.yaml"
    conf.write_text(head.replace("zones/example.test.zone",
                                 str(ROOT / "examples" / "zones" / "example.test.zone"))
                    + ops + "\n")
    res = run_steerd("-c", str(conf), "--check-config")
    assert res.returncode == 0, res.stderr

# --- logging --------------------------------------------------------------------------------

LOG_CONFIG = """
server:
  listen: {listen}
  control-socket: {ctl}
log:
  target: stderr
  level: %s
{zones}"""


# "2026-12-01T20:15:03.123+00:00 steerd[info]: ..." on a terminal or a file.
STAMPED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d steerd\[[a-z]+\]: ")


def test_log_timestamps(srv):
    lines = [ln for ln in srv.log().splitlines() if ln.strip()]
    assert lines, "steerd logs its start-up"
    for line in lines:
        assert STAMPED.match(line), f"no ISO 8601 timestamp: {line!r}"


def test_log_priority_prefix_under_journald(steerd, monkeypatch):
    # systemd sets JOURNAL_STREAM when stderr is the journal, which stamps lines itself.
    monkeypatch.setenv("JOURNAL_STREAM", "8:123456")
    srv = steerd(zones={"example.test": EXAMPLE_ZONE})
    lines = [ln for ln in srv.log().splitlines() if ln.strip()]
    assert lines, "steerd logs its start-up"
    for line in lines:
        assert re.match(r"<[0-7]>steerd\[[a-z]+\]: ", line), f"no priority prefix: {line!r}"
        assert not STAMPED.match(line), line


def test_log_level_filter(steerd):
    quiet = steerd(zones={"example.test": EXAMPLE_ZONE}, config=LOG_CONFIG % "error")
    chatty = steerd(zones={"example.test": EXAMPLE_ZONE}, config=LOG_CONFIG % "debug")
    assert not re.search(r"steerd\[(warning|notice|info|debug)\]", quiet.log()), quiet.log()
    assert re.search(r"steerd\[debug\]", chatty.log()), chatty.log()


def test_log_level_option(steerd):
    srv = steerd(zones={"example.test": EXAMPLE_ZONE}, args=["--log-level", "debug"])
    assert re.search(r"steerd\[debug\]", srv.log())


# A private /dev for one daemon: a tmpfs with the usual character devices bound from the real
# /dev, plus a "log" that is our datagram socket, in a mount namespace of its own.
PRIVATE_DEV = r"""
set -e
d="$1"; sock="$2"; shift 2
mount -t tmpfs tmpfs "$d"
for n in null zero full random urandom tty; do
    [ -e /dev/$n ] && touch "$d/$n" && mount --bind /dev/$n "$d/$n"
done
touch "$d/log" && mount --bind "$sock" "$d/log"
mount --move "$d" /dev
exec "$@"
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="a private /dev/log needs root and unshare")
def test_log_to_syslog(steerd, tmp_path):
    sock_path = tmp_path / "log.sock"
    sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sink.bind(str(sock_path))
    sink.settimeout(10)
    newdev = tmp_path / "dev"
    newdev.mkdir()
    config = """
server:
  listen: {listen}
  control-socket: {ctl}
log:
  target: syslog
  level: info
{zones}"""
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", PRIVATE_DEV, "sh",
              str(newdev), str(sock_path)]
    try:
        srv = steerd(zones={"example.test": EXAMPLE_ZONE}, config=config, prefix=prefix)
        messages = []
        deadline = time.monotonic() + 10
        while not any("example.test" in m for m in messages) and time.monotonic() < deadline:
            messages.append(sink.recv(4096).decode(errors="replace"))
        # <30> = facility daemon (3) * 8 + info (6); the tag is the program name.
        assert any(re.match(r"<30>.*steerd\[\d+\]: .*example\.test", m) for m in messages), \
            messages
        assert "example.test" not in srv.log(), "logged to stderr although target is syslog"
    finally:
        sink.close()
