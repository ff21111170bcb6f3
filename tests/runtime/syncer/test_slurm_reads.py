"""TextNodeReads: the cycle's read of every node through scontrol, everything else (and that read,
whenever scontrol fails) through slurmrestd."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry
from sunk.runtime.slurmrest import Node
from sunk.runtime.slurmrest.nodestate import NodeState
from sunk.runtime.slurmrest.nodetext import NodeTextError, ScontrolError
from sunk.runtime.syncer.slurm import TextNodeReads

from tests.support.fakes.syncer import FakeSlurm


class Reader:
    def __init__(self) -> None:
        self.reads = 0
        self.fail: Exception | None = None
        self.states = [NodeState("cpu-0", ("IDLE",), "", "")]

    def node_states(self, *, future: bool = False) -> list[NodeState]:
        self.reads += 1
        if self.fail is not None:
            raise self.fail
        return self.states


def reads(registry: CollectorRegistry, via: str) -> float:
    return registry.get_sample_value("sunk_syncer_slurm_reads_total", {"via": via}) or 0.0


def test_reads_go_to_scontrol_writes_to_slurmrestd_and_failures_fall_back(caplog: pytest.LogCaptureFixture) -> None:
    rest = FakeSlurm([Node(name="cpu-0", state=["IDLE"]), Node(name="cpu-1", state=["IDLE"])])
    reader = Reader()
    registry = CollectorRegistry()
    slurm = TextNodeReads(rest, reader, registry=registry)

    assert slurm.node_states(future=True) == reader.states
    assert (rest.requests, reader.reads, slurm.requests) == (0, 1, 1)

    slurm.update_node("cpu-1", state="DRAIN", reason="sunk: cordoned")
    assert rest.writes == 1 and rest.nodes["cpu-1"].drain

    caplog.set_level(logging.INFO, logger="sunk.runtime.syncer.slurm")
    for failure in (ScontrolError("scontrol show nodes: exit 1: unreachable"), NodeTextError("line 3 is neither")):
        reader.fail = failure
        got = slurm.node_states(future=True)
        assert [n.name for n in got] == ["cpu-0", "cpu-1"] and got[1].drain  # slurmrestd's view
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unreachable" in warnings[0].getMessage()  # once, not every cycle
    assert slurm.failing == "line 3 is neither"

    reader.fail = None
    assert slurm.node_states() == reader.states
    assert (
        slurm.failing == "" and "works again" not in caplog.text and "scontrol reads Slurm nodes again" in caplog.text
    )
    assert (reads(registry, "scontrol"), reads(registry, "slurmrestd")) == (2, 2)


def test_when_both_fail_the_slurmrestd_error_reaches_the_cycle() -> None:
    rest = FakeSlurm([])
    rest.down = True
    reader = Reader()
    reader.fail = ScontrolError("scontrol show nodes: exit 1: Unable to contact slurm controller")
    with pytest.raises(Exception, match="connection refused"):
        TextNodeReads(rest, reader).node_states()
