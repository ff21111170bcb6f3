"""What the cluster-wide operator lets a tenant's NodeSet ask of the Kubernetes Nodes.

slurmd pods are privileged (they manage cgroups and see every device), and the operator's
ClusterRole may create pods in any namespace: without a policy, the right to create a NodeSet
would be root on the Nodes with any image and any host path. The operator therefore serves
NodeSets only in tenant namespaces (a label only cluster administrators set), and refuses, creating
no pod, a NodeSet whose pods would run an image or mount a host path the platform did not allow.
Pure: the operator calls these on the pod it would create. The policy's model, TenantPolicy, lives
in sunk.spec.operator (importable from here for one release, with a DeprecationWarning: import it
from sunk.api)."""

from __future__ import annotations

import posixpath
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sunk import keys
from sunk.spec import operator as _spec

if TYPE_CHECKING:
    from sunk.spec.operator import TenantPolicy as TenantPolicy  # the old path, deprecated (__getattr__)


def __getattr__(name: str) -> Any:
    if name == "TenantPolicy":
        warnings.warn(
            "sunk.policy.TenantPolicy moved: import TenantPolicy from sunk.api (or sunk.spec.operator)",
            DeprecationWarning,
            stacklevel=2,
        )
        return _spec.TenantPolicy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _under(path: str, allowed: str) -> bool:
    path, allowed = posixpath.normpath(path), posixpath.normpath(allowed)
    return allowed == "/" or path == allowed or path.startswith(allowed + "/")


def namespace_problem(policy: TenantPolicy, namespace: str, labels: Mapping[str, str] | None) -> str | None:
    """Why NodeSets in this namespace are not served (`labels` None: the namespace is unknown)."""
    if policy.namespace_label is None:
        return None
    legacy = keys.LEGACY.get(policy.namespace_label)  # namespaces labelled before the single prefix
    if labels is None or not (policy.namespace_label in labels or (legacy is not None and legacy in labels)):
        return (
            f"namespace {namespace} has no label {policy.namespace_label}: the operator serves NodeSets "
            "only in tenant namespaces (a cluster administrator labels them)"
        )
    return None


def pod_problems(policy: TenantPolicy, pod: Mapping[str, Any]) -> list[str]:
    """What in this slurmd pod the policy does not allow, each naming the container or volume: every
    image (containers, init containers, image volumes) and every hostPath."""
    spec = pod.get("spec") or {}
    problems = []
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or []:
            image = container.get("image", "")
            if not any(image.startswith(prefix) for prefix in policy.image_prefixes):
                problems.append(
                    f"{kind} {container.get('name')}: image {image} is not allowed; "
                    f"allowed prefixes: {', '.join(policy.image_prefixes) or 'none'}"
                )
    for volume in spec.get("volumes") or []:
        reference = (volume.get("image") or {}).get("reference")
        if reference is not None and not any(str(reference).startswith(p) for p in policy.image_prefixes):
            problems.append(
                f"volume {volume.get('name')}: image {reference} is not allowed; "
                f"allowed prefixes: {', '.join(policy.image_prefixes) or 'none'}"
            )
        host = volume.get("hostPath")
        if host is None:
            continue
        path = host.get("path", "")
        if not any(_under(path, allowed) for allowed in policy.host_paths):
            problems.append(
                f"volume {volume.get('name')}: hostPath {path} is not allowed; "
                f"allowed: {', '.join(policy.host_paths) or 'no host paths'}"
            )
    return problems
