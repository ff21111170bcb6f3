"""nodesets[].power on real Slurm 24.11 without the operator: the harness starts the slurmd of the
first minNodes as the operator's pods would (`slurmd -D -b -N <node>`). The node registers though
Slurm had it powered down, runs jobs, and stays up past suspendTime (SuspendExcNodes), while the
other CLOUD nodes stay powered down. The operator's part: tests/runtime/operator/test_scale_to_zero.py."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sunk.runtime.harness import LocalSlurm, daemons

from sunk.spec.cluster import ClusterSpec

pytestmark = pytest.mark.slurm

SUSPEND = 10
SPEC = ClusterSpec.model_validate(
    {
        "name": "pw",
        "tenant": "acme",
        "nodesets": [
            {
                "name": "cpu",
                "maxNodes": 3,
                "cpus": 1,
                "memoryMib": 512,
                "power": {"minNodes": 1, "suspendTime": SUSPEND},
            },
        ],
        "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
        "login": {"enabled": False},
    }
)


@pytest.fixture(scope="module")
def powered() -> Iterator[LocalSlurm]:
    with LocalSlurm.start(SPEC, accounting=False, restapi=False) as slurm:  # default nodes: minNodes
        yield slurm


def test_min_nodes_stay_up_past_suspend_time_and_the_rest_stay_powered_down(powered: LocalSlurm) -> None:
    assert [n.name for n in powered.nodes] == ["cpu-0"]
    time.sleep(SUSPEND + 12)  # past SuspendTime and Slurm's power-save pass; the state, not the time, is asserted
    states = daemons.node_states(powered.jail)
    assert states["cpu-0"] == "IDLE+CLOUD", states
    assert states["cpu-1"] == states["cpu-2"] == "IDLE+CLOUD+POWERED_DOWN", states
    job = powered.sbatch("#!/bin/sh\ntrue\n", "-w", "cpu-0")
    assert powered.wait_job(job) == "COMPLETED"
    shown = powered.run("sinfo", "-h", "-o", "%D %T", check=True).stdout.splitlines()
    assert sorted(shown) == ["1 idle", "2 idle~"], shown
