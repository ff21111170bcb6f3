"""The eviction subresource's check (pods/eviction, what `kubectl drain` asks for): whether a
pod's PodDisruptionBudgets let it go, as the API server's eviction REST handler decides.

Not modelled: selectors with matchExpressions (matchLabels only), the disruption controller's
status (disruptionsAllowed is computed here from the pods at the time), eviction's retry advice
(the 429 names no Retry-After)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .store import Obj


def _ready_pod(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _budget(value: Any, expected: int) -> int:
    text = str(value)
    if text.endswith("%"):
        return -(-int(text[:-1]) * expected // 100)  # rounded up, as the disruption controller does
    return int(text)


def eviction_refusal(pod: Obj, budgets: Iterable[Obj], pods: list[Obj]) -> str | None:
    """Why evicting `pod` would break a PodDisruptionBudget of its namespace, or None when it may
    go (pods/eviction's check): Pending and terminal pods always may; with
    unhealthyPodEvictionPolicy AlwaysAllow, so may a pod that is not Ready."""
    if (pod.get("status") or {}).get("phase") in ("Pending", "Succeeded", "Failed"):
        return None
    labels = pod["metadata"].get("labels") or {}
    for pdb in budgets:
        spec = pdb.get("spec") or {}
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            continue
        if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow" and not _ready_pod(pod):
            continue
        refusal = _budget_refusal(pdb, selector, pod, pods)
        if refusal is not None:
            return refusal
    return None


def _budget_refusal(pdb: Obj, selector: Mapping[str, Any], pod: Obj, pods: list[Obj]) -> str | None:
    """Why one budget that selects `pod` refuses its eviction: the Ready pods it selects, less
    `pod`, below minAvailable or the others above maxUnavailable (each a count or a percent)."""
    spec = pdb.get("spec") or {}
    matching = [p for p in pods if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())]
    healthy = sum(1 for p in matching if _ready_pod(p))
    after = healthy - (1 if _ready_pod(pod) else 0)
    name = pdb["metadata"]["name"]
    if "minAvailable" in spec and after < _budget(spec["minAvailable"], len(matching)):
        return f"The disruption budget {name} needs {_budget(spec['minAvailable'], len(matching))} healthy pods and has {healthy} currently"
    if "maxUnavailable" in spec and len(matching) - after > _budget(spec["maxUnavailable"], len(matching)):
        return f"The disruption budget {name} allows {_budget(spec['maxUnavailable'], len(matching))} unavailable pods"
    return None
