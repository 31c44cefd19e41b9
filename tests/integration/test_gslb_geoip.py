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

import dns.edns
import dns.message
import pytest

from conftest import find_rrset

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
