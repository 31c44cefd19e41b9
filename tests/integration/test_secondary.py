"""Secondary zones and NOTIFY against real primaries and secondaries started here: Debian's
knotd and BIND's named on loopback high ports, each in a folder of the test's, stopped by PID.

Steer pulls zones by AXFR (at start, on NOTIFY, at refresh), keeps them on disk, expires them,
enforces max-records, refuses NOTIFY from other addresses, answers EXPIRE (RFC 7314) and sends
NOTIFY for its own primary zones. Seed 003's set-up both ways: a parent zone on BIND delegating
the steering subzone to Steer, and Steer as a secondary of that parent.
"""
from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import dns.edns
import dns.flags
import dns.message
import dns.opcode
import dns.query
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import pytest

from conftest import free_port, query, server_config, wait_for

KNOTD = shutil.which("knotd") or "/usr/sbin/knotd"
KNOTC = shutil.which("knotc") or "/usr/sbin/knotc"
NAMED = shutil.which("named") or "/usr/sbin/named"
NSD = shutil.which("nsd") or "/usr/sbin/nsd"

pytestmark = pytest.mark.skipif(not (Path(KNOTD).exists() and Path(NAMED).exists()),
                                reason="knotd and named (Debian knot, bind9) are needed")


def zone_text(origin: str, serial: int, *, extra: str = "", refresh: int = 3600,
              retry: int = 600, expire: int = 86400, hosts: int = 0) -> str:
    lines = [f"$ORIGIN {origin}", "$TTL 300",
             f"@ IN SOA ns.{origin} admin.{origin} {serial} {refresh} {retry} {expire} 300",
             "@ IN NS ns", "ns IN A 127.0.0.1", f"www IN A 192.0.2.{serial % 250 + 1}",
             "mail IN MX 10 www", "txt IN TXT \"hello world\" \"second string\"",
             "_sip._udp IN SRV 0 5 5060 www", "alias IN CNAME www", "v6 IN AAAA 2001:db8::1"]
    lines += [f"h{i} IN A 198.51.100.{i % 250 + 1}" for i in range(hosts)]
    return "\n".join(lines) + "\n" + extra


class _Peer:
    """What every peer server here shares: its SOA serial, its log (@log_name in @dir), and
    stopping it by its own PID."""
    log_name = "peer.log"

    def _setup(self, workdir: Path, zones: dict[str, str]) -> None:
        """@workdir, a free port, and each zone's text in <workdir>/<origin>zone (self.files)."""
        self.dir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.files = {}
        for origin, text in zones.items():
            f = workdir / f"{origin}zone"
            f.write_text(text)
            self.files[origin] = f

    def soa_serial(self, origin: str) -> int | None:
        try:
            r = dns.query.udp(query(origin, "SOA"), "127.0.0.1", port=self.port, timeout=0.3)
        except (dns.exception.Timeout, OSError):
            return None
        if r.rcode() != dns.rcode.NOERROR or not r.answer:
            return None
        return r.answer[0][0].serial

    def log_text(self) -> str:
        self.log.flush()
        return (self.dir / self.log_name).read_text(errors="replace")[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()


class Knot(_Peer):
    """knotd serving @zones ({origin: text}) as primaries, or as secondaries of @primary."""
    log_name = "knotd.log"

    def __init__(self, workdir: Path, zones: dict[str, str], *, notify_port: int | None = None,
                 primary_port: int | None = None, diffs: bool = False,
                 port: int | None = None):
        """@port: listen there (a port chosen before, for a secondary started first)."""
        self.dir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.files = {}
        remotes, zone_yaml = "", ""
        if notify_port is not None:
            remotes += f"  - id: steer\n    address: 127.0.0.1@{notify_port}\n"
        if primary_port is not None:
            remotes += f"  - id: steerprimary\n    address: 127.0.0.1@{primary_port}\n"
        for origin, text in zones.items():
            f = workdir / f"{origin}zone"
            if text:
                f.write_text(text)
            self.files[origin] = f
            zone_yaml += f"  - domain: {origin}\n    file: \"{f}\"\n    acl: [local]\n"
            if notify_port is not None:
                zone_yaml += "    notify: steer\n"
            if primary_port is not None:
                zone_yaml += "    master: steerprimary\n"
        conf = f"""server:
    rundir: "{workdir}"
    listen: 127.0.0.1@{self.port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: debug
database:
    storage: "{workdir}"
remote:
{remotes or '  []'}
acl:
  - id: local
    address: 127.0.0.0/8
    action: [transfer, notify]
template:
  - id: default
    journal-content: changes
    zonefile-sync: -1
{"    zonefile-load: difference" if diffs else ""}
zone:
{zone_yaml}"""
        if not remotes:
            conf = conf.replace("remote:\n  []\n", "")
        self.conf = workdir / "knot.conf"
        self.conf.write_text(conf)
        self.log = open(workdir / "knotd.log", "wb")
        self.proc = subprocess.Popen([KNOTD, "-c", str(self.conf)], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        if primary_port is None:
            for origin in zones:
                self.wait_serial(origin, None)

    def wait_serial(self, origin: str, serial: int | None, timeout: float = 20.0):
        wait_for(lambda: (self.soa_serial(origin) is not None
                          and (serial is None or self.soa_serial(origin) == serial)),
                 timeout, what=f"knotd serving {origin} serial {serial}: {self.log_text()}")

    def update(self, origin: str, text: str):
        self.files[origin].write_text(text)
        subprocess.run([KNOTC, "-c", str(self.conf), "zone-reload", origin], check=True,
                       capture_output=True, timeout=10)



class Bind(_Peer):
    """named serving @zones ({origin: text}) as primaries, NOTIFYing 127.0.0.1@@notify_port."""
    log_name = "named.log"

    def __init__(self, workdir: Path, zones: dict[str, str], *, notify_port: int | None = None,
                 key: str | None = None):
        """With @key (a base64 hmac-sha256 secret of key "xfr-key"), transfers need the key
        and NOTIFYs are signed with it."""
        self._setup(workdir, zones)
        zone_conf = "".join(f'zone "{origin}" {{ type primary; file "{f}"; }};\n'
                            for origin, f in self.files.items())
        signed = " key xfr-key" if key else ""
        notify = (f"notify explicit; also-notify {{ 127.0.0.1 port {notify_port}{signed}; }};"
                  if notify_port else "notify no;")
        allow = "key xfr-key;" if key else "127.0.0.0/8;"
        keys = (f'key "xfr-key" {{ algorithm hmac-sha256; secret "{key}"; }};\n'
                if key else "")
        self.conf = workdir / "named.conf"
        self.conf.write_text(keys + f"""options {{
    directory "{workdir}";
    pid-file "{workdir}/named.pid";
    listen-on port {self.port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    allow-transfer {{ {allow} }};
    {notify}
    notify-delay 0;
    startup-notify-rate 1000;
    notify-rate 1000;
    dnssec-validation no;
}};
controls {{ }};
{zone_conf}""")
        self.log = open(workdir / "named.log", "wb")
        # -g: foreground, log to stderr; -u is not used (already the right user in tests).
        self.proc = subprocess.Popen([NAMED, "-g", "-c", str(self.conf)], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        for origin in zones:
            wait_for(lambda: self.soa_serial(origin) is not None, 20,
                     what=f"named serving {origin}: {self.log_text()}")

    def update(self, origin: str, text: str, serial: int):
        self.files[origin].write_text(text)
        self.proc.send_signal(signal.SIGHUP)  # named reloads changed zones on SIGHUP
        wait_for(lambda: self.soa_serial(origin) == serial, 20,
                 what=f"named serving {origin} serial {serial}: {self.log_text()}")



class Nsd(Bind):
    """NSD serving @zones as primaries, allowing transfers to and NOTIFYing 127.0.0.1@@notify_port."""
    log_name = "nsd.log"

    def __init__(self, workdir: Path, zones: dict[str, str], *, notify_port: int | None = None):
        self._setup(workdir, zones)
        zone_conf = ""
        for origin, f in self.files.items():
            notify = f"    notify: 127.0.0.1@{notify_port} NOKEY\n" if notify_port else ""
            zone_conf += (f"zone:\n    name: {origin}\n    zonefile: \"{f}\"\n"
                          f"    provide-xfr: 127.0.0.0/8 NOKEY\n{notify}")
        self.conf = workdir / "nsd.conf"
        self.conf.write_text(f"""server:
    ip-address: 127.0.0.1@{self.port}
    do-ip6: no
    server-count: 1
    zonesdir: "{workdir}"
    database: ""
    zonelistfile: "{workdir}/zone.list"
    xfrdfile: "{workdir}/xfrd.state"
    xfrdir: "{workdir}"
    pidfile: "{workdir}/nsd.pid"
    cookie-secret-file: "{workdir}/cookiesecrets.txt"
    username: ""
    chroot: ""
    rrl-ratelimit: 0
remote-control:
    control-enable: no
{zone_conf}""")
        self.log = open(workdir / self.log_name, "wb")
        self.proc = subprocess.Popen([NSD, "-d", "-c", str(self.conf)], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        for origin in zones:
            wait_for(lambda: self.soa_serial(origin) is not None, 20,
                     what=f"nsd serving {origin}: {self.log_text()}")


@pytest.fixture
def peers():
    """Start peers through it; each is stopped (by its own PID) at teardown."""
    started = []

    def start(kind, *args, **kwargs):
        p = kind(*args, **kwargs)
        started.append(p)
        return p

    yield start
    for p in reversed(started):
        p.stop()


def secondary_config(zones: list[tuple[str, int]], storage: Path, extra: str = "",
                     zone_extra: str = "") -> str:
    """A steerd config-mode text with secondary zones [(origin, primary port)]."""
    text = "storage: " + str(storage) + "\n"
    z = "zones:\n" + "".join(
        f"  - domain: {o}\n    primaries: [\"127.0.0.1@{p}\"]\n    refresh-min: 500ms\n"
        + zone_extra for o, p in zones)
    return ("server:\n  listen: {listen}\n  control-socket: {ctl}\n  workers: 1\n"
            "  tcp-workers: 1\n  " + text.replace("{", "{{").replace("}", "}}")
            + extra.replace("{", "{{").replace("}", "}}")
            + z.replace("{", "{{").replace("}", "}}"))


def steer_serial(srv, origin: str) -> int | None:
    try:
        r = srv.udp(query(origin, "SOA"), timeout=0.5)
    except dns.exception.Timeout:
        return None
    if r.rcode() != dns.rcode.NOERROR or not r.answer:
        return None
    return r.answer[0][0].serial


def records(srv, origin: str) -> set[str]:
    """The zone as AXFR'd from steerd (allowed from loopback)."""
    msgs = dns.query.xfr(srv.host, origin, port=srv.port, timeout=5, lifetime=10)
    out = set()
    for m in msgs:
        for rr in m.answer:
            for rd in rr:
                out.add(f"{rr.name} {rr.ttl} {dns.rdatatype.to_text(rr.rdtype)} {rd}")
    return out


def primary_records(host: str, port: int, origin: str) -> set[str]:
    out = set()
    for m in dns.query.xfr(host, origin, port=port, timeout=5, lifetime=10):
        for rr in m.answer:
            for rd in rr:
                out.add(f"{rr.name} {rr.ttl} {dns.rdatatype.to_text(rr.rdtype)} {rd}")
    return out


def notify_msg(origin: str, serial: int | None = None) -> dns.message.Message:
    m = dns.message.make_query(origin, "SOA")
    m.flags = dns.flags.AA
    m.set_opcode(dns.opcode.NOTIFY)
    if serial is not None:
        rr = dns.rrset.from_text(origin, 300, "IN", "SOA",
                                 f"ns.{origin} admin.{origin} {serial} 1 1 1 1")
        m.answer.append(rr)
    return m


def send_from(msg: dns.message.Message, source: str, port: int) -> dns.message.Message:
    return dns.query.udp(msg, "127.0.0.1", port=port, timeout=3, source=source)


def expire_query(origin: str) -> dns.message.Message:
    return dns.message.make_query(origin, "SOA", use_edns=0,
                                  options=[dns.edns.GenericOption(9, b"")])


def expire_value(r: dns.message.Message) -> int | None:
    for o in r.options:
        if o.otype == 9:
            return int.from_bytes(o.to_wire() if hasattr(o, "to_wire") else o.data, "big")
    return None


XFR_ALLOW = "    xfr-allow: [127.0.0.0/8]\n"


# ------------------------------------------------------------------------------------------


def test_axfr_from_knot_at_start_and_notify_within_1s(steerd, peers, tmp_path):
    o = "k.test."
    knot = peers(Knot, tmp_path / "knot", {o: zone_text(o, 1)}, notify_port=None)
    storage = tmp_path / "storage"
    storage.mkdir()
    http_port = free_port()
    srv = steerd(config=secondary_config([(o, knot.port)], storage, zone_extra=XFR_ALLOW,
                                         extra=f"http:\n  listen: [127.0.0.1:{http_port}]\n"),
                 ready_zone=o)
    assert steer_serial(srv, o) == 1
    # Every record of the primary, compressed names in the rdata included, as Knot has them.
    assert records(srv, o) == primary_records("127.0.0.1", knot.port, o)
    assert (storage / "k.test.zone").exists()
    r = srv.udp(query("www." + o, "A"))
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA

    # A changed zone on the primary and a NOTIFY from its address: served within 1 s.
    knot.update(o, zone_text(o, 2, extra="new IN A 203.0.113.9\n"))
    knot.wait_serial(o, 2)
    t0 = time.monotonic()
    ack = send_from(notify_msg(o, 2), "127.0.0.1", srv.port)
    assert ack.rcode() == dns.rcode.NOERROR and ack.flags & dns.flags.AA
    assert ack.opcode() == dns.opcode.NOTIFY and ack.question[0].name.to_text() == o
    wait_for(lambda: steer_serial(srv, o) == 2, 1.0, what="serial 2 within 1 s of NOTIFY")
    assert time.monotonic() - t0 < 1.0
    r = srv.udp(query("new." + o, "A"))
    assert [rd.to_text() for rd in r.answer[0]] == ["203.0.113.9"]
    assert records(srv, o) == primary_records("127.0.0.1", knot.port, o)

    [z] = [z for z in srv.ctl_json("zones") if z["name"].rstrip(".") == "k.test"]
    sec = z["secondary"]
    assert sec["serial"] == 2 and sec["transfers_ok"] == 2 and sec["last_error"] == ""
    assert sec["primary"] == f"127.0.0.1:{knot.port}" and 86000 < sec["expires_in"] <= 86400
    assert sec["next_refresh"] > time.time() + 3000
    body = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5).read()
    text = body.decode()
    assert 'steer_xfr_transfers_total{result="ok"} 2' in text
    assert "steer_xfr_notify_received_total 1" in text
    # steerctl zone-retransfer: a whole transfer though the serial did not change.
    srv.ctl("zone-retransfer", o)
    wait_for(lambda: [z for z in srv.ctl_json("zones")
                      if z["name"].rstrip(".") == "k.test"][0]["secondary"]["transfers_ok"] == 3,
             3, what="retransfer")
    res = srv.ctl("zone-refresh", "nosuch.test", )
    assert res.returncode != 0 and "not a secondary zone" in res.stdout + res.stderr


def ixfr_zone(origin: str, serial: int) -> str:
    text = zone_text(origin, serial, hosts=40)
    if serial > 1:
        # A changed, a removed and an added record.
        text = text.replace("mail IN MX 10 www\n", "").replace("h7 IN A", "h7 IN TXT \"x\"\n;")
        text += f"added{serial} IN A 203.0.113.{serial}\n"
    return text


def zone_entry(srv, origin: str) -> dict:
    [z] = [z for z in srv.ctl_json("zones") if z["name"].rstrip(".") == origin.rstrip(".")]
    return z


def test_ixfr_from_knot(steerd, peers, tmp_path):
    o = "ix.test."
    knot = peers(Knot, tmp_path / "knot", {o: ixfr_zone(o, 1)}, diffs=True)
    storage = tmp_path / "storage"
    storage.mkdir()
    srv = steerd(config=secondary_config([(o, knot.port)], storage, zone_extra=XFR_ALLOW),
                 ready_zone=o)
    assert zone_entry(srv, o)["secondary"]["ixfr_ok"] == 0
    for serial in (2, 3):
        knot.update(o, ixfr_zone(o, serial))
        knot.wait_serial(o, serial)
        send_from(notify_msg(o, serial), "127.0.0.1", srv.port)
        wait_for(lambda: steer_serial(srv, o) == serial, 2, what=f"serial {serial}")
        assert records(srv, o) == primary_records("127.0.0.1", knot.port, o)
    sec = zone_entry(srv, o)["secondary"]
    assert sec["ixfr_ok"] == 2 and sec["transfers_ok"] == 3, sec
    assert "by IXFR" in srv.log()
    # Knot's own log: the two incremental transfers it served.
    assert knot.log_text().count("IXFR") >= 2, knot.log_text()
    # A retransfer is a whole AXFR again.
    srv.ctl("zone-retransfer", o)
    wait_for(lambda: zone_entry(srv, o)["secondary"]["transfers_ok"] == 4, 3, what="AXFR")
    assert zone_entry(srv, o)["secondary"]["ixfr_ok"] == 2
    assert records(srv, o) == primary_records("127.0.0.1", knot.port, o)


def test_knot_sends_notify_and_bind_primary(steerd, peers, tmp_path):
    """Knot's and BIND's own NOTIFYs (not ours) drive the refresh."""
    port = free_port()
    ok, ob = "kn.test.", "bn.test."
    knot = peers(Knot, tmp_path / "knot", {ok: zone_text(ok, 10)}, notify_port=port)
    bind = peers(Bind, tmp_path / "bind", {ob: zone_text(ob, 20)}, notify_port=port)
    storage = tmp_path / "storage"
    storage.mkdir()
    cfg = secondary_config([(ok, knot.port), (ob, bind.port)], storage, zone_extra=XFR_ALLOW)
    srv = steerd(config=cfg, listen=[("127.0.0.1", port)], ready_zone=ok)
    wait_for(lambda: steer_serial(srv, ob) == 20, 10, what="BIND zone transferred")
    assert records(srv, ob) == primary_records("127.0.0.1", bind.port, ob)

    knot.update(ok, zone_text(ok, 11))
    wait_for(lambda: steer_serial(srv, ok) == 11, 3, what="Knot's NOTIFY refreshed")
    bind.update(ob, zone_text(ob, 21, extra="b IN TXT \"bind\"\n"), 21)
    t0 = time.monotonic()
    wait_for(lambda: steer_serial(srv, ob) == 21, 3, what="BIND's NOTIFY refreshed")
    assert time.monotonic() - t0 < 1.5
    assert records(srv, ob) == primary_records("127.0.0.1", bind.port, ob)
    assert "NOTIFY" in knot.log_text() or "notify" in knot.log_text().lower()


def test_notify_from_disallowed_address_refused(steerd, peers, tmp_path):
    o = "deny.test."
    knot = peers(Knot, tmp_path / "knot", {o: zone_text(o, 1)})
    storage = tmp_path / "storage"  # not there yet: created by the first transfer
    srv = steerd(config=secondary_config([(o, knot.port)], storage), ready_zone=o)
    assert (storage / "deny.test.zone").exists()
    knot.update(o, zone_text(o, 2))
    knot.wait_serial(o, 2)
    # 127.0.0.2 is not the primary and not in notify-allow: NOTAUTH, and no refresh.
    r = send_from(notify_msg(o, 2), "127.0.0.2", srv.port)
    assert r.rcode() == dns.rcode.NOTAUTH
    time.sleep(1.5)
    assert steer_serial(srv, o) == 1
    # A zone that is not ours, or a primary zone: NOTAUTH too.
    assert send_from(notify_msg("other.test."), "127.0.0.1", srv.port).rcode() == \
        dns.rcode.NOTAUTH
    # The primary's address may.
    assert send_from(notify_msg(o, 2), "127.0.0.1", srv.port).rcode() == dns.rcode.NOERROR
    wait_for(lambda: steer_serial(srv, o) == 2, 1.0, what="refresh after allowed NOTIFY")


def test_notify_allow_list(steerd, peers, tmp_path):
    o = "allow.test."
    knot = peers(Knot, tmp_path / "knot", {o: zone_text(o, 1)})
    storage = tmp_path / "storage"
    storage.mkdir()
    srv = steerd(config=secondary_config([(o, knot.port)], storage,
                                         zone_extra="    notify-allow: [127.0.0.3]\n"),
                 ready_zone=o)
    knot.update(o, zone_text(o, 5))
    knot.wait_serial(o, 5)
    assert send_from(notify_msg(o), "127.0.0.2", srv.port).rcode() == dns.rcode.NOTAUTH
    assert send_from(notify_msg(o), "127.0.0.3", srv.port).rcode() == dns.rcode.NOERROR
    wait_for(lambda: steer_serial(srv, o) == 5, 1.0, what="refresh after notify-allow NOTIFY")


def test_expire_option_and_expiry_then_restart_from_disk(steerd, peers, tmp_path):
    o = "exp.test."
    # expire 4 s, refresh and retry 1 s (refresh-min 500ms lets them through).
    knot = peers(Knot, tmp_path / "knot", {o: zone_text(o, 7, refresh=1, retry=1, expire=4)})
    storage = tmp_path / "storage"
    storage.mkdir()
    cfg = secondary_config([(o, knot.port)], storage,
                           zone_extra="  - domain: prim.test\n    file: prim.zone\n")
    (tmp_path / "prim.zone").write_text(zone_text("prim.test.", 3))
    srv = steerd(config=cfg, ready_zone=o)
    r = srv.udp(expire_query(o))
    left = expire_value(r)
    assert left is not None and 0 < left <= 4, r
    # RFC 7314 4: a primary zone ignores the option.
    r = srv.udp(expire_query("prim.test."))
    assert r.rcode() == dns.rcode.NOERROR and expire_value(r) is None

    knot.stop()
    # Refreshes fail now; after the expire time the zone is no longer answered.
    wait_for(lambda: srv.udp(query("www." + o, "A")).rcode() == dns.rcode.SERVFAIL, 8,
             what="zone expired")
    assert srv.udp(query("www.prim.test.", "A")).rcode() == dns.rcode.NOERROR
    wait_for(lambda: "expired" in srv.log(), 3, what="the expiry logged")
    srv.stop()

    # Restarted with the primary still down: served at once from disk (a fresh SOA expire
    # makes it count from the file, so write a long-lived version first).
    knot2 = peers(Knot, tmp_path / "knot2", {o: zone_text(o, 8, expire=86400)})
    cfg2 = secondary_config([(o, knot2.port)], storage)
    srv2 = steerd(config=cfg2, ready_zone=o)
    assert steer_serial(srv2, o) == 8
    srv2.stop()
    knot2.stop()
    t0 = time.monotonic()
    srv3 = steerd(config=cfg2, ready_zone=o)
    assert steer_serial(srv3, o) == 8
    assert time.monotonic() - t0 < 10
    assert srv3.udp(query("www." + o, "A")).rcode() == dns.rcode.NOERROR


def test_max_records_keeps_old_version(steerd, peers, tmp_path):
    o = "big.test."
    knot = peers(Knot, tmp_path / "knot", {o: zone_text(o, 1)})
    storage = tmp_path / "storage"
    storage.mkdir()
    srv = steerd(config=secondary_config([(o, knot.port)], storage,
                                         zone_extra="    max-records: 30\n"), ready_zone=o)
    assert steer_serial(srv, o) == 1
    knot.update(o, zone_text(o, 2, hosts=100))
    knot.wait_serial(o, 2)
    send_from(notify_msg(o, 2), "127.0.0.1", srv.port)
    wait_for(lambda: "exceeds max-records" in srv.log(), 5, what="transfer refused")
    assert steer_serial(srv, o) == 1
    assert srv.udp(query("h5." + o, "A")).rcode() == dns.rcode.NXDOMAIN
    st = srv.ctl_json("zones")
    assert "max-records" in str(st)


def test_notify_out_to_knot_secondary(steerd, peers, tmp_path):
    o = "out.test."
    port = free_port()
    zfile = tmp_path / "out.zone"
    zfile.write_text(zone_text(o, 100))
    # Knot as a secondary of Steer: Steer NOTIFYs it at start and after a reload.
    kdir = tmp_path / "knotsec"
    kport = free_port()
    cfg_tmpl = ("server:\n  listen: {{listen}}\n  control-socket: {{ctl}}\n  workers: 1\n"
                "  tcp-workers: 1\nzones:\n  - domain: " + o + "\n    file: " + str(zfile)
                + "\n    xfr-allow: [127.0.0.0/8]\n    notify: [\"127.0.0.1@{kport}\"]\n")
    srv = steerd(config=cfg_tmpl.format(kport=kport), listen=[("127.0.0.1", port)],
                 ready_zone=o)
    knot = peers(_KnotSecondary, kdir, o, kport, port)
    knot.wait_serial(o, 100)
    zfile.write_text(zone_text(o, 101, extra="fresh IN A 203.0.113.77\n"))
    srv.ctl("reload")
    t0 = time.monotonic()
    knot.wait_serial(o, 101, timeout=5)
    assert time.monotonic() - t0 < 5
    assert "NOTIFY" in srv.log() and "answered" in srv.log()


class _KnotSecondary(Knot):
    def __init__(self, workdir: Path, origin: str, port: int, primary_port: int):
        self.dir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.files = {}
        conf = f"""server:
    rundir: "{workdir}"
    listen: 127.0.0.1@{port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: debug
database:
    storage: "{workdir}"
remote:
  - id: steer
    address: 127.0.0.1@{primary_port}
acl:
  - id: notify
    address: 127.0.0.0/8
    action: notify
zone:
  - domain: {origin}
    file: "{workdir}/{origin}zone"
    master: steer
    acl: notify
    zonefile-sync: -1
"""
        self.port = port
        self.conf = workdir / "knot.conf"
        self.conf.write_text(conf)
        self.log = open(workdir / "knotd.log", "wb")
        self.proc = subprocess.Popen([KNOTD, "-c", str(self.conf)], stdout=self.log,
                                     stderr=subprocess.STDOUT)


def test_seed003_parent_on_bind_delegates_to_steer(steerd, peers, tmp_path):
    """(a) The parent zone on BIND delegates ecslb.sjtu.test to Steer; a name of the parent
    is a CNAME into the subzone; following the referral reaches Steer's answer."""
    port = free_port()
    parent = "sjtu.test."
    ptext = zone_text(parent, 1, extra=(
        "vpn IN CNAME vpn.ecslb\n"
        "ecslb IN NS ns.ecslb\n"
        "ns.ecslb IN A 127.0.0.1\n"))
    bind = peers(Bind, tmp_path / "bind", {parent: ptext})
    (tmp_path / "ecslb.zone").write_text(zone_text("ecslb.sjtu.test.", 5, extra=(
        "vpn IN A 198.51.100.10\n")).replace("ns IN A 127.0.0.1", "ns IN A 127.0.0.1"))
    srv = steerd(config=("server:\n  listen: {listen}\n  control-socket: {ctl}\n"
                         "  workers: 1\n  tcp-workers: 1\nzones:\n"
                         "  - domain: ecslb.sjtu.test\n    file: ecslb.zone\n"),
                 listen=[("127.0.0.1", port)], ready_zone="ecslb.sjtu.test.")
    r = dns.query.udp(query("vpn." + parent, "A"), "127.0.0.1", port=bind.port, timeout=3)
    IN = dns.rdataclass.IN
    cname = r.find_rrset(r.answer, dns.name.from_text("vpn." + parent), IN,
                         dns.rdatatype.CNAME)
    target = cname[0].target
    ns = r.find_rrset(r.authority, dns.name.from_text("ecslb." + parent), IN, dns.rdatatype.NS)
    glue = r.find_rrset(r.additional, ns[0].target, IN, dns.rdatatype.A)
    assert glue[0].address == "127.0.0.1"
    # The glue's address, at the port Steer listens on (the test cannot bind port 53).
    r2 = dns.query.udp(query(target.to_text(), "A"), glue[0].address, port=port, timeout=3)
    assert r2.rcode() == dns.rcode.NOERROR and r2.flags & dns.flags.AA
    assert [rd.address for rd in r2.answer[0]] == ["198.51.100.10"]


def test_seed003_steer_secondary_of_bind_parent(steerd, peers, tmp_path):
    """(b) Steer is a secondary of the parent zone on BIND and serves the subzone itself."""
    parent = "sjtu2.test."
    ptext = zone_text(parent, 3, extra=(
        "vpn IN CNAME vpn.ecslb\n"
        "ecslb IN NS ns.ecslb\n"
        "ns.ecslb IN A 127.0.0.1\n"))
    bind = peers(Bind, tmp_path / "bind", {parent: ptext})
    (tmp_path / "ecslb.zone").write_text(zone_text("ecslb." + parent, 5, extra=(
        "vpn IN A 198.51.100.11\n")))
    storage = tmp_path / "storage"
    storage.mkdir()
    cfg = secondary_config([(parent, bind.port)], storage, zone_extra=XFR_ALLOW,
                           extra="")
    cfg += "  - domain: ecslb." + parent + "\n    file: ecslb.zone\n"
    srv = steerd(config=cfg, ready_zone=parent)
    assert steer_serial(srv, parent) == 3
    assert records(srv, parent) == primary_records("127.0.0.1", bind.port, parent)
    r = srv.udp(query("vpn.ecslb." + parent, "A"))
    assert [rd.address for rd in r.answer[0]] == ["198.51.100.11"]
    r = srv.udp(query("vpn." + parent, "CNAME"))
    assert r.answer and r.answer[0][0].target.to_text() == "vpn.ecslb." + parent


def test_config_errors(tmp_path):
    from conftest import run_steerd
    bad = tmp_path / "bad.yaml"
    bad.write_text("server:\n  listen: [127.0.0.1:5300]\nzones:\n  - domain: a.test\n"
                   "    primaries: [\"127.0.0.1@99999\"]\n")
    res = run_steerd("-c", str(bad), "--check-config")
    assert res.returncode != 0 and "zones.primaries" in res.stderr + res.stdout
    bad.write_text("server:\n  listen: [127.0.0.1:5300]\nzones:\n  - domain: a.test\n"
                   "    primaries: [{ address: 127.0.0.1, key: nokey }]\n")
    res = run_steerd("-c", str(bad), "--check-config")
    assert res.returncode != 0 and "primaries: unknown key 'nokey'" in res.stderr + res.stdout
    bad.write_text("server:\n  listen: [127.0.0.1:5300]\nzones:\n  - domain: a.test\n")
    res = run_steerd("-c", str(bad), "--check-config")
    assert res.returncode != 0 and "missing required key 'file'" in res.stderr + res.stdout


def test_reload_adds_and_removes_secondary_zones(steerd, peers, tmp_path):
    a, b = "ra.test.", "rb.test."
    knot = peers(Knot, tmp_path / "knot", {a: zone_text(a, 1), b: zone_text(b, 4)})
    storage = tmp_path / "storage"
    storage.mkdir()
    srv = steerd(config=secondary_config([(a, knot.port)], storage), ready_zone=a)
    loaded_at = zone_entry(srv, a)["loaded_at"]
    assert srv.udp(query("www." + b, "A")).rcode() == dns.rcode.REFUSED
    srv.config_path.write_text(srv.config_path.read_text() + (
        f"  - domain: {b}\n    primaries: [\"127.0.0.1@{knot.port}\"]\n"))
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    wait_for(lambda: steer_serial(srv, b) == 4, 5, what="the added zone transferred")
    # The zone that stayed was neither dropped nor re-read.
    assert zone_entry(srv, a)["loaded_at"] == loaded_at and steer_serial(srv, a) == 1
    assert srv.log().count(f"secondary zone {a}: transferred") == 1
    text = srv.config_path.read_text()
    srv.config_path.write_text(text[:text.index(f"  - domain: {b}")])
    assert srv.ctl("reload").returncode == 0
    assert srv.udp(query("www." + b, "A")).rcode() == dns.rcode.REFUSED
    assert steer_serial(srv, a) == 1


def test_axfr_out_of_a_secondary_carries_expire(steerd, peers, tmp_path):
    """RFC 7314 3: the EXPIRE option in an AXFR query is answered in the first message."""
    from conftest import tcp_frame, tcp_read_message
    o = "ax.test."
    knot = peers(Knot, tmp_path / "knot", {o: zone_text(o, 2, expire=5000)})
    storage = tmp_path / "storage"
    storage.mkdir()
    srv = steerd(config=secondary_config([(o, knot.port)], storage, zone_extra=XFR_ALLOW),
                 ready_zone=o)
    q = dns.message.make_query(o, "AXFR", use_edns=0, options=[dns.edns.GenericOption(9, b"")])
    with srv.tcp_connect() as s:
        s.sendall(tcp_frame(q.to_wire()))
        first = dns.message.from_wire(tcp_read_message(s), one_rr_per_rrset=True)
    left = expire_value(first)
    assert left is not None and 4990 < left <= 5000


SECRET = "c2VjcmV0LWZvci10aGUtc2Vjb25kYXJ5LXRlc3RzLTAxMjM0NQ=="


@pytest.mark.parametrize("wrong", [False, True], ids=["right-key", "wrong-key"])
def test_signed_transfer_from_knot(steerd, peers, tmp_path, wrong):
    """Knot requires the key for transfers; Steer signs its SOA query and AXFR and verifies
    every answer. With another secret Knot refuses (NOTAUTH/BADSIG) and nothing is served."""
    o = "tsig.test."
    kdir = tmp_path / "knot"
    knot = peers(Knot, kdir, {o: zone_text(o, 3)})
    knot.stop()
    conf = knot.conf.read_text()
    conf = conf.replace("acl:\n", f"key:\n  - id: xfr-key\n    algorithm: hmac-sha256\n"
                        f"    secret: {SECRET}\nacl:\n")
    conf = conf.replace("    action: [transfer, notify]\n",
                        "    key: xfr-key\n    action: [transfer, notify]\n")
    knot.conf.write_text(conf)
    knot.log = open(kdir / "knotd.log", "ab")
    knot.proc = subprocess.Popen([KNOTD, "-c", str(knot.conf)], stdout=knot.log,
                                 stderr=subprocess.STDOUT)
    knot.wait_serial(o, 3)
    storage = tmp_path / "storage"
    storage.mkdir()
    secret = SECRET if not wrong else "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC0wMTIzNDU2Nzg="
    cfg = ("server:\n  listen: {listen}\n  control-socket: {ctl}\n  workers: 1\n"
           "  tcp-workers: 1\n  storage: " + str(storage) + "\nkeys:\n  - name: xfr-key\n"
           "    algorithm: hmac-sha256\n    secret: \"" + secret + "\"\nzones:\n"
           "  - domain: " + o + "\n    primaries: [{{ address: \"127.0.0.1@" + str(knot.port)
           + "\", key: xfr-key }}]\n    refresh-min: 500ms\n")
    if not wrong:
        srv = steerd(config=cfg, ready_zone=o)
        assert steer_serial(srv, o) == 3
        return
    srv = steerd(config=cfg, ready=False)
    wait_for(lambda: "refresh failed" in srv.log(), 10, what="the refused refresh")
    # Configured but never transferred: SERVFAIL (as Knot and BIND answer), not REFUSED.
    assert srv.udp(query(o, "SOA")).rcode() == dns.rcode.SERVFAIL
    assert zone_entry(srv, o)["state"].startswith("pending: no transfer yet")
    assert not (storage / "tsig.test.zone").exists()


def test_signed_transfer_and_notify_from_bind(steerd, peers, tmp_path):
    """BIND needs the key for transfers and signs its NOTIFYs with it: Steer transfers with
    the key and refreshes on the signed NOTIFY at once, while an unsigned NOTIFY from the
    primary's own address is refused, because that primary has a key."""
    o = "bsig.test."
    port = free_port()
    storage = tmp_path / "storage"
    storage.mkdir()
    bind = peers(Bind, tmp_path / "bind", {o: zone_text(o, 7)}, notify_port=port, key=SECRET)
    cfg = ("server:\n  listen: {listen}\n  control-socket: {ctl}\n"
           "  workers: 1\n  tcp-workers: 1\n  storage: " + str(storage) + "\n"
           "keys:\n  - name: xfr-key\n    algorithm: hmac-sha256\n    secret: \"" + SECRET +
           "\"\nzones:\n  - domain: " + o + "\n    primaries: [{{ address: \"127.0.0.1@" +
           str(bind.port) + "\", key: xfr-key }}]\n    refresh-min: 1h\n    refresh-max: 1h\n")
    srv = steerd(config=cfg, listen=[("127.0.0.1", port)], ready_zone=o)
    assert steer_serial(srv, o) == 7
    assert send_from(notify_msg(o, 8), "127.0.0.1", port).rcode() == dns.rcode.NOTAUTH
    bind.update(o, zone_text(o, 8), 8)
    # refresh-min is an hour: only the signed NOTIFY can bring serial 8 this soon.
    wait_for(lambda: steer_serial(srv, o) == 8, 3, what="the refresh on BIND's signed NOTIFY")


def test_nsd_primary_axfr_and_notify(steerd, peers, tmp_path):
    """NSD as the primary: the zone is transferred at start, and NSD's own NOTIFY after it
    reloads a changed zone brings the new serial."""
    o = "nsd.test."
    port = free_port()
    nsd = peers(Nsd, tmp_path / "nsd", {o: zone_text(o, 30)}, notify_port=port)
    storage = tmp_path / "storage"
    storage.mkdir()
    cfg = secondary_config([(o, nsd.port)], storage, zone_extra=XFR_ALLOW)
    srv = steerd(config=cfg, listen=[("127.0.0.1", port)], ready_zone=o)
    assert steer_serial(srv, o) == 30
    assert records(srv, o) == primary_records("127.0.0.1", nsd.port, o)
    nsd.update(o, zone_text(o, 31, extra="n IN TXT \"nsd\"\n"), 31)
    wait_for(lambda: steer_serial(srv, o) == 31, 3, what="NSD's NOTIFY refreshed")
    assert records(srv, o) == primary_records("127.0.0.1", nsd.port, o)


# ---- a secondary zone before its first transfer ------------------------------------------


def test_pending_zone_servfail_then_first_transfer_on_notify(steerd, peers, tmp_path):
    """With its primary down, a configured secondary zone has nothing to serve: every query in
    it is SERVFAIL (UDP, TCP, names below the apex, AXFR), never REFUSED, and steerctl zones
    shows it pending with the last error. When the primary comes up, its NOTIFY is answered
    and starts the first transfer at once: refresh-min is an hour, so nothing else could."""
    from conftest import tcp_frame, tcp_read_message
    o = "pend.test."
    knot_port, port = free_port(), free_port()
    storage = tmp_path / "storage"
    cfg = secondary_config([(o, knot_port)], storage, zone_extra=XFR_ALLOW).replace(
        "refresh-min: 500ms", "refresh-min: 1h\n    refresh-max: 1h")
    srv = steerd(config=cfg, listen=[("127.0.0.1", port)])
    wait_for(lambda: "refresh failed" in srv.log(), 10, what="the failed first refresh")
    for q in (query(o, "SOA"), query("www." + o, "A"), query("a.b.c." + o, "TXT")):
        assert srv.udp(q).rcode() == dns.rcode.SERVFAIL, q.question
        assert srv.tcp(q).rcode() == dns.rcode.SERVFAIL, q.question
    with srv.tcp_connect() as s:
        s.sendall(tcp_frame(dns.message.make_query(o, "AXFR").to_wire()))
        r = dns.message.from_wire(tcp_read_message(s))
    assert r.rcode() == dns.rcode.SERVFAIL and not r.answer
    # Outside every zone: still REFUSED.
    assert srv.udp(query("www.elsewhere.test.", "A")).rcode() == dns.rcode.REFUSED
    z = zone_entry(srv, o)
    assert z["state"].startswith("pending: no transfer yet: ") and z["serial"] is None
    assert z["secondary"]["last_error"] != "" and z["secondary"]["transfers_ok"] == 0
    text = srv.ctl("zones").stdout
    assert "STATE" in text and "pending: no transfer yet" in text, text
    stats = srv.ctl_json("stats")
    assert stats["rcode"]["SERVFAIL"] >= 7, stats["rcode"]
    # The same checks as for a served zone: another address may not NOTIFY it.
    assert send_from(notify_msg(o), "127.0.0.2", port).rcode() == dns.rcode.NOTAUTH
    assert steer_serial(srv, o) is None

    # knotd NOTIFYs its secondaries once it has loaded the zone; the constructor returns once
    # knotd answers for it, about when that NOTIFY leaves.
    knot = peers(Knot, tmp_path / "knot", {o: zone_text(o, 1, extra="first IN A 203.0.113.1\n")},
                 notify_port=port, port=knot_port)
    t0 = time.monotonic()
    wait_for(lambda: steer_serial(srv, o) == 1, 1.0, what="served within 1 s of the NOTIFY")
    assert time.monotonic() - t0 < 1.0
    log = knot.log_text()
    assert f"notify, outgoing, remote 127.0.0.1@{port}, serial 1" in log, log
    assert "failed" not in log.split(f"notify, outgoing, remote 127.0.0.1@{port}")[1][:80], log
    r = srv.tcp(query("first." + o, "A"))
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    assert records(srv, o) == primary_records("127.0.0.1", knot.port, o)
    z = zone_entry(srv, o)
    assert z["state"] == "serving" and z["serial"] == 1, z
    body = srv.ctl_json("zones")
    assert [e["name"] for e in body].count("pend.test") == 1, body


def test_pending_zone_notify_from_primary_answered(steerd, tmp_path):
    """NOERROR with AA for the primary's own NOTIFY while the zone is pending; the refresh it
    starts runs at once (and fails: the primary is still down, so the zone stays pending)."""
    o = "pn.test."
    storage = tmp_path / "storage"
    cfg = secondary_config([(o, free_port())], storage).replace(
        "refresh-min: 500ms", "refresh-min: 1h\n    refresh-max: 1h")
    srv = steerd(config=cfg)
    wait_for(lambda: srv.log().count("refresh failed") == 1, 10, what="the first refresh")
    ack = send_from(notify_msg(o, 5), "127.0.0.1", srv.port)
    assert ack.rcode() == dns.rcode.NOERROR and ack.flags & dns.flags.AA
    assert ack.opcode() == dns.opcode.NOTIFY and ack.question[0].name.to_text() == o
    # The refresh it started ran at once (and failed: nothing listens there).
    wait_for(lambda: srv.log().count("refresh failed") >= 2, 2, what="the NOTIFY's refresh")
    assert zone_entry(srv, o)["state"].startswith("pending")
