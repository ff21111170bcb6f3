"""The kubelet API the API server calls on a Node (port 10250 of its InternalIP), served by the node
agent for its Nodes on the real control plane (nodeagents.py):

- `GET /containerLogs/NS/POD/CONTAINER`: `kubectl logs`, with `tailLines`, `previous` and
  `follow` (the file read on as it grows, until the pod is gone or the client leaves);
- `/exec/NS/POD/CONTAINER?command=...&input=1&output=1&error=1&tty=1`: `kubectl exec` over
  WebSocket (podexec.py's channels: v5.channel.k8s.io, v4 before it), proxied as it is by the API
  server since the Nodes declare ExtendWebSocketsToKubelet (Kubernetes 1.36); the exit status on
  channel 3;
- `/attach/NS/POD/CONTAINER`: `kubectl attach`, the container's output from now on, over the
  same channels, until it exits or the client leaves;
- `/portForward/NS/POD`: `kubectl port-forward`, SPDY tunnelled in a WebSocket (portforward.py),
  to the port on the pod's own loopback.

TLS with a serving certificate of the agent's own CA (a kubelet's default is self-signed), and only
clients with a certificate of the cluster's CA (the API server's --kubelet-client-certificate).

Not modelled: SPDY (answered 400: the API server speaks WebSocket to a Node that declares it),
a container's stdin for attach (containers run with stdin closed: `stdin: true` is not modelled),
the kubelet's other endpoints (/stats, /metrics, /pods, /run).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, BinaryIO

import aiohttp
import aiohttp.web

from . import podexec, portforward
from .agent import Agent
from .apitypes import ApiError, Obj

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
FOLLOW_POLL = 0.2
"""Seconds between two looks at a followed log file that had nothing new."""


def _true(request: aiohttp.web.Request, name: str) -> bool:
    return request.query.get(name) in ("1", "true")


class KubeletApi:
    """The handlers, over the agent that runs the pods (its store finds them)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.app = aiohttp.web.Application()
        route = "/{namespace}/{pod}/{container}"
        self.app.router.add_get("/containerLogs" + route, self._logs)
        for method in ("GET", "POST"):
            self.app.router.add_route(method, "/exec" + route, self._exec)
            self.app.router.add_route(method, "/attach" + route, self._attach)
            self.app.router.add_route(method, "/portForward/{namespace}/{pod}", self._port_forward)

    async def serve(self, address: str, port: int, pki_dir: Path, cluster_ca: Path) -> aiohttp.web.AppRunner:
        from . import pki

        _, cert, key = pki.make_certificates(pki_dir, [address], ["localhost"])
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(cluster_ca))
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_cert_chain(str(cert), str(key))
        runner = aiohttp.web.AppRunner(self.app, access_log=None)
        await runner.setup()
        await aiohttp.web.TCPSite(runner, address, port, ssl_context=context).start()
        return runner

    def _pod(self, request: aiohttp.web.Request) -> Obj:
        match = request.match_info
        store = self.agent.store
        pod = store.find(store.resource("v1/pods"), match["namespace"], match["pod"])
        if pod is None:
            raise aiohttp.web.HTTPNotFound(text=f"pod {match['namespace']}/{match['pod']} does not exist")
        return pod

    def _alive(self, pod: Obj) -> bool:
        store, meta = self.agent.store, pod["metadata"]
        current = store.find(store.resource("v1/pods"), meta["namespace"], meta["name"])
        return current is not None and current["metadata"].get("uid") == meta.get("uid")

    def _log_path(self, pod: Obj, container: str, previous: bool) -> Path:
        try:
            path = self.agent.log_path(pod, container, previous)
        except ApiError as err:
            raise aiohttp.web.HTTPBadGateway(text=err.message) from None
        if path is None or not path.exists():
            raise aiohttp.web.HTTPBadRequest(text=f'container "{container}" is waiting to start')
        return path

    async def _logs(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        pod = self._pod(request)
        path = self._log_path(pod, request.match_info["container"], _true(request, "previous"))
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        with path.open("rb") as handle:
            data = handle.read()
            tail = request.query.get("tailLines")
            if tail is not None:
                data = b"".join(data.splitlines(keepends=True)[-int(tail) :]) if int(tail) > 0 else b""
            await response.write(data)
            if _true(request, "follow"):
                await self._follow(handle, pod, response.write)
        return response

    async def _follow(self, handle: BinaryIO, pod: Obj, write: Callable[[bytes], Awaitable[Any]]) -> None:
        """Hands on what is added to the open log file until the pod is gone (or the writer fails:
        the client left)."""
        while True:
            chunk = handle.read()
            if chunk:
                try:
                    await write(chunk)
                except (ConnectionError, RuntimeError):
                    return
                continue
            if not self._alive(pod):
                return
            await asyncio.sleep(FOLLOW_POLL)

    async def _exec(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        pod, container = self._pod(request), request.match_info["container"]
        command = request.query.getall("command", [])
        if not command:
            raise aiohttp.web.HTTPBadRequest(text="you must specify at least one command for the container")
        try:
            argv = self.agent.exec_argv(pod, container, command)
        except ApiError as err:
            raise aiohttp.web.HTTPBadRequest(text=err.message) from None
        ws = await self._upgrade(request)
        if _true(request, "tty"):
            code = await podexec.exec_tty(ws, argv)
        else:
            code = await podexec.exec_pipes(ws, argv, _true(request, "input"))
        await ws.send_bytes(b"\x03" + json.dumps(podexec.exit_status(code)).encode())
        await ws.close()
        return ws

    async def _attach(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        pod, container = self._pod(request), request.match_info["container"]
        path = self._log_path(pod, container, False)
        ws = await self._upgrade(request)
        with path.open("rb") as handle:
            handle.seek(0, 2)  # attach shows what the container writes from now on
            follow = asyncio.ensure_future(self._follow(handle, pod, lambda chunk: ws.send_bytes(b"\x01" + chunk)))
            closed = asyncio.ensure_future(self._drain(ws))
            await asyncio.wait({follow, closed}, return_when=asyncio.FIRST_COMPLETED)
            for task in (follow, closed):
                task.cancel()
        if not ws.closed:
            await ws.send_bytes(b"\x03" + json.dumps(podexec.exit_status(0)).encode())
            await ws.close()
        return ws

    async def _port_forward(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        pod = self._pod(request)
        try:
            netns = self.agent.netns_argv(pod)
        except ApiError as err:
            raise aiohttp.web.HTTPBadRequest(text=err.message) from None
        if request.headers.get("Upgrade", "").lower() != "websocket":
            raise aiohttp.web.HTTPBadRequest(
                text="this kubelet forwards ports over WebSocket (SPDY/3.1+portforward.k8s.io) only"
            )
        return await portforward.serve(request, lambda: netns)

    async def _drain(self, ws: aiohttp.web.WebSocketResponse) -> None:
        """Reads the client's frames (stdin, resizes: not modelled for attach) until it closes."""
        async for _ in ws:
            pass

    async def _upgrade(self, request: aiohttp.web.Request) -> aiohttp.web.WebSocketResponse:
        if request.headers.get("Upgrade", "").lower() != "websocket":
            raise aiohttp.web.HTTPBadRequest(
                text="this kubelet streams over WebSocket (v5.channel.k8s.io) only; SPDY is not served"
            )
        ws = aiohttp.web.WebSocketResponse(protocols=PROTOCOLS)
        await ws.prepare(request)
        return ws
