"""State-change events and alerts end to end: steerd monitors real TCP backends (started by
the tests), and every change shows up as one structured log line, in `steerctl events`, as a
webhook POST to a Python HTTP server the test runs, and as an exec hook's environment. Also
failed reloads and a forwarder upstream going down (a real Unbound as the upstream). Cluster
events are covered by tests/unit/test_events.c (no namespace here).
"""
from __future__ import annotations

import http.server
import json
import os
import re
import socket
import threading
import time
import urllib.request

import dns.flags
import dns.message
import pytest

from conftest import server_config as yaml, free_port, query, wait_for
from test_health import TcpBackend, backends, tcp_config, ZONE, ZONE_TEXT  # noqa: F401
from unbound_support import UNBOUND, LocalUnbound

TARGET1 = f"service/www.{ZONE}/dc1/127.0.0.11"
# steerd names itself by server.identity, else cluster.node-id, else the host name.
NODE = socket.gethostname()[:63]


def start(launcher, text):
    return launcher(zones={ZONE: ZONE_TEXT}, config=yaml(text))


class Receiver:
    """A webhook receiver: http.server in a thread, recording each POST (time, path, JSON)
    and answering with the next scripted status (then 200)."""

    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        self.posts = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    outer.posts.append({"at": time.time(), "path": self.path,
                                        "type": self.headers.get("Content-Type"),
                                        "event": json.loads(body)})
                    status = outer.statuses.pop(0) if outer.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self, **match):
        with self.lock:
            return [p for p in self.posts
                    if all(p["event"].get(k) == v for k, v in match.items())]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(2)


@pytest.fixture
def receiver():
    made = []

    def make(statuses=()):
        r = Receiver(statuses)
        made.append(r)
        return r

    yield make
    for r in made:
        r.stop()


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


# --- webhooks -------------------------------------------------------------------------------

def test_backend_down_is_posted_within_a_second(steerd, backends, receiver):
    port = free_port()
    b1 = backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    hook = receiver()
    srv = start(steerd, tcp_config(port, extra=f"""alerts:
  - {{ webhook: "{hook.url}", timeout: 2s }}
"""))
    b1.stop()
    wait_for(lambda: hook.events(kind="target"), 3, 0.02, "the POST")
    post = hook.events(kind="target")[0]
    ev = post["event"]
    assert post["path"] == "/hook" and post["type"] == "application/json", post
    assert (ev["subject"], ev["from"], ev["to"], ev["node"]) == (TARGET1, "up", "down", NODE), ev
    assert ev["reason"] == f"web@127.0.0.11:{port}: connect: Connection refused", ev
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", ev["timestamp"]), ev
    # the event's time is when the monitor's result was published
    assert 0 <= post["at"] - ev["time"] < 1.0, (post["at"], ev["time"])
    ring = srv.ctl_json("events")["events"][0]
    assert (ring["seq"], ring["time"]) == (ev["seq"], ev["time"]), (ring, ev)
    wait_for(lambda: hook.events(kind="datacenter"), 3, 0.02, "the datacenter POST")
    wait_for(lambda: srv.ctl_json("stats")["alerts"]["sent"] == 2, 3, 0.05, "counted")
    alerts = srv.ctl_json("stats")["alerts"]
    assert alerts["failures"] == 0 and alerts["dropped"] == 0 and alerts["queued"] == 0, alerts
    assert alerts["destinations"][0]["type"] == "webhook", alerts
    assert alerts["destinations"][0]["target"] == hook.url, alerts


def test_receiver_answering_500_twice_gets_the_third_attempt(steerd, backends, receiver):
    port = free_port()
    b1 = backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    hook = receiver([500, 500])
    http_port = free_port()
    srv = start(steerd, tcp_config(port, extra=f"""alerts:
  - {{ webhook: "{hook.url}", timeout: 2s, retries: 2 }}
http:
  listen: [127.0.0.1:{http_port}]
"""))
    b1.stop()
    wait_for(lambda: len(hook.events(kind="target")) == 3, 6, 0.05, "three attempts")
    posts = hook.events(kind="target")
    assert len({p["event"]["seq"] for p in posts}) == 1, posts
    gaps = [b["at"] - a["at"] for a, b in zip(posts, posts[1:])]
    assert 0.9 < gaps[0] < 1.6 and 1.9 < gaps[1] < 2.6, gaps
    wait_for(lambda: srv.ctl_json("stats")["alerts"]["sent"] >= 1, 3, 0.05, "delivered")
    alerts = srv.ctl_json("stats")["alerts"]
    assert alerts["failures"] == 2 and alerts["given_up"] == 0, alerts
    assert "event 1 attempt 1 failed: HTTP 500; retrying in 1 s" in srv.log(), srv.log()
    # the same counters on /metrics, per destination, once every event is delivered
    wait_for(lambda: srv.ctl_json("stats")["alerts"]["sent"] == events(srv)["last_seq"], 5,
             0.05, "every event delivered")
    dest = srv.ctl_json("stats")["alerts"]["destinations"][0]
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    labels = f'{{type="webhook",target="{hook.url}"}}'
    for name, key in (("steer_alerts_sent_total", "sent"),
                      ("steer_alerts_failures_total", "failures"),
                      ("steer_alerts_given_up_total", "given_up"),
                      ("steer_alerts_dropped_total", "dropped"), ("steer_alerts_queued", "queued")):
        assert f"{name}{labels} {dest[key]}\n" in text, \
            "\n".join(line for line in text.splitlines() if line.startswith("steer_alerts"))
    assert dest["failures"] == 2 and dest["sent"] >= 1, dest
    changes = int(re.search(r"^steer_state_changes_total (\d+)$", text, re.M).group(1))
    assert changes == events(srv)["last_seq"] >= 1, changes


def test_failed_reload_is_posted(steerd, backends, receiver):
    port = free_port()
    backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    hook = receiver()
    srv = start(steerd, tcp_config(port, extra=f"""alerts:
  - {{ webhook: "{hook.url}" }}
"""))
    good = srv.config_path.read_text()
    srv.config_path.write_text(good.replace("fall: 2", "fall: many"))
    assert srv.ctl("reload").returncode != 0
    wait_for(lambda: hook.events(kind="reload"), 3, 0.02, "the reload POST")
    ev = hook.events(kind="reload")[0]["event"]
    assert (ev["from"], ev["to"]) == ("ok", "failed"), ev
    assert str(srv.config_path) in ev["reason"] and "fall" in ev["reason"], ev
    srv.config_path.write_text(good)
    assert srv.ctl("reload").returncode == 0
    wait_for(lambda: hook.events(kind="reload", to="ok"), 3, 0.02, "the good reload POST")


@pytest.mark.skipif(not os.path.exists(UNBOUND), reason="needs unbound")
def test_upstream_down_is_posted(steerd, receiver, tmp_path):
    ub = LocalUnbound(tmp_path, ['local-zone: "fwd.test." static',
                                 'local-data: "www.fwd.test. 300 IN A 198.51.100.1"',
                                 'local-data: "probe.fwd.test. 300 IN A 198.51.100.2"'],
                      "www.fwd.test")
    hook = receiver()
    try:
        srv = steerd(zones={"example.test": "example.test.zone"}, config=yaml(f"""forward:
  allow-recursion: [127.0.0.0/8]
  groups:
    - domain: .
      upstreams:
        - {{ name: unbound1, address: "{ub.addr}" }}
      probe: {{ name: probe.fwd.test, interval: 200ms, timeout: 100ms, fall: 2, rise: 2 }}
alerts:
  - {{ webhook: "{hook.url}" }}
"""))
        q = query("www.fwd.test", "A")
        q.flags |= dns.flags.RD
        assert srv.udp(q).answer, "forwarded"
        ub.stop()
        wait_for(lambda: hook.events(kind="upstream"), 5, 0.05, "the upstream POST")
        ev = hook.events(kind="upstream")[0]["event"]
        assert (ev["subject"], ev["from"], ev["to"]) == \
            ("upstream/unbound1", "up", "upstream-down"), ev
        assert ev["reason"], ev
        row = srv.ctl_json("upstreams")["upstreams"][0]
        assert row["state"] == "upstream-down", row
    finally:
        ub.stop()


# --- exec hooks -----------------------------------------------------------------------------

def test_exec_hook_gets_the_event_in_its_environment(steerd, backends, tmp_path):
    port = free_port()
    b1 = backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    out = tmp_path / "hook.env"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"""#!/bin/sh
[ -t 0 ] && echo "stdin is a terminal" >> {out}
read line && echo "stdin not empty" >> {out}
env | grep '^STEER_EVENT_' | sort >> {out}
echo END >> {out}
""")
    hook.chmod(0o755)
    srv = start(steerd, tcp_config(port, extra=f"""alerts:
  - {{ exec: {hook} }}
"""))
    b1.stop()
    wait_for(lambda: out.exists() and "END" in out.read_text(), 3, 0.02, "the hook ran")
    env = dict(line.split("=", 1) for line in out.read_text().split("\n")[:8])
    assert env["STEER_EVENT_KIND"] == "target" and env["STEER_EVENT_SUBJECT"] == TARGET1, env
    assert (env["STEER_EVENT_FROM"], env["STEER_EVENT_TO"]) == ("up", "down"), env
    assert env["STEER_EVENT_REASON"] == f"web@127.0.0.11:{port}: connect: Connection refused"
    assert env["STEER_EVENT_SEQ"] == "1" and env["STEER_EVENT_NODE"] == NODE, env
    assert re.fullmatch(r"\d{4}-.*Z", env["STEER_EVENT_TIME"]), env
    assert out.read_text().split("\n")[:8] == sorted(out.read_text().split("\n")[:8])
    assert "stdin" not in out.read_text()
    wait_for(lambda: srv.ctl_json("stats")["alerts"]["sent"] >= 1, 3, 0.05, "counted")


def test_override_is_an_event_with_its_rule(steerd, backends):
    port = free_port()
    backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    srv = start(steerd, tcp_config(port))
    assert srv.ctl("override", "set", "service/*/dc1/*", "down").returncode == 0
    ev = events(srv)["events"]
    assert [(e["kind"], e["subject"], e["to"]) for e in ev] == [
        ("target", TARGET1, "down"), ("datacenter", "datacenter/dc1", "all-down")], ev
    assert "forced DOWN by override 'service/*/dc1/*'" in ev[0]["reason"], ev[0]
    assert srv.ctl("override", "clear", "service/*/dc1/*").returncode == 0
    back = events(srv, "since=2")["events"]
    assert [(e["kind"], e["to"]) for e in back] == [("target", "up"), ("datacenter", "up")], back
    assert back[0]["reason"].startswith(f"web@127.0.0.11:{port}: "), back[0]
