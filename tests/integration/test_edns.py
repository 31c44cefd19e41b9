"""EDNS(0) per RFC 6891 and UDP truncation: OPT echo, BADVERS, payload size honoured, TC=1 when
an answer does not fit, the full answer over TCP, unknown options ignored."""

import struct

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import pytest

from conftest import query

MEDIUM = "medium.example.test"  # 8 TXT, about 900 bytes
BIG = "big.example.test"        # 28 TXT, about 3000 bytes


@pytest.fixture(scope="module")
def srv(module_launcher):
    return module_launcher(zones={"example.test": "example.test.zone"})


def txt_count(r):
    return sum(len(rrset) for rrset in r.answer)


def test_no_edns_no_opt(srv):
    r = srv.udp(query("www.example.test", "A"))
    assert r.edns == -1, "no OPT in the reply to a query without one"


def test_opt_echoed(srv):
    r = srv.udp(query("www.example.test", "A", edns=0, payload=4096))
    assert r.rcode() == dns.rcode.NOERROR and r.answer
    assert r.edns == 0
    assert r.payload == 1232, "we advertise our own ceiling (udp-max-payload, default 1232)"


def test_opt_on_error_replies(srv):
    for name in ("nothere.example.test", "www.example.org"):
        r = srv.udp(query(name, "A", edns=0))
        assert r.edns == 0, f"OPT missing in the {dns.rcode.to_text(r.rcode())} reply"


def test_do_bit_copied(srv):
    """RFC 3225 §3: the DO bit is copied into the response."""
    r = srv.udp(query("www.example.test", "A", edns=0, want_dnssec=True))
    assert r.ednsflags & dns.flags.DO
    r = srv.udp(query("www.example.test", "A", edns=0))
    assert not r.ednsflags & dns.flags.DO


@pytest.mark.parametrize("version", [1, 2, 255])
def test_badvers(srv, version):
    r = srv.udp(query("www.example.test", "A", edns=version))
    assert r.rcode() == dns.rcode.BADVERS
    assert r.edns == 0, "BADVERS carries the highest version we support"
    assert r.answer == []


def test_unknown_options_ignored(srv):
    opts = [dns.edns.GenericOption(65001, b"unknown option data"),
            dns.edns.GenericOption(65500, b"")]
    r = srv.udp(query("www.example.test", "A", edns=0, options=opts))
    assert r.rcode() == dns.rcode.NOERROR and r.answer
    assert not [o for o in r.options if o.otype in (65001, 65500)], "unknown options not echoed"


def opt_rr(payload=1232, owner=b"\x00"):
    return owner + struct.pack("!HHIH", 41, payload, 0, 0)


def raw_query(arcount, additional):
    head = struct.pack("!6H", 0x4242, 0x0100, 1, 0, 0, arcount)
    return head + b"\x03www\x07example\x04test\x00\x00\x01\x00\x01" + additional


def test_two_opt_records_formerr(srv):
    """RFC 6891 §6.1.1: more than one OPT is FORMERR."""
    reply = srv.udp_raw(raw_query(2, opt_rr() + opt_rr()))
    assert reply is not None
    assert struct.unpack("!H", reply[:2])[0] == 0x4242
    assert struct.unpack("!H", reply[2:4])[0] & 0xF == dns.rcode.FORMERR


# --- truncation ----------------------------------------------------------------------------

def check_truncated(srv, q, limit):
    wire = srv.udp_raw(q.to_wire())
    assert wire is not None
    assert len(wire) <= limit, f"{len(wire)} bytes over UDP, limit {limit}"
    r = dns.message.from_wire(wire, raise_on_truncation=False)
    assert r.flags & dns.flags.TC, "an answer that does not fit must set TC=1"
    assert r.rcode() == dns.rcode.NOERROR
    if q.edns >= 0:
        assert r.edns == 0, "a truncated reply still carries OPT (RFC 6891 §7)"
    return r


def test_no_edns_limit_512(srv):
    check_truncated(srv, query(MEDIUM, "TXT"), 512)


def test_edns_payload_fits(srv):
    r = srv.udp(query(MEDIUM, "TXT", edns=0, payload=1232))
    assert not r.flags & dns.flags.TC and txt_count(r) == 8


def test_edns_small_payload_honoured(srv):
    check_truncated(srv, query(MEDIUM, "TXT", edns=0, payload=700), 700)


def test_edns_payload_below_512_means_512(srv):
    """RFC 6891 §6.2.3: values below 512 are treated as 512."""
    check_truncated(srv, query(MEDIUM, "TXT", edns=0, payload=100), 512)
    r = srv.udp(query("www.example.test", "A", edns=0, payload=100))
    assert r.answer and not r.flags & dns.flags.TC


def test_server_ceiling_caps_client_payload(srv):
    check_truncated(srv, query(BIG, "TXT", edns=0, payload=4096), 1232)


def test_tcp_gets_full_answer(srv):
    r = srv.tcp(query(BIG, "TXT"))
    assert not r.flags & dns.flags.TC and txt_count(r) == 28
    r = srv.tcp(query(BIG, "TXT", edns=0, payload=512))
    assert not r.flags & dns.flags.TC and txt_count(r) == 28


def test_truncation_counted(srv):
    before = srv.ctl_json("stats")
    check_truncated(srv, query(MEDIUM, "TXT"), 512)
    after = srv.ctl_json("stats")
    from test_steerctl import counter
    assert counter(after, "truncated") >= counter(before, "truncated") + 1


def test_udp_max_payload_config(steerd):
    """server.udp-max-payload raises our ceiling; 4096 lets the 3 kB answer through."""
    config = """
server:
  listen: {listen}
  control-socket: {ctl}
  udp-max-payload: 4096
{zones}"""
    srv = steerd(zones={"example.test": "example.test.zone"}, config=config)
    r = srv.udp(query(BIG, "TXT", edns=0, payload=4096))
    assert not r.flags & dns.flags.TC and txt_count(r) == 28
    assert r.payload == 4096
    check_truncated(srv, query(BIG, "TXT", edns=0, payload=2000), 2000)
    check_truncated(srv, query(BIG, "TXT"), 512)
