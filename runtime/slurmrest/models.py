"""pydantic models of the slurmrestd v0.0.42 objects sunk reads and writes.

Only the fields sunk uses are declared; slurmrestd returns dozens more per object and new Slurm
releases add some, so reads ignore unknown fields (`extra="ignore"`). Numbers that Slurm may
leave unset arrive as `{"set": bool, "infinite": bool, "number": int}`; `NoVal` turns them into
`int | None` (None for unset or infinite)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from sunk.hostlist import expand

BASE_STATES = frozenset({"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"})
"""Slurm node base states; every other entry of `state` is a flag (DRAIN, NOT_RESPONDING, ...)."""


def _no_val(value: Any) -> Any:
    if isinstance(value, dict):
        if not value.get("set", False) or value.get("infinite", False):
            return None
        return value.get("number")
    return value


NoVal = Annotated[int | None, BeforeValidator(_no_val)]
"""Slurm's uint*_no_val struct read as an int, None when unset or infinite."""


def no_val(number: int | None) -> dict[str, Any]:
    """The write form of a uint*_no_val field."""
    if number is None:
        return {"set": False, "infinite": False, "number": 0}
    return {"set": True, "infinite": False, "number": number}


class Reply(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Node(Reply):
    """One entry of GET /slurm/v0.0.42/nodes."""

    name: str
    hostname: str = ""
    address: str = ""
    state: tuple[str, ...] = ()
    reason: str = ""
    reason_set_by_user: str = ""
    reason_changed_at: NoVal = None
    comment: str = ""
    extra: str = ""
    features: tuple[str, ...] = ()
    active_features: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    gres: str = ""
    gres_used: str = ""
    cpus: int = 0
    alloc_cpus: int = 0
    alloc_idle_cpus: int = 0
    real_memory: int = 0
    alloc_memory: int = 0
    tres: str = ""
    tres_used: str = ""

    @property
    def base_state(self) -> str:
        """IDLE, ALLOCATED, MIXED, DOWN, FUTURE, ERROR or UNKNOWN."""
        return next((s for s in self.state if s in BASE_STATES), "UNKNOWN")

    @property
    def flags(self) -> frozenset[str]:
        return frozenset(s for s in self.state if s not in BASE_STATES)

    @property
    def drain(self) -> bool:
        """Drained or draining: Slurm starts no new job here."""
        return "DRAIN" in self.state


class Job(Reply):
    """One entry of GET /slurm/v0.0.42/jobs (slurmctld's view: pending and recent jobs)."""

    job_id: int
    name: str = ""
    comment: str = ""
    job_state: tuple[str, ...] = ()
    state_reason: str = ""
    state_description: str = ""
    nodes: str = ""
    batch_host: str = ""
    partition: str = ""
    qos: str = ""
    account: str = ""
    user_name: str = ""
    priority: NoVal = None
    time_limit: NoVal = None
    submit_time: NoVal = None
    start_time: NoVal = None
    end_time: NoVal = None
    node_count: NoVal = None
    tres_per_node: str = ""
    tres_alloc_str: str = ""

    @property
    def state(self) -> str:
        """The base job state (PENDING, RUNNING, COMPLETED, CANCELLED, PREEMPTED, ...)."""
        return self.job_state[0] if self.job_state else "UNKNOWN"

    @property
    def node_names(self) -> list[str]:
        """The allocated nodes, expanded from Slurm's hostlist."""
        return expand(self.nodes) if self.nodes else []


class DbJobState(Reply):
    current: tuple[str, ...] = ()
    reason: str = ""


class DbJobComment(Reply):
    administrator: str | None = None
    job: str | None = None
    system: str | None = None


class DbJobTime(Reply):
    submission: int | None = None
    start: int | None = None
    end: int | None = None
    elapsed: int | None = None
    limit: NoVal = None


class DbJob(Reply):
    """One entry of GET /slurmdb/v0.0.42/jobs (accounting: also finished jobs)."""

    job_id: int
    name: str = ""
    comment: DbJobComment = DbJobComment()
    state: DbJobState = DbJobState()
    nodes: str = ""
    partition: str = ""
    qos: str = ""
    account: str = ""
    user: str = ""
    priority: NoVal = None
    time: DbJobTime = DbJobTime()


class Ping(Reply):
    hostname: str = ""
    pinged: str = ""
    responding: bool = False
    latency: int = 0
    primary: bool = False


class JobSubmit(BaseModel):
    """The `job` object of POST /slurm/v0.0.42/job/submit (job_desc_msg).

    Unset fields are not sent, so Slurm applies its defaults. Fields this model does not name can
    still be passed (`extra="allow"`), spelled as slurmrestd spells them."""

    model_config = ConfigDict(extra="allow", frozen=True)

    script: str
    name: str | None = None
    partition: str | None = None
    qos: str | None = None
    account: str | None = None
    comment: str | None = None
    nodes: str | None = None
    """Node count or range, e.g. "1" or "2-4"."""
    required_nodes: list[str] | None = None
    excluded_nodes: list[str] | None = None
    tasks: int | None = None
    cpus_per_task: int | None = None
    memory_per_node: int | None = None
    """MiB."""
    tres_per_node: str | None = None
    """e.g. "gres/gpu:2"."""
    time_limit: int | None = None
    """Minutes."""
    priority: int | None = None
    nice: int | None = None
    hold: bool | None = None
    requeue: bool | None = None
    constraints: str | None = None
    current_working_directory: str = "/tmp"
    environment: list[str] = Field(default_factory=lambda: ["PATH=/usr/local/bin:/usr/bin:/bin"])
    """slurmrestd rejects a submission without one (error 2019)."""
    standard_output: str | None = None
    standard_error: str | None = None

    def body(self) -> dict[str, Any]:
        data = self.model_dump(exclude_none=True)
        for key in ("time_limit", "priority", "memory_per_node"):
            if key in data:
                data[key] = no_val(data[key])
        return {"job": data}
