"""kmock as the Kubernetes API for the operator's tests, served from a background thread so the
operator's synchronous official client can talk to it.

The emulator fills what an API server fills on create (namespace from the URL, uid,
creationTimestamp, generation) and declares the resources the operator lists, so an empty
list answers [] instead of 404. kmock ignores label selectors: the operator filters again
itself, so nothing here depends on that laxness."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import kmock
import pytest
from kmock._internal import enums, rendering
from kubernetes import client

RESOURCES = {
    "v1/pods": ("Pod", True),
    "v1/nodes": ("Node", False),
    "v1/services": ("Service", True),
    "v1/configmaps": ("ConfigMap", True),
    "v1/secrets": ("Secret", True),
    "v1/events": ("Event", True),
    "coordination.k8s.io/v1/leases": ("Lease", True),
    "slurm.sunk.dev/v1alpha1/nodesets": ("NodeSet", True),
}


class Emulator(kmock.KubernetesEmulator):
    async def _handle(self, request: rendering.Request) -> Any:
        if request.resource is not None and request.action == enums.action.CREATE and isinstance(request.data, dict):
            meta = request.data.setdefault("metadata", {})
            if request.namespace and not meta.get("namespace"):
                meta["namespace"] = request.namespace
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
            meta.setdefault("generation", 1)
        return await super()._handle(request)


class KubeServer:
    def __init__(self) -> None:
        self.url = ""
        self.emulator: Emulator | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="kmock", daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with Emulator() as emulator, kmock.Server(emulator) as server:
            for key, (kind, namespaced) in RESOURCES.items():
                emulator.resources[key] = kmock.ResourceInfo(kind=kind, namespaced=namespaced)
            self.emulator = emulator
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> KubeServer:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("kmock did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    def api_client(self) -> Any:
        cfg = client.Configuration()
        cfg.host = self.url
        return client.ApiClient(cfg)


@pytest.fixture()
def kube_server() -> Iterator[KubeServer]:
    with KubeServer() as server:
        yield server
