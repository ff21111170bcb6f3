"""What a kubelet and the API server's eviction code decide, as pure functions over JSON objects.

kubesim calls these; they are written from Kubernetes' own rules and deliberately share no code
with the scheduler (`sunk.runtime.scheduler.fit`), so a test where both agree shows something.

Admission (pkg/kubelet/lifecycle/predicate.go, noderesources.Fits): a pod bound to a Node is
rejected when its effective requests plus those of the Node's admitted, non-terminated pods exceed
the Node's status.allocatable for any resource the pod requests, or when one more pod exceeds
allocatable "pods". The first failing resource wins (pods, cpu, memory, ephemeral-storage, then
extended resources by name); the pod turns Failed with reason `OutOf<resource>` and the message
"Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 7000,
capacity: 8000" (cpu in millicores, the rest in plain units). Like the kubelet, requests for an
extended resource the Node does not list at all are ignored (removeMissingExtendedResources).

Evictions (pkg/registry/core/pod/storage/eviction.go + the disruption controller): PDBs of the
pod's namespace whose selector matches its labels; more than one is a 500; Pending, terminal and
deleting pods are evicted without a PDB check; a healthy pod (Ready=True, not deleting) needs
disruptionsAllowed >= 1; an unhealthy one is evictable when the budget is met
(unhealthyPodEvictionPolicy IfHealthyBudget) or always (AlwaysAllow).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(?:[eE]([+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E))?$")
_ORDER = ("cpu", "memory", "ephemeral-storage")
DEFAULT_MAX_PODS = 110
"""The kubelet's --max-pods default: what a Node reports as allocatable "pods" unless configured."""


def quantity(value: str | int | float) -> Fraction:
    """A Kubernetes resource.Quantity as an exact number: 500m, 2, 1.5Gi, 1e3, 12E (exa), 1M."""
    if isinstance(value, int | float):
        return Fraction(value)
    m = _QUANTITY.match(value.strip())
    if m is None:
        raise ValueError(f"quantities must match the regular expression of resource.Quantity: {value!r}")
    number = Fraction(m.group(1))
    if m.group(2) is not None:
        return number * Fraction(10) ** int(m.group(2))
    return number * _SUFFIXES[m.group(3) or ""]


def units(resource: str, value: Fraction) -> int:
    """The integer the kubelet compares: millicores for cpu, Value() (rounded up) for the rest."""
    return math.ceil(value * 1000) if resource == "cpu" else math.ceil(value)


def _requests(container: Mapping[str, Any]) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    # The API server defaults a missing request to the limit; kmock does not, so do it here.
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: quantity(v) for name, v in merged.items()}


def _add(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {k: a.get(k, Fraction(0)) + b.get(k, Fraction(0)) for k in {*a, *b}}


def _max(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {k: max(a.get(k, Fraction(0)), b.get(k, Fraction(0))) for k in {*a, *b}}


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """resource.PodRequests: containers summed; native sidecars (init containers with
    restartPolicy Always) add to the sum and run beside every later init container; the result is
    the larger of that and the largest init container; overhead on top. In kubelet units."""
    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        total = _add(total, _requests(c))
    sidecars: dict[str, Fraction] = {}
    init: dict[str, Fraction] = {}
    for c in spec.get("initContainers") or []:
        req = _requests(c)
        if c.get("restartPolicy") == "Always":
            total = _add(total, req)
            sidecars = _add(sidecars, req)
            init = _max(init, sidecars)
        else:
            init = _max(init, _add(req, sidecars))
    total = _max(total, init)
    total = _add(total, {k: quantity(v) for k, v in (spec.get("overhead") or {}).items()})
    return {k: units(k, v) for k, v in total.items()}


def allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    status = node.get("status") or {}
    return {k: units(k, quantity(v)) for k, v in (status.get("allocatable") or {}).items()}


def terminated(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


@dataclass(frozen=True)
class Rejection:
    reason: str
    """OutOfcpu, OutOfmemory, OutOfpods, OutOfnvidia.com/gpu, ..."""
    message: str


def admit(pod: Mapping[str, Any], node: Mapping[str, Any], admitted: Iterable[Mapping[str, Any]]) -> Rejection | None:
    """The kubelet's resource admission of `pod` on `node`, given the pods it admitted before."""
    alloc = allocatable(node)
    others = [p for p in admitted if not terminated(p)]
    if len(others) + 1 > alloc.get("pods", 0):
        return _rejection("pods", 1, len(others), alloc.get("pods", 0))
    want = pod_requests(pod.get("spec") or {})
    used: dict[str, int] = {}
    for other in others:
        for k, v in pod_requests(other.get("spec") or {}).items():
            used[k] = used.get(k, 0) + v
    extended = sorted(k for k in want if k not in _ORDER and k != "pods")
    for name in (*_ORDER, *extended):
        requested = want.get(name, 0)
        if requested <= 0:
            continue
        if "/" in name and "kubernetes.io/" not in name and name not in alloc:
            continue  # an extended resource this Node does not advertise: the kubelet drops it
        capacity = alloc.get(name, 0)
        if requested > capacity - used.get(name, 0):
            return _rejection(name, requested, used.get(name, 0), capacity)
    return None


def _rejection(name: str, requested: int, used: int, capacity: int) -> Rejection:
    what = f"Node didn't have enough resource: {name}, requested: {requested}, used: {used}, capacity: {capacity}"
    return Rejection(f"OutOf{name}", f"Pod was rejected: {what}")


# --- evictions ---------------------------------------------------------------------------------


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector; in policy/v1 an empty selector matches every pod, a null one none."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def healthy(pod: Mapping[str, Any]) -> bool:
    """The disruption controller's healthy: Ready=True and not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _scaled(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent(..., roundUp=true)."""
    if isinstance(value, int):
        return value
    if value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


@dataclass(frozen=True)
class Budget:
    name: str
    expected: int
    desired_healthy: int
    current_healthy: int

    @property
    def disruptions_allowed(self) -> int:
        return max(0, self.current_healthy - self.desired_healthy)


def budget(pdb: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> Budget:
    """What the disruption controller would write into the PDB's status. Expected pods are the
    matching non-terminated pods (the controller would use the owners' replica counts)."""
    spec = pdb.get("spec") or {}
    matching = [p for p in pods if not terminated(p) and selector_matches(spec.get("selector"), _labels(p))]
    expected = len(matching)
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = expected  # neither set: the API server defaults minAvailable to 1 (ignored here)
    name = (pdb.get("metadata") or {}).get("name", "")
    return Budget(name, expected, desired, sum(1 for p in matching if healthy(p)))


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


@dataclass(frozen=True)
class Refusal:
    code: int
    reason: str
    message: str
    causes: tuple[str, ...] = ()


def eviction(
    pod: Mapping[str, Any], pdbs: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> Refusal | None:
    """None if the API server would evict `pod` now; `pdbs` and `pods` are its namespace's."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Pending", "Succeeded", "Failed") or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None  # canIgnorePDB
    matching = [b for b in pdbs if selector_matches((b.get("spec") or {}).get("selector"), _labels(pod))]
    if not matching:
        return None
    if len(matching) > 1:
        return Refusal(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
    pdb = matching[0]
    b = budget(pdb, pods)
    if not healthy(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        if policy == "AlwaysAllow" or (b.current_healthy >= b.desired_healthy and b.desired_healthy > 0):
            return None
    if b.disruptions_allowed >= 1:
        return None
    cause = (
        f"The disruption budget {b.name} needs {b.desired_healthy} healthy pods and has {b.current_healthy} currently"
    )
    return Refusal(
        429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.", (cause,)
    )
