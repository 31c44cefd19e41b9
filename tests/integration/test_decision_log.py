"""The sampled GSLB decision log: one JSON line per sampled decision with its reasons, as
`steerctl explain` gives them (the map block and the nets file:line that decided it, the
candidates with their health, the policy, the answer). Uses the GSLB test data of
test_gslb.py (tests/data/gslb/integration).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import dns.edns
import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "gslb" / "integration"
ZONE = "ecslb.example.test"
GEO = f"geo.{ZONE}"

SERVER = """server:
  listen: {listen}
  control-socket: {ctl}
  workers: 1
  tcp-workers: 1
{zones}"""


def start(steerd, tmp_path, sample: int):
    shutil.copytree(DATA / "nets", tmp_path / "nets", dirs_exist_ok=True)
    log = tmp_path / "decisions.jsonl"
    gslb = (DATA / "gslb.yaml").read_text()
    gslb += f"decision-log: {{ file: {log}, sample: {sample} }}\n"
    srv = steerd(zones={ZONE: DATA / f"{ZONE}.zone"},
                 config=SERVER + gslb.replace("{", "{{").replace("}", "}}"))
    return srv, log


def ask(srv, name, rdtype="A", ecs=None, tcp=False):
    opts = [dns.edns.ECSOption(ecs[0], ecs[1], 0)] if ecs else []
    q = dns.message.make_query(name, rdtype, use_edns=0, options=opts)
    r = srv.tcp(q) if tcp else srv.udp(q)
    assert r.rcode() == dns.rcode.NOERROR, r
    return sorted(rd.address for rrset in r.answer for rd in rrset
                  if rrset.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA))


def read_lines(log: Path, name: str | None = None) -> list[dict]:
    if not log.exists():
        return []
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    return [r for r in rows if name is None or r["name"] == name]


def section(text: str, rdtype: str) -> list[str]:
    """The explain lines of the @rdtype section, as the log keeps them."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("== "):
            inside = line == f"== {rdtype} =="
            continue
        if inside and line:
            out.append(line)
    return out


CASES = [
    # (ECS subnet or None, qtype, transport): the resolver is 127.0.0.1 (map block 127/8).
    (("198.51.100.0", 24), "A", "udp"),     # a nets file entry
    (("203.0.113.0", 24), "A", "tcp"),      # an inline entry
    (("2001:db8:2::", 48), "AAAA", "udp"),
    (None, "A", "udp"),                     # no ECS: the resolver's address decides
    (None, "AAAA", "tcp"),
]


def test_sample_1_every_decision_matches_explain(steerd, tmp_path):
    srv, log = start(steerd, tmp_path, 1)
    answers = [ask(srv, GEO, rdtype, ecs, tcp == "tcp") for ecs, rdtype, tcp in CASES]
    wait_for(lambda: len(read_lines(log, GEO)) >= len(CASES), 5, what="the decision lines")
    rows = read_lines(log, GEO)
    assert len(rows) == len(CASES), rows
    # Each query thread's ring is drained in turn: match lines to queries by what they ask.
    by_query = {(r["qtype"], r["ecs"]): r for r in rows}
    assert len(by_query) == len(CASES)
    ordered = []
    for (ecs, rdtype, _), answer in zip(CASES, answers):
        want_ecs = f"{ecs[0]}/{ecs[1]}" if ecs else None
        row = by_query[(rdtype, want_ecs)]
        ordered.append(row)
        assert row["client"] == "127.0.0.1"
        assert row["answer"]["kind"] == "addresses"
        assert sorted(row["answer"]["addresses"]) == answer
        # The reasons are exactly what steerctl explain says for this client and subnet.
        args = ["explain", GEO, "127.0.0.1"] + ([want_ecs] if want_ecs else [])
        explained = srv.ctl_json(*args)["text"]
        assert row["explain"] == section(explained, rdtype)
        assert all(a in row["explained_answer"] for a in answer)
        assert row["candidates"] and "chosen" in row["candidates"][0]
        assert "policy geo" in row["policy"]
        assert row["time"].endswith("Z")
    rows = ordered
    # The nets block that decided, with its file:line.
    assert rows[0]["decided_by"].startswith(f"nets {tmp_path}/nets/dc1.txt:2:"), rows[0]
    assert ":" in rows[1]["decided_by"] and "203.0.113.0/24" in rows[1]["decided_by"], rows[1]
    assert "127.0.0.0/8" in rows[3]["decided_by"], rows[3]
    stats = srv.ctl_json("stats")["decision_log"]
    assert stats["enabled"] and stats["written"] >= len(CASES) and stats["dropped"] == 0


def test_candidates_show_health(steerd, tmp_path):
    """A datacenter forced down is shown as skipped, with the reason, in the logged line."""
    srv, log = start(steerd, tmp_path, 1)
    ask(srv, f"failover.{ZONE}", "A", ("198.51.100.0", 24))
    wait_for(lambda: read_lines(log, f"failover.{ZONE}"), 5, what="the decision line")
    row = read_lines(log, f"failover.{ZONE}")[0]
    text = " ".join(row["candidates"]).lower()
    assert "down" in text, row
    assert row["answer"]["addresses"] == ["203.0.113.20"], row


def test_sample_10_about_a_tenth(steerd, tmp_path):
    srv, log = start(steerd, tmp_path, 10)
    for i in range(200):
        ask(srv, GEO, "A", ("198.51.100.0", 24))
    wait_for(lambda: len(read_lines(log, GEO)) >= 15, 5, what="the sampled lines")
    srv.stop()  # the last drain at exit
    rows = read_lines(log, GEO)
    assert 15 <= len(rows) <= 25, len(rows)
    assert all(r["answer"]["addresses"] == ["198.51.100.10"] for r in rows)


@pytest.mark.skipif(not shutil.which("dnsperf"), reason="needs dnsperf")
def test_full_ring_drops_are_counted(steerd, tmp_path):
    """A burst far above what a ring holds between two drains: the query thread drops the
    records it has no room for and counts them; every decision is written or counted."""
    srv, log = start(steerd, tmp_path, 1)
    queries = tmp_path / "queries.txt"
    queries.write_text(f"{GEO} A\n" * 100)
    res = subprocess.run(["dnsperf", "-s", srv.host, "-p", str(srv.port), "-d", str(queries),
                          "-n", "100", "-c", "4", "-q", "100"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    answered = int(re.search(r"Queries completed:\s+(\d+)", res.stdout).group(1))
    assert answered > 5000, res.stdout

    def settled():
        st = srv.ctl_json("stats")["decision_log"]
        return st["written"] + st["dropped"] >= answered and st
    st = wait_for(settled, 10, what="every decision written or counted")
    assert st["dropped"] > 0, st
    assert st["written"] + st["dropped"] == answered, (st, answered)
    srv.stop()
    assert len(read_lines(log, GEO)) == st["written"]


def test_off_by_default(steerd, tmp_path):
    shutil.copytree(DATA / "nets", tmp_path / "nets", dirs_exist_ok=True)
    gslb = (DATA / "gslb.yaml").read_text()
    srv = steerd(zones={ZONE: DATA / f"{ZONE}.zone"},
                 config=SERVER + gslb.replace("{", "{{").replace("}", "}}"))
    ask(srv, GEO, "A")
    assert srv.ctl_json("stats")["decision_log"] == {"enabled": False, "written": 0,
                                                     "dropped": 0}
