"""A problem of a stack as data: where (the field path) and what. Checks return these; only the
edge (the CLI, the Pulumi program) turns them into text, so a path is never parsed back out of a
sentence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Problem:
    path: str | None
    """The field, camelCase as the stack spells it: `nodesets[1].gpus`; empty for the whole spec.
    A problem the YAML reader found names the file's own path from its top (`config.sunk:cluster`,
    `(top)` for the top level, `(file)` for the file as a whole). None for a problem that is no
    field's: a line of text (a control character, a YAML syntax error) or the stack itself."""
    message: str
    """What is wrong and what would be valid."""
    line: int | None = None
    """The stack file's line holding that field, when the spec was read from a file."""
    by_reader: bool = False
    """Found by the YAML reader (sunk.strictyaml) in the text itself: its line is part of what it
    says, and its path is not a spec field, so no line is looked up for it."""

    def under(self, prefix: str) -> Problem:
        """The same problem, its path taken relative to `prefix` (`login` + `service.type`)."""
        if not prefix:
            return self
        if not self.path:
            return replace(self, path=prefix)
        sep = "" if self.path.startswith("[") else "."
        return replace(self, path=f"{prefix}{sep}{self.path}")

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else ""
        if self.path is None:
            return f"{where}: {self.message}" if where else self.message
        return f"{where + ', ' if where else ''}{self.path or '(root)'}: {self.message}"


class Problems(ValueError):
    """Raised by a model's rules with every problem they found, each path relative to the model;
    pydantic keeps the exception, and sunk.spec.errors prefixes the model's own location."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))
