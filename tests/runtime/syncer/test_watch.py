"""The syncer's Kubernetes side from watches, over HTTP (kubesim): after the first lists a quiet
cycle makes no Kubernetes request at all, a change arrives by the watch and is planned alone,
and a watch that loses its place (410) lists again without a missed change. Slurm is the
in-memory FakeSlurm (the real-Slurm side is tests/runtime/syncer/test_real_slurm.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry
from sunk.runtime.slurmrest import Node
from sunk.runtime.syncer.cache import InformerCache
from sunk.runtime.syncer.kube import KubernetesApi
from sunk.runtime.syncer.loop import Syncer
from sunk.runtime.syncer.model import node_drain_annotation
from sunk.runtime.syncer.plan import Drain

from sunk import keys
from tests.support.fakes.syncer import FakeSlurm, node_object, pod_object
from tests.support.kubesim import KubeSim
from tests.support.rawclient import raw

NS = "acme"
N = 6
ALLOCATABLE = {"cpu": "4", "memory": "8Gi"}


class World:
    def __init__(self, sim: KubeSim) -> None:
        self.sim = sim
        self.api = client.CoreV1Api(sim.api_client())
        self.slurm = FakeSlurm([Node(name=f"cpu-{i}", state=("IDLE",)) for i in range(N)])
        nodes = []
        for i in range(N):
            node = node_object(f"k{i}")
            node["status"]["allocatable"] = dict(ALLOCATABLE)
            nodes.append(node)
        sim.seed("v1/nodes", nodes)
        sim.seed("v1/pods", [pod_object(NS, f"cpu-{i}", nodeset="cpu", node_name=f"k{i}") for i in range(N)])
        # Another tenant's slurmd with a colliding name, and a pod of ours that is no slurmd.
        sim.seed("v1/pods", [pod_object("other", "cpu-0", nodeset="cpu", node_name="k0")])
        web = pod_object(NS, "web", nodeset="x", node_name="k1")
        del web["metadata"]["labels"]
        sim.seed("v1/pods", [web])
        self.cache = InformerCache(sim.api_client(), NS).start()
        self.registry = CollectorRegistry()
        self.syncer = Syncer(
            self.slurm,
            KubernetesApi(sim.api_client()),
            NS,
            cache=self.cache,
            registry=self.registry,
            clock=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        )

    def settle(self) -> None:
        """Cycles until one has nothing to look at: every write of ours came back by the watch
        (a few milliseconds after its reply) and planned nothing more."""
        for _ in range(40):
            report = self.syncer.cycle()
            assert report.ok, report.errors
            scope = report.scope
            if not report.actions and scope is not None and not (scope.slurm_nodes or scope.kube_nodes):
                return
            self.quiet()
        raise AssertionError("no steady state")

    def quiet(self) -> None:
        """Until neither informer has seen a change for 0.3 s: the events of our own writes are in
        (the syncer's cache has each write from its reply already; this makes the counts exact)."""
        for informer in (self.cache.nodes, self.cache.pods, self.cache.nodes):
            while informer.wait_for_change(informer.seq, 0.3):
                pass

    def seqs(self) -> tuple[int, int]:
        return self.cache.nodes.seq, self.cache.pods.seq

    def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        before = self.seqs()
        self.api.patch_node(name, patch, _content_type="application/merge-patch+json", _preload_content=False)
        assert self.cache.nodes.wait_for_change(before[0], 10)

    def pod(self, name: str) -> dict[str, Any]:
        return raw(self.api.read_namespaced_pod(name, NS, _preload_content=False))

    def close(self) -> None:
        self.syncer.close()


@pytest.fixture
def world() -> Iterator[World]:
    with KubeSim() as sim:
        w = World(sim)
        try:
            yield w
        finally:
            w.close()


def test_quiet_cycles_make_no_kubernetes_request_after_the_first_lists(world: World) -> None:
    world.settle()
    assert world.sim.requests[("list", "nodes")] == 1 and world.sim.requests[("list", "pods")] == 1
    assert "annotations" not in world.pod("web")["metadata"]  # no slurmd: not ours
    before = world.sim.requests
    for _ in range(5):
        report = world.syncer.cycle()
        assert report.ok and report.actions == []
        assert (report.slurm_requests, report.slurm_writes, report.kube_writes, report.kube_reads) == (1, 0, 0, 0)
        assert report.scope is not None and not report.scope.slurm_nodes  # nothing to look at
    assert world.sim.requests == before  # not one request: no list, no new watch, no write
    # The metric says the same: the two lists and the two watch starts, nothing since.
    assert world.registry.get_sample_value("sunk_syncer_kube_reads_total") == 4


def test_a_cordon_arrives_by_the_watch_and_only_that_node_is_planned(world: World) -> None:
    world.settle()
    writes = world.sim.requests
    world.patch_node("k2", {"spec": {"unschedulable": True}})
    report = world.syncer.cycle()
    assert report.scope is not None and report.scope.slurm_nodes == {"cpu-2"} and report.scope.kube_nodes == {"k2"}
    assert [a for a in report.actions if isinstance(a, Drain)] == [Drain("cpu-2", "sunk: Node k2 cordoned")]
    assert world.slurm.nodes["cpu-2"].drain
    world.settle()  # the pod shows the drain: one pod patched, nothing else
    assert world.pod("cpu-2")["metadata"]["annotations"][keys.SLURM_STATE] == "drain"
    patched = world.sim.requests - writes
    assert patched[("update", "pods")] == 2  # annotations + condition of cpu-2's pod
    assert patched[("update", "nodes")] == 1  # the cordon itself
    assert patched[("list", "nodes")] == patched[("list", "pods")] == 0


def test_a_write_is_not_repeated_while_its_watch_event_is_still_on_the_way(world: World) -> None:
    """The syncer applies each write's reply to its cache (InformerCache.observe): with the pod
    watch stopped, so no event of its own writes ever arrives, and every node planned every cycle,
    a drain still writes the pod once. Without it, each such cycle wrote it again (6 writes)."""
    world.settle()
    world.cache.pods.stop()  # deterministic stand-in for a slow watch: nothing arrives any more
    world.syncer.full_plan_every = 0  # and every cycle plans every node, not only what changed
    writes = world.sim.requests
    world.patch_node("k3", {"spec": {"unschedulable": True}})
    for _ in range(4):
        report = world.syncer.cycle()
        assert report.ok, report.errors
    assert world.pod("cpu-3")["metadata"]["annotations"][keys.SLURM_STATE] == "drain"
    patched = world.sim.requests - writes
    assert patched[("update", "pods")] == 2  # annotations + condition of cpu-3's pod, once each
    assert world.syncer.cycle().kube_writes == 0


def test_a_slurm_drain_is_shown_on_its_pod_and_node_and_nothing_else_is_written(world: World) -> None:
    world.settle()
    before = world.sim.requests
    world.slurm.admin("cpu-4", state="DRAIN", reason="bad DIMM")
    report = world.syncer.cycle()
    assert report.scope is not None and report.scope.slurm_nodes == {"cpu-4"}
    assert report.kube_writes == 4  # the pod's annotations and condition, the Node's annotation and condition
    world.settle()
    patched = world.sim.requests - before
    assert set(patched) == {("update", "pods"), ("update", "nodes")}
    node = raw(world.api.read_node("k4", _preload_content=False))
    assert node["metadata"]["annotations"][node_drain_annotation(NS)] == "cpu-4: bad DIMM"


def test_after_an_api_server_restart_and_410_the_informers_list_again_and_miss_nothing(world: World) -> None:
    world.settle()
    lists = (world.sim.requests[("list", "nodes")], world.sim.requests[("list", "pods")])
    # The API server goes away (watches end, new ones refused) and comes back having compacted
    # its history; meanwhile k3 is cordoned and cpu-5's pod deleted. The informers resume from
    # their versions, get 410 and list again.
    world.sim.drop_watches(refuse=True)
    world.api.patch_node(
        "k3", {"spec": {"unschedulable": True}}, _content_type="application/merge-patch+json", _preload_content=False
    )
    world.api.delete_namespaced_pod("cpu-5", NS, _preload_content=False)
    world.sim.compact()
    seqs = world.seqs()
    world.sim.drop_watches(refuse=False)
    assert world.cache.nodes.wait_for_change(seqs[0], 20) and world.cache.pods.wait_for_change(seqs[1], 20)
    assert world.cache.nodes.relists == 1 and world.cache.pods.relists == 1
    assert (world.sim.requests[("list", "nodes")], world.sim.requests[("list", "pods")]) == (lists[0] + 1, lists[1] + 1)
    world.settle()
    assert world.slurm.nodes["cpu-3"].reason == "sunk: Node k3 cordoned"
    assert world.slurm.nodes["cpu-5"].reason.startswith("sunk: slurmd pod acme/cpu-5")
    # Nothing was missed: a full plan of the same view has nothing left to do.
    fresh = Syncer(world.slurm, KubernetesApi(world.sim.api_client()), NS, registry=CollectorRegistry())
    assert fresh.cycle().actions == []


def test_a_watch_that_keeps_failing_fails_the_cycle_closed_until_it_recovers(world: World) -> None:
    world.settle()
    world.sim.drop_watches(refuse=True)  # the API server answers 503 to every watch
    world.api.patch_node(  # a cordon the syncer can't see
        "k1", {"spec": {"unschedulable": True}}, _content_type="application/merge-patch+json", _preload_content=False
    )
    for _ in range(200):
        if world.cache.nodes.failures >= 3:
            break
        world.cache.nodes.wait_for_change(world.cache.nodes.seq, 0.05)
    report = world.syncer.cycle()
    assert not report.ok and report.actions == [] and "watch failing" in report.errors[0]
    assert not world.slurm.nodes["cpu-1"].drain
    world.sim.drop_watches(refuse=False)
    assert world.cache.nodes.wait_for_change(world.cache.nodes.seq, 40)  # the cordon, after the retry
    for _ in range(400):  # the pod watch reconnects after its own backoff
        if world.cache.pods.watching:
            break
        world.cache.pods.wait_for_change(world.cache.pods.seq, 0.05)
    world.settle()
    assert world.slurm.nodes["cpu-1"].reason == "sunk: Node k1 cordoned"


def test_caches_not_listed_yet_fail_the_cycle_closed(world: World) -> None:
    dead = InformerCache(client.ApiClient(client.Configuration(host="http://127.0.0.1:9")), NS, sync_timeout=0.2)
    syncer = Syncer(
        world.slurm, KubernetesApi(world.sim.api_client()), NS, cache=dead.start(), registry=CollectorRegistry()
    )
    try:
        report = syncer.cycle()
        assert not report.ok and report.actions == [] and world.slurm.writes == 0
        assert "not listed yet" in report.errors[0]
    finally:
        syncer.close()
