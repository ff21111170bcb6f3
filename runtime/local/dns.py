"""The cluster's DNS server: what CoreDNS answers in a cluster, for the names the node agent knows.

Pods' /etc/resolv.conf names it (on the bridge address, UDP port 53) with the search path a
kubelet writes (`<namespace>.svc.cluster.local svc.cluster.local cluster.local`, ndots:5). It
answers A queries for Service and headless pod names under cluster.local from the same table as
the pods' /etc/hosts (agent.py), an empty answer for other types of a known name, and NXDOMAIN for
every other name, at once: a resolver that gets no answer retries, and Slurm's name lookups
retry with back-off on a temporary failure (measured 2026-11: slurmctld stopped answering after a
reconfigure while it retried names no server answered).

Not modelled: TCP, AAAA records, SRV records, PTR (reverse) lookups, forwarding names outside
the cluster (nothing outside is reachable anyway).
"""

from __future__ import annotations

import asyncio
import ipaddress
import struct
from collections.abc import Callable, Mapping
from typing import cast

NOERROR, NXDOMAIN, FORMERR = 0, 3, 1
TYPE_A, CLASS_IN = 1, 1
TTL = 5
"""Seconds a resolver may keep an answer: pods come and go."""


def _question(packet: bytes) -> tuple[str, int, int, int] | None:
    """(name, type, class, end offset) of the first question, or None for a malformed packet."""
    labels, offset = [], 12
    while True:
        if offset >= len(packet):
            return None
        length = packet[offset]
        offset += 1
        if length == 0:
            break
        if length & 0xC0 or offset + length > len(packet):
            return None
        labels.append(packet[offset : offset + length].decode("ascii", "replace").lower())
        offset += length
    if offset + 4 > len(packet):
        return None
    qtype, qclass = struct.unpack("!HH", packet[offset : offset + 4])
    return ".".join(labels), qtype, qclass, offset + 4


def answer(packet: bytes, names: Mapping[str, list[str]]) -> bytes | None:
    """The response to query `packet` from `names` (lower-case name -> addresses); None to drop it."""
    if len(packet) < 12:
        return None
    ident, flags, qdcount = struct.unpack("!HHH", packet[:6])
    if flags & 0x8000:  # a response, not a query
        return None
    question = _question(packet) if qdcount == 1 else None
    if question is None:
        return struct.pack("!HHHHHH", ident, 0x8180 | FORMERR, 0, 0, 0, 0)
    name, qtype, qclass, end = question
    addresses = names.get(name.rstrip("."))
    rcode = NXDOMAIN if addresses is None else NOERROR
    records = b""
    count = 0
    if addresses and qtype == TYPE_A and qclass == CLASS_IN:
        for address in addresses:
            records += struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, TTL, 4) + ipaddress.IPv4Address(address).packed
            count += 1
    recursion = flags & 0x0100
    header = struct.pack("!HHHHHH", ident, 0x8080 | recursion | rcode, 1, count, 0, 0)
    return header + packet[12:end] + records


class DnsServer(asyncio.DatagramProtocol):
    def __init__(self, table: Callable[[], Mapping[str, list[str]]]) -> None:
        self.table = table
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)  # what a datagram endpoint gets

    def datagram_received(self, data: bytes, addr: tuple[str | int, int]) -> None:
        reply = answer(data, self.table())
        if reply is not None and self.transport is not None:
            self.transport.sendto(reply, addr)


async def serve(host: str, table: Callable[[], Mapping[str, list[str]]], port: int = 53) -> asyncio.DatagramTransport:
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(lambda: DnsServer(table), local_addr=(host, port))
    return transport
