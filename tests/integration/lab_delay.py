#!/usr/bin/python3
"""The path-delay lab for measured steering: a userspace delay line (this kernel has no
sch_netem) and the network namespaces around it, three "sites" whose probes to the resolvers
cross it with their own delay, a DNS node and a client that holds resolver addresses.

Run as a program (inside the wan namespace), it is the delay line: it attaches to a TUN
device that owns the resolvers' prefixes, reads every packet routed into it and answers it
itself after the delay of the site the packet came from (chosen by its source address), with
optional +-N % jitter:
  ICMP / ICMPv6 echo request    -> echo reply (same id, sequence and payload)
  TCP SYN to port 53            -> SYN-ACK (or RST, "tcp": "rst"); a FIN after it -> RST
  UDP DNS query to port 53      -> a well-formed reply: the id and question echoed, QR set,
                                   NOERROR, no records; its qname is logged
for IPv4 and IPv6, with correct checksums and the site's TTL (hop limit) on every reply, so a
prober that assumes an initial TTL of 64 computes 64 - ttl + 1 hops (the wan namespace
forwards the reply once). Anything not addressed to the prefixes, or from an address that is
no site's, is never answered, only counted.

    lab_delay.py --tun dl0 --config delay.json --status status.json --log qnames.log

The config (JSON) is read at start and again on SIGHUP:
    {"generation": 3, "prefixes": ["198.18.0.0/16", "2001:db8::/32"], "tcp": "synack",
     "sites": {"10.70.1.2": {"name": "s5", "delay_ms": 5, "jitter": 15, "ttl": 62}, ...}}
The status file (JSON, rewritten atomically twice a second and after every reload) holds the
generation in force and the counters. Each DNS query answered adds one line to the log:
    <unix time> <site> <source> <destination> <qname> <qtype>
SIGTERM or SIGINT stop it (exit 0).

As a module, PathsLab builds the namespaces and runs the delay line in them:

    with PathsLab(delays=(5, 20, 60)) as lab:     # namespaces, veths, the TUN, the line
        lab.set_delays({"s5": 60, "s60": 5}, jitter=15)   # applied before it returns
        lab.delay.qnames()                        # [(site, src, dst, qname, qtype), ...]
        lab.delay.status()["answered"]            # {"icmp": n, "tcp": n, "dns": n}
        s = lab.client_socket(socket.AF_INET)     # a socket inside the client namespace

Topology (site k = 1..3 with delay d_k; every name is inside the lab's own namespaces):

    site ns s<d_k> (steer-probe)    wan ns (forwarding, the delay line)      node ns (steerd)
    wan 10.70.k.2/24 ------------- s<d_k> 10.70.k.1/24
        fd70:0:k::2/64                     fd70:0:k::1/64
                                   node 10.70.0.1/24, fd70::1/64 ------------ wan 10.70.0.2/24
                                   dl0 (TUN): 198.18.0.0/16,                      fd70::2/64
                                              2001:db8::/32              client 10.71.0.1/24
                                                                                fd71::1/64
                                                       client ns: node 10.71.0.2/24, fd71::2/64
                                                        lo: resolver addresses in 198.18.0.0/16
                                                            and 2001:db8::/32 (add_client)

Sites and the node route everything via wan; the node routes the resolver prefixes to the
client namespace, so a client holding 198.18.5.10 queries steerd from that address, while a
site's probe to 198.18.5.10 ends in the delay line.
"""

from __future__ import annotations

import heapq
import ipaddress
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time
import uuid
from pathlib import Path

RESOLVER_NET4 = "198.18.0.0/16"
RESOLVER_NET6 = "2001:db8::/32"
TUN_NAME = "dl0"
NODE_ADDR4, NODE_ADDR6 = "10.70.0.2", "fd70::2"
WAN_NODE4, WAN_NODE6 = "10.70.0.1", "fd70::1"
CLIENT_LINK4, CLIENT_LINK6 = "10.71.0.2", "fd71::2"
NODE_CLIENT4, NODE_CLIENT6 = "10.71.0.1", "fd71::1"
# What a reply's TTL starts at for the k-th site (1-based): 64 - 2 k + 1 after the one
# forwarding hop in wan, i.e. 2k hops for a prober that assumes 64.
BASE_TTL = 64


def site_addr4(k: int) -> str:
    """Site k's own address (its probes leave from it)."""
    return f"10.70.{k}.2"


def site_addr6(k: int) -> str:
    return f"fd70:0:{k}::2"


def site_ttl(k: int) -> int:
    return BASE_TTL - 2 * k + 1


# --------------------------------------------------------------------------------------------
# Packets (pure functions)

PROTO_ICMP, PROTO_TCP, PROTO_UDP, PROTO_ICMP6 = 1, 6, 17, 58
TCP_FIN, TCP_SYN, TCP_RST, TCP_ACK = 0x01, 0x02, 0x04, 0x10


def inet_checksum(data: bytes) -> int:
    """The one's complement sum of RFC 1071 over @data."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _pseudo_header(src: bytes, dst: bytes, proto: int, length: int) -> bytes:
    if len(src) == 4:
        return src + dst + struct.pack("!BBH", 0, proto, length)
    return src + dst + struct.pack("!IxxxB", length, proto)


def l4_checksum(src: bytes, dst: bytes, proto: int, segment: bytes) -> int:
    """The TCP/UDP/ICMPv6 checksum of @segment (its checksum field zero) between src, dst."""
    return inet_checksum(_pseudo_header(src, dst, proto, len(segment)) + segment)


def ip_packet(src: bytes, dst: bytes, proto: int, payload: bytes, ttl: int) -> bytes:
    """An IPv4 (4-byte addresses) or IPv6 (16-byte) packet carrying @payload."""
    if len(src) == 4:
        head = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload),
                           random.getrandbits(16), 0x4000, ttl, proto, 0, src, dst)
        head = head[:10] + struct.pack("!H", inet_checksum(head)) + head[12:]
        return head + payload
    return struct.pack("!IHBB16s16s", 6 << 28, len(payload), proto, ttl, src, dst) + payload


def _with_checksum(segment: bytes, offset: int, value: int) -> bytes:
    return segment[:offset] + struct.pack("!H", value) + segment[offset + 2:]


def parse_ip(packet: bytes):
    """(version, src, dst, proto, payload) of an IPv4/IPv6 packet, or None when it is not
    one this line answers (truncated, fragmented, IPv6 extension headers)."""
    if len(packet) < 20:
        return None
    version = packet[0] >> 4
    if version == 4:
        ihl = (packet[0] & 0x0F) * 4
        total = struct.unpack("!H", packet[2:4])[0]
        frag = struct.unpack("!H", packet[6:8])[0]
        if ihl < 20 or total > len(packet) or total < ihl or frag & 0x3FFF:
            return None
        return 4, packet[12:16], packet[16:20], packet[9], packet[ihl:total]
    if version == 6 and len(packet) >= 40:
        length = struct.unpack("!H", packet[4:6])[0]
        if 40 + length > len(packet):
            return None
        return 6, packet[8:24], packet[24:40], packet[6], packet[40:40 + length]
    return None


def echo_reply(version: int, src: bytes, dst: bytes, proto: int, payload: bytes):
    """The echo reply to an ICMP(v6) echo request, as (kind, l4 proto, segment), or None."""
    if version == 4 and proto == PROTO_ICMP and len(payload) >= 8 and payload[0] == 8:
        reply = b"\0\0\0\0" + payload[4:]
        return "icmp", PROTO_ICMP, _with_checksum(reply, 2, inet_checksum(reply))
    if version == 6 and proto == PROTO_ICMP6 and len(payload) >= 8 and payload[0] == 128:
        reply = bytes([129, 0, 0, 0]) + payload[4:]
        # The reply's source is the request's destination.
        return "icmp", PROTO_ICMP6, _with_checksum(reply, 2,
                                                   l4_checksum(dst, src, PROTO_ICMP6, reply))
    return None


def tcp_reply(src: bytes, dst: bytes, payload: bytes, mode: str):
    """The answer to a TCP segment for port 53: SYN -> SYN-ACK (mode "synack") or RST-ACK
    (mode "rst"); a FIN or data after a SYN-ACK -> RST (the prober is done). Others: None."""
    if len(payload) < 20:
        return None
    sport, dport, seq, ack, off_flags = struct.unpack("!HHIIH", payload[:14])
    flags = off_flags & 0x3F
    if dport != 53 or flags & TCP_RST:
        return None
    data_len = len(payload) - (off_flags >> 12) * 4
    if flags & TCP_SYN and not flags & TCP_ACK:
        if mode == "rst":
            out_seq, out_ack, out_flags = 0, (seq + 1) & 0xFFFFFFFF, TCP_RST | TCP_ACK
        else:
            out_seq, out_ack, out_flags = random.getrandbits(32), (seq + 1) & 0xFFFFFFFF, \
                TCP_SYN | TCP_ACK
        kind = "tcp"
    elif flags & TCP_FIN or data_len > 0:
        out_seq, out_ack, out_flags, kind = ack, 0, TCP_RST, "tcp-close"
    else:
        return None  # the handshake's ACK
    segment = struct.pack("!HHIIHHHH", dport, sport, out_seq, out_ack, (5 << 12) | out_flags,
                          65535, 0, 0)
    return kind, PROTO_TCP, _with_checksum(segment, 16,
                                           l4_checksum(dst, src, PROTO_TCP, segment))


def parse_question(msg: bytes):
    """(qname text, qtype, end offset) of a DNS query's single question, or None when the
    message is not a plain query (QR set, opcode not QUERY, QDCOUNT not 1, a bad name)."""
    if len(msg) < 12:
        return None
    flags, qdcount = struct.unpack("!HH", msg[2:6])
    if flags & 0x8000 or (flags >> 11) & 0xF or qdcount != 1:
        return None
    labels, pos = [], 12
    while True:
        if pos >= len(msg):
            return None
        n = msg[pos]
        if n == 0:
            pos += 1
            break
        if n > 63 or pos + 1 + n > len(msg):
            return None
        labels.append(msg[pos + 1:pos + 1 + n])
        pos += 1 + n
    if pos + 4 > len(msg) or pos - 12 > 255:
        return None
    qtype = struct.unpack("!H", msg[pos:pos + 2])[0]
    name = ".".join(label.decode("ascii", "backslashreplace") for label in labels) + "."
    return name.lower(), qtype, pos + 4


def dns_reply(src: bytes, dst: bytes, payload: bytes):
    """The reply to a UDP DNS query for port 53, as (kind, proto, segment, qname, qtype), or
    None. The reply echoes the id, opcode, RD and the question; NOERROR, no records."""
    if len(payload) < 8:
        return None
    sport, dport, length = struct.unpack("!HHH", payload[:6])
    if dport != 53 or length < 8 or length > len(payload):
        return None
    msg = payload[8:length]
    q = parse_question(msg)
    if q is None:
        return None
    qname, qtype, end = q
    flags = struct.unpack("!H", msg[2:4])[0]
    reply = msg[:2] + struct.pack("!HHHHH", 0x8400 | (flags & 0x0100), 1, 0, 0, 0) + \
        msg[12:end]
    segment = struct.pack("!HHHH", 53, sport, 8 + len(reply), 0) + reply
    csum = l4_checksum(dst, src, PROTO_UDP, segment) or 0xFFFF
    return "dns", PROTO_UDP, _with_checksum(segment, 6, csum), qname, qtype


class Responder:
    """Decides what the line answers and after how long; no I/O (the loop does that)."""

    def __init__(self, config: dict):
        self.counters = {"received": 0, "ignored-destination": 0, "ignored-source": 0,
                         "ignored-other": 0}
        self.answered: dict[str, int] = {}
        self.per_site: dict[str, int] = {}
        self.apply(config)

    def apply(self, config: dict) -> None:
        """Take a new config (see the module doc); raises ValueError on a bad one."""
        prefixes = [ipaddress.ip_network(p) for p in config.get("prefixes", [])]
        if not prefixes:
            raise ValueError("config: no prefixes")
        sites = {}
        for addr, site in config.get("sites", {}).items():
            delay, jitter = float(site["delay_ms"]), float(site.get("jitter", 0))
            ttl = int(site.get("ttl", BASE_TTL))
            if delay < 0 or not 0 <= jitter < 100 or not 1 <= ttl <= 255:
                raise ValueError(f"config: site {addr}: delay_ms >= 0, jitter 0..99, ttl 1..255")
            sites[ipaddress.ip_address(addr).packed] = (str(site.get("name", addr)), delay,
                                                        jitter, ttl)
        mode = config.get("tcp", "synack")
        if mode not in ("synack", "rst"):
            raise ValueError('config: "tcp" is "synack" or "rst"')
        self.prefixes, self.sites, self.tcp_mode = prefixes, sites, mode
        self.generation = int(config.get("generation", 0))

    def _ours(self, dst: bytes) -> bool:
        addr = ipaddress.ip_address(dst)
        return any(addr.version == p.version and addr in p for p in self.prefixes)

    def handle(self, packet: bytes):
        """(delay in seconds, reply packet, logged question or None) for one packet read from
        the TUN, or None when it is not answered."""
        self.counters["received"] += 1
        ip = parse_ip(packet)
        if ip is None:
            self.counters["ignored-other"] += 1
            return None
        version, src, dst, proto, payload = ip
        if not self._ours(dst):
            self.counters["ignored-destination"] += 1
            return None
        site = self.sites.get(src)
        if site is None:
            self.counters["ignored-source"] += 1
            return None
        name, delay_ms, jitter, ttl = site
        question = None
        out = echo_reply(version, src, dst, proto, payload)
        if out is None and proto == PROTO_TCP:
            out = tcp_reply(src, dst, payload, self.tcp_mode)
        if out is None and proto == PROTO_UDP:
            dns_out = dns_reply(src, dst, payload)
            if dns_out is not None:
                out, question = dns_out[:3], (name, src, dst, dns_out[3], dns_out[4])
        if out is None:
            self.counters["ignored-other"] += 1
            return None
        kind, l4proto, segment = out
        self.answered[kind] = self.answered.get(kind, 0) + 1
        self.per_site[name] = self.per_site.get(name, 0) + 1
        delay = delay_ms * (1 + random.uniform(-jitter, jitter) / 100) / 1000
        return delay, ip_packet(dst, src, l4proto, segment, ttl), question

    def status(self) -> dict:
        return {"generation": self.generation, "pid": os.getpid(), "answered": self.answered,
                "per-site": self.per_site, **self.counters}


# --------------------------------------------------------------------------------------------
# The bodies agents and nodes exchange (src/gslb/pathfmt.h), for checking the agents' tables
# and for serving made-up tables and demand in benchmarks

TABLE_CT = "application/vnd.steer.paths"
DEMAND_CT = "application/vnd.steer.demand"
RTT_NONE = 0xFFFF
_ROW = struct.Struct("!BBHBBH")  # plen loss rtt hops answered age_s, after the prefix


def encode_table(name: str, generated_ms: int, rows4, rows6) -> bytes:
    """A site table. rows4: [(prefix int, plen, loss, rtt, hops, answered, age_s)] ascending
    (IPv4 prefix as a 32-bit int); rows6 likewise with the top 64 bits of the prefix."""
    raw = name.encode()
    out = [struct.pack("!4sBBHQIIB7x", b"STPT", 1, 0, 0, generated_ms, len(rows4), len(rows6),
                       len(raw)), raw]
    out += [struct.pack("!I", r[0]) + _ROW.pack(*r[1:]) for r in rows4]
    out += [struct.pack("!Q", r[0]) + _ROW.pack(*r[1:]) for r in rows6]
    return b"".join(out)


def decode_table(body: bytes) -> dict:
    """{"name", "generated_ms", "rows4": {prefix str: row dict}, "rows6": ...}; raises
    ValueError on anything the format does not allow (a lenient reader would hide bugs)."""
    if len(body) < 32 or body[:4] != b"STPT":
        raise ValueError("not a site table")
    _, version, flags, _, gen, n4, n6, name_len = struct.unpack("!4sBBHQIIB", body[:25])
    if version != 1 or flags or len(body) != 32 + name_len + 12 * n4 + 16 * n6:
        raise ValueError("bad version, flags or size")
    name = body[32:32 + name_len].decode()
    out = {"name": name, "generated_ms": gen, "rows4": {}, "rows6": {}}
    pos = 32 + name_len
    for family, n, keylen in ((4, n4, 4), (6, n6, 8)):
        last = None
        for _ in range(n):
            key = int.from_bytes(body[pos:pos + keylen], "big")
            plen, loss, rtt, hops, answered, age = _ROW.unpack(body[pos + keylen:pos + keylen + 8])
            pos += keylen + 8
            if last is not None and (key, plen) <= last:
                raise ValueError("rows out of order")
            last = (key, plen)
            if family == 4:
                net = ipaddress.IPv4Network((key, plen))
            else:
                net = ipaddress.IPv6Network((key << 64, plen))
            out[f"rows{family}"][str(net)] = {"loss": loss, "rtt": rtt, "hops": hops,
                                              "answered": answered, "age": age}
    return out


DEMAND_ECS, DEMAND_URGENT = 0x01, 0x02


def encode_demand(generated_ms: int, rows) -> bytes:
    """A demand body. rows: [(network "198.18.5.0/24", probe address, flags, volume)], any
    order (sorted here as the format requires)."""
    packed = []
    for net, probe, flags, volume in rows:
        n = ipaddress.ip_network(net)
        family = 4 if n.version == 4 else 6
        packed.append((family, n.network_address.packed.ljust(16, b"\0"), n.prefixlen,
                       struct.pack("!BBBBI", family, n.prefixlen, flags, 0, volume)
                       + n.network_address.packed.ljust(16, b"\0")
                       + ipaddress.ip_address(probe).packed.ljust(16, b"\0")))
    packed.sort(key=lambda r: r[:3])
    head = struct.pack("!4sBBHQII", b"STPD", 1, 0, 0, generated_ms, len(packed), 0)
    return head + b"".join(r[3] for r in packed)


# --------------------------------------------------------------------------------------------
# The program

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000


def open_tun(name: str) -> int:
    """Attach to the TUN device @name (made beforehand with `ip tuntap add`)."""
    import fcntl
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def write_json_atomic(path: str, obj) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


class _Stop(Exception):
    pass


def serve(tun: str, config_path: str, status_path: str, log_path: str) -> int:
    responder = Responder(json.loads(Path(config_path).read_text()))
    fd = open_tun(tun)
    reload_wanted = False

    def on_hup(signum, frame):
        nonlocal reload_wanted
        reload_wanted = True

    def on_term(signum, frame):
        raise _Stop()

    signal.signal(signal.SIGHUP, on_hup)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    pending: list[tuple[float, int, bytes]] = []
    seq = 0
    log = open(log_path, "a", buffering=1)
    write_json_atomic(status_path, responder.status())
    next_status = time.monotonic() + 0.5
    try:
        while True:
            if reload_wanted:
                reload_wanted = False
                try:
                    responder.apply(json.loads(Path(config_path).read_text()))
                except (ValueError, KeyError, OSError) as e:
                    print(f"lab_delay: reload failed, old config kept: {e}", file=sys.stderr,
                          flush=True)
                write_json_atomic(status_path, responder.status())
            now = time.monotonic()
            while pending and pending[0][0] <= now:
                _, _, packet = heapq.heappop(pending)
                try:
                    os.write(fd, packet)
                except OSError:
                    pass  # the device went down: the reply is lost, like on a wire
            if now >= next_status:
                write_json_atomic(status_path, responder.status())
                next_status = now + 0.5
            timeout = min(next_status, pending[0][0] if pending else next_status) - now
            readable, _, _ = select.select([fd], [], [], max(0.0, timeout))
            if not readable:
                continue
            for _ in range(64):
                try:
                    packet = os.read(fd, 65535)
                except BlockingIOError:
                    break
                got = responder.handle(packet)
                if got is None:
                    continue
                delay, reply, question = got
                seq += 1
                heapq.heappush(pending, (time.monotonic() + delay, seq, reply))
                if question:
                    site, src, dst, qname, qtype = question
                    log.write(f"{time.time():.3f} {site} {ipaddress.ip_address(src)} "
                              f"{ipaddress.ip_address(dst)} {qname} {qtype}\n")
    except _Stop:
        pass
    finally:
        write_json_atomic(status_path, responder.status())
        log.close()
        os.close(fd)
    return 0


def main(argv: list[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="userspace delay line on a TUN device")
    ap.add_argument("--tun", default=TUN_NAME)
    ap.add_argument("--config", required=True)
    ap.add_argument("--status", required=True)
    ap.add_argument("--log", required=True)
    args = ap.parse_args(argv)
    return serve(args.tun, args.config, args.status, args.log)


# --------------------------------------------------------------------------------------------
# The lab (needs root and iproute2)

sys.path.insert(0, str(Path(__file__).resolve().parent))


class DelayLine:
    """The delay line process in @ns, configured through files in @workdir."""

    def __init__(self, ns: str, workdir: Path, sites: dict[str, dict], nets: list[str]):
        from fwdlab import Proc
        self.ns = ns
        self.dir = workdir
        self.config_path = workdir / "delay.json"
        self.status_path = workdir / "delay-status.json"
        self.log_path = workdir / "qnames.log"
        self.sites = sites  # address -> {"name", "delay_ms", "jitter", "ttl"}
        self.nets = nets
        self.generation = 1
        self._write_config()
        self.proc = Proc("delay line", [sys.executable, str(Path(__file__).resolve()),
                                        "--tun", TUN_NAME, "--config", str(self.config_path),
                                        "--status", str(self.status_path),
                                        "--log", str(self.log_path)],
                         ns, workdir / "delay.log")
        self._wait_generation()

    def _write_config(self) -> None:
        write_json_atomic(str(self.config_path),
                          {"generation": self.generation,
                           "prefixes": self.nets, "sites": self.sites})

    def _wait_generation(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if not self.proc.alive():
                raise RuntimeError(f"the delay line exited: {self.proc.log()}")
            st = self.status()
            if st and st.get("generation") == self.generation and \
                    st.get("pid") == self.proc.pid:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the delay line did not apply its config: {self.proc.log()}")
            time.sleep(0.02)

    def set(self, delays: dict[str, float] | None = None, jitter: float | None = None) -> None:
        """New delays (site name -> ms) and/or jitter (percent, every site); returns once the
        line applies them."""
        for site in self.sites.values():
            if delays and site["name"] in delays:
                site["delay_ms"] = delays[site["name"]]
            if jitter is not None:
                site["jitter"] = jitter
        self.generation += 1
        self._write_config()
        self.proc.proc.send_signal(signal.SIGHUP)
        self._wait_generation()

    def status(self) -> dict | None:
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return None

    def qnames(self) -> list[tuple[str, str, str, str, int]]:
        """Every DNS query answered so far: (site, source, destination, qname, qtype)."""
        out = []
        try:
            text = self.log_path.read_text()
        except FileNotFoundError:
            return out
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 6:
                out.append((parts[1], parts[2], parts[3], parts[4], int(parts[5])))
        return out

    def stop(self) -> None:
        self.proc.stop()


class PathsLab:
    """The namespaces of the module doc; built on __enter__ (or build()), torn down on
    __exit__ (or close()), also when building failed half-way. @delays: one site per entry
    (ms), named s<delay> ("s5", "s20", "s60"); the names stay when delays change.
    @extra_nets: more prefixes the delay line owns (routed into it, answered like the
    resolver prefixes; only sites and the wan namespace reach them)."""

    def __init__(self, delays=(5, 20, 60), workdir: Path | str | None = None,
                 jitter: float = 0, extra_nets: list[str] = ()):
        tag = uuid.uuid4().hex[:6]
        self.wan = f"pl{tag}-wan"
        self.node = f"pl{tag}-node"
        self.client = f"pl{tag}-client"
        self.site_names = [f"s{d}" for d in delays]
        if len(set(self.site_names)) != len(self.site_names):
            raise ValueError("delays must differ (they name the sites)")
        self.site_ns = {name: f"pl{tag}-{name}" for name in self.site_names}
        self.delays = dict(zip(self.site_names, delays))
        self.jitter = jitter
        self.nets = [RESOLVER_NET4, RESOLVER_NET6, *extra_nets]
        self._tmp = None
        if workdir is None:
            import tempfile
            self._tmp = tempfile.mkdtemp(prefix="pathslab-")
            workdir = self._tmp
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.namespaces: list[str] = []
        self.delay: DelayLine | None = None
        self.procs: list = []  # processes started by the users of the lab, stopped at close

    def site_index(self, name: str) -> int:
        return self.site_names.index(name) + 1

    def site_addr(self, name: str, family: int = socket.AF_INET) -> str:
        k = self.site_index(name)
        return site_addr4(k) if family == socket.AF_INET else site_addr6(k)

    # ---- building and tearing down ----------------------------------------------------------

    def __enter__(self) -> "PathsLab":
        self.build()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def build(self) -> None:
        from fwdlab import run
        try:
            for ns in (self.wan, self.node, self.client, *self.site_ns.values()):
                run("ip", "netns", "add", ns)
                self.namespaces.append(ns)
                self.ip(ns, "link", "set", "lo", "up")
            self._wire()
            sites = {}
            for name in self.site_names:
                k = self.site_index(name)
                for addr in (site_addr4(k), site_addr6(k)):
                    sites[addr] = {"name": name, "delay_ms": self.delays[name],
                                   "jitter": self.jitter, "ttl": site_ttl(k)}
            self.delay = DelayLine(self.wan, self.dir, sites, self.nets)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop every process the lab (and its users, through self.procs) started, by PID, then
        delete its namespaces."""
        from fwdlab import run
        for p in reversed(self.procs):
            p.stop()
        self.procs.clear()
        if self.delay:
            self.delay.stop()
            self.delay = None
        for ns in reversed(self.namespaces):
            run("ip", "netns", "del", ns, check=False)
        self.namespaces.clear()
        if self._tmp:
            import shutil
            shutil.rmtree(self._tmp, ignore_errors=True)

    def ip(self, ns: str, *args: str):
        from fwdlab import run
        return run("ip", "-n", ns, *args)

    def sysctl(self, ns: str, key: str, value: str) -> None:
        from fwdlab import run
        run("ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}={value}")

    def _veth(self, ns_a: str, a: str, ns_b: str, b: str) -> None:
        # Made inside ns_a with its peer moved to ns_b at once: it never exists in the host's.
        self.ip(ns_a, "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns_b)
        self.ip(ns_a, "link", "set", a, "up")
        self.ip(ns_b, "link", "set", b, "up")

    def _addr(self, ns: str, cidr: str, dev: str) -> None:
        # nodad: IPv6 addresses usable at once, not after duplicate address detection.
        extra = ["nodad"] if ":" in cidr else []
        self.ip(ns, "addr", "add", cidr, "dev", dev, *extra)

    def _wire(self) -> None:
        w, nd, c = self.wan, self.node, self.client
        self.sysctl(w, "net.ipv4.ip_forward", "1")
        self.sysctl(w, "net.ipv6.conf.all.forwarding", "1")
        for name, ns in self.site_ns.items():
            k = self.site_index(name)
            self._veth(ns, "wan", w, name)
            self._addr(ns, f"{site_addr4(k)}/24", "wan")
            self._addr(ns, f"{site_addr6(k)}/64", "wan")
            self._addr(w, f"10.70.{k}.1/24", name)
            self._addr(w, f"fd70:0:{k}::1/64", name)
            self.ip(ns, "route", "add", "default", "via", f"10.70.{k}.1")
            self.ip(ns, "-6", "route", "add", "default", "via", f"fd70:0:{k}::1")
        self._veth(nd, "wan", w, "node")
        self._addr(nd, f"{NODE_ADDR4}/24", "wan")
        self._addr(nd, f"{NODE_ADDR6}/64", "wan")
        self._addr(w, f"{WAN_NODE4}/24", "node")
        self._addr(w, f"{WAN_NODE6}/64", "node")
        self.ip(nd, "route", "add", "default", "via", WAN_NODE4)
        self.ip(nd, "-6", "route", "add", "default", "via", WAN_NODE6)
        self._veth(c, "node", nd, "client")
        self._addr(c, f"{CLIENT_LINK4}/24", "node")
        self._addr(c, f"{CLIENT_LINK6}/64", "node")
        self._addr(nd, f"{NODE_CLIENT4}/24", "client")
        self._addr(nd, f"{NODE_CLIENT6}/64", "client")
        self.ip(c, "route", "add", "default", "via", NODE_CLIENT4)
        self.ip(c, "-6", "route", "add", "default", "via", NODE_CLIENT6)
        self.ip(nd, "route", "add", RESOLVER_NET4, "via", CLIENT_LINK4)
        self.ip(nd, "-6", "route", "add", RESOLVER_NET6, "via", CLIENT_LINK6)
        # The delay line's TUN: made here, persistent, so it exists (and its routes with it)
        # before the line attaches; replies leave through wan's forwarding.
        self.ip(w, "tuntap", "add", "dev", TUN_NAME, "mode", "tun")
        self.ip(w, "link", "set", TUN_NAME, "up")
        for net in self.nets:
            self.ip(w, "-6" if ":" in net else "-4", "route", "add", net, "dev", TUN_NAME)

    # ---- using it ---------------------------------------------------------------------------

    def set_delays(self, delays: dict[str, float] | None = None,
                   jitter: float | None = None) -> None:
        """Change the sites' delays (name -> ms) and/or the jitter (percent) while running."""
        self.delay.set(delays, jitter)

    def add_client(self, addr: str) -> None:
        """Give the client namespace @addr (inside the resolver prefixes) to send from."""
        self._addr(self.client, f"{addr}/{128 if ':' in addr else 32}", "lo")

    def ns_socket(self, ns: str, kind: int = socket.SOCK_DGRAM,
                  family: int = socket.AF_INET, proto: int = 0) -> socket.socket:
        """A socket made inside namespace @ns."""
        from fwdlab import ns_socket
        return ns_socket(ns, kind, family, proto)

    def client_socket(self, family: int = socket.AF_INET,
                      kind: int = socket.SOCK_DGRAM) -> socket.socket:
        return self.ns_socket(self.client, kind, family)

    def start(self, name: str, argv: list[str], ns: str, log: str):
        """Run @argv in namespace @ns (stopped at close); returns the fwdlab.Proc."""
        from fwdlab import Proc
        p = Proc(name, argv, ns, self.dir / log)
        self.procs.append(p)
        return p


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
