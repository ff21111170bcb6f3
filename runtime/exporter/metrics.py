"""The exporter's own metrics, and the collector that serves the Slurm families of the last
read (runtime/common/health.py serves both on /metrics)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .collect import AnyFamily, HistogramFamily


class ExporterMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.up = Gauge(
            "sunk_slurm_up",
            "1 when the last read of slurmctld (squeue and slurmrestd) succeeded; the sunk_slurm_* families are "
            "served only then",
            registry=registry,
        )
        self.collect_seconds = Histogram(
            "sunk_exporter_collect_seconds",
            "Wall time of one read of Slurm (jobs, nodes, partitions, diag)",
            registry=registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.errors = Counter("sunk_exporter_errors", "Failed reads by endpoint", ["endpoint"], registry=registry)
        self.last_success = Gauge(
            "sunk_exporter_last_success_timestamp_seconds",
            "End of the last successful read of Slurm",
            registry=registry,
        )


class SnapshotCollector(Collector):
    """Serves the families of the last successful read; nothing while Slurm can't be read (stale
    numbers would look like a healthy, frozen cluster)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: Sequence[AnyFamily] = ()

    def set(self, families: Sequence[AnyFamily]) -> None:
        with self._lock:
            self._families = tuple(families)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            families = self._families
        for f in families:
            yield to_metric(f)


def to_metric(f: AnyFamily) -> Metric:
    if isinstance(f, HistogramFamily):
        h = GaugeHistogramMetricFamily(f.name, f.help, labels=list(f.labels))
        for values, counts, total in f.samples:
            bounds = [*(_le(b) for b in f.bounds), "+Inf"]
            h.add_metric(list(values), list(zip(bounds, (float(c) for c in counts), strict=True)), total)
        return h
    metric: GaugeMetricFamily | CounterMetricFamily
    if f.kind == "counter":
        metric = CounterMetricFamily(f.name, f.help, labels=list(f.labels))
    else:
        metric = GaugeMetricFamily(f.name, f.help, labels=list(f.labels))
    for values, value in f.samples:
        metric.add_metric(list(values), value)
    return metric


def _le(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)
