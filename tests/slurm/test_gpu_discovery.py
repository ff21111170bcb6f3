"""GPU discovery on real slurmd 24.11 from the slurmd image (fake device files: this host has no
GPU and no NVIDIA driver):

- `gpus.autodetect: nvml`: the image's gpu/nvml plugin finds no libnvidia-ml.so.1, says so in
  slurmd's log and registers the GPUs of the File= lines;
- `gpus.shardsPerGpu`: the node offers shards and a job gets one;
- `gpus.fromNodeLabels`: each node registers the GPU type, count and shards its Node's GPU feature
  discovery labels say, through the same pure functions the operator builds the pod with; a Node
  without the labels gets the spec's; a MIG Node's instances need NVML, so without a driver slurmd
  finds none of them and Slurm keeps the node out of service (measured, not modelled).
What the fakes cannot show: NVML's own detection (types, cores, links, MIG device files)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from sunk.runtime.harness import LocalSlurm, SimNode

from sunk.render.gres import node_gres
from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

pytestmark = pytest.mark.slurm

H100_LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "4",
    "nvidia.com/gpu.replicas": "2",
}
MIG_LABELS = {
    "nvidia.com/mig.strategy": "single",
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
    "nvidia.com/gpu.count": "7",
}


def _spec() -> ClusterSpec:
    data = load_stack("acme-dev", FIXTURE_STACKS).spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    for ns in data["nodesets"]:
        if ns["name"] == "gpu":
            ns["gpus"].update({"autodetect": "nvml", "shardsPerGpu": 4})
    data["nodesets"].append(
        {
            "name": "gfd",
            "mode": "all-matching-nodes",
            "cpus": 2,
            "memoryMib": 1024,
            "gpus": {"type": "l40s", "count": 2, "fromNodeLabels": True, "autodetect": "nvml"},
        }
    )
    for p in data["partitions"]:
        if p["name"] == "batch":
            p["nodesets"].append("gfd")
    return ClusterSpec.model_validate(data)


SPEC = _spec()
NODES = [
    SimNode("gpu-0", "gpu"),
    SimNode("cpu-0", "cpu"),
    SimNode("node-h100", "gfd", H100_LABELS),
    SimNode("node-plain", "gfd", {}),
    SimNode("node-mig", "gfd", MIG_LABELS),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalSlurm]:
    with LocalSlurm.start(SPEC, NODES[:-1], accounting=False, restapi=False) as slurm:
        yield slurm


def _show(slurm: LocalSlurm, node: str) -> str:
    return slurm.run("scontrol", "show", "node", node, check=True).stdout


def _gres(slurm: LocalSlurm, node: str) -> str:
    m = re.search(r"\bGres=(\S+)", _show(slurm, node))
    return m.group(1) if m else ""


def test_autodetect_nvml_without_a_driver_keeps_the_file_lines(cluster: LocalSlurm) -> None:
    assert cluster.files["gres-gpu.conf"].splitlines()[1:] == [
        "AutoDetect=nvml",
        "Name=gpu Type=h100 File=/dev/nvidia[0-1]",
        "Name=shard Count=8 File=/dev/nvidia[0-1]",
    ]
    assert (cluster.role_root("slurmd") / "usr/lib/x86_64-linux-gnu/slurm-wlm/gpu_nvml.so").exists()
    # 24.11 and 26.05 word it differently.
    log = cluster.log("slurmd-gpu-0", 200)
    assert re.search(
        r"configured with nvml functionality, but that lib wasn't found|gpu_nvml.so found but libnvidia-ml not found",
        log,
    ), log
    assert _gres(cluster, "gpu-0") == "gpu:h100:2,shard:h100:8"
    assert "IDLE" in _show(cluster, "gpu-0")


def test_a_job_gets_a_shard(cluster: LocalSlurm) -> None:
    done = cluster.run("srun", "-w", "gpu-0", "--gres=shard:3", "sh", "-c", "echo $SLURM_SHARDS_ON_NODE", check=True)
    assert done.stdout.split() == ["3"]


def test_labels_give_type_count_and_shards(cluster: LocalSlurm) -> None:
    gres = node_gres(SPEC.nodeset("gfd").gpus, H100_LABELS)  # type: ignore[arg-type]
    assert gres.words() == "gpu:h100_80gb_hbm3:4,shard:8"
    assert _gres(cluster, "node-h100") == "gpu:h100_80gb_hbm3:4,shard:h100_80gb_hbm3:8"
    done = cluster.run(
        "srun", "-w", "node-h100", "--gres=gpu:h100_80gb_hbm3:3", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES", check=True
    )
    assert done.stdout.split() == ["0,1,2"]


def test_a_node_without_labels_gets_the_spec(cluster: LocalSlurm) -> None:
    assert _gres(cluster, "node-plain") == "gpu:l40s:2"


def test_mig_instances_need_nvml_without_it_the_node_stays_out(cluster: LocalSlurm) -> None:
    gres = node_gres(SPEC.nodeset("gfd").gpus, MIG_LABELS)  # type: ignore[arg-type]
    assert (gres.words(), gres.conf_lines()) == ("gpu:1g.5gb:7", ["AutoDetect=nvml"])
    cluster.start_slurmd(NODES[-1], wait=False)
    deadline = time.monotonic() + 120
    while "INVALID_REG" not in (out := _show(cluster, "node-mig") if _known(cluster, "node-mig") else ""):
        assert time.monotonic() < deadline, out
        time.sleep(0.3)
    assert "DRAIN" in out and "Reason=gres/gpu count reported lower than configured (0 < 7)" in out
    assert "Ignoring file-less GPU gpu:1g.5gb" in cluster.log("slurmd-node-mig", 50)


def _known(slurm: LocalSlurm, node: str) -> bool:
    return node in slurm.run("sinfo", "-h", "-N", "-o", "%N").stdout.split()
