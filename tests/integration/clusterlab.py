"""The cluster lab: Steer nodes behind one service address in network namespaces, the routing
daemons that announce it (BIRD 2 or FRR on the nodes, BIRD 2 on the router), a client that
sends queries from many source ports, the faults the cluster must survive, and the
measurement of how long the service took to leave a sick node and how many queries that cost.

Needs root, iproute2, nftables, bird2 (and frr, keepalived for those variants). Every packet
stays inside the lab's namespaces (slab<pid>...): no veth reaches the host's namespace, and
nothing here changes a sysctl outside them.

    with Lab(variant="bgp", speaker="bird") as lab:
        lab.start_nodes(method="interface")      # speakers + steerd on n1..n3, all announced
        m = scenario(lab, "kill", 1)             # the load, the fault, its heal, the figures
        lab.fault("link", 2)                     # or by hand: break node 2 ...
        lab.heal(2)                              # ... and undo it
        anchor(lab, 1)                           # node 1 as the anchor (external monitor)

Without a steerd that knows `cluster:` (cluster_supported()), nodes run without it and the
lab withdraws by hand (Node.announce_by_hand: what the keeper would do), so the topology,
the routing daemons and the measurement can be checked on their own.

Topology (variants bgp and ospf; N = 1..3):

    client ns               router ns (BIRD, ECMP)            node ns nN (steerd, speaker)
    router 10.99.0.2/24 --- client 10.99.0.1/24
                            nN 10.53.N.1/24 ------------------ eth0 10.53.N.1N/24 (unicast)
                                                               vip0 192.0.2.53/32 (service)

Variant vrrp: two nodes on one L2 segment, a bridge `lan` in the router namespace:

                            lan 10.53.0.1/24 (bridge) -+------ eth0 10.53.0.11/24 n1
                            192.0.2.53/32 dev lan      +------ eth0 10.53.0.12/24 n2
                                                       keepalived moves 192.0.2.53 between
                                                       them; both hold it on vip0 as well

The router's route to SERVICE is one multipath route over the announcing nodes (BGP: `merge
paths on`; OSPF: `merge external yes`), hashed by L4 (fib_multipath_hash_policy=1), so each
of the client's source ports sticks to one node and the ports spread over all of them.

The routing daemons run the configurations in examples/cluster/ (the files an operator
copies), with the node's own addresses put in and the lines of the announcement method
chosen (render()).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import clusterload  # noqa: E402
import fwdlab  # noqa: E402
from fwdlab import Proc, run, wait_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "cluster"
SERVICE = "192.0.2.53"
CLIENT = "10.99.0.2"
ROUTER_CLIENT = "10.99.0.1"
ZONE = "cluster.lab"
# The zone's name whose TXT is the node id: tells the nodes apart when steerd has no
# identity answers; with them the client asks id.server CH TXT.
WHOAMI = f"node.{ZONE}"
VARIANTS = ("bgp", "ospf", "vrrp")
SPEAKERS = ("bird", "frr")
METHODS = ("interface", "bird", "frr", "keepalived")

BIRD = shutil.which("bird") or "/usr/sbin/bird"
BIRDC = shutil.which("birdc") or "/usr/sbin/birdc"
FRR_DIR = Path("/usr/lib/frr")
VTYSH = shutil.which("vtysh") or "/usr/bin/vtysh"
KEEPALIVED = shutil.which("keepalived") or "/usr/sbin/keepalived"
NFT = fwdlab.NFT

FAULTS = ("kill", "stop", "zone", "link", "route", "drain", "monitor-stop")
FAULT_HELP = {
    "kill": "steerd killed with SIGKILL (heal: started again)",
    "stop": "steerd stopped with SIGSTOP, a hung process (heal: SIGCONT)",
    "zone": "a broken zone file and `steerctl reload`, which fails (heal: the good file, "
            "reload)",
    "link": "nft in the node drops everything on its uplink, a silent link failure only BFD "
            "sees (heal: the rule removed)",
    "route": "the node's default route removed: queries arrive, replies cannot leave (heal: "
             "the route back)",
    "drain": "`steerctl drain` (it returns once drained), then steerd stopped (heal: started "
             "again)",
    "monitor-stop": "the anchor: steerd without a cluster section stopped with SIGSTOP; an "
                    "external monitor (a query every 200 ms, `birdc disable vip` after 3 "
                    "failures) withdraws (heal: SIGCONT, `birdc enable vip`)",
}


def node_addr(n: int, variant: str = "bgp") -> str:
    """Node n's unicast address (its uplink's)."""
    return f"10.53.0.1{n}" if variant == "vrrp" else f"10.53.{n}.1{n}"


def router_addr(n: int, variant: str = "bgp") -> str:
    """The router's address on node n's link (the node's default gateway)."""
    return "10.53.0.1" if variant == "vrrp" else f"10.53.{n}.1"


def missing_tools(variant: str = "bgp", speaker: str = "bird") -> list[str]:
    """The programs this variant needs that are not installed."""
    need = {"ip": shutil.which("ip"), "nft": NFT}
    if variant == "vrrp":
        need["keepalived"] = KEEPALIVED
        return [k for k, v in need.items() if not v or not os.path.exists(v)]
    need.update(bird=BIRD, birdc=BIRDC)  # the router's, and the nodes' unless FRR
    if speaker == "frr":
        need.update(zebra=str(FRR_DIR / "zebra"), bgpd=str(FRR_DIR / "bgpd"),
                    bfdd=str(FRR_DIR / "bfdd"), vtysh=VTYSH)
    return [k for k, v in need.items() if not v or not os.path.exists(v)]


def steerd_binary() -> str:
    return os.path.abspath(os.environ.get("STEERD") or ROOT / "build" / "src" / "daemon" /
                           "steerd")


def steerctl_binary() -> str:
    """$STEERCTL, else the steerctl of the build that holds the steerd binary."""
    return os.path.abspath(os.environ.get("STEERCTL") or
                           Path(steerd_binary()).resolve().parents[2] / "tools" / "steerctl")


_WIRED: dict[str, bool] = {}


def cluster_supported(binary: str | None = None) -> bool:
    """Whether this steerd knows the `cluster:` section (its configuration reference lists
    cluster.node-id): with it the nodes run as real cluster nodes, without it the lab can only
    withdraw by hand."""
    binary = binary or steerd_binary()
    if binary not in _WIRED:
        try:
            out = subprocess.run([binary, "--config-reference"], capture_output=True,
                                 text=True, timeout=20).stdout
        except OSError:
            out = ""
        _WIRED[binary] = "cluster.node-id" in out
    return _WIRED[binary]


def render(text: str, method: str, subst: dict[str, str]) -> str:
    """An example configuration made into a node's: each line after a comment naming an
    announcement method ("# announce: bird", "! announce: frr") is kept when it is @method's
    and commented out otherwise (a commented line of @method is uncommented), and the
    addresses and names of @subst are replaced (whole words: "10.53.1.1" does not touch
    "10.53.1.11")."""
    out = []
    mark = None  # the comment character and method of the marker on the line before
    for line in text.splitlines():
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        m = re.match(r"([#!]) announce: (\w+)\s*$", stripped)
        if m:
            mark = (m.group(1), m.group(2))
            out.append(line)
            continue
        if mark:
            ch, which = mark
            body = stripped[1:].lstrip() if stripped.startswith(ch) else stripped
            line = indent + (body if which == method else f"{ch} {body}")
            mark = None
        out.append(line)
    text = "\n".join(out) + "\n"
    # Longest keys first, through placeholders, so one replacement never feeds another.
    keys = sorted(subst, key=len, reverse=True)
    for i, k in enumerate(keys):
        text = re.sub(r"(?<![\w.])" + re.escape(k) + r"(?![\w]|\.\d)", f"\0{i}\0", text)
    for i, k in enumerate(keys):
        text = text.replace(f"\0{i}\0", subst[k])
    return text


def example(name: str) -> str:
    return (EXAMPLES / name).read_text()


def zone_text(node_id: str, serial: int = 1) -> str:
    return f"""$TTL 60
{ZONE}. SOA ns.{ZONE}. hostmaster.{ZONE}. {serial} 3600 600 86400 30
{ZONE}. NS ns.{ZONE}.
ns.{ZONE}. A {SERVICE}
{WHOAMI}. 0 TXT "{node_id}"
www.{ZONE}. A 192.0.2.80
"""


BAD_ZONE = f"""$TTL 60
{ZONE}. SOA ns.{ZONE}. hostmaster.{ZONE}. 2 3600 600 86400 30
this line is not a record
"""


class Node:
    """One Steer node: its namespace, routing daemon(s) and steerd."""

    def __init__(self, lab: "Lab", n: int):
        self.lab = lab
        self.n = n
        self.id = f"n{n}"
        self.ns = f"{lab.prefix}-n{n}"
        self.addr = node_addr(n, lab.variant)
        self.gateway = router_addr(n, lab.variant)
        self.uplink = "eth0"
        self.dir = lab.dir / self.id
        self.dir.mkdir(parents=True, exist_ok=True)
        self.speaker: list[Proc] = []  # BIRD, or zebra + bgpd + bfdd, or keepalived
        self.steerd: Proc | None = None
        self.method = "interface"
        self.cluster = False  # steerd runs with a cluster: section
        self.zone_path = self.dir / f"{ZONE}.zone"
        self.track_file = self.dir / "vrrp-track"
        self.stopped = False  # SIGSTOPped
        self.frr_dir: Path | None = None

    # ---- paths -----------------------------------------------------------------------------

    @property
    def socket(self) -> Path:
        return self.dir / "steerd.sock"

    @property
    def bird_socket(self) -> Path:
        return self.dir / "bird.ctl"

    def subst(self) -> dict[str, str]:
        """The example files are written for node n1: its values and this node's."""
        return {"10.53.1.11": self.addr, "10.53.1.1": self.gateway, "n1": self.id,
                "/run/steer/vrrp-track": str(self.track_file),
                "/run/steer/steerd.sock": str(self.socket),
                "/usr/bin/steerctl": steerctl_binary()}

    def ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run("ip", "-n", self.ns, *args, check=check)

    # ---- the routing daemon ----------------------------------------------------------------

    def start_speaker(self, method: str) -> None:
        """Start this node's routing daemon for the announcement @method (BIRD or FRR per the
        lab's speaker, keepalived in the vrrp variant)."""
        self.stop_speaker()
        self.method = method
        if self.lab.variant == "vrrp":
            self._start_keepalived()
        elif self.lab.speaker == "frr":
            self._start_frr(method)
        else:
            self._start_bird(method)

    def _start_bird(self, method: str) -> None:
        name = "bird-ospf.conf" if self.lab.variant == "ospf" else "bird-bgp.conf"
        conf = self.dir / "bird.conf"
        text = render(example(name), "bird" if method == "bird" else "interface",
                      self.subst())
        conf.write_text(text.replace("log syslog all;", "log stderr all;"))
        self.speaker = [Proc(f"bird {self.id}", [BIRD, "-c", str(conf), "-s",
                                                 str(self.bird_socket), "-P",
                                                 str(self.dir / "bird.pid"), "-f"],
                             self.ns, self.dir / "bird.log")]
        wait_for(f"bird on {self.id}", lambda: self._alive_and(
            lambda: self.birdc("show", "status", check=False).returncode == 0))

    def birdc(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """birdc against this node's BIRD (its control socket: no namespace needed)."""
        return run(BIRDC, "-s", str(self.bird_socket), *args, check=check)

    def _start_frr(self, method: str) -> None:
        # FRR's daemons drop to the user frr (this build insists the vty group be frrvty,
        # which root is not in): their files go to a folder of their own that frr owns.
        if self.frr_dir is None:
            self.frr_dir = Path(tempfile.mkdtemp(prefix=f"{self.ns}-frr-"))
            shutil.chown(self.frr_dir, "frr", "frr")
            os.chmod(self.frr_dir, 0o755)
        d = self.frr_dir
        conf = d / "frr.conf"
        conf.write_text(render(example("frr.conf"), "frr" if method == "frr" else "interface",
                               self.subst()).replace("log syslog informational",
                                                     "log stdout informational"))
        (self.dir / "frr.conf").write_text(conf.read_text())
        vty = d / "vty"
        vty.mkdir(exist_ok=True)
        shutil.chown(vty, "frr", "frr")
        zserv = d / "zserv.api"
        # Each daemon starts empty; vtysh then hands every line of the integrated file to
        # the daemons it belongs to (given to each daemon with -f, a foreign block's `exit`
        # would end that daemon's configuration early).
        empty = d / "empty.conf"
        empty.write_text("")
        common = ["--vty_socket", str(vty), "-z", str(zserv), "-f", str(empty), "-P", "0",
                  "--log", "stdout"]
        self.speaker = []
        for name in ("zebra", "bfdd", "bgpd"):
            extra = ["--bfdctl", str(d / "bfdd.sock")] if name == "bfdd" else []
            self.speaker.append(Proc(f"{name} {self.id}",
                                     [str(FRR_DIR / name), *common, "-i",
                                      str(d / f"{name}.pid"), *extra],
                                     self.ns, self.dir / f"{name}.log"))
            if name == "zebra":
                wait_for(f"zebra on {self.id}", lambda: self._alive_and(zserv.exists))
        wait_for(f"bgpd on {self.id}", lambda: self._alive_and(
            lambda: self.vtysh("show bgp summary", check=False).returncode == 0))
        res = run("ip", "netns", "exec", self.ns, VTYSH, "--vty_socket", str(vty), "-f",
                  str(conf), check=False)
        if res.returncode != 0:
            raise RuntimeError(f"vtysh -f {conf} on {self.id}: {res.stdout}{res.stderr}")

    def vtysh(self, *cmds: str, check: bool = True) -> subprocess.CompletedProcess:
        argv = [VTYSH, "--vty_socket", str(self.frr_dir / "vty")]
        for c in cmds:
            argv += ["-c", c]
        return run("ip", "netns", "exec", self.ns, *argv, check=check)

    def _start_keepalived(self) -> None:
        conf = self.dir / "keepalived.conf"
        text = render(example("keepalived.conf"), "keepalived", self.subst())
        if self.n != 1:
            text = text.replace("priority 100", "priority 90")
        conf.write_text(text)
        if not self.track_file.exists():
            self.track_file.write_text("1\n")  # a fault until steerd says otherwise
        self.speaker = [Proc(f"keepalived {self.id}",
                             [KEEPALIVED, "-n", "-l", "-D", "-G", "-P", "-f", str(conf),
                              "-p", str(self.dir / "keepalived.pid"),
                              "-r", str(self.dir / "vrrp.pid")],
                             self.ns, self.dir / "keepalived.log")]
        time.sleep(0.2)
        if not self.speaker[0].alive():
            raise RuntimeError(f"keepalived on {self.id} exited: {self.speaker[0].log()}")

    def _alive_and(self, fn) -> bool:
        for p in self.speaker:
            if not p.alive():
                raise RuntimeError(f"{p.name} exited: {p.log()}")
        return fn()

    def stop_speaker(self) -> None:
        for p in reversed(self.speaker):
            p.stop()
        self.speaker = []

    def close(self) -> None:
        """Stop steerd and the speaker; remove FRR's folder."""
        self.stop_steerd()
        self.lab.problems += self.sanitizer_reports()
        self.stop_speaker()
        if self.frr_dir:
            shutil.rmtree(self.frr_dir, ignore_errors=True)
            self.frr_dir = None

    # ---- steerd ----------------------------------------------------------------------------

    def config(self, cluster: bool, method: str) -> str:
        lines = ["server:", '  listen: ["0.0.0.0:53"]', "  workers: 2", "  tcp-workers: 1",
                 f"  control-socket: {self.socket}",
                 "zones:", f"  - domain: {ZONE}", f"    file: {self.zone_path}"]
        if cluster:
            lines += ["cluster:", f"  node-id: {self.id}",
                      f"  service-addresses: [{SERVICE}]", "  interface: vip0",
                      f"  unicast: {self.addr}", f"  announce: {method}"]
            if method == "bird":
                lines.append(f"  bird: {{ socket: {self.bird_socket}, protocol: vip }}")
            if method == "keepalived":
                lines.append(f"  keepalived: {{ track-file: {self.track_file} }}")
            lines.append("  self-check: { interval: 100ms, fall: 3, rise: 5, "
                         "hold-down: 2s }")
        return "\n".join(lines) + "\n"

    def holder(self) -> None:
        """The holder interface with the service address, made by the lab: steerd without a
        cluster section (the keeper makes it otherwise). Admin down: withdrawn."""
        if self.ip("link", "show", "vip0", check=False).returncode != 0:
            self.ip("link", "add", "vip0", "type", "ifb")
        self.ip("addr", "replace", f"{SERVICE}/32", "dev", "vip0")

    def start_steerd(self, cluster: bool | None = None, method: str | None = None,
                     wait: bool = True) -> None:
        """Start steerd (with a cluster section when @cluster, default: when this steerd
        supports it) announcing by @method (default the speaker's); with @wait, until it
        answers on its unicast address."""
        if self.steerd and self.steerd.alive():
            raise RuntimeError(f"steerd on {self.id} is running")
        self.cluster = cluster_supported() if cluster is None else cluster
        self.method = method or self.method
        if not self.zone_path.exists():
            self.zone_path.write_text(zone_text(self.id))
        if not self.cluster:
            self.holder()
        conf = self.dir / "steerd.yaml"
        conf.write_text(self.config(self.cluster, self.method))
        self.stopped = False
        self.steerd = Proc(f"steerd {self.id}", [steerd_binary(), "-c", str(conf)], self.ns,
                           self.dir / "steerd.log")
        if wait:
            self.wait_steerd()

    def wait_steerd(self, timeout: float = 20) -> None:
        def up():
            if not self.steerd.alive():
                raise RuntimeError(f"steerd on {self.id} exited: {self.steerd.log()}")
            return fwdlab.answers(self.ns, self.addr, WHOAMI, "TXT", timeout=0.3) == "NOERROR"
        wait_for(f"steerd on {self.id}", up, timeout)

    def steerd_alive(self) -> bool:
        return bool(self.steerd and self.steerd.alive())

    def kill_steerd(self) -> None:
        if self.steerd:
            self.steerd.kill()

    def stop_steerd(self) -> None:
        """SIGTERM; an exit status other than 0 goes into the lab's problems."""
        if self.steerd:
            if self.stopped:
                self.sigcont()
            was_alive = self.steerd.alive()
            self.steerd.stop()
            rc = self.steerd.proc.returncode
            if was_alive and rc != 0:
                self.lab.problems.append(f"steerd on {self.id}: exit status {rc} after "
                                         f"SIGTERM: {self.log()[-2000:]}")

    def sanitizer_reports(self) -> list[str]:
        """Sanitizer reports in this node's steerd log (every steerd it ran appends to it)."""
        try:
            log = (self.dir / "steerd.log").read_text(errors="replace")
        except OSError:
            return []
        return [f"steerd on {self.id}: {m}" for m in fwdlab.SANITIZER_MARKERS if m in log]

    def sigstop(self) -> None:
        os.kill(self.steerd.pid, signal.SIGSTOP)
        self.stopped = True

    def sigcont(self) -> None:
        os.kill(self.steerd.pid, signal.SIGCONT)
        self.stopped = False

    def ctl(self, *args: str, timeout: float = 10) -> dict:
        """`steerctl --json ARGS` against this node's steerd: the reply's "data"."""
        res = subprocess.run([steerctl_binary(), "-s", str(self.socket), "--json", "-t",
                              str(timeout), *args], capture_output=True, text=True,
                             timeout=timeout + 5)
        if res.returncode != 0:
            raise RuntimeError(f"steerctl {' '.join(args)}: exit {res.returncode}: "
                               f"{res.stderr.strip() or res.stdout.strip()}")
        doc = json.loads(res.stdout)
        if not doc.get("ok"):
            raise RuntimeError(f"steerctl {' '.join(args)}: {doc}")
        return doc.get("data")

    def ctl_rc(self, *args: str, timeout: float = 10) -> subprocess.CompletedProcess:
        return subprocess.run([steerctl_binary(), "-s", str(self.socket), "-t", str(timeout),
                               *args], capture_output=True, text=True, timeout=timeout + 5)

    def log(self) -> str:
        return self.steerd.log() if self.steerd else ""

    # ---- announcement by hand (steerd without a cluster section) ---------------------------

    def announce_by_hand(self, on: bool) -> None:
        """What the keeper does, done by the lab (method interface: vip0 admin up/down;
        bird: enable/disable vip; frr: the kernel route)."""
        if self.method == "bird":
            self.birdc("enable" if on else "disable", "vip")
        elif self.method == "frr":
            # zebra prefers a connected route over any other, so with vip0 up its /32 would
            # hide the kernel route from redistribution: vip0 stays down (the address stays
            # local) and the host route goes through lo.
            self.ip("link", "set", "vip0", "down")
            self.ip("route", "replace" if on else "del", f"{SERVICE}/32", "dev", "lo",
                    "proto", "250", check=on)
        else:
            self.ip("link", "set", "vip0", "up" if on else "down")
        if self.lab.variant == "vrrp":
            self.track_file.write_text("0\n" if on else "1\n")


class Lab:
    """The lab: built on __enter__ (or build()), torn down on __exit__ (or close()), also when
    building failed half-way. @variant "bgp", "ospf" (three nodes behind a BIRD router) or
    "vrrp" (two nodes on a bridge, keepalived); @speaker the nodes' routing daemon ("bird" or
    "frr"; BGP only for frr); @workdir keeps configs and logs (else a temporary folder,
    removed at close unless @keep)."""

    _count = 0

    def __init__(self, variant: str = "bgp", speaker: str = "bird", nodes: int | None = None,
                 workdir: Path | str | None = None, keep: bool = False):
        if variant not in VARIANTS or speaker not in SPEAKERS:
            raise ValueError(f"variant {variant!r} speaker {speaker!r}")
        if speaker == "frr" and variant != "bgp":
            raise ValueError("FRR nodes: the bgp variant only")
        self.variant = variant
        self.speaker = speaker
        Lab._count += 1
        # Namespace names carry the lab's tag and this process's PID: several labs (and other
        # people's tests) run side by side.
        self.prefix = f"slab{os.getpid()}{Lab._count}"
        self.router = f"{self.prefix}-r"
        self.client = f"{self.prefix}-c"
        self.n_nodes = nodes or (2 if variant == "vrrp" else 3)
        self._tmp = None
        if workdir is None:
            self._tmp = tempfile.mkdtemp(prefix="clusterlab-")
            workdir = self._tmp
        self.dir = Path(workdir)
        self.keep = keep
        self.namespaces: list[str] = []
        self.router_bird: Proc | None = None
        self.nodes: dict[int, Node] = {}
        self.active: list[tuple[str, int]] = []  # faults applied and not healed
        self.monitor: Monitor | None = None
        # What went wrong with a steerd on the way (exit status after SIGTERM, sanitizer
        # reports, the latter collected at close()): a test's teardown checks it is empty.
        self.problems: list[str] = []

    def __enter__(self) -> "Lab":
        self.build()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def build(self) -> None:
        try:
            self._namespaces()
            self._wire()
            if self.variant != "vrrp":
                self._start_router()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop every process the lab started (by PID), then delete its namespaces."""
        if self.monitor:
            self.monitor.stop()
        for node in self.nodes.values():
            node.close()
        if self.router_bird:
            self.router_bird.stop()
        for ns in reversed(self.namespaces):
            run("ip", "netns", "del", ns, check=False)
        self.namespaces.clear()
        if self._tmp and not self.keep:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def ip(self, ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run("ip", "-n", ns, *args, check=check)

    def sysctl(self, ns: str, key: str, value: str) -> None:
        run("ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}={value}")

    def nft(self, ns: str, script: str) -> None:
        res = subprocess.run(["ip", "netns", "exec", ns, NFT, "-f", "-"], input=script,
                             capture_output=True, text=True, timeout=20)
        if res.returncode != 0:
            raise RuntimeError(f"nft in {ns}: {res.stderr.strip()}\n{script}")

    def _namespaces(self) -> None:
        for n in range(1, self.n_nodes + 1):
            self.nodes[n] = Node(self, n)
        for ns in (self.router, self.client, *(nd.ns for nd in self.nodes.values())):
            run("ip", "netns", "add", ns)
            self.namespaces.append(ns)
            self.ip(ns, "link", "set", "lo", "up")

    def _veth(self, ns_a: str, a: str, ns_b: str, b: str) -> None:
        # Made inside ns_a with its peer moved to ns_b at once: it never exists in the host's.
        self.ip(ns_a, "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns_b)
        self.ip(ns_a, "link", "set", "dev", a, "up")
        self.ip(ns_b, "link", "set", "dev", b, "up")

    def _wire(self) -> None:
        r, c = self.router, self.client
        self._veth(c, "router", r, "client")
        self.ip(c, "addr", "add", f"{CLIENT}/24", "dev", "router")
        self.ip(c, "route", "add", "default", "via", ROUTER_CLIENT)
        self.ip(r, "addr", "add", f"{ROUTER_CLIENT}/24", "dev", "client")
        self.sysctl(r, "net.ipv4.ip_forward", "1")
        self.sysctl(r, "net.ipv4.fib_multipath_hash_policy", "1")
        if self.variant == "vrrp":
            self.ip(r, "link", "add", "lan", "type", "bridge")
            self.ip(r, "link", "set", "lan", "up")
            self.ip(r, "addr", "add", "10.53.0.1/24", "dev", "lan")
            # keepalived's gratuitous ARP must update the router's entry at once (the default
            # locktime ignores ARP updates for a second after the last one).
            self.sysctl(r, "net.ipv4.neigh.lan.locktime", "0")
            self.ip(r, "route", "add", f"{SERVICE}/32", "dev", "lan")
        for n, node in self.nodes.items():
            if self.variant == "vrrp":
                self._veth(r, f"p{n}", node.ns, "eth0")
                self.ip(r, "link", "set", f"p{n}", "master", "lan")
                self.ip(node.ns, "addr", "add", f"{node.addr}/24", "dev", "eth0")
            else:
                self._veth(r, f"n{n}", node.ns, "eth0")
                self.ip(r, "addr", "add", f"{node.gateway}/24", "dev", f"n{n}")
                self.ip(node.ns, "addr", "add", f"{node.addr}/24", "dev", "eth0")
            self.ip(node.ns, "route", "add", "default", "via", node.gateway)
            # examples/cluster/sysctl.conf, the node's part
            for key, value in (("net.ipv4.conf.all.rp_filter", "2"),
                               ("net.ipv4.conf.default.rp_filter", "2"),
                               ("net.ipv4.conf.all.arp_ignore", "1"),
                               ("net.ipv4.conf.all.arp_announce", "2")):
                self.sysctl(node.ns, key, value)

    def _start_router(self) -> None:
        d = self.dir / "router"
        d.mkdir(parents=True, exist_ok=True)
        conf = d / "bird.conf"
        conf.write_text(example("router-bird.conf").replace("log syslog all;",
                                                            "log stderr all;"))
        self.router_socket = d / "bird.ctl"
        self.router_bird = Proc("bird router", [BIRD, "-c", str(conf), "-s",
                                                str(self.router_socket), "-P",
                                                str(d / "bird.pid"), "-f"],
                                self.router, d / "bird.log")

        def up():
            if not self.router_bird.alive():
                raise RuntimeError(f"router bird exited: {self.router_bird.log()}")
            return run(BIRDC, "-s", str(self.router_socket), "show", "status",
                       check=False).returncode == 0
        wait_for("router bird", up)

    def router_birdc(self, *args: str) -> str:
        return run(BIRDC, "-s", str(self.router_socket), *args).stdout

    # ---- state -------------------------------------------------------------------------------

    def next_hops(self) -> set[str]:
        """The nodes (ids) the router's route to SERVICE goes to now; in the vrrp variant the
        node whose MAC the router's ARP entry for SERVICE holds."""
        if self.variant == "vrrp":
            out = self.ip(self.router, "-j", "neigh", "show", SERVICE, "dev", "lan",
                          check=False).stdout
            macs = {e.get("lladdr") for e in json.loads(out or "[]")
                    if e.get("state") and "FAILED" not in e["state"]}
            hops = set()
            for n, node in self.nodes.items():
                link = json.loads(node.ip("-j", "link", "show", "dev", "eth0").stdout)[0]
                if link.get("address") in macs:
                    hops.add(node.id)
            return hops
        out = self.ip(self.router, "-j", "route", "show", f"{SERVICE}/32", check=False).stdout
        hops = set()
        for rt in json.loads(out or "[]"):
            for nh in rt.get("nexthops", [rt]):
                dev = nh.get("dev", "")
                if dev.startswith("n") and dev[1:].isdigit():
                    hops.add(f"n{dev[1:]}")
        return hops

    def wait_next_hops(self, want: set[str], timeout: float = 30) -> None:
        wait_for(f"route to {SERVICE} via {sorted(want)} (now {sorted(self.next_hops())})",
                 lambda: self.next_hops() == want, timeout, 0.05)

    def vrrp_master(self) -> str | None:
        """The node whose lan interface holds SERVICE (keepalived's master), or None."""
        for node in self.nodes.values():
            out = node.ip("-o", "addr", "show", "dev", "eth0").stdout
            if f" {SERVICE}/32" in out:
                return node.id
        return None

    def all_ids(self) -> set[str]:
        return {node.id for node in self.nodes.values()}

    def start_nodes(self, method: str | None = None, cluster: bool | None = None,
                    wait: bool = True) -> None:
        """Every node's speaker and steerd (@cluster, default: when steerd supports it),
        announcing by @method (default interface, keepalived in the vrrp variant); with
        @wait, until the router's route goes to every node (vrrp: until n1 is master)."""
        method = method or ("keepalived" if self.variant == "vrrp" else "interface")
        for node in self.nodes.values():
            node.start_speaker(method)
        for node in self.nodes.values():
            node.start_steerd(cluster=cluster, method=method)
            if not node.cluster:
                node.announce_by_hand(True)
        if wait:
            self.wait_all()

    def wait_all(self, timeout: float = 30) -> None:
        if self.variant == "vrrp":
            # the router learns the master's MAC from the first query (a gratuitous ARP
            # updates an entry, it does not make one)
            wait_for("n1 VRRP master", lambda: self.vrrp_master() == "n1" and fwdlab.answers(
                self.client, SERVICE, WHOAMI, "TXT", timeout=0.3) == "NOERROR" and
                self.next_hops() == {"n1"}, timeout, 0.05)
        else:
            self.wait_next_hops(self.all_ids(), timeout)

    # ---- faults ------------------------------------------------------------------------------

    def fault(self, kind: str, n: int) -> None:
        """Break node n the way @kind says (FAULTS, FAULT_HELP); heal() undoes it."""
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r} (one of {', '.join(FAULTS)})")
        node = self.nodes[n]
        if kind == "kill":
            node.kill_steerd()
        elif kind in ("stop", "monitor-stop"):
            node.sigstop()
        elif kind == "zone":
            node.zone_path.write_text(BAD_ZONE)
            res = node.ctl_rc("reload")
            if res.returncode == 0:
                raise RuntimeError(f"reload of a broken zone succeeded on {node.id}")
        elif kind == "link":
            self.nft(node.ns, f'table inet slab_link {{\n chain in {{ type filter hook input '
                     f'priority 0; iifname "{node.uplink}" drop; }}\n chain out {{ type filter '
                     f'hook output priority 0; oifname "{node.uplink}" drop; }}\n}}\n')
        elif kind == "route":
            node.ip("route", "del", "default")
        elif kind == "drain":
            res = node.ctl_rc("drain", timeout=40)
            if res.returncode != 0:
                raise RuntimeError(f"steerctl drain on {node.id}: {res.stderr or res.stdout}")
            node.stop_steerd()
        self.active.append((kind, n))

    def heal(self, n: int | None = None) -> None:
        """Undo the faults applied to node @n (default: all), newest first."""
        for kind, k in list(reversed(self.active)):
            if n is not None and k != n:
                continue
            self.active.remove((kind, k))
            node = self.nodes[k]
            if kind in ("kill", "drain"):
                if node.steerd and node.steerd.alive():
                    node.stop_steerd()
                node.start_steerd()
                if not node.cluster:
                    node.announce_by_hand(True)
            elif kind in ("stop", "monitor-stop"):
                node.sigcont()
            elif kind == "zone":
                node.zone_path.write_text(zone_text(node.id, serial=int(time.time()) % 100000))
                res = node.ctl_rc("reload")
                if res.returncode != 0:
                    raise RuntimeError(f"reload on {node.id}: {res.stderr or res.stdout}")
            elif kind == "link":
                self.nft(node.ns, "delete table inet slab_link\n")
            elif kind == "route":
                node.ip("route", "replace", "default", "via", node.gateway)
            if kind == "monitor-stop" and self.monitor:
                self.monitor.resume()

    # ---- the anchor: an external monitor -----------------------------------------------------

    def start_monitor(self, n: int, **kw) -> "Monitor":
        """The anchor's external monitor on node n (steerd without a cluster section and
        BIRD with the static protocol vip)."""
        if self.monitor:
            self.monitor.stop()
        self.monitor = Monitor(self.nodes[n], **kw)
        self.monitor.start()
        return self.monitor


class Monitor:
    """The anchor: what operators run without Steer's cluster support. A query to the
    service address every @interval s from the node's unicast address (timeout: the
    interval); after @fall failures in a row `birdc disable vip`. Withdrawn, it waits for
    resume() (the operator, or the lab's heal) before it enables vip again."""

    def __init__(self, node: Node, interval: float = 0.2, fall: int = 3):
        self.node = node
        self.interval = interval
        self.fall = fall
        self.withdrawn_at: float | None = None  # time.monotonic() of the disable
        self._stop = threading.Event()
        self._resume = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._resume.set()
        if self._thread:
            self._thread.join()
            self._thread = None

    def resume(self) -> None:
        self._resume.set()

    def _run(self) -> None:
        failures = 0
        nxt = time.monotonic()
        while not self._stop.is_set():
            ok = fwdlab.answers(self.node.ns, SERVICE, WHOAMI, "TXT", source=self.node.addr,
                                timeout=self.interval) == "NOERROR"
            failures = 0 if ok else failures + 1
            if failures >= self.fall:
                self.node.birdc("disable", "vip", check=False)
                self.withdrawn_at = time.monotonic()
                self._resume.wait()
                self._resume.clear()
                if self._stop.is_set():
                    return
                self.node.birdc("enable", "vip", check=False)
                failures = 0
            nxt += self.interval
            self._stop.wait(max(0.0, nxt - time.monotonic()))
            nxt = max(nxt, time.monotonic() - self.interval)


def lab_for_tests(tmp_path_factory, variant: str = "bgp", speaker: str = "bird"):
    """A built lab for a module-scoped pytest fixture (`yield from` it): skipped without root
    or when a routing daemon the variant needs is not installed, closed (namespaces removed)
    at the end."""
    import pytest
    if os.geteuid() != 0:
        pytest.skip("the cluster lab needs root (network namespaces)")
    missing = missing_tools(variant, speaker)
    if missing:
        pytest.skip(f"missing {', '.join(missing)} (scripts/setup-deps.sh test installs them)")
    lab = Lab(variant, speaker, workdir=tmp_path_factory.mktemp(f"clusterlab-{variant}"))
    try:
        lab.build()
        yield lab
    finally:
        lab.close()


# ---- scenarios (shared by tests/integration/test_cluster_lab.py and bench/cluster/) ----------

CLUSTERLOAD = Path(__file__).resolve().parent / "clusterload.py"
# What each scenario measures on its node: how it leaves, and (after the heal) how it comes
# back. "spread" has no fault: the load alone.
SCENARIOS = ("spread", "kill", "stop", "zone", "link", "route", "drain", "monitor-stop")


def identity_of(lab: Lab) -> str:
    """The client's question: id.server CH TXT when every steerd runs as a cluster node (it
    answers its node id), else the zone's node TXT."""
    return "chaos" if all(nd.cluster for nd in lab.nodes.values()) else "zone"


def scenario(lab: Lab, kind: str, n: int = 1, *, rate: float = 1000, fault_at: float = 1.5,
             hold: float = 2.0, rejoin: float = 4.0, sockets: int = 128,
             keep: Path | None = None, during=None) -> dict:
    """One trial: the client load at @rate q/s from @sockets source ports; @kind applied to
    node @n @fault_at s into the run (lab.fault(); a drain blocks until drained and
    stopped); healed @hold s later (or when the fault call returned, if later); the load goes
    on @rejoin s after the heal so the node's return is seen. Returns clusterload.analyse()'s
    figures for node @n plus t_fault, t_fault_done, t_heal, t_healed (s into the run) and the
    scenario; @keep: a folder for the load's records (else removed); @during(lab, node),
    called while the fault lasts (after @hold / 2), returns what goes into the result as
    "during_check" (steerctl's view of the node, say)."""
    node = lab.nodes[n]
    duration = fault_at + hold + rejoin
    if kind == "spread":
        duration = fault_at + hold
    out = (keep or lab.dir) / f"load-{kind}-{n}-{time.time_ns()}.json"
    start = time.monotonic() + 0.3
    load = subprocess.Popen([sys.executable, str(CLUSTERLOAD), "--netns", lab.client,
                             "--rate", str(rate), "--duration", str(duration), "--sockets",
                             str(sockets), "--identity", identity_of(lab), "--start-at",
                             repr(start), "--out", str(out)])
    t_fault = t_fault_done = t_heal = t_healed = checked = None
    try:
        time.sleep(max(0.0, start + fault_at - time.monotonic()))
        if kind != "spread":
            t_fault = time.monotonic() - start
            lab.fault(kind, n)
            t_fault_done = time.monotonic() - start
            if during is not None:
                time.sleep(max(0.0, start + t_fault + hold / 2 - time.monotonic()))
                checked = during(lab, node)
            time.sleep(max(0.0, start + t_fault + hold - time.monotonic()))
            t_heal = time.monotonic() - start
            lab.heal(n)
            t_healed = time.monotonic() - start
            # a heal that took long (a restart) still gets its @rejoin seconds of load
            if t_healed + rejoin > duration + 0.5:
                raise RuntimeError(f"heal of {kind} on {node.id} took {t_healed - t_heal:.1f} s")
        if load.wait(timeout=duration + 30) != 0:
            raise RuntimeError("clusterload failed")
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()
        if lab.active:
            lab.heal(n)
    records = json.loads(out.read_text())["records"]
    if keep is None:
        out.unlink()
    if kind == "spread":
        m = clusterload.analyse(records, node.id, duration + 1, None)
    else:
        m = clusterload.analyse(records, node.id, t_fault, t_heal)
    m.update(scenario=kind, node=node.id, rate=rate, t_fault=t_fault,
             t_fault_done=t_fault_done, t_heal=t_heal, t_healed=t_healed,
             during_check=checked)
    return m


def restart_node(lab: Lab, n: int, method: str, cluster: bool | None = None) -> None:
    """Node @n's speaker and steerd again, announcing by @method; returns once the router's
    route goes to every node again."""
    node = lab.nodes[n]
    if lab.monitor and lab.monitor.node is node:
        lab.monitor.stop()
        lab.monitor = None
    node.stop_steerd()
    node.stop_speaker()
    if lab.variant != "vrrp":
        # The router may hold the node's old routes for a moment (OSPF: until the dead
        # interval or BFD): waiting for all next hops right away could see those.
        wait_for(f"{node.id} gone from the route", lambda: node.id not in lab.next_hops(), 30,
                 0.05)
    node.start_speaker(method)
    node.start_steerd(cluster=cluster, method=method)
    if not node.cluster:
        node.announce_by_hand(True)
    lab.wait_all()


def anchor(lab: Lab, n: int = 1) -> None:
    """Node @n as the anchor: steerd without a cluster section, BIRD with the static protocol
    vip, and the external monitor driving it (the monitor-stop scenario)."""
    restart_node(lab, n, "bird", cluster=False)
    lab.start_monitor(n)
