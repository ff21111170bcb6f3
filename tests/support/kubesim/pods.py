"""Pods as a kubelet and the API server's pod subresources treat them: the kubelet's admission
(tests/support/kubelet.py) when a pod gets a Node, pods/binding, pods/eviction honouring
PodDisruptionBudgets, and the spec.nodeName pod list."""

from __future__ import annotations

import time
from typing import Any

import aiohttp.web
from kmock._internal import rendering  # Request and Bus are not re-exported under a public path

from tests.support import kubelet
from tests.support.kubesim.replies import status_reply
from tests.support.kubesim.watches import Watches


class Pods(Watches):
    """What a kubelet and the pods' subresources do: admission on binding (or creation with a
    Node), pods/binding, pods/eviction with PodDisruptionBudgets, a pod list by Node."""

    def _init_pods(self) -> None:
        self.sim_bindings: list[tuple[str, str, str]] = []
        self.sim_bound_at: dict[tuple[str, str], float] = {}
        self.sim_fail_bindings = False
        self.sim_block_evictions = False
        self.sim_evictions: list[tuple[str, str]] = []
        self.sim_admission = True
        self.sim_admitted: dict[str, str] = {}
        """Pod uid -> the Node whose kubelet admitted it (in admission order)."""
        self._admitted_on: dict[str, dict[str, Any]] = {}
        """Node -> uid -> the pod object its kubelet admitted and that has not ended since (the
        pods admission counts: a kubelet keeps its own list, it does not search every pod)."""
        self._nodes: dict[str, Any] = {}
        """Node name -> its object, found once (a Node deleted since is looked up again)."""
        self.sim_rejections: list[tuple[str, str, str, str]] = []

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
        known = self._nodes.get(name)
        if known is not None and not known.deleted:
            raw: dict[str, Any] = known.raw
            return raw
        for (resource, _, obj_name), obj in self.objects.items():
            if resource.plural == "nodes" and obj_name == name and not obj.deleted:
                self._nodes[name] = obj
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

    async def _kubelet(self, resource: Any, namespace: str | None, name: str | None) -> None:
        """A kubelet's resource admission of a pod that just got (or was created with) a Node."""
        async with self._lock:
            key: Any = (resource, namespace, name)
            if key in self.objects and not (obj := self.objects[key]).deleted:
                await self._admit(resource, obj)

    def _still_admitted(self, node: str) -> list[dict[str, Any]]:
        """The pods `node`'s kubelet admitted that are still there and have not ended (an ended
        pod never runs again: it leaves the list for good)."""
        mine = self._admitted_on.get(node, {})
        for uid, obj in list(mine.items()):
            if obj.deleted or obj.raw["metadata"].get("uid") != uid or kubelet.terminated(obj.raw):
                del mine[uid]  # (a deleted object has no raw form: deleted is asked first)
        return [obj.raw for obj in mine.values()]

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
        rejection = kubelet.admit(raw, node, self._still_admitted(node_name))
        if rejection is None:
            self.sim_admitted[uid] = node_name
            self._admitted_on.setdefault(node_name, {})[uid] = obj
            return
        meta = raw["metadata"]
        self.sim_rejections.append((meta.get("namespace", ""), meta.get("name", ""), node_name, rejection.reason))
        status = {"phase": "Failed", "reason": rejection.reason, "message": rejection.message}
        obj.patch({"status": status, "metadata": {"resourceVersion": str(next(self._versions))}})
        await self._buses[resource].put({"type": "MODIFIED", "object": obj.raw})

    async def _bind(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if self.sim_fail_bindings:
            return status_reply(500, "InternalError", "binding refused by the test (simulated API outage)")
        body = request.data if isinstance(request.data, dict) else {}
        node = (body.get("target") or {}).get("name")
        meta = body.get("metadata") or {}
        if not node:
            return status_reply(400, "BadRequest", "binding has no target")
        if request.resource is None or request.name is None:
            return status_reply(404, "NotFound", "no pod in the binding URL")
        key = (request.resource, request.namespace, request.name)
        async with self._lock:
            if key not in self.objects or self.objects[key].deleted:
                return status_reply(404, "NotFound", f'pods "{request.name}" not found')
            obj = self.objects[key]
            current = obj.raw
            if (current.get("spec") or {}).get("nodeName"):
                msg = f'pod {request.name} is already assigned to node "{current["spec"]["nodeName"]}"'
                return status_reply(
                    409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{request.name}": {msg}'
                )
            if meta.get("uid") and meta["uid"] != current["metadata"].get("uid"):
                return status_reply(409, "Conflict", "Precondition failed: UID in precondition does not match")
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
        return status_reply(201, "", "")

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
            return status_reply(
                429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget."
            )
        if request.resource is None or request.name is None:
            return status_reply(404, "NotFound", "no pod in the eviction URL")
        body = request.data if isinstance(request.data, dict) else {}
        uid = (((body.get("deleteOptions") or {}).get("preconditions")) or {}).get("uid")
        key = (request.resource, request.namespace, request.name)
        async with self._lock:
            if key not in self.objects or self.objects[key].deleted:
                return status_reply(404, "NotFound", f'pods "{request.name}" not found')
            obj = self.objects[key]
            if uid and uid != obj.raw["metadata"].get("uid"):
                return status_reply(409, "Conflict", "Precondition failed: UID in precondition does not match")
            if self.sim_admission:
                refusal = kubelet.eviction(obj.raw, *self._namespace_view(request.namespace or ""))
                if refusal is not None:
                    return status_reply(refusal.code, refusal.reason, refusal.message, refusal.causes)
            # No kubelet here to finish a graceful deletion: the pod goes at once.
            raw = obj.raw
            obj.delete()
            self.sim_evictions.append((request.namespace or "", request.name))
            await self._buses[request.resource].put({"type": "DELETED", "object": raw})
        return status_reply(201, "", "")
