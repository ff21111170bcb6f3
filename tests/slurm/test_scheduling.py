"""Partitions, QOS and preemption as the acme-dev spec declares them, on real slurmctld."""

from __future__ import annotations

import pytest
from sunk.runtime.harness import LocalSlurm

from sunk.spec.cluster import ClusterSpec

pytestmark = pytest.mark.slurm


def _fields(line: str) -> dict[str, str]:
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


def _job(slurm: LocalSlurm, job: int) -> dict[str, str]:
    return _fields(slurm.run("scontrol", "show", "job", "-o", str(job), check=True).stdout)


def test_partitions_match_the_spec(acme: LocalSlurm, acme_spec: ClusterSpec) -> None:
    out = acme.run("scontrol", "show", "partition", "-o", check=True).stdout
    parts = {f["PartitionName"]: f for f in map(_fields, out.splitlines())}
    assert set(parts) == {p.name for p in acme_spec.partitions}
    for p in acme_spec.partitions:
        got = parts[p.name]
        assert got["NodeSets"].split(",") == p.nodesets
        assert got["Default"] == ("YES" if p.default else "NO")
        assert got["MaxTime"] == p.max_time
        assert got["PriorityTier"] == str(p.priority_tier)
        assert got["AllowQos"] == (",".join(p.allow_qos) if p.allow_qos else "ALL")
        assert got["State"] == "UP"


def test_qos_from_the_spec_exist_with_their_preemption(acme: LocalSlurm, acme_spec: ClusterSpec) -> None:
    out = acme.run("sacctmgr", "-n", "-P", "show", "qos", "format=Name,Priority,Preempt,PreemptMode", check=True)
    rows = {r.split("|")[0]: r.split("|") for r in out.stdout.splitlines()}
    for q in acme_spec.qos:
        _, priority, preempt, _ = rows[q.name]
        assert int(priority) == q.priority
        assert sorted(filter(None, preempt.split(","))) == sorted(q.preempt)
    assert rows["low"][3] == "requeue"


def test_default_partition_takes_jobs_without_p(acme: LocalSlurm, acme_spec: ClusterSpec) -> None:
    default = next(p.name for p in acme_spec.partitions if p.default)
    job = acme.sbatch("#!/bin/sh\ntrue\n")
    acme.wait_job(job)
    assert _job(acme, job)["Partition"] == default


def test_partition_max_time_refuses_longer_jobs(acme: LocalSlurm) -> None:
    """scheduling.enforcePartLimits ALL (the default): a job over the partition's MaxTime is refused
    at submission with Slurm's reason, not queued for ever (Slurm's own default, NO, holds it with
    PartitionTimeLimit)."""
    assert "EnforcePartLimits=ALL" in (acme.root / "etc/slurm/slurm.conf").read_text()
    done = acme.run("sbatch", "-p", "gpu", "--time=13:00:00", "--wrap", "true")  # gpu maxTime 12:00:00
    assert done.returncode != 0
    assert "Requested time limit is invalid" in done.stderr, done.stderr
    within = acme.sbatch("#!/bin/sh\ntrue\n", "-p", "gpu", "--time=11:00:00")
    assert _job(acme, within)["JobState"] in ("PENDING", "RUNNING", "COMPLETING", "COMPLETED")


def test_high_qos_preempts_and_requeues_low(acme: LocalSlurm) -> None:
    cpu_nodes = [n.name for n in acme.nodes if n.nodeset == "cpu"]
    # The low job takes every cpu node whole (jobs share nodes otherwise: DefMemPerCPU).
    low = acme.sbatch("#!/bin/sh\nsleep 300\n", "-C", "cpu", "-N", str(len(cpu_nodes)), "--qos=low", "--exclusive")
    acme.wait_job(low, {"RUNNING"})
    high = acme.sbatch("#!/bin/sh\nsleep 1\n", "-C", "cpu", "-N", str(len(cpu_nodes)), "--qos=high")
    acme.wait_job(high, {"RUNNING", "COMPLETED"}, timeout=120)
    info = _job(acme, low)
    assert info["JobState"] == "PENDING"
    assert int(info["Restarts"]) >= 1  # requeued, not cancelled
    acme.wait_job(high, {"COMPLETED"}, timeout=120)
    states = acme.run("sacct", "-X", "-n", "-P", "-D", "-o", "State", "-j", str(low), check=True).stdout.split()
    assert "PREEMPTED" in states
