"""The exporter's Slurm side: what it reads. The shared slurmrestd client (runtime/slurmrest)
implements it as is; every REST path is the client's."""

from __future__ import annotations

from typing import Protocol

from ..slurmrest.models import Diag, Job, Node, Partition


class SlurmApi(Protocol):
    requests: int

    def list_jobs(self) -> list[Job]: ...

    def list_nodes(self, *, future: bool = False) -> list[Node]: ...

    def list_partitions(self) -> list[Partition]: ...

    def diag(self) -> Diag: ...
