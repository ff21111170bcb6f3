"""The Slurm metrics exporter at scale: what one read costs and how many series it makes.

Run: .venv/bin/python bench/exporter_bench.py [--jobs 100000] [--nodes 10000] [--real-jobs 1000]

1. Synthetic replies (the fakes, shaped as slurmrestd 24.11's): `--jobs` jobs over 4 partitions,
   20 accounts, 8 states and 12 pending reasons, `--nodes` nodes in 6 states with GPUs. It times
   the pure part (replies -> families) and the exposition (families -> /metrics text), and prints
   the series count and the size of a scrape. The series count must not grow with jobs or nodes:
   asserted against the same shapes at 1/100th the size.
2. Real slurmctld + slurmrestd (the harness): `--real-jobs` held jobs submitted through slurmrestd,
   then exporter reads (jobs, nodes, partitions, diag), timed over 5 reads: what slurmctld and
   slurmrestd spend building the replies plus the client's parse.
Nothing about time is asserted; one GOAL line per goal."""

from __future__ import annotations

import argparse
import os
import statistics
import time

from prometheus_client import CollectorRegistry, generate_latest
from sunk.runtime.exporter.collect import families
from sunk.runtime.exporter.fakes import FakeSlurm, job, node, partition
from sunk.runtime.exporter.loop import Exporter
from sunk.runtime.exporter.model import Snapshot
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.slurmrest import JobSubmit, JwtMinter, SlurmRestClient
from sunk.runtime.testing.goals import goal

from sunk.stackfile import load_stack

NOW = 2_000_000_000
PARTITIONS = ("batch", "gpu", "debug", "long")
STATES = ("PENDING", "RUNNING", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "SUSPENDED", "PREEMPTED")
REASONS = (
    "Resources", "Priority", "Dependency", "JobHeldUser", "JobHeldAdmin", "ReqNodeNotAvail", "QOSMaxJobsPerUserLimit",
    "AssocGrpCpuLimit", "BeginTime", "PartitionTimeLimit", "Reservation", "BadConstraints",
)  # fmt: skip
NODE_STATES = (("IDLE",), ("MIXED",), ("ALLOCATED",), ("IDLE", "DRAIN"), ("MIXED", "DRAIN"), ("DOWN",))


def fake(jobs: int, nodes: int) -> FakeSlurm:
    return FakeSlurm(
        jobs=[
            job(
                i,
                STATES[i % len(STATES)],
                partition=PARTITIONS[i % len(PARTITIONS)],
                account=f"acct-{i % 20}",
                user=f"user-{i % 500}",
                reason=REASONS[i % len(REASONS)],
                cpus=1 + i % 64,
                submit_time=NOW - (i * 37) % 700_000,
            )
            for i in range(jobs)
        ],
        nodes=[
            node(
                f"n{i}",
                NODE_STATES[i % len(NODE_STATES)],
                partitions=(PARTITIONS[i % 2], PARTITIONS[2 + i % 2]),
                cpus=128,
                alloc_cpus=(i * 7) % 128,
                memory=1_000_000,
                alloc_memory=(i * 13) % 1_000_000,
                gpus=8,
                alloc_gpus=i % 9,
            )
            for i in range(nodes)
        ],
        partitions=[partition(p) for p in PARTITIONS],
        diag={"jobs_submitted": jobs, "schedule_cycle_total": 100},
    )


def series(slurm: FakeSlurm) -> int:
    snap = Snapshot(tuple(slurm.jobs), tuple(slurm.nodes), tuple(slurm.partitions), slurm.diag())
    return sum(len(f.samples) for f in families(snap, NOW))


def synthetic(jobs: int, nodes: int) -> None:
    slurm = fake(jobs, nodes)
    snap = Snapshot(tuple(slurm.jobs), tuple(slurm.nodes), tuple(slurm.partitions), slurm.diag())
    started = time.process_time()
    fams = families(snap, NOW)
    collect_cpu = time.process_time() - started
    registry = CollectorRegistry()
    exporter = Exporter(slurm, registry=registry, clock=lambda: float(NOW))
    exporter.cycle()
    started = time.process_time()
    text = generate_latest(registry)
    expose_cpu = time.process_time() - started
    count = sum(len(f.samples) for f in fams)
    small = series(fake(jobs // 100, nodes // 100))
    print(f"synthetic: {jobs:,} jobs, {nodes:,} nodes")
    print(f"  collect (replies -> families): {collect_cpu:.3f} s CPU")
    print(f"  exposition (/metrics text):    {expose_cpu:.3f} s CPU, {len(text):,} bytes")
    print(f"  series (a histogram per label set counts once): {count:,} (at 1/100th the size: {small:,})")
    assert count == small, "the series count grew with jobs or nodes"
    goal(f"exporter collect, {jobs:,} jobs + {nodes:,} nodes (CPU)", collect_cpu, 5.0, "s")
    goal(f"exporter series for {jobs:,} jobs + {nodes:,} nodes", count, 2000, digits=0)


def real(jobs: int) -> None:
    nodes = [SimNode("cpu-0", "cpu"), SimNode("cpu-1", "cpu")]
    with LocalSlurm.start(load_stack("acme-dev").spec, nodes=nodes) as slurm:
        rest = SlurmRestClient(
            slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm"), timeout=120
        )
        started = time.monotonic()
        for i in range(jobs):
            rest.submit_job(JobSubmit(script="#!/bin/sh\ntrue\n", name=f"bench-{i}", partition="batch", hold=True))
        submit = time.monotonic() - started
        exporter = Exporter(rest)
        walls: list[float] = []
        for _ in range(5):
            started = time.monotonic()
            report = exporter.cycle()
            walls.append(time.monotonic() - started)
            assert report.ok and report.slurm_requests == 4
        text = generate_latest(exporter.registry).decode()
        held = [
            line
            for line in text.splitlines()
            if line.startswith('sunk_slurm_jobs_pending{partition="batch",reason="JobHeldUser"}')
        ]
        assert held and float(held[0].split()[-1]) == jobs, held
        print(f"real slurmctld: {jobs:,} held jobs submitted through slurmrestd in {submit:.1f} s")
        print(f"  one read (4 requests): median {statistics.median(walls):.3f} s, max {max(walls):.3f} s")
        goal(f"exporter read of {jobs:,} jobs from real slurmrestd (median)", statistics.median(walls), 1.0, "s")
        rest.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--real-jobs", type=int, default=1000)
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.1f}")
    synthetic(args.jobs, args.nodes)
    if args.real_jobs:
        real(args.real_jobs)


if __name__ == "__main__":
    main()
