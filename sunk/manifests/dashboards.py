"""Grafana dashboards for one tenant's cluster: cluster, queue and nodes (from the Slurm metrics
exporter, runtime/exporter) and runtime (the syncer, scheduler and exporter themselves).

Each is plain dashboard JSON with a data source variable (which Prometheus is chosen in Grafana,
not baked in) and one legend per series. Queries name metrics the runtime exports; the
`namespace` label is the one the ServiceMonitors add, which tells tenants apart."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sunk.spec.cluster import ClusterSpec

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
UNAVAILABLE = "drained|draining|down|fail|failing|inval"
"""Node states (sunk_slurm_nodes' `state`) in which a node takes no new job."""


NAMESPACE = 'namespace="$namespace"'


def m(metric: str, **labels: str) -> str:
    """A selector of `metric` in the dashboard's namespace; a value starting with `~` matches
    as a regular expression (`state="~a|b"` gives `state=~"a|b"`)."""
    matchers = [NAMESPACE]
    for key, value in labels.items():
        op, value = ("=~", value[1:]) if value.startswith("~") else ("=", value)
        matchers.append(f'{key}{op}"{value}"')
    return metric + "{" + ", ".join(matchers) + "}"


@dataclass(frozen=True)
class Panel:
    title: str
    targets: tuple[tuple[str, str], ...]
    """(PromQL, legend) per series."""
    unit: str = "short"
    kind: str = "timeseries"
    stacked: bool = False


def _rate(metric: str, per: str = "60") -> str:
    return f"sum(rate({m(metric)}[5m])) * {per}"


RUNTIME = (
    Panel("Slurm nodes by state (syncer)", ((f"sum by (state) ({m('sunk_syncer_slurm_nodes')})", "{{state}}"),)),
    Panel(
        "Syncer cycle time (p95)",
        (
            (
                f"histogram_quantile(0.95, sum by (le) (rate({m('sunk_syncer_cycle_seconds_bucket')}[5m])))",
                "syncer p95",
            ),
        ),
        "s",
    ),
    Panel(
        "Syncer writes / s",
        ((f"sum by (target, kind) (rate({m('sunk_syncer_writes_total')}[5m]))", "{{target}} {{kind}}"),),
        "ops",
    ),
    Panel(
        "Syncer reads of every Slurm node / s (scontrol; slurmrestd when it fails)",
        ((f"sum by (via) (rate({m('sunk_syncer_slurm_reads_total')}[5m]))", "{{via}}"),),
        "ops",
    ),
    Panel("Pods waiting for Slurm", ((f"sum({m('sunk_scheduler_pending_pods')})", "pending pods"),)),
    Panel(
        "Pending -> bound latency (p95)",
        (
            (
                f"histogram_quantile(0.95, sum by (le) (rate({m('sunk_scheduler_bind_latency_seconds_bucket')}[5m])))",
                "bind p95",
            ),
        ),
        "s",
    ),
    Panel("Binds / s", ((f"sum(rate({m('sunk_scheduler_binds_total')}[5m]))", "binds"),), "ops"),
    # rate() drops the metric name, so each component's errors are their own labelled series.
    Panel(
        "Syncer errors / s by phase",
        ((f"sum by (phase) (rate({m('sunk_syncer_errors_total')}[5m]))", "{{phase}}"),),
        "ops",
    ),
    Panel(
        "Scheduler errors / s by operation",
        ((f"sum by (op) (rate({m('sunk_scheduler_errors_total')}[5m]))", "{{op}}"),),
        "ops",
    ),
    Panel(
        "Exporter: Slurm reachable",
        ((f"max({m('sunk_slurm_up')})", "slurmctld answers"),),
        kind="stat",
    ),
    Panel(
        "Exporter read time (p95) and failed reads / s",
        (
            (
                f"histogram_quantile(0.95, sum by (le) (rate({m('sunk_exporter_collect_seconds_bucket')}[5m])))",
                "read p95 (s)",
            ),
            (f"sum by (endpoint) (rate({m('sunk_exporter_errors_total')}[5m]))", "failed {{endpoint}}"),
        ),
    ),
    Panel(
        "Exporter reads of every Slurm job / s (squeue; slurmrestd when it fails)",
        ((f"sum by (via) (rate({m('sunk_exporter_job_reads_total')}[5m]))", "{{via}}"),),
        "ops",
    ),
    Panel("Metrics endpoints up", ((m("up"), "{{job}} {{pod}}"),)),
)

CLUSTER = (
    Panel("Slurm reachable", ((f"max({m('sunk_slurm_up')})", "slurmctld answers"),), kind="stat"),
    Panel(
        "CPUs allocated",
        ((f"sum({m('sunk_slurm_cpus', state='allocated')}) / sum({m('sunk_slurm_cpus_total')})", "allocated"),),
        "percentunit",
        kind="stat",
    ),
    Panel("Nodes by state", ((f"sum by (state) ({m('sunk_slurm_nodes')})", "{{state}}"),), stacked=True),
    Panel(
        "Jobs by state",
        ((f"sum by (state) ({m('sunk_slurm_jobs', state='~pending|running|suspended')})", "{{state}}"),),
    ),
    Panel(
        "CPUs",
        (
            (f"sum by (state) ({m('sunk_slurm_cpus')})", "{{state}}"),
            (f"sum({m('sunk_slurm_cpus_total')})", "total"),
        ),
    ),
    Panel(
        "GPUs",
        (
            (f"sum by (state) ({m('sunk_slurm_gpus')})", "{{state}}"),
            (f"sum({m('sunk_slurm_gpus_total')})", "total"),
        ),
    ),
    Panel(
        "Memory",
        (
            (f"sum by (state) ({m('sunk_slurm_memory_bytes')})", "{{state}}"),
            (f"sum({m('sunk_slurm_memory_bytes_total')})", "total"),
        ),
        "bytes",
    ),
    Panel(
        "Jobs / min",
        (
            (_rate("sunk_slurm_jobs_submitted_total"), "submitted"),
            (_rate("sunk_slurm_jobs_started_total"), "started"),
            (_rate("sunk_slurm_jobs_completed_total"), "completed"),
            (_rate("sunk_slurm_jobs_failed_total"), "failed"),
            (_rate("sunk_slurm_jobs_canceled_total"), "cancelled"),
        ),
    ),
    Panel(
        "slurmdbd agent queue (messages held for accounting)",
        ((f"max({m('sunk_slurm_dbd_agent_queue_size')})", "DBD agent queue"),),
    ),
    Panel("Partitions up", ((f"max by (partition) ({m('sunk_slurm_partition_up')})", "{{partition}}"),)),
)

QUEUE = (
    Panel(
        "Pending jobs by reason", ((f"sum by (reason) ({m('sunk_slurm_jobs_pending')})", "{{reason}}"),), stacked=True
    ),
    Panel("Pending jobs by partition", ((f"sum by (partition) ({m('sunk_slurm_jobs_pending')})", "{{partition}}"),)),
    Panel(
        "Running jobs by account",
        ((f"sum by (account) ({m('sunk_slurm_jobs', state='running')})", "{{account}}"),),
        stacked=True,
    ),
    Panel(
        "Pending jobs by account",
        ((f"sum by (account) ({m('sunk_slurm_jobs', state='pending')})", "{{account}}"),),
        stacked=True,
    ),
    # Inference pods run as placeholder jobs under their namespace's account (inference.namespaces),
    # so each team's share of the pool shows here beside its training jobs.
    Panel(
        "CPUs in use by account (training and inference)",
        ((f"sum by (account) ({m('sunk_slurm_job_cpus', state='running')})", "{{account}}"),),
        stacked=True,
    ),
    Panel(
        "GPUs in use by account (training and inference)",
        ((f"sum by (account) ({m('sunk_slurm_job_gpus', state='running')})", "{{account}}"),),
        stacked=True,
    ),
    Panel(
        "CPUs asked for by pending jobs, by partition",
        ((f"sum by (partition) ({m('sunk_slurm_job_cpus', state='pending')})", "{{partition}}"),),
    ),
    Panel(
        "Queue wait (median and p90) by partition",
        (
            (
                f"histogram_quantile(0.5, sum by (partition, le) ({m('sunk_slurm_pending_wait_seconds_bucket')}))",
                "{{partition}} p50",
            ),
            (
                f"histogram_quantile(0.9, sum by (partition, le) ({m('sunk_slurm_pending_wait_seconds_bucket')}))",
                "{{partition}} p90",
            ),
        ),
        "s",
    ),
    Panel(
        "Oldest eligible pending job, by partition",
        ((f"max by (partition) ({m('sunk_slurm_pending_oldest_eligible_seconds')})", "{{partition}}"),),
        "s",
    ),
    Panel(
        "Scheduler cycle (last, mean)",
        (
            (f"max({m('sunk_slurm_scheduler_cycle_last_seconds')})", "main last"),
            (f"max({m('sunk_slurm_scheduler_cycle_mean_seconds')})", "main mean"),
            (f"max({m('sunk_slurm_backfill_cycle_last_seconds')})", "backfill last"),
            (f"max({m('sunk_slurm_backfill_cycle_mean_seconds')})", "backfill mean"),
        ),
        "s",
    ),
    Panel(
        "Scheduler cycles / min",
        (
            (_rate("sunk_slurm_scheduler_cycles_total"), "main"),
            (_rate("sunk_slurm_backfill_cycles_total"), "backfill"),
        ),
    ),
    Panel(
        "Backfill: jobs started / min, depth, queue",
        (
            (_rate("sunk_slurm_backfilled_jobs_total"), "backfilled / min"),
            (f"max({m('sunk_slurm_backfill_last_depth')})", "last depth"),
            (f"max({m('sunk_slurm_backfill_queue_length')})", "queue length"),
            (f"max({m('sunk_slurm_scheduler_queue_length')})", "main queue length"),
        ),
    ),
)

NODES = (
    Panel(
        "Nodes by partition and state",
        ((f"sum by (partition, state) ({m('sunk_slurm_partition_nodes')})", "{{partition}} {{state}}"),),
    ),
    Panel(
        "Nodes taking no new jobs",
        ((f"sum by (state) ({m('sunk_slurm_nodes', state='~' + UNAVAILABLE)})", "{{state}}"),),
        stacked=True,
    ),
    Panel(
        "CPUs by partition",
        ((f"sum by (partition, state) ({m('sunk_slurm_partition_cpus')})", "{{partition}} {{state}}"),),
    ),
    Panel(
        "GPUs by partition",
        ((f"sum by (partition, state) ({m('sunk_slurm_partition_gpus')})", "{{partition}} {{state}}"),),
    ),
    Panel(
        "Memory by partition",
        ((f"sum by (partition, state) ({m('sunk_slurm_partition_memory_bytes')})", "{{partition}} {{state}}"),),
        "bytes",
    ),
    Panel(
        "CPU allocation by partition",
        (
            (
                f"sum by (partition) ({m('sunk_slurm_partition_cpus', state='allocated')})"
                f" / sum by (partition) ({m('sunk_slurm_partition_cpus')})",
                "{{partition}}",
            ),
        ),
        "percentunit",
    ),
)

BOARDS: dict[str, tuple[str, tuple[Panel, ...]]] = {
    "cluster": ("cluster", CLUSTER),
    "queue": ("queue", QUEUE),
    "nodes": ("nodes", NODES),
    "runtime": ("runtime", RUNTIME),
}
EXPORTER_BOARDS = ("cluster", "queue", "nodes")
"""Built from the exporter's metrics: shipped only where the exporter runs."""


def _panel(i: int, p: Panel) -> dict[str, Any]:
    custom: dict[str, Any] = {"stacking": {"mode": "normal" if p.stacked else "none"}} if p.kind == "timeseries" else {}
    return {
        "id": i + 1,
        "type": p.kind,
        "title": p.title,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": p.unit, "custom": custom}, "overrides": []},
        "targets": [
            {"datasource": DATASOURCE, "expr": expr, "refId": chr(ord("A") + j), "legendFormat": legend}
            for j, (expr, legend) in enumerate(p.targets)
        ],
    }


def uid(spec: ClusterSpec, board: str) -> str:
    """At most 40 characters (Grafana's limit); the runtime board keeps the uid it always had."""
    base = f"sunk-{spec.ns}-{spec.name}"
    if board == "runtime":
        return base[:40]
    return f"{base[: 39 - len(board)]}-{board}"


def dashboard_json(spec: ClusterSpec, board: str = "runtime") -> str:
    what, panels = BOARDS[board]
    doc = {
        "title": f"sunk / {spec.tenant} / {spec.name} / {what}",
        "uid": uid(spec, board),
        "schemaVersion": 39,
        "tags": ["sunk", "slurm"],
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "templating": {
            "list": [
                {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
                {"name": "namespace", "type": "constant", "query": spec.ns, "hide": 2},
            ],
        },
        "panels": [_panel(i, p) for i, p in enumerate(panels)],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def boards(spec: ClusterSpec) -> list[str]:
    """The dashboards this spec ships: the exporter's three only where it runs."""
    exporter = spec.monitoring.exporter.enabled
    return [b for b in BOARDS if exporter or b not in EXPORTER_BOARDS]


def expressions(board: str) -> list[str]:
    return [expr for p in BOARDS[board][1] for expr, _ in p.targets]
