"""The webhook's Prometheus metrics (served by runtime/common's HealthServer)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

OUTCOMES = ("patched", "unchanged", "refused")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.reviews = Counter(
            "sunk_webhook_reviews",
            "Pod admissions answered: patched (handed to sunk's scheduler), unchanged (left to the "
            "scheduler the pod chose) or refused (a field sunk cannot turn into a Slurm request)",
            ["outcome"],
            registry=self.registry,
        )
        for outcome in OUTCOMES:
            self.reviews.labels(outcome)  # every series from the start, so a rate() has a zero to start from
