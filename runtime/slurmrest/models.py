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


def base_state(state: tuple[str, ...]) -> str:
    """A node's base state from slurmrestd's state list (the rest are flags)."""
    return next((s for s in state if s in BASE_STATES), "UNKNOWN")


def state_flags(state: tuple[str, ...]) -> frozenset[str]:
    return frozenset(s for s in state if s not in BASE_STATES)


GPU_TRES = "gres/gpu"
"""The GPU entry of a TRES string, whatever the GPUs' type (`gres/gpu:h100` counts them again)."""


def tres_count(tres: str, key: str) -> int:
    """One entry of a TRES string (`cpu=4,mem=4G,gres/gpu=2`), 0 when absent. Counts only (the
    memory entry, with its unit, is read from the node's own fields instead)."""
    for item in tres.split(","):
        name, _, value = item.partition("=")
        if name == key:
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def job_gpus(tres_alloc: str, tres_req: str) -> int:
    """A job's GPUs: allocated once it has an allocation, else requested (what squeue's
    `tres-alloc` prints: the allocated TRES if set, else the requested)."""
    return tres_count(tres_alloc or tres_req, GPU_TRES)


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
    slurmd_start_time: NoVal = None
    """When the node's slurmd started (epoch seconds): a new value at each new slurmd's registration."""
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
        return base_state(self.state)

    @property
    def flags(self) -> frozenset[str]:
        return state_flags(self.state)

    @property
    def drain(self) -> bool:
        """Drained or draining: Slurm starts no new job here."""
        return "DRAIN" in self.state


class Reservation(Reply):
    """One entry of GET /slurm/v0.0.42/reservations/ (measured 2026-11 on 24.11: `node_list` a hostlist,
    `flags` such as ["MAINT", "IGNORE_JOBS", "SPEC_NODES"], times as uint64_no_val)."""

    name: str
    node_list: str = ""
    flags: tuple[str, ...] = ()
    start_time: NoVal = None
    end_time: NoVal = None

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(expand(self.node_list)) if self.node_list else frozenset()

    def active(self, now: float) -> bool:
        """Started and not ended at `now` (Unix seconds); an unset end never ends."""
        started = self.start_time is not None and self.start_time <= now
        return started and (self.end_time is None or now < self.end_time)


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
    tres_req_str: str = ""
    eligible_time: NoVal = None
    """When the job became eligible to run (0 while held or waiting on a dependency)."""
    hold: bool = False
    cpus: NoVal = None
    """CPUs allocated (running) or requested (pending)."""

    @property
    def state(self) -> str:
        """The base job state (PENDING, RUNNING, COMPLETED, CANCELLED, PREEMPTED, ...)."""
        return self.job_state[0] if self.job_state else "UNKNOWN"

    @property
    def node_names(self) -> list[str]:
        """The allocated nodes, expanded from Slurm's hostlist."""
        return expand(self.nodes) if self.nodes else []

    @property
    def gpus(self) -> int:
        """GPUs (gres/gpu TRES) allocated (running) or requested (pending)."""
        return job_gpus(self.tres_alloc_str, self.tres_req_str)


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


class PartitionNodes(Reply):
    configured: str = ""
    total: int = 0


class PartitionCpus(Reply):
    total: int = 0


class PartitionState(Reply):
    state: tuple[str, ...] = ()


class Partition(Reply):
    """One entry of GET /slurm/v0.0.42/partitions."""

    name: str
    nodes: PartitionNodes = PartitionNodes()
    cpus: PartitionCpus = PartitionCpus()
    partition: PartitionState = PartitionState()

    @property
    def up(self) -> bool:
        return "UP" in self.partition.state


class ScheduleExit(Reply):
    end_job_queue: int = 0
    default_queue_depth: int = 0
    max_job_start: int = 0
    max_rpc_cnt: int = 0
    max_sched_time: int = 0
    licenses: int = 0


class BackfillExit(Reply):
    end_job_queue: int = 0
    bf_max_job_start: int = 0
    bf_max_job_test: int = 0
    bf_max_time: int = 0
    bf_node_space_size: int = 0
    state_changed: int = 0


class Diag(Reply):
    """`statistics` of GET /slurm/v0.0.42/diag: what `sdiag` prints. Times are microseconds;
    counters restart when slurmctld does and at each statistics reset (midnight, `sdiag -r`)."""

    req_time: NoVal = None
    req_time_start: NoVal = None
    """When the counters last restarted ("Data since")."""
    server_thread_count: int = 0
    agent_queue_size: int = 0
    agent_count: int = 0
    agent_thread_count: int = 0
    dbd_agent_queue_size: int = 0
    """Messages slurmctld holds for slurmdbd ("DBD Agent queue size"); grows while slurmdbd is away."""
    jobs_submitted: int = 0
    jobs_started: int = 0
    jobs_completed: int = 0
    jobs_canceled: int = 0
    jobs_failed: int = 0
    schedule_cycle_last: int = 0
    schedule_cycle_max: int = 0
    schedule_cycle_mean: int = 0
    schedule_cycle_mean_depth: int = 0
    schedule_cycle_total: int = 0
    schedule_cycle_per_minute: int = 0
    schedule_queue_length: int = 0
    schedule_exit: ScheduleExit = ScheduleExit()
    bf_active: bool = False
    bf_backfilled_jobs: int = 0
    """Since slurmctld started ("Total backfilled jobs (since last slurm start)")."""
    bf_last_backfilled_jobs: int = 0
    bf_cycle_counter: int = 0
    bf_cycle_last: int = 0
    bf_cycle_max: int = 0
    bf_cycle_mean: int = 0
    bf_last_depth: int = 0
    bf_last_depth_try: int = 0
    bf_depth_mean: int = 0
    bf_queue_len: int = 0
    bf_table_size: int = 0
    bf_when_last_cycle: NoVal = None
    bf_exit: BackfillExit = BackfillExit()


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
    required_switches: int | None = None
    """--switches: the most leaf switches (topology/tree) the job may span."""
    wait_for_switch: int | None = None
    """Seconds to wait for them before any nodes will do."""
    current_working_directory: str = "/tmp"
    environment: list[str] = Field(default_factory=lambda: ["PATH=/usr/local/bin:/usr/bin:/bin"])
    """slurmrestd rejects a submission without one (error 2019)."""
    standard_output: str | None = None
    standard_error: str | None = None

    def body(self) -> dict[str, Any]:
        data = self.model_dump(exclude_none=True)
        for key in ("time_limit", "priority", "memory_per_node", "required_switches"):
            if key in data:
                data[key] = no_val(data[key])
        return {"job": data}
