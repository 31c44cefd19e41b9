#!/usr/bin/python3
"""What RRL and DNS Cookies cost the UDP path: steerd with both on against steerd with both off.

Two steerd (one worker, pinned to CPU 0; loadgen on CPU 1) serve the same zone; every query
carries the same COOKIE option (client cookie and a valid server cookie of the "on" server, so
it runs the whole path: parse, SipHash check, cookie written in the answer, RRL bucket CAS).
"on" has `rrl: rate` at the maximum so nothing is limited (checked: no drop, no slip, no
loss); "off" has no `rrl:` and `cookies: enable: false`. Interleaved rounds, median q/s of each
and the ratio on/off (goal >= 0.95).

    ninja -C build-bench && /usr/bin/python3 bench/hardening_cost.py --rounds 5 --duration 5
"""

import argparse
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import urllib.request

import dns.edns
import dns.message
import dns.query

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (bench/run.py: Server, loadgen runner)

SECRET = "0123456789abcdef0123456789abcdef"
CLIENT = bytes.fromhex("0102030405060708")
ZONE_TEXT = """$ORIGIN example.test.
$TTL 3600
@ SOA ns1 hostmaster 1 7200 3600 1209600 300
@ NS ns1
ns1 A 192.0.2.53
www A 192.0.2.10
mail A 192.0.2.25
"""


def steerd_argv(binary, on, http_port):
    def argv(d, port, zone, zone_file):
        run.write(os.path.join(d, "bench.zone"), ZONE_TEXT)
        conf = ["server:", "  listen: [127.0.0.1:%d]" % port, "  workers: 1",
                "  tcp-workers: 1", "  control-socket: %s" % os.path.join(d, "ctl.sock"),
                "zones:", "  - { domain: example.test, file: bench.zone }",
                "http:", "  listen: [127.0.0.1:%d]" % http_port, "  read-only-open: true"]
        if on:
            conf += ["rrl: { rate: 1000000, slip: 2 }",
                     "cookies: { secret: %s }" % SECRET]
        else:
            conf += ["cookies: { enable: false }"]
        run.write(os.path.join(d, "steer.yaml"), "\n".join(conf) + "\n")
        return [binary, "-c", os.path.join(d, "steer.yaml")]
    return argv


def server_cookie(port):
    q = dns.message.make_query("www.example.test", "A")
    q.use_edns(0, payload=1232, options=[dns.edns.GenericOption(10, CLIENT)])
    r = dns.query.udp(q, "127.0.0.1", port=port, timeout=2)
    for opt in r.options:
        if opt.otype == 10:
            data = opt.to_wire()
            assert len(data) == 24 and data[:8] == CLIENT
            return data.hex()
    raise RuntimeError("no server cookie from the 'on' server")


def metric(http_port, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port, timeout=5) as r:
        m = re.search(r"^%s (\S+)$" % name, r.read().decode(), re.M)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steerd", default=os.path.join(run.REPO, "build-bench/src/daemon/steerd"))
    ap.add_argument("--loadgen", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--sockets", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=1000)
    ap.add_argument("--loadgen-args", default="")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--loadgen-cpu", type=int, default=1)
    ap.add_argument("--quiet-wait", type=float, default=0)
    ap.add_argument("--retries", type=int, default=0)
    ap.add_argument("--json", help="write every run's numbers here")
    args = ap.parse_args()
    if args.loadgen is None:
        args.loadgen = os.path.join(os.path.dirname(args.steerd), "../../bench/loadgen")
    signal.signal(signal.SIGTERM, run.on_term)
    args.workdir = tempfile.mkdtemp(prefix="hardening-bench-")
    qfile = os.path.join(args.workdir, "queries.txt")
    run.write(qfile, "www.example.test A\nmail.example.test A\nnx.example.test A\n")
    args.queries_file = qfile
    args.edns = 1232
    servers, ports = {}, {}
    try:
        for name, on in (("off", False), ("on", True)):
            ports[name] = run.free_port()
            srv = run.make_server(name, steerd_argv(args.steerd, on, ports[name]),
                                  args.workdir, run.ZONE, None, args.server_cpu)
            run.RUNNING.append(srv)
            srv.start()
            run.wait_answering(srv, "www.example.test", "A", 30)
            servers[name] = srv
        cookie = server_cookie(servers["on"].port)
        base_args = args.loadgen_args
        results = {"off": [], "on": []}
        for rnd in range(args.rounds):
            for name in ("off", "on"):
                args.loadgen_args = base_args + " --cookie " + cookie
                res = run.measure_one(args, servers[name], False)
                results[name].append(res)
                run.log("  round %d/%d %-3s %9.0f q/s  server cpu %3.0f%%  lost %d  bad %d"
                        % (rnd + 1, args.rounds, name, res["qps"], res["server_cpu"] * 100,
                           res["lost"], res["bad"]))
        med = {n: statistics.median(r["qps"] for r in results[n]) for n in results}
        ratio = med["on"] / med["off"] if med["off"] else 0
        # On a shared machine the server rarely gets its CPU to itself: answers per second of
        # server CPU time is the steadier measure of the per-query cost.
        per_cpu = {n: statistics.median(r["qps"] / r["server_cpu"] for r in results[n]
                                        if r["server_cpu"] > 0) for n in results}
        cpu_ratio = per_cpu["on"] / per_cpu["off"] if per_cpu["off"] else 0
        dropped = metric(ports["on"], "steer_rrl_dropped_total")
        slipped = metric(ports["on"], "steer_rrl_slipped_total")
        valid = metric(ports["on"], "steer_cookies_valid_total")
        lost = sum(r["lost"] for n in results for r in results[n])
        print("UDP q/s, one worker, median of %d interleaved rounds of %g s:" %
              (args.rounds, args.duration))
        print("  off (no rrl, cookies off)      %9.0f" % med["off"])
        print("  on  (rrl + cookies, valid one) %9.0f" % med["on"])
        print("  ratio on/off %.3f (goal >= 0.95)" % ratio)
        print("  answers per server CPU second: off %.0f, on %.0f, ratio %.3f"
              % (per_cpu["off"], per_cpu["on"], cpu_ratio))
        print("  on: rrl dropped %s, slipped %s, valid cookies %s; lost queries %d"
              % (dropped, slipped, valid, lost))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"results": results, "median": med, "ratio": ratio,
                           "per_cpu": per_cpu, "cpu_ratio": cpu_ratio,
                           "dropped": dropped, "slipped": slipped, "valid": valid}, f,
                          indent=1)
        ok = ratio >= 0.95 and not dropped and not slipped and valid
        return 0 if ok else 1
    finally:
        run.stop_all()


if __name__ == "__main__":
    sys.exit(main())
