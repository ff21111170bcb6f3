"""Gangs from indexed Jobs, JobSets and LeaderWorkerSets, through the webhook's review: pods and owners built as the
controllers build them, from the projects' own constants (runtime/webhook/gangs.py cites each:
Kubernetes v1.36.3's batch/v1 types and Job controller, JobSet v0.12.0's API and controller, LeaderWorkerSet v0.10.0's API, controllers and pod webhook)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import jsonpatch
from sunk.runtime.webhook import gangs
from sunk.runtime.webhook.admission import NamespaceDefaults, Refusal, owner_wanted, review
from sunk.runtime.webhook.owners import NotCreatedYet, read_owner

from sunk import keys

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "admission" / "vllm-pod-create.json"
NAMESPACES = {"team-vision": NamespaceDefaults(account="vision")}
JOB_UID = "0f4c8a52-5b1e-4c59-9d1f-1f3a8b6c2d10"
JOBSET_UID = "6d1e2f3a-7b8c-4d9e-a0b1-c2d3e4f5a6b7"
PODGROUP_UID = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"


def _body(meta: dict[str, Any], *, gpus: int = 1) -> dict[str, Any]:
    """A pod create review whose pod carries `meta` (labels, annotations, ownerReferences)."""
    body: dict[str, Any] = json.loads(FIXTURE.read_text())
    pod = body["request"]["object"]
    pod["metadata"] = {**copy.deepcopy(meta), "namespace": "team-vision"}
    container = pod["spec"]["containers"][0]
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}
    else:
        container["resources"] = {"requests": {"cpu": "1"}}
    return body


def _indexed_pod(job: str, index: int, uid: str = JOB_UID) -> dict[str, Any]:
    """What the Job controller stamps on an Indexed Job's pod (job_controller.go:1942-1945)."""
    return {
        "generateName": f"{job}-{index}-",
        "labels": {
            keys.CONTROLLER_UID: uid,
            keys.JOB_NAME: job,
            "controller-uid": uid,
            "job-name": job,
            keys.JOB_COMPLETION_INDEX: str(index),
        },
        "annotations": {keys.JOB_COMPLETION_INDEX: str(index)},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid, "controller": True}],
    }


def _job(name: str, *, parallelism: int, completions: int | None, mode: str = "Indexed") -> dict[str, Any]:
    spec: dict[str, Any] = {"parallelism": parallelism, "completionMode": mode}
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "uid": JOB_UID}, "spec": spec}


def _jobset_pod(jobset: str, replicated: str, job_index: int, pod_index: int, attempt: int) -> dict[str, Any]:
    """A JobSet child Job's pod: the JobSet labels and annotations (labelAndAnnotateObject, v0.12.0
    jobset_controller.go:1014) on top of the Indexed Job's own."""
    job = f"{jobset}-{replicated}-{job_index}"
    meta = _indexed_pod(job, pod_index, uid=f"job-uid-{job_index}")
    js = {
        gangs.JOBSET_NAME: jobset,
        gangs.JOBSET_UID: JOBSET_UID,
        "jobset.sigs.k8s.io/replicatedjob-name": replicated,
        gangs.JOBSET_RESTART: str(attempt),
        "jobset.sigs.k8s.io/job-index": str(job_index),
    }
    meta["labels"].update(js)
    meta["annotations"].update(js)
    return meta


def _template(gpus: int) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {"requests": {"cpu": "1"}}
    return {"spec": {"containers": [{"name": "main", "image": "x", "resources": resources}]}}


def _jobset(name: str, replicated: list[tuple[str, int, int, int]], **spec: Any) -> dict[str, Any]:
    """replicated: (name, replicas, parallelism, GPUs per pod)."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "uid": JOBSET_UID},
        "spec": {
            **spec,
            "replicatedJobs": [
                {
                    "name": r,
                    "replicas": replicas,
                    "template": {"spec": {"parallelism": par, "completions": par, "template": _template(gpus)}},
                }
                for r, replicas, par, gpus in replicated
            ],
        },
    }


def _annotations(body: dict[str, Any], owner: Any) -> dict[str, str]:
    out = review(body, NAMESPACES, "sunk-scheduler", owner)["response"]
    assert out["allowed"] is True, out
    pod = jsonpatch.apply_patch(body["request"]["object"], json.loads(base64.b64decode(out["patch"])))
    annotations: dict[str, str] = pod["metadata"]["annotations"]
    return annotations


def _refusal(body: dict[str, Any], owner: Any) -> str:
    out = review(body, NAMESPACES, "sunk-scheduler", owner)["response"]
    assert out["allowed"] is False, out
    message: str = out["status"]["message"]
    return message


def test_an_indexed_job_with_every_index_at_once_is_one_gang_sized_by_its_completions() -> None:
    body = _body(_indexed_pod("train", 3))
    assert owner_wanted(body, NAMESPACES) == ("team-vision", gangs.Owner("Job", "train"))
    got = _annotations(body, _job("train", parallelism=6, completions=6))
    assert got[keys.GROUP] == "job-" + JOB_UID.replace("-", "")
    assert got[keys.GROUP_SIZE] == "6"
    assert keys.GROUP_START not in got  # all pods are created at once: the group waits for all
    assert got[keys.GPUS] == "1"


def test_other_jobs_are_placed_pod_by_pod() -> None:
    body = _body(_indexed_pod("sweep", 0))
    for job in (
        _job("sweep", parallelism=2, completions=10),  # indexes run in waves: no gang
        _job("sweep", parallelism=4, completions=None, mode="NonIndexed"),
        _job("sweep", parallelism=1, completions=1),
    ):
        assert keys.GROUP not in _annotations(body, job)
    assert keys.GROUP not in _annotations(body, None)  # the Job is already gone
    plain = _body(
        {"labels": {"app": "x"}, "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]}
    )
    assert owner_wanted(plain, NAMESPACES) is None


def test_a_job_created_again_under_the_same_name_is_not_the_pods_owner() -> None:
    job = _job("train", parallelism=2, completions=2)
    job["metadata"]["uid"] = "11111111-2222-3333-4444-555555555555"
    assert "it was replaced" in _refusal(_body(_indexed_pod("train", 0)), job)


def test_a_jobset_attempt_is_one_gang_of_all_its_replicated_jobs_pods() -> None:
    """A CPU-only driver beside 2 worker Jobs of 4 pods: 1 + 8 = 9 pods, one gang per attempt."""
    jobset = _jobset("llm", [("driver", 1, 1, 0), ("workers", 2, 4, 8)])
    body = _body(_jobset_pod("llm", "workers", 1, 2, attempt=0), gpus=8)
    assert owner_wanted(body, NAMESPACES) == ("team-vision", gangs.Owner("JobSet", "llm"))
    got = _annotations(body, jobset)
    assert got[keys.GROUP] == f"js-{JOBSET_UID.replace('-', '')}-0"
    assert got[keys.GROUP_SIZE] == "9"
    assert keys.GROUP_START not in got
    driver = _annotations(_body(_jobset_pod("llm", "driver", 0, 0, attempt=0), gpus=0), jobset)
    assert driver[keys.GROUP] == got[keys.GROUP] and keys.GPUS not in driver  # no GPUs for the driver


def test_pods_of_an_older_attempt_never_join_the_new_gang() -> None:
    jobset = _jobset("llm", [("workers", 2, 4, 8)])
    old = _annotations(_body(_jobset_pod("llm", "workers", 0, 0, attempt=1)), jobset)
    new = _annotations(_body(_jobset_pod("llm", "workers", 0, 0, attempt=2)), jobset)
    assert old[keys.GROUP].endswith("-1") and new[keys.GROUP].endswith("-2")
    assert old[keys.GROUP] != new[keys.GROUP]
    assert old[keys.GROUP_SIZE] == new[keys.GROUP_SIZE] == "8"


def test_exclusive_placement_leaves_the_gang_the_whole_attempt() -> None:
    jobset = _jobset("llm", [("workers", 2, 4, 8)])
    jobset["metadata"]["annotations"] = {gangs.JOBSET_EXCLUSIVE: "topology.acme.example/leaf"}
    meta = _jobset_pod("llm", "workers", 0, 0, attempt=0)
    meta["annotations"][gangs.JOBSET_EXCLUSIVE] = "topology.acme.example/leaf"
    assert _annotations(_body(meta), jobset)[keys.GROUP_SIZE] == "8"


def test_a_jobset_that_starts_in_order_is_allocated_at_its_first_pod_if_its_shapes_agree() -> None:
    same = _jobset("llm", [("leader", 1, 1, 8), ("workers", 1, 3, 8)], startupPolicy={"startupPolicyOrder": "InOrder"})
    got = _annotations(_body(_jobset_pod("llm", "leader", 0, 0, attempt=0), gpus=8), same)
    assert got[keys.GROUP_START] == "first-member" and got[keys.GROUP_SIZE] == "4"
    mixed = _jobset("llm", [("driver", 1, 1, 0), ("workers", 1, 3, 8)], startupPolicy={"startupPolicyOrder": "InOrder"})
    message = _refusal(_body(_jobset_pod("llm", "driver", 0, 0, attempt=0), gpus=0), mixed)
    assert "starts its replicated Jobs in order" in message and "driver: 0, workers: 8" in message
    depends = copy.deepcopy(mixed)
    del depends["spec"]["startupPolicy"]
    depends["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "driver", "status": "Ready"}]
    assert "in order" in _refusal(_body(_jobset_pod("llm", "driver", 0, 0, attempt=0), gpus=0), depends)


def test_an_owner_that_cannot_be_read_refuses_the_pod_for_its_controller_to_retry() -> None:
    class Broken:
        def read(self, namespace: str, owner: gangs.Owner) -> None:
            raise TimeoutError("read timed out")

    owner = read_owner(Broken(), "team-vision", gangs.Owner("JobSet", "llm"))
    assert isinstance(owner, Refusal)
    message = _refusal(_body(_jobset_pod("llm", "workers", 0, 0, attempt=0)), owner)
    assert "could not read JobSet llm to size its gang (TimeoutError)" in message


def test_a_pods_own_group_wins_and_needs_no_read() -> None:
    meta = _indexed_pod("train", 0)
    meta["annotations"][keys.GROUP] = "mine"
    assert owner_wanted(_body(meta), NAMESPACES) is None


# --- LeaderWorkerSet v0.10.0 (kubernetes-sigs/lws, tag v0.10.0, commit 2161f38f) ---------------
# The leader as the leader StatefulSet creates it, before any webhook: named `<lws>-<group>`, its
# template labelled with worker-index "0", the set's name and revision, and annotated with the size
# (pkg/controllers/leaderworkerset_controller.go:793-799; the keys in
# api/leaderworkerset/v1/leaderworkerset_types.go: SetNameLabelKey 37, WorkerIndexLabelKey 45,
# SizeAnnotationKey 49, GroupUniqueHashLabelKey 57, LeaderPodNameAnnotationKey 60, RevisionKey 63). LWS's pod webhook
# then adds group-index (pod_webhook.go:108) and, where absent, the group key (116-118): sha1 hex of
# "<namespace>/<pod name>" (180-181, pkg/utils/utils.go:39-42). A worker's StatefulSet template
# carries the leader's group-key label and the size and leader-name annotations
# (pkg/controllers/pod_controller.go:405-417).

LWS_KEY_LLM_0 = "d3d9c97a19366ea0aa264ade045965ccf53d2d97"
"""`printf 'team-vision/llm-0' | sha1sum`: the key LWS's webhook gives leader llm-0 in team-vision."""
LWS_REVISION = "leaderworkerset.sigs.k8s.io/template-revision-hash"


def _lws_leader(group: int, *, key: str | None = None) -> dict[str, Any]:
    """Leader `llm-<group>` of a group of 4; `key`: the group-key label LWS's webhook already wrote."""
    labels = {gangs.LWS_WORKER_INDEX: "0", gangs.LWS_SET_NAME: "llm", LWS_REVISION: "5c8d7f9b6"}
    if key is not None:
        labels |= {"leaderworkerset.sigs.k8s.io/group-index": str(group), gangs.LWS_GROUP_KEY: key}
    return {"name": f"llm-{group}", "labels": labels, "annotations": {gangs.LWS_SIZE: "4"}}


def _lws_worker(group: int, index: int, key: str) -> dict[str, Any]:
    labels = {
        gangs.LWS_SET_NAME: "llm",
        "leaderworkerset.sigs.k8s.io/group-index": str(group),
        gangs.LWS_GROUP_KEY: key,
    }
    annotations = {gangs.LWS_SIZE: "4", "leaderworkerset.sigs.k8s.io/leader-name": f"llm-{group}"}
    return {"name": f"llm-{group}-{index}", "labels": labels, "annotations": annotations}


def test_a_leader_reviewed_before_lws_gives_it_its_key_joins_its_workers_gang() -> None:
    """Whichever mutating webhook runs first, the leader's gang is its workers'."""
    first = _annotations(_body(_lws_leader(0)), None)  # sunk's webhook before LWS's
    after = _annotations(_body(_lws_leader(0, key=LWS_KEY_LLM_0)), None)  # after LWS's
    worker = _annotations(_body(_lws_worker(0, 1, LWS_KEY_LLM_0)), None)
    gang = {keys.GROUP: f"lws-{LWS_KEY_LLM_0}", keys.GROUP_SIZE: "4", keys.GROUP_START: gangs.FIRST_MEMBER}
    for got in (first, after, worker):
        assert {k: got.get(k) for k in gang} == gang, got
    # Another group's leader is another gang; no owner is read for either.
    assert _annotations(_body(_lws_leader(1)), None)[keys.GROUP] != gang[keys.GROUP]
    assert owner_wanted(_body(_lws_leader(0)), NAMESPACES) is None


def test_a_group_key_the_pod_carries_is_never_recomputed() -> None:
    """A key already on the pod is the group's, even one sunk would not compute (LWS keeps a label
    it finds, pod_webhook.go:119-120, and the workers copy the leader's)."""
    other = "0123456789abcdef0123456789abcdef01234567"
    assert _annotations(_body(_lws_leader(0, key=other)), None)[keys.GROUP] == f"lws-{other}"


def test_only_a_named_lws_leader_gets_a_computed_key() -> None:
    """Not a leader to LWS: no set-name label, a worker (its key comes from its template, never
    computed), or no pod name to hash. Such a pod without a key is placed alone, as before."""
    no_set = _lws_leader(0)
    del no_set["labels"][gangs.LWS_SET_NAME]
    worker = _lws_worker(0, 2, "")
    del worker["labels"][gangs.LWS_GROUP_KEY]
    worker["labels"][gangs.LWS_WORKER_INDEX] = "2"
    unnamed = _lws_leader(0)
    unnamed["generateName"] = unnamed.pop("name") + "-"
    for meta in (no_set, worker, unnamed):
        assert gangs.lws_group_key({**meta, "namespace": "team-vision"}) == ""
        assert keys.GROUP not in _annotations(_body(meta), None)
    assert gangs.lws_group_key({**_lws_leader(0), "namespace": "team-vision"}) == LWS_KEY_LLM_0


def _grouped(meta: dict[str, Any], podgroup: str, *, gpus: int = 1) -> dict[str, Any]:
    """A pod create review whose pod names `podgroup` in spec.schedulingGroup.podGroupName
    (k8s.io/api v0.36.3 core/v1/types.go:4499, 4647)."""
    body = _body(meta, gpus=gpus)
    body["request"]["object"]["spec"]["schedulingGroup"] = {"podGroupName": podgroup}
    return body


def _podgroup(name: str, policy: dict[str, Any]) -> dict[str, Any]:
    """A PodGroup as the API server returns it (scheduling/v1alpha2/types.go: PodGroup 325,
    PodGroupSpec.SchedulingPolicy 374, PodGroupTemplateRef 366, WorkloadPodGroupTemplateReference 561-574)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "team-vision", "uid": PODGROUP_UID},
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": "llm", "podGroupTemplateName": "workers"}},
            "schedulingPolicy": policy,
        },
    }


def test_a_pod_group_with_a_gang_policy_is_one_gang_of_its_min_count() -> None:
    """GangSchedulingPolicy.MinCount (types.go:247): the group waits for that many pods."""
    body = _grouped({"generateName": "llm-workers-", "labels": {"app": "llm"}}, "llm-workers-0")
    assert owner_wanted(body, NAMESPACES) == ("team-vision", gangs.Owner("PodGroup", "llm-workers-0"))
    got = _annotations(body, _podgroup("llm-workers-0", {"gang": {"minCount": 4}}))
    assert got[keys.GROUP] == "pg-" + PODGROUP_UID.replace("-", "")
    assert got[keys.GROUP_SIZE] == "4"
    assert keys.GROUP_START not in got and got[keys.GPUS] == "1"


def test_a_basic_pod_group_or_one_of_one_is_placed_pod_by_pod() -> None:
    """BasicSchedulingPolicy (types.go:218, 231): standard scheduling, no all-or-nothing."""
    body = _grouped({"generateName": "web-"}, "web")
    policies: list[dict[str, Any]] = [{"basic": {}}, {"gang": {"minCount": 1}}]
    for policy in policies:
        assert keys.GROUP not in _annotations(body, _podgroup("web", policy))
    assert keys.GROUP not in _annotations(body, None)  # the API is not served: placed alone


def test_a_pod_group_wins_over_the_controllers_labels_and_loses_to_the_pods_own_group() -> None:
    """An indexed Job's pod that names a PodGroup (a 1.36 Job controller with the gate on) is sized
    by the PodGroup, not the Job; a pod's own slurm.sunk.dev/group is read from the pod alone."""
    body = _grouped(_indexed_pod("train", 0), "train-pg")
    assert owner_wanted(body, NAMESPACES) == ("team-vision", gangs.Owner("PodGroup", "train-pg"))
    assert _annotations(body, _podgroup("train-pg", {"gang": {"minCount": 3}}))[keys.GROUP_SIZE] == "3"
    own = _grouped({"annotations": {keys.GROUP: "mine", keys.GROUP_SIZE: "2"}}, "train-pg")
    assert owner_wanted(own, NAMESPACES) is None


def test_a_pod_group_not_created_yet_refuses_the_pod_for_its_controller_to_retry() -> None:
    """The API lets a pod name a group that does not exist yet (core/v1/types.go:4492-4493); placed
    alone, it would split the gang."""

    class NotYet:
        def read(self, namespace: str, owner: gangs.Owner) -> None:
            raise NotCreatedYet(f"PodGroup {namespace}/{owner.name} not found")

    owner = read_owner(NotYet(), "team-vision", gangs.Owner("PodGroup", "llm-workers-0"))
    assert isinstance(owner, Refusal)
    message = _refusal(_grouped({"generateName": "llm-"}, "llm-workers-0"), owner)
    assert "could not read PodGroup llm-workers-0 to size its gang (NotCreatedYet)" in message


# LeaderWorkerSet subgroups (v0.10.0): with subGroupPolicy {subGroupSize: 2} on a group of 4, both
# templates carry subgroup-size and subgroup-policy-type (leaderworkerset_controller.go:803-805,
# pod_controller.go:421-425); LWS's pod webhook labels the leader subgroup "0" and each worker
# index // 2 (pod_webhook.go:127-131, 143-152, getSubGroupIndex 249-255: 3 % 2 != 0), with the
# subgroup key sha1 of "<leader name>/<subgroup index>" (genGroupUniqueKey 180-181). Keys:
# api/leaderworkerset/v1/leaderworkerset_types.go:33, 79, 83, 86, 90.
LWS_SUBGROUP_INDEX = "leaderworkerset.sigs.k8s.io/subgroup-index"
LWS_SUBGROUP_KEY = "leaderworkerset.sigs.k8s.io/subgroup-key"
LWS_SUBGROUP_SIZE = "leaderworkerset.sigs.k8s.io/subgroup-size"
LWS_SUBGROUP_POLICY = "leaderworkerset.sigs.k8s.io/subgroup-policy-type"


def _in_subgroup(meta: dict[str, Any], index: int) -> dict[str, Any]:
    subgroup = str(index // 2)
    key = hashlib.sha1(f"llm-0/{subgroup}".encode(), usedforsecurity=False).hexdigest()
    meta["labels"] |= {LWS_SUBGROUP_INDEX: subgroup, LWS_SUBGROUP_KEY: key}
    meta["annotations"] |= {LWS_SUBGROUP_SIZE: "2", LWS_SUBGROUP_POLICY: "LeaderWorker"}
    return meta


def test_subgroups_of_a_leaderworkerset_group_are_one_gang() -> None:
    """The group's 4 pods in 2 subgroups: one sunk group of 4, as without subgroups."""
    pods = [_in_subgroup(_lws_leader(0, key=LWS_KEY_LLM_0), 0)] + [
        _in_subgroup(_lws_worker(0, i, LWS_KEY_LLM_0), i) for i in (1, 2, 3)
    ]
    assert len({p["labels"][LWS_SUBGROUP_KEY] for p in pods}) == 2
    gang = {keys.GROUP: f"lws-{LWS_KEY_LLM_0}", keys.GROUP_SIZE: "4", keys.GROUP_START: gangs.FIRST_MEMBER}
    for meta in pods:
        got = _annotations(_body(meta), None)
        assert {k: got.get(k) for k in gang} == gang, got


def test_subgroup_exclusive_topology_is_refused_naming_the_annotation() -> None:
    """Each subgroup alone in its own domain can't be one Slurm job in one block: every pod of the
    group is refused (the annotation is on both templates), so no part of it is placed."""
    for meta in (_lws_leader(0, key=LWS_KEY_LLM_0), _lws_worker(0, 2, LWS_KEY_LLM_0)):
        meta = _in_subgroup(meta, 0)
        meta["annotations"][gangs.LWS_SUBGROUP_EXCLUSIVE] = "cloud.google.com/gke-nodepool"
        message = _refusal(_body(meta), None)
        assert f"metadata.annotations[{gangs.LWS_SUBGROUP_EXCLUSIVE}]" in message
        assert "'cloud.google.com/gke-nodepool': each subgroup alone in its own topology domain" in message
