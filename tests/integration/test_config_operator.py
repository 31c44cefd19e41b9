"""The configuration as an operator writes it: durations with units in every duration key
(same behaviour as the bare numbers they replace), list-form service datacenters whose order
survives a YAML tool re-sorting keys, `name:` on zones, and errors that point at the line and
suggest the key that was meant."""

import socket
import threading
import time

import dns.message
import pytest
import yaml

from conftest import SERVER_CONFIG as SERVER, server_config as config, find_rrset, free_port, run_steerd, wait_for

ZONE = "op.example.test"
ZONE_TEXT = f"""$ORIGIN {ZONE}.
$TTL 3600
@   SOA ns1 hostmaster 1 7200 3600 1209600 300
    NS  ns1
ns1 A   192.0.2.53
"""


def start(steerd, text: str):
    return steerd(zones={ZONE: ZONE_TEXT}, config=config(text))


def check_config(tmp_path, text: str):
    (tmp_path / "z.zone").write_text(ZONE_TEXT)
    path = tmp_path / "steer.yaml"
    path.write_text(f"zones:\n  - domain: {ZONE}\n    file: z.zone\n" + text)
    return run_steerd("-c", str(path), "--check-config")


def a_answer(srv, name):
    resp = srv.udp(dns.message.make_query(name, "A"))
    rr = find_rrset(resp.answer, name, "A")
    return (sorted(r.address for r in rr) if rr else []), (rr.ttl if rr else None)


# ---- durations ---------------------------------------------------------------------------

GSLB_TAIL = f"""datacenters:
  - name: dc1
services:
  - name: www.{ZONE}
    monitor: m
    datacenters:
      - {{ name: dc1, addresses: [192.0.2.1] }}
"""

# Every duration key, written with a unit and as the bare number it stands for.
DURATIONS = [
    ("server", "tcp-idle-timeout", "1m30s", "90000"),
    ("server", "tcp-io-timeout", "3s", "3000"),
    ("monitors", "interval", "1500ms", "1500"),
    ("monitors", "timeout", "500ms", "500"),
    ("monitors", "hold-down", "1h", "3600000"),
    ("monitors", "slow-start", "2m", "120000"),
    ("monitors", "ttl-floor", "1m", "60"),
    ("services", "ttl", "1d", "86400"),
]


def duration_config(section, key, value):
    server = f"server:\n  {key}: {value}\n" if section == "server" else ""
    mon = f"    {key}: {value}\n" if section == "monitors" else ""
    svc = f"    ttl: {value}\n" if section == "services" else ""
    return (server + "monitors:\n  m:\n    type: static\n" + mon +
            GSLB_TAIL.replace("    monitor: m\n", "    monitor: m\n" + svc))


@pytest.mark.parametrize("section,key,unit,bare", DURATIONS,
                         ids=[f"{s}.{k}" for s, k, _, _ in DURATIONS])
def test_duration_units_accepted(tmp_path, section, key, unit, bare):
    for value in (unit, bare):
        res = check_config(tmp_path, duration_config(section, key, value))
        assert res.returncode == 0, f"{key}: {value}: {res.stdout}{res.stderr}"


@pytest.mark.parametrize("section,key,value,message", [
    ("monitors", "interval", "50ms", "monitors.interval: 50ms is below the minimum 100ms"),
    ("monitors", "interval", "50", "monitors.interval: 50ms is below the minimum 100ms"),
    ("server", "tcp-idle-timeout", "2h", "server.tcp-idle-timeout: 2h is above the maximum 1h"),
    ("services", "ttl", "1500ms", "services.ttl: 1500ms is not a whole number of seconds"),
    ("monitors", "ttl-floor", "5 s", "monitors.ttl-floor: expected a duration such as 500ms"),
])
def test_duration_errors(tmp_path, section, key, value, message):
    res = check_config(tmp_path, duration_config(section, key, value))
    assert res.returncode == 1 and message in res.stderr, res.stderr


def test_timeout_below_interval_names_units(tmp_path):
    res = check_config(tmp_path, "monitors:\n  m: { type: static, interval: 1s, timeout: 1s }\n")
    assert res.returncode == 1
    assert "steer.yaml:5: monitors.m: timeout 1s must be less than interval 1s" in res.stderr


def test_service_ttl_units(steerd):
    srv = start(steerd, f"""datacenters:
  - name: dc1
services:
  - name: a.{ZONE}
    ttl: 2m
    datacenters:
      - {{ name: dc1, addresses: [192.0.2.1] }}
  - name: b.{ZONE}
    ttl: 120
    datacenters:
      - {{ name: dc1, addresses: [192.0.2.2] }}
""")
    assert a_answer(srv, f"a.{ZONE}") == (["192.0.2.1"], 120)
    assert a_answer(srv, f"b.{ZONE}") == (["192.0.2.2"], 120)


def test_ttl_floor_units(steerd):
    # dc1's monitor probes a closed port, so dc1 goes down and the answer from dc2 depends on
    # a down target: its TTL is capped, at least at the floor, here 7s written with a unit.
    closed = free_port()
    srv = start(steerd, f"""monitors:
  m: {{ type: tcp, port: {closed}, interval: 200ms, timeout: 100ms, fall: 1, rise: 1,
       ttl-floor: 7s }}
datacenters:
  - name: dc1
  - name: dc2
services:
  - name: www.{ZONE}
    ttl: 1h
    datacenters:
      - {{ name: dc1, addresses: [127.0.0.1], monitor: m }}
      - {{ name: dc2, addresses: [192.0.2.2] }}
""")
    wait_for(lambda: a_answer(srv, f"www.{ZONE}")[0] == ["192.0.2.2"], 10, what="dc1 down")
    assert a_answer(srv, f"www.{ZONE}") == (["192.0.2.2"], 7)


@pytest.mark.parametrize("value", ["1m", "60000"])
def test_hold_down_units_in_ttl_cap(steerd, value):
    # A down target's TTL cap is what it needs to come back: rise x interval + hold-down, in
    # seconds rounded up: 1 x 200ms + 1m -> 61, whether written 1m or 60000.
    closed = free_port()
    srv = start(steerd, f"""monitors:
  m: {{ type: tcp, port: {closed}, interval: 200ms, timeout: 100ms, fall: 1, rise: 1,
       jitter: 0, hold-down: {value} }}
datacenters:
  - name: dc1
  - name: dc2
services:
  - name: www.{ZONE}
    datacenters:
      - {{ name: dc1, addresses: [127.0.0.1], monitor: m }}
      - {{ name: dc2, addresses: [192.0.2.2] }}
""")
    wait_for(lambda: a_answer(srv, f"www.{ZONE}")[0] == ["192.0.2.2"], 10, what="dc1 down")
    rows = srv.ctl_json("monitors")
    assert [r["ttl_cap"] for r in rows] == [61], rows


@pytest.mark.parametrize("value", ["1s", "1000"])
def test_tcp_idle_timeout_closes_after_a_second(steerd, value):
    srv = steerd(zones={ZONE: ZONE_TEXT},
                 config=SERVER.replace("  tcp-workers: 1\n",
                                       f"  tcp-workers: 1\n  tcp-idle-timeout: {value}\n"))
    sock = srv.tcp_connect(timeout=10)
    started = time.monotonic()
    try:
        data = sock.recv(1)
    except ConnectionResetError:
        data = b""
    elapsed = time.monotonic() - started
    sock.close()
    assert data == b"" and 0.7 <= elapsed <= 3.0, f"closed after {elapsed:.2f}s"


class Counter:
    """A TCP listener that counts the connections a tcp monitor makes."""

    def __init__(self):
        self.port = free_port()
        self.times = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.times.append(time.monotonic())
            conn.close()

    def stop(self):
        self.running = False
        self.thread.join()
        self.sock.close()


def test_monitor_interval_300ms_probes_that_often(steerd):
    backend = Counter()
    try:
        srv = start(steerd, f"""monitors:
  m: {{ type: tcp, port: {backend.port}, interval: 300ms, timeout: 200ms, jitter: 0 }}
datacenters:
  - name: dc1
services:
  - name: www.{ZONE}
    monitor: m
    datacenters:
      - {{ name: dc1, addresses: [127.0.0.1] }}
""")
        time.sleep(0.5)  # past the first probe, which start-up may delay
        first = len(backend.times)
        time.sleep(2.4)
        probes = len(backend.times) - first
        assert srv.alive()
    finally:
        backend.stop()
    # 2.4 s at one probe per 300 ms is 8; a bare 300 would be the same, 300 s would be 0.
    assert 6 <= probes <= 10, f"{probes} probes in 2.4 s: {backend.times}"


# ---- list-form datacenters: the order survives a YAML tool --------------------------------

def test_list_form_order_survives_sorted_dump(steerd, tmp_path):
    # What an operator's tooling does: load the config, change something, dump it again. PyYAML
    # sorts mapping keys by default, which reorders the mapping form's failover order (zeta
    # first becomes alpha first); the list form keeps zeta first.
    doc = {
        "datacenters": [{"name": "zeta"}, {"name": "alpha"}],
        "services": [
            {"name": f"list.{ZONE}",
             "datacenters": [{"name": "zeta", "addresses": ["192.0.2.26"]},
                             {"name": "alpha", "addresses": ["192.0.2.1"]}]},
            {"name": f"map.{ZONE}",
             "datacenters": {"zeta": {"addresses": ["192.0.2.26"]},
                             "alpha": {"addresses": ["192.0.2.1"]}}},
        ],
    }
    dumped = yaml.safe_dump(doc, sort_keys=True)
    assert dumped.index("alpha:") < dumped.index("zeta:"), "PyYAML re-sorted the mapping form"
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=SERVER + dumped.replace("{", "{{")
                 .replace("}", "}}"))
    assert a_answer(srv, f"list.{ZONE}")[0] == ["192.0.2.26"], "list form: zeta first"
    assert a_answer(srv, f"map.{ZONE}")[0] == ["192.0.2.1"], "mapping form re-sorted: alpha"
    explain = srv.ctl("explain", f"list.{ZONE}", "192.0.2.200")
    assert explain.returncode == 0 and "zeta" in explain.stdout, explain.stdout


# ---- names, hints, lines ------------------------------------------------------------------

def test_zone_name_alias(steerd):
    srv = steerd(zones={ZONE: ZONE_TEXT},
                 config=SERVER.replace("{zones}", f"zones:\n  - name: {ZONE}\n"
                                                  f"    file: {ZONE}.zone\n"))
    resp = srv.udp(dns.message.make_query(ZONE, "SOA"))
    assert find_rrset(resp.answer, ZONE, "SOA") is not None


@pytest.mark.parametrize("text,message", [
    ("    fiel: x.zone\n", "steer.yaml:4: unknown key 'fiel' in section 'zones' "
                         "(did you mean 'file'?)"),
    ("monitors:\n  m:\n    type: static\n    intreval: 1s\n",
     "steer.yaml:7: unknown key 'intreval' in section 'monitors' (did you mean 'interval'?)"),
    ("datacenter:\n  - name: dc1\n",
     "steer.yaml:4: unknown section 'datacenter' (did you mean 'datacenters'?)"),
    (f"datacenters:\n  - name: dc1\nservices:\n  - name: www.{ZONE}\n    policy: fail-over\n"
     "    datacenters: [{ name: dc1, addresses: [192.0.2.1] }]\n",
     "steer.yaml:8: services.policy: expected one of failover, geo, weighted, persist, "
     "round-robin, rtt, completion-rate, hops, qos, least-connections, capacity, packet-rate, "
     "kbps; got 'fail-over' (did you mean 'failover'?)"),
    (f"datacenters:\n  - name: dc1\nservices:\n  - name: www.{ZONE}\n    datacenters:\n"
     "      - { name: dc1, addresses: [192.0.2.1], policy: randomly }\n",
     "steer.yaml:9: services.datacenters.policy: expected one of all, failover, weighted, "
     "multi, round-robin, persist; got 'randomly'"),
])
def test_errors_point_at_the_key_and_suggest(tmp_path, text, message):
    res = check_config(tmp_path, text)
    assert res.returncode == 1 and message in res.stderr, res.stderr
