"""Which Kubernetes Nodes a NodeSet's pods may run on: nodeSelector, required node affinity and
taints, evaluated the way the Kubernetes scheduler and the DaemonSet controller do.

Taints the DaemonSet controller tolerates for its pods (cordon, not-ready, unreachable) do not
make a Node ineligible: cordoning a Node must not delete its slurmd (and kill its jobs); the
syncer drains the Slurm node instead. The pods carry the matching tolerations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sunk.manifests.nodeset_pod import DAEMON_TOLERATIONS
from sunk.spec.nodeset import NodeSetSpec, Toleration

from .model import KubeNode, Taint

_IGNORED_TAINTS = frozenset(str(t["key"]) for t in DAEMON_TOLERATIONS)
_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def _expression(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _term(term: Mapping[str, Any], node: KubeNode) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches no object (Kubernetes API docs)
    fields_ok = all(_expression(f, node.name if f.get("key") == "metadata.name" else None) for f in fields)
    return fields_ok and all(_expression(e, node.labels.get(str(e.get("key")))) for e in exprs)


def matches_affinity(affinity: Mapping[str, Any] | None, node: KubeNode) -> bool:
    required = ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    return any(_term(t, node) for t in required.get("nodeSelectorTerms") or [])


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    for t in tolerations:
        if t.effect is not None and t.effect != taint.effect:
            continue
        if t.key is None and t.operator == "Exists":
            return True
        if t.key != taint.key:
            continue
        if t.operator == "Exists" or (t.value or "") == taint.value:
            return True
    return False


def eligible(spec: NodeSetSpec, node: KubeNode) -> bool:
    """The NodeSet's pods may be placed on `node` (ignoring resources and cordon)."""
    if any(node.labels.get(k) != v for k, v in spec.pod_node_selector.items()):
        return False
    if not matches_affinity(spec.affinity, node):
        return False
    return all(
        tolerates(spec.tolerations, taint)
        for taint in node.taints
        if taint.effect in _BLOCKING_EFFECTS and taint.key not in _IGNORED_TAINTS
    )


def usable(node: KubeNode) -> bool:
    """A new pod could start there now."""
    return node.ready and not node.unschedulable
