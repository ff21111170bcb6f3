"""Every Slurm node's state read through `scontrol show nodes`, for a reader that holds the JWT key
(the syncer): the same `NodeState`s as `SlurmRestClient.node_states()`, thirty times cheaper.

Why not slurmrestd for this one read: slurmrestd builds its reply with Slurm's generic data
parser, every field of every node, ~2.4 KB of JSON per node; at 10,000 nodes that is 1.5 s of
slurmrestd CPU on an idle core (3.8-7.5 s wall under load, bench/RESULTS.md), so a 1 s poll can't
hold however cheap the syncer's own side is. `scontrol show nodes` asks slurmctld the same
question over Slurm's own protocol and prints text with C's printf: 10,000 nodes in ~0.05 s wall
(measured 2026-11 on this machine class, Slurm 24.11.5). scontrol authenticates with the token in
SLURM_JWT (auth/jwt, which slurm.conf's AuthAltTypes already admits for slurmrestd), so the
reader needs slurm.conf and the JWT key it already has, not the cluster's auth key. Writes stay
on slurmrestd.

The text is the multi-line form: a record per node, separated by a blank line, the first line
`NodeName=...`, then field lines indented by three spaces. A field line holds several
`Key=value` pairs, except the free-form fields Comment, Extra and Reason, which each have a line
of their own when set (Reason ends with ` [user@time]`, which slurmrestd reports apart). The
parser reads NodeName, State, Extra and Reason and refuses (NodeTextError) anything it can't
place: a line that neither starts a record nor is a field line, a record without State, or a
field twice. A value with a line break in it (only an admin can set one) is caught that way,
unless it was written to look like a field line of its own: what an admin writes into a node's
Comment can make this parser see an Extra or Reason that node doesn't have set. The syncer falls
back to slurmrestd for the cycle whenever this reader fails (runtime/syncer/slurm.py).

Where the two differ (measured 2026-11 on 24.11.5, tests/runtime/slurmrest/test_nodetext_real.py): scontrol
prints MIXED for a partly allocated node where slurmrestd reports the stored state, ALLOCATED,
so the parser reports ALLOCATED; and the flags come in another order (scontrol: DRAIN before
MAINTENANCE before RESERVED; slurmrestd: RESERVED, DRAIN, MAINTENANCE), which nothing reads
(`NodeState.flags` is a set).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from .auth import TokenProvider
from .errors import SlurmRestError
from .nodestate import NodeState
from .tokenclient import TokenClient

_RECORD = "NodeName="
_STATE = "\n   State="
_EXTRA = "\n   Extra="
_REASON = "\n   Reason="
_STRAY = re.compile(r"\n(?!   |\n|NodeName=|\Z)")
"""A line break followed by anything but a field line, a blank line or the next record."""
_STAMP = re.compile(r" \[[^\[\]@]*@[^\[\]]*\]\Z")
"""The ` [user@time]` scontrol appends to a reason it knows the time of."""
_EMPTY = ("", "No nodes in the system\n")


class NodeTextError(SlurmRestError):
    """scontrol's output is not what this parser knows how to read."""


class ScontrolError(SlurmRestError):
    """scontrol could not be run, timed out, or failed (slurmctld unreachable, token refused)."""


def _value(record: str, key: str, start: int) -> str:
    """The rest of the line after `key` at `start`."""
    begin = start + len(key)
    end = record.find("\n", begin)
    return record[begin:] if end < 0 else record[begin:end]


def parse_show_nodes(text: str) -> list[NodeState]:
    """`scontrol show nodes [--future]` (multi-line form) -> one NodeState per node, in order. Two
    phases: the whole output is checked and cut into records, then each record is read."""
    if text in _EMPTY:
        return []
    return [_parse_record(record) for record in _records(text)]


def _records(text: str) -> list[str]:
    """The output's node records (blank-line separated); a stray line or a State count that does
    not match the records is refused."""
    if not text.startswith(_RECORD):
        raise NodeTextError(f"output starts with {text[:40]!r}, not NodeName=")
    stray = _STRAY.search(text)
    if stray is not None:
        line = text.count("\n", 0, stray.start()) + 2
        raise NodeTextError(
            f"line {line} is neither a field line nor the start of a node: {_value(text, '', stray.end())[:60]!r}"
        )
    records = text.split("\n\n")
    if records[-1] == "":
        records.pop()  # after the last record
    if text.count(_STATE) != len(records):
        raise NodeTextError(f"{len(records)} nodes but {text.count(_STATE)} State lines")
    return records


def _parse_record(record: str) -> NodeState:
    """One node's record -> its name, State words, Reason (without its stamp) and Extra."""
    find = str.find
    if not record.startswith(_RECORD):
        raise NodeTextError(f"a record starts with {record[:40]!r}, not NodeName=")
    space, newline = find(record, " "), find(record, "\n")
    name = record[
        len(_RECORD) : min(space, newline) if space >= 0 and newline >= 0 else max(space, newline, len(record))
    ]
    at = find(record, _STATE)
    if at < 0 or not name:
        raise NodeTextError(f"node {name!r}: no State" if name else "a record has an empty NodeName")
    begin = at + len(_STATE)
    stop, newline = find(record, " ", begin), find(record, "\n", begin)
    if newline >= 0 and (stop < 0 or newline < stop):
        stop = newline
    state = record[begin:stop] if stop >= 0 else record[begin:]
    if not state:
        raise NodeTextError(f"node {name}: empty State")
    # Comment, Extra and Reason come after State (in that order), each at most once.
    extra_at = find(record, _EXTRA, begin)
    reason_at = find(record, _REASON, begin)
    if (extra_at >= 0 and find(record, _EXTRA, extra_at + 1) >= 0) or (
        reason_at >= 0 and find(record, _REASON, reason_at + 1) >= 0
    ):
        raise NodeTextError(f"node {name}: Extra or Reason appears twice")
    extra = _value(record, _EXTRA, extra_at) if extra_at >= 0 else ""
    reason = _STAMP.sub("", _value(record, _REASON, reason_at)) if reason_at >= 0 else ""
    words = state.split("+")
    if words[0] == "MIXED":
        words[0] = "ALLOCATED"  # what slurmrestd reports: the stored state, not scontrol's display one
    return NodeState(name, tuple(words), reason, extra)


class ScontrolNodes(TokenClient):
    """Runs `scontrol show nodes` as the token's user (TokenClient: only PATH, LANG, SLURM_CONF and
    SLURM_JWT in its environment; `reads` counts calls)."""

    error = ScontrolError

    def __init__(
        self, token: TokenProvider, conf: Path | str, *, command: Sequence[str] = ("scontrol",), timeout: float = 30.0
    ) -> None:
        super().__init__(token, conf, command=command, timeout=timeout)

    def node_states(self, *, future: bool = False) -> list[NodeState]:
        out = self._run(["show", "nodes", *(["--future"] if future else [])], "scontrol show nodes")
        return parse_show_nodes(out.decode("utf-8", "replace"))
