"""State-change events and alerts end to end: steerd monitors real TCP backends (started by
the tests), and every change shows up as one structured log line, in `steerctl events`, as a
webhook POST to a Python HTTP server the test runs, and as an exec hook's environment. Also
failed reloads and forwarder upstreams going down (a real upstream: a UDP DNS responder).
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import threading
import time

import dns.message
import dns.rcode
import pytest

from conftest import server_config as yaml, free_port, wait_for
from test_health import TcpBackend, backends, tcp_config, ZONE, ZONE_TEXT  # noqa: F401

TARGET1 = f"service/www.{ZONE}/dc1/127.0.0.11"


def start(launcher, text):
    return launcher(zones={ZONE: ZONE_TEXT}, config=yaml(text))


def events(srv, *args):
    return srv.ctl_json("events", *args)


def test_target_down_and_up_are_events(steerd, backends):
    port = free_port()
    b1 = backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    srv = start(steerd, tcp_config(port))
    first = events(srv)
    assert first["events"] == [] and first["last_seq"] == 0, first
    b1.stop()
    wait_for(lambda: events(srv)["last_seq"] >= 2, 3, 0.05, "target and datacenter events")
    evs = events(srv)["events"]
    target = evs[0]
    assert (target["kind"], target["subject"], target["from"], target["to"]) == \
        ("target", TARGET1, "up", "down"), evs
    assert target["reason"] == f"web@127.0.0.11:{port}: connect: Connection refused", target
    assert target["seq"] == 1 and abs(target["time"] - time.time()) < 5, target
    dc = evs[1]
    assert (dc["kind"], dc["subject"], dc["from"], dc["to"]) == \
        ("datacenter", "datacenter/dc1", "up", "all-down"), evs
    # dc2 still answers: the service is not all-down
    assert not any(e["kind"] == "service" for e in evs), evs
    assert re.search(rf'event kind=target subject={re.escape(TARGET1)} from=up to=down '
                     rf'reason="web@127.0.0.11:{port}: connect: Connection refused" seq=1',
                     srv.log()), srv.log()
    b1.start()
    wait_for(lambda: events(srv, "since=2")["events"], 3, 0.05, "the way back")
    back = events(srv, "since=2")["events"]
    assert [(e["kind"], e["to"]) for e in back] == [("target", "up"), ("datacenter", "up")], back
    assert back[0]["seq"] == 3 and "connected" in back[0]["reason"], back
    # N keeps the newest
    assert [e["seq"] for e in events(srv, "1")["events"]] == [4]
    out = srv.ctl("events").stdout
    assert TARGET1 in out and "up -> down" in out, out


def test_service_all_down_and_failed_reload(steerd, backends):
    port = free_port()
    b1 = backends(TcpBackend, "127.0.0.11", port)
    b2 = backends(TcpBackend, "127.0.0.12", port)
    srv = start(steerd, tcp_config(port))
    b1.stop()
    b2.stop()
    wait_for(lambda: any(e["kind"] == "service" for e in events(srv)["events"]), 3, 0.05,
             "service all-down")
    svc = [e for e in events(srv)["events"] if e["kind"] == "service"][0]
    assert (svc["subject"], svc["from"], svc["to"]) == \
        (f"service/www.{ZONE}", "up", "all-down"), svc
    # a broken config: the reload fails, an event; the next good reload is one too
    good = srv.config_path.read_text()
    srv.config_path.write_text(good + "bogus-key: 1\n")
    res = srv.ctl("reload")
    assert res.returncode != 0
    fail = events(srv)["events"][-1]
    assert (fail["kind"], fail["from"], fail["to"]) == ("reload", "ok", "failed"), fail
    assert fail["subject"] == f"config/{srv.config_path}" and "bogus-key" in fail["reason"], fail
    srv.config_path.write_text(good)
    assert srv.ctl("reload").returncode == 0
    ok = events(srv)["events"][-1]
    assert (ok["kind"], ok["from"], ok["to"]) == ("reload", "failed", "ok"), ok
    assert srv.ctl("reload").returncode == 0
    assert events(srv)["events"][-1]["seq"] == ok["seq"], "a good reload after a good one is no event"
