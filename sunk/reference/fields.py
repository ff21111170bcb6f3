"""Every field of the models a stack holds, by the dotted path a stack file writes it at: YAML
key (camelCase), type, default, constraints and the field's docstring. Pure: reads only the
models' declarations."""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import PurePath
from typing import Annotated, Any, Literal, Union

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from .markdown import code


@dataclass(frozen=True)
class FieldRow:
    path: str
    type: str
    default: str
    constraints: str
    description: str


def _strip(annotation: Any) -> tuple[Any, list[Any]]:
    """The type under Annotated[...] layers, and their metadata, outermost first."""
    metadata: list[Any] = []
    while typing.get_origin(annotation) is Annotated:
        base, *extra = typing.get_args(annotation)
        metadata += extra
        annotation = base
    return annotation, metadata


def _members(annotation: Any) -> list[Any]:
    """A union's members (None left out), or the type itself."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def nullable(annotation: Any) -> bool:
    base, _ = _strip(annotation)
    return typing.get_origin(base) in (Union, types.UnionType) and type(None) in typing.get_args(base)


def type_name(annotation: Any) -> str:
    """How a stack file writes a value of this type."""
    base, _ = _strip(annotation)
    members = _members(base)
    if len(members) > 1 or members[0] is not base:
        return " or ".join(type_name(m) for m in members)
    origin = typing.get_origin(base)
    args = typing.get_args(base)
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if origin in (list, tuple, set, frozenset):
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"map of {type_name(args[0])} to {type_name(args[1])}" if args else "map"
    if base is Any:
        return "any"
    if isinstance(base, type):
        if issubclass(base, BaseModel):
            return "object"
        if issubclass(base, Enum):
            return "one of " + ", ".join(json.dumps(m.value) for m in base)
        if issubclass(base, SecretStr):
            return "secret string"
        if issubclass(base, PurePath):
            return "path"
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            base.__name__, base.__name__
        )
    return str(base)


_BOUNDS = (
    (annotated_types.Ge, "ge", "≥ {}"),
    (annotated_types.Gt, "gt", "> {}"),
    (annotated_types.Le, "le", "≤ {}"),
    (annotated_types.Lt, "lt", "< {}"),
    (annotated_types.MinLen, "min_length", "length ≥ {}"),
    (annotated_types.MaxLen, "max_length", "length ≤ {}"),
    (annotated_types.MultipleOf, "multiple_of", "a multiple of {}"),
)


def _describe(item: Any) -> list[str]:
    """What one piece of metadata demands, in words."""
    for kind, attr, text in _BOUNDS:
        if isinstance(item, kind):
            return [text.format(getattr(item, attr))]
    if isinstance(item, FieldInfo):
        return [t for m in item.metadata for t in _describe(m)]
    func = getattr(item, "func", None)
    if callable(func):
        doc = (func.__doc__ or "").strip()
        return [" ".join(doc.split("\n\n", 1)[0].split())] if doc else []
    pattern = getattr(item, "pattern", None)
    if isinstance(pattern, str):
        return [f"matches {code(pattern)}"]
    return []


def constraints(field: FieldInfo) -> str:
    """The field's own constraints, then those its type carries (`each:` for a list's items, `key:`
    and `value:` for a map's)."""
    said = [t for m in field.metadata for t in _describe(m)]
    said += _type_constraints(field.annotation, "")
    return "; ".join(dict.fromkeys(t.rstrip(".") for t in said))


def _type_constraints(annotation: Any, prefix: str) -> list[str]:
    base, metadata = _strip(annotation)
    said = [prefix + t for m in metadata for t in _describe(m)]
    for member in _members(base):
        inner, inner_meta = _strip(member)
        said += [prefix + t for m in inner_meta for t in _describe(m)]
        origin = typing.get_origin(inner)
        args = typing.get_args(inner)
        if origin in (list, tuple, set, frozenset) and args:
            said += _type_constraints(args[0], prefix + "each: ")
        elif origin is dict and args:
            said += _type_constraints(args[0], prefix + "key: ")
            said += _type_constraints(args[1], prefix + "value: ")
    return said


def default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        factory = field.default_factory
        if isinstance(factory, type):
            return _value(factory())
        return "computed (see description)"
    return _value(field.default)


def _value(value: Any) -> str:
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "its fields' defaults"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, PurePath):
        value = str(value)
    if isinstance(value, tuple | frozenset | set):
        value = list(value)
    try:
        return code(json.dumps(value, sort_keys=True))
    except TypeError:
        return code(str(value))


def models_in(annotation: Any) -> list[tuple[type[BaseModel], str]]:
    """The models a field holds, each with the path suffix its fields sit under: `` for one
    object, `[]` for a list's items, `.<name>` for a map's values."""
    base, _ = _strip(annotation)
    found: list[tuple[type[BaseModel], str]] = []
    for member in _members(base):
        inner, _ = _strip(member)
        origin = typing.get_origin(inner)
        args = typing.get_args(inner)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            found.append((inner, ""))
        elif origin in (list, tuple) and args:
            found += [(m, "[]" + s) for m, s in models_in(args[0])]
        elif origin is dict and args:
            found += [(m, ".<name>" + s) for m, s in models_in(args[1])]
    return found


def key(name: str, field: FieldInfo) -> str:
    return field.alias or name


@dataclass
class Section:
    """One model: the paths it sits at (the first names its section) and its fields."""

    model: type[BaseModel]
    paths: list[str]
    rows: list[FieldRow]
    children: list[tuple[str, type[BaseModel]]]
    """(the row's path, the model under it), for links."""

    @property
    def anchor(self) -> str:
        return anchor(self.paths[0])


def anchor(path: str) -> str:
    """An HTML id for a path: `nodesets[].gpus` -> `nodesets-gpus`; the root is `top`."""
    words = "".join(c if c.isalnum() else " " for c in path).split()
    return "-".join(w.lower() for w in words) or "top"


def sections(root: type[BaseModel]) -> list[Section]:
    """Every model under `root`, once, in the order a depth-first read of the fields meets them
    (the root first); a model met again adds its path to the first section."""
    found: dict[type[BaseModel], Section] = {}

    def visit(model: type[BaseModel], path: str) -> None:
        if model in found:
            found[model].paths.append(path)
            return
        section = found[model] = Section(model, [path], [], [])
        for name, field in model.model_fields.items():
            at = f"{path}.{key(name, field)}" if path else key(name, field)
            kind = type_name(field.annotation)
            if nullable(field.annotation) and "null" not in kind:
                kind += " or null"
            section.rows.append(FieldRow(at, kind, default(field), constraints(field), field.description or ""))
            for sub, suffix in models_in(field.annotation):
                section.children.append((at, sub))
                visit(sub, at + suffix)

    visit(root, "")
    return list(found.values())
