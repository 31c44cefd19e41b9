"""Query answering per RFC 1034 §4.3.2, RFC 2308, RFC 4592, RFC 8020, RFC 8482 and RFC 6604,
against tests/data/zones/integration/example.test.zone (read it next to these tests)."""

import struct

import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdatatype
import pytest

from conftest import find_rrset, query, rrset_texts

NOERROR, NXDOMAIN, REFUSED = dns.rcode.NOERROR, dns.rcode.NXDOMAIN, dns.rcode.REFUSED
FORMERR, NOTIMP = dns.rcode.FORMERR, dns.rcode.NOTIMP


@pytest.fixture(scope="module")
def srv(module_launcher):
    return module_launcher(zones={
        "example.test": "example.test.zone",
        "sub2.example.test": "sub2.example.test.zone",
        "negttl.test": "negttl.test.zone",
    })


def aa(r):
    return bool(r.flags & dns.flags.AA)


def soa_in_authority(r, zone, ttl):
    """The authority section is exactly the zone's SOA with the negative-caching TTL."""
    assert len(r.authority) == 1, r
    soa = r.authority[0]
    assert soa.rdtype == dns.rdatatype.SOA and soa.name.to_text() == zone + ".", r
    assert soa.ttl == ttl, f"negative TTL {soa.ttl}, want {ttl} (RFC 2308 §3)"


# --- positive answers -----------------------------------------------------------------------

def test_authoritative_answer(srv):
    r = srv.udp(query("www.example.test", "A"))
    assert r.rcode() == NOERROR and aa(r)
    assert not r.flags & dns.flags.RA, "an authoritative-only server must not set RA"
    assert rrset_texts(r.answer) == {"www.example.test. 3600 IN A 192.0.2.10"}
    assert r.authority == [], "RFC 1034 answers need no NS in authority (minimal responses)"


def test_rd_flag_copied(srv):
    q = query("www.example.test", "A")
    q.flags &= ~dns.flags.RD
    r = srv.udp(q)
    assert not r.flags & dns.flags.RD
    q.flags |= dns.flags.RD
    r = srv.udp(q)
    assert r.flags & dns.flags.RD and r.id == q.id


def test_lookup_is_case_insensitive(srv):
    r = srv.udp(query("mixed-case.example.test", "A"))
    assert r.rcode() == NOERROR and len(r.answer) == 1
    assert r.answer[0][0].address == "192.0.2.99"


def test_question_case_preserved(srv):
    """0x20 mixed-case queries: the question comes back byte for byte (draft-vixie-dnsext-0x20)."""
    q = query("wWw.ExAmPlE.tEsT", "A")
    wire = q.to_wire()
    reply = srv.udp_raw(wire)
    assert reply is not None
    qlen = len(wire) - 12
    assert reply[12:12 + qlen] == wire[12:12 + qlen]
    r = dns.message.from_wire(reply)
    assert r.answer and r.answer[0][0].address == "192.0.2.10"


def test_answer_owner_compressed(srv):
    """The answer's owner name points at the question (RFC 1035 §4.1.4)."""
    wire = query("www.example.test", "A").to_wire()
    reply = srv.udp_raw(wire)
    assert reply[len(wire):len(wire) + 2] == b"\xc0\x0c"


# --- negative answers (RFC 2308) -----------------------------------------------------------

def test_nxdomain_with_soa(srv):
    r = srv.udp(query("nothere.example.test", "A"))
    assert r.rcode() == NXDOMAIN and aa(r) and r.answer == []
    soa_in_authority(r, "example.test", 300)  # min(SOA TTL 3600, MINIMUM 300)


def test_nodata_with_soa(srv):
    r = srv.udp(query("www.example.test", "MX"))
    assert r.rcode() == NOERROR and aa(r) and r.answer == []
    soa_in_authority(r, "example.test", 300)


def test_negative_ttl_is_soa_ttl_when_smaller(srv):
    r = srv.udp(query("nothere.negttl.test", "A"))
    assert r.rcode() == NXDOMAIN
    soa_in_authority(r, "negttl.test", 60)  # min(SOA TTL 60, MINIMUM 900)
    r = srv.udp(query("ns1.negttl.test", "TXT"))
    assert r.rcode() == NOERROR and r.answer == []
    soa_in_authority(r, "negttl.test", 60)


@pytest.mark.parametrize("name", ["c.ent.example.test", "b.c.ent.example.test"])
def test_empty_non_terminal_is_nodata(srv, name):
    r = srv.udp(query(name, "A"))
    assert r.rcode() == NOERROR and aa(r) and r.answer == []
    soa_in_authority(r, "example.test", 300)


@pytest.mark.parametrize("name", ["x.nothere.example.test", "z.a.b.c.ent.example.test",
                                  "deep.er.nothere.example.test"])
def test_nxdomain_below_nonexistent_name(srv, name):
    """RFC 8020: nothing exists below a name that does not exist."""
    r = srv.udp(query(name, "A"))
    assert r.rcode() == NXDOMAIN and aa(r) and r.answer == []
    soa_in_authority(r, "example.test", 300)


def test_apex_nodata(srv):
    r = srv.udp(query("example.test", "AAAA"))
    assert r.rcode() == NOERROR and aa(r) and r.answer == []
    soa_in_authority(r, "example.test", 300)


def test_apex_soa_and_ns(srv):
    r = srv.udp(query("example.test", "SOA"))
    assert r.rcode() == NOERROR and aa(r)
    assert r.answer[0][0].serial == 2024010101
    r = srv.udp(query("example.test", "NS"))
    assert r.rcode() == NOERROR and aa(r)
    assert {rd.target.to_text() for rd in r.answer[0]} == {"ns1.example.test.",
                                                           "ns2.example.test."}


# --- CNAME (RFC 1034 §3.6.2, §4.3.2 step 3a; RFC 6604) -------------------------------------

def test_cname_chain_followed_in_zone(srv):
    r = srv.udp(query("chain1.example.test", "A"))
    assert r.rcode() == NOERROR and aa(r)
    assert [(rr.name.to_text(), dns.rdatatype.to_text(rr.rdtype)) for rr in r.answer] == [
        ("chain1.example.test.", "CNAME"),
        ("chain2.example.test.", "CNAME"),
        ("chain3.example.test.", "A"),
    ]
    assert rrset_texts(r.answer[2:]) == {"chain3.example.test. 600 IN A 192.0.2.30"}


def test_cname_query_for_cname_type(srv):
    r = srv.udp(query("alias.example.test", "CNAME"))
    assert r.rcode() == NOERROR and aa(r)
    assert rrset_texts(r.answer) == {"alias.example.test. 3600 IN CNAME www.example.test."}


def test_cname_any_type(srv):
    r = srv.udp(query("alias.example.test", "AAAA"))
    assert rrset_texts(r.answer) == {"alias.example.test. 3600 IN CNAME www.example.test.",
                                     "www.example.test. 3600 IN AAAA 2001:db8::10"}


def test_cname_to_outside_zone(srv):
    r = srv.udp(query("outside.example.test", "A"))
    assert r.rcode() == NOERROR and aa(r)
    assert rrset_texts(r.answer) == {"outside.example.test. 3600 IN CNAME www.example.org."}


def test_cname_to_nxdomain(srv):
    """RFC 6604: the rcode is that of the last name in the chain."""
    r = srv.udp(query("dangling.example.test", "A"))
    assert r.rcode() == NXDOMAIN and aa(r)
    assert rrset_texts(r.answer) == {
        "dangling.example.test. 3600 IN CNAME nothere.example.test."}
    soa_in_authority(r, "example.test", 300)


def test_cname_into_wildcard(srv):
    r = srv.udp(query("towild.example.test", "A"))
    assert r.rcode() == NOERROR and aa(r)
    assert rrset_texts(r.answer) == {"towild.example.test. 3600 IN CNAME foo.wild.example.test.",
                                     "foo.wild.example.test. 3600 IN A 192.0.2.40"}


def test_cname_loop_terminates(srv):
    r = srv.udp(query("loop1.example.test", "A"))
    assert r.rcode() in (NOERROR, dns.rcode.SERVFAIL)
    assert find_rrset(r.answer, "loop1.example.test", "CNAME") is not None
    assert len(r.answer) <= 2
    assert srv.udp(query("www.example.test", "A")).rcode() == NOERROR


# --- wildcards (RFC 4592) -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["foo.wild.example.test", "a.b.wild.example.test",
                                  "FOO.Wild.example.test"])
def test_wildcard_synthesis(srv, name):
    r = srv.udp(query(name, "A"))
    assert r.rcode() == NOERROR and aa(r)
    assert len(r.answer) == 1 and r.answer[0].name.to_text().lower() == name.lower() + "."
    assert r.answer[0][0].address == "192.0.2.40" and r.answer[0].ttl == 3600


def test_wildcard_nodata(srv):
    r = srv.udp(query("foo.wild.example.test", "AAAA"))
    assert r.rcode() == NOERROR and aa(r) and r.answer == []
    soa_in_authority(r, "example.test", 300)


def test_wildcard_owner_itself(srv):
    r = srv.udp(query("*.wild.example.test", "A"))
    assert rrset_texts(r.answer) == {"*.wild.example.test. 3600 IN A 192.0.2.40"}


def test_wildcard_does_not_cover_existing_names(srv):
    r = srv.udp(query("host.wild.example.test", "A"))
    assert rrset_texts(r.answer) == {"host.wild.example.test. 3600 IN A 192.0.2.41"}
    r = srv.udp(query("host.wild.example.test", "MX"))
    assert r.rcode() == NOERROR and r.answer == [], "explicit node: no synthesis for other types"


def test_wildcard_blocked_below_existing_name(srv):
    """RFC 4592 §2.2.1: the closest encloser is host.wild, which has no wildcard child."""
    r = srv.udp(query("x.host.wild.example.test", "A"))
    assert r.rcode() == NXDOMAIN and aa(r) and r.answer == []


def test_wildcard_mx_gets_additional(srv):
    r = srv.udp(query("foo.wild.example.test", "MX"))
    assert rrset_texts(r.answer) == {"foo.wild.example.test. 3600 IN MX 10 mail.example.test."}
    assert find_rrset(r.additional, "mail.example.test", "A") is not None


# --- delegations ----------------------------------------------------------------------------

def check_referral(r):
    assert r.rcode() == NOERROR
    assert not aa(r), "a referral is not authoritative (RFC 1034 §4.3.2 step 3b)"
    assert r.answer == []
    ns = find_rrset(r.authority, "sub.example.test", "NS")
    assert ns is not None and len(r.authority) == 1, r
    assert {rd.target.to_text() for rd in ns} == {"ns1.sub.example.test.", "ns.example.org."}
    assert rrset_texts(r.additional) >= {"ns1.sub.example.test. 3600 IN A 192.0.2.53",
                                         "ns1.sub.example.test. 3600 IN AAAA 2001:db8::53"}


@pytest.mark.parametrize("name,rdtype", [("www.sub.example.test", "A"),
                                         ("sub.example.test", "NS"),
                                         ("sub.example.test", "A"),
                                         ("deep.below.sub.example.test", "MX"),
                                         ("ns1.sub.example.test", "A")])
def test_referral_with_glue(srv, name, rdtype):
    check_referral(srv.udp(query(name, rdtype)))


def test_ds_answered_by_parent(srv):
    """RFC 4035 §3.1.4.1: DS lives on the parent side of the cut, so the parent answers it."""
    r = srv.udp(query("sub.example.test", "DS"))
    assert r.rcode() == NOERROR and aa(r) and r.answer == []
    soa_in_authority(r, "example.test", 300)


def test_child_zone_longest_match(srv):
    r = srv.udp(query("www.sub2.example.test", "A"))
    assert r.rcode() == NOERROR and aa(r)
    assert rrset_texts(r.answer) == {"www.sub2.example.test. 1800 IN A 192.0.2.154"}
    r = srv.udp(query("sub2.example.test", "SOA"))
    assert aa(r) and r.answer[0][0].serial == 7
    r = srv.udp(query("sub2.example.test", "NS"))
    assert aa(r) and r.answer and r.authority == []
    r = srv.udp(query("nothere.sub2.example.test", "A"))
    assert r.rcode() == NXDOMAIN and aa(r)
    soa_in_authority(r, "sub2.example.test", 120)


# --- outside our zones ----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["www.example.org", "test", ".", "example.testx",
                                  "xexample.test"])
def test_refused_outside_served_zones(srv, name):
    r = srv.udp(query(name, "A"))
    assert r.rcode() == REFUSED and not aa(r)
    assert r.answer == [] and r.authority == []


# --- additional section (RFC 1034 §4.3.2 step 6) -------------------------------------------

def test_mx_additional(srv):
    r = srv.udp(query("example.test", "MX"))
    assert r.rcode() == NOERROR and len(r.answer[0]) == 2
    assert rrset_texts(r.additional) >= {"mail.example.test. 3600 IN A 192.0.2.25",
                                         "mail.example.test. 3600 IN AAAA 2001:db8::25"}
    assert find_rrset(r.additional, "mail2.example.org", "A") is None


def test_srv_additional(srv):
    r = srv.udp(query("_sip._tcp.example.test", "SRV"))
    assert r.rcode() == NOERROR and aa(r)
    assert rrset_texts(r.additional) >= {"sip.example.test. 3600 IN A 192.0.2.60",
                                         "sip.example.test. 3600 IN AAAA 2001:db8::60"}


def test_ns_additional(srv):
    r = srv.udp(query("example.test", "NS"))
    assert rrset_texts(r.additional) >= {
        "ns1.example.test. 3600 IN A 192.0.2.1", "ns1.example.test. 3600 IN AAAA 2001:db8::1",
        "ns2.example.test. 3600 IN A 192.0.2.2", "ns2.example.test. 3600 IN AAAA 2001:db8::2"}


# --- ANY (RFC 8482) -------------------------------------------------------------------------

@pytest.mark.parametrize("name,types", [
    ("www.example.test", {"A", "AAAA", "TXT", "HINFO"}),
    ("example.test", {"SOA", "NS", "MX", "TXT", "HINFO"}),
])
def test_any_is_minimal(srv, name, types):
    r = srv.udp(query(name, "ANY"))
    assert r.rcode() == NOERROR and aa(r)
    assert len(r.answer) == 1, f"RFC 8482: one RRset, not everything: {r.answer}"
    assert dns.rdatatype.to_text(r.answer[0].rdtype) in types


def test_any_nonexistent(srv):
    r = srv.udp(query("nothere.example.test", "ANY"))
    assert r.rcode() == NXDOMAIN


# --- malformed and unsupported requests ----------------------------------------------------

def header(qid=0x1234, flags=0x0100, qd=1, an=0, ns=0, ar=0):
    return struct.pack("!6H", qid, flags, qd, an, ns, ar)


QUESTION = b"\x03www\x07example\x04test\x00\x00\x01\x00\x01"


def parse_reply(reply):
    assert reply is not None, "no reply"
    qid, flags = struct.unpack("!HH", reply[:4])
    return qid, flags, flags & 0xF


def test_qr_set_is_never_answered(srv):
    reply = srv.udp_raw(header(flags=0x8100) + QUESTION, timeout=1.0)
    assert reply is None, "a packet with QR=1 must not be answered (loops, reflection)"
    assert srv.udp(query("www.example.test", "A")).rcode() == NOERROR


@pytest.mark.parametrize("wire", [b"", b"\x12", b"\x12\x34\x01\x00\x00"],
                         ids=["empty", "1 byte", "short header"])
def test_shorter_than_header_is_dropped(srv, wire):
    assert srv.udp_raw(wire, timeout=0.5) is None
    assert srv.udp(query("www.example.test", "A")).rcode() == NOERROR


@pytest.mark.parametrize("wire", [
    header(qd=1),                                  # question missing
    header(qd=1) + b"\x03www\x07exam",             # name cut short
    header(qd=1) + b"\x03www\x00\x00\x01",         # type/class cut short
    header(qd=2) + QUESTION + QUESTION,            # two questions
    header(qd=1) + b"\xc0\x0c\x00\x01\x00\x01",    # pointer loop in the question
    header(qd=1) + b"\x40" + b"a" * 64 + b"\x00\x00\x01\x00\x01",  # label longer than 63
], ids=["no question", "cut name", "cut type", "qdcount 2", "pointer loop", "long label"])
def test_malformed_gets_formerr(srv, wire):
    qid, flags, rcode = parse_reply(srv.udp_raw(wire))
    assert qid == 0x1234 and flags & 0x8000 and rcode == FORMERR
    assert srv.udp(query("www.example.test", "A")).rcode() == NOERROR


def test_no_question_is_formerr(srv):
    qid, flags, rcode = parse_reply(srv.udp_raw(header(qd=0)))
    assert qid == 0x1234 and rcode == FORMERR


@pytest.mark.parametrize("opcode", [1, 2, 3, 5, 6, 15])
def test_unknown_opcode_notimp(srv, opcode):
    qid, flags, rcode = parse_reply(srv.udp_raw(header(flags=0x0100 | opcode << 11) + QUESTION))
    assert qid == 0x1234 and flags & 0x8000
    assert (flags >> 11) & 0xF == opcode, "the opcode is copied into the response"
    assert rcode == NOTIMP


def test_notify_for_a_primary_zone_notauth(srv):
    """NOTIFY (opcode 4, RFC 1996) is implemented for secondary zones (test_secondary.py); for
    a zone loaded from a file it is NOTAUTH, as Knot answers."""
    qid, flags, rcode = parse_reply(srv.udp_raw(header(flags=4 << 11) + QUESTION))
    assert qid == 0x1234 and flags & 0x8000 and (flags >> 11) & 0xF == 4
    assert rcode == 9  # NOTAUTH


def test_random_garbage_never_crashes(srv):
    import random
    rng = random.Random(2)
    base = query("www.example.test", "MX", edns=0).to_wire()
    for _ in range(200):
        wire = bytearray(base)
        for _ in range(rng.randint(1, 6)):
            wire[rng.randrange(len(wire))] = rng.randrange(256)
        wire = bytes(wire[:rng.randint(12, len(wire))])
        srv.udp_raw(wire, timeout=0.02)
    assert srv.alive()
    assert srv.udp(query("www.example.test", "A")).rcode() == NOERROR
