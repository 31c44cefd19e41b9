#!/usr/bin/python3
"""Writes the seed corpus of the fuzz targets: tests/fuzz/corpus/<target>/seed-*.

Deterministic (fixed seed), so re-running it changes nothing unless this file changed. Inputs
found by libFuzzer live next to the seeds under their SHA-1 names and are left alone.

    /usr/bin/python3 tests/fuzz/make_corpus.py
"""

import random
import struct
import zlib
from pathlib import Path

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rrset

CORPUS = Path(__file__).resolve().parent / "corpus"

NAMES = ["diff.test.", "www.diff.test.", "foo.wild.diff.test.", "a.b.wc.diff.test.",
         "x.y.ent.diff.test.", "y.ent.diff.test.", "host.deleg.diff.test.", "c1.diff.test.",
         "loop1.diff.test.", "big.diff.test.", "huge.diff.test.", "manymx.diff.test.",
         "www.child.diff.test.", "nx.other.test.", "80.2.0.192.in-addr.arpa.",
         "unknown.diff.test.", "example.net.", "."]
TYPES = ["A", "AAAA", "MX", "NS", "SOA", "TXT", "CNAME", "SRV", "DS", "DNSKEY", "RRSIG",
         "HTTPS", "SVCB", "TYPE65280", "ANY", "NSEC3", "PTR", "CAA"]


def header(qid=0x1234, flags=0, qd=1, an=0, ns=0, ar=0):
    return struct.pack("!6H", qid, flags, qd, an, ns, ar)


def question(name="www.diff.test.", qtype=1, qclass=1):
    return dns.name.from_text(name).to_wire() + struct.pack("!HH", qtype, qclass)


def opt(payload=1232, version=0, do=False, options=b"", owner=b"\x00"):
    ttl = version << 16 | (0x8000 if do else 0)
    return owner + struct.pack("!HHIH", 41, payload, ttl, len(options)) + options


def option(code, data):
    return struct.pack("!HH", code, len(data)) + data


def query_seeds(rng):
    """Queries for query_parse and answer: real ones, odd ones and broken ones."""
    seeds = {}
    for i, name in enumerate(NAMES):
        qtype = TYPES[i % len(TYPES)]
        edns = [-1, 0, 0][i % 3]
        q = dns.message.make_query(name, qtype, use_edns=edns,
                                   payload=rng.choice([512, 1232, 4096]),
                                   want_dnssec=(i % 4 == 0) and edns >= 0)
        q.id = i
        seeds[f"query-{name.rstrip('.') or 'root'}-{qtype}"] = q.to_wire()
    ecs = option(8, struct.pack("!HBB", 1, 24, 0) + bytes([192, 0, 2]))
    ecs6 = option(8, struct.pack("!HBB", 2, 56, 0) + bytes.fromhex("20010db80001ff"))
    seeds["edns-ecs"] = header(ar=1) + question() + opt(options=ecs)
    seeds["edns-ecs6-cookie-unknown"] = (header(ar=1) + question() + opt(
        options=ecs6 + option(10, bytes(range(8))) + option(65001, b"x" * 20)))
    seeds["edns-version1"] = header(ar=1) + question() + opt(version=1)
    seeds["edns-payload-100-do"] = header(ar=1) + question("big.diff.test.", 28) + opt(100, do=True)
    seeds["edns-payload-65535"] = header(ar=1) + question("huge.diff.test.", 1) + opt(65535)
    seeds["edns-two-opt"] = header(ar=2) + question() + opt() + opt()
    seeds["edns-opt-owner"] = header(ar=1) + question() + opt(owner=b"\x01a\x00")
    seeds["edns-option-overrun"] = (header(ar=1) + question() + b"\x00"
                                    + struct.pack("!HHIH", 41, 1232, 0, 4)
                                    + struct.pack("!HH", 8, 40))
    seeds["edns-opt-compressed-owner"] = header(ar=1) + question() + b"\xc0\x0c" + opt()[1:]
    seeds["axfr"] = header() + question("diff.test.", 252)
    seeds["axfr-child"] = header() + question("child.diff.test.", 252)
    soa = b"\x00\x00" + struct.pack("!5I", 1, 0, 0, 0, 0)  # root MNAME and RNAME, serial 1
    seeds["ixfr"] = (header(ns=1) + question("diff.test.", 251) + b"\xc0\x0c"
                     + struct.pack("!HHIH", 6, 1, 0, len(soa)) + soa)
    seeds["class-ch-txt"] = header() + question("version.bind.", 16, 3)
    seeds["class-any"] = header() + question(qclass=255)
    seeds["opcode-notify"] = header(flags=4 << 11) + question("diff.test.", 6)
    seeds["opcode-update"] = header(flags=5 << 11) + question("diff.test.", 6)
    seeds["opcode-status"] = header(flags=2 << 11) + question()
    seeds["qr-set"] = header(flags=0x8000) + question()
    seeds["qdcount-0"] = header(qd=0)
    seeds["qdcount-2"] = header(qd=2) + question() + question("mail.diff.test.")
    seeds["qname-pointer-self"] = header() + b"\xc0\x0c" + struct.pack("!HH", 1, 1)
    seeds["qname-pointer-to-flags"] = header(flags=0x0100) + b"\xc0\x02" + struct.pack("!HH", 1, 1)
    seeds["qname-pointer-into-itself"] = header() + bytes.fromhex("020741c00d00010001") + b"\x00"
    seeds["qname-pointer-forward"] = header() + b"\x03www\xc0\x20" + struct.pack("!HH", 1, 1)
    seeds["qname-label-64"] = header() + b"\x40" + b"a" * 64 + b"\x00" + struct.pack("!HH", 1, 1)
    seeds["qname-256-octets"] = (header() + b"".join(b"\x3f" + b"a" * 63 for _ in range(4))
                                 + b"\x00" + struct.pack("!HH", 1, 1))
    seeds["qname-binary"] = header() + b"\x03w\x00w\x04DIFF\x04TEST\x00" + struct.pack("!HH", 1, 1)
    seeds["qname-wildcard"] = header() + question("*.wild.diff.test.", 1)
    seeds["answer-record-compressed"] = (header(an=1) + question() + b"\xc0\x0c"
                                         + struct.pack("!HHIH", 1, 1, 60, 4)
                                         + bytes([192, 0, 2, 1]))
    seeds["trailing-garbage"] = header() + question() + b"\xde\xad\xbe\xef"
    seeds["runt-5"] = header()[:5]
    nsid = option(3, b"")
    seeds["class-ch-id-server-nsid"] = header(ar=1) + question("id.server.", 16, 3) + opt(
        options=nsid)
    seeds["class-ch-hostname-bind"] = header() + question("HOSTNAME.BIND.", 16, 3)
    seeds["class-ch-id-server-a"] = header() + question("id.server.", 1, 3)
    seeds["class-ch-long-question"] = (header(ar=1) + question(
        ".".join(["a" * 63] * 3) + ".id.server.", 16, 3) + opt(512, options=nsid))
    seeds["edns-nsid-ecs"] = header(ar=1) + question() + opt(options=ecs + nsid)
    seeds["edns-nsid-payload"] = header(ar=1) + question() + opt(options=option(3, b"who"))
    seeds["edns-nsid-version1"] = header(ar=1) + question() + opt(version=1, options=nsid)
    seeds.update(edns_option_seeds())
    base = header(ar=1) + question("manymx.diff.test.", 15) + opt(options=ecs)
    for cut in (13, 20, len(base) - 15, len(base) - 3):
        seeds[f"truncated-at-{cut}"] = base[:cut]
    for i in range(4):
        seeds[f"random-{i}"] = bytes(rng.randrange(256) for _ in range(rng.randint(12, 80)))
    return seeds


def edns_option_seeds():
    """EDNS-heavy queries: ECS (RFC 7871 section 6 rules), COOKIE (RFC 7873 lengths), NSID,
    EXPIRE, padding, keepalive and unknown options, alone, repeated and malformed."""
    def q(options, **kw):
        return header(ar=1) + question() + opt(options=options, **kw)
    def ecs(family, source, scope, addr):
        return option(8, struct.pack("!HBB", family, source, scope) + addr)
    cookie = bytes(range(1, 9))
    seeds = {
        "ecs-v4-32": q(ecs(1, 32, 0, bytes([192, 0, 2, 1]))),
        "ecs-v4-0": q(ecs(1, 0, 0, b"")),
        "ecs-v4-33": q(ecs(1, 33, 0, bytes(5))),
        "ecs-v4-scope-set": q(ecs(1, 24, 24, bytes([198, 51, 100]))),
        "ecs-v4-extra-byte": q(ecs(1, 24, 0, bytes([198, 51, 100, 0]))),
        "ecs-v4-short-addr": q(ecs(1, 24, 0, bytes([198, 51]))),
        "ecs-v4-trailing-bits": q(ecs(1, 23, 0, bytes([198, 51, 101]))),
        "ecs-v6-128": q(ecs(2, 128, 0, bytes.fromhex("20010db8" + "00" * 11 + "01"))),
        "ecs-v6-129": q(ecs(2, 129, 0, bytes(17))),
        "ecs-family-0": q(ecs(0, 0, 0, b"")),
        "ecs-family-3": q(ecs(3, 8, 0, b"\x01")),
        "ecs-len-3": q(option(8, b"\x00\x01\x18")),
        "ecs-twice": q(ecs(1, 24, 0, bytes([192, 0, 2])) + ecs(2, 56, 0, bytes(7))),
        "cookie-client": q(option(10, cookie)),
        "cookie-server-8": q(option(10, cookie + bytes(8))),
        "cookie-server-16": q(option(10, cookie + b"\x01\x00\x00\x00" + bytes(12))),
        "cookie-server-32": q(option(10, cookie + bytes(32))),
        "cookie-server-33": q(option(10, cookie + bytes(33))),
        "cookie-7": q(option(10, cookie[:7])),
        "cookie-empty": q(option(10, b"")),
        "cookie-twice": q(option(10, cookie) + option(10, cookie + bytes(16))),
        "cookie-ecs-nsid": q(option(10, cookie + bytes(16)) + ecs(1, 24, 0, bytes(3))
                             + option(3, b"")),
        "expire": q(option(9, b"")),
        "expire-with-data": q(option(9, b"\x00\x00\x0e\x10")),
        "keepalive": q(option(11, b"")),
        "padding": q(option(12, bytes(300))),
        "padding-nonzero": q(option(12, b"\xff" * 17)),
        "ede-in-query": q(option(15, b"\x00\x17")),
        "option-len-0-codes": q(b"".join(option(c, b"") for c in range(0, 20))),
        "option-header-cut": q(option(10, cookie)[:3]),
        "many-unknown": q(b"".join(option(65000 + i, bytes([i] * i)) for i in range(40))),
        "do-z-bits": header(ar=1) + question() + b"\x00" + struct.pack("!HHIH", 41, 4096,
                                                                       0x0000ffff, 0),
        "ext-rcode-set": header(ar=1) + question() + b"\x00" + struct.pack("!HHIH", 41, 1232,
                                                                           0x05000000, 0),
        "version-255-cookie": q(option(10, cookie), version=255),
        "payload-0": q(option(3, b""), payload=0),
        "payload-511": q(ecs(1, 24, 0, bytes(3)), payload=511),
        "opt-in-answer": header(an=1) + question() + opt(options=ecs(1, 24, 0, bytes(3))),
        "opt-in-authority": header(ns=1) + question() + opt(options=option(10, cookie)),
        "opt-class-ch-cookie": header(ar=1) + question("version.bind.", 16, 3)
                               + opt(options=option(10, cookie)),
        "axfr-cookie": header(ar=1) + question("diff.test.", 252) + opt(options=option(10, cookie)),
        "tsig-after-opt": (header(ar=2) + question() + opt(options=option(10, cookie))
                           + rr(b"\x03key\x00", 250, b"\x0bhmac-sha256\x00" + bytes(16),
                                ttl=0, rclass=255)),
    }
    return {f"edns-{k}": v for k, v in seeds.items()}


def dname_seeds():
    """First byte: offset of a name in the rest; the rest read as text is the second case."""
    seeds = {}
    texts = ["www.example.test", "www.example.test.", ".", "", "a..b", ".a", "*.wild.diff.test.",
             "a\\.b.c.", "\\000\\255\\046x.", "\\999.x", "tab\\\tend.", "\\",
             "A" * 63 + ".b.", "a" * 64 + ".b.", ".".join(["abcdefg"] * 32) + ".",
             "\\065\\066C.Diff.TEST", "x\\", "\"quoted\".name"]
    for i, text in enumerate(texts):
        seeds[f"text-{i:02d}"] = b"\xff" + text.encode()
    wire = dns.name.from_text("www.diff.test.").to_wire()
    seeds["wire-plain"] = b"\x00" + wire
    seeds["wire-root"] = b"\x00\x00"
    seeds["wire-binary-label"] = b"\x00\x04a.\x00b\x03\\\\x\x00"
    r = dns.message.make_response(dns.message.make_query("www.diff.test.", "MX"))
    r.answer.append(dns.rrset.from_text("www.diff.test.", 60, "IN", "MX", "10 mail.diff.test.",
                                        "20 mx.www.diff.test."))
    msg = r.to_wire()
    for off in (12, 31, len(msg) - 4, len(msg) - 2):  # question, answer owner, pointers
        seeds[f"wire-compressed-at-{off}"] = bytes([off]) + msg
    seeds["wire-pointer-loop"] = b"\x02" + b"\x01a\xc0\x02"
    seeds["wire-pointer-self"] = b"\x00" + b"\xc0\x00"
    seeds["wire-extended-label"] = b"\x00" + b"\x41abc\x00"
    seeds["wire-cut"] = b"\x00" + wire[:7]
    three = b"".join(b"\x3f" + b"b" * 63 for _ in range(3))  # 192 octets
    seeds["wire-255"] = b"\x00" + three + b"\x3d" + b"c" * 61 + b"\x00"
    seeds["wire-256"] = b"\x00" + three + b"\x3e" + b"c" * 62 + b"\x00"
    return seeds


def rr(name, rtype, rdata, ttl=300, rclass=1):
    owner = name if isinstance(name, bytes) else dns.name.from_text(name).to_wire()
    return owner + struct.pack("!HHIH", rtype, rclass, ttl, len(rdata)) + rdata


def probe_reply_seeds():
    """Replies for the dns health probe: byte 0 picks the case (0 A, 1 AAAA, 2 MX, 3 TXT,
    4 CNAME, 5 A without an expected answer), then the datagram (see fuzz_probe_reply.c)."""
    qn = "www.probe.test."
    ptr = b"\xc0\x0c"  # the question name
    seeds = {}
    def reply(case, qtype, answers=(), flags=0x8400, extra=b"", ar=0, ns=0, qname=qn):
        body = header(0x4242, flags, 1, len(answers), ns, ar) + question(qname, qtype)
        return bytes([case]) + body + b"".join(answers) + extra
    seeds["a-match"] = reply(0, 1, [rr(ptr, 1, bytes([192, 0, 2, 80]))])
    seeds["a-other"] = reply(0, 1, [rr(ptr, 1, bytes([192, 0, 2, 81]))])
    seeds["aaaa"] = reply(1, 28, [rr(ptr, 28, bytes.fromhex("20010db8" + "0" * 23 + "1"))])
    mx = struct.pack("!H", 10) + dns.name.from_text("mail.probe.test.").to_wire()
    seeds["mx"] = reply(2, 15, [rr(ptr, 15, mx)])
    seeds["mx-compressed"] = reply(2, 15, [rr(ptr, 15, struct.pack("!H", 10) + b"\x04mail\xc0\x10")])
    seeds["txt"] = reply(3, 16, [rr(ptr, 16, b"\x05hello\x06 world")])
    seeds["cname"] = reply(4, 5, [rr(ptr, 5, b"\x01x\xc0\x10")])
    seeds["any-nxdomain"] = reply(5, 1, flags=0x8403)
    seeds["opt-badvers"] = reply(5, 1, extra=opt(version=0) [:1] + struct.pack("!HHIH", 41, 1232, 1 << 24, 0), ar=1)
    seeds["truncated"] = reply(0, 1, [rr(ptr, 1, bytes([192, 0, 2, 80]))], flags=0x8600)[:-3]
    seeds["wrong-question"] = reply(0, 1, qname="other.probe.test.")
    seeds["not-a-reply"] = reply(0, 1, flags=0x0000)
    seeds["loop"] = reply(0, 1, [rr(b"\xc0\x1f", 1, bytes(4))])
    return seeds


def fwd_reply_seeds():
    """Upstream replies for the forwarder's checks: byte 0 is the mode (bits 0-1 qtype A, AAAA,
    CNAME, TXT; 0x04 0x20 case check; 0x10 TCP; 0x20 EDNS client; 0x40 CD; 0x80 DO), then the
    datagram (see fuzz_fwd_reply.c)."""
    qn = "wWw.ExAmple.TEST."
    ptr = b"\xc0\x0c"
    a = bytes([192, 0, 2, 1])
    seeds = {}

    def reply(mode, qtype, answers=(), auth=(), flags=0x8180, extra=(), qname=qn, qd=1):
        body = header(0x4242, flags, qd, len(answers), len(auth), len(extra))
        if qd:
            body += question(qname, qtype)
        return bytes([mode]) + body + b"".join(answers) + b"".join(auth) + b"".join(extra)

    seeds["a"] = reply(0x24, 1, [rr(ptr, 1, a)], extra=[opt()])
    seeds["a-udp-no-edns"] = reply(0x00, 1, [rr(ptr, 1, a)])
    seeds["aaaa-do"] = reply(0xa5, 28, [rr(ptr, 28, bytes(16))], extra=[opt(do=True)])
    soa = (dns.name.from_text("ns.example.test.").to_wire() +
           dns.name.from_text("h.example.test.").to_wire() + bytes(20))
    ede = option(15, b"\x00\x17net") + option(10, bytes(8))
    seeds["nxdomain-ede"] = reply(0x34, 1, auth=[rr("example.test.", 6, soa)], flags=0x8183,
                                  extra=[opt(do=True, options=ede)])
    seeds["servfail"] = reply(0x20, 1, flags=0x8182, extra=[opt()])
    seeds["formerr-noq"] = reply(0x20, 1, flags=0x8001, qd=0)
    seeds["badvers"] = reply(0x20, 1, extra=[opt()[:5] + struct.pack("!IH", 1 << 24, 0)])
    seeds["tc"] = reply(0x00, 1, [rr(ptr, 1, a)], flags=0x8380)[:-3]
    chain = [rr(ptr, 5, b"\x02c1\xc0\x10"), rr(b"\x02c1\xc0\x10", 5, b"\x02c2\xc0\x10"),
             rr(b"\x02c2\xc0\x10", 1, a)]
    seeds["chain"] = reply(0x21, 1, chain[::-1], extra=[opt()])
    seeds["cname-qtype"] = reply(0x02, 5, chain[:1])
    loop = [rr(ptr, 5, b"\x02c1\xc0\x10"), rr(b"\x02c1\xc0\x10", 5, ptr)]
    seeds["chain-loop"] = reply(0x00, 1, loop)
    seeds["dname"] = reply(0x20, 1, [rr("example.test.", 39, dns.name.from_text("example.net.").to_wire()),
                                      rr(ptr, 5, dns.name.from_text("www.example.net.").to_wire()),
                                      rr("www.example.net.", 1, a)], extra=[opt()])
    seeds["unrelated"] = reply(0x00, 1, [rr(ptr, 1, a), rr("bank.example.", 1, a)])
    seeds["txt-big-tcp"] = reply(0x13, 16, [rr(ptr, 16, (b"\xff" + b"x" * 255) * 5)])
    seeds["opt-mid-additional"] = reply(0x20, 1, [rr(ptr, 1, a)],
                                        extra=[rr("ns.example.test.", 1, a), opt(), rr("x.test.", 1, a)])
    seeds["compression-loop"] = reply(0x00, 1, [rr(b"\xc0\x21", 1, a)])
    seeds["wrong-id"] = bytes([0x00]) + b"\x42\x43" + reply(0x00, 1, [rr(ptr, 1, a)])[3:]
    seeds["not-a-reply"] = reply(0x00, 1, flags=0x0100)
    return seeds


def fwd_cache_seeds():
    """Upstream replies for fwd_cache: one control byte (bit 0 DO, 1 CD, 2 EDNS, 3 upper-case
    client name, 4 min-ttl 30), then the reply (see fuzz_fwd_cache.c)."""
    seeds = {}
    qn = "www.fwd.test."
    soa = (dns.name.from_text("ns.fwd.test.").to_wire() + dns.name.from_text("h.fwd.test.").to_wire()
           + struct.pack("!5I", 1, 2, 3, 4, 600))
    def reply(ctl, qtype=1, an=(), ns=(), ar=(), flags=0x8180, qname=qn):
        body = header(0x4242, flags, 1, len(an), len(ns), len(ar)) + question(qname, qtype)
        return bytes([ctl]) + body + b"".join(an) + b"".join(ns) + b"".join(ar)
    a = rr(b"\xc0\x0c", 1, bytes([192, 0, 2, 1]))
    seeds["a"] = reply(0, an=[a])
    seeds["a-edns-do-upper"] = reply(0x0d, an=[a], ar=[opt(do=True)])
    seeds["a-opt-not-last"] = reply(4, an=[a], ar=[opt(), rr(b"\xc0\x0c", 1, bytes(4))])
    seeds["a-ext-rcode"] = reply(4, an=[a], ar=[b"\x00" + struct.pack("!HHIH", 41, 1232, 1 << 24, 0)])
    seeds["cname-a"] = reply(2, an=[rr(b"\xc0\x0c", 5, b"\x01x\xc0\x10"),
                                    rr(b"\x01x\xc0\x10", 1, bytes(4), ttl=20)])
    seeds["cname-long"] = reply(0, an=[rr(b"\xc0\x0c", 5, b"\xc0\x0c")] * 20)
    seeds["nxdomain-soa"] = reply(4, flags=0x8183, ns=[rr(b"\xc0\x10", 6, soa, ttl=7200)])
    seeds["nodata-soa"] = reply(0x10, qtype=28, ns=[rr(b"\xc0\x10", 6, soa)])
    seeds["nodata-no-soa"] = reply(0, qtype=28)
    seeds["soa-short"] = reply(0, flags=0x8183, ns=[rr(b"\xc0\x10", 6, soa[:-3])])
    seeds["servfail"] = reply(0, flags=0x8182)
    seeds["tc"] = reply(0, an=[a], flags=0x8380)
    seeds["ttl-zero"] = reply(0x10, an=[rr(b"\xc0\x0c", 1, bytes(4), ttl=0)])
    seeds["ttl-top-bit"] = reply(0, an=[rr(b"\xc0\x0c", 1, bytes(4), ttl=0x80000001)])
    seeds["big-txt"] = reply(4, qtype=16, an=[rr(b"\xc0\x0c", 16, b"\xff" + b"t" * 255)] * 6)
    seeds["pointer-forward"] = reply(0, an=[rr(b"\xc0\x40", 1, bytes(4))])
    seeds["rdata-overrun"] = reply(0, an=[a])[:-2]
    seeds["trailing"] = reply(0, an=[a]) + b"\x00"
    seeds["tsig"] = reply(0, an=[a], ar=[rr(b"\x00", 250, b"", rclass=255, ttl=0)])
    seeds["not-a-reply"] = reply(0, an=[a], flags=0x0100)
    return seeds


def bird_reply_seeds():
    return {
        "greeting-ok": b"0001 BIRD 2.0.12 ready.\n0000 \n",
        "disabled": b"0001 BIRD 2.0.12 ready.\nvip: disabled\n0000 \n",
        "multi": b"0001 BIRD ready.\n2002-Name       Proto      Table      State  Since\n"
                 b"1002-vip        Direct     ---        up     01:02:03\n continued\n0000 \n",
        "no-match": b"0001 BIRD ready.\n8003 No protocols match\n",
        "syntax": b"0001 BIRD ready.\n9001 syntax error, unexpected CF_SYM_UNDEFINED\n",
        "notice": b"+0016 async notice\n0001 BIRD ready.\n0000 \n",
        "continuation-first": b" orphan\n0000 \n",
        "garbage": b"HTTP/1.1 200 OK\r\n\r\n",
        "long-line": b"0001 " + b"x" * 5000 + b"\n0000 \n",
        "no-newline": b"0001 BIRD ready.",
    }


def http_request_seeds():
    """METHOD, PATH, CONTENT-TYPE, QUERY lines, then the body (fuzz_http_request.c)."""
    def req(method, path, ctype="", query="", body=b""):
        return f"{method}\n{path}\n{ctype}\n{query}\n".encode() + body
    return {
        "status": req("GET", "/api/v1/status"),
        "explain": req("GET", "/api/v1/explain/www.example.test/192.0.2.1"),
        "override-path": req("POST", "/api/v1/override/set/service%2Fwww%2F*/down/30m"),
        "override-body": req("POST", "/api/v1/override", "application/json",
                             body=b'{"args": ["weight", "service/*", "5", "2h"]}'),
        "query-args": req("GET", "/api/v1/explain/w", query="arg=192.0.2.1&arg=198.51.100.0%2F24"),
        "reload-force": req("POST", "/api/v1/reload", "application/json; charset=utf-8",
                            body=b'{"args": ["--force"]}'),
        "get-mutating": req("GET", "/api/v1/cache/flush/example.test"),
        "dotdot": req("GET", "/api/v1/../metrics"),
        "bad-escape": req("GET", "/api/v1/health/%zz%"),
        "nul": req("GET", "/api/v1/health/a%00"),
        "utf8": req("GET", "/api/v1/health/%E2%9C%93%FF"),
        "bad-json": req("POST", "/api/v1/reload", "application/json", body=b'{"args": [1, '),
        "form": req("POST", "/api/v1/reload", "application/x-www-form-urlencoded", body=b"a=b"),
        "dup-key": req("POST", "/api/v1/reload", body=b'{"args": [], "args": ["x"]}'),
        "put": req("PUT", "/api/v1/status"),
        "unknown": req("GET", "/api/v1/frobnicate/x"),
        "many": req("GET", "/api/v1/health" + "/x" * 20),
        "empty-seg": req("GET", "/api/v1/explain//x"),
        "cluster-config": req("GET", "/api/v1/cluster/bird-config/bgp/peer=192.0.2.1"),
        "short-prefix": req("GET", "/api/v"),
        "other-version": req("GET", "/api/v10/status"),
    }


def pathfmt_seeds():
    """Site tables and demand bodies for pathfmt, packed here from the layout in
    src/gslb/pathfmt.h (not by the C encoder), plus a few broken ones."""
    def values(plen, loss, rtt, hops, answered, age):
        return struct.pack("!BBHBBH", plen, loss, rtt, hops, answered, age)

    def table(name, rows4, rows6, generated=1764660000123):
        body = b"STPT" + struct.pack("!BBHQIIB7x", 1, 0, 0, generated, len(rows4), len(rows6),
                                     len(name)) + name
        for prefix, v in rows4:
            body += struct.pack("!I", prefix) + v
        for prefix, v in rows6:
            body += struct.pack("!Q", prefix) + v
        return body

    def demand(rows, generated=99):
        body = b"STPD" + struct.pack("!BBHQII", 1, 0, 0, generated, len(rows), 0)
        for family, plen, flags, volume, prefix, probe in rows:
            body += struct.pack("!BBBBI", family, plen, flags, 0, volume) + prefix + probe
        return body

    def v4(a, b, c, d=0):
        return bytes([a, b, c, d]) + bytes(12)

    rows4 = [(0x0a000000, values(24, 0, 120, 9, 3, 4)),
             (0x0a000000, values(25, 5, 100, 9, 3, 2)),
             (0x0a000100, values(24, 100, 0xffff, 0, 0, 60)),
             (0xc0000200, values(24, 0, 65534, 255, 3, 65535)),
             (0xc6336400, values(32, 33, 0, 1, 1, 0))]
    rows6 = [(0x20010db800000000, values(48, 0, 550, 12, 3, 10)),
             (0x20010db800010000, values(64, 0, 90, 12, 2, 10)),
             (0x2a00000000000000, values(16, 0, 900, 3, 3, 1))]
    seeds = {
        "table-small": table(b"dc1", rows4, rows6),
        "table-v4": table(b"eu-west_1.a", rows4, []),
        "table-empty": table(b"x", [], []),
        "table-coarse": table(b"dc2", [(0x0a000000, values(8, 0, 5, 1, 1, 1)),
                                       (0x0a000000, values(16, 0, 6, 1, 1, 1))], []),
        "table-unsorted": table(b"dc1", list(reversed(rows4)), []),
        "table-truncated": table(b"dc1", rows4, rows6)[:-3],
        "demand-small": demand([
            (4, 24, 0, 1000, v4(10, 0, 0), v4(10, 0, 0, 53)),
            (4, 24, 1, 7, v4(198, 51, 100), v4(198, 51, 100, 1)),
            (6, 48, 2, 0, bytes.fromhex("20010db8") + bytes(12),
             bytes.fromhex("20010db8") + bytes(11) + b"\x53"),
            (6, 56, 3, 2**32 - 1, bytes.fromhex("20010db8000100") + bytes(9),
             bytes.fromhex("20010db8000100") + bytes(8) + b"\x01")]),
        "demand-empty": demand([]),
        "demand-outside": demand([(4, 24, 0, 1, v4(10, 0, 0), v4(10, 0, 1, 1))]),
    }
    return seeds


def zone_load_seeds():
    """Master files for origin fuzz.test. (fuzz_zone_load.c): real zones, every directive,
    the record types we index, and the errors our semantic checks catch."""
    head = "$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n"
    z = {}
    z["minimal"] = head
    z["types"] = head + (
        "www A 192.0.2.2\nwww AAAA 2001:db8::2\n@ MX 10 mail\nmail A 192.0.2.3\n"
        "txt TXT \"a b\" \"\\034quoted\\\"\" plain\n_sip._udp SRV 10 5 5060 www\n"
        "@ CAA 0 issue \"ca.example\"\n2 PTR www\n@ HTTPS 1 . alpn=h2,h3 port=443\n"
        "svc SVCB 0 www\nlong TXT " + " ".join(["x" * 255] * 4) + "\n"
        "u TYPE65280 \\# 4 0a000001\nds DS 12345 13 2 " + "ab" * 32 + "\n"
        "@ DNSKEY 257 3 13 " + "A" * 88 + "\n@ NAPTR 100 10 \"u\" \"E2U+sip\" \"\" www\n")
    z["directives"] = ("$ORIGIN fuzz.test.\n$TTL 1h\n@ IN SOA ( ns1.fuzz.test.\n hostmaster\n"
                       " 2026010101 ; serial\n 1h 10m 1w 1m )\n NS ns1\n NS ns2.other.\n"
                       "ns1 A 192.0.2.1\n$ORIGIN sub.fuzz.test.\nwww 60 IN A 192.0.2.9\n"
                       "$TTL 30\n@ TXT sub\n")
    z["include"] = head + "$INCLUDE inc.zone\n$INCLUDE inc.zone sub.fuzz.test.\nafter A 192.0.2.7\n"
    z["include-absolute"] = head + "$INCLUDE /etc/passwd\n$include ../zone\n"
    z["include-quoted"] = head + "$INCLUDE \"inc.zone\"\n$INCLUDE inc.zone2\n"
    z["wildcard-ent-deleg"] = head + (
        "*.wild CNAME www\nwww A 192.0.2.2\nx.y.ent A 192.0.2.4\n"
        "child NS ns.child\nchild NS ns1\nns.child A 192.0.2.5\nocc.child A 192.0.2.6\n"
        "child DS 1 13 2 " + "cd" * 32 + "\n*.a.b.wc TXT wc\n")
    z["dname-cname-chain"] = head + "old DNAME new.other.\nc1 CNAME c2\nc2 CNAME c1\n"
    z["cname-and-a"] = head + "x CNAME www\nx A 192.0.2.1\n"
    z["cname-rrsig-nsec"] = head + ("x CNAME www\nx NSEC y A RRSIG\nx RRSIG CNAME 13 3 300 "
                                   "20300101000000 20200101000000 1 fuzz.test. AAAA\n")
    z["no-soa"] = "$TTL 300\n@ NS ns1\nns1 A 192.0.2.1\n"
    z["no-ns"] = "$TTL 300\n@ SOA ns1 h 1 2 3 4 5\n"
    z["two-soa"] = head + "@ SOA ns2 h 2 2 3 4 5\n"
    z["soa-below-apex"] = head + "sub SOA ns1 h 1 2 3 4 5\n"
    z["missing-glue"] = "$TTL 300\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\nd NS ns.d\n"
    z["outside"] = head + "www.other.test. A 192.0.2.1\n. NS a.root.\nfuzz.test.x. A 1.2.3.4\n"
    z["ttl-mix"] = head + "m 10 A 192.0.2.1\nm 20 A 192.0.2.2\nm 4294967295 A 192.0.2.3\n"
    z["dup-records"] = head + "d A 192.0.2.1\nd A 192.0.2.1\nd a 192.0.2.1\nD A 192.0.2.1\n"
    z["case-escapes"] = head + "WwW\\.x A 192.0.2.1\n\\065\\000b A 192.0.2.2\n\\.. A 192.0.2.3\n"
    z["long-names"] = head + ".".join(["a" * 63] * 3) + " A 192.0.2.1\n" + \
        ".".join(["b" * 63] * 4) + " A 192.0.2.1\n"
    z["syntax-errors"] = head + "bad A 300.1.1.1\nbad2 MX mail\n( unbalanced\nx IN IN A 1\n"
    z["class-ch"] = head + "v CH TXT steer\n"
    z["no-newline"] = head + "last A 192.0.2.8"
    z["crlf"] = head.replace("\n", "\r\n") + "w A 192.0.2.1\r\n"
    z["binary"] = head + "x TXT \"\\000\\255\" \\# 0\n\x00\xff\x80\n"
    z["many-types-one-node"] = head + "".join(f"t TYPE{1000 + i} \\# 1 {i:02x}\n" for i in range(40))
    z["empty"] = ""
    return {k: v.encode("latin-1") for k, v in z.items()}


def ctl_request_seeds():
    """Control socket request lines (fuzz_ctl_request.c): every command row, right and wrong
    argument counts, failures the backend reports, and malformed requests."""
    def req(cmd, *args):
        import json
        return json.dumps({"cmd": cmd, "args": list(args)}).encode()
    seeds = {
        "status": req("status"),
        "zones": req("zones"),
        "reload": req("reload"),
        "reload-force": req("reload", "--force"),
        "reload-bad": req("reload", "--forse"),
        "stats": req("stats"),
        "explain": req("explain", "www.example.test", "192.0.2.1"),
        "explain-ecs": req("explain", "www.example.test", "192.0.2.1", "198.51.100.0/24"),
        "explain-few": req("explain", "www"),
        "health": req("health", "service/*"),
        "health-fail": req("health", "!x"),
        "monitors": req("monitors"),
        "maps": req("maps"),
        "override-list": req("override", "list"),
        "override-set": req("override", "set", "service/www/*", "down", "30m"),
        "override-set-bad-for": req("override", "set", "x", "up", "30x"),
        "override-clear": req("override", "clear", "x"),
        "override-weight": req("override", "weight", "x", "65535", "1h"),
        "override-weight-big": req("override", "weight", "x", "65536"),
        "override-weight-default": req("override", "weight", "x", "default"),
        "override-unknown": req("override", "frob"),
        "upstreams": req("upstreams", "*"),
        "cache": req("cache"),
        "cache-flush": req("cache", "flush", "example.test"),
        "cluster": req("cluster"),
        "cluster-health": req("cluster", "health"),
        "cluster-bird": req("cluster", "bird-config", "mode=bgp", "peer=192.0.2.1"),
        "cluster-frr": req("cluster", "frr-config", "mode=ospf"),
        "cluster-bird-8": req("cluster", "bird-config", "bgp", *[f"o{i}=1" for i in range(7)]),
        "cluster-frr-9": req("cluster", "frr-config", *[f"o{i}=1" for i in range(9)]),
        "cluster-notify": req("cluster", "notify", "MASTER"),
        "cluster-notify-bad": req("cluster", "notify", "leader"),
        "drain": req("drain", "500ms"),
        "drain-overflow": req("drain", "99999999999999999999d"),
        "undrain": req("undrain"),
        "paths": req("paths", "10.0.0.0/24"),
        "events": req("events", "10", "since=5"),
        "events-bad": req("events", "since=-1", "x"),
        "unknown": req("frobnicate"),
        "fail-long-utf8": req("health", "!" + "\u00e9" * 700),
        "args-null": b'{"cmd": "status", "args": null}',
        "args-object": b'{"cmd": "status", "args": {}}',
        "args-numbers": b'{"cmd": "explain", "args": [1, 2.5, true]}',
        "args-nested": b'{"cmd": "health", "args": [["x"]]}',
        "cmd-number": b'{"cmd": 5}',
        "cmd-nul": b'{"cmd": "sta\\u0000tus"}',
        "array": b'["status"]',
        "not-json": b"status",
        "truncated": b'{"cmd": "status", "args": [',
        "empty": b"",
        "deep": b"[" * 5000,
        "dup-keys": b'{"cmd": "status", "cmd": "reload"}',
        "bad-utf8": b'{"cmd": "\xff\xfe"}',
    }
    return seeds


def journal_file(changes, apex="fuzz.test.", version=1):
    """A journal file (src/zone/journal_file.h) holding @changes [(from, to, dels, adds)],
    each record a (name, type, ttl, rdata) tuple of wire bytes."""
    owner = dns.name.from_text(apex).to_wire()
    head = (b"STEERJNL" + struct.pack("!HHIQB", version, 0, len(changes), 0x5eed, len(owner))
            + owner)
    out = head + struct.pack("!I", zlib.crc32(head))
    for frm, to, dels, adds in changes:
        data = b"".join(dns.name.from_text(n).to_wire() + struct.pack("!HIH", t, ttl, len(rd)) + rd
                        for n, t, ttl, rd in dels + adds)
        part = struct.pack("!5I", frm, to, len(dels), len(adds), len(data)) + data
        out += part + struct.pack("!I", zlib.crc32(part))
    return out


def journal_load_seeds():
    def soa(serial):
        rd = (dns.name.from_text("ns.fuzz.test.").to_wire()
              + dns.name.from_text("h.fuzz.test.").to_wire()
              + struct.pack("!5I", serial, 3600, 900, 604800, 300))
        return ("fuzz.test.", 6, 300, rd)
    a = ("www.fuzz.test.", 1, 300, bytes([192, 0, 2, 1]))
    b = ("www.fuzz.test.", 1, 300, bytes([192, 0, 2, 2]))
    txt = ("t.x.fuzz.test.", 16, 60, b"\x05hello")
    one = journal_file([(1, 2, [soa(1), a], [soa(2), b])])
    two = journal_file([(1, 2, [soa(1), a], [soa(2), b]), (2, 3, [soa(2)], [soa(3), txt])])
    flipped = bytearray(two)
    flipped[len(two) // 2] ^= 0x10
    return {
        "one-change": one,
        "two-changes": two,
        "no-change": journal_file([]),
        "wrapped-serial": journal_file([(0xfffffff0, 5, [soa(0xfffffff0)], [soa(5)])]),
        "truncated": two[:-9],
        "flipped": bytes(flipped),
        "other-zone": journal_file([], apex="other.test."),
        "version-2": journal_file([(1, 2, [soa(1)], [soa(2)])], version=2),
        "unchained": journal_file([(1, 2, [soa(1)], [soa(2)]), (3, 4, [soa(3)], [soa(4)])]),
        "empty": b"",
    }


def write(target, seeds):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("seed-*"):
        old.unlink()
    for name, data in seeds.items():
        (d / f"seed-{name}").write_bytes(data)


def main():
    queries = query_seeds(random.Random(2))
    write("query_parse", queries)
    write("answer", queries)
    write("dname", dname_seeds())
    write("probe_reply", probe_reply_seeds())
    write("fwd_reply", fwd_reply_seeds())
    write("fwd_cache", fwd_cache_seeds())
    write("bird_reply", bird_reply_seeds())
    write("http_request", http_request_seeds())
    write("pathfmt", pathfmt_seeds())
    write("zone_load", zone_load_seeds())
    write("ctl_request", ctl_request_seeds())
    write("journal_load", journal_load_seeds())


if __name__ == "__main__":
    main()
