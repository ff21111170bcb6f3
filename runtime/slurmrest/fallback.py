"""One read that goes the cheap way (a Slurm client over Slurm's protocol) while that works and
through slurmrestd when it fails: the shape the syncer's node read (runtime/syncer/slurm.py) and
the exporter's job read (runtime/exporter/slurm.py) share."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter

from .errors import SlurmRestError

T = TypeVar("T")
U = TypeVar("U")


class FallbackRead:
    """`read(cheap, rest)`: `cheap()`, or `rest()` when it raises a SlurmRestError. One warning
    when the cheap way starts failing, one line when it works again (never one per read), and
    `<metric>_total{via}` counts the reads each way (`via` is `way` or `slurmrestd`)."""

    def __init__(
        self, what: str, way: str, metric: str, *, registry: CollectorRegistry | None, log: logging.Logger
    ) -> None:
        self.what = what
        self.way = way
        self.log = log
        self._reads = Counter(
            metric,
            f"Reads of every Slurm {what}, by the way they went: {way}, or slurmrestd when {way} failed",
            ["via"],
            registry=registry,
        )
        self.failing = ""
        """Why the last read the cheap way failed; empty while it works."""

    def __call__(self, cheap: Callable[[], T], rest: Callable[[], U]) -> T | U:
        try:
            got = cheap()
        except SlurmRestError as exc:
            if not self.failing:
                self.log.warning("reading Slurm %ss through slurmrestd while %s fails: %s", self.what, self.way, exc)
            self.failing = str(exc)
            fallback = rest()
            self._reads.labels("slurmrestd").inc()
            return fallback
        if self.failing:
            self.log.info("%s reads Slurm %ss again (it failed with: %s)", self.way, self.what, self.failing)
            self.failing = ""
        self._reads.labels(self.way).inc()
        return got
