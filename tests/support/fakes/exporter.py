"""An in-memory slurmctld for the exporter's tests: the four replies it reads, as slurmrestd
24.11 shapes them (the models parse the same dicts the real replies hold). What it can't model:
how slurmctld itself counts (sdiag's numbers are whatever the test sets)."""

from __future__ import annotations

from typing import Any

from sunk.runtime.slurmrest import SlurmUnavailable
from sunk.runtime.slurmrest.models import Diag, Job, Node, Partition


def node(
    name: str,
    state: tuple[str, ...] = ("IDLE",),
    *,
    partitions: tuple[str, ...] = ("batch",),
    cpus: int = 4,
    alloc_cpus: int = 0,
    memory: int = 4096,
    alloc_memory: int = 0,
    gpus: int = 0,
    alloc_gpus: int = 0,
) -> Node:
    tres = f"cpu={cpus},mem={memory}M,billing={cpus}" + (f",gres/gpu={gpus}" if gpus else "")
    used = ",".join(
        part
        for part in (
            f"cpu={alloc_cpus}" if alloc_cpus else "",
            f"mem={alloc_memory}M" if alloc_memory else "",
            f"gres/gpu={alloc_gpus}" if alloc_gpus else "",
        )
        if part
    )
    return Node.model_validate(
        {
            "name": name,
            "state": list(state),
            "partitions": list(partitions),
            "cpus": cpus,
            "alloc_cpus": alloc_cpus,
            "alloc_idle_cpus": cpus - alloc_cpus,
            "real_memory": memory,
            "alloc_memory": alloc_memory,
            "tres": tres,
            "tres_used": used,
        }
    )


def _number(value: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


def job(
    job_id: int,
    state: str = "PENDING",
    *,
    partition: str = "batch",
    account: str = "research",
    user: str = "alice",
    reason: str = "None",
    cpus: int = 1,
    gpus: int = 0,
    submit_time: int = 1_000,
    eligible_time: int | None = None,
    hold: bool = False,
) -> Job:
    eligible = submit_time if eligible_time is None else eligible_time
    return Job.model_validate(
        {
            "job_id": job_id,
            "job_state": [state],
            "state_reason": reason,
            "partition": partition,
            "account": account,
            "user_name": user,
            "cpus": _number(cpus),
            # slurmrestd's TRES strings: requested while pending, allocated once running.
            "tres_req_str": f"cpu={cpus},node=1" + (f",gres/gpu={gpus}" if gpus else ""),
            "tres_alloc_str": ""
            if state == "PENDING"
            else f"cpu={cpus},node=1" + (f",gres/gpu={gpus}" if gpus else ""),
            "submit_time": _number(submit_time),
            "eligible_time": _number(eligible),
            "hold": hold,
        }
    )


def partition(name: str, *, up: bool = True) -> Partition:
    return Partition.model_validate({"name": name, "partition": {"state": ["UP" if up else "DOWN"]}})


class FakeSlurm:
    """Implements runtime/exporter/slurm.SlurmApi. `unreachable` names endpoints that fail as an
    unreachable slurmctld does (SlurmUnavailable)."""

    def __init__(
        self,
        *,
        jobs: list[Job] | None = None,
        nodes: list[Node] | None = None,
        partitions: list[Partition] | None = None,
        diag: dict[str, Any] | None = None,
    ) -> None:
        self.jobs = jobs or []
        self.nodes = nodes or []
        self.partitions = partitions or []
        self.diag_stats = diag or {}
        self.unreachable: set[str] = set()
        self.requests = 0

    def _call(self, endpoint: str) -> None:
        self.requests += 1
        if endpoint in self.unreachable:
            raise SlurmUnavailable("GET", f"/slurm/v0.0.42/{endpoint}/", "slurmctld unreachable")

    def list_jobs(self) -> list[Job]:
        self._call("jobs")
        return list(self.jobs)

    def list_nodes(self, *, future: bool = False) -> list[Node]:
        self._call("nodes")
        return [n for n in self.nodes if future or n.base_state != "FUTURE"]

    def list_partitions(self) -> list[Partition]:
        self._call("partitions")
        return list(self.partitions)

    def diag(self) -> Diag:
        self._call("diag")
        return Diag.model_validate(self.diag_stats)
