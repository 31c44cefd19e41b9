"""The caching forwarder on loopback, against a real Unbound as the upstream: zone names stay
authoritative, allow-recursion, answers and their cache, TCP pipelining order, TC=1 over TCP,
in-request retry, RD=0, negative caching, serve-stale, reply source on wildcard binds.

The failover lab with namespaces and several links is tests/integration/test_fwd_failover.py.
"""

import os
import socket
import time

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from conftest import free_port, query, tcp_frame, tcp_read_message
from unbound_support import UNBOUND, LocalUnbound

pytestmark = pytest.mark.skipif(not os.path.exists(UNBOUND), reason="needs unbound")

BIG_TXT = " ".join(f'"{"x" * 200}-{i}"' for i in range(15))  # ~3 kB: TC=1 over UDP

LOCAL = [
    'local-zone: "test." nodefault',
    'local-zone: "fwd.test." static',
    'local-data: "fwd.test. 300 IN SOA ns.fwd.test. host.fwd.test. 1 3600 600 86400 60"',
    'local-data: "www.fwd.test. 300 IN A 198.51.100.1"',
    'local-data: "mail.fwd.test. 300 IN A 198.51.100.2"',
    'local-data: "short.fwd.test. 1 IN A 198.51.100.3"',
    f"local-data: 'big.fwd.test. 300 IN TXT {BIG_TXT}'",
]


@pytest.fixture
def upstream(tmp_path):
    u = LocalUnbound(tmp_path, LOCAL, "www.fwd.test")
    yield u
    u.stop()


def forwarder(steerd, upstreams, allow=("127.0.0.0/8",), listen=None, extra=()):
    args = []
    for u in upstreams:
        args += ["--forward", u]
    for a in allow:
        args += ["--allow-recursion", a]
    return steerd(zones={"example.test": "example.test.zone"}, listen=listen,
                  args=[*args, *extra])


def rq(name, rdtype="A", rd=True, **kw):
    q = query(name, rdtype, **kw)
    if rd:
        q.flags |= dns.flags.RD
    else:
        q.flags &= ~dns.flags.RD
    return q


def addresses(r):
    return sorted(rd.address for rrset in r.answer for rd in rrset
                  if rrset.rdtype == dns.rdatatype.A)


def test_forwarded_and_authoritative_names(steerd, upstream):
    srv = forwarder(steerd, [upstream.addr])
    r = srv.udp(rq("www.fwd.test"))
    assert r.rcode() == dns.rcode.NOERROR and addresses(r) == ["198.51.100.1"]
    assert r.flags & dns.flags.RA and not r.flags & dns.flags.AA
    own = srv.udp(rq("www.example.test"))
    assert own.flags & dns.flags.AA and own.answer[0][0].address == "192.0.2.10"
    # The answer is in the cache: it survives the upstream.
    upstream.stop()
    again = srv.udp(rq("www.fwd.test"))
    assert addresses(again) == ["198.51.100.1"] and again.answer[0].ttl <= 300
    stats = srv.ctl_json("stats")["forward"]
    assert stats["forwarded"] >= 1 and stats["cache_hits"] >= 1


def test_recursion_only_for_allowed_clients(steerd, upstream):
    srv = forwarder(steerd, [upstream.addr], allow=("127.0.0.2/32",))
    r = dns.query.udp(rq("www.fwd.test"), srv.host, port=srv.port, timeout=2,
                      source="127.0.0.1")
    assert r.rcode() == dns.rcode.REFUSED and not r.answer
    # Our own zone is answered to everyone.
    own = dns.query.udp(rq("www.example.test"), srv.host, port=srv.port, timeout=2,
                        source="127.0.0.1")
    assert own.rcode() == dns.rcode.NOERROR and own.flags & dns.flags.AA
    ok = dns.query.udp(rq("www.fwd.test"), srv.host, port=srv.port, timeout=2,
                       source="127.0.0.2")
    assert addresses(ok) == ["198.51.100.1"]
    # A cached answer is not leaked to a client outside the list either.
    r = dns.query.udp(rq("www.fwd.test"), srv.host, port=srv.port, timeout=2,
                      source="127.0.0.1")
    assert r.rcode() == dns.rcode.REFUSED
    assert srv.ctl_json("stats")["forward"]["recursion_refused"] == 2


def test_no_forwarding_without_allow_recursion(steerd, upstream):
    srv = forwarder(steerd, [upstream.addr], allow=())
    assert srv.udp(rq("www.fwd.test")).rcode() == dns.rcode.REFUSED


def test_tcp_pipelined_answers_stay_in_order(steerd, upstream):
    srv = forwarder(steerd, [upstream.addr])
    names = ["www.fwd.test", "www.example.test", "mail.fwd.test", "nope.fwd.test"]
    msgs = [rq(n) for n in names]
    with srv.tcp_connect() as s:
        s.sendall(b"".join(tcp_frame(m.to_wire()) for m in msgs))
        got = [dns.message.from_wire(tcp_read_message(s)) for _ in msgs]
    assert [g.id for g in got] == [m.id for m in msgs]
    assert addresses(got[0]) == ["198.51.100.1"]
    assert got[1].flags & dns.flags.AA
    assert addresses(got[2]) == ["198.51.100.2"]
    assert got[3].rcode() == dns.rcode.NXDOMAIN


def test_truncated_upstream_answer_is_fetched_over_tcp(steerd, upstream):
    srv = forwarder(steerd, [upstream.addr])
    udp = srv.udp(rq("big.fwd.test", "TXT", edns=0, payload=1232))
    assert udp.flags & dns.flags.TC  # too big for the client's 1232 bytes
    full = srv.tcp(rq("big.fwd.test", "TXT"))
    assert full.rcode() == dns.rcode.NOERROR
    assert len(full.answer[0][0].strings) == 15
    # Our UDP ceiling (server.udp-max-payload, 1232) applies to forwarded answers too.
    big = srv.udp(rq("big.fwd.test", "TXT", edns=0, payload=4096))
    assert big.flags & dns.flags.TC and not big.answer


def test_question_case_is_preserved(steerd, upstream):
    srv = forwarder(steerd, [upstream.addr])
    for _ in range(2):  # from the upstream, then from the cache
        q = rq("WwW.FwD.tEsT")
        wire = srv.udp_raw(q.to_wire())
        r = dns.message.from_wire(wire)
        assert r.question[0].name.to_text() == "WwW.FwD.tEsT."
        assert addresses(r) == ["198.51.100.1"]


def test_negative_answers_are_cached(steerd, upstream):
    srv = forwarder(steerd, [upstream.addr])
    r = srv.udp(rq("missing.fwd.test"))
    assert r.rcode() == dns.rcode.NXDOMAIN and r.authority
    upstream.stop()
    again = srv.udp(rq("missing.fwd.test"))
    assert again.rcode() == dns.rcode.NXDOMAIN
    assert 0 < again.authority[0].ttl <= 60


def test_rd0_is_answered_from_cache_only(steerd, upstream):
    srv = forwarder(steerd, [upstream.addr])
    before = srv.ctl_json("stats")["forward"]["forwarded"]
    r = srv.udp(rq("mail.fwd.test", rd=False))
    assert r.rcode() == dns.rcode.SERVFAIL
    assert srv.ctl_json("stats")["forward"]["forwarded"] == before
    srv.udp(rq("mail.fwd.test"))
    r = srv.udp(rq("mail.fwd.test", rd=False))
    assert addresses(r) == ["198.51.100.2"]


def test_in_request_retry_to_the_next_upstream(steerd, upstream):
    # A socket that takes the datagrams and never answers: no ICMP, a silent upstream.
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    try:
        dead = f"127.0.0.1:{silent.getsockname()[1]}"
        srv = forwarder(steerd, [dead, upstream.addr])
        for i, name in enumerate(["www.fwd.test", "mail.fwd.test", "nx1.fwd.test"]):
            t0 = time.monotonic()
            r = srv.udp(rq(name), timeout=3)
            took = time.monotonic() - t0
            assert r.rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN), name
            assert took < 1.0, f"{name} took {took:.2f}s"
    finally:
        silent.close()


def test_stale_answer_when_no_upstream_answers(steerd, upstream):
    srv = forwarder(steerd, [upstream.addr])
    assert addresses(srv.udp(rq("short.fwd.test"))) == ["198.51.100.3"]
    upstream.stop()
    time.sleep(1.5)  # the entry (TTL 1) expired
    t0 = time.monotonic()
    r = srv.udp(rq("short.fwd.test"), timeout=4)
    assert addresses(r) == ["198.51.100.3"]
    assert r.answer[0].ttl == 30  # RFC 8767 stale TTL
    assert time.monotonic() - t0 < 2.5
    # Nothing cached: SERVFAIL within the request budget, not a hang.
    t0 = time.monotonic()
    r = srv.udp(rq("never.fwd.test"), timeout=6)
    assert r.rcode() == dns.rcode.SERVFAIL
    assert time.monotonic() - t0 < 4


def test_forwarded_reply_leaves_from_the_address_asked(steerd, upstream):
    port = free_port()
    forwarder(steerd, [upstream.addr], listen=[("0.0.0.0", port)])
    for host in ("127.0.0.1", "127.0.0.3"):
        # dnspython checks the reply's source address against where it sent the query.
        r = dns.query.udp(rq("www.fwd.test" if host == "127.0.0.1" else "mail.fwd.test"),
                          host, port=port, timeout=2)
        assert r.rcode() == dns.rcode.NOERROR and addresses(r)


def test_forwarded_answers_carry_the_nsid(steerd, upstream):
    """The identity comes back in the NSID option (RFC 5001) of forwarded answers too: the
    engine's (a miss) and the query thread's (the cache hit), and only when asked for."""
    import dns.edns
    srv = steerd(zones={"example.test": "example.test.zone"}, config=f"""server:
  listen: {{listen}}
  control-socket: {{ctl}}
  workers: 1
  tcp-workers: 1
  identity: node-7
{{zones}}forward:
  allow-recursion: [127.0.0.0/8]
  groups:
    - domain: .
      upstreams: [{{{{ name: u1, address: "{upstream.addr}" }}}}]
""")

    def ask(name, nsid=True, tcp=False):
        q = dns.message.make_query(name, "A", use_edns=0, payload=1232,
                                   options=[dns.edns.GenericOption(dns.edns.NSID, b"")]
                                   if nsid else [])
        return srv.tcp(q) if tcp else srv.udp(q)

    def nsid(r):
        return [o.to_wire() for o in r.options if o.otype == dns.edns.NSID]

    miss = ask("mail.fwd.test")
    assert addresses(miss) == ["198.51.100.2"] and nsid(miss) == [b"node-7"]
    hit = ask("mail.fwd.test")
    assert addresses(hit) == ["198.51.100.2"] and nsid(hit) == [b"node-7"]
    assert nsid(ask("mail.fwd.test", tcp=True)) == [b"node-7"]
    assert nsid(ask("mail.fwd.test", nsid=False)) == []
    assert nsid(ask("www.example.test")) == [b"node-7"]  # authoritative, as before
