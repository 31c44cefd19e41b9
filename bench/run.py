#!/usr/bin/python3
"""Side-by-side benchmark: steerd against knotd, nsd and gdnsd (all from Debian).

Every server serves the same zone from a private temporary directory on a random loopback port,
with one worker thread pinned to CPU 0 (`taskset -c 0`); bench/loadgen runs pinned to CPU 1.
Runs are interleaved (A B C D A B C D ...) so drift of the shared machine hits every server
alike, and the median per server is reported with steerd's ratio to the fastest peer.
Then each of steerd and knotd is started fresh on the 1,000,000-record zone to measure the wall
time until the zone answers and the RSS after loading.

The server CPU column is the server's busy fraction during its runs: near 100% means the server
was the bottleneck, as intended; well below means the load generator, or another process on
the machine, limited the run and the number is not a capacity.

See bench/README.md for usage and docs/performance.md for results.
"""

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CLK_TCK = os.sysconf("SC_CLK_TCK")
ZONE = "example.test"
BIG_ZONE = "big.test"
PEERS = ("knotd", "nsd", "gdnsd")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- processes ----------------------------------------------------------------------------------


def group_pids(pgid):
    """PIDs in process group PGID (a server and any children it forked, e.g. NSD's)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(rest[2]) == pgid:
            pids.append(int(d))
    return pids


def group_cpu_seconds(pgid):
    """User+system CPU seconds of every live process in the group."""
    total = 0
    for pid in group_pids(pgid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                rest = f.read().rsplit(")", 1)[1].split()
            total += int(rest[11]) + int(rest[12])
        except (OSError, IndexError):
            pass
    return total / CLK_TCK


def group_rss_kib(pgid, field="VmRSS", path="status"):
    """Sum of FIELD (VmRSS or VmHWM from status, Pss from smaps_rollup; KiB) over the group.

    PSS splits pages shared between processes, so it is the fair number for a forking server
    (NSD), where summing RSS counts the shared zone pages once per process."""
    total = 0
    for pid in group_pids(pgid):
        try:
            with open("/proc/%d/%s" % (pid, path)) as f:
                for line in f:
                    if line.startswith(field + ":"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


class Server:
    """One server process (in its own process group) with its config in DIR."""

    def __init__(self, name, argv, workdir, port, pin_cpu):
        self.name = name
        self.port = port
        self.argv = ["taskset", "-c", str(pin_cpu)] + argv
        self.log_path = os.path.join(workdir, name + ".log")
        self.proc = None
        self.extra = []  # companion processes (the TCP half of echo)

    def start(self):
        self.log_file = open(self.log_path, "wb")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self):
        return sum(group_cpu_seconds(p.pid) for p in [self.proc] + self.extra)

    def log_tail(self, n=15):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
            return "\n".join("    " + line for line in lines[-n:])
        except OSError:
            return "    (no log)"

    def stop(self):
        for p in [self.proc] + self.extra:
            if p is None or p.poll() is not None:
                continue
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if self.proc is not None:
            self.log_file.close()


RUNNING = []


def stop_all():
    while RUNNING:
        RUNNING.pop().stop()


def on_term(signum, frame):
    raise KeyboardInterrupt


def cpu_busy_seconds(cpus):
    """Seconds so far the given CPUs were busy (all but idle and iowait), from /proc/stat.

    Ticks that land in softirq context (much of loopback packet delivery) count in the softirq
    column here and also in the stime of the process they interrupted, so a server's own CPU
    time already includes the delivery work done on its behalf."""
    total = 0
    with open("/proc/stat") as f:
        for line in f:
            parts = line.split()
            if parts[0].startswith("cpu") and parts[0][3:].isdigit() and int(parts[0][3:]) in cpus:
                ticks = [int(x) for x in parts[1:9]]  # user nice system idle iowait irq sirq steal
                total += sum(ticks) - ticks[3] - ticks[4]
    return total / CLK_TCK


# ---- configs ------------------------------------------------------------------------------------


def free_port():
    """A port free for both UDP and TCP on 127.0.0.1."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                try:
                    u.bind(("127.0.0.1", port))
                except OSError:
                    continue
        return port
    raise RuntimeError("no free port")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def knotd_argv(d, port, zone, zone_file):
    os.makedirs(os.path.join(d, "db"))
    conf = os.path.join(d, "knot.conf")
    write(conf, f"""server:
    rundir: "{d}"
    listen: 127.0.0.1@{port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "{d}/db"
log:
  - target: stderr
    any: warning
template:
  - id: default
    storage: "{d}"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: {zone}
    file: "{zone_file}"
""")
    return ["/usr/sbin/knotd", "-c", conf]


def nsd_argv(d, port, zone, zone_file):
    conf = os.path.join(d, "nsd.conf")
    write(conf, f"""server:
    ip-address: 127.0.0.1@{port}
    do-ip6: no
    server-count: 1
    tcp-count: 1000
    zonesdir: "{os.path.dirname(zone_file)}"
    database: ""
    zonelistfile: "{d}/zone.list"
    xfrdfile: "{d}/xfrd.state"
    xfrdir: "{d}"
    pidfile: "{d}/nsd.pid"
    cookie-secret-file: "{d}/cookiesecrets.txt"
    username: ""
    chroot: ""
    verbosity: 0
    # Debian's NSD rate-limits responses (RRL) by default: 200 q/s per source, the rest dropped
    # or answered with TC. A benchmark from one address must turn it off.
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: {zone}
    zonefile: "{zone_file}"
""")
    return ["/usr/sbin/nsd", "-d", "-c", conf]


def gdnsd_argv(d, port, zone, zone_file):
    os.makedirs(os.path.join(d, "zones"))
    os.symlink(zone_file, os.path.join(d, "zones", zone))
    write(os.path.join(d, "config"), f"""options => {{
    listen => [ 127.0.0.1:{port} ]
    udp_threads => 1
    tcp_threads => 1
    tcp_clients_per_thread => 1024
    run_dir => "{d}/run"
    state_dir => "{d}/state"
}}
""")
    return ["/usr/sbin/gdnsd", "-c", d, "start"]


def steerd_argv(binary):
    def argv(d, port, zone, zone_file):
        return [binary, "--listen", "127.0.0.1:%d" % port, "--zone", "%s=%s" % (zone, zone_file),
                "--workers", "1"]
    return argv


def make_server(name, argv_fn, workdir, zone, zone_file, pin_cpu):
    d = tempfile.mkdtemp(prefix=name + "-", dir=workdir)
    port = free_port()
    return Server(name, argv_fn(d, port, zone, zone_file), d, port, pin_cpu)


def make_echo(workdir, echo_bin, pin_cpu):
    """The do-nothing echo (UDP and TCP halves on one port): the ceiling row of the table."""
    d = tempfile.mkdtemp(prefix="echo-", dir=workdir)
    port = free_port()
    srv = Server("echo", [echo_bin, "--port", str(port)], d, port, pin_cpu)
    srv.tcp_argv = ["taskset", "-c", str(pin_cpu), echo_bin, "--tcp", "--port", str(port)]
    return srv


# ---- queries ------------------------------------------------------------------------------------


def query(port, name, rdtype, tcp=False, timeout=0.5):
    q = dns.message.make_query(name, rdtype)
    q.flags &= ~dns.flags.RD
    fn = dns.query.tcp if tcp else dns.query.udp
    return fn(q, "127.0.0.1", port=port, timeout=timeout)


def wait_answering(srv, name, rdtype, timeout):
    """Polls NAME until the server answers NOERROR with data; returns seconds since start."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not srv.alive():
            raise RuntimeError("%s exited (status %s):\n%s" % (srv.name, srv.proc.returncode,
                                                               srv.log_tail()))
        try:
            r = query(srv.port, name, rdtype, timeout=0.2)
            if r.rcode() == dns.rcode.NOERROR and r.answer:
                return time.monotonic() - srv.started_at
        except (dns.exception.Timeout, OSError):
            pass
        time.sleep(0.01)
    raise RuntimeError("%s did not answer %s %s within %d s:\n%s" % (srv.name, name, rdtype,
                                                                     timeout, srv.log_tail()))


def sanity_check(srv):
    """The checks every server must pass before it is measured (the echo is exempt)."""
    for tcp in (False, True):
        r = query(srv.port, "www." + ZONE, "A", tcp=tcp, timeout=2)
        addrs = [rd.address for rrs in r.answer for rd in rrs if rrs.rdtype == dns.rdatatype.A]
        if r.rcode() != dns.rcode.NOERROR or addrs != ["192.0.2.80"] or not r.flags & dns.flags.AA:
            raise RuntimeError("%s gave a wrong answer over %s to www.%s A:\n%s"
                               % (srv.name, "TCP" if tcp else "UDP", ZONE, r))
    r = query(srv.port, "nonexistent." + ZONE, "A", timeout=2)
    if r.rcode() != dns.rcode.NXDOMAIN:
        raise RuntimeError("%s: expected NXDOMAIN, got:\n%s" % (srv.name, r))


# ---- measuring ----------------------------------------------------------------------------------


def run_loadgen(args, srv, tcp):
    argv = ["taskset", "-c", str(args.loadgen_cpu), args.loadgen, "--server", "127.0.0.1",
            "--port", str(srv.port), "--duration", str(args.duration), "--warmup",
            str(args.warmup), "--queries", args.queries_file, "--json", "--timeout",
            str(args.timeout)]
    if args.edns:
        argv += ["--edns", str(args.edns)]
    argv += args.loadgen_args.split()
    if tcp:
        argv += ["--tcp", "--connections", str(args.connections), "--pipeline",
                 str(args.pipeline)]
    else:
        argv += ["--window", str(args.window), "--sockets", str(args.sockets)]
    cpus = {args.server_cpu, args.loadgen_cpu}
    cpu0, busy0, t0 = srv.cpu_seconds(), cpu_busy_seconds(cpus), time.monotonic()
    self0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=args.warmup + args.duration + 60)
    self1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu1, busy1, t1 = srv.cpu_seconds(), cpu_busy_seconds(cpus), time.monotonic()
    if p.returncode not in (0, 1) or not p.stdout.strip():
        raise RuntimeError("loadgen failed (%d): %s" % (p.returncode, p.stderr.strip()))
    res = json.loads(p.stdout)
    # The server's CPU over the whole run includes the warm-up, at the same load.
    res["server_cpu"] = (cpu1 - cpu0) / (t1 - t0)
    # Whatever else ran on the two benchmark CPUs (other users of a shared machine, kernel
    # threads): busy time not spent by the server or loadgen. A few percent is normal; the
    # tick-based accounting makes every CPU figure here good to a few percent only.
    lg = (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime)
    res["other_cpu"] = max(0.0, (busy1 - busy0) - (cpu1 - cpu0) - lg) / (t1 - t0)
    return res


def wait_quiet(args):
    """On a shared machine, waits (up to --quiet-wait s) until the benchmark CPUs are idle."""
    cpus = {args.server_cpu, args.loadgen_cpu}
    start = time.monotonic()
    while True:
        b0 = cpu_busy_seconds(cpus)
        time.sleep(0.5)
        busy = (cpu_busy_seconds(cpus) - b0) / 0.5
        waited = time.monotonic() - start
        if busy < 0.1 or waited >= args.quiet_wait:
            if waited > 1:
                log("  waited %.0f s for CPUs %s to be idle (now %.0f%% busy)"
                    % (waited, sorted(cpus), busy * 100))
            return busy


def measure_one(args, srv, tcp):
    """One run, repeated (up to --retries times) while other processes disturbed it."""
    for attempt in range(args.retries + 1):
        if args.quiet_wait > 0:
            wait_quiet(args)
        res = run_loadgen(args, srv, tcp)
        if res["other_cpu"] <= 0.1:
            break
        if attempt < args.retries:
            log("  %s: other processes used %.0f%% of a CPU during the run; repeating it"
                % (srv.name, res["other_cpu"] * 100))
    return res


def run_rounds(args, servers, proto):
    tcp = proto == "tcp"
    results = {s.name: [] for s in servers}
    for rnd in range(args.rounds):
        for srv in servers:
            if not srv.alive():
                raise RuntimeError("%s died:\n%s" % (srv.name, srv.log_tail()))
            res = measure_one(args, srv, tcp)
            results[srv.name].append(res)
            log("  %s round %d/%d %-7s %9.0f q/s  server cpu %3.0f%%  other cpu %3.0f%%  "
                "lost %d  bad %d" % (proto, rnd + 1, args.rounds, srv.name, res["qps"],
                                     res["server_cpu"] * 100, res["other_cpu"] * 100,
                                     res["lost"], res["bad"]))
    return results


def summarize(results):
    rows = {}
    for name, runs in results.items():
        qps = [r["qps"] for r in runs]
        rc = {}
        for r in runs:
            for k, v in r["rcodes"].items():
                rc[k] = rc.get(k, 0) + v
        rows[name] = {
            "median": statistics.median(qps), "min": min(qps), "max": max(qps),
            "server_cpu": statistics.median(r["server_cpu"] for r in runs),
            "loadgen_idle": statistics.median(r["idle"] for r in runs),
            "other_cpu": statistics.median(r["other_cpu"] for r in runs),
            "lost": sum(r["lost"] for r in runs), "bad": sum(r["bad"] for r in runs),
            "truncated": sum(r["truncated"] for r in runs), "rcodes": rc, "runs": qps,
        }
    return rows


def print_rows(title, names, rows, expect_rcodes=None):
    """One line per row of @rows (dicts of median/min/max q/s, CPU shares, lost, bad and an
    rcode count), in @names order, with a warning for each figure that makes a row doubtful:
    a server not busy all the time, other processes on the CPUs, and, when @expect_rcodes is
    given, lost answers or rcodes outside it."""
    width = max([len("row")] + [len(n) for n in names])
    print("\n" + title)
    print("%-*s %11s %9s %9s %8s %8s %7s %7s %5s  %s" % (
        width, "row", "median q/s", "min", "max", "srv cpu", "lg idle", "other", "lost", "bad",
        "rcodes"))
    for name in names:
        r = rows[name]
        total = sum(r["rcodes"].values()) or 1
        mix = " ".join("%s %.1f%%" % (k, 100.0 * v / total) for k, v in r["rcodes"].items())
        print("%-*s %11.0f %9.0f %9.0f %7.0f%% %7.0f%% %6.0f%% %7d %5d  %s"
              % (width, name, r["median"], r["min"], r["max"], r["server_cpu"] * 100,
                 r["loadgen_idle"] * 100, r["other_cpu"] * 100, r["lost"], r["bad"], mix))
        if r["server_cpu"] < 0.9:
            print("warning: %s: the server was busy only %.0f%% of the time"
                  % (name, r["server_cpu"] * 100))
        if r["other_cpu"] > 0.1:
            print("warning: %s: other processes used %.0f%% of a CPU"
                  % (name, r["other_cpu"] * 100))
        if expect_rcodes is not None and (r["lost"] or set(r["rcodes"]) - set(expect_rcodes)):
            print("warning: %s: lost answers or rcodes other than %s"
                  % (name, ", ".join(sorted(expect_rcodes))))


def print_table(title, rows):
    print("\n" + title)
    print("%-8s %11s %9s %9s %8s %8s %7s %7s %5s %5s  %s" % ("server", "median q/s", "min", "max",
          "srv cpu", "lg idle", "other", "lost", "bad", "tc", "answers"))
    for name, r in sorted(rows.items(), key=lambda kv: -kv[1]["median"]):
        total = sum(r["rcodes"].values()) or 1
        mix = " ".join("%s %.1f%%" % (k, 100.0 * v / total)
                       for k, v in sorted(r["rcodes"].items(), key=lambda kv: -kv[1]))
        print("%-8s %11.0f %9.0f %9.0f %7.0f%% %7.0f%% %6.0f%% %7d %5d %5d  %s"
              % (name, r["median"], r["min"], r["max"], r["server_cpu"] * 100,
                 r["loadgen_idle"] * 100, r["other_cpu"] * 100, r["lost"], r["bad"],
                 r["truncated"], mix))
    for name, r in rows.items():
        answered = sum(r["rcodes"].values())
        if r["bad"] or r["truncated"] or r["lost"] > answered / 1000:
            print("warning: %s lost %d, %d bad answers, %d truncated: the numbers above are not "
                  "a clean capacity measurement" % (name, r["lost"], r["bad"], r["truncated"]))
        if r["other_cpu"] > 0.1:
            print("warning: other processes used %.0f%% of a CPU during %s's runs: the machine "
                  "was not quiet" % (r["other_cpu"] * 100, name))
        if r["server_cpu"] < 0.9 and name != "echo":
            print("warning: %s was busy only %.0f%% of the time: something other than the "
                  "server limited its runs" % (name, r["server_cpu"] * 100))
    peers = {n: r for n, r in rows.items() if n in PEERS}
    if "steerd" in rows and peers:
        best = max(peers, key=lambda n: peers[n]["median"])
        # Runs of one round are minutes apart at most, so their ratio cancels slow drift.
        paired = statistics.median(a / b for a, b in zip(rows["steerd"]["runs"],
                                                         peers[best]["runs"]) if b > 0)
        print("steerd / fastest peer (%s): %.2fx (ratio of medians), %.2fx (median of the "
              "per-round ratios)" % (best, rows["steerd"]["median"] / peers[best]["median"],
                                     paired))


def measure_load(args, name, argv_fn, zone_file, last_name):
    srv = make_server(name, argv_fn, args.workdir, BIG_ZONE, zone_file, args.server_cpu)
    RUNNING.append(srv)
    srv.start()
    try:
        secs = wait_answering(srv, last_name, "A", args.load_timeout)
        time.sleep(0.2)  # let RSS settle after the last page faults of loading
        rss = group_rss_kib(srv.proc.pid)
        hwm = group_rss_kib(srv.proc.pid, "VmHWM")
        pss = group_rss_kib(srv.proc.pid, "Pss", "smaps_rollup")
        procs = len(group_pids(srv.proc.pid))
    finally:
        srv.stop()
        RUNNING.remove(srv)
    return {"seconds": secs, "rss_kib": rss, "hwm_kib": hwm, "pss_kib": pss, "procs": procs}


def run_memory(args, servers_fn, zone_file, last_name):
    res = {}
    for rnd in range(args.memory_rounds):
        for name, fn in servers_fn:
            r = measure_load(args, name, fn, zone_file, last_name)
            res.setdefault(name, []).append(r)
            log("  memory round %d/%d %-7s load %.2f s  RSS %.1f MiB  peak %.1f MiB  PSS %.1f MiB"
                % (rnd + 1, args.memory_rounds, name, r["seconds"], r["rss_kib"] / 1024,
                   r["hwm_kib"] / 1024, r["pss_kib"] / 1024))
    rows = {}
    for name, runs in res.items():
        rows[name] = {k: statistics.median(r[k] for r in runs)
                      for k in ("seconds", "rss_kib", "hwm_kib", "pss_kib", "procs")}
    with open(zone_file) as f:
        records = sum(1 for line in f if line.strip() and not line.startswith("$"))
    print("\n%s: %s records, median of %d fresh start(s)"
          % (BIG_ZONE, format(records, ","), args.memory_rounds))
    print("%-8s %12s %12s %13s %12s %6s" % ("server", "load time s", "RSS MiB", "peak RSS MiB",
                                            "PSS MiB", "procs"))
    for name, r in rows.items():
        print("%-8s %12.2f %12.1f %13.1f %12.1f %6d" % (name, r["seconds"], r["rss_kib"] / 1024,
                                                        r["hwm_kib"] / 1024, r["pss_kib"] / 1024,
                                                        r["procs"]))
    if "steerd" in rows and "knotd" in rows:
        s, k = rows["steerd"], rows["knotd"]
        print("steerd / knotd: load time %.2fx, RSS %.2fx" % (s["seconds"] / k["seconds"],
                                                             s["rss_kib"] / k["rss_kib"]))
    return rows


# ---- main ---------------------------------------------------------------------------------------


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    build = os.path.join(REPO, "build-bench")
    ap.add_argument("--steerd", default=os.path.join(build, "src", "daemon", "steerd"),
                    help="steerd binary (skipped with a note if missing)")
    ap.add_argument("--loadgen", default=os.path.join(build, "bench", "loadgen"))
    ap.add_argument("--echo", default=os.path.join(build, "bench", "echo"))
    ap.add_argument("--servers", default="steerd,knotd,nsd,gdnsd",
                    help="comma-separated, in round order (default %(default)s)")
    ap.add_argument("--with-echo", action="store_true",
                    help="also measure bench/echo, the ceiling (not a peer)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=10, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=1, help="unmeasured seconds before each run")
    ap.add_argument("--no-udp", action="store_true")
    ap.add_argument("--no-tcp", action="store_true")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--memory-only", action="store_true")
    ap.add_argument("--memory-servers", default="steerd,knotd",
                    help="servers for the load-time/RSS test (default %(default)s)")
    ap.add_argument("--memory-rounds", type=int, default=1)
    ap.add_argument("--big-records", type=int, default=1000000)
    ap.add_argument("--load-timeout", type=float, default=300)
    ap.add_argument("--window", type=int, default=128, help="loadgen UDP window")
    ap.add_argument("--sockets", type=int, default=8, help="loadgen UDP sockets")
    ap.add_argument("--connections", type=int, default=32, help="loadgen TCP connections")
    ap.add_argument("--pipeline", type=int, default=16, help="TCP queries in flight per connection")
    ap.add_argument("--timeout", type=int, default=500, help="loadgen loss timeout, ms")
    ap.add_argument("--edns", type=int, default=0, help="add an OPT record of this size")
    ap.add_argument("--loadgen-args", default="", help="extra loadgen options, e.g. --loadgen-args='--no-gso'")
    ap.add_argument("--quiet-wait", type=float, default=30,
                    help="before each run, wait up to this many seconds for the two CPUs to be "
                         "idle (shared machines; 0 = do not wait)")
    ap.add_argument("--retries", type=int, default=2,
                    help="repeat a run disturbed by other processes up to this many times")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--loadgen-cpu", type=int, default=1)
    ap.add_argument("--zones", help="reuse zones made by gen_zone.py in this directory")
    ap.add_argument("--workdir", help="keep configs, zones and logs here (default: temporary)")
    ap.add_argument("--json", help="also write all results to this file")
    args = ap.parse_args()
    if args.rounds < 1 or args.duration <= 0 or args.warmup < 0 or args.memory_rounds < 1:
        ap.error("--rounds and --memory-rounds must be >= 1, --duration > 0, --warmup >= 0")
    if args.memory_only:
        args.no_udp = args.no_tcp = True
    return args


def available_servers(args, names):
    fns = {"knotd": knotd_argv, "nsd": nsd_argv, "gdnsd": gdnsd_argv}
    out = []
    for name in names:
        if name == "steerd":
            if os.access(args.steerd, os.X_OK):
                out.append((name, steerd_argv(os.path.abspath(args.steerd))))
            else:
                log("note: steerd not found at %s; measuring the peers only" % args.steerd)
        elif name in fns:
            out.append((name, fns[name]))
        else:
            raise SystemExit("unknown server '%s' (steerd, knotd, nsd, gdnsd)" % name)
    return out


def prepare_zones(args):
    if args.zones:
        d = os.path.abspath(args.zones)
    else:
        d = os.path.join(args.workdir, "zones")
        big = 0 if args.no_memory else args.big_records
        log("generating zones in %s ..." % d)
        subprocess.run([sys.executable, os.path.join(HERE, "gen_zone.py"), "--out", d,
                        "--big-records", str(big)], check=True)
    args.queries_file = os.path.join(d, "queries.txt")
    for f in ("example.test.zone", "queries.txt"):
        if not os.path.exists(os.path.join(d, f)):
            raise SystemExit("%s: missing %s (run gen_zone.py)" % (d, f))
    return d


def machine_info():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return "%s, %d CPUs, kernel %s" % (model, os.cpu_count(), os.uname().release)


def versions():
    """Debian package versions of the peers (their binaries disagree on a version flag)."""
    out = {}
    for pkg in ("knot", "nsd", "gdnsd"):
        p = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        out[pkg] = p.stdout.strip() if p.returncode == 0 else "not installed"
    return out


def main():
    args = parse_args()
    for tool in (args.loadgen,) + ((args.echo,) if args.with_echo else ()):
        if not os.access(tool, os.X_OK):
            raise SystemExit("%s not found: build it with "
                             "`meson setup build-bench && ninja -C build-bench bench/loadgen "
                             "bench/echo`, or pass --loadgen/--echo" % tool)
    signal.signal(signal.SIGTERM, on_term)
    own_workdir = args.workdir is None
    args.workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="steer-bench-"))
    os.makedirs(args.workdir, exist_ok=True)
    report = {"machine": machine_info(), "versions": versions(), "args": vars(args).copy()}
    log("machine: %s; %s" % (report["machine"], ", ".join("%s %s" % kv for kv in
                                                         report["versions"].items())))
    try:
        zdir = prepare_zones(args)
        names = [n for n in args.servers.split(",") if n]
        if not (args.no_udp and args.no_tcp):
            report["throughput"] = run_throughput(args, names, zdir)
        if not args.no_memory:
            big = os.path.join(zdir, "big.test.zone")
            if not os.path.exists(big):
                raise SystemExit("%s missing: run gen_zone.py with --big-records" % big)
            with open(os.path.join(zdir, "big.last")) as f:
                last = f.read().strip()
            mem = available_servers(args, [n for n in args.memory_servers.split(",") if n])
            report["memory"] = run_memory(args, mem, big, last)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        log("error: %s" % e)
        return 1
    finally:
        stop_all()
        if own_workdir:
            shutil.rmtree(args.workdir, ignore_errors=True)
    if args.json:
        write(args.json, json.dumps(report, indent=1) + "\n")
    return 0


def run_throughput(args, names, zdir):
    zone_file = os.path.join(zdir, "example.test.zone")
    servers = []
    for name, fn in available_servers(args, names):
        servers.append(make_server(name, fn, args.workdir, ZONE, zone_file, args.server_cpu))
    if args.with_echo:
        servers.append(make_echo(args.workdir, args.echo, args.server_cpu))
    for srv in servers:
        RUNNING.append(srv)
        srv.start()
        if srv.name == "echo":
            srv.extra.append(subprocess.Popen(srv.tcp_argv, stdin=subprocess.DEVNULL,
                                              start_new_session=True))
            time.sleep(0.3)
            if not srv.alive() or srv.extra[0].poll() is not None:
                raise RuntimeError("echo did not start:\n" + srv.log_tail())
            continue
        wait_answering(srv, "www." + ZONE, "A", 30)
        sanity_check(srv)
        log("%s answers on 127.0.0.1:%d" % (srv.name, srv.port))
    out = {}
    for proto in ("udp", "tcp"):
        if (proto == "udp" and args.no_udp) or (proto == "tcp" and args.no_tcp):
            continue
        log("%s: %d rounds x %g s (+%g s warm-up) per server"
            % (proto.upper(), args.rounds, args.duration, args.warmup))
        rows = summarize(run_rounds(args, servers, proto))
        if proto == "udp":
            detail = "window %d over %d sockets" % (args.window, args.sockets)
        else:
            detail = "%d connections x %d pipelined" % (args.connections, args.pipeline)
        print_table("%s (%s), %d rounds x %g s, one server thread on CPU %d"
                    % (proto.upper(), detail, args.rounds, args.duration, args.server_cpu), rows)
        sys.stdout.flush()
        out[proto] = rows
    stop_all()
    return out


if __name__ == "__main__":
    sys.exit(main())
