"""What the Node authorizer and the NodeRestriction admission plugin let a Node's kubelet do, as
pure functions the node agent plans its requests by (Kubernetes 1.36:
plugin/pkg/auth/authorizer/node and plugin/pkg/admission/noderestriction):

- a Node reads a Secret, ConfigMap or claim only when a pod bound to it names the object
  (`references`, the links of the authorizer's graph);
- a Node sets on its own Node object only the labels a kubelet may (`own_labels`); the others are
  an administrator's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .apitypes import Obj

KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch",
    "beta.kubernetes.io/os", "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
})  # fmt: skip
"""k8s.io/kubelet/pkg/apis/well_known_labels.go's kubeletLabels."""
KUBELET_LABEL_DOMAINS = ("kubelet.kubernetes.io", "node.kubernetes.io")
"""The label domains (and their subdomains) a kubelet may set besides those."""


_SECRETS, _CONFIGMAPS, _CLAIMS = "v1/secrets", "v1/configmaps", "v1/persistentvolumeclaims"
_VOLUME_REFS = {"secret": (_SECRETS, "secretName"), "configMap": (_CONFIGMAPS, "name"),
                "persistentVolumeClaim": (_CLAIMS, "claimName")}  # fmt: skip
_PROJECTED_REFS = {"secret": (_SECRETS, "name"), "configMap": (_CONFIGMAPS, "name")}
_ENV_REFS = {"secretKeyRef": (_SECRETS, "name"), "configMapKeyRef": (_CONFIGMAPS, "name")}
_ENV_FROM_REFS = {"secretRef": (_SECRETS, "name"), "configMapRef": (_CONFIGMAPS, "name")}


def _named(source: Mapping[str, Any], table: Mapping[str, tuple[str, str]]) -> set[tuple[str, str]]:
    """(resource key, name) of each reference `table` knows in `source`."""
    return {(res, (source[field] or {}).get(key, "")) for field, (res, key) in table.items() if field in source}


def references(pod: Obj) -> set[tuple[str, str]]:
    """(resource key, name) of each Secret, ConfigMap and claim `pod` names: its volumes (projected
    sources too), its containers' env and envFrom, its image pull Secrets. What the Node authorizer's
    graph links a pod to."""
    spec = pod.get("spec") or {}
    out: set[tuple[str, str]] = set()
    for volume in spec.get("volumes") or []:
        out |= _named(volume, _VOLUME_REFS)
        for source in (volume.get("projected") or {}).get("sources") or []:
            out |= _named(source, _PROJECTED_REFS)
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    for c in containers + (spec.get("ephemeralContainers") or []):
        for env in c.get("env") or []:
            out |= _named(env.get("valueFrom") or {}, _ENV_REFS)
        for source in c.get("envFrom") or []:
            out |= _named(source, _ENV_FROM_REFS)
    out |= {(_SECRETS, secret.get("name", "")) for secret in spec.get("imagePullSecrets") or []}
    return out


def own_labels(labels: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """`labels` split into those a kubelet may set on its own Node and those only an administrator
    may (NodeRestriction: a kubernetes.io or k8s.io label outside the kubelet's list, or any
    node-restriction.kubernetes.io label, is refused to the Node)."""
    own: dict[str, str] = {}
    admin: dict[str, str] = {}
    for key, value in labels.items():
        prefix = key.partition("/")[0] if "/" in key else ""

        def under(domain: str, prefix: str = prefix) -> bool:
            return prefix == domain or prefix.endswith("." + domain)

        restricted = under("node-restriction.kubernetes.io")
        foreign = (under("kubernetes.io") or under("k8s.io")) and not (
            key in KUBELET_LABELS or any(under(d) for d in KUBELET_LABEL_DOMAINS)
        )
        (admin if restricted or foreign else own)[key] = value
    return own, admin
