"""What the operator observes and the actions its plans return. Plain frozen data, no I/O.

Kubernetes objects are parsed once, here, into the few fields the plans read: a 1,000-pod
resync must not carry full pod dicts through the planning code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sunk import keys
from sunk.naming import OPERATOR_REASON_PREFIX
from sunk.nodeset_resource import NodeSetResourceSpec

from ..common.timefmt import parse_rfc3339
from ..slurmrest.models import Node as SlurmNode
from ..slurmrest.models import Reservation
from .admission import allocatable

BUSY_STATES = frozenset({"ALLOCATED", "MIXED"})


@dataclass(frozen=True)
class Member:
    """A Slurm node the NodeSet wants, and what its pod is made from."""

    slurm_node: str
    ordinal: int | None = None
    kube_node: str | None = None


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""


@dataclass(frozen=True)
class KubeNode:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    allocatable: Mapping[str, int] | None = None
    """status.allocatable in the units of .admission (cpu millicores); None: none reported."""

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> KubeNode:
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        taints = tuple(
            Taint(t.get("key", ""), t.get("value") or "", t.get("effect") or "") for t in spec.get("taints") or []
        )
        return cls(
            meta["name"],
            dict(meta.get("labels") or {}),
            taints,
            bool(spec.get("unschedulable")),
            ready,
            allocatable(obj),
        )


@dataclass(frozen=True)
class Pod:
    """A slurmd pod of one NodeSet."""

    name: str
    slurm_node: str
    ordinal: int | None = None
    kube_node: str | None = None
    """all-matching-nodes: the Node the pod was made for."""
    node_name: str | None = None
    """spec.nodeName: where it is scheduled (None: pending)."""
    ready: bool = False
    deleting: bool = False
    template_hash: str = ""
    uid: str = ""
    terminal: bool = False
    """Phase Failed or Succeeded (evicted, say): its containers will never run again."""
    started: int | None = None
    """When its slurmd container last started (epoch seconds of the container status's
    state.running.startedAt; None while it does not run)."""
    restarts: int = 0
    """Its slurmd container's restartCount."""
    ip: str = ""
    """status.podIP: the address its slurmd registers from ("" until the kubelet gives one)."""

    @property
    def scheduled(self) -> bool:
        return bool(self.node_name)

    @property
    def leaving(self) -> bool:
        """Terminating, or dead and about to be deleted: it stands for its node no longer."""
        return self.deleting or self.terminal

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Pod:
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
        ordinal = ann.get(keys.ORDINAL)
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        started, restarts = _slurmd_container(status)
        return cls(
            name=meta["name"],
            slurm_node=labels.get(keys.NODE) or spec.get("hostname") or meta["name"],
            ordinal=int(ordinal) if ordinal is not None and str(ordinal).isdigit() else None,
            kube_node=ann.get(keys.KUBE_NODE),
            node_name=spec.get("nodeName") or None,
            ready=ready and status.get("phase") == "Running",
            deleting=bool(meta.get("deletionTimestamp")),
            template_hash=ann.get(keys.TEMPLATE_HASH, ""),
            uid=meta.get("uid", ""),
            terminal=status.get("phase") in ("Failed", "Succeeded"),
            started=started,
            restarts=restarts,
            ip=str(status.get("podIP") or ""),
        )


def _slurmd_container(status: Mapping[str, Any]) -> tuple[int | None, int]:
    """The slurmd container's status (the first container's when none is named slurmd): when it
    last started running and how often it restarted."""
    containers = status.get("containerStatuses") or []
    slurmd = next((c for c in containers if c.get("name") == "slurmd"), containers[0] if containers else {})
    running = ((slurmd.get("state") or {}).get("running") or {}).get("startedAt")
    return _epoch(running), int(slurmd.get("restartCount") or 0)


def _epoch(stamp: Any) -> int | None:
    """An RFC 3339 stamp as epoch seconds; None when absent or unreadable (a pod status is the
    kubelet's word, never a reason to stop reconciling)."""
    if not isinstance(stamp, str):
        return None
    try:
        return int(parse_rfc3339(stamp).timestamp())
    except ValueError:
        return None


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget protecting one slurmd pod of the NodeSet."""

    name: str
    slurm_node: str

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Budget:
        meta = obj.get("metadata") or {}
        return cls(meta["name"], (meta.get("labels") or {}).get(keys.NODE, ""))


@dataclass(frozen=True)
class NodeSetObject:
    name: str
    namespace: str
    uid: str
    generation: int
    spec: NodeSetResourceSpec
    status: Mapping[str, Any] = field(default_factory=dict)

    @property
    def owner(self) -> dict[str, str]:
        return {"name": self.name, "uid": self.uid}

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Observed:
    """Everything one NodeSet's plan reads. `slurm` is None when Slurm could not be read (then
    nothing is deleted, drained or resumed); `config_keys` holds the keys of each ConfigMap of
    the NodeSet's configFiles that exists (by name; a missing one is absent)."""

    nodeset: NodeSetObject
    pods: Sequence[Pod]
    kube_nodes: Mapping[str, KubeNode]
    slurm: Mapping[str, SlurmNode] | None
    config_keys: Mapping[str, frozenset[str]]
    service_exists: bool = True
    node_usage: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Kubernetes Node -> summed requests of the non-terminated pods bound to it (every pod, not
    only slurmd ones), for the admission check of all-matching-nodes pods."""
    reservations: Mapping[str, Reservation] | None = None
    """Slurm's reservations by name, read when a NodeSet of the cluster holds its updates to a
    maintenance reservation; None when not read (then such updates wait)."""
    budgets: Sequence[Budget] | None = ()
    """The PodDisruptionBudgets protecting this NodeSet's slurmd pods; None when they could not be
    read (then none is created or removed)."""
    slurm_release: str | None = None
    """The Slurm release that answered the read (slurmrestd's; a slurmrestd reads no slurmctld of
    an older release, so slurmctld runs this one or a later one); None when unknown."""

    @property
    def missing_config(self) -> list[str]:
        """ConfigMaps the NodeSet's configFiles name that do not exist: no pod is created."""
        return sorted({n for n in self.nodeset.spec.config_files.values() if n not in self.config_keys})


# --- Slurm node predicates -------------------------------------------------------------------


def busy(node: SlurmNode) -> bool:
    """Runs (or is finishing) a job."""
    return node.base_state in BUSY_STATES or "COMPLETING" in node.flags


def drained_by_us(node: SlurmNode) -> bool:
    return node.drain and node.reason.startswith(OPERATOR_REASON_PREFIX)


def drained_by_others(node: SlurmNode) -> bool:
    """A drain the operator did not set (an admin, the syncer): never resumed nor reworded."""
    return node.drain and not node.reason.startswith(OPERATOR_REASON_PREFIX)


def dynamic(node: SlurmNode) -> bool:
    """Registered by `slurmd -Z`: the only kind of node the operator ever deletes from Slurm."""
    return "DYNAMIC_NORM" in node.flags


# --- actions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreatePod:
    pod: Mapping[str, Any]
    slurm_node: str
    why: str

    def event(self) -> tuple[str, str]:
        return "CreatePod", f"pod {self.pod['metadata']['name']} for Slurm node {self.slurm_node}: {self.why}"


@dataclass(frozen=True)
class DeletePod:
    name: str
    slurm_node: str
    why: str

    def event(self) -> tuple[str, str]:
        return "DeletePod", f"pod {self.name} (Slurm node {self.slurm_node}): {self.why}"


@dataclass(frozen=True)
class Drain:
    slurm_node: str
    reason: str

    def event(self) -> tuple[str, str]:
        return "DrainNode", f"Slurm node {self.slurm_node}: {self.reason}"


@dataclass(frozen=True)
class Resume:
    slurm_node: str
    why: str

    def event(self) -> tuple[str, str]:
        return "ResumeNode", f"Slurm node {self.slurm_node}: {self.why}"


@dataclass(frozen=True)
class RemoveSlurmNode:
    """Set the node DOWN, then DELETE it (Slurm refuses to delete a node that is not DOWN)."""

    slurm_node: str
    why: str

    def event(self) -> tuple[str, str]:
        return "RemoveSlurmNode", f"Slurm node {self.slurm_node}: {self.why}"


@dataclass(frozen=True)
class PodDoesNotFit:
    """all-matching-nodes: the member's pod would not be admitted on its Node, so it is not
    created. Applies nothing; its Warning Event says why."""

    kube_node: str
    slurm_node: str
    message: str

    def event(self) -> tuple[str, str]:
        return "PodDoesNotFit", f"Node {self.kube_node} (Slurm node {self.slurm_node}): {self.message}"


@dataclass(frozen=True)
class Protect:
    """Create the PDB that refuses evictions of a slurmd pod whose Slurm node may run jobs."""

    budget: Mapping[str, Any]
    slurm_node: str

    def event(self) -> tuple[str, str]:
        name = self.budget["metadata"]["name"]
        return "Protect", f"pod {name} (Slurm node {self.slurm_node}): evictions refused until it is drained and idle"


@dataclass(frozen=True)
class Unprotect:
    name: str
    slurm_node: str
    why: str

    def event(self) -> tuple[str, str]:
        return "Unprotect", f"pod {self.name} (Slurm node {self.slurm_node}): {self.why}"


@dataclass(frozen=True)
class CreateService:
    service: Mapping[str, Any]

    def event(self) -> tuple[str, str]:
        return "CreateService", f"headless Service {self.service['metadata']['name']} for the pods' DNS names"


@dataclass(frozen=True)
class WriteStatus:
    status: Mapping[str, Any]

    def event(self) -> None:
        return None  # status is visible on the object itself; an Event per write would be noise


Action = (
    CreatePod
    | DeletePod
    | Drain
    | Resume
    | RemoveSlurmNode
    | CreateService
    | WriteStatus
    | PodDoesNotFit
    | Protect
    | Unprotect
)
WARNINGS = (PodDoesNotFit,)
"""Actions whose Event is a Warning."""
