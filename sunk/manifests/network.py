"""NetworkPolicies: the accounting database answers only slurmdbd; slurmrestd answers only the
tenant's runtime, its login pods, its Slurm metrics exporter, the cluster-wide operator and, when its
Service is exposed (restapi.service), the source ranges it is exposed to.

Only these two are fenced: slurmctld, slurmd and slurmdbd must accept Slurm RPCs from every
Slurm pod (and slurmd from slurmctld), and they authenticate every RPC with munge or slurm.key."""

from __future__ import annotations

from sunk import naming
from sunk.manifests.accounting import COMPONENT as ACCOUNTING
from sunk.manifests.accounting import DB_COMPONENT, MARIADB_PORT
from sunk.manifests.meta import Manifest, metadata, obj, selector
from sunk.manifests.restapi import COMPONENT as RESTAPI
from sunk.spec.cluster import ClusterSpec

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace (Kubernetes >= 1.22)."""
OPERATOR_LABELS = {"app.kubernetes.io/name": "sunk-operator"}


def _policy(spec: ClusterSpec, name: str, target: str, sources: list[Manifest], port: int) -> Manifest:
    return obj(
        "networking.k8s.io/v1",
        "NetworkPolicy",
        metadata(spec, name, target),
        spec={
            "podSelector": {"matchLabels": selector(spec, target)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": sources, "ports": [{"protocol": "TCP", "port": port}]}],
        },
    )


def network_policies(spec: ClusterSpec, operator_namespace: str | None) -> list[Manifest]:
    out: list[Manifest] = []
    if spec.accounting.enabled and spec.accounting.external is None:
        out.append(
            _policy(
                spec,
                f"{naming.mariadb(spec)}-ingress",
                DB_COMPONENT,
                [{"podSelector": {"matchLabels": selector(spec, ACCOUNTING)}}],
                MARIADB_PORT,
            )
        )
    if spec.restapi.enabled:
        clients = ["syncer", "scheduler"] + (["login"] if spec.login.enabled else [])
        if spec.monitoring.enabled and spec.monitoring.exporter.enabled:
            clients.append("exporter")  # sunk/manifests/exporter.py (not imported: it imports the runtime's)
        sources: list[Manifest] = [{"podSelector": {"matchLabels": selector(spec, c)}} for c in clients]
        if operator_namespace is not None:
            sources.append(
                {
                    "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: operator_namespace}},
                    "podSelector": {"matchLabels": OPERATOR_LABELS},
                }
            )
        # Exposed beyond the cluster (restapi.service): the ranges it is exposed to, with the client's
        # address kept (externalTrafficPolicy Local), so the policy sees who connects.
        sources += [{"ipBlock": {"cidr": cidr}} for cidr in spec.restapi.service.source_ranges]
        out.append(_policy(spec, f"{naming.restapi(spec)}-ingress", RESTAPI, sources, naming.SLURMRESTD_PORT))
    return out
