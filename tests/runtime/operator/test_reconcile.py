"""The glue on in-memory fakes: resyncs converge, write nothing when nothing changed, leave an
Event per action, fail closed, and stop acting without the lead."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sunk.runtime.operator.reconcile import Reconciler
from sunk.runtime.operator.slurm import ClusterRef

from sunk import keys
from sunk.manifests.auth import auth_refs
from sunk.manifests.runtime import operator_access
from sunk.naming import OPERATOR_REASON_PREFIX
from sunk.stackfile import load_stack
from tests.support.fakes.operator import FakeKube, FakeSlurm
from tests.support.nodeset_objects import config_map_objects, nodeset_object, resource_spec
from tests.support.stacks import FIXTURE_STACKS

CLUSTER = load_stack("acme-dev", FIXTURE_STACKS).spec
NS = "acme-research"


class World:
    def __init__(self, replicas: int = 3, **spec: Any) -> None:
        self.kube = FakeKube()
        self.slurm = FakeSlurm()
        self.now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
        self.spec = resource_spec(CLUSTER, "cpu", replicas=replicas, **spec)
        self.kube.add(nodeset_object(self.spec, namespace=NS))
        for cm in config_map_objects(CLUSTER, namespace=NS):
            self.kube.add(cm)
        self.kube.add(
            {
                "kind": "Node",
                "metadata": {"name": "node-0", "labels": {"topology.acme.example/spine": "s1"}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
        self.refs: list[ClusterRef] = []
        self.leading = True
        self.reconciler = Reconciler(
            self.kube,
            self._slurm_for,
            clock=lambda: self.now,
            topology_delay=timedelta(seconds=90),
            may_act=lambda: self.leading,
        )

    def _slurm_for(self, ref: ClusterRef) -> FakeSlurm:
        self.refs.append(ref)
        return self.slurm

    def kubelet(self) -> None:
        """Pods start, and their slurmd register (what the real-Slurm test does for real)."""
        self.kube.run_pods()
        for pod in self.kube.pods.values():
            name = pod["metadata"]["labels"][keys.NODE]
            if name not in self.slurm.nodes:
                self.slurm.register(name, ["cpu", "x86"])

    def settle(self, rounds: int = 6) -> None:
        for _ in range(rounds):
            self.reconciler.resync()
            self.kube.finish_deletes()
            self.kubelet()
            self.now += timedelta(seconds=100)

    def pod_nodes(self) -> list[str]:
        return sorted(p["metadata"]["labels"][keys.NODE] for p in self.kube.pods.values())

    def status(self) -> dict[str, Any]:
        return dict(self.kube.nodesets[(NS, "research-cpu")]["status"])


def test_first_resync_creates_pods_service_status_and_events() -> None:
    w = World()
    report = w.reconciler.resync()
    assert w.pod_nodes() == ["cpu-0", "cpu-1", "cpu-2"]
    assert (NS, "research-cpu") in w.kube.services
    assert w.status()["desired"] == 3
    assert w.refs[0] == ClusterRef(NS, "research", "research-jwt")
    assert w.kube.event_reasons().count("CreatePod") == 3
    assert "CreateService" in w.kube.event_reasons()
    events = [e for e in w.kube.events if e["reason"] == "CreatePod"]
    assert events[0]["involvedObject"]["kind"] == "NodeSet"
    assert not report.errors


def test_steady_state_writes_nothing() -> None:
    w = World()
    w.settle()
    assert w.status()["ready"] == 3 and w.status()["idle"] == 3
    writes, events = w.kube.writes, len(w.kube.events)
    for _ in range(3):
        w.reconciler.resync()
        w.now += timedelta(seconds=100)
    assert w.kube.writes == writes
    assert len(w.kube.events) == events
    assert w.slurm.calls.count(("reconfigure", "")) == 1  # once, after the kubelet delay


def test_scale_in_waits_for_the_job_and_cleans_up_slurm() -> None:
    w = World()
    w.settle()
    w.slurm.set("cpu-1", "ALLOCATED")
    w.slurm.set("cpu-2", "ALLOCATED")
    obj = w.kube.nodesets[(NS, "research-cpu")]
    obj["spec"]["replicas"] = 1
    w.settle()
    # The idle node goes first, then the busy one with the highest ordinal, once its job ends.
    assert w.pod_nodes() == ["cpu-1", "cpu-2"]
    assert w.slurm.nodes["cpu-2"].reason.startswith(OPERATOR_REASON_PREFIX)
    assert not w.slurm.nodes["cpu-1"].drain
    assert "cpu-0" not in w.slurm.nodes
    w.slurm.set("cpu-2", "IDLE")
    w.settle()
    assert w.pod_nodes() == ["cpu-1"]
    assert sorted(w.slurm.nodes) == ["cpu-1"]
    assert w.status()["desired"] == 1


def test_slurm_down_deletes_nothing() -> None:
    w = World()
    w.settle()
    w.kube.nodesets[(NS, "research-cpu")]["spec"]["replicas"] = 1
    w.slurm.down = True
    w.settle()
    assert w.pod_nodes() == ["cpu-0", "cpu-1", "cpu-2"]
    conditions = {c["type"]: c["status"] for c in w.status()["conditions"]}
    assert conditions["SlurmReachable"] == "False"
    w.slurm.down = False
    w.settle()
    assert w.pod_nodes() == ["cpu-0"]


@pytest.mark.parametrize(("max_unavailable", "replicas"), [(1, 3), (2, 5), ("50%", 4)])
def test_rolling_update_replaces_every_pod_within_max_unavailable(max_unavailable: int | str, replicas: int) -> None:
    w = World(replicas=replicas, updateStrategy={"maxUnavailable": max_unavailable})
    w.settle()
    w.kube.nodesets[(NS, "research-cpu")]["spec"]["configHash"] = "v2"
    worst = 0
    for _ in range(30):
        w.reconciler.resync()
        available = {
            p["metadata"]["labels"][keys.NODE]
            for p in w.kube.pods.values()
            if not p["metadata"].get("deletionTimestamp") and p.get("status", {}).get("phase") == "Running"
        }
        available -= {n for n, s in w.slurm.nodes.items() if s.drain}
        worst = max(worst, replicas - len(available))
        w.kube.finish_deletes()
        w.kubelet()
        w.now += timedelta(seconds=100)
    hashes = {p["metadata"]["annotations"]["slurm.sunk.dev/config-hash"] for p in w.kube.pods.values()}
    assert hashes == {"v2"}
    assert w.status()["updated"] == replicas
    assert not any(n.drain for n in w.slurm.nodes.values())
    limit = max_unavailable if isinstance(max_unavailable, int) else replicas // 2
    assert worst == limit


def test_invalid_spec_is_reported_once() -> None:
    w = World()
    w.kube.nodesets[(NS, "research-cpu")]["spec"]["replicas"] = -1
    w.reconciler.resync()
    cond = w.status()["conditions"][0]
    assert (cond["type"], cond["status"]) == ("SpecValid", "False")
    writes = w.kube.writes
    w.reconciler.resync()
    assert w.kube.writes == writes
    assert w.kube.pods == {}


def test_no_lead_no_writes() -> None:
    w = World()
    w.leading = False
    w.reconciler.resync()
    assert w.kube.writes == 0 and w.slurm.calls == []


def test_topology_configmap_and_reconfigure_after_the_kubelet_delay() -> None:
    w = World()
    w.settle(rounds=3)
    cm = w.kube.config_maps[(NS, "research-topology")]
    assert "Nodes=cpu-[0-2]" in cm["data"]["topology.conf"]
    assert keys.TOPOLOGY_RECONFIGURED in cm["metadata"]["annotations"]
    assert "Reconfigure" in w.kube.event_reasons()


def test_reads_each_config_map_once_and_only_those_its_role_grants() -> None:
    """One get per ConfigMap the cluster's NodeSets mount (shared ones once), and exactly the
    names the tenant's operator Role lets it get."""
    w = World()
    w.kube.add(nodeset_object(resource_spec(CLUSTER, "gpu", replicas=1), namespace=NS))
    read: list[str] = []
    get = w.kube.get_config_map

    def recording(namespace: str, name: str) -> dict[str, Any] | None:
        read.append(name)
        return get(namespace, name)

    w.kube.get_config_map = recording  # type: ignore[method-assign]
    w.reconciler.resync()
    assert len(read) == len(set(read))
    role = operator_access(CLUSTER, auth_refs(CLUSTER), "sunk-system", "sunk-operator")[0]
    granted = {
        name
        for rule in role["rules"]
        if rule["resources"] == ["configmaps"] and "get" in rule["verbs"]
        for name in rule.get("resourceNames", [])
    }
    assert set(read) == granted
    assert {"research-gres-cpu-conf", "research-gres-gpu-conf", "research-topology"} <= granted


def test_a_missing_config_map_holds_pod_creation_until_it_exists() -> None:
    w = World()
    gone = w.kube.config_maps.pop((NS, "research-cgroup-conf"))
    w.settle(rounds=2)
    assert w.kube.pods == {}
    found = next(c for c in w.status()["conditions"] if c["type"] == "ConfigFound")
    assert (found["status"], found["message"]) == (
        "False",
        "ConfigMap research-cgroup-conf not found: no pod is created",
    )
    w.kube.add(gone)
    w.settle()
    assert w.pod_nodes() == ["cpu-0", "cpu-1", "cpu-2"]
    pod = next(iter(w.kube.pods.values()))
    sources = next(v for v in pod["spec"]["volumes"] if v["name"] == "sunk-slurm-etc")["projected"]["sources"]
    assert {"name": "research-cgroup-conf", "items": [{"key": "cgroup.conf", "path": "cgroup.conf"}]} in [
        s.get("configMap") for s in sources
    ]
