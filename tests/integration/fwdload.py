#!/usr/bin/python3
"""Client load for the failover lab, and what it shows: the forwarder's test query mix at a
fixed rate from the lab's client namespace, one record per query, and the failover figures
computed from the records.

Mix (per query, drawn with a seeded RNG): 40 % cached names (c0..c199.example.test, TTL 3600),
20 % 5-s TTL names (t0..t49.example.test), 25 % cache-busting names
(<run><i>.bust.example.test, never asked twice), 15 % link-revealing names
(<run><i>.whichlink.lab TXT, answered by the upstream itself with "linkN", never asked twice).

One non-blocking connected UDP socket in the client namespace and select(): 500-2,000 q/s is
within reach of one Python process. Each query: its kind, send time, answer time (None: no
answer within --wait), rcode and, for revealing names, the link number. An answer later than
the timeout (1 s) counts as a failure, as the client would have given up.

    fwdload.py --netns NS --server 10.0.0.53 --rate 500 --duration 30 --out load.json

As a module: run_load(...) returns the same dict; analyse(records, t_fault, t_heal) gives
failures, failure window, switch and failback times and flaps.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import select
import socket
import struct
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fwdlab  # noqa: E402

KINDS = ("cached", "ttl5", "bust", "which")
MIX = (40, 20, 25, 15)
TIMEOUT = 1.0  # a client gives up after this: a later answer is a failure


def qwire(qid: int, qname: str, qtype: int, *, rd: bool = True,
          qclass: int = 1) -> tuple[bytes, bytes]:
    """A query (RD set unless @rd is false), and its question section (to match the
    answer's)."""
    q = b"".join(bytes([len(label)]) + label.encode() for label in qname.split(".")) + b"\0"
    question = q + struct.pack("!HH", qtype, qclass)
    return struct.pack("!HHHHHH", qid, 0x0100 if rd else 0, 1, 0, 0, 0) + question, question


def txt_strings(reply: bytes, qlen: int):
    """The first string of each TXT record in the answer section, in order (a reply that
    does not walk ends the list)."""
    try:
        ancount = struct.unpack_from("!H", reply, 6)[0]
        off = 12 + qlen
        for _ in range(ancount):
            # owner: a pointer or labels
            while True:
                b = reply[off]
                if b & 0xC0 == 0xC0:
                    off += 2
                    break
                off += 1 + b
                if b == 0:
                    break
            rtype, _, _, rdlen = struct.unpack_from("!HHIH", reply, off)
            off += 10
            if rtype == 16 and rdlen >= 1:
                yield reply[off + 1:off + 1 + reply[off]].decode(errors="replace")
            off += rdlen
    except (IndexError, struct.error):
        return


def txt_link(reply: bytes, qlen: int) -> int:
    """The N of the first TXT "linkN" in the answer section, 0 if none."""
    for text in txt_strings(reply, qlen):
        if text.startswith("link") and text[4:].isdigit():
            return int(text[4:])
    return 0


def run_load(netns: str, server: str, rate: float, duration: float, *,
             source: str = fwdlab.CLIENT, port: int = 53, seed: int = 1,
             start_at: float | None = None, wait: float = 3.0) -> dict:
    """Send the mix at @rate q/s for @duration s (from monotonic time @start_at, default now)
    and return {"start": t0, "rate": .., "records": [[kind, t_send, t_answer|None, rcode|None,
    link], ...]} with times in seconds relative to t0. Answers are awaited up to @wait s."""
    rng = random.Random(seed)
    run_tag = uuid.uuid4().hex[:8]
    total = int(rate * duration)
    sock = fwdlab.ns_socket(netns)
    sock.bind((source, 0))
    sock.connect((server, port))
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    records: list[list] = []
    inflight: dict[int, tuple[int, bytes]] = {}  # id -> (record index, question)
    order: collections.deque[tuple[float, int]] = collections.deque()  # (t_send, id)
    weights = list(MIX)
    t0 = start_at if start_at is not None else time.monotonic()
    while time.monotonic() < t0:
        time.sleep(min(0.01, max(0.0, t0 - time.monotonic())))
    i = 0
    while True:
        now = time.monotonic()
        while i < total and t0 + i / rate <= now:
            kind = rng.choices(range(4), weights)[0]
            if kind == 0:
                name, qtype = rng.choice(fwdlab.CACHED_NAMES), 1
            elif kind == 1:
                name, qtype = rng.choice(fwdlab.TTL5_NAMES), 1
            elif kind == 2:
                name, qtype = f"b{run_tag}{i:x}.{fwdlab.BUST_SUFFIX}", 1
            else:
                name, qtype = f"w{run_tag}{i:x}.{fwdlab.WHICH_SUFFIX}", 16
            qid = i & 0xFFFF
            pkt, question = qwire(qid, name, qtype)
            t = time.monotonic()
            records.append([kind, t - t0, None, None, 0])
            try:
                sock.send(pkt)
            except OSError:
                pass  # e.g. ECONNREFUSED from an earlier ICMP: the query counts as lost
            inflight[qid] = (i, question)
            order.append((t, qid))
            i += 1
        now = time.monotonic()
        while order and now - order[0][0] > wait:
            inflight.pop(order.popleft()[1], None)
        if i >= total and not inflight:
            break
        if i >= total and now > t0 + duration + wait:
            break
        nxt = t0 + i / rate if i < total else now + 0.05
        ready, _, _ = select.select([sock], [], [], max(0.0, min(nxt - now, 0.05)))
        if not ready:
            continue
        while True:
            try:
                reply = sock.recv(4096)
            except BlockingIOError:
                break
            except OSError:
                continue  # ECONNREFUSED: the forwarder is gone; keep receiving
            t = time.monotonic()
            if len(reply) < 12 or not reply[2] & 0x80:
                continue
            qid = struct.unpack_from("!H", reply)[0]
            ent = inflight.get(qid)
            if ent is None:
                continue
            idx, question = ent
            if reply[12:12 + len(question)] != question:
                continue
            del inflight[qid]
            rec = records[idx]
            rec[2] = t - t0
            rec[3] = reply[3] & 0x0F
            if rec[0] == 3:
                rec[4] = txt_link(reply, len(question))
    sock.close()
    return {"start": t0, "rate": rate, "duration": duration, "timeout": TIMEOUT,
            "kinds": list(KINDS), "records": records}


def failed(rec: list, timeout: float = TIMEOUT) -> bool:
    """No answer within @timeout, or an answer other than NOERROR/NXDOMAIN."""
    return rec[2] is None or rec[2] - rec[1] > timeout or rec[3] not in (0, 3)


def analyse(records: list[list], t_fault: float, t_heal: float, *, t_up: float | None = None,
            preferred: int = 1, timeout: float = TIMEOUT) -> dict:
    """Failover figures of one run (times relative to the load's start): the fault lasts from
    @t_fault to @t_heal (when the heal began); @t_up is when the link answered again (default
    @t_heal: the same).
    failures       client-visible failures (timeout after @timeout or SERVFAIL/other rcode)
    failures_fault those sent between the fault and the heal; failures_heal: after the heal
    window         seconds from the first to the last failed query sent after the fault
    switch         seconds from the fault until the last revealing query not answered by another
                   link (after it, every revealing query up to the heal was, for at least 1 s);
                   None: never
    failback       seconds from @t_up until the first of the final run of revealing answers
                   that all came from @preferred (lasting at least 1 s); None: not back before
                   the end
    flaps          changes of the answering link among revealing answers between fault and heal
    on_preferred   share of revealing answers between fault and heal from @preferred
    slow           answers that took over 0.5 s but came within @timeout
    before         share of revealing answers before the fault from @preferred (1.0 for a
                   forwarder that keeps the order)
    after          share of revealing answers in the last 2 s of the run from @preferred"""
    fails = [r for r in records if failed(r, timeout)]
    after = [r for r in fails if r[1] >= t_fault]
    which = [r for r in records if r[0] == 3]
    during = [r for r in which if t_fault <= r[1] < t_heal]
    bad_during = [r for r in during if failed(r, timeout) or r[4] == preferred or r[4] == 0]
    if not during:
        switch = None
    elif not bad_during:
        switch = 0.0
    elif bad_during[-1] is during[-1] or t_heal - bad_during[-1][1] < 1.0:
        switch = None
    else:
        switch = bad_during[-1][1] - t_fault
    post = [r for r in which if r[1] >= t_heal]
    failback = None
    if post:
        k = len(post)
        while k > 0 and not failed(post[k - 1], timeout) and post[k - 1][4] == preferred:
            k -= 1
        # back only when the final run on the preferred link lasts at least a second
        if k < len(post) and post[-1][1] - post[k][1] >= 1.0:
            failback = max(0.0, post[k][1] - (t_heal if t_up is None else t_up))
    def share(rs):
        ok = [r[4] for r in rs if not failed(r, timeout) and r[4]]
        return sum(1 for x in ok if x == preferred) / len(ok) if ok else 0.0

    end = max((r[1] for r in records), default=0.0)
    links = [r[4] for r in during if not failed(r, timeout) and r[4]]
    flaps = sum(1 for a, b in zip(links, links[1:]) if a != b)
    return {
        "queries": len(records),
        "failures": len(fails),
        "failures_fault": sum(1 for r in fails if t_fault <= r[1] < t_heal),
        "failures_heal": sum(1 for r in fails if r[1] >= t_heal),
        "failures_before": sum(1 for r in fails if r[1] < t_fault),
        "servfail": sum(1 for r in records if r[3] == 2),
        "timeouts": sum(1 for r in records if r[2] is None or r[2] - r[1] > timeout),
        "window": (after[-1][1] - after[0][1]) if after else 0.0,
        "switch": switch,
        "failback": failback,
        "flaps": flaps,
        "on_preferred": (sum(1 for x in links if x == preferred) / len(links)) if links else 0.0,
        "before": share([r for r in which if r[1] < t_fault]),
        "after": share([r for r in which if r[1] >= max(t_heal, end - 2.0)]),
        "slow": sum(1 for r in records if r[2] is not None and 0.5 < r[2] - r[1] <= timeout),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--netns", required=True, help="the lab's client namespace")
    ap.add_argument("--server", default=fwdlab.SERVICE)
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--source", default=fwdlab.CLIENT)
    ap.add_argument("--rate", type=float, default=500)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start-at", type=float, help="CLOCK_MONOTONIC time to start at")
    ap.add_argument("--out", required=True, help="JSON file for the records")
    a = ap.parse_args()
    res = run_load(a.netns, a.server, a.rate, a.duration, source=a.source, port=a.port,
                   seed=a.seed, start_at=a.start_at)
    Path(a.out).write_text(json.dumps(res, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
