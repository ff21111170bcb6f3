"""The tenant namespace and the whole cluster as plain manifests (what the components create,
minus the generated secret values)."""

from __future__ import annotations

from sunk.manifests import (
    accounting,
    controller,
    exporter,
    keygen,
    login,
    monitoring,
    network,
    nodeset,
    restapi,
    runtime,
)
from sunk.manifests.auth import AuthRefs, auth_refs
from sunk.manifests.config import config_maps
from sunk.manifests.meta import Manifest, labels, obj
from sunk.manifests.pods import shared_claims
from sunk.spec.cluster import ClusterSpec


def namespace(spec: ClusterSpec) -> Manifest:
    """Pod Security admission: `privileged` is enforced because slurmd pods need privileges (see
    sunk.manifests.nodeset_pod); `restricted` warnings and audit entries still flag any other pod
    that drifts from the restricted profile."""
    meta = {
        "name": spec.ns,
        "labels": {
            **labels(spec, "namespace"),
            "pod-security.kubernetes.io/enforce": "privileged",
            "pod-security.kubernetes.io/warn": "baseline",
            "pod-security.kubernetes.io/audit": "restricted",
        },
    }
    return obj("v1", "Namespace", meta)


def cluster_manifests(spec: ClusterSpec, operator_namespace: str | None = "sunk-system") -> list[Manifest]:
    """Every object of one tenant's cluster as `sunk render` writes it: the keys and passwords are
    made in the cluster by the key generator's Job (no Secret here holds one)."""
    refs: AuthRefs = auth_refs(spec)
    out = [namespace(spec)] if spec.create_namespace else []
    out += config_maps(spec)
    out += keygen.keygen_manifests(spec, refs)
    out += shared_claims(spec)
    out += controller.controller_manifests(spec, refs)
    out += accounting.accounting_manifests(spec, refs)
    out += restapi.restapi_manifests(spec, refs)
    out += login.login_manifests(spec, refs)
    out += nodeset.nodeset_resources(spec, refs)
    for c in runtime.CONTROLLERS:
        out += runtime.runtime_manifests(spec, refs, c)
    if operator_namespace is not None:
        out += runtime.operator_access(spec, refs, operator_namespace, "sunk-operator")
    out += network.network_policies(spec, operator_namespace)
    out += monitoring.monitoring_manifests(spec)
    out += exporter.exporter_manifests(spec, refs)
    return out
