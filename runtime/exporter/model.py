"""What the exporter reads of Slurm in one collection, and how a node's state reads: pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..slurmrest.models import GPU_TRES, Diag, Node, Partition, tres_count

USABLE = frozenset({"idle", "mixed", "allocated", "completing", "planned"})
"""Node states whose free CPUs Slurm can still hand out; every other state's free CPUs are what
sinfo calls "other" (%C: allocated/idle/other/total)."""

BUSY = frozenset({"ALLOCATED", "MIXED"})


class JobView(Protocol):
    """What the exporter reads of a job: slurmrestd's `Job`, or the `JobRow` squeue's text gives
    (runtime/slurmrest/jobtext.py), which holds the same values."""

    @property
    def job_id(self) -> int: ...
    @property
    def state(self) -> str:
        """The base state: PENDING, RUNNING, COMPLETED, ..."""
        ...

    @property
    def partition(self) -> str: ...
    @property
    def account(self) -> str: ...
    @property
    def user_name(self) -> str: ...
    @property
    def cpus(self) -> int | None: ...
    @property
    def gpus(self) -> int:
        """GPUs (gres/gpu TRES): allocated when running, requested when pending."""
        ...

    @property
    def state_reason(self) -> str: ...
    @property
    def submit_time(self) -> int | None: ...
    @property
    def eligible_time(self) -> int | None: ...
    @property
    def hold(self) -> bool: ...


@dataclass(frozen=True)
class Snapshot:
    """One read of slurmctld: the four replies, taken one after another."""

    jobs: tuple[JobView, ...]
    nodes: tuple[Node, ...]
    partitions: tuple[Partition, ...]
    diag: Diag


def node_state(node: Node) -> str:
    """The node's state as `sinfo -o %T` prints it, lowercase and without the trailing flag
    characters (`*` not responding, `~` powered down, ...): drained, draining, down, idle, ..."""
    flags = node.flags
    base = node.base_state
    if "INVALID_REG" in flags:
        return "inval"
    if "DRAIN" in flags:
        return "draining" if base in BUSY or "COMPLETING" in flags else "drained"
    if "FAIL" in flags:
        return "failing" if base in BUSY else "fail"
    if base == "IDLE" and "COMPLETING" in flags:
        return "completing"
    if base == "IDLE" and "PLANNED" in flags:
        return "planned"
    if base == "IDLE" and "MAINTENANCE" in flags:
        return "maint"
    if base == "IDLE" and "RESERVED" in flags:
        return "reserved"
    return base.lower()


def gpus(node: Node) -> tuple[int, int]:
    """(total, allocated) GPUs of a node, from its TRES (`gres/gpu=2`) and TRES in use."""
    return tres_count(node.tres, GPU_TRES), tres_count(node.tres_used, GPU_TRES)
