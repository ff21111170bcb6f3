"""Status conditions, written one way by every controller: a condition keeps its
lastTransitionTime while its status holds, so an unchanged object writes nothing, and a patch
never clobbers conditions other writers own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .timefmt import rfc3339

Patch = dict[str, Any] | list[dict[str, Any]]
"""A merge patch (dict) or a JSON patch (list of operations)."""


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""

    def same(self, other: Condition | None) -> bool:
        """Equal apart from the transition time: no write needed."""
        return other is not None and (self.type, self.status, self.reason, self.message) == (
            other.type,
            other.status,
            other.reason,
            other.message,
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Condition:
        return cls(
            str(raw.get("type", "")),
            str(raw.get("status", "")),
            str(raw.get("reason") or ""),
            str(raw.get("message") or ""),
            str(raw.get("lastTransitionTime") or ""),
        )


def condition_index(conditions: Sequence[Condition], type_: str) -> int | None:
    return next((i for i, c in enumerate(conditions) if c.type == type_), None)


def transition(want: Condition, have: Condition | None, now: datetime) -> Condition:
    """`want` stamped: the old transition time while the status holds, else `now`."""
    since = have.last_transition_time if have is not None and have.status == want.status else ""
    return Condition(want.type, want.status, want.reason, want.message, since or rfc3339(now))


def condition_patch(condition: Condition, index: int | None, count: int) -> Patch:
    """Write one condition without clobbering the others (kubelet's, the node controller's).

    Replace guards the index with a `test` op, so a list that shifted since we read it fails the
    patch (retried next cycle) instead of overwriting someone else's condition. Appending needs no
    guard: only its owner writes this condition type. A missing list can't be appended to, so it
    is created with a merge patch."""
    value = condition.to_dict()
    if count == 0:
        return {"status": {"conditions": [value]}}
    if index is None:
        return [{"op": "add", "path": "/status/conditions/-", "value": value}]
    return [
        {"op": "test", "path": f"/status/conditions/{index}/type", "value": condition.type},
        {"op": "replace", "path": f"/status/conditions/{index}", "value": value},
    ]


def condition_removal(type_: str, index: int) -> Patch:
    """Remove one condition, guarded like a replace: if the list shifted since it was read, the
    patch fails (retried next cycle) instead of removing someone else's condition."""
    return [
        {"op": "test", "path": f"/status/conditions/{index}/type", "value": type_},
        {"op": "remove", "path": f"/status/conditions/{index}"},
    ]
