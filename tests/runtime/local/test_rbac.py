"""The local API server's RBAC authorizer: which binding grants what, where, and the 403's text."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sunk.runtime.local import rbac

OBJECTS: dict[str, list[dict[str, Any]]] = {
    "clusterroles": [
        {"metadata": {"name": "read-nodes"}, "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]},
        {"metadata": {"name": "edit-nodesets"},
         "rules": [{"apiGroups": ["slurm.sunk.dev"], "resources": ["nodesets", "nodesets/status"], "verbs": ["*"]}]},
    ],
    "roles": [
        {"metadata": {"name": "one-secret", "namespace": "a"},
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["keys"], "verbs": ["get"]}]},
        {"metadata": {"name": "exec", "namespace": "a"},
         "rules": [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}]},
    ],
    "clusterrolebindings": [
        {"metadata": {"name": "nodes"}, "roleRef": {"kind": "ClusterRole", "name": "read-nodes"},
         "subjects": [{"kind": "Group", "name": "system:serviceaccounts:a"}]},
    ],
    "rolebindings": [
        {"metadata": {"name": "ns", "namespace": "a"}, "roleRef": {"kind": "ClusterRole", "name": "edit-nodesets"},
         "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "a"}]},
        {"metadata": {"name": "secret", "namespace": "a"}, "roleRef": {"kind": "Role", "name": "one-secret"},
         "subjects": [{"kind": "ServiceAccount", "name": "op"}]},
        {"metadata": {"name": "exec", "namespace": "a"}, "roleRef": {"kind": "Role", "name": "exec"},
         "subjects": [{"kind": "User", "name": "alice"}]},
    ],
}  # fmt: skip


def lookup(plural: str, namespace: str | None) -> Iterable[dict[str, Any]]:
    return [o for o in OBJECTS[plural] if namespace is None or o["metadata"].get("namespace") == namespace]


def ask(user: str, verb: str, group: str, resource: str, namespace: str | None = None, **more: str) -> str | None:
    request = rbac.Request(user, rbac.groups_of(user), verb, group, resource, namespace=namespace, **more)
    return rbac.decide(lookup, request)


OP = "system:serviceaccount:a:op"


def test_a_cluster_role_bound_in_a_namespace_grants_only_there() -> None:
    assert ask(OP, "patch", "slurm.sunk.dev", "nodesets", "a", name="x") is None
    assert ask(OP, "update", "slurm.sunk.dev", "nodesets", "a", name="x", subresource="status") is None
    assert ask(OP, "patch", "slurm.sunk.dev", "nodesets", "b", name="x") == (
        'nodesets.slurm.sunk.dev "x" is forbidden: User "system:serviceaccount:a:op" cannot patch resource '
        '"nodesets" in API group "slurm.sunk.dev" in the namespace "b"'
    )
    # the scale subresource is not nodesets/status
    assert ask(OP, "update", "slurm.sunk.dev", "nodesets", "a", name="x", subresource="scale") is not None


def test_a_group_subject_and_cluster_scope() -> None:
    assert ask(OP, "list", "", "nodes") is None  # through system:serviceaccounts:a
    assert ask("system:serviceaccount:b:op", "list", "", "nodes") == (
        'nodes is forbidden: User "system:serviceaccount:b:op" cannot list resource "nodes" in API group "" at the '
        "cluster scope"
    )
    assert ask(OP, "delete", "", "nodes", name="n1") is not None


def test_resource_names_allow_only_named_requests() -> None:
    assert ask(OP, "get", "", "secrets", "a", name="keys") is None
    assert ask(OP, "get", "", "secrets", "a", name="other") is not None
    assert ask(OP, "list", "", "secrets", "a") is not None  # a list names nothing


def test_users_subresources_and_masters() -> None:
    assert ask("alice", "create", "", "pods", "a", name="p", subresource="exec") is None
    assert ask("alice", "get", "", "pods", "a", name="p") is not None
    assert ask(rbac.ADMIN, "delete", "", "namespaces", name="a") is None
    assert rbac.verb_of("GET", True, False, "exec") == "create"  # exec over a WebSocket GET
    assert [rbac.verb_of("GET", False, True), rbac.verb_of("DELETE", False, False)] == ["watch", "deletecollection"]
