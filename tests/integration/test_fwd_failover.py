"""steerd's caching forwarder fails over and back in the lab (tests/integration/fwdlab.py):
500 q/s of the forwarder's test mix from the client namespace (tests/integration/fwdload.py),
link 1 broken each way about 3 s into the run and healed 3 s later, steerd in quick mode
(--forward per link in order: the contract's probe defaults, interval 1 s, timeout 500 ms,
fall 2, rise 3, hold-down 5 s; retry-timeout 400 ms).

Each fault: no client-visible failure (no answer within 1 s, or SERVFAIL), every
link-revealing answer from link 2 within 1 s of the fault, back on link 1 within hold-down +
1 s of link 1 answering again, and link 1 preferred before and at the end. At 30 % loss on
link 1: no flapping (steerd's own view of link 1, from the state changes it logs, leaves
"up" at most once and never comes back while the loss lasts). Both links healthy: every
client query goes to link 1.

Needs root (network namespaces) and a steerd with the forwarder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fwdlab
import fwdload
from fwdlab import CLIENT, SERVICE, which_link

pytestmark = pytest.mark.lab

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network "
                                "namespaces)")

RATE = 500
FAULT_AT = 3.0
HEAL_AT = 6.0
# Back on link 1 takes up to hold-down + 1 s after link 1 answers again (a killed Unbound
# takes up to a second to restart), and analyse() wants the final run on link 1 to last a
# second: heal + 1 + 5 + 1 + 1, and some slack.
DURATION = 15.0
HOLD_DOWN = 5.0
SWITCH_MAX = 1.0
FWDLOAD = Path(__file__).resolve().parent / "fwdload.py"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    yield from fwdlab.lab_for_tests(tmp_path_factory)


def start_steerd(lab):
    t0 = time.monotonic()
    fwd = lab.start_forwarder("steerd")
    for name in fwdlab.CACHED_NAMES:  # the cached names are in the cache before the load
        fwdlab.answers(lab.client, SERVICE, name, source=CLIENT, timeout=1)
    # The first probe rounds (due at start, 500 ms timeout) have proven both links.
    time.sleep(max(0.0, t0 + 2.0 - time.monotonic()))
    return fwd


def run_fault(lab, fwd, fault, *, fault_at=FAULT_AT, heal_at=HEAL_AT, duration=DURATION):
    """The load with link 1 broken by @fault from @fault_at to @heal_at (s into the run);
    returns (analyse() figures with t_fault, t_heal and t_up added, the load's start as
    wall-clock time), times relative to the load's start."""
    out = lab.dir / f"load-{fault}.json"
    start = time.monotonic() + 0.3
    wall_start = time.time() + (start - time.monotonic())
    load = subprocess.Popen([sys.executable, str(FWDLOAD), "--netns", lab.client, "--rate",
                             str(RATE), "--duration", str(duration), "--start-at", repr(start),
                             "--out", str(out)])
    try:
        time.sleep(max(0.0, start + fault_at - time.monotonic()))
        t_fault = time.monotonic() - start
        if fault:
            lab.fault(fault, 1)
        time.sleep(max(0.0, start + heal_at - time.monotonic()))
        t_heal = time.monotonic() - start
        lab.heal(wait=True)
        t_up = time.monotonic() - start
        assert load.wait(timeout=duration + 30) == 0, "fwdload failed"
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()
        lab.heal(wait=True)
    records = json.loads(out.read_text())["records"]
    m = fwdload.analyse(records, t_fault, t_heal, t_up=t_up)
    m.update(t_fault=t_fault, t_heal=t_heal, t_up=t_up)
    return m, wall_start


# A sanitized run keeps the kill: every fault takes the same failover path in steerd.
TIMING = pytest.mark.timing


@needs_root
@pytest.mark.parametrize("fault", [pytest.param("link-down", marks=TIMING),
                                   pytest.param("carrier-down", marks=TIMING),
                                   pytest.param("drop", marks=TIMING), "kill",
                                   pytest.param("cutoff", marks=TIMING)])
def test_failover_and_back_without_client_failures(lab, fault):
    fwd = start_steerd(lab)
    try:
        m, _ = run_fault(lab, fwd, fault)
    finally:
        problems = fwd.stop_checked()
    assert not problems, problems
    assert m["queries"] == RATE * DURATION
    assert m["failures"] == 0, m
    assert m["before"] == 1.0, m  # ordered: everything on link 1 until the fault
    assert m["switch"] is not None and m["switch"] <= SWITCH_MAX, m
    # Back on link 1, and from then on only link 1 to the end of the run.
    assert m["failback"] is not None and m["failback"] <= HOLD_DOWN + 1.0, m


@needs_root
@pytest.mark.timing  # loss statistics over time
def test_no_flapping_at_30_percent_loss(lab):
    fwd = start_steerd(lab)
    try:
        m, wall_start = run_fault(lab, fwd, "loss30", fault_at=2.0, heal_at=8.0, duration=9.0)
    finally:
        problems = fwd.stop_checked()
    assert not problems, problems
    changes = [(t - wall_start, a, b) for t, a, b in fwd.state_changes(fwdlab.upstream_addr(1))]
    during = [c for c in changes if m["t_fault"] <= c[0] < m["t_heal"]]
    # Lossy probes may take link 1 away (degraded, and on to upstream-down when they keep
    # failing), but it never comes back during the fault: no state is followed by a milder one.
    severity = {"none": 0, "degraded": 1, "upstream-down": 2, "link-down": 2}
    steps = [severity.get(b, 2) for _, _, b in during]
    assert steps == sorted(steps) and len(during) <= 2, changes
    assert all(b != "none" for _, _, b in during), changes
    assert m["failures"] == 0, m  # lost queries are retried on link 2 within the request


@needs_root
def test_ordered_all_traffic_on_link1_when_both_are_healthy(lab):
    fwd = start_steerd(lab)
    try:
        with lab.sniff(2) as sn2:
            res = fwdload.run_load(lab.client, SERVICE, RATE, 3.0)
        links = {which_link(lab.client, SERVICE, f"healthy{i}", source=CLIENT)
                 for i in range(5)}
    finally:
        problems = fwd.stop_checked()
    assert not problems, problems
    m = fwdload.analyse(res["records"], 3.5, 3.5)
    assert m["failures"] == 0, m
    assert m["before"] == 1.0, m
    assert links == {"link1"}
    # Link 2 saw its probes (nonces under the probe name, the root in quick mode) and at most
    # the odd in-request retry of an answer slower than the retry timeout: 1 % of the load.
    client_qs = [p for p in sn2.packets
                 if b"\x07example\x04test\x00" in p[6] or b"\x09whichlink\x03lab\x00" in p[6]]
    assert len(client_qs) <= m["queries"] // 100, client_qs[:5]
    assert len(sn2.packets) > len(client_qs), "no probe reached link 2"
