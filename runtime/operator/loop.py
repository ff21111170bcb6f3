"""The operator's loop: elect a leader (Lease), then resync while leading: at once when a watch
reports a change (with WatchedKube), and every `resync` seconds anyway (Slurm has no watch: drains,
jobs ending and nodes registering are seen by reading it); liveness and readiness for the probes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from .cache import WatchedKube
from .kube import KubeApi
from .leader import LeaderElector, LeaseApi
from .metrics import Metrics
from .reconcile import Reconciler
from .settings import Settings
from .slurm import SlurmClients, SlurmFactory

log = logging.getLogger("sunk.operator")

MIN_GAP = 0.1
"""Seconds between two resyncs a watch triggers at least: a burst of events (1,000 pods turning
ready) makes a few resyncs, not one per event."""

CONFIG_TTL = timedelta(seconds=60)
"""With watches, how long the keys of an existing ConfigMap are trusted before it is read again
(the tenant grants `get` on those ConfigMaps by name, not `watch`; their contents reach the pods
through the NodeSet's configHash, so only their presence and keys matter here)."""


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
        watched: WatchedKube | None = None,
    ) -> None:
        self.settings = settings
        self.watched = watched
        """Kubernetes from informers, started by run(); None: every resync lists."""
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
            topology_retry=timedelta(seconds=settings.topology_retry) if settings.topology_retry else None,
            may_act=self.elector.is_leader,
            identity=settings.identity,
            policy=settings.policy,
            source=watched,
            config_ttl=CONFIG_TTL if watched is not None else timedelta(0),
        )
        self.registry = registry or CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self._next_resync = 0.0
        self.last_resync_ok: float | None = None

    def step(self) -> bool:
        """One election tick, and a resync when leading and due. Returns whether one ran."""
        leading = self._elect()
        if not leading or self.monotonic() < self._next_resync:
            return False
        self.resync()
        return True

    def _elect(self) -> bool:
        leading = self.elector.tick()
        self.metrics.leader.set(1 if leading else 0)
        return leading

    def resync(self) -> None:
        self._next_resync = self.monotonic() + self.settings.resync
        started = time.monotonic()
        try:
            report = self.reconciler.resync()
        except Exception:
            log.exception("resync failed")
            self.metrics.errors.inc()
            return
        self.metrics.seconds.observe(time.monotonic() - started)
        self.metrics.resyncs.inc()
        self.metrics.slurm_unreadable.set(len(report.slurm_unreadable))
        for action in report.applied:
            self.metrics.actions.labels(type(action).__name__).inc()
        self.metrics.errors.inc(len(report.errors))
        self.last_resync_ok = self.monotonic()

    def run(self, stop: threading.Event) -> None:
        if self.watched is None:
            self._run_polling(stop)
            return
        watched = self.watched
        watched.start()
        # Renew well within the deadline: a third of the lease duration, as client-go's retry period.
        tick = self.settings.lease_duration / 3
        next_tick = 0.0
        try:
            while not stop.is_set():
                now = self.monotonic()
                if now >= next_tick:
                    self._elect()
                    next_tick = now + tick
                if not self.elector.is_leader() or not watched.synced:
                    # A follower acts on nothing, nor does a leader before every informer listed;
                    # leading starts with a resync.
                    watched.changed.clear()
                elif watched.changed.is_set() or now >= self._next_resync:
                    watched.changed.clear()
                    self.resync()
                    stop.wait(MIN_GAP)
                    continue
                wait = min(next_tick, self._next_resync) - self.monotonic()
                # In slices, so `stop` is noticed within half a second.
                watched.changed.wait(min(0.5, max(0.0, wait)))
        finally:
            watched.stop()
            self.elector.release()

    def _run_polling(self, stop: threading.Event) -> None:
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
