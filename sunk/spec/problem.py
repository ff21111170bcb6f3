"""A problem of a stack as data: where (the field path) and what. Checks return these; only the
edge (the CLI, the Pulumi program) turns them into text, so a path is never parsed back out of a
sentence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    path: str
    """The field, camelCase as the stack spells it: `nodesets[1].gpus`; empty for the whole spec."""
    message: str
    """What is wrong and what would be valid."""
    line: int | None = None
    """The stack file's line holding that field, when the spec was read from a file."""

    def under(self, prefix: str) -> Problem:
        """The same problem, its path taken relative to `prefix` (`login` + `service.type`)."""
        if not prefix:
            return self
        if not self.path:
            return Problem(prefix, self.message, self.line)
        sep = "" if self.path.startswith("[") else "."
        return Problem(f"{prefix}{sep}{self.path}", self.message, self.line)

    def __str__(self) -> str:
        where = f"line {self.line}, " if self.line is not None else ""
        return f"{where}{self.path or '(root)'}: {self.message}"


class Problems(ValueError):
    """Raised by a model's rules with every problem they found, each path relative to the model;
    pydantic keeps the exception, and sunk.spec.errors prefixes the model's own location."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))
