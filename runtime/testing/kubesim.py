"""A Kubernetes API for tests and benchmarks: kmock's emulator served from a background thread,
with the gaps the operator, syncer and scheduler hit filled, and a kubelet's admission.

Not used in production (kmock is a dev dependency). Added on top of kmock's KubernetesEmulator:
- RESOURCES declared up front, so listing a kind with no objects answers [] instead of 404
  (PodDisruptionBudgets included: policy/v1 poddisruptionbudgets can be created and listed).
- Nodes: a Node must carry status.allocatable or status.capacity (every kubelet reports both;
  a Node without them is refused with 422 rather than silently admitting everything); allocatable
  is filled from capacity when only capacity is given (a kubelet with nothing reserved), and
  allocatable "pods" defaults to 110 (the kubelet's --max-pods).
- Kubelet admission (`sunk.runtime.testing.kubelet.admit`, on by default, `admission=False` to
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
- GET /api/v1/namespaces/{name} and the namespace list (label selectors `key` and `key=value`)
  from `add_namespace` (kmock has no cluster-scoped namespace reads).
- create fills what an API server fills: metadata.namespace from the URL (namespaced watches drop
  objects without it), uid, creationTimestamp, generation and resourceVersion, and
  status.phase=Pending for pods.
- kmock's request log is not kept (its reaction lookup scans it: quadratic over a run).
Label and field selectors stay ignored (except a pod list's spec.nodeName=<node>), as does
resourceVersion on writes: every user filters client-side and none relies on optimistic
concurrency from this server.

Not modelled: the kubelet's other admission handlers (node selector and affinity, taints, host
ports, the CPU manager's exclusive cores, the device plugin's assignment of device IDs, topology
manager), eviction under node pressure, containers starting (no Running phase, no readiness),
graceful termination, PDB status fields (the budget is computed at each eviction; expected pods
are the matching pods, not the owners' replica counts), PDBs' "disrupted pods" bookkeeping and the
API server's defaulting of requests from limits (the admission model applies it itself).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp.web
import kmock
from kmock._internal import rendering  # Request is not re-exported under a public module path
from kubernetes import client

from ..common.timefmt import rfc3339
from . import kubelet

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


class _Emulator(kmock.KubernetesEmulator):
    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.sim_namespaces: dict[str, dict[str, Any]] = {}
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
            items = [
                ns
                for ns in self.sim_namespaces.values()
                if all(
                    key in ns["metadata"]["labels"] and (not eq or ns["metadata"]["labels"][key] == value)
                    for key, eq, value in wanted
                )
            ]
            return aiohttp.web.json_response(
                {"apiVersion": "v1", "kind": "NamespaceList", "metadata": {"resourceVersion": "1"}, "items": items}
            )
        return await super().__call__(raw_request)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
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
        body = {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "..."}, "items": items}
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

    def add_namespace(
        self, name: str, annotations: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None
    ) -> None:
        meta = {
            "name": name,
            "uid": str(uuid.uuid4()),
            "annotations": dict(annotations or {}),
            "labels": {"kubernetes.io/metadata.name": name, **(labels or {})},
        }
        self._emu.sim_namespaces[name] = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}

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
