"""GSLB answers end to end: steerd with datacenters, a map, services of every policy, whoami and
admin overrides (tests/data/gslb/integration/gslb.yaml), queried with dnspython, kdig and dig.

Map "isp" (ECS or, without ECS, the resolver address -> datacenter order):
    198.51.100.0/24, 2001:db8:1::/48 (nets file)        -> dc1, dc2, dc3
    203.0.113.0/24, 2001:db8:2::/48                     -> dc2, dc1, dc3
    192.0.2.0/24, 127.0.0.0/8, 2001:db8:3::/48          -> dc3, dc1, dc2
    anything else                                       -> dc2, dc3, dc1 (default)
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import struct
import subprocess
import uuid
from pathlib import Path

import dns.edns
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from conftest import STEERCTL, assert_no_sanitizer_report, find_rrset, run_steerd, wait_for

ECS = 8
ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "gslb" / "integration"
ZONE = "ecslb.example.test"

SERVER = """server:
  listen: {listen}
  control-socket: {ctl}
  workers: 2
  tcp-workers: 1
{zones}"""


def gslb_yaml() -> str:
    return (DATA / "gslb.yaml").read_text()


def config_text(gslb: str) -> str:
    """Launcher config text: the server part with placeholders, the GSLB part escaped."""
    return SERVER + gslb.replace("{", "{{").replace("}", "}}")


def start(launcher, gslb: str | None = None):
    shutil.copytree(DATA / "nets", launcher.workdir / "nets", dirs_exist_ok=True)
    return launcher(zones={ZONE: DATA / f"{ZONE}.zone"},
                    config=config_text(gslb if gslb is not None else gslb_yaml()))


@pytest.fixture(scope="module")
def srv(module_launcher):
    return start(module_launcher)


def ask(srv, name, rdtype="A", ecs=None, tcp=False, options=None):
    opts = list(options or [])
    if ecs is not None:
        opts.append(dns.edns.ECSOption(ecs[0], ecs[1], 0))
    q = dns.message.make_query(name, rdtype, use_edns=0, options=opts)
    return srv.tcp(q) if tcp else srv.udp(q)


def ecs_of(resp):
    found = [o for o in resp.options if o.otype == ECS]
    assert len(found) == 1, resp
    return found[0]


def addrs(resp, name, rdtype="A"):
    rrset = find_rrset(resp.answer, name, rdtype)
    assert rrset is not None, resp
    return sorted(r.address for r in rrset)


# --- ECS and the resolver address ------------------------------------------------------------

@pytest.mark.parametrize("subnet,prefix,rdtype,want,scope", [
    ("198.51.100.0", 24, "A", "198.51.100.10", 24),      # nets file entry
    ("198.51.100.77", 32, "A", "198.51.100.10", 24),     # longer source: the block's scope
    ("203.0.113.0", 24, "A", "203.0.113.10", 24),        # inline entry
    ("192.0.2.0", 24, "A", "192.0.2.10", 24),
    ("2001:db8:1::", 48, "AAAA", "2001:db8:1::10", 48),  # IPv6 ECS, nets file
    ("2001:db8:2:ff00::", 56, "AAAA", "2001:db8:2::10", 48),
    ("2001:db8:3::", 64, "AAAA", "2001:db8:3::10", 48),
])
@pytest.mark.parametrize("tcp", [False, True])
def test_ecs_lands_in_its_datacenter(srv, subnet, prefix, rdtype, want, scope, tcp):
    name = f"geo.{ZONE}"
    resp = ask(srv, name, rdtype, ecs=(subnet, prefix), tcp=tcp)
    assert resp.rcode() == dns.rcode.NOERROR, resp
    assert resp.flags & dns.flags.AA
    assert addrs(resp, name, rdtype) == [want]
    assert find_rrset(resp.answer, name, rdtype).ttl == 30
    echoed = ecs_of(resp)
    assert (echoed.address, echoed.srclen) == (subnet, prefix)
    assert echoed.scopelen == scope, resp


def test_ecs_outside_the_nets_gets_the_default_with_a_wide_scope(srv):
    resp = ask(srv, f"geo.{ZONE}", ecs=("8.8.8.0", 24))
    assert addrs(resp, f"geo.{ZONE}") == ["203.0.113.10"]  # default: dc2 first
    # The block around 8.8.8.0 holding no configured prefix is far wider than the source.
    assert 0 < ecs_of(resp).scopelen < 24, resp


def test_no_ecs_uses_the_resolver_address(srv):
    # The query comes from 127.0.0.1: the 127.0.0.0/8 entry puts dc3 first.
    resp = ask(srv, f"geo.{ZONE}")
    assert addrs(resp, f"geo.{ZONE}") == ["192.0.2.10"]
    assert not [o for o in resp.options if o.otype == ECS]
    resp = ask(srv, f"geo.{ZONE}", "AAAA")
    assert addrs(resp, f"geo.{ZONE}", "AAAA") == ["2001:db8:3::10"]


def test_private_ecs_counts_as_absent(srv):
    # ecs-private-is-absent: 10.0.0.0/8 in ECS means "use the resolver address" (dc3).
    resp = ask(srv, f"geo.{ZONE}", ecs=("10.1.2.0", 24))
    assert resp.rcode() == dns.rcode.NOERROR
    assert addrs(resp, f"geo.{ZONE}") == ["192.0.2.10"]


@pytest.mark.parametrize("payload,why", [
    (struct.pack("!HBB", 3, 0, 0), "unknown family"),
    (struct.pack("!HBB4s", 1, 33, 0, bytes(4)) + b"\0", "IPv4 source prefix > 32"),
    (struct.pack("!HBB3s", 1, 23, 0, bytes([198, 51, 101])), "address bits beyond the prefix"),
    (struct.pack("!HBB3s", 1, 24, 24, bytes([198, 51, 100])), "non-zero scope in a query"),
])
def test_malformed_ecs_gets_formerr(srv, payload, why):
    resp = ask(srv, f"geo.{ZONE}", options=[dns.edns.GenericOption(ECS, payload)])
    assert resp.rcode() == dns.rcode.FORMERR, why
    assert not resp.answer, why


# --- policies ---------------------------------------------------------------------------------

def test_failover_skips_the_forced_down_datacenter_with_scope_zero(srv):
    name = f"failover.{ZONE}"
    for subnet in ("198.51.100.0", "203.0.113.0", "192.0.2.0", "8.8.8.0"):
        resp = ask(srv, name, ecs=(subnet, 24))
        assert addrs(resp, name) == ["203.0.113.20"], resp  # dc1 forced down: dc2
        assert find_rrset(resp.answer, name, "A").ttl == 20
        assert ecs_of(resp).scopelen == 0, resp  # the answer does not depend on the client


def test_family_without_addresses_is_nodata(srv):
    resp = ask(srv, f"failover.{ZONE}", "AAAA", ecs=("198.51.100.0", 24))
    assert resp.rcode() == dns.rcode.NOERROR
    assert not resp.answer
    assert find_rrset(resp.authority, ZONE, "SOA") is not None, resp
    assert resp.flags & dns.flags.AA


def test_all_down_servfail(srv):
    resp = ask(srv, f"down.{ZONE}")
    assert resp.rcode() == dns.rcode.SERVFAIL, resp
    assert not resp.answer


def test_weighted_distribution(srv):
    name = f"weighted.{ZONE}"
    counts = collections.Counter()
    n = 2000
    for _ in range(n):
        resp = ask(srv, name)
        got = addrs(resp, name)
        assert len(got) == 1, resp
        counts[got[0]] += 1
    assert set(counts) <= {"198.51.100.31", "198.51.100.32"}
    share = counts["198.51.100.31"] / n
    # Weights 3:1 -> 0.75; the standard deviation over 2,000 draws is about 0.01.
    assert 0.69 < share < 0.81, counts


def test_persist_keeps_a_subnet_on_one_address(srv):
    name = f"persist.{ZONE}"
    chosen = {}
    subnets = [f"{a}.{b}.{c}.0" for a, b, c in
               [(198, 51, 100), (203, 0, 113), (192, 0, 2)] + [(100, 20, i) for i in range(14)]]
    for subnet in subnets:
        seen = set()
        for _ in range(8):
            resp = ask(srv, name, ecs=(subnet, 24))
            got = addrs(resp, name)
            assert len(got) == 1, resp
            seen.add(got[0])
            assert ecs_of(resp).scopelen >= 24, resp
        assert len(seen) == 1, (subnet, seen)
        chosen[subnet] = seen.pop()
    # The hash spreads subnets over the sites: more than one address overall.
    assert len(set(chosen.values())) >= 2, chosen


# --- whoami -----------------------------------------------------------------------------------

def test_whoami_a_is_the_resolver(srv):
    resp = ask(srv, f"whoami.{ZONE}")
    assert resp.rcode() == dns.rcode.NOERROR
    assert addrs(resp, f"whoami.{ZONE}") == ["127.0.0.1"]


def test_whoami_txt_shows_resolver_and_ecs(srv):
    resp = ask(srv, f"whoami.{ZONE}", "TXT", ecs=("198.51.100.0", 24))
    rrset = find_rrset(resp.answer, f"whoami.{ZONE}", "TXT")
    assert rrset is not None, resp
    text = " ".join(s.decode() for r in rrset for s in r.strings)
    assert "127.0.0.1" in text and "198.51.100.0/24" in text, text
    assert ecs_of(resp).scopelen == 24


# --- interaction with zone data ---------------------------------------------------------------

def test_zone_cname_into_a_service(srv):
    resp = ask(srv, f"alias.{ZONE}", ecs=("198.51.100.0", 24))
    assert resp.rcode() == dns.rcode.NOERROR
    cname = find_rrset(resp.answer, f"alias.{ZONE}", "CNAME")
    assert cname is not None and cname[0].target.to_text() == f"geo.{ZONE}.", resp
    assert addrs(resp, f"geo.{ZONE}") == ["198.51.100.10"]
    assert ecs_of(resp).scopelen == 24


def test_zone_names_keep_scope_zero(srv):
    resp = ask(srv, f"static.{ZONE}", ecs=("198.51.100.0", 24))
    assert addrs(resp, f"static.{ZONE}") == ["192.0.2.80"]
    assert ecs_of(resp).scopelen == 0


def test_delegation_in_the_zone_still_refers(srv):
    resp = ask(srv, f"www.sub.{ZONE}", ecs=("198.51.100.0", 24))
    assert resp.rcode() == dns.rcode.NOERROR
    assert not resp.answer
    assert not resp.flags & dns.flags.AA
    assert find_rrset(resp.authority, f"sub.{ZONE}", "NS") is not None, resp


# --- real clients: kdig and dig ---------------------------------------------------------------

@pytest.mark.parametrize("tool", ["kdig", "dig"])
def test_subnet_option_of_real_clients(srv, tool):
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is not installed (scripts/setup-deps.sh installs it)")
    res = subprocess.run([tool, f"@{srv.host}", "-p", str(srv.port), "+subnet=203.0.113.0/24",
                          f"geo.{ZONE}", "A"], capture_output=True, text=True, timeout=10)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "203.0.113.10" in out, out
    # Both print the option as "CLIENT-SUBNET: ADDRESS/SOURCE/SCOPE".
    assert "CLIENT-SUBNET: 203.0.113.0/24/24" in out, out


# --- steerctl explain and health ---------------------------------------------------------------

def test_explain_online(srv):
    res = srv.ctl("explain", f"geo.{ZONE}", "127.0.0.1", "198.51.100.0/24")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "dc1" in res.stdout and "198.51.100.10" in res.stdout, res.stdout
    data = srv.ctl_json("explain", f"geo.{ZONE}", "192.0.2.1")
    assert data["name"] == f"geo.{ZONE}" and data["ecs"] is None
    assert "dc3" in data["text"] and "192.0.2.10" in data["text"], data


def test_explain_shows_why_a_datacenter_was_skipped(srv):
    res = srv.ctl("explain", f"failover.{ZONE}", "198.51.100.1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "dc1" in res.stdout and "203.0.113.20" in res.stdout, res.stdout
    assert "down" in res.stdout.lower(), res.stdout


def test_explain_errors(srv):
    res = srv.ctl("explain", f"nosuch.{ZONE}", "192.0.2.1")
    assert res.returncode == 1 and res.stderr, res.stdout + res.stderr
    res = srv.ctl("explain", f"geo.{ZONE}", "not-an-address")
    assert res.returncode == 1 and res.stderr, res.stdout + res.stderr
    res = srv.ctl("explain", f"geo.{ZONE}")
    assert res.returncode == 2, res.stdout + res.stderr


def run_ctl(*args):
    res = subprocess.run([STEERCTL, *args], capture_output=True, text=True, timeout=30)
    assert_no_sanitizer_report(res.stdout + res.stderr)
    return res


def test_explain_offline_from_the_config_file(srv):
    res = run_ctl("explain", "--config", str(srv.config_path), f"geo.{ZONE}", "127.0.0.1",
                  "2001:db8:2::/48")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "dc2" in res.stdout and "2001:db8:2::10" in res.stdout, res.stdout
    res = run_ctl("--json", "explain", "--config", str(srv.config_path), f"geo.{ZONE}",
                  "203.0.113.9")
    assert res.returncode == 0, res.stdout + res.stderr
    reply = json.loads(res.stdout)
    assert reply["ok"] is True and "203.0.113.10" in reply["data"]["text"], reply
    # The same text as the daemon gives.
    online = srv.ctl_json("explain", f"geo.{ZONE}", "203.0.113.9")
    assert online["text"] == reply["data"]["text"]


def test_explain_offline_reports_config_errors(tmp_path):
    shutil.copytree(DATA / "nets", tmp_path / "nets")
    shutil.copy(DATA / f"{ZONE}.zone", tmp_path / f"{ZONE}.zone")
    bad = gslb_yaml().replace("policy: geo", "policy: nearest")
    conf = tmp_path / "steer.yaml"
    conf.write_text(f"zones:\n  - domain: {ZONE}\n    file: {ZONE}.zone\n" + bad)
    res = run_ctl("explain", "--config", str(conf), f"geo.{ZONE}", "192.0.2.1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"{conf}:" in res.stderr and "nearest" in res.stderr, res.stderr


def test_health_lists_targets_with_state_and_reason(srv):
    rows = {r["name"]: r for r in srv.ctl_json("health")}
    down = rows[f"service/failover.{ZONE}/dc1/198.51.100.20"]
    assert down["state"] == "DOWN" and down["forced"] is True, down
    assert f"service/failover.{ZONE}/dc1/*" in down["reason"], down
    up = rows[f"service/failover.{ZONE}/dc2/203.0.113.20"]
    assert up["state"] == "UP" and up["forced"] is False, up
    res = srv.ctl("health")
    assert res.returncode == 0
    line = [l for l in res.stdout.splitlines() if "dc1/198.51.100.20" in l]
    assert line and "DOWN" in line[0] and "yes" in line[0], res.stdout


# --- configuration checks and reload ----------------------------------------------------------

def test_check_config_builds_the_gslb_view(tmp_path):
    shutil.copytree(DATA / "nets", tmp_path / "nets")
    shutil.copy(DATA / f"{ZONE}.zone", tmp_path / f"{ZONE}.zone")
    conf = tmp_path / "steer.yaml"
    zones = f"zones:\n  - domain: {ZONE}\n    file: {ZONE}.zone\n"
    conf.write_text(zones + gslb_yaml())
    res = run_steerd("-c", str(conf), "--check-config", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "GSLB service" in res.stdout, res.stdout
    (tmp_path / "nets" / "dc1.txt").write_text("198.51.100.0/24\nnot-a-prefix\n")
    res = run_steerd("-c", str(conf), "--check-config", cwd=tmp_path)
    assert res.returncode != 0
    assert "dc1.txt:2" in res.stderr, res.stderr


def test_reload_with_a_changed_map_changes_answers(steerd):
    srv = start(steerd)
    name = f"geo.{ZONE}"
    assert addrs(ask(srv, name, ecs=("198.51.100.0", 24)), name) == ["198.51.100.10"]
    text = srv.config_path.read_text()
    new = text.replace("datacenters: [dc1, dc2, dc3] }", "datacenters: [dc3, dc1, dc2] }")
    assert new != text
    srv.config_path.write_text(new)
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    assert addrs(ask(srv, name, ecs=("198.51.100.0", 24)), name) == ["192.0.2.10"]
    assert addrs(ask(srv, name, ecs=("203.0.113.0", 24)), name) == ["203.0.113.10"]


@pytest.mark.parametrize("old,new,word", [
    ("policy: geo", "policy: nearest", "nearest"),                       # GSLB builder
    ("      dc3: { addresses: [192.0.2.20] }", "      dc9: { addresses: [192.0.2.20] }",
     "dc9"),                                                            # parser
    ("- { file: nets/dc1.txt,", "- { file: nets/missing.txt,", "missing.txt"),
])
def test_reload_with_a_gslb_error_keeps_the_old_answers(steerd, old, new, word):
    srv = start(steerd)
    name = f"geo.{ZONE}"
    text = srv.config_path.read_text()
    assert old in text
    srv.config_path.write_text(text.replace(old, new))
    res = srv.ctl("reload")
    assert res.returncode == 1, res.stdout + res.stderr
    assert word in res.stderr, res.stderr
    assert f"{srv.config_path}:" in res.stderr or "missing.txt" in res.stderr, res.stderr
    # The old view keeps serving.
    resp = ask(srv, name, ecs=("198.51.100.0", 24))
    assert addrs(resp, name) == ["198.51.100.10"] and ecs_of(resp).scopelen == 24
    assert addrs(ask(srv, f"failover.{ZONE}"), f"failover.{ZONE}") == ["203.0.113.20"]
    status = srv.ctl_json("status")
    assert status["last_reload"]["ok"] is False
    assert status["gslb"]["services"] == 5, status


def test_zone_only_server_is_unchanged(steerd):
    # No GSLB sections: the view has no names and status says so.
    srv = steerd(zones={ZONE: DATA / f"{ZONE}.zone"})
    resp = ask(srv, f"geo.{ZONE}", ecs=("198.51.100.0", 24))
    assert resp.rcode() == dns.rcode.NXDOMAIN
    assert ecs_of(resp).scopelen == 0
    assert srv.ctl_json("status")["gslb"] == {"services": 0, "maps": 0, "whoami": 0}


# --- a real resolver in front: Unbound with ECS, clients in two network namespaces -------------
#
#   client namespace c1: 198.51.100.2/24 --veth-- 198.51.100.1/24 \
#                                                                   resolver namespace r:
#   client namespace c2: 203.0.113.2/24  --veth-- 203.0.113.1/24  /  unbound on both, steerd on
#                                                                    127.0.0.1 (stub zone, ECS)
# Unbound sends each client's /24 in ECS, so the same name resolves to each client's own site.

UNBOUND_CONF = """server:
  interface: 198.51.100.1
  interface: 203.0.113.1
  port: 53
  access-control: 0.0.0.0/0 allow
  do-daemonize: no
  chroot: ""
  username: ""
  directory: "{dir}"
  pidfile: "{dir}/unbound.pid"
  use-syslog: no
  logfile: "{dir}/unbound.log"
  verbosity: 1
  do-not-query-localhost: no
  qname-minimisation: no
  # .test is one of Unbound's default local zones (RFC 6761): let it be resolved
  local-zone: "test." nodefault
  module-config: "subnetcache iterator"
  send-client-subnet: 127.0.0.1
  max-client-subnet-ipv4: 24
remote-control:
  control-enable: no
stub-zone:
  name: "{zone}"
  stub-addr: 127.0.0.1@{port}
"""


def ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@pytest.fixture
def namespaces():
    """Namespaces r (resolver side), c1 and c2 (clients), wired with veth pairs; all removed
    at teardown, whatever happened."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("network namespaces need root and iproute2")
    tag = uuid.uuid4().hex[:6]
    ns = {k: f"steer-{k}-{tag}" for k in ("r", "c1", "c2")}
    try:
        for name in ns.values():
            ip("netns", "add", name)
            ip("-n", name, "link", "set", "lo", "up")
        for client, net in (("c1", "198.51.100"), ("c2", "203.0.113")):
            inside, outside = f"v{client}{tag}", f"r{client}{tag}"
            ip("link", "add", inside, "netns", ns[client], "type", "veth", "peer", "name",
               outside, "netns", ns["r"])
            ip("-n", ns[client], "addr", "add", f"{net}.2/24", "dev", inside)
            ip("-n", ns[client], "link", "set", inside, "up")
            ip("-n", ns["r"], "addr", "add", f"{net}.1/24", "dev", outside)
            ip("-n", ns["r"], "link", "set", outside, "up")
        yield ns
    finally:
        for name in ns.values():
            ip("netns", "del", name, check=False)


def test_unbound_with_ecs_steers_clients_in_two_namespaces(namespaces, steerd, tmp_path):
    unbound = shutil.which("unbound") or "/usr/sbin/unbound"
    if not os.path.exists(unbound):
        pytest.fail("unbound is not installed (scripts/setup-deps.sh test installs it)")
    ns = namespaces
    shutil.copytree(DATA / "nets", tmp_path / "nets")
    srv = steerd(zones={ZONE: DATA / f"{ZONE}.zone"}, config=config_text(gslb_yaml()),
                 prefix=["ip", "netns", "exec", ns["r"]], ready=False)

    def in_ns(name, *argv, timeout=10):
        return subprocess.run(["ip", "netns", "exec", name, *argv], capture_output=True,
                              text=True, timeout=timeout)

    def steerd_up():
        if not srv.alive():
            pytest.fail(f"steerd exited:\n{srv.log()}")
        return "NOERROR" in in_ns(ns["r"], "kdig", "@127.0.0.1", "-p", str(srv.port),
                                  "+time=1", "+retry=0", ZONE, "SOA").stdout

    wait_for(steerd_up, 20, what="steerd in the resolver namespace")
    udir = tmp_path / "unbound"
    udir.mkdir()
    conf = udir / "unbound.conf"
    conf.write_text(UNBOUND_CONF.format(dir=udir, zone=ZONE, port=srv.port))
    check = subprocess.run(["unbound-checkconf", str(conf)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    proc = subprocess.Popen(["ip", "netns", "exec", ns["r"], unbound, "-d", "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def resolve(client, server):
            res = in_ns(ns[client], "kdig", f"@{server}", "+time=2", "+retry=1", "+short",
                        f"geo.{ZONE}", "A")
            return res.stdout.split()

        def resolver_up():
            if proc.poll() is not None:
                pytest.fail(f"unbound exited: {proc.stderr.read()}\n"
                            f"{(udir / 'unbound.log').read_text(errors='replace')}")
            return resolve("c1", "198.51.100.1")

        wait_for(resolver_up, 20, interval=0.2, what="unbound")
        # Both ask the same resolver name; each lands on its own site (and the cached answer of
        # one client's subnet is not served to the other: scope 24).
        for _ in range(3):
            assert resolve("c1", "198.51.100.1") == ["198.51.100.10"]
            assert resolve("c2", "203.0.113.1") == ["203.0.113.10"]
        # Without ECS support the answer would be the resolver's own (127.0.0.0/8: dc3).
        assert in_ns(ns["r"], "kdig", "@127.0.0.1", "-p", str(srv.port), "+short",
                     f"geo.{ZONE}", "A").stdout.split() == ["192.0.2.10"]
        whoami = in_ns(ns["c2"], "kdig", "@203.0.113.1", "+short", f"whoami.{ZONE}", "TXT")
        assert "203.0.113.0/24" in whoami.stdout, whoami.stdout
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
