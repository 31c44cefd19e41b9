"""steerctl: status, zones and stats, as text and --json, exit codes, and counters that move
exactly as the traffic sent."""

import json
import struct
import subprocess

import dns.rcode
import dns.zone
import pytest

from conftest import STEERCTL, ZONES_DIR, assert_no_sanitizer_report, query, wait_for


def lookup(data, *path):
    """data[path[0]][path[1]]..., or None when a step is missing."""
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


# Where each counter lives in `steerctl --json stats` ("data" member); the contract is the
# comment at the top of tools/steerctl.c.
COUNTER_PATHS = {"udp": ("queries", "udp"), "tcp": ("queries", "tcp"),
                 "ipv6": ("queries", "ipv6")}


def counter(stats, name, sub=None):
    """A counter from the stats data: counter(s, "udp"), counter(s, "rcode", "NXDOMAIN"),
    counter(s, "qtype", "AAAA"). Per-value tables list only non-zero entries."""
    if sub is not None:
        table = lookup(stats, name)
        assert isinstance(table, dict), f"no '{name}' table in stats: {stats}"
        return int(table.get(sub, 0))
    value = lookup(stats, *COUNTER_PATHS.get(name, (name,)))
    assert isinstance(value, int), f"counter {name!r} not in stats: {json.dumps(stats)[:2000]}"
    return value


def zone_list(data):
    """The list of zone objects from `steerctl --json zones`."""
    assert isinstance(data, list), data
    return data


def zone_entry(data, name):
    for z in zone_list(data):
        if z["name"] == name:
            return z
    pytest.fail(f"zone {name} not listed: {data}")


@pytest.fixture(scope="module")
def srv(module_launcher):
    return module_launcher(zones={"example.test": "example.test.zone",
                                  "types.test": "types.test.zone"})


def test_status_text_and_json(srv):
    res = srv.ctl("status")
    assert res.returncode == 0 and res.stdout.strip(), res.stderr
    data = srv.ctl_json("status")
    assert isinstance(data, dict) and data


def test_zones_text(srv):
    res = srv.ctl("zones")
    assert res.returncode == 0, res.stderr
    assert "example.test" in res.stdout and "2024010101" in res.stdout
    assert "types.test" in res.stdout and "2024020202" in res.stdout


def test_zones_json(srv):
    data = srv.ctl_json("zones")
    assert len(zone_list(data)) == 2
    for name, serial, fname in (("example.test", 2024010101, "example.test.zone"),
                                ("types.test", 2024020202, "types.test.zone")):
        z = zone_entry(data, name)
        assert z["serial"] == serial
        records = len(list(dns.zone.from_file(str(ZONES_DIR / fname), name)
                           .iterate_rdatas()))
        assert z["records"] == records, f"{name}: {z['records']} records, file has {records}"
        assert z.get("loaded_at"), z


def test_stats_text(srv):
    res = srv.ctl("stats")
    assert res.returncode == 0 and res.stdout.strip(), res.stderr


def test_stats_count_exactly(srv):
    before = srv.ctl_json("stats")
    for _ in range(4):
        srv.udp(query("www.example.test", "A"))
    for _ in range(2):
        assert srv.udp(query("nothere.example.test", "A")).rcode() == dns.rcode.NXDOMAIN
    assert srv.udp(query("www.elsewhere.test", "A")).rcode() == dns.rcode.REFUSED
    srv.udp(query("www.example.test", "AAAA", edns=0))
    for _ in range(3):
        srv.tcp(query("www.example.test", "A"))
    expect = {("udp",): 8, ("tcp",): 3, ("edns",): 1, ("rcode", "NOERROR"): 8,
              ("rcode", "NXDOMAIN"): 2, ("rcode", "REFUSED"): 1, ("qtype", "A"): 10,
              ("qtype", "AAAA"): 1}

    def deltas():
        after = srv.ctl_json("stats")
        return {k: counter(after, *k) - counter(before, *k) for k in expect}

    # Counters are summed from per-thread blocks and may trail the reply by a moment.
    wait_for(lambda: all(deltas()[k] >= v for k, v in expect.items()), 5,
             what=f"stats deltas {expect}")
    assert deltas() == expect


def test_dropped_counted(srv):
    before = counter(srv.ctl_json("stats"), "dropped")
    qr_set = struct.pack("!6H", 7, 0x8100, 1, 0, 0, 0) + b"\x03www\x07example\x04test\x00\0\1\0\1"
    assert srv.udp_raw(qr_set, timeout=0.5) is None
    wait_for(lambda: counter(srv.ctl_json("stats"), "dropped") == before + 1, 5,
             what="dropped counter")


def steerctl(*args):
    res = subprocess.run([STEERCTL, *args], capture_output=True, text=True, timeout=10)
    assert_no_sanitizer_report(res.stdout + res.stderr)
    return res


def test_bad_socket_exit_2(tmp_path):
    for args in (["status"], ["--json", "zones"]):
        res = steerctl("-s", str(tmp_path / "none.sock"), *args)
        assert res.returncode == 2, res
        assert "none.sock" in res.stderr or res.stderr.strip()


def test_usage_exit_2(srv):
    res = steerctl()
    assert res.returncode == 2 and res.stderr.strip()
    res = steerctl("-s", str(srv.ctl_socket), "--no-such-flag", "status")
    assert res.returncode == 2


def test_help_lists_the_daemon_command_table():
    """steerctl's help and argument checks come from the same table the daemon dispatches."""
    res = steerctl("--help")
    assert res.returncode == 0
    for row in ("status", "reload", "zones", "stats", "explain NAME CLIENT-IP [ECS-SUBNET]",
                "health [PATTERN]", "monitors [PATTERN]", "override set PATTERN up|down",
                "override clear PATTERN", "override weight PATTERN N|default", "override list"):
        assert f"  {row}" in res.stdout, (row, res.stdout)


@pytest.mark.parametrize("args,needle", [
    (["status", "extra"], "'status' takes no arguments"),
    (["explain", "www.example.test"], "usage: explain NAME CLIENT-IP [ECS-SUBNET]"),
    (["override", "sideways", "x"], "usage: override set PATTERN up|down"),
    (["frobnicate"], "unknown command 'frobnicate'"),
])
def test_usage_errors_exit_2_without_asking_the_daemon(tmp_path, args, needle):
    res = steerctl("-s", str(tmp_path / "none.sock"), *args)
    assert res.returncode == 2 and needle in res.stderr, res.stderr
    assert "none.sock" not in res.stderr, "checked before connecting"


def test_unknown_command(srv):
    res = srv.ctl("frobnicate")
    assert res.returncode in (1, 2) and "frobnicate" in res.stdout + res.stderr


def test_raw_protocol(srv):
    """The socket speaks one JSON object per line each way (src/ctl/ctl.h)."""
    reply = srv.ctl_raw(b'{"cmd": "zones", "args": []}\n')
    assert reply["ok"] is True and len(zone_list(reply["data"])) == 2
    reply = srv.ctl_raw(b'this is not json\n')
    assert reply["ok"] is False and reply["error"]
    assert srv.ctl("status").returncode == 0


def test_control_socket_permissions(srv):
    import os
    import stat
    mode = stat.S_IMODE(os.stat(srv.ctl_socket).st_mode)
    assert mode & 0o007 == 0, f"control socket mode {oct(mode)}: others must have no access"


def test_status_reflects_setup_and_reloads(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"}, listen=["127.0.0.1", "::1"],
                 args=["--workers", "3", "--tcp-workers", "1"])
    st = srv.ctl_json("status")
    assert st["workers"] == 3 and st["tcp_workers"] == 1
    assert st["pid"] == srv.pid and st["zones"] == 1 and st["config"] is None
    assert sorted(st["listen"]) == sorted(f"[{h}]:{p}" if ":" in h else f"{h}:{p}"
                                          for h, p in srv.listen)
    assert st["last_reload"] is None
    assert srv.ctl("reload").returncode == 0
    st = srv.ctl_json("status")
    assert st["last_reload"]["ok"] is True and st["last_reload"]["error"] is None
    path = srv.zone_paths["example.test"]
    path.write_text(path.read_text() + "broken A 1.2.3\n")
    assert srv.ctl("reload").returncode == 1
    st = srv.ctl_json("status")
    assert st["last_reload"]["ok"] is False and str(path) in st["last_reload"]["error"]


def test_ipv6_counted(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"}, listen=["127.0.0.1", "::1"])
    before = srv.ctl_json("stats")
    v6_port = srv.listen[1][1]
    for _ in range(3):
        srv.udp(query("www.example.test"), host="::1", port=v6_port)
    srv.tcp(query("www.example.test"), host="::1", port=v6_port)
    srv.udp(query("www.example.test"))
    wait_for(lambda: counter(srv.ctl_json("stats"), "udp") == counter(before, "udp") + 4, 5,
             what="udp counter")
    after = srv.ctl_json("stats")
    # "ipv6" counts the queries that came over IPv6, UDP or TCP (src/auth/stats.h).
    assert counter(after, "ipv6") - counter(before, "ipv6") == 4
    assert counter(after, "tcp") - counter(before, "tcp") == 1
