"""Reload with SIGHUP and `steerctl reload`: new data is served, a broken zone or config is
refused with file:line while the old data keeps serving, only changed zone files are re-read,
and not a single query is lost while reloading."""

import json
import os
import signal
import socket
import threading
import time

import dns.message
import dns.rdatatype
import dns.rcode

from conftest import query, tcp_frame, tcp_read_message, wait_for
from test_steerctl import zone_entry

ZONE = """$ORIGIN {origin}.
$TTL 3600
@       SOA ns1 hostmaster {serial} 7200 3600 1209600 300
        NS  ns1
ns1     A   192.0.2.1
www     A   192.0.2.{last}
{extra}
"""


def zone_text(serial, last=10, extra="", origin="example.test"):
    return ZONE.format(serial=serial, last=last, extra=extra, origin=origin)


def rewrite(path, text):
    """Replace a zone file and move its mtime forward, so that a change is visible even on
    file systems with coarse timestamps."""
    old = os.stat(path)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    future = max(time.time(), old.st_mtime) + 2
    os.utime(path, (future, future))


def www(srv, name="www.example.test"):
    r = srv.udp(query(name, "A"))
    return r.answer[0][0].address if r.answer else dns.rcode.to_text(r.rcode())


def test_sighup_reload(steerd):
    srv = steerd(zones={"example.test": zone_text(1)})
    path = srv.zone_paths["example.test"]
    rewrite(path, zone_text(2, last=20, extra="new A 192.0.2.77"))
    srv.send_signal(signal.SIGHUP)
    wait_for(lambda: srv.serial("example.test") == 2, 10, what="serial 2 after SIGHUP")
    assert www(srv) == "192.0.2.20"
    assert www(srv, "new.example.test") == "192.0.2.77"
    assert srv.serial("example.test", proto="tcp") == 2


def test_steerctl_reload(steerd):
    srv = steerd(zones={"example.test": zone_text(1)})
    path = srv.zone_paths["example.test"]
    for serial in (2, 3, 4):
        rewrite(path, zone_text(serial, last=serial))
        res = srv.ctl("reload")
        assert res.returncode == 0, res.stdout + res.stderr
        # The command returns once the new snapshot is published.
        assert srv.serial("example.test") == serial
        assert www(srv) == f"192.0.2.{serial}"


def test_reload_removes_records(steerd):
    srv = steerd(zones={"example.test": zone_text(1, extra="gone A 192.0.2.5")})
    assert www(srv, "gone.example.test") == "192.0.2.5"
    rewrite(srv.zone_paths["example.test"], zone_text(2))
    assert srv.ctl("reload").returncode == 0
    assert www(srv, "gone.example.test") == "NXDOMAIN"


def test_broken_zone_refused_old_kept(steerd):
    srv = steerd(zones={"example.test": zone_text(1)})
    path = srv.zone_paths["example.test"]
    bad = zone_text(2, extra="broken A 192.0.2.999")
    bad_line = bad.splitlines().index("broken A 192.0.2.999") + 1
    rewrite(path, bad)
    res = srv.ctl("reload")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"{path}:{bad_line}" in res.stdout + res.stderr, res.stdout + res.stderr
    assert srv.serial("example.test") == 1
    assert www(srv) == "192.0.2.10"
    # --json carries the same error.
    res = srv.ctl("reload", json_out=True)
    assert res.returncode == 1
    reply = json.loads(res.stdout)
    assert reply["ok"] is False and f"{path}:{bad_line}" in reply["error"]
    # Fixed: the next reload takes it.
    rewrite(path, zone_text(3, last=30))
    assert srv.ctl("reload").returncode == 0
    assert srv.serial("example.test") == 3 and www(srv) == "192.0.2.30"


def test_broken_zone_sighup_logged(steerd):
    srv = steerd(zones={"example.test": zone_text(1)})
    path = srv.zone_paths["example.test"]
    rewrite(path, zone_text(2) + "bad line with no type\n")
    srv.send_signal(signal.SIGHUP)
    wait_for(lambda: f"{path}:" in srv.log(), 10, what="the error in the log")
    assert srv.alive() and srv.serial("example.test") == 1


def test_semantic_error_refused_on_reload(steerd):
    srv = steerd(zones={"example.test": zone_text(1)})
    path = srv.zone_paths["example.test"]
    rewrite(path, zone_text(2, extra="www CNAME ns1"))  # CNAME next to www's A
    res = srv.ctl("reload")
    assert res.returncode == 1 and "CNAME" in res.stdout + res.stderr
    assert srv.serial("example.test") == 1


def test_deleted_zone_file_refused(steerd):
    srv = steerd(zones={"example.test": zone_text(1)})
    srv.zone_paths["example.test"].unlink()
    res = srv.ctl("reload")
    assert res.returncode == 1 and "example.test.zone" in res.stdout + res.stderr
    assert srv.serial("example.test") == 1


def test_only_changed_zones_reread(steerd):
    srv = steerd(zones={"a.test": zone_text(1, origin="a.test"),
                        "b.test": zone_text(1, origin="b.test")})
    before = srv.ctl_json("zones")
    time.sleep(1.1)  # loaded_at may have one-second resolution
    rewrite(srv.zone_paths["a.test"], zone_text(2, origin="a.test"))
    assert srv.ctl("reload").returncode == 0
    after = srv.ctl_json("zones")
    assert zone_entry(after, "a.test")["serial"] == 2
    assert zone_entry(after, "a.test")["loaded_at"] != zone_entry(before, "a.test")["loaded_at"]
    assert zone_entry(after, "b.test")["loaded_at"] == zone_entry(before, "b.test")["loaded_at"], \
        "an unchanged zone file must not be re-read"
    # Only touching the file (same content, new mtime) counts as a change: it is re-read.
    time.sleep(1.1)
    rewrite(srv.zone_paths["b.test"], srv.zone_paths["b.test"].read_text())
    assert srv.ctl("reload").returncode == 0
    again = srv.ctl_json("zones")
    assert zone_entry(again, "b.test")["loaded_at"] != zone_entry(after, "b.test")["loaded_at"]
    assert zone_entry(again, "a.test")["loaded_at"] == zone_entry(after, "a.test")["loaded_at"]


def big_zone(serial, n=20000):
    lines = [zone_text(serial).rstrip("\n")]
    lines += [f"h{i} A 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i in range(n)]
    return "\n".join(lines) + "\n"


def test_no_query_lost_during_reloads(steerd):
    """Four clients query without pause (each waits for its answer, no retries) while the
    zone is changed and reloaded eight times, alternating SIGHUP and steerctl: every query is
    answered, correctly, within the timeout."""
    srv = steerd(zones={"example.test": big_zone(1)})
    path = srv.zone_paths["example.test"]
    threads, reloads = 4, 8
    failures = []
    stop = threading.Event()
    answered = [0] * threads

    def client(k):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(3.0)
            s.connect((srv.host, srv.port))
            i = 0
            while not stop.is_set() or i < 250:
                n = (k * 5003 + i * 7) % 20000
                i += 1
                q = query(f"h{n}.example.test", "A")
                s.send(q.to_wire())
                try:
                    r = dns.message.from_wire(s.recv(4096))
                except socket.timeout:
                    failures.append(f"h{n}: no answer")
                    continue
                want = f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"
                if r.id != q.id or r.rcode() != dns.rcode.NOERROR or not r.answer \
                        or r.answer[0][0].address != want:
                    failures.append(f"h{n}: {r}")
                answered[k] += 1

    workers = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    try:
        for serial in range(2, 2 + reloads):
            before = sum(answered)
            rewrite(path, big_zone(serial))
            if serial % 2:
                srv.send_signal(signal.SIGHUP)
                wait_for(lambda: srv.serial("example.test") == serial, 20, what="SIGHUP reload")
            else:
                res = srv.ctl("reload")
                assert res.returncode == 0, res.stdout + res.stderr
            # Let the clients make progress on the new snapshot before the next swap.
            wait_for(lambda: sum(answered) > before + 50 or failures, 10, what="progress")
    finally:
        stop.set()
        for w in workers:
            w.join()
    total = sum(answered) + len(failures)
    assert not failures, f"{len(failures)} of {total} queries failed: {failures[:10]}"
    assert srv.serial("example.test") == 1 + reloads


def test_tcp_connection_survives_reload(steerd):
    srv = steerd(zones={"example.test": zone_text(1)})
    with srv.tcp_connect() as s:
        s.sendall(tcp_frame(query("www.example.test").to_wire()))
        assert tcp_read_message(s) is not None
        rewrite(srv.zone_paths["example.test"], zone_text(2, last=22))
        assert srv.ctl("reload").returncode == 0
        s.sendall(tcp_frame(query("www.example.test").to_wire()))
        r = dns.message.from_wire(tcp_read_message(s))
        assert r.answer[0][0].address == "192.0.2.22"


# --- config reload --------------------------------------------------------------------------

CONFIG = """
server:
  listen: {listen}
  control-socket: {ctl}
  workers: %(workers)d
  tcp-workers: 1
zones:
%(zones)s"""


def zones_yaml(dir, names):
    return "".join(f"  - domain: {n}\n    file: {dir}/{n}.zone\n" for n in names)


def test_config_reload_adds_and_removes_zones(steerd, tmp_path):
    for n in ("a.test", "b.test"):
        (tmp_path / f"{n}.zone").write_text(zone_text(1, origin=n))
    config = CONFIG % {"workers": 2, "zones": zones_yaml(tmp_path, ["a.test"])}
    srv = steerd(config=config, ready_zone="a.test")
    assert www(srv, "www.b.test") == "REFUSED"
    text = srv.config_path.read_text().replace(
        zones_yaml(tmp_path, ["a.test"]), zones_yaml(tmp_path, ["b.test"]))
    srv.config_path.write_text(text)
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    assert www(srv, "www.b.test") == "192.0.2.10"
    assert www(srv, "www.a.test") == "REFUSED"


def test_config_reload_broken_config_kept(steerd, tmp_path):
    (tmp_path / "a.test.zone").write_text(zone_text(1, origin="a.test"))
    config = CONFIG % {"workers": 2, "zones": zones_yaml(tmp_path, ["a.test"])}
    srv = steerd(config=config, ready_zone="a.test")
    good = srv.config_path.read_text()
    srv.config_path.write_text(good.replace("  tcp-workers: 1\n",
                                            "  tcp-workers: 1\n  bogus-key: 1\n"))
    res = srv.ctl("reload")
    assert res.returncode == 1
    assert f"{srv.config_path}:" in res.stdout + res.stderr and "bogus-key" in res.stdout + \
        res.stderr
    assert www(srv, "www.a.test") == "192.0.2.10"
    srv.config_path.write_text(good)
    assert srv.ctl("reload").returncode == 0


def test_config_reload_restart_only_setting_reported(steerd, tmp_path):
    (tmp_path / "a.test.zone").write_text(zone_text(1, origin="a.test"))
    config = CONFIG % {"workers": 2, "zones": zones_yaml(tmp_path, ["a.test"])}
    srv = steerd(config=config, ready_zone="a.test")
    srv.config_path.write_text(srv.config_path.read_text().replace("workers: 2", "workers: 3"))
    res = srv.ctl("reload", json_out=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "workers" in json.dumps(json.loads(res.stdout)["data"])
    assert www(srv, "www.a.test") == "192.0.2.10"


def test_reload_reports_what_was_reread(steerd):
    srv = steerd(zones={"a.test": zone_text(1, origin="a.test"),
                        "b.test": zone_text(1, origin="b.test")})
    data = srv.ctl_json("reload")
    assert data["zones_reloaded"] == [] and data["zones_unchanged"] == 2
    rewrite(srv.zone_paths["b.test"], zone_text(2, origin="b.test"))
    data = srv.ctl_json("reload")
    assert data["zones_reloaded"] == ["b.test"] and data["zones_unchanged"] == 1
    assert data["restart_needed"] == []


def test_signal_storm(steerd):
    srv = steerd(zones={"example.test": zone_text(1)})
    path = srv.zone_paths["example.test"]
    for serial in range(2, 22):
        rewrite(path, zone_text(serial))
        srv.send_signal(signal.SIGHUP)
    wait_for(lambda: srv.serial("example.test") == 21, 20, what="the last reload")
    assert srv.alive()


def test_axfr_keeps_its_snapshot_across_reload(steerd, tmp_path):
    """A transfer that started before a reload finishes with the zone it started with."""
    big = zone_text(1) + "".join(f"r{i} TXT \"padding record {i:06d} ..........\"\n"
                                 for i in range(30000))
    config = """
server:
  listen: {listen}
  control-socket: {ctl}
zones:
  - domain: example.test
    file: {dir}/example.test.zone
    xfr-allow: [127.0.0.1]
"""
    srv = steerd(zones={"example.test": big}, config=config)
    with srv.tcp_connect(timeout=10) as s:
        # A small receive window keeps most of the transfer queued in the server meanwhile.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        q = query("example.test", "AXFR")
        s.sendall(tcp_frame(q.to_wire()))
        first = dns.message.from_wire(tcp_read_message(s), xfr=True, origin=None)
        assert first.answer[0].rdtype == dns.rdatatype.SOA and first.answer[0][0].serial == 1
        rewrite(srv.zone_paths["example.test"], zone_text(2, extra="added A 192.0.2.1"))
        assert srv.ctl("reload").returncode == 0
        assert srv.serial("example.test") == 2
        serials, names, records = [], set(), 0
        while len(serials) < 1:
            wire = tcp_read_message(s)
            assert wire is not None, "transfer cut off by the reload"
            msg = dns.message.from_wire(wire, xfr=True, origin=None, one_rr_per_rrset=True)
            for rrset in msg.answer:
                records += len(rrset)
                names.add(rrset.name.to_text())
                if rrset.rdtype == dns.rdatatype.SOA:
                    serials.append(rrset[0].serial)
    assert serials == [1], "the trailing SOA belongs to the old version"
    assert "added.example.test." not in names
    assert "r29999.example.test." in names
