"""In-memory KubeApi and SlurmApi for tests of the glue: same contracts, no servers.

Not modelled here: a kubelet (a binding is never rejected; kubesim models admission for the
process tests), field selectors, resourceVersions; FakeSlurm never places or starts a job by
itself (a test `start`s it on the nodes it chooses, ignoring exclusions and constraints)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sunk.runtime.scheduler.kube import Conflict, EvictionBlocked, KubeApi
from sunk.runtime.scheduler.marker import Marker
from sunk.runtime.scheduler.model import JobView
from sunk.runtime.scheduler.request import JobRequest
from sunk.runtime.scheduler.slurm import Rejected, SlurmApi
from sunk.runtime.slurmrest.podref import PodRef


@dataclass
class FakeKube:
    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    slurmd: list[dict[str, Any]] = field(default_factory=list)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    events: list[tuple[PodRef, str, str, str]] = field(default_factory=list)
    bindings: list[tuple[PodRef, str]] = field(default_factory=list)
    deleted: list[PodRef] = field(default_factory=list)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Kubernetes Nodes by name; get_node of any other name is None (no such Node)."""
    fail_node_reads: bool = False
    fail_lists: bool = False
    block_evictions: bool = False

    def add_pod(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.pods[(meta["namespace"], meta["name"])] = obj

    def list_pods(self, scheduler_name: str, namespaces: Sequence[str]) -> list[dict[str, Any]]:
        if self.fail_lists:
            raise ConnectionError("API server unreachable")
        return [
            copy.deepcopy(p)
            for (ns, _), p in self.pods.items()
            if p["spec"].get("schedulerName") == scheduler_name
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and ("*" in namespaces or ns in namespaces)
        ]

    def list_slurmd_pods(self, namespace: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(p) for p in self.slurmd if p["metadata"]["namespace"] == namespace]

    def namespace_annotations(self, name: str) -> dict[str, str]:
        return dict(self.namespaces.get(name, {}))

    def get_pod(self, ref: PodRef) -> dict[str, Any] | None:
        pod = self.pods.get((ref.namespace, ref.name))
        return copy.deepcopy(pod) if pod is not None and pod["metadata"]["uid"] == ref.uid else None

    def get_node(self, name: str) -> dict[str, Any] | None:
        if self.fail_node_reads:
            raise PermissionError("nodes is forbidden")
        node = self.nodes.get(name)
        return copy.deepcopy(node) if node is not None else None

    def pods_on_node(self, name: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(p) for p in [*self.pods.values(), *self.slurmd] if p["spec"].get("nodeName") == name]

    def bind(self, ref: PodRef, node: str, annotations: Mapping[str, str]) -> None:
        # As the API server: 404 for a pod gone, 409 for one bound or recreated (uid precondition).
        pod = self.pods.get((ref.namespace, ref.name))
        if pod is None or pod["metadata"]["uid"] != ref.uid:
            raise Conflict(f"{ref} is gone")
        if pod["spec"].get("nodeName"):
            raise Conflict(f"{ref} already bound")
        pod["spec"]["nodeName"] = node
        pod["metadata"].setdefault("annotations", {}).update(annotations)
        self.bindings.append((ref, node))

    def evict(self, ref: PodRef) -> None:
        if self.block_evictions:
            raise EvictionBlocked(f"{ref}: PodDisruptionBudget")
        pod = self.pods.get((ref.namespace, ref.name))
        if pod is not None and pod["metadata"]["uid"] == ref.uid:
            del self.pods[(ref.namespace, ref.name)]
            self.deleted.append(ref)

    def set_scheduled(self, ref: PodRef, status: str, reason: str, message: str) -> None:
        pod = self.pods.get((ref.namespace, ref.name))
        if pod is None:
            return
        conditions = [c for c in pod.setdefault("status", {}).get("conditions", []) if c["type"] != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": status, "reason": reason, "message": message})
        pod["status"]["conditions"] = conditions

    def event(self, ref: PodRef, kind: str, reason: str, message: str) -> None:
        self.events.append((ref, kind, reason, message))


@dataclass
class FakeSlurm:
    """Jobs stay PENDING until a test `start`s them; `reject` makes every submit fail."""

    job_list: list[JobView] = field(default_factory=list)
    submitted: list[tuple[int, JobRequest, Marker]] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    reject: str = ""
    next_id: int = 100
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    """Submits may come from several threads (Scheduler's submit_workers)."""

    def jobs(self) -> list[JobView]:
        return list(self.job_list)

    def submit(self, request: JobRequest, marker: Marker) -> int:
        if self.reject:
            raise Rejected(self.reject)
        with self.lock:
            self.next_id += 1
            job_id = self.next_id
            self.submitted.append((job_id, request, marker))
            job = JobView(job_id, marker, "PENDING", reason="Priority", submit_time=1000.0, excluded=request.exclude)
            self.job_list.append(job)
        return job_id

    def cancel(self, job_ids: Iterable[int]) -> None:
        for job_id in sorted(set(job_ids)):
            self.cancelled.append(job_id)
            self._set(job_id, state="CANCELLED", nodes=())

    def start(self, job_id: int, nodes: tuple[str, ...], start_time: float = 2000.0) -> None:
        self._set(job_id, state="RUNNING", nodes=nodes, start_time=start_time, reason="None")

    def end(self, job_id: int, state: str) -> None:
        self._set(job_id, state=state)

    def _set(self, job_id: int, **changes: Any) -> None:
        self.job_list = [replace(j, **changes) if j.job_id == job_id else j for j in self.job_list]


def _conforms(kube: FakeKube, slurm: FakeSlurm) -> tuple[KubeApi, SlurmApi]:
    """mypy checks here that each fake is a full stand-in for the protocol the scheduler uses."""
    return kube, slurm
