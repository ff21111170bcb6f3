"""Eviction protection: a PodDisruptionBudget per slurmd pod whose Slurm node may run jobs, removed
once the node is drained and idle (runtime/operator/plan.py, sunk/manifests/nodeset_pdb.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import kubernetes_validate
from sunk.runtime.operator.model import Budget, NodeSetObject, Observed, Pod, Protect, Unprotect
from sunk.runtime.operator.plan import plan
from sunk.runtime.operator.reconcile import Reconciler

from sunk import keys
from sunk.manifests.config import config_maps
from sunk.manifests.nodeset_pod import template_hash
from sunk.stackfile import load_stack
from tests.support.fakes.operator import FakeKube, FakeSlurm, slurm_node
from tests.support.nodeset_objects import config_map_objects, nodeset_object, resource_spec
from tests.support.stacks import FIXTURE_STACKS

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
CLUSTER = load_stack("acme-dev", FIXTURE_STACKS).spec
KEYS = {cm["metadata"]["name"]: frozenset(cm["data"]) for cm in config_maps(CLUSTER)}
NS = "acme-research"
SPEC = resource_spec(CLUSTER, "cpu", replicas=2)
HASH = template_hash(SPEC, KEYS)


def pod(n: int, *, deleting: bool = False) -> Pod:
    return Pod(f"research-cpu-{n}", f"cpu-{n}", n, None, "k1", True, deleting, HASH, f"uid-{n}")


def protection(pods: list[Pod], slurm: dict[str, Any] | None, budgets: Sequence[Budget] = ()) -> list[Any]:
    obs = Observed(NodeSetObject("research-cpu", NS, "u", 1, SPEC), pods, {}, slurm, KEYS, budgets=budgets)
    return [a for a in plan(obs, NOW) if isinstance(a, Protect | Unprotect)]


def test_a_registered_pod_gets_a_budget_that_selects_it_alone() -> None:
    slurm = {
        "cpu-0": slurm_node("cpu-0", "ALLOCATED", features=["cpu"]),
        "cpu-1": slurm_node("cpu-1", features=["cpu"]),
    }
    out = protection([pod(0), pod(1)], slurm)
    assert [(type(a).__name__, a.slurm_node) for a in out] == [("Protect", "cpu-0"), ("Protect", "cpu-1")]
    budget = out[0].budget
    kubernetes_validate.validate(budget, "1.30", strict=True)
    assert budget["metadata"]["name"] == "research-cpu-0" and budget["metadata"]["namespace"] == NS
    assert budget["spec"]["maxUnavailable"] == 0
    assert budget["spec"]["selector"]["matchLabels"] == {
        "slurm.sunk.dev/cluster": "research",
        "slurm.sunk.dev/nodeset": "cpu",
        keys.NODE: "cpu-0",
    }
    assert budget["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "research-cpu-0", "uid": "uid-0"}
    ]


def test_a_draining_node_stays_protected_until_its_jobs_end() -> None:
    budgets = [Budget("research-cpu-0", "cpu-0")]
    # The syncer drained it (a foreign reason counts): jobs still run, so the budget stays.
    draining = {"cpu-0": slurm_node("cpu-0", "MIXED", "DRAIN", features=["cpu"], reason="sunk:syncer cordoned")}
    assert protection([pod(0)], draining, budgets) == []
    drained = {"cpu-0": slurm_node("cpu-0", "IDLE", "DRAIN", features=["cpu"], reason="sunk:syncer cordoned")}
    out = protection([pod(0)], drained, budgets)
    assert out == [Unprotect("research-cpu-0", "cpu-0", "its Slurm node is drained and idle: evictions allowed")]
    # Still completing a job: not idle yet.
    completing = {"cpu-0": slurm_node("cpu-0", "IDLE", "DRAIN", "COMPLETING", features=["cpu"], reason="x")}
    assert protection([pod(0)], completing, budgets) == []


def test_resumed_node_is_protected_again() -> None:
    assert [type(a) for a in protection([pod(0)], {"cpu-0": slurm_node("cpu-0", features=["cpu"])})] == [Protect]


def test_budgets_of_pods_gone_leaving_or_unregistered_are_removed() -> None:
    budgets = [Budget("research-cpu-0", "cpu-0"), Budget("research-cpu-1", "cpu-1"), Budget("research-cpu-2", "cpu-2")]
    slurm = {"cpu-0": slurm_node("cpu-0", "ALLOCATED", features=["cpu"])}
    out = protection([pod(0, deleting=True), pod(1)], slurm, budgets)
    assert [(type(a).__name__, a.slurm_node) for a in out] == [
        ("Unprotect", "cpu-0"),  # leaving: the operator deletes, it does not evict
        ("Unprotect", "cpu-1"),  # never registered in Slurm: nothing to protect
        ("Unprotect", "cpu-2"),  # its pod is gone
    ]


def test_slurm_unreadable_neither_creates_nor_removes_budgets() -> None:
    assert protection([pod(0), pod(1)], None, [Budget("research-cpu-0", "cpu-0")]) == []


def test_budgets_unreadable_neither_creates_nor_removes_budgets() -> None:
    obs = Observed(NodeSetObject("research-cpu", NS, "u", 1, SPEC), [pod(0)], {}, {}, KEYS, budgets=None)
    assert [a for a in plan(obs, NOW) if isinstance(a, Protect | Unprotect)] == []


def test_a_role_without_pdbs_pauses_protection_and_nothing_else() -> None:
    class NoPdbKube(FakeKube):
        def list_budgets(self) -> list[dict[str, Any]]:
            raise PermissionError("poddisruptionbudgets is forbidden")

    kube, slurm = NoPdbKube(), FakeSlurm()
    kube.add(nodeset_object(SPEC, namespace=NS))
    for cm in config_map_objects(CLUSTER, namespace=NS):
        kube.add(cm)
    report = Reconciler(kube, lambda ref: slurm, clock=lambda: NOW).resync()
    assert len(kube.pods) == 2 and not kube.budgets and not report.errors


def test_reconciler_keeps_budgets_in_step_with_slurm() -> None:
    kube, slurm = FakeKube(), FakeSlurm()
    kube.add(nodeset_object(SPEC, namespace=NS))
    for cm in config_map_objects(CLUSTER, namespace=NS):
        kube.add(cm)
    kube.add(
        {"kind": "Node", "metadata": {"name": "k1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    r = Reconciler(kube, lambda ref: slurm, clock=lambda: NOW)
    r.resync()
    kube.run_pods("k1")
    for name in ("cpu-0", "cpu-1"):
        slurm.register(name, ["cpu"])
    r.resync()
    assert sorted(n for _, n in kube.budgets) == ["research-cpu-0", "research-cpu-1"]
    assert kube.event_reasons().count("Protect") == 2
    assert kube.nodesets[(NS, "research-cpu")]["status"]["protected"] == 2
    slurm.drain("cpu-1", "sunk:syncer Kubernetes Node k1 is cordoned")
    r.resync()
    assert sorted(n for _, n in kube.budgets) == ["research-cpu-0"]
    assert kube.event_reasons().count("Unprotect") == 1
    assert kube.nodesets[(NS, "research-cpu")]["status"]["protected"] == 1
    r.resync()  # steady: nothing more
    assert kube.event_reasons().count("Protect") == 2 and kube.event_reasons().count("Unprotect") == 1
