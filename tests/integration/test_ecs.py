"""EDNS Client Subnet (RFC 7871) on zone answers: strict parsing, scope 0 echoed.

Zone data does not depend on the client, so a valid ECS option is echoed with SCOPE
PREFIX-LENGTH 0 (RFC 7871 7.2.1); a malformed one gets FORMERR (RFC 7871 6).
"""
import struct

import dns.edns
import dns.message
import dns.query
import dns.rcode
import pytest

ECS = 8


@pytest.fixture(scope="module")
def srv(module_launcher):
    return module_launcher(zones={"example.test": "example.test.zone"})


def ask(srv, options, tcp=False):
    q = dns.message.make_query("www.example.test", "A", use_edns=0, options=options)
    if tcp:
        return dns.query.tcp(q, "127.0.0.1", port=srv.port, timeout=3)
    return dns.query.udp(q, "127.0.0.1", port=srv.port, timeout=3)


def ecs_of(resp):
    found = [o for o in resp.options if o.otype == ECS]
    assert len(found) == 1, resp
    return found[0]


@pytest.mark.parametrize("subnet,prefix", [("192.0.2.0", 24), ("2001:db8::", 56),
                                           ("0.0.0.0", 0), ("198.51.100.7", 32)])
@pytest.mark.parametrize("tcp", [False, True])
def test_valid_ecs_is_echoed_with_scope_zero(srv, subnet, prefix, tcp):
    resp = ask(srv, [dns.edns.ECSOption(subnet, prefix, 0)], tcp)
    assert resp.rcode() == dns.rcode.NOERROR
    assert resp.answer, resp
    echoed = ecs_of(resp)
    assert echoed.address == subnet
    assert echoed.srclen == prefix
    assert echoed.scopelen == 0


@pytest.mark.parametrize("payload,why", [
    (struct.pack("!HBB", 3, 0, 0), "unknown family"),
    (struct.pack("!HBB4s", 1, 33, 0, bytes(4)) + b"\0", "IPv4 source prefix > 32"),
    (struct.pack("!HBB", 2, 129, 0) + bytes(17), "IPv6 source prefix > 128"),
    (struct.pack("!HBB3s", 1, 23, 0, bytes([192, 0, 3])), "address bits beyond the prefix"),
    (struct.pack("!HBB2s", 1, 24, 0, bytes([192, 0])), "address field too short"),
    (struct.pack("!HBB4s", 1, 24, 0, bytes([192, 0, 2, 0])), "address field too long"),
    (struct.pack("!HBB3s", 1, 24, 24, bytes([192, 0, 2])), "non-zero scope in a query"),
    (struct.pack("!HB", 1, 24), "option shorter than its fixed part"),
])
def test_malformed_ecs_gets_formerr(srv, payload, why):
    resp = ask(srv, [dns.edns.GenericOption(ECS, payload)])
    assert resp.rcode() == dns.rcode.FORMERR, why
    assert not resp.answer, why
    assert not [o for o in resp.options if o.otype == ECS], why


def test_two_ecs_options_get_formerr(srv):
    opt = dns.edns.ECSOption("192.0.2.0", 24, 0)
    resp = ask(srv, [opt, opt])
    assert resp.rcode() == dns.rcode.FORMERR


def test_no_ecs_in_answer_without_ecs_in_query(srv):
    resp = ask(srv, [])
    assert resp.rcode() == dns.rcode.NOERROR
    assert not [o for o in resp.options if o.otype == ECS]
