"""The operator's Prometheus metrics (served with /healthz and /readyz by runtime/common/health.py)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.resyncs = Counter("sunk_operator_resyncs", "Resyncs run", registry=registry)
        self.actions = Counter("sunk_operator_actions", "Actions applied", ["kind"], registry=registry)
        self.errors = Counter("sunk_operator_errors", "Failed actions and resyncs", registry=registry)
        self.seconds = Histogram("sunk_operator_resync_seconds", "Resync wall time", registry=registry)
        self.leader = Gauge("sunk_operator_leader", "1 while this replica leads", registry=registry)
        self.slurm_unreadable = Gauge(
            "sunk_operator_slurm_unreadable_clusters", "Clusters whose Slurm could not be read", registry=registry
        )
