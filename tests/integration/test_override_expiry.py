"""Admin overrides with an expiry: `steerctl override set PATTERN up|down FOR` and `override
weight PATTERN N FOR` lapse by themselves (a timer on the control loop republishes the GSLB
view), the expiry is saved in the state file and survives a restart, and a rule that lapsed
while the daemon was down is not applied at start.

Same configuration as test_gslb_admin.py (tests/data/gslb/integration/gslb.yaml plus a state
file): geo answers dc1 (198.51.100.10) to a dc1 client, dc2 (203.0.113.10) when dc1 is down.
"""
from __future__ import annotations

import time

from conftest import wait_for
from test_gslb_admin import WT, geo, health, start, weight_counts
from test_gslb import ZONE

DC1 = "198.51.100.10"
DC2 = "203.0.113.10"
PATTERN = "service/*/dc1/*"


def admin_rules(srv):
    return [r for r in srv.ctl_json("override", "list")["overrides"] if r["source"] == "admin"]


def test_timed_override_lapses_by_itself(steerd):
    srv = start(steerd)
    assert geo(srv) == [DC1]
    before = time.time()
    data = srv.ctl_json("override", "set", PATTERN, "down", "2s")
    assert data["action"] == "set" and data["state"] == "DOWN", data
    assert before + 1.9 <= data["expires"] <= time.time() + 2.1, data
    assert 0 < data["expires_in_ms"] <= 2000, data
    assert geo(srv) == [DC2]
    (rule,) = admin_rules(srv)
    assert rule["pattern"] == PATTERN and rule["expires"] == data["expires"], rule
    assert "UNTIL" in (steerd.workdir / "overrides.state").read_text()
    # Nobody calls anything: the daemon drops it at the deadline and serves dc1 again.
    wait_for(lambda: geo(srv) == [DC1], timeout=4.0, what="the override to lapse")
    lapsed = time.time()
    assert lapsed >= data["expires"] - 0.05, (lapsed, data["expires"])
    assert lapsed <= data["expires"] + 1.0, (lapsed, data["expires"])
    assert admin_rules(srv) == []
    assert "dc1" not in (steerd.workdir / "overrides.state").read_text()
    assert f"override '{PATTERN}' DOWN expired" in srv.log()
    row = health(srv)[f"service/geo.{ZONE}/dc1/{DC1}"]
    assert row["state"] == "UP" and row["forced"] is False, row


def test_steerctl_shows_the_expiry(steerd):
    srv = start(steerd)
    res = srv.ctl("override", "set", PATTERN, "down", "30m")
    assert res.returncode == 0, res.stderr
    assert "forced DOWN" in res.stdout, res.stdout
    assert "expires in 29m" in res.stdout or "expires in 30m" in res.stdout, res.stdout
    res = srv.ctl("override", "list")
    line = [l for l in res.stdout.splitlines() if PATTERN in l]
    assert line and "EXPIRES" in res.stdout, res.stdout
    assert "in 29m" in line[0] or "in 30m" in line[0], res.stdout
    # Config rules never expire.
    assert [l for l in res.stdout.splitlines() if "config" in l][0].endswith("never"), res.stdout


def test_set_without_for_makes_a_timed_rule_permanent(steerd):
    srv = start(steerd)
    srv.ctl_json("override", "set", PATTERN, "down", "1s")
    data = srv.ctl_json("override", "set", PATTERN, "down")
    assert data["expires"] is None and data["expires_in_ms"] is None, data
    time.sleep(1.5)
    assert geo(srv) == [DC2]
    (rule,) = admin_rules(srv)
    assert rule["expires"] is None, rule


def test_timed_weight_lapses(steerd):
    srv = start(steerd)
    a81 = f"service/{WT}/dc1/198.51.100.81"
    data = srv.ctl_json("override", "weight", a81, "0", "1500ms")
    assert data["weight"] == 0 and data["expires_in_ms"] <= 1500, data
    assert set(weight_counts(srv, 100)) == {"198.51.100.82"}
    wait_for(lambda: admin_rules(srv) == [], timeout=4.0, what="the weight rule to lapse")
    assert set(weight_counts(srv)) == {"198.51.100.81", "198.51.100.82"}
    assert f"override '{a81}' WEIGHT 0 expired" in srv.log()


def test_expiry_survives_a_restart(steerd):
    srv = start(steerd)
    data = srv.ctl_json("override", "set", PATTERN, "down", "4s")
    srv.stop()
    assert not srv.problems(), srv.problems()
    srv.returncode = None
    srv.proc = None
    srv.start()
    # Still forced after the restart, with the same deadline, then it lapses on time.
    (rule,) = admin_rules(srv)
    assert abs(rule["expires"] - data["expires"]) < 0.002, (rule, data)
    if time.time() < data["expires"] - 0.3:
        assert geo(srv) == [DC2]
    wait_for(lambda: geo(srv) == [DC1], timeout=6.0, what="the restored override to lapse")
    assert time.time() >= data["expires"] - 0.05


def test_rule_that_lapsed_while_down_is_not_applied(steerd):
    srv = start(steerd)
    srv.ctl_json("override", "set", PATTERN, "down", "1s")
    srv.ctl_json("override", "set", "service/geo.*/dc2/*", "down")
    srv.stop()
    assert not srv.problems(), srv.problems()
    time.sleep(1.2)
    srv.returncode = None
    srv.proc = None
    srv.start()
    assert [r["pattern"] for r in admin_rules(srv)] == ["service/geo.*/dc2/*"]
    assert geo(srv) == [DC1]


def test_bad_durations_are_refused(steerd):
    srv = start(steerd)
    for args, needle in [
        (("set", PATTERN, "down", "30"), "FOR must be a duration"),
        (("set", PATTERN, "down", "0s"), "FOR must be a duration"),
        (("set", PATTERN, "down", "-5m"), "FOR must be a duration"),
        (("set", PATTERN, "down", "100d"), "at most 49 days"),
        (("weight", f"service/{WT}/dc1/198.51.100.81", "default", "1m"), "FOR makes no sense"),
    ]:
        res = srv.ctl("override", *args)
        assert res.returncode == 1 and needle in res.stderr, (args, res.stdout, res.stderr)
    assert admin_rules(srv) == []
    res = srv.ctl("override", "set", PATTERN, "down", "1m", "extra")
    assert res.returncode == 2 and "usage: override set PATTERN up|down [FOR]" in res.stderr, \
        res.stderr
