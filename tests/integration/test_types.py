"""Every record type of tests/data/zones/integration/types.test.zone comes back exactly as
dnspython reads the zone file: common types, DNSSEC types, SVCB/HTTPS and RFC 3597 unknown
types (whose rdata is opaque: never compressed or rewritten)."""

import dns.flags
import dns.name
import dns.rcode
import dns.rdatatype
import dns.zone
import pytest

from conftest import ZONES_DIR, query

ORIGIN = "types.test"
ZONE = dns.zone.from_file(str(ZONES_DIR / "types.test.zone"), ORIGIN, relativize=False)
CUT = dns.name.from_text("child.types.test")


def answerable_rrsets():
    """(name, type, rrset) for every RRset answered authoritatively: not below the zone cut
    (a referral), not the NS at the cut, not RRSIG (queried on its own it is special), not
    NSEC3: Knot keeps NSEC3 records in a tree of their own and answers NXDOMAIN for their owner
    names, which no client asks for anyway; the AXFR test checks that they load and transfer."""
    out = []
    for name, rdataset in ZONE.iterate_rdatasets():
        if rdataset.rdtype in (dns.rdatatype.RRSIG, dns.rdatatype.NSEC3):
            continue
        if name.is_subdomain(CUT) and not (name == CUT and rdataset.rdtype == dns.rdatatype.DS):
            continue
        out.append((name.to_text(), dns.rdatatype.to_text(rdataset.rdtype), rdataset))
    return out


CASES = answerable_rrsets()


@pytest.fixture(scope="module")
def srv(module_launcher):
    return module_launcher(zones={ORIGIN: "types.test.zone"})


def check(r, name, rdtype, rdataset):
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    assert not r.flags & dns.flags.TC
    assert len(r.answer) == 1, r.answer
    got = r.answer[0]
    assert got.name == dns.name.from_text(name)
    assert dns.rdatatype.to_text(got.rdtype) == rdtype
    assert got.ttl == rdataset.ttl
    assert set(got) == set(rdataset), f"{name} {rdtype}: {got} != {rdataset}"


@pytest.mark.parametrize("name,rdtype,rdataset", CASES, ids=[f"{n} {t}" for n, t, _ in CASES])
def test_rrset_udp(srv, name, rdtype, rdataset):
    check(srv.udp(query(name, rdtype, edns=0, payload=4096)), name, rdtype, rdataset)


@pytest.mark.parametrize("name,rdtype,rdataset", CASES, ids=[f"{n} {t}" for n, t, _ in CASES])
def test_rrset_tcp(srv, name, rdtype, rdataset):
    check(srv.tcp(query(name, rdtype)), name, rdtype, rdataset)


def test_unknown_type_rdata_not_rewritten(srv):
    """The name inside TYPE65402's opaque rdata matches the zone apex but must not become a
    compression pointer (RFC 3597 §4)."""
    wire = query("opaque.types.test", "TYPE65402").to_wire()
    reply = srv.udp_raw(wire)
    assert b"\x05types\x04test\x00\x00\x01" in reply


def test_unknown_type_nodata(srv):
    r = srv.udp(query("unknown.types.test", "TYPE65403"))
    assert r.rcode() == dns.rcode.NOERROR and r.answer == []
    assert r.authority and r.authority[0].rdtype == dns.rdatatype.SOA
