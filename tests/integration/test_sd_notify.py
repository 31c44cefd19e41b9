"""systemd notification: steerd as a `Type=notify` service.

The test is the service manager: it binds its own AF_UNIX datagram socket, starts steerd with
NOTIFY_SOCKET (and WATCHDOG_USEC/WATCHDOG_PID) pointing at it, and reads what steerd sends:
READY=1 only once the first health round is in, RELOADING=1 with MONOTONIC_USEC= and READY=1
around a reload (STATUS= with the error when it failed), WATCHDOG=1 at half the watchdog
period, STOPPING=1 at shutdown. The last test runs the installed unit's settings under a real
systemd (systemd-run) and skips where PID 1 is not systemd.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import STEERD, query, server_config, wait_for

ZONE = "notify.example.test"
ZONE_TEXT = f"""$ORIGIN {ZONE}.
$TTL 3600
@   SOA ns1 hostmaster 1 7200 3600 1209600 300
    NS  ns1
ns1 A   192.0.2.53
"""

# A monitor whose first result takes a second: READY must wait for it.
SLOW_FIRST_RESULT_S = 1.0
SLOW_MONITOR = f"""monitors:
  slow: {{ type: exec, command: [sh, -c, "sleep {SLOW_FIRST_RESULT_S}"], interval: 5s, timeout: 4s }}
datacenters:
  - {{ name: dc1 }}
services:
  - name: www.{ZONE}
    datacenters:
      dc1: {{ addresses: [192.0.2.10], monitor: slow }}
"""


class NotifyListener:
    """The service manager's end of NOTIFY_SOCKET: every datagram with its arrival time."""

    def __init__(self, path: Path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.1)
        self.messages: list[tuple[float, dict[str, str]]] = []
        self.lock = threading.Lock()
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            with self.lock:
                self.messages.append((time.monotonic(), fields))

    def close(self):
        self.running = False
        self.thread.join()
        self.sock.close()

    def all(self) -> list[tuple[float, dict[str, str]]]:
        with self.lock:
            return list(self.messages)

    def with_field(self, key: str, value: str | None = None) -> list[tuple[float, dict]]:
        return [(t, m) for t, m in self.all() if key in m and (value is None or m[key] == value)]

    def wait(self, key: str, value: str | None = None, count: int = 1,
             timeout: float = 10.0) -> list[tuple[float, dict]]:
        wait_for(lambda: len(self.with_field(key, value)) >= count, timeout, 0.02,
                 f"{count} notification(s) with {key}={value or '*'}: got {self.all()}")
        return self.with_field(key, value)


@pytest.fixture
def notify(tmp_path, monkeypatch):
    listener = NotifyListener(tmp_path / "notify.sock")
    monkeypatch.setenv("NOTIFY_SOCKET", str(listener.path))
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    yield listener
    listener.close()


def answers(srv) -> bool:
    try:
        return srv.udp(query(ZONE, "SOA")).rcode() == 0
    except Exception:
        return False


def test_ready_waits_for_the_first_health_round(steerd, notify):
    started = time.monotonic()
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=server_config(SLOW_MONITOR), ready=False)
    (at, msg), = notify.wait("READY", "1", timeout=15)
    # Nothing is served before the first result, and everything is once READY is sent.
    assert at - started >= SLOW_FIRST_RESULT_S * 0.9, at - started
    assert answers(srv)
    monitors = srv.ctl_json("monitors")
    assert monitors[0]["probes"] >= 1 and monitors[0]["state"] == "UP", monitors
    assert msg["STATUS"] == "serving 1 zone(s), 1 GSLB service(s), 1 health check(s)", msg
    assert [m for _, m in notify.all() if "READY" in m] == [msg]


def test_ready_without_monitors_and_stopping(steerd, notify):
    srv = steerd(zones={ZONE: ZONE_TEXT})
    (_, msg), = notify.wait("READY", "1")
    assert msg["STATUS"] == "serving 1 zone(s), 0 GSLB service(s), 0 health check(s)"
    assert not notify.with_field("STOPPING")
    srv.stop()
    (_, msg), = notify.wait("STOPPING", "1")
    assert msg["STATUS"] == "stopping"
    # No watchdog without WATCHDOG_USEC.
    assert not notify.with_field("WATCHDOG")


def test_reload_reports_reloading_then_ready(steerd, notify):
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=server_config(""))
    notify.wait("READY", "1")
    before = time.monotonic()
    srv.send_signal(signal.SIGHUP)
    (_, reloading), = notify.wait("RELOADING", "1")
    # CLOCK_MONOTONIC, the clock of Python's time.monotonic() on Linux.
    usec = int(reloading["MONOTONIC_USEC"])
    assert before * 1e6 - 1e6 <= usec <= time.monotonic() * 1e6 + 1e6, (before, usec)
    ready = notify.wait("READY", "1", count=2)
    assert ready[1][0] >= notify.with_field("RELOADING")[0][0]
    assert ready[1][1]["STATUS"].startswith("serving 1 zone(s)")

    # steerctl reload, the unit's ExecReload, takes the same path.
    srv.ctl("reload")
    notify.wait("RELOADING", "1", count=2)
    notify.wait("READY", "1", count=3)


def test_failed_reload_says_why_in_status(steerd, notify):
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=server_config(""))
    notify.wait("READY", "1")
    good = srv.config_path.read_text()
    srv.config_path.write_text(good + "no-such-section: 1\n")
    res = srv.ctl("reload")
    assert res.returncode == 1, res
    ready = notify.wait("READY", "1", count=2)
    status = ready[1][1]["STATUS"]
    assert status.startswith("reload failed: ") and "no-such-section" in status, status
    assert str(srv.config_path) in status, status
    assert answers(srv), "the old configuration keeps serving"
    srv.config_path.write_text(good)
    srv.ctl("reload")
    ready = notify.wait("READY", "1", count=3)
    assert ready[2][1]["STATUS"].startswith("serving 1 zone(s)")


def watchdog_prefix() -> list[str]:
    """Run steerd under a shell that sets WATCHDOG_PID to its own PID, then execs steerd (same
    PID), as systemd does for the service's main process."""
    return ["sh", "-c", 'WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$@"', "sh"]


def test_watchdog_pings_at_half_the_period(steerd, notify, monkeypatch):
    period_s = 0.4
    monkeypatch.setenv("WATCHDOG_USEC", str(int(period_s * 1e6)))
    srv = steerd(zones={ZONE: ZONE_TEXT}, prefix=watchdog_prefix())
    notify.wait("READY", "1")
    first = len(notify.with_field("WATCHDOG", "1"))
    window = 2.0
    time.sleep(window)
    pings = notify.with_field("WATCHDOG", "1")[first:]
    expected = window / (period_s / 2)
    assert expected * 0.7 <= len(pings) <= expected * 1.3, (len(pings), expected)
    gaps = [b[0] - a[0] for a, b in zip(pings, pings[1:])]
    assert max(gaps) < period_s, gaps
    assert "systemd watchdog: pinging every 0.200s" in srv.log()


def big_zone(records: int) -> str:
    lines = [f"$ORIGIN {ZONE}.", "$TTL 3600", "@ SOA ns1 hostmaster 2 7200 3600 1209600 300",
             "  NS ns1", "ns1 A 192.0.2.53"]
    lines += [f"h{i} A 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i in range(records)]
    return "\n".join(lines) + "\n"


def test_watchdog_stops_while_the_control_loop_is_busy(steerd, notify, monkeypatch):
    """The pings come from the control loop itself, not from a thread of their own: while a
    reload keeps the loop busy re-reading a big zone, none is sent, so a loop that hangs for
    good gets the service restarted."""
    monkeypatch.setenv("WATCHDOG_USEC", "100000")  # a ping every 50 ms
    srv = steerd(zones={ZONE: ZONE_TEXT}, prefix=watchdog_prefix())
    notify.wait("READY", "1")
    notify.wait("WATCHDOG", "1", count=3)
    # Big enough that loading it takes several ping periods even on a fast machine
    # (300,000 records load in under 0.1 s here).
    srv.zone_paths[ZONE].write_text(big_zone(1_200_000))
    srv.send_signal(signal.SIGHUP)
    notify.wait("READY", "1", count=2, timeout=60)
    messages = notify.all()
    start = next(i for i, (_, m) in enumerate(messages) if m.get("RELOADING") == "1")
    end = next(i for i, (_, m) in enumerate(messages) if i > start and m.get("READY") == "1")
    busy = messages[end][0] - messages[start][0]
    assert busy > 0.15, f"the reload took {busy:.3f}s, too short to tell"
    during = [m for _, m in messages[start + 1:end] if "WATCHDOG" in m]
    assert during == [], f"{len(during)} ping(s) during a {busy:.3f}s reload"
    assert messages[end][1]["STATUS"].startswith("serving 1 zone(s)")
    # And they resume once the loop runs again.
    count = len(notify.with_field("WATCHDOG", "1"))
    notify.wait("WATCHDOG", "1", count=count + 2)


def test_watchdog_of_another_process_is_not_ours(steerd, notify, monkeypatch):
    """WATCHDOG_PID names the process the service manager watches; a child that inherited the
    variables (steerd started by a script) must not ping."""
    monkeypatch.setenv("WATCHDOG_USEC", "200000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    steerd(zones={ZONE: ZONE_TEXT})
    notify.wait("READY", "1")
    time.sleep(0.5)
    assert not notify.with_field("WATCHDOG"), notify.all()


def systemd_is_pid1() -> bool:
    try:
        return Path("/proc/1/comm").read_text().strip() == "systemd"
    except OSError:
        return False


def unit_service_settings() -> list[str]:
    """The [Service] settings of the built steerd.service, without its commands and paths
    (the test runs the binary under test with its own configuration)."""
    unit = Path(STEERD).resolve().parents[2] / "dist" / "steerd.service"
    settings, section = [], None
    for line in unit.read_text().splitlines():
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            if not line.startswith(("ExecStart=", "ExecReload=")):
                settings.append(line)
    return settings


@pytest.mark.skipif(not systemd_is_pid1(),
                    reason="PID 1 is not systemd (a container or chroot): systemd-run cannot "
                           "start a transient unit without a running service manager")
@pytest.mark.skipif(os.geteuid() != 0, reason="systemd-run for a system unit needs root")
def test_unit_under_systemd_run():
    """The installed unit's settings (Type=notify, watchdog, capability bounding set,
    ProtectSystem=strict, PrivateTmp, ...) under the real service manager: the unit turns
    active only with READY, its status shows steerd's STATUS=, it survives a reload and more
    than one watchdog period, and stops cleanly."""
    from conftest import free_port
    if str(Path(STEERD).resolve()).startswith(("/home/", "/root/")):
        pytest.skip("the unit's ProtectHome=yes hides a steerd built under /home or /root")
    settings = unit_service_settings()
    assert "Type=notify" in settings and any(s.startswith("WatchdogSec=") for s in settings)
    # Not under /tmp: the unit has a private one. Read-write only for the control socket.
    work = Path(f"/run/steer-test-{os.getpid()}")
    work.mkdir(mode=0o755)
    unit = f"steer-test-{os.getpid()}"
    try:
        port = free_port()
        (work / f"{ZONE}.zone").write_text(ZONE_TEXT)
        conf = work / "steer.yaml"
        conf.write_text(f"server:\n  listen: [127.0.0.1:{port}]\n"
                        f"  control-socket: {work / 'ctl.sock'}\n  workers: 1\n"
                        f"  tcp-workers: 1\nzones:\n  - domain: {ZONE}\n"
                        f"    file: {work / (ZONE + '.zone')}\n")
        cmd = ["systemd-run", "--unit", unit, "--collect", "-p", f"ReadWritePaths={work}",
               "-p", "WatchdogSec=2s", "-p", "Restart=no"]
        for s in settings:
            if not s.startswith(("Restart=", "WatchdogSec=")):
                cmd += ["-p", s]
        subprocess.run(cmd + [STEERD, "-c", str(conf)], check=True, timeout=60)

        def show(prop):
            return subprocess.run(["systemctl", "show", "-P", prop, unit], capture_output=True,
                                  text=True).stdout.strip()
        # systemd-run returns once the unit started, i.e. once READY=1 arrived.
        assert show("ActiveState") == "active"
        assert show("StatusText").startswith("serving 1 zone(s)"), show("StatusText")
        subprocess.run(["systemctl", "kill", "--signal=HUP", unit], check=True)
        wait_for(lambda: show("StatusText").startswith("serving"), 5, 0.1, "status after HUP")
        time.sleep(3)  # longer than the watchdog period: only the pings keep the unit alive
        assert show("ActiveState") == "active" and show("NRestarts") in ("0", "")
    finally:
        subprocess.run(["systemctl", "stop", unit], timeout=60)
        shutil.rmtree(work, ignore_errors=True)
