"""Authorization for the local API server: the RBAC authorizer of a real one, over the Roles,
ClusterRoles, RoleBindings and ClusterRoleBindings in the store (the render's own).

A request is its attributes (`Request`: user, groups, verb, API group, resource, subresource,
namespace, name); `decide` answers None when some binding's rules allow it, else the message a
real API server gives in its 403 (`pods "x" is forbidden: User "..." cannot get resource "pods" in
API group "" in the namespace "ns"`). As upstream:
- a RoleBinding grants its Role's (or a ClusterRole's) rules in its own namespace only; a
  ClusterRoleBinding grants them everywhere, cluster-scoped resources included;
- subjects are ServiceAccounts (namespace and name), Users and Groups; every token's user is in
  system:authenticated, a ServiceAccount's in system:serviceaccounts and
  system:serviceaccounts:<namespace>; system:masters may do everything (the kubeconfig's admin);
- rules match on apiGroups, resources (`pods/log` names a subresource, `*` and `*/scale` match),
  verbs and resourceNames (never for list, watch, create or deletecollection without a name);
- discovery, /version, /openapi and the health endpoints are open to every authenticated user
  (the system:discovery and system:public-info-viewer ClusterRoles a cluster ships).

Not modelled: aggregated ClusterRoles (aggregationRule), nonResourceURLs rules, impersonation,
the escalate/bind checks on writing RBAC objects, and the Node authorizer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
ADMIN = "sunk-local-admin"
"""The user of the kubeconfig `sunk local kubeconfig` prints: in system:masters."""
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class Request:
    user: str
    groups: tuple[str, ...]
    verb: str
    api_group: str
    resource: str
    subresource: str = ""
    namespace: str | None = None
    name: str | None = None


def groups_of(user: str) -> tuple[str, ...]:
    """The groups a token's user is in (a ServiceAccount's come from its name)."""
    if user == ADMIN:
        return (MASTERS, AUTHENTICATED)
    if user.startswith("system:serviceaccount:"):
        namespace = user.split(":")[2]
        return (AUTHENTICATED, "system:serviceaccounts", f"system:serviceaccounts:{namespace}")
    return (AUTHENTICATED,)


def verb_of(method: str, named: bool, watch: bool, subresource: str = "") -> str:
    """The RBAC verb of an HTTP request (exec over a WebSocket GET is `create`, as from 1.30 on)."""
    if subresource in ("exec", "attach", "portforward") or method == "POST":
        return "create"
    if method == "GET":
        return "watch" if watch else ("get" if named else "list")
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return {"PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def _subject_matches(subject: Mapping[str, Any], request: Request, binding_namespace: str | None) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return request.user == f"system:serviceaccount:{namespace}:{name}"
    if kind == "User":
        return request.user == name
    if kind == "Group":
        return name in request.groups
    return False


def _rule_allows(rule: Mapping[str, Any], request: Request) -> bool:
    groups = rule.get("apiGroups") or []
    if "*" not in groups and request.api_group not in groups:
        return False
    verbs = rule.get("verbs") or []
    if "*" not in verbs and request.verb not in verbs:
        return False
    wanted = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
    resources = rule.get("resources") or []
    if not any(r in ("*", wanted) or (request.subresource and r == f"*/{request.subresource}") for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or (request.name is not None and request.name in names)


Lookup = Callable[[str, str | None], Iterable[Obj]]
"""(kind plural, namespace or None for cluster-scoped or all) -> objects."""


def _role_rules(lookup: Lookup, ref: Mapping[str, Any], namespace: str | None) -> list[Obj]:
    kind, name = ref.get("kind"), ref.get("name")
    if kind == "ClusterRole":
        found = [r for r in lookup("clusterroles", None) if r["metadata"]["name"] == name]
    elif kind == "Role" and namespace is not None:
        found = [r for r in lookup("roles", namespace) if r["metadata"]["name"] == name]
    else:
        found = []
    return [rule for role in found for rule in role.get("rules") or []]


def allowed(lookup: Lookup, request: Request) -> bool:
    if MASTERS in request.groups:
        return True
    for binding in lookup("clusterrolebindings", None):
        if any(_subject_matches(s, request, None) for s in binding.get("subjects") or []) and any(
            _rule_allows(rule, request) for rule in _role_rules(lookup, binding.get("roleRef") or {}, None)
        ):
            return True
    if request.namespace is None:
        return False
    for binding in lookup("rolebindings", request.namespace):
        ns = binding["metadata"].get("namespace")
        if any(_subject_matches(s, request, ns) for s in binding.get("subjects") or []) and any(
            _rule_allows(rule, request) for rule in _role_rules(lookup, binding.get("roleRef") or {}, ns)
        ):
            return True
    return False


def refusal(request: Request) -> str:
    """The message of a real API server's 403 for `request`."""
    what = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
    subject = f'{request.resource} "{request.name}"' if request.name else request.resource
    if request.api_group:
        subject = (
            f'{request.resource}.{request.api_group} "{request.name}"'
            if request.name
            else f"{request.resource}.{request.api_group}"
        )
    scope = f'in the namespace "{request.namespace}"' if request.namespace else "at the cluster scope"
    return (
        f'{subject} is forbidden: User "{request.user}" cannot {request.verb} resource "{what}" in API group '
        f'"{request.api_group}" {scope}'
    )


def decide(lookup: Lookup, request: Request) -> str | None:
    """None when RBAC allows `request`, else the 403's message."""
    return None if allowed(lookup, request) else refusal(request)
