"""Node eligibility: nodeSelector, required node affinity, taints and tolerations."""

from __future__ import annotations

from typing import Any

import pytest
from sunk.runtime.operator.matching import eligible, matches_affinity, tolerates
from sunk.runtime.operator.model import KubeNode, Taint

from sunk.spec.nodeset import ARCH_LABEL, NodeSetSpec, Toleration


def ns(**kw: Any) -> NodeSetSpec:
    return NodeSetSpec.model_validate({"name": "gpu", "cpus": 4, "memoryMib": 1024, **kw})


AMD64 = {ARCH_LABEL: "amd64"}
"""What every kubelet labels its Node with (an amd64 one here)."""
NODE = KubeNode("n1", {"zone": "a", "gen": "5", "gpu": "h100", **AMD64})


def term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields is not None:
        t["matchFields"] = fields
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [t]}}}


@pytest.mark.parametrize(
    ("expr", "ok"),
    [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
        ({"key": "zone", "operator": "In", "values": ["b"]}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["b"]}, True),
        ({"key": "missing", "operator": "NotIn", "values": ["b"]}, True),
        ({"key": "gpu", "operator": "Exists"}, True),
        ({"key": "missing", "operator": "Exists"}, False),
        ({"key": "missing", "operator": "DoesNotExist"}, True),
        ({"key": "gpu", "operator": "DoesNotExist"}, False),
        ({"key": "gen", "operator": "Gt", "values": ["4"]}, True),
        ({"key": "gen", "operator": "Lt", "values": ["4"]}, False),
        ({"key": "zone", "operator": "Gt", "values": ["4"]}, False),
        ({"key": "zone", "operator": "Bogus", "values": ["a"]}, False),
    ],
)
def test_match_expressions(expr: dict[str, Any], ok: bool) -> None:
    assert matches_affinity(term(expr), NODE) is ok


def test_terms_are_ored_and_expressions_anded() -> None:
    a = {"key": "zone", "operator": "In", "values": ["a"]}
    b = {"key": "gpu", "operator": "In", "values": ["a100"]}
    assert matches_affinity(term(a, b), NODE) is False
    both = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [b]}, {"matchExpressions": [a]}]
            }
        }
    }
    assert matches_affinity(both, NODE) is True


def test_match_fields_and_empty_terms() -> None:
    assert matches_affinity(term(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}]), NODE)
    assert not matches_affinity(term(fields=[{"key": "metadata.name", "operator": "In", "values": ["n2"]}]), NODE)
    assert not matches_affinity(term(), NODE)
    assert matches_affinity(None, NODE) and matches_affinity({"podAntiAffinity": {}}, NODE)


def test_node_selector() -> None:
    assert eligible(ns(nodeSelector={"zone": "a"}), NODE)
    assert not eligible(ns(nodeSelector={"zone": "a", "gpu": "a100"}), NODE)


def test_architecture_is_part_of_the_selector() -> None:
    """The pods select kubernetes.io/arch, so a Node of another architecture is not eligible."""
    assert eligible(ns(), NODE) and not eligible(ns(architecture="arm64"), NODE)
    arm = KubeNode("g1", {"gpu": "gb200", ARCH_LABEL: "arm64"})
    assert eligible(ns(architecture="arm64", nodeSelector={"gpu": "gb200"}), arm)
    assert not eligible(ns(nodeSelector={"gpu": "gb200"}), arm)


@pytest.mark.parametrize(
    ("tol", "taint", "ok"),
    [
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, Taint("k", "v", "NoSchedule"), True),
        ({"key": "k", "operator": "Equal", "value": "w"}, Taint("k", "v", "NoSchedule"), False),
        ({"key": "k", "operator": "Exists"}, Taint("k", "v", "NoExecute"), True),
        ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, Taint("k", "", "NoExecute"), False),
        ({"operator": "Exists"}, Taint("anything", "x", "NoExecute"), True),
        ({"key": "other", "operator": "Exists"}, Taint("k", "", "NoSchedule"), False),
    ],
)
def test_tolerations(tol: dict[str, Any], taint: Taint, ok: bool) -> None:
    assert tolerates([Toleration.model_validate(tol)], taint) is ok


def test_taints_block_unless_tolerated_or_soft_or_daemon() -> None:
    tainted = KubeNode("n", AMD64, (Taint("gpu", "", "NoSchedule"),))
    assert not eligible(ns(), tainted)
    assert eligible(ns(tolerations=[{"key": "gpu", "operator": "Exists"}]), tainted)
    assert eligible(ns(), KubeNode("n", AMD64, (Taint("x", "", "PreferNoSchedule"),)))
    # Cordon and NotReady taints never make a Node ineligible: its slurmd must not be deleted.
    for key in ("node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        assert eligible(ns(), KubeNode("n", AMD64, (Taint(key, "", "NoSchedule"),), unschedulable=True, ready=False))


def test_kube_node_from_object() -> None:
    obj = {
        "metadata": {"name": "n", "labels": {"a": "b"}},
        "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]},
    }
    assert KubeNode.from_object(obj) == KubeNode("n", {"a": "b"}, (Taint("k", "", "NoSchedule"),), True, False)
