"""One read that goes the cheap way (a Slurm client over Slurm's protocol) while that works and
through slurmrestd when it fails: the shape the syncer's node read (runtime/syncer/slurm.py) and
the exporter's job read (runtime/exporter/slurm.py) share."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

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


class _Requests(Protocol):
    @property
    def requests(self) -> int: ...


class _Reads(Protocol):
    reads: int


class SplitReads:
    """What the syncer's TextNodeReads and the exporter's TextJobReads share: `rest` (a
    SlurmRestClient) serves everything but one big read, which `read` (a FallbackRead) sends
    through `reader` (a Slurm client command) and, when that fails, through `rest`."""

    rest: _Requests
    reader: _Reads

    def __init__(self, rest: _Requests, reader: _Reads, read: FallbackRead) -> None:
        self.rest = rest
        self.reader = reader
        self._read = read

    @property
    def failing(self) -> str:
        """Why the last read through the reader failed; empty while it works."""
        return self._read.failing

    @property
    def requests(self) -> int:
        """Slurm requests so far: slurmrestd's and the reader's runs."""
        return self.rest.requests + self.reader.reads
