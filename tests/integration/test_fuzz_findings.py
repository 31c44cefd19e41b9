"""What the fuzz targets found, sent to a live daemon: each input once crashed a parser or
tripped an invariant in the code a daemon runs (the input itself stays in tests/fuzz/corpus/,
replayed by the fuzz suite); here the daemon must answer it and keep serving."""

import dns.edns
import dns.message
import dns.rcode

from conftest import SERVER_CONFIG, query

IDENTITY = "n" * 255  # the longest server.identity there is
# A 255-octet name: three 63-byte labels and one of 61.
LONG_NAME = ".".join(["a" * 63] * 3 + ["b" * 61]) + "."


def test_long_question_with_ecs_and_nsid_at_512_bytes(steerd):
    """fuzz_answer: a 255-octet question, ECS for an IPv6 /128 and NSID at the minimum UDP size
    left no room for the OPT record the answer had reserved (an assertion, so an abort of the
    daemon). The question now yields to the reservation: the answer omits it and carries the
    OPT with both options."""
    config = SERVER_CONFIG.replace("  workers: 1\n", f"  workers: 1\n  identity: {IDENTITY}\n")
    srv = steerd(zones={"example.test": "example.test.zone"}, config=config)
    q = dns.message.make_query(LONG_NAME, "A", use_edns=0, payload=512, options=[
        dns.edns.ECSOption("2001:db8::1", 128), dns.edns.GenericOption(dns.edns.NSID, b"")])
    wire = srv.udp_raw(q.to_wire())
    assert wire is not None, "no answer (did the daemon die?)"
    assert len(wire) <= 512
    r = dns.message.from_wire(wire)
    assert r.id == q.id and r.edns == 0
    assert not r.question, "the question cannot fit next to the OPT, so it is left out"
    codes = {o.otype: o for o in r.options}
    assert codes[dns.edns.NSID].data == IDENTITY.encode()
    assert dns.edns.ECS in codes
    # and it still serves
    ok = srv.udp(query("www.example.test", "A"))
    assert ok.rcode() == dns.rcode.NOERROR and ok.answer
    assert srv.alive()
