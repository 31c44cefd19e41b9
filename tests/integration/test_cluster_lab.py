"""Steer cluster nodes behind one service address in the lab (tests/integration/clusterlab.py):
a BIRD router with ECMP and L4 hashing, three nodes (steerd with a `cluster:` section, BIRD or
FRR as the node's speaker, the configurations of examples/cluster/), a client sending
identity queries (id.server CH TXT) from 128 source ports (tests/integration/clusterload.py);
the BGP and OSPF variants and a two-node keepalived (VRRPv3) pair.

One trial per scenario: the fault on node n1 1.5 s into the load, healed 2 s later, the load
going on until the node is back. Each figure is checked against the issue's goals plus a
margin, because this machine has two cores shared with other people's builds and tests: a
trial here can be twice as slow as on a quiet machine (bench/cluster/failover.py measures ten
trials each on a quiet one; docs/performance.md has the figures). The goals:
  steerd killed or hung      no query to the node after 0.5 s (BGP)      test: 1.0 s
  OSPF                       BIRD's tick (1 s) + 0.5 s                   test: 2.5 s
  link death (BGP + BFD)     0.3 s                                       test: 0.6 s
  VRRP, master's steerd dead 0.5 s                                       test: 1.0 s
  drain then stop, rejoin    0 lost queries                              exact
and the structural checks: every node gets a fair share of the queries, a withdrawn node
comes back after the heal without losing a query, `steerctl cluster` says what happened.

Needs root (network namespaces), bird2 (frr, keepalived for those variants: skipped when
absent) and a steerd with the cluster node. Against a sanitized steerd (the first pytest run
of `make test`) the scenarios marked `timing` are left to the normal build: their steerd code
(each announce method, the route check) runs sanitized in test_cluster.py, and the BGP
trials here (spread, kill, broken zone, drain, anchor) still run."""

from __future__ import annotations

import os

import pytest

import clusterlab

pytestmark = pytest.mark.lab

RATE = 1000
# Goals (see the docstring) and the margin this shared machine needs.
MARGIN = 2.0
GONE_STEERD = 0.5 * MARGIN
GONE_OSPF = 1.0 + 0.5 + 1.0
GONE_LINK = 0.3 * MARGIN
GONE_VRRP = 0.5 * MARGIN
# A fair share: three nodes get a third each on average, but 128 flows hashed over three
# next hops are never exactly even (about 43 +- 5 flows each); 15 % is 4.5 standard
# deviations below the mean, so only a broken spread (L3 hashing, a missing next hop) fails.
FAIR = 0.15
# After the heal: a restarted steerd joins after rise rounds (0.5 s), a withdrawn one after
# the hold-down (2 s) and rise; the routers then need a moment.
REJOIN_RESTART = 3.5
REJOIN_HOLD_DOWN = 5.0


def built(tmp_path_factory, variant, speaker="bird", method=None):
    if os.geteuid() != 0:
        pytest.skip("the cluster lab needs root (network namespaces)")
    if not clusterlab.cluster_supported():
        pytest.fail(f"{clusterlab.steerd_binary()} has no cluster: section")
    labs = clusterlab.lab_for_tests(tmp_path_factory, variant, speaker)
    lab = next(labs)
    try:
        lab.start_nodes(method=method)
        yield lab
    finally:
        labs.close()  # the lab's own finally: processes stopped, namespaces removed
    # Every steerd stopped by SIGTERM exited 0, and none printed a sanitizer report.
    assert not lab.problems, lab.problems


@pytest.fixture(scope="module")
def bgp(tmp_path_factory):
    yield from built(tmp_path_factory, "bgp")


@pytest.fixture(scope="module")
def ospf(tmp_path_factory):
    yield from built(tmp_path_factory, "ospf")


@pytest.fixture(scope="module")
def frr(tmp_path_factory):
    yield from built(tmp_path_factory, "bgp", "frr")


@pytest.fixture(scope="module")
def vrrp(tmp_path_factory):
    yield from built(tmp_path_factory, "vrrp")


def trial(lab, kind, rejoin=REJOIN_HOLD_DOWN, **kw):
    lab.wait_all()
    m = clusterlab.scenario(lab, kind, 1, rate=RATE, rejoin=rejoin, **kw)
    print(f"{lab.variant}/{lab.speaker} {kind}: gone {m['gone']} lost {m['lost']} "
          f"rejoin lost {m['lost_heal']} back {m['back']} before {m['before']} "
          f"during {m['during']}")
    lab.wait_all()
    return m


def fair(m, nodes):
    total = sum(m["before"].values())
    return total and set(m["before"]) == nodes and min(m["before"].values()) >= FAIR * total


def cluster_state(lab, node):
    """`steerctl cluster`'s state and reason on @node."""
    d = node.ctl("cluster")
    return {"state": d["state"], "reason": d["reason"], "method": d["method"],
            "node_id": d["node_id"]}


def rejoined(m):
    """Back after the heal, and not a query lost on the way."""
    return m["back"] is not None and m["lost_heal"] == 0


# ---- BGP, BIRD on the nodes, announce: interface --------------------------------------------

def test_spread_over_three_nodes(bgp):
    m = trial(bgp, "spread")
    assert m["lost"] == 0 and m["lost_before"] == 0, m
    assert fair(m, bgp.all_ids()), m
    for node in bgp.nodes.values():
        st = cluster_state(bgp, node)
        assert st["state"] == "announced" and st["method"] == "interface", st
        assert st["node_id"] == node.id, st


def test_kill_9_leaves_within_half_a_second(bgp):
    m = trial(bgp, "kill", rejoin=REJOIN_RESTART)
    assert m["lost_before"] == 0, m
    assert m["gone"] is not None and m["gone"] <= GONE_STEERD, m
    assert m["during"] and "n1" not in m["during"], m
    assert rejoined(m), m


@pytest.mark.timing  # the kill trial runs the same withdrawal sanitized
def test_sigstop_leaves_within_half_a_second(bgp):
    m = trial(bgp, "stop")
    assert m["gone"] is not None and m["gone"] <= GONE_STEERD, m
    assert "n1" not in m["during"], m
    assert rejoined(m), m  # SIGCONT: hold-down, rise, announced again


def test_broken_zone_withdraws_without_loss(bgp):
    m = trial(bgp, "zone", during=cluster_state)
    st = m["during_check"]
    assert st["state"] == "withdrawn" and "reload" in st["reason"], st
    # The node keeps serving its previous zones while the routers move away: nothing lost.
    assert m["lost"] == 0, m
    assert m["gone"] is not None and m["gone"] <= GONE_STEERD, m
    assert rejoined(m), m


@pytest.mark.timing  # BFD's timing: steerd does nothing here
def test_link_cut_is_bfd_s_job(bgp):
    m = trial(bgp, "link")
    assert m["gone"] is not None and m["gone"] <= GONE_LINK, m
    assert rejoined(m), m


@pytest.mark.timing  # test_cluster.py runs the self-check's route check sanitized
def test_default_route_removed_withdraws(bgp):
    m = trial(bgp, "route", during=cluster_state)
    st = m["during_check"]
    assert st["state"] == "withdrawn" and "routes" in st["reason"], st
    assert m["gone"] is not None and m["gone"] <= GONE_STEERD, m
    assert rejoined(m), m


def test_drain_then_stop_loses_nothing_and_rejoin_neither(bgp):
    m = trial(bgp, "drain", rejoin=REJOIN_RESTART)
    assert m["queries"] >= RATE * 6
    assert m["lost"] == 0 and m["lost_heal"] == 0 and m["lost_before"] == 0, m
    assert m["gone"] is not None, m
    assert m["back"] is not None, m


@pytest.mark.timing  # test_cluster.py runs the bird method sanitized
def test_bird_method_sigstop(bgp):
    """announce: bird: the keeper disables BIRD's static protocol vip over its socket."""
    try:
        clusterlab.restart_node(bgp, 1, "bird")
        assert cluster_state(bgp, bgp.nodes[1])["method"] == "bird"
        m = trial(bgp, "stop")
    finally:
        clusterlab.restart_node(bgp, 1, "interface")
    assert m["gone"] is not None and m["gone"] <= GONE_STEERD, m
    assert rejoined(m), m


def test_anchor_external_monitor(bgp):
    """The comparison: steerd without a cluster section behind BIRD and a 200 ms x 3
    external monitor, steerd hung. It leaves too, later than Steer's own (the bench compares
    the medians; one trial here only shows the anchor works)."""
    try:
        clusterlab.anchor(bgp, 1)
        m = trial(bgp, "monitor-stop")
    finally:
        clusterlab.restart_node(bgp, 1, "interface")
    assert m["gone"] is not None and 0.4 <= m["gone"] <= 3.0, m
    assert rejoined(m), m


# ---- OSPF ------------------------------------------------------------------------------------

@pytest.mark.timing  # OSPF's timers; the BGP trials run the same node sanitized
def test_ospf_spread_and_kill(ospf):
    m = trial(ospf, "spread")
    assert m["lost"] == 0 and fair(m, ospf.all_ids()), m
    # BIRD's OSPF acts on its 1 s tick: the fault lasts 4 s so the withdrawal is seen whole;
    # an LSA is re-originated at most every 5 s (the rejoin).
    m = trial(ospf, "kill", hold=4.0, rejoin=8.0)
    assert m["gone"] is not None and m["gone"] <= GONE_OSPF, m
    assert m["lost_heal"] == 0, m


# ---- FRR on the nodes ------------------------------------------------------------------------

@pytest.mark.timing  # test_cluster.py runs the frr method sanitized
def test_frr_spread_and_kill(frr):
    m = trial(frr, "spread")
    assert m["lost"] == 0 and fair(m, frr.all_ids()), m
    m = trial(frr, "kill", rejoin=REJOIN_RESTART)
    assert m["gone"] is not None and m["gone"] <= GONE_STEERD, m
    assert rejoined(m), m


@pytest.mark.timing  # test_cluster.py runs the frr method sanitized
def test_frr_kernel_route_method(frr):
    """announce: frr: the keeper's kernel host routes to the service address, redistributed
    by FRR (`redistribute kernel`, examples/cluster/frr.conf). zebra prefers a connected
    route over a kernel one and redistributes only the route it prefers: while the holder
    interface is up with the service address on it, its connected /32 hides the kernel
    route, so the node must never be announced that way."""
    try:
        clusterlab.restart_node(frr, 1, "frr")
        m = trial(frr, "stop")
    finally:
        clusterlab.restart_node(frr, 1, "interface")
    assert m["gone"] is not None and m["gone"] <= GONE_STEERD, m
    assert rejoined(m), m


# ---- VRRP ------------------------------------------------------------------------------------

@pytest.mark.timing  # test_cluster.py runs the keepalived method sanitized
def test_vrrp_master_killed_address_moves(vrrp):
    m = trial(vrrp, "spread")
    assert m["before"] == {"n1": m["queries"]}, m  # everything to the master
    st = vrrp.nodes[1].ctl("cluster")
    assert st["vrrp_state"] == "MASTER", st
    m = trial(vrrp, "kill", rejoin=REJOIN_RESTART)
    assert m["gone"] is not None and m["gone"] <= GONE_VRRP, m
    assert set(m["during"]) == {"n2"}, m  # the backup answers
    assert vrrp.nodes[2].ctl("cluster")["vrrp_state"] in ("MASTER", "BACKUP")
