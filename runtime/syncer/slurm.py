"""The syncer's Slurm side: what it needs of Slurm. The shared slurmrestd client
(runtime/slurmrest) implements it as is; every REST path is the client's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ..slurmrest.models import Node
from ..slurmrest.nodestate import NodeState


class SlurmApi(Protocol):
    requests: int

    def list_nodes(self, *, future: bool = False) -> list[Node]: ...

    def node_states(self, *, future: bool = False) -> list[NodeState]:
        """What a cycle reads: every node, only the fields the syncer uses (cheap at 10k)."""
        ...

    def update_node(
        self, name: str, *, state: str | None = None, reason: str | None = None, extra: str | None = None
    ) -> None: ...

    def update_nodes(self, names: Iterable[str], *, state: str | None = None, reason: str | None = None) -> None: ...
