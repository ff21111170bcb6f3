"""The pod admission webhook of the opted-in namespaces (inference.namespaces; sunk.runtime.webhook
runs it), and the access sunk's scheduler needs there. Rendered only when namespaces are listed.

- a Deployment of two replicas of the runtime image (no JWT key, no Slurm access: it only answers
  the API server), its Service on 443, its ServiceAccount;
- a MutatingWebhookConfiguration for pod CREATE whose namespaceSelector matches
  `kubernetes.io/metadata.name In [the list]`: no other namespace's pod is ever sent to it, so the
  control plane's pods never wait for it. `failurePolicy: Fail` (FAILURE_POLICY) and a 5 s timeout
  (TIMEOUT_SECONDS). Its caBundle is not in the render: the webhook writes its CA there itself,
  allowed to get and patch that one object by name (resourceNames);
- in each listed namespace, and nowhere else, a Role with the scheduler's pod rules and its
  RoleBinding to the scheduler's ServiceAccount, and one letting the webhook get the Jobs and
  JobSets whose specs size their pods' gangs (runtime/webhook/gangs.py).
"""

from __future__ import annotations

import json

from sunk import keys, naming, roles
from sunk.manifests.meta import (
    RBAC,
    RUNTIME_UID,
    Manifest,
    bound_role,
    http_probe,
    labels,
    metadata,
    obj,
    restricted,
    selector,
)
from sunk.manifests.podsettings import apply_pod, object_meta
from sunk.manifests.runtime import POD_RULES, SCHEDULER_NAME
from sunk.spec.cluster import ClusterSpec
from sunk.spec.inference import InferenceNamespaceSpec

COMPONENT = "webhook"
MODULE = "sunk.runtime.webhook"
PORT = roles.WEBHOOK_PORT
TLS_DIR = "/etc/sunk-webhook"
PATH = "/mutate"
SERVED_KEYS = ("ca.crt", "tls.crt", "tls.key")
"""What the webhook mounts of its TLS Secret (sunk.manifests.keygen.TLS_KEYS but ca.key)."""
REPLICAS = 2
"""With failurePolicy Fail a pod of a listed namespace is only created while a replica answers:
two, spread over Nodes, so a Node drain or a rollout (maxUnavailable 0) never stops creation."""
FAILURE_POLICY = "Fail"
"""Fail, not Ignore: a pod the webhook did not see would keep default-scheduler, which the shared
Nodes' taint keeps Pending for ever (a pod's schedulerName cannot change), and its GPU request would
go to the device plugin. Refused instead, the pod is retried by its controller (ReplicaSet, Job,
JobSet, LeaderWorkerSet all retry creation with backoff) and made right once the webhook answers.
The namespaceSelector keeps every other namespace, kube-system included, out of its reach."""
TIMEOUT_SECONDS = 5
"""The webhook answers in milliseconds (no I/O per review); 5 s, half the API server's default of
10, bounds how long a create waits on a replica that hangs before failurePolicy applies."""


def webhook_name(spec: ClusterSpec) -> str:
    """The webhook's name inside its configuration: a fully qualified name, unique per cluster."""
    return f"pods.{spec.name}.{spec.ns}.{keys.DOMAIN}"


def namespaces_json(namespaces: list[InferenceNamespaceSpec]) -> str:
    """SUNK_WEBHOOK_NAMESPACES, which sunk.runtime.webhook.admission.parse_namespaces reads."""
    doc = {
        n.name: {k: v for k, v in (("account", n.account), ("partition", n.partition), ("qos", n.qos)) if v}
        for n in namespaces
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def configuration(spec: ClusterSpec) -> Manifest:
    listed = sorted(n.name for n in spec.inference.namespaces)
    return obj(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        metadata(spec, naming.cluster_scoped(spec, COMPONENT), COMPONENT, namespaced=False),
        webhooks=[
            {
                "name": webhook_name(spec),
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": FAILURE_POLICY,
                "timeoutSeconds": TIMEOUT_SECONDS,
                "matchPolicy": "Equivalent",
                # Never called again after other webhooks: what it adds (env, annotations) it
                # would take for the user's own on a second call.
                "reinvocationPolicy": "Never",
                "namespaceSelector": {
                    "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": listed}]
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "clientConfig": {
                    "service": {"namespace": spec.ns, "name": naming.webhook(spec), "path": PATH, "port": 443}
                },
            }
        ],
    )


def _access(spec: ClusterSpec) -> list[Manifest]:
    """The webhook's ServiceAccount and its one grant: its own configuration, by name."""
    n = naming.webhook(spec)
    cr = naming.cluster_scoped(spec, COMPONENT)
    return [
        obj("v1", "ServiceAccount", metadata(spec, n, COMPONENT), automountServiceAccountToken=True),
        obj(
            f"{RBAC}/v1",
            "ClusterRole",
            metadata(spec, cr, COMPONENT, namespaced=False),
            rules=[
                {
                    "apiGroups": ["admissionregistration.k8s.io"],
                    "resources": ["mutatingwebhookconfigurations"],
                    "verbs": ["get", "patch"],
                    "resourceNames": [cr],
                }
            ],
        ),
        obj(
            f"{RBAC}/v1",
            "ClusterRoleBinding",
            metadata(spec, cr, COMPONENT, namespaced=False),
            roleRef={"apiGroup": RBAC, "kind": "ClusterRole", "name": cr},
            subjects=[{"kind": "ServiceAccount", "name": n, "namespace": spec.ns}],
        ),
    ]


OWNER_RULES = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]},
    # A rule may name a CRD that is not installed; the webhook then reads a JobSet as absent.
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get"]},
    # Rendered whatever the API server's feature gates: the webhook reads a PodGroup only where
    # scheduling.k8s.io/v1alpha2 is served (its discovery), and a stack can't know the gates of a
    # cluster it doesn't run (GenericWorkload is alpha in Kubernetes 1.36).
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups"], "verbs": ["get"]},
]
"""What the webhook reads to size a gang: an indexed Job's completions, a JobSet's replicated Jobs,
a PodGroup's gang policy."""


def owner_access(spec: ClusterSpec) -> list[Manifest]:
    """The webhook's read of Jobs, JobSets and PodGroups, as a Role and its RoleBinding in each listed
    namespace only."""
    n = naming.webhook(spec)
    out = []
    for listed in sorted(spec.inference.namespaces, key=lambda x: x.name):
        meta = metadata(spec, n, COMPONENT)
        meta["namespace"] = listed.name
        out += bound_role(meta, OWNER_RULES, n, spec.ns)
    return out


def scheduler_access(spec: ClusterSpec) -> list[Manifest]:
    """The scheduler's pod rules, as a Role and its RoleBinding in each listed namespace only."""
    n = naming.cluster_scoped(spec, "scheduler")
    scheduler = naming.runtime_controller(spec, "scheduler")
    out = []
    for listed in sorted(spec.inference.namespaces, key=lambda x: x.name):
        meta = metadata(spec, n, "scheduler")
        meta["namespace"] = listed.name
        out += bound_role(meta, POD_RULES["scheduler"], scheduler, spec.ns)
    return out


def deployment(spec: ClusterSpec) -> Manifest:
    n = naming.webhook(spec)
    container: Manifest = {
        "name": COMPONENT,
        "image": spec.images.runtime.ref,
        "command": ["python", "-m", MODULE],
        "env": [
            {"name": "SUNK_WEBHOOK_NAMESPACES", "value": namespaces_json(spec.inference.namespaces)},
            {"name": "SUNK_SCHEDULER_NAME", "value": SCHEDULER_NAME},
            {"name": "SUNK_WEBHOOK_PORT", "value": str(PORT)},
            {"name": "SUNK_WEBHOOK_CONFIGURATION", "value": naming.cluster_scoped(spec, COMPONENT)},
            {"name": "SUNK_TLS_CERT_FILE", "value": f"{TLS_DIR}/tls.crt"},
            {"name": "SUNK_TLS_KEY_FILE", "value": f"{TLS_DIR}/tls.key"},
            {"name": "SUNK_TLS_CA_FILE", "value": f"{TLS_DIR}/ca.crt"},
            {"name": "SUNK_METRICS_PORT", "value": str(roles.METRICS_PORT)},
        ],
        "ports": [
            {"name": "webhook", "containerPort": PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": roles.METRICS_PORT, "protocol": "TCP"},
        ],
        "securityContext": {**restricted(RUNTIME_UID), "readOnlyRootFilesystem": True},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "readinessProbe": http_probe("/readyz", "metrics", period=5),
        "livenessProbe": http_probe("/healthz", "metrics", period=20, failures=6),
        "volumeMounts": [{"name": "sunk-webhook-tls", "mountPath": TLS_DIR, "readOnly": True}],
    }
    pod: Manifest = {
        "metadata": {"labels": labels(spec, COMPONENT)},
        "spec": {
            "serviceAccountName": n,
            "enableServiceLinks": False,
            # fsGroup: the certificate files are root's, mode 0440; the group makes them the
            # webhook user's to read (without it: Permission denied, never ready; found on the
            # local cluster).
            "securityContext": {
                "runAsNonRoot": True,
                "fsGroup": RUNTIME_UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [container],
            # Two replicas on two Nodes where there are two (a preference: one Node still serves).
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": selector(spec, COMPONENT)},
                }
            ],
            "volumes": [
                {
                    "name": "sunk-webhook-tls",
                    # Optional: until the certificate is there the pod runs, unready, and outside
                    # the Service; the API server's calls fail and failurePolicy refuses the pods.
                    # Every key but the CA's private key, which only the key generator reads.
                    "secret": {
                        "secretName": naming.webhook_tls_secret(spec),
                        "defaultMode": 0o440,
                        "optional": True,
                        "items": [{"key": k, "path": k} for k in SERVED_KEYS],
                    },
                }
            ],
        },
    }
    pod = apply_pod(pod, spec.runtime, main=None, pull_secrets=spec.images.pull_secrets)
    return obj(
        "apps/v1",
        "Deployment",
        object_meta(metadata(spec, n, COMPONENT), spec.runtime),
        spec={
            "replicas": REPLICAS,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "selector": {"matchLabels": selector(spec, COMPONENT)},
            "template": pod,
        },
    )


def service(spec: ClusterSpec) -> Manifest:
    return obj(
        "v1",
        "Service",
        metadata(spec, naming.webhook(spec), COMPONENT),
        spec={
            "selector": selector(spec, COMPONENT),
            "ports": [{"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}],
        },
    )


def webhook_manifests(spec: ClusterSpec) -> list[Manifest]:
    """Everything of the webhook part; nothing without listed namespaces."""
    if not spec.inference.namespaces:
        return []
    return [
        *_access(spec),
        *scheduler_access(spec),
        *owner_access(spec),
        deployment(spec),
        service(spec),
        configuration(spec),
    ]
