"""Load feedback end to end: `metrics` monitors read real endpoints and steerd shows the values.

- Debian's prometheus-node-exporter (only the netdev and loadavg collectors) on a 127.0.0.x
  address: values appear in `steerctl monitors`, `steerctl health` and /metrics, and rate() of
  a counter (the loopback's packets and bytes, which every scrape moves) is sane.
- nginx with stub_status: the active connections go up while the test holds connections open
  and back down when it lets them go.
- a fake endpoint (python http.server) that serves a good body, then garbage, hangs past the
  timeout, answers 500 and finally stops listening: the target stays UP and answered, the
  previous values are kept until stale-after and then dropped, each error is shown, and steerd
  keeps running.
- an expression that does not parse is a configuration error at its line.

Targets listen on 127.0.0.x addresses (all of 127/8 is local on Linux): a metrics monitor reads
the answer address itself. Monitors run every 200-300 ms to keep the tests quick.
"""
from __future__ import annotations

import http.server
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import dns.message
import pytest

from conftest import find_rrset, free_port, run_steerd, server_config as yaml, wait_for

ZONE = "lf.example.test"
ZONE_TEXT = f"""$ORIGIN {ZONE}.
$TTL 3600
@   SOA ns1 hostmaster 1 7200 3600 1209600 300
    NS  ns1
ns1 A   192.0.2.53
"""
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def config(address: str, monitor: str, http_port: int | None = None) -> str:
    http = f"http:\n  listen: [127.0.0.1:{http_port}]\n  read-only-open: true\n" if http_port else ""
    return yaml(f"""{http}monitors:
  load:
{monitor}
datacenters:
  - {{ name: dc1 }}
services:
  - name: www.{ZONE}
    policy: failover
    metrics: load
    ttl: 60
    datacenters:
      dc1: {{ addresses: [{address}] }}
""")


def start(launcher, text):
    return launcher(zones={ZONE: ZONE_TEXT}, config=text)


def check_row(srv) -> dict:
    rows = srv.ctl_json("monitors")
    assert len(rows) == 1, rows
    return rows[0]


def target_row(srv) -> dict:
    rows = srv.ctl_json("health")
    assert len(rows) == 1, rows
    return rows[0]


def fresh(srv) -> dict:
    """The fresh values of the only check: {"connections": 17.0, ...}."""
    values = check_row(srv).get("values", {})
    return {k: v["value"] for k, v in values.items() if v["fresh"]}


def load_values(srv) -> dict:
    """What the policies see for the only target (the health table)."""
    load = target_row(srv)["load"]
    return load["values"] if load else {}


def answers(srv) -> list[str]:
    name = f"www.{ZONE}"
    rr = find_rrset(srv.udp(dns.message.make_query(name, "A")).answer, name, "A")
    return sorted(r.address for r in rr) if rr else []


def scrape(port: int) -> str:
    """The node exporter's body, read here."""
    with urllib.request.urlopen(f"http://127.0.0.31:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def stop_process(proc: subprocess.Popen):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_listening(proc: subprocess.Popen, host: str, port: int, what: str, log: Path):
    def up():
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}: "
                        f"{log.read_text(errors='replace') if log.exists() else ''}")
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return True
        except OSError:
            return False
    wait_for(up, 10, 0.05, f"{what} listening")


# --- node_exporter ---------------------------------------------------------------------------

@pytest.fixture
def node_exporter(tmp_path):
    port = free_port()
    log = tmp_path / "node_exporter.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [NODE_EXPORTER, f"--web.listen-address=127.0.0.31:{port}",
             "--collector.disable-defaults", "--collector.netdev", "--collector.loadavg",
             # the loopback, which the default excludes, is where the test's traffic runs
             "--collector.netdev.device-exclude=^$"],
            stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_listening(proc, "127.0.0.31", port, "prometheus-node-exporter", log)
        yield port
    finally:
        stop_process(proc)


def test_node_exporter_values_and_rates(steerd, node_exporter):
    http_port = free_port()
    monitor = f"""    type: metrics
    port: {node_exporter}
    interval: 300ms
    timeout: 250ms
    stale-after: 5s
    packet-rate: 'rate(node_network_receive_packets_total{{device="lo"}})'
    kbps: 'rate(node_network_receive_bytes_total{{device="lo"}}) / 1000'
    cpu: 'node_load1 * 100'
    capacity: 5000"""
    srv = start(steerd, config("127.0.0.31", monitor, http_port))
    # A rate needs two scrapes; the gauge and the configured number are there after one.
    values = wait_for(lambda: (v := fresh(srv)).keys() >= {"packet-rate", "kbps", "cpu",
                                                            "capacity"} and v,
                      5, 0.05, "all four values fresh")
    row = check_row(srv)
    assert row["type"] == "metrics" and row["state"] == "metrics", row
    assert row["last"]["ok"] and row["last"]["detail"] == "HTTP 200, 3 values", row
    assert values["capacity"] == 5000
    # Every scrape itself moves packets over the loopback: the rate is positive, and far
    # below what a loopback can carry (10 million packets/s, 10 GB/s).
    assert 0 < values["packet-rate"] < 1e7, values
    assert 0 < values["kbps"] < 1e7, values
    # The gauge is the exporter's load average, scaled.
    load1 = float(next(line.split()[1] for line in scrape(node_exporter).splitlines()
                       if line.startswith("node_load1 ")))
    assert abs(values["cpu"] - load1 * 100) <= 300, (values, load1)
    # The rate matches one measured here over a second of the same counter, within an order
    # of magnitude (the traffic on the loopback is not steady).
    def lo_packets():
        return float(next(line.split()[1] for line in scrape(node_exporter).splitlines()
                          if line.startswith('node_network_receive_packets_total{device="lo"}')))
    p0, t0 = lo_packets(), time.monotonic()
    time.sleep(1.0)
    mine = (lo_packets() - p0) / (time.monotonic() - t0)
    theirs = fresh(srv)["packet-rate"]
    assert mine / 20 <= theirs <= mine * 20 + 1000, (mine, theirs)

    # The health table holds the same values for the policies; /metrics exports them.
    load = wait_for(lambda: load_values(srv).keys() >= {"packet-rate", "kbps"} and
                    load_values(srv), 3, 0.05, "load values in the health table")
    assert load["capacity"] == 5000, load
    assert target_row(srv)["state"] == "UP"
    assert target_row(srv)["load"]["round"] >= 2
    text = srv.ctl("monitors").stdout
    assert "values: " in text and "packet-rate" in text, text
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as r:
        body = r.read().decode()
    assert (f'steer_target_load{{service="www.{ZONE}",datacenter="dc1",address="127.0.0.31",'
            f'metric="capacity"}} 5000') in body, body
    assert 'metric="packet-rate"' in body and "steer_target_load_age_seconds{" in body


# --- nginx stub_status -----------------------------------------------------------------------

NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    keepalive_timeout 60s;
    client_header_timeout 60s;
    server {{
        listen 127.0.0.41:{port};
        location = /status {{ stub_status; }}
        location / {{ return 200 "ok\\n"; }}
    }}
}}
"""


@pytest.fixture
def nginx(tmp_path):
    d = tmp_path / "nginx"
    (d / "tmp").mkdir(parents=True)
    port = free_port()
    conf = d / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=d, port=port))
    proc = subprocess.Popen([NGINX, "-p", str(d), "-c", str(conf), "-e", str(d / "error.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(proc, "127.0.0.41", port, "nginx", d / "error.log")
        yield port
    finally:
        stop_process(proc)


def test_nginx_stub_status_follows_open_connections(steerd, nginx):
    monitor = f"""    type: metrics
    format: nginx-stub-status
    port: {nginx}
    path: /status
    interval: 200ms
    timeout: 150ms
    connections: active
    capacity: 64"""
    srv = start(steerd, config("127.0.0.41", monitor))
    # Our own scrape is one of the active connections.
    base = wait_for(lambda: fresh(srv).get("connections"), 3, 0.05, "connections read")
    assert 1 <= base <= 3, base
    held = []
    try:
        for _ in range(8):
            held.append(socket.create_connection(("127.0.0.41", nginx), timeout=2))
        up = wait_for(lambda: (c := load_values(srv).get("connections", 0)) >= base + 8 and c,
                      3, 0.05, "held connections counted")
        assert up <= base + 8 + 2, (base, up)
    finally:
        for s in held:
            s.close()
    wait_for(lambda: load_values(srv).get("connections", 99) <= 3, 3, 0.05,
             "connections back down")
    assert load_values(srv)["capacity"] == 64


# --- a misbehaving endpoint ------------------------------------------------------------------

HUGE = 5 << 20  # bytes: beyond the 4 MiB a metrics body may have
GOOD = b"# TYPE app_connections gauge\napp_connections{pool=\"a\"} 40\napp_connections{pool=\"b\"} 2\n"


class FakeExporter:
    """python http.server with a switchable behaviour: good, garbage, hang, error."""

    def __init__(self, host: str):
        self.mode = "good"
        self.release = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                mode = outer.mode
                if mode == "hang":
                    outer.release.wait(5)
                    return
                code, body = {"good": (200, GOOD),
                              "garbage": (200, b"<html><body>502 Bad Gateway</body></html>\n"),
                              "huge": (200, b"# padding\n" * (HUGE // 10)),
                              "json": (200, b'{"pools": [{"active": 5}, {"active": 7.5}]}'),
                              "error": (500, b"oops\n")}[mode]
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer((host, self.port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.release.set()
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@pytest.fixture
def fake():
    f = FakeExporter("127.0.0.51")
    yield f
    f.stop()


def last_detail(srv) -> str:
    last = check_row(srv).get("last")
    return last["detail"] if last else ""


def test_bad_endpoint_keeps_target_up_and_values_go_stale(steerd, fake):
    monitor = f"""    type: metrics
    port: {fake.port}
    interval: 200ms
    timeout: 150ms
    stale-after: 1500ms
    connections: 'app_connections'
    cpu: 'app_connections{{pool="b"}} * 10'"""
    srv = start(steerd, config("127.0.0.51", monitor))
    wait_for(lambda: load_values(srv) == {"connections": 42, "cpu": 20}, 3, 0.05,
             "good values in the health table")

    # Garbage: the error is shown, the last values stay until stale-after, then go.
    fake.mode = "garbage"
    t0 = time.monotonic()
    wait_for(lambda: last_detail(srv).startswith("prometheus body: line 1: "), 2, 0.02,
             "parse error shown")
    assert load_values(srv) == {"connections": 42, "cpu": 20}, "values kept for now"
    assert target_row(srv)["state"] == "UP" and answers(srv) == ["127.0.0.51"]
    wait_for(lambda: load_values(srv) == {}, 3, 0.02, "values stale")
    took = time.monotonic() - t0
    assert 1.0 <= took <= 2.5, took  # the last good scrape was up to one interval before t0
    row = check_row(srv)
    assert not row["values"]["connections"]["fresh"], row
    assert row["values"]["connections"]["age_ms"] >= 1500, row
    assert target_row(srv)["load"] is None

    # Good again: fresh values at once.
    fake.mode = "good"
    wait_for(lambda: load_values(srv) == {"connections": 42, "cpu": 20}, 2, 0.02, "fresh again")

    # Hanging past the timeout, a 500, and nobody listening: each shown, the target stays UP.
    fake.mode = "hang"
    wait_for(lambda: last_detail(srv) == "timeout after 150 ms", 2, 0.02, "timeout shown")
    fake.release.set()
    fake.release = threading.Event()
    fake.mode = "error"
    wait_for(lambda: last_detail(srv) == "HTTP 500 (expected 2xx)", 2, 0.02, "500 shown")
    fake.stop()
    wait_for(lambda: last_detail(srv) == "connect: Connection refused", 2, 0.02,
             "refused shown")
    wait_for(lambda: load_values(srv) == {}, 3, 0.02, "values stale again")
    assert target_row(srv)["state"] == "UP", target_row(srv)
    assert answers(srv) == ["127.0.0.51"]
    assert check_row(srv)["state"] == "metrics"
    assert srv.alive()


# --- configuration errors --------------------------------------------------------------------

def test_bad_expression_is_a_config_error_at_its_line(tmp_path):
    zone = tmp_path / "lf.zone"
    zone.write_text(ZONE_TEXT)
    conf = tmp_path / "steer.yaml"
    conf.write_text(f"""zones:
  - domain: {ZONE}
    file: {zone}
monitors:
  load:
    type: metrics
    port: 9100
    connections: 'nginx_connections_active{{pool=a}}'
datacenters:
  - {{ name: dc1 }}
services:
  - name: www.{ZONE}
    metrics: load
    datacenters:
      dc1: {{ addresses: [192.0.2.1] }}
""")
    res = run_steerd("-c", str(conf), "--check-config")
    assert res.returncode != 0
    assert (f"{conf}:8: monitors.load.connections: 'nginx_connections_active{{pool=a}}' is "
            "not a prometheus expression: at 31: label pool: expected '\"'") in res.stderr, \
        res.stderr


def test_json_body(steerd, fake):
    fake.mode = "json"
    monitor = f"""    type: metrics
    format: json
    port: {fake.port}
    path: /stats.json
    interval: 200ms
    timeout: 150ms
    connections: pools.1.active
    kbps: 'pools.0.active * 8'"""
    srv = start(steerd, config("127.0.0.51", monitor))
    wait_for(lambda: load_values(srv) == {"connections": 7.5, "kbps": 40}, 3, 0.05,
             "json values")
    fake.mode = "good"  # prometheus text is not JSON
    wait_for(lambda: last_detail(srv).startswith("json body: line 1 column 1: "), 2, 0.02,
             "json parse error shown")


def test_oversized_body_is_refused(steerd, fake):
    fake.mode = "huge"
    monitor = f"""    type: metrics
    port: {fake.port}
    interval: 1500ms
    timeout: 1200ms
    connections: app_connections"""
    srv = start(steerd, config("127.0.0.51", monitor))
    wait_for(lambda: last_detail(srv) == "HTTP 200 but the body is larger than 4194304 bytes",
             4, 0.05, "oversized body refused")
    assert load_values(srv) == {} and target_row(srv)["state"] == "UP"


def test_reload_keeps_values_and_dropping_metrics_clears_them(steerd, fake):
    monitor = f"""    type: metrics
    port: {fake.port}
    interval: 200ms
    timeout: 150ms
    connections: app_connections"""
    srv = start(steerd, config("127.0.0.51", monitor))
    wait_for(lambda: load_values(srv) == {"connections": 42}, 3, 0.05, "values")
    probes = check_row(srv)["probes"]
    # The same check after a reload: its values and counters carry on.
    assert srv.ctl("reload").returncode == 0
    row = check_row(srv)
    assert row["probes"] >= probes and row["values"]["connections"]["fresh"], row
    assert load_values(srv) == {"connections": 42}
    # Without `metrics:` the check goes and so do the target's load values.
    text = srv.config_path.read_text().replace("    metrics: load\n", "")
    srv.config_path.write_text(text)
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    assert srv.ctl_json("monitors") == []
    assert target_row(srv)["load"] is None
