"""The exporter's pure part: slurmrestd replies (as the fakes shape them) to metric families."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sunk.runtime.exporter.collect import WAIT_BUCKETS, AnyFamily, Family, HistogramFamily, families, metric_names
from sunk.runtime.exporter.loop import Exporter
from sunk.runtime.exporter.model import Snapshot, node_state
from sunk.runtime.slurmrest.models import Diag

from tests.support.fakes.exporter import FakeSlurm, job, node, partition

NOW = 100_000


def snapshot(**kw: object) -> Snapshot:
    fake = FakeSlurm(**kw)  # type: ignore[arg-type]
    return Snapshot(tuple(fake.list_jobs()), tuple(fake.list_nodes()), tuple(fake.list_partitions()), fake.diag())


def by_name(fams: list[AnyFamily]) -> dict[str, AnyFamily]:
    return {f.name: f for f in fams}


def values(f: AnyFamily) -> dict[tuple[str, ...], float]:
    assert isinstance(f, Family)
    return dict(f.samples)


WORKLOAD = dict(
    jobs=[
        job(1, "RUNNING", cpus=4, gpus=2, account="research", user="alice"),
        job(2, "PENDING", reason="Resources", cpus=8, submit_time=NOW - 30, account="research", user="bob"),
        job(3, "PENDING", reason="Dependency", submit_time=NOW - 4000, eligible_time=0, account="ops", user="bob"),
        job(4, "PENDING", partition="gpu", gpus=1, reason="JobHeldUser", hold=True, submit_time=NOW - 10, user="carol"),
        job(5, "COMPLETED", account="ops", user="alice"),
        job(6, "PENDING", reason="Priority", submit_time=NOW - 7200, eligible_time=NOW - 7000, user="dave"),
    ],
    nodes=[
        node("cpu-0", ("ALLOCATED",), cpus=4, alloc_cpus=4, alloc_memory=4096),
        node("cpu-1", ("IDLE", "DRAIN"), cpus=4),
        node("gpu-0", ("MIXED", "DRAIN"), partitions=("batch", "gpu"), cpus=16, alloc_cpus=2, gpus=2, alloc_gpus=1),
        node("gpu-1", ("IDLE",), partitions=("batch", "gpu"), cpus=16, gpus=2),
        node("fut-0", ("FUTURE",)),
    ],
    partitions=[partition("batch"), partition("gpu"), partition("empty", up=False)],
    diag={
        "jobs_submitted": 7,
        "schedule_cycle_total": 12,
        "schedule_cycle_mean": 2500,
        "bf_backfilled_jobs": 3,
        "dbd_agent_queue_size": 42,
        "bf_cycle_last": 1_500_000,
    },
)


def test_jobs_by_state_partition_account_and_pending_reasons() -> None:
    got = by_name(families(snapshot(**WORKLOAD), NOW))
    assert values(got["sunk_slurm_jobs"]) == {
        ("completed", "batch", "ops"): 1,
        ("pending", "batch", "ops"): 1,
        ("pending", "batch", "research"): 2,  # jobs 2 and 6
        ("pending", "gpu", "research"): 1,
        ("running", "batch", "research"): 1,
    }
    assert values(got["sunk_slurm_job_cpus"])[("pending", "batch", "research")] == 9
    # GPUs from the jobs' TRES: allocated (running), requested (pending); 0 where a job asks none.
    assert values(got["sunk_slurm_job_gpus"]) == {
        ("completed", "batch", "ops"): 0,
        ("pending", "batch", "ops"): 0,
        ("pending", "batch", "research"): 0,
        ("pending", "gpu", "research"): 1,
        ("running", "batch", "research"): 2,
    }
    assert values(got["sunk_slurm_jobs_pending"]) == {
        ("batch", "Dependency"): 1,
        ("batch", "Priority"): 1,
        ("batch", "Resources"): 1,
        ("gpu", "JobHeldUser"): 1,
    }
    # Held jobs and jobs waiting on a dependency are not "eligible": only 2 and 6 count, 6 is older.
    assert values(got["sunk_slurm_pending_oldest_eligible_seconds"]) == {("batch",): 7000}
    assert "sunk_slurm_user_jobs" not in got  # per-user series only when asked


def test_the_wait_distribution_counts_every_pending_job_once() -> None:
    hist = by_name(families(snapshot(**WORKLOAD), NOW))["sunk_slurm_pending_wait_seconds"]
    assert isinstance(hist, HistogramFamily) and hist.bounds == WAIT_BUCKETS
    samples = {labels: (counts, total) for labels, counts, total in hist.samples}
    counts, total = samples[("batch",)]
    assert counts[-1] == 3 and total == 30 + 4000 + 7200
    assert counts[WAIT_BUCKETS.index(60)] == 1 and counts[WAIT_BUCKETS.index(3600)] == 1
    assert counts[WAIT_BUCKETS.index(3 * 3600)] == 3
    assert list(counts) == sorted(counts)  # cumulative


def test_nodes_and_resources_split_as_sinfo_does() -> None:
    got = by_name(families(snapshot(**WORKLOAD), NOW))
    # FUTURE nodes are not read (list_nodes without ?flags=FUTURE), as sinfo does not show them.
    assert values(got["sunk_slurm_nodes"]) == {("allocated",): 1, ("drained",): 1, ("draining",): 1, ("idle",): 1}
    assert values(got["sunk_slurm_partition_nodes"])[("gpu", "draining")] == 1
    # Free CPUs of drained nodes are "other", as in sinfo's A/I/O/T.
    assert values(got["sunk_slurm_cpus"]) == {("allocated",): 6, ("idle",): 16, ("other",): 4 + 14}
    assert values(got["sunk_slurm_cpus_total"]) == {(): 40}
    assert values(got["sunk_slurm_partition_cpus"])[("gpu", "other")] == 14
    assert values(got["sunk_slurm_gpus"]) == {("allocated",): 1, ("idle",): 2, ("other",): 1}
    assert values(got["sunk_slurm_memory_bytes"])[("allocated",)] == 4096 * 1024 * 1024
    # A partition without nodes still reads 0 in each state, and its state is exported.
    assert values(got["sunk_slurm_partition_cpus"])[("empty", "idle")] == 0
    assert values(got["sunk_slurm_partition_up"]) == {("batch",): 1, ("empty",): 0, ("gpu",): 1}


def test_scheduler_statistics_in_seconds_and_counters() -> None:
    got = by_name(families(snapshot(**WORKLOAD), NOW))
    assert got["sunk_slurm_jobs_submitted"].kind == "counter"
    assert values(got["sunk_slurm_jobs_submitted"]) == {(): 7}
    assert values(got["sunk_slurm_scheduler_cycles"]) == {(): 12}
    assert values(got["sunk_slurm_scheduler_cycle_mean_seconds"]) == {(): 0.0025}
    assert values(got["sunk_slurm_backfill_cycle_last_seconds"]) == {(): 1.5}
    assert values(got["sunk_slurm_backfilled_jobs"]) == {(): 3}
    assert values(got["sunk_slurm_dbd_agent_queue_size"]) == {(): 42}


def test_per_user_series_are_opt_in() -> None:
    got = by_name(families(snapshot(**WORKLOAD), NOW, per_user=True))
    assert values(got["sunk_slurm_user_jobs"])[("bob", "pending")] == 2
    assert values(got["sunk_slurm_user_cpus"])[("alice", "running")] == 4


def test_cardinality_does_not_grow_with_jobs_or_nodes() -> None:
    """1,000 jobs and 100 nodes give as many series as 6 jobs and 4 nodes of the same shapes."""

    def count(jobs: int, nodes: int) -> int:
        snap = snapshot(
            jobs=[
                job(i, "PENDING" if i % 2 else "RUNNING", reason="Priority", submit_time=NOW - i) for i in range(jobs)
            ],
            nodes=[node(f"n{i}", ("IDLE",) if i % 2 else ("MIXED",), alloc_cpus=i % 2) for i in range(nodes)],
            partitions=[partition("batch")],
        )
        return sum(len(f.samples) for f in families(snap, NOW))

    assert count(1000, 100) == count(6, 4)


def test_node_state_names_match_sinfo() -> None:
    """idle, allocated, mixed, drained and draining are compared with sinfo on real Slurm
    (test_real_slurm.py); the rest follow the same rule."""
    cases = {
        ("IDLE",): "idle",
        ("MIXED",): "mixed",
        ("ALLOCATED",): "allocated",
        ("IDLE", "DRAIN"): "drained",
        ("MIXED", "DRAIN"): "draining",
        ("IDLE", "COMPLETING", "DRAIN"): "draining",
        ("DOWN",): "down",
        ("IDLE", "COMPLETING"): "completing",
        ("IDLE", "NOT_RESPONDING"): "idle",
        ("IDLE", "PLANNED"): "planned",
        ("ALLOCATED", "FAIL"): "failing",
    }
    for state, name in cases.items():
        assert node_state(node("n", state)) == name, state


def test_the_exposition_parses_and_carries_every_name_collect_announces() -> None:
    fake = FakeSlurm(**WORKLOAD)  # type: ignore[arg-type]
    registry = CollectorRegistry()
    exporter = Exporter(fake, registry=registry, clock=lambda: float(NOW), per_user=True)
    report = exporter.cycle()
    assert report.ok and report.slurm_requests == 4
    text = generate_latest(registry).decode()
    served = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert metric_names(report.families) <= served
    assert 'sunk_slurm_pending_wait_seconds_bucket{le="+Inf",partition="batch"} 3.0' in text


def test_an_unreachable_slurmctld_is_up_0_with_no_stale_numbers() -> None:
    fake = FakeSlurm(**WORKLOAD)  # type: ignore[arg-type]
    registry = CollectorRegistry()
    exporter = Exporter(fake, registry=registry)
    assert exporter.cycle().ok
    fake.unreachable = {"partitions"}
    report = exporter.cycle()
    assert not report.ok and "slurmctld unreachable" in report.error
    text = generate_latest(registry).decode()
    assert "sunk_slurm_up 0.0" in text and "sunk_slurm_jobs{" not in text
    assert 'sunk_exporter_errors_total{endpoint="partitions"} 1.0' in text
    fake.unreachable = set()
    assert exporter.cycle().ok and "sunk_slurm_up 1.0" in generate_latest(registry).decode()


def test_diag_reads_the_real_reply_shape() -> None:
    diag = Diag.model_validate(
        {
            "req_time_start": {"set": True, "infinite": False, "number": 1795465780},
            "bf_active": False,
            "schedule_exit": {"end_job_queue": 2},
        }
    )
    assert diag.req_time_start == 1795465780 and diag.schedule_exit.end_job_queue == 2
