"""Would the kubelet admit this pod on that Node? Pure, in the kubelet's own units.

Slurm chooses the node, but the kubelet admits the pod: it rejects a pod (OutOfcpu, OutOfmemory,
OutOfnvidia.com/gpu, OutOfpods) whose requests plus those of the non-terminated pods already on the
Node exceed the Node's status.allocatable. Slurm's accounting and the Node's disagree whenever
something Slurm does not know takes room there (DaemonSets, pods of the default scheduler, a slurmd
pod of an exclusive NodeSet that requests the whole node), so the scheduler checks before binding.

Units: cpu in millicores, every other resource as an integer of its base unit (bytes, devices),
rounded up as resource.Quantity's MilliValue and Value do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sunk.kubefit import amount, parse_quantity, pod_requests

__all__ = ["NodeView", "Shortfall", "node_view", "parse_quantity", "pinned_containers", "pod_requests", "shortfalls"]

_ORDER = ("cpu", "memory", "ephemeral-storage")
"""The kubelet's order of checks after the pod count; extended resources follow by name."""


def pinned_containers(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """Containers the kubelet's static CPU manager would give exclusive cores: the pod is
    Guaranteed (every container, init ones included, has cpu and memory requests equal to its
    limits) and the container's CPU request is a whole number."""
    every = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    if not every:
        return ()
    for c in every:
        resources = c.get("resources") or {}
        limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
        for name in ("cpu", "memory"):
            if name not in limits:
                return ()
            try:
                if name in requests and parse_quantity(requests[name]) != parse_quantity(limits[name]):
                    return ()
            except ValueError:
                return ()
    pinned = []
    for c in spec.get("containers") or []:
        cpu = parse_quantity(((c.get("resources") or {}).get("limits") or {})["cpu"])
        if cpu.denominator == 1 and cpu > 0:
            pinned.append(str(c.get("name", "")))
    return tuple(pinned)


@dataclass(frozen=True)
class NodeView:
    """A Kubernetes Node as the kubelet's admission sees it."""

    name: str
    allocatable: Mapping[str, int]
    used: Mapping[str, int] = field(default_factory=dict)
    """Requests of the non-terminated pods on the Node, summed."""
    pods: int = 0
    """How many non-terminated pods are on the Node."""

    def plus(self, requests: Mapping[str, int]) -> NodeView:
        """This Node once one more pod with these requests is on it."""
        used = {k: self.used.get(k, 0) + requests.get(k, 0) for k in self.used.keys() | requests.keys()}
        return NodeView(self.name, self.allocatable, used, self.pods + 1)


def node_view(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> NodeView:
    """From a Node and the pods whose spec.nodeName is it (any namespace); terminated pods free
    their requests. Raises ValueError on a quantity that does not parse."""
    status = node.get("status") or {}
    alloc = {k: amount(k, v) for k, v in (status.get("allocatable") or {}).items()}
    used: dict[str, int] = {}
    count = 0
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        count += 1
        for k, v in pod_requests(pod.get("spec") or {}).items():
            used[k] = used.get(k, 0) + v
    return NodeView((node.get("metadata") or {}).get("name", ""), alloc, used, count)


@dataclass(frozen=True)
class Shortfall:
    resource: str
    requested: int
    used: int
    allocatable: int

    def __str__(self) -> str:
        unit = "m" if self.resource == "cpu" else ""
        free = max(0, self.allocatable - self.used)
        return (
            f"{self.resource}: requested {self.requested}{unit}, "
            f"{self.used}{unit} of {self.allocatable}{unit} allocatable in use ({free}{unit} free)"
        )


def shortfalls(node: NodeView, requests: Mapping[str, int]) -> list[Shortfall]:
    """Every resource this pod would overflow on the Node; empty means the kubelet admits it.
    Like the kubelet, an extended resource the Node does not list at all is not checked."""
    out = []
    pods = node.allocatable.get("pods", 0)
    if node.pods + 1 > pods:
        out.append(Shortfall("pods", 1, node.pods, pods))
    extended = sorted(k for k in requests if k not in _ORDER)
    for name in (*_ORDER, *extended):
        want = requests.get(name, 0)
        if want <= 0:
            continue
        if "/" in name and "kubernetes.io/" not in name and name not in node.allocatable:
            continue
        have, used = node.allocatable.get(name, 0), node.used.get(name, 0)
        if want > have - used:
            out.append(Shortfall(name, want, used, have))
    return out
