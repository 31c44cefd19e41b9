"""GSLB administration at run time: admin overrides through steerctl (applied without a reload,
saved to the state file, restored after a restart, kept across reloads), the ECS counters of
`steerctl stats`, and datacenter-level weights (services.datacenters.<dc>.weight).

The configuration is tests/data/gslb/integration/gslb.yaml (see test_gslb.py for the map) plus a
state file and one datacenter-weighted service.
"""
from __future__ import annotations

import collections
import json
import shutil

import dns.edns
import dns.message
import pytest

from conftest import find_rrset
from test_gslb import DATA, ZONE, config_text, gslb_yaml

DCW = f"dcweighted.{ZONE}"
WT = f"weights.{ZONE}"
DCW_SERVICE = f"""  - name: {DCW}
    policy: weighted
    ttl: 10
    datacenters:
      dc1: {{ addresses: [198.51.100.70], weight: 3 }}
      dc2: {{ addresses: [203.0.113.70] }}
  - name: {WT}
    policy: failover
    ttl: 10
    datacenters:
      dc1: {{ addresses: [198.51.100.81, 198.51.100.82], policy: weighted, weights: [1, 1] }}
"""


def admin_config(state_file: bool = True) -> str:
    gslb = gslb_yaml().replace("whoami: [", DCW_SERVICE + "whoami: [", 1)
    assert DCW in gslb
    text = config_text(gslb)
    if state_file:
        text = text.replace("gslb:\n", "gslb:\n  state-file: {dir}/overrides.state\n", 1)
    return text


def start(launcher, state_file: bool = True):
    shutil.copytree(DATA / "nets", launcher.workdir / "nets", dirs_exist_ok=True)
    return launcher(zones={ZONE: DATA / f"{ZONE}.zone"}, config=admin_config(state_file))


def ask(srv, name, rdtype="A", ecs=None):
    opts = [dns.edns.ECSOption(ecs[0], ecs[1], 0)] if ecs else []
    return srv.udp(dns.message.make_query(name, rdtype, use_edns=0, options=opts))


def addrs(resp, name, rdtype="A"):
    rrset = find_rrset(resp.answer, name, rdtype)
    assert rrset is not None, resp
    return sorted(r.address for r in rrset)


def geo(srv):
    """The geo answer for a dc1 client (ECS 198.51.100.0/24): dc1 first, then dc2, dc3."""
    return addrs(ask(srv, f"geo.{ZONE}", ecs=("198.51.100.0", 24)), f"geo.{ZONE}")


def health(srv):
    return {r["name"]: r for r in srv.ctl_json("health")}


# --- overrides ----------------------------------------------------------------------------------

def test_override_set_moves_answers_at_once_and_clear_restores(steerd):
    srv = start(steerd)
    assert geo(srv) == ["198.51.100.10"]
    res = srv.ctl("override", "set", "service/*/dc1/*", "down")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "forced DOWN" in res.stdout and "service/*/dc1/*" in res.stdout, res.stdout
    # The very next query sees it: no reload, no delay.
    assert geo(srv) == ["203.0.113.10"]
    row = health(srv)[f"service/geo.{ZONE}/dc1/198.51.100.10"]
    assert row["state"] == "DOWN" and row["forced"] is True, row
    assert "service/*/dc1/*" in row["reason"], row
    # The forced-up rule later in the list wins for one address.
    data = srv.ctl_json("override", "set", f"service/geo.{ZONE}/dc1/198.51.100.10", "UP")
    assert data["action"] == "set" and data["state"] == "UP" and data["targets"] == 1, data
    assert geo(srv) == ["198.51.100.10"]
    data = srv.ctl_json("override", "clear", f"service/geo.{ZONE}/dc1/198.51.100.10")
    assert data["action"] == "clear", data
    assert geo(srv) == ["203.0.113.10"]
    srv.ctl_json("override", "clear", "service/*/dc1/*")
    assert geo(srv) == ["198.51.100.10"]
    row = health(srv)[f"service/geo.{ZONE}/dc1/198.51.100.10"]
    assert row["state"] == "UP" and row["forced"] is False, row
    # The config's own overrides were never touched.
    assert health(srv)[f"service/failover.{ZONE}/dc1/198.51.100.20"]["state"] == "DOWN"
    assert "override cleared" in srv.log() or "override set" in srv.log()


def test_override_list_shows_config_and_admin_rules(steerd):
    srv = start(steerd)
    srv.ctl_json("override", "set", "service/geo.*/dc2/*", "down")
    data = srv.ctl_json("override", "list")
    assert data["state_file"].endswith("overrides.state"), data
    rules = [(r["pattern"], r["state"], r["source"]) for r in data["overrides"]]
    assert rules == [
        (f"service/failover.{ZONE}/dc1/*", "DOWN", "config"),
        (f"service/down.{ZONE}/*", "DOWN", "config"),
        ("service/geo.*/dc2/*", "DOWN", "admin"),
    ], data
    mine = data["overrides"][2]
    assert mine["targets"] == 2, mine  # the geo service's dc2 has one IPv4 and one IPv6
    res = srv.ctl("override", "list")
    assert res.returncode == 0, res.stderr
    line = [l for l in res.stdout.splitlines() if "service/geo.*/dc2/*" in l]
    assert line and "DOWN" in line[0] and "admin" in line[0], res.stdout


def test_override_is_saved_and_restored_after_a_restart(steerd):
    srv = start(steerd)
    srv.ctl_json("override", "set", "service/*/dc1/*", "down")
    state = (steerd.workdir / "overrides.state").read_text()
    assert "service/*/dc1/*" in state and "DOWN" in state.upper(), state
    assert geo(srv) == ["203.0.113.10"]
    srv.stop()
    assert not srv.problems(), srv.problems()
    srv.returncode = None
    srv.proc = None
    srv.start()
    assert geo(srv) == ["203.0.113.10"]
    rules = srv.ctl_json("override", "list")["overrides"]
    assert [r["pattern"] for r in rules if r["source"] == "admin"] == ["service/*/dc1/*"], rules
    # A reload keeps it too, and clearing it after the restart works and is saved.
    assert srv.ctl("reload").returncode == 0
    assert geo(srv) == ["203.0.113.10"]
    srv.ctl_json("override", "clear", "service/*/dc1/*")
    assert geo(srv) == ["198.51.100.10"]
    assert "dc1" not in (steerd.workdir / "overrides.state").read_text()


def test_override_without_state_file_survives_a_reload(steerd):
    srv = start(steerd, state_file=False)
    data = srv.ctl_json("override", "set", "service/*/dc1/*", "down")
    assert data["state_file"] is None, data
    assert "state file: none" in srv.ctl("override", "list").stdout
    assert geo(srv) == ["203.0.113.10"]
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    assert geo(srv) == ["203.0.113.10"]
    assert not list(steerd.workdir.glob("overrides*"))


@pytest.mark.parametrize("args,needle", [
    (("set", "service/[dc1", "down"), "["),           # unclosed bracket
    (("set", "service/a b", "down"), "pattern"),      # whitespace: not storable
    (("set", "service/*/dc1/*", "sideways"), "up' or 'down"),
    (("clear", "service/never/set/*"), "no admin override"),
    (("clear", f"service/down.{ZONE}/*"), "configuration"),
])
def test_bad_override_commands_are_clear_errors(steerd, args, needle):
    srv = start(steerd)
    before = geo(srv)
    res = srv.ctl("override", *args)
    assert res.returncode == 1, res.stdout + res.stderr
    assert needle in res.stderr, res.stderr
    assert geo(srv) == before
    assert srv.ctl_json("override", "list")["overrides"][-1]["source"] == "config"


def raw_call(srv, cmd, args):
    """One request on the control socket, without steerctl's own checks."""
    return srv.ctl_raw(json.dumps({"cmd": cmd, "args": args}).encode() + b"\n")


def test_override_usage_errors(steerd):
    srv = start(steerd)
    res = srv.ctl("override")
    assert res.returncode == 2, res.stdout + res.stderr
    res = srv.ctl("override", "set", "x")
    assert res.returncode == 2 and "usage: override set PATTERN up|down" in res.stderr, res.stderr
    # The daemon checks the same table, for clients other than steerctl.
    reply = raw_call(srv, "override", ["set", "x"])
    assert reply["ok"] is False and "usage: override set" in reply["error"], reply
    reply = raw_call(srv, "override", ["frobnicate", "x"])
    assert reply["ok"] is False and "override list" in reply["error"], reply


# --- weights from the API ----------------------------------------------------------------------

def weight_counts(srv, n=400):
    return collections.Counter(addrs(ask(srv, WT), WT)[0] for _ in range(n))


def test_weight_override_steers_weighted_picks_and_is_saved(steerd):
    srv = start(steerd)
    base = weight_counts(srv)
    assert set(base) == {"198.51.100.81", "198.51.100.82"}, base
    a81 = f"service/{WT}/dc1/198.51.100.81"
    data = srv.ctl_json("override", "weight", a81, "0")
    assert data["kind"] == "weight" and data["weight"] == 0 and data["targets"] == 1, data
    # Drained: every answer is the other address, at once.
    assert weight_counts(srv, 100) == {"198.51.100.82": 100}
    row = health(srv)[a81]
    assert row["weight_override"] == 0 and row["state"] == "UP", row
    # 9:1 instead of the configured 1:1 (binomial: 90% +- 6 sigma over 400 draws).
    srv.ctl_json("override", "weight", a81, "9")
    srv.ctl_json("override", "weight", f"service/{WT}/dc1/198.51.100.82", "1")
    share = weight_counts(srv)["198.51.100.81"] / 400
    assert 0.81 < share < 0.99, share
    state = (steerd.workdir / "overrides.state").read_text()
    assert f"{a81} WEIGHT 9" in state, state
    listed = [r for r in srv.ctl_json("override", "list")["overrides"] if "weight" in r]
    assert [(r["pattern"], r["weight"]) for r in listed] == [
        (a81, 9), (f"service/{WT}/dc1/198.51.100.82", 1)], listed
    out = srv.ctl("override", "weight", a81, "9").stdout
    assert "weight 9" in out, out
    # Survives a restart; a state rule on the same pattern is independent of the weight.
    srv.stop()
    srv.returncode = None
    srv.proc = None
    srv.start()
    assert health(srv)[a81]["weight_override"] == 9
    srv.ctl_json("override", "set", a81, "down")
    assert weight_counts(srv, 50) == {"198.51.100.82": 50}
    # "default" goes back to the configured weight and leaves the state rule alone.
    data = srv.ctl_json("override", "weight", a81, "default")
    assert data["action"] == "clear" and data["kind"] == "weight", data
    assert data["cleared"] == ["weight"], data
    row = health(srv)[a81]
    assert "weight_override" not in row and row["state"] == "DOWN" and row["forced"], row
    srv.ctl_json("override", "clear", a81)
    srv.ctl_json("override", "weight", a81, "9")
    # "clear" drops every admin rule of the pattern: the state and the weight.
    srv.ctl_json("override", "set", a81, "down")
    data = srv.ctl_json("override", "clear", a81)
    assert data["action"] == "clear" and data["cleared"] == ["state", "weight"], data
    row = health(srv)[a81]
    assert "weight_override" not in row and not row["forced"], row
    assert f"{a81} " not in (steerd.workdir / "overrides.state").read_text()
    res = srv.ctl("override", "weight", a81, "default")
    assert res.returncode == 1 and "no admin override" in res.stderr, res.stderr
    res = srv.ctl("override", "clear", a81)
    assert res.returncode == 1 and "no admin override" in res.stderr, res.stderr


def test_weight_override_refused_where_the_policy_ignores_weights(steerd):
    srv = start(steerd)
    pattern = f"service/failover.{ZONE}/dc1/*"
    res = srv.ctl("override", "weight", pattern, "5")
    assert res.returncode == 1, res.stdout + res.stderr
    assert (f"{pattern}: policy 'all' of datacenter dc1 in service failover.{ZONE} ignores "
            "weights; weights apply to 'weighted', 'multi' and 'persist'") in res.stderr, \
        res.stderr
    # A wide pattern is refused as a whole when any target it matches would ignore it.
    res = srv.ctl("override", "weight", "service/*", "5")
    assert res.returncode == 1 and "ignores weights" in res.stderr, res.stderr
    assert not [r for r in srv.ctl_json("override", "list")["overrides"] if "weight" in r]
    assert "WEIGHT" not in (steerd.workdir / "overrides.state").read_text() \
        if (steerd.workdir / "overrides.state").exists() else True
    # persist and weighted datacenters read address weights: accepted.
    data = srv.ctl_json("override", "weight", f"service/persist.{ZONE}/dc1/*", "5")
    assert data["targets"] == 2 and data["weight"] == 5, data
    data = srv.ctl_json("override", "weight", f"service/{WT}/dc1/*", "5")
    assert data["targets"] == 2, data
    srv.ctl_json("override", "set", f"service/{WT}/dc1/*", "down")
    out = srv.ctl("override", "clear", f"service/{WT}/dc1/*").stdout
    assert f"cleared the state and weight rules of 'service/{WT}/dc1/*' (2 targets)" in out, out


@pytest.mark.parametrize("value", ["-1", "65536", "x", "", "1.5"])
def test_bad_weight_values_are_refused(steerd, value):
    srv = start(steerd)
    res = srv.ctl("override", "weight", f"service/{WT}/*", value)
    assert res.returncode == 1 and "0..65535" in res.stderr, res.stdout + res.stderr
    assert not [r for r in srv.ctl_json("override", "list")["overrides"] if "weight" in r]


# --- ECS counters -------------------------------------------------------------------------------

def test_ecs_counters_by_family_ignored_and_resolver(steerd):
    srv = start(steerd)
    before = srv.ctl_json("stats")["ecs"]
    assert before == {"ipv4": 0, "ipv6": 0, "ignored": 0, "resolvers": []}, before
    for _ in range(3):
        ask(srv, f"geo.{ZONE}", ecs=("198.51.100.0", 24))
    for _ in range(2):
        ask(srv, f"geo.{ZONE}", "AAAA", ecs=("2001:db8:1::", 48))
    # Private ECS under ecs-private-is-absent: counted as IPv4 ECS and as ignored.
    ask(srv, f"geo.{ZONE}", ecs=("10.1.2.0", 24))
    # No ECS: counts nothing here.
    ask(srv, f"geo.{ZONE}")
    # ECS on a zone name counts by family but is not a GSLB decision.
    ask(srv, f"static.{ZONE}", ecs=("198.51.100.0", 24))
    ecs = srv.ctl_json("stats")["ecs"]
    assert ecs["ipv4"] == 5 and ecs["ipv6"] == 2 and ecs["ignored"] == 1, ecs
    assert ecs["resolvers"] == [{"address": "127.0.0.1", "queries": 7}], ecs
    res = srv.ctl("stats")
    assert res.returncode == 0, res.stderr
    assert "top ECS resolvers" in res.stdout and "127.0.0.1" in res.stdout, res.stdout


# --- datacenter weights -------------------------------------------------------------------------

def test_datacenter_level_weighted_follows_datacenter_weights(steerd):
    srv = start(steerd)
    counts = collections.Counter()
    n = 2000
    for _ in range(n):
        got = addrs(ask(srv, DCW), DCW)
        assert len(got) == 1
        counts[got[0]] += 1
    assert set(counts) <= {"198.51.100.70", "203.0.113.70"}, counts
    share = counts["198.51.100.70"] / n
    # dc1 weight 3, dc2 weight 1 (default): 0.75, standard deviation about 0.01.
    assert 0.69 < share < 0.81, counts
    # Forcing dc1 down leaves dc2 alone.
    srv.ctl_json("override", "set", f"service/{DCW}/dc1/*", "down")
    assert {addrs(ask(srv, DCW), DCW)[0] for _ in range(50)} == {"203.0.113.70"}


def test_datacenter_weight_out_of_range_is_a_config_error(steerd, tmp_path):
    from conftest import run_steerd
    shutil.copytree(DATA / "nets", tmp_path / "nets", dirs_exist_ok=True)
    shutil.copy(DATA / f"{ZONE}.zone", tmp_path / f"{ZONE}.zone")
    gslb = gslb_yaml().replace("whoami: [", DCW_SERVICE.replace("weight: 3", "weight: 0") +
                               "whoami: [", 1)
    conf = tmp_path / "steer.yaml"
    conf.write_text(f"zones:\n  - domain: {ZONE}\n    file: {ZONE}.zone\n" + gslb)
    res = run_steerd("--check-config", "-c", str(conf))
    assert res.returncode != 0, res.stdout + res.stderr
    assert f"{conf}:" in res.stderr and "weight" in res.stderr, res.stderr


# --- GSLB decision counters ---------------------------------------------------------------------

def test_gslb_decision_counters(steerd):
    srv = start(steerd)
    before = srv.ctl_json("stats")
    assert before["gslb"] == {"services": 0, "addresses": 0, "cname": 0, "nodata": 0,
                              "servfail": 0, "all_down": 0, "ecs_used": 0, "ecs_ignored": 0,
                              "whoami": 0}, before
    for _ in range(3):
        ask(srv, f"geo.{ZONE}", ecs=("198.51.100.0", 24))      # decided on the ECS subnet
    ask(srv, f"geo.{ZONE}", ecs=("10.1.2.0", 24))              # private ECS: ignored
    ask(srv, f"geo.{ZONE}")                                   # resolver address, no ECS
    ask(srv, f"failover.{ZONE}", "MX")                        # not a decision: zone type
    ask(srv, f"whoami.{ZONE}", "TXT")
    ask(srv, f"static.{ZONE}")                                # zone name: no GSLB at all
    after = srv.ctl_json("stats")
    g = after["gslb"]
    assert g["services"] == 5 and g["addresses"] == 5, g
    assert g["ecs_used"] == 3 and g["ecs_ignored"] == 1 and g["whoami"] == 1, g
    assert g["nodata"] == 0 and g["servfail"] == 0 and g["cname"] == 0, g
    # the layers' counters still add up to the same top-level view
    assert after["ecs"]["ignored"] == 1 and after["ecs"]["ipv4"] == 4, after["ecs"]
    assert after["queries"]["udp"] == before["queries"]["udp"] + 8, after["queries"]
