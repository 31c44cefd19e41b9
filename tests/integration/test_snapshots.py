"""Statistics snapshots: with `stats-snapshots: {file, interval: 1s}` steerd appends one JSON
line per second ({"time", "node", "stats"}), the counters in them grow with the queries the
test sends, the file is created 0640 and appended to (never truncated, so a restart or a
rotation keeps what was there), and a file that cannot be opened stops the start with a clear
error.
"""
from __future__ import annotations

import json
import os
import socket
import stat
import time

import dns.message

from conftest import server_config as yaml, free_port, run_steerd, wait_for

ZONE = "snap.example.test"
ZONE_TEXT = f"""$ORIGIN {ZONE}.
$TTL 3600
@   SOA ns1 hostmaster 1 7200 3600 1209600 300
    NS  ns1
ns1 A   192.0.2.53
www A   192.0.2.80
"""


def lines(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_snapshots_appear_parse_and_grow(steerd, tmp_path):
    snap = tmp_path / "stats.jsonl"
    snap.write_text('{"kept": "from before"}\n')
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=yaml(f"""stats-snapshots: {{ file: {snap}, interval: 1s }}
"""))
    for _ in range(5):
        srv.udp(dns.message.make_query(f"www.{ZONE}", "A"))
    wait_for(lambda: len(lines(snap)) >= 2, 4, 0.1, "a first snapshot")
    for _ in range(7):
        srv.udp(dns.message.make_query(f"www.{ZONE}", "A"))
    n = len(lines(snap))
    wait_for(lambda: len(lines(snap)) >= n + 1, 3, 0.1, "a later snapshot")
    rows = lines(snap)
    assert rows[0] == {"kept": "from before"}, "appended, not truncated"
    first, last = rows[1], rows[-1]
    assert set(first) == {"time", "node", "stats"}, first
    assert first["node"] == socket.gethostname()[:63], first
    assert abs(last["time"] - time.time()) < 3 and last["time"] > first["time"], rows
    assert 0.8 < rows[2]["time"] - rows[1]["time"] < 1.5, rows
    q0, q1 = first["stats"]["queries"]["udp"], last["stats"]["queries"]["udp"]
    assert q0 >= 5 and q1 >= q0 + 7, (q0, q1)
    assert last["stats"]["rcode"]["NOERROR"] >= q0 + 7, last
    # the same data as `steerctl stats`, alerts counters included
    assert set(last["stats"]) == set(srv.ctl_json("stats")), last["stats"].keys()
    assert "alerts" in last["stats"], last["stats"].keys()
    assert "stats-snapshots: appending to" in srv.log(), srv.log()


def test_snapshot_file_is_created_0640(steerd, tmp_path):
    snap = tmp_path / "new.jsonl"
    steerd(zones={ZONE: ZONE_TEXT}, config=yaml(f"""stats-snapshots: {{ file: {snap}, interval: 1s }}
"""))
    assert snap.exists() and stat.S_IMODE(os.stat(snap).st_mode) == 0o640 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_unopenable_snapshot_file_stops_the_start(tmp_path):
    # a folder where the file should be: open() fails whoever runs the test (root too)
    (tmp_path / "stats.jsonl").mkdir()
    (tmp_path / "snap.zone").write_text(ZONE_TEXT)
    conf = tmp_path / "steer.yaml"
    conf.write_text(f"""server:
  listen: ["127.0.0.1:{free_port()}"]
  control-socket: {tmp_path}/ctl.sock
zones:
  - {{ domain: {ZONE}, file: {tmp_path}/snap.zone }}
stats-snapshots: {{ file: {tmp_path}/stats.jsonl, interval: 1s }}
""")
    res = run_steerd("-c", str(conf), timeout=20)
    assert res.returncode != 0, res
    assert f"stats-snapshots: {tmp_path}/stats.jsonl: Is a directory" in res.stderr, res.stderr


def test_write_errors_are_logged_once_and_retried(steerd, tmp_path):
    snap = tmp_path / "stats.jsonl"
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=yaml(f"""stats-snapshots: {{ file: {snap}, interval: 1s }}
"""))
    wait_for(lambda: len(lines(snap)) >= 1, 4, 0.1, "a first snapshot")
    # a rotation gone wrong: a folder where the file was, for three intervals
    snap.rename(tmp_path / "stats.jsonl.1")
    for _ in range(3):
        try:
            snap.mkdir()
            break
        except FileExistsError:  # a snapshot landed between the two calls
            snap.unlink()
    wait_for(lambda: "cannot write" in srv.log(), 3, 0.1, "the error")
    time.sleep(2.2)
    assert srv.log().count(f"stats-snapshots: cannot write {snap}: Is a directory") == 1, \
        srv.log()
    snap.rmdir()
    wait_for(lambda: len(lines(snap)) >= 1, 3, 0.1, "written again")
    assert f"stats-snapshots: writing {snap} again" in srv.log(), srv.log()
