"""The Slurm metrics exporter at scale: what one read costs and how many series it makes.

Run: .venv/bin/python -m bench.exporter_bench [--jobs 100000] [--nodes 10000] [--real-jobs 1000]
     [--read squeue|slurmrestd] [--releases 26.05,24.11]

1. Synthetic replies (the fakes, shaped as slurmrestd 24.11's): `--jobs` jobs over 4 partitions,
   20 accounts, 8 states and 12 pending reasons, `--nodes` nodes in 6 states with GPUs. It times
   the pure part (replies -> families), the parse of the same jobs as squeue prints them, and the
   exposition (families -> /metrics text), and prints the series count and the size of a scrape. The series count must not grow with jobs or nodes:
   asserted against the same shapes at 1/100th the size.
2. Real slurmctld + slurmrestd (the harness): `--real-jobs` held jobs submitted through slurmrestd,
   then exporter reads (jobs, nodes, partitions, diag), timed over 5 reads, built as the process
   builds it: every job through `squeue` with a JWT (SqueueJobs, squeue from the harness's Slurm
   client root as the runtime image runs it), the rest through slurmrestd (`--read slurmrestd`:
   the jobs through slurmrestd too, as before). It prints the jobs read's own wall time, the worst
   case of the squeue read (every job re-read as JSON, as if each showed a description), then
   one read of every job through slurmrestd for comparison (wall, bytes, slurmrestd+slurmctld CPU).
   Once per release of `--releases` (default: both supported ones, one after the other). On 26.05
   the cluster also has slurmctld's own metrics endpoints (controller.metrics), and the same held
   jobs are read both ways: slurmctld's CPU per read, the RPCs sdiag counts, the samples served.
Nothing about time is asserted; one GOAL line per goal."""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from sunk.runtime.exporter.collect import families
from sunk.runtime.exporter.loop import Exporter
from sunk.runtime.exporter.model import JobView, Snapshot
from sunk.runtime.exporter.slurm import SlurmApi, TextJobReads
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.slurmrest import JobSubmit, JwtMinter, SlurmRestClient
from sunk.runtime.slurmrest.jobtext import SqueueJobs, job_row, parse_squeue, parse_squeue_json

from sunk.images import SUPPORTED_SLURM, release_of
from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import load_stack
from tests.support.fakes.exporter import FakeSlurm, job, node, partition
from tests.support.goals import goal

NOW = 2_000_000_000
NATIVE_ENDPOINTS = ("jobs", "nodes", "partitions", "scheduler", "jobs-users-accts")
"""slurmctld's own metrics endpoints (MetricsType=metrics/openmetrics, Slurm 25.11 and later)."""
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
    # The same jobs as squeue prints them (jobtext.FORMAT): the exporter's own share of a read.
    printed = "".join(
        "\x1f".join(
            (
                *(str(j.job_id), j.state, "1", str(j.submit_time), str(j.eligible_time), str(j.cpus), "1000"),
                *(j.user_name, j.account, j.partition, j.state_reason),
            )
        )
        + "\x1e\n"
        for j in slurm.jobs
    )
    started = time.process_time()
    rows, unsettled = parse_squeue(printed)
    parse_cpu = time.process_time() - started
    assert rows == [job_row(j) for j in slurm.jobs] and not unsettled
    print(f"synthetic: {jobs:,} jobs, {nodes:,} nodes")
    print(f"  squeue's text -> rows:         {parse_cpu:.3f} s CPU, {len(printed) / 1e6:.1f} MB of text")
    print(f"  collect (replies -> families): {collect_cpu:.3f} s CPU")
    print(f"  exposition (/metrics text):    {expose_cpu:.3f} s CPU, {len(text):,} bytes")
    print(f"  series (a histogram per label set counts once): {count:,} (at 1/100th the size: {small:,})")
    assert count == small, "the series count grew with jobs or nodes"
    goal(f"exporter collect, {jobs:,} jobs + {nodes:,} nodes (CPU)", collect_cpu, 5.0, "s")
    goal(f"exporter series for {jobs:,} jobs + {nodes:,} nodes", count, 2000, digits=0)


def children_cpu() -> float:
    """CPU of the child processes this process has waited for (squeue), seconds."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def slurm_cpu(slurm: LocalSlurm) -> float:
    """slurmrestd's and slurmctld's CPU so far, seconds (/proc/<pid>/stat utime+stime)."""
    total = 0.0
    for name in ("slurmrestd", "slurmctld"):
        process = slurm.jail.processes.get(name)
        if process is not None:
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _spec(release: str) -> ClusterSpec:
    """acme-dev on `release`; on a release with slurmctld's own metrics endpoints, with them on."""
    data = load_stack("acme-dev").spec.model_dump(by_alias=True, exclude_unset=True)
    data["slurm"] = {"version": release}
    if release_of(release).metrics:
        data["controller"] = {**data.get("controller", {}), "metrics": True}
    return ClusterSpec.model_validate(data)


def rpc_counts(slurm: LocalSlurm) -> dict[str, int]:
    """sdiag's RPC counts by message type (sdiag's own REQUEST_STATS_INFO included)."""
    text = slurm.run("sdiag", check=True).stdout
    section = text.split("by message type", 1)[1].split("statistics by user", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^\s+(\S+)\s+\(\s*\d+\) count:(\d+)", section, re.M)}


def rpc_delta(before: dict[str, int], after: dict[str, int], reads: int) -> str:
    """RPCs per read between two sdiag calls (the second sdiag's own request taken out)."""
    delta = {k: v - before.get(k, 0) for k, v in after.items()}
    delta["REQUEST_STATS_INFO"] = delta.get("REQUEST_STATS_INFO", 0) - 1
    shown = [f"{k} {v / reads:g}" for k, v in sorted(delta.items()) if v]
    return ", ".join(shown) or "none"


def ctld_cpu(slurm: LocalSlurm) -> float:
    process = slurm.jail.processes["slurmctld"]
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def native(slurm: LocalSlurm, exporter: Exporter, reads: int = 10) -> None:
    """slurmctld's own endpoints (controller.metrics) beside the exporter's read of the same
    cluster: slurmctld's CPU per read, the RPCs sdiag counts, the samples each serves."""
    rpcs, cpu, rest = rpc_counts(slurm), ctld_cpu(slurm), slurm_cpu(slurm) - ctld_cpu(slurm)
    for _ in range(reads):
        exporter.cycle()
    ours = (ctld_cpu(slurm) - cpu) / reads
    ours_rest = (slurm_cpu(slurm) - ctld_cpu(slurm) - rest) / reads
    ours_rpcs = rpc_delta(rpcs, rpc_counts(slurm), reads)
    text = generate_latest(exporter.registry).decode()
    ours_samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    print(
        f"  the exporter's read: slurmctld {ours * 1000:.1f} ms CPU (slurmrestd {ours_rest * 1000:.1f} ms), "
        f"RPCs per read: {ours_rpcs}; {ours_samples} samples"
    )
    base = f"http://127.0.0.1:{slurm.ports.slurmctld}/metrics/"
    total_cpu = 0.0
    total_samples = 0
    rpcs = rpc_counts(slurm)
    for endpoint in NATIVE_ENDPOINTS:
        cpu, mark = ctld_cpu(slurm), time.monotonic()
        for _ in range(reads):
            with urllib.request.urlopen(base + endpoint, timeout=60) as reply:
                body = reply.read().decode()
        wall, cpu = (time.monotonic() - mark) / reads, (ctld_cpu(slurm) - cpu) / reads
        samples = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
        total_cpu += cpu
        total_samples += samples
        print(
            f"  GET /metrics/{endpoint}: slurmctld {cpu * 1000:.1f} ms CPU, {wall * 1000:.1f} ms wall, "
            f"{samples} samples, {len(body):,} bytes"
        )
    print(
        f"  every native endpoint once: slurmctld {total_cpu * 1000:.1f} ms CPU, {total_samples} samples; "
        f"RPCs sdiag counts for them: {rpc_delta(rpcs, rpc_counts(slurm), reads)}"
    )


def real(jobs: int, read: str, release: str) -> None:
    nodes = [SimNode("cpu-0", "cpu"), SimNode("cpu-1", "cpu")]
    spec = _spec(release)
    with LocalSlurm.start(spec, nodes=nodes) as slurm:
        token = JwtMinter.from_file(slurm.jwt_key_path, "slurm")
        rest = SlurmRestClient(slurm.rest_url, user="slurm", token=token, timeout=120)
        started = time.monotonic()
        for i in range(jobs):
            rest.submit_job(JobSubmit(script="#!/bin/sh\ntrue\n", name=f"bench-{i}", partition="batch", hold=True))
        submit = time.monotonic() - started
        api: SlurmApi = rest
        reader = SqueueJobs(
            token, "/etc/slurm/slurm.conf", command=slurm.jail.command(["squeue"], role="slurmrestd", inherit=True)
        )
        if read == "squeue":
            api = TextJobReads(rest, reader)
        job_seconds: list[float] = []
        list_jobs = api.list_jobs

        def timed() -> list[JobView]:
            mark = time.monotonic()
            try:
                return list(list_jobs())
            finally:
                job_seconds.append(time.monotonic() - mark)

        api.list_jobs = timed  # type: ignore[method-assign]
        exporter = Exporter(api)
        walls: list[float] = []
        child = children_cpu()
        for _ in range(5):
            started = time.monotonic()
            report = exporter.cycle()
            walls.append(time.monotonic() - started)
            assert report.ok and report.slurm_requests == 4, report
        child = (children_cpu() - child) / 5
        text = generate_latest(exporter.registry).decode()
        held = [
            line
            for line in text.splitlines()
            if line.startswith('sunk_slurm_jobs_pending{partition="batch",reason="JobHeldUser"}')
        ]
        assert held and float(held[0].split()[-1]) == jobs, held
        print(f"real slurmctld {release}: {jobs:,} held jobs submitted through slurmrestd in {submit:.1f} s")
        print(
            f"  one read (jobs via {read}, then nodes, partitions, diag via slurmrestd): median "
            f"{statistics.median(walls):.3f} s, max {max(walls):.3f} s; the jobs alone median "
            f"{statistics.median(job_seconds):.3f} s"
            + (
                f", squeue CPU {child:.3f} s per read, {reader.json_rows} rows re-read as JSON"
                if read == "squeue"
                else ""
            )
        )
        # The worst case of the squeue read: every job shows a state flag or a description, so
        # every one is re-read as JSON (squeue --json builds what slurmrestd builds, in the exporter).
        ids = [r.job_id for r in reader.jobs()]
        mark, child = time.monotonic(), children_cpu()
        every = parse_squeue_json(reader._squeue_json(["-a", "-t", "all"]), ids)
        print(
            f"  worst case, every job re-read as JSON: {len(every):,} jobs, {time.monotonic() - mark:.3f} s wall, "
            f"squeue CPU {children_cpu() - child:.2f} s"
        )
        # For comparison: every job through slurmrestd, as the exporter read them before.
        sizes: list[int] = []
        request = rest._http.request  # the bench peeks at the reply's size

        def sized(*args: Any, **kwargs: Any) -> Any:
            reply = request(*args, **kwargs)
            sizes.append(len(reply.content))
            return reply

        setattr(rest._http, "request", sized)  # noqa: B010 - mypy would refuse the assignment
        mark, cpu = time.monotonic(), slurm_cpu(slurm)
        count = len(rest.list_jobs())
        wall, cpu = time.monotonic() - mark, slurm_cpu(slurm) - cpu
        print(
            f"  for comparison, every job through slurmrestd: {count:,} jobs, {wall:.3f} s wall, "
            f"{sum(sizes) / 1e6:.1f} MB, slurmrestd+slurmctld CPU {cpu:.2f} s"
        )
        setattr(rest._http, "request", request)  # noqa: B010
        if spec.controller.metrics:
            native(slurm, exporter)
        goal(f"exporter read of {jobs:,} jobs from real Slurm {release} (median)", statistics.median(walls), 1.0, "s")
        rest.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--real-jobs", type=int, default=1000)
    parser.add_argument(
        "--releases",
        default=",".join(SUPPORTED_SLURM),
        help="the Slurm releases the real part runs on, one after another (default: every supported one)",
    )
    parser.add_argument(
        "--read",
        choices=("squeue", "slurmrestd"),
        default="squeue",
        help="how each collection reads every job (the Deployment: squeue)",
    )
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.1f}")
    synthetic(args.jobs, args.nodes)
    if args.real_jobs:
        for release in args.releases.split(","):
            real(args.real_jobs, args.read, release)


if __name__ == "__main__":
    main()
