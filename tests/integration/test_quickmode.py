"""Quick mode (zones on the command line), start-up checks of zone files, and the process
lifecycle: clean exit on SIGTERM/SIGINT."""

import json
import re
import signal
import socket
import threading
import time
import urllib.error
import urllib.request

import dns.flags
import dns.rcode
import pytest

from conftest import free_port, query, run_steerd, tcp_frame

SUB_ZONE = """$ORIGIN sub.example.test.
$TTL 300
@       SOA ns1 hostmaster 42 7200 3600 1209600 60
        NS  ns1
ns1     A   192.0.2.53
www     A   192.0.2.153
"""


def test_udp_and_tcp_over_ipv4_and_ipv6(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"}, listen=["127.0.0.1", "::1"])
    for host, port in srv.listen:
        for send in (srv.udp, srv.tcp):
            r = send(query("www.example.test", "A"), host=host, port=port)
            assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
            assert r.answer[0][0].address == "192.0.2.10", f"{send.__name__} {host}"


def test_ipv6_only(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"}, listen=["::1"])
    assert srv.host == "::1"
    assert srv.udp(query("www.example.test", "AAAA")).answer[0][0].address == "2001:db8::10"
    with pytest.raises(Exception):
        srv.udp(query("www.example.test", "A"), host="127.0.0.1", timeout=0.5)


def test_several_listen_addresses_same_family(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"},
                 listen=["127.0.0.1", "127.0.0.1"])
    for host, port in srv.listen:
        assert srv.udp(query("www.example.test"), host=host, port=port).answer


def test_multiple_zones(steerd):
    srv = steerd(zones={"example.test": "example.test.zone", "types.test": "types.test.zone",
                        "negttl.test": "negttl.test.zone"})
    assert srv.serial("example.test") == 2024010101
    assert srv.serial("types.test") == 2024020202
    assert srv.serial("negttl.test") == 1
    assert srv.udp(query("a.types.test", "A")).rcode() == dns.rcode.NOERROR
    assert srv.udp(query("www.other.test", "A")).rcode() == dns.rcode.REFUSED


@pytest.mark.parametrize("child_first", [False, True])
def test_parent_and_child_zone(steerd, child_first):
    zones = {"example.test": "example.test.zone", "sub.example.test": SUB_ZONE}
    if child_first:
        zones = dict(reversed(list(zones.items())))
    srv = steerd(zones=zones)
    r = srv.udp(query("www.sub.example.test", "A"))
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    assert r.answer[0][0].address == "192.0.2.153"
    r = srv.udp(query("nothere.sub.example.test", "A"))
    assert r.rcode() == dns.rcode.NXDOMAIN and r.authority[0][0].serial == 42
    r = srv.udp(query("sub.example.test", "SOA"))
    assert r.flags & dns.flags.AA and r.answer[0][0].serial == 42
    r = srv.udp(query("www.example.test", "A"))
    assert r.answer[0][0].address == "192.0.2.10"


@pytest.mark.parametrize("workers", ["1", "3"])
def test_workers(steerd, workers):
    srv = steerd(zones={"example.test": "example.test.zone"},
                 args=["--workers", workers, "--tcp-workers", "1"])
    for i in range(200):
        assert srv.udp(query(f"h{i}.wild.example.test", "A")).answer
    assert srv.tcp(query("www.example.test", "A")).answer


# --- start-up errors ------------------------------------------------------------------------

def start_fails(tmp_path, zone_text, name="example.test"):
    """Run steerd with one zone that must be refused; return its combined output."""
    path = tmp_path / "bad.zone"
    path.write_text(zone_text)
    res = run_steerd("--listen", f"127.0.0.1:{free_port()}", "--zone", f"{name}={path}",
                     "--control-socket", str(tmp_path / "ctl.sock"))
    out = res.stdout + res.stderr
    assert res.returncode != 0, f"steerd accepted a bad zone:\n{out}"
    assert "AddressSanitizer" not in out and "runtime error" not in out, out
    return path, out


GOOD_HEAD = """$ORIGIN example.test.
$TTL 3600
@   SOA ns1 hostmaster 1 7200 3600 1209600 300
    NS  ns1
ns1 A   192.0.2.1
"""


def test_http_in_quick_mode(steerd):
    """--http serves the status page, /metrics and the read-only API; with no token file
    there is no way to change anything over HTTP."""
    port = free_port()
    srv = steerd(zones={"example.test": "example.test.zone"},
                 args=["--http", f"127.0.0.1:{port}", "--http", f"[::1]:{port}"])
    srv.udp(query("www.example.test", "A"))
    base = f"http://127.0.0.1:{port}"
    with urllib.request.urlopen(base + "/", timeout=5) as r:
        assert r.status == 200 and "text/html" in r.headers["Content-Type"]
    with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
        text = r.read().decode()
    assert re.search(r'^steer_queries_total\{transport="udp",family="ipv4"\} [1-9]', text, re.M)
    with urllib.request.urlopen(f"http://[::1]:{port}/api/v1/zones", timeout=5) as r:
        zones = json.load(r)["data"]
    assert [z["name"] for z in zones] == ["example.test"], zones
    req = urllib.request.Request(base + "/api/v1/reload", method="POST", data=b"")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 403


@pytest.mark.parametrize("arg, message", [
    ("127.0.0.1", "--http 127.0.0.1: '127.0.0.1' needs a port"),
    ("localhost:80", "--http localhost:80: invalid address 'localhost:80'"),
])
def test_http_quick_mode_errors(arg, message):
    res = run_steerd("--zone", "example.test=x.zone", "--http", arg, "--check-config")
    assert res.returncode == 1 and message in res.stderr, res.stderr


def test_zone_syntax_error_has_file_and_line(tmp_path):
    path, out = start_fails(tmp_path, GOOD_HEAD + "www A 192.0.2.300\n")
    assert f"{path}:6" in out, f"want '{path}:6' in:\n{out}"


def test_missing_zone_file(tmp_path):
    res = run_steerd("--listen", f"127.0.0.1:{free_port()}",
                     "--zone", f"example.test={tmp_path}/nonexistent.zone",
                     "--control-socket", str(tmp_path / "ctl.sock"))
    assert res.returncode != 0
    assert "nonexistent.zone" in res.stderr + res.stdout


def test_zone_without_soa(tmp_path):
    _, out = start_fails(tmp_path, "$ORIGIN example.test.\nwww 3600 A 192.0.2.1\n")
    assert "SOA" in out


def test_cname_and_other_data(tmp_path):
    _, out = start_fails(tmp_path, GOOD_HEAD + "www CNAME ns1\nwww A 192.0.2.9\n")
    assert "CNAME" in out


def test_out_of_zone_data_ignored_with_warning(steerd, tmp_path):
    zone = GOOD_HEAD + "www A 192.0.2.10\nwww.elsewhere.test. A 192.0.2.66\n"
    srv = steerd(zones={"example.test": zone})
    assert re.search(r"elsewhere\.test", srv.log()), f"no warning in:\n{srv.log()}"
    assert srv.udp(query("www.example.test", "A")).answer
    assert srv.udp(query("www.elsewhere.test", "A")).rcode() == dns.rcode.REFUSED


@pytest.mark.parametrize("args", [
    ["--zone", "example.test"],                      # no '=FILE'
    ["--listen", "not-an-address"],
    ["--listen", "127.0.0.1:99999"],
    ["--no-such-option"],
    ["--workers", "lots"],
])
def test_bad_command_line(tmp_path, args):
    zone = tmp_path / "z.zone"
    zone.write_text(GOOD_HEAD)
    base = ["--listen", f"127.0.0.1:{free_port()}", "--zone", f"example.test={zone}",
            "--control-socket", str(tmp_path / "ctl.sock")]
    res = run_steerd(*(base + args), timeout=10)
    assert res.returncode != 0
    assert res.stderr.strip(), "an error message is expected"


def test_no_zones(tmp_path):
    res = run_steerd("--listen", f"127.0.0.1:{free_port()}", timeout=10)
    assert res.returncode != 0 and res.stderr.strip()


def test_port_in_use(tmp_path):
    blocker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    blocker.bind(("127.0.0.1", 0))
    port = blocker.getsockname()[1]
    try:
        zone = tmp_path / "z.zone"
        zone.write_text(GOOD_HEAD)
        res = run_steerd("--listen", f"127.0.0.1:{port}", "--zone", f"example.test={zone}",
                         "--control-socket", str(tmp_path / "ctl.sock"), timeout=10)
        assert res.returncode != 0
        assert str(port) in res.stderr + res.stdout
    finally:
        blocker.close()


# --- shutdown -------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_clean_exit_on_signal(steerd, sig):
    srv = steerd(zones={"example.test": "example.test.zone"})
    t0 = time.monotonic()
    assert srv.stop(sig) == 0, srv.log()
    assert time.monotonic() - t0 < 5.0
    assert not srv.ctl_socket.exists(), "the control socket is removed at exit"


def test_clean_exit_with_open_connections_and_load(steerd):
    srv = steerd(zones={"example.test": "example.test.zone"})
    idle = srv.tcp_connect()
    partial = srv.tcp_connect()
    partial.sendall(tcp_frame(query("www.example.test").to_wire())[:5])
    stop = threading.Event()

    def load():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            wire = query("www.example.test").to_wire()
            while not stop.is_set():
                try:
                    s.sendto(wire, (srv.host, srv.port))
                except OSError:
                    pass
                time.sleep(0.0005)

    t = threading.Thread(target=load)
    t.start()
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        assert srv.stop() == 0, srv.log()
        assert time.monotonic() - t0 < 5.0
    finally:
        stop.set()
        t.join()
        idle.close()
        partial.close()

