"""Every field a user can set documents its default (or says it is required)."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from sunk.spec import ClusterSpec, Model


def _models(root: type[BaseModel]) -> list[type[BaseModel]]:
    """Every model reachable from `root` through field annotations (lists, unions, Annotated)."""
    found: list[type[BaseModel]] = []
    todo: list[object] = [root]
    while todo:
        tp = todo.pop()
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in found:
                continue
            found.append(tp)
            todo += [f.annotation for f in tp.model_fields.values()]
        else:
            todo += typing.get_args(tp)
    return sorted(found, key=lambda m: m.__name__)


MODELS = _models(ClusterSpec)
FIELDS = [(m, name) for m in MODELS for name in m.model_fields]


def test_the_walk_finds_the_nested_models() -> None:
    names = {m.__name__ for m in MODELS}
    # Reached through list[...], Optional and nested sections: the walk must see them all.
    assert {"NodeSetSpec", "GpuSpec", "Toleration", "VolumeSpec", "Sidecar", "EnvVar", "KeySource", "LdapSpec"} <= names
    assert {"SecretRef", "Image", "ResourceList", "NewClaim", "PriorityWeights", "UpdateStrategy"} <= names
    assert len(FIELDS) > 150


def _doc_problem(model: type[BaseModel], field: str) -> str | None:
    info = model.model_fields[field]
    doc = info.description or ""
    if info.is_required():
        return None if "Required" in doc else f"{model.__name__}.{field} is required; its docstring must say 'Required'"
    return None if "Default" in doc else f"{model.__name__}.{field} has a default; its docstring must state it"


@pytest.mark.parametrize(("model", "field"), FIELDS, ids=[f"{m.__name__}.{f}" for m, f in FIELDS])
def test_field_states_its_default_or_required(model: type[BaseModel], field: str) -> None:
    assert _doc_problem(model, field) is None, model.model_fields[field].description


class _Undocumented(Model):
    name: str
    """The name."""
    size: int = 3
    """How big."""
    good: int = 1
    """Default: 1."""


def test_the_check_catches_missing_defaults_and_required() -> None:
    assert _doc_problem(_Undocumented, "name") == "_Undocumented.name is required; its docstring must say 'Required'"
    assert _doc_problem(_Undocumented, "size") == "_Undocumented.size has a default; its docstring must state it"
    assert _doc_problem(_Undocumented, "good") is None
