"""kubesim's kubelet admission and PodDisruptionBudgets through the official client, as the
runtime sees them."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.support.kubesim import KubeSim
from tests.support.rawclient import as_body, http, raw

NS = "ml"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    with KubeSim() as server:
        yield server


@pytest.fixture
def api(sim: KubeSim) -> client.CoreV1Api:
    return client.CoreV1Api(sim.api_client())


def create_node(api: client.CoreV1Api, name: str, **status: Any) -> dict[str, Any]:
    return raw(api.create_node(as_body({"metadata": {"name": name}, "status": status}), _preload_content=False))


def create_pod(
    api: client.CoreV1Api, name: str, node: str = "", labels: dict[str, str] | None = None, **requests: str
) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "app", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    api.create_namespaced_pod(
        NS, as_body({"metadata": {"name": name, "labels": labels or {}}, "spec": spec}), _preload_content=False
    )


def read(api: client.CoreV1Api, name: str) -> dict[str, Any]:
    return raw(api.read_namespaced_pod(name, NS, _preload_content=False))


def bind(api: client.CoreV1Api, name: str, node: str) -> None:
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=name), target=client.V1ObjectReference(kind="Node", name=node)
    )
    api.create_namespaced_pod_binding(name, NS, body, _preload_content=False)


def test_nodes_without_allocatable_or_capacity_are_refused(api: client.CoreV1Api) -> None:
    with pytest.raises(client.ApiException) as refused:
        create_node(api, "bare")
    assert refused.value.status == 422 and "every kubelet reports them" in str(refused.value.body)
    # Capacity only: a kubelet with nothing reserved reports allocatable = capacity, max 110 pods.
    node = create_node(api, "n1", capacity={"cpu": "4", "memory": "8Gi"})
    assert node["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "110"}


def test_a_binding_that_does_not_fit_fails_the_pod_as_the_kubelet_would(sim: KubeSim, api: client.CoreV1Api) -> None:
    create_node(api, "n1", allocatable={"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8", "pods": "110"})
    create_pod(api, "slurmd", node="n1", labels=None, cpu="6", memory="30Gi", **{"nvidia.com/gpu": "8"})
    create_pod(api, "fits", cpu="2", memory="1Gi")
    create_pod(api, "gpu", labels=None, cpu="0", **{"nvidia.com/gpu": "1"})
    create_pod(api, "cpu", cpu="1")
    bind(api, "fits", "n1")
    bind(api, "gpu", "n1")  # the Binding itself succeeds: only the kubelet says no
    bind(api, "cpu", "n1")  # 6 + 2 of 8 CPUs are taken
    assert read(api, "slurmd")["status"]["phase"] == "Pending"  # admitted; nothing runs containers
    assert read(api, "fits")["status"]["phase"] == "Pending"
    gpu, cpu = read(api, "gpu")["status"], read(api, "cpu")["status"]
    assert (gpu["phase"], gpu["reason"]) == ("Failed", "OutOfnvidia.com/gpu")
    assert gpu["message"] == (
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 8, capacity: 8"
    )
    assert (cpu["phase"], cpu["reason"]) == ("Failed", "OutOfcpu")
    assert "requested: 1000, used: 8000, capacity: 8000" in cpu["message"]
    assert sim.rejections == [(NS, "gpu", "n1", "OutOfnvidia.com/gpu"), (NS, "cpu", "n1", "OutOfcpu")]
    # A Failed pod frees its requests: the same request now fits once "fits" has ended.
    api.patch_namespaced_pod_status("fits", NS, {"status": {"phase": "Succeeded"}}, _preload_content=False)
    create_pod(api, "again", node="n1", cpu="2")
    assert read(api, "again")["status"]["phase"] == "Pending"


def test_a_deleted_pod_frees_its_requests_and_a_pod_of_the_same_name_is_admitted_afresh(
    sim: KubeSim, api: client.CoreV1Api
) -> None:
    """The kubelet model keeps each Node's admitted pods (not a scan of every pod): a pod deleted,
    or ended, leaves that list, and a new pod under an old name is not mistaken for the old one."""
    create_node(api, "n1", allocatable={"cpu": "4", "memory": "8Gi"})
    create_pod(api, "a", node="n1", cpu="3")
    create_pod(api, "b", node="n1", cpu="2")
    assert read(api, "b")["status"]["reason"] == "OutOfcpu"
    api.delete_namespaced_pod("a", NS, _preload_content=False)
    create_pod(api, "c", node="n1", cpu="2")  # a's 3 CPUs are free again
    assert read(api, "c")["status"]["phase"] == "Pending"
    create_pod(api, "a", node="n1", cpu="2")  # the same name, a new pod: 2 + 2 of 4 fit
    assert read(api, "a")["status"]["phase"] == "Pending"
    create_pod(api, "d", node="n1", cpu="1")  # the new "a" counts: 4 of 4 are taken
    assert read(api, "d")["status"]["reason"] == "OutOfcpu"
    assert [r[1] for r in sim.rejections] == ["b", "d"]


def test_pods_bound_before_their_node_exists_are_admitted_when_it_registers(api: client.CoreV1Api) -> None:
    create_pod(api, "early", node="late-node", cpu="2")
    create_pod(api, "second", node="late-node", cpu="2")
    create_node(api, "late-node", allocatable={"cpu": "3", "memory": "1Gi"})
    assert read(api, "early")["status"]["phase"] == "Pending"
    assert read(api, "second")["status"]["reason"] == "OutOfcpu"


def test_admission_can_be_switched_off(sim: KubeSim, api: client.CoreV1Api) -> None:
    sim.admission = False
    create_node(api, "n1", allocatable={"cpu": "1", "memory": "1Gi"})
    create_pod(api, "big", node="n1", cpu="64")
    assert read(api, "big")["status"]["phase"] == "Pending" and sim.rejections == []


def ready(api: client.CoreV1Api, name: str) -> None:
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    api.patch_namespaced_pod_status(name, NS, {"status": status}, _preload_content=False)


def evict(api: client.CoreV1Api, name: str) -> client.ApiException | None:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=NS))
    try:
        api.create_namespaced_pod_eviction(name, NS, body, _preload_content=False)
    except client.ApiException as e:
        return e
    return None


def test_evictions_honour_pod_disruption_budgets(sim: KubeSim, api: client.CoreV1Api) -> None:
    policy = client.PolicyV1Api(sim.api_client())
    budget = {
        "metadata": {"name": "slurmd"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "slurmd"}}},
    }
    policy.create_namespaced_pod_disruption_budget(NS, as_body(budget), _preload_content=False)
    listed = raw(policy.list_namespaced_pod_disruption_budget(NS, _preload_content=False))
    assert [b["metadata"]["name"] for b in listed["items"]] == ["slurmd"]
    for name in ("a", "b", "c"):
        create_pod(api, name, labels={"app": "slurmd"})
    create_pod(api, "other")
    assert evict(api, "a") is None  # Pending: no PDB check, as the API server does
    for name in ("b", "c"):
        ready(api, name)
    refused = evict(api, "b")
    assert refused is not None and refused.status == 429 and refused.body is not None
    body = json.loads(refused.body)
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert (
        body["details"]["causes"][0]["message"]
        == "The disruption budget slurmd needs 2 healthy pods and has 2 currently"
    )
    assert evict(api, "other") is None  # not selected by the budget
    create_pod(api, "d", labels={"app": "slurmd"})
    ready(api, "d")
    assert evict(api, "b") is None  # three healthy, two needed
    assert sim.evictions == [(NS, "a"), (NS, "other"), (NS, "b")]


def test_a_pod_list_honours_the_node_name_field_selector(api: client.CoreV1Api) -> None:
    create_node(api, "n1", allocatable={"cpu": "8", "memory": "8Gi"})
    create_pod(api, "here", node="n1")
    create_pod(api, "nowhere")
    listed = raw(api.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1", _preload_content=False))
    assert [p["metadata"]["name"] for p in listed["items"]] == ["here"]
    # Any other selector is still ignored (callers filter again).
    listed = raw(api.list_namespaced_pod(NS, field_selector="status.phase!=Failed", _preload_content=False))
    assert sorted(p["metadata"]["name"] for p in listed["items"]) == ["here", "nowhere"]


def test_a_watch_sees_the_kubelet_reject_a_pod(api: client.CoreV1Api) -> None:
    create_node(api, "n1", allocatable={"cpu": "1", "memory": "1Gi"})
    stream = http(api.list_namespaced_pod(NS, watch=True, timeout_seconds=5, _preload_content=False))
    create_pod(api, "big", node="n1", cpu="2")
    for line in stream:
        event = json.loads(line)
        if event["type"] == "MODIFIED" and event["object"]["status"].get("reason") == "OutOfcpu":
            break
    else:
        raise AssertionError("no MODIFIED event with the rejection")
    stream.close()


# --- watches as informers use them ------------------------------------------------------------


def _events(source: Any, version: str, selector: str = "", timeout: int = 1) -> list[tuple[str, str]]:
    """(type, name) of every event of a watch the server ends after `timeout` seconds."""
    stream = source.watch(resource_version=version, label_selector=selector, field_selector="", timeout_seconds=timeout)
    return [(e["type"], e["object"].get("metadata", {}).get("name", "")) for e in stream if e["type"] != "BOOKMARK"]


def test_watches_resume_from_a_version_honour_selectors_and_say_410_after_compaction(
    sim: KubeSim, api: client.CoreV1Api
) -> None:
    from sunk.runtime.common.kubewatch import KubeListWatch

    source = KubeListWatch(functools.partial(api.list_namespaced_pod, NS))
    create_pod(api, "a", labels={"app": "slurmd"})
    create_pod(api, "b", labels={"app": "web"})
    listed = source.list(label_selector="app=slurmd", field_selector="", limit=500, continue_token="")
    assert [p["metadata"]["name"] for p in listed["items"]] == ["a"]
    version = listed["metadata"]["resourceVersion"]
    assert int(version) >= 2  # a real version, not kmock's "..."
    api.patch_namespaced_pod("a", NS, {"metadata": {"annotations": {"x": "1"}}}, _preload_content=False)
    api.patch_namespaced_pod("b", NS, {"metadata": {"labels": {"app": "slurmd"}}}, _preload_content=False)
    # Only what happened after the list, filtered by the selector; b joined the selection.
    assert _events(source, version, "app=slurmd") == [("MODIFIED", "a"), ("MODIFIED", "b")]
    # Each event is the object as written then, with its own version.
    stream = source.watch(resource_version=version, label_selector="", field_selector="", timeout_seconds=1)
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in stream if e["type"] != "BOOKMARK"]
    assert versions == sorted(versions) and len(set(versions)) == 2 and versions[0] > int(version)
    assert _events(source, "")[:2] == [("ADDED", "a"), ("ADDED", "b")]  # no version: the state first
    sim.compact()
    assert _events(source, version) == [("ERROR", "")]
    gone = next(iter(source.watch(resource_version=version, label_selector="", field_selector="", timeout_seconds=1)))
    assert gone["object"]["code"] == 410


def test_requests_are_counted_and_seeded_objects_are_listed_without_requests(
    sim: KubeSim, api: client.CoreV1Api
) -> None:
    sim.seed(
        "v1/nodes",
        [{"metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "1", "memory": "1Gi"}}} for i in range(3)],
    )
    assert sim.requests == {}
    nodes = raw(api.list_node(_preload_content=False))
    assert sorted(n["metadata"]["name"] for n in nodes["items"]) == ["n0", "n1", "n2"]
    api.patch_node("n1", {"spec": {"unschedulable": True}}, _preload_content=False)
    assert sim.requests == {("list", "nodes"): 1, ("update", "nodes"): 1}
