"""Kubernetes resource quantities and a pod's effective requests, as kube-scheduler and the kubelet
compute them. Pure; shared by the operator (will a slurmd pod fit its Node?) and the scheduler
(will the kubelet admit a pod Slurm placed?). tests/support/kubelet.py, the test API's kubelet,
deliberately keeps its own copy, so tests where both agree show something.

Units: cpu in millicores, every other resource as an integer of its base unit (bytes, devices),
rounded up as resource.Quantity's MilliValue and Value do.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
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
    return _parse_text(text)


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    # Cached: a cluster's pods repeat a few dozen quantities, and building Fractions from text was
    # most of the scheduler's CPU per cycle (~1 ms per pod, measured 2026-11). Fractions are immutable.
    m = _QUANTITY.match(text.strip())
    if m is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number = Fraction(m.group(1))
    if m.group(2):
        return number * Fraction(10) ** int(m.group(2)[1:])
    return number * Fraction(_SUFFIX[m.group(3) or ""])


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


def amount(resource: str, value: str | int | float) -> int:
    """One quantity in these units: `cpu` in millicores, anything else as is, rounded up."""
    return _units(resource, parse_quantity(value))
