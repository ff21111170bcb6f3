"""Gangs from JobSets and indexed Jobs on real slurmctld, beside training jobs on one pool, with a
block topology of two blocks of 8 shared GPU nodes (2 GPUs each): each gang placed whole or not at
all, inside one block; a gang that will fit later waits and says what for; a gang Slurm can never
run is refused with its own reason and holds nothing back.

The pods carry what the webhook writes for them: each is put through the webhook's own review
(runtime/webhook/admission.py) with the JobSet or Job as its controller makes it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import jsonpatch
import pytest
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.webhook import gangs
from sunk.runtime.webhook.admission import NamespaceDefaults, pod_patch

from sunk import keys, naming
from sunk.manifests.runtime import gang_topology
from sunk.spec.scheduling import AccountSpec, NamedTopologySpec, TopologySpec
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

from .conftest import Cluster, StartScheduler
from .test_real_slurm import FILL, placeholder_jobs

pytestmark = pytest.mark.slurm

CLIQUE = "nvidia.com/gpu.clique"
BLOCK = 8
BLOCKS = {"nvl-a": [f"gpu-{i}" for i in range(BLOCK)], "nvl-b": [f"gpu-{i}" for i in range(BLOCK, 2 * BLOCK)]}
GANG_SETTINGS = {"SUNK_GANG_TOPOLOGY": "block", "SUNK_GANG_BLOCK_NODES": str(BLOCK)}
"""What sunk renders for this topology (sunk.manifests.runtime.gang_topology; asserted below)."""
NAMESPACE = NamespaceDefaults(account="root", partition="gpu")


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    """acme-dev with its shared gpu NodeSet at 16 nodes in two blocks of 8 (topology/block)."""
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    nodesets = [ns.model_copy(update={"replicas": 2 * BLOCK}) if ns.name == "gpu" else ns for ns in spec.nodesets]
    spec = spec.model_copy(
        update={
            "accounts": [AccountSpec(name="people", users=["games"])],
            "nodesets": nodesets,
            # Slurm 26.05 takes a block topology at start only from topology.yaml (`topologies`).
            "topology": TopologySpec(),
            "topologies": [
                NamedTopologySpec(name="nvl", plugin="block", label_keys=[CLIQUE], block_sizes=[BLOCK], default=True)
            ],
        }
    )
    nodes = [SimNode(name, "gpu", {CLIQUE: block}) for block, names in BLOCKS.items() for name in names]
    nodes += [SimNode(naming.slurm_node_name("cpu", i), "cpu") for i in range(2)]
    with LocalSlurm.start(spec, nodes) as cluster:
        yield cluster


def _webhook_annotations(meta: Mapping[str, Any], owner: Mapping[str, Any], gpus: int) -> dict[str, str]:
    """The annotations the webhook gives a pod its controller creates with `meta`."""
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {"requests": {"cpu": "1"}}
    pod = {
        "metadata": dict(meta),
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "main", "image": "x", "resources": resources}],
        },
    }
    patch = pod_patch(pod, NAMESPACE, "sunk-scheduler", owner)
    assert isinstance(patch, list), patch
    out: dict[str, str] = jsonpatch.apply_patch(pod, patch)["metadata"]["annotations"]
    return out


def _job_labels(job: str, uid: str, index: int) -> dict[str, Any]:
    return {
        "labels": {keys.CONTROLLER_UID: uid, keys.JOB_NAME: job, keys.JOB_COMPLETION_INDEX: str(index)},
        "annotations": {keys.JOB_COMPLETION_INDEX: str(index)},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid, "controller": True}],
    }


def _jobset_pod(index: int, replicated: str, attempt: int = 0) -> dict[str, Any]:
    meta = _job_labels(f"llm-{replicated}-0", f"uid-{replicated}", index)
    js = {gangs.JOBSET_NAME: "llm", gangs.JOBSET_UID: "7a1c", gangs.JOBSET_RESTART: str(attempt)}
    meta["labels"].update(js)
    meta["annotations"].update(js)
    return meta


JOBSET = {
    "kind": "JobSet",
    "metadata": {"name": "llm", "uid": "7a1c"},
    "spec": {
        "replicatedJobs": [
            {"name": "driver", "replicas": 1, "template": {"spec": {"parallelism": 1, "completions": 1}}},
            {"name": "workers", "replicas": 1, "template": {"spec": {"parallelism": 7, "completions": 7}}},
        ]
    },
}
"""A CPU-only driver and 7 GPU workers: one gang of 8."""
INDEXED = {
    "kind": "Job",
    "metadata": {"name": "batch-infer", "uid": "3e9f"},
    "spec": {"completionMode": "Indexed", "parallelism": 6, "completions": 6},
}


def _wait_reason(k8s: Cluster, name: str, reason: str) -> dict[str, Any]:
    def said() -> dict[str, Any] | None:
        c = k8s.condition(name)
        return c if c is not None and c["reason"] == reason else None

    found: dict[str, Any] = k8s.wait_for(f"{name} to say {reason}", said)
    return found


def _nodes(pod: Mapping[str, Any]) -> str:
    annotations: Mapping[str, str] = pod["metadata"]["annotations"]
    return annotations[keys.SLURM_NODE]


def _block_of(nodes: set[str]) -> set[str]:
    return {block for block, names in BLOCKS.items() if nodes & set(names)}


def test_gangs_are_placed_whole_in_one_block_beside_training_or_wait_or_are_refused(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    assert gang_topology(slurm.spec) == ("block", BLOCK)
    shown = slurm.run("scontrol", "show", "topology", check=True).stdout
    assert "BlockName=nvl-a" in shown and "BlockName=nvl-b" in shown, shown
    # Training: 4 nodes of block b, every GPU of them.
    training = slurm.sbatch(FILL, "-p", "gpu", "-N4", "--gres=gpu:2", "-w", "gpu-[8-11]")
    slurm.wait_job(training, {"RUNNING"})
    start_scheduler(**GANG_SETTINGS)

    # The JobSet: driver (no GPU) and 7 workers of 2 GPUs. Only block a has 8 nodes with free GPUs.
    k8s.create_pod("llm-driver-0-0", annotations=_webhook_annotations(_jobset_pod(0, "driver"), JOBSET, 0))
    for i in range(7):
        k8s.create_pod(f"llm-workers-0-{i}", annotations=_webhook_annotations(_jobset_pod(i, "workers"), JOBSET, 2))
    names = ["llm-driver-0-0"] + [f"llm-workers-0-{i}" for i in range(7)]
    pods = [k8s.wait_bound(n) for n in names]
    nodes = {_nodes(p) for p in pods}
    assert len(nodes) == 8 and _block_of(nodes) == {"nvl-a"}
    [job_id] = {p["metadata"]["annotations"][keys.JOB_ID] for p in pods}
    shown = slurm.run("scontrol", "show", "job", "-o", job_id, check=True).stdout
    assert " NumNodes=8 " in shown and "TresPerNode=gres/gpu:2" in shown, shown
    assert keys.GPU_INDICES not in pods[0]["metadata"]["annotations"]  # the driver sees no GPU
    assert all(p["metadata"]["annotations"][keys.GPU_INDICES] == "0,1" for p in pods[1:])

    # The indexed Job of 6 (1 GPU each): block a is full, block b has 4 nodes free. It waits, whole.
    for i in range(6):
        meta = _job_labels("batch-infer", "3e9f", i)
        k8s.create_pod(f"batch-infer-{i}", annotations=_webhook_annotations(meta, INDEXED, 1))
    waiting = _wait_reason(k8s, "batch-infer-0", "GangWaiting")
    assert "the gang waits for 6 nodes free at once in one block" in waiting["message"], waiting
    assert any(e["reason"] == "GangWaiting" for e in k8s.events("batch-infer-0"))
    assert not any((k8s.existing_pod(f"batch-infer-{i}")["spec"].get("nodeName")) for i in range(6))

    # Refused outright, each with its own reason: 9 pods (no block holds 9) and 4 GPUs a pod (no
    # node has 4). Neither holds back the single pod created after them.
    for i in range(9):
        k8s.create_pod(f"huge-{i}", annotations={keys.GROUP: "huge", keys.GROUP_SIZE: "9", keys.PARTITION: "gpu"})
    for i in range(2):
        greedy = {keys.GROUP: "greedy", keys.GROUP_SIZE: "2", keys.GPUS: "4", keys.PARTITION: "gpu"}
        k8s.create_pod(f"greedy-{i}", annotations=greedy)
    k8s.create_pod("after", annotations={keys.PARTITION: "batch"})
    k8s.wait_bound("after")
    for name, said in (("huge-0", "largest block of the topology holds 8"), ("greedy-0", "Slurm rejected")):
        refused = _wait_reason(k8s, name, "GangRefused")
        assert said in refused["message"], refused
        assert any(e["reason"] == "GangRefused" and e["type"] == "Warning" for e in k8s.events(name))
    assert not any(row[0].endswith("/huge") or row[0].endswith("/greedy") for row in placeholder_jobs(slurm).values())

    # Training ends: the indexed Job's gang starts, all 6 together, inside block b.
    slurm.run("scancel", str(training), check=True)
    infer = [k8s.wait_bound(f"batch-infer-{i}") for i in range(6)]
    infer_nodes = {_nodes(p) for p in infer}
    assert len(infer_nodes) == 6 and _block_of(infer_nodes) == {"nvl-b"}
    assert len({p["metadata"]["annotations"][keys.JOB_ID] for p in infer}) == 1
    # No GPU handed to two consumers: the JobSet's and the Job's allocations share no node.
    assert not nodes & infer_nodes
    print(json.dumps({"jobset": sorted(nodes), "indexed": sorted(infer_nodes)}))
