"""Operator-facing control plane: `steerctl health PATTERN` and `monitors PATTERN` filter on the
server side, a service whose datacenters all go down is logged once with the all-down action
(and once when it recovers), and quick mode's control socket is where a bare `steerctl` looks.

The monitored set-up is test_health.py's: TCP backends on 127.0.0.x and a failover service.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import STEERCTL, STEERD, free_port, wait_for
from test_health import TcpBackend, ZONE, addrs, backends, start, tcp_config  # noqa: F401

FALLBACK = "\n    all-down: fallback\n    fallback: [192.0.2.99]"
DOWN_LINE = f"service www.{ZONE}: all datacenters down, answering fallback 192.0.2.99"
UP_LINE = f"service www.{ZONE}: a datacenter is up again, all-down is over"


def names(rows, key):
    return sorted(r[key] for r in rows)


def test_health_and_monitors_filter_by_glob(steerd, backends):
    port = free_port()
    backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    srv = start(steerd, tcp_config(port))
    every = names(srv.ctl_json("health"), "name")
    assert every == [f"service/www.{ZONE}/dc1/127.0.0.11", f"service/www.{ZONE}/dc2/127.0.0.12"]
    assert names(srv.ctl_json("health", f"service/www.{ZONE}/dc2/*"), "name") == every[1:]
    assert names(srv.ctl_json("health", "SERVICE/WWW.*"), "name") == every, "case-insensitive"
    assert srv.ctl_json("health", "service/nothing/*") == []
    keys = names(srv.ctl_json("monitors"), "key")
    assert keys == [f"web@127.0.0.11:{port}", f"web@127.0.0.12:{port}"]
    assert names(srv.ctl_json("monitors", "web@127.0.0.12:*"), "key") == keys[1:]
    assert names(srv.ctl_json("monitors", "web"), "key") == keys, "the monitor name matches too"
    assert srv.ctl_json("monitors", "dns*") == []
    out = srv.ctl("health", "*/dc1/*").stdout
    assert "127.0.0.11" in out and "127.0.0.12" not in out, out
    res = srv.ctl("health", "a", "b")
    assert res.returncode == 2 and "usage: health [PATTERN]" in res.stderr, res.stderr


def test_all_down_is_logged_once_with_its_action_and_once_on_recovery(steerd, backends):
    port = free_port()
    b1 = backends(TcpBackend, "127.0.0.11", port)
    b2 = backends(TcpBackend, "127.0.0.12", port)
    srv = start(steerd, tcp_config(port, service_extra=FALLBACK))
    assert addrs(srv) == ["127.0.0.11"]
    b1.stop()
    wait_for(lambda: addrs(srv) == ["127.0.0.12"], 3, 0.02, "dc1 leaves the answers")
    assert DOWN_LINE not in srv.log(), "one datacenter left is not all-down"
    b2.stop()
    wait_for(lambda: addrs(srv) == ["192.0.2.99"], 3, 0.02, "the fallback is answered")
    # Probes keep failing every 200 ms and control commands publish again: still one line.
    for _ in range(5):
        time.sleep(0.3)
        srv.ctl_json("health")
    assert srv.log().count(DOWN_LINE) == 1, srv.log()
    assert UP_LINE not in srv.log()
    b2.start()
    wait_for(lambda: addrs(srv) == ["127.0.0.12"], 3, 0.02, "dc2 comes back")
    time.sleep(0.6)
    assert srv.log().count(UP_LINE) == 1, srv.log()
    assert srv.log().count(DOWN_LINE) == 1, srv.log()


def test_all_down_by_override_is_logged_too(steerd, backends):
    port = free_port()
    backends(TcpBackend, "127.0.0.11", port)
    backends(TcpBackend, "127.0.0.12", port)
    srv = start(steerd, tcp_config(port, service_extra=FALLBACK))
    srv.ctl_json("override", "set", f"service/www.{ZONE}/*", "down")
    assert addrs(srv) == ["192.0.2.99"]
    srv.ctl_json("override", "set", f"service/www.{ZONE}/dc2/*", "down")  # still all down
    assert srv.log().count(DOWN_LINE) == 1, srv.log()
    srv.ctl_json("override", "clear", f"service/www.{ZONE}/*")
    srv.ctl_json("override", "clear", f"service/www.{ZONE}/dc2/*")
    assert addrs(srv) == ["127.0.0.11"]
    assert srv.log().count(UP_LINE) == 1, srv.log()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root to run steerd as another user")
def test_quick_mode_socket_is_where_steerctl_looks():
    """README: `steerd --listen ... --zone ...` then a bare `steerctl status` reaches it. As
    a user that is $XDG_RUNTIME_DIR/steerd.sock (root's is /run/steer/steerd.sock)."""
    # pytest's tmp_path is root-only; the unprivileged daemon must read its zone.
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        quick_mode_as_nobody(Path(tmp))


def quick_mode_as_nobody(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    os.chown(run, 65534, 65534)
    os.chmod(run, 0o700)
    zone = tmp_path / "example.test.zone"
    zone.write_text("$ORIGIN example.test.\n$TTL 300\n@ SOA ns hostmaster 1 2 3 4 5\n"
                    "  NS ns\nns A 192.0.2.1\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "XDG_RUNTIME_DIR": str(run)}
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    log = open(tmp_path / "steerd.log", "wb")
    proc = subprocess.Popen(as_nobody + [STEERD, "--listen", f"127.0.0.1:{free_port()}",
                                         "--zone", f"example.test={zone}"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: (run / "steerd.sock").exists() or proc.poll() is not None, 10, 0.05,
                 "the control socket")
        assert proc.poll() is None, (tmp_path / "steerd.log").read_text()
        res = subprocess.run(as_nobody + [STEERCTL, "status"], env=env, capture_output=True,
                             text=True, timeout=30)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "example.test" in subprocess.run(
            as_nobody + [STEERCTL, "zones"], env=env, capture_output=True, text=True,
            timeout=30).stdout
        assert f"control socket {run}/steerd.sock" in (tmp_path / "steerd.log").read_text()
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
