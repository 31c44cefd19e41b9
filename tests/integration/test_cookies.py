"""DNS Cookies (RFC 7873, RFC 9018) end to end: BIND's dig (+cookie validates the echoed client
cookie), Knot's kdig and dnspython against steerd; malformed options, `cookies.require`,
two nodes sharing a secret, RRL's exemption for clients with a valid server cookie, and the
forwarder's answers (relayed from a real Unbound, cached, its own errors)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.request

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import pytest

from conftest import free_port, run_steerd, server_config
from unbound_support import UNBOUND, LocalUnbound

SECRET = "e5e973e5a6b2a43f48e7dc849e37bfcf"
OTHER_SECRET = "00112233445566778899aabbccddeeff"
COOKIE = 10
BADCOOKIE = 23
CLIENT = bytes.fromhex("2464c4abcf10c957")

DIG = shutil.which("dig")
KDIG = shutil.which("kdig")


def config(cookies: str, extra: str = "", http_port: int | None = None) -> str:
    text = f"cookies: {{ {cookies} }}\n" + extra
    if http_port:
        text += f"http:\n  listen: [127.0.0.1:{http_port}]\n  read-only-open: true\n"
    return server_config(text)


def with_cookie(data: bytes, name: str = "www.example.test", rdtype: str = "A"):
    q = dns.message.make_query(name, rdtype)
    q.use_edns(0, payload=1232, options=[dns.edns.GenericOption(COOKIE, data)])
    return q


def cookie_of(r: dns.message.Message) -> bytes | None:
    for opt in r.options:
        if opt.otype == COOKIE:
            return opt.to_wire() if hasattr(opt, "to_wire") else opt.data
    return None


def server_cookie(r: dns.message.Message) -> bytes:
    c = cookie_of(r)
    assert c is not None, f"no COOKIE option in\n{r}"
    assert len(c) == 24 and c[:8] == CLIENT, c.hex()
    assert c[8] == 1 and c[9:12] == b"\0\0\0", c.hex()  # RFC 9018 version 1, reserved
    return c[8:]


def metric(http_port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    assert m, f"{name} missing"
    return float(m.group(1))


def test_dnspython_cookie_round_trip(steerd):
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=config(f"secret: {SECRET}", http_port=port))
    r = srv.udp(with_cookie(CLIENT))
    assert r.rcode() == dns.rcode.NOERROR and r.answer
    sc = server_cookie(r)
    # Presented again, the (fresh) cookie is valid: echoed as it is.
    r2 = srv.udp(with_cookie(CLIENT + sc))
    assert r2.rcode() == dns.rcode.NOERROR and r2.answer
    assert server_cookie(r2) == sc
    # A forged hash is not ours: the client gets a new, valid one, and still its answer.
    forged = sc[:-1] + bytes([sc[-1] ^ 1])
    r3 = srv.udp(with_cookie(CLIENT + forged))
    assert r3.rcode() == dns.rcode.NOERROR and r3.answer
    assert server_cookie(r3) != forged
    # Over TCP too.
    r4 = srv.tcp(with_cookie(CLIENT + sc))
    assert server_cookie(r4) == sc
    assert metric(port, "steer_cookies_queries_total") == 4
    assert metric(port, "steer_cookies_valid_total") == 2
    assert metric(port, "steer_cookies_invalid_total") == 1
    # No COOKIE option, no COOKIE in the answer.
    q = dns.message.make_query("www.example.test", "A", use_edns=0)
    assert cookie_of(srv.udp(q)) is None


@pytest.mark.parametrize("length", [1, 7, 9, 15, 41])
def test_malformed_cookie_is_formerr(steerd, length):
    srv = steerd(zones={"example.test": "example.test.zone"}, config=config("enable: true"))
    r = srv.udp(with_cookie(bytes(range(length))))
    assert r.rcode() == dns.rcode.FORMERR, r
    assert not r.answer


def test_disabled_ignores_cookies(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"}, config=config("enable: false"))
    r = srv.udp(with_cookie(CLIENT))
    assert r.rcode() == dns.rcode.NOERROR and r.answer and cookie_of(r) is None


@pytest.mark.skipif(DIG is None, reason="dig (bind9-dnsutils) not installed")
def test_dig_validates_cookie(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"}, config=config(f"secret: {SECRET}"))
    out = subprocess.run([DIG, "+cookie", "-p", str(srv.port), f"@{srv.host}",
                          "www.example.test", "A"], capture_output=True, text=True,
                         timeout=10).stdout
    m = re.search(r"; COOKIE: ([0-9a-f]+) \(good\)", out)
    assert m, out
    assert "192.0.2.10" in out and "status: NOERROR" in out
    full = m.group(1)
    assert len(full) == 48
    # dig sends the whole cookie back; the valid server cookie is echoed unchanged.
    out = subprocess.run([DIG, f"+cookie={full}", "-p", str(srv.port), f"@{srv.host}",
                          "www.example.test", "A"], capture_output=True, text=True,
                         timeout=10).stdout
    assert f"; COOKIE: {full} (good)" in out, out


@pytest.mark.skipif(KDIG is None, reason="kdig (knot-dnsutils) not installed")
def test_kdig_cookie(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"}, config=config(f"secret: {SECRET}"))
    out = subprocess.run([KDIG, "+cookie", "-p", str(srv.port), f"@{srv.host}",
                          "www.example.test", "A"], capture_output=True, text=True,
                         timeout=10).stdout
    m = re.search(r"COOKIE: ([0-9A-Fa-f]{16})([0-9A-Fa-f]{32})", out)
    assert m, out
    assert m.group(2)[:8] == "01000000", out
    assert "192.0.2.10" in out


def test_require_badcookie_then_success(steerd):
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=config(f"secret: {SECRET}, require: true", http_port=port))
    r = srv.udp(with_cookie(CLIENT))
    assert r.rcode() == BADCOOKIE, r
    assert not r.answer and not r.authority
    sc = server_cookie(r)
    r2 = srv.udp(with_cookie(CLIENT + sc))
    assert r2.rcode() == dns.rcode.NOERROR and r2.answer
    # A wrong server cookie is as good as none.
    r3 = srv.udp(with_cookie(CLIENT + bytes(16)))
    assert r3.rcode() == BADCOOKIE
    # TCP never needs one; clients without cookies are answered as before (BIND's rule).
    assert srv.tcp(with_cookie(CLIENT)).rcode() == dns.rcode.NOERROR
    q = dns.message.make_query("www.example.test", "A", use_edns=0)
    assert srv.udp(q).rcode() == dns.rcode.NOERROR
    assert metric(port, "steer_cookies_badcookie_total") == 2
    stats = srv.ctl_json("stats")
    assert stats["cookies"]["badcookie"] == 2 and stats["cookies"]["valid"] == 1, stats
    assert stats["rrl"] == {"dropped": 0, "slipped": 0, "logged": 0}


def test_two_nodes_share_secret(steerd, tmp_path):
    secret_file = tmp_path / "cookie.secret"
    secret_file.write_text(f"{OTHER_SECRET}\n{SECRET}\n")
    a = steerd(zones={"example.test": "example.test.zone"},
               config=config(f"secret: {SECRET}, require: true"))
    b = steerd(zones={"example.test": "example.test.zone"},
               config=config(f"secret: {SECRET}, require: true"))
    # Rolled over: the old secret is line 2, still accepted (answered with a new cookie).
    c = steerd(zones={"example.test": "example.test.zone"},
               config=config(f"secret-file: {secret_file}, require: true"))
    lone = steerd(zones={"example.test": "example.test.zone"}, config=config("require: true"))
    sc = server_cookie(a.udp(with_cookie(CLIENT)))
    rb = b.udp(with_cookie(CLIENT + sc))
    assert rb.rcode() == dns.rcode.NOERROR and rb.answer
    assert server_cookie(rb) == sc
    rc = c.udp(with_cookie(CLIENT + sc))
    assert rc.rcode() == dns.rcode.NOERROR and rc.answer
    fresh = server_cookie(rc)
    assert fresh != sc
    assert a.udp(with_cookie(CLIENT + fresh)).rcode() == BADCOOKIE  # a lacks the new secret
    # A node with its own random secret does not accept it.
    assert lone.udp(with_cookie(CLIENT + sc)).rcode() == BADCOOKIE


def test_random_secret_survives_reload(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"}, config=config("require: true"))
    sc = server_cookie(srv.udp(with_cookie(CLIENT)))
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    assert srv.udp(with_cookie(CLIENT + sc)).rcode() == dns.rcode.NOERROR


def test_rrl_exempts_valid_cookie(steerd):
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=config(f"secret: {SECRET}",
                               "rrl: { rate: 2, slip: 0, window: 5s }\n", http_port=port))
    sc = server_cookie(srv.udp(with_cookie(CLIENT)))
    answered = 0
    for _ in range(40):
        try:
            srv.udp(with_cookie(CLIENT + sc), timeout=0.5)
            answered += 1
        except dns.exception.Timeout:
            pass
    assert answered == 40
    # The same queries with only a client cookie are limited (rate 2/s, nothing slips).
    answered = 0
    for _ in range(40):
        try:
            srv.udp(with_cookie(CLIENT), timeout=0.2)
            answered += 1
        except dns.exception.Timeout:
            pass
    assert answered <= 8, answered
    assert metric(port, "steer_rrl_dropped_total") >= 32


@pytest.mark.parametrize("section,error", [
    ("cookies: { secret: abc }", "cookies.secret: expected 32 hex digits (16 bytes), got 3"),
    ("cookies: { secret: 0123456789abcdef0123456789abcdeg }", "not all hex digits"),
    ("cookies: { previous-secret: 0123456789abcdef0123456789abcdef }",
     "'previous-secret' needs 'secret'"),
    ("cookies: { secret-file: bad.secret }", "bad.secret: line 1 is not 32 hex digits"),
    ("cookies: { secret-file: nothere.secret }", "cannot open"),
    ("rrl: { rate: 5, ipv6-prefix: 129 }", "rrl.ipv6-prefix: expected 1 to 128, got '129'"),
    ("rrl: { rate: 5, slip: 11 }", "rrl.slip"),
])
def test_config_errors(tmp_path, section, error):
    (tmp_path / "bad.secret").write_text("deadbeef\n")
    (tmp_path / "z.zone").write_text("$ORIGIN example.test.\n$TTL 300\n"
                                     "@ SOA ns hostmaster 1 3600 900 604800 300\n@ NS ns\n"
                                     "ns A 192.0.2.1\n")
    conf = tmp_path / "steer.yaml"
    conf.write_text(f"zones:\n  - {{ domain: example.test, file: z.zone }}\n{section}\n")
    res = run_steerd("--check-config", "-c", str(conf), cwd=tmp_path)
    assert res.returncode != 0
    assert error in res.stderr + res.stdout, res.stderr


# ---- The caching forwarder: relayed, cached and its own answers carry our cookie too ----

needs_unbound = pytest.mark.skipif(not os.path.exists(UNBOUND), reason="needs unbound")

# 53 bytes of message around the TXT data: with 446 bytes of strings the answer is 499 bytes,
# which fits a 512-byte client, but not with the 28 bytes of our COOKIE option.
MID_TXT = f'"{"x" * 200}" "{"y" * 200}" "{"z" * 43}"'
FWD_LOCAL = [
    'local-zone: "test." nodefault',
    'local-zone: "fwd.test." static',
    'local-data: "fwd.test. 300 IN SOA ns.fwd.test. host.fwd.test. 1 3600 600 86400 60"',
    'local-data: "www.fwd.test. 300 IN A 198.51.100.1"',
    'local-data: "mail.fwd.test. 300 IN A 198.51.100.2"',
    'local-data: "new.fwd.test. 300 IN A 198.51.100.4"',
    f"local-data: 'mid.fwd.test. 300 IN TXT {MID_TXT}'",
]


@pytest.fixture
def upstream(tmp_path):
    u = LocalUnbound(tmp_path, FWD_LOCAL, "www.fwd.test")
    yield u
    u.stop()


def forwarder_config(upstream, cookies: str, http_port: int) -> str:
    return config(cookies, f"""forward:
  allow-recursion: [127.0.0.0/8]
  groups:
    - domain: .
      upstreams: [{{ name: u1, address: "{upstream.addr}" }}]
""", http_port=http_port)


def fwd_query(data: bytes | None, name: str, rdtype: str = "A", payload: int = 1232):
    q = dns.message.make_query(name, rdtype, use_edns=0, payload=payload,
                               options=[dns.edns.GenericOption(COOKIE, data)] if data else [])
    return q


def a_records(r):
    return sorted(rd.address for rrset in r.answer for rd in rrset if rrset.rdtype == 1)


@needs_unbound
def test_forwarded_answers_carry_cookie(steerd, upstream):
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=forwarder_config(upstream, f"secret: {SECRET}", port))
    miss = srv.udp(fwd_query(CLIENT, "mail.fwd.test"))  # relayed by the engine
    assert a_records(miss) == ["198.51.100.2"], miss
    sc = server_cookie(miss)
    hit = srv.udp(fwd_query(CLIENT + sc, "mail.fwd.test"))  # from the cache, query thread
    assert a_records(hit) == ["198.51.100.2"] and server_cookie(hit) == sc
    tcp_miss = srv.tcp(fwd_query(CLIENT + sc, "www.fwd.test"))
    assert a_records(tcp_miss) == ["198.51.100.1"] and server_cookie(tcp_miss) == sc
    tcp_hit = srv.tcp(fwd_query(CLIENT, "www.fwd.test"))
    assert server_cookie(tcp_hit)
    # RD=0 and not cached: the query thread's own SERVFAIL, with the cookie.
    norec = fwd_query(CLIENT, "nothere.fwd.test")
    norec.flags &= ~dns.flags.RD
    err = srv.udp(norec)
    assert err.rcode() == dns.rcode.SERVFAIL and server_cookie(err)
    # A forged server cookie gets a fresh one and the answer.
    forged = srv.udp(fwd_query(CLIENT + bytes(16), "mail.fwd.test"))
    assert a_records(forged) == ["198.51.100.2"] and server_cookie(forged) != bytes(16)
    assert cookie_of(srv.udp(fwd_query(None, "mail.fwd.test"))) is None
    assert metric(port, "steer_cookies_queries_total") == 6
    assert metric(port, "steer_cookies_valid_total") == 2
    assert metric(port, "steer_cookies_invalid_total") == 1


@needs_unbound
def test_forwarded_cookie_counts_against_udp_size(steerd, upstream):
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=forwarder_config(upstream, f"secret: {SECRET}", free_port()))
    for _ in range(2):  # relayed, then from the cache
        plain = srv.udp(fwd_query(None, "mid.fwd.test", "TXT", payload=512))
        assert not plain.flags & dns.flags.TC and plain.answer, plain
        assert len(plain.to_wire()) > 512 - 28, len(plain.to_wire())
        cut = srv.udp(fwd_query(CLIENT, "mid.fwd.test", "TXT", payload=512))
        assert cut.flags & dns.flags.TC and not cut.answer, cut
        assert server_cookie(cut)
    full = srv.tcp(fwd_query(CLIENT, "mid.fwd.test", "TXT", payload=512))
    assert full.answer and server_cookie(full)


@needs_unbound
@pytest.mark.skipif(DIG is None, reason="dig (bind9-dnsutils) not installed")
def test_dig_cookie_through_forwarder(steerd, upstream):
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=forwarder_config(upstream, f"secret: {SECRET}", free_port()))

    def dig(*args):
        return subprocess.run([DIG, *args, "-p", str(srv.port), f"@{srv.host}",
                               "mail.fwd.test", "A"], capture_output=True, text=True,
                              timeout=10).stdout

    out = dig("+cookie")
    m = re.search(r"; COOKIE: ([0-9a-f]{48}) \(good\)", out)
    assert m and "198.51.100.2" in out, out
    out = dig(f"+cookie={m.group(1)}")  # from the cache now
    assert f"; COOKIE: {m.group(1)} (good)" in out and "198.51.100.2" in out, out


@needs_unbound
def test_require_badcookie_before_forwarding(steerd, upstream):
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 config=forwarder_config(upstream, f"secret: {SECRET}, require: true", port))
    r = srv.udp(fwd_query(CLIENT, "new.fwd.test"))
    assert r.rcode() == BADCOOKIE and not r.answer, r
    sc = server_cookie(r)
    assert metric(port, "steer_forwarder_requests_total") == 0  # no upstream was asked
    r2 = srv.udp(fwd_query(CLIENT + sc, "new.fwd.test"))
    assert r2.rcode() == dns.rcode.NOERROR and a_records(r2) == ["198.51.100.4"]
    assert server_cookie(r2) == sc
    # Cached now, still BADCOOKIE without a valid server cookie; TCP and cookie-less
    # queries are answered (RFC 7873 5.2.1, 5.2.3).
    assert srv.udp(fwd_query(CLIENT + bytes(16), "new.fwd.test")).rcode() == BADCOOKIE
    assert a_records(srv.tcp(fwd_query(CLIENT, "new.fwd.test"))) == ["198.51.100.4"]
    assert a_records(srv.udp(fwd_query(None, "new.fwd.test"))) == ["198.51.100.4"]
    assert metric(port, "steer_forwarder_requests_total") == 1
    assert metric(port, "steer_cookies_badcookie_total") == 2
