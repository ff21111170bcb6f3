"""The exporter's Slurm side: what it reads. The shared slurmrestd client (runtime/slurmrest)
implements it as is; every REST path is the client's. `TextJobReads` puts the read of every job
on `squeue` (runtime/slurmrest/jobtext.py says why) and keeps nodes, partitions and diag on
slurmrestd."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry

from ..slurmrest.fallback import FallbackRead, SplitReads
from ..slurmrest.jobtext import JobRow
from ..slurmrest.models import Diag, Node, Partition
from .model import JobView

log = logging.getLogger(__name__)


class SlurmApi(Protocol):
    @property
    def requests(self) -> int:
        """Slurm requests made so far (a collection reports its own as the difference)."""
        ...

    def list_jobs(self) -> Sequence[JobView]: ...

    def list_nodes(self, *, future: bool = False) -> list[Node]: ...

    def list_partitions(self) -> list[Partition]: ...

    def diag(self) -> Diag: ...


class JobReader(Protocol):
    reads: int

    def jobs(self) -> list[JobRow]: ...


class TextJobReads(SplitReads):
    """A SlurmApi that reads every job through `reader` (SqueueJobs) and the rest through `rest`
    (SlurmRestClient). When the reader fails (squeue missing, slurmctld unreachable, output not
    understood), that collection's jobs are read through slurmrestd instead: one warning when it
    starts failing, one line when it works again, and `sunk_exporter_job_reads_total{via}` counts
    the reads each way (FallbackRead)."""

    rest: SlurmApi
    reader: JobReader

    def __init__(self, rest: SlurmApi, reader: JobReader, *, registry: CollectorRegistry | None = None) -> None:
        super().__init__(
            rest, reader, FallbackRead("job", "squeue", "sunk_exporter_job_reads", registry=registry, log=log)
        )

    def list_jobs(self) -> Sequence[JobView]:
        return self._read(self.reader.jobs, self.rest.list_jobs)

    def list_nodes(self, *, future: bool = False) -> list[Node]:
        return self.rest.list_nodes(future=future)

    def list_partitions(self) -> list[Partition]:
        return self.rest.list_partitions()

    def diag(self) -> Diag:
        return self.rest.diag()
