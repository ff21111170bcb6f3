"""nodesets[].power (scale to zero through Slurm power saving): what slurm.conf gets, and every
refusal naming its field. Real Slurm: tests/runtime/operator/test_scale_to_zero.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sunk.render import render_slurm_files
from sunk.spec import SpecError, load_spec
from sunk.spec.cluster import ClusterSpec
from tests.support.specs import build_spec, spec_document

BASE = spec_document(
    nodesets=[
        {"name": "cpu", "cpus": 8, "memoryMib": 16384, "maxNodes": 16, "power": {"minNodes": 2, "suspendTime": 300}},
        {"name": "fixed", "replicas": 2, "cpus": 4, "memoryMib": 8192},
    ],
    **{"partitions.0.nodesets": ["cpu", "fixed"]},
)
"""MINIMAL with a power-saving NodeSet `cpu` and a fixed one, both in partition batch."""


def spec(**nodeset: Any) -> ClusterSpec:
    """BASE with fields of NodeSet cpu changed."""
    return build_spec(BASE, {f"nodesets.cpu.{field}": value for field, value in nodeset.items()})


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(data)
    return info.value.problems


def test_power_renders_cloud_nodes_and_power_saving() -> None:
    conf = render_slurm_files(spec())["slurm.conf"]
    lines = conf.splitlines()
    assert "NodeName=cpu-[0-15] CPUs=8 RealMemory=16384 Feature=cpu State=CLOUD" in lines
    # The CLOUD nodes still join partitions through their NodeSet line, which follows them.
    assert (
        lines.index("NodeSet=cpu Feature=cpu") == lines.index(next(x for x in lines if x.startswith("NodeName="))) + 1
    )
    for line in (
        "SuspendProgram=/bin/true",
        "ResumeProgram=/bin/true",
        "SuspendTime=300",
        "ResumeTimeout=900",
        "SuspendExcStates=DYNAMIC_NORM",  # the dynamic nodes of other NodeSets never power down
        "SuspendExcNodes=cpu-[0-1]",  # minNodes
        "SlurmctldParameters=cloud_reg_addrs,idle_on_node_suspend",
        "TreeWidth=65533",
    ):
        assert line in lines, line
    assert "NodeName=fixed" not in conf  # other NodeSets stay dynamic


def test_without_power_nothing_changes() -> None:
    data = copy.deepcopy(BASE)
    del data["nodesets"][0]["power"]
    conf = render_slurm_files(load_spec(data))["slurm.conf"]
    assert "NodeName=" not in conf and "Suspend" not in conf and "Power saving" not in conf


def test_one_min_node_is_named_alone_and_power_with_replicas_zero_min() -> None:
    conf = render_slurm_files(spec(power={"minNodes": 1}))["slurm.conf"]
    assert "SuspendExcNodes=cpu-0" in conf.splitlines()
    conf = render_slurm_files(spec(power={}))["slurm.conf"]
    assert "SuspendExcNodes" not in conf
    assert spec(power={}).nodesets[0].desired_replicas == 0


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"replicas": 3}, "nodesets[0].replicas: must be unset with power (Slurm's demand sets the pods)"),
        ({"externalScaling": True}, "nodesets[0].externalScaling: power already scales this NodeSet"),
        ({"power": {"minNodes": 17}}, "nodesets[0].power.minNodes: 17 exceeds maxNodes 16"),
        ({"mode": "all-matching-nodes"}, "nodesets[0].power: only in mode replicas"),
        (
            {"power": {"suspendTime": 5}},
            "nodesets[0].power.suspendTime: 5 is too small; must be greater than or equal to 10",
        ),
        (
            {"power": {"resumeTimeout": 0}},
            "nodesets[0].power.resumeTimeout: 0 is too small; must be greater than or equal to 30",
        ),
        ({"power": {"suspend": 60}}, "nodesets[0].power.suspend: unknown field"),
        (
            {"gpus": {"type": "h100", "count": 8, "fromNodeLabels": True}},
            "nodesets[0].gpus.fromNodeLabels: not with power: its CLOUD nodes are defined in slurm.conf",
        ),
    ],
)
def test_power_refusals_name_the_field(change: dict[str, Any], expected: str) -> None:
    data = copy.deepcopy(BASE)
    data["nodesets"][0].update(change)
    found = problems(data)
    assert any(p.startswith(expected) for p in found), found


def test_power_nodesets_share_one_suspend_time() -> None:
    data = copy.deepcopy(BASE)
    data["nodesets"][1] = {"name": "fixed", "cpus": 4, "memoryMib": 8192, "power": {"suspendTime": 60}}
    (problem,) = problems(data)
    assert problem.startswith("nodesets[1].power.suspendTime: 60 differs from nodesets[0]'s 300; Slurm 24.11 has one")


def test_block_topology_counts_a_power_nodeset_at_max_nodes() -> None:
    data = copy.deepcopy(BASE)
    data["topology"] = {"plugin": "block", "blockSizes": [4], "labelKeys": ["example.com/block"]}
    data["slurm"] = {"version": "24.11"}  # the release block topology runs on
    data["nodesets"][0]["power"] = {"minNodes": 0}  # 0 running now, up to 16: it can fill blocks
    data["nodesets"][1]["replicas"] = 4
    load_spec(data)
    data["nodesets"][0]["maxNodes"] = 2
    found = problems(data)
    assert any(
        p.startswith("partitions[0].nodesets[0]: cpu has 2 replicas, fewer than the base block size 4") for p in found
    ), found
