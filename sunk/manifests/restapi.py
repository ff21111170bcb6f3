"""slurmrestd: a Deployment and a ClusterIP Service. Callers authenticate with JWTs signed by the
cluster's JWT key (slurmctld and slurmdbd verify them); slurmrestd itself holds no key."""

from __future__ import annotations

from sunk import keys, naming
from sunk.manifests.auth import AuthRefs
from sunk.manifests.config import client_hash, slurm_projection
from sunk.manifests.meta import (
    NOBODY_UID,
    Manifest,
    labels,
    metadata,
    obj,
    resources,
    restricted,
    selector,
    tcp_probe,
)
from sunk.manifests.pods import slurm_pod_security
from sunk.manifests.podsettings import apply_pod, apply_service, object_meta
from sunk.spec.cluster import ClusterSpec

COMPONENT = "restapi"


def url(spec: ClusterSpec) -> str:
    """What the runtime and users inside the cluster call."""
    return f"http://{naming.restapi(spec)}.{spec.ns}.svc.cluster.local:{naming.SLURMRESTD_PORT}"


def restapi_manifests(spec: ClusterSpec, refs: AuthRefs) -> list[Manifest]:
    if not spec.restapi.enabled:
        return []
    name = naming.restapi(spec)
    # Named plugins: measured 2026-11 on 24.11, the default set fails to start without slurmdbd.
    plugins = "openapi/slurmctld,openapi/slurmdbd" if spec.accounting.enabled else "openapi/slurmctld"
    container = {
        "name": "slurmrestd",
        "image": spec.images.restapi.ref,
        "command": ["slurmrestd", "-a", "rest_auth/jwt", "-s", plugins, f"0.0.0.0:{naming.SLURMRESTD_PORT}"],
        # `daemon`: slurmrestd forwards each caller's token instead of authenticating itself.
        "env": [{"name": "SLURM_JWT", "value": "daemon"}],
        "ports": [{"name": "http", "containerPort": naming.SLURMRESTD_PORT, "protocol": "TCP"}],
        # slurmrestd refuses to run as root or as SlurmUser.
        "securityContext": {**restricted(NOBODY_UID), "readOnlyRootFilesystem": True},
        "resources": resources(spec.restapi.resources),
        "readinessProbe": tcp_probe("http", period=10),
        "livenessProbe": tcp_probe("http", period=20, failures=6),
        "volumeMounts": [{"name": "slurm-config", "mountPath": naming.SLURM_ETC, "readOnly": True}],
    }
    # auth/slurm: slurmrestd signs its own RPC headers with slurm.key (read via the pod's group).
    auth_key = refs.auth if spec.auth.type == "slurm" else None
    pod = {
        "metadata": {"labels": labels(spec, COMPONENT), "annotations": {keys.CONFIG_HASH: client_hash(spec)}},
        "spec": {
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": {**slurm_pod_security(NOBODY_UID), "runAsNonRoot": True},
            "containers": [container],
            "volumes": [slurm_projection(spec, "restapi", auth_key=auth_key)],
        },
    }
    settings = spec.restapi
    pod = apply_pod(
        pod, settings, main="slurmrestd", pull_secrets=spec.images.pull_secrets, extra_args=settings.extra_args
    )
    service = obj(
        "v1",
        "Service",
        object_meta(metadata(spec, name, COMPONENT), settings),
        spec={
            "selector": selector(spec, COMPONENT),
            "ports": [{"name": "http", "port": naming.SLURMRESTD_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    )
    return [
        obj(
            "apps/v1",
            "Deployment",
            object_meta(metadata(spec, name, COMPONENT), settings),
            spec={
                "replicas": spec.restapi.replicas,
                "selector": {"matchLabels": selector(spec, COMPONENT)},
                "template": pod,
            },
        ),
        apply_service(service, settings.service),
    ]
