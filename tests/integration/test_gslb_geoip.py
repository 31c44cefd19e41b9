"""A GSLB map from a MaxMind database, end to end: config -> mmdb walk -> rules and
auto-distance -> merged map -> answer and ECS scope.

tests/data/gslb/mmdb/test-city.mmdb (see make_test_mmdb.pl there) holds, among others:
    58.32.0.0/13     Shanghai (AS/CN/31), China Telecom
    202.112.0.0/16   Beijing (AS/CN/11), CERNET
    5.1.0.0/16       Frankfurt (EU/DE)
and nothing for 9.9.9.0/24.
"""
from __future__ import annotations

from pathlib import Path

import os
import subprocess

import dns.edns
import dns.message
import pytest

from conftest import STEERCTL, assert_no_sanitizer_report, find_rrset, run_steerd

ECS = 8
ROOT = Path(__file__).resolve().parents[2]
ZONE = "ecslb.example.test"
ZONE_FILE = ROOT / "tests" / "data" / "gslb" / "integration" / f"{ZONE}.zone"
MMDB = ROOT / "tests" / "data" / "gslb" / "mmdb" / "test-city.mmdb"

CONFIG = """server:
  listen: {listen}
  control-socket: {ctl}
{zones}
datacenters:
  - {{ name: sh, coords: [31.23, 121.47] }}
  - {{ name: bj, coords: [39.90, 116.40] }}
  - {{ name: paris, coords: [48.85, 2.35] }}
  - {{ name: nyc, coords: [40.71, -74.0] }}
maps:
  world:
    geoip:
      database: MMDB
      auto-distance: true
      rules:
        - {{ match: AS/CN/31, datacenters: [sh, bj] }}
    default: [nyc, paris]
services:
  - name: geo.ecslb.example.test
    policy: geo
    map: world
    ttl: 30
    datacenters:
      sh: {{ addresses: [198.51.100.1] }}
      bj: {{ addresses: [198.51.100.2] }}
      paris: {{ addresses: [198.51.100.3] }}
      nyc: {{ addresses: [198.51.100.4] }}
""".replace("MMDB", str(MMDB))


@pytest.fixture(scope="module")
def srv(module_launcher):
    return module_launcher(zones={ZONE: ZONE_FILE}, config=CONFIG)


def ask(srv, subnet, prefix):
    q = dns.message.make_query("geo." + ZONE, "A", use_edns=0,
                               options=[dns.edns.ECSOption(subnet, prefix, 0)])
    resp = srv.udp(q)
    rrset = find_rrset(resp.answer, "geo." + ZONE, "A")
    assert rrset is not None, resp
    scope = [o for o in resp.options if o.otype == ECS][0].scopelen
    return sorted(r.address for r in rrset), scope


@pytest.mark.parametrize("subnet,expect,why", [
    ("58.33.4.0", "198.51.100.1", "Shanghai: the AS/CN/31 rule picks sh first"),
    ("202.112.9.0", "198.51.100.2", "Beijing: no rule; auto-distance puts bj nearest"),
    ("5.1.2.0", "198.51.100.3", "Frankfurt: no rule; auto-distance puts paris nearest"),
    ("9.9.9.0", "198.51.100.4", "no mmdb data: the map default (nyc first)"),
])
def test_mmdb_map_steers_by_location(srv, subnet, expect, why):
    answer, _ = ask(srv, subnet, 24)
    assert answer == [expect], why


@pytest.mark.parametrize("subnet,scope,why", [
    ("58.33.4.0", 13, "the mmdb block 58.32.0.0/13"),
    ("202.112.9.0", 16, "the mmdb block 202.112.0.0/16"),
    ("5.1.2.0", 16, "the mmdb block 5.1.0.0/16"),
    # 116.224.0.0/13 and 116.232.0.0/13 are different mmdb records that classify the same
    # (AS/CN/31): the compiled map merges them into one /12, a wider scope than the database.
    ("116.225.0.0", 12, "two sibling records with the same decision merged"),
    # Unmapped space takes the default; the scope is the widest empty block around it.
    ("9.9.9.0", 5, "the default block around 9.9.9.0"),
])
def test_scope_is_the_merged_decision_block(srv, subnet, scope, why):
    _, got = ask(srv, subnet, 24)
    assert got == scope, why


# --- a City database and an ASN database in one map (geoip.asn-database) ----------------------
#
# tests/data/gslb/mmdb/test-pair-city.mmdb + test-pair-asn.mmdb (make_pair_mmdb.pl):
#   City 1.0.0.0/16 Shanghai      ASN 1.0.0.0/24 AS4134, 1.0.1.0/24 AS4812
#   City 14.1.0.0/16 Beijing      ASN 14.0.0.0/8 AS4837 (wider than the City block)
#   City 58.32.0.0/13 Shanghai    ASN 58.32.0.0/13 AS4812
#   -                             ASN 36.0.0.0/12 AS4538
#   City 5.1.0.0/16 Frankfurt     -
#   City 240e::/20 Shanghai       ASN 240e::/24 AS4134, 240e:100::/24 AS4812
#   City 2001:da8::/32 Beijing    ASN 2001:da8::/48 AS23910

MMDB_DIR = ROOT / "tests" / "data" / "gslb" / "mmdb"

PAIR_GSLB = """datacenters:
  - {{ name: telecom, coords: [31.23, 121.47] }}
  - {{ name: unicom, coords: [39.90, 116.40] }}
  - {{ name: edu }}
  - {{ name: eu, coords: [50.11, 8.68] }}
maps:
  isp:
    geoip:
      database: {dir}/city.mmdb
      asn-database: {dir}/asn.mmdb
      auto-distance: true
      rules:
        - {{ asn: 4134, datacenters: [telecom] }}
        - {{ asn: [4812], datacenters: [edu, telecom] }}
        - {{ match: AS/CN/31, datacenters: [unicom, telecom] }}
        - {{ match: EU, datacenters: [eu] }}
    default: [edu, eu]
services:
  - name: isp.ecslb.example.test
    policy: geo
    map: isp
    ttl: 30
    datacenters:
      telecom: {{ addresses: [198.51.100.1] }}
      unicom: {{ addresses: [198.51.100.2] }}
      edu: {{ addresses: [198.51.100.3] }}
      eu: {{ addresses: [198.51.100.4] }}
"""
PAIR_HEAD = """server:
  listen: {listen}
  control-socket: {ctl}
{zones}
"""
PAIR_CONFIG = PAIR_HEAD + PAIR_GSLB
TEL, UNI, EDU, EU = "198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"
ISP = "isp." + ZONE


def copy_pair(workdir: Path, city="test-pair-city.mmdb", asn="test-pair-asn.mmdb"):
    """Install a database pair as the map's files, atomically (rename), as geoipupdate does."""
    for src, dst in ((city, "city.mmdb"), (asn, "asn.mmdb")):
        tmp = workdir / (dst + ".new")
        tmp.write_bytes((MMDB_DIR / src).read_bytes())
        os.replace(tmp, workdir / dst)


@pytest.fixture(scope="module")
def pair_srv(module_launcher):
    copy_pair(module_launcher.workdir)
    return module_launcher(zones={ZONE: ZONE_FILE}, config=PAIR_CONFIG)


def ask_isp(srv, subnet, prefix, rdtype="A"):
    q = dns.message.make_query(ISP, rdtype, use_edns=0,
                               options=[dns.edns.ECSOption(subnet, prefix, 0)])
    resp = srv.udp(q)
    rrset = find_rrset(resp.answer, ISP, rdtype)
    assert rrset is not None, resp
    ecs = [o for o in resp.options if o.otype == ECS]
    assert len(ecs) == 1, resp
    return sorted(r.address for r in rrset), ecs[0].scopelen


@pytest.mark.parametrize("subnet,prefix,expect,scope,why", [
    ("1.0.0.0", 24, TEL, 24, "ASN db 1.0.0.0/24 AS4134: the ASN rule"),
    ("1.0.1.0", 24, EDU, 24, "ASN db 1.0.1.0/24 AS4812: the other ASN rule"),
    ("1.0.2.0", 24, UNI, 23, "City db Shanghai, no ASN: the AS/CN/31 location rule; the rest "
                             "of the /16 outside the two /24s, as its widest blocks"),
    ("1.0.128.0", 24, UNI, 17, "the same, the upper half of the /16"),
    ("58.33.0.0", 16, EDU, 13, "the same /13 in both databases: Shanghai + AS4812, ASN wins"),
    ("14.1.2.0", 24, UNI, 16, "Beijing inside ASN 14.0.0.0/8 AS4837 (no rule): distance"),
    ("14.2.0.0", 24, EDU, 15, "ASN 14.0.0.0/8 alone, no rule, no location: the default; "
                              "the City 14.1.0.0/16 inside cuts the /8, 14.2.0.0/15 is whole"),
    ("36.1.0.0", 24, EDU, 4, "ASN only AS4538, no rule: the default, merged with the empty "
                             "space around it"),
    ("5.1.2.0", 24, EU, 16, "City only: Frankfurt, the EU rule"),
    ("240e:0:1::", 48, TEL, 24, "IPv6 ASN 240e::/24 AS4134 inside City 240e::/20"),
    ("240e:100::", 48, EDU, 24, "IPv6 ASN 240e:100::/24 AS4812"),
    ("240e:200::", 48, UNI, 23, "IPv6 Shanghai without ASN: location rule"),
    # AS23910 has no rule, so 2001:da8::/48 (Beijing + AS23910) and the rest of the City /32
    # (Beijing) both order by distance: the same list, merged back into the /32.
    ("2001:da8::", 56, UNI, 32, "neighbours with the same datacenter list merge"),
])
def test_city_and_asn_rules_steer_in_one_map(pair_srv, subnet, prefix, expect, scope, why):
    answer, got = ask_isp(pair_srv, subnet, prefix)
    assert answer == [expect], why
    assert got == scope, why


def test_explain_shows_both_databases(pair_srv):
    res = pair_srv.ctl("explain", ISP, "127.0.0.1", "1.0.1.0/24")
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    line = 1 + pair_srv.config_path.read_text().splitlines().index(
        "        - { asn: [4812], datacenters: [edu, telecom] }")
    assert "geoip: /16 AS/CN/31/Shanghai (GeoLite2-City); /24 AS4812 (GeoLite2-ASN), " \
           f"classified by asn (rule 2, line {line})" in out, out
    assert "map: isp, block 1.0.1.0/24 (scope 24)" in out, out
    assert "map datacenters: edu telecom" in out, out
    res = pair_srv.ctl("explain", ISP, "127.0.0.1", "36.1.0.0/24")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "geoip: no location data (GeoLite2-City); /12 AS4538 (GeoLite2-ASN), " \
           "classified by none" in res.stdout, res.stdout
    # offline, from the config file: the same decision
    res = subprocess.run([STEERCTL, "explain", "--config", str(pair_srv.config_path), ISP,
                          "127.0.0.1", "240e:100::/48"],
                         capture_output=True, text=True, timeout=30)
    assert_no_sanitizer_report(res.stdout + res.stderr)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "/20 AS/CN/31/Shanghai (GeoLite2-City); /24 AS4812 (GeoLite2-ASN)" in res.stdout, \
        res.stdout


def test_reload_reopens_both_databases(steerd):
    copy_pair(steerd.workdir)
    srv = steerd(zones={ZONE: ZONE_FILE}, config=PAIR_CONFIG)
    assert ask_isp(srv, "14.16.1.0", 24) == ([EDU], 12)       # inside AS4837 /8: default
    assert ask_isp(srv, "202.112.5.0", 24)[0] == [EDU]         # no data: default
    assert ask_isp(srv, "81.2.70.0", 24)[0] == [EDU]
    # geoipupdate-style replacement of both files, then a reload
    copy_pair(steerd.workdir, "test-city.mmdb", "test-asn.mmdb")
    res = srv.ctl("reload")
    assert res.returncode == 0, res.stdout + res.stderr
    # the new ASN db: 14.16.0.0/12 AS4134 -> telecom
    assert ask_isp(srv, "14.16.1.0", 24) == ([TEL], 12)
    # the new City db: London (EU rule); Beijing + AS4538 (no rule): distance -> unicom
    assert ask_isp(srv, "81.2.70.0", 24)[0] == [EU]
    assert ask_isp(srv, "202.112.5.0", 24) == ([UNI], 16)


@pytest.mark.parametrize("what,rules,asn_db,line,message", [
    ("asn rule, City db only", "- {{ match: EU, datacenters: [eu] }}\n"
     "        - {{ asn: [4134], datacenters: [telecom] }}", None, 16,
     "map isp: geoip rule with 'asn', but {dir}/city.mmdb (GeoLite2-City) has no ASN data"),
    ("asn-database without ASN data", "- {{ asn: 4134, datacenters: [telecom] }}",
     "{dir}/city.mmdb", 10,
     "map isp: geoip.asn-database {dir}/city.mmdb (GeoLite2-City) has no ASN data"),
])
def test_rule_needing_missing_data_is_a_config_error(tmp_path, what, rules, asn_db, line,
                                                      message):
    copy_pair(tmp_path)
    gslb = PAIR_GSLB.replace(
        "- {{ asn: 4134, datacenters: [telecom] }}\n"
        "        - {{ asn: [4812], datacenters: [edu, telecom] }}\n"
        "        - {{ match: AS/CN/31, datacenters: [unicom, telecom] }}\n"
        "        - {{ match: EU, datacenters: [eu] }}", rules)
    gslb = gslb.replace("      asn-database: {dir}/asn.mmdb\n",
                        f"      asn-database: {asn_db}\n" if asn_db else "")
    zone = tmp_path / f"{ZONE}.zone"
    zone.write_text(ZONE_FILE.read_text())
    head = f"zones:\n  - domain: {ZONE}\n    file: {zone}\n"
    conf = tmp_path / "steer.yaml"
    conf.write_text(head + gslb.format(dir=tmp_path))
    res = run_steerd("-c", str(conf), "--check-config", cwd=tmp_path)
    assert res.returncode != 0, what
    want = f"{conf}:{line}: " + message.format(dir=tmp_path)
    assert want in res.stderr, f"{what}: want '{want}' in:\n{res.stderr}"
