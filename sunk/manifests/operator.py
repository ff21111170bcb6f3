"""The cluster-wide piece, installed once per Kubernetes cluster: the NodeSet CRD, the operator's
namespace, ServiceAccount, RBAC and Deployment.

The ClusterRole holds only what turning NodeSets into pods takes in any tenant namespace; leader
election leases live in a Role in the operator's own namespace; each tenant grants read access
to its JWT Secret alone (sunk.manifests.runtime.operator_access). No cluster-admin.

The operator's options, OperatorSpec, live in sunk.spec.operator (importable from here for one
release, with a DeprecationWarning: import it from sunk.api)."""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING, Any

from sunk import keys, naming, roles
from sunk.manifests.meta import RBAC, RUNTIME_UID, Manifest, http_probe, obj, restricted
from sunk.manifests.meta import resources as container_resources
from sunk.manifests.network import OPEN, OPERATOR_LABELS, policy_spec, rules
from sunk.manifests.nodeset_crd import nodeset_crd
from sunk.manifests.podsettings import apply_pod
from sunk.manifests.runtime import METRICS_PORT
from sunk.nodeset_resource import GROUP, PLURAL
from sunk.spec import operator as _spec

if TYPE_CHECKING:
    from sunk.spec.operator import OperatorSpec as OperatorSpec  # the old path, deprecated (__getattr__)
    from sunk.spec.operator import TenantPolicy

OPERATOR_NAME = naming.OPERATOR
CLUSTER_ROLE = naming.OPERATOR


def __getattr__(name: str) -> Any:
    if name == "OperatorSpec":
        warnings.warn(
            "sunk.manifests.operator.OperatorSpec moved: import OperatorSpec from sunk.api (or sunk.spec.operator)",
            DeprecationWarning,
            stacklevel=2,
        )
        return _spec.OperatorSpec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def policy_json(policy: TenantPolicy) -> str:
    """The policy as the operator reads it (SUNK_OPERATOR_POLICY): camelCase JSON, keys sorted."""
    return json.dumps(policy.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":"))


def _labels(op: OperatorSpec) -> dict[str, str]:
    return {
        **op.labels,
        **OPERATOR_LABELS,
        "app.kubernetes.io/component": "operator",
        "app.kubernetes.io/part-of": "sunk",
        "app.kubernetes.io/managed-by": "sunk",
    }


def _annotated(op: OperatorSpec, meta: Manifest) -> Manifest:
    """The operator's `annotations` on its Deployment and Service (its `labels` are on every object)."""
    return {**meta, "annotations": dict(op.annotations)} if op.annotations else meta


def _meta(op: OperatorSpec, name: str, *, namespaced: bool = True) -> Manifest:
    meta: Manifest = {"name": name, "labels": _labels(op)}
    if namespaced:
        meta["namespace"] = op.namespace
    return meta


# What turning NodeSets into pods takes in any tenant namespace (runtime/operator/kube.py).
# ConfigMaps and the JWT Secret are granted per tenant, by name (sunk.manifests.runtime.operator_access).
CLUSTER_RULES: list[Manifest] = [
    {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["get", "patch", "update"]},
    # slurmd pods: created, and deleted only after Slurm drained them; their headless Services.
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch", "create"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    # Namespaces: the tenant policy serves NodeSets only in labelled ones (sunk.policy). Read only.
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
    # Nodes: all-matching-nodes membership and the topology labels. Read only.
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    # One PodDisruptionBudget per slurmd pod whose Slurm node may run jobs (sunk.manifests.nodeset_pdb).
    {
        "apiGroups": ["policy"],
        "resources": ["poddisruptionbudgets"],
        "verbs": ["get", "list", "watch", "create", "delete"],
    },
]
LEASE_RULES: list[Manifest] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update", "patch"]},
]


def namespace(op: OperatorSpec) -> Manifest:
    """Pod Security admission `restricted`, enforced: the operator is the only pod sunk puts here,
    and it runs as a non-root user with no capability (slurmd pods, which must be privileged,
    live in the tenant namespaces)."""
    meta = _meta(op, op.namespace, namespaced=False)
    meta["labels"] = {**meta["labels"], **{f"pod-security.kubernetes.io/{m}": "restricted" for m in PSA_MODES}}
    return obj("v1", "Namespace", meta)


PSA_MODES = ("enforce", "warn", "audit")


def operator_network_policy(op: OperatorSpec) -> Manifest:
    """The operator's row of the role table: metrics scraped from any namespace; out to the
    Kubernetes API, every tenant's slurmrestd and DNS."""

    def peers(peer: str) -> list[Manifest] | None:
        if peer == "restapi":  # every tenant's, in its own namespace
            return [{"namespaceSelector": {}, "podSelector": {"matchLabels": {keys.APP_COMPONENT: "restapi"}}}]
        if peer == roles.SCRAPERS:
            return [{"namespaceSelector": {}}]
        return OPEN if peer in (roles.DNS, roles.ANYWHERE) else []

    row = roles.ROLES["operator"]
    return obj(
        "networking.k8s.io/v1",
        "NetworkPolicy",
        _meta(op, OPERATOR_NAME),
        spec=policy_spec(
            {"matchLabels": dict(OPERATOR_LABELS)},
            rules(row.listens, "from", peers, op.network),
            rules(row.talks_to, "to", peers, op.network),
        ),
    )


def operator_alert_rules() -> list[dict[str, object]]:
    """The operator's alerts (its metrics carry its namespace through the ServiceMonitor)."""

    def rule(name: str, expr: str, duration: str, severity: str, summary: str) -> dict[str, object]:
        return {
            "alert": name,
            "expr": expr,
            "for": duration,
            "labels": {"severity": severity},
            "annotations": {"summary": summary},
        }

    return [
        rule(
            "SunkOperatorNoLeader",
            "absent(sunk_operator_leader) or max(sunk_operator_leader) < 1",
            "5m",
            "critical",
            "no NodeSet operator replica leads: slurmd pods are neither created nor replaced",
        ),
        rule(
            "SunkOperatorSlurmUnreadable",
            "max(sunk_operator_slurm_unreadable_clusters) > 0",
            "10m",
            "warning",
            "the operator cannot read some tenant's Slurm: it deletes and drains nothing there",
        ),
        rule(
            "SunkOperatorErrors",
            "sum(rate(sunk_operator_errors_total[10m])) > 0.05",
            "10m",
            "warning",
            "the operator's actions keep failing (see its Events and log)",
        ),
    ]


def operator_monitoring(op: OperatorSpec) -> list[Manifest]:
    if not op.monitoring:
        return []
    meta = {**_meta(op, OPERATOR_NAME), "labels": {**_labels(op), **op.monitoring_labels}}
    monitor = obj(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        meta,
        spec={
            "selector": {"matchLabels": {**OPERATOR_LABELS, keys.METRICS: "true"}},
            "namespaceSelector": {"matchNames": [op.namespace]},
            "endpoints": [{"port": "metrics", "path": "/metrics"}],
        },
    )
    rules = obj(
        "monitoring.coreos.com/v1",
        "PrometheusRule",
        {**meta, "name": naming.operator_alerts()},
        spec={"groups": [{"name": "sunk-operator", "rules": operator_alert_rules()}]},
    )
    return [monitor, rules]


def operator_manifests(op: OperatorSpec) -> list[Manifest]:
    subject = [{"kind": "ServiceAccount", "name": OPERATOR_NAME, "namespace": op.namespace}]
    container = {
        "name": "operator",
        "image": op.image.ref,
        "command": ["python", "-m", "sunk.runtime.operator"],
        # Settings of sunk.runtime.operator (runtime/operator/settings.py); it derives each
        # tenant's slurmrestd URL from the NodeSet's cluster and namespace.
        "env": [
            {"name": "SUNK_OPERATOR_NAMESPACE", "value": op.namespace},
            {"name": "SUNK_OPERATOR_LEASE", "value": OPERATOR_NAME},
            {"name": "SUNK_OPERATOR_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "SUNK_SLURM_USER", "value": naming.RUNTIME_SLURM_USER},
            {"name": "SUNK_OPERATOR_POLICY", "value": policy_json(op.policy)},
            # One port serves /metrics, /healthz and /readyz (runtime/common/health.py).
            {"name": "SUNK_METRICS_PORT", "value": str(METRICS_PORT)},
        ],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "securityContext": {**restricted(RUNTIME_UID), "readOnlyRootFilesystem": True},
        "resources": container_resources(op.resources),
        "readinessProbe": http_probe("/readyz", "metrics"),
        "livenessProbe": http_probe("/healthz", "metrics", period=20, failures=6),
    }
    selector = {"app.kubernetes.io/name": OPERATOR_LABELS["app.kubernetes.io/name"]}
    template = {
        "metadata": {"labels": _labels(op)},
        "spec": {
            "serviceAccountName": OPERATOR_NAME,
            "enableServiceLinks": False,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container],
        },
    }
    deployment = obj(
        "apps/v1",
        "Deployment",
        _annotated(op, _meta(op, OPERATOR_NAME)),
        spec={
            "replicas": op.replicas,
            "selector": {"matchLabels": selector},
            "template": apply_pod(template, op, main="operator"),
        },
    )
    return [
        nodeset_crd(_labels(op)),
        obj("v1", "ServiceAccount", _meta(op, OPERATOR_NAME), automountServiceAccountToken=True),
        obj(f"{RBAC}/v1", "ClusterRole", _meta(op, CLUSTER_ROLE, namespaced=False), rules=CLUSTER_RULES),
        obj(
            f"{RBAC}/v1",
            "ClusterRoleBinding",
            _meta(op, CLUSTER_ROLE, namespaced=False),
            roleRef={"apiGroup": RBAC, "kind": "ClusterRole", "name": CLUSTER_ROLE},
            subjects=subject,
        ),
        obj(f"{RBAC}/v1", "Role", _meta(op, naming.operator_leader_election()), rules=LEASE_RULES),
        obj(
            f"{RBAC}/v1",
            "RoleBinding",
            _meta(op, naming.operator_leader_election()),
            roleRef={"apiGroup": RBAC, "kind": "Role", "name": naming.operator_leader_election()},
            subjects=subject,
        ),
        deployment,
        obj(
            "v1",
            "Service",
            _annotated(op, {**_meta(op, OPERATOR_NAME), "labels": {**_labels(op), keys.METRICS: "true"}}),
            spec={
                "selector": selector,
                "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}],
            },
        ),
        *operator_monitoring(op),
        *([operator_network_policy(op)] if op.network.policies else []),
    ]
