"""Differential test: the same zones served by Knot DNS and by steerd must answer a corpus of
a few thousand queries identically.

Compared per query: rcode (extended included), opcode, every header flag, the question with
its case (0x20), EDNS presence, version, DO echo and options, and each section as a set of
RRsets (owner, class, type, TTL, rdata; names inside compressible rdata expanded, any other
rdata byte for byte). The few places where steerd may legitimately differ from Knot are rules
in diff_support.Comparator, each citing its RFC: records inside a truncated reply (RFC 2181
section 9), the RRset chosen for a minimal ANY answer (RFC 8482 section 4.1) and FORMERR for
a question Knot cannot parse and silently drops (RFC 1035 section 4.1.1).

The servers: knotd from Debian (package "knot"), and steerd from $STEERD or
build/src/daemon/steerd, both on 127.0.0.1 with free ports.
"""

import collections
import struct
import time
from pathlib import Path

import dns.flags
import dns.message
import dns.name
import dns.rrset
import pytest

import diff_support as ds

MAX_REPORTED = 20  # mismatches printed in full; the rest are counted by reason


@pytest.fixture(scope="module")
def corpus():
    return ds.build_corpus()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    binary = ds.find_steerd()
    if binary is None or not binary.exists():
        pytest.fail("steerd not built: set STEERD or build build/src/daemon/steerd")
    workdir = tmp_path_factory.mktemp("differential")
    knot = ds.start_knotd(workdir)
    try:
        steer = ds.start_steerd(binary, workdir)
    except Exception:
        knot.stop()
        raise
    yield knot, steer
    knot.stop()
    problems = steer.stop()
    assert not problems, "\n".join(problems)


def test_corpus_is_deterministic_and_covers_the_zones(corpus):
    again = ds.build_corpus()
    assert [q.wire for q in corpus] == [q.wire for q in again], "corpus not deterministic"
    assert len(corpus) >= 3000
    tcp = [q for q in corpus if q.tcp]
    assert 500 <= len(tcp) < len(corpus) // 2
    names, wildcards = ds.load_zone_names()
    asked = {q.qname.canonicalize() for q in corpus if q.qname is not None}
    missing = [str(n) for n in names if n not in asked]
    assert not missing, f"names never asked: {missing}"
    assert len(wildcards) >= 8
    parsed = [dns.message.from_wire(q.wire) for q in corpus if q.qname is not None]
    payloads = collections.Counter(m.payload if m.edns >= 0 else None for m in parsed)
    assert all(payloads[p] >= 100 for p in (None, 512, 1232, 4096)), payloads
    assert sum(m.ednsflags & dns.flags.DO != 0 for m in parsed) >= 100


def _reply(flags, question, answer=(), authority=(), additional=(), edns=None):
    """A hand-made reply for the comparator's own tests."""
    m = dns.message.make_response(dns.message.make_query(question, "A"))
    m.flags = flags
    m.use_edns(edns if edns is not None else False)
    for sec, rrs in ((m.answer, answer), (m.authority, authority), (m.additional, additional)):
        for text in rrs:
            name, ttl, rdclass, rdtype, rdata = text.split(maxsplit=4)
            sec.append(dns.rrset.from_text(name, int(ttl), rdclass, rdtype, rdata))
    return ds.Reply.parse(m.to_wire())


def test_comparator_flags_differences():
    """The comparison must be able to fail: every kind of difference is reported."""
    q = ds.Query("test", b"", qname=dns.name.from_text("www.diff.test."), qtype=1)
    comp = ds.Comparator(None, None)  # no rule that asks a server again is reached here
    base = _reply(0x8400, "www.diff.test.", ["www.diff.test. 3600 IN A 192.0.2.80"])
    assert comp.compare(q, base, base) == []
    cases = {
        "missing record": _reply(0x8400, "www.diff.test."),
        "other rdata": _reply(0x8400, "www.diff.test.", ["www.diff.test. 3600 IN A 192.0.2.81"]),
        "other TTL": _reply(0x8400, "www.diff.test.", ["www.diff.test. 300 IN A 192.0.2.80"]),
        "AA clear": _reply(0x8000, "www.diff.test.", ["www.diff.test. 3600 IN A 192.0.2.80"]),
        "question case": _reply(0x8400, "WWW.diff.test.", ["www.diff.test. 3600 IN A 192.0.2.80"]),
        "extra authority": _reply(0x8400, "www.diff.test.", ["www.diff.test. 3600 IN A 192.0.2.80"],
                                  ["diff.test. 3600 IN NS ns1.diff.test."]),
        "EDNS added": _reply(0x8400, "www.diff.test.", ["www.diff.test. 3600 IN A 192.0.2.80"],
                             edns=0),
        "no reply": ds.Reply(None),
    }
    for what, other in cases.items():
        assert comp.compare(q, base, other), f"{what} not reported"
    dup = bytearray(base.wire)
    dup[7] = 2  # ANCOUNT 2: the same record twice
    dup += base.wire[-(2 + 10 + 4):]
    assert comp.compare(q, base, ds.Reply.parse(bytes(dup))), "duplicate record not reported"


def test_compressed_rdata_of_a_new_type_is_a_difference():
    """RFC 3597 section 4: names in the rdata of types after RFC 1035 are never compressed;
    the comparator reads such rdata verbatim, so a compressed SRV target differs."""
    header = struct.pack("!6H", 1, 0x8400, 1, 1, 0, 0)
    question = dns.name.from_text("_sip._tcp.diff.test.").to_wire() + struct.pack("!HH", 33, 1)
    fixed = struct.pack("!HHH", 10, 60, 5060)
    target = dns.name.from_text("diff.test.").to_wire()
    pointer = struct.pack("!H", 0xC000 | (12 + question.index(target)))

    def reply(rdata):
        return ds.Reply.parse(header + question + b"\xc0\x0c"
                              + struct.pack("!HHIH", 33, 1, 60, len(rdata)) + rdata)

    plain, compressed = reply(fixed + target), reply(fixed + pointer)
    assert plain.msg is not None and compressed.msg is not None
    assert ds.diff_sections(plain.msg, compressed.msg), "compression inside SRV not detected"
    # ... while a compressed MX exchange is expanded and equals the plain one
    mx = [ds.parse_msg(header + question.replace(b"\x00\x21", b"\x00\x0f") + b"\xc0\x0c"
                       + struct.pack("!HHIH", 15, 1, 60, 2 + len(t)) + b"\x00\x0a" + t)
          for t in (target, pointer)]
    assert ds.diff_sections(*mx) == []


def test_differential_against_knot(servers, corpus):
    knot, steer = servers
    start = time.monotonic()
    mismatches = ds.run_corpus(knot, steer, corpus)
    elapsed = time.monotonic() - start
    print(f"{len(corpus)} queries ({sum(q.tcp for q in corpus)} over TCP) in {elapsed:.1f} s, "
          f"{len(mismatches)} mismatches")
    if mismatches:
        report = Path(knot.log_path).parent / "mismatches.txt"
        report.write_text("\n\n".join(m.report() for m in mismatches) + "\n")
        pytest.fail(f"all mismatches are in {report}\n\n"
                    + ds.summary(mismatches, len(corpus), MAX_REPORTED), pytrace=False)
    assert steer.proc.poll() is None, "steerd exited during the test:\n" + steer.log_tail()
