"""Prometheus metrics and the health checks served by runtime/common's HealthServer."""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Pending -> bound spans Slurm's own scheduling (sub-second) up to long queue waits.
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800, 3600)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.queue = Gauge("sunk_scheduler_pending_pods", "Pods of this scheduler not yet bound", registry=r)
        self.bind_latency = Histogram(
            "sunk_scheduler_bind_latency_seconds",
            "From first seen pending to bound",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.submits = Counter("sunk_scheduler_submits", "Placeholder jobs submitted", registry=r)
        self.placed = Counter(
            "sunk_scheduler_placeholders",
            "Placeholder jobs by kind: an allocation started at submission on a node Slurm chose (allocation) or"
            " the scheduler named (named), or a batch job that queued",
            ["kind"],
            registry=r,
        )
        self.rejects = Counter("sunk_scheduler_rejects", "Requests refused (invalid or by Slurm)", registry=r)
        self.binds = Counter("sunk_scheduler_binds", "Pods bound", registry=r)
        self.unfit = Counter(
            "sunk_scheduler_unfit", "Binds withheld: the Node Slurm chose would not admit the pod", registry=r
        )
        self.reroutes = Counter(
            "sunk_scheduler_reroutes", "Placeholder jobs replaced to avoid nodes that did not fit", registry=r
        )
        self.evictions = Counter("sunk_scheduler_evictions", "Pods evicted", ["reason"], registry=r)
        self.cancels = Counter("sunk_scheduler_cancels", "Placeholder jobs cancelled", registry=r)
        self.errors = Counter("sunk_scheduler_errors", "Failed API operations", ["op"], registry=r)
        self.action_seconds = Histogram(
            "sunk_scheduler_action_seconds", "Applying one action (API calls included)", ["action"], registry=r
        )
        self.observe_seconds = Histogram(
            "sunk_scheduler_observe_seconds", "Reading pods, slurmd pods and jobs", registry=r
        )
        self.cycle_seconds = Histogram("sunk_scheduler_cycle_seconds", "One observe-plan-apply cycle", registry=r)
        self.last_cycle = Gauge(
            "sunk_scheduler_last_success_timestamp_seconds",
            "End of the last cycle that observed everything",
            registry=r,
        )


class Health:
    """Liveness: the loop keeps cycling. Readiness: the last cycle observed Slurm and Kubernetes."""

    def __init__(self, stale_after: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._stale_after = stale_after
        self._clock = clock
        self.last_attempt: float | None = None
        self.last_success: float | None = None

    def attempted(self, ok: bool) -> None:
        self.last_attempt = self._clock()
        if ok:
            self.last_success = self.last_attempt

    def alive(self) -> tuple[bool, str]:
        if self.last_attempt is None:
            return True, "starting"
        age = self._clock() - self.last_attempt
        return age < self._stale_after, f"last cycle {age:.1f} s ago"

    def ready(self) -> tuple[bool, str]:
        if self.last_success is None:
            return False, "no cycle has observed Kubernetes and Slurm yet"
        age = self._clock() - self.last_success
        return age < self._stale_after, f"last complete observation {age:.1f} s ago"
