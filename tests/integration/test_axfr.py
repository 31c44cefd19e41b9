"""Outgoing zone transfers (AXFR, RFC 5936) over TCP for addresses in the zone's xfr-allow,
REFUSED for everyone else and never over UDP."""

import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.zone
import pytest

from conftest import ZONES_DIR, query, tcp_frame, tcp_read_message

CONFIG = """
server:
  listen: {listen}
  control-socket: {ctl}
zones:
  - domain: example.test
    file: {dir}/example.test.zone
    xfr-allow: [127.0.0.1]
  - domain: types.test
    file: {dir}/types.test.zone
    xfr-allow: ["::1", 192.0.2.0/24]
  - domain: big.test
    file: {dir}/big.test.zone
    xfr-allow: [127.0.0.0/8, "::1/128"]
  - domain: closed.test
    file: {dir}/closed.test.zone
"""

BIG_RECORDS = 6000


def big_zone():
    head = ("$ORIGIN big.test.\n$TTL 300\n@ SOA ns1 hostmaster 99 7200 3600 1209600 300\n"
            "@ NS ns1\nns1 A 192.0.2.1\n")
    body = "".join(f"host{i} A 10.0.{i >> 8 & 255}.{i & 255}\n"
                   f"host{i} TXT \"record number {i} of the big zone\"\n"
                   for i in range(BIG_RECORDS // 2))
    return head + body


@pytest.fixture(scope="module")
def srv(module_launcher):
    closed = ("$ORIGIN closed.test.\n@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns1\n"
              "ns1 300 A 192.0.2.1\n")
    return module_launcher(
        zones={"example.test": "example.test.zone", "types.test": "types.test.zone",
               "big.test": big_zone(), "closed.test": closed},
        config=CONFIG, listen=["127.0.0.1", "::1"])


def port_for(srv, host):
    return next(p for h, p in srv.listen if h == host)


def transfer(srv, zone, host="127.0.0.1"):
    return dns.zone.from_xfr(dns.query.xfr(host, zone, port=port_for(srv, host), timeout=10,
                                           lifetime=60, relativize=False), relativize=False)


def records(zone):
    # Owner names compare case-insensitively: like Knot, steerd stores them lowercased.
    return sorted(f"{name.to_text().lower()} {ttl} {rd.rdtype} {rd.to_text()}"
                  for name, ttl, rd in zone.iterate_rdatas())


def assert_same_zone(got, path, origin):
    want = dns.zone.from_file(str(path), origin, relativize=False)
    got_rrs, want_rrs = records(got), records(want)
    missing = set(want_rrs) - set(got_rrs)
    extra = set(got_rrs) - set(want_rrs)
    assert not missing and not extra, f"missing {sorted(missing)[:5]}, extra {sorted(extra)[:5]}"
    assert len(got_rrs) == len(want_rrs)


def test_axfr_allowed(srv):
    got = transfer(srv, "example.test")
    assert_same_zone(got, ZONES_DIR / "example.test.zone", "example.test")


def test_axfr_all_types_over_ipv6(srv):
    got = transfer(srv, "types.test", host="::1")
    assert_same_zone(got, ZONES_DIR / "types.test.zone", "types.test")


def test_axfr_large_zone_many_messages(srv):
    port = port_for(srv, "127.0.0.1")
    messages = list(dns.query.xfr("127.0.0.1", "big.test", port=port, timeout=10, lifetime=60,
                                  relativize=False))
    assert len(messages) > 1, "a 6000-record zone does not fit one 64 kB message"
    first, last = messages[0].answer[0], messages[-1].answer[-1]
    assert first.rdtype == dns.rdatatype.SOA and last.rdtype == dns.rdatatype.SOA
    got = dns.zone.from_xfr(iter(messages), relativize=False)
    assert len(list(got.iterate_rdatas())) == BIG_RECORDS + 3


@pytest.mark.parametrize("zone,host", [("example.test", "::1"), ("types.test", "127.0.0.1"),
                                       ("closed.test", "127.0.0.1"), ("closed.test", "::1")])
def test_axfr_refused(srv, zone, host):
    with pytest.raises(dns.query.TransferError) as exc:
        transfer(srv, zone, host=host)
    assert exc.value.rcode == dns.rcode.REFUSED


def test_axfr_not_our_zone(srv):
    with pytest.raises(dns.query.TransferError) as exc:
        transfer(srv, "example.org")
    assert exc.value.rcode in (dns.rcode.REFUSED, dns.rcode.NOTAUTH)


def test_axfr_over_udp_is_not_a_transfer(srv):
    r = srv.udp(query("example.test", "AXFR"))
    assert r.rcode() != dns.rcode.NOERROR or not r.answer
    assert not any(rr.rdtype == dns.rdatatype.A for rr in r.answer)


def test_axfr_then_query_on_same_connection(srv):
    """RFC 5936 §4.1: the connection stays usable after the transfer."""
    with srv.tcp_connect(timeout=10) as s:
        q = query("example.test", "AXFR")
        s.sendall(tcp_frame(q.to_wire()))
        soa_seen = 0
        while soa_seen < 2:
            wire = tcp_read_message(s)
            assert wire is not None, "connection closed during the transfer"
            r = dns.message.from_wire(wire, xfr=True, origin=None, one_rr_per_rrset=True)
            assert r.id == q.id and r.rcode() == dns.rcode.NOERROR
            soa_seen += sum(1 for rr in r.answer if rr.rdtype == dns.rdatatype.SOA)
        q2 = query("www.example.test", "A")
        s.sendall(tcp_frame(q2.to_wire()))
        r2 = dns.message.from_wire(tcp_read_message(s))
        assert r2.id == q2.id and r2.answer


def test_axfr_stats(srv):
    from test_steerctl import counter
    from conftest import wait_for
    before = srv.ctl_json("stats")
    transfer(srv, "example.test")
    with pytest.raises(dns.query.TransferError):
        transfer(srv, "closed.test")
    wait_for(lambda: counter(srv.ctl_json("stats"), "axfr") == counter(before, "axfr") + 1
             and counter(srv.ctl_json("stats"), "axfr_refused")
             == counter(before, "axfr_refused") + 1, 5, what="axfr counters")
