"""Fixtures for the syncer's real-Slurm tests: the harness and kmock as the Kubernetes API.

kmock is lax (label selectors and resourceVersion ignored, no status/spec split); the syncer
filters its pod list itself and writes conditions with guarded JSON patches, so nothing here
leans on that laxness."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import kmock
import pytest


class KubeServer:
    """kmock's emulator on a localhost port, served from a background thread."""

    def __init__(self) -> None:
        self.url = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="kmock", daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator) as server:
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


@pytest.fixture(scope="module")
def kube_server() -> Iterator[KubeServer]:
    with KubeServer() as server:
        yield server
