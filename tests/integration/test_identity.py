"""Identity answers (server.identity): CH TXT id.server. and hostname.bind., and the NSID
option (RFC 5001), compared with a real knotd configured with the same identity and nsid.

Where Steer differs from Knot on purpose:
- Knot adds an Extended DNS Error (RFC 8914) to some REFUSED answers; Steer sends none, so
  only the NSID option is compared.
Without an identity id.server. and hostname.bind. are REFUSED and NSID is ignored (Knot
would answer its host name); version.bind. answers either way (server.version, see
test_compliance.py)."""

import shutil
import subprocess
import time

import dns.edns
import dns.flags
import dns.message
import dns.opcode
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import pytest

from conftest import SERVER_CONFIG, ZONES_DIR, free_port, run_steerd

KNOTD = shutil.which("knotd") or "/usr/sbin/knotd"
IDENTITY = "node-7.example"
ZONE = (ZONES_DIR / "example.test.zone").read_text()


def with_identity(identity):
    """The fixture's config with server.identity set (its placeholders kept)."""
    return SERVER_CONFIG.replace("{zones}", f"  identity: \"{identity}\"\n{{zones}}")


def nsid_opt(payload=b""):
    return dns.edns.GenericOption(dns.edns.NSID, payload)


def make(name, rdtype="TXT", rdclass="CH", edns=0, options=None, opcode=None):
    q = dns.message.make_query(name, rdtype, rdclass, use_edns=False)
    if edns is not None:
        q.use_edns(edns, 0, 1232, options=[nsid_opt()] if options is None else options)
    if opcode is not None:
        q.set_opcode(opcode)
    return q


class Knot:
    """knotd on 127.0.0.1 at a free port with server identity and nsid set."""

    def __init__(self, workdir):
        self.port = free_port()
        for sub in ("run", "db"):
            (workdir / sub).mkdir()
        zonefile = workdir / "example.test.zone"
        zonefile.write_text(ZONE)
        conf = workdir / "knot.conf"
        conf.write_text(f"""server:
    rundir: "{workdir / 'run'}"
    listen: 127.0.0.1@{self.port}
    identity: "{IDENTITY}"
    nsid: "{IDENTITY}"
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: warning
database:
    storage: "{workdir / 'db'}"
zone:
  - domain: example.test.
    file: "{zonefile}"
    journal-content: none
    zonefile-sync: -1
""")
        self.logfile = open(workdir / "knotd.log", "wb")
        self.proc = subprocess.Popen([KNOTD, "-c", str(conf)], stdout=self.logfile,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                r = dns.query.udp(make("example.test.", "SOA", "IN"), "127.0.0.1",
                                  port=self.port, timeout=0.3)
                if r.answer:
                    break
            except (dns.exception.Timeout, OSError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail("knotd did not start: " + (workdir / "knotd.log").read_text())
            time.sleep(0.05)

    def udp(self, q):
        return dns.query.udp(q, "127.0.0.1", port=self.port, timeout=3)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logfile.close()


@pytest.fixture(scope="module")
def knot(tmp_path_factory):
    k = Knot(tmp_path_factory.mktemp("knot"))
    yield k
    k.stop()


@pytest.fixture(scope="module")
def steer(module_launcher):
    return module_launcher(zones={"example.test": ZONE},
                           config=with_identity(IDENTITY))


def nsid_of(r):
    for o in r.options:
        if o.otype == dns.edns.NSID:
            return o.to_wire() if not hasattr(o, "data") else o.data
    return None


def summary(r):
    """What both servers must agree on."""
    return {
        "rcode": dns.rcode.to_text(r.rcode()),
        "flags": dns.flags.to_text(r.flags),
        "answer": sorted(rr.to_text() for rr in r.answer),
        "authority": sorted(rr.to_text() for rr in r.authority),
        "edns": r.edns,
        "nsid": nsid_of(r),
    }


CASES = {
    "id.server": make("id.server."),
    "hostname.bind": make("hostname.bind."),
    "id.server upper case": make("ID.SERVER."),
    "id.server without EDNS": make("id.server.", edns=None),
    "id.server without NSID": make("id.server.", options=[]),
    "id.server with RD clear": None,  # built below
    "NSID with a payload": make("id.server.", options=[nsid_opt(b"who")]),
    "other CH name": make("foo.server."),
    "below id.server": make("x.id.server."),
    "authors.bind": make("authors.bind."),
    "CH A": make("id.server.", "A"),
    "CH ANY": make("id.server.", "ANY"),
    "IN TXT id.server": None,  # built below (Knot adds an EDE there: NSID only)
    "class ANY": make("id.server.", rdclass="ANY", edns=None),
    "class HS": make("id.server.", rdclass="HS", edns=None),
    "zone SOA with NSID": make("example.test.", "SOA", "IN"),
    "NXDOMAIN with NSID": make("nothere.example.test.", "A", "IN"),
    "BADVERS with NSID": make("example.test.", "SOA", "IN", edns=1),
    "NOTIMP with NSID": make("example.test.", "SOA", "IN", opcode=dns.opcode.STATUS),
}
CASES["id.server with RD clear"] = make("id.server.")
CASES["id.server with RD clear"].flags &= ~dns.flags.RD


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c] is not None])
def test_same_as_knot(knot, steer, case):
    q = CASES[case]
    mine, theirs = summary(steer.udp(q)), summary(knot.udp(q))
    if case in ("zone SOA with NSID", "NXDOMAIN with NSID"):
        # zone answers are test_differential's business; here the rcode, AA and NSID count
        for s in (mine, theirs):
            s.pop("answer")
            s.pop("authority")
    assert mine == theirs


def test_refused_in_class_has_nsid(knot, steer):
    q = make("id.server.", "TXT", "IN")
    mine, theirs = steer.udp(q), knot.udp(q)
    assert mine.rcode() == theirs.rcode() == dns.rcode.REFUSED
    assert nsid_of(mine) == nsid_of(theirs) == IDENTITY.encode()


def test_the_answer_itself(steer):
    r = steer.udp(make("id.server."))
    assert r.rcode() == dns.rcode.NOERROR and not r.flags & dns.flags.AA
    (rrset,) = r.answer
    assert rrset.rdclass == dns.rdataclass.CH and rrset.rdtype == dns.rdatatype.TXT
    assert rrset.ttl == 0 and [rd.strings for rd in rrset] == [(IDENTITY.encode(),)]
    assert nsid_of(r) == IDENTITY.encode()
    assert not r.authority and not r.additional


def test_over_tcp(steer):
    r = steer.tcp(make("hostname.bind."))
    assert r.answer[0][0].strings == (IDENTITY.encode(),) and nsid_of(r) == IDENTITY.encode()


def test_version_bind_answered_like_knot(knot, steer):
    """version.bind. is answered the way Knot answers it: CH TXT, TTL 0, no AA."""
    q = make("version.bind.")
    theirs, r = knot.udp(q), steer.udp(q)
    assert theirs.rcode() == r.rcode() == dns.rcode.NOERROR
    assert r.answer[0].ttl == theirs.answer[0].ttl == 0
    assert not r.flags & dns.flags.AA and not theirs.flags & dns.flags.AA
    assert r.answer[0][0].strings[0].startswith(b"Steer ")
    assert nsid_of(r) == IDENTITY.encode()


def test_without_identity_as_before(steerd):
    srv = steerd(zones={"example.test": ZONE})
    for name in ("id.server.", "hostname.bind."):
        r = srv.udp(make(name))
        assert r.rcode() == dns.rcode.REFUSED and not r.answer
        assert nsid_of(r) is None
    r = srv.udp(make("example.test.", "SOA", "IN"))
    assert r.answer and nsid_of(r) is None


def test_identity_follows_reload(steerd):
    srv = steerd(zones={"example.test": ZONE},
                 config=with_identity("first"))
    assert srv.udp(make("id.server.")).answer[0][0].strings == (b"first",)
    text = srv.config_path.read_text().replace('identity: "first"', 'identity: "second"')
    srv.config_path.write_text(text)
    out = srv.ctl_json("reload")
    assert out.get("ok", True) and "identity" not in str(out.get("restart_needed", "")), out
    r = srv.udp(make("id.server."))
    assert r.answer[0][0].strings == (b"second",) and nsid_of(r) == b"second"


def test_bad_identity_is_refused(tmp_path):
    (tmp_path / "z.zone").write_text(ZONE)
    path = tmp_path / "steer.yaml"
    path.write_text("server:\n  identity: \"" + "x" * 256 + "\"\n"
                    "zones:\n  - domain: example.test\n    file: z.zone\n")
    res = run_steerd("-c", str(path), "--check-config")
    assert res.returncode == 1 and f"{path}:2:" in res.stderr and "at most 255" in res.stderr


def test_forwarder_only_node_answers_identity(steerd):
    """A cache-only cluster node (seed 000) serves no zone: CH queries never go upstream."""
    dead = free_port()
    srv = steerd(config=with_identity(IDENTITY).replace("{zones}", "") + f"""forward:
  allow-recursion: [127.0.0.0/8]
  groups:
    - domain: .
      upstreams: [{{{{ name: up1, address: "127.0.0.1:{dead}" }}}}]
""")
    r = srv.udp(make("id.server."))
    assert r.rcode() == dns.rcode.NOERROR and r.answer[0][0].strings == (IDENTITY.encode(),)
    assert nsid_of(r) == IDENTITY.encode()
