"""`kubectl port-forward` at the kubelet API: SPDY/3.1 framing tunnelled in a WebSocket
(subprotocol `SPDY/3.1+portforward.k8s.io`, what kubectl 1.32 opens and the API server 1.36
proxies to a Node that declares ExtendWebSocketsToKubelet).

Inside the tunnel, kubectl opens two SPDY streams per local connection, each a SYN_STREAM whose
headers say `streamtype` (`error` or `data`), `port` and `requestid`; the kubelet accepts each with
a SYN_REPLY, connects to the port on the pod's own loopback (a relay process in the pod's network
namespace, as the kubelet's runtimes do) and copies the data stream both ways; a failure to connect
is written on the error stream. PINGs are answered. Frames as SPDY/3 defines them
(http://www.chromium.org/spdy/spdy-protocol/spdy-protocol-draft3): a control frame is the bit 1,
version 3, its type, flags and a 24-bit length; a data frame the stream id, flags (FIN 1) and
length; header blocks are zlib streams (one per direction, sync-flushed per frame) primed with
the protocol's dictionary.

Not modelled: SPDY flow control (WINDOW_UPDATE is ignored, as kubectl's spdystream does), SETTINGS,
server push, streams' priorities.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import sys
import zlib
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import aiohttp.web

PROTOCOL = "SPDY/3.1+portforward.k8s.io"
VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
CHUNK = 32 * 1024
"""Bytes per DATA frame from the pod (under SPDY's initial 64 KiB window)."""

_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
    "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
    "content-base", "content-encoding", "content-language", "content-length", "content-location",
    "content-md5", "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host",
    "if-match", "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified",
    "location", "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer",
    "retry-after", "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via",
    "warning", "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url",
    "public", "set-cookie", "keep-alive", "origin",
)  # fmt: skip
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 "
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()
"""SPDY/3's header compression dictionary (the draft's section 2.6.10.1): the words, each after its
32-bit length, then the tail."""

RELAY = """
import socket, sys, threading
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
except OSError as err:
    sys.stderr.write(str(err)); sys.exit(1)
def up():
    while data := sys.stdin.buffer.read1(65536):
        s.sendall(data)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while data := s.recv(65536):
    sys.stdout.buffer.write(data); sys.stdout.buffer.flush()
"""
"""Run in the pod's network namespace: its loopback's `port` as stdin and stdout."""


def control(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def data(stream: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">II", stream & 0x7FFFFFFF, (flags << 24) | len(payload)) + payload


def header_block(headers: dict[str, str]) -> bytes:
    out = struct.pack(">I", len(headers))
    for name, value in headers.items():
        out += struct.pack(">I", len(name)) + name.encode() + struct.pack(">I", len(value)) + value.encode()
    return out


def parse_headers(raw: bytes) -> dict[str, str]:
    (count,), at, out = struct.unpack_from(">I", raw), 4, {}
    for _ in range(count):
        (size,) = struct.unpack_from(">I", raw, at)
        name = raw[at + 4 : at + 4 + size].decode()
        at += 4 + size
        (size,) = struct.unpack_from(">I", raw, at)
        out[name.lower()] = raw[at + 4 : at + 4 + size].decode()
        at += 4 + size
    return out


def frames(buffer: bytearray) -> list[tuple[bool, int, int, bytes]]:
    """Complete frames taken off the front of `buffer`: (control, type or stream id, flags, payload)."""
    out = []
    while len(buffer) >= 8:
        first, second = struct.unpack_from(">II", buffer)
        length = second & 0xFFFFFF
        if len(buffer) < 8 + length:
            break
        payload = bytes(buffer[8 : 8 + length])
        del buffer[: 8 + length]
        is_control = bool(first & 0x80000000)
        out.append((is_control, first & 0xFFFF if is_control else first & 0x7FFFFFFF, second >> 24, payload))
    return out


@dataclass
class _Stream:
    headers: dict[str, str]
    inbound: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    """What the client sent on it, for the pod; None once it closed its side."""


class Session:
    """One tunnelled SPDY connection: the streams kubectl opens and their copies to the pod."""

    def __init__(self, ws: aiohttp.web.WebSocketResponse, netns: Sequence[str]) -> None:
        self.ws, self.netns = ws, list(netns)
        self.inflate = zlib.decompressobj(zdict=DICTIONARY)
        self.deflate = zlib.compressobj(zdict=DICTIONARY)
        self.streams: dict[int, _Stream] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        buffer = bytearray()
        try:
            async for message in self.ws:
                if message.type != aiohttp.WSMsgType.BINARY:
                    continue
                buffer += message.data
                for is_control, kind, flags, payload in frames(buffer):
                    await (self._control(kind, flags, payload) if is_control else self._data(kind, flags, payload))
        finally:
            for task in self.tasks:
                task.cancel()

    async def _send(self, frame: bytes) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.ws.send_bytes(frame)

    async def _control(self, kind: int, flags: int, payload: bytes) -> None:
        if kind == SYN_STREAM:
            stream_id = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF
            headers = parse_headers(self.inflate.decompress(payload[10:]))
            stream = self.streams[stream_id] = _Stream(headers)
            block = self.deflate.compress(header_block({})) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
            await self._send(control(SYN_REPLY, 0, struct.pack(">I", stream_id) + block))
            if flags & FLAG_FIN:
                stream.inbound.put_nowait(None)
            if headers.get("streamtype") == "data":
                self._spawn(self._forward(stream_id, stream))
        elif kind == PING:
            await self._send(control(PING, 0, payload))
        elif kind == RST_STREAM:
            gone = self.streams.pop(struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF, None)
            if gone is not None:
                gone.inbound.put_nowait(None)
        elif kind == GOAWAY:
            await self.ws.close()

    async def _data(self, stream_id: int, flags: int, payload: bytes) -> None:
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        if payload:
            stream.inbound.put_nowait(payload)
        if flags & FLAG_FIN:
            stream.inbound.put_nowait(None)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _error_stream(self, request: str) -> int | None:
        return next(
            (
                i
                for i, s in self.streams.items()
                if s.headers.get("streamtype") == "error" and s.headers.get("requestid") == request
            ),
            None,
        )

    async def _forward(self, stream_id: int, stream: _Stream) -> None:
        port = stream.headers.get("port", "")
        relay = await asyncio.create_subprocess_exec(
            *self.netns, sys.executable, "-c", RELAY, port,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert relay.stdin is not None and relay.stdout is not None and relay.stderr is not None

        async def up() -> None:
            assert relay.stdin is not None
            while (chunk := await stream.inbound.get()) is not None:
                relay.stdin.write(chunk)
                with contextlib.suppress(ConnectionError):
                    await relay.stdin.drain()
            with contextlib.suppress(ConnectionError, OSError):
                relay.stdin.close()

        feeding = asyncio.ensure_future(up())
        try:
            while chunk := await relay.stdout.read(CHUNK):
                await self._send(data(stream_id, 0, chunk))
            code = await relay.wait()
            if code != 0:
                said = (await relay.stderr.read()).decode(errors="replace").strip()
                error = self._error_stream(stream.headers.get("requestid", ""))
                if error is not None:
                    message = f"error forwarding port {port} to pod: {said}"
                    await self._send(data(error, FLAG_FIN, message.encode()))
            await self._send(data(stream_id, FLAG_FIN, b""))
        finally:
            feeding.cancel()
            if relay.returncode is None:
                relay.kill()
                await relay.wait()


async def serve(request: aiohttp.web.Request, netns: Callable[[], Sequence[str]]) -> aiohttp.web.WebSocketResponse:
    """Answer a port-forward WebSocket: the SPDY session until kubectl closes it."""
    ws = aiohttp.web.WebSocketResponse(protocols=(PROTOCOL,))
    await ws.prepare(request)
    await Session(ws, netns()).run()
    return ws
