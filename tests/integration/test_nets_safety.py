"""Nets-list guard rails: a failed ISP-list download, a typo in a prefix length or two files
claiming one prefix must never silently re-route an ISP.

Map "isp" (ECS address -> datacenter order):
    nets/unicom.txt  (10 prefixes, 202.106.0.0/17 + 202.106.128.0/17 among them) -> unicom
    nets/telecom.txt (3 prefixes)                                                  -> telecom
    anything else                                                -> telecom (default)
so 202.106.5.0/24 answers unicom's address while unicom.txt is whole, telecom's otherwise.
"""
from __future__ import annotations

import json
import signal
import subprocess

import dns.edns
import dns.message
import pytest

from conftest import STEERCTL, assert_no_sanitizer_report, find_rrset, run_steerd, wait_for

ZONE = "lb.example.test"
UNICOM_ADDR = "192.0.2.1"
TELECOM_ADDR = "198.51.100.1"

ZONE_TEXT = f"""$ORIGIN {ZONE}.
@ 3600 IN SOA ns1 hostmaster 1 3600 600 86400 300
@ 3600 IN NS ns1
ns1 3600 IN A 192.0.2.53
"""

UNICOM = [
    "# unicom ranges (a vendor list)",
    "202.106.0.0/17",
    "202.106.128.0/17   # adjacent to the line above: the tree merges them",
    "221.192.0.0/16",
    "221.193.0.0/16",
    "123.112.0.0/12",
    "60.0.0.0/13",
    "61.48.0.0/14",
    "2408:8000::/20",
    "114.240.0.0/12",
    "125.32.0.0/16",
]
TELECOM = ["58.32.0.0/13", "101.80.0.0/13", "240e::/20"]

CONFIG = """server:
  listen: {listen}
  control-socket: {ctl}
  workers: 1
  tcp-workers: 1
{zones}
datacenters:
  - {{ name: unicom }}
  - {{ name: telecom }}
maps:
  isp:
    nets:
      - {{ file: nets/unicom.txt, datacenters: [unicom, telecom]UNICOM_EXTRA }}
      - {{ file: nets/telecom.txt, datacenters: [telecom, unicom] }}
EXTRA_NETS    default: [telecom, unicom]
MAP_EXTRA
services:
  - name: vpn.lb.example.test
    policy: geo
    map: isp
    ttl: 30
    datacenters:
      unicom: {{ addresses: [192.0.2.1] }}
      telecom: {{ addresses: [198.51.100.1] }}
"""


def config_text(unicom_extra="", extra_nets="", map_extra=""):
    """The launcher config (placeholders kept), with YAML added at three places."""
    def esc(text):
        return text.replace("{", "{{").replace("}", "}}")
    return (CONFIG.replace("UNICOM_EXTRA", esc(unicom_extra))
            .replace("EXTRA_NETS", esc(extra_nets))
            .replace("MAP_EXTRA\n", esc(map_extra)))


def write_nets(workdir, unicom=None, telecom=None):
    nets = workdir / "nets"
    nets.mkdir(exist_ok=True)
    (nets / "unicom.txt").write_text("\n".join(UNICOM if unicom is None else unicom) + "\n")
    (nets / "telecom.txt").write_text("\n".join(TELECOM if telecom is None else telecom) + "\n")


def start(launcher, unicom=None, telecom=None, **conf):
    write_nets(launcher.workdir, unicom, telecom)
    return launcher(zones={ZONE: ZONE_TEXT}, config=config_text(**conf))


def answer(srv, subnet="202.106.5.0", plen=24):
    q = dns.message.make_query(f"vpn.{ZONE}", "A", use_edns=0,
                               options=[dns.edns.ECSOption(subnet, plen, 0)])
    rrset = find_rrset(srv.udp(q).answer, f"vpn.{ZONE}", "A")
    assert rrset is not None
    return [r.address for r in rrset]


def unicom_file(srv):
    return srv.workdir / "nets" / "unicom.txt"


def run_ctl(*args):
    res = subprocess.run([STEERCTL, *args], capture_output=True, text=True, timeout=30)
    assert_no_sanitizer_report(res.stdout + res.stderr)
    return res


def check_config(tmp_path, unicom=None, telecom=None, **conf):
    """--check-config of the test config in a new folder of tmp_path (with its zone and nets
    files). Returns the config path and the CompletedProcess."""
    n = 0
    while (tmp_path / f"check{n}").exists():
        n += 1
    tmp_path = tmp_path / f"check{n}"
    tmp_path.mkdir()
    write_nets(tmp_path, unicom, telecom)
    (tmp_path / "lb.zone").write_text(ZONE_TEXT)
    text = config_text(**conf).format(listen='["127.0.0.1:5353"]', ctl=tmp_path / "ctl.sock",
                                      zones=f"zones:\n  - domain: {ZONE}\n    file: lb.zone\n")
    path = tmp_path / "steer.yaml"
    path.write_text(text)
    return path, run_steerd("-c", str(path), "--check-config", cwd=tmp_path)


# --- the shrink guard --------------------------------------------------------------------------

def test_emptied_file_is_refused_on_reload_and_the_isp_stays_routed(steerd):
    srv = start(steerd)
    assert answer(srv) == [UNICOM_ADDR]
    unicom_file(srv).write_text("")
    res = srv.ctl("reload")
    assert res.returncode == 1, res.stdout + res.stderr
    err = res.stderr
    assert "nets/unicom.txt is empty" in err and "has 10 prefixes" in err, err
    assert "steerctl reload --force" in err and "allow-shrink" in err, err
    assert f"{srv.config_path}:" in err, err
    assert answer(srv) == [UNICOM_ADDR]
    maps = srv.ctl_json("maps")
    assert maps[0]["nets"][0]["ipv4"] == 9, maps


def test_shrink_beyond_max_shrink_refused_then_accepted_with_force(steerd):
    srv = start(steerd)
    unicom_file(srv).write_text("\n".join(UNICOM[7:]) + "\n")  # 4 of 10 left
    res = srv.ctl("reload")
    assert res.returncode == 1, res.stdout + res.stderr
    assert ("nets/unicom.txt has 4 prefixes, the running configuration has 10 (lost 60%, more "
            "than max-shrink 50%)") in res.stderr, res.stderr
    assert answer(srv) == [UNICOM_ADDR]
    res = srv.ctl("reload", "--force")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "warning:" in res.stderr and "accepted (--force)" in res.stderr, res.stderr
    assert answer(srv) == [TELECOM_ADDR]  # 202.106.0.0/16 really left the list
    assert srv.ctl_json("maps")[0]["nets"][0]["ipv4"] == 3


def test_shrink_up_to_max_shrink_is_accepted(steerd):
    srv = start(steerd, map_extra="    max-shrink: 50%\n")
    unicom_file(srv).write_text("\n".join(UNICOM[7:]) + "\n")  # 4 of 10
    assert srv.ctl("reload").returncode == 1
    unicom_file(srv).write_text("\n".join(UNICOM[6:]) + "\n")  # 5 of 10: lost 50%
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr


def test_allow_shrink_accepts_an_empty_file_with_a_warning(steerd):
    srv = start(steerd, unicom_extra=", allow-shrink: true")
    unicom_file(srv).write_text("# nothing today\n")
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "warning:" in res.stderr and "accepted (allow-shrink)" in res.stderr, res.stderr
    assert answer(srv) == [TELECOM_ADDR]
    data = json.loads(srv.ctl("--json", "reload").stdout)["data"]
    assert any("nets/unicom.txt is empty" in w for w in data["warnings"]), data


def test_sighup_obeys_the_guard(steerd):
    srv = start(steerd)
    unicom_file(srv).write_text("")
    srv.send_signal(signal.SIGHUP)
    wait_for(lambda: "reload refused" in srv.log(), 10, what="SIGHUP refusal in the log")
    assert "nets/unicom.txt is empty" in srv.log()
    assert answer(srv) == [UNICOM_ADDR]
    status = srv.ctl_json("status")
    assert status["last_reload"]["ok"] is False, status


def test_empty_file_at_start_is_a_warning(steerd, tmp_path):
    srv = start(steerd, unicom=[])
    assert "nets/unicom.txt is empty" in srv.log(), srv.log()
    assert answer(srv) == [TELECOM_ADDR]
    _, res = check_config(tmp_path, unicom=[])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "warning:" in res.stderr and "nets/unicom.txt is empty" in res.stderr, res.stderr


STATE = "gslb:\n  nets-state-file: nets.state\n"


def test_restart_after_a_failed_download_is_refused_with_the_state_file(steerd):
    """The shrink guard across a restart: the counts of the last accepted load are kept in
    gslb.nets-state-file, so a file emptied while steerd was down stops the start."""
    srv = start(steerd, map_extra=STATE)
    state = (srv.workdir / "nets.state").read_text()
    lines = [l for l in state.splitlines() if not l.startswith("#")]
    assert len(lines) == 2 and lines[0].startswith("10 isp ") \
        and lines[0].endswith("nets/unicom.txt"), state
    assert srv.stop() == 0
    unicom_file(srv).write_text("")
    res = run_steerd("-c", str(srv.config_path), cwd=srv.workdir)
    assert res.returncode != 0, res.stdout + res.stderr
    assert "nets/unicom.txt is empty, the last accepted load (nets-state-file) had 10 " \
        "prefixes: refused" in res.stderr and "'steerd --force'" in res.stderr, res.stderr
    res = run_steerd("-c", str(srv.config_path), "--check-config", cwd=srv.workdir)
    assert res.returncode == 1 and "refused" in res.stderr, res.stderr
    res = run_steerd("-c", str(srv.config_path), "--check-config", "--force", cwd=srv.workdir)
    assert res.returncode == 0 and "accepted (--force)" in res.stderr, res.stderr
    # --force starts it and makes the emptied file the new baseline.
    srv2 = steerd(zones={ZONE: ZONE_TEXT}, config=config_text(map_extra=STATE),
                  args=["--force"])
    assert answer(srv2) == [TELECOM_ADDR]
    assert "0 isp " in (srv2.workdir / "nets.state").read_text()
    # A shrink by reload is recorded too, so the next start compares with what is served.
    write_nets(srv2.workdir)
    assert srv2.ctl("reload").returncode == 0
    assert answer(srv2) == [UNICOM_ADDR]
    assert "10 isp " in (srv2.workdir / "nets.state").read_text()


def test_a_damaged_nets_state_file_stops_the_start(tmp_path):
    path, _ = check_config(tmp_path, map_extra=STATE)
    (path.parent / "nets.state").write_text("10 isp\n")
    res = run_steerd("-c", str(path), "--check-config", cwd=path.parent)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "nets.state:1: want 'COUNT MAP PATH' (a damaged nets state file; fix or remove it)" \
        in res.stderr, res.stderr


# --- prefixes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("line,words", [
    ("221.193.0.0/1", ["unicom.txt:4:", "host bits set in '221.193.0.0/1'", "128.0.0.0/1"]),
    ("128.0.0.0/1", ["unicom.txt:4:", "128.0.0.0/1 is shorter than map isp's minimum /8",
                     "allow-short-prefixes: true"]),
    ("0.0.0.0/0", ["unicom.txt:4:", "0.0.0.0/0 is shorter"]),
    ("2400::/8", ["unicom.txt:4:", "2400::/8 is shorter than map isp's minimum /16 for IPv6"]),
    ("202.106.5.7/24", ["unicom.txt:4:", "host bits set", "202.106.5.0/24"]),
])
def test_bad_prefix_is_refused_at_start_and_on_reload(steerd, tmp_path, line, words):
    bad = UNICOM[:3] + [line] + UNICOM[4:]
    _, res = check_config(tmp_path, unicom=bad)
    assert res.returncode == 1, res.stdout + res.stderr
    for w in words:
        assert w in res.stderr, res.stderr
    srv = start(steerd)
    unicom_file(srv).write_text("\n".join(bad) + "\n")
    res = srv.ctl("reload")
    assert res.returncode == 1, res.stdout + res.stderr
    for w in words:
        assert w in res.stderr, res.stderr
    assert answer(srv) == [UNICOM_ADDR]


def test_short_prefix_allowed_per_entry_and_min_length_per_map(tmp_path):
    bad = UNICOM + ["128.0.0.0/1"]
    _, res = check_config(tmp_path, unicom=bad, unicom_extra=", allow-short-prefixes: true")
    assert res.returncode == 0, res.stdout + res.stderr
    _, res = check_config(tmp_path, unicom=UNICOM + ["10.0.0.0/9"],
                          map_extra="    min-prefix-length: [10, 16]\n")
    assert res.returncode == 1 and "minimum /10" in res.stderr, res.stderr
    _, res = check_config(tmp_path, map_extra="    min-prefix-length: [8, 129]\n")
    assert res.returncode == 1 and "min-prefix-length" in res.stderr, res.stderr
    _, res = check_config(tmp_path, map_extra="    max-shrink: 120%\n")
    assert res.returncode == 1 and "max-shrink" in res.stderr, res.stderr


def test_inline_cidr_guards_name_the_config_line(tmp_path):
    extra = "      - { cidr: [0.0.0.0/0], datacenters: [unicom] }\n"
    path, res = check_config(tmp_path, extra_nets=extra)
    assert res.returncode == 1, res.stdout + res.stderr
    line = path.read_text().splitlines().index(extra.rstrip("\n")) + 1
    assert f"{path}:{line}: inline cidr 0.0.0.0/0 is shorter" in res.stderr, res.stderr


# --- duplicates ---------------------------------------------------------------------------------

def test_conflicting_duplicate_across_files_names_both_places(steerd, tmp_path):
    telecom = TELECOM + ["202.106.5.0/24"]
    unicom = UNICOM + ["202.106.5.0/24"]
    _, res = check_config(tmp_path, unicom=unicom, telecom=telecom)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "telecom.txt:4:" in res.stderr and "unicom.txt:12" in res.stderr, res.stderr
    assert "different datacenter list" in res.stderr, res.stderr
    srv = start(steerd)
    unicom_file(srv).write_text("\n".join(unicom) + "\n")
    (srv.workdir / "nets" / "telecom.txt").write_text("\n".join(telecom) + "\n")
    res = srv.ctl("reload")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "telecom.txt:4:" in res.stderr and "unicom.txt:12" in res.stderr, res.stderr
    assert answer(srv) == [UNICOM_ADDR]


def test_same_list_duplicate_is_a_warning_in_reload_and_check_config(steerd, tmp_path):
    extra = "      - { cidr: [221.192.0.0/16], datacenters: [unicom, telecom] }\n"
    path, res = check_config(tmp_path, extra_nets=extra)
    assert res.returncode == 0, res.stdout + res.stderr
    line = path.read_text().splitlines().index(extra.rstrip("\n")) + 1
    want = f"{path}:{line}: map isp: 221.192.0.0/16 is also at"
    assert "warning: " + want in res.stderr and "unicom.txt:4" in res.stderr, res.stderr
    srv = start(steerd)
    srv.config_path.write_text(srv.config_path.read_text().replace(
        "    default:", extra + "    default:"))
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "warning: " in res.stderr and "221.192.0.0/16 is also at" in res.stderr, res.stderr
    logged = [l for l in srv.log().splitlines()
              if "reload: " in l and "221.192.0.0/16 is also at" in l]
    assert len(logged) == 1, srv.log()  # logged once


def test_same_prefix_in_two_maps_is_fine(tmp_path):
    two = ("  other:\n    nets:\n"
           "      - { cidr: [202.106.0.0/17], datacenters: [telecom] }\n")
    _, res = check_config(tmp_path, map_extra=two)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "warning" not in res.stderr, res.stderr


# --- steerctl maps and explain ------------------------------------------------------------------

def test_maps_lists_files_with_counts_and_load_time(steerd):
    srv = start(steerd, extra_nets="      - { cidr: [\"2001:db8::/32\", 10.0.0.0/8],"
                                   " datacenters: [unicom] }\n")
    maps = srv.ctl_json("maps")
    assert len(maps) == 1 and maps[0]["name"] == "isp", maps
    m = maps[0]
    assert m["min_prefix_length"] == [8, 16] and m["max_shrink_percent"] == 50, m
    files = [(e["file"].rsplit("/", 1)[-1] if e["file"] else None, e["ipv4"], e["ipv6"])
             for e in m["nets"]]
    assert files == [("unicom.txt", 9, 1), ("telecom.txt", 2, 1), (None, 1, 1)], m
    assert all(e["loaded_at"] > 0 and e["line"] > 0 for e in m["nets"]), m
    res = srv.ctl("maps")
    assert res.returncode == 0, res.stderr
    assert "map isp: min-prefix-length /8 /16, max-shrink 50%" in res.stdout, res.stdout
    row = [l for l in res.stdout.splitlines() if "unicom.txt" in l]
    assert row and row[0].split()[2:4] == ["9", "1"], res.stdout
    assert "(inline cidr)" in res.stdout, res.stdout


def test_explain_names_the_file_and_line_even_in_a_merged_block(steerd):
    srv = start(steerd)
    name = f"vpn.{ZONE}"
    text = srv.ctl_json("explain", name, "127.0.0.1", "202.106.200.0/24")["text"]
    # The tree merged the two /17s into one /16 block, explain still names the line.
    assert "block 202.106.0.0/16" in text, text
    assert "decided by: nets " in text and "unicom.txt:3: 202.106.128.0/17" in text, text
    text = srv.ctl_json("explain", name, "127.0.0.1", "202.106.5.0/24")["text"]
    assert "unicom.txt:2: 202.106.0.0/17" in text, text
    # A source wider than the lines: the tree answers its first address, so does explain.
    text = srv.ctl_json("explain", name, "127.0.0.1", "202.106.0.0/15")["text"]
    assert "unicom.txt:2: 202.106.0.0/17" in text, text
    text = srv.ctl_json("explain", name, "127.0.0.1", "203.0.113.0/24")["text"]
    assert "decided by: the map default" in text, text
    res = run_ctl("explain", "--config", str(srv.config_path), name, "127.0.0.1",
                  "2408:8000:1::/48")
    assert res.returncode == 0, res.stderr
    assert "unicom.txt:9: 2408:8000::/20" in res.stdout, res.stdout
