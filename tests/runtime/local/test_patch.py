"""The patch types the local API server applies: what kubectl's apply, cordon and scale send."""

from __future__ import annotations

from typing import Any

import pytest
from sunk.runtime.local.patch import PatchError, json_patch, merge_patch, strategic_merge

POD: dict[str, Any] = {
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
    "spec": {
        "containers": [
            {"name": "main", "image": "one", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "side", "image": "two", "ports": [{"containerPort": 80, "name": "http"}]},
        ],
        "tolerations": [{"key": "k", "operator": "Exists"}],
    },
}


def test_strategic_merge_merges_containers_by_name_and_env_by_name() -> None:
    patch = {"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "3"}]}]}}
    out = strategic_merge(POD, patch)
    main = out["spec"]["containers"][0]
    assert main["image"] == "one"  # untouched fields stay
    assert main["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]
    assert out["spec"]["containers"][1]["name"] == "side"
    assert POD["spec"]["containers"][0]["env"][1]["value"] == "2"  # the original is not changed


def test_strategic_merge_directives_kubectl_sends() -> None:
    patch = {
        "metadata": {"labels": {"a": None}},
        "spec": {
            "$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
            "containers": [{"name": "main", "$patch": "delete"}, {"name": "new", "image": "three"}],
        },
    }
    out = strategic_merge(POD, patch)
    assert out["metadata"]["labels"] == {"b": "2"}
    assert [c["name"] for c in out["spec"]["containers"]] == ["side", "new"]


def test_lists_without_a_merge_key_are_replaced_and_finalizers_are_a_union() -> None:
    out = strategic_merge(POD, {"spec": {"tolerations": [{"key": "z"}]}, "metadata": {"finalizers": ["y"]}})
    assert out["spec"]["tolerations"] == [{"key": "z"}]
    assert out["metadata"]["finalizers"] == ["x", "y"]
    out = strategic_merge(POD, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}})
    assert out["metadata"]["finalizers"] == []


def test_replace_and_retain_keys() -> None:
    out = strategic_merge(POD, {"metadata": {"labels": {"$patch": "replace", "c": "3"}}})
    assert out["metadata"]["labels"] == {"c": "3"}
    spec = {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}
    out = strategic_merge(spec, {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}})
    assert out == {"strategy": {"type": "Recreate"}}


def test_service_ports_merge_by_port_and_container_ports_by_container_port() -> None:
    svc = {"ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "b"}]}
    assert strategic_merge(svc, {"ports": [{"port": 81, "name": "c"}]})["ports"][1] == {"port": 81, "name": "c"}
    with pytest.raises(PatchError, match="merge key"):
        strategic_merge(POD, {"spec": {"containers": [{"image": "no name"}]}})


def test_merge_patch_and_json_patch() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None}, "l": [2]}) == {"a": {"c": 2}, "l": [2]}
    doc = {"spec": {"replicas": 1, "items": ["a"]}}
    ops: list[dict[str, Any]] = [
        {"op": "replace", "path": "/spec/replicas", "value": 3},
        {"op": "add", "path": "/spec/items/-", "value": "b"},
        {"op": "test", "path": "/spec/items/0", "value": "a"},
        {"op": "remove", "path": "/spec/items/0"},
    ]
    assert json_patch(doc, ops) == {"spec": {"replicas": 3, "items": ["b"]}}
    with pytest.raises(PatchError, match="test failed"):
        json_patch(doc, [{"op": "test", "path": "/spec/replicas", "value": 2}])


def test_a_nodes_taints_are_replaced_whole_as_kubectl_taint_removes_one() -> None:
    """NodeSpec.taints is an atomic list (no patch strategy): `kubectl taint node N key-` sends the
    remaining taints, and the one left out must go."""
    node = {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}]}}
    patched = strategic_merge(node, {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})
    assert patched["spec"]["taints"] == [{"key": "a", "effect": "NoSchedule"}]
