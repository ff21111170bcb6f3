"""A Kubernetes API for tests and benchmarks: kmock's emulator served from a background thread,
with the gaps the operator, syncer and scheduler hit filled, and a kubelet's admission.

Not used in production (kmock is a dev dependency). Added on top of kmock's KubernetesEmulator:
- RESOURCES declared up front, so listing a kind with no objects answers [] instead of 404
  (PodDisruptionBudgets included: policy/v1 poddisruptionbudgets can be created and listed).
- Nodes: a Node must carry status.allocatable or status.capacity (every kubelet reports both;
  a Node without them is refused with 422 rather than silently admitting everything); allocatable
  is filled from capacity when only capacity is given (a kubelet with nothing reserved), and
  allocatable "pods" defaults to 110 (the kubelet's --max-pods).
- Kubelet admission (`tests.support.kubelet.admit`, on by default, `admission=False` to
  switch off): when a pod gets a Node (Binding, or created/patched with spec.nodeName), its
  effective requests plus those of the pods the "kubelet" admitted there before and that are not
  Succeeded/Failed must fit the Node's allocatable for every resource the pod requests, and one
  more pod must fit allocatable "pods"; else the pod turns Failed with reason OutOf<resource> and
  the kubelet's "Pod was rejected: Node didn't have enough resource: ..." message. Pods bound to a
  Node that does not exist wait for it (admitted when it is created, as a kubelet registering).
  `rejections` lists them. Admitted pods keep their phase: nothing runs containers, so tests set
  Running/Ready themselves.
- pods/eviction: PodDisruptionBudgets of the pod's namespace whose selector matches it are honoured
  (`kubelet.eviction`: 429 TooManyRequests "Cannot evict pod as it would violate the pod's
  disruption budget." below minAvailable / above maxUnavailable, int or percent; 500 for two PDBs;
  Pending, terminal and deleting pods skip the check); an allowed eviction deletes the pod at once
  (no kubelet to finish a graceful deletion); 409 for a uid precondition that does not match;
  `block_evictions` answers 429 for every pod, as a PDB with no budget left would.
- pods/binding: sets spec.nodeName, copies the Binding's annotations onto the pod, sets
  PodScheduled=True, answers 201 with a Status; 409 when the pod is already bound or the uid
  differs (as the API server does); `fail_bindings` makes it answer 500 (an API outage).
- GET /api/v1/namespaces/{name}, the namespace list (label selectors `key` and `key=value`) and
  its watch from `add_namespace` (kmock has no cluster-scoped namespace reads): a namespace added
  later is an ADDED event to open watches; a watch from a version streams the namespaces added
  after it, then bookmarks until its `timeoutSeconds`. Namespaces are never modified or deleted.
- create fills what an API server fills: metadata.namespace from the URL (namespaced watches drop
  objects without it), uid, creationTimestamp, generation and resourceVersion, and
  status.phase=Pending for pods.
- kmock's request log is not kept (its reaction lookup scans it: quadratic over a run).
- Watches as informers use them: every write gets the next resourceVersion (objects and events
  carry it; a list answers the current one); a watch from version V streams only the events
  after V from a bounded history, and from a version older than that history (`compact()` forgets
  it) one ERROR event with code 410, as the API server does; without a version it starts with
  every object as ADDED. `timeoutSeconds` ends a watch; with `allowWatchBookmarks` a BOOKMARK
  goes out every `bookmark_interval` seconds. Each event is a snapshot of the object when it was
  written (kmock sends the live dict, which later writes would change under a slow reader).
- Label selectors (`key`, `!key`, `=`, `==`, `!=`, `in`, `notin`) filter lists and watches; an
  object that does not match is sent to a watch as DELETED (it may just have left the selection;
  an API server only sends that when it had matched before, and an informer ignores a deletion of
  what it does not have). Of field selectors only a pod list's spec.nodeName=<node> is honoured.
- `drop_watches()` ends open watches and can refuse new ones (an API server restarting);
  `requests` counts requests by (verb, resource plural), for tests that assert a quiet
  controller makes none; `seed()` puts many objects in place without a request each (a
  benchmark's 10,000 Nodes), as if they had existed before anyone watched.
resourceVersion preconditions on writes are not checked: no user relies on optimistic
concurrency from this server. Lists are not paged (no `continue`: a client pages once).

Not modelled: the kubelet's other admission handlers (node selector and affinity, taints, host
ports, the CPU manager's exclusive cores, the device plugin's assignment of device IDs, topology
manager), eviction under node pressure, containers starting (no Running phase, no readiness),
graceful termination, PDB status fields (the budget is computed at each eviction; expected pods
are the matching pods, not the owners' replica counts), PDBs' "disrupted pods" bookkeeping and the
API server's defaulting of requests from limits (the admission model applies it itself).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import aiohttp.web
import kmock
from kmock._internal import aiobus, rendering  # Request and Bus are not re-exported under a public path
from kubernetes import client
from sunk.runtime.common.selectors import Requirement, parse_selector, selector_matches
from sunk.runtime.common.timefmt import rfc3339

from tests.support import kubelet

# "group/version/plural" -> (kind, namespaced): every kind the runtime lists or watches.
RESOURCES: dict[str, tuple[str, bool]] = {
    "v1/pods": ("Pod", True),
    "v1/nodes": ("Node", False),
    "v1/services": ("Service", True),
    "v1/configmaps": ("ConfigMap", True),
    "v1/secrets": ("Secret", True),
    "v1/events": ("Event", True),
    "coordination.k8s.io/v1/leases": ("Lease", True),
    "slurm.sunk.dev/v1alpha1/nodesets": ("NodeSet", True),
    "policy/v1/poddisruptionbudgets": ("PodDisruptionBudget", True),
}

_NAMESPACE = re.compile(r"^/api/v1/namespaces/([^/]+)/?$")


def _status(code: int, reason: str, message: str, causes: Sequence[str] = ()) -> aiohttp.web.Response:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "code": code}
    body |= {"reason": reason, "message": message, "status": "Success" if code < 400 else "Failure"}
    if causes:
        body["details"] = {"causes": [{"type": "DisruptionBudget", "message": c} for c in causes]}
    return aiohttp.web.json_response(body, status=code)


def _node_selector(selector: str) -> str | None:
    """The Node of a `spec.nodeName=<node>` term in a field selector, if there is one."""
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if key.strip() == "spec.nodeName" and not key.endswith("!"):
            return value.strip().lstrip("=")
    return None


def _realistic_node(node: Any) -> aiohttp.web.Response | None:
    """Fill allocatable as a kubelet reports it, or refuse a Node no kubelet would report."""
    if not isinstance(node, dict):
        return None
    status = node.setdefault("status", {})
    alloc = status.get("allocatable") or dict(status.get("capacity") or {})
    if not alloc.get("cpu") or not alloc.get("memory"):
        name = (node.get("metadata") or {}).get("name")
        why = "has no status.allocatable (or status.capacity) with cpu and memory; every kubelet reports them"
        return _status(422, "Invalid", f'Node "{name}" is invalid in kubesim: it {why}')
    alloc.setdefault("pods", str(kubelet.DEFAULT_MAX_PODS))
    status["allocatable"] = alloc
    status.setdefault("capacity", dict(alloc))
    return None


HISTORY = 100_000
"""Watch events kept for watches that resume from a version (the API server keeps ~5 minutes)."""


class _Channel:
    """What kmock calls a resource's bus: every event put is stamped with the next
    resourceVersion, snapshotted, recorded in the history, then broadcast."""

    def __init__(self, emulator: _Emulator, resource: Any) -> None:
        self.bus: aiobus.Bus[dict[str, Any]] = aiobus.Bus()
        self._emulator = emulator
        self._resource = resource

    async def put(self, event: dict[str, Any]) -> None:
        await self.bus.put(self._emulator.stamp(self._resource, event))


class _Channels(dict[Any, _Channel]):
    def __init__(self, emulator: _Emulator) -> None:
        super().__init__()
        self._emulator = emulator

    def __missing__(self, resource: Any) -> _Channel:
        channel = self[resource] = _Channel(self._emulator, resource)
        return channel


def _visible(obj: Mapping[str, Any], namespace: str | None, selector: tuple[Requirement, ...]) -> bool:
    meta = obj.get("metadata") or {}
    return (namespace is None or meta.get("namespace") == namespace) and selector_matches(
        selector, meta.get("labels") or {}
    )


class _Emulator(kmock.KubernetesEmulator):
    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._buses = _Channels(self)  # type: ignore[assignment]
        self.sim_history: collections.deque[tuple[int, Any, dict[str, Any]]] = collections.deque(maxlen=HISTORY)
        self.sim_floor = 0
        """Watches from a version below this get 410 (their events left the history)."""
        self.sim_version = 0
        self.sim_requests: collections.Counter[tuple[str, str]] = collections.Counter()
        self.sim_bookmark_interval = 1.0
        self.sim_refuse_watches = False
        self.sim_watchers: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self.sim_namespaces: dict[str, dict[str, Any]] = {}
        self.sim_namespace_watchers: set[asyncio.Queue[dict[str, Any]]] = set()
        self.sim_bindings: list[tuple[str, str, str]] = []
        self.sim_bound_at: dict[tuple[str, str], float] = {}
        self.sim_fail_bindings = False
        self.sim_block_evictions = False
        self.sim_evictions: list[tuple[str, str]] = []
        self.sim_admission = True
        self.sim_admitted: dict[str, str] = {}
        """Pod uid -> the Node whose kubelet admitted it (in admission order)."""
        self.sim_rejections: list[tuple[str, str, str, str]] = []
        self._versions = itertools.count(1)
        self._in_flight: list[rendering.Request] = []

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

    def _KubernetesEmulator__get_objs(self, request: rendering.Request, strict: bool) -> list[Any]:
        """kmock finds the object of a read or write by scanning every object (20 ms a request at
        20,000 objects): a named request is a key lookup here, with the same answer."""
        if request.name is not None and request.resource is not None and (strict or request.namespace is not None):
            key = (request.resource, request.namespace, request.name)
            return [self._objects[key]] if key in self._objects else []
        return super()._KubernetesEmulator__get_objs(request, strict)  # type: ignore[misc, no-any-return]

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
        channel = cast(_Channel, self._buses[request.resource])
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
        if event["type"] in ("ADDED", "MODIFIED") and not _visible(event["object"], namespace, selector):
            return {"type": "DELETED", "object": event["object"]}
        return event

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is not None:
            self.sim_requests[
                (str(request.action.name if request.action else "?").lower(), request.resource.plural or "")
            ] += 1
        self._in_flight.append(request)
        try:
            return await self._serve(request)
        finally:
            self._in_flight.remove(request)
            del self._requests[:]  # nobody reads the log; it only grows

    def __iter__(self) -> Iterator[rendering.Request]:
        # kmock finds the reaction for a request by scanning its request log with every reaction's
        # filters: 40-90 ms per request after a few hundred (quadratic over a run). The request
        # being matched is always one in flight, so those are all the scan needs to see.
        yield from list(self._in_flight)

    async def _serve(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        method = str(request.method.value).upper()
        res = request.resource
        if request.action == kmock.action.WATCH and self.sim_refuse_watches:
            return _status(503, "ServiceUnavailable", "watches refused by the test (API server restarting)")
        if res is not None and res.plural == "pods" and request.subresource == "binding" and method == "POST":
            return await self._bind(request)
        if res is not None and res.plural == "pods" and request.subresource == "eviction" and method == "POST":
            return await self._evict(request)
        node = _node_selector(request.params.get("fieldSelector", ""))
        if node is not None and res is not None and res.plural == "pods" and request.action == kmock.action.LIST:
            return await self._pods_on_node_list(request.namespace, node)
        match = _NAMESPACE.match(request.url.path)
        if match and method == "GET" and res is not None and res.plural is None:
            ns = self.sim_namespaces.get(match.group(1))
            if ns is None:
                return _status(404, "NotFound", f'namespaces "{match.group(1)}" not found')
            return aiohttp.web.json_response(ns)
        if request.action == kmock.action.CREATE and res is not None and res.plural == "nodes":
            refused = _realistic_node(request.data)
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
                await self._kubelet(request.namespace or (data.get("metadata") or {}).get("namespace"), name)
            elif request.action == kmock.action.CREATE:
                await self._kubelet_starts(name)
        return response

    async def _pods_on_node_list(self, namespace: str | None, node: str) -> aiohttp.web.StreamResponse:
        """spec.nodeName=<node>: the one field selector honoured (the API server indexes it, and
        the scheduler reads a Node's pods with it; answering every pod instead costs the
        benchmark a list of all pods per Node)."""
        async with self._lock:
            items = [
                o.raw
                for o in self._pods_on(node)
                if namespace is None or o.raw["metadata"].get("namespace") == namespace
            ]
        body = {
            "apiVersion": "v1",
            "kind": "PodList",
            "metadata": {"resourceVersion": str(self.sim_version)},
            "items": items,
        }
        return aiohttp.web.json_response(body)

    def _node(self, name: str) -> dict[str, Any] | None:
        for (resource, _, obj_name), obj in self.objects.items():
            if resource.plural == "nodes" and obj_name == name and not obj.deleted:
                return obj.raw
        return None

    def _pods_on(self, node: str) -> list[Any]:
        return [obj for _, obj in self._pods_keyed_on(node)]

    def _pods_keyed_on(self, node: str) -> list[tuple[Any, Any]]:
        """(resource, object) of every live pod whose spec.nodeName is `node`, oldest first."""
        return [
            (resource, obj)
            for (resource, _, _), obj in self.objects.items()
            if resource.plural == "pods" and not obj.deleted and (obj.raw.get("spec") or {}).get("nodeName") == node
        ]

    async def _kubelet(self, namespace: str | None, name: str | None) -> None:
        """A kubelet's resource admission of a pod that just got (or was created with) a Node."""
        async with self._lock:
            found = next(
                (
                    (resource, o)
                    for (resource, ns, n), o in self.objects.items()
                    if resource.plural == "pods" and ns == namespace and n == name and not o.deleted
                ),
                None,
            )
            if found is not None:
                await self._admit(*found)

    async def _kubelet_starts(self, node: str | None) -> None:
        """A Node appears: its kubelet admits the pods already bound to it, oldest first."""
        async with self._lock:
            for resource, obj in self._pods_keyed_on(node or ""):
                await self._admit(resource, obj)

    async def _admit(self, resource: Any, obj: Any) -> None:
        raw = obj.raw
        uid, node_name = raw["metadata"].get("uid", ""), (raw.get("spec") or {}).get("nodeName")
        if not node_name or uid in self.sim_admitted or kubelet.terminated(raw):
            return
        node = self._node(node_name)
        if node is None:
            return  # no kubelet yet; it admits the pod when the Node registers
        admitted = [o.raw for o in self._pods_on(node_name) if o.raw["metadata"].get("uid") in self.sim_admitted]
        rejection = kubelet.admit(raw, node, admitted)
        if rejection is None:
            self.sim_admitted[uid] = node_name
            return
        meta = raw["metadata"]
        self.sim_rejections.append((meta.get("namespace", ""), meta.get("name", ""), node_name, rejection.reason))
        status = {"phase": "Failed", "reason": rejection.reason, "message": rejection.message}
        obj.patch({"status": status, "metadata": {"resourceVersion": str(next(self._versions))}})
        await self._buses[resource].put({"type": "MODIFIED", "object": obj.raw})

    async def _bind(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if self.sim_fail_bindings:
            return _status(500, "InternalError", "binding refused by the test (simulated API outage)")
        body = request.data if isinstance(request.data, dict) else {}
        node = (body.get("target") or {}).get("name")
        meta = body.get("metadata") or {}
        if not node:
            return _status(400, "BadRequest", "binding has no target")
        if request.resource is None or request.name is None:
            return _status(404, "NotFound", "no pod in the binding URL")
        key = (request.resource, request.namespace, request.name)
        async with self._lock:
            if key not in self.objects or self.objects[key].deleted:
                return _status(404, "NotFound", f'pods "{request.name}" not found')
            obj = self.objects[key]
            current = obj.raw
            if (current.get("spec") or {}).get("nodeName"):
                msg = f'pod {request.name} is already assigned to node "{current["spec"]["nodeName"]}"'
                return _status(
                    409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{request.name}": {msg}'
                )
            if meta.get("uid") and meta["uid"] != current["metadata"].get("uid"):
                return _status(409, "Conflict", "Precondition failed: UID in precondition does not match")
            conditions = [
                c for c in (current.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"
            ]
            conditions.append({"type": "PodScheduled", "status": "True"})
            obj.patch(
                {
                    "spec": {"nodeName": node},
                    "metadata": {
                        "annotations": dict(meta.get("annotations") or {}),
                        "resourceVersion": str(next(self._versions)),
                    },
                    "status": {"conditions": conditions},
                }
            )
            self.sim_bindings.append((request.namespace or "", request.name, node))
            self.sim_bound_at[(request.namespace or "", request.name)] = time.monotonic()
            await self._buses[request.resource].put({"type": "MODIFIED", "object": obj.raw})
            if self.sim_admission:
                await self._admit(request.resource, obj)
        return _status(201, "", "")

    def _namespace_view(self, namespace: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(PodDisruptionBudgets, pods) of one namespace."""
        pdbs, pods = [], []
        for (resource, ns, _), obj in self.objects.items():
            if ns != namespace or obj.deleted:
                continue
            if resource.plural == "poddisruptionbudgets":
                pdbs.append(obj.raw)
            elif resource.plural == "pods":
                pods.append(obj.raw)
        return pdbs, pods

    async def _evict(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if self.sim_block_evictions:
            return _status(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.")
        if request.resource is None or request.name is None:
            return _status(404, "NotFound", "no pod in the eviction URL")
        body = request.data if isinstance(request.data, dict) else {}
        uid = (((body.get("deleteOptions") or {}).get("preconditions")) or {}).get("uid")
        key = (request.resource, request.namespace, request.name)
        async with self._lock:
            if key not in self.objects or self.objects[key].deleted:
                return _status(404, "NotFound", f'pods "{request.name}" not found')
            obj = self.objects[key]
            if uid and uid != obj.raw["metadata"].get("uid"):
                return _status(409, "Conflict", "Precondition failed: UID in precondition does not match")
            if self.sim_admission:
                refusal = kubelet.eviction(obj.raw, *self._namespace_view(request.namespace or ""))
                if refusal is not None:
                    return _status(refusal.code, refusal.reason, refusal.message, refusal.causes)
            # No kubelet here to finish a graceful deletion: the pod goes at once.
            raw = obj.raw
            obj.delete()
            self.sim_evictions.append((request.namespace or "", request.name))
            await self._buses[request.resource].put({"type": "DELETED", "object": raw})
        return _status(201, "", "")


class KubeSim:
    """The emulator on a localhost port, served from a background thread (for synchronous tests)."""

    def __init__(self) -> None:
        self.url = ""
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._emulator: _Emulator | None = None
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
        async with _Emulator() as emulator, kmock.Server(emulator) as server:
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
    def _emu(self) -> _Emulator:
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
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: sim\n"
            f"clusters:\n- name: sim\n  cluster:\n    server: {self.url}\n"
            "users:\n- name: sim\n  user:\n    token: kmock-accepts-anything\n"
            "contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: sim\n"
        )
        return path
