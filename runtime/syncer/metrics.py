"""The syncer's Prometheus metrics (served with /healthz and /readyz by runtime/common/health.py)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class SyncerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.cycle_seconds = Histogram(
            "sunk_syncer_cycle_seconds",
            "Wall time of one sync cycle",
            registry=registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.nodes = Gauge(
            "sunk_syncer_slurm_nodes", "Slurm nodes by state, as last read", ["state"], registry=registry
        )
        self.writes = Counter("sunk_syncer_writes", "Writes by target and kind", ["target", "kind"], registry=registry)
        self.kube_reads = Counter(
            "sunk_syncer_kube_reads",
            "Kubernetes list and watch requests (after the first lists, only watch restarts and relists)",
            registry=registry,
        )
        self.errors = Counter("sunk_syncer_errors", "Failures by phase", ["phase"], registry=registry)
        self.last_success = Gauge(
            "sunk_syncer_last_success_timestamp_seconds", "End of the last fully successful cycle", registry=registry
        )
