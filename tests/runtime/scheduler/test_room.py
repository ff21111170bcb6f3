"""Naming the node of a single pod's placeholder (runtime/scheduler/room.py): pure parts."""

from __future__ import annotations

from dataclasses import replace

from sunk.runtime.scheduler.request import JobRequest
from sunk.runtime.scheduler.room import NONE, Room, nameable, pick, room


def test_free_room_is_configured_less_allocated_and_none_where_nothing_starts() -> None:
    assert room(["MIXED"], cpus=16, alloc_cpus=6, real_memory=8192, alloc_memory=1024) == Room(10, 7168)
    assert room(["IDLE"], 16, 0, 8192, 0) == Room(16, 8192)
    for state in (["IDLE", "DRAIN"], ["DOWN"], ["IDLE", "NOT_RESPONDING"], ["IDLE", "RESERVED"], ["FUTURE"]):
        assert room(state, 16, 0, 8192, 0) == NONE, state
    assert room(["MIXED"], 16, 20, 8192, 9000) == NONE  # never below nothing


def test_only_one_node_cpu_only_placeholders_without_exclusions_or_switches_are_named() -> None:
    single = JobRequest(nodes=1, cpus_per_task=2, memory_mib=512, partition="gpu")
    assert nameable(single)
    assert not nameable(replace(single, gpus=1))  # the GPU indices are known only from a read
    assert not nameable(replace(single, nodes=2))  # a gang: Slurm's topology-aware choice
    assert not nameable(replace(single, exclude=("gpu-1",)))  # a reroute
    assert not nameable(replace(single, switches=1))


def test_the_pick_is_the_candidate_the_request_fills_most() -> None:
    free = {"a": Room(10, 8000), "b": Room(3, 8000), "c": Room(2, 100), "d": Room(64, 64000)}
    assert pick(free, ["a", "b", "c"], cpus=2, memory_mib=512) == "b"  # c lacks memory
    assert pick(free, ["a", "b"], cpus=4, memory_mib=512) == "a"
    assert pick(free, ["c", "e"], cpus=2, memory_mib=512) is None  # e: not counted
    assert pick(free, [], cpus=1, memory_mib=1) is None
    tie = {"x": Room(4, 100), "w": Room(4, 100)}
    assert pick(tie, ["x", "w"], cpus=1, memory_mib=1) == "w"  # the same every time
    assert Room(4, 100).less(1, 60) == Room(3, 40)
