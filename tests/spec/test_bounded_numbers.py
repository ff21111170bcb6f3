"""Every number of the spec has an upper bound: a field added without one would let a 20-digit
or a 5000-digit value through to Slurm, Kubernetes or Python's int-string limit."""

from __future__ import annotations

from typing import Any

from sunk.spec.cluster import ClusterSpec
from sunk.spec.operator import OperatorSpec

BOUNDED_ELSEWHERE = {"ClusterSpec.nodesets[].updateStrategy.maxUnavailable"}
"""Bounded by a validator (a count or a percentage), not the schema."""


def _unbounded(schema: dict[str, Any], defs: dict[str, Any], path: str, seen: set[tuple[str, str]]) -> list[str]:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if (name, path) in seen:
            return []
        seen.add((name, path))
        return _unbounded(defs[name], defs, path, seen)
    out = []
    if schema.get("type") in ("integer", "number") and not {"maximum", "exclusiveMaximum"} & set(schema):
        out.append(path)
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key, []):
            out += _unbounded(branch, defs, path, seen)
    for key, sub in (schema.get("properties") or {}).items():
        out += _unbounded(sub, defs, f"{path}.{key}", seen)
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(schema.get(key), dict):
            out += _unbounded(schema[key], defs, path + suffix, seen)
    return out


def test_every_number_in_the_spec_has_an_upper_bound() -> None:
    found = []
    for model in (ClusterSpec, OperatorSpec):
        schema = model.model_json_schema(by_alias=True)
        found += _unbounded(schema, schema.get("$defs", {}), model.__name__, set())
    assert sorted(set(found) - BOUNDED_ELSEWHERE) == []
