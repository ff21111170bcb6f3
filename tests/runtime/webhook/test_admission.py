"""The webhook's admission logic over AdmissionReview v1 JSON as kube-apiserver sends it (a
ReplicaSet's pod, already defaulted: schedulerName default-scheduler, requests = limits for GPUs),
each patch applied with a JSONPatch library to check the pod that results."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from sunk.runtime.webhook.admission import NamespaceDefaults, parse_namespaces, review

from sunk import keys

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "admission" / "vllm-pod-create.json"
NAMESPACES = {
    "team-vision": NamespaceDefaults(account="vision", partition="serve", qos="inference"),
    "team-speech": NamespaceDefaults(account="speech"),
}
SCHEDULER = "sunk-scheduler"


def _review() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def _pod(body: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = body["request"]["object"]
    return pod


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    out = review(body, NAMESPACES, SCHEDULER)
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == body["request"]["uid"]
    response: dict[str, Any] = out["response"]
    return response


def _patched(body: dict[str, Any]) -> dict[str, Any]:
    response = _answer(body)
    assert response["allowed"] is True, response
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    result: dict[str, Any] = jsonpatch.apply_patch(_pod(body), patch)
    return result


def _refused(body: dict[str, Any]) -> str:
    response = _answer(body)
    assert response["allowed"] is False, response
    assert response["status"]["code"] == 422
    assert "patch" not in response
    message: str = response["status"]["message"]
    return message


def test_a_gpu_pod_goes_to_sunk_with_slurm_gpus() -> None:
    pod = _patched(_review())
    spec, annotations = pod["spec"], pod["metadata"]["annotations"]
    assert spec["schedulerName"] == SCHEDULER
    assert annotations == {
        keys.ACCOUNT: "vision",
        keys.PARTITION: "serve",
        keys.QOS: "inference",
        keys.GPUS: "2",
    }
    vllm, proxy = spec["containers"]
    # The device plugin never sees a GPU request: Slurm alone hands them out.
    assert vllm["resources"] == {
        "limits": {"cpu": "8", "memory": "64Gi"},
        "requests": {"cpu": "4", "memory": "32Gi"},
    }
    assert vllm["env"] == [
        {"name": "HF_HOME", "value": "/cache"},
        {
            "name": "NVIDIA_VISIBLE_DEVICES",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{keys.GPU_INDICES}']"}},
        },
    ]
    # The CPU-only container sees no GPU, whatever its image's environment says.
    assert proxy["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert proxy["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"}}


def test_a_cpu_pod_gets_the_account_and_no_gpu() -> None:
    body = _review()
    body["request"]["namespace"] = "team-speech"
    vllm = _pod(body)["spec"]["containers"][0]
    for part in ("limits", "requests"):
        del vllm["resources"][part]["nvidia.com/gpu"]
    pod = _patched(body)
    assert pod["metadata"]["annotations"] == {keys.ACCOUNT: "speech"}
    assert [c["env"][-1] for c in pod["spec"]["containers"]] == [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
    ] * 2


def test_the_pods_own_partition_and_qos_are_kept() -> None:
    body = _review()
    _pod(body)["metadata"]["annotations"] = {keys.PARTITION: "big", keys.QOS: "urgent", keys.ACCOUNT: "vision"}
    pod = _patched(body)
    assert pod["metadata"]["annotations"] == {
        keys.PARTITION: "big",
        keys.QOS: "urgent",
        keys.ACCOUNT: "vision",
        keys.GPUS: "2",
    }


def test_a_pod_that_chose_its_own_scheduler_is_left_alone() -> None:
    body = _review()
    _pod(body)["spec"]["schedulerName"] = "volcano"
    response = _answer(body)
    assert response["allowed"] is True and "patch" not in response


def test_a_pod_already_for_sunk_keeps_its_scheduler_and_gets_the_rest() -> None:
    body = _review()
    _pod(body)["spec"]["schedulerName"] = SCHEDULER
    response = _answer(body)
    patch = json.loads(base64.b64decode(response["patch"]))
    assert not [op for op in patch if op["path"] == "/spec/schedulerName"]
    assert jsonpatch.apply_patch(_pod(body), patch)["metadata"]["annotations"][keys.GPUS] == "2"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda pod: pod["metadata"].update(annotations={keys.ACCOUNT: "speech"}),
            f"sunk: metadata.annotations[{keys.ACCOUNT}]: 'speech': pods of this namespace run under Slurm "
            "account 'vision'",
        ),
        (
            lambda pod: pod["spec"]["containers"][1].update(resources={"limits": {"nvidia.com/gpu": "1"}}),
            "sunk: spec.containers[1].resources: 2 containers that run together ask for GPUs "
            "(spec.containers[0], spec.containers[1])",
        ),
        (
            lambda pod: pod["spec"]["containers"][0]["resources"]["limits"].update({"nvidia.com/mig-1g.10gb": "1"}),
            "sunk: spec.containers[0].resources.limits[nvidia.com/mig-1g.10gb]: Slurm hands out whole GPUs",
        ),
        (
            lambda pod: pod["spec"]["containers"][0]["resources"]["limits"].update({"nvidia.com/gpu": "1"}),
            "sunk: spec.containers[0].resources: nvidia.com/gpu differs between requests and limits: [1, 2]",
        ),
        (
            lambda pod: pod["metadata"].update(annotations={keys.GPUS: "2"}),
            f"sunk: metadata.annotations[{keys.GPUS}]: set beside an nvidia.com/gpu request (spec.containers[0])",
        ),
        (
            lambda pod: pod["spec"]["containers"][0]["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}),
            "sunk: spec.containers[0].env[1]: NVIDIA_VISIBLE_DEVICES is set by sunk",
        ),
        (
            lambda pod: [
                pod["spec"]["containers"][0]["resources"][p].update({"nvidia.com/gpu": "65"})
                for p in ("limits", "requests")
            ],
            "sunk: spec.containers[0].resources.limits[nvidia.com/gpu]: 65 is more than 64 GPUs",
        ),
        (
            lambda pod: pod["spec"].update(
                initContainers=[{"name": "warm", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
            ),
            "sunk: spec.initContainers[0].resources: containers ask for different numbers of GPUs",
        ),
    ],
    ids=[
        "other-account",
        "two-gpu-containers",
        "mig",
        "requests-differ",
        "both-gpu-forms",
        "own-visible",
        "too-many",
        "init-differs",
    ],
)
def test_refusals_name_the_field(change: Any, expected: str) -> None:
    body = _review()
    change(_pod(body))
    message = _refused(body)
    assert message.startswith(expected), message


def test_an_init_container_and_a_sidecar() -> None:
    """A plain init container runs alone before the others, so it may see the pod's GPUs too; a
    native sidecar (restartPolicy Always) runs beside them, so only one of the two may ask."""
    body = _review()
    gpu = {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}
    _pod(body)["spec"]["initContainers"] = [{"name": "warm", "image": "busybox", "resources": copy.deepcopy(gpu)}]
    pod = _patched(body)
    assert pod["metadata"]["annotations"][keys.GPUS] == "2"
    assert pod["spec"]["initContainers"][0]["env"][0]["valueFrom"]["fieldRef"]["fieldPath"].endswith("gpu-indices']")
    assert "nvidia.com/gpu" not in pod["spec"]["initContainers"][0]["resources"]["limits"]

    _pod(body)["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    assert _refused(body).startswith("sunk: spec.initContainers[0].resources: 2 containers that run together")


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.update(namespace="elsewhere"),
        lambda r: r.update(operation="UPDATE"),
        lambda r: r.update(subResource="binding"),
        lambda r: r.update(resource={"group": "apps", "version": "v1", "resource": "deployments"}),
    ],
    ids=["unlisted-namespace", "update", "subresource", "not-a-pod"],
)
def test_anything_else_is_allowed_untouched(change: Any) -> None:
    body = _review()
    change(body["request"])
    assert _answer(body) == {"uid": body["request"]["uid"], "allowed": True}


def test_a_pod_without_annotations_or_env_gets_whole_objects() -> None:
    """JSONPatch `add` needs the parent to exist: a pod with no annotations and containers with
    no env get the map and the list whole."""
    body = _review()
    del _pod(body)["spec"]["containers"][0]["env"]
    del _pod(body)["spec"]["schedulerName"]
    pod = _patched(body)
    assert pod["spec"]["schedulerName"] == SCHEDULER
    assert [e["name"] for e in pod["spec"]["containers"][0]["env"]] == ["NVIDIA_VISIBLE_DEVICES"]


def test_namespace_settings_parse_and_refuse() -> None:
    assert parse_namespaces('{"a": {"account": "x", "qos": "q"}}') == {"a": NamespaceDefaults("x", None, "q")}
    for bad in ('["a"]', '{"a": {}}', '{"a": {"account": "x", "cluster": "y"}}'):
        with pytest.raises(ValueError):
            parse_namespaces(bad)


def test_a_leaderworkerset_group_becomes_one_sunk_group_started_at_its_first_member() -> None:
    """Labels and annotations as the LeaderWorkerSet controller sets them on a worker (constants of
    kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go, lines 37-57)."""
    body = _review()
    meta = _pod(body)["metadata"]
    group_key = "9d1b6a4b0d6c3f0e2a7b8c9d0e1f2a3b4c5d6e7f"
    meta["labels"] = {
        "leaderworkerset.sigs.k8s.io/name": "vllm",
        "leaderworkerset.sigs.k8s.io/group-index": "0",
        "leaderworkerset.sigs.k8s.io/worker-index": "2",
        "leaderworkerset.sigs.k8s.io/group-key": group_key,
    }
    meta["annotations"] = {"leaderworkerset.sigs.k8s.io/size": "4", "leaderworkerset.sigs.k8s.io/leader-name": "vllm-0"}
    annotations = _patched(body)["metadata"]["annotations"]
    assert annotations[keys.GROUP] == f"lws-{group_key}"
    assert annotations[keys.GROUP_SIZE] == "4"
    assert annotations[keys.GROUP_START] == "first-member"
    # A group of one is a single pod; a pod's own group wins.
    meta["annotations"]["leaderworkerset.sigs.k8s.io/size"] = "1"
    assert keys.GROUP not in _patched(body)["metadata"]["annotations"]
    meta["annotations"] = {"leaderworkerset.sigs.k8s.io/size": "4", keys.GROUP: "mine", keys.GROUP_SIZE: "4"}
    assert _patched(body)["metadata"]["annotations"][keys.GROUP] == "mine"
