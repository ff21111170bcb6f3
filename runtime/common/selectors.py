"""Kubernetes label selectors (`key`, `!key`, `=`, `==`, `!=`, `in`, `notin`): parsed once, matched
against an object's labels. Pure. Used by the informer to check what the server sent, by the
local cluster's API server and by the tests' Kubernetes API to filter lists and watches."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

_SET_TERM = re.compile(r"^([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^()]*)\)$")
_KEY = re.compile(r"^[A-Za-z0-9_./-]+$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str
    """"=", "!=", "in", "notin", "exists" or "!exists"."""
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.key)
        if self.op == "exists":
            return have is not None
        if self.op == "!exists":
            return have is None
        if self.op in ("=", "in"):
            return have is not None and have in self.values
        return have is None or have not in self.values  # != and notin match an absent key


def _terms(text: str) -> Iterator[str]:
    """Comma-separated terms; commas inside `in (a,b)` parentheses belong to the term."""
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            yield text[start:i].strip()
            start = i + 1
    yield text[start:].strip()


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """A Kubernetes label selector (`a=b,c!=d,e,!f,g in (h,i),j notin (k)`). Raises ValueError
    naming the term that is not one."""
    out: list[Requirement] = []
    for term in _terms(text):
        if not term:
            continue
        found = _SET_TERM.match(term)
        if found is not None:
            values = frozenset(v.strip() for v in found.group(3).split(",") if v.strip())
            out.append(Requirement(found.group(1), found.group(2), values))
            continue
        for op in ("!=", "==", "="):
            key, sep, value = term.partition(op)
            if sep:
                if not _KEY.match(key.strip()) or "=" in value or "!" in value:
                    raise ValueError(
                        f"label selector term {term!r} is not key=value, key!=value, key, !key or key in (...)"
                    )
                out.append(Requirement(key.strip(), "!=" if op == "!=" else "=", frozenset({value.strip()})))
                break
        else:
            negated = term.startswith("!")
            key = term[1:].strip() if negated else term
            if not _KEY.match(key):
                raise ValueError(
                    f"label selector term {term!r} is not key=value, key!=value, key, !key or key in (...)"
                )
            out.append(Requirement(key, "!exists" if negated else "exists"))
    return tuple(out)


def selector_matches(requirements: Iterable[Requirement], labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in requirements)
