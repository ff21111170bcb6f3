"""Turn pydantic's errors into one line per problem: `field.path: what is wrong and what is valid`."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from sunk.spec.cluster import ClusterSpec

_REL = re.compile(r"^([A-Za-z][\w.\[\]]*): (.*)$", re.S)


class SpecError(ValueError):
    """Every problem of a spec at once, each naming its field path."""

    def __init__(self, problems: list[str], source: str = "spec") -> None:
        self.problems = problems
        self.source = source
        super().__init__(f"{source}: {len(problems)} problem(s)\n" + "\n".join(f"  - {p}" for p in problems))


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith("function-after[") or part in {"str", "int", "float", "bool"}:
            continue  # pydantic's names for validators and union members, not the user's fields
        else:
            out += ("." if out else "") + part
    return out


def _join(base: str, rel: str) -> str:
    if not base:
        return rel
    return f"{base}{rel}" if rel.startswith("[") else f"{base}.{rel}"


def format_errors(err: ValidationError) -> list[str]:
    problems: list[str] = []
    for e in err.errors(include_url=False):
        base = _path(tuple(e["loc"]))
        msg = str(e["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if e["type"] == "extra_forbidden":
            problems.append(f"{base}: unknown field (check spelling; fields are camelCase)")
            continue
        if e["type"] == "missing":
            problems.append(f"{base}: required field is missing")
            continue
        for line in msg.split("\n"):
            m = _REL.match(line)
            if m and e["type"] == "value_error" and not line.startswith("'"):
                problems.append(f"{_join(base, m.group(1))}: {m.group(2)}")
            else:
                problems.append(f"{base or '(root)'}: {line}")
    return problems


def load_spec(data: Any, source: str = "spec") -> ClusterSpec:
    """Validate a plain dict into a ClusterSpec or raise SpecError listing every problem."""
    if not isinstance(data, dict):
        raise SpecError([f"(root): expected a mapping of cluster settings, got {type(data).__name__}"], source)
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(format_errors(err), source) from None
