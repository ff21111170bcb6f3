"""What Slurm allocated to its running jobs, read from `scontrol show job -d` (per node: the CPU ids
and the GPU indices, GRES `IDX`), and the check that no CPU or GPU of a node is held by two jobs.
One reader for the real-slurmctld tests (tests/runtime/scheduler) and the local cluster's
(tests/runtime/local), which get the same text from different places."""

from __future__ import annotations

import re
from collections.abc import Mapping

from sunk.hostlist import expand

Allocations = dict[int, dict[str, tuple[set[int], set[int]]]]
"""job id -> Slurm node -> (CPU ids, GPU indices)."""


def ids(text: str) -> list[int]:
    """Slurm's id ranges ("0-2,5") as numbers."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def allocations(text: str) -> Allocations:
    """Every running job's CPU ids and GPU indices on each of its nodes, from the text of
    `scontrol show job -d` (every job, or the ones it names)."""
    out: Allocations = {}
    for block in text.split("\n\n"):
        found = re.search(r"JobId=(\d+)", block)
        if found is None or "JobState=RUNNING" not in block:
            continue
        per_node = out.setdefault(int(found.group(1)), {})
        for nodes, cpus, gres in re.findall(r"Nodes=(\S+) CPU_IDs=(\S+) Mem=\S+ GRES=(\S*)", block):
            gpus = re.search(r"IDX:([0-9,-]+)", gres)
            for node in expand(nodes):
                per_node[node] = (set(ids(cpus)), set(ids(gpus.group(1))) if gpus else set())
    return out


def no_slot_twice(alloc: Mapping[int, Mapping[str, tuple[set[int], set[int]]]]) -> int:
    """Asserts that no CPU and no GPU of a node is held by two running jobs; returns the GPUs held."""
    cpus: dict[tuple[str, int], int] = {}
    gpus: dict[tuple[str, int], int] = {}
    for job, per_node in alloc.items():
        for node, (job_cpus, job_gpus) in per_node.items():
            for held, slots in ((cpus, job_cpus), (gpus, job_gpus)):
                for slot in slots:
                    other = held.setdefault((node, slot), job)
                    assert other == job, f"{node} slot {slot} held by jobs {other} and {job}"
    return len(gpus)
