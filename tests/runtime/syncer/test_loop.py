"""The cycle with in-memory servers: convergence, zero writes in steady state, fail closed,
batching, metrics and probes."""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry
from sunk.runtime.common.health import HealthServer
from sunk.runtime.slurmrest import Node, read_pod_ref
from sunk.runtime.syncer.loop import CycleReport, Syncer
from sunk.runtime.syncer.model import (
    node_condition,
    node_drain_annotation,
)
from sunk.runtime.syncer.plan import Drain, Resume

from sunk import keys
from tests.support.fakes.syncer import FakeKube, FakeSlurm, node_object, pod_object

NS = "tenant"


def cluster(n: int = 4) -> tuple[FakeSlurm, FakeKube, Syncer]:
    slurm = FakeSlurm([Node(name=f"cpu-{i}", state=("IDLE",)) for i in range(n)])
    kube = FakeKube()
    for i in range(n):
        kube.add_node(node_object(f"k{i}"))
        kube.add_pod(pod_object(NS, f"cpu-{i}", nodeset="cpu", node_name=f"k{i}"))
    # A pod of another tenant with a colliding hostname must not be touched.
    kube.add_pod(pod_object("other", "cpu-0", nodeset="cpu", node_name="k0"))
    clock = lambda: datetime(2025, 1, 1, tzinfo=UTC)  # noqa: E731
    return slurm, kube, Syncer(slurm, kube, NS, registry=CollectorRegistry(), clock=clock)


def test_converges_then_writes_nothing() -> None:
    slurm, kube, syncer = cluster()
    first = syncer.cycle()
    assert first.ok and first.slurm_writes == 4  # the pod mapping, once per node
    assert first.kube_writes == 8  # annotations + condition per pod
    assert all(read_pod_ref(n.extra) is not None for n in slurm.nodes.values())
    pod = kube.pods[(NS, "cpu-1")]
    assert pod["metadata"]["annotations"][keys.SLURM_STATE] == "idle"
    assert [c["type"] for c in pod["status"]["conditions"]] == ["Ready", keys.SLURM_NODE_READY]
    assert "annotations" not in kube.pods[("other", "cpu-0")]["metadata"]
    for _ in range(3):
        steady = syncer.cycle()
        assert (steady.slurm_requests, steady.slurm_writes, steady.kube_writes, steady.actions) == (1, 0, 0, [])


def test_cordon_drain_uncordon_resume_round_trip() -> None:
    slurm, kube, syncer = cluster()
    syncer.cycle()
    kube.nodes["k1"]["spec"]["unschedulable"] = True
    kube.nodes["k2"]["spec"]["unschedulable"] = True
    report = syncer.cycle()
    assert report.slurm_writes == 2  # one drain per reason (each Node name differs)
    assert slurm.nodes["cpu-1"].drain and slurm.nodes["cpu-1"].reason == "sunk: Node k1 cordoned"
    syncer.cycle()  # the pods now show the drain
    assert kube.pods[(NS, "cpu-1")]["metadata"]["annotations"][keys.SLURM_STATE] == "drain"
    assert node_drain_annotation(NS) not in kube.nodes["k1"]["metadata"]["annotations"]  # our own drain
    assert syncer.cycle().kube_writes == 0
    del kube.nodes["k1"]["spec"]["unschedulable"]
    del kube.nodes["k2"]["spec"]["unschedulable"]
    report = syncer.cycle()
    assert report.slurm_writes == 1  # both resumes in one batch request
    assert not slurm.nodes["cpu-1"].drain and not slurm.nodes["cpu-2"].drain
    # Every drain and resume left an Event on its pod, and only those did.
    seen = sorted((e["involvedObject"]["name"], e["reason"], e["type"]) for e in kube.events)
    assert seen == [
        ("cpu-1", "SlurmNodeDrained", "Warning"),
        ("cpu-1", "SlurmNodeResumed", "Normal"),
        ("cpu-2", "SlurmNodeDrained", "Warning"),
        ("cpu-2", "SlurmNodeResumed", "Normal"),
    ]
    drained = next(e for e in kube.events if e["reason"] == "SlurmNodeDrained")
    assert drained["message"] == "Slurm node cpu-1 drained: sunk: Node k1 cordoned"
    assert drained["metadata"]["namespace"] == NS and drained["involvedObject"]["uid"] == f"uid-{NS}-cpu-1"


def test_same_reason_drains_go_as_one_batch() -> None:
    slurm, kube, syncer = cluster()
    for i in range(4):
        kube.add_pod(pod_object(NS, f"cpu-{i}", nodeset="cpu", node_name="k0"))
    syncer.cycle()
    kube.nodes["k0"]["spec"]["unschedulable"] = True
    before = slurm.requests
    report = syncer.cycle()
    assert report.slurm_writes == 1 and slurm.requests - before == 2  # list + one batch
    assert all(n.reason == "sunk: Node k0 cordoned" for n in slurm.nodes.values())


def test_admin_drain_annotates_node_and_is_never_resumed() -> None:
    slurm, kube, syncer = cluster()
    syncer.cycle()
    slurm.admin("cpu-3", state="DRAIN", reason="bad DIMM")
    syncer.cycle()
    assert kube.nodes["k3"]["metadata"]["annotations"][node_drain_annotation(NS)] == "cpu-3: bad DIMM"
    cond = kube.nodes["k3"]["status"]["conditions"][-1]
    assert (cond["type"], cond["status"]) == (node_condition(NS), "True")
    for _ in range(3):
        syncer.cycle()
    assert slurm.nodes["cpu-3"].drain and slurm.nodes["cpu-3"].reason == "bad DIMM"
    slurm.admin("cpu-3", state="RESUME")
    syncer.cycle()
    assert node_drain_annotation(NS) not in kube.nodes["k3"]["metadata"]["annotations"]
    assert kube.nodes["k3"]["status"]["conditions"][-1]["status"] == "False"
    assert syncer.cycle().kube_writes == 0


def test_slurm_unreadable_changes_nothing_anywhere() -> None:
    slurm, kube, syncer = cluster()
    syncer.cycle()
    kube.nodes["k1"]["spec"]["unschedulable"] = True
    del kube.pods[(NS, "cpu-2")]
    slurm.down = True
    writes = (slurm.writes, kube.writes)
    report = syncer.cycle()
    assert not report.ok and report.errors and (slurm.writes, kube.writes) == writes
    assert not syncer.last_ok


def test_kubernetes_unreadable_changes_nothing() -> None:
    # Without the pod list every mapped node would look "pod deleted": never act on that.
    slurm, kube, syncer = cluster()
    syncer.cycle()
    kube.fail_reads = True
    writes = (slurm.writes, kube.writes)
    assert not syncer.cycle().ok
    assert (slurm.writes, kube.writes) == writes


def test_pod_deleted_drains_and_recreated_pod_resumes() -> None:
    slurm, kube, syncer = cluster()
    syncer.cycle()
    gone = kube.pods.pop((NS, "cpu-0"))
    syncer.cycle()
    assert slurm.nodes["cpu-0"].reason == f"sunk: slurmd pod {NS}/cpu-0 deleted"
    gone["metadata"]["uid"] = "uid-new"
    kube.add_pod(gone)
    syncer.cycle()
    assert not slurm.nodes["cpu-0"].drain
    ref = read_pod_ref(slurm.nodes["cpu-0"].extra)
    assert ref is not None and ref.uid == "uid-new"


def test_a_restarted_syncer_drains_for_a_pod_deleted_while_it_was_away() -> None:
    slurm, kube, syncer = cluster()
    syncer.cycle()  # records the mapping in Slurm
    del kube.pods[(NS, "cpu-3")]
    fresh = Syncer(slurm, kube, NS, registry=CollectorRegistry())  # no memory of the pod
    fresh.cycle()
    assert slurm.nodes["cpu-3"].reason == f"sunk: slurmd pod {NS}/cpu-3 deleted"


def test_a_vanished_slurm_node_fails_one_write_not_the_cycle() -> None:
    slurm, _, syncer = cluster()
    report = CycleReport()
    syncer.apply([Drain("gone", "sunk: x"), Drain("cpu-1", "sunk: x"), Resume("cpu-2")], report)
    # The batch is refused for the unknown name, then retried node by node.
    assert slurm.nodes["cpu-1"].reason == "sunk: x"
    assert report.slurm_writes == 2 and len(report.errors) == 1 and "2018" in report.errors[0]


def test_metrics_and_probes_are_served() -> None:
    slurm, _, syncer = cluster()
    registry = CollectorRegistry()
    syncer = Syncer(slurm, syncer.kube, NS, registry=registry)
    syncer.cycle()
    ready = [True]
    server = HealthServer(0, registry, alive=lambda: (True, "ok"), ready=lambda: (ready[0], "r"), host="127.0.0.1")
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        text = urllib.request.urlopen(f"{base}/metrics").read().decode()
        assert 'sunk_syncer_slurm_nodes{state="idle"} 4.0' in text
        assert "sunk_syncer_cycle_seconds_count 1.0" in text
        assert 'sunk_syncer_writes_total{kind="SetPodRef",target="slurm"} 4.0' in text
        assert urllib.request.urlopen(f"{base}/healthz").status == 200
        ready[0] = False
        try:
            urllib.request.urlopen(f"{base}/readyz")
            raise AssertionError("expected 503")
        except urllib.error.HTTPError as exc:
            assert exc.code == 503
    finally:
        server.stop()


def test_runtime_trust_two_tenants_on_shared_nodes_never_fight() -> None:
    """Runtime trust: two tenants' syncers see the same Kubernetes Nodes, each with a
    slurmd of its own drained by its own admin. Each writes its own annotation and condition; once
    both have converged, neither writes again (before, both patched one key every cycle)."""
    kube = FakeKube()
    kube.add_node(node_object("k0"))
    syncers, slurms = [], []
    for tenant in ("acme", "globex"):
        slurm = FakeSlurm([Node(name="cpu-0", state=("IDLE",))])
        kube.add_pod(pod_object(tenant, "cpu-0", nodeset="cpu", node_name="k0"))
        slurms.append(slurm)
        syncers.append(Syncer(slurm, kube, tenant, registry=CollectorRegistry()))
    for syncer in syncers:
        syncer.cycle()
    slurms[0].admin("cpu-0", state="DRAIN", reason="acme: bad DIMM")
    slurms[1].admin("cpu-0", state="DRAIN", reason="globex: firmware")
    for _ in range(2):
        for syncer in syncers:
            syncer.cycle()
    annotations = kube.nodes["k0"]["metadata"]["annotations"]
    assert annotations[node_drain_annotation("acme")] == "cpu-0: acme: bad DIMM"
    assert annotations[node_drain_annotation("globex")] == "cpu-0: globex: firmware"
    types = [c["type"] for c in kube.nodes["k0"]["status"]["conditions"]]
    assert types.count(node_condition("acme")) == types.count(node_condition("globex")) == 1
    for _ in range(3):
        for syncer in syncers:
            assert syncer.cycle().kube_writes == 0
    # One tenant's drain ends: only its keys change, the other's stay.
    slurms[0].admin("cpu-0", state="RESUME")
    syncers[0].cycle()
    annotations = kube.nodes["k0"]["metadata"]["annotations"]
    assert node_drain_annotation("acme") not in annotations
    assert annotations[node_drain_annotation("globex")] == "cpu-0: globex: firmware"
    assert syncers[1].cycle().kube_writes == 0


def test_runtime_trust_a_pod_shows_the_drain_reason_only_while_drained() -> None:
    """Runtime trust: the fake keeps a node's reason after RESUME, as Slurm 24.11 may;
    the pod's reason annotation and condition message go when the drain ends all the same."""
    slurm, kube, syncer = cluster()
    syncer.cycle()
    slurm.admin("cpu-2", state="DRAIN", reason="bad DIMM")
    syncer.cycle()
    pod = kube.pods[(NS, "cpu-2")]
    assert pod["metadata"]["annotations"][keys.SLURM_REASON] == "bad DIMM"
    slurm.admin("cpu-2", state="RESUME")
    assert slurm.nodes["cpu-2"].reason == "bad DIMM" and not slurm.nodes["cpu-2"].drain
    syncer.cycle()
    pod = kube.pods[(NS, "cpu-2")]
    assert keys.SLURM_REASON not in pod["metadata"]["annotations"]
    assert pod["metadata"]["annotations"][keys.SLURM_STATE] == "idle"
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == keys.SLURM_NODE_READY)
    assert (condition["status"], condition["message"]) == ("True", "")
    assert syncer.cycle().kube_writes == 0


def test_keys_all_tenants_shared_before_are_removed_from_nodes_and_stay_removed() -> None:
    from sunk import keys

    _, kube, syncer = cluster()
    kube.nodes["k1"]["metadata"]["annotations"][keys.LEGACY_NODE_DRAIN] = "cpu-1: old"
    kube.nodes["k1"]["status"]["conditions"].append({"type": keys.LEGACY_NODE_CONDITION, "status": "True"})
    syncer.cycle()
    assert keys.LEGACY_NODE_DRAIN not in kube.nodes["k1"]["metadata"]["annotations"]
    assert [c["type"] for c in kube.nodes["k1"]["status"]["conditions"]] == ["Ready"]  # the kubelet's stays
    syncer.cycle()
    assert syncer.cycle().kube_writes == 0


def test_planning_only_what_changed_misses_nothing_a_full_plan_would_do() -> None:
    """Random changes on both sides, one at a time: the syncer plans only what changed, and after
    it settles a syncer that plans everything (a fresh one) finds nothing left to do. Each change
    is one the syncer reacts to (cordons, NotReady, Node and pod deletions, pods moving, admin
    drains and resumes, legacy keys, annotations edited by hand)."""
    import random

    from sunk import keys

    rng = random.Random(17)
    slurm, kube, syncer = cluster(8)
    syncer.cycle()  # the first cycle plans everything
    scoped = cycles = 0

    def change() -> None:
        i = rng.randrange(8)
        node, pod_key = f"k{i}", (NS, f"cpu-{i}")
        pick = rng.randrange(9)
        if pick == 0 and node in kube.nodes:
            spec = kube.nodes[node]["spec"]
            spec["unschedulable"] = not spec.get("unschedulable")
        elif pick == 1 and node in kube.nodes:
            kube.nodes[node]["status"]["conditions"][0]["status"] = rng.choice(["True", "False", "Unknown"])
        elif pick == 2:
            slurm.admin(f"cpu-{i}", state=rng.choice(["DRAIN", "RESUME"]), reason="admin work")
        elif pick == 3 and pod_key in kube.pods:
            del kube.pods[pod_key]
        elif pick == 4:
            kube.add_pod(
                pod_object(NS, f"cpu-{i}", nodeset="cpu", node_name=f"k{rng.randrange(8)}", uid=f"u{rng.random()}")
            )
        elif pick == 5 and node in kube.nodes:
            del kube.nodes[node]
        elif pick == 6:
            kube.add_node(node_object(node))
        elif pick == 7 and node in kube.nodes:
            kube.nodes[node]["metadata"]["annotations"][keys.LEGACY_NODE_DRAIN] = "cpu-0: old"
        elif pick == 8 and pod_key in kube.pods:
            kube.pods[pod_key]["metadata"].setdefault("annotations", {})[keys.SLURM_STATE] = "edited"

    for _ in range(150):
        change()
        for _ in range(6):
            report = syncer.cycle()
            assert report.ok and not report.errors
            cycles += 1
            scoped += report.scope is not None
            if not report.actions:
                break
        left = Syncer(slurm, kube, NS, registry=CollectorRegistry()).cycle().actions
        assert left == [], left
    assert scoped == cycles > 150  # every later cycle planned only what changed
