"""NodeCache: what changed in Slurm's node list since the previous cycle."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .models import Node


@dataclass(frozen=True)
class NodeDiff:
    added: list[Node] = field(default_factory=list)
    changed: list[Node] = field(default_factory=list)
    """The new versions of nodes whose declared fields differ."""
    removed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


class NodeCache:
    """Keeps the last node list by name. Node models declare only stable fields (no CPU load or
    free memory), so a node counts as changed only when something a controller acts on moved."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.primed = False

    def update(self, nodes: Iterable[Node]) -> NodeDiff:
        new = {n.name: n for n in nodes}
        old = self.nodes
        diff = NodeDiff(
            added=[n for name, n in new.items() if name not in old],
            changed=[n for name, n in new.items() if name in old and old[name] != n],
            removed=sorted(name for name in old if name not in new),
        )
        self.nodes = new
        self.primed = True
        return diff
