"""Gangs from JobSets, indexed Jobs and LeaderWorkerSets, and a Deployment's burst of single pods, on
real slurmctld, beside training jobs on one pool, with a block topology of two blocks of 8 shared
GPU nodes (2 GPUs each): each gang placed whole or not at all, inside one block; a gang that will
fit later waits and says what for; a gang Slurm can never run is refused with its own reason and
holds nothing back; no CPU or GPU is held by two jobs; sacct charges each team's account.

The pods carry what the webhook writes for them: each is put through the webhook's own review
(runtime/webhook/admission.py) as its controller (JobSet, Job, LeaderWorkerSet, ReplicaSet) makes it."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jsonpatch
import pytest
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.webhook import gangs
from sunk.runtime.webhook.admission import NamespaceDefaults, pod_patch

from sunk import keys, naming
from sunk.hostlist import expand
from sunk.manifests.runtime import gang_topology
from sunk.spec.scheduling import AccountSpec, NamedTopologySpec, TopologySpec
from sunk.stackfile import load_stack
from tests.support import lws
from tests.support.rawclient import as_body, raw
from tests.support.slurmalloc import Allocations, allocations, no_slot_twice
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
            # Training charged to people, the LeaderWorkerSet's team to serving, the Deployment's to
            # research (the runtime's Slurm user gets an association on each).
            "accounts": [
                AccountSpec(name="people", users=["games"]),
                AccountSpec(name="serving"),
                AccountSpec(name="research"),
            ],
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
    """The pod's PodScheduled condition once it says `reason`; fails at once, saying so, if the pod
    was bound instead (that condition is status True with no reason)."""

    def said() -> dict[str, Any] | None:
        c = k8s.condition(name)
        if c is not None and c.get("status") == "True":
            node = k8s.existing_pod(name)["spec"].get("nodeName")
            pytest.fail(f"{name} was bound to {node} while the test waited for it to say {reason}: {c}")
        return c if c is not None and c.get("reason") == reason else None

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


# --- A LeaderWorkerSet group (LeaderReady) and a Deployment's burst, beside training -----------
#
# The pods as LeaderWorkerSet v0.10.0 (kubernetes-sigs/lws, tag v0.10.0, commit 2161f38f) makes them:
# - api/leaderworkerset/v1/leaderworkerset_types.go: SetNameLabelKey (37), GroupIndexLabelKey (41),
#   WorkerIndexLabelKey (45), SizeAnnotationKey (49, gangs.LWS_SIZE), GroupUniqueHashLabelKey (57,
#   gangs.LWS_GROUP_KEY), LeaderPodNameAnnotationKey (60), LeaderReadyStartupPolicy (357).
# - The leader StatefulSet (named after the LeaderWorkerSet; group i's leader is `<lws>-<i>`): its
#   template carries worker-index "0", the set's name and the size annotation
#   (pkg/controllers/leaderworkerset_controller.go:793-799).
# - LWS's own pod webhook, on the leader: group-index from the ordinal (pkg/webhooks/pod_webhook.go:108)
#   and the group key, the sha1 hex of "<namespace>/<leader pod>" (117-118; genGroupUniqueKey 180-181,
#   pkg/utils/utils.go:39); on a worker, worker-index from its ordinal (141). kube-apiserver calls
#   mutating webhook configurations in name order (apiserver's mutating_webhook_manager.go sorts them
#   ByName): LWS's, `lws-mutating-webhook-configuration` (charts/lws/templates/webhook/webhook.yaml:4,
#   config/default namePrefix `lws-`), comes before sunk's `sunk-<namespace>-<cluster>-webhook`.
#   Here the leader is put through sunk's webhook first, without its key, and then LWS's: the
#   order sunk must not depend on (runtime/webhook/gangs.py computes the key as LWS does).
# - The pod controller: under LeaderReady it creates no worker StatefulSet until the leader pod is
#   Ready (pkg/controllers/pod_controller.go:143); that StatefulSet is named after the leader, runs
#   size-1 replicas with ordinals from 1 (438-444), and its template carries the leader's
#   group-index and group-key labels (405-410) and the size and leader-name annotations (416-417).
# A Deployment's pods (Kubernetes v1.36.3) come from its ReplicaSet `<deployment>-<pod-template-hash>`,
# named `<replicaset>-<5 random>`, with the `pod-template-hash` label (apps/v1
# DefaultDeploymentUniqueLabelKey) and the ReplicaSet as controller ownerReference: nothing sunk reads
# as a gang.

LWS = "llm"
LWS_SIZE = 4
SERVING = NamespaceDefaults(account="serving", partition="gpu")
RESEARCH = NamespaceDefaults(account="research", partition="gpu")
BURST = 50
REPLICASET = "router-6d5f7c9b8"


def _admitted(meta: dict[str, Any], defaults: NamespaceDefaults, gpus: int, cpu: str) -> dict[str, Any]:
    """The pod as the API server stores it: created by its controller with `meta`, mutated by
    sunk's webhook (runtime/webhook/admission.py)."""
    resources = {"requests": {"cpu": cpu, "memory": "2Gi"}, "limits": {"nvidia.com/gpu": str(gpus)}}
    pod = {
        "metadata": {**meta, "namespace": "ml"},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "main", "image": "vllm", "resources": resources}],
        },
    }
    patch = pod_patch(pod, defaults, "sunk-scheduler")
    assert isinstance(patch, list), patch
    out: dict[str, Any] = jsonpatch.apply_patch(pod, patch)
    return out


def _lws_leader(group: int) -> dict[str, Any]:
    """The leader as its StatefulSet creates it, before any webhook."""
    labels = {gangs.LWS_WORKER_INDEX: "0", gangs.LWS_SET_NAME: LWS}
    return {"name": f"{LWS}-{group}", "labels": labels, "annotations": {gangs.LWS_SIZE: str(LWS_SIZE)}}


def _lws_webhook(pod: dict[str, Any]) -> dict[str, Any]:
    """LWS's pod webhook on a leader: group-index from its ordinal, and its group key where absent."""
    meta = pod["metadata"]
    meta["labels"].setdefault(lws.GROUP_INDEX, meta["name"].rsplit("-", 1)[1])
    meta["labels"].setdefault(
        gangs.LWS_GROUP_KEY, hashlib.sha1(f"{meta['namespace']}/{meta['name']}".encode()).hexdigest()
    )
    return pod


def _lws_worker(leader: Mapping[str, Any], index: int) -> dict[str, Any]:
    copied = {k: leader["labels"][k] for k in (gangs.LWS_SET_NAME, lws.GROUP_INDEX, gangs.LWS_GROUP_KEY)}
    return {
        "name": f"{leader['name']}-{index}",
        "labels": {**copied, gangs.LWS_WORKER_INDEX: str(index)},
        "annotations": {gangs.LWS_SIZE: str(LWS_SIZE), lws.LEADER_NAME: leader["name"]},
    }


def _burst_pod(i: int) -> dict[str, Any]:
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": REPLICASET, "uid": "5b1e", "controller": True}
    labels = {"app": "router", "pod-template-hash": REPLICASET.rsplit("-", 1)[1]}
    return {"name": f"{REPLICASET}-{i:05x}", "labels": labels, "ownerReferences": [owner]}


def _training(slurm: LocalSlurm, *args: str) -> int:
    """A training job of the `people` account, submitted by its user."""
    argv = ["sbatch", "--parsable", "-A", "people", "-p", "gpu", "-o", "/dev/null", *args]
    done = slurm.jail.run(argv, input=FILL, user="games:games")
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().split(";")[0])


def _allocations(slurm: LocalSlurm) -> Allocations:
    """Every running job's CPU ids and GPU indices on each of its nodes."""
    return allocations(slurm.run("scontrol", "show", "job", "-d", check=True).stdout)


def test_a_leaderworkerset_group_and_a_deployments_burst_beside_training(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    """Issue 35 on real slurmctld: a LeaderWorkerSet group of 4 (LeaderReady, 2 GPUs a pod) and a
    Deployment scaled from 0 to 50 (1 GPU a pod), beside training, on the 16 shared nodes (32 GPUs)
    in two blocks. The group is allocated whole from its declared size when its leader, its only
    pod, appears: while no block has 4 nodes with free GPUs the leader waits (GangWaiting) and is
    not bound; once one has, its job holds 4 nodes of that block and the workers, created only
    once the leader is Ready, are bound to the 3 others as they come. The burst takes the GPUs left,
    the rest of it waits in Slurm's queue and starts as training ends. No CPU or GPU is ever held by
    two jobs, each pod's GPU indices are its job's, and sacct charges each team's account."""
    t1 = _training(slurm, "-N5", "--gres=gpu:2", "-w", "gpu-[0-4]")
    t2 = _training(slurm, "-N5", "--gres=gpu:2", "-w", "gpu-[8-12]")
    for job in (t1, t2):
        slurm.wait_job(job, {"RUNNING"})
    start_scheduler(**GANG_SETTINGS)

    # The leader alone: 6 nodes have free GPUs, but 3 in each block. The gang waits, whole.
    # sunk's webhook reviews it before LWS's has given it its group key; its gang is still the group's.
    admitted = _lws_webhook(_admitted(_lws_leader(0), SERVING, 2, "4"))
    leader = admitted["metadata"]
    assert leader["annotations"][keys.GROUP] == f"lws-{leader['labels'][gangs.LWS_GROUP_KEY]}"
    k8s.api.create_namespaced_pod("ml", as_body(admitted), _preload_content=False)
    waiting = _wait_reason(k8s, leader["name"], "GangWaiting")
    assert "the gang waits for 4 nodes free at once in one block" in waiting["message"], waiting
    assert not k8s.existing_pod(leader["name"])["spec"].get("nodeName")
    [(gang, state, _)] = [r for r in placeholder_jobs(slurm).values() if "/lws-" in r[0]]
    assert state == "PENDING", gang

    # Training in block b ends: the leader's job gets 4 nodes of block b, before any worker exists.
    slurm.run("scancel", str(t2), check=True)
    bound = k8s.wait_bound(leader["name"])["metadata"]["annotations"]
    job_id = bound[keys.JOB_ID]
    shown = slurm.run("scontrol", "show", "job", "-o", job_id, check=True).stdout
    assert "JobState=RUNNING" in shown and " NumNodes=4 " in shown and "Account=serving" in shown, shown
    group_nodes = set(expand(re.search(r" NodeList=(\S+)", shown).group(1)))  # type: ignore[union-attr]
    assert _block_of(group_nodes) == {"nvl-b"} and bound[keys.SLURM_NODE] in group_nodes
    assert bound[keys.GPU_INDICES] == "0,1"
    # The kubelet reports the leader Ready; under LeaderReady the workers are created only now.
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    k8s.api.patch_namespaced_pod_status(leader["name"], "ml", as_body({"status": ready}), _preload_content=False)
    for i in range(1, LWS_SIZE):
        worker = _admitted(_lws_worker(leader, i), SERVING, 2, "4")
        k8s.api.create_namespaced_pod("ml", as_body(worker), _preload_content=False)
    members = [k8s.wait_bound(f"{leader['name']}-{i}")["metadata"]["annotations"] for i in range(1, LWS_SIZE)]
    assert {m[keys.JOB_ID] for m in members} == {job_id}
    assert {m[keys.SLURM_NODE] for m in [bound, *members]} == group_nodes
    assert all(m[keys.GPU_INDICES] == "0,1" for m in members)

    # The Deployment scaled from 0 to 50: 14 GPUs are free (gpu-5..7 and 4 nodes of block b).
    for i in range(BURST):
        pod = _admitted(_burst_pod(i), RESEARCH, 1, "1")
        assert gangs.LWS_GROUP_KEY not in pod["metadata"]["labels"] and keys.GROUP not in pod["metadata"]["annotations"]
        k8s.api.create_namespaced_pod("ml", as_body(pod), _preload_content=False)

    def burst_bound(count: int) -> Callable[[], list[dict[str, Any]] | None]:
        """The burst's bound pods, once exactly `count` are bound and the rest wait on their jobs."""

        def check() -> list[dict[str, Any]] | None:
            listed = raw(k8s.api.list_namespaced_pod("ml", _preload_content=False))["items"]
            pods = [p for p in listed if p["metadata"]["name"].startswith(REPLICASET)]
            done = [p for p in pods if p["spec"].get("nodeName")]
            scheduled = [
                c for p in pods for c in p.get("status", {}).get("conditions") or [] if c["type"] == "PodScheduled"
            ]
            waiting = [c for c in scheduled if c.get("reason") == "SlurmJobPending"]
            return done if len(done) == count and len(waiting) == BURST - count else None

        return check

    first = k8s.wait_for("14 of the burst bound, 36 pending in Slurm", burst_bound(14))
    assert no_slot_twice(_allocations(slurm)) == 10 + 2 * LWS_SIZE + 14
    # Training in block a ends: 10 more of the burst start; every GPU of the pool is held once.
    slurm.run("scancel", str(t1), check=True)
    burst = k8s.wait_for("24 of the burst bound, 26 pending", burst_bound(24))
    assert {p["metadata"]["name"] for p in first} <= {p["metadata"]["name"] for p in burst}
    alloc = _allocations(slurm)
    assert no_slot_twice(alloc) == 2 * LWS_SIZE + 24 == 2 * 2 * BLOCK  # every GPU of the pool
    for pod in burst:
        a = pod["metadata"]["annotations"]
        [held] = alloc[int(a[keys.JOB_ID])].values()
        assert a[keys.GPU_INDICES] == ",".join(map(str, sorted(held[1]))) and len(held[1]) == 1, (a, held)
    assert k8s.sim.rejections == []

    # Charged to each team: training to people, the group to serving, the burst to research.
    burst_jobs = {int(p["metadata"]["annotations"][keys.JOB_ID]) for p in burst}
    assert len(burst_jobs) == 24
    wanted = {t1: "people", t2: "people", int(job_id): "serving", **dict.fromkeys(burst_jobs, "research")}
    ids_arg = ",".join(map(str, wanted))

    def charged() -> dict[int, tuple[str, str]] | None:
        out = slurm.run("sacct", "-X", "-n", "-P", "-a", "-o", "JobID,Account,AllocTRES", "-j", ids_arg).stdout
        rows = {int(r.split("|")[0]): (r.split("|")[1], r.split("|")[2]) for r in out.splitlines() if r}
        return rows if set(rows) == set(wanted) else None

    rows = k8s.wait_for("sacct to hold every job", charged)
    assert {j: rows[j][0] for j in wanted} == wanted
    assert "gres/gpu=8" in rows[int(job_id)][1] and "node=4" in rows[int(job_id)][1], rows[int(job_id)]
    assert all("gres/gpu=1" in rows[j][1] for j in burst_jobs)
    print(json.dumps({"lws": sorted(group_nodes), "burst_bound": len(burst), "gpus_held": 2 * LWS_SIZE + 24}))
