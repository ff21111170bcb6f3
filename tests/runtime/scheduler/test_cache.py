"""The scheduler's watch-fed view (runtime/scheduler/cache.py), on informers driven step by step
against an in-memory list/watch server (tests/support/listwatch.py), and a scheduler cycle on it
that neither lists nor reads a pod: "no per-bind GET, no list per cycle", so the API server's load does not grow with binds."""

from __future__ import annotations

from typing import Any

import pytest
from sunk.runtime.common.informer import Informer
from sunk.runtime.scheduler.cache import (
    NotSynced,
    PodEntry,
    WatchedCluster,
    assigned_pod,
    node_entry,
    our_pod,
    pod_entry,
    slurmd_pod,
)
from sunk.runtime.scheduler.loop import Scheduler
from sunk.runtime.scheduler.plan import Bind, Unfit
from sunk.runtime.slurmrest.podref import PodRef

from sunk import keys
from tests.support.fakes.scheduler import FakeKube, FakeSlurm
from tests.support.listwatch import FakeListWatch


def pod(
    name: str,
    ns: str = "ml",
    *,
    cpu: str = "1",
    node: str = "",
    phase: str = "Pending",
    scheduler: str = "sunk-scheduler",
    labels: dict[str, str] | None = None,
    hostname: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }
    if node:
        spec["nodeName"] = node
    if hostname:
        spec["hostname"] = hostname
    meta = {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": dict(labels or {})}
    meta["creationTimestamp"] = "2026-11-23T00:00:00Z"
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def kube_node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


class World:
    """The two informers on in-memory API servers (FakeListWatch keys objects by name)."""

    def __init__(self) -> None:
        self.pods, self.nodes = FakeListWatch(), FakeListWatch()
        self.woken = 0
        transform = pod_entry("sunk-scheduler", ["ml"], "slurm", on_ours=self.wake)
        self.pod_informer: Informer[PodEntry] = Informer(self.pods, transform, name="pods", jitter=lambda: 0.0)
        self.node_informer = Informer(self.nodes, node_entry, name="nodes", jitter=lambda: 0.0)
        self.clock = [0.0]
        self.cache = WatchedCluster(self.pod_informer, self.node_informer, clock=lambda: self.clock[0], assume_ttl=30.0)

    def wake(self) -> None:
        self.woken += 1

    def put(self, obj: dict[str, Any]) -> None:
        self.pods.put(obj)

    def sync(self) -> None:
        self.pod_informer.step()
        self.node_informer.step()

    def lists(self) -> int:
        return len(self.pods.list_calls) + len(self.nodes.list_calls)


def slurmd(slurm_node: str, node: str, mode: str = "shared") -> dict[str, Any]:
    labels = {keys.NODESET: "cpu", keys.RESOURCE_MODE: mode}
    return pod(f"slurmd-{slurm_node}", "slurm", cpu="500m", node=node, scheduler="", labels=labels, hostname=slurm_node)


def test_projections_keep_only_what_the_scheduler_reads() -> None:
    transform = our_pod("sunk-scheduler", ["ml"])
    assert transform(pod("web")) is not None
    assert transform(pod("web", scheduler="default-scheduler")) is None
    assert transform(pod("web", ns="other")) is None
    assert transform(pod("web", phase="Succeeded")) is None  # an ended pod's job is cancelled
    assert our_pod("sunk-scheduler", ["*"])(pod("web", ns="other")) is not None

    kept = slurmd_pod("slurm")(slurmd("cpu-0", "k8s-a"))
    assert kept == {
        "metadata": {"labels": {keys.NODESET: "cpu", keys.RESOURCE_MODE: "shared"}, "deletionTimestamp": None},
        "spec": {"hostname": "cpu-0", "nodeName": "k8s-a"},
    }
    assert slurmd_pod("slurm")(pod("web", "slurm")) is None  # no NodeSet label

    assert assigned_pod(pod("web")) is None  # no Node yet
    assert assigned_pod(pod("web", node="k8s-a", phase="Failed")) is None  # frees its requests
    on_node = assigned_pod(pod("web", node="k8s-a", cpu="250m"))
    assert on_node is not None and on_node.requests == {"cpu": 250, "memory": 2**30}
    broken = assigned_pod(pod("web", node="k8s-a", cpu="lots"))
    assert broken is not None and "lots" in broken.error
    assert node_entry(kube_node("k8s-a")).allocatable == {"cpu": 4000, "memory": 16 * 2**30, "pods": 110}

    woken: list[str] = []
    entry = pod_entry("sunk-scheduler", ["ml"], "slurm", on_ours=lambda: woken.append("x"))
    assert entry(pod("other", scheduler="default-scheduler")) is None  # unbound, not ours: not kept
    assert woken == []  # other pods of the cluster do not wake the loop
    daemon = entry(pod("daemon", "kube-system", node="k8s-a", scheduler="default-scheduler"))
    assert daemon is not None and daemon.ours is None and daemon.assigned is not None and woken == []
    mine = entry(pod("web", node="k8s-a"))
    assert mine is not None and mine.ours is not None and mine.assigned is not None and woken == ["x"]
    assert entry(pod("web", phase="Succeeded")) is None and woken == ["x", "x"]  # its job must end


def test_nothing_is_read_before_every_informer_has_listed() -> None:
    world = World()
    world.pod_informer.step()
    with pytest.raises(NotSynced):
        world.cache.snapshot()


def test_a_node_counts_every_pod_on_it_in_any_namespace_and_ended_pods_free_their_requests() -> None:
    world = World()
    world.nodes.put(kube_node("k8s-a"))
    world.put(slurmd("cpu-0", "k8s-a"))
    world.put(pod("daemon", "kube-system", cpu="1", node="k8s-a", scheduler="default-scheduler"))
    world.put(pod("web"))
    world.sync()
    snap = world.cache.snapshot()
    assert [p.name for p in snap.pods] == ["web"]
    view = snap.node_views(["k8s-a", "k8s-missing"])
    assert list(view) == ["k8s-a"]  # a Node that does not exist is left out: nothing bound there
    assert view["k8s-a"].used["cpu"] == 1500 and view["k8s-a"].pods == 2

    world.put(pod("daemon", "kube-system", cpu="1", node="k8s-a", scheduler="default-scheduler", phase="Succeeded"))
    world.sync()
    assert world.cache.snapshot().node_views(["k8s-a"])["k8s-a"].used["cpu"] == 500
    assert world.lists() == 2  # one list per informer, at start; the rest came by watch


def test_an_accepted_binding_counts_at_once_and_once_until_the_watch_shows_it() -> None:
    world = World()
    world.nodes.put(kube_node("k8s-a"))
    world.put(pod("web"))
    world.sync()
    ref = PodRef("ml", "web", "uid-web")
    world.cache.assume(ref, "k8s-a", {keys.JOB_ID: "7"})
    snap = world.cache.snapshot()
    [web] = snap.pods
    assert web.node_name == "k8s-a" and web.annotations[keys.JOB_ID] == "7"
    assert snap.node_views(["k8s-a"])["k8s-a"].used["cpu"] == 1000

    world.put(pod("web", node="k8s-a"))  # the watch shows the Binding: counted once, as the watch has it
    world.pod_informer.step()
    assert world.cache.snapshot().node_views(["k8s-a"])["k8s-a"].used["cpu"] == 1000
    assert world.cache.assumed == 0


def test_an_assumption_ends_when_the_pod_is_gone_or_after_its_ttl() -> None:
    world = World()
    world.nodes.put(kube_node("k8s-a"))
    world.put(pod("a"))
    world.put(pod("b"))
    world.sync()
    world.cache.assume(PodRef("ml", "a", "uid-a"), "k8s-a", {})
    world.cache.assume(PodRef("ml", "b", "uid-b"), "k8s-a", {})
    world.pods.remove("a")
    world.pod_informer.step()
    assert world.cache.snapshot().node_views(["k8s-a"])["k8s-a"].used["cpu"] == 1000  # b only
    world.clock[0] = 31.0  # the watch never said: the informer's picture wins again
    assert world.cache.snapshot().node_views(["k8s-a"])["k8s-a"].used == {}
    assert world.cache.assumed == 0


def test_a_cycle_on_the_cache_neither_lists_nor_reads_and_never_overfills_a_node() -> None:
    """Two pods whose jobs Slurm ran on one Node with room for one more pod (beside slurmd): the
    first is bound; the next cycle, before any watch event, counts it (assumed) and binds nothing
    more there. No list, no GET: FakeKube raises on both."""
    world = World()
    world.nodes.put(kube_node("k8s-a", cpu="2"))
    world.put(slurmd("cpu-0", "k8s-a"))
    for name in ("a", "b"):
        world.put(pod(name))
    world.sync()
    kube = FakeKube(fail_lists=True, fail_node_reads=True)
    kube.get_pod = lambda ref: pytest.fail(f"GET of {ref} before its Binding")  # type: ignore[method-assign]
    for name in ("a", "b"):
        kube.add_pod(pod(name))
    slurm = FakeSlurm()
    sched = Scheduler(
        kube,
        slurm,
        scheduler_name="sunk-scheduler",
        namespace="slurm",
        pod_namespaces=["ml"],
        cache=world.cache,
        clock=lambda: 1000.0,  # FakeSlurm's submit time: b's job pending, not yet news
    )
    sched.cycle()
    [(job_a, _, _), (job_b, _, _)] = slurm.submitted
    slurm.start(job_a, ("cpu-0",))
    actions = sched.cycle()
    assert [type(a) for a in actions] == [Bind]
    slurm.start(job_b, ("cpu-0",))
    actions = sched.cycle()  # no watch event yet: "a" is assumed on k8s-a
    assert [type(a) for a in actions] == [Unfit]
    assert [ref.name for ref, _ in kube.bindings] == ["a"]
    assert world.lists() == 2
    sched.close()
