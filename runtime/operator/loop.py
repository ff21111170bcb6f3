"""The operator's loop: elect a leader (Lease), then resync every `resync` seconds while leading;
liveness and readiness for the probes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from .kube import KubeApi
from .leader import LeaderElector, LeaseApi
from .metrics import Metrics
from .reconcile import Reconciler
from .settings import Settings
from .slurm import SlurmClients, SlurmFactory

log = logging.getLogger("sunk.operator")


class Operator:
    """Elect, then resync every `settings.resync` seconds while leading."""

    def __init__(
        self,
        kube: KubeApi,
        leases: LeaseApi,
        settings: Settings,
        *,
        slurm_for: SlurmFactory | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.monotonic = monotonic
        self.elector = LeaderElector(
            leases,
            settings.lease_namespace,
            settings.lease_name,
            settings.identity,
            duration=settings.lease_duration,
            renew_deadline=settings.renew_deadline,
            monotonic=monotonic,
            wall=clock,
        )
        self.reconciler = Reconciler(
            kube,
            slurm_for or SlurmClients(kube, settings.slurmrestd_url, settings.slurm_user),
            clock=clock,
            topology_delay=timedelta(seconds=settings.topology_delay),
            may_act=self.elector.is_leader,
            identity=settings.identity,
            policy=settings.policy,
        )
        self.registry = registry or CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self._next_resync = 0.0
        self.last_resync_ok: float | None = None

    def step(self) -> bool:
        """One election tick, and a resync when leading and due. Returns whether one ran."""
        leading = self.elector.tick()
        self.metrics.leader.set(1 if leading else 0)
        now = self.monotonic()
        if not leading or now < self._next_resync:
            return False
        self._next_resync = now + self.settings.resync
        started = time.monotonic()
        try:
            report = self.reconciler.resync()
        except Exception:
            log.exception("resync failed")
            self.metrics.errors.inc()
            return True
        self.metrics.seconds.observe(time.monotonic() - started)
        self.metrics.resyncs.inc()
        self.metrics.slurm_unreadable.set(len(report.slurm_unreadable))
        for action in report.applied:
            self.metrics.actions.labels(type(action).__name__).inc()
        self.metrics.errors.inc(len(report.errors))
        self.last_resync_ok = self.monotonic()
        return True

    def run(self, stop: threading.Event) -> None:
        # Renew well within the deadline: a third of the lease duration, as client-go's retry period.
        tick = min(self.settings.resync, self.settings.lease_duration / 3)
        try:
            while not stop.is_set():
                self.step()
                stop.wait(tick)
        finally:
            self.elector.release()

    def alive(self) -> tuple[bool, str]:
        return True, "running"

    def ready(self) -> tuple[bool, str]:
        # A follower is ready (it stands by); a leader must have completed a resync lately.
        if not self.elector.is_leader():
            return True, "standing by"
        last = self.last_resync_ok
        if last is None or self.monotonic() - last > 3 * self.settings.resync + 30:
            return False, "leading but no successful resync lately"
        return True, "leading"
