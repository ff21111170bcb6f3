"""Namespaces: kmock serves no cluster-scoped namespace reads, so kubesim does (get, list with
equality and existence label selectors, watch)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp.web

from tests.support.kubesim.watches import Watches


class Namespaces(Watches):
    """GET /api/v1/namespaces/{name}, the namespace list and its watch, from `add_namespace` (kmock
    has no cluster-scoped namespace reads). Namespaces are never modified or deleted."""

    def _init_namespaces(self) -> None:
        self.sim_namespaces: dict[str, dict[str, Any]] = {}
        self.sim_namespace_watchers: set[asyncio.Queue[dict[str, Any]]] = set()

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # kmock can't parse the cluster-scoped namespace list (/api/v1/namespaces): served here,
        # from `add_namespace`, with equality and existence label selectors as the API server has.
        if raw_request.method == "GET" and raw_request.path.rstrip("/") == "/api/v1/namespaces":
            wanted = [term.partition("=") for term in raw_request.query.get("labelSelector", "").split(",") if term]

            def matches(ns: dict[str, Any]) -> bool:
                labels = ns["metadata"]["labels"]
                return all(key in labels and (not eq or labels[key] == value) for key, eq, value in wanted)

            if raw_request.query.get("watch") in ("true", "1"):
                self.sim_requests[("watch", "namespaces")] += 1
                return await self._watch_namespaces(raw_request, matches)
            self.sim_requests[("list", "namespaces")] += 1
            items = [ns for ns in self.sim_namespaces.values() if matches(ns)]
            meta = {"resourceVersion": str(self.sim_version)}
            return aiohttp.web.json_response(
                {"apiVersion": "v1", "kind": "NamespaceList", "metadata": meta, "items": items}
            )
        return await super().__call__(raw_request)

    async def _watch_namespaces(
        self, request: aiohttp.web.BaseRequest, matches: Callable[[dict[str, Any]], bool]
    ) -> aiohttp.web.StreamResponse:
        since = int(request.query.get("resourceVersion") or 0)
        timeout = float(request.query.get("timeoutSeconds") or 0)
        bookmarks = request.query.get("allowWatchBookmarks") == "true"
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sim_namespace_watchers.add(queue)
        try:
            for ns in self.sim_namespaces.values():
                if int(ns["metadata"]["resourceVersion"]) > since:
                    await queue.put(ns)
            while True:
                wait = self.sim_bookmark_interval if bookmarks else None
                if deadline is not None:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    wait = left if wait is None else min(wait, left)
                try:
                    ns = await asyncio.wait_for(queue.get(), wait)
                    event = {"type": "ADDED", "object": ns} if matches(ns) else None
                except TimeoutError:
                    if not bookmarks:
                        continue
                    meta = {"resourceVersion": str(self.sim_version)}
                    event = {"type": "BOOKMARK", "object": {"kind": "Namespace", "apiVersion": "v1", "metadata": meta}}
                if event is not None:
                    await response.write(json.dumps(event).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.sim_namespace_watchers.discard(queue)
        return response
