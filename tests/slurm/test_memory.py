"""Memory defaults on real Slurm: SelectTypeParameters=CR_Core_Memory with no DefMemPerCPU gives a
job that asks for no memory the whole node (measured on 24.11), so a node runs one job at a time.
Every partition renders DefMemPerCPU (the spec's defMemPerCpu, else the smallest MiB per CPU of its
nodesets), so small jobs share nodes."""

from __future__ import annotations

import re

import pytest
from sunk.runtime.harness import LocalSlurm

from sunk.spec.cluster import ClusterSpec

pytestmark = pytest.mark.slurm

SLEEP = "#!/bin/sh\nsleep 120\n"
UNITS = {"M": 1, "G": 1024, "T": 1024 * 1024}


def _mib(value: str) -> int:
    match = re.fullmatch(r"(\d+)([MGT])", value)
    assert match, value
    return int(match.group(1)) * UNITS[match.group(2)]


def _job(slurm: LocalSlurm, job: int) -> dict[str, str]:
    out = slurm.run("scontrol", "show", "job", "-o", str(job), check=True).stdout
    return dict(word.split("=", 1) for word in out.split() if "=" in word)


def test_two_one_cpu_jobs_without_mem_share_a_node(acme: LocalSlurm, acme_spec: ClusterSpec) -> None:
    node = next(n.name for n in acme.nodes if n.nodeset == "cpu")
    batch = next(p for p in acme_spec.partitions if p.name == "batch")
    first = acme.sbatch(SLEEP, "-p", batch.name, "-w", node, "-n1")
    second = acme.sbatch(SLEEP, "-p", batch.name, "-w", node, "-n1")
    # Without a default the second stays PENDING (Resources) while the first holds all memory.
    for job in (first, second):
        acme.wait_job(job, {"RUNNING"}, timeout=120)
    for job in (first, second):
        fields = _job(acme, job)
        assert fields["NodeList"] == node
        assert _mib(fields["MinMemoryCPU"]) == acme_spec.def_mem_per_cpu(batch) == 1024


def test_an_exclusive_job_without_mem_gets_every_cpu_and_fits(acme: LocalSlurm, acme_spec: ClusterSpec) -> None:
    # The default is the smallest share of the partition's nodesets, so whole-node jobs still fit
    # the smallest node (a larger DefMemPerCPU makes sbatch --exclusive fail: measured).
    cpu = acme_spec.nodeset("cpu")
    job = acme.sbatch(SLEEP, "-p", "batch", "-C", "cpu", "--exclusive")
    acme.wait_job(job, {"RUNNING"}, timeout=120)
    alloc = dict(kv.split("=") for kv in _job(acme, job)["AllocTRES"].split(","))
    assert int(alloc["cpu"]) == cpu.cpus
    assert _mib(alloc["mem"]) <= cpu.memory_mib
