"""The syncer's Slurm side: what it needs of Slurm. The shared slurmrestd client
(runtime/slurmrest) implements it as is; every REST path is the client's. `TextNodeReads` puts
the cycle's read of every node on `scontrol show nodes` (runtime/slurmrest/nodetext.py says why)
and keeps everything else on slurmrestd."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial
from typing import Protocol

from prometheus_client import CollectorRegistry

from ..slurmrest.fallback import FallbackRead, SplitReads
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


class TextNodeReads(SplitReads):
    """A SlurmApi that reads every node through `reader` (ScontrolNodes) and does everything else
    through `rest` (SlurmRestClient). When the reader fails (scontrol missing, slurmctld
    unreachable, output not understood), that cycle's read goes through slurmrestd instead
    (FallbackRead: one warning, `sunk_syncer_slurm_reads_total{via}`)."""

    rest: SlurmApi
    reader: NodeReader

    def __init__(self, rest: SlurmApi, reader: NodeReader, *, registry: CollectorRegistry | None = None) -> None:
        super().__init__(
            rest, reader, FallbackRead("node", "scontrol", "sunk_syncer_slurm_reads", registry=registry, log=log)
        )

    def node_states(self, *, future: bool = False) -> list[NodeState]:
        return self._read(
            partial(self.reader.node_states, future=future), partial(self.rest.node_states, future=future)
        )

    def list_nodes(self, *, future: bool = False) -> list[Node]:
        return self.rest.list_nodes(future=future)

    def update_node(
        self, name: str, *, state: str | None = None, reason: str | None = None, extra: str | None = None
    ) -> None:
        self.rest.update_node(name, state=state, reason=reason, extra=extra)

    def update_nodes(self, names: Iterable[str], *, state: str | None = None, reason: str | None = None) -> None:
        self.rest.update_nodes(names, state=state, reason=reason)
