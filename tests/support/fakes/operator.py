"""In-memory KubeApi and SlurmApi for tests and the benchmark. They count every call, keep what
was written, and behave like the real APIs where the operator depends on it (create of an
existing object and delete of a missing one are no-ops; a drained node keeps its reason)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from sunk.runtime.operator.kube import KubeApi, bound_and_running, is_protection_budget, is_slurmd_pod
from sunk.runtime.operator.leader import LeaseApi
from sunk.runtime.operator.slurm import SlurmApi
from sunk.runtime.slurmrest import Node as SlurmNode
from sunk.runtime.slurmrest import Reservation, SlurmUnavailable

from sunk import keys


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


class FakeKube:
    def __init__(self) -> None:
        self.nodesets: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.services: dict[tuple[str, str], dict[str, Any]] = {}
        self.budgets: dict[tuple[str, str], dict[str, Any]] = {}
        self._uids = 0
        self.config_maps: dict[tuple[str, str], dict[str, Any]] = {}
        self.secrets: dict[tuple[str, str], dict[str, str]] = {}
        self.events: list[dict[str, Any]] = []
        self.namespaces: dict[str, dict[str, str]] = {}
        """Namespace name -> labels (only list_namespaces reads them)."""
        self.reads = 0
        self.writes = 0
        self.graceful_delete = False
        """When true, delete only sets deletionTimestamp (a kubelet still has to stop the pod)."""

    # helpers for tests
    def add(self, obj: Mapping[str, Any]) -> None:
        kind = obj["kind"]
        store = {
            "NodeSet": self.nodesets,
            "Pod": self.pods,
            "Service": self.services,
            "ConfigMap": self.config_maps,
            "PodDisruptionBudget": self.budgets,
        }
        if kind == "Node":
            self.nodes[obj["metadata"]["name"]] = copy.deepcopy(dict(obj))
        else:
            store[kind][_key(obj)] = copy.deepcopy(dict(obj))

    def event_reasons(self) -> list[str]:
        return [e["reason"] for e in self.events]

    # KubeApi
    def list_nodesets(self) -> list[dict[str, Any]]:
        self.reads += 1
        return [copy.deepcopy(o) for o in self.nodesets.values()]

    def list_pods(self) -> list[dict[str, Any]]:
        self.reads += 1
        # Shallow copies: the operator only reads them; deep copies of 1,000 pods would dominate
        # the benchmark with work a real client does not do twice either.
        return [dict(p) for p in self.pods.values() if is_slurmd_pod(p)]

    def list_bound_pods(self) -> list[dict[str, Any]]:
        self.reads += 1
        return [dict(p) for p in self.pods.values() if bound_and_running(p)]

    def list_nodes(self) -> list[dict[str, Any]]:
        self.reads += 1
        return list(self.nodes.values())

    def list_namespaces(self, label: str) -> dict[str, dict[str, str]]:
        self.reads += 1
        return {name: dict(labels) for name, labels in self.namespaces.items() if label in labels}

    def list_services(self) -> set[tuple[str, str]]:
        self.reads += 1
        return {k for k, s in self.services.items() if keys.NODESET in (s["metadata"].get("labels") or {})}

    def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads += 1
        cm = self.config_maps.get((namespace, name))
        return copy.deepcopy(cm) if cm is not None else None

    def create_config_map(self, body: Mapping[str, Any]) -> None:
        self.writes += 1
        self.config_maps.setdefault(_key(body), copy.deepcopy(dict(body)))

    def patch_config_map(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self.writes += 1
        cm = self.config_maps[(namespace, name)]
        for section in ("data",):
            cm.setdefault(section, {}).update(patch.get(section) or {})
        annotations = (patch.get("metadata") or {}).get("annotations") or {}
        cm["metadata"].setdefault("annotations", {}).update(annotations)

    def create_pod(self, body: Mapping[str, Any]) -> None:
        self.writes += 1
        if _key(body) not in self.pods:
            pod = copy.deepcopy(dict(body))
            self._uids += 1
            pod["metadata"].setdefault("uid", f"pod-uid-{self._uids}")  # the API server sets one
            self.pods[_key(body)] = pod

    def delete_pod(self, namespace: str, name: str) -> None:
        self.writes += 1
        if self.graceful_delete and (namespace, name) in self.pods:
            self.pods[(namespace, name)]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        else:
            self.pods.pop((namespace, name), None)

    def create_service(self, body: Mapping[str, Any]) -> None:
        self.writes += 1
        self.services.setdefault(_key(body), copy.deepcopy(dict(body)))

    def list_budgets(self) -> list[dict[str, Any]]:
        self.reads += 1
        return [copy.deepcopy(b) for b in self.budgets.values() if is_protection_budget(b)]

    def create_budget(self, body: Mapping[str, Any]) -> None:
        self.writes += 1
        self.budgets.setdefault(_key(body), copy.deepcopy(dict(body)))

    def delete_budget(self, namespace: str, name: str) -> None:
        self.writes += 1
        self.budgets.pop((namespace, name), None)

    def patch_nodeset_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.writes += 1
        self.nodesets[(namespace, name)]["status"] = copy.deepcopy(dict(status))

    def create_event(self, body: Mapping[str, Any]) -> None:
        self.writes += 1
        self.events.append(copy.deepcopy(dict(body)))

    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        self.reads += 1
        return self.secrets.get((namespace, name))

    # kubelet/scheduler stand-in
    def run_pods(self, kube_node: str = "node-0", *, ready: bool = True) -> None:
        """Schedule every pending pod (all-matching pods onto their own Node) and mark it Running."""
        for pod in self.pods.values():
            ann = pod["metadata"].get("annotations") or {}
            pod["spec"].setdefault("nodeName", ann.get(keys.KUBE_NODE) or kube_node)
            pod["status"] = {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            }

    def finish_deletes(self) -> None:
        for key in [k for k, p in self.pods.items() if p["metadata"].get("deletionTimestamp")]:
            del self.pods[key]


def slurm_node(name: str, *state: str, features: Iterable[str] = (), reason: str = "") -> SlurmNode:
    """A Slurm node as slurmrestd lists it; dynamic unless told otherwise (STATIC) or CLOUD (a
    slurm.conf node, as 24.11 lists it: ["IDLE", "CLOUD", "POWERED_DOWN"], no DYNAMIC_NORM)."""
    states = list(state) or ["IDLE"]
    if "STATIC" in states:
        states.remove("STATIC")
    elif "DYNAMIC_NORM" not in states and "CLOUD" not in states:
        states.append("DYNAMIC_NORM")
    return SlurmNode(name=name, state=tuple(states), features=tuple(features), reason=reason)


class FakeSlurm:
    """slurmctld's node table, with the state changes the operator's calls cause."""

    def __init__(self, nodes: Iterable[SlurmNode] = ()) -> None:
        self.nodes: dict[str, SlurmNode] = {n.name: n for n in nodes}
        self.calls: list[tuple[str, str]] = []
        self.reads = 0
        self.down = False
        self.reconfigures = 0
        self.reservations: list[Reservation] = []
        self.answers_at: str | None = None
        """The release its answers carry (slurmrestd's meta.slurm.version); None: none said."""

    def release(self) -> str | None:
        return self.answers_at

    def _check(self) -> None:
        if self.down:
            raise SlurmUnavailable("GET", "/slurm/v0.0.42/nodes/", "connection refused")

    def register(self, name: str, features: Iterable[str], *state: str) -> None:
        self.nodes[name] = slurm_node(name, *(state or ("IDLE",)), features=features)

    def set(self, name: str, *state: str) -> None:
        """Change the base state (IDLE, ALLOCATED, ...) keeping flags like DRAIN and the reason."""
        old = self.nodes[name]
        flags = [s for s in old.state if s not in ("IDLE", "ALLOCATED", "MIXED", "DOWN")]
        self.nodes[name] = old.model_copy(update={"state": (*state, *flags)})

    def list_reservations(self) -> list[Reservation]:
        self._check()
        return list(self.reservations)

    def list_nodes(self) -> list[SlurmNode]:
        self._check()
        self.reads += 1
        return list(self.nodes.values())

    def drain(self, name: str, reason: str) -> None:
        self._check()
        self.calls.append(("drain", name))
        old = self.nodes[name]
        state = old.state if "DRAIN" in old.state else (*old.state, "DRAIN")
        self.nodes[name] = old.model_copy(update={"state": state, "reason": reason})

    def resume(self, name: str) -> None:
        self._check()
        self.calls.append(("resume", name))
        old = self.nodes[name]
        # The reason stays, as Slurm 24.11 may keep it after RESUME (see the syncer's fake).
        self.nodes[name] = old.model_copy(update={"state": tuple(s for s in old.state if s != "DRAIN")})

    def remove(self, name: str, reason: str) -> None:
        self._check()
        self.calls.append(("remove", name))
        self.nodes.pop(name, None)

    def reconfigure(self) -> None:
        self._check()
        self.calls.append(("reconfigure", ""))
        self.reconfigures += 1


class FakeLeases:
    """LeaseApi with the API server's atomic JSON-patch `test` semantics."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.fail = False

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self.fail:
            raise ConnectionError("API server unreachable")
        lease = self.leases.get((namespace, name))
        return copy.deepcopy(lease) if lease is not None else None

    def create_lease(self, body: Mapping[str, Any]) -> bool:
        key = _key(body)
        if key in self.leases:
            return False
        self.leases[key] = copy.deepcopy(dict(body))
        return True

    def patch_lease(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> bool:
        lease = self.leases[(namespace, name)]
        for op in ops:
            field = op["path"].removeprefix("/spec/")
            if op["op"] == "test" and lease.get("spec", {}).get(field) != op["value"]:
                return False
        for op in ops:
            if op["op"] in ("replace", "add") and op["path"] == "/spec":
                lease["spec"] = copy.deepcopy(op["value"])
        return True


def _conforms(kube: FakeKube, slurm: FakeSlurm, leases: FakeLeases) -> tuple[KubeApi, SlurmApi, LeaseApi]:
    """mypy checks here that each fake is a full stand-in for the protocol the operator uses."""
    return kube, slurm, leases
