"""The kinds the local API server serves: built-in ones, and those a CustomResourceDefinition adds.

Pure data. A resource is named by its group, version and plural as in a URL; `kind` and
`namespaced` are what discovery says of it, `status` whether it has the /status subresource (its
main writes then leave status alone, as the API server's do) and `scale` whether it has /scale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool = False
    scale: bool = False
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    printer_columns: tuple[Mapping[str, Any], ...] = field(default=(), compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """`apps/v1/deployments`, `v1/pods`: how the store and its history name the resource."""
        return f"{self.api_version}/{self.plural}"

    @property
    def singular(self) -> str:
        return self.kind.lower()


def _r(group: str, version: str, plural: str, kind: str, namespaced: bool = True, **kw: Any) -> Resource:
    return Resource(group, version, plural, kind, namespaced, **kw)


_ALL = ("all",)
BUILTIN: tuple[Resource, ...] = (
    _r("", "v1", "namespaces", "Namespace", False, status=True, short_names=("ns",)),
    _r("", "v1", "nodes", "Node", False, status=True, short_names=("no",)),
    _r("", "v1", "pods", "Pod", status=True, short_names=("po",), categories=_ALL),
    _r("", "v1", "services", "Service", status=True, short_names=("svc",), categories=_ALL),
    _r("", "v1", "endpoints", "Endpoints", short_names=("ep",)),
    _r("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    _r("", "v1", "secrets", "Secret"),
    _r("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    _r("", "v1", "events", "Event", short_names=("ev",)),
    _r("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", status=True, short_names=("pvc",)),
    _r("apps", "v1", "deployments", "Deployment", status=True, scale=True, short_names=("deploy",), categories=_ALL),
    _r("apps", "v1", "statefulsets", "StatefulSet", status=True, scale=True, short_names=("sts",), categories=_ALL),
    _r("batch", "v1", "jobs", "Job", status=True, categories=_ALL),
    _r("batch", "v1", "cronjobs", "CronJob", status=True, short_names=("cj",), categories=_ALL),
    _r("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _r("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _r("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _r("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", status=True, short_names=("pdb",)),
    _r("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short_names=("netpol",)),
    _r("coordination.k8s.io", "v1", "leases", "Lease"),
    _r("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
    _r(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        status=True,
        short_names=("crd", "crds"),
    ),
)


def from_crd(crd: Mapping[str, Any]) -> list[Resource]:
    """The resources a CustomResourceDefinition serves (one per served version)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        sub = version.get("subresources") or {}
        out.append(
            Resource(
                group=spec.get("group", ""),
                version=version["name"],
                plural=names.get("plural", ""),
                kind=names.get("kind", ""),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                status="status" in sub,
                scale="scale" in sub,
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
            )
        )
    return out


class Registry:
    """Every resource served now: the built-ins plus those of the CRDs created so far."""

    def __init__(self, builtin: Iterable[Resource] = BUILTIN) -> None:
        self._by_key: dict[str, Resource] = {r.key: r for r in builtin}
        self._crds: dict[str, list[str]] = {}

    def get(self, api_version: str, plural: str) -> Resource | None:
        return self._by_key.get(f"{api_version}/{plural}")

    def by_kind(self, api_version: str, kind: str) -> Resource | None:
        return next((r for r in self._by_key.values() if r.api_version == api_version and r.kind == kind), None)

    def all(self) -> list[Resource]:
        return list(self._by_key.values())

    def add_crd(self, crd: Mapping[str, Any]) -> None:
        name = (crd.get("metadata") or {}).get("name", "")
        self.remove_crd(name)
        served = from_crd(crd)
        self._crds[name] = [r.key for r in served]
        self._by_key.update({r.key: r for r in served})

    def remove_crd(self, name: str) -> None:
        for key in self._crds.pop(name, []):
            self._by_key.pop(key, None)
