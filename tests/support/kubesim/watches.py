"""Watches and lists as the API server serves them: resourceVersions from one counter, a bounded
history of snapshotted events (410 for a version older than it), bookmarks, label selectors
(an object leaving the selection is sent as DELETED)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import itertools
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import kmock
from kmock._internal import aiobus, rendering  # Request and Bus are not re-exported under a public path
from sunk.runtime.common.selectors import Requirement, parse_selector, selector_matches

HISTORY = 100_000
"""Watch events kept for watches that resume from a version (the API server keeps ~5 minutes)."""


class Channel:
    """What kmock calls a resource's bus: every event put is stamped with the next
    resourceVersion, snapshotted, recorded in the history, then broadcast."""

    def __init__(self, emulator: Watches, resource: Any) -> None:
        self.bus: aiobus.Bus[dict[str, Any]] = aiobus.Bus()
        self._emulator = emulator
        self._resource = resource

    async def put(self, event: dict[str, Any]) -> None:
        await self.bus.put(self._emulator.stamp(self._resource, event))


class Channels(dict[Any, Channel]):
    def __init__(self, emulator: Watches) -> None:
        super().__init__()
        self._emulator = emulator

    def __missing__(self, resource: Any) -> Channel:
        channel = self[resource] = Channel(self._emulator, resource)
        return channel


def visible(obj: Mapping[str, Any], namespace: str | None, selector: tuple[Requirement, ...]) -> bool:
    meta = obj.get("metadata") or {}
    return (namespace is None or meta.get("namespace") == namespace) and selector_matches(
        selector, meta.get("labels") or {}
    )


class Watches(kmock.KubernetesEmulator):
    """Lists and watches as informers use them: every write gets the next resourceVersion, a
    bounded history lets a watch resume from a version (410 below it), bookmarks, selectors."""

    def _init_watches(self) -> None:
        self._buses = Channels(self)  # type: ignore[assignment]
        self.sim_history: collections.deque[tuple[int, Any, dict[str, Any]]] = collections.deque(maxlen=HISTORY)
        self.sim_floor = 0
        """Watches from a version below this get 410 (their events left the history)."""
        self.sim_version = 0
        self.sim_requests: collections.Counter[tuple[str, str]] = collections.Counter()
        self.sim_bookmark_interval = 1.0
        self.sim_refuse_watches = False
        self.sim_watchers: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self._versions = itertools.count(1)

    def stamp(self, resource: Any, event: dict[str, Any]) -> dict[str, Any]:
        """The next resourceVersion on the written object (in place: kmock's raw dicts share
        their metadata with the stored version) and a snapshot of the event for the history."""
        version = next(self._versions)
        self.sim_version = version
        obj = event.get("object")
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            obj["metadata"]["resourceVersion"] = str(version)
        stamped = {"type": event.get("type"), "object": copy.deepcopy(obj)}
        if len(self.sim_history) == self.sim_history.maxlen:
            self.sim_floor = self.sim_history[0][0] + 1
        self.sim_history.append((version, resource, stamped))
        return stamped

    def _live(self, resource: Any, namespace: str | None, selector: tuple[Requirement, ...]) -> list[dict[str, Any]]:
        return [
            o.raw
            for (res, ns, _), o in self._objects.items()
            if res == resource
            and not o.deleted
            and (namespace is None or ns == namespace)
            and selector_matches(selector, (o.raw.get("metadata") or {}).get("labels") or {})
        ]

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        if request.resource is None or not any(r == request.resource for r in self._get_resources()):
            raise kmock.KubernetesResourceNotFoundError()
        selector = parse_selector(request.params.get("labelSelector", ""))
        async with self._lock:
            items = copy.deepcopy(self._live(request.resource, request.namespace, selector))
            version = self.sim_version
        return {"metadata": {"resourceVersion": str(version)}, "items": items}

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""  # the headers go out at once, as a server's do
        assert request.resource is not None
        params = request.params
        selector = parse_selector(params.get("labelSelector", ""))
        since = params.get("resourceVersion", "")
        timeout = float(params.get("timeoutSeconds") or 0)
        bookmarks = params.get("allowWatchBookmarks") == "true"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        channel = cast(Channel, self._buses[request.resource])
        async with self._lock:
            mark = await channel.bus.mark()
            if since in ("", "0"):
                first = [
                    {"type": "ADDED", "object": copy.deepcopy(o)}
                    for o in self._live(request.resource, request.namespace, selector)
                ]
            elif int(since) + 1 < self.sim_floor:
                status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired"}
                first = [{"type": "ERROR", "object": {**status, "message": f"too old resource version: {since}"}}]
            else:
                first = [
                    e
                    for v, res, e in self.sim_history
                    if res == request.resource
                    and v > int(since)
                    and (
                        request.namespace is None
                        or e["object"].get("metadata", {}).get("namespace") == request.namespace
                    )
                ]
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.sim_watchers.add(queue)

        async def pump() -> None:
            async for event in channel.bus.stream(since=mark):
                await queue.put(event)

        for event in first:
            yield self._shown(event, request.namespace, selector)
            if event["type"] == "ERROR":
                return
        task = asyncio.create_task(pump())
        try:
            while True:
                wait = self.sim_bookmark_interval if bookmarks else None
                if deadline is not None:
                    left = deadline - loop.time()
                    if left <= 0:
                        return
                    wait = left if wait is None else min(wait, left)
                try:
                    item = await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    if bookmarks:
                        meta = {"resourceVersion": str(self.sim_version)}
                        yield {"type": "BOOKMARK", "object": {"kind": "", "apiVersion": "", "metadata": meta}}
                    continue
                if item is None:
                    return  # dropped by the test (an API server restart)
                if (
                    request.namespace is None
                    or (item["object"].get("metadata") or {}).get("namespace") == request.namespace
                ):
                    yield self._shown(item, request.namespace, selector)
        finally:
            self.sim_watchers.discard(queue)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await channel.bus.unmark(mark)

    @staticmethod
    def _shown(event: dict[str, Any], namespace: str | None, selector: tuple[Requirement, ...]) -> dict[str, Any]:
        if event["type"] in ("ADDED", "MODIFIED") and not visible(event["object"], namespace, selector):
            return {"type": "DELETED", "object": event["object"]}
        return event
