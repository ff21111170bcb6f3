"""Turn pydantic's errors into one line per problem: `field.path: what is wrong and what is valid`."""

from __future__ import annotations

import difflib
import re
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from sunk.spec.cluster import ClusterSpec

_REL = re.compile(r"^([A-Za-z][\w.\[\]-]*): (.*)$", re.S)


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
        elif part.startswith("function-after[") or part in {"str", "int", "float", "bool", "[key]"}:
            continue  # pydantic's names for validators, union members and dict keys, not the user's fields
        else:
            out += ("." if out else "") + part
    return out


def _join(base: str, rel: str) -> str:
    if not base:
        return rel
    return f"{base}{rel}" if rel.startswith("[") else f"{base}.{rel}"


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


def _unknown(loc: tuple[int | str, ...], root: type[BaseModel] = ClusterSpec) -> str:
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


def format_errors(err: ValidationError, root: type[BaseModel] = ClusterSpec) -> list[str]:
    """Each problem as `field.path: what is wrong and what would be valid`; `root` is the model
    that was validated (paths and known fields are read from it)."""
    problems: list[str] = []
    typed: dict[str, tuple[list[str], int]] = {}
    for e in err.errors(include_url=False):
        base = _path(tuple(e["loc"]))
        msg = str(e["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if e["type"] == "extra_forbidden":
            problems.append(f"{base}: {_unknown(tuple(e['loc']), root)}")
            continue
        if e["type"] == "missing":
            problems.append(f"{base}: {_missing(tuple(e['loc']), root)}")
            continue
        if e["type"] in ("int_type", "float_type", "bool_type", "string_type"):
            # Strict types (no coercion): say what was given, and for numbers what would do.
            given = e.get("input")
            kind = {bool: "a boolean", int: "a whole number", float: "a number with a fraction or exponent",
                    str: "text", list: "a list", dict: "a mapping", type(None): "null"}.get(type(given), "a value")  # fmt: skip
            want = {"int_type": "a whole number", "float_type": "a number", "bool_type": "true or false",
                    "string_type": "text"}[e["type"]]  # fmt: skip
            bound = _upper_bound(tuple(e["loc"]), root) if e["type"] == "int_type" else None
            if bound is not None:
                want += f" up to {bound}"
            shown = repr(given) if len(repr(given)) <= 40 else repr(given)[:37] + "..."
            if base in typed:  # a union (count or percentage): one line naming every choice
                wants, at = typed[base]
                wants.append(want)
                problems[at] = f"{base}: {' or '.join(wants)} is required, not {kind} ({shown})"
            else:
                typed[base] = ([want], len(problems))
                problems.append(f"{base}: {want} is required, not {kind} ({shown})")
            continue
        if e["type"] == "int_parsing_size":
            # pydantic's own text ("exceeded maximum size") says nothing of what would do.
            bound = _upper_bound(tuple(e["loc"]), root)
            problems.append(f"{base}: too large; a whole number" + (f" up to {bound}" if bound is not None else ""))
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
        # camelCase only: a snake_case twin of a field (`memory_mib`) is an unknown field with a
        # "did you mean memoryMib?" hint, never a second spelling that silently wins or loses.
        return ClusterSpec.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as err:
        raise SpecError(format_errors(err), source) from None
