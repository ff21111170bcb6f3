"""Exact GPU identity on real Slurm: each pod bound for a placeholder job carries the GPU indices
Slurm allocated to that job on its node (GRES with File= devices the harness fakes), and a Slurm
job started beside the pods gets the remaining ones."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sunk.runtime.harness import LocalSlurm, SimNode

from sunk import keys
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

from .conftest import Cluster, StartScheduler
from .test_real_slurm import FILL, job_detail

pytestmark = pytest.mark.slurm

GPUS = 4


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    """acme-dev with one shared gpu node of four GPUs (gres.conf File=/dev/nvidia[0-3])."""
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    gpu = spec.nodeset("gpu")
    four = gpu.model_copy(update={"gpus": gpu.gpus.model_copy(update={"count": GPUS})})  # type: ignore[union-attr]
    spec = spec.model_copy(update={"nodesets": [four if n.name == "gpu" else n for n in spec.nodesets]})
    with LocalSlurm.start(spec, nodes=[SimNode("gpu-0", "gpu")]) as cluster:
        yield cluster


def test_two_pods_and_a_slurm_job_on_one_node_get_disjoint_gpus_as_slurm_allocated(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    start_scheduler()
    k8s.create_pod("two", cpu="2", memory="1Gi", gpus=2, annotations={keys.PARTITION: "gpu"})
    # Sized by the annotation instead of nvidia.com/gpu: Slurm alone counts it (no device plugin).
    k8s.create_pod("one", cpu="2", memory="1Gi", annotations={keys.PARTITION: "gpu", keys.GPUS: "1"})
    bound = {name: k8s.wait_bound(name) for name in ("two", "one")}
    batch = slurm.sbatch(FILL, "-N1", "-wgpu-0", "-pgpu", "-c2", "--mem=1G", f"--gres=gpu:h100:{GPUS - 3}")
    slurm.wait_job(batch, {"RUNNING"})

    indices = {}
    for name, pod in bound.items():
        annotations = pod["metadata"]["annotations"]
        node, _, allocated = job_detail(slurm, int(annotations[keys.JOB_ID]))
        assert node == "gpu-0" and pod["spec"]["nodeName"] == "k8s-gpu-0"
        # The annotation, written with the Binding, is exactly Slurm's allocation for that job.
        indices[name] = {int(i) for i in annotations[keys.GPU_INDICES].split(",")}
        assert indices[name] == allocated
    assert len(indices["two"]) == 2 and len(indices["one"]) == 1 and not indices["two"] & indices["one"]
    # The Slurm job beside them gets the rest.
    _, _, rest = job_detail(slurm, batch)
    assert rest == set(range(GPUS)) - indices["two"] - indices["one"]
    assert k8s.sim.rejections == []
