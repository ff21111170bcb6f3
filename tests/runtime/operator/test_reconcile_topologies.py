"""The operator's whole resync loop with named topologies (spec `topologies`, Slurm 26.05), on the
in-memory fakes: pods on four Nodes in two leaves and two NVLink cliques, their slurmd registering;
the loop writes topology.yaml (not topology.conf) into the operator's ConfigMap from the Nodes'
labels, reconfigures Slurm once after the kubelet delay, and a settled cluster then writes and
reconfigures nothing more. The daemons' side of it (topology.yaml read by real 26.05 slurmctld,
jobs kept inside a block) is tests/slurm/test_topologies_2605.py.

What the fakes can't model: Slurm reading the file (FakeSlurm counts reconfigures only), slurmd
re-exec'ing on reconfigure (the real-Slurm operator test covers that), and the kubelet's mount of
the ConfigMap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from sunk.runtime.operator.reconcile import Reconciler
from sunk.runtime.operator.slurm import ClusterRef

from sunk import keys
from sunk.hostlist import expand
from sunk.spec import load_spec
from tests.support.fakes.operator import FakeKube, FakeSlurm
from tests.support.nodeset_objects import config_map_objects, nodeset_object, resource_spec

NS = "test-topos"
LEAF, CLIQUE = "example.com/leaf", "nvidia.com/gpu.clique"
SPEC = load_spec(
    {
        "name": "topos",
        "tenant": "test",
        "slurm": {"version": "26.05"},
        "nodesets": [{"name": "cpu", "replicas": 4, "cpus": 2, "memoryMib": 1024}],
        "topologies": [
            {"name": "fabric", "plugin": "tree", "labelKeys": [LEAF], "default": True},
            {"name": "nvl", "plugin": "block", "labelKeys": [CLIQUE], "blockSizes": [2]},
            {"name": "any", "plugin": "flat"},
        ],
        "partitions": [
            {"name": "all", "nodesets": ["cpu"], "default": True},
            {"name": "nvl", "nodesets": ["cpu"], "topology": "nvl"},
        ],
    }
)
NODES = {  # Kubernetes Node -> (leaf, clique)
    "node-a": ("l1", "c1"),
    "node-b": ("l1", "c1"),
    "node-c": ("l2", "c2"),
    "node-d": ("l2", "c2"),
}
DELAY = timedelta(seconds=90)


class World:
    def __init__(self) -> None:
        self.kube, self.slurm = FakeKube(), FakeSlurm()
        self.now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
        self.kube.add(nodeset_object(resource_spec(SPEC, "cpu"), namespace=NS))
        for cm in config_map_objects(SPEC, namespace=NS):
            self.kube.add(cm)
        for name, (leaf, clique) in NODES.items():
            conditions = [{"type": "Ready", "status": "True"}]
            labels = {LEAF: leaf, CLIQUE: clique}
            self.kube.add(
                {"kind": "Node", "metadata": {"name": name, "labels": labels}, "status": {"conditions": conditions}}
            )
        self.reconciler = Reconciler(
            self.kube, self._slurm_for, clock=lambda: self.now, topology_delay=DELAY, may_act=lambda: True
        )

    def _slurm_for(self, ref: ClusterRef) -> FakeSlurm:
        return self.slurm

    def kubelet(self) -> None:
        """Each new pod lands on the next Node (one per Node, by pod name) and its slurmd registers."""
        pods = sorted(self.kube.pods.values(), key=lambda p: p["metadata"]["name"])
        for pod, node in zip(pods, NODES, strict=False):
            pod["spec"].setdefault("nodeName", node)
        self.kube.run_pods()
        for pod in pods:
            name = pod["metadata"]["labels"][keys.NODE]
            if name not in self.slurm.nodes:
                self.slurm.register(name, ["cpu"])

    def resync(self, seconds: float = 10) -> None:
        self.reconciler.resync()
        self.kube.finish_deletes()
        self.kubelet()
        self.now += timedelta(seconds=seconds)

    def topology(self) -> dict[str, Any]:
        return dict(self.kube.config_maps[(NS, "topos-topology")])

    def placed(self) -> dict[str, str]:
        """Slurm node -> its Kubernetes Node."""
        return {p["metadata"]["labels"][keys.NODE]: p["spec"]["nodeName"] for p in self.kube.pods.values()}


def _by_name(text: str) -> dict[str, dict[str, Any]]:
    return {t["topology"]: t for t in yaml.safe_load(text)}


def test_the_loop_writes_every_named_topology_from_the_node_labels_and_reconfigures_once() -> None:
    w = World()
    for _ in range(3):  # pods created, placed, registered
        w.resync()
    cm = w.topology()
    assert set(cm["data"]) == {"topology.yaml"}  # never topology.conf under `topologies`
    placed = w.placed()
    assert len(placed) == 4 and set(placed.values()) == set(NODES)
    topos = _by_name(cm["data"]["topology.yaml"])
    assert list(topos) == ["fabric", "nvl", "any"]
    assert topos["fabric"]["cluster_default"] is True and topos["any"] == {
        "topology": "any",
        "cluster_default": False,
        "flat": True,
    }
    # Every Slurm node sits in the switch and the block its Node's labels name.
    by_leaf = {leaf: sorted(n for n, k in placed.items() if NODES[k][0] == leaf) for leaf in ("l1", "l2")}
    by_clique = {c: sorted(n for n, k in placed.items() if NODES[k][1] == c) for c in ("c1", "c2")}
    switches = {s["switch"]: s for s in topos["fabric"]["tree"]["switches"]}
    leaves = {name: s for name, s in switches.items() if "nodes" in s}
    assert len(leaves) == 2
    assert sorted(_hosts(s["nodes"]) for s in leaves.values()) == sorted(by_leaf.values())
    blocks = topos["nvl"]["block"]["blocks"]
    assert sorted(_hosts(b["nodes"]) for b in blocks) == sorted(by_clique.values())
    assert topos["nvl"]["block"]["block_sizes"] == [2]

    # Slurm is told once the kubelet delay has passed since the write, not before.
    assert w.slurm.reconfigures == 0
    w.resync(seconds=DELAY.total_seconds())
    w.resync()
    assert w.slurm.reconfigures == 1
    assert keys.TOPOLOGY_RECONFIGURED in w.topology()["metadata"]["annotations"]
    assert w.kube.event_reasons().count("Reconfigure") == 1


def test_a_settled_cluster_with_named_topologies_writes_and_reconfigures_nothing_more() -> None:
    w = World()
    for _ in range(3):
        w.resync()
    w.resync(seconds=DELAY.total_seconds() * 2)
    for _ in range(3):  # the retries a reconfigure gets, if any
        w.resync(seconds=DELAY.total_seconds())
    settled_text = w.topology()["data"]["topology.yaml"]
    settled_reconfigures, settled_events = w.slurm.reconfigures, len(w.kube.events)
    assert settled_reconfigures >= 1
    for _ in range(10):
        w.resync(seconds=30)
    assert w.topology()["data"]["topology.yaml"] == settled_text
    assert w.slurm.reconfigures == settled_reconfigures
    assert len(w.kube.events) == settled_events, w.kube.event_reasons()[settled_events:]


def test_a_node_relabelled_into_another_clique_leaves_its_block_and_slurm_is_told() -> None:
    w = World()
    for _ in range(3):
        w.resync()
    for _ in range(2):
        w.resync(seconds=DELAY.total_seconds())
    before = w.slurm.reconfigures
    assert before == 1
    # The Node under cpu-0 is moved into a clique of its own (a re-cabled host).
    w.kube.nodes[w.placed()["cpu-0"]]["metadata"]["labels"][CLIQUE] = "c3"
    w.resync()
    text = w.topology()["data"]["topology.yaml"]
    blocks = _by_name(text)["nvl"]["block"]["blocks"]
    # c1 and c3 now hold one node each, under the base block size: neither is a block yet.
    assert [(b["block"], _hosts(b["nodes"])) for b in blocks] == [("c2", ["cpu-2", "cpu-3"])]
    assert "BlockName=c1 Nodes=cpu-1 (fewer registered nodes" in text
    assert "BlockName=c3 Nodes=cpu-0 (fewer registered nodes" in text
    # The tree topology doesn't look at the clique: its switches stay as they were.
    leaves = {sw["switch"]: _hosts(sw["nodes"]) for sw in _by_name(text)["fabric"]["tree"]["switches"] if "nodes" in sw}
    assert leaves == {"l1": ["cpu-0", "cpu-1"], "l2": ["cpu-2", "cpu-3"]}
    assert w.slurm.reconfigures == before  # not until the kubelet delay has passed
    w.resync(seconds=DELAY.total_seconds())
    w.resync()
    assert w.slurm.reconfigures == before + 1


def _hosts(expr: str) -> list[str]:
    return sorted(expand(expr))
