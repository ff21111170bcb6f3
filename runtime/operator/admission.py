"""Whether a slurmd pod fits a Node the way a kubelet admits it. Pure: JSON objects in, numbers out.

A kubelet admits a pod when, for every resource the pod requests, its requests plus those of the
non-terminated pods already bound to the Node fit `status.allocatable`, and one more pod fits
allocatable `pods` (https://kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/
and the NodeResourcesFit rules). A pod's effective request per resource is the larger of the sum
over its app containers plus its sidecars (init containers with restartPolicy Always) and, for
each plain init container, its own request plus the sidecars started before it; pod overhead is
added (https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/#resource-sharing-within-containers).
A container with limits but no requests requests its limits (API server defaulting).

Units: cpu in millicores, everything else (memory and ephemeral-storage bytes, extended resources,
pods) in its own unit, rounded up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sunk import kubefit
from sunk.kubefit import amount

__all__ = [
    "Amounts",
    "Shortfall",
    "add_usage",
    "allocatable",
    "amount",
    "node_usage",
    "pod_requests",
    "shortfalls",
    "terminated",
]

Amounts = Mapping[str, int]


def _add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """The pod's effective requests (sunk.kubefit), `pods: 1` included."""
    return {**kubefit.pod_requests(pod.get("spec") or {}), "pods": 1}


def terminated(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def node_usage(pods: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Node name -> summed requests of the non-terminated pods bound to it (terminating ones still
    count: their containers hold the resources until they stop)."""
    usage: dict[str, dict[str, int]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not terminated(pod):
            usage[node] = _add(usage.get(node, {}), pod_requests(pod))
    return usage


def add_usage(usage: dict[str, dict[str, int]], node: str, requests: Mapping[str, int]) -> None:
    """Count `requests` on `node` (a pod created or pinned there, not yet bound)."""
    usage[node] = _add(usage.get(node, {}), requests)


def allocatable(node: Mapping[str, Any]) -> dict[str, int] | None:
    """A Node's status.allocatable, or None when it reports none (no kubelet has registered it)."""
    raw = (node.get("status") or {}).get("allocatable")
    if not raw:
        return None
    return {k: amount(k, v) for k, v in raw.items()}


@dataclass(frozen=True)
class Shortfall:
    resource: str
    request: int
    used: int
    allocatable: int

    def __str__(self) -> str:
        def show(n: int) -> str:
            if self.resource == "cpu":
                return f"{n / 1000:.3f}".rstrip("0").rstrip(".")
            if self.resource in ("memory", "ephemeral-storage"):
                return f"{math.ceil(n / 2**20)}Mi"
            return str(n)

        return (
            f"{self.resource}: requests {show(self.request)}, {show(self.used)} in use of "
            f"{show(self.allocatable)} allocatable"
        )


def shortfalls(alloc: Amounts, used: Amounts, request: Amounts) -> list[Shortfall]:
    """Each resource the pod requests that does not fit, in the kubelet's order (pods, cpu, memory,
    ephemeral-storage, then extended resources by name). A resource the Node does not list has 0
    allocatable. The kubelet's own admission ignores an extended resource its Node does not list
    (removeMissingExtendedResources), but the device plugin's allocation then fails the pod
    (UnexpectedAdmissionError): a slurmd pod asking for GPUs a Node has none of is not created."""
    first = ("pods", "cpu", "memory", "ephemeral-storage")
    order = [r for r in first if r in request] + sorted(r for r in request if r not in first)
    out = []
    for r in order:
        want = request[r]
        if want and used.get(r, 0) + want > alloc.get(r, 0):
            out.append(Shortfall(r, want, used.get(r, 0), alloc.get(r, 0)))
    return out
