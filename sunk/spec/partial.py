"""Every problem in one round: the cross-field rules of a spec whose fields did not all validate.

pydantic runs a model's own rules (its `model_validator(mode="after")`) only once every field
validated, so a too-long name would hide the reserved namespace, and a bad LDAP URI the missing
bindPasswordSecret. After a failed validation this module builds the model tree again from the
parts that did validate (`model_construct`), with a `Missing` stand-in for each field that did
not, and runs each rule on it. A rule that reads a stand-in stops there: it cannot run until that
field is fixed, and the caller says so and counts such rules. A rule that never touches one runs
as it would on the whole spec, so what it finds is a real problem, not a guess from a default."""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from sunk.problem import Problem, Problems

Loc = tuple[int | str, ...]


class Unavailable(Exception):
    """A rule read a field that did not validate."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(path)


class Missing:
    """Stands in for a field whose value did not validate: any use of it raises Unavailable."""

    __slots__ = ("_missing_path",)

    def __init__(self, path: str) -> None:
        object.__setattr__(self, "_missing_path", path)

    def _stop(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise Unavailable(object.__getattribute__(self, "_missing_path"))

    __getattr__ = _stop
    __iter__ = __len__ = __bool__ = __contains__ = __getitem__ = _stop
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _stop
    __str__ = __repr__ = __format__ = _stop
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = _stop
    __mod__ = __int__ = __float__ = __index__ = __neg__ = __abs__ = _stop


@dataclass
class Outcome:
    problems: list[Problem] = field(default_factory=list)
    """What the rules that could run found."""
    waiting: dict[str, set[str]] = field(default_factory=dict)
    """Rule -> the invalid fields it read before it had to stop."""


def _path(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + part
    return out


def _models(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in typing.get_args(tp):
        found = _models(arg)
        if found is not None:
            return found
    return None


def _container(tp: Any) -> tuple[str, Any] | None:
    """("list", item type) or ("dict", value type) for list[...] / dict[str, ...] (through
    Annotated and Optional); None otherwise."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _container(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if arg is not type(None):
                found = _container(arg)
                if found is not None:
                    return found
        return None
    if origin is list:
        return "list", typing.get_args(tp)[0]
    if origin is dict:
        return "dict", typing.get_args(tp)[1]
    return None


@functools.cache
def _adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    info = model.model_fields[name]
    annotated: Any = typing.Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
        return TypeAdapter(annotated)  # a model brings its own config
    return TypeAdapter(annotated, config=ConfigDict(strict=bool(model.model_config.get("strict"))))


class _Builder:
    def __init__(self, bad: set[Loc], ruled: set[Loc]) -> None:
        self.bad = bad
        self.ruled = ruled
        """Locations whose only errors are their model's own rules: the fields there are valid."""
        self.partial: list[BaseModel] = []
        """Models built with stand-ins (their rules have not run), innermost first."""

    def touched(self, loc: Loc) -> bool:
        return any(b[: len(loc)] == loc for b in self.bad)

    def model(self, model: type[BaseModel], data: Any, loc: Loc) -> Any:
        if not self.touched(loc):
            try:
                return model.model_validate(data, by_alias=True, by_name=False)
            except (ValidationError, ValueError):
                return Missing(_path(loc))
        if not isinstance(data, dict):
            return Missing(_path(loc))
        values: dict[str, Any] = {}
        for name, info in model.model_fields.items():
            alias = info.alias or name
            here = (*loc, alias)
            if alias not in data:
                if info.is_required():
                    values[name] = Missing(_path(here))
                continue
            values[name] = self.value(model, name, info.annotation, data[alias], here)
        built = model.model_construct(**values)
        self.partial.append(built)
        return built

    def value(self, model: type[BaseModel], name: str, tp: Any, data: Any, loc: Loc) -> Any:
        if not self.touched(loc):
            try:
                return _adapter(model, name).validate_python(data, by_alias=True, by_name=False)
            except Exception:  # it validated within the whole; alone, it waits rather than guess
                return Missing(_path(loc))
        if loc in self.bad and loc not in self.ruled:
            return Missing(_path(loc))
        container = _container(tp)
        if container is not None:
            kind, item = container
            sub = _models(item)
            if sub is not None and kind == "list" and isinstance(data, list):
                return [self.model(sub, x, (*loc, i)) for i, x in enumerate(data)]
            if sub is not None and kind == "dict" and isinstance(data, dict):
                return {k: self.model(sub, v, (*loc, k)) for k, v in data.items()}
            return Missing(_path(loc))
        sub = _models(tp)
        if sub is not None:
            return self.model(sub, data, loc)
        return Missing(_path(loc))


def _after_rules(obj: BaseModel) -> Iterator[tuple[str, Callable[[], list[Problem]]]]:
    """A model's rules: its RULES if it names them one by one, else each after-validator whole."""
    cls = type(obj)
    named: tuple[Callable[[Any], list[Problem]], ...] = getattr(cls, "RULES", ())
    for i, rule in enumerate(named):
        yield f"{cls.__name__} rule {i + 1}", functools.partial(rule, obj)
    if named:
        return
    for name, dec in cls.__pydantic_decorators__.model_validators.items():
        if dec.info.mode == "after":
            yield f"{cls.__name__}.{name}", functools.partial(_raised, dec.func, obj)


def _raised(func: Callable[[Any], Any], obj: BaseModel) -> list[Problem]:
    try:
        func(obj)
    except Problems as err:
        return err.problems
    except ValueError as err:
        return [Problem("", str(err))]
    return []


def _located(model: type[BaseModel], obj: BaseModel, root: BaseModel) -> str:
    """Where `obj` sits under `root`, as a field path (found by identity)."""

    def walk(value: Any, path: str) -> str | None:
        if value is obj:
            return path
        if isinstance(value, BaseModel) and not isinstance(value, Missing):
            for name, info in type(value).model_fields.items():
                found = walk(value.__dict__.get(name), f"{path}.{info.alias or name}" if path else (info.alias or name))
                if found is not None:
                    return found
        elif isinstance(value, list):
            for i, item in enumerate(value):
                found = walk(item, f"{path}[{i}]")
                if found is not None:
                    return found
        elif isinstance(value, dict):
            for key, item in value.items():
                found = walk(item, f"{path}.{key}" if path else str(key))
                if found is not None:
                    return found
        return None

    return walk(root, "") or ""


def rules_despite(model: type[BaseModel], data: Any, err: ValidationError) -> Outcome:
    """Run the rules pydantic skipped for `data` (which failed with `err`) on what did validate."""
    errors = err.errors(include_url=False)
    bad = {tuple(e["loc"]) for e in errors}
    if bad == {()}:
        return Outcome()  # only the root's own rules failed: every rule has run
    ruled = {
        loc
        for loc in bad
        if all(isinstance((e.get("ctx") or {}).get("error"), Problems) for e in errors if tuple(e["loc"]) == loc)
    }
    builder = _Builder(bad, ruled)
    root = builder.model(model, data, ())
    outcome = Outcome()
    if isinstance(root, Missing):
        return outcome
    for obj in builder.partial:
        at = _located(model, obj, root)
        for rule, run in _after_rules(obj):
            try:
                found = run()
            except Unavailable as stop:
                outcome.waiting.setdefault(f"{at}:{rule}", set()).add(stop.path)
                continue
            except Exception:  # a rule written for whole specs tripped on a partial one: it waits too
                outcome.waiting.setdefault(f"{at}:{rule}", set()).add(at or "(root)")
                continue
            outcome.problems += [p.under(at) for p in found]
    return outcome
