"""In-memory SlurmApi and KubeApi for plan-and-apply tests and the benchmark.

They behave like the real servers where the syncer relies on it (label selectors filter,
namespaces scope, JSON patch `test` ops fail, unknown Slurm nodes raise 2018) and count every
call, so a test can assert "no writes"."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from sunk.runtime.slurmrest import Node, SlurmApiError, SlurmError, SlurmUnavailable
from sunk.runtime.slurmrest.nodestate import NodeState
from sunk.runtime.syncer.kube import KubeApi, KubeApiError, Patch
from sunk.runtime.syncer.slurm import SlurmApi

from sunk import keys


class FakeSlurm:
    def __init__(self, nodes: Iterable[Node] = ()) -> None:
        self.nodes: dict[str, Node] = {n.name: n for n in nodes}
        self.requests = 0
        self.writes = 0
        self.down = False

    def _check(self, method: str) -> None:
        self.requests += 1
        if self.down:
            raise SlurmUnavailable(method, "/fake", "connection refused")

    def list_nodes(self, *, future: bool = False) -> list[Node]:
        self._check("GET")
        return [n for n in self.nodes.values() if future or n.base_state != "FUTURE"]

    def node_states(self, *, future: bool = False) -> list[NodeState]:
        return [NodeState(n.name, n.state, n.reason, n.extra) for n in self.list_nodes(future=future)]

    def _apply(self, name: str, state: str | None, reason: str | None, extra: str | None, user: str) -> None:
        node = self.nodes.get(name)
        if node is None:
            raise SlurmApiError("POST", f"/node/{name}", 500, [SlurmError(2018, "Invalid node name specified")])
        changes: dict[str, Any] = {}
        flags = [s for s in node.state if s != node.base_state]
        if state == "DRAIN":
            if "DRAIN" not in flags:
                flags.append("DRAIN")
            changes.update(state=(node.base_state, *flags), reason=reason or "", reason_set_by_user=user)
        elif state == "RESUME":
            base = "IDLE" if node.base_state == "DOWN" else node.base_state
            flags = [f for f in flags if f != "DRAIN"]
            # The reason stays: Slurm 24.11 may keep it after RESUME (an adversarial review saw it; the
            # simple IDLE+DRAIN resume measured 2026-11 here clears it). Keeping it proves the syncer
            # never relies on Slurm clearing it.
            changes.update(state=(base, *flags))
        elif reason is not None:
            changes["reason"] = reason
        if extra is not None:
            changes["extra"] = extra
        self.nodes[name] = node.model_copy(update=changes)

    def update_node(
        self, name: str, *, state: str | None = None, reason: str | None = None, extra: str | None = None
    ) -> None:
        self._check("POST")
        self.writes += 1
        self._apply(name, state, reason, extra, "slurm")

    def update_nodes(self, names: Iterable[str], *, state: str | None = None, reason: str | None = None) -> None:
        self._check("POST")
        self.writes += 1
        names = list(names)
        for name in names:  # Slurm refuses the whole batch when one name is unknown
            if name not in self.nodes:
                raise SlurmApiError("POST", "/nodes/", 500, [SlurmError(2018, f"Invalid node name {name}")])
        for name in names:
            self._apply(name, state, reason, None, "slurm")

    def admin(self, name: str, *, state: str, reason: str | None = None) -> None:
        """What `scontrol update` by root does (not counted as a syncer write)."""
        self._apply(name, state, reason, None, "root")


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """RFC 7386: dicts merge, None deletes, everything else (lists too) replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in path.lstrip("/").split("/")]
    for token in tokens[:-1]:
        doc = doc[int(token)] if isinstance(doc, list) else doc[token]
    return doc, tokens[-1]


def json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """The RFC 6902 ops the syncer sends (test, add, replace, remove); atomic like the API server."""
    work = copy.deepcopy(doc)
    try:
        for op in ops:
            parent, key = _parent(work, op["path"])
            if op["op"] == "test":
                have = parent[int(key)] if isinstance(parent, list) else parent[key]
                if have != op["value"]:
                    raise KubeApiError(f"test failed at {op['path']}")
            elif op["op"] == "add":
                if isinstance(parent, list):
                    parent.insert(len(parent) if key == "-" else int(key), copy.deepcopy(op["value"]))
                else:
                    parent[key] = copy.deepcopy(op["value"])
            elif op["op"] == "replace":
                if isinstance(parent, list):
                    parent[int(key)] = copy.deepcopy(op["value"])
                else:
                    if key not in parent:  # replace needs an existing member
                        raise KeyError(key)
                    parent[key] = copy.deepcopy(op["value"])
            elif op["op"] == "remove":
                del parent[int(key) if isinstance(parent, list) else key]
            else:
                raise KubeApiError(f"unsupported op {op['op']}")
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise KubeApiError(f"patch failed: {exc!r}") from exc
    doc.clear()
    doc.update(work)


def _wire(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies as a server's reply would be: through JSON (also what the real client pays for)."""
    return json.loads(json.dumps(items))  # type: ignore[no-any-return]


def _selected(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        key, eq, value = term.partition("=")
        if key not in labels or (eq and labels[key] != value):
            return False
    return True


class FakeKube:
    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.reads = 0
        self.writes = 0
        self.fail_reads = False

    def add_node(self, obj: dict[str, Any]) -> None:
        self.nodes[obj["metadata"]["name"]] = obj

    def add_pod(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.pods[(meta["namespace"], meta["name"])] = obj

    def _read(self) -> None:
        self.reads += 1
        if self.fail_reads:
            raise KubeApiError("connection refused")

    def list_nodes(self) -> list[dict[str, Any]]:
        self._read()
        return _wire(list(self.nodes.values()))

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        self._read()
        return _wire(
            [
                p
                for (ns, _), p in self.pods.items()
                if ns == namespace and _selected(p["metadata"].get("labels") or {}, label_selector)
            ]
        )

    def _obj(self, table: dict[Any, dict[str, Any]], key: Any) -> dict[str, Any]:
        self.writes += 1
        if key not in table:
            raise KubeApiError(f"404 {key} not found")
        return table[key]

    @staticmethod
    def _patch(obj: dict[str, Any], patch: Patch) -> None:
        if isinstance(patch, list):
            json_patch(obj, patch)
        else:
            merge_patch(obj, patch)

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        merge_patch(self._obj(self.pods, (namespace, name)), patch)

    def patch_pod_status(self, namespace: str, name: str, patch: Patch) -> None:
        self._patch(self._obj(self.pods, (namespace, name)), patch)

    def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        merge_patch(self._obj(self.nodes, name), patch)

    def patch_node_status(self, name: str, patch: Patch) -> None:
        self._patch(self._obj(self.nodes, name), patch)

    def create_event(self, namespace: str, body: dict[str, Any]) -> None:
        """Events are not counted as writes: `writes` stays the object patches."""
        self.events.append({**body, "metadata": {**body["metadata"], "namespace": namespace}})


def node_object(
    name: str,
    *,
    unschedulable: bool = False,
    ready: str | None = "True",
    ready_reason: str = "KubeletReady",
    ready_message: str = "kubelet is posting ready status",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Kubernetes Node as the API server returns it (the parts the syncer reads)."""
    conditions = []
    if ready is not None:
        conditions.append(
            {
                "type": "Ready",
                "status": ready,
                "reason": ready_reason,
                "message": ready_message,
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-node-{name}", "annotations": dict(annotations or {})},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"conditions": conditions},
    }


def pod_object(
    namespace: str,
    name: str,
    *,
    nodeset: str,
    node_name: str = "",
    hostname: str | None = None,
    uid: str | None = None,
    created: str = "2024-01-01T00:00:00Z",
) -> dict[str, Any]:
    """A slurmd pod of a NodeSet (hostname defaults to the pod name, as in Kubernetes)."""
    spec: dict[str, Any] = {"containers": [{"name": "slurmd", "image": "slurmd"}]}
    if hostname is not None:
        spec["hostname"] = hostname
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{namespace}-{name}",
            "creationTimestamp": created,
            "labels": {keys.NODESET: nodeset},
        },
        "spec": spec,
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _conforms(kube: FakeKube, slurm: FakeSlurm) -> tuple[KubeApi, SlurmApi]:
    """mypy checks here that each fake is a full stand-in for the protocol the syncer uses."""
    return kube, slurm
