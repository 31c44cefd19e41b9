"""The `cluster` section through `steerd --check-config`: a good section is accepted without
touching the network (no holder interface appears), and every bad one is refused with its
file:line. steerd is never started with a cluster section here: that would create an
interface outside a namespace."""

import os
import subprocess

import pytest

from conftest import ZONES_DIR, run_steerd

# The device name is this test's own, so a run next to other engineers' tests cannot collide.
IFNAME = f"scc{os.getpid() % 100000}"

GOOD = f"""server:
  listen: [0.0.0.0:53, "[::]:53"]
zones:
  - domain: example.test
    file: zones/example.test.zone
cluster:
  node-id: n1
  service-addresses: [192.0.2.53, "2001:db8::53"]
  interface: {IFNAME}
  unicast: [10.53.0.11, "2001:db8:53::11"]
  announce: bird
  bird: {{ socket: /run/bird/bird.ctl, protocol: vip }}
  self-check:
    interval: 100ms
    timeout: 80ms
    fall: 3
    rise: 5
    hold-down: 2s
    forwarder: off
    return-path: [198.51.100.1, "2001:db8:99::1"]
  liveness-timeout: 300ms
  drain: {{ quiet: 500ms, timeout: 30s }}
"""


@pytest.fixture
def confdir(tmp_path):
    (tmp_path / "zones").mkdir()
    (tmp_path / "zones" / "example.test.zone").write_text(
        (ZONES_DIR / "example.test.zone").read_text())
    return tmp_path


def check(confdir, text):
    path = confdir / "steer.yaml"
    path.write_text(text)
    return path, run_steerd("-c", str(path), "--check-config", timeout=20)


def link_exists(name):
    return subprocess.run(["ip", "link", "show", "dev", name], capture_output=True).returncode == 0


def test_good_cluster_section_touches_no_network(confdir):
    assert not link_exists(IFNAME)
    _, res = check(confdir, GOOD)
    assert res.returncode == 0, res.stderr
    assert not link_exists(IFNAME), "--check-config created the holder interface"


@pytest.mark.parametrize("method", ["interface", "frr", "keepalived"])
def test_other_methods(confdir, method):
    text = GOOD.replace("  announce: bird\n", f"  announce: {method}\n")
    _, res = check(confdir, text)
    assert res.returncode == 0, res.stderr


def test_the_contract_example(confdir):
    """The issue's configuration contract, verbatim."""
    text = GOOD.split("cluster:\n")[0] + """cluster:
  node-id: n1
  service-addresses: [192.0.2.53, "2001:db8::53"]
  interface: vip0
  unicast: 10.53.0.11
  announce: interface            # interface | bird | frr | keepalived
  bird: { socket: /run/bird/bird.ctl, protocol: vip }
  self-check: { interval: 100ms, fall: 3, rise: 5, hold-down: 2s }
"""
    _, res = check(confdir, text)
    assert res.returncode == 0, res.stderr


BAD = {
    # name: (old, new, line, words in the message)
    "node-id missing": ("  node-id: n1\n", "", 7, ["missing required key 'node-id'"]),
    "node-id characters": ("  node-id: n1\n", "  node-id: n1/a\n", 7, ["n1/a", "letters"]),
    "node-id too long": ("  node-id: n1\n", "  node-id: " + "n" * 64 + "\n", 7, ["at most 63"]),
    "no service addresses": ("  service-addresses: [192.0.2.53, \"2001:db8::53\"]\n",
                             "  service-addresses: []\n", 8, ["needs at least one value"]),
    "service address twice": ("[192.0.2.53, \"2001:db8::53\"]",
                              "[192.0.2.53, \"2001:db8::53\", 192.0.2.53]", 8, ["duplicate"]),
    "service address with a port": ("[192.0.2.53, ", "[\"192.0.2.53:53\", ", 8,
                                    ["without a port"]),
    "unspecified service address": ("[192.0.2.53, ", "[0.0.0.0, ", 8, ["unspecified"]),
    "multicast service address": ("[192.0.2.53, ", "[239.1.1.1, ", 8, ["multicast"]),
    "bad interface name": (f"  interface: {IFNAME}\n", "  interface: eth0/vip\n", 9,
                           ["not a network device name"]),
    "interface name too long": (f"  interface: {IFNAME}\n", "  interface: vip0123456789abc\n",
                                9, ["at most 15"]),
    "unicast is a service address": ("  unicast: [10.53.0.11, ", "  unicast: [192.0.2.53, ", 10,
                                     ["service address"]),
    "two IPv4 unicast": ("\"2001:db8:53::11\"]", "10.53.0.12]", 10,
                         ["at most one IPv4 and one IPv6"]),
    "unknown method": ("  announce: bird\n", "  announce: ospf\n", 11,
                       ["interface, bird, frr, keepalived"]),
    "bird without protocol": ("protocol: vip }", "}", 12, ["needs bird.protocol"]),
    "bad bird protocol": ("protocol: vip }", "protocol: \"vip 1\" }", 12, ["BIRD protocol name"]),
    "frr local table": ("  announce: bird\n", "  announce: frr\n  frr: { table: 255 }\n", 12,
                        ["local table"]),
    "timeout not below interval": ("    timeout: 80ms\n", "    timeout: 100ms\n", 15,
                                   ["must be less than interval"]),
    "fall 0": ("    fall: 3\n", "    fall: 0\n", 16, ["out of range"]),
    "rise 0": ("    rise: 5\n", "    rise: 0\n", 17, ["out of range"]),
    "not a duration": ("    hold-down: 2s\n", "    hold-down: two\n", 18,
                                      ["expected a duration"]),
    "liveness too short": ("  liveness-timeout: 300ms\n", "  liveness-timeout: 200ms\n", 21,
                           ["more than twice self-check.interval"]),
    "liveness too long": ("  liveness-timeout: 300ms\n", "  liveness-timeout: 20s\n", 21,
                          ["above the maximum 10s"]),
    "return path of a family without service": (
        "  service-addresses: [192.0.2.53, \"2001:db8::53\"]\n",
        "  service-addresses: 192.0.2.53\n", 20, ["no service address is"]),
    "loopback return path": ("[198.51.100.1, ", "[127.0.0.1, ", 20, ["loopback"]),
    "unknown key": ("  liveness-timeout: 300ms\n", "  liveness-timout: 300ms\n", 21,
                    ["did you mean 'liveness-timeout'"]),
    "unknown self-check key": ("    forwarder: off\n", "    forwarders: off\n", 19,
                               ["cluster.self-check"]),
    "drain quiet not below timeout": ("quiet: 500ms", "quiet: 1m", 22,
                                      ["must be less than timeout"]),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_cluster_section(confdir, case):
    old, new, line, words = BAD[case]
    assert old in GOOD, old
    path, res = check(confdir, GOOD.replace(old, new))
    assert res.returncode == 1, f"exit {res.returncode}: {res.stderr}"
    assert f"{path}:{line}:" in res.stderr, f"want {path}:{line} in:\n{res.stderr}"
    for word in words:
        assert word in res.stderr, f"want {word!r} in:\n{res.stderr}"
    assert not link_exists(IFNAME)
