"""The caching forwarder from the operator's side: quick mode (--forward, --allow-recursion),
`steerctl upstreams` and `steerctl cache` (text and --json, the shapes documented at the top of
tools/steerctl.c) and `steerctl cache flush`, against a real Unbound on loopback that answers
a few names itself (local-data), so no network or hierarchy is needed.

The quick-mode upstreams are, in preference order: upstream1, a port nobody listens on (it
must be found down), and upstream2, the Unbound (it must take the traffic: policy ordered
uses the first usable upstream).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import dns.exception
import dns.query
import dns.rcode
import pytest

from conftest import STEERCTL, assert_no_sanitizer_report, free_port, query, run_steerd, \
    wait_for
from unbound_support import UNBOUND, LocalUnbound

NAME = "www.example.lab"
SECOND = "second.example.lab"
ADDR = "192.0.2.80"

LOCAL = [
    # Everything is answered here: the names below, NXDOMAIN (with an SOA, so it is
    # cacheable) for the rest, which includes the probes' <nonce>. names: a probe "resolves".
    'local-zone: "." static',
    'local-data: ". 3600 IN SOA ns.lab. host.lab. 1 3600 600 86400 60"',
    f'local-data: "{NAME}. 300 IN A {ADDR}"',
    f'local-data: "{SECOND}. 300 IN A 192.0.2.81"',
]


@pytest.fixture(scope="module")
def unbound(tmp_path_factory):
    if not Path(UNBOUND).exists():
        pytest.skip("unbound is not installed (scripts/setup-deps.sh test)")
    ub = LocalUnbound(tmp_path_factory.mktemp("fwdctl"), LOCAL, NAME)
    yield ub
    ub.stop()


@pytest.fixture(scope="module")
def fwd(module_launcher, unbound):
    """A forwarder-only steerd in quick mode: a dead upstream first, then the Unbound."""
    dead = free_port()
    return module_launcher(args=["--forward", f"127.0.0.1:{dead}",
                                 "--forward", f"127.0.0.1:{unbound.port}",
                                 "--allow-recursion", "127.0.0.0/8",
                                 "--workers", "1", "--tcp-workers", "1"])


def ask(srv, name: str, rdtype: str = "A"):
    return srv.udp(query(name, rdtype), timeout=3)


def upstreams(srv, *args):
    return srv.ctl_json("upstreams", *args)


def row_of(data, name):
    for row in data["upstreams"]:
        if row["name"] == name:
            return row
    pytest.fail(f"upstream {name} not listed: {data}")


def cache(srv):
    return srv.ctl_json("cache")


# ---- quick mode on the command line (no daemon) ----------------------------------------------


def test_quick_mode_check_config():
    res = run_steerd("--forward", "10.53.1.53", "--forward",
                     "[2001:db8::53]:53@2001:db8::1", "--allow-recursion", "10.0.0.0/24",
                     "--check-config")
    assert res.returncode == 0, res.stderr
    assert "configuration OK, 0 zone(s), 1 forward group(s) with 2 upstream(s)" in res.stdout


@pytest.mark.parametrize("args, status, message", [
    (["--forward", "10.53.1.53@2001:db8::1"], 1,
     "--forward 10.53.1.53@2001:db8::1: source is IPv6 but address 10.53.1.53:53 is IPv4"),
    (["--forward", "10.53.1.53@10.1.1.1:53"], 1,
     "--forward 10.53.1.53@10.1.1.1:53: source '10.1.1.1:53' must be an address without a "
     "port"),
    (["--forward", "resolver.example"], 1, "--forward resolver.example: invalid address"),
    (["--forward", "10.53.1.53", "--allow-recursion", "10.0.0.1/24"], 1,
     "--allow-recursion 10.0.0.1/24: invalid address prefix '10.0.0.1/24'"),
    (["--zone", "example.test=x.zone", "--allow-recursion", "10.0.0.0/24"], 2,
     "--allow-recursion needs --forward"),
    (["-c", "steer.yaml", "--forward", "10.53.1.53"], 2,
     "--listen, --zone, --forward, --allow-recursion and --http are for running without a "
     "configuration file"),
    ([], 2, "nothing to serve: give -c FILE, --zone NAME=FILE or --forward ADDR"),
])
def test_quick_mode_errors(args, status, message):
    res = run_steerd(*args, "--check-config")
    assert res.returncode == status, res.stdout + res.stderr
    assert message in res.stderr


# ---- steerctl's printers, on the sample replies of test_ctl's server ---------------------

TEST_CTL = Path(STEERCTL).resolve().parents[1] / "tests" / "test_ctl"


@pytest.fixture
def sample_ctl(tmp_path):
    """test_ctl serve: a control socket answering fixed sample replies (the documented shapes)."""
    if not TEST_CTL.exists():
        pytest.skip(f"{TEST_CTL} is not built")
    sock = tmp_path / "sample.sock"
    proc = subprocess.Popen([str(TEST_CTL), "serve", str(sock)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_for(sock.exists, 5, what="the sample control socket")

    def run(*args):
        res = subprocess.run([STEERCTL, "-s", str(sock), *args], capture_output=True,
                             text=True, timeout=10)
        assert_no_sanitizer_report(res.stdout + res.stderr)
        assert res.returncode == 0, res.stderr
        return res.stdout

    yield run
    proc.terminate()
    proc.wait(5)


def test_printers(sample_ctl):
    out = sample_ctl("upstreams").splitlines()
    assert out[0] == "group .  policy ordered  using link2"
    head = out[1].split()
    assert head == ["NAME", "GROUP", "STATE", "SINCE", "ADDRESS", "SOURCE", "LINK", "QUERIES",
                    "ANSWERS", "TIMEOUTS", "SERVFAILS", "SRTT", "PROBE-RTT", "PROBES", "FAILED",
                    "HOLD-DOWN", "REASON"]
    assert out[2].split() == ["link1", ".", "link-down", "12s", "10.53.1.53:53", "10.1.1.1",
                              "veth1", "120", "100", "20", "0", "1.2ms", "2.5ms", "40", "3",
                              "10000ms", "device", "veth1", "down"]
    assert out[3].split() == ["*", "link2", ".", "up", "(suspect)", "3600s", "10.53.2.53:53",
                              "-", "-", "7", "7", "0", "0", "-", "-", "41", "0", "5000ms",
                              "probe", "answered"]
    # columns line up: every row's ADDRESS starts where the header's does
    col = out[1].index("ADDRESS")
    assert out[2][col:].startswith("10.53.1.53:53") and out[3][col:].startswith("10.53.2.53")
    assert out[4] == "(* = taking the group's traffic now)"

    out = sample_ctl("cache")
    assert out.splitlines()[0] == "1500 entries, 3.0 MiB of 256.0 MiB (1%), hit rate 90.0%"
    assert re.search(r"^cache:\n  hits +900\n  misses +100\n", out, re.M), out
    assert re.search(r"^engine:\n  requests +105$", out, re.M), out
    assert re.search(r"^  replies:\n    accept +190\n    wrong-id +3$", out, re.M), out
    assert "entries  " not in out, "the size line replaces entries, bytes and max_bytes"

    assert sample_ctl("cache", "flush") == "flushing the whole cache (1500 entries)\n"
    assert sample_ctl("cache", "flush", "Example.COM") == \
        "flushing Example.COM and every name below it from the cache\n"
    reply = json.loads(sample_ctl("--json", "upstreams"))
    assert reply["ok"] is True and reply["data"]["groups"][0]["active"] == ["link2"]


# ---- steerctl upstreams ------------------------------------------------------------------


def test_upstreams_json(fwd, unbound):
    # the dead upstream is found down by its probes; the group then uses upstream2
    data = wait_for(lambda: (d := upstreams(fwd)) and
                    row_of(d, "upstream1")["state"] == "upstream-down" and d,
                    10, what="upstream1 down")
    assert [g["domain"] for g in data["groups"]] == ["."]
    group = data["groups"][0]
    assert group["policy"] == "ordered"
    assert group["upstreams"] == ["upstream1", "upstream2"]
    assert group["active"] == ["upstream2"]

    r = ask(fwd, NAME)
    assert r.rcode() == dns.rcode.NOERROR and ADDR in r.to_text()
    data = upstreams(fwd)
    dead, live = row_of(data, "upstream1"), row_of(data, "upstream2")
    keys = {"name", "group", "policy", "address", "source", "link", "state", "suspect",
            "usable", "active", "since", "since_s", "reason", "queries", "answers", "timeouts",
            "servfails", "srtt_ms", "last_rtt_ms", "probe_rtt_ms", "probes", "probe_failures",
            "hold_down_ms"}
    assert keys <= set(live), sorted(keys - set(live))
    assert live["address"] == f"127.0.0.1:{unbound.port}"
    assert live["group"] == "." and live["policy"] == "ordered"
    assert live["source"] is None and live["link"] is None
    assert live["state"] == "up" and live["usable"] and live["active"]
    assert dead["state"] == "upstream-down" and not dead["usable"] and not dead["active"]
    assert dead["reason"], dead
    assert dead["probe_failures"] >= 1 and dead["probes"] >= dead["probe_failures"]
    assert live["answers"] >= 1 and live["queries"] >= live["answers"]
    assert isinstance(live["srtt_ms"], (int, float)) and live["srtt_ms"] > 0
    assert isinstance(live["probe_rtt_ms"], (int, float))
    assert live["hold_down_ms"] == 5000
    now = time.time()
    assert 0 <= live["since_s"] < 600 and abs(now - live["since"] - live["since_s"]) <= 2

    # counters move with the traffic: one more name, one more query and answer upstream
    before = row_of(upstreams(fwd), "upstream2")
    assert ask(fwd, SECOND).rcode() == dns.rcode.NOERROR
    # the engine may count the answer just after it sent it on
    after = wait_for(lambda: (a := row_of(upstreams(fwd), "upstream2"))["answers"] >
                     before["answers"] and a, 2, what="the answer counted")
    assert after["queries"] == before["queries"] + 1, (before, after)
    assert after["answers"] == before["answers"] + 1


def test_upstreams_pattern(fwd):
    data = upstreams(fwd, "*2")
    assert [r["name"] for r in data["upstreams"]] == ["upstream2"]
    assert len(data["groups"]) == 1
    data = upstreams(fwd, "UPSTREAM1")
    assert [r["name"] for r in data["upstreams"]] == ["upstream1"], "case-insensitive glob"
    assert upstreams(fwd, "nothing*") == {"groups": [], "upstreams": []}


def test_upstreams_text(fwd):
    wait_for(lambda: row_of(upstreams(fwd), "upstream1")["state"] == "upstream-down", 10,
             what="upstream1 down")
    res = fwd.ctl("upstreams")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "group .  policy ordered  using upstream2", res.stdout
    assert re.match(r"\s+NAME\s+GROUP\s+STATE\s+SINCE\s+ADDRESS\s+SOURCE\s+LINK\s+QUERIES\s+"
                    r"ANSWERS\s+TIMEOUTS\s+SERVFAILS\s+SRTT\s+PROBE-RTT\s+PROBES\s+FAILED\s+"
                    r"HOLD-DOWN\s+REASON", lines[1]), res.stdout
    rows = {line.split()[1] if line.startswith("*") else line.split()[0]: line
            for line in lines[2:] if "upstream" in line and not line.startswith("(")}
    assert rows["upstream2"].startswith("* upstream2 "), res.stdout
    assert " up " in rows["upstream2"]
    assert rows["upstream1"].startswith("  upstream1 ") and "upstream-down" in rows["upstream1"]
    assert lines[-1] == "(* = taking the group's traffic now)"


# ---- steerctl cache and cache flush -------------------------------------------------------


def test_cache_counts_hits_and_misses(fwd):
    ask(fwd, NAME)  # cached by now, whatever ran before
    before = cache(fwd)
    assert set(before) == {"cache", "engine"}
    c, e = before["cache"], before["engine"]
    for key in ("entries", "bytes", "max_bytes", "hits", "misses", "stale_answers",
                "prefetches", "evictions", "expired", "inserts", "refused"):
        assert isinstance(c[key], int), key
    for key in ("requests", "answered", "answered_stale", "servfail", "refused_full",
                "upstream_queries", "retries", "tcp_queries", "late_replies", "pending"):
        assert isinstance(e[key], int), key
    assert c["max_bytes"] == 256 << 20
    assert c["entries"] >= 1 and c["inserts"] >= 1 and 0 < c["bytes"] <= c["max_bytes"]
    assert isinstance(e["replies"], dict) and e["replies"]["accept"] >= 1
    assert e["answered"] >= 1 and e["upstream_queries"] >= 1

    for _ in range(3):
        assert ask(fwd, NAME).rcode() == dns.rcode.NOERROR
    after = cache(fwd)
    assert after["cache"]["hits"] == c["hits"] + 3, (before, after)
    assert after["engine"]["requests"] == e["requests"], "hits never reach the engine"

    name = f"miss-{time.monotonic_ns()}.example.lab"
    r = ask(fwd, name)
    assert r.rcode() == dns.rcode.NXDOMAIN
    later = cache(fwd)
    assert later["cache"]["misses"] == after["cache"]["misses"] + 1
    assert later["engine"]["requests"] == after["engine"]["requests"] + 1


def test_cache_text(fwd):
    ask(fwd, NAME)
    res = fwd.ctl("cache")
    assert res.returncode == 0, res.stderr
    first = res.stdout.splitlines()[0]
    assert re.match(r"^\d+ entries, [\d.]+ (bytes|KiB|MiB) of 256\.0 MiB \(\d+%\)", first), first
    assert re.search(r"^cache:\n  hits +\d+$", res.stdout, re.M), res.stdout
    assert re.search(r"^engine:$", res.stdout, re.M) and re.search(r"^    accept +\d+$",
                                                                 res.stdout, re.M), res.stdout


def test_cache_flush_name_and_all(fwd):
    assert ask(fwd, NAME).rcode() == dns.rcode.NOERROR
    assert ask(fwd, SECOND).rcode() == dns.rcode.NOERROR
    requests = cache(fwd)["engine"]["requests"]

    data = fwd.ctl_json("cache", "flush", NAME)
    assert data["name"] == NAME and data["subtree"] is True and data["entries_before"] >= 2
    # the flushed name goes upstream again; the other one is still a hit
    wait_for(lambda: (ask(fwd, NAME), cache(fwd)["engine"]["requests"] > requests)[1], 5,
             what=f"{NAME} asked upstream again after the flush")
    requests = cache(fwd)["engine"]["requests"]
    ask(fwd, SECOND)
    assert cache(fwd)["engine"]["requests"] == requests, "a name outside the flush stays"

    res = fwd.ctl("cache", "flush")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("flushing the whole cache ("), res.stdout
    wait_for(lambda: cache(fwd)["cache"]["entries"] == 0, 5, what="an empty cache")


def test_cache_flush_errors(fwd):
    res = fwd.ctl("cache", "flush", "a..b")
    assert res.returncode == 1
    assert "invalid domain name 'a..b'" in res.stderr
    res = fwd.ctl("cache", "flush", "a", "b")
    assert res.returncode == 2 and "usage: cache | cache flush [NAME]" in res.stderr
    res = fwd.ctl("cache", "clear")
    assert res.returncode == 2 and "usage: cache | cache flush [NAME]" in res.stderr


def test_forwarding_not_configured(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"})
    for args in (("upstreams",), ("cache",), ("cache", "flush")):
        res = srv.ctl(*args)
        assert res.returncode == 1, (args, res.stdout, res.stderr)
        assert "forwarding is not configured" in res.stderr
        reply = json.loads(srv.ctl(*args, json_out=True).stdout)
        assert reply["ok"] is False and "forwarding is not configured" in reply["error"]
