"""The operator's admission check and kubesim's kubelet agree: through the official client, the
operator creates all-matching-nodes slurmd pods only on Nodes that admit them; the same pod bound
to a full Node is what a kubelet rejects (OutOfcpu)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from sunk.runtime.operator.kube import OfficialKube
from sunk.runtime.operator.reconcile import Reconciler

from sunk.nodeset_resource import GROUP, PLURAL, VERSION
from sunk.stackfile import load_stack
from tests.support.fakes.operator import FakeSlurm
from tests.support.kubesim import KubeSim
from tests.support.nodeset_objects import config_map_objects, nodeset_object, resource_spec
from tests.support.rawclient import as_body, raw
from tests.support.stacks import FIXTURE_STACKS

NS = "acme-research"
CLUSTER = load_stack("acme-dev", FIXTURE_STACKS).spec
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
H100 = {"node.kubernetes.io/instance-type": "H100x8", "kubernetes.io/arch": "amd64"}


def node(name: str, allocatable: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": H100},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": allocatable},
    }


def test_operator_creates_only_what_kubesims_kubelet_admits(kube_server: KubeSim) -> None:
    api = kube_server.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    # Exclusive: each slurmd pod requests 16 CPUs, 64 GiB and 2 GPUs (plus munge's 10m and 32Mi).
    spec = resource_spec(CLUSTER, "gpu", mode="all-matching-nodes", replicas=None, resourceMode="exclusive")
    for cm in config_map_objects(CLUSTER, namespace=NS):
        core.create_namespaced_config_map(NS, as_body(cm), _preload_content=False)
    h100 = {"cpu": "126610m", "memory": "1950929Mi", "nvidia.com/gpu": "8", "pods": "110"}
    core.create_node(as_body(node("roomy", h100)), _preload_content=False)
    core.create_node(as_body(node("busy", h100)), _preload_content=False)
    core.create_node(
        as_body(node("no-plugin", {k: v for k, v in h100.items() if k != "nvidia.com/gpu"})), _preload_content=False
    )
    # Inference already holds 120 of busy's CPUs.
    serving: dict[str, Any] = {"metadata": {"name": "llm", "namespace": "serving"}, "spec": {"nodeName": "busy"}}
    serving["spec"]["containers"] = [{"name": "m", "image": "vllm", "resources": {"requests": {"cpu": "120"}}}]
    core.create_namespaced_pod("serving", as_body(serving), _preload_content=False)
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, nodeset_object(spec, namespace=NS))

    Reconciler(OfficialKube(api), lambda ref: FakeSlurm(), clock=lambda: NOW).resync()

    pods = raw(core.list_namespaced_pod(NS, _preload_content=False))["items"]
    assert [p["spec"]["hostname"] for p in pods] == ["roomy"]
    # Bind it where its affinity pins it, as kube-scheduler would: the kubelet admits it.
    core.patch_namespaced_pod(pods[0]["metadata"]["name"], NS, {"spec": {"nodeName": "roomy"}}, _preload_content=False)
    assert kube_server.rejections == []
    events = raw(core.list_namespaced_event(NS, _preload_content=False))["items"]
    warned = sorted(e["message"].split(" ")[1] for e in events if e["reason"] == "PodDoesNotFit")
    assert warned == ["busy", "no-plugin"] and all(
        e["type"] == "Warning" for e in events if e["reason"] == "PodDoesNotFit"
    )
    nodeset = custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "research-gpu")
    assert isinstance(nodeset, dict)  # the client decodes a custom object to plain JSON
    status = nodeset["status"]
    fit = next(c for c in status["conditions"] if c["type"] == "PodsFit")
    assert fit["status"] == "False" and fit["reason"] == "InsufficientResources"

    # Control: the pod the operator held back from busy is what the kubelet model rejects. On
    # no-plugin a kubelet's resource admission ignores a resource its Node does not list at all
    # (removeMissingExtendedResources); the device plugin's allocation, which kubesim does not
    # model, would fail it instead (UnexpectedAdmissionError).
    for target in ("busy", "no-plugin"):
        forced = copy.deepcopy(pods[0])
        forced["metadata"] = {"name": f"forced-{target}", "namespace": NS}
        forced["spec"]["nodeName"] = target
        forced.pop("status", None)
        core.create_namespaced_pod(NS, as_body(forced), _preload_content=False)
    assert [(node, reason) for _, _, node, reason in kube_server.rejections] == [("busy", "OutOfcpu")]
