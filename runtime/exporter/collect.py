"""Slurm's replies as metric families: pure (no I/O, no clock: `now` is passed in).

Cardinality is bounded by the cluster's shape, never by its load: labels are partitions,
accounts, job and node states and Slurm's pending reasons; no series per job or node, and per
user only when asked (`per_user`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from ..slurmrest.models import Diag, Node
from .model import USABLE, JobView, Snapshot, gpus, node_state

Kind = Literal["gauge", "counter", "histogram"]
Labels = tuple[str, ...]

PREFIX = "sunk_slurm_"
MIB = 1024 * 1024
MICROSECONDS = 1e-6
WAIT_BUCKETS: tuple[float, ...] = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)
"""Seconds a pending job has waited: a minute to a week (longer waits land in +Inf)."""
NO_PARTITION = "(none)"
CPU_STATES = ("allocated", "idle", "other")
"""sinfo's %C split: allocated, idle (free on a usable node), other (free on a drained, down or
failed node)."""


@dataclass(frozen=True)
class Family:
    """One metric family: name (counters without `_total`, which the exposition adds), help,
    label names and one value per label tuple."""

    name: str
    kind: Kind
    help: str
    labels: Labels
    samples: tuple[tuple[Labels, float], ...]


@dataclass(frozen=True)
class HistogramFamily:
    """A distribution as it is now (a gauge histogram): per label tuple, cumulative counts for
    each of `bounds` and +Inf, and the sum."""

    name: str
    help: str
    labels: Labels
    bounds: tuple[float, ...]
    samples: tuple[tuple[Labels, tuple[int, ...], float], ...]

    kind: Kind = "histogram"


AnyFamily = Family | HistogramFamily


def _family(name: str, kind: Kind, help: str, labels: Labels, values: Mapping[Labels, float]) -> Family:
    return Family(PREFIX + name, kind, help, labels, tuple(sorted(values.items())))


def _scalar(name: str, kind: Kind, help: str, value: float) -> Family:
    return Family(PREFIX + name, kind, help, (), (((), float(value)),))


def _state(job: JobView) -> str:
    return job.state.lower()


def _partition(job: JobView) -> str:
    return job.partition or NO_PARTITION


# --- jobs ---------------------------------------------------------------------------------------


def job_families(jobs: Iterable[JobView], now: int, *, per_user: bool) -> list[AnyFamily]:
    by_state: Counter[Labels] = Counter()
    cpus: Counter[Labels] = Counter()
    gpus_of: Counter[Labels] = Counter()
    reasons: Counter[Labels] = Counter()
    users: Counter[Labels] = Counter()
    user_cpus: Counter[Labels] = Counter()
    waits: dict[str, list[int]] = defaultdict(list)
    oldest: dict[str, int] = {}
    for job in jobs:
        key = (_state(job), _partition(job), job.account)
        by_state[key] += 1
        cpus[key] += job.cpus or 0
        gpus_of[key] += job.gpus
        if per_user:
            users[(job.user_name, _state(job))] += 1
            user_cpus[(job.user_name, _state(job))] += job.cpus or 0
        if job.state != "PENDING":
            continue
        reasons[(_partition(job), job.state_reason or "None")] += 1
        if job.submit_time:
            waits[_partition(job)].append(max(0, now - job.submit_time))
        if job.eligible_time and not job.hold:
            age = max(0, now - job.eligible_time)
            oldest[_partition(job)] = max(age, oldest.get(_partition(job), 0))
    out: list[AnyFamily] = [
        _family(
            "jobs",
            "gauge",
            "Jobs slurmctld holds (squeue -t all), by state, partition and account",
            ("state", "partition", "account"),
            by_state,
        ),
        _family(
            "job_cpus",
            "gauge",
            "CPUs of those jobs (allocated when running, requested when pending)",
            ("state", "partition", "account"),
            cpus,
        ),
        _family(
            "job_gpus",
            "gauge",
            "GPUs (gres/gpu TRES) of those jobs (allocated when running, requested when pending)",
            ("state", "partition", "account"),
            gpus_of,
        ),
        _family(
            "jobs_pending",
            "gauge",
            "Pending jobs by partition and Slurm's reason (squeue %r: Resources, Priority, Dependency, JobHeldUser...)",
            ("partition", "reason"),
            reasons,
        ),
        _family(
            "pending_oldest_eligible_seconds",
            "gauge",
            "How long the oldest eligible pending job (not held, dependencies met) has been eligible, by partition",
            ("partition",),
            {(p,): float(a) for p, a in oldest.items()},
        ),
        _wait_histogram(waits),
    ]
    if per_user:
        out += [
            _family("user_jobs", "gauge", "Jobs by Slurm user and state (opt-in)", ("user", "state"), users),
            _family(
                "user_cpus", "gauge", "CPUs of jobs by Slurm user and state (opt-in)", ("user", "state"), user_cpus
            ),
        ]
    return out


def _wait_histogram(waits: Mapping[str, list[int]]) -> HistogramFamily:
    samples = []
    for partition in sorted(waits):
        ages = waits[partition]
        counts = (*(sum(1 for a in ages if a <= bound) for bound in WAIT_BUCKETS), len(ages))
        samples.append(((partition,), counts, float(sum(ages))))
    return HistogramFamily(
        PREFIX + "pending_wait_seconds",
        "How long the pending jobs have waited since submission, by partition (the queue as it is now)",
        ("partition",),
        WAIT_BUCKETS,
        tuple(samples),
    )


# --- nodes --------------------------------------------------------------------------------------


def _split(node: Node, state: str) -> dict[str, dict[str, int]]:
    """A node's CPUs, GPUs and memory (bytes) as allocated / idle / other (see CPU_STATES)."""
    usable = state in USABLE
    gpu_total, gpu_alloc = gpus(node)
    out = {}
    for resource, total, alloc in (
        ("cpus", node.cpus, node.alloc_cpus),
        ("gpus", gpu_total, gpu_alloc),
        ("memory_bytes", node.real_memory * MIB, node.alloc_memory * MIB),
    ):
        free = max(0, total - alloc)
        out[resource] = {"allocated": alloc, "idle": free if usable else 0, "other": 0 if usable else free}
    return out


_RESOURCE_HELP = {
    "cpus": "CPUs",
    "gpus": "GPUs (gres/gpu)",
    "memory_bytes": "Memory (RealMemory; allocated: what jobs asked for)",
}


def node_families(nodes: Iterable[Node], partition_names: Iterable[str]) -> list[AnyFamily]:
    states: Counter[Labels] = Counter()
    part_states: Counter[Labels] = Counter()
    resources: dict[str, Counter[Labels]] = {r: Counter() for r in _RESOURCE_HELP}
    part_resources: dict[str, Counter[Labels]] = {r: Counter() for r in _RESOURCE_HELP}
    partitions = set(partition_names)
    for node in nodes:
        state = node_state(node)
        states[(state,)] += 1
        split = _split(node, state)
        for resource, amounts in split.items():
            for kind in CPU_STATES:
                resources[resource][(kind,)] += amounts[kind]
        for partition in node.partitions:
            partitions.add(partition)
            part_states[(partition, state)] += 1
            for resource, amounts in split.items():
                for kind in CPU_STATES:
                    part_resources[resource][(partition, kind)] += amounts[kind]
    out: list[AnyFamily] = [
        _family("nodes", "gauge", "Slurm nodes by state (sinfo %T)", ("state",), states),
        _family(
            "partition_nodes",
            "gauge",
            "Slurm nodes by partition and state (sinfo -N: a node in two partitions counts in both)",
            ("partition", "state"),
            part_states,
        ),
    ]
    for resource, what in _RESOURCE_HELP.items():
        values = resources[resource]
        out.append(
            _family(
                resource,
                "gauge",
                f"{what} of the cluster: allocated, idle (free on usable nodes), other (free on drained or down nodes)",
                ("state",),
                {k: float(v) for k, v in values.items()},
            )
        )
        out.append(_scalar(f"{resource}_total", "gauge", f"{what} of the cluster", sum(values.values())))
        per = part_resources[resource]
        # Every partition gets all three states, so a partition with no node reads 0, not "no data".
        filled: dict[Labels, float] = {(p, k): float(per.get((p, k), 0)) for p in partitions for k in CPU_STATES}
        out.append(
            _family(
                f"partition_{resource}",
                "gauge",
                f"{what} by partition and state (sinfo %C per partition)",
                ("partition", "state"),
                filled,
            )
        )
    return out


# --- scheduler ----------------------------------------------------------------------------------


def diag_families(diag: Diag) -> list[AnyFamily]:
    us = MICROSECONDS
    counters = [
        (
            "jobs_submitted",
            diag.jobs_submitted,
            "Jobs submitted (sdiag; restarts with slurmctld and each statistics reset)",
        ),
        ("jobs_started", diag.jobs_started, "Jobs started (sdiag)"),
        ("jobs_completed", diag.jobs_completed, "Jobs completed (sdiag)"),
        ("jobs_canceled", diag.jobs_canceled, "Jobs cancelled (sdiag)"),
        ("jobs_failed", diag.jobs_failed, "Jobs failed (sdiag)"),
        ("scheduler_cycles", diag.schedule_cycle_total, "Main scheduler cycles (sdiag: Total cycles)"),
        ("backfill_cycles", diag.bf_cycle_counter, "Backfill scheduler cycles (sdiag: Backfilling Total cycles)"),
        (
            "backfilled_jobs",
            diag.bf_backfilled_jobs,
            "Jobs started by backfill since slurmctld started (sdiag: Total backfilled jobs (since last slurm start))",
        ),
    ]
    gauges = [
        (
            "scheduler_cycle_last_seconds",
            diag.schedule_cycle_last * us,
            "Last main scheduler cycle (sdiag: Last cycle)",
        ),
        (
            "scheduler_cycle_max_seconds",
            diag.schedule_cycle_max * us,
            "Longest main scheduler cycle (sdiag: Max cycle)",
        ),
        (
            "scheduler_cycle_mean_seconds",
            diag.schedule_cycle_mean * us,
            "Mean main scheduler cycle (sdiag: Mean cycle)",
        ),
        (
            "scheduler_mean_depth",
            diag.schedule_cycle_mean_depth,
            "Jobs looked at per main cycle (sdiag: Mean depth cycle)",
        ),
        ("scheduler_queue_length", diag.schedule_queue_length, "Main scheduler queue (sdiag: Last queue length)"),
        ("scheduler_threads", diag.server_thread_count, "slurmctld server threads (sdiag: Server thread count)"),
        ("agent_queue_size", diag.agent_queue_size, "Outgoing RPCs slurmctld has queued (sdiag: Agent queue size)"),
        (
            "dbd_agent_queue_size",
            diag.dbd_agent_queue_size,
            "Messages slurmctld holds for slurmdbd (sdiag: DBD Agent queue size); grows while slurmdbd is away",
        ),
        ("backfill_cycle_last_seconds", diag.bf_cycle_last * us, "Last backfill cycle (sdiag: Last cycle)"),
        ("backfill_cycle_max_seconds", diag.bf_cycle_max * us, "Longest backfill cycle (sdiag: Max cycle)"),
        ("backfill_cycle_mean_seconds", diag.bf_cycle_mean * us, "Mean backfill cycle (sdiag: Mean cycle)"),
        (
            "backfill_last_depth",
            diag.bf_last_depth,
            "Jobs backfill looked at in its last cycle (sdiag: Last depth cycle)",
        ),
        ("backfill_depth_mean", diag.bf_depth_mean, "Jobs backfill looks at per cycle (sdiag: Depth Mean)"),
        ("backfill_queue_length", diag.bf_queue_len, "Backfill queue (sdiag: Last queue length)"),
        (
            "backfill_last_backfilled_jobs",
            diag.bf_last_backfilled_jobs,
            "Jobs backfilled since the last statistics reset",
        ),
        ("backfill_active", 1.0 if diag.bf_active else 0.0, "1 while a backfill cycle runs"),
        (
            "stats_reset_timestamp_seconds",
            float(diag.req_time_start or 0),
            "When sdiag's counters last restarted (Data since)",
        ),
    ]
    out: list[AnyFamily] = [_scalar(n, "counter", h, v) for n, v, h in counters]
    out += [_scalar(n, "gauge", h, v) for n, v, h in gauges]
    return out


def families(snapshot: Snapshot, now: int, *, per_user: bool = False) -> list[AnyFamily]:
    """Every Slurm metric of one snapshot, in a stable order."""
    partitions = [p.name for p in snapshot.partitions]
    out: list[AnyFamily] = [
        _family(
            "partition_up",
            "gauge",
            "1 when the partition's state is UP (it takes and starts jobs)",
            ("partition",),
            {(p.name,): 1.0 if p.up else 0.0 for p in snapshot.partitions},
        ),
        *job_families(snapshot.jobs, now, per_user=per_user),
        *node_families(snapshot.nodes, partitions),
        *diag_families(snapshot.diag),
    ]
    return sorted(out, key=lambda f: f.name)


def metric_names(fams: Iterable[AnyFamily]) -> set[str]:
    """The series names the exposition will carry (counters with `_total`, histograms with
    `_bucket`, `_gcount` and `_gsum`), for checking dashboards and rules against."""
    names: set[str] = set()
    for f in fams:
        if isinstance(f, HistogramFamily):
            names |= {f"{f.name}_bucket", f"{f.name}_gcount", f"{f.name}_gsum"}
        elif f.kind == "counter":
            names.add(f"{f.name}_total")
        else:
            names.add(f.name)
    return names
