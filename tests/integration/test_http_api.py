"""The HTTP API (http: listen, token-file, read-only-open): every control command over
GET|POST /api/v1/<command>/<args...>, answered by the control thread with the same JSON as the
UNIX socket. Driven with Python's urllib and curl against a real steerd with the GSLB
configuration of test_gslb_admin.py: the twins of every steerctl command, the token rules
(401, 403, 405; a wrong token of the right length), a failed reload returned as 500 while the
old zone keeps answering, a timed override that lapses, IPv6, bad input and a thousand idle
connections that must not hold up the control socket or DNS.
"""
from __future__ import annotations

import http.client
import json
import os
import resource
import socket
import subprocess
import time
import urllib.error
import urllib.request

import dns.message
import pytest

from conftest import free_port, wait_for
from test_gslb import DATA, ZONE
from test_gslb_admin import admin_config, geo

import shutil

TOKEN = "0123456789abcdef0123456789abcdef"
WRONG = "0123456789abcdef0123456789abcdeF"  # same length, last byte differs
DC1, DC2 = "198.51.100.10", "203.0.113.10"


def http_yaml(port: int, token: bool = True, read_only_open: bool = True) -> str:
    text = f'http:\n  listen: ["127.0.0.1:{port}", "[::1]:{port}"]\n'
    if token:
        text += "  token-file: {dir}/api.token\n"
    return text + f"  read-only-open: {'true' if read_only_open else 'false'}\n"


def write_token(workdir, token=TOKEN, mode=0o600):
    path = workdir / "api.token"
    path.write_text(token + "\n")
    os.chmod(path, mode)
    return path


def start(launcher, token=True, read_only_open=True, ready=True):
    shutil.copytree(DATA / "nets", launcher.workdir / "nets", dirs_exist_ok=True)
    if token:
        write_token(launcher.workdir)
    port = free_port()
    srv = launcher(zones={ZONE: DATA / f"{ZONE}.zone"},
                   config=admin_config() + http_yaml(port, token, read_only_open), ready=ready)
    srv.http_port = port
    if ready:
        wait_for(lambda: port_open(port), timeout=5, what="the HTTP port")
    return srv


def port_open(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


class Reply:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    @property
    def json(self):
        return json.loads(self.body)


def api(srv, method, path, body=None, token=None, headers=None, host="127.0.0.1",
        timeout=10.0) -> Reply:
    """One request with urllib; 4xx and 5xx come back as replies, not exceptions."""
    url = f"http://{host if ':' not in host else '[' + host + ']'}:{srv.http_port}{path}"
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url, data=data, method=method)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return Reply(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers, e.read())


def curl(srv, *args, host="127.0.0.1"):
    """curl -s with the status code on the last line; returns (status, body)."""
    res = subprocess.run(["curl", "-s", "-g", "--max-time", "10", "-w", "\n%{http_code}",
                          *args[:-1], f"http://{host}:{srv.http_port}{args[-1]}"],
                         capture_output=True, text=True, timeout=20)
    body, _, code = res.stdout.rpartition("\n")
    return int(code), body


def socket_reply(srv, cmd, *args):
    return srv.ctl_raw(json.dumps({"cmd": cmd, "args": list(args)}).encode() + b"\n")


def path_of(cmd, *args):
    return "/api/v1/" + "/".join(urllib.request.quote(a, safe="") for a in (cmd, *args))


VOLATILE = {"uptime_s", "expires_in_ms"}


def stable(value):
    """@value without the fields that change between two calls a moment apart."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


# Read-only commands with arguments that work on this configuration, or fail the same way.
READ_ONLY = [
    ("status",),
    ("zones",),
    ("maps",),
    ("health",),
    ("health", f"service/geo.{ZONE}/*"),
    ("monitors",),
    ("monitors", "*"),
    ("override", "list"),
    ("explain", f"geo.{ZONE}", "198.51.100.7"),
    ("explain", f"geo.{ZONE}", "192.0.2.1", "203.0.113.0/24"),
    ("upstreams",),
    ("cache",),
    ("cluster",),
    ("cluster", "health"),
    ("cluster", "bird-config", "bgp", "peer=192.0.2.1", "local-as=65001", "peer-as=65000"),
    ("cluster", "frr-config", "ospf"),
]


def test_every_read_only_command_has_an_http_twin(steerd):
    srv = start(steerd)
    for cmd in READ_ONLY:
        want = socket_reply(srv, *cmd)
        got = api(srv, "GET", path_of(*cmd))
        assert got.headers["Content-Type"] == "application/json", cmd
        assert stable(got.json) == stable(want), (cmd, got.json, want)
        assert got.status == (200 if want["ok"] else got.status), cmd
        if not want["ok"]:
            assert got.status in (400, 404, 500), (cmd, got.status)
        # POST serves read-only commands too, with the arguments in the body.
        post = api(srv, "POST", f"/api/v1/{cmd[0]}", json.dumps({"args": list(cmd[1:])}),
                   headers={"Content-Type": "application/json"})
        assert stable(post.json) == stable(want), (cmd, post.json)
    # stats: the same counters (no query ran in between)
    assert api(srv, "GET", "/api/v1/stats").json == socket_reply(srv, "stats")
    # and what steerctl --json prints is the same object
    res = srv.ctl("zones", json_out=True)
    assert json.loads(res.stdout) == api(srv, "GET", "/api/v1/zones").json


def test_mutating_commands_have_http_twins(steerd):
    srv = start(steerd)
    # override set / weight / clear: the HTTP reply is the socket's for the same change
    r = api(srv, "POST", path_of("override", "set", "service/*/dc1/*", "down"), token=TOKEN)
    assert r.status == 200 and r.json["data"]["targets"] > 0, r.json
    assert geo(srv) == [DC2]
    assert stable(r.json["data"]["overrides"]) == \
        stable(socket_reply(srv, "override", "list")["data"]["overrides"])
    again = socket_reply(srv, "override", "set", "service/*/dc1/*", "down")
    assert stable(again) == stable(r.json)
    a81 = f"service/weights.{ZONE}/dc1/198.51.100.81"
    r = api(srv, "POST", path_of("override", "weight", a81, "0"), token=TOKEN)
    assert r.status == 200 and r.json["data"]["weight"] == 0, r.json
    r = api(srv, "POST", path_of("override", "weight", a81, "default"), token=TOKEN)
    assert r.status == 200 and r.json["data"]["cleared"] == ["weight"], r.json
    r = api(srv, "POST", path_of("override", "clear", "service/*/dc1/*"), token=TOKEN)
    assert r.status == 200 and r.json["data"]["action"] == "clear", r.json
    assert geo(srv) == [DC1]
    r = api(srv, "POST", path_of("override", "clear", "service/never/*"), token=TOKEN)
    assert r.status == 404 and "no admin override" in r.json["error"], r.json
    # reload, cache flush, cluster notify, drain, undrain: same outcome as on the socket
    r = api(srv, "POST", "/api/v1/reload", token=TOKEN)
    assert r.status == 200 and r.json["ok"] is True and "zones_unchanged" in r.json["data"]
    for cmd in [("cache", "flush"), ("cache", "flush", "example.test"),
                ("cluster", "notify", "backup"), ("drain", "1s"), ("undrain",)]:
        want = socket_reply(srv, *cmd)
        got = api(srv, "POST", path_of(*cmd), token=TOKEN)
        assert stable(got.json) == stable(want), (cmd, got.json, want)
        assert (got.status == 200) == want["ok"], (cmd, got.status)
    log = srv.log()
    assert "http: override from 127.0.0.1" in log and "http: reload from 127.0.0.1" in log, log


def test_token_rules(steerd):
    srv = start(steerd)
    path = path_of("override", "set", "service/*/dc1/*", "down")
    r = api(srv, "POST", path)
    assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer"), r.body
    assert r.json == {"ok": False, "error": "this call needs Authorization: Bearer <token>"}
    r = api(srv, "POST", path, token=WRONG)
    assert r.status == 401 and "invalid_token" in r.headers["WWW-Authenticate"], r.body
    r = api(srv, "POST", path, token=TOKEN[:-1])
    assert r.status == 401
    assert geo(srv) == [DC1]
    r = api(srv, "GET", path, token=TOKEN)
    assert r.status == 405 and r.headers["Allow"] == "POST", r.body
    assert geo(srv) == [DC1]
    r = api(srv, "POST", path, token=TOKEN)
    assert r.status == 200 and geo(srv) == [DC2]
    # read-only calls are open by default, and a token does not hurt
    assert api(srv, "GET", "/api/v1/status").status == 200
    assert api(srv, "GET", "/api/v1/status", token=WRONG).status == 200
    code, body = curl(srv, "-X", "POST", "-H", f"Authorization: Bearer {TOKEN}",
                      path_of("override", "clear", "service/*/dc1/*"))
    assert code == 200 and json.loads(body)["ok"] is True, body
    assert geo(srv) == [DC1]


def test_closed_reads_need_the_token(steerd):
    srv = start(steerd, read_only_open=False)
    r = api(srv, "GET", "/api/v1/status")
    assert r.status == 401 and "Bearer" in r.headers["WWW-Authenticate"]
    assert api(srv, "GET", "/api/v1/status", token=WRONG).status == 401
    assert api(srv, "GET", "/api/v1/status", token=TOKEN).status == 200
    assert api(srv, "GET", "/metrics").status == 401  # pages follow the read-only rule


def test_without_token_file_mutating_calls_are_forbidden(steerd):
    srv = start(steerd, token=False)
    r = api(srv, "POST", "/api/v1/reload", token=TOKEN)
    assert r.status == 403 and "no http token-file" in r.json["error"], r.body
    assert api(srv, "GET", "/api/v1/zones").status == 200
    assert "no token-file" in srv.log()


def test_reload_error_is_returned_and_the_old_zone_keeps_serving(steerd):
    srv = start(steerd)
    zone = srv.zone_paths[ZONE]
    good = zone.read_text()
    serial = srv.serial(ZONE)
    zone.write_text(good.replace("SOA", "SOA", 1) + "broken-line IN A not-an-address\n")
    os.utime(zone, (time.time() + 5, time.time() + 5))
    r = api(srv, "POST", "/api/v1/reload", token=TOKEN)
    assert r.status == 500 and r.json["ok"] is False, r.body
    assert str(zone) in r.json["error"], r.json
    assert srv.serial(ZONE) == serial and geo(srv) == [DC1]
    status = api(srv, "GET", "/api/v1/status").json["data"]
    assert status["last_reload"]["ok"] is False, status
    zone.write_text(good)
    os.utime(zone, (time.time() + 10, time.time() + 10))
    r = api(srv, "POST", "/api/v1/reload", token=TOKEN)
    assert r.status == 200 and r.json["ok"] is True, r.body


def test_reload_rereads_the_token_file(steerd):
    srv = start(steerd)
    write_token(steerd.workdir, "a-new-token-for-the-api")
    r = api(srv, "POST", "/api/v1/reload", token=TOKEN)
    assert r.status == 200, r.body
    assert api(srv, "POST", "/api/v1/reload", token=TOKEN).status == 401
    assert api(srv, "POST", "/api/v1/reload", token="a-new-token-for-the-api").status == 200
    # A token file everyone can read fails the reload; the running token stays.
    write_token(steerd.workdir, "a-third-token-for-the-api", mode=0o644)
    r = api(srv, "POST", "/api/v1/reload", token="a-new-token-for-the-api")
    assert r.status == 500 and "readable or writable by everyone" in r.json["error"], r.body
    assert api(srv, "POST", "/api/v1/reload", token="a-third-token-for-the-api").status == 401
    os.unlink(steerd.workdir / "api.token")
    r = socket_reply(srv, "reload")
    assert r["ok"] is False and "api.token" in r["error"], r
    assert api(srv, "GET", "/api/v1/status").status == 200


def test_reload_applies_read_only_open_and_reports_listen_as_restart_only(steerd):
    srv = start(steerd)
    assert api(srv, "GET", "/api/v1/status").status == 200
    text = srv.config_path.read_text()
    closed = text.replace("read-only-open: true", "read-only-open: false")
    srv.config_path.write_text(closed)
    r = api(srv, "POST", "/api/v1/reload", token=TOKEN)
    assert r.status == 200 and r.json["data"]["restart_needed"] == [], r.body
    assert api(srv, "GET", "/api/v1/status").status == 401
    assert api(srv, "GET", "/api/v1/status", token=TOKEN).status == 200
    other = free_port()
    srv.config_path.write_text(closed.replace(f":{srv.http_port}", f":{other}"))
    r = api(srv, "POST", "/api/v1/reload", token=TOKEN)
    assert r.status == 200 and "http.listen" in r.json["data"]["restart_needed"], r.body
    assert api(srv, "GET", "/api/v1/status", token=TOKEN).status == 200  # still the old port
    assert not port_open(other)


@pytest.mark.parametrize("token,mode,needle", [
    ("", 0o600, "the first line must hold a token"),
    ("short", 0o600, "of 16..1024 characters"),
    ("s3cret-token-0123", 0o604, "readable or writable by everyone"),
    (None, 0o600, "No such file"),
])
def test_bad_token_file_fails_the_start(steerd, token, mode, needle):
    shutil.copytree(DATA / "nets", steerd.workdir / "nets", dirs_exist_ok=True)
    if token is not None:
        write_token(steerd.workdir, token, mode)
        if token == "":
            (steerd.workdir / "api.token").write_text("")
    srv = steerd(zones={ZONE: DATA / f"{ZONE}.zone"},
                 config=admin_config() + http_yaml(free_port()), ready=False)
    assert srv.wait_exit() != 0
    assert needle in srv.log() and "api.token" in srv.log(), srv.log()
    srv.returncode = 0  # the failed start was the point; no shutdown to check


def test_timed_override_over_http_lapses(steerd):
    srv = start(steerd)
    r = api(srv, "POST", path_of("override", "set", "service/*/dc1/*", "down", "2s"),
            token=TOKEN)
    assert r.status == 200 and 0 < r.json["data"]["expires_in_ms"] <= 2000, r.body
    assert geo(srv) == [DC2]
    rules = api(srv, "GET", "/api/v1/override/list").json["data"]["overrides"]
    assert [x["expires"] is not None for x in rules if x["source"] == "admin"] == [True]
    wait_for(lambda: geo(srv) == [DC1], timeout=4.0, what="the override to lapse")
    rules = api(srv, "GET", "/api/v1/override/list").json["data"]["overrides"]
    assert [x for x in rules if x["source"] == "admin"] == []


def test_ipv6_listen(steerd):
    srv = start(steerd)
    r = api(srv, "GET", "/api/v1/status", host="::1")
    assert r.status == 200 and r.json["ok"] is True
    code, body = curl(srv, "/api/v1/zones", host="[::1]")
    assert code == 200 and json.loads(body)["data"][0]["name"].startswith(ZONE), body
    r = api(srv, "POST", "/api/v1/reload", token=TOKEN, host="::1")
    assert r.status == 200
    assert "http: reload from [::1]" in srv.log() or "http: reload from ::1" in srv.log()


def test_bad_input_gets_a_4xx_json_error(steerd):
    srv = start(steerd)
    cases = [
        ("POST", "/api/v1/reload", b"x" * 100_000, {"Content-Type": "application/json"}, 413),
        ("POST", "/api/v1/reload", b'{"args": [', {"Content-Type": "application/json"}, 415),
        ("POST", "/api/v1/reload", b"hello", {"Content-Type": "application/json"}, 415),
        ("POST", "/api/v1/reload", b'{"args": [], "args": ["--force"]}',
         {"Content-Type": "application/json"}, 400),
        ("POST", "/api/v1/reload", b"--force", {"Content-Type": "text/plain"}, 415),
        ("POST", "/api/v1/reload", b'{"args": [7]}', {"Content-Type": "application/json"}, 400),
        ("GET", "/api/v1/health/%zz", None, {}, 400),
        ("GET", "/api/v1/health/a%00", None, {}, 400),
        ("GET", "/api/v1/health?pattern=x", None, {}, 400),
        ("GET", "/api/v1/nonsense", None, {}, 404),
        ("GET", "/api/v1/explain/only-one-arg", None, {}, 400),
        ("GET", "/nothing-here", None, {}, 404),
        ("DELETE", "/api/v1/status", None, {}, 405),
        ("POST", "/api/v1/override/set/x/sideways", None, {"Authorization": f"Bearer {TOKEN}"},
         400),
    ]
    for method, path, body, headers, status in cases:
        r = api(srv, method, path, body, headers=headers)
        assert r.status == status, (method, path, r.status, r.body)
        assert r.json["ok"] is False and r.json["error"], (path, r.body)
        assert r.headers["X-Content-Type-Options"] == "nosniff"
    code, body = curl(srv, "--path-as-is", "/api/v1/health/../status")
    assert code == 400 and "bad path" in body, body
    code, body = curl(srv, "--path-as-is", "/api/v1/%2e%2e/status")
    assert code == 400, body
    # Over 16 KiB of headers: refused by MHD, and the server carries on.
    code, _ = curl(srv, "-H", "X-Big: " + "x" * 20000, "/api/v1/status")
    assert 400 <= code < 500 or code == 0, code
    # A chunked upload over the limit (no Content-Length to refuse up front) is refused too.
    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=10)
    conn.request("POST", "/api/v1/reload", body=iter([b" " * 16384] * 6),
                 headers={"Content-Type": "application/json",
                          "Authorization": f"Bearer {TOKEN}"}, encode_chunked=True)
    r = conn.getresponse()
    assert r.status == 413 and b"body over 65536 bytes" in r.read(), r.status
    conn.close()
    assert api(srv, "GET", "/api/v1/status").status == 200
    assert srv.alive()


def raise_fd_limit(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))


def test_idle_connections_do_not_block_the_control_socket_or_dns(steerd):
    srv = start(steerd)
    raise_fd_limit(2200)
    conns = []
    try:
        for i in range(1000):
            try:
                s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=2)
            except OSError:
                break  # the listen queue is full: that is the server defending itself
            s.setblocking(False)
            if i % 2:
                s.send(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n")  # never finished
            conns.append(s)
        assert len(conns) >= 500, len(conns)
        t0 = time.monotonic()
        status = srv.ctl_json("status")
        assert status["zones"] == 1
        r = srv.udp(dns.message.make_query(f"geo.{ZONE}", "A"))
        assert r.answer, r
        assert time.monotonic() - t0 < 2.0
    finally:
        for s in conns:
            s.close()
    # Once they are gone, HTTP serves again at once.
    wait_for(lambda: api(srv, "GET", "/api/v1/status", timeout=2).status == 200, timeout=10,
             what="HTTP after the idle clients left")
    assert srv.alive()
