"""Optional monitoring: a ServiceMonitor (Prometheus Operator) for the runtime's metrics Services,
a PrometheusRule with the alerts, and the Grafana dashboards as ConfigMaps for the Grafana sidecar
(sunk/manifests/dashboards.py). The Slurm metrics exporter is sunk/manifests/exporter.py."""

from __future__ import annotations

from typing import Any

from sunk import keys, naming
from sunk.manifests.dashboards import boards, dashboard_json
from sunk.manifests.meta import Manifest, metadata, obj
from sunk.spec.cluster import ClusterSpec

COMPONENT = "monitoring"
SERVICE_MONITOR_API = "monitoring.coreos.com/v1"
UNAVAILABLE_LONG = "drained|down|fail"
"""The exporter's node states that alert when they last (draining nodes still run their jobs)."""
DBD_BACKLOG = 1000
"""Messages for slurmdbd: a healthy slurmdbd keeps the queue near 0; Slurm's MaxDBDMsgs, past which
records are dropped, is at least 10,000."""


def service_monitor(spec: ClusterSpec) -> Manifest:
    m = spec.monitoring
    meta = metadata(spec, naming.runtime_monitor(spec), COMPONENT, extra_labels=dict(m.labels))
    return obj(
        SERVICE_MONITOR_API,
        "ServiceMonitor",
        meta,
        spec={
            "selector": {
                "matchLabels": {
                    "app.kubernetes.io/instance": spec.name,
                    keys.METRICS: "true",
                }
            },
            "namespaceSelector": {"matchNames": [spec.ns]},
            "endpoints": [{"port": "metrics", "path": "/metrics", "interval": m.interval}],
        },
    )


def alert_rules(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The tenant's alerting rules (one Prometheus rule group), over the runtime's metrics in its
    namespace (the ServiceMonitor adds `namespace`). Each names the cluster and says what to look at."""
    ns = f'namespace="{spec.ns}"'
    where = f"{spec.tenant}/{spec.name}"
    exporter = spec.monitoring.exporter.enabled

    def rule(name: str, expr: str, duration: str, severity: str, summary: str) -> dict[str, Any]:
        return {
            "alert": name,
            "expr": expr,
            "for": duration,
            "labels": {"severity": severity, "sunk_cluster": spec.name, "sunk_tenant": spec.tenant},
            "annotations": {"summary": f"{where}: {summary}"},
        }

    rules = [
        rule(
            "SunkSlurmUnreachable",
            f"time() - sunk_syncer_last_success_timestamp_seconds{{{ns}}} > 300",
            "5m",
            "critical",
            "the syncer has not read Slurm and Kubernetes for 5 minutes (slurmctld or slurmrestd down?)",
        ),
        rule(
            "SunkSlurmNodesDrainedLong",
            # The exporter's view where it runs (sinfo's states), else the syncer's.
            f'sum(sunk_slurm_nodes{{{ns}, state=~"{UNAVAILABLE_LONG}"}}) > 0'
            if exporter
            else f'sum(sunk_syncer_slurm_nodes{{{ns}, state=~"drain|down"}}) > 0',
            "6h",
            "warning",
            "Slurm nodes have been drained or down for 6 hours (sinfo -R says why)",
        ),
        rule(
            "SunkSyncerReadsViaSlurmrestd",
            f'sum(rate(sunk_syncer_slurm_reads_total{{{ns}, via="slurmrestd"}}[10m])) > 0',
            "30m",
            "warning",
            "the syncer reads Slurm nodes through slurmrestd because scontrol fails (its log says why); "
            "at thousands of nodes each cycle then takes seconds instead of a tenth of one",
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
            "a runtime metrics endpoint (syncer, scheduler or exporter) does not answer",
        ),
    ]
    if exporter:
        rules += [
            rule(
                "SunkSlurmctldDown",
                f"sunk_slurm_up{{{ns}}} == 0",
                "3m",
                "critical",
                "slurmctld does not answer the exporter through slurmrestd for 3 minutes "
                "(scontrol ping; the exporter's log names the failing call)",
            ),
            rule(
                "SunkSlurmQueueStuck",
                f"max(sunk_slurm_pending_oldest_eligible_seconds{{{ns}}}) > 3600"
                f" and sum(increase(sunk_slurm_jobs_started_total{{{ns}}}[30m])) == 0",
                "15m",
                "warning",
                "jobs eligible to run have waited over an hour and slurmctld started none for 30 minutes "
                "(squeue -t PD -o '%i %P %r' says why)",
            ),
            rule(
                "SunkExporterReadsViaSlurmrestd",
                f'sum(rate(sunk_exporter_job_reads_total{{{ns}, via="slurmrestd"}}[10m])) > 0',
                "30m",
                "warning",
                "the exporter reads Slurm jobs through slurmrestd because squeue fails (its log says why); "
                "with thousands of jobs each read then costs slurmrestd seconds",
            ),
            rule(
                "SunkSlurmdbdBacklog",
                f"max(sunk_slurm_dbd_agent_queue_size{{{ns}}}) > {DBD_BACKLOG}",
                "10m",
                "warning",
                f"slurmctld holds over {DBD_BACKLOG} messages for slurmdbd for 10 minutes: accounting is down "
                "or slow, and past MaxDBDMsgs slurmctld drops job records (sdiag: DBD Agent queue size)",
            ),
        ]
    return rules


def prometheus_rule(spec: ClusterSpec) -> Manifest:
    meta = metadata(spec, naming.alerts(spec), COMPONENT, extra_labels=dict(spec.monitoring.labels))
    return obj(
        SERVICE_MONITOR_API,
        "PrometheusRule",
        meta,
        spec={"groups": [{"name": f"sunk-{spec.ns}", "rules": alert_rules(spec)}]},
    )


def dashboard_config_map(spec: ClusterSpec, board: str) -> Manifest:
    meta = metadata(spec, naming.dashboard(spec, board), COMPONENT, extra_labels=dict(spec.monitoring.dashboard_labels))
    return obj("v1", "ConfigMap", meta, data={f"sunk-{spec.name}-{board}.json": dashboard_json(spec, board)})


def dashboards(spec: ClusterSpec) -> dict[str, Manifest]:
    """By resource suffix (`dashboard`, `dashboard-cluster`, ...): one ConfigMap per dashboard."""
    return {("dashboard" if b == "runtime" else f"dashboard-{b}"): dashboard_config_map(spec, b) for b in boards(spec)}


def monitoring_manifests(spec: ClusterSpec) -> list[Manifest]:
    m = spec.monitoring
    if not m.enabled:
        return []
    return [
        *([service_monitor(spec)] if m.service_monitor else []),
        *(dashboards(spec).values() if m.dashboard else []),
        *([prometheus_rule(spec)] if m.rules else []),
    ]
