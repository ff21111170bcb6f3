"""NodeState: the fields of a slurmrestd node the syncer acts on, decoded straight from the
reply's bytes with msgspec.

Why msgspec: GET /slurm/v0.0.42/nodes/ answers about 2.4 KB per node (23.6 MB at 10,000
nodes), of which the syncer reads four fields. `json.loads` builds every dict, list and string
of it (~480 ms measured 2026-11 at 10,000 nodes) and pydantic then validates the declared fields
(~140 ms). orjson would build the same objects, only faster. msgspec decodes into typed Structs:
declared fields are checked in C while parsing and undeclared ones are skipped without making
Python objects, so the cost follows what is read, not what slurmrestd sends (docs/concepts/syncer.md
has the figures). Structs compare by value in C, which makes the cycle's diff cheap too."""

from __future__ import annotations

import msgspec

from .models import base_state, state_flags


class NodeState(msgspec.Struct, frozen=True, gc=False):
    """One node of GET /nodes/, as the syncer sees it (the same names and meanings as `Node`).
    Untracked by the cyclic garbage collector (`gc=False`: it holds only strings, it can't be
    part of a cycle), so 10,000 new ones a cycle don't drive collections."""

    name: str
    state: tuple[str, ...] = ()
    reason: str = ""
    extra: str = ""

    @property
    def base_state(self) -> str:
        return base_state(self.state)

    @property
    def flags(self) -> frozenset[str]:
        return state_flags(self.state)

    @property
    def drain(self) -> bool:
        return "DRAIN" in self.state


class _Error(msgspec.Struct):
    error_number: int = 0


class NodeStates(msgspec.Struct):
    """The reply: `nodes` is None when the key is missing or null (never read as "no nodes")."""

    nodes: list[NodeState] | None = None
    errors: list[_Error] = []


decode_node_states = msgspec.json.Decoder(NodeStates).decode
"""bytes -> NodeStates; raises msgspec.DecodeError / ValidationError on anything else."""
