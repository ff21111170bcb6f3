"""The node agent's kubelet API for `kubectl exec` (kubeletapi.py, podexec.py), served over plain
HTTP on the loopback to an aiohttp WebSocket client that speaks as kubectl does: it pings while
the command runs, and reads the exit status on channel 3.

kubectl (1.30 on) pings every 5 s and gives up after 61 s without a frame; a silent command run
without `-i` (`sbatch --wait` from the login pod) lost its stream after a minute while the agent
read nothing, so nothing answered the pings (the red clean-clone CI of stop 47, test_gitops).

What the fake can't model: the API server between kubectl and the kubelet (it proxies the
upgraded stream as it is, the Nodes declaring ExtendWebSocketsToKubelet), TLS and client
certificates, the pod's namespaces (the command runs on the host) and kubectl's 61 s deadline
itself (a ping here must be answered within 2 s)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, cast

import aiohttp
import aiohttp.web
from sunk.runtime.local import kubeletapi
from sunk.runtime.local.agent import Agent


class FakeStore:
    def resource(self, name: str) -> str:
        return name

    def find(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        if (resource, namespace, name) != ("v1/pods", "ns", "pod"):
            return None
        return {"metadata": {"namespace": namespace, "name": name, "uid": "u1"}}


class FakeAgent:
    """What the exec handler asks of the agent: the pod in its store, the command's argv."""

    store = FakeStore()

    def exec_argv(self, pod: dict[str, Any], container: str, command: Sequence[str]) -> list[str]:
        return list(command)  # on the host


async def _exec(query: str, stdin: bytes | None) -> tuple[list[str], dict[str, Any], bytes]:
    """Runs one exec through the handler; the frames that came back (PONG, channel numbers) in
    order, the Status on channel 3, and stdout."""
    api = kubeletapi.KubeletApi(cast(Agent, FakeAgent()))
    runner = aiohttp.web.AppRunner(api.app, access_log=None)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    seen: list[str] = []
    status: dict[str, Any] = {}
    stdout = b""
    try:
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{port}/exec/ns/pod/c?{query}"
            async with session.ws_connect(url, protocols=kubeletapi.PROTOCOLS, autoping=False) as ws:
                if stdin is not None:
                    await ws.send_bytes(b"\x00" + stdin)
                    await ws.send_bytes(b"\xff\x00")  # v5: stdin closed
                # The command is silent for ~1.5 s: each ping must be answered while it runs.
                for _ in range(3):
                    await ws.ping()
                    while True:
                        message = await ws.receive(timeout=2)
                        if message.type == aiohttp.WSMsgType.PONG:
                            seen.append("PONG")
                            break
                        if message.type != aiohttp.WSMsgType.BINARY:  # no pong within 2 s, or closed
                            raise AssertionError(f"a ping not answered: {message.type.name} after {seen}")
                        seen.append(str(message.data[0]))
                        if message.data[0] == 1:
                            stdout += message.data[1:]
                    await asyncio.sleep(0.3)
                async for message in ws:
                    if message.type != aiohttp.WSMsgType.BINARY:
                        continue
                    seen.append(str(message.data[0]))
                    if message.data[0] == 1:
                        stdout += message.data[1:]
                    elif message.data[0] == 3:
                        status = json.loads(message.data[1:])
    finally:
        await runner.cleanup()
    return seen, status, stdout


def _run(query: str, stdin: bytes | None = None) -> tuple[list[str], dict[str, Any], bytes]:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(asyncio.wait_for(_exec(query, stdin), 30))
    finally:
        loop.close()


def test_a_silent_command_without_stdin_answers_kubectl_s_pings_until_it_ends() -> None:
    seen, status, stdout = _run("command=sh&command=-c&command=sleep+1.5;+echo+done;+exit+3&output=1&error=1")
    assert seen[:3] == ["PONG", "PONG", "PONG"], seen
    assert stdout == b"done\n"
    assert status["status"] == "Failure" and status["details"]["causes"][0]["message"] == "3", status


def test_a_command_with_stdin_reads_it_and_answers_pings() -> None:
    seen, status, stdout = _run(
        "input=1&command=sh&command=-c&command=sleep+1.5;+cat&output=1&error=1", b"from stdin\n"
    )
    assert seen.count("PONG") == 3, seen
    assert stdout == b"from stdin\n"
    assert status == {"metadata": {}, "status": "Success"}
