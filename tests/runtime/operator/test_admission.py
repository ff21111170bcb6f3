"""The operator's kubelet-admission check: pod requests as a kubelet sums them, and the plan that
creates an all-matching-nodes pod only on a Node with room for it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from sunk.runtime.operator.admission import amount, node_usage, pod_requests, shortfalls
from sunk.runtime.operator.model import CreatePod, KubeNode, NodeSetObject, Observed, PodDoesNotFit, Taint, WriteStatus
from sunk.runtime.operator.plan import plan
from sunk.runtime.operator.reconcile import Reconciler

from sunk.manifests.config import config_maps
from sunk.stackfile import load_stack
from tests.support.fakes.operator import FakeKube, FakeSlurm
from tests.support.nodeset_objects import config_map_objects, nodeset_object, resource_spec
from tests.support.stacks import FIXTURE_STACKS

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
CLUSTER = load_stack("acme-dev", FIXTURE_STACKS).spec
KEYS = {cm["metadata"]["name"]: frozenset(cm["data"]) for cm in config_maps(CLUSTER)}
NS = "acme-research"
H100 = {"node.kubernetes.io/instance-type": "H100x8", "kubernetes.io/arch": "amd64"}
GPU_TAINT = (Taint("nvidia.com/gpu", "", "NoSchedule"),)
GiB = 2**30


def gpu_all(**kw: Any) -> Any:
    return resource_spec(CLUSTER, "gpu", mode="all-matching-nodes", replicas=None, **kw)


def alloc(cpu: str, memory: str, gpus: int = 0) -> dict[str, int]:
    out = {"cpu": amount("cpu", cpu), "memory": amount("memory", memory), "pods": 110}
    return out | ({"nvidia.com/gpu": gpus} if gpus else {})


# --- requests and quantities ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "text", "want"),
    [("cpu", "500m", 500), ("cpu", "2", 2000), ("cpu", "0.1", 100), ("cpu", "1e3", 1_000_000),
     ("memory", "1Gi", GiB), ("memory", "1G", 10**9), ("memory", "2063891028Ki", 2063891028 * 1024),
     ("cpu", "1.0001m", 2), ("nvidia.com/gpu", "8", 8)],
)  # fmt: skip
def test_amounts_in_the_operators_units(resource: str, text: str, want: int) -> None:
    assert amount(resource, text) == want


def test_pod_requests_sum_containers_and_sidecars_and_peak_over_init_containers() -> None:
    pod = {
        "spec": {
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "big-init", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}},
            ],
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}},
                # limits only: the API server defaults requests to them
                {"name": "b", "resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "2"}}},
            ],
            "overhead": {"memory": "64Mi"},
        }
    }
    # cpu: max(1 + 0.5 + 0.1 sidecar, 3 init + 0.1 sidecar before it) = 3.1
    assert pod_requests(pod) == {
        "cpu": 3100,
        "memory": 2 * GiB + 64 * 2**20,
        "nvidia.com/gpu": 2,
        "pods": 1,
    }


def test_usage_counts_bound_non_terminated_pods_terminating_included() -> None:
    def p(node: str | None, phase: str, cpu: str, deleting: bool = False) -> dict[str, Any]:
        meta = {"deletionTimestamp": "x"} if deleting else {}
        spec = {"containers": [{"resources": {"requests": {"cpu": cpu}}}], **({"nodeName": node} if node else {})}
        return {"metadata": meta, "spec": spec, "status": {"phase": phase}}

    pods = [p("n1", "Running", "1"), p("n1", "Running", "2", deleting=True), p("n1", "Succeeded", "4"),
            p("n1", "Failed", "8"), p(None, "Pending", "16"), p("n2", "Pending", "500m")]  # fmt: skip
    assert node_usage(pods) == {"n1": {"cpu": 3000, "pods": 2}, "n2": {"cpu": 500, "pods": 1}}


def test_shortfalls_in_the_kubelets_order_and_missing_resources_count_as_zero() -> None:
    want = {"cpu": 2000, "memory": GiB, "nvidia.com/gpu": 1, "pods": 1}
    got = shortfalls({"cpu": 3000, "memory": GiB, "pods": 2}, {"cpu": 1500, "pods": 2}, want)
    assert [s.resource for s in got] == ["pods", "cpu", "nvidia.com/gpu"]
    assert str(got[1]) == "cpu: requests 2, 1.5 in use of 3 allocatable"
    assert shortfalls({"cpu": 3000, "memory": GiB, "pods": 2}, {}, {"cpu": 3000, "memory": GiB, "pods": 1}) == []


# --- the plan ---------------------------------------------------------------------------------


def test_all_matching_creates_a_pod_only_where_a_kubelet_admits_it() -> None:
    spec = gpu_all(resourceMode="exclusive")  # requests 16 CPUs, 64 GiB and 2 GPUs
    nodes = [
        KubeNode("roomy", H100, GPU_TAINT, allocatable=alloc("126", "1900Gi", 8)),
        KubeNode("busy", H100, GPU_TAINT, allocatable=alloc("126", "1900Gi", 8)),
        KubeNode("no-plugin", H100, GPU_TAINT, allocatable=alloc("126", "1900Gi")),  # no nvidia.com/gpu
        KubeNode("unreported", H100, GPU_TAINT),  # no status.allocatable: the kubelet judges
    ]
    usage = {"busy": {"cpu": 120_000, "memory": 10 * GiB, "pods": 12}}
    obs = Observed(NodeSetObject("research-gpu", NS, "u", 1, spec), [], {n.name: n for n in nodes}, {}, KEYS,
                   node_usage=usage)  # fmt: skip
    out = plan(obs, NOW)
    created = sorted(a.pod["spec"]["hostname"] for a in out if isinstance(a, CreatePod))
    assert created == ["roomy", "unreported"]
    warnings = {a.kube_node: a.message for a in out if isinstance(a, PodDoesNotFit)}
    assert warnings == {
        "busy": "the slurmd pod does not fit (cpu: requests 16.01, 120 in use of 126 allocatable); not created",
        "no-plugin": "the slurmd pod does not fit (nvidia.com/gpu: requests 2, 0 in use of 0 allocatable); not created",
    }
    status = next(a for a in out if isinstance(a, WriteStatus)).status
    fit = next(c for c in status["conditions"] if c["type"] == "PodsFit")
    assert (fit["status"], fit["reason"]) == ("False", "InsufficientResources")
    assert fit["message"].startswith("slurmd pods not created, a kubelet would reject them on 2 Node(s): busy (cpu:")
    assert (status["desired"], status["feasible"]) == (4, 2)

    # The same misfit on the next resync: the condition already says it, so no second Warning.
    seen = replace(obs, nodeset=replace(obs.nodeset, status=status))
    again = plan(seen, NOW)
    assert not [a for a in again if isinstance(a, PodDoesNotFit)]
    # Room appears on busy: its pod is created and the condition turns True.
    freed = plan(replace(seen, node_usage={}), NOW)
    assert "busy" in [a.pod["spec"]["hostname"] for a in freed if isinstance(a, CreatePod)]
    assert [a.kube_node for a in freed if isinstance(a, PodDoesNotFit)] == []


def test_shared_pods_fit_where_exclusive_ones_do_not() -> None:
    # 4 CPUs left on the Node: a shared slurmd pod (500m + munge) fits, an exclusive one (16) does not.
    nodes = {"g1": KubeNode("g1", H100, GPU_TAINT, allocatable=alloc("126", "1900Gi", 8))}
    usage = {"g1": {"cpu": 122_000, "memory": GiB, "pods": 5}}
    for mode, fits in (("shared", True), ("exclusive", False)):
        obs = Observed(NodeSetObject("research-gpu", NS, "u", 1, gpu_all(resourceMode=mode)), [], nodes, {}, KEYS,
                       node_usage=usage)  # fmt: skip
        assert any(isinstance(a, CreatePod) for a in plan(obs, NOW)) is fits


# --- the glue -----------------------------------------------------------------------------------


def test_reconciler_counts_every_bound_pod_and_leaves_a_warning_event() -> None:
    kube, slurm = FakeKube(), FakeSlurm()
    spec = gpu_all(resourceMode="exclusive")
    kube.add(nodeset_object(spec, namespace=NS))
    for cm in config_map_objects(CLUSTER, namespace=NS):
        kube.add(cm)
    kube.add({"kind": "Node", "metadata": {"name": "g1", "labels": H100},
              "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
              "status": {"conditions": [{"type": "Ready", "status": "True"}],
                         "allocatable": {"cpu": "20", "memory": "100Gi", "nvidia.com/gpu": "8", "pods": "110"}}})  # fmt: skip
    # An inference pod of another namespace already holds 8 of the Node's 20 CPUs.
    kube.add({"kind": "Pod", "metadata": {"name": "llm", "namespace": "serving"},
              "spec": {"nodeName": "g1", "containers": [{"name": "m", "resources": {"requests": {"cpu": "8"}}}]},
              "status": {"phase": "Running"}})  # fmt: skip
    reconciler = Reconciler(kube, lambda ref: slurm, clock=lambda: NOW)
    reconciler.resync()
    assert [k for k in kube.pods if k[0] == NS] == []
    warning = next(e for e in kube.events if e["reason"] == "PodDoesNotFit")
    assert warning["type"] == "Warning" and warning["involvedObject"]["kind"] == "NodeSet"
    assert warning["message"].startswith(
        "Node g1 (Slurm node g1): the slurmd pod does not fit (cpu: requests 16.01, 8 in use"
    )
    reconciler.resync()
    assert kube.event_reasons().count("PodDoesNotFit") == 1
    del kube.pods[("serving", "llm")]
    reconciler.resync()
    assert [k[1] for k in kube.pods] == ["research-gpu-g1"]


def test_two_nodesets_on_one_node_do_not_overcommit_it_within_or_across_resyncs() -> None:
    kube, slurm = FakeKube(), FakeSlurm()
    for name, extra in (("cpu", {}), ("gpu", {"resourceMode": "exclusive"})):
        spec = resource_spec(CLUSTER, name, mode="all-matching-nodes", replicas=None, **extra)
        kube.add(nodeset_object(spec, namespace=NS))
    for cm in config_map_objects(CLUSTER, namespace=NS):
        kube.add(cm)
    # Room for the cpu pod (4.01 CPUs) or the gpu pod (16.01), not both.
    kube.add({"kind": "Node", "metadata": {"name": "g1", "labels": H100},
              "status": {"conditions": [{"type": "Ready", "status": "True"}],
                         "allocatable": {"cpu": "18", "memory": "100Gi", "nvidia.com/gpu": "8", "pods": "110"}}})  # fmt: skip
    reconciler = Reconciler(kube, lambda ref: slurm, clock=lambda: NOW)
    reconciler.resync()  # research-cpu is planned first: its pod counts for research-gpu's check
    assert [k[1] for k in kube.pods] == ["research-cpu-g1"]
    assert kube.event_reasons().count("PodDoesNotFit") == 1
    reconciler.resync()  # the cpu pod is still pending, pinned to g1: it counts as there
    assert [k[1] for k in kube.pods] == ["research-cpu-g1"]
    kube.run_pods()  # bound and running: counted as any pod on g1
    reconciler.resync()
    assert [k[1] for k in kube.pods] == ["research-cpu-g1"]
    assert kube.event_reasons().count("PodDoesNotFit") == 1
