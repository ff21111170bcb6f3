"""The kinds kubesim serves and the replies it shapes as an API server does: Status bodies, the
one field selector it honours (a pod list's spec.nodeName), Nodes as a kubelet reports them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import aiohttp.web

from tests.support import kubelet

# "group/version/plural" -> (kind, namespaced): every kind the runtime lists or watches.
RESOURCES: dict[str, tuple[str, bool]] = {
    "v1/pods": ("Pod", True),
    "v1/nodes": ("Node", False),
    "v1/services": ("Service", True),
    "v1/configmaps": ("ConfigMap", True),
    "v1/secrets": ("Secret", True),
    "v1/events": ("Event", True),
    "coordination.k8s.io/v1/leases": ("Lease", True),
    "slurm.sunk.dev/v1alpha1/nodesets": ("NodeSet", True),
    "policy/v1/poddisruptionbudgets": ("PodDisruptionBudget", True),
}

NAMESPACE_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/?$")


def status_reply(code: int, reason: str, message: str, causes: Sequence[str] = ()) -> aiohttp.web.Response:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "code": code}
    body |= {"reason": reason, "message": message, "status": "Success" if code < 400 else "Failure"}
    if causes:
        body["details"] = {"causes": [{"type": "DisruptionBudget", "message": c} for c in causes]}
    return aiohttp.web.json_response(body, status=code)


def node_selector(selector: str) -> str | None:
    """The Node of a `spec.nodeName=<node>` term in a field selector, if there is one."""
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if key.strip() == "spec.nodeName" and not key.endswith("!"):
            return value.strip().lstrip("=")
    return None


def realistic_node(node: Any) -> aiohttp.web.Response | None:
    """Fill allocatable as a kubelet reports it, or refuse a Node no kubelet would report."""
    if not isinstance(node, dict):
        return None
    status = node.setdefault("status", {})
    alloc = status.get("allocatable") or dict(status.get("capacity") or {})
    if not alloc.get("cpu") or not alloc.get("memory"):
        name = (node.get("metadata") or {}).get("name")
        why = "has no status.allocatable (or status.capacity) with cpu and memory; every kubelet reports them"
        return status_reply(422, "Invalid", f'Node "{name}" is invalid in kubesim: it {why}')
    alloc.setdefault("pods", str(kubelet.DEFAULT_MAX_PODS))
    status["allocatable"] = alloc
    status.setdefault("capacity", dict(alloc))
    return None
