#!/usr/bin/python3
"""Forwarder failover benchmark in the lab (tests/integration/fwdlab.py): client load through a
forwarder under test, the preferred link broken at --fault-at and healed at --heal-at.

For each trial, each forwarder kind and each fault: a fresh forwarder in the node namespace,
the cached names asked once, then fwdload.py sends the test mix (40 % cached, 20 % 5-s TTL,
25 % cache-busting, 15 % link-revealing names) at --rate q/s from the client namespace for
--duration s; link 1 is broken at --fault-at and healed at --heal-at (the heal counts from
when link 1's Unbound answers the node again). Kinds and faults are interleaved so drift of
the shared machine spreads over all of them; one lab serves every run.

Reported per kind and fault, median and max over trials: client-visible failures (no answer
within 1 s, or SERVFAIL), the failure window, the time until every revealing query is answered
by another link, the time back on link 1 after the heal, and link changes while the fault
lasts (flaps; the figure that matters at 30 % loss). For steerd also the state changes of
link 1 it logged while the fault lasted: its own view, which in-request retries (a lost query
answered over link 2) do not blur.

Usage: bench/fwd/failover.py [--kinds dnsdist,unbound] [--faults ...] [--trials 2]
       [--rate 500] [--json FILE] [--steerd PATH]       (root; see bench/README.md)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import fwdlab  # noqa: E402
import fwdload  # noqa: E402


def version(kind: str) -> str:
    try:
        if kind == "dnsdist":
            return subprocess.run([fwdlab.DNSDIST, "--version"], capture_output=True,
                                  text=True).stdout.split("\n")[0]
        if kind == "unbound":
            out = subprocess.run([fwdlab.UNBOUND, "-V"], capture_output=True, text=True).stdout
            return "unbound " + out.split("\n")[0].split()[-1]
    except (OSError, IndexError):
        pass
    return kind


def one_run(lab: fwdlab.Lab, kind: str, fault: str, a, seed: int, workdir: Path) -> dict:
    fwd = lab.start_forwarder(kind, steerd=a.steerd)
    try:
        for name in fwdlab.CACHED_NAMES:  # the cached names are in the cache before the load
            fwdlab.answers(lab.client, fwdlab.SERVICE, name, source=fwdlab.CLIENT, timeout=1)
        out = workdir / f"load-{kind}-{fault}-{seed}.json"
        start = time.monotonic() + 0.5
        wall_start = time.time() + (start - time.monotonic())
        load = subprocess.Popen([sys.executable, str(ROOT / "tests/integration/fwdload.py"),
                                 "--netns", lab.client, "--rate", str(a.rate), "--duration",
                                 str(a.duration), "--seed", str(seed), "--start-at",
                                 repr(start), "--out", str(out)])
        try:
            time.sleep(max(0.0, start + a.fault_at - time.monotonic()))
            t_fault = time.monotonic() - start
            lab.fault(fault, 1)
            time.sleep(max(0.0, start + a.heal_at - time.monotonic()))
            t_heal = time.monotonic() - start
            lab.heal(wait=True)
            t_up = time.monotonic() - start
            if load.wait(timeout=a.duration + 30) != 0:
                raise RuntimeError("fwdload failed")
        finally:
            if load.poll() is None:
                load.kill()
                load.wait()
        res = json.loads(out.read_text())
        if not a.keep_records:
            out.unlink()
    finally:
        lab.heal(wait=True)
        fwd.stop()
    m = fwdload.analyse(res["records"], t_fault, t_heal, t_up=t_up)
    m.update(kind=kind, fault=fault, seed=seed, t_fault=t_fault, t_heal=t_heal, t_up=t_up)
    # steerd logs its view of each upstream: state changes of link 1 while the fault lasts
    # (with in-request retries, "link changes" of the answers are not state changes).
    m["states"] = None
    if kind == "steerd":
        m["states"] = sum(1 for t, _, _ in fwd.state_changes(fwdlab.upstream_addr(1))
                          if t_fault <= t - wall_start < t_heal)
    return m


def fmt_time(values: list, end: float) -> str:
    """median / max of seconds where None is "never" (or "> end")."""
    v = sorted(math.inf if x is None else x for x in values)
    med, mx = statistics.median(v), v[-1]

    def one(x):
        return f">{end:.0f}" if x == math.inf else f"{x:.1f}"
    return f"{one(med)} / {one(mx)}"


def fmt_count(values: list) -> str:
    return f"{statistics.median(values):g} / {max(values)}"


def states(rs: list[dict]) -> str:
    """median / max of the logged state changes (steerd only; "-" for the others)."""
    v = [r.get("states") for r in rs]
    return "-" if None in v else fmt_count(v)


def table(results: list[dict], a) -> str:
    rows = ["| forwarder | fault | failures | failure window s | all on link 2 s | "
            "back on link 1 s | link changes | slow (0.5-1 s) | on link 1 before / end | "
            "link 1 state changes |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for kind in a.kinds:
        for fault in a.faults:
            rs = [r for r in results if r["kind"] == kind and r["fault"] == fault]
            if not rs:
                continue
            rows.append(
                f"| {kind} | {fault} | {fmt_count([r['failures'] for r in rs])} | "
                f"{fmt_time([r['window'] for r in rs], 0)} | "
                f"{fmt_time([r['switch'] for r in rs], a.heal_at - a.fault_at)} | "
                f"{fmt_time([r['failback'] for r in rs], a.duration - a.heal_at)} | "
                f"{fmt_count([r['flaps'] for r in rs])} | "
                f"{fmt_count([r['slow'] for r in rs])} | "
                f"{statistics.median(r['before'] for r in rs):.0%} / "
                f"{statistics.median(r['after'] for r in rs):.0%} | "
                f"{states(rs)} |")
    return "\n".join(rows)


def reanalyse(path: str, workdir: str, a) -> list[dict]:
    """The figures of a --json file's runs recomputed from their kept records (--workdir,
    --keep-records), with this version's definitions."""
    old = json.loads(Path(path).read_text())
    args = old["args"]
    for k in ("kinds", "faults", "trials", "rate", "fault_at", "heal_at", "duration"):
        setattr(a, k, args[k])
    results = []
    for run in old["runs"]:
        rec = Path(workdir) / f"load-{run['kind']}-{run['fault']}-{run['seed']}.json"
        res = json.loads(rec.read_text())
        if "t_up" in run:
            t_heal, t_up = run["t_heal"], run["t_up"]
        else:  # first version: t_heal was taken once the link answered again
            t_heal, t_up = args["heal_at"] + run["t_fault"] - args["fault_at"], run["t_heal"]
        m = fwdload.analyse(res["records"], run["t_fault"], t_heal, t_up=t_up)
        m.update(kind=run["kind"], fault=run["fault"], seed=run["seed"],
                 t_fault=run["t_fault"], t_heal=t_heal, t_up=t_up)
        results.append(m)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default="dnsdist,unbound",
                    help="forwarders under test, in round order: "
                         f"{','.join(fwdlab.KINDS)}")
    ap.add_argument("--faults", default=",".join(fwdlab.FAULTS))
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--rate", type=float, default=500, help="client q/s (500-2,000)")
    ap.add_argument("--fault-at", type=float, default=10)
    ap.add_argument("--heal-at", type=float, default=16)
    ap.add_argument("--duration", type=float, default=24)
    ap.add_argument("--links", type=int, default=2)
    ap.add_argument("--steerd", help="steerd binary for --kinds steerd")
    ap.add_argument("--json", help="write every run's figures here")
    ap.add_argument("--workdir", help="keep the lab's configs and logs here")
    ap.add_argument("--keep-records", action="store_true",
                    help="keep each run's per-query records (with --workdir)")
    ap.add_argument("--reanalyse", metavar="JSON",
                    help="no runs: recompute and print the figures of an earlier --json "
                         "file from the records kept in --workdir")
    a = ap.parse_args()
    if a.reanalyse:
        if not a.workdir:
            ap.error("--reanalyse needs --workdir (where --keep-records kept them)")
        results = reanalyse(a.reanalyse, a.workdir, a)
        print(f"{a.rate:g} q/s, fault at {a.fault_at:g} s, heal at {a.heal_at:g} s, "
              f"end {a.duration:g} s, {a.trials} trials; median / max")
        print(table(results, a))
        if a.json:
            Path(a.json).write_text(json.dumps({"args": json.loads(
                Path(a.reanalyse).read_text())["args"], "runs": results}, indent=1))
        return 0
    a.kinds = a.kinds.split(",")
    a.faults = a.faults.split(",")
    for k in a.kinds:
        if k not in fwdlab.KINDS:
            ap.error(f"unknown kind {k}")
    for f in a.faults:
        if f not in fwdlab.FAULTS:
            ap.error(f"unknown fault {f}")
    if not a.fault_at < a.heal_at < a.duration:
        ap.error("need --fault-at < --heal-at < --duration")
    if os.geteuid() != 0:
        ap.error("the lab needs root (network namespaces)")
    missing = fwdlab.missing_tools()
    if missing:
        ap.error(f"missing: {', '.join(missing)} (scripts/setup-deps.sh test)")
    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    # SIGTERM, and SIGINT also when started in the background: the lab is torn down.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    results = []
    with fwdlab.Lab(links=a.links, workdir=a.workdir, keep=bool(a.workdir)) as lab:
        workdir = lab.dir
        for trial in range(a.trials):
            for kind in a.kinds:
                for fault in a.faults:
                    t = time.monotonic()
                    m = one_run(lab, kind, fault, a, 1000 + trial, workdir)
                    results.append(m)
                    sw = "never" if m["switch"] is None else f"{m['switch']:.2f}"
                    fb = "no" if m["failback"] is None else f"{m['failback']:.2f}"
                    print(f"trial {trial + 1} {kind:8} {fault:12} failures {m['failures']:5} "
                          f"window {m['window']:5.2f} switch {sw:>5} failback {fb:>5} "
                          f"changes {m['flaps']:3} slow {m['slow']:3} "
                          f"link1 {m['before']:4.0%}/{m['after']:4.0%} "
                          f"states {'-' if m['states'] is None else m['states']} "
                          f"({time.monotonic() - t:.0f} s)", flush=True)
    print()
    print(f"{a.rate:g} q/s, fault at {a.fault_at:g} s, heal at {a.heal_at:g} s, "
          f"end {a.duration:g} s, {a.trials} trials; median / max")
    print(table(results, a))
    if a.json:
        Path(a.json).write_text(json.dumps({
            "args": {k: v for k, v in vars(a).items()},
            "versions": {k: version(k) for k in a.kinds}, "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as e:
        print(f"failover: stopped ({e or 'interrupt'}); the lab is torn down", file=sys.stderr)
        sys.exit(130)
