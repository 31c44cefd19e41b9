"""HTTP and HTTPS health probes (src/health/probe_http.c) against real servers.

The probes run in tests/health/probe_run (one JSON line per result). HTTP backends are
python http.server instances run by the test; HTTPS and name-based virtual hosts use Debian's
nginx in the foreground with a generated config and a self-signed certificate from openssl.

Binary: conftest.PROBE_RUN ($STEER_PROBE_RUN, else BUILD/tests/probe_run next to $STEERD, so
`make test` runs these against the sanitized build too).
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import PROBE_RUN, ROOT, assert_no_sanitizer_report, fmt_addr, free_port, wait_for


NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"
VHOST = "www.example.test"
BIG_BODY = 1 << 20  # bytes; far beyond HEALTH_HTTP_BODY_MAX (5120)


# --------------------------------------------------------------------------------------------
# probe_run


def probe(kind: str, host: str, port: int, *args: str, wall: float = 20.0):
    """Run probe_run to completion: (results, exit status, seconds)."""
    if not os.access(PROBE_RUN, os.X_OK):
        pytest.fail(f"probe_run not found at {PROBE_RUN} (build it or set STEER_PROBE_RUN)")
    t0 = time.monotonic()
    res = subprocess.run([PROBE_RUN, kind, fmt_addr(host, port), *args], capture_output=True,
                         text=True, timeout=wall)
    elapsed = time.monotonic() - t0
    assert_no_sanitizer_report(res.stdout + res.stderr)
    results = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    return results, res.returncode, elapsed


def probe_one(kind: str, host: str, port: int, *args: str) -> dict:
    results, rc, _ = probe(kind, host, port, *args)
    assert len(results) == 1, results
    r = results[0]
    assert "start_error" not in r, r
    assert rc == (0 if r["ok"] else 1), (rc, r)
    assert r["rtt_us"] > 0, r
    return r


# --------------------------------------------------------------------------------------------
# A small HTTP backend


class Handler(http.server.BaseHTTPRequestHandler):
    """/status/N -> N; /body -> a short body; /big/OFFSET -> 1 MiB with "MARKER" at OFFSET;
    /slow -> 1000 bytes, then the rest 3 s later;
    /redirect -> 302 to a 500; /vhost -> 200 only for Host: www.example.test:PORT;
    /ua -> 200 only for the steer-health/1 User-Agent."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code: int, body: bytes, headers: dict | None = None):
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the probe stops reading once it has what it needs

    def do_GET(self):
        self.server.requests.append((self.path, dict(self.headers)))
        parts = self.path.split("/")
        if parts[1] == "status":
            self.send(int(parts[2]), f"status {parts[2]}\n".encode())
        elif self.path == "/body":
            self.send(200, b"service is OK, all good\n")
        elif parts[1] == "big":
            offset = int(parts[2])
            body = bytearray(b"x" * BIG_BODY)
            body[offset:offset + 6] = b"MARKER"
            self.send(200, bytes(body))
        elif self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                self.wfile.write(b"MARKER" + b"x" * 994)
                self.wfile.flush()
                time.sleep(3)
                self.wfile.write(b"y" * 99000)
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif self.path == "/redirect":
            self.send(302, b"moved\n", {"Location": "/status/500"})
        elif self.path == "/vhost":
            want = f"{VHOST}:{self.server.server_address[1]}"
            ok = self.headers.get("Host") == want
            self.send(200 if ok else 421, f"host {self.headers.get('Host')}\n".encode())
        elif self.path == "/ua":
            ok = self.headers.get("User-Agent") == "steer-health/1"
            self.send(200 if ok else 403, b"ua\n")
        else:
            self.send(404, b"not found\n")


class Backend:
    def __init__(self, host: str):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET

        class Server(http.server.ThreadingHTTPServer):
            address_family = family
            daemon_threads = True

        self.host = host
        self.port = free_port()
        self.server = Server((host, self.port), Handler)
        self.server.requests = []
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.running = True

    def stop(self):
        if self.running:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(5)
            self.running = False


@pytest.fixture
def backend():
    started = []

    def start(host: str = "127.0.0.1") -> Backend:
        b = Backend(host)
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


# --------------------------------------------------------------------------------------------
# nginx with a self-signed certificate


NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 64; }}
http {{
    log_format probe 'host=$host sni=$ssl_server_name conn=$connection '
                     'reused=$ssl_session_reused ua="$http_user_agent" uri=$request_uri';
    access_log {dir}/access.log probe;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    default_type text/plain;
    keepalive_timeout 60s;
    ssl_certificate {dir}/cert.pem;
    ssl_certificate_key {dir}/key.pem;
    server {{
        listen 127.0.0.1:{http} default_server;
        listen [::1]:{http} default_server;
        listen 127.0.0.1:{https} ssl default_server;
        listen [::1]:{https} ssl default_server;
        server_name _;
        location / {{ return 404 "default server\\n"; }}
    }}
    server {{
        listen 127.0.0.1:{http};
        listen [::1]:{http};
        listen 127.0.0.1:{https} ssl;
        listen [::1]:{https} ssl;
        server_name {vhost};
        location = /health {{ return 200 "www is OK\\n"; }}
        location / {{ return 503 "www is down\\n"; }}
    }}
}}
"""


class Nginx:
    def __init__(self, tmp: Path):
        self.dir = tmp / "nginx"
        (self.dir / "tmp").mkdir(parents=True)
        subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", f"/CN={VHOST}", "-addext", f"subjectAltName=DNS:{VHOST}",
                        "-keyout", str(self.dir / "key.pem"), "-out", str(self.dir / "cert.pem")],
                       check=True, capture_output=True, timeout=60)
        self.http = free_port()
        self.https = free_port()
        conf = self.dir / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=self.dir, http=self.http, https=self.https,
                                          vhost=VHOST))
        self.proc = subprocess.Popen([NGINX, "-p", str(self.dir), "-c", str(conf),
                                      "-e", str(self.dir / "error.log")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(self._ready, 10, what="nginx listening")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace")
            log = (self.dir / "error.log").read_text(errors="replace")
            pytest.fail(f"nginx exited with {self.proc.returncode}: {err}\n{log}")
        for host, port in (("127.0.0.1", self.http), ("::1", self.https)):
            try:
                socket.create_connection((host, port), timeout=0.2).close()
            except OSError:
                return False
        return True

    def access_log(self) -> list[str]:
        path = self.dir / "access.log"
        return path.read_text().splitlines() if path.exists() else []

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stderr.close()


@pytest.fixture
def nginx(tmp_path):
    n = Nginx(tmp_path)
    yield n
    n.stop()


# --------------------------------------------------------------------------------------------
# Listeners that misbehave


@pytest.fixture
def silent_listener():
    """A TCP port whose handshakes the kernel completes but nobody ever reads or answers."""
    socks = []

    def start(host: str = "127.0.0.1") -> int:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        port = free_port()
        s.bind((host, port))
        s.listen(16)
        socks.append(s)
        return port

    yield start
    for s in socks:
        s.close()


# --------------------------------------------------------------------------------------------
# Status codes


def test_200_ok(backend):
    b = backend()
    r = probe_one("http", b.host, b.port, "--path", "/status/200")
    assert r == {"ok": True, "rtt_us": r["rtt_us"], "detail": "HTTP 200"}
    path, headers = b.server.requests[-1]
    assert path == "/status/200"
    assert headers["Host"] == f"127.0.0.1:{b.port}"  # no Host configured: the address


def test_default_path_and_user_agent(backend):
    b = backend()
    r = probe_one("http", b.host, b.port)
    assert not r["ok"] and r["detail"] == "HTTP 404 (expected 200-399)"
    assert b.server.requests[-1][0] == "/"
    r = probe_one("http", b.host, b.port, "--path", "/ua")
    assert r["ok"], r


def test_503_fails(backend):
    b = backend()
    r = probe_one("http", b.host, b.port, "--path", "/status/503")
    assert not r["ok"]
    assert r["detail"] == "HTTP 503 (expected 200-399)"
    r = probe_one("http", b.host, b.port, "--path", "/status/503", "--status", "200")
    assert r["detail"] == "HTTP 503 (expected 200)"


def test_expected_status_list(backend):
    b = backend()
    ok = ["--status", "200", "--status", "204", "--status", "503"]
    for code in (200, 204, 503):
        r = probe_one("http", b.host, b.port, "--path", f"/status/{code}", *ok)
        assert r["ok"] and r["detail"] == f"HTTP {code}", r
    r = probe_one("http", b.host, b.port, "--path", "/status/301", *ok)
    assert not r["ok"] and r["detail"] == "HTTP 301 (expected 200, 204, 503)", r
    r = probe_one("http", b.host, b.port, "--path", "/status/200", "--status", "204")
    assert not r["ok"] and r["detail"] == "HTTP 200 (expected 204)", r


def test_redirect_is_a_status_not_followed(backend):
    b = backend()
    r = probe_one("http", b.host, b.port, "--path", "/redirect")
    assert r["ok"] and r["detail"] == "HTTP 302", r
    r = probe_one("http", b.host, b.port, "--path", "/redirect", "--status", "200")
    assert not r["ok"] and r["detail"] == "HTTP 302 (expected 200)", r
    assert [p for p, _ in b.server.requests] == ["/redirect", "/redirect"]


# --------------------------------------------------------------------------------------------
# Body substring


def test_body_present_and_absent(backend):
    b = backend()
    r = probe_one("http", b.host, b.port, "--path", "/body", "--body", "is OK")
    assert r["ok"] and r["detail"] == "HTTP 200", r
    r = probe_one("http", b.host, b.port, "--path", "/body", "--body", "FAIL")
    assert not r["ok"] and r["detail"] == 'HTTP 200 but body lacks "FAIL"', r
    # The status decides first.
    r = probe_one("http", b.host, b.port, "--path", "/status/503", "--body", "status")
    assert not r["ok"] and r["detail"] == "HTTP 503 (expected 200-399)", r


def test_body_only_first_5120_bytes_searched(backend):
    b = backend()
    r = probe_one("http", b.host, b.port, "--path", "/big/100", "--body", "MARKER")
    assert r["ok"], r
    r = probe_one("http", b.host, b.port, "--path", "/big/5114", "--body", "MARKER")
    assert r["ok"], r  # ends exactly at byte 5120
    r = probe_one("http", b.host, b.port, "--path", "/big/5115", "--body", "MARKER")
    assert not r["ok"] and r["detail"] == 'HTTP 200 but body lacks "MARKER"', r


def test_body_stops_early(backend):
    """The probe stops reading once the result is known, and stopping the transfer on
    purpose (CURLE_WRITE_ERROR) is not a failure."""
    b = backend()
    for args in ((), ("--body", "MARKER")):
        r = probe_one("http", b.host, b.port, "--path", "/big/0", *args)
        assert r["ok"] and r["detail"] == "HTTP 200", r
        r = probe_one("http", b.host, b.port, "--path", "/slow", "--timeout", "1500", *args)
        assert r["ok"] and r["detail"] == "HTTP 200", r
        assert r["rtt_us"] < 1_000_000, r
    r = probe_one("http", b.host, b.port, "--path", "/slow", "--timeout", "1500",
                  "--body", "yyy")
    assert r["detail"] == "timeout after 1500 ms", r


# --------------------------------------------------------------------------------------------
# Host header and TLS


def test_host_header_sent_python(backend):
    b = backend()
    r = probe_one("http", b.host, b.port, "--path", "/vhost", "--host", VHOST)
    assert r["ok"], r
    assert b.server.requests[-1][1]["Host"] == f"{VHOST}:{b.port}"
    r = probe_one("http", b.host, b.port, "--path", "/vhost")
    assert not r["ok"] and r["detail"] == "HTTP 421 (expected 200-399)", r


def test_host_header_selects_nginx_server(nginx):
    r = probe_one("http", "127.0.0.1", nginx.http, "--path", "/health", "--host", VHOST,
                  "--body", "www is OK", "--status", "200")
    assert r["ok"], r
    r = probe_one("http", "127.0.0.1", nginx.http, "--path", "/health", "--status", "200")
    assert r["detail"] == "HTTP 404 (expected 200)", r
    r = probe_one("http", "127.0.0.1", nginx.http, "--path", "/health",
                  "--host", "other.example.test")
    assert r["detail"] == "HTTP 404 (expected 200-399)", r
    log = wait_for(lambda: len(nginx.access_log()) >= 3 and nginx.access_log(), 2, 0.02,
                   "three access log lines")
    assert log[0].startswith(f"host={VHOST} "), log
    assert log[1].startswith("host=127.0.0.1 "), log
    assert log[2].startswith("host=other.example.test "), log


def test_https_insecure_ok_with_sni(nginx):
    results, rc, _ = probe("https", "127.0.0.1", nginx.https, "--path", "/health",
                           "--host", VHOST, "--status", "200", "--body", "www is OK",
                           "--insecure", "--count", "3", "--interval", "200")
    assert rc == 0
    assert [r["detail"] for r in results] == ["HTTP 200"] * 3, results
    # nginx logs a request after sending the response: the last line may trail the result.
    log = wait_for(lambda: len(nginx.access_log()) >= 3 and nginx.access_log(), 2, 0.02,
                   "three access log lines")
    assert len(log) == 3, log
    for line in log:
        assert f"host={VHOST} sni={VHOST} " in line, line
        assert " reused=. " in line, line  # a full TLS handshake every time
        assert 'ua="steer-health/1"' in line, line
    conns = {line.split(" conn=")[1].split()[0] for line in log}
    assert len(conns) == 3, log  # a new connection per probe


def test_https_without_host_uses_address(nginx):
    r = probe_one("https", "127.0.0.1", nginx.https, "--path", "/health", "--insecure")
    assert r["detail"] == "HTTP 404 (expected 200-399)", r
    log = wait_for(nginx.access_log, 2, 0.02, "an access log line")
    assert log[-1].startswith("host=127.0.0.1 sni=- "), log


def test_https_verification_rejects_self_signed(nginx):
    r = probe_one("https", "127.0.0.1", nginx.https, "--path", "/health", "--host", VHOST)
    assert not r["ok"]
    assert r["detail"].startswith("TLS: "), r
    assert "certificate" in r["detail"], r
    assert nginx.access_log() == []  # never got as far as a request


def test_https_to_plain_http_port_fails(nginx):
    r = probe_one("https", "127.0.0.1", nginx.http, "--insecure", "--timeout", "2000")
    assert not r["ok"] and r["detail"].startswith("TLS: "), r


def test_ipv6_targets(backend, nginx):
    b = backend("::1")
    r = probe_one("http", "::1", b.port, "--path", "/status/200")
    assert r["ok"], r
    assert b.server.requests[-1][1]["Host"] == f"[::1]:{b.port}"
    r = probe_one("https", "::1", nginx.https, "--path", "/health", "--host", VHOST, "--insecure")
    assert r["ok"] and r["detail"] == "HTTP 200", r


# --------------------------------------------------------------------------------------------
# Failures: refused, silent, stopped


def test_connection_refused_fails_fast():
    port = free_port()  # nothing listens there
    r = probe_one("http", "127.0.0.1", port, "--timeout", "3000")
    assert not r["ok"] and r["detail"] == "connect: Connection refused", r
    assert r["rtt_us"] < 500_000, r
    r = probe_one("https", "::1", port, "--timeout", "3000")
    assert r["detail"] == "connect: Connection refused", r


@pytest.fixture
def full_backlog():
    """A TCP port whose accept queue is full, so the kernel drops new SYNs: connect() hangs."""
    socks = []

    def start() -> int:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        s.listen(0)
        socks.append(s)
        port = s.getsockname()[1]
        for _ in range(3):
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            socks.append(c)
        time.sleep(0.2)
        return port

    yield start
    for s in socks:
        s.close()


@pytest.mark.parametrize("kind,phase", [("http", ""), ("https", "TLS handshake: ")])
def test_silent_server_times_out(silent_listener, kind, phase):
    port = silent_listener()
    results, rc, elapsed = probe(kind, "127.0.0.1", port, "--timeout", "700", "--insecure")
    assert rc == 1 and len(results) == 1, results
    r = results[0]
    assert r == {"ok": False, "rtt_us": r["rtt_us"], "detail": f"{phase}timeout after 700 ms"}
    assert 700_000 <= r["rtt_us"] <= 1_200_000, r
    assert elapsed < 5, elapsed


@pytest.mark.parametrize("kind", ["http", "https"])
def test_connect_timeout(full_backlog, kind):
    port = full_backlog()
    results, rc, elapsed = probe(kind, "127.0.0.1", port, "--timeout", "500", "--insecure")
    assert rc == 1 and len(results) == 1, results
    r = results[0]
    assert r["detail"] == "connect: timeout after 500 ms", r
    assert 500_000 <= r["rtt_us"] <= 1_000_000, r
    assert elapsed < 5, elapsed


def test_server_stopped_between_probes(backend):
    b = backend()
    proc = subprocess.Popen([PROBE_RUN, "http", fmt_addr(b.host, b.port), "--path", "/status/200",
                             "--count", "3", "--interval", "400"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["ok"] and first["detail"] == "HTTP 200", first
        b.stop()
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert_no_sanitizer_report(out + err)
    rest = [json.loads(line) for line in out.splitlines()]
    assert [r["detail"] for r in rest] == ["connect: Connection refused"] * 2, rest
    assert proc.returncode == 1


def test_nginx_stopped_between_probes(tmp_path):
    n = Nginx(tmp_path)
    try:
        args = ("--path", "/health", "--host", VHOST, "--insecure")
        assert probe_one("https", "127.0.0.1", n.https, *args)["ok"]
        n.stop()
        r = probe_one("https", "127.0.0.1", n.https, *args)
        assert not r["ok"] and r["detail"] == "connect: Connection refused", r
    finally:
        n.stop()


# --------------------------------------------------------------------------------------------
# Bad requests are start errors, not crashes


@pytest.mark.parametrize("args,message", [
    (("--path", "health"), "path must start with /"),
    (("--path", "/a b"), "path must start with /"),
    (("--host", "bad host/x"), "host is not a host name"),
    (("--path", "/" + "a" * 3000), "path too long"),
])
def test_bad_request_is_start_error(args, message):
    results, rc, _ = probe("http", "127.0.0.1", 8080, *args)
    assert rc == 2 and len(results) == 1, results
    assert message in results[0]["start_error"], results
