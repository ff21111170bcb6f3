"""GRES from the spec and from GPU feature discovery labels, and the health check files, against
literal text; the spec's health and GPU fields refuse bad input naming the field."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from sunk.render import render_slurm_files
from sunk.render.gres import gres_type, node_gres, spec_gres
from sunk.render.health import check_file
from sunk.render.slurm_conf import HEADER, node_conf
from sunk.spec import ClusterSpec
from sunk.spec.errors import SpecError
from sunk.spec.health import HealthCheck
from sunk.spec.nodeset import GpuSpec

MakeSpec = Callable[..., ClusterSpec]
GPU = GpuSpec(type="l40s", count=2)


def gpu_nodeset(**gpus: Any) -> dict[str, Any]:
    return {"name": "gpu", "mode": "all-matching-nodes", "cpus": 4, "memoryMib": 4096,
            "gpus": {"type": "h100", "count": 8, **gpus}}  # fmt: skip


@pytest.mark.parametrize(
    ("product", "expected"),
    [
        ("NVIDIA-H100-80GB-HBM3", "h100_80gb_hbm3"),
        ("NVIDIA-A100-SXM4-40GB", "a100_sxm4_40gb"),
        ("Tesla-T4-SHARED", "tesla_t4"),
        ("NVIDIA-GH200-480GB", "gh200_480gb"),
    ],
)
def test_gres_type_from_the_product_label(product: str, expected: str) -> None:
    assert gres_type(product) == expected


@pytest.mark.parametrize(
    ("labels", "words", "lines"),
    [
        ({}, "gpu:l40s:2", ["Name=gpu Type=l40s File=/dev/nvidia[0-1]"]),
        (
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"},
            "gpu:h100_80gb_hbm3:8",
            ["Name=gpu Type=h100_80gb_hbm3 File=/dev/nvidia[0-7]"],
        ),
        (
            {"nvidia.com/gpu.product": "Tesla-T4-SHARED", "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "4"},
            "gpu:tesla_t4:1,shard:4",
            ["Name=gpu Type=tesla_t4 File=/dev/nvidia0", "Name=shard Count=4 File=/dev/nvidia0"],
        ),
        # A count that is not a number is no label at all: the spec's figures.
        ({"nvidia.com/gpu.product": "X", "nvidia.com/gpu.count": "many"}, "gpu:l40s:2", None),
    ],
)
def test_node_gres_from_labels(labels: dict[str, str], words: str, lines: list[str] | None) -> None:
    gres = node_gres(GPU, labels)
    assert gres.words() == words
    if lines is not None:
        assert gres.conf_lines() == lines


def test_mig_labels_need_nvml_and_give_profiles_as_types() -> None:
    single = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
              "nvidia.com/gpu.count": "56"}  # fmt: skip
    with pytest.raises(ValueError, match=r"^gpus.autodetect: .*set gpus.autodetect: nvml"):
        node_gres(GPU, single)
    nvml = GPU.model_copy(update={"autodetect": "nvml"})
    assert (node_gres(nvml, single).words(), node_gres(nvml, single).conf_lines()) == (
        "gpu:1g.5gb:56",
        ["AutoDetect=nvml"],
    )
    mixed = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
             "nvidia.com/gpu.count": "1", "nvidia.com/mig-3g.20gb.count": "2", "nvidia.com/mig-1g.5gb.count": "1"}  # fmt: skip
    assert node_gres(nvml, mixed).words() == "gpu:a100_sxm4_40gb:1,gpu:1g.5gb:1,gpu:3g.20gb:2"


def test_spec_shards_and_autodetect(make_spec: MakeSpec) -> None:
    spec = make_spec(
        nodesets=[{"name": "gpu", "cpus": 4, "memoryMib": 4096,
                   "gpus": {"type": "h100", "count": 2, "shardsPerGpu": 4, "autodetect": "nvml"}}],
        partitions=[{"name": "batch", "nodesets": ["gpu"], "default": True}],
    )  # fmt: skip
    files = render_slurm_files(spec)
    assert files["gres-gpu.conf"].removeprefix(HEADER).splitlines() == [
        "AutoDetect=nvml",
        "Name=gpu Type=h100 File=/dev/nvidia[0-1]",
        "Name=shard Count=8 File=/dev/nvidia[0-1]",
    ]
    assert "GresTypes=gpu,shard" in files["slurm.conf"].splitlines()
    assert "Gres=gpu:h100:2,shard:8" in node_conf(spec.nodesets[0]).split()
    assert spec_gres(spec.nodesets[0].gpus).total == 2  # type: ignore[arg-type]


def test_from_node_labels_only_in_all_matching_nodes(make_spec: MakeSpec) -> None:
    replicas = {**gpu_nodeset(fromNodeLabels=True), "mode": "replicas"}
    with pytest.raises(SpecError, match=r"gpus.fromNodeLabels: only in mode all-matching-nodes"):
        make_spec(nodesets=[replicas], partitions=[{"name": "b", "nodesets": ["gpu"], "default": True}])


HEALTH = {
    "interval": 60,
    "nodeState": ["idle", "cycle"],
    "disk": [{"path": "/scratch dir", "minFreeMib": 1024}],
    "minAvailableMemoryMib": 2048,
    "nvidiaSmi": False,
    "dcgm": True,
    "checks": [
        {"name": "ib", "command": ["/usr/sbin/ibstat", "-s"], "timeout": 5, "nodesets": ["gpu"]},
        {"name": "custom", "script": "#!/bin/sh\nexit 0", "timeout": 5},
    ],
}


def test_health_files_and_slurm_conf_lines(make_spec: MakeSpec) -> None:
    spec = make_spec(
        nodesets=[gpu_nodeset()],
        partitions=[{"name": "b", "nodesets": ["gpu"], "default": True}],
        healthCheck=HEALTH,
    )
    files = render_slurm_files(spec)
    conf = files["slurm.conf"].splitlines()
    assert [line for line in conf if line.startswith("HealthCheck")] == [
        "HealthCheckProgram=/etc/slurm/health.d/sunk-health.sh",
        "HealthCheckInterval=60",
        "HealthCheckNodeState=IDLE,CYCLE",
    ]
    assert sorted(k for k in files if k.startswith("health.d/")) == [
        "health.d/custom.sh",
        "health.d/ib.sh",
        "health.d/sunk-health.sh",
    ]
    program = files["health.d/sunk-health.sh"]
    checks = program.split("checks='", 1)[1].split("'\n", 1)[0].splitlines()
    assert checks == [
        "gpu gpus 5 gpus /dev/nvidia",
        "* disk 5 disk 1024 /scratch dir",
        "* memory 5 memory 2048",
        "* dcgm 25 dcgm",
        "gpu ib 5 user",
        "* custom 5 user",
    ]
    assert "prefix=sunk-health:\n" in program
    assert files["health.d/custom.sh"] == "#!/bin/sh\nexit 0\n"


def test_a_check_command_cannot_inject_into_any_script(tmp_path: Any) -> None:
    evil = ["/bin/echo", "$(touch pwned)", "`touch pwned`", "a'b", "; touch pwned", "x\ty"]
    text = check_file(HealthCheck(name="evil", command=evil))
    assert text.splitlines()[1] == "exec " + " ".join(shlex.quote(w) for w in evil)
    done = subprocess.run(["/bin/sh", "-c", text], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert done.stdout == " ".join(evil[1:]) + "\n"
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    ("health", "message"),
    [
        ({"checks": [{"name": "x"}]}, r"healthCheck.checks.0.*command: give exactly one of command"),
        ({"checks": [{"name": "x", "command": ["a"], "script": "#!/bin/sh"}]}, "command: give exactly one"),
        ({"checks": [{"name": "x", "script": "exit 0"}]}, r"script: must start with '#!'"),
        ({"checks": [{"name": "gpus", "command": ["a"]}]}, r"name: 'gpus' is sunk's own"),
        ({"checks": [{"name": "sunk-x", "command": ["a"]}]}, r"name: 'sunk-x' is sunk's own"),
        ({"checks": [{"name": "x", "command": ["a\nb"]}]}, "command: a word may not hold a line break"),
        ({"checks": [{"name": "x", "command": ["a"]}, {"name": "x", "command": ["b"]}]}, r"checks\[1\].name: 'x' repeats"),
        ({"checks": [{"name": "x", "command": ["a"], "timeout": 45}]}, r"healthCheck.checks: the timeouts add up to 60 s with the built-in checks. \(15 s\)"),
        ({"interval": 5}, "healthCheck.interval"),
        ({"nodeState": ["any", "idle"]}, "nodeState: list each state once; any stands alone"),
        ({"nodeState": ["cycle"]}, "nodeState: cycle goes with a state"),
        ({"disk": [{"path": "/tmp ", "minFreeMib": 1}]}, r"healthCheck.disk\[0\].path: '/tmp ' starts or ends with a space"),
        ({"disk": [{"path": "tmp", "minFreeMib": 1}]}, r"healthCheck.disk\[0\].path: .tmp. is not valid"),
        ({"checks": [{"name": "x", "command": ["a"], "nodesets": ["nope"]}]},
         r"healthCheck.checks\[0\].nodesets\[0\]: 'nope' is not a NodeSet; known: cpu"),
    ],
)  # fmt: skip
def test_health_check_errors_name_the_field(make_spec: MakeSpec, health: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        make_spec(healthCheck=health)


@pytest.mark.parametrize(("release", "cpu_lines"), [("26.05", ["AutoDetect=off"]), ("24.11", [])])
def test_a_node_without_gpus_beside_gpu_nodes_is_not_probed_for_gpus_from_26_05(
    make_spec: MakeSpec, release: str, cpu_lines: list[str]
) -> None:
    """slurmd 26.05 probes every GPU library on a node without GRES lines when GresTypes has gpu
    (two "System GPU detection failed" errors per start, measured); 24.11 does not."""
    cpu = {"name": "cpu", "cpus": 4, "memoryMib": 4096}
    spec = make_spec(
        nodesets=[cpu, gpu_nodeset()],
        partitions=[{"name": "batch", "nodesets": ["cpu", "gpu"], "default": True}],
        slurm={"version": release},
    )
    files = render_slurm_files(spec, [])
    assert files["gres-cpu.conf"].removeprefix(HEADER).splitlines() == cpu_lines
    assert "AutoDetect=off" not in files["gres-gpu.conf"]
    alone = make_spec(slurm={"version": release})  # no GPUs anywhere: GresTypes is unset
    assert render_slurm_files(alone, [])["gres-cpu.conf"] == HEADER
