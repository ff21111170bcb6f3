"""The Slurm metrics exporter (runtime/exporter): its own Deployment of the runtime image, a
metrics Service and a ServiceMonitor scraping it at the interval it reads Slurm.

A Deployment of its own rather than a container beside the syncer or the scheduler: it needs no
Kubernetes API access (its ServiceAccount mounts no token), its memory follows the size of the
job queue rather than the Node count, a slow listing of a long queue never delays a sync or
scheduling cycle, and it exists only where monitoring is enabled."""

from __future__ import annotations

from sunk import naming
from sunk.manifests.auth import AuthRefs
from sunk.manifests.meta import Manifest, metadata, obj, selector
from sunk.manifests.monitoring import SERVICE_MONITOR_API
from sunk.manifests.podsettings import apply_pod, object_meta
from sunk.manifests.runtime import (
    METRICS_PORT,
    SLURM_CONF_ENV,
    mount_slurm_conf,
    runtime_container,
    runtime_env,
    runtime_pod,
)
from sunk.spec.cluster import ClusterSpec

COMPONENT = "exporter"
MODULE = "sunk.runtime.exporter"


def name(spec: ClusterSpec) -> str:
    return naming.runtime_controller(spec, COMPONENT)


def interval_seconds(spec: ClusterSpec) -> int:
    value = spec.monitoring.exporter.interval
    return int(value[:-1]) * (60 if value.endswith("m") else 1)


def service_account(spec: ClusterSpec) -> Manifest:
    return obj("v1", "ServiceAccount", metadata(spec, name(spec), COMPONENT), automountServiceAccountToken=False)


def deployment(spec: ClusterSpec, refs: AuthRefs) -> Manifest:
    env = runtime_env(spec)
    env += [
        {"name": "SUNK_COLLECT_INTERVAL", "value": str(interval_seconds(spec))},
        {"name": "SUNK_PER_USER_METRICS", "value": "true" if spec.monitoring.exporter.per_user_metrics else "false"},
        dict(SLURM_CONF_ENV),
    ]
    # A reply of every job is held in memory at once: room for a queue of ~100,000 jobs.
    limits = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}}
    container = runtime_container(spec.images.runtime.ref, MODULE, env, limits)
    # No Kubernetes API: its ServiceAccount mounts no token.
    pod = runtime_pod(spec, refs, COMPONENT, container, service_account=name(spec), token=False)
    # Every job read through squeue with a token (runtime/slurmrest/jobtext.py), not slurmrestd.
    pod = mount_slurm_conf(spec, pod)
    # The runtime's pod settings (runtime: nodeSelector, tolerations, pull secrets, pod labels...)
    # place it with the syncer and scheduler; their env and volumes are theirs (main=None).
    pod = apply_pod(pod, spec.runtime, main=None, pull_secrets=spec.images.pull_secrets)
    return obj(
        "apps/v1",
        "Deployment",
        object_meta(metadata(spec, name(spec), COMPONENT), spec.runtime),
        spec={
            "replicas": 1,
            # Stateless and read-only: a rollout may overlap two for a moment (two readers of Slurm).
            "selector": {"matchLabels": selector(spec, COMPONENT)},
            "template": pod,
        },
    )


def service(spec: ClusterSpec) -> Manifest:
    # Not labelled for the runtime's ServiceMonitor: its own one scrapes it at its read interval.
    return obj(
        "v1",
        "Service",
        metadata(spec, name(spec), COMPONENT),
        spec={
            "selector": selector(spec, COMPONENT),
            "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}],
        },
    )


def service_monitor(spec: ClusterSpec) -> Manifest:
    m = spec.monitoring
    return obj(
        SERVICE_MONITOR_API,
        "ServiceMonitor",
        metadata(spec, name(spec), COMPONENT, extra_labels=dict(m.labels)),
        spec={
            "selector": {"matchLabels": selector(spec, COMPONENT)},
            "namespaceSelector": {"matchNames": [spec.ns]},
            "endpoints": [{"port": "metrics", "path": "/metrics", "interval": m.exporter.interval}],
        },
    )


def deployed(spec: ClusterSpec) -> bool:
    return spec.monitoring.enabled and spec.monitoring.exporter.enabled


def exporter_manifests(spec: ClusterSpec, refs: AuthRefs) -> list[Manifest]:
    if not deployed(spec):
        return []
    out = [service_account(spec), deployment(spec, refs), service(spec)]
    if spec.monitoring.service_monitor:
        out.append(service_monitor(spec))
    return out
