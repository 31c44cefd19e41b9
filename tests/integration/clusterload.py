#!/usr/bin/python3
"""Client load for the cluster lab, and what it shows: identity queries at a fixed rate from
many source ports in the lab's client namespace, one record per query, and the figures of a
fault computed from the records.

Each query asks who answers: `id.server CH TXT` (steerd answers its cluster node id) or, for
a steerd without identity answers, the lab zone's node.cluster.lab TXT (each node's zone says
its own id). Queries go round-robin over --sockets connected UDP sockets, each with its own
source port, so the router's L4 hash spreads them over the nodes and each socket's queries
stick to one node while the route is stable.

Each record: [socket, send time, answer time (None: none within --wait), node id of the
answer (None: none or not an identity answer), rcode]. An answer later than the client's
timeout (1 s) counts as lost, as the client would have given up.

    clusterload.py --netns NS --rate 1000 --duration 10 --out load.json [--identity zone]

As a module: run_load(...) returns the same dict; analyse(records, node, t_fault, t_heal)
gives the figures of one fault on one node.
"""

from __future__ import annotations

import argparse
import collections
import json
import select
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fwdlab  # noqa: E402
from fwdload import qwire, txt_strings  # noqa: E402

TIMEOUT = 1.0  # a client gives up after this: a later answer is a loss
# A query sent this shortly before a fault may still be in the node's socket buffer or on
# its way back when the fault strikes (kill -9 loses it): it counts as the fault's, not as
# lost before it. A sanitized steerd on a loaded machine answers in up to a few tens of ms.
IN_FLIGHT = 0.1
SERVICE = "192.0.2.53"
CLIENT = "10.99.0.2"
IDENTITY = {"chaos": ("id.server", 16, 3), "zone": ("node.cluster.lab", 16, 1)}


def txt_first(reply: bytes, qlen: int) -> str | None:
    """The first string of the first TXT record in the answer section, or None."""
    return next(txt_strings(reply, qlen), None)


def run_load(netns: str, server: str, rate: float, duration: float, *, sockets: int = 128,
             identity: str = "chaos", source: str = CLIENT, port: int = 53,
             start_at: float | None = None, wait: float = 1.5) -> dict:
    """Send identity queries at @rate q/s for @duration s (from monotonic time @start_at,
    default now) over @sockets sockets in turn, and return {"start": t0, "rate": ..,
    "records": [[socket, t_send, t_answer|None, node|None, rcode|None], ...]} with times in
    seconds relative to t0. Answers are awaited up to @wait s."""
    qname, qtype, qclass = IDENTITY[identity]
    socks = []
    for _ in range(sockets):
        s = fwdlab.ns_socket(netns)
        s.bind((source, 0))
        s.connect((server, port))
        s.setblocking(False)
        socks.append(s)
    ep = select.epoll()
    by_fd = {}
    for k, s in enumerate(socks):
        ep.register(s.fileno(), select.EPOLLIN)
        by_fd[s.fileno()] = k
    total = int(rate * duration)
    records: list[list] = []
    inflight: dict[tuple[int, int], tuple[int, bytes]] = {}  # (socket, id) -> (record, question)
    order: collections.deque[tuple[float, tuple[int, int]]] = collections.deque()
    t0 = start_at if start_at is not None else time.monotonic()
    while time.monotonic() < t0:
        time.sleep(min(0.01, max(0.0, t0 - time.monotonic())))
    i = 0
    while True:
        now = time.monotonic()
        while i < total and t0 + i / rate <= now:
            k = i % sockets
            qid = (i // sockets) & 0xFFFF
            pkt, question = qwire(qid, qname, qtype, rd=False, qclass=qclass)
            t = time.monotonic()
            records.append([k, t - t0, None, None, None])
            try:
                socks[k].send(pkt)
            except OSError:
                pass  # e.g. ECONNREFUSED from an earlier ICMP error: the query is lost
            inflight[(k, qid)] = (i, question)
            order.append((t, (k, qid)))
            i += 1
        now = time.monotonic()
        while order and now - order[0][0] > wait:
            inflight.pop(order.popleft()[1], None)
        if i >= total and (not inflight or now > t0 + duration + wait):
            break
        nxt = t0 + i / rate if i < total else now + 0.05
        for fd, _ in ep.poll(max(0.0, min(nxt - now, 0.05))):
            k = by_fd[fd]
            while True:
                try:
                    reply = socks[k].recv(4096)
                except BlockingIOError:
                    break
                except OSError:
                    continue  # an ICMP error (the node is unreachable): keep receiving
                t = time.monotonic()
                if len(reply) < 12 or not reply[2] & 0x80:
                    continue
                qid = struct.unpack_from("!H", reply)[0]
                ent = inflight.get((k, qid))
                if ent is None:
                    continue
                idx, question = ent
                if reply[12:12 + len(question)] != question:
                    continue
                del inflight[(k, qid)]
                rec = records[idx]
                rec[2] = t - t0
                rec[4] = reply[3] & 0x0F
                rec[3] = txt_first(reply, len(question))
    ep.close()
    for s in socks:
        s.close()
    return {"start": t0, "rate": rate, "duration": duration, "timeout": TIMEOUT,
            "sockets": sockets, "identity": identity, "records": records}


def lost(rec: list, timeout: float = TIMEOUT) -> bool:
    """No answer within @timeout, an answer other than NOERROR, or one without a node id."""
    return rec[2] is None or rec[2] - rec[1] > timeout or rec[4] != 0 or rec[3] is None


def spread(records: list[list], t_from: float = 0.0, t_to: float = float("inf"),
           timeout: float = TIMEOUT) -> dict[str, int]:
    """Answers per node among the queries sent in [@t_from, @t_to)."""
    c = collections.Counter(r[3] for r in records
                            if t_from <= r[1] < t_to and not lost(r, timeout))
    return dict(sorted(c.items()))


def analyse(records: list[list], node: str, t_fault: float, t_heal: float | None = None, *,
            timeout: float = TIMEOUT, settle: float = 1.0) -> dict:
    """The figures of one fault on @node (times relative to the load's start; the fault at
    @t_fault, its heal began at @t_heal, None: not healed):
    gone       seconds from the fault until the last query that went to @node or was lost
               (every query sent later and before the heal was answered by another node);
               None when that did not hold for @settle s before the heal (never left)
    lost       queries lost among those sent between the fault (less IN_FLIGHT: the
               queries in flight when it struck) and the heal
    lost_heal  queries lost among those sent after the heal (the rejoin)
    lost_before queries lost among those sent before the fault's in-flight window
    back       seconds from the heal until the first answer from @node; None: not back
    before     answers per node before the fault; during: between the fault + @settle and the
               heal; after: in the last 2 s of the run
    slow       answers that took over 0.2 s but came within @timeout"""
    end = max((r[1] for r in records), default=0.0)
    t_end = end + 1e-9 if t_heal is None else t_heal
    during = [r for r in records if t_fault <= r[1] < t_end]
    hit = [r for r in records if t_fault - IN_FLIGHT <= r[1] < t_end]
    to_node = [r for r in during if lost(r, timeout) or r[3] == node]
    gone: float | None = 0.0
    if to_node:
        last = to_node[-1][1]
        settled = t_heal is None or t_end - last >= settle
        gone = last - t_fault if settled else None
    post = [r for r in records if t_heal is not None and r[1] >= t_heal]
    first_back = next((r for r in post if not lost(r, timeout) and r[3] == node), None)
    return {
        "queries": len(records),
        "gone": gone,
        "lost": sum(1 for r in hit if lost(r, timeout)),
        "lost_heal": sum(1 for r in post if lost(r, timeout)),
        "lost_before": sum(1 for r in records
                           if r[1] < t_fault - IN_FLIGHT and lost(r, timeout)),
        "back": (first_back[1] - t_heal) if first_back else None,
        "before": spread(records, 0.0, t_fault, timeout),
        "during": spread(records, t_fault + settle, t_end, timeout),
        "after": spread(records, max(end - 2.0, t_heal or 0.0), end + 1.0, timeout),
        "slow": sum(1 for r in records if r[2] is not None and 0.2 < r[2] - r[1] <= timeout),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--netns", required=True, help="the lab's client namespace")
    ap.add_argument("--server", default=SERVICE)
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--source", default=CLIENT)
    ap.add_argument("--rate", type=float, default=1000)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--sockets", type=int, default=128)
    ap.add_argument("--identity", choices=sorted(IDENTITY), default="chaos")
    ap.add_argument("--start-at", type=float, help="CLOCK_MONOTONIC time to start at")
    ap.add_argument("--out", required=True, help="JSON file for the records")
    a = ap.parse_args()
    res = run_load(a.netns, a.server, a.rate, a.duration, sockets=a.sockets,
                   identity=a.identity, source=a.source, port=a.port, start_at=a.start_at)
    Path(a.out).write_text(json.dumps(res, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
