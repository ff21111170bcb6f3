"""The exporter's cycle: read Slurm (1), turn the replies into families (2, pure), publish them
for scrapes (3). The clock is injected."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from ..slurmrest import SlurmRestError
from .collect import AnyFamily, families
from .metrics import ExporterMetrics, SnapshotCollector
from .model import Snapshot
from .slurm import SlurmApi

log = logging.getLogger("sunk.exporter")


@dataclass
class CollectReport:
    ok: bool = False
    families: list[AnyFamily] = field(default_factory=list)
    slurm_requests: int = 0
    error: str = ""


class Exporter:
    def __init__(
        self,
        slurm: SlurmApi,
        *,
        per_user: bool = False,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.slurm = slurm
        self.per_user = per_user
        self.registry = registry or CollectorRegistry()
        self.metrics = ExporterMetrics(self.registry)
        self.snapshot = SnapshotCollector()
        self.registry.register(self.snapshot)
        self.clock = clock
        self.last_cycle_end = 0.0
        self.last_ok = False

    # 1. read ------------------------------------------------------------------------------------
    def read(self) -> Snapshot:
        """The four replies, one after another; the first failure (SlurmRestError) is raised and
        counted under its endpoint."""
        endpoint = "jobs"
        try:
            jobs = self.slurm.list_jobs()
            endpoint = "nodes"
            nodes = self.slurm.list_nodes()
            endpoint = "partitions"
            partitions = self.slurm.list_partitions()
            endpoint = "diag"
            diag = self.slurm.diag()
        except SlurmRestError:
            self.metrics.errors.labels(endpoint).inc()
            raise
        return Snapshot(jobs=tuple(jobs), nodes=tuple(nodes), partitions=tuple(partitions), diag=diag)

    # the cycle -----------------------------------------------------------------------------------
    def cycle(self) -> CollectReport:
        report = CollectReport()
        started = time.monotonic()
        before = self.slurm.requests
        try:
            snapshot = self.read()  # 1. read
        except SlurmRestError as exc:
            report.error = str(exc)
            log.warning("reading Slurm failed: %s", exc)
            self.snapshot.set(())  # no stale numbers while Slurm can't be read
            self.metrics.up.set(0)
        else:
            report.families = families(snapshot, int(self.clock()), per_user=self.per_user)  # 2. collect
            self.snapshot.set(report.families)  # 3. publish
            self.metrics.up.set(1)
            self.metrics.last_success.set(self.clock())
            report.ok = True
        report.slurm_requests = self.slurm.requests - before
        self.metrics.collect_seconds.observe(time.monotonic() - started)
        self.last_cycle_end = time.monotonic()
        self.last_ok = report.ok
        return report

    def run(self, interval: float, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.cycle()
            except Exception:  # a bug must not kill the loop silently; liveness shows a stuck loop
                log.exception("collect cycle crashed")
                self.metrics.errors.labels("crash").inc()
                self.snapshot.set(())
                self.metrics.up.set(0)
                self.last_ok = False
            stop.wait(max(0.0, interval - (time.monotonic() - started)))
