"""What a resync reads from the operator's informers (runtime/operator/cache.py), on an in-memory
list/watch server: the same KubeState the listing path builds, from projections."""

from __future__ import annotations

from typing import Any

import pytest
from sunk.runtime.common.informer import Informer
from sunk.runtime.operator.cache import (
    Informers,
    KubeState,
    ListedKube,
    NotSynced,
    WatchedKube,
    bound_entry,
    budget_entry,
    namespace_entry,
    node_entry,
    nodeset_entry,
    service_entry,
    slurmd_entry,
)

from sunk import keys
from sunk.manifests.nodeset_pod import SLURMD
from tests.support.fakes.operator import FakeKube
from tests.support.listwatch import FakeListWatch

NS = "acme"


def slurmd(name: str, *, node: str = "", pinned: str = "", phase: str = "Pending") -> dict[str, Any]:
    labels = {keys.APP_COMPONENT: SLURMD, keys.NODESET: "cpu", keys.CLUSTER: "research"}
    annotations = {keys.KUBE_NODE: pinned} if pinned else {}
    spec: dict[str, Any] = {
        "hostname": name,
        "containers": [{"name": "slurmd", "resources": {"requests": {"cpu": "2"}}}],
    }
    if node:
        spec["nodeName"] = node
    meta = {"name": name, "namespace": NS, "labels": labels, "annotations": annotations, "uid": f"uid-{name}"}
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def other_pod(name: str, node: str, cpu: str = "1") -> dict[str, Any]:
    spec = {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    meta = {"name": name, "namespace": "kube-system"}
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def world() -> tuple[dict[str, FakeListWatch], WatchedKube, list[Informer[Any]]]:
    transforms: dict[str, Any] = {
        "nodesets": nodeset_entry,
        "slurmd": slurmd_entry,
        "bound": bound_entry,
        "nodes": node_entry,
        "services": service_entry,
        "budgets": budget_entry,
        "namespaces": namespace_entry,
    }
    servers = {kind: FakeListWatch() for kind in transforms}
    informers = {
        kind: Informer(servers[kind], transform, name=kind, jitter=lambda: 0.0)
        for kind, transform in transforms.items()
    }
    return servers, WatchedKube(Informers(**informers)), list(informers.values())


def test_nothing_is_read_before_every_informer_listed() -> None:
    _, watched, informers = world()
    informers[0].step()
    with pytest.raises(NotSynced):
        watched.read()


def test_the_watched_state_is_what_the_lists_would_give() -> None:
    servers, watched, informers = world()
    meta = {"name": "research-cpu", "namespace": NS, "managedFields": [{"big": "x"}]}
    nodeset = {"kind": "NodeSet", "metadata": meta, "spec": {}}
    servers["nodesets"].put(nodeset)
    pods = [slurmd("cpu-1", node="n1"), slurmd("cpu-0", pinned="n2"), slurmd("cpu-2", pinned="n2", phase="Failed")]
    for pod in pods:
        servers["slurmd"].put(pod)
        servers["bound"].put(pod)
    servers["bound"].put(other_pod("daemon", "n1"))
    servers["nodes"].put({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi"}}})
    servers["namespaces"].put({"metadata": {"name": NS, "labels": {"tenant": "acme"}}})
    servers["namespaces"].put({"metadata": {"name": "other", "labels": {}}})
    for informer in informers:
        informer.step()
    state = watched.read()

    kube = FakeKube()
    kube.add(nodeset)
    for pod in [*pods, other_pod("daemon", "n1")]:
        kube.add(pod)
    kube.add({"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi"}}})
    listed: KubeState = ListedKube(kube).read()

    key = (NS, "research", "cpu")
    assert (
        sorted(p.name for p in state.pods[key])
        == sorted(p.name for p in listed.pods[key])
        == ["cpu-0", "cpu-1", "cpu-2"]
    )
    assert state.pinned == [("n2", {"cpu": 2000, "pods": 1})]  # the Failed one is not counted
    assert state.bound_usage() == {"n1": {"cpu": 3000, "pods": 2}}  # slurmd and a pod of another namespace
    assert list(state.kube_nodes) == ["n1"] and state.kube_nodes["n1"].allocatable == {"cpu": 8000, "memory": 8 * 2**30}
    assert "managedFields" not in state.nodesets[0]["metadata"]
    assert state.namespaces("tenant") == {NS: {"tenant": "acme"}}
    assert state.budgets == {} and state.services == set()

    # A pod ending frees its requests on the next read; nothing is listed again.
    servers["bound"].put({**other_pod("daemon", "n1"), "status": {"phase": "Succeeded"}})
    informers[2].step()
    assert watched.read().bound_usage() == {"n1": {"cpu": 2000, "pods": 1}}
    assert watched.lists == 7
