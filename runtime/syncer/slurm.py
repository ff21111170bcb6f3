"""The syncer's Slurm side: what it needs of Slurm. The shared slurmrestd client
(runtime/slurmrest) implements it as is; every REST path is the client's. `TextNodeReads` puts
the cycle's read of every node on `scontrol show nodes` (runtime/slurmrest/nodetext.py says why)
and keeps everything else on slurmrestd."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from ..slurmrest.errors import SlurmRestError
from ..slurmrest.models import Node
from ..slurmrest.nodestate import NodeState

log = logging.getLogger(__name__)


class NodeReader(Protocol):
    reads: int

    def node_states(self, *, future: bool = False) -> list[NodeState]: ...


class SlurmApi(Protocol):
    @property
    def requests(self) -> int:
        """Slurm requests made so far (a cycle reports its own as the difference)."""
        ...

    def list_nodes(self, *, future: bool = False) -> list[Node]: ...

    def node_states(self, *, future: bool = False) -> list[NodeState]:
        """What a cycle reads: every node, only the fields the syncer uses (cheap at 10k)."""
        ...

    def update_node(
        self, name: str, *, state: str | None = None, reason: str | None = None, extra: str | None = None
    ) -> None: ...

    def update_nodes(self, names: Iterable[str], *, state: str | None = None, reason: str | None = None) -> None: ...


class TextNodeReads:
    """A SlurmApi that reads every node through `reader` (ScontrolNodes) and does everything else
    through `rest` (SlurmRestClient). When the reader fails (scontrol missing, slurmctld
    unreachable, output not understood), that cycle's read goes through slurmrestd instead: one
    warning when it starts failing, one line when it works again, and
    `sunk_syncer_slurm_reads_total{via}` counts the reads each way."""

    def __init__(self, rest: SlurmApi, reader: NodeReader, *, registry: CollectorRegistry | None = None) -> None:
        self.rest = rest
        self.reader = reader
        self._reads = Counter(
            "sunk_syncer_slurm_reads",
            "Reads of every Slurm node, by the way they went: scontrol, or slurmrestd when scontrol failed",
            ["via"],
            registry=registry,
        )
        self.failing = ""
        """Why the last read through the reader failed; empty while it works."""

    @property
    def requests(self) -> int:
        return self.rest.requests + self.reader.reads

    def node_states(self, *, future: bool = False) -> list[NodeState]:
        try:
            states = self.reader.node_states(future=future)
        except SlurmRestError as exc:
            if not self.failing:
                log.warning("reading Slurm nodes through slurmrestd while scontrol fails: %s", exc)
            self.failing = str(exc)
            states = self.rest.node_states(future=future)
            self._reads.labels("slurmrestd").inc()
            return states
        if self.failing:
            log.info("scontrol reads Slurm nodes again (it failed with: %s)", self.failing)
            self.failing = ""
        self._reads.labels("scontrol").inc()
        return states

    def list_nodes(self, *, future: bool = False) -> list[Node]:
        return self.rest.list_nodes(future=future)

    def update_node(
        self, name: str, *, state: str | None = None, reason: str | None = None, extra: str | None = None
    ) -> None:
        self.rest.update_node(name, state=state, reason=reason, extra=extra)

    def update_nodes(self, names: Iterable[str], *, state: str | None = None, reason: str | None = None) -> None:
        self.rest.update_nodes(names, state=state, reason=reason)
