"""The syncer's decisions: `plan(observed, now) -> list[Action]`. Pure: no I/O, no clock.

Kubernetes -> Slurm: a slurmd whose pod is deleted or terminating, or whose Node is gone,
NotReady, cordoned or has a selected condition True (Observed.drain_conditions), is drained with a reason starting with OWNED_REASON_PREFIX; when the cause
is gone only such drains are resumed. Drains anyone else set are never touched, and ours is set
again if it was cleared while the cause persists.
Slurm -> Kubernetes: every slurmd pod carries the Slurm state as annotations and a condition;
a Node carries an annotation and a condition while a slurmd on it is drained by someone else, both
keyed by the tenant's namespace (Nodes are shared; tenants never write each other's keys). A pod
shows Slurm's reason only while its node is drained or down.
Nothing is planned that is already true, so a steady state plans nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sunk import keys
from sunk.naming import OPERATOR_REASON_PREFIX, OWNED_REASON_PREFIX

from ..slurmrest.podref import PodRef, read_pod_ref, write_pod_ref
from .model import (
    Condition,
    KubeNode,
    Observed,
    Scope,
    SlurmdPod,
    SlurmNode,
    condition_index,
    node_condition,
    node_drain_annotation,
    rfc3339,
)

_MESSAGE_LIMIT = 200  # Slurm reasons show up in sinfo columns; keep Kubernetes messages short there


@dataclass(frozen=True)
class Drain:
    node: str
    reason: str
    pod: SlurmdPod | None = field(default=None, compare=False)
    """The slurmd pod the Event goes on once applied (None: the pod is gone)."""


@dataclass(frozen=True)
class Resume:
    node: str
    pod: SlurmdPod | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SetPodRef:
    """Record in the Slurm node's `extra` which pod runs its slurmd."""

    node: str
    extra: str


@dataclass(frozen=True)
class AnnotatePod:
    namespace: str
    name: str
    annotations: Mapping[str, str | None]
    """Only the keys that change; None removes the key."""


@dataclass(frozen=True)
class SetPodCondition:
    namespace: str
    name: str
    condition: Condition
    index: int | None
    """Position of the existing condition of this type (None: append)."""
    count: int
    """How many conditions the pod has now (0: the list must be created)."""


@dataclass(frozen=True)
class AnnotateNode:
    name: str
    annotations: Mapping[str, str | None]


@dataclass(frozen=True)
class SetNodeCondition:
    name: str
    condition: Condition
    index: int | None
    count: int


@dataclass(frozen=True)
class RemoveNodeCondition:
    name: str
    type: str
    index: int


SlurmAction = Drain | Resume | SetPodRef
KubeAction = AnnotatePod | SetPodCondition | AnnotateNode | SetNodeCondition | RemoveNodeCondition
Action = SlurmAction | KubeAction


def owned(reason: str) -> bool:
    """A drain this syncer set and may undo. The operator's drains (scale-in, rolling update)
    share the `sunk:` prefix but are the operator's to finish: resuming them would let new jobs
    land on a node that is about to go."""
    return reason.startswith(OWNED_REASON_PREFIX) and not reason.startswith(OPERATOR_REASON_PREFIX)


def sunk_drain(reason: str) -> bool:
    """Any drain set by sunk (syncer or operator): not one that began with an admin in Slurm."""
    return reason.startswith(OWNED_REASON_PREFIX)


def state_summary(node: SlurmNode | None) -> str:
    """The one word a pod annotation shows: down and drain first, then Slurm's base state."""
    if node is None:
        return "missing"
    if node.base_state == "DOWN":
        return "down"
    if node.drain:
        return "drain"
    return node.base_state.lower()


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


def current_pods(pods: Sequence[SlurmdPod]) -> dict[str, SlurmdPod]:
    """The pod that stands for each Slurm node name: a live one before a terminating one (a
    replacement may already exist), the newest among equals."""
    best: dict[str, SlurmdPod] = {}
    for pod in pods:
        old = best.get(pod.hostname)
        if old is None or (not pod.deleting, pod.created) > (not old.deleting, old.created):
            best[pod.hostname] = pod
    return best


def drain_cause(
    pod: SlurmdPod | None,
    ref: PodRef | None,
    kube_nodes: Mapping[str, KubeNode],
    drain_conditions: frozenset[str] = frozenset(),
) -> str | None:
    """Why Kubernetes says this slurmd cannot take jobs, or None."""
    if pod is None:
        return f"slurmd pod {ref} deleted" if ref is not None else None
    if pod.deleting:
        return f"slurmd pod {pod.namespace}/{pod.name} terminating"
    if not pod.node_name:
        return None
    kn = kube_nodes.get(pod.node_name)
    if kn is None:
        return f"Node {pod.node_name} deleted"
    if kn.ready is False:
        detail = ": ".join(part for part in (kn.ready_reason, kn.ready_message) if part)
        return _short(f"Node {kn.name} NotReady" + (f" ({detail})" if detail else ""))
    if kn.unschedulable:
        why = kn.annotations.get(keys.CORDON_REASON, "").strip()
        return _short(f"Node {kn.name} cordoned" + (f": {why}" if why else ""))
    bad = sorted((c for c in kn.conditions if c.type in drain_conditions and c.status == "True"), key=lambda c: c.type)
    if bad:
        # The condition's own words (Node Problem Detector writes a reason and a message).
        detail = ", ".join(f"{c.type}" + (f" ({c.message or c.reason})" if c.message or c.reason else "") for c in bad)
        return _short(f"Node {kn.name} condition {detail}")
    return None


def _slurm_actions(node: SlurmNode, pod: SlurmdPod | None, observed: Observed) -> list[SlurmAction]:
    ref = read_pod_ref(node.extra)
    if ref is not None and ref.namespace != observed.namespace:
        ref = None  # another tenant's syncer owns this node
    if pod is None and ref is None:
        return []  # not a sunk-managed node: leave it alone entirely
    out: list[SlurmAction] = []
    cause = drain_cause(pod, ref, observed.kube_nodes, observed.drain_conditions)
    if cause is not None:
        reason = f"{OWNED_REASON_PREFIX} {cause}"
        if not node.drain or (owned(node.reason) and node.reason != reason):
            out.append(Drain(node.name, reason, pod))
    elif node.drain and owned(node.reason):
        out.append(Resume(node.name, pod))
    if pod is not None and not pod.deleting:
        want = PodRef(pod.namespace, pod.name, pod.uid)
        if ref != want:
            out.append(SetPodRef(node.name, write_pod_ref(node.extra, want)))
    return out


def _condition(want: Condition, conditions: Sequence[Condition], now: datetime) -> tuple[Condition, int | None] | None:
    """The condition to write (keeping its transition time if the status holds), or None."""
    index = condition_index(conditions, want.type)
    have = conditions[index] if index is not None else None
    if want.same(have):
        return None
    since = have.last_transition_time if have is not None and have.status == want.status else rfc3339(now)
    return Condition(want.type, want.status, want.reason, want.message, since), index


def shown_reason(node: SlurmNode | None) -> str:
    """The reason a pod shows: Slurm's, only while the node is drained or down. Slurm may keep a
    reason after RESUME; it explains nothing once the node takes jobs again."""
    if node is None or not node.reason or state_summary(node) not in ("drain", "down"):
        return ""
    return node.reason


def _pod_actions(pod: SlurmdPod, node: SlurmNode | None, now: datetime) -> list[KubeAction]:
    summary = state_summary(node)
    reason = shown_reason(node)
    want: dict[str, str | None] = {
        keys.SLURM_STATE: summary,
        keys.SLURM_STATE_DETAIL: "+".join(node.state) if node is not None else None,
        keys.SLURM_REASON: reason or None,
    }
    changes = {k: v for k, v in want.items() if pod.annotations.get(k) != v}
    out: list[KubeAction] = []
    if changes:
        out.append(AnnotatePod(pod.namespace, pod.name, changes))
    usable = node is not None and summary in ("idle", "allocated", "mixed") and "NOT_RESPONDING" not in node.flags
    message = _short(reason)
    found = _condition(
        Condition(keys.SLURM_NODE_READY, "True" if usable else "False", summary.capitalize(), message),
        pod.conditions,
        now,
    )
    if found is not None:
        out.append(SetPodCondition(pod.namespace, pod.name, found[0], found[1], len(pod.conditions)))
    return out


def _node_actions(kn: KubeNode, drains: list[str], namespace: str, now: datetime) -> list[KubeAction]:
    """This tenant's annotation and condition on a Node: its own keys, never another tenant's."""
    annotation, condition = node_drain_annotation(namespace), node_condition(namespace)
    text = "; ".join(sorted(drains)) or None
    out: list[KubeAction] = []
    changes: dict[str, str | None] = {}
    if kn.annotations.get(annotation) != text:
        changes[annotation] = text
    if keys.LEGACY_NODE_DRAIN in kn.annotations:
        changes[keys.LEGACY_NODE_DRAIN] = None  # one key all tenants shared, before per-tenant keys
    if changes:
        out.append(AnnotateNode(kn.name, changes))
    legacy = condition_index(kn.conditions, keys.LEGACY_NODE_CONDITION)
    if legacy is not None:
        out.append(RemoveNodeCondition(kn.name, keys.LEGACY_NODE_CONDITION, legacy))
    index = condition_index(kn.conditions, condition)
    if text is not None:
        want = Condition(condition, "True", "DrainedInSlurm", _short(text))
    elif index is not None:
        want = Condition(condition, "False", "NotDrainedInSlurm", "")
    else:
        return out  # never drained in Slurm: no condition to add
    found = _condition(want, kn.conditions, now)
    if found is not None:
        out.append(SetNodeCondition(kn.name, found[0], found[1], len(kn.conditions)))
    return out


def plan(observed: Observed, now: datetime, scope: Scope | None = None) -> list[Action]:
    """Every action that makes the two views agree; with a scope, only those of the Slurm nodes
    and Kubernetes Nodes it names (the same actions a full plan gives for them)."""
    pods = current_pods(observed.pods)
    on_node: dict[str, list[str]] = {}
    for hostname, pod in pods.items():
        if not pod.deleting and pod.node_name:
            on_node.setdefault(pod.node_name, []).append(hostname)
    if scope is None:
        names = sorted(observed.slurm_nodes)
        hostnames = sorted(pods)
        kube_names = sorted(observed.kube_nodes)
    else:
        names = sorted(n for n in scope.slurm_nodes if n in observed.slurm_nodes)
        hostnames = sorted(n for n in scope.slurm_nodes if n in pods)
        kube_names = sorted(n for n in scope.kube_nodes if n in observed.kube_nodes)
    slurm: list[Action] = []
    kube: list[Action] = []
    for name in names:
        slurm.extend(_slurm_actions(observed.slurm_nodes[name], pods.get(name), observed))
    for hostname in hostnames:
        pod = pods[hostname]
        if not pod.deleting:
            kube.extend(_pod_actions(pod, observed.slurm_nodes.get(hostname), now))
    for kn_name in kube_names:
        foreign = []
        for hostname in on_node.get(kn_name, ()):
            node = observed.slurm_nodes.get(hostname)
            if node is not None and node.drain and not sunk_drain(node.reason):
                foreign.append(f"{hostname}: {node.reason}")
        kube.extend(_node_actions(observed.kube_nodes[kn_name], foreign, observed.namespace, now))
    return slurm + kube
