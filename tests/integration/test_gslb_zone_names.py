"""Zone records at a GSLB service name: the service answers A, AAAA and ANY, the zone every
other type; a zone record that would hide the service (or be hidden by it) is a configuration
error naming the zone file:line and the service's config line, at start-up, on reload and in
--check-config."""
from __future__ import annotations

import dns.flags
import dns.message
import dns.rcode
import pytest

from conftest import SERVER_CONFIG as SERVER, find_rrset, run_steerd

ZONE = "zn.example.test"

ZONE_TEXT = """$ORIGIN zn.example.test.
$TTL 3600
@       SOA   ns1 hostmaster 1 7200 3600 1209600 300
        NS    ns1
ns1     A     192.0.2.53
mail    A     192.0.2.25
vpn     MX    10 mail
vpn     TXT   "v=spf1 mx -all"
{extra}
"""

GSLB = """datacenters:
  - {{ name: east }}
  - {{ name: west }}
services:
  - name: vpn.zn.example.test
    ttl: 30
    datacenters:
      east: {{ addresses: [198.51.100.10, "2001:db8::10"] }}
      west: {{ addresses: [203.0.113.10] }}
whoami: [whoami.zn.example.test]
"""


SERVICE_LINE = GSLB.splitlines().index("  - name: vpn.zn.example.test") + 1


def zone_text(extra: str = "") -> str:
    return ZONE_TEXT.format(extra=extra)


def ask(srv, name, rdtype):
    return srv.udp(dns.message.make_query(name, rdtype))


@pytest.fixture(scope="module")
def srv(module_launcher):
    return module_launcher(zones={ZONE: zone_text()}, config=SERVER + GSLB)


def test_address_types_come_from_the_service(srv):
    name = f"vpn.{ZONE}"
    resp = ask(srv, name, "A")
    rrset = find_rrset(resp.answer, name, "A")
    assert rrset is not None and [r.address for r in rrset] == ["198.51.100.10"], resp
    assert rrset.ttl == 30
    resp = ask(srv, name, "AAAA")
    assert [r.address for r in find_rrset(resp.answer, name, "AAAA")] == ["2001:db8::10"]
    # ANY as before: the service's A RRset (RFC 8482 allows one RRset)
    resp = ask(srv, name, "ANY")
    assert find_rrset(resp.answer, name, "A") is not None, resp
    assert find_rrset(resp.answer, name, "MX") is None, resp


@pytest.mark.parametrize("rdtype,text", [
    ("MX", "10 mail.zn.example.test."),
    ("TXT", '"v=spf1 mx -all"'),
])
def test_other_types_come_from_the_zone(srv, rdtype, text):
    name = f"vpn.{ZONE}"
    resp = ask(srv, name, rdtype)
    assert resp.rcode() == dns.rcode.NOERROR and resp.flags & dns.flags.AA
    rrset = find_rrset(resp.answer, name, rdtype)
    assert rrset is not None and [r.to_text() for r in rrset] == [text], resp
    assert rrset.ttl == 3600
    if rdtype == "MX":
        # the exchange's address as additional data, as for any zone MX
        assert find_rrset(resp.additional, f"mail.{ZONE}", "A") is not None, resp


def test_a_type_neither_has_is_nodata(srv):
    resp = ask(srv, f"vpn.{ZONE}", "SRV")
    assert resp.rcode() == dns.rcode.NOERROR and not resp.answer
    assert find_rrset(resp.authority, ZONE, "SOA") is not None, resp


def test_whoami_keeps_txt_and_serves_nothing_else_from_an_empty_node(srv):
    name = f"whoami.{ZONE}"
    resp = ask(srv, name, "TXT")
    assert find_rrset(resp.answer, name, "TXT") is not None, resp
    resp = ask(srv, name, "MX")
    assert resp.rcode() == dns.rcode.NOERROR and not resp.answer, resp


# --- records that cannot be served beside the service ------------------------------------------

def conflict_files(tmp_path, extra: str, service: str = "vpn"):
    """The zone with @p extra appended and a config whose service is @p service.ZONE."""
    zone = tmp_path / f"{ZONE}.zone"
    zone.write_text(zone_text(extra))
    conf = tmp_path / "steer.yaml"
    gslb = GSLB.replace("{{", "{").replace("}}", "}")
    conf.write_text(f"zones:\n  - domain: {ZONE}\n    file: {zone}\n"
                    + gslb.replace("name: vpn.zn.example.test", f"name: {service}.{ZONE}"))
    return zone, conf


def extra_line(extra: str) -> int:
    """Line of the first record of @p extra in zone_text(extra)."""
    first = extra.splitlines()[0]
    return zone_text(extra).splitlines().index(first) + 1


@pytest.mark.parametrize("service,extra,why", [
    ("alias", "alias CNAME elsewhere.example.net.", "CNAME is an alias at the name of"),
    ("vpn", "vpn A 192.0.2.99", "A would be hidden by"),
    ("vpn", "vpn NS ns.vpn\nns.vpn A 192.0.2.54", "NS delegates the name of"),
    ("www.cut", "cut NS ns.cut\nns.cut A 192.0.2.54", "NS delegates the subtree holding"),
    ("www.old", "old DNAME new.example.net.", "DNAME redirects the subtree holding"),
])
def test_conflicting_record_is_an_error(tmp_path, service, extra, why):
    zone, conf = conflict_files(tmp_path, extra, service)
    res = run_steerd("-c", str(conf), "--check-config", cwd=tmp_path)
    assert res.returncode != 0, res.stdout + res.stderr
    owner = extra.split()[0]
    service_line = SERVICE_LINE + 3  # after the three lines of the zones section
    assert f"{zone}:{extra_line(extra)}: {owner}.{ZONE}. {why} the GSLB service " \
           f"{service}.{ZONE}. ({conf}:{service_line})" in res.stderr, res.stderr


def test_the_plain_zone_checks_clean(tmp_path):
    zone, conf = conflict_files(tmp_path, "")
    res = run_steerd("-c", str(conf), "--check-config", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr


def test_reload_with_a_conflict_keeps_serving(steerd):
    srv = steerd(zones={ZONE: zone_text()}, config=SERVER + GSLB)
    name = f"vpn.{ZONE}"
    zone = srv.zone_paths[ZONE]
    extra = "vpn A 192.0.2.99"
    zone.write_text(zone_text(extra))
    res = srv.ctl("reload")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"{zone}:{extra_line(extra)}: vpn.{ZONE}. A would be hidden" in res.stderr, res.stderr
    resp = ask(srv, name, "A")
    assert [r.address for r in find_rrset(resp.answer, name, "A")] == ["198.51.100.10"]
    resp = ask(srv, name, "MX")
    assert find_rrset(resp.answer, name, "MX") is not None, resp
    assert srv.ctl_json("status")["last_reload"]["ok"] is False


def test_start_up_with_a_conflict_fails(tmp_path):
    zone, conf = conflict_files(tmp_path, "vpn A 192.0.2.99")
    res = run_steerd("-c", str(conf), cwd=tmp_path, timeout=10)
    assert res.returncode != 0, res.stdout + res.stderr
    assert f"{zone}:{extra_line('vpn A 192.0.2.99')}: vpn.{ZONE}. A would be hidden by the " \
           f"GSLB service" in res.stderr, res.stderr
