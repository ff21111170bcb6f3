"""The controllers a cluster has, for the local one: they turn the applied objects into pods.
One module per controller, each with what it models and what it doesn't:

- claims.py: PersistentVolumeClaims, Bound at once (the node agent makes their folders);
- statefulsets.py: ordered pods with stable names, their claims, scale-down, rolling replacement;
- deployments.py: pods per template hash, replaced on a template change;
- jobs.py: completions, parallelism, backoffLimit, ttlSecondsAfterFinished;
- scheduler.py: the default scheduler's filters, score and binding.

`Controllers` runs them in that order, on every change in the store (but Events and Lease
renewals) and at least once a `period`. Garbage collection by ownerReferences is the store's
(store.py); the node lifecycle, taint-eviction and pod GC controllers are lifecycle.py's.

Not modelled: ReplicaSets, DaemonSets, CronJobs (stored, never run), HPA, Endpoints and EndpointSlices objects (names
resolve through /etc/hosts and the cluster's DNS, see agent.py), leader election (one process).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from ..store import ApiError, Event, Store
from . import claims, deployments, jobs, scheduler, statefulsets
from .common import template_hash
from .scheduler import place, requests, score, unfit

__all__ = ["RECONCILERS", "Controllers", "place", "requests", "score", "template_hash", "unfit"]

log = logging.getLogger("sunk.local.controllers")

RECONCILERS: tuple[tuple[str, Callable[[Store], None]], ...] = (
    ("claims", claims.reconcile),
    ("statefulsets", statefulsets.reconcile),
    ("deployments", deployments.reconcile),
    ("jobs", jobs.reconcile),
    ("schedule", scheduler.reconcile),
)
"""Each controller's pass, in the order one reconcile runs them: the pods the workload controllers
make in a pass are scheduled in the same pass."""


class Controllers:
    def __init__(self, store: Store, period: float = 1.0) -> None:
        self.store = store
        self.period = period
        self._wake = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        self.store.listen(self._on_event)
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def _on_event(self, event: Event) -> None:
        # Events and the kubelets' Lease renewals (one per Node every 10 s) change nothing here.
        if event.resource not in ("v1/events", "coordination.k8s.io/v1/leases"):
            self._wake.set()

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.period)
            self._wake.clear()
            try:
                self.reconcile()
            except Exception:
                log.exception("controllers")

    def reconcile(self) -> None:
        for name, reconcile in RECONCILERS:
            try:
                reconcile(self.store)
            except ApiError as err:
                log.debug("%s: %s", name, err.message)
