"""`kubectl exec` over WebSocket for the local API server: the command the node agent gives
(agent.py `exec_argv`) run with its stdin (channel 0), stdout (1) and stderr (2) as pipes, or on
a pseudo-terminal for `kubectl exec -it` (its output on channel 1, window sizes from channel 4);
v5.channel.k8s.io's close of stdin (channel 255) too. The API server writes the exit status on
channel 3.

Not modelled: SPDY (the API server refuses it), `kubectl port-forward`, a
terminal's stderr apart from its stdout."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import struct
import termios

import aiohttp
import aiohttp.web


async def exec_pipes(ws: aiohttp.web.WebSocketResponse, argv: list[str], stdin: bool) -> int:
    """A command with stdin (channel 0), stdout (1) and stderr (2) as pipes; its exit status.

    The client's frames are read all along, stdin or not: aiohttp answers a ping only while
    someone reads, and kubectl (1.30 on) pings every 5 s and gives up after 61 s without a frame
    ("next reader: ... i/o timeout"), so a silent command without `-i` (`sbatch --wait`) failed
    after a minute where a kubelet's stream carries on."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )

    async def pump(stream: asyncio.StreamReader | None, channel: int) -> None:
        assert stream is not None
        while chunk := await stream.read(65536):
            await ws.send_bytes(bytes([channel]) + chunk)

    async def feed() -> None:
        async for message in ws:  # pings are answered inside this read
            if proc.stdin is None or message.type != aiohttp.WSMsgType.BINARY or not message.data:
                continue
            channel, data = message.data[0], message.data[1:]
            if channel == 0 and data:
                proc.stdin.write(data)
                await proc.stdin.drain()
            elif channel == 255 and data[:1] == b"\x00":  # v5: the client closed stdin
                proc.stdin.close()
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()

    feeder = asyncio.create_task(feed())
    try:
        await asyncio.gather(pump(proc.stdout, 1), pump(proc.stderr, 2))
        code = await proc.wait()
    finally:
        feeder.cancel()
    return code


async def exec_tty(ws: aiohttp.web.WebSocketResponse, argv: list[str]) -> int:
    """`kubectl exec -it`: the command on a new pseudo-terminal (its controlling terminal, as a
    container runtime gives one), stdin from channel 0, the terminal's output on channel 1, and
    window sizes from channel 4 ({"Width", "Height"}); its exit status."""
    master, slave = os.openpty()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=slave, stdout=slave, stderr=slave, env={**os.environ, "SUNK_LOCAL_TTY": "1"}
    )
    os.close(slave)
    loop = asyncio.get_running_loop()
    output: asyncio.Queue[bytes] = asyncio.Queue()

    def readable() -> None:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every process holding the terminal is gone
            chunk = b""
        if not chunk:
            loop.remove_reader(master)
        output.put_nowait(chunk)

    loop.add_reader(master, readable)

    async def pump() -> None:
        while chunk := await output.get():
            await ws.send_bytes(b"\x01" + chunk)

    async def feed() -> None:
        async for message in ws:
            if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                continue
            channel, data = message.data[0], message.data[1:]
            if channel == 0 and data:
                with contextlib.suppress(OSError):
                    os.write(master, data)
            elif channel == 4 and data:
                with contextlib.suppress(ValueError, OSError):
                    size = json.loads(data)
                    winsize = struct.pack("HHHH", int(size.get("Height", 24)), int(size.get("Width", 80)), 0, 0)
                    fcntl.ioctl(master, termios.TIOCSWINSZ, winsize)

    feeder = asyncio.create_task(feed())
    try:
        await pump()
        code = await proc.wait()
    finally:
        feeder.cancel()
        with contextlib.suppress(ValueError, OSError):
            loop.remove_reader(master)
        os.close(master)
    return code


def exit_status(code: int) -> dict[str, object]:
    """The Status written on channel 3 once the command ended (what kubectl turns into its own
    exit code)."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: exit status {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }
