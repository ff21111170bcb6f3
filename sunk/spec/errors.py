"""pydantic's errors as sunk Problems: each names the field path, what was given and what would be
valid, in the stack's own words (never pydantic's "Input should be a valid dictionary")."""

from __future__ import annotations

import difflib
import typing
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from sunk.problem import Problem, Problems
from sunk.spec.cluster import ClusterSpec
from sunk.spec.partial import rules_despite
from sunk.strictyaml import REFUSED


class SpecError(ValueError):
    """Every problem of a spec at once. `items` are Problems: a field path and a message, and the
    stack file's line when known. Only the edge (a printer) turns them into text."""

    def __init__(self, problems: Sequence[Problem], source: str = "spec", *, notes: Sequence[str] = ()) -> None:
        self.items = list(problems)
        self.source = source
        self.notes = list(notes)
        """Sentences after the problems: checks that could not run until these are fixed."""
        lines = [f"  - {p}" for p in self.lines] + [f"  {n}" for n in self.notes]
        super().__init__(f"{source}: {len(self.items)} problem(s)\n" + "\n".join(lines))

    @property
    def problems(self) -> list[str]:
        """Each problem as `field.path: message`, without the line the stack file gave a spec
        field; the YAML reader's own problems and those of no field print whole."""
        return [str(p) if p.by_reader or p.path is None else f"{p.path or '(root)'}: {p.message}" for p in self.items]

    @property
    def lines(self) -> list[str]:
        """Each problem as printed: with `line N, ` first where the stack file's line is known."""
        return [str(p) for p in self.items]


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith("function-after[") or part in {"str", "int", "float", "bool", "[key]"}:
            continue  # pydantic's names for validators, union members and dict keys, not the user's fields
        else:
            out += ("." if out else "") + part
    return out


def _model_in(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in typing.get_args(tp):  # Annotated, Optional, unions
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _model_at(loc: tuple[int | str, ...], root: type[BaseModel] = ClusterSpec) -> type[BaseModel] | None:
    """The model that holds the field at `loc` (pydantic locations use the camelCase aliases)."""
    tp: Any = root
    for part in loc:
        model = _model_in(tp)
        if isinstance(part, str) and model is not None:
            fields = {f.alias or n: f for n, f in model.model_fields.items()}
            if part not in fields:
                return None
            tp = fields[part].annotation
        else:  # a list index or a dict key: step into the item type
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            while len(args) == 1 and typing.get_args(args[0]):  # unwrap Annotated / Optional
                args = [a for a in typing.get_args(args[0]) if a is not type(None)]
            tp = args[-1] if args else None
    return _model_in(tp)


RENAMED: dict[tuple[str, ...], tuple[str, str]] = {
    ("slurmVersion",): ("slurm.version", "2026-11-26"),
}
"""A cluster spec's fields that moved, by their old path: (the new path, since when). A stack
written for an earlier sunk learns where its value went instead of only that the field is
unknown (CHANGELOG.md lists each)."""


def _unknown(loc: tuple[int | str, ...], root: type[BaseModel] = ClusterSpec) -> str:
    moved = RENAMED.get(tuple(str(p) for p in loc)) if root is ClusterSpec else None
    if moved is not None:
        return f"renamed: it is {moved[0]} since sunk's landing of {moved[1]}; move the value there (CHANGELOG.md)"
    model = _model_at(loc[:-1], root)
    if model is None:
        return "unknown field (check spelling; fields are camelCase)"
    known = sorted(f.alias or n for n, f in model.model_fields.items())
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown field; {hint}known: {', '.join(known)}"


def _missing(loc: tuple[int | str, ...], root: type[BaseModel] = ClusterSpec) -> str:
    model = _model_at(loc[:-1], root)
    fields = {f.alias or n: f for n, f in model.model_fields.items()} if model else {}
    doc = fields[loc[-1]].description if loc[-1] in fields else None
    return f"required field is missing ({doc.splitlines()[0]})" if doc else "required field is missing"


def _upper_bound(loc: tuple[int | str, ...], root: type[BaseModel] = ClusterSpec) -> int | float | None:
    """The field's `le` (its largest valid value), if it declares one."""
    model = _model_at(loc[:-1], root)
    fields = {f.alias or n: f for n, f in model.model_fields.items()} if model else {}
    field = fields.get(str(loc[-1]))
    metadata = list(field.metadata) if field is not None else []
    for arg in typing.get_args(field.annotation) if field is not None else ():
        metadata += [m for a in typing.get_args(arg) or (arg,) for m in getattr(a, "__metadata__", ())]
        metadata += list(getattr(arg, "__metadata__", ()))
    for item in metadata:
        le = getattr(item, "le", None)
        if isinstance(le, int | float):
            return le
    return None


_KINDS = {bool: "a boolean", int: "a whole number", float: "a number with a fraction or exponent", str: "text",
          list: "a list", dict: "a mapping", type(None): "null"}  # fmt: skip


def _kind(given: Any) -> str:
    return _KINDS.get(type(given), "a value")


def _shown(given: Any) -> str:
    if isinstance(given, int) and not isinstance(given, bool) and given.bit_length() > 128:
        # repr() of an int past Python's int-string limit (4300 digits) raises ValueError.
        return f"a {given.bit_length()}-bit number"
    text = repr(given)
    return text if len(text) <= 40 else text[:37] + "..."


def _mapping_wanted(loc: tuple[int | str, ...], given: Any, root: type[BaseModel]) -> str:
    """A section (a model) given as something else: its fields, required first."""
    model = _model_at(loc, root)
    if model is None:
        return f"a mapping is required, not {_kind(given)} ({_shown(given)})"
    fields = [(f.alias or n, f.is_required()) for n, f in model.model_fields.items()]
    required = [a for a, r in fields if r]
    others = sorted(a for a, r in fields if not r)
    hint = f"; required: {', '.join(required)}" if required else ""
    return (
        f"a mapping of settings is required, not {_kind(given)} ({_shown(given)}){hint}; "
        f"{'other fields' if required else 'fields'}: {', '.join(others)}"
    )


def _list_wanted(given: Any) -> str:
    hint = (
        f"; for one item write [{given}]"
        if isinstance(given, str | int | float) and not isinstance(given, bool)
        else ""
    )
    return f"a list is required, not {_kind(given)} ({_shown(given)}){hint}"


def _literal(given: Any, expected: str) -> str:
    """One of a fixed set: say what was given, the choices, and the closest one."""
    choices = [c.strip().strip("'") for c in expected.replace(" or ", ", ").split(",")]
    close = difflib.get_close_matches(str(given), choices, n=1, cutoff=0.6) if isinstance(given, str) else []
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"{_shown(given)} is not valid; give {expected}{hint}"


_BOUNDS: dict[str, Callable[[str, dict[str, Any]], str]] = {
    "greater_than_equal": lambda given, c: f"{given} is too small; must be greater than or equal to {c['ge']}",
    "greater_than": lambda given, c: f"{given} is too small; must be greater than {c['gt']}",
    "less_than_equal": lambda given, c: f"{given} is too large; must be less than or equal to {c['le']}",
    "less_than": lambda given, c: f"{given} is too large; must be less than {c['lt']}",
    "too_short": lambda given, c: f"needs at least {c['min_length']} item(s), not {c.get('actual_length', 0)}",
    "too_long": lambda given, c: f"takes at most {c['max_length']} item(s), not {c.get('actual_length', '')}".rstrip(
        ", "
    ),
    "string_too_short": lambda given, c: f"{given} is too short; at least {c['min_length']} character(s)",
    "string_too_long": lambda given, c: f"{given} is too long; at most {c['max_length']} character(s)",
}
"""pydantic's bound checks, in the stack's words: what was given and the bound."""


LATE_HINT = (
    "a Pulumi Output, which the spec cannot hold: pass late(value) (from sunk.components import late); the "
    "spec then holds a placeholder every rule accepts and the components put the Output back"
)


def _is_output(given: Any) -> bool:
    """A Pulumi Output (or an awaitable the program computes), told apart without importing
    pulumi: the core stays free of it."""
    kind = type(given)
    return kind.__module__.startswith("pulumi") and kind.__name__ in ("Output", "Future", "Task")


def format_errors(err: ValidationError, root: type[BaseModel] = ClusterSpec) -> list[Problem]:
    """Each problem with its field path, what was given and what would be valid; `root` is the
    model that was validated (paths and known fields are read from it). Per error of pydantic's:
    a model's own rules' problems are taken as they are, a refused YAML scalar is skipped (the
    reader named it), a strict type error joins the others of its union into one problem, and
    every other kind is said in the stack's words (`_message`)."""
    problems: list[Problem] = []
    typed: dict[str, tuple[list[str], int]] = {}
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        base = _path(loc)
        kind = e["type"]
        given = e.get("input")
        raised = (e.get("ctx") or {}).get("error")
        if isinstance(raised, Problems):  # a model's rules: paths relative to the model
            problems += [p.under(base) for p in raised.problems]
            continue
        if given is REFUSED:
            continue  # the YAML reader named it, with its line
        if _is_output(given):
            problems.append(Problem(base, LATE_HINT))
            continue
        if kind in _STRICT_TYPES:
            # Strict types (no coercion): say what was given, and for numbers what would do.
            want = _STRICT_TYPES[kind]
            bound = _upper_bound(loc, root) if kind == "int_type" else None
            if bound is not None:
                want += f" up to {bound}"
            if base in typed:  # a union (count or percentage): one problem naming every choice
                wants, at = typed[base]
                wants.append(want)
                problems[at] = Problem(base, f"{' or '.join(wants)} is required, not {_kind(given)} ({_shown(given)})")
            else:
                typed[base] = ([want], len(problems))
                problems.append(Problem(base, f"{want} is required, not {_kind(given)} ({_shown(given)})"))
            continue
        problems.append(Problem(base, _message(e, loc, root)))
    return problems


_STRICT_TYPES = {"int_type": "a whole number", "float_type": "a number", "bool_type": "true or false",
                 "string_type": "text"}  # fmt: skip
"""pydantic's strict type errors -> what the field takes."""


def _message(e: Any, loc: tuple[int | str, ...], root: type[BaseModel]) -> str:
    """One pydantic error (not a strict type's) in the stack's words."""
    kind = e["type"]
    given = e.get("input")
    if kind == "extra_forbidden":
        return _unknown(loc, root)
    if kind == "missing":
        return _missing(loc, root)
    if kind == "int_parsing_size":
        # pydantic's own text ("exceeded maximum size") says nothing of what would do.
        bound = _upper_bound(loc, root)
        return "too large; a whole number" + (f" up to {bound}" if bound is not None else "")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return _mapping_wanted(loc, given, root)
    if kind == "list_type":
        return _list_wanted(given)
    if kind == "literal_error":
        return _literal(given, str((e.get("ctx") or {}).get("expected", "")))
    if kind in _BOUNDS:
        return _BOUNDS[kind](_shown(given), e.get("ctx") or {})
    msg = str(e["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if msg.startswith("Input should be "):
        msg = f"must be {msg.removeprefix('Input should be ')}, not {_shown(given)}"
    return msg.replace(" after validation", "")


def load_spec(data: Any, source: str = "spec") -> ClusterSpec:
    """Validate a plain dict into a ClusterSpec or raise SpecError listing every problem."""
    if not isinstance(data, dict):
        raise SpecError([Problem("", f"expected a mapping of cluster settings, got {type(data).__name__}")], source)
    try:
        # camelCase only: a snake_case twin of a field (`memory_mib`) is an unknown field with a
        # "did you mean memoryMib?" hint, never a second spelling that silently wins or loses.
        return ClusterSpec.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as err:
        problems, notes = every_problem(err, data)
        raise SpecError(problems, source, notes=notes) from None


def every_problem(
    err: ValidationError, data: Any, root: type[BaseModel] = ClusterSpec
) -> tuple[list[Problem], list[str]]:
    """The field problems pydantic found, then what the cross-field rules it skipped find on the
    fields that did validate; and a note counting the rules that need a field fixed first."""
    problems = format_errors(err, root)
    outcome = rules_despite(root, data, err)
    seen = {(p.path, p.message) for p in problems}
    for p in outcome.problems:
        if (p.path, p.message) not in seen:
            seen.add((p.path, p.message))
            problems.append(p)
    notes = []
    if outcome.waiting:
        fields = sorted({f for needed in outcome.waiting.values() for f in needed})
        shown = ", ".join(fields[:6]) + (f" and {len(fields) - 6} more" if len(fields) > 6 else "")
        n = len(outcome.waiting)
        notes.append(
            f"{n} more check{'s' if n > 1 else ''} could not run until {shown} "
            f"{'is' if len(fields) == 1 else 'are'} fixed; validate again after fixing {'it' if len(fields) == 1 else 'them'}"
        )
    return problems, notes
