"""IXFR out (RFC 1995) from the journal of reload differences (zones.ixfr-history).

Steer is the primary; each reload that raises the serial adds one change to the history:
- `kdig IXFR=<old serial>` gets exactly the difference sequence (SOA new, [SOA old,
  deleted..., SOA next, added...]..., SOA new), over TCP and, when it fits, over UDP;
- dnspython applying that IXFR to the old version ends with the new one, also after random
  histories of additions, deletions and TTL changes;
- an unknown serial gets the whole zone (AXFR-style), a serial that went back clears the
  history, ixfr-history 0 keeps none;
- a real knotd secondary of Steer transfers by IXFR after a reload (its log says so) and ends
  with the same zone as Steer (compared by AXFR from both);
- the history is kept in <server.storage>/<zone>.journal: after a restart it is read back when
  it ends at the loaded serial (knotd's IXFR across the restart gets the difference), else it
  is not used and the next change replaces it; a corrupt file is ignored, a storage folder
  that cannot be written leaves the history in memory; a daemon removes only a file it wrote
  itself (a zone without history leaves any file alone), and quick mode keeps no file;
- a Steer secondary keeps a history of the versions it received, so a knotd behind it
  transfers by IXFR from it, also after the secondary restarted.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import dns.message
import dns.query
import dns.rdatatype
import dns.xfr
import dns.zone
import pytest

from conftest import STEERD, assert_no_sanitizer_report, free_port, wait_for

KDIG = shutil.which("kdig") or "/usr/bin/kdig"
KNOTD = shutil.which("knotd") or "/usr/sbin/knotd"
KNOTC = shutil.which("knotc") or "/usr/sbin/knotc"

CONFIG = """server:
  listen: {listen}
  control-socket: {ctl}
  storage: {dir}/storage
  workers: 1
  tcp-workers: 1
zones:
  - domain: ixfr.test
    file: {dir}/ixfr.test.zone
    xfr-allow: [127.0.0.1, "::1"]
  - domain: none.test
    file: {dir}/none.test.zone
    xfr-allow: [127.0.0.1]
    ixfr-history: 0
"""


def zone_text(serial: int, hosts: dict[str, str], extra: str = "") -> str:
    body = "".join(f"{name} A {addr}\n" for name, addr in sorted(hosts.items()))
    return (f"$ORIGIN ixfr.test.\n$TTL 300\n@ SOA ns hostmaster {serial} 3600 900 604800 300\n"
            f"@ NS ns\nns A 192.0.2.1\n{body}{extra}")


BASE = {f"h{i}": f"198.51.100.{i}" for i in range(40)}


def v1():
    return zone_text(1, BASE)


def v2():
    hosts = dict(BASE, h3="203.0.113.3", new1="203.0.113.100")
    del hosts["h7"]
    return zone_text(2, hosts)


def v3():
    hosts = dict(BASE, h3="203.0.113.3", new1="203.0.113.100", new2="203.0.113.101")
    del hosts["h7"]
    return zone_text(3, hosts, 'txt 60 TXT "third version"\n')


def v4():
    """v3 and 4,000 more hosts: a change that takes several TCP messages."""
    hosts = dict(BASE, h3="203.0.113.3", new1="203.0.113.100", new2="203.0.113.101")
    del hosts["h7"]
    hosts.update({f"bulk{i}": f"10.4.{i >> 8}.{i & 255}" for i in range(4000)})
    return zone_text(4, hosts, 'txt 60 TXT "third version"\n')


def write_zone(path: Path, text: str):
    """Write the zone and push its mtime forward, so a reload within the same second sees it."""
    old = path.stat().st_mtime if path.exists() else time.time()
    path.write_text(text)
    os.utime(path, (old + 2, old + 2))


def reload(srv):
    out = srv.ctl_json("reload")
    assert out.get("ok", True), out


def zone_records(zone) -> list[str]:
    """Every record with its TTL (dnspython's zone equality ignores TTLs)."""
    return sorted(f"{n.to_text().lower()} {ttl} {rd.rdtype} {rd.to_text()}"
                  for n, ttl, rd in zone.iterate_rdatas())


def kdig_ixfr(port: int, serial: int, host: str = "127.0.0.1", udp: bool = False) -> list[str]:
    args = [KDIG, f"@{host}", "-p", str(port), "ixfr.test", f"IXFR={serial}", "+nocomments",
            "+noquestion", "+nostats", "+nohead"]
    if udp:
        args.append("+notcp")
    out = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return [" ".join(line.split()) for line in out.stdout.splitlines()
            if line.strip() and not line.startswith(";")]


def soa(serial: int) -> str:
    return f"ixfr.test. 300 IN SOA ns.ixfr.test. hostmaster.ixfr.test. {serial} 3600 900 604800 300"


def a(name: str, addr: str, ttl: int = 300) -> str:
    return f"{name}.ixfr.test. {ttl} IN A {addr}"


DIFF_1_2 = [soa(1), a("h3", "198.51.100.3"), a("h7", "198.51.100.7"),
            soa(2), a("h3", "203.0.113.3"), a("new1", "203.0.113.100")]
DIFF_2_3 = [soa(2), soa(3), a("new2", "203.0.113.101"),
            'txt.ixfr.test. 60 IN TXT "third version"']


def assert_sequence(got: list[str], want_changes: list[list[str]], current: int):
    assert got[0] == soa(current) and got[-1] == soa(current), got
    body = got[1:-1]
    pos = 0
    for change in want_changes:
        # the SOAs frame each part in order; the records inside a part come in any order
        old_soa, new_soa = change[0], next(x for x in change[1:] if " SOA " in x)
        split = change.index(new_soa)
        dels, adds = change[1:split], change[split + 1:]
        assert body[pos] == old_soa, body
        assert sorted(body[pos + 1:pos + 1 + len(dels)]) == sorted(dels), body
        pos += 1 + len(dels)
        assert body[pos] == new_soa, body
        assert sorted(body[pos + 1:pos + 1 + len(adds)]) == sorted(adds), body
        pos += 1 + len(adds)
    assert pos == len(body), body


@pytest.fixture
def primary(steerd, tmp_path):
    (tmp_path / "ixfr.test.zone").write_text(v1())
    (tmp_path / "none.test.zone").write_text(
        "$ORIGIN none.test.\n@ 300 SOA ns h 1 2 3 4 5\n@ 300 NS ns\nns 300 A 192.0.2.1\n")
    srv = steerd(config=CONFIG, listen=["127.0.0.1", "::1"], ready_zone="ixfr.test")
    srv.zone_file = tmp_path / "ixfr.test.zone"
    return srv


def port_for(srv, host):
    return next(p for h, p in srv.listen if h == host)


def test_ixfr_differences_with_kdig(primary):
    port = port_for(primary, "127.0.0.1")
    write_zone(primary.zone_file, v2())
    reload(primary)
    assert_sequence(kdig_ixfr(port, 1), [DIFF_1_2], 2)
    write_zone(primary.zone_file, v3())
    reload(primary)
    for host in ("127.0.0.1", "::1"):
        assert_sequence(kdig_ixfr(port_for(primary, host), 1, host), [DIFF_1_2, DIFF_2_3], 3)
        assert_sequence(kdig_ixfr(port_for(primary, host), 2, host), [DIFF_2_3], 3)
        # small enough for one UDP message
        assert_sequence(kdig_ixfr(port_for(primary, host), 2, host, udp=True), [DIFF_2_3], 3)
        assert kdig_ixfr(port_for(primary, host), 3, host) == [soa(3)]
        assert kdig_ixfr(port_for(primary, host), 3, host, udp=True) == [soa(3)]
    # Seven incremental answers; the up-to-date clients' SOAs are no transfer.
    stats = primary.ctl_json("stats")
    assert (stats["ixfr"], stats["axfr"]) == (7, 0), stats


def test_ixfr_applied_by_dnspython_gives_new_version(primary, tmp_path):
    port = port_for(primary, "127.0.0.1")
    for text in (v2(), v3(), v4()):
        write_zone(primary.zone_file, text)
        reload(primary)
    for start in (v1(), v3()):
        zone = dns.zone.from_text(start, "ixfr.test.", relativize=False)
        query, _ = dns.xfr.make_query(zone)
        dns.query.inbound_xfr("127.0.0.1", zone, query, port=port, timeout=10, lifetime=30)
        assert zone_records(zone) == zone_records(
            dns.zone.from_text(v4(), "ixfr.test.", relativize=False))


def test_unknown_serial_gets_whole_zone(primary):
    port = port_for(primary, "127.0.0.1")
    write_zone(primary.zone_file, v2())
    reload(primary)
    lines = kdig_ixfr(port, 0)  # older than ours, not in the history
    # AXFR-style: SOA, every record, SOA (RFC 1995 4): SOA, NS, ns A and 40 hosts
    records = 3 + len(BASE)
    assert lines[0] == soa(2) and lines[-1] == soa(2)
    assert len(lines) == records + 1, lines
    # over UDP the SOA alone tells the client to use TCP
    assert kdig_ixfr(port, 0, udp=True) == [soa(2)]
    # a client newer than us gets our SOA alone
    assert kdig_ixfr(port, 77) == [soa(2)]
    stats = primary.ctl_json("stats")
    assert (stats["ixfr"], stats["axfr"]) == (0, 1), stats


def test_serial_going_back_clears_history(primary):
    port = port_for(primary, "127.0.0.1")
    write_zone(primary.zone_file, v2())
    reload(primary)
    assert len(kdig_ixfr(port, 1)) == 2 + len(DIFF_1_2)
    write_zone(primary.zone_file, v1())  # serial 1 again: not greater than 2 (RFC 1982)
    reload(primary)
    lines = kdig_ixfr(port, 2)  # newer than ours: our SOA alone
    assert lines == [soa(1)]
    write_zone(primary.zone_file, v2())
    reload(primary)
    assert_sequence(kdig_ixfr(port, 1), [DIFF_1_2], 2)


def test_history_off_is_axfr_only(primary, tmp_path):
    path = tmp_path / "none.test.zone"
    write_zone(path, "$ORIGIN none.test.\n@ 300 SOA ns h 2 2 3 4 5\n@ 300 NS ns\n"
               "ns 300 A 192.0.2.1\nx 300 A 192.0.2.2\n")
    reload(primary)
    port = port_for(primary, "127.0.0.1")
    out = subprocess.run([KDIG, "@127.0.0.1", "-p", str(port), "none.test", "IXFR=1",
                          "+nocomments", "+nostats"], capture_output=True, text=True, timeout=30)
    lines = [x.split() for x in out.stdout.splitlines() if x.strip() and not x.startswith(";")]
    # the whole zone (4 records and the closing SOA), not a difference
    assert [x[3] for x in lines] == ["SOA", "NS", "A", "A", "SOA"], lines


# ---- a real Knot secondary ----------------------------------------------------------------

class KnotSecondary:
    """knotd as a secondary of @primary_port for ixfr.test., refreshed through knotc."""

    def __init__(self, workdir: Path, primary_port: int):
        self.workdir = workdir
        self.port = free_port()
        for sub in ("run", "db", "zones"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)
        self.sock = workdir / "run" / "knot.sock"
        conf = workdir / "knot.conf"
        conf.write_text(f"""server:
    rundir: "{workdir / 'run'}"
    listen: 127.0.0.1@{self.port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: debug
database:
    storage: "{workdir / 'db'}"
remote:
  - id: steer
    address: 127.0.0.1@{primary_port}
acl:
  - id: compare
    address: 127.0.0.1
    action: transfer
template:
  - id: default
    storage: "{workdir / 'zones'}"
    zonefile-sync: -1
    zonefile-load: none
    journal-content: changes
zone:
  - domain: ixfr.test.
    master: steer
    acl: compare
""")
        self.log_path = workdir / "knotd.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([KNOTD, "-c", str(conf)], stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def serial(self) -> int | None:
        try:
            r = dns.query.udp(dns.message.make_query("ixfr.test.", "SOA"), "127.0.0.1",
                              port=self.port, timeout=0.5)
        except Exception:  # noqa: BLE001 - not up yet
            return None
        return r.answer[0][0].serial if r.answer else None

    def refresh(self):
        subprocess.run([KNOTC, "-s", str(self.sock), "zone-refresh", "ixfr.test."],
                       capture_output=True, text=True, timeout=30, check=True)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def axfr_records(port: int) -> list[str]:
    """The zone's records by AXFR, the closing SOA left out."""
    out = []
    for msg in dns.query.xfr("127.0.0.1", "ixfr.test.", port=port, timeout=10, lifetime=30,
                             relativize=False):
        for rrset in msg.answer:
            out += [f"{rrset.name.to_text().lower()} {rrset.ttl} {rrset.rdtype} {rd.to_text()}"
                    for rd in rrset]
    assert out and out[0] == out[-1] and " 6 " in out[0]
    return sorted(out[:-1])


def test_knot_secondary_transfers_by_ixfr(primary, tmp_path):
    port = port_for(primary, "127.0.0.1")
    knot = KnotSecondary(tmp_path / "knot", port)
    try:
        wait_for(lambda: knot.serial() == 1, 20, what="knotd's first transfer (AXFR)")
        assert "AXFR, incoming" in knot.log_text()
        for serial, text in ((2, v2()), (3, v3()), (4, v4())):
            write_zone(primary.zone_file, text)
            reload(primary)
            knot.refresh()
            wait_for(lambda s=serial: knot.serial() == s, 20, what=f"knotd at serial {serial}")
            assert axfr_records(knot.port) == axfr_records(port)
        log = knot.log_text()
        ixfr = [line for line in log.splitlines() if "IXFR, incoming" in line]
        assert any("finished" in line for line in ixfr), log[-3000:]
        assert not re.search(r"fallback to AXFR|AXFR-style", log), log[-3000:]
        finished = re.findall(r"IXFR, incoming.*finished.* (\d+) messages", log)
        assert len(finished) == 3, log[-3000:]
        assert int(finished[-1]) > 1, "the last change took several messages"
    finally:
        knot.stop()


def random_versions(seed: int, count: int) -> list[str]:
    """@count zone texts, serials 10, 11, ...: each adds, deletes and changes random records
    of several types (TTL changes included) at existing and new names."""
    import random
    rng = random.Random(seed)
    records: set[tuple[str, int, str, str]] = set()
    for i in range(60):
        records.add((f"n{i}", 300, "A", f"192.0.2.{i}"))
    out = []
    for v in range(count):
        for _ in range(rng.randint(1, 25)):
            op = rng.random()
            if op < 0.4 and records:
                records.discard(rng.choice(sorted(records)))
            elif op < 0.6 and records:
                name, ttl, rtype, rdata = rng.choice(sorted(records))
                same = {r for r in records if r[0] == name and r[2] == rtype}
                new_ttl = rng.choice([60, 300, 3600])
                records -= same
                records |= {(name, new_ttl, rtype, r[3]) for r in same}
            else:
                name = f"n{rng.randint(0, 90)}" + rng.choice(["", ".sub", ".a.b"])
                rtype = rng.choice(["A", "AAAA", "TXT", "MX", "SRV"])
                rdata = {"A": f"198.51.100.{rng.randint(0, 255)}",
                         "AAAA": f"2001:db8::{rng.randint(0, 65535):x}",
                         "TXT": f'"t{rng.randint(0, 10**6)}"',
                         "MX": f"{rng.randint(0, 50)} mx{rng.randint(0, 3)}",
                         "SRV": f"1 2 {rng.randint(1, 65535)} srv"}[rtype]
                ttl = next((r[1] for r in records if r[0] == name and r[2] == rtype), 300)
                records.add((name, ttl, rtype, rdata))
        body = "".join(f"{n} {t} {rt} {rd}\n" for n, t, rt, rd in sorted(records))
        out.append(f"$ORIGIN ixfr.test.\n$TTL 300\n@ SOA ns hostmaster {10 + v} 3600 900 "
                   f"604800 300\n@ NS ns\nns A 192.0.2.1\n{body}")
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_histories_apply_to_the_current_zone(primary, seed):
    """From every version in the history, applying Steer's IXFR gives the current zone."""
    port = port_for(primary, "127.0.0.1")
    versions = random_versions(seed, 8)
    for text in versions:
        write_zone(primary.zone_file, text)
        reload(primary)
    want = zone_records(dns.zone.from_text(versions[-1], "ixfr.test.", relativize=False))
    for text in [v1()] + versions[:-1]:
        zone = dns.zone.from_text(text, "ixfr.test.", relativize=False)
        serial = zone.get_soa().serial
        query, _ = dns.xfr.make_query(zone)
        dns.query.inbound_xfr("127.0.0.1", zone, query, port=port, timeout=10, lifetime=30)
        assert zone_records(zone) == want, f"from serial {serial}"
        # incremental indeed: the difference starts with the client's SOA
        assert kdig_ixfr(port, serial)[1] == soa(serial)


# ---- the history on disk ------------------------------------------------------------------

def restart(srv):
    """Stop steerd cleanly and start it again on the same ports and configuration."""
    assert srv.stop() == 0, srv.log()[-3000:]
    assert not srv.problems(), srv.problems()
    srv.returncode = None
    srv.start()


def whole_zone(lines: list[str], serial: int) -> bool:
    """An AXFR-style answer: our SOA, the records, our SOA; no old SOA inside."""
    return (lines[0] == soa(serial) and lines[-1] == soa(serial)
            and all(" SOA " not in x for x in lines[1:-1]))


def test_history_survives_restart(primary, tmp_path):
    port = port_for(primary, "127.0.0.1")
    journal = tmp_path / "storage" / "ixfr.test.journal"
    assert not journal.exists()
    write_zone(primary.zone_file, v2())
    reload(primary)
    assert journal.exists()  # the storage folder was created for it
    write_zone(primary.zone_file, v3())
    reload(primary)
    assert journal.read_bytes()[:8] == b"STEERJNL"
    restart(primary)
    assert "IXFR history of 2 changes (serials 1 to 3) read from" in primary.log()
    assert_sequence(kdig_ixfr(port, 1), [DIFF_1_2, DIFF_2_3], 3)
    assert_sequence(kdig_ixfr(port, 2, udp=True), [DIFF_2_3], 3)
    # the restored history goes on growing
    write_zone(primary.zone_file, v4())
    reload(primary)
    restart(primary)
    lines = kdig_ixfr(port, 1)
    assert lines[1] == soa(1) and lines[-1] == soa(4) and soa(3) in lines, lines[:8]


def test_history_not_ending_at_the_zone_is_discarded(primary, tmp_path):
    """Not used, not deleted: the next change replaces the file."""
    port = port_for(primary, "127.0.0.1")
    journal = tmp_path / "storage" / "ixfr.test.journal"
    write_zone(primary.zone_file, v2())
    reload(primary)
    assert primary.stop() == 0
    write_zone(primary.zone_file, v3())  # changed while steerd was down
    old = journal.read_bytes()
    primary.returncode = None
    primary.start()
    assert re.search(r"journal .* discarded: it ends at serial 2, the zone is at 3",
                     primary.log())
    assert journal.read_bytes() == old
    assert whole_zone(kdig_ixfr(port, 2), 3)
    write_zone(primary.zone_file, v4())
    reload(primary)
    assert journal.read_bytes() != old
    restart(primary)
    assert "IXFR history of 1 changes (serials 3 to 4) read from" in primary.log()
    assert whole_zone(kdig_ixfr(port, 2), 4)


def test_history_of_other_records_with_the_same_serial_is_discarded(primary, tmp_path):
    """The zone edited while steerd was down without raising its serial: the history ends at
    the right serial but not at these records, and is not resumed."""
    port = port_for(primary, "127.0.0.1")
    write_zone(primary.zone_file, v2())
    reload(primary)
    assert primary.stop() == 0
    write_zone(primary.zone_file, v2().replace("203.0.113.100", "203.0.113.200"))
    primary.returncode = None
    primary.start()
    assert "discarded: the zone's records differ from the version it ends at" in primary.log()
    assert whole_zone(kdig_ixfr(port, 1), 2)


def test_corrupt_history_is_ignored(primary, tmp_path):
    port = port_for(primary, "127.0.0.1")
    journal = tmp_path / "storage" / "ixfr.test.journal"
    write_zone(primary.zone_file, v2())
    reload(primary)
    assert primary.stop() == 0
    good = journal.read_bytes()
    for damaged, what in ((good[:len(good) - 7], "ends early"),
                          (good[:40] + bytes([good[40] ^ 0x20]) + good[41:], "checksum"),
                          (b"garbage\n", "not a journal file")):
        journal.write_bytes(damaged)
        primary.returncode = None
        primary.start()
        log = primary.log()
        assert "journal" in log and "ignored" in log and what in log, log[-2000:]
        assert whole_zone(kdig_ixfr(port, 1), 2)
        assert primary.stop() == 0
    primary.returncode = None
    primary.start()  # the daemon's teardown check wants it running


def test_unwritable_storage_keeps_history_in_memory(steerd, tmp_path):
    (tmp_path / "ixfr.test.zone").write_text(v1())
    (tmp_path / "none.test.zone").write_text(
        "$ORIGIN none.test.\n@ 300 SOA ns h 1 2 3 4 5\n@ 300 NS ns\nns 300 A 192.0.2.1\n")
    (tmp_path / "afile").write_text("not a folder\n")
    config = CONFIG.replace("storage: {dir}/storage", "storage: {dir}/afile/storage")
    srv = steerd(config=config, ready_zone="ixfr.test")
    zone_file = tmp_path / "ixfr.test.zone"
    for text in (v2(), v3()):
        write_zone(zone_file, text)
        reload(srv)
    log = srv.log()
    assert log.count("cannot write journal") == 1, log[-2000:]
    assert_sequence(kdig_ixfr(srv.port, 1), [DIFF_1_2, DIFF_2_3], 3)


def test_zone_without_history_leaves_files_alone(steerd, tmp_path):
    """A zone without history neither reads nor removes a file found in the storage folder
    (another daemon may own it); a file this process wrote goes when its history ends."""
    storage = tmp_path / "storage"
    storage.mkdir()
    foreign = storage / "none.test.journal"
    foreign.write_bytes(b"STEERJNL not ours")
    (tmp_path / "ixfr.test.zone").write_text(v1())
    (tmp_path / "none.test.zone").write_text(
        "$ORIGIN none.test.\n@ 300 SOA ns h 1 2 3 4 5\n@ 300 NS ns\nns 300 A 192.0.2.1\n")
    srv = steerd(config=CONFIG, ready_zone="ixfr.test")
    write_zone(tmp_path / "none.test.zone", "$ORIGIN none.test.\n@ 300 SOA ns h 2 2 3 4 5\n"
               "@ 300 NS ns\nns 300 A 192.0.2.1\n")
    reload(srv)
    assert foreign.read_bytes() == b"STEERJNL not ours"
    assert "none.test" not in "".join(x for x in srv.log().splitlines() if "journal" in x)
    # ixfr-history going to 0 on reload removes the file this process wrote
    write_zone(tmp_path / "ixfr.test.zone", v2())
    reload(srv)
    assert (storage / "ixfr.test.journal").exists()
    srv.config_path.write_text(srv.config_path.read_text().replace(
        '    xfr-allow: [127.0.0.1, "::1"]\n', '    xfr-allow: [127.0.0.1, "::1"]\n'
        '    ixfr-history: 0\n'))
    reload(srv)
    assert not (storage / "ixfr.test.journal").exists()
    assert "removed journal" in srv.log()
    assert foreign.read_bytes() == b"STEERJNL not ours"


def test_history_read_back_then_ended_leaves_the_file(primary, tmp_path):
    """A file this process only read (written before its start) is not its own: when the
    history ends it stays, and is not resumed while it does not lead to the zone."""
    port = port_for(primary, "127.0.0.1")
    journal = tmp_path / "storage" / "ixfr.test.journal"
    write_zone(primary.zone_file, v2())
    reload(primary)
    restart(primary)
    assert "IXFR history of 1 changes (serials 1 to 2) read from" in primary.log()
    kept = journal.read_bytes()
    write_zone(primary.zone_file, v1())  # the serial goes back: the history ends
    reload(primary)
    assert journal.read_bytes() == kept
    assert re.search(r"IXFR history ended; journal .* not written by this process, is left "
                     r"in place", primary.log())
    restart(primary)
    assert "discarded: it ends at serial 2, the zone is at 1" in primary.log()
    assert whole_zone(kdig_ixfr(port, 1), 1)


def test_quick_mode_keeps_no_journal(tmp_path):
    """steerd --zone on a machine with a production daemon: quick mode has no storage folder,
    so that daemon's journal of the same zone stays as it is and nothing is written. The
    machine's /var/lib/steer is replaced by an empty folder of the test (a mount namespace)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    var = tmp_path / "var-lib-steer"
    var.mkdir()
    theirs = var / "ixfr.test.journal"
    theirs.write_bytes(b"STEERJNL the production daemon's")
    zone = tmp_path / "ixfr.test.zone"
    zone.write_text(v1())
    port = free_port()
    script = (f"mkdir -p /var/lib/steer && mount --bind {var} /var/lib/steer && "
              f"exec {STEERD} --listen 127.0.0.1:{port} --zone ixfr.test={zone} "
              f"--control-socket {tmp_path / 'ctl.sock'}")
    log = open(tmp_path / "steerd.log", "wb")
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                             script], stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        wait_for(lambda: proc.poll() is not None or kdig_soa(port) == 1, 20,
                 what="quick-mode steerd answering")
        assert proc.poll() is None, (tmp_path / "steerd.log").read_text()
        write_zone(zone, v2())
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: kdig_soa(port) == 2, 20, what="serial 2 after SIGHUP")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        log.close()
    out = (tmp_path / "steerd.log").read_text()
    assert_no_sanitizer_report(out)
    assert "journal" not in out, out
    assert sorted(x.name for x in var.iterdir()) == ["ixfr.test.journal"]
    assert theirs.read_bytes() == b"STEERJNL the production daemon's"


def kdig_soa(port: int) -> int | None:
    """The serial steerd on @port answers for ixfr.test, None without an answer."""
    out = subprocess.run([KDIG, "@127.0.0.1", "-p", str(port), "+short", "+time=1",
                          "+retry=0", "ixfr.test", "SOA"], capture_output=True, text=True,
                         timeout=10).stdout.split()
    return int(out[2]) if len(out) >= 3 and out[2].isdigit() else None


def ixfr_finished(log: str) -> list[str]:
    return re.findall(r"IXFR, incoming.*finished.* (\d+) messages", log)


def test_knot_secondary_ixfr_across_a_restart(primary, tmp_path):
    """knotd at serial 1; Steer changes to 2 and restarts before knotd asks: knotd's IXFR
    after the restart gets the difference from the history read back from disk."""
    port = port_for(primary, "127.0.0.1")
    knot = KnotSecondary(tmp_path / "knot", port)
    try:
        wait_for(lambda: knot.serial() == 1, 20, what="knotd's first transfer (AXFR)")
        write_zone(primary.zone_file, v2())
        reload(primary)
        restart(primary)
        knot.refresh()
        wait_for(lambda: knot.serial() == 2, 20, what="knotd at serial 2")
        assert axfr_records(knot.port) == axfr_records(port)
        log = knot.log_text()
        assert len(ixfr_finished(log)) == 1, log[-3000:]
        assert not re.search(r"fallback to AXFR|AXFR-style", log), log[-3000:]
    finally:
        knot.stop()


SECONDARY_CONFIG = """server:
  listen: {listen}
  control-socket: {ctl}
  storage: {dir}/sec-storage
  workers: 1
  tcp-workers: 1
zones:
  - domain: ixfr.test
    primaries: ["127.0.0.1@PRIMARY_PORT"]
    xfr-allow: [127.0.0.1]
    refresh-min: 1s
"""


def sec_serial_of(srv, name: str) -> int | None:
    """The serial of secondary zone @name as `steerctl zones` reports it."""
    [z] = [z for z in srv.ctl_json("zones") if z["name"].rstrip(".") == name]
    return (z.get("secondary") or {}).get("serial")


def test_chain_steer_secondary_gives_knot_ixfr(primary, steerd, tmp_path):
    """Steer primary -> Steer secondary -> knotd: knotd transfers by IXFR from the secondary's
    history of the versions it received, and again after the secondary restarted."""
    pport = port_for(primary, "127.0.0.1")
    sec = steerd(config=SECONDARY_CONFIG.replace("PRIMARY_PORT", str(pport)),
                 ready_zone="ixfr.test")
    knot = KnotSecondary(tmp_path / "knot", sec.port)
    try:
        wait_for(lambda: knot.serial() == 1, 20, what="knotd's first transfer from Steer")
        for serial, text in ((2, v2()), (3, v3())):
            write_zone(primary.zone_file, text)
            reload(primary)
            sec.ctl("zone-refresh", "ixfr.test")
            wait_for(lambda s=serial: sec_serial_of(sec, "ixfr.test") == s, 20,
                     what=f"secondary at {serial}")
            knot.refresh()
            wait_for(lambda s=serial: knot.serial() == s, 20, what=f"knotd at {serial}")
            assert axfr_records(knot.port) == axfr_records(pport)
        assert_sequence(kdig_ixfr(sec.port, 1), [DIFF_1_2, DIFF_2_3], 3)
        journal = tmp_path / "sec-storage" / "ixfr.test.journal"
        assert journal.exists()
        restart(sec)
        assert "IXFR history of 2 changes (serials 1 to 3) read from" in sec.log()
        assert_sequence(kdig_ixfr(sec.port, 2), [DIFF_2_3], 3)
        write_zone(primary.zone_file, v4())
        reload(primary)
        sec.ctl("zone-refresh", "ixfr.test")
        wait_for(lambda: sec_serial_of(sec, "ixfr.test") == 4, 20, what="secondary at 4")
        knot.refresh()
        wait_for(lambda: knot.serial() == 4, 20, what="knotd at 4")
        assert axfr_records(knot.port) == axfr_records(pport)
        log = knot.log_text()
        assert len(ixfr_finished(log)) == 3, log[-3000:]
        assert not re.search(r"fallback to AXFR|AXFR-style", log), log[-3000:]
    finally:
        knot.stop()


def test_primary_history_kept_when_a_secondary_zone_updates(steerd, tmp_path):
    """A new version of a secondary zone republishes the zone set: the primary zones of the
    same daemon keep their history (in memory and on disk)."""
    up_dir = tmp_path / "up"
    up_dir.mkdir()
    up_zone = up_dir / "up.test.zone"
    up_zone.write_text("$ORIGIN up.test.\n@ 300 SOA ns h 1 2 3 4 5\n@ 300 NS ns\n"
                       "ns 300 A 192.0.2.1\n")
    upstream = steerd(config="""server:
  listen: {listen}
  control-socket: {ctl}
  storage: UPDIR/storage
  workers: 1
  tcp-workers: 1
zones:
  - domain: up.test
    file: UPFILE
    xfr-allow: [127.0.0.1]
""".replace("UPFILE", str(up_zone)).replace("UPDIR", str(up_dir)), ready_zone="up.test")
    (tmp_path / "ixfr.test.zone").write_text(v1())
    (tmp_path / "none.test.zone").write_text(
        "$ORIGIN none.test.\n@ 300 SOA ns h 1 2 3 4 5\n@ 300 NS ns\nns 300 A 192.0.2.1\n")
    config = CONFIG + f"""  - domain: up.test
    primaries: ["127.0.0.1@{upstream.port}"]
    refresh-min: 1s
"""
    srv = steerd(config=config, ready_zone="ixfr.test")
    wait_for(lambda: sec_serial_of(srv, "up.test") == 1, 20, what="up.test transferred")
    write_zone(tmp_path / "ixfr.test.zone", v2())
    reload(srv)
    write_zone(up_zone, "$ORIGIN up.test.\n@ 300 SOA ns h 2 2 3 4 5\n@ 300 NS ns\n"
               "ns 300 A 192.0.2.1\nx 300 A 192.0.2.2\n")
    reload(upstream)
    srv.ctl("zone-refresh", "up.test")
    wait_for(lambda: sec_serial_of(srv, "up.test") == 2, 20, what="up.test at serial 2")
    assert_sequence(kdig_ixfr(srv.port, 1), [DIFF_1_2], 2)
    assert (tmp_path / "storage" / "ixfr.test.journal").exists()


def test_check_config_leaves_journals_alone(tmp_path):
    """--check-config builds the zones as a start would, but neither reads nor removes nor
    writes a journal."""
    storage = tmp_path / "storage"
    storage.mkdir()
    (tmp_path / "ixfr.test.zone").write_text(v1())
    (tmp_path / "none.test.zone").write_text(
        "$ORIGIN none.test.\n@ 300 SOA ns h 1 2 3 4 5\n@ 300 NS ns\nns 300 A 192.0.2.1\n")
    damaged, stale = storage / "ixfr.test.journal", storage / "none.test.journal"
    damaged.write_bytes(b"STEERJNL damaged")
    stale.write_bytes(b"STEERJNL stale")
    conf = tmp_path / "steer.yaml"
    conf.write_text(CONFIG.format(listen='["127.0.0.1:53530"]', ctl=tmp_path / "ctl.sock",
                                  dir=tmp_path))
    out = subprocess.run([STEERD, "-c", str(conf), "--check-config"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "journal" not in out.stdout + out.stderr
    assert damaged.read_bytes() == b"STEERJNL damaged" and stale.exists()
