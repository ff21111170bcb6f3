"""The default scheduler: binds a pod that names no other scheduler to a Ready, schedulable Node
whose labels match its nodeSelector and required node affinity, whose NoSchedule/NoExecute taints
it tolerates and whose allocatable CPU, memory and pod count fit its requests beside the pods
already there (extended resources such as nvidia.com/gpu too): `unfit` runs those filters in
turn, as kube-scheduler's filter plugins. Among the Nodes that pass, the one `score` prefers
(PreferNoSchedule taints, then spreading a controller's pods, then the least allocated); with
none, PodScheduled=False, Unschedulable, with every Node's reason, and a FailedScheduling Event.

Hard topology spread constraints (`whenUnsatisfiable: DoNotSchedule`) are a filter too, as
PodTopologySpread's: a Node is refused when placing the pod there would leave its domain more than
`maxSkew` pods of the selector ahead of the emptiest domain among the Nodes the pod's node affinity
admits (fewer such domains than `minDomains`: the emptiest counts 0); terminating pods don't count.

Not modelled: preferred node affinity, pod affinity and anti-affinity, soft topology spread
constraints and their policies (nodeAffinityPolicy is Honor, nodeTaintsPolicy Ignore, matchLabelKeys
unread; the default spread over hostnames is scored), preemption and priorities, volume topology, scheduling
gates, a queue with back-off (every pending pod is tried on each pass)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ...common.timefmt import rfc3339
from .. import events
from ..container import quantity
from ..inventory import pod_requests
from ..store import Obj, Store
from .common import ready, terminal

# -- the filters and the score (pure) -----------------------------------------------------------


def requests(pod: Obj) -> dict[str, float]:
    """Effective requests of every resource (inventory.pod_requests): CPU, memory and extended ones."""
    return pod_requests(pod.get("spec") or {})


def _tolerates(pod: Obj, taint: Mapping[str, Any]) -> bool:
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    for expr in term.get("matchFields") or []:  # metadata.name is the one field a node term may name
        values = expr.get("values") or []
        inside = expr.get("key") == "metadata.name" and name in values
        if inside != (expr.get("operator") == "In"):
            return False
    for expr in term.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(op, False)
        if not ok:
            return False
    return True


def _unschedulable(pod: Obj, node: Obj) -> str | None:
    if (node.get("spec") or {}).get("unschedulable"):
        return f"node {node['metadata']['name']} is unschedulable"
    return None


def _not_ready(pod: Obj, node: Obj) -> str | None:
    return None if ready(node) else f"node {node['metadata']['name']} is not Ready"


def _affinity_misfit(pod: Obj, node: Obj) -> str | None:
    """nodeSelector and required node affinity (NodeAffinity)."""
    spec = pod.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    name = node["metadata"]["name"]
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return f"node {name} didn't match Pod's node affinity/selector"
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(_term_matches(t, labels, name) for t in terms):
        return f"node {name} didn't match Pod's node affinity/selector"
    return None


def _untolerated_taint(pod: Obj, node: Obj) -> str | None:
    """NoSchedule and NoExecute taints (TaintToleration)."""
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(pod, taint):
            return f"node {node['metadata']['name']} had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    return None


def _insufficient(pod: Obj, node: Obj, placed: list[Obj]) -> str | None:
    """Requests beside the pods already placed, and the pod count (NodeResourcesFit)."""
    name = node["metadata"]["name"]
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    for resource, amount in sorted(requests(pod).items()):
        if amount <= 0 or (resource not in allocatable and resource in ("cpu", "memory", "ephemeral-storage")):
            continue  # a Node that states no CPU or memory is not limited in them
        used = sum(requests(p).get(resource, 0) for p in placed)
        if used + amount > quantity(str(allocatable.get(resource, "0"))):
            return f"Insufficient {resource} on node {name}"
    if "pods" in allocatable and len(placed) + 1 > int(allocatable["pods"]):
        return f"Too many pods on node {name}"
    return None


FILTERS: tuple[Callable[[Obj, Obj], str | None], ...] = (
    _unschedulable,
    _not_ready,
    _affinity_misfit,
    _untolerated_taint,
)
"""The filters that look at the pod and the Node alone, in the order their reasons are given."""


def unfit(pod: Obj, node: Obj, placed: list[Obj]) -> str | None:
    """Why `pod` can't go to `node` beside `placed`, or None when it can: the first filter's
    reason, the resources last."""
    for check in FILTERS:
        why = check(pod, node)
        if why is not None:
            return why
    return _insufficient(pod, node, placed)


def score(pod: Obj, node: Obj, placed: list[Obj]) -> tuple[float, ...]:
    """How much the default scheduler prefers `node` for `pod` (the smallest first): fewer
    PreferNoSchedule taints the pod does not tolerate (TaintToleration), fewer pods of the same
    owner already there (the default topology spread over hostnames), then the least allocated
    share of CPU and memory (NodeResourcesFit's LeastAllocated)."""
    taints = (node.get("spec") or {}).get("taints") or []
    soft = sum(1 for t in taints if t.get("effect") == "PreferNoSchedule" and not _tolerates(pod, t))
    owners = {r.get("uid") for r in pod["metadata"].get("ownerReferences") or []}
    siblings = sum(1 for p in placed if owners & {r.get("uid") for r in p["metadata"].get("ownerReferences") or []})
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    shares = []
    for resource in ("cpu", "memory"):
        size = quantity(str(allocatable[resource])) if resource in allocatable else 0
        if size > 0:
            used = sum(requests(p).get(resource, 0) for p in [*placed, pod])
            shares.append(used / size)
    return (soft, siblings, sum(shares) / len(shares) if shares else 0.0)


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions) over `labels`."""
    wanted = selector.get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in wanted.items()):
        return False
    return _term_matches({"matchExpressions": selector.get("matchExpressions") or []}, labels, "")


def _domain_counts(pod: Obj, c: Obj, nodes: list[Obj], everything: list[Obj]) -> dict[Any, int]:
    """Per domain of constraint `c`'s topologyKey among the Nodes the pod's node affinity admits,
    the pods of its namespace the constraint's selector matches (terminating and finished ones
    not counted)."""
    key, namespace = c.get("topologyKey", ""), pod["metadata"].get("namespace")
    eligible = {
        n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(key)
        for n in nodes
        if key in (n["metadata"].get("labels") or {}) and _affinity_misfit(pod, n) is None
    }
    counts = dict.fromkeys(eligible.values(), 0)
    for p in everything:
        where = eligible.get((p.get("spec") or {}).get("nodeName") or "")
        meta = p["metadata"]
        if where is None or meta.get("deletionTimestamp") or terminal(p) or meta.get("namespace") != namespace:
            continue
        if _selects(c.get("labelSelector") or {}, meta.get("labels") or {}):
            counts[where] += 1
    return counts


def _spread_misfit(pod: Obj, node: Obj, nodes: list[Obj], everything: list[Obj]) -> str | None:
    """Hard topology spread constraints (PodTopologySpread): see the module's docstring."""
    for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []:
        if c.get("whenUnsatisfiable") != "DoNotSchedule":
            continue
        domain = (node["metadata"].get("labels") or {}).get(c.get("topologyKey", ""))
        if domain is None:
            return (
                f"node {node['metadata']['name']} didn't match pod topology spread constraints (missing required label)"
            )
        counts = _domain_counts(pod, c, nodes, everything)
        fewest = 0 if len(counts) < int(c.get("minDomains") or 1) else min(counts.values(), default=0)
        if counts.get(domain, 0) + 1 - fewest > int(c.get("maxSkew", 1)):
            return f"node {node['metadata']['name']} didn't match pod topology spread constraints"
    return None


def place(pod: Obj, nodes: list[Obj], everything: list[Obj]) -> tuple[list[tuple[tuple[float, ...], str]], list[str]]:
    """(score, Node name) of every Node `pod` fits, and the reasons of those it doesn't, by name."""
    reasons = []
    fits: list[tuple[tuple[float, ...], str]] = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        placed = [
            p
            for p in everything
            if (p.get("spec") or {}).get("nodeName") == node["metadata"]["name"] and not terminal(p)
        ]
        why = unfit(pod, node, placed) or _spread_misfit(pod, node, nodes, everything)
        if why is None:
            fits.append((score(pod, node, placed), node["metadata"]["name"]))
        else:
            reasons.append(why)
    return fits, reasons


# -- the binding loop -----------------------------------------------------------------------------


def _pending(pod: Obj) -> bool:
    """Not bound, not going, not finished, and for the default scheduler."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName") or pod["metadata"].get("deletionTimestamp") or terminal(pod):
        return False
    return bool(spec.get("schedulerName", "default-scheduler") == "default-scheduler")


def reconcile(store: Store) -> None:
    """Each pending pod bound to the Node it fits best, or marked Unschedulable with the reasons;
    a pod bound in this pass counts on its Node for the next ones."""
    nodes = list(store.items(store.resource("v1/nodes")))
    everything = list(store.items(store.resource("v1/pods")))
    for pod in everything:
        if not _pending(pod):
            continue
        fits, reasons = place(pod, nodes, everything)
        if fits:
            _, chosen = min(fits)
            _bind(store, pod, chosen)
            (pod.get("spec") or {})["nodeName"] = chosen
            continue
        _refuse(store, pod, nodes, reasons)


def _refuse(store: Store, pod: Obj, nodes: list[Obj], reasons: list[str]) -> None:
    message = (
        f"0/{len(nodes)} nodes are available: " + "; ".join(reasons) if nodes else "no nodes available to schedule pods"
    )
    refusal = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    current = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
    if not current or current[0].get("message") != message:
        meta = pod["metadata"]
        body = {"status": {"conditions": [refusal]}}
        store.patch(store.resource("v1/pods"), meta["namespace"], meta["name"], "merge", body, "status")
    # Counted at most every 20 s: the home-made scheduler tries again on every change.
    events.recorder(store, "default-scheduler", repeat_seconds=20).event(
        pod, events.WARNING, "FailedScheduling", message
    )


def _bind(store: Store, pod: Obj, node: str) -> None:
    pods_res, meta = store.resource("v1/pods"), pod["metadata"]
    now = rfc3339(datetime.now(UTC))
    store.patch(pods_res, meta["namespace"], meta["name"], "merge", {"spec": {"nodeName": node}})
    condition = {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}
    body = {"status": {"conditions": [condition]}}
    store.patch(pods_res, meta["namespace"], meta["name"], "merge", body, "status")
