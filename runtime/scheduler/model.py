"""What the scheduler observes, reduced to plain frozen values: pods, Slurm jobs, the node map.

The `*_view` functions turn raw API objects (Kubernetes JSON, slurmrestd v0.0.42 JSON) into these
values; they are pure so the plan tests can build snapshots from literal dicts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sunk import keys
from sunk.hostlist import expand

from ..slurmrest.podref import PodRef
from .fit import NodeView, pinned_containers, pod_requests
from .marker import Marker

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
ACTIVE_JOB_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "REQUEUED", "RESIZING"})


@dataclass(frozen=True)
class PodResources:
    """The requests a placeholder job is sized from (a projection of PodView.requests)."""

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
    requests: Mapping[str, int] = field(default_factory=dict)
    """Every effective request in the kubelet's units (cpu in millicores): what admission checks."""
    pinned: tuple[str, ...] = ()
    """Containers the static CPU manager would pin to exclusive cores (Guaranteed, whole CPUs)."""
    resource_error: str = ""
    """Why the requests could not be read (an unparseable quantity); such pods are rejected."""
    scheduled: tuple[str, str, str] | None = None
    """The PodScheduled condition as (status, reason, message), if any."""

    @property
    def live(self) -> bool:
        return not self.deleting and self.phase not in TERMINAL_PHASES

    @property
    def stopping(self) -> bool:
        """Deleted but still on its Node: bound, not Succeeded or Failed. Its containers run until
        the kubelet stops them (the grace period, longer on a lost Node), so its Slurm allocation
        must outlive them, as kube-scheduler counts a terminating pod's resources until it is gone:
        a job cancelled at the deletion would hand its GPUs on while the pod still uses them."""
        return self.deleting and bool(self.node_name) and self.phase not in TERMINAL_PHASES

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
    def marker(self) -> Marker:
        if self.group is not None:
            return Marker("group", self.namespace, self.group)
        return Marker("pod", self.namespace, self.name, self.uid)

    @property
    def ref(self) -> PodRef:
        return PodRef(self.namespace, self.name, self.uid)


@dataclass(frozen=True)
class JobView:
    job_id: int
    marker: Marker
    state: str
    """Base state: PENDING, RUNNING, COMPLETED, CANCELLED, PREEMPTED, FAILED, TIMEOUT, ..."""
    flags: frozenset[str] = frozenset()
    nodes: tuple[str, ...] = ()
    reason: str = ""
    """state_reason: why it is pending (Priority, Resources, ...) or how it ended."""
    submit_time: float = 0.0
    start_time: float = 0.0
    excluded: tuple[str, ...] = ()
    """Nodes the job was submitted to avoid (excluded_nodes): where an earlier placement did not fit."""
    gpu_indices: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Slurm node -> the GPU indices (GRES IDX) the job holds there, from gres_detail."""
    start_exact: bool = True
    """Whether start_time is Slurm's own (read from the job); False for an allocation granted on a
    node the scheduler named, whose start is the time of the grant as the scheduler saw it."""

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
    exclusive: frozenset[str] = frozenset()
    """Slurm nodes whose slurmd pod says resourceMode exclusive: never bound to (no pod belongs
    beside a slurmd that holds the whole node, even where the Node has room to spare)."""
    nodes: Mapping[str, NodeView] = field(default_factory=dict)
    """Kubernetes Node name -> allocatable and what its pods use, for every Node a pod may be
    bound to this cycle (absent: the Node could not be read, so nothing is bound there)."""


def _timestamp(value: str | None) -> float:
    if not value:
        return 0.0
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def pod_resources(spec: Mapping[str, Any]) -> PodResources:
    """Effective requests of a pod spec, as kube-scheduler computes them (plus pod overhead)."""
    requests = pod_requests(spec)
    return PodResources(
        cpu_millis=requests.get("cpu", 0),
        memory_bytes=requests.get("memory", 0),
        gpus=requests.get("nvidia.com/gpu", 0),
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
        requests, error = pod_requests(spec), ""
    except ValueError as e:
        requests, error = {}, str(e)
    resources = PodResources(requests.get("cpu", 0), requests.get("memory", 0), requests.get("nvidia.com/gpu", 0))
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
        requests=requests,
        pinned=pinned_containers(spec) if not error else (),
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
        if keys.NODESET not in (meta.get("labels") or {}) or meta.get("deletionTimestamp"):
            continue
        if spec.get("hostname") and spec.get("nodeName"):
            out[spec["hostname"]] = spec["nodeName"]
    return out


def exclusive_nodes(slurmd_pods: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """Slurm nodes (spec.hostname) whose slurmd pod carries resource-mode=exclusive."""
    return frozenset(
        (pod.get("spec") or {}).get("hostname", "")
        for pod in slurmd_pods
        if ((pod.get("metadata") or {}).get("labels") or {}).get(keys.RESOURCE_MODE) == "exclusive"
    ) - {""}


def _number(value: Any) -> float:
    """v0.0.42 numbers come as {"set": bool, "infinite": bool, "number": n}."""
    if isinstance(value, Mapping):
        return float(value.get("number", 0)) if value.get("set", True) else 0.0
    return float(value or 0)


def job_view(job: Mapping[str, Any]) -> JobView | None:
    """A v0.0.42 job (GET /slurm/v0.0.42/jobs) if it carries our marker, else None."""
    marker = Marker.parse(job.get("comment") or "") or Marker.parse(job.get("name") or "")
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
        excluded=tuple(expand(excluded)) if (excluded := _csv(job.get("excluded_nodes"))) else (),
        gpu_indices=gpu_indices(tuple(expand(nodes)) if nodes else (), job.get("gres_detail") or []),
    )


_IDX = re.compile(r"IDX:([0-9,\-]+)")


def _indices(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out += range(int(lo), int(hi or lo) + 1)
    return tuple(out)


def gpu_indices(nodes: Sequence[str], gres_detail: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """slurmrestd's gres_detail has one entry per allocated node, in the job's node order, e.g.
    "gpu:h100:2(IDX:0-1)" or, with several GRES, "gpu:h100:1(IDX:3),shard:0"; GPUs only."""
    out: dict[str, tuple[int, ...]] = {}
    for node, detail in zip(nodes, gres_detail, strict=False):
        found: list[int] = []
        for item in re.split(r",(?=[a-z])", str(detail)):
            m = _IDX.search(item)
            if item.startswith("gpu") and m:
                found += _indices(m.group(1))
        if found:
            out[node] = tuple(sorted(found))
    return out


def _csv(value: Any) -> str:
    """excluded_nodes comes as a hostlist string (or a list of them)."""
    if isinstance(value, list):
        return ",".join(str(v) for v in value if v)
    return str(value or "")


def wanted_nodes(pods: Sequence[PodView], jobs: Sequence[JobView], node_of: Mapping[str, str]) -> list[str]:
    """Kubernetes Nodes a pod may be bound to this cycle: those of running jobs whose workload has
    an unbound live pod. Only these are read (Node and its pods), so an idle cycle reads none."""
    waiting = {p.marker.text for p in pods if p.live and not p.node_name}
    return sorted({node_of[n] for j in jobs if j.running and j.marker.text in waiting for n in j.nodes if n in node_of})
