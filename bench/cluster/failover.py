#!/usr/bin/python3
"""Cluster failover benchmark in the lab (tests/integration/clusterlab.py): Steer nodes behind
one service address, client identity queries from 128 source ports, one fault on node n1 per
trial, healed after --hold s; how long until no query goes to that node, and how many
queries that cost.

Variants (each its own lab, built once): bgp (BIRD router, three nodes with BIRD, BGP + BFD
100 ms x 3, announce: interface), bgp-bird (the same, announce: bird), ospf (OSPF hello 1 /
dead 3 + BFD, announce: interface), frr (FRR as the nodes' speaker, BGP + BFD, announce:
interface), frr-kernel (the same, announce: frr) and vrrp (a keepalived pair, VRRPv3, 0.1 s
adverts, announce: keepalived).
Scenarios (clusterlab.FAULT_HELP): kill, stop, zone, link, route, drain (then stop; its heal
starts steerd again: the rejoin) and monitor-stop, the anchor: steerd without a cluster
section, BIRD and an external monitor (a query every 200 ms, `birdc disable` after 3
failures) for the hung-DNS case.

Reported per variant and scenario, median and max over --trials: the time from the fault until
no query went to n1 any more (its last answer or the last lost query), the queries lost on the
way, the queries lost after the heal (the rejoin) and the time until n1 answered again after
the heal. Scenarios are interleaved within a variant so drift of the shared machine spreads
over all of them.

Usage: bench/cluster/failover.py [--variants bgp,ospf,frr,vrrp] [--scenarios kill,stop,...]
       [--trials 10] [--rate 1000] [--json FILE] [--workdir DIR]     (root; bench/README.md)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import clusterlab  # noqa: E402

# variant: (lab variant, node speaker, announcement method)
VARIANTS = {"bgp": ("bgp", "bird", "interface"), "bgp-bird": ("bgp", "bird", "bird"),
            "ospf": ("ospf", "bird", "interface"), "frr": ("bgp", "frr", "interface"),
            "frr-kernel": ("bgp", "frr", "frr"), "vrrp": ("vrrp", "bird", "keepalived")}
DEFAULT_SCENARIOS = {
    "bgp": ["kill", "stop", "zone", "link", "route", "drain", "monitor-stop"],
    "ospf": ["kill", "stop", "link", "monitor-stop"],
    "bgp-bird": ["kill", "stop"],
    "frr": ["kill", "stop", "link", "drain"],
    "frr-kernel": ["kill", "stop"],
    "vrrp": ["kill", "stop", "drain"],
}
# The goals, for the table (seconds until no query goes to the node; lost queries).
GOALS = {
    ("bgp", "kill"): "0.5 s", ("bgp-bird", "kill"): "0.5 s", ("bgp-bird", "stop"): "0.5 s",
    ("frr-kernel", "kill"): "0.5 s", ("frr-kernel", "stop"): "0.5 s", ("bgp", "stop"): "0.5 s", ("frr", "kill"): "0.5 s",
    ("frr", "stop"): "0.5 s", ("ospf", "kill"): "tick + 0.5 s", ("ospf", "stop"): "tick + 0.5 s",
    ("bgp", "link"): "0.3 s", ("frr", "link"): "0.3 s", ("vrrp", "kill"): "0.5 s",
    ("vrrp", "stop"): "0.5 s", ("bgp", "drain"): "0 lost", ("frr", "drain"): "0 lost",
    ("vrrp", "drain"): "0 lost", ("bgp", "monitor-stop"): "Steer beats it",
    ("ospf", "monitor-stop"): "Steer beats it",
}
# After the heal: a restarted steerd joins after rise rounds; a withdrawn one after the
# hold-down and rise; OSPF re-originates an LSA at most every 5 s.
REJOIN = {"kill": 3.5, "drain": 3.5}


def rejoin_time(variant: str, scenario: str) -> float:
    if variant == "ospf":
        return 8.0
    return REJOIN.get(scenario, 5.0)


def fmt_time(values: list) -> str:
    """median / max of seconds; None is "never"."""
    v = sorted(math.inf if x is None else x for x in values)

    def one(x):
        return "never" if x == math.inf else f"{x:.2f}"
    return f"{one(statistics.median(v))} / {one(v[-1])}"


def fmt_count(values: list) -> str:
    return f"{statistics.median(values):g} / {max(values)}"


def table(results: list[dict], a) -> str:
    rows = ["| variant | scenario | goal | no query to the node after s | lost | "
            "lost on rejoin | back after heal s | trials |",
            "|---|---|---|---|---|---|---|---|"]
    for variant in a.variants:
        for sc in a.scenarios.get(variant, []):
            rs = [r for r in results if r["variant"] == variant and r["scenario"] == sc]
            if not rs:
                continue
            rows.append(f"| {variant} | {sc} | {GOALS.get((variant, sc), '')} | "
                        f"{fmt_time([r['gone'] for r in rs])} | "
                        f"{fmt_count([r['lost'] for r in rs])} | "
                        f"{fmt_count([r['lost_heal'] for r in rs])} | "
                        f"{fmt_time([r['back'] for r in rs])} | {len(rs)} |")
    return "\n".join(rows)


def run_variant(variant: str, a, workdir: Path | None) -> list[dict]:
    kind, speaker, method = VARIANTS[variant]
    missing = clusterlab.missing_tools(kind, speaker)
    if missing:
        print(f"{variant}: skipped, missing {', '.join(missing)}", flush=True)
        return []
    results = []
    wd = workdir / variant if workdir else None
    if wd:
        wd.mkdir(parents=True, exist_ok=True)
    with clusterlab.Lab(kind, speaker, workdir=wd, keep=bool(wd)) as lab:
        lab.start_nodes(method=method)
        for trial in range(a.trials):
            for sc in a.scenarios[variant]:
                t = time.monotonic()
                if sc == "monitor-stop":
                    clusterlab.anchor(lab, 1)
                try:
                    lab.wait_all(60)
                    m = clusterlab.scenario(lab, sc, 1, rate=a.rate,
                                            hold=a.hold_ospf if kind == "ospf" else a.hold,
                                            rejoin=rejoin_time(variant, sc),
                                            keep=wd if a.keep_records else None)
                finally:
                    if sc == "monitor-stop":
                        clusterlab.restart_node(lab, 1, method, cluster=True)
                m.update(variant=variant, trial=trial + 1)
                results.append(m)
                gone = "never" if m["gone"] is None else f"{m['gone']:.3f}"
                back = "no" if m["back"] is None else f"{m['back']:.2f}"
                print(f"trial {trial + 1} {variant:5} {sc:13} gone {gone:>6} lost "
                      f"{m['lost']:4} rejoin lost {m['lost_heal']:3} back {back:>5} "
                      f"spread {m['before']} ({time.monotonic() - t:.0f} s)", flush=True)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default="bgp,bgp-bird,ospf,frr,frr-kernel,vrrp")
    ap.add_argument("--scenarios", help="the same scenarios for every variant (default: "
                    "per variant, see the module's doc)")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--rate", type=float, default=1000, help="client q/s")
    ap.add_argument("--hold", type=float, default=2.0, help="s from the fault to the heal")
    ap.add_argument("--hold-ospf", type=float, default=4.0,
                    help="the same for OSPF, whose withdrawals follow BIRD's 1 s tick")
    ap.add_argument("--json", help="write every trial's figures here")
    ap.add_argument("--workdir", help="keep the labs' configs and logs here")
    ap.add_argument("--keep-records", action="store_true",
                    help="keep each trial's per-query records (with --workdir)")
    a = ap.parse_args()
    a.variants = a.variants.split(",")
    for v in a.variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v} (one of {', '.join(VARIANTS)})")
    if a.scenarios:
        wanted = a.scenarios.split(",")
        for s in wanted:
            if s not in clusterlab.FAULTS:
                ap.error(f"unknown scenario {s} (one of {', '.join(clusterlab.FAULTS)})")
        a.scenarios = {v: [s for s in wanted
                           if not (s == "monitor-stop" and VARIANTS[v][1:] != ("bird",
                                                                                "interface"))]
                       for v in a.variants}
    else:
        a.scenarios = {v: DEFAULT_SCENARIOS[v] for v in a.variants}
    if os.geteuid() != 0:
        ap.error("the lab needs root (network namespaces)")
    if not clusterlab.cluster_supported():
        ap.error(f"{clusterlab.steerd_binary()} has no cluster: section")

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    # SIGTERM, and SIGINT also when started in the background: the lab is torn down.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    workdir = Path(a.workdir) if a.workdir else None
    results = []
    for v in a.variants:
        try:
            results += run_variant(v, a, workdir)
        except RuntimeError as e:  # a lab that never came up, a trial that broke it
            print(f"{v}: stopped: {e}", flush=True)
    print()
    print(f"{a.rate:g} q/s from 128 source ports, fault at 1.5 s, heal {a.hold:g} s later "
          f"(OSPF {a.hold_ospf:g} s), {a.trials} trials; median / max")
    print(table(results, a))
    if a.json:
        Path(a.json).write_text(json.dumps({"args": {k: v for k, v in vars(a).items()},
                                            "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as e:
        print(f"cluster failover: stopped ({e or 'interrupt'}); the labs are torn down",
              file=sys.stderr)
        sys.exit(130)
