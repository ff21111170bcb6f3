"""What the syncer observes, and the names it writes: pure data, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sunk import keys

from ..common.conditions import Condition, condition_index
from ..common.timefmt import rfc3339

__all__ = ["Condition", "condition_index", "rfc3339"]  # re-exported: the syncer's vocabulary

# Written on Kubernetes Nodes when a drain began in Slurm (an admin's or Slurm's own). Nodes are
# shared by tenants (each with its own Slurm cluster and syncer), so every tenant writes keys of
# its own, prefixed with its namespace (keys.tenant_key): two syncers never overwrite each other.


def node_drain_annotation(namespace: str) -> str:
    """`<slurm node>: <reason>` for every foreign drain of one of this tenant's slurmd on the Node,
    `; `-separated."""
    return keys.tenant_key(namespace, "slurm-drain")


def node_condition(namespace: str) -> str:
    """Node condition type: True while one of this tenant's slurmd on the Node is drained in Slurm
    by someone other than sunk."""
    return keys.tenant_key(namespace, "SlurmDrain")


class SlurmNode(Protocol):
    """What the syncer reads of a Slurm node: the cycle's NodeState (msgspec, decoded from the
    reply's bytes) and the full pydantic `Node` both are one."""

    @property
    def name(self) -> str: ...
    @property
    def state(self) -> tuple[str, ...]: ...
    @property
    def reason(self) -> str: ...
    @property
    def extra(self) -> str: ...
    @property
    def base_state(self) -> str: ...
    @property
    def flags(self) -> frozenset[str]: ...
    @property
    def drain(self) -> bool: ...


@dataclass(frozen=True)
class KubeNode:
    name: str
    unschedulable: bool = False
    ready: bool | None = None
    """The Ready condition: None when the Node has none (no information is not NotReady)."""
    ready_reason: str = ""
    ready_message: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    conditions: Sequence[Condition] = ()


@dataclass(frozen=True)
class SlurmdPod:
    namespace: str
    name: str
    uid: str
    hostname: str
    """spec.hostname, else the pod name (Kubernetes' default): equals the Slurm node name."""
    node_name: str = ""
    """spec.nodeName: the Kubernetes Node it runs on; empty while unscheduled."""
    deleting: bool = False
    created: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    conditions: Sequence[Condition] = ()


@dataclass(frozen=True)
class Observed:
    """One consistent read of both sides. Built only when both reads succeeded: the syncer never
    plans from a partial view (fail closed)."""

    slurm_nodes: Mapping[str, SlurmNode]
    kube_nodes: Mapping[str, KubeNode]
    pods: Sequence[SlurmdPod]
    namespace: str
    drain_conditions: frozenset[str] = frozenset()
    """Node condition types (Node Problem Detector's KernelDeadlock, ...) that drain the slurmd on
    a Node while True (SUNK_DRAIN_CONDITIONS, from spec.healthCheck.nodeConditions)."""


@dataclass(frozen=True)
class Scope:
    """What a plan looks at when only some things changed since the last one: these Slurm node
    names (each with the pod that stands for it) and these Kubernetes Nodes. The loop works it
    out from the Slurm diff and the informers' changes; a plan without a scope looks at all."""

    slurm_nodes: frozenset[str]
    kube_nodes: frozenset[str]
