"""The failover lab itself is sound (tests/integration/fwdlab.py): the hierarchy resolves
through each link's Unbound from the node, sent from the link's own address; each fault breaks
link 1 the way it says and its heal undoes it, link 2 unaffected; nothing is left behind.

Needs root (network namespaces); no steerd."""

from __future__ import annotations

import os
import subprocess

import pytest

import fwdlab
import fwdload
from fwdlab import CLIENT, SERVICE, ZONE, answers, link_source, upstream_addr, which_link

pytestmark = pytest.mark.lab

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network "
                                "namespaces)")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    missing = fwdlab.missing_tools()
    if missing:
        pytest.fail(f"missing {', '.join(missing)} (scripts/setup-deps.sh test installs them)")
    lab = fwdlab.Lab(links=2, workdir=tmp_path_factory.mktemp("fwdlab"))
    lab.build()
    yield lab
    names = list(lab.namespaces)
    lab.close()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in names if n in left], left


def from_node(lab, n, qname, rdtype="A", timeout=0.5):
    return answers(lab.node, upstream_addr(n), qname, rdtype, source=link_source(n),
                   timeout=timeout)


@needs_root
def test_hierarchy_resolves_through_each_link(lab):
    seen = {n: lab.upstream_queries(n)[0] for n in lab.up}
    for n in lab.up:
        assert from_node(lab, n, f"www.{ZONE}") == "NOERROR"
        assert from_node(lab, n, f"t1.{ZONE}") == "NOERROR"
        assert from_node(lab, n, f"n{n}x.bust.{ZONE}") == "NOERROR"
        assert from_node(lab, n, f"nothere.{ZONE}") == "NXDOMAIN"
        assert which_link(lab.node, upstream_addr(n), "smoke", source=link_source(n)) == \
            f"link{n}"
    # Each link's upstream saw the node's 5 queries (counted on arrival).
    assert all(lab.upstream_queries(n)[0] - seen[n] == 5 for n in lab.up)
    r = fwdlab.query(lab.node, upstream_addr(1), f"t2.{ZONE}", source=link_source(1))
    assert fwdlab.query(lab.node, upstream_addr(2), f"t2.{ZONE}", source=link_source(2),
                        tcp=True).rcode() == 0
    assert lab.upstream_queries(2)[1] > 0
    assert r.answer[0].ttl <= 5
    # Sent from the other link's address, a query leaves on that link and finds no upstream.
    assert from_node(lab, 1, f"www.{ZONE}") == "NOERROR"
    assert answers(lab.node, upstream_addr(1), f"www.{ZONE}", source=link_source(2),
                   timeout=0.3) is None
    # The client reaches the node; the host's namespace has none of the lab's addresses.
    assert answers(lab.client, fwdlab.NODE_CLIENT, f"www.{ZONE}", source=CLIENT,
                   timeout=0.3) is None  # nothing listens there yet: refused, not routed out
    host = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
    assert upstream_addr(1) not in host and SERVICE not in host


def healthy(lab, n):
    return from_node(lab, n, f"{os.urandom(4).hex()}.bust.{ZONE}") == "NOERROR"


@needs_root
@pytest.mark.parametrize("fault", [f for f in fwdlab.FAULTS if f != "loss30"])
def test_fault_breaks_link1_and_heals(lab, fault):
    assert healthy(lab, 1) and healthy(lab, 2)
    lab.fault(fault, 1)
    try:
        assert not healthy(lab, 1)
        assert healthy(lab, 2)
        alive = which_link(lab.node, upstream_addr(1), os.urandom(4).hex(),
                           source=link_source(1), timeout=0.5)
        state = lab.link_state(1)
        if fault == "cutoff":
            assert alive == "link1"  # alive, answers what it knows, cannot resolve
        else:
            assert alive is None
        if fault == "link-down":
            assert "UP" not in state.split(","), state
        elif fault == "carrier-down":
            assert "NO-CARRIER" in state and "UP" in state.split(","), state
        else:
            assert "LOWER_UP" in state, state
    finally:
        lab.heal()
    assert lab.active == []
    assert healthy(lab, 1)


@needs_root
def test_sniffer_records_what_reaches_the_upstream(lab):
    with lab.sniff(2) as sn:
        for i in range(20):
            assert from_node(lab, 2, f"Sniff{i}.bust.{ZONE}") == "NOERROR"
        lab.fault("drop", 2)
        try:
            assert from_node(lab, 2, f"dropped.bust.{ZONE}", timeout=0.2) is None
        finally:
            lab.heal([2])
    got = [p for p in sn.packets if p[3] == upstream_addr(2)]
    assert all(p[1] == link_source(2) and p[4] == 53 for p in got)
    names = [p[6][:-4] for p in got]
    assert b"\x06Sniff7\x04bust\x07example\x04test\x00" in names  # case as sent
    assert any(b"dropped" in q for q in names)  # seen before the drop
    # dnspython picks a random ID per query, the kernel a random port per socket.
    assert len({p[2] for p in got}) >= 19 and len({p[5] for p in got}) >= 19


@needs_root
def test_forged_datagram_arrives_over_the_link_as_from_the_upstream(lab):
    s = fwdlab.ns_socket(lab.node)
    try:
        s.bind((link_source(1), 0))
        s.settimeout(2)
        lab.forge(1, s.getsockname()[1], b"forged")
        data, peer = s.recvfrom(512)
        assert data == b"forged" and peer == (upstream_addr(1), 53)
        lab.forge(1, s.getsockname()[1], b"other port", sport=5353)
        assert s.recvfrom(512) == (b"other port", (upstream_addr(1), 5353))
    finally:
        s.close()


@needs_root
def test_faults_on_both_links_at_once_heal_one_by_one(lab):
    try:
        lab.fault("drop", 1)
        lab.fault("cutoff", 2)
        lab.fault("cutoff", 1)
        with pytest.raises(ValueError):
            lab.fault("drop", 1)
        assert not healthy(lab, 1) and not healthy(lab, 2)
        lab.heal([2])
        assert healthy(lab, 2) and not healthy(lab, 1)
        assert lab.active == [("drop", 1), ("cutoff", 1)]
    finally:
        lab.heal()
    assert healthy(lab, 1) and healthy(lab, 2)


@needs_root
def test_loss30_drops_about_a_third(lab):
    lab.fault("loss30", 1)
    try:
        got = sum(1 for i in range(60)
                  if from_node(lab, 1, f"www.{ZONE}", timeout=0.15) == "NOERROR")
    finally:
        lab.heal()
    # 60 draws at p = 0.7: 42 expected; 28..56 is beyond 4 standard deviations either way.
    assert 28 <= got <= 56, got
    assert healthy(lab, 1)


@needs_root
@pytest.mark.parametrize("kind", ["dnsdist", "unbound"])
def test_peer_forwarders_answer_the_client_over_link1(lab, kind):
    fwd = lab.start_forwarder(kind)
    try:
        assert answers(lab.client, SERVICE, f"c3.{ZONE}", source=CLIENT) == "NOERROR"
        links = {which_link(lab.client, SERVICE, f"{kind}{i}", source=CLIENT) for i in range(5)}
        if kind == "dnsdist":
            assert links == {"link1"}  # firstAvailable keeps the order
            # The client load: 2 s of the mix, everything answered, revealing names on link 1.
            res = fwdload.run_load(lab.client, SERVICE, 200, 2.0)
            m = fwdload.analyse(res["records"], 1.5, 1.8)
            assert m["queries"] == 400 and m["failures"] == 0, m
            assert m["before"] == 1.0, m
            kinds = {r[0] for r in res["records"]}
            assert kinds == {0, 1, 2, 3}
        else:
            assert links <= {"link1", "link2"} and links  # Unbound picks by RTT
    finally:
        fwd.stop()


def test_analyse_reads_a_scripted_failover():
    """The figures on records made up for it: link 1 until 10 s, three failures, link 2 from
    10.4 s, back on link 1 from 16.5 s."""
    recs = []
    for k in range(240):
        t = k / 10
        link = 1 if t < 10 or t >= 16.5 else 2
        if 10 <= t < 10.4:
            recs.append([2, t, None, None, 0])  # lost
            recs.append([3, t + 0.01, t + 0.02, 2, 0])  # SERVFAIL
        else:
            recs.append([3, t, t + 0.003, 0, link])
            recs.append([0, t + 0.01, t + 0.6 if 10.4 <= t < 10.6 else t + 0.011, 0, 0])
    m = fwdload.analyse(recs, 10.0, 16.0)
    assert m["failures"] == 8 and m["timeouts"] == 4 and m["servfail"] == 4
    assert m["failures_fault"] == 8 and m["failures_before"] == 0
    assert abs(m["window"] - 0.31) < 0.02
    assert abs(m["switch"] - 0.31) < 0.02  # the last bad revealing query: sent at 10.31
    assert abs(m["failback"] - 0.5) < 0.06
    assert m["flaps"] == 0  # only link 2 answered while the fault lasted
    assert m["before"] == 1.0 and m["after"] == 1.0
    assert m["slow"] == 2
    # Never switched: the fault's last revealing query still failed.
    never = [r if r[1] < 10 or r[0] != 3 else [3, r[1], None, None, 0] for r in recs]
    assert fwdload.analyse(never, 10.0, 16.0)["switch"] is None
    # Not back: link 2 to the end.
    stay = [[r[0], r[1], r[2], r[3], 2 if r[1] >= 10.4 and r[0] == 3 else r[4]] for r in recs]
    m = fwdload.analyse(stay, 10.0, 16.0)
    assert m["failback"] is None and m["after"] == 0.0
