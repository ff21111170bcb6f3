"""What the real control plane's test modules share (tests/runtime/local/controlplane): kubectl on
a ControlPlane's kubeconfig, `get` as JSON, a wait that names what never happened, and the asyncio
loop on a thread that node agents run on, as the cluster's process runs them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from sunk.runtime.local.controlplane import ControlPlane

from tests.support import waiting
from tests.support.localcluster import kubectl_at

T = TypeVar("T")


def kubectl_run(
    plane: ControlPlane, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The real kubectl on the plane's admin kubeconfig (localcluster.kubectl_at)."""
    return kubectl_at(plane.kubeconfig, *args, stdin=stdin, check=check, timeout=timeout)


def kubectl(plane: ControlPlane, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    """What a kubectl that must succeed prints."""
    return kubectl_run(plane, *args, stdin=stdin, timeout=timeout).stdout


def get(plane: ControlPlane, *args: str) -> Any:
    """`kubectl get -o json ARGS`, parsed."""
    return json.loads(kubectl(plane, "get", "-o", "json", *args))


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 180, interval: float = 1.0) -> T:
    """`check()` until it returns something true (a real controller acts within seconds; a loaded
    machine stretches that), failing the test naming `what` after `timeout` seconds."""
    return waiting.wait_for(what, check, timeout=timeout, interval=interval)


class Loop:
    """An asyncio loop on a thread: the agent's, as the cluster's process runs it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 120) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def close(self) -> None:
        async def drain() -> None:  # the agent's pod tasks end before the loop (no coroutine left unfinished)
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(drain(), 30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
