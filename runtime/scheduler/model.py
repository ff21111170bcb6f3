"""What the scheduler observes, reduced to plain frozen values: pods, Slurm jobs, the node map.

The `*_view` functions turn raw API objects (Kubernetes JSON, slurmrestd v0.0.42 JSON) into these
values; they are pure so the plan tests can build snapshots from literal dicts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any

from sunk.hostlist import expand

from ..slurmrest.podref import PodRef
from . import keys

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
ACTIVE_JOB_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "REQUEUED", "RESIZING"})

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


@dataclass(frozen=True)
class PodResources:
    """The pod's effective requests: max(sum of containers, largest init container)."""

    cpu_millis: int = 0
    memory_bytes: int = 0
    gpus: int = 0


@dataclass(frozen=True)
class PodView:
    namespace: str
    name: str
    uid: str
    created: float
    """creationTimestamp, epoch seconds."""
    phase: str = "Pending"
    node_name: str = ""
    deleting: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    resources: PodResources = PodResources()
    resource_error: str = ""
    """Why the requests could not be read (an unparseable quantity); such pods are rejected."""
    scheduled: tuple[str, str, str] | None = None
    """The PodScheduled condition as (status, reason, message), if any."""

    @property
    def live(self) -> bool:
        return not self.deleting and self.phase not in TERMINAL_PHASES

    @property
    def group(self) -> str | None:
        return self.annotations.get(keys.GROUP) or None

    @property
    def bound_job(self) -> int | None:
        value = self.annotations.get(keys.JOB_ID, "")
        return int(value) if value.isdigit() else None

    @property
    def bound_slurm_node(self) -> str:
        return self.annotations.get(keys.SLURM_NODE, "")

    @property
    def bound_start(self) -> str:
        return self.annotations.get(keys.JOB_START, "")

    @property
    def marker(self) -> keys.Marker:
        if self.group is not None:
            return keys.Marker("group", self.namespace, self.group)
        return keys.Marker("pod", self.namespace, self.name, self.uid)

    @property
    def ref(self) -> PodRef:
        return PodRef(self.namespace, self.name, self.uid)


@dataclass(frozen=True)
class JobView:
    job_id: int
    marker: keys.Marker
    state: str
    """Base state: PENDING, RUNNING, COMPLETED, CANCELLED, PREEMPTED, FAILED, TIMEOUT, ..."""
    flags: frozenset[str] = frozenset()
    nodes: tuple[str, ...] = ()
    reason: str = ""
    """state_reason: why it is pending (Priority, Resources, ...) or how it ended."""
    submit_time: float = 0.0
    start_time: float = 0.0

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_JOB_STATES and "COMPLETING" not in self.flags

    @property
    def running(self) -> bool:
        return self.state == "RUNNING" and "COMPLETING" not in self.flags and bool(self.nodes)


@dataclass(frozen=True)
class Snapshot:
    pods: Sequence[PodView]
    """Every pod whose schedulerName is ours, any namespace."""
    jobs: Sequence[JobView]
    """Every Slurm job carrying a marker, active or recently ended (slurmctld keeps MinJobAge)."""
    node_of: Mapping[str, str]
    """Slurm node name -> Kubernetes Node name, from the slurmd pods."""
    namespace_defaults: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Namespace -> its slurm.sunk.dev/* annotations."""


def _timestamp(value: str | None) -> float:
    if not value:
        return 0.0
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _container_requests(container: Mapping[str, Any]) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    # Without a request, Kubernetes defaults it to the limit (the API server does; be safe here too).
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: parse_quantity(value) for name, value in merged.items()}


def pod_resources(spec: Mapping[str, Any]) -> PodResources:
    """Effective requests of a pod spec, as kube-scheduler computes them (plus pod overhead)."""
    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        for name, value in _container_requests(c).items():
            total[name] = total.get(name, Fraction(0)) + value
    for c in spec.get("initContainers") or []:
        for name, value in _container_requests(c).items():
            total[name] = max(total.get(name, Fraction(0)), value)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Fraction(0)) + parse_quantity(value)
    return PodResources(
        cpu_millis=math.ceil(total.get("cpu", Fraction(0)) * 1000),
        memory_bytes=math.ceil(total.get("memory", Fraction(0))),
        gpus=math.ceil(total.get("nvidia.com/gpu", Fraction(0))),
    )


def pod_view(obj: Mapping[str, Any]) -> PodView:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    scheduled = next(
        (
            (c.get("status", ""), c.get("reason", ""), c.get("message", ""))
            for c in status.get("conditions") or []
            if c.get("type") == "PodScheduled"
        ),
        None,
    )
    try:
        resources, error = pod_resources(spec), ""
    except ValueError as e:
        resources, error = PodResources(), str(e)
    return PodView(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        created=_timestamp(meta.get("creationTimestamp")),
        phase=status.get("phase") or "Pending",
        node_name=spec.get("nodeName") or "",
        deleting=bool(meta.get("deletionTimestamp")),
        annotations=dict(meta.get("annotations") or {}),
        resources=resources,
        resource_error=error,
        scheduled=scheduled,
    )


def node_map(slurmd_pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Slurm node -> Kubernetes Node from slurmd pods: hostname is the Slurm node, nodeName the host.

    Pods that are ending or not yet on a Node map nothing: a pod must not be bound to a Node whose
    slurmd is going away.
    """
    out: dict[str, str] = {}
    for pod in slurmd_pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if keys.NODESET_LABEL not in (meta.get("labels") or {}) or meta.get("deletionTimestamp"):
            continue
        if spec.get("hostname") and spec.get("nodeName"):
            out[spec["hostname"]] = spec["nodeName"]
    return out


def _number(value: Any) -> float:
    """v0.0.42 numbers come as {"set": bool, "infinite": bool, "number": n}."""
    if isinstance(value, Mapping):
        return float(value.get("number", 0)) if value.get("set", True) else 0.0
    return float(value or 0)


def job_view(job: Mapping[str, Any]) -> JobView | None:
    """A v0.0.42 job (GET /slurm/v0.0.42/jobs) if it carries our marker, else None."""
    marker = keys.Marker.parse(job.get("comment") or "") or keys.Marker.parse(job.get("name") or "")
    if marker is None:
        return None
    states = job.get("job_state") or []
    if isinstance(states, str):
        states = [states]
    state = states[0] if states else "UNKNOWN"
    nodes = job.get("nodes") or ""
    return JobView(
        job_id=int(_number(job.get("job_id"))),
        marker=marker,
        state=state,
        flags=frozenset(states[1:]),
        nodes=tuple(expand(nodes)) if nodes else (),
        reason=job.get("state_reason") or "",
        submit_time=_number(job.get("submit_time")),
        start_time=_number(job.get("start_time")),
    )
