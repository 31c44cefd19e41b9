"""A cluster node on its own, end to end: steerd with a `cluster:` section in a network namespace
the test makes (a node ns with a veth to a router ns that routes the service address to it),
each announce method against the real thing it drives (the holder interface over netlink, a
real BIRD's control socket, kernel routes read back by a real FRR zebra, keepalived's track
file), the self-check's faults (a failed reload, the default route gone), the keeper's
withdraw when steerd is killed or stopped, drain and undrain, the identity answers through the
service address, and the routing daemon configurations steerctl prints, run by a real BIRD.

Needs root, iproute2, bird2 and frr (scripts/setup-deps.sh test installs them). Every packet
stays inside the test's namespaces; the processes started here are stopped by PID.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import dns.flags
import dns.message
import dns.query
import dns.rcode
import pytest

from conftest import STEERCTL, STEERD, assert_no_sanitizer_report, free_port
from fwdlab import Proc, ns_http_get, ns_socket, query, run

SERVICE4, SERVICE6 = "192.0.2.53", "2001:db8::53"
UNICAST, ROUTER = "10.53.0.11", "10.53.0.1"
BIRD = shutil.which("bird") or "/usr/sbin/bird"
KNOTD = shutil.which("knotd") or "/usr/sbin/knotd"
ZEBRA = "/usr/lib/frr/zebra"
VTYSH = shutil.which("vtysh") or "/usr/bin/vtysh"

ZONE = """$TTL 300
@ IN SOA ns1 hostmaster 1 3600 600 86400 300
@ IN NS ns1
ns1 IN A 192.0.2.53
www IN A 192.0.2.80
"""

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


class NodeLab:
    """A node ns (steerd, holder vip0, eth0 10.53.0.11/24, default route via the router) and
    a router ns (10.53.0.1/24, a route to the service addresses via the node)."""

    def __init__(self, workdir: Path):
        tag = f"scl{os.getpid() % 100000}"
        self.node, self.router = f"{tag}n", f"{tag}r"
        self.dir = workdir
        self.namespaces: list[str] = []
        self.procs: list[Proc] = []

    def ip(self, ns: str, *args: str, check: bool = True):
        return run("ip", "-n", ns, *args, check=check)

    def build(self):
        for ns in (self.node, self.router):
            run("ip", "netns", "add", ns)
            self.namespaces.append(ns)
            self.ip(ns, "link", "set", "lo", "up")
        self.ip(self.node, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0",
                "netns", self.router)
        self.ip(self.node, "addr", "add", f"{UNICAST}/24", "dev", "eth0")
        self.ip(self.node, "-6", "addr", "add", "2001:db8:53::11/64", "dev", "eth0", "nodad")
        self.ip(self.router, "addr", "add", f"{ROUTER}/24", "dev", "eth0")
        self.ip(self.router, "-6", "addr", "add", "2001:db8:53::1/64", "dev", "eth0", "nodad")
        for ns in (self.node, self.router):
            self.ip(ns, "link", "set", "eth0", "up")
        self.default_route(True)
        self.ip(self.router, "route", "add", f"{SERVICE4}/32", "via", UNICAST)
        self.ip(self.router, "-6", "route", "add", f"{SERVICE6}/128", "via", "2001:db8:53::11")

    def default_route(self, present: bool):
        verb = "replace" if present else "del"
        self.ip(self.node, "route", verb, "default", "via", ROUTER, check=present)
        self.ip(self.node, "-6", "route", verb, "default", "via", "2001:db8:53::1",
                check=present)

    def close(self):
        for p in self.procs:
            p.stop()
        for ns in reversed(self.namespaces):
            run("ip", "netns", "del", ns, check=False)

    def start(self, name: str, argv: list[str]) -> Proc:
        p = Proc(name, argv, self.node, self.dir / f"{name}.log")
        self.procs.append(p)
        return p

    def link_up(self, ifname: str = "vip0") -> bool | None:
        """Whether @ifname in the node ns is admin up, None when it does not exist."""
        res = self.ip(self.node, "-j", "link", "show", "dev", ifname, check=False)
        if res.returncode != 0:
            return None
        return "UP" in json.loads(res.stdout)[0]["flags"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = NodeLab(tmp_path_factory.mktemp("cluster"))
    try:
        lab.build()
        yield lab
    finally:
        lab.close()


class Node:
    """One steerd in the lab's node ns, with its config and control socket."""

    def __init__(self, lab: NodeLab, name: str, cluster: str, zone: str = ZONE,
                 zones: str | None = None):
        """@zones: the YAML list under zones: instead of example.test from @zone."""
        self.lab = lab
        self.dir = lab.dir / name
        self.dir.mkdir(exist_ok=True)
        self.zone = self.dir / "example.test.zone"
        self.zone.write_text(zone)
        self.ctl_path = self.dir / "ctl.sock"
        self.conf = self.dir / "steer.yaml"
        default_zones = f"  - domain: example.test\n    file: {self.zone}"
        self.conf.write_text(f"""server:
  listen: ["0.0.0.0:53", "[::]:53"]
  control-socket: {self.ctl_path}
  workers: 1
  tcp-workers: 1
zones:
{zones or default_zones}
cluster:
  node-id: {name}
  service-addresses: [{SERVICE4}, "{SERVICE6}"]
  interface: vip0
  unicast: {UNICAST}
  self-check: {{ interval: 100ms, fall: 3, rise: 3, hold-down: 1s }}
  liveness-timeout: 300ms
  drain: {{ quiet: 300ms, timeout: 5s }}
{cluster}""")
        self.proc = lab.start(name, [STEERD, "-c", str(self.conf)])

    def ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        res = subprocess.run([STEERCTL, "-s", str(self.ctl_path), *args], capture_output=True,
                             text=True, timeout=30)
        if check and res.returncode != 0:
            raise AssertionError(f"steerctl {' '.join(args)}: {res.returncode}: "
                                 f"{res.stderr}{res.stdout}\n{self.proc.log()}")
        return res

    def status(self) -> dict:
        return json.loads(self.ctl("--json", "cluster").stdout)["data"]

    def wait_state(self, state: str, timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.ctl_path.exists():
                res = self.ctl("--json", "cluster", check=False)
                if res.returncode == 0:
                    last = json.loads(res.stdout)["data"]
                    if last["state"] == state and last["announced"] == (state == "announced"):
                        return last
            if not self.proc.alive():
                raise AssertionError(f"steerd exited:\n{self.proc.log()}")
            time.sleep(0.05)
        raise AssertionError(f"state {state} not reached in {timeout} s: {last}\n"
                             f"{self.proc.log()}")

    def stop(self):
        self.proc.stop()
        assert_no_sanitizer_report(self.proc.log_path.read_text(errors="replace"))
        assert self.proc.proc.returncode == 0, self.proc.log()


def wait_until(fn, timeout: float, step: float = 0.01) -> float:
    """Seconds until fn() is true; fails after @timeout."""
    start = time.monotonic()
    while not fn():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(step)
    return time.monotonic() - start


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent, steerd, was killed).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def chaos_txt(ns: str, server: str, name: str) -> dns.message.Message:
    """A CH TXT query from namespace @ns to @server."""
    q = dns.message.make_query(name, "TXT", rdclass="CH")
    s = ns_socket(ns, family=socket.AF_INET6 if ":" in server else socket.AF_INET)
    try:
        s.connect((server, 53))
        s.setblocking(False)
        return dns.query.udp(q, server, timeout=1.0, sock=s)
    finally:
        s.close()


def txt(r: dns.message.Message) -> list[str]:
    return [b"".join(rd.strings).decode() for rrset in r.answer for rd in rrset]


@pytest.fixture
def node(lab):
    n = Node(lab, "n1", "  announce: interface\n")
    n.wait_state("announced")
    yield n
    if n.proc.alive():
        n.stop()


def test_announced_and_identity_through_the_service_address(lab, node):
    st = node.status()
    assert st["method"] == "interface" and st["node_id"] == "n1"
    assert st["service_addresses"] == [SERVICE4, SERVICE6] and st["unicast"] == [UNICAST]
    assert lab.link_up() is True
    checks = {c["name"]: c for c in st["self_check"]["checks"]}
    assert checks["answer"]["ok"] and checks["routes"]["ok"] and checks["threads"]["ok"]
    assert checks["reload"]["ok"] and not checks["forwarder"]["enabled"]
    # From the router, the way clients come: the node's identity and its data.
    for server in (SERVICE4, SERVICE6):
        r = chaos_txt(lab.router, server, "id.server")
        assert r.rcode() == dns.rcode.NOERROR and txt(r) == ["n1"]
    r = query(lab.router, SERVICE4, "www.example.test")
    assert r.flags & dns.flags.AA and r.answer[0][0].address == "192.0.2.80"
    assert node.ctl("cluster", "health").returncode == 0


def test_failed_reload_withdraws_until_a_good_one(lab, node):
    node.zone.write_text(ZONE + "broken IN A not-an-address\n")
    assert node.ctl("reload", check=False).returncode == 1
    took = wait_until(lambda: lab.link_up() is False, 2.0)
    down_at = time.monotonic()
    st = node.wait_state("withdrawn")
    assert "reload" in st["reason"], st
    assert took < 0.6, f"withdrawn {took:.3f} s after the failed reload"
    health = node.ctl("cluster", "health", check=False)
    assert health.returncode == 1 and "unhealthy" in health.stdout
    # Withdrawn, not dead: what still arrives is answered (the old zone keeps serving).
    assert query(lab.router, SERVICE4, "www.example.test").rcode() == dns.rcode.NOERROR
    node.zone.write_text(ZONE.replace(" 1 3600", " 2 3600"))
    node.ctl("reload")
    wait_until(lambda: lab.link_up() is True, 5.0)
    back = time.monotonic() - down_at
    assert back >= 0.9, f"announced again {back:.2f} s after the withdraw, inside the hold-down"
    node.wait_state("announced")


def test_default_route_gone_withdraws(lab, node):
    lab.default_route(False)
    try:
        took = wait_until(lambda: lab.link_up() is False, 2.0)
        st = node.wait_state("withdrawn")
        assert "routes" in st["reason"] and "default route" in st["reason"], st
        assert took < 0.6, f"withdrawn {took:.3f} s after the route went"
    finally:
        lab.default_route(True)
    wait_until(lambda: lab.link_up() is True, 5.0)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP])
def test_dead_or_frozen_steerd_is_withdrawn_by_the_keeper(lab, node, sig):
    keeper = node.status()["keeper"]["pid"]
    assert pid_alive(keeper)
    os.kill(node.proc.pid, sig)
    try:
        took = wait_until(lambda: lab.link_up() is False, 2.0)
        # liveness-timeout 300 ms, plus what a loaded 2-core machine adds
        assert took < 0.5, f"withdrawn {took:.3f} s after {sig.name}"
        if sig == signal.SIGKILL:
            node.proc.proc.wait()
            wait_until(lambda: not pid_alive(keeper), 3.0)
            return
        os.kill(node.proc.pid, signal.SIGCONT)
        st = node.wait_state("announced", timeout=10)
        assert "keeper" in st["reason"] or st["transitions"] >= 2, st
    finally:
        if sig == signal.SIGKILL and pid_alive(keeper):
            os.kill(keeper, signal.SIGKILL)


def test_sigterm_withdraws_and_the_keeper_exits(lab, node):
    keeper = node.status()["keeper"]["pid"]
    node.stop()
    assert lab.link_up() is False
    assert not pid_alive(keeper)


def test_drain_then_undrain(lab, node):
    t0 = time.monotonic()
    res = node.ctl("drain", "5s")
    assert "drained" in res.stdout, res.stdout
    assert lab.link_up() is False
    st = node.status()
    assert st["state"] == "drained" and st["drain"]["state"] == "drained"
    assert not st["drain"]["timed_out"]
    assert time.monotonic() - t0 < 4
    assert node.ctl("cluster", "health", check=False).returncode == 1
    node.ctl("undrain")
    wait_until(lambda: lab.link_up() is True, 3.0)
    assert node.ctl("undrain", check=False).returncode == 1  # not draining any more


def test_drain_waits_for_the_queries_to_stop(lab, node):
    """Queries keep arriving (the router's static route does not follow the withdraw): the
    drain waits for them to stop, and ends by its timeout while they go on."""
    import threading
    stop = threading.Event()

    def load():
        while not stop.is_set():
            try:
                query(lab.router, SERVICE4, "www.example.test", timeout=0.2)
            except Exception:
                pass
            time.sleep(0.02)

    t = threading.Thread(target=load)
    t.start()
    try:
        res = node.ctl("drain", "1500ms", check=False)
        assert res.returncode == 1 and "timed out" in res.stdout, res.stdout
        assert node.status()["drain"]["timed_out"]
    finally:
        stop.set()
        t.join()
    node.ctl("undrain")


def test_bird_method_drives_a_real_bird(lab):
    sock = lab.dir / "bird.ctl"
    n = Node(lab, "n2", f"  announce: bird\n  bird: {{ socket: {sock}, protocol: anycast }}\n")
    try:
        wait_until(lambda: n.ctl_path.exists(), 10)
        cfg = n.ctl("cluster", "bird-config", f"peer={ROUTER}").stdout
        assert 'protocol direct anycast' in cfg
        (lab.dir / "bird.conf").write_text(cfg)
        lab.start("bird", [BIRD, "-f", "-c", str(lab.dir / "bird.conf"), "-s", str(sock),
                           "-P", str(lab.dir / "bird.pid")])

        def proto_state() -> str:
            res = subprocess.run(["birdc", "-s", str(sock), "show", "protocols", "anycast"],
                                 capture_output=True, text=True, timeout=5)
            return res.stdout

        # The keeper enables the protocol once BIRD answers on its socket.
        n.wait_state("announced", timeout=15)
        wait_until(lambda: " up " in proto_state(), 5.0)
        assert lab.link_up() is True  # with bird the holder stays up
        n.ctl("drain", "--no-wait")
        wait_until(lambda: "down" in proto_state() or "disabled" in proto_state().lower(), 2.0)
        n.ctl("undrain")
        wait_until(lambda: " up " in proto_state(), 3.0)
    finally:
        n.proc.stop()
        for p in [p for p in lab.procs if p.name == "bird"]:
            p.stop()
            lab.procs.remove(p)


def test_frr_method_kernel_routes_seen_by_zebra(lab):
    n = Node(lab, "n3", "  announce: frr\n")
    # zebra drops to the user frr: its files live in a folder frr owns and can reach (the
    # test's own tmp_path is private to root).
    run_dir = Path(tempfile.mkdtemp(prefix="steer-frr-"))
    shutil.chown(run_dir, "frr", "frr")
    os.chmod(run_dir, 0o755)
    empty = run_dir / "empty.conf"
    empty.write_text("")
    zebra = lab.start("zebra", [ZEBRA, "-i", str(run_dir / "zebra.pid"), "-z",
                                str(run_dir / "zserv.api"), "--vty_socket", str(run_dir),
                                "-f", str(empty), "-P", "0"])
    try:
        n.wait_state("announced", timeout=15)
        assert lab.link_up() is False  # the holder stays down: zebra would prefer it

        def kernel_routes() -> str:
            return lab.ip(lab.node, "route", "show", "dev", "lo").stdout

        assert SERVICE4 in kernel_routes()
        # IPv6 is still answered with the holder down (a local route through lo)
        assert txt(chaos_txt(lab.router, SERVICE6, "id.server")) == ["n3"]

        def zebra_sees() -> bool:
            res = subprocess.run(["ip", "netns", "exec", lab.node, VTYSH, "--vty_socket",
                                  str(run_dir), "-c", "show ip route kernel"],
                                 capture_output=True, text=True, timeout=5)
            return f"{SERVICE4}/32" in res.stdout

        wait_until(zebra_sees, 10.0, step=0.2)
        n.ctl("drain", "--no-wait")
        wait_until(lambda: SERVICE4 not in kernel_routes(), 2.0)
        wait_until(lambda: not zebra_sees(), 5.0, step=0.2)
    finally:
        n.proc.stop()
        zebra.stop()
        lab.procs.remove(zebra)
        shutil.rmtree(run_dir, ignore_errors=True)


def test_keepalived_track_file(lab):
    track = lab.dir / "vrrp-track"
    n = Node(lab, "n4", f"  announce: keepalived\n  keepalived: {{ track-file: {track} }}\n")
    try:
        n.wait_state("announced", timeout=15)
        assert track.read_text().strip() == "0"
        n.ctl("cluster", "notify", "master")
        assert n.status()["vrrp_state"] == "MASTER"
        os.kill(n.proc.pid, signal.SIGKILL)
        wait_until(lambda: track.read_text().strip() != "0", 1.0)
        n.proc.proc.wait()
    finally:
        n.proc.stop()


def test_not_a_cluster_node(tmp_path):
    """Without a cluster section the commands say so (exit 1), nothing else changes."""
    zone = tmp_path / "z.zone"
    zone.write_text(ZONE)
    ctl = tmp_path / "ctl.sock"
    p = subprocess.Popen([STEERD, "--listen", f"127.0.0.1:{free_port()}", "--zone",
                          f"example.test={zone}",
                          "--control-socket", str(ctl)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    try:
        wait_until(ctl.exists, 10)
        for args in (["cluster"], ["cluster", "health"], ["drain"], ["undrain"]):
            res = subprocess.run([STEERCTL, "-s", str(ctl), *args], capture_output=True,
                                 text=True, timeout=10)
            assert res.returncode == 1 and "not in a cluster" in res.stderr, (args, res)
    finally:
        p.terminate()
        p.wait(10)


def knot_primary(lab: NodeLab, workdir: Path, origin: str, port: int) -> Proc:
    """knotd in the node ns on 127.0.0.1@@port, primary of @origin (refresh and retry 1 s,
    expire 3 s), NOTIFYing steerd on 127.0.0.1@53."""
    workdir.mkdir(exist_ok=True)
    (workdir / "zone").write_text(
        f"$TTL 300\n@ IN SOA ns1.{origin} admin.{origin} 1 1 1 3 300\n@ IN NS ns1.{origin}\n"
        f"ns1.{origin} IN A 192.0.2.53\nwww.{origin} IN A 192.0.2.81\n")
    conf = workdir / "knot.conf"
    conf.write_text(f"""server:
    rundir: "{workdir}"
    listen: 127.0.0.1@{port}
log:
  - target: stderr
    any: info
database:
    storage: "{workdir}"
remote:
  - id: steer
    address: 127.0.0.1@53
acl:
  - id: local
    address: 127.0.0.0/8
    action: [transfer]
zone:
  - domain: {origin}
    file: "{workdir / 'zone'}"
    acl: [local]
    notify: steer
""")
    return lab.start("knotd", [KNOTD, "-c", str(conf)])


def ns_metrics(lab: NodeLab, port: int) -> str:
    """GET /metrics from steerd's HTTP listener on 127.0.0.1@@port inside the node ns."""
    return ns_http_get(lab.node, port).decode(errors="replace")


def zone_metric(text: str, name: str, zone: str) -> float | None:
    """The value of gauge @name for @zone (its label with or without the trailing dot)."""
    for line in text.splitlines():
        for label in (zone, zone.rstrip(".")):
            if line.startswith(f'{name}{{zone="{label}"}} '):
                return float(line.split()[-1])
    return None


@pytest.mark.skipif(not Path(KNOTD).exists(), reason="knotd (Debian knot) is needed")
def test_secondary_zone_joins_the_self_check_when_it_arrives(lab):
    """A secondary zone pending its first transfer (primary down) does not keep the node from
    announcing; once transferred after start it is in the answer check's list. When it then
    expires (its primary gone: every node sees that alike) the answer check skips it, logs so
    and asks id.server, its only zone being skipped: the node stays announced, the zone shown
    skipped in steerctl cluster, expired in steerctl zones and the metrics. A good refresh
    brings it back into the check."""
    origin, port, http_port = "sec.test.", free_port(), free_port()
    n = Node(lab, "n2", f"  announce: interface\nhttp:\n  listen: [127.0.0.1:{http_port}]\n",
             zones=f"  - domain: {origin}\n    primaries: [\"127.0.0.1@{port}\"]\n"
                   f"    refresh-min: 500ms\n    file: {lab.dir / 'n2-sec.zone'}\n")
    knot = None
    try:
        st = n.wait_state("announced")
        assert st["self_check"]["zones"] == [], st["self_check"]
        assert query(lab.router, SERVICE4, "www." + origin).rcode() == dns.rcode.SERVFAIL
        knot = knot_primary(lab, lab.dir / "knot-n2", origin, port)

        def served() -> bool:
            r = query(lab.router, SERVICE4, "www." + origin)
            return r.rcode() == dns.rcode.NOERROR and bool(r.answer)
        wait_until(served, 10, step=0.05)
        wait_until(lambda: n.status()["self_check"]["zones"] == [origin], 2, step=0.05)
        assert "zones      sec.test.\n" in n.ctl("cluster").stdout
        st = n.status()
        assert st["state"] == "announced" and st["self_check"]["zones_skipped"] == {}, st
        assert zone_metric(ns_metrics(lab, http_port), "steer_xfr_zone_expired", origin) == 0
        transitions = st["transitions"]

        # The primary gone, the zone expires (SOA expire 3 s) and answers SERVFAIL.
        knot.stop()
        wait_until(lambda: n.status()["self_check"]["zones_skipped"] == {origin: "expired"},
                   15, step=0.05)
        assert query(lab.router, SERVICE4, "www." + origin).rcode() == dns.rcode.SERVFAIL
        # Asked in its place: id.server, so the node stays announced.
        wait_until(lambda: "id.server" in n.status()["self_check"]["checks"][0]["detail"], 2,
                   step=0.05)
        time.sleep(1.0)  # fall 3 x 100 ms would have withdrawn it several times over
        st = n.status()
        assert st["state"] == "announced" and st["transitions"] == transitions, st
        assert lab.link_up() is True
        out = n.ctl("cluster").stdout
        assert "zones      sec.test. (skipped: expired); none to ask (id.server)" in out, out
        [z] = [z for z in json.loads(n.ctl("--json", "zones").stdout)["data"]
               if z["name"].rstrip(".") == origin.rstrip(".")]
        assert z["state"] == "expired", z
        text = ns_metrics(lab, http_port)
        assert zone_metric(text, "steer_xfr_zone_expired", origin) == 1, text
        assert zone_metric(text, "steer_xfr_zone_expire_seconds", origin) == 0, text
        log = n.proc.log_path.read_text(errors="replace")
        assert "zone sec.test. has expired (it answers SERVFAIL): the answer check skips it" \
            in log, log

        # The primary back: the next good refresh ends the expiry and the zone is asked again.
        knot = knot_primary(lab, lab.dir / "knot-n2", origin, port)
        wait_until(lambda: n.status()["self_check"]["zones_skipped"] == {}, 10, step=0.05)
        wait_until(lambda: "sec.test. SOA" in n.status()["self_check"]["checks"][0]["detail"],
                   2, step=0.05)
        assert served()
        assert "zone sec.test. no longer expired: back in the answer check" in \
            n.proc.log_path.read_text(errors="replace")
        st = n.status()
        assert st["state"] == "announced" and st["transitions"] == transitions, st
    finally:
        if knot is not None:
            knot.stop()
        n.stop()
