"""Naming the node of a single pod's placeholder: Slurm's free room per node, which placeholders
may be named a node, and which node. Pure.

Why name one. An immediate allocation's reply carries only its job id (slurmrestd writes
`job_id` and `job_submit_user_msg` of the allocation response, not its node list), so a granted
allocation had to be read back (`GET /job/{id}`) to learn where it runs, and that read costs Slurm
as much as the allocation (slurmctld ~1.1 ms, slurmrestd ~1.3-1.6 ms, the client ~0.45 ms each,
measured 2026-12-07 on 26.05.5): half of what every single pod of a burst asked of slurmctld. An
allocation made on a node the scheduler names (`required_nodes`) needs no read: where it runs is
the name. Slurm still decides whether it runs: it grants or refuses the named node under its own
priorities, limits, QOS and partition, as for any immediate allocation; a refusal costs the
request it took, the node is not named again until Slurm places an allocation there itself, and
the pod goes the way it went before (an allocation Slurm places, then the queue).

Which placeholders: one node, no GPUs (which GPUs Slurm picks on a node is known only from a read
of the job: their indices are the pod's devices), nothing excluded, no switch count. Which nodes:
those where Slurm itself placed a job of ours in the same partition (the partition's nodes that
carry the shared feature the placeholders ask for), with room for the request by Slurm's last
count (`GET /nodes`: CPUs and memory configured less allocated) less what this scheduler was
granted since; of those, the one the request fills most (best fit, as Slurm packs), so whole
nodes stay free for gangs and training."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .request import JobRequest

UNUSABLE = frozenset(
    {
        "DOWN",
        "DRAIN",
        "FAIL",
        "FUTURE",
        "MAINTENANCE",
        "NOT_RESPONDING",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWERING_UP",
        "REBOOT_ISSUED",
        "REBOOT_REQUESTED",
        "RESERVED",
        "UNKNOWN",
    }
)
"""Node states and flags under which no allocation starts now (or one may, in a reservation, only
for its users): such a node has no room to name."""


@dataclass(frozen=True)
class Room:
    """What a node has free for a new job, by Slurm's count."""

    cpus: int
    memory_mib: int

    def less(self, cpus: int, memory_mib: int) -> Room:
        return Room(self.cpus - cpus, self.memory_mib - memory_mib)


NONE = Room(0, 0)


def room(state: Iterable[str], cpus: int, alloc_cpus: int, real_memory: int, alloc_memory: int) -> Room:
    """A node of `GET /nodes` as free room: configured less allocated; none in an unusable state."""
    if UNUSABLE.intersection(state):
        return NONE
    return Room(max(0, cpus - alloc_cpus), max(0, real_memory - alloc_memory))


def nameable(request: JobRequest) -> bool:
    """Whether a placeholder may be put on a node this scheduler names (see the module's text)."""
    return request.nodes == 1 and not request.gpus and not request.exclude and request.switches is None


def pick(free: Mapping[str, Room], candidates: Iterable[str], cpus: int, memory_mib: int) -> str | None:
    """The candidate the request fills most (least CPU left, then least memory, then by name),
    or None when none has room."""
    fits = [
        (left.cpus - cpus, left.memory_mib - memory_mib, name)
        for name in candidates
        if (left := free.get(name)) is not None and left.cpus >= cpus and left.memory_mib >= memory_mib
    ]
    return min(fits)[2] if fits else None
