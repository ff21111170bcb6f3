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
    # rate() drops the metric name, so each component's errors are their own labelled series.
    ("Syncer errors / s by phase", f"sum by (phase) (rate(sunk_syncer_errors_total{{{_NS}}}[5m]))", "ops"),
    ("Scheduler errors / s by operation", f"sum by (op) (rate(sunk_scheduler_errors_total{{{_NS}}}[5m]))", "ops"),
]
_LEGENDS = {
    "Slurm nodes by state": "{{state}}",
    "Syncer writes / s": "{{target}} {{kind}}",
    "Syncer errors / s by phase": "{{phase}}",
    "Scheduler errors / s by operation": "{{op}}",
}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


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
                "datasource": DATASOURCE,
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"datasource": DATASOURCE, "expr": expr, "refId": "A", "legendFormat": _LEGENDS.get(title, title)}
                ],
            }
        )
    board = {
        "title": f"sunk / {spec.tenant} / {spec.name}",
        "uid": f"sunk-{spec.ns}-{spec.name}"[:40],
        "schemaVersion": 39,
        "tags": ["sunk", "slurm"],
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                # Which Prometheus: chosen in Grafana, not baked in.
                {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
                {"name": "namespace", "type": "constant", "query": spec.ns, "hide": 2},
            ],
        },
        "panels": panels,
    }
    return json.dumps(board, indent=2, sort_keys=True) + "\n"


def alert_rules(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The tenant's alerting rules (one Prometheus rule group), over the runtime's metrics in its
    namespace (the ServiceMonitor adds `namespace`). Each names the cluster and says what to look at."""
    ns = f'namespace="{spec.ns}"'
    where = f"{spec.tenant}/{spec.name}"

    def rule(name: str, expr: str, duration: str, severity: str, summary: str) -> dict[str, Any]:
        return {
            "alert": name,
            "expr": expr,
            "for": duration,
            "labels": {"severity": severity, "sunk_cluster": spec.name, "sunk_tenant": spec.tenant},
            "annotations": {"summary": f"{where}: {summary}"},
        }

    return [
        rule(
            "SunkSlurmUnreachable",
            f"time() - sunk_syncer_last_success_timestamp_seconds{{{ns}}} > 300",
            "5m",
            "critical",
            "the syncer has not read Slurm and Kubernetes for 5 minutes (slurmctld or slurmrestd down?)",
        ),
        rule(
            "SunkSlurmNodesDrainedLong",
            f'sum(sunk_syncer_slurm_nodes{{{ns}, state=~"drain|down"}}) > 0',
            "6h",
            "warning",
            "Slurm nodes have been drained or down for 6 hours (sinfo -R says why)",
        ),
        rule(
            "SunkSchedulerQueueStuck",
            f"sum(sunk_scheduler_pending_pods{{{ns}}}) > 0 and sum(increase(sunk_scheduler_binds_total{{{ns}}}[15m])) == 0",
            "15m",
            "warning",
            "pods wait for Slurm and none was bound for 15 minutes",
        ),
        rule(
            "SunkRuntimeErrors",
            f"sum(rate(sunk_syncer_errors_total{{{ns}}}[10m])) + sum(rate(sunk_scheduler_errors_total{{{ns}}}[10m])) > 0.1",
            "10m",
            "warning",
            "the syncer and scheduler fail more than one call in ten seconds",
        ),
        rule(
            "SunkSchedulerLag",
            f"time() - sunk_scheduler_last_success_timestamp_seconds{{{ns}}} > 120",
            "2m",
            "warning",
            "the scheduler has not completed a cycle for 2 minutes",
        ),
        rule(
            "SunkRuntimeDown",
            f"up{{{ns}}} == 0",
            "5m",
            "critical",
            "a runtime metrics endpoint (syncer or scheduler) does not answer",
        ),
    ]


def prometheus_rule(spec: ClusterSpec) -> Manifest:
    meta = metadata(spec, f"{spec.name}-alerts", COMPONENT, extra_labels=dict(spec.monitoring.labels))
    return obj(
        SERVICE_MONITOR_API,
        "PrometheusRule",
        meta,
        spec={"groups": [{"name": f"sunk-{spec.ns}", "rules": alert_rules(spec)}]},
    )


def dashboard(spec: ClusterSpec) -> Manifest:
    meta = metadata(spec, f"{spec.name}-dashboard", COMPONENT, extra_labels=dict(spec.monitoring.dashboard_labels))
    return obj("v1", "ConfigMap", meta, data={f"sunk-{spec.name}.json": dashboard_json(spec)})


def monitoring_manifests(spec: ClusterSpec) -> list[Manifest]:
    m = spec.monitoring
    if not m.enabled:
        return []
    return [
        *([service_monitor(spec)] if m.service_monitor else []),
        *([dashboard(spec)] if m.dashboard else []),
        *([prometheus_rule(spec)] if m.rules else []),
    ]
