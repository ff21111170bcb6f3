"""The cluster's DNS answers: A records for known names, NXDOMAIN at once for any other."""

from __future__ import annotations

import struct

from sunk.runtime.local.dns import answer


def _query(name: str, qtype: int = 1) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + labels + struct.pack("!HH", qtype, 1)


TABLE = {"db.ns.svc.cluster.local": ["10.233.0.5", "10.233.0.6"]}


def test_a_known_name_gets_its_addresses() -> None:
    reply = answer(_query("DB.ns.svc.cluster.local"), TABLE)
    assert reply is not None
    ident, flags, qd, an = struct.unpack("!HHHH", reply[:8])
    assert (ident, flags & 0xF, qd, an) == (0x1234, 0, 1, 2)
    assert reply[-4:] == bytes([10, 233, 0, 6]) and reply[-20:-16] == bytes([10, 233, 0, 5])


def test_an_unknown_name_is_nxdomain_and_other_types_are_empty() -> None:
    reply = answer(_query("example.com"), TABLE)
    assert reply is not None and struct.unpack("!H", reply[2:4])[0] & 0xF == 3
    aaaa = answer(_query("db.ns.svc.cluster.local", qtype=28), TABLE)
    assert aaaa is not None and struct.unpack("!HH", aaaa[2:4] + aaaa[6:8]) == (0x8180, 0)
    assert answer(b"\x00" * 5, TABLE) is None


def test_the_server_answers_over_udp() -> None:
    import asyncio
    import socket

    from sunk.runtime.local.dns import serve

    async def ask() -> bytes:
        transport = await serve("127.0.0.1", lambda: TABLE, port=0)
        port = transport.get_extra_info("sockname")[1]
        loop = asyncio.get_running_loop()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.setblocking(False)
            await loop.sock_connect(client, ("127.0.0.1", port))
            await loop.sock_sendall(client, _query("db.ns.svc.cluster.local"))
            reply = await asyncio.wait_for(loop.sock_recv(client, 512), 5)
        transport.close()
        return reply

    loop = asyncio.new_event_loop()  # its own loop: the main thread's stays unset for other tests
    try:
        reply = loop.run_until_complete(ask())
    finally:
        loop.close()
    assert struct.unpack("!H", reply[6:8])[0] == 2
