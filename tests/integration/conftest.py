"""Fixtures and helpers for the steerd integration tests (pytest + dnspython, Debian packages).

Every test starts its own steerd on loopback with random free ports, zones and config written
to the test's tmp_path and its own control socket, and stops it at teardown: SIGTERM, exit
status 0 and no sanitizer report in its stderr, or the test fails.

    def test_something(steerd):
        srv = steerd(zones={"example.test": "example.test.zone"})   # quick mode
        r = srv.udp(query("www.example.test", "A"))
        zones = srv.ctl_json("zones")

Fixtures: `steerd` (a factory, one folder per test) and `module_launcher` (the same factory
shared by a module's tests, for read-only protocol tests). Zone files named like
"example.test.zone" come from tests/data/zones/integration/.

Binaries: $STEERD (default build/src/daemon/steerd) and $STEERCTL (default build/tools/steerctl).
`make test` runs this suite twice, against the ASan+UBSan build and the normal build.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ZONES_DIR = ROOT / "tests" / "data" / "zones" / "integration"
# Absolute, because daemons run with their test folder as working directory.
STEERD = os.path.abspath(os.environ.get("STEERD") or ROOT / "build" / "src" / "daemon" / "steerd")
STEERCTL = os.path.abspath(os.environ.get("STEERCTL") or ROOT / "build" / "tools" / "steerctl")
# tests/health/probe_run (probes from the command line): $STEER_PROBE_RUN, else the build that
# holds $STEERD, so the sanitizer stage of `make test` runs the sanitized probes too.
PROBE_RUN = os.path.abspath(os.environ.get("STEER_PROBE_RUN")
                            or Path(STEERD).resolve().parents[2] / "tests" / "probe_run")



def sanitized(binary: str) -> bool:
    """@binary was built with AddressSanitizer."""
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    if "libasan" in ldd:
        return True
    try:
        with open(binary, "rb") as f:
            return b"__asan_init" in f.read()
    except FileNotFoundError:
        return False


# The steerd under test is a sanitized build (`make test`'s first pytest run).
SANITIZED = sanitized(STEERD)


def pytest_collection_modifyitems(config, items):
    """A sanitized run leaves the `timing` scenarios to the normal build's run."""
    if not SANITIZED:
        return
    skip = pytest.mark.skip(reason="a timing scenario: the normal build runs it (a sanitized "
                            "steerd's figures measure the sanitizer, not the failover)")
    for item in items:
        if item.get_closest_marker("timing") is not None:
            item.add_marker(skip)


# Seconds; sanitized builds start and answer several times slower than normal ones.
START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0
QUERY_TIMEOUT = 3.0

# Lines any of the sanitizers print when they find something.
SANITIZER_MARKERS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "WARNING: AddressSanitizer",
    "runtime error:",
    "UndefinedBehaviorSanitizer",
    "ThreadSanitizer",
    "MemorySanitizer",
)


# --------------------------------------------------------------------------------------------
# Ports and small helpers

_used_ports: set[int] = set()


def port_is_free(port: int) -> bool:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(family, kind)
            try:
                s.bind((host, port))
            except OSError:
                return False
            finally:
                s.close()
    return True


def free_port() -> int:
    """A port free for UDP and TCP on 127.0.0.1 and ::1, below the ephemeral range (32768+)
    so client sockets of parallel tests cannot take it in the meantime."""
    for _ in range(1000):
        port = random.randint(10000, 32000)
        if port not in _used_ports and port_is_free(port):
            _used_ports.add(port)
            return port
    raise RuntimeError("no free port found")


def query(name: str, rdtype: str | int = "A", *, edns: int | bool = False, payload: int = 1232,
          options=None, want_dnssec: bool = False, qid: int | None = None) -> dns.message.Message:
    """A query message. edns=False: no OPT; edns=0/True: EDNS version 0; edns=N: version N."""
    if edns is False:
        q = dns.message.make_query(name, rdtype, use_edns=False)
    else:
        version = 0 if edns is True else int(edns)
        # make_query() of dnspython 2.3 always builds version 0, so set the OPT afterwards.
        q = dns.message.make_query(name, rdtype, use_edns=False)
        q.use_edns(version, dns.flags.DO if want_dnssec else 0, payload, options=options or [])
    if qid is not None:
        q.id = qid
    return q


def rrset_texts(section) -> set[str]:
    """An answer section as a set of "owner ttl class type rdata" lines, for comparisons."""
    out = set()
    for rrset in section:
        for line in rrset.to_text().splitlines():
            out.add(line)
    return out


def find_rrset(section, name: str, rdtype: str):
    want = dns.name.from_text(name)
    t = dns.rdatatype.from_text(rdtype)
    for rrset in section:
        if rrset.name == want and rrset.rdtype == t:
            return rrset
    return None


def tcp_frame(wire: bytes) -> bytes:
    return struct.pack("!H", len(wire)) + wire


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """n bytes from a stream socket; fewer only when the peer closed."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def tcp_read_message(sock: socket.socket) -> bytes | None:
    """One length-prefixed DNS message, or None when the connection was closed."""
    head = recv_exact(sock, 2)
    if len(head) < 2:
        return None
    (length,) = struct.unpack("!H", head)
    body = recv_exact(sock, length)
    if len(body) < length:
        return None
    return body


def wait_for(predicate, timeout: float, interval: float = 0.05, what: str = "condition"):
    """Poll predicate() until it returns a true value; return it, or fail after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def zone_source(src: str | Path) -> str:
    """Zone text from a file name in tests/data/zones/integration, a Path, or literal text."""
    if isinstance(src, Path):
        return src.read_text()
    if "\n" not in src and (ZONES_DIR / src).is_file():
        return (ZONES_DIR / src).read_text()
    return src


def addr_family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def fmt_addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# --------------------------------------------------------------------------------------------
# The daemon

class Steerd:
    """One steerd process. Queries go to the first listen address unless told otherwise."""

    def __init__(self, workdir: Path, argv: list[str], listen: list[tuple[str, int]],
                 ctl_socket: Path, ready_zone: str | None, prefix: list[str] | None = None):
        self.workdir = workdir
        self.argv = argv
        self.listen = listen
        self.host, self.port = listen[0] if listen else ("127.0.0.1", 0)
        # Queries to a wildcard listener go to loopback.
        self.host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        self.ctl_socket = ctl_socket
        self.ready_zone = ready_zone
        self.prefix = prefix or []
        self.log_path = workdir / f"steerd-{ctl_socket.stem}.log"
        self.proc: subprocess.Popen | None = None
        self.returncode: int | None = None
        self.expect_exit: int | None = 0  # what stop() requires; None: don't check

    # -- lifecycle -----------------------------------------------------------------------

    def start(self, wait: bool = True) -> "Steerd":
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.prefix + self.argv, stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=self.workdir)
        if wait:
            self.wait_ready()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _answers(self) -> bool:
        q = query(self.ready_zone or ".", "SOA")
        try:
            r = dns.query.udp(q, self.host, port=self.port, timeout=0.2)
        except (dns.exception.Timeout, OSError):
            return False
        return r.rcode() == dns.rcode.NOERROR if self.ready_zone else True

    def wait_ready(self, timeout: float = START_TIMEOUT):
        """Until the first zone's SOA is answered over UDP, TCP accepts and the control socket
        exists. Fails with the daemon's log if it exits first."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                self.returncode = self.proc.wait()
                pytest.fail(f"steerd exited with {self.returncode} during start-up:\n{self.log()}")
            if self._answers() and self._tcp_accepts() and self.ctl_socket.exists():
                return
            if time.monotonic() > deadline:
                pytest.fail(f"steerd not ready after {timeout}s:\n{self.log()}")
            time.sleep(0.05)

    def _tcp_accepts(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def wait_exit(self, timeout: float = STOP_TIMEOUT) -> int:
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"steerd did not exit within {timeout}s:\n{self.log()}")
        self._log.close()
        return self.returncode

    def send_signal(self, sig: int):
        self.proc.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop the daemon and return its exit status (idempotent)."""
        if self.proc is None:
            return 0
        if self.returncode is None:
            if self.alive():
                self.proc.send_signal(sig)
            self.wait_exit()
        return self.returncode

    def problems(self) -> list[str]:
        """After stop(): what went wrong at shutdown (bad exit status, sanitizer reports)."""
        out = []
        log = self.log()
        if self.expect_exit is not None and self.returncode != self.expect_exit:
            out.append(f"steerd exited with {self.returncode}, expected {self.expect_exit}")
        for marker in SANITIZER_MARKERS:
            if marker in log:
                out.append(f"sanitizer report in steerd's output ({marker!r})")
                break
        if out:
            out.append("steerd output:\n" + log[-20000:])
        return out

    # -- DNS -----------------------------------------------------------------------------

    def udp(self, q: dns.message.Message, host: str | None = None, port: int | None = None,
            timeout: float = QUERY_TIMEOUT) -> dns.message.Message:
        return dns.query.udp(q, host or self.host, port=port or self.port, timeout=timeout,
                             raise_on_truncation=False)

    def tcp(self, q: dns.message.Message, host: str | None = None, port: int | None = None,
            timeout: float = QUERY_TIMEOUT) -> dns.message.Message:
        return dns.query.tcp(q, host or self.host, port=port or self.port, timeout=timeout)

    def udp_raw(self, wire: bytes, host: str | None = None, port: int | None = None,
                timeout: float = QUERY_TIMEOUT) -> bytes | None:
        """Send raw bytes, return the raw reply or None when none came within timeout."""
        host = host or self.host
        with socket.socket(addr_family(host), socket.SOCK_DGRAM) as s:
            s.settimeout(timeout)
            s.connect((host, port or self.port))
            s.send(wire)
            try:
                return s.recv(65535)
            except socket.timeout:
                return None

    def tcp_connect(self, host: str | None = None, port: int | None = None,
                    timeout: float = QUERY_TIMEOUT) -> socket.socket:
        s = socket.create_connection((host or self.host, port or self.port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def serial(self, zone: str, proto: str = "udp") -> int:
        q = query(zone, "SOA")
        r = self.udp(q) if proto == "udp" else self.tcp(q)
        assert r.rcode() == dns.rcode.NOERROR, r
        return r.answer[0][0].serial

    # -- control socket ------------------------------------------------------------------

    def ctl(self, *args: str, json_out: bool = False, timeout: float = 30.0
            ) -> subprocess.CompletedProcess:
        """Run steerctl against this daemon; returns the CompletedProcess (text mode)."""
        argv = [STEERCTL, "-s", str(self.ctl_socket)]
        if json_out:
            argv.append("--json")
        argv += list(args)
        res = subprocess.run(self.prefix + argv, capture_output=True, text=True,
                             timeout=timeout)
        assert_no_sanitizer_report(res.stdout + res.stderr)
        return res

    def ctl_raw(self, request: bytes, timeout: float = 10.0) -> dict:
        """Send @request (one line, as written) on the control socket, bypassing steerctl's
        own checks; returns the decoded reply line."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(self.ctl_socket))
            s.sendall(request)
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return json.loads(buf)

    def ctl_json(self, *args: str):
        """steerctl --json CMD: checks exit 0 and {"ok": true}, returns the "data" member."""
        res = self.ctl(*args, json_out=True)
        assert res.returncode == 0, f"steerctl {args} exited {res.returncode}: " \
                                    f"{res.stdout}{res.stderr}"
        reply = json.loads(res.stdout)
        assert reply.get("ok") is True, reply
        return reply.get("data")


def write_zones(workdir: Path, zones: dict[str, str | Path]) -> dict[str, Path]:
    """Write each zone to workdir/NAME.zone; returns NAME -> path."""
    paths = {}
    for name, src in zones.items():
        path = workdir / f"{name.rstrip('.')}.zone"
        path.write_text(zone_source(src))
        paths[name] = path
    return paths


def _listen_list(listen) -> list[tuple[str, int]]:
    if listen is None:
        return [("127.0.0.1", free_port())]
    out = []
    for item in listen:
        if isinstance(item, tuple):
            out.append(item)
        else:
            out.append((item, free_port()))
    return out


def with_test_storage(text: str, storage: Path) -> str:
    """@text (a config) with server.storage set to @storage when it sets none, so no test
    daemon reads, writes or removes anything in the machine's /var/lib/steer (secondary zones,
    IXFR journals). One line is inserted after "server:" (a "server:" section is appended
    when there is none); text that is not YAML, or a flow-style server section, is returned
    as it is, for the tests of bad configs."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if not isinstance(doc, dict):
        return text
    server = doc.get("server")
    if isinstance(server, dict) and "storage" in server:
        return text
    line = f"storage: {json.dumps(str(storage))}"
    if "server" not in doc:
        return text + ("" if text.endswith("\n") or not text else "\n") + f"server:\n  {line}\n"
    lines = text.split("\n")
    heads = [i for i, x in enumerate(lines) if x.split("#")[0].rstrip() == "server:"]
    if len(heads) != 1:
        return text
    head = heads[0]
    indent = "  "
    for x in lines[head + 1:]:
        if x.strip() and not x.lstrip().startswith("#"):
            if x[0] in " \t":
                indent = x[:len(x) - len(x.lstrip())]
            break
    lines.insert(head + 1, indent + line)
    return "\n".join(lines)


class Launcher:
    """Starts daemons in one folder and checks each one's shutdown at the end."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.started: list[Steerd] = []

    def __call__(self, zones: dict | None = None, listen=None, config: str | None = None,
                 args: list[str] | tuple = (), ready: bool = True, prefix=None,
                 ready_zone: str | None = None) -> Steerd:
        """Start a daemon; see the steerd fixture for the arguments."""
        workdir = self.workdir
        zones = zones or {}
        paths = write_zones(workdir, zones)
        addrs = _listen_list(listen)
        n = len(self.started)
        ctl = workdir / f"ctl{n}.sock"
        conf_path = None
        if config is None:
            argv = [STEERD, "--control-socket", str(ctl)]
            for host, port in addrs:
                argv += ["--listen", fmt_addr(host, port)]
            for name, path in paths.items():
                argv += ["--zone", f"{name}={path}"]
        else:
            listen_yaml = "[" + ", ".join(f'"{fmt_addr(h, p)}"' for h, p in addrs) + "]"
            zones_yaml = "zones:\n" + "".join(
                f"  - domain: {name}\n    file: {path}\n" for name, path in paths.items())
            text = config.format(listen=listen_yaml, ctl=ctl, dir=workdir, zones=zones_yaml)
            text = with_test_storage(text, workdir / "storage")
            conf_path = workdir / f"steer{n}.yaml"
            conf_path.write_text(text)
            argv = [STEERD, "-c", str(conf_path)]
        argv += list(args)
        if ready_zone is None and zones:
            ready_zone = next(iter(zones))
        srv = Steerd(workdir, argv, addrs, ctl, ready_zone, prefix)
        srv.config_path = conf_path
        srv.zone_paths = paths
        self.started.append(srv)
        srv.start(wait=ready)
        return srv

    def finish(self):
        problems = []
        for srv in self.started:
            srv.stop()
            problems += srv.problems()
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def steerd(tmp_path):
    """Factory: steerd(zones=..., ...) starts a daemon and returns a Steerd.

    zones:   {"example.test": "example.test.zone" | zone text | Path}; written to tmp_path.
    listen:  hosts ("127.0.0.1", "::1") or (host, port) tuples; default one random 127.0.0.1.
    config:  YAML text: start in config mode (-c). Placeholders {listen}, {ctl}, {dir} and
             {zones} (a ready "zones:" section for the zones above) are filled in; literal
             braces must be doubled. Without a server.storage, it gets tmp_path/storage.
    args:    extra command-line arguments.
    ready:   wait until it answers (default); False returns at once.
    prefix:  command prefix, e.g. ["ip", "netns", "exec", NS].
    At teardown every daemon gets SIGTERM and must exit 0 without a sanitizer report.
    """
    launcher = Launcher(tmp_path)
    yield launcher
    launcher.finish()


@pytest.fixture(scope="module")
def module_launcher(tmp_path_factory):
    """Like steerd, but shared by the tests of one module (read-only protocol tests)."""
    launcher = Launcher(tmp_path_factory.mktemp("steerd"))
    yield launcher
    launcher.finish()


# The server part of a config-mode test: the steerd fixture fills in the placeholders, one
# UDP and one TCP worker keep the daemon small.
SERVER_CONFIG = """server:
  listen: {listen}
  control-socket: {ctl}
  workers: 1
  tcp-workers: 1
{zones}"""


def server_config(text: str) -> str:
    """SERVER_CONFIG followed by @text (YAML with literal braces, escaped for the fixture)."""
    return SERVER_CONFIG + text.replace("{", "{{").replace("}", "}}")


def run_steerd(*args: str, timeout: float = 30.0, cwd=None) -> subprocess.CompletedProcess:
    """Run steerd to completion (--check-config, --config-reference, start-up errors). Fails
    the test on a sanitizer report, whatever the exit status: error paths must not leak."""
    res = subprocess.run([STEERD, *args], capture_output=True, text=True, timeout=timeout,
                         cwd=cwd)
    assert_no_sanitizer_report(res.stdout + res.stderr)
    return res


def assert_no_sanitizer_report(text: str):
    for marker in SANITIZER_MARKERS:
        assert marker not in text, f"sanitizer report:\n{text}"

