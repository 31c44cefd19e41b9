"""The DNS node's side of measured paths: fetching the agents' tables, `steerctl paths`, and
/paths/demand.

Each agent is a real HTTP server in the test (http.server on 127.0.0.1) serving site tables
encoded here from the layout in src/gslb/pathfmt.h, so the node's libcurl fetch, the strict
decoder, the merge and the publication are all the real ones. The agents can be switched to
answer garbage, too slowly, with an error, or not at all; the node must keep each agent's last
good table until path-ttl and say what went wrong.
"""

from __future__ import annotations

import http.server
import json
import ipaddress
import struct
import threading
import time
import urllib.error
import urllib.request

import dns.edns
import dns.message
import dns.rdatatype
import pytest

from conftest import free_port, query, server_config, wait_for

ZONE = "paths.test"
NAME = f"www.{ZONE}"
ZONE_TEXT = f"""$ORIGIN {ZONE}.
$TTL 300
@   SOA ns1 hostmaster 1 3600 600 86400 60
    NS  ns1
ns1 A   192.0.2.53
"""
ADDRS = {"dc1": "198.51.100.1", "dc2": "198.51.100.2", "dc3": "198.51.100.3"}
TOKEN = "0123456789abcdef0123456789abcdef"

# ---- the formats of src/gslb/pathfmt.h --------------------------------------------------------


def encode_table(name: str, generated_ms: int, rows4=(), rows6=()) -> bytes:
    """A site table, version 1. rows: (prefix text "a.b.c.0/24", rtt_ms or None, loss, hops,
    age_s); sorted here."""
    def row4(r):
        net = ipaddress.ip_network(r[0])
        rtt = 0xFFFF if r[1] is None else int(round(r[1] * 10))
        return (int(net.network_address), net.prefixlen, r[2], rtt, r[3], 3, r[4])

    def row6(r):
        net = ipaddress.ip_network(r[0])
        rtt = 0xFFFF if r[1] is None else int(round(r[1] * 10))
        return (int(net.network_address) >> 64, net.prefixlen, r[2], rtt, r[3], 3, r[4])

    r4 = sorted(row4(r) for r in rows4)
    r6 = sorted(row6(r) for r in rows6)
    raw = name.encode()
    out = struct.pack(">4sBBHQIIB7x", b"STPT", 1, 0, 0, generated_ms, len(r4), len(r6), len(raw))
    out += raw
    for r in r4:
        out += struct.pack(">IBBHBBH", *r)
    for r in r6:
        out += struct.pack(">QBBHBBH", *r)
    return out


def decode_demand(body: bytes) -> tuple[int, list[dict]]:
    magic, version, flags, _, generated, n, _ = struct.unpack(">4sBBHQII", body[:24])
    assert magic == b"STPD" and version == 1 and flags == 0
    assert len(body) == 24 + 40 * n, "the body holds exactly its rows"
    rows = []
    for i in range(n):
        fam, plen, fl, _, volume, prefix, probe = struct.unpack(
            ">BBBBI16s16s", body[24 + 40 * i:64 + 40 * i])
        size = 4 if fam == 4 else 16
        rows.append({"family": fam, "plen": plen, "flags": fl, "volume": volume,
                     "prefix": str(ipaddress.ip_address(prefix[:size])),
                     "probe": str(ipaddress.ip_address(probe[:size]))})
    return generated, rows


# ---- a steer-probe agent as the node sees it ------------------------------------------------


class Agent:
    """An HTTP server serving <url>paths/table. mode: ok | garbage | slow | error."""

    def __init__(self, name: str, token: str | None = None):
        self.name = name
        self.token = token
        self.mode = "ok"
        self.body = encode_table(name, now_ms())
        self.etag = '"1"'
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.port = free_port()
        agent = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                agent.serve(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def publish(self, rows4=(), rows6=(), generated_ms: int | None = None):
        gen = generated_ms if generated_ms is not None else now_ms()
        with self.lock:
            self.body = encode_table(self.name, gen, rows4, rows6)
            self.etag = f'"{gen}"'

    def serve(self, h):
        with self.lock:
            self.requests.append({"path": h.path, "inm": h.headers.get("If-None-Match"),
                                  "auth": h.headers.get("Authorization")})
            mode, body, etag = self.mode, self.body, self.etag
        if self.token and h.headers.get("Authorization") != f"Bearer {self.token}":
            h.send_response(401)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if h.path != "/paths/table":
            h.send_response(404)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if mode == "slow":
            time.sleep(1.5)
        if mode == "error":
            h.send_response(503)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if mode == "garbage":
            body = b"STPT\x01" + b"\x00" * 40
            etag = '"garbage"'
        elif h.headers.get("If-None-Match") == etag:
            h.send_response(304)
            h.send_header("ETag", etag)
            h.end_headers()
            return
        h.send_response(200)
        h.send_header("Content-Type", "application/vnd.steer.paths")
        h.send_header("ETag", etag)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        try:
            h.wfile.write(body)
        except OSError:
            pass

    def count(self, **want) -> int:
        with self.lock:
            return sum(1 for r in self.requests if all(r.get(k) == v for k, v in want.items()))

    def stop(self):
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture
def agents():
    made: list[Agent] = []

    def make(name, token=TOKEN):
        a = Agent(name, token)
        made.append(a)
        return a

    yield make
    for a in made:
        a.stop()


def config(tmp_path, agent_list, *, ttl="30s", http_port=None, extra="") -> str:
    token = tmp_path / "paths.token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    dcs = "".join(f"  - {{ name: {dc} }}\n" for dc in ADDRS)
    svc_dcs = "".join(f"      - {{ name: {dc}, addresses: [{a}] }}\n" for dc, a in ADDRS.items())
    agents_yaml = "".join(
        f'    - {{ datacenter: {a.name}, url: "{a.url}" }}\n' for a in agent_list)
    http = f"http:\n  listen: [127.0.0.1:{http_port}]\n" if http_port else ""
    return server_config(
        f"datacenters:\n{dcs}"
        f"services:\n  - name: {NAME}.\n    policy: rtt\n    fallback-policy: failover\n"
        f"    ttl: 30\n    datacenters:\n{svc_dcs}"
        f"paths:\n  agents:\n{agents_yaml}"
        f"  fetch-interval: 300ms\n  fetch-timeout: 300ms\n  path-ttl: {ttl}\n"
        f"  token-file: {token}\n{extra}" + http)


def answer(srv, subnet: str | None = None):
    opts = []
    if subnet:
        net = ipaddress.ip_network(subnet)
        opts = [dns.edns.ECSOption(str(net.network_address), net.prefixlen, 0)]
    resp = srv.udp(query(NAME, "A", edns=True, options=opts))
    addrs = sorted(rr.address for rrset in resp.answer for rr in rrset
                   if rrset.rdtype == dns.rdatatype.A)
    scope = None
    for o in resp.options:
        if isinstance(o, dns.edns.ECSOption):
            scope = o.scopelen
    return addrs, scope


def paths(srv, prefix: str | None = None):
    return srv.ctl_json("paths", *([prefix] if prefix else []))


def agent_row(data, dc):
    return next(a for a in data["agents"] if a["datacenter"] == dc)


def columns(row) -> dict:
    return {c["datacenter"]: c for c in row["columns"]}


# ---- tests ------------------------------------------------------------------------------------


def test_node_fetches_merges_and_steers(steerd, agents, tmp_path):
    a1, a2 = agents("dc1"), agents("dc2")
    a1.publish([("192.0.2.0/24", 50.0, 0, 7, 3), ("203.0.113.0/24", 8.0, 10, 0, 1)])
    a2.publish([("192.0.2.0/24", 5.0, 0, 4, 2)],
               [("2001:db8:1::/48", 12.5, 0, 0, 5)])
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=config(tmp_path, [a1, a2]))

    wait_for(lambda: all(agent_row(paths(srv), dc)["state"] == "up" for dc in ("dc1", "dc2")),
             5, what="both agents up")
    data = wait_for(lambda: (d := paths(srv, "192.0.2.77")) and d["row"] and d, 5,
                    what="the row of 192.0.2.0/24")
    row = data["row"]
    assert row["prefix"] == "192.0.2.0/24" and row["best"] == "dc2", row
    cols = columns(row)
    assert cols["dc1"]["rtt_ms"] == pytest.approx(50.0) and cols["dc1"]["hops"] == 7, cols
    assert cols["dc2"]["rtt_ms"] == pytest.approx(5.0) and cols["dc2"]["loss"] == 0, cols
    assert data["table"]["rows4"] == 2 and data["table"]["rows6"] == 1, data["table"]
    assert agent_row(data, "dc1")["rows"] == 2 and agent_row(data, "dc2")["rows"] == 2

    # a prefix only dc1 measured has an empty dc2 cell
    only = paths(srv, "203.0.113.0/24")["row"]
    assert columns(only)["dc2"]["empty"] and columns(only)["dc1"]["loss"] == 10, only

    # IPv6 rows by address, at the node's /48
    v6 = paths(srv, "2001:db8:1:ffff::1")["row"]
    assert v6["prefix"] == "2001:db8:1::/48" and v6["best"] == "dc2", v6

    # the answer follows the measurement, scoped to the table's granularity
    assert answer(srv, "192.0.2.0/24") == (["198.51.100.2"], 24)

    # conditional GETs with the bearer token: unchanged tables cost a 304
    wait_for(lambda: a1.count(inm=a1.etag) >= 2, 5, what="If-None-Match with the ETag")
    assert a1.count(auth=None) == 0 and a1.count(auth=f"Bearer {TOKEN}") >= 3
    wait_for(lambda: agent_row(paths(srv), "dc1")["fetches"]["not-modified"] >= 2, 5,
             what="304s counted")
    assert agent_row(paths(srv), "dc1")["etag"] == a1.etag

    # new tables move the answer (once dc1 wins the hysteresis rounds)
    a2.publish([("192.0.2.0/24", 30.0, 0, 4, 0)])
    a1.publish([("192.0.2.0/24", 1.0, 0, 7, 0)])
    wait_for(lambda: columns(paths(srv, "192.0.2.1")["row"])["dc1"]["rtt_ms"] == 1.0, 5,
             what="dc1's new measurement")
    a1.publish([("192.0.2.0/24", 1.0, 0, 7, 0)], generated_ms=now_ms() + 1)
    wait_for(lambda: answer(srv, "192.0.2.0/24")[0] == ["198.51.100.1"], 5,
             what="the answer moved to dc1")

    # human output
    res = srv.ctl("paths", "192.0.2.7")
    assert res.returncode == 0, res.stderr
    assert "prefix 192.0.2.0/24" in res.stdout and "dc2" in res.stdout, res.stdout
    assert "DATACENTER" in res.stdout and "up" in res.stdout, res.stdout
    res = srv.ctl("paths", "not-an-address")
    assert res.returncode == 1 and "not an address" in (res.stdout + res.stderr)


def test_bad_agents_keep_their_last_table(steerd, agents, tmp_path):
    a1, a2 = agents("dc1"), agents("dc2")
    a1.publish([("192.0.2.0/24", 20.0, 0, 0, 1)])
    a2.publish([("192.0.2.0/24", 30.0, 0, 0, 1)])
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=config(tmp_path, [a1, a2]))
    wait_for(lambda: (r := paths(srv, "192.0.2.1")["row"]) and not columns(r)["dc2"]["empty"],
             5, what="both cells")

    def dc1_state():
        return agent_row(paths(srv), "dc1")

    def dc1_rtt():
        return columns(paths(srv, "192.0.2.1")["row"])["dc1"]["rtt_ms"]

    for mode, result, words in (("garbage", "invalid", "invalid table"),
                                ("slow", "timeout", "no answer within 300ms"),
                                ("error", "http-error", "HTTP 503")):
        a1.mode = mode
        if mode == "slow":
            # a slow agent never stalls the control thread: commands answer meanwhile
            t0 = time.monotonic()
            for _ in range(5):
                srv.ctl_json("status")
            assert time.monotonic() - t0 < 2.0
        st = wait_for(lambda: (s := dc1_state())["state"] == "down" and words in
                      (s["error"] or "") and s, 5, what=f"dc1 down after {mode}")
        assert st["fetches"][result] >= 1, st
        assert dc1_rtt() == pytest.approx(20.0), "the last good table stays"
        a1.mode = "ok"
        wait_for(lambda: dc1_state()["state"] == "up", 5, what=f"dc1 back after {mode}")

    # a table for another datacenter (a wrong url) is refused too
    a1.body = encode_table("dc3", now_ms(), [("192.0.2.0/24", 1.0, 0, 0, 0)])
    a1.etag = '"other"'
    wait_for(lambda: "not 'dc1'" in (dc1_state()["error"] or ""), 5, what="wrong datacenter")
    assert dc1_rtt() == pytest.approx(20.0)

    a1.stop()
    st = wait_for(lambda: (s := dc1_state())["state"] == "down" and s["fetches"]["error"] and s,
                  5, what="dc1 dead")
    assert "onnect" in st["error"], st
    assert dc1_rtt() == pytest.approx(20.0)
    assert srv.alive()
    # one line per state change, not one per failed fetch: garbage, slow, error, wrong
    # datacenter; the dead agent was down already
    downs = [ln for ln in srv.log().splitlines() if "paths: agent dc1 (" in ln and "down:" in ln]
    assert len(downs) == 4, downs


def test_stale_table_empties(steerd, agents, tmp_path):
    a1 = agents("dc1")
    a1.publish([("192.0.2.0/24", 20.0, 0, 0, 0)])
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=config(tmp_path, [a1], ttl="2s"))
    wait_for(lambda: paths(srv, "192.0.2.1")["row"] is not None, 5, what="the row")
    assert answer(srv, "192.0.2.0/24")[0] == ["198.51.100.1"]
    a1.stop()
    t0 = time.monotonic()
    wait_for(lambda: paths(srv, "192.0.2.1")["row"] is None, 6, what="the stale row gone")
    assert time.monotonic() - t0 < 4
    data = paths(srv)
    assert data["table"]["rows4"] == 0 and agent_row(data, "dc1")["state"] == "down"
    # the fallback (failover: dc1 first) answers, without the row's scope
    addrs, scope = answer(srv, "192.0.2.0/24")
    assert addrs == ["198.51.100.1"]


def test_demand_lists_queried_prefixes(steerd, agents, tmp_path):
    a1 = agents("dc1")
    a1.publish([("192.0.2.0/24", 20.0, 0, 0, 0)])
    http_port = free_port()
    srv = steerd(zones={ZONE: ZONE_TEXT},
                 config=config(tmp_path, [a1], http_port=http_port,
                               extra="  demand-sample: 1\n"))
    wait_for(lambda: paths(srv, "192.0.2.1")["row"] is not None, 5, what="the row")
    url = f"http://127.0.0.1:{http_port}/paths/demand"

    def demand():
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.headers["Content-Type"] == "application/vnd.steer.demand"
            return r.headers["ETag"], decode_demand(r.read())

    # an unmeasured ECS prefix (urgent), a measured one, and the resolver itself
    for _ in range(3):
        answer(srv, "203.0.113.0/24")
        answer(srv, "192.0.2.0/24")
    answer(srv)

    def rows():
        return {(r["prefix"], r["plen"]): r for r in demand()[1][1]}

    got = wait_for(lambda: (r := rows()) and ("203.0.113.0", 24) in r and
                   ("192.0.2.0", 24) in r and r, 5, what="demand rows")
    unk = got[("203.0.113.0", 24)]
    assert unk["family"] == 4 and unk["flags"] == 3 and unk["probe"] == "203.0.113.1", unk
    known = got[("192.0.2.0", 24)]
    assert known["flags"] == 1 and known["volume"] >= 1, known
    res = got.get(("127.0.0.0", 24))
    assert res is not None and res["flags"] & 1 == 0 and res["probe"] == "127.0.0.1", got

    # conditional GET: the same ETag while nothing changed gives 304
    etag, (gen, _) = demand()
    assert etag == f'"{gen}"'
    req = urllib.request.Request(url, headers={"If-None-Match": etag,
                                                "Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 304
    data = paths(srv, "203.0.113.9")
    assert data["row"] is None and data["prefix_demand"]["urgent"] is True, data
    assert data["demand"]["prefixes"] >= 3

    # the same over the HTTP API, the prefix's slash encoded
    api = f"http://127.0.0.1:{http_port}/api/v1/paths/192.0.2.0%2F24"
    with urllib.request.urlopen(api, timeout=5) as r:
        reply = json.loads(r.read())
    assert reply["ok"] and reply["data"]["row"]["prefix"] == "192.0.2.0/24", reply

    # /metrics has the paths series
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    for series in ('steer_paths_rows{family="ipv4"} 1', 'steer_paths_agent_up{datacenter="dc1"} 1',
                   'steer_paths_fetch_total{datacenter="dc1",result="ok"}',
                   "steer_paths_table_age_seconds", "steer_paths_build_seconds",
                   "steer_paths_demand_prefixes"):
        assert series in text, series


def test_reload_keeps_the_agents_that_stay(steerd, agents, tmp_path):
    a1, a2 = agents("dc1"), agents("dc2")
    a1.publish([("192.0.2.0/24", 20.0, 0, 0, 0)])
    a2.publish([("192.0.2.0/24", 30.0, 0, 0, 0)])
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=config(tmp_path, [a1, a2]))
    wait_for(lambda: (r := paths(srv, "192.0.2.1")["row"]) and not columns(r)["dc2"]["empty"],
             5, what="both cells")
    a1.mode = "error"  # from now on only the table it already has
    srv.config_path.write_text(srv.config_path.read_text().replace(
        f'    - {{ datacenter: dc2, url: "{a2.url}" }}\n', ""))
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    data = paths(srv, "192.0.2.1")
    assert [a["datacenter"] for a in data["agents"]] == ["dc1"], data["agents"]
    assert list(columns(data["row"])) == ["dc1"], data["row"]
    assert columns(data["row"])["dc1"]["rtt_ms"] == pytest.approx(20.0)
    assert answer(srv, "192.0.2.0/24")[0] == ["198.51.100.1"]


def test_config_errors_name_the_line(steerd, tmp_path):
    from conftest import run_steerd
    conf = tmp_path / "bad.yaml"
    conf.write_text(f"zones:\n  - {{ domain: {ZONE}, file: z.zone }}\n"
                    "datacenters:\n  - { name: dc1 }\n"
                    "paths:\n  agents:\n    - { datacenter: dc9, url: \"http://a/\" }\n")
    (tmp_path / "z.zone").write_text(ZONE_TEXT)
    res = run_steerd("-c", str(conf), "--check-config")
    assert res.returncode != 0
    assert f"{conf}:7: paths.agents.datacenter: unknown datacenter 'dc9'" in res.stderr, \
        res.stderr


def test_paths_can_be_turned_on_by_reload(steerd, agents, tmp_path):
    a1, a2 = agents("dc1"), agents("dc2")
    a1.publish([("192.0.2.0/24", 40.0, 0, 0, 0)])
    a2.publish([("192.0.2.0/24", 4.0, 0, 0, 0)])
    http_port = free_port()
    full = config(tmp_path, [a1, a2], http_port=http_port)
    plain = full[:full.index("paths:\n")].replace(
        "    policy: rtt\n    fallback-policy: failover\n", "    policy: failover\n")
    plain += f"http:\n  listen: [127.0.0.1:{http_port}]\n"
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=plain)
    assert paths(srv)["enabled"] is False and a1.count() == 0
    assert answer(srv, "192.0.2.0/24")[0] == ["198.51.100.1"]
    section = full[full.index("paths:\n"):full.index("http:\n")]
    section = section.replace("{{", "{").replace("}}", "}")
    text = srv.config_path.read_text()
    text = text.replace("    policy: failover\n",
                        "    policy: rtt\n    fallback-policy: failover\n")
    srv.config_path.write_text(text.replace("http:\n", section + "http:\n"))
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "restart" not in res.stdout, res.stdout
    wait_for(lambda: answer(srv, "192.0.2.0/24")[0] == ["198.51.100.2"], 5,
             what="steering by the agents' tables after the reload")
    # the default demand-sample (16): a few dozen decisions make a report
    for _ in range(40):
        answer(srv, "192.0.2.0/24")

    def demand_rows():
        req = urllib.request.Request(f"http://127.0.0.1:{http_port}/paths/demand",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return decode_demand(r.read())[1]

    # decisions before the first merge were urgent; a thread's cache reports a prefix about
    # once a second, so the measured state shows within a second or two
    def measured_row():
        for _ in range(20):
            answer(srv, "192.0.2.0/24")
        rows = demand_rows()
        return [r for r in rows if r["prefix"] == "192.0.2.0" and r["flags"] == 1]

    rows = wait_for(measured_row, 5, interval=0.3, what="a measured demand row")
    assert rows[0]["volume"] >= 16, rows


def test_reload_that_renumbers_datacenters_fetches_again(steerd, agents, tmp_path):
    a1, a2 = agents("dc1"), agents("dc2")
    a1.publish([("192.0.2.0/24", 20.0, 0, 0, 0)])
    a2.publish([("192.0.2.0/24", 30.0, 0, 0, 0)])
    srv = steerd(zones={ZONE: ZONE_TEXT}, config=config(tmp_path, [a1, a2]))
    wait_for(lambda: (r := paths(srv, "192.0.2.1")["row"]) and not columns(r)["dc2"]["empty"],
             5, what="both cells")
    wait_for(lambda: a2.count(inm=a2.etag) >= 1, 5, what="a conditional GET")
    # dc2 moves to the front: the old table's columns no longer mean the same datacenters
    text = srv.config_path.read_text()
    old_order = "  - { name: dc1 }\n  - { name: dc2 }\n"
    assert old_order in text
    text = text.replace(old_order, "  - { name: dc2 }\n  - { name: dc1 }\n")
    srv.config_path.write_text(text)
    before = a2.count(inm=None)
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    wait_for(lambda: a2.count(inm=None) > before, 5, what="a full fetch after the reload")
    row = wait_for(lambda: (r := paths(srv, "192.0.2.1")["row"]) and
                   not columns(r)["dc1"]["empty"] and not columns(r)["dc2"]["empty"] and r, 5,
                   what="both cells again")
    assert columns(row)["dc2"]["rtt_ms"] == pytest.approx(30.0)
    assert columns(row)["dc1"]["rtt_ms"] == pytest.approx(20.0)
    assert answer(srv, "192.0.2.0/24")[0] == ["198.51.100.1"]
