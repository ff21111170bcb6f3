"""Labels, object metadata and the small pieces every manifest builder shares.

Builders return plain camelCase dicts, exactly what `kubectl apply` takes; the components hand
them to typed Pulumi resources unchanged."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from sunk import keys

# The users the roles run as are the images' own (sunk.images), re-exported for the builders.
from sunk.images import MARIADB_UID as MARIADB_UID
from sunk.images import NOBODY_UID as NOBODY_UID
from sunk.images import RUNTIME_UID as RUNTIME_UID
from sunk.images import SLURM_UID as SLURM_UID
from sunk.spec.base import Resources
from sunk.spec.cluster import ClusterSpec

Manifest = dict[str, Any]

PART_OF = "sunk"
MANAGED_BY = "sunk"


def labels(spec: ClusterSpec, component: str) -> dict[str, str]:
    """Every object's labels: the recommended app.kubernetes.io set plus tenant and cluster."""
    base = {
        "app.kubernetes.io/name": "slurm",
        "app.kubernetes.io/instance": spec.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        keys.TENANT: spec.tenant,
        keys.CLUSTER: spec.name,
    }
    return {**spec.labels, **base}


def selector(spec: ClusterSpec, component: str) -> dict[str, str]:
    """The stable subset used in selectors (selectors are immutable on Deployments and StatefulSets)."""
    return {
        "app.kubernetes.io/name": "slurm",
        "app.kubernetes.io/instance": spec.name,
        "app.kubernetes.io/component": component,
    }


RBAC = "rbac.authorization.k8s.io"
"""The RBAC API group (Roles, ClusterRoles and their bindings)."""


def bound_role(meta: Manifest, rules: list[Manifest], account: str, account_namespace: str) -> list[Manifest]:
    """A Role of `rules` and the RoleBinding that grants it to ServiceAccount `account` of
    `account_namespace`, both named and placed as `meta` says."""
    return [
        obj(f"{RBAC}/v1", "Role", copy.deepcopy(meta), rules=rules),
        obj(
            f"{RBAC}/v1",
            "RoleBinding",
            copy.deepcopy(meta),
            roleRef={"apiGroup": RBAC, "kind": "Role", "name": meta["name"]},
            subjects=[{"kind": "ServiceAccount", "name": account, "namespace": account_namespace}],
        ),
    ]


def metadata(
    spec: ClusterSpec,
    name: str,
    component: str,
    *,
    namespaced: bool = True,
    annotations: dict[str, str] | None = None,
    extra_labels: dict[str, str] | None = None,
) -> Manifest:
    meta: Manifest = {"name": name, "labels": {**labels(spec, component), **(extra_labels or {})}}
    if namespaced:
        meta["namespace"] = spec.ns
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def obj(api_version: str, kind: str, meta: Manifest, **body: Any) -> Manifest:
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **body}


def resources(res: Resources) -> Manifest:
    """Container requests and limits from the spec, leaving out what the spec leaves unset."""
    out: Manifest = {}
    for part in ("requests", "limits"):
        values = getattr(res, part).model_dump(exclude_none=True)
        if values:
            out[part] = values
    return out


def fixed_resources(cpu: str, memory: str, limit_memory: str) -> Manifest:
    """For the small helper containers the spec does not expose (munged, watchers)."""
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": limit_memory}}


def content_hash(*parts: Any) -> str:
    """Stable short hash of JSON-able parts: same content, same hash, in any process."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def restricted(uid: int, gid: int | None = None) -> Manifest:
    """Container securityContext for a daemon that runs unprivileged (Pod Security `restricted`)."""
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid if gid is None else gid,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def read_only(uid: int, gid: int | None = None) -> Manifest:
    """`restricted` with a read-only root filesystem: what the daemon writes is in its volumes."""
    return {**restricted(uid, gid), "readOnlyRootFilesystem": True}


def tcp_probe(port: int | str, *, period: int = 10, failures: int = 3, delay: int = 0) -> Manifest:
    probe: Manifest = {"tcpSocket": {"port": port}, "periodSeconds": period, "failureThreshold": failures}
    if delay:
        probe["initialDelaySeconds"] = delay
    return probe


def exec_probe(command: list[str], *, period: int = 10, failures: int = 3, timeout: int = 5) -> Manifest:
    return {
        "exec": {"command": command},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": timeout,
    }


def http_probe(path: str, port: int | str, *, period: int = 10, failures: int = 3) -> Manifest:
    return {"httpGet": {"path": path, "port": port}, "periodSeconds": period, "failureThreshold": failures}
