"""TSIG (RFC 8945): signed queries verified and answered signed, the RFC's error answers
(NOTAUTH with BADKEY, BADSIG, BADTIME), zone transfers signed message by message, access
lists by address and key, and real secondaries (Knot's knotd, BIND's named) pulling a zone
from steerd with TSIG, or failing to with a wrong key."""
from __future__ import annotations

import base64
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsig
import dns.tsigkeyring
import dns.zone
import pytest

from conftest import ZONES_DIR, free_port, run_steerd, tcp_frame, tcp_read_message, wait_for

SECRETS = {
    "transfer-key": ("hmac-sha256", base64.b64encode(bytes(range(32))).decode()),
    "sha1-key": ("hmac-sha1", base64.b64encode(b"an old peer's secret").decode()),
    "sha224-key": ("hmac-sha224", base64.b64encode(bytes(range(40, 68))).decode()),
    "sha384-key": ("hmac-sha384", base64.b64encode(bytes(range(100, 148))).decode()),
    "sha512-key": ("hmac-sha512", base64.b64encode(bytes(range(150, 214))).decode()),
    "other-key": ("hmac-sha256", base64.b64encode(b"o" * 32).decode()),
}
WRONG_SECRET = base64.b64encode(b"x" * 32).decode()

BIG_RECORDS = 4000


def big_zone() -> str:
    head = ("$ORIGIN big.test.\n$TTL 300\n@ SOA ns1 hostmaster 7 7200 3600 1209600 300\n"
            "@ NS ns1\nns1 A 192.0.2.1\n")
    return head + "".join(f"h{i} TXT \"record {i} of a zone that needs many messages\"\n"
                          for i in range(BIG_RECORDS))


def keys_yaml(tmp: Path) -> str:
    # Two keys inline, the rest from tsig-keygen's and keymgr's own files.
    out = "keys:\n"
    for name in ("transfer-key", "other-key"):
        alg, secret = SECRETS[name]
        out += f"  - name: {name}\n    algorithm: {alg}\n    secret: \"{secret}\"\n"
    bind = "".join(f'key "{n}" {{\n\talgorithm {SECRETS[n][0]};\n\tsecret "{SECRETS[n][1]}";\n}};\n'
                   for n in ("sha1-key", "sha224-key"))
    (tmp / "bind.key").write_text(bind)
    knot = "key:\n" + "".join(f"  - id: {n}\n    algorithm: {SECRETS[n][0]}\n"
                              f"    secret: {SECRETS[n][1]}\n"
                              for n in ("sha384-key", "sha512-key"))
    (tmp / "knot.key").write_text(knot)
    return out + f"  - file: {tmp / 'bind.key'}\n  - file: {tmp / 'knot.key'}\n"


CONFIG_ZONES = """zones:
  - domain: example.test
    file: {dir}/example.test.zone
    xfr-allow: [127.0.0.1]
  - domain: big.test
    file: {dir}/big.test.zone
    xfr-allow:
      - {{ address: 127.0.0.0/8, key: transfer-key }}
      - {{ key: sha512-key }}
  - domain: keyonly.test
    file: {dir}/keyonly.test.zone
    xfr-allow: [{{ key: transfer-key }}]
"""


@pytest.fixture(scope="module")
def srv(module_launcher, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("keys")
    keyonly = ("$ORIGIN keyonly.test.\n@ 300 SOA ns1 h 3 2 3 4 5\n@ 300 NS ns1\n"
               "ns1 300 A 192.0.2.1\nwww 300 A 192.0.2.80\n"
               + "".join(f"many 300 TXT \"text record number {i} to overflow 512 bytes\"\n"
                         for i in range(30)))
    config = ("server:\n  listen: {listen}\n  control-socket: {ctl}\n  workers: 1\n"
              "  tcp-workers: 1\n" + keys_yaml(tmp).replace("{", "{{").replace("}", "}}")
              + CONFIG_ZONES)
    return module_launcher(
        zones={"example.test": "example.test.zone", "big.test": big_zone(),
               "keyonly.test": keyonly},
        config=config, listen=["127.0.0.1"])


def keyring(name: str, secret: str | None = None):
    alg, good = SECRETS.get(name, ("hmac-sha256", WRONG_SECRET))
    return dns.tsigkeyring.from_text({name: (alg, secret or good)})


def signed_query(name: str, rdtype: str, key: str, secret: str | None = None, **kw):
    q = dns.message.make_query(name, rdtype, **kw)
    q.use_tsig(keyring(key, secret), keyname=key)
    return q


def raw_udp(srv, wire: bytes) -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(3)
        s.sendto(wire, (srv.host, srv.port))
        return s.recv(65535)


def raw_tcp(srv, wire: bytes) -> bytes:
    with socket.create_connection((srv.host, srv.port), timeout=5) as s:
        s.sendall(tcp_frame(wire))
        resp = tcp_read_message(s)
        assert resp is not None
        return resp


def rcode_of(wire: bytes) -> int:
    return wire[3] & 0xF


def tsig_tail(wire: bytes) -> tuple[int, bytes]:
    """The TSIG error and other data of @wire, whose last record must be a TSIG."""
    qd, an, ns, ar = struct.unpack("!HHHH", wire[4:12])
    pos = 12
    for _ in range(qd):
        pos += dns.name.from_wire(wire, pos)[1] + 4
    rr = None
    for _ in range(an + ns + ar):
        rr = pos
        pos += dns.name.from_wire(wire, pos)[1]
        rtype, _, _, rdlen = struct.unpack("!HHIH", wire[pos:pos + 10])
        pos += 10
        rdata = pos
        pos += rdlen
    assert rr is not None and rtype == 250 and pos == len(wire), "no TSIG last"
    alg, used = dns.name.from_wire(wire, rdata)
    p = rdata + used + 6 + 2
    mac_len = struct.unpack("!H", wire[p:p + 2])[0]
    p += 2 + mac_len + 2
    err, other_len = struct.unpack("!HH", wire[p:p + 4])
    return err, wire[p + 4:p + 4 + other_len]


def stats(srv) -> dict:
    return srv.ctl_json("stats")["tsig"]


@pytest.mark.parametrize("key", ["transfer-key", "sha1-key", "sha224-key", "sha384-key",
                                 "sha512-key"])
@pytest.mark.parametrize("tcp", [False, True])
def test_signed_query_gets_signed_answer(srv, key, tcp):
    q = signed_query("www.example.test", "A", key, use_edns=0)
    send = dns.query.tcp if tcp else dns.query.udp
    # dnspython verifies the answer's MAC against the request's and raises if it is wrong.
    r = send(q, srv.host, port=srv.port, timeout=3)
    assert r.rcode() == dns.rcode.NOERROR
    assert r.had_tsig and r.tsig_error == 0
    assert r.keyname == dns.name.from_text(key)
    assert any(rr.name.to_text() == "www.example.test." for rr in r.answer)


def test_unsigned_query_unchanged(srv):
    r = dns.query.udp(dns.message.make_query("www.example.test", "A"), srv.host,
                      port=srv.port, timeout=3)
    assert r.rcode() == dns.rcode.NOERROR and not r.had_tsig


@pytest.mark.parametrize("send", [raw_udp, raw_tcp])
def test_unknown_key_is_badkey(srv, send):
    before = stats(srv)["badkey"]
    q = signed_query("www.example.test", "A", "nokey")
    resp = send(srv, q.to_wire())
    assert rcode_of(resp) == dns.rcode.NOTAUTH
    err, _ = tsig_tail(resp)
    assert err == dns.rcode.BADKEY
    with pytest.raises(dns.tsig.PeerBadKey):
        dns.message.from_wire(resp, keyring=keyring("nokey"), request_mac=q.mac)
    # No zone data in an error answer.
    assert struct.unpack("!HH", resp[6:10]) == (0, 0)
    assert stats(srv)["badkey"] == before + 1


def test_wrong_secret_is_badsig(srv):
    before = stats(srv)["badsig"]
    q = signed_query("www.example.test", "A", "transfer-key", WRONG_SECRET)
    resp = raw_udp(srv, q.to_wire())
    assert rcode_of(resp) == dns.rcode.NOTAUTH
    err, _ = tsig_tail(resp)
    assert err == dns.rcode.BADSIG
    with pytest.raises(dns.tsig.PeerBadSignature):
        dns.message.from_wire(resp, keyring=keyring("transfer-key"), request_mac=q.mac)
    assert stats(srv)["badsig"] == before + 1


def test_tampered_message_is_badsig(srv):
    q = signed_query("www.example.test", "A", "transfer-key")
    wire = bytearray(q.to_wire())
    wire[2] ^= 0x01  # flip RD after signing
    resp = raw_udp(srv, bytes(wire))
    assert rcode_of(resp) == dns.rcode.NOTAUTH
    assert tsig_tail(resp)[0] == dns.rcode.BADSIG


def test_time_skew_is_badtime(srv, monkeypatch):
    before = stats(srv)["badtime"]
    skew = 3600
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - skew)
    q = signed_query("www.example.test", "A", "transfer-key")
    wire = q.to_wire()
    monkeypatch.setattr(time, "time", real)
    resp = raw_udp(srv, wire)
    assert rcode_of(resp) == dns.rcode.NOTAUTH
    err, other = tsig_tail(resp)
    assert err == dns.rcode.BADTIME
    # The answer carries the server's clock so the client can see the skew (RFC 8945 5.2.3).
    server_time = int.from_bytes(other, "big")
    assert abs(server_time - real()) < 5
    with pytest.raises(dns.tsig.PeerBadTime):
        dns.message.from_wire(resp, keyring=keyring("transfer-key"), request_mac=q.mac)
    assert stats(srv)["badtime"] == before + 1


def test_truncated_answer_still_signed(srv):
    # A 512-byte UDP answer that does not fit is truncated, and the TSIG still fits.
    q = signed_query("many.keyonly.test", "TXT", "transfer-key")
    r = dns.query.udp(q, srv.host, port=srv.port, timeout=3)
    assert r.flags & dns.flags.TC
    assert r.had_tsig and r.tsig_error == 0
    resp = raw_udp(srv, signed_query("many.keyonly.test", "TXT", "transfer-key").to_wire())
    assert len(resp) <= 512 and resp[2] & 0x02 and tsig_tail(resp)[0] == 0
    r = dns.query.tcp(q, srv.host, port=srv.port, timeout=3)
    assert not r.flags & dns.flags.TC and r.had_tsig and len(r.answer[0]) == 30


def test_malformed_tsig_is_formerr(srv):
    q = signed_query("www.example.test", "A", "transfer-key")
    wire = q.to_wire()
    resp = raw_udp(srv, wire[:-3] + b"\x00\x05" + wire[-1:])  # other-len beyond the record
    assert rcode_of(resp) == dns.rcode.FORMERR


def transfer(srv, zone: str, key: str | None, secret: str | None = None):
    kw = {}
    if key:
        kw = {"keyring": keyring(key, secret), "keyname": key}
    return dns.zone.from_xfr(dns.query.xfr(srv.host, zone, port=srv.port, timeout=10,
                                           lifetime=60, relativize=False, **kw),
                             relativize=False)


@pytest.mark.parametrize("key", ["transfer-key", "sha512-key"])
def test_axfr_signed_every_message(srv, key):
    # dnspython verifies each message against the one before (RFC 8945 5.3.1).
    z = transfer(srv, "big.test", key)
    assert len(list(z.iterate_rdatas("TXT"))) == BIG_RECORDS


def test_axfr_messages_all_carry_tsig(srv):
    q = signed_query("big.test", "AXFR", "transfer-key")
    with socket.create_connection((srv.host, srv.port), timeout=10) as s:
        s.sendall(tcp_frame(q.to_wire()))
        ctx = None
        messages = 0
        soas = 0
        while soas < 2:
            wire = tcp_read_message(s)
            assert wire is not None
            m = dns.message.from_wire(wire, keyring=keyring("transfer-key"),
                                      request_mac=q.mac, xfr=True, tsig_ctx=ctx,
                                      multi=True)
            assert m.had_tsig, f"message {messages} unsigned"
            ctx = m.tsig_ctx
            messages += 1
            soas += sum(1 for rr in m.answer if rr.rdtype == dns.rdatatype.SOA)
        assert messages > 3


def test_axfr_key_required(srv):
    with pytest.raises(dns.query.TransferError) as e:
        transfer(srv, "big.test", None)
    assert e.value.rcode == dns.rcode.REFUSED
    with pytest.raises(dns.query.TransferError) as e:
        transfer(srv, "keyonly.test", None)
    assert e.value.rcode == dns.rcode.REFUSED


def test_axfr_other_key_not_allowed(srv):
    # A good signature, but not with a key this zone's list names: refused, signed.
    with pytest.raises(dns.query.TransferError) as e:
        transfer(srv, "keyonly.test", "other-key")
    assert e.value.rcode == dns.rcode.REFUSED


def test_axfr_key_only_entry(srv):
    z = transfer(srv, "keyonly.test", "transfer-key")
    assert z.get_rdataset("www.keyonly.test.", "A") is not None


def test_axfr_wrong_secret(srv):
    with pytest.raises(dns.tsig.PeerBadSignature):
        transfer(srv, "big.test", "transfer-key", WRONG_SECRET)


def test_axfr_plain_acl_signed_request(srv):
    # An address-only entry allows signed requests too, and the transfer is signed.
    z = transfer(srv, "example.test", "other-key")
    assert z.get_rdataset("example.test.", "SOA") is not None


@pytest.mark.parametrize("tool", ["kdig", "dig"])
def test_cli_tools_verify(srv, tool):
    exe = shutil.which(tool)
    if not exe:
        pytest.skip(f"{tool} not installed")
    alg, secret = SECRETS["transfer-key"]
    res = subprocess.run([exe, "-p", str(srv.port), f"@{srv.host}", "-y",
                          f"{alg}:transfer-key:{secret}", "www.example.test", "A"],
                         capture_output=True, text=True, timeout=20)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "NOERROR" in out
    assert "TSIG" in out
    # Both report a failed verification loudly; neither may here.
    assert "tsig verify failure" not in out.lower() and "BADSIG" not in out
    assert "failed" not in out.lower(), out
    res = subprocess.run([exe, "-p", str(srv.port), f"@{srv.host}", "-y",
                          f"{alg}:transfer-key:{WRONG_SECRET}", "www.example.test", "A"],
                         capture_output=True, text=True, timeout=20)
    out = res.stdout + res.stderr
    assert "NOTAUTH" in out or "BADSIG" in out, out


# ---- real secondaries

KNOTD = shutil.which("knotd") or "/usr/sbin/knotd"
NAMED = shutil.which("named") or "/usr/sbin/named"


class Secondary:
    def __init__(self, workdir: Path, argv: list[str], port: int, name: str):
        self.workdir = workdir
        self.port = port
        self.name = name
        self.log_path = workdir / f"{name}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    def soa_serial(self, zone: str) -> int | None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited: {self.log_text()}")
        try:
            r = dns.query.udp(dns.message.make_query(zone, "SOA"), "127.0.0.1",
                              port=self.port, timeout=0.5)
        except (dns.exception.Timeout, OSError):
            return None
        if r.rcode() != dns.rcode.NOERROR or not r.answer:
            return None
        return r.answer[0][0].serial

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-3000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def knot_secondary(workdir: Path, primary_port: int, secret: str) -> Secondary:
    workdir.mkdir(parents=True, exist_ok=True)
    for sub in ("run", "db", "zones"):
        (workdir / sub).mkdir(exist_ok=True)
    port = free_port()
    alg = SECRETS["transfer-key"][0]
    conf = workdir / "knot.conf"
    conf.write_text(f"""server:
    rundir: "{workdir / 'run'}"
    listen: 127.0.0.1@{port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: info
database:
    storage: "{workdir / 'db'}"
key:
  - id: transfer-key
    algorithm: {alg}
    secret: {secret}
remote:
  - id: steer
    address: 127.0.0.1@{primary_port}
    key: transfer-key
template:
  - id: default
    storage: "{workdir / 'zones'}"
    journal-content: none
    zonefile-sync: -1
zone:
  - domain: big.test
    master: steer
""")
    return Secondary(workdir, [KNOTD, "-c", str(conf)], port, "knotd")


def named_secondary(workdir: Path, primary_port: int, secret: str) -> Secondary:
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    alg = SECRETS["transfer-key"][0]
    conf = workdir / "named.conf"
    conf.write_text(f"""options {{
    directory "{workdir}";
    pid-file "{workdir}/named.pid";
    session-keyfile "{workdir}/session.key";
    managed-keys-directory "{workdir}";
    listen-on port {port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    dnssec-validation no;
    notify no;
}};
controls {{ }};
key "transfer-key" {{ algorithm {alg}; secret "{secret}"; }};
zone "big.test" {{
    type secondary;
    primaries port {primary_port} {{ 127.0.0.1 key transfer-key; }};
    file "{workdir}/big.test.db";
}};
""")
    return Secondary(workdir, [NAMED, "-g", "-4", "-n", "1", "-c", str(conf)], port, "named")


SECONDARIES = {"knotd": (KNOTD, knot_secondary), "named": (NAMED, named_secondary)}


@pytest.mark.parametrize("kind", sorted(SECONDARIES))
def test_real_secondary_pulls_with_tsig(srv, tmp_path, kind):
    exe, start = SECONDARIES[kind]
    if not Path(exe).exists():
        pytest.fail(f"{exe} missing: install it (scripts/setup-deps.sh)")
    before = stats(srv)["ok"]
    sec = start(tmp_path / kind, srv.port, SECRETS["transfer-key"][1])
    try:
        wait_for(lambda: sec.soa_serial("big.test") == 7, 30,
                 what=f"{kind} to transfer big.test")
        r = dns.query.udp(dns.message.make_query("h3999.big.test", "TXT"), "127.0.0.1",
                          port=sec.port, timeout=2)
        assert r.rcode() == dns.rcode.NOERROR and r.answer, sec.log_text()
    finally:
        sec.stop()
    assert stats(srv)["ok"] > before


@pytest.mark.parametrize("kind", sorted(SECONDARIES))
def test_real_secondary_wrong_key_fails(srv, tmp_path, kind):
    exe, start = SECONDARIES[kind]
    if not Path(exe).exists():
        pytest.fail(f"{exe} missing: install it (scripts/setup-deps.sh)")
    before = stats(srv)["badsig"]
    sec = start(tmp_path / kind, srv.port, WRONG_SECRET)
    try:
        # The secondary's SOA query or AXFR is signed with the wrong secret: steerd answers
        # BADSIG and the secondary never gets the zone.
        wait_for(lambda: stats(srv)["badsig"] > before, 30,
                 what=f"{kind}'s request to be refused")
        time.sleep(1.0)
        assert sec.soa_serial("big.test") is None, sec.log_text()
    finally:
        sec.stop()


def test_generated_key_files(steerd, tmp_path):
    """Key files exactly as tsig-keygen and keymgr -t write them are loaded, and a query
    signed with each key verifies."""
    tools = {"tsig-keygen": ["-a", "hmac-sha512", "bind-made"],
             "keymgr": ["-t", "knot-made", "hmac-sha384"]}
    keys = {}
    files = ""
    for tool, args in tools.items():
        exe = shutil.which(tool) or f"/usr/sbin/{tool}"
        if not Path(exe).exists():
            pytest.fail(f"{tool} missing: install bind9 / knot (scripts/setup-deps.sh)")
        text = subprocess.run([exe, *args], capture_output=True, text=True, check=True,
                              timeout=20).stdout
        path = tmp_path / f"{tool}.key"
        path.write_text(text)
        files += f"  - file: {path}\n"
        name = args[-1] if tool == "tsig-keygen" else args[1]
        alg = args[1] if tool == "tsig-keygen" else args[2]
        secret = text.split("secret", 1)[1].strip(' :"\n').split('"')[0].split()[0]
        keys[name] = (alg, secret)
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config="server:\n  listen: {listen}\n  control-socket: {ctl}\n  workers: 1\n"
                        "  tcp-workers: 1\nkeys:\n" + files + "{zones}")
    for name, (alg, secret) in keys.items():
        q = dns.message.make_query("www.example.test", "A")
        q.use_tsig(dns.tsigkeyring.from_text({name: (alg, secret)}), keyname=name)
        r = dns.query.udp(q, srv.host, port=srv.port, timeout=3)
        assert r.rcode() == dns.rcode.NOERROR and r.had_tsig, name


def test_config_errors(tmp_path):
    zone = ZONES_DIR / "example.test.zone"
    zones = f"zones:\n  - domain: example.test\n    file: {zone}\n"
    cases = [
        ("keys:\n  - { name: k, algorithm: hmac-md5, secret: AQID }\n" + zones,
         ":2: keys.algorithm"),
        ("keys:\n  - { name: k, algorithm: hmac-sha256, secret: \"not base64!\" }\n" + zones,
         ":2: keys: key 'k': secret is not valid base64"),
        ("keys:\n  - { name: k, algorithm: hmac-sha256, secret: AQID }\n"
         "  - { name: K., algorithm: hmac-sha1, secret: AQID }\n" + zones,
         ":3: keys: duplicate key 'K.' (first defined at line 2)"),
        (zones + "    xfr-allow: [{ address: 127.0.0.1, key: nope }]\n",
         ":4: zones: example.test: xfr-allow: unknown key 'nope'"),
    ]
    conf = tmp_path / "steer.yaml"
    for text, want in cases:
        conf.write_text(text)
        res = run_steerd("-c", str(conf), "--check-config")
        out = res.stdout + res.stderr
        assert res.returncode != 0 and f"{conf}{want}" in out, out


def test_signed_query_never_forwarded(steerd):
    """With a forwarder configured, a signed query for a name outside our zones is ours to
    answer (REFUSED, signed), not passed to an upstream with its TSIG."""
    alg, secret = SECRETS["transfer-key"]
    upstream_port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as up:
        up.bind(("127.0.0.1", upstream_port))
        up.settimeout(0.5)
        srv = steerd(zones={"example.test": "example.test.zone"}, config=f"""server:
  listen: {{listen}}
  control-socket: {{ctl}}
  workers: 1
  tcp-workers: 1
keys:
  - {{{{ name: transfer-key, algorithm: {alg}, secret: "{secret}" }}}}
{{zones}}forward:
  allow-recursion: [127.0.0.0/8]
  groups:
    - domain: .
      upstreams: [{{{{ name: u1, address: "127.0.0.1:{upstream_port}" }}}}]
""")
        while True:  # the forwarder's own probes, if any, are not what is checked
            try:
                up.recv(4096)
            except socket.timeout:
                break
        q = signed_query("www.elsewhere.test", "A", "transfer-key")
        r = dns.query.udp(q, srv.host, port=srv.port, timeout=3)
        assert r.rcode() == dns.rcode.REFUSED and r.had_tsig and r.tsig_error == 0
        with pytest.raises(socket.timeout):
            while True:
                data = up.recv(4096)
                assert b"elsewhere" not in data.lower(), "signed query forwarded"


def test_keys_follow_reload(steerd):
    """A reload swaps the keyring with the rest of the view: a removed key is BADKEY at once,
    an added one verifies, and transfers follow the new access list."""
    def config(name: str) -> str:
        alg, secret = SECRETS[name]
        return ("server:\n  listen: {listen}\n  control-socket: {ctl}\n  workers: 1\n"
                "  tcp-workers: 1\nkeys:\n"
                f"  - {{{{ name: {name}, algorithm: {alg}, secret: \"{secret}\" }}}}\n"
                "{zones}"
                f"    xfr-allow: [{{{{ key: {name} }}}}]\n")

    srv = steerd(zones={"example.test": "example.test.zone"}, config=config("transfer-key"))

    def ask(key):
        q = signed_query("www.example.test", "A", key)
        resp = raw_udp(srv, q.to_wire())
        return rcode_of(resp), tsig_tail(resp)[0]

    assert ask("transfer-key") == (dns.rcode.NOERROR, 0)
    assert ask("other-key") == (dns.rcode.NOTAUTH, dns.rcode.BADKEY)
    assert transfer(srv, "example.test", "transfer-key").get_rdataset("example.test.", "SOA")
    text = config("other-key").format(listen=f'["127.0.0.1:{srv.port}"]', ctl=srv.ctl_socket,
                                      zones="zones:\n  - domain: example.test\n    file: "
                                      f"{srv.zone_paths['example.test']}\n")
    srv.config_path.write_text(text)
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    assert ask("other-key") == (dns.rcode.NOERROR, 0)
    assert ask("transfer-key") == (dns.rcode.NOTAUTH, dns.rcode.BADKEY)
    assert transfer(srv, "example.test", "other-key").get_rdataset("example.test.", "SOA")
    with pytest.raises(dns.tsig.PeerBadKey):
        transfer(srv, "example.test", "transfer-key")
