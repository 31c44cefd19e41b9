#!/usr/bin/python3
"""steer-probe's cost: CPU of one agent probing at 2,000 probes/s through the delay line.

The path-delay lab of tests/integration/lab_delay.py with one site (2 ms to every resolver),
needs root: a made-up DNS node in the node namespace (a python http.server in this process,
its socket made in that namespace) reports --prefixes resolver prefixes (/24s in
100.64.0.0/10, 10 % IPv6 /48s in 2001:db8::/32) as demand; the agent measures them with
`rate: 2000`, far less than covering them every `interval` would take, so it probes at its
budget the whole time. steer-probe runs pinned to CPU 1 (taskset); the delay line answers
every DNS, TCP and ICMP probe.

Measured over --duration s after --warmup s, --rounds times: the probes the delay line
answered per second, the agent's CPU (utime + stime from /proc/<pid>/stat) as a share of one
core (goal <= 5 % at 2,000 probes/s), its RSS, and every DNS probe's qname (goal: only
dns-name, never another).

Usage: bench/probe_agent.py [--rate 2000] [--duration 20] [--rounds 3] [--prefixes 20000]
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import lab_delay  # noqa: E402
from lab_delay import NODE_ADDR4, PathsLab  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
AGENT_PORT, NODE_PORT = 8054, 8053
DNS_NAME = "probe.example.test."
# More IPv4 room than 198.18.0.0/16: shared address space (RFC 6598), never routed on the
# Internet, and here only inside the lab's namespaces.
EXTRA_NET4 = "100.64.0.0/10"

CONFIG = """zones:
  - domain: example.test
    file: {dir}/example.test.zone
datacenters:
  - {{ name: {site} }}
paths:
  agents:
    - {{ datacenter: {site}, url: "http://{agent}:{agent_port}/" }}
  max-prefixes: 1000000
  probe:
    nodes: ["http://{node}:{node_port}/"]
    methods: [{methods}]
    dns-name: {dns_name}
    rate: {rate}
    samples: 3
    interval: 10s
    hot-interval: 10s
    timeout: 1s
    publish-interval: 2s
    demand-interval: 2s
"""

ZONE = """$ORIGIN example.test.
$TTL 300
@      SOA ns1 hostmaster 1 7200 3600 1209600 300
       NS  ns1
ns1    A   192.0.2.1
probe  A   192.0.2.53
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def demand_rows(n):
    """n prefixes: 90 % /24s of EXTRA_NET4 (at most 16,384), the rest /48s of 2001:db8::/32,
    each with its .1 (::1) as the address to probe."""
    n4 = min(n * 9 // 10, 16384)
    rows = [(f"100.{64 + (i >> 8)}.{i & 255}.0/24", f"100.{64 + (i >> 8)}.{i & 255}.1", 0,
             1 + i % 97) for i in range(n4)]
    rows += [(f"2001:db8:{i:x}::/48", f"2001:db8:{i:x}::1", 0, 1 + i % 89)
             for i in range(1, n - n4 + 1)]
    return rows


class FakeNode:
    """GET /paths/demand in the node namespace: the same body every time, with its ETag."""

    def __init__(self, lab, rows):
        self.body = lab_delay.encode_demand(int(time.time() * 1000), rows)
        self.etag = '"%d"' % int(time.time() * 1000)
        self.requests = 0
        node = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                node.requests += 1
                if self.path != "/paths/demand":
                    self.send_error(404)
                    return
                if self.headers.get("If-None-Match") == node.etag:
                    self.send_response(304)
                    self.send_header("ETag", node.etag)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", lab_delay.DEMAND_CT)
                self.send_header("ETag", node.etag)
                self.send_header("Content-Length", str(len(node.body)))
                self.end_headers()
                self.wfile.write(node.body)

            def log_message(self, *a):
                pass

        import socket
        self.httpd = http.server.ThreadingHTTPServer((NODE_ADDR4, NODE_PORT), Handler,
                                                     bind_and_activate=False)
        self.httpd.socket.close()
        self.httpd.socket = lab.ns_socket(lab.node, socket.SOCK_STREAM)
        self.httpd.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.httpd.server_bind()
        self.httpd.server_activate()
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def answered(lab):
    st = lab.delay.status() or {}
    return sum(st.get("answered", {}).values()) - st.get("answered", {}).get("tcp-close", 0)


def agent_status(lab, site):
    """The agent's /paths/status (JSON), fetched from inside its namespace."""
    import http.client
    import socket
    addr = lab.site_addr(site)
    s = lab.ns_socket(lab.site_ns[site], socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect((addr, AGENT_PORT))
    conn = http.client.HTTPConnection(addr, AGENT_PORT, timeout=5)
    conn.sock = s
    try:
        conn.request("GET", "/paths/status")
        r = conn.getresponse()
        body = r.read()
        return json.loads(body) if r.status == 200 else None
    except ValueError:
        return None
    finally:
        conn.close()


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steer-probe", default=str(ROOT / "build-bench/src/probe/steer-probe"))
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--prefixes", type=int, default=20000)
    ap.add_argument("--methods", default="dns, tcp, icmp")
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpu", type=int, default=1, help="the CPU steer-probe is pinned to")
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--workdir", help="keep configs and logs here")
    return ap.parse_args()


def main():
    args = parse_args()
    if os.geteuid() != 0:
        log("needs root (network namespaces)")
        return 2
    if not os.path.exists(args.steer_probe):
        log(f"{args.steer_probe} is not built")
        return 2
    record = {"args": vars(args), "rounds": []}
    with PathsLab(delays=(2,), workdir=args.workdir, extra_nets=[EXTRA_NET4]) as lab:
        site = lab.site_names[0]
        (lab.dir / "example.test.zone").write_text(ZONE)
        conf = lab.dir / "steer.yaml"
        conf.write_text(CONFIG.format(dir=lab.dir, site=site, agent=lab.site_addr(site),
                                      agent_port=AGENT_PORT, node=NODE_ADDR4,
                                      node_port=NODE_PORT, methods=args.methods,
                                      dns_name=DNS_NAME, rate=args.rate))
        rows = demand_rows(args.prefixes)
        node = FakeNode(lab, rows)
        try:
            agent = lab.start("steer-probe", ["taskset", "-c", str(args.cpu), args.steer_probe,
                                              "--config", str(conf), "--datacenter", site,
                                              "--foreground"], lab.site_ns[site],
                              "steer-probe.log")
            log(f"{len(rows)} prefixes of demand, rate {args.rate}/s; warming up "
                f"{args.warmup:g} s")
            time.sleep(args.warmup)
            for rnd in range(args.rounds):
                if not agent.alive():
                    raise RuntimeError(f"steer-probe exited:\n{agent.log()}")
                c0, a0, t0 = cpu_seconds(agent.pid), answered(lab), time.monotonic()
                time.sleep(args.duration)
                c1, a1, t1 = cpu_seconds(agent.pid), answered(lab), time.monotonic()
                r = {"probes_per_s": (a1 - a0) / (t1 - t0),
                     "cpu_share": (c1 - c0) / (t1 - t0), "rss_mib": rss_mib(agent.pid)}
                record["rounds"].append(r)
                log(f"  round {rnd + 1}/{args.rounds}: {r['probes_per_s']:7.0f} probes/s "
                    f"answered, steer-probe CPU {r['cpu_share'] * 100:5.2f} % of a core, "
                    f"RSS {r['rss_mib']:.1f} MiB")
            record["status"] = agent_status(lab, site)
        finally:
            node.close()
        qnames = lab.delay.qnames()
        names = sorted({q[3] for q in qnames})
        record["dns_probes"], record["qnames"] = len(qnames), names
        record["demand_polls"] = node.requests
        record["line"] = lab.delay.status()
    pps = statistics.median(r["probes_per_s"] for r in record["rounds"])
    cpu = statistics.median(r["cpu_share"] for r in record["rounds"])
    print(f"\nsteer-probe at rate {args.rate}/s over {args.prefixes:,} prefixes, "
          f"{args.rounds} round(s) x {args.duration:g} s, methods {args.methods}")
    print(f"  answered probes/s (delay line): median {pps:.0f}")
    print(f"  CPU: median {cpu * 100:.2f} % of one core (goal <= 5 %: "
          f"{'met' if cpu <= 0.05 else 'MISSED'}), "
          f"{cpu * 100 / max(pps, 1) * 1000:.3f} % per 1,000 probes/s")
    print(f"  RSS: {record['rounds'][-1]['rss_mib']:.1f} MiB")
    print(f"  DNS probes: {len(qnames):,}, names asked: {names} (goal: only {DNS_NAME}: "
          f"{'met' if names in ([DNS_NAME], []) else 'MISSED'})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
