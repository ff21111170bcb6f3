"""NodePort and LoadBalancer Services on 127.0.0.1: what kube-proxy and a cloud's load balancer do
for them, for the local cluster's one host.

Every TCP port of a Service of type NodePort or LoadBalancer gets a nodePort (the one it names,
else a free one of 30000-32767, written into its spec as the API server's allocator does) and a
listener on 127.0.0.1 at that port, which relays each connection to a Ready pod behind the Service
(the first, by name) at the port's targetPort. A LoadBalancer Service's status then names
127.0.0.1 as its ingress, once every listener of the Service is open. So `ssh -p PORT
user@127.0.0.1` reaches a login pod whose Service is a LoadBalancer.

Not modelled: UDP and SCTP ports, load balancing across pods, externalTrafficPolicy, the host's
other addresses, and a port another process already holds (the Service keeps it; the relay is
logged and tried again every few seconds, and a LoadBalancer gets no ingress until it listens).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Mapping
from typing import Any

from .apitypes import ApiError, Event, Obj, Store

log = logging.getLogger("sunk.local.ports")

NODE_PORTS = range(30000, 32768)
EXPOSED = ("NodePort", "LoadBalancer")
RETRY = 5.0
"""Seconds between tries of a nodePort that could not listen."""


def _ready(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _members(service: Mapping[str, Any], pods: list[Obj]) -> list[Obj]:
    """The Ready pods with an IP that the Service selects, by name."""
    selector = (service.get("spec") or {}).get("selector") or {}
    if not selector:
        return []
    namespace = service["metadata"]["namespace"]

    def selected(p: Obj) -> bool:
        labels = p["metadata"].get("labels") or {}
        return p["metadata"]["namespace"] == namespace and all(labels.get(k) == v for k, v in selector.items())

    found = [p for p in pods if selected(p) and _ready(p) and (p.get("status") or {}).get("podIP")]
    return sorted(found, key=lambda p: p["metadata"]["name"])


def _container_port(pod: Obj, name: str) -> int | None:
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == name:
                return int(p["containerPort"])
    return None


def target_of(service: Mapping[str, Any], port: Mapping[str, Any], pods: list[Obj]) -> tuple[str, int] | None:
    """(pod IP, container port) a connection to `port` of `service` goes to, or None."""
    members = _members(service, pods)
    if not members:
        return None
    pod = members[0]
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, str) and not target.isdigit():
        number = _container_port(pod, target)
        return None if number is None else (pod["status"]["podIP"], number)
    return pod["status"]["podIP"], int(target)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class Ports:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.services = store.resource("v1/services")
        self.pods = store.resource("v1/pods")
        self.listeners: dict[int, tuple[asyncio.Server, str, str]] = {}
        """nodePort -> (server, service uid, port name or number)."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        self.store.listen(self._on_event)
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def _on_event(self, event: Event) -> None:
        if event.resource == "v1/services":
            self._wake.set()

    async def _loop(self) -> None:
        complete = True
        while True:
            # A nodePort that could not listen (another process held it) is tried again every
            # RETRY seconds; its Service gets no ingress meanwhile.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), None if complete else RETRY)
            self._wake.clear()
            try:
                complete = await self.reconcile()
            except Exception:
                log.exception("ports")

    async def reconcile(self) -> bool:
        """Every exposed port listening and every LoadBalancer's ingress published: whether every
        wanted nodePort has its listener."""
        wanted: dict[int, tuple[str, str]] = {}
        exposed = [
            svc for svc in list(self.store.items(self.services)) if (svc.get("spec") or {}).get("type") in EXPOSED
        ]
        for svc in exposed:
            wanted |= self._allocate(svc, set(self.listeners) | set(wanted))
        await self._listen(wanted)
        # A cloud's load balancer publishes its address once it takes connections: the ingress is
        # written only when every port of the Service has its listener (a client that read it
        # earlier met a refused connection; CI saw it).
        unready = {owner for port, (owner, _) in wanted.items() if port not in self.listeners}
        for svc in exposed:
            if svc["spec"].get("type") == "LoadBalancer" and svc["metadata"]["uid"] not in unready:
                self._publish(svc)
        return not unready

    def _allocate(self, svc: Obj, taken: set[int]) -> dict[int, tuple[str, str]]:
        """nodePort -> (Service uid, port) of `svc`'s TCP ports, a free nodePort written into those
        without one."""
        spec, meta = svc.get("spec") or {}, svc["metadata"]
        ports = [dict(p) for p in spec.get("ports") or []]
        wanted: dict[int, tuple[str, str]] = {}
        changed = False
        for p in ports:
            if p.get("protocol", "TCP") != "TCP":
                continue
            if not p.get("nodePort"):
                p["nodePort"] = next(n for n in NODE_PORTS if n not in taken and _free(n))
                changed = True
            taken.add(int(p["nodePort"]))
            wanted[int(p["nodePort"])] = (meta["uid"], str(p.get("name") or p.get("port")))
        if changed:
            with contextlib.suppress(ApiError):
                self.store.patch(self.services, meta["namespace"], meta["name"], "merge", {"spec": {"ports": ports}})
        return wanted

    def _publish(self, svc: Obj) -> None:
        """127.0.0.1 as the LoadBalancer Service's ingress, where it is not already."""
        meta, ingress = svc["metadata"], [{"ip": "127.0.0.1"}]
        # The real API server adds ipMode VIP (its default) to what is written: compared by address.
        current = [
            {"ip": i.get("ip")} for i in ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        ]
        if current != ingress:
            body = {"status": {"loadBalancer": {"ingress": ingress}}}
            with contextlib.suppress(ApiError):
                self.store.patch(self.services, meta["namespace"], meta["name"], "merge", body, "status")

    async def _listen(self, wanted: dict[int, tuple[str, str]]) -> None:
        """Listeners for exactly the wanted nodePorts."""
        for port in [p for p in self.listeners if p not in wanted or self.listeners[p][1:] != wanted[p]]:
            server = self.listeners.pop(port)[0]
            server.close()
        for port, (uid, name) in wanted.items():
            if port in self.listeners:
                continue
            try:
                server = await asyncio.start_server(self._relay_for(uid, name), "127.0.0.1", port)
            except OSError as err:
                log.warning("nodePort %d: %s; not relayed", port, err)
                continue
            self.listeners[port] = (server, uid, name)

    def _relay_for(self, uid: str, name: str) -> Any:
        async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            service = next((s for s in self.store.items(self.services) if s["metadata"]["uid"] == uid), None)
            port = next(
                (
                    p
                    for p in ((service or {}).get("spec") or {}).get("ports") or []
                    if str(p.get("name") or p.get("port")) == name
                ),
                None,
            )
            target = target_of(service, port, list(self.store.items(self.pods))) if service and port else None
            if target is None:
                writer.close()
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*target)
            except OSError:
                writer.close()
                return

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                with contextlib.suppress(OSError, ConnectionError):
                    while chunk := await src.read(65536):
                        dst.write(chunk)
                        await dst.drain()
                with contextlib.suppress(OSError, ConnectionError):
                    dst.close()

            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        return relay

    def close(self) -> None:
        for server, _, _ in self.listeners.values():
            server.close()
        self.listeners.clear()
        if self._task is not None:
            self._task.cancel()
