"""KubeSim: the emulator on a localhost port, served from a background thread, with what tests
set and read (bindings, evictions, rejections, request counts, dropped watches, seeded objects)."""

from __future__ import annotations

import asyncio
import collections
import threading
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kmock
from kubernetes import client
from sunk.runtime.common.timefmt import rfc3339

from tests.support.kubesim.emulator import Emulator
from tests.support.kubesim.replies import RESOURCES


class KubeSim:
    """The emulator on a localhost port, served from a background thread (for synchronous tests)."""

    def __init__(self) -> None:
        self.url = ""
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._emulator: Emulator | None = None
        self._error: BaseException | None = None

    def start(self) -> KubeSim:
        self._thread = threading.Thread(target=self._run, name="kubesim", daemon=True)
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            raise RuntimeError(f"kmock did not start: {self._error!r}")
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:
            self._error = e
            self._ready.set()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        async with Emulator() as emulator, kmock.Server(emulator) as server:
            for key, (kind, namespaced) in RESOURCES.items():
                emulator.resources[key] = kmock.ResourceInfo(kind=kind, namespaced=namespaced)
            self._emulator = emulator
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> KubeSim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def _emu(self) -> Emulator:
        assert self._emulator is not None, "KubeSim not started"
        return self._emulator

    @property
    def bindings(self) -> list[tuple[str, str, str]]:
        """Every accepted binding as (namespace, pod, node), in order."""
        return list(self._emu.sim_bindings)

    @property
    def bound_at(self) -> dict[tuple[str, str], float]:
        """(namespace, pod) -> time.monotonic() of its accepted binding (benchmarks measure with it)."""
        return dict(self._emu.sim_bound_at)

    @property
    def evictions(self) -> list[tuple[str, str]]:
        """Every accepted eviction as (namespace, pod)."""
        return list(self._emu.sim_evictions)

    @property
    def rejections(self) -> list[tuple[str, str, str, str]]:
        """Every pod the kubelet model rejected as (namespace, pod, node, reason), in order."""
        return list(self._emu.sim_rejections)

    @property
    def admission(self) -> bool:
        """Whether Nodes admit pods as a kubelet would (default) or accept whatever is bound."""
        return self._emu.sim_admission

    @admission.setter
    def admission(self, value: bool) -> None:
        self._emu.sim_admission = value

    @property
    def block_evictions(self) -> bool:
        return self._emu.sim_block_evictions

    @block_evictions.setter
    def block_evictions(self, value: bool) -> None:
        self._emu.sim_block_evictions = value

    @property
    def fail_bindings(self) -> bool:
        return self._emu.sim_fail_bindings

    @fail_bindings.setter
    def fail_bindings(self, value: bool) -> None:
        self._emu.sim_fail_bindings = value

    @property
    def requests(self) -> collections.Counter[tuple[str, str]]:
        """Requests served so far by (verb, resource plural): list, watch, fetch, create, update
        (patches), delete."""
        return collections.Counter(self._emu.sim_requests)

    @property
    def bookmark_interval(self) -> float:
        return self._emu.sim_bookmark_interval

    @bookmark_interval.setter
    def bookmark_interval(self, seconds: float) -> None:
        self._emu.sim_bookmark_interval = seconds

    def _on_loop(self, fn: Any) -> Any:
        assert self._loop is not None, "KubeSim not started"

        async def locked() -> Any:
            async with self._emu._lock:
                return fn()

        return asyncio.run_coroutine_threadsafe(locked(), self._loop).result(timeout=600)

    def compact(self) -> None:
        """Forget the watch history (etcd compaction): a watch resuming from an earlier version
        gets 410 Gone and must list again."""

        def forget() -> None:
            self._emu.sim_history.clear()
            self._emu.sim_floor = self._emu.sim_version + 1

        self._on_loop(forget)

    def drop_watches(self, *, refuse: bool) -> None:
        """Ends every open watch (as an API server restart does); with `refuse`, new watches get
        503 until `drop_watches(refuse=False)`."""

        def drop() -> None:
            self._emu.sim_refuse_watches = refuse
            for queue in list(self._emu.sim_watchers):
                queue.put_nowait(None)

        self._on_loop(drop)

    def seed(self, resource: str, objects: Iterable[dict[str, Any]]) -> None:
        """Objects in place without a request or an event each, as if they had been there before
        anyone listed: `seed("v1/nodes", [...])`. Filled as create fills them."""

        def put() -> None:
            res = kmock.resource(resource)
            for obj in objects:
                meta = obj.setdefault("metadata", {})
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", rfc3339(datetime.now(UTC)))
                meta["resourceVersion"] = str(next(self._emu._versions))
                self._emu.sim_version = int(meta["resourceVersion"])
                self._emu.objects[(res, meta.get("namespace"), meta["name"])] = obj

        self._on_loop(put)

    def add_namespace(
        self, name: str, annotations: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None
    ) -> None:
        meta = {
            "name": name,
            "uid": str(uuid.uuid4()),
            "annotations": dict(annotations or {}),
            "labels": {"kubernetes.io/metadata.name": name, **(labels or {})},
        }
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}

        def put() -> None:
            version = next(self._emu._versions)
            self._emu.sim_version = version
            meta["resourceVersion"] = str(version)
            self._emu.sim_namespaces[name] = ns
            for queue in self._emu.sim_namespace_watchers:
                queue.put_nowait(ns)

        self._on_loop(put)

    def api_client(self) -> client.ApiClient:
        """The official client pointed at this server."""
        return client.ApiClient(client.Configuration(host=self.url))

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig pointing at this server (for a runtime started as its own process)."""
        return write_kubeconfig(self.url, path)


def write_kubeconfig(url: str, path: Path) -> Path:
    """A kubeconfig at `path` for the server at `url` (kmock accepts any token)."""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: sim\n"
        f"clusters:\n- name: sim\n  cluster:\n    server: {url}\n"
        "users:\n- name: sim\n  user:\n    token: kmock-accepts-anything\n"
        "contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: sim\n"
    )
    return path
