"""Optional monitoring: a ServiceMonitor (Prometheus Operator) for the runtime's metrics Services
and a Grafana dashboard ConfigMap for the Grafana sidecar."""

from __future__ import annotations

import json
from typing import Any

from sunk.manifests.meta import Manifest, metadata, obj
from sunk.manifests.runtime import METRICS_LABEL
from sunk.spec.cluster import ClusterSpec

COMPONENT = "monitoring"
SERVICE_MONITOR_API = "monitoring.coreos.com/v1"

# Metric names of sunk.runtime.syncer and sunk.runtime.scheduler (prometheus_client adds
# `_total` to counters); the ServiceMonitor adds the `namespace` label that tells tenants apart.
_NS = 'namespace="$namespace"'
_PANELS: list[tuple[str, str, str]] = [
    ("Slurm nodes by state", f"sum by (state) (sunk_syncer_slurm_nodes{{{_NS}}})", "short"),
    (
        "Syncer cycle time (p95)",
        f"histogram_quantile(0.95, sum by (le) (rate(sunk_syncer_cycle_seconds_bucket{{{_NS}}}[5m])))",
        "s",
    ),
    ("Syncer writes / s", f"sum by (target, kind) (rate(sunk_syncer_writes_total{{{_NS}}}[5m]))", "ops"),
    ("Pods waiting for Slurm", f"sum(sunk_scheduler_pending_pods{{{_NS}}})", "short"),
    (
        "Pending -> bound latency (p95)",
        f"histogram_quantile(0.95, sum by (le) (rate(sunk_scheduler_bind_latency_seconds_bucket{{{_NS}}}[5m])))",
        "s",
    ),
    ("Binds and submits / s", f"sum(rate(sunk_scheduler_binds_total{{{_NS}}}[5m]))", "ops"),
    (
        "Errors / s",
        f'sum by (__name__) (rate({{__name__=~"sunk_(syncer|scheduler)_errors_total", {_NS}}}[5m]))',
        "ops",
    ),
]


def service_monitor(spec: ClusterSpec) -> Manifest:
    m = spec.monitoring
    meta = metadata(spec, f"{spec.name}-runtime", COMPONENT, extra_labels=dict(m.labels))
    return obj(
        SERVICE_MONITOR_API,
        "ServiceMonitor",
        meta,
        spec={
            "selector": {
                "matchLabels": {
                    "app.kubernetes.io/instance": spec.name,
                    METRICS_LABEL: "true",
                }
            },
            "namespaceSelector": {"matchNames": [spec.ns]},
            "endpoints": [{"port": "metrics", "path": "/metrics", "interval": m.interval}],
        },
    )


def dashboard_json(spec: ClusterSpec) -> str:
    panels: list[dict[str, Any]] = []
    for i, (title, expr, unit) in enumerate(_PANELS):
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": title,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [{"expr": expr, "refId": "A"}],
            }
        )
    board = {
        "title": f"sunk / {spec.tenant} / {spec.name}",
        "uid": f"sunk-{spec.ns}-{spec.name}"[:40],
        "schemaVersion": 39,
        "tags": ["sunk", "slurm"],
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [{"name": "namespace", "type": "constant", "query": spec.ns, "hide": 2}],
        },
        "panels": panels,
    }
    return json.dumps(board, indent=2, sort_keys=True) + "\n"


def dashboard(spec: ClusterSpec) -> Manifest:
    meta = metadata(spec, f"{spec.name}-dashboard", COMPONENT, extra_labels=dict(spec.monitoring.dashboard_labels))
    return obj("v1", "ConfigMap", meta, data={f"sunk-{spec.name}.json": dashboard_json(spec)})


def monitoring_manifests(spec: ClusterSpec) -> list[Manifest]:
    m = spec.monitoring
    if not m.enabled:
        return []
    return [*([service_monitor(spec)] if m.service_monitor else []), *([dashboard(spec)] if m.dashboard else [])]
