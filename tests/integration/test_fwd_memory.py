"""steerd's forwarder cache keeps to its memory cap under a random-name flood, in the lab
(tests/integration/fwdlab.py): steerd from a config file with `forward: cache: { max-size:
8M }`, bench/loadgen in the client namespace sending unique names with RD set for 12 s
(one socket, so in file order, never the same name twice; half *.bust.example.test, NOERROR,
half nonexistent names in example.test, NXDOMAIN with an SOA: both cached), answered by
link 1's Unbound.

Baseline: steerd's VmRSS once it answers, a few names are cached and its threads have run
for a second, before the flood. Goal: VmHWM (peak RSS) after the flood <= baseline + cap +
20 % of the cap. Uncapped, the flood's entries alone would take several times the cap. That
the cache really filled and evicted is checked without steerd's counters: the last names of
the flood are still answered from the cache (nothing goes upstream), most of the first ones
are not (they were evicted: the flood takes far less than their TTLs of 30 s and 60 s).

Needs root (network namespaces), a steerd with the forwarder and bench/loadgen ($LOADGEN,
else the steerd build's, else build/bench/loadgen)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

import fwdlab
from conftest import sanitized
from fwdlab import CLIENT, SERVICE, ZONE

pytestmark = pytest.mark.lab

CAP_MIB = 8
NAMES = 400_000  # more than 12 s at the rate the upstream sustains (~13k/s)
ROOT = Path(__file__).resolve().parents[2]


def loadgen_path(fwd) -> str | None:
    cands = [os.environ.get("LOADGEN"),
             str(Path(fwd.binary()).resolve().parents[2] / "bench" / "loadgen"),
             str(ROOT / "build" / "bench" / "loadgen")]
    return next((c for c in cands if c and os.path.exists(c)), None)


def status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    yield from fwdlab.lab_for_tests(tmp_path_factory)


def test_random_name_flood_stays_within_the_cache_cap(lab):
    binary = fwdlab.Steerd(lab).binary()
    if sanitized(binary):
        pytest.skip("RSS of an AddressSanitizer build measures its quarantine, not the cache")
    fwd = lab.start_forwarder("steerd", config={"cache": f"{{ max-size: {CAP_MIB}M }}"})
    try:
        loadgen = loadgen_path(fwd)
        assert loadgen, "no bench/loadgen (ninja -C build bench/loadgen, or set $LOADGEN)"
        for i in range(20):
            fwdlab.answers(lab.client, SERVICE, f"base{i}.bust.{ZONE}", source=CLIENT)
        time.sleep(1.0)
        pid = fwd.proc.pid
        base = status_kib(pid, "VmRSS")
        tag = os.urandom(3).hex()
        names = [f"f{tag}{i}.bust.{ZONE}" if i % 2 == 0 else f"n{tag}{i}.{ZONE}"
                 for i in range(NAMES)]
        qfile = lab.dir / "flood.txt"
        qfile.write_text("".join(f"{n} A\n" for n in names))
        samples = []
        done = threading.Event()

        def sample():
            while not done.is_set():
                samples.append(status_kib(pid, "VmRSS"))
                done.wait(0.2)
        t = threading.Thread(target=sample, daemon=True)
        t.start()
        # Part of one pass over the names: one socket sends them in file order.
        p = subprocess.run(["ip", "netns", "exec", lab.client, loadgen, "--server", SERVICE,
                            "--port", "53", "--queries", str(qfile), "--rd", "--duration",
                            "12", "--warmup", "0", "--window", "64", "--sockets", "1",
                            "--timeout", "2000", "--json"], capture_output=True, text=True,
                           timeout=60)
        done.set()
        t.join()
        assert p.returncode in (0, 1) and p.stdout, p.stderr
        res = json.loads(p.stdout)
        peak = status_kib(pid, "VmHWM")
        now = status_kib(pid, "VmRSS")
        answered = res["rcodes"].get("NOERROR", 0) + res["rcodes"].get("NXDOMAIN", 0)
        sent_names = res["sent"]
        assert sent_names < NAMES, "the flood wrapped around: make NAMES larger"
        # Which of the first and last flood names still come from the cache (nothing upstream).
        first = names[:400:2]
        # loadgen reorders each block of 1,024 queries by length: the last two blocks may be
        # partly unsent, so "last" is the 400 names before them.
        last = names[sent_names - 2448:sent_names - 2048:2]
        with lab.sniff(1) as s1, lab.sniff(2) as s2:
            for n in first + last:
                fwdlab.answers(lab.client, SERVICE, n, source=CLIENT, timeout=1)
            time.sleep(0.3)
        upstream = {p[6][:-4].lower() for s in (s1, s2) for p in s.packets}

        def wire(n):
            return b"".join(bytes([len(x)]) + x.encode() for x in n.split(".")) + b"\0"
        first_missed = sum(1 for n in first if wire(n) in upstream)
        last_missed = sum(1 for n in last if wire(n) in upstream)
        cache = fwd.ctl("cache")["cache"]
    finally:
        problems = fwd.stop_checked()
    assert not problems, problems
    info = (f"baseline {base} KiB, peak {peak} KiB, after {now} KiB, samples max "
            f"{max(samples) if samples else 0} KiB; first names missed {first_missed}, "
            f"last names missed {last_missed}; cache {cache}; loadgen {res}")
    print(info)
    assert answered >= 60_000, info  # the flood happened, answered
    assert min(res["rcodes"].get("NOERROR", 0), res["rcodes"].get("NXDOMAIN", 0)) > 20_000, info
    assert res["lost"] < answered / 100, info
    # The cap held: peak within baseline + cap + 20 %.
    limit = base + int(CAP_MIB * 1024 * 1.2)
    assert peak <= limit, info
    # The cache's own account: at its cap, and it evicted.
    assert cache["max_bytes"] == CAP_MIB << 20 and cache["bytes"] <= cache["max_bytes"], info
    assert cache["evictions"] > 0, info
    # It was a cache, and it evicted: the last names hit, most of the first ones were gone.
    assert last_missed <= len(last) // 10, (last_missed, info)
    assert first_missed >= len(first) // 2, (first_missed, info)
