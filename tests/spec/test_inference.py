"""inference.namespaces: what the spec refuses before any resource exists, each naming its field."""

from __future__ import annotations

from typing import Any

import pytest

from sunk.spec.errors import SpecError, load_spec
from sunk.spec.inference import shared_pool

CPU = {"name": "cpu", "cpus": 4, "memoryMib": 8192}
# Two shared GPU nodes of 4 GPUs: the pool holds 2 nodes, 32 CPUs, 8 GPUs.
GPU = {
    "name": "gpu",
    "cpus": 16,
    "memoryMib": 65536,
    "gpus": {"type": "h100", "count": 4},
    "resourceMode": "shared",
    "replicas": 2,
    "maxNodes": 2,
}


def _cluster(namespaces: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "name": "research",
        "tenant": "acme",
        "nodesets": [CPU, GPU],
        "partitions": [
            {"name": "batch", "nodesets": ["cpu"], "default": True},
            {"name": "serve", "nodesets": ["gpu"]},
        ],
        "qos": [
            {"name": "inference", "grpTres": {"gres/gpu": 8}},
            {"name": "greedy", "maxTresPerAccount": {"gres/gpu": 80}},
        ],
        "accounts": [
            {"name": "vision", "qos": ["inference", "normal"], "defaultQos": "inference"},
            {"name": "speech", "qos": ["greedy"], "defaultQos": "greedy"},
        ],
        "inference": {"namespaces": namespaces},
        **extra,
    }


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(data)
    return info.value.problems


def test_valid_namespaces_load() -> None:
    spec = load_spec(
        _cluster(
            [
                {"name": "team-vision", "account": "vision", "partition": "serve", "qos": "inference"},
                {"name": "team-vision-batch", "account": "vision", "partition": "serve"},
            ]
        )
    )
    assert [n.name for n in spec.inference.namespaces] == ["team-vision", "team-vision-batch"]
    assert spec.inference.namespaces[1].qos is None


def test_no_namespaces_by_default() -> None:
    data = _cluster([])
    del data["inference"]
    assert load_spec(data).inference.namespaces == []


def test_pool_counts_only_shared_nodesets() -> None:
    spec = load_spec(_cluster([]))
    pool = shared_pool(spec.nodesets)
    assert (pool.nodes, pool.cpu, pool.gpus) == (2, 32, 8)


@pytest.mark.parametrize(
    ("namespaces", "expected"),
    [
        ([{"name": "kube-system", "account": "vision"}], "inference.namespaces[0].name: 'kube-system' is Kubernetes'"),
        (
            [{"name": "kube-flannel", "account": "vision"}],
            "inference.namespaces[0].name: 'kube-flannel' is Kubernetes'",
        ),
        ([{"name": "default", "account": "vision"}], "inference.namespaces[0].name: 'default' is Kubernetes'"),
        ([{"name": "sunk-system", "account": "vision"}], "inference.namespaces[0].name: 'sunk-system' is the operator"),
        (
            [{"name": "acme-research", "account": "vision"}],
            "inference.namespaces[0].name: 'acme-research' is the cluster's own namespace",
        ),
        (
            [{"name": "team-a", "account": "vision"}, {"name": "team-a", "account": "speech"}],
            "inference.namespaces[1].name: 'team-a' repeats inference.namespaces[0]",
        ),
        (
            [{"name": "team-a", "account": "audio"}],
            "inference.namespaces[0].account: 'audio' is not an account of the stack; known: speech, vision",
        ),
        (
            [{"name": "team-a", "account": "vision", "partition": "gpu"}],
            "inference.namespaces[0].partition: 'gpu' is not a partition; known: batch, serve",
        ),
        (
            [{"name": "team-a", "account": "vision", "partition": "batch"}],
            "inference.namespaces[0].partition: partition 'batch' has a NodeSet with resourceMode shared",
        ),
        (
            [{"name": "team-a", "account": "vision", "qos": "gold"}],
            "inference.namespaces[0].qos: 'gold' is not a QOS; known: greedy, inference, normal",
        ),
        (
            [{"name": "team-a", "account": "vision", "qos": "greedy"}],
            "inference.namespaces[0].qos: the account may use only inference, normal",
        ),
        (
            [{"name": "team-a", "account": "speech", "partition": "serve"}],
            "inference.namespaces[0].account: QOS greedy's maxTresPerAccount caps gres/gpu at 80, above the 8",
        ),
        (
            [{"name": "Team-A", "account": "vision"}],
            "inference.namespaces[0].name: 'Team-A' is not valid: a DNS-1123 label",
        ),
    ],
    ids=[
        "kube-system",
        "kube-prefix",
        "default",
        "operator",
        "own-namespace",
        "twice",
        "unknown-account",
        "unknown-partition",
        "no-shared-nodeset",
        "unknown-qos",
        "qos-not-allowed",
        "cap-above-pool",
        "not-a-label",
    ],
)
def test_refusals(namespaces: list[dict[str, Any]], expected: str) -> None:
    problems = _problems(_cluster(namespaces))
    assert any(p.startswith(expected) for p in problems), problems


def test_explicit_qos_cap_above_pool_names_the_qos_field() -> None:
    data = _cluster([{"name": "team-a", "account": "speech", "qos": "greedy"}])
    assert "inference.namespaces[0].qos: QOS greedy's maxTresPerAccount caps gres/gpu at 80" in " ".join(
        _problems(data)
    )


def test_cap_within_pool_passes() -> None:
    data = _cluster([{"name": "team-a", "account": "vision", "qos": "inference", "partition": "serve"}])
    data["qos"][0]["grpTres"] = {"gres/gpu": 8, "node": 2, "cpu": 32}
    load_spec(data)


def test_node_cap_above_pool() -> None:
    data = _cluster([{"name": "team-a", "account": "vision", "partition": "serve"}])
    data["qos"][0]["grpTres"] = {"node": 3}
    problems = _problems(data)
    assert any("grpTres caps node at 3, above the 2" in p for p in problems), problems


def test_needs_accounting() -> None:
    data = _cluster([{"name": "team-a", "account": "vision"}], accounting={"enabled": False})
    del data["qos"], data["accounts"]
    problems = _problems(data)
    assert any(p.startswith("inference.namespaces: each namespace is charged") for p in problems), problems


def test_all_problems_in_one_round() -> None:
    problems = _problems(
        _cluster([{"name": "kube-system", "account": "vision"}, {"name": "team-b", "account": "nobody"}])
    )
    paths = sorted(p.split(":")[0] for p in problems)
    assert paths == ["inference.namespaces[0].name", "inference.namespaces[1].account"], problems
