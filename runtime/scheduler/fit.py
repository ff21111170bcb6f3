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

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

_SUFFIX: dict[str, Fraction | int] = {
    "": 1,
    "m": Fraction(1, 1000),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9]*\.?[0-9]+)(?:([eE][+-]?[0-9]+)|(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?)$")


def parse_quantity(text: str | int | float) -> Fraction:
    """A Kubernetes quantity (`500m`, `2`, `1.5Gi`, `1e3`) as an exact number."""
    if isinstance(text, int | float):
        return Fraction(text)
    m = _QUANTITY.match(text.strip())
    if m is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number = Fraction(m.group(1))
    if m.group(2):
        return number * Fraction(10) ** int(m.group(2)[1:])
    return number * Fraction(_SUFFIX[m.group(3) or ""])


_ORDER = ("cpu", "memory", "ephemeral-storage")
"""The kubelet's order of checks after the pod count; extended resources follow by name."""


def _units(resource: str, value: Fraction) -> int:
    return math.ceil(value * 1000) if resource == "cpu" else math.ceil(value)


def _container(c: Mapping[str, Any]) -> dict[str, Fraction]:
    resources = c.get("resources") or {}
    # The API server defaults a missing request to the limit.
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {k: parse_quantity(v) for k, v in merged.items()}


def _plus(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {k: a.get(k, Fraction(0)) + b.get(k, Fraction(0)) for k in a.keys() | b.keys()}


def _upper(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {k: max(a.get(k, Fraction(0)), b.get(k, Fraction(0))) for k in a.keys() | b.keys()}


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """Effective requests as kube-scheduler and the kubelet compute them (resource.PodRequests):
    containers summed, native sidecars (init containers with restartPolicy Always) added and
    running beside every later init container, the larger of that and the largest init step,
    plus overhead. Raises ValueError on a quantity that does not parse."""
    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        total = _plus(total, _container(c))
    sidecars: dict[str, Fraction] = {}
    init: dict[str, Fraction] = {}
    for c in spec.get("initContainers") or []:
        req = _container(c)
        if c.get("restartPolicy") == "Always":
            total, sidecars = _plus(total, req), _plus(sidecars, req)
            init = _upper(init, sidecars)
        else:
            init = _upper(init, _plus(req, sidecars))
    total = _upper(total, init)
    total = _plus(total, {k: parse_quantity(v) for k, v in (spec.get("overhead") or {}).items()})
    return {k: _units(k, v) for k, v in sorted(total.items()) if v > 0}


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
    alloc = {k: _units(k, parse_quantity(v)) for k, v in (status.get("allocatable") or {}).items()}
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
