"""The emulator kubesim serves: kmock's KubernetesEmulator with watches, namespaces and pods as an
API server and kubelets treat them, and the route from a request to the part serving it."""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import aiohttp.web
import kmock
from kmock._internal import rendering  # Request and Bus are not re-exported under a public path
from sunk.runtime.common.timefmt import rfc3339

from tests.support.kubesim.namespaces import Namespaces
from tests.support.kubesim.pods import Pods
from tests.support.kubesim.replies import NAMESPACE_PATH, node_selector, realistic_node, status_reply

_MATCHING: contextvars.ContextVar[rendering.Request | None] = contextvars.ContextVar("kubesim_matching", default=None)
"""The request this task serves: aiohttp serves each request in a task of its own, and kmock's
matching of reactions (`request in reaction`) runs in that task."""


class Emulator(Namespaces, Pods):
    """kmock's KubernetesEmulator with kubesim's additions: routes each request to the part that
    serves it, fills what an API server fills on create, and keeps kmock's request log empty."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._init_watches()
        self._init_namespaces()
        self._init_pods()
        self._in_flight: list[rendering.Request] = []

    def _KubernetesEmulator__get_objs(self, request: rendering.Request, strict: bool) -> list[Any]:
        """kmock finds the object of a read or write by scanning every object (20 ms a request at
        20,000 objects): a named request is a key lookup here, with the same answer."""
        if request.name is not None and request.resource is not None and (strict or request.namespace is not None):
            key = (request.resource, request.namespace, request.name)
            return [self._objects[key]] if key in self._objects else []
        return super()._KubernetesEmulator__get_objs(request, strict)  # type: ignore[misc, no-any-return]

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is not None:
            self.sim_requests[
                (str(request.action.name if request.action else "?").lower(), request.resource.plural or "")
            ] += 1
        self._in_flight.append(request)
        token = _MATCHING.set(request)
        try:
            return await self._serve(request)
        finally:
            _MATCHING.reset(token)
            self._in_flight.remove(request)
            del self._requests[:]  # nobody reads the log; it only grows

    def __iter__(self) -> Iterator[rendering.Request]:
        # kmock finds the reaction for a request by scanning its request log with every reaction's
        # filters: 40-90 ms per request after a few hundred (quadratic over a run). The request
        # being matched is the one its task serves: only it, inside a request's task (each watch
        # in flight cost every request one more filter check per reaction: a fifth of kmock's CPU
        # in the 1,000-pod burst of bench/scheduler_bench.py, 2026-12-06); outside one, those in flight.
        current = _MATCHING.get()
        yield from [current] if current is not None else list(self._in_flight)

    async def _serve(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        method = str(request.method.value).upper()
        res = request.resource
        if request.action == kmock.action.WATCH and self.sim_refuse_watches:
            return status_reply(503, "ServiceUnavailable", "watches refused by the test (API server restarting)")
        if res is not None and res.plural == "pods" and request.subresource == "binding" and method == "POST":
            return await self._bind(request)
        if res is not None and res.plural == "pods" and request.subresource == "eviction" and method == "POST":
            return await self._evict(request)
        node = node_selector(request.params.get("fieldSelector", ""))
        if node is not None and res is not None and res.plural == "pods" and request.action == kmock.action.LIST:
            return await self._pods_on_node_list(request.namespace, node)
        match = NAMESPACE_PATH.match(request.url.path)
        if match and method == "GET" and res is not None and res.plural is None:
            ns = self.sim_namespaces.get(match.group(1))
            if ns is None:
                return status_reply(404, "NotFound", f'namespaces "{match.group(1)}" not found')
            return aiohttp.web.json_response(ns)
        if request.action == kmock.action.CREATE and res is not None and res.plural == "nodes":
            refused = realistic_node(request.data)
            if refused is not None:
                return refused
        if request.action == kmock.action.CREATE and res is not None and isinstance(request.data, dict):
            meta = request.data.setdefault("metadata", {})
            if request.namespace and not meta.get("namespace"):
                meta["namespace"] = request.namespace
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", rfc3339(datetime.now(UTC)))
            meta.setdefault("generation", 1)
            meta["resourceVersion"] = str(next(self._versions))
            if res.plural == "pods":
                request.data.setdefault("status", {}).setdefault("phase", "Pending")
        response = await super()._handle(request)
        written = request.action in (kmock.action.CREATE, kmock.action.UPDATE) and response.status < 300
        if written and res is not None and res.plural in ("pods", "nodes") and self.sim_admission:
            data = request.data if isinstance(request.data, dict) else {}
            name = request.name or (data.get("metadata") or {}).get("name")
            if res.plural == "pods":
                await self._kubelet(res, request.namespace or (data.get("metadata") or {}).get("namespace"), name)
            elif request.action == kmock.action.CREATE:
                await self._kubelet_starts(name)
        return response
