"""TextJobReads: the collection's read of every job through squeue, nodes, partitions and diag
(and the jobs, whenever squeue fails) through slurmrestd."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry
from sunk.runtime.exporter.collect import job_families
from sunk.runtime.exporter.loop import Exporter
from sunk.runtime.exporter.slurm import TextJobReads
from sunk.runtime.slurmrest.jobtext import JobRow, JobTextError, SqueueError, job_row

from tests.support.fakes.exporter import FakeSlurm, job, node, partition

JOBS = [
    job(1, "RUNNING", cpus=4),
    job(2, "PENDING", reason="Resources", account="bio"),
    job(3, "PENDING", reason="JobHeldUser", eligible_time=0, hold=True, partition="gpu"),
    job(4, "COMPLETED", user="bob"),
]


class Reader:
    def __init__(self) -> None:
        self.reads = 0
        self.fail: Exception | None = None
        self.rows = [job_row(j) for j in JOBS]

    def jobs(self) -> list[JobRow]:
        self.reads += 1
        if self.fail is not None:
            raise self.fail
        return self.rows


def reads(registry: CollectorRegistry, via: str) -> float:
    return registry.get_sample_value("sunk_exporter_job_reads_total", {"via": via}) or 0.0


def test_rows_and_slurmrestds_jobs_give_the_same_families() -> None:
    for per_user in (False, True):
        assert job_families([job_row(j) for j in JOBS], 2_000, per_user=per_user) == job_families(
            JOBS, 2_000, per_user=per_user
        )


def test_jobs_go_to_squeue_the_rest_to_slurmrestd_and_failures_fall_back(caplog: pytest.LogCaptureFixture) -> None:
    rest = FakeSlurm(jobs=[job(9, "PENDING")], nodes=[node("cpu-0")], partitions=[partition("batch")])
    reader = Reader()
    registry = CollectorRegistry()
    slurm = TextJobReads(rest, reader, registry=registry)

    assert slurm.list_jobs() == reader.rows
    assert (rest.requests, reader.reads, slurm.requests) == (0, 1, 1)
    assert [n.name for n in slurm.list_nodes()] == ["cpu-0"] and slurm.list_partitions()[0].name == "batch"
    assert slurm.diag().jobs_submitted == 0 and rest.requests == 3

    caplog.set_level(logging.INFO, logger="sunk.runtime.exporter.slurm")
    for failure in (SqueueError("squeue -r: exit 1: unreachable"), JobTextError("a record has 10 columns")):
        reader.fail = failure
        assert [j.job_id for j in slurm.list_jobs()] == [9]  # slurmrestd's view
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unreachable" in warnings[0].getMessage()  # once, not every collection
    assert slurm.failing == "a record has 10 columns"

    reader.fail = None
    assert slurm.list_jobs() == reader.rows
    assert slurm.failing == "" and "squeue reads Slurm jobs again" in caplog.text
    assert (reads(registry, "squeue"), reads(registry, "slurmrestd")) == (2, 2)


def test_the_exporter_counts_a_collection_as_before_when_both_fail() -> None:
    rest = FakeSlurm(jobs=JOBS)
    rest.unreachable = {"jobs"}
    reader = Reader()
    reader.fail = SqueueError("squeue -r: exit 1: Unable to contact slurm controller")
    registry = CollectorRegistry()
    exporter = Exporter(TextJobReads(rest, reader, registry=registry), registry=registry)
    report = exporter.cycle()
    assert not report.ok and "slurmctld unreachable" in report.error
    assert registry.get_sample_value("sunk_exporter_errors_total", {"endpoint": "jobs"}) == 1
    assert registry.get_sample_value("sunk_slurm_up") == 0

    rest.unreachable = set()
    reader.fail = None
    report = exporter.cycle()
    assert report.ok and report.slurm_requests == 4  # squeue once, then nodes, partitions, diag
    assert registry.get_sample_value("sunk_slurm_jobs", {"state": "pending", "partition": "gpu", "account": "research"})
