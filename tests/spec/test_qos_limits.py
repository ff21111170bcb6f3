"""QOS limits (MaxTRESPerJob/User/Account, GrpTRES, MaxJobsPerUser, MaxSubmitJobsPerUser) and a
partition's DefCpuPerGPU/DefMemPerGPU: what the spec refuses and what it renders (proven on real
Slurm in tests/slurm/test_qos_limits.py)."""

from __future__ import annotations

from typing import Any

import pytest

from sunk.render import render_slurm_files
from sunk.render.sacctmgr import render_sacctmgr
from sunk.spec.errors import SpecError, load_spec

CPU = {"name": "cpu", "cpus": 4, "memoryMib": 8192}
GPU = {"name": "gpu", "cpus": 16, "memoryMib": 65536, "gpus": {"type": "h100", "count": 2}}


def _cluster(
    qos: dict[str, Any] | None = None, partition: dict[str, Any] | None = None, gpus: bool = True
) -> dict[str, Any]:
    nodesets = [CPU, GPU] if gpus else [CPU]
    return {
        "name": "research",
        "tenant": "acme",
        "nodesets": nodesets,
        "partitions": [
            {"name": "batch", "nodesets": [n["name"] for n in nodesets], "default": True, **(partition or {})}
        ],
        "qos": [{"name": "limited", **(qos or {})}],
    }


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(data)
    return info.value.problems


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            _cluster({"maxTresPerUser": {"gpu": 2}}),
            "qos[0].maxTresPerUser.gpu: 'gpu' is not a TRES a QOS limits here; one of cpu, mem, node, billing, "
            "gres/gpu; did you mean gres/gpu?",
        ),
        (_cluster({"grpTres": {"cpu": -1}}), "qos[0].grpTres.cpu: -1 is too small; must be greater than or equal to 0"),
        (
            _cluster({"maxTresPerJob": {"gres/gpu": 1}}, gpus=False),
            "qos[0].maxTresPerJob.gres/gpu: no NodeSet has GPUs",
        ),
        (
            _cluster(partition={"defCpuPerGpu": 2}, gpus=False),
            "partitions[0].defCpuPerGpu: none of the partition's nodesets has GPUs",
        ),
    ],
    ids=["tres-name", "negative", "gpu-limit-without-gpus", "gpu-default-without-gpus"],
)
def test_refusals(data: dict[str, Any], expected: str) -> None:
    problems = _problems(data)
    assert any(p.startswith(expected) for p in problems), problems


def test_limits_render_to_sacctmgr_and_a_dropped_one_is_cleared() -> None:
    spec = load_spec(
        _cluster({"maxTresPerUser": {"cpu": 4, "gres/gpu": 2}, "maxJobsPerUser": 3, "grpTres": {"mem": 4096}})
    )
    (cmd,) = [c for c in render_sacctmgr(spec) if "name=limited" in c and "Priority=0" in c]
    assert "MaxTRESPerUser=cpu=4,mem=-1,node=-1,billing=-1,gres/gpu=2" in cmd
    assert "GrpTRES=cpu=-1,mem=4096,node=-1,billing=-1,gres/gpu=-1" in cmd
    assert "MaxTRESPerJob=cpu=-1,mem=-1,node=-1,billing=-1,gres/gpu=-1" in cmd  # unset: cleared
    assert "MaxJobsPerUser=3" in cmd and "MaxSubmitJobsPerUser=-1" in cmd
    cpu_only = load_spec(_cluster(gpus=False))
    (cmd,) = [c for c in render_sacctmgr(cpu_only) if "name=limited" in c and "Priority=0" in c]
    assert "MaxTRESPerUser=cpu=-1,mem=-1,node=-1,billing=-1" in cmd  # no gres/gpu tracked there


def test_per_gpu_defaults_render_on_the_partition() -> None:
    spec = load_spec(_cluster(partition={"defCpuPerGpu": 2, "defMemPerGpu": 1024}))
    (line,) = [ln for ln in render_slurm_files(spec)["slurm.conf"].splitlines() if ln.startswith("PartitionName=")]
    assert "DefMemPerCPU=2048 DefMemPerGPU=1024 DefCpuPerGPU=2" in line


def test_a_partitions_qos_is_known_and_slurmctld_waits_for_it() -> None:
    """QOS= on the partition line; slurmctld exits at start on an unknown partition QOS, so the
    controller's wait-qos init container waits for it too (the accounting setup creates it)."""
    from sunk.manifests.scripts import partition_qos

    problems = _problems(_cluster(partition={"qos": "gold"}))
    assert "partitions[0].qos: 'gold' is not a QOS; known: limited, normal" in problems
    spec = load_spec(_cluster(partition={"qos": "limited"}))
    (line,) = [ln for ln in render_slurm_files(spec)["slurm.conf"].splitlines() if ln.startswith("PartitionName=")]
    assert " QOS=limited " in line
    assert partition_qos(spec) == ["limited"]  # what the wait-qos init container waits for
    no_accounting = {**_cluster(partition={"qos": "normal"}), "qos": [], "accounting": {"enabled": False}}
    assert "partitions[0].qos: QOS live in accounting; set accounting.enabled true" in _problems(no_accounting)


def test_the_setup_waits_for_gpu_tres_only_where_limits_may_name_it() -> None:
    from sunk.render.sacctmgr import render_sacctmgr_script

    assert "grep -qx 'gres|gpu'" in render_sacctmgr_script(load_spec(_cluster()))
    assert "gres|gpu" not in render_sacctmgr_script(load_spec(_cluster(gpus=False)))
