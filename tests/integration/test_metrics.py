"""GET /metrics end to end: steerd with GSLB services on real TCP backends, its exposition
checked by `promtool check metrics` and by value, then scraped every second by a real
Prometheus (Debian's, started by the test in its own folder on a free port) and asked PromQL
questions over its HTTP API: the query rate by transport, a check going to 0 and back to 1,
the latency histogram's quantile, the answers-per-datacenter ratio. Also: answers per
datacenter survive a reload that reorders the services, and the forwarder's cache and
upstream series against a real Unbound.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import dns.edns
import dns.flags
import dns.message
import pytest

from conftest import server_config, free_port, query, wait_for
from test_health import TcpBackend, backends  # noqa: F401 (a fixture)

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

ZONE = "m.example.test"
ZONE_TEXT = f"""$ORIGIN {ZONE}.
$TTL 3600
@   SOA ns1 hostmaster 1 7200 3600 1209600 300
    NS  ns1
ns1 A   192.0.2.53
"""


def gslb_config(http_port: int, mon_port: int, services: str | None = None,
                extra: str = "") -> str:
    svc = services or f"""  - name: www.{ZONE}
    policy: failover
    monitor: web
    ttl: 30
    datacenters:
      dc1: {{ addresses: [127.0.0.21] }}
      dc2: {{ addresses: [127.0.0.22] }}
  - name: api.{ZONE}
    policy: failover
    monitor: web
    ttl: 30
    datacenters:
      dc2: {{ addresses: [127.0.0.22] }}
"""
    return server_config(f"""http:
  listen: [127.0.0.1:{http_port}]
  read-only-open: true
monitors:
  web: {{ type: tcp, port: {mon_port}, interval: 200, timeout: 100, fall: 2, rise: 2 }}
datacenters:
  - {{ name: dc1 }}
  - {{ name: dc2 }}
services:
{svc}{extra}""")


def start(steerd, config, listen=None):
    return steerd(zones={ZONE: ZONE_TEXT}, config=config, listen=listen)


def get(url: str, timeout: float = 5.0) -> tuple[int, dict, bytes]:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, dict(r.headers), r.read()


def scrape(http_port: int) -> str:
    status, headers, body = get(f"http://127.0.0.1:{http_port}/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4"), headers
    return body.decode()


def scrape_settled(http_port: int, timeout: float = 3.0) -> str:
    """scrape() once every answer so far is in the latency histograms: a worker records an
    answer's latency just after sending it, so the last reply can reach the client a moment
    before its observation is counted."""
    deadline = time.monotonic() + timeout
    while True:
        text = scrape(http_port)
        s = samples(text)
        settled = all(
            s.get(f'steer_query_duration_seconds_count{{transport="{t}"}}', 0) ==
            sum(v for k, v in s.items() if k.startswith(f'steer_queries_total{{transport="{t}"'))
            for t in ("udp", "tcp"))
        if settled or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


def samples(text: str) -> dict[str, float]:
    """{'name{labels}': value} of every sample line (labels as written)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def promtool_check(text: str):
    res = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr
    # promtool prints lint findings (names, HELP, units) but still exits 0 for some of them.
    assert res.stdout.strip() == "" and res.stderr.strip() == "", res.stdout + res.stderr


def ask(srv, name, rdtype="A", tcp=False, host=None, port=None):
    q = dns.message.make_query(name, rdtype)
    return srv.tcp(q, host=host, port=port) if tcp else srv.udp(q, host=host, port=port)


def answer_addrs(resp) -> list[str]:
    return sorted(r.address for rr in resp.answer for r in rr)


def has_ipv6_loopback() -> bool:
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


# --- the exposition --------------------------------------------------------------------------

def test_exposition_is_valid_and_counts(steerd, backends):
    mon_port = free_port()
    backends(TcpBackend, "127.0.0.21", mon_port)
    backends(TcpBackend, "127.0.0.22", mon_port)
    http_port = free_port()
    listen = ["127.0.0.1", "::1"] if has_ipv6_loopback() else ["127.0.0.1"]
    srv = start(steerd, gslb_config(http_port, mon_port), listen=listen)
    wait_for(lambda: all(r["state"] == "UP" for r in srv.ctl_json("monitors")), 5,
             what="both checks UP")
    before = samples(scrape(http_port))
    for _ in range(5):
        assert answer_addrs(ask(srv, f"www.{ZONE}")) == ["127.0.0.21"]
    for _ in range(3):
        ask(srv, f"api.{ZONE}", tcp=True)
    ask(srv, f"www.{ZONE}", "AAAA")  # no IPv6 address: the "none" datacenter
    ecs = dns.message.make_query(f"www.{ZONE}", "A", use_edns=0, options=[
        dns.edns.ECSOption("198.51.100.0", 24)])
    srv.udp(ecs)
    if len(listen) == 2:
        ask(srv, f"www.{ZONE}", host="::1", port=srv.listen[1][1])

    text = scrape_settled(http_port)
    promtool_check(text)
    s = samples(text)
    v4_udp = 'steer_queries_total{transport="udp",family="ipv4"}'
    # The fixture's readiness probe and the checks' probes are not DNS queries to us, so
    # the difference is exactly what this test sent.
    assert s[v4_udp] - before.get(v4_udp, 0) == 7, s[v4_udp]
    tcp4 = 'steer_queries_total{transport="tcp",family="ipv4"}'
    assert s[tcp4] - before.get(tcp4, 0) == 3
    if len(listen) == 2:
        v6 = 'steer_queries_total{transport="udp",family="ipv6"}'
        assert s[v6] - before.get(v6, 0) == 1
    www = f'service="www.{ZONE}"'
    assert s[f'steer_gslb_answers_total{{{www},datacenter="dc1"}}'] == 6 + (len(listen) == 2)
    assert s[f'steer_gslb_answers_total{{{www},datacenter="dc2"}}'] == 0
    assert s[f'steer_gslb_answers_total{{{www},datacenter="none"}}'] == 1
    assert s[f'steer_gslb_answers_total{{service="api.{ZONE}",datacenter="dc2"}}'] == 3
    assert s['steer_queries_by_qtype_total{qtype="AAAA"}'] >= 1
    assert s['steer_ecs_queries_total{family="ipv4"}'] >= 1
    assert s['steer_edns_queries_total'] >= 1
    assert s['steer_responses_by_rcode_total{rcode="NOERROR"}'] >= 10
    check = f'steer_check_up{{check="web@127.0.0.21:{mon_port}",monitor="web",type="tcp"}}'
    assert s[check] == 1
    assert s[f'steer_target_up{{{www},datacenter="dc1",address="127.0.0.21"}}'] == 1
    # Every histogram is cumulative and ends with its count.
    udp_count = s['steer_query_duration_seconds_count{transport="udp"}']
    assert s['steer_query_duration_seconds_bucket{transport="udp",le="+Inf"}'] == udp_count
    # One observation per reply: every query of this test was answered.
    assert udp_count == sum(v for k, v in s.items()
                            if k.startswith('steer_queries_total{transport="udp"'))
    assert s['steer_query_duration_seconds_count{transport="tcp"}'] == s[tcp4]
    buckets = [v for k, v in s.items()
               if k.startswith('steer_query_duration_seconds_bucket{transport="udp"')]
    assert buckets == sorted(buckets), buckets
    assert s['steer_last_reload_success'] == 1 and s['steer_reloads_total'] == 0
    assert 'steer_build_info{version="' in text
    assert abs(s['steer_process_start_time_seconds'] - time.time()) < 120
    # Each family's HELP and TYPE once, its samples together.
    names = [ln.split()[2] for ln in text.splitlines() if ln.startswith("# TYPE ")]
    assert len(names) == len(set(names)), names

    stats = srv.ctl_json("stats")
    assert stats["answers"][f"www.{ZONE}"]["dc1"] == s[f'steer_gslb_answers_total{{{www},datacenter="dc1"}}']


def test_reload_keeps_answer_counts_by_name(steerd, backends):
    mon_port = free_port()
    backends(TcpBackend, "127.0.0.21", mon_port)
    backends(TcpBackend, "127.0.0.22", mon_port)
    http_port = free_port()
    srv = start(steerd, gslb_config(http_port, mon_port))
    for _ in range(4):
        ask(srv, f"www.{ZONE}")
    for _ in range(2):
        ask(srv, f"api.{ZONE}")
    # The same services the other way round, www with its datacenters swapped: every slot
    # number changes, the totals by name must not.
    swapped = f"""  - name: api.{ZONE}
    policy: failover
    monitor: web
    ttl: 30
    datacenters:
      dc2: {{ addresses: [127.0.0.22] }}
  - name: www.{ZONE}
    policy: failover
    monitor: web
    ttl: 30
    datacenters:
      dc2: {{ addresses: [127.0.0.22] }}
      dc1: {{ addresses: [127.0.0.21] }}
"""
    config = srv.config_path
    text = config.read_text()
    head = text[:text.index("services:\n") + len("services:\n")]
    config.write_text(head + swapped)
    srv.ctl("reload")
    ask(srv, f"www.{ZONE}")  # dc2 first now
    ask(srv, f"api.{ZONE}")
    s = samples(scrape(http_port))
    assert s[f'steer_gslb_answers_total{{service="www.{ZONE}",datacenter="dc1"}}'] == 4
    assert s[f'steer_gslb_answers_total{{service="www.{ZONE}",datacenter="dc2"}}'] == 1
    assert s[f'steer_gslb_answers_total{{service="api.{ZONE}",datacenter="dc2"}}'] == 3
    assert s['steer_reloads_total'] == 1 and s['steer_last_reload_success'] == 1
    # A second reload (back to the first bank) still adds up.
    config.write_text(text)
    srv.ctl("reload")
    ask(srv, f"www.{ZONE}")
    s = samples(scrape(http_port))
    assert s[f'steer_gslb_answers_total{{service="www.{ZONE}",datacenter="dc1"}}'] == 5
    assert s[f'steer_gslb_answers_total{{service="www.{ZONE}",datacenter="dc2"}}'] == 1
    # A failed reload is counted and reported, the counts stay.
    config.write_text(text + "  - { bogus: 1 }\n")
    assert srv.ctl("reload").returncode != 0
    s = samples(scrape(http_port))
    assert s['steer_reloads_total'] == 3 and s['steer_reload_failures_total'] == 1
    assert s['steer_last_reload_success'] == 0
    assert s[f'steer_gslb_answers_total{{service="www.{ZONE}",datacenter="dc1"}}'] == 5


# --- a real Prometheus -----------------------------------------------------------------------

class Prometheus:
    """Debian's prometheus scraping one target every second, in its own folder."""

    def __init__(self, workdir, target: str):
        self.dir = workdir / "prometheus"
        self.dir.mkdir()
        self.port = free_port()
        (self.dir / "prometheus.yml").write_text(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: steerd
    scrape_interval: 1s
    scrape_timeout: 900ms
    static_configs:
      - targets: ["{target}"]
""")
        self.log = open(self.dir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.dir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}",
             "--storage.tsdb.retention.time=1h", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
        wait_for(self._ready, 30, 0.2, "prometheus ready")

    def _ready(self):
        assert self.proc.poll() is None, (self.dir / "prometheus.log").read_text()
        try:
            return get(f"http://127.0.0.1:{self.port}/-/ready", 1)[0] == 200
        except OSError:
            return False

    def query(self, promql: str) -> list[dict]:
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": promql}))
        status, _, body = get(url)
        reply = json.loads(body)
        assert status == 200 and reply["status"] == "success", reply
        return reply["data"]["result"]

    def value(self, promql: str, **labels) -> float | None:
        for r in self.query(promql):
            if all(r["metric"].get(k) == v for k, v in labels.items()):
                return float(r["value"][1])
        return None

    def target_up(self) -> bool:
        return self.value('up{job="steerd"}') == 1

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture
def prometheus(tmp_path):
    started = []

    def make(target):
        p = Prometheus(tmp_path, target)
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


@pytest.mark.skipif(not os.path.exists(PROMETHEUS), reason="needs prometheus")
def test_prometheus_scrapes_and_promql_answers(steerd, backends, prometheus):
    mon_port = free_port()
    b1 = backends(TcpBackend, "127.0.0.21", mon_port)
    backends(TcpBackend, "127.0.0.22", mon_port)
    http_port = free_port()
    srv = start(steerd, gslb_config(http_port, mon_port))
    wait_for(lambda: all(r["state"] == "UP" for r in srv.ctl_json("monitors")), 5,
             what="both checks UP")
    before = samples(scrape(http_port))
    prom = prometheus(f"127.0.0.1:{http_port}")
    wait_for(prom.target_up, 15, 0.2, "prometheus scraped steerd")

    # Traffic over both transports for a few scrapes: 50 answers from dc1.
    for _ in range(40):
        assert answer_addrs(ask(srv, f"www.{ZONE}")) == ["127.0.0.21"]
    for _ in range(10):
        ask(srv, f"www.{ZONE}", tcp=True)
    check = f"web@127.0.0.21:{mon_port}"
    wait_for(lambda: (prom.value(f'steer_check_up{{check="{check}"}}') == 1), 10, 0.2,
             "the check is up in Prometheus")

    # dc1's backend dies: the check goes to 0, the next 50 answers come from dc2. Waiting on
    # the control socket (which publishes pending health first) sends no DNS query.
    b1.stop()
    wait_for(lambda: {r["key"]: r["state"] for r in srv.ctl_json("monitors")}[check] == "DOWN",
             5, 0.05, "the check DOWN")
    for _ in range(40):
        assert answer_addrs(ask(srv, f"www.{ZONE}")) == ["127.0.0.22"]
    for _ in range(10):
        ask(srv, f"www.{ZONE}", tcp=True)
    wait_for(lambda: prom.value(f'steer_check_up{{check="{check}"}}') == 0, 10, 0.2,
             "the check goes to 0 in Prometheus")
    assert prom.value(f'steer_target_up{{datacenter="dc1",service="www.{ZONE}"}}') == 0
    assert prom.value(f'steer_target_up{{datacenter="dc2",service="www.{ZONE}"}}') == 1

    # The answers-per-datacenter ratio: 50 from dc1, 50 from dc2 (UDP and TCP alike).
    ratio = ('sum by (datacenter) (steer_gslb_answers_total{service="www.' + ZONE + '"})'
             ' / ignoring(datacenter) group_left '
             'sum(steer_gslb_answers_total{service="www.' + ZONE + '"})')
    wait_for(lambda: prom.value(ratio, datacenter="dc2") == 0.5, 10, 0.2,
             "answers split half and half")
    assert prom.value(ratio, datacenter="dc1") == 0.5

    # Queries by transport: what this test sent, and a positive rate for both.
    def sent(transport):
        key = f'steer_queries_total{{transport="{transport}",family="ipv4"}}'
        return prom.value(f'steer_queries_total{{transport="{transport}",family="ipv4"}}') \
            - before[key]
    wait_for(lambda: sent("udp") == 80 and sent("tcp") == 20, 10, 0.2,
             "80 UDP and 20 TCP queries scraped")
    rates = {r["metric"]["transport"]: float(r["value"][1])
             for r in prom.query("sum by (transport) (rate(steer_queries_total[30s]))")}
    assert rates.get("udp", 0) > 0 and rates.get("tcp", 0) > 0, rates
    assert rates["udp"] > rates["tcp"], rates

    # The latency histogram's median over its buckets is a real time, well under 50 ms on
    # loopback even for a sanitized build on a busy machine, and so is the mean (_sum over
    # _count).
    p50 = prom.value('histogram_quantile(0.5, sum by (le) '
                     '(rate(steer_query_duration_seconds_bucket{transport="udp"}[30s])))')
    assert p50 is not None and 0 < p50 < 0.05, p50
    mean = prom.value('sum(rate(steer_query_duration_seconds_sum[30s])) / '
                      'sum(rate(steer_query_duration_seconds_count[30s]))')
    assert mean is not None and 0 < mean < 0.05, mean

    # The backend comes back: the check returns to 1.
    b1.start()
    wait_for(lambda: prom.value(f'steer_check_up{{check="{check}"}}') == 1, 10, 0.2,
             "the check back to 1 in Prometheus")
    assert prom.value(f'steer_check_flaps_total{{check="{check}"}}') >= 2


# --- the forwarder ---------------------------------------------------------------------------

def test_forwarder_cache_and_upstream_series(steerd, tmp_path):
    unbound_support = pytest.importorskip("unbound_support")
    if not os.path.exists(unbound_support.UNBOUND):
        pytest.skip("needs unbound")
    up = unbound_support.LocalUnbound(tmp_path, [
        'local-zone: "fwd.test." static',
        'local-data: "fwd.test. 300 IN SOA ns.fwd.test. host.fwd.test. 1 3600 600 86400 60"',
        'local-data: "www.fwd.test. 300 IN A 198.51.100.1"'], "www.fwd.test")
    try:
        http_port = free_port()
        host, port = up.addr.rsplit(":", 1)
        config = server_config(f"""http:
  listen: [127.0.0.1:{http_port}]
  read-only-open: true
forward:
  allow-recursion: [127.0.0.0/8]
  groups:
    - domain: .
      upstreams:
        - {{ name: unbound1, address: "{host}:{port}" }}
""")
        srv = steerd(zones={ZONE: ZONE_TEXT}, config=config)
        q = query("www.fwd.test", "A")
        q.flags |= dns.flags.RD
        for _ in range(3):
            r = srv.udp(q)
            assert [a.address for rr in r.answer for a in rr] == ["198.51.100.1"]
        text = scrape_settled(http_port)
        promtool_check(text)
        s = samples(text)
        assert s["steer_cache_misses_total"] >= 1
        assert s["steer_cache_hits_total"] >= 2
        assert s["steer_cache_entries"] >= 1 and s["steer_cache_bytes"] > 0
        labels = f'upstream="unbound1",group=".",address="{host}:{port}"'
        # The same state steerctl shows (unbound answers fwd.test only, so the recursive
        # probe of the root fails: "degraded").
        row = srv.ctl_json("upstreams")["upstreams"][0]
        assert s[f"steer_upstream_up{{{labels}}}"] == (row["state"] == "up"), row
        assert s[f'steer_upstream_state{{{labels},state="{row["state"]}"}}'] == 1, row
        states = [k for k, v in s.items() if k.startswith("steer_upstream_state{") and v == 1]
        assert len(states) == 1, states
        assert s[f"steer_upstream_queries_total{{{labels}}}"] == row["queries"] >= 1
        assert s[f"steer_upstream_timeouts_total{{{labels}}}"] == row["timeouts"]
        assert 0 < s[f"steer_upstream_srtt_seconds{{{labels}}}"] < 1
        # Every UDP query was answered, the forwarded one (by the engine thread) included.
        udp = s['steer_queries_total{transport="udp",family="ipv4"}']
        assert s['steer_query_duration_seconds_count{transport="udp"}'] == udp >= 4
    finally:
        up.stop()


# --- the cluster node ------------------------------------------------------------------------

def ns_scrape(ns: str, port: int) -> dict[str, float]:
    """/metrics from 127.0.0.1:@port inside network namespace @ns (HTTP/1.0, read to EOF)."""
    from fwdlab import ns_http_get
    data = ns_http_get(ns, port)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.") and b" 200 " in head.split(b"\r\n")[0], head
    return samples(body.decode())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
def test_cluster_announcement_series(tmp_path):
    """A cluster node in its own namespaces (the lab of test_cluster.py): announced and
    healthy, then drained (announced 0, draining 1), then undrained again."""
    from test_cluster import Node, NodeLab
    lab = NodeLab(tmp_path)
    try:
        lab.build()
        http_port = free_port()
        node = Node(lab, "m1", f"""  announce: interface
http:
  listen: [127.0.0.1:{http_port}]
  read-only-open: true
""")
        node.wait_state("announced")
        s = ns_scrape(lab.node, http_port)
        assert s["steer_cluster_announced"] == 1 and s["steer_cluster_healthy"] == 1, s
        assert s["steer_cluster_draining"] == 0
        transitions = s["steer_cluster_transitions_total"]
        assert transitions >= 1
        node.ctl("drain", "5s")
        s = ns_scrape(lab.node, http_port)
        assert s["steer_cluster_announced"] == 0 and s["steer_cluster_draining"] == 1, s
        assert s["steer_cluster_transitions_total"] == transitions + 1
        node.ctl("undrain")
        node.wait_state("announced")
        s = ns_scrape(lab.node, http_port)
        assert s["steer_cluster_announced"] == 1 and s["steer_cluster_draining"] == 0, s
        node.stop()
    finally:
        lab.close()
