"""Config mode (-c FILE), --check-config, --config-reference, pid file and privilege drop."""

import os
import pwd
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ZONES_DIR, Launcher, port_is_free, free_port, query, run_steerd

GOOD = """# a comment
server:
  listen: ["127.0.0.1:{port}", "[::1]:{port}"]
  workers: 2
  tcp-workers: 1
  control-socket: {dir}/ctl.sock
log:
  target: stderr
  level: info
zones:
  - domain: example.test
    file: zones/example.test.zone
    xfr-allow: [127.0.0.1, "::1", 10.0.0.0/8]
  - domain: types.test.
    file: {dir}/zones/types.test.zone
"""


@pytest.fixture
def confdir(tmp_path):
    """tmp_path with zones/ holding the test zones, for relative zone paths."""
    (tmp_path / "zones").mkdir()
    for name in ("example.test", "types.test"):
        (tmp_path / "zones" / f"{name}.zone").write_text(
            (ZONES_DIR / f"{name}.zone").read_text())
    return tmp_path


def write(confdir, text, name="steer.yaml"):
    path = confdir / name
    path.write_text(text)
    return path


def check(path):
    return run_steerd("-c", str(path), "--check-config", timeout=20)


def test_config_mode_serves(steerd, confdir):
    port = free_port()
    text = GOOD.format(port=port, dir=confdir)
    srv = steerd(config=text, listen=[("127.0.0.1", port), ("::1", port)],
                 ready_zone="example.test", ready=False)
    srv.ctl_socket = confdir / "ctl.sock"
    srv.wait_ready()
    for host in ("127.0.0.1", "::1"):
        assert srv.udp(query("www.example.test"), host=host).answer
        assert srv.tcp(query("a.types.test"), host=host).answer


def test_check_config_good(confdir):
    path = write(confdir, GOOD.format(port=free_port(), dir=confdir))
    res = check(path)
    assert res.returncode == 0, res.stderr


def test_check_config_does_not_serve(confdir):
    port = free_port()
    path = write(confdir, GOOD.format(port=port, dir=confdir))
    t0 = time.monotonic()
    assert check(path).returncode == 0
    assert time.monotonic() - t0 < 10
    assert not (confdir / "ctl.sock").exists()


BAD_CASES = {
    # name: (text replacing part of GOOD, expected line, words expected in the message)
    "unknown key": (("  workers: 2\n", "  workers: 2\n  wrokers: 3\n"), 5, ["wrokers"]),
    "unknown section": (("log:\n", "lgo:\n  level: info\nlog:\n"), 7, ["lgo"]),
    "unknown zone key": (("    file: zones/example.test.zone\n",
                          "    file: zones/example.test.zone\n    flie: x\n"), 13, ["flie"]),
    "not a number": (("  workers: 2\n", "  workers: many\n"), 4, ["workers"]),
    "out of range": (("  workers: 2\n", "  workers: 2\n  udp-max-payload: 100\n"), 5,
                     ["udp-max-payload"]),
    "bad level": (("  level: info\n", "  level: chatty\n"), 9, ["chatty"]),
    "bad address": (("\"[::1]:{port}\"]", "\"[::1]:{port}\", \"300.1.1.1:53\"]"), 3,
                    ["300.1.1.1"]),
    "bad prefix host bits": (("10.0.0.0/8]", "10.0.0.1/8]"), 13, ["10.0.0.1/8"]),
    "zone without file": (("    file: zones/example.test.zone\n", ""), 11, ["file"]),
    "bad domain": (("  - domain: example.test\n", "  - domain: exa..mple.test\n"), 11,
                   ["exa..mple"]),
    "duplicate key": (("  tcp-workers: 1\n", "  tcp-workers: 1\n  workers: 3\n"), 6,
                      ["workers"]),
    "duplicate zone": (("  - domain: types.test.\n", "  - domain: Example.Test.\n"), 14,
                       ["xample"]),
}


@pytest.mark.parametrize("case", list(BAD_CASES), ids=list(BAD_CASES))
def test_check_config_bad(confdir, case):
    (old, new), line, words = BAD_CASES[case]
    assert old in GOOD
    text = GOOD.replace(old, new).format(port=free_port(), dir=confdir)
    path = write(confdir, text)
    res = check(path)
    assert res.returncode == 1, f"exit {res.returncode}: {res.stderr}"
    assert f"{path}:{line}" in res.stderr, f"want {path}:{line} in:\n{res.stderr}"
    for word in words:
        assert word in res.stderr, f"want {word!r} in:\n{res.stderr}"


def test_check_config_yaml_syntax_error(confdir):
    path = write(confdir, "server:\n  listen: [127.0.0.1:53\nzones:\n  - domain: x\n")
    res = check(path)
    assert res.returncode == 1
    assert re.search(re.escape(str(path)) + r":\d+", res.stderr), res.stderr


def test_check_config_no_zones(confdir):
    path = write(confdir, "server:\n  listen: 127.0.0.1:5353\n")
    res = check(path)
    assert res.returncode == 1 and "zones" in res.stderr


def test_check_config_missing_file(tmp_path):
    res = check(tmp_path / "nope.yaml")
    assert res.returncode == 1 and "nope.yaml" in res.stderr


def test_start_with_bad_config_fails(confdir):
    text = GOOD.replace("  workers: 2\n", "  wrokers: 2\n").format(port=free_port(), dir=confdir)
    path = write(confdir, text)
    res = run_steerd("-c", str(path), timeout=20)
    assert res.returncode != 0 and f"{path}:4" in res.stderr


def test_config_reference():
    res = run_steerd("--config-reference", timeout=10)
    assert res.returncode == 0
    for key in ("listen", "workers", "tcp-workers", "udp-max-payload", "tcp-max-clients",
                "tcp-idle-timeout", "tcp-io-timeout", "user", "group", "control-socket",
                "pid-file", "target", "level", "domain", "file", "xfr-allow"):
        assert f"`{key}`" in res.stdout or f".{key}`" in res.stdout, f"{key} not documented"


def test_pid_file(steerd):
    config = """
server:
  listen: {listen}
  control-socket: {ctl}
  pid-file: {dir}/steerd.pid
{zones}"""
    srv = steerd(zones={"example.test": "example.test.zone"}, config=config)
    pid_file = srv.workdir / "steerd.pid"
    assert int(pid_file.read_text().strip()) == srv.pid


def privileged_free_port():
    for port in range(953, 700, -1):
        if port_is_free(port):
            return port
    pytest.skip("no free port below 1024")


def proc_ids(pid):
    status = open(f"/proc/{pid}/status").read()
    uids = [int(x) for x in re.search(r"^Uid:\s+(.*)$", status, re.M).group(1).split()]
    gids = [int(x) for x in re.search(r"^Gid:\s+(.*)$", status, re.M).group(1).split()]
    groups = re.search(r"^Groups:\s*(.*)$", status, re.M).group(1).split()
    return uids, gids, groups


@pytest.fixture
def world_readable_dir():
    """A folder that user nobody can reach (pytest's tmp_path sits below a 0700 folder)."""
    path = Path(tempfile.mkdtemp(prefix="steer-privdrop-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
def test_privilege_drop(world_readable_dir):
    """Bind as root, then run as nobody for good: real, effective, saved and filesystem ids in
    every thread, no supplementary groups left; serving, steerctl and reload keep working."""
    config = """
server:
  listen: {listen}
  control-socket: {ctl}
  user: nobody
{zones}"""
    launcher = Launcher(world_readable_dir)
    try:
        # A port below 1024: only root can bind it, so binding happens before the drop.
        srv = launcher(zones={"example.test": "example.test.zone"}, config=config,
                       listen=[("127.0.0.1", privileged_free_port())])
        nobody = pwd.getpwnam("nobody")
        uids, gids, groups = proc_ids(srv.pid)
        assert uids == [nobody.pw_uid] * 4, uids
        assert gids == [nobody.pw_gid] * 4, gids
        assert groups in ([], [str(nobody.pw_gid)]), groups
        for task in os.listdir(f"/proc/{srv.pid}/task"):  # every thread
            t_uids, _, _ = proc_ids(f"{srv.pid}/task/{task}")
            assert t_uids == [nobody.pw_uid] * 4, f"thread {task}: {t_uids}"
        assert srv.udp(query("www.example.test")).answer
        assert srv.tcp(query("www.example.test")).answer
        res = srv.ctl("status")
        assert res.returncode == 0, res.stderr
        res = srv.ctl("reload")
        assert res.returncode == 0, res.stdout + res.stderr
    finally:
        launcher.finish()


def test_unknown_user_fails(confdir):
    text = GOOD.replace("  workers: 2\n", "  user: no-such-user-xyz\n").format(
        port=free_port(), dir=confdir)
    path = write(confdir, text)
    res = run_steerd("-c", str(path), timeout=20)
    assert res.returncode != 0 and "no-such-user-xyz" in res.stderr
